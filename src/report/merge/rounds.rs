//! One round from the shards' rounds: counts added, histograms added (never percentiles
//! averaged), per-second timelines laid on one wall clock, each shard's generator kept.

use super::{MergeError, ShardReport, merged_visibility};
use crate::answer::Answer;
use crate::metrics::{OpStats, TimelineBucket};
use crate::report::model::{
    self, Cleanup, Generator, OpReport, PerSecond, RoundReport, decode_histogram,
};
use crate::transport::ErrorClass;

/// An operation's figures read back from a report, exactly as far as the report holds
/// them: counts and histograms exactly, the sums behind mean and standard deviation to
/// floating-point precision.
pub(super) fn stats_of(o: &OpReport, file: &str) -> Result<OpStats, MergeError> {
    let corrupt = |what: &str| MergeError::Corrupt(format!("{file}: {}: {what}", o.op));
    let mut s = OpStats {
        requests: o.requests,
        skipped: o.skipped,
        bootstraps: o.bootstraps,
        picked: o.picked,
        successes: o.successes,
        failures: o.failures,
        bytes_sent: o.bytes_sent,
        bytes_received: o.bytes_received,
        clamped: o.clamped,
        tls_resumed: o.tls_resumed,
        in_doubt: o.in_doubt,
        timeline: o.timeline.clone(),
        ..OpStats::default()
    };
    for (k, v) in &o.status {
        let code: u16 = k
            .parse()
            .map_err(|_| corrupt("a status that is no number"))?;
        s.by_answer.insert(Answer::http(code), *v);
    }
    for a in &o.answers {
        *s.by_answer.entry(a.answer()).or_insert(0) += a.count;
    }
    for (k, v) in &o.errors {
        let class = ErrorClass::ALL
            .iter()
            .find(|c| c.name() == k)
            .ok_or_else(|| corrupt("an unknown error class"))?;
        s.by_error[class.index()] = *v;
    }
    s.latency = decode_histogram(&o.histogram).ok_or_else(|| corrupt("no histogram"))?;
    // Every success is in the histogram (a value beyond its range at its top).
    if s.latency.len() != o.successes {
        return Err(corrupt("its histogram and its count of successes disagree"));
    }
    if let Some(h) = &o.histogram_corrected {
        s.latency_corrected =
            decode_histogram(h).ok_or_else(|| corrupt("no corrected histogram"))?;
        s.scheduled = true;
    }
    if let Some(p) = &o.connect_ms {
        s.connecting =
            decode_histogram(&p.histogram).ok_or_else(|| corrupt("no connect-time histogram"))?;
    }
    if let Some(p) = &o.tls_handshake_ms {
        s.tls_handshaking =
            decode_histogram(&p.histogram).ok_or_else(|| corrupt("no handshake-time histogram"))?;
    }
    let n = o.successes as f64;
    let mean_us = o.latency_ms.mean * 1000.0;
    let sd_us = o.latency_ms.stddev * 1000.0;
    s.sum_us = mean_us * n;
    s.sum_sq_us = (sd_us * sd_us + mean_us * mean_us) * n;
    Ok(s)
}

/// Shift a timeline `by` seconds later.
pub(super) fn shifted(t: &[TimelineBucket], by: usize) -> Vec<TimelineBucket> {
    let mut v = vec![TimelineBucket::default(); by];
    v.extend_from_slice(t);
    v
}

/// Milliseconds since the epoch of an RFC 3339 time.
pub(super) fn epoch_ms(s: &str, file: &str) -> Result<i64, MergeError> {
    chrono::DateTime::parse_from_rfc3339(s)
        .map(|t| t.timestamp_millis())
        .map_err(|_| MergeError::Corrupt(format!("{file}: '{s}' is not a time")))
}

/// One operation of one round, merged: its name, class, figures and summed ops/s.
type MergedOp = (String, Option<String>, OpStats, f64);

