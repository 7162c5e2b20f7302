//! One user's walk through its round, the same for a closed user and an open-model
//! session: pick (or bootstrap), wait until the pick is due (its think, or its pacing
//! slot), run it through the driver, record it; then wait out what the user still
//! expects, and hand over what it leaves. Only where the first pick falls differs
//! ([`Entry`]): a closed user thinks first, from its turn; a session's first pick is due
//! on its arrival, so what it waited for before (a slot, its set-up) is in that pick's
//! corrected latency.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use tokio::time::Instant;

use super::record::{Pick, Timing, VuOutput, Who, record, record_doubt, record_steps};
use super::seed::VuRngs;
use super::session::Walk;
use super::timer::Timer;
use crate::metrics;
use crate::protocol::{Done, Outcome, VuDriver};
use crate::workload::UserClass;
use crate::workload::chain::Guard;

/// A user whose picks find nothing to act on this many times in a row stops for the
/// round: its mix needs what none of its operations makes (an update with no put), and
/// with no think time it would spin a core sending nothing.
pub(crate) const MAX_SKIPS_IN_A_ROW: u32 = 1_000;

/// The client's patience with operation `op` of `class` (none for a bootstrap).
fn patience_of(class: &UserClass, op: Option<usize>) -> Option<Duration> {
    op.and_then(|i| class.ops.get(i))
        .and_then(|o| o.client_timeout)
}

/// A user's stop signal, made once and polled in place: a fresh `cancelled()` per
/// operation would register and unregister a waiter under the token's lock every time, a
/// lock all users share.
pub(super) type Cancelled<'p, 't> =
    std::pin::Pin<&'p mut tokio_util::sync::WaitForCancellationFuture<'t>>;

/// Where a user's first pick falls.
#[derive(Clone, Copy)]
pub(super) enum Entry {
    /// A closed user: its turn comes at `begin` (the round's start, a ramp's moment, a
    /// paced user's phase), and it thinks before its first pick as before every other.
    Closed { begin: Instant },
    /// An open session: its first pick is due when it arrived, with no think before it.
    /// `lag` is how late the generator itself acted on the arrival (its arrival loop
    /// waking after the due time, its runtime starting the session's task late): the
    /// generator's start lag, kept out of the first pick's corrected latency.
    Arrived { at: Instant, lag: Duration },
}

impl Entry {
    /// When the user's schedule begins.
    fn begin(self) -> Instant {
        match self {
            Entry::Closed { begin } => begin,
            Entry::Arrived { at, .. } => at,
        }
    }
}

/// Everything one user's loop needs besides its driver.
pub(super) struct UserSpec {
    pub(super) who: Who,
    pub(super) class: Arc<UserClass>,
    pub(super) seed: u64,
    pub(super) entry: Entry,
    /// The end of its round (or of its active window under a ramp).
    pub(super) end_by: Option<Instant>,
    /// How many operations it runs at most.
    pub(super) iterations: Option<u64>,
    /// Set once the run is stopped. Checked between operations instead of the token,
    /// whose `is_cancelled` takes a lock that every user would share.
    pub(super) halted: Arc<AtomicBool>,
    /// Waits for pacing slots.
    pub(super) timer: Timer,
    /// It goes on into the next round (`run.keep_state`): what it made stays its own, for
    /// the run's last teardown, not this round's.
    pub(super) keep: bool,
    /// A returning user's session: the user comes back for another, so its connections
    /// stay open when this one ends.
    pub(super) returns: bool,
}

impl UserSpec {
    /// What operation `done` needs to be recorded: due at `intended` after `think`,
    /// the user free at `ready`, sent at `started`, ended now.
    fn timing(
        &self,
        done: u64,
        think: Duration,
        intended: Instant,
        ready: Instant,
        started: Instant,
    ) -> Timing {
        Timing {
            think,
            intended,
            held_by_generator: self.generator_lag_before(done),
            ready,
            started,
            ended: Instant::now(),
            scheduled: self.scheduled(),
        }
    }

    /// Whether its picks are due at set times (pacing, arrivals): their corrected latency
    /// is then measured from those times.
    fn scheduled(&self) -> bool {
        matches!(self.entry, Entry::Arrived { .. }) || self.class.pacing.is_some()
    }

