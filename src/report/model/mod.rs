//! The report as data: JSON schema `loadmix/report/v2`, the source of truth every other
//! format is rendered from. Built from a [`RunResult`] by [`build`]; read back by
//! `loadmix report`. The run as a whole is described here; a round and its seconds in
//! `round.rs`, one operation's figures (counts, answers, latency, histograms) in `op.rs`,
//! the watched server in `server.rs`, the generator's own health in `generator.rs`.

mod faults;
mod generator;
pub(crate) mod mix;
mod op;
mod round;
mod server;
pub(crate) mod sessions;
mod sums;
mod visibility;
pub use visibility::{LatencyPart, VisibilityRecord, VisibilityRow};

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::engine::RunResult;
use crate::metrics::OpStats;
use crate::workload::{Stop, Workload, units};

pub use faults::{FaultConnections, FaultPart, FaultWindow, RecoveryRule};
pub(in crate::report) use generator::add_class_cpu;
pub(crate) use generator::{ClassCpu, ClassLag, Generator, LAG_P99_LIMIT_MS};
pub(crate) use op::Phase;
pub use op::{AnswerCount, OpReport, decode_histogram};
pub(in crate::report) use op::{op_report, rate, summary_op};
pub(crate) use round::{PerSecond, RoundReport};
pub(crate) use server::{JvmFigures, ServerProcess, ServerSeries};
pub(in crate::report) use server::{series_summary, server_summary};
pub(crate) use sums::{NAMES as SUM_NAMES, Sums, is_sum};

pub(crate) const SCHEMA: &str = "loadmix/report/v2";
/// Earlier schemas this version still reads: v1 is v2 without `answers`.
pub(crate) const READS: [&str; 2] = [SCHEMA, "loadmix/report/v1"];

/// A run's report (`run.json`): what ran, against what, and every figure it produced.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Report {
    /// `loadmix/report/v2`.
    pub schema: String,
    /// The loadmix that wrote it.
    pub tool: Tool,
    /// The machine it ran on.
    pub host: Host,
    /// The run's id (in its files' and destinations' names).
    pub run_id: String,
    /// When it started (RFC 3339).
    pub started_at: String,
    /// When it finished (RFC 3339).
    pub finished_at: String,
    /// Stopped early (Ctrl-C): the figures cover what ran.
    pub interrupted: bool,
    /// The target, as given.
    pub target: String,
    /// The target's name (`--target NAME=URL`, or the one loadmix gave it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// What this configuration was, in the user's words (`--note`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
    /// `--label KEY=VALUE`: the configuration's settings, for comparisons.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub labels: BTreeMap<String, String>,
    /// How an https target's certificate was checked; absent for http.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tls: Option<TlsInfo>,
    /// The seed every random stream derives from.
    pub seed: u64,
    /// The workload that ran.
    pub workload: WorkloadInfo,
    /// Whole rounds run first and thrown away (`run.warmup_rounds`): what each did.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub warmup_rounds: Vec<WarmupRoundInfo>,
    /// With several targets: the order their rounds took (`alternate`, `balanced`,
    /// `shuffle`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub order: Option<String>,
    /// The share of a run this process ran (`--shard I/N`); absent for a whole run.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub shard: Option<ShardInfo>,
    /// The target's clock against this machine's, from the `Date` of its answers.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub target_clock: Option<TargetClock>,
    /// A merged run (`loadmix merge`): the shards it was made from.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub shards: Vec<ShardRun>,
    /// Each measured round.
    pub rounds: Vec<RoundReport>,
    /// The rounds together.
    pub summary: Summary,
    /// The workload's thresholds, judged.
    pub thresholds: Vec<ThresholdInfo>,
    /// The first failures, with what came back.
    pub failures: Vec<FailureInfo>,
    /// Through brokers: what producers sent and consumers took, by stamp, per
    /// destination (lost, duplicated, out of order, foreign); absent without a broker.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ledger: Option<crate::ledger::LedgerRecord>,
    /// In teams: how long each write to a shared calendar took to reach the members who
    /// read it, and which writes some never saw; absent without teams.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub visibility: Option<VisibilityRecord>,
    /// The preflight probes' requests, before any round.
    #[serde(default, skip_serializing_if = "Untimed::is_empty")]
    pub preflight: Untimed,
}

