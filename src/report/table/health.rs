//! The console report's notes on the run's health: the generator's own load and lateness,
//! each class's start lag, rounds that ran past their bell, behaviours' sessions, stray
//! answers, shards and the target's clock, warm-up and drift.

use std::fmt::Write;

use comfy_table::presets::UTF8_FULL_CONDENSED;
use comfy_table::{CellAlignment, ContentArrangement, Table};

use crate::report::figures::{SESSION_COLUMNS, renormalised, session_rows};
use crate::report::model::Report;

/// The generator's own health: CPU, scheduling lag, dropped arrivals, the host.
pub(super) fn generator(out: &mut String, r: &Report) {
    if let Some(g) = r.rounds.first().map(|x| &x.generator) {
        let lag = r
            .rounds
            .iter()
            .map(|x| x.generator.lag_p99_ms)
            .fold(0.0, f64::max);
        let cpu = r.rounds.iter().map(|x| x.generator.cpu_mean).sum::<f64>()
            / r.rounds.len().max(1) as f64;
        let (dropped, late): (u64, u64) = r.rounds.iter().fold((0, 0), |a, x| {
            (a.0 + x.generator.dropped, a.1 + x.generator.late)
        });
        let _ = write!(
            out,
            "generator: CPU {cpu:.0}% of {} cores on average · scheduling lag p99 {lag:.2} ms",
            g.cores
        );
        let served: Vec<f64> = r
            .rounds
            .iter()
            .filter_map(|x| x.generator.embedded_cpu_mean)
            .collect();
        if !served.is_empty() {
            let server = served.iter().sum::<f64>() / served.len() as f64;
            let _ = write!(
                out,
                " (of which the embedded server {server:.0}%, the generator {:.0}%: they share these cores)",
                (cpu - server).max(0.0)
            );
        }
        cost_per_op(out, r);
        if dropped + late > 0 {
            let _ = write!(out, " · arrivals dropped {dropped}, late {late}");
        }
        let n = r.rounds.len().max(1) as f64;
        let busy = r
            .rounds
            .iter()
            .map(|x| x.generator.host_busy_mean)
            .sum::<f64>()
            / n;
        let steal = r.rounds.iter().map(|x| x.generator.steal_mean).sum::<f64>() / n;
        let _ = write!(out, " · host {busy:.0}% busy");
        if steal >= 1.0 {
            let _ = write!(out, ", {steal:.0}% stolen");
        }
        out.push('\n');
        class_cost(out, r);
        class_lag(out, r);
    }
}

/// What each class's operations cost the generator over the run, when there are two
/// classes or more: each one's share of its CPU, per operation and in all.
fn class_cost(out: &mut String, r: &Report) {
    let mut all = Vec::new();
    for x in &r.rounds {
        crate::report::model::add_class_cpu(&mut all, &x.generator.class_cpu);
    }
    all.iter_mut()
        .for_each(crate::report::model::ClassCpu::per_op);
    let total: f64 = all.iter().map(|c| c.cpu_s).sum();
    if all.len() < 2 || total <= 0.0 {
        return;
    }
    let each: Vec<String> = all
        .iter()
        .map(|c| {
            let share = c.cpu_s / total * 100.0;
            match c.cpu_ms_per_op {
                None => format!("{} no operation ({share:.0}%)", c.class),
                Some(ms) => format!("{} {ms:.3} ms ({share:.0}%)", c.class),
            }
        })
        .collect();
    let _ = writeln!(
        out,
        "generator CPU per operation by class (shared out by the time each class's users ran): {}",
        each.join("; ")
    );
}

/// What an operation cost the generator in CPU over the run, beside what it cost the
/// server (the embedded one's threads, or the first process watched without a problem).
fn cost_per_op(out: &mut String, r: &Report) {
    if r.rounds.iter().any(|x| x.generator.cpu_ms_per_op.is_none()) {
        return;
    }
    let ops: u64 = r.rounds.iter().map(|x| x.headline().successes).sum();
    let ms = |cpu_s: f64| cpu_s * 1000.0 / ops.max(1) as f64;
    let own = ms(r.rounds.iter().map(|x| x.generator.cpu_s).sum());
    let _ = write!(out, " · CPU per operation: generator {own:.3} ms");
    let embedded: Option<f64> = r.rounds.iter().map(|x| x.generator.embedded_cpu_s).sum();
    let server = match embedded {
        Some(e) => Some(("the embedded server".to_string(), ms(e))),
        None => r
            .summary
            .server
            .iter()
            .find(|p| p.problem.is_none())
            .map(|p| (format!("the server ({})", p.process), p.cpu_ms_per_op)),
    };
    if let Some((who, ms)) = server {
        let _ = write!(out, ", {who} {ms:.3} ms");
        if ms > 0.0 {
            let _ = write!(out, " ({:.2}×)", own / ms);
        }
    }
}

/// Each class's start lag, its worst round: how late the generator itself started the
/// class's operations (never in their corrected latency).
pub(super) fn class_lag(out: &mut String, r: &Report) {
    let mut worst: Vec<crate::report::model::ClassLag> = Vec::new();
    for l in r.rounds.iter().flat_map(|x| &x.generator.class_lag) {
        match worst.iter_mut().find(|w| w.class == l.class) {
            Some(w) if l.p99_ms > w.p99_ms => *w = l.clone(),
            Some(_) => {}
            None => worst.push(l.clone()),
        }
    }
    if worst.is_empty() {
        return;
    }
    let each: Vec<String> = worst
        .iter()
        .map(|l| {
            format!(
                "{} p50 {:.3} · p99 {:.3} · max {:.3}",
                l.class, l.p50_ms, l.p99_ms, l.max_ms
            )
        })
        .collect();
    let _ = writeln!(out, "start lag (ms, worst round): {}", each.join("; "));
}

