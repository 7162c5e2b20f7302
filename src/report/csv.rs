//! CSV: one row per round × operation (and a `total` row per round), for spreadsheets.
//! Columns are documented in the README; latencies in milliseconds, successes only.

use super::model::Report;

pub const HEADER: &str = "run_id,target,workload,round,op,class,requests,successes,failures,ops_per_sec,\
mean_ms,min_ms,stddev_ms,p50_ms,p90_ms,p95_ms,p99_ms,p999_ms,max_ms,bytes_sent,bytes_received,\
errors_connect,errors_timeout,errors_reset,errors_status,errors_body";

fn field(s: &str) -> String {
    if s.contains([',', '"', '\n']) {
        format!("\"{}\"", s.replace('"', "\"\""))
    } else {
        s.to_string()
    }
}

pub fn render(r: &Report) -> String {
    let mut out = String::from(HEADER);
    out.push('\n');
    for round in &r.rounds {
        for o in round.ops.iter().chain(std::iter::once(&round.total)) {
            let l = &o.latency_ms;
            let e = |k: &str| o.errors.get(k).copied().unwrap_or(0);
            out.push_str(&format!(
                "{},{},{},{},{},{},{},{},{},{:.3},{:.3},{:.3},{:.3},{:.3},{:.3},{:.3},{:.3},{:.3},{:.3},{},{},{},{},{},{},{}\n",
                field(&r.run_id),
                field(&r.target),
                field(&r.workload.name),
                round.index,
                field(&o.op),
                field(o.class.as_deref().unwrap_or("")),
                o.requests,
                o.successes,
                o.failures,
                o.ops_per_sec,
                l.mean,
                l.min,
                l.stddev,
                l.p50,
                l.p90,
                l.p95,
                l.p99,
                l.p999,
                l.max,
                o.bytes_sent,
                o.bytes_received,
                e("connect"),
                e("timeout"),
                e("reset"),
                e("status"),
                e("body"),
            ));
        }
    }
    out
}
