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

pub mod host;
pub mod open;
pub mod plan;
pub mod seed;
pub mod session;
pub mod shard;
pub mod timer;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, SystemTime};

use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use crate::answer::Answer;
use crate::ledger::Ledger;
use crate::metrics::live::{Phase, Untimed};
use crate::metrics::{self, LabelTable, RoundStats, Sample};
use crate::protocol::cleanup::CleanupStats;
use crate::protocol::drain::DrainStats;
use crate::protocol::{AccountPlan, ClassDriver, Done, Handoff, ProtocolError, VuDriver, VuIds};
use crate::transport::{Endpoint, ErrorClass, Tally, Timeouts, add_tally};
use crate::workload::{Stop, UserClass, Workload};
use seed::{VuRngs, class_seed};

/// How to run, beyond what the workload says.
#[derive(Clone)]
pub struct EngineConfig {
    pub endpoint: Arc<Endpoint>,
    /// Cancelled on Ctrl-C (or by a test) to stop early.
    pub stop: CancellationToken,
    /// Cancelled on a second signal: a cleanup that began after `stop` stops too.
    pub hurry: CancellationToken,
    /// Keep a log of every operation (`--log-ops`).
    pub log_ops: bool,
    /// Probe each class's protocol before the clock starts.
    pub preflight: bool,
    pub run_id: Arc<str>,
    /// Called after each round (progress lines); must be cheap.
    pub on_round: Option<RoundCallback>,
    /// Running totals per class, for a progress display.
    pub live: Option<Arc<metrics::Live>>,
    /// Leave what each round made on the target (`--keep-data`).
    pub keep_data: bool,
    /// How long a round's cleanup and drain may take together.
    pub cleanup_timeout: Duration,
    /// The server's processes to watch during every round.
    pub monitors: Vec<crate::monitor::Watch>,
    /// The server's metrics endpoints to scrape during every round.
    pub metrics: Vec<crate::monitor::prometheus::MetricsSpec>,
    /// This process's share of the run (`--shard I/N`); the whole run by default.
    pub shard: shard::Shard,
    /// A common start (`--start-at`): each round's clock waits for its slot. Shared by
    /// every target's runner, so the slots follow the order the rounds run in.
    pub clock: Option<Arc<shard::RoundClock>>,
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
    /// The number of the table pick, from 0, as `loadmix plan` numbers them; a bootstrap
    /// carries the number of the pick that follows it.
    pub seq: u64,
    /// The think time waited before the operation (0 when paced).
    pub think_us: u64,
    /// Index into the class's operation table (what the VU picked); `None` for a
    /// bootstrap operation, which is not picked from the table.
    pub op: Option<usize>,
    /// Label it was reported under (index into the class's labels).
    pub label: usize,
    pub start_us: u64,
    pub latency_us: u64,
    pub answer: Answer,
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
    /// Under `--start-at`: how long after its slot the round's clock started (set-up that
    /// ran past the slot, or the timer's own lateness).
    pub slot_late: Option<Duration>,
    /// Wall time from the start of the round until its last VU stopped.
    pub elapsed: Duration,
    /// `elapsed` minus the warm-up: the denominator of ops/sec.
    pub measured: Duration,
    pub stats: RoundStats,
    pub vus: u64,
    pub connections_opened: u64,
    /// Requests sent again on a new connection because the server never took them (it had
    /// closed the kept connection).
    pub requests_retried: u64,
    /// The users' set-up requests (accounts, discovery) before the clock, by method and
    /// status.
    pub setup: Tally,
    /// Bytes found on connections that no request asked for (the server's protocol
    /// errors; each closed its connection, and the requests went on fresh ones).
    pub unsolicited_answers: u64,
    /// VUs whose set-up (account, discovery) failed; they ran anyway, and failed visibly.
    pub setup_failures: u64,
    pub interrupted: bool,
    /// This process's CPU use, and the machine around it, per second: how busy, how much
    /// stolen, the run queue.
    pub host: host::HostSamples,
    /// The server's watched processes over the round.
    pub server: Vec<crate::monitor::ProcessRound>,
    /// The server's scraped metrics over the round.
    pub metrics: Vec<crate::monitor::prometheus::SeriesRound>,
    /// Open model: arrivals dropped, or started late, because every slot was busy. Paced
    /// users: the slots that fell due before the round's end and were not sent by then.
    pub dropped: u64,
    pub late: u64,
    /// Removing what the round made, after its clock stopped.
    pub cleanup: CleanupStats,
    /// Draining the broker destinations it used, and deleting the queues it declared.
    pub drain: DrainStats,
    /// What its producers sent and its consumers (and the drain) took, by stamp.
    pub ledger: Ledger,
    /// Classes with behaviours: their users' sessions, by class index.
    pub sessions: Vec<(usize, session::ClassSessions)>,
}

/// Everything a run produced.
#[derive(Debug, Clone)]
pub struct RunResult {
    pub run_id: Arc<str>,
    pub started_at: SystemTime,
    pub finished_at: SystemTime,
    pub labels: LabelTable,
    pub rounds: Vec<RoundResult>,
    /// Warm-up rounds, thrown away: what each did.
    pub warmups: Vec<WarmupRound>,
    pub interrupted: bool,
    pub op_log: Vec<OpLogEntry>,
    pub failures: Vec<FailureNote>,
    /// The measured rounds' ledgers added up; `None` when no broker was used.
    pub ledger: Option<Ledger>,
    /// The preflight probes' requests, by method and status (before any round).
    pub preflight: Tally,
}

