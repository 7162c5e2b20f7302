//! Turn a positioned YAML tree into a [`Workload`], checking every key and value against the
//! workload schema and the protocol catalog, then building the typed operations ([`ops`]). The first mistake found is reported with its
//! position, its key path and, for near misses, a suggestion.

use std::path::Path;
use std::time::Duration;

use bytes::Bytes;
use rand_distr::weighted::WeightedAliasIndex;
use sha2::{Digest, Sha256};

use super::catalog::{ParamDef, ParamKind, Protocol};
use super::dist::{Dist, DistSpec, Unit};
use super::error::{Diagnostic, WorkloadError, did_you_mean};
use super::overrides::{self, Override};
use super::template::{BUILTIN_VARS, Template};
use super::units;
use super::yaml::{self, Key, Node, Pos, Value};
use super::*;

type R<T> = Result<T, WorkloadError>;

const TOP_KEYS: &[&str] = &[
    "name",
    "description",
    "target",
    "context",
    "run",
    "accounts",
    "connection",
    "think",
    "users",
    "thresholds",
];
const RUN_KEYS: &[&str] = &[
    "duration",
    "iterations",
    "rounds",
    "warmup",
    "seed",
    "timeout",
    "connect_timeout",
];
const CLASS_KEYS: &[&str] = &[
    "class",
    "protocol",
    "count",
    "arrival",
    "ramp",
    "pacing",
    "iterations",
    "think",
    "connection",
    "mix",
    "params",
];
const ARRIVAL_KEYS: &[&str] = &["rate", "process", "max_concurrency", "when_full"];
const ACCOUNT_KEYS: &[&str] = &["create", "admin", "password_env", "username", "file"];
const ADMIN_KEYS: &[&str] = &["username", "password_env"];
const OP_KEYS: &[&str] = &["weight", "params", "expect"];
const HTTP_OP_KEYS: &[&str] = &[
    "weight", "method", "path", "headers", "body", "expect", "capture",
];
const DIST_KINDS: &[&str] = &["constant", "uniform", "exponential", "normal", "lognormal"];

/// Context for building located errors.
struct Cx<'a> {
    file: &'a str,
    lines: Vec<&'a str>,
    base_dir: Option<&'a Path>,
}

