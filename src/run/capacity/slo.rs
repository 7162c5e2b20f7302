//! A service level (`--capacity "p99 < 200ms, errors < 1%"`): its rules, read against the
//! workload's names, and one step judged against them and against the generator's own
//! schedule (a step the generator could not keep says nothing of the server).

use serde::{Deserialize, Serialize};

use super::evidence::{Told, fewest, quantile_ranks, tail_of, tell};
use super::search::{Found, Outcome};
use crate::report::Report;
use crate::report::model::LAG_P99_LIMIT_MS;
use crate::report::thresholds::{figure, latency_histogram, rows_of};
use crate::workload::{Threshold, ThresholdMetric, Workload};

/// At most this many rules, and this long a text: a service level is a line, not a file.
const MAX_RULES: usize = 20;
const MAX_TEXT: usize = 1_000;
/// A step whose arrivals were dropped (or started late by the generator) beyond this
/// share, percent, did not offer what it says.
pub(crate) const MAX_DROPPED_PCT: f64 = 1.0;
/// A step whose arrivals the generator started late beyond this share, percent, did not
/// offer the rate it names, whatever it found.
const BEHIND_ALWAYS_PCT: f64 = 10.0;
/// loadmix's own CPU above this share of all cores: it, not the host, was the limit.
const OWN_CPU_LIMIT: f64 = 0.90;
/// Processes other than loadmix and the watched server above this share of the machine:
/// the host was crowded. With the generator late, also any process (the watched server
/// too) above it, CPU pressure above this share of the step, or a run queue over twice
/// the cores.
const CROWDED_PCT: f64 = 50.0;

/// The rules a step must keep.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct Slo {
    /// As written.
    pub text: String,
    #[serde(skip, default)]
    pub rules: Vec<Threshold>,
}

/// `[OP ]METRIC CMP VALUE, ...`: `p99 < 200ms, errors < 1%` (of the headline sum) or
/// `caldav.put_event p95 < 1s` (of an operation, a class or a sum).
pub(crate) fn parse(text: &str, w: &Workload) -> Result<Slo, String> {
    if text.len() > MAX_TEXT {
        return Err(format!(
            "--capacity: {} characters; a service level has at most {MAX_TEXT}",
            text.len()
        ));
    }
    let names = w.rule_names();
    let headline = if names.iter().any(|n| n == "total") {
        "total"
    } else {
        "sent"
    };
    let items: Vec<&str> = text
        .split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .collect();
    if items.is_empty() {
        return Err("--capacity: give a service level, e.g. \"p99 < 200ms, errors < 1%\"".into());
    }
    if items.len() > MAX_RULES {
        return Err(format!(
            "--capacity: {} rules; at most {MAX_RULES}",
            items.len()
        ));
    }
    let rules = items
        .iter()
        .map(|item| rule(item, &names, headline))
        .collect::<Result<Vec<_>, _>>()?;
    Ok(Slo {
        text: items.join(", "),
        rules,
    })
}

/// One rule of the service level.
fn rule(item: &str, names: &[String], headline: &str) -> Result<Threshold, String> {
    let at = item
        .find(['<', '>'])
        .ok_or_else(|| format!("--capacity: '{item}' needs a comparison, e.g. \"p99 < 200ms\""))?;
    let (left, condition) = item.split_at(at);
    let words: Vec<&str> = left.split_whitespace().collect();
    let (op, metric_name) = match words.as_slice() {
        [m] => (headline, *m),
        [op, m] => (*op, *m),
        _ => {
            return Err(format!(
                "--capacity: '{item}': write METRIC CMP VALUE or OPERATION METRIC CMP VALUE"
            ));
        }
    };
    let metric = ThresholdMetric::NAMES
        .iter()
        .find(|(n, _)| *n == metric_name)
        .map(|(_, m)| *m)
        .ok_or_else(|| {
            let known: Vec<&str> = ThresholdMetric::NAMES.iter().map(|(n, _)| *n).collect();
            format!(
                "--capacity: '{item}': no metric '{metric_name}'; one of {}",
                known.join(", ")
            )
        })?;
    if !names.iter().any(|n| n == op) {
        return Err(format!(
            "--capacity: '{item}': the workload has no operation, class or sum named '{op}' (it has {})",
            names.join(", ")
        ));
    }
    let (cmp, value) =
        Threshold::condition(metric, condition).map_err(|m| format!("--capacity: {m}"))?;
    Ok(Threshold {
        op: op.to_string(),
        metric,
        cmp,
        value,
        text: match op == headline && words.len() == 1 {
            true => format!("{metric_name} {}", condition.trim()),
            false => format!("{op} {metric_name} {}", condition.trim()),
        },
    })
}

