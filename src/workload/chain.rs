//! Behaviour models: how a user goes from one operation to the next. A class's chain has
//! one or more behaviours (one drawn per session, by weight); each has a start row and a
//! row per state (an operation of the class), whose transitions lead to another operation
//! or to `exit`, each with its own think time and, optionally, a guard. A `mix:` table is
//! the chain of one behaviour whose every state has the same row and no exit, so both run
//! on this one mechanism.
//!
//! Also here: what a chain implies, worked out exactly from its transition matrix (the
//! fundamental matrix N = (I − Q)⁻¹ of the absorbing chain): expected operations per
//! session, visits per state, and the operation mix, which `validate` prints.

use rand::rngs::Xoshiro256PlusPlus;
use rand_distr::Distribution;
use rand_distr::weighted::WeightedAliasIndex;

use super::dist::{Dist, unit_f64};

/// Where a transition leads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Target {
    /// The operation at this index of the class's table.
    Op(usize),
    Exit,
}

/// A condition a transition needs to be taken: checked against the user's state when the
/// row is drawn from; a transition whose guard fails drops out and the rest are
/// renormalised.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Guard {
    /// The user's http pool (by index in the class's pools) holds at least one value.
    Pool { index: usize, name: String },
    /// The CalDAV user's inbox has shown it an invitation it has not answered yet.
    Invited,
    /// The CalDAV or CardDAV user has (`true`) or has not (`false`) synced one of its
    /// collections yet: a client's first sync of a collection is an initial one, every
    /// later one a delta from its token.
    Synced(bool),
}

#[derive(Debug, Clone)]
pub struct Transition {
    pub to: Target,
    /// As written, and normalised over the row.
    pub weight: f64,
    pub probability: f64,
    /// The think before the operation it leads to (the transition's own, else its
    /// state's, its behaviour's, the class's, the file's).
    pub think: Dist,
    pub when: Option<Guard>,
}

/// One row of transition probabilities.
#[derive(Debug, Clone)]
pub struct Row {
    pub to: Vec<Transition>,
    alias: WeightedAliasIndex<f64>,
    guarded: bool,
}

/// Each weight's share of their sum, and an alias sampler over them; refused unless the
/// weights add up to something positive and finite. `whose` names them in messages.
fn sampler(weights: Vec<f64>, whose: &str) -> Result<(Vec<f64>, WeightedAliasIndex<f64>), String> {
    let shares = shares(&weights)
        .ok_or_else(|| format!("the {whose} weights do not add up to something positive"))?;
    let alias = WeightedAliasIndex::new(shares.clone())
        .map_err(|e| format!("cannot build the {whose} sampler: {e}"))?;
    Ok((shares, alias))
}

/// Each weight's share of their sum; `None` unless some weight is positive and all are
/// finite. Only ratios matter: taken against the largest weight first, weights of any
/// magnitude (1e-320 or 1e300) share as their ratios say, and a ratio too small for a
/// double to hold in full (subnormal) is no share at all, as its chance of a draw is.
pub(crate) fn shares(weights: &[f64]) -> Option<Vec<f64>> {
    let largest = weights.iter().copied().fold(0.0, f64::max);
    if !(largest > 0.0 && largest.is_finite()) || weights.iter().any(|w| !w.is_finite()) {
        return None;
    }
    let scaled: Vec<f64> = weights
        .iter()
        .map(|w| match w / largest {
            r if r >= f64::MIN_POSITIVE => r,
            _ => 0.0,
        })
        .collect();
    let total: f64 = scaled.iter().sum();
    Some(scaled.iter().map(|w| w / total).collect())
}

impl Row {
    /// A row from its transitions (weights already checked: finite, ≥ 0, some positive).
    pub fn new(mut to: Vec<Transition>) -> Result<Row, String> {
        let (shares, alias) = sampler(to.iter().map(|t| t.weight).collect(), "row's")?;
        for (t, p) in to.iter_mut().zip(shares) {
            t.probability = p;
        }
        let guarded = to.iter().any(|t| t.when.is_some());
        Ok(Row { to, alias, guarded })
    }

