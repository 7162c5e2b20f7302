//! What `loadmix run` does around the engine: one or more named targets run round by round
//! taking turns (A B B A ... by default, so drift on a shared machine hits them alike), optional
//! sweeps of one workload value, embedded servers started and stopped, live progress,
//! Ctrl-C, and every output: per target `run.json`, `report.txt`, `report.html`; a
//! comparison when there are several targets; a scaling table and chart for a sweep.
//!
//! It takes plain [`RunOptions`] (the command line is `cli`'s business) and answers with
//! what happened ([`Finished`]) or why nothing could run ([`RunError`]); `cli` turns
//! either into an exit code.

pub(crate) mod capacity;
mod embedded;
pub(crate) mod fits;
mod progress;
pub(crate) mod signals;
pub(crate) mod started;
pub(crate) mod sweep;
pub(crate) mod targets;

use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use tokio_util::sync::CancellationToken;

use crate::engine::{EngineConfig, EngineError, RoundResult, Runner};
use crate::live;
use crate::metrics::Live;
use crate::monitor::prometheus::MetricsSpec;
use crate::monitor::{Watch, parse_watch};
use crate::protocol::{AccountPlan, ProtocolError};
use crate::report::{self, Report, TlsInfo, compare};
use crate::server::{self, ServerConfig};
use crate::transport::{Address, Endpoint};
use crate::transport::{EndpointError, TlsClient, TlsOptions};
use crate::workload::{EmbeddedStore, LoadOptions, Override, Stop, TargetSpec, Workload};
use embedded::Embedded;
use progress::{Progress, round_line};
pub(crate) use targets::{NamedTarget, parse_targets};

/// What to print on stdout.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum StdoutFormat {
    #[default]
    Table,
    Json,
    /// Nothing on stdout, the files only (the trial runs of `loadmix new`).
    Nothing,
}

/// Everything `loadmix run` needs, as plain data.
#[derive(Debug, Clone, Default)]
pub struct RunOptions {
    /// The workload file and its overrides.
    pub workload: LoadOptions,
    /// `--target` values, `[NAME=]SPEC`; empty means the workload's own target.
    pub targets: Vec<String>,
    /// `KEY=V1,V2,...`
    pub sweep: Option<String>,
    /// `--capacity "p99 < 200ms, errors < 1%"`: search each target's highest arrival
    /// rate within this service level instead of running the rounds as written.
    pub capacity: Option<String>,
    /// The most steps each target's search runs (`--capacity-steps`).
    pub capacity_steps: Option<u32>,
    /// Servers loadmix starts and stops for their targets (`--start`, `--ready`, `--stop`,
    /// `--start-env`).
    pub start: started::StartFlags,
    /// Also write the HTML report here.
    pub html: Option<PathBuf>,
    /// Also write the CSV here.
    pub csv: Option<PathBuf>,
    /// The report's folder; `reports/NAME-RUNID/` by default.
    pub out: Option<PathBuf>,
    /// What goes to stdout.
    pub format: StdoutFormat,
    /// Probe each class's protocol before the clock (`--no-preflight` turns it off).
    pub preflight: bool,
    /// Write every operation here (`--log-ops`).
    pub log_ops: Option<PathBuf>,
    /// No progress lines.
    pub quiet: bool,
    /// TLS settings of `https://` targets.
    pub tls: TlsOptions,
    /// Leave what the run made on the target.
    pub keep_data: bool,
    /// How long a round's cleanup may take in all (`--cleanup-timeout`).
    pub cleanup_timeout: Duration,
    /// `--note TEXT`, stored in every report of the run.
    pub note: Option<String>,
    /// `--label KEY=VALUE`, stored in every report of the run.
    pub labels: Vec<(String, String)>,
    /// The order of several targets' rounds; `None`: balanced.
    pub order: Option<Order>,
    /// `--monitor-process NAME|PID`: the server's processes to watch, beside the
    /// workload's `monitor.process`.
    pub monitor_process: Vec<String>,
    /// `--monitor-prometheus URL#SERIES,...`: metrics to scrape, beside the workload's.
    pub monitor_prometheus: Vec<String>,
    /// This process's share of the run (`--shard I/N`).
    pub shard: crate::engine::shard::Shard,
    /// `--start-at`: when the first round's clock starts, in every shard alike.
    pub start_at: Option<std::time::SystemTime>,
    /// `--round-every`: the slot of each round under `--start-at` [default: the round's
    /// duration and `DEFAULT_ROUND_GAP`].
    pub round_every: Option<std::time::Duration>,
    /// `--run-id`: the run's id, the same in every shard; `None`: a new one.
    pub run_id: Option<String>,
    /// `--dashboard`: serve the live dashboard there.
    pub dashboard: Option<std::net::SocketAddr>,
    /// `--metrics`: serve the run's Prometheus page there.
    pub metrics: Option<std::net::SocketAddr>,
    /// `--wide`: every column of the console tables.
    pub wide: bool,
    /// `--linger`: how long both stay up after the run [default: the dashboard until a
    /// signal, the metrics page not at all].
    pub linger: Option<Duration>,
}

/// Under `--start-at`, the time between one round's end and the next one's slot, for
/// set-up and cleanup.
pub(crate) const DEFAULT_ROUND_GAP: std::time::Duration = std::time::Duration::from_secs(30);

/// In which order several targets take their rounds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Order {
    /// A B A B ...: the same target always goes first.
    Alternate,
    /// A B, B A, A B, ...: a linear drift of the host falls on every target alike.
    Balanced,
    /// A seeded random order each round (the workload's seed).
    Shuffle,
}

impl Order {
    pub fn name(self) -> &'static str {
        match self {
            Order::Alternate => "alternate",
            Order::Balanced => "balanced",
            Order::Shuffle => "shuffle",
        }
    }

    /// The targets' indices in the order they run round `r` (from 1).
    pub fn sequence(self, targets: usize, r: u32, seed: u64) -> Vec<usize> {
        let mut v: Vec<usize> = (0..targets).collect();
        match self {
            Order::Alternate => {}
            Order::Balanced => {
                if r.is_multiple_of(2) {
                    v.reverse();
                }
            }
            Order::Shuffle => {
                use rand::SeedableRng;
                use rand::seq::SliceRandom;
                let mut rng = rand::rngs::Xoshiro256PlusPlus::seed_from_u64(
                    seed ^ 0x6f72_6465_7200_0000 ^ u64::from(r),
                );
                v.shuffle(&mut rng);
            }
        }
        v
    }
}

