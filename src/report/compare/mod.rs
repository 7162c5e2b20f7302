//! `loadmix compare`: several runs of one workload side by side. Per operation and for the
//! total: each run's ops/sec (mean and 95 % CI over rounds) and p50/p95/p99, the ratio to
//! the first run, and whether the throughput difference is statistically significant by
//! Welch's t-test over the per-round ops/sec (two-sided, α = 0.05). Latency percentiles are
//! shown with their ratios but not tested (they come from merged histograms, not samples
//! per round).

use serde::Serialize;

use super::model::{OpReport, Report};
use super::power;

pub use super::power::{ALPHA, welch_p};

mod judge;
mod render;
mod server;

use judge::{calibrate, detectable_pct};
pub use render::*;
pub use server::*;

/// Runs of one workload side by side: the rows of each operation and the server's side, with their tests.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct Comparison {
    /// The workload's name.
    pub workload: String,
    /// How the runs were compared, in words (rounds, tests, their correction).
    pub method: String,
    /// Target (or file) of each run, first is the baseline.
    pub runs: Vec<String>,
    /// What each run was: its target, note and labels, in the order of `runs`.
    #[serde(default)]
    pub details: Vec<RunDetails>,
    /// What may make a difference less than it looks: a run whose rounds drifted, a
    /// generator that may have set the pace. Named by run.
    #[serde(default)]
    pub warnings: Vec<String>,
    /// One row per operation, then the sums.
    pub rows: Vec<Row>,
    /// The one test each run's verdict rests on, judged at α alone: the headline sum's
    /// ops/s, or its p50 when throughput was set by the workload. Every other test of a
    /// run against the first is Holm-corrected among themselves.
    #[serde(default)]
    pub primary: String,
    /// The difference the rounds' needed effect is sized for (`--effect`), percent.
    #[serde(default)]
    pub effect_pct: f64,
    /// Every run is of one target: an A/A calibration, in which any star is a false alarm.
    #[serde(default)]
    pub same_target: bool,
    /// What the comparison could tell, per run against the first, in words: the primary
    /// test's detectable effect, the rounds `effect_pct` would need, a paced throughput,
    /// an A/A run's noise floor.
    #[serde(default)]
    pub power: Vec<String>,
    /// What the work cost the server, per run: each watched process's CPU per operation
    /// and each scraped series, tested over rounds like ops/s.
    #[serde(default)]
    pub server: Vec<ServerRow>,
    /// How long the teams' writes took to reach the others, per run: each round's
    /// latency to first sight (p50, p99), share unseen and poll interval, tested over
    /// rounds like ops/s. Empty when no run had teams.
    #[serde(default)]
    pub visibility: Vec<ServerRow>,
    /// What each fault of the timeline cost, per run: each round's time to recover and to
    /// detect, dip and failures, tested over rounds like ops/s. Empty without faults.
    #[serde(default)]
    pub faults: Vec<ServerRow>,
    /// Each run's figures second by second, rounds in sequence, for the charts.
    #[serde(skip)]
    pub over_time: Vec<OverTime>,
}

/// What a compared run was, as its report recorded it.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct RunDetails {
    /// As the tables show it.
    pub name: String,
    /// As it was given.
    pub full_name: String,
    /// Its target.
    pub target: String,
    /// Its `--note`.
    pub note: Option<String>,
    /// Its `--label`s.
    pub labels: std::collections::BTreeMap<String, String>,
}

impl RunDetails {
    /// `name = target (note; key=value, ...)`, for a legend under a table.
    pub fn legend(&self) -> String {
        let mut extra: Vec<String> = self.note.iter().cloned().collect();
        extra.extend(self.labels.iter().map(|(k, v)| format!("{k}={v}")));
        let mut who = if self.full_name == self.name {
            self.name.clone()
        } else {
            format!("{} = {}", self.name, self.full_name)
        };
        if self.target != self.full_name {
            who = format!("{who}: {}", self.target);
        }
        if extra.is_empty() {
            who
        } else {
            format!("{who} ({})", extra.join("; "))
        }
    }
}

/// One operation (or the total) across the runs.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct Row {
    /// `class.label`, or `total`.
    pub op: String,
    /// One cell per run; `None` where a run did not have it.
    pub cells: Vec<Option<Cell>>,
}

