//! A capacity search's answer: per target, the rate it sustained every time and the rate
//! from which it failed every time, why the search ended, each step; the targets against
//! the first; as the table on stdout and in `capacity.txt`, `capacity.json` (schema
//! `loadmix/capacity/v1`) and `capacity.html` with its charts.

use std::path::Path;

use serde::{Deserialize, Serialize};

use super::search::{End, Outcome, PRECISION, RUNS_AT_EACH_END, Search, non_monotone};
use super::slo::{Slo, Step, StepCost};
use crate::report::{self, charts};
use crate::workload::{Stop, ThresholdMetric, Workload};

pub(crate) const SCHEMA: &str = "loadmix/capacity/v1";

/// The whole answer.
#[derive(Debug, Serialize, Deserialize)]
pub(crate) struct Capacity {
    pub schema: String,
    pub workload: String,
    pub service_level: Slo,
    /// Sessions per second of the workload's open classes as written: the first step.
    pub start_rate: f64,
    /// Each step's round, seconds.
    pub step_s: f64,
    /// Bisection stops when the bracket is this narrow (a share of its low end).
    pub precision: f64,
    pub targets: Vec<TargetCapacity>,
    /// Each pair of targets, the one listed first as the baseline: every pair a ranking
    /// rests on, told apart or said not to be.
    pub versus: Vec<Versus>,
}

/// One target's answer.
#[derive(Debug, Serialize, Deserialize)]
pub(crate) struct TargetCapacity {
    pub name: String,
    /// The highest rate at or below which every step kept the level (sessions/s).
    pub sustained: Option<f64>,
    /// The lowest rate at or above which every step missed it.
    pub fails_from: Option<f64>,
    pub end: End,
    /// A rate that passed above one that failed (the lowest failing, the highest passing
    /// above it): the server did not keep the level monotonically, and the answer says
    /// where.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub non_monotone: Option<(f64, f64)>,
    /// The answer in words.
    pub verdict: String,
    pub steps: Vec<Step>,
}

/// One target against another.
#[derive(Debug, Serialize, Deserialize)]
pub(crate) struct Versus {
    pub name: String,
    pub baseline: String,
    /// Its sustained rate over the baseline's.
    pub ratio: Option<f64>,
    /// Their intervals do not overlap: the search tells them apart.
    pub separate: bool,
    pub words: String,
}

impl Capacity {
    pub(crate) fn new(
        w: &Workload,
        level: &Slo,
        start: f64,
        names: &[String],
        searches: &[Search],
        steps: Vec<Vec<Step>>,
    ) -> Capacity {
        let targets: Vec<TargetCapacity> = names
            .iter()
            .zip(searches)
            .zip(steps)
            .map(|((name, s), steps)| {
                let (sustained, fails_from) = s.bracket();
                let end = s.end().unwrap_or(End::Interrupted);
                let judged: Vec<(f64, Outcome)> = steps
                    .iter()
                    .filter(|x| x.crowded.is_none() || x.outcome == Outcome::Passed)
                    .map(|x| (x.rate, x.outcome))
                    .collect();
                let odd = non_monotone(&judged);
                let mut words = verdict(sustained, fails_from, end, steps.len());
                if let Some((fail, pass)) = odd {
                    words.push_str(&format!(
                        "; not monotone: passed at {} above a miss at {}",
                        rate_text(pass),
                        rate_text(fail)
                    ));
                }
                if steps.iter().any(|x| x.crowded.is_some()) {
                    words.push_str(
                        "; the host was crowded during some steps (the generator and the server shared the machine: see those steps)",
                    );
                }
                TargetCapacity {
                    name: name.clone(),
                    sustained,
                    fails_from,
                    end,
                    non_monotone: odd,
                    verdict: words,
                    steps,
                }
            })
            .collect();
        let versus = pairs(&targets);
        Capacity {
            schema: SCHEMA.into(),
            workload: w.name.clone(),
            service_level: level.clone(),
            start_rate: start,
            step_s: match w.run.stop {
                Stop::Duration(d) => d.as_secs_f64(),
                Stop::Iterations(_) => 0.0,
            },
            precision: PRECISION,
            targets,
            versus,
        }
    }