/// Why a run could not run (or stopped before it measured anything).
#[derive(Debug, thiserror::Error)]
pub enum RunError {
    /// The workload, a flag or an account set-up is wrong; nothing was sent.
    #[error("{0}")]
    Usage(String),
    /// A target could not be reached or failed its preflight.
    #[error("{0}")]
    Unreachable(String),
    /// A folder the run needs could not be made.
    #[error("{0}")]
    Write(String),
}

/// How a run that ran ended.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Finished {
    /// A threshold of the workload failed (exit 1).
    pub thresholds_failed: bool,
    /// Some output could not be written (each failure was printed); the rest was.
    pub write_failed: bool,
    /// Stopped by a signal, or before the last sweep point.
    pub interrupted: bool,
}

/// JSON for stdout; a value that cannot be serialised is said, not printed as nothing.
fn json_text<T: serde::Serialize>(v: &T) -> String {
    match serde_json::to_string_pretty(v) {
        Ok(j) => j + "\n",
        Err(e) => {
            warn(format!("cannot print the results as JSON: {e}"));
            String::new()
        }
    }
}

/// Write each file's text into `dir` (a text that could not be made is its error); false
/// when any could not be written, each failure said and the rest written.
fn write_all<const N: usize>(dir: &Path, files: [(&str, Result<String, String>); N]) -> bool {
    let mut ok = true;
    for (f, text) in files {
        let path = dir.join(f);
        let written = text.and_then(|t| report::write_file(&path, &t).map_err(|e| e.to_string()));
        if let Err(e) = written {
            warn(format!("{}: {e}", path.display()));
            ok = false;
        }
    }
    ok
}

/// A non-fatal problem, printed as it happens; the run goes on.
fn warn(msg: impl std::fmt::Display) {
    eprintln!("error: {}", crate::secrets::redact(&msg.to_string()));
}

pub(crate) fn new_run_id() -> String {
    let now = chrono::Utc::now();
    format!(
        "{}-{:06x}",
        now.format("%Y%m%dT%H%M%SZ"),
        rand::random::<u32>() & 0xff_ffff
    )
}

/// The run's id: `--run-id`; for a shard under `--start-at`, one from that time, which
/// every shard has alike (so they stamp and name alike); else a new one.
fn run_id_of(a: &RunOptions) -> String {
    if let Some(id) = &a.run_id {
        return id.clone();
    }
    match (a.shard.is_whole(), a.start_at) {
        (false, Some(at)) => {
            let at: chrono::DateTime<chrono::Utc> = at.into();
            format!("{}-shared", at.format("%Y%m%dT%H%M%SZ"))
        }
        _ => new_run_id(),
    }
}

/// `reports/NAME-RUN`, and a shard's apart from its sisters', which share the run id.
fn default_out(name: &str, run_id: &str, shard: crate::engine::shard::Shard) -> String {
    match shard.is_whole() {
        true => format!("{}-{run_id}", safe(name)),
        false => format!("{}-{run_id}-shard{}", safe(name), shard.index),
    }
}

fn safe(name: &str) -> String {
    name.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || "-_.=".contains(c) {
                c
            } else {
                '_'
            }
        })
        .collect()
}

/// One target of one sweep point, ready to run.
struct Lane {
    name: String,
    /// The workload as this target runs it (see [`for_target`]).
    workload: Workload,
    runner: Runner,
    live: Arc<Live>,
    servers: Servers,
}

/// What a lane started for its target: an embedded server, or a server `--start`
/// names. Both stop with the lane, whatever ended it.
#[derive(Default)]
struct Servers {
    embedded: Option<Embedded>,
    started: Option<started::Started>,
}

impl Servers {
    async fn stop(self) {
        if let Some(s) = self.embedded {
            s.stop().await;
        }
        if let Some(s) = self.started {
            s.stop().await;
        }
    }
}

/// Everything one point (one workload variant) produced.
pub(crate) struct PointResult {
    pub(crate) label: Option<String>,
    pub(crate) reports: Vec<(String, Report, PathBuf)>,
    interrupted: bool,
    thresholds_ok: bool,
    /// Some output could not be written; the rest was, and the figures still print.
    write_failed: bool,
}

/// Run a workload against its targets, round by round, and write every output.
pub async fn run(a: RunOptions) -> Result<Finished, RunError> {
    let sweep = a
        .sweep
        .as_deref()
        .map(sweep::parse_sweep)
        .transpose()
        .map_err(RunError::Usage)?;
    let points = load_points(&a, sweep.as_ref())?;
    let level = level_of(&a, &points)?;
    let targets = parse_targets(&a.targets, &points[0].1.target).map_err(RunError::Usage)?;
    check_targets(&a, &targets)?;
    let starts = started::specs(&a.start, &targets).map_err(RunError::Usage)?;
    let run_id = run_id_of(&a);
    let w0 = &points[0].1;
    let out = a
        .out
        .clone()
        .unwrap_or_else(|| Path::new("reports").join(default_out(&w0.name, &run_id, a.shard)));
    let (stop, hurry) = (CancellationToken::new(), CancellationToken::new());
    let progress = Progress::new(a.quiet);
    let watcher = watch_signals(stop.clone(), hurry.clone(), progress.clone());
    let ticker = tick(&progress);
    if !a.quiet {
        progress.line(&banner(
            w0,
            &targets,
            sweep.as_ref(),
            level.as_ref(),
            &run_id,
        ));
    }
    let board = live::Board::new(
        &run_id,
        &w0.name,
        (!a.shard.is_whole()).then_some((a.shard.index, a.shard.count)),
    );
    let watchers = start_watchers(&a, &board).await?;
    let cx = RunCx {
        board: (!watchers.is_empty()).then(|| board.clone()),
        a: &a,
        targets: &targets,
        multi: targets.len() > 1 || sweep.is_some(),
        run_id: &run_id,
        stop: &stop,
        hurry: &hurry,
        progress: &progress,
        clock: round_clock(&a, &points),
        round_lines: level.is_none(),
        starts: &starts,
    };
    if let Some(level) = &level {
        let done = capacity::run(&cx, w0, level, &out).await;
        ticker.abort();
        watcher.abort();
        progress.finish();
        if !watchers.is_empty() && done.is_ok() {
            board.finish(out.join("capacity.html"));
            linger(&a, &watchers).await;
        }
        stop_watchers(watchers).await;
        return done;
    }
    let mut results: Vec<PointResult> = Vec::new();
    let mut fatal = None;
    for (label, w) in &points {
        if stop.is_cancelled() {
            break;
        }
        let point_dir = match label {
            Some(l) => out.join(safe(l)),
            None => out.clone(),
        };
        match run_point(&cx, w, label.clone(), &point_dir).await {
            Ok(p) => results.push(p),
            Err(e) => {
                fatal = Some(e);
                break;
            }
        }
    }
    ticker.abort();
    watcher.abort();
    progress.finish();
    if let Some(e) = fatal {
        stop_watchers(watchers).await;
        return Err(e);
    }
    let finished = emit(&a, &out, &targets, sweep.as_ref(), &results);
    if !watchers.is_empty() {
        board.finish(match (sweep.is_some(), targets.len() > 1) {
            (true, _) => out.join("sweep.html"),
            (false, true) => out.join("compare.html"),
            (false, false) => out.join("report.html"),
        });
        linger(&a, &watchers).await;
        stop_watchers(watchers).await;
    }
    Ok(finished)
}

