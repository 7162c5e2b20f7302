//! Behaviour models from sessions: a mixture of first-order Markov chains (each with its
//! start distribution, transitions and exit), fitted by expectation-maximisation and its
//! number of components chosen by BIC. A session's likelihood under a chain already holds
//! its length (every step's chance to exit) and its path, so the clustering needs no other
//! features; duration comes from the think times, fitted per behaviour afterwards.
//! Components too small to rest on (fewer than [`MIN_SESSIONS`] sessions) are not kept:
//! the largest number of components all of whose clusters are big enough, and whose BIC is
//! least, wins.

use rand::rngs::Xoshiro256PlusPlus;
use rand::{RngExt, SeedableRng};

/// A cluster must hold this many sessions to be a behaviour of its own.
pub(crate) const MIN_SESSIONS: f64 = 20.0;
/// Sessions used for the fit; a longer list is sampled down to this.
pub(crate) const MAX_FIT: usize = 20_000;
const RESTARTS: usize = 3;
const ITERATIONS: usize = 100;
/// Pseudo-count of every transition, so that no chain gives a session probability 0.
const PRIOR: f64 = 1e-3;

/// A session as the model sees it: its first operation and its transitions.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Path {
    pub start: usize,
    /// `(from, to, count)`, where `to == n` is the exit.
    pub steps: Vec<(usize, usize, u32)>,
}

impl Path {
    /// The path of a sequence of operations (indices below `n`).
    pub(crate) fn of(ops: &[usize], n: usize) -> Option<Path> {
        let start = *ops.first()?;
        let mut steps: Vec<(usize, usize, u32)> = Vec::new();
        let mut add = |a: usize, b: usize| match steps.iter_mut().find(|s| s.0 == a && s.1 == b) {
            Some(s) => s.2 = s.2.saturating_add(1),
            None => steps.push((a, b, 1)),
        };
        for w in ops.windows(2) {
            add(w[0], w[1]);
        }
        add(*ops.last()?, n);
        Some(Path { start, steps })
    }
}

/// One fitted chain.
#[derive(Debug, Clone, PartialEq)]
pub struct Chain {
    /// The share of sessions it explains.
    pub weight: f64,
    /// Expected number of sessions in it.
    pub sessions: f64,
    pub start: Vec<f64>,
    /// Row `i`: to each operation, then to exit (`n + 1` entries).
    pub rows: Vec<Vec<f64>>,
    /// The (expected) counts the rows rest on, same shape.
    pub counts: Vec<Vec<f64>>,
    pub start_counts: Vec<f64>,
}

/// The fitted mixture and how it was chosen.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Mixture {
    pub chains: Vec<Chain>,
    pub log_likelihood: f64,
    /// `(components, BIC)` of every size tried.
    pub bic: Vec<(usize, f64)>,
    /// The component of each path (most probable).
    pub assignment: Vec<usize>,
}

struct Params {
    log_w: Vec<f64>,
    log_start: Vec<Vec<f64>>,
    log_rows: Vec<Vec<Vec<f64>>>,
}

fn log_lik(p: &Params, k: usize, x: &Path) -> f64 {
    let mut ll = p.log_w[k] + p.log_start[k][x.start];
    for &(a, b, c) in &x.steps {
        ll += f64::from(c) * p.log_rows[k][a][b];
    }
    ll
}

fn log_sum_exp(xs: &[f64]) -> f64 {
    let m = xs.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    if m == f64::NEG_INFINITY {
        return m;
    }
    m + xs.iter().map(|x| (x - m).exp()).sum::<f64>().ln()
}

/// Expected counts of each component under responsibilities `r` (`r[i][k]`).
fn m_step(paths: &[Path], r: &[Vec<f64>], n: usize, k: usize) -> (Params, Vec<Chain>) {
    let mut chains = Vec::with_capacity(k);
    for j in 0..k {
        let mut start = vec![0.0; n];
        let mut counts = vec![vec![0.0; n + 1]; n];
        let mut mass = 0.0;
        for (x, ri) in paths.iter().zip(r) {
            let w = ri[j];
            if w < 1e-12 {
                continue;
            }
            mass += w;
            start[x.start] += w;
            for &(a, b, c) in &x.steps {
                counts[a][b] += w * f64::from(c);
            }
        }
        let norm = |v: &[f64]| -> Vec<f64> {
            let t: f64 = v.iter().map(|c| c + PRIOR).sum();
            v.iter().map(|c| (c + PRIOR) / t).collect()
        };
        chains.push(Chain {
            weight: mass / paths.len().max(1) as f64,
            sessions: mass,
            start: norm(&start),
            rows: counts.iter().map(|row| norm(row)).collect(),
            counts,
            start_counts: start,
        });
    }
    let params = Params {
        log_w: chains.iter().map(|c| c.weight.max(1e-300).ln()).collect(),
        log_start: chains
            .iter()
            .map(|c| c.start.iter().map(|p| p.ln()).collect())
            .collect(),
        log_rows: chains
            .iter()
            .map(|c| {
                c.rows
                    .iter()
                    .map(|row| row.iter().map(|p| p.ln()).collect())
                    .collect()
            })
            .collect(),
    };
    (params, chains)
}

