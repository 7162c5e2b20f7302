//! The open model: sessions of a class arrive on a schedule (Poisson or evenly spaced, at a
//! rate that may ramp), each a new user with fresh protocol state (or one of the class's
//! returning users, set up before the clock, the one away longest, with what it made
//! before), run `iterations` operations and leave. Latency is measured from each
//! operation's intended start, so a server that stalls shows its stall in the corrected
//! figures even though the generator waited (coordinated omission, as wrk2 corrects
//! it); the service time is recorded beside it. How late the generator itself acted on
//! an arrival (the arrival loop or the runtime waking after its due time) is its start
//! lag, and is kept out of the corrected latency, as for closed and paced users.
//!
//! At most `max_concurrency` sessions run at once. An arrival that finds them all busy
//! waits for a slot (`queue`, counted as late) or gives up (`drop`, counted). The schedule
//! ends with the round: an arrival still waiting for a slot then, and every later one due
//! before the deadline, is counted as dropped. Arrivals are never silently skipped.

use std::sync::Arc;
use std::time::Duration;

use rand::SeedableRng;
use rand::rngs::Xoshiro256PlusPlus;
use rand_distr::{Distribution, Exp};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::FailureNote;
use super::record::{VuOutput, Who, joined};
use super::user::{Active, Entry, UserSpec};
use crate::metrics::{Recorder, RecorderFactory};
use crate::protocol::{ClassDriver, VuDriver, VuIds};
use crate::transport::{Endpoint, ErrorClass, Timeouts};
use crate::workload::{Arrival, ArrivalProcess, UserClass, WhenFull, Workload, ramp_value};

/// An open class in one round.
pub(super) struct OpenSpec {
    /// The class's place in the round (each session is named by its arrival's).
    pub(super) who: Who,
    pub(super) class: Arc<UserClass>,
    pub(super) arrival: Arrival,
    pub(super) seed: u64,
    pub(super) deadline: Instant,
    pub(super) iterations: u64,
    pub(super) run_id: Arc<str>,
    pub(super) endpoint: Arc<Endpoint>,
    pub(super) timeouts: Timeouts,
    /// Sessions in progress, for the per-second count of active users.
    pub(super) users: Arc<std::sync::atomic::AtomicU64>,
    /// This process's share of the schedule.
    pub(super) shard: super::shard::Shard,
    /// Waits for arrivals.
    pub(super) timer: super::timer::Timer,
    /// Set once the run is stopped.
    pub(super) halted: Arc<std::sync::atomic::AtomicBool>,
    /// The class's returning users, when it has them: each session is one of them.
    pub(super) returning: Option<Arc<Returning>>,
    /// Where each session's time on the runtime's threads is charged to its class.
    pub(super) meters: super::meter::ClassMeters,
}

/// An open class's returning users: set up before the round's clock, each lent to one
/// session at a time, the one away longest first, and acting on what it made in its
/// earlier sessions.
pub(super) struct Returning {
    idle: std::sync::Mutex<std::collections::VecDeque<(u32, VuDriver)>>,
    /// How many there are.
    count: usize,
    /// Their state goes on into the next round (`run.keep_state`).
    keep: bool,
}

impl Returning {
    pub(super) fn new(users: impl Iterator<Item = (u32, VuDriver)>, keep: bool) -> Arc<Returning> {
        let idle: std::collections::VecDeque<(u32, VuDriver)> = users.collect();
        Arc::new(Returning {
            count: idle.len(),
            idle: std::sync::Mutex::new(idle),
            keep,
        })
    }

    /// The idle queue; a poisoned lock still holds the users.
    fn idle(&self) -> std::sync::MutexGuard<'_, std::collections::VecDeque<(u32, VuDriver)>> {
        self.idle.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The user away longest, for a session.
    fn lend(&self) -> Option<(u32, VuDriver)> {
        self.idle().pop_front()
    }

