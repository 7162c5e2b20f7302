//! One operation's figures (or the total's) in a round or across rounds: counts, answers
//! in the protocol's words, errors by class, latency and its histograms.

use std::collections::BTreeMap;

use base64::Engine as _;
use hdrhistogram::serialization::{Serializer as _, V2DeflateSerializer};
use serde::{Deserialize, Serialize};

use crate::answer::Answer;
use crate::metrics::{OpStats, TimelineBucket};
use crate::report::stats::mean_ci95;
use crate::transport::ErrorClass;

/// Figures of one operation label (or of the total) in one round or across all rounds.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct OpReport {
    /// `class.label`, or `total`.
    pub op: String,
    /// Its class; `None` for the total.
    pub class: Option<String>,
    /// Requests sent (successes and failures).
    pub requests: u64,
    /// Picks of this operation that sent nothing: the user had nothing of its kind to
    /// act on (an update before any put). Never among the requests; the mix sent is the
    /// requests', so a share of skips is a share of the mix asked that did not run.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub skipped: u64,
    /// Of the requests, those a user sent to make its own first collection (its
    /// bootstrap), not picked from the table: the mix sent is the requests without them.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub bootstraps: u64,
    /// Picks of this operation from its class's table that sent a request, whatever label
    /// their answer was counted under (a sync picked and reported as `sync_no_change`):
    /// the mix sent.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub picked: u64,
    /// Operations that got the answer they expect.
    pub successes: u64,
    /// Operations that did not.
    pub failures: u64,
    /// Successes per second of measured time. Across rounds: the mean of the rounds.
    pub ops_per_sec: f64,
    /// Bytes written.
    pub bytes_sent: u64,
    /// Bytes read.
    pub bytes_received: u64,
    /// Responses by HTTP status.
    pub status: BTreeMap<String, u64>,
    /// The answers of other protocols, in their own words (schema v2); absent for HTTP.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub answers: Vec<AnswerCount>,
    /// Failures by class: connect, timeout, reset, status, body.
    pub errors: BTreeMap<String, u64>,
    /// Latency of successful operations, in milliseconds.
    pub latency_ms: Latency,
    /// Latencies beyond the histogram's range (1 h), counted at its maximum.
    pub clamped: u64,
    /// HdrHistogram (µs, 1 µs..1 h, 3 digits), V2 deflate serialisation, base64.
    pub histogram: String,
    /// Scheduled classes (open model, pacing): latency from each operation's intended
    /// start, coordinated-omission corrected; `latency_ms` is then the service time.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub latency_corrected_ms: Option<Latency>,
    /// `latency_corrected_ms`'s histogram, as `histogram` is.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub histogram_corrected: Option<String>,
    /// TCP connect time of the connections its operations had to open (part of the
    /// latency above); absent when none were opened.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub connect_ms: Option<Phase>,
    /// TLS handshake time on those connections (https; part of the latency above).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tls_handshake_ms: Option<Phase>,
    /// How many of those TLS handshakes resumed an earlier session.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub tls_resumed: u64,
    /// Answers put in doubt: bytes nobody asked for (a server's protocol error) turned up
    /// after them on their connection, so each may have answered an earlier request.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub in_doubt: u64,
    /// Across rounds only.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub across_rounds: Option<AcrossRounds>,
    /// Per second of the round, from its start (warm-up included, see `warmup_s`):
    /// requests, successes, failures, sum of success latencies (µs). Per round only.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub timeline: Vec<TimelineBucket>,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Latency {
    pub min: f64,
    pub mean: f64,
    pub stddev: f64,
    pub p50: f64,
    pub p90: f64,
    pub p95: f64,
    pub p99: f64,
    pub p999: f64,
    pub max: f64,
}

/// A part of the latency measured on its own (opening connections), in milliseconds.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Phase {
    /// How many times it happened (connections opened).
    pub count: u64,
    pub mean: f64,
    pub p50: f64,
    pub p95: f64,
    pub p99: f64,
    pub max: f64,
    /// HdrHistogram (µs), as `histogram`.
    pub histogram: String,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct AcrossRounds {
    pub rounds: usize,
    pub ops_per_sec_per_round: Vec<f64>,
    pub ops_per_sec_mean: f64,
    pub ops_per_sec_stddev: f64,
    /// 95 % confidence interval of the mean ops/sec (Student's t); absent for one round.
    pub ops_per_sec_ci95: Option<[f64; 2]>,
}

pub(in crate::report) fn rate(n: u64, secs: f64) -> f64 {
    if secs > 0.0 { n as f64 / secs } else { 0.0 }
}

pub(in crate::report) fn summary_op(
    name: &str,
    class: Option<&String>,
    s: &OpStats,
    rates: &[f64],
) -> OpReport {
    let (mean, sd, ci) = mean_ci95(rates);
    let mut r = op_report(name, class, s, mean, false);
    r.across_rounds = Some(AcrossRounds {
        rounds: rates.len(),
        ops_per_sec_per_round: rates.to_vec(),
        ops_per_sec_mean: mean,
        ops_per_sec_stddev: sd,
        ops_per_sec_ci95: ci.map(|(lo, hi)| [lo, hi]),
    });
    r
}

