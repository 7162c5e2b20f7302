//! STOMP 1.2 producers, consumers, requesters and services: one stream to the broker per
//! user, `CONNECT` (with the user's credentials when it has them) before the round, a
//! subscription for consumers (and one to its reply queue for a requester), then `send`,
//! `receive`, `request` and `reply` operations. Frames are `formats::stomp`'s; the stream,
//! its timing and its error classes are `transport::stream`'s.
//!
//! What is timed: a `send` from its frame's first byte written to the broker's `RECEIPT`
//! (the confirm latency; to the last byte written when it asks for none, keeps a window of
//! receipts outstanding, or sends in a transaction, whose receipts and commits are then
//! steps of their own); a `receive` from its start to its `MESSAGE` (or its timeout:
//! `receive_empty`, counted, not a failure); a `request` from its write to its reply; a
//! `reply` from its start to the reply's write. Every body starts with a stamp (run
//! nonce, producer, sequence number, send time on this process's monotonic clock), so a
//! consumer records each message's end-to-end latency apart (`receive.e2e`), enters it in
//! the user's ledger, and counts a message without this run's stamp as `receive_foreign`
//! instead of timing it.
//!
//! A broker's `ERROR` is an answer in its own words (`stomp ERROR 'message'`), a failure
//! of class `status`; it ends the connection, as STOMP says, and the next operation opens
//! a new one. MESSAGE frames that arrive while a user waits for something else are kept
//! for the operation that takes them, up to a bound. The teardown's drain of a
//! destination is here too (`drain`).

use std::collections::VecDeque;
use std::sync::Arc;
use std::time::Duration;

use rand::rngs::Xoshiro256PlusPlus;
use tokio::io::AsyncReadExt;
use tokio::time::Instant;

use super::broker::{self, Failed, StampClock, body, done, nonce_of, producer, render};
use super::broker::{Queue, QueueKind};
use super::over_broker::{BrokerUser, OverBroker};
use super::{Outcome, ProtocolError, Session, SetupError, VuIds};
use crate::answer::Answer;
use crate::formats::stomp::{self, Command, Frame, Limits};
use crate::ledger::Ledger;
use crate::transport::stream::{Deadline, Handshake, Stream};
use async_trait::async_trait;

use super::contract::{Done, Preflight, Protocol, Reach};
use crate::transport::{Endpoint, ErrorClass};
use crate::workload::protocols::{AckMode, STAMP_LEN, StompOp, StompParams};
use crate::workload::{Dist, Template, UserClass};

/// Messages a user keeps that arrived while it waited for something else: more than its
/// prefetch means the broker does not keep to it.
const MAX_WAITING: usize = 10_000;
/// Nor more than this many bytes of them.
const MAX_WAITING_BYTES: u64 = 64 << 20;

/// What every user of a STOMP class shares.
pub(crate) struct StompClass {
    ops: Vec<StompOp>,
    params: StompParams,
    class: String,
    /// The class's index in the workload, in every stamp its producers write.
    index: u16,
    /// The clock its stamps carry.
    clock: StampClock,
    /// This run's stamp: a message without it is another run's.
    nonce: u32,
    /// A destination whose name has this in it is the run's own, which the teardown may
    /// drain.
    run_id: String,
    receipt: Answer,
    message: Answer,
    limits: Limits,
}

impl StompClass {
    pub(crate) fn new(
        class: &UserClass,
        ops: &[StompOp],
        params: &StompParams,
        index: u16,
        run_id: &str,
        clock: StampClock,
    ) -> StompClass {
        StompClass {
            ops: ops.to_vec(),
            params: params.clone(),
            class: class.name.clone(),
            index,
            clock,
            nonce: nonce_of(run_id),
            run_id: run_id.to_string(),
            // The answers a driver expects are interned once, not per message.
            receipt: Answer::named("stomp", "RECEIPT", None, None),
            message: Answer::named("stomp", "MESSAGE", None, None),
            limits: Limits::default(),
        }
    }
}

/// An open session with the broker.
struct Link {
    stream: Stream,
    buf: stomp::FrameBuffer,
    deadline: Deadline,
    /// The opening's cost, until the operation that opened it reports it.
    opened: Option<Handshake>,
    subscribed: bool,
    replies_subscribed: bool,
    /// What the broker says it is (CONNECTED's `server`): brokers differ on how a durable
    /// subscription is removed.
    server: Box<str>,
}

/// A frame read, with the bytes it took on the wire.
struct Read {
    frame: Frame,
    bytes: u64,
}

/// One user of a STOMP class.
pub(crate) struct StompVu {
    class: Arc<StompClass>,
    ids: VuIds,
    session: Session,
    /// Connections opened.
    opened: u64,
    /// Boxed, as every driver's connection state: an idle user of any protocol pays for
    /// the largest.
    link: Option<Box<Link>>,
    next_receipt: u64,
    /// Messages this producer has sent (its stamps' sequence numbers).
    sent: u32,
    waiting: VecDeque<Read>,
    /// What this user sent and received, by stamp; made at its first message.
    ledger: Option<Box<Ledger>>,
    /// The destination it subscribed to, once it has.
    subscription: Option<String>,
    /// Where the replies to its requests come, once subscribed.
    reply_to: Option<String>,
    /// A durable subscriber's client id and subscription name.
    durable: Option<Box<Durable>>,
    /// What its ledger calls the messages it takes: its subscription's destination, or for
    /// a topic's subscriber (each gets a copy) the topic and the subscriber.
    taken_as: Option<String>,
    /// Replies that came while it waited for something else.
    replies: VecDeque<Read>,
    /// The `reply-to` and `correlation-id` of the last message it took.
    last_request: Option<(Box<str>, Option<Box<str>>)>,
    /// Sends waiting for their receipts (`max_pending` past 1), oldest first.
    pending: VecDeque<Pending>,
    /// Receipts settled since the last operation reported them, as its steps.
    settled: Vec<(usize, Outcome)>,
    /// Messages taken and not yet acknowledged (`ack_every: N`), and the last one's ack
    /// id, which acknowledges them all.
    unacked: u32,
    last_ack: Option<Box<str>>,
    /// The transaction its sends go in (`transaction: N`), once begun.
    tx: Option<Box<Tx>>,
    next_tx: u64,
}

