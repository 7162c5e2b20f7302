//! Self-contained HTML pages: one file, inline CSS and inline SVG charts, no script, no font,
//! no request leaving the file. A run's page (`report.html`), a comparison page and a
//! sweep page. Every chart sits in a `<figure data-chart="...">` so a browser test can
//! check that each one is there.

use std::fmt::Write;

use super::charts;
use super::compare::{self, Comparison};
use super::model::{OpReport, Report};
use crate::formats::xml::esc;

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
            super::stats::with_ci(m, (hi - lo) / 2.0, " ± ")
        }
        _ => format!("{:.1}", o.ops_per_sec),
    }
}

/// The page of one run.
pub fn report(r: &Report) -> String {
    let w = &r.workload;
    let mut b = String::new();
    run_heading(&mut b, r);
    summary_table(&mut b, r);
    messages_table(&mut b, r);
    corrected_table(&mut b, r);
    thresholds_table(&mut b, r);
    charts_section(&mut b, r);
    rounds_table(&mut b, r);
    sessions_table(&mut b, r);
    visibility_table(&mut b, r);
    answers_and_failures(&mut b, r);
    let _ = write!(
        b,
        "<h2>Workload</h2><details><summary>{}</summary><pre>{}</pre></details>",
        esc(&w.file),
        esc(&w.source)
    );
    page(&format!("loadmix: {} on {}", w.name, r.target), &b)
}

/// The title, what was run against what and how, warnings, the server's side.
fn run_heading(b: &mut String, r: &Report) {
    let w = &r.workload;
    let _ = write!(b, "<h1>{}: {}</h1>", esc(&w.name), esc(&r.target));
    if let Some(d) = &w.description {
        let _ = write!(b, "<p>{}</p>", esc(d));
    }
    if r.interrupted {
        b.push_str("<p class=\"warn\">This run was interrupted: the figures cover what ran.</p>");
    }
    let length = match (w.run.duration_s, w.run.iterations) {
        (Some(d), _) => format!("{d} s per round"),
        (None, Some(n)) => format!("{n} operations per user"),
        _ => String::new(),
    };
    let classes: Vec<String> = w
        .classes
        .iter()
        .map(|c| {
            format!(
                "{} ({}) ×{}, think {}, {}",
                c.name, c.protocol, c.count, c.think, c.connection
            )
        })
        .collect();
    b.push_str("<table class=\"meta\">");
    for (k, v) in [
        ("run", r.run_id.clone()),
        (
            "started / finished",
            format!("{} / {}", r.started_at, r.finished_at),
        ),
        ("target", r.target.clone()),
        (
            "workload",
            format!("{} ({}), hash {}", w.name, w.file, w.hash),
        ),
        (
            "rounds",
            format!(
                "{} × {length}, warm-up {} s, measured {:.1} s in all",
                r.summary.rounds, w.run.warmup_s, r.summary.measured_s
            ),
        ),
        ("users", classes.join("; ")),
        ("seed", r.seed.to_string()),
        (
            "overrides",
            if w.overrides.is_empty() {
                "none".into()
            } else {
                w.overrides.join(" ")
            },
        ),
        ("tool", format!("{} {}", r.tool.name, r.tool.version)),
        (
            "host",
            format!(
                "{} ({} {}, {} CPUs)",
                r.host.hostname, r.host.os, r.host.arch, r.host.cpus
            ),
        ),
        ("generator", generator_text(r)),
    ] {
        let _ = write!(b, "<tr><td>{k}</td><td>{}</td></tr>", esc(&v));
    }
    b.push_str("</table>");
    for w in &r.summary.generator_warnings {
        let _ = write!(b, "<p class=\"warn\">{}</p>", esc(w));
    }
    for w in super::model::mix::warnings(&r.summary.mix) {
        let _ = write!(b, "<p class=\"warn\">{}</p>", esc(&w));
    }
    if let Some(d) = &r.summary.drift {
        let _ = write!(b, "<p class=\"warn\">drift: {}</p>", esc(&d.message));
    }
    let server = super::figures::server_lines(&r.summary);
    if !server.is_empty() {
        b.push_str("<h2>Server</h2>");
        for line in &server {
            let class = if line.starts_with("WARNING") {
                "warn"
            } else {
                "server"
            };
            let _ = write!(b, "<p class=\"{class}\">{}</p>", esc(line));
        }
    }
}

