//! CalDAV scheduling (RFC 6638) as a calendar client does it, in the parts that need no
//! wire: what set-up asks a principal and which of its addresses a user goes by, the
//! text of an invitation and of an answer to one, what a message in a scheduling inbox
//! says, and a user's scheduling state (its inbox, its calendar, its team's directory,
//! the invitations it has seen and not answered). The CalDAV driver sends the requests.
//!
//! Everything read here comes from the server: messages are parsed as hostile text and
//! the invitations a user remembers are bounded.

use std::collections::{HashSet, VecDeque};
use std::sync::Arc;

use rand::Rng;

use super::teams::{Entry, before_event_end};
use crate::formats::dav::{CALDAV, DAV};
use crate::formats::ical;
use crate::formats::xml::El;
use crate::visibility::{self, Who};

/// The principal's scheduling properties, asked for in set-up.
pub(crate) const PRINCIPAL_PROPS: &str = r#"<D:propfind xmlns:D="DAV:" xmlns:C="urn:ietf:params:xml:ns:caldav"><D:prop><C:schedule-inbox-URL/><C:schedule-outbox-URL/><C:calendar-user-address-set/></D:prop></D:propfind>"#;

/// Invitations a user remembers before answering; past it, new ones are not answered.
const MAX_PENDING: usize = 1_000;
/// Inbox messages a user remembers having read and not deleted yet; past it, a message
/// read is left in the inbox.
const MAX_READ: usize = 10_000;
/// Messages one inbox poll deletes: with its listing and its fetch, every answer of the
/// operation is one its sample holds (see `crate::metrics::PRIOR_ANSWERS`); the rest
/// wait for the next poll, as a client works through a full inbox a batch at a time.
pub(crate) const DELETES_PER_POLL: usize = 6;

/// The calendar user address a principal's `calendar-user-address-set` gives it: its
/// first `mailto:` one, as clients write attendees, else its first.
pub(crate) fn address_of(root: &El) -> Option<String> {
    let hrefs: Vec<String> = root
        .children_named(DAV, "response")
        .flat_map(|r| r.children_named(DAV, "propstat"))
        .filter_map(|ps| ps.child(DAV, "prop"))
        .filter_map(|p| p.child(CALDAV, "calendar-user-address-set"))
        .flat_map(|set| set.children_named(DAV, "href"))
        .map(|h| h.text.trim().to_string())
        .filter(|h| !h.is_empty() && !h.contains(['\r', '\n']))
        .collect();
    hrefs
        .iter()
        .find(|h| {
            h.get(..7)
                .is_some_and(|m| m.eq_ignore_ascii_case("mailto:"))
        })
        .or(hrefs.first())
        .cloned()
}

/// Two calendar user addresses name the same user (scheme and case aside).
pub(crate) fn same_address(a: &str, b: &str) -> bool {
    fn bare(s: &str) -> &str {
        let s = s.trim();
        match s.get(..7) {
            Some(m) if m.eq_ignore_ascii_case("mailto:") => &s[7..],
            _ => s,
        }
    }
    bare(a).eq_ignore_ascii_case(bare(b))
}

/// An event's text with `organizer` as its ORGANIZER and attendee (accepted, the chair)
/// and each of `attendees` invited, asked to answer: the lines go before the first
/// `END:VEVENT`.
pub(crate) fn invitation(body: String, organizer: &str, attendees: &[&str]) -> String {
    let mut lines =
        format!("ORGANIZER:{organizer}\r\nATTENDEE;ROLE=CHAIR;PARTSTAT=ACCEPTED:{organizer}\r\n");
    for a in attendees {
        lines.push_str("ATTENDEE;ROLE=REQ-PARTICIPANT;PARTSTAT=NEEDS-ACTION;RSVP=TRUE:");
        lines.push_str(a);
        lines.push_str("\r\n");
    }
    before_event_end(body, &lines)
}

