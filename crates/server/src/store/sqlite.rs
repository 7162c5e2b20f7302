//! A real SQLite file (bundled SQLite, WAL): data survives a restart of `loadmix serve`.
//! One connection behind a mutex serialises access, which is also what makes every write
//! batch atomic with respect to the others; each batch is one transaction.

use std::collections::HashMap;
use std::path::Path;
use std::sync::{Mutex, MutexGuard};

use bytes::Bytes;
use rusqlite::{Connection, OptionalExtension, params};

use super::*;

pub(crate) struct SqliteStore {
    conn: Mutex<Connection>,
    /// Each queue's depth once counted, kept by every change after, so a push does not
    /// count the queue again (which costs its depth); taken only with `conn` held.
    depths: Mutex<HashMap<String, u64>>,
}

const SCHEMA: &str = r#"
CREATE TABLE IF NOT EXISTS users(name TEXT PRIMARY KEY, data TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS collections(
    uid TEXT PRIMARY KEY, owner TEXT NOT NULL, name TEXT NOT NULL, description TEXT NOT NULL,
    epoch INTEGER NOT NULL, version INTEGER NOT NULL);
CREATE INDEX IF NOT EXISTS collections_owner ON collections(owner);
CREATE TABLE IF NOT EXISTS items(
    collection TEXT NOT NULL, uid TEXT NOT NULL, name TEXT NOT NULL, version INTEGER NOT NULL,
    data TEXT, modified INTEGER NOT NULL, span_start INTEGER, span_end INTEGER,
    PRIMARY KEY(collection, uid));
CREATE INDEX IF NOT EXISTS items_span ON items(collection, span_start) WHERE data IS NOT NULL;
CREATE UNIQUE INDEX IF NOT EXISTS items_name ON items(collection, name) WHERE data IS NOT NULL;
CREATE INDEX IF NOT EXISTS items_version ON items(collection, version);
CREATE INDEX IF NOT EXISTS items_uid ON items(uid) WHERE data IS NOT NULL;
CREATE TABLE IF NOT EXISTS meta(key TEXT PRIMARY KEY, value INTEGER NOT NULL);
CREATE TABLE IF NOT EXISTS queue(id INTEGER PRIMARY KEY AUTOINCREMENT, queue TEXT NOT NULL, body BLOB NOT NULL);
CREATE INDEX IF NOT EXISTS queue_q ON queue(queue, id);
"#;

impl SqliteStore {
    /// Open (or create) the database file.
    pub(crate) fn open(path: &Path) -> Result<SqliteStore, StoreError> {
        let conn = Connection::open(path)?;
        // WAL lets readers proceed during a write and survives crashes; NORMAL sync is
        // durable across process restarts, which is what a reference server needs.
        conn.pragma_update(None, "journal_mode", "WAL")?;
        conn.pragma_update(None, "synchronous", "NORMAL")?;
        conn.busy_timeout(std::time::Duration::from_secs(5))?;
        conn.execute_batch(SCHEMA)?;
        // Databases made before collections had further properties gain the column.
        let has_props = conn
            .prepare("SELECT 1 FROM pragma_table_info('collections') WHERE name = 'props'")?
            .exists([])?;
        if !has_props {
            conn.execute_batch(
                "ALTER TABLE collections ADD COLUMN props TEXT NOT NULL DEFAULT '{}'",
            )?;
        }
        // Databases made before messages were kept until acknowledged gain the columns
        // that say whether one is out (`taken`) and how often it was handed out.
        for column in ["taken", "handed"] {
            let has = conn
                .prepare("SELECT 1 FROM pragma_table_info('queue') WHERE name = ?1")?
                .exists([column])?;
            if !has {
                conn.execute_batch(&format!(
                    "ALTER TABLE queue ADD COLUMN {column} INTEGER NOT NULL DEFAULT 0"
                ))?;
            }
        }
        // Messages handed to consumers that never settled them when the server stopped
        // (however it stopped) go back to their queues: a receipt promised they are kept.
        conn.execute_batch(
            "CREATE INDEX IF NOT EXISTS queue_ready ON queue(queue, taken, id);
             UPDATE queue SET taken = 0 WHERE taken <> 0;",
        )?;
        Ok(SqliteStore {
            conn: Mutex::new(conn),
            depths: Mutex::new(HashMap::new()),
        })
    }

    fn lock(&self) -> Result<MutexGuard<'_, Connection>, StoreError> {
        self.conn
            .lock()
            .map_err(|_| StoreError::Broken("a request panicked while using the database".into()))
    }
}

