//! The console report: the 2007 Cosmo table (requests, successes, failures, mean/min/max/
//! stddev, bytes) with throughput and percentiles added, then totals, the success ratio,
//! per-round throughput and a breakdown of failures.

use std::fmt::Write;

use comfy_table::presets::UTF8_FULL_CONDENSED;
use comfy_table::{CellAlignment, ContentArrangement, Table};

use super::figures::{
    SESSION_COLUMNS, backlog_words, backlogs, message_rates, renormalised, server_lines,
    session_rows,
};
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

/// A broker's operations in the units message benchmarks use: messages per second and
/// per minute (the unit of the ActiveMQ study), and the bodies' MiB per second.
fn messages(out: &mut String, r: &Report) {
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
fn visibility(out: &mut String, v: &super::model::VisibilityRecord) {
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
fn latency_parts(r: &super::model::VisibilityRow) -> Option<String> {
    let part = |p: &super::model::LatencyPart| {
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

fn sight_latency(r: &super::model::VisibilityRow) -> String {
    r.latency_ms.as_ref().map_or(String::new(), |l| {
        format!(
            " · p50 {:.1} ms · p99 {:.1} ms · max {:.1} ms",
            l.p50, l.p99, l.max
        )
    })
}

/// Destinations shown one by one; the rest are summed.
const LEDGER_ROWS: usize = 10;

/// Per destination, what the stamps say: sent, received, drained, lost, duplicated, out
/// of order, foreign.
fn ledger(out: &mut String, l: &crate::ledger::LedgerRecord) {
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

/// The generator's own health: CPU, scheduling lag, dropped arrivals, the host.
fn generator(out: &mut String, r: &Report) {
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
        class_lag(out, r);
    }
}

/// Each class's start lag, its worst round: how late the generator itself started the
/// class's operations (never in their corrected latency).
fn class_lag(out: &mut String, r: &Report) {
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
fn overruns(out: &mut String, r: &Report) {
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
fn sessions(out: &mut String, r: &Report) {
    let all = super::model::sessions::sum(r.rounds.iter().map(|x| &x.sessions[..]));
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
fn unsolicited(out: &mut String, r: &Report) {
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
fn shards_and_clock(out: &mut String, r: &Report) {
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
fn warmup_and_drift(out: &mut String, r: &Report) {
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

/// The requests sent off the clock before the rounds: the preflight's and the users'
/// set-ups', by method and status.
fn untimed(out: &mut String, r: &Report) {
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
    let _ = writeln!(
        out,
        "set-up: {} request(s) off the clock ({} in the preflight, the rest in the users' set-ups): {}",
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
fn cleanup(out: &mut String, r: &Report) {
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
fn drain(out: &mut String, r: &Report) {
    let sum =
        |f: fn(&super::model::Cleanup) -> u64| r.rounds.iter().map(|x| f(&x.cleanup)).sum::<u64>();
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
fn failures(out: &mut String, r: &Report) {
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
