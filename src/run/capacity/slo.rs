//! A service level (`--capacity "p99 < 200ms, errors < 1%"`): its rules, read against the
//! workload's names, and one step judged against them and against the generator's own
//! schedule (a step the generator could not keep says nothing of the server).

use serde::{Deserialize, Serialize};

use super::search::Outcome;
use crate::report::Report;
use crate::report::model::LAG_P99_LIMIT_MS;
use crate::report::thresholds::figure;
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
    /// `None`: nothing to read it from (no success to time), which fails the rule.
    pub observed: Option<f64>,
    pub passed: bool,
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

/// Judge the one-round report of a step at `rate`, which offered `offered` arrivals.
pub(crate) fn judge(slo: &Slo, step: u32, rate: f64, offered: f64, rep: &Report) -> Step {
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
    let rules: Vec<RuleAt> = slo
        .rules
        .iter()
        .map(|t| {
            let observed = figure(rep, &t.op, t.metric, true);
            RuleAt {
                rule: t.text.clone(),
                observed,
                passed: observed.is_some_and(|v| t.cmp.holds(v, t.value)),
            }
        })
        .collect();
    let (outcome, why) = verdict(&rules, &kept, served_within, offered, generator);
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
        rules,
        outcome,
        why,
        server: StepCost::of(rep),
    }
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
/// did not keep says nothing of the server, unless the step passed all the same and
/// little was late), then the server's misses.
fn verdict(
    rules: &[RuleAt],
    k: &Schedule,
    served_within: bool,
    offered: f64,
    generator: Option<&crate::report::model::Generator>,
) -> (Outcome, Option<String>) {
    let missed_level = missed(rules);
    let fails = missed_level.is_some() || k.dropped_pct > MAX_DROPPED_PCT;
    let behind_words = format!(
        "the generator itself started {} of about {offered:.0} arrivals ({:.1} %) over {} ms late",
        k.behind,
        k.behind_pct,
        crate::engine::BEHIND_LIMIT.as_millis()
    );
    if k.behind_pct > BEHIND_ALWAYS_PCT {
        (Outcome::Generator, Some(behind_words))
    } else if k.lag_p99_ms > LAG_P99_LIMIT_MS {
        let said = generator
            .and_then(|g| g.warnings.first().cloned())
            .unwrap_or_default();
        (
            Outcome::Generator,
            Some(format!(
                "the generator started operations {:.1} ms late (p99, over {LAG_P99_LIMIT_MS} ms): {said}",
                k.lag_p99_ms
            )),
        )
    } else if fails && k.behind_pct > MAX_DROPPED_PCT {
        // Its lateness is in the felt latency: whose the miss was cannot be told. A step
        // that passed all the same stands (the lateness only made it harder).
        (
            Outcome::Generator,
            Some(format!("{behind_words}, and the step missed the level")),
        )
    } else if missed_level.is_some()
        && served_within
        && k.late as f64 * 100.0 > offered * MAX_DROPPED_PCT
    {
        (
            Outcome::Generator,
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
    } else {
        (Outcome::Passed, None)
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
        .filter(|r| !r.passed)
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
}