/// A warm-up round's headline figures (the round itself is not in the report).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct WarmupRound {
    /// From 1.
    pub index: u32,
    pub elapsed: Duration,
    pub successes: u64,
    pub failures: u64,
    pub ops_per_sec: f64,
    /// Its other requests, thrown away with it but on the server's log all the same:
    /// its own warm-up period's, its users' set-up and its cleanup.
    pub other_requests: u64,
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
/// A sharded run's messages cross processes (and hosts): their stamps carry the wall clock.
fn stamp_clock(cfg: &EngineConfig) -> crate::protocol::StampClock {
    match cfg.shard.is_whole() {
        true => crate::protocol::StampClock::Monotonic,
        false => crate::protocol::StampClock::Wall,
    }
}

/// The class drivers, each probed (unless `--no-preflight`); the probes' requests.
pub async fn prepare(
    w: &Workload,
    cfg: &EngineConfig,
) -> Result<(Vec<Arc<ClassDriver>>, Tally), EngineError> {
    let accounts = AccountPlan::resolve(w, std::path::Path::new(&w.file).parent())?;
    let timeouts = Timeouts {
        connect: w.run.connect_timeout,
        request: w.run.timeout,
    };
    let mut drivers = Vec::new();
    let mut probes = Tally::new();
    for class in &w.classes {
        let d = ClassDriver::new(
            w,
            class,
            class_seed(w.run.seed, &class.name),
            accounts.clone(),
            (&cfg.run_id, stamp_clock(cfg)),
        );
        if cfg.preflight && class.count > 0 {
            // A stop signal ends a probe that hangs; no round runs after it.
            tokio::select! {
                r = d.preflight(w, class, &cfg.endpoint, timeouts, &cfg.run_id, &mut probes) => r?,
                _ = cfg.stop.cancelled() => {}
            }
        }
        drivers.push(Arc::new(d));
    }
    Ok((drivers, probes))
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
    warmups: Vec<WarmupRound>,
    op_log: Vec<OpLogEntry>,
    failures: Vec<FailureNote>,
    ledger: Option<Ledger>,
    /// The preflight probes' requests, by method and status.
    preflight: Tally,
}

impl Runner {
    /// Build the drivers and run the preflight probes.
    pub async fn new(w: &Workload, cfg: EngineConfig) -> Result<Runner, EngineError> {
        let (drivers, preflight) = prepare(w, &cfg).await?;
        if let Some(l) = &cfg.live {
            l.add_untimed(Untimed::Preflight, preflight.values().sum());
        }
        Ok(Runner {
            preflight,
            labels: label_table(w),
            cfg,
            drivers,
            started_at: SystemTime::now(),
            rounds: Vec::new(),
            warmups: Vec::new(),
            op_log: Vec::new(),
            failures: Vec::new(),
            ledger: None,
        })
    }

    /// Run warm-up round `k` (from 1): a whole round, thrown away but for its headline
    /// figures. It is numbered after the measured rounds, so the measured rounds' users
    /// draw the same random streams with or without warm-up rounds.
    pub async fn warmup_round(&mut self, w: &Workload, k: u32) {
        let index = w.run.rounds.saturating_add(k);
        let (round, _, _) = run_round(w, &self.cfg, &self.drivers, &self.labels, index).await;
        let total = round
            .stats
            .ops
            .iter()
            .fold((0u64, 0u64), |a, s| (a.0 + s.successes, a.1 + s.failures));
        let secs = round.measured.as_secs_f64();
        let other = round.stats.warmup_requests
            + round.setup.values().sum::<u64>()
            + round.cleanup.requests;
        self.warmups.push(WarmupRound {
            index: k,
            elapsed: round.elapsed,
            successes: total.0,
            failures: total.1,
            other_requests: other,
            ops_per_sec: if secs > 0.0 {
                total.0 as f64 / secs
            } else {
                0.0
            },
        });
    }

    /// Run round `r` (from 1); `on_round` hears of it.
    pub async fn round(&mut self, w: &Workload, r: u32) {
        let (mut round, log, fails) = run_round(w, &self.cfg, &self.drivers, &self.labels, r).await;
        self.op_log.extend(log);
        let ledger = std::mem::take(&mut round.ledger);
        if !ledger.is_empty() {
            let run = self.ledger.get_or_insert_with(Ledger::drained);
            let drained = run.drained && ledger.drained;
            run.absorb(ledger);
            run.drained = drained;
        }
        let room = MAX_FAILURE_NOTES.saturating_sub(self.failures.len());
        self.failures.extend(fails.into_iter().take(room));
        if let Some(f) = &self.cfg.on_round {
            f(&round, w.run.rounds);
        }
        self.rounds.push(round);
    }

    /// The target's clock against ours so far, from its answers' `Date`.
    pub fn target_clock(&self) -> Option<crate::transport::clock::ClockOffset> {
        self.cfg.endpoint.clock.estimate()
    }

    pub fn finish(self, w: &Workload) -> RunResult {
        if let Some(l) = &self.cfg.live {
            l.set_phase(Phase::Done);
        }
        RunResult {
            run_id: self.cfg.run_id.clone(),
            started_at: self.started_at,
            finished_at: SystemTime::now(),
            labels: self.labels,
            interrupted: self.cfg.stop.is_cancelled() || self.rounds.len() < w.run.rounds as usize,
            rounds: self.rounds,
            warmups: self.warmups,
            op_log: self.op_log,
            failures: self.failures,
            ledger: self.ledger,
            preflight: self.preflight,
        }
    }
}

pub const MAX_FAILURE_NOTES: usize = 20;
/// Per VU, keep only the first few failure details: the report needs examples, not a log.
const FAILURE_NOTES_PER_VU: usize = 2;

#[derive(Default)]
struct VuOutput {
    log: Vec<OpLogEntry>,
    failures: Vec<FailureNote>,
    /// Set-up requests, by method and status.
    setup: Tally,
    /// Open model: arrivals that found every slot taken and gave up, or waited.
    dropped: u64,
    late: u64,
    sessions: u64,
    /// Classes with behaviours: what their users' sessions came to, by class index.
    walks: Vec<(usize, session::ClassSessions)>,
    /// What its users handed over when they ended: what they left for the round's
    /// teardown, and their connections.
    handoff: Handoff,
}