/// One row per operation and the total, as the console's table.
fn summary_table(b: &mut String, r: &Report) {
    b.push_str("<h2>Summary</h2><table><tr><th>operation</th><th>requests</th><th>ok</th><th>failed</th><th>ops/s (95% CI)</th><th>mean ms</th><th>p50</th><th>p90</th><th>p95</th><th>p99</th><th>p99.9</th><th>max</th><th>sent B</th><th>received B</th></tr>");
    for o in r.summary.ops.iter().chain(r.summary.sums()) {
        let l = &o.latency_ms;
        let _ = write!(
            b,
            "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
            esc(&o.op),
            o.requests,
            o.successes,
            o.failures,
            rate(o),
            ms(o, l.mean),
            ms(o, l.p50),
            ms(o, l.p90),
            ms(o, l.p95),
            ms(o, l.p99),
            ms(o, l.p999),
            ms(o, l.max),
            o.bytes_sent,
            o.bytes_received
        );
    }
    let _ = write!(
        b,
        "</table><p>success ratio {:.4}; latencies in ms, successful operations only</p>",
        r.summary.success_ratio
    );
}

/// A broker's operations in messages per second and per minute, and MiB per second.
fn messages_table(b: &mut String, r: &Report) {
    let rows = super::figures::message_rates(r);
    if rows.is_empty() {
        return;
    }
    b.push_str("<h3>Messages</h3><table><tr><th>operation</th><th>msg/s</th><th>msg/min</th><th>MiB/s</th></tr>");
    for m in rows {
        let _ = write!(
            b,
            "<tr><td>{}</td><td>{:.1}</td><td>{:.0}</td><td>{:.2}</td></tr>",
            esc(m.op),
            m.per_sec,
            m.per_min,
            m.mib_per_sec
        );
    }
    b.push_str("</table>");
    for bl in super::figures::backlogs(r) {
        let _ = write!(b, "<p>{}</p>", esc(&super::figures::backlog_words(&bl)));
    }
    if let Some(l) = &r.ledger {
        ledger_table(b, l);
    }
}

/// Classes with behaviours: per behaviour, its sessions as the console table has them,
/// and a bar of its share of sessions beside its weight.
fn sessions_table(b: &mut String, r: &Report) {
    let all = super::model::sessions::sum(r.rounds.iter().map(|x| &x.sessions[..]));
    for c in &all {
        let started: u64 = c.behaviours.iter().map(|x| x.started).sum();
        let _ = write!(
            b,
            "<h3>Sessions of {} ({started} started)</h3><table><tr>",
            esc(&c.class)
        );
        for h in super::figures::SESSION_COLUMNS {
            let _ = write!(b, "<th>{}</th>", esc(h));
        }
        b.push_str("<th>share against weight</th></tr>");
        for (row, x) in super::figures::session_rows(c).iter().zip(&c.behaviours) {
            b.push_str("<tr>");
            for cell in row {
                let _ = write!(b, "<td>{}</td>", esc(cell));
            }
            let share = if started == 0 {
                0.0
            } else {
                x.started as f64 / started as f64
            };
            let _ = write!(
                b,
                "<td><svg width=\"120\" height=\"14\" role=\"img\" aria-label=\"share {:.1}%, weight {:.1}%\">\
                 <rect width=\"{:.1}\" height=\"8\" fill=\"#4878a8\"/>\
                 <rect y=\"9\" width=\"{:.1}\" height=\"4\" fill=\"#999\"/></svg></td></tr>",
                share * 100.0,
                x.weight_share * 100.0,
                (share * 120.0).clamp(0.0, 120.0),
                (x.weight_share * 120.0).clamp(0.0, 120.0)
            );
        }
        b.push_str("</table>");
        if let Some(list) = super::figures::renormalised(c) {
            let _ = write!(
                b,
                "<p>Guarded transitions dropped out (the rest renormalised) in: {}</p>",
                esc(&list)
            );
        }
    }
}

/// A latency part's p99 in a cell, `≥` when the round's end cut it short.
fn part_p99(p: Option<&crate::report::model::LatencyPart>) -> String {
    p.map_or_else(|| "–".to_string(), |p| p.text("p99"))
}

