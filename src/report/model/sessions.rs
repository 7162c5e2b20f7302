//! Sessions as the report holds them, for classes with behaviours: per behaviour the
//! sessions started, how they ended, operations per session and session duration (their
//! counts kept, quantised to two significant digits, so rounds and shards add up exactly),
//! the achieved share of sessions against the behaviour's weight; per state, the draws in
//! which guarded transitions dropped out.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::engine::session::{self, ClassSessions as Tally};
use crate::workload::Workload;

#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct ClassSessions {
    pub class: String,
    pub behaviours: Vec<BehaviourSessions>,
    /// Per state (`start` for a behaviour's first row): draws in which guarded
    /// transitions dropped out and the rest were renormalised.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub renormalised: BTreeMap<String, u64>,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct BehaviourSessions {
    pub behaviour: String,
    /// The behaviour's weight over the class's: the share of sessions it should get.
    pub weight_share: f64,
    pub started: u64,
    /// Sessions that reached `exit`.
    pub exited: u64,
    /// Sessions ended by `session.max_ops`.
    pub max_ops: u64,
    /// Sessions ended because every way on was guarded out.
    pub dead_ends: u64,
    /// Sessions still running when their user stopped (the round's end).
    pub cut: u64,
    /// Operations per ended session.
    pub ops_per_session: Spread,
    /// Seconds per ended session, from its first operation's start to its end.
    pub duration_s: Spread,
}

/// A distribution from its counts: `[value, count]` pairs, values quantised to two
/// significant digits (in the unit of the field they belong to; ms for durations).
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct Spread {
    pub mean: f64,
    pub p50: f64,
    pub p90: f64,
    pub max: f64,
    pub counts: Vec<(u64, u64)>,
}

impl Spread {
    fn of(counts: &session::Counts, scale: f64) -> Spread {
        let n = counts.values().fold(0u64, |a, c| a.saturating_add(*c));
        let at = |q: f64| {
            let rank = ((q * n as f64).ceil() as u64).max(1);
            let mut seen = 0u64;
            for (v, c) in counts {
                seen = seen.saturating_add(*c);
                if seen >= rank {
                    return *v as f64 * scale;
                }
            }
            0.0
        };
        let sum: f64 = counts.iter().map(|(v, c)| *v as f64 * *c as f64).sum();
        Spread {
            mean: if n == 0 { 0.0 } else { sum / n as f64 * scale },
            p50: at(0.5),
            p90: at(0.9),
            max: counts.keys().next_back().map_or(0.0, |v| *v as f64 * scale),
            counts: counts.iter().map(|(v, c)| (*v, *c)).collect(),
        }
    }

    fn counts(&self) -> session::Counts {
        // A report may name a value twice: its counts add, as they would have.
        let mut m = session::Counts::new();
        for (v, c) in &self.counts {
            let e = m.entry(*v).or_default();
            *e = e.saturating_add(*c);
        }
        m
    }
}

/// The report's sessions of a round, from the engine's tallies by class index.
pub(crate) fn of(w: &Workload, walks: &[(usize, Tally)]) -> Vec<ClassSessions> {
    let mut out: Vec<ClassSessions> = walks
        .iter()
        .filter_map(|(ci, t)| {
            let class = w.classes.get(*ci)?;
            let behaviours = class
                .chain
                .behaviours
                .iter()
                .zip(&t.behaviours)
                .map(|(b, s)| BehaviourSessions {
                    behaviour: b.name.clone(),
                    weight_share: b.probability,
                    started: s.started,
                    exited: s.exited,
                    max_ops: s.max_ops,
                    dead_ends: s.dead_ends,
                    cut: s.cut,
                    ops_per_session: Spread::of(&s.ops, 1.0),
                    duration_s: Spread::of(&s.duration_ms, 1e-3),
                })
                .collect();
            let renormalised = t
                .renormalised
                .iter()
                .enumerate()
                .filter(|(_, n)| **n > 0)
                .map(|(i, n)| {
                    let name = class.ops.get(i).map_or("start", |o| o.name.as_str());
                    (name.to_string(), *n)
                })
                .collect();
            Some(ClassSessions {
                class: class.name.clone(),
                behaviours,
                renormalised,
            })
        })
        .collect();
    out.sort_by_key(|c| w.classes.iter().position(|k| k.name == c.class));
    out
}

/// Several rounds' (or shards') sessions added up, class by class and behaviour by
/// behaviour, in the order first seen.
pub(crate) fn sum<'a>(parts: impl IntoIterator<Item = &'a [ClassSessions]>) -> Vec<ClassSessions> {
    let mut out: Vec<ClassSessions> = Vec::new();
    let mut counts: Vec<Vec<(session::Counts, session::Counts)>> = Vec::new();
    for part in parts {
        for c in part {
            let i = match out.iter().position(|o| o.class == c.class) {
                Some(i) => i,
                None => {
                    out.push(ClassSessions {
                        class: c.class.clone(),
                        ..ClassSessions::default()
                    });
                    counts.push(Vec::new());
                    out.len() - 1
                }
            };
            for (k, n) in &c.renormalised {
                let e = out[i].renormalised.entry(k.clone()).or_default();
                *e = e.saturating_add(*n);
            }
            for b in &c.behaviours {
                let j = match out[i]
                    .behaviours
                    .iter()
                    .position(|o| o.behaviour == b.behaviour)
                {
                    Some(j) => j,
                    None => {
                        out[i].behaviours.push(BehaviourSessions {
                            behaviour: b.behaviour.clone(),
                            weight_share: b.weight_share,
                            ..BehaviourSessions::default()
                        });
                        counts[i].push(Default::default());
                        out[i].behaviours.len() - 1
                    }
                };
                let o = &mut out[i].behaviours[j];
                for (a, x) in [
                    (&mut o.started, b.started),
                    (&mut o.exited, b.exited),
                    (&mut o.max_ops, b.max_ops),
                    (&mut o.dead_ends, b.dead_ends),
                    (&mut o.cut, b.cut),
                ] {
                    *a = a.saturating_add(x);
                }
                session::add_counts(&mut counts[i][j].0, &b.ops_per_session.counts());
                session::add_counts(&mut counts[i][j].1, &b.duration_s.counts());
            }
        }
    }
    for (c, cc) in out.iter_mut().zip(&counts) {
        for (b, (ops, ms)) in c.behaviours.iter_mut().zip(cc) {
            b.ops_per_session = Spread::of(ops, 1.0);
            b.duration_s = Spread::of(ms, 1e-3);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spreads_come_from_their_counts_and_add_up() {
        let mut c = session::Counts::new();
        c.insert(1, 5);
        c.insert(3, 4);
        c.insert(120, 1);
        let s = Spread::of(&c, 1.0);
        assert_eq!((s.p50, s.p90, s.max), (1.0, 3.0, 120.0));
        assert!((s.mean - (5.0 + 12.0 + 120.0) / 10.0).abs() < 1e-9);
        let part = [ClassSessions {
            class: "c".into(),
            behaviours: vec![BehaviourSessions {
                behaviour: "b".into(),
                started: 10,
                exited: 10,
                ops_per_session: s.clone(),
                ..BehaviourSessions::default()
            }],
            renormalised: BTreeMap::new(),
        }];
        let both = sum([&part[..], &part[..]]);
        assert_eq!(both[0].behaviours[0].started, 20);
        assert_eq!(
            both[0].behaviours[0].ops_per_session.counts,
            vec![(1, 10), (3, 8), (120, 2)]
        );
        assert_eq!(both[0].behaviours[0].ops_per_session.p50, 1.0);
    }
}
