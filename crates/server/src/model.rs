//! The embedded server's data model: an item is a set of EIM records (as Cosmo stored it),
//! optionally with the iCalendar text a CalDAV client PUT. Morse Code reads and writes the
//! records as EIMML, Atom as EIM-JSON, CalDAV as iCalendar, so an event created through one
//! protocol is seen through the others. Also here: event timing (start, duration,
//! recurrence), time-range matching with recurrences expanded, and triage for dashboards.

use chrono::{DateTime, Duration, TimeZone, Utc};
use serde::{Deserialize, Serialize};

use loadmix_formats::eim::{self, EVENT_NS, ITEM_NS, NOTE_NS};
pub(crate) use loadmix_formats::eim::{Field, Record};
pub(crate) use loadmix_formats::ical::parse_datetime as parse_ical_datetime;
use loadmix_formats::ical::{self, parse_duration};
use loadmix_formats::tz;
pub(crate) use loadmix_formats::tz::Zone;

/// What is stored for an item.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ItemData {
    /// The item's EIM records (Morse Code and Atom's shape of it), one per namespace.
    pub records: Vec<Record>,
    /// The iCalendar text as a CalDAV client sent it, served back unchanged.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ics: Option<String>,
    /// When the event happens, worked out once when the item is written: time-range
    /// queries must not parse every item's calendar text on every request.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub when: Option<When>,
    /// RFC 6638's Schedule-Tag of a scheduling object resource: changed by what the
    /// organizer changes, kept when only an attendee's participation status changes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub schedule_tag: Option<String>,
    /// A contact of an address book (CardDAV): the vCard as the client sent it, served
    /// back unchanged, with what a query matches worked out once when it is written.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub card: Option<StoredCard>,
}

/// A contact as stored: its vCard text, and the values an `addressbook-query` matches.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StoredCard {
    pub text: String,
    /// FN, unescaped.
    pub full_name: String,
    /// Each EMAIL's address.
    pub emails: Vec<String>,
}

/// A stored, serialisable [`Timing`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct When {
    pub start_ms: i64,
    pub duration_s: i64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rrule: Option<String>,
    /// Starts the recurrence excludes (EXDATE), in ms.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub exdates_ms: Vec<i64>,
    /// The zone of its start, when it has one: a recurrence runs in its local time.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub zone: Option<Zone>,
}

impl ItemData {
    /// New item data with its timing worked out.
    pub fn new(records: Vec<Record>, ics: Option<String>) -> ItemData {
        let mut d = ItemData {
            records,
            ics,
            when: None,
            schedule_tag: None,
            card: None,
        };
        d.when = d.compute_timing().map(|t| When {
            start_ms: t.start.timestamp_millis(),
            duration_s: t.duration.num_seconds(),
            exdates_ms: t.exdates.iter().map(|x| x.timestamp_millis()).collect(),
            rrule: t.rrule,
            zone: t.zone,
        });
        d
    }

    /// Where an item may fall in time, for pre-filtering range queries: its first start and
    /// its end (`None` for a recurring event, which may go on for ever). `None` when the item
    /// has no time at all.
    pub fn span(&self) -> Option<(i64, Option<i64>)> {
        let w = self.when.as_ref()?;
        let end = match w.rrule {
            Some(_) => None,
            None => Some(w.start_ms.saturating_add(w.duration_s.saturating_mul(1000))),
        };
        Some((w.start_ms, end))
    }
    fn field(&self, ns: &str, name: &str) -> Option<&str> {
        self.records
            .iter()
            .find(|r| r.ns == ns)
            .and_then(|r| r.get(name))
    }

    /// The item's title (its EIM item record's `title`), or empty.
    pub fn title(&self) -> &str {
        self.field(ITEM_NS, "title").unwrap_or("")
    }

    /// Replace records of the same namespace, keep the others (a Morse Code update may
    /// carry only the records that changed).
    pub fn merge(&mut self, newer: ItemData) {
        let mut records = std::mem::take(&mut self.records);
        for r in newer.records {
            match records.iter_mut().find(|x| x.ns == r.ns) {
                Some(x) => *x = r,
                None => records.push(r),
            }
        }
        // The calendar text no longer describes the item.
        *self = ItemData::new(records, newer.ics);
    }