/// EM from one start; the responsibilities, chains and log-likelihood it settles on.
fn em(
    paths: &[Path],
    n: usize,
    k: usize,
    rng: &mut Xoshiro256PlusPlus,
) -> (Vec<Vec<f64>>, Vec<Chain>, f64) {
    // Start from hard clusters around k distinct random sessions: each session joins the
    // seed it shares most transitions with.
    let mut seeds: Vec<usize> = Vec::new();
    while seeds.len() < k.min(paths.len()) {
        let s = rng.random_range(0..paths.len());
        if !seeds.contains(&s) {
            seeds.push(s);
        }
    }
    let overlap = |a: &Path, b: &Path| -> f64 {
        let mut o = if a.start == b.start { 1.0 } else { 0.0 };
        for x in &a.steps {
            if b.steps.iter().any(|y| y.0 == x.0 && y.1 == x.1) {
                o += 1.0;
            }
        }
        o / (a.steps.len() + b.steps.len()) as f64
    };
    let mut r: Vec<Vec<f64>> = paths
        .iter()
        .map(|x| {
            let best = (0..seeds.len())
                .map(|j| (overlap(x, &paths[seeds[j]]) + rng.random::<f64>() * 1e-6, j))
                .max_by(|a, b| a.0.total_cmp(&b.0))
                .map_or(0, |b| b.1);
            (0..k).map(|j| if j == best { 1.0 } else { 0.0 }).collect()
        })
        .collect();
    let mut last = f64::NEG_INFINITY;
    let mut chains = Vec::new();
    for _ in 0..ITERATIONS {
        let (p, c) = m_step(paths, &r, n, k);
        chains = c;
        let mut total = 0.0;
        let mut lls = vec![0.0; k];
        for (x, ri) in paths.iter().zip(r.iter_mut()) {
            for (j, l) in lls.iter_mut().enumerate() {
                *l = log_lik(&p, j, x);
            }
            let z = log_sum_exp(&lls);
            total += z;
            for (j, l) in lls.iter().enumerate() {
                ri[j] = (l - z).exp();
            }
        }
        if (total - last).abs() < 1e-5 * total.abs().max(1.0) {
            last = total;
            break;
        }
        last = total;
    }
    let (_, c) = m_step(paths, &r, n, k);
    if !c.is_empty() {
        chains = c;
    }
    (r, chains, last)
}

/// Free parameters of one chain: the starts and transitions the data shows, less one per
/// distribution (they sum to 1).
fn free_params(paths: &[Path], n: usize) -> f64 {
    let mut starts = vec![false; n];
    let mut seen = vec![vec![false; n + 1]; n];
    for x in paths {
        starts[x.start] = true;
        for &(a, b, _) in &x.steps {
            seen[a][b] = true;
        }
    }
    let s = starts.iter().filter(|&&b| b).count() as f64;
    let rows: f64 = seen
        .iter()
        .map(|r| r.iter().filter(|&&b| b).count())
        .filter(|&c| c > 0)
        .map(|c| (c - 1) as f64)
        .sum();
    (s - 1.0).max(0.0) + rows
}

