//! `loadmix plan`: the exact operations (and think times) a VU will pick, without I/O. The
//! run draws from the same streams with the same functions, so the two cannot drift apart.

use std::time::Duration;

use super::seed::{VuRngs, next_op, next_think};
use crate::workload::UserClass;

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
