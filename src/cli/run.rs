//! `loadmix run`: its flags, and the plain `RunOptions` they become (nothing below the
//! command line knows clap).

use super::{Format, TlsArgs, WorkloadArgs, parse_shard};
use crate::run::{RunOptions, StdoutFormat};
use crate::workload::units;
use clap::{Args, ValueEnum};
use std::path::PathBuf;

#[derive(Debug, Args)]
pub(super) struct RunArgs {
    #[command(flatten)]
    pub workload: WorkloadArgs,
    /// Where to send the load: embedded, embedded:memory, embedded:sqlite[:PATH], or
    /// http[s]://host:port[/base], stomp://, amqp://, optionally named (NAME=...). Repeat it
    /// to compare targets: their rounds then take turns (A B B A ... by default, see
    /// --order). Overrides the workload's.
    #[arg(long, value_name = "[NAME=]TARGET")]
    pub target: Vec<String>,
    /// Run the workload once per value of one key, e.g.
    /// users.producer.count=3,5,10 or users.caldav.mix.put_event.params.size=1KiB,16KiB.
    #[arg(long, value_name = "KEY=V1,V2,...")]
    pub sweep: Option<String>,
    /// Search each target's capacity: the highest arrival rate of the workload's open
    /// classes (scaled together) that keeps this service level, e.g. "p99 < 200ms,
    /// errors < 1%" (grow, bisect, repeat the ends; a step the generator could not keep
    /// is said, not judged). Writes capacity.txt, capacity.json and capacity.html.
    #[arg(long, value_name = "SERVICE LEVEL", conflicts_with = "sweep")]
    pub capacity: Option<String>,
    /// The most steps each target's capacity search runs (default 40): a bound on how
    /// long it takes; a search cut short says how far it got.
    #[arg(long, value_name = "N", requires = "capacity", value_parser = clap::value_parser!(u32).range(4..=1000))]
    pub capacity_steps: Option<u32>,
    /// Start this target's server before its rounds and stop it after them:
    /// NAME=COMMAND, run with `sh -c` in a scratch folder beside the report (its output
    /// kept there), its process group watched as the server (repeatable).
    #[arg(long = "start", value_name = "NAME=COMMAND")]
    pub start: Vec<String>,
    /// How to know a started server is ready: NAME=tcp://127.0.0.1:PORT (the port
    /// accepts) or NAME=http://127.0.0.1:PORT/PATH (it answers).
    #[arg(long = "ready", value_name = "NAME=URL")]
    pub ready: Vec<String>,
    /// How to stop a started server [default: SIGTERM to its process group, SIGKILL 20 s
    /// later].
    #[arg(long = "stop", value_name = "NAME=COMMAND")]
    pub stop: Vec<String>,
    /// An environment variable for a started server and its stop command (repeatable).
    #[arg(long = "start-env", value_name = "NAME:KEY=VALUE")]
    pub start_env: Vec<String>,
    /// How long a started server may take to be ready.
    #[arg(long, value_name = "DURATION", default_value = "2m", value_parser = parse_positive_duration)]
    pub ready_timeout: std::time::Duration,
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
    /// default. It stays up after the run until Ctrl-C (with a terminal on stdin; without
    /// one it closes with the run), or for --linger.
    #[arg(long, value_name = "ADDR", num_args = 0..=1, default_missing_value = DASHBOARD_ADDR)]
    pub dashboard: Option<std::net::SocketAddr>,
    /// Expose the run's own series for Prometheus at http://ADDR/metrics while it runs
    /// (requests, failures by class, bytes and a latency histogram by target, operation
    /// and phase; users, round, phase, lag; shard as a label).
    #[arg(long, value_name = "ADDR")]
    pub metrics: Option<std::net::SocketAddr>,
    /// How long --dashboard and --metrics stay up once the run is over, for a last look
    /// or a last scrape [default: the dashboard until Ctrl-C when run from a terminal, else
    /// not at all; the metrics not at all].
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

#[derive(Debug, Clone, Copy, ValueEnum, PartialEq, Eq)]
pub(super) enum OrderArg {
    Alternate,
    Balanced,
    Shuffle,
}

/// Where `--dashboard` listens when given no address: loopback only.
pub(super) const DASHBOARD_ADDR: &str = "127.0.0.1:5666";

impl From<RunArgs> for RunOptions {
    fn from(a: RunArgs) -> RunOptions {
        RunOptions {
            workload: (&a.workload).into(),
            targets: a.target,
            sweep: a.sweep,
            capacity: a.capacity,
            capacity_steps: a.capacity_steps,
            start: crate::run::started::StartFlags {
                start: a.start,
                ready: a.ready,
                stop: a.stop,
                env: a.start_env,
                ready_timeout: a.ready_timeout,
            },
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

/// A run id goes into file, queue and collection names: letters, digits, `.`, `_`, `-`.
fn parse_run_id(s: &str) -> Result<String, String> {
    let fits = |c: char| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-');
    match s.len() {
        1..=64 if s.chars().all(fits) => Ok(s.to_string()),
        _ => Err("give 1 to 64 letters, digits, '.', '_' or '-'".into()),
    }
}

/// `--start-at`, read against the clock now.
fn parse_start_at(s: &str) -> Result<std::time::SystemTime, String> {
    crate::engine::shard::parse_start_at(s, std::time::SystemTime::now())
}

/// A duration above zero, e.g. 30s or 2m.
fn parse_positive_duration(s: &str) -> Result<std::time::Duration, String> {
    match units::parse_duration(s) {
        Ok(d) if !d.is_zero() => Ok(d),
        Ok(_) => Err("give a duration above 0, e.g. 30s or 2m".into()),
        Err(e) => Err(e),
    }
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cli::{Cli, Command};
    use clap::Parser;

    #[test]
    fn a_run_id_is_what_file_and_queue_names_can_hold() {
        assert_eq!(parse_run_id("cosmo-7.a_b").as_deref(), Ok("cosmo-7.a_b"));
        for bad in ["", "a/b", "a b", "../x", &"x".repeat(65)] {
            assert!(parse_run_id(bad).is_err(), "{bad:?} was taken");
        }
    }

    #[test]
    fn a_label_is_key_equals_value_with_a_plain_key() {
        assert_eq!(
            parse_label("jvm=17=G1"),
            Ok(("jvm".to_string(), "17=G1".to_string()))
        );
        assert!(parse_label("novalue").is_err());
        assert!(parse_label("=x").is_err());
        assert!(parse_label("a b=x").is_err());
    }

    #[test]
    fn a_cleanup_timeout_must_be_above_zero() {
        assert_eq!(
            parse_positive_duration("2m"),
            Ok(std::time::Duration::from_secs(120))
        );
        assert!(parse_positive_duration("0s").is_err());
        assert!(parse_positive_duration("soon").is_err());
    }

    #[test]
    fn the_run_flags_become_run_options() {
        let cli = Cli::try_parse_from([
            "loadmix",
            "run",
            "w.yaml",
            "--no-preflight",
            "--label",
            "db=pg",
            "--order",
            "balanced",
        ])
        .unwrap();
        let Command::Run(a) = cli.command else {
            panic!("not a run");
        };
        let o: RunOptions = (*a).into();
        assert!(!o.preflight);
        assert_eq!(o.labels, vec![("db".to_string(), "pg".to_string())]);
        assert!(matches!(o.order, Some(crate::run::Order::Balanced)));
        assert_eq!(o.workload.path, std::path::PathBuf::from("w.yaml"));
    }
}
