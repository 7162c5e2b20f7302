//! Where the embedded server keeps its data: users, collections (one change counter each),
//! items (with tombstones, so sync can report deletions) and message queues.
//!
//! One trait, two stores: [`MemoryStore`] and [`SqliteStore`] (a real file, WAL, surviving
//! restarts). Every multi-item write is atomic; a store is internally serialised for
//! writes, so concurrent VUs never interleave half of one update with another. Methods are
//! synchronous because SQLite is; they are short enough to call from request handlers.

mod memory;
mod sqlite;

use bytes::Bytes;
pub(crate) use memory::MemoryStore;
use serde::{Deserialize, Serialize};
pub(crate) use sqlite::SqliteStore;
use std::collections::BTreeMap;

use super::model::ItemData;

#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("store is unusable: {0}")]
    Broken(String),
    #[error("database: {0}")]
    Sqlite(#[from] rusqlite::Error),
    #[error("stored data is corrupt: {0}")]
    Corrupt(String),
    /// The store holds as much as it may: a new message is refused, nothing is lost.
    #[error("{0}")]
    Full(String),
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct User {
    pub name: String,
    pub password: String,
    pub first_name: String,
    pub last_name: String,
    pub email: String,
}

/// A collection (a calendar, for CalDAV) and its change counter.
#[derive(Debug, Clone, PartialEq)]
pub struct CollectionInfo {
    pub uid: String,
    pub owner: String,
    pub name: String,
    pub description: String,
    /// Creation time in ms: part of every token, so tokens of a deleted and re-created
    /// collection are never mistaken for current ones.
    pub epoch: u64,
    /// Bumped by every change to an item of the collection.
    pub version: u64,
    /// Further properties a client set (CalDAV's component set, colour, order and dead
    /// properties), by Clark name `{namespace}local`.
    pub props: BTreeMap<String, String>,
}

impl CollectionInfo {
    /// Apply an update: a new name or description when given; properties set, or removed
    /// where the value is `None`.
    pub fn update(
        &mut self,
        name: Option<&str>,
        description: Option<&str>,
        props: &[(String, Option<String>)],
    ) {
        if let Some(n) = name {
            self.name = n.to_string();
        }
        if let Some(d) = description {
            self.description = d.to_string();
        }
        for (k, v) in props {
            match v {
                Some(v) => self.props.insert(k.clone(), v.clone()),
                None => self.props.remove(k),
            };
        }
    }

    /// `epoch-version`: the Morse Code sync token, CalDAV sync token and ctag in one.
    pub fn token(&self) -> String {
        format!("{}-{}", self.epoch, self.version)
    }

    /// The version a token names, if the token belongs to this collection's life.
    pub fn token_version(&self, token: &str) -> Option<u64> {
        let (e, v) = token.trim().rsplit_once('-')?;
        let (e, v): (u64, u64) = (e.parse().ok()?, v.parse().ok()?);
        (e == self.epoch && v <= self.version).then_some(v)
    }
}

/// An item, live or deleted.
#[derive(Debug, Clone, PartialEq)]
pub struct Item {
    pub uid: String,
    /// Resource name within the collection (CalDAV), e.g. `uid.ics`.
    pub name: String,
    /// The collection version of the item's last change.
    pub version: u64,
    /// `None` for a tombstone.
    pub data: Option<ItemData>,
    pub modified_ms: u64,
}

impl Item {
    pub fn etag(&self, epoch: u64) -> String {
        format!("\"{epoch:x}-{}\"", self.version)
    }
}

/// One change in an atomic write.
#[derive(Debug, Clone)]
pub enum ItemOp {
    /// Create or replace; `merge` keeps records the new data does not carry.
    Put {
        uid: String,
        name: Option<String>,
        /// Boxed: the calendar text and timing make it far larger than a delete.
        data: Box<ItemData>,
        merge: bool,
        /// Cosmo's item identity (Morse Code, Atom): the uid may live in one collection
        /// only. CalDAV scopes UIDs to their calendar (RFC 4791), so it sets this false.
        global_uid: bool,
    },
    /// Delete; a missing item is an error only when `must_exist` (CalDAV DELETE), not in
    /// a Morse Code batch that tombstones an item already gone.
    Delete { uid: String, must_exist: bool },
}

/// What must hold for a write to happen.
#[derive(Debug, Clone, PartialEq)]
pub enum Precondition {
    None,
    /// The collection is still at this version (Morse Code update).
    Version(u64),
    /// The named item has this ETag (If-Match).
    ItemEtag {
        uid: String,
        etag: String,
    },
    /// The named item does not exist (If-None-Match: *).
    ItemAbsent {
        uid: String,
    },
}

#[derive(Debug, Clone, PartialEq)]
pub enum WriteOutcome {
    /// Applied: the new collection version and, per put, the item's new ETag.
    Done {
        version: u64,
        etags: Vec<(String, String)>,
    },
    NoCollection,
    /// The collection moved on since the version given.
    Stale,
    PreconditionFailed,
    /// A put names a resource that holds another uid, or a uid held under another name.
    Conflict(String),
    /// A delete names an item that does not exist.
    NoItem,
}

#[derive(Debug, Clone, PartialEq)]
pub enum CreateOutcome {
    Created(CollectionInfo),
    Exists,
}

/// The namespace (owner) part of a collection key `owner/uid`; keys without one share
/// the empty namespace. Cosmo's item identity holds within one namespace.
pub(crate) fn namespace(key: &str) -> &str {
    key.split_once('/').map_or("", |(o, _)| o)
}

/// SQL for the namespace of the `collection` column, as [`namespace`] computes it.
pub(crate) const NAMESPACE_SQL: &str = "(CASE WHEN instr(collection, '/') > 0 THEN substr(collection, 1, instr(collection, '/') - 1) ELSE '' END)";

/// A message handed out of a queue.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Taken {
    /// The store's id for it, which settles it.
    pub id: u64,
    pub body: Bytes,
    /// It was handed out before and given back (a consumer left without settling it).
    pub redelivered: bool,
}

