//! `--capacity "p99 < 200ms, errors < 1%"`: the highest arrival rate each target sustains
//! within a service level. The workload's open classes are offered more or less (their
//! rates scaled together, in the proportions written), one short round per step and
//! target, the targets taking turns in the study's order; each step is judged by its own
//! round ([`slo`]) and the next rate chosen by [`search`]. Every step's round is kept in
//! the target's `run.json`; the answer goes to `capacity.txt`, `.json` and `.html`
//! ([`output`]).

pub(crate) mod evidence;
pub(crate) mod output;
pub(crate) mod search;
pub(crate) mod slo;

use std::path::Path;

use super::{Finished, Lane, Order, PointResult, RunCx, RunError};
use crate::report;
use crate::workload::{MAX_ARRIVAL_RATE, Stop, Workload};
use search::Search;

/// The open classes' arrival rates added up: the rate every step scales. `Err` when the
/// workload has nothing a search can vary.
pub(crate) fn base_rate(w: &Workload) -> Result<f64, String> {
    if !matches!(w.run.stop, Stop::Duration(_)) {
        return Err(
            "--capacity: each step is a round of run.duration; this workload's rounds are counted in iterations"
                .into(),
        );
    }
    let mut total = 0.0;
    for c in &w.classes {
        let Some(a) = &c.arrival else { continue };
        if !c.ramp.is_empty() {
            return Err(format!(
                "--capacity: class '{}' ramps its rate; the search sets each step's rate itself (drop the ramp)",
                c.name
            ));
        }
        total += a.rate;
    }
    if total <= 0.0 {
        return Err(
            "--capacity searches the arrival rate of the workload's open classes, and it has none: give a class `arrival: { rate: 10/s }` instead of `count` (its closed classes, if any, keep running beside it)"
                .into(),
        );
    }
    Ok(total)
}

/// The highest rate the search may offer: where the fastest-growing class would reach
/// loadmix's bound on one class's rate.
fn ceiling(w: &Workload, base: f64) -> f64 {
    w.classes
        .iter()
        .filter_map(|c| c.arrival.as_ref())
        .filter(|a| a.rate > 0.0)
        .map(|a| MAX_ARRIVAL_RATE / a.rate * base)
        .fold(f64::INFINITY, f64::min)
}

/// The workload offering `rate` sessions a second in all, each open class its share.
pub(crate) fn at_rate(w: &Workload, base: f64, rate: f64) -> Workload {
    let mut step = w.clone();
    let scale = rate / base;
    for c in &mut step.classes {
        if let Some(a) = &mut c.arrival {
            a.rate = (a.rate * scale).min(MAX_ARRIVAL_RATE);
        }
    }
    step
}

/// Search every target's capacity, write each one's steps and the answer, and print it.
pub(super) async fn run(
    cx: &RunCx<'_>,
    w: &Workload,
    level: &slo::Slo,
    out: &Path,
) -> Result<Finished, RunError> {
    let base = base_rate(w).map_err(RunError::Usage)?;
    let mut lanes = super::open_lanes(cx, w, None, out).await?;
    let order = cx.a.order.unwrap_or(Order::Balanced);
    warm_up(cx, w, order, &mut lanes).await;
    let mut searches: Vec<Search> = lanes
        .iter()
        .map(|_| {
            let steps =
                cx.a.capacity_steps
                    .map_or(search::MAX_STEPS, |n| n as usize);
            Search::new(base, ceiling(w, base)).with_max_steps(steps)
        })
        .collect();
    let mut steps: Vec<Vec<slo::Step>> = lanes.iter().map(|_| Vec::new()).collect();
    let mut k: u32 = 0;
    while searches.iter().any(|s| s.next().is_some()) && !cx.stop.is_cancelled() {
        k = k.saturating_add(1);
        for i in order.sequence(lanes.len(), k, w.run.seed) {
            let Some(next) = searches[i].next() else {
                continue;
            };
            if cx.stop.is_cancelled() {
                break;
            }
            if searches[i].wants_quiet_host() {
                quiet_host(cx).await;
            }
            let step = run_step(cx, &mut lanes[i], level, base, next, k, steps[i].len()).await;
            match step {
                Some(s) => {
                    searches[i].record(next.rate, s.found());
                    steps[i].push(s);
                }
                None => searches[i].interrupt(),
            }
        }
    }
    for s in &mut searches {
        if s.next().is_some() {
            s.interrupt();
        }
    }
    let names: Vec<String> = lanes.iter().map(|l| l.name.clone()).collect();
    let mut point = PointResult {
        label: None,
        reports: Vec::new(),
        interrupted: cx.stop.is_cancelled(),
        thresholds_ok: true,
        write_failed: false,
    };
    for (mut lane, s) in lanes.into_iter().zip(&steps) {
        lane.runner.close(&lane.workload).await;
        // The target's report holds every step as a round, at its own rate; the
        // workload's thresholds are not judged (the service level is).
        lane.workload.thresholds.clear();
        lane.workload.run.rounds = u32::try_from(s.len()).unwrap_or(u32::MAX);
        super::report_lane(cx, lane, out, order, &mut point).await;
    }
    let answer = output::Capacity::new(w, level, base, &names, &searches, steps);
    let write_ok = answer.write(out);
    let text = match cx.a.format {
        super::StdoutFormat::Table => answer.table(),
        super::StdoutFormat::Json => super::json_text(&answer),
        super::StdoutFormat::Nothing => String::new(),
    };
    print!("{}", crate::secrets::redact(&text));
    if !cx.a.quiet {
        eprintln!("reports written to {}", out.display());
    }
    Ok(Finished {
        thresholds_failed: false,
        write_failed: point.write_failed || !write_ok,
        interrupted: point.interrupted,
    })
}

