//! `loadmix compare`: several runs of one workload side by side. Per operation and for the
//! total: each run's ops/sec (mean and 95 % CI over rounds) and p50/p95/p99, the ratio to
//! the first run, and whether the throughput difference is statistically significant by
//! Welch's t-test over the per-round ops/sec (two-sided, α = 0.05). Latency percentiles are
//! shown with their ratios but not tested (they come from merged histograms, not samples
//! per round).

use std::fmt::Write;

use comfy_table::presets::UTF8_FULL_CONDENSED;
use comfy_table::{CellAlignment, ContentArrangement, Table};
use serde::Serialize;

use super::model::{OpReport, Report};
use super::{power, stats};

pub use super::power::{ALPHA, welch_p};

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
    /// Each run's figures second by second, rounds in sequence, for the charts.
    #[serde(skip)]
    pub over_time: Vec<OverTime>,
}

/// One run's total throughput and latency per second, its rounds laid end to end.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct OverTime {
    /// Successes per second: (seconds from the start, value).
    pub successes: Vec<(f64, f64)>,
    /// p99 latency per second, ms: (seconds from the start, value).
    pub p99_ms: Vec<(f64, f64)>,
    /// The length of the run's time axis, seconds.
    pub length_s: f64,
}

impl OverTime {
    fn of(r: &Report) -> OverTime {
        let names = ["successes".to_string(), "p99".to_string()];
        let (mut lines, _, length_s) = super::axis::rounds_in_sequence(r, &names, |round, name| {
            let mid = |i: usize| super::axis::per_second(round, i, 0).0;
            if name == "p99" {
                let p99 = round.per_second.iter().enumerate();
                p99.filter_map(|(i, s)| s.p99_ms.map(|v| (mid(i), v)))
                    .collect()
            } else {
                let counts: Vec<u64> = round
                    .headline()
                    .timeline
                    .iter()
                    .map(|b| b.successes)
                    .collect();
                super::axis::rates(round, &counts)
            }
        });
        let p99_ms = lines.pop().map(|(_, p)| p).unwrap_or_default();
        let successes = lines.pop().map(|(_, p)| p).unwrap_or_default();
        OverTime {
            successes,
            p99_ms,
            length_s,
        }
    }
}

/// One server figure across the runs: `CPU ms/op (postgres)`, or a scraped series.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct ServerRow {
    /// What is measured, in words.
    pub measure: String,
    /// Its unit.
    pub unit: String,
    /// One cell per run; `None` where a run did not measure it.
    pub cells: Vec<Option<ServerCell>>,
}

/// A server figure's mean over a run's rounds, and how it differs from the first run's.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct ServerCell {
    /// Rounds that measured it.
    pub rounds: usize,
    /// Its mean over them.
    pub mean: f64,
    /// The mean's 95 % confidence interval (two rounds or more).
    pub ci95: Option<[f64; 2]>,
    /// Its mean against the first run's.
    pub ratio: Option<f64>,
    /// Welch's two-sided p-value over the rounds' values against the first run's.
    pub p_value: Option<f64>,
    /// Adjusted with the run's other tests (Holm); a difference is significant below α.
    #[serde(default)]
    pub p_adjusted: Option<f64>,
}

/// One round's value of `measure` added to its list, the list begun when it is the
/// first.
fn push_round(out: &mut Vec<(String, String, Vec<f64>)>, measure: &str, unit: &str, v: f64) {
    match out.iter_mut().find(|(m, _, _)| m == measure) {
        Some((_, _, vs)) => vs.push(v),
        None => out.push((measure.into(), unit.into(), vec![v])),
    }
}

