//! Everything in process memory, behind one reader-writer lock: reads run in parallel, a
//! write holds the lock for its whole batch. Gone when the server stops.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::{RwLock, RwLockReadGuard, RwLockWriteGuard};

use bytes::Bytes;

use super::*;

#[derive(Default)]
struct Col {
    info: Option<CollectionInfo>,
    items: HashMap<String, Item>,
    /// Resource name -> uid, live items only.
    names: HashMap<String, String>,
}

#[derive(Default)]
struct State {
    users: HashMap<String, User>,
    cols: HashMap<String, Col>,
    /// Live item uid -> collection uid.
    /// Item uid to the collections holding it live (one, unless CalDAV calendars share
    /// a UID).
    index: HashMap<String, Vec<String>>,
    /// Only queues that hold something: an emptied one is forgotten.
    queues: HashMap<String, Queue>,
    /// Bytes of every queue's messages, ready and taken: what the queues cost in memory.
    queued_bytes: u64,
    last_epoch: u64,
    last_message: u64,
}

/// A queue's messages by id (the order they came in): those ready to hand out, and those
/// handed out and not yet settled.
#[derive(Default)]
struct Queue {
    ready: BTreeMap<u64, Bytes>,
    taken: HashMap<u64, Bytes>,
    /// Ready ids that were taken before.
    given_back: HashSet<u64>,
}

impl Queue {
    fn depth(&self) -> usize {
        self.ready.len() + self.taken.len()
    }
}

/// Bytes the queues of a memory store may hold in all (message bodies): past it a new
/// message is refused, as ActiveMQ refuses a send past its memory limit, instead of the
/// server growing until the machine ends it.
pub(crate) const MAX_QUEUED_BYTES: u64 = 1 << 30;

pub(crate) struct MemoryStore {
    state: RwLock<State>,
    max_queued_bytes: u64,
}

impl Default for MemoryStore {
    fn default() -> Self {
        MemoryStore::with_queue_bound(MAX_QUEUED_BYTES)
    }
}

impl MemoryStore {
    pub(crate) fn new() -> MemoryStore {
        MemoryStore::default()
    }

    /// A store whose queues hold at most `bytes` of messages in all.
    pub(crate) fn with_queue_bound(bytes: u64) -> MemoryStore {
        MemoryStore {
            state: RwLock::new(State::default()),
            max_queued_bytes: bytes,
        }
    }

    // A poisoned lock means a handler panicked mid-update; refuse rather than serve
    // possibly half-written data.
    fn read(&self) -> Result<RwLockReadGuard<'_, State>, StoreError> {
        self.state
            .read()
            .map_err(|_| StoreError::Broken("a request panicked while writing".into()))
    }
    fn write_lock(&self) -> Result<RwLockWriteGuard<'_, State>, StoreError> {
        self.state
            .write()
            .map_err(|_| StoreError::Broken("a request panicked while writing".into()))
    }
}

struct View<'a> {
    st: &'a State,
    col: &'a str,
}

impl WriteView for View<'_> {
    fn by_uid(&self, uid: &str) -> Result<Option<Item>, StoreError> {
        Ok(self
            .st
            .cols
            .get(self.col)
            .and_then(|c| c.items.get(uid))
            .cloned())
    }
    fn uid_of_name(&self, name: &str) -> Result<Option<String>, StoreError> {
        Ok(self
            .st
            .cols
            .get(self.col)
            .and_then(|c| c.names.get(name))
            .cloned())
    }
    fn uid_elsewhere(&self, uid: &str) -> Result<bool, StoreError> {
        let ns = namespace(self.col);
        Ok(self
            .st
            .index
            .get(uid)
            .is_some_and(|cs| cs.iter().any(|c| c != self.col && namespace(c) == ns)))
    }
}

