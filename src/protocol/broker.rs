//! What the message-broker drivers (STOMP, AMQP) share: the stamp every message body starts
//! with (run nonce, producer, sequence number, send time), the names of destinations,
//! an exchange that failed and the outcome it makes, the destinations a user hands to the
//! round's teardown ([`Queue`]), when a drain of one must stop ([`Bounds`]) and what it
//! says when it is cut off.

use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use bytes::Bytes;
use rand::Rng;
use tokio::time::Instant;

use super::cleanup::Until;
use super::{Outcome, Reach, Session, VuIds};
use crate::answer::Answer;
use crate::fault::Phases;
use crate::ledger::{Ledger, Producer, Taken};
use crate::transport::ErrorClass;
use crate::workload::Template;
use crate::workload::protocols::STAMP_LEN;
use crate::workload::template::Ctx;

/// A run's nonce: its id hashed (FNV-1a), so every process of the run stamps alike.
pub(crate) fn nonce_of(run_id: &str) -> u32 {
    run_id.bytes().fold(0x811c_9dc5u32, |h, b| {
        (h ^ u32::from(b)).wrapping_mul(0x0100_0193)
    })
}

/// The process's clock for stamps: nanoseconds since its first use.
pub(crate) fn now_ns() -> u64 {
    static EPOCH: OnceLock<std::time::Instant> = OnceLock::new();
    EPOCH
        .get_or_init(std::time::Instant::now)
        .elapsed()
        .as_nanos() as u64
}

/// Which clock a run's stamps carry. A whole run's messages stay in one process: its
/// monotonic clock. A sharded run's cross processes and hosts: the wall clock, so an
/// end-to-end latency then assumes the hosts' clocks agree.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum StampClock {
    Monotonic,
    Wall,
}

/// How a run's producers and consumers stamp and read messages: the clock, and where a
/// target has a fault timeline, its phases (see `fault::Phases`), so the ledger can split
/// by window.
#[derive(Debug, Clone)]
pub(crate) struct Stamping {
    pub(crate) clock: StampClock,
    pub(crate) phases: Option<Arc<Phases>>,
}

/// The phase of the round's fault timeline now (0 without one).
pub(super) fn phase_now(phases: &Option<Arc<Phases>>) -> u16 {
    phases.as_ref().map_or(0, |p| p.now())
}

impl StampClock {
    pub(crate) fn now_ns(self) -> u64 {
        match self {
            StampClock::Monotonic => now_ns(),
            StampClock::Wall => std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.as_nanos() as u64),
        }
    }
}

/// Why an exchange with the broker failed: its class, what happened, the broker's answer
/// when it gave one, and the bytes that crossed before it failed.
#[derive(Debug)]
pub(super) struct Failed {
    pub(super) class: ErrorClass,
    pub(super) detail: String,
    pub(super) answer: Answer,
    pub(super) sent: u64,
    pub(super) received: u64,
}

impl Failed {
    /// An exchange on a connection the user does not hold (it was never opened, or an
    /// earlier failure closed it): a reset, as the connection's end was.
    pub(super) fn no_connection() -> Failed {
        Failed::of(ErrorClass::Reset, "no connection".into())
    }

    pub(super) fn of(class: ErrorClass, detail: String) -> Failed {
        Failed {
            class,
            detail,
            answer: Answer::NONE,
            sent: 0,
            received: 0,
        }
    }

    pub(super) fn with_bytes(mut self, sent: u64, received: u64) -> Failed {
        self.sent += sent;
        self.received += received;
        self
    }

    fn outcome(self, latency: Duration) -> Outcome {
        let mut o = Outcome::failed(self.class, self.detail);
        o.answer = self.answer;
        o.bytes_sent = self.sent;
        o.bytes_received = self.received;
        o.latency = latency;
        o
    }
}

/// A successful exchange: the broker's answer, the bytes both ways, its latency.
pub(super) fn done(answer: Answer, sent: u64, received: u64, latency: Duration) -> Outcome {
    Outcome {
        answer,
        bytes_sent: sent,
        bytes_received: received,
        latency,
        ..Outcome::default()
    }
}

