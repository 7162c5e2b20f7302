//! An http class's requests as steps, and what they share: captures and the pools
//! they fill and read, prefill, cleanup, and the check that every request can be sent.

use super::cx::Cx;
use super::http::resolve_http;
use super::keys::ClassKeys;
use super::params::resolve_expect;
use super::{R, join, required};
use crate::workload::dist::Unit;
use crate::workload::error::did_you_mean;
use crate::workload::template::{BUILTIN_VARS, Template};
use crate::workload::yaml::{Node, Pos, Value};
use crate::workload::{Body, HttpRequest, HttpStep, MAX_STEPS, Operation, Pool};
use crate::workload::{MAX_PREFILL, Prefill};

/// A capture that no operation reads is harmless; a variable nobody captures is a typo.
pub(super) fn check_captures(
    cx: &Cx,
    requests: &[HttpRequest],
    captures: &[String],
    capture_sites: &[(String, Pos)],
    mix_path: &str,
) -> R<()> {
    let captured: Vec<usize> = requests
        .iter()
        .flat_map(parts)
        .flat_map(|h| {
            h.captures
                .iter()
                .map(|c| c.var)
                .chain(h.pick.as_ref().map(|p| p.var))
        })
        .collect();
    for (var, pos) in capture_sites {
        let idx = captures.iter().position(|c| c == var).unwrap_or(usize::MAX);
        if !captured.contains(&idx) {
            let mut known: Vec<&str> = BUILTIN_VARS.to_vec();
            known.extend(captures.iter().filter(|c| *c != var).map(String::as_str));
            return Err(cx.err_hint(
                *pos,
                mix_path,
                format!("variable {{{var}}} is neither built in nor captured by any operation of this class"),
                Some(match did_you_mean(var, known.iter().copied()) {
                    Some(s) => format!("did you mean {{{s}}}?"),
                    None => format!("built-in variables: {}", BUILTIN_VARS.join(", ")),
                }),
            ));
        }
    }
    Ok(())
}

/// The requests an operation sends: its steps, or itself.
pub(super) fn parts(h: &HttpRequest) -> Vec<&HttpRequest> {
    if h.steps.is_empty() {
        vec![h]
    } else {
        h.steps.iter().map(|s| &s.request).collect()
    }
}

/// Where a class's templates register their variables and pools.
pub(super) struct Sites<'a> {
    pub(super) captures: &'a mut Vec<String>,
    pub(super) capture_sites: &'a mut Vec<(String, Pos)>,
    pub(super) pools: &'a mut Vec<(String, Pos)>,
}

pub(super) const STEP_KEYS: &[&str] = &[
    "name", "method", "path", "headers", "body", "expect", "capture", "remember", "pick", "forget",
];

/// `steps:` of an http operation: a list of named requests (at most [`MAX_STEPS`]).
/// Labels are given later, once the class's labels are known.
pub(super) fn resolve_steps(
    cx: &Cx,
    node: &Node,
    path: &str,
    sites: &mut Sites<'_>,
) -> R<HttpRequest> {
    let Value::Seq(items) = &node.value else {
        return Err(cx.err(
            node.pos,
            path,
            format!("expected a list of steps, found {}", node.value.kind()),
        ));
    };
    if items.is_empty() || items.len() > MAX_STEPS {
        return Err(cx.err(
            node.pos,
            path,
            format!(
                "an operation has 1 to {MAX_STEPS} steps, found {}",
                items.len()
            ),
        ));
    }
    let mut steps: Vec<HttpStep> = Vec::new();
    for (i, item) in items.iter().enumerate() {
        let fallback = format!("{path}[{i}]");
        let entries = cx.map(item, &fallback)?;
        cx.check_keys(entries, STEP_KEYS, &fallback)?;
        let name_node = required(cx, item, "name", &fallback)?;
        let name = cx.string(name_node, &join(&fallback, "name"))?;
        if name.is_empty()
            || !name
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
        {
            return Err(cx.err(
                name_node.pos,
                &join(&fallback, "name"),
                "step names are letters, digits, '_' or '-'",
            ));
        }
        if steps.iter().any(|s| s.name == name) {
            return Err(cx.err(
                name_node.pos,
                &join(&fallback, "name"),
                format!("step '{name}' appears twice"),
            ));
        }
        let sp = format!("{path}.{name}");
        let expect = item
            .get("expect")
            .map(|x| resolve_expect(cx, x, &join(&sp, "expect")))
            .transpose()?;
        let request = resolve_http(
            cx,
            item,
            &sp,
            sites.captures,
            sites.capture_sites,
            sites.pools,
        )?;
        steps.push(HttpStep {
            name,
            label: usize::MAX,
            expect,
            request,
        });
    }
    Ok(HttpRequest {
        method: hyper::Method::GET,
        path: Template::literal("/"),
        headers: Vec::new(),
        body: Body::None,
        captures: Vec::new(),
        remember: None,
        pick: None,
        forget: false,
        steps,
    })
}

