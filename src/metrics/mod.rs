//! Measurements: what each operation cost, merged without a lock on the request path.
//!
//! A VU writes compact [`Sample`]s into its own buffer and hands the buffer over a channel
//! when it fills (or once a second), so a VU holds a few KiB at most and never waits on
//! another. One aggregator per round owns the histograms: per operation label an
//! HdrHistogram of successful latencies in microseconds (one fixed range everywhere, values
//! beyond it clamped and counted), request/success/failure counts, counts by answer (an HTTP
//! status or a protocol's named answer, see `crate::answer`) and by error class, bytes both ways, and a per-second timeline. Samples that start inside the
//! warm-up are counted apart and kept out of the statistics.

use std::collections::BTreeMap;
use std::time::Duration;

use hdrhistogram::Histogram;
use tokio::sync::mpsc;

use crate::answer::Answer;
use crate::transport::ErrorClass;

pub(crate) mod live;
pub(crate) mod windows;
pub(crate) use live::{Counted, Live};

/// Histogram range: 1 µs to 1 hour, 3 significant digits. Every histogram in loadmix uses
/// it, so any two can be added (HdrHistogram refuses to add across ranges).
pub(crate) const HIST_LOW: u64 = 1;
pub(crate) const HIST_HIGH: u64 = 3_600_000_000;
pub(crate) const HIST_SIGFIG: u8 = 3;

pub(crate) fn new_histogram() -> Histogram<u64> {
    // The bounds are constants known to be valid.
    Histogram::new_with_bounds(HIST_LOW, HIST_HIGH, HIST_SIGFIG).expect("valid histogram bounds")
}

/// One finished operation.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Sample {
    /// Global label index (see [`LabelTable`]).
    pub label: u32,
    /// Start, in microseconds since the round began.
    pub start_us: u64,
    pub latency_us: u64,
    /// The answer to the last request, `Answer::NONE` when none arrived.
    pub answer: Answer,
    /// Answers to earlier requests of the same operation (a rejected sync token, an
    /// authentication challenge, the fetches after a sync's listing), each with how many
    /// times it came; [`NO_PRIOR`] where there was none.
    pub prior: [(Answer, u32); PRIOR_ANSWERS],
    pub error: Option<ErrorClass>,
    pub bytes_sent: u64,
    pub bytes_received: u64,
    /// From the operation's intended start (its scheduled arrival, pacing slot or the end
    /// of its think time) to its end: the latency a user waiting on a schedule sees.
    pub corrected_us: u64,
    /// How late the generator started the operation against its intended start.
    pub lag_us: u64,
    /// The class runs on a schedule (open model or pacing): its corrected latency is
    /// reported beside the service time.
    pub scheduled: bool,
    /// A new connection was opened for it: the TCP connect time (µs), part of the latency.
    pub connect_us: Option<u32>,
    /// And the TLS handshake on it (µs), for https.
    pub tls_us: Option<u32>,
    /// That handshake resumed an earlier session.
    pub tls_resumed: bool,
    /// One step of an operation made of steps: counted under its own label only (not a
    /// warm-up operation, no scheduling lag of its own).
    pub step: bool,
    /// A pick that could not act (nothing of its kind to act on): nothing was sent, and
    /// it is counted apart, under the operation that was picked, never as a request.
    pub skipped: bool,
    /// The label of the operation picked from the table, which `label` may refine (a
    /// sync reported as `sync_no_change`); [`NO_PICK`] for a bootstrap or a step.
    pub pick: u32,
}

/// [`Sample::pick`] of a sample that is no pick from the table.
pub(crate) const NO_PICK: u32 = u32::MAX;

impl Sample {
    /// Not a pick from the table nor a step: what a user made of its own first (a
    /// collection), recorded under the operation it is and told apart from its picks.
    pub(crate) fn is_bootstrap(&self) -> bool {
        !self.step && self.pick == NO_PICK
    }

