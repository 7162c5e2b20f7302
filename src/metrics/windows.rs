//! What a round's fault windows did to its operations, gathered as the samples arrive:
//! per window, the operations that started before, during and after it (latency of the
//! successes, failures by class, connections opened), the successes that ended in each
//! part, 100 ms ticks from its begin to two minutes past its end (successes started and
//! ended, and the latency of those started in coarse buckets) for the dip and
//! recovery, and the few samples that could be the first to show
//! the fault (the earliest-starting, longest-lasting ones). The windows are the ones
//! scheduled, known before the round's clock starts, each lasting until the timeline
//! says it ended ([`Ends`]: a kill's ends when the server is ready again, a command's when
//! its undo is done); what they mean is worked out by the report (`report::faults`),
//! which alone knows the band and hold.

use std::sync::atomic::{AtomicU64, Ordering};

use hdrhistogram::Histogram;

use super::{HIST_HIGH, HIST_LOW, Sample, new_histogram};
use crate::transport::ErrorClass;

/// A tick of the recovery timeline, µs.
pub(crate) const TICK_US: u64 = 100_000;
/// Ticks kept past a window's scheduled end (how long a recovery can be seen to take, and
/// a kill's server to come back).
pub(crate) const TICKS_AFTER: u64 = 1_200;
/// Latency buckets of a tick: bucket `k` holds latencies below 2^((k+1)/4) µs.
pub(crate) const TICK_BUCKETS: usize = 128;
/// The most candidate first-to-show samples kept per window.
const MAX_FRONTIER: usize = 4_096;

/// The upper bound of tick bucket `k`, µs.
pub(crate) fn bucket_bound_us(k: usize) -> f64 {
    2f64.powf((k as f64 + 1.0) / 4.0)
}

fn bucket_of(latency_us: u64) -> usize {
    let l = (latency_us.max(1)) as f64;
    ((l.log2() * 4.0).floor() as usize).min(TICK_BUCKETS - 1)
}

/// When each window of a round ended, on the round's clock (µs), as the timeline says
/// it: until it does, a window is still on, and an operation that started after its
/// scheduled end is still during it.
#[derive(Debug)]
pub(crate) struct Ends {
    us: Vec<AtomicU64>,
}

impl Ends {
    /// For a round of `n` windows, none ended.
    pub(crate) fn new(n: usize) -> Ends {
        Ends {
            us: (0..n).map(|_| AtomicU64::new(u64::MAX)).collect(),
        }
    }

    /// Window `k` (in order of begin) ended at `us`.
    pub(crate) fn set(&self, k: usize, us: u64) {
        if let Some(e) = self.us.get(k) {
            e.store(us.min(u64::MAX - 1), Ordering::Release);
        }
    }

    /// When window `k` ended; `None` while it is on (or never began).
    pub(crate) fn of(&self, k: usize) -> Option<u64> {
        let e = self.us.get(k)?.load(Ordering::Acquire);
        (e != u64::MAX).then_some(e)
    }
}

/// One part of a window (before, during or after it, or the seconds it is held against),
/// by the time operations started.
#[derive(Debug, Clone)]
pub(crate) struct Part {
    /// Its span on the round's clock, µs: `[from_us, to_us)`; `to_us` is `u64::MAX` for
    /// the part after the last window (the round's end).
    pub from_us: u64,
    pub to_us: u64,
    /// Latency of the successes that started in it.
    pub latency: Histogram<u64>,
    /// Failures that started in it, by class (`ErrorClass::index`).
    pub errors: [u64; ErrorClass::COUNT],
    /// Operations that opened a new connection.
    pub opened: u64,
    /// Successes that ended in it (whenever they started).
    pub ended_ok: u64,
}

impl Part {
    fn new(from_us: u64, to_us: u64) -> Part {
        Part {
            from_us,
            to_us,
            latency: new_histogram(),
            errors: [0; ErrorClass::COUNT],
            opened: 0,
            ended_ok: 0,
        }
    }

