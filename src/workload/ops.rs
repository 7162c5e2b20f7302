//! Typed operations: the contract between a workload and the protocol drivers. Each
//! protocol's operations are an enum carrying their parameters with every default applied
//! (the defaults live here and nowhere else), and each class carries its protocol's typed
//! parameters and the label indices its driver reports under. A driver matches these
//! exhaustively; no operation is ever looked up by name after resolution.

use std::time::Duration;

use super::dist::{Dist, DistSpec};
use super::{HttpRequest, Params, Pool};

/// The defaults, one place: the catalog's help and the README quote these values.
pub mod defaults {
    /// Morse Code: items in a published collection (exponential with this mean, capped).
    pub const COLLECTION_SIZE_MEAN: f64 = 50.0;
    pub const COLLECTION_SIZE_MAX: f64 = 3000.0;
    /// Morse Code: share of syncs that use the newest token.
    pub const NO_CHANGE_SYNC: f64 = 0.2;
    /// Morse Code: chance an update also deletes an item.
    pub const TOMBSTONE: f64 = 0.333;
    /// Atom: items in the collection published first.
    pub const INITIAL_ITEMS: u32 = 21;
    /// Atom feeds and CalDAV reports: the window a time-range query asks for.
    pub const RANGE_DAYS: u64 = 7;
    /// CalDAV: chance a new event has an RRULE.
    pub const RECURRING: f64 = 0.05;
    /// CalDAV: events per multiget.
    pub const MULTIGET_COUNT: u32 = 10;
}

/// Durations are sampled in microseconds, like every duration distribution.
fn range_default() -> Dist {
    Dist::constant(defaults::RANGE_DAYS as f64 * 86_400e6)
}

/// Morse Code operations.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MorseOp {
    Publish,
    Sync,
    Update,
    Subscribe,
    Delete,
}

impl MorseOp {
    pub const ALL: [MorseOp; 5] = [
        MorseOp::Publish,
        MorseOp::Sync,
        MorseOp::Update,
        MorseOp::Subscribe,
        MorseOp::Delete,
    ];
    pub const fn name(self) -> &'static str {
        match self {
            MorseOp::Publish => "publish",
            MorseOp::Sync => "sync",
            MorseOp::Update => "update",
            MorseOp::Subscribe => "subscribe",
            MorseOp::Delete => "delete",
        }
    }
}

/// Atom operations.
#[derive(Debug, Clone, PartialEq)]
pub enum AtomOp {
    TimeRangeFeed { range: Dist },
    FullFeed,
    Dashboard,
    CreateEvent,
    UpdateEvent,
}

impl AtomOp {
    pub const NAMES: [&'static str; 5] = [
        "time_range_feed",
        "full_feed",
        "dashboard",
        "create_event",
        "update_event",
    ];
    pub fn name(&self) -> &'static str {
        match self {
            AtomOp::TimeRangeFeed { .. } => Self::NAMES[0],
            AtomOp::FullFeed => Self::NAMES[1],
            AtomOp::Dashboard => Self::NAMES[2],
            AtomOp::CreateEvent => Self::NAMES[3],
            AtomOp::UpdateEvent => Self::NAMES[4],
        }
    }
    fn build(name: &str, p: &Params) -> Option<AtomOp> {
        Some(match name {
            "time_range_feed" => AtomOp::TimeRangeFeed {
                range: p.dist("range").cloned().unwrap_or_else(range_default),
            },
            "full_feed" => AtomOp::FullFeed,
            "dashboard" => AtomOp::Dashboard,
            "create_event" => AtomOp::CreateEvent,
            "update_event" => AtomOp::UpdateEvent,
            _ => return None,
        })
    }
}

/// CalDAV operations.
#[derive(Debug, Clone, PartialEq)]
pub enum CaldavOp {
    CreateCalendar,
    /// A new event of about `size` bytes (the generator's natural size when `None`).
    PutEvent {
        size: Option<Dist>,
        recurring: f64,
    },
    UpdateEvent {
        size: Option<Dist>,
    },
    GetEvent,
    DeleteEvent,
    TimeRangeReport {
        range: Dist,
    },
    Multiget {
        count: u32,
    },
    SyncCollection,
    Propfind,
}