impl Store for MemoryStore {
    fn kind(&self) -> &'static str {
        "memory"
    }

    fn put_user(&self, user: &User) -> Result<bool, StoreError> {
        Ok(self
            .write_lock()?
            .users
            .insert(user.name.clone(), user.clone())
            .is_none())
    }

    fn user(&self, name: &str) -> Result<Option<User>, StoreError> {
        Ok(self.read()?.users.get(name).cloned())
    }

    fn create_collection(
        &self,
        uid: &str,
        owner: &str,
        name: &str,
        description: &str,
        items: Vec<(String, ItemData)>,
    ) -> Result<CreateOutcome, StoreError> {
        let mut st = self.write_lock()?;
        if st.cols.get(uid).is_some_and(|c| c.info.is_some()) {
            return Ok(CreateOutcome::Exists);
        }
        let ns = namespace(uid);
        if let Some((u, _)) = items.iter().find(|(u, _)| {
            st.index
                .get(u)
                .is_some_and(|cs| cs.iter().any(|c| namespace(c) == ns))
        }) {
            return Err(StoreError::Corrupt(format!(
                "uid {u} is in use in another collection"
            )));
        }
        let epoch = now_ms().max(st.last_epoch + 1);
        st.last_epoch = epoch;
        let version = if items.is_empty() { 0 } else { 1 };
        let info = CollectionInfo {
            uid: uid.into(),
            owner: owner.into(),
            name: name.into(),
            description: description.into(),
            epoch,
            version,
            props: Default::default(),
        };
        let now = now_ms();
        let mut col = Col {
            info: Some(info.clone()),
            ..Col::default()
        };
        for (item_uid, data) in items {
            let n = default_name(&item_uid);
            col.names.insert(n.clone(), item_uid.clone());
            st.index
                .entry(item_uid.clone())
                .or_default()
                .push(uid.into());
            col.items.insert(
                item_uid.clone(),
                Item {
                    uid: item_uid,
                    name: n,
                    version,
                    data: Some(data),
                    modified_ms: now,
                },
            );
        }
        st.cols.insert(uid.into(), col);
        Ok(CreateOutcome::Created(info))
    }

    fn collection(&self, uid: &str) -> Result<Option<CollectionInfo>, StoreError> {
        Ok(self.read()?.cols.get(uid).and_then(|c| c.info.clone()))
    }

    fn update_collection(
        &self,
        uid: &str,
        name: Option<&str>,
        description: Option<&str>,
        props: &[(String, Option<String>)],
    ) -> Result<bool, StoreError> {
        let mut st = self.write_lock()?;
        let Some(info) = st.cols.get_mut(uid).and_then(|c| c.info.as_mut()) else {
            return Ok(false);
        };
        info.update(name, description, props);
        Ok(true)
    }

    fn collections_of(&self, owner: &str) -> Result<Vec<CollectionInfo>, StoreError> {
        let st = self.read()?;
        let mut v: Vec<CollectionInfo> = st
            .cols
            .values()
            .filter_map(|c| c.info.clone())
            .filter(|i| i.owner == owner)
            .collect();
        v.sort_by(|a, b| a.uid.cmp(&b.uid));
        Ok(v)
    }

    fn delete_collection(&self, uid: &str) -> Result<bool, StoreError> {
        let mut st = self.write_lock()?;
        match st.cols.remove(uid) {
            Some(c) => {
                for (u, i) in &c.items {
                    if i.data.is_some() {
                        unindex(&mut st.index, u, uid);
                    }
                }
                Ok(c.info.is_some())
            }
            None => Ok(false),
        }
    }

    fn write(
        &self,
        collection: &str,
        ops: Vec<ItemOp>,
        pre: Precondition,
    ) -> Result<WriteOutcome, StoreError> {
        let mut st = self.write_lock()?;
        let Some(info) = st.cols.get(collection).and_then(|c| c.info.clone()) else {
            return Ok(WriteOutcome::NoCollection);
        };
        let applies = match decide(
            &info,
            &View {
                st: &st,
                col: collection,
            },
            ops,
            &pre,
        )? {
            Ok(a) => a,
            Err(outcome) => return Ok(outcome),
        };
        let version = info.version + 1;
        let now = now_ms();
        let mut etags = Vec::new();
        for a in applies {
            let live = a.data.is_some();
            if live {
                let cs = st.index.entry(a.uid.clone()).or_default();
                if !cs.iter().any(|c| c == collection) {
                    cs.push(collection.into());
                }
            } else {
                unindex(&mut st.index, &a.uid, collection);
            }
            let col = st
                .cols
                .get_mut(collection)
                .ok_or_else(|| StoreError::Broken("collection vanished".into()))?;
            if live {
                col.names.insert(a.name.clone(), a.uid.clone());
            } else {
                col.names.remove(&a.name);
            }
            let item = Item {
                uid: a.uid.clone(),
                name: a.name,
                version,
                data: a.data,
                modified_ms: now,
            };
            if a.is_put {
                etags.push((a.uid.clone(), item.etag(info.epoch)));
            }
            col.items.insert(a.uid, item);
        }
        if let Some(i) = st.cols.get_mut(collection).and_then(|c| c.info.as_mut()) {
            i.version = version;
        }
        Ok(WriteOutcome::Done { version, etags })
    }

    fn items(
        &self,
        collection: &str,
        since: Option<u64>,
    ) -> Result<Option<(CollectionInfo, Vec<Item>)>, StoreError> {
        let st = self.read()?;
        let Some(col) = st.cols.get(collection) else {
            return Ok(None);
        };
        let Some(info) = col.info.clone() else {
            return Ok(None);
        };
        let mut v: Vec<Item> = col
            .items
            .values()
            .filter(|i| match since {
                None => i.data.is_some(),
                Some(s) => i.version > s,
            })
            .cloned()
            .collect();
        v.sort_by(|a, b| a.version.cmp(&b.version).then_with(|| a.uid.cmp(&b.uid)));
        Ok(Some((info, v)))
    }

    fn items_overlapping(
        &self,
        collection: &str,
        start_ms: i64,
        end_ms: i64,
    ) -> Result<Option<(CollectionInfo, Vec<Item>)>, StoreError> {
        let st = self.read()?;
        let Some(col) = st.cols.get(collection) else {
            return Ok(None);
        };
        let Some(info) = col.info.clone() else {
            return Ok(None);
        };
        // Filter before cloning: a month out of a big calendar is a small share of it.
        let mut v: Vec<Item> = col
            .items
            .values()
            .filter(|i| {
                i.data
                    .as_ref()
                    .is_some_and(|d| span_overlaps(d.span(), start_ms, end_ms))
            })
            .cloned()
            .collect();
        v.sort_by(|a, b| a.version.cmp(&b.version).then_with(|| a.uid.cmp(&b.uid)));
        Ok(Some((info, v)))
    }

    fn item_by_name(&self, collection: &str, name: &str) -> Result<Option<Item>, StoreError> {
        let st = self.read()?;
        let Some(col) = st.cols.get(collection) else {
            return Ok(None);
        };
        Ok(col.names.get(name).and_then(|u| col.items.get(u)).cloned())
    }

    fn items_by_uid(&self, uid: &str) -> Result<Vec<(String, Item)>, StoreError> {
        let st = self.read()?;
        let Some(cols) = st.index.get(uid) else {
            return Ok(Vec::new());
        };
        Ok(cols
            .iter()
            .filter_map(|col| {
                st.cols
                    .get(col)
                    .and_then(|c| c.items.get(uid))
                    .filter(|i| i.data.is_some())
                    .map(|i| (col.clone(), i.clone()))
            })
            .collect())
    }

    fn queue_push(&self, queue: &str, message: Bytes) -> Result<u64, StoreError> {
        let mut st = self.write_lock()?;
        let size = message.len() as u64;
        if st.queued_bytes.saturating_add(size) > self.max_queued_bytes {
            return Err(StoreError::Full(format!(
                "the queues hold {} MiB of messages, their most in memory",
                self.max_queued_bytes >> 20
            )));
        }
        st.queued_bytes += size;
        st.last_message += 1;
        let id = st.last_message;
        let q = st.queues.entry(queue.to_string()).or_default();
        q.ready.insert(id, message);
        Ok(q.depth() as u64)
    }

    fn queue_take(&self, queue: &str, keep: bool) -> Result<Option<Taken>, StoreError> {
        let mut st = self.write_lock()?;
        let Some(q) = st.queues.get_mut(queue) else {
            return Ok(None);
        };
        let taken = q.ready.pop_first().map(|(id, body)| Taken {
            id,
            body,
            redelivered: q.given_back.remove(&id),
        });
        match (keep, &taken) {
            (true, Some(t)) => {
                q.taken.insert(t.id, t.body.clone());
            }
            (false, Some(t)) => {
                st.queued_bytes = st.queued_bytes.saturating_sub(t.body.len() as u64)
            }
            _ => {}
        }
        forget_if_empty(&mut st, queue);
        Ok(taken)
    }

    fn queue_settle(&self, queue: &str, id: u64, done: bool) -> Result<(), StoreError> {
        let mut st = self.write_lock()?;
        let Some(q) = st.queues.get_mut(queue) else {
            return Ok(());
        };
        match q.taken.remove(&id) {
            Some(m) if !done => {
                q.ready.insert(id, m);
                q.given_back.insert(id);
            }
            Some(m) => st.queued_bytes = st.queued_bytes.saturating_sub(m.len() as u64),
            None => {}
        }
        forget_if_empty(&mut st, queue);
        Ok(())
    }

    fn queue_clear(&self, queue: &str) -> Result<(), StoreError> {
        let mut st = self.write_lock()?;
        if let Some(q) = st.queues.remove(queue) {
            let held: u64 = q
                .ready
                .values()
                .chain(q.taken.values())
                .map(|m| m.len() as u64)
                .sum();
            st.queued_bytes = st.queued_bytes.saturating_sub(held);
        }
        Ok(())
    }
}

