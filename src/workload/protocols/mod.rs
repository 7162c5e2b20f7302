//! The protocols a user class can speak, in one list ([`Protocol`]), and what each offers
//! a workload: the schema the resolver checks against (operations, their parameters, the
//! class's parameters) and the typed operations the drivers receive, with every default
//! applied. Each protocol's schema and typed operations sit together in its own file here;
//! its driver is the file of the same name in `crate::protocol`. A driver matches its
//! typed operations exhaustively; no operation is ever looked up by name after resolution,
//! and the catalog takes its operation names from the typed operations, so the schema and
//! the drivers cannot name different things. `ARCHITECTURE.md` ("Adding a protocol") lists
//! every file a new protocol touches.

mod amqp;
mod atom;
mod caldav;
mod carddav;
mod holdings;
mod http;
mod morse;
mod stomp;

use std::time::Duration;

use super::dist::{Dist, Unit};
use super::{HttpRequest, Params, Pool, Prefill, Template};
use crate::formats::scheme::Family;

pub(crate) use amqp::{AmqpOp, AmqpParams, DIRECT_REPLY_TO, QueueType};
pub(crate) use atom::{AtomOp, AtomParams};
pub(crate) use caldav::{CaldavOp, CaldavParams, EventShape, MAX_INITIAL_EVENTS};
pub(crate) use carddav::{CarddavOp, CarddavParams, ContactShape, MAX_INITIAL_CONTACTS};
pub(crate) use holdings::Holdings;
pub(crate) use morse::{MorseOp, MorseParams};
pub(crate) use stomp::{AckMode, STAMP_LEN, StompOp, StompParams};

/// The defaults, one place: the catalog's help and the README quote these values.
pub(crate) mod defaults {
    /// Morse Code: items in a published collection (exponential with this mean, capped).
    pub(crate) const COLLECTION_SIZE_MEAN: f64 = 50.0;
    pub(crate) const COLLECTION_SIZE_MAX: f64 = 3000.0;
    /// Morse Code: share of syncs that use the newest token.
    pub(crate) const NO_CHANGE_SYNC: f64 = 0.2;
    /// Morse Code: chance an update also deletes an item.
    pub(crate) const TOMBSTONE: f64 = 0.333;
    /// Atom: items in the collection published first.
    pub(crate) const INITIAL_ITEMS: u32 = 21;
    /// Atom feeds and CalDAV reports: the window a time-range query asks for.
    pub(crate) const RANGE_DAYS: u64 = 7;
    /// CalDAV: chance a new event has an RRULE.
    pub(crate) const RECURRING: f64 = 0.05;
    /// CalDAV: events per multiget.
    pub(crate) const MULTIGET_COUNT: u32 = 10;
    /// CalDAV: chance an answer to an invitation accepts it.
    pub(crate) const ACCEPT: f64 = 0.8;
    /// CardDAV: chance a new contact carries a NOTE and CATEGORIES.
    pub(crate) const CONTACT_NOTES: f64 = 0.3;
    /// CalDAV and CardDAV syncs: members per multiget, DAVx5's (its SyncManager's
    /// `MAX_MULTIGET_RESOURCES`).
    pub(crate) const SYNC_BATCH: u32 = 10;
}

/// How a client makes its first copy of a calendar or address book (`initial_sync`):
/// what lists the members, and how they are then fetched.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct InitialSync {
    /// `sync-collection` from no token (which gives the token a delta sync goes on
    /// from), or PROPFIND Depth 1 of the ETags (a client of a server without it).
    pub by_propfind: bool,
    pub fetch: FetchBy,
}

/// How a sync fetches the members its listing named.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FetchBy {
    /// Multigets of this many members each.
    Multiget(u32),
    /// One GET per member.
    Get,
}

impl InitialSync {
    fn of(p: &Params) -> InitialSync {
        InitialSync {
            by_propfind: p.text("listing") == Some("propfind"),
            fetch: match p.text("fetch") {
                Some("get") => FetchBy::Get,
                _ => FetchBy::Multiget(batch_of(p)),
            },
        }
    }

    /// As `validate` shows it.
    pub fn describe(&self) -> String {
        let listing = match self.by_propfind {
            true => "PROPFIND Depth 1",
            false => "sync-collection",
        };
        format!("{listing}, then {}", self.fetch.describe())
    }
}

