//! iCalendar (RFC 5545) as both sides need it: the main component of a calendar object
//! (parsed with the `icalendar` crate's parser), TEXT value escaping, and the DATE-TIME and
//! DURATION value grammars.

use chrono::Duration;

use super::FormatError;

/// The component types a calendar object resource may be about.
pub const COMPONENTS: [&str; 3] = ["VEVENT", "VTODO", "VJOURNAL"];

/// The main component of a calendar object: its type and the values of the properties
/// loadmix reads. TEXT values (SUMMARY, DESCRIPTION) are unescaped by the parser.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Component {
    /// `VEVENT`, `VTODO` or `VJOURNAL`.
    pub kind: String,
    /// Its UID.
    pub uid: String,
    /// SUMMARY, unescaped.
    pub summary: Option<String>,
    /// DESCRIPTION, unescaped.
    pub description: Option<String>,
    /// DTSTART as written (`20070314T101500Z`).
    pub dtstart: Option<String>,
    /// DTEND as written.
    pub dtend: Option<String>,
    /// DURATION as written (`PT1H`).
    pub duration: Option<String>,
    /// RRULE as written.
    pub rrule: Option<String>,
    /// Every EXDATE value, each list split into its dates.
    pub exdates: Vec<String>,
    /// The `TZID` of DTSTART, DTEND and of each EXDATE value (same order as `exdates`).
    pub dtstart_tzid: Option<String>,
    /// The `TZID` of DTEND.
    pub dtend_tzid: Option<String>,
    /// The `TZID` of each EXDATE value.
    pub exdate_tzids: Vec<Option<String>>,
    /// The calendar's VTIMEZONE definitions.
    pub zones: Vec<super::tz::Zone>,
    /// ORGANIZER's calendar user address, as written.
    pub organizer: Option<String>,
    /// Each ATTENDEE (at most [`MAX_ATTENDEES`]), in order.
    pub attendees: Vec<Attendee>,
    /// ATTENDEE properties past [`MAX_ATTENDEES`], not read: a server refuses such a
    /// component rather than schedule some of its attendees.
    pub attendees_past_max: usize,
}

/// An ATTENDEE of a component: its calendar user address and participation status.
#[derive(Debug, Clone, PartialEq)]
pub struct Attendee {
    /// The address as written (`mailto:bob@example.com`).
    pub address: String,
    /// `PARTSTAT`, upper-cased; `None` when absent (RFC 5545: NEEDS-ACTION).
    pub partstat: Option<String>,
}

/// Attendees read from one component: scheduling delivers to each, so a hostile body
/// must not choose how many deliveries one PUT costs.
pub const MAX_ATTENDEES: usize = 256;

/// Zones one calendar object may define, and observances one zone may have.
pub const MAX_ZONES: usize = 64;

/// A property's `TZID` parameter, without quotes.
fn tzid_of(p: &icalendar::parser::Property<'_>) -> Option<String> {
    param_of(p, "TZID")
}

/// A VTIMEZONE component as a [`super::tz::Zone`]; `None` when it has no TZID.
fn zone_of(c: &icalendar::parser::Component<'_>) -> Option<super::tz::Zone> {
    let tzid = c.find_prop("TZID")?.val.as_str().to_string();
    let observances = c
        .components
        .iter()
        .filter(|o| matches!(o.name.as_str(), "STANDARD" | "DAYLIGHT"))
        .take(MAX_ZONES)
        .filter_map(|o| {
            let v = |n: &str| o.find_prop(n).map(|p| p.val.as_str().to_string());
            Some(super::tz::Observance {
                start: v("DTSTART")?,
                offset_from: super::tz::parse_offset(&v("TZOFFSETFROM")?)?,
                offset_to: super::tz::parse_offset(&v("TZOFFSETTO")?)?,
                rrule: v("RRULE"),
                rdates: o
                    .properties
                    .iter()
                    .filter(|p| p.name.as_str().eq_ignore_ascii_case("RDATE"))
                    .flat_map(|p| p.val.as_str().split(',').map(|d| d.trim().to_string()))
                    .take(super::tz::MAX_TRANSITIONS)
                    .collect(),
            })
        })
        .collect();
    Some(super::tz::Zone { tzid, observances })
}