fn info_row(r: &rusqlite::Row<'_>) -> rusqlite::Result<CollectionInfo> {
    Ok(CollectionInfo {
        uid: r.get(0)?,
        owner: r.get(1)?,
        name: r.get(2)?,
        description: r.get(3)?,
        epoch: r.get::<_, i64>(4)? as u64,
        version: r.get::<_, i64>(5)? as u64,
        // Written by this store as a JSON object; anything else reads as none.
        props: serde_json::from_str(&r.get::<_, String>(6)?).unwrap_or_default(),
    })
}

const INFO_COLS: &str = "uid, owner, name, description, epoch, version, props";
const ITEM_COLS: &str = "uid, name, version, data, modified";

fn item_row(r: &rusqlite::Row<'_>) -> rusqlite::Result<(String, String, u64, Option<String>, u64)> {
    Ok((
        r.get(0)?,
        r.get(1)?,
        r.get::<_, i64>(2)? as u64,
        r.get(3)?,
        r.get::<_, i64>(4)? as u64,
    ))
}

fn to_item(row: (String, String, u64, Option<String>, u64)) -> Result<Item, StoreError> {
    let (uid, name, version, data, modified_ms) = row;
    let data = match data {
        Some(d) => Some(
            serde_json::from_str(&d)
                .map_err(|e| StoreError::Corrupt(format!("item {uid}: {e}")))?,
        ),
        None => None,
    };
    Ok(Item {
        uid,
        name,
        version,
        data,
        modified_ms,
    })
}

fn collection_of(conn: &Connection, uid: &str) -> Result<Option<CollectionInfo>, StoreError> {
    Ok(conn
        .query_row(
            &format!("SELECT {INFO_COLS} FROM collections WHERE uid = ?1"),
            [uid],
            info_row,
        )
        .optional()?)
}

struct View<'a> {
    conn: &'a Connection,
    col: &'a str,
}

impl WriteView for View<'_> {
    fn by_uid(&self, uid: &str) -> Result<Option<Item>, StoreError> {
        self.conn
            .query_row(
                &format!("SELECT {ITEM_COLS} FROM items WHERE collection = ?1 AND uid = ?2"),
                [self.col, uid],
                item_row,
            )
            .optional()?
            .map(to_item)
            .transpose()
    }
    fn uid_of_name(&self, name: &str) -> Result<Option<String>, StoreError> {
        Ok(self
            .conn
            .query_row(
                "SELECT uid FROM items WHERE collection = ?1 AND name = ?2 AND data IS NOT NULL",
                [self.col, name],
                |r| r.get(0),
            )
            .optional()?)
    }
    fn uid_elsewhere(&self, uid: &str) -> Result<bool, StoreError> {
        Ok(self
            .conn
            .query_row(
                // The same namespace: keys `owner/uid` of this collection's owner.
                &format!("SELECT 1 FROM items WHERE uid = ?1 AND collection <> ?2 AND data IS NOT NULL AND {NAMESPACE_SQL} = ?3 LIMIT 1"),
                [uid, self.col, namespace(self.col)],
                |_| Ok(()),
            )
            .optional()?
            .is_some())
    }
}

/// `span_start` (NULL: no time) and `span_end` (NULL: open-ended recurrence).
fn span_cols(d: Option<&ItemData>) -> (Option<i64>, Option<i64>) {
    match d.and_then(ItemData::span) {
        Some((s, e)) => (Some(s), e),
        None => (None, None),
    }
}

