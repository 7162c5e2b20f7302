//! A round as the report holds it: its figures, its operations, its seconds.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::op::is_zero;
use super::{Cleanup, Generator, OpReport, ServerProcess, ServerSeries};
use crate::transport::ErrorClass;

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct RoundReport {
    pub index: u32,
    pub started_at: String,
    pub elapsed_s: f64,
    /// The round's clock (its duration, or elapsed when shorter or when it ran by
    /// iterations) minus warm-up: what ops/sec divides by.
    pub measured_s: f64,
    /// How long past its duration the round ran (requests in flight at its end).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub overran_s: Option<f64>,
    pub vus: u64,
    pub connections_opened: u64,
    /// Requests sent again on a new connection because the server had closed the kept one
    /// without taking them (not failures, not in the latency).
    #[serde(default)]
    pub requests_retried: u64,
    /// Times bytes no request asked for were found on a connection: the server's
    /// protocol errors (each closed the connection; no request was counted for them).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub unsolicited_answers: u64,
    /// Classes with behaviours: their sessions, per behaviour.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub sessions: Vec<super::sessions::ClassSessions>,
    /// The users' set-up requests before the clock (accounts, discovery).
    #[serde(default, skip_serializing_if = "super::Untimed::is_empty")]
    pub setup: super::Untimed,
    pub warmup_requests: u64,
    /// Seconds at the start of the timeline that were warm-up.
    #[serde(default)]
    pub warmup_s: f64,
    /// Seconds the users' set-up took before the clock started.
    #[serde(default)]
    pub setup_s: f64,
    /// Users whose set-up (account, discovery) failed.
    #[serde(default)]
    pub setup_failures: u64,
    /// How the load generator itself fared.
    #[serde(default)]
    pub generator: Generator,
    /// Deleting what the round made, after its clock stopped (not in any figure above).
    #[serde(default)]
    pub cleanup: Cleanup,
    /// How the round's team writes reached the members who read; absent without teams.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub visibility: Option<super::VisibilityRecord>,
    /// The server's watched processes during the round (`monitor.process`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub server: Vec<ServerProcess>,
    /// The server's scraped metrics during the round (`monitor.prometheus`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub metrics: Vec<ServerSeries>,
    /// Second by second over all operations, warm-up included: latency percentiles,
    /// failures by class, operations in flight, active users.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub per_second: Vec<PerSecond>,
    /// The fault windows of the round and what each cost.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub faults: Vec<super::FaultWindow>,
    /// Under `--start-at`: how long after its slot the round's clock started, ms.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub start_late_ms: Option<f64>,
    /// Successes that reached the aggregator after their second's percentiles were taken
    /// (counted in every other figure).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub per_second_late: u64,
    pub interrupted: bool,
    pub ops: Vec<OpReport>,
    /// The requests answered (not messages sent or taken: `sent`, `received`).
    pub total: OpReport,
    /// Messages sent or published, when the workload carries messages.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sent: Option<OpReport>,
    /// Messages taken, when the workload carries messages.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub received: Option<OpReport>,
}

/// One second of a round (second `i` of the vector starts `i` s after the round).
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct PerSecond {
    /// Latency of the successes that started in this second, ms (two significant digits).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub p50_ms: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub p99_ms: Option<f64>,
    /// Failures that started in this second, by error class.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub errors: BTreeMap<ErrorClass, u64>,
    /// Mean number of operations in flight during the second.
    pub in_flight: f64,
    /// Users active at the second's end (closed users in their window, open sessions).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub users: Option<u64>,
    /// The successes that started in this second per latency row of
    /// `metrics::HEAT_BOUNDS_US` (the last row above every bound); empty when none did.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub latency_heat: Vec<u32>,
}

impl PerSecond {
    fn of(s: &crate::metrics::Second, users: Option<u64>) -> PerSecond {
        let ms = |us: u64| us as f64 / 1000.0;
        PerSecond {
            p50_ms: s.p50_us.map(ms),
            p99_ms: s.p99_us.map(ms),
            errors: ErrorClass::ALL
                .iter()
                .filter(|c| s.errors[c.index()] > 0)
                .map(|c| (*c, s.errors[c.index()]))
                .collect(),
            in_flight: s.busy_us as f64 / 1e6,
            users,
            latency_heat: match s.heat.iter().any(|&n| n > 0) {
                true => s.heat.to_vec(),
                false => Vec::new(),
            },
        }
    }
}

/// The round's seconds, as long as the longer of the samples' and the user counts'.
pub(super) fn per_second(seconds: &[crate::metrics::Second], users: &[u64]) -> Vec<PerSecond> {
    let n = seconds.len().max(users.len());
    (0..n)
        .map(|i| {
            PerSecond::of(
                &seconds.get(i).copied().unwrap_or_default(),
                users.get(i).copied(),
            )
        })
        .collect()
}
