//! AMQP 0-9-1 producers and consumers of RabbitMQ (through lapin): its schema and its
//! typed operations. Driven by `protocol/amqp/`.
//!
//! Every user of a class works on one queue (`params: { queue: ... }`, a template), which
//! its set-up declares durable with its type (`queue_type: classic | quorum`, or `none`
//! to use a queue that exists). A producer's `publish` sends one message to it through the
//! default exchange, persistent or not, and with `confirm` waits for the broker's publisher
//! confirm (the confirm latency); `mandatory` has an unroutable message returned. A
//! consumer subscribes with its prefetch (`basic.qos`) and each `consume` takes one
//! delivery and acknowledges it, or finds none within its timeout. With `max_pending: N` a
//! producer keeps up to N publishes unconfirmed, as RabbitMQ PerfTest's `--confirm N`
//! does: `publish` then times the hand-over (and any wait for room in the window), and
//! each confirm is timed apart, from its publish, as `publish.confirm`. With
//! `transaction: N` the channel is transactional (`tx.select`, no confirms): every N
//! publishes are committed (`tx.commit`), the commit timed as `publish.commit`.

use super::{ClassKind, ParamKind, ProtocolDef, Tally, broker_tally, each, label_index, op, p};
use crate::workload::dist::{Dist, Unit};
use crate::workload::{Params, Template};

const QUEUE_TYPES: &[&str] = &["classic", "quorum", "none"];
const ACK_MODES: &[&str] = &["auto", "manual"];

pub(super) static DEF: ProtocolDef = ProtocolDef {
    ops: &[
        op(
            AmqpOp::NAMES[0],
            &[
                p(
                    "size",
                    ParamKind::Dist(Unit::Size),
                    "body size, the 24-byte stamp included (default 1KiB)",
                ),
                p(
                    "persistent",
                    ParamKind::Flag,
                    "delivery mode 2: the broker stores the message (default true)",
                ),
                p(
                    "confirm",
                    ParamKind::Flag,
                    "wait for the publisher confirm: the confirm latency (default true)",
                ),
                p(
                    "mandatory",
                    ParamKind::Flag,
                    "an unroutable message is returned, a failure (default false)",
                ),
                p(
                    "headers",
                    ParamKind::Headers(&[]),
                    "application headers of each message: { NAME: TEMPLATE }, built-in variables allowed",
                ),
            ],
        ),
        op(
            AmqpOp::NAMES[1],
            &[p(
                "timeout",
                ParamKind::Dist(Unit::Duration),
                "how long to wait for a delivery before the consume counts as empty (default 1s)",
            )],
        ),
        op(
            AmqpOp::NAMES[2],
            &[
                p(
                    "size",
                    ParamKind::Dist(Unit::Size),
                    "request body size, the 24-byte stamp included (default 1KiB)",
                ),
                p(
                    "timeout",
                    ParamKind::Dist(Unit::Duration),
                    "how long to wait for the reply, a failure past it (default 5s)",
                ),
            ],
        ),
        op(AmqpOp::NAMES[3], super::REPLY_PARAMS),
    ],
    class_params: &[
        p(
            "queue",
            ParamKind::Template,
            "the queue the class publishes to or consumes from (built-in variables allowed)",
        ),
        p(
            "queue_type",
            ParamKind::Choice(QUEUE_TYPES),
            "declare the queue durable as classic (default) or quorum; none: it exists",
        ),
        p(
            "prefetch",
            ParamKind::Integer,
            "deliveries the broker may send ahead of acknowledgements (basic.qos, default 1)",
        ),
        p(
            "ack",
            ParamKind::Choice(ACK_MODES),
            "manual (default: each delivery acknowledged) or auto",
        ),
        p(
            "ack_every",
            ParamKind::Integer,
            "acknowledge every Nth delivery, and with it those before (multiple; default 1)",
        ),
        p(
            "transaction",
            ParamKind::Integer,
            "publishs per transaction (tx.select, then tx.commit), the commit timed apart; default none",
        ),
        p(
            "max_pending",
            ParamKind::Integer,
            "confirms a producer may wait for at once (default 1: each publish waits for its own)",
        ),
    ],
};

