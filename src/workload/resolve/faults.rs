//! `faults:` and `--fault`: the fault timeline, each entry checked against its kind's keys
//! and the run it acts in (a window inside the round, after the warm-up, no two windows
//! of one target overlapping).

use super::fault_kinds::{action, describe, own_keys, stream};
use super::*;
use crate::workload::faults::{Fault, FaultAction, MAX_FAULT_FOR, MAX_FAULTS};

/// Keys every entry may have.
const COMMON: &[&str] = &["fault", "at", "for", "round", "target"];
/// And every network fault.
const NETWORK: &[&str] = &["toxicity", "stream"];

/// The timeline of `faults:` (a list), checked against `run`.
pub(super) fn resolve_faults(cx: &Cx, node: &Node, run: &RunSpec, hold: Duration) -> R<Vec<Fault>> {
    let Value::Seq(items) = &node.value else {
        return Err(cx.err(
            node.pos,
            "faults",
            format!("expected a list, found {}", node.value.kind()),
        ));
    };
    if items.len() > MAX_FAULTS {
        return Err(cx.err(
            node.pos,
            "faults",
            format!("at most {MAX_FAULTS} faults, found {}", items.len()),
        ));
    }
    let mut out: Vec<Fault> = Vec::new();
    for (i, item) in items.iter().enumerate() {
        let path = format!("faults[{i}]");
        let f = resolve_fault(cx, item, &path, run, hold, false)?;
        if let Some(other) = out.iter().find(|o| overlaps(o, &f)) {
            return Err(cx.err(
                item.pos,
                &path,
                format!(
                    "its window {}..{} overlaps {}'s ({}..{}) on the same target: each fault's cost is measured apart, so give them windows of their own (or `target:`s)",
                    secs(f.at),
                    secs(f.until()),
                    other.text,
                    secs(other.at),
                    secs(other.until())
                ),
            ));
        }
        out.push(f);
    }
    Ok(out)
}

/// One `--fault` (a YAML mapping such as `{fault: latency, at: 10s, for: 3s, delay:
/// 50ms}`, or the same as `fault=latency,at=10s,...`), checked like an entry of
/// `faults:` and against those already there. `index` counts from 1.
pub(crate) fn resolve_fault_flag(
    text: &str,
    index: usize,
    run: &RunSpec,
    hold: Duration,
    timeline: &[Fault],
) -> Result<Fault, WorkloadError> {
    let yaml_text = match text.trim_start().starts_with('{') {
        true => text.to_string(),
        false => format!(
            "{{{}}}",
            text.split(',')
                .map(|kv| match kv.split_once('=') {
                    Some((k, v)) => format!("{}: {}", k.trim(), v.trim()),
                    None => kv.trim().to_string(),
                })
                .collect::<Vec<_>>()
                .join(", ")
        ),
    };
    let file = format!("--fault {index}");
    let cx = Cx {
        file: &file,
        lines: yaml_text.lines().collect(),
        base_dir: None,
    };
    let node = yaml::parse(&yaml_text)
        .map_err(|e| cx.err(e.pos, "", format!("YAML syntax error: {}", e.message)))?;
    let f = resolve_fault(&cx, &node, "fault", run, hold, true)?;
    if let Some(other) = timeline.iter().find(|o| overlaps(o, &f)) {
        return Err(cx.err(
            node.pos,
            "fault",
            format!(
                "its window overlaps {} ({}, {}..{}) on the same target",
                other.text,
                other.origin,
                secs(other.at),
                secs(other.until())
            ),
        ));
    }
    Ok(f)
}

fn secs(d: Duration) -> String {
    format!("{}s", d.as_secs_f64())
}

/// Two entries that can act on one target in one round at once.
fn overlaps(a: &Fault, b: &Fault) -> bool {
    let rounds = a.round.is_none() || b.round.is_none() || a.round == b.round;
    let targets = a.target.is_none() || b.target.is_none() || a.target == b.target;
    // A kill's window may be empty (started again at once): it still holds its instant.
    let (a_end, b_end) = (
        a.until().max(a.at + Duration::from_micros(1)),
        b.until().max(b.at + Duration::from_micros(1)),
    );
    rounds && targets && a.at < b_end && b.at < a_end
}

