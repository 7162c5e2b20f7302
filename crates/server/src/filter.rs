//! CalDAV calendar-query filters (RFC 4791 §9.7): nested comp-filters, prop-filters and
//! param-filters with `is-not-defined`, `text-match` (collations `i;ascii-casemap` and
//! `i;octet`, substring, `negate-condition`) and `time-range` on the calendar's main
//! component, all of a level's conditions ANDed. What the server cannot evaluate is refused
//! with the RFC's precondition (`supported-filter`, `supported-collation`), so a query is
//! answered right or not at all, never with a wrong 207.

use chrono::{DateTime, Utc};
use icalendar::parser::{Calendar, Component, Property};

use super::model::{ItemData, TooDense, parse_ical_datetime};
use loadmix_formats::dav::CALDAV;
use loadmix_formats::ical::COMPONENTS;
use loadmix_formats::xml::El;

/// A half-open time range; an end that is absent is the far past or future.
pub(crate) type Range = (DateTime<Utc>, DateTime<Utc>);

/// Why a filter cannot be evaluated.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum FilterError {
    /// Well-formed but beyond this server: 403 with the named CALDAV precondition.
    Unsupported {
        condition: &'static str,
        what: String,
    },
    /// Malformed: 400.
    Bad(String),
}

#[derive(Debug, Clone, PartialEq)]
pub(crate) struct TextMatch {
    needle: String,
    /// `i;ascii-casemap` (the default): ASCII letters compare without case.
    casemap: bool,
    negate: bool,
}

impl TextMatch {
    fn matches(&self, value: &str) -> bool {
        let found = if self.casemap {
            value
                .to_ascii_lowercase()
                .contains(&self.needle.to_ascii_lowercase())
        } else {
            value.contains(&self.needle)
        };
        found != self.negate
    }
}

#[derive(Debug, Clone, PartialEq)]
pub(crate) struct ParamFilter {
    name: String,
    not_defined: bool,
    text: Option<TextMatch>,
}

#[derive(Debug, Clone, PartialEq)]
pub(crate) struct PropFilter {
    name: String,
    not_defined: bool,
    text: Option<TextMatch>,
    params: Vec<ParamFilter>,
}

#[derive(Debug, Clone, PartialEq)]
pub(crate) struct CompFilter {
    pub name: String,
    not_defined: bool,
    pub range: Option<Range>,
    props: Vec<PropFilter>,
    comps: Vec<CompFilter>,
}

fn unsupported(what: impl Into<String>) -> FilterError {
    FilterError::Unsupported {
        condition: "supported-filter",
        what: what.into(),
    }
}

fn name_of(el: &El, what: &str) -> Result<String, FilterError> {
    el.attr(None, "name")
        .map(|n| n.trim().to_ascii_uppercase())
        .filter(|n| !n.is_empty())
        .ok_or_else(|| FilterError::Bad(format!("{what} without a name")))
}

fn text_match(el: &El) -> Result<TextMatch, FilterError> {
    let casemap = match el.attr(None, "collation").unwrap_or("i;ascii-casemap") {
        "i;ascii-casemap" => true,
        "i;octet" => false,
        other => {
            return Err(FilterError::Unsupported {
                condition: "supported-collation",
                what: format!("collation '{other}'"),
            });
        }
    };
    let negate = match el.attr(None, "negate-condition").unwrap_or("no") {
        "yes" => true,
        "no" => false,
        other => return Err(FilterError::Bad(format!("negate-condition '{other}'"))),
    };
    Ok(TextMatch {
        needle: el.text.clone(),
        casemap,
        negate,
    })
}

fn time_range(el: &El) -> Result<Range, FilterError> {
    let at = |k: &str| -> Result<Option<DateTime<Utc>>, FilterError> {
        match el.attr(None, k) {
            None => Ok(None),
            Some(v) => parse_ical_datetime(v)
                .map(Some)
                .ok_or_else(|| FilterError::Bad(format!("bad time-range {k} '{v}'"))),
        }
    };
    let (start, end) = (at("start")?, at("end")?);
    if start.is_none() && end.is_none() {
        return Err(FilterError::Bad("a time-range needs start or end".into()));
    }
    let range = (
        start.unwrap_or(DateTime::<Utc>::MIN_UTC),
        end.unwrap_or(DateTime::<Utc>::MAX_UTC),
    );
    if range.0 >= range.1 {
        return Err(FilterError::Bad(
            "the time-range ends before it starts".into(),
        ));
    }
    Ok(range)
}

