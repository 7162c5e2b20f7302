//! A class's `behaviours:` (with `session:`), read into a [`Chain`] over the operations its
//! `ops:` block defines; and the chain of a `mix:` table. Every name a row gives is
//! checked against the class's operations; a row must add up to something positive; a
//! state a behaviour can reach must have a row; an open class's sessions must be able to
//! end.

use super::*;
use crate::workload::chain::{Behaviour, Chain, Guard, Row, Target, Transition};

pub(super) const BEHAVIOUR_KEYS: &[&str] = &["weight", "start", "think", "states"];
pub(super) const SESSION_KEYS: &[&str] = &["max_ops", "pause"];
const TRANSITION_KEYS: &[&str] = &["p", "think", "when"];
const GUARD_KEYS: &[&str] = &["pool", "invited", "synced"];

/// The most operations a class with behaviours may have: what the chain implies is
/// worked out with an n × n matrix (n³ to solve), and no real client has more states.
pub(super) const MAX_STATES: usize = 256;

/// Names a row may not use for an operation: they mean something else there.
pub(super) const RESERVED: &[&str] = &["exit", "think"];

/// What a class's chain is built from.
pub(super) struct ChainCx<'a> {
    pub ops: &'a [Operation],
    pub think: &'a Dist,
    pub pools: &'a [(String, Pos)],
    pub open: bool,
    pub path: &'a str,
}

/// The chain of a class with `behaviours:` (`bnode`) and, when given, `session:`.
pub(super) fn resolve_chain(
    cx: &Cx,
    bnode: &Node,
    session_node: Option<&Node>,
    c: &ChainCx<'_>,
) -> R<Chain> {
    let bpath = join(c.path, "behaviours");
    if c.ops.len() > MAX_STATES {
        return Err(cx.err(
            bnode.pos,
            &bpath,
            format!(
                "{} operations: a class with behaviours has at most {MAX_STATES}",
                c.ops.len()
            ),
        ));
    }
    let entries = cx.map(bnode, &bpath)?;
    if entries.is_empty() {
        return Err(cx.err(bnode.pos, &bpath, "no behaviours: the mapping is empty"));
    }
    let (max_ops, pause) = session(cx, session_node, c)?;
    let mut rows: Vec<Row> = Vec::new();
    let mut behaviours = Vec::new();
    let only = entries.len() == 1;
    for (k, v) in entries {
        let path = join(&bpath, &k.name);
        behaviours.push(behaviour(cx, k, v, &path, c, only, &mut rows)?);
    }
    let chain = Chain::new(behaviours, rows, max_ops, pause, false)
        .map_err(|m| cx.err(bnode.pos, &bpath, m))?;
    for (b, (k, _)) in entries.iter().enumerate() {
        if c.open && chain.max_ops.is_none() && !chain.can_exit(b, c.ops.len()) {
            return Err(cx.err_hint(
                k.pos,
                &join(&bpath, &k.name),
                "an arrival's session can never end: no path from the states it reaches leads to exit",
                Some("give some state an 'exit' transition, or set session.max_ops".into()),
            ));
        }
    }
    Ok(chain)
}

fn session(cx: &Cx, node: Option<&Node>, c: &ChainCx<'_>) -> R<(Option<u64>, Option<Dist>)> {
    let Some(s) = node else {
        return Ok((None, None));
    };
    let path = join(c.path, "session");
    cx.check_keys(cx.map(s, &path)?, SESSION_KEYS, &path)?;
    let max_ops = s
        .get("max_ops")
        .map(|n| cx.int(n, &join(&path, "max_ops"), 1).map(|v| v as u64))
        .transpose()?;
    let pause = s
        .get("pause")
        .map(|n| {
            if c.open {
                return Err(cx.err(
                    n.pos,
                    &join(&path, "pause"),
                    "a pause between sessions is for closed classes (count); an open class's sessions arrive on their own",
                ));
            }
            cx.dist(n, &join(&path, "pause"), Unit::Duration)
        })
        .transpose()?;
    Ok((max_ops, pause))
}