/// `--dashboard` and `--metrics` started, each address said on stderr (even under
/// `--quiet`: it is asked for), with a warning for one beyond this host.
async fn start_watchers(
    a: &RunOptions,
    board: &Arc<live::Board>,
) -> Result<Vec<live::Server>, RunError> {
    let mut servers = Vec::new();
    for (addr, serves) in [
        (a.dashboard, live::Serves::Dashboard),
        (a.metrics, live::Serves::Metrics),
    ] {
        let Some(addr) = addr else { continue };
        let server = match live::serve(addr, board.clone(), serves).await {
            Ok(s) => s,
            Err(e) => {
                stop_watchers(servers).await;
                return Err(RunError::Usage(e.to_string()));
            }
        };
        let what = serves.name();
        eprintln!("loadmix: {what} at {}", server.url());
        if !live::is_loopback(&server.addr) {
            eprintln!(
                "warning: the {what} listens on {}, beyond this host: anyone who reaches it sees the run's figures and names",
                server.addr
            );
        }
        servers.push(server);
    }
    Ok(servers)
}

/// After the run: the pages stay up for `--linger`, or (the dashboard, when a terminal
/// can send the signal) until a signal.
async fn linger(a: &RunOptions, servers: &[live::Server]) {
    use std::io::IsTerminal;
    let until_signal = lingers_until_signal(a, std::io::stdin().is_terminal());
    if a.linger.is_none() && a.dashboard.is_some() && !until_signal {
        eprintln!(
            "loadmix: no terminal to stop it from, so the dashboard closes with the run \
             (--linger keeps it up)"
        );
    }
    let wait = a.linger.unwrap_or_default();
    if !until_signal && wait.is_zero() {
        return;
    }
    let urls: Vec<String> = servers.iter().map(live::Server::url).collect();
    let how = match until_signal {
        true => "until Ctrl-C".to_string(),
        false => format!("for {}", crate::workload::units::format_duration(wait)),
    };
    eprintln!(
        "loadmix: the run is over; {} stays up {how}",
        urls.join(" and ")
    );
    let mut signals = signals::Signals::install();
    match until_signal {
        true => {
            signals.next().await;
        }
        false => {
            tokio::select! {
                _ = signals.next() => {}
                _ = tokio::time::sleep(wait) => {}
            }
        }
    }
}

/// Whether the pages stay up until Ctrl-C: the dashboard's default, but only with a
/// terminal to press it in; a script or CI job without one would wait for good.
fn lingers_until_signal(a: &RunOptions, terminal: bool) -> bool {
    a.linger.is_none() && a.dashboard.is_some() && terminal
}

async fn stop_watchers(servers: Vec<live::Server>) {
    for s in servers {
        s.stop().await;
    }
}

/// Every workload variant (one, or one per sweep value), each checked, and checked to
/// fit in memory, before anything is sent.
fn load_points(
    a: &RunOptions,
    sweep: Option<&(String, Vec<String>)>,
) -> Result<Vec<(Option<String>, Workload)>, RunError> {
    let mut points: Vec<(Option<String>, Workload)> = Vec::new();
    match sweep {
        None => points.push((
            None,
            a.workload
                .load(&[])
                .map_err(|e| RunError::Usage(e.to_string()))?,
        )),
        Some((key, values)) => {
            for v in values {
                let w = Override::set(&format!("{key}={v}"))
                    .and_then(|o| a.workload.load(&[o]))
                    .map_err(|e| RunError::Usage(e.to_string()))?;
                points.push((Some(format!("{key}={v}")), w));
            }
        }
    }
    for (_, w) in &points {
        fits::check(w).map_err(RunError::Usage)?;
        // A team's members meet in their set-up, in one process. Shard i takes the users
        // u with u mod N = i, and user u is in team u mod count: when N divides every
        // count, each team's users are all on the shard of its number.
        let n = a.shard.count;
        if let Some(t) = w.teams.iter().find(|t| !t.count.is_multiple_of(n)) {
            return Err(RunError::Usage(format!(
                "--shard {}: the members of a team meet in one process, and shard i takes the users u with u mod {n} = i, so a team stays whole only when its count is a multiple of {n}: '{}' has {} (give it {}, or run whole)",
                a.shard,
                t.name,
                t.count,
                t.count.div_ceil(n).max(1) * n
            )));
        }
    }
    fits::bound_bodies();
    Ok(points)
}

/// `--capacity`'s service level, read against the workload, and the workload checked to
/// have an arrival rate to search; `None` without the flag.
fn level_of(
    a: &RunOptions,
    points: &[(Option<String>, Workload)],
) -> Result<Option<capacity::slo::Slo>, RunError> {
    let Some(text) = &a.capacity else {
        return Ok(None);
    };
    if a.sweep.is_some() {
        return Err(RunError::Usage(
            "--capacity and --sweep: one at a time (a capacity search varies the arrival rate itself)".into(),
        ));
    }
    if !a.shard.is_whole() {
        return Err(RunError::Usage(
            "--capacity and --shard: a search chooses each step from the last, so it runs in one process".into(),
        ));
    }
    let w = &points[0].1;
    capacity::base_rate(w).map_err(RunError::Usage)?;
    capacity::slo::parse(text, w)
        .map(Some)
        .map_err(RunError::Usage)
}

