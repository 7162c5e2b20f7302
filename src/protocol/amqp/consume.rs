//! An AMQP consumer: the next delivery of its consumer within its timeout, taken by its
//! stamp into the ledger, acknowledged as the class says (each, or every Nth with those
//! before it).

use std::time::Duration;

use futures_util::StreamExt as _;
use lapin::options::BasicAckOptions;
use rand::rngs::Xoshiro256PlusPlus;
use tokio::time::Instant;

use crate::answer::Answer;
use crate::protocol::Outcome;
use crate::protocol::contract::Reach;
use crate::transport::ErrorClass;
use crate::workload::Dist;

use crate::protocol::broker::{self, Failed, done};

use super::wire::within;
use super::{AmqpClass, AmqpVu, failed};

impl AmqpVu {
    /// Acknowledge delivery `tag` (and, `multiple`, those before it on the channel).
    pub(super) async fn ack(
        &mut self,
        tag: u64,
        multiple: bool,
        timeout: Duration,
    ) -> Result<(), Failed> {
        let Some(s) = self.open.as_ref() else {
            return Err(Failed::no_connection());
        };
        let options = BasicAckOptions { multiple };
        within(
            timeout,
            s.channel.basic_ack(tag, options),
            "the acknowledgement",
        )
        .await?
        .map_err(|e| failed("basic.ack", e))?;
        self.unacked = 0;
        self.last_tag = None;
        Ok(())
    }

    pub(super) async fn consume(
        &mut self,
        class: &AmqpClass,
        conn: &Reach,
        timeout: &Dist,
        rng: &mut Xoshiro256PlusPlus,
    ) -> Result<Outcome, Failed> {
        self.ensure(class, conn).await?;
        let wait = Duration::from_micros(timeout.sample(rng).max(0.0) as u64);
        let Some(consumer) = self.open.as_mut().and_then(|s| s.consumer.as_mut()) else {
            return Err(Failed::of(
                ErrorClass::Body,
                "the user has no consumer".into(),
            ));
        };
        let start = Instant::now();
        let until = conn.wait_until(start, wait);
        let next = match tokio::time::timeout_at(until, consumer.next()).await {
            Err(_) => {
                let mut o = done(Answer::NONE, 0, 0, start.elapsed());
                o.label = Some(class.params.label_consume_empty);
                return Ok(o);
            }
            Ok(n) => n,
        };
        let delivery = match next {
            Some(Ok(d)) => d,
            Some(Err(e)) => return Err(failed("basic.consume", e)),
            None => {
                return Err(Failed::of(
                    ErrorClass::Reset,
                    "the broker cancelled the consumer".into(),
                ));
            }
        };
        let latency = start.elapsed();
        let received = delivery.data.len() as u64;
        let mut acked = broker::Acked::This;
        if class.params.manual_ack {
            // Every Nth delivery is acknowledged, and with it (multiple) those before. The
            // delivery came whatever became of its acknowledgement: its bytes count.
            self.unacked += 1;
            acked = broker::Acked::No;
            if self.unacked >= class.params.ack_every {
                let multiple = class.params.ack_every > 1;
                self.ack(delivery.delivery_tag, multiple, conn.timeouts().request)
                    .await
                    .map_err(|f| f.with_bytes(0, received))?;
                acked = match multiple {
                    true => broker::Acked::AllSoFar,
                    false => broker::Acked::This,
                };
            } else {
                self.last_tag = Some(delivery.delivery_tag);
            }
        }
        // A service answers what it took to where it says.
        self.last_request = delivery.properties.reply_to().as_ref().map(|to| {
            let c = delivery
                .properties
                .correlation_id()
                .as_ref()
                .map(|c| c.to_string());
            Box::new((to.to_string(), c))
        });
        let mut o = done(class.deliver, 0, received, latency);
        let queue = self.used.as_ref().map_or("", |u| u.name.as_str());
        let reading = broker::Reading {
            nonce: class.nonce,
            clock: class.clock,
            phases: class.phases.as_deref(),
            label_e2e: class.params.label_e2e,
            label_foreign: class.params.label_consume_foreign,
        };
        let m = broker::Taking {
            body: &delivery.data,
            destination: queue,
            redelivered: delivery.redelivered,
            acked,
        };
        broker::took(&mut o, &mut self.ledger, reading, m);
        Ok(o)
    }
}