    /// A pick of `label` at `start_us` that sent nothing.
    pub(crate) fn skipped(label: u32, start_us: u64) -> Sample {
        Sample {
            label,
            start_us,
            latency_us: 0,
            answer: Answer::NONE,
            prior: [NO_PRIOR; PRIOR_ANSWERS],
            error: None,
            bytes_sent: 0,
            bytes_received: 0,
            corrected_us: 0,
            lag_us: 0,
            scheduled: false,
            connect_us: None,
            tls_us: None,
            tls_resumed: false,
            step: false,
            skipped: true,
            pick: label,
        }
    }
}

/// The different answers to earlier requests of one operation a sample carries, each with
/// its count: a challenge, a resync, a challenge of the resync, a sync's fetches (however
/// many, one entry while they all answer alike); the steps of a sequence (at most
/// `MAX_STEPS`, each possibly challenged).
pub(crate) const PRIOR_ANSWERS: usize = 8;

/// An empty entry of [`Sample::prior`].
pub(crate) const NO_PRIOR: (Answer, u32) = (Answer::NONE, 0);

/// Samples per hand-over: large enough to make the channel cost negligible, small enough
/// that 100,000 VUs do not hold much memory.
const BATCH: usize = 128;
/// Hand over at least this often, so a slow VU's samples are not stuck in its buffer.
const FLUSH_EVERY: Duration = Duration::from_secs(1);

/// A VU's private recorder.
pub(crate) struct Recorder {
    buf: Vec<Sample>,
    tx: mpsc::UnboundedSender<Vec<Sample>>,
    last_flush: tokio::time::Instant,
}

impl Recorder {
    pub(crate) fn record(&mut self, s: Sample, now: tokio::time::Instant) {
        if self.buf.capacity() == 0 {
            self.buf.reserve_exact(BATCH);
        }
        self.buf.push(s);
        if self.buf.len() >= BATCH || now.duration_since(self.last_flush) >= FLUSH_EVERY {
            self.flush_at(now);
        }
    }

    fn flush_at(&mut self, now: tokio::time::Instant) {
        self.last_flush = now;
        if !self.buf.is_empty() {
            // The aggregator outlives every recorder of its round; a send can only fail
            // after a panic elsewhere, and then there is nobody to report to.
            let _ = self.tx.send(std::mem::take(&mut self.buf));
        }
    }

    pub(crate) fn flush(&mut self) {
        self.flush_at(tokio::time::Instant::now());
    }

    /// Before a user waits (think time, pacing): hand over what it holds, so its samples
    /// reach the aggregator within about one operation of their end, not one think time.
    pub(crate) fn flush_before_wait(&mut self, wait: Duration) {
        if wait >= Duration::from_millis(100) && !self.buf.is_empty() {
            self.flush();
        }
    }
}

impl Drop for Recorder {
    fn drop(&mut self) {
        self.flush();
    }
}

/// Maps (class, label) to the flat index samples carry.
#[derive(Debug, Clone)]
pub(crate) struct LabelTable {
    /// Per class: its name and its labels.
    pub classes: Vec<(String, Vec<String>)>,
    offsets: Vec<u32>,
}

impl LabelTable {
    pub(crate) fn new(classes: Vec<(String, Vec<String>)>) -> LabelTable {
        let mut offsets = Vec::with_capacity(classes.len());
        let mut n = 0u32;
        for (_, labels) in &classes {
            offsets.push(n);
            n += labels.len() as u32;
        }
        LabelTable { classes, offsets }
    }
    pub(crate) fn index(&self, class: usize, label: usize) -> u32 {
        self.offsets[class] + label as u32
    }
    /// (class index, class name, label) of each flat index, in order.
    pub(crate) fn iter(&self) -> impl Iterator<Item = (usize, &str, &str)> {
        self.classes
            .iter()
            .enumerate()
            .flat_map(|(ci, (c, labels))| labels.iter().map(move |l| (ci, c.as_str(), l.as_str())))
    }
}