    /// A user back from its session.
    fn give_back(&self, user: (u32, VuDriver)) {
        self.idle().push_back(user);
    }

    /// At the round's end, each user's connections closed (they stayed open between its
    /// sessions) and what it still waited for recorded: the users kept for the next round
    /// (class `ci`), or what they made handed to the round's teardown.
    async fn end_round(&self, who: &Who, recorder: &mut Recorder, out: &mut VuOutput) {
        let mut users: Vec<(u32, VuDriver)> = self.idle().drain(..).collect();
        // All at once: against a silent broker each may wait out the request timeout.
        let ends = users.iter_mut().map(|(_, d)| d.finish());
        let left = futures_util::future::join_all(ends).await;
        for ((vu, mut d), left) in users.into_iter().zip(left) {
            super::user::record_left(who, recorder, left);
            match self.keep && d.keeps_state() {
                true => out.kept.push((who.class_index, vu, d)),
                false => out.handoff.absorb(d.hand_off()),
            }
        }
    }
}

/// The arrival times of one class in one round, as offsets from the round's start, up to
/// `limit`: one seeded schedule, whichever process (or shard of it) runs it. `loadmix plan`
/// lists it from the same function.
pub(crate) struct Schedule<'c> {
    class: &'c UserClass,
    arrival: &'c Arrival,
    rng: Xoshiro256PlusPlus,
    t: f64,
    limit: Duration,
}

impl<'c> Schedule<'c> {
    pub(crate) fn new(
        seed: u64,
        class_index: usize,
        class: &'c UserClass,
        arrival: &'c Arrival,
        round: u32,
        limit: Duration,
    ) -> Schedule<'c> {
        Schedule {
            class,
            arrival,
            // The arrival times have a stream of their own, apart from every session's.
            rng: Xoshiro256PlusPlus::seed_from_u64(
                seed ^ 0xa221_7a1e ^ ((round as u64) << 40) ^ class_index as u64,
            ),
            t: 0.0,
            limit,
        }
    }
}

impl Iterator for Schedule<'_> {
    type Item = Duration;

    fn next(&mut self) -> Option<Duration> {
        // Seconds since the start, as a Duration; `None` past what it can hold (a rate so
        // close to zero that the next arrival is out of reach): the schedule then ends.
        let at = |t: f64| Duration::try_from_secs_f64(t).ok();
        loop {
            let now = at(self.t)?;
            let rate = ramp_value(self.arrival.rate, &self.class.ramp, now);
            if rate <= 0.0 {
                // Nothing arrives at rate 0; look again shortly (a ramp may raise it).
                self.t += 0.01;
                if at(self.t).is_none_or(|d| d >= self.limit) {
                    return None;
                }
                continue;
            }
            self.t += match self.arrival.process {
                ArrivalProcess::Constant => 1.0 / rate,
                ArrivalProcess::Poisson => {
                    Exp::new(rate).map_or(1.0 / rate, |e| e.sample(&mut self.rng))
                }
            };
            let d = at(self.t)?;
            return (d < self.limit).then_some(d);
        }
    }
}

/// Wait for `at`, to the microsecond ([`super::timer`]): closely spaced arrivals are not
/// each rounded up to a whole millisecond tick. False when stopped.
async fn wait_until(timer: &super::timer::Timer, at: Instant, stop: &CancellationToken) -> bool {
    tokio::select! {
        _ = timer.sleep_until(at) => true,
        _ = stop.cancelled() => false,
    }
}