/// A property parameter's value, without quotes.
fn param_of(p: &icalendar::parser::Property<'_>, key: &str) -> Option<String> {
    p.params
        .iter()
        .find(|x| x.key.as_str().eq_ignore_ascii_case(key))
        .and_then(|x| x.val.as_ref())
        .map(|v| v.as_str().trim_matches('"').to_string())
}

/// The deepest nesting of components [`parse`] accepts (VCALENDAR > VEVENT > VALARM is
/// three). The parser recurses per level, so a hostile body must not choose the depth.
pub const MAX_DEPTH: usize = 16;

/// Parse a calendar object and return its first VEVENT, VTODO or VJOURNAL, which must
/// have a UID. The message says what is wrong, for a 400 or a failed operation.
pub fn parse(text: &str) -> Result<Component, FormatError> {
    component_of(text).map_err(FormatError::ICalendar)
}

/// [`parse`], its message as written.
fn component_of(text: &str) -> Result<Component, String> {
    let unfolded = icalendar::parser::unfold(text);
    check_depth(&unfolded)?;
    let cal = icalendar::parser::read_calendar(&unfolded)
        .map_err(|e| format!("not iCalendar: {}", e.lines().next().unwrap_or("")))?;
    let comp = cal
        .components
        .iter()
        .find(|c| COMPONENTS.contains(&c.name.as_str()))
        .ok_or("no VEVENT, VTODO or VJOURNAL in the calendar")?;
    let prop = |n: &str| comp.find_prop(n).map(|p| p.val.as_str().to_string());
    let tzid = |n: &str| comp.find_prop(n).and_then(tzid_of);
    let exdate_props: Vec<&icalendar::parser::Property<'_>> = comp
        .properties
        .iter()
        .filter(|p| p.name.as_str().eq_ignore_ascii_case("EXDATE"))
        .collect();
    let uid = prop("UID")
        .filter(|u| !u.is_empty())
        .ok_or("the component has no UID")?;
    Ok(Component {
        kind: comp.name.as_str().to_string(),
        uid,
        summary: prop("SUMMARY"),
        description: prop("DESCRIPTION"),
        dtstart: prop("DTSTART"),
        dtend: prop("DTEND"),
        duration: prop("DURATION"),
        rrule: prop("RRULE"),
        exdates: exdate_props
            .iter()
            .flat_map(|p| p.val.as_str().split(',').map(|v| v.trim().to_string()))
            .filter(|v| !v.is_empty())
            .collect(),
        exdate_tzids: exdate_props
            .iter()
            .flat_map(|p| {
                let z = tzid_of(p);
                p.val
                    .as_str()
                    .split(',')
                    .filter(|v| !v.trim().is_empty())
                    .map(move |_| z.clone())
                    .collect::<Vec<_>>()
            })
            .collect(),
        dtstart_tzid: tzid("DTSTART"),
        dtend_tzid: tzid("DTEND"),
        zones: cal
            .components
            .iter()
            .filter(|c| c.name.as_str() == "VTIMEZONE")
            .take(MAX_ZONES)
            .filter_map(zone_of)
            .collect(),
        organizer: prop("ORGANIZER").map(|v| v.trim().to_string()),
        attendees: comp
            .properties
            .iter()
            .filter(|p| p.name.as_str().eq_ignore_ascii_case("ATTENDEE"))
            .take(MAX_ATTENDEES)
            .map(|p| Attendee {
                address: p.val.as_str().trim().to_string(),
                partstat: param_of(p, "PARTSTAT").map(|v| v.to_ascii_uppercase()),
            })
            .collect(),
        attendees_past_max: comp
            .properties
            .iter()
            .filter(|p| p.name.as_str().eq_ignore_ascii_case("ATTENDEE"))
            .count()
            .saturating_sub(MAX_ATTENDEES),
    })
}