    /// What the generator took before the user could act on operation `done`: only a
    /// session's first waited for its arrival to be acted on.
    fn generator_lag_before(&self, done: u64) -> Duration {
        match (self.entry, done) {
            (Entry::Arrived { lag, .. }, 0) => lag,
            _ => Duration::ZERO,
        }
    }
}

/// Counts a user as active while it lives: the per-second "active users" figure.
pub(super) struct Active(Arc<AtomicU64>);

impl Active {
    pub(super) fn enter(users: &Arc<AtomicU64>) -> Active {
        users.fetch_add(1, Ordering::Relaxed);
        Active(users.clone())
    }
}

impl Drop for Active {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::Relaxed);
    }
}

/// Run the user to the end of its round, its iterations or the stop; what it waits for
/// at the end is awaited, and what it leaves is handed to `out`.
pub(super) async fn run(
    spec: &UserSpec,
    driver: &mut VuDriver,
    recorder: &mut metrics::Recorder,
    out: &mut VuOutput,
    cancelled: &mut Cancelled<'_, '_>,
) {
    let class = &spec.class;
    let mut rngs = VuRngs::new(spec.seed, &class.name, spec.who.vu, spec.who.round);
    // `done` counts every operation (what `iterations` and pacing count); `seq` counts the
    // picks from the table, which is what `loadmix plan` lists.
    let (mut done, mut seq) = (0u64, 0u64);
    let mut walk = Walk::new(class);
    let one_session = matches!(spec.entry, Entry::Arrived { .. });
    let mut skips_in_a_row = 0u32;
    driver.round_ends_at(spec.end_by);
    // What set-up put in doubt is no pick's; after that, the previous answer's label.
    let _ = driver.take_doubt();
    let mut previous = None;
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
            let allowed = |g: &Guard| driver.guard_holds(g);
            // None: the behaviour exited (an open session), or has nowhere to go.
            let Some(p) = walk.next(class, &mut rngs, &allowed, now, one_session) else {
                break;
            };
            Some(p)
        };
        let Some((intended, think)) = next_due(spec, done, now, &mut rngs, pick) else {
            break;
        };
        if spec.end_by.is_some_and(|e| intended >= e) {
            break;
        }
        // A paced user that fell behind does not send after the round's end the slots that
        // fell due before it: they are dropped, and counted, as the open model does.
        if let (Some(p), Some(e)) = (class.pacing, spec.end_by)
            && now >= e
        {
            out.dropped += missed_slots(intended, e, p);
            break;
        }
        let Some(started) = wait_until_due(spec, intended, now, recorder, cancelled).await else {
            break;
        };
        if pick.is_some() {
            walk.started(started);
        }
        let op = pick.map(|(op, _)| op);
        let Some(outcome) = one_op(driver, &mut rngs, seq, op, cancelled).await else {
            break;
        };
        let timing = spec.timing(done, think, intended, now, started);
        let patience = patience_of(class, op);
        let pick = Pick { seq, op, patience };
        let this = record(out, recorder, &spec.who, pick, &outcome, timing);
        previous = record_doubt(out, driver.take_doubt(), previous, this);
        done += 1;
        if !boot {
            seq += 1;
        }
        if let Done::Skipped = outcome {
            skips_in_a_row += 1;
            if skips_in_a_row >= MAX_SKIPS_IN_A_ROW {
                out.stuck += 1;
                break;
            }
            // Nothing was sent, so nothing awaited: let the other users of this thread run.
            tokio::task::yield_now().await;
        } else {
            skips_in_a_row = 0;
        }
    }
    finish(spec, driver, recorder, cancelled).await;
    recorder.flush();
    out.walks
        .extend(walk.finish().map(|w| (spec.who.class_index, w)));
    match spec.keep {
        // Still its own: a kept user hands what it made over once, after the last round,
        // and only its connection counts now (listing what it made would cost a returning
        // user's every session a walk of its pools).
        true => out.handoff.wire.absorb(driver.take_wire()),
        false => out.handoff.absorb(driver.hand_off()),
    }
}

