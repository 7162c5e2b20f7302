//! What watches a run beside its rounds: the server's monitors and metrics endpoints,
//! the live pages, signals, and how long the pages linger after the last round.

use std::sync::Arc;

use tokio_util::sync::CancellationToken;

use super::progress::Progress;
use super::targets::NamedTarget;
use super::{RunError, RunOptions, only_for, signals};
use crate::live;
use crate::monitor::prometheus::MetricsSpec;
use crate::monitor::{Watch, parse_watch};
use crate::workload::Workload;

/// `--dashboard` and `--metrics` started, each address said on stderr (even under
/// `--quiet`: it is asked for), with a warning for one beyond this host.
pub(super) async fn start_watchers(
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
pub(super) async fn linger(a: &RunOptions, servers: &[live::Server]) {
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
pub(super) fn lingers_until_signal(a: &RunOptions, terminal: bool) -> bool {
    a.linger.is_none() && a.dashboard.is_some() && terminal
}

pub(super) async fn stop_watchers(servers: Vec<live::Server>) {
    for s in servers {
        s.stop().await;
    }
}

/// The first SIGINT or SIGTERM stops the run: set-up, the round, or the cleanup under
/// way ends, and its report is still written. A cleanup that began after it (the
/// stopped round's) is cut short by a second; a third quits at once.
pub(super) fn watch_signals(
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

/// Whether a monitor meant for `only` (or for every target) watches `target`'s rounds.
pub(super) fn watches(only: &Option<String>, target: &str) -> bool {
    only.as_ref().is_none_or(|n| n == target)
}

/// The processes to watch: the workload's `monitor.process`, then `--monitor-process`,
/// each for every target or (`PROC@TARGET`) for one. One that is not running now is said,
/// not fatal: it is looked for every second.
pub(super) fn monitors_of(
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
pub(super) fn metrics_of(
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