    /// Triage status code: 100 now, 200 later, 300 done (Cosmo's "100 10.00 1").
    pub fn triage(&self) -> Option<u32> {
        self.field(ITEM_NS, "triage")
            .and_then(|t| t.split_whitespace().next())
            .and_then(|c| c.parse().ok())
    }

    /// Start, duration and recurrence.
    pub fn timing(&self) -> Option<Timing> {
        match &self.when {
            Some(w) => Some(Timing {
                start: Utc.timestamp_millis_opt(w.start_ms).single()?,
                duration: Duration::try_seconds(w.duration_s).unwrap_or_else(Duration::zero),
                rrule: w.rrule.clone(),
                exdates: w
                    .exdates_ms
                    .iter()
                    .filter_map(|ms| Utc.timestamp_millis_opt(*ms).single())
                    .collect(),
                zone: w.zone.clone(),
            }),
            None => self.compute_timing(),
        }
    }

    /// Start, duration and recurrence, from the calendar text or the event record.
    fn compute_timing(&self) -> Option<Timing> {
        if let Some(ics) = &self.ics {
            return timing_from_ics(ics);
        }
        let start = self.field(EVENT_NS, "dtstart")?;
        let dur = self.field(EVENT_NS, "duration").unwrap_or("PT0M");
        let rrule = self
            .field(EVENT_NS, "rrule")
            .map(|r| r.trim_start_matches(';').to_string())
            .filter(|r| !r.is_empty());
        Some(Timing {
            start: parse_ical_datetime(strip_eim_params(start))?,
            duration: parse_duration(dur).unwrap_or_else(Duration::zero),
            rrule,
            exdates: Vec::new(),
            zone: None,
        })
    }

    /// A contact: the vCard text a CardDAV client stored (checked by `parse_vcard`).
    pub fn contact(text: String, full_name: String, emails: Vec<String>) -> ItemData {
        ItemData {
            card: Some(StoredCard {
                text,
                full_name,
                emails,
            }),
            ..ItemData::default()
        }
    }

    /// What a GET of the item serves: its media type and text (a contact's vCard, else
    /// the item as iCalendar).
    pub fn served(&self, uid: &str) -> (&'static str, String) {
        match &self.card {
            Some(c) => ("text/vcard; charset=utf-8", c.text.clone()),
            None => ("text/calendar; charset=utf-8", self.to_ics(uid)),
        }
    }

    /// The item as iCalendar: the text a CalDAV client stored, or one made from the records.
    pub fn to_ics(&self, uid: &str) -> String {
        if let Some(ics) = &self.ics {
            return ics.clone();
        }
        let mut s = String::from(
            "BEGIN:VCALENDAR\r\nVERSION:2.0\r\nPRODID:-//loadmix//embedded server//EN\r\nBEGIN:VEVENT\r\n",
        );
        push_prop(&mut s, "UID", &ical::escape_text(uid));
        push_prop(&mut s, "DTSTAMP", "20070101T000000Z");
        if let Some(start) = self.field(EVENT_NS, "dtstart") {
            push_prop(&mut s, "DTSTART", strip_eim_params(start));
            if let Some(d) = self.field(EVENT_NS, "duration") {
                push_prop(&mut s, "DURATION", d);
            }
            if let Some(r) = self
                .field(EVENT_NS, "rrule")
                .map(|r| r.trim_start_matches(';'))
                .filter(|r| !r.is_empty())
            {
                push_prop(&mut s, "RRULE", r);
            }
        }
        push_prop(&mut s, "SUMMARY", &ical::escape_text(self.title()));
        if let Some(b) = self.field(NOTE_NS, "body").filter(|b| !b.is_empty()) {
            push_prop(&mut s, "DESCRIPTION", &ical::escape_text(b));
        }
        s.push_str("END:VEVENT\r\nEND:VCALENDAR\r\n");
        s
    }

    /// Whether the event blocks time in a free-busy answer: not when it is transparent or
    /// cancelled.
    pub fn takes_time(&self) -> bool {
        let Some(ics) = &self.ics else { return true };
        let unfolded = icalendar::parser::unfold(ics);
        !unfolded.lines().any(|l| {
            let l = l.trim_end_matches('\r').to_ascii_uppercase();
            l == "TRANSP:TRANSPARENT" || l == "STATUS:CANCELLED"
        })
    }

