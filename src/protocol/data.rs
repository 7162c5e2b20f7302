//! Generated data, as the 2007 stress client made it: random strings, dates in 2007, EIM
//! records (sent as EIMML), Atom entries with EIM-JSON content, iCalendar events, vCard
//! contacts. Every
//! random choice is drawn from the VU's data stream. The bodies are written by the shared
//! writers in `formats/` and the `atom_syndication` crate, never assembled by hand.

use rand::Rng;
use rand::rngs::Xoshiro256PlusPlus;

use crate::formats::eim::{
    self, ALARM_NS, EVENT_NS, Field, ITEM_NS, MAIL_NS, MODBY_NS, NOTE_NS, Record,
};
use crate::formats::vcard;
use crate::workload::dist::unit_f64;
use crate::workload::protocols::{ContactShape, EventShape};

const ALNUM: &[u8] = b"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";

pub(crate) fn string(rng: &mut Xoshiro256PlusPlus, n: usize) -> String {
    (0..n)
        .map(|_| ALNUM[(rng.next_u64() % ALNUM.len() as u64) as usize] as char)
        .collect()
}

/// `random_string()` with no length: 0 to 254 characters.
pub(crate) fn text(rng: &mut Xoshiro256PlusPlus) -> String {
    let n = (rng.next_u64() % 255) as usize;
    string(rng, n)
}

pub(crate) fn chance(rng: &mut Xoshiro256PlusPlus, p: f64) -> bool {
    unit_f64(rng) < p
}

/// `rand(max)` redrawn while 0, as `random_integer_string`.
fn nonzero_below(rng: &mut Xoshiro256PlusPlus, max: u64) -> u64 {
    loop {
        let v = rng.next_u64() % max;
        if v != 0 {
            return v;
        }
    }
}

/// `2007MMDDTHHMM00Z` with the 2007 client's ranges (month 01-11, day 01-27 ...).
pub(crate) fn date(rng: &mut Xoshiro256PlusPlus) -> String {
    format!(
        "2007{:02}{:02}T{:02}{:02}00Z",
        nonzero_below(rng, 12),
        nonzero_below(rng, 28),
        nonzero_below(rng, 23),
        nonzero_below(rng, 59)
    )
}

/// A new item uid that carries the run id, so what loadmix created is recognisable.
pub(crate) fn uid(rng: &mut Xoshiro256PlusPlus, run_id: &str) -> String {
    format!("lm-{run_id}-{}", string(rng, 24))
}

/// The records of a new or changed item, as the 2007 client sent them: item, modifiedBy,
/// note and event, plus `mail` and `alarm` records with 5 % and 3 % chance; a daily
/// recurrence with 5 %.
pub(crate) fn eim_records(
    rng: &mut Xoshiro256PlusPlus,
    uid: &str,
    user: &str,
    extra_records: bool,
) -> Vec<Record> {
    let title = text(rng);
    let body = text(rng);
    let (dtstart, rrule) = if chance(rng, 0.05) {
        (
            ";VALUE=DATE-TIME:20070501T080000".to_string(),
            ";FREQ=DAILY;UNTIL=20080506T045959Z",
        )
    } else {
        (format!(";VALUE=DATE-TIME:{}", date(rng)), "")
    };
    let duration = if chance(rng, 0.5) { "PT30M" } else { "PT60M" };
    let key = |n: &str, ty: &str, v: &str| Field::new(n, ty, true, v);
    let val = |n: &str, ty: &str, v: &str| Field::new(n, ty, false, v);
    let mut records = vec![
        Record::new(
            "item",
            ITEM_NS,
            vec![
                key("uuid", "text", uid),
                val("title", "text", &title),
                val("triage", "text", "100 10.00 1"),
                val("createdOn", "decimal", "1171318773"),
            ],
        ),
        Record::new(
            "modby",
            MODBY_NS,
            vec![
                key("uuid", "text", uid),
                key("timestamp", "decimal", "1171318773"),
                key("userid", "text", user),
                key("action", "integer", "100"),
            ],
        ),
        Record::new(
            "note",
            NOTE_NS,
            vec![
                key("uuid", "text", uid),
                val("body", "clob", &body),
                val("icalUid", "text", uid),
            ],
        ),
        Record::new(
            "event",
            EVENT_NS,
            vec![
                key("uuid", "text", uid),
                val("dtstart", "text", &dtstart),
                val("duration", "text", duration),
                Field::empty("location", "text"),
                if rrule.is_empty() {
                    Field::empty("rrule", "text")
                } else {
                    val("rrule", "text", rrule)
                },
                Field::empty("exrule", "text"),
                Field::empty("rdate", "text"),
                Field::empty("exdate", "text"),
                val("status", "text", "CONFIRMED"),
            ],
        ),
    ];
    if extra_records && chance(rng, 0.05) {
        let subject = string(rng, 20);
        records.push(Record::new(
            "mail",
            MAIL_NS,
            vec![key("uuid", "text", uid), val("subject", "text", &subject)],
        ));
    }
    if extra_records && chance(rng, 0.03) {
        records.push(Record::new(
            "displayAlarm",
            ALARM_NS,
            vec![key("uuid", "text", uid), val("trigger", "text", "-PT15M")],
        ));
    }
    records
}