impl VuOutput {
    fn absorb(&mut self, o: VuOutput) {
        self.handoff.absorb(o.handoff);
        self.log.extend(o.log);
        self.failures.extend(o.failures);
        add_tally(&mut self.setup, o.setup);
        self.dropped += o.dropped;
        self.late += o.late;
        self.sessions += o.sessions;
        for (ci, w) in o.walks {
            match self.walks.iter_mut().find(|(c, _)| *c == ci) {
                Some((_, mine)) => mine.absorb(&w),
                None => self.walks.push((ci, w)),
            }
        }
    }
}

/// The most operations a second the round's schedules start (paced users, open-model
/// arrivals at their peak rate), for the choice of timer.
fn scheduled_rate(classes: &[UserClass]) -> f64 {
    classes
        .iter()
        .map(|c| match (&c.arrival, c.pacing) {
            (Some(a), _) => c.ramp.iter().filter_map(|s| s.to).fold(a.rate, f64::max),
            (None, Some(p)) if !p.is_zero() => Workload::peak_users(c) as f64 / p.as_secs_f64(),
            _ => 0.0,
        })
        .sum()
}

/// When each closed VU of `class` is active: VU `i` (from 0) starts the first moment the
/// ramped count exceeds `i` and stops the first moment after that it falls back to `i` or
/// below (`None`: it runs to the end). One pass over the ramp for the whole class, in 10 ms
/// steps, so a long ramp over many users costs steps + users, not their product.
fn active_windows(class: &UserClass) -> Vec<(Duration, Option<Duration>)> {
    let peak = Workload::peak_users(class) as usize;
    if class.ramp.is_empty() {
        // Paced users take evenly spaced phases of one pacing interval (user i of n starts
        // at i × pacing / n), so 20 users paced at 20 ms send one request a millisecond,
        // not 20 together every 20 ms: a herd the server would queue and the generator
        // would time as the server's latency.
        return match class.pacing {
            Some(p) if peak > 1 => (0..peak)
                .map(|i| (p.mul_f64(i as f64 / peak as f64), None))
                .collect(),
            _ => vec![(Duration::ZERO, None); peak],
        };
    }
    let level = |t: Duration| {
        let n = crate::workload::ramp_value(class.count as f64, &class.ramp, t);
        ((n + 1e-9).floor().max(0.0) as usize).min(peak)
    };
    let mut windows: Vec<(Option<Duration>, Option<Duration>)> = vec![(None, None); peak];
    let total: Duration = class.ramp.iter().map(|s| s.over).sum();
    let step = Duration::from_millis(10);
    let mut current = 0;
    let mut t = Duration::ZERO;
    loop {
        let now = level(t);
        if now > current {
            for w in &mut windows[current..now] {
                if w.0.is_none() {
                    w.0 = Some(t);
                }
            }
        } else {
            for w in &mut windows[now..current] {
                if w.0.is_some() && w.1.is_none() {
                    w.1 = Some(t);
                }
            }
        }
        current = now;
        if t >= total {
            break;
        }
        t = (t + step).min(total);
    }
    // A VU never reached stays idle (start beyond any deadline).
    windows
        .into_iter()
        .map(|(s, e)| (s.unwrap_or(Duration::MAX), e))
        .collect()
}