/// Everything measured about one label in one round (or merged over rounds).
#[derive(Debug, Clone)]
pub(crate) struct OpStats {
    pub requests: u64,
    /// Picks of this operation that could not act and sent nothing.
    pub skipped: u64,
    /// Of the requests, those that were a user's bootstrap rather than a pick.
    pub bootstraps: u64,
    /// Picks of this operation that sent a request, whatever label their answer was
    /// counted under (a sync picked and reported as `sync_no_change` is a sync's pick).
    pub picked: u64,
    pub successes: u64,
    pub failures: u64,
    /// Answers by what they were: HTTP statuses first, in order, then named answers.
    pub by_answer: BTreeMap<Answer, u64>,
    pub by_error: [u64; ErrorClass::COUNT],
    pub bytes_sent: u64,
    pub bytes_received: u64,
    /// Latency of successful operations, µs.
    pub latency: Histogram<u64>,
    /// Latency from the intended start (coordinated-omission corrected), scheduled classes.
    pub latency_corrected: Histogram<u64>,
    pub scheduled: bool,
    /// Latencies above the histogram's range, recorded at its maximum.
    pub clamped: u64,
    /// Exact sums for mean and standard deviation (the histogram's are bucketed).
    pub sum_us: f64,
    pub sum_sq_us: f64,
    /// Per second since the round started: requests, successes, failures, latency sum (µs).
    pub timeline: Vec<TimelineBucket>,
    /// TCP connect times of the new connections operations opened (µs), as k6's
    /// `http_req_connecting`: a slow connect is not a slow server.
    pub connecting: Histogram<u64>,
    /// TLS handshake times on them (µs), as k6's `http_req_tls_handshaking`.
    pub tls_handshaking: Histogram<u64>,
    /// How many of those handshakes resumed an earlier session.
    pub tls_resumed: u64,
    /// Answers put in doubt: bytes nobody asked for turned up after them on their
    /// connection, so each may have been a stray answer to an earlier request.
    pub in_doubt: u64,
    /// The label is a step of an operation, or a figure reported apart (an end-to-end
    /// latency): left out of totals, which count each operation once.
    pub step: bool,
}

#[derive(Debug, Clone, Copy, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct TimelineBucket {
    pub requests: u64,
    pub successes: u64,
    pub failures: u64,
    pub latency_sum_us: u64,
}

impl Default for OpStats {
    fn default() -> Self {
        OpStats {
            requests: 0,
            skipped: 0,
            bootstraps: 0,
            picked: 0,
            successes: 0,
            failures: 0,
            by_answer: BTreeMap::new(),
            by_error: [0; ErrorClass::COUNT],
            bytes_sent: 0,
            bytes_received: 0,
            latency: new_histogram(),
            latency_corrected: new_histogram(),
            scheduled: false,
            clamped: 0,
            sum_us: 0.0,
            sum_sq_us: 0.0,
            timeline: Vec::new(),
            connecting: new_histogram(),
            tls_handshaking: new_histogram(),
            tls_resumed: 0,
            in_doubt: 0,
            step: false,
        }
    }
}

impl OpStats {
    pub(crate) fn record(&mut self, s: &Sample) {
        self.requests += 1;
        self.bootstraps += u64::from(s.is_bootstrap());
        self.step |= s.step;
        for &(a, n) in s
            .prior
            .iter()
            .chain([&(s.answer, 1)])
            .filter(|(a, _)| !a.is_none())
        {
            *self.by_answer.entry(a).or_insert(0) += u64::from(n);
        }
        self.bytes_sent += s.bytes_sent;
        self.bytes_received += s.bytes_received;
        self.record_timeline(s);
        if let Some(c) = s.connect_us {
            let _ = self
                .connecting
                .record(u64::from(c).clamp(HIST_LOW, HIST_HIGH));
        }
        if let Some(t) = s.tls_us {
            let _ = self
                .tls_handshaking
                .record(u64::from(t).clamp(HIST_LOW, HIST_HIGH));
            self.tls_resumed += u64::from(s.tls_resumed);
        }
        match s.error {
            None => {
                self.successes += 1;
                let v = if s.latency_us > HIST_HIGH {
                    self.clamped += 1;
                    HIST_HIGH
                } else {
                    s.latency_us
                };
                // In range by construction.
                let _ = self.latency.record(v);
                if s.scheduled {
                    self.scheduled = true;
                    let _ = self
                        .latency_corrected
                        .record(s.corrected_us.clamp(HIST_LOW, HIST_HIGH));
                }
                let f = s.latency_us as f64;
                self.sum_us += f;
                self.sum_sq_us += f * f;
            }
            Some(e) => {
                self.failures += 1;
                self.by_error[e.index()] += 1;
            }
        }
    }

