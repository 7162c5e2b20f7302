//! Visibility: how long a write to a shared calendar takes to reach each user who should
//! see it, and which writes some of them never saw.
//!
//! A writer stamps what it writes (see [`Stamp`]) and, once the server has acknowledged
//! it, notes the write in its [`Book`] with the time of the acknowledgement. An observer
//! notes, in its own book, the first time each stamp reached it and by which operation.
//! Books add up (users into a round); only then is the round settled: every write held
//! against every member of its team who reads (its writer apart), each pair seen (with
//! its latency from the acknowledgement to the first sight), superseded (the observer
//! first saw a later version of the same event), or unseen by the round's end. A stamp
//! nobody acknowledged, one from another run, and a sight by someone outside the
//! write's team are counted apart. Times are the wall clock of the one process that
//! runs the team.
//!
//! Everything in a stamp comes from the server, so it is parsed as hostile text and
//! every table is bounded: past [`MAX_WRITES`] writes or [`MAX_SIGHTS`] sights, the rest
//! are counted as `untracked`.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};

use hdrhistogram::Histogram;

use crate::ledger::Producer;

/// Writes a round's books keep, in all.
pub(crate) const MAX_WRITES: usize = 1 << 22;
/// First sights a round's books keep, in all.
pub(crate) const MAX_SIGHTS: usize = 1 << 23;
/// Unseen writes named per run; the rest are counted.
pub(crate) const MAX_NAMED: usize = 20;
/// The iCalendar property a stamp travels in.
pub(crate) const PROPERTY: &str = "X-LOADMIX-STAMP";
/// The longest stamp read; a longer value is not one of ours.
const MAX_STAMP: usize = 256;

/// Set in the pick number of a write that is the second item of one pick (a Morse Code
/// update writes a new item and changes one: two writes, one acknowledgement). No pick
/// reaches this bit.
pub(crate) const SECOND_ITEM: u64 = 1 << 63;

/// A write's pick number as a reader wants it named.
pub(crate) fn seq_text(seq: u64) -> String {
    match seq & SECOND_ITEM {
        0 => seq.to_string(),
        _ => format!("{} (its changed item)", seq & !SECOND_ITEM),
    }
}

/// A user of the run, writer or observer: its class, round and index.
pub(crate) type Who = Producer;

/// What a write carries: who wrote it, its pick number, and the event it belongs to (the
/// pick number of the write that made the event), so that a later version of the event
/// says the earlier ones were superseded.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) struct Stamp {
    pub writer: Who,
    pub seq: u64,
    pub event: u64,
}

/// Where a write went: the kind of team (its index in `teams:`) and which of them.
pub(crate) type TeamId = (u32, u32);

/// What a stamp read from a server came to.
#[derive(Debug, PartialEq)]
pub(crate) enum Read {
    Ours(Stamp),
    /// Well formed, from another run.
    Foreign,
    /// Not a stamp at all.
    Garbled,
}

impl Stamp {
    /// The property's value: `RUN/CLASS.ROUND.VU/SEQ/EVENT`.
    pub(crate) fn text(&self, run_id: &str) -> String {
        let w = self.writer;
        format!(
            "{run_id}/{}.{}.{}/{}/{}",
            w.class, w.round, w.vu, self.seq, self.event
        )
    }

    /// A value read back, judged against this run's id.
    pub(crate) fn read(value: &str, run_id: &str) -> Read {
        let value = value.trim();
        if value.len() > MAX_STAMP {
            return Read::Garbled;
        }
        let mut parts = value.rsplitn(4, '/');
        let (Some(event), Some(seq), Some(who), Some(run)) =
            (parts.next(), parts.next(), parts.next(), parts.next())
        else {
            return Read::Garbled;
        };
        let mut w = who.split('.');
        let parsed = (|| {
            let writer = Producer {
                class: w.next()?.parse().ok()?,
                round: w.next()?.parse().ok()?,
                vu: w.next()?.parse().ok()?,
            };
            if w.next().is_some() {
                return None;
            }
            Some(Stamp {
                writer,
                seq: seq.parse().ok()?,
                event: event.parse().ok()?,
            })
        })();
        match parsed {
            None => Read::Garbled,
            Some(_) if run != run_id => Read::Foreign,
            Some(s) => Read::Ours(s),
        }
    }
}

