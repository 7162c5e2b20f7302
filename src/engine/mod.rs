//! The engine: turns a resolved workload into virtual users on tokio and runs them.
//!
//! Closed model: each class starts `count` VUs; a VU thinks, picks an operation from its
//! class's table, runs it through its protocol driver and records the outcome, until the
//! round's duration is over (operations in flight finish, bounded by the request timeout)
//! or it has done its iterations. Rounds run one after another, each with fresh VU state.
//! A stop request (Ctrl-C) ends the current round at once: in-flight operations are
//! abandoned, everything already measured is kept, and the run is marked interrupted.
//!
//! The engine knows nothing of any protocol: it calls [`VuDriver::execute`], and holds
//! what a round leaves behind (the protocols' `RoundProducts`: cleanup, ledger, teams'
//! visibility) unopened, adding the measured rounds' up into the run's.

pub(crate) mod host;
mod meter;
pub(crate) mod open;
pub mod plan;
mod record;
mod round;
pub(crate) mod seed;
pub(crate) mod session;
pub(crate) mod shard;
pub(crate) mod timer;
mod user;

pub(crate) use record::BEHIND_LIMIT;
pub(crate) use user::MAX_SKIPS_IN_A_ROW;

use std::sync::Arc;
use std::time::{Duration, SystemTime};

use tokio_util::sync::CancellationToken;

use crate::answer::Answer;
use crate::metrics::live::{Phase, Untimed};
use crate::metrics::{self, LabelTable, RoundStats};
use crate::protocol::{AccountPlan, ClassDriver, ProtocolError, RoundProducts, RunProducts};
use crate::transport::{Endpoint, ErrorClass, Tally, Timeouts};
use crate::workload::Workload;
use seed::class_seed;

/// How to run, beyond what the workload says.
#[derive(Clone)]
pub(crate) struct EngineConfig {
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
    /// Where their last second goes for the live pages.
    pub watched: crate::monitor::Latest,
    /// The server's metrics endpoints to scrape during every round.
    pub metrics: Vec<crate::monitor::prometheus::MetricsSpec>,
    /// This process's share of the run (`--shard I/N`); the whole run by default.
    pub shard: shard::Shard,
    /// A common start (`--start-at`): each round's clock waits for its slot. Shared by
    /// every target's runner, so the slots follow the order the rounds run in.
    pub clock: Option<Arc<shard::RoundClock>>,
    /// The target's fault timeline, when the run has one for it.
    pub faults: Option<Arc<crate::fault::Injector>>,
}

/// Called with a finished round and the number of rounds planned.
pub(crate) type RoundCallback = Arc<dyn Fn(&RoundResult, u32) + Send + Sync>;