    /// Count a sample in its second of the round (seconds since the round started).
    fn record_timeline(&mut self, s: &Sample) {
        let sec = (s.start_us / 1_000_000) as usize;
        if self.timeline.len() <= sec {
            self.timeline.resize(sec + 1, TimelineBucket::default());
        }
        let bucket = &mut self.timeline[sec];
        bucket.requests += 1;
        match s.error {
            None => {
                bucket.successes += 1;
                bucket.latency_sum_us += s.latency_us;
            }
            Some(_) => bucket.failures += 1,
        }
    }

    /// Add another round's (or label's) figures to these. The timelines are added second by
    /// second.
    pub(crate) fn merge(&mut self, other: &OpStats) {
        self.requests += other.requests;
        self.skipped += other.skipped;
        self.bootstraps += other.bootstraps;
        self.picked += other.picked;
        self.successes += other.successes;
        self.failures += other.failures;
        for (k, v) in &other.by_answer {
            *self.by_answer.entry(*k).or_insert(0) += v;
        }
        for i in 0..ErrorClass::COUNT {
            self.by_error[i] += other.by_error[i];
        }
        self.bytes_sent += other.bytes_sent;
        self.bytes_received += other.bytes_received;
        // Same bounds everywhere, so adding cannot fail.
        let _ = self.latency.add(&other.latency);
        let _ = self.latency_corrected.add(&other.latency_corrected);
        let _ = self.connecting.add(&other.connecting);
        let _ = self.tls_handshaking.add(&other.tls_handshaking);
        self.tls_resumed += other.tls_resumed;
        self.in_doubt += other.in_doubt;
        self.step |= other.step;
        self.scheduled |= other.scheduled;
        self.clamped += other.clamped;
        self.sum_us += other.sum_us;
        self.sum_sq_us += other.sum_sq_us;
        if self.timeline.len() < other.timeline.len() {
            self.timeline
                .resize(other.timeline.len(), TimelineBucket::default());
        }
        for (a, b) in self.timeline.iter_mut().zip(&other.timeline) {
            a.requests += b.requests;
            a.successes += b.successes;
            a.failures += b.failures;
            a.latency_sum_us += b.latency_sum_us;
        }
    }

    /// Mean latency of successes, µs (exact).
    pub(crate) fn mean_us(&self) -> f64 {
        if self.successes == 0 {
            0.0
        } else {
            self.sum_us / self.successes as f64
        }
    }

    /// Population standard deviation of successful latencies, µs (as the 2007 report).
    pub(crate) fn stddev_us(&self) -> f64 {
        if self.successes == 0 {
            return 0.0;
        }
        let n = self.successes as f64;
        let mean = self.sum_us / n;
        (self.sum_sq_us / n - mean * mean).max(0.0).sqrt()
    }
}

/// The figures of one round: per label, plus what was left out as warm-up.
#[derive(Debug, Clone)]
pub(crate) struct RoundStats {
    pub ops: Vec<OpStats>,
    pub warmup_requests: u64,
    /// Scheduling lag of every operation (µs): how late the generator started it.
    pub lag: Histogram<u64>,
    /// The same, per class (by class index).
    pub class_lag: Vec<Histogram<u64>>,
    /// Second by second over all operations (warm-up included, steps left out).
    pub seconds: Vec<Second>,
    /// Successes that arrived after their second's percentiles were taken: counted
    /// everywhere else, missing only from `seconds`' percentiles.
    pub seconds_late: u64,
    /// The round's fault windows as scheduled, and what each did to the operations.
    pub windows: Vec<windows::WindowStats>,
}

impl RoundStats {
    pub(crate) fn empty() -> RoundStats {
        RoundStats {
            ops: Vec::new(),
            warmup_requests: 0,
            lag: new_histogram(),
            class_lag: Vec::new(),
            seconds: Vec::new(),
            seconds_late: 0,
            windows: Vec::new(),
        }
    }
}