/// Rounds that ran noticeably past their duration: the server was still answering
/// requests sent before the end (counted, over the duration).
pub(super) fn overruns(out: &mut String, r: &Report) {
    for x in &r.rounds {
        if let Some(over) = x
            .overran_s
            .filter(|o| *o >= 0.1 && *o >= 0.02 * x.measured_s)
        {
            let _ = writeln!(
                out,
                "WARNING: round {} ran {over:.2} s past its duration, finishing the requests in flight at its end; they are counted, and ops/s is over the duration",
                x.index
            );
        }
    }
}

/// Classes with behaviours: per behaviour over the rounds, the sessions, how they ended,
/// their length and duration, and the share of sessions against the weight.
pub(super) fn sessions(out: &mut String, r: &Report) {
    let all = crate::report::model::sessions::sum(r.rounds.iter().map(|x| &x.sessions[..]));
    for c in &all {
        let started: u64 = c.behaviours.iter().map(|b| b.started).sum();
        let _ = writeln!(out, "sessions of {} ({started} started):", c.class);
        let mut t = Table::new();
        t.load_preset(UTF8_FULL_CONDENSED)
            .set_content_arrangement(ContentArrangement::Disabled);
        t.set_header(SESSION_COLUMNS.to_vec());
        for row in session_rows(c) {
            t.add_row(row);
        }
        for i in 1..t.column_count() {
            if let Some(col) = t.column_mut(i) {
                col.set_cell_alignment(CellAlignment::Right);
            }
        }
        let _ = writeln!(out, "{t}");
        if let Some(list) = renormalised(c) {
            let _ = writeln!(
                out,
                "  guarded transitions dropped out (the rest renormalised) in: {list}"
            );
        }
    }
}

/// Answers nobody asked for: the server broke the protocol, and what the requests around
/// them were answered may be in doubt.
pub(super) fn unsolicited(out: &mut String, r: &Report) {
    let n: u64 = r.rounds.iter().map(|x| x.unsolicited_answers).sum();
    if n > 0 {
        let _ = writeln!(
            out,
            "WARNING: the server sent {n} times bytes no request asked for (a protocol error \
             of the server): each time the connection was closed and the next request sent \
             on a fresh one; the answer read just before them may have been a stray meant \
             for an earlier request, so it is counted in doubt"
        );
        let doubted: Vec<String> = r
            .summary
            .ops
            .iter()
            .filter(|o| o.in_doubt > 0)
            .map(|o| format!("{} {}", o.op, o.in_doubt))
            .collect();
        if !doubted.is_empty() {
            let _ = writeln!(out, "  answers in doubt: {}", doubted.join(", "));
        }
    }
}

/// The shards a merged report came from, or that this is one; the target's clock.
pub(super) fn shards_and_clock(out: &mut String, r: &Report) {
    if !r.shards.is_empty() {
        let _ = writeln!(
            out,
            "merged from {} shards (loadmix merge):",
            r.shards.len()
        );
        for s in &r.shards {
            let clock = s.target_clock.map_or(String::new(), |c| {
                format!(
                    ", clock {:+.0} ms ± {:.0} against the target",
                    -c.offset_ms, c.plus_minus_ms
                )
            });
            let _ = writeln!(
                out,
                "  shard {}/{}: {} on {}, started {}{clock}, {} requests{}",
                s.index,
                s.count,
                s.file,
                s.hostname,
                s.started_at,
                s.requests,
                if s.generator_warnings.is_empty() {
                    String::new()
                } else {
                    format!(" · WARNING: {}", s.generator_warnings.join("; "))
                }
            );
        }
    }
    if let Some(s) = r.shard {
        let _ = writeln!(
            out,
            "shard {}/{} of a sharded run: merge every shard's run.json with `loadmix merge`",
            s.index, s.count
        );
    }
    // A target clock far from ours makes its logs hard to line up with this report.
    if let Some(c) = r.target_clock
        && (r.shard.is_some() || c.offset_ms.abs() - c.plus_minus_ms > 1000.0)
    {
        let _ = writeln!(
            out,
            "target clock: {:+.0} ms ± {:.0} against this machine's (from {} answers' Date)",
            c.offset_ms, c.plus_minus_ms, c.answers
        );
    }
}

/// Warm-up rounds run first, and a trend across the measured rounds.
pub(super) fn warmup_and_drift(out: &mut String, r: &Report) {
    let s = &r.summary;
    if !r.warmup_rounds.is_empty() {
        let list: Vec<String> = r
            .warmup_rounds
            .iter()
            .map(|w| format!("{:.1}", w.ops_per_sec))
            .collect();
        let _ = writeln!(
            out,
            "warm-up rounds (run first, not counted): {} ops/s",
            list.join(", ")
        );
    }
    if let Some(d) = &s.drift {
        let _ = writeln!(out, "WARNING: drift: {}", d.message);
    }
}
