//! The console report's fault windows: one row per window and round, what it cost (time
//! to detect, time to recover, the dip, failures and connections), the operations before,
//! during and after it, and the rule recovery was judged by; where messages were stamped,
//! the ledger's share of each window (lost, duplicated, redelivered), with a loss of
//! messages the broker had taken called out.

use std::fmt::Write;

use comfy_table::presets::UTF8_FULL_CONDENSED;
use comfy_table::{CellAlignment, ContentArrangement, Table};

use crate::report::model::{FaultPart, FaultWindow, Report};

const COLUMNS: [&str; 10] = [
    "round",
    "fault",
    "window s",
    "detect ms",
    "recover s",
    "dip",
    "failed during·after",
    "ops/s before·during·after",
    "p50 ms before·during·after",
    "connections",
];

/// The fault table, when the run had a timeline.
pub(super) fn faults(out: &mut String, r: &Report) {
    let rows: Vec<(u32, &FaultWindow)> = r
        .rounds
        .iter()
        .flat_map(|x| x.faults.iter().map(move |f| (x.index, f)))
        .collect();
    let Some((_, first)) = rows.first() else {
        return;
    };
    let _ = writeln!(out, "faults ({} window(s)):", rows.len());
    let mut t = Table::new();
    t.load_preset(UTF8_FULL_CONDENSED)
        .set_content_arrangement(ContentArrangement::Disabled);
    t.set_header(COLUMNS.to_vec());
    for (round, f) in &rows {
        t.add_row(row(*round, f));
    }
    for i in [0, 3, 4, 5, 6] {
        if let Some(col) = t.column_mut(i) {
            col.set_cell_alignment(CellAlignment::Right);
        }
    }
    let _ = writeln!(out, "{t}");
    let rule = first.rule;
    let _ = writeln!(
        out,
        "  detect: the first operation past the p99 before the fault widened by {band:.0}%, or failed · recover: from the fault's end until successes started a second and their p{p} stay within {band:.0}% of the seconds before for {hold}s · dip: successes not done in the window against the rate before it",
        band = rule.band * 100.0,
        p = rule.percentile,
        hold = rule.hold_s
    );
    messages(out, &rows);
    for (round, f) in &rows {
        if let Some(v) = &f.visibility {
            let latency = v.latency_ms.as_ref().map_or(String::new(), |l| {
                format!(", first sight p50 {:.1} ms · p99 {:.1} ms", l.p50, l.p99)
            });
            let _ = writeln!(
                out,
                "  round {round}, {}: teams' writes acknowledged in it {}, seen {} of {}{latency}, unseen {}",
                f.fault, v.writes, v.seen, v.expected, v.unseen
            );
        }
        for c in &f.commands {
            let how = match (c.exit, c.timed_out) {
                (_, true) => "killed after its timeout".to_string(),
                (Some(code), _) => format!("exited {code}"),
                (None, false) => "did not run to an exit".to_string(),
            };
            let _ = writeln!(
                out,
                "  round {round}, {}: {} `{}` {how} in {:.2}s; output in {}",
                f.fault, c.what, c.command, c.took_s, c.log
            );
        }
    }
    for (round, f) in &rows {
        if let Some(t) = &f.trouble {
            let _ = writeln!(out, "WARNING: round {round}, {}: {t}", f.fault);
        }
        if f.began_s.is_none() {
            let _ = writeln!(
                out,
                "WARNING: round {round}, {}: the round ended before it began",
                f.fault
            );
        }
    }
}

const MESSAGE_COLUMNS: [&str; 9] = [
    "round",
    "fault",
    "sent before·during",
    "lost",
    "of those, send failed",
    "duplicated",
    "redelivered",
    "out of order",
    "sent before, received after",
];

/// The ledger by window, when messages were stamped.
fn messages(out: &mut String, rows: &[(u32, &FaultWindow)]) {
    let with: Vec<_> = rows
        .iter()
        .filter_map(|(r, f)| Some((*r, *f, f.messages?)))
        .collect();
    if with.is_empty() {
        return;
    }
    let _ = writeln!(
        out,
        "messages by window (of those sent before it, since the window before ended, or during it):"
    );
    let mut t = Table::new();
    t.load_preset(UTF8_FULL_CONDENSED)
        .set_content_arrangement(ContentArrangement::Disabled);
    t.set_header(MESSAGE_COLUMNS.to_vec());
    for (round, f, m) in &with {
        let mut lost = m.lost.to_string();
        if m.not_drained > 0 {
            let _ = write!(lost, " (+{} not drained)", m.not_drained);
        }
        t.add_row(vec![
            round.to_string(),
            f.fault.clone(),
            format!("{} · {}", m.sent_before, m.sent_during),
            lost,
            m.lost_failed.to_string(),
            m.duplicated.to_string(),
            m.redelivered.to_string(),
            m.out_of_order.to_string(),
            m.crossed.to_string(),
        ]);
    }
    for i in [0, 3, 4, 5, 6, 7, 8] {
        if let Some(col) = t.column_mut(i) {
            col.set_cell_alignment(CellAlignment::Right);
        }
    }
    let _ = writeln!(out, "{t}");
    for (round, f, m) in &with {
        let taken = m.lost.saturating_sub(m.lost_failed);
        if taken > 0 {
            let _ = writeln!(
                out,
                "WARNING: round {round}, {}: {taken} lost message(s) whose send had not failed: with receipts or confirms asked, the broker had taken them (a durability breach)",
                f.fault
            );
        }
    }
}

fn row(round: u32, f: &FaultWindow) -> Vec<String> {
    let opt =
        |v: Option<f64>, digits: usize| v.map_or("–".to_string(), |x| format!("{x:.digits$}"));
    let window = match (f.began_s, f.ended_s) {
        (Some(b), Some(e)) => format!("{b:.2}–{e:.2}"),
        _ => format!("{:.2}–{:.2} (not run)", f.at_s, f.until_s),
    };
    let recover = match (f.recover_s, f.unrecovered_s) {
        (Some(r), _) => format!("{r:.2}"),
        (None, Some(u)) => format!("> {u:.1}"),
        (None, None) => "–".into(),
    };
    let failed = format!(
        "{} · {}",
        f.during.errors.values().sum::<u64>(),
        f.after.errors.values().sum::<u64>()
    );
    let parts = |get: fn(&FaultPart) -> String| {
        [&f.before, &f.during, &f.after]
            .iter()
            .map(|p| get(p))
            .collect::<Vec<_>>()
            .join(" · ")
    };
    let connections = f.connections.map_or("–".to_string(), |c| {
        let mut s = format!("{} touched", c.touched);
        for (n, what) in [
            (c.reset, "reset"),
            (c.closed, "closed"),
            (c.refused, "refused"),
        ] {
            if n > 0 {
                let _ = write!(s, ", {n} {what}");
            }
        }
        s
    });
    vec![
        round.to_string(),
        f.fault.clone(),
        window,
        opt(f.detect_ms, 1),
        recover,
        format!("{:.0} of {:.0}", f.dip, f.expected),
        failed,
        parts(|p| format!("{:.1}", p.ops_per_s)),
        parts(|p| p.p50_ms.map_or("–".into(), |v| format!("{v:.2}"))),
        connections,
    ]
}
