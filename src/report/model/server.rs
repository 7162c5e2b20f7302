//! The server's side of a round and of the run: watched processes (CPU, memory, I/O, a
//! JVM's collections) and scraped metrics series, each also per 1,000 operations.

use serde::{Deserialize, Serialize};

use super::RoundReport;

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
    pub(super) fn of(p: &crate::monitor::ProcessRound, successes: u64, secs: f64) -> ServerProcess {
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
    pub(in crate::report) fn per_ops(&mut self, successes: u64) {
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
    /// The seconds a counter's increase was read over; its mean rate is the increase
    /// over them. Absent in reports written before it was kept.
    #[serde(default, skip_serializing_if = "no_span")]
    pub span_s: f64,
    /// A counter's increase per 1,000 successful operations (GC pauses, commits, ...):
    /// of the headline sum, or of what `per` names.
    pub per_1000_ops: f64,
    /// `per:` of its `monitor.prometheus` entry: the operation, class or sum whose
    /// successes `per_1000_ops` divides by; absent: the headline sum's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub per: Option<String>,
    /// Per second (rounds only).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub values: Vec<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub problem: Option<String>,
}

impl ServerSeries {
    /// A round's series, its per-operation figure left for [`ServerSeries::per_ops`].
    pub(super) fn of(
        s: &crate::monitor::prometheus::SeriesRound,
        per: Option<String>,
    ) -> ServerSeries {
        ServerSeries {
            url: s.url.clone(),
            series: s.series.clone(),
            kind: s.kind.clone(),
            mean: s.mean,
            max: s.max,
            increase: s.increase,
            span_s: s.span_s,
            per_1000_ops: 0.0,
            per,
            values: s.values.clone(),
            problem: s.problem.clone(),
        }
    }

    /// A counter's increase per operation, against `successes` (see
    /// [`ServerProcess::per_ops`]).
    pub(in crate::report) fn per_ops(&mut self, successes: u64) {
        self.per_1000_ops = per_1000(self.increase, successes);
    }
}

fn no_span(s: &f64) -> bool {
    *s == 0.0
}

fn per_1000(increase: f64, successes: u64) -> f64 {
    if successes > 0 {
        increase * 1000.0 / successes as f64
    } else {
        0.0
    }
}

/// Each scraped series over all rounds: increases and the seconds read add; a counter's
/// mean is the one over the other, a gauge's the mean of every reading. Its
/// per-operation figure is left for [`ServerSeries::per_ops`].
pub(in crate::report) fn series_summary(rounds: &[RoundReport]) -> Vec<ServerSeries> {
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
            let span_s: f64 = per.iter().map(|x| x.span_s).sum();
            let kind = per
                .iter()
                .map(|x| x.kind.clone())
                .find(|k| !k.is_empty())
                .unwrap_or_default();
            ServerSeries {
                url: m.url.clone(),
                series: m.series.clone(),
                // A counter's rate over every second read, as in each round.
                mean: match (kind == "counter" && span_s > 0.0, values.is_empty()) {
                    (true, _) => increase / span_s,
                    (false, true) => 0.0,
                    (false, false) => values.iter().sum::<f64>() / values.len() as f64,
                },
                kind,
                max: values.iter().copied().fold(0.0, f64::max),
                increase,
                span_s,
                per_1000_ops: 0.0,
                per: m.per.clone(),
                values: Vec::new(),
                problem: per.iter().find_map(|x| x.problem.clone()),
            }
        })
        .collect()
}

/// Each watched process over all rounds.
pub(in crate::report) fn server_summary(
    rounds: &[RoundReport],
    successes: u64,
) -> Vec<ServerProcess> {
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
