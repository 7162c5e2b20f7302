//! The message ledger: which stamped messages each producer sent, to where, and which of
//! them consumers received (or the teardown drained), and what that says per destination:
//! lost, duplicated, out of order, foreign.
//!
//! Each message a broker driver sends carries a stamp (see `protocol::broker`): the
//! producer (class, round, user) and its sequence number, counted per producer and round
//! from 0. A producer's ledger keeps its sends as runs of sequence numbers to one
//! destination, and the sequence numbers of the sends that failed; a consumer's keeps
//! sets of sequence numbers per producer. Ledgers add up (users into a round, rounds into
//! a run, shards into a merged run): a sequence number two of them both received is a
//! duplicate, wherever it was received. Only after every part is in are the losses worked
//! out: a message sent and never received nor drained.
//!
//! Everything in a stamp comes from the broker, so it is bounded: the sets live in chunks
//! of 4,096 sequence numbers, and a ledger holds at most [`MAX_CHUNKS`] of them; a message
//! past that is counted as received, but `untracked`.
//!
//! In a round with faults, a producer marks where its sends crossed into each phase of the
//! timeline (`fault::Phases`), and the messages taken twice, redelivered or out of order
//! are kept by sequence number: `windows.rs` then says, per window, what was lost,
//! duplicated and redelivered of the messages sent before or during it.

mod record;
mod windows;

pub(crate) use record::LedgerRecord;
pub(crate) use windows::WindowMessages;

use std::collections::{BTreeMap, HashMap, HashSet};

use serde::{Deserialize, Serialize};

/// Chunks of sequence numbers a ledger keeps (512 bytes each: 64 MiB in all).
pub(crate) const MAX_CHUNKS: usize = 1 << 17;
/// Destinations a ledger names; messages to more are counted under the last.
pub(crate) const MAX_DESTINATIONS: usize = 4096;
/// Messages a consumer's ledger remembers as taken and not acknowledged; one past that is
/// taken as acknowledged, so a redelivery of it counts as a duplicate.
const MAX_UNACKED: usize = 1 << 16;
/// Runs of sends a producer keeps; past that its sends are counted, not attributed.
const MAX_RUNS: usize = 1 << 16;
/// Phase marks a producer keeps: two a window, for the 64 windows a round may have.
const MAX_MARKS: usize = 128;
const CHUNK_BITS: u32 = 4096;
const WORDS: usize = (CHUNK_BITS / 64) as usize;

/// Who sent a message, as its stamp says: the producer's class (its index in the
/// workload), round and user.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct Producer {
    pub class: u16,
    pub round: u16,
    pub vu: u32,
}

/// A set of sequence numbers, in chunks of 4,096.
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct Seqs {
    chunks: BTreeMap<u32, Box<[u64; WORDS]>>,
    len: u64,
}

impl Seqs {
    fn contains(&self, seq: u32) -> bool {
        let (c, w, b) = split(seq);
        self.chunks.get(&c).is_some_and(|ch| ch[w] & b != 0)
    }

    /// Adds `seq`: `Some(true)` if new, `Some(false)` if there already, `None` when it
    /// would need a chunk beyond `budget`.
    fn insert(&mut self, seq: u32, budget: &mut usize) -> Option<bool> {
        let (c, w, b) = split(seq);
        let ch = match self.chunks.get_mut(&c) {
            Some(ch) => ch,
            None => {
                *budget = budget.checked_sub(1)?;
                self.chunks.entry(c).or_insert_with(|| Box::new([0; WORDS]))
            }
        };
        let new = ch[w] & b == 0;
        ch[w] |= b;
        self.len += u64::from(new);
        Some(new)
    }

    pub(crate) fn len(&self) -> u64 {
        self.len
    }

