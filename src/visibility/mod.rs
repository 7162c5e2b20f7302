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

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};

use hdrhistogram::Histogram;

use crate::ledger::Producer;

mod censored;
pub(crate) use censored::{Censored, Estimate};

/// Writes a round's books keep, in all.
pub(crate) const MAX_WRITES: usize = 1 << 22;
/// First sights a round's books keep, in all.
pub(crate) const MAX_SIGHTS: usize = 1 << 23;
/// Looks a round's books keep the times of, in all.
pub(crate) const MAX_LOOKS: usize = 1 << 23;
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

/// One look of an observer's operation: when it began, and when its answer came (µs).
/// Only a look that began after a write's acknowledgement could have been asked to show
/// it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
struct LookAt {
    began_us: u64,
    answered_us: u64,
}

/// The round's clock as the wall clock read it (µs since the epoch): what a gap still
/// open at its end is known to be at least.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Window {
    pub from_us: u64,
    pub to_us: u64,
}

/// The stamps writers put on the wire, at most [`MAX_WRITES`]; past it, `untold`: what
/// was sent is then not known.
#[derive(Debug, Default)]
struct Sent {
    stamps: HashSet<(Who, u64)>,
    untold: bool,
}

impl Sent {
    fn note(&mut self, writer: Who, seq: u64) {
        match self.stamps.len() < MAX_WRITES {
            true => {
                self.stamps.insert((writer, seq));
            }
            false => self.untold = true,
        }
    }
}

/// What users wrote and saw, by stamp. One per user; added up per round.
#[derive(Debug, Default)]
pub(crate) struct Book {
    writes: HashMap<(Who, u64), Write>,
    /// Every stamp a writer put on the wire (acknowledged or not): a stamp read back that
    /// its writer never sent is the server's invention, not a version of anything. Behind
    /// a lock, so that a driver that only reads its membership notes what it sends.
    sent: std::sync::Mutex<Sent>,
    sights: HashMap<(Who, Who, u64), Sight>,
    /// Per observer and operation (its label), its looks in the order they began.
    looks: HashMap<(Who, u16), Vec<LookAt>>,
    /// Looks in `looks`, against [`MAX_LOOKS`].
    looks_kept: usize,
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
        team: TeamId,
        audience: Audience,
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

    /// `stamp` is about to go on the wire, in a write.
    pub(crate) fn sent(&self, stamp: &Stamp) {
        self.sent_mut().note(stamp.writer, stamp.seq);
    }

    fn sent_mut(&self) -> std::sync::MutexGuard<'_, Sent> {
        self.sent.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Whether `writer` sent stamp `seq`, given what was sent and who sent anything in
    /// these books (when what was sent is not known, or `writer` sent nothing here, as a
    /// writer of another round: yes).
    fn was_sent(&self, sent: &Sent, writers: &HashSet<Who>, writer: Who, seq: u64) -> bool {
        sent.untold
            || sent.stamps.contains(&(writer, seq))
            || self.writes.contains_key(&(writer, seq))
            || !writers.contains(&writer)
    }

    /// Everyone who sent a stamp in these books.
    fn writers(&self, sent: &Sent) -> HashSet<Who> {
        let stamps = sent.stamps.iter().map(|k| k.0);
        stamps.chain(self.writes.keys().map(|k| k.0)).collect()
    }

