//! The command line (DESIGN §2): raw arguments parsed by clap, turned into a resolved
//! workload and run. Exit codes: 0 success; 1 the run finished but a threshold failed;
//! 2 usage or workload error (nothing was sent); 3 the target could not be reached or failed
//! its preflight; 4 the run finished but its report could not be written; 130 interrupted
//! (the report of what ran is still written).

use std::ffi::OsString;
use std::io::{IsTerminal, Write};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use clap::{Args, Parser, Subcommand, ValueEnum};
use comfy_table::Table;
use comfy_table::presets::UTF8_FULL_CONDENSED;
use tokio_util::sync::CancellationToken;

use crate::engine::{self, EngineConfig, EngineError};
use crate::protocol::ProtocolError;
use crate::report;
use crate::server::{self, ServerConfig};
use crate::transport::Endpoint;
use crate::workload::{self, Override, Stop, TargetSpec, Workload, units};

pub const EXIT_OK: i32 = 0;
pub const EXIT_THRESHOLD: i32 = 1;
pub const EXIT_USAGE: i32 = 2;
pub const EXIT_UNREACHABLE: i32 = 3;
pub const EXIT_WRITE: i32 = 4;
pub const EXIT_INTERRUPTED: i32 = 130;

#[derive(Debug, Parser)]
#[command(
    name = "loadmix",
    version,
    about = "Weighted populations of protocol clients against calendar and collaboration servers"
)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Run a workload and write its report.
    Run(RunArgs),
    /// Run the embedded reference server until Ctrl-C.
    Serve(ServeArgs),
    /// Check a workload and print the resolved plan.
    Validate(WorkloadArgs),
    /// Print the exact operation sequence one virtual user will execute (no I/O).
    Plan(PlanArgs),
    /// Render a saved run.json again.
    Report(ReportArgs),
}

#[derive(Debug, Args)]
pub struct WorkloadArgs {
    /// The workload YAML file.
    pub workload: PathBuf,
    /// Override a workload value, e.g. run.duration=10s or users.caldav.count=4 (repeatable).
    #[arg(long = "set", value_name = "KEY=VALUE")]
    pub set: Vec<String>,
    /// Override user counts, e.g. morse=17,atom=7.
    #[arg(long, value_name = "CLASS=N,...")]
    pub users: Option<String>,
    /// Run each round for this long (replaces run.iterations).
    #[arg(long, value_name = "DURATION")]
    pub duration: Option<String>,
    /// Operations per user (replaces run.duration).
    #[arg(long, value_name = "N")]
    pub iterations: Option<String>,
    /// Number of rounds.
    #[arg(long, value_name = "N")]
    pub rounds: Option<String>,
    /// Seed of every random choice.
    #[arg(long, value_name = "N")]
    pub seed: Option<String>,
}

#[derive(Debug, Clone, Copy, ValueEnum, PartialEq, Eq)]
pub enum Format {
    Table,
    Json,
}

#[derive(Debug, Args)]
pub struct RunArgs {
    #[command(flatten)]
    pub workload: WorkloadArgs,
    /// embedded, embedded:memory, or http://host:port[/base] (overrides the workload's).
    #[arg(long, value_name = "URL")]
    pub target: Option<String>,
    /// Directory for run.json and report.txt [default: reports/NAME-TIMESTAMP].
    #[arg(long, value_name = "DIR")]
    pub out: Option<PathBuf>,
    /// What to print on stdout.
    #[arg(long, value_enum, default_value = "table")]
    pub format: Format,
    /// Skip the protocol probe before the clock starts.
    #[arg(long)]
    pub no_preflight: bool,
    /// Write every operation (round, class, vu, seq, op, label, start, latency, status,
    /// error) to this CSV file.
    #[arg(long, value_name = "FILE")]
    pub log_ops: Option<PathBuf>,
    /// No progress lines on stderr.
    #[arg(long, short)]
    pub quiet: bool,
}

