//! The generator watching itself in a round: its CPU, its scheduling lag, the host's load,
//! and warnings when it, not the server, was the limit.

use serde::{Deserialize, Serialize};

use super::SLOT_LATE_WARNING;

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
    /// The same per class, in the workload's order (classes that started nothing left
    /// out).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub class_lag: Vec<ClassLag>,
    /// Open model: arrivals dropped, or started late, because every slot was busy. Paced
    /// users: the slots that fell due before the round's end and were not sent by then.
    pub dropped: u64,
    pub late: u64,
    /// Open model: arrivals the generator itself started over 10 ms after they fell
    /// due, no busy slot holding them: its schedule was not kept.
    #[serde(default)]
    pub behind: u64,
    /// The host around loadmix, means over the round: busy CPU and steal, percent of all
    /// cores; the longest run queue seen.
    #[serde(default)]
    pub host_busy_mean: f64,
    #[serde(default)]
    pub steal_mean: f64,
    #[serde(default)]
    pub run_queue_max: u32,
    /// The embedded server's share of `cpu_mean` (its threads, same process, same cores),
    /// percent of one core; `None` when the target was not embedded.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub embedded_cpu_mean: Option<f64>,
    /// The share of the round in which some task waited for a core (`/proc/pressure/cpu`),
    /// percent, mean over its seconds; `None` where the kernel does not keep it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pressure_mean: Option<f64>,
    /// The generator's own CPU over the round, seconds: the process's less the embedded
    /// server's threads'.
    #[serde(default)]
    pub cpu_s: f64,
    /// The embedded server's threads' CPU over the round, seconds, when it is the target.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub embedded_cpu_s: Option<f64>,
    /// What each operation cost the generator itself: `cpu_s` per successful operation
    /// (ms), as the watched server's `cpu_ms_per_op` counts; `None` when none succeeded.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpu_ms_per_op: Option<f64>,
    /// The same for the embedded server's threads, when the target is embedded.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub embedded_cpu_ms_per_op: Option<f64>,
    /// `cpu_s` shared out among the classes, in the workload's order (classes whose
    /// users never ran left out).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub class_cpu: Vec<ClassCpu>,
    /// Why the generator may have limited the run; empty when it did not.
    pub warnings: Vec<String>,
}

/// One class's start lag in a round (ms): how late the generator itself started its
/// operations, never the server's doing.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct ClassLag {
    pub class: String,
    pub operations: u64,
    pub p50_ms: f64,
    pub p99_ms: f64,
    pub max_ms: f64,
}

/// What one class's operations cost the generator in a round: its share of the
/// generator's CPU, in proportion to the time its users' tasks ran on the runtime's
/// threads (the runtime's own work shared out in the same proportions).
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct ClassCpu {
    pub class: String,
    /// Its successful operations, as the headline counts them (requests answered, else
    /// messages sent, else messages taken).
    pub operations: u64,
    /// Its share of the generator's CPU, seconds.
    pub cpu_s: f64,
    /// How long its users' tasks' polls took, seconds (wall time, so on a crowded host
    /// it holds the moments the kernel ran another thread in the middle of one, and the
    /// classes' sum can pass the CPU): what `cpu_s` was shared out by.
    #[serde(default)]
    pub busy_s: f64,
    /// `cpu_s` per operation (ms); `None` when none succeeded.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpu_ms_per_op: Option<f64>,
}

impl ClassCpu {
    /// `cpu_ms_per_op` from `cpu_s` and `operations`.
    pub(in crate::report) fn per_op(&mut self) {
        self.cpu_ms_per_op =
            (self.operations > 0).then(|| self.cpu_s * 1000.0 / self.operations as f64);
    }
}

