//! The running totals a run shows while it goes: the progress line, the dashboard and the
//! Prometheus endpoint all read these, so they cannot disagree.
//!
//! Only the round's aggregator writes them, one batch of samples at a time, with relaxed
//! atomic adds: nothing here is on a VU's request path, and a reader never takes a lock a
//! writer waits on. Every counter only grows for the life of the process (a Prometheus
//! counter), and what a measured round counts here is what its report counts: the same
//! samples, split by the same warm-up rule.

use std::sync::atomic::{AtomicU8, AtomicU32, AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, Mutex};

use super::{LabelTable, Sample};
use crate::transport::ErrorClass;

/// Upper bounds of the latency buckets, µs: the classic latency ladder from 100 µs to a
/// minute, fine where services answer (1 to 100 ms) and coarse beyond. A latency above
/// the last bound is counted in `+Inf` only.
pub(crate) const BUCKETS_US: [u64; 18] = [
    100, 250, 500, 1_000, 2_500, 5_000, 10_000, 25_000, 50_000, 100_000, 250_000, 500_000,
    1_000_000, 2_500_000, 5_000_000, 10_000_000, 30_000_000, 60_000_000,
];

/// Where a lane (one target of one sweep point) is in its run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub(crate) enum Phase {
    /// Before the first round, and between rounds while users are set up.
    Setup,
    /// A warm-up round: run whole and thrown away.
    Warmup,
    /// A measured round's clock is running (its first `warmup:` seconds included).
    Measured,
    /// A round's cleanup and drain, untimed.
    Cleanup,
    /// The lane's rounds are over.
    Done,
}

impl Phase {
    pub(crate) const ALL: [Phase; 5] = [
        Phase::Setup,
        Phase::Warmup,
        Phase::Measured,
        Phase::Cleanup,
        Phase::Done,
    ];

    pub(crate) fn name(self) -> &'static str {
        match self {
            Phase::Setup => "setup",
            Phase::Warmup => "warmup",
            Phase::Measured => "measured",
            Phase::Cleanup => "cleanup",
            Phase::Done => "done",
        }
    }

    fn from_u8(v: u8) -> Phase {
        Phase::ALL
            .get(usize::from(v))
            .copied()
            .unwrap_or(Phase::Done)
    }
}

/// Requests sent off the clock, which no operation counts but the server sees: the
/// preflight's probes, the users' set-ups (accounts, discovery, first calendars) and the
/// rounds' cleanup deletes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Untimed {
    Preflight = 0,
    Setup = 1,
    Cleanup = 2,
}

impl Untimed {
    pub(crate) const ALL: [Untimed; 3] = [Untimed::Preflight, Untimed::Setup, Untimed::Cleanup];

    pub(crate) fn name(self) -> &'static str {
        match self {
            Untimed::Preflight => "preflight",
            Untimed::Setup => "setup",
            Untimed::Cleanup => "cleanup",
        }
    }
}

/// Which totals a sample goes to: the report's (measured) or those kept out of it (the
/// `warmup:` window of a measured round, and whole warm-up rounds).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Counted {
    Measured = 0,
    Warmup = 1,
}

/// One operation label's totals in one of the two `Counted` kinds.
#[derive(Default)]
pub(crate) struct Totals {
    pub requests: AtomicU64,
    pub successes: AtomicU64,
    pub failures: [AtomicU64; ErrorClass::COUNT],
    pub bytes_sent: AtomicU64,
    pub bytes_received: AtomicU64,
    /// Successful latencies per bucket of [`BUCKETS_US`] (not cumulative); the last entry
    /// holds those above every bound.
    pub buckets: [AtomicU64; BUCKETS_US.len() + 1],
    /// Sum of successful latencies, µs.
    pub latency_sum_us: AtomicU64,
    /// Picks that found nothing to act on and sent nothing (no request).
    pub skipped: AtomicU64,
}

/// How many seconds of the round the recent counts keep: the window, the settling second
/// and the second under way, with room to spare.
const RECENT_SLOTS: usize = 10;
/// Seconds a rate now is taken over: the last whole seconds, at most this many.
pub(crate) const RECENT_WINDOW_S: u64 = 5;
/// A second is whole once this many more have passed: a user hands its samples over at
/// least once a second, so by then nearly all that started in it have been counted.
const RECENT_SETTLE_S: u64 = 1;

