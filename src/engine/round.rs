//! One round, step by step: the users set up before the clock; the clock started (a
//! common start under `--start-at`, the aggregator and the samplers); the closed users
//! in their active windows and the open arrivals run to the round's end; the clock
//! stopped with them; then the protocols' teardown, whose products the protocols settle
//! over the round's window. Warm-up rounds are numbered after the
//! measured ones and run the same way.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, SystemTime};

use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::meter::ClassMeters;
use super::record::{Ready, VuOutput, Who, joined};
use super::user::{self, Active, Entry, UserSpec};
use super::{
    EngineConfig, FailureNote, MAX_FAILURE_NOTES, OpLogEntry, RoundResult, host, open, timer,
};
use crate::metrics::live::{Phase, Untimed};
use crate::metrics::{self, LabelTable, RoundStats};
use crate::protocol::cleanup::Until;
use crate::protocol::teardown::{RoundWindow, Teardown, TornDown};
use crate::protocol::{ClassDriver, VuDriver, VuIds};
use crate::transport::{ErrorClass, Timeouts, add_tally};
use crate::workload::{Stop, UserClass, Workload};

/// What a round is: its number, the workload's classes and the drivers that run them.
pub(super) struct Round<'a> {
    pub(super) w: &'a Workload,
    pub(super) cfg: &'a EngineConfig,
    pub(super) drivers: &'a [Arc<ClassDriver>],
    pub(super) labels: &'a LabelTable,
    /// From 1; warm-up rounds after the measured ones.
    pub(super) index: u32,
}

