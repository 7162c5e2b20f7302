//! The report as data: JSON schema `loadmix/report/v2`, the source of truth every other
//! format is rendered from. Built from a [`RunResult`]; read back by `loadmix report`.

use std::collections::BTreeMap;

use base64::Engine as _;
use hdrhistogram::serialization::{Serializer as _, V2DeflateSerializer};
use serde::{Deserialize, Serialize};

use super::stats::mean_ci95;
use crate::answer::Answer;
use crate::engine::RunResult;
use crate::metrics::{OpStats, TimelineBucket};
use crate::transport::ErrorClass;
use crate::workload::{Stop, Workload, units};

pub const SCHEMA: &str = "loadmix/report/v2";
/// Earlier schemas this version still reads: v1 is v2 without `answers`.
pub const READS: [&str; 2] = [SCHEMA, "loadmix/report/v1"];

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Report {
    pub schema: String,
    pub tool: Tool,
    pub host: Host,
    pub run_id: String,
    pub started_at: String,
    pub finished_at: String,
    /// Stopped early (Ctrl-C): the figures cover what ran.
    pub interrupted: bool,
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
    pub seed: u64,
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
    pub rounds: Vec<RoundReport>,
    pub summary: Summary,
    pub thresholds: Vec<ThresholdInfo>,
    /// The first failures, with what came back.
    pub failures: Vec<FailureInfo>,
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
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct ClassInfo {
    pub name: String,
    pub protocol: String,
    pub count: u32,
    pub iterations: Option<u64>,
    pub connection: String,
    pub think: String,
    pub ops: Vec<OpInfo>,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct OpInfo {
    pub name: String,
    pub weight: f64,
    pub probability: f64,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct RoundReport {
    pub index: u32,
    pub started_at: String,
    pub elapsed_s: f64,
    /// Elapsed minus warm-up: what ops/sec divides by.
    pub measured_s: f64,
    pub vus: u64,
    pub connections_opened: u64,
    /// Requests sent again on a new connection because the server had closed the kept one
    /// without taking them (not failures, not in the latency).
    #[serde(default)]
    pub requests_retried: u64,
    pub warmup_requests: u64,
    /// Seconds at the start of the timeline that were warm-up.
    #[serde(default)]
    pub warmup_s: f64,
    /// Users whose set-up (account, discovery) failed.
    #[serde(default)]
    pub setup_failures: u64,
    /// How the load generator itself fared.
    #[serde(default)]
    pub generator: Generator,
    /// Deleting what the round made, after its clock stopped (not in any figure above).
    #[serde(default)]
    pub cleanup: Cleanup,
    /// The server's watched processes during the round (`monitor.process`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub server: Vec<ServerProcess>,
    /// The server's scraped metrics during the round (`monitor.prometheus`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub metrics: Vec<ServerSeries>,
    /// Second by second over all operations, warm-up included: latency percentiles,
    /// failures by class, operations in flight, active users.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub per_second: Vec<PerSecond>,
    /// Under `--start-at`: how long after its slot the round's clock started, ms.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub start_late_ms: Option<f64>,
    /// Successes that reached the aggregator after their second's percentiles were taken
    /// (counted in every other figure).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub per_second_late: u64,
    pub interrupted: bool,
    pub ops: Vec<OpReport>,
    pub total: OpReport,
}

/// One second of a round (second `i` of the vector starts `i` s after the round).
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct PerSecond {
    /// Latency of the successes that started in this second, ms (two significant digits).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub p50_ms: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub p99_ms: Option<f64>,
    /// Failures that started in this second, by error class.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub errors: BTreeMap<String, u64>,
    /// Mean number of operations in flight during the second.
    pub in_flight: f64,
    /// Users active at the second's end (closed users in their window, open sessions).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub users: Option<u64>,
}

impl PerSecond {
    fn of(s: &crate::metrics::Second, users: Option<u64>) -> PerSecond {
        let ms = |us: u64| us as f64 / 1000.0;
        PerSecond {
            p50_ms: s.p50_us.map(ms),
            p99_ms: s.p99_us.map(ms),
            errors: ErrorClass::ALL
                .iter()
                .filter(|c| s.errors[c.index()] > 0)
                .map(|c| (c.name().to_string(), s.errors[c.index()]))
                .collect(),
            in_flight: s.busy_us as f64 / 1e6,
            users,
        }
    }
}

/// Figures of one operation label (or of the total) in one round or across all rounds.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct OpReport {
    /// `class.label`, or `total`.
    pub op: String,
    pub class: Option<String>,
    pub requests: u64,
    pub successes: u64,
    pub failures: u64,
    /// Successes per second of measured time. Across rounds: the mean of the rounds.
    pub ops_per_sec: f64,
    pub bytes_sent: u64,
    pub bytes_received: u64,
    /// Responses by HTTP status.
    pub status: BTreeMap<String, u64>,
    /// The answers of other protocols, in their own words (schema v2); absent for HTTP.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub answers: Vec<AnswerCount>,
    /// Failures by class: connect, timeout, reset, status, body.
    pub errors: BTreeMap<String, u64>,
    /// Latency of successful operations, in milliseconds.
    pub latency_ms: Latency,
    /// Latencies beyond the histogram's range (1 h), counted at its maximum.
    pub clamped: u64,
    /// HdrHistogram (µs, 1 µs..1 h, 3 digits), V2 deflate serialisation, base64.
    pub histogram: String,
    /// Scheduled classes (open model, pacing): latency from each operation's intended
    /// start, coordinated-omission corrected; `latency_ms` is then the service time.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub latency_corrected_ms: Option<Latency>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub histogram_corrected: Option<String>,
    /// TCP connect time of the connections its operations had to open (part of the
    /// latency above); absent when none were opened.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub connect_ms: Option<Phase>,
    /// TLS handshake time on those connections (https; part of the latency above).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tls_handshake_ms: Option<Phase>,
    /// How many of those TLS handshakes resumed an earlier session.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub tls_resumed: u64,
    /// Across rounds only.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub across_rounds: Option<AcrossRounds>,
    /// Per second of the round, from its start (warm-up included, see `warmup_s`):
    /// requests, successes, failures, sum of success latencies (µs). Per round only.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub timeline: Vec<TimelineBucket>,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Latency {
    pub min: f64,
    pub mean: f64,
    pub stddev: f64,
    pub p50: f64,
    pub p90: f64,
    pub p95: f64,
    pub p99: f64,
    pub p999: f64,
    pub max: f64,
}

/// A part of the latency measured on its own (opening connections), in milliseconds.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Phase {
    /// How many times it happened (connections opened).
    pub count: u64,
    pub mean: f64,
    pub p50: f64,
    pub p95: f64,
    pub p99: f64,
    pub max: f64,
    /// HdrHistogram (µs), as `histogram`.
    pub histogram: String,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct AcrossRounds {
    pub rounds: usize,
    pub ops_per_sec_per_round: Vec<f64>,
    pub ops_per_sec_mean: f64,
    pub ops_per_sec_stddev: f64,
    /// 95 % confidence interval of the mean ops/sec (Student's t); absent for one round.
    pub ops_per_sec_ci95: Option<[f64; 2]>,
}

/// A watched server process (or all the processes of one name) over a round, or over the
/// whole run in the summary.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct ServerProcess {
    /// The name or `pid N` as given.
    pub process: String,
    pub cpu_user_s: f64,
    pub cpu_system_s: f64,
    /// CPU per successful operation, milliseconds: what each operation cost the server.
    pub cpu_ms_per_op: f64,
    /// Mean CPU over the measured time, in cores.
    pub cores_used: f64,
    /// Per second of the round: CPU, percent of one core (rounds only).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub cpu_percent: Vec<f64>,
    pub rss_peak_mib: f64,
    pub threads_max: u64,
    pub processes_max: u32,
    pub context_switches: u64,
    pub read_bytes: u64,
    pub write_bytes: u64,
    /// Why the figures are missing or partial.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub problem: Option<String>,
    /// When the process is a HotSpot JVM: its garbage collection and heap.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub jvm: Option<JvmFigures>,
}

/// A watched JVM's collections (from its perf-data file, as `jstat` reads them).
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct JvmFigures {
    pub gc_count: u64,
    pub gc_time_ms: f64,
    /// Per 1,000 successful operations: what the work cost in collections.
    pub gc_per_1000_ops: f64,
    pub gc_ms_per_1000_ops: f64,
    pub heap_used_peak_mib: f64,
    pub heap_committed_max_mib: f64,
    pub collectors: Vec<String>,
}

impl JvmFigures {
    fn of(j: &crate::monitor::JvmRound, successes: u64) -> JvmFigures {
        let mut f = JvmFigures {
            gc_count: j.gc_count,
            gc_time_ms: j.gc_time_s * 1000.0,
            heap_used_peak_mib: j.heap_used_peak as f64 / MIB,
            heap_committed_max_mib: j.heap_committed_max as f64 / MIB,
            collectors: j.collectors.clone(),
            ..JvmFigures::default()
        };
        f.per_ops(successes);
        f
    }

    fn per_ops(&mut self, successes: u64) {
        self.gc_per_1000_ops = per_1000(self.gc_count as f64, successes);
        self.gc_ms_per_1000_ops = per_1000(self.gc_time_ms, successes);
    }

    /// Over rounds: sums and maxima.
    fn add(&mut self, o: &JvmFigures) {
        self.gc_count += o.gc_count;
        self.gc_time_ms += o.gc_time_ms;
        self.heap_used_peak_mib = self.heap_used_peak_mib.max(o.heap_used_peak_mib);
        self.heap_committed_max_mib = self.heap_committed_max_mib.max(o.heap_committed_max_mib);
        for c in &o.collectors {
            if !self.collectors.contains(c) {
                self.collectors.push(c.clone());
            }
        }
    }
}

const MIB: f64 = 1024.0 * 1024.0;

impl ServerProcess {
    fn of(p: &crate::monitor::ProcessRound, successes: u64, secs: f64) -> ServerProcess {
        let cpu = p.cpu_user_s + p.cpu_system_s;
        ServerProcess {
            process: p.label.clone(),
            cpu_user_s: p.cpu_user_s,
            cpu_system_s: p.cpu_system_s,
            cpu_ms_per_op: per_1000(cpu, successes),
            cores_used: if secs > 0.0 { cpu / secs } else { 0.0 },
            cpu_percent: p.cpu_percent.clone(),
            rss_peak_mib: p.rss_peak_bytes as f64 / MIB,
            threads_max: p.threads_max,
            processes_max: p.processes_max,
            context_switches: p.context_switches,
            read_bytes: p.read_bytes,
            write_bytes: p.write_bytes,
            problem: p.problem.clone(),
            jvm: p.jvm.as_ref().map(|j| JvmFigures::of(j, successes)),
        }
    }

    /// The run's figures from its rounds': sums, maxima, and cost per operation over all.
    fn over(rounds: &[&ServerProcess], successes: u64, secs: f64) -> ServerProcess {
        let mut s = ServerProcess {
            process: rounds
                .first()
                .map(|r| r.process.clone())
                .unwrap_or_default(),
            ..ServerProcess::default()
        };
        for r in rounds {
            s.cpu_user_s += r.cpu_user_s;
            s.cpu_system_s += r.cpu_system_s;
            s.rss_peak_mib = s.rss_peak_mib.max(r.rss_peak_mib);
            s.threads_max = s.threads_max.max(r.threads_max);
            s.processes_max = s.processes_max.max(r.processes_max);
            s.context_switches += r.context_switches;
            s.read_bytes += r.read_bytes;
            s.write_bytes += r.write_bytes;
            if s.problem.is_none() {
                s.problem = r.problem.clone();
            }
            if let Some(j) = &r.jvm {
                s.jvm.get_or_insert_with(JvmFigures::default).add(j);
            }
        }
        s.per_ops(successes);
        let cpu = s.cpu_user_s + s.cpu_system_s;
        s.cores_used = if secs > 0.0 { cpu / secs } else { 0.0 };
        s
    }

    /// The figures per operation, against `successes`: the operations this server served
    /// (a merged round's are every shard's).
    pub(super) fn per_ops(&mut self, successes: u64) {
        self.cpu_ms_per_op = per_1000(self.cpu_user_s + self.cpu_system_s, successes);
        if let Some(j) = &mut self.jvm {
            j.per_ops(successes);
        }
    }
}

/// A series scraped from a server's metrics page, over a round (or the run).
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct ServerSeries {
    pub url: String,
    pub series: String,
    /// `counter` (figures are rates per second) or `gauge`.
    pub kind: String,
    pub mean: f64,
    pub max: f64,
    /// A counter's increase over the round (or the run).
    pub increase: f64,
    /// A counter's increase per 1,000 successful operations (GC pauses, commits, ...).
    pub per_1000_ops: f64,
    /// Per second (rounds only).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub values: Vec<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub problem: Option<String>,
}

impl ServerSeries {
    fn of(s: &crate::monitor::prometheus::SeriesRound, successes: u64) -> ServerSeries {
        ServerSeries {
            url: s.url.clone(),
            series: s.series.clone(),
            kind: s.kind.clone(),
            mean: s.mean,
            max: s.max,
            increase: s.increase,
            per_1000_ops: per_1000(s.increase, successes),
            values: s.values.clone(),
            problem: s.problem.clone(),
        }
    }

    /// A counter's increase per operation, against `successes` (see
    /// [`ServerProcess::per_ops`]).
    pub(super) fn per_ops(&mut self, successes: u64) {
        self.per_1000_ops = per_1000(self.increase, successes);
    }
}

fn per_1000(increase: f64, successes: u64) -> f64 {
    if successes > 0 {
        increase * 1000.0 / successes as f64
    } else {
        0.0
    }
}

/// Each scraped series over all rounds: increases add, the mean is over every second.
pub(super) fn series_summary(rounds: &[RoundReport], successes: u64) -> Vec<ServerSeries> {
    let Some(first) = rounds.first() else {
        return Vec::new();
    };
    first
        .metrics
        .iter()
        .map(|m| {
            let per: Vec<&ServerSeries> = rounds
                .iter()
                .filter_map(|r| {
                    r.metrics
                        .iter()
                        .find(|x| x.url == m.url && x.series == m.series)
                })
                .collect();
            let values: Vec<f64> = per.iter().flat_map(|x| x.values.iter().copied()).collect();
            let increase: f64 = per.iter().map(|x| x.increase).sum();
            ServerSeries {
                url: m.url.clone(),
                series: m.series.clone(),
                kind: per
                    .iter()
                    .map(|x| x.kind.clone())
                    .find(|k| !k.is_empty())
                    .unwrap_or_default(),
                mean: if values.is_empty() {
                    0.0
                } else {
                    values.iter().sum::<f64>() / values.len() as f64
                },
                max: values.iter().copied().fold(0.0, f64::max),
                increase,
                per_1000_ops: per_1000(increase, successes),
                values: Vec::new(),
                problem: per.iter().find_map(|x| x.problem.clone()),
            }
        })
        .collect()
}

/// What removing a round's data cost and where it failed.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct Cleanup {
    pub requests: u64,
    pub failures: u64,
    /// The first failures: request and answer.
    pub failed: Vec<String>,
}