/// What the command line says of the targets that cannot work: `--order` with one
/// target, certificates or keys that do not load. `--insecure` is said aloud.
fn check_targets(a: &RunOptions, targets: &[NamedTarget]) -> Result<(), RunError> {
    if a.order.is_some() && targets.len() < 2 {
        return Err(RunError::Usage(
            "--order sets the order of several targets' rounds; give two or more --target".into(),
        ));
    }
    let https = targets
        .iter()
        .any(|t| matches!(&t.spec, TargetSpec::Url(u) if u.scheme.tls));
    // Certificates and keys are checked before anything is sent, whichever target uses them.
    if https || a.tls != TlsOptions::default() {
        TlsClient::new("localhost", &a.tls).map_err(|e| RunError::Usage(e.to_string()))?;
    }
    // Said even under --quiet: it changes what the figures can be trusted for.
    if https && a.tls.insecure {
        eprintln!(
            "warning: --insecure: server certificates are not verified (the report records it)"
        );
    }
    Ok(())
}

/// The first SIGINT or SIGTERM stops the run: set-up, the round, or the cleanup under
/// way ends, and its report is still written. A cleanup that began after it (the
/// stopped round's) is cut short by a second; a third quits at once.
fn watch_signals(
    stop: CancellationToken,
    hurry: CancellationToken,
    p: Progress,
) -> tokio::task::JoinHandle<()> {
    let mut signals = signals::Signals::install();
    tokio::spawn(async move {
        let first = signals.next().await;
        p.line(&format!(
            "interrupted ({}): stopping; the report of what ran will be written (signal again to cut its cleanup short)",
            first.name()
        ));
        stop.cancel();
        let second = signals.next().await;
        p.line(&format!(
            "{}: cutting the cleanup short; the report will be written (signal again to quit at once)",
            second.name()
        ));
        hurry.cancel();
        let third = signals.next().await;
        eprintln!("{}: quitting at once, without the report", third.name());
        std::process::exit(third.exit_status());
    })
}

/// The line that says what is about to run.
fn banner(
    w0: &Workload,
    targets: &[NamedTarget],
    sweep: Option<&(String, Vec<String>)>,
    level: Option<&capacity::slo::Slo>,
    run_id: &str,
) -> String {
    let names: Vec<String> = targets
        .iter()
        .map(|t| format!("{} ({})", t.name, t.spec))
        .collect();
    let shape = match level {
        Some(l) => format!(
            "capacity search at {}, steps of {}",
            l.text,
            w0.length_text()
        ),
        None => format!(
            "{} users · {} round(s) × {}",
            w0.total_users(),
            w0.run.rounds,
            w0.length_text()
        ),
    };
    format!(
        "loadmix: {} against {} · {shape}{} · run {run_id}",
        w0.name,
        names.join(", "),
        sweep
            .map(|(k, v)| format!(" · sweep {k} over {}", v.join(",")))
            .unwrap_or_default()
    )
}

/// The progress line redrawn four times a second until aborted.
fn tick(progress: &Progress) -> tokio::task::JoinHandle<()> {
    let p = progress.clone();
    tokio::spawn(async move {
        loop {
            tokio::time::sleep(Duration::from_millis(250)).await;
            p.tick();
        }
    })
}

/// Under `--start-at`, one clock for the whole run, every target and sweep point: slot n
/// is the n-th round run, in the order every shard runs them. A slot fits the longest
/// round, and under an iterations-bound round only the first round waits.
fn round_clock(
    a: &RunOptions,
    points: &[(Option<String>, Workload)],
) -> Option<Arc<crate::engine::shard::RoundClock>> {
    let at = a.start_at?;
    let longest = points
        .iter()
        .try_fold(Duration::ZERO, |m, (_, w)| match w.run.stop {
            Stop::Duration(d) => Some(m.max(d)),
            Stop::Iterations(_) => None,
        });
    let every = a
        .round_every
        .or_else(|| longest.and_then(|d| d.checked_add(DEFAULT_ROUND_GAP)));
    Some(Arc::new(crate::engine::shard::RoundClock::new(at, every)))
}

/// A monitor meant for one target (`...@TARGET`) must name a target of this run.
fn only_for(flag: &str, target: &str, targets: &[NamedTarget]) -> Result<(), RunError> {
    if targets.iter().any(|x| x.name == target) {
        return Ok(());
    }
    let names: Vec<&str> = targets.iter().map(|x| x.name.as_str()).collect();
    Err(RunError::Usage(format!(
        "monitor: '{flag}': there is no target named '{target}' (targets: {})",
        names.join(", ")
    )))
}

/// The `--label`s of one target: `KEY=VALUE@TARGET` belongs to that target only (when
/// TARGET names one of this run's targets; otherwise the '@' is part of the value), every
/// other label to all.
fn labels_for(
    labels: &[(String, String)],
    target: &str,
    targets: &[NamedTarget],
) -> std::collections::BTreeMap<String, String> {
    labels
        .iter()
        .filter_map(|(k, v)| match v.rsplit_once('@') {
            Some((value, t)) if targets.iter().any(|x| x.name == t) => {
                (t == target).then(|| (k.clone(), value.to_string()))
            }
            _ => Some((k.clone(), v.clone())),
        })
        .collect()
}

/// Whether a monitor meant for `only` (or for every target) watches `target`'s rounds.
fn watches(only: &Option<String>, target: &str) -> bool {
    only.as_ref().is_none_or(|n| n == target)
}

