//! `loadmix fidelity`: whether a second log, a run's report or a workload shows the same
//! traffic as a first log.

use super::Exit;
use super::infer::{load_rules, session_timeout};
use clap::Args;
use std::path::PathBuf;

#[derive(Debug, Args)]
pub(super) struct FidelityArgs {
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

pub(super) fn fidelity(a: FidelityArgs) -> Exit {
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
