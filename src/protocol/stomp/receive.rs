//! A STOMP consumer: the next message of its subscription within its timeout, taken by
//! its stamp into the ledger, acknowledged as the class says (each, cumulative, or
//! every Nth).

use std::time::Duration;

use rand::rngs::Xoshiro256PlusPlus;
use tokio::time::Instant;

use crate::answer::Answer;
use crate::formats::stomp::{Command, Frame};
use crate::protocol::Outcome;
use crate::protocol::broker::{self, Failed, done};

use crate::protocol::contract::Reach;
use crate::workload::Dist;
use crate::workload::protocols::AckMode;

use super::wire::{broker_error, write};
use super::{Read, StompClass, StompVu};

impl StompVu {
    /// Acknowledge message `id` (and, ack: client, those before it): the bytes written.
    pub(super) async fn ack(&mut self, id: &str, timeout: Duration) -> Result<u64, Failed> {
        let mut wire = Vec::new();
        Frame::new(Command::Ack).header("id", id).encode(&mut wire);
        let Some(link) = self.link.as_mut() else {
            return Err(Failed::no_connection());
        };
        write(link, &wire, Instant::now() + timeout).await?;
        self.unacked = 0;
        self.last_ack = None;
        Ok(wire.len() as u64)
    }

    pub(super) async fn receive(
        &mut self,
        class: &StompClass,
        conn: &Reach,
        timeout: &Dist,
        rng: &mut Xoshiro256PlusPlus,
    ) -> Result<Outcome, Failed> {
        self.ensure(class, conn).await?;
        let wait = Duration::from_micros(timeout.sample(rng).max(0.0) as u64);
        let start = Instant::now();
        let msg = match self.waiting.pop_front() {
            Some(m) => Some(m),
            None => {
                self.next_message(class, conn.wait_until(start, wait))
                    .await?
            }
        };
        let Some(m) = msg else {
            let mut o = done(Answer::NONE, 0, 0, start.elapsed());
            o.label = Some(class.params.label_receive_empty);
            return Ok(o);
        };
        let latency = start.elapsed();
        let mut sent = 0;
        let mut acked = broker::Acked::This;
        if class.params.ack != AckMode::Auto
            && let Some(ack) = m.frame.get("ack")
        {
            // Every Nth message is acknowledged, and with it (ack: client) those before.
            self.unacked += 1;
            acked = broker::Acked::No;
            if self.unacked >= class.params.ack_every {
                // The message came whatever became of its ACK: its bytes are counted.
                sent = self
                    .ack(ack, conn.timeouts().request)
                    .await
                    .map_err(|f| f.with_bytes(0, m.bytes))?;
                acked = match class.params.ack {
                    AckMode::Client => broker::Acked::AllSoFar,
                    _ => broker::Acked::This,
                };
            } else {
                self.last_ack = Some(ack.into());
            }
        }
        // A service answers what it took to where it says.
        self.last_request = m.frame.get("reply-to").map(|to| {
            let c = m.frame.get("correlation-id").map(Box::from);
            (Box::from(to), c)
        });
        let mut o = done(class.message, sent, m.bytes, latency);
        let dest = self
            .taken_as
            .as_deref()
            .or(m.frame.get("destination"))
            .or(self.subscription.as_deref())
            .unwrap_or("");
        let reading = broker::Reading {
            nonce: class.nonce,
            clock: class.clock,
            phases: class.phases.as_deref(),
            label_e2e: class.params.label_e2e,
            label_foreign: class.params.label_receive_foreign,
        };
        let taking = broker::Taking {
            body: &m.frame.body,
            destination: dest,
            // ActiveMQ and RabbitMQ say so of a message handed out before.
            redelivered: m.frame.get("redelivered") == Some("true"),
            acked,
        };
        broker::took(&mut o, &mut self.ledger, reading, taking);
        Ok(o)
    }

    /// The next MESSAGE on the stream before `until`; `None` when none came by then.
    pub(super) async fn next_message(
        &mut self,
        class: &StompClass,
        until: Instant,
    ) -> Result<Option<Read>, Failed> {
        loop {
            // Nothing came in time: an empty receive, not a failure.
            let Some(r) = self.next_frame(class, until).await? else {
                return Ok(None);
            };
            match r.frame.command {
                // A reply to one of its requests is kept for the request that waits.
                Command::Message => match self.whose(&r.frame)? {
                    true => self.keep_message(r)?,
                    false => return Ok(Some(r)),
                },
                Command::Error => return Err(broker_error(&r.frame)),
                // A producer that also consumes: a windowed send's receipt.
                Command::Receipt => self.on_receipt(class, &r),
                _ => {}
            }
        }
    }
}