/// An Atom entry with EIM-JSON content; a weekly rule with 4 % chance; `note`, when
/// given, as the note's body (a team's stamp, on a line of its own).
pub(crate) fn atom_entry(rng: &mut Xoshiro256PlusPlus, uid: &str, note: Option<&str>) -> String {
    let title = string(rng, 40);
    let start = date(rng);
    let duration = if chance(rng, 0.5) { "PT30M" } else { "PT60M" };
    let mut event = vec![
        Field::new("uuid", "text", true, uid),
        Field::new(
            "dtstart",
            "text",
            false,
            &format!(";VALUE=DATE-TIME:{start}"),
        ),
        Field::new("duration", "text", false, duration),
    ];
    if chance(rng, 0.04) {
        event.push(Field::new("rrule", "text", false, ";FREQ=WEEKLY"));
    }
    let records = [
        Record::new(
            "item",
            ITEM_NS,
            vec![
                Field::new("uuid", "text", true, uid),
                Field::new("title", "text", false, &title),
            ],
        ),
        Record::new("note", NOTE_NS, {
            let mut f = vec![Field::new("uuid", "text", true, uid)];
            f.extend(note.map(|n| Field::new("body", "clob", false, &format!("\n{n}\n"))));
            f
        }),
        Record::new(
            "modby",
            MODBY_NS,
            vec![
                Field::new("uuid", "text", true, uid),
                Field::new("userid", "text", true, ""),
                Field::new("action", "integer", true, "100"),
                Field::new("timestamp", "decimal", true, "1181066295836"),
            ],
        ),
        Record::new("event", EVENT_NS, event),
    ];
    let author = string(rng, 12);
    let mut content = atom_syndication::Content::default();
    content.set_content_type(Some("application/eim+json".to_string()));
    content.set_value(Some(eim::to_json(uid, &records).to_string()));
    let updated =
        chrono::DateTime::parse_from_rfc3339("2007-06-05T10:58:15-07:00").unwrap_or_default();
    let mut entry = atom_syndication::Entry::default();
    entry.set_title(title);
    entry.set_id(format!("urn:uuid:{uid}"));
    entry.set_updated(updated);
    entry.set_authors(vec![atom_syndication::Person {
        name: author,
        ..Default::default()
    }]);
    entry.set_content(Some(content));
    entry.to_string()
}