/// One rule at one step.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct RuleAt {
    pub rule: String,
    /// `None`: nothing to read it from (no success to time).
    pub observed: Option<f64>,
    pub passed: bool,
    /// Neither passed nor failed: the samples cannot tell (too few, or the bound within
    /// their confidence interval).
    #[serde(default)]
    pub undecided: bool,
    /// A percentile's or an error share's evidence: the samples it was read from, how
    /// many were past the bound, the fewest that could show it kept, and the
    /// percentile's 95 % interval by order statistics (ms; `None` for an end the samples
    /// cannot bound).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub evidence: Option<Evidence>,
}

/// See [`RuleAt::evidence`].
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub(crate) struct Evidence {
    pub samples: u64,
    pub beyond: u64,
    pub needed: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub interval_ms: Option<(Option<f64>, Option<f64>)>,
}

/// One step of a target's search: what was offered, what came back, and the verdict.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct Step {
    /// From 1, in the order this target ran them.
    pub step: u32,
    /// Sessions offered per second, all open classes together.
    pub rate: f64,
    /// The headline sum's successes per second over the measured time.
    pub achieved_ops_per_sec: f64,
    /// The headline sum's p99 as users felt it (from each operation's intended start).
    pub p99_ms: Option<f64>,
    /// The headline sum's failed share, percent.
    pub errors_pct: Option<f64>,
    /// Arrivals that could not start (every session slot busy, or due after the round),
    /// percent of those the schedule offered.
    pub dropped_pct: f64,
    /// How late the generator started operations against their schedule, p99.
    pub lag_p99_ms: f64,
    /// How long the step ran (s): the workload's duration, or a multiple of it for a
    /// step lengthened to gather samples.
    #[serde(default)]
    pub length_s: f64,
    /// The host was crowded during the step: who took the cores. The step is judged all
    /// the same; one that did not pass is run once more when the host is quiet.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub crowded: Option<String>,
    pub rules: Vec<RuleAt>,
    pub outcome: Outcome,
    /// Why it failed, or why it says nothing of the server; `None` when it passed.
    pub why: Option<String>,
    /// What the step cost the watched server, when one was watched.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub server: Option<StepCost>,
}

/// What a step cost the watched server processes, all of them together, per successful
/// operation of the headline sum: what a rate costs, beside whether it was kept.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub(crate) struct StepCost {
    /// CPU per successful operation, milliseconds.
    pub cpu_ms_per_op: f64,
    /// A JVM's collections per 1,000 successful operations, when one was watched.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gc_per_1000_ops: Option<f64>,
    /// Their time, milliseconds per 1,000 successful operations.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gc_ms_per_1000_ops: Option<f64>,
}

impl StepCost {
    /// From a step's report: `None` when no server was watched, or none could be read.
    fn of(rep: &Report) -> Option<StepCost> {
        let read: Vec<_> = rep
            .summary
            .server
            .iter()
            .filter(|p| p.problem.is_none())
            .collect();
        if read.is_empty() {
            return None;
        }
        let jvms: Vec<_> = read.iter().filter_map(|p| p.jvm.as_ref()).collect();
        let jvm_sum = |f: fn(&crate::report::model::JvmFigures) -> f64| {
            (!jvms.is_empty()).then(|| jvms.iter().map(|j| f(j)).sum())
        };
        Some(StepCost {
            cpu_ms_per_op: read.iter().map(|p| p.cpu_ms_per_op).sum(),
            gc_per_1000_ops: jvm_sum(|j| j.gc_per_1000_ops),
            gc_ms_per_1000_ops: jvm_sum(|j| j.gc_ms_per_1000_ops),
        })
    }

