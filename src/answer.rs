//! What a server answered one request, in its protocol's own words, as a 4-byte value.
//!
//! An HTTP answer is its status code. Any other protocol's answer is named: the protocol,
//! the answer's name (`RECEIPT`, `ERROR`, `basic.nack`, `channel.close`), an optional
//! code (an AMQP reply code) and an optional reason (a STOMP ERROR's `message` header, an
//! AMQP reply text). Samples carry an [`Answer`], never a name, so recording one costs
//! no allocation: named answers are interned once in a process-wide table and the sample
//! holds the entry's index, as metrics hold label indices.
//!
//! Interning takes a lock. A driver interns the answers it expects (a receipt, a confirm)
//! once, when its class is built, and keeps the [`Answer`]; only an answer that brings a
//! reason of its own (an error's text) is interned as it arrives, and that is a failure
//! path. The table is bounded: past [`MAX_NAMED`] distinct answers, a new reason is
//! dropped and the answer counts under its protocol, name and code alone.

use std::collections::HashMap;
use std::sync::{Mutex, OnceLock};

/// A protocol's answer to one request. `Answer::NONE` when nothing came back.
///
/// Values below 2^16 are HTTP statuses (0 is none); the rest index the named table.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Answer(u32);

/// A named answer, as reports show it.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Named {
    /// The protocol that answered: `stomp`, `amqp`.
    pub protocol: Box<str>,
    /// The answer's name in that protocol: `RECEIPT`, `ERROR`, `basic.ack`.
    pub name: Box<str>,
    /// A numeric code the answer carries (an AMQP reply code).
    pub code: Option<u16>,
    /// The text the answer carries (at most [`MAX_REASON`] bytes).
    pub reason: Option<Box<str>>,
}

/// Distinct named answers one process keeps; more reasons are not kept apart.
pub(crate) const MAX_NAMED: usize = 4096;
/// A protocol or answer name, or a reason, longer than this is cut (at a character boundary) before it is interned.
pub(crate) const MAX_REASON: usize = 200;

const NAMED_BASE: u32 = 1 << 16;

impl Answer {
    /// No answer arrived (a connection that failed, a timeout).
    pub const NONE: Answer = Answer(0);

    /// An HTTP status code.
    pub const fn http(status: u16) -> Answer {
        Answer(status as u32)
    }

    /// A named answer of a protocol other than HTTP, interned (see the module's header).
    pub fn named(protocol: &str, name: &str, code: Option<u16>, reason: Option<&str>) -> Answer {
        table().intern(Named {
            protocol: cut(protocol, MAX_REASON).into(),
            name: cut(name, MAX_REASON).into(),
            code,
            reason: reason.map(|r| cut(r, MAX_REASON).into()),
        })
    }

    /// No answer arrived.
    pub fn is_none(self) -> bool {
        self.0 == 0
    }

    /// The HTTP status, when this is one.
    pub fn http_status(self) -> Option<u16> {
        (self.0 != 0 && self.0 < NAMED_BASE).then_some(self.0 as u16)
    }

    /// The named answer, when this is one.
    pub fn as_named(self) -> Option<Named> {
        let i = self.0.checked_sub(NAMED_BASE)?;
        table().get(i as usize)
    }
}

impl Named {
    /// As the console table and the HTML page show it: `ERROR 'no such queue'`,
    /// `channel.close 404 'NOT_FOUND'`.
    pub fn label(&self) -> String {
        let mut s = self.name.to_string();
        if let Some(c) = self.code {
            s.push_str(&format!(" {c}"));
        }
        if let Some(r) = &self.reason {
            s.push_str(&format!(" '{r}'"));
        }
        s
    }
}

impl std::fmt::Display for Answer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match (self.http_status(), self.as_named()) {
            (Some(s), _) => write!(f, "{s}"),
            (None, Some(n)) => write!(f, "{} {}", n.protocol, n.label()),
            (None, None) => f.write_str("none"),
        }
    }
}

/// The longest prefix of `s` of at most `max` bytes that ends on a character boundary.
fn cut(s: &str, max: usize) -> &str {
    if s.len() <= max {
        return s;
    }
    let mut end = max;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    &s[..end]
}

/// The process's named answers: append-only, so an index once handed out stays valid.
struct Table {
    inner: Mutex<Entries>,
}

#[derive(Default)]
struct Entries {
    list: Vec<Named>,
    index: HashMap<Named, u32>,
}