/// One round: users set up before the clock, a common start, the closed users and open
/// arrivals run to the round's end, the samplers stopped with the clock, then cleanup.
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
    // Warm-up rounds are numbered after the measured ones.
    let warmup_round = round > w.run.rounds;
    if let Some(l) = &cfg.live {
        l.set_round(round, Phase::Setup);
    }
    let (ready, mut out, setup_failures) =
        set_up_users(w, cfg, drivers, labels, round, timeouts).await;
    if let Some(l) = &cfg.live {
        l.add_untimed(Untimed::Setup, out.setup.values().sum());
    }
    let live = cfg.live.clone().map(|l| (l, warmup_round));
    let (factory, aggregator) =
        metrics::aggregator(labels.len(), w.run.warmup, w.run.timeout, live);
    // A common start: wait for this round's slot, set-up done, then start the clock
    // and the samplers, whose seconds are the round's.
    let slot_late = wait_for_slot(cfg).await;
    // Closed users inside their active window and open sessions in progress: the live
    // figures' own counter when there are live figures.
    let users = cfg
        .live
        .as_ref()
        .map_or_else(|| Arc::new(AtomicU64::new(0)), |l| l.users.clone());
    if let Some(l) = &cfg.live {
        l.set_phase(match warmup_round {
            true => Phase::Warmup,
            false => Phase::Measured,
        });
    }
    let samplers = Samplers::start(cfg, users.clone());
    let started_at = SystemTime::now();
    let start = Instant::now();
    let halt = Halt::watch(&cfg.stop);
    let rc = RoundCx {
        w,
        cfg,
        labels,
        round,
        start,
        deadline: match w.run.stop {
            Stop::Duration(d) => Some(start + d),
            Stop::Iterations(_) => None,
        },
        classes: w.classes.iter().map(|c| Arc::new(c.clone())).collect(),
        users,
        // The round's timer for scheduled starts; its task ends with the last user.
        timer: timer::Timer::start(scheduled_rate(&w.classes)),
        timeouts,
    };
    let mut tasks = tokio::task::JoinSet::new();
    let vus = spawn_closed(&rc, ready, &factory, &halt.halted, &mut tasks);
    spawn_open(&rc, drivers, &factory, &mut tasks);
    drop(factory);
    while let Some(res) = tasks.join_next().await {
        // A VU task only ends by returning; a panic would be a bug, and losing one VU's
        // output is better than losing the round.
        if let Ok(o) = res {
            out.absorb(o);
        }
    }
    let elapsed = start.elapsed();
    // The samplers stop with the round's clock: the host's and the server's figures are
    // those of the measured work, not of the cleanup that follows.
    halt.round_over.cancel();
    let (host, server, metrics) = samplers.finish().await;
    let stats = aggregator.await.unwrap_or_else(|_| RoundStats::empty());
    if let Some(l) = &cfg.live {
        l.set_phase(Phase::Cleanup);
    }
    // After the clock: what the round made goes, unless the run keeps it.
    // A signal during the round has stopped it, and the cleanup still runs: the next
    // one cuts the cleanup short. A signal during the cleanup does at once.
    let until = crate::protocol::cleanup::Until::new(
        cfg.cleanup_timeout,
        match cfg.stop.is_cancelled() {
            true => cfg.hurry.clone(),
            false => cfg.stop.clone(),
        },
    );
    let wire = out.handoff.wire;
    let torn = crate::protocol::teardown::Teardown {
        endpoint: cfg.endpoint.clone(),
        timeouts,
        keep_data: cfg.keep_data,
        delete_queues: cfg.shard.is_whole(),
        until: &until,
    }
    .run(std::mem::take(&mut out.handoff))
    .await;
    if let Some(l) = &cfg.live {
        l.add_untimed(Untimed::Cleanup, torn.cleanup.requests);
    }
    // Stable: a VU's rows keep their order (a bootstrap before the pick it precedes).
    out.log.sort_by_key(|e| (e.class, e.vu));
    out.failures.sort_by_key(|f| f.label);
    out.failures.truncate(MAX_FAILURE_NOTES);
    (
        RoundResult {
            index: round,
            started_at,
            slot_late,
            elapsed,
            // A round's clock is its duration: what was in flight at its end is counted,
            // over the duration, and the overrun is reported.
            measured: match w.run.stop {
                Stop::Duration(d) => elapsed.min(d),
                Stop::Iterations(_) => elapsed,
            }
            .saturating_sub(w.run.warmup),
            stats,
            vus: vus + out.sessions,
            connections_opened: wire.opened,
            requests_retried: wire.retried,
            unsolicited_answers: wire.unsolicited,
            setup: std::mem::take(&mut out.setup),
            setup_failures,
            interrupted: cfg.stop.is_cancelled(),
            host,
            server,
            metrics,
            dropped: out.dropped,
            late: out.late,
            cleanup: torn.cleanup,
            drain: torn.drain,
            ledger: torn.ledger,
            sessions: std::mem::take(&mut out.walks),
        },
        out.log,
        out.failures,
    )
}

/// What every user of a round shares once its clock has started.
struct RoundCx<'a> {
    w: &'a Workload,
    cfg: &'a EngineConfig,
    labels: &'a LabelTable,
    round: u32,
    start: Instant,
    /// The end of a duration-bound round.
    deadline: Option<Instant>,
    classes: Vec<Arc<UserClass>>,
    users: Arc<AtomicU64>,
    timer: timer::Timer,
    timeouts: Timeouts,
}

/// A closed user set up for the round: its class, index and driver.
type Ready = (usize, u32, VuDriver);

/// Set-up (accounts, discovery) of closed users runs before the clock starts, as the 2007
/// runner created its users before starting their threads. A user whose set-up failed
/// still runs (its failures are the server's answer); the failure is noted.
async fn set_up_users(
    w: &Workload,
    cfg: &EngineConfig,
    drivers: &[Arc<ClassDriver>],
    labels: &LabelTable,
    round: u32,
    timeouts: Timeouts,
) -> (Vec<Ready>, VuOutput, u64) {
    let mut setups = tokio::task::JoinSet::new();
    for (ci, class) in w.classes.iter().enumerate() {
        // Sharded, this process runs its own users, each with the index (and so the seed
        // and account) it has in one process.
        for vu in (0..Workload::peak_users(class)).filter(|vu| cfg.shard.owns_user(*vu)) {
            let ids = VuIds {
                vu,
                round,
                run_id: cfg.run_id.clone(),
            };
            let mut driver = drivers[ci].new_vu(w, class, ids, &cfg.endpoint, timeouts);
            setups.spawn(async move {
                let res = driver.setup().await;
                let tally = driver.take_untimed();
                (ci, vu, driver, res, tally)
            });
        }
    }
    if let Some(l) = &cfg.live {
        l.setup_begins(setups.len() as u64);
    }
    let mut ready = Vec::new();
    let mut out = VuOutput::default();
    let mut setup_failures = 0u64;
    loop {
        // A stop signal ends the set-up at once (a discovery that hangs must not hold
        // the run): the users not yet set up are dropped, those that are go on to the
        // round, which then ends at once, and to its cleanup.
        let res = tokio::select! {
            biased;
            r = setups.join_next() => match r {
                Some(r) => r,
                None => break,
            },
            _ = cfg.stop.cancelled() => {
                setups.abort_all();
                break;
            }
        };
        if let Some(l) = &cfg.live {
            l.setup_one();
        }
        if let Ok((ci, vu, driver, res, tally)) = res {
            add_tally(&mut out.setup, tally);
            if let Err(detail) = res {
                setup_failures += 1;
                out.failures.push(FailureNote {
                    round,
                    label: labels.index(ci, 0),
                    error: ErrorClass::Status,
                    detail: format!("set-up of {}#{vu}: {detail}", w.classes[ci].name),
                });
            }
            ready.push((ci, vu, driver));
        }
    }
    ready.sort_by_key(|(ci, vu, _)| (*ci, *vu));

    (ready, out, setup_failures)
}

/// Under `--start-at`, wait for this round's slot (or the stop); how late it began.
async fn wait_for_slot(cfg: &EngineConfig) -> Option<Duration> {
    let slot = cfg.clock.as_ref().and_then(|c| c.next_slot())?;
    if let Ok(wait) = slot.duration_since(SystemTime::now()) {
        tokio::select! {
            _ = tokio::time::sleep(wait) => {}
            _ = cfg.stop.cancelled() => {}
        }
    }
    Some(SystemTime::now().duration_since(slot).unwrap_or_default())
}