/// An emptied queue is forgotten, so names used once do not stay for good.
fn forget_if_empty(st: &mut State, queue: &str) {
    if st.queues.get(queue).is_some_and(|q| q.depth() == 0) {
        st.queues.remove(queue);
    }
}

/// Forget that `collection` holds `uid` live.
fn unindex(index: &mut HashMap<String, Vec<String>>, uid: &str, collection: &str) {
    if let Some(cs) = index.get_mut(uid) {
        cs.retain(|c| c != collection);
        if cs.is_empty() {
            index.remove(uid);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_queues_hold_a_bounded_number_of_bytes_and_give_them_back() {
        let s = MemoryStore::with_queue_bound(100);
        let msg = |n: usize| Bytes::from(vec![b'x'; n]);
        s.queue_push("a", msg(60)).unwrap();
        let full = s.queue_push("b", msg(50)).unwrap_err();
        assert!(matches!(full, StoreError::Full(_)), "{full}");
        // Taken and kept until acknowledged: still held.
        let t = s.queue_take("a", true).unwrap().unwrap();
        assert!(s.queue_push("b", msg(50)).is_err());
        // Given back, then taken for good: gone.
        s.queue_settle("a", t.id, false).unwrap();
        assert!(s.queue_push("b", msg(50)).is_err());
        s.queue_take("a", false).unwrap().unwrap();
        s.queue_push("b", msg(50)).unwrap();
        s.queue_push("b", msg(50)).unwrap();
        assert!(s.queue_push("c", msg(1)).is_err());
        // Acknowledged and cleared: gone too.
        let t = s.queue_take("b", true).unwrap().unwrap();
        s.queue_settle("b", t.id, true).unwrap();
        s.queue_push("c", msg(50)).unwrap();
        s.queue_clear("b").unwrap();
        s.queue_clear("c").unwrap();
        s.queue_push("d", msg(100)).unwrap();
    }
}
