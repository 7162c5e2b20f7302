//! Turn a positioned YAML tree into a [`Workload`], checking every key and value against
//! the workload schema and each protocol's schema, then building its typed operations
//! ([`super::protocols`]). The first mistake found is reported with its position, its key path
//! and, for near misses, a suggestion. One file per part of the schema: [`cx`] (typed
//! value readers), [`run`], [`class`], [`http`], [`thresholds`].

use std::path::Path;
use std::time::Duration;

use bytes::Bytes;
use sha2::{Digest, Sha256};

use super::dist::{Dist, DistSpec, Unit};
use super::error::{Diagnostic, Found, WorkloadError, did_you_mean};
use super::overrides::{self, Override};
use super::template::{BUILTIN_VARS, SecretRef, Template, read_secret};
use super::units;
use super::yaml::{self, Key, Node, Pos, Value};
use super::*;
use crate::secrets::Secret;

mod behaviour;
mod class;
mod cx;
mod fault_kinds;
mod faults;
mod http;
mod keys;
mod params;
mod population;
mod run;
mod steps;
mod table;
mod teams;
mod thresholds;

use class::*;
use cx::*;
pub(crate) use faults::resolve_fault_flag;
use keys::*;
use run::*;
use teams::resolve_teams;
use thresholds::*;

type R<T> = Result<T, WorkloadError>;

const TOP_KEYS: &[&str] = &[
    "name",
    "description",
    "target",
    "context",
    "run",
    "accounts",
    "auth",
    "monitor",
    "connection",
    "think",
    "users",
    "thresholds",
    "user_agent",
    "teams",
    "faults",
    "recovery",
];

fn required<'n>(cx: &Cx, node: &'n Node, name: &str, path: &str) -> R<&'n Node> {
    node.get(name)
        .ok_or_else(|| cx.err(node.pos, path, format!("missing required key '{name}'")))
}

fn join(path: &str, key: &str) -> String {
    if path.is_empty() {
        key.to_string()
    } else {
        format!("{path}.{key}")
    }
}

/// What a rule's `op` can name in a workload of these classes: its sums (`total`, or
/// `sent` and `received`), its classes and their operations.
pub(super) fn rule_names(classes: &[UserClass]) -> Vec<String> {
    Names::of(classes).all
}

pub(super) fn resolve(
    file: &str,
    text: &str,
    ovr: &[Override],
    base_dir: Option<&Path>,
) -> R<Workload> {
    let cx = Cx {
        file,
        lines: text.lines().collect(),
        base_dir,
    };
    let root = parse_root(&cx, text, ovr)?;
    // Each section is checked whatever the others came to, so that one pass lists every
    // mistake.
    let mut found = Found::default();
    let w = sections(&cx, &root, text, ovr, &mut found);
    match (w, found.into_error()) {
        (Some(w), None) => Ok(w),
        (_, Some(e)) => Err(e),
        (None, None) => Err(cx.err(
            Pos { line: 0, column: 0 },
            "",
            "the workload did not resolve",
        )),
    }
}

/// Every section of the file, each resolved whatever the others came to; `None` when
/// one of them has a mistake (noted in `found`).
fn sections(
    cx: &Cx,
    root: &Node,
    text: &str,
    ovr: &[Override],
    found: &mut Found,
) -> Option<Workload> {
    let name = match root.get("name") {
        Some(n) => found.keep(cx.string(n, "name")),
        None => Some(
            Path::new(cx.file)
                .file_stem()
                .map(|s| s.to_string_lossy().to_string())
                .unwrap_or_else(|| "workload".into()),
        ),
    };
    let description = found.keep(
        root.get("description")
            .map(|n| cx.string(n, "description"))
            .transpose(),
    );
    let run = found.keep(resolve_run(cx, root.get("run")));
    let recovery = found.keep(match root.get("recovery") {
        Some(n) => fault_kinds::resolve_recovery(cx, n),
        None => Ok(Default::default()),
    });
    // The timeline's windows are checked against the run's rounds and the recovery's
    // hold.
    let faults = match (root.get("faults"), &run, &recovery) {
        (None, _, _) => Some(Vec::new()),
        (Some(n), Some(r), Some(h)) => found.keep(faults::resolve_faults(cx, n, r, h.hold)),
        (Some(_), _, _) => None,
    };
    let accounts = found.keep(
        root.get("accounts")
            .map(|n| resolve_accounts(cx, n))
            .transpose(),
    );
    let classes = resolve_users(cx, root, accounts.as_ref().and_then(Option::as_ref), found);
    // Thresholds name classes: checked against them only when every class resolved.
    let thresholds = match (root.get("thresholds"), &classes) {
        (None, _) => Some(Vec::new()),
        (Some(n), Some(c)) => found.keep(resolve_thresholds(cx, n, c)),
        (Some(_), None) => None,
    };
    // Teams gather classes: checked against them only when every class resolved.
    let teams = match &classes {
        Some(c) => found.keep(resolve_teams(cx, root, c)),
        None => None,
    };
    let target = found.keep(resolve_target(cx, root));
    let context = found.keep(resolve_context(cx, root));
    let monitor_processes = found.keep(match root.get("monitor") {
        Some(m) => resolve_monitor(cx, m),
        None => Ok(Vec::new()),
    });
    // `per:` names operations: checked against them only when every class resolved.
    let monitor_metrics = match (
        root.get("monitor").and_then(|m| m.get("prometheus")),
        &classes,
    ) {
        (None, _) => Some(Vec::new()),
        (Some(p), Some(c)) => found.keep(resolve_prometheus(cx, p, c)),
        (Some(_), None) => None,
    };
    Some(Workload {
        name: name?,
        description: description?,
        file: cx.file.to_string(),
        source_text: text.to_string(),
        overrides: ovr.iter().map(Override::display).collect(),
        hash: mix_hash(root),
        target: target?,
        context: context?,
        run: run?,
        accounts: accounts?,
        classes: classes?,
        teams: teams?,
        thresholds: thresholds?,
        faults: faults?,
        recovery: recovery?,
        monitor_processes: monitor_processes?,
        monitor_metrics: monitor_metrics?,
    })
}