#[derive(Debug, Args)]
pub struct ServeArgs {
    #[arg(long, default_value = "127.0.0.1:8080")]
    pub bind: SocketAddr,
    /// memory, or sqlite:PATH (a file that survives restarts).
    #[arg(long, default_value = "memory")]
    pub store: String,
    /// The administrator account that creates users through CMP.
    #[arg(long, default_value = "root")]
    pub admin_user: String,
    /// The administrator's password [default: $LOADMIX_ADMIN_PASSWORD, else Cosmo's "cosmo"].
    #[arg(long, env = "LOADMIX_ADMIN_PASSWORD", hide_env_values = true)]
    pub admin_password: Option<String>,
    /// Accept any credentials and skip ownership checks (quick local use).
    #[arg(long)]
    pub no_auth: bool,
    #[arg(long, default_value = "/cosmo")]
    pub context: String,
    /// Largest request body accepted, e.g. 16MiB; larger ones get 413.
    #[arg(long, default_value = "16MiB")]
    pub max_body: String,
}

#[derive(Debug, Args)]
pub struct PlanArgs {
    #[command(flatten)]
    pub workload: WorkloadArgs,
    /// Which VU: CLASS#N (N from 0) [default: the first class, #0].
    #[arg(long, value_name = "CLASS#N")]
    pub vu: Option<String>,
    /// How many operations.
    #[arg(long, default_value_t = 20)]
    pub ops: u64,
    /// Which round (from 1).
    #[arg(long, default_value_t = 1)]
    pub round: u32,
}

#[derive(Debug, Args)]
pub struct ReportArgs {
    /// A run.json written by `loadmix run`.
    pub run: PathBuf,
    #[arg(long, value_enum, default_value = "table")]
    pub format: Format,
}

/// Parse `args` and run; returns the process exit code.
pub fn main<I, T>(args: I) -> i32
where
    I: IntoIterator<Item = T>,
    T: Into<OsString> + Clone,
{
    let cli = match Cli::try_parse_from(args) {
        Ok(c) => c,
        Err(e) => {
            let _ = e.print();
            return e.exit_code();
        }
    };
    let rt = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("error: cannot start the async runtime: {e}");
            return EXIT_UNREACHABLE;
        }
    };
    rt.block_on(dispatch(cli))
}

/// Run a parsed command inside an existing tokio runtime.
pub async fn dispatch(cli: Cli) -> i32 {
    match cli.command {
        Command::Run(a) => run(a).await,
        Command::Serve(a) => serve(a).await,
        Command::Validate(a) => validate(a),
        Command::Plan(a) => plan(a),
        Command::Report(a) => show_report(a),
    }
}

fn fail(code: i32, msg: impl std::fmt::Display) -> i32 {
    eprintln!("error: {msg}");
    code
}

/// Load the workload with every override the flags ask for.
pub fn load_workload(a: &WorkloadArgs) -> Result<Workload, workload::WorkloadError> {
    let mut ovr = Vec::new();
    for (key, v) in [
        ("run.duration", &a.duration),
        ("run.iterations", &a.iterations),
        ("run.rounds", &a.rounds),
        ("run.seed", &a.seed),
    ] {
        if let Some(v) = v {
            ovr.push(Override::set(&format!("{key}={v}"))?);
        }
    }
    for s in &a.set {
        ovr.push(Override::set(s)?);
    }
    if let Some(u) = &a.users {
        ovr.push(Override::users(u)?);
    }
    workload::load(&a.workload, &ovr)
}