    /// Draw a transition; `allowed` says whether a guard holds. `None` when every
    /// transition with a positive weight is guarded out (a dead end).
    fn draw(
        &self,
        rng: &mut Xoshiro256PlusPlus,
        allowed: &dyn Fn(&Guard) -> bool,
    ) -> (Option<&Transition>, bool) {
        if !self.guarded {
            return (Some(&self.to[self.alias.sample(rng)]), false);
        }
        let open = |t: &Transition| t.when.as_ref().is_none_or(allowed);
        // Shares, not the weights as written: they are scaled so that any magnitude sums.
        let total: f64 = self
            .to
            .iter()
            .filter(|t| open(t))
            .map(|t| t.probability)
            .sum();
        let renormalised = self.to.iter().any(|t| t.probability > 0.0 && !open(t));
        if total <= 0.0 {
            return (None, renormalised);
        }
        let mut x = unit_f64(rng) * total;
        let mut last = None;
        for t in self.to.iter().filter(|t| open(t) && t.probability > 0.0) {
            last = Some(t);
            if x < t.probability {
                return (Some(t), renormalised);
            }
            x -= t.probability;
        }
        (last, renormalised)
    }
}

#[derive(Debug, Clone)]
pub struct Behaviour {
    pub name: String,
    pub weight: f64,
    pub probability: f64,
    /// Index into the chain's rows: the first operation of a session.
    pub start: usize,
    /// Per operation of the class, the index of its row, or `None` when this behaviour
    /// never enters it.
    pub states: Vec<Option<usize>>,
}

/// A class's behaviour models.
#[derive(Debug, Clone)]
pub struct Chain {
    pub behaviours: Vec<Behaviour>,
    pub rows: Vec<Row>,
    pick: WeightedAliasIndex<f64>,
    /// A session ends after this many operations, when it has not exited before.
    pub max_ops: Option<u64>,
    /// Closed model: the pause between one session's end and the next one's start.
    pub pause: Option<Dist>,
    /// The class wrote `mix:` (one behaviour, one row, no sessions to speak of).
    pub from_mix: bool,
}

/// Where a user is in its session.
#[derive(Debug, Clone, Default)]
pub struct Session {
    /// The behaviour and the state (operation) it is in; `None` before its first.
    pub current: Option<(usize, Option<usize>)>,
    /// Operations so far in this session.
    pub ops: u64,
    /// Sessions this user has ended (the pause is due before each later one).
    pub ended: u64,
}

/// How a session ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ended {
    Exit,
    MaxOps,
    /// Every way on was guarded out (or the state had no row).
    DeadEnd,
}

/// The next step of a user.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Step {
    /// Run operation `op` after `think` µs; `began` names the behaviour when it is the
    /// session's first.
    Op {
        op: usize,
        think_us: f64,
        began: Option<usize>,
        /// The state drawn from had guarded transitions drop out.
        renormalised: bool,
    },
    /// The session ends, before any other operation, after `ops` operations.
    End {
        behaviour: usize,
        why: Ended,
        ops: u64,
        renormalised: bool,
    },
}

impl Chain {
    /// The chain of a `mix:` table: every pick from the same row, forever.
    pub fn of_mix(weights: &[f64], think: &Dist) -> Result<Chain, String> {
        let to = weights
            .iter()
            .enumerate()
            .map(|(i, w)| Transition {
                to: Target::Op(i),
                weight: *w,
                probability: 0.0,
                think: think.clone(),
                when: None,
            })
            .collect();
        let row = Row::new(to)?;
        Chain::new(
            vec![Behaviour {
                name: "mix".into(),
                weight: 1.0,
                probability: 1.0,
                start: 0,
                states: vec![Some(0); weights.len()],
            }],
            vec![row],
            None,
            None,
            true,
        )
    }

    pub fn new(
        mut behaviours: Vec<Behaviour>,
        rows: Vec<Row>,
        max_ops: Option<u64>,
        pause: Option<Dist>,
        from_mix: bool,
    ) -> Result<Chain, String> {
        let (shares, pick) = sampler(behaviours.iter().map(|b| b.weight).collect(), "behaviours'")?;
        for (b, p) in behaviours.iter_mut().zip(shares) {
            b.probability = p;
        }
        Ok(Chain {
            behaviours,
            rows,
            pick,
            max_ops,
            pause,
            from_mix,
        })
    }