/// Requests sent off the clock (a round's set-up, the preflight), by method and status,
/// so that they, the measured ones, the warm-up's and the cleanup's add up to what the
/// server logged.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct Untimed {
    pub requests: u64,
    /// `"PROPFIND 207"` and how many; status 0 is no answer at all.
    pub answers: BTreeMap<String, u64>,
}

impl Untimed {
    pub fn is_empty(&self) -> bool {
        self.requests == 0
    }

    pub fn of(t: &crate::transport::Tally) -> Untimed {
        Untimed {
            requests: t.values().sum(),
            answers: t
                .iter()
                .map(|((m, s), n)| (format!("{m} {s}"), *n))
                .collect(),
        }
    }

    /// Add `o` to this.
    pub fn add(&mut self, o: &Untimed) {
        self.requests = self.requests.saturating_add(o.requests);
        for (k, n) in &o.answers {
            let e = self.answers.entry(k.clone()).or_insert(0);
            *e = e.saturating_add(*n);
        }
    }
}

/// A warm-up round: run, thrown away, and recorded as such.
/// The target's clock minus ours: the middle of what its answers' `Date` headers allow,
/// and half the width of that (ms).
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq)]
pub struct TargetClock {
    pub offset_ms: f64,
    pub plus_minus_ms: f64,
    pub answers: u64,
}

/// One shard of a merged run, and how its generator fared.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct ShardRun {
    pub index: u32,
    pub count: u32,
    /// The report it came from.
    pub file: String,
    pub run_id: String,
    pub hostname: String,
    pub started_at: String,
    pub requests: u64,
    pub generator_warnings: Vec<String>,
    /// Its clock against the target's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub target_clock: Option<TargetClock>,
}

