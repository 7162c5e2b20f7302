//! The ledger split by fault window: of the messages sent in the seconds before a window
//! (after the window before it ended) or during it, those lost, duplicated, redelivered
//! and out of order, and those that lay in the broker through it (sent before it began,
//! received after it ended). A message sent before a fault and lost with it is the
//! fault's, as is one sent into it; one sent after the round's last window is no
//! window's. Worked out, like the losses, once every part is in.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::{Flag, Flags, Ledger, Loss, iter_set};

/// What one window of one round came to in messages.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct WindowMessages {
    /// Stamped messages written in the seconds before the window (after the one before it
    /// ended, or from the round's start).
    pub sent_before: u64,
    /// Written while it lasted (a kill's: until the server was ready again).
    pub sent_during: u64,
    /// Of those, sent and neither received nor drained.
    pub lost: u64,
    /// Of the lost, those whose send had failed (no receipt or confirm came): the broker
    /// may never have had them. The others it had taken.
    pub lost_failed: u64,
    /// Of those, taken more than once (a redelivery of one not acknowledged excused).
    pub duplicated: u64,
    /// Of those, flagged redelivered by the broker.
    pub redelivered: u64,
    /// Of those, taken after a later one of the same producer.
    pub out_of_order: u64,
    /// Sent before the window began and received after it ended.
    pub crossed: u64,
    /// Of those, neither received nor drained on a destination whose drain stopped: not
    /// known to be lost.
    pub not_drained: u64,
}

impl WindowMessages {
    /// Where messages flagged `which` are counted.
    fn flagged(&mut self, which: Flag) -> &mut u64 {
        match which {
            Flag::Duplicated => &mut self.duplicated,
            Flag::Redelivered => &mut self.redelivered,
            Flag::OutOfOrder => &mut self.out_of_order,
        }
    }
}

impl Ledger {
    /// Per (round, window's place in it), for each measured round `windows` names with
    /// how many windows it had: what its messages came to. Every window is there, with
    /// zeros where nothing was sent.
    pub(crate) fn by_window(
        &self,
        windows: &BTreeMap<u16, u16>,
    ) -> BTreeMap<(u16, u16), WindowMessages> {
        let mut out: BTreeMap<(u16, u16), WindowMessages> = windows
            .iter()
            .flat_map(|(&r, &n)| (0..n).map(move |k| ((r, k), WindowMessages::default())))
            .collect();
        self.each_send(
            |p| windows.contains_key(&p.round),
            |p, s, d, seq, taken| {
                let n = windows.get(&p.round).copied().unwrap_or(0);
                let Some((k, during)) = sent_in(s.phase_of(seq), n) else {
                    return;
                };
                let m = out.entry((p.round, k)).or_default();
                match during {
                    true => m.sent_during += 1,
                    false => m.sent_before += 1,
                }
                if !taken {
                    let stopped = self.counts[d as usize].drain_stopped;
                    Loss::of(stopped, s, seq).add_to(
                        &mut m.lost,
                        &mut m.lost_failed,
                        &mut m.not_drained,
                    );
                }
            },
        );
        for (p, f) in &self.flags {
            let Some(&n) = windows.get(&p.round) else {
                continue;
            };
            let phase_of = |seq| self.sends.get(p).map_or(0, |s| s.phase_of(seq));
            for which in Flag::ALL {
                for seq in iter_set(f.set(which)) {
                    if let Some((k, _)) = sent_in(phase_of(seq), n) {
                        *out.entry((p.round, k)).or_default().flagged(which) += 1;
                    }
                }
            }
        }
        for (&(r, k), &c) in &self.crossed {
            if windows.get(&r).is_some_and(|&n| k < n) {
                out.entry((r, k)).or_default().crossed += c;
            }
        }
        out
    }

    /// Adds `f`'s sets to producer `p`'s.
    pub(super) fn flag_all(&mut self, p: super::Producer, f: &Flags) {
        for which in Flag::ALL {
            for seq in iter_set(f.set(which)) {
                self.flag(p, seq, which);
            }
        }
    }
}

/// The window a phase belongs to when a message was *sent* in it, and whether during
/// it. A round's timeline numbers its phases 0 before its first window, `2k + 1` in
/// window `k` and `2k + 2` after it (`fault::Phases`): the seconds before window `k`
/// (after the one before it ended) and window `k` itself are both `k`'s, for a message
/// sent there is what a fault in `k` can lose. `None` past the round's `windows`.
fn sent_in(phase: u16, windows: u16) -> Option<(u16, bool)> {
    let k = phase / 2;
    (k < windows).then_some((k, phase % 2 == 1))
}

