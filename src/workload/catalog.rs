//! What each protocol offers a workload: its operations and the parameters they accept.
//!
//! This is the schema the resolver checks a workload against. The operation names are the
//! typed operations' own names ([`super::ops`]), which also hold the defaults, so the
//! schema and the drivers cannot name different things.

use super::dist::Unit;
use super::ops::{AtomOp, CaldavOp, MorseOp};

/// A protocol a user class can speak.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Protocol {
    /// Cosmo Morse Code sync (EIMML over HTTP).
    Morse,
    /// Cosmo Atom feeds and AtomPub.
    Atom,
    /// CalDAV (RFC 4791) with sync-collection (RFC 6578).
    Caldav,
    /// Generic request templates defined in the workload.
    Http,
}

impl Protocol {
    pub const ALL: [Protocol; 4] = [
        Protocol::Morse,
        Protocol::Atom,
        Protocol::Caldav,
        Protocol::Http,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Protocol::Morse => "morse",
            Protocol::Atom => "atom",
            Protocol::Caldav => "caldav",
            Protocol::Http => "http",
        }
    }

    pub fn from_name(s: &str) -> Option<Protocol> {
        Protocol::ALL.into_iter().find(|p| p.name() == s)
    }

    pub fn def(self) -> &'static ProtocolDef {
        match self {
            Protocol::Morse => &MORSE,
            Protocol::Atom => &ATOM,
            Protocol::Caldav => &CALDAV,
            Protocol::Http => &HTTP,
        }
    }
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

static MORSE: ProtocolDef = ProtocolDef {
    ops: &[
        op(MorseOp::Publish.name(), &[]),
        op(MorseOp::Sync.name(), &[]),
        op(MorseOp::Update.name(), &[]),
        op(MorseOp::Subscribe.name(), &[]),
        op(MorseOp::Delete.name(), &[]),
    ],
    class_params: &[
        p(
            "collection_size",
            ParamKind::Dist(Unit::Count),
            "items in a published collection",
        ),
        p(
            "no_change_sync",
            ParamKind::Probability,
            "share of syncs that use the newest token",
        ),
        p(
            "tombstone",
            ParamKind::Probability,
            "chance an update also deletes an item",
        ),
    ],
};

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

static ATOM: ProtocolDef = ProtocolDef {
    ops: &[
        op(AtomOp::NAMES[0], &[RANGE]),
        op(AtomOp::NAMES[1], &[]),
        op(AtomOp::NAMES[2], &[]),
        op(AtomOp::NAMES[3], &[]),
        op(AtomOp::NAMES[4], &[]),
    ],
    class_params: &[p(
        "initial_items",
        ParamKind::Integer,
        "items in the collection published first",
    )],
};

static CALDAV: ProtocolDef = ProtocolDef {
    ops: &[
        op(CaldavOp::NAMES[0], &[]),
        op(
            CaldavOp::NAMES[1],
            &[
                SIZE,
                p(
                    "recurring",
                    ParamKind::Probability,
                    "chance the event has an RRULE",
                ),
            ],
        ),
        op(CaldavOp::NAMES[2], &[SIZE]),
        op(CaldavOp::NAMES[3], &[]),
        op(CaldavOp::NAMES[4], &[]),
        op(CaldavOp::NAMES[5], &[RANGE]),
        op(
            CaldavOp::NAMES[6],
            &[p("count", ParamKind::Integer, "events per multiget")],
        ),
        op(CaldavOp::NAMES[7], &[]),
        op(CaldavOp::NAMES[8], &[]),
    ],
    class_params: &[
        p(
            "calendar_home",
            ParamKind::Text,
            "path of the calendar home ({user}, {vu}, {run_id}); discovered when absent",
        ),
        p("discovery", ParamKind::Text, "where discovery starts"),
    ],
};

static HTTP: ProtocolDef = ProtocolDef {
    ops: &[],
    class_params: &[],
};

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
            let kind = crate::workload::ops::build_class(proto, &ops, &params, &mut labels)
                .unwrap_or_else(|e| panic!("{}: {e}", proto.name()));
            let built = match &kind {
                ClassKind::Http { requests, .. } => requests.len(),
                ClassKind::Morse { ops, .. } => ops.len(),
                ClassKind::Atom { ops, .. } => ops.len(),
                ClassKind::Caldav { ops, .. } => ops.len(),
            };
            assert_eq!(built, n, "{}", proto.name());
            assert!(labels[..n].iter().zip(&ops).all(|(l, (o, _))| l == o));
        }
    }
}