/// Check a recurrence rule against RFC 5545 §3.3.10: one FREQ, each part once, numbers
/// in their ranges (INTERVAL and COUNT positive), COUNT and UNTIL not both, weekdays
/// that are weekdays. The message names the part, for a 400.
pub fn check_rrule(rule: &str) -> Result<(), FormatError> {
    rrule_problem(rule).map_err(FormatError::ICalendar)
}

/// [`check_rrule`], its message as written.
fn rrule_problem(rule: &str) -> Result<(), String> {
    const FREQS: [&str; 7] = [
        "SECONDLY", "MINUTELY", "HOURLY", "DAILY", "WEEKLY", "MONTHLY", "YEARLY",
    ];
    const DAYS: [&str; 7] = ["SU", "MO", "TU", "WE", "TH", "FR", "SA"];
    let mut seen: Vec<String> = Vec::new();
    for part in rule.split(';').filter(|p| !p.is_empty()) {
        let (name, value) = part
            .split_once('=')
            .ok_or_else(|| format!("RRULE part '{part}' has no value"))?;
        let name = name.to_ascii_uppercase();
        if seen.contains(&name) {
            return Err(format!("RRULE has {name} twice"));
        }
        let ints = |lo: i64, hi: i64, signed: bool| -> Result<(), String> {
            for v in value.split(',') {
                let n: i64 = v
                    .trim()
                    .parse()
                    .map_err(|_| format!("RRULE {name}={value}: '{v}' is not a number"))?;
                let ok = if signed {
                    n != 0 && n.abs() >= lo && n.abs() <= hi
                } else {
                    (lo..=hi).contains(&n)
                };
                if !ok {
                    return Err(format!("RRULE {name}={value}: {n} is out of range"));
                }
            }
            Ok(())
        };
        match name.as_str() {
            "FREQ" if FREQS.contains(&value.to_ascii_uppercase().as_str()) => {}
            "FREQ" => return Err(format!("RRULE FREQ={value} is not a frequency")),
            "INTERVAL" | "COUNT" => ints(1, i64::from(u32::MAX), false)?,
            "UNTIL" if !value.is_empty() => {}
            "WKST" if DAYS.contains(&value.to_ascii_uppercase().as_str()) => {}
            "WKST" => return Err(format!("RRULE WKST={value} is not a weekday")),
            "BYSECOND" => ints(0, 60, false)?,
            "BYMINUTE" => ints(0, 59, false)?,
            "BYHOUR" => ints(0, 23, false)?,
            "BYMONTH" => ints(1, 12, false)?,
            "BYMONTHDAY" => ints(1, 31, true)?,
            "BYYEARDAY" | "BYSETPOS" => ints(1, 366, true)?,
            "BYWEEKNO" => ints(1, 53, true)?,
            "BYDAY" => {
                for d in value.split(',') {
                    let d = d.trim().to_ascii_uppercase();
                    // ASCII only, so the split below falls between characters.
                    if !d.is_ascii() {
                        return Err(format!("RRULE BYDAY={value}: '{d}' is not a weekday"));
                    }
                    let (n, day) = d.split_at(d.len().saturating_sub(2));
                    let ordinal_ok =
                        n.is_empty() || n.parse::<i64>().is_ok_and(|k| k != 0 && k.abs() <= 53);
                    if !DAYS.contains(&day) || !ordinal_ok {
                        return Err(format!("RRULE BYDAY={value}: '{d}' is not a weekday"));
                    }
                }
            }
            n if n.starts_with("X-") => {}
            _ => return Err(format!("RRULE part '{part}' is not valid")),
        }
        seen.push(name);
    }
    if !seen.iter().any(|n| n == "FREQ") {
        return Err("RRULE has no FREQ".into());
    }
    if seen.iter().any(|n| n == "COUNT") && seen.iter().any(|n| n == "UNTIL") {
        return Err("RRULE has both COUNT and UNTIL".into());
    }
    Ok(())
}