/// Requests by the second of the round they started in, for the last few seconds, as the
/// report's per-second series counts them (warm-up window included, steps apart). Written
/// by the round's aggregator alone; a slot holds one second, tagged with its round.
#[derive(Default)]
pub(crate) struct Recent {
    /// `(round epoch << 32) | (second + 1)`; 0 for a slot never written.
    tags: [AtomicU64; RECENT_SLOTS],
    counts: [AtomicU64; RECENT_SLOTS],
}

impl Recent {
    fn tag(epoch: u64, sec: u64) -> u64 {
        (epoch << 32) | (sec.min(u64::from(u32::MAX) - 1) + 1)
    }

    /// One request that started in second `sec` of round `epoch`. A second older than
    /// the one its slot holds is past every window and is not kept here.
    fn add(&self, epoch: u64, sec: u64) {
        let i = (sec % RECENT_SLOTS as u64) as usize;
        let want = Recent::tag(epoch, sec);
        let held = self.tags[i].load(Relaxed);
        if held != want {
            if held > want {
                return;
            }
            self.counts[i].store(0, Relaxed);
            self.tags[i].store(want, Relaxed);
        }
        self.counts[i].fetch_add(1, Relaxed);
    }

    /// Requests that started in second `sec` of round `epoch` (0 when none was kept).
    fn count(&self, epoch: u64, sec: u64) -> u64 {
        let i = (sec % RECENT_SLOTS as u64) as usize;
        let n = self.counts[i].load(Relaxed);
        match self.tags[i].load(Relaxed) == Recent::tag(epoch, sec) {
            true => n,
            false => 0,
        }
    }
}

/// The rate now: requests over the last whole seconds of the round under way (or the
/// last one), which are the report's per-second series for those seconds.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize)]
pub(crate) struct RateNow {
    /// The seconds of the round, `from_s` to `to_s` (excluded), the rate is over.
    pub from_s: u64,
    pub to_s: u64,
    pub requests: u64,
    pub per_s: f64,
}

/// One class's start lag (how late the generator acted on an operation's intended start)
/// so far: in the latency buckets, with its sum, count and largest.
#[derive(Default)]
pub(crate) struct LagTotals {
    pub buckets: [AtomicU64; BUCKETS_US.len() + 1],
    pub sum_us: AtomicU64,
    pub count: AtomicU64,
    pub max_us: AtomicU64,
}

/// A plain copy of [`LagTotals`].
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize)]
pub(crate) struct LagSnapshot {
    pub class: String,
    pub buckets: Vec<u64>,
    pub sum_us: u64,
    pub count: u64,
    pub max_us: u64,
}

impl LagTotals {
    fn add(&self, lag_us: u64) {
        self.buckets[bucket_of(lag_us)].fetch_add(1, Relaxed);
        self.sum_us.fetch_add(lag_us, Relaxed);
        self.count.fetch_add(1, Relaxed);
        self.max_us.fetch_max(lag_us, Relaxed);
    }

    fn snapshot(&self, class: &str) -> LagSnapshot {
        LagSnapshot {
            class: class.to_string(),
            buckets: self.buckets.iter().map(|b| b.load(Relaxed)).collect(),
            sum_us: self.sum_us.load(Relaxed),
            count: self.count.load(Relaxed),
            max_us: self.max_us.load(Relaxed),
        }
    }
}

/// A plain copy of [`Totals`], read at one moment.
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize)]
pub(crate) struct TotalsSnapshot {
    pub requests: u64,
    pub successes: u64,
    /// Failures by error class, in `ErrorClass::ALL`'s order.
    pub failures: [u64; ErrorClass::COUNT],
    pub bytes_sent: u64,
    pub bytes_received: u64,
    pub buckets: Vec<u64>,
    pub latency_sum_us: u64,
}

