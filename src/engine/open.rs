//! The open model: sessions of a class arrive on a schedule (Poisson or evenly spaced, at a
//! rate that may ramp), each with fresh protocol state, run `iterations` operations and
//! leave. Latency is measured from each operation's intended start, so a server that stalls
//! shows its stall in the corrected figures even though the generator waited (coordinated
//! omission, as wrk2 corrects it); the service time is recorded beside it.
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
use tokio::sync::Semaphore;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::seed::VuRngs;
use super::{FailureNote, Timing, VuOutput, one_op, record};
use crate::metrics::RecorderFactory;
use crate::protocol::{ClassDriver, VuIds};
use crate::transport::{Endpoint, ErrorClass, Timeouts};
use crate::workload::{Arrival, ArrivalProcess, UserClass, WhenFull, Workload, ramp_value};

pub(super) struct OpenSpec {
    pub class_index: usize,
    pub class: Arc<UserClass>,
    pub arrival: Arrival,
    pub round: u32,
    pub seed: u64,
    pub start: Instant,
    pub deadline: Instant,
    pub iterations: u64,
    pub label_base: u32,
    pub log_ops: bool,
    pub run_id: Arc<str>,
    pub endpoint: Arc<Endpoint>,
    pub timeouts: Timeouts,
    /// Sessions in progress, for the per-second count of active users.
    pub users: std::sync::Arc<std::sync::atomic::AtomicU64>,
    /// This process's share of the schedule.
    pub shard: super::shard::Shard,
    /// Waits for arrivals.
    pub timer: super::timer::Timer,
}

/// The arrival times of one class in one round, as offsets from the round's start, up to
/// `limit`: one seeded schedule, whichever process (or shard of it) runs it. `loadmix plan`
/// lists it from the same function.
pub struct Schedule<'c> {
    class: &'c UserClass,
    arrival: &'c Arrival,
    rng: Xoshiro256PlusPlus,
    t: f64,
    limit: Duration,
}

impl<'c> Schedule<'c> {
    pub fn new(
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
    // Sharded, this process holds its part of the limit the whole run shares.
    let slots = Arc::new(Semaphore::new(
        spec.shard.share(spec.arrival.max_concurrency) as usize,
    ));
    let mut sessions = tokio::task::JoinSet::new();
    // Once the round's time is up, the rest of the schedule is only counted: arrivals due
    // before the deadline that could not start are dropped, never silently skipped, and
    // the round ends on time however far behind the generator or the server has fallen.
    let mut closing = false;
    let limit = spec.deadline.saturating_duration_since(spec.start);
    let schedule = Schedule::new(
        spec.seed,
        spec.class_index,
        &spec.class,
        &spec.arrival,
        spec.round,
        limit,
    );
    for (k, offset) in schedule.enumerate() {
        // Another shard's arrival: it starts there, with the same index and seed.
        if !spec.shard.owns_arrival(k as u64) {
            continue;
        }
        let Some(intended) = spec.start.checked_add(offset) else {
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
        let permit = match slots.clone().try_acquire_owned() {
            Ok(p) => p,
            Err(_) => match spec.arrival.when_full {
                WhenFull::Drop => {
                    out.dropped += 1;
                    continue;
                }
                WhenFull::Queue => {
                    tokio::select! {
                        p = slots.clone().acquire_owned() => match p {
                            Ok(p) => {
                                out.late += 1;
                                p
                            }
                            Err(_) => break,
                        },
                        // A queue that does not drain within the round ends with it.
                        _ = tokio::time::sleep_until(spec.deadline) => {
                            out.dropped += 1;
                            closing = true;
                            continue;
                        }
                        _ = stop.cancelled() => break,
                    }
                }
            },
        };
        let (spec2, w2, d2, f2, s2) = (
            spec.clone(),
            w.clone(),
            driver.clone(),
            factory.clone(),
            stop.clone(),
        );
        sessions.spawn(async move {
            let o = session(&spec2, &w2, &d2, &f2, &s2, id, intended).await;
            drop(permit);
            o
        });
        out.sessions += 1;
        // Collect finished sessions as we go, so a long run does not hold them all.
        while let Some(Ok(o)) = sessions.try_join_next() {
            out.absorb(o);
        }
    }
    while let Some(res) = sessions.join_next().await {
        if let Ok(o) = res {
            out.absorb(o);
        }
    }
    out
}

async fn session(
    spec: &OpenSpec,
    w: &Workload,
    driver: &ClassDriver,
    factory: &RecorderFactory,
    stop: &CancellationToken,
    id: u32,
    arrived: Instant,
) -> VuOutput {
    let class = &spec.class;
    let mut out = VuOutput::default();
    let _active = super::Active::enter(&spec.users);
    let cancelled = stop.cancelled();
    tokio::pin!(cancelled);
    let mut recorder = factory.recorder();
    let ids = VuIds {
        vu: id,
        round: spec.round,
        run_id: spec.run_id.clone(),
    };
    let mut vu = driver.new_vu(w, class, ids, &spec.endpoint, spec.timeouts);
    // Set-up is part of what an arriving client waits for: it counts toward the corrected
    // latency of the first operation.
    // Its requests are counted off the clock, by method and status, as a closed user's.
    let set_up = vu.setup().await;
    out.setup = vu.take_untimed();
    if let Err(detail) = set_up {
        out.failures.push(FailureNote {
            round: spec.round,
            label: spec.label_base,
            error: ErrorClass::Status,
            detail: format!("set-up of {} session {id}: {detail}", class.name),
        });
    }
    let mut rngs = VuRngs::new(spec.seed, &class.name, id, spec.round);
    let mut intended = arrived;
    // As in the closed loop: `done` counts operations, `seq` the picks from the table, and a
    // bootstrap's think comes from its own stream. The first operation starts on arrival.
    let mut seq = 0u64;
    let mut walk = super::session::Walk::new(class);
    for done in 0..spec.iterations {
        let boot = vu.needs_bootstrap();
        let pick = if boot {
            None
        } else {
            let allowed = |g: &crate::workload::chain::Guard| vu.guard_holds(g);
            match walk.next(class, &mut rngs, &allowed, Instant::now(), true) {
                Some(p) => Some(p),
                // The session exited.
                None => break,
            }
        };
        let mut think = Duration::ZERO;
        if done > 0 {
            think = match pick {
                Some((_, t)) => t,
                None => rngs.think_before_bootstrap(class),
            };
            intended = Instant::now() + think;
            if intended >= spec.deadline {
                break;
            }
            recorder.flush_before_wait(think);
            tokio::select! {
                _ = tokio::time::sleep_until(intended) => {}
                _ = &mut cancelled => break,
            }
        }
        let started = Instant::now();
        if pick.is_some() {
            walk.started(started);
        }
        let Some((op, outcome)) = one_op(
            &mut vu,
            &mut rngs,
            (seq, pick.map(|(op, _)| op)),
            &mut cancelled,
        )
        .await
        else {
            break;
        };
        let ended = Instant::now();
        record(
            &mut out,
            &mut recorder,
            spec.start,
            spec.label_base,
            (spec.round, spec.class_index, id, seq, spec.log_ops),
            op,
            &outcome,
            Timing {
                think,
                intended,
                started,
                ended,
                scheduled: true,
            },
        );
        if !boot {
            seq += 1;
        }
    }
    super::finish_user(
        &mut vu,
        &mut recorder,
        (spec.start, spec.label_base),
        &mut cancelled,
    )
    .await;
    recorder.flush();
    out.walks
        .extend(walk.finish().map(|w| (spec.class_index, w)));
    out.handoff = vu.hand_off();
    out
}
