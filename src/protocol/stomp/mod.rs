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
use tokio::time::Instant;

use super::broker::Queue;
use super::broker::{self, Failed, StampClock, Stamping, nonce_of, render};
use super::over_broker::{BrokerUser, OverBroker};
use super::{Outcome, ProtocolError, Session, SetupError, Stage, VuIds};
use crate::answer::Answer;
use crate::fault::Phases;
use crate::formats::stomp::{self, Command, Frame, Limits};
use crate::ledger::Ledger;
use crate::transport::stream::{Deadline, Handshake, Stream};
use async_trait::async_trait;

use super::contract::{Done, Preflight, Protocol, Reach};
use crate::transport::ErrorClass;
use crate::workload::protocols::{AckMode, StompOp, StompParams};
use crate::workload::{Dist, Template, UserClass};

/// Messages a user keeps that arrived while it waited for something else: more than its
/// prefetch means the broker does not keep to it.
mod drain;
mod receive;
mod request;
mod send;
mod wire;

use wire::{Subscription, open, read, subscribe, write};

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
    /// Its target's fault timeline, whose phase each send is marked with.
    phases: Option<Arc<Phases>>,
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
        stamping: &Stamping,
    ) -> StompClass {
        StompClass {
            ops: ops.to_vec(),
            params: params.clone(),
            class: class.name.clone(),
            index,
            clock: stamping.clock,
            phases: stamping.phases.clone(),
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
        let fail = |request: &str, answer: String| SetupError {
            stage: Stage::Broker,
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
            drainer: &drain::Drain,
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
            return Err(Failed::no_connection());
        };
        subscribe(link, sub, Some(&want), deadline).await?;
        self.confirm(class, &want, deadline, 0).await.map(|_| ())
    }

    /// The next frame before `until`; `None` when none began by then.
    async fn next_frame(
        &mut self,
        class: &StompClass,
        until: Instant,
    ) -> Result<Option<Read>, Failed> {
        let Some(link) = self.link.as_mut() else {
            return Err(Failed::no_connection());
        };
        match read(link, &class.limits, until).await {
            Ok(r) => Ok(Some(r)),
            Err(f) if f.class == ErrorClass::Timeout && link.buf.is_empty() => Ok(None),
            Err(f) => Err(f),
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::workload::{ClassKind, load_str};

    /// A STOMP class of one producer, its `params:` as given.
    fn class(params: &str) -> Arc<StompClass> {
        let text = format!(
            "name: t\ntarget: embedded\nusers:\n  - class: c\n    protocol: stomp\n    count: 1\n    params: {{ {params} }}\n    mix:\n      send: {{ weight: 1, params: {{ destination: \"/queue/q-{{run_id}}\", receipt: true }} }}\n"
        );
        let w = load_str("t.yaml", &text, &[], None).unwrap();
        let c = &w.classes[0];
        let ClassKind::Stomp { ops, params } = &c.kind else {
            panic!("a STOMP class");
        };
        Arc::new(StompClass::new(
            c,
            ops,
            params,
            3,
            "run1",
            &Stamping {
                clock: StampClock::Wall,
                phases: None,
            },
        ))
    }

    fn user(class: &Arc<StompClass>) -> StompVu {
        let session = Session {
            user: "u".into(),
            password: String::new(),
            auth: None,
            context: Arc::from(""),
        };
        let ids = VuIds {
            vu: 7,
            round: 1,
            run_id: Arc::from("run1"),
        };
        StompVu::new(class.clone(), session, ids)
    }

    fn read_of(frame: Frame) -> Read {
        let mut wire = Vec::new();
        frame.encode(&mut wire);
        Read {
            frame,
            bytes: wire.len() as u64,
        }
    }

    fn waiting(vu: &mut StompVu, receipt: u64, seq: u32) {
        vu.pending.push_back(Pending {
            receipt,
            seq,
            destination: "/queue/q-run1".into(),
            written: Instant::now(),
        });
    }

    fn receipt(id: &str) -> Read {
        read_of(Frame::new(Command::Receipt).header("receipt-id", id))
    }

    #[test]
    fn a_receipt_settles_its_own_send_whatever_the_order_and_others_are_ignored() {
        let class = class("max_pending: 4");
        let mut vu = user(&class);
        for (r, seq) in [(1, 0), (2, 1), (3, 2)] {
            waiting(&mut vu, r, seq);
        }
        vu.on_receipt(&class, &receipt("2"));
        let left: Vec<u64> = vu.pending.iter().map(|p| p.receipt).collect();
        assert_eq!(left, [1, 3]);
        assert_eq!(vu.settled.len(), 1);
        let (label, o) = &vu.settled[0];
        assert_eq!(*label, class.params.label_confirm);
        assert!(o.is_ok() && o.answer == class.receipt, "{o:?}");
        // A receipt for no send of this user's, or not a number: nothing settles.
        vu.on_receipt(&class, &receipt("9"));
        vu.on_receipt(&class, &receipt("two"));
        vu.on_receipt(&class, &read_of(Frame::new(Command::Receipt)));
        assert_eq!(vu.pending.len(), 2);
        assert_eq!(vu.settled.len(), 1);
    }

    #[test]
    fn sends_still_waiting_when_the_connection_ends_fail_each_in_the_ledger() {
        let class = class("max_pending: 4");
        let mut vu = user(&class);
        let from = broker::producer(class.index, &vu.ids);
        let mut ledger = Ledger::default();
        for seq in 0..3 {
            ledger.sent("/queue/q-run1", from, seq);
        }
        vu.ledger = Some(Box::new(ledger));
        waiting(&mut vu, 1, 1);
        waiting(&mut vu, 2, 2);
        vu.fail_pending(&class, ErrorClass::Reset, "closed");
        assert!(vu.pending.is_empty());
        assert_eq!(vu.settled.len(), 2);
        assert!(
            vu.settled.iter().all(
                |(l, o)| *l == class.params.label_confirm && o.error == Some(ErrorClass::Reset)
            )
        );
        let counts = vu.ledger.as_ref().unwrap().settle(true);
        assert_eq!(counts[0].1.sent, 3);
        assert_eq!(counts[0].1.send_failed, 2);
    }

    #[test]
    fn a_transaction_never_committed_fails_every_send_in_it() {
        let class = class("transaction: 5");
        let mut vu = user(&class);
        let from = broker::producer(class.index, &vu.ids);
        let mut ledger = Ledger::default();
        ledger.sent("/queue/q-run1", from, 0);
        ledger.sent("/queue/q-run1", from, 1);
        vu.ledger = Some(Box::new(ledger));
        vu.tx = Some(Box::new(Tx {
            id: "tx-1".into(),
            sends: vec![(0, "/queue/q-run1".into()), (1, "/queue/q-run1".into())],
        }));
        vu.abort_tx(&class);
        assert!(vu.tx.is_none());
        let counts = vu.ledger.as_ref().unwrap().settle(true);
        assert_eq!(counts[0].1.send_failed, 2);
        // Nothing open: nothing to abort.
        vu.abort_tx(&class);
        assert_eq!(vu.ledger.as_ref().unwrap().settle(true)[0].1.send_failed, 2);
    }

    #[test]
    fn a_message_for_a_subscription_the_user_never_made_is_the_brokers_fault() {
        let class = class("max_pending: 1");
        let mut vu = user(&class);
        let m = Frame::new(Command::Message)
            .header("subscription", SUBSCRIPTION)
            .header("destination", "/queue/q-run1");
        // A producer subscribes to nothing: its own subscription's id is not its either.
        let e = vu.keep_message(read_of(m)).unwrap_err();
        assert_eq!(e.class, ErrorClass::Body);
        assert!(e.detail.contains("never made"), "{}", e.detail);
        let long = "x".repeat(500);
        let m = Frame::new(Command::Message).header("subscription", &long);
        let e = vu.whose(&m).unwrap_err();
        assert!(e.detail.len() < 200, "a hostile id is cut: {}", e.detail);
        assert!(vu.waiting.is_empty() && vu.replies.is_empty());
    }
}
