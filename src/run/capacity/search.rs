//! The search for the highest arrival rate a target sustains within its service level:
//! grow by doubling until a step fails, bisect (geometrically) until the bracket is
//! narrower than [`PRECISION`], then repeat both ends of it. Pure: each step's outcome
//! comes in, the next rate goes out, so it is held against synthetic servers whose
//! capacity is known.

use serde::{Deserialize, Serialize};

/// Each growth step offers this many times the last.
const GROWTH: f64 = 2.0;
/// Bisection stops when the lowest failing rate is within this share of the highest
/// passing one.
pub(crate) const PRECISION: f64 = 0.05;
/// Once the bracket is narrow, each of its ends runs this many times more, alternately,
/// so that a step that passed or failed by chance shows as a wider interval.
const REPEATS: usize = 2;
/// The most steps one target's search runs, whatever it finds.
pub(crate) const MAX_STEPS: usize = 30;
/// A search whose first step fails halves the rate at most this many times.
const MAX_HALVINGS: u32 = 10;

/// What one step found.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub(crate) enum Outcome {
    /// Within the service level, and the generator kept its schedule.
    Passed,
    /// The generator kept its schedule and the server missed the service level.
    Failed,
    /// The generator did not keep its schedule: the step says nothing of the server.
    Generator,
}

/// Why a search ended.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub(crate) enum End {
    /// The bracket narrowed and both its ends were repeated.
    Found,
    /// The generator could not keep up at this rate: the capacity is at least the
    /// bracket's low end, and this machine cannot say more.
    Generator { rate: f64 },
    /// Passed at the most loadmix offers: the capacity is at least this.
    Ceiling { rate: f64 },
    /// Failed even at the lowest rate tried.
    Floor { rate: f64 },
    /// [`MAX_STEPS`] ran without a narrow bracket (steps that contradict each other).
    Steps,
    /// Stopped by a signal.
    Interrupted,
}

/// Where the search is.
#[derive(Debug, Clone, PartialEq)]
enum Phase {
    Grow,
    Bisect,
    /// The rates still to repeat, in order.
    Confirm(Vec<f64>),
}

/// One target's search.
#[derive(Debug, Clone)]
pub(crate) struct Search {
    /// The most it may offer (loadmix's own bound on a class's rate, scaled).
    ceiling: f64,
    steps: Vec<(f64, Outcome)>,
    phase: Phase,
    next: Option<f64>,
    end: Option<End>,
    halvings: u32,
}

impl Search {
    /// A search that starts at `start` and never offers more than `ceiling`.
    pub(crate) fn new(start: f64, ceiling: f64) -> Search {
        Search {
            ceiling,
            steps: Vec::new(),
            phase: Phase::Grow,
            next: Some(start.min(ceiling)),
            end: None,
            halvings: 0,
        }
    }

    /// The rate of the next step; `None` once the search has ended.
    pub(crate) fn next(&self) -> Option<f64> {
        self.end.is_none().then_some(self.next).flatten()
    }

    pub(crate) fn end(&self) -> Option<End> {
        self.end
    }

    /// Stop where it is (a signal); the bracket stands as found.
    pub(crate) fn interrupt(&mut self) {
        self.end.get_or_insert(End::Interrupted);
    }

    /// What the step at `rate` found; chooses the next rate or ends.
    pub(crate) fn record(&mut self, rate: f64, outcome: Outcome) {
        if self.end.is_some() {
            return;
        }
        self.steps.push((rate, outcome));
        if outcome == Outcome::Generator {
            self.end = Some(End::Generator { rate });
            return;
        }
        self.next = match std::mem::replace(&mut self.phase, Phase::Grow) {
            Phase::Grow => self.grow(rate, outcome),
            Phase::Bisect => self.bisect(),
            Phase::Confirm(rest) => self.confirm(rate, outcome, rest),
        };
        if self.end.is_none() && self.steps.len() >= MAX_STEPS {
            self.end = Some(End::Steps);
        }
        if self.next.is_none() && self.end.is_none() {
            self.end = Some(End::Found);
        }
    }