/// The generator watching itself: was it, not the server, the limit?
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct Generator {
    /// CPU of the loadmix process per second, percent of one core (the embedded server,
    /// when used, runs in the same process and is included).
    pub cpu_percent: Vec<f64>,
    pub cpu_mean: f64,
    pub cores: usize,
    /// How late operations started against their intended start (ms).
    pub lag_p50_ms: f64,
    pub lag_p99_ms: f64,
    pub lag_max_ms: f64,
    /// Open model: arrivals dropped, or started late, because every slot was busy.
    pub dropped: u64,
    pub late: u64,
    /// The host around loadmix, means over the round: busy CPU and steal, percent of all
    /// cores; the longest run queue seen.
    #[serde(default)]
    pub host_busy_mean: f64,
    #[serde(default)]
    pub steal_mean: f64,
    #[serde(default)]
    pub run_queue_max: u32,
    /// Why the generator may have limited the run; empty when it did not.
    pub warnings: Vec<String>,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Summary {
    pub rounds: usize,
    pub measured_s: f64,
    pub ops: Vec<OpReport>,
    pub total: OpReport,
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

/// The round's seconds, as long as the longer of the samples' and the user counts'.
fn per_second(seconds: &[crate::metrics::Second], users: &[u64]) -> Vec<PerSecond> {
    let n = seconds.len().max(users.len());
    (0..n)
        .map(|i| {
            PerSecond::of(
                &seconds.get(i).copied().unwrap_or_default(),
                users.get(i).copied(),
            )
        })
        .collect()
}

/// Each watched process over all rounds.
pub(super) fn server_summary(rounds: &[RoundReport], successes: u64) -> Vec<ServerProcess> {
    let names: Vec<String> = rounds
        .first()
        .map(|r| r.server.iter().map(|p| p.process.clone()).collect())
        .unwrap_or_default();
    let secs: f64 = rounds.iter().map(|r| r.elapsed_s).sum();
    names
        .iter()
        .map(|n| {
            let per: Vec<&ServerProcess> = rounds
                .iter()
                .filter_map(|r| r.server.iter().find(|p| &p.process == n))
                .collect();
            ServerProcess::over(&per, successes, secs)
        })
        .collect()
}

/// A round that starts this much after its `--start-at` slot is flagged.
const SLOT_LATE_WARNING: std::time::Duration = std::time::Duration::from_millis(500);

/// A trend is flagged when its slope is significant at this level…
const DRIFT_ALPHA: f64 = 0.05;
/// …and it moves throughput by at least this much from the first round to the last.
const DRIFT_MIN_CHANGE: f64 = 0.05;

/// The drift of per-round total ops/s, when there is one worth a warning.
pub fn drift(rates: &[f64]) -> Option<Drift> {
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
pub fn build(w: &Workload, target: &str, run: &RunResult) -> Report {
    let embedded = target.starts_with("embedded");
    let labels: Vec<(usize, String, String)> = run
        .labels
        .iter()
        .map(|(ci, c, l)| (ci, c.to_string(), l.to_string()))
        .collect();
    // Table operations are always listed; refinement labels only when they occurred.
    let listed: Vec<bool> = labels
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

    let mut rounds = Vec::new();
    let mut merged: Vec<OpStats> = labels.iter().map(|_| OpStats::default()).collect();
    let mut per_round_rates: Vec<Vec<f64>> = vec![Vec::new(); labels.len()];
    let mut total_rates = Vec::new();
    for r in &run.rounds {
        let secs = r.measured.as_secs_f64();
        let mut ops = Vec::new();
        let mut total = OpStats::default();
        for (i, (_, class, label)) in labels.iter().enumerate() {
            let s = r.stats.ops.get(i).cloned().unwrap_or_default();
            // A step is part of its operation, which the total counts once.
            if !crate::workload::is_step_label(label) {
                total.merge(&s);
            }
            merged[i].merge(&s);
            per_round_rates[i].push(rate(s.successes, secs));
            if listed[i] {
                ops.push(op_report(
                    &format!("{class}.{label}"),
                    Some(class),
                    &s,
                    rate(s.successes, secs),
                    true,
                ));
            }
        }
        total_rates.push(rate(total.successes, secs));
        rounds.push(RoundReport {
            index: r.index,
            started_at: rfc3339(r.started_at),
            elapsed_s: r.elapsed.as_secs_f64(),
            measured_s: secs,
            vus: r.vus,
            connections_opened: r.connections_opened,
            requests_retried: r.requests_retried,
            warmup_requests: r.stats.warmup_requests,
            warmup_s: w.run.warmup.as_secs_f64(),
            setup_failures: r.setup_failures,
            generator: generator(r, embedded),
            cleanup: Cleanup {
                requests: r.cleanup.requests,
                failures: r.cleanup.failures,
                failed: r.cleanup.notes.clone(),
            },
            // Over the whole round (warm-up included): the sampler cannot tell them apart.
            server: r
                .server
                .iter()
                .map(|p| ServerProcess::of(p, total.successes, r.elapsed.as_secs_f64()))
                .collect(),
            metrics: r
                .metrics
                .iter()
                .map(|s| ServerSeries::of(s, total.successes))
                .collect(),
            per_second: per_second(&r.stats.seconds, &r.host.users),
            per_second_late: r.stats.seconds_late,
            start_late_ms: r.slot_late.map(|d| d.as_secs_f64() * 1000.0),
            interrupted: r.interrupted,
            total: op_report("total", None, &total, rate(total.successes, secs), true),
            ops,
        });
    }

    let mut summary_ops = Vec::new();
    let mut total = OpStats::default();
    for (i, (_, class, label)) in labels.iter().enumerate() {
        if !crate::workload::is_step_label(label) {
            total.merge(&merged[i]);
        }
        if listed[i] {
            summary_ops.push(summary_op(
                &format!("{class}.{label}"),
                Some(class),
                &merged[i],
                &per_round_rates[i],
            ));
        }
    }
    let total_report = summary_op("total", None, &total, &total_rates);
    let mut generator_warnings: Vec<String> = Vec::new();
    for r in &rounds {
        for warning in &r.generator.warnings {
            if !generator_warnings.contains(warning) {
                generator_warnings.push(warning.clone());
            }
        }
    }
    let measured: f64 = run.rounds.iter().map(|r| r.measured.as_secs_f64()).sum();
    let server = server_summary(&rounds, total.successes);
    let metrics = series_summary(&rounds, total.successes);

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
        workload: workload_info(w),
        warmup_rounds: run
            .warmups
            .iter()
            .map(|x| WarmupRoundInfo {
                index: x.index,
                elapsed_s: x.elapsed.as_secs_f64(),
                successes: x.successes,
                failures: x.failures,
                ops_per_sec: x.ops_per_sec,
            })
            .collect(),
        order: None,
        shard: None,
        target_clock: None,
        shards: Vec::new(),
        rounds,
        summary: Summary {
            rounds: run.rounds.len(),
            measured_s: measured,
            success_ratio: if total.requests == 0 {
                0.0
            } else {
                total.successes as f64 / total.requests as f64
            },
            ops: summary_ops,
            total: total_report,
            generator_warnings,
            drift: drift(&total_rates),
            server,
            metrics,
        },
        thresholds: w
            .thresholds
            .iter()
            .map(|t| ThresholdInfo {
                op: t.op.clone(),
                rule: t.text.clone(),
                observed: None,
                passed: false,
            })
            .collect(),
        failures: run
            .failures
            .iter()
            .map(|f| FailureInfo {
                round: f.round,
                op: labels
                    .get(f.label as usize)
                    .map(|(_, c, l)| format!("{c}.{l}"))
                    .unwrap_or_default(),
                error: f.error.name().into(),
                detail: f.detail.clone(),
            })
            .collect(),
    }
}

pub(super) fn rate(n: u64, secs: f64) -> f64 {
    if secs > 0.0 { n as f64 / secs } else { 0.0 }
}

pub(super) fn summary_op(
    name: &str,
    class: Option<&String>,
    s: &OpStats,
    rates: &[f64],
) -> OpReport {
    let (mean, sd, ci) = mean_ci95(rates);
    let mut r = op_report(name, class, s, mean, false);
    r.across_rounds = Some(AcrossRounds {
        rounds: rates.len(),
        ops_per_sec_per_round: rates.to_vec(),
        ops_per_sec_mean: mean,
        ops_per_sec_stddev: sd,
        ops_per_sec_ci95: ci.map(|(lo, hi)| [lo, hi]),
    });
    r
}

pub(super) fn op_report(
    name: &str,
    class: Option<&String>,
    s: &OpStats,
    ops_per_sec: f64,
    with_timeline: bool,
) -> OpReport {
    let ms = |us: u64| us as f64 / 1000.0;
    let h = &s.latency;
    let latency = if s.successes == 0 {
        Latency {
            min: 0.0,
            mean: 0.0,
            stddev: 0.0,
            p50: 0.0,
            p90: 0.0,
            p95: 0.0,
            p99: 0.0,
            p999: 0.0,
            max: 0.0,
        }
    } else {
        Latency {
            min: ms(h.min()),
            mean: s.mean_us() / 1000.0,
            stddev: s.stddev_us() / 1000.0,
            p50: ms(h.value_at_quantile(0.50)),
            p90: ms(h.value_at_quantile(0.90)),
            p95: ms(h.value_at_quantile(0.95)),
            p99: ms(h.value_at_quantile(0.99)),
            p999: ms(h.value_at_quantile(0.999)),
            max: ms(h.max()),
        }
    };
    OpReport {
        op: name.to_string(),
        class: class.cloned(),
        requests: s.requests,
        successes: s.successes,
        failures: s.failures,
        ops_per_sec,
        bytes_sent: s.bytes_sent,
        bytes_received: s.bytes_received,
        status: s
            .by_answer
            .iter()
            .filter_map(|(k, v)| Some((k.http_status()?.to_string(), *v)))
            .collect(),
        answers: named_answers(&s.by_answer),
        errors: ErrorClass::ALL
            .iter()
            .filter(|e| s.by_error[e.index()] > 0)
            .map(|e| (e.name().to_string(), s.by_error[e.index()]))
            .collect(),
        latency_ms: latency,
        clamped: s.clamped,
        histogram: encode_histogram(h),
        latency_corrected_ms: (s.scheduled && s.successes > 0)
            .then(|| latency_of(&s.latency_corrected)),
        histogram_corrected: s.scheduled.then(|| encode_histogram(&s.latency_corrected)),
        connect_ms: phase(&s.connecting),
        tls_handshake_ms: phase(&s.tls_handshaking),
        tls_resumed: s.tls_resumed,
        across_rounds: None,
        timeline: if with_timeline {
            s.timeline.clone()
        } else {
            Vec::new()
        },
    }
}

impl OpReport {
    /// Every answer and its count, in the protocol's words: HTTP statuses (`200`), then
    /// named answers (`stomp RECEIPT`).
    pub fn answer_counts(&self) -> Vec<(String, u64)> {
        let http = self.status.iter().map(|(k, v)| (k.clone(), *v));
        let named = self.answers.iter().map(|a| (a.label(), a.count));
        http.chain(named).collect()
    }
}

/// A protocol's named answer and how often it came.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq, PartialOrd, Ord)]
pub struct AnswerCount {
    pub protocol: String,
    pub name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub code: Option<u16>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    pub count: u64,
}

impl AnswerCount {
    /// The answer this counts, interned (to be counted again, as a merge does).
    pub fn answer(&self) -> Answer {
        Answer::named(
            &self.protocol,
            &self.name,
            self.code,
            self.reason.as_deref(),
        )
    }

    /// As the table and the page show it: `stomp RECEIPT`, `amqp channel.close 406`.
    pub fn label(&self) -> String {
        self.answer().to_string()
    }
}

/// The named answers among `by_answer`, in a stable order (by their words, not by when
/// this process first met them).
fn named_answers(by_answer: &BTreeMap<Answer, u64>) -> Vec<AnswerCount> {
    let mut v: Vec<AnswerCount> = by_answer
        .iter()
        .filter_map(|(a, &count)| {
            let n = a.as_named()?;
            Some(AnswerCount {
                protocol: n.protocol.into(),
                name: n.name.into(),
                code: n.code,
                reason: n.reason.map(String::from),
                count,
            })
        })
        .collect();
    v.sort();
    v
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

fn phase(h: &hdrhistogram::Histogram<u64>) -> Option<Phase> {
    let ms = |us: u64| us as f64 / 1000.0;
    (!h.is_empty()).then(|| Phase {
        count: h.len(),
        mean: h.mean() / 1000.0,
        p50: ms(h.value_at_quantile(0.50)),
        p95: ms(h.value_at_quantile(0.95)),
        p99: ms(h.value_at_quantile(0.99)),
        max: ms(h.max()),
        histogram: encode_histogram(h),
    })
}

fn latency_of(h: &hdrhistogram::Histogram<u64>) -> Latency {
    let ms = |us: u64| us as f64 / 1000.0;
    Latency {
        min: ms(h.min()),
        mean: h.mean() / 1000.0,
        stddev: h.stdev() / 1000.0,
        p50: ms(h.value_at_quantile(0.50)),
        p90: ms(h.value_at_quantile(0.90)),
        p95: ms(h.value_at_quantile(0.95)),
        p99: ms(h.value_at_quantile(0.99)),
        p999: ms(h.value_at_quantile(0.999)),
        max: ms(h.max()),
    }
}

/// Lag above this at the 99th percentile means the generator could not keep its schedule.
const LAG_P99_LIMIT_MS: f64 = 10.0;
/// CPU above this share of all cores, on average, means the generator's process was busy.
const CPU_LIMIT: f64 = 0.90;

fn generator(r: &crate::engine::RoundResult, embedded: bool) -> Generator {
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    let cpu = r.host.process_cpu.clone();
    let cpu_mean = if cpu.is_empty() {
        0.0
    } else {
        cpu.iter().sum::<f64>() / cpu.len() as f64
    };
    let lag = &r.stats.lag;
    let ms = |us: u64| us as f64 / 1000.0;
    let (lag_p50_ms, lag_p99_ms, lag_max_ms) = if lag.is_empty() {
        (0.0, 0.0, 0.0)
    } else {
        (
            ms(lag.value_at_quantile(0.5)),
            ms(lag.value_at_quantile(0.99)),
            ms(lag.max()),
        )
    };
    let mean = |v: &[f64]| {
        if v.is_empty() {
            0.0
        } else {
            v.iter().sum::<f64>() / v.len() as f64
        }
    };
    let host_busy_mean = mean(&r.host.host_busy);
    let steal_mean = mean(&r.host.steal);
    let run_queue_max = r.host.run_queue.iter().copied().max().unwrap_or(0);
    // loadmix's share of the whole machine, and what other processes took.
    let own = cpu_mean / cores as f64;
    let others = (host_busy_mean - own).max(0.0);
    let round = r.index;
    let mut warnings = Vec::new();
    if lag_p99_ms > LAG_P99_LIMIT_MS {
        let late = format!(
            "operations started late (scheduling lag p99 {lag_p99_ms:.1} ms, max {lag_max_ms:.1} ms)"
        );
        warnings.push(if cpu_mean > CPU_LIMIT * 100.0 * cores as f64 {
            format!(
                "round {round}: generator-limited: {late} while loadmix used {cpu_mean:.0}% CPU of {cores} cores: loadmix, not the server, set the pace"
            )
        } else if others > 50.0 || run_queue_max as usize > 2 * cores {
            format!(
                "round {round}: the host was crowded: {late}; other processes used {others:.0}% of its CPU (run queue up to {run_queue_max}) and loadmix {own:.0}%: these figures measure a busy machine"
            )
        } else if steal_mean > 5.0 {
            format!(
                "round {round}: the hypervisor took {steal_mean:.0}% of the CPU (steal): {late}"
            )
        } else {
            format!(
                "round {round}: {late}, though neither loadmix ({own:.0}% of the machine) nor the host ({host_busy_mean:.0}% busy) was saturated"
            )
        });
    }
    let sessions = r.vus.max(1);
    if r.dropped > 0 || r.late * 100 > sessions {
        warnings.push(format!(
            "round {round}: arrivals could not start on time: {} dropped, {} late of {} (max_concurrency reached)",
            r.dropped, r.late, r.vus
        ));
    }
    if cpu_mean > CPU_LIMIT * 100.0 * cores as f64 {
        warnings.push(format!(
            "round {round}: the loadmix process used {cpu_mean:.0}% CPU of {cores} cores on average{}",
            if embedded {
                " (the embedded server runs in the same process)"
            } else {
                ""
            }
        ));
    }
    // A common start missed: this shard's round began after the others' (set-up ran past
    // its slot), so their seconds overlap less than planned.
    if let Some(late) = r.slot_late.filter(|d| *d > SLOT_LATE_WARNING) {
        warnings.push(format!(
            "round {round}: started {:.1} s after its --start-at slot (set-up ran past it; give --round-every more room)",
            late.as_secs_f64()
        ));
    }
    Generator {
        cpu_percent: cpu,
        cpu_mean,
        cores,
        lag_p50_ms,
        lag_p99_ms,
        lag_max_ms,
        dropped: r.dropped,
        late: r.late,
        host_busy_mean,
        steal_mean,
        run_queue_max,
        warnings,
    }
}

/// Serialise a histogram so other tools (and `loadmix compare`) can read it back exactly.
pub fn encode_histogram(h: &hdrhistogram::Histogram<u64>) -> String {
    let mut buf = Vec::new();
    match V2DeflateSerializer::new().serialize(h, &mut buf) {
        Ok(_) => base64::engine::general_purpose::STANDARD.encode(buf),
        Err(_) => String::new(),
    }
}

/// Read back a histogram written by [`encode_histogram`].
pub fn decode_histogram(s: &str) -> Option<hdrhistogram::Histogram<u64>> {
    let bytes = base64::engine::general_purpose::STANDARD.decode(s).ok()?;
    hdrhistogram::serialization::Deserializer::new()
        .deserialize(&mut std::io::Cursor::new(bytes))
        .ok()
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
        },
        classes: w
            .classes
            .iter()
            .map(|c| ClassInfo {
                name: c.name.clone(),
                protocol: c.protocol.name().into(),
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

pub(super) fn rfc3339(t: std::time::SystemTime) -> String {
    chrono::DateTime::<chrono::Utc>::from(t).to_rfc3339_opts(chrono::SecondsFormat::Millis, true)
}

pub(super) fn host() -> Host {
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
    use crate::engine::RoundResult;
    use crate::engine::host::HostSamples;
    use crate::metrics::{RoundStats, new_histogram};

    /// A round whose operations started `lag_ms` late, with loadmix at `own` % of one core
    /// and the host `busy` % busy.
    fn round(lag_ms: u64, own: f64, busy: f64, steal: f64) -> RoundResult {
        let mut lag = new_histogram();
        for _ in 0..100 {
            lag.record(lag_ms * 1000).unwrap();
        }
        RoundResult {
            index: 2,
            started_at: std::time::SystemTime::now(),
            slot_late: None,
            elapsed: std::time::Duration::from_secs(3),
            measured: std::time::Duration::from_secs(3),
            stats: RoundStats {
                lag,
                ..RoundStats::empty()
            },
            vus: 10,
            connections_opened: 0,
            requests_retried: 0,
            setup_failures: 0,
            interrupted: false,
            host: HostSamples {
                process_cpu: vec![own; 3],
                host_busy: vec![busy; 3],
                steal: vec![steal; 3],
                run_queue: vec![2; 3],
                users: vec![10; 3],
            },
            dropped: 0,
            late: 0,
            cleanup: Default::default(),
            server: Vec::new(),
            metrics: Vec::new(),
        }
    }

    #[test]
    fn late_starts_are_blamed_on_whoever_took_the_cpu() {
        let cores = std::thread::available_parallelism().map_or(1, |n| n.get()) as f64;
        let text = |r: RoundResult| generator(&r, false).warnings.join(" | ");
        // loadmix itself saturated every core.
        let own = text(round(50, 95.0 * cores, 99.0, 0.0));
        assert!(own.contains("round 2: generator-limited"), "{own}");
        // loadmix barely used any CPU; other processes filled the machine.
        let crowded = text(round(50, 1.0, 99.0, 0.0));
        assert!(
            crowded.contains("round 2: the host was crowded"),
            "{crowded}"
        );
        assert!(!crowded.contains("generator-limited"), "{crowded}");
        // The hypervisor took the time.
        let stolen = text(round(50, 1.0, 20.0, 30.0));
        assert!(stolen.contains("hypervisor took 30%"), "{stolen}");
        // On time: no warning at all.
        assert!(text(round(0, 1.0, 99.0, 0.0)).is_empty());
    }
}