/// The round's samplers: the host (and this process), the watched server processes, the
/// scraped metrics pages; all on the round's clock.
struct Samplers {
    done: CancellationToken,
    host: tokio::task::JoinHandle<host::HostSamples>,
    server: Option<tokio::task::JoinHandle<Vec<crate::monitor::ProcessRound>>>,
    scraped: Option<tokio::task::JoinHandle<Vec<crate::monitor::prometheus::SeriesRound>>>,
}

impl Samplers {
    fn start(cfg: &EngineConfig, users: Arc<AtomicU64>) -> Samplers {
        let done = CancellationToken::new();
        Samplers {
            host: host::sampler(done.clone(), users),
            server: (!cfg.monitors.is_empty())
                .then(|| crate::monitor::sampler(cfg.monitors.clone(), done.clone())),
            scraped: (!cfg.metrics.is_empty())
                .then(|| crate::monitor::prometheus::sampler(cfg.metrics.clone(), done.clone())),
            done,
        }
    }

    /// Stop them and take what they saw.
    async fn finish(
        self,
    ) -> (
        host::HostSamples,
        Vec<crate::monitor::ProcessRound>,
        Vec<crate::monitor::prometheus::SeriesRound>,
    ) {
        self.done.cancel();
        let host = self.host.await.unwrap_or_default();
        let server = match self.server {
            Some(s) => s.await.unwrap_or_default(),
            None => Vec::new(),
        };
        let metrics = match self.scraped {
            Some(s) => s.await.unwrap_or_default(),
            None => Vec::new(),
        };
        (host, server, metrics)
    }
}

/// The run's stop signal seen as a flag a user can read without a waiter (`halted`), for
/// as long as the round lasts (`round_over` ends the watch).
struct Halt {
    halted: Arc<AtomicBool>,
    round_over: CancellationToken,
}

impl Halt {
    fn watch(stop: &CancellationToken) -> Halt {
        let halted = Arc::new(AtomicBool::new(stop.is_cancelled()));
        let round_over = CancellationToken::new();
        let (h, stop, over) = (halted.clone(), stop.clone(), round_over.clone());
        tokio::spawn(async move {
            tokio::select! {
                _ = stop.cancelled() => h.store(true, Ordering::Relaxed),
                _ = over.cancelled() => {}
            }
        });
        Halt { halted, round_over }
    }
}

/// Start every closed user in its active window; how many there are.
fn spawn_closed(
    rc: &RoundCx<'_>,
    ready: Vec<Ready>,
    factory: &metrics::RecorderFactory,
    halted: &Arc<AtomicBool>,
    tasks: &mut tokio::task::JoinSet<VuOutput>,
) -> u64 {
    let (w, cfg, start) = (rc.w, rc.cfg, rc.start);
    let windows: Vec<Vec<(Duration, Option<Duration>)>> =
        w.classes.iter().map(active_windows).collect();
    let mut vus = 0u64;
    for (ci, vu, driver) in ready {
        let class = &w.classes[ci];
        vus += 1;
        let (from, until) = windows[ci]
            .get(vu as usize)
            .copied()
            .unwrap_or((Duration::MAX, None));
        let spec = VuSpec {
            class_index: ci,
            class: rc.classes[ci].clone(),
            vu,
            round: rc.round,
            seed: w.run.seed,
            start,
            deadline: rc.deadline,
            active_from: start.checked_add(from),
            active_until: until.map(|u| start + u),
            iterations: class.iterations.or(match w.run.stop {
                Stop::Iterations(n) => Some(n),
                Stop::Duration(_) => None,
            }),
            label_base: rc.labels.index(ci, 0),
            log_ops: cfg.log_ops,
            halted: halted.clone(),
            users: rc.users.clone(),
            timer: rc.timer.clone(),
        };
        let recorder = factory.recorder();
        let stop = cfg.stop.clone();
        tasks.spawn(vu_loop(spec, driver, recorder, stop));
    }
    vus
}

/// Open classes: sessions arrive on a schedule, each with fresh state.
fn spawn_open(
    rc: &RoundCx<'_>,
    drivers: &[Arc<ClassDriver>],
    factory: &metrics::RecorderFactory,
    tasks: &mut tokio::task::JoinSet<VuOutput>,
) {
    let (w, cfg, start) = (rc.w, rc.cfg, rc.start);
    let shared = Arc::new(w.clone());
    for (ci, class) in w.classes.iter().enumerate() {
        let Some(arrival) = class.arrival.clone() else {
            continue;
        };
        let spec = open::OpenSpec {
            class_index: ci,
            class: rc.classes[ci].clone(),
            arrival,
            round: rc.round,
            seed: w.run.seed,
            start,
            // An open class needs an end: the duration, or its iterations' worth of time.
            deadline: rc.deadline.unwrap_or(start + Duration::from_secs(3600)),
            // A session of a behaviour ends at its exit (or `max_ops`); of a table, after
            // its iterations.
            iterations: if class.chain.from_mix {
                class.iterations.unwrap_or(1)
            } else {
                u64::MAX
            },
            label_base: rc.labels.index(ci, 0),
            log_ops: cfg.log_ops,
            run_id: cfg.run_id.clone(),
            endpoint: cfg.endpoint.clone(),
            timeouts: rc.timeouts,
            users: rc.users.clone(),
            shard: cfg.shard,
            timer: rc.timer.clone(),
        };
        tasks.spawn(open::arrivals(
            spec,
            shared.clone(),
            drivers[ci].clone(),
            factory.clone(),
            cfg.stop.clone(),
        ));
    }
}