/// The processes to watch: the workload's `monitor.process`, then `--monitor-process`,
/// each for every target or (`PROC@TARGET`) for one. One that is not running now is said,
/// not fatal: it is looked for every second.
fn monitors_of(
    a: &RunOptions,
    w: &Workload,
    targets: &[NamedTarget],
) -> Result<Vec<(Watch, Option<String>)>, RunError> {
    let mut out: Vec<(Watch, Option<String>)> = Vec::new();
    for s in w.monitor_processes.iter().chain(&a.monitor_process) {
        let (watch, target) =
            parse_watch(s).map_err(|m| RunError::Usage(format!("monitor: {m}")))?;
        if let Some(t) = &target {
            only_for(s, t, targets)?;
        }
        if let Err(m) = watch.spec.check() {
            eprintln!("warning: {m}; it is looked for every second of every round");
        }
        if !out
            .iter()
            .any(|(w, t)| w.spec == watch.spec && *t == target)
        {
            out.push((watch, target));
        }
    }
    Ok(out)
}

/// The metrics to scrape: the workload's `monitor.prometheus`, then
/// `--monitor-prometheus URL#SERIES,SERIES[@TARGET]` (`@TARGET`: only during that
/// target's rounds, for a server whose exporter is its own).
fn metrics_of(
    a: &RunOptions,
    w: &Workload,
    targets: &[NamedTarget],
) -> Result<Vec<(MetricsSpec, Option<String>)>, RunError> {
    let usage = |m: String| RunError::Usage(format!("monitor: {m}"));
    let mut out = Vec::new();
    for m in &w.monitor_metrics {
        out.push((
            MetricsSpec::new(&m.url, m.series.clone()).map_err(usage)?,
            None,
        ));
    }
    for flag in &a.monitor_prometheus {
        let (url, series) = flag.split_once('#').ok_or_else(|| {
            usage(format!(
                "--monitor-prometheus {flag}: name the series after '#', e.g. http://127.0.0.1:9187/metrics#pg_stat_database_xact_commit"
            ))
        })?;
        // A series name has no '@' (Prometheus names are letters, digits, '_' and ':').
        let (series, target) = match series.rsplit_once('@') {
            Some((s, t)) => (s, Some(t.trim().to_string())),
            None => (series, None),
        };
        if let Some(t) = &target {
            only_for(flag, t, targets)?;
        }
        let series = series.split(',').map(|s| s.trim().to_string()).collect();
        out.push((MetricsSpec::new(url, series).map_err(usage)?, target));
    }
    Ok(out)
}

/// The workload as one target runs it. A target URL with a path names where the server's
/// services live (`loadmix serve` prints such a URL), so it replaces the workload's
/// `context` rather than having it appended: `--target http://host:8080/cosmo` and
/// `context: /cosmo` mean `/cosmo/...`, not `/cosmo/cosmo/...`.
pub(crate) fn for_target(w: &Workload, spec: &TargetSpec) -> Workload {
    let mut wt = w.clone();
    if let TargetSpec::Url(u) = spec
        && !u.base_path.is_empty()
    {
        wt.context = String::new();
    }
    wt
}

/// What every point of a run shares: the options, the targets, the run's identity, its
/// stop signal, progress and round clock.
struct RunCx<'a> {
    a: &'a RunOptions,
    /// The live pages' board, when `--dashboard` or `--metrics` serves one.
    board: Option<Arc<live::Board>>,
    targets: &'a [NamedTarget],
    /// Several targets or sweep points: output goes into a folder each.
    multi: bool,
    run_id: &'a str,
    stop: &'a CancellationToken,
    /// A second signal: cut short a cleanup that began after the first.
    hurry: &'a CancellationToken,
    progress: &'a Progress,
    clock: Option<Arc<crate::engine::shard::RoundClock>>,
    /// A line on stderr after each round (a capacity search says each step instead).
    round_lines: bool,
    /// The servers loadmix starts, by target name.
    starts: &'a [(String, started::StartSpec)],
}

/// One workload variant against every target: set each up, run their rounds in
/// alternation, then report each and compare them.
async fn run_point(
    cx: &RunCx<'_>,
    w: &Workload,
    label: Option<String>,
    dir: &Path,
) -> Result<PointResult, RunError> {
    let mut lanes = open_lanes(cx, w, label.as_deref(), dir).await?;
    let order = cx.a.order.unwrap_or(Order::Balanced);
    run_rounds(cx, w, label.as_deref(), order, &mut lanes).await;
    // What users kept from round to round made goes once, after the last round (or a
    // stop), while each target's embedded server still runs.
    for lane in &mut lanes {
        lane.runner.close(&lane.workload).await;
    }
    let mut point = PointResult {
        label,
        reports: Vec::new(),
        interrupted: false,
        thresholds_ok: true,
        write_failed: false,
    };
    // A file that cannot be written must not cost the other targets' reports, nor the
    // table on stdout: note it, carry on, and exit 4 at the end.
    for lane in lanes {
        report_lane(cx, lane, dir, order, &mut point).await;
    }
    if point.reports.len() > 1 {
        point.write_failed |= !write_comparison(dir, &point.reports);
    }
    Ok(point)
}

/// Stop the embedded servers of lanes already set up, when a later one cannot be.
async fn stop_lanes(lanes: Vec<Lane>) {
    for l in lanes {
        l.servers.stop().await;
    }
}

/// Every target set up: its server (embedded) or address, its engine and users.
async fn open_lanes(
    cx: &RunCx<'_>,
    w: &Workload,
    label: Option<&str>,
    dir: &Path,
) -> Result<Vec<Lane>, RunError> {
    let monitors = monitors_of(cx.a, w, cx.targets)?;
    let metrics = metrics_of(cx.a, w, cx.targets)?;
    let mut lanes: Vec<Lane> = Vec::new();
    for t in cx.targets {
        let watch = Watching {
            monitors: monitors
                .iter()
                .filter(|(_, only)| watches(only, &t.name))
                .map(|(w, _)| w.clone())
                .collect(),
            metrics: metrics
                .iter()
                .filter(|(_, only)| watches(only, &t.name))
                .map(|(m, _)| m.clone())
                .collect(),
        };
        match open_lane(cx, w, t, label, dir, watch).await {
            Ok(lane) => lanes.push(lane),
            Err(e) => {
                stop_lanes(lanes).await;
                return Err(e);
            }
        }
    }
    Ok(lanes)
}

/// What one target's rounds watch on the server's side.
struct Watching {
    monitors: Vec<Watch>,
    metrics: Vec<MetricsSpec>,
}