/// One behaviour: its weight (1 when it is the class's `only` one and gives none), start
/// row, think and state rows (added to `rows`).
fn behaviour(
    cx: &Cx,
    k: &Key,
    v: &Node,
    path: &str,
    c: &ChainCx<'_>,
    only: bool,
    rows: &mut Vec<Row>,
) -> R<Behaviour> {
    cx.check_keys(cx.map(v, path)?, BEHAVIOUR_KEYS, path)?;
    let weight = match (v.get("weight"), only) {
        (None, true) => 1.0,
        _ => {
            let weight_node = required(cx, v, "weight", path)?;
            let weight = cx.number(weight_node, &join(path, "weight"))?;
            if !(weight >= 0.0 && weight.is_finite()) {
                return Err(cx.err(
                    weight_node.pos,
                    &join(path, "weight"),
                    format!("weight must be a number ≥ 0, got {weight}"),
                ));
            }
            weight
        }
    };
    let think = match v.get("think") {
        Some(n) => cx.dist(n, &join(path, "think"), Unit::Duration)?,
        None => c.think.clone(),
    };
    let start_node = required(cx, v, "start", path)?;
    let start_path = join(path, "start");
    let start = match &start_node.value {
        Value::Map(_) => row(cx, start_node, &start_path, c, &think, false)?,
        _ => {
            let name = cx.string(start_node, &start_path)?;
            let op = op_index(cx, start_node.pos, &start_path, &name, c, false)?;
            Row::new(vec![transition(Target::Op(op), 1.0, think.clone(), None)])
                .map_err(|m| cx.err(start_node.pos, &start_path, m))?
        }
    };
    let start_index = rows.len();
    rows.push(start);
    // Each row with where it was written, to name it when it leads to a state with none.
    let mut written = vec![(start_node.pos, start_path, start_index)];
    let states_node = required(cx, v, "states", path)?;
    let states_path = join(path, "states");
    let mut states: Vec<Option<usize>> = vec![None; c.ops.len()];
    for (sk, sv) in cx.map(states_node, &states_path)? {
        let sp = join(&states_path, &sk.name);
        let op = op_index(cx, sk.pos, &sp, &sk.name, c, false)?;
        if states[op].is_some() {
            return Err(cx.err(sk.pos, &sp, format!("state '{}' appears twice", sk.name)));
        }
        let state_think = match sv.get("think") {
            Some(n) => cx.dist(n, &join(&sp, "think"), Unit::Duration)?,
            None => think.clone(),
        };
        let r = row(cx, sv, &sp, c, &state_think, true)?;
        states[op] = Some(rows.len());
        written.push((sk.pos, sp, rows.len()));
        rows.push(r);
    }
    // Every operation a row leads to must have a row of its own.
    for (pos, at, r) in written {
        for op in rows[r].to.iter().filter_map(|t| match t.to {
            Target::Op(op) => Some(op),
            Target::Exit => None,
        }) {
            if states[op].is_some() {
                continue;
            }
            let name = &c.ops[op].name;
            return Err(cx.err_hint(
                pos,
                &at,
                format!("'{name}' is reached here but has no row in states"),
                Some(format!(
                    "give it one, e.g. {name}: {{ exit: 1 }} to end the session there"
                )),
            ));
        }
    }
    Ok(Behaviour {
        name: k.name.clone(),
        weight,
        probability: 0.0,
        start: start_index,
        states,
    })
}

fn transition(to: Target, weight: f64, think: Dist, when: Option<Guard>) -> Transition {
    Transition {
        to,
        weight,
        probability: 0.0,
        think,
        when,
    }
}

/// A row: `target: weight` or `target: { p, think, when }` entries (and, in a state, its
/// `think`); `exit` only where `may_exit`.
fn row(cx: &Cx, node: &Node, path: &str, c: &ChainCx<'_>, think: &Dist, may_exit: bool) -> R<Row> {
    let entries = cx.map(node, path)?;
    let mut to = Vec::new();
    for (i, (k, v)) in entries.iter().enumerate() {
        let tp = join(path, &k.name);
        if let Some((first, _)) = entries[..i].iter().find(|(e, _)| e.name == k.name) {
            return Err(cx.err(
                k.pos,
                &tp,
                format!(
                    "'{}' appears twice (first on line {})",
                    k.name, first.pos.line
                ),
            ));
        }
        if k.name == "think" {
            continue;
        }
        let target = if k.name == "exit" {
            if !may_exit {
                return Err(cx.err(
                    k.pos,
                    &tp,
                    "a session cannot exit before its first operation",
                ));
            }
            Target::Exit
        } else {
            Target::Op(op_index(cx, k.pos, &tp, &k.name, c, true)?)
        };
        let (weight_node, t_think, when) = match &v.value {
            Value::Map(e) => {
                cx.check_keys(e, TRANSITION_KEYS, &tp)?;
                let t_think = v
                    .get("think")
                    .map(|n| cx.dist(n, &join(&tp, "think"), Unit::Duration))
                    .transpose()?;
                let when = v
                    .get("when")
                    .map(|n| guard(cx, n, &join(&tp, "when"), c))
                    .transpose()?;
                (required(cx, v, "p", &tp)?, t_think, when)
            }
            _ => (v, None, None),
        };
        let w = cx.number(weight_node, &tp)?;
        if !(w >= 0.0 && w.is_finite()) {
            return Err(cx.err(
                weight_node.pos,
                &tp,
                format!("a transition's weight must be a number ≥ 0, got {w}"),
            ));
        }
        to.push(transition(
            target,
            w,
            t_think.unwrap_or_else(|| think.clone()),
            when,
        ));
    }
    if to.is_empty() {
        return Err(cx.err_hint(
            node.pos,
            path,
            "the row leads nowhere",
            Some("give at least one operation or exit a weight".into()),
        ));
    }
    Row::new(to).map_err(|m| {
        cx.err_hint(
            node.pos,
            path,
            m,
            Some("give at least one transition a positive weight".into()),
        )
    })
}

