//! One entry of `users:`: its name, protocol, population (count, arrival, ramp, pacing),
//! think time, connection policy, parameters and probability table, turned into a
//! [`UserClass`] with typed operations.

use super::behaviour;
use super::cx::Cx;
use super::keys::{CLASS_KEYS, ClassKeys};
use super::params::resolve_params;
use super::population::{Population, population};
use super::steps::{resolve_cleanup, resolve_prefill};
use super::table::{Table, resolve_table};
use super::{R, connection, join};
use crate::workload::chain::Chain;
use crate::workload::dist::{Dist, Unit};
use crate::workload::error::{Found, did_you_mean};
use crate::workload::protocols::{self, BuildError, Protocol};
use crate::workload::yaml::Node;
use crate::workload::{ClassKind, Connection, HttpRequest, Params, UserClass};

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
        found.keep(client_timeout_of(cx, &keys, &path)),
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
        Some(client_timeout),
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
    let mut table = table;
    // An operation's own patience, else its class's.
    for op in &mut table.ops {
        op.client_timeout = op.client_timeout.or(client_timeout);
    }
    let chain = chain_of(cx, keys, &path, &mut table, &think, arrival.is_some())?;
    let requests = std::mem::take(&mut table.requests);
    let (labels, kind) = kind_of(cx, keys, &path, protocol, &table, &params, requests)?;
    let Table { ops, captures, .. } = table;
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

/// `client_timeout:`, the patience of the class's clients (`Some(None)`: none given).
fn client_timeout_of(cx: &Cx, keys: &ClassKeys<'_>, path: &str) -> R<Option<std::time::Duration>> {
    keys.client_timeout
        .map(|n| super::table::patience(cx, n, &join(path, "client_timeout")))
        .transpose()
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
    path: &str,
    table: &mut Table,
    think: &Dist,
    open: bool,
) -> R<Chain> {
    let (pos, mix_path, pools) = (table.pos, table.path.as_str(), table.pools.as_slice());
    let ops = table.ops.as_mut_slice();
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
    path: &str,
    protocol: Protocol,
    table: &Table,
    params: &Params,
    requests: Vec<HttpRequest>,
) -> R<(Vec<String>, ClassKind)> {
    let (pos, mix_path, pools) = (table.pos, table.path.as_str(), table.pools.as_slice());
    let (ops, op_params) = (table.ops.as_slice(), table.op_params.as_slice());
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
        Err(BuildError::Params(m)) => {
            // A parameter the class needs and has not: shown at the class.
            let at = keys.params.map_or(keys.node.pos, |n| n.pos);
            return Err(cx.err(at, &join(path, "params"), m));
        }
        Err(BuildError::Ops(m)) => return Err(cx.err(pos, mix_path, m)),
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
