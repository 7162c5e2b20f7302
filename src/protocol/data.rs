//! Generated data, as the 2007 stress client made it (cosmo-0.7-protocols.md §1.7, §2.4,
//! §3.4, §4): random strings, dates in 2007, EIMML recordsets, Atom entries with EIM-JSON
//! content, iCalendar events. Everything is drawn from the VU's data stream.

use rand::Rng;
use rand::rngs::Xoshiro256PlusPlus;

use crate::server::xml::esc;
use crate::workload::dist::unit_f64;

const ALNUM: &[u8] = b"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";

pub fn string(rng: &mut Xoshiro256PlusPlus, n: usize) -> String {
    (0..n)
        .map(|_| ALNUM[(rng.next_u64() % ALNUM.len() as u64) as usize] as char)
        .collect()
}

/// `random_string()` with no length: 0 to 254 characters.
pub fn text(rng: &mut Xoshiro256PlusPlus) -> String {
    let n = (rng.next_u64() % 255) as usize;
    string(rng, n)
}

pub fn chance(rng: &mut Xoshiro256PlusPlus, p: f64) -> bool {
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
pub fn date(rng: &mut Xoshiro256PlusPlus) -> String {
    format!(
        "2007{:02}{:02}T{:02}{:02}00Z",
        nonzero_below(rng, 12),
        nonzero_below(rng, 28),
        nonzero_below(rng, 23),
        nonzero_below(rng, 59)
    )
}

/// A new item uid that carries the run id, so what loadmix created is recognisable.
pub fn uid(rng: &mut Xoshiro256PlusPlus, run_id: &str) -> String {
    format!("lm-{run_id}-{}", string(rng, 24))
}

/// One EIMML recordset for a new or changed item (§2.4); `mail` and `alarm` records with
/// 5 % and 3 % chance; a daily recurrence with 5 %.
pub fn eimml_recordset(
    rng: &mut Xoshiro256PlusPlus,
    uid: &str,
    user: &str,
    extra_records: bool,
) -> String {
    let title = esc(&text(rng)).into_owned();
    let body = esc(&text(rng)).into_owned();
    let (dtstart, rrule) = if chance(rng, 0.05) {
        (
            ";VALUE=DATE-TIME:20070501T080000".to_string(),
            ";FREQ=DAILY;UNTIL=20080506T045959Z",
        )
    } else {
        (format!(";VALUE=DATE-TIME:{}", date(rng)), "")
    };
    let duration = if chance(rng, 0.5) { "PT30M" } else { "PT60M" };
    let mut s = format!(
        r#"<eim:recordset uuid="{uid}"><item:record xmlns:item="http://osafoundation.org/eim/item/0"><item:uuid eim:key="true" eim:type="text">{uid}</item:uuid><item:title eim:type="text">{title}</item:title><item:triage eim:type="text">100 10.00 1</item:triage><item:createdOn eim:type="decimal">1171318773</item:createdOn></item:record><modby:record xmlns:modby="http://osafoundation.org/eim/modifiedBy/0"><modby:uuid eim:key="true" eim:type="text">{uid}</modby:uuid><modby:timestamp eim:key="true" eim:type="decimal">1171318773</modby:timestamp><modby:userid eim:key="true" eim:type="text">{user}</modby:userid><modby:action eim:key="true" eim:type="integer">100</modby:action></modby:record><note:record xmlns:note="http://osafoundation.org/eim/note/0"><note:uuid eim:key="true" eim:type="text">{uid}</note:uuid><note:body eim:type="clob">{body}</note:body><note:icalUid eim:type="text">{uid}</note:icalUid></note:record><event:record xmlns:event="http://osafoundation.org/eim/event/0"><event:uuid eim:key="true" eim:type="text">{uid}</event:uuid><event:dtstart eim:type="text">{dtstart}</event:dtstart><event:duration eim:type="text">{duration}</event:duration><event:location eim:type="text"/><event:rrule eim:type="text">{rrule}</event:rrule><event:exrule eim:type="text"/><event:rdate eim:type="text"/><event:exdate eim:type="text"/><event:status eim:type="text">CONFIRMED</event:status></event:record>"#
    );
    if extra_records && chance(rng, 0.05) {
        s.push_str(&format!(
            r#"<mail:record xmlns:mail="http://osafoundation.org/eim/mail/0"><mail:uuid eim:key="true" eim:type="text">{uid}</mail:uuid><mail:subject eim:type="text">{}</mail:subject></mail:record>"#,
            string(rng, 20)
        ));
    }
    if extra_records && chance(rng, 0.03) {
        s.push_str(&format!(
            r#"<displayAlarm:record xmlns:displayAlarm="http://osafoundation.org/eim/displayAlarm/0"><displayAlarm:uuid eim:key="true" eim:type="text">{uid}</displayAlarm:uuid><displayAlarm:trigger eim:type="text">-PT15M</displayAlarm:trigger></displayAlarm:record>"#
        ));
    }
    s.push_str("</eim:recordset>");
    s
}

/// A whole EIMML collection document around `recordsets`.
pub fn eimml_collection(uid: &str, name: &str, recordsets: &str) -> String {
    format!(
        r#"<?xml version="1.0" encoding="UTF-8"?><eim:collection uuid="{uid}" name="{}" xmlns:eim="http://osafoundation.org/eim/0">{recordsets}</eim:collection>"#,
        esc(name)
    )
}

pub fn tombstone(uid: &str) -> String {
    format!(r#"<eim:recordset eim:deleted="true" uuid="{uid}"/>"#)
}

/// An Atom entry with EIM-JSON content (§3.4); a weekly rule with 4 % chance.
pub fn atom_entry(rng: &mut Xoshiro256PlusPlus, uid: &str) -> String {
    let title = string(rng, 40);
    let start = date(rng);
    let duration = if chance(rng, 0.5) { "PT30M" } else { "PT60M" };
    let rrule = if chance(rng, 0.04) {
        r#","rrule":["text",";FREQ=WEEKLY"]"#
    } else {
        ""
    };
    let json = format!(
        r#"{{"uuid":"{uid}","records":{{"item":{{"prefix":"item","ns":"http://osafoundation.org/eim/item/0","key":{{"uuid":["text","{uid}"]}},"fields":{{"title":["text","{title}"]}}}},"note":{{"prefix":"note","ns":"http://osafoundation.org/eim/note/0","key":{{"uuid":["text","{uid}"]}},"fields":{{}}}},"modby":{{"prefix":"modby","ns":"http://osafoundation.org/eim/modby/0","key":{{"uuid":["text","{uid}"],"userid":["text",""],"action":["integer",100],"timestamp":["decimal",1181066295836]}}}},"event":{{"prefix":"event","ns":"http://osafoundation.org/eim/event/0","key":{{"uuid":["text","{uid}"]}},"fields":{{"dtstart":["text",";VALUE=DATE-TIME:{start}"],"duration":["text","{duration}"]{rrule}}}}}}}}}"#
    );
    format!(
        r#"<entry xmlns="http://www.w3.org/2005/Atom"><title>{title}</title><id>urn:uuid:{uid}</id><updated>2007-06-05T10:58:15-07:00</updated><author><name>{}</name></author><content type="application/eim+json">{}</content></entry>"#,
        string(rng, 12),
        esc(&json)
    )
}

/// An iCalendar event (§4) of about `size` bytes (padded with a DESCRIPTION), weekly with
/// probability `recurring`.
pub fn ics_event(rng: &mut Xoshiro256PlusPlus, uid: &str, size: usize, recurring: f64) -> String {
    let duration = ["PT30M", "PT60M", "PT90M"][(rng.next_u64() % 3) as usize];
    let rrule = if chance(rng, recurring) {
        "RRULE:FREQ=WEEKLY\r\n"
    } else {
        ""
    };
    let mut s = format!(
        "BEGIN:VCALENDAR\r\nVERSION:2.0\r\nPRODID:-//loadmix//CalDAV Client//EN\r\nBEGIN:VEVENT\r\nUID:{uid}\r\nDTSTAMP:20070712T182145Z\r\nDTSTART:{}\r\nDURATION:{duration}\r\n{rrule}SUMMARY:{}\r\n",
        date(rng),
        string(rng, 50)
    );
    let tail = "END:VEVENT\r\nEND:VCALENDAR\r\n";
    let room = size.saturating_sub(s.len() + tail.len() + "DESCRIPTION:\r\n".len());
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
    s.push_str(tail);
    s
}

/// A week of 2007: start = 2007-01-01 + rand(51) weeks, end = start + `len`.
pub fn week(
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
    use rand::SeedableRng;

    #[test]
    fn generated_bodies_parse_as_their_formats() {
        let mut rng = Xoshiro256PlusPlus::seed_from_u64(1);
        for _ in 0..50 {
            let rs = eimml_recordset(&mut rng, "U1", "user", true);
            let doc = eimml_collection("C", "n <&>", &format!("{rs}{}", tombstone("U2")));
            let parsed = crate::server::model::parse_eimml(&doc).unwrap();
            assert_eq!(parsed.recordsets.len(), 2);
            let entry = atom_entry(&mut rng, "U3");
            let e = atom_syndication::Entry::read_from(entry.as_bytes()).unwrap();
            let (uid, _) =
                crate::server::model::from_eim_json(e.content().unwrap().value().unwrap()).unwrap();
            assert_eq!(uid, "U3");
            let ics = ics_event(&mut rng, "U4", 1024, 0.5);
            assert!((1000..1100).contains(&ics.len()), "{}", ics.len());
            let (uid, d) = crate::server::model::parse_ics(&ics).unwrap();
            assert_eq!(uid, "U4");
            assert!(d.timing().is_some());
        }
    }
}
