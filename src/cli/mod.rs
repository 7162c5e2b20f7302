//! The command line: clap's definitions, one function per command, and the exit code each
//! outcome maps to ([`exit::Exit`]). `run` gets plain options ([`crate::run::RunOptions`]),
//! so nothing below this module knows about clap.

pub mod exit;

use std::ffi::OsString;
use std::net::SocketAddr;
use std::path::PathBuf;

use clap::{Args, Parser, Subcommand, ValueEnum};
use comfy_table::Table;
use comfy_table::presets::UTF8_FULL_CONDENSED;

use crate::engine;
use crate::report;
use crate::run::{RunOptions, StdoutFormat};
use crate::server::{self, ServerConfig};
use crate::transport::TlsOptions;
use crate::workload::{EmbeddedStore, LoadOptions, TargetSpec, Workload, units};
pub use exit::Exit;

/// Shown under `loadmix run --help`: the servers users own, in one screen.
const RUN_EXAMPLES: &str = "Examples (the password comes from $LOADMIX_PASSWORD):
  loadmix run workloads/cosmo-0.7.yaml --duration 10s --rounds 3          # embedded server
  loadmix run workloads/caldav-saturate.yaml --target https://cal.example.net --user alice --ca-cert ca.pem
  loadmix run workloads/caldav-sync.yaml --target https://dav.example.net/caldav.php --user alice   # DAViCal
  loadmix run workloads/webdav.yaml --target https://files.example.net/dav --user alice --set auth=digest
  loadmix run W.yaml --target a=http://10.0.0.5:8080 --target b=http://10.0.0.6:8080  # compare two";

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
    #[command(after_help = RUN_EXAMPLES)]
    Run(Box<RunArgs>),
    /// Run the embedded reference server until Ctrl-C.
    Serve(ServeArgs),
    /// Check a workload and print the resolved plan.
    Validate(WorkloadArgs),
    /// Print the exact operation sequence one virtual user will execute (no I/O).
    Plan(PlanArgs),
    /// Render a saved run.json again (table, JSON, HTML, CSV).
    Report(ReportArgs),
    /// Compare runs of one workload: ops/s with CIs, percentiles, ratios, significance.
    Compare(CompareArgs),
    /// Merge the reports of a sharded run's shards (`run --shard I/N`) into one, exactly:
    /// counts add, histograms merge, timelines align by wall clock.
    Merge(MergeArgs),
    /// Make a CA and a server certificate signed by it, for https on loopback (`serve
    /// --tls-cert/--tls-key`, nginx, `run --ca-cert`).
    Cert(CertArgs),
    /// Infer a workload (behaviour models, think times, populations) from access logs.
    Infer(InferArgs),
    /// Whether a second access log (or a workload, sampled offline) shows the same traffic
    /// as a first log: mix, transitions, session lengths and durations, think times, rates,
    /// burstiness (exit 1 if not).
    Fidelity(FidelityArgs),
    /// Probe a target (CalDAV, Cosmo's Morse Code and Atom, a plain GET, STOMP or AMQP),
    /// trying each protocol briefly, and write a commented starter workload of those that
    /// worked.
    New(NewArgs),
    /// Print shell completions: `loadmix completions bash > /etc/bash_completion.d/loadmix`.
    Completions(CompletionsArgs),
    /// Print the man page (roff), or write one page per command into --out DIR.
    Man(ManArgs),
}

#[derive(Debug, Args)]
pub struct NewArgs {
    /// The server: http(s)://HOST[:PORT][/PATH], stomp://HOST:PORT, amqp(s)://HOST:PORT,
    /// or embedded.
    #[arg(long, value_name = "URL")]
    pub target: String,
    /// Try only this protocol (caldav, morse, atom, http, stomp, amqp; repeatable).
    #[arg(long = "protocol", value_name = "NAME")]
    pub protocols: Vec<String>,
    /// An existing account every user shares; its password from $LOADMIX_PASSWORD.
    #[arg(long, value_name = "NAME")]
    pub user: Option<String>,
    /// The workload file to write (never overwritten).
    #[arg(short, long, value_name = "FILE")]
    pub out: PathBuf,
    /// Only errors on stderr.
    #[arg(long, short)]
    pub quiet: bool,
    #[command(flatten)]
    pub tls: TlsArgs,
}

#[derive(Debug, Args)]
pub struct CompletionsArgs {
    /// The shell to complete for.
    #[arg(value_enum)]
    pub shell: clap_complete::Shell,
}

#[derive(Debug, Args)]
pub struct ManArgs {
    /// Write loadmix.1 and loadmix-COMMAND.1 here instead of loadmix.1 on stdout.
    #[arg(long, value_name = "DIR")]
    pub out: Option<PathBuf>,
}

#[derive(Debug, Args)]
pub struct FidelityArgs {
    /// The log the traffic should look like.
    pub first: PathBuf,
    /// The log to judge against it (a run of the inferred workload, another day's log),
    /// or a workload file (.yaml), sampled without traffic over the first log's span.
    pub second: PathBuf,
    /// Cut both logs' sessions at this gap (else the first log's own).
    #[arg(long, value_name = "DURATION")]
    pub session_timeout: Option<String>,
    /// Name requests by these rules first (see `infer --rules`).
    #[arg(long, value_name = "FILE")]
    pub rules: Option<PathBuf>,
}

#[derive(Debug, Clone, Copy, ValueEnum, PartialEq, Eq)]
pub enum LogFormat {
    Auto,
    /// Common or Combined Log Format, optionally with a response time at the end.
    Clf,
    /// One JSON object per line.
    Json,
}

impl LogFormat {
    fn format(self) -> Option<crate::infer::log::Format> {
        match self {
            LogFormat::Auto => None,
            LogFormat::Clf => Some(crate::infer::log::Format::Clf),
            LogFormat::Json => Some(crate::infer::log::Format::Json),
        }
    }
}