/// The server figures every round of a run recorded, keyed by measure: per round, CPU ms
/// per successful operation of each process, counters per 1,000 operations, gauges' means.
fn server_rounds(r: &Report) -> Vec<(String, String, Vec<f64>)> {
    let mut out: Vec<(String, String, Vec<f64>)> = Vec::new();
    let mut add = |measure: String, unit: String, v: f64| push_round(&mut out, &measure, &unit, v);
    for round in &r.rounds {
        if round.headline().successes == 0 {
            continue;
        }
        for p in round.server.iter().filter(|p| p.problem.is_none()) {
            add(
                format!("CPU {}", p.process),
                "ms/op".into(),
                p.cpu_ms_per_op,
            );
            if let Some(j) = &p.jvm {
                add(
                    format!("GC time {}", p.process),
                    "ms per 1,000 ops".into(),
                    j.gc_ms_per_1000_ops,
                );
                add(
                    format!("GC count {}", p.process),
                    "per 1,000 ops".into(),
                    j.gc_per_1000_ops,
                );
                add(
                    format!("heap peak {}", p.process),
                    "MiB".into(),
                    j.heap_used_peak_mib,
                );
            }
        }
        for m in round.metrics.iter().filter(|m| m.problem.is_none()) {
            match m.kind.as_str() {
                "counter" => {
                    let per = m.per.as_deref().unwrap_or("ops");
                    add(m.series.clone(), format!("per 1,000 {per}"), m.per_1000_ops)
                }
                "gauge" => add(m.series.clone(), "mean".into(), m.mean),
                _ => {}
            }
        }
    }
    out
}

/// The visibility figures of every round of a run that settled some, keyed by measure:
/// the latency to first sight (p50 and p99, where anything was seen) and its server's
/// part (the staleness after the observer's first look, p99), the share of what
/// was to be seen that never was, and the observers' poll interval (their operations'
/// means, weighted by their looks).
fn visibility_rounds(r: &Report) -> Vec<(String, String, Vec<f64>)> {
    let mut out: Vec<(String, String, Vec<f64>)> = Vec::new();
    let mut add = |measure: &str, unit: &str, v: f64| push_round(&mut out, measure, unit, v);
    for v in r.rounds.iter().filter_map(|x| x.visibility.as_ref()) {
        let all = &v.all;
        if let Some(l) = &all.latency_ms {
            add("visibility p50", "ms", l.p50);
            add("visibility p99", "ms", l.p99);
        }
        // The server's part alone: what is left once the observers' own wait is taken out.
        if let Some(st) = &all.staleness_ms {
            add("staleness p99", "ms", st.p99);
        }
        if all.expected > 0 {
            add(
                "unseen",
                "% of to be seen",
                100.0 * all.unseen as f64 / all.expected as f64,
            );
        }
        // The observing operations' intervals, weighted by how often each looked.
        let (mut sum, mut looks) = (0.0, 0u64);
        for o in &v.by_observer {
            if let Some(p) = o.poll_interval_ms {
                sum += p * o.looks as f64;
                looks += o.looks;
            }
        }
        if looks > 0 {
            add("poll interval", "ms", sum / looks as f64);
        }
    }
    out
}

fn server_rows(reports: &[Report]) -> Vec<ServerRow> {
    round_rows(reports.iter().map(server_rounds).collect())
}

/// Rows of figures measured once per round, one per measure any run has, each run's
/// mean over its rounds tested against the first run's (Welch).
fn round_rows(per_run: Vec<Vec<(String, String, Vec<f64>)>>) -> Vec<ServerRow> {
    let mut measures: Vec<(String, String)> = Vec::new();
    for run in &per_run {
        for (m, u, _) in run {
            if !measures.iter().any(|(x, _)| x == m) {
                measures.push((m.clone(), u.clone()));
            }
        }
    }
    measures
        .into_iter()
        .map(|(measure, unit)| {
            let values: Vec<Option<&Vec<f64>>> = per_run
                .iter()
                .map(|run| run.iter().find(|(m, _, _)| *m == measure).map(|x| &x.2))
                .collect();
            let base = values[0];
            let base_mean = base.map(|b| stats::mean_ci95(b).0);
            let cells = values
                .iter()
                .enumerate()
                .map(|(i, v)| {
                    let v = (*v)?;
                    let (mean, _, ci) = stats::mean_ci95(v);
                    let against = if i == 0 { None } else { base };
                    Some(ServerCell {
                        rounds: v.len(),
                        mean,
                        ci95: ci.map(|(lo, hi)| [lo, hi]),
                        ratio: against
                            .and(base_mean)
                            .filter(|b| *b > 0.0)
                            .map(|b| mean / b),
                        p_value: against.and_then(|b| welch_p(b, v)),
                        p_adjusted: None,
                    })
                })
                .collect();
            ServerRow {
                measure,
                unit,
                cells,
            }
        })
        .collect()
}

/// A significant p-value as text: three decimals, or `p<0.001` rather than `p=0.000`,
/// and `p<0.05` where three decimals would round it up to the threshold (`p=0.050` beside
/// "significant" reads as a contradiction).
pub fn p_text(p: f64) -> String {
    if p < 0.001 {
        "p<0.001".into()
    } else if (p * 1000.0).round() / 1000.0 >= ALPHA {
        format!("p<{ALPHA}")
    } else {
        format!("p={p:.3}")
    }
}