/// Storage behind the embedded server's services.
pub trait Store: Send + Sync + 'static {
    /// Short name for reports: `memory`, `sqlite`.
    fn kind(&self) -> &'static str;

    /// Create or replace an account; true when it is new.
    fn put_user(&self, user: &User) -> Result<bool, StoreError>;
    fn user(&self, name: &str) -> Result<Option<User>, StoreError>;

    /// Create a collection with its first items, atomically.
    fn create_collection(
        &self,
        uid: &str,
        owner: &str,
        name: &str,
        description: &str,
        items: Vec<(String, ItemData)>,
    ) -> Result<CreateOutcome, StoreError>;
    fn collection(&self, uid: &str) -> Result<Option<CollectionInfo>, StoreError>;
    /// Change a collection's name or description (when given) and set or remove further
    /// properties (`None` removes). False when there is no such collection.
    fn update_collection(
        &self,
        uid: &str,
        name: Option<&str>,
        description: Option<&str>,
        props: &[(String, Option<String>)],
    ) -> Result<bool, StoreError>;
    fn collections_of(&self, owner: &str) -> Result<Vec<CollectionInfo>, StoreError>;
    fn delete_collection(&self, uid: &str) -> Result<bool, StoreError>;

    /// Apply `ops` atomically if `pre` holds.
    fn write(
        &self,
        collection: &str,
        ops: Vec<ItemOp>,
        pre: Precondition,
    ) -> Result<WriteOutcome, StoreError>;
    /// Items changed after `since` (tombstones included), or every live item when `None`;
    /// with the collection as it was when read.
    fn items(
        &self,
        collection: &str,
        since: Option<u64>,
    ) -> Result<Option<(CollectionInfo, Vec<Item>)>, StoreError>;
    /// Live items that may overlap [start, end) (ms since the epoch): every item that does,
    /// and recurring ones that might; the caller checks occurrences exactly.
    fn items_overlapping(
        &self,
        collection: &str,
        start_ms: i64,
        end_ms: i64,
    ) -> Result<Option<(CollectionInfo, Vec<Item>)>, StoreError>;
    fn item_by_name(&self, collection: &str, name: &str) -> Result<Option<Item>, StoreError>;
    /// A live item by uid in any collection, with its collection's uid.
    /// Every live item with this uid, with its collection: one for Cosmo's items, several
    /// when CalDAV calendars hold the same UID.
    fn items_by_uid(&self, uid: &str) -> Result<Vec<(String, Item)>, StoreError>;

    /// Append a message; returns the queue's depth afterwards (taken messages included),
    /// at a cost that does not grow with it.
    fn queue_push(&self, queue: &str, message: Bytes) -> Result<u64, StoreError>;
    /// Append one message to each of `queues` (a topic's subscriptions), as one write
    /// where the store has transactions.
    fn queue_push_many(&self, queues: &[String], message: Bytes) -> Result<(), StoreError> {
        for q in queues {
            self.queue_push(q, message.clone())?;
        }
        Ok(())
    }
    /// Remove and return the oldest message not taken, if any.
    fn queue_pop(&self, queue: &str) -> Result<Option<Bytes>, StoreError> {
        Ok(self.queue_take(queue, false)?.map(|t| t.body))
    }
    /// Hand out the oldest message not taken: gone at once, or (`keep`) kept stored and
    /// taken until [`Store::queue_settle`], as a broker's dispatch to a consumer that must
    /// still acknowledge it. A store that outlives its server gives back, when it opens
    /// again, whatever was taken and never settled.
    fn queue_take(&self, queue: &str, keep: bool) -> Result<Option<Taken>, StoreError>;
    /// A taken message acknowledged (`done`: removed) or given back (ready again, in its
    /// old place). An id that is not taken is let be.
    fn queue_settle(&self, queue: &str, id: u64, done: bool) -> Result<(), StoreError>;
    /// Remove everything the queue holds, taken or not.
    fn queue_clear(&self, queue: &str) -> Result<(), StoreError>;
}