/// RabbitMQ's direct reply-to: the pseudo-queue a requester's replies come to.
pub(crate) const DIRECT_REPLY_TO: &str = "amq.rabbitmq.reply-to";

/// AMQP operations.
#[derive(Debug, Clone)]
pub enum AmqpOp {
    /// One message of `size` bytes to the class's queue.
    Publish {
        size: Dist,
        persistent: bool,
        confirm: bool,
        mandatory: bool,
        headers: Vec<(String, Template)>,
    },
    /// The next delivery of the user's consumer, or none within `timeout`.
    Consume { timeout: Dist },
    /// A request to the class's queue with `reply_to` RabbitMQ's direct reply-to and a
    /// correlation id, and the wait for its reply: timed from the publish to the reply.
    Request { size: Dist, timeout: Dist },
    /// A service: the next delivery of its consumer, answered to its `reply_to` with its
    /// correlation id (or none within `timeout`).
    Reply { size: Dist, timeout: Dist },
}

impl AmqpOp {
    /// The report's sum its own label adds to: a message sent, a message taken, or (a
    /// request and its reply) a round trip.
    pub fn tally(&self) -> Tally {
        match self {
            AmqpOp::Publish { .. } => Tally::Sent,
            AmqpOp::Consume { .. } => Tally::Received,
            AmqpOp::Request { .. } | AmqpOp::Reply { .. } => Tally::Total,
        }
    }
}

impl AmqpParams {
    /// The report's sum a label the driver adds goes to ([`broker_tally`]).
    pub fn tally(&self, label: usize) -> Tally {
        broker_tally(
            label,
            self.label_consume_foreign,
            &[
                self.label_consume_empty,
                self.label_reply_empty,
                self.label_e2e,
                self.label_reply_e2e,
                self.label_confirm,
                self.label_commit,
            ],
        )
    }
}

impl AmqpOp {
    pub const NAMES: [&'static str; 4] = ["publish", "consume", "request", "reply"];

    pub fn name(&self) -> &'static str {
        match self {
            AmqpOp::Publish { .. } => Self::NAMES[0],
            AmqpOp::Consume { .. } => Self::NAMES[1],
            AmqpOp::Request { .. } => Self::NAMES[2],
            AmqpOp::Reply { .. } => Self::NAMES[3],
        }
    }

    fn build(name: &str, p: &Params) -> Option<AmqpOp> {
        Some(match name {
            "publish" => AmqpOp::Publish {
                size: p
                    .dist("size")
                    .cloned()
                    .unwrap_or_else(|| Dist::constant(1024.0)),
                persistent: p.flag("persistent").unwrap_or(true),
                confirm: p.flag("confirm").unwrap_or(true),
                mandatory: p.flag("mandatory").unwrap_or(false),
                headers: p.headers("headers").to_vec(),
            },
            "consume" => AmqpOp::Consume {
                timeout: p
                    .dist("timeout")
                    .cloned()
                    .unwrap_or_else(|| Dist::constant(1e6)),
            },
            "request" | "reply" => {
                let size = p
                    .dist("size")
                    .cloned()
                    .unwrap_or_else(|| Dist::constant(1024.0));
                let wait = if name == "request" { 5e6 } else { 1e6 };
                let timeout = p
                    .dist("timeout")
                    .cloned()
                    .unwrap_or_else(|| Dist::constant(wait));
                match name {
                    "request" => AmqpOp::Request { size, timeout },
                    _ => AmqpOp::Reply { size, timeout },
                }
            }
            _ => return None,
        })
    }

    /// Its parameters as `validate` shows them.
    pub fn describe(&self) -> String {
        match self {
            AmqpOp::Publish {
                size,
                persistent,
                confirm,
                mandatory,
                ..
            } => format!(
                "size {} · {} · {}{}",
                size.describe(&crate::workload::units::format_size),
                if *persistent {
                    "persistent"
                } else {
                    "transient"
                },
                if *confirm { "confirmed" } else { "unconfirmed" },
                if *mandatory { " · mandatory" } else { "" }
            ),
            AmqpOp::Request { size, .. } => format!(
                "size {} · waits for the reply (direct reply-to)",
                size.describe(&crate::workload::units::format_size)
            ),
            AmqpOp::Consume { .. } | AmqpOp::Reply { .. } => String::new(),
        }
    }
}

