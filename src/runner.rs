//! What `loadmix run` does around the engine: one or more named targets run round by round
//! in alternation (A B A B ..., so drift on a shared machine hits them alike), optional
//! sweeps of one workload value, embedded servers started and stopped, live progress,
//! Ctrl-C, and every output: per target `run.json`, `report.txt`, `report.html`; a
//! comparison when there are several targets; a scaling table and chart for a sweep.

use std::io::{IsTerminal, Write};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use indicatif::{ProgressBar, ProgressStyle};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use crate::cli::{
    EXIT_INTERRUPTED, EXIT_OK, EXIT_THRESHOLD, EXIT_UNREACHABLE, EXIT_USAGE, EXIT_WRITE, Format,
    RunArgs, load_workload_with,
};
use crate::engine::{self, EngineConfig, EngineError, RoundResult, Runner};
use crate::metrics::Live;
use crate::protocol::ProtocolError;
use crate::report::{self, Report, compare};
use crate::server::{self, ServerConfig, ServerHandle};
use crate::transport::Endpoint;
use crate::workload::{Override, StoreSpec, TargetSpec, Workload};

/// A target as named on the command line (`--target pg=http://...`).
#[derive(Debug, Clone)]
pub struct NamedTarget {
    pub name: String,
    pub spec: TargetSpec,
}

fn fail(code: i32, msg: impl std::fmt::Display) -> i32 {
    eprintln!("error: {msg}");
    code
}

/// Parse `--target` values: `NAME=SPEC` or `SPEC` (named after its store or host).
pub fn parse_targets(args: &[String], default: &TargetSpec) -> Result<Vec<NamedTarget>, String> {
    if args.is_empty() {
        return Ok(vec![NamedTarget {
            name: default_name(default),
            spec: default.clone(),
        }]);
    }
    let mut out: Vec<NamedTarget> = Vec::new();
    for a in args {
        let (name, spec) = match a.split_once('=') {
            Some((n, s)) if !n.contains(':') && !n.contains('/') => (Some(n.trim().to_string()), s),
            _ => (None, a.as_str()),
        };
        let spec = TargetSpec::parse(spec).map_err(|m| format!("--target {a}: {m}"))?;
        let name = name.unwrap_or_else(|| default_name(&spec));
        if name.is_empty()
            || !name
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || "-_.".contains(c))
        {
            return Err(format!(
                "--target {a}: target names are letters, digits, '-', '_' or '.'"
            ));
        }
        if out.iter().any(|t| t.name == name) {
            return Err(format!(
                "--target {a}: two targets are named '{name}'; name them, e.g. --target a=URL --target b=URL"
            ));
        }
        out.push(NamedTarget { name, spec });
    }
    Ok(out)
}

fn default_name(spec: &TargetSpec) -> String {
    match spec {
        TargetSpec::Embedded {
            store: StoreSpec::Memory,
        } => "memory".into(),
        TargetSpec::Embedded {
            store: StoreSpec::Sqlite(_),
        } => "sqlite".into(),
        TargetSpec::Url(u) => format!("{}-{}", u.host.replace([':', '[', ']'], ""), u.port),
    }
}

/// `KEY=v1,v2,...`
fn parse_sweep(s: &str) -> Result<(String, Vec<String>), String> {
    let (k, v) = s.split_once('=').ok_or_else(|| {
        format!("--sweep {s}: expected KEY=V1,V2,..., e.g. users.producer.count=3,5,10")
    })?;
    let values: Vec<String> = v
        .split(',')
        .map(|x| x.trim().to_string())
        .filter(|x| !x.is_empty())
        .collect();
    if k.trim().is_empty() || values.len() < 2 {
        return Err(format!("--sweep {s}: give a key and at least two values"));
    }
    Ok((k.trim().to_string(), values))
}