    /// Observer `who` looked with operation `label`: it began at `look.began_us` and its
    /// answer came at `look.at_us`.
    pub(crate) fn looked(&mut self, who: Who, look: &Look) {
        if self.looks_kept >= MAX_LOOKS {
            self.untracked += 1;
            return;
        }
        self.looks_kept += 1;
        self.looks
            .entry((who, look.label))
            .or_default()
            .push(LookAt {
                began_us: look.began_us,
                answered_us: look.at_us,
            });
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
        let theirs = o.sent.into_inner().unwrap_or_else(|p| p.into_inner());
        let mine = self.sent.get_mut().unwrap_or_else(|p| p.into_inner());
        mine.untold |= theirs.untold;
        for (w, seq) in theirs.stamps {
            mine.note(w, seq);
        }
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
        for (k, looks) in o.looks {
            let room = MAX_LOOKS.saturating_sub(self.looks_kept);
            let kept = looks.len().min(room);
            self.untracked += (looks.len() - kept) as u64;
            self.looks_kept += kept;
            self.looks
                .entry(k)
                .or_default()
                .extend(looks.into_iter().take(kept));
        }
        for (k, n) in o.duplicated {
            *self.duplicated.entry(k).or_default() += n;
        }
        self.foreign += o.foreign;
        self.garbled += o.garbled;
        self.untracked += o.untracked;
    }
}

/// How a sight came: the operation, when it began and when its answer came, and whether
/// the server called it a change.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Look {
    pub label: u16,
    pub began_us: u64,
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
    /// The latency's two parts: from the acknowledgement to the answer of the observer's
    /// first look begun after it (the workload's poll gap), and from there to the first
    /// sight (the server's staleness, 0 when that look showed it). A write unseen at the
    /// round's end has them censored: the gap when no look began after it, else the
    /// staleness.
    pub poll_gap: Censored,
    pub staleness: Censored,
    /// For an observing operation: its looks, the observers who looked, and the time
    /// between one user's looks: from the round's start to its first, between two, and
    /// from its last to the round's end (censored, as is a whole round without a look).
    pub looks: u64,
    pub lookers: u64,
    pub look_gaps: Censored,
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
            poll_gap: Censored::default(),
            staleness: Censored::default(),
            looks: 0,
            lookers: 0,
            look_gaps: Censored::default(),
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
        self.poll_gap.add(&o.poll_gap);
        self.staleness.add(&o.staleness);
        self.looks += o.looks;
        self.lookers += o.lookers;
        self.look_gaps.add(&o.look_gaps);
    }

    /// The mean time between two looks of one observer, in µs, from its gaps with the
    /// rounds' ends censoring them: the Kaplan-Meier mean where the longest gap was seen
    /// whole (exact for a user who looks at a fixed interval), else the time the users
    /// ran over their looks (a rate's estimate, right for looks picked at random, which a
    /// round shorter than the interval does not cut short). `None` without a look.
    pub(crate) fn poll_interval_us(&self) -> Option<f64> {
        self.look_gaps.km_mean().or_else(|| {
            let ran = self.look_gaps.exact.mean() * self.look_gaps.exact.len() as f64
                + self.look_gaps.censored.mean() * self.look_gaps.censored.len() as f64;
            (self.looks > 0).then(|| ran / self.looks as f64)
        })
    }

    /// A write acknowledged at `acked_us` first seen at `first_us`; `look_us`, the answer
    /// to the observer's first look that began after the acknowledgement, if any.
    fn seen_at(&mut self, acked_us: u64, first_us: u64, look_us: Option<u64>) {
        self.seen += 1;
        if first_us < acked_us {
            self.seen_before_ack += 1;
        }
        let latency = first_us.saturating_sub(acked_us);
        self.latency.saturating_record(latency.max(1));
        // A look that began before the acknowledgement may show the write all the same:
        // then there was nothing to wait for.
        let looked = look_us.map_or(first_us, |l| l.min(first_us)).max(acked_us);
        self.poll_gap.exact(looked - acked_us);
        self.staleness.exact(first_us.max(acked_us) - looked);
    }

    /// A write acknowledged at `acked_us` that the observer had not seen when the round
    /// ended at `end_us`; `look_us` as for [`Tally::seen_at`].
    fn missed(&mut self, acked_us: u64, look_us: Option<u64>, end_us: u64) {
        match look_us.filter(|&l| l <= end_us) {
            Some(l) => {
                self.poll_gap.exact(l.saturating_sub(acked_us));
                self.staleness.at_least(end_us.saturating_sub(l));
            }
            None => self.poll_gap.at_least(end_us.saturating_sub(acked_us)),
        }
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
    /// Sights of a stamp its writer never sent: the server made it up. Never a later
    /// version of anything.
    pub never_sent: u64,
    /// Sights by a user outside the write's team.
    pub unexpected: u64,
    pub foreign: u64,
    pub garbled: u64,
    pub untracked: u64,
    /// The first writes some observer never saw.
    pub unseen: Vec<Unseen>,
    /// Unseen writes past those named.
    pub unnamed: u64,
    /// Per fault window of the round (in order of begin), the writes acknowledged while
    /// it was on and how long they took to be seen.
    pub by_fault: Vec<Tally>,
}