    /// The mean of several steps' costs (the repeats at one rate).
    pub(crate) fn mean(costs: &[&StepCost]) -> Option<StepCost> {
        let n = costs.len() as f64;
        let avg = |f: fn(&StepCost) -> Option<f64>| {
            let v: Vec<f64> = costs.iter().filter_map(|c| f(c)).collect();
            (v.len() == costs.len()).then(|| v.iter().sum::<f64>() / n)
        };
        (!costs.is_empty()).then(|| StepCost {
            cpu_ms_per_op: costs.iter().map(|c| c.cpu_ms_per_op).sum::<f64>() / n,
            gc_per_1000_ops: avg(|c| c.gc_per_1000_ops),
            gc_ms_per_1000_ops: avg(|c| c.gc_ms_per_1000_ops),
        })
    }

    /// `0.21 ms CPU/op · 1.40 GC/1,000 (2.1 ms)`.
    pub(crate) fn text(&self) -> String {
        let mut t = format!("{:.3} ms CPU/op", self.cpu_ms_per_op);
        if let (Some(n), Some(ms)) = (self.gc_per_1000_ops, self.gc_ms_per_1000_ops) {
            t.push_str(&format!(" · {n:.2} GC/1,000 ({ms:.1} ms)"));
        }
        t
    }
}

/// What a step offered: sessions a second, for how long.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Offer {
    pub rate: f64,
    pub length_s: f64,
}

/// Judge the one-round report of a step that made `offer`.
pub(crate) fn judge(slo: &Slo, step: u32, offer: Offer, rep: &Report) -> Step {
    let Offer { rate, length_s } = offer;
    let offered = rate * length_s;
    let headline = rep.summary.headline();
    let errors_pct = (headline.requests > 0)
        .then(|| headline.failures as f64 * 100.0 / headline.requests as f64);
    let p99_ms = figure(rep, headline_name(rep), ThresholdMetric::P99, true);
    let generator = rep.rounds.first().map(|r| &r.generator);
    let kept = Schedule::of(rep, offered);
    // The level kept by the server's own time (no wait for a session slot in it): when
    // only the felt latency missed, the workload's session cap held the arrivals.
    let served_within = slo
        .rules
        .iter()
        .all(|t| figure(rep, &t.op, t.metric, false).is_some_and(|v| t.cmp.holds(v, t.value)));
    let rules: Vec<RuleAt> = slo.rules.iter().map(|t| rule_at(rep, t)).collect();
    let crowded = generator.and_then(|g| crowding(g, &rep.summary.server, kept.late_start()));
    let (outcome, why) = verdict(&rules, &kept, served_within, offered, generator, &crowded);
    Step {
        step,
        rate,
        achieved_ops_per_sec: headline
            .across_rounds
            .as_ref()
            .map_or(headline.ops_per_sec, |a| a.ops_per_sec_mean),
        p99_ms,
        errors_pct,
        dropped_pct: kept.dropped_pct,
        lag_p99_ms: kept.lag_p99_ms,
        length_s,
        crowded,
        rules,
        outcome,
        why,
        server: StepCost::of(rep),
    }
}

impl Step {
    /// What the search needs of the step: its outcome, whether the host was crowded, and
    /// (when it had too few samples) the rule shortest of them.
    pub(crate) fn found(&self) -> Found {
        let short = self
            .rules
            .iter()
            .filter_map(|r| r.evidence.as_ref())
            .filter(|e| e.samples < e.needed)
            .min_by(|a, b| {
                let ratio = |e: &Evidence| e.samples as f64 / e.needed.max(1) as f64;
                ratio(a).total_cmp(&ratio(b))
            });
        Found {
            outcome: self.outcome,
            crowded: self.crowded.is_some(),
            samples: short.map_or(0, |e| e.samples),
            needed: short.map_or(1, |e| e.needed),
        }
    }
}