/// One second of a round over all operations: what latency, errors and concurrency over
/// time are drawn from. Percentiles do not add, so they are kept here, per round, rather
/// than in each label's timeline.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub(crate) struct Second {
    /// Latency percentiles of the successes that started in this second (µs; two
    /// significant digits), `None` when none did.
    pub p50_us: Option<u64>,
    pub p99_us: Option<u64>,
    /// Failures that started in this second, by error class (`ErrorClass::index`).
    pub errors: [u64; ErrorClass::COUNT],
    /// Time operations spent in flight within this second (µs): divided by a second, the
    /// mean number of operations in flight.
    pub busy_us: u64,
    /// The successes that started in this second by latency, in the buckets of
    /// [`HEAT_BOUNDS_US`] (the last holds those above every bound): a heat map's column.
    pub heat: [u32; HEAT_BUCKETS],
}

/// Upper bounds of a heat map's latency rows, µs: 1, 2 and 5 of every decade from 10 µs to
/// 50 s, fine enough to show two modes a factor of 2 apart, coarse enough for a chart.
pub(crate) const HEAT_BOUNDS_US: [u64; 21] = [
    10, 20, 50, 100, 200, 500, 1_000, 2_000, 5_000, 10_000, 20_000, 50_000, 100_000, 200_000,
    500_000, 1_000_000, 2_000_000, 5_000_000, 10_000_000, 20_000_000, 50_000_000,
];
pub(crate) const HEAT_BUCKETS: usize = HEAT_BOUNDS_US.len() + 1;

/// Precision of the per-second histograms: enough for a chart, small enough (13 KiB) to
/// keep a few minutes of seconds open at once.
const SECOND_SIGFIG: u8 = 2;

/// Builds [`Second`]s from samples that may arrive out of order. A second's histogram stays
/// open while samples for it can still come: a sample reaches the aggregator at most about
/// two request timeouts after its start (its own latency, then the next operation of the
/// same user before the buffer is handed over). Older seconds are reduced to their
/// percentiles so a long round holds a bounded number of histograms; a sample later still
/// is counted in `late` and left out of the percentiles only.
struct Seconds {
    done: Vec<Second>,
    open: BTreeMap<usize, Histogram<u32>>,
    /// Seconds before this one are closed.
    closed_below: usize,
    window: usize,
    late: u64,
}

impl Seconds {
    fn new(window: Duration) -> Seconds {
        Seconds {
            done: Vec::new(),
            open: BTreeMap::new(),
            closed_below: 0,
            window: usize::try_from(window.as_secs())
                .unwrap_or(usize::MAX)
                .max(10),
            late: 0,
        }
    }

    fn at(&mut self, sec: usize) -> &mut Second {
        if self.done.len() <= sec {
            self.done.resize(sec + 1, Second::default());
        }
        &mut self.done[sec]
    }

    fn record(&mut self, s: &Sample) {
        // A start beyond any real round (a corrupt clock) must not size a vector.
        const MAX_SECONDS: u64 = 366 * 24 * 3600;
        let sec_u = s.start_us / 1_000_000;
        if sec_u >= MAX_SECONDS {
            return;
        }
        let sec = sec_u as usize;
        // Spread the operation's time over the seconds it spanned.
        let end = s
            .start_us
            .saturating_add(s.latency_us)
            .min(MAX_SECONDS * 1_000_000);
        let mut t = s.start_us;
        while t < end {
            let next = (t / 1_000_000 + 1) * 1_000_000;
            let upto = next.min(end);
            self.at((t / 1_000_000) as usize).busy_us += upto - t;
            t = upto;
        }
        let second = self.at(sec);
        match s.error {
            Some(e) => second.errors[e.index()] += 1,
            None if sec < self.closed_below => self.late += 1,
            None => {
                let h = self.open.entry(sec).or_insert_with(|| {
                    Histogram::new_with_bounds(HIST_LOW, HIST_HIGH, SECOND_SIGFIG)
                        .expect("valid histogram bounds")
                });
                // Saturating: a u32 count overflows only past 4 billion in one second.
                h.saturating_record(s.latency_us.clamp(HIST_LOW, HIST_HIGH));
                let newest = sec;
                while let Some((&first, _)) = self.open.first_key_value() {
                    if first.saturating_add(self.window) >= newest {
                        break;
                    }
                    self.close(first);
                }
            }
        }
    }

