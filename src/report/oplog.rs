//! `--log-ops`: every operation of a run as one CSV row, written with the `csv` crate.
//! Columns: `round,class,vu,seq,op,label,think_us,start_us,latency_us,status,error`.
//! `status` is the HTTP status (0 when none came), or another protocol's named answer
//! (`stomp RECEIPT`). `seq` numbers a user's picks from its table as `loadmix plan` does, and `think_us` is
//! the think time before the operation, so a plan and a log compare line for line. A
//! bootstrap (`op` is `(bootstrap)`) carries the `seq` of the pick that follows it; a pick
//! with nothing to act on sent nothing and has `error` `skipped` (the report counts it as
//! its operation's `skipped`).

use serde::Serialize;

use crate::engine::OpLogEntry;
use crate::workload::Workload;

#[derive(Serialize)]
struct Row<'a> {
    round: u32,
    class: &'a str,
    vu: u32,
    seq: u64,
    op: &'a str,
    label: &'a str,
    think_us: u64,
    start_us: u64,
    latency_us: u64,
    /// The HTTP status (0 for none), or a protocol's named answer.
    status: String,
    error: &'a str,
}

/// The op log as CSV text with its header line.
pub(crate) fn render(w: &Workload, log: &[OpLogEntry]) -> Result<String, csv::Error> {
    let rows = log.iter().map(|e| {
        let c = &w.classes[e.class];
        Row {
            round: e.round,
            class: &c.name,
            vu: e.vu,
            seq: e.seq,
            op: e.op.map_or("(bootstrap)", |o| c.ops[o].name.as_str()),
            label: c.labels.get(e.label).map_or("", String::as_str),
            think_us: e.think_us,
            start_us: e.start_us,
            latency_us: e.latency_us,
            status: match e.answer.http_status() {
                Some(s) => s.to_string(),
                None if e.answer.is_none() => "0".into(),
                None => e.answer.to_string(),
            },
            error: if e.skipped {
                "skipped"
            } else {
                e.error.map_or("", |x| x.name())
            },
        }
    });
    super::csv::to_text(rows, true)
}