/// One rule read from a step's report: a percentile or an error share with its
/// uncertainty ([`super::evidence`]), any other figure as it stands.
fn rule_at(rep: &Report, t: &Threshold) -> RuleAt {
    let observed = figure(rep, &t.op, t.metric, true);
    let plain = observed.is_some_and(|v| t.cmp.holds(v, t.value));
    let Some(tail) = tail_of(t.metric, t.value) else {
        return RuleAt {
            rule: t.text.clone(),
            observed,
            passed: plain,
            undecided: observed.is_none(),
            evidence: None,
        };
    };
    let rows = rows_of(rep, &t.op);
    let (beyond, samples, interval_ms) = match t.metric {
        ThresholdMetric::Errors => (
            rows.iter().map(|o| o.failures).sum(),
            rows.iter().map(|o| o.requests).sum(),
            None,
        ),
        ThresholdMetric::TimedOutForClient => (
            crate::report::thresholds::timed_out_for_client(&rows),
            rows.iter().map(|o| o.requests).sum(),
            None,
        ),
        _ => {
            let h = latency_histogram(&rows, true);
            let bound_us = (t.value * 1000.0).max(0.0) as u64;
            let beyond = h
                .iter_recorded()
                .filter(|v| v.value_iterated_to() >= bound_us)
                .map(|v| v.count_at_value())
                .sum();
            let n = h.len();
            let at = |rank: Option<u64>| {
                rank.map(|k| h.value_at_quantile(k as f64 / n as f64) as f64 / 1000.0)
            };
            let (lo, hi) = quantile_ranks(1.0 - tail, n);
            (beyond, n, (n > 0).then(|| (at(lo), at(hi))))
        }
    };
    let needed = fewest(tail);
    let told = tell(beyond, samples, tail, t.cmp);
    RuleAt {
        rule: t.text.clone(),
        observed,
        passed: told == Told::Passed,
        undecided: told == Told::Undecided,
        evidence: Some(Evidence {
            samples,
            beyond,
            needed,
            interval_ms,
        }),
    }
}

/// Who crowded the host during a step, in words, when it was crowded: processes other
/// than loadmix and the watched server took over half the machine, or the generator
/// started late while the cores were contended (CPU pressure over half the step, a run
/// queue over twice the cores, or others busy), whoever took them (the watched server
/// named). A server that keeps the cores busy while the generator keeps its schedule
/// is the measurement, not a crowd.
fn crowding(
    g: &crate::report::model::Generator,
    watched: &[crate::report::model::ServerProcess],
    late: bool,
) -> Option<String> {
    let cores = g.cores.max(1) as f64;
    let own = g.cpu_mean / cores;
    let others = (g.host_busy_mean - own).max(0.0);
    let server: f64 = watched
        .iter()
        .filter(|p| p.problem.is_none())
        .map(|p| p.cores_used * 100.0 / cores)
        .sum();
    let pressure = g.pressure_mean.unwrap_or(0.0);
    let contended =
        others > CROWDED_PCT || pressure > CROWDED_PCT || g.run_queue_max as f64 > 2.0 * cores;
    let crowded = (others - server) > CROWDED_PCT || (late && contended);
    if !crowded || own > OWN_CPU_LIMIT * 100.0 {
        return None;
    }
    let who = match server > 0.0 {
        true => format!(
            "the watched server {server:.0}% and other processes {:.0}%",
            (others - server).max(0.0)
        ),
        false => format!("other processes {others:.0}%"),
    };
    Some(format!(
        "the host was crowded: {who} of its CPU, loadmix {own:.0}%, CPU pressure {pressure:.0}%, run queue up to {}; the generator and the server shared the machine",
        g.run_queue_max
    ))
}

/// What the generator's report says of a step's schedule.
struct Schedule {
    lag_p99_ms: f64,
    dropped: u64,
    dropped_pct: f64,
    behind: u64,
    behind_pct: f64,
    late: u64,
}

impl Schedule {
    /// The generator started arrivals late: more than [`BEHIND_ALWAYS_PCT`] over its
    /// limit, or a start lag p99 over [`LAG_P99_LIMIT_MS`].
    fn late_start(&self) -> bool {
        self.behind_pct > BEHIND_ALWAYS_PCT || self.lag_p99_ms > LAG_P99_LIMIT_MS
    }

    fn of(rep: &Report, offered: f64) -> Schedule {
        let g = rep.rounds.first().map(|r| &r.generator);
        let pct = |n: u64| {
            if offered > 0.0 {
                n as f64 * 100.0 / offered
            } else {
                0.0
            }
        };
        let (dropped, behind) = (g.map_or(0, |g| g.dropped), g.map_or(0, |g| g.behind));
        Schedule {
            lag_p99_ms: g.map_or(0.0, |g| g.lag_p99_ms),
            dropped,
            dropped_pct: pct(dropped),
            behind,
            behind_pct: pct(behind),
            late: g.map_or(0, |g| g.late),
        }
    }
}

