//! What a CalDAV user reads of its calendars: time-range reports, multigets, PROPFIND,
//! sync-collection (initial, then incremental; a refused token a full resync) with the
//! changed events fetched, and what a shared calendar's answers reveal of the team's
//! writes.

use std::collections::{HashMap, HashSet};

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
    CaldavClass, CaldavVu, FETCH_CHUNK, MAX_FETCH, MAX_OTHERS, event_query, multiget_body,
};
use crate::protocol::dav::{self, depth, multistatus_outcome, xml_ct};

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
        let (start, end) = (data::ical_utc(start), data::ical_utc(end));
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
        let (o, _) = self.sync_listing(conn, ci, class, expect).await;
        self.fetch_changes(conn, ci, o).await
    }

    /// The listing of a sync from the calendar's token (from scratch again when the server
    /// no longer knows it): its outcome, and its multistatus when it parsed.
    pub(super) async fn sync_listing(
        &mut self,
        conn: &mut Conn,
        ci: usize,
        class: &CaldavClass,
        expect: &[u16],
    ) -> (Outcome, Option<Multistatus>) {
        let token = self.cals[ci].sync_token.clone().unwrap_or_default();
        let (o, rejected, m) = self.sync(conn, ci, &token, expect).await;
        if !rejected {
            return (o, m);
        }
        // The server no longer knows the token: start over, as a client must. A full
        // listing repeats what earlier syncs reported without being a duplicate.
        if let Some(l) = self.team.as_mut().and_then(|t| t.watching.as_mut()) {
            l.news = false;
        }
        let (mut again, _, m) = self.sync(conn, ci, "", expect).await;
        again.add_cost(&o);
        again.label = Some(class.params.label_resync);
        (again, m)
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
        self.propfind_listing(conn, ci, expect).await.0
    }

    /// PROPFIND depth 1 on calendar `ci`, with its multistatus when it parsed.
    pub(super) async fn propfind_listing(
        &mut self,
        conn: &mut Conn,
        ci: usize,
        expect: &[u16],
    ) -> (Outcome, Option<Multistatus>) {
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
            Exchange::Failed(o) => return (o, None),
        };
        let what = format!("PROPFIND {path}");
        multistatus_outcome(&r, Outcome::of(&r, expect, &what), &what)
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

    /// One sync-collection request; `true` when the server rejected the token; the
    /// answer's multistatus when it parsed.
    pub(super) async fn sync(
        &mut self,
        conn: &mut Conn,
        ci: usize,
        token: &str,
        expect: &[u16],
    ) -> (Outcome, bool, Option<Multistatus>) {
        let (r, path) = match self.send_report(conn, ci, dav::sync_body(token)).await {
            Ok(x) => x,
            Err(o) => return (o, false, None),
        };
        if let Some(t) = &mut self.team {
            t.answered();
        }
        let what = format!("REPORT sync-collection {path}");
        if dav::refuses_token(&r, token) {
            return (Outcome::of(&r, expect, &what), true, None);
        }
        let (o, m) = multistatus_outcome(&r, Outcome::of(&r, expect, &what), &what);
        let Some(m) = m else {
            return (o, false, None);
        };
        let Some(t) = m.sync_token.clone() else {
            let o = o.body_error(format!("{what}: no sync-token in the answer"));
            return (o, false, Some(m));
        };
        // Learn ETags of members that changed; drop members the server reports gone.
        self.revealed(ci, &m);
        if self.cals[ci].shared {
            let cal = &self.cals[ci];
            let mine: HashSet<&str> = cal.events.iter().map(|e| e.path.as_str()).collect();
            self.changed = m
                .responses
                .iter()
                .filter(|(_, st, _)| *st != 404)
                .map(|(h, _, _)| href_path(h))
                .filter(|p| *p != cal.path && !mine.contains(p.as_str()))
                .take(MAX_FETCH)
                .collect();
        }
        let cal = &mut self.cals[ci];
        learn_from_listing(&mut cal.events, &m);
        cal.sync_token = Some(t);
        (o, false, Some(m))
    }
}

/// What a listing says of the user's events: the gone (404) forgotten, the others' new
/// ETags learnt. Each event found by its path once, not searched for per member: a
/// listing of a calendar of thousands would cost their product.
fn learn_from_listing(events: &mut Vec<super::Event>, m: &Multistatus) {
    let at: HashMap<String, usize> = events
        .iter()
        .enumerate()
        .map(|(i, e)| (e.path.clone(), i))
        .collect();
    let mut gone = vec![false; events.len()];
    for (href, st, etag) in &m.responses {
        let Some(&i) = at.get(&href_path(href)) else {
            continue;
        };
        match *st {
            404 => gone[i] = true,
            _ => {
                if let Some(e) = etag {
                    events[i].etag = Some(e.clone());
                }
            }
        }
    }
    let mut i = 0;
    events.retain(|_| {
        i += 1;
        !gone[i - 1]
    });
}

#[cfg(test)]
mod tests {
    use std::net::SocketAddr;
    use std::sync::Arc;
    use std::time::Duration;

    use super::super::{Calendar, Event};
    use super::*;
    use crate::protocol::VuIds;
    use crate::protocol::session::{AccountPlan, Session};
    use crate::protocol::teams::Board;
    use crate::transport::{Endpoint, Reuse, Timeouts};
    use crate::workload::{ClassKind, load_str};

