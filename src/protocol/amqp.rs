//! AMQP 0-9-1 producers and consumers, through lapin (RabbitMQ's own protocol): one
//! connection and channel per user, opened at set-up, its queue declared with its type,
//! publisher confirms turned on for a confirming class, a consumer with its prefetch.
//!
//! What is timed: a `publish` from the call to its publisher confirm (the confirm latency;
//! to the publish's hand-over when it asks for none); a `consume` from its start to its
//! delivery (or its timeout: `consume_empty`, counted, not a failure). Bodies carry the
//! same stamp as STOMP's, so each delivery's end-to-end latency is recorded apart
//! (`consume.e2e`) and another run's message is `consume_foreign`.
//!
//! The broker's answers are counted in its words: `amqp basic.ack`, `amqp basic.deliver`,
//! a `basic.nack`, a `basic.return` of an unroutable mandatory message, a channel or
//! connection `close` with its reply code and text (`amqp close 406 'PRECONDITION_FAILED
//! ...'`). A failure ends the user's connection; its next operation opens a new one.
//! lapin writes the frames, so the byte counts are the message bodies, not the framing.

use std::collections::VecDeque;
use std::sync::Arc;
use std::time::Duration;

use futures_util::StreamExt as _;
use lapin::options::{
    BasicAckOptions, BasicConsumeOptions, BasicPublishOptions, BasicQosOptions,
    ConfirmSelectOptions, QueueDeclareOptions, QueueDeleteOptions,
};
use lapin::types::{AMQPValue, FieldTable, ShortString};
use lapin::{BasicProperties, Channel, Confirmation, Connection, ConnectionProperties, Consumer};
use rand::rngs::Xoshiro256PlusPlus;
use tokio::time::Instant;

use async_trait::async_trait;

use super::contract::{Done, Preflight, Protocol, Reach};
use super::{Outcome, ProtocolError, Session, SetupError, VuIds};
use crate::answer::Answer;
use crate::transport::ErrorClass;
use crate::transport::stream::Handshake;
// DIRECT_REPLY_TO: RabbitMQ's direct reply-to, the pseudo-queue a requester consumes from
// (no acknowledgements) before it publishes a request naming it.
use crate::workload::protocols::{AmqpOp, AmqpParams, DIRECT_REPLY_TO, QueueType};
use crate::workload::{Dist, UserClass};

use super::broker::{self, Failed, StampClock, body, done, nonce_of, producer, render};
use super::broker::{Queue, QueueKind};
use super::over_broker::{BrokerUser, OverBroker};
use crate::ledger::Ledger;

/// What every user of an AMQP class shares.
pub(crate) struct AmqpClass {
    ops: Vec<AmqpOp>,
    params: AmqpParams,
    class: String,
    /// The class's index in the workload, in every stamp its producers write.
    index: u16,
    /// The clock its stamps carry.
    clock: StampClock,
    nonce: u32,
    /// Publisher confirms are on for the class's channels.
    confirms: bool,
    ack: Answer,
    deliver: Answer,
    nack: Answer,
    commit_ok: Answer,
}

impl AmqpClass {
    pub(crate) fn new(
        class: &UserClass,
        ops: &[AmqpOp],
        params: &AmqpParams,
        index: u16,
        run_id: &str,
        clock: StampClock,
    ) -> AmqpClass {
        AmqpClass {
            index,
            clock,
            confirms: ops
                .iter()
                .any(|o| matches!(o, AmqpOp::Publish { confirm: true, .. })),
            ops: ops.to_vec(),
            params: params.clone(),
            class: class.name.clone(),
            nonce: nonce_of(run_id),
            ack: Answer::named("amqp", "basic.ack", None, None),
            deliver: Answer::named("amqp", "basic.deliver", None, None),
            nack: Answer::named("amqp", "basic.nack", None, None),
            commit_ok: Answer::named("amqp", "tx.commit-ok", None, None),
        }
    }
}

