//! Time zones as a calendar object defines them (VTIMEZONE, RFC 5545 §3.6.5): its
//! observances (STANDARD and DAYLIGHT, each an onset, the offsets before and after, and
//! a rule or dates for the onsets that follow), and local times resolved to UTC and back
//! through them. A time with a `TZID` is the calendar's own zone of that name, whatever
//! the name; no zone database is consulted, as clients send the definition they mean.
//!
//! The transitions of a zone are worked out once (up to [`LAST_YEAR`], at most
//! [`MAX_TRANSITIONS`]) and kept for every later use of the same definition.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock};

use chrono::{DateTime, Datelike, Duration, NaiveDate, NaiveDateTime, TimeZone, Utc};
use serde::{Deserialize, Serialize};

/// Onsets are worked out up to this year.
pub const LAST_YEAR: i32 = 2200;
/// The most transitions one zone may have (a yearly pair to [`LAST_YEAR`] is ~460).
pub const MAX_TRANSITIONS: usize = 4096;
/// Zone definitions whose transitions are kept at once.
const CACHE: usize = 256;

/// A VTIMEZONE: its name and observances.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Zone {
    /// Its TZID.
    pub tzid: String,
    /// Its STANDARD and DAYLIGHT blocks.
    pub observances: Vec<Observance>,
}

/// One STANDARD or DAYLIGHT block.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Observance {
    /// Its first onset, local time in the offset before it (`19700329T020000`).
    pub start: String,
    /// The offset from UTC before an onset, in seconds.
    pub offset_from: i32,
    /// The offset after an onset, in seconds.
    pub offset_to: i32,
    /// The onsets after the first, as a rule or as dates (local, like `start`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rrule: Option<String>,
    /// The later onsets as RDATE values.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub rdates: Vec<String>,
}

/// A change of offset: when (UTC seconds), and the offsets before and after.
#[derive(Debug, Clone, Copy, PartialEq)]
struct Transition {
    at: i64,
    from: i32,
    to: i32,
}

/// `+0200`, `-0500`, `+053000` as seconds east of UTC.
pub fn parse_offset(v: &str) -> Option<i32> {
    let v = v.trim();
    let (sign, digits) = match v.as_bytes().first()? {
        b'+' => (1, &v[1..]),
        b'-' => (-1, &v[1..]),
        _ => return None,
    };
    if !(digits.len() == 4 || digits.len() == 6) || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let n = |r: std::ops::Range<usize>| digits.get(r).and_then(|s| s.parse::<i32>().ok());
    let (h, m) = (n(0..2)?, n(2..4)?);
    let s = if digits.len() == 6 { n(4..6)? } else { 0 };
    if h > 23 || m > 59 || s > 59 {
        return None;
    }
    Some(sign * (h * 3600 + m * 60 + s))
}

/// A local DATE-TIME (`20260415T100000`) or DATE (`20260415`, midnight).
pub fn parse_local(v: &str) -> Option<NaiveDateTime> {
    let v = v.trim();
    if v.len() == 8 {
        return NaiveDate::parse_from_str(v, "%Y%m%d")
            .ok()?
            .and_hms_opt(0, 0, 0);
    }
    NaiveDateTime::parse_from_str(v.trim_end_matches('Z'), "%Y%m%dT%H%M%S").ok()
}

fn as_utc(t: NaiveDateTime) -> DateTime<Utc> {
    Utc.from_utc_datetime(&t)
}

/// `t` moved by `seconds`; at the ends of the calendar it stays where it is rather than
/// overflow (a hostile time near year 262,143 must not panic).
fn shift(t: DateTime<Utc>, seconds: i32) -> DateTime<Utc> {
    t.checked_add_signed(Duration::seconds(i64::from(seconds)))
        .unwrap_or(t)
}

impl Observance {
    /// Every onset, local time, up to [`LAST_YEAR`]: the first, the rule's, the dates.
    fn onsets(&self) -> Vec<NaiveDateTime> {
        let Some(first) = parse_local(&self.start) else {
            return Vec::new();
        };
        let mut out = vec![first];
        out.extend(self.rdates.iter().filter_map(|d| parse_local(d)));
        if let Some(rule) = &self.rrule {
            // The rule runs in local time; written as UTC so that the machine's own zone
            // plays no part.
            let text = format!("DTSTART:{}\nRRULE:{rule}", first.format("%Y%m%dT%H%M%SZ"));
            if let Ok(set) = text.parse::<rrule::RRuleSet>() {
                let set = set.limit();
                for d in (&set).into_iter().take(MAX_TRANSITIONS) {
                    let d = d.with_timezone(&Utc).naive_utc();
                    if d.year() > LAST_YEAR {
                        break;
                    }
                    out.push(d);
                }
            }
        }
        out
    }
}

/// Transitions of every zone definition met so far (bounded; cleared when full).
fn cache() -> &'static Mutex<HashMap<Zone, Arc<Vec<Transition>>>> {
    static C: OnceLock<Mutex<HashMap<Zone, Arc<Vec<Transition>>>>> = OnceLock::new();
    C.get_or_init(|| Mutex::new(HashMap::new()))
}

