//! An AMQP producer's publishes: each with its publisher confirm, a window of confirms
//! waited for at once, transactions (tx.select, tx.commit timed apart), and what the
//! ledger is told of each publish written, confirmed or failed.

use std::time::Duration;

use lapin::options::BasicPublishOptions;
use lapin::types::{AMQPValue, FieldTable, ShortString};
use lapin::{BasicProperties, Confirmation};
use rand::rngs::Xoshiro256PlusPlus;
use tokio::time::Instant;

use crate::answer::Answer;
use crate::protocol::Outcome;
use crate::protocol::contract::Reach;
use crate::transport::ErrorClass;

use crate::protocol::broker::{self, Failed, body, done, producer, render};

use super::wire::within;
use super::{AmqpClass, AmqpVu, Pending, Publish, failed};

impl AmqpVu {
    /// Commit the open transaction (`tx.commit`), timed as a step of its own; a commit
    /// that fails fails every publish in it.
    pub(super) async fn commit(
        &mut self,
        class: &AmqpClass,
        timeout: Duration,
    ) -> Result<(), Failed> {
        if self.in_tx.is_empty() {
            return Ok(());
        }
        let Some(s) = self.open.as_ref() else {
            self.abort_tx(class);
            return Err(Failed::no_connection());
        };
        let start = Instant::now();
        let committed = within(timeout, s.channel.tx_commit(), "tx.commit")
            .await
            .and_then(|r| r.map_err(|e| failed("tx.commit", e)));
        let latency = start.elapsed();
        match committed {
            Ok(()) => {
                self.in_tx.clear();
                let o = done(class.commit_ok, 0, 0, latency);
                self.settled.push((class.params.label_commit, o));
                Ok(())
            }
            Err(f) => {
                let mut o = Outcome::failed(f.class, f.detail.clone());
                o.answer = f.answer;
                o.latency = latency;
                self.settled.push((class.params.label_commit, o));
                self.abort_tx(class);
                Err(f)
            }
        }
    }

    /// The open transaction will never be committed: its publishes failed, in the ledger.
    pub(super) fn abort_tx(&mut self, class: &AmqpClass) {
        let from = producer(class.index, &self.ids);
        let queue = self.used.as_ref().map_or("", |u| u.name.as_str());
        if let Some(l) = self.ledger.as_mut() {
            for seq in self.in_tx.drain(..) {
                l.send_failed(queue, from, seq);
            }
        }
        self.in_tx.clear();
    }

    pub(super) async fn publish(
        &mut self,
        class: &AmqpClass,
        conn: &Reach,
        p: Publish<'_>,
        rng: &mut Xoshiro256PlusPlus,
    ) -> Result<Outcome, Failed> {
        let timeout = conn.timeouts().request;
        // Room in the window first: confirms that came, then the oldest until there is.
        let windowed = p.confirm && class.params.max_pending > 1;
        let mut steps = Vec::new();
        if windowed {
            self.settle(
                class,
                &mut steps,
                class.params.max_pending as usize - 1,
                timeout,
            )
            .await;
        }
        self.ensure(class, conn).await?;
        let size = p
            .size
            .sample(rng)
            .max(crate::workload::protocols::STAMP_LEN as f64) as usize;
        let seq = self.sent;
        self.sent = self.sent.saturating_add(1);
        let from = producer(class.index, &self.ids);
        let Some(s) = self.open.as_ref() else {
            return Err(Failed::no_connection());
        };
        let payload = body(class.nonce, class.clock, from, seq, size.min(64 << 20));
        let mut props =
            BasicProperties::default().with_delivery_mode(if p.persistent { 2 } else { 1 });
        if !p.headers.is_empty() {
            let mut table = FieldTable::default();
            for (name, t) in p.headers {
                let value = render(t, &class.class, &self.ids, u64::from(seq), rng);
                table.insert(name.as_str().into(), AMQPValue::LongString(value.into()));
            }
            props = props.with_headers(table);
        }
        let start = Instant::now();
        let publish = s.channel.basic_publish(
            ShortString::from(""),
            ShortString::from(s.queue.as_str()),
            BasicPublishOptions {
                mandatory: p.mandatory,
                ..BasicPublishOptions::default()
            },
            &payload,
            props,
        );
        let confirm = within(timeout, publish, "the publish")
            .await?
            .map_err(|e| failed("basic.publish", e))?;
        let sent = payload.len() as u64;
        let queue = s.queue.as_str();
        let ledger = self.ledger.get_or_insert_with(Box::default);
        ledger.sent_in(queue, from, seq, broker::phase_now(&class.phases));
        if class.params.transaction > 0 {
            // The publish is its hand-over; the commit that ends its transaction is timed
            // apart.
            let elapsed = start.elapsed();
            self.in_tx.push(seq);
            if self.in_tx.len() >= class.params.transaction as usize {
                self.commit(class, timeout).await?;
            }
            return Ok(done(Answer::NONE, sent, 0, elapsed));
        }
        // A confirming publish is what turned the channel's confirms on.
        if !p.confirm {
            return Ok(done(Answer::NONE, sent, 0, start.elapsed()));
        }
        if windowed {
            // Its confirm is awaited by a task of its own, which notes when it came.
            let waiting = tokio::spawn(async move { (confirm.await, Instant::now()) });
            self.pending.push_back(Pending {
                seq,
                written: start,
                waiting,
            });
            let mut o = done(Answer::NONE, sent, 0, start.elapsed());
            o.steps = steps;
            return Ok(o);
        }
        let confirmation = within(timeout, confirm, "the publisher confirm")
            .await
            .and_then(|c| c.map_err(|e| failed("publisher confirm", e)));
        let latency = start.elapsed();
        let (o, ok) = confirmed(class, confirmation, queue, latency);
        if !ok {
            ledger.send_failed(queue, from, seq);
        }
        o.map(|mut o| {
            o.bytes_sent = sent;
            o
        })
    }

