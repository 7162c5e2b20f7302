//! DAV REPORTs: calendar-query with its filters and the calendar data shaped as asked
//! (`expand`, `limit-recurrence-set`), calendar-multiget (and an address book's
//! addressbook-multiget), sync-collection of either, and a free-busy query; an address
//! book's addressbook-query is `book.rs`'s.

use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};

use crate::expand;
use crate::filter::{self, CompFilter, FilterError};
use crate::freebusy;
use crate::http::*;
use crate::model::{ItemData, TooDense, parse_ical_datetime};
use crate::store::Item;
use loadmix_formats::dav::{CALDAV, CARDDAV, DAV, MultistatusWriter, Prop};
use loadmix_formats::xml::El;

use super::{Dav, TOKEN_PREFIX, book, multistatus, parse_body, requested_props, sync_token};

impl Dav<'_> {
    pub(super) fn report(&self, user: &str, cal: &str, body: &[u8]) -> Response {
        let c = match self.calendar(user, cal) {
            Ok(c) => c,
            Err(r) => return r,
        };
        let root = match parse_body(body) {
            Ok(Some(r)) => r,
            Ok(None) => return text(StatusCode::BAD_REQUEST, "a REPORT needs a body"),
            Err(r) => return r,
        };
        let req =
            requested_props(Some(&root)).or_else(|| Some(vec![(DAV.into(), "getetag".into())]));
        let is_book = book::is_book(&c);
        if !book::report_fits(&root, is_book) {
            return dav_error(StatusCode::FORBIDDEN, DAV, "supported-report");
        }
        if root.is(CARDDAV, "addressbook-query") {
            return self.addressbook_query(user, cal, &c, &root, &req);
        }
        let shape = match data_shape(&root) {
            Ok(s) => s,
            Err(m) => return text(StatusCode::BAD_REQUEST, m),
        };
        let mut out = MultistatusWriter::new();
        // `Err` when an item's calendar data cannot be shaped within the bounds.
        let emit = |out: &mut MultistatusWriter, item: &Item| -> Result<(), TooDense> {
            let mut props = Self::props(&req, &[], |ns, n| self.item_prop(&c, item, ns, n));
            if let (Some(how), Some(d)) = (shape, &item.data) {
                for ((ns, n), v) in props.iter_mut() {
                    if let (CALDAV, "calendar-data", Some(Prop::Text(t))) =
                        (ns.as_str(), n.as_str(), v.as_mut())
                    {
                        *t = expand::shape(t, d.timing().as_ref(), how)?;
                    }
                }
            }
            out.response(&self.item_href(user, cal, &item.name), &props);
            Ok(())
        };
        let too_dense = || {
            dav_error(
                StatusCode::INSUFFICIENT_STORAGE,
                DAV,
                "number-of-matches-within-limits",
            )
        };
        if root.is(CALDAV, "calendar-query") {
            let f = match filter::parse(&root) {
                Ok(f) => f,
                Err(FilterError::Bad(m)) => return text(StatusCode::BAD_REQUEST, m),
                Err(FilterError::Unsupported { condition, .. }) => {
                    return dav_error(StatusCode::FORBIDDEN, CALDAV, condition);
                }
            };
            let listed = match f.as_ref().and_then(filter::CompFilter::range) {
                Some((s, e)) => self.st.store.items_overlapping(
                    &ckey(user, cal),
                    s.timestamp_millis(),
                    e.timestamp_millis(),
                ),
                None => self.st.store.items(&ckey(user, cal), None),
            };
            let items = match listed {
                Ok(Some((_, items))) => items,
                Ok(None) => Vec::new(),
                Err(e) => return store_error(e),
            };
            for item in &items {
                let Some(d) = &item.data else { continue };
                let matched = match &f {
                    None => Ok(true),
                    Some(f) => query_matches(f, d, &item.uid),
                };
                match matched {
                    Ok(true) => {
                        if emit(&mut out, item).is_err() {
                            return too_dense();
                        }
                    }
                    Ok(false) => {}
                    // Answering without this item would be a wrong answer, not a short one.
                    Err(_) => return too_dense(),
                }
            }
            multistatus(out)
        } else if root.is(CALDAV, "calendar-multiget") || root.is(CARDDAV, "addressbook-multiget") {
            let base = self.cal_href(user, cal);
            for h in root.children_named(DAV, "href") {
                let href = h.text.trim();
                let name = href
                    .strip_prefix(&base)
                    .and_then(percent_decode)
                    .filter(|n| safe_segment(n));
                let item = match name
                    .as_deref()
                    .map(|n| self.st.store.item_by_name(&ckey(user, cal), n))
                {
                    Some(Ok(i)) => i,
                    Some(Err(e)) => return store_error(e),
                    None => None,
                };
                match item {
                    Some(i) => {
                        if emit(&mut out, &i).is_err() {
                            return too_dense();
                        }
                    }
                    None => {
                        out.status(href, "404 Not Found");
                    }
                }
            }
            multistatus(out)
        } else if root.is(DAV, "sync-collection") {
            let token = root
                .child(DAV, "sync-token")
                .map(|t| t.text.trim().to_string())
                .unwrap_or_default();
            let since = if token.is_empty() {
                None
            } else {
                match token
                    .strip_prefix(TOKEN_PREFIX)
                    .and_then(|t| c.token_version(t))
                {
                    Some(v) => Some(v),
                    None => return dav_error(StatusCode::FORBIDDEN, DAV, "valid-sync-token"),
                }
            };
            let (now, items) = match self.st.store.items(&ckey(user, cal), since) {
                Ok(Some(x)) => x,
                Ok(None) => return text(StatusCode::NOT_FOUND, "no such calendar"),
                Err(e) => return store_error(e),
            };
            for item in &items {
                if item.data.is_some() {
                    if emit(&mut out, item).is_err() {
                        return too_dense();
                    }
                } else {
                    out.status(&self.item_href(user, cal, &item.name), "404 Not Found");
                }
            }
            out.sync_token(&sync_token(&now));
            multistatus(out)
        } else if root.is(CALDAV, "free-busy-query") {
            self.free_busy(&ckey(user, cal), &root)
        } else {
            dav_error(StatusCode::FORBIDDEN, DAV, "supported-report")
        }
    }

    /// RFC 4791 §7.10: the busy time of a calendar's events in a range, as a VFREEBUSY.
    pub(super) fn free_busy(&self, cal: &str, root: &El) -> Response {
        let Some(tr) = root.child(CALDAV, "time-range") else {
            return text(
                StatusCode::BAD_REQUEST,
                "a free-busy-query needs a time-range",
            );
        };
        let at = |k: &str| tr.attr(None, k).and_then(parse_ical_datetime);
        let (Some(start), Some(end)) = (at("start"), at("end")) else {
            return text(
                StatusCode::BAD_REQUEST,
                "the time-range of a free-busy-query needs a UTC start and end",
            );
        };
        if start >= end {
            return text(
                StatusCode::BAD_REQUEST,
                "the time-range ends before it starts",
            );
        }
        let periods = match freebusy::busy(&*self.st.store, &[cal.to_string()], start, end) {
            Ok(p) => p,
            Err(freebusy::BusyError::Store(e)) => return store_error(e),
            Err(freebusy::BusyError::TooDense) => {
                return dav_error(
                    StatusCode::INSUFFICIENT_STORAGE,
                    DAV,
                    "number-of-matches-within-limits",
                );
            }
        };
        let body = freebusy::vfreebusy(start, end, &periods, None, &[]);
        (
            StatusCode::OK,
            [(header::CONTENT_TYPE, "text/calendar; charset=utf-8")],
            body,
        )
            .into_response()
    }
}

