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

use lapin::{Channel, Confirmation, Connection, Consumer};
use rand::rngs::Xoshiro256PlusPlus;
use tokio::time::Instant;

use async_trait::async_trait;

use super::contract::{Done, Preflight, Protocol, Reach};
use super::{Outcome, ProtocolError, Session, SetupError, Stage, VuIds};
use crate::answer::Answer;
use crate::transport::ErrorClass;
use crate::transport::stream::Handshake;
use crate::workload::protocols::{AmqpOp, AmqpParams, QueueType};
use crate::workload::{Dist, UserClass};

use super::broker::Queue;
use super::broker::{self, Failed, StampClock, Stamping, nonce_of};
use super::over_broker::{BrokerUser, OverBroker};
use crate::fault::Phases;
use crate::ledger::Ledger;

mod consume;
mod drain;
mod publish;
mod request;
mod wire;

use wire::open;

/// What every user of an AMQP class shares.
pub(crate) struct AmqpClass {
    ops: Vec<AmqpOp>,
    params: AmqpParams,
    class: String,
    /// The class's index in the workload, in every stamp its producers write.
    index: u16,
    /// The clock its stamps carry.
    clock: StampClock,
    /// Its target's fault timeline, whose phase each send is marked with.
    phases: Option<Arc<Phases>>,
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
        stamping: &Stamping,
    ) -> AmqpClass {
        AmqpClass {
            index,
            clock: stamping.clock,
            phases: stamping.phases.clone(),
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
        self.ensure(&class, conn).await.map_err(|f| SetupError {
            stage: Stage::Broker,
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
                Box::pin(self.request(&class, conn, size, timeout, rng)).await
            }
            AmqpOp::Reply { size, timeout } => {
                Box::pin(self.reply(&class, conn, size, timeout, rng)).await
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
                drainer: &drain::Drain,
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
}

/// A publish's parameters, borrowed from its operation.
struct Publish<'a> {
    size: &'a Dist,
    persistent: bool,
    confirm: bool,
    mandatory: bool,
    headers: &'a [(String, crate::workload::Template)],
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
        phases: None,
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::workload::{ClassKind, load_str};
    use std::time::Duration;

    fn class() -> AmqpClass {
        let text = "name: t\ntarget: amqp://127.0.0.1:5672\nusers:\n  - class: c\n    protocol: amqp\n    count: 1\n    params: { queue: \"q-{run_id}\" }\n    mix:\n      publish: { weight: 1, params: { confirm: true } }\n";
        let w = load_str("t.yaml", text, &[], None).unwrap();
        let c = &w.classes[0];
        let ClassKind::Amqp { ops, params } = &c.kind else {
            panic!("an AMQP class");
        };
        AmqpClass::new(
            c,
            ops,
            params,
            0,
            "run1",
            &Stamping {
                clock: StampClock::Wall,
                phases: None,
            },
        )
    }

    #[test]
    fn a_confirm_is_the_brokers_word_on_the_message_and_a_nack_is_a_refusal() {
        let class = class();
        let ms = Duration::from_millis(3);
        let (o, took) = publish::confirmed(&class, Ok(Confirmation::Ack(None)), "q", ms);
        let o = o.unwrap();
        assert!(took && o.is_ok() && o.answer == class.ack && o.latency == ms);
        let (o, took) = publish::confirmed(&class, Ok(Confirmation::Nack(None)), "q", ms);
        let o = o.unwrap();
        assert!(!took, "a nacked message is not the broker's");
        assert_eq!(o.answer, class.nack);
        assert_eq!(o.error, Some(ErrorClass::Status));
        assert!(o.detail.as_deref().is_some_and(|d| d.contains("queue 'q'")));
        // Confirms not asked for: the publish is taken on the channel's word.
        let (o, took) = publish::confirmed(&class, Ok(Confirmation::NotRequested), "q", ms);
        assert!(took && o.unwrap().is_ok());
        // The channel ended before the confirm: the failure itself, and not taken.
        let f = Failed::of(ErrorClass::Reset, "channel closed".into());
        let (o, took) = publish::confirmed(&class, Err(f), "q", ms);
        assert!(!took && o.is_err_and(|f| f.class == ErrorClass::Reset));
    }
}
