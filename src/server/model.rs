//! The embedded server's data model: an item is a set of EIM records (as Cosmo stored it),
//! optionally with the iCalendar text a CalDAV client PUT. Morse Code reads and writes the
//! records as EIMML, Atom as EIM-JSON, CalDAV as iCalendar, so an event created through one
//! protocol is seen through the others. Also here: event timing (start, duration,
//! recurrence), time-range matching with recurrences expanded, and triage for dashboards.

use chrono::{DateTime, Duration, NaiveDate, NaiveDateTime, TimeZone, Utc};
use serde::{Deserialize, Serialize};

use super::xml::{self, esc};

pub const EIM_NS: &str = "http://osafoundation.org/eim/0";
const ITEM_NS: &str = "http://osafoundation.org/eim/item/0";
const NOTE_NS: &str = "http://osafoundation.org/eim/note/0";
const EVENT_NS: &str = "http://osafoundation.org/eim/event/0";

/// One typed field of a record. `value: None` is an empty element.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Field {
    pub name: String,
    pub ty: String,
    pub key: bool,
    pub value: Option<String>,
}

/// One EIM record: a namespace's fields for an item.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Record {
    pub prefix: String,
    pub ns: String,
    pub fields: Vec<Field>,
}

impl Record {
    pub fn get(&self, name: &str) -> Option<&str> {
        self.fields
            .iter()
            .find(|f| f.name == name)
            .and_then(|f| f.value.as_deref())
    }
}

/// What is stored for an item.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ItemData {
    pub records: Vec<Record>,
    /// The iCalendar text as a CalDAV client sent it, served back unchanged.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ics: Option<String>,
    /// When the event happens, worked out once when the item is written: time-range
    /// queries must not parse every item's calendar text on every request.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub when: Option<When>,
}

/// A stored, serialisable [`Timing`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct When {
    pub start_ms: i64,
    pub duration_s: i64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rrule: Option<String>,
}

impl ItemData {
    /// New item data with its timing worked out.
    pub fn new(records: Vec<Record>, ics: Option<String>) -> ItemData {
        let mut d = ItemData {
            records,
            ics,
            when: None,
        };
        d.when = d.compute_timing().map(|t| When {
            start_ms: t.start.timestamp_millis(),
            duration_s: t.duration.num_seconds(),
            rrule: t.rrule,
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
            None => Some(w.start_ms + w.duration_s * 1000),
        };
        Some((w.start_ms, end))
    }
    fn field(&self, ns: &str, name: &str) -> Option<&str> {
        self.records
            .iter()
            .find(|r| r.ns == ns)
            .and_then(|r| r.get(name))
    }

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
                duration: Duration::seconds(w.duration_s),
                rrule: w.rrule.clone(),
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
            duration: parse_ical_duration(dur).unwrap_or_else(Duration::zero),
            rrule,
        })
    }

    /// The item as iCalendar: the text a CalDAV client stored, or one made from the records.
    pub fn to_ics(&self, uid: &str) -> String {
        if let Some(ics) = &self.ics {
            return ics.clone();
        }
        let mut s = String::from(
            "BEGIN:VCALENDAR\r\nVERSION:2.0\r\nPRODID:-//loadmix//embedded server//EN\r\nBEGIN:VEVENT\r\n",
        );
        push_prop(&mut s, "UID", &ical_text(uid));
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
        push_prop(&mut s, "SUMMARY", &ical_text(self.title()));
        if let Some(b) = self.field(NOTE_NS, "body").filter(|b| !b.is_empty()) {
            push_prop(&mut s, "DESCRIPTION", &ical_text(b));
        }
        s.push_str("END:VEVENT\r\nEND:VCALENDAR\r\n");
        s
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
        let mut records = serde_json::Map::new();
        for r in &self.records {
            let mut key = serde_json::Map::new();
            let mut fields = serde_json::Map::new();
            for f in &r.fields {
                let v = serde_json::json!([f.ty, f.value]);
                if f.key {
                    key.insert(f.name.clone(), v)
                } else {
                    fields.insert(f.name.clone(), v)
                };
            }
            records.insert(
                r.prefix.clone(),
                serde_json::json!({"prefix": r.prefix, "ns": r.ns, "key": key, "fields": fields}),
            );
        }
        serde_json::json!({"uuid": uid, "records": records})
    }
}