/// The YAML tree, `--set` overrides applied, its top-level keys known before and after.
fn parse_root(cx: &Cx, text: &str, ovr: &[Override]) -> R<Node> {
    let mut root = yaml::parse(text)
        .map_err(|e| cx.err(e.pos, "", format!("YAML syntax error: {}", e.message)))?;
    if matches!(root.value, Value::Null) {
        return Err(cx.err(
            root.pos,
            "",
            "the workload file is empty; it needs at least 'users'",
        ));
    }
    let top = cx.map(&root, "")?;
    cx.check_keys(top, TOP_KEYS, "")?;
    overrides::apply(&mut root, ovr)?;
    let top = cx.map(&root, "")?;
    cx.check_keys(top, TOP_KEYS, "")?;

    Ok(root)
}

/// `target:`, the embedded server (memory) when absent.
fn resolve_target(cx: &Cx, root: &Node) -> R<TargetSpec> {
    Ok(match root.get("target") {
        None => TargetSpec::Embedded {
            store: EmbeddedStore::Memory,
        },
        Some(n) if matches!(n.value, Value::Null) => {
            return Err(cx.err_hint(
                    n.pos,
                    "target",
                    "target is empty",
                    Some("write 'embedded', 'embedded:sqlite:PATH' or a URL such as http://127.0.0.1:8080, or remove the key".into()),
                ));
        }
        Some(n) => {
            TargetSpec::parse(&cx.string(n, "target")?).map_err(|m| cx.err(n.pos, "target", m))?
        }
    })
}

/// `context:`, the path prefix of the server's services (`/cosmo` when absent).
fn resolve_context(cx: &Cx, root: &Node) -> R<String> {
    Ok(match root.get("context") {
        None => "/cosmo".to_string(),
        // `context:` or `--set context=`: no prefix.
        Some(n) if matches!(n.value, Value::Null) => String::new(),
        Some(n) => {
            let c = cx.string(n, "context")?;
            if !c.is_empty() && !c.starts_with('/') {
                return Err(cx.err(
                    n.pos,
                    "context",
                    format!("'{c}' must start with '/' (or be empty)"),
                ));
            }
            c.trim_end_matches('/').to_string()
        }
    })
}

/// `users:`: every class, each with its own `auth:` or the file's, no name twice, and at
/// least one user in all.
/// The classes of `users:`, each checked whatever the others came to (their mistakes
/// go into `found`); `None` when one of them, or what they share, has a mistake.
fn resolve_users(
    cx: &Cx,
    root: &Node,
    accounts: Option<&Accounts>,
    found: &mut Found,
) -> Option<Vec<UserClass>> {
    match resolve_all_users(cx, root, accounts, found) {
        Ok(classes) => classes,
        Err(e) => {
            found.note(e);
            None
        }
    }
}