impl Round<'_> {
    /// The request and connect timeouts every user of the round has.
    fn timeouts(&self) -> Timeouts {
        Timeouts {
            connect: self.w.run.connect_timeout,
            request: self.w.run.timeout,
        }
    }

    /// Run it: set-up, clock, users, clock stopped, teardown; its result, its `--log-ops`
    /// rows, its first failures, and the users that go on into the next round. `kept`
    /// are the users the last round kept (`run.keep_state`): they are not set up again.
    pub(super) async fn run(&self, kept: Vec<Ready>) -> RoundDone {
        let (ready, mut out, set_up) = self.set_up_users(kept).await;
        let clock = Clock::start(self).await;
        let vus = self.run_users(&clock, ready, &mut out).await;
        let timed = clock.stop().await;
        // The teardown takes what the users left; their connection counts stay.
        let handoff = std::mem::take(&mut out.handoff);
        out.handoff.wire = handoff.wire;
        let kept = std::mem::take(&mut out.kept);
        let torn = self.tear_down(handoff).await;
        let (result, log, failures) = self.result(timed, torn, out, vus, set_up);
        RoundDone {
            result,
            log,
            failures,
            kept,
        }
    }

    /// Set-up (accounts, discovery, each user's first calendar or collection) of closed
    /// users runs before the clock starts, as the 2007 runner created its users before
    /// starting their threads. A user whose set-up
    /// failed still runs (its failures are the server's answer); the failure is noted.
    /// A user kept from the last round is ready as it is.
    async fn set_up_users(&self, kept: Vec<Ready>) -> (Vec<Ready>, VuOutput, SetUp) {
        let began = std::time::Instant::now();
        let (w, cfg, round) = (self.w, self.cfg, self.index);
        if let Some(l) = &cfg.live {
            l.set_round(round, Phase::Setup);
        }
        let mut ready = Vec::with_capacity(kept.len());
        for (ci, vu, mut driver) in kept {
            driver.begin_round(round);
            ready.push((ci, vu, driver));
        }
        let held: std::collections::HashSet<(usize, u32)> =
            ready.iter().map(|(ci, vu, _)| (*ci, *vu)).collect();
        let mut setups = tokio::task::JoinSet::new();
        for (ci, class) in w.classes.iter().enumerate() {
            // Sharded, this process runs its own users, each with the index (and so the
            // seed and account) it has in one process.
            for vu in (0..Workload::standing_users(class))
                .filter(|vu| cfg.shard.owns_user(*vu) && !held.contains(&(ci, *vu)))
            {
                let ids = VuIds {
                    vu,
                    round,
                    run_id: cfg.run_id.clone(),
                };
                let mut driver =
                    self.drivers[ci].new_vu(w, class, ids, &cfg.endpoint, self.timeouts());
                let seeds = (w.run.seed, class.name.clone());
                setups.spawn(async move {
                    let res = user::set_up(&mut driver, seeds.0, &seeds.1, vu, round).await;
                    let tally = driver.take_untimed();
                    (ci, vu, driver, res, tally)
                });
            }
        }
        if let Some(l) = &cfg.live {
            l.setup_begins(setups.len() as u64);
        }
        let mut out = VuOutput::default();
        let mut set_up = SetUp::default();
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
            let res = match res {
                Err(e) if e.is_panic() => {
                    out.panicked += 1;
                    continue;
                }
                r => r,
            };
            if let Ok((ci, vu, driver, res, tally)) = res {
                add_tally(&mut out.setup, tally);
                if let Err(detail) = res {
                    let detail = format!("set-up of {}#{vu}: {detail}", w.classes[ci].name);
                    set_up.failed((ci, vu), &detail);
                    out.failures.push(FailureNote {
                        round,
                        label: self.labels.index(ci, 0),
                        error: ErrorClass::Status,
                        detail,
                    });
                }
                ready.push((ci, vu, driver));
            }
        }
        ready.sort_by_key(|(ci, vu, _)| (*ci, *vu));
        if let Some(l) = &cfg.live {
            l.add_untimed(Untimed::Setup, out.setup.values().sum());
        }
        set_up.took = began.elapsed();
        (ready, out, set_up)
    }

    /// The closed users and the open arrivals, from the clock's start to the last one's
    /// end; how many closed users there were.
    async fn run_users(&self, clock: &Clock, ready: Vec<Ready>, out: &mut VuOutput) -> u64 {
        let cx = RoundCx {
            round: self,
            start: clock.start,
            deadline: match self.w.run.stop {
                Stop::Duration(d) => Some(clock.start + d),
                Stop::Iterations(_) => None,
            },
            classes: self.w.classes.iter().map(|c| Arc::new(c.clone())).collect(),
            users: clock.users.clone(),
            // The round's timer for scheduled starts; its task ends with the last user.
            timer: timer::Timer::start(scheduled_rate(&self.w.classes)),
            halted: clock.halt.halted.clone(),
            meters: clock.meters.clone(),
        };
        let mut tasks = tokio::task::JoinSet::new();
        // An open class's standing users are its returning users, lent to its sessions.
        let (closed, returning): (Vec<Ready>, Vec<Ready>) = ready
            .into_iter()
            .partition(|(ci, _, _)| self.w.classes[*ci].arrival.is_none());
        let vus = spawn_closed(&cx, closed, &clock.factory, &mut tasks);
        spawn_open(&cx, returning, &clock.factory, &mut tasks);
        while let Some(res) = tasks.join_next().await {
            // A panic (a bug) loses one user's output, not the round's; it is counted.
            joined(out, res, VuOutput::absorb);
        }
        vus
    }

    /// After the clock: what the round made goes, unless the run keeps it. A signal
    /// during the round has stopped it, and the teardown still runs: the next one cuts
    /// it short. A signal during the teardown does at once.
    pub(super) async fn tear_down(&self, handoff: crate::protocol::Handoff) -> TornDown {
        let cfg = self.cfg;
        if let Some(l) = &cfg.live {
            l.set_phase(Phase::Cleanup);
            // As the round's figures count it: its duration, unless a signal cut it short.
            l.clock_stops(match self.w.run.stop {
                crate::workload::Stop::Duration(d) if !cfg.stop.is_cancelled() => Some(d),
                _ => None,
            });
        }
        let until = Until::new(
            cfg.cleanup_timeout,
            match cfg.stop.is_cancelled() {
                true => cfg.hurry.clone(),
                false => cfg.stop.clone(),
            },
        );
        let torn = Teardown {
            endpoint: cfg.endpoint.clone(),
            timeouts: self.timeouts(),
            keep_data: cfg.keep_data,
            shards: cfg.shard.count,
            until: &until,
        }
        .run(handoff)
        .await;
        if let Some(l) = &cfg.live {
            l.add_untimed(Untimed::Cleanup, torn.requests());
        }
        torn
    }

    /// The round's figures, with its rows and failures in a stable order.
    fn result(
        &self,
        timed: Timed,
        torn: TornDown,
        mut out: VuOutput,
        vus: u64,
        set_up: SetUp,
    ) -> (RoundResult, Vec<OpLogEntry>, Vec<FailureNote>) {
        // Stable: a user's rows keep their order (a bootstrap before the pick it precedes).
        out.log.sort_by_key(|e| (e.class, e.vu));
        out.failures.sort_by_key(|f| f.label);
        out.failures.truncate(MAX_FAILURE_NOTES);
        let run = &self.w.run;
        let wire = out.handoff.wire;
        let mut stats = timed.stats;
        for (&label, &n) in &out.doubted {
            if let Some(o) = stats.ops.get_mut(label as usize) {
                o.in_doubt += n;
            }
        }
        // Each fault window as it happened (one that never began, an empty span at its
        // scheduled begin), for the teams' writes made while it was on.
        let fault_spans: Vec<(Duration, Duration)> = timed
            .faults
            .iter()
            .map(|f| {
                let from = f.began.unwrap_or(f.at);
                (from, f.ended.unwrap_or(from).max(from))
            })
            .collect();
        let round = RoundResult {
            index: self.index,
            started_at: timed.started_at,
            slot_late: timed.slot_late,
            elapsed: timed.elapsed,
            // A round's clock is its duration: what was in flight at its end is counted,
            // over the duration, and the overrun is reported. A round whose users all
            // stopped before the bell (each one's next operation fell due after it) still
            // ran its whole duration; only a stopped run measures less.
            measured: match run.stop {
                Stop::Duration(d) if !self.cfg.stop.is_cancelled() => d,
                Stop::Duration(d) => timed.elapsed.min(d),
                Stop::Iterations(_) => timed.elapsed,
            }
            .saturating_sub(run.warmup),
            stats,
            vus: vus + out.sessions,
            connections_opened: wire.opened,
            requests_retried: wire.retried,
            unsolicited_answers: wire.unsolicited,
            setup: std::mem::take(&mut out.setup),
            setup_failures: set_up.failures,
            setup_failure: set_up.first.map(|(_, d)| d),
            setup_took: set_up.took,
            interrupted: self.cfg.stop.is_cancelled(),
            host: timed.host,
            server: timed.server,
            metrics: timed.metrics,
            faults: timed.faults,
            dropped: out.dropped,
            late: out.late,
            behind: out.behind,
            stuck: out.stuck,
            panicked: out.panicked,
            products: torn.settle(
                self.w,
                RoundWindow {
                    index: self.index,
                    started_at: timed.started_at,
                    elapsed: timed.elapsed,
                    faults: fault_spans,
                },
            ),
            sessions: std::mem::take(&mut out.walks),
        };
        (round, out.log, out.failures)
    }
}