/// A user's open session with the broker.
struct Session091 {
    // Kept so the connection lives as long as its channel; closed when dropped.
    _connection: Connection,
    channel: Channel,
    consumer: Option<Consumer>,
    /// A requester's consumer of RabbitMQ's direct reply-to.
    replies: Option<Consumer>,
    queue: String,
    opened: Option<Handshake>,
}

/// The queue a user used, and whether the run's declaration created it.
struct Used {
    name: String,
    created: bool,
}

/// One user of an AMQP class.
pub(crate) struct AmqpVu {
    class: Arc<AmqpClass>,
    ids: VuIds,
    session: Session,
    /// Connections opened.
    opened: u64,
    /// Boxed: a connection, its channel and consumer are large, and an idle user of any
    /// protocol pays for the largest driver state.
    open: Option<Box<Session091>>,
    sent: u32,
    /// What this user sent and received, by stamp; made at its first message.
    ledger: Option<Box<Ledger>>,
    /// Its queue, once declared (or found).
    used: Option<Box<Used>>,
    /// Publishes waiting for their confirms (`max_pending` past 1), oldest first.
    pending: VecDeque<Pending>,
    /// The `reply_to` and correlation id of the last delivery it took.
    last_request: Option<Box<(String, Option<String>)>>,
    /// Deliveries taken and not yet acknowledged (`ack_every: N`), and the last one's tag.
    unacked: u32,
    last_tag: Option<u64>,
    /// The sequence numbers published in the open transaction (`transaction: N`).
    in_tx: Vec<u32>,
    /// Commits settled since the last operation reported them, as its steps.
    settled: Vec<(usize, Outcome)>,
}

/// A publish whose confirm a task of its own awaits, noting when it came.
struct Pending {
    seq: u32,
    written: Instant,
    waiting: tokio::task::JoinHandle<(Result<Confirmation, lapin::Error>, Instant)>,
}

/// A lapin error in the broker's words when the broker said something.
fn failed(what: &str, e: lapin::Error) -> Failed {
    match e.kind() {
        lapin::ErrorKind::ProtocolError(p) => Failed {
            class: ErrorClass::Status,
            detail: format!("{what}: the broker closed the channel: {p}"),
            answer: Answer::named(
                "amqp",
                "close",
                Some(p.get_id()),
                Some(p.get_message().as_str()),
            ),
            sent: 0,
            received: 0,
        },
        // The connection or its channel is gone (a broker restarting, a reset, a missed
        // heartbeat): the user reconnects.
        lapin::ErrorKind::IOError(_)
        | lapin::ErrorKind::InvalidConnectionState(_)
        | lapin::ErrorKind::InvalidChannelState(..)
        | lapin::ErrorKind::InvalidChannel(_)
        | lapin::ErrorKind::MissingHeartbeatError
        | lapin::ErrorKind::RuntimeShutdownError(_) => {
            Failed::of(ErrorClass::Reset, format!("{what}: {e}"))
        }
        _ => Failed::of(ErrorClass::Body, format!("{what}: {e}")),
    }
}

#[async_trait]
impl Protocol for AmqpClass {
    type User = BrokerUser<AmqpVu>;

    fn user(self: &Arc<Self>, session: Session, ids: VuIds, reach: Reach) -> Self::User {
        BrokerUser::new(AmqpVu::new(self.clone(), session, ids), reach)
    }

    /// A login over AMQP and the class's queue checked, with an account of the
    /// preflight's own.
    async fn preflight(self: &Arc<Self>, cx: Preflight<'_>) -> Result<(), ProtocolError> {
        let s = cx.accounts.session(cx.workload, cx.class, &cx.ids);
        preflight(self, &s, &cx.ids, &cx.reach).await
    }
}