/// An open transaction: its id, and the sends in it (sequence number, destination).
struct Tx {
    id: String,
    sends: Vec<(u32, Box<str>)>,
}

/// A durable subscription: the client id its connections carry, and its name.
struct Durable {
    client_id: String,
    name: String,
}

/// A send whose receipt has not come yet.
struct Pending {
    receipt: u64,
    seq: u32,
    destination: Box<str>,
    written: Instant,
}

#[async_trait]
impl Protocol for StompClass {
    type User = BrokerUser<StompVu>;

    fn user(self: &Arc<Self>, session: Session, ids: VuIds, reach: Reach) -> Self::User {
        BrokerUser::new(StompVu::new(self.clone(), session, ids), reach)
    }

    /// A login over STOMP, with an account of the preflight's own.
    async fn preflight(self: &Arc<Self>, cx: Preflight<'_>) -> Result<(), ProtocolError> {
        let s = cx.accounts.session(cx.workload, cx.class, &cx.ids);
        preflight(self, &s, &cx.reach).await
    }
}

impl OverBroker for StompVu {
    /// Untimed, before the round: connect, and subscribe when the class consumes.
    async fn set_up(&mut self, conn: &Reach) -> Result<(), SetupError> {
        let fail = |request: &str, answer: String| SetupError::Broker {
            request: request.to_string(),
            answer,
        };
        let class = self.class.clone();
        self.ensure(&class, conn)
            .await
            .map_err(|f| fail("STOMP CONNECT", f.detail))?;
        // The opening was set-up, not any operation's.
        if let Some(l) = self.link.as_mut() {
            l.opened = None;
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
            StompOp::Send {
                destination,
                size,
                persistent,
                receipt,
                headers,
            } => {
                let send = Send {
                    destination,
                    size,
                    persistent: *persistent,
                    receipt: *receipt,
                    headers,
                };
                // The larger exchanges are boxed: a consumer idle in its receive does not
                // hold their state.
                Box::pin(self.send(&class, conn, send, rng)).await
            }
            StompOp::Receive { timeout } => self.receive(&class, conn, timeout, rng).await,
            StompOp::Request {
                destination,
                size,
                persistent,
                timeout,
            } => {
                let r = Request {
                    destination,
                    size,
                    persistent: *persistent,
                    timeout,
                };
                Box::pin(self.request(&class, conn, r, rng)).await
            }
            StompOp::Reply { size, timeout } => {
                Box::pin(self.reply(&class, conn, size, timeout, rng)).await
            }
        };
        let (mut out, failed) = broker::outcome(result, started);
        // A connection this operation opened is reported with it, failed or not.
        out.handshake = self.link.as_mut().and_then(|l| l.opened.take());
        if failed {
            // A failed exchange leaves the stream out of step: the next one opens anew.
            // The messages it had delivered and this user had not taken go back to the
            // broker with the connection; taking them later would count them twice.
            self.link = None;
            self.waiting.clear();
            self.replies.clear();
            // What was not acknowledged goes back to the broker with the connection.
            self.unacked = 0;
            self.last_ack = None;
            let why = out.detail.clone().unwrap_or_default();
            self.fail_pending(&class, ErrorClass::Reset, &why);
            // The broker rolls back a transaction whose connection ended.
            self.abort_tx(&class);
        }
        out.steps.append(&mut self.settled);
        Done::Sent(out)
    }

    /// What the user still waits for when its round ends: its outstanding receipts, each
    /// within the request timeout of its send, as an outcome of steps only.
    async fn wait_out(&mut self, conn: &Reach, stays: bool) -> Option<Outcome> {
        let timeout = conn.timeouts().request;
        // The messages taken since the last acknowledgement are acknowledged with it.
        if let Some(id) = self.last_ack.take()
            && self.ack(&id, timeout).await.is_ok()
            && self.class.params.ack == AckMode::Client
            && let Some(l) = self.ledger.as_mut()
        {
            l.acknowledged_all();
        }
        let class = self.class.clone();
        let waited = !self.pending.is_empty() || self.tx.is_some();
        // A transaction begun is committed with what it holds.
        let ended = match self.commit(&class, timeout).await {
            Ok(()) => self.settle(&class, 0, timeout).await,
            Err(f) => Err(f),
        };
        if let Err(f) = ended {
            self.link = None;
            self.fail_pending(&class, f.class, &f.detail);
        }
        // A user that returns for another session keeps its connection, and with it its
        // subscription.
        if !stays {
            self.disconnect(&class, timeout).await;
        }
        waited.then(|| Outcome {
            steps: std::mem::take(&mut self.settled),
            ..Outcome::default()
        })
    }

    /// The run's own destinations this user sent to or subscribed to, for the teardown to
    /// drain: queues named after the run (STOMP cannot tell whether one existed before, nor
    /// delete one), and its durable topic subscription, which the teardown drains as its
    /// subscriber and then removes. A topic itself holds nothing to drain.
    fn queues(&self) -> Vec<Queue> {
        let sent = self.ledger.iter().flat_map(|l| l.destinations());
        let mut names: Vec<&str> = sent
            .chain(self.subscription.as_deref())
            .chain(self.reply_to.as_deref())
            .filter(|n| n.contains(&self.class.run_id) && !n.starts_with("/topic/"))
            .collect();
        names.sort_unstable();
        names.dedup();
        let queue = |name: &str| Queue {
            session: self.session.clone(),
            kind: QueueKind::Stomp,
            name: name.to_string(),
            created: false,
            nonce: self.class.nonce,
            durable: None,
            ledger_name: None,
        };
        let mut out: Vec<Queue> = names.into_iter().map(queue).collect();
        if let (Some(d), Some(topic)) = (&self.durable, &self.subscription) {
            out.push(Queue {
                created: true,
                durable: Some((d.client_id.clone(), d.name.clone())),
                ledger_name: self.taken_as.clone(),
                ..queue(topic)
            });
        }
        out
    }

    fn take_ledger(&mut self) -> Ledger {
        self.ledger.take().map(|b| *b).unwrap_or_default()
    }

