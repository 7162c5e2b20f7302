//! Wire formats both sides of loadmix speak, below the client and the embedded server
//! alike: XML (a tree reader and a writer), WebDAV multistatus, EIM records (EIMML and
//! EIM-JSON), iCalendar and its time zones (VTIMEZONE), vCard, STOMP 1.2 frames, PEM
//! certificates and keys, and the target URL schemes; and [`files`], the bounded reading
//! of every file loadmix is given. Nothing here touches the network or knows who is
//! calling; of the formats only `pem` reads files, the ones it is named, through `files`.
//!
//! A crate of its own so that the client (`loadmix`) and the embedded server
//! (`loadmix-server`) both stand on it and neither on the other: Cargo keeps the border.

pub mod dav;
pub mod eim;
pub mod files;
pub mod ical;
pub mod pem;
pub mod scheme;
pub mod stomp;
pub mod tz;
pub mod vcard;
pub mod xml;

/// What is wrong with a document one of these parsers was given, by the format that
/// refused it. The message says what and, where it can, where, in words fit for a 400 or
/// a failed operation's detail.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FormatError {
    /// Not well-formed XML, or nested deeper than [`xml::MAX_DEPTH`].
    #[error("{0}")]
    Xml(String),
    /// Well-formed XML that is not a WebDAV multistatus.
    #[error("{0}")]
    Multistatus(String),
    /// Not EIMML or EIM-JSON of the shape Morse Code and Atom carry.
    #[error("{0}")]
    Eim(String),
    /// Not an iCalendar object with one event, task or journal entry, or a recurrence
    /// rule that RFC 5545 does not allow.
    #[error("{0}")]
    ICalendar(String),
    /// Not one vCard 3.0 or 4.0 with a UID and a name, as an address object holds.
    #[error("{0}")]
    VCard(String),
}

/// Layers whose own errors are still messages take a format's message as it stands.
impl From<FormatError> for String {
    fn from(e: FormatError) -> String {
        e.to_string()
    }
}