fn param_filter(el: &El) -> Result<ParamFilter, FilterError> {
    let mut f = ParamFilter {
        name: name_of(el, "param-filter")?,
        not_defined: false,
        text: None,
    };
    for c in &el.children {
        match (c.ns.as_str(), c.name.as_str()) {
            (CALDAV, "is-not-defined") => f.not_defined = true,
            (CALDAV, "text-match") => f.text = Some(text_match(c)?),
            _ => return Err(unsupported(format!("{} in a param-filter", c.name))),
        }
    }
    Ok(f)
}

fn prop_filter(el: &El) -> Result<PropFilter, FilterError> {
    let mut f = PropFilter {
        name: name_of(el, "prop-filter")?,
        not_defined: false,
        text: None,
        params: Vec::new(),
    };
    for c in &el.children {
        match (c.ns.as_str(), c.name.as_str()) {
            (CALDAV, "is-not-defined") => f.not_defined = true,
            (CALDAV, "text-match") => f.text = Some(text_match(c)?),
            (CALDAV, "param-filter") => f.params.push(param_filter(c)?),
            (CALDAV, "time-range") => {
                return Err(unsupported(format!(
                    "a time-range on the {} property",
                    f.name
                )));
            }
            _ => return Err(unsupported(format!("{} in a prop-filter", c.name))),
        }
    }
    Ok(f)
}

/// A comp-filter `depth` levels below VCALENDAR (0 is VCALENDAR itself).
fn comp_filter(el: &El, depth: usize) -> Result<CompFilter, FilterError> {
    let mut f = CompFilter {
        name: name_of(el, "comp-filter")?,
        not_defined: false,
        range: None,
        props: Vec::new(),
        comps: Vec::new(),
    };
    if depth == 0 && f.name != "VCALENDAR" {
        return Err(FilterError::Bad(
            "the outer comp-filter must name VCALENDAR".into(),
        ));
    }
    for c in &el.children {
        match (c.ns.as_str(), c.name.as_str()) {
            (CALDAV, "is-not-defined") => f.not_defined = true,
            (CALDAV, "time-range") => {
                // Occurrences are known for the main component only (VEVENT, VTODO,
                // VJOURNAL); a range on VCALENDAR or on a VALARM is not evaluated here.
                if depth != 1 || !COMPONENTS.contains(&f.name.as_str()) {
                    return Err(unsupported(format!("a time-range on {}", f.name)));
                }
                f.range = Some(time_range(c)?);
            }
            (CALDAV, "prop-filter") => f.props.push(prop_filter(c)?),
            (CALDAV, "comp-filter") => f.comps.push(comp_filter(c, depth + 1)?),
            _ => return Err(unsupported(format!("{} in a comp-filter", c.name))),
        }
    }
    Ok(f)
}

/// The filter of a calendar-query, or `None` when it has none (every resource matches).
pub(crate) fn parse(query: &El) -> Result<Option<CompFilter>, FilterError> {
    let Some(filter) = query.child(CALDAV, "filter") else {
        return Ok(None);
    };
    let mut comps = filter.children.iter();
    let (Some(root), None) = (comps.next(), comps.next()) else {
        return Err(FilterError::Bad(
            "a filter holds exactly one comp-filter".into(),
        ));
    };
    if !root.is(CALDAV, "comp-filter") {
        return Err(FilterError::Bad(format!(
            "{} where the VCALENDAR comp-filter should be",
            root.name
        )));
    }
    comp_filter(root, 0).map(Some)
}

impl CompFilter {
    /// The main component asked for and its time range, when that is all the filter asks:
    /// then stored timings answer it without parsing any calendar text.
    pub(crate) fn simple(&self) -> Option<(Option<&str>, Option<Range>)> {
        if !self.props.is_empty() || self.not_defined {
            return None;
        }
        match self.comps.as_slice() {
            [] => Some((None, None)),
            [c] if c.props.is_empty() && c.comps.is_empty() && !c.not_defined => {
                Some((Some(c.name.as_str()), c.range))
            }
            _ => None,
        }
    }

