//! Wire formats both sides of loadmix speak, below the client and the embedded server
//! alike: XML (a tree reader and a writer), WebDAV multistatus, EIM records (EIMML and
//! EIM-JSON), iCalendar and its time zones (VTIMEZONE), STOMP 1.2 frames, and PEM
//! certificates and keys. Nothing here touches the network or knows who is calling; only
//! `pem` reads files, the ones it is named, through `files`.

pub mod dav;
pub mod eim;
pub mod ical;
pub mod pem;
pub mod stomp;
pub mod tz;
pub mod xml;
