//! The report's visibility section: how long the writes to a team's shared calendar or
//! collection took to reach the members who read it (from the write's acknowledgement to
//! each member's first sight), and which of them never did, per writing and per observing
//! operation; and the shards' sections of one run added up.

use serde::{Deserialize, Serialize};

use super::op::{decode_histogram, encode_histogram};
use crate::visibility::{Censored, MAX_NAMED, Settled, Tally, new_histogram};
use crate::workload::Workload;

/// Visibility over the measured rounds.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct VisibilityRecord {
    /// Every write and every observer together.
    pub all: VisibilityRow,
    /// Per writing operation (`class.operation`).
    pub by_write: Vec<VisibilityRow>,
    /// Per observing operation: what it saw first, and how often it looked.
    pub by_observer: Vec<VisibilityRow>,
    /// Sights of a stamp no write had acknowledged (its answer lost, the write done).
    pub unacknowledged: u64,
    /// Sights of a stamp its writer never sent: made up by the server, counted apart and
    /// never taken for a later version.
    #[serde(default)]
    pub never_sent: u64,
    /// Sights by a user outside the write's team: shown to someone who should not see it.
    pub unexpected: u64,
    /// Stamps of another run.
    pub foreign: u64,
    /// Values that were no stamp.
    pub garbled: u64,
    /// Writes or sights past the books' bounds: counted, not followed.
    pub untracked: u64,
    /// The first writes some observer never saw: `class#user seq N (operation, round R):
    /// unseen by M of K`.
    pub unseen_writes: Vec<String>,
    /// Unseen writes past those named.
    pub unseen_unnamed: u64,
}

/// One operation's figures (or all of them).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct VisibilityRow {
    /// `class.operation`, or `all`.
    pub op: String,
    /// Acknowledged writes (0 for an observing operation).
    pub writes: u64,
    /// (write, observer) pairs that should have been seen.
    pub expected: u64,
    /// First sights.
    pub seen: u64,
    /// Of those, seen before the writer had its acknowledgement (counted as 0 ms).
    pub seen_before_ack: u64,
    /// The observer first saw a later version of the same event.
    pub superseded: u64,
    /// Neither by the round's end.
    pub unseen: u64,
    /// Versions a sync reported again after an earlier sync of the same observer had.
    pub duplicated: u64,
    /// An observing operation's looks, and the mean time between two of one observer's.
    pub looks: u64,
    /// The observers who looked (each one's first look starts no gap).
    #[serde(default)]
    pub lookers: u64,
    /// The mean time between two looks of one observer, from `look_gaps_ms` (see
    /// `Tally::poll_interval_us`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub poll_interval_ms: Option<f64>,
    /// From the acknowledgement to the first sight.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub latency_ms: Option<SightLatency>,
    /// An observing operation's gaps between one user's looks (from the round's start to
    /// its first, and from its last to the round's end, censored).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub look_gaps_ms: Option<LatencyPart>,
    /// The latency's first part, the workload's: from the acknowledgement to the answer
    /// of the observer's first look begun after it. A write no look began after by the
    /// round's end has it censored.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub poll_gap_ms: Option<LatencyPart>,
    /// The latency's second part, the server's: from that answer to the first sight, 0
    /// when that look showed the write. A write looked for and still unseen at the
    /// round's end has it censored.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub staleness_ms: Option<LatencyPart>,
}

/// One part of the latency to first sight, in milliseconds. Some values may be censored
/// (still open when the round ended, known only to be at least what they had reached):
/// the percentiles are then Kaplan-Meier estimates, and one the exact values never reach
/// is only a lower bound, named in `at_least` and written `≥`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LatencyPart {
    /// Values, censored ones included.
    pub count: u64,
    /// Of those, censored.
    pub censored: u64,
    #[allow(missing_docs)]
    pub p50: f64,
    #[allow(missing_docs)]
    pub p90: f64,
    #[allow(missing_docs)]
    pub p99: f64,
    #[allow(missing_docs)]
    pub max: f64,
    /// Which of `p50`, `p90`, `p99`, `max` are lower bounds only.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub at_least: Vec<String>,
    /// HdrHistograms (µs), V2 deflated, base64: the exact values and the censored ones.
    pub histogram: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[allow(missing_docs)]
    pub censored_histogram: Option<String>,
}