#[cfg(test)]
mod tests {
    use super::super::{Producer, Taken};
    use super::*;

    const P: Producer = Producer {
        class: 0,
        round: 1,
        vu: 0,
    };
    const Q: &str = "/queue/q";

    /// Round 1 with two windows: seqs 0-9 before window 0, 10-14 in it, 15-19 between
    /// the windows, 20-24 in window 1, 25-29 after it.
    fn sent(l: &mut Ledger) {
        for seq in 0..30u32 {
            let phase = match seq {
                0..10 => 0,
                10..15 => 1,
                15..20 => 2,
                20..25 => 3,
                _ => 4,
            };
            l.sent_in(Q, P, seq, phase);
        }
    }

    #[test]
    fn losses_go_to_the_window_a_message_was_sent_before_or_in() {
        let mut producer = Ledger::drained();
        sent(&mut producer);
        // 12 and 13 were written into window 0 and never receipted; 8 was receipted
        // before it and lost with it; 22 was lost in window 1; 28 after the last window.
        producer.send_failed(Q, P, 12);
        producer.send_failed(Q, P, 13);
        let mut consumer = Ledger::default();
        for seq in (0..30u32).filter(|s| ![8, 12, 13, 22, 28].contains(s)) {
            consumer.took(Q, P, seq, Taken::Received, false);
        }
        producer.absorb(consumer);
        let w = producer.by_window(&BTreeMap::from([(1, 2)]));
        let w0 = w[&(1, 0)];
        assert_eq!((w0.sent_before, w0.sent_during), (10, 5));
        assert_eq!((w0.lost, w0.lost_failed), (3, 2));
        let w1 = w[&(1, 1)];
        assert_eq!((w1.sent_before, w1.sent_during), (5, 5));
        assert_eq!((w1.lost, w1.lost_failed), (1, 0));
        assert_eq!(w.len(), 2, "after the last window is no window's");
        // The run's count holds all five.
        assert_eq!(producer.settle(true)[0].1.lost, 5);
    }

    #[test]
    fn duplicates_redeliveries_and_disorder_go_by_the_send_and_crossings_are_kept() {
        let mut producer = Ledger::drained();
        sent(&mut producer);
        let mut a = Ledger::default();
        let mut b = Ledger::default();
        for seq in 0..30u32 {
            a.took(Q, P, seq, Taken::Received, false);
        }
        // b takes 5 again (a duplicate across consumers, found when the parts add up),
        // 11 flagged redelivered, and 17 after 18.
        b.took(Q, P, 5, Taken::Received, false);
        b.took(Q, P, 11, Taken::Received, true);
        let mut c = Ledger::default();
        c.took_acknowledged(Q, P, 18, false);
        c.took_acknowledged(Q, P, 17, false);
        c.lay_through(1, 0);
        c.lay_through(1, 0);
        c.lay_through(1, 1);
        c.lay_through(2, 0);
        producer.absorb(a);
        producer.absorb(b);
        producer.absorb(c);
        let w = producer.by_window(&BTreeMap::from([(1, 2)]));
        let w0 = w[&(1, 0)];
        assert_eq!(w0.duplicated, 2, "5 twice, and 11 taken again");
        assert_eq!(w0.redelivered, 1);
        assert_eq!(w0.crossed, 2);
        let w1 = w[&(1, 1)];
        // 17 and 18 were both taken twice (a, then c); 17 came after 18.
        assert_eq!((w1.duplicated, w1.out_of_order, w1.crossed), (2, 1, 1));
        assert_eq!(w0.lost + w1.lost, 0);
        // run.json keeps what it takes to say it all again.
        let back = Ledger::from_record(&producer.to_record(true)).expect("its own record");
        assert_eq!(back.by_window(&BTreeMap::from([(1, 2)])), w);
    }

    #[test]
    fn a_send_belongs_to_the_window_it_was_before_or_in() {
        assert_eq!(sent_in(0, 2), Some((0, false)));
        assert_eq!(sent_in(1, 2), Some((0, true)));
        assert_eq!(sent_in(2, 2), Some((1, false)));
        assert_eq!(sent_in(3, 2), Some((1, true)));
        assert_eq!(sent_in(4, 2), None);
        assert_eq!(sent_in(0, 0), None);
    }
}
