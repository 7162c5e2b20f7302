//! `run:` (length, rounds, warm-up, seed, timeouts) and `accounts:`.

use super::*;

pub(super) const RUN_KEYS: &[&str] = &[
    "duration",
    "iterations",
    "rounds",
    "warmup",
    "warmup_rounds",
    "keep_state",
    "seed",
    "timeout",
    "connect_timeout",
];

/// Rounds a run may throw away per target before measuring.
const MAX_WARMUP_ROUNDS: i64 = 100;

pub(super) const ACCOUNT_KEYS: &[&str] = &["create", "admin", "password_env", "username", "file"];

pub(super) const ADMIN_KEYS: &[&str] = &["username", "password_env"];

pub(super) fn resolve_run(cx: &Cx, node: Option<&Node>) -> R<RunSpec> {
    let mut run = RunSpec {
        stop: Stop::Duration(Duration::from_secs(30)),
        rounds: 1,
        warmup: Duration::ZERO,
        warmup_rounds: 0,
        keep_state: false,
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
    if let Some(n) = node.get("warmup_rounds") {
        let k = cx.int(n, "run.warmup_rounds", 0)?;
        if k > MAX_WARMUP_ROUNDS {
            return Err(cx.err(
                n.pos,
                "run.warmup_rounds",
                format!("at most {MAX_WARMUP_ROUNDS} warm-up rounds, got {k}"),
            ));
        }
        run.warmup_rounds = k as u32;
    }
    if let Some(n) = node.get("keep_state") {
        run.keep_state = cx.boolean(n, "run.keep_state")?;
    }
    if let Some(n) = node.get("connect_timeout") {
        run.connect_timeout = cx.duration(n, "run.connect_timeout")?;
        if run.connect_timeout.is_zero() {
            return Err(cx.err(n.pos, "run.connect_timeout", "must be longer than 0"));
        }
    }
    Ok(run)
}

pub(super) fn resolve_accounts(cx: &Cx, node: &Node) -> R<Accounts> {
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

const AUTH_KEYS: &[&str] = &["scheme", "token"];

/// `auth: digest`, or `auth: { scheme: bearer, token: '{env:API_TOKEN}' }`.
pub(super) fn resolve_auth(
    cx: &Cx,
    node: &Node,
    key: &str,
    accounts: Option<&Accounts>,
) -> R<AuthSpec> {
    let (scheme_node, token_node) = match &node.value {
        Value::Map(entries) => {
            cx.check_keys(entries, AUTH_KEYS, key)?;
            (required(cx, node, "scheme", key)?, node.get("token"))
        }
        _ => (node, None),
    };
    let skey = if token_node.is_some() || matches!(node.value, Value::Map(_)) {
        join(key, "scheme")
    } else {
        key.to_string()
    };
    let scheme = match cx.string(scheme_node, &skey)?.to_ascii_lowercase().as_str() {
        "basic" => AuthScheme::Basic,
        "digest" => AuthScheme::Digest,
        "bearer" => AuthScheme::Bearer,
        "auto" => AuthScheme::Auto,
        other => {
            return Err(cx.err_hint(
                scheme_node.pos,
                &skey,
                format!("unknown authentication scheme '{other}'"),
                Some("use basic, digest, bearer or auto".into()),
            ));
        }
    };
    let token = match token_node {
        None => None,
        Some(t) => {
            let tkey = join(key, "token");
            let text = cx.string(t, &tkey)?;
            let reference = text
                .strip_prefix('{')
                .and_then(|r| r.strip_suffix('}'))
                .and_then(|r| r.split_once(':'));
            let value = match reference {
                Some(("env", name)) => read_secret(SecretRef::Env(name), cx.base_dir),
                Some(("file", path)) => read_secret(SecretRef::File(path), cx.base_dir),
                _ => {
                    return Err(cx.err(
                        t.pos,
                        &tkey,
                        "a token cannot be written in the workload: give '{env:VARIABLE}' or '{file:PATH}'",
                    ));
                }
            };
            Some(Secret::new(&value.map_err(|m| cx.err(t.pos, &tkey, m))?))
        }
    };
    if scheme == AuthScheme::Bearer && token.is_none() {
        return Err(cx.err(
            node.pos,
            key,
            "bearer needs a token: auth: { scheme: bearer, token: '{env:API_TOKEN}' }",
        ));
    }
    let has_accounts = accounts.is_some_and(|a| a.create != AccountMode::None);
    if matches!(scheme, AuthScheme::Basic | AuthScheme::Digest) && !has_accounts {
        return Err(cx.err_hint(
            node.pos,
            key,
            format!(
                "{} needs a user name and password, and the workload has no accounts",
                scheme.name()
            ),
            Some(
                "add accounts: { create: shared, username: NAME } and set $LOADMIX_PASSWORD".into(),
            ),
        ));
    }
    if scheme == AuthScheme::Auto && !has_accounts && token.is_none() {
        return Err(cx.err_hint(
            node.pos,
            key,
            "auto needs credentials to offer: accounts (user and $LOADMIX_PASSWORD) or a token",
            Some(
                "add accounts: { create: shared, username: NAME }, or token: '{env:API_TOKEN}'"
                    .into(),
            ),
        ));
    }
    Ok(AuthSpec { scheme, token })
}

/// `monitor: { process: [postgres, 1234] }`: names or PIDs of the server's processes.
pub(super) fn resolve_monitor(cx: &Cx, node: &Node) -> R<Vec<String>> {
    let entries = cx.map(node, "monitor")?;
    cx.check_keys(entries, &["process", "prometheus"], "monitor")?;
    let Some(p) = node.get("process") else {
        return Ok(Vec::new());
    };
    let items: Vec<&Node> = match &p.value {
        Value::Seq(items) => items.iter().collect(),
        _ => vec![p],
    };
    let mut out = Vec::new();
    for item in items {
        let s = cx.string(item, "monitor.process")?;
        if s.trim().is_empty() || s.contains('/') {
            return Err(cx.err_hint(
                item.pos,
                "monitor.process",
                format!("'{s}' is not a process name or PID"),
                Some("give the program's name (postgres, java) or a PID".into()),
            ));
        }
        out.push(s.trim().to_string());
    }
    Ok(out)
}

/// `monitor.prometheus: { url: http://..., series: [a, b], per: class.op }` (or a list of
/// them).
pub(super) fn resolve_prometheus(
    cx: &Cx,
    node: &Node,
    classes: &[UserClass],
) -> R<Vec<MetricsWatch>> {
    let items: Vec<&Node> = match &node.value {
        Value::Seq(items) => items.iter().collect(),
        _ => vec![node],
    };
    let key = "monitor.prometheus";
    let mut out = Vec::new();
    for item in items {
        let entries = cx.map(item, key)?;
        cx.check_keys(entries, &["url", "series", "per"], key)?;
        let url_node = required(cx, item, "url", key)?;
        let url = cx.string(url_node, &join(key, "url"))?;
        if !url.starts_with("http://") {
            return Err(cx.err(
                url_node.pos,
                &join(key, "url"),
                format!("'{url}': metrics are scraped over http://host:port/path"),
            ));
        }
        let series_node = required(cx, item, "series", key)?;
        let series: Vec<String> = match &series_node.value {
            Value::Seq(s) => s
                .iter()
                .map(|n| cx.string(n, &join(key, "series")))
                .collect::<R<_>>()?,
            _ => vec![cx.string(series_node, &join(key, "series"))?],
        };
        if series.is_empty() || series.iter().any(|s| s.trim().is_empty()) {
            return Err(cx.err(
                series_node.pos,
                &join(key, "series"),
                "name the series to keep, e.g. [process_cpu_seconds_total]",
            ));
        }
        let per = match item.get("per") {
            Some(n) => {
                let per = cx.string(n, &join(key, "per"))?;
                let names = super::thresholds::Names::of(classes);
                if !names.all.contains(&per) {
                    return Err(names.unknown(cx, n, &per, key, "per"));
                }
                Some(per)
            }
            None => None,
        };
        out.push(MetricsWatch { url, series, per });
    }
    Ok(out)
}
