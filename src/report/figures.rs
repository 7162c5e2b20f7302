//! Figures worked out from a report's model once, for every renderer (the console
//! table, the HTML page): the message rates and backlogs of the classes that carry
//! messages, each behaviour's sessions as rows, and the server's side in words.

use super::model::Report;

/// A round's backlog: the run's messages on the broker (sent less taken) at the end of
/// each second.
pub(crate) struct Backlog {
    pub round: u32,
    pub per_second: Vec<i64>,
}

/// Each round's backlog, from its broker operations' per-second successes: sends and
/// publishes add, receives and consumes (foreign ones too) take away; empty receives do
/// not count. Rounds without both are left out.
pub(crate) fn backlogs(r: &Report) -> Vec<Backlog> {
    let brokers = broker_classes(r);
    r.rounds
        .iter()
        .filter_map(|round| {
            let mut per_second: Vec<i64> = Vec::new();
            let (mut adds, mut takes) = (false, false);
            for o in &round.ops {
                if !o.class.as_deref().is_some_and(|c| brokers.contains(&c)) {
                    continue;
                }
                let label = o.op.split_once('.').map_or("", |(_, l)| l);
                let sign = match label {
                    "send" | "publish" => 1,
                    "receive" | "consume" | "receive_foreign" | "consume_foreign" => -1,
                    _ => continue,
                };
                adds |= sign > 0;
                takes |= sign < 0;
                if per_second.len() < o.timeline.len() {
                    per_second.resize(o.timeline.len(), 0);
                }
                for (k, b) in o.timeline.iter().enumerate() {
                    per_second[k] += sign * b.successes as i64;
                }
            }
            let mut level = 0i64;
            for v in per_second.iter_mut() {
                level += *v;
                *v = level;
            }
            (adds && takes).then_some(Backlog {
                round: round.index,
                per_second,
            })
        })
        .collect()
}

/// A round's backlog in words: its highest, when, and at the end.
pub(crate) fn backlog_words(b: &Backlog) -> String {
    let (at, max) = b
        .per_second
        .iter()
        .enumerate()
        .max_by_key(|(_, v)| **v)
        .map_or((0, 0), |(k, v)| (k + 1, *v));
    format!(
        "backlog, round {} (sent less taken, at each second's end): highest {max} at {at} s, {} at the end",
        b.round,
        b.per_second.last().copied().unwrap_or(0)
    )
}

/// The names of the workload's classes that carry messages.
fn broker_classes(r: &Report) -> Vec<&str> {
    r.workload
        .classes
        .iter()
        .filter(|c| c.carries_messages())
        .map(|c| c.name.as_str())
        .collect()
}

/// One broker operation's message rates.
pub(crate) struct MessageRate<'a> {
    pub op: &'a str,
    pub per_sec: f64,
    pub per_min: f64,
    pub mib_per_sec: f64,
}

/// The message rates of the operations of broker classes (STOMP, AMQP), their figures
/// reported apart (`receive.e2e`) left out.
pub(crate) fn message_rates(r: &Report) -> Vec<MessageRate<'_>> {
    let brokers = broker_classes(r);
    let secs = r.summary.measured_s;
    r.summary
        .ops
        .iter()
        .filter(|o| o.class.as_deref().is_some_and(|c| brokers.contains(&c)))
        .filter(|o| {
            let label = o.op.split_once('.').map_or("", |(_, l)| l);
            !crate::workload::is_step_label(label)
        })
        // An empty receive took no message.
        .filter(|o| !o.op.ends_with("_empty"))
        .filter(|o| o.successes > 0)
        .map(|o| {
            let per_sec = o
                .across_rounds
                .as_ref()
                .map_or(o.ops_per_sec, |a| a.ops_per_sec_mean);
            let bytes = (o.bytes_sent + o.bytes_received) as f64;
            MessageRate {
                op: &o.op,
                per_sec,
                per_min: per_sec * 60.0,
                mib_per_sec: if secs > 0.0 {
                    bytes / secs / (1024.0 * 1024.0)
                } else {
                    0.0
                },
            }
        })
        .collect()
}

