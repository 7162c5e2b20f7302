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

use std::sync::Arc;
use std::time::Duration;

use futures_util::StreamExt as _;
use lapin::options::{
    BasicAckOptions, BasicConsumeOptions, BasicPublishOptions, BasicQosOptions,
    ConfirmSelectOptions, QueueDeclareOptions,
};
use lapin::types::{AMQPValue, FieldTable, ShortString};
use lapin::{BasicProperties, Channel, Confirmation, Connection, ConnectionProperties, Consumer};
use rand::rngs::Xoshiro256PlusPlus;
use tokio::time::Instant;

use super::{Outcome, ProtocolError, Session, SetupError, VuIds};
use crate::answer::Answer;
use crate::transport::stream::Handshake;
use crate::transport::{Conn, ErrorClass};
use crate::workload::protocols::{AmqpOp, AmqpParams, QueueType};
use crate::workload::{Dist, UserClass};

use super::broker::{self, Failed, body, done, nonce_of, now_ns, render, stamp_of};

/// What every user of an AMQP class shares.
pub struct AmqpClass {
    ops: Vec<AmqpOp>,
    params: AmqpParams,
    class: String,
    nonce: u32,
    /// Publisher confirms are on for the class's channels.
    confirms: bool,
    ack: Answer,
    deliver: Answer,
    nack: Answer,
}

impl AmqpClass {
    pub fn new(class: &UserClass, ops: &[AmqpOp], params: &AmqpParams, run_id: &str) -> AmqpClass {
        AmqpClass {
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
        }
    }
}

/// A user's open session with the broker.
struct Session091 {
    // Kept so the connection lives as long as its channel; closed when dropped.
    _connection: Connection,
    channel: Channel,
    consumer: Option<Consumer>,
    queue: String,
    opened: Option<Handshake>,
}

/// One user of an AMQP class.
pub struct AmqpVu {
    class: Arc<AmqpClass>,
    ids: VuIds,
    session: Session,
    /// Boxed: a connection, its channel and consumer are large, and an idle user of any
    /// protocol pays for the largest driver state.
    open: Option<Box<Session091>>,
    sent: u64,
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
        lapin::ErrorKind::IOError(_) | lapin::ErrorKind::InvalidConnectionState(_) => {
            Failed::of(ErrorClass::Reset, format!("{what}: {e}"))
        }
        _ => Failed::of(ErrorClass::Body, format!("{what}: {e}")),
    }
}

impl AmqpVu {
    pub fn new(class: Arc<AmqpClass>, session: Session, ids: VuIds) -> AmqpVu {
        AmqpVu {
            class,
            ids,
            session,
            open: None,
            sent: 0,
        }
    }