impl LatencyPart {
    fn of(c: &Censored) -> Option<LatencyPart> {
        let ms = |us: u64| us as f64 / 1000.0;
        let max = c.max()?;
        let mut at_least = Vec::new();
        let mut figure = |name: &str, e: Option<crate::visibility::Estimate>| {
            let e = e.unwrap_or(max);
            if e.at_least {
                at_least.push(name.to_string());
            }
            ms(e.us)
        };
        Some(LatencyPart {
            count: c.len(),
            censored: c.censored.len(),
            p50: figure("p50", c.quantile(0.50)),
            p90: figure("p90", c.quantile(0.90)),
            p99: figure("p99", c.quantile(0.99)),
            max: figure("max", Some(max)),
            at_least,
            histogram: encode_histogram(&c.exact),
            censored_histogram: (!c.censored.is_empty()).then(|| encode_histogram(&c.censored)),
        })
    }

    fn censored_of(p: Option<&LatencyPart>, op: &str) -> Result<Censored, String> {
        let Some(p) = p else {
            return Ok(Censored::default());
        };
        let corrupt = || format!("visibility {op}: a latency part's histogram is corrupt");
        Ok(Censored {
            exact: decode_histogram(&p.histogram).ok_or_else(corrupt)?,
            censored: match &p.censored_histogram {
                Some(h) => decode_histogram(h).ok_or_else(corrupt)?,
                None => new_histogram(),
            },
        })
    }

    /// The figure `name` (`p50`, `p90`, `p99`, `max`) as written: `≥ ` before it when
    /// it is only a lower bound.
    pub fn text(&self, name: &str) -> String {
        let v = match name {
            "p50" => self.p50,
            "p90" => self.p90,
            "p99" => self.p99,
            _ => self.max,
        };
        match self.at_least.iter().any(|a| a == name) {
            true => format!("≥ {v:.1}"),
            false => format!("{v:.1}"),
        }
    }
}

/// Latency to first sight, in milliseconds, with its HdrHistogram (µs).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SightLatency {
    /// First sights.
    pub count: u64,
    /// Their mean, median, 90th and 99th percentile and maximum.
    pub mean: f64,
    #[allow(missing_docs)]
    pub p50: f64,
    #[allow(missing_docs)]
    pub p90: f64,
    #[allow(missing_docs)]
    pub p99: f64,
    #[allow(missing_docs)]
    pub max: f64,
    /// HdrHistogram (µs), V2 deflated, base64.
    pub histogram: String,
}

pub(super) fn row(op: String, t: &Tally) -> VisibilityRow {
    let h = &t.latency;
    let ms = |us: u64| us as f64 / 1000.0;
    VisibilityRow {
        op,
        writes: t.writes,
        expected: t.expected,
        seen: t.seen,
        seen_before_ack: t.seen_before_ack,
        superseded: t.superseded,
        unseen: t.unseen,
        duplicated: t.duplicated,
        looks: t.looks,
        lookers: t.lookers,
        poll_interval_ms: t.poll_interval_us().map(|us| us / 1000.0),
        latency_ms: (!h.is_empty()).then(|| SightLatency {
            count: h.len(),
            mean: h.mean() / 1000.0,
            p50: ms(h.value_at_quantile(0.50)),
            p90: ms(h.value_at_quantile(0.90)),
            p99: ms(h.value_at_quantile(0.99)),
            max: ms(h.max()),
            histogram: encode_histogram(h),
        }),
        look_gaps_ms: LatencyPart::of(&t.look_gaps),
        poll_gap_ms: LatencyPart::of(&t.poll_gap),
        staleness_ms: LatencyPart::of(&t.staleness),
    }
}

/// A row read back as the counts it was made of (the time its users ran to the nearest
/// microsecond), to be added to another shard's.
fn tally_of(r: &VisibilityRow) -> Result<Tally, String> {
    let latency = match &r.latency_ms {
        Some(l) => decode_histogram(&l.histogram)
            .ok_or_else(|| format!("visibility {}: the latency histogram is corrupt", r.op))?,
        None => new_histogram(),
    };
    Ok(Tally {
        writes: r.writes,
        expected: r.expected,
        seen: r.seen,
        seen_before_ack: r.seen_before_ack,
        superseded: r.superseded,
        unseen: r.unseen,
        duplicated: r.duplicated,
        latency,
        poll_gap: LatencyPart::censored_of(r.poll_gap_ms.as_ref(), &r.op)?,
        staleness: LatencyPart::censored_of(r.staleness_ms.as_ref(), &r.op)?,
        looks: r.looks,
        lookers: r.lookers,
        look_gaps: LatencyPart::censored_of(r.look_gaps_ms.as_ref(), &r.op)?,
    })
}