/// An iCalendar event of about `size` bytes (padded with a DESCRIPTION) in `shape`:
/// weekly with its chance of recurring, 2 to 6 attendees with theirs (at
/// `example.invalid`, and no ORGANIZER, so no server schedules anything), a display
/// alarm with its. A share of 0 draws nothing, so events without attendees and alarms
/// are drawn as they always were.
pub(crate) fn ics_event(
    rng: &mut Xoshiro256PlusPlus,
    uid: &str,
    size: usize,
    shape: &EventShape,
) -> String {
    let duration = ["PT30M", "PT60M", "PT90M"][(rng.next_u64() % 3) as usize];
    let recurring = chance(rng, shape.recurring);
    let rrule = if recurring {
        "RRULE:FREQ=WEEKLY\r\n"
    } else {
        ""
    };
    let start = date(rng);
    // A share of 0 draws nothing, so events without exceptions are drawn as before.
    let exceptions = recurring && shape.exceptions > 0.0 && chance(rng, shape.exceptions);
    let (exdate, moved) = match exceptions.then(|| exceptions_of(&start)).flatten() {
        Some((gone, moved, to)) => (
            format!("EXDATE:{gone}\r\n"),
            format!(
                "BEGIN:VEVENT\r\nUID:{uid}\r\nDTSTAMP:20070712T182145Z\r\nRECURRENCE-ID:{moved}\r\nDTSTART:{to}\r\nDURATION:{duration}\r\nSUMMARY:Moved\r\nEND:VEVENT\r\n"
            ),
        ),
        None => (String::new(), String::new()),
    };
    let mut s = format!(
        "BEGIN:VCALENDAR\r\nVERSION:2.0\r\nPRODID:-//loadmix//CalDAV Client//EN\r\nBEGIN:VEVENT\r\nUID:{uid}\r\nDTSTAMP:20070712T182145Z\r\nDTSTART:{start}\r\nDURATION:{duration}\r\n{rrule}{exdate}SUMMARY:{}\r\n",
        string(rng, 50)
    );
    if shape.attendees > 0.0 && chance(rng, shape.attendees) {
        for i in 0..2 + rng.next_u64() % 5 {
            s.push_str(&format!(
                "ATTENDEE;CN=Guest {i};ROLE=REQ-PARTICIPANT;PARTSTAT=NEEDS-ACTION:mailto:lm-{}@example.invalid\r\n",
                string(rng, 8).to_ascii_lowercase()
            ));
        }
    }
    // Properties first, then the alarm: RFC 5545 puts subcomponents after them.
    let alarm = match shape.alarms > 0.0 && chance(rng, shape.alarms) {
        true => {
            "BEGIN:VALARM\r\nACTION:DISPLAY\r\nDESCRIPTION:Reminder\r\nTRIGGER:-PT15M\r\nEND:VALARM\r\n"
        }
        false => "",
    };
    let tail = format!("END:VEVENT\r\n{moved}END:VCALENDAR\r\n");
    let room = size.saturating_sub(s.len() + alarm.len() + tail.len() + "DESCRIPTION:\r\n".len());
    if room > 0 {
        // Folded at 74 characters, as RFC 5545 wants lines of at most 75 octets.
        let desc = string(rng, room);
        s.push_str("DESCRIPTION:");
        let mut first = true;
        for chunk in desc.as_bytes().chunks(60) {
            if !first {
                s.push_str("\r\n ");
            }
            first = false;
            s.push_str(std::str::from_utf8(chunk).unwrap_or(""));
        }
        s.push_str("\r\n");
    }
    s.push_str(alarm);
    s.push_str(&tail);
    s
}

/// A weekly event's exceptions from its start (`2007MMDDTHHMM00Z`): its second
/// occurrence (removed), its third (moved), and where the third moved to, an hour later.
fn exceptions_of(start: &str) -> Option<(String, String, String)> {
    let f = "%Y%m%dT%H%M%SZ";
    let t = chrono::NaiveDateTime::parse_from_str(start, f).ok()?;
    let week = chrono::Duration::weeks(1);
    let at = |d: chrono::NaiveDateTime| d.format(f).to_string();
    let third = t + week + week;
    Some((
        at(t + week),
        at(third),
        at(third + chrono::Duration::hours(1)),
    ))
}