/// An attendee's answer: its copy of the event with its own PARTSTAT set, and the
/// copy's stamps (the organizer's) replaced by `stamp` (the answer's own property line,
/// without its end) when there is one.
pub(crate) fn answer(copy: &str, me: &str, accept: bool, stamp: Option<&str>) -> String {
    let partstat = if accept { "ACCEPTED" } else { "DECLINED" };
    let text = ical::set_partstat(copy, me, partstat);
    let mut out = String::with_capacity(text.len() + 80);
    let mut placed = stamp.is_none();
    for line in ical::logical_lines(&text) {
        if is_stamp(&line) {
            continue;
        }
        if !placed && line.eq_ignore_ascii_case("END:VEVENT") {
            out.push_str(stamp.unwrap_or_default());
            out.push_str("\r\n");
            placed = true;
        }
        out.push_str(&line);
        out.push_str("\r\n");
    }
    out
}

fn is_stamp(line: &str) -> bool {
    let p = visibility::PROPERTY;
    line.get(..p.len())
        .is_some_and(|h| h.eq_ignore_ascii_case(p))
        && matches!(line.as_bytes().get(p.len()), Some(b':' | b';'))
}

/// What an iTIP message (RFC 5546) in an inbox is about.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Message {
    /// `REQUEST`, `REPLY`, `CANCEL`, ... as written, upper-cased.
    pub method: String,
    pub uid: String,
    pub organizer: Option<String>,
    /// The attendees it names, with the participation status it gives each.
    pub attendees: Vec<(String, Option<String>)>,
}

/// Read an inbox message; the error says what is wrong with it.
pub(crate) fn message(text: &str) -> Result<Message, String> {
    let method = ical::logical_lines(text)
        .into_iter()
        .find_map(|l| {
            let head = l.get(..7)?;
            head.eq_ignore_ascii_case("METHOD:")
                .then(|| l[7..].trim().to_ascii_uppercase())
        })
        .ok_or("no METHOD: not a scheduling message")?;
    let c = ical::parse(text).map_err(|e| e.to_string())?;
    Ok(Message {
        method,
        uid: c.uid,
        organizer: c.organizer,
        attendees: c
            .attendees
            .into_iter()
            .map(|a| (a.address, a.partstat))
            .collect(),
    })
}

/// An invitation a user has seen and not answered.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Pending {
    pub uid: String,
    /// Its organizer, when the organizer is one of the team's.
    pub organizer: Option<Who>,
}

/// One user's scheduling: where its messages arrive and its invitations' copies land,
/// who it may invite, and what it has not answered yet.
#[derive(Debug, Default)]
pub(crate) struct Scheduling {
    /// The schedule-inbox-URL's path.
    pub inbox: String,
    /// The schedule-outbox-URL's path, when the server gave one.
    pub outbox: Option<String>,
    /// The address it goes by.
    pub address: String,
    /// Its calendar: its invitations go there, and so do the copies of those it gets.
    pub calendar: String,
    /// Made by this user in set-up, and so deleted at the round's end.
    pub mine: bool,
    /// The team's members that schedule, this user among them.
    pub directory: Vec<Entry>,
    pending: VecDeque<Pending>,
    /// Messages read and not deleted yet: not read again.
    read: HashSet<String>,
    /// The same, oldest first, to delete.
    to_delete: VecDeque<String>,
    /// The UIDs of the invitations this user sent, whose answers it expects.
    organized: HashSet<String>,
    /// The invitations it sent and has not cancelled, oldest first.
    standing: VecDeque<Sent>,
    /// The invitations it has answered: a server that sends one again (DAViCal, when
    /// another attendee answers, before it has this one's answer) asks nothing new.
    answered: HashSet<String>,
}

/// An invitation a user sent: its event's UID and path, and whom it invited.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Sent {
    pub uid: String,
    pub path: String,
    pub audience: Arc<[Who]>,
}