    /// The next step of a user in `session`: the transition from the picks' stream, its
    /// think from the think stream (one draw each per step, so a plan can replay them).
    pub fn next(
        &self,
        session: &mut Session,
        mix: &mut Xoshiro256PlusPlus,
        think: &mut Xoshiro256PlusPlus,
        allowed: &dyn Fn(&Guard) -> bool,
    ) -> Step {
        let (b, at, began) = match session.current {
            Some((b, at)) => (b, at, None),
            None => {
                let b = if self.behaviours.len() == 1 {
                    0
                } else {
                    self.pick.sample(mix)
                };
                (b, None, Some(b))
            }
        };
        if self.max_ops.is_some_and(|m| session.ops >= m) {
            return self.end(session, b, Ended::MaxOps, false);
        }
        let behaviour = &self.behaviours[b];
        let row_index = match at {
            None => Some(behaviour.start),
            Some(op) => behaviour.states.get(op).copied().flatten(),
        };
        // A state with no row of its own (validated away, but never trusted) ends.
        let Some(row) = row_index.and_then(|r| self.rows.get(r)) else {
            return self.end(session, b, Ended::DeadEnd, false);
        };
        let (drawn, renormalised) = row.draw(mix, allowed);
        match drawn.map(|t| (t.to, &t.think)) {
            Some((Target::Op(op), dist)) => {
                let mut think_us = dist.sample(think);
                if began.is_some()
                    && session.ended > 0
                    && let Some(p) = &self.pause
                {
                    think_us += p.sample(think);
                }
                session.current = Some((b, Some(op)));
                session.ops += 1;
                Step::Op {
                    op,
                    think_us,
                    began,
                    renormalised,
                }
            }
            Some((Target::Exit, _)) => self.end(session, b, Ended::Exit, renormalised),
            None => self.end(session, b, Ended::DeadEnd, renormalised),
        }
    }

    fn end(&self, session: &mut Session, behaviour: usize, why: Ended, renormalised: bool) -> Step {
        session.current = None;
        session.ended += 1;
        Step::End {
            behaviour,
            why,
            ops: std::mem::take(&mut session.ops),
            renormalised,
        }
    }

    /// The operations a behaviour can reach from its start.
    pub fn reachable(&self, b: usize, n_ops: usize) -> Vec<bool> {
        let beh = &self.behaviours[b];
        let mut seen = vec![false; n_ops];
        let mut todo = vec![beh.start];
        let mut rows_seen = vec![false; self.rows.len()];
        while let Some(r) = todo.pop() {
            if std::mem::replace(&mut rows_seen[r], true) {
                continue;
            }
            for t in &self.rows[r].to {
                if let (Target::Op(op), true) = (t.to, t.probability > 0.0)
                    && op < n_ops
                    && !seen[op]
                {
                    seen[op] = true;
                    if let Some(next) = beh.states[op] {
                        todo.push(next);
                    }
                }
            }
        }
        seen
    }

    /// Whether a session of behaviour `b` can reach `exit` from every state it can reach.
    pub fn can_exit(&self, b: usize, n_ops: usize) -> bool {
        let beh = &self.behaviours[b];
        let reach = self.reachable(b, n_ops);
        // States that can reach exit, found backwards to a fixed point.
        let exits_from = |r: usize, ok: &[bool]| {
            self.rows[r].to.iter().any(|t| {
                t.probability > 0.0
                    && match t.to {
                        Target::Exit => true,
                        Target::Op(op) => ok.get(op).copied().unwrap_or(false),
                    }
            })
        };
        let mut ok = vec![false; n_ops];
        loop {
            let mut changed = false;
            for op in 0..n_ops {
                if !ok[op]
                    && let Some(r) = beh.states[op]
                    && exits_from(r, &ok)
                {
                    ok[op] = true;
                    changed = true;
                }
            }
            if !changed {
                break;
            }
        }
        (0..n_ops).all(|op| !reach[op] || ok[op]) && exits_from(beh.start, &ok)
    }
}

/// What a behaviour implies, worked out exactly (guards taken as open).
#[derive(Debug, Clone, PartialEq)]
pub struct Expected {
    /// Expected operations per session (`None` when a session never ends, as a `mix:`
    /// table's; then `visits` are the long-run shares instead).
    pub ops_per_session: Option<f64>,
    /// Per operation: expected visits per session, or the long-run share.
    pub visits: Vec<f64>,
}