/// Rows of several shards added up by operation, in the order they first appear.
fn merged_rows<'a>(
    rows: impl Iterator<Item = &'a VisibilityRow>,
) -> Result<Vec<VisibilityRow>, String> {
    let mut out: Vec<(String, Tally)> = Vec::new();
    for r in rows {
        let t = tally_of(r)?;
        match out.iter_mut().find(|(op, _)| *op == r.op) {
            Some((_, sum)) => sum.add(&t),
            None => out.push((r.op.clone(), t)),
        }
    }
    Ok(out.into_iter().map(|(op, t)| row(op, &t)).collect())
}

impl VisibilityRecord {
    /// The shards' records of one run or one round added up: each team ran whole on one
    /// shard, so its writes and its observers are all in one record, and the sums are
    /// the run's. The first [`MAX_NAMED`] unseen writes stay named.
    pub(crate) fn merged(parts: &[&VisibilityRecord]) -> Result<VisibilityRecord, String> {
        let all = merged_rows(parts.iter().map(|p| &p.all))?
            .pop()
            .ok_or("no visibility to merge")?;
        let sum = |f: fn(&VisibilityRecord) -> u64| parts.iter().map(|p| f(p)).sum::<u64>();
        let named: Vec<String> = parts.iter().flat_map(|p| p.unseen_writes.clone()).collect();
        let past = named.len().saturating_sub(MAX_NAMED) as u64;
        Ok(VisibilityRecord {
            all,
            by_write: merged_rows(parts.iter().flat_map(|p| &p.by_write))?,
            by_observer: merged_rows(parts.iter().flat_map(|p| &p.by_observer))?,
            unacknowledged: sum(|p| p.unacknowledged),
            never_sent: sum(|p| p.never_sent),
            unexpected: sum(|p| p.unexpected),
            foreign: sum(|p| p.foreign),
            garbled: sum(|p| p.garbled),
            untracked: sum(|p| p.untracked),
            unseen_writes: named.into_iter().take(MAX_NAMED).collect(),
            unseen_unnamed: sum(|p| p.unseen_unnamed) + past,
        })
    }
}

/// `class.label` of a class index and label index.
fn op_name(w: &Workload, class: u16, label: u16) -> String {
    match w.classes.get(usize::from(class)) {
        Some(c) => format!(
            "{}.{}",
            c.name,
            c.labels.get(usize::from(label)).map_or("?", String::as_str)
        ),
        None => format!("class {class}.{label}"),
    }
}

/// The record of the measured rounds' visibility.
pub(super) fn record(w: &Workload, s: &Settled) -> VisibilityRecord {
    let class_of = |c: u16| {
        w.classes
            .get(usize::from(c))
            .map_or_else(|| format!("class {c}"), |c| c.name.clone())
    };
    VisibilityRecord {
        all: row("all".into(), &s.all),
        by_write: s
            .by_write
            .iter()
            .map(|(k, t)| row(op_name(w, k.0, k.1), t))
            .collect(),
        by_observer: s
            .by_observer
            .iter()
            .map(|(k, t)| row(op_name(w, k.0, k.1), t))
            .collect(),
        unacknowledged: s.unacknowledged,
        never_sent: s.never_sent,
        unexpected: s.unexpected,
        foreign: s.foreign,
        garbled: s.garbled,
        untracked: s.untracked,
        unseen_writes: s
            .unseen
            .iter()
            .map(|u| {
                format!(
                    "{}#{} seq {} ({}, round {}): unseen by {} of {}",
                    class_of(u.writer.class),
                    u.writer.vu,
                    crate::visibility::seq_text(u.seq),
                    op_name(w, u.writer.class, u.label),
                    u.writer.round,
                    u.missed,
                    u.of
                )
            })
            .collect(),
        unseen_unnamed: s.unnamed,
    }
}