impl Scheduling {
    /// A user's scheduling as set-up found it; its directory comes later.
    pub(crate) fn new(
        inbox: String,
        outbox: Option<String>,
        address: String,
        calendar: String,
        mine: bool,
    ) -> Self {
        Scheduling {
            inbox,
            outbox,
            address,
            calendar,
            mine,
            ..Scheduling::default()
        }
    }

    /// The members it may ask the free-busy time of: the others who schedule.
    pub(crate) fn others(&self, me: Who) -> Vec<&Entry> {
        self.directory.iter().filter(|e| e.who != me).collect()
    }

    /// The members it may invite: the others who read their inbox.
    pub(crate) fn invitees(&self, me: Who) -> Vec<&Entry> {
        self.directory
            .iter()
            .filter(|e| e.reads_inbox && e.who != me)
            .collect()
    }

    /// `k` of the invitees (all of them when `None`), drawn without repeats.
    pub(crate) fn draw<'a>(
        invitees: &[&'a Entry],
        k: Option<u32>,
        rng: &mut impl Rng,
    ) -> Vec<&'a Entry> {
        let mut pool = invitees.to_vec();
        let k = k.map_or(pool.len(), |k| (k as usize).min(pool.len()));
        for i in 0..k {
            let j = i + (rng.next_u64() % (pool.len() - i) as u64) as usize;
            pool.swap(i, j);
        }
        pool.truncate(k);
        pool
    }

    /// The member an address names, if one of the team's.
    pub(crate) fn who_is(&self, address: &str) -> Option<Who> {
        self.directory
            .iter()
            .find(|e| same_address(&e.address, address))
            .map(|e| e.who)
    }

    /// What an inbox message asks of this user: an invitation to answer (a REQUEST that
    /// names it as yet to answer, not pending already), or none; a CANCEL withdraws a
    /// pending one. An organizer's update keeps an answer given, and asks for none.
    pub(crate) fn received(&mut self, m: &Message, run_id: &str) {
        // Leftovers of another run (an inbox nobody emptied) ask nothing of this one:
        // this run's events carry its id in their UIDs.
        if !m.uid.contains(run_id) {
            return;
        }
        let asked = m.attendees.iter().any(|(a, p)| {
            same_address(a, &self.address)
                && p.as_deref()
                    .is_none_or(|p| p.eq_ignore_ascii_case("NEEDS-ACTION"))
        });
        let fresh = self.pending.len() < MAX_PENDING
            && !self.answered.contains(&m.uid)
            && !self.pending.iter().any(|p| p.uid == m.uid);
        match m.method.as_str() {
            "REQUEST" if asked && fresh => {
                let organizer = m.organizer.as_deref().and_then(|o| self.who_is(o));
                self.pending.push_back(Pending {
                    uid: m.uid.clone(),
                    organizer,
                });
            }
            "CANCEL" => self.pending.retain(|p| p.uid != m.uid),
            _ => {}
        }
    }

    /// Invitation `uid` was answered: it is not answered again.
    pub(crate) fn has_answered(&mut self, uid: &str) {
        if self.answered.len() < MAX_READ {
            self.answered.insert(uid.to_string());
        }
    }

    /// Whether an invitation waits for an answer.
    pub(crate) fn invited(&self) -> bool {
        !self.pending.is_empty()
    }

    /// The oldest invitation waiting for an answer.
    pub(crate) fn next_pending(&mut self) -> Option<Pending> {
        self.pending.pop_front()
    }

    /// An inbox listing's messages not read before. Only what lies inside the inbox is a
    /// message: whatever else a listing names (the inbox itself, a principal a server
    /// adds) is never fetched, and so never deleted.
    pub(crate) fn unread<'a>(&self, hrefs: impl Iterator<Item = &'a str>) -> Vec<String> {
        hrefs
            .filter(|h| h.len() > self.inbox.len() && h.starts_with(&self.inbox))
            .filter(|h| !self.read.contains(*h))
            .map(str::to_string)
            .collect()
    }

    /// An invitation this user sent.
    pub(crate) fn sent(&mut self, sent: Sent) {
        if self.organized.len() < MAX_READ {
            self.organized.insert(sent.uid.clone());
            self.standing.push_back(sent);
        }
    }

    /// The oldest invitation still standing, to cancel now.
    pub(crate) fn next_to_cancel(&mut self) -> Option<Sent> {
        self.standing.pop_front()
    }

    /// The cancellation a CANCEL of one of the team's invitations is: its organizer and
    /// the pick number it was stamped with (see [`cancel_seq`]).
    pub(crate) fn cancellation_in(&self, m: &Message) -> Option<(Who, u64)> {
        if m.method != "CANCEL" {
            return None;
        }
        let organizer = self.who_is(m.organizer.as_deref()?)?;
        Some((organizer, cancel_seq(&m.uid)))
    }

    /// The answers a REPLY without a stamp of ours carries: each attendee with an answer
    /// (a PARTSTAT other than NEEDS-ACTION) to one of this user's invitations, and the
    /// pick number its answer was stamped with. A REPLY names only the attendee who
    /// answers (RFC 5546), but DAViCal's list every attendee as the organizer's copy has
    /// them: those who answered before are named again, those who have not are not
    /// answers.
    pub(crate) fn answers_in(&self, m: &Message) -> Vec<(Who, u64)> {
        if m.method != "REPLY" || !self.organized.contains(&m.uid) {
            return Vec::new();
        }
        m.attendees
            .iter()
            .filter(|(_, p)| {
                p.as_deref()
                    .is_some_and(|p| !p.eq_ignore_ascii_case("NEEDS-ACTION"))
            })
            .filter_map(|(a, _)| self.who_is(a))
            .map(|w| (w, answer_seq(&m.uid)))
            .collect()
    }

    /// Messages fetched and read: deleted by this poll or a later one.
    pub(crate) fn fetched(&mut self, hrefs: &[String]) {
        for h in hrefs {
            if self.read.len() < MAX_READ && self.read.insert(h.clone()) {
                self.to_delete.push_back(h.clone());
            }
        }
    }

    /// The oldest message read and not yet deleted, to delete now.
    pub(crate) fn next_to_delete(&mut self) -> Option<String> {
        self.to_delete.pop_front()
    }

    /// Its DELETE came back: once deleted it is forgotten; else it stays read, and so
    /// is neither read again nor asked for again.
    pub(crate) fn deleted(&mut self, href: &str, ok: bool) {
        if ok {
            self.read.remove(href);
        }
    }
}

