//! The engine: turns a resolved workload into virtual users on tokio and runs them.
//!
//! Closed model: each class starts `count` VUs; a VU thinks, picks an operation from its
//! class's table, runs it through its protocol driver and records the outcome, until the
//! round's duration is over (operations in flight finish, bounded by the request timeout)
//! or it has done its iterations. Rounds run one after another, each with fresh VU state.
//! A stop request (Ctrl-C) ends the current round at once: in-flight operations are
//! abandoned, everything already measured is kept, and the run is marked interrupted.
//!
//! The engine knows nothing of any protocol: it calls [`VuDriver::execute`].

pub mod plan;
pub mod seed;

use std::sync::Arc;
use std::time::{Duration, SystemTime};

use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use crate::metrics::{self, LabelTable, RoundStats, Sample};
use crate::protocol::{AccountPlan, ClassDriver, ProtocolError, VuDriver, VuIds};
use crate::transport::{Conn, Endpoint, ErrorClass, Timeouts};
use crate::workload::{Stop, UserClass, Workload};
use seed::{VuRngs, class_seed, next_op, next_think};

/// How to run, beyond what the workload says.
#[derive(Clone)]
pub struct EngineConfig {
    pub endpoint: Arc<Endpoint>,
    /// Cancelled on Ctrl-C (or by a test) to stop early.
    pub stop: CancellationToken,
    /// Keep a log of every operation (`--log-ops`).
    pub log_ops: bool,
    /// Probe each class's protocol before the clock starts.
    pub preflight: bool,
    pub run_id: Arc<str>,
    /// Called after each round (progress lines); must be cheap.
    pub on_round: Option<RoundCallback>,
    /// Running totals per class, for a progress display.
    pub live: Option<Arc<metrics::Live>>,
}

/// Called with a finished round and the number of rounds planned.
pub type RoundCallback = Arc<dyn Fn(&RoundResult, u32) + Send + Sync>;