/// Shard `index` (from 0) of `count`.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq)]
pub struct ShardInfo {
    pub index: u32,
    pub count: u32,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct WarmupRoundInfo {
    pub index: u32,
    pub elapsed_s: f64,
    pub successes: u64,
    pub failures: u64,
    pub ops_per_sec: f64,
    /// Its requests outside those: its own warm-up period's, its users' set-up and its
    /// cleanup, so that a run's requests add up to the server's log.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub other_requests: u64,
}

/// TLS settings of an https run, so a report says whether its server was verified.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct TlsInfo {
    /// False under `--insecure`: any certificate was accepted.
    pub verified: bool,
    /// The CA file trusted instead of the system's roots.
    pub ca_cert: Option<String>,
    /// A client certificate was offered (mutual TLS).
    pub client_certificate: bool,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Tool {
    pub name: String,
    pub version: String,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Host {
    pub hostname: String,
    pub os: String,
    pub arch: String,
    pub cpus: usize,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct WorkloadInfo {
    pub name: String,
    pub description: Option<String>,
    pub file: String,
    /// SHA-256 of the mix (everything but run settings and target).
    pub hash: String,
    pub overrides: Vec<String>,
    pub run: RunInfo,
    pub classes: Vec<ClassInfo>,
    /// The workload file as it was read.
    pub source: String,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct RunInfo {
    pub duration_s: Option<f64>,
    pub iterations: Option<u64>,
    pub rounds: u32,
    pub warmup_s: f64,
    pub timeout_s: f64,
    /// Users kept what they made from round to round (`run.keep_state`), removed once
    /// after the last round.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub keep_state: bool,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct ClassInfo {
    pub name: String,
    pub protocol: String,
    /// Its users send and take messages through a broker. Reports written before this
    /// was kept do not have it ([`ClassInfo::carries_messages`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub messages: Option<bool>,
    /// Its users walk behaviours (a chain of states) rather than pick from a `mix:`.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub behaviours: bool,
    pub count: u32,
    pub iterations: Option<u64>,
    pub connection: String,
    pub think: String,
    pub ops: Vec<OpInfo>,
}

impl ClassInfo {
    /// Whether its users carry messages: as the run said, or for a report written before
    /// runs said so, as its protocol's name says.
    pub fn carries_messages(&self) -> bool {
        self.messages.unwrap_or_else(|| {
            crate::workload::Protocol::from_name(&self.protocol)
                .is_some_and(crate::workload::Protocol::carries_messages)
        })
    }
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct OpInfo {
    pub name: String,
    pub weight: f64,
    pub probability: f64,
}

/// What removing a round's data cost and where it failed.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct Cleanup {
    pub requests: u64,
    pub failures: u64,
    /// The first failures: request and answer.
    pub failed: Vec<String>,
    /// Broker destinations drained after the round, the messages that took, and the
    /// queues the run declared that were deleted.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub drained_destinations: u64,
    #[serde(default, skip_serializing_if = "is_zero")]
    pub drained_messages: u64,
    #[serde(default, skip_serializing_if = "is_zero")]
    pub deleted_queues: u64,
    /// Destinations whose drain or deletion failed (named in `failed`).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub drain_failures: u64,
    /// When the cleanup was cut short (`--cleanup-timeout`, or a signal): why, how many
    /// items are not known to be deleted, and the first of them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cut_short: Option<String>,
    #[serde(default, skip_serializing_if = "is_zero")]
    pub left: u64,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub left_items: Vec<String>,
}

impl Cleanup {
    /// The record of a round's teardown: its cleanup and its drain, their failures in one
    /// list.
    fn of(p: &crate::protocol::RoundProducts) -> Cleanup {
        let (c, d) = (&p.cleanup, &p.drain);
        Cleanup {
            requests: c.requests,
            failures: c.failures,
            failed: c.notes.iter().chain(&d.notes).cloned().collect(),
            drained_destinations: d.destinations,
            drained_messages: d.messages,
            deleted_queues: d.deleted,
            drain_failures: d.failures,
            cut_short: c.cut_short.clone(),
            left: c.left,
            left_items: c.left_notes.clone(),
        }
    }
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Summary {
    pub rounds: usize,
    pub measured_s: f64,
    pub ops: Vec<OpReport>,
    /// The requests answered (not messages sent or taken: `sent`, `received`).
    pub total: OpReport,
    /// Messages sent or published, when the workload carries messages.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sent: Option<OpReport>,
    /// Messages taken, when the workload carries messages.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub received: Option<OpReport>,
    /// Successes ÷ requests over the whole run, 0..1.
    pub success_ratio: f64,
    /// Every round's generator warnings, once each.
    #[serde(default)]
    pub generator_warnings: Vec<String>,
    /// The watched server processes over the whole run: CPU per successful operation is
    /// the server's cost of the work measured.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub server: Vec<ServerProcess>,
    /// The scraped series over the whole run.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub metrics: Vec<ServerSeries>,
    /// Throughput moved steadily over the measured rounds: still warming up, or something
    /// piling up. `None` when the rounds show no significant trend (or are too few).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub drift: Option<Drift>,
    /// Per class, the mix sent against the mix asked.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub mix: Vec<mix::ClassMix>,
}

/// A significant trend in total ops/s over a target's measured rounds.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Drift {
    pub rounds: usize,
    /// From the first round to the last along the fitted line, percent.
    pub change_pct: f64,
    /// Two-sided p-value of the slope (least squares, Student's t with n − 2 df).
    pub p_value: f64,
    pub message: String,
}

/// A round that starts this much after its `--start-at` slot is flagged.
pub(super) const SLOT_LATE_WARNING: std::time::Duration = std::time::Duration::from_millis(500);

/// A trend is flagged when its slope is significant at this level…
const DRIFT_ALPHA: f64 = 0.05;
/// …and it moves throughput by at least this much from the first round to the last…
const DRIFT_MIN_CHANGE: f64 = 0.05;
/// …over this many rounds at least: a slope through three points rests on one degree of
/// freedom, and one slow first round (a cold cache) reads as a steady rise.
pub(crate) const DRIFT_MIN_ROUNDS: usize = 4;

/// The drift of the headline's per-round ops/s, when there is one worth a warning: at
/// least [`DRIFT_MIN_ROUNDS`] rounds, and not when the rounds' throughput was set by the
/// workload (their users waited on the server under a tenth of their time), where seeded
/// think times alone move it from round to round.
pub fn drift(rounds: &[RoundReport], rates: &[f64]) -> Option<Drift> {
    if rates.len() < DRIFT_MIN_ROUNDS
        || super::power::busy_share(rounds).is_some_and(|b| b < super::power::PACED_BELOW)
    {
        return None;
    }
    let t = super::stats::trend(rates)?;
    if t.p_value >= DRIFT_ALPHA || t.change.abs() < DRIFT_MIN_CHANGE {
        return None;
    }
    let n = rates.len();
    let pct = t.change * 100.0;
    let message = if t.change > 0.0 {
        format!(
            "throughput rose {pct:.0} % from round 1 to {n} (trend p = {:.3}): the server was still warming up, or load is accumulating; consider run.warmup_rounds",
            t.p_value
        )
    } else {
        format!(
            "throughput fell {:.0} % from round 1 to {n} (trend p = {:.3}): data or state is piling up on the server, or it is running out of something; compare rounds with care",
            -pct, t.p_value
        )
    };
    Some(Drift {
        rounds: n,
        change_pct: pct,
        p_value: t.p_value,
        message,
    })
}

/// A threshold and how the run fared against it.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct ThresholdInfo {
    pub op: String,
    /// The rule as written, e.g. `p95 < 200ms`.
    pub rule: String,
    /// The figure compared (ms for latencies, % for errors, per second for rates).
    #[serde(default)]
    pub observed: Option<f64>,
    #[serde(default)]
    pub passed: bool,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct FailureInfo {
    pub round: u32,
    pub op: String,
    pub error: String,
    pub detail: String,
}

/// Build the report of a finished (or interrupted) run.
pub(crate) fn build(w: &Workload, target: &str, run: &RunResult) -> Report {
    let labels = Labels::of(w, run);
    let embedded = target.starts_with("embedded");
    let mut across = Across::new(labels.names.len());
    let mut rounds: Vec<RoundReport> = run
        .rounds
        .iter()
        .map(|r| round_report(w, &labels, r, embedded, &mut across))
        .collect();
    if let Some(l) = &run.products.ledger {
        faults::add_messages(&mut rounds, l);
    }
    let mut summary = summary(&labels, &across, &rounds, run);
    let workload = workload_info(w);
    summary.mix = mix::of(&workload.classes, &summary.ops);
    Report {
        schema: SCHEMA.to_string(),
        tool: Tool {
            name: "loadmix".into(),
            version: env!("CARGO_PKG_VERSION").into(),
        },
        host: host(),
        run_id: run.run_id.to_string(),
        started_at: rfc3339(run.started_at),
        finished_at: rfc3339(run.finished_at),
        interrupted: run.interrupted,
        target: target.to_string(),
        name: None,
        note: None,
        labels: BTreeMap::new(),
        tls: None,
        seed: w.run.seed,
        workload,
        warmup_rounds: warmup_rounds(run),
        order: None,
        shard: None,
        target_clock: None,
        shards: Vec::new(),
        rounds,
        summary,
        thresholds: thresholds(w),
        failures: failures(run, &labels),
        // A shard's report is made again as a part by whoever knows it is one.
        ledger: run.products.ledger.as_ref().map(|l| l.to_record(true)),
        visibility: run
            .products
            .visibility
            .as_ref()
            .map(|v| visibility::record(w, v)),
        preflight: Untimed::of(&run.preflight),
    }
}

/// The run's labels as (class index, class, label), and which of them the report lists:
/// table operations always, refinement labels only when they occurred.
struct Labels {
    names: Vec<(usize, String, String)>,
    listed: Vec<bool>,
    /// The sum each label adds to.
    tallies: Vec<crate::workload::Tally>,
    /// Whether any class carries messages (the report then has `sent` and `received`).
    messages: bool,
}

impl Labels {
    fn of(w: &Workload, run: &RunResult) -> Labels {
        let names: Vec<(usize, String, String)> = run
            .labels
            .iter()
            .map(|(ci, c, l)| (ci, c.to_string(), l.to_string()))
            .collect();
        let listed = names
            .iter()
            .enumerate()
            .map(|(i, (ci, _, l))| {
                w.classes[*ci].ops.iter().any(|o| &o.name == l)
                    || run
                        .rounds
                        .iter()
                        .any(|r| r.stats.ops.get(i).is_some_and(|s| s.requests > 0))
            })
            .collect();
        let tallies = names
            .iter()
            .map(|(ci, _, l)| {
                let c = &w.classes[*ci];
                // The run's labels are its classes'; none is missing.
                c.labels
                    .iter()
                    .position(|x| x == l)
                    .map_or(crate::workload::Tally::Total, |i| c.kind.tally(i))
            })
            .collect();
        let messages = w.classes.iter().any(|c| c.protocol.carries_messages());
        Labels {
            names,
            listed,
            tallies,
            messages,
        }
    }

    /// `class.label` of label `i`.
    fn op_name(&self, i: usize) -> Option<String> {
        self.names.get(i).map(|(_, c, l)| format!("{c}.{l}"))
    }
}

/// What the rounds add up to, gathered as they are reported: per label its figures over
/// every round and its rate in each, and each sum's rate in each.
struct Across {
    merged: Vec<OpStats>,
    rates: Vec<Vec<f64>>,
    total_rates: Vec<f64>,
    sent_rates: Vec<f64>,
    received_rates: Vec<f64>,
}

impl Across {
    fn new(labels: usize) -> Across {
        Across {
            merged: vec![OpStats::default(); labels],
            rates: vec![Vec::new(); labels],
            total_rates: Vec::new(),
            sent_rates: Vec::new(),
            received_rates: Vec::new(),
        }
    }
}

/// The workload's class names, in its order.
fn class_names(w: &Workload) -> Vec<String> {
    w.classes.iter().map(|c| c.name.clone()).collect()
}

/// Each class's successful operations in a round as the headline counts them (requests
/// answered, else messages sent, else taken), by class index.
fn class_operations(w: &Workload, labels: &Labels, r: &crate::engine::RoundResult) -> Vec<u64> {
    let mut each: Vec<Sums> = (0..w.classes.len())
        .map(|_| Sums::new(labels.messages))
        .collect();
    for (i, (ci, _, _)) in labels.names.iter().enumerate() {
        if let (Some(c), Some(s)) = (each.get_mut(*ci), r.stats.ops.get(i)) {
            c.add(labels.tallies[i], s);
        }
    }
    each.iter().map(Sums::headline_successes).collect()
}

/// One measured round: its operations and total, the generator's and the server's side.
fn round_report(
    w: &Workload,
    labels: &Labels,
    r: &crate::engine::RoundResult,
    embedded: bool,
    across: &mut Across,
) -> RoundReport {
    let secs = r.measured.as_secs_f64();
    let mut ops = Vec::new();
    let mut sums = Sums::new(labels.messages);
    for (i, (_, class, label)) in labels.names.iter().enumerate() {
        let s = r.stats.ops.get(i).cloned().unwrap_or_default();
        sums.add(labels.tallies[i], &s);
        across.merged[i].merge(&s);
        across.rates[i].push(rate(s.successes, secs));
        if labels.listed[i] {
            let name = format!("{class}.{label}");
            ops.push(op_report(
                &name,
                Some(class),
                &s,
                rate(s.successes, secs),
                true,
            ));
        }
    }
    let total = &sums.total;
    let headline = sums.headline_successes();
    across.total_rates.push(rate(total.successes, secs));
    let sum_report = |name: &str, s: &Option<OpStats>, rates: &mut Vec<f64>| {
        s.as_ref().map(|s| {
            rates.push(rate(s.successes, secs));
            op_report(name, None, s, rate(s.successes, secs), true)
        })
    };
    let sent = sum_report("sent", &sums.sent, &mut across.sent_rates);
    let received = sum_report("received", &sums.received, &mut across.received_rates);
    let mut report = RoundReport {
        index: r.index,
        started_at: rfc3339(r.started_at),
        elapsed_s: r.elapsed.as_secs_f64(),
        measured_s: secs,
        overran_s: match w.run.stop {
            crate::workload::Stop::Duration(d) if r.elapsed > d => {
                Some((r.elapsed - d).as_secs_f64())
            }
            _ => None,
        },
        vus: r.vus,
        connections_opened: r.connections_opened,
        requests_retried: r.requests_retried,
        unsolicited_answers: r.unsolicited_answers,
        sessions: sessions::of(w, &r.sessions),
        setup: Untimed::of(&r.setup),
        warmup_requests: r.stats.warmup_requests,
        warmup_s: w.run.warmup.as_secs_f64(),
        setup_s: r.setup_took.as_secs_f64(),
        setup_failures: r.setup_failures,
        generator: generator::of(r, &class_names(w), embedded, headline),
        cleanup: Cleanup::of(&r.products),
        visibility: r
            .products
            .visibility
            .as_ref()
            .map(|v| visibility::record(w, v)),
        // Over the whole round (warm-up included): the sampler cannot tell them apart.
        server: r
            .server
            .iter()
            .map(|p| ServerProcess::of(p, headline, r.elapsed.as_secs_f64()))
            .collect(),
        metrics: r
            .metrics
            .iter()
            .map(|s| ServerSeries::of(s, per_of(w, s)))
            .collect(),
        per_second: round::per_second(&r.stats.seconds, &r.host.users),
        faults: faults::of_round(w, r),
        per_second_late: r.stats.seconds_late,
        start_late_ms: r.slot_late.map(|d| d.as_secs_f64() * 1000.0),
        interrupted: r.interrupted,
        total: op_report("total", None, total, rate(total.successes, secs), true),
        sent,
        received,
        ops,
    };
    report.generator.class_cpu = generator::class_cpu(
        report.generator.cpu_s,
        &r.host.class_busy_s,
        &class_names(w),
        &class_operations(w, labels, r),
    );
    let watched = report.server.iter().find(|p| p.problem.is_none());
    let watched = watched.map(|p| p.cpu_ms_per_op);
    generator::heavier(&mut report.generator, r.index, watched);
    report.rebase_metrics();
    report
}

/// The `per:` of the `monitor.prometheus` entry a scraped series came from.
fn per_of(w: &Workload, s: &crate::monitor::prometheus::SeriesRound) -> Option<String> {
    w.monitor_metrics
        .iter()
        .find(|m| m.url == s.url && m.series.contains(&s.series))
        .and_then(|m| m.per.clone())
}

/// Across the rounds: each listed operation and the total with their per-round rates,
/// the generator's warnings once each, drift, and the server's side.
fn summary(labels: &Labels, across: &Across, rounds: &[RoundReport], run: &RunResult) -> Summary {
    let mut ops = Vec::new();
    let mut sums = Sums::new(labels.messages);
    for (i, (_, class, label)) in labels.names.iter().enumerate() {
        sums.add(labels.tallies[i], &across.merged[i]);
        if labels.listed[i] {
            let name = format!("{class}.{label}");
            ops.push(summary_op(
                &name,
                Some(class),
                &across.merged[i],
                &across.rates[i],
            ));
        }
    }
    let mut generator_warnings: Vec<String> = Vec::new();
    for warning in rounds.iter().flat_map(|r| &r.generator.warnings) {
        if !generator_warnings.contains(warning) {
            generator_warnings.push(warning.clone());
        }
    }
    let headline = sums.headline_successes();
    let sum_op = |name: &str, s: &Option<OpStats>, rates: &[f64]| {
        s.as_ref().map(|s| summary_op(name, None, s, rates))
    };
    let total = summary_op("total", None, &sums.total, &across.total_rates);
    let sent = sum_op("sent", &sums.sent, &across.sent_rates);
    let received = sum_op("received", &sums.received, &across.received_rates);
    let headline_rates = [
        (&total, &across.total_rates),
        (sent.as_ref().unwrap_or(&total), &across.sent_rates),
        (received.as_ref().unwrap_or(&total), &across.received_rates),
    ]
    .into_iter()
    .find(|(o, _)| o.requests > 0)
    .map_or(&across.total_rates, |(_, r)| r);
    // Every operation counted once: the sums' requests together, whatever they hold.
    let (requests, successes) = [Some(&total), sent.as_ref(), received.as_ref()]
        .into_iter()
        .flatten()
        .fold((0, 0), |(r, s), o| (r + o.requests, s + o.successes));
    let mut summary = Summary {
        rounds: run.rounds.len(),
        measured_s: run.rounds.iter().map(|r| r.measured.as_secs_f64()).sum(),
        success_ratio: if requests == 0 {
            0.0
        } else {
            successes as f64 / requests as f64
        },
        ops,
        drift: drift(rounds, headline_rates),
        total,
        sent,
        received,
        generator_warnings,
        server: server_summary(rounds, headline),
        metrics: series_summary(rounds),
        // Filled in beside the workload's description, which says what was asked.
        mix: Vec::new(),
    };
    summary.rebase_metrics();
    summary
}

fn warmup_rounds(run: &RunResult) -> Vec<WarmupRoundInfo> {
    run.warmups
        .iter()
        .map(|x| WarmupRoundInfo {
            index: x.index,
            elapsed_s: x.elapsed.as_secs_f64(),
            successes: x.successes,
            failures: x.failures,
            ops_per_sec: x.ops_per_sec,
            other_requests: x.other_requests,
        })
        .collect()
}

/// The workload's thresholds, not yet judged (`report::thresholds` judges them).
fn thresholds(w: &Workload) -> Vec<ThresholdInfo> {
    w.thresholds
        .iter()
        .map(|t| ThresholdInfo {
            op: t.op.clone(),
            rule: t.text.clone(),
            observed: None,
            passed: false,
        })
        .collect()
}

fn failures(run: &RunResult, labels: &Labels) -> Vec<FailureInfo> {
    run.failures
        .iter()
        .map(|f| FailureInfo {
            round: f.round,
            op: labels.op_name(f.label as usize).unwrap_or_default(),
            error: f.error.name().into(),
            detail: f.detail.clone(),
        })
        .collect()
}

fn workload_info(w: &Workload) -> WorkloadInfo {
    WorkloadInfo {
        name: w.name.clone(),
        description: w.description.clone(),
        file: w.file.clone(),
        hash: w.hash.clone(),
        overrides: w.overrides.clone(),
        run: RunInfo {
            duration_s: match w.run.stop {
                Stop::Duration(d) => Some(d.as_secs_f64()),
                Stop::Iterations(_) => None,
            },
            iterations: match w.run.stop {
                Stop::Iterations(n) => Some(n),
                Stop::Duration(_) => None,
            },
            rounds: w.run.rounds,
            warmup_s: w.run.warmup.as_secs_f64(),
            timeout_s: w.run.timeout.as_secs_f64(),
            keep_state: w.run.keep_state,
        },
        classes: w
            .classes
            .iter()
            .map(|c| ClassInfo {
                name: c.name.clone(),
                protocol: c.protocol.name().into(),
                messages: Some(c.protocol.carries_messages()),
                behaviours: !c.chain.from_mix,
                count: c.count,
                iterations: c.iterations,
                connection: c.connection.name().into(),
                think: c.think.describe(&|us| {
                    units::format_duration(std::time::Duration::from_nanos((us * 1e3) as u64))
                }),
                ops: c
                    .ops
                    .iter()
                    .map(|o| OpInfo {
                        name: o.name.clone(),
                        weight: o.weight,
                        probability: o.probability,
                    })
                    .collect(),
            })
            .collect(),
        source: crate::secrets::redact_source(&w.source_text),
    }
}

pub(in crate::report) fn rfc3339(t: std::time::SystemTime) -> String {
    chrono::DateTime::<chrono::Utc>::from(t).to_rfc3339_opts(chrono::SecondsFormat::Millis, true)
}

pub(in crate::report) fn host() -> Host {
    let hostname = std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|s| s.trim().to_string())
        .or_else(|_| std::env::var("HOSTNAME"))
        .unwrap_or_else(|_| "unknown".into());
    Host {
        hostname,
        os: std::env::consts::OS.into(),
        arch: std::env::consts::ARCH.into(),
        cpus: std::thread::available_parallelism().map_or(1, |n| n.get()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn class(protocol: &str, messages: Option<bool>) -> ClassInfo {
        ClassInfo {
            name: "c".into(),
            protocol: protocol.into(),
            messages,
            behaviours: false,
            count: 1,
            iterations: None,
            connection: "keep-alive".into(),
            think: "0".into(),
            ops: Vec::new(),
        }
    }

    /// A/A: rounds of one unchanging server, their ops/s noise alone (3 % and 10 % spread),
    /// are flagged as drifting at most as often as the test's α, at every round count.
    #[test]
    fn drift_false_alarms_on_steady_rounds_stay_within_alpha() {
        use rand::SeedableRng;
        use rand_distr::{Distribution, Normal};
        let mut rng = rand::rngs::Xoshiro256PlusPlus::seed_from_u64(11);
        for cv in [0.03, 0.10] {
            let noise = Normal::new(1000.0, 1000.0 * cv).unwrap();
            for n in [3, 4, 5, 10] {
                let trials = 2000;
                let flagged = (0..trials)
                    .filter(|_| {
                        let rates: Vec<f64> = (0..n).map(|_| noise.sample(&mut rng)).collect();
                        drift(&[], &rates).is_some()
                    })
                    .count();
                let rate = flagged as f64 / trials as f64;
                eprintln!("drift false alarms, spread {cv}, {n} rounds: {rate:.4}");
                if n < DRIFT_MIN_ROUNDS {
                    assert_eq!(flagged, 0, "{n} rounds are too few to test");
                }
                assert!(rate <= DRIFT_ALPHA + 0.012, "cv {cv}, {n} rounds: {rate}");
            }
        }
        // A real rise over enough rounds is still flagged.
        let rising = [1690.0, 2460.0, 3430.0, 3620.0];
        assert!(drift(&[], &rising).is_some());
    }

    #[test]
    fn a_class_carries_messages_as_its_run_said_or_as_older_reports_protocol_says() {
        assert!(class("amqp", Some(true)).carries_messages());
        assert!(!class("stomp", Some(false)).carries_messages());
        assert!(class("stomp", None).carries_messages());
        assert!(!class("caldav", None).carries_messages());
        assert!(!class("no-such-protocol", None).carries_messages());
    }
}