/// Teams: per writing and per observing operation, who saw the writes and how late.
fn visibility_table(b: &mut String, r: &Report) {
    let Some(v) = &r.visibility else {
        return;
    };
    b.push_str(
        "<h3>Visibility</h3><p>From a write's acknowledgement to each team member's first \
         sight; every write is to be seen by the members of its team who read.</p><table><tr>\
         <th>operation</th><th>writes</th><th>to be seen</th><th>seen</th><th>superseded</th>\
         <th>unseen</th><th>duplicated</th><th>looks</th><th>every (ms)</th><th>p50 ms</th>\
         <th>p99 ms</th><th>max ms</th><th>waiting for a look p99 ms</th>\
         <th>then stale p99 ms</th></tr>",
    );
    let rows = std::iter::once(&v.all)
        .chain(&v.by_write)
        .chain(&v.by_observer);
    for x in rows {
        let opt = |f: Option<f64>| f.map_or_else(|| "–".to_string(), |v| format!("{v:.1}"));
        let lat = x.latency_ms.as_ref();
        let _ = write!(
            b,
            "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td>\
             <td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
            esc(&x.op),
            x.writes,
            x.expected,
            x.seen,
            x.superseded,
            x.unseen,
            x.duplicated,
            x.looks,
            opt(x.poll_interval_ms),
            opt(lat.map(|l| l.p50)),
            opt(lat.map(|l| l.p99)),
            opt(lat.map(|l| l.max)),
            part_p99(x.poll_gap_ms.as_ref()),
            part_p99(x.staleness_ms.as_ref()),
        );
    }
    b.push_str("</table>");
    let apart = [
        (v.unacknowledged, "sights of writes never acknowledged"),
        (
            v.never_sent,
            "sights of stamps never sent (made up by the server)",
        ),
        (v.unexpected, "sights by users outside the write's team"),
        (v.foreign, "stamps of another run"),
        (v.garbled, "garbled stamps"),
        (v.untracked, "writes or sights past the books' bounds"),
    ];
    for (n, what) in apart.iter().filter(|(n, _)| *n > 0) {
        let _ = write!(b, "<p>{n} {what}</p>");
    }
    if !v.unseen_writes.is_empty() {
        b.push_str("<details><summary>Unseen writes</summary><ul>");
        for u in &v.unseen_writes {
            let _ = write!(b, "<li>{}</li>", esc(u));
        }
        if v.unseen_unnamed > 0 {
            let _ = write!(b, "<li>and {} more</li>", v.unseen_unnamed);
        }
        b.push_str("</ul></details>");
    }
}

/// Per destination, what the messages' stamps say.
fn ledger_table(b: &mut String, l: &crate::ledger::LedgerRecord) {
    let _ = write!(
        b,
        "<p>By stamp{}:</p><table><tr><th>destination</th><th>sent</th><th>received</th><th>drained</th><th>lost</th><th>duplicated</th><th>out of order</th><th>foreign</th><th>sends failed</th><th>never sent</th><th>not drained</th></tr>",
        match l.drained {
            true => " (every destination drained after its round: lost is lost)",
            false => " (not drained: lost counts what may still be on the broker)",
        }
    );
    for d in &l.destinations {
        let c = &d.counts;
        let _ = write!(
            b,
            "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
            esc(&d.name),
            c.sent,
            c.received,
            c.drained,
            c.lost,
            c.duplicated,
            c.out_of_order,
            c.foreign,
            c.send_failed,
            c.unsent,
            c.not_drained
        );
    }
    b.push_str("</table>");
}

/// Scheduled classes: latency from the intended start beside the service time.
fn corrected_table(b: &mut String, r: &Report) {
    let scheduled: Vec<&OpReport> = r
        .summary
        .ops
        .iter()
        .chain(r.summary.sums())
        .filter(|o| o.latency_corrected_ms.is_some())
        .collect();
    if !scheduled.is_empty() {
        b.push_str("<h3>Latency from the intended start (coordinated-omission corrected)</h3><table><tr><th>operation</th><th>corrected p50</th><th>p90</th><th>p99</th><th>p99.9</th><th>max</th><th>service p50</th><th>service p99</th></tr>");
        for o in scheduled {
            if let Some(c) = &o.latency_corrected_ms {
                let _ = write!(
                    b,
                    "<tr><td>{}</td><td>{:.2}</td><td>{:.2}</td><td>{:.2}</td><td>{:.2}</td><td>{:.2}</td><td>{:.2}</td><td>{:.2}</td></tr>",
                    esc(&o.op),
                    c.p50,
                    c.p90,
                    c.p99,
                    c.p999,
                    c.max,
                    o.latency_ms.p50,
                    o.latency_ms.p99
                );
            }
        }
        b.push_str("</table>");
    }
}

fn thresholds_table(b: &mut String, r: &Report) {
    if !r.thresholds.is_empty() {
        b.push_str("<h2>Thresholds</h2><table><tr><th>operation</th><th>rule</th><th>observed</th><th>result</th></tr>");
        for t in &r.thresholds {
            let (cls, word) = if t.passed {
                ("pass", "PASS")
            } else {
                ("fail", "FAIL")
            };
            let _ = write!(
                b,
                "<tr><td>{}</td><td>{}</td><td>{}</td><td class=\"{cls}\">{word}</td></tr>",
                esc(&t.op),
                esc(&t.rule),
                t.observed.map_or("no data".into(), |v| format!("{v:.3}"))
            );
        }
        b.push_str("</table>");
    }
}