    /// The set as sorted, disjoint `[start, end)` ranges.
    pub(crate) fn ranges(&self) -> Vec<(u32, u64)> {
        let mut out: Vec<(u32, u64)> = Vec::new();
        for (c, ch) in &self.chunks {
            for (w, word) in ch.iter().enumerate() {
                let mut bits = *word;
                while bits != 0 {
                    let b = bits.trailing_zeros();
                    bits &= bits - 1;
                    let seq = c * CHUNK_BITS + w as u32 * 64 + b;
                    match out.last_mut() {
                        Some((_, end)) if *end == u64::from(seq) => *end += 1,
                        _ => out.push((seq, u64::from(seq) + 1)),
                    }
                }
            }
        }
        out
    }
}

fn split(seq: u32) -> (u32, usize, u64) {
    let c = seq / CHUNK_BITS;
    let i = seq % CHUNK_BITS;
    (c, (i / 64) as usize, 1u64 << (i % 64))
}

/// A producer's sends: runs of sequence numbers to one destination each, and those whose
/// send failed (written, but no receipt or confirm came).
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct Sends {
    /// (destination index, first sequence number, how many).
    runs: Vec<(u32, u32, u32)>,
    failed: Seqs,
    /// Sends past the runs' bound: counted, not attributed.
    unattributed: u64,
    /// (first sequence number, phase): from each, the sends were written in that phase
    /// of the round's fault timeline (before the first mark, in phase 0).
    marks: Vec<(u32, u16)>,
}

impl Sends {
    /// The phase message `seq` was sent in.
    fn phase_of(&self, seq: u32) -> u16 {
        let i = self.marks.partition_point(|m| m.0 <= seq);
        i.checked_sub(1).map_or(0, |i| self.marks[i].1)
    }
}

/// What consumers saw go wrong with a producer's messages, by sequence number: taken
/// again, flagged redelivered by the broker, taken after a later one.
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct Flags {
    duplicated: Seqs,
    redelivered: Seqs,
    out_of_order: Seqs,
}

/// Which of a producer's [`Flags`] a message goes in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Flag {
    Duplicated,
    Redelivered,
    OutOfOrder,
}

impl Flag {
    const ALL: [Flag; 3] = [Flag::Duplicated, Flag::Redelivered, Flag::OutOfOrder];
}

impl Flags {
    fn set(&self, which: Flag) -> &Seqs {
        match which {
            Flag::Duplicated => &self.duplicated,
            Flag::Redelivered => &self.redelivered,
            Flag::OutOfOrder => &self.out_of_order,
        }
    }

    fn set_mut(&mut self, which: Flag) -> &mut Seqs {
        match which {
            Flag::Duplicated => &mut self.duplicated,
            Flag::Redelivered => &mut self.redelivered,
            Flag::OutOfOrder => &mut self.out_of_order,
        }
    }
}

/// Counts per destination.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Counts {
    /// Stamped messages written to the broker.
    pub sent: u64,
    /// Of those, the sends that failed (no receipt or confirm).
    pub send_failed: u64,
    /// Distinct messages of this run taken by consumers during the rounds.
    pub received: u64,
    /// Distinct messages of this run taken by the teardown's drain.
    pub drained: u64,
    /// Messages taken again (by the same consumer or another, or by the drain).
    pub duplicated: u64,
    /// Messages a consumer took after a later one of the same producer, the broker's
    /// redeliveries left out (JMS promises order only without them).
    pub out_of_order: u64,
    /// Copies the broker flagged as delivered before. One of a message the consumer had
    /// not acknowledged (it left, or let it go) is excused, not a duplicate; any other
    /// is counted under `duplicated` as well.
    #[serde(default)]
    pub redelivered: u64,
    /// Messages without this run's stamp (another run's, a dirty queue's).
    pub foreign: u64,
    /// Received, but past the ledger's bound: not checked for duplicates or losses.
    pub untracked: u64,
    /// Sent, and neither received nor drained (worked out when every part is in).
    pub lost: u64,
    /// Of the lost, those whose send had failed: the broker may never have had them.
    pub lost_failed: u64,
    /// Of those received or drained, the messages no producer of the run sent: a stamp
    /// the broker forged or mangled (worked out when every part is in; one shard's report
    /// judges only its own producers).
    #[serde(default)]
    pub unsent: u64,
    /// The teardown's drain of this destination stopped before it was empty (the broker
    /// flooded it, or the drain's time ran out): what it did not take may be there still.
    #[serde(default)]
    pub drain_stopped: bool,
    /// Sent, neither received nor drained, on a destination whose drain stopped: not
    /// known to be lost (worked out when every part is in).
    #[serde(default)]
    pub not_drained: u64,
}

