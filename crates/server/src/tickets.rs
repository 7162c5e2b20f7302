//! Cosmo's tickets: keys that let anyone who holds one reach one Morse Code collection
//! without credentials, read-only or read-write, as Chandler shared a collection with
//! people who had no account of the owner's. A publish asks for them with
//! `X-MorseCode-TicketType: read-only read-write` and gets one `X-MorseCode-Ticket:
//! TYPE=KEY` header for each; a request sends its key in `Ticket:`. Tickets live in the
//! server's memory (they do not survive a restart) and belong to one collection's
//! identity, not its name: its creation epoch is part of the grant, so a ticket dies with
//! its collection however it is deleted, and never opens a later one of the same name.
//! One account holds at most [`MAX_TICKETS_PER_OWNER`] of them.

use std::collections::HashMap;
use std::sync::Mutex;

use rand::Rng;

/// The most tickets the server holds at once; a publish past it is refused (507).
pub(crate) const MAX_TICKETS: usize = 100_000;
/// The most one account holds, so that no one takes what others need.
pub(crate) const MAX_TICKETS_PER_OWNER: usize = MAX_TICKETS / 100;
/// The request header that carries a ticket's key.
pub(crate) const TICKET: &str = "ticket";

/// What a ticket lets its holder do.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kind {
    ReadOnly,
    ReadWrite,
}

impl Kind {
    pub(crate) fn name(self) -> &'static str {
        match self {
            Kind::ReadOnly => "read-only",
            Kind::ReadWrite => "read-write",
        }
    }

    /// The kinds an `X-MorseCode-TicketType` value asks for (space-separated, each
    /// once), or the word that is none.
    pub(crate) fn parse_list(value: &str) -> Result<Vec<Kind>, String> {
        let mut out = Vec::new();
        for w in value.split_ascii_whitespace() {
            let k = match w {
                "read-only" => Kind::ReadOnly,
                "read-write" => Kind::ReadWrite,
                other => return Err(format!("unknown ticket type '{other}'")),
            };
            if !out.contains(&k) {
                out.push(k);
            }
        }
        Ok(out)
    }
}

/// One ticket: the collection it opens (store key and creation epoch), whose it is, and
/// what it allows.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Grant {
    pub(crate) collection: String,
    pub(crate) epoch: u64,
    pub(crate) owner: String,
    pub(crate) kind: Kind,
}

/// The collection a ticket is issued on: its store key, creation epoch and owner.
pub(crate) struct On<'a> {
    pub(crate) collection: &'a str,
    pub(crate) epoch: u64,
    pub(crate) owner: &'a str,
}

/// Why no tickets were issued.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Full {
    /// The server holds [`MAX_TICKETS`].
    Server,
    /// The owner holds [`MAX_TICKETS_PER_OWNER`].
    Owner,
}

/// Every ticket the server has issued and not yet dropped.
#[derive(Default)]
pub(crate) struct Tickets {
    by_key: Mutex<HashMap<String, Grant>>,
}

impl Tickets {
    /// New tickets of `kinds` on `on`, each with its key. At a bound, the tickets whose
    /// collection is gone (`alive` says no) are dropped first; still at it, none.
    pub(crate) fn issue(
        &self,
        on: On<'_>,
        kinds: &[Kind],
        alive: impl Fn(&Grant) -> bool,
    ) -> Result<Vec<(Kind, String)>, Full> {
        let mut held = self.by_key.lock().unwrap_or_else(|p| p.into_inner());
        let owners =
            |held: &HashMap<String, Grant>| held.values().filter(|g| g.owner == on.owner).count();
        let over = |held: &HashMap<String, Grant>| {
            if held.len().saturating_add(kinds.len()) > MAX_TICKETS {
                Some(Full::Server)
            } else if owners(held).saturating_add(kinds.len()) > MAX_TICKETS_PER_OWNER {
                Some(Full::Owner)
            } else {
                None
            }
        };
        if over(&held).is_some() {
            held.retain(|_, g| alive(g));
        }
        if let Some(full) = over(&held) {
            return Err(full);
        }
        let mut rng = rand::rng();
        let mut out = Vec::with_capacity(kinds.len());
        for &kind in kinds {
            let key = loop {
                let k = format!("{:016x}{:016x}", rng.next_u64(), rng.next_u64());
                if !held.contains_key(&k) {
                    break k;
                }
            };
            held.insert(
                key.clone(),
                Grant {
                    collection: on.collection.to_string(),
                    epoch: on.epoch,
                    owner: on.owner.to_string(),
                    kind,
                },
            );
            out.push((kind, key));
        }
        Ok(out)
    }

    /// What the ticket `key` grants, if the server issued it.
    pub(crate) fn find(&self, key: &str) -> Option<Grant> {
        let held = self.by_key.lock().unwrap_or_else(|p| p.into_inner());
        held.get(key).cloned()
    }

    /// Forget the ticket `key` (its collection is gone).
    pub(crate) fn forget(&self, key: &str) {
        let mut held = self.by_key.lock().unwrap_or_else(|p| p.into_inner());
        held.remove(key);
    }

    /// The tickets of a collection that is gone.
    pub(crate) fn drop_collection(&self, collection: &str) {
        let mut held = self.by_key.lock().unwrap_or_else(|p| p.into_inner());
        held.retain(|_, g| g.collection != collection);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tickets_are_issued_found_and_dropped_with_their_collection() {
        let t = Tickets::default();
        let on = On {
            collection: "alice/c1",
            epoch: 7,
            owner: "alice",
        };
        let issued = t
            .issue(on, &[Kind::ReadOnly, Kind::ReadWrite], |_| true)
            .unwrap();
        assert_eq!(issued.len(), 2);
        assert_ne!(issued[0].1, issued[1].1);
        let g = t.find(&issued[1].1).unwrap();
        assert_eq!(
            (g.collection.as_str(), g.kind),
            ("alice/c1", Kind::ReadWrite)
        );
        assert!(t.find("nope").is_none());
        t.drop_collection("alice/c1");
        assert!(t.find(&issued[0].1).is_none());
    }

    #[test]
    fn one_account_holds_its_share_and_its_dead_tickets_make_room() {
        let t = Tickets::default();
        let on = |owner, epoch| On {
            collection: "c",
            epoch,
            owner,
        };
        for _ in 0..MAX_TICKETS_PER_OWNER {
            t.issue(on("mallory", 1), &[Kind::ReadOnly], |_| true)
                .unwrap();
        }
        assert_eq!(
            t.issue(on("mallory", 1), &[Kind::ReadOnly], |_| true),
            Err(Full::Owner)
        );
        // Another account is not stopped by the one that took its share.
        assert!(
            t.issue(on("alice", 2), &[Kind::ReadWrite], |_| true)
                .is_ok()
        );
        // Once mallory's collection is gone, its tickets are dropped to make room.
        let new = t.issue(on("mallory", 3), &[Kind::ReadOnly], |g| g.epoch != 1);
        assert_eq!(new.map(|v| v.len()), Ok(1));
        assert_eq!(t.by_key.lock().unwrap().len(), 2);
    }

    #[test]
    fn ticket_types_are_read_as_cosmo_writes_them() {
        assert_eq!(
            Kind::parse_list("read-only read-write read-only").unwrap(),
            [Kind::ReadOnly, Kind::ReadWrite]
        );
        assert!(Kind::parse_list("read-only owner").is_err());
        assert!(Kind::parse_list("").unwrap().is_empty());
    }
}