/// One operation's figures in one run, against the first run's.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct Cell {
    /// Rounds it ran in.
    pub rounds: usize,
    /// Successes per second, the mean of the rounds.
    pub ops_per_sec: f64,
    /// Its 95 % confidence interval over the rounds.
    pub ci95: Option<[f64; 2]>,
    /// Median latency over the rounds, ms.
    pub p50_ms: f64,
    /// 95th percentile, ms.
    pub p95_ms: f64,
    /// 99th percentile, ms.
    pub p99_ms: f64,
    /// Ops/s against the first run's.
    pub ratio: Option<f64>,
    /// p99 against the first run's.
    pub p99_ratio: Option<f64>,
    /// Welch's two-sided p-value against the first run; `None` for the first run and when
    /// either side has fewer than two rounds.
    pub p_value: Option<f64>,
    /// Whether the ops/s difference is significant: its Holm-adjusted p (its own p for
    /// the primary test) below α; `None` when not tested (one round, or paced).
    pub significant: Option<bool>,
    /// `p_value` adjusted for the run's other tests (Holm); equal to it for the primary.
    #[serde(default)]
    pub p_adjusted: Option<f64>,
    /// The smallest ops/s difference its rounds could detect (α, power 0.8), as a percent
    /// of the first run's mean.
    #[serde(default)]
    pub mde_pct: Option<f64>,
    /// Throughput set by the workload's think times, pacing or arrivals in both runs
    /// (users waited on the server less than a tenth of their time): ops/s not tested.
    #[serde(default)]
    pub paced: bool,
    /// p50 against the first run's.
    #[serde(default)]
    pub p50_ratio: Option<f64>,
    /// Welch's p-value over the rounds' p50s against the first run's.
    #[serde(default)]
    pub p50_p_value: Option<f64>,
    /// Welch's p-value over the rounds' p99s (`p99_ratio` is the ratio).
    #[serde(default)]
    pub p99_p_value: Option<f64>,
    /// The two latency p-values adjusted as `p_adjusted` is; the stars use them.
    #[serde(default)]
    pub p50_p_adjusted: Option<f64>,
    /// The p99's, adjusted.
    #[serde(default)]
    pub p99_p_adjusted: Option<f64>,
    /// The smallest p50 difference its rounds could detect, percent of the first run's.
    #[serde(default)]
    pub p50_mde_pct: Option<f64>,
    /// The share of its requests whose answer came after the client's `client_timeout`
    /// (`timed_out_for_client`), percent; `None` with no request.
    #[serde(default)]
    pub timed_out_for_client_pct: Option<f64>,
    /// The operation's merged histogram, encoded as in the report, for the percentile
    /// overlay; not in compare.json, whose reader has the reports.
    #[serde(skip)]
    pub histogram: String,
}

/// Each round's (p50, p99) of one operation, in ms, for the rounds it succeeded in.
fn round_percentiles(r: &Report, op: &str) -> (Vec<f64>, Vec<f64>) {
    r.rounds
        .iter()
        .filter_map(|round| {
            let o = round
                .sum(op)
                .or_else(|| round.ops.iter().find(|o| o.op == op))?;
            (o.successes > 0).then_some((o.latency_ms.p50, o.latency_ms.p99))
        })
        .unzip()
}

/// Why runs could not be compared.
#[derive(Debug, thiserror::Error)]
pub enum CompareError {
    /// Fewer than two runs.
    #[error("need at least two runs to compare")]
    TooFew,
    /// Runs of different workloads (their names).
    #[error("these runs are of different workloads ({0}); compare like with like, or pass --force")]
    DifferentWorkloads(String),
}

/// An operation's cell: its figures, and against the baseline's (`base`, with the
/// baseline's and this run's per-round percentiles) the ratios and tests.
fn cell(
    o: &OpReport,
    base: Option<&OpReport>,
    rounds: &(Vec<f64>, Vec<f64>),
    base_rounds: &(Vec<f64>, Vec<f64>),
) -> Cell {
    let a = o.across_rounds.as_ref();
    let rates = a
        .map(|a| a.ops_per_sec_per_round.clone())
        .unwrap_or_default();
    let mean = a.map_or(o.ops_per_sec, |a| a.ops_per_sec_mean);
    let (ratio, p99_ratio, p_value, mde_pct) = match base {
        None => (None, None, None, None),
        Some(b) => {
            let bm = b
                .across_rounds
                .as_ref()
                .map_or(b.ops_per_sec, |a| a.ops_per_sec_mean);
            let brates = b
                .across_rounds
                .as_ref()
                .map(|a| a.ops_per_sec_per_round.clone())
                .unwrap_or_default();
            (
                (bm > 0.0).then(|| mean / bm),
                (b.latency_ms.p99 > 0.0).then(|| o.latency_ms.p99 / b.latency_ms.p99),
                welch_p(&brates, &rates),
                detectable_pct(&brates, &rates),
            )
        }
    };
    Cell {
        rounds: rates.len(),
        ops_per_sec: mean,
        ci95: a.and_then(|a| a.ops_per_sec_ci95),
        p50_ms: o.latency_ms.p50,
        p95_ms: o.latency_ms.p95,
        p99_ms: o.latency_ms.p99,
        ratio,
        p99_ratio,
        // Judged once every test of the run is in (`calibrate`).
        significant: p_value.map(|p| p < ALPHA),
        p_adjusted: p_value,
        mde_pct,
        paced: false,
        p_value,
        p50_ratio: base
            .filter(|b| b.latency_ms.p50 > 0.0)
            .map(|b| o.latency_ms.p50 / b.latency_ms.p50),
        p50_p_value: base.and_then(|_| welch_p(&base_rounds.0, &rounds.0)),
        p99_p_value: base.and_then(|_| welch_p(&base_rounds.1, &rounds.1)),
        p50_p_adjusted: base.and_then(|_| welch_p(&base_rounds.0, &rounds.0)),
        p99_p_adjusted: base.and_then(|_| welch_p(&base_rounds.1, &rounds.1)),
        p50_mde_pct: base.and_then(|_| detectable_pct(&base_rounds.0, &rounds.0)),
        timed_out_for_client_pct: (o.requests > 0).then(|| {
            super::thresholds::timed_out_for_client(&[o]) as f64 * 100.0 / o.requests as f64
        }),
        histogram: o.histogram.clone(),
    }
}

