//! The ledger as `run.json` keeps it, so that `merge` can add shards' ledgers and a saved
//! report can be read back: per destination its counts (losses worked out), per producer
//! its sends, phase marks and what was taken of them as ranges, and each window's
//! crossings. A record read back is held to what loadmix could have written: indexes in
//! range, ranges in order, within the ledger's bounds, counts that agree with the sets.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::{
    CHUNK_BITS, Counts, Flags, Ledger, MAX_CHUNKS, MAX_DESTINATIONS, MAX_MARKS, MAX_RUNS, Producer,
    Sends, Seqs, Taken,
};

impl Ledger {
    /// The ledger as `run.json` keeps it, so that `merge` can add shards' ledgers.
    pub(crate) fn to_record(&self, whole: bool) -> LedgerRecord {
        let mut producers: BTreeMap<Producer, ProducerRecord> = BTreeMap::new();
        for (p, s) in &self.sends {
            let r = producers
                .entry(*p)
                .or_insert_with(|| ProducerRecord::of(*p));
            r.runs = s.runs.clone();
            r.failed = s.failed.ranges();
            r.unattributed = s.unattributed;
            r.marks = s.marks.clone();
        }
        for (p, f) in &self.flags {
            let r = producers
                .entry(*p)
                .or_insert_with(|| ProducerRecord::of(*p));
            r.duplicated = f.duplicated.ranges();
            r.redelivered = f.redelivered.ranges();
            r.out_of_order = f.out_of_order.ranges();
        }
        for ((p, d, how), g) in &self.got {
            let r = producers
                .entry(*p)
                .or_insert_with(|| ProducerRecord::of(*p));
            r.got.push(GotRecord {
                destination: *d,
                how: *how,
                ranges: g.ranges(),
            });
        }
        LedgerRecord {
            drained: self.drained,
            destinations: self
                .settle(whole)
                .into_iter()
                .map(|(name, counts)| DestinationRecord { name, counts })
                .collect(),
            producers: producers.into_values().collect(),
            crossed: self
                .crossed
                .iter()
                .map(|(&(round, window), &messages)| CrossedRecord {
                    round,
                    window,
                    messages,
                })
                .collect(),
        }
    }

    /// A ledger from its record, or why the record is not one this could write
    /// (out-of-range indexes, ranges out of order, more than the bounds, counts that
    /// contradict the sets they count).
    pub(crate) fn from_record(r: &LedgerRecord) -> Result<Ledger, String> {
        if r.destinations.len() > MAX_DESTINATIONS {
            return Err(format!("more than {MAX_DESTINATIONS} destinations"));
        }
        let mut l = Ledger {
            drained: r.drained,
            ..Ledger::default()
        };
        for d in &r.destinations {
            let i = l.dest(&d.name) as usize;
            let mut c = d.counts.clone();
            // Losses are worked out again from the sets.
            c.lost = 0;
            c.lost_failed = 0;
            c.unsent = 0;
            c.not_drained = 0;
            l.counts[i] = c;
        }
        let n = l.names.len() as u32;
        // Working out the losses visits every send: a record may name no more of them
        // than the sets can hold.
        let sends: u64 = r
            .producers
            .iter()
            .flat_map(|p| &p.runs)
            .map(|r| u64::from(r.2))
            .sum();
        if sends > MAX_CHUNKS as u64 * u64::from(CHUNK_BITS) {
            return Err(format!("{sends} sends, more than a ledger holds"));
        }
        for p in &r.producers {
            let who = format!(
                "class {} round {} user {}",
                p.producer.class, p.producer.round, p.producer.vu
            );
            if p.runs.len() > MAX_RUNS
                || p.runs.iter().any(|r| r.0 >= n)
                || p.got.iter().any(|g| g.destination >= n)
            {
                return Err(format!(
                    "{who}: a destination out of range, or too many runs"
                ));
            }
            let mut budget = *l.budget();
            let unreadable = || format!("{who}: sequence ranges out of order or past the bound");
            let failed = from_ranges(&p.failed, &mut budget).ok_or_else(unreadable)?;
            for g in &p.got {
                let set = from_ranges(&g.ranges, &mut budget).ok_or_else(unreadable)?;
                if l.got
                    .insert((p.producer, g.destination, g.how), set)
                    .is_some()
                {
                    return Err(format!("{who}: one destination's takings listed twice"));
                }
            }
            let flags = Flags {
                duplicated: from_ranges(&p.duplicated, &mut budget).ok_or_else(unreadable)?,
                redelivered: from_ranges(&p.redelivered, &mut budget).ok_or_else(unreadable)?,
                out_of_order: from_ranges(&p.out_of_order, &mut budget).ok_or_else(unreadable)?,
            };
            l.budget = Some(budget);
            if flags != Flags::default() {
                l.flags.insert(p.producer, flags);
            }
            if p.marks.len() > MAX_MARKS || !p.marks.is_sorted_by(|a, b| a.0 <= b.0) {
                return Err(format!("{who}: phase marks out of order or too many"));
            }
            if !p.runs.is_empty() || failed.len() > 0 || p.unattributed > 0 {
                l.sends.insert(
                    p.producer,
                    Sends {
                        runs: p.runs.clone(),
                        failed,
                        unattributed: p.unattributed,
                        marks: p.marks.clone(),
                    },
                );
            }
        }
        if r.crossed.len() > MAX_CROSSED {
            return Err(format!("more than {MAX_CROSSED} windows crossed"));
        }
        for c in &r.crossed {
            let n = l.crossed.entry((c.round, c.window)).or_default();
            *n = n.saturating_add(c.messages);
        }
        l.agrees_with_its_sets()?;
        Ok(l)
    }