async fn run(a: RunArgs) -> i32 {
    let mut w = match load_workload(&a.workload) {
        Ok(w) => w,
        Err(e) => return fail(EXIT_USAGE, e),
    };
    if let Some(t) = &a.target {
        match TargetSpec::parse(t) {
            Ok(t) => w.target = t,
            Err(m) => return fail(EXIT_USAGE, format!("--target: {m}")),
        }
    }
    let (endpoint, embedded) = match &w.target {
        TargetSpec::Embedded { store } => {
            let cfg = ServerConfig {
                store: store.clone(),
                context: w.context.clone(),
                ..ServerConfig::default()
            };
            match server::start(cfg).await {
                Ok(h) => (Endpoint::local(h.addr, &w.target.to_string()), Some(h)),
                Err(e @ server::ServerError::Store { .. }) => return fail(EXIT_USAGE, e),
                Err(e) => return fail(EXIT_UNREACHABLE, format!("embedded server: {e}")),
            }
        }
        TargetSpec::Url(u) => match Endpoint::resolve(u) {
            Ok(e) => (e, None),
            Err(m) => return fail(EXIT_UNREACHABLE, m),
        },
    };
    let target_display = w.target.to_string();
    let stop = CancellationToken::new();
    let watcher = {
        let stop = stop.clone();
        tokio::spawn(async move {
            if tokio::signal::ctrl_c().await.is_ok() {
                eprintln!("\ninterrupted: stopping; the report of what ran will be written");
                stop.cancel();
            }
        })
    };
    let run_id = new_run_id();
    let cfg = EngineConfig {
        endpoint: Arc::new(endpoint),
        stop: stop.clone(),
        log_ops: a.log_ops.is_some(),
        preflight: !a.no_preflight,
        run_id: run_id.as_str().into(),
        on_round: if a.quiet {
            None
        } else {
            Some(Arc::new(print_round))
        },
    };
    if !a.quiet {
        eprintln!(
            "loadmix: {} against {} · {} users · {} · run {run_id}",
            w.name,
            target_display,
            w.total_users(),
            describe_length(&w)
        );
    }
    let result = engine::run(&w, &cfg).await;
    watcher.abort();
    if let Some(h) = embedded {
        h.stop().await;
    }
    let result = match result {
        Ok(r) => r,
        Err(EngineError::Protocol(e @ ProtocolError::Setup(_))) => {
            return fail(EXIT_USAGE, e);
        }
        Err(e) => return fail(EXIT_UNREACHABLE, e),
    };
    let rep = report::build(&w, &target_display, &result);
    let out_dir = a
        .out
        .clone()
        .unwrap_or_else(|| default_out_dir(&w.name, &run_id));
    let mut code = if result.interrupted {
        EXIT_INTERRUPTED
    } else {
        EXIT_OK
    };
    match a.format {
        Format::Table => print!("{}", report::table::render(&rep)),
        Format::Json => println!("{}", report::to_json(&rep)),
    }
    if let Err(e) = report::write_dir(&rep, &out_dir) {
        code = fail(EXIT_WRITE, e);
    } else if !a.quiet {
        eprintln!("report written to {}", out_dir.join("run.json").display());
    }
    if let Some(p) = &a.log_ops
        && let Err(e) = write_op_log(p, &w, &result)
    {
        code = fail(EXIT_WRITE, format!("cannot write {}: {e}", p.display()));
    }
    let _ = std::io::stdout().flush();
    code
}

fn print_round(r: &engine::RoundResult, of: u32) {
    let (mut req, mut ok, mut failed) = (0u64, 0u64, 0u64);
    for s in &r.stats.ops {
        req += s.requests;
        ok += s.successes;
        failed += s.failures;
    }
    let secs = r.measured.as_secs_f64();
    let rate = if secs > 0.0 { ok as f64 / secs } else { 0.0 };
    eprintln!(
        "round {}/{of}: {req} requests, {failed} failed, {rate:.1} ops/s over {secs:.1}s{}",
        r.index,
        if r.interrupted { " (interrupted)" } else { "" }
    );
}

fn describe_length(w: &Workload) -> String {
    let each = match w.run.stop {
        Stop::Duration(d) => units::format_duration(d),
        Stop::Iterations(n) => format!("{n} ops/user"),
    };
    format!("{} round(s) × {each}", w.run.rounds)
}