    /// The answer and every step, for the console and `capacity.txt`.
    pub(crate) fn table(&self) -> String {
        let mut out = format!(
            "capacity of {} at {} (open classes scaled together; each step a round of {})\n",
            self.workload,
            self.service_level.text,
            secs_text(self.step_s)
        );
        out.push_str(&format!("{}\n", answers(&self.targets)));
        for v in &self.versus {
            out.push_str(&format!("{}\n", v.words));
        }
        for c in &self.targets {
            let mut t = comfy_table::Table::new();
            t.load_preset(comfy_table::presets::UTF8_FULL_CONDENSED);
            let cost = has_cost(&c.steps);
            t.set_header(step_header(cost));
            for s in &c.steps {
                t.add_row(step_cells(s, cost));
            }
            out.push_str(&format!("\nsteps of {}\n{t}\n", c.name));
        }
        out
    }

    /// Write `capacity.txt`, `capacity.json` and `capacity.html` into `out`; false when
    /// any could not be written (each failure is printed).
    pub(crate) fn write(&self, out: &Path) -> bool {
        let files = [
            ("capacity.txt", Ok(self.table())),
            (
                "capacity.json",
                serde_json::to_string_pretty(self).map_err(|e| e.to_string()),
            ),
            ("capacity.html", Ok(self.html())),
        ];
        super::super::write_all(out, files)
    }

    fn html(&self) -> String {
        let mut intro = vec![format!(
            "service level: {} · open classes scaled together from {} · each step a round of {} · bisection to {:.0} %",
            self.service_level.text,
            rate_text(self.start_rate),
            secs_text(self.step_s),
            self.precision * 100.0
        )];
        intro.extend(self.targets.iter().map(|c| match cost_at_capacity(c) {
            Some(k) => format!(
                "{}: {} (the server at that rate: {})",
                c.name,
                c.verdict,
                k.text()
            ),
            None => format!("{}: {}", c.name, c.verdict),
        }));
        intro.extend(self.versus.iter().map(|v| v.words.clone()));
        let series = |pick: fn(&Step) -> Option<f64>| -> Vec<charts::RateSeries> {
            self.targets
                .iter()
                .map(|c| {
                    let pts = c
                        .steps
                        .iter()
                        .filter_map(|s| pick(s).map(|y| (s.rate, y, s.outcome == Outcome::Passed)))
                        .collect();
                    (c.name.clone(), pts)
                })
                .collect()
        };
        let bound = |metric: ThresholdMetric| {
            self.service_level
                .rules
                .iter()
                .find(|r| {
                    r.metric == metric && crate::report::model::SUM_NAMES.contains(&r.op.as_str())
                })
                .map(|r| r.value)
        };
        let charts = vec![
            (
                "capacity-p99",
                charts::against_rate(
                    "p99 latency as users felt it (ms) against the offered rate",
                    "p99 ms",
                    &series(|s| s.p99_ms),
                    bound(ThresholdMetric::P99),
                ),
            ),
            (
                "capacity-errors",
                charts::against_rate(
                    "failed share (%) against the offered rate",
                    "errors %",
                    &series(|s| s.errors_pct),
                    bound(ThresholdMetric::Errors),
                ),
            ),
        ];
        let cost = self.targets.iter().any(|c| has_cost(&c.steps));
        let steps: Vec<(String, Vec<Vec<String>>)> = self
            .targets
            .iter()
            .map(|c| {
                (
                    format!("steps of {}", c.name),
                    c.steps.iter().map(|s| step_cells(s, cost)).collect(),
                )
            })
            .collect();
        report::html::capacity(
            &format!("{}: capacity at {}", self.workload, self.service_level.text),
            &intro,
            charts,
            &step_header(cost),
            &steps,
        )
    }
}

/// The steps' columns; with `cost`, the watched server's cost of each step before the
/// verdict.
fn step_header(cost: bool) -> Vec<&'static str> {
    let mut h = vec![
        "step",
        "offered/s",
        "achieved ops/s",
        "p99 ms",
        "errors %",
        "dropped %",
        "lag p99 ms",
        "s",
    ];
    if cost {
        h.extend(["server CPU ms/op", "GC per 1,000 ops"]);
    }
    h.push("verdict");
    h
}