fn resolve_all_users(
    cx: &Cx,
    root: &Node,
    accounts: Option<&Accounts>,
    found: &mut Found,
) -> R<Option<Vec<UserClass>>> {
    // What the classes share, each checked apart; a mistake in it is noted and the
    // classes are still checked (with a stand-in), so that one pass names them all.
    let mut shared_ok = true;
    let connection = match root.get("connection") {
        None => Connection::KeepAlive,
        Some(n) => connection(cx, n, "connection").unwrap_or_else(|e| {
            found.note(e);
            shared_ok = false;
            Connection::KeepAlive
        }),
    };
    let think = match root.get("think") {
        None => Dist::constant(0.0),
        Some(n) => cx.dist(n, "think", Unit::Duration).unwrap_or_else(|e| {
            found.note(e);
            shared_ok = false;
            Dist::constant(0.0)
        }),
    };
    let users = root.get("users").ok_or_else(|| {
        cx.err_hint(
            Pos { line: 1, column: 1 },
            "users",
            "missing required key 'users'",
            Some("add a list of user classes, each with class, protocol, count and mix".into()),
        )
    })?;
    let Value::Seq(items) = &users.value else {
        return Err(cx.err(
            users.pos,
            "users",
            format!(
                "expected a list of user classes, found {}",
                users.value.kind()
            ),
        ));
    };
    if items.is_empty() {
        return Err(cx.err(users.pos, "users", "no user classes: the list is empty"));
    }
    let auth = root
        .get("auth")
        .map(|n| resolve_auth(cx, n, "auth", accounts))
        .transpose()?;
    let agent = match root.get("user_agent") {
        Some(n) => user_agent(cx, n, "user_agent")?,
        None => crate::workload::DEFAULT_USER_AGENT.to_string(),
    };
    let shared = Shared {
        think: &think,
        connection,
        auth: auth.as_ref(),
        agent: &agent,
        accounts,
    };
    let mut classes: Vec<UserClass> = Vec::new();
    let mut failed = 0usize;
    for (i, item) in items.iter().enumerate() {
        match one_class(cx, item, i, &shared, &classes) {
            Ok(c) => classes.push(c),
            Err(e) => {
                found.note(e);
                failed += 1;
            }
        }
    }
    if failed > 0 || !shared_ok {
        return Ok(None);
    }
    if classes
        .iter()
        .all(|c| c.arrival.is_none() && crate::workload::Workload::peak_users(c) == 0)
    {
        return Err(cx.err_hint(
            users.pos,
            "users",
            "no virtual users: every class has count 0",
            Some("give at least one class a count of 1 or more".into()),
        ));
    }
    Ok(Some(classes))
}

/// What every class of a file inherits unless it says otherwise.
struct Shared<'a> {
    think: &'a Dist,
    connection: Connection,
    auth: Option<&'a AuthSpec>,
    agent: &'a str,
    accounts: Option<&'a Accounts>,
}

/// Class `i` of `users:`, with what it inherits; `before` are the classes resolved so far
/// (a name may not come twice).
fn one_class(
    cx: &Cx,
    item: &Node,
    i: usize,
    shared: &Shared,
    before: &[UserClass],
) -> R<UserClass> {
    let mut c = resolve_class(cx, item, i, shared.think, shared.connection)?;
    let keys = ClassKeys::of(item);
    c.auth = match keys.auth {
        Some(n) => Some(resolve_auth(
            cx,
            n,
            &format!("users.{}.auth", c.name),
            shared.accounts,
        )?),
        None => shared.auth.cloned(),
    };
    c.user_agent = match keys.user_agent {
        Some(n) => user_agent(cx, n, &format!("users.{}.user_agent", c.name))?,
        None => shared.agent.to_string(),
    };
    if let Some(prev) = before.iter().find(|p| p.name == c.name) {
        let pos = keys.class.map_or(item.pos, |n| n.pos);
        return Err(cx.err(
            pos,
            &format!("users[{i}].class"),
            format!("class name '{}' is used twice", prev.name),
        ));
    }
    Ok(c)
}

fn connection(cx: &Cx, n: &Node, key: &str) -> R<Connection> {
    match cx.string(n, key)?.as_str() {
        "keep_alive" => Ok(Connection::KeepAlive),
        "per_request" => Ok(Connection::PerRequest),
        other => Err(cx.err_hint(
            n.pos,
            key,
            format!("unknown connection policy '{other}'"),
            Some(match did_you_mean(other, ["keep_alive", "per_request"]) {
                Some(s) => format!("did you mean '{s}'?"),
                None => "use keep_alive or per_request".into(),
            }),
        )),
    }
}