#[derive(Debug, Args)]
pub struct InferArgs {
    /// Access logs (Common/Combined Log Format or JSON lines), read in this order.
    #[arg(required = true, num_args = 1..)]
    pub logs: Vec<PathBuf>,
    /// Write the workload here (else to stdout).
    #[arg(short = 'o', long = "out", value_name = "FILE")]
    pub out: Option<PathBuf>,
    #[arg(long, value_enum, default_value = "auto")]
    pub format: LogFormat,
    /// A session ends after this long without a request (else taken from the log's gaps).
    #[arg(long, value_name = "DURATION")]
    pub session_timeout: Option<String>,
    /// Name requests by this rule file first: `rules:` of `{ op, method, path (a regular
    /// expression), query, template }` or `{ static: true, path }`, the first match wins.
    #[arg(long, value_name = "FILE")]
    pub rules: Option<PathBuf>,
    /// At most this many behaviour models per class.
    #[arg(long, value_name = "N", default_value_t = 4)]
    pub max_behaviours: usize,
    /// The target the written workload names.
    #[arg(long, default_value = "embedded")]
    pub target: String,
    /// How long a round of the written workload runs.
    #[arg(long, value_name = "DURATION", default_value = "60s")]
    pub duration: String,
    /// The written workload's name.
    #[arg(long, default_value = "inferred")]
    pub name: String,
    /// Seed of the clustering's random starts.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
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
    /// Run each round for this long (replaces run.iterations; not with --iterations).
    #[arg(long, value_name = "DURATION", conflicts_with = "iterations")]
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
    /// Run every user as this existing account (password from $LOADMIX_PASSWORD), as
    /// against a server whose accounts loadmix cannot create.
    #[arg(long, value_name = "NAME")]
    pub user: Option<String>,
}

#[derive(Debug, Clone, Copy, ValueEnum, PartialEq, Eq)]
pub enum OrderArg {
    Alternate,
    Balanced,
    Shuffle,
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
    /// Where to send the load: embedded, embedded:memory, embedded:sqlite[:PATH], or
    /// http[s]://host:port[/base], optionally named (NAME=...). Repeat it to compare targets:
    /// rounds then alternate between them (A B A B ...). Overrides the workload's.
    #[arg(long, value_name = "[NAME=]TARGET")]
    pub target: Vec<String>,
    /// Run the workload once per value of one key, e.g.
    /// users.producer.count=3,5,10 or users.caldav.mix.put_event.params.size=1KiB,16KiB.
    #[arg(long, value_name = "KEY=V1,V2,...")]
    pub sweep: Option<String>,
    /// Also write the HTML page of the run here.
    #[arg(long, value_name = "FILE")]
    pub html: Option<PathBuf>,
    /// Also write the per-round CSV here.
    #[arg(long, value_name = "FILE")]
    pub csv: Option<PathBuf>,
    /// Directory for run.json, report.txt and report.html (one folder per target or sweep
    /// point when there are several) [default: reports/NAME-RUNID].
    #[arg(long, value_name = "DIR")]
    pub out: Option<PathBuf>,
    /// What to print on stdout.
    #[arg(long, value_enum, default_value = "table")]
    pub format: Format,
    /// Skip the protocol probe before the clock starts.
    #[arg(long)]
    pub no_preflight: bool,
    /// Leave on the target what each round made (calendars, collections, pool entries);
    /// by default it is deleted when the round ends, untimed.
    #[arg(long)]
    pub keep_data: bool,
    /// How long each round's cleanup (deletes, broker drains) may take in all; what is
    /// left then is reported as not deleted. A signal during cleanup cuts it short too.
    #[arg(long, value_name = "DURATION", default_value = "2m", value_parser = parse_positive_duration)]
    pub cleanup_timeout: std::time::Duration,
    /// What this configuration is, in words, kept in run.json (e.g. "synchronous_commit=off").
    #[arg(long, value_name = "TEXT")]
    pub note: Option<String>,
    /// A setting of this configuration, kept in run.json and shown by compare; with
    /// `@TARGET` at the end, of that target only: `--label gc=serial@small` (repeatable).
    #[arg(long = "label", value_name = "KEY=VALUE[@TARGET]", value_parser = parse_label)]
    pub labels: Vec<(String, String)>,
    /// The order of several targets' rounds: alternate (A B A B), balanced (A B B A, the
    /// default: a steady drift of the host falls on both alike) or shuffle (seeded).
    #[arg(long, value_enum)]
    pub order: Option<OrderArg>,
    /// Watch a server process during every round (CPU, memory, threads, I/O from /proc;
    /// a JVM's collections and heap from its perf data): its name (every process of that
    /// name: postgres, java) or PID; `@TARGET` watches it only during that target's rounds
    /// (repeatable).
    #[arg(long = "monitor-process", value_name = "NAME|PID[@TARGET]")]
    pub monitor_process: Vec<String>,
    /// Scrape a Prometheus metrics page during every round and keep the named series
    /// (counters as rates, gauges as mean and max), e.g.
    /// http://127.0.0.1:9187/metrics#pg_stat_database_xact_commit; `@TARGET` at the end
    /// scrapes it only during that target's rounds (repeatable).
    #[arg(long = "monitor-prometheus", value_name = "URL#SERIES,...[@TARGET]")]
    pub monitor_prometheus: Vec<String>,
    /// Write every operation (round, class, vu, seq, op, label, start, latency, status,
    /// error) to this CSV file.
    #[arg(long, value_name = "FILE")]
    pub log_ops: Option<PathBuf>,
    /// Worker threads of the generator's runtime, at most 8 per core [default: one per
    /// core].
    #[arg(long, value_name = "N")]
    pub workers: Option<usize>,
    /// Run shard I (from 0) of N: closed users u with u mod N = I, open arrivals k with
    /// k mod N = I, so N processes together run exactly this run. `N` alone takes I from
    /// JOB_COMPLETION_INDEX (a Kubernetes Indexed Job).
    #[arg(long, value_name = "I/N", env = "LOADMIX_SHARD", value_parser = parse_shard)]
    pub shard: Option<crate::engine::shard::Shard>,
    /// Start the first round's clock at this time (RFC 3339, or +DURATION from now), after
    /// set-up; round n starts at TIME + n × --round-every. Shards that start minutes apart
    /// then measure the same seconds.
    #[arg(long, value_name = "TIME", env = "LOADMIX_START_AT", value_parser = parse_start_at)]
    pub start_at: Option<std::time::SystemTime>,
    /// Under --start-at, the slot of each round [default: the duration + 30s].
    #[arg(long, value_name = "DURATION", value_parser = crate::workload::units::parse_duration, requires = "start_at")]
    pub round_every: Option<std::time::Duration>,
    /// The run's id, in its reports and in what it names (`{run_id}`), and the stamp its
    /// messages carry: give every shard of a run the same one, so that a message one
    /// shard sent is this run's on another [default: a new one; a shard under --start-at
    /// takes one from that time].
    #[arg(long, value_name = "ID", env = "LOADMIX_RUN_ID", value_parser = parse_run_id)]
    pub run_id: Option<String>,
    /// Serve a live dashboard of the run (per second: ops/s, p50/p99, failures by class,
    /// users; the operations so far; the report's link at the end) at ADDR, loopback by
    /// default. It stays up after the run until Ctrl-C, or for --linger.
    #[arg(long, value_name = "ADDR", num_args = 0..=1, default_missing_value = DASHBOARD_ADDR)]
    pub dashboard: Option<std::net::SocketAddr>,
    /// Expose the run's own series for Prometheus at http://ADDR/metrics while it runs
    /// (requests, failures by class, bytes and a latency histogram by target, operation
    /// and phase; users, round, phase, lag; shard as a label).
    #[arg(long, value_name = "ADDR")]
    pub metrics: Option<std::net::SocketAddr>,
    /// How long --dashboard and --metrics stay up once the run is over, for a last look
    /// or a last scrape [default: the dashboard until Ctrl-C, the metrics not at all].
    #[arg(long, alias = "dashboard-linger", value_name = "DURATION", value_parser = crate::workload::units::parse_duration)]
    pub linger: Option<std::time::Duration>,
    /// Every column of every table, however wide the terminal (report.txt always has
    /// them all).
    #[arg(long)]
    pub wide: bool,
    /// No progress lines on stderr.
    #[arg(long, short)]
    pub quiet: bool,
    #[command(flatten)]
    pub tls: TlsArgs,
}