/// One target set up: where it is, and its engine with the run's settings.
async fn open_lane(
    cx: &RunCx<'_>,
    w: &Workload,
    t: &NamedTarget,
    label: Option<&str>,
    dir: &Path,
    mut watch: Watching,
) -> Result<Lane, RunError> {
    let a = cx.a;
    let wt = for_target(w, &t.spec);
    let (endpoint, servers) = reach(cx, w, t, dir, &mut watch).await?;
    let live = Arc::new(Live::new(&crate::engine::label_table(&wt)));
    let watched = crate::monitor::Latest::default();
    if let Some(b) = &cx.board {
        b.add(live::Lane {
            target: t.name.clone(),
            point: label.map(str::to_string),
            rounds: w.run.rounds,
            warmup_rounds: w.run.warmup_rounds,
            warmup_s: w.run.warmup.as_secs_f64(),
            round_s: match w.run.stop {
                crate::workload::Stop::Duration(d) => Some(d.as_secs_f64()),
                crate::workload::Stop::Iterations(_) => None,
            },
            live: live.clone(),
            rules: w.thresholds.iter().map(live_rule).collect(),
            watched: watched.clone(),
        });
    }
    let p = cx.progress.clone();
    let tallies: Vec<crate::workload::Tally> = w
        .classes
        .iter()
        .flat_map(|c| (0..c.labels.len()).map(|i| c.kind.tally(i)))
        .collect();
    let tag = match (cx.multi, label) {
        (true, Some(l)) => format!("{l} {}", t.name),
        (true, None) => t.name.clone(),
        (false, _) => w.name.clone(),
    };
    let cfg = EngineConfig {
        endpoint: Arc::new(endpoint),
        stop: cx.stop.clone(),
        hurry: cx.hurry.clone(),
        log_ops: a.log_ops.is_some(),
        preflight: a.preflight,
        run_id: cx.run_id.into(),
        on_round: cx.round_lines.then(|| -> crate::engine::RoundCallback {
            Arc::new(move |r: &RoundResult, of: u32| p.line(&round_line(&tag, r, of, &tallies)))
        }),
        live: Some(live.clone()),
        keep_data: a.keep_data,
        cleanup_timeout: a.cleanup_timeout,
        monitors: watch.monitors,
        watched,
        metrics: watch.metrics,
        shard: a.shard,
        clock: cx.clock.clone(),
    };
    match Runner::new(&wt, cfg).await {
        Ok(runner) => Ok(Lane {
            name: t.name.clone(),
            workload: wt,
            runner,
            live,
            servers,
        }),
        Err(e) => {
            servers.stop().await;
            let msg = format!("target {}: {e}", t.name);
            Err(match &e {
                EngineError::Protocol(ProtocolError::Setup(_)) => RunError::Usage(msg),
                _ => RunError::Unreachable(msg),
            })
        }
    }
}

/// A threshold as the dashboard judges it.
fn live_rule(t: &crate::workload::Threshold) -> live::Rule {
    use crate::workload::{Comparison, ThresholdMetric};
    let metric = ThresholdMetric::NAMES
        .iter()
        .find(|(_, m)| *m == t.metric)
        .map_or("mean", |(n, _)| n);
    live::Rule {
        text: t.text.clone(),
        op: t.op.clone(),
        metric,
        cmp: match t.cmp {
            Comparison::Lt => "<",
            Comparison::Le => "<=",
            Comparison::Gt => ">",
            Comparison::Ge => ">=",
        },
        value: t.value,
    }
}

/// The target's server started when `--start` names it (its group then watched), and
/// where it is; what was started is stopped again if it cannot be reached.
async fn reach(
    cx: &RunCx<'_>,
    w: &Workload,
    t: &NamedTarget,
    dir: &Path,
    watch: &mut Watching,
) -> Result<(Endpoint, Servers), RunError> {
    let mut servers = Servers::default();
    if let Some((_, spec)) = cx.starts.iter().find(|(n, _)| *n == t.name) {
        let at = match cx.targets.len() > 1 {
            true => dir.join(safe(&t.name)).join("server"),
            false => dir.join("server"),
        };
        let s = started::Started::start(&t.name, spec, &at, cx.stop)
            .await
            .map_err(|e| RunError::Unreachable(e.to_string()))?;
        watch.monitors.push(s.watch());
        servers.started = Some(s);
    }
    match endpoint_of(cx.a, w, t, dir).await {
        Ok((e, embedded)) => {
            servers.embedded = embedded;
            Ok((e, servers))
        }
        Err(e) => {
            servers.stop().await;
            Err(e)
        }
    }
}

/// Where a target is: an embedded server started for it, or its URL resolved.
async fn endpoint_of(
    a: &RunOptions,
    w: &Workload,
    t: &NamedTarget,
    dir: &Path,
) -> Result<(Endpoint, Option<Embedded>), RunError> {
    match &t.spec {
        TargetSpec::Embedded { store } => {
            let s = start_embedded(w, t, store, dir).await?;
            let mut e = Endpoint::local(s.handle().addr, &t.spec.to_string());
            e.broker = s.handle().stomp_addr;
            Ok((e, Some(s)))
        }
        TargetSpec::Url(u) => {
            let address = Address {
                host: &u.host,
                port: u.port,
                base_path: &u.base_path,
                raw: &u.raw,
                scheme: u.scheme,
            };
            match Endpoint::resolve(address, &a.tls) {
                Ok(e) => Ok((e, None)),
                Err(e) => {
                    let m = format!("target {}: {e}", t.name);
                    Err(match e {
                        EndpointError::Tls(_) => RunError::Usage(m),
                        EndpointError::Resolve(_) => RunError::Unreachable(m),
                    })
                }
            }
        }
    }
}