    /// The component type the item is (for calendar-query comp-filters).
    pub fn component(&self) -> &'static str {
        match &self.ics {
            Some(ics) if ics.contains("BEGIN:VTODO") => "VTODO",
            Some(ics) if ics.contains("BEGIN:VJOURNAL") => "VJOURNAL",
            _ => "VEVENT",
        }
    }

    /// EIM-JSON as Cosmo's Atom service serves it.
    pub fn to_eim_json(&self, uid: &str) -> serde_json::Value {
        eim::to_json(uid, &self.records)
    }
}

/// Parse EIM-JSON (an Atom entry's content): the item's uid and data.
pub(crate) fn from_eim_json(text: &str) -> Result<(String, ItemData), String> {
    let (uid, records) = eim::from_json(text)?;
    Ok((uid, ItemData::new(records, None)))
}

/// A parsed EIMML collection: its uid and name, and per recordset the item uid and either
/// its data or a tombstone.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Eimml {
    pub uuid: String,
    pub name: Option<String>,
    pub recordsets: Vec<(String, Option<ItemData>)>,
}

/// Parse an EIMML body (Morse Code publish or update).
pub(crate) fn parse_eimml(text: &str) -> Result<Eimml, String> {
    let e = eim::parse_eimml(text)?;
    Ok(Eimml {
        uuid: e.uuid,
        name: e.name,
        recordsets: e
            .recordsets
            .into_iter()
            .map(|(uid, recs)| (uid, recs.map(|r| ItemData::new(r, None))))
            .collect(),
    })
}

/// Write an EIMML collection: live items as recordsets, deleted ones as tombstones.
pub(crate) fn write_eimml<'a>(
    uuid: &str,
    name: &str,
    items: impl Iterator<Item = (&'a str, Option<&'a ItemData>)>,
) -> String {
    eim::write_eimml(
        uuid,
        name,
        items.map(|(u, d)| (u, d.map(|d| d.records.as_slice()))),
    )
}

/// A contact's vCard (CardDAV): its UID and what is stored, or why it is refused.
pub(crate) fn parse_vcard(text: &str) -> Result<(String, ItemData), String> {
    let card = loadmix_formats::vcard::parse(text).map_err(|e| e.to_string())?;
    let data = ItemData::contact(text.to_string(), card.full_name, card.emails);
    Ok((card.uid, data))
}

/// Parse and check an iCalendar body (CalDAV PUT): the UID of its main component and the
/// records derived from it.
pub fn parse_ics(text: &str) -> Result<(String, ItemData), String> {
    let c = ical::parse(text)?;
    // Stored rules must be rules: an INTERVAL=0 one would never advance.
    if let Some(rule) = &c.rrule {
        ical::check_rrule(rule)?;
    }
    let uid = c.uid.clone();
    // The parser has already unescaped TEXT values.
    let text_of = |v: &Option<String>| v.clone().unwrap_or_default();
    let mut records = vec![
        Record::new(
            "item",
            ITEM_NS,
            vec![
                Field::new("uuid", "text", true, &uid),
                Field::new("title", "text", false, &text_of(&c.summary)),
                Field::new("triage", "text", false, "100 0.00 1"),
            ],
        ),
        Record::new(
            "note",
            NOTE_NS,
            vec![
                Field::new("uuid", "text", true, &uid),
                Field::new("body", "clob", false, &text_of(&c.description)),
                Field::new("icalUid", "text", false, &uid),
            ],
        ),
    ];
    if let Some(start) = &c.dtstart {
        let mut fields = vec![
            Field::new("uuid", "text", true, &uid),
            Field::new(
                "dtstart",
                "text",
                false,
                &format!(";VALUE=DATE-TIME:{start}"),
            ),
        ];
        if let Some(d) = &c.duration {
            fields.push(Field::new("duration", "text", false, d));
        }
        if let Some(r) = &c.rrule {
            fields.push(Field::new("rrule", "text", false, &format!(";{r}")));
        }
        records.push(Record::new("event", EVENT_NS, fields));
    }
    let data = ItemData::new(records, Some(text.to_string()));
    Ok((uid, data))
}

