//! Users in teams: the rendezvous of a team's users in their set-up (members say who
//! they are, the owner makes the shared calendar or collection, grants them access and
//! says where it is, with the ticket that opens it for Morse Code), the `ACL` request that
//! grants a calendar, and what one user of a team writes and sees, by stamp
//! (`crate::visibility`). The CalDAV and Morse Code drivers send the requests; this file
//! knows who waits for whom and what a response reveals.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use tokio::sync::watch;
use tokio::time::Instant;

use crate::formats::dav::{DAV, Multistatus};
use crate::formats::xml::XmlWriter;
use crate::visibility::{self, Book, Look, Stamp, TeamId, Who};
use crate::workload::teams::class_schedules;
use crate::workload::{Grant, Seat, Workload};

/// One team in one round: its kind, which of them, the round.
type Key = (usize, u32, u32);

/// What a team's users have told each other so far.
#[derive(Debug, Clone, Default)]
struct State {
    /// The members who have arrived: each one's principal, when it found one.
    principals: Vec<Option<String>>,
    /// Where the shared calendar or collection is once the owner has made it, or why it
    /// could not.
    shared: Option<Result<Shared, String>>,
    /// The members that schedule, as they enrol.
    directory: Vec<Entry>,
}

/// Where a team's shared calendar or collection is: its path (a Morse Code collection's
/// uid), and the ticket that opens it to the members when it is reached by one.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Shared {
    pub(crate) path: String,
    pub(crate) ticket: Option<String>,
}

/// A member that schedules: who it is and its calendar user address.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Entry {
    pub(crate) who: Who,
    pub(crate) address: String,
    /// It reads its inbox, and so is invited.
    pub(crate) reads_inbox: bool,
}

/// Where the teams of a run meet, one slot per team and round; shared by every CalDAV
/// class of the run. Used in set-up only, off the clock.
#[derive(Default)]
pub(crate) struct Board {
    slots: Mutex<HashMap<Key, Arc<watch::Sender<State>>>>,
}

impl Board {
    fn slot(&self, key: Key) -> Arc<watch::Sender<State>> {
        let mut slots = self.slots.lock().unwrap_or_else(|p| p.into_inner());
        slots
            .entry(key)
            .or_insert_with(|| Arc::new(watch::channel(State::default()).0))
            .clone()
    }

    /// A member has arrived, with its principal when it found one.
    pub(crate) fn arrived(&self, key: Key, principal: Option<String>) {
        self.slot(key).send_modify(|s| s.principals.push(principal));
    }

    /// What `ready` makes of the team's state once it makes something, or `None` when it
    /// has not by `until`.
    async fn wait_for<T>(
        &self,
        key: Key,
        until: Instant,
        ready: impl Fn(&State) -> Option<T>,
    ) -> Option<T> {
        let slot = self.slot(key);
        let mut rx = slot.subscribe();
        loop {
            if let Some(t) = ready(&rx.borrow_and_update()) {
                return Some(t);
            }
            if !matches!(
                tokio::time::timeout_at(until, rx.changed()).await,
                Ok(Ok(()))
            ) {
                return None;
            }
        }
    }

    /// The principals of the first `n` members to arrive, or of those who had by `until`.
    pub(crate) async fn principals(
        &self,
        key: Key,
        n: usize,
        until: Instant,
    ) -> Vec<Option<String>> {
        let enough = |s: &State| (s.principals.len() >= n).then(|| s.principals.clone());
        match self.wait_for(key, until, enough).await {
            Some(p) => p,
            None => self.slot(key).borrow().principals.clone(),
        }
    }

    /// The owner says where the shared calendar or collection is, or why there is none.
    pub(crate) fn publish(&self, key: Key, shared: Result<Shared, String>) {
        self.slot(key).send_modify(|s| s.shared = Some(shared));
    }

    /// Where the shared calendar or collection is, once the owner has said; an error when
    /// it could not make one or did not say by `until`.
    pub(crate) async fn shared(&self, key: Key, until: Instant) -> Result<Shared, String> {
        self.wait_for(key, until, |s| s.shared.clone())
            .await
            .unwrap_or_else(|| {
                Err("the team's owner had not made what it shares by the end of set-up".into())
            })
    }

    /// A member that schedules says who it is and its calendar user address.
    pub(crate) fn enrolled(&self, key: Key, entry: Entry) {
        self.slot(key).send_modify(|s| s.directory.push(entry));
    }

    /// The addresses of the team's `n` members that schedule, once all have enrolled;
    /// an error naming how many had by `until`.
    pub(crate) async fn directory(
        &self,
        key: Key,
        n: usize,
        until: Instant,
    ) -> Result<Vec<Entry>, String> {
        let all = |s: &State| (s.directory.len() >= n).then(|| s.directory.clone());
        match self.wait_for(key, until, all).await {
            Some(d) => Ok(d),
            None => Err(format!(
                "{} of the team's {n} scheduling members had said their address by the end of set-up",
                self.slot(key).borrow().directory.len()
            )),
        }
    }
}

