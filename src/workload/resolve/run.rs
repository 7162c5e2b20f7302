//! `run:` (length, rounds, warm-up, seed, timeouts) and `accounts:`.

use super::*;

pub(super) const RUN_KEYS: &[&str] = &[
    "duration",
    "iterations",
    "rounds",
    "warmup",
    "seed",
    "timeout",
    "connect_timeout",
];

pub(super) const ACCOUNT_KEYS: &[&str] = &["create", "admin", "password_env", "username", "file"];

pub(super) const ADMIN_KEYS: &[&str] = &["username", "password_env"];

pub(super) fn resolve_run(cx: &Cx, node: Option<&Node>) -> R<RunSpec> {
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