impl Cx<'_> {
    fn err(&self, pos: Pos, key: &str, message: impl Into<String>) -> WorkloadError {
        self.err_hint(pos, key, message, None)
    }

    fn err_hint(
        &self,
        pos: Pos,
        key: &str,
        message: impl Into<String>,
        hint: Option<String>,
    ) -> WorkloadError {
        let source_line = if pos.is_known() {
            self.lines.get(pos.line as usize - 1).map(|l| l.to_string())
        } else {
            None
        };
        WorkloadError::Invalid(Box::new(Diagnostic {
            file: self.file.to_string(),
            pos,
            key: key.to_string(),
            message: message.into(),
            hint,
            source_line,
            from_override: !pos.is_known(),
        }))
    }

    fn map<'n>(&self, node: &'n Node, key: &str) -> R<&'n [(Key, Node)]> {
        match &node.value {
            Value::Map(entries) => Ok(entries),
            other => Err(self.err(
                node.pos,
                key,
                format!("expected a mapping, found {}", other.kind()),
            )),
        }
    }

    /// Refuse unknown and repeated keys.
    fn check_keys(&self, entries: &[(Key, Node)], allowed: &[&str], path: &str) -> R<()> {
        for (i, (k, _)) in entries.iter().enumerate() {
            if let Some((first, _)) = entries[..i].iter().find(|(e, _)| e.name == k.name) {
                return Err(self.err(
                    k.pos,
                    &join(path, &k.name),
                    format!(
                        "key '{}' appears twice (first on line {})",
                        k.name, first.pos.line
                    ),
                ));
            }
            if !allowed.contains(&k.name.as_str()) {
                let hint = match did_you_mean(&k.name, allowed.iter().copied()) {
                    Some(s) => format!("did you mean '{s}'?"),
                    None => format!("allowed keys here: {}", allowed.join(", ")),
                };
                return Err(self.err_hint(
                    k.pos,
                    &join(path, &k.name),
                    format!("unknown key '{}'", k.name),
                    Some(hint),
                ));
            }
        }
        Ok(())
    }

    fn string(&self, node: &Node, key: &str) -> R<String> {
        match &node.value {
            Value::Str(s) => Ok(s.clone()),
            Value::Int(_) | Value::Float(_) | Value::Bool(_) => {
                Ok(node.scalar_text().unwrap_or_default())
            }
            other => Err(self.err(
                node.pos,
                key,
                format!("expected a string, found {}", other.kind()),
            )),
        }
    }

    fn int(&self, node: &Node, key: &str, min: i64) -> R<i64> {
        let v = match &node.value {
            Value::Int(i) => *i,
            Value::Str(s) if s.trim().parse::<i64>().is_ok() => s.trim().parse().unwrap_or(0),
            other => {
                return Err(self.err(
                    node.pos,
                    key,
                    format!("expected a whole number, found {}", describe(node, other)),
                ));
            }
        };
        if v < min {
            return Err(self.err(node.pos, key, format!("must be at least {min}, got {v}")));
        }
        Ok(v)
    }

    fn number(&self, node: &Node, key: &str) -> R<f64> {
        match &node.value {
            Value::Int(i) => Ok(*i as f64),
            Value::Float(f) if f.is_finite() => Ok(*f),
            other => Err(self.err(
                node.pos,
                key,
                format!("expected a number, found {}", describe(node, other)),
            )),
        }
    }

    fn duration(&self, node: &Node, key: &str) -> R<Duration> {
        let text = node.scalar_text().ok_or_else(|| {
            self.err(
                node.pos,
                key,
                format!(
                    "expected a duration such as 10s, found {}",
                    node.value.kind()
                ),
            )
        })?;
        units::parse_duration(&text).map_err(|m| self.err(node.pos, key, m))
    }

    fn unit_value(&self, node: &Node, key: &str, unit: Unit) -> R<f64> {
        match unit {
            Unit::Duration => Ok(self.duration(node, key)?.as_secs_f64() * 1e6),
            Unit::Size => {
                let text = node.scalar_text().ok_or_else(|| {
                    self.err(
                        node.pos,
                        key,
                        format!("expected a size such as 4KiB, found {}", node.value.kind()),
                    )
                })?;
                units::parse_size(&text)
                    .map(|b| b as f64)
                    .map_err(|m| self.err(node.pos, key, m))
            }
            Unit::Count => {
                let v = self.number(node, key)?;
                if v < 0.0 {
                    return Err(self.err(node.pos, key, format!("must not be negative, got {v}")));
                }
                Ok(v)
            }
        }
    }

    /// A constant (`10ms`) or one of `{constant|uniform|exponential|normal|lognormal: ...}`.
    fn dist(&self, node: &Node, key: &str, unit: Unit) -> R<Dist> {
        let entries = match &node.value {
            Value::Map(e) => e,
            _ => return Ok(Dist::constant(self.unit_value(node, key, unit)?)),
        };
        if entries.len() != 1 {
            return Err(self.err_hint(
                node.pos,
                key,
                "a distribution has exactly one kind",
                Some(format!("write one of: {}", DIST_KINDS.join(", "))),
            ));
        }
        self.check_keys(entries, DIST_KINDS, key)?;
        let (k, v) = &entries[0];
        let kp = join(key, &k.name);
        let spec = match k.name.as_str() {
            "constant" => DistSpec::Constant(self.unit_value(v, &kp, unit)?),
            "uniform" => {
                let Value::Seq(items) = &v.value else {
                    return Err(self.err(v.pos, &kp, "uniform takes a list [low, high]"));
                };
                if items.len() != 2 {
                    return Err(self.err(
                        v.pos,
                        &kp,
                        format!("uniform takes two values [low, high], got {}", items.len()),
                    ));
                }
                let (low, high) = (
                    self.unit_value(&items[0], &kp, unit)?,
                    self.unit_value(&items[1], &kp, unit)?,
                );
                if low > high {
                    let text = |n: &Node| n.scalar_text().unwrap_or_default();
                    return Err(self.err(
                        v.pos,
                        &kp,
                        format!(
                            "uniform needs [low, high] with low <= high, got [{}, {}]",
                            text(&items[0]),
                            text(&items[1])
                        ),
                    ));
                }
                DistSpec::Uniform { low, high }
            }
            "exponential" => {
                let e = self.map(v, &kp)?;
                self.check_keys(e, &["mean", "max"], &kp)?;
                DistSpec::Exponential {
                    mean: self.unit_value(
                        required(self, v, "mean", &kp)?,
                        &join(&kp, "mean"),
                        unit,
                    )?,
                    max: v
                        .get("max")
                        .map(|m| self.unit_value(m, &join(&kp, "max"), unit))
                        .transpose()?,
                }
            }
            "normal" => {
                let e = self.map(v, &kp)?;
                self.check_keys(e, &["mean", "stddev"], &kp)?;
                DistSpec::Normal {
                    mean: self.unit_value(
                        required(self, v, "mean", &kp)?,
                        &join(&kp, "mean"),
                        unit,
                    )?,
                    stddev: self.unit_value(
                        required(self, v, "stddev", &kp)?,
                        &join(&kp, "stddev"),
                        unit,
                    )?,
                }
            }
            _ => {
                let e = self.map(v, &kp)?;
                self.check_keys(e, &["median", "p95"], &kp)?;
                DistSpec::LogNormal {
                    median: self.unit_value(
                        required(self, v, "median", &kp)?,
                        &join(&kp, "median"),
                        unit,
                    )?,
                    p95: self.unit_value(
                        required(self, v, "p95", &kp)?,
                        &join(&kp, "p95"),
                        unit,
                    )?,
                }
            }
        };
        Dist::new(spec).map_err(|m| self.err(v.pos, &kp, m))
    }
}