/// The stamps in an iCalendar text: every `X-LOADMIX-STAMP` property's value, its
/// folded lines unfolded (a server may fold a long line as RFC 5545 allows).
pub(crate) fn stamps_in(text: &str) -> Vec<&str> {
    let mut out = Vec::new();
    let mut rest = text;
    while let Some(i) = rest.find(PROPERTY) {
        let after = &rest[i + PROPERTY.len()..];
        // Only at the start of a line, and only the property itself (`:` or a parameter).
        let at_line_start = i == 0 || rest[..i].ends_with('\n');
        if at_line_start && (after.starts_with(':') || after.starts_with(';')) {
            let value_start = after.find(':').map_or(after.len(), |c| c + 1);
            let line_end = after.find('\n').unwrap_or(after.len());
            if value_start <= line_end {
                out.push(&after[value_start..line_end]);
            }
        }
        rest = after;
    }
    out
}

/// An unfolded copy of an iCalendar text (CRLF or LF followed by a space or tab joins
/// the lines), only when it has folds; the stamps are then read from it.
pub(crate) fn unfold(text: &str) -> std::borrow::Cow<'_, str> {
    if !text.contains("\n ") && !text.contains("\n\t") {
        return std::borrow::Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len());
    let mut lines = text.split('\n').peekable();
    while let Some(line) = lines.next() {
        out.push_str(line.strip_suffix('\r').unwrap_or(line));
        match lines.peek() {
            Some(next) if next.starts_with(' ') || next.starts_with('\t') => {
                let next = lines.next().unwrap_or_default();
                out.push_str(next.get(1..).unwrap_or_default().trim_end_matches('\r'));
                // A line may be folded more than once.
                while let Some(n) = lines.peek() {
                    if !(n.starts_with(' ') || n.starts_with('\t')) {
                        break;
                    }
                    let n = lines.next().unwrap_or_default();
                    out.push_str(n.get(1..).unwrap_or_default().trim_end_matches('\r'));
                }
                out.push('\n');
            }
            Some(_) => out.push('\n'),
            None => {}
        }
    }
    std::borrow::Cow::Owned(out)
}

/// Microseconds since the Unix epoch, now.
pub(crate) fn now_us() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_micros().min(u128::from(u64::MAX)) as u64)
}

/// Who should see a write.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Audience {
    /// Every member of the write's team who reads what it writes (a shared calendar's).
    Team,
    /// These users only: an invitation's attendees, an answer's organizer.
    Only(Arc<[Who]>),
}

/// One acknowledged write.
#[derive(Debug, Clone)]
struct Write {
    event: u64,
    team: TeamId,
    audience: Audience,
    /// The writing operation's label (an index into its class's labels).
    label: u16,
    acked_us: u64,
}

/// One observer's first sight of one stamp.
#[derive(Debug, Clone, Copy)]
struct Sight {
    event: u64,
    first_us: u64,
    /// The operation that first revealed it.
    label: u16,
    /// The observer's team.
    team: TeamId,
    /// An incremental sync has reported this version to the observer: another that
    /// reports it again is a duplicate (a poll or an earlier full read is not).
    synced: bool,
}

/// How often an observer's operation looked.
#[derive(Debug, Clone, Copy, Default)]
struct Polls {
    count: u64,
    first_us: u64,
    last_us: u64,
}

/// What users wrote and saw, by stamp. One per user; added up per round.
#[derive(Debug, Default)]
pub(crate) struct Book {
    writes: HashMap<(Who, u64), Write>,
    sights: HashMap<(Who, Who, u64), Sight>,
    /// Per observer and operation (class, label).
    polls: HashMap<(Who, u16), Polls>,
    /// A sync that reported a version its observer had already seen.
    duplicated: BTreeMap<(u16, u16), u64>,
    foreign: u64,
    garbled: u64,
    untracked: u64,
}

impl Book {
    /// `stamp`'s write, which `audience` of team `team` should see, was acknowledged at
    /// `acked_us`.
    pub(crate) fn wrote(
        &mut self,
        stamp: Stamp,
        (team, audience): (TeamId, Audience),
        label: u16,
        acked_us: u64,
    ) {
        if self.writes.len() >= MAX_WRITES {
            self.untracked += 1;
            return;
        }
        self.writes.insert(
            (stamp.writer, stamp.seq),
            Write {
                event: stamp.event,
                team,
                audience,
                label,
                acked_us,
            },
        );
    }