/// Where `--dashboard` listens when given no address: loopback only.
const DASHBOARD_ADDR: &str = "127.0.0.1:5666";

/// TLS settings of `https://` targets.
#[derive(Debug, Args)]
pub struct TlsArgs {
    /// Trust the CA certificates of this PEM file instead of the system's roots.
    #[arg(long, value_name = "FILE")]
    pub ca_cert: Option<PathBuf>,
    /// Client certificate chain (PEM) for servers that ask for one (mutual TLS).
    #[arg(long, value_name = "FILE", requires = "client_key")]
    pub client_cert: Option<PathBuf>,
    /// The client certificate's private key (PEM).
    #[arg(long, value_name = "FILE", requires = "client_cert")]
    pub client_key: Option<PathBuf>,
    /// Accept any server certificate (not verified; the report records it).
    #[arg(long)]
    pub insecure: bool,
}

#[derive(Debug, Args)]
pub struct CertArgs {
    /// Folder to write ca.pem, cert.pem and key.pem into.
    #[arg(long, value_name = "DIR")]
    pub out: PathBuf,
    /// Names the certificate is valid for (repeatable).
    #[arg(long = "name", value_name = "HOST", default_values_t = ["localhost".to_string(), "127.0.0.1".to_string(), "::1".to_string()])]
    pub names: Vec<String>,
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
    /// Connections one client address may hold open, of the 10,000 served at once; past
    /// it, a connection gets the counters or 503.
    #[arg(long, value_name = "N", default_value_t = server::DEFAULT_PER_ADDRESS as u32,
          value_parser = clap::value_parser!(u32).range(1..=server::MAX_CONNECTIONS as i64))]
    pub max_connections_per_address: u32,
    /// Write a Combined Log Format line per answered request to FILE (appended), with the
    /// microseconds to the answer's head at the end (Apache's %D).
    #[arg(long, value_name = "FILE")]
    pub access_log: Option<PathBuf>,
    /// Serve https with this certificate chain (PEM); `loadmix cert` makes one.
    #[arg(long, value_name = "FILE", requires = "tls_key")]
    pub tls_cert: Option<PathBuf>,
    /// The certificate's private key (PEM).
    #[arg(long, value_name = "FILE", requires = "tls_cert")]
    pub tls_key: Option<PathBuf>,
    /// Where the STOMP 1.2 broker listens (plain TCP), its queues in the same store
    /// [default: 127.0.0.1:61613, or a free port when that one is taken; the banner says].
    #[arg(long, value_name = "ADDR")]
    pub stomp_bind: Option<SocketAddr>,
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
    /// Instead of one user's picks, list which users and arrivals of the round shard I of
    /// N runs (see `run --shard`).
    #[arg(long, value_name = "I/N", value_parser = parse_shard, conflicts_with = "vu")]
    pub shard: Option<crate::engine::shard::Shard>,
}

#[derive(Debug, Args)]
pub struct ReportArgs {
    /// A run.json written by `loadmix run`.
    pub run: PathBuf,
    #[arg(long, value_enum, default_value = "table")]
    pub format: Format,
    /// Every column of every table, however wide the terminal (report.txt always has
    /// them all).
    #[arg(long)]
    pub wide: bool,
    /// Write the HTML page here.
    #[arg(long, value_name = "FILE")]
    pub html: Option<PathBuf>,
    /// Write the per-round CSV here.
    #[arg(long, value_name = "FILE")]
    pub csv: Option<PathBuf>,
}

#[derive(Debug, Clone, Copy, ValueEnum, PartialEq, Eq)]
pub enum CompareFormat {
    Table,
    Md,
    Json,
}