    /// Untimed, before the round: connect, declare the queue, and start consuming.
    pub async fn setup(&mut self, conn: &mut Conn) -> Result<(), SetupError> {
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

    pub async fn execute(
        &mut self,
        op: usize,
        conn: &mut Conn,
        rng: &mut Xoshiro256PlusPlus,
    ) -> Outcome {
        let class = self.class.clone();
        let Some(o) = class.ops.get(op) else {
            return Outcome::failed(ErrorClass::Body, format!("no operation {op}"));
        };
        let started = Instant::now();
        let result = match o {
            AmqpOp::Publish {
                size,
                persistent,
                confirm,
                mandatory,
            } => {
                let p = Publish {
                    size,
                    persistent: *persistent,
                    confirm: *confirm,
                    mandatory: *mandatory,
                };
                self.publish(&class, conn, p, rng).await
            }
            AmqpOp::Consume { timeout } => self.consume(&class, conn, timeout, rng).await,
        };
        let (mut out, failed) = broker::outcome(result, started);
        // A connection this operation opened is reported with it, failed or not.
        out.handshake = self.open.as_mut().and_then(|s| s.opened.take());
        if failed {
            self.open = None;
        }
        out
    }

    async fn ensure(&mut self, class: &AmqpClass, conn: &mut Conn) -> Result<(), Failed> {
        if self.open.is_none() {
            let s = Box::pin(open(class, &self.session, &self.ids, conn)).await?;
            conn.opened += 1;
            self.open = Some(Box::new(s));
        }
        Ok(())
    }

    async fn publish(
        &mut self,
        class: &AmqpClass,
        conn: &mut Conn,
        p: Publish<'_>,
        rng: &mut Xoshiro256PlusPlus,
    ) -> Result<Outcome, Failed> {
        self.ensure(class, conn).await?;
        let timeout = conn.timeouts().request;
        let size = p
            .size
            .sample(rng)
            .max(crate::workload::protocols::STAMP_LEN as f64) as usize;
        let seq = self.sent;
        self.sent += 1;
        let Some(s) = self.open.as_ref() else {
            return Err(Failed::of(ErrorClass::Reset, "no connection".into()));
        };
        let payload = body(class.nonce, self.ids.vu, seq, size.min(64 << 20));
        let props = BasicProperties::default().with_delivery_mode(if p.persistent { 2 } else { 1 });
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
        // A confirming publish is what turned the channel's confirms on.
        if !p.confirm {
            return Ok(done(Answer::NONE, sent, 0, start.elapsed()));
        }
        let confirmation = within(timeout, confirm, "the publisher confirm")
            .await?
            .map_err(|e| failed("publisher confirm", e))?;
        let latency = start.elapsed();
        match confirmation {
            Confirmation::Ack(None) | Confirmation::NotRequested => {
                Ok(done(class.ack, sent, 0, latency))
            }
            Confirmation::Ack(Some(returned)) | Confirmation::Nack(Some(returned)) => {
                let code = returned.reply_code;
                let text = returned.reply_text.to_string();
                let mut o = done(
                    Answer::named("amqp", "basic.return", Some(code), Some(&text)),
                    sent,
                    0,
                    latency,
                );
                o.error = Some(ErrorClass::Status);
                o.detail = Some(format!(
                    "the broker returned the message: {code} {text} (queue '{}')",
                    s.queue
                ));
                Ok(o)
            }
            Confirmation::Nack(None) => {
                let mut o = done(class.nack, sent, 0, latency);
                o.error = Some(ErrorClass::Status);
                o.detail = Some(format!(
                    "the broker refused the message (basic.nack), queue '{}'",
                    s.queue
                ));
                Ok(o)
            }
        }
    }

    async fn consume(
        &mut self,
        class: &AmqpClass,
        conn: &mut Conn,
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
        let next = match tokio::time::timeout(wait, consumer.next()).await {
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
        if class.params.manual_ack {
            // The delivery came whatever became of its acknowledgement: its bytes count.
            within(
                conn.timeouts().request,
                delivery.ack(BasicAckOptions::default()),
                "the acknowledgement",
            )
            .await
            .map_err(|f| f.with_bytes(0, received))?
            .map_err(|e| failed("basic.ack", e).with_bytes(0, received))?;
        }
        let mut o = done(class.deliver, 0, received, latency);
        match stamp_of(&delivery.data, class.nonce) {
            Some(sent_ns) => {
                let e2e = Duration::from_nanos(now_ns().saturating_sub(sent_ns));
                o.steps
                    .push((class.params.label_e2e, done(Answer::NONE, 0, 0, e2e)));
            }
            None => o.label = Some(class.params.label_consume_foreign),
        }
        Ok(o)
    }

    /// Nothing to delete: the queue and its messages are the broker's.
    pub fn leftovers(&self) -> Vec<(crate::transport::Method, super::cleanup::Place)> {
        Vec::new()
    }
}

/// A publish's parameters, borrowed from its operation.
struct Publish<'a> {
    size: &'a Dist,
    persistent: bool,
    confirm: bool,
    mandatory: bool,
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
/// consumer when the class consumes.
async fn open(
    class: &AmqpClass,
    s: &Session,
    ids: &VuIds,
    conn: &Conn,
) -> Result<Session091, Failed> {
    let endpoint = conn.endpoint();
    let timeouts = conn.timeouts();
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
    let uri = lapin::uri::AMQPUri {
        authority: lapin::uri::AMQPAuthority {
            userinfo: lapin::uri::AMQPUserInfo {
                username: user,
                password,
            },
            host: addr.ip().to_string(),
            port: addr.port(),
        },
        vhost: match endpoint.base_path.trim_start_matches('/') {
            "" => "/".to_string(),
            v => v.to_string(),
        },
        ..Default::default()
    };
    let t0 = Instant::now();
    let connection = within(
        timeouts.connect,
        Connection::connect_uri(uri, ConnectionProperties::default()),
        "the AMQP connection",
    )
    .await?
    .map_err(|e| match e.kind() {
        lapin::ErrorKind::IOError(_) => {
            Failed::of(ErrorClass::Connect, format!("connect to {addr}: {e}"))
        }
        _ => failed("AMQP connection", e),
    })?;
    let handshake = Handshake {
        connect: t0.elapsed(),
        tls: None,
        resumed: false,
    };
    let rq = timeouts.request;
    let channel = within(rq, connection.create_channel(), "the channel")
        .await?
        .map_err(|e| failed("channel.open", e))?;
    let queue = render(&class.params.queue, &class.class, ids, 0, &mut rand::rng());
    prepare(class, &channel, &queue, rq).await?;
    let consumes = class
        .ops
        .iter()
        .any(|o| matches!(o, AmqpOp::Consume { .. }));
    let consumer = match consumes {
        false => None,
        true => Some(consume_from(class, &channel, &queue, ids, rq).await?),
    };
    Ok(Session091 {
        _connection: connection,
        channel,
        consumer,
        queue,
        opened: Some(handshake),
    })
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

/// Preflight: connect, open a channel and declare the class's queue once, so a refused
/// login or an inequivalent queue stops the run with the broker's reason.
pub async fn preflight(
    class: &AmqpClass,
    s: &Session,
    ids: &VuIds,
    conn: &Conn,
) -> Result<(), ProtocolError> {
    // No queue declared, no consumer: the preflight leaves nothing on the broker.
    let probe = AmqpClass {
        ops: Vec::new(),
        params: AmqpParams {
            queue_type: QueueType::Existing,
            ..class.params.clone()
        },
        class: class.class.clone(),
        nonce: class.nonce,
        confirms: class.confirms,
        ack: class.ack,
        deliver: class.deliver,
        nack: class.nack,
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