fn step_cells(s: &Step, cost: bool) -> Vec<String> {
    let opt = |v: Option<f64>, d: usize| v.map_or("-".into(), |v| format!("{v:.d$}"));
    let mut row = vec![
        s.step.to_string(),
        rate_text(s.rate),
        format!("{:.1}", s.achieved_ops_per_sec),
        opt(s.p99_ms, 2),
        opt(s.errors_pct, 2),
        format!("{:.2}", s.dropped_pct),
        format!("{:.2}", s.lag_p99_ms),
        secs_text(s.length_s),
    ];
    if cost {
        let c = s.server.as_ref();
        row.push(opt(c.map(|c| c.cpu_ms_per_op), 3));
        row.push(opt(c.and_then(|c| c.gc_per_1000_ops), 2));
    }
    row.push(outcome_text(s));
    row
}

/// Whether any step has the watched server's cost.
fn has_cost(steps: &[Step]) -> bool {
    steps.iter().any(|s| s.server.is_some())
}

/// What the server spent at the rate the target sustained: the mean over the steps that
/// passed at that rate.
fn cost_at_capacity(c: &TargetCapacity) -> Option<StepCost> {
    let rate = c.sustained?;
    let at: Vec<&StepCost> = c
        .steps
        .iter()
        .filter(|s| s.outcome == Outcome::Passed && (s.rate - rate).abs() <= rate * 1e-9)
        .filter_map(|s| s.server.as_ref())
        .collect();
    StepCost::mean(&at)
}

fn outcome_text(s: &Step) -> String {
    match (s.outcome, &s.why) {
        (Outcome::Passed, Some(w)) => format!("passed; {w}"),
        (Outcome::Passed, None) => "passed".into(),
        (Outcome::Failed, Some(w)) => format!("failed: {w}"),
        (Outcome::Failed, None) => "failed".into(),
        (Outcome::Undecided | Outcome::TooFew, w) => w.clone().unwrap_or("undecided".into()),
        (Outcome::Generator, w) => format!(
            "generator-limited: {}",
            w.as_deref()
                .unwrap_or("the generator did not keep its schedule")
        ),
        (Outcome::Workload, w) => format!(
            "workload-limited: {}",
            w.as_deref()
                .unwrap_or("the workload's session cap held the arrivals")
        ),
    }
}

/// The line the console gets after each step.
pub(crate) fn step_line(target: &str, s: &Step) -> String {
    format!(
        "{target} step {}: {} offered, {:.1} ops/s, p99 {} ms, errors {} %: {}",
        s.step,
        rate_text(s.rate),
        s.achieved_ops_per_sec,
        s.p99_ms.map_or("-".into(), |v| format!("{v:.2}")),
        s.errors_pct.map_or("-".into(), |v| format!("{v:.2}")),
        outcome_text(s)
    )
}

/// A rate with as many digits as it needs: `840/s`, `12.5/s`, `0.75/s`.
pub(crate) fn rate_text(r: f64) -> String {
    if r >= 100.0 {
        format!("{r:.0}/s")
    } else if r >= 10.0 {
        format!("{r:.1}/s")
    } else {
        format!("{r:.2}/s")
    }
}

fn secs_text(s: f64) -> String {
    if s.fract().abs() < 1e-9 {
        format!("{s:.0}s")
    } else {
        format!("{s:.3}s")
    }
}

/// A target's answer in words.
fn verdict(lo: Option<f64>, hi: Option<f64>, end: End, steps: usize) -> String {
    let r = |v: Option<f64>| v.map_or("-".to_string(), rate_text);
    match end {
        End::Found => match hi.zip(lo) {
            Some((h, l)) if h > l * (1.0 + PRECISION) + 1e-9 => format!(
                "sustains {} every time, fails every time from {}: wider than {:.0} % because between them the server is at its edge (steps there kept the level some times and not others, or their samples could not tell it from the bound: longer steps would narrow it)",
                r(lo),
                r(hi),
                PRECISION * 100.0
            ),
            _ => format!(
                "sustains {}, fails from {} (each end judged at least {RUNS_AT_EACH_END} times, each step at 95 % confidence)",
                r(lo),
                r(hi)
            ),
        },
        End::TooFew { rate } => format!(
            "{}: at {} even the longest step had too few samples to tell the level (see that step's arithmetic)",
            match (lo, hi) {
                (Some(l), Some(h)) => format!("between {} and {}", rate_text(l), rate_text(h)),
                (Some(l), None) => format!("at least {}", rate_text(l)),
                _ => "no answer".into(),
            },
            rate_text(rate)
        ),
        End::Generator { rate } => format!(
            "{}: at {} the generator, not the server, set the limit (it did not keep its schedule: see that step)",
            match lo {
                Some(l) => format!("at least {}", rate_text(l)),
                None => "no rate kept the level before that".into(),
            },
            rate_text(rate)
        ),
        End::Workload { rate } => format!(
            "{}: at {} the workload's session cap, not the server, set the limit (raise the class's max_concurrency, or its number of returning users)",
            match lo {
                Some(l) => format!("at least {}", rate_text(l)),
                None => "no rate kept the level before that".into(),
            },
            rate_text(rate)
        ),
        End::Ceiling { rate } => format!(
            "at least {}: the most loadmix offers one class",
            rate_text(rate)
        ),
        End::Floor { rate } => format!("missed the level even at {}", rate_text(rate)),
        End::Steps => format!(
            "between {} and {}: after {steps} steps that disagreed, no narrower interval",
            r(lo),
            r(hi)
        ),
        End::Interrupted => format!(
            "stopped after {steps} steps: so far sustains {}, fails from {}",
            r(lo),
            r(hi)
        ),
    }
}