#[derive(Debug, thiserror::Error)]
pub(crate) enum EngineError {
    #[error(transparent)]
    Protocol(#[from] ProtocolError),
}

/// One executed operation, when `--log-ops` is on.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct OpLogEntry {
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
pub(crate) struct FailureNote {
    pub round: u32,
    pub label: u32,
    pub error: ErrorClass,
    pub detail: String,
}

/// Everything one round produced.
#[derive(Debug, Clone)]
pub(crate) struct RoundResult {
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
    /// The first of them, by class and index: who, and what came back.
    pub setup_failure: Option<String>,
    /// How long the closed users' set-up took before the clock started (filling large
    /// calendars and address books can take minutes).
    pub setup_took: std::time::Duration,
    pub interrupted: bool,
    /// This process's CPU use, and the machine around it, per second: how busy, how much
    /// stolen, the run queue.
    pub host: host::HostSamples,
    /// The server's watched processes over the round.
    pub server: Vec<crate::monitor::ProcessRound>,
    /// The server's scraped metrics over the round.
    pub metrics: Vec<crate::monitor::prometheus::SeriesRound>,
    /// The fault windows as they happened (their figures are in `stats.windows`).
    pub faults: Vec<crate::fault::Window>,
    /// Open model: arrivals dropped, or started late, because every slot was busy. Paced
    /// users: the slots that fell due before the round's end and were not sent by then.
    pub dropped: u64,
    pub late: u64,
    /// Open model: arrivals the generator started over [`record::BEHIND_LIMIT`] late
    /// though no busy slot held them (its own lateness, not the server's).
    pub behind: u64,
    /// Users stopped for the round because their picks found nothing to act on
    /// ([`user::MAX_SKIPS_IN_A_ROW`] in a row).
    pub stuck: u64,
    /// User tasks that ended in a panic (a bug of loadmix's): what they held is missing.
    pub panicked: u64,
    /// What the protocols' teardown and books left: the engine holds them unopened.
    pub products: RoundProducts,
    /// Classes with behaviours: their users' sessions, by class index.
    pub sessions: Vec<(usize, session::ClassSessions)>,
}

/// Everything a run produced.
#[derive(Debug, Clone)]
pub(crate) struct RunResult {
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
    /// The measured rounds' products added up.
    pub products: RunProducts,
    /// The preflight probes' requests, by method and status (before any round).
    pub preflight: Tally,
}

/// A warm-up round's headline figures (the round itself is not in the report).
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct WarmupRound {
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
pub(crate) fn label_table(w: &Workload) -> LabelTable {
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
pub(crate) async fn prepare(
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
    // Where the teams of every CalDAV class meet in their set-up.
    let board = Arc::new(crate::protocol::teams::Board::default());
    let stamping = crate::protocol::Stamping {
        clock: stamp_clock(cfg),
        phases: cfg.faults.as_ref().map(|f| f.phases()),
    };
    for class in &w.classes {
        let d = ClassDriver::new(
            w,
            class,
            class_seed(w.run.seed, &class.name),
            accounts.clone(),
            &cfg.run_id,
            &stamping,
            &board,
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
/// targets can be interleaved round by round (A B B A ... by default): drift on a shared
/// machine then hits every target alike.
pub(crate) struct Runner {
    cfg: EngineConfig,
    drivers: Vec<Arc<ClassDriver>>,
    labels: LabelTable,
    started_at: SystemTime,
    rounds: Vec<RoundResult>,
    warmups: Vec<WarmupRound>,
    op_log: Vec<OpLogEntry>,
    failures: Vec<FailureNote>,
    products: RunProducts,
    /// The preflight probes' requests, by method and status.
    preflight: Tally,
    /// Users going on into the next round (`run.keep_state`).
    kept: Vec<record::Ready>,
}

impl Runner {
    /// Build the drivers and run the preflight probes.
    pub(crate) async fn new(w: &Workload, cfg: EngineConfig) -> Result<Runner, EngineError> {
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
            products: RunProducts::default(),
            kept: Vec::new(),
        })
    }

    /// Run warm-up round `k` (from 1): a whole round, thrown away but for its headline
    /// figures. It is numbered after the measured rounds, so the measured rounds' users
    /// draw the same random streams with or without warm-up rounds.
    pub(crate) async fn warmup_round(&mut self, w: &Workload, k: u32) {
        let index = w.run.rounds.saturating_add(k);
        let kept = std::mem::take(&mut self.kept);
        let done = self.round_of(w, index).run(kept).await;
        self.kept = done.kept;
        let round = done.result;
        let total = round
            .stats
            .ops
            .iter()
            .fold((0u64, 0u64), |a, s| (a.0 + s.successes, a.1 + s.failures));
        let secs = round.measured.as_secs_f64();
        let other = round.stats.warmup_requests
            + round.setup.values().sum::<u64>()
            + round.products.untimed_requests();
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
    pub(crate) async fn round(&mut self, w: &Workload, r: u32) {
        let kept = std::mem::take(&mut self.kept);
        let round::RoundDone {
            result: mut round,
            log,
            failures: fails,
            kept,
        } = self.round_of(w, r).run(kept).await;
        self.kept = kept;
        self.op_log.extend(log);
        self.products.add(&mut round.products);
        let room = MAX_FAILURE_NOTES.saturating_sub(self.failures.len());
        self.failures.extend(fails.into_iter().take(room));
        if let Some(f) = &self.cfg.on_round {
            f(&round, w.run.rounds);
        }
        self.rounds.push(round);
    }

    /// After the last round, or a stop: what the users kept from round to round made is
    /// removed once, its requests counted in the last measured round's cleanup (or the
    /// last warm-up round's, when none was measured).
    pub(crate) async fn close(&mut self, w: &Workload) {
        let kept = std::mem::take(&mut self.kept);
        if kept.is_empty() {
            return;
        }
        let mut handoff = crate::protocol::Handoff::default();
        for (_, _, mut driver) in kept {
            handoff.absorb(driver.hand_off());
        }
        let last = u32::try_from(self.rounds.len()).unwrap_or(u32::MAX);
        let torn = self.round_of(w, last).tear_down(handoff).await;
        // Stopped before any measured round: the last warm-up round's untimed requests
        // hold them, so that the report still adds up to what the server answered.
        match (self.rounds.last_mut(), self.warmups.last_mut()) {
            (Some(r), _) => torn.add_cleanup_to(&mut r.products),
            (None, Some(wr)) => wr.other_requests += torn.requests(),
            (None, None) => {}
        }
    }

    /// Round `index` of this runner's workload.
    fn round_of<'a>(&'a self, w: &'a Workload, index: u32) -> round::Round<'a> {
        round::Round {
            w,
            cfg: &self.cfg,
            drivers: &self.drivers,
            labels: &self.labels,
            index,
        }
    }

    /// The last measured round alone, as a run of one round: a capacity search judges
    /// each step by it while the runner goes on. `None` before any measured round.
    pub(crate) fn last_round(&self) -> Option<RunResult> {
        let last = self.rounds.last()?;
        Some(RunResult {
            run_id: self.cfg.run_id.clone(),
            started_at: last.started_at,
            finished_at: SystemTime::now(),
            labels: self.labels.clone(),
            rounds: vec![last.clone()],
            warmups: Vec::new(),
            interrupted: last.interrupted,
            op_log: Vec::new(),
            failures: Vec::new(),
            products: RunProducts::default(),
            preflight: Tally::new(),
        })
    }

    /// The target's clock against ours so far, from its answers' `Date`.
    pub(crate) fn target_clock(&self) -> Option<crate::transport::clock::ClockOffset> {
        self.cfg.endpoint.clock.estimate()
    }

    pub(crate) fn finish(self, w: &Workload) -> RunResult {
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
            products: self.products,
            preflight: self.preflight,
        }
    }
}

/// The most failure details a run keeps.
pub(crate) const MAX_FAILURE_NOTES: usize = 20;
