//! Whether reports are the shards of one run: one workload, seed and shard count,
//! every shard once, each one a shard, made by the same build; refused, naming which,
//! before anything is written.

use std::collections::BTreeMap;

use super::{MergeError, ShardReport};
use crate::report::model::{self, Report, ShardInfo};
use crate::workload::Workload;

/// Check that `shards` are every shard of one run, once each; sorted by index.
pub(super) fn check(mut shards: Vec<ShardReport>) -> Result<Vec<ShardReport>, MergeError> {
    let first = shards.first().ok_or(MergeError::Nothing)?;
    let info = |s: &ShardReport| -> Result<ShardInfo, MergeError> {
        s.report
            .shard
            .ok_or_else(|| MergeError::NotAShard(s.file.clone()))
    };
    let count = info(first)?.count;
    let (file0, r0) = (&first.file, &first.report);
    for s in &shards {
        let i = info(s)?;
        let r = &s.report;
        consistent(s)?;
        let differ = |what: &str, a: String, b: String| {
            MergeError::Mismatch(format!(
                "{} and {} are not shards of one run: {what} {a} and {b}",
                file0, s.file
            ))
        };
        if i.count != count {
            return Err(differ(
                "shard counts",
                count.to_string(),
                i.count.to_string(),
            ));
        }
        if r.workload.hash != r0.workload.hash {
            return Err(differ(
                "workloads",
                format!("{} ({})", r0.workload.name, short(&r0.workload.hash)),
                format!("{} ({})", r.workload.name, short(&r.workload.hash)),
            ));
        }
        if !same_workload(&r.workload, &r0.workload) {
            return Err(differ(
                "workloads",
                format!("{} as {} ran it", r0.workload.name, file0),
                format!("{} as this one says", r.workload.name),
            ));
        }
        if r.seed != r0.seed {
            return Err(differ("seeds", r0.seed.to_string(), r.seed.to_string()));
        }
        if r.rounds.len() != r0.rounds.len() {
            return Err(differ(
                "round counts",
                r0.rounds.len().to_string(),
                r.rounds.len().to_string(),
            ));
        }
        if table_ops(r) != table_ops(r0) {
            return Err(differ(
                "operations",
                table_ops(r0).join(","),
                table_ops(r).join(","),
            ));
        }
        if behaviours(r) != behaviours(r0) {
            return Err(differ(
                "behaviours",
                behaviours(r0).join(","),
                behaviours(r).join(","),
            ));
        }
        if let Some(stray) = r.summary.ops.iter().find(|o| !of_a_class(r, &o.op)) {
            return Err(differ(
                "operations",
                table_ops(r0).join(","),
                stray.op.clone(),
            ));
        }
    }
    let mut seen: BTreeMap<u32, String> = BTreeMap::new();
    for s in &shards {
        let i = info(s)?.index;
        if let Some(f) = seen.get(&i) {
            return Err(MergeError::Duplicate {
                index: i,
                first: f.clone(),
                second: s.file.clone(),
            });
        }
        seen.insert(i, s.file.clone());
    }
    if let Some(index) = (0..count).find(|i| !seen.contains_key(i)) {
        return Err(MergeError::Missing { index, count });
    }
    shards.sort_by_key(|s| s.report.shard.map_or(0, |i| i.index));
    Ok(shards)
}

/// Whether two shards say they ran one workload: its text, overrides, settings and
/// classes all alike (the file's path may differ from machine to machine).
pub(super) fn same_workload(a: &model::WorkloadInfo, b: &model::WorkloadInfo) -> bool {
    model::WorkloadInfo {
        file: String::new(),
        ..a.clone()
    } == model::WorkloadInfo {
        file: String::new(),
        ..b.clone()
    }
}

/// Check the shards against the workload they say they ran, read again from the text
/// they carry: its mix's hash, its classes, and every destination a shard's message
/// ledger names, which one of its broker classes must be able to make in that shard's
/// run (a topic subscriber's row is its topic's name and `#` the subscriber).
pub(super) fn made_by(shards: &[ShardReport], w: &Workload) -> Result<(), MergeError> {
    let names: Vec<&str> = w.classes.iter().map(|c| c.name.as_str()).collect();
    let templates: Vec<_> = w
        .classes
        .iter()
        .flat_map(|c| c.kind.destinations())
        .collect();
    for s in shards {
        let r = &s.report;
        let listed: Vec<&str> = r.workload.classes.iter().map(|c| c.name.as_str()).collect();
        if r.workload.hash != w.hash || listed != names {
            return Err(MergeError::Mismatch(format!(
                "{}: its workload's mix is not the one its text gives (hash {}, classes {})",
                s.file,
                short(&r.workload.hash),
                listed.join(",")
            )));
        }
        let ledger = r.ledger.iter().flat_map(|l| &l.destinations);
        for d in ledger {
            let name = d.name.split_once('#').map_or(d.name.as_str(), |(t, _)| t);
            let made = templates.iter().any(|t| {
                names
                    .iter()
                    .any(|class| t.could_make(name, &r.run_id, class))
            });
            if !made {
                return Err(MergeError::Mismatch(format!(
                    "{}: its message ledger names {:?}, a destination its workload does not \
                     send to or take from in run {:?}",
                    s.file,
                    d.name.chars().take(120).collect::<String>(),
                    r.run_id.chars().take(120).collect::<String>()
                )));
            }
        }
    }
    Ok(())
}

/// The operations of the workload's tables a report lists, in its order. A report lists
/// these always, and a refinement label (`consumer.receive_empty`) only when it occurred:
/// shards of one run agree on the first and may differ in the second.
pub(super) fn table_ops(r: &Report) -> Vec<String> {
    let table: Vec<String> = r
        .workload
        .classes
        .iter()
        .flat_map(|c| c.ops.iter().map(move |o| format!("{}.{}", c.name, o.name)))
        .collect();
    r.summary
        .ops
        .iter()
        .filter(|o| table.contains(&o.op))
        .map(|o| o.op.clone())
        .collect()
}

/// Every `class.behaviour` the report's rounds hold sessions of: the workload's, the same
/// in every shard of a run.
pub(super) fn behaviours(r: &Report) -> Vec<String> {
    let mut out: Vec<String> = r
        .rounds
        .iter()
        .flat_map(|round| &round.sessions)
        .flat_map(|c| {
            c.behaviours
                .iter()
                .map(move |b| format!("{}.{}", c.class, b.behaviour))
        })
        .collect();
    out.sort();
    out.dedup();
    out
}

/// Whether `op` is `class.label` for one of the workload's classes.
pub(super) fn of_a_class(r: &Report, op: &str) -> bool {
    r.workload.classes.iter().any(|c| {
        op.strip_prefix(c.name.as_str())
            .and_then(|rest| rest.strip_prefix('.'))
            .is_some_and(|label| !label.is_empty())
    })
}

/// A shard whose figures cannot all be true is refused (see [`super::check`]).
pub(super) fn consistent(s: &ShardReport) -> Result<(), MergeError> {
    crate::report::check::consistent(&s.report)
        .map_err(|what| MergeError::Corrupt(format!("{}: {what}", s.file)))
}

pub(super) fn short(hash: &str) -> &str {
    &hash[..hash.len().min(12)]
}
