//! One entry of `users:`: its name, protocol, population (count, arrival, ramp, pacing),
//! think time, connection policy, parameters and probability table, turned into a
//! [`UserClass`] with typed operations.

use std::time::Duration;

use super::behaviour;
use super::cx::Cx;
use super::http::{HTTP_OP_KEYS, resolve_http};
use super::{R, connection, join, required};
use crate::workload::chain::Chain;
use crate::workload::dist::{Dist, Unit};
use crate::workload::error::{Found, did_you_mean};
use crate::workload::protocols::{self, ParamDef, ParamKind, Protocol};
use crate::workload::template::{BUILTIN_VARS, Template};
use crate::workload::units;
use crate::workload::yaml::{Key, Node, Pos, Value};
use crate::workload::{
    Arrival, ArrivalProcess, Body, ClassKind, Connection, HttpRequest, HttpStep, MAX_STEPS,
    Operation, ParamValue, Params, Pool, Stage, UserClass, WhenFull,
};
use crate::workload::{MAX_PREFILL, MAX_RETURNING, Prefill};

/// The keys a class may have, each named once: the list of them that unknown keys are
/// checked against, and a [`ClassKeys`] with a field per key, looked up once, that every
/// reader below takes its key from.
macro_rules! class_keys {
    ($($key:ident),* $(,)?) => {
        pub(super) const CLASS_KEYS: &[&str] = &[$(stringify!($key)),*];

        /// A class's node and its entries by key (`None`: not given).
        pub(super) struct ClassKeys<'n> {
            /// The class's own node, for the position of a message about a missing key.
            pub(super) node: &'n Node,
            $(pub(super) $key: Option<&'n Node>,)*
        }

        impl<'n> ClassKeys<'n> {
            pub(super) fn of(node: &'n Node) -> Self {
                ClassKeys { node, $($key: node.get(stringify!($key)),)* }
            }
        }
    };
}

class_keys!(
    class,
    protocol,
    count,
    arrival,
    ramp,
    pacing,
    iterations,
    think,
    connection,
    tls_resumption,
    auth,
    cleanup,
    mix,
    ops,
    behaviours,
    session,
    params,
    user_agent,
    prefill,
);

pub(super) const ARRIVAL_KEYS: &[&str] = &[
    "rate",
    "process",
    "max_concurrency",
    "when_full",
    "returning",
];

pub(super) const OP_KEYS: &[&str] = &["weight", "params", "expect"];

pub(super) fn resolve_class(
    cx: &Cx,
    node: &Node,
    index: usize,
    think: &Dist,
    conn: Connection,
) -> R<UserClass> {
    let fallback = format!("users[{index}]");
    let entries = cx.map(node, &fallback)?;
    let keys = ClassKeys::of(node);
    // Name the class in later messages once we know it.
    let name = class_name(cx, &keys, &fallback)?;
    let path = format!("users.{name}");
    // The parts that do not depend on each other are each checked whatever the others
    // came to, so that one pass names every mistake of the class.
    let mut found = Found::default();
    found.keep(cx.check_keys(entries, CLASS_KEYS, &path));
    let protocol = protocol_of(cx, &keys, &path)?;
    let parts = (
        found.keep(population(cx, &keys, &path)),
        found.keep(iterations_of(cx, &keys, &path)),
        found.keep(think_of(cx, &keys, &path, think)),
        found.keep(connection_of(cx, &keys, &path, conn)),
        found.keep(tls_resumption_of(cx, &keys, &path)),
        found.keep(params_of(cx, &keys, &path, protocol)),
        found.keep(resolve_table(cx, &keys, &path, protocol)),
    );
    if let Some(e) = found.into_error() {
        return Err(e);
    }
    let (
        Some(population),
        Some(iterations),
        Some(think),
        Some(connection),
        Some(tls_resumption),
        Some(params),
        Some(table),
    ) = parts
    else {
        return Err(cx.err(keys.node.pos, &path, "the class could not be read"));
    };
    let Population {
        count,
        arrival,
        ramp,
        pacing,
    } = population;
    let keys = &keys;
    let Table {
        mut ops,
        op_params,
        requests,
        captures,
        pools,
        pos,
        path: mix_path,
    } = table;
    let chain = chain_of(
        cx,
        keys,
        (&path, &mix_path, pos),
        &mut ops,
        (&think, &pools, arrival.is_some()),
    )?;
    let (labels, kind) = kind_of(
        cx,
        keys,
        (&path, &mix_path, pos),
        protocol,
        (&ops, &op_params, &params),
        (requests, &pools),
    )?;
    Ok(UserClass {
        name,
        protocol,
        count,
        arrival,
        ramp,
        pacing,
        iterations,
        think,
        connection,
        tls_resumption,
        // Filled in by the caller, which knows the workload's defaults and its accounts.
        user_agent: String::new(),
        auth: None,
        ops,
        labels,
        chain,
        kind,
        captures,
    })
}