impl CaldavOp {
    pub const NAMES: [&'static str; 9] = [
        "create_calendar",
        "put_event",
        "update_event",
        "get_event",
        "delete_event",
        "time_range_report",
        "multiget",
        "sync_collection",
        "propfind",
    ];
    pub fn name(&self) -> &'static str {
        match self {
            CaldavOp::CreateCalendar => Self::NAMES[0],
            CaldavOp::PutEvent { .. } => Self::NAMES[1],
            CaldavOp::UpdateEvent { .. } => Self::NAMES[2],
            CaldavOp::GetEvent => Self::NAMES[3],
            CaldavOp::DeleteEvent => Self::NAMES[4],
            CaldavOp::TimeRangeReport { .. } => Self::NAMES[5],
            CaldavOp::Multiget { .. } => Self::NAMES[6],
            CaldavOp::SyncCollection => Self::NAMES[7],
            CaldavOp::Propfind => Self::NAMES[8],
        }
    }
    fn build(name: &str, p: &Params) -> Option<CaldavOp> {
        Some(match name {
            "create_calendar" => CaldavOp::CreateCalendar,
            "put_event" => CaldavOp::PutEvent {
                size: p.dist("size").cloned(),
                recurring: p.number("recurring").unwrap_or(defaults::RECURRING),
            },
            "update_event" => CaldavOp::UpdateEvent {
                size: p.dist("size").cloned(),
            },
            "get_event" => CaldavOp::GetEvent,
            "delete_event" => CaldavOp::DeleteEvent,
            "time_range_report" => CaldavOp::TimeRangeReport {
                range: p.dist("range").cloned().unwrap_or_else(range_default),
            },
            "multiget" => CaldavOp::Multiget {
                count: p.number("count").map_or(defaults::MULTIGET_COUNT, |n| {
                    n.clamp(1.0, u32::MAX as f64) as u32
                }),
            },
            "sync_collection" => CaldavOp::SyncCollection,
            "propfind" => CaldavOp::Propfind,
            _ => return None,
        })
    }
}

/// Morse Code class parameters and the labels its driver adds.
#[derive(Debug, Clone)]
pub struct MorseParams {
    pub collection_size: Dist,
    pub no_change_sync: f64,
    pub tombstone: f64,
    /// A sync with the newest token.
    pub label_sync_no_change: usize,
    /// The first collection, published outside the table.
    pub label_publish: usize,
}

/// Atom class parameters.
#[derive(Debug, Clone)]
pub struct AtomParams {
    pub initial_items: u32,
    /// The first collection, published through Morse Code outside the table.
    pub label_publish: usize,
}

/// CalDAV class parameters.
#[derive(Debug, Clone)]
pub struct CaldavParams {
    /// The calendar home, as a template (`{user}`, `{vu}`, `{run_id}`, `{context}`);
    /// discovered when `None`.
    pub calendar_home: Option<String>,
    /// Where discovery starts (a template); `None`: `/.well-known/caldav`, then the
    /// context's root.
    pub discovery: Option<String>,
    /// A sync whose token the server rejected, repeated from scratch.
    pub label_resync: usize,
    /// The first calendar, made outside the table.
    pub label_create_calendar: usize,
}

