//! Busy time: the periods the events of a set of calendars take in a range, merged, and
//! the VFREEBUSY that carries them. A calendar's free-busy-query REPORT (RFC 4791 §7.10)
//! asks it of one calendar, a free-busy request to an outbox (RFC 6638 §5.2) of every
//! calendar of each recipient. Transparent and cancelled events take no time; recurrences
//! are expanded within the same bound as any other query.

use chrono::{DateTime, Utc};

use super::expand;
use super::store::{Store, StoreError};

/// A busy period, start and end.
pub(crate) type Period = (DateTime<Utc>, DateTime<Utc>);

/// Why busy time could not be worked out.
#[derive(Debug)]
pub(crate) enum BusyError {
    Store(StoreError),
    /// A recurrence has more instances in the range than a query may expand.
    TooDense,
}

/// The busy periods of the calendars `cals` (store keys) between `start` and `end`,
/// sorted and merged where they overlap, as a reader of FREEBUSY expects.
pub(crate) fn busy(
    store: &dyn Store,
    cals: &[String],
    start: DateTime<Utc>,
    end: DateTime<Utc>,
) -> Result<Vec<Period>, BusyError> {
    let mut periods: Vec<Period> = Vec::new();
    for cal in cals {
        let items =
            match store.items_overlapping(cal, start.timestamp_millis(), end.timestamp_millis()) {
                Ok(Some((_, items))) => items,
                Ok(None) => Vec::new(),
                Err(e) => return Err(BusyError::Store(e)),
            };
        for item in &items {
            let Some(d) = &item.data else { continue };
            if d.component() != "VEVENT" || !d.takes_time() {
                continue;
            }
            let Some(t) = d.timing() else { continue };
            let occurrences = t
                .occurrences(start, end, expand::MAX_INSTANCES)
                .map_err(|_| BusyError::TooDense)?;
            for o in occurrences {
                let e = o.checked_add_signed(t.duration).unwrap_or(end);
                periods.push((o.max(start), e.min(end)));
            }
        }
    }
    Ok(merge(periods))
}

/// Periods sorted, overlapping ones joined.
fn merge(mut periods: Vec<Period>) -> Vec<Period> {
    periods.sort();
    let mut merged: Vec<Period> = Vec::new();
    for (s, e) in periods {
        match merged.last_mut() {
            Some(last) if s <= last.1 => last.1 = last.1.max(e),
            _ => merged.push((s, e)),
        }
    }
    merged
}

/// A UTC DATE-TIME as iCalendar writes it.
pub(crate) fn ical_utc(t: DateTime<Utc>) -> String {
    t.format("%Y%m%dT%H%M%SZ").to_string()
}

/// A calendar holding one VFREEBUSY for the span with the busy periods; `method` and
/// `lines` (content lines inside the VFREEBUSY, without their ends) for a scheduling
/// reply.
pub(crate) fn vfreebusy(
    start: DateTime<Utc>,
    end: DateTime<Utc>,
    periods: &[Period],
    method: Option<&str>,
    lines: &[String],
) -> String {
    let mut body = String::from(
        "BEGIN:VCALENDAR\r\nVERSION:2.0\r\nPRODID:-//loadmix//embedded server//EN\r\n",
    );
    if let Some(m) = method {
        body.push_str(&format!("METHOD:{m}\r\n"));
    }
    body.push_str("BEGIN:VFREEBUSY\r\n");
    body.push_str(&format!("DTSTAMP:{}\r\n", ical_utc(Utc::now())));
    for l in lines {
        body.push_str(l);
        body.push_str("\r\n");
    }
    body.push_str(&format!(
        "DTSTART:{}\r\nDTEND:{}\r\n",
        ical_utc(start),
        ical_utc(end)
    ));
    for (s, e) in periods {
        body.push_str(&format!(
            "FREEBUSY;FBTYPE=BUSY:{}/{}\r\n",
            ical_utc(*s),
            ical_utc(*e)
        ));
    }
    body.push_str("END:VFREEBUSY\r\nEND:VCALENDAR\r\n");
    body
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::TimeZone;

    fn at(h: u32) -> DateTime<Utc> {
        Utc.with_ymd_and_hms(2030, 1, 1, h, 0, 0).unwrap()
    }

    #[test]
    fn overlapping_periods_are_joined_and_sorted() {
        let m = merge(vec![(at(5), at(6)), (at(1), at(3)), (at(2), at(4))]);
        assert_eq!(m, vec![(at(1), at(4)), (at(5), at(6))]);
    }

    #[test]
    fn a_reply_carries_its_method_and_lines() {
        let t = vfreebusy(
            at(1),
            at(2),
            &[(at(1), at(2))],
            Some("REPLY"),
            &["ATTENDEE:mailto:b@localhost".into()],
        );
        assert!(t.contains("METHOD:REPLY\r\nBEGIN:VFREEBUSY\r\n"));
        assert!(t.contains("ATTENDEE:mailto:b@localhost\r\n"));
        assert!(t.contains("FREEBUSY;FBTYPE=BUSY:20300101T010000Z/20300101T020000Z\r\n"));
    }
}
