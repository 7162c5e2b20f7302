//! The search for the highest arrival rate a target sustains within its service level:
//! grow by doubling until a step fails, bisect (geometrically) until the bracket is
//! narrower than [`PRECISION`], then run both ends of it until each has been judged
//! [`RUNS_AT_EACH_END`] times. A step whose samples cannot tell the level is undecided,
//! never a miss: with too few samples (none, or fewer than its percentile needs) the search
//! grows the rate or lengthens the step; at the server's edge (the percentile's interval
//! holds the bound) it runs the rate once more, longer, and then bisects around it. A step
//! whose host was crowded and that did not pass is run once more. Pure: each step's
//! outcome comes in, the next rate and length go out, so it is held against synthetic
//! servers whose capacity is known.

use serde::{Deserialize, Serialize};

/// Each growth step offers this many times the last.
const GROWTH: f64 = 2.0;
/// A step with too few samples offers at most this many times more next.
const GROWTH_FOR_SAMPLES: f64 = 16.0;
/// Bisection stops when the lowest failing rate is within this share of the highest
/// passing one.
pub(crate) const PRECISION: f64 = 0.05;
/// Once the bracket is narrow, each of its ends is judged this many times in all, so that
/// a step that passed or failed by chance shows as a wider interval.
pub(crate) const RUNS_AT_EACH_END: usize = 3;
/// An undecided rate runs this many times before the search moves around it.
const UNDECIDED_RUNS: usize = 2;
/// A step is lengthened to at most this many times the workload's duration.
pub(crate) const MAX_LENGTH: u32 = 4;
/// The most steps one target's search runs, whatever it finds, unless told otherwise.
pub(crate) const MAX_STEPS: usize = 40;
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
    /// Enough samples, but the level's bound lies within their confidence interval: the
    /// server is at its edge here.
    Undecided,
    /// Too few samples to tell the level at all (no arrivals, or fewer than its
    /// percentile needs).
    TooFew,
    /// The generator did not keep its schedule: the step says nothing of the server.
    Generator,
    /// The server kept the level in its own time, but arrivals waited for a slot of the
    /// workload's session cap: the workload, not the server, set the limit.
    Workload,
}

impl Outcome {
    /// Judged either way: counted in the bracket.
    fn judged(self) -> bool {
        matches!(self, Outcome::Passed | Outcome::Failed)
    }
}

/// Why a search ended.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub(crate) enum End {
    /// The bracket narrowed and both its ends were judged enough times.
    Found,
    /// The generator could not keep up at this rate: the capacity is at least the
    /// bracket's low end, and this machine cannot say more.
    Generator { rate: f64 },
    /// The workload's session cap held the arrivals at this rate: the capacity is at
    /// least the bracket's low end, and this workload cannot say more.
    Workload { rate: f64 },
    /// Passed at the most loadmix offers: the capacity is at least this.
    Ceiling { rate: f64 },
    /// Failed even at the lowest rate tried.
    Floor { rate: f64 },
    /// Too few samples at this rate even over the longest step: the level cannot be
    /// told here.
    TooFew { rate: f64 },
    /// [`MAX_STEPS`] ran without a narrow bracket (steps that contradict each other).
    Steps,
    /// Stopped by a signal.
    Interrupted,
}

/// The next step: its rate, and its length in multiples of the workload's duration.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct Next {
    pub rate: f64,
    pub length: u32,
}

/// What came of one step, for the search.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct Found {
    pub outcome: Outcome,
    /// Other processes crowded the host during the step.
    pub crowded: bool,
    /// The samples the level was read from, and the fewest it needs (a percentile's).
    pub samples: u64,
    pub needed: u64,
}

impl Found {
    #[cfg(test)]
    pub(crate) fn plain(outcome: Outcome) -> Found {
        Found {
            outcome,
            crowded: false,
            samples: 1_000,
            needed: 1,
        }
    }
}

/// Where the search is.
#[derive(Debug, Clone, PartialEq)]
enum Phase {
    Grow,
    Bisect,
    /// Judging the bracket's ends again.
    Confirm,
}

/// One step as the search keeps it.
#[derive(Debug, Clone, Copy, PartialEq)]
struct Tried {
    rate: f64,
    outcome: Outcome,
    /// Run again because the host was crowded: not counted.
    redone: bool,
}