    fn opened(&self) -> u64 {
        self.opened
    }
}

impl StompVu {
    fn new(class: Arc<StompClass>, session: Session, ids: VuIds) -> StompVu {
        let durable = class.params.durable.as_ref().map(|t| {
            let name = render(t, &class.class, &ids, 0, &mut rand::rng());
            Box::new(Durable {
                client_id: format!("{}-{}-{}", ids.run_id, class.class, ids.vu),
                name,
            })
        });
        let vu = StompVu {
            class,
            ids,
            session,
            opened: 0,
            link: None,
            next_receipt: 1,
            sent: 0,
            waiting: VecDeque::new(),
            ledger: None,
            subscription: None,
            reply_to: None,
            durable: None,
            taken_as: None,
            replies: VecDeque::new(),
            last_request: None,
            pending: VecDeque::new(),
            settled: Vec::new(),
            unacked: 0,
            last_ack: None,
            tx: None,
            next_tx: 1,
        };
        StompVu { durable, ..vu }
    }

    /// Leave as STOMP says: DISCONNECT, and its receipt, so the broker has let go of the
    /// connection (and of a durable subscriber's client id) before the teardown comes.
    async fn disconnect(&mut self, class: &StompClass, timeout: Duration) {
        let Some(mut link) = self.link.take() else {
            return;
        };
        let mut wire = Vec::new();
        Frame::new(Command::Disconnect)
            .header("receipt", "bye")
            .encode(&mut wire);
        let deadline = Instant::now() + timeout;
        if write(&mut link, &wire, deadline).await.is_err() {
            return;
        }
        while let Ok(r) = read(&mut link, &class.limits, deadline).await {
            if r.frame.command == Command::Receipt && r.frame.get("receipt-id") == Some("bye") {
                return;
            }
        }
    }

    /// Read what the broker sent until at most `keep` sends wait for their receipts: what
    /// has come at once, then, while more wait, the oldest one's receipt (or its timeout,
    /// a failed step). A broken connection fails the exchange.
    async fn settle(
        &mut self,
        class: &StompClass,
        keep: usize,
        timeout: Duration,
    ) -> Result<(), Failed> {
        loop {
            let Some(front) = self.pending.front() else {
                return Ok(());
            };
            let blocking = self.pending.len() > keep;
            let by = match blocking {
                true => front.written + timeout,
                false => Instant::now(),
            };
            let Some(link) = self.link.as_mut() else {
                return Err(Failed::of(ErrorClass::Reset, "no connection".into()));
            };
            let r = match read(link, &class.limits, by).await {
                Ok(r) => r,
                Err(f) if f.class == ErrorClass::Timeout && !blocking => return Ok(()),
                Err(f) if f.class == ErrorClass::Timeout => {
                    let detail = format!("no RECEIPT within {timeout:?} of the send");
                    self.fail_front(class, ErrorClass::Timeout, &detail);
                    continue;
                }
                Err(f) => return Err(f),
            };
            match r.frame.command {
                Command::Receipt => self.on_receipt(class, &r),
                Command::Message => self.keep_message(r)?,
                Command::Error => return Err(broker_error(&r.frame)),
                _ => {}
            }
        }
    }

    /// A RECEIPT for a windowed send: its step, timed from the send's write.
    fn on_receipt(&mut self, class: &StompClass, r: &Read) {
        let Some(id) = r
            .frame
            .get("receipt-id")
            .and_then(|v| v.parse::<u64>().ok())
        else {
            return;
        };
        // Receipts come in order: the oldest is nearly always the one.
        let Some(i) = self.pending.iter().position(|p| p.receipt == id) else {
            return;
        };
        if let Some(p) = self.pending.remove(i) {
            let o = done(class.receipt, 0, r.bytes, p.written.elapsed());
            self.settled.push((class.params.label_confirm, o));
        }
    }

    /// Acknowledge message `id` (and, ack: client, those before it): the bytes written.
    async fn ack(&mut self, id: &str, timeout: Duration) -> Result<u64, Failed> {
        let mut wire = Vec::new();
        Frame::new(Command::Ack).header("id", id).encode(&mut wire);
        let Some(link) = self.link.as_mut() else {
            return Err(Failed::of(ErrorClass::Reset, "no connection".into()));
        };
        write(link, &wire, Instant::now() + timeout).await?;
        self.unacked = 0;
        self.last_ack = None;
        Ok(wire.len() as u64)
    }

    /// Commit the open transaction, and wait for the commit's receipt: a step of its own.
    /// A commit that fails fails every send in it.
    async fn commit(&mut self, class: &StompClass, timeout: Duration) -> Result<(), Failed> {
        let Some(tx) = self.tx.take() else {
            return Ok(());
        };
        let want = self.next_receipt.to_string();
        self.next_receipt += 1;
        let mut wire = Vec::new();
        Frame::new(Command::Commit)
            .header("transaction", &tx.id)
            .header("receipt", &want)
            .encode(&mut wire);
        let start = Instant::now();
        let Some(link) = self.link.as_mut() else {
            self.tx = Some(tx);
            return Err(Failed::of(ErrorClass::Reset, "no connection".into()));
        };
        let sent = wire.len() as u64;
        let done_ = match write(link, &wire, start + timeout).await {
            Ok(()) => self.confirm(class, &want, start + timeout, sent).await,
            Err(f) => Err(f),
        };
        match done_ {
            Ok(received) => {
                let o = done(class.receipt, sent, received, start.elapsed());
                self.settled.push((class.params.label_commit, o));
                Ok(())
            }
            Err(f) => {
                let mut o = Outcome::failed(f.class, f.detail.clone());
                o.latency = start.elapsed();
                self.settled.push((class.params.label_commit, o));
                self.tx = Some(tx);
                self.abort_tx(class);
                Err(f)
            }
        }
    }

    /// The open transaction will never be committed: its sends failed, in the ledger.
    fn abort_tx(&mut self, class: &StompClass) {
        let Some(tx) = self.tx.take() else {
            return;
        };
        let from = producer(class.index, &self.ids);
        if let Some(l) = self.ledger.as_mut() {
            for (seq, dest) in &tx.sends {
                l.send_failed(dest, from, *seq);
            }
        }
    }

