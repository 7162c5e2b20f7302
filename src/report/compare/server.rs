//! The server's side of a comparison, and the teams' visibility: each target's figures
//! over its rounds, Welch-tested like an operation's, with the verdict and value each
//! cell shows.

use serde::Serialize;

use crate::report::model::Report;
use crate::report::stats;

use crate::report::power::{ALPHA, welch_p};

/// One run's total throughput and latency per second, its rounds laid end to end.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct OverTime {
    /// Successes per second: (seconds from the start, value).
    pub successes: Vec<(f64, f64)>,
    /// p99 latency per second, ms: (seconds from the start, value).
    pub p99_ms: Vec<(f64, f64)>,
    /// The length of the run's time axis, seconds.
    pub length_s: f64,
    /// Its fault windows on that axis, seconds.
    pub faults: Vec<(f64, f64)>,
}

impl OverTime {
    pub(super) fn of(r: &Report) -> OverTime {
        let names = ["successes".to_string(), "p99".to_string()];
        let (mut lines, _, length_s) =
            crate::report::axis::rounds_in_sequence(r, &names, |round, name| {
                let mid = |i: usize| crate::report::axis::per_second(round, i, 0).0;
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
                    crate::report::axis::rates(round, &counts)
                }
            });
        let (bands, _) = crate::report::axis::bands(r);
        let faults = crate::report::axis::fault_spans(r, &bands);
        let p99_ms = lines.pop().map(|(_, p)| p).unwrap_or_default();
        let successes = lines.pop().map(|(_, p)| p).unwrap_or_default();
        OverTime {
            successes,
            p99_ms,
            length_s,
            faults,
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
pub(super) fn push_round(
    out: &mut Vec<(String, String, Vec<f64>)>,
    measure: &str,
    unit: &str,
    v: f64,
) {
    match out.iter_mut().find(|(m, _, _)| m == measure) {
        Some((_, _, vs)) => vs.push(v),
        None => out.push((measure.into(), unit.into(), vec![v])),
    }
}

/// The server figures every round of a run recorded, keyed by measure: per round, CPU ms
/// per successful operation of each process, counters per 1,000 operations, gauges' means.
pub(super) fn server_rounds(r: &Report) -> Vec<(String, String, Vec<f64>)> {
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
pub(super) fn visibility_rounds(r: &Report) -> Vec<(String, String, Vec<f64>)> {
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

/// What each fault window of every round of a run cost, keyed by measure and by the
/// window (its fault and begin): its time to recover (in the rounds it recovered in),
/// to detect, its dip and the failures that started in it and after it, and where
/// messages were stamped, those it lost and of them the ones the broker had taken.
pub(super) fn fault_rounds(r: &Report) -> Vec<(String, String, Vec<f64>)> {
    let mut out: Vec<(String, String, Vec<f64>)> = Vec::new();
    for f in r.rounds.iter().flat_map(|x| &x.faults) {
        let which = format!("{} at {}s", f.fault, f.at_s);
        let mut add =
            |m: &str, unit: &str, v: f64| push_round(&mut out, &format!("{m} · {which}"), unit, v);
        if let Some(v) = f.recover_s {
            add("recover", "s", v);
        }
        if let Some(v) = f.detect_ms {
            add("detect", "ms", v);
        }
        add("dip", "successes", f.dip);
        let failed = f.during.errors.values().sum::<u64>() + f.after.errors.values().sum::<u64>();
        add("failed", "operations", failed as f64);
        if let Some(m) = f.messages {
            add("lost", "messages", m.lost as f64);
            add(
                "lost, send not failed",
                "messages",
                m.lost.saturating_sub(m.lost_failed) as f64,
            );
            add("duplicated", "messages", m.duplicated as f64);
        }
    }
    out
}

pub(super) fn server_rows(reports: &[Report]) -> Vec<ServerRow> {
    round_rows(reports.iter().map(server_rounds).collect())
}

/// Rows of figures measured once per round, one per measure any run has, each run's
/// mean over its rounds tested against the first run's (Welch).
pub(super) fn round_rows(per_run: Vec<Vec<(String, String, Vec<f64>)>>) -> Vec<ServerRow> {
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
        // Tested against a baseline of 0, where no ratio is: the difference says it.
        (None, Some(_)) if c.mean == 0.0 => "0, as the baseline".into(),
        (None, Some(p)) if p < ALPHA => {
            format!("+{} over 0, significant ({})", sig(c.mean), p_text(p))
        }
        (None, Some(p)) => format!("+{} over 0, not significant (p={p:.2})", sig(c.mean)),
        (None, None) => "baseline".into(),
        (Some(r), Some(p)) if p < ALPHA => format!("{r:.2}× significant ({})", p_text(p)),
        (Some(r), Some(p)) => format!("{r:.2}× not significant (p={p:.2})"),
        (Some(r), None) => format!("{r:.2}× (one round: not tested)"),
    }
}

/// A server cell's mean with its interval, as the tables print it.
pub fn server_value(c: &ServerCell) -> String {
    match c.ci95 {
        Some([lo, hi]) => crate::report::stats::with_ci(c.mean, (hi - lo) / 2.0, " ±"),
        None => sig(c.mean),
    }
}

/// Four significant figures at most, without a needless exponent.
pub(super) fn sig(v: f64) -> String {
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