impl FetchBy {
    /// As `validate` shows it.
    pub fn describe(&self) -> String {
        match self {
            FetchBy::Multiget(n) => format!("multigets of {n}"),
            FetchBy::Get => "a GET each".into(),
        }
    }
}

/// A sync's `batch`: members per multiget, from 1 to 1,000 (DAVx5's 10 by default).
fn batch_of(p: &Params) -> u32 {
    p.number("batch")
        .map_or(defaults::SYNC_BATCH, |n| n.clamp(1.0, 1000.0) as u32)
}

/// `initial_sync`'s parameters, the same for calendars and address books.
const INITIAL_SYNC: &[ParamDef] = &[
    p(
        "listing",
        ParamKind::Choice(&["sync", "propfind"]),
        "what lists the members: sync-collection from no token (the default; its token is what delta_sync goes on from) or PROPFIND Depth 1 of the ETags",
    ),
    p(
        "fetch",
        ParamKind::Choice(&["multiget", "get"]),
        "how the members are then fetched: multigets of `batch` (the default) or a GET each",
    ),
    SYNC_BATCH,
];

/// `delta_sync`'s.
const DELTA_SYNC: &[ParamDef] = &[SYNC_BATCH];

const SYNC_BATCH: ParamDef = p(
    "batch",
    ParamKind::Integer,
    "members per multiget, 1 to 1,000 (10, DAVx5's, by default)",
);

/// A protocol a user class can speak: the one list. Adding a variant makes every match
/// over protocols (schema, typed operations, drivers, reports) name what it needs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Protocol {
    /// Cosmo Morse Code sync (EIMML over HTTP): `workload/protocols/morse.rs`, `protocol/morse.rs`.
    Morse,
    /// Cosmo Atom feeds and AtomPub: `workload/protocols/atom.rs`, `protocol/atom.rs`.
    Atom,
    /// CalDAV (RFC 4791) with sync-collection (RFC 6578): `workload/protocols/caldav.rs`, `protocol/caldav/`.
    Caldav,
    /// CardDAV (RFC 6352) with sync-collection (RFC 6578): `workload/protocols/carddav.rs`,
    /// `protocol/carddav/`.
    Carddav,
    /// STOMP 1.2 producers and consumers of a message broker: `workload/protocols/stomp.rs`,
    /// `protocol/stomp/`, its frames in `crates/formats/src/stomp.rs`.
    Stomp,
    /// AMQP 0-9-1 producers and consumers of RabbitMQ, through lapin:
    /// `workload/protocols/amqp.rs`, `protocol/amqp/`.
    Amqp,
    /// Generic request templates defined in the workload: `workload/protocols/http.rs`, resolved in
    /// `workload/resolve/http.rs`, driven by `protocol/http.rs`.
    Http,
}

impl Protocol {
    /// Every protocol, in the order the docs list them.
    pub const ALL: [Protocol; 7] = [
        Protocol::Morse,
        Protocol::Atom,
        Protocol::Caldav,
        Protocol::Carddav,
        Protocol::Stomp,
        Protocol::Amqp,
        Protocol::Http,
    ];

    /// Its name in a workload (`protocol: caldav`).
    pub fn name(self) -> &'static str {
        match self {
            Protocol::Morse => "morse",
            Protocol::Atom => "atom",
            Protocol::Caldav => "caldav",
            Protocol::Carddav => "carddav",
            Protocol::Stomp => "stomp",
            Protocol::Amqp => "amqp",
            Protocol::Http => "http",
        }
    }

    /// Whether its users send and take stamped messages through a broker: the report
    /// then gives their message rates, backlogs and ledger.
    pub fn carries_messages(self) -> bool {
        match self {
            Protocol::Stomp | Protocol::Amqp => true,
            Protocol::Morse
            | Protocol::Atom
            | Protocol::Caldav
            | Protocol::Carddav
            | Protocol::Http => false,
        }
    }

    /// The protocol of that name.
    pub fn from_name(s: &str) -> Option<Protocol> {
        Protocol::ALL.into_iter().find(|p| p.name() == s)
    }

    /// The family of target schemes that carries it: a new protocol over HTTP is then
    /// offered for every `http://` target, one on a port of its own for its schemes.
    pub fn family(self) -> Family {
        match self {
            Protocol::Morse
            | Protocol::Atom
            | Protocol::Caldav
            | Protocol::Carddav
            | Protocol::Http => Family::Http,
            Protocol::Stomp => Family::Stomp,
            Protocol::Amqp => Family::Amqp,
        }
    }

    /// Its schema.
    pub fn def(self) -> &'static ProtocolDef {
        match self {
            Protocol::Morse => &morse::DEF,
            Protocol::Atom => &atom::DEF,
            Protocol::Caldav => &caldav::DEF,
            Protocol::Carddav => &carddav::DEF,
            Protocol::Stomp => &stomp::DEF,
            Protocol::Amqp => &amqp::DEF,
            Protocol::Http => &http::DEF,
        }
    }
}

