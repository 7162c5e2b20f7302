//! `loadmix merge`: one report from the reports of a sharded run's N shards, exact where
//! the shards' reports allow it. Counts, bytes and answers add; HdrHistograms are added,
//! never percentiles averaged; per-second timelines are laid on one wall clock; a round's
//! ops/s is the sum of the shards'. What each shard saw of itself (its generator's health)
//! is listed per shard. The server's monitors are taken from one shard: every shard
//! watched the same server, so adding them would count it N times.
//!
//! Shards of different workloads, seeds or shard counts, a missing or a duplicated shard,
//! and a shard that is no shard are refused, naming which, before anything is written.

use super::model::{self, OpReport, Report, RoundReport, Summary};
use crate::metrics::OpStats;
use crate::workload::Workload;

mod rounds;
mod shards;

use rounds::merge_round;
use shards::{check, made_by};

/// Why shards' reports could not be merged.
#[derive(Debug, thiserror::Error, PartialEq)]
pub enum MergeError {
    /// No report was given.
    #[error("give the reports of every shard of one run (at least one)")]
    Nothing,
    /// A report of a whole run, not of a shard.
    #[error("{0}: not a shard's report (run with --shard I/N)")]
    NotAShard(String),
    /// Reports of different runs, or settings that differ.
    #[error("{0}")]
    Mismatch(String),
    /// A shard's report is missing.
    #[error("shard {index} of {count} is missing")]
    Missing {
        /// The missing shard.
        index: u32,
        /// How many shards the run had.
        count: u32,
    },
    /// One shard's report twice.
    #[error("shard {index} is given twice: {first} and {second}")]
    Duplicate {
        /// The shard.
        index: u32,
        /// The first file.
        first: String,
        /// The second.
        second: String,
    },
    /// A report whose figures do not add up.
    #[error("{0}")]
    Corrupt(String),
}

/// A shard's report and the file it came from (for messages).
pub struct ShardReport {
    /// The file it was read from.
    pub file: String,
    /// The report.
    pub report: Report,
}

/// One report from every shard's, held against `workload` (the one they carry, read
/// again) when it could be read. Its thresholds are evaluated on the merged figures by
/// the caller.
pub fn merge(shards: Vec<ShardReport>, workload: Option<&Workload>) -> Result<Report, MergeError> {
    let shards = check(shards)?;
    if let Some(w) = workload {
        made_by(&shards, w)?;
    }
    let r0 = &shards[0].report;
    let (rounds, over) = merged_rounds(&shards)?;
    let mut summary = merged_summary(&rounds, over);
    summary.mix = model::mix::of(&r0.workload.classes, &summary.ops);
    // The earliest and the latest of a time every shard has (RFC 3339 in UTC, all with
    // milliseconds, so their text sorts as their times do).
    let span = |f: fn(&Report) -> &String| {
        let mut v: Vec<&String> = shards.iter().map(|s| f(&s.report)).collect();
        v.sort();
        (
            v.first().map(|x| x.to_string()).unwrap_or_default(),
            v.last().map(|x| x.to_string()).unwrap_or_default(),
        )
    };
    let mut failures: Vec<model::FailureInfo> = shards
        .iter()
        .flat_map(|s| s.report.failures.iter().cloned())
        .collect();
    failures.truncate(crate::engine::MAX_FAILURE_NOTES);
    let ledger = merged_ledger(&shards)?;
    Ok(Report {
        schema: model::SCHEMA.to_string(),
        tool: r0.tool.clone(),
        host: model::host(),
        run_id: format!("merged-{}", r0.run_id),
        started_at: span(|r| &r.started_at).0,
        finished_at: span(|r| &r.finished_at).1,
        interrupted: shards.iter().any(|s| s.report.interrupted),
        target: r0.target.clone(),
        name: r0.name.clone(),
        note: r0.note.clone(),
        labels: r0.labels.clone(),
        tls: r0.tls.clone(),
        seed: r0.seed,
        workload: r0.workload.clone(),
        warmup_rounds: r0.warmup_rounds.clone(),
        order: r0.order.clone(),
        shard: None,
        target_clock: None,
        shards: shard_runs(&shards),
        rounds,
        summary,
        thresholds: r0
            .thresholds
            .iter()
            .map(|t| model::ThresholdInfo {
                observed: None,
                passed: false,
                ..t.clone()
            })
            .collect(),
        failures,
        ledger,
        visibility: merged_visibility(shards.iter().map(|s| s.report.visibility.as_ref()))?,
        preflight: shards.iter().fold(model::Untimed::default(), |mut a, s| {
            a.add(&s.report.preflight);
            a
        }),
    })
}