/// The effect `compare` sizes its rounds for unless told (`--effect`), percent.
pub const DEFAULT_EFFECT_PCT: f64 = 5.0;

/// Compare `reports` (named by `names`, shortened for tables by [`short_names`]), the
/// first being the baseline, sizing the rounds for a [`DEFAULT_EFFECT_PCT`] difference.
pub fn compare(
    names: &[String],
    reports: &[Report],
    force: bool,
) -> Result<Comparison, CompareError> {
    compare_for(names, reports, force, DEFAULT_EFFECT_PCT)
}

/// [`compare`], saying how many rounds a difference of `effect_pct` percent would need.
pub fn compare_for(
    names: &[String],
    reports: &[Report],
    force: bool,
    effect_pct: f64,
) -> Result<Comparison, CompareError> {
    let short = short_names(names);
    if reports.len() < 2 {
        return Err(CompareError::TooFew);
    }
    if !force {
        same_workload(names, reports)?;
    }
    let mut rows = op_rows(reports);
    let mut per_round = [
        server_rows(reports),
        round_rows(reports.iter().map(visibility_rounds).collect()),
        round_rows(reports.iter().map(fault_rounds).collect()),
    ];
    let calibration = calibrate(&mut rows, &mut per_round, reports, &short, effect_pct);
    let mut method = format!(
        "throughput: mean ops/s over rounds ± 95 % CI (Student's t); difference to the first run tested with Welch's t-test over per-round ops/s, two-sided; latency: p50 and p99 from merged histograms, their ratios to the first run tested with Welch's t-test over the rounds' own p50s and p99s; the primary test ({}) judged alone at α = {ALPHA}, every other test of a run against the first (throughput, p50 and p99 of each row, server figures) Holm-corrected among themselves, significant (or *) when the adjusted p < {ALPHA}; detectable effect: the smallest difference the rounds detect at α = {ALPHA} with power {}",
        calibration.primary,
        power::POWER
    );
    let [server, visibility, faults] = per_round;
    if !server.is_empty() {
        method.push_str("; server: each round's CPU per successful operation and scraped series (counters per 1,000 operations, gauges' means), mean over rounds ± 95 % CI, tested as ops/s");
    }
    if !visibility.is_empty() {
        method.push_str("; visibility: each round's latency to first sight (p50, p99 of its histogram), share unseen and poll interval, mean over rounds ± 95 % CI, tested as ops/s");
    }
    if !faults.is_empty() {
        method.push_str("; faults: each round's window of each fault, its time to recover (rounds it recovered in), time to detect, dip and failures, mean over rounds ± 95 % CI, tested as ops/s");
    }
    Ok(Comparison {
        primary: calibration.primary,
        effect_pct,
        same_target: calibration.same_target,
        power: calibration.power,
        workload: reports[0].workload.name.clone(),
        method,
        runs: short.clone(),
        details: short
            .iter()
            .zip(names)
            .zip(reports)
            .map(|((n, full), r)| RunDetails {
                name: n.clone(),
                full_name: full.clone(),
                target: r.target.clone(),
                note: r.note.clone(),
                labels: r.labels.clone(),
            })
            .collect(),
        warnings: warnings(&short, reports),
        server,
        visibility,
        faults,
        over_time: reports.iter().map(OverTime::of).collect(),
        rows,
    })
}

/// Runs of different workloads (by hash) are not compared unless forced.
fn same_workload(names: &[String], reports: &[Report]) -> Result<(), CompareError> {
    let hashes: Vec<&str> = reports.iter().map(|r| r.workload.hash.as_str()).collect();
    if hashes.iter().any(|h| *h != hashes[0]) {
        let list: Vec<String> = names
            .iter()
            .zip(reports)
            .map(|(n, r)| {
                format!(
                    "{n}: {} {}",
                    r.workload.name,
                    &r.workload.hash[..12.min(r.workload.hash.len())]
                )
            })
            .collect();
        return Err(CompareError::DifferentWorkloads(list.join(", ")));
    }
    Ok(())
}