    /// Operations that started in it.
    pub(crate) fn started(&self) -> u64 {
        self.latency.len() + self.errors.iter().sum::<u64>()
    }

    fn holds(&self, t_us: u64) -> bool {
        t_us >= self.from_us && t_us < self.to_us
    }
}

/// One tick of the recovery timeline.
#[derive(Debug, Clone)]
pub(crate) struct Tick {
    /// Successes that started in it.
    pub ok: u32,
    /// Successes that ended in it.
    pub ended_ok: u32,
    /// The successes that started in it, by latency bucket (made at the first).
    pub buckets: Option<Box<[u32; TICK_BUCKETS]>>,
}

/// One window and what its samples did.
#[derive(Debug, Clone)]
pub(crate) struct WindowStats {
    /// Scheduled begin and end on the round's clock, µs.
    pub at_us: u64,
    pub end_us: u64,
    /// Before (from the window before's end, or the warm-up's), during and after (to the
    /// next window's begin, or the round's end).
    pub parts: [Part; 3],
    /// The seconds before it that it is held against: from once the window before has
    /// settled (its end and the recovery hold), so that they are not its recovery, to its
    /// begin; only the operations over by then.
    pub baseline: Part,
    /// The first tick's start, µs (a multiple of [`TICK_US`]).
    pub ticks_from_us: u64,
    pub ticks: Vec<Tick>,
    /// Samples that were in flight at or after the window's begin, none of which both
    /// started earlier and lasted longer than another: start and latency, µs, by start.
    pub frontier: Vec<(u64, u64)>,
    /// The earliest end of a failure in flight at or after the begin, µs.
    pub first_failure_end_us: Option<u64>,
}

impl WindowStats {
    /// Windows scheduled at `spans` (the start of the seconds before each that it is
    /// held against, its begin, its end, µs, in order of begin), in a round whose
    /// measured seconds start at `measured_from_us`.
    pub(crate) fn scheduled(spans: &[(u64, u64, u64)], measured_from_us: u64) -> Vec<WindowStats> {
        spans
            .iter()
            .enumerate()
            .map(|(i, &(settled, at, end))| {
                let from = match i {
                    0 => measured_from_us,
                    _ => spans[i - 1].2,
                }
                .min(at);
                let to = spans.get(i + 1).map_or(u64::MAX, |n| n.1);
                let ticks_from_us = at / TICK_US * TICK_US;
                let n = ((end - ticks_from_us) / TICK_US + 1 + TICKS_AFTER) as usize;
                WindowStats {
                    at_us: at,
                    end_us: end,
                    parts: [Part::new(from, at), Part::new(at, end), Part::new(end, to)],
                    baseline: Part::new(settled.min(at), at),
                    ticks_from_us,
                    ticks: (0..n)
                        .map(|_| Tick {
                            ok: 0,
                            ended_ok: 0,
                            buckets: None,
                        })
                        .collect(),
                    frontier: Vec::new(),
                    first_failure_end_us: None,
                }
            })
            .collect()
    }

    /// Add one sample (not a step, not a skipped pick); `ended` is when the window
    /// ended, `None` while it is still on.
    pub(crate) fn record(&mut self, s: &Sample, ended: Option<u64>) {
        // During lasts from the begin to the window's end as it happened: an operation
        // that started after the end as scheduled but while the server was still down is
        // the fault's. One that starts after the end arrives only once the end is known.
        let end_us = ended.map_or(u64::MAX, |e| e.max(self.at_us));
        self.parts[1].to_us = end_us;
        self.parts[2].from_us = end_us;
        let end = s.start_us.saturating_add(s.latency_us);
        // What a window is held against are the operations over before it began: one in
        // flight at its begin may carry the fault already.
        let settled = (end < self.at_us).then_some(&mut self.baseline);
        for p in self.parts.iter_mut().chain(settled) {
            if p.holds(s.start_us) {
                match s.error {
                    None => {
                        let _ = p.latency.record(s.latency_us.clamp(HIST_LOW, HIST_HIGH));
                    }
                    Some(c) => p.errors[c.index()] += 1,
                }
                p.opened += u64::from(s.connect_us.is_some());
            }
            if s.error.is_none() && p.holds(end) {
                p.ended_ok += 1;
            }
        }
        self.tick(s, end);
        if end >= self.at_us && s.start_us < self.parts[2].to_us {
            match s.error {
                Some(_) => {
                    self.first_failure_end_us =
                        Some(self.first_failure_end_us.map_or(end, |f| f.min(end)))
                }
                None => self.frontier_add(s.start_us, s.latency_us),
            }
        }
    }