/// Schedule arrivals until the deadline, then wait for the sessions in flight.
pub(super) async fn arrivals(
    spec: OpenSpec,
    w: Arc<Workload>,
    driver: Arc<ClassDriver>,
    factory: RecorderFactory,
    stop: CancellationToken,
) -> VuOutput {
    let spec = Arc::new(spec);
    let mut out = VuOutput::default();
    let slots = slots_of(&spec);
    let mut sessions = tokio::task::JoinSet::new();
    // Once the round's time is up, the rest of the schedule is only counted: arrivals due
    // before the deadline that could not start are dropped, never silently skipped, and
    // the round ends on time however far behind the generator or the server has fallen.
    let mut closing = false;
    // When the last arrival's wait for a slot ended: a later arrival due before it was
    // held by the server, not by the generator.
    let mut held_until = spec.who.start;
    for (k, offset) in schedule_of(&spec).enumerate() {
        // Another shard's arrival: it starts there, with the same index and seed.
        if !spec.shard.owns_arrival(k as u64) {
            continue;
        }
        let Some(intended) = spec.who.start.checked_add(offset) else {
            break;
        };
        // Stopped (Ctrl-C): the round ends here; nothing after is due any more.
        if stop.is_cancelled() {
            break;
        }
        // A session is named by its arrival's place in the schedule, as in one process.
        let Ok(id) = u32::try_from(k) else {
            break;
        };
        if closing || Instant::now() >= spec.deadline {
            closing = true;
            out.dropped += 1;
            continue;
        }
        if !wait_until(&spec.timer, intended, &stop).await {
            break;
        }
        // How late the arrival loop acted on this arrival by its own doing: what lies past
        // both the due time and the end of the previous arrival's wait for a slot.
        let loop_lag = Instant::now().saturating_duration_since(intended.max(held_until));
        if loop_lag > super::record::BEHIND_LIMIT {
            out.behind += 1;
        }
        let permit = match take_slot(&spec, &slots, &stop).await {
            Slot::Free(p) => p,
            Slot::Waited(p) => {
                out.late += 1;
                held_until = Instant::now();
                p
            }
            Slot::Full => {
                out.dropped += 1;
                continue;
            }
            Slot::RoundOver => {
                out.dropped += 1;
                closing = true;
                continue;
            }
            Slot::Stopped => break,
        };
        let (spec2, w2, d2, f2, s2) = (
            spec.clone(),
            w.clone(),
            driver.clone(),
            factory.clone(),
            stop.clone(),
        );
        let spawned = Instant::now();
        let class = spec.who.class_index;
        sessions.spawn(spec.meters.meter(class, async move {
            // The runtime's delay in starting the task is the generator's too.
            let lag = loop_lag + spawned.elapsed();
            let entry = Entry::Arrived { at: intended, lag };
            let o = session(&spec2, &w2, &d2, &f2, &s2, id, entry).await;
            drop(permit);
            o
        }));
        out.sessions += 1;
        // Collect finished sessions as we go, so a long run does not hold them all.
        while let Some(res) = sessions.try_join_next() {
            joined(&mut out, res, VuOutput::absorb);
        }
    }
    while let Some(res) = sessions.join_next().await {
        joined(&mut out, res, VuOutput::absorb);
    }
    if let Some(r) = &spec.returning {
        let mut recorder = factory.recorder();
        r.end_round(&spec.who, &mut recorder, &mut out).await;
        recorder.flush();
    }
    out
}

/// The round's arrival times for this class, up to its deadline.
fn schedule_of(spec: &OpenSpec) -> Schedule<'_> {
    let limit = spec.deadline.saturating_duration_since(spec.who.start);
    Schedule::new(
        spec.seed,
        spec.who.class_index,
        &spec.class,
        &spec.arrival,
        spec.who.round,
        limit,
    )
}

/// The class's session slots in this process: sharded, its part of the limit the whole
/// run shares; with returning users, no more sessions than users at once (one user, one
/// session).
fn slots_of(spec: &OpenSpec) -> Arc<Semaphore> {
    let share = spec.shard.share(spec.arrival.max_concurrency) as usize;
    Arc::new(Semaphore::new(match &spec.returning {
        Some(r) => share.min(r.count),
        None => share,
    }))
}