impl Counts {
    pub fn add(&mut self, o: &Counts) {
        self.sent += o.sent;
        self.send_failed += o.send_failed;
        self.received += o.received;
        self.drained += o.drained;
        self.duplicated += o.duplicated;
        self.out_of_order += o.out_of_order;
        self.redelivered += o.redelivered;
        self.foreign += o.foreign;
        self.untracked += o.untracked;
        self.lost += o.lost;
        self.lost_failed += o.lost_failed;
        self.unsent += o.unsent;
        self.drain_stopped |= o.drain_stopped;
        self.not_drained += o.not_drained;
    }
}

/// What a message sent and never taken is: behind a drain that stopped it may be there
/// still; otherwise lost, and of the lost, one whose send had failed or not.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Loss {
    NotDrained,
    Lost { send_failed: bool },
}

impl Loss {
    fn of(drain_stopped: bool, s: &Sends, seq: u32) -> Loss {
        match drain_stopped {
            true => Loss::NotDrained,
            false => Loss::Lost {
                send_failed: s.failed.contains(seq),
            },
        }
    }

    /// Counted into `lost`, `lost_failed` and `not_drained`.
    fn add_to(self, lost: &mut u64, lost_failed: &mut u64, not_drained: &mut u64) {
        match self {
            Loss::NotDrained => *not_drained += 1,
            Loss::Lost { send_failed } => {
                *lost += 1;
                *lost_failed += u64::from(send_failed);
            }
        }
    }
}

/// How a message was taken: by a consumer in a round, or by the teardown's drain.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Taken {
    Received,
    Drained,
}

/// One part's ledger: a user's, a round's, a run's.
#[derive(Debug, Clone, Default)]
pub(crate) struct Ledger {
    names: Vec<String>,
    index: HashMap<String, u32>,
    counts: Vec<Counts>,
    sends: BTreeMap<Producer, Sends>,
    /// What was taken, per producer, destination taken from, and how.
    got: BTreeMap<(Producer, u32, Taken), Seqs>,
    /// A consumer's last sequence number per producer, for order (never merged: order is
    /// each consumer's own).
    last: HashMap<Producer, u32>,
    /// What a consumer took and has not acknowledged (by producer, destination and
    /// sequence number): only these may come again as redeliveries. A consumer's own,
    /// never merged; at most [`MAX_UNACKED`].
    unacked: HashSet<(Producer, u32, u32)>,
    /// Per producer, the messages consumers took twice, as redeliveries or out of order.
    flags: BTreeMap<Producer, Flags>,
    /// Per (round, window's place in it), the messages sent before the window began and
    /// received after it ended.
    crossed: BTreeMap<(u16, u16), u64>,
    budget: Option<usize>,
    /// Every destination it names was drained after its round (set by whoever knows:
    /// adding ledgers leaves it alone).
    pub drained: bool,
}

impl Ledger {
    /// An empty ledger that is drained until a part added to it says otherwise.
    pub(crate) fn drained() -> Ledger {
        Ledger {
            drained: true,
            ..Ledger::default()
        }
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.names.is_empty()
    }

    /// Stamped messages sent to `destination`, as far as this ledger knows.
    pub(crate) fn sent_to(&self, destination: &str) -> u64 {
        self.index
            .get(destination)
            .map_or(0, |&d| self.counts[d as usize].sent)
    }

    /// The destinations it names.
    pub(crate) fn destinations(&self) -> impl Iterator<Item = &str> {
        self.names.iter().map(String::as_str)
    }