/// The most steps `--capacity-steps` lets a search make.
pub(crate) const MOST_STEPS: usize = 1000;

/// A `capacity.json` read back, bounded as a report is; refused unless it is one whose
/// figures a search could have written.
pub(crate) fn load(path: &Path) -> Result<Capacity, String> {
    let text = crate::formats::files::read_text(path, crate::formats::files::REPORT)
        .map_err(|e| format!("{}: {e}", path.display()))?;
    let c: Capacity = serde_json::from_str(&text).map_err(|e| {
        format!(
            "{}:{}:{}: not a capacity answer: {e}",
            path.display(),
            e.line(),
            e.column()
        )
    })?;
    if c.schema != SCHEMA {
        return Err(format!(
            "{}: schema {:?}, expected {SCHEMA}",
            path.display(),
            c.schema
        ));
    }
    let rate_ok = |r: Option<f64>| r.is_none_or(|r| r.is_finite() && r >= 0.0);
    if let Some(t) = c
        .targets
        .iter()
        .find(|t| !rate_ok(t.sustained) || !rate_ok(t.fails_from))
    {
        return Err(format!(
            "{}: target {:?} has a rate no search gives (negative or not finite)",
            path.display(),
            t.name
        ));
    }
    // Every step kept the level up to `sustained`, and missed it from `fails_from` on:
    // the one is below the other. A search makes at most `--capacity-steps` (1,000) steps,
    // and runs a crowded one at most once more.
    let contradicts = |t: &&TargetCapacity| {
        matches!((t.sustained, t.fails_from), (Some(s), Some(f)) if s >= f)
            || t.steps.len() > 2 * MOST_STEPS
    };
    if let Some(t) = c.targets.iter().find(contradicts) {
        return Err(format!(
            "{}: target {:?} says what no search gives (sustains {:?}, fails from {:?}, {} steps)",
            path.display(),
            t.name,
            t.sustained,
            t.fails_from,
            t.steps.len()
        ));
    }
    Ok(c)
}

/// Whether a file names itself a capacity answer, so that `compare` reads it as one.
pub(crate) fn is_capacity(path: &Path) -> bool {
    // Only the schema is read: the rest is skipped, not built (a report of a long run
    // would cost many times its size as a `Value`).
    #[derive(Deserialize)]
    struct Schema {
        schema: Option<String>,
    }
    crate::formats::files::read_text(path, crate::formats::files::REPORT)
        .ok()
        .and_then(|t| serde_json::from_str::<Schema>(&t).ok())
        .is_some_and(|v| v.schema.as_deref() == Some(SCHEMA))
}

