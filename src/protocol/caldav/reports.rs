//! What a CalDAV user reads of its calendars: time-range reports, multigets, PROPFIND,
//! sync-collection (initial, then incremental; a refused token a full resync) with the
//! changed events fetched, and what a shared calendar's answers reveal of the team's
//! writes.

use bytes::Bytes;
use rand::Rng;
use rand::rngs::Xoshiro256PlusPlus;

use crate::formats::dav::{DAV, Multistatus, href_path};
use crate::formats::xml::XmlWriter;
use crate::protocol::contract::Done;
use crate::protocol::session::Exchange;
use crate::protocol::{Outcome, data};
use crate::transport::{Conn, Response};

use super::{
    CaldavClass, CaldavVu, FETCH_CHUNK, MAX_FETCH, MAX_OTHERS, depth, event_query, multiget_body,
    multistatus_outcome, xml_ct,
};

impl CaldavVu {
    /// A `calendar-query` for the events of a window of `range` in 2007.
    pub(super) async fn time_range_report(
        &mut self,
        conn: &mut Conn,
        rng: &mut Xoshiro256PlusPlus,
        ci: usize,
        range: &crate::workload::Dist,
        expect: &[u16],
    ) -> Outcome {
        let len = chrono::Duration::microseconds(range.sample(rng) as i64);
        let (start, end) = data::week(rng, len);
        let f = "%Y%m%dT%H%M%SZ";
        let (start, end) = (start.format(f).to_string(), end.format(f).to_string());
        let body = event_query(|w| {
            w.empty("C:time-range", &[("start", &start), ("end", &end)]);
        });
        self.report(conn, ci, body, expect).await.0
    }

    /// A `calendar-multiget` of `count` of the calendar's events, from a random one on.
    pub(super) async fn multiget(
        &mut self,
        conn: &mut Conn,
        rng: &mut Xoshiro256PlusPlus,
        ci: usize,
        count: u32,
        expect: &[u16],
    ) -> Done {
        let cal = &self.cals[ci];
        let known: Vec<&str> = cal
            .events
            .iter()
            .map(|e| e.path.as_str())
            .chain(cal.others.iter().map(String::as_str))
            .collect();
        if known.is_empty() {
            return Done::Skipped;
        }
        let n = (count as usize).min(known.len());
        let start = (rng.next_u64() % known.len() as u64) as usize;
        let body = multiget_body((0..n).map(|i| known[(start + i) % known.len()]));
        self.report(conn, ci, body, expect).await.0.into()
    }

    /// A `sync-collection` from the calendar's token; a token the server no longer knows
    /// is started over from scratch, both requests counted, as `sync_collection_resync`.
    pub(super) async fn sync_collection(
        &mut self,
        conn: &mut Conn,
        ci: usize,
        class: &CaldavClass,
        expect: &[u16],
    ) -> Outcome {
        let token = self.cals[ci].sync_token.clone().unwrap_or_default();
        let (o, rejected) = self.sync(conn, ci, &token, expect).await;
        if !rejected {
            return self.fetch_changes(conn, ci, o).await;
        }
        // The server no longer knows the token: start over, as a client must. A full
        // listing repeats what earlier syncs reported without being a duplicate.
        if let Some(l) = self.team.as_mut().and_then(|t| t.watching.as_mut()) {
            l.news = false;
        }
        let (mut again, _) = self.sync(conn, ci, "", expect).await;
        again.add_cost(&o);
        again.label = Some(class.params.label_resync);
        self.fetch_changes(conn, ci, again).await
    }

    /// After a sync of a shared calendar, the others' events it said changed fetched
    /// with `calendar-multiget`, as a client does, each request counted in the sync's
    /// outcome; at most [`MAX_FETCH`], [`FETCH_CHUNK`] a request.
    pub(super) async fn fetch_changes(
        &mut self,
        conn: &mut Conn,
        ci: usize,
        mut o: Outcome,
    ) -> Outcome {
        let changed = std::mem::take(&mut self.changed);
        for chunk in changed.chunks(FETCH_CHUNK) {
            if !o.is_ok() {
                break;
            }
            let body = multiget_body(chunk.iter().map(String::as_str));
            let mut f = match self.send_report(conn, ci, body).await {
                Ok((r, path)) => {
                    let what = format!("REPORT calendar-multiget {path}");
                    let (f, m) = multistatus_outcome(&r, Outcome::of(&r, &[207], &what), &what);
                    if let (Some(m), Some(t)) = (&m, &mut self.team) {
                        t.read_all(m);
                    }
                    f
                }
                Err(f) => f,
            };
            f.add_cost(&o);
            f.label = o.label;
            o = f;
        }
        o
    }

