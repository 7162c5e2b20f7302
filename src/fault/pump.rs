//! One direction of one connection through the fault proxy: a loop over a queue of
//! chunks, each chunk given the moment it may go on as it is read (now plus a latency,
//! after the one before it at a bandwidth, in slices), so that a delay never adds up over
//! the chunks of one answer and bytes never overtake each other; the window's toxic
//! applied to the connections it draws.

use std::collections::VecDeque;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use bytes::Bytes;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::tcp::{OwnedReadHalf, OwnedWriteHalf};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::link::{Active, Conn, Shared, draws};
use crate::workload::faults::FaultAction;

/// The largest chunk read at once.
const CHUNK: usize = 64 * 1024;
/// Chunks a direction holds back before it stops reading (and the sender's window fills).
const QUEUE: usize = 64;

/// One direction of one connection.
pub(super) struct Pump {
    pub(super) shared: Arc<Shared>,
    pub(super) conn: Conn,
    /// From the target to the users (answers).
    pub(super) down: bool,
    pub(super) kill: CancellationToken,
    pub(super) reset: Arc<std::sync::atomic::AtomicBool>,
    pub(super) from: OwnedReadHalf,
    pub(super) to: OwnedWriteHalf,
    /// The jitter's random stream (never zero).
    pub(super) rng: u64,
}

/// What the queue holds: bytes, or the peer's close, each with when it may go on.
enum Item {
    Bytes(Bytes),
    Close,
}

impl Pump {
    /// Read, hold back as the window says, write; the halves back when it ends.
    pub(super) async fn run(mut self) -> (OwnedReadHalf, OwnedWriteHalf) {
        let mut queue: VecDeque<(Instant, Item)> = VecDeque::new();
        let mut buf = vec![0u8; CHUNK];
        let mut reading = true;
        let mut last = Instant::now();
        loop {
            let due = queue.front().map(|(t, _)| *t);
            tokio::select! {
                biased;
                _ = self.kill.cancelled() => break,
                _ = tokio::time::sleep_until(due.unwrap_or_else(Instant::now)), if due.is_some() => {
                    let Some((_, item)) = queue.pop_front() else { continue };
                    match item {
                        Item::Bytes(b) => {
                            if self.to.write_all(&b).await.is_err() {
                                self.fail();
                                break;
                            }
                        }
                        Item::Close => {
                            let _ = self.to.shutdown().await;
                            break;
                        }
                    }
                }
                r = self.from.read(&mut buf), if reading && queue.len() < QUEUE => {
                    let now = Instant::now();
                    match r {
                        Ok(0) => {
                            reading = false;
                            let at = self.close_at(now).max(last);
                            queue.push_back((at, Item::Close));
                        }
                        Ok(n) => {
                            let chunk = Bytes::copy_from_slice(&buf[..n]);
                            if !self.shape(chunk, now, &mut last, &mut queue) {
                                break;
                            }
                        }
                        Err(_) => {
                            self.fail();
                            break;
                        }
                    }
                }
            }
        }
        (self.from, self.to)
    }

    /// A read or write failed (a peer reset): the other end is reset too.
    fn fail(&self) {
        self.reset.store(true, Ordering::Relaxed);
        self.kill.cancel();
    }

    /// The window's toxic on this direction, when it draws this connection.
    fn toxic(&self) -> Option<Arc<Active>> {
        let a = self.shared.active.read().ok()?.clone()?;
        let touches = match self.down {
            true => a.stream.touches_down(),
            false => a.stream.touches_up(),
        };
        // A window that began while this connection was being made is met here.
        self.conn.meet(self.shared.seed, &a);
        (touches && draws(self.shared.seed, self.conn.id, &a)).then_some(a)
    }

    fn close_at(&self, now: Instant) -> Instant {
        match self.toxic().map(|a| a.action.clone()) {
            Some(FaultAction::SlowClose { delay }) => now + delay,
            _ => now,
        }
    }

    /// Queue `chunk` as the toxic says; false when the connection is to end now.
    fn shape(
        &mut self,
        chunk: Bytes,
        now: Instant,
        last: &mut Instant,
        queue: &mut VecDeque<(Instant, Item)>,
    ) -> bool {
        let Some(a) = self.toxic() else {
            *last = now.max(*last);
            queue.push_back((*last, Item::Bytes(chunk)));
            return true;
        };
        match &a.action {
            FaultAction::Latency { delay, jitter } => {
                let offset = (self.uniform() * 2.0 - 1.0) * jitter.as_secs_f64();
                let d = (delay.as_secs_f64() + offset).max(0.0);
                *last = (now + Duration::from_secs_f64(d)).max(*last);
                queue.push_back((*last, Item::Bytes(chunk)));
            }
            FaultAction::Bandwidth { bytes_per_s } => {
                let d = chunk.len() as f64 / *bytes_per_s as f64;
                *last = now.max(*last) + Duration::from_secs_f64(d);
                queue.push_back((*last, Item::Bytes(chunk)));
            }
            FaultAction::Slicer { size, delay } => {
                let size = usize::try_from(*size).unwrap_or(usize::MAX).max(1);
                let mut at = now.max(*last);
                let mut rest = chunk;
                while !rest.is_empty() {
                    let piece = rest.split_to(size.min(rest.len()));
                    queue.push_back((at, Item::Bytes(piece)));
                    at += *delay;
                }
                *last = at;
            }
            FaultAction::LimitData { bytes } => {
                let passed =
                    a.bytes.fetch_add(chunk.len() as u64, Ordering::Relaxed) + chunk.len() as u64;
                let room = bytes.saturating_sub(passed.saturating_sub(chunk.len() as u64));
                if room < chunk.len() as u64 {
                    let mut c = chunk;
                    c.truncate(room as usize);
                    *last = now.max(*last);
                    queue.push_back((*last, Item::Bytes(c)));
                    queue.push_back((*last, Item::Close));
                    a.counts.closed.fetch_add(1, Ordering::Relaxed);
                    return true;
                }
                *last = now.max(*last);
                queue.push_back((*last, Item::Bytes(chunk)));
            }
            // Swallowed: the peer waits for bytes that never come.
            FaultAction::Timeout { .. } => {}
            // `meet` reset it already.
            FaultAction::Reset => return false,
            FaultAction::SlowClose { .. }
            | FaultAction::Down
            | FaultAction::Pause
            | FaultAction::Kill
            | FaultAction::Restart
            | FaultAction::Command { .. } => {
                *last = now.max(*last);
                queue.push_back((*last, Item::Bytes(chunk)));
            }
        }
        true
    }

    /// A uniform draw in [0, 1) from the pump's own stream (xorshift64*).
    fn uniform(&mut self) -> f64 {
        let mut x = self.rng;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.rng = x;
        (x.wrapping_mul(0x2545_F491_4F6C_DD1D) >> 11) as f64 / (1u64 << 53) as f64
    }
}