    /// Observer `who` (of team `team`) looked, with operation `label`, at `at_us`.
    pub(crate) fn looked(&mut self, who: Who, label: u16, at_us: u64) {
        let p = self.polls.entry((who, label)).or_default();
        if p.count == 0 {
            p.first_us = at_us;
        }
        p.count += 1;
        p.last_us = at_us;
    }

    /// Observer `who` read stamp value `value` through operation `label` at `at_us`;
    /// `news` when the server said it was a change (an incremental sync), so that a
    /// version an earlier sync of the observer's already reported is a duplicate.
    pub(crate) fn saw(&mut self, who: Who, team: TeamId, value: &str, run_id: &str, at: Look) {
        let stamp = match Stamp::read(value, run_id) {
            Read::Ours(s) => s,
            Read::Foreign => {
                self.foreign += 1;
                return;
            }
            Read::Garbled => {
                self.garbled += 1;
                return;
            }
        };
        // A writer reading its own writes back is no sight.
        if stamp.writer == who {
            return;
        }
        let key = (who, stamp.writer, stamp.seq);
        if let Some(s) = self.sights.get_mut(&key) {
            if at.news && std::mem::replace(&mut s.synced, true) {
                *self.duplicated.entry((who.class, at.label)).or_default() += 1;
            }
            return;
        }
        if self.sights.len() >= MAX_SIGHTS {
            self.untracked += 1;
            return;
        }
        self.sights.insert(
            key,
            Sight {
                event: stamp.event,
                first_us: at.at_us,
                label: at.label,
                team,
                synced: at.news,
            },
        );
    }

    /// Add another user's.
    pub(crate) fn absorb(&mut self, o: Book) {
        for (k, w) in o.writes {
            if self.writes.len() >= MAX_WRITES {
                self.untracked += 1;
                continue;
            }
            self.writes.insert(k, w);
        }
        for (k, s) in o.sights {
            let full = self.sights.len() >= MAX_SIGHTS;
            match self.sights.get_mut(&k) {
                Some(mine) if mine.first_us <= s.first_us => {}
                Some(mine) => *mine = s,
                None if full => self.untracked += 1,
                None => {
                    self.sights.insert(k, s);
                }
            }
        }
        for (k, p) in o.polls {
            let mine = self.polls.entry(k).or_default();
            if mine.count == 0 {
                *mine = p;
            } else {
                mine.count += p.count;
                mine.first_us = mine.first_us.min(p.first_us);
                mine.last_us = mine.last_us.max(p.last_us);
            }
        }
        for (k, n) in o.duplicated {
            *self.duplicated.entry(k).or_default() += n;
        }
        self.foreign += o.foreign;
        self.garbled += o.garbled;
        self.untracked += o.untracked;
    }
}

/// How a sight came: the operation, when, and whether the server called it a change.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Look {
    pub label: u16,
    pub at_us: u64,
    pub news: bool,
}

/// Counts for writes (or sights) of one operation, or of all.
#[derive(Debug, Clone)]
pub(crate) struct Tally {
    /// Acknowledged writes (for an observing operation: 0).
    pub writes: u64,
    /// (write, observer) pairs that should have been seen.
    pub expected: u64,
    pub seen: u64,
    /// Seen before the writer had its acknowledgement (latency counted as 0).
    pub seen_before_ack: u64,
    pub superseded: u64,
    pub unseen: u64,
    /// Versions a sync reported again after an earlier sync of the same observer had.
    pub duplicated: u64,
    /// Microseconds from the acknowledgement to the first sight.
    pub latency: Histogram<u64>,
    /// For an observing operation: its looks, the observers who looked, and the time
    /// from each one's first look to its last, added up.
    pub looks: u64,
    pub lookers: u64,
    pub span_us: u64,
}

impl Default for Tally {
    fn default() -> Tally {
        Tally {
            writes: 0,
            expected: 0,
            seen: 0,
            seen_before_ack: 0,
            superseded: 0,
            unseen: 0,
            duplicated: 0,
            latency: new_histogram(),
            looks: 0,
            lookers: 0,
            span_us: 0,
        }
    }
}