fn table() -> &'static Table {
    static TABLE: OnceLock<Table> = OnceLock::new();
    TABLE.get_or_init(|| {
        let mut e = Entries::default();
        e.list.push(overflow());
        Table {
            inner: Mutex::new(e),
        }
    })
}

/// Entry 0: what an answer counts as once the table is full and even its reason-less
/// form has no room. Never looked up by value, so nothing else can intern it.
fn overflow() -> Named {
    Named {
        protocol: "loadmix".into(),
        name: "(more distinct answers than one run keeps)".into(),
        code: None,
        reason: None,
    }
}

impl Table {
    fn intern(&self, n: Named) -> Answer {
        // A panic while the lock was held cannot leave the table half-written (each
        // change is one push and one insert), so a poisoned lock is still usable.
        let mut e = self.inner.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(&i) = e.index.get(&n) {
            return Answer(NAMED_BASE + i);
        }
        let n = if e.list.len() >= MAX_NAMED - 1 && n.reason.is_some() {
            // Full: count it without its reason; the one slot kept free takes that.
            let plain = Named { reason: None, ..n };
            if let Some(&i) = e.index.get(&plain) {
                return Answer(NAMED_BASE + i);
            }
            plain
        } else {
            n
        };
        if e.list.len() >= MAX_NAMED {
            return Answer(NAMED_BASE);
        }
        let i = e.list.len() as u32;
        e.list.push(n.clone());
        e.index.insert(n, i);
        Answer(NAMED_BASE + i)
    }

    fn get(&self, i: usize) -> Option<Named> {
        let e = self.inner.lock().unwrap_or_else(|p| p.into_inner());
        e.list.get(i).cloned()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_http_status_is_its_code_and_a_named_answer_keeps_its_words() {
        assert_eq!(Answer::http(404).http_status(), Some(404));
        assert_eq!(Answer::http(404).to_string(), "404");
        assert_eq!(Answer::NONE.http_status(), None);
        assert!(Answer::NONE.as_named().is_none());
        let e = Answer::named("stomp", "ERROR", None, Some("no such queue"));
        assert_eq!(e.http_status(), None);
        let n = e.as_named().unwrap();
        assert_eq!((&*n.protocol, &*n.name, n.code), ("stomp", "ERROR", None));
        assert_eq!(n.label(), "ERROR 'no such queue'");
        assert_eq!(e.to_string(), "stomp ERROR 'no such queue'");
        // The same words are the same answer.
        assert_eq!(
            e,
            Answer::named("stomp", "ERROR", None, Some("no such queue"))
        );
        assert_ne!(e, Answer::named("stomp", "ERROR", None, Some("other")));
        let c = Answer::named(
            "amqp",
            "channel.close",
            Some(406),
            Some("PRECONDITION_FAILED"),
        );
        assert_eq!(
            c.as_named().unwrap().label(),
            "channel.close 406 'PRECONDITION_FAILED'"
        );
    }

    #[test]
    fn a_full_table_keeps_the_answer_without_its_reason_and_never_grows() {
        let t = Table {
            inner: Mutex::new(Entries {
                list: vec![overflow()],
                index: HashMap::new(),
            }),
        };
        let named = |reason: String| Named {
            protocol: "stomp".into(),
            name: "ERROR".into(),
            code: None,
            reason: Some(reason.into()),
        };
        for i in 0..MAX_NAMED + 10 {
            t.intern(named(format!("reason {i}")));
        }
        let e = t.inner.lock().unwrap();
        assert_eq!(e.list.len(), MAX_NAMED);
        assert_eq!(
            e.list.last().unwrap().reason,
            None,
            "the last slot took the plain form"
        );
        drop(e);
        // Once full, a new reason counts as the plain form, and a new name as the overflow.
        let a = t.intern(named("new".into()));
        assert_eq!(a, Answer(NAMED_BASE + MAX_NAMED as u32 - 1));
        let b = t.intern(Named {
            protocol: "amqp".into(),
            name: "basic.nack".into(),
            code: None,
            reason: None,
        });
        assert_eq!(b, Answer(NAMED_BASE));
    }

    #[test]
    fn a_long_reason_is_cut_on_a_character_boundary() {
        let long = "é".repeat(MAX_REASON);
        let a = Answer::named("stomp", "ERROR", None, Some(&long));
        let r = a.as_named().unwrap().reason.unwrap();
        assert!(r.len() <= MAX_REASON && r.chars().all(|c| c == 'é'), "{r}");
    }
}