/// Refuse components nested deeper than [`MAX_DEPTH`] before the recursive parser sees them.
fn check_depth(unfolded: &str) -> Result<(), String> {
    let mut depth = 0usize;
    for line in unfolded.lines() {
        let name = line.split([':', ';']).next().unwrap_or("").trim();
        if name.eq_ignore_ascii_case("BEGIN") {
            depth += 1;
            if depth > MAX_DEPTH {
                return Err(format!(
                    "not iCalendar: components nested deeper than {MAX_DEPTH} levels"
                ));
            }
        } else if name.eq_ignore_ascii_case("END") {
            depth = depth.saturating_sub(1);
        }
    }
    Ok(())
}

/// Escape a TEXT value (RFC 5545 §3.3.11).
pub fn escape_text(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            ';' => out.push_str("\\;"),
            ',' => out.push_str("\\,"),
            '\n' => out.push_str("\\n"),
            '\r' => {}
            c => out.push(c),
        }
    }
    out
}

/// The logical lines of an iCalendar text, unfolded (RFC 5545 §3.1), without their ends.
pub fn logical_lines(text: &str) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for raw in text.split('\n') {
        let line = raw.strip_suffix('\r').unwrap_or(raw);
        match (line.strip_prefix([' ', '\t']), out.last_mut()) {
            (Some(rest), Some(last)) => last.push_str(rest),
            _ if line.is_empty() => {}
            _ => out.push(line.to_string()),
        }
    }
    out
}

/// A content line split into its name, its parameters (as written, quotes kept) and its
/// value: the value starts at the first colon outside a quoted parameter value.
fn split_line(line: &str) -> (&str, Vec<&str>, &str) {
    let mut quoted = false;
    let mut cuts = Vec::new();
    let mut colon = line.len();
    for (i, c) in line.char_indices() {
        match c {
            '"' => quoted = !quoted,
            ';' if !quoted => cuts.push(i),
            ':' if !quoted => {
                colon = i;
                break;
            }
            _ => {}
        }
    }
    cuts.push(colon);
    let name = &line[..cuts[0]];
    let params = cuts.windows(2).map(|w| &line[w[0] + 1..w[1]]).collect();
    (name, params, line.get(colon + 1..).unwrap_or(""))
}

/// The text with its `METHOD` (iTIP, RFC 5546) set to `method`: an object stored in a
/// calendar has none, a scheduling message must have one.
pub fn with_method(text: &str, method: &str) -> String {
    let mut out = String::with_capacity(text.len() + 32);
    let mut placed = false;
    for line in logical_lines(text) {
        let (name, _, _) = split_line(&line);
        if name.eq_ignore_ascii_case("METHOD") {
            continue;
        }
        out.push_str(&line);
        out.push_str("\r\n");
        if !placed && line.eq_ignore_ascii_case("BEGIN:VCALENDAR") {
            out.push_str("METHOD:");
            out.push_str(method);
            out.push_str("\r\n");
            placed = true;
        }
    }
    out
}

/// The text without its `METHOD`: what a calendar keeps of a scheduling message.
pub fn without_method(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for line in logical_lines(text) {
        if !split_line(&line).0.eq_ignore_ascii_case("METHOD") {
            out.push_str(&line);
            out.push_str("\r\n");
        }
    }
    out
}

/// The text with the `PARTSTAT` of every ATTENDEE whose address is `address` (compared
/// without regard to case) set to `partstat`; other lines are kept as written.
pub fn set_partstat(text: &str, address: &str, partstat: &str) -> String {
    let mut out = String::with_capacity(text.len() + 32);
    for line in logical_lines(text) {
        let (name, params, value) = split_line(&line);
        if name.eq_ignore_ascii_case("ATTENDEE") && value.trim().eq_ignore_ascii_case(address) {
            out.push_str(name);
            for p in params.iter().filter(|p| {
                let key = p.split('=').next().unwrap_or("");
                !key.eq_ignore_ascii_case("PARTSTAT") && !key.eq_ignore_ascii_case("RSVP")
            }) {
                out.push(';');
                out.push_str(p);
            }
            out.push_str(";PARTSTAT=");
            out.push_str(partstat);
            out.push(':');
            out.push_str(value);
        } else {
            out.push_str(&line);
        }
        out.push_str("\r\n");
    }
    out
}