    fn tick(&mut self, s: &Sample, end: u64) {
        let index = |t: u64| {
            t.checked_sub(self.ticks_from_us)
                .map(|d| (d / TICK_US) as usize)
        };
        if s.error.is_none()
            && let Some(t) = index(s.start_us).and_then(|i| self.ticks.get_mut(i))
        {
            t.ok = t.ok.saturating_add(1);
            let buckets = t.buckets.get_or_insert_with(|| Box::new([0; TICK_BUCKETS]));
            let b = &mut buckets[bucket_of(s.latency_us)];
            *b = b.saturating_add(1);
        }
        if s.error.is_none()
            && let Some(t) = index(end).and_then(|i| self.ticks.get_mut(i))
        {
            t.ended_ok = t.ended_ok.saturating_add(1);
        }
    }

    /// Keep `(start, latency)` unless an earlier-starting sample lasted at least as long;
    /// drop those it outdoes. The frontier rises in both start and latency.
    fn frontier_add(&mut self, start: u64, latency: u64) {
        let f = &mut self.frontier;
        let at = f.partition_point(|&(s, _)| s <= start);
        if at > 0 && f[at - 1].1 >= latency {
            return;
        }
        let mut end = at;
        while end < f.len() && f[end].1 <= latency {
            end += 1;
        }
        f.splice(at..end, [(start, latency)]);
        if f.len() > MAX_FRONTIER {
            f.pop();
        }
    }