/// An operation's outcome from what it did: a failure is timed from `started` and means
/// the user's connection must go (`true`).
pub(super) fn outcome(result: Result<Outcome, Failed>, started: Instant) -> (Outcome, bool) {
    match result {
        Ok(o) => (o, false),
        Err(f) => (f.outcome(started.elapsed()), true),
    }
}

/// A destination for this user of `class`: the template rendered with its built-in
/// variables (the AMQP driver names its queues the same way).
pub(super) fn render<R: Rng + ?Sized>(
    t: &Template,
    class: &str,
    ids: &VuIds,
    seq: u64,
    rng: &mut R,
) -> String {
    let mut ctx = Ctx {
        vu: ids.vu,
        round: ids.round,
        seq,
        context: "",
        run_id: &ids.run_id,
        class,
        vars: &[],
        rng,
    };
    let mut s = String::new();
    // Built-in variables only (the resolver saw to it): rendering cannot miss one.
    let _ = t.render(&mut ctx, &mut s);
    s
}

/// Per producer class (by index, the first [`CLASSES_BOUNDED`]), the highest sequence
/// number this process has stamped, in any round or run: a whole run's consumers take
/// none beyond it from a producer of that class, so a stamp past it is forged, and it is
/// counted as never sent before it can spend the ledger's budget.
static STAMPED: [AtomicU32; CLASSES_BOUNDED] = [const { AtomicU32::new(0) }; CLASSES_BOUNDED];
const CLASSES_BOUNDED: usize = 1024;

/// Whether a whole run (its stamps on this process's clock) can have sent `st`: a
/// sharded run's producers are other processes', and a class past the table's is not
/// followed.
fn can_have_sent(st: &Stamp, clock: StampClock) -> bool {
    let class = usize::from(st.producer.class);
    clock == StampClock::Wall
        || class >= CLASSES_BOUNDED
        || st.seq <= STAMPED[class].load(Ordering::Acquire)
}

/// A body of `size` bytes (at least the stamp's): the stamp, then filler. The stamp is
/// the run's nonce, the producer (class, round, user), its sequence number, and the send
/// time on this process's clock, little-endian.
pub(super) fn body(nonce: u32, clock: StampClock, p: Producer, seq: u32, size: usize) -> Bytes {
    if let Some(top) = STAMPED.get(usize::from(p.class)) {
        top.fetch_max(seq, Ordering::AcqRel);
    }
    let mut b = Vec::with_capacity(size.max(STAMP_LEN));
    b.extend_from_slice(&nonce.to_le_bytes());
    b.extend_from_slice(&p.class.to_le_bytes());
    b.extend_from_slice(&p.round.to_le_bytes());
    b.extend_from_slice(&p.vu.to_le_bytes());
    b.extend_from_slice(&seq.to_le_bytes());
    b.extend_from_slice(&clock.now_ns().to_le_bytes());
    b.resize(size.max(STAMP_LEN), b'x');
    Bytes::from(b)
}

/// What a stamp says.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Stamp {
    pub(super) producer: Producer,
    pub(super) seq: u32,
    pub(super) sent_ns: u64,
}

/// The stamp of a body this run sent; `None` for another's, or no stamp.
pub(super) fn stamp_of(body: &[u8], nonce: u32) -> Option<Stamp> {
    let s: &[u8; STAMP_LEN] = body.get(..STAMP_LEN)?.try_into().ok()?;
    let u16_at = |i: usize| u16::from_le_bytes([s[i], s[i + 1]]);
    let u32_at = |i: usize| u32::from_le_bytes([s[i], s[i + 1], s[i + 2], s[i + 3]]);
    (u32_at(0) == nonce).then(|| Stamp {
        producer: Producer {
            class: u16_at(4),
            round: u16_at(6),
            vu: u32_at(8),
        },
        seq: u32_at(12),
        sent_ns: u64::from_le_bytes(s[16..24].try_into().unwrap_or_default()),
    })
}

/// A producer's stamp fields: its class's index, its round and user.
pub(super) fn producer(class: u16, ids: &VuIds) -> Producer {
    Producer {
        class,
        round: u16::try_from(ids.round).unwrap_or(u16::MAX),
        vu: ids.vu,
    }
}

/// Whether a consumer acknowledged the message it just took: not yet, that one (auto
/// ack, or one acknowledged on its own), or it and every one before (a cumulative ack).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Acked {
    No,
    This,
    AllSoFar,
}