/// An `ACL` body (RFC 3744) granting each principal read and write; a member whose
/// principal is unknown is granted through `DAV:authenticated`.
pub(crate) fn acl_body(principals: &[Option<String>]) -> String {
    let mut w = XmlWriter::new();
    w.open("D:acl", &[("xmlns:D", DAV)]);
    let anyone = principals.iter().any(Option::is_none);
    for p in principals.iter().flatten() {
        w.open("D:ace", &[])
            .open("D:principal", &[])
            .leaf("D:href", p);
        grant(w.close("D:principal"));
    }
    if anyone {
        w.open("D:ace", &[])
            .open("D:principal", &[])
            .empty("D:authenticated", &[])
            .close("D:principal");
        grant(&mut w);
    }
    w.close("D:acl");
    w.finish()
}

fn grant(w: &mut XmlWriter) {
    w.open("D:grant", &[]);
    for p in ["D:read", "D:write"] {
        w.open("D:privilege", &[])
            .empty(p, &[])
            .close("D:privilege");
    }
    w.close("D:grant").close("D:ace");
}

/// `lines` (whole content lines, ends included) inserted into an event's text before its
/// first `END:VEVENT`; a text without one is left as it is.
pub(crate) fn before_event_end(body: String, lines: &str) -> String {
    match body.find("END:VEVENT") {
        Some(i) => {
            let mut out = String::with_capacity(body.len() + lines.len());
            out.push_str(&body[..i]);
            out.push_str(lines);
            out.push_str(&body[i..]);
            out
        }
        None => body,
    }
}

/// What a class's users need to know of their team, worked out once per run.
pub(crate) struct TeamPlan {
    kind: usize,
    grant: Grant,
    class: usize,
    /// How many users each team of the kind has, by team.
    members: Vec<usize>,
    /// How many of them schedule (invite, read their inbox or answer), by team.
    schedulers: Vec<usize>,
    workload_seats: Vec<Option<Seat>>,
}

impl TeamPlan {
    /// The plan of class `class`, if it is in a team.
    pub(crate) fn of(w: &Workload, class: usize) -> Option<TeamPlan> {
        let c = w.classes.get(class)?;
        let first = w.seat(class, 0)?;
        let t = w.teams.get(first.kind)?;
        Some(TeamPlan {
            kind: first.kind,
            grant: t.grant,
            class,
            members: (0..t.count)
                .map(|i| w.members(first.kind, i).len())
                .collect(),
            schedulers: (0..t.count)
                .map(|i| {
                    w.members(first.kind, i)
                        .iter()
                        .filter(|(ci, _)| w.classes.get(*ci).is_some_and(class_schedules))
                        .count()
                })
                .collect(),
            workload_seats: (0..Workload::peak_users(c))
                .map(|vu| w.seat(class, vu))
                .collect(),
        })
    }
}

/// One user's place in its team, and its book of what it wrote and saw.
pub(crate) struct Membership {
    pub(crate) seat: Seat,
    pub(crate) grant: Grant,
    /// The team's members, the owner among them.
    pub(crate) members: usize,
    /// Those of them that schedule.
    pub(crate) schedulers: usize,
    pub(crate) who: Who,
    run_id: Arc<str>,
    pub(crate) book: Book,
    /// The label of the observing operation under way, while one is.
    pub(crate) watching: Option<Look>,
}

impl Membership {
    /// User `vu` of the plan's class in round `round`.
    pub(crate) fn of(
        plan: &TeamPlan,
        vu: u32,
        round: u32,
        run_id: &Arc<str>,
    ) -> Option<Membership> {
        let seat = (*plan.workload_seats.get(vu as usize)?)?;
        debug_assert_eq!(seat.kind, plan.kind);
        Some(Membership {
            seat,
            grant: plan.grant,
            members: plan.members.get(seat.team as usize).copied().unwrap_or(0),
            schedulers: plan
                .schedulers
                .get(seat.team as usize)
                .copied()
                .unwrap_or(0),
            who: Who {
                class: u16::try_from(plan.class).unwrap_or(u16::MAX),
                round: u16::try_from(round).unwrap_or(u16::MAX),
                vu,
            },
            run_id: run_id.clone(),
            book: Book::default(),
            watching: None,
        })
    }

    /// A kept user begins round `round`: its stamps and sights say so.
    pub(crate) fn begin_round(&mut self, round: u32) {
        self.who.round = u16::try_from(round).unwrap_or(u16::MAX);
    }

    /// What the user of `team` (if it is in one) wrote and saw since it was last asked.
    pub(crate) fn take_book(team: &mut Option<Membership>) -> Book {
        team.as_mut()
            .map(|t| std::mem::take(&mut t.book))
            .unwrap_or_default()
    }