    /// When the fault first showed, µs on the round's clock: the earliest moment an
    /// operation in flight had lasted past `late_us` (at the begin at the soonest), or a
    /// failure ended; `None` when nothing showed it.
    pub(crate) fn detected_us(&self, late_us: u64) -> Option<u64> {
        let late = self
            .frontier
            .iter()
            .filter(|&&(_, l)| l > late_us)
            .map(|&(s, _)| s.saturating_add(late_us).max(self.at_us))
            .min();
        match (late, self.first_failure_end_us) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::tests::sample;
    use super::*;

    #[test]
    fn parts_split_by_start_and_ends_count_where_they_end() {
        let mut w = WindowStats::scheduled(&[(0, 2_000_000, 3_000_000)], 0).remove(0);
        w.record(&sample(0, 1_000_000, 1_000, None), Some(w.end_us));
        w.record(&sample(0, 1_999_000, 1_500_000, None), Some(w.end_us));
        w.record(
            &sample(0, 2_500_000, 1_000, Some(ErrorClass::Timeout)),
            Some(w.end_us),
        );
        w.record(&sample(0, 3_500_000, 1_000, None), Some(w.end_us));
        let started: Vec<u64> = w.parts.iter().map(Part::started).collect();
        assert_eq!(started, [2, 1, 1]);
        let ended: Vec<u64> = w.parts.iter().map(|p| p.ended_ok).collect();
        assert_eq!(ended, [1, 0, 2]);
        assert_eq!(w.parts[1].errors[ErrorClass::Timeout.index()], 1);
    }

    #[test]
    fn during_lasts_until_the_window_ended_as_it_happened() {
        // Scheduled 2 s to 3 s; the server was ready again at 4 s.
        let mut w = WindowStats::scheduled(&[(0, 2_000_000, 3_000_000)], 0).remove(0);
        // Still on when these arrive: during, though they started past 3 s.
        w.record(
            &sample(0, 3_200_000, 1_000, Some(ErrorClass::Connect)),
            None,
        );
        w.record(
            &sample(0, 3_900_000, 1_000, Some(ErrorClass::Connect)),
            None,
        );
        // Over at 4 s: one that started before is during, one after is after.
        w.record(&sample(0, 3_950_000, 100_000, None), Some(4_000_000));
        w.record(&sample(0, 4_100_000, 1_000, None), Some(4_000_000));
        let started: Vec<u64> = w.parts.iter().map(Part::started).collect();
        assert_eq!(started, [0, 3, 1]);
        assert_eq!(
            (w.parts[1].to_us, w.parts[2].from_us),
            (4_000_000, 4_000_000)
        );
        assert_eq!(w.parts[1].errors[ErrorClass::Connect.index()], 2);
    }

    #[test]
    fn the_first_to_show_is_the_earliest_to_pass_the_bound() {
        let mut w = WindowStats::scheduled(&[(0, 10_000_000, 13_000_000)], 0).remove(0);
        // Before the begin and over by then: not in flight at the begin.
        w.record(&sample(0, 9_000_000, 500_000, None), Some(w.end_us));
        // In flight at the begin, 60 ms long: late at 10 s + (start + 5 ms bound).
        w.record(&sample(0, 9_999_000, 60_000, None), Some(w.end_us));
        w.record(&sample(0, 10_020_000, 51_000, None), Some(w.end_us));
        w.record(&sample(0, 10_030_000, 1_000, None), Some(w.end_us));
        assert_eq!(w.detected_us(5_000), Some(10_004_000));
        // A bound nothing passed: nothing showed.
        assert_eq!(w.detected_us(100_000), None);
        w.record(
            &sample(0, 11_000_000, 2_000, Some(ErrorClass::Reset)),
            Some(w.end_us),
        );
        assert_eq!(w.detected_us(100_000), Some(11_002_000));
    }

    #[test]
    fn the_frontier_keeps_only_what_no_earlier_longer_sample_outdoes() {
        let mut w = WindowStats::scheduled(&[(0, 0, 1_000_000)], 0).remove(0);
        for (s, l) in [(10, 5), (20, 3), (30, 9), (25, 9), (40, 12), (5, 20)] {
            w.frontier_add(s, l);
        }
        assert_eq!(w.frontier, vec![(5, 20)]);
        let mut w = WindowStats::scheduled(&[(0, 0, 1_000_000)], 0).remove(0);
        for (s, l) in [(10, 5), (20, 3), (30, 9), (40, 12)] {
            w.frontier_add(s, l);
        }
        assert_eq!(w.frontier, vec![(10, 5), (30, 9), (40, 12)]);
    }

    #[test]
    fn ticks_hold_starts_ends_and_latency_buckets() {
        let mut w = WindowStats::scheduled(&[(0, 40_020_000, 41_020_000)], 0).remove(0);
        assert_eq!(w.ticks_from_us, 40_000_000);
        assert_eq!(w.ticks.len(), 11 + 1_200);
        w.record(&sample(0, 40_050_000, 1_000, None), Some(w.end_us));
        assert_eq!(w.ticks[0].ok, 1);
        assert_eq!(w.ticks[0].ended_ok, 1);
        assert!(w.ticks[1].buckets.is_none());
        let b = w.ticks[0]
            .buckets
            .as_deref()
            .copied()
            .unwrap_or([0; TICK_BUCKETS]);
        let k = b.iter().position(|&n| n == 1).unwrap_or(0);
        assert!(bucket_bound_us(k) > 1_000.0 && bucket_bound_us(k) / 1.19 <= 1_000.0 * 1.01);
    }
}