/// A contact in `shape` as a vCard: a given and family name (the family name, which an
/// `addressbook-query` looks for, returned beside the text), its emails and phone
/// numbers, with its chance a NOTE and CATEGORIES, and with its chance a PHOTO of the
/// size `shape.photo` draws: a JPEG's first bytes, then random ones.
pub(crate) fn vcard_contact(
    rng: &mut Xoshiro256PlusPlus,
    uid: &str,
    shape: &ContactShape,
) -> (String, String) {
    let family = format!("Lm{}", string(rng, 10));
    let given = string(rng, 6);
    let emails = (0..shape.emails)
        .map(|i| format!("{}.{i}@example.invalid", family.to_ascii_lowercase()))
        .collect();
    let phones = (0..shape.phones)
        .map(|_| format!("+1 555 {:07}", rng.next_u64() % 10_000_000))
        .collect();
    let noted = shape.notes > 0.0 && chance(rng, shape.notes);
    let photo = match &shape.photo {
        Some(d) if shape.photos > 0.0 && chance(rng, shape.photos) => {
            let n = (d.sample(rng).max(0.0) as usize).min(MAX_PHOTO);
            let mut jpeg = vec![0u8; n];
            rng.fill_bytes(&mut jpeg);
            for (b, h) in jpeg.iter_mut().zip([0xFF, 0xD8, 0xFF, 0xE0]) {
                *b = h;
            }
            Some(jpeg)
        }
        Some(_) | None => None,
    };
    let card = vcard::NewCard {
        version: shape.version.to_string(),
        uid: uid.to_string(),
        given,
        family: family.clone(),
        emails,
        phones,
        note: noted.then(|| text(rng)),
        categories: match noted {
            true => vec!["Work".into(), "loadmix".into()],
            false => Vec::new(),
        },
        photo,
    };
    (vcard::write(&card), family)
}

/// The largest photo one generated contact carries: a size distribution's tail is cut
/// here (a phone's full-resolution picture is a few MiB; base64 of this fits a 16 MiB body).
pub(crate) const MAX_PHOTO: usize = 8 << 20;

/// A UTC time as iCalendar writes it (`20070108T000000Z`), what chrono's
/// `%Y%m%dT%H%M%SZ` gives, without parsing the format each time: a report's range is
/// written per request.
pub(crate) fn ical_utc(t: chrono::DateTime<chrono::Utc>) -> String {
    use chrono::{Datelike, Timelike};
    format!(
        "{:04}{:02}{:02}T{:02}{:02}{:02}Z",
        t.year(),
        t.month(),
        t.day(),
        t.hour(),
        t.minute(),
        t.second()
    )
}

/// A week of 2007: start = 2007-01-01 + rand(51) weeks, end = start + `len`.
pub(crate) fn week(
    rng: &mut Xoshiro256PlusPlus,
    len: chrono::Duration,
) -> (chrono::DateTime<chrono::Utc>, chrono::DateTime<chrono::Utc>) {
    use chrono::TimeZone;
    let base = chrono::Utc
        .with_ymd_and_hms(2007, 1, 1, 0, 0, 0)
        .single()
        .unwrap_or_default();
    let start = base + chrono::Duration::weeks((rng.next_u64() % 51) as i64);
    (start, start + len)
}

#[cfg(test)]
mod tests {
    use super::*;

    use crate::formats::ical;
    use rand::SeedableRng;

    #[test]
    fn an_ical_utc_time_is_what_chrono_formats() {
        let mut rng = Xoshiro256PlusPlus::seed_from_u64(7);
        for k in 0..500 {
            let len = chrono::Duration::seconds((rng.next_u64() % 900_000) as i64 + k);
            let (a, b) = week(&mut rng, len);
            for t in [a, b] {
                assert_eq!(ical_utc(t), t.format("%Y%m%dT%H%M%SZ").to_string());
            }
        }
    }