fn push_prop(s: &mut String, name: &str, value: &str) {
    s.push_str(name);
    s.push(':');
    s.push_str(value);
    s.push_str("\r\n");
}

/// `;VALUE=DATE-TIME:20070314T101500Z` -> `20070314T101500Z`
fn strip_eim_params(v: &str) -> &str {
    v.rsplit(':').next().unwrap_or(v)
}

/// When an event happens.
#[derive(Debug, Clone, PartialEq)]
pub struct Timing {
    /// In UTC: a time with a `TZID` resolved through the calendar's VTIMEZONE; floating
    /// times are taken as UTC.
    pub start: DateTime<Utc>,
    pub duration: Duration,
    pub rrule: Option<String>,
    /// Occurrence starts the recurrence excludes (EXDATE).
    pub exdates: Vec<DateTime<Utc>>,
    /// The zone of the start: the recurrence runs in its local time, so a weekly 10:00
    /// stays 10:00 across a change of offset.
    pub zone: Option<Zone>,
}

fn timing_from_ics(ics: &str) -> Option<Timing> {
    let c = ical::parse(ics).ok()?;
    if c.kind == "VJOURNAL" {
        return None;
    }
    let start_text = c.dtstart?;
    let at = |v: &str, tzid: &Option<String>| tz::resolve(v, tzid.as_deref(), &c.zones);
    let start = at(&start_text, &c.dtstart_tzid)?;
    let duration = if let Some(d) = &c.duration {
        parse_duration(d).unwrap_or_else(Duration::zero)
    } else if let Some(e) = c.dtend.as_deref().and_then(|e| at(e, &c.dtend_tzid)) {
        e - start
    } else if start_text.trim().len() == 8 {
        Duration::days(1)
    } else {
        Duration::zero()
    };
    // A local start in a zone the calendar defines: its recurrence runs in that zone.
    let zone = match (&c.dtstart_tzid, start_text.trim().ends_with('Z')) {
        (Some(id), false) => c.zones.iter().find(|z| &z.tzid == id).cloned(),
        _ => None,
    };
    Some(Timing {
        start,
        duration,
        rrule: c.rrule.clone(),
        // DATE or DATE-TIME values, each in its own TZID when it has one.
        exdates: c
            .exdates
            .iter()
            .zip(c.exdate_tzids.iter().chain(std::iter::repeat(&None)))
            .filter_map(|(x, id)| at(x, id))
            .collect(),
        zone,
    })
}

/// How many occurrences of one rule a query may look at. A rule is first moved forward to
/// just before the range where that is exact (see [`Timing::occurrences`]), so only rules
/// with BY-parts that match very often come near this.
pub(crate) const SCAN_LIMIT: u32 = 100_000;

/// A recurrence that cannot be expanded within [`SCAN_LIMIT`] occurrences.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("the recurrence rule '{rule}' has more than {SCAN_LIMIT} occurrences before the range")]
pub struct TooDense {
    pub rule: String,
}

/// The seconds one FREQ step takes, for the frequencies whose steps are all equal in UTC.
fn fixed_step(freq: &str) -> Option<i64> {
    Some(match freq {
        "SECONDLY" => 1,
        "MINUTELY" => 60,
        "HOURLY" => 3_600,
        "DAILY" => 86_400,
        "WEEKLY" => 604_800,
        _ => return None,
    })
}

/// A plain rule (FREQ with fixed steps, INTERVAL, COUNT, UNTIL, WKST and nothing else)
/// moved `k` steps forward: its new start, and the rule text with COUNT reduced. `None`
/// when the rule is not plain, or has no occurrence left.
fn advance(start: DateTime<Utc>, rule: &str, lo: DateTime<Utc>) -> Option<(DateTime<Utc>, String)> {
    let mut step = None;
    let mut interval = 1i64;
    let mut count: Option<i64> = None;
    for part in rule.split(';') {
        let (k, v) = part.split_once('=')?;
        match k.to_ascii_uppercase().as_str() {
            "FREQ" => step = fixed_step(&v.to_ascii_uppercase()),
            "INTERVAL" => interval = v.parse().ok().filter(|i: &i64| *i > 0)?,
            "COUNT" => count = Some(v.parse().ok()?),
            "UNTIL" | "WKST" => {}
            _ => return None,
        }
    }
    let period = step?.checked_mul(interval)?;
    let behind = lo.signed_duration_since(start).num_seconds();
    // One step short of `lo`, so the first occurrence that can overlap is still produced.
    let k = (behind / period).checked_sub(1).filter(|k| *k > 0)?;
    let start = start.checked_add_signed(Duration::try_seconds(k.checked_mul(period)?)?)?;
    let rule = match count {
        None => rule.to_string(),
        Some(c) if c > k => rule
            .split(';')
            .map(|p| match p.split_once('=') {
                Some((n, _)) if n.eq_ignore_ascii_case("COUNT") => format!("COUNT={}", c - k),
                _ => p.to_string(),
            })
            .collect::<Vec<_>>()
            .join(";"),
        // Every occurrence is before the range.
        Some(_) => return Some((start, "FREQ=YEARLY;COUNT=0".into())),
    };
    Some((start, rule))
}