/// The placeholders a `user_agent:` may hold.
const AGENT_VARS: [&str; 4] = ["version", "run_id", "class", "vu"];
/// The longest `user_agent:` (servers refuse long header lines).
const MAX_AGENT: usize = 512;

/// `user_agent:` (the workload's or a class's): printable ASCII, as a header value must
/// be, at most [`MAX_AGENT`] bytes, with no placeholder but [`AGENT_VARS`].
pub(super) fn user_agent(cx: &Cx, n: &Node, path: &str) -> R<String> {
    let s = cx.string(n, path)?;
    if s.is_empty() || s.len() > MAX_AGENT || !s.bytes().all(|b| (0x20..0x7f).contains(&b)) {
        return Err(cx.err(
            n.pos,
            path,
            format!("a User-Agent is 1 to {MAX_AGENT} printable ASCII characters"),
        ));
    }
    let mut rest = s.as_str();
    while let Some(open) = rest.find('{') {
        let after = &rest[open + 1..];
        let Some(close) = after.find('}') else {
            return Err(cx.err(n.pos, path, "a '{' with no '}'"));
        };
        let var = &after[..close];
        if !AGENT_VARS.contains(&var) {
            return Err(cx.err_hint(
                n.pos,
                path,
                format!("unknown placeholder {{{var}}}"),
                Some(format!(
                    "a User-Agent may hold {{{}}}",
                    AGENT_VARS.join("}, {")
                )),
            ));
        }
        rest = &after[close + 1..];
    }
    Ok(s)
}

/// `iterations:`, each user's (or each session's) number of operations, at least 1.
fn iterations_of(cx: &Cx, keys: &ClassKeys<'_>, path: &str) -> R<Option<u64>> {
    keys.iterations
        .map(|n| cx.int(n, &join(path, "iterations"), 1).map(|v| v as u64))
        .transpose()
}

/// `think:`, the class's own think time, or the workload's.
fn think_of(cx: &Cx, keys: &ClassKeys<'_>, path: &str, workload: &Dist) -> R<Dist> {
    match keys.think {
        Some(n) => cx.dist(n, &join(path, "think"), Unit::Duration),
        None => Ok(workload.clone()),
    }
}

/// `connection:`, the class's own connection policy, or the workload's.
fn connection_of(cx: &Cx, keys: &ClassKeys<'_>, path: &str, workload: Connection) -> R<Connection> {
    match keys.connection {
        Some(n) => connection(cx, n, &join(path, "connection")),
        None => Ok(workload),
    }
}

/// `tls_resumption:`, whether a new connection resumes an earlier TLS session (yes,
/// unless the class says no).
fn tls_resumption_of(cx: &Cx, keys: &ClassKeys<'_>, path: &str) -> R<bool> {
    Ok(keys
        .tls_resumption
        .map(|n| cx.boolean(n, &join(path, "tls_resumption")))
        .transpose()?
        .unwrap_or(true))
}

/// `params:`, the class's parameters, checked against its protocol's.
fn params_of(cx: &Cx, keys: &ClassKeys<'_>, path: &str, protocol: Protocol) -> R<Params> {
    match keys.params {
        Some(n) => resolve_params(cx, n, protocol.def().class_params, &join(path, "params")),
        None => Ok(Params::default()),
    }
}

/// The class's behaviour: its `behaviours:`, or its table as the chain of one; a
/// behaviour's implied mix becomes its operations' probabilities.
fn chain_of(
    cx: &Cx,
    keys: &ClassKeys<'_>,
    (path, mix_path, pos): (&str, &str, Pos),
    ops: &mut [Operation],
    (think, pools, open): (&Dist, &[(String, Pos)], bool),
) -> R<Chain> {
    Ok(match keys.behaviours {
        None => Chain::of_mix(&ops.iter().map(|o| o.weight).collect::<Vec<_>>(), think)
            .map_err(|m| cx.err(pos, mix_path, m))?,
        Some(bnode) => {
            if open && let Some(n) = keys.iterations {
                return Err(cx.err_hint(
                    n.pos,
                    &format!("{path}.iterations"),
                    "an arrival's session runs until it exits; iterations do not apply",
                    Some("bound a session with session.max_ops".into()),
                ));
            }
            let chain = behaviour::resolve_chain(
                cx,
                bnode,
                keys.session,
                &behaviour::ChainCx {
                    ops,
                    think,
                    pools,
                    open,
                    path,
                },
            )?;
            let shares = behaviour::implied_mix(&chain, ops.len());
            for (op, share) in ops.iter_mut().zip(shares) {
                op.probability = share;
            }
            chain
        }
    })
}