impl Totals {
    fn add(&self, s: &Sample) {
        self.requests.fetch_add(1, Relaxed);
        self.bytes_sent.fetch_add(s.bytes_sent, Relaxed);
        self.bytes_received.fetch_add(s.bytes_received, Relaxed);
        match s.error {
            None => {
                self.successes.fetch_add(1, Relaxed);
                self.buckets[bucket_of(s.latency_us)].fetch_add(1, Relaxed);
                self.latency_sum_us.fetch_add(s.latency_us, Relaxed);
            }
            Some(e) => {
                self.failures[e.index()].fetch_add(1, Relaxed);
            }
        }
    }

    pub(crate) fn snapshot(&self) -> TotalsSnapshot {
        TotalsSnapshot {
            requests: self.requests.load(Relaxed),
            successes: self.successes.load(Relaxed),
            failures: std::array::from_fn(|i| self.failures[i].load(Relaxed)),
            bytes_sent: self.bytes_sent.load(Relaxed),
            bytes_received: self.bytes_received.load(Relaxed),
            buckets: self.buckets.iter().map(|b| b.load(Relaxed)).collect(),
            latency_sum_us: self.latency_sum_us.load(Relaxed),
        }
    }
}

/// The bucket a latency falls in: the first bound it does not exceed (Prometheus' `le`).
pub(crate) fn bucket_of(latency_us: u64) -> usize {
    BUCKETS_US.partition_point(|&b| b < latency_us)
}

/// One operation label: its names, and its totals of each kind.
pub(crate) struct LiveOp {
    pub class: String,
    pub label: String,
    /// A step of an operation, or a figure reported apart: left out of the totals, as
    /// the report leaves it out.
    pub step: bool,
    pub counted: [Totals; 2],
    /// Requests of the last seconds by the second they started in.
    pub recent: Recent,
}

/// The first failures a lane's dashboard lists.
pub(crate) const FIRST_FAILURES: usize = 20;

/// One kind of failure as the dashboard lists it: which operation, its class and the
/// answer the server gave (if any); when it first came, and how many of it since.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub(crate) struct LiveFailure {
    pub round: u32,
    /// Seconds into the round the first of them started.
    pub at_s: f64,
    pub class: String,
    pub operation: String,
    pub error: &'static str,
    /// The last answer, in its protocol's words (`404`, `stomp ERROR 'no such queue'`),
    /// or `none` when nothing came back.
    pub answer: String,
    /// Failures of this kind so far.
    pub count: u64,
}

/// The distinct failures a lane lists (at most [`FIRST_FAILURES`] kinds), and how many
/// failures were of kinds past the list.
#[derive(Debug, Default)]
struct FailureKinds {
    kinds: Vec<LiveFailure>,
    unlisted: u64,
}

impl LiveFailure {
    fn label_is(&self, class: &str, operation: &str) -> bool {
        self.class == class && self.operation == operation
    }
}

/// The running totals of one lane: every label of its classes, its users, its round.
pub(crate) struct Live {
    /// Per class, every kind: what the progress line shows.
    pub requests: Vec<AtomicU64>,
    pub failures: Vec<AtomicU64>,
    pub ops: Vec<LiveOp>,
    class_of: Vec<usize>,
    /// Users inside their active window and open sessions in progress; the engine's own
    /// per-second count of active users is this counter.
    pub users: Arc<AtomicU64>,
    /// The round under way (from 1; warm-up rounds are numbered after the measured ones).
    round: AtomicU32,
    phase: AtomicU8,
    /// Users of the round being set up (accounts, discovery), and of those, how many are.
    setup_total: AtomicU64,
    setup_done: AtomicU64,
    /// Requests off the clock, by [`Untimed`].
    untimed: [AtomicU64; 3],
    /// The run's first kinds of failure, at most [`FIRST_FAILURES`], each counted; the
    /// lock is the aggregator's (once per failure) and a page's, never a VU's.
    first_failures: Mutex<FailureKinds>,
    /// Per class, its name and the start lag of every operation (not steps).
    class_names: Vec<String>,
    lag: Vec<LagTotals>,
    /// The round under way (any round, warm-up ones too): how many have begun, and when
    /// the last began (µs from `base`); samples' seconds count from there.
    round_epoch: AtomicU64,
    round_at_us: AtomicU64,
    /// Measured time as the report counts it, for rates: the measured rounds that ended,
    /// in µs, and the running one's clock (µs from `base` at its start, [`NO_CLOCK`] when
    /// none runs) and warm-up window.
    base: std::time::Instant,
    measured_done_us: AtomicU64,
    clock_at_us: AtomicU64,
    warm_us: AtomicU64,
    /// The fault window on now, as the report names it; the lock is the timeline's (at
    /// each window's begin and end) and a page's.
    fault: Mutex<Option<String>>,
}