/// Every pool an operation picks from must be filled by some operation's `remember`.
pub(super) fn check_pools(
    cx: &Cx,
    requests: &[HttpRequest],
    pools: &[(String, Pos)],
    mix_path: &str,
) -> R<()> {
    for (i, (name, pos)) in pools.iter().enumerate() {
        if !requests
            .iter()
            .flat_map(parts)
            .any(|h| h.remember.as_ref().is_some_and(|r| r.pool == i))
        {
            return Err(cx.err_hint(
                *pos,
                mix_path,
                format!("no operation fills pool '{name}': nothing would ever be picked from it"),
                Some(format!(
                    "give the operation that creates things remember: {name}"
                )),
            ));
        }
    }
    Ok(())
}

/// `prefill: { OPERATION: COUNT }` of an http class: operations of its table that
/// remember what they make, each run COUNT times (a count or a distribution) in every
/// user's set-up.
pub(super) fn resolve_prefill(
    cx: &Cx,
    keys: &ClassKeys<'_>,
    path: &str,
    ops: &[Operation],
    requests: &[HttpRequest],
) -> R<Vec<Prefill>> {
    let Some(node) = keys.prefill else {
        return Ok(Vec::new());
    };
    let pp = join(path, "prefill");
    let mut out = Vec::new();
    for (k, v) in cx.map(node, &pp)? {
        let kp = join(&pp, &k.name);
        let Some(op) = ops.iter().position(|o| o.name == k.name) else {
            let names: Vec<&str> = ops.iter().map(|o| o.name.as_str()).collect();
            return Err(cx.err_hint(
                k.pos,
                &kp,
                format!("no operation '{}' in this class", k.name),
                Some(match did_you_mean(&k.name, names.iter().copied()) {
                    Some(s) => format!("did you mean '{s}'?"),
                    None => format!("operations of this class: {}", names.join(", ")),
                }),
            ));
        };
        let fills = requests
            .get(op)
            .is_some_and(|r| r.remember.is_some() && r.pick.is_none() && r.steps.is_empty());
        if !fills {
            return Err(cx.err_hint(
                k.pos,
                &kp,
                format!("'{}' fills no pool", k.name),
                Some("prefill runs an operation that remembers what it makes (remember: POOL) and picks nothing, so that later picks find it".into()),
            ));
        }
        let count = cx.dist(v, &kp, Unit::Count)?;
        if count.mean() > MAX_PREFILL as f64 {
            return Err(cx.err(v.pos, &kp, format!("at most {MAX_PREFILL} a user")));
        }
        out.push(Prefill {
            op,
            name: k.name.clone(),
            count,
        });
    }
    Ok(out)
}

/// `cleanup: { POOL: METHOD }` of an http class: what to send, at the end of each round,
/// to every entry its users still hold in a pool.
pub(super) fn resolve_cleanup(
    cx: &Cx,
    keys: &ClassKeys<'_>,
    path: &str,
    pools: &[(String, Pos)],
) -> R<Vec<Pool>> {
    let mut out: Vec<Pool> = pools
        .iter()
        .map(|(name, _)| Pool {
            name: name.clone(),
            cleanup: None,
        })
        .collect();
    let Some(c) = keys.cleanup else {
        return Ok(out);
    };
    let ck = join(path, "cleanup");
    for (k, v) in cx.map(c, &ck)? {
        let kp = join(&ck, &k.name);
        let Some(pool) = out.iter_mut().find(|p| p.name == k.name) else {
            let names: Vec<&str> = pools.iter().map(|(n, _)| n.as_str()).collect();
            return Err(cx.err_hint(
                k.pos,
                &kp,
                format!("no operation remembers into a pool '{}'", k.name),
                Some(if names.is_empty() {
                    "cleanup names pools that operations fill with remember: POOL".into()
                } else {
                    format!("pools of this class: {}", names.join(", "))
                }),
            ));
        };
        let m = cx.string(v, &kp)?;
        let method = hyper::Method::from_bytes(m.as_bytes())
            .ok()
            .filter(|_| !m.is_empty() && m.bytes().all(|b| b.is_ascii_uppercase()))
            .ok_or_else(|| {
                cx.err(
                    v.pos,
                    &kp,
                    format!("'{m}' is not an HTTP method, e.g. DELETE"),
                )
            })?;
        pool.cleanup = Some(method);
    }
    Ok(out)
}