    fn grow(&mut self, rate: f64, outcome: Outcome) -> Option<f64> {
        let (lo, _) = self.bracket();
        match outcome {
            Outcome::Passed if rate >= self.ceiling => {
                self.end = Some(End::Ceiling { rate });
                None
            }
            Outcome::Passed => Some((rate * GROWTH).min(self.ceiling)),
            _ if lo.is_none() => {
                self.halvings += 1;
                if self.halvings > MAX_HALVINGS {
                    self.end = Some(End::Floor { rate });
                    return None;
                }
                Some(rate / GROWTH)
            }
            _ => self.bisect(),
        }
    }

    fn bisect(&mut self) -> Option<f64> {
        match self.bracket() {
            (Some(lo), Some(hi)) if hi > lo * (1.0 + PRECISION) => {
                let mid = (lo * hi).sqrt();
                // A rate inside the bracket that already passed and failed: the server is
                // at its edge there, and steps at it would only repeat that. The interval
                // stands as found.
                if self
                    .steps
                    .iter()
                    .any(|(r, _)| (r - mid).abs() <= mid * 1e-9)
                {
                    return None;
                }
                self.phase = Phase::Bisect;
                Some(mid)
            }
            (Some(lo), Some(hi)) => {
                let mut order: Vec<f64> = (0..REPEATS).flat_map(|_| [lo, hi]).collect();
                let first = order.remove(0);
                self.phase = Phase::Confirm(order);
                Some(first)
            }
            // The bracket lost an end (every step below failed too): grow or shrink again.
            (None, Some(hi)) => {
                self.phase = Phase::Grow;
                self.halvings += 1;
                if self.halvings > MAX_HALVINGS {
                    self.end = Some(End::Floor { rate: hi });
                    return None;
                }
                Some(hi / GROWTH)
            }
            (lo, None) => {
                self.phase = Phase::Grow;
                lo.map(|l| (l * GROWTH).min(self.ceiling))
            }
        }
    }

    /// The next repeat; or, when a repeat disagreed with its first step and so widened
    /// the bracket, back to bisecting the wider one (within [`MAX_STEPS`]).
    fn confirm(&mut self, rate: f64, outcome: Outcome, mut rest: Vec<f64>) -> Option<f64> {
        let (lo, hi) = self.bracket();
        let agreed = match outcome {
            Outcome::Passed => lo.is_some_and(|l| rate <= l),
            _ => hi.is_some_and(|h| rate >= h),
        };
        if !agreed {
            return self.bisect();
        }
        if rest.is_empty() {
            return None;
        }
        let next = rest.remove(0);
        self.phase = Phase::Confirm(rest);
        Some(next)
    }

    /// The highest rate at or below which every step passed, and the lowest at or above
    /// which every step failed (generator-limited steps say nothing of either). Between
    /// them the server sometimes kept its service level; outside them, every time.
    pub(crate) fn bracket(&self) -> (Option<f64>, Option<f64>) {
        bracket(&self.steps)
    }

    #[cfg(test)]
    pub(crate) fn steps(&self) -> &[(f64, Outcome)] {
        &self.steps
    }
}