fn new_run_id() -> String {
    let now = chrono::Utc::now();
    format!(
        "{}-{:06x}",
        now.format("%Y%m%dT%H%M%SZ"),
        rand::random::<u32>() & 0xff_ffff
    )
}

fn default_out_dir(name: &str, run_id: &str) -> PathBuf {
    let safe: String = name
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' || c == '_' || c == '.' {
                c
            } else {
                '_'
            }
        })
        .collect();
    Path::new("reports").join(format!("{safe}-{run_id}"))
}

fn write_op_log(path: &Path, w: &Workload, r: &engine::RunResult) -> std::io::Result<()> {
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

async fn serve(a: ServeArgs) -> i32 {
    let store = match TargetSpec::parse(&format!("embedded:{}", a.store)) {
        Ok(TargetSpec::Embedded { store }) => store,
        _ => {
            return fail(
                EXIT_USAGE,
                format!("--store: '{}' is not a store; use memory", a.store),
            );
        }
    };
    let max_body = match units::parse_size(&a.max_body) {
        Ok(n) => n as usize,
        Err(m) => return fail(EXIT_USAGE, format!("--max-body: {m}")),
    };
    if !a.context.is_empty() && !a.context.starts_with('/') {
        return fail(
            EXIT_USAGE,
            format!("--context: '{}' must start with '/'", a.context),
        );
    }
    let cfg = ServerConfig {
        bind: a.bind,
        store,
        context: a.context.trim_end_matches('/').to_string(),
        max_body,
        admin_user: a.admin_user.clone(),
        admin_password: a
            .admin_password
            .clone()
            .unwrap_or_else(|| server::DEFAULT_ADMIN.1.to_string()),
        no_auth: a.no_auth,
    };
    let ctx = cfg.context.clone();
    let h = match server::start(cfg).await {
        Ok(h) => h,
        Err(e @ server::ServerError::Store { .. }) => return fail(EXIT_USAGE, e),
        Err(e) => return fail(EXIT_UNREACHABLE, e),
    };
    eprintln!(
        "loadmix serve: {} store, listening on {url}{ctx}\n  CMP {ctx}/cmp/user/NAME · Morse Code {ctx}/mc/collection/UID · Atom {ctx}/atom/collection/UID · CalDAV {ctx}/dav/USER/\n  queue {ctx}/queue/NAME · counters {ctx}/_loadmix/stats{auth}\nCtrl-C stops",
        h.store_kind,
        url = h.url(),
        auth = if a.no_auth {
            " · no authentication"
        } else {
            ""
        }
    );
    let _ = tokio::signal::ctrl_c().await;
    h.stop().await;
    EXIT_OK
}

fn validate(a: WorkloadArgs) -> i32 {
    let w = match load_workload(&a) {
        Ok(w) => w,
        Err(e) => return fail(EXIT_USAGE, e),
    };
    print!("{}", render_plan(&w));
    EXIT_OK
}

/// The resolved plan, as `validate` prints it.
pub fn render_plan(w: &Workload) -> String {
    use std::fmt::Write as _;
    let mut out = String::new();
    let _ = writeln!(
        out,
        "workload {} · hash {} · {}",
        w.name,
        &w.hash[..12],
        w.file
    );
    if let Some(d) = &w.description {
        let _ = writeln!(out, "{d}");
    }
    let _ = writeln!(out, "target {} · context '{}'", w.target, w.context);
    let _ = writeln!(
        out,
        "run {} · warm-up {} · seed {} · timeout {} · connect timeout {}",
        describe_length(w),
        units::format_duration(w.run.warmup),
        w.run.seed,
        units::format_duration(w.run.timeout),
        units::format_duration(w.run.connect_timeout)
    );
    if !w.overrides.is_empty() {
        let _ = writeln!(out, "overrides: {}", w.overrides.join(" "));
    }
    let total = w.total_users() as f64;
    let fmt_us =
        |us: f64| units::format_duration(std::time::Duration::from_nanos((us * 1e3) as u64));
    for c in &w.classes {
        let _ = writeln!(
            out,
            "\nclass {} · protocol {} · {} user(s){} · think {} · {}",
            c.name,
            c.protocol.name(),
            c.count,
            c.iterations
                .map(|n| format!(" · {n} ops each"))
                .unwrap_or_default(),
            c.think.describe(&fmt_us),
            c.connection.name()
        );
        let mut t = Table::new();
        t.load_preset(UTF8_FULL_CONDENSED);
        t.set_header(vec![
            "operation",
            "weight",
            "probability",
            "share of all ops",
            "request / params",
        ]);
        for op in &c.ops {
            let share = if total > 0.0 {
                op.probability * c.count as f64 / total
            } else {
                0.0
            };
            let detail = match &op.http {
                Some(h) => format!("{} {}", h.method, h.path.source),
                None => op
                    .params
                    .0
                    .iter()
                    .map(|(k, _)| k.as_str())
                    .collect::<Vec<_>>()
                    .join(", "),
            };
            t.add_row(vec![
                op.name.clone(),
                format!("{}", op.weight),
                format!("{:.2}%", op.probability * 100.0),
                format!("{:.2}%", share * 100.0),
                detail,
            ]);
        }
        let _ = writeln!(out, "{t}");
    }
    let _ = writeln!(
        out,
        "\nshare of all ops assumes every user runs operations at the same rate."
    );
    if !w.thresholds.is_empty() {
        let _ = writeln!(out, "thresholds:");
        for t in &w.thresholds {
            let _ = writeln!(out, "  {}: {}", t.op, t.text);
        }
    }
    out
}

fn plan(a: PlanArgs) -> i32 {
    let w = match load_workload(&a.workload) {
        Ok(w) => w,
        Err(e) => return fail(EXIT_USAGE, e),
    };
    let (class_name, vu) = match &a.vu {
        None => (w.classes[0].name.clone(), 0),
        Some(s) => {
            let (c, n) = s.split_once('#').unwrap_or((s.as_str(), "0"));
            match n.parse::<u32>() {
                Ok(n) => (c.to_string(), n),
                Err(_) => {
                    return fail(
                        EXIT_USAGE,
                        format!("--vu: '{s}' should be CLASS#N, e.g. morse#3"),
                    );
                }
            }
        }
    };
    let Some(class) = w.class(&class_name) else {
        let names: Vec<&str> = w.classes.iter().map(|c| c.name.as_str()).collect();
        return fail(
            EXIT_USAGE,
            format!(
                "--vu: no class '{class_name}' (classes: {})",
                names.join(", ")
            ),
        );
    };
    if vu >= class.count {
        return fail(
            EXIT_USAGE,
            format!(
                "--vu: class {class_name} has {} user(s), numbered from 0",
                class.count
            ),
        );
    }
    if a.round == 0 || a.round > w.run.rounds {
        return fail(
            EXIT_USAGE,
            format!("--round: the workload has rounds 1..={}", w.run.rounds),
        );
    }
    println!(
        "# {} {class_name}#{vu} round {} seed {}",
        w.name, a.round, w.run.seed
    );
    println!("seq\tthink\top");
    for p in engine::plan::sequence(w.run.seed, class, vu, a.round, a.ops) {
        println!(
            "{}\t{:.3}ms\t{}",
            p.seq,
            p.think.as_secs_f64() * 1e3,
            p.name
        );
    }
    EXIT_OK
}

fn show_report(a: ReportArgs) -> i32 {
    match report::load(&a.run) {
        Ok(r) => {
            match a.format {
                Format::Table => print!("{}", report::table::render(&r)),
                Format::Json => println!("{}", report::to_json(&r)),
            }
            EXIT_OK
        }
        Err(e) => fail(EXIT_USAGE, e),
    }
}

/// True when stderr is a terminal (progress output is for people, not logs).
pub fn stderr_is_tty() -> bool {
    std::io::stderr().is_terminal()
}