/// The pick number an answer to the invitation `uid` is stamped with: the same for the
/// attendee who writes it and the organizer who reads the REPLY, so that a server that
/// drops the stamp from the REPLY (DAViCal keeps no `X-` property in one) still lets
/// the organizer say whose answer it saw.
pub(crate) fn answer_seq(uid: &str) -> u64 {
    fnv_seq(b"answer", uid)
}

/// The pick number a cancellation of the invitation `uid` is stamped with: a DELETE has
/// no body to carry a stamp, so the attendee names it from the CANCEL's UID.
pub(crate) fn cancel_seq(uid: &str) -> u64 {
    fnv_seq(b"cancel", uid)
}

/// FNV-1a of `kind` and `uid`, in the range no pick and no set-up event reaches (bit 62
/// set, bit 63 clear).
fn fnv_seq(kind: &[u8], uid: &str) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in kind.iter().chain(b":").chain(uid.as_bytes()) {
        h ^= u64::from(*b);
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    (h | 1 << 62) & !(1 << 63)
}

/// A free-busy request (RFC 6638 §5.2, iTIP VFREEBUSY REQUEST) from `organizer` about
/// `attendees`, over `start` to `end` (iCalendar UTC times).
pub(crate) fn freebusy_request(
    uid: &str,
    organizer: &str,
    attendees: &[&str],
    start: &str,
    end: &str,
) -> String {
    let mut s = format!(
        "BEGIN:VCALENDAR\r\nVERSION:2.0\r\nPRODID:-//loadmix//client//EN\r\nMETHOD:REQUEST\r\n\
         BEGIN:VFREEBUSY\r\nUID:{uid}\r\nDTSTAMP:{start}\r\nDTSTART:{start}\r\nDTEND:{end}\r\n\
         ORGANIZER:{organizer}\r\n"
    );
    for a in attendees {
        s.push_str("ATTENDEE:");
        s.push_str(a);
        s.push_str("\r\n");
    }
    s.push_str("END:VFREEBUSY\r\nEND:VCALENDAR\r\n");
    s
}