/// Parse EIM-JSON (an Atom entry's content): the item's uid and data.
pub fn from_eim_json(text: &str) -> Result<(String, ItemData), String> {
    let v: serde_json::Value =
        serde_json::from_str(text).map_err(|e| format!("content is not EIM-JSON: {e}"))?;
    let uid = v
        .get("uuid")
        .and_then(|u| u.as_str())
        .ok_or("EIM-JSON has no uuid")?
        .to_string();
    let mut records = Vec::new();
    if let Some(map) = v.get("records").and_then(|r| r.as_object()) {
        for (prefix, r) in map {
            let ns = r
                .get("ns")
                .and_then(|n| n.as_str())
                .ok_or_else(|| format!("record {prefix} has no ns"))?;
            let mut fields = Vec::new();
            for (part, is_key) in [("key", true), ("fields", false)] {
                if let Some(obj) = r.get(part).and_then(|k| k.as_object()) {
                    for (name, tv) in obj {
                        let arr = tv
                            .as_array()
                            .ok_or_else(|| format!("field {prefix}.{name} is not [type, value]"))?;
                        let ty = arr
                            .first()
                            .and_then(|t| t.as_str())
                            .unwrap_or("text")
                            .to_string();
                        let value = match arr.get(1) {
                            None | Some(serde_json::Value::Null) => None,
                            Some(serde_json::Value::String(s)) => Some(s.clone()),
                            Some(other) => Some(other.to_string()),
                        };
                        fields.push(Field {
                            name: name.clone(),
                            ty,
                            key: is_key,
                            value,
                        });
                    }
                }
            }
            records.push(Record {
                prefix: prefix.clone(),
                ns: ns.to_string(),
                fields,
            });
        }
    }
    Ok((uid, ItemData::new(records, None)))
}

/// A parsed EIMML collection: its uid and name, and per recordset the item uid and either
/// its records or a tombstone.
#[derive(Debug, Clone, PartialEq)]
pub struct Eimml {
    pub uuid: String,
    pub name: Option<String>,
    pub recordsets: Vec<(String, Option<ItemData>)>,
}

/// Parse an EIMML body (Morse Code publish or update).
pub fn parse_eimml(text: &str) -> Result<Eimml, String> {
    let root = xml::parse(text)?;
    if !root.is(EIM_NS, "collection") {
        return Err(format!(
            "root element is {{{}}}{}, not eim:collection",
            root.ns, root.name
        ));
    }
    let uuid = root
        .attr(None, "uuid")
        .ok_or("eim:collection has no uuid")?
        .to_string();
    let mut recordsets = Vec::new();
    for rs in &root.children {
        if !rs.is(EIM_NS, "recordset") {
            return Err(format!("unexpected element {} in eim:collection", rs.name));
        }
        let uid = rs
            .attr(None, "uuid")
            .ok_or("eim:recordset has no uuid")?
            .to_string();
        if rs.attr(Some(EIM_NS), "deleted") == Some("true") {
            recordsets.push((uid, None));
            continue;
        }
        let records = rs
            .children
            .iter()
            .map(|rec| Record {
                prefix: if rec.prefix.is_empty() {
                    rec.name.clone()
                } else {
                    rec.prefix.clone()
                },
                ns: rec.ns.clone(),
                fields: rec
                    .children
                    .iter()
                    .map(|f| Field {
                        name: f.name.clone(),
                        ty: f.attr(Some(EIM_NS), "type").unwrap_or("text").to_string(),
                        key: f.attr(Some(EIM_NS), "key") == Some("true"),
                        value: if f.text.is_empty() && f.attr(None, "empty") != Some("true") {
                            None
                        } else {
                            Some(f.text.clone())
                        },
                    })
                    .collect(),
            })
            .collect();
        recordsets.push((uid, Some(ItemData::new(records, None))));
    }
    Ok(Eimml {
        uuid,
        name: root.attr(None, "name").map(str::to_string),
        recordsets,
    })
}