    fn budget(&mut self) -> &mut usize {
        self.budget.get_or_insert(MAX_CHUNKS)
    }

    /// The index of destination `name`, added if new (the last one past the bound).
    /// The teardown's drain of `name` stopped before the destination was empty.
    pub(crate) fn drain_stopped(&mut self, name: &str) {
        let i = self.dest(name) as usize;
        self.counts[i].drain_stopped = true;
    }

    fn dest(&mut self, name: &str) -> u32 {
        if let Some(&i) = self.index.get(name) {
            return i;
        }
        if self.names.len() >= MAX_DESTINATIONS {
            return (self.names.len() - 1) as u32;
        }
        let i = self.names.len() as u32;
        self.names.push(name.to_string());
        self.index.insert(name.to_string(), i);
        self.counts.push(Counts::default());
        i
    }

    /// A producer wrote message `seq` to `destination`, before any fault.
    #[cfg(test)]
    pub(crate) fn sent(&mut self, destination: &str, p: Producer, seq: u32) {
        self.sent_in(destination, p, seq, 0);
    }

    /// A producer wrote message `seq` to `destination` in `phase` of its round's fault
    /// timeline (0 where it has none).
    pub(crate) fn sent_in(&mut self, destination: &str, p: Producer, seq: u32, phase: u16) {
        let d = self.dest(destination);
        self.counts[d as usize].sent += 1;
        let s = self.sends.entry(p).or_default();
        if s.marks.last().map_or(0, |m| m.1) != phase && s.marks.len() < MAX_MARKS {
            s.marks.push((seq, phase));
        }
        let full = s.runs.len() >= MAX_RUNS;
        match s.runs.last_mut() {
            Some((rd, first, n))
                if *rd == d && u64::from(*first) + u64::from(*n) == u64::from(seq) =>
            {
                *n += 1
            }
            _ if full => s.unattributed += 1,
            _ => s.runs.push((d, seq, 1)),
        }
    }

    /// The send of message `seq` failed after it was written.
    pub(crate) fn send_failed(&mut self, destination: &str, p: Producer, seq: u32) {
        let d = self.dest(destination);
        self.counts[d as usize].send_failed += 1;
        let budget = self.budget.get_or_insert(MAX_CHUNKS);
        let _ = self.sends.entry(p).or_default().failed.insert(seq, budget);
    }

    /// A message of another run, or none's, was taken from `destination`.
    pub(crate) fn foreign(&mut self, destination: &str) {
        let d = self.dest(destination);
        self.counts[d as usize].foreign += 1;
    }

    /// A message of this run was taken from `destination` with a sequence number its
    /// producer cannot have sent yet (a forged stamp): counted as never sent, and kept
    /// out of the sets, where each such number could take a chunk of the budget.
    pub(crate) fn took_unsent(&mut self, destination: &str) {
        let d = self.dest(destination);
        self.counts[d as usize].unsent += 1;
    }

    /// Message `seq` of `p` was taken from `destination`; `redelivered` when the broker
    /// flagged it so. A message received is remembered as not yet acknowledged. Whether
    /// it was the first time this ledger saw it.
    pub(crate) fn took(
        &mut self,
        destination: &str,
        p: Producer,
        seq: u32,
        how: Taken,
        redelivered: bool,
    ) -> bool {
        let unacked = how == Taken::Received;
        self.take(destination, p, seq, how, redelivered, unacked)
    }

    /// A message of round `round`, sent before its window `k` began, was received after
    /// the window ended.
    pub(crate) fn lay_through(&mut self, round: u16, k: u16) {
        *self.crossed.entry((round, k)).or_default() += 1;
    }

    /// [`Ledger::took`] for a message received and acknowledged as it came (auto ack, a
    /// reply): nothing to remember of it, and nothing to forget.
    pub(crate) fn took_acknowledged(
        &mut self,
        destination: &str,
        p: Producer,
        seq: u32,
        redelivered: bool,
    ) -> bool {
        self.take(destination, p, seq, Taken::Received, redelivered, false)
    }