/// A free-busy request (RFC 6638 §5.2): who asks, about whom, for which span.
#[derive(Debug, Clone, PartialEq)]
pub struct FreeBusyRequest {
    /// The request's UID, echoed in each reply.
    pub uid: Option<String>,
    /// Who asks: must be the outbox's owner.
    pub organizer: Option<String>,
    /// Whose time is asked for: at most [`MAX_ATTENDEES`].
    pub attendees: Vec<String>,
    /// DTSTART as written.
    pub start: String,
    /// DTEND as written.
    pub end: String,
}

/// Parse a `METHOD:REQUEST` calendar holding a VFREEBUSY, as POSTed to an outbox.
pub fn parse_freebusy_request(text: &str) -> Result<FreeBusyRequest, FormatError> {
    let unfolded = icalendar::parser::unfold(text);
    check_depth(&unfolded).map_err(FormatError::ICalendar)?;
    let bad = |m: &str| FormatError::ICalendar(m.to_string());
    let cal = icalendar::parser::read_calendar(&unfolded).map_err(|_| bad("not iCalendar"))?;
    let method = cal
        .properties
        .iter()
        .find(|p| p.name.as_str().eq_ignore_ascii_case("METHOD"))
        .map(|p| p.val.as_str().trim().to_ascii_uppercase());
    if method.as_deref() != Some("REQUEST") {
        return Err(bad("a free-busy request needs METHOD:REQUEST"));
    }
    let fb = cal
        .components
        .iter()
        .find(|c| c.name.as_str() == "VFREEBUSY")
        .ok_or_else(|| bad("no VFREEBUSY in the request"))?;
    let prop = |n: &str| fb.find_prop(n).map(|p| p.val.as_str().trim().to_string());
    Ok(FreeBusyRequest {
        uid: prop("UID"),
        organizer: prop("ORGANIZER"),
        attendees: fb
            .properties
            .iter()
            .filter(|p| p.name.as_str().eq_ignore_ascii_case("ATTENDEE"))
            .take(MAX_ATTENDEES)
            .map(|p| p.val.as_str().trim().to_string())
            .collect(),
        start: prop("DTSTART").ok_or_else(|| bad("the VFREEBUSY has no DTSTART"))?,
        end: prop("DTEND").ok_or_else(|| bad("the VFREEBUSY has no DTEND"))?,
    })
}

pub use super::tz::parse_datetime;