/// The columns of a class's sessions, in the table and the HTML report.
pub(crate) const SESSION_COLUMNS: [&str; 13] = [
    "behaviour",
    "sessions",
    "share",
    "weight",
    "exited",
    "max_ops",
    "dead",
    "cut",
    "ops p50",
    "ops mean",
    "ops p90",
    "time p50",
    "time p90",
];

/// One row per behaviour of `c`, in [`SESSION_COLUMNS`].
pub(crate) fn session_rows(c: &crate::report::model::sessions::ClassSessions) -> Vec<Vec<String>> {
    let started: u64 = c.behaviours.iter().map(|b| b.started).sum();
    c.behaviours
        .iter()
        .map(|b| {
            let share = if started == 0 {
                0.0
            } else {
                b.started as f64 / started as f64
            };
            vec![
                b.behaviour.clone(),
                b.started.to_string(),
                format!("{:.1}%", share * 100.0),
                format!("{:.1}%", b.weight_share * 100.0),
                b.exited.to_string(),
                b.max_ops.to_string(),
                b.dead_ends.to_string(),
                b.cut.to_string(),
                format!("{}", b.ops_per_session.p50),
                format!("{:.2}", b.ops_per_session.mean),
                format!("{}", b.ops_per_session.p90),
                format!("{:.3} s", b.duration_s.p50),
                format!("{:.3} s", b.duration_s.p90),
            ]
        })
        .collect()
}

/// Where guarded transitions dropped out, as `state n, ...`; `None` if nowhere.
pub(crate) fn renormalised(c: &crate::report::model::sessions::ClassSessions) -> Option<String> {
    (!c.renormalised.is_empty()).then(|| {
        c.renormalised
            .iter()
            .map(|(k, n)| format!("{k} {n}"))
            .collect::<Vec<_>>()
            .join(", ")
    })
}

/// A watched JVM's collections and heap, one line.
pub(crate) fn jvm_line(j: &crate::report::model::JvmFigures) -> String {
    format!(
        "{} collections, {:.0} ms ({:.2} and {:.1} ms per 1,000 operations) · heap peak {:.0} MiB of {:.0} MiB committed · {}",
        j.gc_count,
        j.gc_time_ms,
        j.gc_per_1000_ops,
        j.gc_ms_per_1000_ops,
        j.heap_used_peak_mib,
        j.heap_committed_max_mib,
        if j.collectors.is_empty() {
            "collectors unnamed".to_string()
        } else {
            j.collectors.join(", ")
        }
    )
}

/// What the watched processes and scraped series cost, one line each; a monitor that
/// could not see everything is a `WARNING:` line.
pub(crate) fn server_lines(s: &crate::report::model::Summary) -> Vec<String> {
    let mut out = Vec::new();
    for p in &s.server {
        out.push(format!(
            "server {}: {:.2} ms CPU per operation · {:.2} cores · {:.1} CPU-s ({:.1} user, {:.1} system) · peak RSS {:.0} MiB · {} threads · {} process(es) · {} context switches",
            p.process,
            p.cpu_ms_per_op,
            p.cores_used,
            p.cpu_user_s + p.cpu_system_s,
            p.cpu_user_s,
            p.cpu_system_s,
            p.rss_peak_mib,
            p.threads_max,
            p.processes_max,
            p.context_switches
        ));
        if let Some(j) = &p.jvm {
            out.push(format!("server {} (JVM): {}", p.process, jvm_line(j)));
        }
        if let Some(problem) = &p.problem {
            out.push(format!("WARNING: monitor: {problem}"));
        }
    }
    for m in &s.metrics {
        match m.kind.as_str() {
            // Never read: only the warning below says anything.
            "" => {}
            "counter" => {
                out.push(format!(
                    "metric {}: {:.1} per second (max {:.1}) · {:.1} in all · {:.2} per 1,000 {}",
                    m.series,
                    m.mean,
                    m.max,
                    m.increase,
                    m.per_1000_ops,
                    m.per.as_deref().unwrap_or("operations")
                ));
            }
            _ => {
                out.push(format!(
                    "metric {}: mean {:.1} · max {:.1}",
                    m.series, m.mean, m.max
                ));
            }
        }
        if let Some(problem) = &m.problem {
            out.push(format!("WARNING: monitor: {problem}"));
        }
    }
    out
}
