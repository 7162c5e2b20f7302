//! The page of a comparison: the runs side by side, each operation's difference with its
//! interval and verdict, and the server's and the teams' figures per round.

use std::fmt::Write;

use super::{figure, page};
use crate::formats::xml::esc;
use crate::report::charts;
use crate::report::compare::{self, Comparison};

/// The comparison page.
pub fn comparison(c: &Comparison) -> String {
    let mut b = format!(
        "<h1>{}: {}</h1><p>{}</p>",
        esc(&c.workload),
        esc(&c.runs.join(" vs ")),
        esc(&c.method)
    );
    if !c.details.is_empty() {
        b.push_str("<ul class=\"runs\">");
        for d in &c.details {
            let _ = write!(b, "<li>{}</li>", esc(&d.legend()));
        }
        b.push_str("</ul>");
    }
    for w in &c.warnings {
        let _ = write!(b, "<p class=\"warn\">{}</p>", esc(w));
    }
    b.push_str(&figure("compare-throughput", charts::compare_throughput(c)));
    b.push_str(&compare_table(c));
    b.push_str(&round_table("Server", &c.server, &c.runs));
    b.push_str(&round_table("Visibility", &c.visibility, &c.runs));
    b.push_str(&round_table("Faults", &c.faults, &c.runs));
    b.push_str(&figure(
        "compare-throughput-over-time",
        charts::compare_over_time(c, false),
    ));
    b.push_str(&figure(
        "compare-p99-over-time",
        charts::compare_over_time(c, true),
    ));
    for (i, (_, svg)) in charts::compare_spectra(c).into_iter().enumerate() {
        b.push_str(&figure(&format!("compare-spectrum-{}", i + 1), svg));
    }
    page(&format!("loadmix compare: {}", c.workload), &b)
}

pub(super) fn compare_table(c: &Comparison) -> String {
    let mut b = String::from("<table><tr><th>operation</th>");
    for (i, n) in c.runs.iter().enumerate() {
        let _ = write!(b, "<th>{0} ops/s</th><th>{0} p50/p95/p99 ms</th>", esc(n));
        if i > 0 {
            let _ = write!(b, "<th>vs {}</th>", esc(&c.runs[0]));
        }
    }
    b.push_str("</tr>");
    for row in &c.rows {
        let _ = write!(b, "<tr><td>{}</td>", esc(&row.op));
        for (i, cell) in row.cells.iter().enumerate() {
            let Some(x) = cell else {
                b.push_str(if i > 0 {
                    "<td>-</td><td>-</td><td>-</td>"
                } else {
                    "<td>-</td><td>-</td>"
                });
                continue;
            };
            let rate = match x.ci95 {
                Some([lo, hi]) => {
                    crate::report::stats::with_ci(x.ops_per_sec, (hi - lo) / 2.0, " ± ")
                }
                None => format!("{:.1}", x.ops_per_sec),
            };
            let _ = write!(
                b,
                "<td>{rate}</td><td>{:.2}/{:.2}/{:.2}</td>",
                x.p50_ms, x.p95_ms, x.p99_ms
            );
            if i > 0 {
                let words = esc(&compare::verdict(x)).into_owned();
                let verdict = match x.significant {
                    Some(true) => format!("<b>{words}</b>"),
                    _ => words,
                };
                let _ = write!(
                    b,
                    "<td>{verdict}<br>latency {}</td>",
                    esc(&compare::latency_verdict(x))
                );
            }
        }
        b.push_str("</tr>");
    }
    let _ = write!(
        b,
        "</table><p class=\"note\">significance level {} (primary test: {}; the others Holm-corrected)</p>",
        compare::ALPHA,
        esc(&c.primary)
    );
    for w in &c.power {
        let _ = write!(b, "<p class=\"note\">{}</p>", esc(w));
    }
    b
}

/// Figures measured per round in each run (what the work cost the server, how long
/// the teams' writes took to reach the others), tested over rounds.
pub(super) fn round_table(title: &str, rows: &[compare::ServerRow], runs: &[String]) -> String {
    if rows.is_empty() {
        return String::new();
    }
    let mut b = format!(
        "<h2>{title}</h2><table><tr><th>measure</th><th>run</th><th>mean ± 95 % CI</th><th>vs first</th></tr>"
    );
    for row in rows {
        for (i, cell) in row.cells.iter().enumerate() {
            let what = if i == 0 {
                format!("{} ({})", esc(&row.measure), esc(&row.unit))
            } else {
                String::new()
            };
            let (value, vs) = match cell {
                Some(x) => (compare::server_value(x), compare::server_verdict(x)),
                None => ("-".into(), "-".into()),
            };
            let _ = write!(
                b,
                "<tr><td>{what}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
                esc(&runs[i]),
                esc(&value),
                esc(&vs)
            );
        }
    }
    b.push_str("</table>");
    b
}