    /// Begin a transaction for the sends to come, unless one is open: the bytes written.
    async fn begin(&mut self, deadline: Instant) -> Result<u64, Failed> {
        if self.tx.is_some() {
            return Ok(0);
        }
        let id = format!("tx-{}", self.next_tx);
        self.next_tx += 1;
        let mut wire = Vec::new();
        Frame::new(Command::Begin)
            .header("transaction", &id)
            .encode(&mut wire);
        let Some(link) = self.link.as_mut() else {
            return Err(Failed::of(ErrorClass::Reset, "no connection".into()));
        };
        write(link, &wire, deadline).await?;
        self.tx = Some(Box::new(Tx {
            id,
            sends: Vec::new(),
        }));
        Ok(wire.len() as u64)
    }

    /// The oldest waiting send failed: a failed step, and a failed send in the ledger.
    fn fail_front(&mut self, class: &StompClass, why: ErrorClass, detail: &str) {
        let Some(p) = self.pending.pop_front() else {
            return;
        };
        let from = producer(class.index, &self.ids);
        if let Some(l) = self.ledger.as_mut() {
            l.send_failed(&p.destination, from, p.seq);
        }
        let mut o = Outcome::failed(why, detail.to_string());
        o.latency = p.written.elapsed();
        self.settled.push((class.params.label_confirm, o));
    }

    /// Every waiting send failed (its connection ended before the receipt came).
    fn fail_pending(&mut self, class: &StompClass, why: ErrorClass, detail: &str) {
        while !self.pending.is_empty() {
            self.fail_front(class, why, detail);
        }
    }

    /// A MESSAGE that came while the user waited for something else, kept for the next
    /// receive; more than any prefetch allows is the broker's fault.
    fn keep_message(&mut self, r: Read) -> Result<(), Failed> {
        let reply = self.whose(&r.frame)?;
        let kept: u64 = self
            .waiting
            .iter()
            .chain(&self.replies)
            .map(|k| k.bytes)
            .sum();
        if self.waiting.len() + self.replies.len() >= MAX_WAITING
            || kept.saturating_add(r.bytes) > MAX_WAITING_BYTES
        {
            return Err(Failed::of(
                ErrorClass::Body,
                format!(
                    "the broker sent more than {MAX_WAITING} messages or {} MiB unasked",
                    MAX_WAITING_BYTES >> 20
                ),
            ));
        }
        match reply {
            true => self.replies.push_back(r),
            false => self.waiting.push_back(r),
        }
        Ok(())
    }

    /// Whether a MESSAGE is a reply to this user's requests (else one of its
    /// subscription's); a MESSAGE for a subscription this user never made is the
    /// broker's fault, and is not kept: a producer subscribes to nothing.
    fn whose(&self, f: &Frame) -> Result<bool, Failed> {
        let sub = f.get("subscription").unwrap_or("");
        let link = self.link.as_deref();
        let replies = link.is_some_and(|l| l.replies_subscribed) && sub == REPLIES;
        let own = self
            .durable
            .as_ref()
            .map_or(SUBSCRIPTION, |d| d.name.as_str());
        let requests = link.is_some_and(|l| l.subscribed) && sub == own;
        match (replies, requests) {
            (true, _) => Ok(true),
            (_, true) => Ok(false),
            _ => Err(Failed::of(
                ErrorClass::Body,
                format!(
                    "the broker sent a MESSAGE for subscription '{}', which this user never made",
                    sub.chars().take(64).collect::<String>()
                ),
            )),
        }
    }

    /// An open, logged-in session (subscribed, for a consumer), opening one if needed.
    /// Each subscription waits for its receipt: a topic's messages published before the
    /// broker has the subscriber are not its.
    async fn ensure(&mut self, class: &StompClass, conn: &Reach) -> Result<(), Failed> {
        let ready = self.link.as_ref().is_some_and(|l| {
            (l.subscribed || class.params.subscribe.is_none())
                && (l.replies_subscribed || class.params.reply_to.is_none())
        });
        if ready {
            return Ok(());
        }
        // Boxed: every operation's future would otherwise hold the state of an opening
        // that nearly none of them makes.
        Box::pin(self.open_and_subscribe(class, conn)).await
    }

    async fn open_and_subscribe(&mut self, class: &StompClass, conn: &Reach) -> Result<(), Failed> {
        if self.link.is_none() {
            let client_id = self.durable.as_ref().map(|d| d.client_id.as_str());
            let link = Box::pin(open(&class.limits, &self.session, conn, client_id)).await?;
            self.opened += 1;
            self.link = Some(Box::new(link));
        }
        let deadline = Instant::now() + conn.timeouts().request;
        let subscribed = self.link.as_ref().is_some_and(|l| l.subscribed);
        if !subscribed && let Some(dest) = class.params.subscribe.as_ref() {
            let dest = render(dest, &class.class, &self.ids, 0, &mut rand::rng());
            let prefetch = class.params.prefetch.to_string();
            let name = self.durable.as_ref().map(|d| d.name.clone());
            let sub = Subscription {
                id: name.as_deref().unwrap_or(SUBSCRIPTION),
                dest: &dest,
                ack: class.params.ack,
                prefetch: &prefetch,
                durable: name.as_deref(),
            };
            self.subscribe(class, &sub, deadline).await?;
            if let Some(l) = self.link.as_mut() {
                l.subscribed = true;
            }
            // Each of a topic's subscribers gets every message: its own row in the ledger.
            self.taken_as = dest.starts_with("/topic/").then(|| {
                let who = name.unwrap_or_else(|| format!("{}-{}", class.class, self.ids.vu));
                format!("{dest}#{who}")
            });
            self.subscription = Some(dest);
        }
        let replies = self.link.as_ref().is_some_and(|l| l.replies_subscribed);
        if !replies && let Some(reply_to) = class.params.reply_to.as_ref() {
            // Replies are taken as they come: no acknowledgements to wait for.
            let dest = render(reply_to, &class.class, &self.ids, 0, &mut rand::rng());
            let sub = Subscription {
                id: REPLIES,
                dest: &dest,
                ack: AckMode::Auto,
                prefetch: "1000",
                durable: None,
            };
            self.subscribe(class, &sub, deadline).await?;
            if let Some(l) = self.link.as_mut() {
                l.replies_subscribed = true;
            }
            self.reply_to = Some(dest);
        }
        Ok(())
    }