/// The shards' visibility sections added up (a sharded run keeps each team whole on
/// one shard, so each section holds whole teams); `None` without teams.
fn merged_visibility<'a>(
    parts: impl Iterator<Item = Option<&'a model::VisibilityRecord>>,
) -> Result<Option<model::VisibilityRecord>, MergeError> {
    let parts: Vec<&model::VisibilityRecord> = parts.flatten().collect();
    if parts.is_empty() {
        return Ok(None);
    }
    model::VisibilityRecord::merged(&parts)
        .map(Some)
        .map_err(MergeError::Corrupt)
}

/// The shards' ledgers added up: a message sent on one shard and received on another is
/// neither lost nor foreign, and one received on two is a duplicate.
fn merged_ledger(
    shards: &[ShardReport],
) -> Result<Option<crate::ledger::LedgerRecord>, MergeError> {
    let mut merged: Option<crate::ledger::Ledger> = None;
    for s in shards {
        let Some(rec) = &s.report.ledger else {
            continue;
        };
        let l = crate::ledger::Ledger::from_record(rec).map_err(|why| {
            MergeError::Corrupt(format!(
                "{}: its message ledger is not one loadmix wrote: {why}",
                s.file
            ))
        })?;
        match merged.as_mut() {
            None => merged = Some(l),
            Some(m) => {
                let drained = m.drained && l.drained;
                m.absorb(l);
                m.drained = drained;
            }
        }
    }
    Ok(merged.map(|l| l.to_record(true)))
}

/// Per operation over rounds: its name, class, merged figures and each round's summed rate.
type OverRounds = Vec<(String, Option<String>, OpStats, Vec<f64>)>;

/// Every round merged over the shards, and each operation's figures over the rounds.
fn merged_rounds(shards: &[ShardReport]) -> Result<(Vec<RoundReport>, OverRounds), MergeError> {
    let mut rounds = Vec::new();
    let mut over: OverRounds = Vec::new();
    for i in 0..shards[0].report.rounds.len() {
        let (round, ops) = merge_round(shards, i)?;
        rounds.push(round);
        for (name, class, stats, rate) in ops {
            match over.iter_mut().find(|(n, ..)| *n == name) {
                Some((_, _, s, rates)) => {
                    s.merge(&stats);
                    rates.push(rate);
                }
                None => over.push((name, class, stats, vec![rate])),
            }
        }
    }
    Ok((rounds, over))
}

/// The summary across the merged rounds, as one process's report has it.
fn merged_summary(rounds: &[RoundReport], mut over: OverRounds) -> Summary {
    let mut take = |name: &str| {
        over.iter().position(|(n, ..)| n == name).map(|k| {
            let (_, _, s, r) = over.remove(k);
            (s, r)
        })
    };
    let (total_stats, total_rates) = take("total").unwrap_or_default();
    let sent = take("sent");
    let received = take("received");
    let sum_op = |name: &str, s: &Option<(OpStats, Vec<f64>)>| {
        s.as_ref().map(|(s, r)| model::summary_op(name, None, s, r))
    };
    // The headline: the first sum with requests (see `model::sums`).
    let (headline, headline_rates) = [
        Some(&(total_stats.clone(), total_rates.clone())),
        sent.as_ref(),
        received.as_ref(),
    ]
    .into_iter()
    .flatten()
    .find(|(s, _)| s.requests > 0)
    .map_or((0, total_rates.clone()), |(s, r)| (s.successes, r.clone()));
    let (requests, successes) = [
        Some(&total_stats),
        sent.as_ref().map(|x| &x.0),
        received.as_ref().map(|x| &x.0),
    ]
    .into_iter()
    .flatten()
    .fold((0, 0), |(r, s), o| (r + o.requests, s + o.successes));
    let summary_ops: Vec<OpReport> = over
        .iter()
        .map(|(n, c, s, r)| model::summary_op(n, c.as_ref(), s, r))
        .collect();
    let mut generator_warnings: Vec<String> = Vec::new();
    for w in rounds.iter().flat_map(|r| r.generator.warnings.iter()) {
        if !generator_warnings.contains(w) {
            generator_warnings.push(w.clone());
        }
    }
    let mut summary = Summary {
        rounds: rounds.len(),
        measured_s: rounds.iter().map(|r| r.measured_s).sum(),
        ops: summary_ops,
        total: model::summary_op("total", None, &total_stats, &total_rates),
        sent: sum_op("sent", &sent),
        received: sum_op("received", &received),
        success_ratio: if requests == 0 {
            0.0
        } else {
            successes as f64 / requests as f64
        },
        generator_warnings,
        server: model::server_summary(rounds, headline),
        metrics: model::series_summary(rounds),
        drift: model::drift(rounds, &headline_rates),
        mix: Vec::new(),
    };
    summary.rebase_metrics();
    summary
}