/// The generator's CPU (`cpu_s`) shared out among the classes by the time their tasks
/// ran (`busy_s`, by class index), beside each class's operations (`operations`).
pub(super) fn class_cpu(
    cpu_s: f64,
    busy_s: &[f64],
    classes: &[String],
    operations: &[u64],
) -> Vec<ClassCpu> {
    let total: f64 = busy_s.iter().sum();
    if total <= 0.0 {
        return Vec::new();
    }
    classes
        .iter()
        .zip(busy_s)
        .zip(operations)
        .filter(|((_, busy), _)| **busy > 0.0)
        .map(|((class, busy), &operations)| {
            let mut c = ClassCpu {
                class: class.clone(),
                operations,
                cpu_s: cpu_s * busy / total,
                busy_s: *busy,
                cpu_ms_per_op: None,
            };
            c.per_op();
            c
        })
        .collect()
}

/// p50, p99 and max of a lag histogram in ms; zeros when it is empty.
fn lag_ms(lag: &hdrhistogram::Histogram<u64>) -> (f64, f64, f64) {
    let ms = |us: u64| us as f64 / 1000.0;
    match lag.is_empty() {
        true => (0.0, 0.0, 0.0),
        false => (
            ms(lag.value_at_quantile(0.5)),
            ms(lag.value_at_quantile(0.99)),
            ms(lag.max()),
        ),
    }
}

/// Lag above this at the 99th percentile means the generator could not keep its schedule.
pub(crate) const LAG_P99_LIMIT_MS: f64 = 10.0;
/// CPU above this share of all cores, on average, means the generator's process was busy.
const CPU_LIMIT: f64 = 0.90;

pub(super) fn of(
    r: &crate::engine::RoundResult,
    classes: &[String],
    embedded: bool,
    successes: u64,
) -> Generator {
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    let cpu = r.host.process_cpu.clone();
    let cpu_mean = if cpu.is_empty() {
        0.0
    } else {
        cpu.iter().sum::<f64>() / cpu.len() as f64
    };
    let (lag_p50_ms, lag_p99_ms, lag_max_ms) = lag_ms(&r.stats.lag);
    let class_lag = class_lags(r, classes);
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
    let pressure_mean = (!r.host.pressure.is_empty()).then(|| mean(&r.host.pressure));
    let embedded_cpu_mean = (!r.host.embedded_cpu.is_empty()).then(|| mean(&r.host.embedded_cpu));
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
    if cpu_mean > CPU_LIMIT * 100.0 * cores as f64 {
        warnings.push(format!(
            "round {round}: the loadmix process used {cpu_mean:.0}% CPU of {cores} cores on average{}",
            match (embedded, embedded_cpu_mean) {
                (true, Some(server)) => format!(
                    " (the embedded server runs in the same process, on the same cores: it used {server:.0}%, the generator {:.0}%)",
                    (cpu_mean - server).max(0.0)
                ),
                (true, None) => " (the embedded server runs in the same process)".to_string(),
                (false, _) => String::new(),
            }
        ));
    }
    warnings.extend(schedule_warnings(r));
    let served_s = r.host.embedded_cpu_s.unwrap_or(0.0);
    let mut g = Generator {
        cpu_s: (r.host.process_cpu_s - served_s).max(0.0),
        embedded_cpu_s: r.host.embedded_cpu_s,
        cpu_percent: cpu,
        cpu_mean,
        cores,
        lag_p50_ms,
        lag_p99_ms,
        lag_max_ms,
        class_lag,
        dropped: r.dropped,
        late: r.late,
        behind: r.behind,
        host_busy_mean,
        steal_mean,
        run_queue_max,
        embedded_cpu_mean,
        pressure_mean,
        warnings,
        ..Generator::default()
    };
    g.per_ops(successes);
    g
}

impl Generator {
    /// The CPU figures per operation, against `successes` (a merged round's are every
    /// shard's).
    pub(in crate::report) fn per_ops(&mut self, successes: u64) {
        let per_op = |cpu_s: f64| (successes > 0).then(|| cpu_s * 1000.0 / successes as f64);
        self.embedded_cpu_ms_per_op = self.embedded_cpu_s.and_then(per_op);
        self.cpu_ms_per_op = per_op(self.cpu_s);
        self.class_cpu.iter_mut().for_each(ClassCpu::per_op);
    }