/// One target's search.
#[derive(Debug, Clone)]
pub(crate) struct Search {
    /// The most it may offer (loadmix's own bound on a class's rate, scaled).
    ceiling: f64,
    steps: Vec<Tried>,
    phase: Phase,
    next: Option<Next>,
    end: Option<End>,
    halvings: u32,
    /// The next step waits for the host to clear first.
    wait_for_host: bool,
    /// The shortest length a step has since needed for samples enough: later steps run at
    /// least this long, so that they are not too short again.
    min_length: u32,
    /// See [`MAX_STEPS`].
    max_steps: usize,
}

impl Search {
    /// A search that starts at `start` and never offers more than `ceiling`.
    pub(crate) fn new(start: f64, ceiling: f64) -> Search {
        Search {
            ceiling,
            steps: Vec::new(),
            phase: Phase::Grow,
            next: Some(Next {
                rate: start.min(ceiling),
                length: 1,
            }),
            end: None,
            halvings: 0,
            wait_for_host: false,
            min_length: 1,
            max_steps: MAX_STEPS,
        }
    }

    /// The same search, ending after at most `n` steps.
    pub(crate) fn with_max_steps(mut self, n: usize) -> Search {
        self.max_steps = n.max(1);
        self
    }

    /// The next step; `None` once the search has ended.
    pub(crate) fn next(&self) -> Option<Next> {
        self.end.is_none().then_some(self.next).flatten()
    }

    /// The next step repeats one the host crowded: wait for it to clear first.
    pub(crate) fn wants_quiet_host(&self) -> bool {
        self.wait_for_host
    }

    pub(crate) fn end(&self) -> Option<End> {
        self.end
    }

    /// Stop where it is (a signal); the bracket stands as found.
    pub(crate) fn interrupt(&mut self) {
        self.end.get_or_insert(End::Interrupted);
    }

    /// What the step at `rate` found; chooses the next step or ends.
    pub(crate) fn record(&mut self, rate: f64, found: Found) {
        if self.end.is_some() {
            return;
        }
        let length = self.next.map_or(1, |n| n.length);
        self.wait_for_host = false;
        let outcome = found.outcome;
        // A crowded step that did not pass runs once more, once the host is quiet: the
        // other processes, not the server, may have made it miss.
        let redo = found.crowded
            && outcome != Outcome::Passed
            && !matches!(outcome, Outcome::Generator | Outcome::Workload)
            && !self.steps.iter().any(|t| t.redone && same(t.rate, rate));
        self.steps.push(Tried {
            rate,
            outcome,
            redone: redo,
        });
        if redo {
            self.wait_for_host = true;
            self.next = Some(Next { rate, length });
        } else if outcome == Outcome::Generator {
            self.end = Some(End::Generator { rate });
            return;
        } else if outcome == Outcome::Workload {
            self.end = Some(End::Workload { rate });
            return;
        } else {
            self.next = match outcome {
                Outcome::TooFew => self.too_few(rate, length, found),
                Outcome::Undecided => self.undecided(rate, length),
                _ => match std::mem::replace(&mut self.phase, Phase::Grow) {
                    Phase::Grow => self.grow(rate, outcome),
                    Phase::Bisect => self.bisect(),
                    Phase::Confirm => self.confirm(),
                }
                .map(|rate| Next {
                    rate,
                    length: self.min_length,
                }),
            };
        }
        if self.end.is_none() && self.steps.len() >= self.max_steps {
            self.end = Some(End::Steps);
        }
        if self.next.is_none() && self.end.is_none() {
            self.end = Some(End::Found);
        }
    }

    /// Too few samples: below anything judged yet, offer more; else run longer.
    fn too_few(&mut self, rate: f64, length: u32, found: Found) -> Option<Next> {
        let short = match found.samples {
            0 => GROWTH_FOR_SAMPLES,
            n => (found.needed as f64 / n as f64).clamp(GROWTH, GROWTH_FOR_SAMPLES),
        };
        // Offer more only below every rate that missed or was at the edge: a rate that
        // missed has answered already, and growing into it again while the bracket has
        // no high end (an edge step at that rate keeps it from being one) would go back
        // and forth between the two for ever.
        let missed = self
            .steps
            .iter()
            .filter(|t| matches!(t.outcome, Outcome::Failed | Outcome::Undecided))
            .map(|t| t.rate)
            .fold(f64::INFINITY, f64::min);
        let more = (rate * short).min(self.ceiling);
        if self.phase == Phase::Grow && rate < self.ceiling && more < missed {
            return Some(Next { rate: more, length });
        }
        if length >= MAX_LENGTH {
            self.end = Some(End::TooFew { rate });
            return None;
        }
        let longer = ((length as f64 * short).ceil() as u32)
            .next_power_of_two()
            .min(MAX_LENGTH);
        self.min_length = self.min_length.max(longer);
        Some(Next {
            rate,
            length: longer,
        })
    }