/// How the request wants calendar data shaped: `expand` or `limit-recurrence-set` inside
/// `calendar-data`, each with a range whose start and end are both required.
pub(super) fn data_shape(root: &El) -> Result<Option<expand::Shape>, String> {
    let Some(data) = root
        .child(DAV, "prop")
        .and_then(|p| p.child(CALDAV, "calendar-data"))
    else {
        return Ok(None);
    };
    let range = |el: &El| -> Result<filter::Range, String> {
        let at = |k: &str| {
            el.attr(None, k)
                .and_then(parse_ical_datetime)
                .ok_or_else(|| format!("{} needs a UTC {k}", el.name))
        };
        let (s, e) = (at("start")?, at("end")?);
        if s >= e {
            return Err(format!("{} ends before it starts", el.name));
        }
        Ok((s, e))
    };
    if let Some(x) = data.child(CALDAV, "expand") {
        return Ok(Some(expand::Shape::Expand(range(x)?)));
    }
    if let Some(x) = data.child(CALDAV, "limit-recurrence-set") {
        return Ok(Some(expand::Shape::LimitRecurrenceSet(range(x)?)));
    }
    Ok(None)
}

/// Whether an item matches a calendar-query filter. The common query (a component and a
/// time range) is answered from the stored timing; anything more from the parsed
/// calendar text.
pub(super) fn query_matches(f: &CompFilter, d: &ItemData, uid: &str) -> Result<bool, TooDense> {
    if let Some((comp, range)) = f.simple() {
        if comp.is_some_and(|want| want != d.component()) {
            return Ok(false);
        }
        return match range {
            None => Ok(true),
            Some((start, end)) => match d.timing() {
                Some(t) => Ok(!t.occurrences(start, end, 1)?.is_empty()),
                None => Ok(false),
            },
        };
    }
    let ics = d.to_ics(uid);
    let unfolded = icalendar::parser::unfold(&ics);
    match icalendar::parser::read_calendar(&unfolded) {
        Ok(cal) => filter::matches(f, &cal, d),
        // Stored text that no longer parses matches nothing.
        Err(_) => Ok(false),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn query(data: &str) -> El {
        let text = format!(
            r#"<C:calendar-query xmlns:C="urn:ietf:params:xml:ns:caldav" xmlns:D="DAV:"><D:prop><D:getetag/>{data}</D:prop></C:calendar-query>"#
        );
        loadmix_formats::xml::parse(&text).unwrap()
    }

    #[test]
    fn calendar_data_is_shaped_only_as_asked_and_with_a_whole_range() {
        assert!(matches!(data_shape(&query("")), Ok(None)));
        assert!(matches!(data_shape(&query("<C:calendar-data/>")), Ok(None)));
        let x = r#"<C:calendar-data><C:expand start="20070101T000000Z" end="20070108T000000Z"/></C:calendar-data>"#;
        assert!(matches!(
            data_shape(&query(x)),
            Ok(Some(expand::Shape::Expand((s, e)))) if s < e
        ));
        let l = r#"<C:calendar-data><C:limit-recurrence-set start="20070101T000000Z" end="20070108T000000Z"/></C:calendar-data>"#;
        assert!(matches!(
            data_shape(&query(l)),
            Ok(Some(expand::Shape::LimitRecurrenceSet(_)))
        ));
        // A range without its end, one that ends first, one that is no UTC time: refused
        // in words.
        let no_end = r#"<C:calendar-data><C:expand start="20070101T000000Z"/></C:calendar-data>"#;
        assert_eq!(
            data_shape(&query(no_end)).err().unwrap(),
            "expand needs a UTC end"
        );
        let back = r#"<C:calendar-data><C:expand start="20070108T000000Z" end="20070101T000000Z"/></C:calendar-data>"#;
        assert_eq!(
            data_shape(&query(back)).err().unwrap(),
            "expand ends before it starts"
        );
        let garbled = r#"<C:calendar-data><C:expand start="tomorrow" end="20070108T000000Z"/></C:calendar-data>"#;
        assert_eq!(
            data_shape(&query(garbled)).err().unwrap(),
            "expand needs a UTC start"
        );
    }
}