const NO_CLOCK: u64 = u64::MAX;

impl Live {
    pub(crate) fn new(labels: &LabelTable) -> Live {
        Live {
            requests: labels.classes.iter().map(|_| Default::default()).collect(),
            failures: labels.classes.iter().map(|_| Default::default()).collect(),
            ops: labels
                .iter()
                .map(|(_, class, label)| LiveOp {
                    class: class.to_string(),
                    label: label.to_string(),
                    step: crate::workload::is_step_label(label),
                    counted: Default::default(),
                    recent: Recent::default(),
                })
                .collect(),
            class_of: labels.iter().map(|(ci, _, _)| ci).collect(),
            users: Arc::new(AtomicU64::new(0)),
            round: AtomicU32::new(0),
            phase: AtomicU8::new(Phase::Setup as u8),
            setup_total: AtomicU64::new(0),
            setup_done: AtomicU64::new(0),
            untimed: Default::default(),
            first_failures: Mutex::new(FailureKinds::default()),
            class_names: labels.classes.iter().map(|(n, _)| n.clone()).collect(),
            lag: labels.classes.iter().map(|_| Default::default()).collect(),
            round_epoch: AtomicU64::new(0),
            round_at_us: AtomicU64::new(0),
            base: std::time::Instant::now(),
            measured_done_us: AtomicU64::new(0),
            clock_at_us: AtomicU64::new(NO_CLOCK),
            warm_us: AtomicU64::new(0),
            fault: Mutex::new(None),
        }
    }

    /// A fault window began (`Some`, as the report names it) or ended (`None`).
    pub(crate) fn fault_on(&self, fault: Option<&str>) {
        if let Ok(mut f) = self.fault.lock() {
            *f = fault.map(str::to_string);
        }
    }

    /// The fault window on now.
    pub(crate) fn fault(&self) -> Option<String> {
        self.fault.lock().ok().and_then(|f| f.clone())
    }

    fn now_us(&self) -> u64 {
        u64::try_from(self.base.elapsed().as_micros()).unwrap_or(NO_CLOCK - 1)
    }

    /// As if the round under way began `secs` ago (a page rendered in a test shows the
    /// rate now without waiting for it).
    #[cfg(test)]
    pub(crate) fn round_began_ago(&mut self, secs: u64) {
        let ago = std::time::Duration::from_secs(secs);
        if let Some(b) = self.base.checked_sub(ago) {
            self.base = b;
        }
        self.round_begins();
        self.round_at_us.store(0, Relaxed);
    }

    /// A round (measured or warm-up) starts its clock now: its samples' seconds count
    /// from here. Called before any of its samples can reach the aggregator.
    pub(crate) fn round_begins(&self) {
        self.round_at_us.store(self.now_us(), Relaxed);
        self.round_epoch.fetch_add(1, Relaxed);
    }

    /// A measured round's clock starts; its first `warmup` counts as warm-up.
    pub(crate) fn clock_starts(&self, warmup: std::time::Duration) {
        let warm = u64::try_from(warmup.as_micros()).unwrap_or(u64::MAX);
        self.warm_us.store(warm, Relaxed);
        self.clock_at_us.store(self.now_us(), Relaxed);
    }

    /// The measured round's clock stopped; it measured `nominal` (its duration, as the
    /// report counts it), or as long as it ran when it has none.
    pub(crate) fn clock_stops(&self, nominal: Option<std::time::Duration>) {
        let at = self.clock_at_us.swap(NO_CLOCK, Relaxed);
        if at == NO_CLOCK {
            return;
        }
        let ran = match nominal {
            Some(d) => u64::try_from(d.as_micros()).unwrap_or(u64::MAX),
            None => self.now_us().saturating_sub(at),
        };
        let measured = ran.saturating_sub(self.warm_us.load(Relaxed));
        self.measured_done_us.fetch_add(measured, Relaxed);
    }