/// Write an EIMML collection: live items as recordsets, deleted ones as tombstones.
pub fn write_eimml<'a>(
    uuid: &str,
    name: &str,
    items: impl Iterator<Item = (&'a str, Option<&'a ItemData>)>,
) -> String {
    let mut s = String::with_capacity(4096);
    s.push_str(r#"<?xml version="1.0" encoding="UTF-8"?>"#);
    s.push_str(&format!(
        r#"<eim:collection xmlns:eim="{EIM_NS}" uuid="{}" name="{}">"#,
        esc(uuid),
        esc(name)
    ));
    for (uid, data) in items {
        match data {
            None => s.push_str(&format!(
                r#"<eim:recordset uuid="{}" eim:deleted="true"/>"#,
                esc(uid)
            )),
            Some(d) => {
                s.push_str(&format!(r#"<eim:recordset uuid="{}">"#, esc(uid)));
                for r in &d.records {
                    let p = if r.prefix.chars().all(|c| c.is_ascii_alphanumeric())
                        && !r.prefix.is_empty()
                    {
                        r.prefix.as_str()
                    } else {
                        "r"
                    };
                    s.push_str(&format!(r#"<{p}:record xmlns:{p}="{}">"#, esc(&r.ns)));
                    for f in &r.fields {
                        let key = if f.key { r#" eim:key="true""# } else { "" };
                        let name = if f
                            .name
                            .chars()
                            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
                        {
                            f.name.as_str()
                        } else {
                            "field"
                        };
                        match &f.value {
                            Some(v) => s.push_str(&format!(
                                r#"<{p}:{name}{key} eim:type="{}">{}</{p}:{name}>"#,
                                esc(&f.ty),
                                esc(v)
                            )),
                            None => s.push_str(&format!(
                                r#"<{p}:{name}{key} eim:type="{}"/>"#,
                                esc(&f.ty)
                            )),
                        }
                    }
                    s.push_str(&format!("</{p}:record>"));
                }
                s.push_str("</eim:recordset>");
            }
        }
    }
    s.push_str("</eim:collection>");
    s
}

/// Parse and check an iCalendar body (CalDAV PUT): the UID of its main component and the
/// records derived from it.
pub fn parse_ics(text: &str) -> Result<(String, ItemData), String> {
    let unfolded = icalendar::parser::unfold(text);
    let cal = icalendar::parser::read_calendar(&unfolded)
        .map_err(|e| format!("not iCalendar: {}", e.lines().next().unwrap_or("")))?;
    let comp = cal
        .components
        .iter()
        .find(|c| matches!(c.name.as_str(), "VEVENT" | "VTODO" | "VJOURNAL"))
        .ok_or("no VEVENT, VTODO or VJOURNAL in the calendar")?;
    let prop = |n: &str| comp.find_prop(n).map(|p| p.val.as_str().to_string());
    let uid = prop("UID")
        .filter(|u| !u.is_empty())
        .ok_or("the component has no UID")?;
    let mut item = vec![
        field("uuid", "text", true, &uid),
        field(
            "title",
            "text",
            false,
            &unescape_ical(&prop("SUMMARY").unwrap_or_default()),
        ),
    ];
    item.push(field("triage", "text", false, "100 0.00 1"));
    let mut records = vec![
        Record {
            prefix: "item".into(),
            ns: ITEM_NS.into(),
            fields: std::mem::take(&mut item),
        },
        Record {
            prefix: "note".into(),
            ns: NOTE_NS.into(),
            fields: vec![
                field("uuid", "text", true, &uid),
                field(
                    "body",
                    "clob",
                    false,
                    &unescape_ical(&prop("DESCRIPTION").unwrap_or_default()),
                ),
                field("icalUid", "text", false, &uid),
            ],
        },
    ];
    if let Some(start) = prop("DTSTART") {
        let mut fields = vec![
            field("uuid", "text", true, &uid),
            field(
                "dtstart",
                "text",
                false,
                &format!(";VALUE=DATE-TIME:{start}"),
            ),
        ];
        if let Some(d) = prop("DURATION") {
            fields.push(field("duration", "text", false, &d));
        }
        if let Some(r) = prop("RRULE") {
            fields.push(field("rrule", "text", false, &format!(";{r}")));
        }
        records.push(Record {
            prefix: "event".into(),
            ns: EVENT_NS.into(),
            fields,
        });
    }
    let data = ItemData::new(records, Some(text.to_string()));
    Ok((uid, data))
}

fn field(name: &str, ty: &str, key: bool, value: &str) -> Field {
    Field {
        name: name.into(),
        ty: ty.into(),
        key,
        value: Some(value.into()),
    }
}

fn push_prop(s: &mut String, name: &str, value: &str) {
    s.push_str(name);
    s.push(':');
    s.push_str(value);
    s.push_str("\r\n");
}

fn ical_text(s: &str) -> String {
    s.replace('\\', "\\\\")
        .replace(';', "\\;")
        .replace(',', "\\,")
        .replace('\n', "\\n")
        .replace('\r', "")
}

fn unescape_ical(s: &str) -> String {
    s.replace("\\n", "\n")
        .replace("\\N", "\n")
        .replace("\\;", ";")
        .replace("\\,", ",")
        .replace("\\\\", "\\")
}

/// `;VALUE=DATE-TIME:20070314T101500Z` -> `20070314T101500Z`
fn strip_eim_params(v: &str) -> &str {
    v.rsplit(':').next().unwrap_or(v)
}

/// When an event happens.
#[derive(Debug, Clone, PartialEq)]
pub struct Timing {
    /// Floating times are taken as UTC.
    pub start: DateTime<Utc>,
    pub duration: Duration,
    pub rrule: Option<String>,
}

fn timing_from_ics(ics: &str) -> Option<Timing> {
    let unfolded = icalendar::parser::unfold(ics);
    let cal = icalendar::parser::read_calendar(&unfolded).ok()?;
    let comp = cal
        .components
        .iter()
        .find(|c| matches!(c.name.as_str(), "VEVENT" | "VTODO"))?;
    let start_prop = comp.find_prop("DTSTART")?;
    let start = parse_ical_datetime(start_prop.val.as_str())?;
    let duration = if let Some(d) = comp.find_prop("DURATION") {
        parse_ical_duration(d.val.as_str()).unwrap_or_else(Duration::zero)
    } else if let Some(e) = comp
        .find_prop("DTEND")
        .and_then(|e| parse_ical_datetime(e.val.as_str()))
    {
        e - start
    } else if start_prop.val.as_str().len() == 8 {
        Duration::days(1)
    } else {
        Duration::zero()
    };
    let rrule = comp.find_prop("RRULE").map(|r| r.val.as_str().to_string());
    Some(Timing {
        start,
        duration,
        rrule,
    })
}

/// `20070314T101500Z`, `20070314T101500` (floating, taken as UTC) or `20070314` (a date).
pub fn parse_ical_datetime(v: &str) -> Option<DateTime<Utc>> {
    let v = v.trim();
    let naive = if v.len() == 8 {
        NaiveDate::parse_from_str(v, "%Y%m%d")
            .ok()?
            .and_hms_opt(0, 0, 0)?
    } else {
        NaiveDateTime::parse_from_str(v.trim_end_matches('Z'), "%Y%m%dT%H%M%S").ok()?
    };
    Some(Utc.from_utc_datetime(&naive))
}

/// `PT30M`, `PT1H30M`, `P1D`, `P1W`, `-PT5M` (sign ignored for lengths).
pub fn parse_ical_duration(v: &str) -> Option<Duration> {
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
            total += match c {
                'W' if unit.contains(c) => Duration::weeks(n),
                'D' if unit.contains(c) => Duration::days(n),
                'H' if unit.contains(c) => Duration::hours(n),
                'M' if unit.contains(c) => Duration::minutes(n),
                'S' if unit.contains(c) => Duration::seconds(n),
                _ => return None,
            };
        }
        if !num.is_empty() {
            return None;
        }
    }
    Some(total)
}

impl Timing {
    /// Occurrence starts that overlap [from, to), at most `limit`. A non-recurring event has
    /// one occurrence; an RRULE the server cannot expand counts its first occurrence only.
    pub fn occurrences(
        &self,
        from: DateTime<Utc>,
        to: DateTime<Utc>,
        limit: u16,
    ) -> Vec<DateTime<Utc>> {
        let overlaps = |s: DateTime<Utc>| {
            let e = s + self.duration;
            s < to && (e > from || (self.duration.is_zero() && s >= from))
        };
        let Some(rule) = &self.rrule else {
            return if overlaps(self.start) {
                vec![self.start]
            } else {
                Vec::new()
            };
        };
        let text = format!(
            "DTSTART:{}\nRRULE:{}",
            self.start.format("%Y%m%dT%H%M%SZ"),
            rule
        );
        let set: rrule::RRuleSet = match text.parse() {
            Ok(s) => s,
            Err(_) => {
                return if overlaps(self.start) {
                    vec![self.start]
                } else {
                    Vec::new()
                };
            }
        };
        let tz = rrule::Tz::UTC;
        let lo = from - self.duration - Duration::seconds(1);
        let res = set
            .after(lo.with_timezone(&tz))
            .before(to.with_timezone(&tz))
            .all(limit.saturating_mul(2).max(2));
        res.dates
            .into_iter()
            .map(|d| d.with_timezone(&Utc))
            .filter(|s| overlaps(*s))
            .take(limit as usize)
            .collect()
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
    fn eimml_errors() {
        assert!(
            parse_eimml("<x/>")
                .unwrap_err()
                .contains("not eim:collection")
        );
        assert!(
            parse_eimml(r#"<eim:collection xmlns:eim="http://osafoundation.org/eim/0"/>"#).is_err()
        );
        assert!(parse_eimml("<eim:collection").is_err());
    }

    #[test]
    fn timing_and_time_range() {
        let e = parse_eimml(EIMML).unwrap();
        let t = e.recordsets[0].1.as_ref().unwrap().timing().unwrap();
        assert_eq!(t.duration, Duration::minutes(60));
        let d = |s: &str| parse_ical_datetime(s).unwrap();
        assert_eq!(
            t.occurrences(d("20070314T000000Z"), d("20070315T000000Z"), 5)
                .len(),
            1
        );
        assert!(
            t.occurrences(d("20070315T000000Z"), d("20070316T000000Z"), 5)
                .is_empty()
        );
        // Overlap at the edge: the event runs 10:15-11:15.
        assert_eq!(
            t.occurrences(d("20070314T110000Z"), d("20070314T120000Z"), 5)
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
                .len(),
            1
        );
        assert_eq!(
            weekly
                .occurrences(d("20070501T000000Z"), d("20070601T000000Z"), 10)
                .len(),
            5
        );
        assert!(
            weekly
                .occurrences(d("20060101T000000Z"), d("20070301T000000Z"), 5)
                .is_empty()
        );
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

    #[test]
    fn durations() {
        assert_eq!(parse_ical_duration("PT30M"), Some(Duration::minutes(30)));
        assert_eq!(parse_ical_duration("P1DT2H"), Some(Duration::hours(26)));
        assert_eq!(parse_ical_duration("P1W"), Some(Duration::weeks(1)));
        assert_eq!(parse_ical_duration("30M"), None);
    }
}