    /// The time range of the main component, if the filter has one (to pre-filter items).
    pub(crate) fn range(&self) -> Option<Range> {
        self.comps.iter().find_map(|c| c.range)
    }
}

fn prop_matches(p: &Property<'_>, f: &PropFilter) -> bool {
    f.text.as_ref().is_none_or(|t| t.matches(p.val.as_str()))
        && f.params.iter().all(|pf| {
            let mut found = p
                .params
                .iter()
                .filter(|x| x.key.as_str().eq_ignore_ascii_case(&pf.name));
            if pf.not_defined {
                return found.next().is_none();
            }
            found.any(|x| {
                pf.text
                    .as_ref()
                    .is_none_or(|t| t.matches(x.val.as_ref().map_or("", |v| v.as_str())))
            })
        })
}

fn props_match(props: &[Property<'_>], filters: &[PropFilter]) -> bool {
    filters.iter().all(|f| {
        let mut found = props
            .iter()
            .filter(|p| p.name.as_str().eq_ignore_ascii_case(&f.name));
        if f.not_defined {
            found.next().is_none()
        } else {
            found.any(|p| prop_matches(p, f))
        }
    })
}

/// Whether the components `comps` (the children of one level) satisfy `filters`. A time
/// range is decided by the item's timing, with recurrences expanded.
fn comps_match(
    comps: &[Component<'_>],
    filters: &[CompFilter],
    data: &ItemData,
) -> Result<bool, TooDense> {
    for f in filters {
        let mut named = comps
            .iter()
            .filter(|c| c.name.as_str().eq_ignore_ascii_case(&f.name));
        if f.not_defined {
            if named.next().is_some() {
                return Ok(false);
            }
            continue;
        }
        let mut any = false;
        for c in named {
            if !props_match(&c.properties, &f.props) || !comps_match(&c.components, &f.comps, data)?
            {
                continue;
            }
            if let Some((start, end)) = f.range {
                let Some(t) = data.timing() else { continue };
                if t.occurrences(start, end, 1)?.is_empty() {
                    continue;
                }
            }
            any = true;
            break;
        }
        if !any {
            return Ok(false);
        }
    }
    Ok(true)
}

/// Whether a stored item matches the filter.
pub(crate) fn matches(
    f: &CompFilter,
    cal: &Calendar<'_>,
    data: &ItemData,
) -> Result<bool, TooDense> {
    if f.not_defined {
        return Ok(false);
    }
    Ok(props_match(&cal.properties, &f.props) && comps_match(&cal.components, &f.comps, data)?)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::parse_ics;
    use loadmix_formats::xml;

    const ICS: &str = "BEGIN:VCALENDAR\r\nVERSION:2.0\r\nPRODID:t\r\nBEGIN:VEVENT\r\nUID:u1\r\nDTSTART:20070521T100000Z\r\nDURATION:PT1H\r\nSUMMARY:Hello World\r\nATTENDEE;PARTSTAT=ACCEPTED:mailto:a@x\r\nBEGIN:VALARM\r\nACTION:DISPLAY\r\nTRIGGER:-PT15M\r\nEND:VALARM\r\nEND:VEVENT\r\nEND:VCALENDAR\r\n";

    fn check(filter: &str) -> Result<bool, FilterError> {
        let q = format!(
            r#"<C:calendar-query xmlns:C="urn:ietf:params:xml:ns:caldav"><C:filter><C:comp-filter name="VCALENDAR">{filter}</C:comp-filter></C:filter></C:calendar-query>"#
        );
        let root = xml::parse(&q).unwrap();
        let f = parse(&root)?.unwrap();
        let (_, data) = parse_ics(ICS).unwrap();
        let unfolded = icalendar::parser::unfold(ICS);
        let cal = icalendar::parser::read_calendar(&unfolded).unwrap();
        Ok(matches(&f, &cal, &data).unwrap())
    }

    fn ev(inner: &str) -> String {
        format!(r#"<C:comp-filter name="VEVENT">{inner}</C:comp-filter>"#)
    }

    #[test]
    fn text_match_collations_and_negation() {
        let tm = |attrs: &str, text: &str| {
            ev(&format!(
                r#"<C:prop-filter name="SUMMARY"><C:text-match{attrs}>{text}</C:text-match></C:prop-filter>"#
            ))
        };
        assert_eq!(check(&tm("", "hello")), Ok(true), "casemap by default");
        assert_eq!(check(&tm("", "nomatch")), Ok(false));
        assert_eq!(check(&tm(r#" collation="i;octet""#, "hello")), Ok(false));
        assert_eq!(check(&tm(r#" collation="i;octet""#, "Hello")), Ok(true));
        assert_eq!(
            check(&tm(r#" negate-condition="yes""#, "nomatch")),
            Ok(true)
        );
        assert_eq!(check(&tm(r#" negate-condition="yes""#, "world")), Ok(false));
        assert!(matches!(
            check(&tm(r#" collation="i;unicode-casemap""#, "x")),
            Err(FilterError::Unsupported {
                condition: "supported-collation",
                ..
            })
        ));
    }

    #[test]
    fn is_not_defined_params_and_nesting() {
        let nd = |p: &str| {
            ev(&format!(
                r#"<C:prop-filter name="{p}"><C:is-not-defined/></C:prop-filter>"#
            ))
        };
        assert_eq!(check(&nd("DTSTART")), Ok(false), "it has a DTSTART");
        assert_eq!(check(&nd("LOCATION")), Ok(true));
        let param = |v: &str| {
            ev(&format!(
                r#"<C:prop-filter name="ATTENDEE"><C:param-filter name="PARTSTAT"><C:text-match>{v}</C:text-match></C:param-filter></C:prop-filter>"#
            ))
        };
        assert_eq!(check(&param("accepted")), Ok(true));
        assert_eq!(check(&param("DECLINED")), Ok(false));
        let alarm = |inner: &str| {
            ev(&format!(
                r#"<C:comp-filter name="VALARM">{inner}</C:comp-filter>"#
            ))
        };
        assert_eq!(check(&alarm("")), Ok(true));
        assert_eq!(check(&alarm("<C:is-not-defined/>")), Ok(false));
        assert_eq!(
            check(r#"<C:comp-filter name="VTODO"/>"#),
            Ok(false),
            "an event is no VTODO"
        );
        // Several conditions are ANDed.
        let both = ev(
            r#"<C:prop-filter name="SUMMARY"><C:text-match>hello</C:text-match></C:prop-filter><C:prop-filter name="LOCATION"><C:text-match>x</C:text-match></C:prop-filter>"#,
        );
        assert_eq!(check(&both), Ok(false));
    }

    #[test]
    fn time_ranges_and_what_is_refused() {
        let tr = |s: &str, e: &str| ev(&format!(r#"<C:time-range start="{s}" end="{e}"/>"#));
        assert_eq!(check(&tr("20070521T000000Z", "20070522T000000Z")), Ok(true));
        assert_eq!(
            check(&tr("20070522T000000Z", "20070523T000000Z")),
            Ok(false)
        );
        assert_eq!(
            check(&ev(r#"<C:time-range end="20070522T000000Z"/>"#)),
            Ok(true)
        );
        assert_eq!(
            check(&ev(r#"<C:time-range start="20070522T000000Z"/>"#)),
            Ok(false)
        );
        for refused in [
            ev(
                r#"<C:prop-filter name="DTSTART"><C:time-range start="20070101T000000Z"/></C:prop-filter>"#,
            ),
            ev(
                r#"<C:comp-filter name="VALARM"><C:time-range start="20070101T000000Z"/></C:comp-filter>"#,
            ),
            ev(r#"<C:prop-filter name="SUMMARY"><C:bogus/></C:prop-filter>"#),
        ] {
            assert!(
                matches!(
                    check(&refused),
                    Err(FilterError::Unsupported {
                        condition: "supported-filter",
                        ..
                    })
                ),
                "{refused}"
            );
        }
        assert!(matches!(
            check(&ev(r#"<C:time-range/>"#)),
            Err(FilterError::Bad(_))
        ));
    }
}