impl OverBroker for AmqpVu {
    /// Untimed, before the round: connect, declare the queue, and start consuming.
    async fn set_up(&mut self, conn: &Reach) -> Result<(), SetupError> {
        let class = self.class.clone();
        self.ensure(&class, conn)
            .await
            .map_err(|f| SetupError::Broker {
                request: "AMQP connection, channel and queue".into(),
                answer: f.detail,
            })?;
        if let Some(o) = self.open.as_mut() {
            o.opened = None;
        }
        Ok(())
    }

    async fn run(&mut self, op: usize, conn: &Reach, rng: &mut Xoshiro256PlusPlus) -> Done {
        let class = self.class.clone();
        // The resolver built the table the engine picks from: an index past it is a pick
        // of nothing.
        let Some(o) = class.ops.get(op) else {
            return Done::Skipped;
        };
        let started = Instant::now();
        let result = match o {
            AmqpOp::Publish {
                size,
                persistent,
                confirm,
                mandatory,
                headers,
            } => {
                let p = Publish {
                    size,
                    persistent: *persistent,
                    confirm: *confirm,
                    mandatory: *mandatory,
                    headers,
                };
                self.publish(&class, conn, p, rng).await
            }
            AmqpOp::Consume { timeout } => self.consume(&class, conn, timeout, rng).await,
            AmqpOp::Request { size, timeout } => {
                Box::pin(self.request(&class, conn, (size, timeout), rng)).await
            }
            AmqpOp::Reply { size, timeout } => {
                Box::pin(self.reply(&class, conn, (size, timeout), rng)).await
            }
        };
        let (mut out, failed) = broker::outcome(result, started);
        // A connection this operation opened is reported with it, failed or not.
        out.handshake = self.open.as_mut().and_then(|s| s.opened.take());
        if failed {
            self.open = None;
            // The broker rolls back a transaction whose channel ended, and hands out again
            // what was not acknowledged.
            self.abort_tx(&class);
            self.unacked = 0;
            self.last_tag = None;
        }
        out.steps.append(&mut self.settled);
        Done::Sent(out)
    }

    /// The confirms still outstanding when the user's round ends, each awaited within the
    /// request timeout of its publish: an outcome of these steps only; `None` if none.
    /// The connection is closed when the user is dropped, so one that stays keeps it.
    async fn wait_out(&mut self, conn: &Reach, _stays: bool) -> Option<Outcome> {
        let timeout = conn.timeouts().request;
        // The deliveries taken since the last acknowledgement are acknowledged with it.
        if let Some(tag) = self.last_tag.take()
            && self.ack(tag, true, timeout).await.is_ok()
            && let Some(l) = self.ledger.as_mut()
        {
            l.acknowledged_all();
        }
        if self.pending.is_empty() && self.in_tx.is_empty() {
            return None;
        }
        let class = self.class.clone();
        // A transaction begun is committed with what it holds.
        let _ = self.commit(&class, timeout).await;
        let mut steps = std::mem::take(&mut self.settled);
        self.settle(&class, &mut steps, 0, timeout).await;
        Some(Outcome {
            steps,
            ..Outcome::default()
        })
    }

    /// The queue this user used, for the teardown to drain when it is the run's own: one
    /// the run's declaration created.
    fn queues(&self) -> Vec<Queue> {
        self.used
            .iter()
            .filter(|u| u.created)
            .map(|u| Queue {
                session: self.session.clone(),
                kind: QueueKind::Amqp,
                name: u.name.clone(),
                created: true,
                nonce: self.class.nonce,
                durable: None,
                ledger_name: None,
            })
            .collect()
    }

    fn take_ledger(&mut self) -> Ledger {
        self.ledger.take().map(|b| *b).unwrap_or_default()
    }

    fn opened(&self) -> u64 {
        self.opened
    }
}

impl AmqpVu {
    fn new(class: Arc<AmqpClass>, session: Session, ids: VuIds) -> AmqpVu {
        AmqpVu {
            class,
            ids,
            session,
            opened: 0,
            open: None,
            sent: 0,
            ledger: None,
            used: None,
            pending: VecDeque::new(),
            in_tx: Vec::new(),
            settled: Vec::new(),
            unacked: 0,
            last_tag: None,
            last_request: None,
        }
    }

