//! The tables of a run's page beside its operations: corrected latency, thresholds,
//! message rates, behaviours' sessions, the teams' visibility, the message ledger and
//! the fault windows.

use std::fmt::Write;

use crate::formats::xml::esc;
use crate::report::model::{OpReport, Report};

/// Scheduled classes: latency from the intended start beside the service time.
pub(super) fn corrected_table(b: &mut String, r: &Report) {
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

pub(super) fn thresholds_table(b: &mut String, r: &Report) {
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

/// A broker's operations in messages per second and per minute, and MiB per second.
pub(super) fn messages_table(b: &mut String, r: &Report) {
    let rows = crate::report::figures::message_rates(r);
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
    for bl in crate::report::figures::backlogs(r) {
        let _ = write!(
            b,
            "<p>{}</p>",
            esc(&crate::report::figures::backlog_words(&bl))
        );
    }
    if let Some(l) = &r.ledger {
        ledger_table(b, l);
    }
}

/// Classes with behaviours: per behaviour, its sessions as the console table has them,
/// and a bar of its share of sessions beside its weight.
pub(super) fn sessions_table(b: &mut String, r: &Report) {
    let all = crate::report::model::sessions::sum(r.rounds.iter().map(|x| &x.sessions[..]));
    for c in &all {
        let started: u64 = c.behaviours.iter().map(|x| x.started).sum();
        let _ = write!(
            b,
            "<h3>Sessions of {} ({started} started)</h3><table><tr>",
            esc(&c.class)
        );
        for h in crate::report::figures::SESSION_COLUMNS {
            let _ = write!(b, "<th>{}</th>", esc(h));
        }
        b.push_str("<th>share against weight</th></tr>");
        for (row, x) in crate::report::figures::session_rows(c)
            .iter()
            .zip(&c.behaviours)
        {
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
        if let Some(list) = crate::report::figures::renormalised(c) {
            let _ = write!(
                b,
                "<p>Guarded transitions dropped out (the rest renormalised) in: {}</p>",
                esc(&list)
            );
        }
    }
}

/// A latency part's p99 in a cell, `≥` when the round's end cut it short.
pub(super) fn part_p99(p: Option<&crate::report::model::LatencyPart>) -> String {
    p.map_or_else(|| "–".to_string(), |p| p.text("p99"))
}

/// Teams: per writing and per observing operation, who saw the writes and how late.
pub(super) fn visibility_table(b: &mut String, r: &Report) {
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
pub(super) fn ledger_table(b: &mut String, l: &crate::ledger::LedgerRecord) {
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

/// The fault windows: what each cost, and the operations before, during and after it.
pub(super) fn faults_table(b: &mut String, r: &Report) {
    let rows: Vec<(u32, &crate::report::model::FaultWindow)> = r
        .rounds
        .iter()
        .flat_map(|x| x.faults.iter().map(move |f| (x.index, f)))
        .collect();
    let Some((_, first)) = rows.first() else {
        return;
    };
    b.push_str("<h2>Faults</h2><table><tr><th>round</th><th>fault</th><th>window s</th><th>detect ms</th><th>recover s</th><th>dip</th><th>failed during · after</th><th>ops/s before · during · after</th><th>p50 ms before · during · after</th><th>connections reset</th></tr>");
    let opt = |v: Option<f64>, d: usize| v.map_or("–".to_string(), |x| format!("{x:.d$}"));
    for (round, f) in &rows {
        let parts = [&f.before, &f.during, &f.after];
        let rates: Vec<String> = parts
            .iter()
            .map(|p| format!("{:.1}", p.ops_per_s))
            .collect();
        let p50s: Vec<String> = parts.iter().map(|p| opt(p.p50_ms, 2)).collect();
        let recover = match (f.recover_s, f.unrecovered_s) {
            (Some(v), _) => format!("{v:.2}"),
            (None, Some(u)) => format!("&gt; {u:.1}"),
            _ => "–".into(),
        };
        let _ = write!(
            b,
            "<tr><td>{round}</td><td>{}</td><td>{}–{}</td><td>{}</td><td>{recover}</td><td>{:.0} of {:.0}</td><td>{} · {}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
            esc(&f.fault),
            opt(f.began_s, 2),
            opt(f.ended_s, 2),
            opt(f.detect_ms, 1),
            f.dip,
            f.expected,
            f.during.errors.values().sum::<u64>(),
            f.after.errors.values().sum::<u64>(),
            rates.join(" · "),
            p50s.join(" · "),
            f.connections
                .map_or("–".into(), |c| format!("{} of {}", c.reset, c.touched)),
        );
    }
    let _ = write!(
        b,
        "</table><p class=\"note\">Recovery: successes started a second within {:.0}% of the seconds before, and their p{} at most {:.0}% above, for {}s in a row. The windows are shaded red on the charts.</p>",
        first.rule.band * 100.0,
        first.rule.percentile,
        first.rule.band * 100.0,
        first.rule.hold_s
    );
    fault_messages_table(b, &rows);
}

/// The ledger's share of each window, when messages were stamped.
fn fault_messages_table(b: &mut String, rows: &[(u32, &crate::report::model::FaultWindow)]) {
    if rows.iter().all(|(_, f)| f.messages.is_none()) {
        return;
    }
    b.push_str("<h3>Messages by window</h3><table><tr><th>round</th><th>fault</th><th>sent before · during</th><th>lost</th><th>of those, send failed</th><th>duplicated</th><th>redelivered</th><th>out of order</th><th>sent before, received after</th></tr>");
    for (round, f) in rows {
        let Some(m) = f.messages else {
            continue;
        };
        // A loss of messages the broker had taken is a durability breach: marked.
        let breach = if m.lost > m.lost_failed {
            " class=\"fail\""
        } else {
            ""
        };
        let _ = write!(
            b,
            "<tr><td>{round}</td><td>{}</td><td>{} · {}</td><td{breach}>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
            esc(&f.fault),
            m.sent_before,
            m.sent_during,
            m.lost,
            m.lost_failed,
            m.duplicated,
            m.redelivered,
            m.out_of_order,
            m.crossed,
        );
    }
    b.push_str("</table><p class=\"note\">Of the messages sent before a window (since the one before it ended) or during it. A lost message whose send had not failed, where receipts or confirms were asked, is one the broker had taken: marked red.</p>");
}
