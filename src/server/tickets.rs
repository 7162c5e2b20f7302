//! Cosmo's tickets: keys that let anyone who holds one reach one Morse Code collection
//! without credentials, read-only or read-write, as Chandler shared a collection with
//! people who had no account of the owner's. A publish asks for them with
//! `X-MorseCode-TicketType: read-only read-write` and gets one `X-MorseCode-Ticket:
//! TYPE=KEY` header for each; a request sends its key in `Ticket:`. Tickets live in the
//! server's memory (they do not survive a restart) and go with their collection.

use std::collections::HashMap;
use std::sync::Mutex;

use rand::Rng;

/// The most tickets the server holds at once; a publish past it is refused (507).
pub(crate) const MAX_TICKETS: usize = 100_000;
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

/// One ticket: the store key of its collection and what it allows.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Grant {
    pub(crate) collection: String,
    pub(crate) kind: Kind,
}

/// Every ticket the server has issued and not yet dropped.
#[derive(Default)]
pub(crate) struct Tickets {
    by_key: Mutex<HashMap<String, Grant>>,
}

impl Tickets {
    /// New tickets of `kinds` on `collection`, each with its key; `None` when the server
    /// holds as many as it may.
    pub(crate) fn issue(&self, collection: &str, kinds: &[Kind]) -> Option<Vec<(Kind, String)>> {
        let mut held = self.by_key.lock().unwrap_or_else(|p| p.into_inner());
        if held.len().saturating_add(kinds.len()) > MAX_TICKETS {
            return None;
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
                    collection: collection.to_string(),
                    kind,
                },
            );
            out.push((kind, key));
        }
        Some(out)
    }

    /// What the ticket `key` grants, if the server issued it.
    pub(crate) fn find(&self, key: &str) -> Option<Grant> {
        let held = self.by_key.lock().unwrap_or_else(|p| p.into_inner());
        held.get(key).cloned()
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
        let issued = t
            .issue("alice/c1", &[Kind::ReadOnly, Kind::ReadWrite])
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
    fn ticket_types_are_read_as_cosmo_writes_them() {
        assert_eq!(
            Kind::parse_list("read-only read-write read-only").unwrap(),
            [Kind::ReadOnly, Kind::ReadWrite]
        );
        assert!(Kind::parse_list("read-only owner").is_err());
        assert!(Kind::parse_list("").unwrap().is_empty());
    }
}
