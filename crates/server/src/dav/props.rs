//! CalDAV properties: what PROPFIND answers of the root, a principal's home, a calendar
//! and an event (Depth 0 and 1), PROPPATCH's answer per property, and an owner's ACL
//! that shares a calendar.

use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};

use crate::acl;
use crate::http::*;
use crate::schedule::{self, INBOX, OUTBOX};
use crate::store::{CollectionInfo, Item};
use loadmix_formats::dav::{CALDAV, CARDDAV, CS, DAV, MultistatusWriter, Prop, PropName};

use super::{
    Dav, PRIVILEGES, PropReq, PropValue, Target, book, clark, method_not_allowed, multistatus,
    parse_body, requested_props, sync_token, writable,
};

impl Dav<'_> {
    pub(super) fn common_prop(&self, ns: &str, name: &str) -> PropValue {
        match (ns, name) {
            (DAV, "current-user-principal") => Some(Prop::Href(self.home_href(&self.caller.name))),
            _ => None,
        }
    }

    pub(super) fn home_prop(&self, user: &str, ns: &str, name: &str) -> PropValue {
        match (ns, name) {
            (DAV, "resourcetype") => Some(Prop::Marks(&["D:collection", "D:principal"])),
            (DAV, "displayname") => Some(Prop::Text(user.to_string())),
            (DAV, "principal-URL") | (DAV, "owner") => Some(Prop::Href(self.home_href(user))),
            (CALDAV, "calendar-home-set") | (CARDDAV, "addressbook-home-set") => {
                Some(Prop::Href(self.home_href(user)))
            }
            (CALDAV, "calendar-user-address-set") => Some(Prop::Href(schedule::address(user))),
            (CALDAV, "schedule-inbox-URL") => Some(Prop::Href(self.cal_href(user, INBOX))),
            (CALDAV, "schedule-outbox-URL") => Some(Prop::Href(self.cal_href(user, OUTBOX))),
            (CALDAV, "calendar-user-type") => Some(Prop::Text("INDIVIDUAL".into())),
            (DAV, "current-user-privilege-set") => Some(Prop::Privileges(PRIVILEGES)),
            _ => self.common_prop(ns, name),
        }
    }

    pub(super) fn cal_prop(&self, c: &CollectionInfo, ns: &str, name: &str) -> PropValue {
        match (ns, name) {
            (DAV, "resourcetype") if public_uid(&c.uid) == INBOX => {
                Some(Prop::Marks(&["D:collection", "C:schedule-inbox"]))
            }
            (DAV, "resourcetype") if book::is_book(c) => {
                Some(Prop::Marks(&["D:collection", "CR:addressbook"]))
            }
            (DAV, "resourcetype") => Some(Prop::Marks(&["D:collection", "C:calendar"])),
            (CARDDAV, "addressbook-description") if book::is_book(c) => {
                Some(Prop::Text(c.description.clone()))
            }
            (CARDDAV, "max-resource-size") if book::is_book(c) => {
                Some(Prop::Text(self.st.settings.max_body.to_string()))
            }
            (DAV, "supported-report-set") if book::is_book(c) => Some(Prop::Reports(&[
                "CR:addressbook-query",
                "CR:addressbook-multiget",
                "D:sync-collection",
            ])),
            // An address book holds no calendar data: what a calendar says of it is not
            // its to say.
            (CALDAV, _) if book::is_book(c) => None,
            (CARDDAV, _) => None,
            (DAV, "displayname") => Some(Prop::Text(
                if c.name.is_empty() {
                    public_uid(&c.uid)
                } else {
                    &c.name
                }
                .to_string(),
            )),
            (CALDAV, "calendar-description") => Some(Prop::Text(c.description.clone())),
            (CS, "getctag") | (DAV, "getetag") => Some(Prop::Text(format!("\"{}\"", c.token()))),
            (DAV, "sync-token") => Some(Prop::Text(sync_token(c))),
            (DAV, "owner") => Some(Prop::Href(self.home_href(&c.owner))),
            (DAV, "supported-report-set") => Some(Prop::Reports(&[
                "C:calendar-query",
                "C:calendar-multiget",
                "C:free-busy-query",
                "D:sync-collection",
            ])),
            (CALDAV, "supported-calendar-component-set") => {
                Some(Prop::Components(components_of(c)))
            }
            (CALDAV, "max-attendees-per-instance") => {
                Some(Prop::Text(loadmix_formats::ical::MAX_ATTENDEES.to_string()))
            }
            (DAV, "current-user-privilege-set") => Some(Prop::Privileges(PRIVILEGES)),
            _ => c
                .props
                .get(&clark(ns, name))
                .map(|v| Prop::Text(v.clone()))
                .or_else(|| self.common_prop(ns, name)),
        }
    }

    pub(super) fn item_prop(
        &self,
        c: &CollectionInfo,
        item: &Item,
        ns: &str,
        name: &str,
    ) -> PropValue {
        let data = item.data.as_ref()?;
        match (ns, name) {
            (DAV, "getetag") => Some(Prop::Text(item.etag(c.epoch))),
            (DAV, "getcontenttype") if data.card.is_some() => {
                Some(Prop::Text("text/vcard; charset=utf-8".into()))
            }
            (DAV, "getcontenttype") => Some(Prop::Text(
                "text/calendar; charset=utf-8; component=vevent".into(),
            )),
            (DAV, "resourcetype") => Some(Prop::Marks(&[])),
            (DAV, "getcontentlength") => {
                Some(Prop::Text(data.served(&item.uid).1.len().to_string()))
            }
            (CARDDAV, "address-data") => data.card.as_ref().map(|k| Prop::Text(k.text.clone())),
            (CALDAV, _) if data.card.is_some() => None,
            (DAV, "getlastmodified") => Some(Prop::Text(httpdate::fmt_http_date(
                std::time::UNIX_EPOCH + std::time::Duration::from_millis(item.modified_ms),
            ))),
            (CALDAV, "calendar-data") => Some(Prop::Text(data.to_ics(&item.uid))),
            (CALDAV, "schedule-tag") => data.schedule_tag.clone().map(Prop::Text),
            _ => self.common_prop(ns, name),
        }
    }

    pub(super) fn props<F: Fn(&str, &str) -> PropValue>(
        req: &PropReq,
        all: &[(&str, &str)],
        f: F,
    ) -> Vec<((String, String), PropValue)> {
        match req {
            Some(list) => list
                .iter()
                .map(|(ns, n)| ((ns.clone(), n.clone()), f(ns, n)))
                .collect(),
            None => all
                .iter()
                .map(|(ns, n)| ((ns.to_string(), n.to_string()), f(ns, n)))
                .filter(|(_, v)| v.is_some())
                .collect(),
        }
    }

    pub(super) fn propfind(&self, target: &Target, body: &[u8]) -> Response {
        let root = match parse_body(body) {
            Ok(r) => r,
            Err(r) => return r,
        };
        if let Some(r) = &root
            && !r.is(DAV, "propfind")
        {
            return text(StatusCode::BAD_REQUEST, "expected a DAV:propfind body");
        }
        let req = requested_props(root.as_ref());
        let depth1 = !matches!(header_str(self.headers, "depth").map(str::trim), Some("0"));
        let mut out = MultistatusWriter::new();
        const HOME_ALL: &[(&str, &str)] = &[
            (DAV, "resourcetype"),
            (DAV, "displayname"),
            (CALDAV, "calendar-home-set"),
            (CARDDAV, "addressbook-home-set"),
            (DAV, "current-user-principal"),
            (DAV, "principal-URL"),
        ];
        const CAL_ALL: &[(&str, &str)] = &[
            (DAV, "resourcetype"),
            (DAV, "displayname"),
            (CS, "getctag"),
            (DAV, "sync-token"),
            (DAV, "supported-report-set"),
            (CALDAV, "supported-calendar-component-set"),
        ];
        const ITEM_ALL: &[(&str, &str)] = &[
            (DAV, "getetag"),
            (DAV, "getcontenttype"),
            (DAV, "resourcetype"),
            (DAV, "getcontentlength"),
            (DAV, "getlastmodified"),
        ];
        match target {
            Target::Root => {
                let props = Self::props(
                    &req,
                    &[(DAV, "resourcetype"), (DAV, "current-user-principal")],
                    |ns, n| match (ns, n) {
                        (DAV, "resourcetype") => Some(Prop::Marks(&["D:collection"])),
                        _ => self.common_prop(ns, n),
                    },
                );
                out.response(&format!("{}/", self.prefix), &props);
            }
            Target::Home(user) => {
                let props = Self::props(&req, HOME_ALL, |ns, n| self.home_prop(user, ns, n));
                out.response(&self.home_href(user), &props);
                if depth1 {
                    let cals = match self.st.store.collections_of(user) {
                        Ok(c) => c,
                        Err(e) => return store_error(e),
                    };
                    for c in cals {
                        let props = Self::props(&req, CAL_ALL, |ns, n| self.cal_prop(&c, ns, n));
                        out.response(&self.cal_href(user, public_uid(&c.uid)), &props);
                    }
                }
            }
            Target::Calendar(user, cal) => {
                let c = match self.calendar(user, cal) {
                    Ok(c) => c,
                    Err(r) => return r,
                };
                let props = Self::props(&req, CAL_ALL, |ns, n| self.cal_prop(&c, ns, n));
                out.response(&self.cal_href(user, cal), &props);
                if depth1 {
                    let items = match self.st.store.items(&ckey(user, cal), None) {
                        Ok(Some((_, items))) => items,
                        Ok(None) => Vec::new(),
                        Err(e) => return store_error(e),
                    };
                    for item in &items {
                        let props =
                            Self::props(&req, ITEM_ALL, |ns, n| self.item_prop(&c, item, ns, n));
                        out.response(&self.item_href(user, cal, &item.name), &props);
                    }
                }
            }
            Target::Resource(user, cal, name) => {
                let c = match self.calendar(user, cal) {
                    Ok(c) => c,
                    Err(r) => return r,
                };
                let item = match self.st.store.item_by_name(&ckey(user, cal), name) {
                    Ok(Some(i)) => i,
                    Ok(None) => return text(StatusCode::NOT_FOUND, "no such resource"),
                    Err(e) => return store_error(e),
                };
                let props = Self::props(&req, ITEM_ALL, |ns, n| self.item_prop(&c, &item, ns, n));
                out.response(&self.item_href(user, cal, name), &props);
            }
        }
        multistatus(out)
    }

    pub(super) fn proppatch(&self, target: &Target, body: &[u8], path: &str) -> Response {
        if matches!(target, Target::Resource(..) | Target::Root) {
            return method_not_allowed();
        }
        let root = match parse_body(body) {
            Ok(Some(r)) if r.is(DAV, "propertyupdate") => r,
            Ok(_) => {
                return text(
                    StatusCode::BAD_REQUEST,
                    "expected a DAV:propertyupdate body",
                );
            }
            Err(r) => return r,
        };
        let Target::Calendar(user, cal) = target else {
            // A calendar home's properties are not writable.
            let names: Vec<PropName> = root
                .children
                .iter()
                .flat_map(|op| op.children_named(DAV, "prop"))
                .flat_map(|prop| prop.children.iter())
                .map(|p| (p.ns.clone(), p.name.clone()))
                .collect();
            let mut out = MultistatusWriter::new();
            out.propstat_response(path, &names, "403 Forbidden");
            return multistatus(out);
        };
        if let Err(r) = self.calendar(user, cal) {
            return r;
        }
        // Every change in document order; all or none apply (RFC 4918 §9.2).
        let mut changes: Vec<(PropName, Option<String>)> = Vec::new();
        for op in &root.children {
            let set = if op.is(DAV, "set") {
                true
            } else if op.is(DAV, "remove") {
                false
            } else {
                continue;
            };
            for prop in op.children_named(DAV, "prop") {
                for p in &prop.children {
                    let value = set.then(|| p.text.clone());
                    changes.push(((p.ns.clone(), p.name.clone()), value));
                }
            }
        }
        let refused: Vec<&PropName> = changes
            .iter()
            .filter(|(n, _)| !writable(n))
            .map(|(n, _)| n)
            .collect();
        let mut out = MultistatusWriter::new();
        if !refused.is_empty() {
            let names: Vec<PropName> = changes.iter().map(|(n, _)| n.clone()).collect();
            let statuses: Vec<&str> = names
                .iter()
                .map(|n| {
                    if refused.contains(&n) {
                        "403 Forbidden"
                    } else {
                        "424 Failed Dependency"
                    }
                })
                .collect();
            out.propstats(path, &names, &statuses);
            return multistatus(out);
        }
        let mut name = None;
        let mut description = None;
        let mut props = Vec::new();
        for ((ns, n), v) in &changes {
            match (ns.as_str(), n.as_str()) {
                (DAV, "displayname") => name = Some(v.clone().unwrap_or_default()),
                (CALDAV, "calendar-description") => {
                    description = Some(v.clone().unwrap_or_default())
                }
                _ => props.push((clark(ns, n), v.clone())),
            }
        }
        match self.st.store.update_collection(
            &ckey(user, cal),
            name.as_deref(),
            description.as_deref(),
            &props,
        ) {
            Ok(true) => {}
            Ok(false) => return text(StatusCode::NOT_FOUND, "no such calendar"),
            Err(e) => return store_error(e),
        }
        let names: Vec<PropName> = changes.into_iter().map(|(n, _)| n).collect();
        out.propstat_response(path, &names, "200 OK");
        multistatus(out)
    }

    /// `ACL` (RFC 3744) on a calendar of the caller's own: its grants replaced by the
    /// body's; a deny, a principal not of this server or an unknown privilege refused
    /// with its precondition.
    pub(super) fn acl(&self, user: &str, cal: &str, body: &[u8]) -> Response {
        if let Err(r) = self.calendar(user, cal) {
            return r;
        }
        let root = match parse_body(body) {
            Ok(Some(r)) => r,
            Ok(None) => return text(StatusCode::BAD_REQUEST, "expected a DAV:acl body"),
            Err(r) => return r,
        };
        let grants = match acl::parse(&root, self.prefix) {
            Ok(g) => g,
            Err(e) if e.condition.is_empty() => return text(StatusCode::BAD_REQUEST, &e.why),
            Err(e) => return dav_error(StatusCode::FORBIDDEN, DAV, e.condition),
        };
        match self.st.store.update_collection(
            &ckey(user, cal),
            None,
            None,
            &[(acl::KEY.to_string(), Some(grants))],
        ) {
            Ok(true) => StatusCode::OK.into_response(),
            Ok(false) => text(StatusCode::NOT_FOUND, "no such calendar"),
            Err(e) => store_error(e),
        }
    }
}