    /// Seconds measured so far: the measured rounds' clocks less their warm-up windows.
    pub(crate) fn measured_s(&self) -> f64 {
        let mut us = self.measured_done_us.load(Relaxed);
        let at = self.clock_at_us.load(Relaxed);
        if at != NO_CLOCK {
            let running = self.now_us().saturating_sub(at);
            us = us.saturating_add(running.saturating_sub(self.warm_us.load(Relaxed)));
        }
        us as f64 / 1e6
    }

    /// (requests, failures) per class so far.
    pub(crate) fn totals(&self) -> Vec<(u64, u64)> {
        self.requests
            .iter()
            .zip(&self.failures)
            .map(|(r, f)| (r.load(Relaxed), f.load(Relaxed)))
            .collect()
    }

    /// Count a pick that sent nothing, as `counted`. Called by the aggregator only.
    pub(super) fn skip(&self, s: &Sample, counted: Counted) {
        if let Some(op) = self.ops.get(s.label as usize) {
            op.counted[counted as usize].skipped.fetch_add(1, Relaxed);
        }
    }

    /// Count one sample, as `counted`. Called by the aggregator only.
    pub(super) fn add(&self, s: &Sample, counted: Counted) {
        let Some(op) = self.ops.get(s.label as usize) else {
            return;
        };
        op.counted[counted as usize].add(s);
        if s.step {
            return;
        }
        if let Some(&c) = self.class_of.get(s.label as usize) {
            self.requests[c].fetch_add(1, Relaxed);
            if s.error.is_some() {
                self.failures[c].fetch_add(1, Relaxed);
            }
        }
        if let Some(e) = s.error {
            self.note_failure(s, op, e);
        }
        op.recent
            .add(self.round_epoch.load(Relaxed), s.start_us / 1_000_000);
        if let Some(lag) = self
            .class_of
            .get(s.label as usize)
            .and_then(|&c| self.lag.get(c))
        {
            lag.add(s.lag_us);
        }
    }

    /// Operations per second over the last whole seconds of the round under way (or
    /// the last one to run): the seconds that ended at least a settling second ago, at
    /// most [`RECENT_WINDOW_S`] of them. Only the labels `which` picks count. `None`
    /// before a round has run a whole settled second.
    pub(crate) fn rate_now(&self, which: impl Fn(&LiveOp) -> bool) -> Option<RateNow> {
        let epoch = self.round_epoch.load(Relaxed);
        if epoch == 0 {
            return None;
        }
        let ran_s = self.now_us().saturating_sub(self.round_at_us.load(Relaxed)) / 1_000_000;
        let to_s = ran_s.checked_sub(RECENT_SETTLE_S).filter(|&t| t > 0)?;
        let from_s = to_s.saturating_sub(RECENT_WINDOW_S);
        let requests = (from_s..to_s)
            .map(|sec| {
                self.ops
                    .iter()
                    .filter(|o| !o.step && which(o))
                    .map(|o| o.recent.count(epoch, sec))
                    .sum::<u64>()
            })
            .sum();
        Some(RateNow {
            from_s,
            to_s,
            requests,
            per_s: requests as f64 / (to_s - from_s) as f64,
        })
    }

    /// Each class's start lag so far.
    pub(crate) fn class_lag(&self) -> Vec<LagSnapshot> {
        self.lag
            .iter()
            .zip(&self.class_names)
            .map(|(l, name)| l.snapshot(name))
            .collect()
    }