/// How a round's set-up went: how long it held the clock back, and the users whose
/// set-up failed: how many, and the first by class and index (the same whatever order
/// the set-ups finished in).
#[derive(Default)]
struct SetUp {
    took: Duration,
    failures: u64,
    first: Option<((usize, u32), String)>,
}

impl SetUp {
    /// User `who`'s set-up failed, as `detail` says.
    fn failed(&mut self, who: (usize, u32), detail: &str) {
        self.failures += 1;
        if self.first.as_ref().is_none_or(|(w, _)| who < *w) {
            self.first = Some((who, detail.to_string()));
        }
    }
}

/// What a round came to: its result, its `--log-ops` rows, its first failures, and the
/// users that go on into the next round (`run.keep_state`).
pub(super) struct RoundDone {
    pub(super) result: RoundResult,
    pub(super) log: Vec<OpLogEntry>,
    pub(super) failures: Vec<FailureNote>,
    pub(super) kept: Vec<Ready>,
}

/// The round's clock while it runs: its start, the aggregator its users record into,
/// the samplers on its seconds, and the stop seen as a flag.
struct Clock {
    start: Instant,
    started_at: SystemTime,
    slot_late: Option<Duration>,
    factory: metrics::RecorderFactory,
    aggregator: tokio::task::JoinHandle<RoundStats>,
    samplers: Samplers,
    halt: Halt,
    /// Closed users inside their active window and open sessions in progress.
    users: Arc<AtomicU64>,
    /// The time each class's users' tasks ran, for sharing out the generator's CPU.
    meters: ClassMeters,
    /// The fault timeline carried out on this clock.
    faults: Option<tokio::task::JoinHandle<Vec<crate::fault::Window>>>,
}