    /// Subscribe, and wait for the broker's receipt of it.
    async fn subscribe(
        &mut self,
        class: &StompClass,
        sub: &Subscription<'_>,
        deadline: Instant,
    ) -> Result<(), Failed> {
        let want = format!("subscribe-{}", self.next_receipt);
        self.next_receipt += 1;
        let Some(link) = self.link.as_mut() else {
            return Err(Failed::of(ErrorClass::Reset, "no connection".into()));
        };
        subscribe(link, sub, Some(&want), deadline).await?;
        self.confirm(class, &want, deadline, 0).await.map(|_| ())
    }

    async fn send(
        &mut self,
        class: &StompClass,
        conn: &Reach,
        s: Send<'_>,
        rng: &mut Xoshiro256PlusPlus,
    ) -> Result<Outcome, Failed> {
        self.ensure(class, conn).await?;
        let windowed = s.receipt && class.params.max_pending > 1;
        if windowed {
            let keep = class.params.max_pending as usize - 1;
            self.settle(class, keep, conn.timeouts().request).await?;
        }
        let dest = render(
            s.destination,
            &class.class,
            &self.ids,
            u64::from(self.sent),
            rng,
        );
        let size = (s.size.sample(rng).max(STAMP_LEN as f64) as usize).min(class.limits.max_body);
        let seq = self.sent;
        self.sent = self.sent.saturating_add(1);
        let from = producer(class.index, &self.ids);
        let want = self.next_receipt.to_string();
        self.next_receipt += 1;
        let mut f = persistence(
            Frame::new(Command::Send).header("destination", &dest),
            s.persistent,
        );
        for (name, t) in s.headers {
            let value = render(t, &class.class, &self.ids, u64::from(seq), rng);
            f = f.header(name, &value);
        }
        let in_tx = class.params.transaction > 0;
        let mut begun = 0;
        if in_tx {
            begun = self.begin(Instant::now() + conn.timeouts().request).await?;
            if let Some(tx) = &self.tx {
                f = f.header("transaction", &tx.id);
            }
        } else if s.receipt {
            f = f.header("receipt", &want);
        }
        let mut wire = Vec::with_capacity(size + 128);
        // The stamp is written at the last moment, so its send time is the write's.
        f.body = body(class.nonce, class.clock, from, seq, size);
        f.encode(&mut wire);
        let deadline = Instant::now() + conn.timeouts().request;
        let Some(link) = self.link.as_mut() else {
            return Err(Failed::of(ErrorClass::Reset, "no connection".into()));
        };
        let start = Instant::now();
        write(link, &wire, deadline).await?;
        let ledger = self.ledger.get_or_insert_with(Box::default);
        ledger.sent(&dest, from, seq);
        let sent = wire.len() as u64 + begun;
        if in_tx {
            // The send is its write; the commit that ends its transaction is timed apart.
            let elapsed = start.elapsed();
            let full = self.tx.as_mut().is_some_and(|tx| {
                tx.sends.push((seq, dest.into()));
                tx.sends.len() >= class.params.transaction as usize
            });
            if full {
                self.commit(class, conn.timeouts().request).await?;
            }
            return Ok(done(Answer::NONE, sent, 0, elapsed));
        }
        if !s.receipt {
            return Ok(done(Answer::NONE, sent, 0, start.elapsed()));
        }
        if windowed {
            self.pending.push_back(Pending {
                receipt: self.next_receipt - 1,
                seq,
                destination: dest.into(),
                written: start,
            });
            return Ok(done(Answer::NONE, sent, 0, start.elapsed()));
        }
        let confirmed = self.confirm(class, &want, deadline, sent).await;
        let elapsed = start.elapsed();
        if confirmed.is_err()
            && let Some(l) = self.ledger.as_mut()
        {
            l.send_failed(&dest, from, seq);
        }
        confirmed.map(|received| done(class.receipt, sent, received, elapsed))
    }

    /// The broker's RECEIPT `want` for a send of `sent` bytes: the bytes read till then.
    /// MESSAGE frames that come first are kept for the next receive.
    async fn confirm(
        &mut self,
        class: &StompClass,
        want: &str,
        deadline: Instant,
        sent: u64,
    ) -> Result<u64, Failed> {
        let mut received = 0u64;
        loop {
            let Some(link) = self.link.as_mut() else {
                return Err(Failed::of(ErrorClass::Reset, "no connection".into()));
            };
            let r = read(link, &class.limits, deadline)
                .await
                .map_err(|f| f.with_bytes(sent, received))?;
            received += r.bytes;
            match r.frame.command {
                Command::Receipt if r.frame.get("receipt-id") == Some(want) => {
                    return Ok(received);
                }
                Command::Message => self
                    .keep_message(r)
                    .map_err(|f| f.with_bytes(sent, received))?,
                Command::Error => return Err(broker_error(&r.frame).with_bytes(sent, received)),
                Command::Receipt => self.on_receipt(class, &r),
                _ => {}
            }
        }
    }