/// What a store must look up to decide a write.
pub(crate) trait WriteView {
    /// The item with this uid in the collection (live or tombstone).
    fn by_uid(&self, uid: &str) -> Result<Option<Item>, StoreError>;
    /// The uid of the live item holding this resource name.
    fn uid_of_name(&self, name: &str) -> Result<Option<String>, StoreError>;
    /// Whether a live item with this uid exists in another collection.
    fn uid_elsewhere(&self, uid: &str) -> Result<bool, StoreError>;
}

/// A decided change: the full new state of one item (`data: None` deletes).
pub(crate) struct Apply {
    pub uid: String,
    pub name: String,
    pub data: Option<ItemData>,
    pub is_put: bool,
}

/// What a write's precondition refuses it with, if it does: a collection version that
/// has moved on (`Stale`), an item whose ETag is not the one given, or one that exists
/// where it must not.
fn precondition_fails(
    info: &CollectionInfo,
    view: &dyn WriteView,
    pre: &Precondition,
) -> Result<Option<WriteOutcome>, StoreError> {
    match pre {
        Precondition::None => {}
        Precondition::Version(v) => {
            if *v != info.version {
                return Ok(Some(WriteOutcome::Stale));
            }
        }
        Precondition::ItemEtag { uid, etag } => {
            let current = view
                .by_uid(uid)?
                .filter(|i| i.data.is_some())
                .map(|i| i.etag(info.epoch));
            let matches = current.as_deref().is_some_and(|c| {
                etag == "*"
                    || c == etag
                    || c.trim_start_matches("W/") == etag.trim_start_matches("W/")
            });
            if !matches {
                return Ok(Some(WriteOutcome::PreconditionFailed));
            }
        }
        Precondition::ItemAbsent { uid } => {
            if view.by_uid(uid)?.is_some_and(|i| i.data.is_some()) {
                return Ok(Some(WriteOutcome::PreconditionFailed));
            }
        }
    }
    Ok(None)
}