/// What a `schedule-response` says of each recipient: its address and request status;
/// an error when the body is not one.
pub(crate) fn schedule_response(root: &El) -> Result<Vec<(String, String)>, String> {
    if !root.is(CALDAV, "schedule-response") {
        return Err(format!("{} instead of a schedule-response", root.name));
    }
    Ok(root
        .children_named(CALDAV, "response")
        .map(|r| {
            let who = r
                .child(CALDAV, "recipient")
                .and_then(|p| p.child(DAV, "href"))
                .map_or(String::new(), |h| h.text.trim().to_string());
            let status = r
                .child(CALDAV, "request-status")
                .map_or(String::new(), |s| s.text.trim().to_string());
            (who, status)
        })
        .collect())
}

/// The audience of an invitation: its attendees.
pub(crate) fn audience_of(invited: &[&Entry]) -> Arc<[Who]> {
    invited.iter().map(|e| e.who).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ledger::Producer;

    fn who(vu: u32) -> Who {
        Producer {
            class: 0,
            round: 1,
            vu,
        }
    }

    fn entry(vu: u32, reads_inbox: bool) -> Entry {
        Entry {
            who: who(vu),
            address: format!("mailto:u{vu}@example.com"),
            reads_inbox,
        }
    }

    #[test]
    fn the_address_is_the_first_mailto_of_the_set() {
        let body = r#"<d:multistatus xmlns:d="DAV:" xmlns:c="urn:ietf:params:xml:ns:caldav"><d:response><d:href>/p/</d:href><d:propstat><d:prop><c:calendar-user-address-set><d:href>/p/u1/</d:href><d:href>MAILTO:u1@example.com</d:href></c:calendar-user-address-set></d:prop><d:status>HTTP/1.1 200 OK</d:status></d:propstat></d:response></d:multistatus>"#;
        let root = crate::formats::xml::parse(body).unwrap();
        assert_eq!(address_of(&root).unwrap(), "MAILTO:u1@example.com");
        assert!(same_address(
            "MAILTO:u1@example.com",
            "mailto:U1@example.com"
        ));
        assert!(same_address("u1@example.com", "mailto:u1@example.com"));
        assert!(!same_address(
            "mailto:u1@example.com",
            "mailto:u10@example.com"
        ));
    }

    #[test]
    fn an_invitation_round_trips_to_an_answer_that_carries_its_own_stamp() {
        let ev = "BEGIN:VCALENDAR\r\nBEGIN:VEVENT\r\nUID:e1\r\nDTSTART:20070101T100000Z\r\nX-LOADMIX-STAMP:r/0.1.0/5/5\r\nEND:VEVENT\r\nEND:VCALENDAR\r\n";
        let inv = invitation(
            ev.into(),
            "mailto:u0@example.com",
            &["mailto:u1@example.com", "mailto:u2@example.com"],
        );
        let m = message(&ical::with_method(&inv, "REQUEST")).unwrap();
        assert_eq!(m.method, "REQUEST");
        assert_eq!(m.organizer.as_deref(), Some("mailto:u0@example.com"));
        assert_eq!(m.attendees.len(), 3);
        let a = answer(
            &inv,
            "mailto:u1@example.com",
            true,
            Some("X-LOADMIX-STAMP:r/0.1.1/7/7"),
        );
        assert!(a.contains("PARTSTAT=ACCEPTED:mailto:u1@example.com"));
        assert!(a.contains("PARTSTAT=NEEDS-ACTION;RSVP=TRUE:mailto:u2@example.com"));
        let stamps: Vec<&str> = visibility::stamps_in(&a).iter().map(|v| v.trim()).collect();
        assert_eq!(stamps, vec!["r/0.1.1/7/7"]);
        let declined = answer(&inv, "mailto:u2@example.com", false, None);
        assert!(declined.contains("PARTSTAT=DECLINED:mailto:u2@example.com"));
        assert!(visibility::stamps_in(&declined).is_empty());
        assert!(message(ev).unwrap_err().contains("METHOD"));
        assert!(message("METHOD:REQUEST\r\ngarbage").is_err());
    }

    #[test]
    fn requests_wait_for_an_answer_until_cancelled() {
        let mut s = Scheduling {
            address: "mailto:u1@example.com".into(),
            directory: vec![entry(0, false), entry(1, true), entry(2, true)],
            ..Scheduling::default()
        };
        let req = |uid: &str, method: &str| Message {
            method: method.into(),
            uid: format!("lm-run-a-{uid}"),
            organizer: Some("mailto:U0@example.com".into()),
            attendees: vec![("mailto:u1@example.com".into(), None)],
        };
        s.received(&req("a", "REQUEST"), "run-a");
        s.received(&req("a", "REQUEST"), "run-a");
        s.received(&req("b", "REQUEST"), "run-a");
        s.received(&req("c", "REPLY"), "run-a");
        s.received(
            &Message {
                attendees: vec![("mailto:u2@example.com".into(), None)],
                ..req("d", "REQUEST")
            },
            "run-a",
        );
        // An update of one already answered.
        s.received(
            &Message {
                attendees: vec![("mailto:u1@example.com".into(), Some("ACCEPTED".into()))],
                ..req("e", "REQUEST")
            },
            "run-a",
        );
        // Another run's leftover.
        s.received(&req("f", "REQUEST"), "run-b");
        s.received(&req("b", "CANCEL"), "run-a");
        assert!(s.invited());
        let p = s.next_pending().unwrap();
        assert_eq!((p.uid.as_str(), p.organizer), ("lm-run-a-a", Some(who(0))));
        assert!(s.next_pending().is_none());
        // Sent again once answered, as DAViCal does: nothing new to answer.
        s.has_answered("lm-run-a-a");
        s.received(&req("a", "REQUEST"), "run-a");
        assert!(!s.invited());
        // Who is invited: the inbox readers but oneself.
        let inv = s.invitees(who(1));
        assert_eq!(inv.len(), 1);
        let mut rng = <rand::rngs::Xoshiro256PlusPlus as rand::SeedableRng>::seed_from_u64(1);
        let all = [entry(3, true), entry(4, true), entry(5, true)];
        let refs: Vec<&Entry> = all.iter().collect();
        let two = Scheduling::draw(&refs, Some(2), &mut rng);
        assert_eq!(two.len(), 2);
        assert_ne!(two[0].who, two[1].who);
        assert_eq!(Scheduling::draw(&refs, None, &mut rng).len(), 3);
        assert_eq!(Scheduling::draw(&refs, Some(9), &mut rng).len(), 3);
    }

    #[test]
    fn a_stampless_reply_names_the_answer_by_its_invitation() {
        let mut s = Scheduling {
            address: "mailto:u0@example.com".into(),
            directory: vec![
                entry(0, false),
                entry(1, true),
                entry(2, true),
                entry(3, true),
            ],
            ..Scheduling::default()
        };
        let reply = |uid: &str| Message {
            method: "REPLY".into(),
            uid: uid.into(),
            organizer: Some("mailto:u0@example.com".into()),
            attendees: vec![
                ("mailto:U1@example.com".into(), Some("ACCEPTED".into())),
                ("mailto:u2@example.com".into(), Some("NEEDS-ACTION".into())),
                ("mailto:u3@example.com".into(), None),
            ],
        };
        assert!(s.answers_in(&reply("m1")).is_empty(), "not one of ours");
        s.sent(Sent {
            uid: "m1".into(),
            path: "/c/m1.ics".into(),
            audience: Arc::from(vec![who(1)]),
        });
        assert_eq!(s.answers_in(&reply("m1")), [(who(1), answer_seq("m1"))]);
        let q = answer_seq("m1");
        assert!((1 << 62..1 << 63).contains(&q));
        assert_ne!(q, answer_seq("m2"));
        assert_ne!(q, cancel_seq("m1"));
        // The organizer cancels; its attendees name the cancellation from the CANCEL.
        assert_eq!(s.next_to_cancel().unwrap().uid, "m1");
        assert!(s.next_to_cancel().is_none());
        let cancel = Message {
            method: "CANCEL".into(),
            ..reply("m1")
        };
        assert_eq!(s.cancellation_in(&cancel), Some((who(0), cancel_seq("m1"))));
        assert_eq!(s.cancellation_in(&reply("m1")), None);
    }

    #[test]
    fn a_free_busy_request_and_its_answer_per_recipient() {
        let r = freebusy_request(
            "fb-1",
            "mailto:u0@example.com",
            &["mailto:u1@example.com"],
            "20070101T000000Z",
            "20070108T000000Z",
        );
        assert!(ical::parse_freebusy_request(&r).is_ok(), "{r}");
        let body = r#"<C:schedule-response xmlns:D="DAV:" xmlns:C="urn:ietf:params:xml:ns:caldav"><C:response><C:recipient><D:href>mailto:u1@example.com</D:href></C:recipient><C:request-status>2.0;Success</C:request-status></C:response><C:response><C:recipient><D:href>mailto:x@example.com</D:href></C:recipient><C:request-status>3.7;Invalid calendar user</C:request-status></C:response></C:schedule-response>"#;
        let root = crate::formats::xml::parse(body).unwrap();
        let got = schedule_response(&root).unwrap();
        assert_eq!(got.len(), 2);
        assert_eq!(
            got[0],
            ("mailto:u1@example.com".into(), "2.0;Success".into())
        );
        assert!(got[1].1.starts_with("3.7"));
        let other = crate::formats::xml::parse("<a/>").unwrap();
        assert!(schedule_response(&other).is_err());
    }

    #[test]
    fn messages_read_are_deleted_a_batch_a_poll_and_never_read_twice() {
        // A poll's listing, fetch and deletes are answers its one sample holds.
        const { assert!(2 + DELETES_PER_POLL <= 1 + crate::metrics::PRIOR_ANSWERS) };
        let mut s = Scheduling {
            inbox: "/i/".into(),
            ..Scheduling::default()
        };
        let listed = ["/i/", "/i/a", "/i/b", "/", "/p/u1/", "/i"];
        let new = s.unread(listed.into_iter());
        assert_eq!(new, ["/i/a", "/i/b"]);
        s.fetched(&new);
        assert!(s.unread(listed.into_iter()).is_empty());
        let a = s.next_to_delete().unwrap();
        s.deleted(&a, true);
        let b = s.next_to_delete().unwrap();
        s.deleted(&b, false);
        assert!(s.next_to_delete().is_none());
        // The one deleted is gone; the one whose DELETE failed is not read again.
        assert!(s.unread(["/i/a", "/i/b"].into_iter()) == ["/i/a"]);
    }
}
