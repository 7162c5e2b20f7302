//! A Morse Code user's own collection: syncs and subscribes (answers checked as EIMML),
//! updates with an occasional tombstone, and deletes.

use bytes::Bytes;
use hyper::header::{HeaderName, HeaderValue};
use rand::Rng;
use rand::rngs::Xoshiro256PlusPlus;

use super::{MorseClass, MorseVu, Picked, TOKEN, eim_header, token_of};
use crate::formats::eim;
use crate::protocol::contract::Done;
use crate::protocol::session::Exchange;
use crate::protocol::{Outcome, data};
use crate::transport::Conn;

impl MorseVu {
    /// A sync (with a token the user holds: the newest one `no_change_sync` of the time,
    /// reported as `sync_no_change`) or a subscribe (no token: the whole collection); the
    /// answer must be EIMML.
    pub(super) async fn fetch(
        &mut self,
        class: &MorseClass,
        conn: &mut Conn,
        rng: &mut Xoshiro256PlusPlus,
        picked: Picked<'_>,
        sync: bool,
    ) -> Outcome {
        let Picked { ci, path, expect } = picked;
        let mut label = None;
        let mut headers = Vec::new();
        if sync {
            let col = &self.cols[ci];
            let token = if data::chance(rng, class.params.no_change_sync) {
                label = Some(class.params.label_sync_no_change);
                col.tokens.last()
            } else {
                col.tokens
                    .get((rng.next_u64() % col.tokens.len() as u64) as usize)
            };
            if let Some(v) = token.and_then(|t| HeaderValue::from_str(t).ok()) {
                headers.push((HeaderName::from_static(TOKEN), v));
            }
        }
        let r = match self.s.send(conn, "GET", path, &headers, Bytes::new()).await {
            Exchange::Answer(r) => r,
            Exchange::Failed(mut o) => {
                o.label = label;
                return o;
            }
        };
        let mut o = Outcome::of(&r, expect, &format!("GET {path}"));
        o.label = label;
        if o.is_ok() {
            let parsed = std::str::from_utf8(&r.body)
                .map_err(|e| e.to_string())
                .and_then(|t| eim::check_eimml(t).map_err(String::from));
            if let Err(m) = parsed {
                return o.body_error(format!("GET {path}: not EIMML: {m}"));
            }
        }
        o
    }

    /// One changed and one new item, and a third of the time a tombstone, posted with the
    /// newest token; the answer's token and items become the user's.
    pub(super) async fn update(
        &mut self,
        class: &MorseClass,
        conn: &mut Conn,
        rng: &mut Xoshiro256PlusPlus,
        picked: Picked<'_>,
    ) -> Done {
        let Picked { ci, path, expect } = picked;
        let col = &self.cols[ci];
        let Some(token) = col
            .tokens
            .last()
            .and_then(|t| HeaderValue::from_str(t).ok())
        else {
            return Done::Skipped;
        };
        let mut sets: Vec<eim::Recordset> = Vec::with_capacity(3);
        let changed = (!col.items.is_empty())
            .then(|| col.items[(rng.next_u64() % col.items.len() as u64) as usize].clone());
        if let Some(c) = &changed {
            let records = data::eim_records(rng, c, &self.s.user, true);
            sets.push((c.clone(), Some(records)));
        }
        let new_uid = data::uid(rng, &self.ids.run_id);
        let records = data::eim_records(rng, &new_uid, &self.s.user, true);
        sets.push((new_uid.clone(), Some(records)));
        let mut deleted = None;
        if col.items.len() > 5 && data::chance(rng, class.params.tombstone) {
            let candidates: Vec<&String> = col
                .items
                .iter()
                .filter(|u| Some(*u) != changed.as_ref())
                .collect();
            let d = candidates[(rng.next_u64() % candidates.len() as u64) as usize].clone();
            sets.push((d.clone(), None));
            deleted = Some(d);
        }
        let doc = eim::write_eimml(
            &col.uid,
            "",
            sets.iter().map(|(u, r)| (u.as_str(), r.as_deref())),
        );
        let headers = [eim_header(), (HeaderName::from_static(TOKEN), token)];
        let r = match self
            .s
            .send(conn, "POST", path, &headers, Bytes::from(doc))
            .await
        {
            Exchange::Answer(r) => r,
            Exchange::Failed(o) => return Done::Sent(o),
        };
        let o = Outcome::of(&r, expect, &format!("POST {path}"));
        if !o.is_ok() {
            return Done::Sent(o);
        }
        let Some(t) = token_of(&r) else {
            return Done::Sent(o.body_error(format!(
                "POST {path}: no X-MorseCode-SyncToken in the answer"
            )));
        };
        let col = &mut self.cols[ci];
        col.tokens.push(t);
        col.items.push(new_uid);
        if let Some(d) = deleted {
            col.items.retain(|u| *u != d);
        }
        Done::Sent(o)
    }

    /// Delete the collection; it is no longer the user's.
    pub(super) async fn delete(&mut self, conn: &mut Conn, picked: Picked<'_>) -> Outcome {
        let Picked { ci, path, expect } = picked;
        let r = match self.s.send(conn, "DELETE", path, &[], Bytes::new()).await {
            Exchange::Answer(r) => r,
            Exchange::Failed(o) => return o,
        };
        let o = Outcome::of(&r, expect, &format!("DELETE {path}"));
        if o.is_ok() {
            self.cols.remove(ci);
        }
        o
    }
}