/// Each shard as the merged report lists it.
fn shard_runs(shards: &[ShardReport]) -> Vec<model::ShardRun> {
    shards
        .iter()
        .map(|s| model::ShardRun {
            index: s.report.shard.map_or(0, |i| i.index),
            count: s.report.shard.map_or(1, |i| i.count),
            file: s.file.clone(),
            run_id: s.report.run_id.clone(),
            hostname: s.report.host.hostname.clone(),
            started_at: s.report.started_at.clone(),
            requests: s.report.summary.total.requests,
            generator_warnings: s.report.summary.generator_warnings.clone(),
            target_clock: s.report.target_clock,
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::rounds::stats_of;
    use super::*;
    use crate::answer::Answer;
    use crate::report::model::{ShardInfo, decode_histogram};
    use crate::transport::ErrorClass;

    fn example() -> Report {
        let path =
            std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("reports/example/run.json");
        crate::report::load(&path).unwrap()
    }

    /// The example run, as shard `index` of `count`.
    fn shard(index: u32, count: u32) -> ShardReport {
        let mut r = example();
        r.shard = Some(ShardInfo { index, count });
        ShardReport {
            file: format!("s{index}.json"),
            report: r,
        }
    }

    #[test]
    fn merging_adds_counts_and_histograms_exactly() {
        let one = example();
        let merged = merge((0..3).map(|i| shard(i, 3)).collect(), None).unwrap();
        assert_eq!(merged.shards.len(), 3);
        let (a, m) = (&one.summary.total, &merged.summary.total);
        assert_eq!(m.requests, 3 * a.requests);
        assert_eq!(m.successes, 3 * a.successes);
        assert_eq!(m.bytes_received, 3 * a.bytes_received);
        for (k, v) in &a.status {
            assert_eq!(m.status[k], 3 * v);
        }
        // The histogram is the three added, value for value; so are its percentiles.
        let mut h = decode_histogram(&a.histogram).unwrap();
        let copy = h.clone();
        h.add(&copy).unwrap();
        h.add(&copy).unwrap();
        assert_eq!(decode_histogram(&m.histogram).unwrap(), h);
        assert_eq!(m.latency_ms.p99, a.latency_ms.p99);
        assert!((m.latency_ms.mean - a.latency_ms.mean).abs() < 1e-9);
        assert!((m.latency_ms.stddev - a.latency_ms.stddev).abs() < 1e-6);
        // A round's rate is the shards' summed; the timeline aligns second by second.
        for (x, y) in one.rounds.iter().zip(&merged.rounds) {
            assert!((y.total.ops_per_sec - 3.0 * x.total.ops_per_sec).abs() < 1e-6);
            assert_eq!(y.total.timeline.len(), x.total.timeline.len());
            assert_eq!(
                y.total.timeline[0].requests,
                3 * x.total.timeline[0].requests
            );
            assert_eq!(y.vus, 3 * x.vus);
        }
        for (x, y) in one.summary.ops.iter().zip(&merged.summary.ops) {
            assert_eq!((y.op.as_str(), y.requests), (x.op.as_str(), 3 * x.requests));
        }
    }

    #[test]
    fn samples_split_over_shards_merge_to_what_one_process_records() {
        use crate::metrics::{PRIOR_ANSWERS, Sample};
        // 3,000 samples of varied latency, answer and error, recorded once whole and once
        // dealt out over three shards' figures. Some are HTTP, some a broker's words.
        let receipt = Answer::named("stomp", "RECEIPT", None, None);
        let refused = Answer::named("stomp", "ERROR", None, Some("queue full"));
        let answer = |i: u64| match i % 4 {
            _ if i.is_multiple_of(17) => Answer::http(500),
            0 | 1 => Answer::http(200),
            2 => receipt,
            _ => refused,
        };
        let sample = |i: u64| Sample {
            label: 0,
            start_us: i * 997 % 5_000_000,
            latency_us: 50 + (i * 7_919) % 250_000,
            answer: answer(i),
            prior: [crate::metrics::NO_PRIOR; PRIOR_ANSWERS],
            error: i.is_multiple_of(17).then_some(ErrorClass::Status),
            bytes_sent: 100 + i % 7,
            bytes_received: 1_000 + i % 13,
            corrected_us: 60 + (i * 7_919) % 250_000,
            lag_us: 0,
            scheduled: true,
            connect_us: None,
            tls_us: None,
            tls_resumed: false,
            step: false,
            skipped: false,
            pick: 0,
        };
        let mut whole = OpStats::default();
        let mut parts = vec![OpStats::default(), OpStats::default(), OpStats::default()];
        for i in 0..3_000u64 {
            whole.record(&sample(i));
            parts[(i % 3) as usize].record(&sample(i));
        }
        let one = model::op_report("a.x", None, &whole, 1.0, true);
        let mut merged = OpStats::default();
        for p in &parts {
            let report = model::op_report("a.x", None, p, 1.0, true);
            merged.merge(&stats_of(&report, "shard").unwrap());
        }
        let m = model::op_report("a.x", None, &merged, 1.0, true);
        assert_eq!(m.histogram, one.histogram, "the same serialised histogram");
        assert_eq!(m.histogram_corrected, one.histogram_corrected);
        assert_eq!(
            (
                m.requests,
                m.successes,
                m.failures,
                m.bytes_sent,
                m.bytes_received
            ),
            (
                one.requests,
                one.successes,
                one.failures,
                one.bytes_sent,
                one.bytes_received
            )
        );
        assert_eq!((&m.status, &m.errors), (&one.status, &one.errors));
        assert_eq!(m.answers, one.answers);
        let said = |r: &OpReport, name: &str| {
            r.answers
                .iter()
                .find(|a| a.name == name)
                .map_or(0, |a| a.count)
        };
        let expected = |a: Answer| (0..3_000u64).filter(|&i| answer(i) == a).count() as u64;
        assert_eq!(said(&m, "RECEIPT"), expected(receipt));
        assert_eq!(said(&m, "ERROR"), expected(refused));
        assert!(expected(receipt) > 0 && expected(refused) > 0);
        assert_eq!(
            m.status.values().sum::<u64>() + said(&m, "RECEIPT") + said(&m, "ERROR"),
            3_000
        );
        assert_eq!(m.timeline, one.timeline);
        assert_eq!(m.latency_ms.p99, one.latency_ms.p99);
        assert!((m.latency_ms.mean - one.latency_ms.mean).abs() < 1e-9);
        assert!((m.latency_ms.stddev - one.latency_ms.stddev).abs() < 1e-6);
    }

    #[test]
    fn the_servers_cost_is_per_operation_of_every_shard() {
        // Only shard 0 watched the server; it served both shards' operations.
        let mut watched = shard(0, 2);
        for r in &mut watched.report.rounds {
            r.server = vec![model::ServerProcess {
                process: "postgres".into(),
                cpu_user_s: 2.0,
                cpu_system_s: 1.0,
                cpu_ms_per_op: 3000.0 / r.total.successes as f64,
                ..Default::default()
            }];
        }
        let merged = merge(vec![watched, shard(1, 2)], None).unwrap();
        for r in &merged.rounds {
            let p = &r.server[0];
            assert!(
                (p.cpu_ms_per_op - 3000.0 / r.total.successes as f64).abs() < 1e-9,
                "{} against {} operations",
                p.cpu_ms_per_op,
                r.total.successes
            );
        }
        let all: u64 = merged.rounds.iter().map(|r| r.total.successes).sum();
        let p = &merged.summary.server[0];
        assert!((p.cpu_ms_per_op - 3000.0 * merged.rounds.len() as f64 / all as f64).abs() < 1e-9);
    }

    #[test]
    fn shards_that_are_not_one_run_are_refused_saying_which() {
        assert_eq!(merge(vec![], None).unwrap_err(), MergeError::Nothing);
        let e = merge(vec![shard(0, 3), shard(2, 3)], None).unwrap_err();
        assert_eq!(e, MergeError::Missing { index: 1, count: 3 });
        let e = merge(vec![shard(0, 2), shard(1, 2), shard(1, 2)], None).unwrap_err();
        assert!(matches!(e, MergeError::Duplicate { index: 1, .. }), "{e}");
        let e = merge(vec![shard(0, 2), shard(1, 3)], None).unwrap_err();
        assert!(e.to_string().contains("shard counts 2 and 3"), "{e}");
        let mut other = shard(1, 2);
        other.report.workload.hash = "f00d".repeat(16);
        other.report.workload.name = "other".into();
        let e = merge(vec![shard(0, 2), other], None)
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("s0.json and s1.json are not shards of one run: workloads"),
            "{e}"
        );
        let mut seed = shard(1, 2);
        seed.report.seed += 1;
        assert!(
            merge(vec![shard(0, 2), seed], None)
                .unwrap_err()
                .to_string()
                .contains("seeds")
        );
        let mut whole = shard(0, 1);
        whole.report.shard = None;
        assert_eq!(
            merge(vec![whole], None).unwrap_err(),
            MergeError::NotAShard("s0.json".into())
        );
        let mut corrupt = shard(1, 2);
        corrupt.report.rounds[0].total.histogram = "not base64!".into();
        assert!(matches!(
            merge(vec![shard(0, 2), corrupt], None).unwrap_err(),
            MergeError::Corrupt(_)
        ));
        // A connect-time histogram that does not read is refused too, not dropped.
        let mut phase = shard(1, 2);
        let p = phase.report.rounds[0].total.connect_ms.as_mut();
        p.expect("the example opened connections").histogram = "???".into();
        assert!(matches!(
            merge(vec![shard(0, 2), phase], None).unwrap_err(),
            MergeError::Corrupt(_)
        ));
    }

    #[test]
    fn a_refinement_label_one_shard_saw_and_another_did_not_is_merged() {
        // A label such as `consumer.receive_empty` is listed only where it occurred.
        let mut extra = shard(1, 2);
        let class = extra.report.workload.classes[0].name.clone();
        let mut seen = extra.report.rounds[0].ops[0].clone();
        seen.op = format!("{class}.refinement");
        extra.report.rounds[0].ops.push(seen.clone());
        extra.report.summary.ops.push(seen);
        let merged = merge(vec![shard(0, 2), extra], None).unwrap();
        let name = format!("{class}.refinement");
        assert!(merged.summary.ops.iter().any(|o| o.op == name));
        assert!(merged.rounds[0].ops.iter().any(|o| o.op == name));

        let mut stray = shard(1, 2);
        let mut other = stray.report.summary.ops[0].clone();
        other.op = "elsewhere.op".into();
        stray.report.summary.ops.push(other);
        let e = merge(vec![shard(0, 2), stray], None)
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("operations") && e.contains("elsewhere.op"),
            "{e}"
        );
    }

    #[test]
    fn shards_whose_figures_cannot_be_true_are_refused() {
        let refused = |change: fn(&mut Report), says: &str| {
            let mut bad = shard(1, 2);
            change(&mut bad.report);
            let e = merge(vec![shard(0, 2), bad], None).unwrap_err().to_string();
            assert!(e.contains(says), "{says}: {e}");
        };
        refused(|r| r.summary.ops[0].op = "renamed".into(), "operations");
        refused(|r| r.rounds[0].elapsed_s = 1e308, "elapsed_s 1e308");
        refused(|r| r.rounds[0].measured_s = -1.0, "measured_s -1e0");
        refused(|r| r.rounds[0].total.requests += 1, "are not its");
        refused(
            |r| {
                let one = r.rounds[0].per_second[0].clone();
                r.rounds[0].per_second = vec![one; 10_000];
            },
            "per-second entries",
        );
    }

    #[test]
    fn a_report_with_a_count_no_run_makes_is_refused_when_read() {
        let dir = tempfile::tempdir().unwrap();
        let path =
            std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("reports/example/run.json");
        let text = std::fs::read_to_string(path).unwrap();
        let mut v: serde_json::Value = serde_json::from_str(&text).unwrap();
        v["rounds"][0]["total"]["requests"] = serde_json::json!(u64::MAX);
        let p = dir.path().join("big.json");
        std::fs::write(&p, v.to_string()).unwrap();
        let e = crate::report::load(&p).unwrap_err().to_string();
        assert!(e.contains("larger than any run makes"), "{e}");
        assert!(e.contains("rounds"), "{e}");
    }
}
