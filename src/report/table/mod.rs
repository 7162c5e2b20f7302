//! The console report: the 2007 Cosmo table (requests, successes, failures, mean/min/max/
//! stddev, bytes) with throughput and percentiles added, then totals, the success ratio,
//! per-round throughput and a breakdown of failures.

mod health;
mod messages;
mod teardown;

mod faults;
use health::{generator, overruns, sessions, shards_and_clock, unsolicited, warmup_and_drift};
pub use messages::ledger_words;
use messages::{messages, visibility};
use teardown::{cleanup, failures, untimed};

use std::fmt::Write;

use comfy_table::presets::UTF8_FULL_CONDENSED;
use comfy_table::{CellAlignment, ContentArrangement, Table};

use super::figures::server_lines;
use super::model::{OpReport, Report, Summary};

/// The width the console report is laid out to: none under `--wide`, else the
/// terminal's (see `compare::terminal_width`).
pub fn console_width(wide: bool) -> Option<usize> {
    (!wide).then(|| usize::from(super::compare::terminal_width()))
}

/// Render the whole report with every column (`report.txt`, `--wide`).
pub fn render(r: &Report) -> String {
    render_for(r, None)
}

/// Render the whole report for a terminal `width` columns wide: each table keeps its
/// essential columns and as many of the others as fit (all of them when `None`).
pub fn render_for(r: &Report, width: Option<usize>) -> String {
    let mut out = String::new();
    heading(&mut out, r);
    operations(&mut out, r, width);
    named_answers(&mut out, &r.summary);
    messages(&mut out, r);
    if let Some(v) = &r.visibility {
        visibility(&mut out, v);
    }
    sessions(&mut out, r);
    faults::faults(&mut out, r);
    corrected_latency(&mut out, &r.summary, width);
    out.push_str(&connections_table(&r.summary, width));
    unsolicited(&mut out, r);
    overruns(&mut out, r);
    generator(&mut out, r);
    for w in &r.summary.generator_warnings {
        let _ = writeln!(out, "WARNING: {w}");
    }
    for line in super::model::mix::warnings(&r.summary.mix) {
        let _ = writeln!(out, "{line}");
    }
    for line in server_lines(&r.summary) {
        let _ = writeln!(out, "{line}");
    }
    shards_and_clock(&mut out, r);
    warmup_and_drift(&mut out, r);
    untimed(&mut out, r);
    cleanup(&mut out, r);
    out.push_str(&super::thresholds::render(r));
    failures(&mut out, r);
    match width {
        Some(w) => wrap_prose(&out, w),
        None => out,
    }
}

/// Every line of prose longer than `width` broken between words (its continuation
/// indented); tables, already fitted, are left as drawn.
fn wrap_prose(text: &str, width: usize) -> String {
    let mut out = String::with_capacity(text.len());
    for line in text.lines() {
        let drawn = line.starts_with(['┌', '│', '╞', '├', '└', '╭', '╰']);
        if drawn || line.chars().count() <= width {
            out.push_str(line);
            out.push('\n');
        } else {
            let lead = line.len() - line.trim_start().len();
            let indent = " ".repeat(lead + 2);
            out.push_str(&" ".repeat(lead));
            out.push_str(&super::compare::wrap(
                line.trim_start(),
                width.saturating_sub(lead),
                &indent,
            ));
        }
    }
    out
}

/// The tool, workload, target and seed; the rounds and users; an early stop.
fn heading(out: &mut String, r: &Report) {
    let w = &r.workload;
    let _ = writeln!(
        out,
        "loadmix {} · workload {} ({}) · target {} · seed {}",
        r.tool.version,
        w.name,
        short_hash(&w.hash),
        r.target,
        r.seed
    );
    let length = match (w.run.duration_s, w.run.iterations) {
        (Some(d), _) => format!("{d}s"),
        (None, Some(n)) => format!("{n} iterations/user"),
        _ => "?".into(),
    };
    let users: Vec<String> = w
        .classes
        .iter()
        .map(|c| format!("{} {}×{}", c.name, c.protocol, c.count))
        .collect();
    let kept = match w.run.keep_state {
        true => " · users keep their data from round to round",
        false => "",
    };
    let _ = writeln!(
        out,
        "{} round(s) of {length}, measured {:.1}s in all · users: {}{kept}",
        r.summary.rounds,
        r.summary.measured_s,
        users.join(", ")
    );
    if r.interrupted {
        let _ = writeln!(
            out,
            "INTERRUPTED: the run was stopped early; figures cover what ran."
        );
    }
    let _ = writeln!(out);
}