/// How a consumer class reads the messages it takes: the run's stamp and clock, its
/// target's fault timeline, and the labels its end-to-end latency and a message of
/// another run are reported under.
#[derive(Debug, Clone, Copy)]
pub(super) struct Reading<'a> {
    pub(super) nonce: u32,
    pub(super) clock: StampClock,
    pub(super) phases: Option<&'a Phases>,
    pub(super) label_e2e: usize,
    pub(super) label_foreign: usize,
}

/// A message a consumer took: its body, the destination its ledger names, whether the
/// broker flagged it redelivered, and whether the consumer has acknowledged it.
pub(super) struct Taking<'a> {
    pub(super) body: &'a [u8],
    pub(super) destination: &'a str,
    pub(super) redelivered: bool,
    pub(super) acked: Acked,
}

/// What a consumer does with a message it took: its end-to-end latency as a step of the
/// operation, and its stamp in the user's ledger; a message without this run's stamp is
/// counted as foreign (under `r.label_foreign`) and not timed.
pub(super) fn took(
    o: &mut Outcome,
    ledger: &mut Option<Box<Ledger>>,
    r: Reading<'_>,
    m: Taking<'_>,
) {
    let Taking {
        body,
        destination,
        redelivered,
        acked,
    } = m;
    let l = ledger.get_or_insert_with(Box::default);
    match stamp_of(body, r.nonce) {
        Some(st) if !can_have_sent(&st, r.clock) => l.took_unsent(destination),
        Some(st) => {
            let now = r.clock.now_ns();
            let e2e = Duration::from_nanos(now.saturating_sub(st.sent_ns));
            o.steps.push((r.label_e2e, done(Answer::NONE, 0, 0, e2e)));
            let first = match acked {
                Acked::This => l.took_acknowledged(destination, st.producer, st.seq, redelivered),
                Acked::No | Acked::AllSoFar => l.took(
                    destination,
                    st.producer,
                    st.seq,
                    Taken::Received,
                    redelivered,
                ),
            };
            // Sent before a window began, received once it was over: it lay in the
            // broker through that fault (of the round under way, whichever sent it).
            if let (true, Some(ph)) = (first, r.phases) {
                for (round, k) in ph.crossed(st.sent_ns, now) {
                    l.lay_through(round, k);
                }
            }
        }
        None => {
            o.label = Some(r.label_foreign);
            l.foreign(destination);
        }
    }
    // This one and every one before it, once it is in the ledger.
    if acked == Acked::AllSoFar {
        l.acknowledged_all();
    }
}