/// Hash everything that defines the mix (not `run` or `target`, which change between runs
/// that are still comparable).
fn mix_hash(root: &Node) -> String {
    let mut canon = String::new();
    if let Value::Map(entries) = &root.value {
        let mut sorted: Vec<&(Key, Node)> = entries
            .iter()
            .filter(|(k, _)| {
                !matches!(
                    k.name.as_str(),
                    "run" | "target" | "description" | "thresholds" | "faults" | "recovery"
                )
            })
            .collect();
        sorted.sort_by(|a, b| a.0.name.cmp(&b.0.name));
        for (k, v) in sorted {
            canon.push_str(&k.name);
            canon.push('=');
            canonical(v, &mut canon);
            canon.push(';');
        }
    }
    let digest = Sha256::digest(canon.as_bytes());
    digest.iter().map(|b| format!("{b:02x}")).collect()
}

fn canonical(node: &Node, out: &mut String) {
    match &node.value {
        Value::Null => out.push('~'),
        Value::Bool(b) => out.push_str(if *b { "true" } else { "false" }),
        Value::Int(i) => out.push_str(&i.to_string()),
        Value::Float(f) => out.push_str(&f.to_string()),
        Value::Str(s) => {
            out.push('"');
            out.push_str(&s.replace('"', "\\\""));
            out.push('"');
        }
        Value::Seq(items) => {
            out.push('[');
            for i in items {
                canonical(i, out);
                out.push(',');
            }
            out.push(']');
        }
        Value::Map(entries) => {
            let mut sorted: Vec<&(Key, Node)> = entries.iter().collect();
            sorted.sort_by(|a, b| a.0.name.cmp(&b.0.name));
            out.push('{');
            for (k, v) in sorted {
                out.push_str(&k.name);
                out.push(':');
                canonical(v, out);
                out.push(',');
            }
            out.push('}');
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::{ClassKind, load_str};
    use super::*;

    fn load(text: &str) -> Workload {
        load_str("t.yaml", text, &[], None).unwrap_or_else(|e| panic!("{e}"))
    }

    fn error(text: &str) -> String {
        load_str("t.yaml", text, &[], None).unwrap_err().to_string()
    }

    const MORSE: &str =
        "users:\n  - class: m\n    protocol: morse\n    count: 2\n    mix: { sync: 1 }\n";

    #[test]
    fn defaults_fill_what_the_file_leaves_out() {
        let w = load(MORSE);
        assert_eq!(w.name, "t");
        assert_eq!(w.context, "/cosmo");
        assert_eq!(w.target.to_string(), "embedded:memory");
        assert_eq!(w.run.rounds, 1);
        assert_eq!(w.run.stop, Stop::Duration(Duration::from_secs(30)));
        assert_eq!(w.run.timeout, Duration::from_secs(30));
        let c = &w.classes[0];
        assert_eq!(c.connection, Connection::KeepAlive);
        assert_eq!(c.think.sample(&mut rand::rng()), 0.0);
        let ClassKind::Morse { params, ops } = &c.kind else {
            panic!("{:?}", c.kind)
        };
        assert_eq!(ops, &[super::super::MorseOp::Sync]);
        assert_eq!(
            params.no_change_sync,
            super::super::protocols::defaults::NO_CHANGE_SYNC
        );
        // The driver's extra labels follow the table's.
        assert_eq!(c.labels, ["sync", "sync_no_change", "publish"]);
        assert_eq!(params.label_sync_no_change, 1);
        assert_eq!(params.label_publish, 2);
    }

    #[test]
    fn operation_parameters_become_typed_values() {
        let w = load(
            "users:\n  - class: c\n    protocol: caldav\n    count: 1\n    params: { calendar_home: \"/h/{user}/\" }\n    mix:\n      put_event: { weight: 2, params: { size: 4KiB, recurring: 0.5 } }\n      multiget: { weight: 1, params: { count: 3 } }\n      time_range_report: 1\n      create_calendar: 1\n",
        );
        let c = &w.classes[0];
        assert_eq!(c.ops[0].probability, 0.4);
        let ClassKind::Caldav { params, ops } = &c.kind else {
            panic!()
        };
        assert_eq!(params.calendar_home.as_deref(), Some("/h/{user}/"));
        assert_eq!(
            params.discovery, None,
            "discovery starts at /.well-known/caldav"
        );
        match &ops[0] {
            CaldavOp::PutEvent(shape) => {
                assert_eq!(
                    shape.size.as_ref().map(|d| d.sample(&mut rand::rng())),
                    Some(4096.0)
                );
                assert_eq!(shape.recurring, 0.5);
                assert_eq!((shape.attendees, shape.alarms), (0.0, 0.0));
            }
            other => panic!("{other:?}"),
        }
        assert!(matches!(ops[1], CaldavOp::Multiget { count: 3 }));
        match &ops[2] {
            CaldavOp::TimeRangeReport { range } => {
                assert_eq!(
                    range.sample(&mut rand::rng()),
                    7.0 * 86_400e6,
                    "7 days in µs"
                )
            }
            other => panic!("{other:?}"),
        }
        // create_calendar is both a row and the bootstrap label: listed once.
        assert_eq!(
            c.labels,
            [
                "put_event",
                "multiget",
                "time_range_report",
                "create_calendar",
                "sync_collection_resync"
            ]
        );
        assert_eq!(params.label_create_calendar, 3);
    }

    #[test]
    fn populations_are_closed_open_or_paced_never_two_at_once() {
        let w = load(
            "users:\n  - class: a\n    protocol: http\n    arrival: { rate: 5/s }\n    iterations: 2\n    mix: { g: { weight: 1, path: /x } }\n  - class: b\n    protocol: http\n    count: 1\n    pacing: 100ms\n    mix: { g: { weight: 1, method: PROPFIND, path: /y } }\n",
        );
        assert_eq!(w.classes[0].count, 0);
        assert_eq!(w.classes[0].arrival.as_ref().unwrap().rate, 5.0);
        assert_eq!(w.classes[0].iterations, Some(2));
        assert_eq!(w.classes[1].pacing, Some(Duration::from_millis(100)));
        let ClassKind::Http { requests, .. } = &w.classes[1].kind else {
            panic!()
        };
        assert_eq!(requests[0].method.as_str(), "PROPFIND");
        for (text, want) in [
            (
                "users:\n  - class: a\n    protocol: http\n    count: 1\n    arrival: { rate: 5/s }\n    mix: { g: { weight: 1, path: /x } }\n",
                "not both",
            ),
            (
                "users:\n  - class: a\n    protocol: http\n    count: 1\n    pacing: 1s\n    think: 1s\n    mix: { g: { weight: 1, path: /x } }\n",
                "either 'pacing' or 'think'",
            ),
            (
                "users:\n  - class: a\n    protocol: http\n    count: 1\n    mix: { g: { weight: 1, method: get, path: /x } }\n",
                "not an HTTP method",
            ),
            (
                "users:\n  - class: a b\n    protocol: http\n    count: 1\n    mix: { g: { weight: 1, path: /x } }\n",
                "class name 'a b'",
            ),
            (
                "users:\n  - class: a\n    protocol: morse\n    count: 1\n    mix: { sync: 1 }\n  - class: a\n    protocol: morse\n    count: 1\n    mix: { sync: 1 }\n",
                "used twice",
            ),
        ] {
            let e = error(text);
            assert!(e.contains(want), "{want}: {e}");
        }
    }

    #[test]
    fn the_mix_hash_ignores_what_may_differ_between_comparable_runs() {
        let a = load(MORSE);
        let b = load(&format!(
            "run: {{ duration: 5s, rounds: 4 }}\ntarget: http://127.0.0.1:1\ndescription: x\n{MORSE}"
        ));
        assert_eq!(a.hash, b.hash);
        let c = load(&MORSE.replace("sync: 1", "sync: 2"));
        assert_ne!(a.hash, c.hash);
    }

    #[test]
    fn run_settings_and_their_conflicts() {
        let w = load(&format!(
            "run: {{ iterations: 7, rounds: 3, warmup: 1s, seed: 9, timeout: 2s, connect_timeout: 1s }}\n{MORSE}"
        ));
        assert_eq!(w.run.stop, Stop::Iterations(7));
        assert_eq!((w.run.rounds, w.run.seed), (3, 9));
        assert_eq!(w.run.warmup, Duration::from_secs(1));
        assert_eq!(w.run.connect_timeout, Duration::from_secs(1));
        let e = error(&format!("run: {{ iterations: 7, duration: 1s }}\n{MORSE}"));
        assert!(e.contains("t.yaml:1:"), "{e}");
    }

    #[test]
    fn thresholds_name_known_operations_and_metrics() {
        let w = load(&format!(
            "{MORSE}thresholds:\n  - {{ op: m.sync, p95: \"< 200ms\" }}\n  - {{ op: total, errors: \"< 1%\" }}\n"
        ));
        assert_eq!(w.thresholds.len(), 2);
        assert_eq!(w.thresholds[0].metric, ThresholdMetric::P95);
        assert_eq!(w.thresholds[0].value, 200.0);
        assert_eq!(w.thresholds[1].cmp, Comparison::Lt);
        let e = error(&format!(
            "{MORSE}thresholds:\n  - {{ op: m.synk, p95: \"< 200ms\" }}\n"
        ));
        assert!(e.contains("m.synk"), "{e}");
    }
}