/// The 2007 table, one row per operation and the total, then totals and rates per round.
/// On a narrow terminal the essentials stay (operation, requests, failed, ops/s, p50,
/// p95, p99) and the rest go, the bytes first.
fn operations(out: &mut String, r: &Report, width: Option<usize>) {
    let multi = r.summary.rounds > 1;
    let header = vec![
        "operation",
        "requests",
        "ok",
        "failed",
        if multi { "ops/s (95% CI)" } else { "ops/s" },
        "mean ms",
        "min",
        "max",
        "stddev",
        "p50 ms",
        "p95",
        "p99",
        "sent",
        "received",
    ];
    let rows = r
        .summary
        .ops
        .iter()
        .chain(r.summary.sums())
        .map(|op| row(op, multi))
        .collect();
    // received, sent, stddev, min, max, mean, ok: the order they give way in.
    let _ = writeln!(
        out,
        "{}",
        fitted(&header, rows, &[13, 12, 8, 6, 7, 5, 2], width)
    );
    let s = &r.summary;
    let sums: Vec<String> = s
        .sums()
        .iter()
        .map(|o| {
            format!(
                "{0} successes {1} · {0} failures {2}",
                o.op, o.successes, o.failures
            )
        })
        .collect();
    let _ = writeln!(
        out,
        "{} · success ratio {:.4}",
        sums.join(" · "),
        s.success_ratio
    );
    if multi {
        let rates: Vec<String> = r
            .rounds
            .iter()
            .map(|rr| format!("{:.1}", rr.headline().ops_per_sec))
            .collect();
        let _ = writeln!(out, "ops/s per round: {}", rates.join(", "));
    }
}

/// Answers of protocols other than HTTP, in their own words, per operation (HTTP
/// statuses are shown with the failures, as they always were).
fn named_answers(out: &mut String, s: &Summary) {
    let named: Vec<&OpReport> = s.ops.iter().filter(|o| !o.answers.is_empty()).collect();
    if named.is_empty() {
        return;
    }
    let _ = writeln!(out, "\nanswers:");
    for o in named {
        let words: Vec<String> = o
            .answers
            .iter()
            .map(|a| format!("{}×{}", a.label(), a.count))
            .collect();
        let _ = writeln!(out, "  {}: {}", o.op, words.join(" "));
    }
}

/// Scheduled classes: latency from the intended start beside the service time.
fn corrected_latency(out: &mut String, s: &Summary, width: Option<usize>) {
    let scheduled: Vec<&OpReport> = s
        .ops
        .iter()
        .chain(s.sums())
        .filter(|o| o.latency_corrected_ms.is_some())
        .collect();
    if !scheduled.is_empty() {
        let header = [
            "operation",
            "corrected p50",
            "p90",
            "p99",
            "p99.9",
            "max",
            "service p50",
            "service p99",
        ];
        let rows = scheduled
            .into_iter()
            .map(|o| {
                let l = &o.latency_ms;
                let cl = o.latency_corrected_ms.clone().unwrap_or(l.clone());
                vec![
                    o.op.clone(),
                    format!("{:.2}", cl.p50),
                    format!("{:.2}", cl.p90),
                    format!("{:.2}", cl.p99),
                    format!("{:.2}", cl.p999),
                    format!("{:.2}", cl.max),
                    format!("{:.2}", l.p50),
                    format!("{:.2}", l.p99),
                ]
            })
            .collect();
        let _ = writeln!(
            out,
            "\nlatency from the intended start (coordinated-omission corrected) beside the service time, ms:\n{}",
            fitted(&header, rows, &[5, 4, 2, 6], width)
        );
    }
}

/// A table of `rows` under `header`, the first column left and the rest right-aligned.
/// When it is wider than `width`, the columns of `give_way` go, in that order, until it
/// fits (or none is left to go); a line under it names what went and where it is.
fn fitted(
    header: &[&str],
    rows: Vec<Vec<String>>,
    give_way: &[usize],
    width: Option<usize>,
) -> String {
    let draw = |gone: &[usize], squeeze: Option<usize>| {
        let keep = |i: &usize| !gone.contains(i);
        let mut t = Table::new();
        t.load_preset(UTF8_FULL_CONDENSED);
        match squeeze {
            // The essentials alone are too wide: their cells wrap inside the width.
            Some(w) => t
                .set_content_arrangement(ContentArrangement::Dynamic)
                .set_width(u16::try_from(w).unwrap_or(u16::MAX)),
            None => t.set_content_arrangement(ContentArrangement::Disabled),
        };
        t.set_header((0..header.len()).filter(keep).map(|i| header[i]));
        for r in &rows {
            t.add_row((0..r.len()).filter(keep).map(|i| r[i].as_str()));
        }
        for i in 1..t.column_count() {
            if let Some(c) = t.column_mut(i) {
                c.set_cell_alignment(CellAlignment::Right);
            }
        }
        t.to_string()
    };
    let wide = |text: &str| text.lines().map(|l| l.chars().count()).max().unwrap_or(0);
    let mut gone: Vec<usize> = Vec::new();
    let mut text = draw(&gone, None);
    if let Some(w) = width {
        for &col in give_way {
            if wide(&text) <= w {
                break;
            }
            gone.push(col);
            text = draw(&gone, None);
        }
        if wide(&text) > w {
            text = draw(&gone, Some(w));
        }
    }
    if gone.is_empty() {
        return text;
    }
    gone.sort_unstable();
    let names: Vec<&str> = gone.iter().map(|&i| header[i]).collect();
    format!(
        "{text}\n({} left out to fit {} columns: --wide, or report.txt)",
        names.join(", "),
        width.unwrap_or(0)
    )
}

