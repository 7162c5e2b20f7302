//! Where every random choice of a VU comes from. Each VU has four independent streams,
//! derived from (seed, class name, VU index, round): one picks operations, one picks the
//! think time before each pick, one the think time before each bootstrap (the collection a
//! user makes outside its table), one feeds the protocol (payloads, uids). Keeping the
//! operation and think streams apart from everything a server's answers can change is what
//! makes `loadmix plan` exact: pick k and the think before it depend only on these four
//! values, however many bootstraps come between picks.
//!
//! The derivation uses class *names*, not positions, so adding a class to a workload leaves
//! the other classes' sequences unchanged; and it is the same whether the VU runs in one
//! process or in a shard of a split run.

use std::time::Duration;

use rand::SeedableRng;
use rand::rngs::Xoshiro256PlusPlus;

use crate::workload::UserClass;
use crate::workload::chain::{Guard, Session, Step};

pub(crate) struct VuRngs {
    pub mix: Xoshiro256PlusPlus,
    pub think: Xoshiro256PlusPlus,
    pub boot_think: Xoshiro256PlusPlus,
    pub data: Xoshiro256PlusPlus,
}

impl VuRngs {
    pub(crate) fn new(seed: u64, class: &str, vu: u32, round: u32) -> VuRngs {
        let base = base(seed, class, vu, round);
        VuRngs {
            mix: Xoshiro256PlusPlus::seed_from_u64(mix64(base ^ 1)),
            think: Xoshiro256PlusPlus::seed_from_u64(mix64(base ^ 2)),
            data: Xoshiro256PlusPlus::seed_from_u64(mix64(base ^ 3)),
            boot_think: Xoshiro256PlusPlus::seed_from_u64(mix64(base ^ 4)),
        }
    }
}

/// What every stream of one VU in one round is derived from.
fn base(seed: u64, class: &str, vu: u32, round: u32) -> u64 {
    mix64(mix64(mix64(seed ^ fnv1a(class.as_bytes())) ^ vu as u64) ^ ((round as u64) << 32))
}

/// The next step of a VU of `class` in its `session`: the transition from the picks'
/// stream, the think before it from the think stream; `allowed` says which guards hold.
pub(crate) fn next_step(
    class: &UserClass,
    session: &mut Session,
    rngs: &mut VuRngs,
    allowed: &dyn Fn(&Guard) -> bool,
) -> Step {
    class
        .chain
        .next(session, &mut rngs.mix, &mut rngs.think, allowed)
}

impl VuRngs {
    /// The data of a user's set-up (what it makes before its first pick), from a stream
    /// of its own: the picks' data does not change with what set-up made.
    pub(crate) fn setup_data(seed: u64, class: &str, vu: u32, round: u32) -> Xoshiro256PlusPlus {
        Xoshiro256PlusPlus::seed_from_u64(mix64(base(seed, class, vu, round) ^ 5))
    }

    /// The think time before a bootstrap, from the bootstraps' own stream, so that
    /// bootstraps shift no pick's think time.
    pub(crate) fn think_before_bootstrap(&mut self, class: &UserClass) -> Duration {
        next_think(class, &mut self.boot_think)
    }
}

/// The next think time of a VU of `class`.
pub(crate) fn next_think(class: &UserClass, think: &mut Xoshiro256PlusPlus) -> Duration {
    let us = class.think.sample(think);
    Duration::from_nanos((us * 1e3) as u64)
}

/// A per-class seed for data shared by all its VUs (random payloads).
pub(crate) fn class_seed(seed: u64, class: &str) -> u64 {
    mix64(seed ^ fnv1a(class.as_bytes()) ^ 0x5eed)
}

/// SplitMix64's finaliser: a cheap, well-mixed, portable hash of a u64.
fn mix64(mut z: u64) -> u64 {
    z = z.wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

fn fnv1a(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325u64, |h, b| {
        (h ^ *b as u64).wrapping_mul(0x0100_0000_01b3)
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::Rng;

    #[test]
    fn streams_differ_and_repeat() {
        let mut a = VuRngs::new(7, "morse", 0, 1);
        let mut b = VuRngs::new(7, "morse", 0, 1);
        assert_eq!(a.mix.next_u64(), b.mix.next_u64());
        let mut c = VuRngs::new(7, "morse", 1, 1);
        let mut d = VuRngs::new(7, "morse", 0, 2);
        let mut e = VuRngs::new(7, "atom", 0, 1);
        let x = VuRngs::new(7, "morse", 0, 1).mix.next_u64();
        assert_ne!(x, c.mix.next_u64());
        assert_ne!(x, d.mix.next_u64());
        assert_ne!(x, e.mix.next_u64());
        assert_ne!(a.think.next_u64(), a.data.next_u64());
    }
}
