//! A lane: one target of a point, from its endpoint (an embedded server started, a URL
//! resolved) through its rounds to its report.

use std::path::Path;
use std::sync::Arc;

use super::embedded::Embedded;
use super::faults::StartedGroup;
use super::output::{safe, warn, write_comparison};
use super::progress::round_line;
use super::targets::NamedTarget;
use super::watch::{metrics_of, monitors_of, watches};
use super::{Order, PointResult, RunCx, RunError, RunOptions, for_target, labels_for, started};
use crate::engine::{EngineConfig, EngineError, RoundResult, Runner};
use crate::formats::scheme::Family;
use crate::live;
use crate::metrics::Live;
use crate::monitor::Watch;
use crate::monitor::prometheus::MetricsSpec;
use crate::protocol::{AccountPlan, ProtocolError};
use crate::report::{self, TlsInfo};
use crate::server::{self, ServerConfig};
use crate::transport::EndpointError;
use crate::transport::{Address, Endpoint};
use crate::workload::{EmbeddedStore, TargetSpec, Workload};

/// One target of one sweep point, ready to run.
pub(super) struct Lane {
    pub(super) name: String,
    /// The workload as this target runs it (see [`for_target`]).
    pub(super) workload: Workload,
    pub(super) runner: Runner,
    pub(super) live: Arc<Live>,
    pub(super) servers: Servers,
}

/// What a lane started for its target: an embedded server, or a server `--start`
/// names. Both stop with the lane, whatever ended it.
#[derive(Default)]
pub(super) struct Servers {
    pub(super) embedded: Option<Embedded>,
    pub(super) started: Option<Arc<StartedGroup>>,
    /// The fault timeline's proxies, closed with the lane.
    pub(super) faults: Option<Arc<crate::fault::Injector>>,
}

impl Servers {
    async fn stop(self) {
        if let Some(f) = self.faults {
            f.stop();
        }
        if let Some(s) = self.embedded {
            s.stop().await;
        }
        if let Some(s) = self.started {
            s.stop().await;
        }
    }
}

/// One workload variant against every target: set each up, run their rounds in
/// alternation, then report each and compare them.
pub(super) async fn run_point(
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
pub(super) async fn stop_lanes(lanes: Vec<Lane>) {
    for l in lanes {
        l.servers.stop().await;
    }
}

/// Every target set up: its server (embedded) or address, its engine and users.
pub(super) async fn open_lanes(
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
pub(super) struct Watching {
    pub(super) monitors: Vec<Watch>,
    pub(super) metrics: Vec<MetricsSpec>,
}

/// One target set up: where it is, and its engine with the run's settings.
pub(super) async fn open_lane(
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
        faults: servers.faults.clone(),
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
pub(super) fn live_rule(t: &crate::workload::Threshold) -> live::Rule {
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

/// A lane's own folder: the point's, or, where it has several targets, the target's in it.
fn lane_dir(dir: &Path, target: &str, targets: usize) -> std::path::PathBuf {
    match targets > 1 {
        true => dir.join(safe(target)),
        false => dir.to_path_buf(),
    }
}

/// The target's server started when `--start` names it (its group then watched), and
/// where it is; what was started is stopped again if it cannot be reached.
pub(super) async fn reach(
    cx: &RunCx<'_>,
    w: &Workload,
    t: &NamedTarget,
    dir: &Path,
    watch: &mut Watching,
) -> Result<(Endpoint, Servers), RunError> {
    let mut servers = Servers::default();
    let lane_dir = lane_dir(dir, &t.name, cx.targets.len());
    if let Some((_, spec)) = cx.starts.iter().find(|(n, _)| *n == t.name) {
        let s = started::Started::start(&t.name, spec, &lane_dir.join("server"), cx.stop)
            .await
            .map_err(|e| RunError::Unreachable(e.to_string()))?;
        watch.monitors.push(s.watch());
        servers.started = Some(Arc::new(StartedGroup::new(&t.name, spec, cx.stop, s)));
    }
    let mut endpoint = match endpoint_of(cx.a, w, t, dir).await {
        Ok((e, embedded)) => {
            servers.embedded = embedded;
            e
        }
        Err(e) => {
            servers.stop().await;
            return Err(e);
        }
    };
    match super::faults::injector(w, t, &mut endpoint, servers.started.clone(), &lane_dir).await {
        Ok(f) => {
            servers.faults = f;
            Ok((endpoint, servers))
        }
        Err(e) => {
            servers.stop().await;
            Err(e)
        }
    }
}

/// Where a target is: an embedded server started for it, or its URL resolved.
pub(super) async fn endpoint_of(
    a: &RunOptions,
    w: &Workload,
    t: &NamedTarget,
    dir: &Path,
) -> Result<(Endpoint, Option<Embedded>), RunError> {
    match &t.spec {
        TargetSpec::Embedded { store } => {
            let s = start_embedded(w, t, store, dir).await?;
            let mut e = Endpoint::local(s.handle().addr, &t.spec.to_string());
            // Its broker listens on a port of its own.
            e.ports
                .extend(s.handle().stomp_addr.map(|a| (Family::Stomp, a)));
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
pub(super) async fn start_embedded(
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
pub(super) async fn run_rounds(
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
pub(super) async fn report_lane(
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
        rep.ledger = result.products.ledger.as_ref().map(|l| l.to_record(false));
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
    let tdir = lane_dir(dir, &lane.name, targets.len());
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