struct VuSpec {
    class_index: usize,
    class: Arc<UserClass>,
    vu: u32,
    round: u32,
    seed: u64,
    start: Instant,
    deadline: Option<Instant>,
    /// Under a ramp, when this VU starts and stops.
    active_from: Option<Instant>,
    active_until: Option<Instant>,
    iterations: Option<u64>,
    label_base: u32,
    log_ops: bool,
    /// Set once the run is stopped. Checked between operations instead of the token, whose
    /// `is_cancelled` takes a lock that every VU would share.
    halted: Arc<AtomicBool>,
    users: Arc<AtomicU64>,
    /// Waits for pacing slots.
    timer: timer::Timer,
}

/// Counts a user as active while it lives: the per-second "active users" figure.
pub(crate) struct Active(Arc<AtomicU64>);

impl Active {
    pub(crate) fn enter(users: &Arc<AtomicU64>) -> Active {
        users.fetch_add(1, Ordering::Relaxed);
        Active(users.clone())
    }
}

impl Drop for Active {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::Relaxed);
    }
}

/// What one operation needs to be recorded.
struct Timing {
    think: Duration,
    intended: Instant,
    started: Instant,
    ended: Instant,
    scheduled: bool,
}

/// Record an outcome: its sample, its steps' samples, the first failures' details and, with
/// `--log-ops`, its row. A skipped operation (nothing sent) has only its row.
#[allow(clippy::too_many_arguments)]
fn record(
    out: &mut VuOutput,
    recorder: &mut metrics::Recorder,
    spec_start: Instant,
    label_base: u32,
    (round, class_index, vu, seq, log_ops): (u32, usize, u32, u64, bool),
    op: Option<usize>,
    done: &Done,
    t: Timing,
) {
    let start_us = t.started.duration_since(spec_start).as_micros() as u64;
    let row = |label: usize, latency_us: u64, answer: Answer, skipped: bool| OpLogEntry {
        round,
        class: class_index,
        vu,
        seq,
        think_us: t.think.as_micros() as u64,
        op,
        label,
        start_us,
        latency_us,
        answer,
        error: match done {
            Done::Sent(o) => o.error,
            Done::Skipped => None,
        },
        skipped,
    };
    let outcome = match done {
        Done::Sent(o) => o,
        Done::Skipped => {
            if log_ops {
                out.log.push(row(op.unwrap_or(0), 0, Answer::NONE, true));
            }
            return;
        }
    };
    let label = outcome.label.or(op).unwrap_or(0);
    let sample = sample_of(outcome, label_base + label as u32, start_us, &t);
    recorder.record(sample, t.ended);
    record_steps(recorder, outcome, label_base, start_us, t.ended);
    if let (Some(e), true) = (outcome.error, out.failures.len() < FAILURE_NOTES_PER_VU) {
        out.failures.push(FailureNote {
            round,
            label: sample.label,
            error: e,
            detail: outcome.detail.clone().unwrap_or_default(),
        });
    }
    if log_ops {
        out.log
            .push(row(label, sample.latency_us, sample.answer, false));
    }
}

/// What a user still waits for when it ends (a producer's outstanding confirms) is
/// awaited and recorded, unless the run is stopped first. `at` is the round's start and
/// the class's first label.
async fn finish_user<C: Future>(
    driver: &mut VuDriver,
    recorder: &mut metrics::Recorder,
    (start, label_base): (Instant, u32),
    cancelled: &mut std::pin::Pin<&mut C>,
) {
    let left = tokio::select! {
        o = driver.finish() => o,
        _ = cancelled.as_mut() => None,
    };
    if let Some(o) = left {
        let at = Instant::now();
        let start_us = at.duration_since(start).as_micros() as u64;
        record_steps(recorder, &o, label_base, start_us, at);
    }
}

/// The steps of a sequence, each under its own label, one after the other from the
/// operation's start (left out of the totals, which count the operation once).
fn record_steps(
    recorder: &mut metrics::Recorder,
    outcome: &crate::protocol::Outcome,
    label_base: u32,
    start_us: u64,
    ended: Instant,
) {
    let mut step_start = start_us;
    for (step_label, o) in &outcome.steps {
        let s = step_sample(o, label_base + *step_label as u32, step_start);
        recorder.record(s, ended);
        step_start += s.latency_us;
    }
}

/// An operation's sample under `label`, from its start (`start_us` into the round).
fn sample_of(outcome: &crate::protocol::Outcome, label: u32, start_us: u64, t: &Timing) -> Sample {
    // The driver times the wire; an operation that failed before any answer arrived is
    // timed by the engine, so timeouts show their real cost in the timeline.
    let latency = if outcome.latency.is_zero() {
        t.ended.duration_since(t.started)
    } else {
        outcome.latency
    };
    Sample {
        label,
        start_us,
        latency_us: latency.as_micros() as u64,
        answer: outcome.answer,
        prior: prior_answers(&outcome.prior),
        error: outcome.error,
        bytes_sent: outcome.bytes_sent,
        bytes_received: outcome.bytes_received,
        corrected_us: t.ended.duration_since(t.intended).as_micros() as u64,
        lag_us: t.started.saturating_duration_since(t.intended).as_micros() as u64,
        scheduled: t.scheduled,
        connect_us: outcome.handshake.map(|h| micros32(h.connect)),
        tls_us: outcome.handshake.and_then(|h| h.tls).map(micros32),
        tls_resumed: outcome.handshake.is_some_and(|h| h.resumed),
        step: false,
    }
}

