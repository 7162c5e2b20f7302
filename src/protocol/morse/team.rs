//! Cosmo's shared collections for a team: the owner publishes one with a read-write
//! ticket, members reach it with the ticket, and every user syncs and updates it with
//! stamped items so the others' syncs say when they first saw each write.

use bytes::Bytes;
use hyper::header::{HeaderName, HeaderValue};
use rand::Rng;
use rand::rngs::Xoshiro256PlusPlus;

use super::publish::publish_with;
use super::{Collection, MorseClass, MorseVu, Picked, TICKET, TOKEN, eim_header, token_of};
use crate::formats::eim;
use crate::protocol::contract::Done;
use crate::protocol::session::{Exchange, Session};
use crate::protocol::teams::{Board, Membership, Shared};
use crate::protocol::{Outcome, SetupError, Stage, VuIds, data};
use crate::transport::Conn;
use crate::visibility::Audience;

/// `Ticket:` with the team's key, for a member (the owner uses its credentials).
pub(crate) fn ticket_header(ticket: &Option<HeaderValue>) -> Option<(HeaderName, HeaderValue)> {
    ticket.clone().map(|v| (HeaderName::from_static(TICKET), v))
}

/// Where a user of a team (Morse Code or Atom) works once set up: the shared collection's
/// uid; for its owner, the items it published with it and its first token; for a member,
/// the ticket that opens it.
pub(crate) struct Joined {
    pub(crate) uid: String,
    pub(crate) items: Vec<String>,
    pub(crate) token: Option<String>,
    pub(crate) ticket: Option<HeaderValue>,
}

/// Take a place in the team's shared collection (set-up, untimed): the owner publishes it
/// (`n + 1` items, unstamped: the collection before the clock) asking for a read-write
/// ticket, and says where it is and the ticket; a member waits to hear both. A failure on
/// either side fails the members' set-up too, in the owner's words.
pub(crate) async fn join_shared(
    s: &Session,
    ids: &VuIds,
    conn: &mut Conn,
    team: &Membership,
    board: &Board,
    rng: &mut Xoshiro256PlusPlus,
    n: usize,
) -> Result<Joined, SetupError> {
    let key = team.key();
    // Every user's set-up runs at once: each side waits at most this long.
    let timeouts = conn.timeouts();
    let until = tokio::time::Instant::now() + 4 * (timeouts.connect + timeouts.request);
    if !team.seat.owner {
        let shared = board
            .shared(key, until)
            .await
            .map_err(|answer| SetupError {
                stage: Stage::Team,
                request: "the shared collection of the team's owner".into(),
                answer,
            })?;
        let ticket = shared
            .ticket
            .as_deref()
            .and_then(|k| HeaderValue::from_str(k).ok());
        return Ok(Joined {
            uid: shared.path,
            items: Vec::new(),
            token: None,
            ticket,
        });
    }
    let (o, p) = publish_with(s, ids, conn, rng, n, &[201], true).await;
    let Some(p) = p.filter(|_| o.is_ok()) else {
        let e = SetupError {
            stage: Stage::Team,
            request: format!(
                "PUT {}/mc/collection/… asking for a read-write ticket",
                s.context
            ),
            answer: o.detail.unwrap_or_else(|| o.answer.to_string()),
        };
        board.publish(key, Err(e.to_string()));
        return Err(e);
    };
    let shared = Shared {
        path: p.uid.clone(),
        ticket: p.ticket,
    };
    board.publish(key, Ok(shared));
    Ok(Joined {
        uid: p.uid,
        items: p.items,
        token: Some(p.token),
        ticket: None,
    })
}

/// What a team member's update sends: its EIMML, the stamps it carries (the new item's,
/// then the changed one's), and the new item.
pub(super) struct Changes {
    doc: Bytes,
    stamps: Vec<crate::visibility::Stamp>,
    new_uid: String,
}

