//! The live progress line on a terminal and the per-round summary lines.

use std::io::IsTerminal;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use indicatif::{ProgressBar, ProgressStyle};

use crate::workload::Tally;
use tokio::time::Instant;

use crate::engine::RoundResult;
use crate::metrics::Live;
use crate::metrics::live::Phase;

/// Progress on a terminal: a spinner line with the current target, round, rate and errors,
/// and round summaries printed above it without tearing it. Nothing when stderr is not a
/// terminal or with `--quiet` (round lines still go to stderr unless quiet).
#[derive(Clone)]
pub(super) struct Progress {
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
    pub(super) fn new(quiet: bool) -> Progress {
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

    pub(super) fn line(&self, s: &str) {
        let s = crate::secrets::redact(s);
        let s = s.as_ref();
        match &self.bar {
            Some(b) => b.println(s),
            None if !self.quiet => eprintln!("{s}"),
            None => {}
        }
    }

    pub(super) fn begin(
        &self,
        label: String,
        live: Arc<Live>,
        classes: Vec<String>,
        length: String,
    ) {
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
    pub(super) fn tick(&self) {
        let Some(bar) = &self.bar else { return };
        let Ok(c) = self.current.lock() else { return };
        let Some(c) = c.as_ref() else { return };
        // Set-up and cleanup take no operations: what they are doing is said instead.
        match c.live.phase() {
            Phase::Setup => {
                let (done, of) = c.live.setup();
                return bar.set_message(format!(
                    "{} · setting up users (accounts, discovery): {done} of {of}",
                    c.label
                ));
            }
            Phase::Cleanup => {
                return bar.set_message(format!("{} · cleaning up what the round made", c.label));
            }
            _ => {}
        }
        let now = c.live.totals();
        let secs = c.started.elapsed().as_secs_f64();
        let mut fail = 0;
        let mut per = Vec::new();
        for (i, ((r, f), (r0, f0))) in now.iter().zip(&c.base).enumerate() {
            fail += f - f0;
            per.push(format!(
                "{} {}",
                c.classes.get(i).map_or("?", String::as_str),
                r - r0
            ));
        }
        // The rate of the round's last whole seconds, as the report will count them: a
        // total over time so far would lag behind and saw-tooth with the users' hand-overs.
        let rate = c.live.rate_now(|_| true).map_or_else(
            || "– ops/s".to_string(),
            |r| format!("{:.0} ops/s", r.per_s),
        );
        bar.set_message(format!(
            "{} · {:.0}s of {} · {rate} · {fail} errors · {}",
            c.label,
            secs,
            c.length,
            per.join(" · ")
        ));
    }

    pub(super) fn finish(&self) {
        if let Some(b) = &self.bar {
            b.finish_and_clear();
        }
    }
}

/// A round's line: its requests answered, and the messages sent and taken apart from
/// them (`tallies` gives each label's sum, in the round's label order), as the report's
/// sums are.
pub(super) fn round_line(target: &str, r: &RoundResult, of: u32, tallies: &[Tally]) -> String {
    // Per sum (total, sent, received): requests, successes, failures.
    let mut sums = [(0u64, 0u64, 0u64); 3];
    for (s, t) in r.stats.ops.iter().zip(tallies) {
        let k = match t {
            Tally::Total => 0,
            Tally::Sent => 1,
            Tally::Received => 2,
            Tally::Apart => continue,
        };
        sums[k].0 += s.requests;
        sums[k].1 += s.successes;
        sums[k].2 += s.failures;
    }
    let secs = r.measured.as_secs_f64();
    let rate = |n: u64| if secs > 0.0 { n as f64 / secs } else { 0.0 };
    let messages = tallies
        .iter()
        .any(|t| matches!(t, Tally::Sent | Tally::Received));
    let mut parts = Vec::new();
    let (req, ok, failed) = sums[0];
    if req > 0 || !messages {
        parts.push(format!(
            "{req} requests, {failed} failed, {:.1} ops/s",
            rate(ok)
        ));
    }
    if messages {
        let ((_, sent, sent_failed), (_, taken, taken_failed)) = (sums[1], sums[2]);
        parts.push(format!(
            "{sent} messages sent, {taken} taken ({:.1} and {:.1} msg/s), {} failed",
            rate(sent),
            rate(taken),
            sent_failed + taken_failed
        ));
    }
    format!(
        "{target}: round {}/{of}: {} over {secs:.1}s{}{}",
        r.index,
        parts.join("; "),
        setup_failed(r),
        if r.interrupted { " (interrupted)" } else { "" }
    )
}

/// A round's failed set-ups, for its progress line: how many, that none was retried,
/// and the first one's user and answer (at most 200 characters of it).
fn setup_failed(r: &RoundResult) -> String {
    if r.setup_failures == 0 {
        return String::new();
    }
    let first = r
        .setup_failure
        .as_deref()
        .map(|d| {
            let mut d: String = d.chars().take(200).collect();
            if d.len() < r.setup_failure.as_deref().map_or(0, str::len) {
                d.push('…');
            }
            format!("; first: {d}")
        })
        .unwrap_or_default();
    format!(
        ", {} user set-up(s) failed (not retried; those users ran anyway){first}",
        r.setup_failures
    )
}