/// The report's sum an operation's figures go to ([`ClassKind::tally`]). A one-way
/// message (a send, a publish, a message taken) is not a request answered: its latency
/// is a confirm or a wait, and a message sent and then taken is one message, not two
/// operations. So those go to `sent` and `received`, and `total` keeps the round trips
/// (every HTTP operation, a broker `request` and `reply`). A step (`send.confirm`,
/// `receive.e2e`, an http step) is part of its operation, and a receive that took nothing
/// (`receive_empty`) took no message: both stand in their own rows only.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Tally {
    /// `total`: requests answered.
    Total,
    /// `sent`: messages sent or published.
    Sent,
    /// `received`: messages taken.
    Received,
    /// Its own row only.
    Apart,
}

/// What kind of value a parameter takes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ParamKind {
    /// A number in [0, 1].
    Probability,
    /// A distribution (or a constant) in the given unit.
    Dist(Unit),
    /// A non-negative integer.
    Integer,
    /// Free text (a path template, a name).
    Text,
    /// true or false.
    Flag,
    /// A template of built-in variables (`{vu}`, `{round}`, `{run_id}`, ...), parsed where
    /// it is written.
    Template,
    /// One of these words.
    Choice(&'static [&'static str]),
    /// A map of header names to templates of built-in variables; the names listed are
    /// the protocol's own, which the driver writes.
    Headers(&'static [&'static str]),
}

#[derive(Debug)]
pub struct ParamDef {
    pub name: &'static str,
    pub kind: ParamKind,
    pub help: &'static str,
}

#[derive(Debug)]
pub struct OpDef {
    pub name: &'static str,
    pub params: &'static [ParamDef],
}

#[derive(Debug)]
pub struct ProtocolDef {
    /// Built-in operations; empty for `http`, whose operations the workload defines.
    pub ops: &'static [OpDef],
    /// Parameters of the class (`params:` beside `mix:`).
    pub class_params: &'static [ParamDef],
}

impl ProtocolDef {
    pub fn op(&self, name: &str) -> Option<&'static OpDef> {
        self.ops.iter().find(|o| o.name == name)
    }
}

const fn p(name: &'static str, kind: ParamKind, help: &'static str) -> ParamDef {
    ParamDef { name, kind, help }
}

const fn op(name: &'static str, params: &'static [ParamDef]) -> OpDef {
    OpDef { name, params }
}

const RANGE: ParamDef = p(
    "range",
    ParamKind::Dist(Unit::Duration),
    "length of the time-range window",
);
const SIZE: ParamDef = p(
    "size",
    ParamKind::Dist(Unit::Size),
    "approximate size of the event body",
);

/// Durations are sampled in microseconds, like every duration distribution.
fn range_default() -> Dist {
    Dist::constant(defaults::RANGE_DAYS as f64 * 86_400e6)
}

/// What a class does, by protocol: its typed operations (one per row of the class's table,
/// in order) and its typed parameters.
#[derive(Debug, Clone)]
pub enum ClassKind {
    Http {
        requests: Vec<HttpRequest>,
        pools: Vec<Pool>,
        /// Operations run in set-up to fill the pools.
        prefill: Vec<Prefill>,
    },
    Morse {
        params: MorseParams,
        ops: Vec<MorseOp>,
    },
    Atom {
        params: AtomParams,
        ops: Vec<AtomOp>,
    },
    Caldav {
        params: CaldavParams,
        ops: Vec<CaldavOp>,
    },
    Carddav {
        params: CarddavParams,
        ops: Vec<CarddavOp>,
    },
    Stomp {
        params: StompParams,
        ops: Vec<StompOp>,
    },
    Amqp {
        params: AmqpParams,
        ops: Vec<AmqpOp>,
    },
}

/// A broker service's `reply` operation, alike for STOMP and AMQP.
const REPLY_PARAMS: &[ParamDef] = &[
    p(
        "size",
        ParamKind::Dist(crate::workload::dist::Unit::Size),
        "reply body size, the 24-byte stamp included (default 1KiB)",
    ),
    p(
        "timeout",
        ParamKind::Dist(crate::workload::dist::Unit::Duration),
        "how long to wait for a request before the reply counts as empty (default 1s)",
    ),
];

