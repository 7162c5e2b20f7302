//! A CalDAV user's set-up: its calendar home found (the class's `calendar_home`, else
//! RFC 6764 discovery, current-user-principal and calendar-home-set), its calendar made
//! (MKCALENDAR), and in a team the shared calendar made and granted by its owner or
//! joined by its members.

use bytes::Bytes;
use rand::rngs::Xoshiro256PlusPlus;

use crate::formats::dav::{CALDAV, DAV, find_prop_href, href_path};
use crate::formats::xml::{self, XmlWriter};
use crate::protocol::session::Exchange;
use crate::protocol::teams::{Shared, acl_body};
use crate::protocol::{Outcome, SetupError, Stage, data};
use crate::transport::{Conn, Response};

use super::{CaldavVu, Calendar, HOME_SET, MAX_REDIRECTS, PRINCIPAL, depth, xml_ct};

impl CaldavVu {
    /// Find the calendar home (untimed set-up): the class's `calendar_home` if it gives
    /// one; else the principal (`current-user-principal`) from the class's `discovery`
    /// path, or, by RFC 6764, from `/.well-known/caldav` at the server's root (following
    /// its redirect) and then from the service's own root; then the principal's
    /// `calendar-home-set`.
    pub(super) async fn discover(&mut self, conn: &mut Conn) -> Result<(), SetupError> {
        let base = conn.endpoint().base_path.clone();
        if let Some(h) = &self.class.params.calendar_home {
            let mut h = format!("{base}{}", self.template(h));
            if !h.ends_with('/') {
                h.push('/');
            }
            self.home = Some(h);
            return Ok(());
        }
        let starts: Vec<String> = match &self.class.params.discovery {
            Some(d) => vec![format!("{base}{}", self.template(d))],
            None => vec![
                "/.well-known/caldav".to_string(),
                format!("{base}{}/", self.s.context),
            ],
        };
        // A start that leads nowhere (a well-known URI a proxy maps oddly, a root that is
        // not the service's) is not the end: the next one may work.
        let mut tried = Vec::new();
        let mut found = None;
        for start in &starts {
            let home = match self
                .find_href(conn, start, PRINCIPAL, DAV, "current-user-principal")
                .await
            {
                Ok(principal) => {
                    let home = self
                        .find_href(conn, &principal, HOME_SET, CALDAV, "calendar-home-set")
                        .await;
                    self.principal = Some(principal);
                    home
                }
                Err(e) => Err(e),
            };
            match home {
                Ok(h) => {
                    found = Some(h);
                    break;
                }
                Err(e) => tried.push(e),
            }
        }
        let Some(home) = found else {
            // Every start failed: say what each one answered.
            let request = tried
                .iter()
                .map(|e| e.request().to_string())
                .collect::<Vec<_>>()
                .join(", then ");
            let answer = tried
                .iter()
                .map(|e| e.answer().to_string())
                .collect::<Vec<_>>()
                .join("; ");
            return Err(SetupError {
                stage: Stage::Discovery,
                request,
                answer: format!("{answer} (give the class's calendar_home, or discovery: PATH)"),
            });
        };
        self.home = Some(if home.ends_with('/') {
            home
        } else {
            format!("{home}/")
        });
        Ok(())
    }

    /// Take this user's place in its team (set-up, untimed): the owner makes the shared
    /// calendar, grants the members who have arrived by then (`grant: acl`) and says
    /// where it is; a member says who it is and waits to hear where. A failure on either
    /// side fails the set-up of the members too, in the owner's words.
    pub(super) async fn join_team(&mut self, conn: &mut Conn) -> Result<(), SetupError> {
        let Some(t) = &self.team else {
            return Ok(());
        };
        let (key, owner, members, grant) = (t.key(), t.seat.owner, t.members, t.grant);
        let board = self.class.board.clone();
        // Every user's set-up runs at once: each side waits at most this long.
        let timeouts = conn.timeouts();
        let until = tokio::time::Instant::now() + 4 * (timeouts.connect + timeouts.request);
        if !owner {
            board.arrived(key, self.principal.clone());
            let shared = board
                .shared(key, until)
                .await
                .map_err(|answer| SetupError {
                    stage: Stage::Team,
                    request: "the shared calendar of the team's owner".into(),
                    answer,
                })?;
            self.cals.push(Calendar::new(shared.path, true, false));
            return Ok(());
        }
        let made = self.make_team_calendar(conn, members, grant, until).await;
        let shared = made.clone().map(|path| Shared { path, ticket: None });
        board.publish(key, shared.map_err(|e| e.to_string()));
        let path = made?;
        self.cals.push(Calendar::new(path, true, true));
        Ok(())
    }

    /// The owner's side: MKCALENDAR, then the ACL granting the members who arrived.
    pub(super) async fn make_team_calendar(
        &mut self,
        conn: &mut Conn,
        members: usize,
        grant: crate::workload::Grant,
        until: tokio::time::Instant,
    ) -> Result<String, SetupError> {
        let mut rng =
            <Xoshiro256PlusPlus as rand::SeedableRng>::seed_from_u64(u64::from(self.ids.vu));
        let o = self.mkcalendar(conn, &mut rng, &[201]).await;
        let Some(cal) = self.cals.pop().filter(|_| o.is_ok()) else {
            return Err(SetupError {
                stage: Stage::Team,
                request: "MKCALENDAR of the shared calendar".into(),
                answer: o.detail.unwrap_or_else(|| o.answer.to_string()),
            });
        };
        let path = cal.path;
        if grant == crate::workload::Grant::Server {
            return Ok(path);
        }
        let principals = self
            .class
            .board
            .principals(
                self.team.as_ref().map_or((0, 0, 0), |t| t.key()),
                members.saturating_sub(1),
                until,
            )
            .await;
        let body = acl_body(&principals);
        let fail = |answer: String| SetupError {
            stage: Stage::Team,
            request: format!("ACL {path} granting {} members", principals.len()),
            answer,
        };
        match self
            .s
            .send_to(conn, "ACL", &path, &[xml_ct()], Bytes::from(body))
            .await
        {
            Exchange::Answer(r) if r.status.is_success() => Ok(path),
            Exchange::Answer(r) => Err(fail(format!(
                "{} (a server that shares by its own rights: give the team grant: server)",
                r.status
            ))),
            Exchange::Failed(o) => Err(fail(o.detail.unwrap_or_default())),
        }
    }