fn guard(cx: &Cx, node: &Node, path: &str, c: &ChainCx<'_>) -> R<Guard> {
    cx.check_keys(cx.map(node, path)?, GUARD_KEYS, path)?;
    if let Some(n) = node.get("invited") {
        return invited(cx, n, &join(path, "invited"), c);
    }
    if let Some(n) = node.get("synced") {
        return synced(cx, n, &join(path, "synced"), c);
    }
    let n = required(cx, node, "pool", path)?;
    let name = cx.string(n, &join(path, "pool"))?;
    match c.pools.iter().position(|(p, _)| *p == name) {
        Some(index) => Ok(Guard::Pool { index, name }),
        None => {
            let hint = match did_you_mean(&name, c.pools.iter().map(|(p, _)| p.as_str())) {
                Some(s) => format!("did you mean '{s}'?"),
                None if c.pools.is_empty() => {
                    "no operation of this class remembers values into a pool".into()
                }
                None => format!(
                    "the class's pools: {}",
                    c.pools
                        .iter()
                        .map(|(p, _)| p.as_str())
                        .collect::<Vec<_>>()
                        .join(", ")
                ),
            };
            Err(cx.err_hint(
                n.pos,
                &join(path, "pool"),
                format!("no pool '{name}'"),
                Some(hint),
            ))
        }
    }
}

/// `invited: true`: the user has an invitation its inbox showed and it has not answered,
/// which only a class that reads its inbox can have.
fn invited(cx: &Cx, n: &Node, path: &str, c: &ChainCx<'_>) -> R<Guard> {
    if !matches!(n.value, Value::Bool(true)) {
        return Err(cx.err_hint(
            n.pos,
            path,
            "a guard holds when something is so",
            Some("write invited: true (or leave the guard out)".into()),
        ));
    }
    if !c.ops.iter().any(|o| o.name == "inbox") {
        return Err(cx.err_hint(
            n.pos,
            path,
            "this class never reads its inbox, so it never has an invitation to answer",
            Some("give the class an inbox operation".into()),
        ));
    }
    Ok(Guard::Invited)
}

/// `synced: true` or `false`: the user has synced one of its collections (it holds a
/// sync token), or not yet; only a class with a sync can tell.
fn synced(cx: &Cx, n: &Node, path: &str, c: &ChainCx<'_>) -> R<Guard> {
    let Value::Bool(b) = n.value else {
        return Err(cx.err_hint(
            n.pos,
            path,
            "synced is true or false",
            Some("write synced: false for a first sync, synced: true for the later ones".into()),
        ));
    };
    const SYNCS: [&str; 3] = ["initial_sync", "delta_sync", "sync_collection"];
    if !c.ops.iter().any(|o| SYNCS.contains(&o.name.as_str())) {
        return Err(cx.err_hint(
            n.pos,
            path,
            "this class never syncs, so it is never synced",
            Some("give the class initial_sync, delta_sync or sync_collection".into()),
        ));
    }
    Ok(Guard::Synced(b))
}

/// The index of operation `name` in the class's `ops:`.
fn op_index(
    cx: &Cx,
    pos: Pos,
    path: &str,
    name: &str,
    c: &ChainCx<'_>,
    exit_allowed: bool,
) -> R<usize> {
    if let Some(i) = c.ops.iter().position(|o| o.name == name) {
        return Ok(i);
    }
    let names = c.ops.iter().map(|o| o.name.as_str());
    let hint = match did_you_mean(name, names.clone()) {
        Some(s) => format!("did you mean '{s}'?"),
        None => format!(
            "the class's ops: {}{}",
            names.collect::<Vec<_>>().join(", "),
            if exit_allowed { ", or exit" } else { "" }
        ),
    };
    Err(cx.err_hint(
        pos,
        path,
        format!("no operation '{name}' in this class's ops"),
        Some(hint),
    ))
}

/// Each operation's share of what the chain sends (over its behaviours, by weight): the
/// expected visits per session, weighted by the behaviours' chances, over the expected
/// operations per session; for a chain whose sessions never end, the long-run shares.
/// What `validate` prints and the mix tests compare with.
pub(super) fn implied_mix(chain: &Chain, n_ops: usize) -> Vec<f64> {
    let mut mix = vec![0.0; n_ops];
    for (b, beh) in chain.behaviours.iter().enumerate() {
        for (m, v) in mix.iter_mut().zip(chain.expected(b, n_ops).visits) {
            *m += beh.probability * v;
        }
    }
    let total: f64 = mix.iter().sum();
    if total > 0.0 {
        mix.iter_mut().for_each(|m| *m /= total);
    }
    mix
}