/// The class's labels (its operations', then its protocol's and its steps') and its
/// typed kind.
fn kind_of(
    cx: &Cx,
    keys: &ClassKeys<'_>,
    (path, mix_path, pos): (&str, &str, Pos),
    protocol: Protocol,
    (ops, op_params, params): (&[Operation], &[Params], &Params),
    (requests, pools): (Vec<HttpRequest>, &[(String, Pos)]),
) -> R<(Vec<String>, ClassKind)> {
    let mut labels: Vec<String> = ops.iter().map(|o| o.name.clone()).collect();
    let named: Vec<(&str, &Params)> = ops.iter().map(|o| o.name.as_str()).zip(op_params).collect();
    let kind = match protocols::build_class(protocol, &named, params, &mut labels) {
        Ok(ClassKind::Http { .. }) => {
            // Each step is reported under `operation.step`, after the table's labels.
            let mut requests = requests;
            for (op, h) in ops.iter().zip(requests.iter_mut()) {
                for st in &mut h.steps {
                    st.label = labels.len();
                    labels.push(format!("{}.{}", op.name, st.name));
                }
            }
            ClassKind::Http {
                pools: resolve_cleanup(cx, keys, path, pools)?,
                prefill: resolve_prefill(cx, keys, path, ops, &requests)?,
                requests,
            }
        }
        Ok(_) if keys.prefill.is_some() => {
            let n = keys.prefill.map_or(pos, |n| n.pos);
            return Err(cx.err_hint(
                n,
                &join(path, "prefill"),
                "prefill runs operations of an http class",
                Some(
                    "a CalDAV class fills its calendars with params.initial_events, an Atom class with params.initial_items"
                        .into(),
                ),
            ));
        }
        Ok(k) => k,
        // A class parameter's mistake is shown where the parameters are.
        Err(m) if m.starts_with("params.") => {
            let at = keys.params.map_or(pos, |n| n.pos);
            return Err(cx.err(at, &join(path, "params"), m));
        }
        Err(m) => return Err(cx.err(pos, mix_path, m)),
    };
    // Shares, not weights: a class with behaviours picks by its chain's implied mix.
    let weights: Vec<f64> = ops.iter().map(|o| o.probability).collect();
    if let Some(m) = kind.nothing_to_act_on(&weights) {
        return Err(cx.err(pos, mix_path, m));
    }
    Ok((labels, kind))
}

/// The class name: letters, digits, '_' or '-'.
fn class_name(cx: &Cx, keys: &ClassKeys<'_>, fallback: &str) -> R<String> {
    let name = match keys.class {
        Some(n) => {
            let s = cx.string(n, &format!("{fallback}.class"))?;
            if s.is_empty()
                || !s
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
            {
                return Err(cx.err(
                    n.pos,
                    &format!("{fallback}.class"),
                    format!("class name '{s}' must be letters, digits, '_' or '-'"),
                ));
            }
            s
        }
        None => {
            return Err(cx.err(
                keys.node.pos,
                fallback,
                "missing required key 'class' (the class name)",
            ));
        }
    };
    Ok(name)
}

fn protocol_of(cx: &Cx, keys: &ClassKeys<'_>, path: &str) -> R<Protocol> {
    let proto_node = keys
        .protocol
        .ok_or_else(|| cx.err(keys.node.pos, path, "missing required key 'protocol'"))?;
    let proto_name = cx.string(proto_node, &format!("{path}.protocol"))?;
    let protocol = Protocol::from_name(&proto_name).ok_or_else(|| {
        let names: Vec<&str> = Protocol::ALL.iter().map(|p| p.name()).collect();
        cx.err_hint(
            proto_node.pos,
            &format!("{path}.protocol"),
            format!("unknown protocol '{proto_name}'"),
            Some(match did_you_mean(&proto_name, names.iter().copied()) {
                Some(s) => format!("did you mean '{s}'?"),
                None => format!("known protocols: {}", names.join(", ")),
            }),
        )
    })?;
    Ok(protocol)
}

/// The catalog entry of an operation named in a protocol class's table (`None` for an
/// `http` class, whose operations the workload defines).
fn op_def(
    cx: &Cx,
    k: &Key,
    op_path: &str,
    protocol: Protocol,
) -> R<Option<&'static super::super::protocols::OpDef>> {
    let def = protocol.def();
    if protocol == Protocol::Http {
        if !k
            .name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
            || k.name.is_empty()
        {
            return Err(cx.err(
                k.pos,
                op_path,
                "operation names are letters, digits, '_' or '-'",
            ));
        }
        Ok(None)
    } else {
        let names: Vec<&str> = def.ops.iter().map(|o| o.name).collect();
        def.op(&k.name)
            .ok_or_else(|| {
                cx.err_hint(
                    k.pos,
                    op_path,
                    format!(
                        "unknown operation '{}' for protocol {}",
                        k.name,
                        protocol.name()
                    ),
                    Some(match did_you_mean(&k.name, names.iter().copied()) {
                        Some(s) => format!("did you mean '{s}'?"),
                        None => format!("{} operations: {}", protocol.name(), names.join(", ")),
                    }),
                )
            })
            .map(Some)
    }
}

