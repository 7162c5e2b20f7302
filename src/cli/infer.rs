//! `loadmix infer`: a workload from access logs, loaded back before it is written.

use super::Exit;
use clap::{Args, ValueEnum};
use std::path::PathBuf;

#[derive(Debug, Args)]
pub(super) struct InferArgs {
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

#[derive(Debug, Clone, Copy, ValueEnum, PartialEq, Eq)]
pub(super) enum LogFormat {
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

/// `--rules FILE`, read.
pub(super) fn load_rules(
    path: Option<&std::path::Path>,
) -> Result<Option<std::sync::Arc<crate::infer::rules::Rules>>, crate::infer::rules::RulesError> {
    path.map(|p| crate::infer::rules::load(p).map(std::sync::Arc::new))
        .transpose()
}

/// `--session-timeout` in microseconds.
pub(super) fn session_timeout(text: Option<&str>) -> Result<Option<i64>, String> {
    match text.map(crate::workload::units::parse_duration) {
        None => Ok(None),
        Some(Ok(d)) if !d.is_zero() => Ok(Some(d.as_micros().min(i64::MAX as u128) as i64)),
        Some(Ok(_)) => Err("--session-timeout: must be more than 0".into()),
        Some(Err(e)) => Err(format!("--session-timeout: {e}")),
    }
}

pub(super) fn infer(a: InferArgs) -> Exit {
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