/// A step's outcome and why: first whether the generator kept its schedule (a step it
/// did not keep, by its own CPU or for no reason seen, says nothing of the server; one
/// late because the host was crowded is judged and flagged), then the server's misses,
/// then whether its samples could tell.
fn verdict(
    rules: &[RuleAt],
    k: &Schedule,
    served_within: bool,
    offered: f64,
    generator: Option<&crate::report::model::Generator>,
    crowded: &Option<String>,
) -> (Outcome, Option<String>) {
    let missed_level = missed(rules);
    let behind_words = format!(
        "the generator itself started {} of about {offered:.0} arrivals ({:.1} %) over {} ms late",
        k.behind,
        k.behind_pct,
        crate::engine::BEHIND_LIMIT.as_millis()
    );
    let late = k.late_start();
    let own = generator.map_or(0.0, |g| g.cpu_mean / g.cores.max(1) as f64);
    if late && crowded.is_none() {
        let said = generator
            .and_then(|g| g.warnings.first().cloned())
            .unwrap_or_default();
        let whose = match own > OWN_CPU_LIMIT * 100.0 {
            true => format!("loadmix used {own:.0}% of the machine: its own CPU was the limit"),
            false => format!("neither loadmix ({own:.0}% of the machine) nor the host was busy"),
        };
        return (
            Outcome::Generator,
            Some(format!(
                "{behind_words}, start lag p99 {:.1} ms; {whose}. {said}",
                k.lag_p99_ms
            )),
        );
    }
    let judged = if missed_level.is_some()
        && served_within
        && k.late as f64 * 100.0 > offered * MAX_DROPPED_PCT
    {
        (
            Outcome::Workload,
            Some(format!(
                "{} of about {offered:.0} arrivals waited for a session slot, and the server's own time kept the level: the class's session cap (its max_concurrency, or its number of returning users), not the server, was the limit (raise it)",
                k.late
            )),
        )
    } else if k.dropped_pct > MAX_DROPPED_PCT {
        (
            Outcome::Failed,
            Some(format!(
                "{} of about {offered:.0} arrivals ({:.1} %) were dropped: every session slot was busy",
                k.dropped, k.dropped_pct
            )),
        )
    } else if let Some(m) = missed_level {
        (Outcome::Failed, Some(m))
    } else if rules.iter().all(|r| r.passed) {
        (Outcome::Passed, None)
    } else {
        undecided(rules)
    };
    match (judged, crowded) {
        ((o, why), Some(c)) if !matches!(o, Outcome::Generator | Outcome::Workload) => (
            o,
            Some(match why {
                Some(w) => format!("{w}; {c}"),
                None => c.clone(),
            }),
        ),
        (j, _) => j,
    }
}

/// Neither passed nor failed: too few samples for some rule, or enough and the bound
/// within the interval; the arithmetic in words.
fn undecided(rules: &[RuleAt]) -> (Outcome, Option<String>) {
    let mut too_few = false;
    let words: Vec<String> = rules
        .iter()
        .filter(|r| r.undecided)
        .map(|r| match &r.evidence {
            Some(e) if e.samples < e.needed => {
                too_few = true;
                format!(
                    "{}: too few samples ({}; with none past the bound it takes {} to show it kept at 95 % confidence)",
                    r.rule, e.samples, e.needed
                )
            }
            Some(e) => format!(
                "{}: {} of {} samples past the bound, within the 95 % interval{}",
                r.rule,
                e.beyond,
                e.samples,
                interval_text(e)
            ),
            None => {
                too_few = true;
                format!("{}: nothing to read it from", r.rule)
            }
        })
        .collect();
    let outcome = match too_few {
        true => Outcome::TooFew,
        false => Outcome::Undecided,
    };
    (outcome, Some(format!("undecided: {}", words.join("; "))))
}

/// ` (the percentile between 180.00 and 240.00 ms)`, or nothing without an interval.
fn interval_text(e: &Evidence) -> String {
    match e.interval_ms {
        Some((lo, hi)) => {
            let end = |v: Option<f64>| v.map_or("?".to_string(), |v| format!("{v:.2}"));
            format!(" (the percentile between {} and {} ms)", end(lo), end(hi))
        }
        None => String::new(),
    }
}

/// The headline sum's name in a report.
fn headline_name(rep: &Report) -> &str {
    let h = rep.summary.headline();
    crate::report::model::SUM_NAMES
        .iter()
        .copied()
        .find(|n| rep.summary.sum(n).is_some_and(|s| std::ptr::eq(s, h)))
        .unwrap_or("total")
}

