//! Syncs as address book clients make them, each one operation however many requests it
//! sends: an *initial* sync (the book listed by `sync-collection` from no token, or by
//! PROPFIND Depth 1 of the ETags, then every contact fetched by multigets of the client's
//! batch or a GET each) and a *delta* sync (`sync-collection` from the last token, then a
//! multiget of what changed). DAVx5 does both (its SyncManager's algorithms
//! `COLLECTION_SYNC` and `PROPFIND_REPORT`, multigets of `MAX_MULTIGET_RESOURCES`, 10).
//! A returning user goes on from the token it kept.

use crate::formats::dav::Multistatus;
use crate::formats::vcard;
use crate::protocol::Outcome;
use crate::protocol::dav::{self, Fetch, Members};
use crate::transport::Conn;
use crate::workload::protocols::{FetchBy, InitialSync};

use super::CarddavVu;
use super::reports::{members, multiget_body};

/// Contacts as a sync fetches them.
const CONTACTS: Members = Members {
    multiget: multiget_body,
    parse: |t| vcard::parse(t).map(|_| ()).map_err(|e| e.to_string()),
    what: "a vCard",
};

fn fetch_of(by: FetchBy) -> Fetch {
    match by {
        FetchBy::Multiget(n) => Fetch::Multiget(n as usize),
        FetchBy::Get => Fetch::Get,
    }
}

/// The members a listing of the book at `path` names as there (not the book itself, not
/// the gone).
fn present(m: &Multistatus, path: &str) -> Vec<String> {
    members(m, path)
        .filter(|(_, s)| *s == 200)
        .map(|(h, _)| h)
        .collect()
}

impl CarddavVu {
    /// A client's first copy of book `bi`: listed as `how` says, then every contact
    /// fetched.
    pub(super) async fn initial_sync(
        &mut self,
        conn: &mut Conn,
        bi: usize,
        how: InitialSync,
        expect: &[u16],
    ) -> Outcome {
        let (o, m) = match how.by_propfind {
            true => self.propfind(conn, bi, expect).await,
            false => {
                // From scratch: what the book holds now, and the token to go on from.
                self.books[bi].sync_token = None;
                self.sync_collection(conn, bi, expect).await
            }
        };
        self.fetch_listed(conn, bi, m.as_ref(), fetch_of(how.fetch), o)
            .await
    }

    /// A client's sync of book `bi` after its first: from its token, then what changed
    /// fetched by multigets of `batch`.
    pub(super) async fn delta_sync(
        &mut self,
        conn: &mut Conn,
        bi: usize,
        batch: u32,
        expect: &[u16],
    ) -> Outcome {
        let (o, m) = self.sync_collection(conn, bi, expect).await;
        self.fetch_listed(conn, bi, m.as_ref(), Fetch::Multiget(batch as usize), o)
            .await
    }

    /// After a listing `m` of book `bi` whose outcome is `o`, fetch what it names.
    async fn fetch_listed(
        &mut self,
        conn: &mut Conn,
        bi: usize,
        m: Option<&Multistatus>,
        how: Fetch,
        o: Outcome,
    ) -> Outcome {
        let (Some(m), true) = (m, o.is_ok()) else {
            return o;
        };
        let path = self.books[bi].path.clone();
        let hrefs = present(m, &path);
        dav::fetch(&self.s, conn, &path, &hrefs, how, &CONTACTS, o).await
    }
}
