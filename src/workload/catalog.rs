//! What each protocol offers a workload: its operations, the extra labels its driver may
//! report (Morse Code `sync` becomes `sync_no_change`), and the parameters it accepts.
//!
//! This is the schema the resolver checks a workload against; the drivers in `protocol/`
//! implement exactly these names.

use super::dist::Unit;

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
    /// Labels a driver may report besides the operation names (refinements, and the
    /// bootstrap operation a user runs outside its table when it has no collection). A
    /// label that is also in the table is listed once.
    pub extra_labels: &'static [&'static str],
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
        op("publish", &[]),
        op("sync", &[]),
        op("update", &[]),
        op("subscribe", &[]),
        op("delete", &[]),
    ],
    extra_labels: &["sync_no_change", "publish"],
    class_params: &[
        p(
            "collection_size",
            ParamKind::Dist(Unit::Count),
            "items in a published collection (default exponential mean 50, max 3000)",
        ),
        p(
            "no_change_sync",
            ParamKind::Probability,
            "share of syncs that use the newest token (default 0.2)",
        ),
        p(
            "tombstone",
            ParamKind::Probability,
            "chance an update also deletes an item (default 0.333)",
        ),
    ],
};

static ATOM: ProtocolDef = ProtocolDef {
    ops: &[
        op(
            "time_range_feed",
            &[p(
                "range",
                ParamKind::Dist(Unit::Duration),
                "window length (default 7d)",
            )],
        ),
        op("full_feed", &[]),
        op("dashboard", &[]),
        op("create_event", &[]),
        op("update_event", &[]),
    ],
    // The first collection is published through Morse Code, as in 2007.
    extra_labels: &["publish"],
    class_params: &[p(
        "initial_items",
        ParamKind::Integer,
        "items in the collection published first (default 21)",
    )],
};

static CALDAV: ProtocolDef = ProtocolDef {
    ops: &[
        op("create_calendar", &[]),
        op(
            "put_event",
            &[
                p(
                    "size",
                    ParamKind::Dist(Unit::Size),
                    "approximate size of the event body",
                ),
                p(
                    "recurring",
                    ParamKind::Probability,
                    "chance the event has an RRULE (default 0.05)",
                ),
            ],
        ),
        op(
            "update_event",
            &[p(
                "size",
                ParamKind::Dist(Unit::Size),
                "approximate size of the event body",
            )],
        ),
        op("get_event", &[]),
        op("delete_event", &[]),
        op(
            "time_range_report",
            &[p(
                "range",
                ParamKind::Dist(Unit::Duration),
                "window length (default 7d)",
            )],
        ),
        op(
            "multiget",
            &[p(
                "count",
                ParamKind::Integer,
                "events per multiget (default 10)",
            )],
        ),
        op("sync_collection", &[]),
        op("propfind", &[]),
    ],
    extra_labels: &["sync_collection_resync", "create_calendar"],
    class_params: &[
        p(
            "calendar_home",
            ParamKind::Text,
            "path of the calendar home ({user}, {vu}, {run_id}); discovered when absent",
        ),
        p(
            "discovery",
            ParamKind::Text,
            "where discovery starts (default {context}/dav/)",
        ),
    ],
};

static HTTP: ProtocolDef = ProtocolDef {
    ops: &[],
    extra_labels: &[],
    class_params: &[],
};