#[derive(Debug, Args)]
pub struct MergeArgs {
    /// Every shard's run.json, once each.
    #[arg(required = true, num_args = 1..)]
    pub shards: Vec<PathBuf>,
    /// Write the merged run.json, report.txt and report.html here.
    #[arg(long, value_name = "DIR")]
    pub out: Option<PathBuf>,
    #[arg(long, value_enum, default_value = "table")]
    pub format: Format,
    /// Every column of every table, however wide the terminal (report.txt always has
    /// them all).
    #[arg(long)]
    pub wide: bool,
}

#[derive(Debug, Args)]
pub struct CompareArgs {
    /// Two or more run.json files; the first is the baseline.
    #[arg(required = true, num_args = 2..)]
    pub runs: Vec<PathBuf>,
    #[arg(long, value_enum, default_value = "table")]
    pub format: CompareFormat,
    /// Also write an HTML page with side-by-side charts.
    #[arg(long, value_name = "FILE")]
    pub html: Option<PathBuf>,
    /// Compare runs of different workloads anyway.
    #[arg(long)]
    pub force: bool,
}

/// `--round` names one of the workload's rounds.
fn check_round(w: &crate::workload::Workload, round: u32) -> Result<(), Exit> {
    if round == 0 || round > w.run.rounds {
        return Err(Exit::Usage.fail(format!(
            "--round: the workload has rounds 1..={}",
            w.run.rounds
        )));
    }
    Ok(())
}

/// `plan --shard I/N`: the users and arrivals of one round that shard runs, streamed.
fn plan_shard(
    w: &crate::workload::Workload,
    shard: crate::engine::shard::Shard,
    round: u32,
) -> Exit {
    if let Err(e) = check_round(w, round) {
        return e;
    }
    use std::io::Write as _;
    let mut out = std::io::BufWriter::new(std::io::stdout().lock());
    let _ = writeln!(
        out,
        "# {} shard {shard} round {round} seed {}\nclass\tkind\tindex\tat_ms",
        w.name, w.run.seed
    );
    for part in engine::plan::shard_part(w, shard, round) {
        let line = match part {
            engine::plan::Part::User { class, vu } => writeln!(out, "{class}\tuser\t{vu}\t-"),
            engine::plan::Part::Arrival { class, k, at } => {
                writeln!(out, "{class}\tarrival\t{k}\t{:.3}", at.as_secs_f64() * 1e3)
            }
        };
        if line.is_err() {
            break;
        }
    }
    let _ = out.flush();
    Exit::Ok
}

/// `--start-at`, read against the clock now.
/// A run id goes into file, queue and collection names: letters, digits, `.`, `_`, `-`.
fn parse_run_id(s: &str) -> Result<String, String> {
    let fits = |c: char| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-');
    match s.len() {
        1..=64 if s.chars().all(fits) => Ok(s.to_string()),
        _ => Err("give 1 to 64 letters, digits, '.', '_' or '-'".into()),
    }
}

fn parse_start_at(s: &str) -> Result<std::time::SystemTime, String> {
    crate::engine::shard::parse_start_at(s, std::time::SystemTime::now())
}

/// `I/N` of `--shard`, or `N` with the index from a Kubernetes Indexed Job.
/// A duration above zero, e.g. 30s or 2m.
fn parse_positive_duration(s: &str) -> Result<std::time::Duration, String> {
    match units::parse_duration(s) {
        Ok(d) if !d.is_zero() => Ok(d),
        Ok(_) => Err("give a duration above 0, e.g. 30s or 2m".into()),
        Err(e) => Err(e),
    }
}

fn parse_shard(s: &str) -> Result<crate::engine::shard::Shard, String> {
    let index = std::env::var("JOB_COMPLETION_INDEX").ok();
    crate::engine::shard::Shard::parse(s, index.as_deref())
}

/// `KEY=VALUE` of `--label`: a key of letters, digits, '_', '-' or '.'.
fn parse_label(s: &str) -> Result<(String, String), String> {
    let (k, v) = s
        .split_once('=')
        .ok_or_else(|| format!("'{s}' is not KEY=VALUE"))?;
    if k.is_empty()
        || !k
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "_-.".contains(c))
    {
        return Err(format!(
            "'{k}': label keys are letters, digits, '_', '-' or '.'"
        ));
    }
    Ok((k.to_string(), v.to_string()))
}

/// Worker threads a run may ask for, per core: more only adds switching (and each
/// thread's stack); the users are tasks, not threads.
const WORKERS_PER_CORE: usize = 8;

/// The most worker threads `--workers` takes on this machine.
fn max_workers() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get()) * WORKERS_PER_CORE
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
    let mut builder = tokio::runtime::Builder::new_multi_thread();
    if let Command::Run(a) = &cli.command
        && let Some(n) = &a.workers
    {
        let most = max_workers();
        if *n == 0 || *n > most {
            return Exit::Usage
                .fail(format!(
                    "--workers: {n} is not between 1 and {most} ({WORKERS_PER_CORE} per core of this machine's {})",
                    most / WORKERS_PER_CORE
                ))
                .code();
        }
        builder.worker_threads(*n);
    }
    let rt = match builder.enable_all().build() {
        Ok(rt) => rt,
        Err(e) => {
            return Exit::Unreachable
                .fail(format!("cannot start the async runtime: {e}"))
                .code();
        }
    };
    rt.block_on(dispatch(cli)).code()
}

/// Run a parsed command inside an existing tokio runtime.
pub async fn dispatch(cli: Cli) -> Exit {
    match cli.command {
        Command::Run(a) => match crate::run::run((*a).into()).await {
            Ok(f) => Exit::from(f),
            Err(e) => Exit::from(&e).fail(e),
        },
        Command::Compare(a) => compare(a),
        Command::Merge(a) => merge(a),
        Command::Serve(a) => serve(a).await,
        Command::Validate(a) => validate(a),
        Command::Plan(a) => plan(a),
        Command::Report(a) => show_report(a),
        Command::Cert(a) => cert(a),
        Command::Infer(a) => infer(a),
        Command::Fidelity(a) => fidelity(a),
        Command::New(a) => new_workload(a).await,
        Command::Completions(a) => completions(a),
        Command::Man(a) => man(a),
    }
}