/// `PT30M`, `PT1H30M`, `P1D`, `P1W`, `-PT5M` (sign ignored for lengths). `None` for
/// anything else, including a length chrono cannot hold.
pub fn parse_duration(v: &str) -> Option<Duration> {
    let v = v.trim().trim_start_matches(['+', '-']);
    let v = v.strip_prefix('P')?;
    let (date, time) = match v.split_once('T') {
        Some((d, t)) => (d, t),
        None => (v, ""),
    };
    // The date part takes weeks and days, the time part hours, minutes and seconds.
    let mut total = Duration::zero();
    for (part, unit) in [(date, "WD"), (time, "HMS")] {
        let mut num = String::new();
        for c in part.chars() {
            if c.is_ascii_digit() {
                num.push(c);
                continue;
            }
            let n: i64 = num.parse().ok()?;
            num.clear();
            let step = match c {
                'W' if unit.contains(c) => Duration::try_weeks(n),
                'D' if unit.contains(c) => Duration::try_days(n),
                'H' if unit.contains(c) => Duration::try_hours(n),
                'M' if unit.contains(c) => Duration::try_minutes(n),
                'S' if unit.contains(c) => Duration::try_seconds(n),
                _ => None,
            }?;
            total = total.checked_add(&step)?;
        }
        if !num.is_empty() {
            return None;
        }
    }
    Some(total)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn organizer_and_attendees_are_read_with_their_status() {
        let c = parse(
            "BEGIN:VCALENDAR\r\nBEGIN:VEVENT\r\nUID:u\r\nORGANIZER;CN=A:mailto:a@x\r\n\
             ATTENDEE;CN=\"B; c: d\";PARTSTAT=accepted:mailto:b@x\r\nATTENDEE:mailto:c@x\r\n\
             END:VEVENT\r\nEND:VCALENDAR\r\n",
        )
        .unwrap();
        assert_eq!(c.organizer.as_deref(), Some("mailto:a@x"));
        assert_eq!(c.attendees.len(), 2);
        assert_eq!(c.attendees[0].address, "mailto:b@x");
        assert_eq!(c.attendees[0].partstat.as_deref(), Some("ACCEPTED"));
        assert_eq!(c.attendees[1].partstat, None);
    }

    #[test]
    fn methods_and_partstats_are_rewritten_line_by_line() {
        let t = "BEGIN:VCALENDAR\r\nMETHOD:PUBLISH\r\nBEGIN:VEVENT\r\nUID:u\r\n\
                 ATTENDEE;CN=\"B; c: d\";PARTSTAT=NEEDS-ACTION;RSVP=TRUE:mailto:\r\n b@x\r\n\
                 ATTENDEE:mailto:c@x\r\nEND:VEVENT\r\nEND:VCALENDAR\r\n";
        let r = with_method(t, "REQUEST");
        assert!(r.starts_with("BEGIN:VCALENDAR\r\nMETHOD:REQUEST\r\nBEGIN:VEVENT"));
        assert!(!r.contains("PUBLISH") && !without_method(&r).contains("METHOD"));
        let a = set_partstat(t, "MAILTO:B@X", "ACCEPTED");
        assert!(
            a.contains("ATTENDEE;CN=\"B; c: d\";PARTSTAT=ACCEPTED:mailto:b@x\r\n"),
            "{a}"
        );
        assert!(a.contains("ATTENDEE:mailto:c@x\r\n"), "others are kept");
        assert_eq!(
            parse(&a).unwrap().attendees[0].partstat.as_deref(),
            Some("ACCEPTED")
        );
    }

    #[test]
    fn a_free_busy_request_needs_its_method_component_and_span() {
        let ok = "BEGIN:VCALENDAR\r\nMETHOD:REQUEST\r\nBEGIN:VFREEBUSY\r\nUID:f\r\n\
                  ORGANIZER:mailto:a@x\r\nATTENDEE:mailto:b@x\r\nDTSTART:20300101T000000Z\r\n\
                  DTEND:20300102T000000Z\r\nEND:VFREEBUSY\r\nEND:VCALENDAR\r\n";
        let r = parse_freebusy_request(ok).unwrap();
        assert_eq!(r.attendees, ["mailto:b@x"]);
        assert_eq!(r.start, "20300101T000000Z");
        for bad in [
            ok.replace("METHOD:REQUEST", "METHOD:REPLY"),
            ok.replace("VFREEBUSY", "VEVENT"),
            ok.replace("DTEND:20300102T000000Z\r\n", ""),
            "garbage".to_string(),
        ] {
            assert!(parse_freebusy_request(&bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn the_main_component_and_its_values() {
        let ics = "BEGIN:VCALENDAR\r\nVERSION:2.0\r\nPRODID:x\r\nBEGIN:VTODO\r\nUID:u1\r\nDTSTART:20070521T100000Z\r\nDURATION:PT90M\r\nRRULE:FREQ=WEEKLY\r\nSUMMARY:Stand\\, up\r\nEND:VTODO\r\nEND:VCALENDAR\r\n";
        let c = parse(ics).unwrap();
        assert_eq!(c.kind, "VTODO");
        assert_eq!(c.uid, "u1");
        assert_eq!(c.summary.as_deref(), Some("Stand, up"));
        assert_eq!(c.rrule.as_deref(), Some("FREQ=WEEKLY"));
        assert!(check_rrule("FREQ=WEEKLY").is_ok());
        for bad in [
            "hello",
            "BEGIN:VCALENDAR\r\nEND:VCALENDAR\r\n",
            "BEGIN:VCALENDAR\r\nBEGIN:VEVENT\r\nSUMMARY:x\r\nEND:VEVENT\r\nEND:VCALENDAR\r\n",
        ] {
            assert!(parse(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn text_escaping_round_trips_through_the_parser() {
        for t in ["a\\nb", "a\nb", "x;y,z\\", "\\\\n", "plain"] {
            let ics = format!(
                "BEGIN:VCALENDAR\r\nBEGIN:VEVENT\r\nUID:u\r\nSUMMARY:{}\r\nEND:VEVENT\r\nEND:VCALENDAR\r\n",
                escape_text(t)
            );
            assert_eq!(parse(&ics).unwrap().summary.as_deref(), Some(t), "{t:?}");
        }
    }

    #[test]
    fn nesting_is_bounded() {
        let nest = |n: usize| {
            let mut s = String::from("BEGIN:VCALENDAR\r\nBEGIN:VEVENT\r\nUID:u\r\n");
            for _ in 0..n {
                s.push_str("BEGIN:X\r\n");
            }
            for _ in 0..n {
                s.push_str("END:X\r\n");
            }
            s + "END:VEVENT\r\nEND:VCALENDAR\r\n"
        };
        assert!(parse(&nest(MAX_DEPTH - 2)).is_ok());
        assert!(matches!(
            parse(&nest(MAX_DEPTH - 1)).unwrap_err(),
            FormatError::ICalendar(m) if m.contains("nested deeper")
        ));
        // What crashed the server before: 20,000 levels.
        assert!(parse(&nest(20_000)).is_err());
    }

    #[test]
    fn durations_and_datetimes() {
        assert_eq!(parse_duration("PT30M"), Some(Duration::minutes(30)));
        assert_eq!(parse_duration("P1DT2H"), Some(Duration::hours(26)));
        assert_eq!(parse_duration("P1W"), Some(Duration::weeks(1)));
        assert_eq!(parse_duration("30M"), None);
        assert_eq!(parse_duration("P99999999999999W"), None);
        assert_eq!(parse_duration("PT9223372036854775807S"), None);
        assert!(parse_datetime("20070314T101500Z").is_some());
        assert!(parse_datetime("20070314").is_some());
        assert!(parse_datetime("2007-03-14").is_none());
    }

    #[test]
    fn recurrence_rules_outside_rfc_5545_are_refused_with_the_part_named() {
        for ok in [
            "FREQ=DAILY",
            "FREQ=WEEKLY;INTERVAL=2;BYDAY=MO,WE,-1FR;WKST=SU",
            "FREQ=MONTHLY;BYMONTHDAY=-1;COUNT=10",
            "FREQ=YEARLY;BYMONTH=3;BYDAY=2SU;UNTIL=20301231T000000Z",
            "freq=hourly;byhour=0,23;X-NAME=1",
        ] {
            assert!(check_rrule(ok).is_ok(), "{ok}: {:?}", check_rrule(ok));
        }
        for (bad, says) in [
            ("FREQ=DAILY;INTERVAL=0", "INTERVAL=0"),
            ("FREQ=DAILY;INTERVAL=-1", "INTERVAL=-1"),
            ("FREQ=DAILY;COUNT=0", "COUNT=0"),
            ("INTERVAL=2", "no FREQ"),
            ("FREQ=WEEKLY;WKST=XX", "WKST=XX"),
            ("FREQ=FORTNIGHTLY", "FREQ=FORTNIGHTLY"),
            ("FREQ=DAILY;FREQ=WEEKLY", "FREQ twice"),
            (
                "FREQ=DAILY;COUNT=2;UNTIL=20300101T000000Z",
                "both COUNT and UNTIL",
            ),
            ("FREQ=MONTHLY;BYMONTHDAY=0", "BYMONTHDAY=0"),
            ("FREQ=WEEKLY;BYDAY=XY", "BYDAY=XY"),
            ("FREQ=WEEKLY;BYDAY=ÖM", "BYDAY=ÖM"),
            ("FREQ=DAILY;BYHOUR=24", "BYHOUR=24"),
            ("FREQ=DAILY;SOMETHING=1", "SOMETHING=1"),
        ] {
            let FormatError::ICalendar(e) = check_rrule(bad).unwrap_err() else {
                panic!("{bad}: refused as something other than iCalendar")
            };
            assert!(e.contains(says), "{bad}: {e}");
        }
    }
}
