//! CardDAV users (RFC 6352, with RFC 6578 sync) that work against any conforming server.
//! Set-up discovers the address book home (`protocol::dav`: `/.well-known/carddav`,
//! current-user-principal, addressbook-home-set) unless the class gives
//! `addressbook_home`; a user with no address book makes one first (extended MKCOL,
//! RFC 5689, outside its table) and fills it with the class's `initial_contacts`.
//! Operations: create_addressbook, put_contact, update_contact (If-Match the ETag it
//! knows), get_contact, delete_contact, addressbook_query (FN or EMAIL containing one of
//! its contacts' family names), addressbook_multiget, sync_collection (initial, then
//! incremental; a refused token a full resync, `sync_collection_resync`), propfind, and
//! syncs as clients make them (`sync.rs`: initial_sync, delta_sync).
//!
//! Answers are checked as a client would need them: multistatus parsed, every vCard in
//! it parsed, and an answer that leaves out a contact the user knows is there (a query
//! that finds nothing of a name it holds, a multiget short of what it asked) is a failure.

use std::sync::Arc;

use async_trait::async_trait;
use rand::Rng;
use rand::rngs::Xoshiro256PlusPlus;

use super::cleanup::Place;
use super::contract::{Done, Preflight, Protocol, Reach};
use super::dav::{self, Service};
use super::over_http::{HttpUser, OverHttp};
use super::session::{AccountPlan, Session};
use super::{ProtocolError, SetupError, VuIds, bootstrap_expect, expect_of};
use crate::formats::dav::CARDDAV;
use crate::transport::Conn;
use crate::workload::UserClass;
use crate::workload::chain::Guard;
use crate::workload::protocols::{CarddavOp, CarddavParams, ContactShape, MAX_INITIAL_CONTACTS};

mod contacts;
mod reports;
mod sync;

pub(crate) struct CarddavClass {
    ops: Vec<CarddavOp>,
    expect: Vec<Vec<u16>>,
    params: CarddavParams,
    /// How its users' accounts are made, shared by all of them.
    accounts: Arc<AccountPlan>,
}

impl CarddavClass {
    pub(crate) fn new(
        class: &UserClass,
        ops: &[CarddavOp],
        params: &CarddavParams,
        accounts: &Arc<AccountPlan>,
    ) -> CarddavClass {
        CarddavClass {
            accounts: accounts.clone(),
            expect: class
                .ops
                .iter()
                .zip(ops)
                .map(|(o, k)| {
                    expect_of(
                        o,
                        match k {
                            CarddavOp::CreateAddressbook => &[201],
                            CarddavOp::PutContact(_) => &[201, 204],
                            CarddavOp::UpdateContact(_) => &[200, 201, 204],
                            CarddavOp::GetContact => &[200],
                            CarddavOp::DeleteContact => &[200, 204],
                            CarddavOp::AddressbookQuery
                            | CarddavOp::AddressbookMultiget { .. }
                            | CarddavOp::SyncCollection
                            | CarddavOp::Propfind
                            | CarddavOp::InitialSync(_)
                            | CarddavOp::DeltaSync { .. } => &[207],
                        },
                    )
                })
                .collect(),
            ops: ops.to_vec(),
            params: params.clone(),
        }
    }
}

/// A contact this user put.
struct Contact {
    /// Path on the server (as its hrefs give it).
    path: String,
    /// Its UID, which an update keeps.
    uid: String,
    /// Its family name, which a query looks for.
    family: String,
    etag: Option<String>,
}

struct Book {
    path: String,
    /// The contacts this user put in it.
    contacts: Vec<Contact>,
    sync_token: Option<String>,
}

pub(crate) struct CarddavVu {
    class: Arc<CarddavClass>,
    s: Session,
    ids: VuIds,
    home: Option<String>,
    books: Vec<Book>,
}

/// What CardDAV's discovery looks for.
const CARDDAV_SERVICE: Service = Service {
    well_known: "/.well-known/carddav",
    home_body: r#"<D:propfind xmlns:D="DAV:" xmlns:CR="urn:ietf:params:xml:ns:carddav"><D:prop><CR:addressbook-home-set/></D:prop></D:propfind>"#,
    home_prop: (CARDDAV, "addressbook-home-set"),
    home_param: "addressbook_home",
};

/// A random contact of a book, if it has any.
fn pick_contact(book: &Book, rng: &mut Xoshiro256PlusPlus) -> Option<usize> {
    (!book.contacts.is_empty()).then(|| (rng.next_u64() % book.contacts.len() as u64) as usize)
}

#[async_trait]
impl Protocol for CarddavClass {
    type User = HttpUser<CarddavVu>;

    fn user(self: &Arc<Self>, session: Session, ids: VuIds, reach: Reach) -> Self::User {
        let vu = CarddavVu::new(self.clone(), session.clone(), ids);
        HttpUser::new(vu, session, &reach, Some(self.accounts.clone()))
    }