pub fn new_run_id() -> String {
    let now = chrono::Utc::now();
    format!(
        "{}-{:06x}",
        now.format("%Y%m%dT%H%M%SZ"),
        rand::random::<u32>() & 0xff_ffff
    )
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

/// Progress on a terminal: a spinner line with the current target, round, rate and errors,
/// and round summaries printed above it without tearing it. Nothing when stderr is not a
/// terminal or with `--quiet` (round lines still go to stderr unless quiet).
#[derive(Clone)]
struct Progress {
    bar: Option<ProgressBar>,
    quiet: bool,
    current: Arc<Mutex<Option<Current>>>,
}

struct Current {
    label: String,
    live: Arc<Live>,
    classes: Vec<String>,
    started: Instant,
    length: String,
    base: Vec<(u64, u64)>,
}

impl Progress {
    fn new(quiet: bool) -> Progress {
        let bar = (!quiet && std::io::stderr().is_terminal()).then(|| {
            let pb = ProgressBar::new_spinner();
            pb.set_style(
                ProgressStyle::with_template("{spinner} {msg}")
                    .unwrap_or_else(|_| ProgressStyle::default_spinner()),
            );
            pb.enable_steady_tick(Duration::from_millis(120));
            pb
        });
        Progress {
            bar,
            quiet,
            current: Arc::new(Mutex::new(None)),
        }
    }

    fn line(&self, s: &str) {
        match &self.bar {
            Some(b) => b.println(s),
            None if !self.quiet => eprintln!("{s}"),
            None => {}
        }
    }

    fn begin(&self, label: String, live: Arc<Live>, classes: Vec<String>, length: String) {
        let base = live.totals();
        if let Ok(mut c) = self.current.lock() {
            *c = Some(Current {
                label,
                live,
                classes,
                started: Instant::now(),
                length,
                base,
            });
        }
    }

    /// Redraw from the live counters (called by a ticker).
    fn tick(&self) {
        let Some(bar) = &self.bar else { return };
        let Ok(c) = self.current.lock() else { return };
        let Some(c) = c.as_ref() else { return };
        let now = c.live.totals();
        let secs = c.started.elapsed().as_secs_f64().max(0.001);
        let (mut req, mut fail) = (0, 0);
        let mut per = Vec::new();
        for (i, ((r, f), (r0, f0))) in now.iter().zip(&c.base).enumerate() {
            req += r - r0;
            fail += f - f0;
            per.push(format!(
                "{} {}",
                c.classes.get(i).map_or("?", String::as_str),
                r - r0
            ));
        }
        bar.set_message(format!(
            "{} · {:.0}s of {} · {:.0} ops/s · {fail} errors · {}",
            c.label,
            secs,
            c.length,
            req as f64 / secs,
            per.join(" · ")
        ));
    }

    fn finish(&self) {
        if let Some(b) = &self.bar {
            b.finish_and_clear();
        }
    }
}

fn round_line(target: &str, r: &RoundResult, of: u32) -> String {
    let (mut req, mut ok, mut failed) = (0u64, 0u64, 0u64);
    for s in &r.stats.ops {
        req += s.requests;
        ok += s.successes;
        failed += s.failures;
    }
    let secs = r.measured.as_secs_f64();
    let rate = if secs > 0.0 { ok as f64 / secs } else { 0.0 };
    format!(
        "{target}: round {}/{of}: {req} requests, {failed} failed, {rate:.1} ops/s over {secs:.1}s{}{}",
        r.index,
        if r.setup_failures > 0 {
            format!(", {} user set-ups failed", r.setup_failures)
        } else {
            String::new()
        },
        if r.interrupted { " (interrupted)" } else { "" }
    )
}

/// One target of one sweep point, ready to run.
struct Lane {
    name: String,
    runner: Runner,
    live: Arc<Live>,
    server: Option<ServerHandle>,
}

/// Everything one point (one workload variant) produced.
struct PointResult {
    label: Option<String>,
    reports: Vec<(String, Report, PathBuf)>,
    interrupted: bool,
    thresholds_ok: bool,
    /// Some output could not be written; the rest was, and the figures still print.
    write_failed: bool,
}

pub async fn run(a: RunArgs) -> i32 {
    let sweep = match a.sweep.as_deref().map(parse_sweep).transpose() {
        Ok(s) => s,
        Err(m) => return fail(EXIT_USAGE, m),
    };
    // Every workload variant is checked before anything is sent.
    let mut points: Vec<(Option<String>, Workload)> = Vec::new();
    match &sweep {
        None => match load_workload_with(&a.workload, &[]) {
            Ok(w) => points.push((None, w)),
            Err(e) => return fail(EXIT_USAGE, e),
        },
        Some((key, values)) => {
            for v in values {
                let o = match Override::set(&format!("{key}={v}")) {
                    Ok(o) => o,
                    Err(e) => return fail(EXIT_USAGE, e),
                };
                match load_workload_with(&a.workload, &[o]) {
                    Ok(w) => points.push((Some(format!("{key}={v}")), w)),
                    Err(e) => return fail(EXIT_USAGE, e),
                }
            }
        }
    }
    let targets = match parse_targets(&a.target, &points[0].1.target) {
        Ok(t) => t,
        Err(m) => return fail(EXIT_USAGE, m),
    };
    let run_id = new_run_id();
    let w0 = &points[0].1;
    let out = a
        .out
        .clone()
        .unwrap_or_else(|| Path::new("reports").join(format!("{}-{run_id}", safe(&w0.name))));
    let stop = CancellationToken::new();
    let progress = Progress::new(a.quiet);
    let watcher = {
        let stop = stop.clone();
        let p = progress.clone();
        tokio::spawn(async move {
            if tokio::signal::ctrl_c().await.is_ok() {
                p.line("interrupted: stopping; the report of what ran will be written");
                stop.cancel();
            }
        })
    };
    let ticker = {
        let p = progress.clone();
        tokio::spawn(async move {
            loop {
                tokio::time::sleep(Duration::from_millis(250)).await;
                p.tick();
            }
        })
    };
    if !a.quiet {
        let names: Vec<String> = targets
            .iter()
            .map(|t| format!("{} ({})", t.name, t.spec))
            .collect();
        progress.line(&format!(
            "loadmix: {} against {} · {} users · {} round(s) × {}{} · run {run_id}",
            w0.name,
            names.join(", "),
            w0.total_users(),
            w0.run.rounds,
            w0.length_text(),
            sweep
                .as_ref()
                .map(|(k, v)| format!(" · sweep {k} over {}", v.join(",")))
                .unwrap_or_default()
        ));
    }
    let multi = targets.len() > 1 || sweep.is_some();
    let mut results: Vec<PointResult> = Vec::new();
    let mut code = EXIT_OK;
    for (label, w) in &points {
        if stop.is_cancelled() {
            break;
        }
        let point_dir = match label {
            Some(l) => out.join(safe(l)),
            None => out.clone(),
        };
        match run_point(
            &a,
            w,
            label.clone(),
            &targets,
            &point_dir,
            multi,
            &run_id,
            &stop,
            &progress,
        )
        .await
        {
            Ok(p) => results.push(p),
            Err(c) => {
                code = c;
                break;
            }
        }
    }
    ticker.abort();
    watcher.abort();
    progress.finish();
    if code != EXIT_OK {
        return code;
    }
    emit(&a, &out, &targets, sweep.as_ref(), &results)
}

#[allow(clippy::too_many_arguments)]
async fn run_point(
    a: &RunArgs,
    w: &Workload,
    label: Option<String>,
    targets: &[NamedTarget],
    dir: &Path,
    multi: bool,
    run_id: &str,
    stop: &CancellationToken,
    progress: &Progress,
) -> Result<PointResult, i32> {
    let mut lanes: Vec<Lane> = Vec::new();
    let stop_all = |lanes: Vec<Lane>| async move {
        for l in lanes {
            if let Some(s) = l.server {
                s.stop().await;
            }
        }
    };
    for t in targets {
        let (endpoint, server) = match &t.spec {
            TargetSpec::Embedded { store } => {
                let store = match store {
                    StoreSpec::Sqlite(p) if p.is_empty() => {
                        if let Err(e) = std::fs::create_dir_all(dir) {
                            stop_all(lanes).await;
                            return Err(fail(
                                EXIT_WRITE,
                                format!("cannot create {}: {e}", dir.display()),
                            ));
                        }
                        StoreSpec::Sqlite(
                            dir.join(format!("{}.db", safe(&t.name)))
                                .display()
                                .to_string(),
                        )
                    }
                    other => other.clone(),
                };
                let cfg = ServerConfig {
                    store,
                    context: w.context.clone(),
                    ..ServerConfig::default()
                };
                match server::start(cfg).await {
                    Ok(h) => (Endpoint::local(h.addr, &t.spec.to_string()), Some(h)),
                    Err(e) => {
                        stop_all(lanes).await;
                        return Err(match e {
                            server::ServerError::Store { .. } => fail(EXIT_USAGE, e),
                            _ => fail(EXIT_UNREACHABLE, format!("embedded server: {e}")),
                        });
                    }
                }
            }
            TargetSpec::Url(u) => match Endpoint::resolve(u) {
                Ok(e) => (e, None),
                Err(m) => {
                    stop_all(lanes).await;
                    return Err(fail(EXIT_UNREACHABLE, format!("target {}: {m}", t.name)));
                }
            },
        };
        let live = Arc::new(Live::new(w.classes.len()));
        let name = t.name.clone();
        let p = progress.clone();
        let tag = if multi {
            format!(
                "{}{}",
                label
                    .as_deref()
                    .map(|l| format!("{l} "))
                    .unwrap_or_default(),
                t.name
            )
        } else {
            w.name.clone()
        };
        let cfg = EngineConfig {
            endpoint: Arc::new(endpoint),
            stop: stop.clone(),
            log_ops: a.log_ops.is_some(),
            preflight: !a.no_preflight,
            run_id: run_id.into(),
            on_round: Some(Arc::new(move |r: &RoundResult, of: u32| {
                p.line(&round_line(&tag, r, of))
            })),
            live: Some(live.clone()),
        };
        match Runner::new(w, cfg).await {
            Ok(runner) => lanes.push(Lane {
                name,
                runner,
                live,
                server,
            }),
            Err(e) => {
                if let Some(s) = server {
                    s.stop().await;
                }
                stop_all(lanes).await;
                let code = match &e {
                    EngineError::Protocol(ProtocolError::Setup(_)) => EXIT_USAGE,
                    _ => EXIT_UNREACHABLE,
                };
                return Err(fail(code, format!("target {}: {e}", t.name)));
            }
        }
    }
    let classes: Vec<String> = w.classes.iter().map(|c| c.name.clone()).collect();
    'rounds: for r in 1..=w.run.rounds {
        for lane in lanes.iter_mut() {
            if stop.is_cancelled() {
                break 'rounds;
            }
            let what = format!(
                "{}{} round {r}/{}",
                label
                    .as_deref()
                    .map(|l| format!("{l} "))
                    .unwrap_or_default(),
                lane.name,
                w.run.rounds
            );
            progress.begin(what, lane.live.clone(), classes.clone(), w.length_text());
            lane.runner.round(w, r).await;
        }
    }
    let mut reports = Vec::new();
    let mut interrupted = false;
    let mut thresholds_ok = true;
    // A file that cannot be written must not cost the other targets' reports, nor the
    // table on stdout: note it, carry on, and exit 4 at the end.
    let mut write_failed = false;
    for lane in lanes {
        if let Some(s) = lane.server {
            s.stop().await;
        }
        let result = lane.runner.finish(w);
        interrupted |= result.interrupted;
        let target = targets
            .iter()
            .find(|t| t.name == lane.name)
            .map(|t| t.spec.to_string())
            .unwrap_or_default();
        let mut rep = report::build(w, &target, &result);
        thresholds_ok &= report::thresholds::evaluate(&w.thresholds, &mut rep);
        let tdir = if targets.len() > 1 {
            dir.join(safe(&lane.name))
        } else {
            dir.to_path_buf()
        };
        if let Err(e) = report::write_dir(&rep, &tdir) {
            fail(EXIT_WRITE, e);
            write_failed = true;
        }
        if let Some(p) = &a.log_ops {
            let path = if multi {
                tdir.join(p.file_name().unwrap_or_else(|| "ops.csv".as_ref()))
            } else {
                p.clone()
            };
            if let Err(e) = write_op_log(&path, w, &result) {
                fail(EXIT_WRITE, format!("cannot write {}: {e}", path.display()));
                write_failed = true;
            }
        }
        reports.push((lane.name, rep, tdir));
    }
    if reports.len() > 1 {
        let names: Vec<String> = reports.iter().map(|(n, _, _)| n.clone()).collect();
        let reps: Vec<Report> = reports.iter().map(|(_, r, _)| r.clone()).collect();
        if let Ok(c) = compare::compare(&names, &reps, false) {
            let files = [
                ("compare.txt", compare::render_table(&c)),
                ("compare.md", compare::render_markdown(&c)),
                ("compare.html", report::html::comparison(&c)),
                (
                    "compare.json",
                    serde_json::to_string_pretty(&c).unwrap_or_default(),
                ),
            ];
            for (f, text) in files {
                if let Err(e) = report::write_file(&dir.join(f), &text) {
                    fail(EXIT_WRITE, e);
                    write_failed = true;
                }
            }
        }
    }
    Ok(PointResult {
        label,
        reports,
        interrupted,
        thresholds_ok,
        write_failed,
    })
}

