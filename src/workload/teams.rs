//! Teams: users of several classes dealt into groups that share one calendar (CalDAV)
//! or one published collection (Morse Code and Atom, Cosmo's two views of it, reached by
//! ticket). A team's owner makes it
//! (and, where the team says, grants the others access to it); its members read it and,
//! when their class writes, write to it. Who belongs to which team follows from the
//! workload alone, so a report can say who should have seen each write without asking
//! the server.

use super::{ClassKind, UserClass, Workload};
use crate::workload::{AtomOp, CaldavOp, MorseOp};

/// One `teams:` entry: `count` teams of this kind, each with a calendar of its own.
#[derive(Debug, Clone, PartialEq)]
pub struct Team {
    /// Its `name:`, which classes give as `params.team`.
    pub name: String,
    /// How many teams of this kind; user `u` of a member class is in team `u mod count`.
    pub count: u32,
    /// How the owner lets the members in.
    pub grant: Grant,
    /// The classes whose users it deals out (indices into the workload's classes, in
    /// file order); the first one's user `t` owns team `t`.
    pub classes: Vec<usize>,
}

/// How a team's owner lets its members reach the shared calendar.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Grant {
    /// An RFC 3744 `ACL` request granting each member read and write (the embedded
    /// server, DAViCal).
    Acl,
    /// Nothing: the server's own rights already let the members in (Radicale's rights
    /// file).
    Server,
}

impl Grant {
    pub const NAMES: [&'static str; 2] = ["acl", "server"];
    pub fn name(self) -> &'static str {
        match self {
            Grant::Acl => Self::NAMES[0],
            Grant::Server => Self::NAMES[1],
        }
    }
}

/// Where one user stands in a team: which kind (index into `teams:`), which of them, and
/// whether it is the owner.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Seat {
    pub kind: usize,
    pub team: u32,
    pub owner: bool,
}

/// A user of the run: its class (index) and its index in the class.
pub(crate) type Member = (usize, u32);

impl CaldavOp {
    /// Writes what the others of its team should see: a new event, or one rewritten.
    pub fn shows_others(&self) -> bool {
        matches!(self, CaldavOp::PutEvent(_) | CaldavOp::UpdateEvent(_))
    }

    /// Reads the calendar's events, and so can reveal another's write to its user (a
    /// sync fetches what changed; `get_event` reads only the user's own events; an
    /// initial sync reads everything again, which reveals nothing new).
    pub fn reveals(&self) -> bool {
        matches!(
            self,
            CaldavOp::SyncCollection
                | CaldavOp::DeltaSync { .. }
                | CaldavOp::TimeRangeReport { .. }
                | CaldavOp::Multiget { .. }
        )
    }
}

impl MorseOp {
    /// Writes what the others of its team should see: items new and changed.
    pub fn shows_others(&self) -> bool {
        *self == MorseOp::Update
    }

    /// Reads the collection's items, and so can reveal another's write.
    pub fn reveals(&self) -> bool {
        matches!(self, MorseOp::Sync | MorseOp::Subscribe)
    }
}

impl AtomOp {
    /// Writes what the others of its team should see: an entry new or changed.
    pub fn shows_others(&self) -> bool {
        matches!(self, AtomOp::CreateEvent | AtomOp::UpdateEvent)
    }

    /// Reads entries of the collection (a feed), and so can reveal another's write.
    pub fn reveals(&self) -> bool {
        !self.shows_others()
    }
}

/// The team a class names in its `params.team`, for the protocols that have teams.
pub(crate) fn team_of(class: &UserClass) -> Option<&str> {
    match &class.kind {
        ClassKind::Caldav { params, .. } => params.team.as_deref(),
        ClassKind::Morse { params, .. } => params.team.as_deref(),
        ClassKind::Atom { params, .. } => params.team.as_deref(),
        ClassKind::Carddav { .. }
        | ClassKind::Stomp { .. }
        | ClassKind::Amqp { .. }
        | ClassKind::Http { .. } => None,
    }
}

/// The class's Morse Code operations, when it is a Morse Code class.
fn morse_ops(class: &UserClass) -> &[MorseOp] {
    let ClassKind::Morse { ops, .. } = &class.kind else {
        return &[];
    };
    ops
}

/// The class's Atom operations, when it is an Atom class.
fn atom_ops(class: &UserClass) -> &[AtomOp] {
    let ClassKind::Atom { ops, .. } = &class.kind else {
        return &[];
    };
    ops
}

/// The class's CalDAV operations, when it is a CalDAV class.
fn caldav_ops(class: &UserClass) -> &[CaldavOp] {
    let ClassKind::Caldav { ops, .. } = &class.kind else {
        return &[];
    };
    ops
}

/// Whether the class's users write what their team should see: in the shared calendar
/// or collection, or as invitations.
pub(crate) fn class_writes(class: &UserClass) -> bool {
    caldav_ops(class)
        .iter()
        .any(|o| o.shows_others() || matches!(o, CaldavOp::Invite { .. }))
        || morse_ops(class).iter().any(MorseOp::shows_others)
        || atom_ops(class).iter().any(AtomOp::shows_others)
}

/// Whether the class's users read their scheduling inbox, and so can be invited.
pub(crate) fn class_reads_inbox(class: &UserClass) -> bool {
    caldav_ops(class).contains(&CaldavOp::Inbox)
}

/// Whether the class's users take part in scheduling at all.
pub(crate) fn class_schedules(class: &UserClass) -> bool {
    caldav_ops(class).iter().any(CaldavOp::schedules)
}

/// Whether the class's users read what their team writes.
pub(crate) fn class_observes(class: &UserClass) -> bool {
    caldav_ops(class).iter().any(CaldavOp::reveals)
        || morse_ops(class).iter().any(MorseOp::reveals)
        || atom_ops(class).iter().any(AtomOp::reveals)
}

impl Workload {
    /// Where user `vu` of class `class` sits, if its class belongs to a team.
    pub fn seat(&self, class: usize, vu: u32) -> Option<Seat> {
        let (kind, t) = self
            .teams
            .iter()
            .enumerate()
            .find(|(_, t)| t.classes.contains(&class))?;
        let team = vu % t.count.max(1);
        Some(Seat {
            kind,
            team,
            owner: t.classes.first() == Some(&class) && vu == team,
        })
    }

    /// The users of team `team` of kind `kind`, the owner first, then in class and index
    /// order.
    pub fn members(&self, kind: usize, team: u32) -> Vec<Member> {
        let Some(t) = self.teams.get(kind) else {
            return Vec::new();
        };
        let mut out = Vec::new();
        for &ci in &t.classes {
            let Some(class) = self.classes.get(ci) else {
                continue;
            };
            let n = Workload::peak_users(class);
            out.extend(
                (team..n)
                    .step_by(t.count.max(1) as usize)
                    .map(|vu| (ci, vu)),
            );
        }
        out
    }

    /// The members of the team who read their inbox: whom its invitations invite.
    pub fn inbox_readers(&self, kind: usize, team: u32) -> Vec<Member> {
        self.members(kind, team)
            .into_iter()
            .filter(|(ci, _)| self.classes.get(*ci).is_some_and(class_reads_inbox))
            .collect()
    }

    /// The members of the team who read what it writes.
    pub fn observers(&self, kind: usize, team: u32) -> Vec<Member> {
        self.members(kind, team)
            .into_iter()
            .filter(|(ci, _)| self.classes.get(*ci).is_some_and(class_observes))
            .collect()
    }
}