/// A server figure against the baseline's, like ops/s: ratio, and significance.
pub fn server_verdict(c: &ServerCell) -> String {
    match (c.ratio, c.p_adjusted.or(c.p_value)) {
        (None, _) => "baseline".into(),
        (Some(r), Some(p)) if p < ALPHA => format!("{r:.2}× significant ({})", p_text(p)),
        (Some(r), Some(p)) => format!("{r:.2}× not significant (p={p:.2})"),
        (Some(r), None) => format!("{r:.2}× (one round: not tested)"),
    }
}

/// A server cell's mean with its interval, as the tables print it.
pub fn server_value(c: &ServerCell) -> String {
    match c.ci95 {
        Some([lo, hi]) => super::stats::with_ci(c.mean, (hi - lo) / 2.0, " ±"),
        None => sig(c.mean),
    }
}

/// Four significant figures at most, without a needless exponent.
fn sig(v: f64) -> String {
    let a = v.abs();
    if a >= 1000.0 || a == 0.0 {
        format!("{v:.0}")
    } else if a >= 10.0 {
        format!("{v:.1}")
    } else if a >= 0.1 {
        format!("{v:.3}")
    } else {
        format!("{v:.5}")
    }
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

/// The smallest difference of means `base` and `mine` could detect, as a percent of
/// `base`'s mean ([`power::mde`]).
fn detectable_pct(base: &[f64], mine: &[f64]) -> Option<f64> {
    let (m, _) = stats::mean_var(base);
    let sd = power::pooled_sd(base, mine)?;
    let d = power::mde(sd, base.len(), mine.len())?;
    (m > 0.0).then(|| 100.0 * d / m)
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
    let mut server = server_rows(reports);
    let mut visibility = round_rows(reports.iter().map(visibility_rounds).collect());
    let calibration = calibrate(
        &mut rows,
        (&mut server, &mut visibility),
        reports,
        &short,
        effect_pct,
    );
    let mut method = format!(
        "throughput: mean ops/s over rounds ± 95 % CI (Student's t); difference to the first run tested with Welch's t-test over per-round ops/s, two-sided; latency: p50 and p99 from merged histograms, their ratios to the first run tested with Welch's t-test over the rounds' own p50s and p99s; the primary test ({}) judged alone at α = {ALPHA}, every other test of a run against the first (throughput, p50 and p99 of each row, server figures) Holm-corrected among themselves, significant (or *) when the adjusted p < {ALPHA}; detectable effect: the smallest difference the rounds detect at α = {ALPHA} with power {}",
        calibration.primary,
        power::POWER
    );
    if !server.is_empty() {
        method.push_str("; server: each round's CPU per successful operation and scraped series (counters per 1,000 operations, gauges' means), mean over rounds ± 95 % CI, tested as ops/s");
    }
    if !visibility.is_empty() {
        method.push_str("; visibility: each round's latency to first sight (p50, p99 of its histogram), share unseen and poll interval, mean over rounds ± 95 % CI, tested as ops/s");
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
        over_time: reports.iter().map(OverTime::of).collect(),
        rows,
    })
}

/// What [`calibrate`] decided and found.
struct Calibration {
    primary: String,
    same_target: bool,
    power: Vec<String>,
}

/// One test of a run against the first: which row (or server row) and which measure.
#[derive(Clone, Copy, PartialEq)]
enum Test {
    Rate(usize),
    P50(usize),
    P99(usize),
    Server(usize),
    Visibility(usize),
}