/// One step of a sequence as its own sample (no warm-up of its own, no scheduling lag).
fn step_sample(o: &crate::protocol::Outcome, label: u32, start_us: u64) -> Sample {
    let latency_us = o.latency.as_micros() as u64;
    Sample {
        label,
        start_us,
        latency_us,
        answer: o.answer,
        prior: prior_answers(&o.prior),
        error: o.error,
        bytes_sent: o.bytes_sent,
        bytes_received: o.bytes_received,
        corrected_us: latency_us,
        lag_us: 0,
        scheduled: false,
        connect_us: o.handshake.map(|h| micros32(h.connect)),
        tls_us: o.handshake.and_then(|h| h.tls).map(micros32),
        tls_resumed: o.handshake.is_some_and(|h| h.resumed),
        step: true,
    }
}

/// A VU's stop signal, made once and polled in place: a fresh `cancelled()` per operation
/// would register and unregister a waiter under the token's lock every time, a lock all
/// VUs share.
pub(crate) type Cancelled<'p, 't> =
    std::pin::Pin<&'p mut tokio_util::sync::WaitForCancellationFuture<'t>>;

/// One operation: the bootstrap when the user has no collection (`op` is `None`), else
/// the operation its behaviour picked. `None` when stopped meanwhile.
async fn one_op(
    driver: &mut VuDriver,
    rngs: &mut VuRngs,
    (seq, op): (u64, Option<usize>),
    cancelled: &mut Cancelled<'_, '_>,
) -> Option<(Option<usize>, Done)> {
    // The contract boxes each step's future: inline, the largest of every driver's
    // operations would be part of every user's task, also while it thinks.
    match op {
        None => tokio::select! {
            o = driver.bootstrap(&mut rngs.data) => Some((None, o)),
            _ = cancelled.as_mut() => None,
        },
        Some(op) => tokio::select! {
            o = driver.execute(op, seq, &mut rngs.data) => Some((Some(op), o)),
            _ = cancelled.as_mut() => None,
        },
    }
}

async fn vu_loop(
    spec: VuSpec,
    mut driver: VuDriver,
    mut recorder: metrics::Recorder,
    stop: CancellationToken,
) -> VuOutput {
    let class = &spec.class;
    let mut rngs = VuRngs::new(spec.seed, &class.name, spec.vu, spec.round);
    let mut out = VuOutput::default();
    let cancelled = stop.cancelled();
    tokio::pin!(cancelled);
    let Some(begin) = wait_for_turn(&spec, &mut cancelled).await else {
        return out;
    };
    let _active = Active::enter(&spec.users);
    let end_by = match (spec.deadline, spec.active_until) {
        (Some(d), Some(u)) => Some(d.min(u)),
        (d, u) => d.or(u),
    };
    // `done` counts every operation (what `iterations` and pacing count); `seq` counts the
    // picks from the table, which is what `loadmix plan` lists.
    let (mut done, mut seq) = (0u64, 0u64);
    let mut walk = session::Walk::new(class);
    loop {
        if spec.iterations.is_some_and(|n| done >= n) || spec.halted.load(Ordering::Relaxed) {
            break;
        }
        let boot = driver.needs_bootstrap();
        // One clock read serves the think's start and, when there is nothing to wait for,
        // the operation's start: clock reads are a visible share of a fast request's cost.
        let now = Instant::now();
        let pick = if boot {
            None
        } else {
            let allowed = |g: &crate::workload::chain::Guard| driver.guard_holds(g);
            match walk.next(class, &mut rngs, &allowed, now, false) {
                Some(p) => Some(p),
                None => break,
            }
        };
        let Some((intended, think)) = next_due(class, begin, done, now, &mut rngs, pick) else {
            break;
        };
        if end_by.is_some_and(|e| intended >= e) {
            break;
        }
        // A paced user that fell behind does not send after the round's end the slots that
        // fell due before it: they are dropped, and counted, as the open model does.
        if let (Some(p), Some(e)) = (class.pacing, end_by)
            && now >= e
        {
            out.dropped += missed_slots(intended, e, p);
            break;
        }
        let Some(started) =
            wait_until_due(&spec, intended, now, &mut recorder, &mut cancelled).await
        else {
            break;
        };
        if pick.is_some() {
            walk.started(started);
        }
        let Some((op, outcome)) = one_op(
            &mut driver,
            &mut rngs,
            (seq, pick.map(|(op, _)| op)),
            &mut cancelled,
        )
        .await
        else {
            break;
        };
        let timing = Timing {
            think,
            intended,
            started,
            ended: Instant::now(),
            scheduled: class.pacing.is_some(),
        };
        record(
            &mut out,
            &mut recorder,
            spec.start,
            spec.label_base,
            (spec.round, spec.class_index, spec.vu, seq, spec.log_ops),
            op,
            &outcome,
            timing,
        );
        done += 1;
        if !boot {
            seq += 1;
        }
        if let Done::Skipped = outcome {
            // Nothing was sent, so nothing awaited: let the other users of this thread run.
            tokio::task::yield_now().await;
        }
    }
    finish_user(
        &mut driver,
        &mut recorder,
        (spec.start, spec.label_base),
        &mut cancelled,
    )
    .await;
    recorder.flush();
    out.walks
        .extend(walk.finish().map(|w| (spec.class_index, w)));
    out.handoff = driver.hand_off();
    out
}

/// Under a ramp the VU waits for its turn: when it starts, or `None` when its turn never
/// comes in this round (or the run stops first).
async fn wait_for_turn(spec: &VuSpec, cancelled: &mut Cancelled<'_, '_>) -> Option<Instant> {
    let begin = spec.active_from?;
    if spec.deadline.is_some_and(|d| begin >= d) {
        return None;
    }
    if begin > Instant::now() {
        tokio::select! {
            _ = tokio::time::sleep_until(begin) => {}
            _ = cancelled.as_mut() => return None,
        }
    }
    Some(begin)
}

