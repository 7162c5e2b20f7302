//! The report's visibility section: how long the writes to a team's shared calendar or
//! collection took to reach the members who read it (from the write's acknowledgement to
//! each member's first sight), and which of them never did, per writing and per observing
//! operation; and the shards' sections of one run added up.

use serde::{Deserialize, Serialize};

use super::op::{decode_histogram, encode_histogram};
use crate::visibility::{MAX_NAMED, Settled, Tally, new_histogram};
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
    /// The mean time between two looks of one observer.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub poll_interval_ms: Option<f64>,
    /// From the acknowledgement to the first sight.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub latency_ms: Option<SightLatency>,
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

fn row(op: String, t: &Tally) -> VisibilityRow {
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
    }
}

/// A row read back as the counts it was made of (the time between looks to the nearest
/// microsecond), to be added to another shard's.
fn tally_of(r: &VisibilityRow) -> Result<Tally, String> {
    let gaps = r.looks.saturating_sub(r.lookers) as f64;
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
        looks: r.looks,
        lookers: r.lookers,
        span_us: r
            .poll_interval_ms
            .map_or(0, |ms| (ms * 1000.0 * gaps).round() as u64),
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
fn op_name(w: &Workload, (class, label): (u16, u16)) -> String {
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
            .map(|(k, t)| row(op_name(w, *k), t))
            .collect(),
        by_observer: s
            .by_observer
            .iter()
            .map(|(k, t)| row(op_name(w, *k), t))
            .collect(),
        unacknowledged: s.unacknowledged,
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
                    op_name(w, (u.writer.class, u.label)),
                    u.writer.round,
                    u.missed,
                    u.of
                )
            })
            .collect(),
        unseen_unnamed: s.unnamed,
    }
}
