//! CalDAV: its schema and its typed operations. Driven by `protocol/caldav/`.

use super::{
    ClassKind, DELTA_SYNC, INITIAL_SYNC, InitialSync, ParamKind, ProtocolDef, RANGE, SIZE,
    batch_of, defaults, each, label_index, op, p, range_default,
};
use crate::workload::Params;
use crate::workload::dist::Dist;
use crate::workload::dist::Unit;

pub(super) static DEF: ProtocolDef = ProtocolDef {
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
                EXCEPTIONS,
                ATTENDEES,
                ALARMS,
            ],
        ),
        op(CaldavOp::NAMES[2], &[SIZE, EXCEPTIONS, ATTENDEES, ALARMS]),
        op(CaldavOp::NAMES[3], &[]),
        op(CaldavOp::NAMES[4], &[]),
        op(CaldavOp::NAMES[5], &[RANGE]),
        op(
            CaldavOp::NAMES[6],
            &[p("count", ParamKind::Integer, "events per multiget")],
        ),
        op(CaldavOp::NAMES[7], &[]),
        op(CaldavOp::NAMES[8], &[]),
        op(
            CaldavOp::NAMES[9],
            &[
                SIZE,
                p(
                    "invitees",
                    ParamKind::Integer,
                    "how many of the team's inbox readers each invitation invites, drawn anew each time (all of them, at most 50, when absent)",
                ),
                ALARMS,
            ],
        ),
        op(CaldavOp::NAMES[10], &[]),
        op(
            CaldavOp::NAMES[11],
            &[p(
                "accept",
                ParamKind::Probability,
                "chance an answer accepts the invitation (else it declines)",
            )],
        ),
        op(CaldavOp::NAMES[12], &[]),
        op(
            CaldavOp::NAMES[13],
            &[
                RANGE,
                p(
                    "attendees",
                    ParamKind::Integer,
                    "how many of the team's other schedulers each query asks about, drawn anew each time (all of them, at most 50, when absent)",
                ),
            ],
        ),
        op(CaldavOp::NAMES[14], INITIAL_SYNC),
        op(CaldavOp::NAMES[15], DELTA_SYNC),
    ],
    class_params: &[
        p(
            "calendar_home",
            ParamKind::Text,
            "path of the calendar home ({user}, {vu}, {run_id}); discovered when absent",
        ),
        p("discovery", ParamKind::Text, "where discovery starts"),
        p(
            "team",
            ParamKind::Text,
            "the team (under teams:) whose shared calendar its users work in",
        ),
        p(
            "initial_events",
            ParamKind::Dist(Unit::Count),
            "events each user's first calendar holds before the clock starts (a count or a distribution)",
        ),
    ],
};

/// An event's share of attendees, on a put or an update.
const ATTENDEES: super::ParamDef = p(
    "attendees",
    ParamKind::Probability,
    "chance the event lists 2 to 6 attendees (at example.invalid, no organizer: nobody is invited)",
);

/// A recurring event's share of exceptions, on a put or an update.
const EXCEPTIONS: super::ParamDef = p(
    "exceptions",
    ParamKind::Probability,
    "chance a recurring event has exceptions: its second occurrence removed (EXDATE) and its third moved by an hour (a RECURRENCE-ID override)",
);

/// An event's share of alarms, on a put or an update.
const ALARMS: super::ParamDef = p(
    "alarms",
    ParamKind::Probability,
    "chance the event carries a VALARM (a display reminder 15 minutes before)",
);

/// What an event a user puts looks like: its size, and how often it recurs, lists
/// attendees and carries an alarm.
#[derive(Debug, Clone, PartialEq)]
pub struct EventShape {
    /// About this many bytes (the generator's natural size when `None`).
    pub size: Option<Dist>,
    /// Chance of a weekly RRULE.
    pub recurring: f64,
    /// Chance of 2 to 6 ATTENDEE lines.
    pub attendees: f64,
    /// Chance of a VALARM.
    pub alarms: f64,
    /// Chance a recurring event has an EXDATE and an overridden occurrence.
    pub exceptions: f64,
}

impl Default for EventShape {
    /// The generator's natural size, recurring as often as the 2007 client's events, no
    /// attendees, no alarms.
    fn default() -> EventShape {
        EventShape {
            size: None,
            recurring: defaults::RECURRING,
            attendees: 0.0,
            alarms: 0.0,
            exceptions: 0.0,
        }
    }
}

impl EventShape {
    fn of(p: &Params, recurring: f64) -> EventShape {
        EventShape {
            size: p.dist("size").cloned(),
            recurring,
            attendees: p.number("attendees").unwrap_or(0.0),
            alarms: p.number("alarms").unwrap_or(0.0),
            exceptions: p.number("exceptions").unwrap_or(0.0),
        }
    }