/// What a class does, by protocol: its typed operations (one per row of the class's table,
/// in order) and its typed parameters.
#[derive(Debug, Clone)]
pub enum ClassKind {
    Http {
        requests: Vec<HttpRequest>,
        pools: Vec<Pool>,
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

/// Build the typed operations of a protocol class from the names and parameters the
/// resolver checked against the catalog. `labels` starts as the operation names and gains
/// the protocol's extra labels. `Err` names an operation the catalog knows but this
/// module does not, which the catalog test rules out.
pub(super) fn build_class(
    protocol: super::Protocol,
    ops: &[(&str, &Params)],
    class_params: &Params,
    labels: &mut Vec<String>,
) -> Result<ClassKind, String> {
    use super::Protocol;
    fn each<T>(
        ops: &[(&str, &Params)],
        build: impl Fn(&str, &Params) -> Option<T>,
    ) -> Result<Vec<T>, String> {
        ops.iter()
            .map(|(n, p)| build(n, p).ok_or_else(|| format!("operation '{n}' has no driver")))
            .collect()
    }
    Ok(match protocol {
        Protocol::Http => ClassKind::Http {
            requests: Vec::new(),
            pools: Vec::new(),
        },
        Protocol::Morse => {
            let ops = each(ops, |n, _| MorseOp::ALL.into_iter().find(|o| o.name() == n))?;
            let collection_size = match class_params.dist("collection_size") {
                Some(d) => d.clone(),
                None => Dist::new(DistSpec::Exponential {
                    mean: defaults::COLLECTION_SIZE_MEAN,
                    max: Some(defaults::COLLECTION_SIZE_MAX),
                })
                .map_err(|e| format!("default collection_size: {e}"))?,
            };
            ClassKind::Morse {
                params: MorseParams {
                    collection_size,
                    no_change_sync: class_params
                        .number("no_change_sync")
                        .unwrap_or(defaults::NO_CHANGE_SYNC),
                    tombstone: class_params
                        .number("tombstone")
                        .unwrap_or(defaults::TOMBSTONE),
                    label_sync_no_change: label_index(labels, "sync_no_change"),
                    label_publish: label_index(labels, "publish"),
                },
                ops,
            }
        }
        Protocol::Atom => ClassKind::Atom {
            ops: each(ops, AtomOp::build)?,
            params: AtomParams {
                initial_items: class_params
                    .number("initial_items")
                    .map_or(defaults::INITIAL_ITEMS, |n| {
                        n.clamp(1.0, u32::MAX as f64) as u32
                    }),
                label_publish: label_index(labels, "publish"),
            },
        },
        Protocol::Caldav => ClassKind::Caldav {
            ops: each(ops, CaldavOp::build)?,
            params: CaldavParams {
                calendar_home: class_params.text("calendar_home").map(str::to_string),
                discovery: class_params.text("discovery").map(str::to_string),
                label_resync: label_index(labels, "sync_collection_resync"),
                label_create_calendar: label_index(labels, "create_calendar"),
            },
        },
    })
}

impl ClassKind {
    /// The parameters of operation `i` as `validate` shows them.
    pub fn describe_op(&self, i: usize) -> String {
        let fmt_d = |d: &Dist, unit_secs: bool| {
            if unit_secs {
                d.describe(&|us| {
                    super::units::format_duration(Duration::from_nanos((us * 1e3) as u64))
                })
            } else {
                d.describe(&|v| format!("{v:.0}"))
            }
        };
        match self {
            ClassKind::Http { requests, .. } => requests
                .get(i)
                .map(|h| format!("{} {}", h.method, h.path.source))
                .unwrap_or_default(),
            ClassKind::Morse { .. } => String::new(),
            ClassKind::Atom { ops, .. } => match ops.get(i) {
                Some(AtomOp::TimeRangeFeed { range }) => format!("range {}", fmt_d(range, true)),
                _ => String::new(),
            },
            ClassKind::Caldav { ops, .. } => match ops.get(i) {
                Some(CaldavOp::PutEvent { size, recurring }) => format!(
                    "size {} · recurring {recurring}",
                    size.as_ref().map_or("natural".into(), |d| fmt_d(d, false))
                ),
                Some(CaldavOp::UpdateEvent { size: Some(d) }) => {
                    format!("size {}", fmt_d(d, false))
                }
                Some(CaldavOp::TimeRangeReport { range }) => {
                    format!("range {}", fmt_d(range, true))
                }
                Some(CaldavOp::Multiget { count }) => format!("count {count}"),
                _ => String::new(),
            },
        }
    }
}