    /// Count a failure under its kind (operation, class, answer), listing a new kind
    /// while the list has room: a thousand 404s of one operation are one row.
    fn note_failure(&self, s: &Sample, op: &LiveOp, e: ErrorClass) {
        let Ok(mut list) = self.first_failures.lock() else {
            return;
        };
        let (round, at_s, answer) = (self.round(), s.start_us as f64 / 1e6, s.answer.to_string());
        let same = |f: &&mut LiveFailure| {
            f.error == e.name() && f.answer == answer && f.label_is(&op.class, &op.label)
        };
        if let Some(f) = list.kinds.iter_mut().find(same) {
            f.count += 1;
            // Samples reach the aggregator as they end: keep the earliest start.
            if (round, at_s) < (f.round, f.at_s) {
                (f.round, f.at_s) = (round, at_s);
            }
        } else if list.kinds.len() < FIRST_FAILURES {
            list.kinds.push(LiveFailure {
                round,
                at_s,
                class: op.class.clone(),
                operation: op.label.clone(),
                error: e.name(),
                answer,
                count: 1,
            });
        } else {
            list.unlisted += 1;
        }
    }

    /// `n` more requests sent off the clock, as `kind`.
    pub(crate) fn add_untimed(&self, kind: Untimed, n: u64) {
        self.untimed[kind as usize].fetch_add(n, Relaxed);
    }

    /// Requests sent off the clock so far, in [`Untimed::ALL`]'s order.
    pub(crate) fn untimed(&self) -> [u64; 3] {
        std::array::from_fn(|i| self.untimed[i].load(Relaxed))
    }

    /// The kinds of failure so far, the earliest first, and how many failures were of
    /// kinds the list had no room for.
    pub(crate) fn first_failures(&self) -> (Vec<LiveFailure>, u64) {
        let Ok(l) = self.first_failures.lock() else {
            return (Vec::new(), 0);
        };
        let mut kinds = l.kinds.clone();
        kinds.sort_by(|a, b| {
            (a.round, a.at_s)
                .partial_cmp(&(b.round, b.at_s))
                .unwrap_or(std::cmp::Ordering::Equal)
        });
        (kinds, l.unlisted)
    }

    pub(crate) fn set_round(&self, round: u32, phase: Phase) {
        self.round.store(round, Relaxed);
        self.phase.store(phase as u8, Relaxed);
    }

    pub(crate) fn set_phase(&self, phase: Phase) {
        self.phase.store(phase as u8, Relaxed);
    }

    /// A round's set-up begins: `users` to set up.
    pub(crate) fn setup_begins(&self, users: u64) {
        self.setup_total.store(users, Relaxed);
        self.setup_done.store(0, Relaxed);
    }

    /// One more user of the round's set-up is ready (or failed its set-up).
    pub(crate) fn setup_one(&self) {
        self.setup_done.fetch_add(1, Relaxed);
    }

    /// (users set up, users to set up) of the round's set-up.
    pub(crate) fn setup(&self) -> (u64, u64) {
        (
            self.setup_done.load(Relaxed),
            self.setup_total.load(Relaxed),
        )
    }

    pub(crate) fn round(&self) -> u32 {
        self.round.load(Relaxed)
    }

    pub(crate) fn phase(&self) -> Phase {
        Phase::from_u8(self.phase.load(Relaxed))
    }

    pub(crate) fn active_users(&self) -> u64 {
        self.users.load(Relaxed)
    }
}

/// How many error classes the board counts failures by.
pub(crate) const ERROR_CLASSES: usize = ErrorClass::COUNT;

