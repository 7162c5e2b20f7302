//! Syncs as calendar clients make them, each one operation however many requests it
//! sends: an *initial* sync (the calendar listed by `sync-collection` from no token, or by
//! PROPFIND Depth 1 of the ETags, then every event fetched by `calendar-multiget` in the
//! client's batches or a GET each) and a *delta* sync (`sync-collection` from the last
//! token, then a multiget of what changed), as DAVx5 makes them (its SyncManager's
//! `COLLECTION_SYNC` and `PROPFIND_REPORT`, multigets of `MAX_MULTIGET_RESOURCES`, 10).
//! In a team's calendar a delta sync is the team's `sync_collection`, whose fetches read
//! the others' writes for their visibility.

use crate::formats::dav::{Multistatus, href_path};
use crate::formats::ical;
use crate::protocol::Outcome;
use crate::protocol::dav::{self, Fetch, Members};
use crate::transport::Conn;
use crate::workload::protocols::{FetchBy, InitialSync};

use super::{CaldavClass, CaldavVu, multiget_body};

/// Events as a sync fetches them.
const EVENTS: Members = Members {
    multiget: |hrefs| multiget_body(hrefs.iter().copied()),
    parse: |t| ical::parse(t).map(|_| ()).map_err(String::from),
    what: "iCalendar",
};

impl CaldavVu {
    /// A client's first copy of calendar `ci`: listed as `how` says, then every event
    /// fetched.
    pub(super) async fn initial_sync(
        &mut self,
        conn: &mut Conn,
        ci: usize,
        class: &CaldavClass,
        how: InitialSync,
        expect: &[u16],
    ) -> Outcome {
        let (o, m) = match how.by_propfind {
            true => self.propfind_listing(conn, ci, expect).await,
            false => {
                // From scratch: what the calendar holds now, and the token to go on from.
                self.cals[ci].sync_token = None;
                self.sync_listing(conn, ci, class, expect).await
            }
        };
        // Everything is fetched below, the others' changes among it.
        self.changed.clear();
        let fetch = match how.fetch {
            FetchBy::Multiget(n) => Fetch::Multiget(n as usize),
            FetchBy::Get => Fetch::Get,
        };
        self.fetch_listed(conn, ci, m.as_ref(), fetch, o).await
    }

    /// A client's sync of calendar `ci` after its first: from its token, then what
    /// changed fetched by multigets of `batch`.
    pub(super) async fn delta_sync(
        &mut self,
        conn: &mut Conn,
        ci: usize,
        class: &CaldavClass,
        batch: u32,
        expect: &[u16],
    ) -> Outcome {
        if self.cals[ci].shared {
            return self.sync_collection(conn, ci, class, expect).await;
        }
        let (o, m) = self.sync_listing(conn, ci, class, expect).await;
        let fetch = Fetch::Multiget(batch as usize);
        self.fetch_listed(conn, ci, m.as_ref(), fetch, o).await
    }

    /// After a listing `m` of calendar `ci` whose outcome is `o`, fetch the events it
    /// names as there.
    async fn fetch_listed(
        &mut self,
        conn: &mut Conn,
        ci: usize,
        m: Option<&Multistatus>,
        how: Fetch,
        o: Outcome,
    ) -> Outcome {
        let (Some(m), true) = (m, o.is_ok()) else {
            return o;
        };
        let path = self.cals[ci].path.clone();
        let hrefs: Vec<String> = m
            .responses
            .iter()
            .filter(|(_, status, _)| *status == 200)
            .map(|(h, _, _)| href_path(h))
            .filter(|h| h.trim_end_matches('/') != path.trim_end_matches('/'))
            .collect();
        dav::fetch(&self.s, conn, &path, &hrefs, how, &EVENTS, o).await
    }
}