/// Judges every run against the first as one family of tests: the primary test (the
/// headline's ops/s, or its p50 when both runs' throughput was set by the workload) at
/// α alone, every other test Holm-corrected; and says in words what each comparison could
/// have detected.
fn calibrate(
    rows: &mut [Row],
    (server, visibility): (&mut [ServerRow], &mut [ServerRow]),
    reports: &[Report],
    names: &[String],
    effect_pct: f64,
) -> Calibration {
    let headline = reports[0].summary.headline().op.clone();
    let primary_row = rows.iter().position(|r| r.op == headline);
    let busy: Vec<Option<f64>> = reports
        .iter()
        .map(|r| power::busy_share(&r.rounds))
        .collect();
    let paced_at = |i: usize| busy[i].is_some_and(|b| b < power::PACED_BELOW);
    let mut words = Vec::new();
    let mut any_paced = false;
    for i in 1..reports.len() {
        let paced = paced_at(0) && paced_at(i);
        any_paced |= paced;
        let primary = primary_row.map(|k| if paced { Test::P50(k) } else { Test::Rate(k) });
        judge_run(rows, (&mut *server, &mut *visibility), i, paced, primary);
        words.extend(power_words(
            rows, reports, names, i, primary, &busy, effect_pct,
        ));
    }
    let same_target = reports.iter().all(|r| r.target == reports[0].target);
    if same_target {
        words.push(format!(
            "A/A calibration: every run is of {}, so any significant difference or * above is a false alarm, and each detectable effect is this setup's noise floor",
            reports[0].target
        ));
    }
    Calibration {
        primary: format!("{headline} {}", if any_paced { "p50" } else { "ops/s" }),
        same_target,
        power: words,
    }
}

/// Run `i`'s tests against the first: the primary alone, the rest Holm-corrected, each
/// cell's adjusted p-values and verdicts set. A paced run's ops/s are not tested.
fn judge_run(
    rows: &mut [Row],
    (server, visibility): (&mut [ServerRow], &mut [ServerRow]),
    i: usize,
    paced: bool,
    primary: Option<Test>,
) {
    let mut tests: Vec<(Test, Option<f64>)> = Vec::new();
    for (k, row) in rows.iter_mut().enumerate() {
        let Some(c) = row.cells.get_mut(i).and_then(Option::as_mut) else {
            continue;
        };
        c.paced = paced;
        if !paced {
            tests.push((Test::Rate(k), c.p_value));
        }
        tests.push((Test::P50(k), c.p50_p_value));
        tests.push((Test::P99(k), c.p99_p_value));
    }
    for (k, row) in server.iter().enumerate() {
        if let Some(c) = row.cells.get(i).and_then(Option::as_ref) {
            tests.push((Test::Server(k), c.p_value));
        }
    }
    for (k, row) in visibility.iter().enumerate() {
        if let Some(c) = row.cells.get(i).and_then(Option::as_ref) {
            tests.push((Test::Visibility(k), c.p_value));
        }
    }
    let family: Vec<Option<f64>> = tests
        .iter()
        .map(|(t, p)| if Some(*t) == primary { None } else { *p })
        .collect();
    let adjusted = power::holm(&family);
    for ((t, p), adj) in tests.into_iter().zip(adjusted) {
        let adj = if Some(t) == primary { p } else { adj };
        match t {
            Test::Rate(k) => {
                if let Some(c) = rows[k].cells[i].as_mut() {
                    c.p_adjusted = adj;
                    c.significant = adj.map(|p| p < ALPHA);
                }
            }
            Test::P50(k) => {
                if let Some(c) = rows[k].cells[i].as_mut() {
                    c.p50_p_adjusted = adj;
                }
            }
            Test::P99(k) => {
                if let Some(c) = rows[k].cells[i].as_mut() {
                    c.p99_p_adjusted = adj;
                }
            }
            Test::Server(k) => {
                if let Some(c) = server[k].cells[i].as_mut() {
                    c.p_adjusted = adj;
                }
            }
            Test::Visibility(k) => {
                if let Some(c) = visibility[k].cells[i].as_mut() {
                    c.p_adjusted = adj;
                }
            }
        }
    }
    if paced {
        for c in rows.iter_mut().filter_map(|r| r.cells[i].as_mut()) {
            c.significant = None;
            c.p_adjusted = None;
        }
    }
}