#[derive(Debug, thiserror::Error)]
pub enum EngineError {
    #[error(transparent)]
    Protocol(#[from] ProtocolError),
}

/// One executed operation, when `--log-ops` is on.
#[derive(Debug, Clone, PartialEq)]
pub struct OpLogEntry {
    pub round: u32,
    pub class: usize,
    pub vu: u32,
    pub seq: u64,
    /// Index into the class's operation table (what the VU picked); `None` for a
    /// bootstrap operation, which is not picked from the table.
    pub op: Option<usize>,
    /// Label it was reported under (index into the class's labels).
    pub label: usize,
    pub start_us: u64,
    pub latency_us: u64,
    pub status: u16,
    pub error: Option<ErrorClass>,
    /// Picked but with nothing to act on: nothing sent, nothing recorded.
    pub skipped: bool,
}

/// The first failures of a run, with what came back, for the report.
#[derive(Debug, Clone)]
pub struct FailureNote {
    pub round: u32,
    pub label: u32,
    pub error: ErrorClass,
    pub detail: String,
}

/// Everything one round produced.
#[derive(Debug, Clone)]
pub struct RoundResult {
    /// From 1.
    pub index: u32,
    pub started_at: SystemTime,
    /// Wall time from the start of the round until its last VU stopped.
    pub elapsed: Duration,
    /// `elapsed` minus the warm-up: the denominator of ops/sec.
    pub measured: Duration,
    pub stats: RoundStats,
    pub vus: u64,
    pub connections_opened: u64,
    /// VUs whose set-up (account, discovery) failed; they ran anyway, and failed visibly.
    pub setup_failures: u64,
    pub interrupted: bool,
}

/// Everything a run produced.
#[derive(Debug, Clone)]
pub struct RunResult {
    pub run_id: Arc<str>,
    pub started_at: SystemTime,
    pub finished_at: SystemTime,
    pub labels: LabelTable,
    pub rounds: Vec<RoundResult>,
    pub interrupted: bool,
    pub op_log: Vec<OpLogEntry>,
    pub failures: Vec<FailureNote>,
}

/// The label table of a workload: each class's labels, in order.
pub fn label_table(w: &Workload) -> LabelTable {
    LabelTable::new(
        w.classes
            .iter()
            .map(|c| (c.name.clone(), c.labels.clone()))
            .collect(),
    )
}

/// Build the class drivers and probe the target (exit 3 territory when this fails).
pub async fn prepare(
    w: &Workload,
    cfg: &EngineConfig,
) -> Result<Vec<Arc<ClassDriver>>, EngineError> {
    let accounts = AccountPlan::resolve(w, std::path::Path::new(&w.file).parent())?;
    let timeouts = Timeouts {
        connect: w.run.connect_timeout,
        request: w.run.timeout,
    };
    let mut drivers = Vec::new();
    for class in &w.classes {
        let d = ClassDriver::new(
            w,
            class,
            class_seed(w.run.seed, &class.name),
            accounts.clone(),
        );
        if cfg.preflight && class.count > 0 {
            d.preflight(w, class, &cfg.endpoint, timeouts, &cfg.run_id)
                .await?;
        }
        drivers.push(Arc::new(d));
    }
    Ok(drivers)
}

/// Runs the rounds of one workload against one target, one round at a time, so several
/// targets can be interleaved round by round (A B A B ...): drift on a shared machine then
/// hits every target alike.
pub struct Runner {
    cfg: EngineConfig,
    drivers: Vec<Arc<ClassDriver>>,
    labels: LabelTable,
    started_at: SystemTime,
    rounds: Vec<RoundResult>,
    op_log: Vec<OpLogEntry>,
    failures: Vec<FailureNote>,
}

impl Runner {
    /// Build the drivers and run the preflight probes.
    pub async fn new(w: &Workload, cfg: EngineConfig) -> Result<Runner, EngineError> {
        let drivers = prepare(w, &cfg).await?;
        Ok(Runner {
            labels: label_table(w),
            cfg,
            drivers,
            started_at: SystemTime::now(),
            rounds: Vec::new(),
            op_log: Vec::new(),
            failures: Vec::new(),
        })
    }

    /// Run round `r` (from 1); returns it for progress lines.
    pub async fn round(&mut self, w: &Workload, r: u32) -> &RoundResult {
        let (round, log, fails) = run_round(w, &self.cfg, &self.drivers, &self.labels, r).await;
        self.op_log.extend(log);
        let room = MAX_FAILURE_NOTES.saturating_sub(self.failures.len());
        self.failures.extend(fails.into_iter().take(room));
        if let Some(f) = &self.cfg.on_round {
            f(&round, w.run.rounds);
        }
        self.rounds.push(round);
        self.rounds.last().expect("just pushed")
    }

    pub fn stopped(&self) -> bool {
        self.cfg.stop.is_cancelled()
    }