    /// Whether the counts are what the sets say: every message taken once is in exactly
    /// one set, and every send is in a run or counted past the runs' bound. A record whose
    /// counts say otherwise (more received than its sets hold, more sent than its runs)
    /// was not written by loadmix.
    fn agrees_with_its_sets(&self) -> Result<(), String> {
        let n = self.counts.len();
        let (mut received, mut drained) = (vec![0u64; n], vec![0u64; n]);
        for ((_, d, how), set) in &self.got {
            let into = match how {
                Taken::Received => &mut received,
                Taken::Drained => &mut drained,
            };
            into[*d as usize] += set.len();
        }
        for (i, c) in self.counts.iter().enumerate() {
            let name = &self.names[i];
            if c.received != received[i] || c.drained != drained[i] {
                return Err(format!(
                    "{name}: {} received and {} drained, but the messages it lists number {} and {}",
                    c.received, c.drained, received[i], drained[i]
                ));
            }
            if c.send_failed > c.sent {
                return Err(format!(
                    "{name}: {} sends failed of {} sent",
                    c.send_failed, c.sent
                ));
            }
        }
        let counted: u64 = self.counts.iter().map(|c| c.sent).sum();
        let listed: u64 = self
            .sends
            .values()
            .map(|s| s.runs.iter().map(|r| u64::from(r.2)).sum::<u64>() + s.unattributed)
            .sum();
        if counted != listed {
            return Err(format!(
                "{counted} sent, but its producers list {listed} sends"
            ));
        }
        Ok(())
    }
}

fn from_ranges(ranges: &[(u32, u64)], budget: &mut usize) -> Option<Seqs> {
    let mut s = Seqs::default();
    let mut prev = 0u64;
    for &(a, b) in ranges {
        if u64::from(a) < prev || b <= u64::from(a) || b > 1 << 32 {
            return None;
        }
        prev = b;
        for seq in u64::from(a)..b {
            s.insert(seq as u32, budget)?;
        }
    }
    Some(s)
}

/// A ledger as `run.json` keeps it: per destination its counts (losses worked out), and
/// per producer its sends and what was received of them, as ranges.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct LedgerRecord {
    /// Every destination was drained after its round: what is lost was never delivered.
    pub drained: bool,
    pub destinations: Vec<DestinationRecord>,
    pub producers: Vec<ProducerRecord>,
    /// Per round and fault window, the messages sent before it began and received after
    /// it ended.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub crossed: Vec<CrossedRecord>,
}

/// Windows' crossings a record may list: every window of every round of a long run.
const MAX_CROSSED: usize = 1 << 16;

/// One window's crossings: its round, its place in the round, how many messages.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CrossedRecord {
    pub round: u16,
    pub window: u16,
    pub messages: u64,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DestinationRecord {
    pub name: String,
    #[serde(flatten)]
    pub counts: Counts,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ProducerRecord {
    #[serde(flatten)]
    pub producer: Producer,
    /// (destination index, first sequence number, how many).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub runs: Vec<(u32, u32, u32)>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub failed: Vec<(u32, u64)>,
    #[serde(default, skip_serializing_if = "is_zero")]
    pub unattributed: u64,
    /// What consumers received or the drain took, per destination.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub got: Vec<GotRecord>,
    /// (first sequence number, phase of the round's fault timeline it was sent in).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub marks: Vec<(u32, u16)>,
    /// Sequence numbers taken more than once, flagged redelivered, taken out of order.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub duplicated: Vec<(u32, u64)>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub redelivered: Vec<(u32, u64)>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub out_of_order: Vec<(u32, u64)>,
}

/// What was taken of one producer's messages from one destination, one way.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct GotRecord {
    pub destination: u32,
    pub how: Taken,
    /// `[start, end)` ranges of sequence numbers.
    pub ranges: Vec<(u32, u64)>,
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

impl ProducerRecord {
    pub(super) fn of(producer: Producer) -> ProducerRecord {
        ProducerRecord {
            producer,
            runs: Vec::new(),
            failed: Vec::new(),
            unattributed: 0,
            got: Vec::new(),
            marks: Vec::new(),
            duplicated: Vec::new(),
            redelivered: Vec::new(),
            out_of_order: Vec::new(),
        }
    }
}