impl Chain {
    /// The expected visits of behaviour `b` to each operation per session: the start row
    /// times the fundamental matrix N = (I − Q)⁻¹, Q the transitions between operations.
    /// A chain that cannot exit gives its long-run shares from its start instead, by
    /// power iteration of the lazy chain (½ I + ½ Q: the same shares, and it converges
    /// also when the chain is periodic, as a → b → a), bounded.
    pub fn expected(&self, b: usize, n_ops: usize) -> Expected {
        let beh = &self.behaviours[b];
        let row_of = |r: usize| -> Vec<f64> {
            let mut v = vec![0.0; n_ops];
            for t in &self.rows[r].to {
                if let Target::Op(op) = t.to
                    && op < n_ops
                {
                    v[op] += t.probability;
                }
            }
            v
        };
        let start = row_of(beh.start);
        let q: Vec<Vec<f64>> = (0..n_ops)
            .map(|op| match beh.states[op] {
                Some(r) => row_of(r),
                None => vec![0.0; n_ops],
            })
            .collect();
        if self.can_exit(b, n_ops) {
            // Solve x (I − Q) = s for x: (I − Q)ᵀ xᵀ = sᵀ, Gaussian elimination with
            // partial pivoting (a few dozen states at most).
            let mut a: Vec<Vec<f64>> = (0..n_ops)
                .map(|i| {
                    let mut r: Vec<f64> = (0..n_ops)
                        .map(|j| if i == j { 1.0 } else { 0.0 } - q[j][i])
                        .collect();
                    r.push(start[i]);
                    r
                })
                .collect();
            if let Some(x) = solve(&mut a) {
                let total: f64 = x.iter().sum();
                return Expected {
                    ops_per_session: Some(total),
                    visits: x,
                };
            }
        }
        let mut x = start.clone();
        for _ in 0..10_000 {
            let mut next: Vec<f64> = x.iter().map(|xi| xi / 2.0).collect();
            for (i, xi) in x.iter().enumerate() {
                for (j, qij) in q[i].iter().enumerate() {
                    next[j] += xi * qij / 2.0;
                }
            }
            let sum: f64 = next.iter().sum();
            if sum <= 0.0 {
                break;
            }
            next.iter_mut().for_each(|v| *v /= sum);
            let moved: f64 = next.iter().zip(&x).map(|(a, b)| (a - b).abs()).sum();
            x = next;
            if moved < 1e-12 {
                break;
            }
        }
        Expected {
            ops_per_session: None,
            visits: x,
        }
    }
}

impl Chain {
    /// The operations a session of this chain runs on average, its behaviours weighted by
    /// their share of sessions and each cut at `max_ops` no sooner than its mean would
    /// (so an upper bound when `max_ops` binds); `None` when some behaviour never exits
    /// and has no `max_ops`.
    pub fn mean_ops_per_session(&self, n_ops: usize) -> Option<f64> {
        let mut sum = 0.0;
        for (b, beh) in self.behaviours.iter().enumerate() {
            let mean = match (self.expected(b, n_ops).ops_per_session, self.max_ops) {
                (Some(x), Some(m)) => x.min(m as f64),
                (Some(x), None) => x,
                (None, Some(m)) => m as f64,
                (None, None) => return None,
            };
            sum += beh.probability * mean;
        }
        Some(sum)
    }
}