    #[test]
    fn events_carry_attendees_and_alarms_as_often_as_their_shape_says() {
        let mut rng = Xoshiro256PlusPlus::seed_from_u64(2);
        let shape = EventShape {
            attendees: 0.3,
            alarms: 0.1,
            ..EventShape::default()
        };
        let events: Vec<String> = (0..2000)
            .map(|_| ics_event(&mut rng, "U", 0, &shape))
            .collect();
        let with = |what: &str| events.iter().filter(|e| e.contains(what)).count();
        assert!(
            (520..680).contains(&with("ATTENDEE;")),
            "{}",
            with("ATTENDEE;")
        );
        assert!(
            (150..250).contains(&with("BEGIN:VALARM")),
            "{}",
            with("BEGIN:VALARM")
        );
        for e in &events {
            let n = e.matches("ATTENDEE;").count();
            assert!(n == 0 || (2..=6).contains(&n), "{n}");
            assert!(!e.contains("ORGANIZER"), "nobody is invited");
            assert!(ical::parse(e).is_ok());
        }
    }

    #[test]
    fn a_recurring_event_with_exceptions_removes_one_occurrence_and_moves_another() {
        let mut rng = Xoshiro256PlusPlus::seed_from_u64(5);
        let shape = EventShape {
            recurring: 1.0,
            exceptions: 1.0,
            ..EventShape::default()
        };
        let ics = ics_event(&mut rng, "u-1", 0, &shape);
        let c = ical::parse(&ics).unwrap();
        assert_eq!(c.exdates.len(), 1, "{ics}");
        assert_eq!(ics.matches("BEGIN:VEVENT").count(), 2, "{ics}");
        let start = c.dtstart.unwrap();
        let (gone, moved, to) = exceptions_of(&start).unwrap();
        assert_eq!(c.exdates[0], gone);
        assert!(
            ics.contains(&format!("RECURRENCE-ID:{moved}\r\nDTSTART:{to}")),
            "{ics}"
        );
        // No share, no exceptions, and the same draws as before there were any.
        let plain = EventShape {
            recurring: 1.0,
            ..EventShape::default()
        };
        let a = ics_event(&mut Xoshiro256PlusPlus::seed_from_u64(5), "u", 0, &plain);
        assert!(!a.contains("EXDATE") && !a.contains("RECURRENCE-ID"));
    }

    #[test]
    fn generated_bodies_parse_as_their_formats() {
        let mut rng = Xoshiro256PlusPlus::seed_from_u64(1);
        for _ in 0..50 {
            let rs = eim_records(&mut rng, "U1", "user <&>", true);
            let doc = eim::write_eimml("C", "n <&>", [("U1", Some(rs.as_slice())), ("U2", None)]);
            let parsed = eim::parse_eimml(&doc).unwrap();
            assert_eq!(parsed.recordsets.len(), 2);
            assert_eq!(parsed.recordsets[0].1.as_ref(), Some(&rs));
            let entry = atom_entry(&mut rng, "U3", None);
            let e = atom_syndication::Entry::read_from(entry.as_bytes()).unwrap();
            let (uid, recs) = eim::from_json(e.content().unwrap().value().unwrap()).unwrap();
            assert_eq!(uid, "U3");
            assert!(recs.iter().any(|r| r.get("dtstart").is_some()));
            let shape = EventShape {
                recurring: 0.5,
                attendees: 0.5,
                alarms: 0.5,
                ..EventShape::default()
            };
            let ics = ics_event(&mut rng, "U4", 1024, &shape);
            assert!((1000..1100).contains(&ics.len()), "{}", ics.len());
            let c = ical::parse(&ics).unwrap();
            assert_eq!(c.uid, "U4");
            assert!(c.dtstart.is_some());
            if ics.contains("BEGIN:VALARM") {
                assert!(ics.find("BEGIN:VALARM") > ics.find("DESCRIPTION:"));
            }
        }
    }
}