/// A user's set-up, off the clock: the protocol's own (an account, discovery, a broker's
/// subscription), then what the user makes of its own before its first pick (a
/// calendar, a collection, and the data the class puts in it or in its pools), so that
/// none of it is among the measured operations. Its
/// requests are in the tally the caller takes next. A bootstrap that failed leaves the
/// user to make it again as its first operation, measured and flagged as a bootstrap.
pub(super) async fn set_up(
    driver: &mut VuDriver,
    seed: u64,
    class: &str,
    vu: u32,
    round: u32,
) -> Result<(), String> {
    driver.setup().await.map_err(|e| e.to_string())?;
    let mut rng = VuRngs::setup_data(seed, class, vu, round);
    if driver.needs_bootstrap()
        && let Done::Sent(o) = driver.bootstrap(&mut rng).await
        && let Some(e) = o.error
    {
        return Err(format!(
            "its first collection: {} {}",
            e.name(),
            o.detail.unwrap_or_default()
        ));
    }
    driver.prefill(&mut rng).await
}

/// One operation: the bootstrap when the user has nothing of its own yet (`op` is
/// `None`), else the operation its behaviour picked. `None` when stopped meanwhile.
async fn one_op(
    driver: &mut VuDriver,
    rngs: &mut VuRngs,
    seq: u64,
    op: Option<usize>,
    cancelled: &mut Cancelled<'_, '_>,
) -> Option<Done> {
    // The contract boxes each step's future: inline, the largest of every driver's
    // operations would be part of every user's task, also while it thinks.
    tokio::select! {
        o = async {
            match op {
                None => driver.bootstrap(&mut rngs.data).await,
                Some(op) => driver.execute(op, seq, &mut rngs.data).await,
            }
        } => Some(o),
        _ = cancelled.as_mut() => None,
    }
}

/// What a user still waits for when it ends (a producer's outstanding confirms) is
/// awaited and recorded as steps, unless the run is stopped first.
async fn finish(
    spec: &UserSpec,
    driver: &mut VuDriver,
    recorder: &mut metrics::Recorder,
    cancelled: &mut Cancelled<'_, '_>,
) {
    let left = tokio::select! {
        o = async {
            match spec.returns {
                true => driver.rest().await,
                false => driver.finish().await,
            }
        } => o,
        _ = cancelled.as_mut() => None,
    };
    record_left(&spec.who, recorder, left);
}

/// Record the steps a user's end settled (a producer's last confirms), as of now.
pub(super) fn record_left(who: &Who, recorder: &mut metrics::Recorder, left: Option<Outcome>) {
    if let Some(o) = left {
        let at = Instant::now();
        let start_us = at.duration_since(who.start).as_micros() as u64;
        record_steps(recorder, &o, who.label_base, start_us, at);
    }
}

/// When the next operation is due, and the think before it. Pacing: operation k is due at
/// begin + k × pacing. An open session's first: on its arrival. Think: due when the think
/// ends: the pick's (drawn with it from the behaviour's transition), or a bootstrap's from
/// its own stream, so bootstraps shift no pick's think. Checked arithmetic: a schedule
/// past what an Instant can hold simply ends (`None`).
fn next_due(
    spec: &UserSpec,
    done: u64,
    now: Instant,
    rngs: &mut VuRngs,
    pick: Option<(usize, Duration)>,
) -> Option<(Instant, Duration)> {
    let class = &spec.class;
    if let Some(p) = class.pacing {
        let k = u32::try_from(done).ok()?;
        return Some((
            spec.entry.begin().checked_add(p.checked_mul(k)?)?,
            Duration::ZERO,
        ));
    }
    if let (Entry::Arrived { at, .. }, 0) = (spec.entry, done) {
        return Some((at, Duration::ZERO));
    }
    let t = match pick {
        Some((_, think)) => think,
        None => rngs.think_before_bootstrap(class),
    };
    Some((now.checked_add(t)?, t))
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
    spec: &UserSpec,
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_paced_user_behind_at_the_end_counts_the_slots_it_did_not_send() {
        let t0 = Instant::now();
        let ms = Duration::from_millis;
        // Slot 10 ms in was the next; the round ended at 100 ms: slots 10, 30, ..., 90.
        assert_eq!(missed_slots(t0 + ms(10), t0 + ms(100), ms(20)), 5);
        assert_eq!(missed_slots(t0 + ms(100), t0 + ms(100), ms(20)), 1);
    }
}