/// A team's collection: joining it in set-up, and the reads and writes that are stamped.
impl MorseVu {
    /// Take this user's place in its team (set-up, untimed) and, for a member, read the
    /// collection with the ticket for its first token.
    pub(super) async fn join_team(&mut self, conn: &mut Conn) -> Result<(), SetupError> {
        let Some(t) = &self.team else {
            return Ok(());
        };
        let mut rng =
            <Xoshiro256PlusPlus as rand::SeedableRng>::seed_from_u64(u64::from(self.ids.vu));
        let n = self.class.params.collection_size.sample(&mut rng).max(1.0) as usize;
        let board = self.class.board.clone();
        let j = join_shared(&self.s, &self.ids, conn, t, &board, &mut rng, n).await?;
        self.ticket = j.ticket;
        match j.token {
            Some(token) => {
                self.cols.push(Collection {
                    uid: j.uid,
                    items: j.items,
                    tokens: vec![token],
                    owned: true,
                });
                Ok(())
            }
            None => self.subscribe_shared(conn, j.uid).await,
        }
    }

    /// A member's side: the whole collection read with the ticket, for its first token.
    pub(super) async fn subscribe_shared(
        &mut self,
        conn: &mut Conn,
        uid: String,
    ) -> Result<(), SetupError> {
        let path = format!("{}/mc/collection/{uid}", self.s.context);
        let fail = |answer: String| SetupError {
            stage: Stage::Team,
            request: format!("GET {path} with the team's ticket"),
            answer,
        };
        let headers: Vec<_> = ticket_header(&self.ticket).into_iter().collect();
        let r = match self
            .s
            .send(conn, "GET", &path, &headers, Bytes::new())
            .await
        {
            Exchange::Answer(r) => r,
            Exchange::Failed(o) => return Err(fail(o.detail.unwrap_or_default())),
        };
        if r.status.as_u16() != 200 {
            return Err(fail(r.status.to_string()));
        }
        let Some(token) = token_of(&r) else {
            return Err(fail("200 without an X-MorseCode-SyncToken".into()));
        };
        self.cols.push(Collection {
            uid,
            items: Vec::new(),
            tokens: vec![token],
            owned: false,
        });
        Ok(())
    }

    /// The ticket and, for a sync, the newest token the user holds of collection `ci`.
    pub(super) fn shared_headers(&self, ci: usize, sync: bool) -> Vec<(HeaderName, HeaderValue)> {
        let mut headers: Vec<_> = ticket_header(&self.ticket).into_iter().collect();
        let newest = self.cols[ci].tokens.last();
        if let Some(v) = newest
            .filter(|_| sync)
            .and_then(|t| HeaderValue::from_str(t).ok())
        {
            headers.push((HeaderName::from_static(TOKEN), v));
        }
        headers
    }

    /// A sync (with the newest token: what changed since this user last looked) or a
    /// subscribe (everything) of the team's collection, observed under `label`.
    pub(super) async fn team_fetch(
        &mut self,
        conn: &mut Conn,
        picked: Picked<'_>,
        sync: bool,
        label: u16,
    ) -> Outcome {
        let Picked { ci, path, expect } = picked;
        let headers = self.shared_headers(ci, sync);
        if let Some(t) = &mut self.team {
            t.watch(label, sync);
        }
        let o = self.read_shared(conn, ci, path, expect, &headers).await;
        if let Some(t) = &mut self.team {
            t.done();
        }
        o
    }

    /// GET the team's collection: the answer must be EIMML with a token, which becomes
    /// the user's newest; the stamps in its items are noted by the observation under way.
    pub(super) async fn read_shared(
        &mut self,
        conn: &mut Conn,
        ci: usize,
        path: &str,
        expect: &[u16],
        headers: &[(HeaderName, HeaderValue)],
    ) -> Outcome {
        let r = match self.s.send(conn, "GET", path, headers, Bytes::new()).await {
            Exchange::Answer(r) => r,
            Exchange::Failed(o) => return o,
        };
        if let Some(t) = &mut self.team {
            t.answered();
        }
        let o = Outcome::of(&r, expect, &format!("GET {path}"));
        if !o.is_ok() {
            return o;
        }
        let parsed = std::str::from_utf8(&r.body)
            .map_err(|e| e.to_string())
            .and_then(|t| eim::parse_eimml(t).map_err(|e| e.to_string()));
        let e = match parsed {
            Ok(e) => e,
            Err(m) => return o.body_error(format!("GET {path}: not EIMML: {m}")),
        };
        let Some(token) = token_of(&r) else {
            return o.body_error(format!(
                "GET {path}: no X-MorseCode-SyncToken in the answer"
            ));
        };
        if let Some(t) = &mut self.team {
            let items = e.recordsets.iter().filter_map(|(_, r)| r.as_deref());
            t.read_records(items.flatten());
        }
        self.cols[ci].tokens = vec![token];
        o
    }