/// Merge one round of every shard.
pub(super) fn merge_round(
    shards: &[ShardReport],
    i: usize,
) -> Result<(RoundReport, Vec<MergedOp>), MergeError> {
    let (starts, offsets) = round_starts(shards, i)?;
    let mut merged_ops = merged_round_ops(shards, i, &offsets)?;
    let mut sums = Vec::new();
    for name in model::SUM_NAMES {
        if let Some(sum) = merged_round_sum(shards, i, &offsets, name)? {
            sums.push((name, sum));
        }
    }
    let headline = sums
        .iter()
        .map(|(_, (s, _))| s)
        .find(|s| s.requests > 0)
        .map_or(0, |s| s.successes);
    let mut round = merged_round_report(shards, i, &starts, &offsets, headline);
    round.visibility = merged_visibility(
        shards
            .iter()
            .map(|s| s.report.rounds[i].visibility.as_ref()),
    )?;
    round.ops = merged_ops
        .iter()
        .map(|(name, class, stats, rate)| {
            model::op_report(name, class.as_ref(), stats, *rate, true)
        })
        .collect();
    for (name, (stats, rate)) in sums {
        let report = model::op_report(name, None, &stats, rate, true);
        match name {
            "sent" => round.sent = Some(report),
            "received" => round.received = Some(report),
            _ => round.total = report,
        }
        merged_ops.push((name.into(), None, stats, rate));
    }
    round.rebase_metrics();
    Ok((round, merged_ops))
}

/// When each shard's round `i` started (ms since the epoch), and how many seconds after
/// the first shard's: its timeline's offset. A shard far behind is not of this run.
pub(super) fn round_starts(
    shards: &[ShardReport],
    i: usize,
) -> Result<(Vec<i64>, Vec<usize>), MergeError> {
    let starts: Vec<i64> = shards
        .iter()
        .map(|s| epoch_ms(&s.report.rounds[i].started_at, &s.file))
        .collect::<Result<_, _>>()?;
    let first = *starts.iter().min().unwrap_or(&0);
    let mut offsets = Vec::new();
    for (s, t) in shards.iter().zip(&starts) {
        let skew = (t - first + 500) / 1000;
        if skew > crate::report::check::MAX_SKEW_S {
            return Err(MergeError::Mismatch(format!(
                "{}: round {} started {skew} s after the first shard's: not one run",
                s.file,
                i + 1
            )));
        }
        offsets.push(usize::try_from(skew).unwrap_or(0));
    }
    Ok((starts, offsets))
}

/// Each operation of round `i` over every shard, in the order the first shard lists them
/// and then any only others ran: its figures added exactly, timelines aligned, rates added.
pub(super) fn merged_round_ops(
    shards: &[ShardReport],
    i: usize,
    offsets: &[usize],
) -> Result<Vec<MergedOp>, MergeError> {
    let mut names: Vec<(String, Option<String>)> = Vec::new();
    for s in shards {
        for o in &s.report.rounds[i].ops {
            if !names.iter().any(|(n, _)| *n == o.op) {
                names.push((o.op.clone(), o.class.clone()));
            }
        }
    }
    let mut merged_ops = Vec::new();
    for (name, class) in &names {
        let mut stats = OpStats::default();
        let mut rate = 0.0;
        for (s, by) in shards.iter().zip(offsets) {
            if let Some(o) = s.report.rounds[i].ops.iter().find(|o| &o.op == name) {
                let mut x = stats_of(o, &s.file)?;
                x.timeline = shifted(&x.timeline, *by);
                stats.merge(&x);
                rate += o.ops_per_sec;
            }
        }
        merged_ops.push((name.clone(), class.clone(), stats, rate));
    }
    Ok(merged_ops)
}