fn required<'n>(cx: &Cx, node: &'n Node, name: &str, path: &str) -> R<&'n Node> {
    node.get(name)
        .ok_or_else(|| cx.err(node.pos, path, format!("missing required key '{name}'")))
}

fn describe(node: &Node, v: &Value) -> String {
    match node.scalar_text() {
        Some(t) => format!("'{t}'"),
        None => v.kind().to_string(),
    }
}

fn join(path: &str, key: &str) -> String {
    if path.is_empty() {
        key.to_string()
    } else {
        format!("{path}.{key}")
    }
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

    let name = match root.get("name") {
        Some(n) => cx.string(n, "name")?,
        None => Path::new(file)
            .file_stem()
            .map(|s| s.to_string_lossy().to_string())
            .unwrap_or_else(|| "workload".into()),
    };
    let description = root
        .get("description")
        .map(|n| cx.string(n, "description"))
        .transpose()?;
    let target = match root.get("target") {
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
    };
    let context = match root.get("context") {
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
    };
    let run = resolve_run(&cx, root.get("run"))?;
    let connection = match root.get("connection") {
        None => Connection::KeepAlive,
        Some(n) => connection(&cx, n, "connection")?,
    };
    let think = match root.get("think") {
        None => Dist::constant(0.0),
        Some(n) => cx.dist(n, "think", Unit::Duration)?,
    };
    let accounts = root
        .get("accounts")
        .map(|n| resolve_accounts(&cx, n))
        .transpose()?;

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
    let mut classes: Vec<UserClass> = Vec::new();
    for (i, item) in items.iter().enumerate() {
        let c = resolve_class(&cx, item, i, &think, connection)?;
        if let Some(prev) = classes.iter().find(|p| p.name == c.name) {
            let pos = item.get("class").map(|n| n.pos).unwrap_or(item.pos);
            return Err(cx.err(
                pos,
                &format!("users[{i}].class"),
                format!("class name '{}' is used twice", prev.name),
            ));
        }
        classes.push(c);
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
    let thresholds = match root.get("thresholds") {
        None => Vec::new(),
        Some(n) => resolve_thresholds(&cx, n, &classes)?,
    };

    Ok(Workload {
        name,
        description,
        file: file.to_string(),
        source_text: text.to_string(),
        overrides: ovr.iter().map(Override::display).collect(),
        hash: mix_hash(&root),
        target,
        context,
        run,
        accounts,
        classes,
        thresholds,
    })
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

fn resolve_run(cx: &Cx, node: Option<&Node>) -> R<RunSpec> {
    let mut run = RunSpec {
        stop: Stop::Duration(Duration::from_secs(30)),
        rounds: 1,
        warmup: Duration::ZERO,
        seed: 1,
        timeout: Duration::from_secs(30),
        connect_timeout: Duration::from_secs(5),
    };
    let Some(node) = node else { return Ok(run) };
    let entries = cx.map(node, "run")?;
    cx.check_keys(entries, RUN_KEYS, "run")?;
    match (node.get("duration"), node.get("iterations")) {
        (Some(d), Some(i)) => {
            let later = if d.pos.line >= i.pos.line { d } else { i };
            return Err(cx.err_hint(
                later.pos,
                "run",
                "give either 'duration' or 'iterations', not both",
                Some("duration runs each round for a time; iterations runs a number of operations per user".into()),
            ));
        }
        (Some(d), None) => {
            let dur = cx.duration(d, "run.duration")?;
            if dur.is_zero() {
                return Err(cx.err(d.pos, "run.duration", "must be longer than 0"));
            }
            run.stop = Stop::Duration(dur);
        }
        (None, Some(i)) => run.stop = Stop::Iterations(cx.int(i, "run.iterations", 1)? as u64),
        (None, None) => {}
    }
    if let Some(n) = node.get("rounds") {
        let r = cx.int(n, "run.rounds", 1)?;
        run.rounds =
            u32::try_from(r).map_err(|_| cx.err(n.pos, "run.rounds", "too many rounds"))?;
    }
    if let Some(n) = node.get("warmup") {
        run.warmup = cx.duration(n, "run.warmup")?;
        if let Stop::Duration(d) = run.stop
            && run.warmup >= d
        {
            return Err(cx.err(
                n.pos,
                "run.warmup",
                format!(
                    "warm-up {} is not shorter than the duration {}: nothing would be measured",
                    units::format_duration(run.warmup),
                    units::format_duration(d)
                ),
            ));
        }
    }
    if let Some(n) = node.get("seed") {
        run.seed = cx.int(n, "run.seed", 0)? as u64;
    }
    if let Some(n) = node.get("timeout") {
        run.timeout = cx.duration(n, "run.timeout")?;
        if run.timeout.is_zero() {
            return Err(cx.err(n.pos, "run.timeout", "must be longer than 0"));
        }
    }
    if let Some(n) = node.get("connect_timeout") {
        run.connect_timeout = cx.duration(n, "run.connect_timeout")?;
        if run.connect_timeout.is_zero() {
            return Err(cx.err(n.pos, "run.connect_timeout", "must be longer than 0"));
        }
    }
    Ok(run)
}

fn resolve_accounts(cx: &Cx, node: &Node) -> R<Accounts> {
    let entries = cx.map(node, "accounts")?;
    cx.check_keys(entries, ACCOUNT_KEYS, "accounts")?;
    let create = match node.get("create") {
        None => AccountMode::None,
        Some(n) => match cx.string(n, "accounts.create")?.as_str() {
            "cmp" => AccountMode::Cmp,
            "existing" => AccountMode::Existing,
            "shared" => AccountMode::Shared,
            "none" => AccountMode::None,
            other => {
                return Err(cx.err_hint(
                    n.pos,
                    "accounts.create",
                    format!("unknown account mode '{other}'"),
                    Some("use cmp, existing, shared or none".into()),
                ));
            }
        },
    };
    let text = |k: &str, n: Option<&Node>| n.map(|n| cx.string(n, k)).transpose();
    let (mut admin_username, mut admin_password_env) = (None, None);
    if let Some(a) = node.get("admin") {
        let e = cx.map(a, "accounts.admin")?;
        cx.check_keys(e, ADMIN_KEYS, "accounts.admin")?;
        admin_username = text("accounts.admin.username", a.get("username"))?;
        admin_password_env = text("accounts.admin.password_env", a.get("password_env"))?;
    }
    let accounts = Accounts {
        create,
        admin_username,
        admin_password_env,
        password_env: text("accounts.password_env", node.get("password_env"))?,
        username: text("accounts.username", node.get("username"))?,
        file: text("accounts.file", node.get("file"))?,
    };
    if create == AccountMode::Existing && accounts.file.is_none() {
        return Err(cx.err(
            node.pos,
            "accounts",
            "create: existing needs 'file' listing the accounts",
        ));
    }
    if create == AccountMode::Shared && accounts.username.is_none() {
        return Err(cx.err(node.pos, "accounts", "create: shared needs 'username'"));
    }
    Ok(accounts)
}

fn resolve_class(
    cx: &Cx,
    node: &Node,
    index: usize,
    think: &Dist,
    conn: Connection,
) -> R<UserClass> {
    let fallback = format!("users[{index}]");
    let entries = cx.map(node, &fallback)?;
    // Name the class in later messages once we know it.
    let name_node = node.get("class");
    let name = match name_node {
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
                node.pos,
                &fallback,
                "missing required key 'class' (the class name)",
            ));
        }
    };
    let path = format!("users.{name}");
    cx.check_keys(entries, CLASS_KEYS, &path)?;
    let proto_node = required(cx, node, "protocol", &path)?;
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
    // A null count (`--set users.x.count=`) is no count: it lets --set switch a class to arrival.
    let count_node = node
        .get("count")
        .filter(|n| !matches!(n.value, Value::Null));
    let (count, arrival) = match (count_node, node.get("arrival")) {
        (Some(_), Some(a)) => {
            return Err(cx.err(
                a.pos,
                &format!("{path}.arrival"),
                "give either 'count' (a closed population) or 'arrival' (sessions arriving at a rate), not both",
            ));
        }
        (None, None) => {
            return Err(cx.err_hint(
                node.pos,
                &path,
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
    let ramp = match node.get("ramp") {
        Some(r) => resolve_ramp(cx, r, &format!("{path}.ramp"), arrival.is_some())?,
        None => Vec::new(),
    };
    let pacing = match node.get("pacing") {
        None => None,
        Some(n) => {
            let key = format!("{path}.pacing");
            if arrival.is_some() {
                return Err(cx.err(n.pos, &key, "pacing is for closed classes (count); an open class is paced by its arrival rate"));
            }
            if node.get("think").is_some() {
                return Err(cx.err(n.pos, &key, "give either 'pacing' or 'think', not both"));
            }
            let d = cx.duration(n, &key)?;
            if d.is_zero() {
                return Err(cx.err(n.pos, &key, "must be longer than 0"));
            }
            Some(d)
        }
    };
    let iterations = node
        .get("iterations")
        .map(|n| {
            cx.int(n, &format!("{path}.iterations"), 1)
                .map(|v| v as u64)
        })
        .transpose()?;
    let think = match node.get("think") {
        Some(n) => cx.dist(n, &format!("{path}.think"), Unit::Duration)?,
        None => think.clone(),
    };
    let connection = match node.get("connection") {
        Some(n) => connection(cx, n, &format!("{path}.connection"))?,
        None => conn,
    };
    let def = protocol.def();
    let params = match node.get("params") {
        Some(n) => resolve_params(cx, n, def.class_params, &format!("{path}.params"))?,
        None => Params::default(),
    };

    let mix_path = format!("{path}.mix");
    let mix = required(cx, node, "mix", &path)?;
    let mix_entries = match &mix.value {
        Value::Map(e) => e,
        Value::Null => return Err(cx.err(mix.pos, &mix_path, "the operation table is empty")),
        other => {
            return Err(cx.err(
                mix.pos,
                &mix_path,
                format!(
                    "expected a mapping of operation: weight, found {}",
                    other.kind()
                ),
            ));
        }
    };
    if mix_entries.is_empty() {
        return Err(cx.err(mix.pos, &mix_path, "the operation table is empty"));
    }
    let mut captures: Vec<String> = Vec::new();
    let mut ops: Vec<Operation> = Vec::new();
    let mut capture_sites: Vec<(String, Pos)> = Vec::new();
    let mut requests: Vec<HttpRequest> = Vec::new();
    let mut op_params: Vec<Params> = Vec::new();
    for (i, (k, v)) in mix_entries.iter().enumerate() {
        let op_path = join(&mix_path, &k.name);
        if mix_entries[..i].iter().any(|(e, _)| e.name == k.name) {
            return Err(cx.err(
                k.pos,
                &op_path,
                format!("operation '{}' appears twice", k.name),
            ));
        }
        let op_def = if protocol == Protocol::Http {
            if !k
                .name
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
                || k.name.is_empty()
            {
                return Err(cx.err(
                    k.pos,
                    &op_path,
                    "operation names are letters, digits, '_' or '-'",
                ));
            }
            None
        } else {
            let names: Vec<&str> = def.ops.iter().map(|o| o.name).collect();
            Some(def.op(&k.name).ok_or_else(|| {
                cx.err_hint(
                    k.pos,
                    &op_path,
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
            })?)
        };
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
                cx.check_keys(e, allowed, &op_path)?;
                if let Some(p) = v.get("params") {
                    let defs = op_def.map(|d| d.params).unwrap_or(&[]);
                    params = resolve_params(cx, p, defs, &join(&op_path, "params"))?;
                }
                if let Some(x) = v.get("expect") {
                    op.expect = Some(resolve_expect(cx, x, &join(&op_path, "expect"))?);
                }
                if protocol == Protocol::Http {
                    requests.push(resolve_http(
                        cx,
                        v,
                        &op_path,
                        &mut captures,
                        &mut capture_sites,
                    )?);
                }
                required(cx, v, "weight", &op_path)?
            }
            _ => {
                if protocol == Protocol::Http {
                    return Err(cx.err_hint(
                        v.pos,
                        &op_path,
                        "an http operation needs a request, not only a weight",
                        Some("write e.g. { weight: 1, method: GET, path: \"/status\" }".into()),
                    ));
                }
                v
            }
        };
        let w = cx.number(weight_node, &join(&op_path, "weight"))?;
        if w < 0.0 {
            return Err(cx.err(
                weight_node.pos,
                &op_path,
                format!("weight must not be negative, got {w}"),
            ));
        }
        op.weight = w;
        ops.push(op);
        op_params.push(params);
    }
    let total: f64 = ops.iter().map(|o| o.weight).sum();
    if total <= 0.0 {
        return Err(cx.err_hint(
            mix.pos,
            &mix_path,
            "all weights are zero: no operation could ever be picked",
            Some("give at least one operation a positive weight".into()),
        ));
    }
    for op in &mut ops {
        op.probability = op.weight / total;
    }
    // A capture that no operation reads is harmless; a variable nobody captures is a typo.
    let captured: Vec<usize> = requests
        .iter()
        .flat_map(|h| h.captures.iter().map(|c| c.var))
        .collect();
    for (var, pos) in &capture_sites {
        let idx = captures.iter().position(|c| c == var).unwrap_or(usize::MAX);
        if !captured.contains(&idx) {
            let mut known: Vec<&str> = BUILTIN_VARS.to_vec();
            known.extend(captures.iter().filter(|c| *c != var).map(String::as_str));
            return Err(cx.err_hint(
                *pos,
                &mix_path,
                format!("variable {{{var}}} is neither built in nor captured by any operation of this class"),
                Some(match did_you_mean(var, known.iter().copied()) {
                    Some(s) => format!("did you mean {{{s}}}?"),
                    None => format!("built-in variables: {}", BUILTIN_VARS.join(", ")),
                }),
            ));
        }
    }
    let chooser = WeightedAliasIndex::new(ops.iter().map(|o| o.weight).collect()).map_err(|e| {
        cx.err(
            mix.pos,
            &mix_path,
            format!("cannot build the weighted table: {e}"),
        )
    })?;
    let mut labels: Vec<String> = ops.iter().map(|o| o.name.clone()).collect();
    let named: Vec<(&str, &Params)> = ops
        .iter()
        .map(|o| o.name.as_str())
        .zip(&op_params)
        .collect();
    let kind = match ops::build_class(protocol, &named, &params, &mut labels) {
        Ok(ClassKind::Http { .. }) => ClassKind::Http { requests },
        Ok(k) => k,
        Err(m) => return Err(cx.err(mix.pos, &mix_path, m)),
    };
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
        ops,
        labels,
        chooser,
        kind,
        captures,
    })
}

