//! What each kind of fault takes (its own keys, read into a `FaultAction`), how an entry
//! is named in the report, and `recovery:`, the rule its windows are judged by.

use super::*;
use crate::workload::faults::{
    COMMAND_TIMEOUT, Fault, FaultAction, MAX_COMMAND_TIMEOUT, Recovery, Stream,
};

/// The longest command a `command` fault may run.
const MAX_COMMAND_LEN: usize = 4096;

/// `recovery: { band: 25%, hold: 3s, percentile: p50 }`, each optional.
pub(super) fn resolve_recovery(cx: &Cx, node: &Node) -> R<Recovery> {
    let entries = cx.map(node, "recovery")?;
    cx.check_keys(entries, &["band", "hold", "percentile"], "recovery")?;
    let mut r = Recovery::default();
    if let Some(n) = node.get("band") {
        let text = n.scalar_text().unwrap_or_default();
        let t = text.trim();
        let v = match t.strip_suffix('%') {
            Some(p) => p.trim().parse::<f64>().map(|p| p / 100.0),
            None => t.parse::<f64>(),
        };
        r.band = match v {
            Ok(b) if b > 0.0 && b <= 10.0 => b,
            _ => {
                return Err(cx.err(
                    n.pos,
                    "recovery.band",
                    format!("'{t}': a share such as 25% (or 0.25), more than 0 and at most 1000%"),
                ));
            }
        };
    }
    if let Some(n) = node.get("hold") {
        r.hold = cx.duration(n, "recovery.hold")?;
        if r.hold < Duration::from_secs(1) || r.hold > Duration::from_secs(60) {
            return Err(cx.err(n.pos, "recovery.hold", "from 1s to 60s, in whole seconds"));
        }
    }
    if let Some(n) = node.get("percentile") {
        let text = n.scalar_text().unwrap_or_default();
        let t = text.trim();
        r.percentile = match t.trim_start_matches('p').parse::<f64>() {
            Ok(p) if p > 0.0 && p < 100.0 => p,
            _ => {
                return Err(cx.err(
                    n.pos,
                    "recovery.percentile",
                    format!("'{t}': a percentile such as p50 or p99"),
                ));
            }
        };
    }
    Ok(r)
}

/// The keys of its own each kind takes.
pub(super) fn own_keys(kind: &str) -> &'static [&'static str] {
    match kind {
        "latency" => &["delay", "jitter"],
        "bandwidth" => &["rate"],
        "slow_close" => &["delay"],
        "timeout" => &["after"],
        "slicer" => &["size", "delay"],
        "limit_data" => &["bytes"],
        "command" => &["run", "undo", "timeout"],
        _ => &[],
    }
}

pub(super) fn action(cx: &Cx, item: &Node, path: &str, kind: &str) -> R<FaultAction> {
    let dur = |key: &str| -> R<Duration> {
        cx.duration(required(cx, item, key, path)?, &join(path, key))
    };
    let size = |key: &str| -> R<u64> {
        let n = required(cx, item, key, path)?;
        let text = n.scalar_text().unwrap_or_default();
        let v = units::parse_size(&text).map_err(|m| cx.err(n.pos, &join(path, key), m))?;
        match v {
            0 => Err(cx.err(n.pos, &join(path, key), "must be more than 0 bytes")),
            v => Ok(v),
        }
    };
    Ok(match kind {
        "pause" => FaultAction::Pause,
        "kill" => FaultAction::Kill,
        "restart" => FaultAction::Restart,
        "latency" => FaultAction::Latency {
            delay: dur("delay")?,
            jitter: match item.get("jitter") {
                Some(n) => cx.duration(n, &join(path, "jitter"))?,
                None => Duration::ZERO,
            },
        },
        "bandwidth" => FaultAction::Bandwidth {
            bytes_per_s: size("rate")?,
        },
        "slow_close" => FaultAction::SlowClose {
            delay: dur("delay")?,
        },
        "timeout" => FaultAction::Timeout {
            after: item
                .get("after")
                .map(|n| cx.duration(n, &join(path, "after")))
                .transpose()?,
        },
        "reset" => FaultAction::Reset,
        "slicer" => FaultAction::Slicer {
            size: size("size")?,
            delay: dur("delay")?,
        },
        "limit_data" => FaultAction::LimitData {
            bytes: size("bytes")?,
        },
        "command" => command(cx, item, path)?,
        _ => FaultAction::Down,
    })
}

/// `command`: `run` (a shell command, at the window's begin), `undo` (at its end) and
/// `timeout` (each killed past it).
fn command(cx: &Cx, item: &Node, path: &str) -> R<FaultAction> {
    let text = |key: &str, n: &Node| -> R<String> {
        let s = cx.string(n, &join(path, key))?;
        match s.trim().is_empty() || s.len() > MAX_COMMAND_LEN {
            true => Err(cx.err(
                n.pos,
                &join(path, key),
                format!("a shell command, not empty, at most {MAX_COMMAND_LEN} bytes"),
            )),
            false => Ok(s),
        }
    };
    let timeout = match item.get("timeout") {
        Some(n) => {
            let t = cx.duration(n, &join(path, "timeout"))?;
            if t.is_zero() || t > MAX_COMMAND_TIMEOUT {
                return Err(cx.err(
                    n.pos,
                    &join(path, "timeout"),
                    format!("more than 0 and at most {}s", MAX_COMMAND_TIMEOUT.as_secs()),
                ));
            }
            t
        }
        None => COMMAND_TIMEOUT,
    };
    Ok(FaultAction::Command {
        run: text("run", required(cx, item, "run", path)?)?,
        undo: item.get("undo").map(|n| text("undo", n)).transpose()?,
        timeout,
    })
}

pub(super) fn stream(cx: &Cx, item: &Node, path: &str) -> R<Stream> {
    let Some(n) = item.get("stream") else {
        return Ok(Stream::Downstream);
    };
    match cx.string(n, &join(path, "stream"))?.as_str() {
        "downstream" => Ok(Stream::Downstream),
        "upstream" => Ok(Stream::Upstream),
        "both" => Ok(Stream::Both),
        other => Err(cx.err(
            n.pos,
            &join(path, "stream"),
            format!("'{other}': downstream (answers, the default), upstream (requests) or both"),
        )),
    }
}

/// As the report names it.
pub(super) fn describe(f: &Fault) -> String {
    let ms = |d: &Duration| format!("{}ms", d.as_secs_f64() * 1000.0);
    let what = match &f.action {
        FaultAction::Latency { delay, jitter } if jitter.is_zero() => {
            format!("latency {}", ms(delay))
        }
        FaultAction::Latency { delay, jitter } => {
            format!("latency {} ±{}", ms(delay), ms(jitter))
        }
        FaultAction::Bandwidth { bytes_per_s } => format!("bandwidth {bytes_per_s} B/s"),
        FaultAction::SlowClose { delay } => format!("slow_close {}", ms(delay)),
        FaultAction::Timeout { after: Some(a) } => format!("timeout, closed after {}", ms(a)),
        FaultAction::Slicer { size, delay } => format!("slicer {size} B every {}", ms(delay)),
        FaultAction::LimitData { bytes } => format!("limit_data {bytes} B"),
        FaultAction::Command { run, .. } => {
            let short: String = run.chars().take(40).collect();
            match short.len() < run.len() {
                true => format!("command `{short}…`"),
                false => format!("command `{run}`"),
            }
        }
        other => other.name().to_string(),
    };
    match f.toxicity < 1.0 {
        true => format!("{what} (toxicity {})", f.toxicity),
        false => what,
    }
}
