//! Where the embedded server keeps its data. A trait so the memory store and, later, the
//! SQLite store (and the Cosmo collections that come with it) sit behind one interface;
//! methods are synchronous because SQLite is, and the memory store never blocks for long.

use std::collections::{HashMap, VecDeque};
use std::sync::Mutex;

use bytes::Bytes;

#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("store is unusable: {0}")]
    Broken(String),
}

/// Storage behind the embedded server's services.
pub trait Store: Send + Sync + 'static {
    /// Short name for reports: `memory`, `sqlite`.
    fn kind(&self) -> &'static str;
    /// Append a message; returns the queue's depth afterwards.
    fn queue_push(&self, queue: &str, message: Bytes) -> Result<u64, StoreError>;
    /// Remove and return the oldest message, if any.
    fn queue_pop(&self, queue: &str) -> Result<Option<Bytes>, StoreError>;
    /// Messages waiting in a queue.
    fn queue_depth(&self, queue: &str) -> Result<u64, StoreError>;
}

/// Everything in process memory; gone when the server stops.
#[derive(Default)]
pub struct MemoryStore {
    queues: Mutex<HashMap<String, VecDeque<Bytes>>>,
}

impl MemoryStore {
    pub fn new() -> MemoryStore {
        MemoryStore::default()
    }

    fn lock(
        &self,
    ) -> Result<std::sync::MutexGuard<'_, HashMap<String, VecDeque<Bytes>>>, StoreError> {
        // A poisoned lock means a handler panicked mid-update; refuse rather than serve
        // possibly half-written data.
        self.queues.lock().map_err(|_| {
            StoreError::Broken("a request panicked while holding the queue lock".into())
        })
    }
}

impl Store for MemoryStore {
    fn kind(&self) -> &'static str {
        "memory"
    }

    fn queue_push(&self, queue: &str, message: Bytes) -> Result<u64, StoreError> {
        let mut q = self.lock()?;
        let entry = q.entry(queue.to_string()).or_default();
        entry.push_back(message);
        Ok(entry.len() as u64)
    }

    fn queue_pop(&self, queue: &str) -> Result<Option<Bytes>, StoreError> {
        Ok(self.lock()?.get_mut(queue).and_then(VecDeque::pop_front))
    }

    fn queue_depth(&self, queue: &str) -> Result<u64, StoreError> {
        Ok(self.lock()?.get(queue).map_or(0, |q| q.len() as u64))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn queue_is_fifo_per_name() {
        let s = MemoryStore::new();
        assert_eq!(s.queue_push("a", Bytes::from_static(b"1")).unwrap(), 1);
        assert_eq!(s.queue_push("a", Bytes::from_static(b"2")).unwrap(), 2);
        s.queue_push("b", Bytes::from_static(b"x")).unwrap();
        assert_eq!(s.queue_pop("a").unwrap().unwrap(), "1");
        assert_eq!(s.queue_depth("a").unwrap(), 1);
        assert_eq!(s.queue_pop("a").unwrap().unwrap(), "2");
        assert!(s.queue_pop("a").unwrap().is_none());
        assert!(s.queue_pop("nope").unwrap().is_none());
        assert_eq!(s.queue_depth("b").unwrap(), 1);
    }
}
