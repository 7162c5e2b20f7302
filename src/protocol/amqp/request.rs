//! AMQP request-reply over RabbitMQ's direct reply-to: a requester's request timed to
//! its reply; a service's answer to where the request says, with its correlation id.

use std::time::Duration;

use futures_util::StreamExt as _;
use lapin::BasicProperties;
use lapin::options::BasicPublishOptions;
use lapin::types::ShortString;
use rand::rngs::Xoshiro256PlusPlus;
use tokio::time::Instant;

use crate::protocol::Outcome;
use crate::protocol::contract::Reach;
use crate::transport::ErrorClass;
use crate::workload::Dist;
use crate::workload::protocols::DIRECT_REPLY_TO;

use crate::protocol::broker::{self, Failed, body, done, producer};

use super::wire::within;
use super::{AmqpClass, AmqpVu, failed};

impl AmqpVu {
    /// A request with RabbitMQ's direct reply-to and a correlation id of this run, user and
    /// sequence number, then its reply: timed from the publish to the reply. A reply to an
    /// earlier request that timed out is taken and left out.
    pub(super) async fn request(
        &mut self,
        class: &AmqpClass,
        conn: &Reach,
        size: &Dist,
        timeout: &Dist,
        rng: &mut Xoshiro256PlusPlus,
    ) -> Result<Outcome, Failed> {
        self.ensure(class, conn).await?;
        let wait = Duration::from_micros(timeout.sample(rng).max(0.0) as u64);
        let size = size
            .sample(rng)
            .max(crate::workload::protocols::STAMP_LEN as f64) as usize;
        let seq = self.sent;
        self.sent = self.sent.saturating_add(1);
        let from = producer(class.index, &self.ids);
        let correlation = format!("{:x}-{}-{}-{seq}", class.nonce, class.index, self.ids.vu);
        let Some(s) = self.open.as_mut() else {
            return Err(Failed::no_connection());
        };
        let payload = body(class.nonce, class.clock, from, seq, size.min(64 << 20));
        let props = BasicProperties::default()
            .with_reply_to(ShortString::from(DIRECT_REPLY_TO))
            .with_correlation_id(ShortString::from(correlation.as_str()));
        let start = Instant::now();
        let publish = s.channel.basic_publish(
            ShortString::from(""),
            ShortString::from(s.queue.as_str()),
            BasicPublishOptions::default(),
            &payload,
            props,
        );
        within(conn.timeouts().request, publish, "the request")
            .await?
            .map_err(|e| failed("basic.publish", e))?;
        let sent = payload.len() as u64;
        let ledger = self.ledger.get_or_insert_with(Box::default);
        ledger.sent_in(&s.queue, from, seq, broker::phase_now(&class.phases));
        let Some(replies) = s.replies.as_mut() else {
            return Err(Failed::of(
                ErrorClass::Body,
                "the user has no reply consumer".into(),
            ));
        };
        let until = start + wait;
        loop {
            let next = match tokio::time::timeout_at(until, replies.next()).await {
                Err(_) => {
                    return Err(Failed::of(
                        ErrorClass::Timeout,
                        format!("no reply to {} within {wait:?}", s.queue),
                    )
                    .with_bytes(sent, 0));
                }
                Ok(n) => n,
            };
            let d = match next {
                Some(Ok(d)) => d,
                Some(Err(e)) => return Err(failed("direct reply-to", e).with_bytes(sent, 0)),
                None => {
                    return Err(Failed::of(
                        ErrorClass::Reset,
                        "the broker cancelled the reply consumer".into(),
                    )
                    .with_bytes(sent, 0));
                }
            };
            match broker::stamp_of(&d.data, class.nonce) {
                Some(st) => {
                    // Direct reply-to delivers without acknowledgements.
                    ledger.took_acknowledged(DIRECT_REPLY_TO, st.producer, st.seq, false);
                }
                None => ledger.foreign(DIRECT_REPLY_TO),
            }
            let theirs = d.properties.correlation_id().as_ref().map(|c| c.as_str());
            if theirs == Some(correlation.as_str()) {
                let received = d.data.len() as u64;
                return Ok(done(class.deliver, sent, received, start.elapsed()));
            }
        }
    }

    /// A service's turn: the next delivery of its consumer (as a consume takes it),
    /// answered to its `reply_to` with its correlation id, stamped by this user. Timed
    /// from the start to the reply's publish; a delivery with no `reply_to` is only taken.
    pub(super) async fn reply(
        &mut self,
        class: &AmqpClass,
        conn: &Reach,
        size: &Dist,
        timeout: &Dist,
        rng: &mut Xoshiro256PlusPlus,
    ) -> Result<Outcome, Failed> {
        let start = Instant::now();
        self.last_request = None;
        let mut o = self.consume(class, conn, timeout, rng).await?;
        if o.label == Some(class.params.label_consume_empty) {
            o.label = Some(class.params.label_reply_empty);
            return Ok(o);
        }
        for (label, _) in o.steps.iter_mut() {
            if *label == class.params.label_e2e {
                *label = class.params.label_reply_e2e;
            }
        }
        let Some(req) = self.last_request.take() else {
            return Ok(o);
        };
        let (to, correlation) = *req;
        let seq = self.sent;
        self.sent = self.sent.saturating_add(1);
        let from = producer(class.index, &self.ids);
        let size = size
            .sample(rng)
            .max(crate::workload::protocols::STAMP_LEN as f64) as usize;
        let payload = body(class.nonce, class.clock, from, seq, size.min(64 << 20));
        let mut props = BasicProperties::default();
        if let Some(c) = &correlation {
            props = props.with_correlation_id(ShortString::from(c.as_str()));
        }
        let Some(s) = self.open.as_ref() else {
            return Err(Failed::no_connection());
        };
        let publish = s.channel.basic_publish(
            ShortString::from(""),
            ShortString::from(to.as_str()),
            BasicPublishOptions::default(),
            &payload,
            props,
        );
        within(conn.timeouts().request, publish, "the reply")
            .await
            .map_err(|f| f.with_bytes(0, o.bytes_received))?
            .map_err(|e| failed("basic.publish", e).with_bytes(0, o.bytes_received))?;
        // Direct reply-to names each requester's channel apart: one row for them all.
        let ledger = self.ledger.get_or_insert_with(Box::default);
        ledger.sent_in(DIRECT_REPLY_TO, from, seq, broker::phase_now(&class.phases));
        o.bytes_sent += payload.len() as u64;
        o.latency = start.elapsed();
        Ok(o)
    }
}