/// Round `i`'s sum of that name (`total`, `sent`, `received`) over every shard, and its
/// rate; `None` when no shard has it.
pub(super) fn merged_round_sum(
    shards: &[ShardReport],
    i: usize,
    offsets: &[usize],
    name: &str,
) -> Result<Option<(OpStats, f64)>, MergeError> {
    let mut sum: Option<(OpStats, f64)> = None;
    for (s, by) in shards.iter().zip(offsets) {
        let Some(t) = s.report.rounds[i].sum(name) else {
            continue;
        };
        let mut x = stats_of(t, &s.file)?;
        x.timeline = shifted(&x.timeline, *by);
        let (stats, rate) = sum.get_or_insert_with(Default::default);
        stats.merge(&x);
        *rate += t.ops_per_sec;
    }
    Ok(sum)
}

/// Round `i` over every shard, but for its operations and total: counts added, the
/// longest time, the earliest start, the generator of each, the server watched once.
pub(super) fn merged_round_report(
    shards: &[ShardReport],
    i: usize,
    starts: &[i64],
    offsets: &[usize],
    headline_successes: u64,
) -> RoundReport {
    let rounds: Vec<&RoundReport> = shards.iter().map(|s| &s.report.rounds[i]).collect();
    let r0 = rounds[0];
    let sum = |f: fn(&RoundReport) -> u64| rounds.iter().map(|r| f(r)).sum::<u64>();
    let monitored = rounds
        .iter()
        .find(|r| !r.server.is_empty() || !r.metrics.is_empty())
        .copied()
        .unwrap_or(r0);
    // The server served every shard: its cost per operation is over all their operations,
    // not over those of the shard it was watched from.
    let mut server = monitored.server.clone();
    for p in &mut server {
        p.per_ops(headline_successes);
    }
    // Its counters per operation once the round's operations are merged (`merge_round`).
    let metrics = monitored.metrics.clone();
    RoundReport {
        index: r0.index,
        started_at: shards
            .iter()
            .zip(starts)
            .min_by_key(|(_, t)| **t)
            .map(|(s, _)| s.report.rounds[i].started_at.clone())
            .unwrap_or_default(),
        elapsed_s: rounds.iter().map(|r| r.elapsed_s).fold(0.0, f64::max),
        measured_s: rounds.iter().map(|r| r.measured_s).fold(0.0, f64::max),
        overran_s: rounds.iter().filter_map(|r| r.overran_s).reduce(f64::max),
        vus: sum(|r| r.vus),
        connections_opened: sum(|r| r.connections_opened),
        requests_retried: sum(|r| r.requests_retried),
        unsolicited_answers: sum(|r| r.unsolicited_answers),
        sessions: model::sessions::sum(rounds.iter().map(|r| &r.sessions[..])),
        setup: rounds.iter().fold(model::Untimed::default(), |mut a, r| {
            a.add(&r.setup);
            a
        }),
        warmup_requests: sum(|r| r.warmup_requests),
        warmup_s: r0.warmup_s,
        // The shards set up at once: the round waited for the slowest.
        setup_s: rounds.iter().map(|r| r.setup_s).fold(0.0, f64::max),
        setup_failures: sum(|r| r.setup_failures),
        generator: merged_generator(shards, i, headline_successes),
        cleanup: Cleanup {
            requests: sum(|r| r.cleanup.requests),
            failures: sum(|r| r.cleanup.failures),
            failed: rounds
                .iter()
                .flat_map(|r| r.cleanup.failed.iter().cloned())
                .take(10)
                .collect(),
            drained_destinations: sum(|r| r.cleanup.drained_destinations),
            drained_messages: sum(|r| r.cleanup.drained_messages),
            deleted_queues: sum(|r| r.cleanup.deleted_queues),
            drain_failures: sum(|r| r.cleanup.drain_failures),
            cut_short: rounds.iter().find_map(|r| r.cleanup.cut_short.clone()),
            left: sum(|r| r.cleanup.left),
            left_items: rounds
                .iter()
                .flat_map(|r| r.cleanup.left_items.iter().cloned())
                .take(10)
                .collect(),
        },
        // Set by the caller, which may fail on a corrupt histogram.
        visibility: None,
        server,
        metrics,
        per_second: merged_seconds(&rounds, offsets),
        // A sharded run has no fault timeline (`run` refuses one).
        faults: Vec::new(),
        per_second_late: sum(|r| r.per_second_late),
        start_late_ms: rounds
            .iter()
            .filter_map(|r| r.start_late_ms)
            .fold(None, |a: Option<f64>, x| Some(a.map_or(x, |a| a.max(x)))),
        interrupted: rounds.iter().any(|r| r.interrupted),
        // Filled in by the caller.
        total: model::op_report("total", None, &OpStats::default(), 0.0, true),
        sent: None,
        received: None,
        ops: Vec::new(),
    }
}