/// The most unconfirmed sends a producer may keep, or sends a transaction may hold.
const MAX_PENDING: f64 = 100_000.0;

/// A count parameter of a broker class, from 1 to `MAX_PENDING`; `None` when not given.
fn count_of(p: &Params, key: &str, what: &str) -> Result<Option<u32>, BuildError> {
    match p.number(key) {
        None => Ok(None),
        Some(n) if (1.0..=MAX_PENDING).contains(&n) && n.fract() == 0.0 => Ok(Some(n as u32)),
        Some(n) => Err(BuildError::Params(format!(
            "{key} {n}: give {what}, a whole number from 1 to {MAX_PENDING}"
        ))),
    }
}

/// Why a class's operations and parameters make no class, by the part of the workload
/// that says it: the resolver shows the message there.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum BuildError {
    /// A class parameter (`params:`) is wrong, or one the class needs is missing.
    #[error("{0}")]
    Params(String),
    /// The operations (the class's table), or the operations with its parameters.
    #[error("{0}")]
    Ops(String),
}

impl From<String> for BuildError {
    fn from(m: String) -> BuildError {
        BuildError::Ops(m)
    }
}

impl From<&str> for BuildError {
    fn from(m: &str) -> BuildError {
        BuildError::Ops(m.to_string())
    }
}

/// A broker class's `max_pending`: 1 (each send waits for its confirm) unless given.
fn max_pending(p: &Params) -> Result<u32, BuildError> {
    Ok(count_of(
        p,
        "max_pending",
        "the sends that may wait for their confirms",
    )?
    .unwrap_or(1))
}

/// A consumer class's `ack_every`: 1 unless given, and within its prefetch (a broker
/// sends no more than the prefetch before an acknowledgement: a larger N would wait).
fn ack_every(p: &Params, prefetch: u32) -> Result<u32, BuildError> {
    let n = count_of(p, "ack_every", "the messages per acknowledgement")?.unwrap_or(1);
    if n > prefetch {
        return Err(BuildError::Params(format!(
            "ack_every {n} is more than the prefetch {prefetch}: the broker would send no more before an acknowledgement; give prefetch: {n} or more"
        )));
    }
    Ok(n)
}

/// A broker class's `transaction`: sends per transaction, 0 (none) unless given; a
/// window of unconfirmed sends does not go with it.
fn transaction(p: &Params, max_pending: u32) -> Result<u32, BuildError> {
    let Some(n) = count_of(p, "transaction", "the sends per transaction")? else {
        return Ok(0);
    };
    if max_pending > 1 {
        return Err(
            "transaction and max_pending do not go together: a transaction's commit is its confirm"
                .into(),
        );
    }
    Ok(n)
}

/// The sum a label a broker driver adds goes to (STOMP and AMQP alike): a message of
/// another run taken (`foreign`) is still a message taken; a wait that took nothing, an
/// end-to-end latency, a confirm and a commit (`apart`) stand in their own rows. A
/// broker driver adds no other label; one would be counted as a round trip.
fn broker_tally(label: usize, foreign: usize, apart: &[usize]) -> Tally {
    if label == foreign {
        return Tally::Received;
    }
    match apart.contains(&label) {
        true => Tally::Apart,
        false => Tally::Total,
    }
}

/// The position of `name` among `labels`, added at the end when it is not there yet, so
/// a label a driver reports always exists.
fn label_index(labels: &mut Vec<String>, name: &str) -> usize {
    match labels.iter().position(|l| l == name) {
        Some(i) => i,
        None => {
            labels.push(name.to_string());
            labels.len() - 1
        }
    }
}

/// Each operation built by `build`; an operation the catalog knows but `build` does not
/// is an error, which the catalog test rules out.
fn each<T>(
    ops: &[(&str, &Params)],
    build: impl Fn(&str, &Params) -> Option<T>,
) -> Result<Vec<T>, String> {
    ops.iter()
        .map(|(n, p)| build(n, p).ok_or_else(|| format!("operation '{n}' has no driver")))
        .collect()
}