fn row(op: &OpReport, multi: bool) -> Vec<String> {
    let l = &op.latency_ms;
    let rate = match (&op.across_rounds, multi) {
        (Some(a), true) => match a.ops_per_sec_ci95 {
            Some([lo, hi]) => super::stats::with_ci(a.ops_per_sec_mean, (hi - lo) / 2.0, " ±"),
            None => format!("{:.1}", a.ops_per_sec_mean),
        },
        _ => format!("{:.1}", op.ops_per_sec),
    };
    let ms = |v: f64| {
        if op.successes == 0 {
            "-".to_string()
        } else {
            format!("{v:.2}")
        }
    };
    vec![
        op.op.clone(),
        op.requests.to_string(),
        op.successes.to_string(),
        op.failures.to_string(),
        rate,
        ms(l.mean),
        ms(l.min),
        ms(l.max),
        ms(l.stddev),
        ms(l.p50),
        ms(l.p95),
        ms(l.p99),
        bytes(op.bytes_sent),
        bytes(op.bytes_received),
    ]
}

fn bytes(n: u64) -> String {
    const K: f64 = 1024.0;
    let f = n as f64;
    if f >= K * K * K {
        format!("{:.1}GiB", f / (K * K * K))
    } else if f >= K * K {
        format!("{:.1}MiB", f / (K * K))
    } else if f >= K {
        format!("{:.1}KiB", f / K)
    } else {
        format!("{n}B")
    }
}

fn short_hash(h: &str) -> &str {
    h.get(..12).unwrap_or(h)
}

/// Connect and TLS-handshake times of the connections operations opened, apart from the
/// latency they are part of (empty when no operation had to open one).
fn connections_table(s: &crate::report::model::Summary, width: Option<usize>) -> String {
    let opened: Vec<&OpReport> = s
        .ops
        .iter()
        .chain(s.sums())
        .filter(|o| o.connect_ms.is_some())
        .collect();
    if opened.is_empty() {
        return String::new();
    }
    let tls = opened.iter().any(|o| o.tls_handshake_ms.is_some());
    let mut header = vec!["operation", "connections", "connect p50", "p95", "max"];
    if tls {
        header.extend(["TLS p50", "p95", "max", "resumed"]);
    }
    let cells = |p: Option<&crate::report::model::Phase>| match p {
        Some(p) => vec![
            format!("{:.2}", p.p50),
            format!("{:.2}", p.p95),
            format!("{:.2}", p.max),
        ],
        None => vec!["-".into(), "-".into(), "-".into()],
    };
    let rows = opened
        .into_iter()
        .map(|o| {
            let mut row = vec![
                o.op.clone(),
                o.connect_ms.as_ref().map_or(0, |p| p.count).to_string(),
            ];
            row.extend(cells(o.connect_ms.as_ref()));
            if tls {
                row.extend(cells(o.tls_handshake_ms.as_ref()));
                row.push(o.tls_resumed.to_string());
            }
            row
        })
        .collect();
    let drop: &[usize] = if tls { &[8, 7, 4, 6, 3] } else { &[4, 3] };
    let c = fitted(&header, rows, drop, width);
    format!(
        "\nnew connections: connect{} time, ms (part of the latency above):\n{c}\n",
        if tls { " and TLS handshake" } else { "" }
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rows() -> Vec<Vec<String>> {
        vec![vec![
            "caldav.time_range_report".into(),
            "1787".into(),
            "3.8MiB".into(),
            "17.9MiB".into(),
        ]]
    }

    fn widest(text: &str) -> usize {
        text.lines().map(|l| l.chars().count()).max().unwrap_or(0)
    }

    #[test]
    fn columns_give_way_in_their_order_until_the_table_fits() {
        let header = ["operation", "requests", "sent", "received"];
        let all = fitted(&header, rows(), &[3, 2], None);
        assert!(all.contains("received") && !all.contains("left out"));
        let w = widest(&all);
        let one = fitted(&header, rows(), &[3, 2], Some(w - 1));
        assert!(!one.contains("17.9MiB") && one.contains("3.8MiB"), "{one}");
        assert!(one.contains("(received left out to fit"), "{one}");
        let narrow = fitted(&header, rows(), &[3, 2], Some(30));
        assert!(narrow.contains("(sent, received left out"), "{narrow}");
        assert!(
            narrow
                .lines()
                .filter(|l| !l.starts_with('('))
                .all(|l| l.chars().count() <= 30),
            "the essentials wrap inside the width:\n{narrow}"
        );
    }

    #[test]
    fn prose_wraps_between_words_and_tables_stay_as_drawn() {
        let table = "│ a ┆ b │";
        let text = format!("{table}\none two three four five six\n");
        let out = wrap_prose(&text, 9);
        let lines: Vec<&str> = out.lines().collect();
        assert_eq!(lines[0], table);
        assert_eq!(lines[1], "one two");
        assert!(
            lines[2..]
                .iter()
                .all(|l| l.starts_with("  ") && l.chars().count() <= 9)
        );
    }
}