fn resolve_arrival(cx: &Cx, node: &Node, path: &str) -> R<Arrival> {
    let entries = cx.map(node, path)?;
    cx.check_keys(entries, ARRIVAL_KEYS, path)?;
    let rate_node = required(cx, node, "rate", path)?;
    let rate_text = rate_node.scalar_text().unwrap_or_default();
    let rate =
        units::parse_rate(&rate_text).map_err(|m| cx.err(rate_node.pos, &join(path, "rate"), m))?;
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
    Ok(Arrival {
        rate,
        process,
        max_concurrency,
        when_full,
    })
}

/// `[ { to: 100, over: 30s }, { hold: 2m } ]`; `to` is a count, or a rate for an open class.
fn resolve_ramp(cx: &Cx, node: &Node, path: &str, open: bool) -> R<Vec<Stage>> {
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
                    units::parse_rate(&t).map_err(|m| cx.err(to.pos, &join(&sp, "to"), m))?
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

fn resolve_params(cx: &Cx, node: &Node, defs: &[ParamDef], path: &str) -> R<Params> {
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
        };
        out.push((k.name.clone(), value));
    }
    Ok(Params(out))
}

fn resolve_expect(cx: &Cx, node: &Node, path: &str) -> R<Vec<u16>> {
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

fn resolve_http(
    cx: &Cx,
    node: &Node,
    path: &str,
    captures: &mut Vec<String>,
    sites: &mut Vec<(String, Pos)>,
) -> R<HttpRequest> {
    let mut template = |n: &Node, key: &str, captures: &mut Vec<String>| -> R<Template> {
        let text = cx.string(n, key)?;
        let before = captures.len();
        let t = Template::parse(&text, captures).map_err(|m| cx.err(n.pos, key, m))?;
        for v in t.vars_used() {
            let name = captures[v].clone();
            if v >= before || !sites.iter().any(|(s, _)| *s == name) {
                sites.push((name, n.pos));
            }
        }
        Ok(t)
    };
    let method_node = node.get("method");
    let method = match method_node {
        Some(n) => cx.string(n, &join(path, "method"))?,
        None => "GET".into(),
    };
    let parsed = hyper::Method::from_bytes(method.as_bytes())
        .ok()
        .filter(|_| {
            !method.is_empty()
                && method
                    .bytes()
                    .all(|b| b.is_ascii_uppercase() || b == b'-' || b == b'_')
        });
    let Some(method) = parsed else {
        return Err(cx.err(
            method_node.map(|n| n.pos).unwrap_or(node.pos),
            &join(path, "method"),
            format!(
                "'{method}' is not an HTTP method (upper-case letters, e.g. GET, POST, PROPFIND)"
            ),
        ));
    };
    let path_node = required(cx, node, "path", path)?;
    let req_path = template(path_node, &join(path, "path"), captures)?;
    // A path may start with a variable: {context}, or a captured Location.
    if !req_path.source.starts_with('/') && !req_path.source.starts_with('{') {
        return Err(cx.err(
            path_node.pos,
            &join(path, "path"),
            "the path must start with '/' or a variable such as {context}",
        ));
    }
    let mut headers = Vec::new();
    if let Some(h) = node.get("headers") {
        let hp = join(path, "headers");
        for (k, v) in cx.map(h, &hp)? {
            if k.name.is_empty()
                || !k
                    .name
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b"-_".contains(&b))
            {
                return Err(cx.err(
                    k.pos,
                    &join(&hp, &k.name),
                    format!("'{}' is not a valid header name", k.name),
                ));
            }
            headers.push((k.name.clone(), template(v, &join(&hp, &k.name), captures)?));
        }
    }
    let body = match node.get("body") {
        None => Body::None,
        Some(b) => {
            let bp = join(path, "body");
            match &b.value {
                Value::Map(e) => {
                    cx.check_keys(e, &["file", "random"], &bp)?;
                    if e.len() != 1 {
                        return Err(cx.err(
                            b.pos,
                            &bp,
                            "body takes one of: a template string, {file: PATH}, {random: SIZE}",
                        ));
                    }
                    if let Some(f) = b.get("file") {
                        let rel = cx.string(f, &join(&bp, "file"))?;
                        let full = match cx.base_dir {
                            Some(d) => d.join(&rel),
                            None => Path::new(&rel).to_path_buf(),
                        };
                        let bytes = std::fs::read(&full).map_err(|e| {
                            cx.err(
                                f.pos,
                                &join(&bp, "file"),
                                format!("cannot read {}: {e}", full.display()),
                            )
                        })?;
                        Body::File {
                            path: rel,
                            bytes: Bytes::from(bytes),
                        }
                    } else {
                        let r = b.get("random").unwrap_or(b);
                        let text = r.scalar_text().unwrap_or_default();
                        Body::Random(
                            units::parse_size(&text)
                                .map_err(|m| cx.err(r.pos, &join(&bp, "random"), m))?,
                        )
                    }
                }
                _ => Body::Template(template(b, &bp, captures)?),
            }
        }
    };
    let mut caps = Vec::new();
    if let Some(c) = node.get("capture") {
        let cp = join(path, "capture");
        for (k, v) in cx.map(c, &cp)? {
            let kp = join(&cp, &k.name);
            if BUILTIN_VARS.contains(&k.name.as_str()) {
                return Err(cx.err(
                    k.pos,
                    &kp,
                    format!("'{}' is a built-in variable; choose another name", k.name),
                ));
            }
            let e = cx.map(v, &kp)?;
            cx.check_keys(e, &["header", "json"], &kp)?;
            let from = match (v.get("header"), v.get("json")) {
                (Some(h), None) => CaptureFrom::Header(cx.string(h, &join(&kp, "header"))?),
                (None, Some(j)) => {
                    let p = cx.string(j, &join(&kp, "json"))?;
                    if !p.is_empty() && !p.starts_with('/') {
                        return Err(cx.err(
                            j.pos,
                            &join(&kp, "json"),
                            format!("'{p}' is not a JSON pointer; write e.g. /id or /items/0/id"),
                        ));
                    }
                    CaptureFrom::JsonPointer(p)
                }
                _ => {
                    return Err(cx.err(v.pos, &kp, "a capture takes exactly one of: header, json"));
                }
            };
            let var = match captures.iter().position(|c| *c == k.name) {
                Some(i) => i,
                None => {
                    captures.push(k.name.clone());
                    captures.len() - 1
                }
            };
            caps.push(Capture { var, from });
        }
    }
    Ok(HttpRequest {
        method,
        path: req_path,
        headers,
        body,
        captures: caps,
    })
}