/// See [`Search::bracket`].
pub(crate) fn bracket(steps: &[(f64, Outcome)]) -> (Option<f64>, Option<f64>) {
    let judged: Vec<(f64, bool)> = steps
        .iter()
        .filter(|(_, o)| *o != Outcome::Generator)
        .map(|(r, o)| (*r, *o == Outcome::Passed))
        .collect();
    let lo = judged
        .iter()
        .filter(|(r, _)| judged.iter().filter(|(x, _)| x <= r).all(|(_, p)| *p))
        .map(|(r, _)| *r)
        .fold(None, |m: Option<f64>, r| Some(m.map_or(r, |m| m.max(r))));
    let hi = judged
        .iter()
        .filter(|(r, _)| judged.iter().filter(|(x, _)| x >= r).all(|(_, p)| !*p))
        .map(|(r, _)| *r)
        .fold(None, |m: Option<f64>, r| Some(m.map_or(r, |m| m.min(r))));
    (lo, hi)
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::{RngExt, SeedableRng};

    /// Run a search against a server that passes below `capacity` (times a noise factor
    /// drawn per step); the search's steps and end.
    fn against(capacity: f64, noise: f64, start: f64, generator_limit: f64, seed: u64) -> Search {
        let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
        let mut s = Search::new(start, 200_000.0);
        while let Some(rate) = s.next() {
            let outcome = if rate > generator_limit {
                Outcome::Generator
            } else {
                let wobble = 1.0 + noise * (rng.random::<f64>() * 2.0 - 1.0);
                if rate < capacity * wobble {
                    Outcome::Passed
                } else {
                    Outcome::Failed
                }
            };
            s.record(rate, outcome);
        }
        s
    }

    #[test]
    fn a_sharp_capacity_is_bracketed_within_the_precision() {
        for (capacity, start) in [(840.0, 10.0), (3.3, 50.0), (12_345.0, 12_345.0)] {
            let s = against(capacity, 0.0, start, f64::INFINITY, 1);
            assert_eq!(s.end(), Some(End::Found), "{capacity}");
            let (lo, hi) = s.bracket();
            let (lo, hi) = (lo.unwrap(), hi.unwrap());
            assert!(lo < capacity && capacity <= hi, "{lo} {capacity} {hi}");
            assert!(hi <= lo * (1.0 + PRECISION) + 1e-9, "{lo} {hi}");
            assert!(s.steps().len() <= 20, "{:?}", s.steps());
        }
    }

    #[test]
    fn a_noisy_capacity_widens_the_interval_instead_of_missing_it() {
        // A server whose capacity wobbles ±5 % from step to step: the interval holds the
        // true capacity in every trial, and is wider than the precision when it must be.
        let mut widened = 0;
        for seed in 0..200 {
            let s = against(1000.0, 0.05, 30.0, f64::INFINITY, seed);
            let (lo, hi) = s.bracket();
            let (lo, hi) = (lo.unwrap(), hi.unwrap());
            assert!(lo < 1050.0 && hi >= 950.0, "seed {seed}: [{lo}, {hi}]");
            assert!(s.steps().len() <= MAX_STEPS);
            widened += usize::from(hi > lo * (1.0 + PRECISION) + 1e-9);
        }
        assert!(widened > 0, "no noisy search reported a wider interval");
    }

    #[test]
    fn a_generator_that_cannot_keep_up_ends_the_search_with_a_lower_bound() {
        let s = against(1e6, 0.0, 100.0, 5_000.0, 1);
        assert_eq!(s.end(), Some(End::Generator { rate: 6_400.0 }));
        assert_eq!(s.bracket(), (Some(3_200.0), None));
    }

    #[test]
    fn a_server_that_never_keeps_its_level_ends_at_the_floor() {
        let s = against(0.0, 0.0, 100.0, f64::INFINITY, 1);
        assert!(matches!(s.end(), Some(End::Floor { .. })), "{:?}", s.end());
        assert_eq!(s.bracket().0, None);
        let s = against(1e9, 0.0, 150_000.0, f64::INFINITY, 1);
        assert_eq!(s.end(), Some(End::Ceiling { rate: 200_000.0 }));
    }

    #[test]
    fn the_bracket_counts_only_rates_that_agreed_every_time() {
        use Outcome::*;
        let steps = [
            (100.0, Passed),
            (200.0, Passed),
            (400.0, Failed),
            (300.0, Failed),
            (250.0, Passed),
            (250.0, Failed),
            (300.0, Failed),
            (999.0, Generator),
        ];
        assert_eq!(bracket(&steps), (Some(200.0), Some(300.0)));
        assert_eq!(bracket(&[]), (None, None));
    }
}