/// What run `i`'s comparison with the first could tell, in words: its primary test's
/// detectable effect, the rounds an `effect_pct` difference would need, and why ops/s
/// was not tested when it was paced.
fn power_words(
    rows: &[Row],
    reports: &[Report],
    names: &[String],
    i: usize,
    primary: Option<Test>,
    busy: &[Option<f64>],
    effect_pct: f64,
) -> Vec<String> {
    let (a, b) = (&names[0], &names[i]);
    let mut out = Vec::new();
    let headline = reports[0].summary.headline().op.clone();
    let per_round = |r: &Report, t: Test| -> Vec<f64> {
        match t {
            Test::P50(_) => round_percentiles(r, &headline).0,
            _ => r
                .summary
                .headline()
                .across_rounds
                .as_ref()
                .map(|x| x.ops_per_sec_per_round.clone())
                .unwrap_or_default(),
        }
    };
    let Some(t) = primary else {
        return out;
    };
    if matches!(t, Test::P50(_)) {
        let pct = |x: Option<f64>| x.map_or("?".into(), |v| format!("{:.0} %", v * 100.0));
        out.push(format!(
            "{b} against {a}: throughput was set by the workload (its users waited on the server {} and {} of their time, under {:.0} %): ops/s is not tested, and the primary test is {headline} p50",
            pct(busy[0]),
            pct(busy[i]),
            power::PACED_BELOW * 100.0
        ));
    }
    let (base, mine) = (per_round(&reports[0], t), per_round(&reports[i], t));
    let measure = if matches!(t, Test::P50(_)) {
        "p50"
    } else {
        "ops/s"
    };
    let (Test::Rate(k) | Test::P50(k) | Test::P99(k) | Test::Server(k) | Test::Visibility(k)) = t;
    let cell = rows[k].cells.get(i).and_then(Option::as_ref);
    let mde = match t {
        Test::P50(_) => cell.and_then(|c| c.p50_mde_pct),
        _ => cell.and_then(|c| c.mde_pct),
    };
    let (mean, _) = stats::mean_var(&base);
    let needed = power::pooled_sd(&base, &mine)
        .and_then(|sd| power::rounds_for(sd, effect_pct / 100.0 * mean));
    match mde {
        Some(d) => out.push(format!(
            "{b} against {a}: with {} and {} rounds, {headline} {measure} could detect a difference of ±{d:.1} % (α {ALPHA}, power {}); ±{effect_pct} % would need {} rounds each",
            base.len(),
            mine.len(),
            power::POWER,
            needed.map_or(format!("more than {}", power::MAX_ROUNDS), |n| n.to_string())
        )),
        None => out.push(format!(
            "{b} against {a}: {headline} {measure} has fewer than two rounds on a side, so nothing is tested; run 5 rounds or more"
        )),
    }
    out
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

/// A run name longer than this is lettered in the console table.
const MAX_RUN_NAME: usize = 10;

/// A, B, ..., Z, then R27, R28, ...
pub fn letter(i: usize) -> String {
    match u8::try_from(i).ok().filter(|i| *i < 26) {
        Some(i) => char::from(b'A' + i).to_string(),
        None => format!("R{}", i + 1),
    }
}

/// Console table: one row per operation and run, so it stays as narrow with four runs as
/// with two, and wraps to the terminal's width (100 columns when it has none).
pub fn render_table(c: &Comparison) -> String {
    render_table_at(c, terminal_width())
}

/// The width files are laid out to: wide enough that no cell wraps, as a file is read in
/// an editor or grepped, not in this terminal.
pub const FILE_WIDTH: u16 = 400;

/// The console table laid out to `width` columns.
pub fn render_table_at(c: &Comparison, width: u16) -> String {
    // Long names would wrap every cell of the run column and the "vs" header: the table
    // says A, B, ... and the legend says who they are.
    let lettered = width < 160 && c.runs.iter().any(|n| n.chars().count() > MAX_RUN_NAME);
    let runs: Vec<String> = match lettered {
        false => c.runs.clone(),
        true => (0..c.runs.len()).map(letter).collect(),
    };
    let mut t = Table::new();
    t.load_preset(UTF8_FULL_CONDENSED)
        .set_content_arrangement(ContentArrangement::Dynamic)
        .set_width(width);
    t.set_header(vec![
        "operation",
        "run",
        "ops/s",
        "p50 ms",
        "p99 ms",
        &format!("vs {}", runs[0]),
        "latency vs",
    ]);
    for row in &c.rows {
        for (i, cell) in row.cells.iter().enumerate() {
            let op = if i == 0 {
                row.op.clone()
            } else {
                String::new()
            };
            let mut cells = vec![op, runs[i].clone()];
            match cell {
                Some(x) => {
                    cells.push(rate(x));
                    cells.push(format!("{:.2}", x.p50_ms));
                    cells.push(format!("{:.2}", x.p99_ms));
                    cells.push(verdict(x));
                    cells.push(latency_verdict(x));
                }
                None => cells.extend(std::iter::repeat_n("-".to_string(), 5)),
            }
            t.add_row(cells);
        }
    }
    for i in 2..t.column_count() {
        if let Some(col) = t.column_mut(i) {
            col.set_cell_alignment(CellAlignment::Right);
        }
    }
    // "p50 1.00× p99 1.00×" reads as well on two lines; the verdict beside it does not.
    if width < 120
        && let Some(col) = t.column_mut(6)
    {
        col.set_constraint(comfy_table::ColumnConstraint::UpperBoundary(
            comfy_table::Width::Fixed(13),
        ));
    }
    let legend: Vec<String> = c
        .details
        .iter()
        .enumerate()
        .map(|(i, d)| match lettered {
            false => format!("  {}", d.legend()),
            true => format!("  {} = {}", runs[i], d.legend()),
        })
        .collect();
    let warnings: String = c
        .warnings
        .iter()
        .map(|w| wrap(&format!("WARNING: {w}"), width.into(), "  "))
        .collect();
    let power: String = c
        .power
        .iter()
        .map(|w| wrap(&format!("power: {w}"), width.into(), "  "))
        .collect();
    format!(
        "comparison of {} runs of {}\n{}\n{t}\n{}{}{power}{}{warnings}",
        c.runs.len(),
        c.workload,
        legend.join("\n"),
        wrap(
            "latency vs: * the rounds' percentiles differ significantly (Holm-corrected), ? one round (not tested)",
            width.into(),
            "  "
        ),
        round_table("server", &c.server, &c.runs, width)
            + &round_table("visibility", &c.visibility, &c.runs, width),
        wrap(&format!("method: {}", c.method), width.into(), "  ")
    )
}

/// The width tables and prose are laid out to: `$COLUMNS` when the shell exports it (at
/// least 40), else the terminal's, else 100 (a file or a pipe is read in a terminal later).
pub fn terminal_width() -> u16 {
    match std::env::var("COLUMNS")
        .ok()
        .and_then(|c| c.parse::<u16>().ok())
    {
        Some(w) => w.max(40),
        None => Table::new().width().unwrap_or(100),
    }
}

/// `text` broken between words into lines of at most `width` characters (a word longer
/// than that stands alone), the lines after the first indented by `indent`; ends in a
/// newline.
pub fn wrap(text: &str, width: usize, indent: &str) -> String {
    let mut out = String::new();
    let mut line = String::new();
    for word in text.split_whitespace() {
        let len = line.chars().count();
        if len > 0 && len + 1 + word.chars().count() > width {
            out.push_str(&line);
            out.push('\n');
            line = indent.to_string();
        } else if len > 0 && !line.ends_with(' ') {
            line.push(' ');
        }
        line.push_str(word);
    }
    out.push_str(&line);
    out.push('\n');
    out
}

/// Figures measured per round (the server's cost, visibility), one row per measure and
/// run, tested like ops/s; `what` heads the first column.
fn round_table(what: &str, rows: &[ServerRow], runs: &[String], width: u16) -> String {
    if rows.is_empty() {
        return String::new();
    }
    let mut t = Table::new();
    t.load_preset(UTF8_FULL_CONDENSED)
        .set_content_arrangement(ContentArrangement::Dynamic)
        .set_width(width);
    t.set_header(vec![
        what.to_string(),
        "run".to_string(),
        "mean ± 95 % CI".to_string(),
        format!("vs {}", runs[0]),
    ]);
    for row in rows {
        for (i, cell) in row.cells.iter().enumerate() {
            let what = if i == 0 {
                format!("{} ({})", row.measure, row.unit)
            } else {
                String::new()
            };
            let (value, vs) = match cell {
                Some(x) => (server_value(x), server_verdict(x)),
                None => ("-".into(), "-".into()),
            };
            t.add_row(vec![what, runs[i].clone(), value, vs]);
        }
    }
    if let Some(col) = t.column_mut(2) {
        col.set_cell_alignment(CellAlignment::Right);
    }
    format!("{t}\n")
}

/// p50 and p99 against the baseline: ratios, starred when the rounds' own percentiles
/// differ significantly.
pub fn latency_verdict(c: &Cell) -> String {
    let (p50, p99) = (
        c.p50_p_adjusted.or(c.p50_p_value),
        c.p99_p_adjusted.or(c.p99_p_value),
    );
    let one = |name: &str, ratio: Option<f64>, p: Option<f64>| -> Option<String> {
        let r = ratio?;
        let mark = match p {
            Some(p) if p < ALPHA => "*",
            Some(_) => "",
            None => "?",
        };
        Some(format!("{name} {r:.2}×{mark}"))
    };
    let parts: Vec<String> = [one("p50", c.p50_ratio, p50), one("p99", c.p99_ratio, p99)]
        .into_iter()
        .flatten()
        .collect();
    if parts.is_empty() {
        "baseline".into()
    } else {
        parts.join(" ")
    }
}

/// Names for runs in tables: each at most [`NAME_WIDTH`] characters where that keeps them
/// apart. Words every name shares (`synchronous_commit` in `synchronous_commit-on` and
/// `synchronous_commit-off`) are left out first, then long names are cut in the middle,
/// the same way everywhere. The full names are in the legend.
pub fn short_names(names: &[String]) -> Vec<String> {
    let unique = |v: &[String]| v.iter().collect::<std::collections::HashSet<_>>().len() == v.len();
    if names.iter().all(|n| n.chars().count() <= NAME_WIDTH) || !unique(names) {
        return names.to_vec();
    }
    let words = |n: &str| -> Vec<String> {
        n.split(['-', '_', '.', '=', ',', ' '])
            .filter(|w| !w.is_empty())
            .map(str::to_string)
            .collect()
    };
    let all: Vec<Vec<String>> = names.iter().map(|n| words(n)).collect();
    let shared = |w: &String| all.iter().all(|ws| ws.contains(w));
    let distinct: Vec<String> = names
        .iter()
        .zip(&all)
        .map(|(n, ws)| {
            let kept: Vec<&str> = ws
                .iter()
                .filter(|w| !shared(w))
                .map(String::as_str)
                .collect();
            if kept.is_empty() || names.len() < 2 {
                n.clone()
            } else {
                kept.join("-")
            }
        })
        .collect();
    let base = if unique(&distinct) {
        distinct
    } else {
        names.to_vec()
    };
    let cut = |n: &str| -> String {
        let chars: Vec<char> = n.chars().collect();
        if chars.len() <= NAME_WIDTH {
            return n.to_string();
        }
        let head: String = chars[..NAME_WIDTH / 2 - 1].iter().collect();
        let tail: String = chars[chars.len() - (NAME_WIDTH - NAME_WIDTH / 2)..]
            .iter()
            .collect();
        format!("{head}…{tail}")
    };
    let short: Vec<String> = base.iter().map(|n| cut(n)).collect();
    if unique(&short) { short } else { base }
}

/// Longest run name shown in a table.
pub const NAME_WIDTH: usize = 16;

/// Markdown, for pasting into a review.
pub fn render_markdown(c: &Comparison) -> String {
    let mut out = format!("### {}: {}\n\n", c.workload, c.runs.join(" vs "));
    out.push_str("| operation |");
    for (i, n) in c.runs.iter().enumerate() {
        let _ = write!(out, " {n} ops/s | {n} p99 ms |");
        if i > 0 {
            let _ = write!(out, " vs {} |", c.runs[0]);
        }
    }
    out.push_str("\n|---|");
    for (i, _) in c.runs.iter().enumerate() {
        out.push_str("---:|---:|");
        if i > 0 {
            out.push_str("---|");
        }
    }
    out.push('\n');
    for row in &c.rows {
        let _ = write!(out, "| {} |", row.op);
        for (i, cell) in row.cells.iter().enumerate() {
            match cell {
                Some(x) => {
                    let _ = write!(out, " {} | {:.2} |", rate(x), x.p99_ms);
                    if i > 0 {
                        let _ = write!(out, " {} |", verdict(x));
                    }
                }
                None => out.push_str(if i > 0 { " - | - | - |" } else { " - | - |" }),
            }
        }
        out.push('\n');
    }
    for (what, rows) in [("server", &c.server), ("visibility", &c.visibility)] {
        if rows.is_empty() {
            continue;
        }
        let _ = write!(
            out,
            "\n| {what} | run | mean ± 95 % CI | vs first |\n|---|---|---:|---|\n"
        );
        for row in rows {
            for (i, cell) in row.cells.iter().enumerate() {
                let (value, vs) = match cell {
                    Some(x) => (server_value(x), server_verdict(x)),
                    None => ("-".into(), "-".into()),
                };
                let _ = writeln!(
                    out,
                    "| {} ({}) | {} | {value} | {vs} |",
                    row.measure, row.unit, c.runs[i]
                );
            }
        }
    }
    for w in &c.power {
        let _ = write!(out, "\n{w}.\n");
    }
    let _ = write!(out, "\n_{}_\n", c.method);
    out
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
