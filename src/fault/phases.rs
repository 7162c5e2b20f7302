//! Where a round stands in its fault timeline, for the message ledger. The timeline moves
//! a phase number on as each window begins and ends (0 before the round's first window,
//! `2k + 1` in window `k`, `2k + 2` after it) and keeps when each began and ended on the
//! stamps' clock. A producer marks each send with the phase it was written in, so the
//! ledger can say which window a lost message was sent before or during; a consumer
//! finds, by a message's send time, the windows it lay in the broker through.

use std::sync::atomic::{AtomicU16, AtomicU32, AtomicU64, Ordering};

use crate::workload::faults::MAX_FAULTS;

/// One target's phase, shared by its timeline (which moves it) and its users (who read
/// it with every message).
#[derive(Debug)]
pub(crate) struct Phases {
    /// The stamps' clock, in nanoseconds.
    clock: fn() -> u64,
    /// The measured round under way (from 1), whose windows these are.
    round: AtomicU16,
    now: AtomicU32,
    /// Window `k`'s begin at `2k`, its end at `2k + 1`, in stamp-clock nanoseconds; 0
    /// while it has not happened in this round.
    times: Vec<AtomicU64>,
}

impl Phases {
    /// Phases whose times are read from `clock`, the one the run's stamps carry.
    pub(crate) fn new(clock: fn() -> u64) -> Phases {
        Phases {
            clock,
            round: AtomicU16::new(0),
            now: AtomicU32::new(0),
            times: (0..2 * MAX_FAULTS).map(|_| AtomicU64::new(0)).collect(),
        }
    }

    /// Measured round `round` starts: before its first window, none of them seen yet.
    pub(crate) fn round_begins(&self, round: u32) {
        for t in &self.times {
            t.store(0, Ordering::Relaxed);
        }
        self.round
            .store(u16::try_from(round).unwrap_or(u16::MAX), Ordering::Relaxed);
        self.now.store(0, Ordering::Release);
    }

    /// Window `k` (its place in the round, from 0) begins now.
    pub(crate) fn began(&self, k: usize) {
        self.mark(2 * k);
    }

    /// Window `k` ends now (a kill's: the server ready again).
    pub(crate) fn ended(&self, k: usize) {
        self.mark(2 * k + 1);
    }

    fn mark(&self, i: usize) {
        let Some(t) = self.times.get(i) else {
            return;
        };
        let ns = (self.clock)();
        // Never 0, which means "not yet".
        t.store(ns.max(1), Ordering::Relaxed);
        self.now
            .store(u32::try_from(i + 1).unwrap_or(u32::MAX), Ordering::Release);
    }

    /// The phase now.
    pub(crate) fn now(&self) -> u16 {
        u16::try_from(self.now.load(Ordering::Acquire)).unwrap_or(u16::MAX)
    }

    /// The windows (the round under way, and their places in it) that began after
    /// `sent_ns` and had ended by `now_ns`: a message sent then and taken now lay in the
    /// broker through each, whichever round sent it.
    pub(crate) fn crossed(
        &self,
        sent_ns: u64,
        now_ns: u64,
    ) -> impl Iterator<Item = (u16, u16)> + '_ {
        let seen = (self.now.load(Ordering::Acquire) as usize).min(self.times.len());
        let round = self.round.load(Ordering::Relaxed);
        (0..seen / 2).filter_map(move |k| {
            let began = self.times[2 * k].load(Ordering::Relaxed);
            let ended = self.times[2 * k + 1].load(Ordering::Relaxed);
            (began > sent_ns && ended != 0 && ended <= now_ns)
                .then(|| (round, u16::try_from(k).unwrap_or(u16::MAX)))
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A clock that reads 100, 200, 300, ... in turn.
    fn ticks() -> u64 {
        static T: AtomicU64 = AtomicU64::new(0);
        T.fetch_add(100, Ordering::Relaxed) + 100
    }

    #[test]
    fn the_phase_moves_with_each_window_and_a_new_round_starts_it_again() {
        let p = Phases::new(ticks);
        p.round_begins(2);
        assert_eq!(p.now(), 0);
        p.began(0);
        assert_eq!(p.now(), 1);
        p.ended(0);
        assert_eq!(p.now(), 2);
        p.began(1);
        assert_eq!(p.now(), 3);
        // Sent before window 0, taken after it ended: it lay through window 0 only
        // (window 1 has not ended).
        assert_eq!(p.crossed(50, 350).collect::<Vec<_>>(), [(2, 0)]);
        // Sent in it: through none.
        assert_eq!(p.crossed(150, 350).count(), 0);
        // Taken before window 0 ended: through none.
        assert_eq!(p.crossed(50, 150).count(), 0);
        p.ended(1);
        assert_eq!(p.crossed(50, 500).collect::<Vec<_>>(), [(2, 0), (2, 1)]);
        p.round_begins(3);
        assert_eq!(p.now(), 0);
        assert_eq!(p.crossed(50, 500).count(), 0);
        // A window past the bound is not followed.
        p.began(MAX_FAULTS);
        assert_eq!(p.now(), 0);
    }
}
