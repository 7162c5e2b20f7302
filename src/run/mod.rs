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
mod faults;
pub(crate) mod fits;
mod lanes;
mod output;
mod progress;
mod shell;
pub(crate) mod signals;
pub(crate) mod started;
pub(crate) mod sweep;
pub(crate) mod targets;
mod watch;

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use tokio_util::sync::CancellationToken;

use crate::live;
use crate::report::{self, Report, compare};
use crate::transport::{TlsClient, TlsOptions};
use crate::workload::{LoadOptions, Override, Stop, TargetSpec, Workload};
use lanes::{Lane, open_lanes, report_lane, run_point};
use output::{default_out, emit, json_text, run_id_of, safe, warn, write_all};
use progress::Progress;
pub(crate) use targets::{NamedTarget, parse_targets};
use watch::{linger, start_watchers, stop_watchers, watch_signals};

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
    faults::check(&points[0].1, &targets, &starts, a.shard.is_whole())?;
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
    use crate::run::watch::watches;
    use crate::workload::EmbeddedStore;

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