    fn take(
        &mut self,
        destination: &str,
        p: Producer,
        seq: u32,
        how: Taken,
        redelivered: bool,
        unacked: bool,
    ) -> bool {
        let d = self.dest(destination);
        let seen = self.has(p, d, seq);
        let inserted = match seen {
            true => Some(false),
            false => self.insert_got(p, d, how, seq),
        };
        // Taken again, and the broker says it handed it out before: a redelivery, not a
        // duplicate, when this consumer never acknowledged the first copy.
        let excused = redelivered && self.unacked.contains(&(p, d, seq));
        if unacked && inserted.is_some() && self.unacked.len() < MAX_UNACKED {
            self.unacked.insert((p, d, seq));
        }
        let c = &mut self.counts[d as usize];
        let duplicated = inserted == Some(false) && !excused;
        match inserted {
            None => c.untracked += 1,
            Some(false) if excused => {}
            Some(false) => c.duplicated += 1,
            Some(true) if how == Taken::Drained => c.drained += 1,
            Some(true) => c.received += 1,
        }
        c.redelivered += u64::from(redelivered);
        let mut out_of_order = false;
        if how == Taken::Received {
            let last = self.last.entry(p).or_insert(seq);
            if seq < *last && !redelivered {
                c.out_of_order += 1;
                out_of_order = true;
            } else {
                *last = seq;
            }
        }
        for (on, which) in [
            (duplicated, Flag::Duplicated),
            (redelivered, Flag::Redelivered),
            (out_of_order, Flag::OutOfOrder),
        ] {
            if on {
                self.flag(p, seq, which);
            }
        }
        inserted == Some(true)
    }

    /// Message `seq` of `p` in its flags `which` (past the budget, not kept).
    fn flag(&mut self, p: Producer, seq: u32, which: Flag) {
        let budget = self.budget.get_or_insert(MAX_CHUNKS);
        let _ = self
            .flags
            .entry(p)
            .or_default()
            .set_mut(which)
            .insert(seq, budget);
    }

    /// The consumer acknowledged everything it took so far (a cumulative ack; one
    /// acknowledged as it came is taken by [`Ledger::took_acknowledged`]).
    pub(crate) fn acknowledged_all(&mut self) {
        self.unacked.clear();
    }

    /// Whether message `seq` of `p` was taken from destination `d` already, either way.
    fn has(&self, p: Producer, d: u32, seq: u32) -> bool {
        [Taken::Received, Taken::Drained]
            .iter()
            .any(|&h| self.got.get(&(p, d, h)).is_some_and(|s| s.contains(seq)))
    }

    fn insert_got(&mut self, p: Producer, d: u32, how: Taken, seq: u32) -> Option<bool> {
        let budget = self.budget.get_or_insert(MAX_CHUNKS);
        self.got.entry((p, d, how)).or_default().insert(seq, budget)
    }

    /// Adds `o` to this ledger: what both received is a duplicate.
    pub(crate) fn absorb(&mut self, o: Ledger) {
        let map: Vec<u32> = o.names.iter().map(|n| self.dest(n)).collect();
        let remap = |d: u32| map.get(d as usize).copied().unwrap_or(0);
        for (i, c) in o.counts.iter().enumerate() {
            self.counts[remap(i as u32) as usize].add(c);
        }
        for (p, s) in o.sends {
            let mine = self.sends.entry(p).or_default();
            for (d, first, n) in s.runs {
                if mine.runs.len() >= MAX_RUNS {
                    mine.unattributed += u64::from(n);
                } else {
                    mine.runs.push((remap(d), first, n));
                }
            }
            mine.unattributed += s.unattributed;
            // A producer sends from one user's ledger: its marks come from one part.
            if mine.marks.is_empty() {
                mine.marks = s.marks;
            }
            let budget = self.budget.get_or_insert(MAX_CHUNKS);
            for seq in iter_set(&s.failed) {
                let _ = mine.failed.insert(seq, budget);
            }
        }
        for (p, f) in o.flags {
            self.flag_all(p, &f);
        }
        for (k, n) in o.crossed {
            *self.crossed.entry(k).or_default() += n;
        }
        for ((p, d, how), set) in o.got {
            let d = remap(d);
            // A message both parts took is counted once: the second time is a duplicate.
            let (mut again, mut untracked) = (0u64, 0u64);
            for seq in iter_set(&set) {
                if self.has(p, d, seq) {
                    again += 1;
                    self.flag(p, seq, Flag::Duplicated);
                } else if self.insert_got(p, d, how, seq).is_none() {
                    untracked += 1;
                }
            }
            let c = &mut self.counts[d as usize];
            let taken = match how {
                Taken::Received => &mut c.received,
                Taken::Drained => &mut c.drained,
            };
            *taken = taken.saturating_sub(again + untracked);
            c.duplicated += again;
            c.untracked += untracked;
        }
    }

