//! What the message-broker drivers (STOMP, AMQP) share: the stamp every message body starts
//! with (run nonce, producer, sequence number, send time), the names of destinations,
//! an exchange that failed and the outcome it makes.

use std::sync::OnceLock;
use std::time::Duration;

use bytes::Bytes;
use rand::Rng;
use tokio::time::Instant;

use super::{Outcome, VuIds};
use crate::answer::Answer;
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

/// Why an exchange with the broker failed: its class, what happened, the broker's answer
/// when it gave one, and the bytes that crossed before it failed.
pub(super) struct Failed {
    pub(super) class: ErrorClass,
    pub(super) detail: String,
    pub(super) answer: Answer,
    pub(super) sent: u64,
    pub(super) received: u64,
}

impl Failed {
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

/// A body of `size` bytes (at least the stamp's): the stamp, then filler.
pub(super) fn body(nonce: u32, vu: u32, seq: u64, size: usize) -> Bytes {
    let mut b = Vec::with_capacity(size.max(STAMP_LEN));
    b.extend_from_slice(&nonce.to_le_bytes());
    b.extend_from_slice(&vu.to_le_bytes());
    b.extend_from_slice(&seq.to_le_bytes());
    b.extend_from_slice(&now_ns().to_le_bytes());
    b.resize(size.max(STAMP_LEN), b'x');
    Bytes::from(b)
}

/// The send time of a body stamped by this run; `None` for another's, or no stamp.
pub(super) fn stamp_of(body: &[u8], nonce: u32) -> Option<u64> {
    let stamp = body.get(..STAMP_LEN)?;
    let n = u32::from_le_bytes(stamp[0..4].try_into().ok()?);
    (n == nonce).then(|| u64::from_le_bytes(stamp[16..24].try_into().unwrap_or_default()))
}