/// The error class names, in the order [`TotalsSnapshot::failures`] holds them.
pub(crate) fn error_names() -> [&'static str; ERROR_CLASSES] {
    ErrorClass::ALL.map(ErrorClass::name)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn measured_time_is_the_rounds_durations_less_their_warm_up_windows() {
        use std::time::Duration;
        let live = Live::new(&LabelTable::new(vec![("c".into(), vec!["op".into()])]));
        assert_eq!(live.measured_s(), 0.0);
        live.clock_starts(Duration::from_secs(1));
        // Inside the warm-up window: nothing measured yet.
        assert_eq!(live.measured_s(), 0.0);
        live.clock_stops(Some(Duration::from_secs(5)));
        assert_eq!(live.measured_s(), 4.0);
        // A stop without a clock running changes nothing.
        live.clock_stops(Some(Duration::from_secs(5)));
        assert_eq!(live.measured_s(), 4.0);
        // A round without a warm-up counts as it runs.
        live.clock_starts(Duration::ZERO);
        std::thread::sleep(Duration::from_millis(20));
        let running = live.measured_s();
        assert!(running > 4.0 && running < 5.0, "{running}");
        live.clock_stops(Some(Duration::from_secs(5)));
        assert_eq!(live.measured_s(), 9.0);
    }

    #[test]
    fn a_latency_falls_in_the_first_bucket_whose_bound_it_does_not_exceed() {
        assert_eq!(bucket_of(0), 0);
        assert_eq!(bucket_of(100), 0, "le is inclusive");
        assert_eq!(bucket_of(101), 1);
        assert_eq!(bucket_of(60_000_000), BUCKETS_US.len() - 1);
        assert_eq!(bucket_of(60_000_001), BUCKETS_US.len(), "+Inf only");
        assert_eq!(bucket_of(u64::MAX), BUCKETS_US.len());
    }

    #[test]
    fn the_first_failures_are_kept_with_their_answer_and_no_more_than_the_bound() {
        let labels = LabelTable::new(vec![("q".into(), vec!["send".into()])]);
        let live = Live::new(&labels);
        live.set_round(2, Phase::Measured);
        // One kind, many times, reaching the aggregator later ones first: one row,
        // counted, timed by its earliest.
        for k in (0..FIRST_FAILURES as u64 + 5).rev() {
            let failed = crate::metrics::tests::sample(
                0,
                1_500_000 + k * 1000,
                10,
                Some(ErrorClass::Status),
            );
            live.add(&failed, Counted::Measured);
        }
        let (list, unlisted) = live.first_failures();
        assert_eq!((list.len(), unlisted), (1, 0));
        assert_eq!(
            (
                list[0].round,
                list[0].at_s,
                list[0].error,
                list[0].answer.as_str(),
                list[0].count
            ),
            (2, 1.5, "status", "500", 25)
        );
        assert_eq!(live.totals(), vec![(25, 25)]);
        // Kinds past the list are counted apart; the list is sorted by time.
        for k in 0..FIRST_FAILURES as u64 + 3 {
            let mut failed = crate::metrics::tests::sample(
                0,
                9_000_000 - k * 1000,
                10,
                Some(ErrorClass::Status),
            );
            failed.answer = crate::answer::Answer::http(400 + k as u16);
            live.add(&failed, Counted::Measured);
        }
        let (list, unlisted) = live.first_failures();
        assert_eq!((list.len(), unlisted), (FIRST_FAILURES, 4));
        assert!(list.windows(2).all(|w| w[0].at_s <= w[1].at_s), "{list:?}");
    }

    #[test]
    fn error_classes_keep_their_index_order() {
        for (i, c) in ErrorClass::ALL.iter().enumerate() {
            assert_eq!(c.index(), i);
        }
    }

    #[test]
    fn recent_seconds_keep_their_round_and_drop_what_is_past_every_window() {
        let r = Recent::default();
        for sec in [0, 0, 1, 3] {
            r.add(1, sec);
        }
        assert_eq!((r.count(1, 0), r.count(1, 1), r.count(1, 2)), (2, 1, 0));
        // Second 10 takes second 0's slot; a late sample of second 0 is then dropped.
        r.add(1, 10);
        r.add(1, 0);
        assert_eq!((r.count(1, 0), r.count(1, 10)), (0, 1));
        // A new round starts its seconds afresh, whatever the last one held.
        r.add(2, 1);
        assert_eq!((r.count(2, 1), r.count(1, 1)), (1, 0));
        assert_eq!(r.count(1, 3), 1, "another slot is untouched");
    }

    #[test]
    fn there_is_no_rate_now_before_a_round_has_a_whole_settled_second() {
        let labels = LabelTable::new(vec![("c".into(), vec!["get".into()])]);
        let live = Live::new(&labels);
        assert_eq!(live.rate_now(|_| true), None, "no round yet");
        live.round_begins();
        assert_eq!(live.rate_now(|_| true), None, "no whole second yet");
        let lag = live.class_lag();
        assert_eq!(
            (lag.len(), lag[0].class.as_str(), lag[0].count),
            (1, "c", 0)
        );
    }
}