/// Check a write against the collection as it is, and work out what to store. Shared by
/// both stores so they cannot disagree on the rules.
pub(crate) fn decide(
    info: &CollectionInfo,
    view: &dyn WriteView,
    ops: Vec<ItemOp>,
    pre: &Precondition,
) -> Result<Result<Vec<Apply>, WriteOutcome>, StoreError> {
    if let Some(refused) = precondition_fails(info, view, pre)? {
        return Ok(Err(refused));
    }
    let mut out: Vec<Apply> = Vec::with_capacity(ops.len());
    for op in ops {
        match op {
            ItemOp::Put {
                uid,
                name,
                data,
                merge,
                global_uid,
            } => {
                if global_uid && view.uid_elsewhere(&uid)? {
                    return Ok(Err(WriteOutcome::Conflict(format!(
                        "uid {uid} is in use in another collection"
                    ))));
                }
                // An earlier op of this batch may have touched the same item.
                let existing = match out.iter().rposition(|a| a.uid == uid) {
                    Some(i) => Some(out.remove(i)).map(|a| Item {
                        uid: a.uid,
                        name: a.name,
                        version: 0,
                        data: a.data,
                        modified_ms: 0,
                    }),
                    None => view.by_uid(&uid)?,
                };
                let live = existing.as_ref().and_then(|i| i.data.clone());
                if let (Some(n), Some(e)) = (&name, &existing)
                    && live.is_some()
                    && &e.name != n
                {
                    return Ok(Err(WriteOutcome::Conflict(format!(
                        "uid {uid} is stored as {}",
                        e.name
                    ))));
                }
                let name = match (&name, &existing) {
                    (Some(n), _) => n.clone(),
                    (None, Some(e)) if live.is_some() => e.name.clone(),
                    _ => default_name(&uid),
                };
                if let Some(holder) = view.uid_of_name(&name)?
                    && holder != uid
                    && !out.iter().any(|a| a.uid == holder && a.data.is_none())
                {
                    return Ok(Err(WriteOutcome::Conflict(format!(
                        "{name} holds another item ({holder})"
                    ))));
                }
                let data = match (live, merge) {
                    (Some(mut old), true) => {
                        old.merge(*data);
                        old
                    }
                    _ => *data,
                };
                out.push(Apply {
                    uid,
                    name,
                    data: Some(data),
                    is_put: true,
                });
            }
            ItemOp::Delete { uid, must_exist } => {
                let existing = match out.iter().rposition(|a| a.uid == uid) {
                    Some(i) => {
                        let a = out.remove(i);
                        a.data.map(|_| a.name)
                    }
                    None => view
                        .by_uid(&uid)?
                        .filter(|i| i.data.is_some())
                        .map(|i| i.name),
                };
                match existing {
                    Some(name) => out.push(Apply {
                        uid,
                        name,
                        data: None,
                        is_put: false,
                    }),
                    None if must_exist => return Ok(Err(WriteOutcome::NoItem)),
                    None => {}
                }
            }
        }
    }
    Ok(Ok(out))
}

/// Whether an item's [`ItemData::span`] may overlap [start, end).
pub(crate) fn span_overlaps(span: Option<(i64, Option<i64>)>, start_ms: i64, end_ms: i64) -> bool {
    match span {
        None => false,
        Some((s, None)) => s < end_ms,
        // Zero-length events at the window's start count, as in `Timing::occurrences`.
        Some((s, Some(e))) => s < end_ms && (e > start_ms || (e == s && s >= start_ms)),
    }
}

pub(crate) fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

/// Default resource name of an item created without one (Morse Code, Atom).
pub(crate) fn default_name(uid: &str) -> String {
    format!("{uid}.ics")
}

#[cfg(test)]
mod tests;
