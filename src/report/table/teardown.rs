//! The console report's untimed work and failures: the requests outside the clock,
//! the cleanup and the brokers' drain after each round, and the failures by kind.

use std::fmt::Write;

use crate::report::model::{OpReport, Report};

/// The requests sent off the clock before the rounds: the preflight's and the users'
/// set-ups', by method and status.
pub(super) fn untimed(out: &mut String, r: &Report) {
    let mut all = r.preflight.clone();
    for x in &r.rounds {
        all.add(&x.setup);
    }
    if all.is_empty() {
        return;
    }
    let answers: Vec<String> = all
        .answers
        .iter()
        .map(|(k, n)| format!("{k}×{n}"))
        .collect();
    // How long the users' set-ups held the clock back, in all: a large calendar or
    // address book can take minutes to fill, which the figures never show.
    let took: f64 = r.rounds.iter().map(|x| x.setup_s).sum();
    let took = match took >= 0.05 {
        true => format!(", which took {took:.1} s before the clock"),
        false => String::new(),
    };
    let _ = writeln!(
        out,
        "set-up: {} request(s) off the clock ({} in the preflight, the rest in the users' set-ups{took}): {}",
        all.requests,
        r.preflight.requests,
        answers.join(", ")
    );
    let failed: u64 = r.rounds.iter().map(|x| x.setup_failures).sum();
    if failed > 0 {
        let first = r
            .failures
            .iter()
            .find(|f| f.detail.starts_with("set-up of "))
            .map(|f| format!(" First, in round {}: {}", f.round, f.detail))
            .unwrap_or_default();
        let _ = writeln!(
            out,
            "WARNING: {failed} user set-up(s) failed and were not retried; those users ran anyway, and what they could not do failed in the round.{first}"
        );
    }
}

/// What the rounds deleted after themselves, and what they could not.
pub(super) fn cleanup(out: &mut String, r: &Report) {
    let (cleaned, cleanup_failed) = r.rounds.iter().fold((0, 0), |a, x| {
        (a.0 + x.cleanup.requests, a.1 + x.cleanup.failures)
    });
    if cleaned > 0 {
        let _ = writeln!(
            out,
            "cleanup: {cleaned} request(s) after the rounds deleted what they made, {cleanup_failed} failed"
        );
        for f in r.rounds.iter().flat_map(|x| &x.cleanup.failed).take(5) {
            let _ = writeln!(out, "  cleanup failed: {f}");
        }
    }
    for (i, c) in r.rounds.iter().map(|x| (x.index, &x.cleanup)) {
        if let Some(why) = &c.cut_short {
            let _ = writeln!(
                out,
                "WARNING: round {i}'s cleanup was cut short by {why}: {} item(s) not known to be deleted",
                c.left
            );
            for item in c.left_items.iter().take(5) {
                let _ = writeln!(out, "  left: {item}");
            }
        }
    }
    drain(out, r);
}

/// What the brokers' teardown took from the destinations the rounds used.
pub(super) fn drain(out: &mut String, r: &Report) {
    let sum = |f: fn(&crate::report::model::Cleanup) -> u64| {
        r.rounds.iter().map(|x| f(&x.cleanup)).sum::<u64>()
    };
    let dests = sum(|c| c.drained_destinations);
    if dests == 0 {
        return;
    }
    let _ = writeln!(
        out,
        "drain: after the rounds, {} message(s) taken from {dests} destination(s), {} queue(s) the run declared deleted, {} failed",
        sum(|c| c.drained_messages),
        sum(|c| c.deleted_queues),
        sum(|c| c.drain_failures),
    );
    let failed = r.rounds.iter().flat_map(|x| &x.cleanup.failed);
    for f in failed.filter(|f| f.starts_with("draining")).take(5) {
        let _ = writeln!(out, "  drain failed: {f}");
    }
}

/// Per failing operation its error classes and answers, then the first failures' details.
pub(super) fn failures(out: &mut String, r: &Report) {
    let s = &r.summary;
    let failing: Vec<&OpReport> = s.ops.iter().filter(|o| o.failures > 0).collect();
    if !failing.is_empty() {
        let _ = writeln!(out, "\nfailures:");
        for o in failing {
            let errs: Vec<String> = o.errors.iter().map(|(k, v)| format!("{k} {v}")).collect();
            let codes: Vec<String> = o
                .answer_counts()
                .iter()
                .map(|(k, v)| format!("{k}×{v}"))
                .collect();
            let _ = writeln!(
                out,
                "  {}: {} failed ({}); responses {}",
                o.op,
                o.failures,
                errs.join(", "),
                if codes.is_empty() {
                    "none".to_string()
                } else {
                    codes.join(" ")
                }
            );
        }
        for f in r.failures.iter().take(5) {
            let _ = writeln!(
                out,
                "  e.g. round {} {} [{}]: {}",
                f.round, f.op, f.error, f.detail
            );
        }
    }
}