/// When the next operation is due, and the think before it. Pacing: operation k is due at
/// begin + k × pacing. Think: due when the think ends: the pick's (drawn with it from the
/// behaviour's transition), or a bootstrap's from its own stream, so bootstraps shift no
/// pick's think. Checked arithmetic: a schedule past what an Instant can hold simply ends
/// (`None`).
fn next_due(
    class: &UserClass,
    begin: Instant,
    done: u64,
    now: Instant,
    rngs: &mut VuRngs,
    pick: Option<(usize, Duration)>,
) -> Option<(Instant, Duration)> {
    match class.pacing {
        Some(p) => {
            let k = u32::try_from(done).ok()?;
            Some((begin.checked_add(p.checked_mul(k)?)?, Duration::ZERO))
        }
        None => {
            let t = match pick {
                Some((_, think)) => think,
                None => rngs.think_before_bootstrap(class),
            };
            Some((now.checked_add(t)?, t))
        }
    }
}

/// The pacing slots from `intended` (the first not sent) up to the round's `end`.
fn missed_slots(intended: Instant, end: Instant, pacing: Duration) -> u64 {
    let behind = end.saturating_duration_since(intended).as_nanos();
    match pacing.as_nanos() {
        0 => 1,
        p => behind.div_ceil(p).max(1) as u64,
    }
}

/// Wait until `intended` (from `now`), handing the user's samples over first when the
/// wait is long; when the operation starts, or `None` when the run stops meanwhile.
async fn wait_until_due(
    spec: &VuSpec,
    intended: Instant,
    now: Instant,
    recorder: &mut metrics::Recorder,
    cancelled: &mut Cancelled<'_, '_>,
) -> Option<Instant> {
    if intended <= now {
        return Some(now);
    }
    recorder.flush_before_wait(intended - now);
    // A pacing slot is a start time, kept to the microsecond; a think time is a pause, and
    // tokio's millisecond timer is fine for it.
    let wait = async {
        match spec.class.pacing {
            Some(_) => spec.timer.sleep_until(intended).await,
            None => tokio::time::sleep_until(intended).await,
        }
    };
    tokio::select! {
        _ = wait => Some(Instant::now()),
        _ = cancelled.as_mut() => None,
    }
}

/// Up to [`crate::metrics::PRIOR_ANSWERS`] earlier answers of an operation, none for none.
fn prior_answers(list: &[Answer]) -> [Answer; crate::metrics::PRIOR_ANSWERS] {
    let mut out = [Answer::NONE; crate::metrics::PRIOR_ANSWERS];
    for (o, s) in out.iter_mut().zip(list) {
        *o = *s;
    }
    out
}

/// Microseconds in 32 bits (over an hour saturates; connect and handshake times are
/// bounded by the connect timeout long before).
fn micros32(d: Duration) -> u32 {
    u32::try_from(d.as_micros()).unwrap_or(u32::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn class(yaml: &str) -> UserClass {
        crate::workload::load_str("w.yaml", yaml, &[], None)
            .unwrap()
            .classes
            .remove(0)
    }

    #[test]
    fn ramp_windows_start_and_stop_users_in_turn() {
        let c = class(
            "users:\n  - class: c\n    protocol: http\n    count: 0\n    ramp: [ { to: 4, over: 4s }, { hold: 2s }, { to: 2, over: 2s } ]\n    mix: { g: { weight: 1, path: /x } }\n",
        );
        let w = active_windows(&c);
        assert_eq!(w.len(), 4);
        let near = |d: Duration, secs: f64| (d.as_secs_f64() - secs).abs() < 0.02;
        for (i, (start, _)) in w.iter().enumerate() {
            assert!(near(*start, i as f64 + 1.0), "user {i} starts at {start:?}");
        }
        assert_eq!(
            (w[0].1, w[1].1),
            (None, None),
            "the users the ramp keeps run to the end"
        );
        assert!(w[3].1.is_some_and(|s| near(s, 6.0)), "{:?}", w[3]);
        assert!(w[2].1.is_some_and(|s| near(s, 7.0)), "{:?}", w[2]);
    }

    #[test]
    fn without_a_ramp_every_user_runs_throughout() {
        let c = class(
            "users:\n  - class: c\n    protocol: http\n    count: 3\n    mix: { g: { weight: 1, path: /x } }\n",
        );
        assert_eq!(active_windows(&c), vec![(Duration::ZERO, None); 3]);
    }

    #[test]
    fn the_scheduled_rate_counts_paced_users_and_peak_arrivals() {
        let w = crate::workload::load_str(
            "w.yaml",
            "users:\n  - class: p\n    protocol: http\n    count: 64\n    pacing: 3200us\n    mix: { g: { weight: 1, path: /x } }\n  - class: o\n    protocol: http\n    arrival: { rate: 100/s }\n    ramp: [ { to: 800/s, over: 1s } ]\n    mix: { g: { weight: 1, path: /x } }\n  - class: t\n    protocol: http\n    count: 5\n    mix: { g: { weight: 1, path: /x } }\n",
            &[],
            None,
        )
        .unwrap();
        assert_eq!(scheduled_rate(&w.classes), 20_800.0);
    }

    #[test]
    fn a_paced_user_behind_at_the_end_counts_the_slots_it_did_not_send() {
        let t0 = Instant::now();
        let ms = Duration::from_millis;
        // Slot 10 ms in was the next; the round ended at 100 ms: slots 10, 30, ..., 90.
        assert_eq!(missed_slots(t0 + ms(10), t0 + ms(100), ms(20)), 5);
        assert_eq!(missed_slots(t0 + ms(100), t0 + ms(100), ms(20)), 1);
    }

    #[test]
    fn paced_users_take_evenly_spaced_phases_of_the_interval() {
        let c = class(
            "users:\n  - class: c\n    protocol: http\n    count: 4\n    pacing: 20ms\n    mix: { g: { weight: 1, path: /x } }\n",
        );
        let starts: Vec<u64> = active_windows(&c)
            .iter()
            .map(|(s, _)| s.as_micros() as u64)
            .collect();
        assert_eq!(starts, vec![0, 5_000, 10_000, 15_000]);
    }
}