/// Every chart of a run, each in its own `<figure data-chart>`.
fn charts_section(b: &mut String, r: &Report) {
    b.push_str("<h2>Charts</h2>");
    b.push_str(&figure("throughput", charts::throughput(r)));
    b.push_str(&figure("latency-over-time", charts::latency_over_time(r)));
    b.push_str(&figure("latency-heat", charts::latency_heat(r)));
    b.push_str(&figure("concurrency", charts::concurrency(r)));
    b.push_str(&figure("errors-over-time", charts::errors_over_time(r)));
    if let Some(svg) = charts::server(r) {
        b.push_str(&figure("server", svg));
    }
    for (i, (_, svg)) in charts::scraped(r).into_iter().enumerate() {
        b.push_str(&figure(&format!("series-{}", i + 1), svg));
    }
    b.push_str(&figure("latency", charts::latency(r)));
    b.push_str(&figure("spectrum", charts::spectrum(r)));
    b.push_str(&figure("rounds", charts::rounds(r)));
    b.push_str(&figure("errors", charts::errors(r)));
}

fn rounds_table(b: &mut String, r: &Report) {
    b.push_str("<h2>Rounds</h2><table><tr><th>round</th><th>started</th><th>measured s</th><th>users</th><th>connections</th><th>retried</th><th>warm-up ops</th><th>requests</th><th>failed</th><th>ops/s</th><th>p99 ms</th></tr>");
    for x in &r.rounds {
        let _ = write!(
            b,
            "<tr><td>{}{}</td><td>{}</td><td>{:.2}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{:.1}</td><td>{}</td></tr>",
            x.index,
            if x.interrupted { " (interrupted)" } else { "" },
            esc(&x.started_at),
            x.measured_s,
            x.vus,
            x.connections_opened,
            x.requests_retried,
            x.warmup_requests,
            x.headline().requests,
            x.headline().failures,
            x.headline().ops_per_sec,
            ms(x.headline(), x.headline().latency_ms.p99)
        );
    }
    b.push_str("</table>");
}

/// Per operation its answers (HTTP statuses, or a protocol's words) and failures by
/// class, then the first failures with what came back.
fn answers_and_failures(b: &mut String, r: &Report) {
    // HTTP runs keep the words they always had; another protocol's answers are answers.
    let named = r.summary.ops.iter().any(|o| !o.answers.is_empty());
    let _ = write!(
        b,
        "<h2>{}</h2><table><tr><th>operation</th><th>{}</th><th>failures by class</th></tr>",
        if named {
            "Answers and errors"
        } else {
            "Statuses and errors"
        },
        if named {
            "answers"
        } else {
            "responses by status"
        }
    );
    for o in &r.summary.ops {
        let st: Vec<String> = o
            .answer_counts()
            .iter()
            .map(|(k, v)| format!("{k}: {v}"))
            .collect();
        let er: Vec<String> = o.errors.iter().map(|(k, v)| format!("{k}: {v}")).collect();
        let _ = write!(
            b,
            "<tr><td>{}</td><td>{}</td><td>{}</td></tr>",
            esc(&o.op),
            esc(&st.join(", ")),
            esc(&er.join(", "))
        );
    }
    b.push_str("</table>");
    if !r.failures.is_empty() {
        b.push_str("<h3>First failures</h3><table><tr><th>round</th><th>operation</th><th>class</th><th>what came back</th></tr>");
        for f in &r.failures {
            let _ = write!(
                b,
                "<tr><td>{}</td><td>{}</td><td>{}</td><td style=\"text-align:left\">{}</td></tr>",
                f.round,
                esc(&f.op),
                esc(&f.error),
                esc(&f.detail)
            );
        }
        b.push_str("</table>");
    }
}

fn generator_text(r: &Report) -> String {
    let n = r.rounds.len().max(1) as f64;
    let cpu = r.rounds.iter().map(|x| x.generator.cpu_mean).sum::<f64>() / n;
    let lag = r
        .rounds
        .iter()
        .map(|x| x.generator.lag_p99_ms)
        .fold(0.0, f64::max);
    let cores = r.rounds.first().map_or(0, |x| x.generator.cores);
    let (dropped, late): (u64, u64) = r.rounds.iter().fold((0, 0), |a, x| {
        (a.0 + x.generator.dropped, a.1 + x.generator.late)
    });
    let mut s =
        format!("CPU {cpu:.0}% of {cores} cores on average; scheduling lag p99 {lag:.2} ms");
    if dropped + late > 0 {
        s.push_str(&format!("; arrivals dropped {dropped}, late {late}"));
    }
    if r.target.starts_with("embedded") {
        s.push_str(" (the embedded server runs in the same process)");
    }
    s
}

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