async fn new_workload(a: NewArgs) -> Exit {
    let out = a.out.clone();
    let quiet = a.quiet;
    let o = crate::starter::NewOptions {
        target: a.target,
        protocols: a.protocols,
        user: a.user,
        out: a.out,
        tls: a.tls.into(),
        quiet: a.quiet,
    };
    match crate::starter::new(o).await {
        Ok(kept) => {
            if !quiet {
                eprintln!(
                    "wrote {} ({}); run it with: loadmix run {}",
                    out.display(),
                    kept.join(", "),
                    out.display()
                );
            }
            Exit::Ok
        }
        Err(e @ crate::starter::NewError::Write(_)) => Exit::Write.fail(e),
        Err(e @ crate::starter::NewError::Usage(_)) => Exit::Usage.fail(e),
        Err(e @ crate::starter::NewError::Nothing { .. }) => Exit::Unreachable.fail(e),
    }
}

/// Completions from the command definitions themselves, so they cannot drift from them.
fn completions(a: CompletionsArgs) -> Exit {
    use clap::CommandFactory;
    let mut cmd = Cli::command();
    // Into memory first: clap_complete panics on a failed write, a closed pipe included.
    let mut text = Vec::new();
    clap_complete::generate(a.shell, &mut cmd, "loadmix", &mut text);
    to_stdout(&text)
}

/// Bytes on stdout; a reader that closed the pipe early (`| head`) is not an error.
fn to_stdout(bytes: &[u8]) -> Exit {
    use std::io::Write as _;
    match std::io::stdout().lock().write_all(bytes) {
        Ok(()) => Exit::Ok,
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => Exit::Ok,
        Err(e) => Exit::Write.fail(format!("stdout: {e}")),
    }
}

/// The man pages, from the same definitions as `--help`.
fn man(a: ManArgs) -> Exit {
    use clap::CommandFactory;
    let cmd = Cli::command();
    match &a.out {
        Some(dir) => {
            match std::fs::create_dir_all(dir).and_then(|()| clap_mangen::generate_to(cmd, dir)) {
                Ok(()) => Exit::Ok,
                Err(e) => Exit::Write.fail(format!("man pages into {}: {e}", dir.display())),
            }
        }
        None => {
            let mut page = Vec::new();
            // Writing into memory cannot fail.
            let _ = clap_mangen::Man::new(cmd).render(&mut page);
            to_stdout(&page)
        }
    }
}

fn cert(a: CertArgs) -> Exit {
    match server::certs::write_pair(&a.out, &a.names) {
        Ok(files) => {
            eprintln!(
                "wrote {} (trust it: --ca-cert), {} and {} (serve --tls-cert/--tls-key)",
                files.ca.display(),
                files.cert.display(),
                files.key.display()
            );
            Exit::Ok
        }
        Err(e) => Exit::Write.fail(e),
    }
}

impl From<&WorkloadArgs> for LoadOptions {
    fn from(a: &WorkloadArgs) -> LoadOptions {
        LoadOptions {
            path: a.workload.clone(),
            set: a.set.clone(),
            users: a.users.clone(),
            duration: a.duration.clone(),
            iterations: a.iterations.clone(),
            rounds: a.rounds.clone(),
            seed: a.seed.clone(),
            user: a.user.clone(),
        }
    }
}

impl From<RunArgs> for RunOptions {
    fn from(a: RunArgs) -> RunOptions {
        RunOptions {
            workload: (&a.workload).into(),
            targets: a.target,
            sweep: a.sweep,
            html: a.html,
            csv: a.csv,
            out: a.out,
            format: match a.format {
                Format::Table => StdoutFormat::Table,
                Format::Json => StdoutFormat::Json,
            },
            preflight: !a.no_preflight,
            log_ops: a.log_ops,
            quiet: a.quiet,
            keep_data: a.keep_data,
            cleanup_timeout: a.cleanup_timeout,
            note: a.note,
            labels: a.labels,
            shard: a.shard.unwrap_or_default(),
            start_at: a.start_at,
            round_every: a.round_every,
            run_id: a.run_id,
            dashboard: a.dashboard,
            metrics: a.metrics,
            linger: a.linger,
            wide: a.wide,
            monitor_process: a.monitor_process,
            monitor_prometheus: a.monitor_prometheus,
            order: a.order.map(|o| match o {
                OrderArg::Alternate => crate::run::Order::Alternate,
                OrderArg::Balanced => crate::run::Order::Balanced,
                OrderArg::Shuffle => crate::run::Order::Shuffle,
            }),
            tls: a.tls.into(),
        }
    }
}

impl From<TlsArgs> for TlsOptions {
    fn from(t: TlsArgs) -> TlsOptions {
        TlsOptions {
            ca_cert: t.ca_cert,
            client_cert: t.client_cert,
            client_key: t.client_key,
            insecure: t.insecure,
        }
    }
}

/// Load the workload with every override the flags ask for.
fn load_workload(a: &WorkloadArgs) -> Result<Workload, crate::workload::WorkloadError> {
    LoadOptions::from(a).load(&[])
}

/// STOMP's usual port on loopback when it is free, else any free port: a second
/// `loadmix serve` on the machine still starts, and its banner names the port it took.
fn default_stomp_bind() -> SocketAddr {
    let usual = SocketAddr::from(([127, 0, 0, 1], 61613));
    match std::net::TcpListener::bind(usual) {
        Ok(_) => usual,
        Err(_) => SocketAddr::from(([127, 0, 0, 1], 0)),
    }
}