    fn close(&mut self, sec: usize) {
        if let Some(h) = self.open.remove(&sec) {
            let second = self.at(sec);
            second.p50_us = Some(h.value_at_quantile(0.5));
            second.p99_us = Some(h.value_at_quantile(0.99));
            second.heat = heat_of(&h);
        }
        self.closed_below = self.closed_below.max(sec + 1);
    }

    fn finish(mut self) -> (Vec<Second>, u64) {
        let keys: Vec<usize> = self.open.keys().copied().collect();
        for k in keys {
            self.close(k);
        }
        (self.done, self.late)
    }
}

/// A second's histogram as counts per heat map row. HdrHistogram's buckets are finer than
/// the rows, so each of its values is counted in the row its value falls in.
fn heat_of(h: &Histogram<u32>) -> [u32; HEAT_BUCKETS] {
    let mut rows = [0u32; HEAT_BUCKETS];
    for v in h.iter_recorded() {
        let row = HEAT_BOUNDS_US.partition_point(|&b| b < v.value_iterated_to());
        let n = v.count_at_value();
        rows[row] = rows[row].saturating_add(n);
    }
    rows
}

/// Start a round's aggregator. Returns the sender VUs' recorders are built from, and the
/// task that yields the round's figures once every recorder is dropped.
///
/// `timeout` is the request timeout: how long a second's percentiles must wait for late
/// samples (see [`Seconds`]).
pub(crate) fn aggregator(
    class_of: Vec<usize>,
    warmup: Duration,
    timeout: Duration,
    live: Option<(std::sync::Arc<Live>, bool)>,
    faults: &[(Duration, Duration, Duration)],
    ends: std::sync::Arc<windows::Ends>,
) -> (RecorderFactory, tokio::task::JoinHandle<RoundStats>) {
    let (tx, mut rx) = mpsc::unbounded_channel::<Vec<Sample>>();
    let warmup_us = warmup.as_micros() as u64;
    let us = |d: &Duration| d.as_micros() as u64;
    let spans: Vec<(u64, u64, u64)> = faults
        .iter()
        .map(|(f, a, b)| (us(f), us(a), us(b)))
        .collect();
    let handle = tokio::spawn(async move {
        let classes = class_of.iter().max().map_or(0, |c| c + 1);
        let mut stats = RoundStats {
            ops: class_of.iter().map(|_| OpStats::default()).collect(),
            class_lag: (0..classes).map(|_| new_histogram()).collect(),
            windows: windows::WindowStats::scheduled(&spans, warmup_us),
            ..RoundStats::empty()
        };
        let mut seconds = Seconds::new(
            timeout
                .saturating_mul(2)
                .saturating_add(Duration::from_secs(5)),
        );
        while let Some(batch) = rx.recv().await {
            for s in &batch {
                // One warm-up rule for the round's figures and the live ones: what starts
                // in the warm-up window is kept out of both.
                let in_warmup = s.start_us < warmup_us;
                if let Some((live, warmup_round)) = &live {
                    let counted = match *warmup_round || in_warmup {
                        true => Counted::Warmup,
                        false => Counted::Measured,
                    };
                    match s.skipped {
                        true => live.skip(s, counted),
                        false => live.add(s, counted),
                    }
                }
                if s.skipped {
                    // Nothing went on the wire: no lag, no second, no request.
                    if let Some(op) = stats.ops.get_mut(s.label as usize)
                        && !in_warmup
                    {
                        op.skipped += 1;
                    }
                    continue;
                }
                if !s.step {
                    let lag = s.lag_us.clamp(HIST_LOW, HIST_HIGH);
                    let _ = stats.lag.record(lag);
                    if let Some(h) = class_of
                        .get(s.label as usize)
                        .and_then(|&c| stats.class_lag.get_mut(c))
                    {
                        let _ = h.record(lag);
                    }
                    seconds.record(s);
                    for (k, w) in stats.windows.iter_mut().enumerate() {
                        w.record(s, ends.of(k));
                    }
                }
                if !in_warmup
                    && s.pick != NO_PICK
                    && let Some(picked) = stats.ops.get_mut(s.pick as usize)
                {
                    picked.picked += 1;
                }
                let Some(op) = stats.ops.get_mut(s.label as usize) else {
                    continue;
                };
                if in_warmup {
                    // Kept out of the statistics, but on the timeline: warm-up effects
                    // must be visible.
                    stats.warmup_requests += u64::from(!s.step);
                    op.record_timeline(s);
                    continue;
                }
                op.record(s);
            }
        }
        (stats.seconds, stats.seconds_late) = seconds.finish();
        stats
    });
    (RecorderFactory { tx }, handle)
}

