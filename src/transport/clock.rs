//! The target's clock against ours, from the `Date` header of answers the run receives
//! anyway (no extra request). An answer dated second D was dated at a server time in
//! [D, D + 1 s), and that moment lay between our sending and our receiving it. So
//! every answer bounds the offset (server − ours) from both sides:
//! `D − received ≤ offset < D + 1 s − sent`. Over many answers at different phases of the
//! server's second, the bounds close in to about one round trip. Shards of one run record
//! it, so their reports can be laid on the server's clock.
//!
//! The header is another party's bytes: one that does not parse is ignored. Only the
//! first `MAX_OBSERVED` answers of a run are read, so the request path pays for this only
//! at its start.

use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};
use std::time::{Duration, SystemTime};

use hyper::header::HeaderValue;

/// Answers whose `Date` is read, per target and run.
const MAX_OBSERVED: u64 = 20_000;

/// Bounds on the target's clock offset, in milliseconds.
#[derive(Debug)]
pub struct ClockBounds {
    lo: AtomicI64,
    hi: AtomicI64,
    observed: AtomicU64,
}

impl Default for ClockBounds {
    fn default() -> ClockBounds {
        ClockBounds {
            lo: AtomicI64::new(i64::MIN),
            hi: AtomicI64::new(i64::MAX),
            observed: AtomicU64::new(0),
        }
    }
}

/// The estimate: the middle of the bounds, and half their width.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ClockOffset {
    /// Server clock minus ours, ms (positive: the server is ahead).
    pub offset_ms: f64,
    pub plus_minus_ms: f64,
    pub answers: u64,
}

fn epoch_ms(t: SystemTime) -> Option<i64> {
    let d = t.duration_since(SystemTime::UNIX_EPOCH).ok()?;
    i64::try_from(d.as_millis()).ok()
}

impl ClockBounds {
    /// Whether the next answer's `Date` is still wanted (a cheap check for the hot path).
    pub fn wants(&self) -> bool {
        self.observed.load(Ordering::Relaxed) < MAX_OBSERVED
    }

    /// An answer with this `Date`, received now, `elapsed` after its request was sent.
    pub fn observe(&self, date: Option<&HeaderValue>, elapsed: Duration) {
        let Some(date) = date.and_then(|d| d.to_str().ok()) else {
            return;
        };
        let Ok(server) = httpdate::parse_http_date(date) else {
            return;
        };
        let received = SystemTime::now();
        let sent = received.checked_sub(elapsed).unwrap_or(received);
        let (Some(d), Some(r), Some(s)) = (epoch_ms(server), epoch_ms(received), epoch_ms(sent))
        else {
            return;
        };
        self.observed.fetch_add(1, Ordering::Relaxed);
        self.lo.fetch_max(d.saturating_sub(r), Ordering::Relaxed);
        self.hi
            .fetch_min(d.saturating_add(1000).saturating_sub(s), Ordering::Relaxed);
    }

    /// The estimate so far; `None` before any dated answer, or when the answers disagree
    /// (the server's clock moved during the run).
    pub fn estimate(&self) -> Option<ClockOffset> {
        let answers = self.observed.load(Ordering::Relaxed);
        let (lo, hi) = (
            self.lo.load(Ordering::Relaxed),
            self.hi.load(Ordering::Relaxed),
        );
        if answers == 0 || lo > hi {
            return None;
        }
        Some(ClockOffset {
            offset_ms: (lo as f64 + hi as f64) / 2.0,
            plus_minus_ms: (hi as f64 - lo as f64) / 2.0,
            answers,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An answer from a server whose clock is `offset_ms` ahead, sent at our time `sent_ms`
    /// and received `rtt_ms` later, dated halfway.
    fn answer(b: &ClockBounds, offset_ms: i64, sent_ms: i64, rtt_ms: i64) {
        // `observe` reads our clock itself; emulate it through the bounds' arithmetic.
        let server_ms = sent_ms + rtt_ms / 2 + offset_ms;
        let d = server_ms.div_euclid(1000) * 1000;
        b.observed.fetch_add(1, Ordering::Relaxed);
        b.lo.fetch_max(d - (sent_ms + rtt_ms), Ordering::Relaxed);
        b.hi.fetch_min(d + 1000 - sent_ms, Ordering::Relaxed);
    }

    #[test]
    fn many_answers_close_the_bounds_around_the_true_offset() {
        let b = ClockBounds::default();
        assert!(b.estimate().is_none());
        // Answers every 37 ms for 10 s, 2 ms round trips, the server 1,234 ms ahead.
        for i in 0..270 {
            answer(&b, 1_234, 1_700_000_000_000 + i * 37, 2);
        }
        let e = b.estimate().unwrap();
        assert!((e.offset_ms - 1_234.0).abs() <= e.plus_minus_ms, "{e:?}");
        assert!(e.plus_minus_ms <= 20.0, "{e:?}");
    }

    #[test]
    fn a_real_date_header_is_read_and_a_bad_one_ignored() {
        let b = ClockBounds::default();
        b.observe(
            Some(&HeaderValue::from_static("not a date")),
            Duration::ZERO,
        );
        b.observe(None, Duration::ZERO);
        assert!(b.estimate().is_none());
        let now = httpdate::fmt_http_date(SystemTime::now());
        b.observe(
            Some(&HeaderValue::from_str(&now).unwrap()),
            Duration::from_millis(1),
        );
        let e = b.estimate().unwrap();
        // Our own clock, formatted to the second: within a second of no offset.
        assert!(
            e.offset_ms.abs() <= 1_000.0 && e.plus_minus_ms <= 501.0,
            "{e:?}"
        );
        assert!(b.wants());
    }
}