/// What each operation reads: its templates' variables, except the one its own pick
/// fills; and the pools it picks from, which some sendable operation must fill. A step
/// may read what an earlier step of its own operation captured or picked, and pick from
/// a pool an earlier step filled.
pub(super) fn reads(requests: &[HttpRequest]) -> (Vec<Vec<usize>>, Vec<Vec<usize>>) {
    let mut outside_pools: Vec<Vec<usize>> = Vec::new();
    let uses: Vec<Vec<usize>> = requests
        .iter()
        .map(|op| {
            let mut v = Vec::new();
            let mut own: Vec<usize> = Vec::new();
            let mut filled_here: Vec<usize> = Vec::new();
            let mut needs_pools: Vec<usize> = Vec::new();
            for h in parts(op) {
                if let Some(p) = &h.pick {
                    if !filled_here.contains(&p.pool) {
                        needs_pools.push(p.pool);
                    }
                    own.push(p.var);
                }
                let mut u: Vec<usize> = h.path.vars_used().collect();
                for (_, t) in &h.headers {
                    u.extend(t.vars_used());
                }
                if let Body::Template(t) = &h.body {
                    u.extend(t.vars_used());
                }
                if let Some(r) = h.remember.as_ref().and_then(|r| r.value.as_ref()) {
                    u.extend(r.vars_used());
                }
                v.extend(u.into_iter().filter(|x| !own.contains(x)));
                own.extend(h.captures.iter().map(|c| c.var));
                if let Some(r) = &h.remember {
                    filled_here.push(r.pool);
                }
            }
            outside_pools.push(needs_pools);
            v
        })
        .collect();
    (uses, outside_pools)
}

/// Every operation that can be picked must be sendable some time: the variables it reads
/// must be captured by operations that can themselves be sent, starting from those that
/// read none. Two operations that each need the other's capture could never send
/// anything, and a run would only spin.
pub(super) fn check_sendable(
    cx: &Cx,
    ops: &[Operation],
    requests: &[HttpRequest],
    captures: &[String],
    pools: usize,
    op_pos: &[Pos],
    mix_path: &str,
) -> R<()> {
    let (uses, outside_pools) = reads(requests);
    let mut available = vec![false; captures.len()];
    let mut filled = vec![false; pools];
    let mut sendable = vec![false; requests.len()];
    loop {
        let mut changed = false;
        for (i, op) in requests.iter().enumerate() {
            let pool_ok = outside_pools[i].iter().all(|p| filled[*p]);
            if sendable[i]
                || ops[i].weight <= 0.0
                || !pool_ok
                || !uses[i].iter().all(|v| available[*v])
            {
                continue;
            }
            sendable[i] = true;
            changed = true;
            for h in parts(op) {
                for c in &h.captures {
                    available[c.var] = true;
                }
                if let Some(p) = &h.pick {
                    available[p.var] = true;
                }
                if let Some(r) = &h.remember {
                    filled[r.pool] = true;
                }
            }
        }
        if !changed {
            break;
        }
    }
    for (i, op) in ops.iter().enumerate() {
        if op.weight <= 0.0 || sendable.get(i).copied().unwrap_or(true) {
            continue;
        }
        let missing: Vec<String> = uses[i]
            .iter()
            .filter(|v| !available[**v])
            .map(|v| format!("{{{}}}", captures[*v]))
            .collect();
        return Err(cx.err_hint(
            op_pos[i],
            &join(mix_path, &op.name),
            format!(
                "operation '{}' can never be sent: {} is only captured by operations that need a capture first",
                op.name,
                missing.join(", ")
            ),
            Some("let an operation that reads no captured value capture it first".into()),
        ));
    }
    Ok(())
}