    /// An update of the team's collection (pick `seq`): a new item and one of this
    /// user's own changed, each stamped. Refused because another changed the collection
    /// first (205) or is changing it (423), it syncs, as a client must, and sends the
    /// same once more, every request counted; refused again, it is contention
    /// (`update_contended`), not a failure.
    pub(super) async fn team_update(
        &mut self,
        class: &MorseClass,
        conn: &mut Conn,
        rng: &mut Xoshiro256PlusPlus,
        picked: Picked<'_>,
        seq: u64,
        label: u16,
    ) -> Done {
        let Picked { ci, path, expect } = picked;
        let Some(c) = self.team_changes(rng, ci, seq) else {
            return Done::Skipped;
        };
        let (first, status) = self.post_shared(conn, ci, path, &c.doc, expect).await;
        let (o, status) = match status {
            Some(205 | 423) => {
                self.update_again(class, conn, picked, label, first, &c.doc)
                    .await
            }
            _ => (first, status),
        };
        if o.is_ok() && status == Some(204) {
            self.wrote(c, label);
        }
        Done::Sent(o)
    }

    /// After a refused update: a sync (observed under the update's label: it shows the
    /// user the others' changes), then the same update once more. A second refusal is
    /// contention, labelled so, and not a failure.
    pub(super) async fn update_again(
        &mut self,
        class: &MorseClass,
        conn: &mut Conn,
        picked: Picked<'_>,
        label: u16,
        first: Outcome,
        doc: &Bytes,
    ) -> (Outcome, Option<u16>) {
        let Picked { ci, path, expect } = picked;
        let headers = self.shared_headers(ci, true);
        if let Some(t) = &mut self.team {
            t.watch(label, true);
        }
        let mut synced = self.read_shared(conn, ci, path, &[200], &headers).await;
        if let Some(t) = &mut self.team {
            t.done();
        }
        synced.add_cost(&first);
        if !synced.is_ok() {
            return (synced, None);
        }
        let contended: Vec<u16> = expect.iter().copied().chain([205, 423]).collect();
        let (mut again, status) = self.post_shared(conn, ci, path, doc, &contended).await;
        again.add_cost(&synced);
        if matches!(status, Some(205 | 423)) && !expect.contains(&status.unwrap_or(0)) {
            again.label = class.params.label_update_contended;
        }
        (again, status)
    }

    /// POST `doc` to the team's collection with the newest token (and the ticket); a
    /// 204's token becomes the newest. The outcome and the status that came back.
    pub(super) async fn post_shared(
        &mut self,
        conn: &mut Conn,
        ci: usize,
        path: &str,
        doc: &Bytes,
        expect: &[u16],
    ) -> (Outcome, Option<u16>) {
        let mut headers = self.shared_headers(ci, true);
        headers.push(eim_header());
        let r = match self.s.send(conn, "POST", path, &headers, doc.clone()).await {
            Exchange::Answer(r) => r,
            Exchange::Failed(o) => return (o, None),
        };
        let status = r.status.as_u16();
        let o = Outcome::of(&r, expect, &format!("POST {path}"));
        if status != 204 || !o.is_ok() {
            return (o, Some(status));
        }
        match token_of(&r) {
            Some(t) => self.cols[ci].tokens = vec![t],
            None => {
                let why = format!("POST {path}: no X-MorseCode-SyncToken in the answer");
                return (o.body_error(why), Some(status));
            }
        }
        (o, Some(status))
    }