/// Build the typed operations of a protocol class from the names and parameters the
/// resolver checked against the catalog. `labels` starts as the operation names and gains
/// the protocol's extra labels.
pub(in crate::workload) fn build_class(
    protocol: Protocol,
    ops: &[(&str, &Params)],
    class_params: &Params,
    labels: &mut Vec<String>,
) -> Result<ClassKind, BuildError> {
    match protocol {
        // Its requests come from the workload, resolved in `resolve/http.rs`.
        Protocol::Http => Ok(ClassKind::Http {
            requests: Vec::new(),
            pools: Vec::new(),
            prefill: Vec::new(),
        }),
        Protocol::Morse => morse::build(ops, class_params, labels),
        Protocol::Atom => atom::build(ops, class_params, labels),
        Protocol::Caldav => caldav::build(ops, class_params, labels),
        Protocol::Carddav => carddav::build(ops, class_params, labels),
        Protocol::Stomp => stomp::build(ops, class_params, labels),
        Protocol::Amqp => amqp::build(ops, class_params, labels),
    }
}

impl ClassKind {
    /// Which of the report's sums label `label` of this class adds to: an operation's
    /// own label by its typed operation, a label its driver adds by what the driver
    /// reports under it.
    pub fn tally(&self, label: usize) -> Tally {
        match self {
            // Labels past the operations' are their steps.
            ClassKind::Http { requests, .. } => match label < requests.len() {
                true => Tally::Total,
                false => Tally::Apart,
            },
            ClassKind::Morse { .. }
            | ClassKind::Atom { .. }
            | ClassKind::Caldav { .. }
            | ClassKind::Carddav { .. } => Tally::Total,
            ClassKind::Stomp { ops, params } => ops
                .get(label)
                .map_or_else(|| params.tally(label), StompOp::tally),
            ClassKind::Amqp { ops, params } => ops
                .get(label)
                .map_or_else(|| params.tally(label), AmqpOp::tally),
        }
    }

    /// The destinations a broker class's users send to, take from or ask replies at, as
    /// templates; none for the other protocols.
    pub fn destinations(&self) -> Vec<Template> {
        match self {
            ClassKind::Stomp { params, ops } => {
                ops.iter()
                    .filter_map(|o| match o {
                        StompOp::Send { destination, .. }
                        | StompOp::Request { destination, .. } => Some(destination.clone()),
                        StompOp::Receive { .. } | StompOp::Reply { .. } => None,
                    })
                    .chain(params.subscribe.clone())
                    .chain(params.reply_to.clone())
                    .collect()
            }
            ClassKind::Amqp { params, .. } => {
                vec![params.queue.clone(), Template::literal(DIRECT_REPLY_TO)]
            }
            ClassKind::Http { .. }
            | ClassKind::Morse { .. }
            | ClassKind::Atom { .. }
            | ClassKind::Caldav { .. }
            | ClassKind::Carddav { .. } => Vec::new(),
        }
    }

    /// Why a class of this kind, its operations picked with these weights, could never
    /// send what most of its picks ask for (its operations need items none of them
    /// makes, and nothing is made before the first pick); `None` when it can.
    pub(in crate::workload) fn nothing_to_act_on(&self, weights: &[f64]) -> Option<String> {
        match self {
            ClassKind::Caldav { ops, params } => caldav::nothing_to_act_on(ops, weights, params),
            ClassKind::Carddav { ops, params } => carddav::nothing_to_act_on(ops, weights, params),
            // Morse Code and Atom users publish a collection in their set-up (Atom's with
            // `initial_items`), and what an http or broker class sends needs nothing made.
            ClassKind::Http { .. }
            | ClassKind::Morse { .. }
            | ClassKind::Atom { .. }
            | ClassKind::Stomp { .. }
            | ClassKind::Amqp { .. } => None,
        }
    }

