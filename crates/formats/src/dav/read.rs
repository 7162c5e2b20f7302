//! Reading a multistatus answer as it streams past, without a tree: the client reads
//! every REPORT and PROPFIND answer of a run, and building a tree of strings for each
//! cost it more than half of what a CalDAV operation cost it. The rules are the tree's:
//! the document is refused as XML first, then as a multistatus; per response its first
//! `href` and `status`; an ETag and calendar data from the first 200 propstat that has
//! them (wherever in the propstat its status is); a text is what lies directly in its
//! element, with what is inside its children left out.

use super::{CALDAV, CARDDAV, DAV, Multistatus, status_code};
use crate::FormatError;
use crate::xml::{self, Visit};
use quick_xml::events::BytesStart;
use quick_xml::reader::NsReader;

/// Parse a multistatus body, whatever the prefixes and the order of its elements.
pub fn parse_multistatus(body: &[u8]) -> Result<Multistatus, FormatError> {
    let text = std::str::from_utf8(body).map_err(|e| FormatError::Xml(e.to_string()))?;
    let mut r = Reading::default();
    xml::walk(text, &mut r)?;
    match r.wrong {
        Some(m) => Err(FormatError::Multistatus(m)),
        None => Ok(r.out),
    }
}

/// What an open element is to the reading: one it reads, or any other.
#[derive(Clone, Copy, PartialEq)]
enum Role {
    Root,
    SyncToken,
    Response,
    Href,
    Status,
    Propstat,
    PropstatStatus,
    Prop,
    Etag,
    Data,
    Other,
}

/// The response being read: its first href and status, and the first ETag and data of
/// its 200 propstats.
#[derive(Default)]
struct Response {
    href: Option<String>,
    status: Option<String>,
    etag: Option<String>,
    data: Option<String>,
}

/// The propstat being read: its first status, and its first prop's first ETag and data.
#[derive(Default)]
struct Propstat {
    status: Option<String>,
    /// A `prop` has been opened in it (only the first is read).
    had_prop: bool,
    etag: Option<String>,
    data: Option<String>,
}

/// The reader's state: a role per open element, the text of the element read now.
#[derive(Default)]
struct Reading {
    roles: Vec<Role>,
    /// Text of the innermost open element whose text is read.
    text: String,
    response: Response,
    propstat: Propstat,
    /// The open `prop` has had its `getetag` / `calendar-data` (only the first is read).
    prop_etag: bool,
    prop_data: bool,
    out: Multistatus,
    /// The first reason the document, well-formed, is no multistatus; said once the walk
    /// has found the whole document well-formed.
    wrong: Option<String>,
}

impl Reading {
    /// The role of an element opening in one of role `parent`.
    fn role(&mut self, parent: Option<Role>, ns: &[u8], local: &[u8]) -> Role {
        let dav = ns == DAV.as_bytes();
        match (parent, local) {
            (None, b"multistatus") if dav => Role::Root,
            (Some(Role::Root), b"sync-token") if dav => Role::SyncToken,
            (Some(Role::Root), b"response") if dav => {
                self.response = Response::default();
                Role::Response
            }
            (Some(Role::Response), b"href") if dav && self.response.href.is_none() => Role::Href,
            (Some(Role::Response), b"status") if dav && self.response.status.is_none() => {
                Role::Status
            }
            (Some(Role::Response), b"propstat") if dav => {
                self.propstat = Propstat::default();
                Role::Propstat
            }
            (Some(Role::Propstat), b"status") if dav && self.propstat.status.is_none() => {
                Role::PropstatStatus
            }
            (Some(Role::Propstat), b"prop") if dav && !self.propstat.had_prop => {
                self.propstat.had_prop = true;
                (self.prop_etag, self.prop_data) = (false, false);
                Role::Prop
            }
            (Some(Role::Prop), b"getetag") if dav && !self.prop_etag => {
                self.prop_etag = true;
                Role::Etag
            }
            (Some(Role::Prop), b"calendar-data" | b"address-data")
                if (ns == CALDAV.as_bytes() && local == b"calendar-data"
                    || ns == CARDDAV.as_bytes() && local == b"address-data")
                    && !self.prop_data =>
            {
                self.prop_data = true;
                Role::Data
            }
            _ => Role::Other,
        }
    }

