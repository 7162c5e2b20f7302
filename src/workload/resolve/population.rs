//! A class's population: its count, or its arrivals (rate, process, returning users,
//! when full), its ramp.

use std::time::Duration;

use super::cx::Cx;
use super::keys::ClassKeys;
use super::{R, join, required};
use crate::workload::MAX_RETURNING;
use crate::workload::units;
use crate::workload::yaml::{Node, Value};
use crate::workload::{Arrival, ArrivalProcess, Stage, WhenFull};

pub(super) const ARRIVAL_KEYS: &[&str] = &[
    "rate",
    "process",
    "max_concurrency",
    "when_full",
    "returning",
];

/// Who the class's users are and when they run.
pub(super) struct Population {
    /// Users of a closed class (0 for an open class).
    pub(super) count: u32,
    pub(super) arrival: Option<Arrival>,
    pub(super) ramp: Vec<Stage>,
    pub(super) pacing: Option<Duration>,
}

pub(super) fn population(cx: &Cx, keys: &ClassKeys<'_>, path: &str) -> R<Population> {
    // A null count (`--set users.x.count=`) is no count: it lets --set switch a class to arrival.
    let count_node = keys.count.filter(|n| !matches!(n.value, Value::Null));
    let (count, arrival) = match (count_node, keys.arrival) {
        (Some(_), Some(a)) => {
            return Err(cx.err(
                a.pos,
                &format!("{path}.arrival"),
                "give either 'count' (a closed population) or 'arrival' (sessions arriving at a rate), not both",
            ));
        }
        (None, None) => {
            return Err(cx.err_hint(
                keys.node.pos,
                path,
                "missing required key 'count' (or 'arrival' for an open model)",
                Some("write e.g. count: 10, or arrival: { rate: 50/s }".into()),
            ));
        }
        (Some(count_node), None) => {
            let count = cx.int(count_node, &format!("{path}.count"), 0)?;
            let count = u32::try_from(count)
                .map_err(|_| cx.err(count_node.pos, &format!("{path}.count"), "too many users"))?;
            (count, None)
        }
        (None, Some(a)) => (0, Some(resolve_arrival(cx, a, &format!("{path}.arrival"))?)),
    };
    let ramp = match keys.ramp {
        Some(r) => resolve_ramp(cx, r, &format!("{path}.ramp"), arrival.is_some())?,
        None => Vec::new(),
    };
    let pacing = match keys.pacing {
        None => None,
        Some(n) => {
            let key = format!("{path}.pacing");
            if arrival.is_some() {
                return Err(cx.err(n.pos, &key, "pacing is for closed classes (count); an open class is paced by its arrival rate"));
            }
            if keys.think.is_some() {
                return Err(cx.err(n.pos, &key, "give either 'pacing' or 'think', not both"));
            }
            let d = cx.duration(n, &key)?;
            if d.is_zero() {
                return Err(cx.err(n.pos, &key, "must be longer than 0"));
            }
            Some(d)
        }
    };
    Ok(Population {
        count,
        arrival,
        ramp,
        pacing,
    })
}

/// A rate of arrivals, within what one process can start.
pub(super) fn arrival_rate(text: &str) -> Result<f64, String> {
    let r = units::parse_rate(text)?;
    if r > crate::workload::MAX_ARRIVAL_RATE {
        return Err(format!(
            "{text} is more sessions than one process can start (at most {}/s per class); split the load over several classes or processes",
            crate::workload::MAX_ARRIVAL_RATE as u64
        ));
    }
    Ok(r)
}

pub(super) fn resolve_arrival(cx: &Cx, node: &Node, path: &str) -> R<Arrival> {
    let entries = cx.map(node, path)?;
    cx.check_keys(entries, ARRIVAL_KEYS, path)?;
    let rate_node = required(cx, node, "rate", path)?;
    let rate_text = rate_node.scalar_text().unwrap_or_default();
    let rate =
        arrival_rate(&rate_text).map_err(|m| cx.err(rate_node.pos, &join(path, "rate"), m))?;
    let process = match node.get("process") {
        None => ArrivalProcess::Poisson,
        Some(n) => match cx.string(n, &join(path, "process"))?.as_str() {
            "poisson" => ArrivalProcess::Poisson,
            "constant" => ArrivalProcess::Constant,
            other => {
                return Err(cx.err_hint(
                    n.pos,
                    &join(path, "process"),
                    format!("unknown arrival process '{other}'"),
                    Some("use poisson or constant".into()),
                ));
            }
        },
    };
    let max_concurrency = match node.get("max_concurrency") {
        None => 10_000,
        Some(n) => u32::try_from(cx.int(n, &join(path, "max_concurrency"), 1)?).unwrap_or(u32::MAX),
    };
    let when_full = match node.get("when_full") {
        None => WhenFull::Queue,
        Some(n) => match cx.string(n, &join(path, "when_full"))?.as_str() {
            "queue" => WhenFull::Queue,
            "drop" => WhenFull::Drop,
            other => {
                return Err(cx.err_hint(
                    n.pos,
                    &join(path, "when_full"),
                    format!("unknown policy '{other}'"),
                    Some("use queue or drop".into()),
                ));
            }
        },
    };
    let returning = match node.get("returning") {
        None => None,
        Some(n) => {
            let k = cx.int(n, &join(path, "returning"), 1)?;
            if k > MAX_RETURNING {
                return Err(cx.err(
                    n.pos,
                    &join(path, "returning"),
                    format!("at most {MAX_RETURNING} returning users, got {k}"),
                ));
            }
            Some(k as u32)
        }
    };
    Ok(Arrival {
        rate,
        process,
        max_concurrency,
        when_full,
        returning,
    })
}

/// `[ { to: 100, over: 30s }, { hold: 2m } ]`; `to` is a count, or a rate for an open class.
pub(super) fn resolve_ramp(cx: &Cx, node: &Node, path: &str, open: bool) -> R<Vec<Stage>> {
    let Value::Seq(items) = &node.value else {
        return Err(cx.err(
            node.pos,
            path,
            format!("expected a list of stages, found {}", node.value.kind()),
        ));
    };
    let mut out = Vec::new();
    for (i, item) in items.iter().enumerate() {
        let sp = format!("{path}[{i}]");
        let e = cx.map(item, &sp)?;
        cx.check_keys(e, &["to", "over", "hold"], &sp)?;
        let stage = match (item.get("to"), item.get("over"), item.get("hold")) {
            (Some(to), Some(over), None) => {
                let v = if open {
                    let t = to.scalar_text().unwrap_or_default();
                    arrival_rate(&t).map_err(|m| cx.err(to.pos, &join(&sp, "to"), m))?
                } else {
                    cx.int(to, &join(&sp, "to"), 0)? as f64
                };
                Stage {
                    to: Some(v),
                    over: cx.duration(over, &join(&sp, "over"))?,
                }
            }
            (None, None, Some(h)) => Stage {
                to: None,
                over: cx.duration(h, &join(&sp, "hold"))?,
            },
            _ => {
                return Err(cx.err(
                    item.pos,
                    &sp,
                    "a stage is { to: N, over: DURATION } or { hold: DURATION }",
                ));
            }
        };
        out.push(stage);
    }
    Ok(out)
}