/// Solve the augmented system in place; `None` when singular.
fn solve(a: &mut [Vec<f64>]) -> Option<Vec<f64>> {
    let n = a.len();
    for col in 0..n {
        let pivot = (col..n).max_by(|&i, &j| a[i][col].abs().total_cmp(&a[j][col].abs()))?;
        if a[pivot][col].abs() < 1e-12 {
            return None;
        }
        a.swap(col, pivot);
        let pivot_row = a[col].clone();
        for (r, row) in a.iter_mut().enumerate() {
            if r != col {
                let f = row[col] / pivot_row[col];
                if f != 0.0 {
                    for (x, p) in row.iter_mut().zip(&pivot_row).skip(col) {
                        *x -= f * p;
                    }
                }
            }
        }
    }
    Some((0..n).map(|i| a[i][n] / a[i][i]).collect())
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;

    fn t(to: Target, weight: f64) -> Transition {
        Transition {
            to,
            weight,
            probability: 0.0,
            think: Dist::constant(0.0),
            when: None,
        }
    }

    /// a → b (0.5) or exit (0.5); b → a always. Expected visits from a: a = 2, b = 1.
    fn two_state() -> Chain {
        let rows = vec![
            Row::new(vec![t(Target::Op(0), 1.0)]).unwrap(),
            Row::new(vec![t(Target::Op(1), 1.0), t(Target::Exit, 1.0)]).unwrap(),
            Row::new(vec![t(Target::Op(0), 1.0)]).unwrap(),
        ];
        let b = Behaviour {
            name: "b".into(),
            weight: 1.0,
            probability: 0.0,
            start: 0,
            states: vec![Some(1), Some(2)],
        };
        Chain::new(vec![b], rows, None, None, false).unwrap()
    }

    #[test]
    fn the_fundamental_matrix_gives_the_expected_visits() {
        let c = two_state();
        assert!(c.can_exit(0, 2));
        let e = c.expected(0, 2);
        assert!((e.ops_per_session.unwrap() - 3.0).abs() < 1e-9, "{e:?}");
        assert!((e.visits[0] - 2.0).abs() < 1e-9 && (e.visits[1] - 1.0).abs() < 1e-9);
        // And sampling agrees.
        let (mut m, mut th) = (
            Xoshiro256PlusPlus::seed_from_u64(1),
            Xoshiro256PlusPlus::seed_from_u64(2),
        );
        let mut s = Session::default();
        let (mut ops, mut sessions) = (0u64, 0u64);
        while sessions < 20_000 {
            match c.next(&mut s, &mut m, &mut th, &|_| true) {
                Step::Op { .. } => ops += 1,
                Step::End { .. } => sessions += 1,
            }
        }
        let mean = ops as f64 / sessions as f64;
        assert!((mean - 3.0).abs() < 0.1, "{mean}");
    }

    #[test]
    fn a_periodic_chain_without_exit_has_even_shares() {
        // a → b → a → …: the plain power iteration would flip between a and b forever.
        let rows = vec![
            Row::new(vec![t(Target::Op(0), 1.0)]).unwrap(),
            Row::new(vec![t(Target::Op(1), 1.0)]).unwrap(),
            Row::new(vec![t(Target::Op(0), 1.0)]).unwrap(),
        ];
        let b = Behaviour {
            name: "b".into(),
            weight: 1.0,
            probability: 0.0,
            start: 0,
            states: vec![Some(1), Some(2)],
        };
        let c = Chain::new(vec![b], rows, None, None, false).unwrap();
        let e = c.expected(0, 2);
        assert_eq!(e.ops_per_session, None);
        assert!((e.visits[0] - 0.5).abs() < 1e-6, "{e:?}");
    }

    #[test]
    fn a_mix_never_exits_and_its_shares_are_its_weights() {
        let c = Chain::of_mix(&[3.0, 1.0], &Dist::constant(0.0)).unwrap();
        assert!(!c.can_exit(0, 2));
        let e = c.expected(0, 2);
        assert_eq!(e.ops_per_session, None);
        assert!((e.visits[0] - 0.75).abs() < 1e-9, "{e:?}");
    }

    #[test]
    fn weights_of_any_magnitude_share_as_their_ratios_say() {
        let tiny = 1e-320;
        assert_eq!(shares(&[tiny, tiny]), Some(vec![0.5, 0.5]));
        assert_eq!(shares(&[1.0, tiny]), Some(vec![1.0, 0.0]));
        assert_eq!(shares(&[1e300, 1e300, 2e300]), Some(vec![0.25, 0.25, 0.5]));
        assert_eq!(shares(&[0.0, 0.0]), None);
        assert_eq!(shares(&[1.0, f64::INFINITY]), None);
        // Rows of such weights draw, and draw as their shares say.
        let mut rng = Xoshiro256PlusPlus::seed_from_u64(5);
        for ws in [[tiny, tiny, 2.0 * tiny], [1e300, 1e300, 2e300]] {
            let row = Row::new(
                ws.iter()
                    .enumerate()
                    .map(|(i, w)| t(Target::Op(i), *w))
                    .collect(),
            )
            .unwrap();
            let mut n = [0u32; 3];
            for _ in 0..20_000 {
                if let (
                    Some(Transition {
                        to: Target::Op(i), ..
                    }),
                    _,
                ) = row.draw(&mut rng, &|_| true)
                {
                    n[*i] += 1;
                }
            }
            assert!((n[2] as f64 / 20_000.0 - 0.5).abs() < 0.02, "{ws:?}: {n:?}");
        }
        let mix = Chain::of_mix(&[tiny, tiny], &Dist::constant(0.0)).unwrap();
        assert!((mix.expected(0, 2).visits[0] - 0.5).abs() < 1e-9);
    }

    #[test]
    fn guarded_out_transitions_drop_out_and_the_rest_renormalise() {
        let g = Guard::Pool {
            index: 0,
            name: "p".into(),
        };
        let mut a = t(Target::Op(0), 1.0);
        a.when = Some(g.clone());
        let row = Row::new(vec![a, t(Target::Op(1), 1.0), t(Target::Op(2), 2.0)]).unwrap();
        let mut rng = Xoshiro256PlusPlus::seed_from_u64(3);
        let mut n = [0u32; 3];
        for _ in 0..30_000 {
            let (tr, renorm) = row.draw(&mut rng, &|_| false);
            assert!(renorm);
            if let Target::Op(i) = tr.unwrap().to {
                n[i] += 1;
            }
        }
        assert_eq!(n[0], 0);
        let share = n[2] as f64 / 30_000.0;
        assert!((share - 2.0 / 3.0).abs() < 0.02, "{share}");
        let only = Row::new(vec![{
            let mut x = t(Target::Op(0), 1.0);
            x.when = Some(g);
            x
        }])
        .unwrap();
        assert!(only.draw(&mut rng, &|_| false).0.is_none());
    }
}
