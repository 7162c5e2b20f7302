//! `calendar-data` as a REPORT asks for it (RFC 4791 §9.6): `expand` turns a recurring
//! event into one instance per occurrence in a range (each with its RECURRENCE-ID, in UTC,
//! without the rule), taking an overridden instance's own component where the calendar has
//! one; `limit-recurrence-set` keeps the master and only the overridden instances that
//! overlap the range. The stored text is edited line by line, so every property is
//! served exactly as the client stored it.

use chrono::{DateTime, Utc};

use super::filter::Range;
use super::model::{Timing, TooDense, Zone};
use loadmix_formats::ical::COMPONENTS;
use loadmix_formats::tz::resolve;

/// The most instances one resource expands into; more answers 507.
pub(crate) const MAX_INSTANCES: u16 = 1000;

/// How a REPORT wants calendar data shaped.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) enum Shape {
    Expand(Range),
    LimitRecurrenceSet(Range),
}

/// A top-level component of the calendar object: its lines, unfolded, BEGIN to END.
struct Block<'a> {
    kind: &'a str,
    lines: Vec<&'a str>,
}

impl Block<'_> {
    /// The value of a property of the component itself (not of a nested one).
    fn prop(&self, name: &str) -> Option<&str> {
        self.prop_line(name)
            .and_then(|l| l.split_once(':').map(|(_, v)| v))
    }

    /// The whole line of a property of the component itself, parameters included.
    fn prop_line(&self, name: &str) -> Option<&str> {
        let mut depth = 0;
        for l in &self.lines {
            if l.starts_with("BEGIN:") {
                depth += 1;
            } else if l.starts_with("END:") {
                depth -= 1;
            } else if depth == 1 && prop_name(l).eq_ignore_ascii_case(name) {
                return Some(l);
            }
        }
        None
    }

    /// A DATE-TIME property as UTC: in `zone` when its `TZID` names it.
    fn time(&self, name: &str, zone: Option<&Zone>) -> Option<DateTime<Utc>> {
        let line = self.prop_line(name)?;
        let (params, value) = line.split_once(':')?;
        let tzid = params
            .split(';')
            .skip(1)
            .find_map(|p| p.strip_prefix("TZID=").or_else(|| p.strip_prefix("tzid=")))
            .map(|t| t.trim_matches('"'));
        resolve(value, tzid, zone.map(std::slice::from_ref).unwrap_or(&[]))
    }

    fn recurrence_id(&self, zone: Option<&Zone>) -> Option<DateTime<Utc>> {
        self.time("RECURRENCE-ID", zone)
    }
}

fn prop_name(line: &str) -> &str {
    line.split([':', ';']).next().unwrap_or("")
}

/// The VCALENDAR's own lines and its top-level components.
fn split(unfolded: &str) -> (Vec<&str>, Vec<Block<'_>>) {
    let mut head = Vec::new();
    let mut blocks: Vec<Block> = Vec::new();
    let mut depth = 0usize;
    for line in unfolded.lines().map(|l| l.trim_end_matches('\r')) {
        if line.is_empty() {
            continue;
        }
        let begin = line.strip_prefix("BEGIN:");
        let end = line.starts_with("END:");
        match (depth, begin) {
            (0, Some(_)) => depth = 1,
            (1, Some(kind)) => {
                blocks.push(Block {
                    kind,
                    lines: vec![line],
                });
                depth = 2;
            }
            (1, None) if end => depth = 0,
            (1, None) => head.push(line),
            (_, _) => {
                if let Some(b) = blocks.last_mut() {
                    b.lines.push(line);
                }
                if begin.is_some() {
                    depth += 1;
                } else if end {
                    depth -= 1;
                }
            }
        }
    }
    (head, blocks)
}

/// Content lines folded at 75 octets, as RFC 5545 wants them.
fn push_folded(out: &mut String, line: &str) {
    let mut rest = line;
    let mut first = true;
    while !rest.is_empty() {
        let room = if first { 75 } else { 74 };
        let mut cut = rest.len().min(room);
        while !rest.is_char_boundary(cut) {
            cut -= 1;
        }
        if !first {
            out.push(' ');
        }
        out.push_str(&rest[..cut]);
        out.push_str("\r\n");
        rest = &rest[cut..];
        first = false;
    }
}

fn utc(t: DateTime<Utc>) -> String {
    t.format("%Y%m%dT%H%M%SZ").to_string()
}

/// Properties an instance does not carry over from its master.
const RECURRENCE_PROPS: [&str; 7] = [
    "DTSTART",
    "DTEND",
    "RRULE",
    "RDATE",
    "EXDATE",
    "EXRULE",
    "RECURRENCE-ID",
];

