//! `loadmix plan`: the exact operations (and think times) a VU will pick, and which users
//! and arrivals a shard runs, without I/O. The run draws from the same streams with the
//! same functions, so the two cannot drift apart.

use std::time::Duration;

use super::open::Schedule;
use super::seed::{VuRngs, next_step};
use super::shard::Shard;
use crate::workload::chain::{Session, Step};
use crate::workload::protocols::Holdings;
use crate::workload::{Stop, UserClass, Workload};

/// One pick a user will make, as `loadmix plan` lists it.
#[derive(Debug, Clone, PartialEq)]
pub struct PlannedOp {
    /// The pick's number among the user's picks, from 0.
    pub seq: u64,
    /// The user's session it is part of (from 0), and that session's behaviour.
    pub session: u64,
    /// Index of that behaviour in the class.
    pub behaviour: usize,
    /// Index into the class's operation table.
    pub op: usize,
    /// The operation's name.
    pub name: String,
    /// Think time before the operation.
    pub think: Duration,
}

/// The operations VU `vu` of `class` picks in `round` (1-based), one at a time: as many
/// as the caller takes, in constant memory. Sessions follow one another as a closed
/// user's do (an open arrival runs the first); a guard is taken to hold, since what a
/// user holds depends on the server's answers.
pub fn picks<'c>(
    seed: u64,
    class: &'c UserClass,
    vu: u32,
    round: u32,
) -> impl Iterator<Item = PlannedOp> + 'c {
    let mut rngs = VuRngs::new(seed, &class.name, vu, round);
    let mut s = Session::default();
    let mut behaviour = 0;
    let mut seq = 0u64;
    std::iter::from_fn(move || {
        // As the engine's walk: after an end, the next session's first operation; two
        // ends in a row stop the user.
        for _ in 0..2 {
            match next_step(class, &mut s, &mut rngs, &|_| true) {
                Step::Op {
                    op,
                    think_us,
                    began,
                    ..
                } => {
                    behaviour = began.unwrap_or(behaviour);
                    let p = PlannedOp {
                        seq,
                        session: s.ended,
                        behaviour,
                        op,
                        name: class.ops[op].name.clone(),
                        think: Duration::from_nanos((think_us * 1e3) as u64),
                    };
                    seq += 1;
                    return Some(p);
                }
                Step::End { .. } => {}
            }
        }
        None
    })
}

/// The first `n` operations VU `vu` of `class` picks in `round` (1-based).
pub fn sequence(seed: u64, class: &UserClass, vu: u32, round: u32, n: u64) -> Vec<PlannedOp> {
    picks(seed, class, vu, round)
        .take(usize::try_from(n).unwrap_or(usize::MAX))
        .collect()
}

/// When arrival `k` (from 0) of an open class is due in `round`, from the round's start;
/// `None` when the round's schedule has no such arrival (or the class is closed).
pub fn arrival_at(w: &Workload, class: &UserClass, k: u64, round: u32) -> Option<Duration> {
    let ci = w.classes.iter().position(|c| c.name == class.name)?;
    let a = class.arrival.as_ref()?;
    Schedule::new(w.run.seed, ci, class, a, round, schedule_limit(w)).nth(usize::try_from(k).ok()?)
}

/// How many operations one session of open class `class` runs: a table's `iterations`
/// (1 by default), or `None` for behaviours, whose session runs until it exits (or
/// reaches `session.max_ops`).
pub fn session_ops(class: &UserClass) -> Option<u64> {
    class.chain.from_mix.then(|| class.iterations.unwrap_or(1))
}

/// The picks of the session of open arrival `k` in `round`: its first session only, as
/// many as [`session_ops`] gives, as the run makes them. Its first pick is due on
/// arrival, whatever think the stream drew for it.
pub fn arrival_picks<'c>(
    w: &Workload,
    class: &'c UserClass,
    k: u32,
    round: u32,
) -> impl Iterator<Item = PlannedOp> + 'c {
    let n = session_ops(class).map_or(usize::MAX, |n| usize::try_from(n).unwrap_or(usize::MAX));
    picks(w.run.seed, class, k, round)
        .take_while(|p| p.session == 0)
        .take(n)
        .map(|p| match p.seq {
            0 => PlannedOp {
                think: Duration::ZERO,
                ..p
            },
            _ => p,
        })
}

/// One unit of work of a round, as a shard's part lists it: a closed user, or an arrival
/// of an open class (its place in the schedule and when it is due).
#[derive(Debug, Clone, PartialEq)]
pub enum Part {
    /// A closed user.
    User {
        /// Its class.
        class: String,
        /// Its index in the class.
        vu: u32,
    },
    /// An arrival of an open class.
    Arrival {
        /// Its class.
        class: String,
        /// Its place in the class's schedule, from 0.
        k: u64,
        /// When it is due, from the round's start.
        at: Duration,
    },
}

/// How long an open class's schedule runs in a round: the duration, or the hour an
/// iterations-bound run allows it (as the engine does).
fn schedule_limit(w: &Workload) -> Duration {
    match w.run.stop {
        Stop::Duration(d) => d,
        Stop::Iterations(_) => Duration::from_secs(3600),
    }
}