    /// Settle the window's confirms, as steps: every one that has come, then the oldest
    /// until at most `keep` are outstanding (each within `timeout` of its publish).
    pub(super) async fn settle(
        &mut self,
        class: &AmqpClass,
        steps: &mut Vec<(usize, Outcome)>,
        keep: usize,
        timeout: Duration,
    ) {
        let from = producer(class.index, &self.ids);
        let queue = self.used.as_ref().map_or(String::new(), |u| u.name.clone());
        loop {
            let n = self.pending.len();
            let Some(front) = self.pending.front_mut() else {
                break;
            };
            if n <= keep && !front.waiting.is_finished() {
                break;
            }
            let by = front.written + timeout;
            let came = tokio::time::timeout_at(by, &mut front.waiting).await;
            let Some(p) = self.pending.pop_front() else {
                break;
            };
            let (result, latency) = match came {
                Ok(Ok((c, at))) => (
                    c.map_err(|e| failed("publisher confirm", e)),
                    at.saturating_duration_since(p.written),
                ),
                Ok(Err(_)) => (
                    Err(Failed::of(ErrorClass::Reset, "the confirm was lost".into())),
                    by.saturating_duration_since(p.written),
                ),
                Err(_) => {
                    p.waiting.abort();
                    let f = Failed::of(
                        ErrorClass::Timeout,
                        format!("the publisher confirm did not come within {timeout:?}"),
                    );
                    (Err(f), timeout)
                }
            };
            let (o, ok) = confirmed(class, result, &queue, latency);
            if !ok && let Some(l) = self.ledger.as_mut() {
                l.send_failed(&queue, from, p.seq);
            }
            let started = Instant::now()
                .checked_sub(latency)
                .unwrap_or_else(Instant::now);
            let o = o.unwrap_or_else(|f| broker::outcome(Err(f), started).0);
            steps.push((class.params.label_confirm, o));
        }
    }
}

/// A publisher confirm as an outcome, and whether the broker took the message; a
/// confirm that did not come (or the channel's end) is the failure.
pub(super) fn confirmed(
    class: &AmqpClass,
    confirmation: Result<Confirmation, Failed>,
    queue: &str,
    latency: Duration,
) -> (Result<Outcome, Failed>, bool) {
    let c = match confirmation {
        Ok(c) => c,
        Err(f) => return (Err(f), false),
    };
    let refused = |answer: Answer, detail: String| {
        let mut o = done(answer, 0, 0, latency);
        o.error = Some(ErrorClass::Status);
        o.detail = Some(detail);
        (Ok(o), false)
    };
    match c {
        Confirmation::Ack(None) | Confirmation::NotRequested => {
            (Ok(done(class.ack, 0, 0, latency)), true)
        }
        Confirmation::Ack(Some(returned)) | Confirmation::Nack(Some(returned)) => {
            let code = returned.reply_code;
            let text = returned.reply_text.to_string();
            refused(
                Answer::named("amqp", "basic.return", Some(code), Some(&text)),
                format!("the broker returned the message: {code} {text} (queue '{queue}')"),
            )
        }
        Confirmation::Nack(None) => refused(
            class.nack,
            format!("the broker refused the message (basic.nack), queue '{queue}'"),
        ),
    }
}