/// The embedded server for a target, on the store it names (a SQLite file in the output
/// folder unless a path is given), knowing the admin the workload's users will ask for.
async fn start_embedded(
    w: &Workload,
    t: &NamedTarget,
    store: &EmbeddedStore,
    dir: &Path,
) -> Result<Embedded, RunError> {
    let store = match store {
        EmbeddedStore::Memory => server::StoreSpec::Memory,
        EmbeddedStore::Sqlite(p) if p.is_empty() => {
            std::fs::create_dir_all(dir)
                .map_err(|e| RunError::Write(format!("cannot create {}: {e}", dir.display())))?;
            let file = dir.join(format!("{}.db", safe(&t.name)));
            server::StoreSpec::Sqlite(file.display().to_string())
        }
        EmbeddedStore::Sqlite(p) => server::StoreSpec::Sqlite(p.clone()),
    };
    let mut cfg = ServerConfig {
        store,
        context: w.context.clone(),
        stomp_anonymous: true,
        // Only this run reaches it, and all its users come from one address.
        max_per_address: server::MAX_CONNECTIONS,
        ..ServerConfig::default()
    };
    // The in-process server knows the admin the workload's users will ask for
    // (`accounts.admin`, `$LOADMIX_ADMIN_PASSWORD`), so the two always agree.
    if let Ok(AccountPlan::Cmp { admin, .. }) = AccountPlan::resolve(w, Path::new(&w.file).parent())
    {
        (cfg.admin_user, cfg.admin_password) = admin;
    }
    Embedded::start(cfg).await.map_err(|e| match e {
        server::ServerError::Store { .. } => RunError::Usage(e.to_string()),
        _ => RunError::Unreachable(format!("embedded server: {e}")),
    })
}

/// Warm-up rounds first, in the same order and thrown away; then the measured rounds,
/// the targets taking turns in `order`.
async fn run_rounds(
    cx: &RunCx<'_>,
    w: &Workload,
    label: Option<&str>,
    order: Order,
    lanes: &mut [Lane],
) {
    let classes: Vec<String> = w.classes.iter().map(|c| c.name.clone()).collect();
    let prefix = label.map(|l| format!("{l} ")).unwrap_or_default();
    let schedule = (1..=w.run.warmup_rounds)
        .map(|k| (true, k))
        .chain((1..=w.run.rounds).map(|r| (false, r)));
    for (warmup, r) in schedule {
        for i in order.sequence(lanes.len(), r, w.run.seed) {
            if cx.stop.is_cancelled() {
                return;
            }
            let lane = &mut lanes[i];
            let what = match warmup {
                true => format!(
                    "{prefix}{} warm-up round {r}/{} (not counted)",
                    lane.name, w.run.warmup_rounds
                ),
                false => format!("{prefix}{} round {r}/{}", lane.name, w.run.rounds),
            };
            let live = lane.live.clone();
            cx.progress
                .begin(what, live, classes.clone(), w.length_text());
            match warmup {
                true => lane.runner.warmup_round(&lane.workload, r).await,
                false => lane.runner.round(&lane.workload, r).await,
            }
        }
    }
}

/// One target's report: built, labelled, judged against its thresholds and written with
/// its op log; a file that cannot be written is noted in `point` and the rest go on.
async fn report_lane(
    cx: &RunCx<'_>,
    lane: Lane,
    dir: &Path,
    order: Order,
    point: &mut PointResult,
) {
    let (a, targets) = (cx.a, cx.targets);
    lane.servers.stop().await;
    let w = &lane.workload;
    let target_clock = lane.runner.target_clock();
    let result = lane.runner.finish(w);
    point.interrupted |= result.interrupted;
    let target = targets
        .iter()
        .find(|t| t.name == lane.name)
        .map(|t| t.spec.to_string())
        .unwrap_or_default();
    let mut rep = report::build(w, &target, &result);
    rep.name = Some(lane.name.clone());
    rep.target_clock = target_clock.map(|c| report::model::TargetClock {
        offset_ms: c.offset_ms,
        plus_minus_ms: c.plus_minus_ms,
        answers: c.answers,
    });
    if targets.len() > 1 {
        rep.order = Some(order.name().to_string());
    }
    if !a.shard.is_whole() {
        rep.shard = Some(report::model::ShardInfo {
            index: a.shard.index,
            count: a.shard.count,
        });
        // Producers it never saw may be another shard's: not judged here, but at merge.
        rep.ledger = result.ledger.as_ref().map(|l| l.to_record(false));
    }
    rep.note = a.note.clone();
    rep.labels = labels_for(&a.labels, &lane.name, targets);
    if target.starts_with("https://") {
        rep.tls = Some(TlsInfo {
            verified: !a.tls.insecure,
            ca_cert: a.tls.ca_cert.as_ref().map(|p| p.display().to_string()),
            client_certificate: a.tls.client_cert.is_some(),
        });
    }
    point.thresholds_ok &= report::thresholds::evaluate(&w.thresholds, &mut rep);
    let tdir = if targets.len() > 1 {
        dir.join(safe(&lane.name))
    } else {
        dir.to_path_buf()
    };
    if let Err(e) = report::write_dir(&rep, &tdir) {
        warn(e);
        point.write_failed = true;
    }
    if let Some(p) = &a.log_ops {
        let path = if cx.multi {
            tdir.join(p.file_name().unwrap_or_else(|| "ops.csv".as_ref()))
        } else {
            p.clone()
        };
        let written = report::oplog::render(w, &result.op_log)
            .map_err(|e| e.to_string())
            .and_then(|text| report::write_file(&path, &text).map_err(|e| e.to_string()));
        if let Err(e) = written {
            warn(format!("op log {}: {e}", path.display()));
            point.write_failed = true;
        }
    }
    point.reports.push((lane.name, rep, tdir));
}

/// The targets compared, as text, Markdown, HTML and JSON in `dir`; false when a file
/// could not be written (each is named on stderr).
fn write_comparison(dir: &Path, reports: &[(String, Report, PathBuf)]) -> bool {
    let names = compare::short_names(
        &reports
            .iter()
            .map(|(n, _, _)| n.clone())
            .collect::<Vec<_>>(),
    );
    let reps: Vec<Report> = reports.iter().map(|(_, r, _)| r.clone()).collect();
    let Ok(c) = compare::compare(&names, &reps, false) else {
        return true;
    };
    let files = [
        (
            "compare.txt",
            Ok(compare::render_table_at(&c, compare::FILE_WIDTH)),
        ),
        ("compare.md", Ok(compare::render_markdown(&c))),
        ("compare.html", Ok(report::html::comparison(&c))),
        (
            "compare.json",
            serde_json::to_string_pretty(&c).map_err(|e| e.to_string()),
        ),
    ];
    write_all(dir, files)
}

