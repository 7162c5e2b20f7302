//! STOMP 1.2 producers and consumers of a message broker (ActiveMQ, RabbitMQ's
//! `rabbitmq_stomp`, Artemis, the embedded broker): its schema and its typed operations.
//! Driven by `protocol/stomp/`.
//!
//! A producer's `send` names its destination (a template: `/queue/jms-{round}`), its
//! body's size, whether it is persistent and whether it waits for the broker's receipt
//! (a persistent send with a receipt is JMS's synchronous persistent send). A consumer
//! class subscribes once per user (`params: { subscribe: ..., ack: ..., prefetch: ... }`)
//! and each `receive` takes one message, or finds none within its timeout. A topic's
//! subscriber may be durable (`durable: NAME`): the broker keeps its messages while it is
//! away (ActiveMQ's client id and subscription name, RabbitMQ's durable queue). With
//! `max_pending: N` a producer keeps up to N sends waiting for their receipts: `send` then
//! times the write (and any wait for room in the window), and each receipt is timed
//! apart, from its send's write, as `send.confirm`. With `transaction: N` sends go in
//! transactions of N (`BEGIN`, the sends, `COMMIT` with a receipt): a send is then its
//! write, and each commit is timed, to its receipt, as `send.commit`.

use super::{ClassKind, ParamKind, ProtocolDef, Tally, broker_tally, each, label_index, op, p};
use crate::workload::dist::{Dist, DistSpec, Unit};
use crate::workload::{Params, Template};

/// The stamp every message body starts with (run nonce, producer, sequence, send time):
/// a body smaller than this is refused.
pub(crate) const STAMP_LEN: usize = 24;

const ACK_MODES: &[&str] = &["auto", "client", "client-individual"];

pub(super) static DEF: ProtocolDef = ProtocolDef {
    ops: &[
        op(
            StompOp::NAMES[0],
            &[
                p(
                    "destination",
                    ParamKind::Template,
                    "where to send: /queue/NAME or /topic/NAME, built-in variables allowed",
                ),
                p(
                    "size",
                    ParamKind::Dist(Unit::Size),
                    "body size, the 24-byte stamp included (default 1KiB)",
                ),
                p(
                    "persistent",
                    ParamKind::Flag,
                    "the broker stores the message before it answers (default true)",
                ),
                p(
                    "receipt",
                    ParamKind::Flag,
                    "wait for the broker's RECEIPT: the confirm latency (default true)",
                ),
                p(
                    "headers",
                    ParamKind::Headers(&[
                        "destination",
                        "receipt",
                        "transaction",
                        "content-length",
                        "persistent",
                    ]),
                    "headers of each message: { NAME: TEMPLATE }, built-in variables allowed",
                ),
            ],
        ),
        op(
            StompOp::NAMES[1],
            &[p(
                "timeout",
                ParamKind::Dist(Unit::Duration),
                "how long to wait for a message before the receive counts as empty (default 1s)",
            )],
        ),
        op(
            StompOp::NAMES[2],
            &[
                p(
                    "destination",
                    ParamKind::Template,
                    "where the request goes (a service's queue), built-in variables allowed",
                ),
                p(
                    "size",
                    ParamKind::Dist(Unit::Size),
                    "request body size, the 24-byte stamp included (default 1KiB)",
                ),
                p(
                    "persistent",
                    ParamKind::Flag,
                    "the broker stores the request (default false)",
                ),
                p(
                    "timeout",
                    ParamKind::Dist(Unit::Duration),
                    "how long to wait for the reply, a failure past it (default 5s)",
                ),
            ],
        ),
        op(StompOp::NAMES[3], super::REPLY_PARAMS),
    ],
    class_params: &[
        p(
            "subscribe",
            ParamKind::Template,
            "the destination each user of the class subscribes to",
        ),
        p(
            "ack",
            ParamKind::Choice(ACK_MODES),
            "auto, client or client-individual (default client-individual)",
        ),
        p(
            "prefetch",
            ParamKind::Integer,
            "messages the broker may send ahead of acknowledgements (default 1)",
        ),
        p(
            "durable",
            ParamKind::Template,
            "the name of a durable subscription to a /topic/ (kept by the broker while its user is away)",
        ),
        p(
            "reply_to",
            ParamKind::Template,
            "where a requesting user's replies come (default /queue/reply-{run_id}-{class}-{vu})",
        ),
        p(
            "ack_every",
            ParamKind::Integer,
            "acknowledge every Nth message, and with it those before (ack: client; default 1)",
        ),
        p(
            "transaction",
            ParamKind::Integer,
            "sends per transaction (BEGIN, then COMMIT with a receipt), the commit timed apart; default none",
        ),
        p(
            "max_pending",
            ParamKind::Integer,
            "receipts a producer may wait for at once (default 1: each send waits for its own)",
        ),
    ],
};