async fn serve(a: ServeArgs) -> Exit {
    let store = match TargetSpec::parse(&format!("embedded:{}", a.store)) {
        Ok(TargetSpec::Embedded {
            store: EmbeddedStore::Memory,
        }) => server::StoreSpec::Memory,
        Ok(TargetSpec::Embedded {
            store: EmbeddedStore::Sqlite(p),
        }) if !p.is_empty() => server::StoreSpec::Sqlite(p),
        _ => {
            return Exit::Usage.fail(format!(
                "--store: '{}' is not a store; use memory or sqlite:PATH",
                a.store
            ));
        }
    };
    let max_body = match units::parse_size(&a.max_body) {
        Ok(n) => n as usize,
        Err(m) => return Exit::Usage.fail(format!("--max-body: {m}")),
    };
    if !a.context.is_empty() && !a.context.starts_with('/') {
        return Exit::Usage.fail(format!("--context: '{}' must start with '/'", a.context));
    }
    let tls = match (&a.tls_cert, &a.tls_key) {
        (Some(c), Some(k)) => match server::certs::server_config(c, k) {
            Ok(t) => Some(t),
            Err(e) => return Exit::Usage.fail(e),
        },
        _ => None,
    };
    let cfg = ServerConfig {
        bind: a.bind,
        tls,
        store,
        context: a.context.trim_end_matches('/').to_string(),
        max_body,
        admin_user: a.admin_user.clone(),
        admin_password: a
            .admin_password
            .clone()
            .unwrap_or_else(|| server::DEFAULT_ADMIN.1.to_string()),
        no_auth: a.no_auth,
        max_per_address: a.max_connections_per_address as usize,
        stomp_bind: Some(a.stomp_bind.unwrap_or_else(default_stomp_bind)),
        access_log: match a
            .access_log
            .as_deref()
            .map(server::access_log::AccessLog::open)
        {
            None => None,
            Some(Ok(l)) => Some(l),
            Some(Err(e)) => {
                return Exit::Usage.fail(format!(
                    "--access-log {}: {e}",
                    a.access_log
                        .as_deref()
                        .unwrap_or(std::path::Path::new(""))
                        .display()
                ));
            }
        },
        ..ServerConfig::default()
    };
    let ctx = cfg.context.clone();
    let h = match server::start(cfg).await {
        Ok(h) => h,
        Err(e @ server::ServerError::Store { .. }) => return Exit::Usage.fail(e),
        Err(e) => return Exit::Unreachable.fail(e),
    };
    eprintln!(
        "loadmix serve: {} store, listening on {url}{ctx}\n  CMP {ctx}/cmp/user/NAME · Morse Code {ctx}/mc/collection/UID · Atom {ctx}/atom/collection/UID · CalDAV {ctx}/dav/USER/\n  queue {ctx}/queue/NAME · counters {ctx}/_loadmix/stats · metrics {ctx}/_loadmix/metrics{auth}\n  STOMP 1.2 broker on {stomp} (queues /queue/NAME)\nCtrl-C stops",
        h.store_kind,
        url = h.url(),
        stomp = h
            .stomp_addr
            .map_or_else(|| "no port".to_string(), |a| format!("stomp://{a}")),
        auth = if a.no_auth {
            " · no authentication"
        } else {
            ""
        }
    );
    let sig = crate::run::signals::Signals::install().next().await;
    eprintln!("{}: stopping the server", sig.name());
    h.stop().await;
    Exit::Ok
}

