//! A CalDAV user's set-up: its calendar home found (the class's `calendar_home`, else
//! RFC 6764 discovery, `protocol::dav`), its calendar made
//! (MKCALENDAR), and in a team the shared calendar made and granted by its owner or
//! joined by its members.

use bytes::Bytes;
use rand::rngs::Xoshiro256PlusPlus;

use crate::formats::dav::{CALDAV, DAV};
use crate::formats::xml::{self, XmlWriter};
use crate::protocol::dav::{self, Service, xml_ct};
use crate::protocol::session::Exchange;
use crate::protocol::teams::{Shared, acl_body};
use crate::protocol::{Outcome, SetupError, Stage, data};
use crate::transport::{Conn, Response};

use super::{CaldavVu, Calendar};

/// What CalDAV's discovery looks for.
const CALDAV_SERVICE: Service = Service {
    well_known: "/.well-known/caldav",
    home_body: r#"<D:propfind xmlns:D="DAV:" xmlns:C="urn:ietf:params:xml:ns:caldav"><D:prop><C:calendar-home-set/></D:prop></D:propfind>"#,
    home_prop: (CALDAV, "calendar-home-set"),
    home_param: "calendar_home",
};

impl CaldavVu {
    /// Find the calendar home (untimed set-up): the class's `calendar_home` if it gives
    /// one; else by discovery (`protocol::dav`), from the class's `discovery` path
    /// or `/.well-known/caldav` and the context's root.
    pub(super) async fn discover(&mut self, conn: &mut Conn) -> Result<(), SetupError> {
        let p = &self.class.params;
        let (given, start) = (p.calendar_home.as_deref(), p.discovery.as_deref());
        let (principal, home) =
            dav::find_home(&self.s, &self.ids, conn, given, start, &CALDAV_SERVICE).await?;
        self.principal = principal;
        self.home = Some(home);
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

    /// PROPFIND `path` (depth 0) with `body`, following redirects: the parsed
    /// multistatus and the URL that gave it; `what` names the properties in a failure.
    pub(super) async fn find_props(
        &self,
        conn: &mut Conn,
        path: &str,
        body: &'static str,
        what: &str,
    ) -> Result<(xml::El, String), SetupError> {
        dav::find_props(&self.s, conn, path, body, what).await
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