    /// Another shard's share of the same round added to this one's, class by class.
    pub(in crate::report) fn add_class_cpu(&mut self, other: &[ClassCpu]) {
        add_class_cpu(&mut self.class_cpu, other);
    }
}

/// `other`'s classes added to `into`'s, class by class (shards of a round, or rounds of
/// a run); the figures per operation are left to be worked out once over the sum.
pub(in crate::report) fn add_class_cpu(into: &mut Vec<ClassCpu>, other: &[ClassCpu]) {
    for c in other {
        match into.iter_mut().find(|m| m.class == c.class) {
            Some(m) => {
                m.operations += c.operations;
                m.cpu_s += c.cpu_s;
                m.busy_s += c.busy_s;
            }
            None => into.push(c.clone()),
        }
    }
}

/// Each class's start lag, in the workload's order (classes that started nothing left
/// out).
fn class_lags(r: &crate::engine::RoundResult, classes: &[String]) -> Vec<ClassLag> {
    classes
        .iter()
        .zip(&r.stats.class_lag)
        .filter(|(_, h)| !h.is_empty())
        .map(|(class, h)| {
            let (p50_ms, p99_ms, max_ms) = lag_ms(h);
            ClassLag {
                class: class.clone(),
                operations: h.len(),
                p50_ms,
                p99_ms,
                max_ms,
            }
        })
        .collect()
}

/// A warning when an operation cost the generator more CPU than it cost the server (the
/// embedded one's threads, or a watched process): on shared cores the generator's work is
/// taken from the server's.
pub(super) fn heavier(g: &mut Generator, round: u32, watched: Option<f64>) {
    let (Some(own), Some(server)) = (g.cpu_ms_per_op, g.embedded_cpu_ms_per_op.or(watched)) else {
        return;
    };
    if own >= server {
        g.warnings.push(format!(
            "round {round}: each operation cost the generator {own:.3} ms of CPU and the server {server:.3} ms: the generator was the heavier side, and where they share cores its work is taken from the server's"
        ));
    }
}