    pub fn finish(self, w: &Workload) -> RunResult {
        RunResult {
            run_id: self.cfg.run_id.clone(),
            started_at: self.started_at,
            finished_at: SystemTime::now(),
            labels: self.labels,
            interrupted: self.cfg.stop.is_cancelled() || self.rounds.len() < w.run.rounds as usize,
            rounds: self.rounds,
            op_log: self.op_log,
            failures: self.failures,
        }
    }
}

/// Run every round of the workload against one target.
pub async fn run(w: &Workload, cfg: &EngineConfig) -> Result<RunResult, EngineError> {
    let mut runner = Runner::new(w, cfg.clone()).await?;
    for r in 1..=w.run.rounds {
        if runner.stopped() {
            break;
        }
        runner.round(w, r).await;
    }
    Ok(runner.finish(w))
}

const MAX_FAILURE_NOTES: usize = 20;
/// Per VU, keep only the first few failure details: the report needs examples, not a log.
const FAILURE_NOTES_PER_VU: usize = 2;

struct VuOutput {
    log: Vec<OpLogEntry>,
    failures: Vec<FailureNote>,
    connections: u64,
}

async fn run_round(
    w: &Workload,
    cfg: &EngineConfig,
    drivers: &[Arc<ClassDriver>],
    labels: &LabelTable,
    round: u32,
) -> (RoundResult, Vec<OpLogEntry>, Vec<FailureNote>) {
    let timeouts = Timeouts {
        connect: w.run.connect_timeout,
        request: w.run.timeout,
    };
    // Set-up (accounts, discovery) runs before the clock starts, as the 2007 runner created
    // its users before starting their threads.
    let mut setups = tokio::task::JoinSet::new();
    for (ci, class) in w.classes.iter().enumerate() {
        for vu in 0..class.count {
            let ids = VuIds {
                vu,
                round,
                run_id: cfg.run_id.clone(),
            };
            let mut driver = drivers[ci].new_vu(w, class, ids);
            let mut conn = Conn::new(cfg.endpoint.clone(), class.connection, timeouts);
            setups.spawn(async move {
                let res = driver.setup(&mut conn).await;
                (ci, vu, driver, conn, res)
            });
        }
    }
    let mut ready = Vec::new();
    let mut failures = Vec::new();
    let mut setup_failures = 0u64;
    while let Some(res) = setups.join_next().await {
        if let Ok((ci, vu, driver, conn, res)) = res {
            if let Err(detail) = res {
                setup_failures += 1;
                failures.push(FailureNote {
                    round,
                    label: labels.index(ci, 0),
                    error: ErrorClass::Status,
                    detail: format!("set-up of {}#{vu}: {detail}", w.classes[ci].name),
                });
            }
            ready.push((ci, vu, driver, conn));
        }
    }
    ready.sort_by_key(|(ci, vu, _, _)| (*ci, *vu));

    let live = cfg
        .live
        .clone()
        .map(|l| (l, labels.iter().map(|(ci, _, _)| ci).collect()));
    let (factory, aggregator) = metrics::aggregator(labels.len(), w.run.warmup, live);
    let started_at = SystemTime::now();
    let start = Instant::now();
    let deadline = match w.run.stop {
        Stop::Duration(d) => Some(start + d),
        Stop::Iterations(_) => None,
    };
    let classes: Vec<Arc<UserClass>> = w.classes.iter().map(|c| Arc::new(c.clone())).collect();
    let mut tasks = tokio::task::JoinSet::new();
    let mut vus = 0u64;
    for (ci, vu, driver, conn) in ready {
        let class = &w.classes[ci];
        vus += 1;
        let spec = VuSpec {
            class_index: ci,
            class: classes[ci].clone(),
            vu,
            round,
            seed: w.run.seed,
            start,
            deadline,
            iterations: class.iterations.or(match w.run.stop {
                Stop::Iterations(n) => Some(n),
                Stop::Duration(_) => None,
            }),
            label_base: labels.index(ci, 0),
            log_ops: cfg.log_ops,
        };
        let recorder = factory.recorder();
        let stop = cfg.stop.clone();
        tasks.spawn(vu_loop(spec, driver, conn, recorder, stop));
    }
    drop(factory);
    let mut log = Vec::new();
    let mut connections = 0;
    while let Some(res) = tasks.join_next().await {
        // A VU task only ends by returning; a panic would be a bug, and losing one VU's
        // output is better than losing the round.
        if let Ok(out) = res {
            log.extend(out.log);
            failures.extend(out.failures);
            connections += out.connections;
        }
    }
    let elapsed = start.elapsed();
    let stats = aggregator.await.unwrap_or(RoundStats {
        ops: Vec::new(),
        warmup_requests: 0,
    });
    log.sort_by_key(|e| (e.class, e.vu, e.seq));
    failures.sort_by_key(|f| f.label);
    failures.truncate(MAX_FAILURE_NOTES);
    (
        RoundResult {
            index: round,
            started_at,
            elapsed,
            measured: elapsed.saturating_sub(w.run.warmup),
            stats,
            vus,
            connections_opened: connections,
            setup_failures,
            interrupted: cfg.stop.is_cancelled(),
        },
        log,
        failures,
    )
}

struct VuSpec {
    class_index: usize,
    class: Arc<UserClass>,
    vu: u32,
    round: u32,
    seed: u64,
    start: Instant,
    deadline: Option<Instant>,
    iterations: Option<u64>,
    label_base: u32,
    log_ops: bool,
}

async fn vu_loop(
    spec: VuSpec,
    mut driver: VuDriver,
    mut conn: Conn,
    mut recorder: metrics::Recorder,
    stop: CancellationToken,
) -> VuOutput {
    let class = &spec.class;
    let mut rngs = VuRngs::new(spec.seed, &class.name, spec.vu, spec.round);
    let mut out = VuOutput {
        log: Vec::new(),
        failures: Vec::new(),
        connections: 0,
    };
    let mut seq = 0u64;
    loop {
        if spec.iterations.is_some_and(|n| seq >= n) || stop.is_cancelled() {
            break;
        }
        let think = next_think(class, &mut rngs.think);
        if !think.is_zero() {
            let wake = Instant::now() + think;
            let until = match spec.deadline {
                Some(d) if d < wake => d,
                _ => wake,
            };
            tokio::select! {
                _ = tokio::time::sleep_until(until) => {}
                _ = stop.cancelled() => break,
            }
        }
        if spec.deadline.is_some_and(|d| Instant::now() >= d) {
            break;
        }
        let op_start = Instant::now();
        let (op, outcome) = if driver.needs_bootstrap() {
            let o = tokio::select! {
                o = driver.bootstrap(&mut conn, &mut rngs.data) => o,
                _ = stop.cancelled() => break,
            };
            (None, o)
        } else {
            let op = next_op(class, &mut rngs.mix);
            let o = tokio::select! {
                o = driver.execute(op, seq, &mut conn, &mut rngs.data) => o,
                _ = stop.cancelled() => break,
            };
            (Some(op), o)
        };
        if outcome.skipped {
            if spec.log_ops {
                out.log.push(OpLogEntry {
                    round: spec.round,
                    class: spec.class_index,
                    vu: spec.vu,
                    seq,
                    op,
                    label: op.unwrap_or(0),
                    start_us: op_start.duration_since(spec.start).as_micros() as u64,
                    latency_us: 0,
                    status: 0,
                    error: None,
                    skipped: true,
                });
            }
            seq += 1;
            continue;
        }
        let now = Instant::now();
        let label = outcome.label.or(op).unwrap_or(0);
        let start_us = op_start.duration_since(spec.start).as_micros() as u64;
        // The driver times the wire; an operation that failed before any answer arrived is
        // timed by the engine, so timeouts show their real cost in the timeline.
        let latency = if outcome.latency.is_zero() {
            now.duration_since(op_start)
        } else {
            outcome.latency
        };
        let sample = Sample {
            label: spec.label_base + label as u32,
            start_us,
            latency_us: latency.as_micros() as u64,
            status: outcome.status.unwrap_or(0),
            error: outcome.error,
            bytes_sent: outcome.bytes_sent,
            bytes_received: outcome.bytes_received,
        };
        recorder.record(sample, now);
        if let (Some(e), true) = (outcome.error, out.failures.len() < FAILURE_NOTES_PER_VU) {
            out.failures.push(FailureNote {
                round: spec.round,
                label: sample.label,
                error: e,
                detail: outcome.detail.unwrap_or_default(),
            });
        }
        if spec.log_ops {
            out.log.push(OpLogEntry {
                round: spec.round,
                class: spec.class_index,
                vu: spec.vu,
                seq,
                op,
                label,
                start_us,
                latency_us: sample.latency_us,
                status: sample.status,
                error: outcome.error,
                skipped: false,
            });
        }
        seq += 1;
    }
    recorder.flush();
    out.connections = conn.opened;
    out
}