    /// PROPFIND depth 1 on calendar `ci`; the answer must be a multistatus.
    pub(super) async fn propfind(&mut self, conn: &mut Conn, ci: usize, expect: &[u16]) -> Outcome {
        let path = self.cals[ci].path.clone();
        let mut w = XmlWriter::new();
        w.open("D:propfind", &[("xmlns:D", DAV)])
            .open("D:prop", &[])
            .empty("D:getetag", &[])
            .empty("D:resourcetype", &[])
            .empty("D:displayname", &[])
            .close("D:prop")
            .close("D:propfind");
        let r = match self
            .s
            .send_to(
                conn,
                "PROPFIND",
                &path,
                &[xml_ct(), depth("1")],
                Bytes::from(w.finish()),
            )
            .await
        {
            Exchange::Answer(r) => r,
            Exchange::Failed(o) => return o,
        };
        let what = format!("PROPFIND {path}");
        multistatus_outcome(&r, Outcome::of(&r, expect, &what), &what).0
    }

    /// Send a REPORT with `body` to calendar `ci`: its answer and path, or the failure.
    pub(super) async fn send_report(
        &self,
        conn: &mut Conn,
        ci: usize,
        body: String,
    ) -> Result<(Response, String), Outcome> {
        self.send_report_to(conn, self.cals[ci].path.clone(), body)
            .await
    }

    /// Send a REPORT with `body` to the collection at `path`.
    pub(super) async fn send_report_to(
        &self,
        conn: &mut Conn,
        path: String,
        body: String,
    ) -> Result<(Response, String), Outcome> {
        match self
            .s
            .send_to(
                conn,
                "REPORT",
                &path,
                &[xml_ct(), depth("1")],
                Bytes::from(body),
            )
            .await
        {
            Exchange::Answer(r) => Ok((r, path)),
            Exchange::Failed(o) => Err(o),
        }
    }

    pub(super) async fn report(
        &mut self,
        conn: &mut Conn,
        ci: usize,
        body: String,
        expect: &[u16],
    ) -> (Outcome, Option<Multistatus>) {
        let (r, path) = match self.send_report(conn, ci, body).await {
            Ok(x) => x,
            Err(o) => return (o, None),
        };
        if let Some(t) = &mut self.team {
            t.answered();
        }
        let what = format!("REPORT {path}");
        let (o, m) = multistatus_outcome(&r, Outcome::of(&r, expect, &what), &what);
        if let Some(m) = &m {
            self.revealed(ci, m);
        }
        (o, m)
    }

    /// What a read of shared calendar `ci` revealed: the stamps in its calendar data,
    /// and the others' events it names, which later reads may ask for.
    pub(super) fn revealed(&mut self, ci: usize, m: &Multistatus) {
        let Some(t) = &mut self.team else {
            return;
        };
        let cal = &mut self.cals[ci];
        if !cal.shared {
            return;
        }
        t.read_all(m);
        for (href, status, _) in &m.responses {
            let p = href_path(href);
            if *status == 404 {
                cal.others.retain(|o| *o != p);
            } else if cal.others.len() < MAX_OTHERS
                && p != cal.path
                && !cal.events.iter().any(|e| e.path == p)
                && !cal.others.contains(&p)
            {
                cal.others.push(p);
            }
        }
    }

    /// One sync-collection request; `true` when the server rejected the token.
    pub(super) async fn sync(
        &mut self,
        conn: &mut Conn,
        ci: usize,
        token: &str,
        expect: &[u16],
    ) -> (Outcome, bool) {
        let mut w = XmlWriter::new();
        w.open("D:sync-collection", &[("xmlns:D", DAV)])
            .leaf("D:sync-token", token)
            .leaf("D:sync-level", "1")
            .open("D:prop", &[])
            .empty("D:getetag", &[])
            .close("D:prop")
            .close("D:sync-collection");
        let body = w.finish();
        let (r, path) = match self.send_report(conn, ci, body).await {
            Ok(x) => x,
            Err(o) => return (o, false),
        };
        if let Some(t) = &mut self.team {
            t.answered();
        }
        let status = r.status.as_u16();
        let what = format!("REPORT sync-collection {path}");
        if !token.is_empty()
            && (status == 403 || status == 412)
            && String::from_utf8_lossy(&r.body).contains("valid-sync-token")
        {
            return (Outcome::of(&r, expect, &what), true);
        }
        let (o, m) = multistatus_outcome(&r, Outcome::of(&r, expect, &what), &what);
        let Some(m) = m else { return (o, false) };
        let Some(t) = m.sync_token.clone() else {
            return (
                o.body_error(format!("{what}: no sync-token in the answer")),
                false,
            );
        };
        // Learn ETags of members that changed; drop members the server reports gone.
        self.revealed(ci, &m);
        if self.cals[ci].shared {
            let cal = &self.cals[ci];
            self.changed = m
                .responses
                .iter()
                .filter(|(_, st, _)| *st != 404)
                .map(|(h, _, _)| href_path(h))
                .filter(|p| *p != cal.path && !cal.events.iter().any(|e| e.path == *p))
                .take(MAX_FETCH)
                .collect();
        }
        let cal = &mut self.cals[ci];
        for (href, st, etag) in &m.responses {
            let p = href_path(href);
            if *st == 404 {
                cal.events.retain(|e| e.path != p);
            } else if let Some(e) = cal.events.iter_mut().find(|e| e.path == p) {
                e.etag = etag.clone().or(e.etag.take());
            }
        }
        cal.sync_token = Some(t);
        (o, false)
    }
}