    /// A server on loopback that answers each request on one connection with the next
    /// of `answers` (status and body), reading each request whole (head and
    /// Content-Length body).
    async fn answering(answers: Vec<(u16, &'static str)>) -> SocketAddr {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = l.local_addr().unwrap();
        tokio::spawn(async move {
            let (mut s, _) = l.accept().await.unwrap();
            let mut buf = Vec::new();
            for (status, body) in answers {
                loop {
                    let head = buf.windows(4).position(|w| w == b"\r\n\r\n");
                    if let Some(end) = head {
                        let text = String::from_utf8_lossy(&buf[..end]).to_ascii_lowercase();
                        let length = text
                            .lines()
                            .find_map(|l| l.strip_prefix("content-length:"))
                            .and_then(|v| v.trim().parse::<usize>().ok())
                            .unwrap_or(0);
                        if buf.len() >= end + 4 + length {
                            buf.drain(..end + 4 + length);
                            break;
                        }
                    }
                    let mut chunk = [0u8; 4096];
                    match s.read(&mut chunk).await {
                        Ok(0) | Err(_) => return,
                        Ok(n) => buf.extend_from_slice(&chunk[..n]),
                    }
                }
                let answer = format!(
                    "HTTP/1.1 {status} X\r\nContent-Type: application/xml\r\nContent-Length: {}\r\n\r\n{body}",
                    body.len()
                );
                if s.write_all(answer.as_bytes()).await.is_err() {
                    return;
                }
            }
        });
        addr
    }

    /// A user of a CalDAV class with one calendar, `/cal/`, holding `a.ics` and `b.ics`.
    fn user() -> CaldavVu {
        let text = "name: t\ntarget: embedded\nusers:\n  - class: c\n    protocol: caldav\n    count: 1\n    mix:\n      sync_collection: 1\n";
        let w = load_str("t.yaml", text, &[], None).unwrap();
        let c = &w.classes[0];
        let ClassKind::Caldav { ops, params } = &c.kind else {
            panic!("a CalDAV class");
        };
        let accounts = Arc::new(AccountPlan::None);
        let class = CaldavClass::new(c, ops, params, &accounts, None, &Arc::new(Board::default()));
        let session = Session {
            user: "u".into(),
            password: String::new(),
            auth: None,
            context: Arc::from(""),
        };
        let ids = VuIds {
            vu: 0,
            round: 1,
            run_id: Arc::from("run1"),
        };
        let mut vu = CaldavVu::new(Arc::new(class), session, ids);
        let mut cal = Calendar::new("/cal/".into(), false, true);
        for (n, name) in ["a", "b"].iter().enumerate() {
            cal.events.push(Event {
                path: format!("/cal/{name}.ics"),
                uid: name.to_string(),
                etag: Some("\"e0\"".into()),
                born: n as u64,
            });
        }
        vu.cals.push(cal);
        vu
    }

    fn conn(addr: SocketAddr) -> Conn {
        let timeouts = Timeouts {
            connect: Duration::from_secs(5),
            request: Duration::from_secs(30),
        };
        Conn::new(
            Arc::new(Endpoint::local(addr, "t")),
            Reuse::KeepAlive,
            timeouts,
        )
    }

    const CHANGES: &str = r#"<multistatus xmlns="DAV:"><response><href>/cal/a.ics</href><propstat><prop><getetag>"e1"</getetag></prop><status>HTTP/1.1 200 OK</status></propstat></response><response><href>/cal/b.ics</href><status>HTTP/1.1 404 Not Found</status></response><sync-token>tok-2</sync-token></multistatus>"#;
    const NO_TOKEN: &str = r#"<multistatus xmlns="DAV:"><response><href>/cal/a.ics</href><propstat><prop><getetag>"e2"</getetag></prop><status>HTTP/1.1 200 OK</status></propstat></response></multistatus>"#;
    const REFUSED: &str = r#"<error xmlns="DAV:"><valid-sync-token/></error>"#;

    #[tokio::test]
    async fn a_sync_learns_etags_forgets_the_gone_and_keeps_its_token() {
        let mut vu = user();
        let mut c = conn(answering(vec![(207, CHANGES), (403, REFUSED), (207, NO_TOKEN)]).await);
        let (o, refused, _) = vu.sync(&mut c, 0, "", &[207]).await;
        assert!(o.is_ok() && !refused, "{o:?}");
        let cal = &vu.cals[0];
        let held: Vec<(&str, Option<&str>)> = cal
            .events
            .iter()
            .map(|e| (e.path.as_str(), e.etag.as_deref()))
            .collect();
        assert_eq!(held, [("/cal/a.ics", Some("\"e1\""))]);
        assert_eq!(cal.sync_token.as_deref(), Some("tok-2"));
        // The token refused in the server's words: the caller starts again from none.
        let (_, refused, _) = vu.sync(&mut c, 0, "tok-2", &[207]).await;
        assert!(refused);
        // An answer without a token is the server's fault, and the token held stays.
        let (o, refused, _) = vu.sync(&mut c, 0, "tok-2", &[207]).await;
        assert!(!refused && !o.is_ok());
        assert!(
            o.detail
                .as_deref()
                .is_some_and(|d| d.contains("no sync-token")),
            "{o:?}"
        );
        assert_eq!(vu.cals[0].sync_token.as_deref(), Some("tok-2"));
    }
}