    /// Per destination, with the losses worked out: every part must be in. `whole`: the
    /// ledger is the whole run's, so a producer it never saw send is no producer of the
    /// run (in one shard's, it may be another shard's).
    pub(crate) fn settle(&self, whole: bool) -> Vec<(String, Counts)> {
        let mut counts = self.counts.clone();
        self.each_send(
            |_| true,
            |_, s, d, seq, taken| {
                let c = &mut counts[d as usize];
                if !taken {
                    Loss::of(c.drain_stopped, s, seq).add_to(
                        &mut c.lost,
                        &mut c.lost_failed,
                        &mut c.not_drained,
                    );
                }
            },
        );
        for ((p, d, _), set) in &self.got {
            counts[*d as usize].unsent += self.never_sent(p, set, whole);
        }
        self.names.iter().cloned().zip(counts).collect()
    }

    /// Each send of each producer `keep` keeps: the producer, its sends, the message's
    /// destination and sequence number, and whether any part took it (from any
    /// destination: a broker may name it otherwise than its sender). What the losses and
    /// the windows' shares of them are worked out from.
    fn each_send(
        &self,
        keep: impl Fn(&Producer) -> bool,
        mut f: impl FnMut(&Producer, &Sends, u32, u32, bool),
    ) {
        for (p, s) in self.sends.iter().filter(|(p, _)| keep(p)) {
            let got: Vec<&Seqs> = self
                .got
                .range((*p, 0, Taken::Received)..=(*p, u32::MAX, Taken::Drained))
                .map(|(_, s)| s)
                .collect();
            for &(d, first, n) in &s.runs {
                for seq in (u64::from(first)..u64::from(first) + u64::from(n)).map(|s| s as u32) {
                    f(p, s, d, seq, got.iter().any(|g| g.contains(seq)));
                }
            }
        }
    }

    /// How many of `set`, taken as `p`'s, `p` never sent; none where that cannot be told
    /// (sends past the runs' bound, or a producer another shard may have had).
    fn never_sent(&self, p: &Producer, set: &Seqs, whole: bool) -> u64 {
        let Some(s) = self.sends.get(p) else {
            return if whole { set.len() } else { 0 };
        };
        if s.unattributed > 0 {
            return 0;
        }
        let mut runs: Vec<(u64, u64)> = s
            .runs
            .iter()
            .map(|&(_, first, n)| (u64::from(first), u64::from(first) + u64::from(n)))
            .collect();
        runs.sort_unstable();
        let sent = |seq: u64| {
            let i = runs.partition_point(|r| r.0 <= seq);
            i > 0 && seq < runs[i - 1].1
        };
        iter_set(set).filter(|&seq| !sent(u64::from(seq))).count() as u64
    }
}

fn iter_set(s: &Seqs) -> impl Iterator<Item = u32> + '_ {
    s.ranges()
        .into_iter()
        .flat_map(|(a, b)| (u64::from(a)..b).map(|x| x as u32))
}

#[cfg(test)]
mod tests {
    use super::record::{DestinationRecord, GotRecord, ProducerRecord};
    use super::*;