    /// PROPFIND `path` (on the server, base path included) for one href-valued property.
    /// The href comes back as a path on the server: CalDAV users work with the server's
    /// own hrefs throughout, which need not lie under the target's path.
    pub(super) async fn find_href(
        &self,
        conn: &mut Conn,
        path: &str,
        body: &'static str,
        ns: &str,
        prop: &str,
    ) -> Result<String, SetupError> {
        let (root, url) = self.find_props(conn, path, body, prop).await?;
        let href = find_prop_href(&root, ns, prop).ok_or_else(|| SetupError {
            stage: Stage::Discovery,
            request: format!("PROPFIND {url} ({prop})"),
            answer: format!("207 without {prop}"),
        })?;
        Ok(href_path(&href))
    }

    /// PROPFIND `path` (depth 0) with `body`, following up to [`MAX_REDIRECTS`]
    /// redirects on the same server: the parsed multistatus and the URL that gave it;
    /// `what` names the properties in a failure.
    pub(super) async fn find_props(
        &self,
        conn: &mut Conn,
        path: &str,
        body: &'static str,
        what: &str,
    ) -> Result<(xml::El, String), SetupError> {
        let mut path = path.to_string();
        for _ in 0..=MAX_REDIRECTS {
            let url = conn.endpoint().url_of(&path);
            let fail = |answer: String| SetupError {
                stage: Stage::Discovery,
                request: format!("PROPFIND {url} ({what})"),
                answer,
            };
            let r = match self
                .s
                .send_to(
                    conn,
                    "PROPFIND",
                    &path,
                    &[xml_ct(), depth("0")],
                    Bytes::from_static(body.as_bytes()),
                )
                .await
            {
                Exchange::Answer(r) => r,
                Exchange::Failed(o) => return Err(fail(o.detail.unwrap_or_default())),
            };
            let status = r.status.as_u16();
            if matches!(status, 301 | 302 | 303 | 307 | 308) {
                let location = r
                    .headers
                    .get(hyper::header::LOCATION)
                    .and_then(|v| v.to_str().ok())
                    .unwrap_or("");
                path = conn.endpoint().same_origin_path(location).ok_or_else(|| {
                    fail(format!(
                        "{status} to '{location}', another server: give that URL as --target"
                    ))
                })?;
                continue;
            }
            if status != 207 {
                return Err(fail(r.status.to_string()));
            }
            let text = std::str::from_utf8(&r.body).map_err(|e| fail(format!("207, {e}")))?;
            let root = xml::parse(text).map_err(|e| fail(format!("207, {e}")))?;
            return Ok((root, url));
        }
        Err(SetupError {
            stage: Stage::Discovery,
            request: format!("PROPFIND {} ({what})", conn.endpoint().url_of(&path)),
            answer: format!("more than {MAX_REDIRECTS} redirects"),
        })
    }

    pub(super) async fn mkcalendar(
        &mut self,
        conn: &mut Conn,
        rng: &mut Xoshiro256PlusPlus,
        expect: &[u16],
    ) -> Outcome {
        let Some(home) = &self.home else {
            return Outcome::failed(
                crate::transport::ErrorClass::Body,
                "no calendar home (discovery failed)".into(),
            );
        };
        let path = format!("{home}{}/", data::uid(rng, &self.ids.run_id));
        let name = format!("loadmix {} {}", self.s.user, data::string(rng, 8));
        let r = match self.send_mkcalendar(conn, &path, &name).await {
            Ok(r) => r,
            Err(o) => return o,
        };
        let o = Outcome::of(&r, expect, &format!("MKCALENDAR {path}"));
        if o.is_ok() {
            self.cals.push(Calendar::new(path, false, true));
        }
        o
    }

    /// MKCALENDAR `path`, named `name`, for events: the answer, or the failure.
    pub(super) async fn send_mkcalendar(
        &self,
        conn: &mut Conn,
        path: &str,
        name: &str,
    ) -> Result<Response, Outcome> {
        let mut w = XmlWriter::new();
        w.open("C:mkcalendar", &[("xmlns:D", DAV), ("xmlns:C", CALDAV)])
            .open("D:set", &[])
            .open("D:prop", &[])
            .leaf("D:displayname", name)
            .open("C:calendar-description", &[("xml:lang", "en")])
            .text("Calendar restricted to events.")
            .close("C:calendar-description")
            .close("D:prop")
            .close("D:set")
            .close("C:mkcalendar");
        let body = w.finish();
        match self
            .s
            .send_to(conn, "MKCALENDAR", path, &[xml_ct()], Bytes::from(body))
            .await
        {
            Exchange::Answer(r) => Ok(r),
            Exchange::Failed(o) => Err(o),
        }
    }
}