    pub(crate) fn key(&self) -> Key {
        (self.seat.kind, self.seat.team, u32::from(self.who.round))
    }

    pub(crate) fn team(&self) -> TeamId {
        (
            u32::try_from(self.seat.kind).unwrap_or(u32::MAX),
            self.seat.team,
        )
    }

    /// The stamp of this user's write `seq` to event `event`.
    pub(crate) fn stamp(&self, seq: u64, event: u64) -> Stamp {
        Stamp {
            writer: self.who,
            seq,
            event,
        }
    }

    /// The property line a stamp travels in, without its end. The stamp is noted as
    /// sent: one read back that no writer sent is the server's invention.
    pub(crate) fn stamp_line(&self, stamp: &Stamp) -> String {
        self.book.sent(stamp);
        format!("{}:{}", visibility::PROPERTY, stamp.text(&self.run_id))
    }

    /// The stamp's property line inserted before the event's end.
    pub(crate) fn stamped(&self, body: String, stamp: &Stamp) -> String {
        before_event_end(body, &format!("{}\r\n", self.stamp_line(stamp)))
    }

    /// An observing operation begins (`news`: what it reads is what changed).
    pub(crate) fn watch(&mut self, label: u16, news: bool) {
        self.watching = Some(Look {
            label,
            began_us: visibility::now_us(),
            at_us: 0,
            news,
        });
    }

    /// Its answer has come: the time of first sight for what it reveals.
    pub(crate) fn answered(&mut self) {
        if let Some(l) = &mut self.watching {
            l.at_us = visibility::now_us();
            self.book.looked(self.who, l);
        }
    }

    /// The stamps in one iCalendar text the observing operation read.
    pub(crate) fn read(&mut self, text: &str) {
        let Some(look) = self.watching else {
            return;
        };
        let text = visibility::unfold(text);
        let team = self.team();
        for v in visibility::stamps_in(&text) {
            self.book.saw(self.who, team, v, &self.run_id, look);
        }
    }

    /// The stamps in EIM records the observing operation read (a Morse Code
    /// collection's items, an Atom feed's entries): each field's value, its escapes
    /// already decoded, may hold a stamp on a line of its own (a note's body, where the
    /// Morse Code and Atom drivers put it).
    pub(crate) fn read_records<'a>(
        &mut self,
        records: impl IntoIterator<Item = &'a crate::formats::eim::Record>,
    ) {
        let Some(look) = self.watching else {
            return;
        };
        let team = self.team();
        let values = records
            .into_iter()
            .flat_map(|r| &r.fields)
            .filter_map(|f| f.value.as_deref());
        for v in values.flat_map(visibility::stamps_in) {
            self.book.saw(self.who, team, v, &self.run_id, look);
        }
    }

    /// A stamp known without reading it (an answer the server's REPLY carries no stamp
    /// of), seen by the observing operation under way. Such a message may name an
    /// answer seen before, so seeing it again is no duplicate.
    pub(crate) fn saw(&mut self, stamp: &Stamp) {
        let Some(look) = self.watching else {
            return;
        };
        let look = Look {
            news: false,
            ..look
        };
        let team = self.team();
        let value = stamp.text(&self.run_id);
        self.book.saw(self.who, team, &value, &self.run_id, look);
    }

    /// The stamps in a multistatus's calendar data.
    pub(crate) fn read_all(&mut self, m: &Multistatus) {
        for (_, d) in &m.data {
            self.read(d);
        }
    }

    /// The observing operation is over.
    pub(crate) fn done(&mut self) {
        self.watching = None;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn members_meet_the_owner_and_a_silent_owner_times_out() {
        let b = Board::default();
        let key = (0, 0, 1);
        b.arrived(key, Some("/p/bob/".into()));
        b.arrived(key, None);
        let soon = Instant::now() + std::time::Duration::from_secs(5);
        assert_eq!(b.principals(key, 2, soon).await.len(), 2);
        let cal = Shared {
            path: "/p/alice/team/".into(),
            ticket: None,
        };
        b.publish(key, Ok(cal.clone()));
        assert_eq!(b.shared(key, soon).await.unwrap(), cal);
        let now = Instant::now();
        assert!(b.shared((0, 1, 1), now).await.is_err());
        assert_eq!(b.principals((0, 1, 1), 3, now).await.len(), 0);
    }

    #[test]
    fn the_acl_grants_each_member_and_anyone_unknown_through_authenticated() {
        let body = acl_body(&[Some("/p/bob/".into()), None]);
        let root = crate::formats::xml::parse(&body).unwrap();
        let aces: Vec<_> = root.children_named(DAV, "ace").collect();
        assert_eq!(aces.len(), 2);
        assert!(body.contains("<D:href>/p/bob/</D:href>"));
        assert!(body.contains("<D:authenticated/>"));
        assert_eq!(body.matches("<D:write/>").count(), 2);
    }
}