/// How a class's queue is declared at set-up.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum QueueType {
    Classic,
    Quorum,
    /// Not declared: it must exist.
    Existing,
}

/// AMQP class parameters and the labels its driver adds.
#[derive(Debug, Clone)]
pub struct AmqpParams {
    pub queue: Template,
    pub queue_type: QueueType,
    pub prefetch: u16,
    /// Each delivery is acknowledged (`basic.ack`); false: the broker counts it delivered.
    pub manual_ack: bool,
    /// A consume that found no delivery within its timeout: counted, not a failure.
    pub label_consume_empty: usize,
    /// A delivery without this run's stamp.
    pub label_consume_foreign: usize,
    /// A reply that found no request within its timeout, and each request's end-to-end
    /// latency at its service.
    pub label_reply_empty: usize,
    pub label_reply_e2e: usize,
    /// Each delivery's end-to-end latency, reported apart.
    pub label_e2e: usize,
    /// Confirms a producer may have outstanding; past 1, a publish does not wait for its
    /// own, and each confirm is timed apart (`label_confirm`).
    pub max_pending: u32,
    pub label_confirm: usize,
    /// Sends per transaction; 0: none. Each commit is timed apart (`label_commit`).
    pub transaction: u32,
    pub label_commit: usize,
    /// A consumer acknowledges every Nth message, cumulatively (1: each one).
    pub ack_every: u32,
}

/// The class's typed operations and parameters, with every default applied.
pub(super) fn build(
    ops: &[(&str, &Params)],
    class_params: &Params,
    labels: &mut Vec<String>,
) -> Result<ClassKind, super::BuildError> {
    let ops = each(ops, AmqpOp::build)?;
    for o in &ops {
        match o {
            AmqpOp::Publish { size, .. }
            | AmqpOp::Request { size, .. }
            | AmqpOp::Reply { size, .. } => super::stomp::check_size(size)?,
            AmqpOp::Consume { .. } => {}
        }
    }
    let queue = class_params.template("queue").cloned().ok_or_else(|| {
        super::BuildError::Params("an amqp class names its queue: params: { queue: NAME }".into())
    })?;
    let max_pending = super::max_pending(class_params)?;
    let transaction = super::transaction(class_params, max_pending)?;
    if transaction > 0
        && ops
            .iter()
            .any(|o| matches!(o, AmqpOp::Publish { confirm: true, .. }))
    {
        return Err(
            "a transactional channel takes no publisher confirms (AMQP 0-9-1): give confirm: false; the commit is what is confirmed".into(),
        );
    }
    if max_pending > 1
        && ops
            .iter()
            .any(|o| matches!(o, AmqpOp::Publish { confirm: false, .. }))
    {
        return Err("max_pending counts publisher confirms: give confirm: true".into());
    }
    let queue_type = match class_params.text("queue_type") {
        Some("quorum") => QueueType::Quorum,
        Some("none") => QueueType::Existing,
        _ => QueueType::Classic,
    };
    let prefetch = class_params
        .number("prefetch")
        .map_or(1, |n| n.clamp(1.0, f64::from(u16::MAX)) as u16);
    let manual_ack = class_params.text("ack") != Some("auto");
    let ack_every = super::ack_every(class_params, u32::from(prefetch))?;
    if ack_every > 1 && !manual_ack {
        return Err("ack_every acknowledges deliveries: give ack: manual".into());
    }
    Ok(ClassKind::Amqp {
        ops,
        params: AmqpParams {
            queue,
            queue_type,
            prefetch,
            manual_ack,
            label_consume_empty: label_index(labels, "consume_empty"),
            label_consume_foreign: label_index(labels, "consume_foreign"),
            label_reply_empty: label_index(labels, "reply_empty"),
            label_reply_e2e: label_index(labels, "reply.e2e"),
            label_e2e: label_index(labels, "consume.e2e"),
            max_pending,
            label_confirm: label_index(labels, "publish.confirm"),
            transaction,
            ack_every,
            label_commit: label_index(labels, "publish.commit"),
        },
    })
}
