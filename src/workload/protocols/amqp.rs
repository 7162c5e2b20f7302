//! AMQP 0-9-1 producers and consumers of RabbitMQ (through lapin): its schema and its
//! typed operations. Driven by `protocol/amqp.rs`.
//!
//! Every user of a class works on one queue (`params: { queue: ... }`, a template), which
//! its set-up declares durable with its type (`queue_type: classic | quorum`, or `none`
//! to use a queue that exists). A producer's `publish` sends one message to it through the
//! default exchange, persistent or not, and with `confirm` waits for the broker's publisher
//! confirm (the confirm latency); `mandatory` has an unroutable message returned. A
//! consumer subscribes with its prefetch (`basic.qos`) and each `consume` takes one
//! delivery and acknowledges it, or finds none within its timeout.

use super::{ClassKind, ParamKind, ProtocolDef, each, label_index, op, p};
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
    ],
};

/// AMQP operations.
#[derive(Debug, Clone)]
pub enum AmqpOp {
    /// One message of `size` bytes to the class's queue.
    Publish {
        size: Dist,
        persistent: bool,
        confirm: bool,
        mandatory: bool,
    },
    /// The next delivery of the user's consumer, or none within `timeout`.
    Consume { timeout: Dist },
}

impl AmqpOp {
    pub const NAMES: [&'static str; 2] = ["publish", "consume"];

    pub fn name(&self) -> &'static str {
        match self {
            AmqpOp::Publish { .. } => Self::NAMES[0],
            AmqpOp::Consume { .. } => Self::NAMES[1],
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
            },
            "consume" => AmqpOp::Consume {
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
            AmqpOp::Publish {
                persistent,
                confirm,
                mandatory,
                ..
            } => format!(
                "{} · {}{}",
                if *persistent {
                    "persistent"
                } else {
                    "transient"
                },
                if *confirm { "confirmed" } else { "unconfirmed" },
                if *mandatory { " · mandatory" } else { "" }
            ),
            AmqpOp::Consume { .. } => String::new(),
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
    /// Each delivery's end-to-end latency, reported apart.
    pub label_e2e: usize,
}

/// The class's typed operations and parameters, with every default applied.
pub(super) fn build(
    ops: &[(&str, &Params)],
    class_params: &Params,
    labels: &mut Vec<String>,
) -> Result<ClassKind, String> {
    let ops = each(ops, AmqpOp::build)?;
    for o in &ops {
        if let AmqpOp::Publish { size, .. } = o {
            super::stomp::check_size(size)?;
        }
    }
    let queue = class_params
        .template("queue")
        .cloned()
        .ok_or("an amqp class names its queue: params: { queue: NAME }")?;
    let queue_type = match class_params.text("queue_type") {
        Some("quorum") => QueueType::Quorum,
        Some("none") => QueueType::Existing,
        _ => QueueType::Classic,
    };
    Ok(ClassKind::Amqp {
        ops,
        params: AmqpParams {
            queue,
            queue_type,
            prefetch: class_params
                .number("prefetch")
                .map_or(1, |n| n.clamp(1.0, f64::from(u16::MAX)) as u16),
            manual_ack: class_params.text("ack") != Some("auto"),
            label_consume_empty: label_index(labels, "consume_empty"),
            label_consume_foreign: label_index(labels, "consume_foreign"),
            label_e2e: label_index(labels, "consume.e2e"),
        },
    })
}