    /// What update `seq` of collection `ci` sends: a new item, and one of the user's own
    /// changed when it has one. It deletes nothing: a tombstone carries no stamp, so the
    /// earlier writes of the item it deleted could no longer be told superseded from
    /// lost for whoever had not looked yet.
    pub(super) fn team_changes(
        &self,
        rng: &mut Xoshiro256PlusPlus,
        ci: usize,
        seq: u64,
    ) -> Option<Changes> {
        let t = self.team.as_ref()?;
        let stamped = |rng: &mut Xoshiro256PlusPlus, uid: &str, stamp| {
            let mut records = data::eim_records(rng, uid, &self.s.user, true);
            stamp_note(&mut records, &t.stamp_line(&stamp));
            (uid.to_string(), Some(records))
        };
        let new_uid = data::uid(rng, &self.ids.run_id);
        let fresh = t.stamp(seq, seq);
        let mut sets: Vec<eim::Recordset> = vec![stamped(rng, &new_uid, fresh)];
        let mut stamps = vec![fresh];
        let changed = (!self.mine.is_empty())
            .then(|| self.mine[(rng.next_u64() % self.mine.len() as u64) as usize].clone());
        if let Some((uid, event)) = &changed {
            let stamp = t.stamp(seq | crate::visibility::SECOND_ITEM, *event);
            sets.push(stamped(rng, uid, stamp));
            stamps.push(stamp);
        }
        let doc = eim::write_eimml(
            &self.cols[ci].uid,
            "",
            sets.iter().map(|(u, r)| (u.as_str(), r.as_deref())),
        );
        Some(Changes {
            doc: Bytes::from(doc),
            stamps,
            new_uid,
        })
    }

    /// An update the server took: its stamps noted as writes the whole team should see,
    /// and its items the user's own.
    pub(super) fn wrote(&mut self, c: Changes, label: u16) {
        let Some(t) = &mut self.team else {
            return;
        };
        let (team, at) = (t.team(), crate::visibility::now_us());
        for stamp in &c.stamps {
            t.book.wrote(*stamp, team, Audience::Team, label, at);
        }
        let event = c.stamps.first().map_or(0, |s| s.event);
        self.mine.push((c.new_uid, event));
    }
}

/// A stamp's line added to the note's body, on a line of its own.
pub(super) fn stamp_note(records: &mut [eim::Record], line: &str) {
    let body = records
        .iter_mut()
        .filter(|r| r.ns == eim::NOTE_NS)
        .flat_map(|r| r.fields.iter_mut())
        .find(|f| f.name == "body");
    if let Some(f) = body {
        let v = f.value.get_or_insert_with(String::new);
        v.push('\n');
        v.push_str(line);
        v.push('\n');
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(ns: &str, fields: &[(&str, Option<&str>)]) -> eim::Record {
        eim::Record {
            prefix: "x".into(),
            ns: ns.into(),
            fields: fields
                .iter()
                .map(|(name, value)| eim::Field {
                    name: (*name).into(),
                    ty: "text".into(),
                    key: false,
                    value: value.map(str::to_string),
                })
                .collect(),
        }
    }

    #[test]
    fn a_stamp_goes_into_the_notes_body_and_nowhere_else() {
        let mut records = vec![
            record("urn:other", &[("body", Some("untouched"))]),
            record(
                eim::NOTE_NS,
                &[("icalUid", Some("u1")), ("body", Some("hello"))],
            ),
        ];
        stamp_note(&mut records, "loadmix-stamp 7");
        assert_eq!(records[0].fields[0].value.as_deref(), Some("untouched"));
        assert_eq!(
            records[1].fields[1].value.as_deref(),
            Some("hello\nloadmix-stamp 7\n")
        );
        // An empty body gets the stamp alone; a note without a body is left as it is.
        let mut empty = vec![record(eim::NOTE_NS, &[("body", None)])];
        stamp_note(&mut empty, "s");
        assert_eq!(empty[0].fields[0].value.as_deref(), Some("\ns\n"));
        let mut bodiless = vec![record(eim::NOTE_NS, &[("icalUid", Some("u"))])];
        stamp_note(&mut bodiless, "s");
        assert_eq!(bodiless[0].fields[0].value.as_deref(), Some("u"));
    }
}