    const P: Producer = Producer {
        class: 0,
        round: 1,
        vu: 0,
    };

    fn settled(l: &Ledger) -> Counts {
        l.settle(true).into_iter().next().map(|(_, c)| c).unwrap()
    }

    #[test]
    fn what_was_sent_and_not_received_is_lost_and_what_came_twice_is_duplicated() {
        let mut producer = Ledger::default();
        for seq in 0..10 {
            producer.sent("/queue/a", P, seq);
        }
        producer.send_failed("/queue/a", P, 9);
        let mut c1 = Ledger::default();
        for seq in [0, 1, 3, 2] {
            c1.took("/queue/a", P, seq, Taken::Received, false);
        }
        let mut c2 = Ledger::default();
        for seq in [3, 4, 5] {
            c2.took("/queue/a", P, seq, Taken::Received, false);
        }
        let mut drain = Ledger::default();
        drain.took("/queue/a", P, 6, Taken::Drained, false);
        drain.foreign("/queue/a");
        let mut round = Ledger::default();
        round.absorb(producer);
        round.absorb(c1);
        round.absorb(c2);
        round.absorb(drain);
        let c = settled(&round);
        assert_eq!(c.sent, 10);
        assert_eq!(c.received, 6, "0..=5 once each");
        assert_eq!(c.drained, 1);
        assert_eq!(c.duplicated, 1, "3 came to both consumers");
        assert_eq!(c.out_of_order, 1, "2 after 3");
        assert_eq!(c.foreign, 1);
        assert_eq!((c.lost, c.lost_failed), (3, 1), "7, 8 and the failed 9");
    }

    #[test]
    fn a_redelivery_is_excused_only_where_the_first_copy_was_never_acknowledged() {
        let mut producer = Ledger::default();
        for seq in 0..6 {
            producer.sent("/queue/a", P, seq);
        }
        let mut c = Ledger::default();
        let took = |c: &mut Ledger, seq, again| c.took("/queue/a", P, seq, Taken::Received, again);
        // 0 taken and never acknowledged: its redelivery is the broker's right.
        took(&mut c, 0, false);
        took(&mut c, 0, true);
        // 1 acknowledged on its own, 2 and 3 by a cumulative ack: each came again.
        c.took_acknowledged("/queue/a", P, 1, false);
        took(&mut c, 2, false);
        took(&mut c, 3, false);
        c.acknowledged_all();
        for seq in [1, 2, 3] {
            took(&mut c, seq, true);
        }
        // And a copy that does not say it is redelivered is a duplicate whatever it is.
        took(&mut c, 4, false);
        took(&mut c, 4, false);
        let mut run = Ledger::default();
        run.absorb(producer);
        run.absorb(c);
        let got = settled(&run);
        assert_eq!((got.received, got.duplicated, got.redelivered), (5, 4, 4));
        assert_eq!(got.lost, 1, "5");
    }

    #[test]
    fn messages_taken_that_no_producer_sent_are_counted_as_never_sent() {
        let q = Producer { vu: 9, ..P };
        let mut producer = Ledger::default();
        for seq in 0..4 {
            producer.sent("/queue/a", P, seq);
        }
        for seq in 10..12 {
            producer.sent("/queue/a", P, seq);
        }
        let mut consumer = Ledger::default();
        // What was sent, then a broker's forgeries: P's 100 and 101 (past its sends) and
        // 4 (between its runs), and a message of a producer the run never had.
        for seq in [0, 1, 2, 3, 10, 11, 100, 101, 4] {
            consumer.took("/queue/a", P, seq, Taken::Received, false);
        }
        consumer.took("/queue/a", q, 5, Taken::Drained, false);
        let mut run = Ledger::default();
        run.absorb(producer);
        run.absorb(consumer);
        let whole = &run.settle(true)[0].1;
        assert_eq!((whole.sent, whole.received, whole.drained), (6, 9, 1));
        assert_eq!((whole.unsent, whole.lost), (4, 0));
        // In one shard's report, a producer it never saw may be another shard's.
        assert_eq!(run.settle(false)[0].1.unsent, 3);
        // And a ledger kept in run.json works it out again, as merge does.
        let back = Ledger::from_record(&run.to_record(false)).unwrap();
        assert_eq!(back.settle(true)[0].1, *whole);
    }