/// Saved answers compared: every target of every file (named `FILE:TARGET` when there
/// are several files), each against the first. `Err` when they searched different
/// workloads or service levels, unless `force`.
pub(crate) fn compare_answers(
    files: Vec<(String, Capacity)>,
    force: bool,
) -> Result<String, String> {
    let Some((_, first)) = files.first() else {
        return Err("nothing to compare".into());
    };
    let (workload, level) = (first.workload.clone(), first.service_level.text.clone());
    if !force
        && let Some((name, c)) = files
            .iter()
            .find(|(_, c)| c.workload != workload || c.service_level.text != level)
    {
        return Err(format!(
            "{name} searched {} at {}, the first {workload} at {level}: --force to compare them anyway",
            c.workload, c.service_level.text
        ));
    }
    let several = files.len() > 1;
    let targets: Vec<TargetCapacity> = files
        .into_iter()
        .flat_map(|(file, c)| {
            c.targets.into_iter().map(move |mut t| {
                if several {
                    t.name = format!("{file}:{}", t.name);
                }
                t
            })
        })
        .collect();
    let mut out = format!("capacity of {workload} at {level}\n{}\n", answers(&targets));
    for v in pairs(&targets) {
        out.push_str(&v.words);
        out.push('\n');
    }
    Ok(out)
}

/// Each target's answer, a row each: the console's and `capacity.txt`'s first table, and
/// saved answers compared.
fn answers(targets: &[TargetCapacity]) -> comfy_table::Table {
    let mut t = comfy_table::Table::new();
    t.load_preset(comfy_table::presets::UTF8_FULL_CONDENSED);
    let cost = targets.iter().any(|c| has_cost(&c.steps));
    let mut header = vec!["target", "sustains", "fails from", "steps"];
    if cost {
        header.push("server at that rate");
    }
    header.push("answer");
    t.set_header(header);
    for c in targets {
        let mut row = vec![
            c.name.clone(),
            c.sustained.map_or("-".into(), rate_text),
            c.fails_from.map_or("-".into(), rate_text),
            c.steps.len().to_string(),
        ];
        if cost {
            row.push(cost_at_capacity(c).map_or("-".into(), |k| k.text()));
        }
        row.push(c.verdict.clone());
        t.add_row(row);
    }
    t
}

/// Every pair of targets, the earlier in the list as the baseline.
fn pairs(targets: &[TargetCapacity]) -> Vec<Versus> {
    targets
        .iter()
        .enumerate()
        .flat_map(|(i, a)| targets.iter().skip(i + 1).map(move |b| versus(a, b)))
        .collect()
}