/// Hands out recorders for one round.
#[derive(Clone)]
pub(crate) struct RecorderFactory {
    tx: mpsc::UnboundedSender<Vec<Sample>>,
}

impl RecorderFactory {
    pub(crate) fn recorder(&self) -> Recorder {
        Recorder {
            buf: Vec::new(),
            tx: self.tx.clone(),
            last_flush: tokio::time::Instant::now(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A sample for the tests of this module and its children; a failure answers 500.
    pub(super) fn sample(
        label: u32,
        start_us: u64,
        latency_us: u64,
        error: Option<ErrorClass>,
    ) -> Sample {
        Sample {
            label,
            start_us,
            latency_us,
            answer: Answer::http(if error.is_none() { 200 } else { 500 }),
            prior: [NO_PRIOR; PRIOR_ANSWERS],
            error,
            bytes_sent: 10,
            bytes_received: 20,
            corrected_us: latency_us,
            lag_us: 0,
            scheduled: false,
            connect_us: None,
            tls_us: None,
            tls_resumed: false,
            step: false,
            skipped: false,
            // A pick of its own label; a test sets another, or none for a bootstrap.
            pick: label,
        }
    }

    #[tokio::test]
    async fn aggregates_counts_latency_timeline_and_warmup() {
        let (factory, handle) = aggregator(
            vec![0, 0],
            Duration::from_secs(1),
            Duration::from_secs(60),
            None,
            &[],
            std::sync::Arc::new(windows::Ends::new(0)),
        );
        let mut r = factory.recorder();
        let now = tokio::time::Instant::now();
        r.record(sample(0, 500_000, 1_000, None), now); // warm-up: left out
        r.record(sample(0, 1_200_000, 2_000, None), now);
        r.record(sample(0, 2_500_000, 4_000, None), now);
        r.record(sample(1, 1_100_000, 9, Some(ErrorClass::Status)), now);
        r.record(sample(1, 1_100_000, HIST_HIGH * 2, None), now);
        // Picks that sent nothing: counted apart, one in the warm-up left out.
        r.record(Sample::skipped(0, 400_000), now);
        r.record(Sample::skipped(0, 1_300_000), now);
        r.record(Sample::skipped(0, 2_300_000), now);
        drop(factory);
        drop(r);
        let stats = handle.await.unwrap();
        assert_eq!(
            stats.warmup_requests, 1,
            "a skipped pick is no warm-up request"
        );
        let a = &stats.ops[0];
        assert_eq!((a.requests, a.successes, a.failures), (2, 2, 0));
        assert_eq!(a.skipped, 2);
        assert_eq!(stats.lag.len(), 5, "no lag for what was never sent");
        assert_eq!(a.mean_us(), 3000.0);
        assert_eq!(a.stddev_us(), 1000.0);
        assert_eq!(
            a.timeline.len(),
            3,
            "seconds 0 to 2 of the round, warm-up included"
        );
        assert_eq!(
            a.timeline[0].requests, 1,
            "the warm-up sample is on the timeline"
        );
        assert_eq!(a.timeline[2].requests, 1);
        let b = &stats.ops[1];
        assert_eq!(b.by_error[ErrorClass::Status.index()], 1);
        assert_eq!(b.by_answer[&Answer::http(500)], 1);
        assert_eq!(b.clamped, 1);
        assert_eq!(b.bytes_received, 40);
    }

    #[tokio::test]
    async fn a_pick_counts_under_the_operation_picked_whatever_its_answers_label() {
        let (factory, handle) = aggregator(
            vec![0, 0],
            Duration::ZERO,
            Duration::from_secs(60),
            None,
            &[],
            std::sync::Arc::new(windows::Ends::new(0)),
        );
        let mut r = factory.recorder();
        let now = tokio::time::Instant::now();
        // Operation 0 picked, its answer counted under label 1 (a sync reported as
        // sync_no_change); then a bootstrap under label 0, which is no pick.
        let mut refined = sample(1, 10, 1_000, None);
        refined.pick = 0;
        r.record(refined, now);
        let mut boot = sample(0, 20, 1_000, None);
        boot.pick = NO_PICK;
        r.record(boot, now);
        drop(factory);
        drop(r);
        let stats = handle.await.unwrap();
        assert_eq!((stats.ops[0].picked, stats.ops[0].requests), (1, 1));
        assert_eq!((stats.ops[1].picked, stats.ops[1].requests), (0, 1));
        assert_eq!(stats.ops[0].bootstraps, 1);
    }

    #[test]
    fn seconds_take_percentiles_errors_and_time_in_flight() {
        let mut secs = Seconds::new(Duration::from_secs(10));
        // Second 0: 100 successes of 1..=100 ms, arriving out of order with second 1's.
        for i in (1..=100u64).rev() {
            secs.record(&sample(0, 10_000 * i, i * 1_000, None));
            secs.record(&sample(0, 1_000_000 + i, 5_000, None));
        }
        // A failure in second 2, and an operation from 2.5 s lasting 1.5 s: in flight for
        // 0.5 s of second 2 and 1 s of second 3.
        secs.record(&sample(0, 2_100_000, 10, Some(ErrorClass::Timeout)));
        secs.record(&sample(0, 2_500_000, 1_500_000, None));
        let (done, late) = secs.finish();
        assert_eq!(late, 0);
        assert_eq!(done.len(), 4);
        let p50 = done[0].p50_us.unwrap();
        assert!((49_000..=51_000).contains(&p50), "{p50}");
        let p99 = done[0].p99_us.unwrap();
        assert!((98_000..=100_500).contains(&p99), "{p99}");
        assert_eq!(done[1].p50_us.map(|v| v / 100), Some(50));
        assert_eq!(done[2].errors[ErrorClass::Timeout.index()], 1);
        assert_eq!(done[2].busy_us, 10 + 500_000);
        assert_eq!(done[3].busy_us, 1_000_000);
        assert_eq!(
            done[3].p50_us, None,
            "the long operation started in second 2"
        );
        assert!(done[2].p50_us.unwrap() >= 1_490_000);
    }

    #[test]
    fn seconds_close_behind_a_window_and_count_what_comes_later() {
        let mut secs = Seconds::new(Duration::from_secs(10));
        secs.record(&sample(0, 0, 1_000, None));
        // Eleven seconds on, second 0 is closed…
        secs.record(&sample(0, 11_000_000, 1_000, None));
        assert!(secs.open.len() == 1 && secs.closed_below == 1);
        // …so a success for it arriving now is counted as late, a failure still counted.
        secs.record(&sample(0, 500_000, 2_000, None));
        secs.record(&sample(0, 600_000, 2_000, Some(ErrorClass::Reset)));
        let (done, late) = secs.finish();
        assert_eq!(late, 1);
        assert_eq!(done[0].p50_us.map(|v| v / 10), Some(100));
        assert_eq!(done[0].errors[ErrorClass::Reset.index()], 1);
        assert_eq!(done[0].busy_us, 5_000);
        // A start no round can have is ignored rather than sizing a vector.
        let mut secs = Seconds::new(Duration::from_secs(10));
        secs.record(&sample(0, u64::MAX - 5, 10, None));
        assert!(secs.finish().0.is_empty());
    }

    #[test]
    fn merge_adds_everything() {
        let mut a = OpStats::default();
        a.record(&sample(0, 0, 100, None));
        let mut b = OpStats::default();
        b.record(&sample(0, 3_000_000, 300, None));
        b.record(&sample(0, 0, 1, Some(ErrorClass::Reset)));
        a.merge(&b);
        assert_eq!((a.requests, a.successes, a.failures), (3, 2, 1));
        assert_eq!(a.latency.len(), 2);
        assert_eq!(a.timeline.len(), 4);
        assert_eq!(a.timeline[0].requests, 2);
    }
}