/// The calendar object `ics` shaped as asked. `timing` is the item's (for its
/// occurrences). Text that is not a calendar object is returned unchanged.
pub(crate) fn shape(ics: &str, timing: Option<&Timing>, how: Shape) -> Result<String, TooDense> {
    let unfolded = icalendar::parser::unfold(ics);
    let (head, blocks) = split(&unfolded);
    let is_main = |b: &&Block| COMPONENTS.contains(&b.kind);
    let zone = timing.and_then(|t| t.zone.as_ref());
    let Some(master) = blocks
        .iter()
        .filter(is_main)
        .find(|b| b.prop_line("RECURRENCE-ID").is_none())
    else {
        return Ok(ics.to_string());
    };
    let recurring = master.prop("RRULE").is_some() || master.prop("RDATE").is_some();
    let (Some(t), true) = (timing, recurring) else {
        return Ok(ics.to_string());
    };
    let overrides: Vec<&Block> = blocks
        .iter()
        .filter(is_main)
        .filter(|b| b.recurrence_id(zone).is_some())
        .collect();
    let mut out = String::from("BEGIN:VCALENDAR\r\n");
    for l in &head {
        push_folded(&mut out, l);
    }
    match how {
        Shape::Expand((start, end)) => {
            let occurrences = t.occurrences(start, end, MAX_INSTANCES)?;
            if occurrences.len() >= MAX_INSTANCES as usize {
                return Err(TooDense {
                    rule: master.prop("RRULE").unwrap_or("").to_string(),
                });
            }
            for occ in occurrences {
                if let Some(o) = overrides
                    .iter()
                    .find(|o| o.recurrence_id(zone) == Some(occ))
                {
                    for l in &o.lines {
                        push_folded(&mut out, l);
                    }
                    continue;
                }
                let mut depth = 0;
                for l in &master.lines {
                    let nested = depth > 1;
                    if l.starts_with("BEGIN:") {
                        depth += 1;
                    } else if l.starts_with("END:") {
                        depth -= 1;
                    }
                    let name = prop_name(l).to_ascii_uppercase();
                    if !nested && RECURRENCE_PROPS.contains(&name.as_str()) {
                        continue;
                    }
                    push_folded(&mut out, l);
                    if depth == 1 && l.starts_with("BEGIN:") {
                        push_folded(&mut out, &format!("DTSTART:{}", utc(occ)));
                        push_folded(&mut out, &format!("RECURRENCE-ID:{}", utc(occ)));
                        if master.prop("DTEND").is_some()
                            && let Some(e) = occ.checked_add_signed(t.duration)
                        {
                            push_folded(&mut out, &format!("DTEND:{}", utc(e)));
                        }
                    }
                }
            }
        }
        Shape::LimitRecurrenceSet((start, end)) => {
            for l in &master.lines {
                push_folded(&mut out, l);
            }
            for o in overrides {
                let at = o.recurrence_id(zone).unwrap_or(DateTime::<Utc>::MIN_UTC);
                let moved = o.time("DTSTART", zone).unwrap_or(at);
                let overlaps = |s: DateTime<Utc>| {
                    s < end && s.checked_add_signed(t.duration).unwrap_or(s) >= start
                };
                if overlaps(at) || overlaps(moved) {
                    for l in &o.lines {
                        push_folded(&mut out, l);
                    }
                }
            }
        }
    }
    out.push_str("END:VCALENDAR\r\n");
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{parse_ical_datetime, parse_ics};
    use loadmix_formats::ical;

    const WEEKLY: &str = "BEGIN:VCALENDAR\r\nVERSION:2.0\r\nPRODID:t\r\nBEGIN:VEVENT\r\nUID:w\r\nDTSTART:20070507T100000Z\r\nDTEND:20070507T110000Z\r\nRRULE:FREQ=WEEKLY\r\nSUMMARY:Stand\\, up\r\nBEGIN:VALARM\r\nACTION:DISPLAY\r\nTRIGGER:-PT5M\r\nEND:VALARM\r\nEND:VEVENT\r\nBEGIN:VEVENT\r\nUID:w\r\nRECURRENCE-ID:20070514T100000Z\r\nDTSTART:20070514T120000Z\r\nDTEND:20070514T130000Z\r\nSUMMARY:Moved\r\nEND:VEVENT\r\nEND:VCALENDAR\r\n";

    fn d(s: &str) -> DateTime<Utc> {
        parse_ical_datetime(s).unwrap()
    }

    #[test]
    fn expand_gives_one_instance_per_occurrence() {
        let (_, data) = parse_ics(WEEKLY).unwrap();
        let t = data.timing().unwrap();
        let range = (d("20070501T000000Z"), d("20070522T000000Z"));
        let out = shape(WEEKLY, Some(&t), Shape::Expand(range)).unwrap();
        assert!(!out.contains("RRULE"), "{out}");
        assert_eq!(out.matches("BEGIN:VEVENT").count(), 3, "{out}");
        assert!(out.contains("RECURRENCE-ID:20070507T100000Z"));
        assert!(out.contains(
            "DTSTART:20070521T100000Z\r\nRECURRENCE-ID:20070521T100000Z\r\nDTEND:20070521T110000Z"
        ));
        assert!(
            out.contains("SUMMARY:Moved"),
            "the override replaces its instance"
        );
        assert!(out.contains("SUMMARY:Stand\\, up"), "text stays as stored");
        assert_eq!(out.matches("BEGIN:VALARM").count(), 2);
        // Still a calendar object a parser reads.
        assert_eq!(ical::parse(&out).unwrap().uid, "w");
    }

    #[test]
    fn limit_keeps_the_master_and_overrides_in_range() {
        let (_, data) = parse_ics(WEEKLY).unwrap();
        let t = data.timing().unwrap();
        let inside = shape(
            WEEKLY,
            Some(&t),
            Shape::LimitRecurrenceSet((d("20070513T000000Z"), d("20070515T000000Z"))),
        )
        .unwrap();
        assert!(inside.contains("RRULE") && inside.contains("SUMMARY:Moved"));
        let outside = shape(
            WEEKLY,
            Some(&t),
            Shape::LimitRecurrenceSet((d("20070601T000000Z"), d("20070602T000000Z"))),
        )
        .unwrap();
        assert!(outside.contains("RRULE") && !outside.contains("SUMMARY:Moved"));
    }

    #[test]
    fn long_lines_are_folded() {
        let mut out = String::new();
        push_folded(&mut out, &format!("DESCRIPTION:{}", "é".repeat(100)));
        assert!(out.lines().all(|l| l.len() <= 75), "{out}");
    }
}