    /// A request with `reply-to` and a `correlation-id` of this run, user and sequence
    /// number, then its reply: timed from the request's write to the reply's arrival. A
    /// reply to an earlier request that timed out is taken and left out.
    async fn request(
        &mut self,
        class: &StompClass,
        conn: &Reach,
        q: Request<'_>,
        rng: &mut Xoshiro256PlusPlus,
    ) -> Result<Outcome, Failed> {
        self.ensure(class, conn).await?;
        let seq = self.sent;
        self.sent = self.sent.saturating_add(1);
        let dest = render(q.destination, &class.class, &self.ids, u64::from(seq), rng);
        let size = (q.size.sample(rng).max(STAMP_LEN as f64) as usize).min(class.limits.max_body);
        let wait = Duration::from_micros(q.timeout.sample(rng).max(0.0) as u64);
        let from = producer(class.index, &self.ids);
        let reply_to = self.reply_to.clone().unwrap_or_default();
        let correlation = format!("{:x}-{}-{}-{seq}", class.nonce, class.index, self.ids.vu);
        let mut f = persistence(
            Frame::new(Command::Send).header("destination", &dest),
            q.persistent,
        )
        .header("reply-to", &reply_to)
        .header("correlation-id", &correlation);
        f.body = body(class.nonce, class.clock, from, seq, size);
        let mut wire = Vec::with_capacity(size + 160);
        f.encode(&mut wire);
        let Some(link) = self.link.as_mut() else {
            return Err(Failed::of(ErrorClass::Reset, "no connection".into()));
        };
        let start = Instant::now();
        write(link, &wire, start + conn.timeouts().request).await?;
        self.ledger
            .get_or_insert_with(Box::default)
            .sent(&dest, from, seq);
        let sent = wire.len() as u64;
        let reply = self
            .reply_for(class, &correlation, start + wait)
            .await
            .map_err(|f| f.with_bytes(sent, 0))?;
        let Some(r) = reply else {
            return Err(Failed::of(
                ErrorClass::Timeout,
                format!("no reply to {dest} within {wait:?}"),
            )
            .with_bytes(sent, 0));
        };
        Ok(done(class.message, sent, r.bytes, start.elapsed()))
    }

    /// The reply whose `correlation-id` is `want`, before `until`; `None` if none came.
    /// Every reply taken goes in the ledger.
    async fn reply_for(
        &mut self,
        class: &StompClass,
        want: &str,
        until: Instant,
    ) -> Result<Option<Read>, Failed> {
        loop {
            while let Some(r) = self.replies.pop_front() {
                self.took_reply(class, &r);
                if r.frame.get("correlation-id") == Some(want) {
                    return Ok(Some(r));
                }
            }
            let Some(r) = self.next_frame(class, until).await? else {
                return Ok(None);
            };
            match r.frame.command {
                Command::Message => self.keep_message(r)?,
                Command::Receipt => self.on_receipt(class, &r),
                Command::Error => return Err(broker_error(&r.frame)),
                _ => {}
            }
        }
    }

    /// The next frame before `until`; `None` when none began by then.
    async fn next_frame(
        &mut self,
        class: &StompClass,
        until: Instant,
    ) -> Result<Option<Read>, Failed> {
        let Some(link) = self.link.as_mut() else {
            return Err(Failed::of(ErrorClass::Reset, "no connection".into()));
        };
        match read(link, &class.limits, until).await {
            Ok(r) => Ok(Some(r)),
            Err(f) if f.class == ErrorClass::Timeout && link.buf.is_empty() => Ok(None),
            Err(f) => Err(f),
        }
    }

    /// A reply in the ledger: taken from the reply queue, by the stamp its service wrote.
    fn took_reply(&mut self, class: &StompClass, r: &Read) {
        let dest = self.reply_to.as_deref().unwrap_or("");
        let l = self.ledger.get_or_insert_with(Box::default);
        match broker::stamp_of(&r.frame.body, class.nonce) {
            Some(st) => {
                // A reply subscription acknowledges automatically.
                l.took_acknowledged(dest, st.producer, st.seq, false);
            }
            None => l.foreign(dest),
        }
    }

    /// A service's turn: the next request of its subscription (as a receive takes it),
    /// answered to its `reply-to` with its `correlation-id`, stamped by this user. Timed
    /// from the start to the reply's write; a request with no `reply-to` is only taken.
    async fn reply(
        &mut self,
        class: &StompClass,
        conn: &Reach,
        size: &Dist,
        timeout: &Dist,
        rng: &mut Xoshiro256PlusPlus,
    ) -> Result<Outcome, Failed> {
        let start = Instant::now();
        let mut o = self.receive(class, conn, timeout, rng).await?;
        if o.label == Some(class.params.label_receive_empty) {
            o.label = Some(class.params.label_reply_empty);
            return Ok(o);
        }
        // The request's end-to-end latency is the service's, not a consumer's.
        for (label, _) in o.steps.iter_mut() {
            if *label == class.params.label_e2e {
                *label = class.params.label_reply_e2e;
            }
        }
        let Some((to, correlation)) = self.last_request.take() else {
            return Ok(o);
        };
        let seq = self.sent;
        self.sent = self.sent.saturating_add(1);
        let from = producer(class.index, &self.ids);
        let size = (size.sample(rng).max(STAMP_LEN as f64) as usize).min(class.limits.max_body);
        let mut f = Frame::new(Command::Send).header("destination", &to);
        if let Some(c) = &correlation {
            f = f.header("correlation-id", c);
        }
        f.body = body(class.nonce, class.clock, from, seq, size);
        let mut wire = Vec::with_capacity(size + 128);
        f.encode(&mut wire);
        let Some(link) = self.link.as_mut() else {
            return Err(Failed::of(ErrorClass::Reset, "no connection".into()));
        };
        write(link, &wire, Instant::now() + conn.timeouts().request)
            .await
            .map_err(|f| f.with_bytes(o.bytes_sent, o.bytes_received))?;
        self.ledger
            .get_or_insert_with(Box::default)
            .sent(&to, from, seq);
        o.bytes_sent += wire.len() as u64;
        o.latency = start.elapsed();
        Ok(o)
    }

    async fn receive(
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
        let labels = (class.params.label_e2e, class.params.label_receive_foreign);
        // ActiveMQ and RabbitMQ say so of a message handed out before.
        let again = m.frame.get("redelivered") == Some("true");
        broker::took(
            &mut o,
            &m.frame.body,
            (class.nonce, class.clock),
            (dest, again, acked),
            &mut self.ledger,
            labels,
        );
        Ok(o)
    }

    /// The next MESSAGE on the stream before `until`; `None` when none came by then.
    async fn next_message(
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

/// A request's parameters, borrowed from its operation.
struct Request<'a> {
    destination: &'a Template,
    size: &'a Dist,
    persistent: bool,
    timeout: &'a Dist,
}

/// A send's parameters, borrowed from its operation.
struct Send<'a> {
    destination: &'a Template,
    size: &'a Dist,
    persistent: bool,
    receipt: bool,
    headers: &'a [(String, Template)],
}

