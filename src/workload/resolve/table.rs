//! A class's operation table (`mix:` or `ops:`): each entry's weight, parameters and
//! expected statuses, checked against its protocol's catalog.

use super::behaviour;
use super::cx::Cx;
use super::http::{HTTP_OP_KEYS, resolve_http};
use super::keys::ClassKeys;
use super::params::{resolve_expect, resolve_params};
use super::steps::{Sites, check_captures, check_pools, check_sendable, resolve_steps};
use super::{R, join, required};
use crate::workload::error::{Found, did_you_mean};
use crate::workload::protocols::Protocol;
use crate::workload::yaml::{Key, Node, Pos, Value};
use crate::workload::{HttpRequest, Operation, Params};

pub(super) const OP_KEYS: &[&str] = &["weight", "params", "expect", "client_timeout"];

/// The catalog entry of an operation named in a protocol class's table (`None` for an
/// `http` class, whose operations the workload defines).
pub(super) fn op_def(
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

/// A class's probability table, checked: its rows, each row's parameters (still by name,
/// for [`protocols::build_class`]), the requests of an `http` class, captured variable names and
/// the sampler.
pub(super) struct Table {
    pub(super) ops: Vec<Operation>,
    pub(super) op_params: Vec<Params>,
    pub(super) requests: Vec<HttpRequest>,
    pub(super) captures: Vec<String>,
    /// http pools, by name, with where each was first named.
    pub(super) pools: Vec<(String, Pos)>,
    /// Where `mix:` (or `ops:`) is, and its key path, for later messages.
    pub(super) pos: Pos,
    pub(super) path: String,
}

/// Where the class's operations are: `mix:` for a class without behaviours (`weighted`),
/// `ops:` for one with them; with its key path. The other key is refused.
pub(super) fn table_node<'n>(
    cx: &Cx,
    keys: &ClassKeys<'n>,
    path: &str,
) -> R<(&'n Node, String, bool)> {
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

pub(super) fn resolve_table(
    cx: &Cx,
    keys: &ClassKeys<'_>,
    path: &str,
    protocol: Protocol,
) -> R<Table> {
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
            cx, k, v, &op_path, protocol, &mut sites, weighted,
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
pub(super) fn mix_entries<'n>(cx: &Cx, mix: &'n Node, mix_path: &str) -> R<&'n [(Key, Node)]> {
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
pub(super) fn resolve_entry(
    cx: &Cx,
    k: &Key,
    v: &Node,
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
        client_timeout: None,
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
            if let Some(x) = v.get("client_timeout") {
                op.client_timeout = Some(patience(cx, x, &join(op_path, "client_timeout"))?);
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

/// A `client_timeout:` (an operation's or a class's): how long a client waits for an
/// answer before it gives up, a duration above zero.
pub(super) fn patience(cx: &Cx, node: &Node, path: &str) -> R<std::time::Duration> {
    let d = cx.duration(node, path)?;
    if d.is_zero() {
        return Err(cx.err(
            node.pos,
            path,
            "a client_timeout is above zero (leave it out for no client timeout)",
        ));
    }
    Ok(d)
}