/// A capture that no operation reads is harmless; a variable nobody captures is a typo.
fn check_captures(
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
fn parts(h: &HttpRequest) -> Vec<&HttpRequest> {
    if h.steps.is_empty() {
        vec![h]
    } else {
        h.steps.iter().map(|s| &s.request).collect()
    }
}

/// Where a class's templates register their variables and pools.
struct Sites<'a> {
    captures: &'a mut Vec<String>,
    capture_sites: &'a mut Vec<(String, Pos)>,
    pools: &'a mut Vec<(String, Pos)>,
}

const STEP_KEYS: &[&str] = &[
    "name", "method", "path", "headers", "body", "expect", "capture", "remember", "pick", "forget",
];

/// `steps:` of an http operation: a list of named requests (at most [`MAX_STEPS`]).
/// Labels are given later, once the class's labels are known.
fn resolve_steps(cx: &Cx, node: &Node, path: &str, sites: &mut Sites<'_>) -> R<HttpRequest> {
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
fn check_pools(
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
fn resolve_prefill(
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
fn resolve_cleanup(
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
fn reads(requests: &[HttpRequest]) -> (Vec<Vec<usize>>, Vec<Vec<usize>>) {
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
fn check_sendable(
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

/// Who the class's users are and when they run.
struct Population {
    /// Users of a closed class (0 for an open class).
    count: u32,
    arrival: Option<Arrival>,
    ramp: Vec<Stage>,
    pacing: Option<Duration>,
}

fn population(cx: &Cx, keys: &ClassKeys<'_>, path: &str) -> R<Population> {
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

/// A class's probability table, checked: its rows, each row's parameters (still by name,
/// for [`protocols::build_class`]), the requests of an `http` class, captured variable names and
/// the sampler.
struct Table {
    ops: Vec<Operation>,
    op_params: Vec<Params>,
    requests: Vec<HttpRequest>,
    captures: Vec<String>,
    /// http pools, by name, with where each was first named.
    pools: Vec<(String, Pos)>,
    /// Where `mix:` (or `ops:`) is, and its key path, for later messages.
    pos: Pos,
    path: String,
}

/// Where the class's operations are: `mix:` for a class without behaviours (`weighted`),
/// `ops:` for one with them; with its key path. The other key is refused.
fn table_node<'n>(cx: &Cx, keys: &ClassKeys<'n>, path: &str) -> R<(&'n Node, String, bool)> {
    // A class with behaviours defines its operations in `ops:` (no weights: its rows
    // have them); one without picks from its `mix:` table.
    let weighted = keys.behaviours.is_none();
    let (key, other) = if weighted {
        ("mix", "ops")
    } else {
        ("ops", "mix")
    };
    let (table, misplaced) = if weighted {
        (keys.mix, keys.ops)
    } else {
        (keys.ops, keys.mix)
    };
    if let Some(n) = misplaced {
        let message = if weighted {
            "'ops:' defines the operations of 'behaviours:'; a class without behaviours picks from 'mix:'"
        } else {
            "a class with 'behaviours:' defines its operations in 'ops:', not 'mix:'"
        };
        return Err(cx.err(n.pos, &format!("{path}.{other}"), message));
    }
    let mix = table
        .ok_or_else(|| cx.err(keys.node.pos, path, format!("missing required key '{key}'")))?;
    Ok((mix, format!("{path}.{key}"), weighted))
}

fn resolve_table(cx: &Cx, keys: &ClassKeys<'_>, path: &str, protocol: Protocol) -> R<Table> {
    let (mix, mix_path, weighted) = table_node(cx, keys, path)?;
    let mix_entries = mix_entries(cx, mix, &mix_path)?;
    let mut captures: Vec<String> = Vec::new();
    let mut ops: Vec<Operation> = Vec::new();
    let mut capture_sites: Vec<(String, Pos)> = Vec::new();
    let mut requests: Vec<HttpRequest> = Vec::new();
    let mut pools: Vec<(String, Pos)> = Vec::new();
    let mut op_params: Vec<Params> = Vec::new();
    let mut op_pos: Vec<Pos> = Vec::new();
    // Each entry is checked whatever the others came to: one pass names them all.
    let mut found = Found::default();
    for (i, (k, v)) in mix_entries.iter().enumerate() {
        let op_path = join(&mix_path, &k.name);
        if mix_entries[..i].iter().any(|(e, _)| e.name == k.name) {
            found.note(cx.err(
                k.pos,
                &op_path,
                format!("operation '{}' appears twice", k.name),
            ));
            continue;
        }
        let mut sites = Sites {
            captures: &mut captures,
            capture_sites: &mut capture_sites,
            pools: &mut pools,
        };
        if !weighted && behaviour::RESERVED.contains(&k.name.as_str()) {
            found.note(cx.err(
                k.pos,
                &op_path,
                format!(
                    "'{}' names something else in a behaviour's rows; call the operation otherwise",
                    k.name
                ),
            ));
            continue;
        }
        let Some((op, params, request)) = found.keep(resolve_entry(
            cx,
            (k, v),
            &op_path,
            protocol,
            &mut sites,
            weighted,
        )) else {
            continue;
        };
        requests.extend(request);
        ops.push(op);
        op_params.push(params);
        op_pos.push(k.pos);
    }
    if let Some(e) = found.into_error() {
        return Err(e);
    }
    let weights: Vec<f64> = ops.iter().map(|o| o.weight).collect();
    let Some(shares) = crate::workload::chain::shares(&weights) else {
        return Err(cx.err_hint(
            mix.pos,
            &mix_path,
            "all weights are zero: no operation could ever be picked",
            Some("give at least one operation a positive weight".into()),
        ));
    };
    for (op, share) in ops.iter_mut().zip(shares) {
        op.probability = share;
    }
    check_pools(cx, &requests, &pools, &mix_path)?;
    check_captures(cx, &requests, &captures, &capture_sites, &mix_path)?;
    check_sendable(
        cx,
        &ops,
        &requests,
        &captures,
        pools.len(),
        &op_pos,
        &mix_path,
    )?;
    Ok(Table {
        ops,
        op_params,
        requests,
        captures,
        pools,
        pos: mix.pos,
        path: mix_path,
    })
}

/// The class's `mix:` (or `ops:`), a mapping with at least one operation.
fn mix_entries<'n>(cx: &Cx, mix: &'n Node, mix_path: &str) -> R<&'n [(Key, Node)]> {
    let mix_entries = match &mix.value {
        Value::Map(e) => e,
        Value::Null => return Err(cx.err(mix.pos, mix_path, "the operation table is empty")),
        other => {
            return Err(cx.err(
                mix.pos,
                mix_path,
                format!(
                    "expected a mapping of operation: weight, found {}",
                    other.kind()
                ),
            ));
        }
    };
    if mix_entries.is_empty() {
        return Err(cx.err(mix.pos, mix_path, "the operation table is empty"));
    }
    Ok(mix_entries)
}

/// One row of a table: the operation with its weight and expected statuses, its
/// parameters checked against its protocol's schema, and for `http` its request.
fn resolve_entry(
    cx: &Cx,
    (k, v): (&Key, &Node),
    op_path: &str,
    protocol: Protocol,
    sites: &mut Sites<'_>,
    weighted: bool,
) -> R<(Operation, Params, Option<HttpRequest>)> {
    let mut request = None;
    let op_def = op_def(cx, k, op_path, protocol)?;
    let mut op = Operation {
        name: k.name.clone(),
        weight: 0.0,
        probability: 0.0,
        expect: None,
    };
    let mut params = Params::default();
    let weight_node = match &v.value {
        Value::Map(e) => {
            let allowed = if protocol == Protocol::Http {
                HTTP_OP_KEYS
            } else {
                OP_KEYS
            };
            let allowed = if v.get("steps").is_some() {
                &["weight", "steps"][..]
            } else {
                allowed
            };
            // In `ops:` the weights are the rows'.
            let allowed: Vec<&str> = allowed
                .iter()
                .copied()
                .filter(|k| weighted || *k != "weight")
                .collect();
            cx.check_keys(e, &allowed, op_path)?;
            if let Some(p) = v.get("params") {
                let defs = op_def.map(|d| d.params).unwrap_or(&[]);
                params = resolve_params(cx, p, defs, &join(op_path, "params"))?;
            }
            if let Some(x) = v.get("expect") {
                op.expect = Some(resolve_expect(cx, x, &join(op_path, "expect"))?);
            }
            if protocol == Protocol::Http {
                request = Some(match v.get("steps") {
                    Some(steps) => resolve_steps(cx, steps, &join(op_path, "steps"), sites)?,
                    None => resolve_http(
                        cx,
                        v,
                        op_path,
                        sites.captures,
                        sites.capture_sites,
                        sites.pools,
                    )?,
                });
            }
            if !weighted {
                op.weight = 1.0;
                return Ok((op, params, request));
            }
            required(cx, v, "weight", op_path)?
        }
        Value::Null if !weighted && protocol != Protocol::Http => {
            op.weight = 1.0;
            return Ok((op, params, request));
        }
        _ => {
            if protocol == Protocol::Http {
                return Err(cx.err_hint(
                    v.pos,
                    op_path,
                    "an http operation needs a request, not only a weight",
                    Some("write e.g. { weight: 1, method: GET, path: \"/status\" }".into()),
                ));
            }
            v
        }
    };
    let w = cx.number(weight_node, &join(op_path, "weight"))?;
    if w < 0.0 {
        return Err(cx.err(
            weight_node.pos,
            op_path,
            format!("weight must not be negative, got {w}"),
        ));
    }
    op.weight = w;
    Ok((op, params, request))
}

/// A rate of arrivals, within what one process can start.
fn arrival_rate(text: &str) -> Result<f64, String> {
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

pub(super) fn resolve_params(cx: &Cx, node: &Node, defs: &[ParamDef], path: &str) -> R<Params> {
    let entries = cx.map(node, path)?;
    let allowed: Vec<&str> = defs.iter().map(|d| d.name).collect();
    if allowed.is_empty() && !entries.is_empty() {
        let (k, _) = &entries[0];
        return Err(cx.err(
            k.pos,
            &join(path, &k.name),
            format!("unknown parameter '{}': this takes no parameters", k.name),
        ));
    }
    cx.check_keys(entries, &allowed, path)?;
    let mut out = Vec::new();
    for (k, v) in entries {
        let Some(def) = defs.iter().find(|d| d.name == k.name) else {
            continue;
        };
        let kp = join(path, &k.name);
        let value = match def.kind {
            ParamKind::Probability => {
                let p = cx.number(v, &kp)?;
                if !(0.0..=1.0).contains(&p) {
                    return Err(cx.err(
                        v.pos,
                        &kp,
                        format!("a probability is between 0 and 1, got {p}"),
                    ));
                }
                ParamValue::Number(p)
            }
            ParamKind::Integer => ParamValue::Number(cx.int(v, &kp, 0)? as f64),
            ParamKind::Dist(unit) => ParamValue::Dist(cx.dist(v, &kp, unit)?),
            ParamKind::Text => ParamValue::Text(cx.string(v, &kp)?),
            ParamKind::Flag => ParamValue::Flag(cx.boolean(v, &kp)?),
            ParamKind::Template => ParamValue::Template(builtin_template(cx, v, &kp)?),
            ParamKind::Headers(reserved) => ParamValue::Headers(headers(cx, v, &kp, reserved)?),
            ParamKind::Choice(words) => {
                let w = cx.string(v, &kp)?;
                if !words.contains(&w.as_str()) {
                    return Err(cx.err_hint(
                        v.pos,
                        &kp,
                        format!("unknown value '{w}'"),
                        Some(format!("use one of: {}", words.join(", "))),
                    ));
                }
                ParamValue::Text(w)
            }
        };
        out.push((k.name.clone(), value));
    }
    Ok(Params(out))
}

/// Headers a message may carry.
const MAX_HEADERS: usize = 64;

/// `headers: { NAME: TEMPLATE, ... }`: names that a frame or a property table can carry
/// (printable ASCII, no ':'; not the protocol's own), at most `MAX_HEADERS`.
fn headers(cx: &Cx, node: &Node, path: &str, reserved: &[&str]) -> R<Vec<(String, Template)>> {
    let entries = cx.map(node, path)?;
    if entries.len() > MAX_HEADERS {
        return Err(cx.err(node.pos, path, format!("at most {MAX_HEADERS} headers")));
    }
    let mut out = Vec::new();
    for (k, v) in entries {
        let kp = join(path, &k.name);
        let fits = |c: char| c.is_ascii_graphic() && c != ':';
        if k.name.is_empty() || k.name.len() > 255 || !k.name.chars().all(fits) {
            return Err(cx.err(
                k.pos,
                &kp,
                "a header name is 1 to 255 printable ASCII characters, without ':'",
            ));
        }
        if reserved.contains(&k.name.to_ascii_lowercase().as_str()) {
            return Err(cx.err(
                k.pos,
                &kp,
                format!("'{}' is the driver's own header: it cannot be set", k.name),
            ));
        }
        out.push((k.name.clone(), builtin_template(cx, v, &kp)?));
    }
    Ok(out)
}

/// A template of built-in variables only: a parameter has no captures to draw on.
fn builtin_template(cx: &Cx, node: &Node, path: &str) -> R<Template> {
    let text = cx.string(node, path)?;
    let mut vars = Vec::new();
    let t =
        Template::parse_in(&text, &mut vars, cx.base_dir).map_err(|m| cx.err(node.pos, path, m))?;
    if let Some(v) = vars.first() {
        return Err(cx.err_hint(
            node.pos,
            path,
            format!("'{{{v}}}' is not a built-in variable"),
            Some(format!(
                "use {}",
                crate::workload::template::BUILTIN_VARS
                    .iter()
                    .map(|b| format!("{{{b}}}"))
                    .collect::<Vec<_>>()
                    .join(", ")
            )),
        ));
    }
    Ok(t)
}

pub(super) fn resolve_expect(cx: &Cx, node: &Node, path: &str) -> R<Vec<u16>> {
    let items: Vec<&Node> = match &node.value {
        Value::Seq(items) => items.iter().collect(),
        _ => vec![node],
    };
    if items.is_empty() {
        return Err(cx.err(node.pos, path, "expect needs at least one status code"));
    }
    items
        .into_iter()
        .map(|n| {
            let code = cx.int(n, path, 100)?;
            if code > 599 {
                return Err(cx.err(
                    n.pos,
                    path,
                    format!("{code} is not an HTTP status code (100-599)"),
                ));
            }
            Ok(code as u16)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::super::cx::Cx;
    use super::*;
    use crate::workload::{Connection, UserClass, WorkloadError, load_str, yaml};

    /// One key reader run on a class written as YAML: its value, or the message it gave.
    fn read<T>(class_yaml: &str, f: impl Fn(&Cx, &ClassKeys<'_>) -> R<T>) -> Result<T, String> {
        let cx = Cx {
            file: "w.yaml",
            lines: class_yaml.lines().collect(),
            base_dir: None,
        };
        let node = yaml::parse(class_yaml).expect("YAML");
        f(&cx, &ClassKeys::of(&node)).map_err(|e| e.to_string())
    }

    #[test]
    fn every_key_is_listed_once_and_looked_up_under_its_name() {
        let mut sorted = CLASS_KEYS.to_vec();
        sorted.sort_unstable();
        sorted.dedup();
        assert_eq!(sorted.len(), CLASS_KEYS.len());
        let node = yaml::parse("tls_resumption: false\nsession: { max_ops: 3 }\n").unwrap();
        let keys = ClassKeys::of(&node);
        assert!(keys.tls_resumption.is_some() && keys.session.is_some());
        assert!(keys.think.is_none() && keys.mix.is_none());
    }

    #[test]
    fn a_user_agent_is_printable_ascii_with_known_placeholders() {
        let agent = |yaml: &str| read(yaml, |cx, k| user_agent(cx, k.user_agent.unwrap(), "ua"));
        assert_eq!(
            agent("user_agent: \"probe/2 ({class}#{vu}; {run_id}; {version})\"\n"),
            Ok("probe/2 ({class}#{vu}; {run_id}; {version})".to_string())
        );
        let unknown = agent("user_agent: \"x {user}\"\n").unwrap_err();
        assert!(unknown.contains("unknown placeholder {user}"), "{unknown}");
        assert!(agent("user_agent: \"x {vu\"\n").is_err());
        assert!(agent("user_agent: \"caf\u{e9}\"\n").is_err(), "not ASCII");
        assert!(agent("user_agent: \"\"\n").is_err());
    }

    #[test]
    fn iterations_are_at_least_one_and_absent_when_not_given() {
        assert_eq!(
            read("iterations: 7\n", |cx, k| iterations_of(cx, k, "users.c")),
            Ok(Some(7))
        );
        assert_eq!(
            read("count: 1\n", |cx, k| iterations_of(cx, k, "users.c")),
            Ok(None)
        );
        let e = read("iterations: 0\n", |cx, k| iterations_of(cx, k, "users.c")).unwrap_err();
        assert!(e.contains("users.c.iterations"), "{e}");
    }

    #[test]
    fn a_class_think_time_overrides_the_workloads() {
        let workload = Dist::constant(2.0);
        let own = read("think: 5ms\n", |cx, k| {
            think_of(cx, k, "users.c", &workload)
        })
        .unwrap();
        assert_eq!(own.mean(), 5_000.0, "in microseconds");
        let inherited = read("count: 1\n", |cx, k| think_of(cx, k, "users.c", &workload));
        assert_eq!(inherited.map(|d| d.mean()), Ok(2.0));
        let e = read("think: soon\n", |cx, k| {
            think_of(cx, k, "users.c", &workload)
        })
        .unwrap_err();
        assert!(e.contains("users.c.think"), "{e}");
    }

    #[test]
    fn a_class_connection_policy_overrides_the_workloads() {
        let own = read("connection: per_request\n", |cx, k| {
            connection_of(cx, k, "users.c", Connection::KeepAlive)
        });
        assert!(matches!(own, Ok(Connection::PerRequest)));
        let inherited = read("count: 1\n", |cx, k| {
            connection_of(cx, k, "users.c", Connection::KeepAlive)
        });
        assert!(matches!(inherited, Ok(Connection::KeepAlive)));
        let e = read("connection: sometimes\n", |cx, k| {
            connection_of(cx, k, "users.c", Connection::KeepAlive)
        })
        .unwrap_err();
        assert!(e.contains("users.c.connection"), "{e}");
    }

    #[test]
    fn tls_sessions_are_resumed_unless_the_class_says_no() {
        assert_eq!(
            read("count: 1\n", |cx, k| tls_resumption_of(cx, k, "users.c")),
            Ok(true)
        );
        assert_eq!(
            read("tls_resumption: false\n", |cx, k| tls_resumption_of(
                cx, k, "users.c"
            )),
            Ok(false)
        );
        assert!(
            read("tls_resumption: 3\n", |cx, k| tls_resumption_of(
                cx, k, "users.c"
            ))
            .is_err()
        );
    }

    #[test]
    fn class_params_are_checked_against_the_protocols() {
        let ok = read("params: { subscribe: /queue/a }\n", |cx, k| {
            params_of(cx, k, "users.c", Protocol::Stomp)
        });
        assert!(ok.is_ok(), "{ok:?}");
        let none = read("count: 1\n", |cx, k| {
            params_of(cx, k, "users.c", Protocol::Stomp)
        });
        assert!(none.is_ok());
        let e = read("params: { nonsense: 1 }\n", |cx, k| {
            params_of(cx, k, "users.c", Protocol::Stomp)
        })
        .unwrap_err();
        assert!(e.contains("users.c.params"), "{e}");
    }

    /// One class of the generic http protocol, with `extra` keys of its own.
    fn class(extra: &str) -> Result<UserClass, String> {
        let yaml = format!(
            "users:\n  - class: c\n    protocol: http\n{extra}    mix: {{ g: {{ weight: 1, path: /x }} }}\n"
        );
        load_str("w.yaml", &yaml, &[], None)
            .map(|mut w| w.classes.remove(0))
            .map_err(|e| match e {
                WorkloadError::Invalid(d) => format!("{}: {}", d.key, d.message),
                other => other.to_string(),
            })
    }

    #[test]
    fn a_class_takes_its_own_connection_iterations_and_tls_resumption() {
        let c = class("    count: 2\n    connection: per_request\n    iterations: 7\n    tls_resumption: false\n").unwrap();
        assert_eq!(
            (c.count, c.iterations, c.tls_resumption),
            (2, Some(7), false)
        );
        assert!(matches!(c.connection, Connection::PerRequest));
        let d = class("    count: 1\n").unwrap();
        assert!(d.tls_resumption, "a new connection may resume by default");
        assert_eq!(d.iterations, None);
    }

    #[test]
    fn a_class_is_closed_or_open_never_both_nor_neither() {
        let both = class("    count: 1\n    arrival: { rate: 5/s }\n").unwrap_err();
        assert!(
            both.starts_with("users.c.arrival: give either 'count'"),
            "{both}"
        );
        let neither = class("").unwrap_err();
        assert!(
            neither.contains("missing required key 'count'"),
            "{neither}"
        );
        let open = class("    arrival: { rate: 5/s }\n").unwrap();
        assert_eq!(open.count, 0);
        assert!(open.arrival.is_some());
    }

    #[test]
    fn pacing_is_for_closed_classes_without_a_think_time() {
        assert!(
            class("    count: 1\n    pacing: 20ms\n")
                .unwrap()
                .pacing
                .is_some()
        );
        let open = class("    arrival: { rate: 5/s }\n    pacing: 20ms\n").unwrap_err();
        assert!(open.contains("pacing is for closed classes"), "{open}");
        let both = class("    count: 1\n    pacing: 20ms\n    think: 1s\n").unwrap_err();
        assert!(both.contains("either 'pacing' or 'think'"), "{both}");
        let zero = class("    count: 1\n    pacing: 0s\n").unwrap_err();
        assert!(zero.contains("longer than 0"), "{zero}");
    }

    #[test]
    fn a_class_name_is_letters_digits_underscores_and_dashes() {
        let yaml = "users:\n  - class: \"a b\"\n    protocol: http\n    count: 1\n    mix: { g: { weight: 1, path: /x } }\n";
        let e = load_str("w.yaml", yaml, &[], None).unwrap_err().to_string();
        assert!(
            e.contains("class name 'a b' must be letters, digits"),
            "{e}"
        );
    }
}