/// The subscription ids of a user's requests (its class's `subscribe`) and of the replies
/// to its own requests.
const SUBSCRIPTION: &str = "0";
const REPLIES: &str = "replies";

/// A SUBSCRIBE: its id, destination, ack mode, prefetch, and for a durable subscription
/// its name.
struct Subscription<'a> {
    id: &'a str,
    dest: &'a str,
    ack: AckMode,
    prefetch: &'a str,
    durable: Option<&'a str>,
}

/// Subscribe, with the prefetch (and a durable subscription's name) in ActiveMQ's and
/// RabbitMQ's words for them.
async fn subscribe(
    link: &mut Link,
    sub: &Subscription<'_>,
    receipt: Option<&str>,
    deadline: Instant,
) -> Result<(), Failed> {
    let mut f = Frame::new(Command::Subscribe)
        .header("id", sub.id)
        .header("destination", sub.dest)
        .header("ack", sub.ack.name())
        .header("activemq.prefetchSize", sub.prefetch)
        .header("prefetch-count", sub.prefetch);
    if let Some(name) = sub.durable {
        f = f
            .header("activemq.subscriptionName", name)
            .header("durable", "true")
            .header("auto-delete", "false");
    }
    if let Some(r) = receipt {
        f = f.header("receipt", r);
    }
    let mut wire = Vec::new();
    f.encode(&mut wire);
    write(link, &wire, deadline).await
}

/// A persistent message says so; a transient one says nothing, STOMP's default. RabbitMQ
/// reads `persistent:false` on a SEND as "declare the queue transient", which an existing
/// durable queue refuses (RESOURCE_LOCKED).
fn persistence(f: Frame, persistent: bool) -> Frame {
    match persistent {
        true => f.header("persistent", "true"),
        false => f,
    }
}

/// A broker's ERROR as a failure in its own words.
fn broker_error(f: &Frame) -> Failed {
    let message = f.get("message").unwrap_or("");
    let detail = String::from_utf8_lossy(&f.body[..f.body.len().min(200)]).into_owned();
    Failed {
        class: ErrorClass::Status,
        // Brokers often repeat the message in the body: say it once.
        detail: match detail.trim() {
            "" => format!("the broker answered ERROR: {message}"),
            d if d == message.trim() => format!("the broker answered ERROR: {message}"),
            d => format!("the broker answered ERROR: {message}: {d}"),
        },
        answer: Answer::named("stomp", "ERROR", None, Some(message)),
        sent: 0,
        received: 0,
    }
}

/// Open a stream to the target's broker and log in: CONNECT, and CONNECTED back within
/// the request timeout.
async fn open(
    limits: &Limits,
    s: &Session,
    conn: &Reach,
    client_id: Option<&str>,
) -> Result<Link, Failed> {
    let endpoint = conn.endpoint();
    let timeouts = conn.timeouts();
    let addr = endpoint.broker.ok_or_else(|| {
        Failed::of(
            ErrorClass::Connect,
            format!(
                "{} has no STOMP broker: give a stomp://HOST:PORT target, or embedded",
                endpoint.display
            ),
        )
    })?;
    let (stream, handshake) =
        Stream::connect_at(endpoint, addr, timeouts.connect, conn.resumes_tls())
            .await
            .map_err(|e| Failed::of(e.class, e.message))?;
    let mut link = Link {
        stream,
        // Small to begin with: an idle consumer holds it for as long as it waits, and a
        // frame larger than it grows it.
        buf: stomp::FrameBuffer::with_capacity(512),
        deadline: Deadline::default(),
        opened: Some(handshake),
        subscribed: false,
        replies_subscribed: false,
        server: Box::from(""),
    };
    let mut f = Frame::new(Command::Connect)
        .header("accept-version", "1.2")
        .header("host", host_of(endpoint))
        .header("heart-beat", "0,0");
    if !s.password.is_empty() {
        f = f.header("login", &s.user).header("passcode", &s.password);
    }
    // ActiveMQ keeps a durable subscription for a client id.
    if let Some(id) = client_id {
        f = f.header("client-id", id);
    }
    let mut wire = Vec::new();
    f.encode(&mut wire);
    let deadline = Instant::now() + timeouts.request;
    write(&mut link, &wire, deadline).await?;
    let r = read(&mut link, limits, deadline).await?;
    match r.frame.command {
        Command::Connected => {
            link.server = r.frame.get("server").unwrap_or("").into();
            Ok(link)
        }
        Command::Error => Err(broker_error(&r.frame)),
        other => Err(Failed::of(
            ErrorClass::Body,
            format!("the broker answered CONNECT with {}", other.name()),
        )),
    }
}

/// The virtual host a CONNECT names: the target's path (`stomp://host/vhost`), else `/`.
fn host_of(endpoint: &Endpoint) -> &str {
    match endpoint.base_path.trim_start_matches('/') {
        "" => "/",
        v => v,
    }
}

async fn write(link: &mut Link, wire: &[u8], deadline: Instant) -> Result<(), Failed> {
    let mut timer = std::mem::take(&mut link.deadline);
    let parts = [wire];
    let written = {
        let w = std::pin::pin!(link.stream.write(&parts));
        timer.within(deadline, w).await
    };
    link.deadline = timer;
    match written {
        Some(Ok(())) => Ok(()),
        Some(Err((n, e))) => Err(Failed {
            class: ErrorClass::Reset,
            detail: format!("sending to the broker: {e}"),
            answer: Answer::NONE,
            sent: n,
            received: 0,
        }),
        None => Err(Failed::of(
            ErrorClass::Timeout,
            "the broker took no frame in time".into(),
        )),
    }
}

/// The next frame from the broker before `deadline`.
async fn read(link: &mut Link, limits: &Limits, deadline: Instant) -> Result<Read, Failed> {
    let mut timer = std::mem::take(&mut link.deadline);
    let got = {
        let r = std::pin::pin!(read_frame(&mut link.stream, &mut link.buf, limits));
        timer.within(deadline, r).await
    };
    link.deadline = timer;
    got.unwrap_or_else(|| {
        Err(Failed::of(
            ErrorClass::Timeout,
            "no answer from the broker in time".into(),
        ))
    })
}