    /// As `validate` shows it.
    pub fn describe(&self, size: String) -> String {
        format!(
            "size {size} · recurring {} (exceptions {}) · attendees {} · alarms {}",
            self.recurring, self.exceptions, self.attendees, self.alarms
        )
    }
}

/// The most events set-up puts in one user's first calendar, whatever `initial_events`
/// draws: it bounds the set-up a workload can ask for (and a server with 100,000
/// events per calendar is measured by that already).
pub(crate) const MAX_INITIAL_EVENTS: u64 = 100_000;

/// The most attendees one invitation lists: a meeting of a team, not a mailing list
/// (the embedded server takes at most 256 per event).
pub(crate) const MAX_INVITEES: u32 = 50;

impl CaldavOp {
    /// It takes part in scheduling (RFC 6638): the user needs its inbox and address.
    pub fn schedules(&self) -> bool {
        matches!(
            self,
            CaldavOp::Invite { .. }
                | CaldavOp::Inbox
                | CaldavOp::Answer { .. }
                | CaldavOp::Cancel
                | CaldavOp::Freebusy { .. }
        )
    }
}

/// CalDAV operations.
#[derive(Debug, Clone, PartialEq)]
pub enum CaldavOp {
    CreateCalendar,
    /// A new event of this shape.
    PutEvent(EventShape),
    /// One of the user's events rewritten in this shape.
    UpdateEvent(EventShape),
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
    /// An event of this shape, with the user as its organizer and `invitees` of its team's
    /// inbox readers (all of them when `None`) as attendees, put in the user's own
    /// calendar: the server schedules it (RFC 6638).
    Invite {
        shape: EventShape,
        invitees: Option<u32>,
    },
    /// The user's scheduling inbox read: new messages listed, fetched and deleted.
    Inbox,
    /// The oldest invitation the inbox showed and the user has not answered: accepted
    /// (with chance `accept`) or declined, in the user's copy of the event.
    Answer {
        accept: f64,
    },
    /// The oldest of the user's invitations still standing deleted: the server cancels
    /// it for its attendees.
    Cancel,
    /// A free-busy query through the user's outbox (RFC 6638 §5.2) about `attendees` of
    /// its team's other schedulers (all when `None`), over a window of `range` in 2007.
    Freebusy {
        range: Dist,
        attendees: Option<u32>,
    },
    /// A client's first copy of the calendar: every event listed, then fetched.
    InitialSync(InitialSync),
    /// A client's sync after that: sync-collection from its last token, then a
    /// calendar-multiget of what changed, `batch` a request.
    DeltaSync {
        batch: u32,
    },
}

impl CaldavOp {
    pub const NAMES: [&'static str; 16] = [
        "create_calendar",
        "put_event",
        "update_event",
        "get_event",
        "delete_event",
        "time_range_report",
        "multiget",
        "sync_collection",
        "propfind",
        "invite",
        "inbox",
        "answer",
        "cancel",
        "freebusy",
        "initial_sync",
        "delta_sync",
    ];
    pub fn name(&self) -> &'static str {
        match self {
            CaldavOp::CreateCalendar => Self::NAMES[0],
            CaldavOp::PutEvent(_) => Self::NAMES[1],
            CaldavOp::UpdateEvent(_) => Self::NAMES[2],
            CaldavOp::GetEvent => Self::NAMES[3],
            CaldavOp::DeleteEvent => Self::NAMES[4],
            CaldavOp::TimeRangeReport { .. } => Self::NAMES[5],
            CaldavOp::Multiget { .. } => Self::NAMES[6],
            CaldavOp::SyncCollection => Self::NAMES[7],
            CaldavOp::Propfind => Self::NAMES[8],
            CaldavOp::Invite { .. } => Self::NAMES[9],
            CaldavOp::Inbox => Self::NAMES[10],
            CaldavOp::Answer { .. } => Self::NAMES[11],
            CaldavOp::Cancel => Self::NAMES[12],
            CaldavOp::Freebusy { .. } => Self::NAMES[13],
            CaldavOp::InitialSync(_) => Self::NAMES[14],
            CaldavOp::DeltaSync { .. } => Self::NAMES[15],
        }
    }
    fn build(name: &str, p: &Params) -> Option<CaldavOp> {
        Some(match name {
            "create_calendar" => CaldavOp::CreateCalendar,
            "put_event" => CaldavOp::PutEvent(EventShape::of(
                p,
                p.number("recurring").unwrap_or(defaults::RECURRING),
            )),
            "update_event" => CaldavOp::UpdateEvent(EventShape::of(p, defaults::RECURRING)),
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
            "invite" => CaldavOp::Invite {
                shape: EventShape::of(p, defaults::RECURRING),
                invitees: p
                    .number("invitees")
                    .map(|n| n.clamp(1.0, f64::from(MAX_INVITEES)) as u32),
            },
            "inbox" => CaldavOp::Inbox,
            "answer" => CaldavOp::Answer {
                accept: p.number("accept").unwrap_or(defaults::ACCEPT),
            },
            "cancel" => CaldavOp::Cancel,
            "initial_sync" => CaldavOp::InitialSync(InitialSync::of(p)),
            "delta_sync" => CaldavOp::DeltaSync { batch: batch_of(p) },
            "freebusy" => CaldavOp::Freebusy {
                range: p.dist("range").cloned().unwrap_or_else(range_default),
                attendees: p
                    .number("attendees")
                    .map(|n| n.clamp(1.0, f64::from(MAX_INVITEES)) as u32),
            },
            _ => return None,
        })
    }
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
    /// An answer that found no copy of the invitation to answer (cancelled meanwhile);
    /// a class without `answer` has no such label.
    pub label_answer_gone: Option<usize>,
    /// The first calendar, made outside the table.
    pub label_create_calendar: usize,
    /// Events put in a user's first calendar in its set-up (`None`: none).
    pub initial_events: Option<Dist>,
    /// The team (its `teams:` name) whose shared calendar the users work in; `None`:
    /// each user works in calendars of its own.
    pub team: Option<String>,
}