    /// Acknowledge delivery `tag` (and, `multiple`, those before it on the channel).
    async fn ack(&mut self, tag: u64, multiple: bool, timeout: Duration) -> Result<(), Failed> {
        let Some(s) = self.open.as_ref() else {
            return Err(Failed::of(ErrorClass::Reset, "no connection".into()));
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

    /// Commit the open transaction (`tx.commit`), timed as a step of its own; a commit
    /// that fails fails every publish in it.
    async fn commit(&mut self, class: &AmqpClass, timeout: Duration) -> Result<(), Failed> {
        if self.in_tx.is_empty() {
            return Ok(());
        }
        let Some(s) = self.open.as_ref() else {
            self.abort_tx(class);
            return Err(Failed::of(ErrorClass::Reset, "no connection".into()));
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
    fn abort_tx(&mut self, class: &AmqpClass) {
        let from = producer(class.index, &self.ids);
        let queue = self.used.as_ref().map_or("", |u| u.name.as_str());
        if let Some(l) = self.ledger.as_mut() {
            for seq in self.in_tx.drain(..) {
                l.send_failed(queue, from, seq);
            }
        }
        self.in_tx.clear();
    }

    async fn ensure(&mut self, class: &AmqpClass, conn: &Reach) -> Result<(), Failed> {
        if self.open.is_none() {
            let (s, created) = Box::pin(open(class, &self.session, &self.ids, conn)).await?;
            self.opened += 1;
            // Created once is the run's, even when a later reconnection finds it there.
            let created = created || self.used.as_ref().is_some_and(|u| u.created);
            self.used = Some(Box::new(Used {
                name: s.queue.clone(),
                created,
            }));
            self.open = Some(Box::new(s));
        }
        Ok(())
    }

    async fn publish(
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
            return Err(Failed::of(ErrorClass::Reset, "no connection".into()));
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
        ledger.sent(queue, from, seq);
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
    async fn settle(
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

    /// A request with RabbitMQ's direct reply-to and a correlation id of this run, user and
    /// sequence number, then its reply: timed from the publish to the reply. A reply to an
    /// earlier request that timed out is taken and left out.
    async fn request(
        &mut self,
        class: &AmqpClass,
        conn: &Reach,
        (size, timeout): (&Dist, &Dist),
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
            return Err(Failed::of(ErrorClass::Reset, "no connection".into()));
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
        ledger.sent(&s.queue, from, seq);
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
    async fn reply(
        &mut self,
        class: &AmqpClass,
        conn: &Reach,
        (size, timeout): (&Dist, &Dist),
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
            return Err(Failed::of(ErrorClass::Reset, "no connection".into()));
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
        ledger.sent(DIRECT_REPLY_TO, from, seq);
        o.bytes_sent += payload.len() as u64;
        o.latency = start.elapsed();
        Ok(o)
    }

    async fn consume(
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
        let labels = (class.params.label_e2e, class.params.label_consume_foreign);
        broker::took(
            &mut o,
            &delivery.data,
            (class.nonce, class.clock),
            (queue, delivery.redelivered, acked),
            &mut self.ledger,
            labels,
        );
        Ok(o)
    }
}

/// A publish's parameters, borrowed from its operation.
struct Publish<'a> {
    size: &'a Dist,
    persistent: bool,
    confirm: bool,
    mandatory: bool,
    headers: &'a [(String, crate::workload::Template)],
}

/// A publisher confirm as an outcome, and whether the broker took the message; a
/// confirm that did not come (or the channel's end) is the failure.
fn confirmed(
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

/// `work` within `timeout`, or a `timeout` failure naming what did not come.
async fn within<F: Future>(timeout: Duration, work: F, what: &str) -> Result<F::Output, Failed> {
    tokio::time::timeout(timeout, work).await.map_err(|_| {
        Failed::of(
            ErrorClass::Timeout,
            format!("{what} did not come within {timeout:?}"),
        )
    })
}

/// Connect as the user, open a channel, turn confirms on, declare the queue, and start a
/// consumer when the class consumes; and whether the declaration created the queue.
async fn open(
    class: &AmqpClass,
    s: &Session,
    ids: &VuIds,
    conn: &Reach,
) -> Result<(Session091, bool), Failed> {
    let t0 = Instant::now();
    let connection = connect(s, conn).await?;
    let handshake = Handshake {
        connect: t0.elapsed(),
        tls: None,
        resumed: false,
    };
    let rq = conn.timeouts().request;
    let queue = render(&class.params.queue, &class.class, ids, 0, &mut rand::rng());
    let (channel, created) = channel_for(class, &connection, (&queue, &ids.run_id), rq).await?;
    prepare(class, &channel, &queue, rq).await?;
    let consumes = class
        .ops
        .iter()
        .any(|o| matches!(o, AmqpOp::Consume { .. } | AmqpOp::Reply { .. }));
    let consumer = match consumes {
        false => None,
        true => Some(consume_from(class, &channel, &queue, ids, rq).await?),
    };
    let requests = class
        .ops
        .iter()
        .any(|o| matches!(o, AmqpOp::Request { .. }));
    let replies = match requests {
        false => None,
        true => Some(replies_on(&channel, rq).await?),
    };
    let open = Session091 {
        _connection: connection,
        channel,
        consumer,
        replies,
        queue,
        opened: Some(handshake),
    };
    Ok((open, created))
}

/// An AMQP connection to the target as the session's user (RabbitMQ's `guest` without a
/// password), on the target's virtual host.
async fn connect(s: &Session, conn: &Reach) -> Result<Connection, Failed> {
    let endpoint = conn.endpoint();
    let addr = endpoint.amqp.ok_or_else(|| {
        Failed::of(
            ErrorClass::Connect,
            format!(
                "{} takes no AMQP: give an amqp://HOST:PORT target",
                endpoint.display
            ),
        )
    })?;
    let (user, password) = match s.password.is_empty() {
        // RabbitMQ's own default account, as every AMQP client assumes.
        true => ("guest".to_string(), "guest".to_string()),
        false => (s.user.clone(), s.password.clone()),
    };
    let tls = endpoint.amqp_tls.as_deref();
    let uri = lapin::uri::AMQPUri {
        scheme: match tls {
            Some(_) => lapin::uri::AMQPScheme::AMQPS,
            None => lapin::uri::AMQPScheme::AMQP,
        },
        authority: lapin::uri::AMQPAuthority {
            userinfo: lapin::uri::AMQPUserInfo {
                username: user,
                password,
            },
            // Over TLS, the name the broker's certificate is checked against.
            host: tls.map_or_else(|| addr.ip().to_string(), |t| t.host.clone()),
            port: addr.port(),
        },
        vhost: match endpoint.base_path.trim_start_matches('/') {
            "" => "/".to_string(),
            v => v.to_string(),
        },
        ..Default::default()
    };
    let connecting = async {
        match tls {
            None => Connection::connect_uri(uri, ConnectionProperties::default()).await,
            Some(t) => {
                let config = lapin::tcp::OwnedTLSConfig {
                    identity: None,
                    cert_chain: t.ca_pem.clone(),
                };
                lapin::DefaultConnectionBuilder::new()?
                    .with_uri(uri)
                    .with_tls_config(config)
                    .connect()
                    .await
            }
        }
    };
    within(conn.timeouts().connect, connecting, "the AMQP connection")
        .await?
        .map_err(|e| match e.kind() {
            lapin::ErrorKind::IOError(_) => {
                Failed::of(ErrorClass::Connect, format!("connect to {addr}: {e}"))
            }
            _ => failed("AMQP connection", e),
        })
}

/// The user's channel, and whether the queue is the run's own, to be deleted after: one
/// named with the run's id is (no other run could have made it, as with a STOMP
/// destination), and is declared without asking. Another is first asked for passively,
/// so that a queue that was there before is never deleted; the broker answers that by
/// closing the channel (404, and a `not_found` line in RabbitMQ's log) when it is not
/// there, so a second channel is opened then.
async fn channel_for(
    class: &AmqpClass,
    connection: &Connection,
    (queue, run_id): (&str, &str),
    rq: Duration,
) -> Result<(Channel, bool), Failed> {
    let new_channel = || async {
        within(rq, connection.create_channel(), "the channel")
            .await?
            .map_err(|e| failed("channel.open", e))
    };
    let channel = new_channel().await?;
    if class.params.queue_type == QueueType::Existing {
        return Ok((channel, false));
    }
    if !run_id.is_empty() && queue.contains(run_id) {
        return Ok((channel, true));
    }
    let passive = QueueDeclareOptions {
        passive: true,
        ..QueueDeclareOptions::default()
    };
    let found = within(
        rq,
        channel.queue_declare(ShortString::from(queue), passive, FieldTable::default()),
        "queue.declare (passive)",
    )
    .await?;
    match found {
        Ok(_) => Ok((channel, false)),
        Err(e) if matches!(e.kind(), lapin::ErrorKind::ProtocolError(p) if p.get_id() == 404) => {
            Ok((new_channel().await?, true))
        }
        Err(e) => Err(failed("queue.declare (passive)", e)),
    }
}

/// Publisher confirms on for a confirming class, and the queue declared with its type.
async fn prepare(
    class: &AmqpClass,
    channel: &Channel,
    queue: &str,
    rq: Duration,
) -> Result<(), Failed> {
    if class.confirms {
        within(
            rq,
            channel.confirm_select(ConfirmSelectOptions::default()),
            "confirm.select",
        )
        .await?
        .map_err(|e| failed("confirm.select", e))?;
    }
    if class.params.transaction > 0 {
        within(rq, channel.tx_select(), "tx.select")
            .await?
            .map_err(|e| failed("tx.select", e))?;
    }
    if class.params.queue_type != QueueType::Existing {
        let mut args = FieldTable::default();
        let kind = match class.params.queue_type {
            QueueType::Quorum => "quorum",
            _ => "classic",
        };
        args.insert("x-queue-type".into(), AMQPValue::LongString(kind.into()));
        within(
            rq,
            channel.queue_declare(
                ShortString::from(queue),
                QueueDeclareOptions {
                    durable: true,
                    ..QueueDeclareOptions::default()
                },
                args,
            ),
            "queue.declare",
        )
        .await?
        .map_err(|e| failed("queue.declare", e))?;
    }
    Ok(())
}

/// The user's consumer on `queue`, with the class's prefetch and acknowledgements.
async fn consume_from(
    class: &AmqpClass,
    channel: &Channel,
    queue: &str,
    ids: &VuIds,
    rq: Duration,
) -> Result<Consumer, Failed> {
    within(
        rq,
        channel.basic_qos(class.params.prefetch, BasicQosOptions::default()),
        "basic.qos",
    )
    .await?
    .map_err(|e| failed("basic.qos", e))?;
    let tag = format!("loadmix-{}-{}-{}", ids.run_id, class.class, ids.vu);
    let c = within(
        rq,
        channel.basic_consume(
            ShortString::from(queue),
            ShortString::from(tag.as_str()),
            BasicConsumeOptions {
                no_ack: !class.params.manual_ack,
                ..BasicConsumeOptions::default()
            },
            FieldTable::default(),
        ),
        "basic.consume",
    )
    .await?
    .map_err(|e| failed("basic.consume", e))?;
    Ok(c)
}

async fn replies_on(channel: &Channel, rq: Duration) -> Result<Consumer, Failed> {
    within(
        rq,
        channel.basic_consume(
            ShortString::from(DIRECT_REPLY_TO),
            ShortString::from(""),
            BasicConsumeOptions {
                no_ack: true,
                ..BasicConsumeOptions::default()
            },
            FieldTable::default(),
        ),
        "basic.consume (direct reply-to)",
    )
    .await?
    .map_err(|e| failed("basic.consume (direct reply-to)", e))
}

/// Preflight: connect, open a channel and declare the class's queue once, so a refused
/// login or an inequivalent queue stops the run with the broker's reason.
async fn preflight(
    class: &AmqpClass,
    s: &Session,
    ids: &VuIds,
    conn: &Reach,
) -> Result<(), ProtocolError> {
    // No queue declared, no consumer: the preflight leaves nothing on the broker.
    let probe = AmqpClass {
        ops: Vec::new(),
        params: AmqpParams {
            queue_type: QueueType::Existing,
            ..class.params.clone()
        },
        class: class.class.clone(),
        index: class.index,
        clock: class.clock,
        nonce: class.nonce,
        confirms: class.confirms,
        ack: class.ack,
        deliver: class.deliver,
        nack: class.nack,
        commit_ok: class.commit_ok,
    };
    open(&probe, s, ids, conn)
        .await
        .map(|_| ())
        .map_err(|f| ProtocolError::Preflight {
            class: class.class.clone(),
            protocol: "amqp",
            request: format!("AMQP connection to {}", conn.endpoint().display),
            answer: f.detail,
        })
}

/// The teardown's drain of one queue: consume with automatic acknowledgement until
/// nothing has come for `idle` (or `until`), each message in `ledger`; then delete the
/// queue when `delete`. How many were taken is added to `taken` as they come (a failed
/// drain's count stands); whether the queue was deleted.
pub(crate) async fn drain(
    q: &Queue,
    conn: &Reach,
    bounds: broker::Bounds<'_>,
    delete: bool,
    ledger: &mut Ledger,
    taken: &mut u64,
) -> Result<bool, String> {
    let (idle, until) = (bounds.idle, bounds.until);
    let rq = conn.timeouts().request;
    let connection = connect(&q.session, conn).await.map_err(|f| f.detail)?;
    let channel = within(rq, connection.create_channel(), "the channel")
        .await
        .map_err(|f| f.detail)?
        .map_err(|e| failed("channel.open", e).detail)?;
    let step = |what: &'static str| move |e: lapin::Error| failed(what, e).detail;
    within(
        rq,
        channel.basic_qos(1000, BasicQosOptions::default()),
        "basic.qos",
    )
    .await
    .map_err(|f| f.detail)?
    .map_err(step("basic.qos"))?;
    let mut consumer = within(
        rq,
        channel.basic_consume(
            ShortString::from(q.name.as_str()),
            ShortString::from("loadmix-drain"),
            BasicConsumeOptions {
                no_ack: true,
                ..BasicConsumeOptions::default()
            },
            FieldTable::default(),
        ),
        "basic.consume",
    )
    .await
    .map_err(|f| f.detail)?
    .map_err(step("basic.consume"))?;
    loop {
        let by = (Instant::now() + idle).min(until.at);
        let next = match tokio::time::timeout_at(by, consumer.next()).await {
            Err(_) if until.passed() => return Err(super::broker::cut_off(&q.name, *taken, until)),
            Err(_) => break,
            Ok(n) => n,
        };
        match next {
            Some(Ok(d)) => {
                *taken += 1;
                broker::drained(ledger, &q.name, q.nonce, &d.data);
            }
            Some(Err(e)) => return Err(failed("basic.consume", e).detail),
            None => break,
        }
        // A flood that never pauses is cut off too (what was taken is counted).
        if let Some(why) = bounds.stop(&q.name, *taken) {
            return Err(why);
        }
    }
    if !delete {
        return Ok(false);
    }
    within(
        rq,
        channel.queue_delete(
            ShortString::from(q.name.as_str()),
            QueueDeleteOptions::default(),
        ),
        "queue.delete",
    )
    .await
    .map_err(|f| f.detail)?
    .map_err(step("queue.delete"))?;
    Ok(true)
}
