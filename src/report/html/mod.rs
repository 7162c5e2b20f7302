//! Self-contained HTML pages: one file, inline CSS and inline SVG charts, no script, no font,
//! no request leaving the file. A run's page (`report.html`), a comparison page and a
//! sweep page. Every chart sits in a `<figure data-chart="...">` so a browser test can
//! check that each one is there.

mod compared;
mod run;
mod sweep;
mod tables;

pub use compared::comparison;
pub use run::report;
pub(crate) use sweep::capacity;
pub use sweep::{SweepModels, sweep};

use crate::formats::xml::esc;
use crate::report::model::OpReport;

const STYLE: &str = r#"
body{font-family:system-ui,-apple-system,"Segoe UI",sans-serif;margin:24px auto;max-width:1000px;color:#222;padding:0 12px}
h1{font-size:1.5em;margin-bottom:4px}h2{font-size:1.15em;margin-top:28px;border-bottom:1px solid #ddd;padding-bottom:4px}
table{border-collapse:collapse;font-size:13px;margin:8px 0}td,th{border:1px solid #ddd;padding:3px 7px;text-align:right}
td:first-child,th:first-child{text-align:left}th{background:#f4f4f4}.meta td{text-align:left}
figure{margin:12px 0}figure svg{max-width:100%;height:auto;border:1px solid #eee}
.pass{color:#176317;font-weight:600}.fail{color:#a11;font-weight:600}.note{color:#666;font-style:italic}
.warn{background:#fff4e0;border:1px solid #e0b060;padding:8px}pre{background:#f7f7f7;padding:8px;overflow:auto;font-size:12px}
"#;

fn page(title: &str, body: &str) -> String {
    format!(
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><meta name=\"viewport\" content=\"width=device-width, initial-scale=1\"><title>{}</title><style>{STYLE}</style></head><body>{body}</body></html>\n",
        esc(title)
    )
}

fn figure(kind: &str, svg: String) -> String {
    format!("<figure data-chart=\"{kind}\">{svg}</figure>")
}

fn ms(o: &OpReport, v: f64) -> String {
    if o.successes == 0 {
        "-".into()
    } else {
        format!("{v:.2}")
    }
}

fn rate(o: &OpReport) -> String {
    match o
        .across_rounds
        .as_ref()
        .and_then(|a| a.ops_per_sec_ci95.map(|c| (a.ops_per_sec_mean, c)))
    {
        Some((m, [lo, hi])) if o.across_rounds.as_ref().is_some_and(|a| a.rounds > 1) => {
            crate::report::stats::with_ci(m, (hi - lo) / 2.0, " ± ")
        }
        _ => format!("{:.1}", o.ops_per_sec),
    }
}