impl Timing {
    /// Occurrence starts that overlap [from, to), at most `limit`. A non-recurring event has
    /// one occurrence; an RRULE the server cannot parse counts its first occurrence only.
    /// All date arithmetic is checked: open-ended ranges come as the extreme dates. A plain
    /// rule is first moved to just before the range, so a `FREQ=SECONDLY` event from 1970
    /// costs no more to query in 2030 than one from last week; other rules are expanded
    /// from their start, at most [`SCAN_LIMIT`] occurrences.
    pub fn occurrences(
        &self,
        from: DateTime<Utc>,
        to: DateTime<Utc>,
        limit: u16,
    ) -> Result<Vec<DateTime<Utc>>, TooDense> {
        let overlaps = |s: DateTime<Utc>| {
            let e = s
                .checked_add_signed(self.duration)
                .unwrap_or(DateTime::<Utc>::MAX_UTC);
            s < to && (e > from || (self.duration.is_zero() && s >= from))
        };
        let single = || {
            if overlaps(self.start) {
                vec![self.start]
            } else {
                Vec::new()
            }
        };
        let Some(rule) = &self.rrule else {
            return Ok(single());
        };
        // The earliest start whose occurrence can still reach into the range.
        let lo = from
            .checked_sub_signed(self.duration)
            .and_then(|t| t.checked_sub_signed(Duration::seconds(1)))
            .unwrap_or(DateTime::<Utc>::MIN_UTC);
        // The rule runs in the start's frame: its zone's local time (written as if UTC),
        // or UTC. The range is widened by a day each way into that frame; each
        // occurrence is then taken back to UTC and checked against the range itself.
        let day = Duration::days(1);
        let frame = |t: DateTime<Utc>| match &self.zone {
            Some(z) if t > DateTime::<Utc>::MIN_UTC + day && t < DateTime::<Utc>::MAX_UTC - day => {
                Utc.from_utc_datetime(&z.to_local(t))
            }
            _ => t,
        };
        let back = |t: DateTime<Utc>| match &self.zone {
            Some(z) => z.to_utc(t.naive_utc()),
            None => t,
        };
        let (lo_f, to_f) = match &self.zone {
            Some(_) => (
                frame(lo)
                    .checked_sub_signed(day)
                    .unwrap_or(DateTime::<Utc>::MIN_UTC),
                frame(to)
                    .checked_add_signed(day)
                    .unwrap_or(DateTime::<Utc>::MAX_UTC),
            ),
            None => (lo, to),
        };
        let start_f = frame(self.start);
        let (start, rule) = advance(start_f, rule, lo_f).unwrap_or((start_f, rule.clone()));
        let text = format!("DTSTART:{}\nRRULE:{rule}", start.format("%Y%m%dT%H%M%SZ"));
        let Ok(set) = text.parse::<rrule::RRuleSet>() else {
            return Ok(single());
        };
        let set = set.limit();
        // Looked up per occurrence: sorted, so an event with many EXDATEs costs n log n,
        // not occurrences × EXDATEs.
        let mut excluded = self.exdates.clone();
        excluded.sort_unstable();
        let mut out = Vec::new();
        let mut scanned = 0u32;
        for d in &set {
            let d = d.with_timezone(&Utc);
            if d >= to_f || out.len() >= limit as usize {
                break;
            }
            scanned += 1;
            if scanned > SCAN_LIMIT {
                return Err(TooDense { rule });
            }
            let d = back(d);
            if d >= lo && d < to && overlaps(d) && excluded.binary_search(&d).is_err() {
                out.push(d);
            }
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const EIMML: &str = r#"<eim:collection uuid="C1" name="n &amp; m" xmlns:eim="http://osafoundation.org/eim/0">
  <eim:recordset uuid="I1">
    <item:record xmlns:item="http://osafoundation.org/eim/item/0">
      <item:uuid eim:key="true" eim:type="text">I1</item:uuid>
      <item:title eim:type="text">Lunch</item:title>
      <item:triage eim:type="text">100 10.00 1</item:triage>
    </item:record>
    <event:record xmlns:event="http://osafoundation.org/eim/event/0">
      <event:uuid eim:key="true" eim:type="text">I1</event:uuid>
      <event:dtstart eim:type="text">;VALUE=DATE-TIME:20070314T101500Z</event:dtstart>
      <event:duration eim:type="text">PT60M</event:duration>
      <event:rrule eim:type="text"/>
    </event:record>
  </eim:recordset>
  <eim:recordset eim:deleted="true" uuid="I2"/>
</eim:collection>"#;

    #[test]
    fn eimml_round_trips() {
        let e = parse_eimml(EIMML).unwrap();
        assert_eq!(e.uuid, "C1");
        assert_eq!(e.name.as_deref(), Some("n & m"));
        assert_eq!(e.recordsets.len(), 2);
        assert!(e.recordsets[1].1.is_none());
        let d = e.recordsets[0].1.as_ref().unwrap();
        assert_eq!(d.title(), "Lunch");
        assert_eq!(d.triage(), Some(100));
        let written = write_eimml(
            "C1",
            "n & m",
            e.recordsets.iter().map(|(u, d)| (u.as_str(), d.as_ref())),
        );
        assert_eq!(parse_eimml(&written).unwrap(), e);
    }

    #[test]
    fn timing_and_time_range() {
        let e = parse_eimml(EIMML).unwrap();
        let t = e.recordsets[0].1.as_ref().unwrap().timing().unwrap();
        assert_eq!(t.duration, Duration::minutes(60));
        let d = |s: &str| parse_ical_datetime(s).unwrap();
        assert_eq!(
            t.occurrences(d("20070314T000000Z"), d("20070315T000000Z"), 5)
                .unwrap()
                .len(),
            1
        );
        assert!(
            t.occurrences(d("20070315T000000Z"), d("20070316T000000Z"), 5)
                .unwrap()
                .is_empty()
        );
        // Overlap at the edge: the event runs 10:15-11:15.
        assert_eq!(
            t.occurrences(d("20070314T110000Z"), d("20070314T120000Z"), 5)
                .unwrap()
                .len(),
            1
        );
        let weekly = Timing {
            rrule: Some("FREQ=WEEKLY".into()),
            ..t.clone()
        };
        assert_eq!(
            weekly
                .occurrences(d("20070501T000000Z"), d("20070508T000000Z"), 5)
                .unwrap()
                .len(),
            1
        );
        assert_eq!(
            weekly
                .occurrences(d("20070501T000000Z"), d("20070601T000000Z"), 10)
                .unwrap()
                .len(),
            5
        );
        assert!(
            weekly
                .occurrences(d("20060101T000000Z"), d("20070301T000000Z"), 5)
                .unwrap()
                .is_empty()
        );
    }

    #[test]
    fn plain_rules_jump_to_the_range_and_dense_ones_are_refused() {
        let d = |s: &str| parse_ical_datetime(s).unwrap();
        let every_second = Timing {
            start: d("19700101T000000Z"),
            duration: Duration::seconds(1),
            rrule: Some("FREQ=SECONDLY".into()),
            exdates: Vec::new(),
            zone: None,
        };
        let got = every_second
            .occurrences(d("20300101T000000Z"), d("20300101T000005Z"), 100)
            .unwrap();
        assert_eq!(got.len(), 5);
        assert_eq!(got[0], d("20300101T000000Z"));
        // COUNT still counts from the real start.
        let counted = Timing {
            rrule: Some("FREQ=DAILY;COUNT=10".into()),
            ..every_second.clone()
        };
        assert!(
            counted
                .occurrences(d("19700110T000000Z"), d("19700120T000000Z"), 100)
                .unwrap()
                .len()
                == 1
        );
        assert!(
            counted
                .occurrences(d("20300101T000000Z"), d("20300102T000000Z"), 100)
                .unwrap()
                .is_empty()
        );
        // A rule with BY-parts is expanded from its start, within the budget.
        let dense = Timing {
            rrule: Some("FREQ=SECONDLY;BYMINUTE=1,2,3,4,5,6,7,8,9,10".into()),
            ..every_second.clone()
        };
        assert!(
            dense
                .occurrences(d("20300101T000000Z"), d("20300102T000000Z"), 10)
                .is_err()
        );
        // Open-ended ranges and extreme dates do not overflow.
        let weekly = Timing {
            rrule: Some("FREQ=WEEKLY".into()),
            ..every_second
        };
        assert_eq!(
            weekly
                .occurrences(DateTime::<Utc>::MIN_UTC, d("19700120T000000Z"), 10)
                .unwrap()
                .len(),
            3
        );
        assert!(
            !weekly
                .occurrences(d("20300101T000000Z"), DateTime::<Utc>::MAX_UTC, 1)
                .unwrap()
                .is_empty()
        );
    }

    #[test]
    fn excluded_dates_are_no_occurrences() {
        let d = |s: &str| parse_ical_datetime(s).unwrap();
        let ics = "BEGIN:VCALENDAR\r\nBEGIN:VEVENT\r\nUID:x\r\nDTSTART:20070507T100000Z\r\nDURATION:PT1H\r\nRRULE:FREQ=WEEKLY\r\nEXDATE:20070514T100000Z,20070528T100000Z\r\nEND:VEVENT\r\nEND:VCALENDAR\r\n";
        let (_, data) = parse_ics(ics).unwrap();
        let got = data
            .timing()
            .unwrap()
            .occurrences(d("20070501T000000Z"), d("20070601T000000Z"), 10)
            .unwrap();
        assert_eq!(got, [d("20070507T100000Z"), d("20070521T100000Z")]);
        // Kept through the stored form.
        let stored: ItemData =
            serde_json::from_str(&serde_json::to_string(&data).unwrap()).unwrap();
        assert_eq!(stored.timing(), data.timing());
    }

    #[test]
    fn ics_in_and_out() {
        let ics = "BEGIN:VCALENDAR\r\nVERSION:2.0\r\nPRODID:x\r\nBEGIN:VEVENT\r\nUID:u1\r\nDTSTAMP:20070712T182145Z\r\nDTSTART:20070521T100000Z\r\nDURATION:PT90M\r\nRRULE:FREQ=WEEKLY\r\nSUMMARY:Stand\\, up\r\nEND:VEVENT\r\nEND:VCALENDAR\r\n";
        let (uid, data) = parse_ics(ics).unwrap();
        assert_eq!(uid, "u1");
        assert_eq!(data.title(), "Stand, up");
        assert_eq!(data.to_ics("u1"), ics, "served back unchanged");
        let t = data.timing().unwrap();
        assert_eq!(t.duration, Duration::minutes(90));
        assert!(t.rrule.is_some());
        // Made from records when there is no calendar text.
        let mut d2 = data.clone();
        d2.ics = None;
        let made = d2.to_ics("u1");
        assert!(
            made.contains("SUMMARY:Stand\\, up\r\n") && made.contains("RRULE:FREQ=WEEKLY\r\n"),
            "{made}"
        );
        assert_eq!(parse_ics(&made).unwrap().0, "u1");
        for bad in [
            "hello",
            "BEGIN:VCALENDAR\r\nEND:VCALENDAR\r\n",
            "BEGIN:VCALENDAR\r\nBEGIN:VEVENT\r\nSUMMARY:x\r\nEND:VEVENT\r\nEND:VCALENDAR\r\n",
        ] {
            assert!(parse_ics(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn eim_json_round_trips() {
        let e = parse_eimml(EIMML).unwrap();
        let d = e.recordsets[0].1.clone().unwrap();
        let j = d.to_eim_json("I1").to_string();
        let (uid, back) = from_eim_json(&j).unwrap();
        assert_eq!(uid, "I1");
        assert_eq!(back.title(), "Lunch");
        assert_eq!(back.timing(), d.timing());
    }
}