/// What the clock measured, once stopped.
struct Timed {
    started_at: SystemTime,
    slot_late: Option<Duration>,
    elapsed: Duration,
    stats: RoundStats,
    host: host::HostSamples,
    server: Vec<crate::monitor::ProcessRound>,
    metrics: Vec<crate::monitor::prometheus::SeriesRound>,
    faults: Vec<crate::fault::Window>,
}

impl Clock {
    /// A common start: wait for this round's slot, set-up done, then start the clock and
    /// the samplers, whose seconds are the round's.
    async fn start(round: &Round<'_>) -> Clock {
        let (w, cfg) = (round.w, round.cfg);
        let warmup_round = round.index > w.run.rounds;
        let live = cfg.live.clone().map(|l| (l, warmup_round));
        let injector = cfg.faults.clone().filter(|_| !warmup_round);
        let scheduled = injector
            .as_ref()
            .map(|f| f.scheduled(round.index))
            .unwrap_or_default();
        // When each window ended, as the timeline tells it, for the aggregator's parts.
        let ends = Arc::new(metrics::windows::Ends::new(scheduled.len()));
        let (factory, aggregator) = metrics::aggregator(
            round.labels.iter().map(|(ci, _, _)| ci).collect(),
            w.run.warmup,
            w.run.timeout,
            live,
            &scheduled,
            ends.clone(),
        );
        let slot_late = wait_for_slot(cfg).await;
        // The live figures' own counter when there are live figures.
        let users = cfg
            .live
            .as_ref()
            .map_or_else(|| Arc::new(AtomicU64::new(0)), |l| l.users.clone());
        if let Some(l) = &cfg.live {
            l.set_phase(match warmup_round {
                true => Phase::Warmup,
                false => Phase::Measured,
            });
            l.round_begins();
            if !warmup_round {
                l.clock_starts(w.run.warmup);
            }
        }
        let halt = Halt::watch(&cfg.stop);
        let start = Instant::now();
        // The timeline ends with the round, or sooner on a stop: a fault never outlives
        // the clock it was put on.
        let faults = injector.map(|f| {
            let over = halt.round_over.child_token();
            let stop = cfg.stop.clone();
            let o = over.clone();
            tokio::spawn(async move {
                tokio::select! {
                    _ = stop.cancelled() => o.cancel(),
                    _ = o.cancelled() => {}
                }
            });
            // The aggregator splits each window's parts where it ended; the dashboard
            // shades the seconds it was on.
            let live = cfg.live.clone();
            let edge = move |e: crate::fault::Edge<'_>| match e {
                crate::fault::Edge::Began { text } => {
                    if let Some(l) = &live {
                        l.fault_on(Some(text));
                    }
                }
                crate::fault::Edge::Ended { k, at } => {
                    ends.set(k, at.as_micros() as u64);
                    if let Some(l) = &live {
                        l.fault_on(None);
                    }
                }
            };
            tokio::spawn(f.round(round.index, start, over, edge))
        });
        Clock {
            samplers: Samplers::start(cfg, users.clone()),
            started_at: SystemTime::now(),
            start,
            halt,
            faults,
            slot_late,
            factory,
            aggregator,
            users,
            meters: ClassMeters::new(w.classes.len()),
        }
    }

    /// Stop the clock with the last user: the host's and the server's figures are those
    /// of the measured work, not of the teardown that follows.
    async fn stop(self) -> Timed {
        let elapsed = self.start.elapsed();
        drop(self.factory);
        self.halt.round_over.cancel();
        let faults = match self.faults {
            Some(f) => f.await.unwrap_or_default(),
            None => Vec::new(),
        };
        let (mut host, server, metrics) = self.samplers.finish().await;
        host.class_busy_s = self
            .meters
            .busy()
            .iter()
            .map(Duration::as_secs_f64)
            .collect();
        let stats = self
            .aggregator
            .await
            .unwrap_or_else(|_| RoundStats::empty());
        Timed {
            started_at: self.started_at,
            slot_late: self.slot_late,
            elapsed,
            stats,
            host,
            server,
            metrics,
            faults,
        }
    }
}