/// Latency histograms of visibility: 1 µs to 1 h, 3 significant digits.
pub(crate) fn new_histogram() -> Histogram<u64> {
    Histogram::new_with_bounds(1, 3_600_000_000, 3).unwrap_or_else(|_| {
        Histogram::new(3).unwrap_or_else(|_| unreachable!("3 significant digits is valid"))
    })
}

impl Tally {
    pub(crate) fn add(&mut self, o: &Tally) {
        self.writes += o.writes;
        self.expected += o.expected;
        self.seen += o.seen;
        self.seen_before_ack += o.seen_before_ack;
        self.superseded += o.superseded;
        self.unseen += o.unseen;
        self.duplicated += o.duplicated;
        // Same bounds on both sides: adding cannot fail.
        let _ = self.latency.add(&o.latency);
        self.looks += o.looks;
        self.lookers += o.lookers;
        self.span_us += o.span_us;
    }

    /// The mean time between two looks of one observer, in µs; `None` before two.
    pub(crate) fn poll_interval_us(&self) -> Option<f64> {
        let gaps = self.looks.checked_sub(self.lookers).filter(|g| *g > 0)?;
        Some(self.span_us as f64 / gaps as f64)
    }

    fn seen_at(&mut self, acked_us: u64, first_us: u64) {
        self.seen += 1;
        if first_us < acked_us {
            self.seen_before_ack += 1;
        }
        self.latency
            .saturating_record(first_us.saturating_sub(acked_us).max(1));
    }
}

/// A write no observer of its team saw (nor a later version of), named.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Unseen {
    pub writer: Who,
    pub seq: u64,
    /// The writing operation's label.
    pub label: u16,
    /// Observers who missed it, of those who should have seen it.
    pub missed: u64,
    pub of: u64,
}

/// A round's books, settled.
#[derive(Debug, Clone, Default)]
pub(crate) struct Settled {
    pub all: Tally,
    /// Per writing operation (class, label).
    pub by_write: BTreeMap<(u16, u16), Tally>,
    /// Per observing operation (class, label): what it saw first, and how often it looked.
    pub by_observer: BTreeMap<(u16, u16), Tally>,
    /// Sights of a stamp no writer had acknowledged (its answer lost or failed, the write
    /// done all the same).
    pub unacknowledged: u64,
    /// Sights by a user outside the write's team.
    pub unexpected: u64,
    pub foreign: u64,
    pub garbled: u64,
    pub untracked: u64,
    /// The first writes some observer never saw.
    pub unseen: Vec<Unseen>,
    /// Unseen writes past those named.
    pub unnamed: u64,
}

impl Book {
    /// The round settled: each write against its audience (its writer apart): the
    /// observers of its team that `observers` lists, or the users it names.
    pub(crate) fn settle(&self, observers: impl Fn(TeamId) -> Vec<Who>) -> Settled {
        let mut out = Settled {
            foreign: self.foreign,
            garbled: self.garbled,
            untracked: self.untracked,
            ..Settled::default()
        };
        // The latest version of each event each observer saw: (observer, writer, event).
        let mut latest: HashMap<(Who, Who, u64), u64> = HashMap::new();
        for ((obs, writer, seq), s) in &self.sights {
            let l = latest.entry((*obs, *writer, s.event)).or_default();
            *l = (*l).max(*seq);
        }
        let mut teams: HashMap<TeamId, Vec<Who>> = HashMap::new();
        let mut writes: Vec<(&(Who, u64), &Write)> = self.writes.iter().collect();
        writes.sort_by_key(|(k, _)| **k);
        for (&(writer, seq), w) in writes {
            let audience: &[Who] = match &w.audience {
                Audience::Team => teams.entry(w.team).or_insert_with(|| observers(w.team)),
                Audience::Only(who) => who,
            };
            let mut t = Tally {
                writes: 1,
                ..Tally::default()
            };
            for obs in audience.iter().filter(|o| **o != writer) {
                t.expected += 1;
                match self.sights.get(&(*obs, writer, seq)) {
                    Some(s) => {
                        t.seen_at(w.acked_us, s.first_us);
                        let by = out.by_observer.entry((obs.class, s.label)).or_default();
                        by.seen_at(w.acked_us, s.first_us);
                    }
                    None if latest
                        .get(&(*obs, writer, w.event))
                        .is_some_and(|l| *l > seq) =>
                    {
                        t.superseded += 1
                    }
                    None => t.unseen += 1,
                }
            }
            if t.unseen > 0 {
                match out.unseen.len() < MAX_NAMED {
                    true => out.unseen.push(Unseen {
                        writer,
                        seq,
                        label: w.label,
                        missed: t.unseen,
                        of: t.expected,
                    }),
                    false => out.unnamed += 1,
                }
            }
            out.all.add(&t);
            out.by_write
                .entry((writer.class, w.label))
                .or_default()
                .add(&t);
        }
        for ((obs, writer, seq), s) in &self.sights {
            match self.writes.get(&(*writer, *seq)) {
                None => out.unacknowledged += 1,
                Some(w) if w.team != s.team => out.unexpected += 1,
                Some(_) => {}
            }
            let _ = obs;
        }
        for ((who, label), p) in &self.polls {
            let by = out.by_observer.entry((who.class, *label)).or_default();
            by.looks += p.count;
            by.lookers += 1;
            by.span_us += p.last_us.saturating_sub(p.first_us);
        }
        for ((class, label), n) in &self.duplicated {
            out.by_observer
                .entry((*class, *label))
                .or_default()
                .duplicated += n;
            out.all.duplicated += n;
        }
        out
    }
}