/// The mixture of 1..=`max_k` chains over `n` operations that BIC prefers.
pub(crate) fn fit(paths: &[Path], n: usize, max_k: usize, seed: u64) -> Option<Mixture> {
    if paths.is_empty() || n == 0 {
        return None;
    }
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(seed);
    let sample: Vec<Path> = if paths.len() > MAX_FIT {
        (0..MAX_FIT)
            .map(|_| paths[rng.random_range(0..paths.len())].clone())
            .collect()
    } else {
        paths.to_vec()
    };
    let per_chain = free_params(&sample, n);
    let ln_n = (sample.len() as f64).ln();
    let mut best: Option<(f64, Mixture)> = None;
    let mut bic = Vec::new();
    for k in 1..=max_k.max(1) {
        if (k as f64) * MIN_SESSIONS > sample.len() as f64 && k > 1 {
            break;
        }
        let mut top: Option<(Vec<Vec<f64>>, Vec<Chain>, f64)> = None;
        for _ in 0..if k == 1 { 1 } else { RESTARTS } {
            let run = em(&sample, n, k, &mut rng);
            if top.as_ref().is_none_or(|t| run.2 > t.2) {
                top = Some(run);
            }
        }
        let (r, chains, ll) = top?;
        let b = -2.0 * ll + (k as f64 * per_chain + (k - 1) as f64) * ln_n;
        bic.push((k, b));
        if k > 1 && chains.iter().any(|c| c.sessions < MIN_SESSIONS) {
            continue;
        }
        if best.as_ref().is_none_or(|(bb, _)| b < *bb) {
            let assignment = r
                .iter()
                .map(|ri| (0..k).max_by(|&a, &b| ri[a].total_cmp(&ri[b])).unwrap_or(0))
                .collect();
            best = Some((
                b,
                Mixture {
                    chains,
                    log_likelihood: ll,
                    bic: Vec::new(),
                    assignment,
                },
            ));
        }
    }
    let (_, mut m) = best?;
    m.bic = bic;
    // The largest behaviour first.
    let mut order: Vec<usize> = (0..m.chains.len()).collect();
    order.sort_by(|&a, &b| m.chains[b].sessions.total_cmp(&m.chains[a].sessions));
    let chains = order.iter().map(|&i| m.chains[i].clone()).collect();
    let rank: Vec<usize> = {
        let mut r = vec![0; order.len()];
        for (pos, &i) in order.iter().enumerate() {
            r[i] = pos;
        }
        r
    };
    m.chains = chains;
    if paths.len() <= MAX_FIT {
        m.assignment = m.assignment.iter().map(|&a| rank[a]).collect();
    } else {
        m.assignment.clear();
    }
    Some(m)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Sessions drawn from a chain: `start`, then rows of (to, p) with `n` for exit.
    fn walk(
        rng: &mut Xoshiro256PlusPlus,
        start: usize,
        rows: &[Vec<(usize, f64)>],
        n: usize,
    ) -> Vec<usize> {
        let mut ops = vec![start];
        loop {
            let row = &rows[*ops.last().unwrap()];
            let mut u: f64 = rng.random();
            let mut next = n;
            for &(to, p) in row {
                if u < p {
                    next = to;
                    break;
                }
                u -= p;
            }
            if next == n || ops.len() > 50 {
                return ops;
            }
            ops.push(next);
        }
    }

    #[test]
    fn two_behaviours_are_told_apart_and_their_rows_recovered() {
        let mut rng = Xoshiro256PlusPlus::seed_from_u64(3);
        let n = 3;
        // Polls: 0 → 1 (0.9) or exit; 1 → exit (0.8) or 0. Writes: 2 → 2 (0.6), 1 (0.2), exit.
        let polls = [vec![(1, 0.9)], vec![(0, 0.2)], vec![]];
        let writes = [vec![], vec![(2, 0.5)], vec![(2, 0.6), (1, 0.2)]];
        let mut paths = Vec::new();
        for i in 0..900 {
            let ops = if i % 3 == 0 {
                walk(&mut rng, 2, &writes, n)
            } else {
                walk(&mut rng, 0, &polls, n)
            };
            paths.push(Path::of(&ops, n).unwrap());
        }
        let m = fit(&paths, n, 4, 1).unwrap();
        assert_eq!(m.chains.len(), 2, "{:?}", m.bic);
        let (a, b) = (&m.chains[0], &m.chains[1]);
        assert!((a.weight - 2.0 / 3.0).abs() < 0.05, "{}", a.weight);
        assert!((a.rows[0][1] - 0.9).abs() < 0.05, "{:?}", a.rows[0]);
        assert!((b.rows[2][2] - 0.6).abs() < 0.06, "{:?}", b.rows[2]);
        assert!(b.start[2] > 0.99);
    }

    #[test]
    fn one_behaviour_stays_one() {
        let mut rng = Xoshiro256PlusPlus::seed_from_u64(4);
        let rows = [vec![(1, 0.7)], vec![(0, 0.3)]];
        let paths: Vec<Path> = (0..500)
            .map(|_| Path::of(&walk(&mut rng, 0, &rows, 2), 2).unwrap())
            .collect();
        let m = fit(&paths, 2, 4, 1).unwrap();
        assert_eq!(m.chains.len(), 1, "{:?}", m.bic);
    }
}
