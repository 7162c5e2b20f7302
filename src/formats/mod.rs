//! Wire formats both sides of loadmix speak, below the client and the embedded server
//! alike: XML (a tree reader and a writer), WebDAV multistatus, EIM records (EIMML and
//! EIM-JSON) and iCalendar. Nothing here does I/O or knows who is calling.

pub mod dav;
pub mod eim;
pub mod ical;
pub mod xml;