/// The shards' generators side by side: their CPU added, their lag the worst of them,
/// their warnings named by shard; their CPU per operation over all their operations.
pub(super) fn merged_generator(shards: &[ShardReport], i: usize, successes: u64) -> Generator {
    let mut g = Generator::default();
    for s in shards {
        let x = &s.report.rounds[i].generator;
        let who = s.report.shard.map_or(0, |i| i.index);
        g.cpu_mean += x.cpu_mean;
        g.cpu_s += x.cpu_s;
        if let Some(e) = x.embedded_cpu_s {
            *g.embedded_cpu_s.get_or_insert(0.0) += e;
        }
        if let Some(e) = x.embedded_cpu_mean {
            *g.embedded_cpu_mean.get_or_insert(0.0) += e;
        }
        g.cores += x.cores;
        g.lag_p50_ms = g.lag_p50_ms.max(x.lag_p50_ms);
        g.lag_p99_ms = g.lag_p99_ms.max(x.lag_p99_ms);
        g.lag_max_ms = g.lag_max_ms.max(x.lag_max_ms);
        for l in &x.class_lag {
            match g.class_lag.iter_mut().find(|m| m.class == l.class) {
                Some(m) => {
                    m.operations += l.operations;
                    m.p50_ms = m.p50_ms.max(l.p50_ms);
                    m.p99_ms = m.p99_ms.max(l.p99_ms);
                    m.max_ms = m.max_ms.max(l.max_ms);
                }
                None => g.class_lag.push(l.clone()),
            }
        }
        g.add_class_cpu(&x.class_cpu);
        g.dropped += x.dropped;
        g.late += x.late;
        g.behind += x.behind;
        g.host_busy_mean = g.host_busy_mean.max(x.host_busy_mean);
        g.steal_mean = g.steal_mean.max(x.steal_mean);
        g.run_queue_max = g.run_queue_max.max(x.run_queue_max);
        g.warnings
            .extend(x.warnings.iter().map(|w| format!("shard {who}: {w}")));
    }
    g.per_ops(successes);
    g
}

/// Per-second figures on one clock: failures, time in flight and users add; the
/// percentiles of a second do not, and are left out.
pub(super) fn merged_seconds(rounds: &[&RoundReport], offsets: &[usize]) -> Vec<PerSecond> {
    let mut out: Vec<PerSecond> = Vec::new();
    for (r, by) in rounds.iter().zip(offsets) {
        for (j, s) in r.per_second.iter().enumerate() {
            let k = j + by;
            if out.len() <= k {
                out.resize(k + 1, PerSecond::default());
            }
            let m = &mut out[k];
            for (class, n) in &s.errors {
                let e = m.errors.entry(*class).or_default();
                *e = e.saturating_add(*n);
            }
            m.in_flight += s.in_flight;
            // Counts per latency row add up, as percentiles do not.
            if m.latency_heat.len() < s.latency_heat.len() {
                m.latency_heat.resize(s.latency_heat.len(), 0);
            }
            for (a, b) in m.latency_heat.iter_mut().zip(&s.latency_heat) {
                *a = a.saturating_add(*b);
            }
            if let Some(u) = s.users {
                m.users = Some(m.users.unwrap_or(0) + u);
            }
        }
    }
    out
}