/// What `shard` runs of `round`: every standing user it owns (closed users, an open
/// class's returning users), then every arrival it owns,
/// class by class, lazily (an open class may have millions of arrivals).
pub fn shard_part(w: &Workload, shard: Shard, round: u32) -> impl Iterator<Item = Part> + '_ {
    let users = w.classes.iter().flat_map(move |c| {
        (0..Workload::standing_users(c))
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

/// What a sampled plan of a class's picks comes to when each pick is walked through what
/// the user holds: how many would find nothing to act on and send nothing.
#[derive(Debug, Clone, PartialEq)]
pub struct SkipEstimate {
    /// Users (or open-model sessions) sampled.
    pub users: u32,
    /// They are an open class's sessions.
    pub open: bool,
    /// Picks followed per user and round (at most; an open session of behaviours
    /// follows its picks to its exit).
    pub per_round: u64,
    /// Each open session was followed to its exit, not to a count of picks.
    pub to_exit: bool,
    /// Rounds followed (all of them when users keep their state, up to 10).
    pub rounds: u32,
    /// Picks followed in all.
    pub picks: u64,
    /// Those that would find nothing to act on.
    pub skipped: u64,
    /// Skipped picks by operation, most first.
    pub by_op: Vec<(String, u64)>,
}

impl SkipEstimate {
    /// The share of picks skipped, from 0 to 1.
    pub fn share(&self) -> f64 {
        match self.picks {
            0 => 0.0,
            n => self.skipped as f64 / n as f64,
        }
    }
}

/// Most users (or arrivals) of a class a sampled plan follows.
const SAMPLED_USERS: u32 = 50;

/// Most picks per user and round a sampled plan follows.
const SAMPLED_PICKS: u64 = 1_000;

/// Picks per user a sampled plan follows when the round's length in picks depends on how
/// fast the server answers (no think, no pacing): its first ones, where picks with
/// nothing to act on gather, so the share found is an upper bound of the round's.
pub const FIRST_PICKS: u64 = 100;

/// How many picks a user of `class` makes in a round, as far as the plan can tell
/// without a server: its iterations, or for a duration its think (or pacing) into the
/// round's length, or [`FIRST_PICKS`] with neither; at most [`SAMPLED_PICKS`].
fn picks_per_round(w: &Workload, class: &UserClass) -> u64 {
    if class.arrival.is_some() {
        return session_ops(class).map_or(SAMPLED_PICKS, |n| n.min(SAMPLED_PICKS));
    }
    let n = match (class.iterations, w.run.stop) {
        (Some(n), _) | (None, Stop::Iterations(n)) => n,
        (None, Stop::Duration(d)) => {
            let gap_us = match class.pacing {
                Some(p) => p.as_secs_f64() * 1e6,
                None => class.think.mean(),
            };
            match gap_us >= 1.0 {
                true => (d.as_secs_f64() * 1e6 / gap_us).ceil() as u64,
                false => FIRST_PICKS,
            }
        }
    };
    n.clamp(1, SAMPLED_PICKS)
}

/// The picks of up to [`SAMPLED_USERS`] users of `class` walked through what each holds
/// after its set-up (its `initial_events`, say), through round 1, or every round when
/// users keep their state; `None` for a class whose picks always have something to act
/// on.
pub fn skip_estimate(w: &Workload, class: &UserClass) -> Option<SkipEstimate> {
    let per_round = picks_per_round(w, class);
    let kept = w.run.keep_state && class.arrival.is_none();
    let rounds = match kept {
        true => w.run.rounds.clamp(1, 10),
        false => 1,
    };
    let users = match class.arrival {
        Some(_) => SAMPLED_USERS,
        None => Workload::peak_users(class).clamp(1, SAMPLED_USERS),
    };
    // An open class's arrivals are each a new user, or one of its returning users (taken
    // in turn here), who holds what its earlier sessions made.
    let returning = class
        .arrival
        .as_ref()
        .and_then(|a| a.returning)
        .filter(|r| *r > 0);
    let mut held: Vec<Option<Holdings>> = vec![None; users as usize];
    let mut by_op = vec![0u64; class.ops.len()];
    let (mut picked, mut skipped) = (0u64, 0u64);
    for vu in 0..users {
        let owner = returning.map_or(vu, |r| vu % r);
        let mut rng = VuRngs::setup_data(w.run.seed, &class.name, owner, 1);
        let slot = &mut held[owner as usize];
        if slot.is_none() {
            *slot = Some(class.kind.holdings_after_setup(&mut rng)?);
        }
        let Some(holding) = slot.as_mut() else {
            continue;
        };
        for round in 1..=rounds {
            let picks: Box<dyn Iterator<Item = PlannedOp>> = match class.arrival {
                Some(_) => Box::new(arrival_picks(w, class, vu, round).take(per_round as usize)),
                None => Box::new(picks(w.run.seed, class, vu, round).take(per_round as usize)),
            };
            for p in picks {
                picked += 1;
                if !class.kind.acts(p.op, holding, &mut rng) {
                    skipped += 1;
                    by_op[p.op] += 1;
                }
            }
        }
    }
    let mut by_op: Vec<(String, u64)> = by_op
        .into_iter()
        .enumerate()
        .filter(|(_, n)| *n > 0)
        .map(|(i, n)| (class.ops[i].name.clone(), n))
        .collect();
    by_op.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
    Some(SkipEstimate {
        users,
        open: class.arrival.is_some(),
        per_round,
        to_exit: class.arrival.is_some() && session_ops(class).is_none(),
        rounds,
        picks: picked,
        skipped,
        by_op,
    })
}