/// Print the figures and write the outputs that span targets or points.
fn emit(
    a: &RunOptions,
    out: &Path,
    targets: &[NamedTarget],
    sweep: Option<&(String, Vec<String>)>,
    results: &[PointResult],
) -> Finished {
    let mut done = Finished {
        thresholds_failed: results.iter().any(|p| !p.thresholds_ok),
        write_failed: results.iter().any(|p| p.write_failed),
        interrupted: results.iter().any(|p| p.interrupted)
            || results.len() < sweep.map_or(1, |(_, v)| v.len()),
    };
    let stdout = match sweep {
        None => {
            let Some(p) = results.first() else {
                return done;
            };
            let (text, failed) = single_point(a, p);
            done.write_failed |= failed;
            text
        }
        Some((key, values)) => {
            let names: Vec<String> = targets.iter().map(|t| t.name.clone()).collect();
            let s = sweep::Sweep::new(key, values, &names, results);
            done.write_failed |= !s.write(out, results);
            match a.format {
                StdoutFormat::Table => s.table(),
                StdoutFormat::Json => json_text(&s),
                StdoutFormat::Nothing => String::new(),
            }
        }
    };
    print!("{}", crate::secrets::redact(&stdout));
    let _ = std::io::stdout().flush();
    if !a.quiet {
        eprintln!("reports written to {}", out.display());
    }
    done
}

/// The stdout text of a run without a sweep, and whether `--html` or `--csv` failed.
fn single_point(a: &RunOptions, p: &PointResult) -> (String, bool) {
    let mut failed = false;
    let names: Vec<String> = compare::short_names(
        &p.reports
            .iter()
            .map(|(n, _, _)| n.clone())
            .collect::<Vec<_>>(),
    );
    let reps: Vec<Report> = p.reports.iter().map(|(_, r, _)| r.clone()).collect();
    let width = report::table::console_width(a.wide);
    let text = match (a.format, reps.as_slice()) {
        (StdoutFormat::Nothing, _) => String::new(),
        (StdoutFormat::Table, [one]) => report::table::render_for(one, width),
        (StdoutFormat::Json, [one]) => json_text(one),
        (StdoutFormat::Table, _) => {
            let mut s = String::new();
            for (n, r, _) in &p.reports {
                s.push_str(&format!(
                    "== {n}\n{}\n",
                    report::table::render_for(r, width)
                ));
            }
            if let Ok(c) = compare::compare(&names, &reps, false) {
                s.push_str(&compare::render_table(&c));
            }
            s
        }
        (StdoutFormat::Json, _) => {
            #[derive(serde::Serialize)]
            struct Several<'a> {
                reports: &'a [Report],
                comparison: Option<compare::Comparison>,
            }
            let all = Several {
                reports: &reps,
                comparison: compare::compare(&names, &reps, false).ok(),
            };
            json_text(&all)
        }
    };
    // --html and --csv name files for the (first) report; the CSV holds every target's rows.
    if let Some(first) = reps.first() {
        if let Some(h) = &a.html
            && let Err(e) = report::write_file(h, &report::html::report(first))
        {
            warn(e);
            failed = true;
        }
        if let Some(c) = &a.csv {
            let text: Result<String, csv::Error> = reps
                .iter()
                .enumerate()
                .map(|(i, r)| report::csv::render(r, i == 0))
                .collect();
            let written = text
                .map_err(|e| e.to_string())
                .and_then(|t| report::write_file(c, &t).map_err(|e| e.to_string()));
            if let Err(e) = written {
                warn(format!("{}: {e}", c.display()));
                failed = true;
            }
        }
    }
    (text, failed)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_label_or_monitor_may_belong_to_one_target() {
        let named = |n: &str| NamedTarget {
            name: n.into(),
            spec: TargetSpec::Embedded {
                store: EmbeddedStore::Memory,
            },
        };
        let targets = [named("small"), named("large")];
        let labels = vec![
            ("jvm".to_string(), "-Xmx64m@small".to_string()),
            ("jvm".to_string(), "-Xmx512m@large".to_string()),
            ("owner".to_string(), "ops@example.net".to_string()),
        ];
        let small = labels_for(&labels, "small", &targets);
        assert_eq!(small["jvm"], "-Xmx64m");
        assert_eq!(
            small["owner"], "ops@example.net",
            "not a target: kept whole"
        );
        assert_eq!(labels_for(&labels, "large", &targets)["jvm"], "-Xmx512m");
        assert!(watches(&None, "small") && watches(&Some("small".into()), "small"));
        assert!(!watches(&Some("large".into()), "small"));
        assert!(only_for("x@small", "small", &targets).is_ok());
        let e = only_for("x@tiny", "tiny", &targets)
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("no target named 'tiny'") && e.contains("small, large"),
            "{e}"
        );
    }

    #[test]
    fn orders_balance_and_shuffle_reproducibly() {
        assert_eq!(Order::Alternate.sequence(2, 2, 1), [0, 1]);
        assert_eq!(Order::Balanced.sequence(2, 1, 1), [0, 1]);
        assert_eq!(Order::Balanced.sequence(2, 2, 1), [1, 0]);
        assert_eq!(Order::Balanced.sequence(3, 4, 1), [2, 1, 0]);
        let a: Vec<Vec<usize>> = (1..=6).map(|r| Order::Shuffle.sequence(4, r, 7)).collect();
        let b: Vec<Vec<usize>> = (1..=6).map(|r| Order::Shuffle.sequence(4, r, 7)).collect();
        assert_eq!(a, b, "seeded");
        assert!(a.iter().any(|s| s != &vec![0, 1, 2, 3]), "{a:?}");
        for s in &a {
            let mut sorted = s.clone();
            sorted.sort();
            assert_eq!(sorted, [0, 1, 2, 3]);
        }
    }

    #[test]
    fn a_target_path_replaces_the_context() {
        let dir = tempfile::tempdir().unwrap();
        let f = dir.path().join("w.yaml");
        std::fs::write(
            &f,
            "context: /cosmo\nusers: [{class: a, protocol: http, count: 1, mix: {g: {weight: 1, path: /}}}]\n",
        )
        .unwrap();
        let w = crate::workload::load(&f, &[]).unwrap();
        let with_path = TargetSpec::parse("http://127.0.0.1:8080/cosmo").unwrap();
        let without = TargetSpec::parse("http://127.0.0.1:8080").unwrap();
        assert_eq!(for_target(&w, &with_path).context, "");
        assert_eq!(for_target(&w, &without).context, "/cosmo");
    }
}