    /// An account of the probe's own, then its address book home found as a user's
    /// set-up finds it.
    async fn preflight(self: &Arc<Self>, cx: Preflight<'_>) -> Result<(), ProtocolError> {
        let (s, mut conn) = super::over_http::probe_with_account(&cx).await?;
        let auth = s.auth.clone();
        let mut vu = CarddavVu::new(self.clone(), s, cx.ids.clone());
        vu.discover(&mut conn).await.map_err(|e| {
            let e = match auth.as_ref().and_then(|a| a.take_refusal()) {
                Some(why) => e.explained(&why),
                None => e,
            };
            let (request, answer) = e.parts();
            cx.failed(request, answer)
        })
    }
}

impl OverHttp for CarddavVu {
    async fn setup(&mut self, conn: &mut Conn) -> Result<(), SetupError> {
        self.discover(conn).await
    }

    fn needs_bootstrap(&self) -> bool {
        self.books.is_empty()
    }

    fn guard_holds(&self, guard: &Guard) -> bool {
        match guard {
            Guard::Synced(want) => self.books.iter().any(|b| b.sync_token.is_some()) == *want,
            Guard::Pool { .. } | Guard::Invited => false,
        }
    }

    /// The address books this user made (their contacts go with them).
    fn leftovers(&self) -> Vec<(crate::transport::Method, Place)> {
        self.books
            .iter()
            .map(|b| {
                (
                    crate::transport::Method::DELETE,
                    Place::Server(b.path.clone()),
                )
            })
            .collect()
    }

    async fn bootstrap(&mut self, conn: &mut Conn, rng: &mut Xoshiro256PlusPlus) -> Done {
        let expect = bootstrap_expect(
            &self.class.ops,
            &self.class.expect,
            |o| *o == CarddavOp::CreateAddressbook,
            &[201],
        );
        let mut o = self.mkcol(conn, rng, &expect).await;
        o.label = Some(self.class.params.label_create_addressbook);
        Done::Sent(o)
    }

    /// The class's `initial_contacts` put in the address book set-up made, one PUT
    /// each and several at once, in the shape of the class's `put_contact` (the default
    /// shape when it has none). Stops at the first failure; the rest are not sent.
    async fn prefill(
        &mut self,
        conn: &mut Conn,
        rng: &mut Xoshiro256PlusPlus,
    ) -> Result<(), String> {
        let n = self
            .class
            .params
            .initial_contacts
            .as_ref()
            .map_or(0, |d| d.sample_count(rng, MAX_INITIAL_CONTACTS));
        let Some(bi) = self.books.len().checked_sub(1) else {
            return Ok(());
        };
        let class = self.class.clone();
        let default = ContactShape::default();
        let shape = class
            .ops
            .iter()
            .find_map(|o| {
                let CarddavOp::PutContact(shape) = o else {
                    return None;
                };
                Some(shape)
            })
            .unwrap_or(&default);
        self.fill(conn, rng, bi, shape, n).await
    }

    async fn execute(
        &mut self,
        op: usize,
        _seq: u64,
        conn: &mut Conn,
        rng: &mut Xoshiro256PlusPlus,
    ) -> Done {
        let class = self.class.clone();
        let expect = class.expect[op].as_slice();
        if class.ops[op] == CarddavOp::CreateAddressbook {
            return self.mkcol(conn, rng, expect).await.into();
        }
        if self.books.is_empty() {
            return Done::Skipped;
        }
        let bi = (rng.next_u64() % self.books.len() as u64) as usize;
        match &class.ops[op] {
            CarddavOp::CreateAddressbook => Done::Skipped,
            CarddavOp::PutContact(shape) => {
                self.new_contact(conn, rng, bi, shape, expect).await.into()
            }
            CarddavOp::UpdateContact(shape) => {
                self.update_contact(conn, rng, bi, shape, expect).await
            }
            CarddavOp::GetContact => self.get_contact(conn, rng, bi, expect).await,
            CarddavOp::DeleteContact => self.delete_contact(conn, rng, bi, expect).await,
            CarddavOp::AddressbookQuery => self.query(conn, rng, bi, expect).await,
            CarddavOp::AddressbookMultiget { count } => {
                self.multiget(conn, rng, bi, *count, expect).await
            }
            CarddavOp::SyncCollection => self.sync_collection(conn, bi, expect).await.0.into(),
            CarddavOp::Propfind => self.propfind(conn, bi, expect).await.0.into(),
            CarddavOp::InitialSync(how) => self.initial_sync(conn, bi, *how, expect).await.into(),
            CarddavOp::DeltaSync { batch } => {
                self.delta_sync(conn, bi, *batch, expect).await.into()
            }
        }
    }
}

impl CarddavVu {
    pub(crate) fn new(class: Arc<CarddavClass>, s: Session, ids: VuIds) -> CarddavVu {
        CarddavVu {
            class,
            s,
            ids,
            home: None,
            books: Vec::new(),
        }
    }

    /// Find the address book home (untimed set-up): the class's `addressbook_home` if
    /// it gives one; else by discovery.
    async fn discover(&mut self, conn: &mut Conn) -> Result<(), SetupError> {
        let p = &self.class.params;
        let (given, start) = (p.addressbook_home.as_deref(), p.discovery.as_deref());
        let service = &CARDDAV_SERVICE;
        let (_, home) = dav::find_home(&self.s, &self.ids, conn, given, start, service).await?;
        self.home = Some(home);
        Ok(())
    }
}