/// STOMP operations.
#[derive(Debug, Clone)]
pub enum StompOp {
    /// One message: `size` bytes (a distribution, sampled per message), to `destination`.
    Send {
        destination: Template,
        size: Dist,
        persistent: bool,
        receipt: bool,
        headers: Vec<(String, Template)>,
    },
    /// The next message of the user's subscription, or none within `timeout`.
    Receive { timeout: Dist },
    /// A request to `destination` with `reply-to` and `correlation-id`, and the wait for
    /// its reply (JMeter's point-to-point request-response): timed from the request's
    /// write to the reply.
    Request {
        destination: Template,
        size: Dist,
        persistent: bool,
        timeout: Dist,
    },
    /// A service: the next request of the user's subscription, answered to its
    /// `reply-to` with its `correlation-id` (or none within `timeout`).
    Reply { size: Dist, timeout: Dist },
}

impl StompOp {
    /// The report's sum its own label adds to: a message sent, a message taken, or (a
    /// request and its reply) a round trip.
    pub fn tally(&self) -> Tally {
        match self {
            StompOp::Send { .. } => Tally::Sent,
            StompOp::Receive { .. } => Tally::Received,
            StompOp::Request { .. } | StompOp::Reply { .. } => Tally::Total,
        }
    }
}

impl StompParams {
    /// The report's sum a label the driver adds goes to ([`broker_tally`]).
    pub fn tally(&self, label: usize) -> Tally {
        broker_tally(
            label,
            self.label_receive_foreign,
            &[
                self.label_receive_empty,
                self.label_reply_empty,
                self.label_e2e,
                self.label_reply_e2e,
                self.label_confirm,
                self.label_commit,
            ],
        )
    }
}

impl StompOp {
    pub const NAMES: [&'static str; 4] = ["send", "receive", "request", "reply"];

    pub fn name(&self) -> &'static str {
        match self {
            StompOp::Send { .. } => Self::NAMES[0],
            StompOp::Receive { .. } => Self::NAMES[1],
            StompOp::Request { .. } => Self::NAMES[2],
            StompOp::Reply { .. } => Self::NAMES[3],
        }
    }

    fn build(name: &str, p: &Params) -> Option<StompOp> {
        Some(match name {
            "send" => StompOp::Send {
                destination: p
                    .template("destination")
                    .cloned()
                    .unwrap_or_else(|| Template::literal("/queue/loadmix")),
                size: p
                    .dist("size")
                    .cloned()
                    .unwrap_or_else(|| Dist::constant(1024.0)),
                persistent: p.flag("persistent").unwrap_or(true),
                receipt: p.flag("receipt").unwrap_or(true),
                headers: p.headers("headers").to_vec(),
            },
            "receive" => StompOp::Receive {
                timeout: p
                    .dist("timeout")
                    .cloned()
                    .unwrap_or_else(|| Dist::constant(1e6)),
            },
            "request" => StompOp::Request {
                destination: p
                    .template("destination")
                    .cloned()
                    .unwrap_or_else(|| Template::literal("/queue/loadmix-service")),
                size: p
                    .dist("size")
                    .cloned()
                    .unwrap_or_else(|| Dist::constant(1024.0)),
                persistent: p.flag("persistent").unwrap_or(false),
                timeout: p
                    .dist("timeout")
                    .cloned()
                    .unwrap_or_else(|| Dist::constant(5e6)),
            },
            "reply" => StompOp::Reply {
                size: p
                    .dist("size")
                    .cloned()
                    .unwrap_or_else(|| Dist::constant(1024.0)),
                timeout: p
                    .dist("timeout")
                    .cloned()
                    .unwrap_or_else(|| Dist::constant(1e6)),
            },
            _ => return None,
        })
    }

    /// Its parameters as `validate` shows them.
    pub fn describe(&self) -> String {
        match self {
            StompOp::Send {
                destination,
                size,
                persistent,
                receipt,
                ..
            } => format!(
                "to {} · size {} · {} · {}",
                destination.source,
                size.describe(&crate::workload::units::format_size),
                if *persistent {
                    "persistent"
                } else {
                    "non-persistent"
                },
                if *receipt { "receipt" } else { "no receipt" }
            ),
            StompOp::Request {
                destination, size, ..
            } => format!(
                "to {} · size {} · waits for the reply",
                destination.source,
                size.describe(&crate::workload::units::format_size)
            ),
            StompOp::Receive { .. } | StompOp::Reply { .. } => String::new(),
        }
    }
}

/// How a consumer acknowledges what it receives.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AckMode {
    Auto,
    Client,
    ClientIndividual,
}

impl AckMode {
    pub fn name(self) -> &'static str {
        match self {
            AckMode::Auto => "auto",
            AckMode::Client => "client",
            AckMode::ClientIndividual => "client-individual",
        }
    }
}