/// What kept a round's users from their schedule: arrivals dropped or late, users stopped
/// because their picks found nothing to act on, a shard's round begun after its slot.
fn schedule_warnings(r: &crate::engine::RoundResult) -> Vec<String> {
    let round = r.index;
    let mut warnings = Vec::new();
    let sessions = r.vus.max(1);
    if r.dropped > 0 || r.late * 100 > sessions {
        warnings.push(format!(
            "round {round}: arrivals could not start on time: {} dropped, {} late of {} (max_concurrency reached, or paced users behind their schedule when the round ended)",
            r.dropped, r.late, r.vus
        ));
    }
    if r.behind * 100 > sessions {
        warnings.push(format!(
            "round {round}: the generator started {} of {} arrivals over {} ms late, no busy slot holding them: it did not keep its schedule",
            r.behind,
            r.vus,
            crate::engine::BEHIND_LIMIT.as_millis()
        ));
    }
    if r.stuck > 0 {
        warnings.push(format!(
            "round {round}: {} users stopped: {} picks in a row found nothing to act on (the mix needs items, such as events to update, that none of its operations made)",
            r.stuck,
            crate::engine::MAX_SKIPS_IN_A_ROW
        ));
    }
    if r.panicked > 0 {
        warnings.push(format!(
            "round {round}: {} users ended on an internal error of loadmix (its message is on stderr; please report it): what they had not yet handed over is missing from these figures",
            r.panicked
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
    warnings
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
            sessions: Vec::new(),
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
            unsolicited_answers: 0,
            setup: Default::default(),
            setup_failures: 0,
            setup_failure: None,
            setup_took: Default::default(),
            interrupted: false,
            host: HostSamples {
                process_cpu: vec![own; 3],
                host_busy: vec![busy; 3],
                steal: vec![steal; 3],
                run_queue: vec![2; 3],
                users: vec![10; 3],
                pressure: Vec::new(),
                embedded_cpu: Vec::new(),
                process_cpu_s: own / 100.0 * 3.0,
                embedded_cpu_s: None,
                class_busy_s: Vec::new(),
            },
            faults: Vec::new(),
            dropped: 0,
            late: 0,
            behind: 0,
            stuck: 0,
            panicked: 0,
            products: Default::default(),
            server: Vec::new(),
            metrics: Vec::new(),
        }
    }

    #[test]
    fn users_lost_to_a_panic_are_said_aloud() {
        let mut r = round(0, 1.0, 1.0, 0.0);
        assert!(schedule_warnings(&r).is_empty());
        r.panicked = 2;
        let w = schedule_warnings(&r).join(" | ");
        assert!(
            w.contains("round 2: 2 users ended on an internal error of loadmix"),
            "{w}"
        );
    }

    #[test]
    fn late_starts_are_blamed_on_whoever_took_the_cpu() {
        let cores = std::thread::available_parallelism().map_or(1, |n| n.get()) as f64;
        let text = |r: RoundResult| of(&r, &[], false, 100).warnings.join(" | ");
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

    /// The process's CPU over the round, less the embedded server's threads', per
    /// successful operation; the side that cost more is said when it is the generator.
    #[test]
    fn an_operations_cost_to_the_generator_is_set_beside_the_servers() {
        let mut r = round(0, 100.0, 100.0, 0.0);
        (r.host.process_cpu_s, r.host.embedded_cpu_s) = (3.0, Some(1.0));
        let mut g = of(&r, &[], true, 1000);
        assert_eq!((g.cpu_s, g.embedded_cpu_s), (2.0, Some(1.0)));
        assert_eq!(g.cpu_ms_per_op, Some(2.0));
        assert_eq!(g.embedded_cpu_ms_per_op, Some(1.0));
        heavier(&mut g, 2, None);
        let w = g.warnings.join(" | ");
        assert!(
            w.contains(
                "round 2: each operation cost the generator 2.000 ms of CPU and the server 1.000 ms"
            ),
            "{w}"
        );
        // A watched server that cost more: no warning; none succeeded: no figure.
        r.host.embedded_cpu_s = None;
        let mut g = of(&r, &[], false, 1000);
        assert_eq!(g.cpu_ms_per_op, Some(3.0));
        heavier(&mut g, 2, Some(4.0));
        assert!(
            !g.warnings.iter().any(|w| w.contains("heavier")),
            "{:?}",
            g.warnings
        );
        assert_eq!(of(&r, &[], false, 0).cpu_ms_per_op, None);
    }

    #[test]
    fn the_generators_cpu_is_shared_out_by_the_time_each_classs_users_ran() {
        let names = ["morse", "atom", "idle"].map(String::from);
        let c = class_cpu(2.0, &[0.75, 0.25, 0.0], &names, &[100, 0, 0]);
        // Three quarters of the time ran in morse's tasks: three quarters of the CPU.
        assert_eq!(
            c.len(),
            2,
            "a class whose users never ran is left out: {c:?}"
        );
        assert_eq!((c[0].class.as_str(), c[0].cpu_s), ("morse", 1.5));
        assert_eq!(c[0].cpu_ms_per_op, Some(15.0));
        assert_eq!((c[1].cpu_s, c[1].cpu_ms_per_op), (0.5, None));
        // Nothing measured: nothing shared out (no division by zero).
        assert!(class_cpu(2.0, &[0.0, 0.0], &names, &[1, 1]).is_empty());
        assert!(class_cpu(2.0, &[], &names, &[]).is_empty());
        // Shards of one round add class by class; the figure per operation is over all.
        let mut g = Generator {
            class_cpu: c,
            ..Generator::default()
        };
        g.add_class_cpu(&class_cpu(1.0, &[0.5, 0.5], &names, &[50, 10]));
        g.per_ops(160);
        assert_eq!(g.class_cpu[0].operations, 150);
        assert_eq!(g.class_cpu[0].cpu_s, 2.0);
        assert_eq!(g.class_cpu[0].busy_s, 1.25);
        assert_eq!(g.class_cpu[1].cpu_ms_per_op, Some(100.0));
    }
}
