//! What a saved report must be to be read again (`report`, `compare`, `merge`): figures
//! a run could have written. A file that contradicts itself (a two-second round with a
//! million seconds in its timeline, a negative rate, counts that do not add up) is
//! refused with what does not add up, before anything is drawn or compared from it.

use super::model::{self, Report};

/// Shards whose rounds started further apart than this are not one run.
pub(super) const MAX_SKEW_S: i64 = 24 * 3600;

/// The longest round a report may describe: a month.
const MAX_ROUND_S: f64 = 31.0 * 86_400.0;

/// A report whose figures cannot all be true is refused: times that are negative, not
/// finite or longer than a month, more seconds in a timeline than the round lasted,
/// counts that do not add up.
pub(crate) fn consistent(report: &Report) -> Result<(), String> {
    rates(report)?;
    for r in &report.rounds {
        for (what, t) in [("elapsed_s", r.elapsed_s), ("measured_s", r.measured_s)] {
            if !(0.0..=MAX_ROUND_S).contains(&t) {
                return Err(format!(
                    "round {}: {what} {t:e} is not a round's length",
                    r.index
                ));
            }
        }
        // One entry per second of the round (and the one it ended in); a merged round's
        // shards began up to a day apart, and its timeline lies on one wall clock.
        let skew = match report.shards.is_empty() {
            true => 0,
            false => MAX_SKEW_S as usize,
        };
        let seconds = r.elapsed_s.ceil() as usize + 2 + skew;
        if r.per_second.len() > seconds {
            return Err(format!(
                "round {}: {} per-second entries in a round of {} s",
                r.index,
                r.per_second.len(),
                r.elapsed_s
            ));
        }
        if let Some(s) = r
            .per_second
            .iter()
            .find(|s| s.latency_heat.len() > crate::metrics::HEAT_BUCKETS)
        {
            return Err(format!(
                "round {}: a second with {} latency bands, of {} a run keeps",
                r.index,
                s.latency_heat.len(),
                crate::metrics::HEAT_BUCKETS
            ));
        }
        let sums = [Some(&r.total), r.sent.as_ref(), r.received.as_ref()];
        for o in r.ops.iter().chain(sums.into_iter().flatten()) {
            if o.successes.checked_add(o.failures) != Some(o.requests) {
                return Err(format!(
                    "round {} {}: {} successes and {} failures are not its {} requests",
                    r.index, o.op, o.successes, o.failures, o.requests
                ));
            }
            if o.timeline.len() > seconds {
                return Err(format!(
                    "round {} {}: a timeline longer than the round",
                    r.index, o.op
                ));
            }
        }
        for c in &r.sessions {
            for b in &c.behaviours {
                let ended = [b.exited, b.max_ops, b.dead_ends]
                    .iter()
                    .try_fold(0u64, |a, x| a.checked_add(*x));
                let counted = |s: &model::sessions::Spread| {
                    s.counts
                        .iter()
                        .try_fold(0u64, |a, (_, n)| a.checked_add(*n))
                };
                if ended.and_then(|e| e.checked_add(b.cut)) != Some(b.started)
                    || counted(&b.ops_per_session) != ended
                    || counted(&b.duration_s) != ended
                {
                    return Err(format!(
                        "round {} {}.{}: {} sessions started do not add up to how they ended",
                        r.index, c.class, b.behaviour, b.started
                    ));
                }
            }
        }
    }
    Ok(())
}

/// Rates and shares that no run gives: negative or not finite.
fn rates(r: &Report) -> Result<(), String> {
    let ok = |x: f64| x.is_finite() && x >= 0.0;
    let ops = r
        .summary
        .ops
        .iter()
        .chain(r.rounds.iter().flat_map(|round| round.ops.iter()));
    for o in ops {
        if !ok(o.ops_per_sec) {
            return Err(format!(
                "{}: ops_per_sec {} is no rate",
                o.op, o.ops_per_sec
            ));
        }
    }
    let behaviours = r
        .rounds
        .iter()
        .flat_map(|round| &round.sessions)
        .flat_map(|c| c.behaviours.iter().map(move |b| (c, b)));
    for (c, b) in behaviours {
        if !(ok(b.weight_share) && b.weight_share <= 1.0) {
            return Err(format!(
                "{}.{}: weight_share {} is no share",
                c.class, b.behaviour, b.weight_share
            ));
        }
        let Some(class) = r.workload.classes.iter().find(|k| k.name == c.class) else {
            return Err(format!(
                "sessions of {}, a class the workload has not",
                c.class
            ));
        };
        // A state is one of the class's operations, or the start of a behaviour.
        let stray = c.renormalised.keys().find(|state| {
            state.as_str() != "start" && !class.ops.iter().any(|o| &o.name == *state)
        });
        if let Some(state) = stray {
            return Err(format!(
                "{}: draws renormalised at {state:?}, a state its behaviours have not",
                c.class
            ));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    /// The example report with `change` made to its JSON, read back as `report` and
    /// `compare` read it.
    fn loaded(change: impl Fn(&mut serde_json::Value)) -> Result<(), String> {
        let path =
            std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("reports/example/run.json");
        let mut v: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
        change(&mut v);
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("run.json");
        std::fs::write(&p, v.to_string()).unwrap();
        crate::report::load(&p)
            .map(|_| ())
            .map_err(|e| e.to_string())
    }

    #[test]
    fn a_report_that_contradicts_itself_is_refused_when_read() {
        assert_eq!(loaded(|_| {}), Ok(()));
        let e = loaded(|v| {
            let one = v["rounds"][0]["per_second"][0].clone();
            v["rounds"][0]["per_second"] = serde_json::Value::Array(vec![one; 100_000]);
        })
        .unwrap_err();
        assert!(e.contains("per-second entries in a round of"), "{e}");
        let e = loaded(|v| v["summary"]["ops"][0]["ops_per_sec"] = serde_json::json!(-5.0))
            .unwrap_err();
        assert!(e.contains("ops_per_sec -5 is no rate"), "{e}");
        let e =
            loaded(|v| v["rounds"][0]["total"]["successes"] = serde_json::json!(0)).unwrap_err();
        assert!(e.contains("are not its"), "{e}");
    }

    /// What one second of a report may hold is what a run keeps: its error classes and
    /// its latency bands, so a second costs memory in proportion to its text.
    #[test]
    fn a_second_holds_only_what_a_run_keeps() {
        let e = loaded(|v| {
            v["rounds"][0]["per_second"][0]["errors"] = serde_json::json!({"k0": 1, "k1": 2});
        })
        .unwrap_err();
        assert!(e.contains("unknown variant `k0`"), "{e}");
        assert_eq!(
            loaded(|v| v["rounds"][0]["per_second"][0]["errors"] = serde_json::json!({"body": 1})),
            Ok(())
        );
        let e = loaded(|v| {
            v["rounds"][0]["per_second"][0]["latency_heat"] = serde_json::json!(vec![1; 1000]);
        })
        .unwrap_err();
        assert!(e.contains("a second with 1000 latency bands, of 22"), "{e}");
    }
}