    /// The parameters of operation `i` as `validate` shows them.
    pub fn describe_op(&self, i: usize) -> String {
        let fmt_d = |d: &Dist, unit_secs: bool| {
            if unit_secs {
                d.describe(&|us| {
                    crate::workload::units::format_duration(Duration::from_nanos((us * 1e3) as u64))
                })
            } else {
                d.describe(&crate::workload::units::format_size)
            }
        };
        match self {
            ClassKind::Http { requests, .. } => requests
                .get(i)
                .map(|h| format!("{} {}", h.method, h.path.source))
                .unwrap_or_default(),
            ClassKind::Morse { .. } => String::new(),
            ClassKind::Stomp { ops, .. } => ops.get(i).map(StompOp::describe).unwrap_or_default(),
            ClassKind::Amqp { ops, .. } => ops.get(i).map(AmqpOp::describe).unwrap_or_default(),
            ClassKind::Atom { ops, .. } => match ops.get(i) {
                Some(AtomOp::TimeRangeFeed { range }) => format!("range {}", fmt_d(range, true)),
                Some(
                    AtomOp::FullFeed
                    | AtomOp::Dashboard
                    | AtomOp::CreateEvent
                    | AtomOp::UpdateEvent,
                )
                | None => String::new(),
            },
            ClassKind::Caldav { ops, .. } => match ops.get(i) {
                Some(CaldavOp::PutEvent(shape) | CaldavOp::UpdateEvent(shape)) => shape.describe(
                    shape
                        .size
                        .as_ref()
                        .map_or("natural".into(), |d| fmt_d(d, false)),
                ),
                Some(CaldavOp::TimeRangeReport { range }) => {
                    format!("range {}", fmt_d(range, true))
                }
                Some(CaldavOp::Multiget { count }) => format!("count {count}"),
                Some(CaldavOp::InitialSync(how)) => how.describe(),
                Some(CaldavOp::DeltaSync { batch }) => {
                    format!(
                        "sync-collection, then {}",
                        FetchBy::Multiget(*batch).describe()
                    )
                }
                Some(
                    CaldavOp::CreateCalendar
                    | CaldavOp::GetEvent
                    | CaldavOp::DeleteEvent
                    | CaldavOp::SyncCollection
                    | CaldavOp::Propfind
                    | CaldavOp::Invite { .. }
                    | CaldavOp::Inbox
                    | CaldavOp::Answer { .. }
                    | CaldavOp::Cancel
                    | CaldavOp::Freebusy { .. },
                )
                | None => String::new(),
            },
            ClassKind::Carddav { ops, .. } => match ops.get(i) {
                Some(CarddavOp::PutContact(shape) | CarddavOp::UpdateContact(shape)) => {
                    shape.describe(shape.photo.as_ref().map(|d| fmt_d(d, false)))
                }
                Some(CarddavOp::AddressbookMultiget { count }) => format!("count {count}"),
                Some(CarddavOp::InitialSync(how)) => how.describe(),
                Some(CarddavOp::DeltaSync { batch }) => {
                    format!(
                        "sync-collection, then {}",
                        FetchBy::Multiget(*batch).describe()
                    )
                }
                Some(
                    CarddavOp::CreateAddressbook
                    | CarddavOp::GetContact
                    | CarddavOp::DeleteContact
                    | CarddavOp::AddressbookQuery
                    | CarddavOp::SyncCollection
                    | CarddavOp::Propfind,
                )
                | None => String::new(),
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::workload::ClassKind;

    /// Every operation of the catalog has a typed operation, so a name the resolver accepts
    /// can never fall through to another operation.
    #[test]
    fn every_catalog_operation_builds() {
        for proto in Protocol::ALL {
            let params = crate::workload::Params::default();
            let ops: Vec<(&str, &crate::workload::Params)> =
                proto.def().ops.iter().map(|o| (o.name, &params)).collect();
            let mut labels: Vec<String> = ops.iter().map(|(n, _)| n.to_string()).collect();
            let n = labels.len();
            // What a class must give for every operation to be allowed (a consumer's
            // subscription).
            let template = |name: &str, v: &str| {
                crate::workload::Params(vec![(
                    name.into(),
                    crate::workload::ParamValue::Template(crate::workload::Template::literal(v)),
                )])
            };
            let class_params = match proto {
                Protocol::Stomp => template("subscribe", "/queue/q"),
                Protocol::Amqp => template("queue", "q"),
                _ => crate::workload::Params::default(),
            };
            let kind = build_class(proto, &ops, &class_params, &mut labels)
                .unwrap_or_else(|e| panic!("{}: {e}", proto.name()));
            let built = match &kind {
                ClassKind::Http { requests, .. } => requests.len(),
                ClassKind::Morse { ops, .. } => ops.len(),
                ClassKind::Atom { ops, .. } => ops.len(),
                ClassKind::Caldav { ops, .. } => ops.len(),
                ClassKind::Carddav { ops, .. } => ops.len(),
                ClassKind::Stomp { ops, .. } => ops.len(),
                ClassKind::Amqp { ops, .. } => ops.len(),
            };
            assert_eq!(built, n, "{}", proto.name());
            assert!(labels[..n].iter().zip(&ops).all(|(l, (o, _))| l == o));
        }
    }
}