pub(in crate::report) fn op_report(
    name: &str,
    class: Option<&String>,
    s: &OpStats,
    ops_per_sec: f64,
    with_timeline: bool,
) -> OpReport {
    let h = &s.latency;
    let latency = if s.successes == 0 {
        Latency {
            min: 0.0,
            mean: 0.0,
            stddev: 0.0,
            p50: 0.0,
            p90: 0.0,
            p95: 0.0,
            p99: 0.0,
            p999: 0.0,
            max: 0.0,
        }
    } else {
        // The mean and deviation from the exact sums; the histogram's are bucketed.
        Latency {
            mean: s.mean_us() / 1000.0,
            stddev: s.stddev_us() / 1000.0,
            ..latency_of(h)
        }
    };
    OpReport {
        op: name.to_string(),
        class: class.cloned(),
        requests: s.requests,
        skipped: s.skipped,
        bootstraps: s.bootstraps,
        picked: s.picked,
        successes: s.successes,
        failures: s.failures,
        ops_per_sec,
        bytes_sent: s.bytes_sent,
        bytes_received: s.bytes_received,
        status: s
            .by_answer
            .iter()
            .filter_map(|(k, v)| Some((k.http_status()?.to_string(), *v)))
            .collect(),
        answers: named_answers(&s.by_answer),
        errors: ErrorClass::ALL
            .iter()
            .filter(|e| s.by_error[e.index()] > 0)
            .map(|e| (e.name().to_string(), s.by_error[e.index()]))
            .collect(),
        latency_ms: latency,
        clamped: s.clamped,
        histogram: encode_histogram(h),
        latency_corrected_ms: (s.scheduled && s.successes > 0)
            .then(|| latency_of(&s.latency_corrected)),
        histogram_corrected: s.scheduled.then(|| encode_histogram(&s.latency_corrected)),
        connect_ms: phase(&s.connecting),
        tls_handshake_ms: phase(&s.tls_handshaking),
        tls_resumed: s.tls_resumed,
        in_doubt: s.in_doubt,
        across_rounds: None,
        timeline: if with_timeline {
            s.timeline.clone()
        } else {
            Vec::new()
        },
    }
}

impl OpReport {
    /// Every answer and its count, in the protocol's words: HTTP statuses (`200`), then
    /// named answers (`stomp RECEIPT`).
    pub fn answer_counts(&self) -> Vec<(String, u64)> {
        let http = self.status.iter().map(|(k, v)| (k.clone(), *v));
        let named = self.answers.iter().map(|a| (a.label(), a.count));
        http.chain(named).collect()
    }
}

/// A protocol's named answer and how often it came.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq, PartialOrd, Ord)]
pub struct AnswerCount {
    /// The protocol (`stomp`, `amqp`).
    pub protocol: String,
    /// The answer's name (`RECEIPT`, `basic.ack`, `close`).
    pub name: String,
    /// Its code, when it has one (an AMQP reply code).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub code: Option<u16>,
    /// Its reason, when it gave one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// How often it came.
    pub count: u64,
}

impl AnswerCount {
    /// The answer this counts, interned (to be counted again, as a merge does).
    pub fn answer(&self) -> Answer {
        Answer::named(
            &self.protocol,
            &self.name,
            self.code,
            self.reason.as_deref(),
        )
    }

    /// As the table and the page show it: `stomp RECEIPT`, `amqp channel.close 406`.
    pub fn label(&self) -> String {
        // Formatted from its fields: showing a report must not intern what it shows.
        let named = crate::answer::Named {
            protocol: self.protocol.as_str().into(),
            name: self.name.as_str().into(),
            code: self.code,
            reason: self.reason.as_deref().map(Into::into),
        };
        format!("{} {}", named.protocol, named.label())
    }
}

/// The named answers among `by_answer`, in a stable order (by their words, not by when
/// this process first met them).
fn named_answers(by_answer: &BTreeMap<Answer, u64>) -> Vec<AnswerCount> {
    let mut v: Vec<AnswerCount> = by_answer
        .iter()
        .filter_map(|(a, &count)| {
            let n = a.as_named()?;
            Some(AnswerCount {
                protocol: n.protocol.into(),
                name: n.name.into(),
                code: n.code,
                reason: n.reason.map(String::from),
                count,
            })
        })
        .collect();
    v.sort();
    v
}

pub(super) fn is_zero(n: &u64) -> bool {
    *n == 0
}

fn phase(h: &hdrhistogram::Histogram<u64>) -> Option<Phase> {
    let ms = |us: u64| us as f64 / 1000.0;
    (!h.is_empty()).then(|| Phase {
        count: h.len(),
        mean: h.mean() / 1000.0,
        p50: ms(h.value_at_quantile(0.50)),
        p95: ms(h.value_at_quantile(0.95)),
        p99: ms(h.value_at_quantile(0.99)),
        max: ms(h.max()),
        histogram: encode_histogram(h),
    })
}

fn latency_of(h: &hdrhistogram::Histogram<u64>) -> Latency {
    let ms = |us: u64| us as f64 / 1000.0;
    Latency {
        min: ms(h.min()),
        mean: h.mean() / 1000.0,
        stddev: h.stdev() / 1000.0,
        p50: ms(h.value_at_quantile(0.50)),
        p90: ms(h.value_at_quantile(0.90)),
        p95: ms(h.value_at_quantile(0.95)),
        p99: ms(h.value_at_quantile(0.99)),
        p999: ms(h.value_at_quantile(0.999)),
        max: ms(h.max()),
    }
}

/// Serialise a histogram so other tools (and `loadmix compare`) can read it back exactly.
pub(super) fn encode_histogram(h: &hdrhistogram::Histogram<u64>) -> String {
    let mut buf = Vec::new();
    match V2DeflateSerializer::new().serialize(h, &mut buf) {
        Ok(_) => base64::engine::general_purpose::STANDARD.encode(buf),
        Err(_) => String::new(),
    }
}

/// Read back a histogram written by `encode_histogram` (HdrHistogram V2, deflate, base64).
pub fn decode_histogram(s: &str) -> Option<hdrhistogram::Histogram<u64>> {
    let bytes = base64::engine::general_purpose::STANDARD.decode(s).ok()?;
    hdrhistogram::serialization::Deserializer::new()
        .deserialize(&mut std::io::Cursor::new(bytes))
        .ok()
}