fn compare_table(c: &Comparison) -> String {
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
                Some([lo, hi]) => super::stats::with_ci(x.ops_per_sec, (hi - lo) / 2.0, " ± "),
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
fn round_table(title: &str, rows: &[compare::ServerRow], runs: &[String]) -> String {
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

/// What a sweep's page draws beside its points: each target's fitted curve, the fits in
/// words, and each target's knee where the sweep could tell one.
pub struct SweepModels<'a> {
    /// Per fitted target, the model's value at each point.
    pub fitted: &'a [charts::PointSeries],
    /// The fits in words, a paragraph each.
    pub notes: &'a [String],
    /// Per target, the point marked as its knee.
    pub knees: &'a [Option<usize>],
}

/// The page of a sweep: scaling charts and table, then each point's comparison.
pub fn sweep(
    title: &str,
    key: &str,
    points: &[String],
    targets: &[String],
    table: &[Vec<Option<(f64, f64)>>],
    comparisons: &[(String, Comparison)],
    models: SweepModels<'_>,
) -> String {
    let SweepModels {
        fitted,
        notes,
        knees,
    } = models;
    let mut b = format!(
        "<h1>{}</h1><p>sweep of <code>{}</code> over {}</p>",
        esc(title),
        esc(key),
        esc(&points.join(", "))
    );
    for n in notes {
        let _ = write!(b, "<p>{}</p>", esc(n));
    }
    let lines = |pick: fn(&(f64, f64)) -> f64| -> Vec<(String, Vec<Option<f64>>)> {
        targets
            .iter()
            .enumerate()
            .map(|(t, name)| {
                (
                    name.clone(),
                    table.iter().map(|row| row[t].as_ref().map(pick)).collect(),
                )
            })
            .collect()
    };
    b.push_str(&figure(
        "sweep-throughput",
        charts::scaling(
            "total ops/s against the swept value",
            "ops/s",
            points,
            &lines(|x| x.0),
            knees,
            fitted,
        ),
    ));
    b.push_str(&figure(
        "sweep-p99",
        charts::scaling(
            "total p99 latency (ms) against the swept value",
            "p99 ms",
            points,
            &lines(|x| x.1),
            &[],
            &[],
        ),
    ));
    b.push_str("<table><tr><th>value</th>");
    for t in targets {
        let _ = write!(b, "<th>{0} ops/s</th><th>{0} p99 ms</th>", esc(t));
    }
    b.push_str("</tr>");
    for (i, p) in points.iter().enumerate() {
        let _ = write!(b, "<tr><td>{}</td>", esc(p));
        for cell in &table[i] {
            match cell {
                Some((ops, p99)) => {
                    let _ = write!(b, "<td>{ops:.1}</td><td>{p99:.2}</td>");
                }
                None => b.push_str("<td>-</td><td>-</td>"),
            }
        }
        b.push_str("</tr>");
    }
    b.push_str("</table>");
    for (point, c) in comparisons {
        let _ = write!(b, "<h2>{}</h2>", esc(point));
        b.push_str(&compare_table(c));
    }
    page(title, &b)
}

/// A capacity search's page: the answer per target and against the first in words
/// (`intro`), its charts, and each target's steps as a table under `header`.
pub(crate) fn capacity(
    title: &str,
    intro: &[String],
    charts: Vec<(&str, String)>,
    header: &[&str],
    steps: &[(String, Vec<Vec<String>>)],
) -> String {
    let mut b = format!("<h1>{}</h1>", esc(title));
    for p in intro {
        let _ = write!(b, "<p>{}</p>", esc(p));
    }
    for (kind, svg) in charts {
        b.push_str(&figure(kind, svg));
    }
    for (target, rows) in steps {
        let _ = write!(b, "<h2>{}</h2><table><tr>", esc(target));
        for h in header {
            let _ = write!(b, "<th>{}</th>", esc(h));
        }
        b.push_str("</tr>");
        for row in rows {
            b.push_str("<tr>");
            for cell in row {
                let _ = write!(b, "<td>{}</td>", esc(cell));
            }
            b.push_str("</tr>");
        }
        b.push_str("</table>");
    }
    page(title, &b)
}