impl Zone {
    /// Its transitions in time order, worked out once per definition.
    fn transitions(&self) -> Arc<Vec<Transition>> {
        if let Some(t) = cache().lock().ok().and_then(|c| c.get(self).cloned()) {
            return t;
        }
        let mut all: Vec<Transition> = Vec::new();
        for o in &self.observances {
            for onset in o.onsets() {
                // The onset is local time in the offset before it.
                let at = as_utc(onset).timestamp() - i64::from(o.offset_from);
                all.push(Transition {
                    at,
                    from: o.offset_from,
                    to: o.offset_to,
                });
            }
        }
        all.sort_by_key(|t| t.at);
        all.truncate(MAX_TRANSITIONS);
        let all = Arc::new(all);
        if let Ok(mut c) = cache().lock() {
            if c.len() >= CACHE {
                c.clear();
            }
            c.insert(self.clone(), all.clone());
        }
        all
    }

    /// The offset from UTC in effect at `utc`, in seconds.
    pub fn offset_at(&self, utc: DateTime<Utc>) -> i32 {
        let t = self.transitions();
        let s = utc.timestamp();
        match t.partition_point(|x| x.at <= s) {
            0 => t
                .first()
                .map(|x| x.from)
                .or_else(|| self.observances.first().map(|o| o.offset_to))
                .unwrap_or(0),
            i => t[i - 1].to,
        }
    }

    /// A local time of this zone as UTC. In a gap (a local time skipped when clocks go
    /// forward) or an overlap (one met twice), the offset before the change is taken.
    pub fn to_utc(&self, local: NaiveDateTime) -> DateTime<Utc> {
        let naive = as_utc(local);
        let first = shift(naive, -self.offset_at(naive));
        shift(naive, -self.offset_at(first))
    }

    /// A UTC instant as this zone's local time.
    pub fn to_local(&self, utc: DateTime<Utc>) -> NaiveDateTime {
        shift(utc, self.offset_at(utc)).naive_utc()
    }
}

/// The UTC instant a DATE-TIME value stands for: with `Z` it is UTC; with a `TZID` that
/// one of `zones` defines it is that zone's local time; otherwise (floating, or a zone the
/// calendar does not define) it is taken as UTC.
pub fn resolve(value: &str, tzid: Option<&str>, zones: &[Zone]) -> Option<DateTime<Utc>> {
    let v = value.trim();
    let zone = tzid.and_then(|id| zones.iter().find(|z| z.tzid == id));
    match zone {
        Some(z) if !v.ends_with('Z') => parse_local(v).map(|l| z.to_utc(l)),
        _ => parse_datetime(v),
    }
}

/// `20070314T101500Z`, `20070314T101500` (floating, taken as UTC) or `20070314` (a date).
pub fn parse_datetime(v: &str) -> Option<DateTime<Utc>> {
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

#[cfg(test)]
mod tests {
    use super::*;

    /// Europe/Berlin as clients send it: CET, CEST from the last Sunday of March.
    pub(super) fn berlin() -> Zone {
        Zone {
            tzid: "Europe/Berlin".into(),
            observances: vec![
                Observance {
                    start: "19700329T020000".into(),
                    offset_from: 3600,
                    offset_to: 7200,
                    rrule: Some("FREQ=YEARLY;BYMONTH=3;BYDAY=-1SU".into()),
                    rdates: vec![],
                },
                Observance {
                    start: "19701025T030000".into(),
                    offset_from: 7200,
                    offset_to: 3600,
                    rrule: Some("FREQ=YEARLY;BYMONTH=10;BYDAY=-1SU".into()),
                    rdates: vec![],
                },
            ],
        }
    }

    fn utc(s: &str) -> DateTime<Utc> {
        super::super::ical::parse_datetime(s).unwrap()
    }

    #[test]
    fn local_times_resolve_through_the_zones_observances_across_dst() {
        let z = berlin();
        let at = |s: &str| resolve(s, Some("Europe/Berlin"), std::slice::from_ref(&z)).unwrap();
        // April: CEST, +02:00.
        assert_eq!(at("20260415T100000"), utc("20260415T080000Z"));
        // January: CET, +01:00.
        assert_eq!(at("20260115T100000"), utc("20260115T090000Z"));
        // The Saturday before and the Monday after the change on 29 March 2026.
        assert_eq!(at("20260328T100000"), utc("20260328T090000Z"));
        assert_eq!(at("20260330T100000"), utc("20260330T080000Z"));
        // A UTC value stays UTC; a zone the calendar does not define is taken as UTC.
        assert_eq!(at("20260415T100000Z"), utc("20260415T100000Z"));
        assert_eq!(
            resolve(
                "20260415T100000",
                Some("Mars/Olympus"),
                std::slice::from_ref(&z)
            ),
            Some(utc("20260415T100000Z"))
        );
        assert_eq!(
            z.to_local(utc("20260415T080000Z")),
            parse_local("20260415T100000").unwrap()
        );
        // The ends of the calendar do not overflow.
        let _ = z.to_utc(NaiveDateTime::MAX);
        let _ = z.to_local(DateTime::<Utc>::MIN_UTC);
    }

    #[test]
    fn offsets_parse_with_and_without_seconds() {
        assert_eq!(parse_offset("+0200"), Some(7200));
        assert_eq!(parse_offset("-0530"), Some(-(5 * 3600 + 30 * 60)));
        assert_eq!(parse_offset("+053015"), Some(5 * 3600 + 30 * 60 + 15));
        for bad in ["0200", "+2", "+2400", "+0260", "+02:00", ""] {
            assert_eq!(parse_offset(bad), None, "{bad}");
        }
    }
}