fn emit(
    a: &RunArgs,
    out: &Path,
    targets: &[NamedTarget],
    sweep: Option<&(String, Vec<String>)>,
    results: &[PointResult],
) -> i32 {
    let mut code = EXIT_OK;
    let interrupted =
        results.iter().any(|p| p.interrupted) || results.len() < sweep.map_or(1, |(_, v)| v.len());
    if results.iter().any(|p| !p.thresholds_ok) {
        code = EXIT_THRESHOLD;
    }
    if results.iter().any(|p| p.write_failed) {
        code = EXIT_WRITE;
    }
    if interrupted {
        code = EXIT_INTERRUPTED;
    }
    let stdout: String;
    match sweep {
        None => {
            let Some(p) = results.first() else {
                return code;
            };
            if p.reports.len() == 1 {
                let r = &p.reports[0].1;
                stdout = match a.format {
                    Format::Table => report::table::render(r),
                    Format::Json => report::to_json(r) + "\n",
                };
            } else {
                let names: Vec<String> = p.reports.iter().map(|(n, _, _)| n.clone()).collect();
                let reps: Vec<Report> = p.reports.iter().map(|(_, r, _)| r.clone()).collect();
                let c = compare::compare(&names, &reps, false).ok();
                stdout = match a.format {
                    Format::Table => {
                        let mut s = String::new();
                        for (n, r, _) in &p.reports {
                            s.push_str(&format!("== {n}\n{}\n", report::table::render(r)));
                        }
                        if let Some(c) = &c {
                            s.push_str(&compare::render_table(c));
                        }
                        s
                    }
                    Format::Json => {
                        serde_json::to_string_pretty(
                            &serde_json::json!({"reports": reps, "comparison": c}),
                        )
                        .unwrap_or_default()
                            + "\n"
                    }
                };
            }
            // --html / --csv name files for the (first) report.
            if let Some((_, r, _)) = p.reports.first() {
                if let Some(h) = &a.html
                    && let Err(e) = report::write_file(h, &report::html::report(r))
                {
                    code = fail(EXIT_WRITE, e);
                }
                if let Some(c) = &a.csv {
                    let text: String = p
                        .reports
                        .iter()
                        .enumerate()
                        .map(|(i, (_, r, _))| {
                            let t = report::csv::render(r);
                            if i == 0 {
                                t
                            } else {
                                t.lines().skip(1).map(|l| format!("{l}\n")).collect()
                            }
                        })
                        .collect();
                    if let Err(e) = report::write_file(c, &text) {
                        code = fail(EXIT_WRITE, e);
                    }
                }
            }
        }
        Some((key, values)) => {
            let names: Vec<String> = targets.iter().map(|t| t.name.clone()).collect();
            let points: Vec<String> = values.iter().take(results.len()).cloned().collect();
            // Per point and target: total mean ops/s and total p99.
            let table: Vec<Vec<Option<(f64, f64)>>> = results
                .iter()
                .map(|p| {
                    names
                        .iter()
                        .map(|n| {
                            p.reports.iter().find(|(x, _, _)| x == n).map(|(_, r, _)| {
                                let t = &r.summary.total;
                                (
                                    t.across_rounds
                                        .as_ref()
                                        .map_or(t.ops_per_sec, |a| a.ops_per_sec_mean),
                                    t.latency_ms.p99,
                                )
                            })
                        })
                        .collect()
                })
                .collect();
            let comparisons: Vec<(String, compare::Comparison)> = results
                .iter()
                .filter(|p| p.reports.len() > 1)
                .filter_map(|p| {
                    let ns: Vec<String> = p.reports.iter().map(|(n, _, _)| n.clone()).collect();
                    let rs: Vec<Report> = p.reports.iter().map(|(_, r, _)| r.clone()).collect();
                    compare::compare(&ns, &rs, false)
                        .ok()
                        .map(|c| (p.label.clone().unwrap_or_default(), c))
                })
                .collect();
            let mut t = comfy_table::Table::new();
            t.load_preset(comfy_table::presets::UTF8_FULL_CONDENSED);
            let mut header = vec![key.clone()];
            for n in &names {
                header.push(format!("{n} ops/s"));
                header.push(format!("{n} p99 ms"));
            }
            t.set_header(header);
            let mut csv = format!("{key},target,ops_per_sec,p99_ms\n");
            for (i, p) in points.iter().enumerate() {
                let mut row = vec![p.clone()];
                for (j, cell) in table[i].iter().enumerate() {
                    match cell {
                        Some((ops, p99)) => {
                            row.push(format!("{ops:.1}"));
                            row.push(format!("{p99:.2}"));
                            csv.push_str(&format!("{p},{},{ops:.3},{p99:.3}\n", names[j]));
                        }
                        None => row.extend(["-".to_string(), "-".to_string()]),
                    }
                }
                t.add_row(row);
            }
            let text = format!("sweep of {key}\n{t}\n");
            let title = format!(
                "{} sweep of {key}",
                results
                    .first()
                    .and_then(|p| p.reports.first())
                    .map_or("", |(_, r, _)| r.workload.name.as_str())
            );
            let json = serde_json::json!({
                "key": key,
                "values": points,
                "targets": names,
                "ops_per_sec": table.iter().map(|row| row.iter().map(|c| c.map(|x| x.0)).collect::<Vec<_>>()).collect::<Vec<_>>(),
                "p99_ms": table.iter().map(|row| row.iter().map(|c| c.map(|x| x.1)).collect::<Vec<_>>()).collect::<Vec<_>>(),
                "reports": results.iter().map(|p| p.reports.iter().map(|(n, _, d)| serde_json::json!({"point": p.label, "target": n, "dir": d.display().to_string()})).collect::<Vec<_>>()).collect::<Vec<_>>(),
            });
            for (f, body) in [
                ("sweep.txt", text.clone()),
                ("sweep.csv", csv),
                (
                    "sweep.json",
                    serde_json::to_string_pretty(&json).unwrap_or_default(),
                ),
                (
                    "sweep.html",
                    report::html::sweep(&title, key, &points, &names, &table, &comparisons),
                ),
            ] {
                if let Err(e) = report::write_file(&out.join(f), &body) {
                    code = fail(EXIT_WRITE, e);
                }
            }
            stdout = match a.format {
                Format::Table => text,
                Format::Json => serde_json::to_string_pretty(&json).unwrap_or_default() + "\n",
            };
        }
    }
    print!("{stdout}");
    let _ = std::io::stdout().flush();
    if !a.quiet {
        eprintln!("reports written to {}", out.display());
    }
    code
}

fn write_op_log(path: &Path, w: &Workload, r: &engine::RunResult) -> std::io::Result<()> {
    if let Some(d) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(d)?;
    }
    let mut f = std::io::BufWriter::new(std::fs::File::create(path)?);
    writeln!(
        f,
        "round,class,vu,seq,op,label,start_us,latency_us,status,error"
    )?;
    for e in &r.op_log {
        let c = &w.classes[e.class];
        writeln!(
            f,
            "{},{},{},{},{},{},{},{},{},{}",
            e.round,
            c.name,
            e.vu,
            e.seq,
            e.op.map_or("(bootstrap)", |o| c.ops[o].name.as_str()),
            c.labels[e.label],
            e.start_us,
            e.latency_us,
            e.status,
            if e.skipped {
                "skipped"
            } else {
                e.error.map_or("", |x| x.name())
            }
        )?;
    }
    f.flush()
}