fn json(d: &ItemData) -> Result<String, StoreError> {
    serde_json::to_string(d).map_err(|e| StoreError::Corrupt(e.to_string()))
}

impl Store for SqliteStore {
    fn kind(&self) -> &'static str {
        "sqlite"
    }

    fn put_user(&self, user: &User) -> Result<bool, StoreError> {
        let conn = self.lock()?;
        let data = serde_json::to_string(user).map_err(|e| StoreError::Corrupt(e.to_string()))?;
        let existed = conn
            .query_row("SELECT 1 FROM users WHERE name = ?1", [&user.name], |_| {
                Ok(())
            })
            .optional()?
            .is_some();
        conn.execute(
            "INSERT OR REPLACE INTO users(name, data) VALUES (?1, ?2)",
            params![user.name, data],
        )?;
        Ok(!existed)
    }

    fn user(&self, name: &str) -> Result<Option<User>, StoreError> {
        let conn = self.lock()?;
        let data: Option<String> = conn
            .query_row("SELECT data FROM users WHERE name = ?1", [name], |r| {
                r.get(0)
            })
            .optional()?;
        data.map(|d| {
            serde_json::from_str(&d).map_err(|e| StoreError::Corrupt(format!("user {name}: {e}")))
        })
        .transpose()
    }

    fn create_collection(
        &self,
        uid: &str,
        owner: &str,
        name: &str,
        description: &str,
        items: Vec<(String, ItemData)>,
    ) -> Result<CreateOutcome, StoreError> {
        let mut conn = self.lock()?;
        let tx = conn.transaction()?;
        if collection_of(&tx, uid)?.is_some() {
            return Ok(CreateOutcome::Exists);
        }
        // Epochs only grow, across deletions and restarts, so no token outlives its collection.
        let last: i64 = tx
            .query_row("SELECT value FROM meta WHERE key = 'last_epoch'", [], |r| {
                r.get(0)
            })
            .optional()?
            .unwrap_or(0);
        let epoch = now_ms().max(last as u64 + 1);
        tx.execute(
            "INSERT OR REPLACE INTO meta(key, value) VALUES ('last_epoch', ?1)",
            [epoch as i64],
        )?;
        let version = if items.is_empty() { 0 } else { 1 };
        // Tombstones of an earlier collection with this uid belong to its old life.
        tx.execute("DELETE FROM items WHERE collection = ?1", [uid])?;
        tx.execute(
            "INSERT INTO collections(uid, owner, name, description, epoch, version) VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
            params![uid, owner, name, description, epoch as i64, version as i64],
        )?;
        let now = now_ms() as i64;
        {
            let mut ins = tx.prepare(
                "INSERT INTO items(collection, uid, name, version, data, modified, span_start, span_end) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)",
            )?;
            for (item_uid, data) in &items {
                let taken = tx
                    .query_row(
                        &format!("SELECT 1 FROM items WHERE uid = ?1 AND data IS NOT NULL AND {NAMESPACE_SQL} = ?2 LIMIT 1"),
                        [item_uid.as_str(), namespace(uid)],
                        |_| Ok(()),
                    )
                    .optional()?
                    .is_some();
                if taken {
                    return Err(StoreError::Corrupt(format!(
                        "uid {item_uid} is in use in another collection"
                    )));
                }
                let (ss, se) = span_cols(Some(data));
                ins.execute(params![
                    uid,
                    item_uid,
                    default_name(item_uid),
                    version as i64,
                    json(data)?,
                    now,
                    ss,
                    se
                ])?;
            }
        }
        tx.commit()?;
        Ok(CreateOutcome::Created(CollectionInfo {
            uid: uid.into(),
            owner: owner.into(),
            name: name.into(),
            description: description.into(),
            epoch,
            version,
            props: Default::default(),
        }))
    }

    fn collection(&self, uid: &str) -> Result<Option<CollectionInfo>, StoreError> {
        collection_of(&*self.lock()?, uid)
    }

    fn update_collection(
        &self,
        uid: &str,
        name: Option<&str>,
        description: Option<&str>,
        props: &[(String, Option<String>)],
    ) -> Result<bool, StoreError> {
        let mut conn = self.lock()?;
        let tx = conn.transaction()?;
        let Some(mut info) = collection_of(&tx, uid)? else {
            return Ok(false);
        };
        info.update(name, description, props);
        let json = serde_json::to_string(&info.props)
            .map_err(|e| StoreError::Corrupt(format!("collection properties: {e}")))?;
        tx.execute(
            "UPDATE collections SET name = ?2, description = ?3, props = ?4 WHERE uid = ?1",
            rusqlite::params![uid, info.name, info.description, json],
        )?;
        tx.commit()?;
        Ok(true)
    }

    fn collections_of(&self, owner: &str) -> Result<Vec<CollectionInfo>, StoreError> {
        let conn = self.lock()?;
        let mut st = conn.prepare(&format!(
            "SELECT {INFO_COLS} FROM collections WHERE owner = ?1 ORDER BY uid"
        ))?;
        let rows = st.query_map([owner], info_row)?;
        Ok(rows.collect::<Result<Vec<_>, _>>()?)
    }

    fn delete_collection(&self, uid: &str) -> Result<bool, StoreError> {
        let mut conn = self.lock()?;
        let tx = conn.transaction()?;
        let n = tx.execute("DELETE FROM collections WHERE uid = ?1", [uid])?;
        tx.execute("DELETE FROM items WHERE collection = ?1", [uid])?;
        tx.commit()?;
        Ok(n > 0)
    }

    fn write(
        &self,
        collection: &str,
        ops: Vec<ItemOp>,
        pre: Precondition,
    ) -> Result<WriteOutcome, StoreError> {
        let mut conn = self.lock()?;
        let tx = conn.transaction()?;
        let Some(info) = collection_of(&tx, collection)? else {
            return Ok(WriteOutcome::NoCollection);
        };
        let applies = match decide(
            &info,
            &View {
                conn: &tx,
                col: collection,
            },
            ops,
            &pre,
        )? {
            Ok(a) => a,
            Err(outcome) => return Ok(outcome),
        };
        let version = info.version + 1;
        let now = now_ms() as i64;
        let mut etags = Vec::new();
        {
            let mut up = tx.prepare(
                "INSERT INTO items(collection, uid, name, version, data, modified, span_start, span_end)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)
                 ON CONFLICT(collection, uid) DO UPDATE SET name = excluded.name, version = excluded.version,
                 data = excluded.data, modified = excluded.modified, span_start = excluded.span_start,
                 span_end = excluded.span_end",
            )?;
            for a in &applies {
                let data = a.data.as_ref().map(json).transpose()?;
                let (ss, se) = span_cols(a.data.as_ref());
                up.execute(params![
                    collection,
                    a.uid,
                    a.name,
                    version as i64,
                    data,
                    now,
                    ss,
                    se
                ])?;
                if a.is_put {
                    let item = Item {
                        uid: a.uid.clone(),
                        name: a.name.clone(),
                        version,
                        data: None,
                        modified_ms: 0,
                    };
                    etags.push((a.uid.clone(), item.etag(info.epoch)));
                }
            }
        }
        tx.execute(
            "UPDATE collections SET version = ?1 WHERE uid = ?2",
            params![version as i64, collection],
        )?;
        tx.commit()?;
        Ok(WriteOutcome::Done { version, etags })
    }

    fn items(
        &self,
        collection: &str,
        since: Option<u64>,
    ) -> Result<Option<(CollectionInfo, Vec<Item>)>, StoreError> {
        let conn = self.lock()?;
        let Some(info) = collection_of(&conn, collection)? else {
            return Ok(None);
        };
        let rows: Vec<_> = match since {
            None => {
                let mut st = conn.prepare_cached(&format!(
                    "SELECT {ITEM_COLS} FROM items WHERE collection = ?1 AND data IS NOT NULL ORDER BY version, uid"
                ))?;
                st.query_map([collection], item_row)?
                    .collect::<Result<_, _>>()?
            }
            Some(v) => {
                let mut st = conn.prepare_cached(&format!(
                    "SELECT {ITEM_COLS} FROM items WHERE collection = ?1 AND version > ?2 ORDER BY version, uid"
                ))?;
                st.query_map(params![collection, v as i64], item_row)?
                    .collect::<Result<_, _>>()?
            }
        };
        let items = rows
            .into_iter()
            .map(to_item)
            .collect::<Result<Vec<_>, _>>()?;
        Ok(Some((info, items)))
    }

    fn items_overlapping(
        &self,
        collection: &str,
        start_ms: i64,
        end_ms: i64,
    ) -> Result<Option<(CollectionInfo, Vec<Item>)>, StoreError> {
        let conn = self.lock()?;
        let Some(info) = collection_of(&conn, collection)? else {
            return Ok(None);
        };
        // The same rule as `span_overlaps`, in SQL, so only candidates are decoded.
        let mut st = conn.prepare_cached(&format!(
            "SELECT {ITEM_COLS} FROM items WHERE collection = ?1 AND data IS NOT NULL AND span_start IS NOT NULL
             AND span_start < ?3 AND (span_end IS NULL OR span_end > ?2 OR (span_end = span_start AND span_start >= ?2))
             ORDER BY version, uid"
        ))?;
        let rows: Vec<_> = st
            .query_map(params![collection, start_ms, end_ms], item_row)?
            .collect::<Result<_, _>>()?;
        let items = rows
            .into_iter()
            .map(to_item)
            .collect::<Result<Vec<_>, _>>()?;
        Ok(Some((info, items)))
    }

    fn item_by_name(&self, collection: &str, name: &str) -> Result<Option<Item>, StoreError> {
        let conn = self.lock()?;
        let mut st = conn.prepare_cached(&format!(
            "SELECT {ITEM_COLS} FROM items WHERE collection = ?1 AND name = ?2 AND data IS NOT NULL"
        ))?;
        st.query_row([collection, name], item_row)
            .optional()?
            .map(to_item)
            .transpose()
    }

    fn items_by_uid(&self, uid: &str) -> Result<Vec<(String, Item)>, StoreError> {
        let conn = self.lock()?;
        let mut stmt = conn.prepare_cached(&format!(
            "SELECT collection, {ITEM_COLS} FROM items WHERE uid = ?1 AND data IS NOT NULL ORDER BY collection"
        ))?;
        let rows = stmt.query_map([uid], |r| {
            Ok((
                r.get::<_, String>(0)?,
                (
                    r.get(1)?,
                    r.get(2)?,
                    r.get::<_, i64>(3)? as u64,
                    r.get(4)?,
                    r.get::<_, i64>(5)? as u64,
                ),
            ))
        })?;
        let mut out = Vec::new();
        for row in rows {
            let (c, i) = row?;
            out.push((c, to_item(i)?));
        }
        Ok(out)
    }

    fn queue_push(&self, queue: &str, message: Bytes) -> Result<u64, StoreError> {
        let conn = self.lock()?;
        conn.prepare_cached("INSERT INTO queue(queue, body) VALUES (?1, ?2)")?
            .execute(params![queue, message.as_ref()])?;
        let mut depths = self.depths.lock().unwrap_or_else(|p| p.into_inner());
        let depth = match depths.get_mut(queue) {
            Some(d) => {
                *d += 1;
                *d
            }
            None => {
                let d: i64 = conn.query_row(
                    "SELECT COUNT(*) FROM queue WHERE queue = ?1",
                    [queue],
                    |r| r.get(0),
                )?;
                depths.insert(queue.to_string(), d as u64);
                d as u64
            }
        };
        Ok(depth)
    }

    fn queue_push_many(&self, queues: &[String], message: Bytes) -> Result<(), StoreError> {
        let mut conn = self.lock()?;
        let tx = conn.transaction()?;
        {
            let mut insert = tx.prepare_cached("INSERT INTO queue(queue, body) VALUES (?1, ?2)")?;
            for q in queues {
                insert.execute(params![q, message.as_ref()])?;
            }
        }
        tx.commit()?;
        // A depth not kept yet is counted at the queue's next push, these rows included.
        let mut depths = self.depths.lock().unwrap_or_else(|p| p.into_inner());
        for q in queues {
            if let Some(d) = depths.get_mut(q) {
                *d += 1;
            }
        }
        Ok(())
    }

    fn queue_take(&self, queue: &str, keep: bool) -> Result<Option<Taken>, StoreError> {
        let conn = self.lock()?;
        let sql = match keep {
            true => {
                "UPDATE queue SET taken = 1, handed = handed + 1 WHERE id = (SELECT id FROM queue WHERE queue = ?1 AND taken = 0 ORDER BY id LIMIT 1) RETURNING id, body, handed"
            }
            false => {
                "DELETE FROM queue WHERE id = (SELECT id FROM queue WHERE queue = ?1 AND taken = 0 ORDER BY id LIMIT 1) RETURNING id, body, handed + 1"
            }
        };
        let taken: Option<(i64, Vec<u8>, i64)> = conn
            .prepare_cached(sql)?
            .query_row([queue], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))
            .optional()?;
        if taken.is_some() && !keep {
            self.gone(queue);
        }
        Ok(taken.map(|(id, body, handed)| Taken {
            id: id as u64,
            body: Bytes::from(body),
            redelivered: handed > 1,
        }))
    }

    fn queue_settle(&self, queue: &str, id: u64, done: bool) -> Result<(), StoreError> {
        let conn = self.lock()?;
        let id = i64::try_from(id).unwrap_or(i64::MAX);
        let sql = match done {
            true => "DELETE FROM queue WHERE id = ?1 AND queue = ?2 AND taken = 1",
            false => "UPDATE queue SET taken = 0 WHERE id = ?1 AND queue = ?2 AND taken = 1",
        };
        let changed = conn.prepare_cached(sql)?.execute(params![id, queue])?;
        if done && changed > 0 {
            self.gone(queue);
        }
        Ok(())
    }

    fn queue_clear(&self, queue: &str) -> Result<(), StoreError> {
        let conn = self.lock()?;
        conn.execute("DELETE FROM queue WHERE queue = ?1", [queue])?;
        self.depths
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .remove(queue);
        Ok(())
    }
}

impl SqliteStore {
    /// A message left `queue`: its kept depth falls, and an emptied queue is forgotten.
    fn gone(&self, queue: &str) {
        let mut depths = self.depths.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(d) = depths.get_mut(queue) {
            *d = d.saturating_sub(1);
            if *d == 0 {
                depths.remove(queue);
            }
        }
    }
}

#[cfg(test)]
impl SqliteStore {
    /// How many times SQLite's virtual machine passed 100 instructions while `f` ran: the
    /// work a statement did, independent of the clock.
    pub(super) fn count_steps(&self, f: impl FnOnce()) -> u64 {
        use std::sync::atomic::{AtomicU64, Ordering};
        let n = std::sync::Arc::new(AtomicU64::new(0));
        let counter = n.clone();
        self.lock()
            .unwrap()
            .progress_handler(
                100,
                Some(move || {
                    counter.fetch_add(1, Ordering::Relaxed);
                    false
                }),
            )
            .unwrap();
        f();
        self.lock()
            .unwrap()
            .progress_handler(100, None::<fn() -> bool>)
            .unwrap();
        n.load(Ordering::Relaxed)
    }
}