fn validate(a: WorkloadArgs) -> Exit {
    let w = match load_workload(&a) {
        Ok(w) => w,
        Err(e) => return Exit::Usage.fail(e),
    };
    print!("{}", render_plan(&w));
    // Valid, but too big for this machine: `run` would refuse it here.
    if let Err(m) = crate::run::capacity::check(&w) {
        eprintln!("warning: `loadmix run` would refuse this workload on this machine: {m}");
    }
    Exit::Ok
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
        "run {} round(s) × {} · warm-up {} · seed {} · timeout {} · connect timeout {}",
        w.run.rounds,
        w.length_text(),
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
        for (i, op) in c.ops.iter().enumerate() {
            let share = if total > 0.0 {
                op.probability * c.count as f64 / total
            } else {
                0.0
            };
            let detail = c.kind.describe_op(i);
            t.add_row(vec![
                op.name.clone(),
                if c.chain.from_mix {
                    format!("{}", op.weight)
                } else {
                    "(rows)".into()
                },
                format!("{:.2}%", op.probability * 100.0),
                format!("{:.2}%", share * 100.0),
                detail,
            ]);
        }
        let _ = writeln!(out, "{t}");
        if !c.chain.from_mix {
            behaviours_text(&mut out, c);
        }
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

/// What each behaviour of a class implies, worked out exactly from its chain: its share
/// of sessions, the operations a session runs and the visits to each state; states it
/// defines but never reaches, as warnings.
fn behaviours_text(out: &mut String, c: &crate::workload::UserClass) {
    use std::fmt::Write as _;
    let n = c.ops.len();
    let mut reached = vec![false; n];
    for (b, beh) in c.chain.behaviours.iter().enumerate() {
        let e = c.chain.expected(b, n);
        let length = match e.ops_per_session {
            Some(x) => format!("{x:.2} operations per session"),
            None => "sessions never exit (they end with max_ops or the round)".into(),
        };
        let unit = if e.ops_per_session.is_some() {
            "visits per session"
        } else {
            "long-run share"
        };
        let visits: Vec<String> = c
            .ops
            .iter()
            .zip(&e.visits)
            .filter(|(_, v)| **v > 0.0)
            .map(|(o, v)| format!("{} {v:.3}", o.name))
            .collect();
        let _ = writeln!(
            out,
            "behaviour {} · weight {} ({:.1}% of sessions) · {length}\n  {unit}: {}",
            beh.name,
            beh.weight,
            beh.probability * 100.0,
            visits.join(", ")
        );
        let reach = c.chain.reachable(b, n);
        for (op, r) in reach.iter().enumerate() {
            reached[op] |= *r;
            if !r && beh.states[op].is_some() {
                let _ = writeln!(
                    out,
                    "  warning: state '{}' of behaviour '{}' is never reached",
                    c.ops[op].name, beh.name
                );
            }
        }
    }
    if let Some(m) = c.chain.max_ops {
        let _ = writeln!(out, "a session ends after at most {m} operations");
    }
    for (op, r) in c.ops.iter().zip(&reached) {
        if !r {
            let _ = writeln!(
                out,
                "warning: operation '{}' is in ops but no behaviour reaches it",
                op.name
            );
        }
    }
}

fn plan(a: PlanArgs) -> Exit {
    let w = match load_workload(&a.workload) {
        Ok(w) => w,
        Err(e) => return Exit::Usage.fail(e),
    };
    if let Some(shard) = a.shard {
        return plan_shard(&w, shard, a.round);
    }
    let (class_name, vu) = match &a.vu {
        None => (w.classes[0].name.clone(), 0),
        Some(s) => {
            let (c, n) = s.split_once('#').unwrap_or((s.as_str(), "0"));
            match n.parse::<u32>() {
                Ok(n) => (c.to_string(), n),
                Err(_) => {
                    return Exit::Usage
                        .fail(format!("--vu: '{s}' should be CLASS#N, e.g. morse#3"));
                }
            }
        }
    };
    let Some(class) = w.class(&class_name) else {
        let names: Vec<&str> = w.classes.iter().map(|c| c.name.as_str()).collect();
        return Exit::Usage.fail(format!(
            "--vu: no class '{class_name}' (classes: {})",
            names.join(", ")
        ));
    };
    if vu >= class.count {
        return Exit::Usage.fail(format!(
            "--vu: class {class_name} has {} user(s), numbered from 0",
            class.count
        ));
    }
    if let Err(e) = check_round(&w, a.round) {
        return e;
    }
    if class
        .chain
        .rows
        .iter()
        .any(|r| r.to.iter().any(|t| t.when.is_some()))
    {
        eprintln!(
            "note: class {class_name} has guarded transitions; this plan takes every guard as holding, while a run checks each against what the user holds then"
        );
    }
    // Streamed: any --ops prints in constant memory, and stops when stdout closes.
    use std::io::Write as _;
    let mut out = std::io::BufWriter::new(std::io::stdout().lock());
    let _ = writeln!(
        out,
        "# {} {class_name}#{vu} round {} seed {}\nseq\tthink\top",
        w.name, a.round, w.run.seed
    );
    for p in engine::plan::picks(w.run.seed, class, vu, a.round).take(a.ops as usize) {
        if writeln!(
            out,
            "{}\t{:.3}ms\t{}",
            p.seq,
            p.think.as_secs_f64() * 1e3,
            p.name
        )
        .is_err()
        {
            break;
        }
    }
    let _ = out.flush();
    Exit::Ok
}

/// `--rules FILE`, read.
fn load_rules(
    path: Option<&std::path::Path>,
) -> Result<Option<std::sync::Arc<crate::infer::rules::Rules>>, crate::infer::rules::RulesError> {
    path.map(|p| crate::infer::rules::load(p).map(std::sync::Arc::new))
        .transpose()
}

/// `--session-timeout` in microseconds.
fn session_timeout(text: Option<&str>) -> Result<Option<i64>, String> {
    match text.map(crate::workload::units::parse_duration) {
        None => Ok(None),
        Some(Ok(d)) if !d.is_zero() => Ok(Some(d.as_micros().min(i64::MAX as u128) as i64)),
        Some(Ok(_)) => Err("--session-timeout: must be more than 0".into()),
        Some(Err(e)) => Err(format!("--session-timeout: {e}")),
    }
}

fn fidelity(a: FidelityArgs) -> Exit {
    let timeout_us = match session_timeout(a.session_timeout.as_deref()) {
        Ok(t) => t,
        Err(e) => return Exit::Usage.fail(e),
    };
    let rules = match load_rules(a.rules.as_deref()) {
        Ok(r) => r,
        Err(e) => return Exit::Usage.fail(e),
    };
    match crate::fidelity::compare(a.first, a.second, timeout_us, rules) {
        Ok(f) => {
            print!("{}", f.table());
            if f.passed() {
                Exit::Ok
            } else {
                Exit::Threshold
            }
        }
        Err(e) => Exit::Usage.fail(e),
    }
}

fn infer(a: InferArgs) -> Exit {
    let timeout_us = match session_timeout(a.session_timeout.as_deref()) {
        Ok(t) => t,
        Err(e) => return Exit::Usage.fail(e),
    };
    if let Err(e) = crate::workload::units::parse_duration(&a.duration) {
        return Exit::Usage.fail(format!("--duration: {e}"));
    }
    if !(1..=16).contains(&a.max_behaviours) {
        return Exit::Usage.fail("--max-behaviours: from 1 to 16");
    }
    let rules = match load_rules(a.rules.as_deref()) {
        Ok(r) => r,
        Err(e) => return Exit::Usage.fail(e),
    };
    let found = match crate::infer::infer(&crate::infer::InferOptions {
        files: a.logs.clone(),
        rules,
        format: a.format.format(),
        timeout_us,
        max_behaviours: a.max_behaviours,
        seed: a.seed,
    }) {
        Ok(f) => f,
        Err(e) => return Exit::Usage.fail(e),
    };
    eprint!("{}", crate::infer::write::summary(&found));
    let sources: Vec<String> = a.logs.iter().map(|p| p.display().to_string()).collect();
    let yaml = crate::infer::write::workload(
        &found,
        &crate::infer::write::Target {
            name: &a.name,
            target: &a.target,
            duration: &a.duration,
            sources: &sources,
        },
    );
    // What was written must load: a workload infer cannot run is its own bug.
    let w = match crate::workload::load_str("inferred.yaml", &yaml, &[], None) {
        Ok(w) => w,
        Err(e) => {
            return Exit::Usage.fail(format!("the inferred workload does not load: {e}\n{yaml}"));
        }
    };
    let name = a
        .out
        .as_ref()
        .map_or("the workload".into(), |p| p.display().to_string());
    match crate::fidelity::against_model(&found.scan, &w, &sources.join(", "), &name) {
        Ok(f) => eprint!("{}", f.table()),
        Err(e) => eprintln!("fidelity not judged: {e}"),
    }
    match &a.out {
        Some(p) => {
            if let Err(e) = std::fs::write(p, &yaml) {
                return Exit::Write.fail(format!("{}: {e}", p.display()));
            }
            eprintln!("wrote {}", p.display());
        }
        None => print!("{yaml}"),
    }
    Exit::Ok
}

/// `loadmix merge`: check the shards, merge them, judge the thresholds on the merged run
/// (exit 1 as `run` does), write and print it. Nothing is written when a shard is refused.
fn merge(a: MergeArgs) -> Exit {
    let mut shards = Vec::new();
    for f in &a.shards {
        match report::load(f) {
            Ok(r) => shards.push(report::merge::ShardReport {
                file: f.display().to_string(),
                report: r,
            }),
            Err(e) => return Exit::Usage.fail(e),
        }
    }
    let mut r = match report::merge::merge(shards) {
        Ok(r) => r,
        Err(e) => return Exit::Usage.fail(e),
    };
    // The rules are the workload's; it is read back from the copy the report carries.
    let mut passed = true;
    if !r.thresholds.is_empty() {
        match crate::workload::load_str(&r.workload.file, &r.workload.source, &[], None) {
            Ok(w) => passed = report::thresholds::evaluate(&w.thresholds, &mut r),
            Err(e) => {
                eprintln!("warning: thresholds not judged: the workload does not load again: {e}")
            }
        }
    }
    if let Err(e) = print_report(&r, a.format, a.wide) {
        return e;
    }
    if let Some(dir) = &a.out
        && let Err(e) = report::write_dir(&r, dir)
    {
        return Exit::Write.fail(e);
    }
    if passed { Exit::Ok } else { Exit::Threshold }
}

/// A report on stdout, as a table or as JSON.
fn print_report(r: &report::Report, format: Format, wide: bool) -> Result<(), Exit> {
    match format {
        Format::Table => print!(
            "{}",
            report::table::render_for(r, report::table::console_width(wide))
        ),
        Format::Json => match report::to_json(r) {
            Ok(j) => println!("{j}"),
            Err(e) => return Err(Exit::Write.fail(e)),
        },
    }
    Ok(())
}

fn show_report(a: ReportArgs) -> Exit {
    let r = match report::load(&a.run) {
        Ok(r) => r,
        Err(e) => return Exit::Usage.fail(e),
    };
    if let Err(e) = print_report(&r, a.format, a.wide) {
        return e;
    }
    let mut code = Exit::Ok;
    if let Some(h) = &a.html
        && let Err(e) = report::write_file(h, &report::html::report(&r))
    {
        code = Exit::Write.fail(e);
    }
    if let Some(c) = &a.csv {
        let written = report::csv::render(&r, true)
            .map_err(|e| e.to_string())
            .and_then(|t| report::write_file(c, &t).map_err(|e| e.to_string()));
        if let Err(e) = written {
            code = Exit::Write.fail(format!("{}: {e}", c.display()));
        }
    }
    code
}

/// How compared runs are named in tables: by their names, else targets, notes, labels or
/// run directories, whichever tells them all apart; else `A`, `B`, … (and `true`: the
/// legend then gives each run's file). Never by the whole path, which wraps every cell.
fn run_names(reports: &[report::Report], files: &[PathBuf]) -> (Vec<String>, bool) {
    let unique = |v: &[String]| v.iter().collect::<std::collections::HashSet<_>>().len() == v.len();
    let labels = |r: &report::Report| {
        r.labels
            .iter()
            .map(|(k, v)| format!("{k}={v}"))
            .collect::<Vec<_>>()
            .join(",")
    };
    let candidates: [Vec<String>; 5] = [
        reports
            .iter()
            .map(|r| r.name.clone().unwrap_or_default())
            .collect(),
        reports.iter().map(|r| r.target.clone()).collect(),
        reports
            .iter()
            .map(|r| r.note.clone().unwrap_or_default())
            .collect(),
        reports.iter().map(labels).collect(),
        files
            .iter()
            .map(|p| {
                p.parent()
                    .and_then(|d| d.file_name())
                    .map(|d| d.to_string_lossy().into_owned())
                    .unwrap_or_default()
            })
            .collect(),
    ];
    match candidates
        .into_iter()
        .find(|c| c.iter().all(|n| !n.is_empty()) && unique(c))
    {
        Some(names) => (names, false),
        None => (
            (0..files.len()).map(report::compare::letter).collect(),
            true,
        ),
    }
}

fn compare(a: CompareArgs) -> Exit {
    let mut reports = Vec::new();
    for p in &a.runs {
        match report::load(p) {
            Ok(r) => reports.push(r),
            Err(e) => return Exit::Usage.fail(e),
        }
    }
    let (names, lettered) = run_names(&reports, &a.runs);
    let mut c = match report::compare::compare(&names, &reports, a.force) {
        Ok(c) => c,
        Err(e) => return Exit::Usage.fail(e),
    };
    if lettered {
        for (d, f) in c.details.iter_mut().zip(&a.runs) {
            d.full_name = f.display().to_string();
        }
    }
    match a.format {
        CompareFormat::Table => print!("{}", report::compare::render_table(&c)),
        CompareFormat::Md => print!("{}", report::compare::render_markdown(&c)),
        CompareFormat::Json => match serde_json::to_string_pretty(&c) {
            Ok(j) => println!("{j}"),
            Err(e) => return Exit::Write.fail(format!("the comparison as JSON: {e}")),
        },
    }
    if let Some(h) = &a.html
        && let Err(e) = report::write_file(h, &report::html::comparison(&c))
    {
        return Exit::Write.fail(e);
    }
    Exit::Ok
}