/// A body cannot be smaller than the stamp it starts with. A constant or uniform size is
/// checked here; a distribution that reaches below it (an exponential) has its smaller
/// samples raised to the stamp's size.
pub(super) fn check_size(size: &Dist) -> Result<(), String> {
    let lowest = match size.spec {
        DistSpec::Constant(v) => v,
        DistSpec::Uniform { low, .. } => low,
        _ => return Ok(()),
    };
    if lowest < STAMP_LEN as f64 {
        return Err(format!(
            "a message body of {lowest} bytes is smaller than the {STAMP_LEN}-byte stamp every message starts with (run, producer, sequence, send time): give size: {STAMP_LEN}B or more"
        ));
    }
    Ok(())
}

/// STOMP class parameters and the labels its driver adds.
#[derive(Debug, Clone)]
pub struct StompParams {
    /// What each user subscribes to before its round; `None`: a producer only.
    pub subscribe: Option<Template>,
    /// A durable subscription's name (a topic's subscriber the broker keeps messages for).
    pub durable: Option<Template>,
    /// Where a requesting user's replies come; `None`: the class sends no requests.
    pub reply_to: Option<Template>,
    /// A reply that found no request within its timeout.
    pub label_reply_empty: usize,
    /// Each request's end-to-end latency at its service.
    pub label_reply_e2e: usize,
    pub ack: AckMode,
    pub prefetch: u32,
    /// A receive that found no message within its timeout: counted, not a failure.
    pub label_receive_empty: usize,
    /// A message that does not carry this run's stamp (another run's, a dirty queue's).
    pub label_receive_foreign: usize,
    /// Each message's end-to-end latency (send to receive), reported apart.
    pub label_e2e: usize,
    /// Receipts a producer may have outstanding; past 1, a send does not wait for its own,
    /// and each receipt is timed apart (`label_confirm`).
    pub max_pending: u32,
    pub label_confirm: usize,
    /// Sends per transaction; 0: none. Each commit is timed apart (`label_commit`).
    pub transaction: u32,
    pub label_commit: usize,
    /// A consumer acknowledges every Nth message, cumulatively (1: each one).
    pub ack_every: u32,
}

/// The class's typed operations and parameters, with every default applied. A consumer
/// class (one with `receive`) must subscribe.
pub(super) fn build(
    ops: &[(&str, &Params)],
    class_params: &Params,
    labels: &mut Vec<String>,
) -> Result<ClassKind, super::BuildError> {
    let ops = each(ops, StompOp::build)?;
    for o in &ops {
        match o {
            StompOp::Send { size, .. }
            | StompOp::Request { size, .. }
            | StompOp::Reply { size, .. } => check_size(size)?,
            StompOp::Receive { .. } => {}
        }
    }
    let max_pending = super::max_pending(class_params)?;
    let transaction = super::transaction(class_params, max_pending)?;
    if max_pending > 1
        && ops
            .iter()
            .any(|o| matches!(o, StompOp::Send { receipt: false, .. }))
    {
        return Err("max_pending counts receipts: give receipt: true".into());
    }
    let subscribe = class_params.template("subscribe").cloned();
    let takes = |o: &StompOp| matches!(o, StompOp::Receive { .. } | StompOp::Reply { .. });
    if subscribe.is_none() && ops.iter().any(takes) {
        return Err(
            "a class that receives (or replies) needs a subscription: params: { subscribe: /queue/NAME }".into(),
        );
    }
    let durable = class_params.template("durable").cloned();
    if durable.is_some() && subscribe.is_none() {
        return Err(
            "a durable subscription needs its topic: params: { subscribe: /topic/NAME }".into(),
        );
    }
    let requests = ops.iter().any(|o| matches!(o, StompOp::Request { .. }));
    let reply_to = match (requests, class_params.template("reply_to")) {
        (false, _) => None,
        (true, Some(t)) => Some(t.clone()),
        (true, None) => Some(
            Template::parse("/queue/reply-{run_id}-{class}-{vu}", &mut Vec::new())
                .map_err(|e| format!("the default reply queue: {e}"))?,
        ),
    };
    let ack = match class_params.text("ack") {
        Some("auto") => AckMode::Auto,
        Some("client") => AckMode::Client,
        _ => AckMode::ClientIndividual,
    };
    let prefetch = class_params
        .number("prefetch")
        .map_or(1, |n| n.clamp(1.0, 1e6) as u32);
    let ack_every = super::ack_every(class_params, prefetch)?;
    if ack_every > 1 && ack != AckMode::Client {
        return Err(
            "ack_every acknowledges cumulatively, which only ack: client does: give ack: client"
                .into(),
        );
    }
    Ok(ClassKind::Stomp {
        ops,
        params: StompParams {
            subscribe,
            durable,
            reply_to,
            label_reply_empty: label_index(labels, "reply_empty"),
            label_reply_e2e: label_index(labels, "reply.e2e"),
            ack,
            prefetch,
            label_receive_empty: label_index(labels, "receive_empty"),
            label_receive_foreign: label_index(labels, "receive_foreign"),
            label_e2e: label_index(labels, "receive.e2e"),
            max_pending,
            label_confirm: label_index(labels, "send.confirm"),
            transaction,
            ack_every,
            label_commit: label_index(labels, "send.commit"),
        },
    })
}