/// One entry, in a run of `run`'s rounds whose recovery holds for `hold`; a `command`
/// only when it was given on the `command_line`.
fn resolve_fault(
    cx: &Cx,
    item: &Node,
    path: &str,
    run: &RunSpec,
    hold: Duration,
    command_line: bool,
) -> R<Fault> {
    let entries = cx.map(item, path)?;
    let kind_node = required(cx, item, "fault", path)?;
    let kind = cx.string(kind_node, &join(path, "fault"))?;
    if !FaultAction::NAMES.contains(&kind.as_str()) {
        let hint = match did_you_mean(&kind, FaultAction::NAMES.iter().copied()) {
            Some(s) => format!("did you mean '{s}'?"),
            None => format!("one of {}", FaultAction::NAMES.join(", ")),
        };
        return Err(cx.err_hint(
            kind_node.pos,
            &join(path, "fault"),
            format!("unknown fault '{kind}'"),
            Some(hint),
        ));
    }
    if kind == "command" && !command_line {
        return Err(cx.err_hint(
            kind_node.pos,
            &join(path, "fault"),
            "a command fault runs a program: a workload file is not trusted to, only the command line is",
            Some("give it with --fault '{fault: command, at: 10s, for: 5s, run: \"...\", undo: \"...\"}'".into()),
        ));
    }
    let own = own_keys(&kind);
    let mut allowed: Vec<&str> = COMMON.to_vec();
    if !matches!(
        kind.as_str(),
        "pause" | "kill" | "restart" | "down" | "command"
    ) {
        allowed.extend_from_slice(NETWORK);
    }
    allowed.extend_from_slice(own);
    cx.check_keys(entries, &allowed, path)?;
    let at = cx.duration(required(cx, item, "at", path)?, &join(path, "at"))?;
    let length = match item.get("for") {
        Some(n) => cx.duration(n, &join(path, "for"))?,
        None => Duration::ZERO,
    };
    if length > MAX_FAULT_FOR {
        return Err(cx.err(
            item.get("for").map_or(item.pos, |n| n.pos),
            &join(path, "for"),
            "at most 24h",
        ));
    }
    if length.is_zero() && !matches!(kind.as_str(), "kill" | "restart" | "command") {
        return Err(cx.err(
            item.get("for").map_or(item.pos, |n| n.pos),
            &join(path, "for"),
            format!("a {kind} needs a `for:` longer than zero: how long it lasts"),
        ));
    }
    let action = action(cx, item, path, &kind)?;
    let fault = Fault {
        at,
        length,
        round: item
            .get("round")
            .map(|n| cx.int(n, &join(path, "round"), 1))
            .transpose()?
            .map(|r| u32::try_from(r).unwrap_or(u32::MAX)),
        target: item
            .get("target")
            .map(|n| cx.string(n, &join(path, "target")))
            .transpose()?,
        toxicity: match item.get("toxicity") {
            Some(n) => {
                let t = cx.number(n, &join(path, "toxicity"))?;
                if !(0.0..=1.0).contains(&t) {
                    return Err(cx.err(n.pos, &join(path, "toxicity"), "a share from 0 to 1"));
                }
                t
            }
            None => 1.0,
        },
        stream: stream(cx, item, path)?,
        origin: format!("{}:{}:{}", cx.file, item.pos.line, item.pos.column),
        text: String::new(),
        action,
    };
    check_in_run(cx, item, path, &fault, run, hold)?;
    Ok(Fault {
        text: describe(&fault),
        ..fault
    })
}

/// The window inside a measured round: a second after the warm-up, ending at least the
/// recovery's hold and a second before the round does, in a round the run has.
fn check_in_run(
    cx: &Cx,
    item: &Node,
    path: &str,
    f: &Fault,
    run: &RunSpec,
    hold: Duration,
) -> R<()> {
    let at_pos = item.get("at").map_or(item.pos, |n| n.pos);
    // A measured second before it, to hold it against.
    let first = run.warmup + Duration::from_secs(1);
    if f.at < first {
        return Err(cx.err(
            at_pos,
            &join(path, "at"),
            format!(
                "begins {}: a window needs a measured second before it, after the warm-up (the round's first {}), to be held against; begin it at {} or later",
                match f.at < run.warmup {
                    true => "in the warm-up",
                    false => "too soon after the warm-up",
                },
                secs(run.warmup),
                secs(first)
            ),
        ));
    }
    // The hold, and a second in which recovery may begin.
    if let Stop::Duration(d) = run.stop
        && f.until() + hold + Duration::from_secs(1) > d
    {
        return Err(cx.err(
            at_pos,
            &join(path, "at"),
            format!(
                "its window {}..{} does not end inside the round ({}) with the recovery's hold ({}) and a second to spare: the seconds after it are what its recovery is judged on",
                secs(f.at),
                secs(f.until()),
                secs(d),
                secs(hold)
            ),
        ));
    }
    if let (Some(r), Some(n)) = (f.round, item.get("round"))
        && r > run.rounds
    {
        return Err(cx.err(
            n.pos,
            &join(path, "round"),
            format!("the run has {} measured round(s)", run.rounds),
        ));
    }
    Ok(())
}
