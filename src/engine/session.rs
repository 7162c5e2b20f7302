//! A user's walk through its class's behaviour model, and what its sessions came to:
//! per behaviour, sessions started and how each ended (exit, `max_ops`, a dead end, or
//! cut by the round's end), operations per session and session duration as counts of
//! quantised values (two significant digits), which add up exactly across users, rounds
//! and shards; and per state, how often guarded transitions dropped out.

use std::collections::BTreeMap;
use std::time::Duration;

use tokio::time::Instant;

use super::seed::{VuRngs, next_step};
use crate::workload::UserClass;
use crate::workload::chain::{Ended, Guard, Session, Step};

/// Counts of values, each rounded down to two significant digits: bounded (at most 90
/// keys a decade) and exact to add.
pub(crate) type Counts = BTreeMap<u64, u64>;

/// `v` rounded down to two significant digits.
pub(crate) fn quantise(v: u64) -> u64 {
    let mut scale = 1u64;
    let mut x = v;
    while x >= 100 {
        x /= 10;
        scale *= 10;
    }
    x * scale
}

/// One behaviour's sessions.
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct BehaviourTally {
    pub started: u64,
    pub exited: u64,
    pub max_ops: u64,
    pub dead_ends: u64,
    /// Still running when the user stopped (the round's end, its iterations, a signal).
    pub cut: u64,
    /// Operations per ended session (not the cut ones, whose length the round decided).
    pub ops: Counts,
    /// Milliseconds per ended session, from its first operation's start to its end.
    pub duration_ms: Counts,
}

impl BehaviourTally {
    pub(crate) fn absorb(&mut self, o: &BehaviourTally) {
        self.started += o.started;
        self.exited += o.exited;
        self.max_ops += o.max_ops;
        self.dead_ends += o.dead_ends;
        self.cut += o.cut;
        add_counts(&mut self.ops, &o.ops);
        add_counts(&mut self.duration_ms, &o.duration_ms);
    }
}

/// Add `b` to `a`; saturating, since counts may come from a report read back.
pub(crate) fn add_counts(a: &mut Counts, b: &Counts) {
    for (k, v) in b {
        let e = a.entry(*k).or_default();
        *e = e.saturating_add(*v);
    }
}

/// A class's sessions: per behaviour, and per state the draws in which guarded
/// transitions dropped out.
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct ClassSessions {
    pub behaviours: Vec<BehaviourTally>,
    /// Per state (operation index), and for the start row at the end, draws renormalised.
    pub renormalised: Vec<u64>,
}

impl ClassSessions {
    pub(crate) fn absorb(&mut self, o: &ClassSessions) {
        if self.behaviours.len() < o.behaviours.len() {
            self.behaviours
                .resize(o.behaviours.len(), BehaviourTally::default());
        }
        for (a, b) in self.behaviours.iter_mut().zip(&o.behaviours) {
            a.absorb(b);
        }
        if self.renormalised.len() < o.renormalised.len() {
            self.renormalised.resize(o.renormalised.len(), 0);
        }
        for (a, b) in self.renormalised.iter_mut().zip(&o.renormalised) {
            *a += b;
        }
    }
}

/// A user's walk: where it is, when its session began, what its sessions came to.
pub(crate) struct Walk {
    session: Session,
    /// When the session's first operation started; `None` until it has.
    began: Option<Instant>,
    /// A session began with the last pick, and its first operation has not started yet.
    beginning: bool,
    /// Kept only for classes with behaviours (a `mix:` has no sessions to speak of).
    tally: Option<ClassSessions>,
}

impl Walk {
    pub(crate) fn new(class: &UserClass) -> Walk {
        Walk {
            session: Session::default(),
            began: None,
            beginning: false,
            tally: (!class.chain.from_mix).then(|| ClassSessions {
                behaviours: vec![BehaviourTally::default(); class.chain.behaviours.len()],
                renormalised: vec![0; class.ops.len() + 1],
            }),
        }
    }

    /// The next operation and the think before it, ending sessions (and starting the
    /// next) on the way; `None` when an open user's session ended (`one_session`), or
    /// when a new session ends before its first operation.
    pub(crate) fn next(
        &mut self,
        class: &UserClass,
        rngs: &mut VuRngs,
        allowed: &dyn Fn(&Guard) -> bool,
        now: Instant,
        one_session: bool,
    ) -> Option<(usize, Duration)> {
        // A session that ends is followed at once by the next one's first operation; a
        // second end in a row (a start with nowhere to go) stops the user.
        for _ in 0..2 {
            let at = self.session.current.and_then(|(_, s)| s);
            match next_step(class, &mut self.session, rngs, allowed) {
                Step::Op {
                    op,
                    think_us,
                    began,
                    renormalised,
                } => {
                    if let Some(t) = &mut self.tally {
                        if let Some(b) = began {
                            t.behaviours[b].started += 1;
                            self.beginning = true;
                        }
                        if renormalised {
                            let i = at.unwrap_or(class.ops.len());
                            t.renormalised[i] += 1;
                        }
                    }
                    return Some((op, micros(think_us)));
                }
                Step::End {
                    behaviour,
                    why,
                    ops,
                    renormalised,
                } => {
                    if let Some(t) = &mut self.tally {
                        let b = &mut t.behaviours[behaviour];
                        match why {
                            Ended::Exit => b.exited += 1,
                            Ended::MaxOps => b.max_ops += 1,
                            Ended::DeadEnd => b.dead_ends += 1,
                        }
                        *b.ops.entry(quantise(ops)).or_default() += 1;
                        let ms = self
                            .began
                            .map_or(0, |s| now.saturating_duration_since(s).as_millis() as u64);
                        *b.duration_ms.entry(quantise(ms)).or_default() += 1;
                        if renormalised {
                            let i = at.unwrap_or(class.ops.len());
                            t.renormalised[i] += 1;
                        }
                    }
                    self.began = None;
                    if one_session {
                        return None;
                    }
                }
            }
        }
        None
    }

    /// The operation just picked started at `at`: a session's clock starts with its
    /// first operation's start (after its think or pacing wait, or on arrival).
    pub(crate) fn started(&mut self, at: Instant) {
        if std::mem::take(&mut self.beginning) {
            self.began = Some(at);
        }
    }

    /// What the user's sessions came to, the one still running counted as cut.
    pub(crate) fn finish(mut self) -> Option<ClassSessions> {
        if let (Some(t), Some((b, Some(_)))) = (&mut self.tally, self.session.current) {
            t.behaviours[b].cut += 1;
        }
        self.tally
    }
}

fn micros(us: f64) -> Duration {
    Duration::from_nanos((us * 1e3) as u64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quantised_values_keep_two_digits() {
        assert_eq!(quantise(7), 7);
        assert_eq!(quantise(99), 99);
        assert_eq!(quantise(123), 120);
        assert_eq!(quantise(98_765), 98_000);
        assert_eq!(quantise(u64::MAX), 18_000_000_000_000_000_000);
    }
}