/// Why a class with these operations (and their weights) could never act on what most of
/// its operations need: events to update, read or delete, and none ever put (no
/// `put_event` with a weight, no `initial_events`). `None` when it can.
pub(super) fn nothing_to_act_on(
    ops: &[CaldavOp],
    weights: &[f64],
    params: &CaldavParams,
) -> Option<String> {
    let needs: Vec<&str> = ops
        .iter()
        .zip(weights)
        .filter(|(o, w)| **w > 0.0 && o.needs_an_event())
        .map(|(o, _)| o.name())
        .collect();
    let puts = ops
        .iter()
        .zip(weights)
        .any(|(o, w)| *w > 0.0 && matches!(o, CaldavOp::PutEvent(_)));
    let prefilled = params
        .initial_events
        .as_ref()
        .is_some_and(|d| d.mean() > 0.0);
    // In a team, the others' events are there to read (the team's check says someone
    // writes).
    let teamed = params.team.is_some();
    (!needs.is_empty() && !puts && !prefilled && !teamed).then(|| {
        format!(
            "{} act on events, and no operation of this class puts one: every such pick would send nothing (give put_event a weight, or params.initial_events a count)",
            needs.join(", ")
        )
    })
}

impl CaldavOp {
    /// It acts on one of the user's events, and sends nothing when there is none.
    fn needs_an_event(&self) -> bool {
        matches!(
            self,
            CaldavOp::UpdateEvent(_) | CaldavOp::GetEvent | CaldavOp::DeleteEvent
        )
    }
}

/// Whether set-up can put what `initial_events` draws: a count past
/// [`MAX_INITIAL_EVENTS`] would be cut to it without a word, so one that can be drawn
/// (its largest value, or its mean) is refused.
fn initial_events_fit(d: &Dist) -> Result<(), super::BuildError> {
    let top = d.upper_bound().unwrap_or(0.0).max(d.mean());
    if top.round() > MAX_INITIAL_EVENTS as f64 {
        return Err(super::BuildError::Params(format!(
            "params.initial_events draws up to {top:.0} events, and set-up puts at most \
             {MAX_INITIAL_EVENTS} in one user's calendar (give it a max of at most \
             {MAX_INITIAL_EVENTS})"
        )));
    }
    Ok(())
}

/// The class's typed operations and parameters, with every default applied.
pub(super) fn build(
    ops: &[(&str, &Params)],
    class_params: &Params,
    labels: &mut Vec<String>,
) -> Result<ClassKind, super::BuildError> {
    let ops = each(ops, CaldavOp::build)?;
    let initial_events = class_params.dist("initial_events").cloned();
    if let Some(d) = &initial_events {
        initial_events_fit(d)?;
    }
    let answers = ops.iter().any(|o| matches!(o, CaldavOp::Answer { .. }));
    Ok(ClassKind::Caldav {
        ops,
        params: CaldavParams {
            calendar_home: class_params.text("calendar_home").map(str::to_string),
            discovery: class_params.text("discovery").map(str::to_string),
            label_resync: label_index(labels, "sync_collection_resync"),
            label_answer_gone: answers.then(|| label_index(labels, "answer_gone")),
            label_create_calendar: label_index(labels, "create_calendar"),
            initial_events,
            team: class_params.text("team").map(str::to_string),
        },
    })
}
