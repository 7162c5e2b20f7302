//! CSV: one row per round × operation (and a `total` row per round), for spreadsheets,
//! written with the `csv` crate. Columns are documented in the README; latencies in
//! milliseconds, successes only.

use serde::Serialize;

use super::model::Report;

/// One row; field order is column order.
#[derive(Serialize)]
struct Row<'a> {
    run_id: &'a str,
    target: &'a str,
    workload: &'a str,
    round: u32,
    op: &'a str,
    class: &'a str,
    requests: u64,
    successes: u64,
    failures: u64,
    ops_per_sec: Fixed,
    mean_ms: Fixed,
    min_ms: Fixed,
    stddev_ms: Fixed,
    p50_ms: Fixed,
    p90_ms: Fixed,
    p95_ms: Fixed,
    p99_ms: Fixed,
    p999_ms: Fixed,
    max_ms: Fixed,
    bytes_sent: u64,
    bytes_received: u64,
    errors_connect: u64,
    errors_timeout: u64,
    errors_reset: u64,
    errors_status: u64,
    errors_body: u64,
}

/// A number written with three decimals.
pub(crate) struct Fixed(pub f64);

impl Serialize for Fixed {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(&format_args!("{:.3}", self.0))
    }
}

/// Rows of `records` as CSV text with a header line (none when `header` is false, to
/// append runs one after another).
pub(crate) fn to_text<T: Serialize>(
    records: impl IntoIterator<Item = T>,
    header: bool,
) -> Result<String, csv::Error> {
    let mut w = csv::WriterBuilder::new()
        .has_headers(header)
        .from_writer(Vec::new());
    for r in records {
        w.serialize(r)?;
    }
    let bytes = w.into_inner().map_err(|e| e.into_error())?;
    Ok(String::from_utf8_lossy(&bytes).into_owned())
}

/// The report's rows; `header` as for [`to_text`].
pub(crate) fn render(r: &Report, header: bool) -> Result<String, csv::Error> {
    let rows = r.rounds.iter().flat_map(|round| {
        round.ops.iter().chain(round.sums()).map(move |o| {
            let l = &o.latency_ms;
            let e = |k: &str| o.errors.get(k).copied().unwrap_or(0);
            Row {
                run_id: &r.run_id,
                target: &r.target,
                workload: &r.workload.name,
                round: round.index,
                op: &o.op,
                class: o.class.as_deref().unwrap_or(""),
                requests: o.requests,
                successes: o.successes,
                failures: o.failures,
                ops_per_sec: Fixed(o.ops_per_sec),
                mean_ms: Fixed(l.mean),
                min_ms: Fixed(l.min),
                stddev_ms: Fixed(l.stddev),
                p50_ms: Fixed(l.p50),
                p90_ms: Fixed(l.p90),
                p95_ms: Fixed(l.p95),
                p99_ms: Fixed(l.p99),
                p999_ms: Fixed(l.p999),
                max_ms: Fixed(l.max),
                bytes_sent: o.bytes_sent,
                bytes_received: o.bytes_received,
                errors_connect: e("connect"),
                errors_timeout: e("timeout"),
                errors_reset: e("reset"),
                errors_status: e("status"),
                errors_body: e("body"),
            }
        })
    });
    to_text(rows, header)
}
