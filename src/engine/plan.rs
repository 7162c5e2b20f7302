//! `loadmix plan`: the exact operations (and think times) a VU will pick, and which users
//! and arrivals a shard runs, without I/O. The run draws from the same streams with the
//! same functions, so the two cannot drift apart.

use std::time::Duration;

use super::open::Schedule;
use super::seed::{VuRngs, next_op, next_think};
use super::shard::Shard;
use crate::workload::{Stop, UserClass, Workload};

#[derive(Debug, Clone, PartialEq)]
pub struct PlannedOp {
    pub seq: u64,
    /// Index into the class's operation table.
    pub op: usize,
    pub name: String,
    /// Think time before the operation.
    pub think: Duration,
}

/// The operations VU `vu` of `class` picks in `round` (1-based), one at a time: as many
/// as the caller takes, in constant memory.
pub fn picks<'c>(
    seed: u64,
    class: &'c UserClass,
    vu: u32,
    round: u32,
) -> impl Iterator<Item = PlannedOp> + 'c {
    let mut rngs = VuRngs::new(seed, &class.name, vu, round);
    (0u64..).map(move |seq| {
        let think = next_think(class, &mut rngs.think);
        let op = next_op(class, &mut rngs.mix);
        PlannedOp {
            seq,
            op,
            name: class.ops[op].name.clone(),
            think,
        }
    })
}

/// The first `n` operations VU `vu` of `class` picks in `round` (1-based).
pub fn sequence(seed: u64, class: &UserClass, vu: u32, round: u32, n: u64) -> Vec<PlannedOp> {
    picks(seed, class, vu, round)
        .take(usize::try_from(n).unwrap_or(usize::MAX))
        .collect()
}

/// One unit of work of a round, as a shard's part lists it: a closed user, or an arrival
/// of an open class (its place in the schedule and when it is due).
#[derive(Debug, Clone, PartialEq)]
pub enum Part {
    User { class: String, vu: u32 },
    Arrival { class: String, k: u64, at: Duration },
}

/// How long an open class's schedule runs in a round: the duration, or the hour an
/// iterations-bound run allows it (as the engine does).
fn schedule_limit(w: &Workload) -> Duration {
    match w.run.stop {
        Stop::Duration(d) => d,
        Stop::Iterations(_) => Duration::from_secs(3600),
    }
}

/// What `shard` runs of `round`: every closed user it owns, then every arrival it owns,
/// class by class, lazily (an open class may have millions of arrivals).
pub fn shard_part(w: &Workload, shard: Shard, round: u32) -> impl Iterator<Item = Part> + '_ {
    let users = w
        .classes
        .iter()
        .filter(|c| c.arrival.is_none())
        .flat_map(move |c| {
            (0..Workload::peak_users(c))
                .filter(move |vu| shard.owns_user(*vu))
                .map(move |vu| Part::User {
                    class: c.name.clone(),
                    vu,
                })
        });
    let limit = schedule_limit(w);
    let arrivals = w.classes.iter().enumerate().flat_map(move |(ci, c)| {
        c.arrival.iter().flat_map(move |a| {
            Schedule::new(w.run.seed, ci, c, a, round, limit)
                .enumerate()
                .filter(move |(k, _)| shard.owns_arrival(*k as u64))
                .map(move |(k, at)| Part::Arrival {
                    class: c.name.clone(),
                    k: k as u64,
                    at,
                })
        })
    });
    users.chain(arrivals)
}