/// What an arrival found of the class's `max_concurrency` slots.
enum Slot {
    /// One was free.
    Free(OwnedSemaphorePermit),
    /// It waited for one (`when_full: queue`): counted as late.
    Waited(OwnedSemaphorePermit),
    /// None was free and it gave up (`when_full: drop`).
    Full,
    /// It waited and the round ended first: a queue that does not drain within the round
    /// ends with it.
    RoundOver,
    /// The run was stopped.
    Stopped,
}

/// A slot for an arrival, as the class says to do when they are all taken.
async fn take_slot(spec: &OpenSpec, slots: &Arc<Semaphore>, stop: &CancellationToken) -> Slot {
    if let Ok(p) = slots.clone().try_acquire_owned() {
        return Slot::Free(p);
    }
    match spec.arrival.when_full {
        WhenFull::Drop => return Slot::Full,
        WhenFull::Queue => {}
    }
    tokio::select! {
        p = slots.clone().acquire_owned() => match p {
            Ok(p) => Slot::Waited(p),
            Err(_) => Slot::Stopped,
        },
        _ = tokio::time::sleep_until(spec.deadline) => Slot::RoundOver,
        _ = stop.cancelled() => Slot::Stopped,
    }
}

/// One session: its set-up, on the clock of its first operation, then its operations as
/// every user runs them.
async fn session(
    spec: &OpenSpec,
    w: &Workload,
    driver: &ClassDriver,
    factory: &RecorderFactory,
    stop: &CancellationToken,
    id: u32,
    entry: Entry,
) -> VuOutput {
    let class = &spec.class;
    let mut out = VuOutput::default();
    let _active = Active::enter(&spec.users);
    let cancelled = stop.cancelled();
    tokio::pin!(cancelled);
    let mut recorder = factory.recorder();
    // A returning user was set up before the clock; a new one is set up now.
    let (mut vu, lent) = match spec.returning.as_ref().map(|r| r.lend()) {
        Some(Some((user, d))) => (d, Some(user)),
        // Never: a session holds a slot, and there are no more slots than users.
        Some(None) => {
            out.dropped += 1;
            return out;
        }
        None => (new_session_user(spec, w, driver, id, &mut out).await, None),
    };
    let user = UserSpec {
        who: Who { vu: id, ..spec.who },
        class: class.clone(),
        seed: spec.seed,
        entry,
        end_by: Some(spec.deadline),
        iterations: Some(spec.iterations),
        halted: spec.halted.clone(),
        timer: spec.timer.clone(),
        // A returning user keeps what it made for its next session.
        keep: lent.is_some(),
        returns: lent.is_some(),
    };
    super::user::run(&user, &mut vu, &mut recorder, &mut out, &mut cancelled).await;
    if let (Some(r), Some(user)) = (&spec.returning, lent) {
        r.give_back((user, vu));
    }
    out
}

/// A new user for session `id`, set up now: its set-up (its first calendar or collection
/// among it) is part of what an arriving client waits for, so it counts toward the
/// corrected latency of the first operation. Its requests are counted off the clock, by
/// method and status, as a closed user's.
async fn new_session_user(
    spec: &OpenSpec,
    w: &Workload,
    driver: &ClassDriver,
    id: u32,
    out: &mut VuOutput,
) -> VuDriver {
    let class = &spec.class;
    let ids = VuIds {
        vu: id,
        round: spec.who.round,
        run_id: spec.run_id.clone(),
    };
    let mut vu = driver.new_vu(w, class, ids, &spec.endpoint, spec.timeouts);
    let set_up = super::user::set_up(&mut vu, spec.seed, &class.name, id, spec.who.round).await;
    out.setup = vu.take_untimed();
    if let Err(detail) = set_up {
        out.failures.push(FailureNote {
            round: spec.who.round,
            label: spec.who.label_base,
            error: ErrorClass::Status,
            detail: format!("set-up of {} session {id}: {detail}", class.name),
        });
    }
    vu
}