fn resolve_thresholds(cx: &Cx, node: &Node, classes: &[UserClass]) -> R<Vec<Threshold>> {
    let Value::Seq(items) = &node.value else {
        return Err(cx.err(
            node.pos,
            "thresholds",
            format!("expected a list, found {}", node.value.kind()),
        ));
    };
    let mut out = Vec::new();
    let mut names: Vec<String> = vec!["total".into()];
    for c in classes {
        names.push(c.name.clone());
        names.extend(c.labels.iter().map(|l| format!("{}.{l}", c.name)));
    }
    let metric_names: Vec<&str> = ThresholdMetric::NAMES.iter().map(|(n, _)| *n).collect();
    for (i, item) in items.iter().enumerate() {
        let path = format!("thresholds[{i}]");
        let entries = cx.map(item, &path)?;
        let mut allowed = metric_names.clone();
        allowed.push("op");
        cx.check_keys(entries, &allowed, &path)?;
        let op_node = required(cx, item, "op", &path)?;
        let op = cx.string(op_node, &join(&path, "op"))?;
        if !names.contains(&op) {
            return Err(cx.err_hint(
                op_node.pos,
                &join(&path, "op"),
                format!("no operation, class or total named '{op}'"),
                Some(match did_you_mean(&op, names.iter().map(String::as_str)) {
                    Some(s) => format!("did you mean '{s}'?"),
                    None => "write total, a class name, or class.operation".into(),
                }),
            ));
        }
        if entries.len() < 2 {
            return Err(cx.err(
                item.pos,
                &path,
                format!("no condition: add one of {}", metric_names.join(", ")),
            ));
        }
        for (k, v) in entries.iter().filter(|(k, _)| k.name != "op") {
            let kp = join(&path, &k.name);
            let metric = ThresholdMetric::NAMES
                .iter()
                .find(|(n, _)| *n == k.name)
                .map(|(_, m)| *m)
                .unwrap_or(ThresholdMetric::Mean);
            let text = cx.string(v, &kp)?;
            let t = text.trim();
            let (cmp, rest) = if let Some(r) = t.strip_prefix("<=") {
                (Comparison::Le, r)
            } else if let Some(r) = t.strip_prefix(">=") {
                (Comparison::Ge, r)
            } else if let Some(r) = t.strip_prefix('<') {
                (Comparison::Lt, r)
            } else if let Some(r) = t.strip_prefix('>') {
                (Comparison::Gt, r)
            } else {
                return Err(cx.err(
                    v.pos,
                    &kp,
                    format!("'{t}' needs a comparison first, e.g. \"< 200ms\""),
                ));
            };
            let rest = rest.trim();
            let value = match metric {
                ThresholdMetric::Errors => rest
                    .strip_suffix('%')
                    .and_then(|n| n.trim().parse::<f64>().ok())
                    .filter(|p| (0.0..=100.0).contains(p))
                    .ok_or_else(|| {
                        cx.err(
                            v.pos,
                            &kp,
                            format!("'{rest}' is not a percentage such as 1%"),
                        )
                    })?,
                ThresholdMetric::OpsPerSec => match rest.parse::<f64>() {
                    Ok(n) => n,
                    Err(_) => units::parse_rate(rest).map_err(|m| cx.err(v.pos, &kp, m))?,
                },
                _ => {
                    units::parse_duration(rest)
                        .map_err(|m| cx.err(v.pos, &kp, m))?
                        .as_secs_f64()
                        * 1e3
                }
            };
            out.push(Threshold {
                op: op.clone(),
                metric,
                cmp,
                value,
                text: format!("{} {}", k.name, t),
            });
        }
    }
    Ok(out)
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
                    "run" | "target" | "description" | "thresholds"
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
