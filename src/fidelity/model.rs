//! A workload's traffic sampled without a server, as a log of it would read: each class's
//! users (closed) or arrivals (open) pick their operations and think times exactly as a
//! run does (`engine::plan`), over the first log's span, and each operation takes as long
//! as the log says that operation took on average. A log's gap between an answer and the
//! next request holds the client's own work besides its thinking; the log's floor of those
//! gaps (what `infer` takes off before fitting) is added back, so that the model is held
//! to the log on the same terms. Operations are named as the log's classifier names them
//! (every CalDAV REPORT is one `report`).

use std::collections::HashMap;

use rand::rngs::Xoshiro256PlusPlus;
use rand::{RngExt, SeedableRng};

use crate::infer::classify::Protocol;
use crate::infer::scan::{OpDef, Request, Scan, Session};
use crate::workload::{self, ArrivalProcess, Workload};

/// The most requests a model is sampled to.
pub(crate) const MAX_REQUESTS: usize = 2_000_000;

/// The classifier's protocol and name of a workload's operation, or `None` for a
/// protocol no access log shows (a broker's).
pub(super) fn log_name(p: workload::Protocol, op: &str) -> Option<(Protocol, &str)> {
    let protocol = match p {
        workload::Protocol::Caldav => Protocol::Caldav,
        workload::Protocol::Morse => Protocol::Morse,
        workload::Protocol::Atom => Protocol::Atom,
        workload::Protocol::Http => Protocol::Http,
        // Brokers are not in an access log; `infer`'s classifier does not tell CardDAV's
        // requests apart yet.
        workload::Protocol::Stomp | workload::Protocol::Amqp | workload::Protocol::Carddav => {
            return None;
        }
    };
    // A log cannot tell a REPORT's kind, nor a Morse Code subscribe from a sync.
    let name = match protocol {
        Protocol::Caldav => match op {
            "time_range_report" | "sync_collection" | "multiget" => "report",
            other => other,
        },
        Protocol::Morse => match op {
            "subscribe" | "sync_no_change" => "sync",
            other => other,
        },
        Protocol::Atom | Protocol::Http => op,
    };
    Some((protocol, name))
}

/// The log's mean time per operation (µs), by protocol and name.
fn service_times(log: &Scan) -> HashMap<(Protocol, String), f64> {
    let mut sum: HashMap<usize, (f64, f64)> = HashMap::new();
    for s in &log.sessions {
        for r in &s.requests {
            let e = sum.entry(r.op as usize).or_default();
            e.0 += (r.done_us - r.at_us).max(0) as f64;
            e.1 += 1.0;
        }
    }
    sum.into_iter()
        .filter_map(|(i, (t, n))| {
            let d = log.ops.get(i)?;
            Some(((d.protocol, d.name.clone()), t / n.max(1.0)))
        })
        .collect()
}

/// The log's floor of the gaps between an answer and the next request (µs): the one
/// `infer` took off every think time.
pub(crate) fn gap_floor(log: &Scan) -> f64 {
    crate::infer::gap_floor(log)
}

/// Who starts when, as (user or arrival index, start µs, one session only): a closed
/// class's users at the start, an open class's arrivals over the span.
fn starts(w: &Workload, class: &crate::workload::UserClass, span: i64) -> Vec<(u32, i64, bool)> {
    match &class.arrival {
        None => (0..class.count).map(|vu| (vu, 0, false)).collect(),
        Some(a) => {
            let mut rng = Xoshiro256PlusPlus::seed_from_u64(w.run.seed ^ 0xa11);
            let (mut t, mut k, mut v) = (0f64, 0u32, Vec::new());
            let gap = 1e6 / a.rate.max(1e-9);
            loop {
                t += match a.process {
                    ArrivalProcess::Poisson => -gap * (1.0 - rng.random::<f64>()).ln(),
                    ArrivalProcess::Constant => gap,
                };
                if t >= span as f64 || v.len() >= MAX_REQUESTS {
                    break v;
                }
                v.push((k, t as i64, true));
                k = k.saturating_add(1);
            }
        }
    }
}

/// The sampled log's number for operation `name` of `protocol`, added at its first use.
fn op_id(
    s: &mut Scan,
    index: &mut HashMap<(Protocol, String), u16>,
    protocol: Protocol,
    name: &str,
) -> u16 {
    *index
        .entry((protocol, name.to_string()))
        .or_insert_with(|| {
            s.ops.push(OpDef {
                protocol,
                name: name.to_string(),
                template: None,
                example: String::new(),
            });
            s.op_requests.push(0);
            (s.ops.len() - 1) as u16
        })
}

/// A synthetic scan of `w`'s traffic over `log`'s span.
pub(crate) fn sample(w: &Workload, log: &Scan) -> Scan {
    let span = (log.last_us - log.first_us).max(1);
    let floor = gap_floor(log) as i64;
    let service = service_times(log);
    let mut s = Scan {
        first_us: 0,
        last_us: span,
        cuts: log.cuts.clone(),
        subsecond: true,
        ..Default::default()
    };
    let mut index: HashMap<(Protocol, String), u16> = HashMap::new();
    let mut requests = 0usize;
    let mut client = 0u32;
    for class in &w.classes {
        let Some(ops) = class
            .ops
            .iter()
            .map(|o| log_name(class.protocol, &o.name))
            .collect::<Option<Vec<_>>>()
        else {
            continue;
        };
        let op_ids: Vec<u16> = ops
            .iter()
            .map(|(p, n)| op_id(&mut s, &mut index, *p, n))
            .collect();
        let took: Vec<i64> = ops
            .iter()
            .map(|(p, n)| service.get(&(*p, n.to_string())).copied().unwrap_or(0.0) as i64)
            .collect();
        let protocol = ops.first().map_or(Protocol::Http, |o| o.0);
        let starts = starts(w, class, span);
        for (vu, start, one_session) in starts {
            let mut t = start;
            let mut current: Option<(u64, Session)> = None;
            let mut first = true;
            for p in crate::engine::plan::picks(w.run.seed, class, vu, 1) {
                if requests >= MAX_REQUESTS {
                    break;
                }
                let new_session = current.as_ref().is_none_or(|(id, _)| *id != p.session);
                if new_session && one_session && current.is_some() {
                    break;
                }
                let think = p.think.as_micros().min(i64::MAX as u128) as i64;
                t = t
                    .saturating_add(think)
                    .saturating_add(if first { 0 } else { floor });
                first = false;
                if t > span {
                    break;
                }
                if new_session {
                    if let Some((_, done)) = current.take() {
                        s.sessions.push(done);
                    }
                    current = Some((
                        p.session,
                        Session {
                            client,
                            protocol,
                            requests: Vec::new(),
                            cut: false,
                        },
                    ));
                }
                let op = op_ids[p.op];
                let done = t.saturating_add(took[p.op]);
                if let Some((_, x)) = current.as_mut() {
                    x.requests.push(Request {
                        op,
                        at_us: t,
                        done_us: done,
                    });
                }
                s.op_requests[op as usize] += 1;
                requests += 1;
                t = done;
            }
            if let Some((_, mut last)) = current.take() {
                // Still going when the span ended: as a log would see it, cut.
                last.cut = !one_session || t > span;
                s.sessions.push(last);
            }
            client = client.saturating_add(1);
        }
    }
    s.sessions_seen = s.sessions.len() as u64;
    s.sessions_cut = s.sessions.iter().filter(|x| x.cut).count() as u64;
    s
}