/// A message the teardown drained from `name`, in `ledger` by its stamp (or as foreign).
pub(super) fn drained(ledger: &mut Ledger, name: &str, nonce: u32, body: &[u8]) {
    match stamp_of(body, nonce) {
        Some(st) => {
            ledger.took(name, st.producer, st.seq, Taken::Drained, false);
        }
        None => ledger.foreign(name),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_stamp_reads_back_as_written_and_another_runs_is_not_read() {
        let p = Producer {
            class: 3,
            round: 2,
            vu: 70_000,
        };
        let b = body(0xfeed, StampClock::Wall, p, 41, 100);
        assert_eq!(b.len(), 100);
        let st = stamp_of(&b, 0xfeed).unwrap();
        assert_eq!((st.producer, st.seq), (p, 41));
        assert!(stamp_of(&b, 0xbeef).is_none());
        assert!(stamp_of(&b[..STAMP_LEN - 1], 0xfeed).is_none());
    }

    #[test]
    fn a_forged_sequence_number_is_never_sent_and_spends_nothing_of_the_ledgers_budget() {
        // A class of its own, so that no other test's stamps raise its highest number.
        let p = Producer {
            class: 1000,
            round: 1,
            vu: 0,
        };
        let take = |ledger: &mut Option<Box<Ledger>>, seq: u32, clock: StampClock| {
            let mut b = body(0xfeed, clock, p, 0, 64).to_vec();
            b[12..16].copy_from_slice(&seq.to_le_bytes());
            let mut o = Outcome::default();
            let reading = Reading {
                nonce: 0xfeed,
                clock,
                phases: None,
                label_e2e: 0,
                label_foreign: 1,
            };
            let m = Taking {
                body: &b,
                destination: "/queue/f",
                redelivered: false,
                acked: Acked::No,
            };
            took(&mut o, ledger, reading, m);
        };
        let mut ledger = None;
        // The producer stamps 0..=3; a broker makes up 200,000 numbers far past them, each
        // in a chunk of its own; then the real ones arrive.
        for seq in 0..=3 {
            let _ = body(0xfeed, StampClock::Monotonic, p, seq, 64);
        }
        for i in 0..200_000u32 {
            take(&mut ledger, 1_000_000 + i * 4096, StampClock::Monotonic);
        }
        for seq in 0..=3 {
            take(&mut ledger, seq, StampClock::Monotonic);
        }
        let l = ledger.take().unwrap();
        let counts = &l.settle(false)[0].1;
        assert_eq!(
            (counts.received, counts.unsent, counts.untracked),
            (4, 200_000, 0)
        );
        // In a shard, another process may have stamped it: it is followed as before.
        let mut ledger = None;
        take(&mut ledger, 5_000_000, StampClock::Wall);
        assert_eq!(ledger.unwrap().settle(false)[0].1.received, 1);
    }
}

/// How a broker protocol drains a destination of the run's own at the round's end: the
/// teardown (`drain.rs`) calls it for each destination a user handed over, and names no
/// protocol.
#[async_trait::async_trait]
pub(crate) trait Drainer: Send + Sync {
    /// The protocol's name: a destination is drained once per protocol and name.
    fn protocol(&self) -> &'static str;

    /// Take every message of `q` until none has come for `bounds.idle` (or its end), each
    /// in `ledger` as drained and counted in `taken` as it comes (a failed drain's count
    /// stands); then remove it when `delete` and the protocol may. Whether it was removed.
    async fn drain(
        &self,
        q: &Queue,
        conn: &Reach,
        bounds: Bounds<'_>,
        delete: bool,
        ledger: &mut crate::ledger::Ledger,
        taken: &mut u64,
    ) -> Result<bool, String>;
}

/// A destination a user used, and whose credentials reach it.
#[derive(Clone)]
pub(crate) struct Queue {
    pub session: Session,
    /// Its protocol's drain.
    pub drainer: &'static dyn Drainer,
    pub name: String,
    /// The run's declaration created it: the teardown deletes it.
    pub created: bool,
    /// The run's stamp, to tell its messages from others'.
    pub nonce: u32,
    /// A durable topic subscription (its client id, its name), drained by subscribing
    /// again as it and deleted by unsubscribing; `name` is then the topic.
    pub durable: Option<(String, String)>,
    /// What the ledger calls what is taken here (a topic subscriber's own row); `None`:
    /// the name.
    pub ledger_name: Option<String>,
}

/// Why a drain ended with messages still coming.
pub(crate) fn cut_off(name: &str, taken: u64, until: &Until) -> String {
    format!(
        "{name}: messages were still coming when the drain was stopped by {} ({taken} taken)",
        until.reason()
    )
}

/// When one destination's drain ends: once nothing has come for `idle`, at `until`, or
/// past `most` messages taken.
#[derive(Clone, Copy)]
pub(crate) struct Bounds<'a> {
    pub idle: Duration,
    pub until: &'a Until,
    pub most: u64,
}

impl Bounds<'_> {
    /// The drain of `name` must stop, having taken `taken`: why.
    pub(crate) fn stop(&self, name: &str, taken: u64) -> Option<String> {
        if taken > self.most {
            return Some(past_bound(name, self.most));
        }
        self.until
            .passed()
            .then(|| cut_off(name, taken, self.until))
    }
}

/// Why a drain stopped at its bound: the broker went on sending past all the run could
/// have left there.
fn past_bound(name: &str, most: u64) -> String {
    format!(
        "{name}: the broker sent more than the {most} messages the round could have left there; the drain stopped"
    )
}

/// A destination that holds nothing itself once the round is over (a topic: what its
/// subscribers did not take is in theirs), so it needs no drain. A wildcard is not a
/// destination of its own.
pub(crate) fn holds_nothing(destination: &str) -> bool {
    destination.starts_with("/topic/") && !destination.contains('#')
}