/// The rules a step missed, in words.
fn missed(rules: &[RuleAt]) -> Option<String> {
    let words: Vec<String> = rules
        .iter()
        .filter(|r| !r.passed && !r.undecided)
        .map(|r| match r.observed {
            Some(v) => format!("{} (was {v:.2})", r.rule),
            None => format!("{} (nothing to read it from)", r.rule),
        })
        .collect();
    (!words.is_empty()).then(|| format!("missed {}", words.join(", ")))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn w(yaml: &str) -> Workload {
        crate::workload::load_str("t.yaml", yaml, &[], None).unwrap()
    }

    const HTTP: &str = "users:\n  - class: web\n    protocol: http\n    arrival: { rate: 10/s }\n    mix: { get: { weight: 1, path: /x } }\n";

    #[test]
    fn rules_name_the_headline_unless_they_name_an_operation() {
        let s = parse(" p99 < 200ms, errors < 1% ,web.get p50 <= 1s", &w(HTTP)).unwrap();
        let got: Vec<(&str, f64)> = s.rules.iter().map(|t| (t.op.as_str(), t.value)).collect();
        assert_eq!(got, [("total", 200.0), ("total", 1.0), ("web.get", 1000.0)]);
        assert_eq!(s.text, "p99 < 200ms, errors < 1%, web.get p50 <= 1s");
        assert_eq!(s.rules[2].text, "web.get p50 <= 1s");
    }

    #[test]
    fn a_bad_service_level_says_what_is_wrong() {
        for (bad, says) in [
            ("", "give a service level"),
            ("p99 200ms", "needs a comparison"),
            ("p98 < 1s", "no metric 'p98'"),
            (
                "web.put p99 < 1s",
                "no operation, class or sum named 'web.put'",
            ),
            ("errors < 1", "not a percentage"),
            ("p99 < soon", "--capacity"),
            ("a b p99 < 1s", "OPERATION METRIC"),
        ] {
            let e = parse(bad, &w(HTTP)).unwrap_err();
            assert!(e.contains(says), "{bad}: {e}");
        }
        let long = vec!["p99 < 1s"; 21].join(",");
        assert!(parse(&long, &w(HTTP)).unwrap_err().contains("at most 20"));
    }

    /// Arrivals that waited for a session slot while the server's own time kept the
    /// level are the workload's limit, never the generator's (its schedule was kept) nor
    /// the server's; a crowded host does not change whose it was.
    #[test]
    fn a_session_cap_that_held_the_arrivals_is_the_workloads_limit() {
        let p99 = RuleAt {
            rule: "p99 < 200ms".into(),
            observed: Some(900.0),
            passed: false,
            undecided: false,
            evidence: None,
        };
        let kept = Schedule {
            lag_p99_ms: 0.2,
            dropped: 0,
            dropped_pct: 0.0,
            behind: 0,
            behind_pct: 0.0,
            late: 300,
        };
        let crowded = Some("other processes 70%".to_string());
        for c in [None, crowded] {
            let (o, why) = verdict(std::slice::from_ref(&p99), &kept, true, 1_000.0, None, &c);
            assert_eq!(o, Outcome::Workload, "{why:?}");
            assert!(why.unwrap().contains("session cap"));
        }
        // The server's own time missed too: the server's.
        let (o, _) = verdict(&[p99], &kept, false, 1_000.0, None, &None);
        assert_eq!(o, Outcome::Failed);
    }

    /// A watched server that keeps the cores busy while the generator keeps its schedule
    /// is what is measured; the same with the generator late, or other processes busy,
    /// is a crowded host, and says who took the cores.
    #[test]
    fn a_busy_server_is_no_crowd_unless_the_generator_was_late_or_others_took_the_cores() {
        let g = crate::report::model::Generator {
            cores: 2,
            cpu_mean: 10.0,
            host_busy_mean: 95.0,
            pressure_mean: Some(80.0),
            run_queue_max: 30,
            ..Default::default()
        };
        let server = [crate::report::model::ServerProcess {
            cores_used: 1.7,
            ..Default::default()
        }];
        assert_eq!(crowding(&g, &server, false), None);
        let late = crowding(&g, &server, true).expect("crowded");
        assert!(late.contains("the watched server 85%"), "{late}");
        // Unwatched, the same server is other processes: a crowd either way.
        let unwatched = crowding(&g, &[], false).expect("crowded");
        assert!(unwatched.contains("other processes 90%"), "{unwatched}");
    }
}