impl Settled {
    /// Add another round's.
    pub(crate) fn add(&mut self, o: Settled) {
        self.all.add(&o.all);
        for (k, t) in o.by_write {
            self.by_write.entry(k).or_default().add(&t);
        }
        for (k, t) in o.by_observer {
            self.by_observer.entry(k).or_default().add(&t);
        }
        self.unacknowledged += o.unacknowledged;
        self.unexpected += o.unexpected;
        self.foreign += o.foreign;
        self.garbled += o.garbled;
        self.untracked += o.untracked;
        for u in o.unseen {
            match self.unseen.len() < MAX_NAMED {
                true => self.unseen.push(u),
                false => self.unnamed += 1,
            }
        }
        self.unnamed += o.unnamed;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn who(vu: u32) -> Who {
        Producer {
            class: 0,
            round: 1,
            vu,
        }
    }

    fn look(label: u16, at_us: u64) -> Look {
        Look {
            label,
            at_us,
            news: false,
        }
    }

    #[test]
    fn a_stamp_reads_back_and_judges_its_run() {
        let s = Stamp {
            writer: who(3),
            seq: 17,
            event: 9,
        };
        let text = s.text("run-a/b");
        assert_eq!(Stamp::read(&text, "run-a/b"), Read::Ours(s));
        assert_eq!(Stamp::read(&text, "other"), Read::Foreign);
        for bad in [
            "",
            "x",
            "r/1.2/3/4",
            "r/1.2.3.4/5/6",
            "r/a.b.c/1/2",
            &"9".repeat(300),
        ] {
            assert_eq!(Stamp::read(bad, "r"), Read::Garbled, "{bad}");
        }
    }

    #[test]
    fn stamps_are_found_in_folded_text_only_as_the_property() {
        let text = "BEGIN:VEVENT\r\nDESCRIPTION:X-LOADMIX-STAMP:not/0.1.2/3/4\r\nX-LOADMIX-STAMP:r/0.1.\r\n 2/3/4\r\nEND:VEVENT\r\n";
        let un = unfold(text);
        assert_eq!(stamps_in(&un), vec!["r/0.1.2/3/4"]);
    }

    #[test]
    fn a_round_settles_seen_superseded_and_unseen() {
        let team = (0, 0);
        let mut writer = Book::default();
        // Event 1 written twice (seq 1, then 2), event 3 once.
        for (seq, event, at) in [(1, 1, 1_000), (2, 1, 2_000), (3, 3, 3_000)] {
            let s = Stamp {
                writer: who(0),
                seq,
                event,
            };
            writer.wrote(s, (team, Audience::Team), 5, at);
        }
        let mut a = Book::default();
        // Observer 1 sees seq 1 at 1,500 and seq 3 at 2,900 (before the ack).
        a.saw(
            who(1),
            team,
            &Stamp {
                writer: who(0),
                seq: 1,
                event: 1,
            }
            .text("r"),
            "r",
            look(7, 1_500),
        );
        a.saw(
            who(1),
            team,
            &Stamp {
                writer: who(0),
                seq: 3,
                event: 3,
            }
            .text("r"),
            "r",
            look(7, 2_900),
        );
        // Observer 2 sees only the second version of event 1.
        let mut b = Book::default();
        b.saw(
            who(2),
            team,
            &Stamp {
                writer: who(0),
                seq: 2,
                event: 1,
            }
            .text("r"),
            "r",
            look(7, 2_500),
        );
        // And a stamp nobody acknowledged.
        b.saw(
            who(2),
            team,
            &Stamp {
                writer: who(0),
                seq: 99,
                event: 99,
            }
            .text("r"),
            "r",
            look(7, 2_600),
        );
        writer.absorb(a);
        writer.absorb(b);
        let s = writer.settle(|_| vec![who(0), who(1), who(2)]);
        assert_eq!(s.all.writes, 3);
        assert_eq!(s.all.expected, 6);
        assert_eq!(s.all.seen, 3);
        assert_eq!(s.all.seen_before_ack, 1);
        assert_eq!(
            s.all.superseded, 1,
            "observer 2 saw seq 2 of event 1, not seq 1"
        );
        assert_eq!(s.all.unseen, 2, "seq 2 by observer 1, seq 3 by observer 2");
        assert_eq!(s.unacknowledged, 1);
        assert_eq!(s.unseen.len(), 2);
        // Latencies 500 and 500 µs, and 1 (seen before the ack).
        assert_eq!(s.all.latency.len(), 3);
        assert_eq!(s.all.latency.max(), s.all.latency.highest_equivalent(500));
    }

    #[test]
    fn a_sync_that_repeats_a_version_is_a_duplicate_and_a_poll_is_not() {
        let news = |at_us| Look {
            label: 8,
            at_us,
            news: true,
        };
        let team = (0, 0);
        let v = Stamp {
            writer: who(0),
            seq: 1,
            event: 1,
        }
        .text("r");
        let mut b = Book::default();
        b.saw(who(1), team, &v, "r", look(7, 10));
        b.saw(who(1), team, &v, "r", look(7, 20));
        // The first sync to report the version after polls saw it reports a real change
        // since its token; a second one repeats itself.
        b.saw(who(1), team, &v, "r", news(30));
        b.saw(who(1), team, &v, "r", look(7, 35));
        b.saw(who(1), team, &v, "r", news(40));
        let s = b.settle(|_| vec![who(1)]);
        assert_eq!(s.all.duplicated, 1);
        assert_eq!(s.by_observer[&(0, 8)].duplicated, 1);
    }

    #[test]
    fn a_write_for_named_users_is_held_against_them_alone() {
        let team = (0, 0);
        let invite = Stamp {
            writer: who(0),
            seq: 1,
            event: 1,
        };
        let mut b = Book::default();
        // An invitation of users 1 and 2, and the answer of user 1 to its organizer.
        let invitees: Arc<[Who]> = Arc::from(vec![who(1), who(2)]);
        b.wrote(invite, (team, Audience::Only(invitees)), 4, 1_000);
        let answer = Stamp {
            writer: who(1),
            seq: 1,
            event: 1,
        };
        b.wrote(
            answer,
            (team, Audience::Only(Arc::from(vec![who(0)]))),
            6,
            2_000,
        );
        b.saw(who(1), team, &invite.text("r"), "r", look(7, 1_400));
        b.saw(who(0), team, &answer.text("r"), "r", look(7, 2_300));
        // Users 3 and 4 read the team's calendar, which neither write went to.
        let s = b.settle(|_| vec![who(0), who(1), who(2), who(3), who(4)]);
        assert_eq!(s.all.writes, 2);
        assert_eq!(s.all.expected, 3, "two invitees and one organizer");
        assert_eq!(s.all.seen, 2);
        assert_eq!(s.all.unseen, 1, "user 2 never read the invitation");
        assert_eq!(s.unseen[0].writer, who(0));
        assert_eq!(s.by_write[&(0, 4)].expected, 2);
        assert_eq!(s.by_write[&(0, 6)].seen, 1);
        assert_eq!(s.all.latency.max(), s.all.latency.highest_equivalent(400));
    }
}
