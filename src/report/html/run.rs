//! One run's page: its heading, the operations, the charts, the rounds, the answers and
//! failures, the generator's health; the tables beside them come from `tables.rs`.

use std::fmt::Write;

use super::tables::{
    corrected_table, faults_table, messages_table, sessions_table, thresholds_table,
    visibility_table,
};
use super::{figure, ms, page, rate};
use crate::formats::xml::esc;
use crate::report::charts;
use crate::report::model::Report;

/// The page of one run.
pub fn report(r: &Report) -> String {
    let w = &r.workload;
    let mut b = String::new();
    run_heading(&mut b, r);
    summary_table(&mut b, r);
    messages_table(&mut b, r);
    corrected_table(&mut b, r);
    thresholds_table(&mut b, r);
    faults_table(&mut b, r);
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
pub(super) fn run_heading(b: &mut String, r: &Report) {
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
    for w in crate::report::model::mix::warnings(&r.summary.mix) {
        let _ = write!(b, "<p class=\"warn\">{}</p>", esc(&w));
    }
    if let Some(d) = &r.summary.drift {
        let _ = write!(b, "<p class=\"warn\">drift: {}</p>", esc(&d.message));
    }
    let server = crate::report::figures::server_lines(&r.summary);
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
pub(super) fn summary_table(b: &mut String, r: &Report) {
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

/// Every chart of a run, each in its own `<figure data-chart>`.
pub(super) fn charts_section(b: &mut String, r: &Report) {
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

pub(super) fn rounds_table(b: &mut String, r: &Report) {
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
pub(super) fn answers_and_failures(b: &mut String, r: &Report) {
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

pub(super) fn generator_text(r: &Report) -> String {
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
