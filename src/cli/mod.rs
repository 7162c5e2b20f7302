//! The command line: the commands and what they share (the workload's flags, TLS flags,
//! the output format), parsing and dispatch, and the exit code each outcome maps to
//! ([`exit::Exit`]). Each command's flags and function are in a file of its own; `run`
//! gets plain options ([`crate::run::RunOptions`]), so nothing below this module knows
//! about clap.

pub(crate) mod exit;
mod fidelity;
mod infer;
mod new;
mod plan;
mod reports;
mod run;
mod serve;
mod shell;

use std::ffi::OsString;
use std::path::PathBuf;

use clap::{Args, Parser, Subcommand, ValueEnum};

use crate::transport::TlsOptions;
use crate::workload::{LoadOptions, Workload};
pub(crate) use exit::Exit;
use fidelity::{FidelityArgs, fidelity};
use infer::{InferArgs, infer};
use new::{NewArgs, new_workload};
use plan::{PlanArgs, plan, render_plan};
use reports::{CompareArgs, MergeArgs, ReportArgs, compare, merge, show_report};
use run::RunArgs;
use serve::{CertArgs, ServeArgs, cert, serve};
use shell::{CompletionsArgs, ManArgs, completions, man};

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
    about = "Weighted populations of protocol clients against calendar, collaboration and messaging servers"
)]
struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
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
    /// Not for people: the watchdog a run starts beside each server it starts, which
    /// stops that server's process group if the run dies without stopping it.
    #[command(name = "__reap", hide = true)]
    Reap(ReapArgs),
}

/// The reaper's orders: whose group, and how long TERM may take before KILL.
#[derive(Debug, Args)]
pub(crate) struct ReapArgs {
    /// The started server's process group.
    pub(crate) pgid: u32,
    /// Seconds between SIGTERM and SIGKILL.
    pub(crate) grace_s: u64,
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
    /// Add a fault to the timeline, as an entry of `faults:` is written, e.g.
    /// 'fault=latency,at=10s,for=3s,delay=50ms' or '{fault: pause, at: 20s, for: 2s}'
    /// (repeatable).
    #[arg(long, value_name = "FAULT")]
    pub fault: Vec<String>,
}

#[derive(Debug, Clone, Copy, ValueEnum, PartialEq, Eq)]
pub(crate) enum Format {
    Table,
    Json,
}

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

/// `I/N` of `--shard`, or `N` with the index from a Kubernetes Indexed Job.
fn parse_shard(s: &str) -> Result<crate::engine::shard::Shard, String> {
    let index = std::env::var("JOB_COMPLETION_INDEX").ok();
    crate::engine::shard::Shard::parse(s, index.as_deref())
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
    if let Command::Reap(a) = &cli.command {
        crate::run::started::reap(a.pgid, std::time::Duration::from_secs(a.grace_s));
        return 0;
    }
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
async fn dispatch(cli: Cli) -> Exit {
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
        // Handled before the runtime starts.
        Command::Reap(_) => Exit::Ok,
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
            faults: a.fault.clone(),
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

fn validate(a: WorkloadArgs) -> Exit {
    let w = match load_workload(&a) {
        Ok(w) => w,
        Err(e) => return Exit::Usage.fail(e),
    };
    print!("{}", render_plan(&w));
    for c in &w.classes {
        if let Some(e) = crate::engine::plan::skip_estimate(&w, c)
            && e.share() > plan::SKIP_WARNING_SHARE
        {
            // An open class's new users cannot keep anything between rounds; its
            // returning users can.
            let keep = match e.open {
                true => "let its sessions come back to what they made (arrival.returning)",
                false => "keep it from round to round (run.keep_state)",
            };
            eprintln!(
                "warning: class '{}': {:.1} % of its picks would find nothing to act on: give its users data before their first pick (params.initial_events, initial_items), or {keep}",
                c.name,
                e.share() * 100.0
            );
        }
    }
    // Valid, but too big for this machine: `run` refuses it here, so `validate` does too
    // (after the plan, which says what it would have been).
    if let Err(m) = crate::run::fits::check(&w) {
        return Exit::Usage.fail(format!(
            "`loadmix run` would refuse this workload on this machine: {m}"
        ));
    }
    Exit::Ok
}