/// Who a round's writes were for, and how many users each observing class ran.
pub(crate) struct Audiences<O: Fn(TeamId) -> Vec<Who>, U: Fn(u16) -> u64> {
    /// The members of a team who read what it writes.
    pub observers: O,
    /// The users of a class.
    pub users: U,
}

impl Book {
    /// The answer to `obs`'s first look with operation `label` begun at or after
    /// `acked_us`.
    fn first_look_after(
        looks: &HashMap<(Who, u16), std::borrow::Cow<'_, [LookAt]>>,
        obs: Who,
        label: u16,
        acked_us: u64,
    ) -> Option<u64> {
        // One user looks one at a time: the first begun after is the first answered.
        let l = looks.get(&(obs, label))?;
        let i = l.partition_point(|x| x.began_us < acked_us);
        l.get(i).map(|x| x.answered_us)
    }

    /// Each observer's looks in the order they began (a user's own are already).
    fn sorted_looks(&self) -> HashMap<(Who, u16), std::borrow::Cow<'_, [LookAt]>> {
        self.looks
            .iter()
            .map(|(k, v)| {
                let v: std::borrow::Cow<'_, [LookAt]> = match v.is_sorted() {
                    true => std::borrow::Cow::Borrowed(v),
                    false => {
                        let mut v = v.clone();
                        v.sort_unstable();
                        std::borrow::Cow::Owned(v)
                    }
                };
                (*k, v)
            })
            .collect()
    }

    /// For each writing operation (class, label) and observing class, the observing
    /// operation that first showed most of its writes: how that class learns of them
    /// (a sync, where a time-range report or a multiget shows only what it asks for).
    /// A write unseen at the round's end is held against that operation's looks.
    fn shown_by(&self) -> HashMap<((u16, u16), u16), u16> {
        let mut counts: HashMap<((u16, u16), u16), BTreeMap<u16, u64>> = HashMap::new();
        for ((obs, writer, seq), s) in &self.sights {
            if let Some(w) = self.writes.get(&(*writer, *seq)) {
                *counts
                    .entry(((writer.class, w.label), obs.class))
                    .or_default()
                    .entry(s.label)
                    .or_default() += 1;
            }
        }
        counts
            .into_iter()
            .filter_map(|(k, by)| {
                // The most, and the first label among equals.
                let most = by
                    .iter()
                    .max_by_key(|(l, n)| (**n, std::cmp::Reverse(**l)))?;
                Some((k, *most.0))
            })
            .collect()
    }

    /// The round settled: each write against its audience (its writer apart): the
    /// observers of its team, or the users it names. `window` is the round's clock;
    /// `faults`, its fault windows as they happened (on the same clock), each of which
    /// gets the writes acknowledged while it was on.
    pub(crate) fn settle<O, U>(
        &self,
        window: Window,
        faults: &[Window],
        audiences: Audiences<O, U>,
    ) -> Settled
    where
        O: Fn(TeamId) -> Vec<Who>,
        U: Fn(u16) -> u64,
    {
        let observers = audiences.observers;
        let mut out = Settled {
            foreign: self.foreign,
            garbled: self.garbled,
            untracked: self.untracked,
            by_fault: vec![Tally::default(); faults.len()],
            ..Settled::default()
        };
        let sent = self.sent_mut();
        let writers = self.writers(&sent);
        let latest = self.latest_seen(&sent, &writers);
        let looks = self.sorted_looks();
        let shown_by = self.shown_by();
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
                // Held against the looks of the operation through which the observer's
                // class learns of such writes (a write is always seen by some look, so
                // one of its kind seen has that operation).
                let look = shown_by
                    .get(&((writer.class, w.label), obs.class))
                    .and_then(|&label| Book::first_look_after(&looks, *obs, label, w.acked_us));
                match self.sights.get(&(*obs, writer, seq)) {
                    Some(s) => {
                        t.seen_at(w.acked_us, s.first_us, look);
                        let by = out.by_observer.entry((obs.class, s.label)).or_default();
                        by.seen_at(w.acked_us, s.first_us, look);
                    }
                    None if latest
                        .get(&(*obs, writer, w.event))
                        .is_some_and(|l| *l > seq) =>
                    {
                        t.superseded += 1
                    }
                    None => {
                        t.unseen += 1;
                        if shown_by.contains_key(&((writer.class, w.label), obs.class)) {
                            t.missed(w.acked_us, look, window.to_us);
                        }
                    }
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
            for (f, tally) in faults.iter().zip(out.by_fault.iter_mut()) {
                if (f.from_us..f.to_us).contains(&w.acked_us) {
                    tally.add(&t);
                }
            }
            out.by_write
                .entry((writer.class, w.label))
                .or_default()
                .add(&t);
        }
        self.sights_out_of_place(&mut out, (&sent, &writers));
        Book::gaps_between_looks(&mut out, &looks, window, audiences.users);
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

impl Book {
    /// The latest version of each event each observer saw, of versions that were
    /// written: by (observer, writer, event).
    fn latest_seen(&self, sent: &Sent, writers: &HashSet<Who>) -> HashMap<(Who, Who, u64), u64> {
        let mut latest: HashMap<(Who, Who, u64), u64> = HashMap::new();
        for ((obs, writer, seq), s) in &self.sights {
            if !self.was_sent(sent, writers, *writer, *seq) {
                continue;
            }
            let l = latest.entry((*obs, *writer, s.event)).or_default();
            *l = (*l).max(*seq);
        }
        latest
    }

    /// Sights of writes never acknowledged or never sent, and sights by someone outside
    /// the write's team, counted.
    fn sights_out_of_place(&self, out: &mut Settled, sent: (&Sent, &HashSet<Who>)) {
        for ((_, writer, seq), s) in &self.sights {
            match self.writes.get(&(*writer, *seq)) {
                None if self.was_sent(sent.0, sent.1, *writer, *seq) => out.unacknowledged += 1,
                None => out.never_sent += 1,
                Some(w) if w.team != s.team => out.unexpected += 1,
                Some(_) => {}
            }
        }
    }

    /// Each observing operation's looks and the gaps between one user's: from the
    /// round's start to its first, between two, and from its last to the round's end
    /// (censored there); a user of the class who never looked with it, a whole round
    /// censored.
    fn gaps_between_looks(
        out: &mut Settled,
        looks: &HashMap<(Who, u16), std::borrow::Cow<'_, [LookAt]>>,
        window: Window,
        users: impl Fn(u16) -> u64,
    ) {
        for ((who, label), l) in looks {
            let by = out.by_observer.entry((who.class, *label)).or_default();
            by.looks += l.len() as u64;
            by.lookers += 1;
            let mut from = window.from_us;
            for x in l.iter() {
                by.look_gaps.exact(x.answered_us.saturating_sub(from));
                from = x.answered_us;
            }
            by.look_gaps.at_least(window.to_us.saturating_sub(from));
        }
        let ran_us = window.to_us.saturating_sub(window.from_us);
        for ((class, _), by) in out.by_observer.iter_mut() {
            let idle = users(*class).saturating_sub(by.lookers);
            let _ = by.look_gaps.censored.record_n(ran_us, idle);
        }
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
        self.never_sent += o.never_sent;
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
mod tests;