/// What every user of a round shares once its clock has started.
struct RoundCx<'a> {
    round: &'a Round<'a>,
    start: Instant,
    /// The end of a duration-bound round.
    deadline: Option<Instant>,
    classes: Vec<Arc<UserClass>>,
    users: Arc<AtomicU64>,
    timer: timer::Timer,
    halted: Arc<AtomicBool>,
    meters: ClassMeters,
}

impl RoundCx<'_> {
    /// Who a user of class `ci` is, for its samples and rows.
    fn who(&self, ci: usize, vu: u32) -> Who {
        Who {
            start: self.start,
            round: self.round.index,
            class_index: ci,
            vu,
            label_base: self.round.labels.index(ci, 0),
            log_ops: self.round.cfg.log_ops,
            warmup_us: u64::try_from(self.round.w.run.warmup.as_micros()).unwrap_or(u64::MAX),
        }
    }
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
            server: (!cfg.monitors.is_empty()).then(|| {
                crate::monitor::sampler(cfg.monitors.clone(), done.clone(), cfg.watched.clone())
            }),
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
    cx: &RoundCx<'_>,
    ready: Vec<Ready>,
    factory: &metrics::RecorderFactory,
    tasks: &mut tokio::task::JoinSet<VuOutput>,
) -> u64 {
    let w = cx.round.w;
    let windows: Vec<Vec<(Duration, Option<Duration>)>> =
        w.classes.iter().map(active_windows).collect();
    let mut vus = 0u64;
    for (ci, vu, driver) in ready {
        vus += 1;
        let (from, until) = windows[ci]
            .get(vu as usize)
            .copied()
            .unwrap_or((Duration::MAX, None));
        let end_by = match (cx.deadline, until.map(|u| cx.start + u)) {
            (Some(d), Some(u)) => Some(d.min(u)),
            (d, u) => d.or(u),
        };
        let spec = UserSpec {
            who: cx.who(ci, vu),
            class: cx.classes[ci].clone(),
            seed: w.run.seed,
            entry: Entry::Closed {
                begin: cx.start.checked_add(from).unwrap_or(cx.start),
            },
            end_by,
            iterations: w.classes[ci].iterations.or(match w.run.stop {
                Stop::Iterations(n) => Some(n),
                Stop::Duration(_) => None,
            }),
            halted: cx.halted.clone(),
            timer: cx.timer.clone(),
            keep: w.run.keep_state && driver.keeps_state(),
            returns: false,
        };
        let turn = cx.start.checked_add(from);
        let recorder = factory.recorder();
        let (stop, users, deadline) = (cx.round.cfg.stop.clone(), cx.users.clone(), cx.deadline);
        tasks.spawn(cx.meters.meter(
            ci,
            closed_user(spec, turn, deadline, driver, recorder, stop, users),
        ));
    }
    vus
}