/// `b` against the baseline `a`.
fn versus(a: &TargetCapacity, b: &TargetCapacity) -> Versus {
    let ratio = match (a.sustained, b.sustained) {
        (Some(x), Some(y)) if x > 0.0 => Some(y / x),
        _ => None,
    };
    // Apart when one's every-time-pass is above the other's every-time-fail.
    let above = |x: &TargetCapacity, y: &TargetCapacity| match (x.sustained, y.fails_from) {
        (Some(l), Some(h)) => l >= h,
        _ => false,
    };
    let separate = above(a, b) || above(b, a);
    let bound = |t: &TargetCapacity| {
        matches!(
            t.end,
            End::Generator { .. } | End::Workload { .. } | End::Ceiling { .. }
        )
    };
    let words = match (ratio, separate) {
        (Some(q), false) if bound(a) || bound(b) => format!(
            "{} sustains {q:.2}× {}'s rate, but {} is only a lower bound (the most this machine or workload could offer): the search cannot rank them",
            b.name,
            a.name,
            match (bound(a), bound(b)) {
                (true, true) => "each",
                (true, false) => a.name.as_str(),
                _ => b.name.as_str(),
            }
        ),
        (Some(q), true) => format!(
            "{} sustains {q:.2}× {}'s rate, and their intervals do not overlap: {} is {}",
            b.name,
            a.name,
            b.name,
            if q > 1.0 { "higher" } else { "lower" }
        ),
        (Some(q), false) => format!(
            "{} sustains {q:.2}× {}'s rate, but their intervals overlap: at this precision the search does not tell them apart",
            b.name, a.name
        ),
        (None, _) => format!(
            "{} and {} cannot be compared: one has no rate it sustained every time",
            b.name, a.name
        ),
    };
    Versus {
        name: b.name.clone(),
        baseline: a.name.clone(),
        ratio,
        separate,
        words,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn target(name: &str, lo: Option<f64>, hi: Option<f64>) -> TargetCapacity {
        TargetCapacity {
            name: name.into(),
            sustained: lo,
            fails_from: hi,
            end: End::Found,
            non_monotone: None,
            verdict: String::new(),
            steps: Vec::new(),
        }
    }

    #[test]
    fn targets_are_apart_only_when_their_intervals_do_not_overlap() {
        let a = target("memory", Some(800.0), Some(840.0));
        let b = target("sqlite", Some(300.0), Some(315.0));
        let v = versus(&a, &b);
        assert!(v.separate, "{}", v.words);
        assert!((v.ratio.unwrap() - 0.375).abs() < 1e-9);
        assert!(v.words.contains("sqlite is lower"), "{}", v.words);
        let c = target("again", Some(820.0), Some(900.0));
        let v = versus(&a, &c);
        assert!(!v.separate && v.words.contains("overlap"), "{}", v.words);
        let d = target("none", None, Some(10.0));
        assert!(versus(&a, &d).ratio.is_none());
    }

    fn step(rate: f64, outcome: Outcome, cpu: f64, gc: Option<f64>) -> Step {
        Step {
            step: 0,
            rate,
            achieved_ops_per_sec: rate,
            p99_ms: None,
            errors_pct: None,
            dropped_pct: 0.0,
            lag_p99_ms: 0.0,
            length_s: 10.0,
            crowded: None,
            rules: Vec::new(),
            outcome,
            why: None,
            server: Some(StepCost {
                cpu_ms_per_op: cpu,
                gc_per_1000_ops: gc,
                gc_ms_per_1000_ops: gc.map(|g| g * 2.0),
            }),
        }
    }

    #[test]
    fn the_cost_at_capacity_is_the_mean_of_the_steps_passed_at_that_rate() {
        let mut t = target("jdbc", Some(400.0), Some(420.0));
        t.steps = vec![
            step(400.0, Outcome::Passed, 0.2, Some(1.0)),
            step(420.0, Outcome::Failed, 9.0, Some(9.0)),
            step(400.0, Outcome::Passed, 0.4, Some(3.0)),
            step(400.0, Outcome::Failed, 9.0, Some(9.0)),
            step(200.0, Outcome::Passed, 9.0, Some(9.0)),
        ];
        let c = cost_at_capacity(&t).unwrap();
        assert!((c.cpu_ms_per_op - 0.3).abs() < 1e-9, "{c:?}");
        assert_eq!(
            (c.gc_per_1000_ops, c.gc_ms_per_1000_ops),
            (Some(2.0), Some(4.0))
        );
        assert_eq!(c.text(), "0.300 ms CPU/op · 2.00 GC/1,000 (4.0 ms)");
        // A step that could not read a JVM leaves collections unsaid, not averaged as 0.
        t.steps[2].server.as_mut().unwrap().gc_per_1000_ops = None;
        assert_eq!(cost_at_capacity(&t).unwrap().gc_per_1000_ops, None);
        // Nothing sustained: no cost to give.
        t.sustained = None;
        assert!(cost_at_capacity(&t).is_none());
    }

    #[test]
    fn rates_keep_the_digits_they_need() {
        assert_eq!(rate_text(840.4), "840/s");
        assert_eq!(rate_text(12.46), "12.5/s");
        assert_eq!(rate_text(0.754), "0.75/s");
        assert!(verdict(Some(100.0), Some(200.0), End::Found, 9).contains("at its edge"));
        assert!(
            verdict(Some(3200.0), None, End::Generator { rate: 6400.0 }, 7)
                .contains("at least 3200/s")
        );
        assert!(
            verdict(None, Some(250.0), End::Generator { rate: 125.0 }, 2)
                .starts_with("no rate kept the level before that: at 125/s")
        );
    }

    /// A ranking of several configurations rests on every pair: each is compared, and a
    /// pair whose intervals overlap is said to be one the search does not tell apart.
    #[test]
    fn every_pair_of_targets_is_compared() {
        let t = [
            target("kahadb", Some(7_600.0), Some(8_000.0)),
            target("jdbc-g1", Some(2_353.0), Some(2_484.0)),
            target("jdbc-parallel", Some(2_378.0), Some(2_594.0)),
        ];
        let v = pairs(&t);
        let named: Vec<(&str, &str)> = v
            .iter()
            .map(|x| (x.baseline.as_str(), x.name.as_str()))
            .collect();
        assert_eq!(
            named,
            [
                ("kahadb", "jdbc-g1"),
                ("kahadb", "jdbc-parallel"),
                ("jdbc-g1", "jdbc-parallel")
            ]
        );
        assert!(v[0].separate && v[1].separate && !v[2].separate);
        assert!(
            v[2].words.contains("does not tell them apart"),
            "{}",
            v[2].words
        );
    }
}