    /// Whether a role's text is read.
    fn reads(role: Role) -> bool {
        matches!(
            role,
            Role::SyncToken
                | Role::Href
                | Role::Status
                | Role::PropstatStatus
                | Role::Etag
                | Role::Data
        )
    }

    /// An element of `role` closes, its text (when read) in `self.text`.
    fn closed(&mut self, role: Role) {
        // Only an element whose text is read takes it: one closing inside it leaves it.
        let text = match Self::reads(role) {
            true => std::mem::take(&mut self.text),
            false => String::new(),
        };
        match role {
            Role::SyncToken => self.out.sync_token = Some(text.trim().to_string()),
            Role::Href => self.response.href = Some(text),
            Role::Status => self.response.status = Some(text),
            Role::PropstatStatus => self.propstat.status = Some(text),
            Role::Etag => self.propstat.etag = Some(text),
            Role::Data => self.propstat.data = Some(text),
            Role::Propstat => self.propstat_closed(),
            Role::Response => self.response_closed(),
            Role::Root | Role::Prop | Role::Other => {}
        }
    }

    /// A propstat that says 200 lends its ETag and data to its response, unless an
    /// earlier one did.
    fn propstat_closed(&mut self) {
        let p = std::mem::take(&mut self.propstat);
        if p.status.as_deref().and_then(status_code) != Some(200) {
            return;
        }
        let r = &mut self.response;
        if r.etag.is_none()
            && let Some(e) = p.etag.map(|e| e.trim().to_string())
            && !e.is_empty()
        {
            r.etag = Some(e);
        }
        if r.data.is_none()
            && let Some(d) = p.data
            && !d.trim().is_empty()
        {
            r.data = Some(d);
        }
    }

    fn response_closed(&mut self) {
        let r = std::mem::take(&mut self.response);
        if self.wrong.is_some() {
            return;
        }
        let Some(href) = r.href else {
            self.wrong = Some("a response without href".into());
            return;
        };
        let status = match r.status {
            Some(s) => match status_code(&s) {
                Some(code) => code,
                None => {
                    self.wrong = Some(format!("bad status line '{}'", s.trim()));
                    return;
                }
            },
            None => 200,
        };
        if let Some(d) = r.data {
            self.out.data.push((self.out.responses.len(), d));
        }
        self.out
            .responses
            .push((href.trim().to_string(), status, r.etag));
    }
}

impl Visit for Reading {
    fn open(
        &mut self,
        depth: usize,
        ns: &[u8],
        e: &BytesStart<'_>,
        _reader: &NsReader<&[u8]>,
    ) -> Result<(), String> {
        let name = e.name();
        let local = name.local_name();
        if depth == 1 && !(ns == DAV.as_bytes() && local.as_ref() == b"multistatus") {
            self.wrong = Some(format!(
                "root element is {}, not DAV:multistatus",
                String::from_utf8_lossy(local.as_ref())
            ));
        }
        // Text read so far belongs to the element that holds this one; a child's text is
        // its own, so the holder's goes on after the child closes.
        let parent = self.roles.last().copied();
        let role = self.role(parent, ns, local.as_ref());
        if Self::reads(role) {
            self.text.clear();
        }
        self.roles.push(role);
        Ok(())
    }

    fn close(&mut self) -> Result<(), String> {
        if let Some(role) = self.roles.pop() {
            self.closed(role);
        }
        Ok(())
    }

    fn wants_text(&self) -> bool {
        self.roles.last().is_some_and(|&r| Self::reads(r))
    }

    fn text(&mut self, text: &str) -> Result<(), String> {
        self.text.push_str(text);
        Ok(())
    }
}
