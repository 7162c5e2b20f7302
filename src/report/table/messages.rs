//! The console report's messages and visibility: a broker's operations in messages per
//! second and minute, the message ledger's counts by destination, and how the teams' writes
//! reached the members who read them.

use std::fmt::Write;

use crate::report::figures::{backlog_words, backlogs, message_rates};
use crate::report::model::Report;

/// A broker's operations in the units message benchmarks use: messages per second and
/// per minute (the unit of the ActiveMQ study), and the bodies' MiB per second.
pub(super) fn messages(out: &mut String, r: &Report) {
    let rows = message_rates(r);
    if rows.is_empty() {
        return;
    }
    let _ = writeln!(out, "\nmessages:");
    for m in rows {
        let _ = writeln!(
            out,
            "  {}: {:.1} msg/s · {:.0} msg/min · {:.2} MiB/s",
            m.op, m.per_sec, m.per_min, m.mib_per_sec
        );
    }
    if r.shard.is_some() || !r.shards.is_empty() {
        let _ = writeln!(
            out,
            "  end-to-end latency across shards: send and receive times from each host's wall clock, so it assumes their clocks agree"
        );
    }
    for b in backlogs(r) {
        let _ = writeln!(out, "  {}", backlog_words(&b));
    }
    if let Some(l) = &r.ledger {
        ledger(out, l);
    }
}

/// How long the teams' writes took to reach the members who read them: per writing
/// operation, then per observing operation with its poll interval, then what should
/// not have happened.
pub(super) fn visibility(out: &mut String, v: &crate::report::model::VisibilityRecord) {
    let _ = writeln!(
        out,
        "\nvisibility (from a write's acknowledgement to each team member's first sight):"
    );
    for r in std::iter::once(&v.all).chain(&v.by_write) {
        let _ = writeln!(
            out,
            "    {}: writes {} · to be seen {} · seen {} · superseded {} · unseen {}{}",
            r.op,
            r.writes,
            r.expected,
            r.seen,
            r.superseded,
            r.unseen,
            sight_latency(r)
        );
        if let Some(parts) = latency_parts(r) {
            let _ = writeln!(out, "      {parts}");
        }
    }
    for r in &v.by_observer {
        let _ = writeln!(
            out,
            "    seen by {}: first sights {} · looks {}{}{}{}",
            r.op,
            r.seen,
            r.looks,
            r.poll_interval_ms
                .map_or(String::new(), |p| format!(" · every {p:.0} ms")),
            match r.duplicated {
                0 => String::new(),
                d => format!(" · duplicated {d}"),
            },
            sight_latency(r)
        );
    }
    let odd = [
        (v.unacknowledged, "sights of writes never acknowledged"),
        (
            v.never_sent,
            "sights of stamps never sent (made up by the server)",
        ),
        (v.unexpected, "sights by users outside the write's team"),
        (v.foreign, "stamps of another run"),
        (v.garbled, "stamps garbled"),
        (
            v.untracked,
            "writes or sights past the bounds, not followed",
        ),
    ];
    for (n, what) in odd.iter().filter(|(n, _)| *n > 0) {
        let _ = writeln!(out, "    {what}: {n}");
    }
    for u in &v.unseen_writes {
        let _ = writeln!(out, "    unseen: {u}");
    }
    if v.unseen_unnamed > 0 {
        let _ = writeln!(out, "    and {} more unseen writes", v.unseen_unnamed);
    }
}

/// The latency's two parts: the wait for the observer's next look (the workload's) and
/// the staleness after it (the server's), with what the round's end cut short.
pub(super) fn latency_parts(r: &crate::report::model::VisibilityRow) -> Option<String> {
    let part = |p: &crate::report::model::LatencyPart| {
        let cut = match p.censored {
            0 => String::new(),
            n => format!(" ({n} still open at the round's end)"),
        };
        format!(
            "p50 {} · p99 {} · max {} ms{cut}",
            p.text("p50"),
            p.text("p99"),
            p.text("max")
        )
    };
    let gap = r.poll_gap_ms.as_ref()?;
    let mut s = format!("waiting for a look (the workload's): {}", part(gap));
    if let Some(st) = &r.staleness_ms {
        s.push_str(&format!(" · then stale (the server's): {}", part(st)));
    }
    Some(s)
}

pub(super) fn sight_latency(r: &crate::report::model::VisibilityRow) -> String {
    r.latency_ms.as_ref().map_or(String::new(), |l| {
        format!(
            " · p50 {:.1} ms · p99 {:.1} ms · max {:.1} ms",
            l.p50, l.p99, l.max
        )
    })
}

/// Destinations shown one by one; the rest are summed.
pub(super) const LEDGER_ROWS: usize = 10;

/// Per destination, what the stamps say: sent, received, drained, lost, duplicated, out
/// of order, foreign.
pub(super) fn ledger(out: &mut String, l: &crate::ledger::LedgerRecord) {
    let _ = writeln!(
        out,
        "  by stamp{}:",
        match l.drained {
            true => " (every destination drained after its round: lost is lost)",
            false => " (not drained: lost counts what may still be on the broker)",
        }
    );
    for d in l.destinations.iter().take(LEDGER_ROWS) {
        let _ = writeln!(out, "    {}: {}", d.name, ledger_words(&d.counts));
    }
    if l.destinations.len() > LEDGER_ROWS {
        let mut rest = crate::ledger::Counts::default();
        for d in &l.destinations[LEDGER_ROWS..] {
            rest.add(&d.counts);
        }
        let _ = writeln!(
            out,
            "    {} more destination(s): {}",
            l.destinations.len() - LEDGER_ROWS,
            ledger_words(&rest)
        );
    }
}

/// A destination's counts in words; the ones that are 0 and usually are, left out.
pub fn ledger_words(c: &crate::ledger::Counts) -> String {
    let mut w = format!(
        "sent {} · received {} · drained {} · lost {} · duplicated {} · out of order {}",
        c.sent, c.received, c.drained, c.lost, c.duplicated, c.out_of_order
    );
    let extra = [
        (c.redelivered, "redelivered"),
        (c.lost_failed, "of the lost, sends that had failed"),
        (
            c.not_drained,
            "not drained (its drain stopped: they may be on the broker still)",
        ),
        (c.send_failed, "sends failed"),
        (c.foreign, "foreign"),
        (c.untracked, "untracked"),
        (c.unsent, "taken but never sent (stamps forged or mangled)"),
    ];
    for (n, what) in extra.iter().filter(|(n, _)| *n > 0) {
        let _ = write!(w, " · {what} {n}");
    }
    w
}