    /// At the edge: run it once more, twice as long; then bisect around it.
    fn undecided(&mut self, rate: f64, length: u32) -> Option<Next> {
        let runs = self
            .steps
            .iter()
            .filter(|t| same(t.rate, rate) && t.outcome == Outcome::Undecided)
            .count();
        if runs < UNDECIDED_RUNS {
            return Some(Next {
                rate,
                length: (length * 2).min(MAX_LENGTH),
            });
        }
        let next = match self.bracket() {
            (Some(_), Some(_)) => self.bisect(),
            // Nothing failed above it yet: the edge is here or higher.
            (_, None) => {
                self.phase = Phase::Grow;
                let up = rate * (1.0 + 2.0 * PRECISION);
                (up <= self.ceiling).then_some(up)
            }
            // Nothing passed below it yet: lower.
            (None, Some(_)) => {
                self.phase = Phase::Grow;
                Some(rate / GROWTH)
            }
        };
        next.map(|rate| Next {
            rate,
            length: self.min_length,
        })
    }

    fn grow(&mut self, rate: f64, outcome: Outcome) -> Option<f64> {
        let (lo, _) = self.bracket();
        match outcome {
            Outcome::Passed if rate >= self.ceiling => {
                self.end = Some(End::Ceiling { rate });
                None
            }
            Outcome::Passed => match self.bracket() {
                (_, Some(_)) => self.bisect(),
                _ => Some((rate * GROWTH).min(self.ceiling)),
            },
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

    /// The rates that bound the gaps still open: the bracket's ends and the undecided
    /// rates between them, in order.
    fn marks(&self, lo: f64, hi: f64) -> Vec<f64> {
        let mut m: Vec<f64> = self
            .steps
            .iter()
            .filter(|t| t.outcome == Outcome::Undecided && t.rate > lo && t.rate < hi)
            .map(|t| t.rate)
            .collect();
        m.push(lo);
        m.push(hi);
        m.sort_by(f64::total_cmp);
        m.dedup_by(|a, b| same(*a, *b));
        m
    }

    fn bisect(&mut self) -> Option<f64> {
        match self.bracket() {
            (Some(lo), Some(hi)) if hi > lo * (1.0 + PRECISION) => {
                // The widest gap between the bracket's ends and the undecided rates
                // inside it; once none is wider than half the precision, the server's edge
                // is as narrow as this many samples can tell.
                let marks = self.marks(lo, hi);
                let (a, b) = marks
                    .windows(2)
                    .map(|w| (w[0], w[1]))
                    .max_by(|x, y| (x.1 / x.0).total_cmp(&(y.1 / y.0)))?;
                let mid = (a * b).sqrt();
                if b <= a * (1.0 + PRECISION / 2.0) || self.steps.iter().any(|t| same(t.rate, mid))
                {
                    self.phase = Phase::Confirm;
                    return self.confirm();
                }
                self.phase = Phase::Bisect;
                Some(mid)
            }
            (Some(_), Some(_)) => {
                self.phase = Phase::Confirm;
                self.confirm()
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

    /// The end of the bracket judged fewer times, until each has been judged
    /// [`RUNS_AT_EACH_END`] times; a judgement that moved an end bisects again.
    fn confirm(&mut self) -> Option<f64> {
        let (Some(lo), Some(hi)) = self.bracket() else {
            return self.bisect();
        };
        if hi > lo * (1.0 + PRECISION) && self.phase != Phase::Confirm {
            return self.bisect();
        }
        let runs = |r: f64| {
            self.steps
                .iter()
                .filter(|t| same(t.rate, r) && t.outcome.judged() && !t.redone)
                .count()
        };
        let (at_lo, at_hi) = (runs(lo), runs(hi));
        if at_lo >= RUNS_AT_EACH_END && at_hi >= RUNS_AT_EACH_END {
            return None;
        }
        self.phase = Phase::Confirm;
        Some(if at_lo <= at_hi { lo } else { hi })
    }

    /// The highest rate at or below which every step passed, and the lowest at or above
    /// which every step failed (generator-limited and undecided steps, and crowded steps
    /// run again, say nothing of either). Between them the server sometimes kept its
    /// service level; outside them, every time.
    pub(crate) fn bracket(&self) -> (Option<f64>, Option<f64>) {
        let judged: Vec<(f64, Outcome)> = self
            .steps
            .iter()
            .filter(|t| !t.redone)
            .map(|t| (t.rate, t.outcome))
            .collect();
        bracket(&judged)
    }

    #[cfg(test)]
    pub(crate) fn steps(&self) -> Vec<(f64, Outcome)> {
        self.steps.iter().map(|t| (t.rate, t.outcome)).collect()
    }
}

/// Two rates the search offered as one.
fn same(a: f64, b: f64) -> bool {
    (a - b).abs() <= a.abs().max(b.abs()) * 1e-9
}

/// See [`Search::bracket`]. A step at the server's edge (undecided with samples enough)
/// keeps every rate at or above it from being the low end and every rate at or below it
/// from being the high end: the ends are rates told apart from the edge.
pub(crate) fn bracket(steps: &[(f64, Outcome)]) -> (Option<f64>, Option<f64>) {
    let told: Vec<(f64, Outcome)> = steps
        .iter()
        .filter(|(_, o)| o.judged() || *o == Outcome::Undecided)
        .copied()
        .collect();
    let lo = told
        .iter()
        .filter(|(r, o)| {
            *o == Outcome::Passed
                && told
                    .iter()
                    .filter(|(x, _)| x <= r)
                    .all(|(_, o)| *o == Outcome::Passed)
        })
        .map(|(r, _)| *r)
        .fold(None, |m: Option<f64>, r| Some(m.map_or(r, |m| m.max(r))));
    let hi = told
        .iter()
        .filter(|(r, o)| {
            *o == Outcome::Failed
                && told
                    .iter()
                    .filter(|(x, _)| x >= r)
                    .all(|(_, o)| *o == Outcome::Failed)
        })
        .map(|(r, _)| *r)
        .fold(None, |m: Option<f64>, r| Some(m.map_or(r, |m| m.min(r))));
    (lo, hi)
}

/// Where the steps contradict a monotone server: the highest rate that passed above the
/// lowest that failed, when there is one (the answer is non-monotone there).
pub(crate) fn non_monotone(steps: &[(f64, Outcome)]) -> Option<(f64, f64)> {
    let lowest_fail = steps
        .iter()
        .filter(|(_, o)| *o == Outcome::Failed)
        .map(|(r, _)| *r)
        .min_by(f64::total_cmp)?;
    let highest_pass = steps
        .iter()
        .filter(|(r, o)| *o == Outcome::Passed && *r > lowest_fail)
        .map(|(r, _)| *r)
        .max_by(f64::total_cmp)?;
    Some((lowest_fail, highest_pass))
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
        while let Some(Next { rate, .. }) = s.next() {
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
            s.record(rate, Found::plain(outcome));
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
        assert_eq!(non_monotone(&steps), None);
        let odd = [(958.0, Passed), (1000.0, Failed), (1915.0, Passed)];
        assert_eq!(bracket(&odd), (Some(958.0), None));
        assert_eq!(non_monotone(&odd), Some((1000.0, 1915.0)));
    }

    /// Of `n` M/M/1 response times at `rate`, how many took `bound` or longer (all of them
    /// at or past μ, where the queue has no end).
    fn mm1_beyond(mu: f64, bound: f64, rate: f64, n: u64, rng: &mut impl rand::Rng) -> u64 {
        if rate >= mu {
            return n;
        }
        let exp = rand_distr::Exp::new(mu - rate).unwrap();
        (0..n)
            .filter(|_| rand_distr::Distribution::sample(&exp, rng) >= bound)
            .count() as u64
    }

    /// M/M/1 at arrival rate λ with service rate μ: the response time is exponential with
    /// rate μ − λ, so its p99 is ln(100)/(μ − λ), and the highest rate whose p99 is below
    /// `bound` is μ − ln(100)/bound. One step draws `rate × seconds` response times and
    /// tells the level from them as a step does.
    fn mm1_step(mu: f64, bound: f64, rate: f64, seconds: f64, rng: &mut impl rand::Rng) -> Found {
        use super::super::evidence::{Told, fewest, tell};
        let n = (rate * seconds).round() as u64;
        let needed = fewest(0.01);
        if n < needed {
            return Found {
                outcome: Outcome::TooFew,
                crowded: false,
                samples: n,
                needed,
            };
        }
        let beyond = mm1_beyond(mu, bound, rate, n, rng);
        let outcome = match tell(beyond, n, 0.01, crate::workload::Comparison::Lt) {
            Told::Passed => Outcome::Passed,
            Told::Failed => Outcome::Failed,
            Told::Undecided => Outcome::Undecided,
        };
        Found {
            outcome,
            crowded: false,
            samples: n,
            needed,
        }
    }

    fn mm1_search(mu: f64, bound: f64, start: f64, seed: u64) -> Search {
        let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
        let mut s = Search::new(start, 200_000.0);
        while let Some(Next { rate, length }) = s.next() {
            s.record(
                rate,
                mm1_step(mu, bound, rate, 10.0 * length as f64, &mut rng),
            );
        }
        s
    }

    #[test]
    fn an_mm1_server_is_found_within_the_interval_every_time() {
        // μ = 200/s, p99 < 100 ms: the truth is 200 − ln(100)/0.1 = 153.95/s.
        let (mu, bound) = (200.0, 0.1);
        let truth = mu - 100f64.ln() / bound;
        let mut intervals = Vec::new();
        for seed in 0..40 {
            let s = mm1_search(mu, bound, 20.0, seed);
            let (lo, hi) = s.bracket();
            let (lo, hi) = (lo.unwrap(), hi.unwrap());
            assert!(
                lo < truth && truth < hi,
                "seed {seed}: [{lo}, {hi}] {:?}",
                s.steps()
            );
            assert!(s.steps().len() <= MAX_STEPS);
            intervals.push((lo, hi));
        }
        // Every two searches agree: their intervals overlap.
        let top_lo = intervals.iter().map(|i| i.0).fold(0.0, f64::max);
        let bottom_hi = intervals.iter().map(|i| i.1).fold(f64::INFINITY, f64::min);
        assert!(top_lo < bottom_hi, "{intervals:?}");
        // Fixed-rate rounds afterwards, judged as a user would (the p99 of the round against
        // the bound): the rate called sustained passes at least 9 of 10, the one called
        // failing fails at least 9 of 10.
        let mut rng = rand::rngs::StdRng::seed_from_u64(99);
        for (lo, hi) in intervals.iter().take(10) {
            let p99_below = |rate: f64, rng: &mut rand::rngs::StdRng| {
                let n = (rate * 10.0) as u64;
                mm1_beyond(mu, bound, rate, n, rng) * 100 < n
            };
            let passed = (0..10).filter(|_| p99_below(*lo, &mut rng)).count();
            let failed = (0..10).filter(|_| !p99_below(*hi, &mut rng)).count();
            assert!(
                passed >= 9 && failed >= 9,
                "[{lo}, {hi}]: {passed} {failed}"
            );
        }
    }

    #[test]
    fn a_load_independent_server_passes_no_rate() {
        // Exponential latency, mean 50 ms whatever the rate: its p99 is 230 ms, so
        // `p99 < 150ms` fails at every rate once there are samples enough to say so.
        let mut rng = rand::rngs::StdRng::seed_from_u64(3);
        let mut s = Search::new(0.2, 200_000.0);
        while let Some(Next { rate, length }) = s.next() {
            // M/M/1 with μ − λ = 20/s at every λ: exponential, mean 50 ms.
            let f = mm1_step(rate + 20.0, 0.15, rate, 10.0 * length as f64, &mut rng);
            s.record(rate, f);
        }
        assert!(
            matches!(s.end(), Some(End::Floor { .. } | End::TooFew { .. })),
            "{:?} {:?}",
            s.end(),
            s.steps()
        );
        assert_eq!(s.bracket().0, None, "{:?}", s.steps());
    }

    #[test]
    fn a_step_with_no_arrivals_is_never_a_miss() {
        let mut s = Search::new(0.001, 200_000.0);
        let first = s.next().unwrap();
        s.record(
            first.rate,
            Found {
                samples: 0,
                needed: 368,
                ..Found::plain(Outcome::TooFew)
            },
        );
        let n = s.next().unwrap();
        assert_eq!(s.bracket(), (None, None));
        assert!(n.rate > first.rate * 10.0, "{n:?}");
        // Too few in the bracket's interior: the same rate, longer.
        let mut s = Search::new(100.0, 200_000.0);
        s.record(100.0, Found::plain(Outcome::Passed));
        s.record(200.0, Found::plain(Outcome::Failed));
        let mid = s.next().unwrap();
        let short = Found {
            samples: 100,
            needed: 368,
            ..Found::plain(Outcome::TooFew)
        };
        s.record(mid.rate, short);
        assert_eq!(
            s.next(),
            Some(Next {
                rate: mid.rate,
                length: 4
            })
        );
        s.record(mid.rate, short);
        assert_eq!(s.end(), Some(End::TooFew { rate: mid.rate }));
    }

    /// Radicale, searched from 4/s: an edge step and a miss at 55.5/s, then too few
    /// samples at 27.8/s. The search ran 27.8/s longer, never 55.5/s again at once (it
    /// had gone back and forth between the two, five times, until its step bound).
    #[test]
    fn too_few_samples_below_a_miss_run_longer_rather_than_back_into_the_miss() {
        let few = |n| Found {
            samples: n,
            needed: 368,
            ..Found::plain(Outcome::TooFew)
        };
        let mut s = Search::new(4.0, 200_000.0);
        let trace = [
            (4.0, few(53)),
            (27.8, few(271)),
            (55.5, Found::plain(Outcome::Undecided)),
            (55.5, Found::plain(Outcome::Failed)),
        ];
        for (rate, found) in trace {
            let next = s.next().expect("a step");
            assert!((next.rate - rate).abs() < 0.1, "{next:?} for {rate}");
            s.record(next.rate, found);
        }
        let low = s.next().expect("a step");
        assert!((low.rate - 27.75).abs() < 0.1, "{low:?}");
        s.record(low.rate, few(284));
        let next = s.next().expect("a step");
        assert!(next.rate < 55.0, "{next:?}");
        assert!(next.length > low.length, "{next:?} after {low:?}");
    }

    #[test]
    fn a_crowded_miss_runs_once_more_and_a_generator_limit_ends() {
        let mut s = Search::new(100.0, 200_000.0);
        s.record(
            100.0,
            Found {
                crowded: true,
                ..Found::plain(Outcome::Failed)
            },
        );
        assert!(s.wants_quiet_host());
        assert_eq!(
            s.next(),
            Some(Next {
                rate: 100.0,
                length: 1
            })
        );
        assert_eq!(s.bracket(), (None, None), "not counted");
        s.record(
            100.0,
            Found {
                crowded: true,
                ..Found::plain(Outcome::Failed)
            },
        );
        assert!(!s.wants_quiet_host());
        assert_eq!(
            s.bracket(),
            (None, Some(100.0)),
            "the second time it counts"
        );
        let mut s = Search::new(100.0, 200_000.0);
        s.record(100.0, Found::plain(Outcome::Generator));
        assert_eq!(s.end(), Some(End::Generator { rate: 100.0 }));
        // A session cap that held the arrivals, crowded or not, is not run again.
        let mut s = Search::new(100.0, 200_000.0);
        s.record(
            100.0,
            Found {
                crowded: true,
                ..Found::plain(Outcome::Workload)
            },
        );
        assert!(!s.wants_quiet_host());
        assert_eq!(s.end(), Some(End::Workload { rate: 100.0 }));
    }

    #[test]
    fn each_end_of_the_bracket_is_judged_three_times() {
        let s = against(840.0, 0.0, 10.0, f64::INFINITY, 1);
        let (lo, hi) = s.bracket();
        let runs = |r: f64| s.steps().iter().filter(|(x, _)| *x == r).count();
        assert!(runs(lo.unwrap()) >= RUNS_AT_EACH_END && runs(hi.unwrap()) >= RUNS_AT_EACH_END);
    }
}