/// A closed user: it waits for its turn (a ramp's moment, a paced user's phase; `None`
/// when it never comes), then runs as every user does.
async fn closed_user(
    spec: UserSpec,
    turn: Option<Instant>,
    deadline: Option<Instant>,
    mut driver: VuDriver,
    mut recorder: metrics::Recorder,
    stop: CancellationToken,
    users: Arc<AtomicU64>,
) -> VuOutput {
    let mut out = VuOutput::default();
    let cancelled = stop.cancelled();
    tokio::pin!(cancelled);
    if its_turn_comes(turn, deadline, &mut cancelled).await {
        let _active = Active::enter(&users);
        super::user::run(&spec, &mut driver, &mut recorder, &mut out, &mut cancelled).await;
    } else if !spec.keep {
        // It never ran, but its set-up made what the teardown removes.
        out.handoff.absorb(driver.hand_off());
    }
    if spec.keep {
        out.kept.push((spec.who.class_index, spec.who.vu, driver));
    }
    out
}

/// Wait for a closed user's turn: false when it never comes (after the round's end, or
/// the run stopped first).
async fn its_turn_comes(
    turn: Option<Instant>,
    deadline: Option<Instant>,
    cancelled: &mut super::user::Cancelled<'_, '_>,
) -> bool {
    let Some(begin) = turn.filter(|b| deadline.is_none_or(|d| *b < d)) else {
        return false;
    };
    if begin > Instant::now() {
        tokio::select! {
            _ = tokio::time::sleep_until(begin) => {}
            _ = cancelled.as_mut() => return false,
        }
    }
    true
}

/// Open classes: sessions arrive on a schedule, each with fresh state.
fn spawn_open(
    cx: &RoundCx<'_>,
    mut returning: Vec<Ready>,
    factory: &metrics::RecorderFactory,
    tasks: &mut tokio::task::JoinSet<VuOutput>,
) {
    let (w, cfg, start) = (cx.round.w, cx.round.cfg, cx.start);
    let shared = Arc::new(w.clone());
    for (ci, class) in w.classes.iter().enumerate() {
        let Some(arrival) = class.arrival.clone() else {
            continue;
        };
        let (mine, rest): (Vec<Ready>, Vec<Ready>) =
            returning.into_iter().partition(|(c, _, _)| *c == ci);
        returning = rest;
        let spec = open::OpenSpec {
            returning: (arrival.returning.is_some()).then(|| {
                open::Returning::new(mine.into_iter().map(|(_, vu, d)| (vu, d)), w.run.keep_state)
            }),
            who: cx.who(ci, 0),
            class: cx.classes[ci].clone(),
            arrival,
            seed: w.run.seed,
            // An open class needs an end: the duration, or its iterations' worth of time.
            deadline: cx.deadline.unwrap_or(start + Duration::from_secs(3600)),
            // A session of a behaviour ends at its exit (or `max_ops`); of a table, after
            // its iterations.
            iterations: super::plan::session_ops(class).unwrap_or(u64::MAX),
            run_id: cfg.run_id.clone(),
            endpoint: cfg.endpoint.clone(),
            timeouts: cx.round.timeouts(),
            users: cx.users.clone(),
            shard: cfg.shard,
            timer: cx.timer.clone(),
            halted: cx.halted.clone(),
            meters: cx.meters.clone(),
        };
        tasks.spawn(cx.meters.meter(
            ci,
            open::arrivals(
                spec,
                shared.clone(),
                cx.round.drivers[ci].clone(),
                factory.clone(),
                cfg.stop.clone(),
            ),
        ));
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