    #[test]
    fn a_ledger_kept_in_run_json_adds_up_as_the_one_it_came_from() {
        let mut a = Ledger::default();
        for seq in 0..5000 {
            a.sent("/queue/a", P, seq);
            if seq % 7 != 0 {
                a.took("/queue/a", P, seq, Taken::Received, false);
            }
        }
        a.send_failed("/queue/a", P, 14);
        let json = serde_json::to_string(&a.to_record(true)).unwrap();
        let back: LedgerRecord = serde_json::from_str(&json).unwrap();
        let b = Ledger::from_record(&back).unwrap();
        assert_eq!(b.settle(true), a.settle(true));
        // Another shard received what this one did not: nothing is lost, nothing doubled.
        let mut other = Ledger::default();
        for seq in (0..5000).filter(|s| s % 7 == 0) {
            other.took("/queue/a", P, seq, Taken::Received, false);
        }
        let mut merged = b;
        merged.absorb(Ledger::from_record(&other.to_record(true)).unwrap());
        let c = settled(&merged);
        assert_eq!((c.received, c.lost, c.duplicated), (5000, 0, 0));
    }

    #[test]
    fn a_hostile_sequence_number_costs_a_chunk_and_past_the_bound_is_counted_untracked() {
        let mut l = Ledger {
            budget: Some(2),
            ..Ledger::default()
        };
        l.took("/q", P, u32::MAX, Taken::Received, false);
        l.took("/q", P, 0, Taken::Received, false);
        l.took("/q", P, 1 << 20, Taken::Received, false);
        let c = settled(&l);
        assert_eq!((c.received, c.untracked), (2, 1));
    }

    #[test]
    fn a_record_whose_counts_contradict_its_sets_is_refused_saying_how() {
        let mut l = Ledger::default();
        for seq in 0..891 {
            l.sent("/q", P, seq);
            l.took("/q", P, seq, Taken::Received, false);
        }
        let good = l.to_record(true);
        assert!(Ledger::from_record(&good).is_ok());
        let mut r = good.clone();
        r.destinations[0].counts.received = 1_000_000_000_000;
        let why = Ledger::from_record(&r).unwrap_err();
        assert!(
            why.contains("1000000000000 received") && why.contains("891"),
            "{why}"
        );
        // Runs that claim more sends than were counted would settle as lost.
        let mut r = good.clone();
        r.producers[0].runs = vec![(0, 0, 1 << 29)];
        let why = Ledger::from_record(&r).unwrap_err();
        assert!(
            why.contains("891 sent") && why.contains("536870912"),
            "{why}"
        );
        let mut r = good;
        r.destinations[0].counts.send_failed = 892;
        assert!(Ledger::from_record(&r).is_err());
    }

    #[test]
    fn a_record_out_of_order_or_out_of_range_is_refused() {
        let mut r = LedgerRecord::default();
        r.destinations.push(DestinationRecord {
            name: "/q".into(),
            counts: Counts::default(),
        });
        r.producers.push(ProducerRecord {
            got: vec![GotRecord {
                destination: 0,
                how: Taken::Received,
                ranges: vec![(10, 20), (5, 6)],
            }],
            ..ProducerRecord::of(P)
        });
        assert!(Ledger::from_record(&r).is_err());
        r.producers[0].got = vec![];
        r.producers[0].runs = vec![(3, 0, 1)];
        assert!(Ledger::from_record(&r).is_err());
        // Sends beyond what a ledger could hold would take for ever to settle: refused.
        r.producers[0].runs = vec![(0, 0, u32::MAX); 200];
        assert!(Ledger::from_record(&r).is_err());
    }
}
