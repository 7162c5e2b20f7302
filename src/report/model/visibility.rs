//! The report's visibility section: how long the writes to a team's shared calendar
//! took to reach the members who read it (from the write's acknowledgement to each
//! member's first sight), and which of them never did, per writing and per observing
//! operation.

use serde::{Deserialize, Serialize};

use super::op::encode_histogram;
use crate::visibility::{Settled, Tally};
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