/// One row per operation any run has, then the sums (the total; messages sent and
/// taken): each run's cell against the first.
fn op_rows(reports: &[Report]) -> Vec<Row> {
    let mut ops: Vec<String> = Vec::new();
    for r in reports {
        for o in &r.summary.ops {
            if !ops.contains(&o.op) {
                ops.push(o.op.clone());
            }
        }
    }
    ops.extend(reports[0].summary.sums().iter().map(|o| o.op.clone()));
    let find = |r: &Report, op: &str| -> Option<OpReport> {
        r.summary
            .sum(op)
            .or_else(|| r.summary.ops.iter().find(|o| o.op == op))
            .cloned()
    };
    ops.iter()
        .map(|op| {
            let base = find(&reports[0], op);
            let base_rounds = round_percentiles(&reports[0], op);
            Row {
                op: op.clone(),
                cells: reports
                    .iter()
                    .enumerate()
                    .map(|(i, r)| {
                        let mine = round_percentiles(r, op);
                        find(r, op).map(|o| {
                            cell(
                                &o,
                                if i == 0 { None } else { base.as_ref() },
                                &mine,
                                &base_rounds,
                            )
                        })
                    })
                    .collect(),
            }
        })
        .collect()
}

/// Each run's drift and generator warnings, named by run.
fn warnings(short: &[String], reports: &[Report]) -> Vec<String> {
    short
        .iter()
        .zip(reports)
        .flat_map(|(n, r)| {
            r.summary
                .drift
                .iter()
                .map(move |d| format!("{n}: drift: {}", d.message))
                .chain(
                    r.summary
                        .generator_warnings
                        .iter()
                        .map(move |w| format!("{n}: {w}")),
                )
        })
        .collect()
}

fn rate(c: &Cell) -> String {
    match c.ci95 {
        Some([lo, hi]) => super::stats::with_ci(c.ops_per_sec, (hi - lo) / 2.0, " ±"),
        None => format!("{:.1}", c.ops_per_sec),
    }
}

/// Ops/s against the baseline: the ratio, and its test's verdict with the p-value it was
/// judged on (Holm's, named, when it was corrected) and, when not significant, the
/// smallest difference the rounds could have shown.
pub fn verdict(c: &Cell) -> String {
    let Some(r) = c.ratio else {
        return "baseline".into();
    };
    if c.paced {
        return format!("{r:.2}× (set by the workload: not tested)");
    }
    let (Some(p), Some(adj), Some(significant)) = (c.p_value, c.p_adjusted, c.significant) else {
        return format!("{r:.2}× (one round: not tested)");
    };
    let corrected = (adj - p).abs() > 1e-12;
    if significant {
        let holm = if corrected { "Holm " } else { "" };
        return format!("{r:.2}× significant ({holm}{})", p_text(adj));
    }
    let holm = if corrected {
        format!(", Holm {adj:.2}")
    } else {
        String::new()
    };
    let mde = c
        .mde_pct
        .map(|d| format!("; detects ±{d:.0} %"))
        .unwrap_or_default();
    format!("{r:.2}× not significant (p={p:.2}{holm}{mde})")
}

#[cfg(test)]
mod tests {

    #[test]
    fn prose_wraps_between_words_to_the_width() {
        let w = wrap("method: one two three four five six", 14, "  ");
        assert_eq!(w, "method: one\n  two three\n  four five\n  six\n");
        assert!(w.lines().all(|l| l.chars().count() <= 14));
        assert_eq!(
            wrap("averyveryverylongword x", 5, ""),
            "averyveryverylongword\nx\n"
        );
    }

    #[test]
    fn a_p_value_never_reads_as_the_other_side_of_the_threshold() {
        assert_eq!(p_text(0.0496), "p<0.05");
        assert_eq!(p_text(0.0494), "p=0.049");
        assert_eq!(p_text(0.0004), "p<0.001");
    }

    use super::*;

    #[test]
    fn welch_matches_a_known_value() {
        // Two samples with means 10 and 12, sd 1, n 5 each: t = -3.162, df = 8, p = 0.0134.
        let a = [9.0, 9.5, 10.0, 10.5, 11.0].map(|x| 10.0 + (x - 10.0) * (1.0 / 0.790_569));
        let b = a.map(|x| x + 2.0);
        let p = welch_p(&a, &b).unwrap();
        assert!((p - 0.0134).abs() < 0.001, "{p}");
        assert_eq!(welch_p(&a, &a), Some(1.0));
        assert_eq!(welch_p(&[1.0], &[2.0, 3.0]), None);
    }
}