/// `run.warmup_rounds` whole rounds per target at the workload's own rate, thrown away.
async fn warm_up(cx: &RunCx<'_>, w: &Workload, order: Order, lanes: &mut [Lane]) {
    let classes: Vec<String> = w.classes.iter().map(|c| c.name.clone()).collect();
    for k in 1..=w.run.warmup_rounds {
        for i in order.sequence(lanes.len(), k, w.run.seed) {
            if cx.stop.is_cancelled() {
                return;
            }
            let lane = &mut lanes[i];
            cx.progress.begin(
                format!(
                    "{} warm-up round {k}/{} (not counted)",
                    lane.name, w.run.warmup_rounds
                ),
                lane.live.clone(),
                classes.clone(),
                w.length_text(),
            );
            lane.runner.warmup_round(&lane.workload, k).await;
        }
    }
}

/// The host's CPU pressure under which a crowded step is run again, percent, and how long
/// to wait for it at most.
const QUIET_PRESSURE_PCT: f64 = 20.0;
const QUIET_WAIT: std::time::Duration = std::time::Duration::from_secs(10);

/// Before a crowded step runs again: wait, a second at a time and at most
/// [`QUIET_WAIT`], for the host's CPU pressure to fall (where the kernel keeps it).
async fn quiet_host(cx: &RunCx<'_>) {
    let until = tokio::time::Instant::now() + QUIET_WAIT;
    while tokio::time::Instant::now() < until && !cx.stop.is_cancelled() {
        match crate::engine::host::cpu_pressure_now() {
            Some(p) if p > QUIET_PRESSURE_PCT => {
                tokio::select! {
                    _ = tokio::time::sleep(std::time::Duration::from_secs(1)) => {}
                    _ = cx.stop.cancelled() => return,
                }
            }
            _ => return,
        }
    }
}

/// One step: a round of the lane's workload at the step's rate, for its length, judged;
/// `None` when a signal cut it short (an interrupted round says nothing of the level).
async fn run_step(
    cx: &RunCx<'_>,
    lane: &mut Lane,
    level: &slo::Slo,
    base: f64,
    next: search::Next,
    k: u32,
    done: usize,
) -> Option<slo::Step> {
    let rate = next.rate;
    let n = u32::try_from(done).unwrap_or(u32::MAX).saturating_add(1);
    let mut wk = at_rate(&lane.workload, base, rate);
    if let Stop::Duration(d) = wk.run.stop {
        wk.run.stop = Stop::Duration(d.saturating_mul(next.length.max(1)));
    }
    cx.progress.begin(
        format!(
            "{} step {n}: {} offered",
            lane.name,
            output::rate_text(rate)
        ),
        lane.live.clone(),
        wk.classes.iter().map(|c| c.name.clone()).collect(),
        wk.length_text(),
    );
    lane.runner.round(&wk, k).await;
    let result = lane.runner.last_round()?;
    if cx.stop.is_cancelled() || result.interrupted {
        return None;
    }
    let target = cx
        .targets
        .iter()
        .find(|t| t.name == lane.name)
        .map(|t| t.spec.to_string())
        .unwrap_or_default();
    let rep = report::build(&wk, &target, &result);
    let length_s = match wk.run.stop {
        Stop::Duration(d) => d.as_secs_f64(),
        Stop::Iterations(_) => 0.0,
    };
    let step = slo::judge(level, n, slo::Offer { rate, length_s }, &rep);
    if !cx.a.quiet {
        cx.progress.line(&output::step_line(&lane.name, &step));
    }
    Some(step)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn w(yaml: &str) -> Workload {
        crate::workload::load_str("t.yaml", yaml, &[], None).unwrap()
    }

    #[test]
    fn open_classes_are_scaled_together_in_their_proportions() {
        let w = w(
            "run: { duration: 2s }\nusers:\n  - class: a\n    protocol: http\n    arrival: { rate: 30/s }\n    mix: { g: { weight: 1, path: /x } }\n  - class: b\n    protocol: http\n    arrival: { rate: 10/s }\n    mix: { g: { weight: 1, path: /x } }\n  - class: c\n    protocol: http\n    count: 2\n    mix: { g: { weight: 1, path: /x } }\n",
        );
        let base = base_rate(&w).unwrap();
        assert_eq!(base, 40.0);
        let s = at_rate(&w, base, 100.0);
        let rates: Vec<Option<f64>> = s
            .classes
            .iter()
            .map(|c| c.arrival.as_ref().map(|a| a.rate))
            .collect();
        assert_eq!(rates, [Some(75.0), Some(25.0), None]);
        assert_eq!(s.classes[2].count, 2);
        assert!((ceiling(&w, base) - MAX_ARRIVAL_RATE * 40.0 / 30.0).abs() < 1e-6);
    }

    #[test]
    fn a_workload_with_nothing_to_vary_is_refused() {
        let closed = w(
            "users:\n  - class: c\n    protocol: http\n    count: 2\n    mix: { g: { weight: 1, path: /x } }\n",
        );
        assert!(base_rate(&closed).unwrap_err().contains("arrival"));
        let counted = w(
            "run: { iterations: 3 }\nusers:\n  - class: a\n    protocol: http\n    arrival: { rate: 3/s }\n    mix: { g: { weight: 1, path: /x } }\n",
        );
        assert!(base_rate(&counted).unwrap_err().contains("iterations"));
    }
}