async fn read_frame(
    stream: &mut Stream,
    buf: &mut stomp::FrameBuffer,
    limits: &Limits,
) -> Result<Read, Failed> {
    loop {
        let before = buf.len();
        match buf.decode(limits) {
            Ok(Some(frame)) => {
                return Ok(Read {
                    bytes: (before - buf.len()) as u64,
                    frame,
                });
            }
            Ok(None) => {}
            Err(e) => {
                return Err(Failed::of(
                    ErrorClass::Body,
                    format!("a malformed frame from the broker: {e}"),
                ));
            }
        }
        match stream.read_buf(buf.tail()).await {
            Ok(0) => {
                return Err(Failed::of(
                    ErrorClass::Reset,
                    "the broker closed the connection".into(),
                ));
            }
            Ok(_) => {}
            Err(e) => {
                return Err(Failed::of(
                    ErrorClass::Reset,
                    format!("reading from the broker: {e}"),
                ));
            }
        }
    }
}

/// Preflight: log in once and leave, so a refused login stops the run with the broker's
/// reason before the clock starts.
async fn preflight(class: &StompClass, s: &Session, conn: &Reach) -> Result<(), ProtocolError> {
    let _ = open(&class.limits, s, conn, None)
        .await
        .map_err(|f| ProtocolError::Preflight {
            class: class.class.clone(),
            protocol: "stomp",
            request: format!("STOMP CONNECT to {}", conn.endpoint().display),
            answer: f.detail,
        })?;
    Ok(())
}

/// The teardown's drain of one destination: subscribe with automatic acknowledgement and
/// take every message until none has come for `idle` (or `until`), each in `ledger`; a
/// durable topic subscription is subscribed to again as its subscriber, and removed when
/// `delete`. Then leave with a receipt, so the broker has settled them. How many were
/// taken is added to `taken` as it comes (a failed drain's count stands); whether a
/// subscription was removed.
pub(crate) async fn drain(
    q: &Queue,
    conn: &Reach,
    bounds: broker::Bounds<'_>,
    delete: bool,
    ledger: &mut Ledger,
    taken: &mut u64,
) -> Result<bool, String> {
    let limits = Limits::default();
    let client_id = q.durable.as_ref().map(|d| d.0.as_str());
    let mut link = open(&limits, &q.session, conn, client_id)
        .await
        .map_err(|f| f.detail)?;
    let name = q.durable.as_ref().map(|d| d.1.as_str());
    let sub = Subscription {
        id: name.unwrap_or("drain"),
        dest: &q.name,
        ack: AckMode::Auto,
        prefetch: "1000",
        durable: name,
    };
    let rq = conn.timeouts().request;
    subscribe(&mut link, &sub, None, Instant::now() + rq)
        .await
        .map_err(|f| f.detail)?;
    let as_named = q.ledger_name.as_deref().unwrap_or(&q.name);
    loop {
        let by = (Instant::now() + bounds.idle).min(bounds.until.at);
        let r = match read(&mut link, &limits, by).await {
            Ok(r) => r,
            // Quiet for `idle`: drained. Cut off by the drain's time instead: not.
            Err(f) if f.class == ErrorClass::Timeout && bounds.until.passed() => {
                return Err(broker::cut_off(&q.name, *taken, bounds.until));
            }
            Err(f) if f.class == ErrorClass::Timeout => break,
            Err(f) => return Err(f.detail),
        };
        match r.frame.command {
            Command::Message => {
                *taken += 1;
                broker::drained(ledger, as_named, q.nonce, &r.frame.body)
            }
            Command::Error => return Err(broker_error(&r.frame).detail),
            _ => {}
        }
        if let Some(why) = bounds.stop(&q.name, *taken) {
            return Err(why);
        }
    }
    let mut wire = Vec::new();
    let removed = delete && name.is_some();
    if let Some(name) = name.filter(|_| delete) {
        unsubscribe_durable(&link.server, name, &mut wire);
    }
    Frame::new(Command::Disconnect)
        .header("receipt", "drained")
        .encode(&mut wire);
    let deadline = Instant::now() + rq;
    write(&mut link, &wire, deadline)
        .await
        .map_err(|f| f.detail)?;
    // Messages after the DISCONNECT: a broker that answers with more of them, and never
    // with the RECEIPT, is said to, not called silent.
    let mut after = 0u64;
    loop {
        let r = match read(&mut link, &limits, deadline).await {
            Ok(r) => r,
            Err(f) if f.class == ErrorClass::Timeout && after > 0 => {
                return Err(format!(
                    "{}: the broker sent {after} more messages after the DISCONNECT and no RECEIPT within {rq:?}",
                    q.name
                ));
            }
            Err(f) => return Err(f.detail),
        };
        match r.frame.command {
            Command::Receipt => return Ok(removed),
            // Dispatched before the broker read the DISCONNECT: taken all the same, up to
            // the drain's bound (a broker flooding it would keep the RECEIPT back).
            Command::Message => {
                after += 1;
                *taken += 1;
                broker::drained(ledger, as_named, q.nonce, &r.frame.body);
                if let Some(why) = bounds.stop(&q.name, *taken) {
                    return Err(why);
                }
            }
            Command::Error => return Err(broker_error(&r.frame).detail),
            _ => {}
        }
    }
}

/// The frames that end and remove durable subscription `name`, in the broker's own way.
/// RabbitMQ: one UNSUBSCRIBE of its id, saying durable, deletes its queue. ActiveMQ: its
/// consumer must go first (UNSUBSCRIBE of the id), then the subscription (the id again,
/// and the subscription's name, which makes it a removal).
fn unsubscribe_durable(server: &str, name: &str, wire: &mut Vec<u8>) {
    if server.starts_with("RabbitMQ") {
        Frame::new(Command::Unsubscribe)
            .header("id", name)
            .header("durable", "true")
            .encode(wire);
        return;
    }
    Frame::new(Command::Unsubscribe)
        .header("id", name)
        .encode(wire);
    Frame::new(Command::Unsubscribe)
        .header("id", name)
        .header("activemq.subscriptionName", name)
        .encode(wire);
}
