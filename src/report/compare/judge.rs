//! How a comparison is judged: the primary test calibrated against the rounds, a
//! run's verdict, and what its power lets it say (the smallest effect it could see and
//! the rounds a given effect would need).

use crate::report::model::Report;
use crate::report::{power, stats};

use super::server::ServerRow;
use super::{Row, round_percentiles};
use crate::report::power::ALPHA;

/// What [`calibrate`] decided and found.
pub(super) struct Calibration {
    pub(super) primary: String,
    pub(super) same_target: bool,
    pub(super) power: Vec<String>,
}

/// One test of a run against the first: which row (or server row) and which measure.
#[derive(Clone, Copy, PartialEq)]
pub(super) enum Test {
    Rate(usize),
    P50(usize),
    P99(usize),
    /// Row `k` of group `g` of the figures measured once per round (the server's, the
    /// teams' visibility, the fault windows').
    Round(usize, usize),
}

/// Judges every run against the first as one family of tests: the primary test (the
/// headline's ops/s, or its p50 when both runs' throughput was set by the workload) at
/// α alone, every other test Holm-corrected; and says in words what each comparison could
/// have detected.
pub(super) fn calibrate(
    rows: &mut [Row],
    per_round: &mut [Vec<ServerRow>],
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
        judge_run(rows, per_round, i, paced, primary);
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
pub(super) fn judge_run(
    rows: &mut [Row],
    per_round: &mut [Vec<ServerRow>],
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
    for (g, group) in per_round.iter().enumerate() {
        for (k, row) in group.iter().enumerate() {
            if let Some(c) = row.cells.get(i).and_then(Option::as_ref) {
                tests.push((Test::Round(g, k), c.p_value));
            }
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
            Test::Round(g, k) => {
                if let Some(c) = per_round[g][k].cells[i].as_mut() {
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
pub(super) fn power_words(
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
    let (Test::Rate(k) | Test::P50(k) | Test::P99(k) | Test::Round(_, k)) = t;
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

/// The smallest difference of means `base` and `mine` could detect, as a percent of
/// `base`'s mean ([`power::mde`]).
pub(super) fn detectable_pct(base: &[f64], mine: &[f64]) -> Option<f64> {
    let (m, _) = stats::mean_var(base);
    let sd = power::pooled_sd(base, mine)?;
    let d = power::mde(sd, base.len(), mine.len())?;
    (m > 0.0).then(|| 100.0 * d / m)
}
