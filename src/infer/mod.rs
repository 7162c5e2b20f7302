//! `loadmix infer`: a workload inferred from a server's access logs. The logs are read
//! ([`log`]), each request named ([`classify`]), cut into sessions ([`scan`]), and the
//! sessions of each protocol split into the clients that come back at a steady interval
//! (a closed population with that pause) and those that arrive and leave (open-model
//! arrivals). Each group's sessions are clustered into behaviour models ([`model`]) with
//! think times fitted per behaviour and, where there are enough samples, per transition
//! ([`fit`]). [`write`] turns the result into a workload file whose comments say how many
//! samples each number rests on.

pub(crate) mod classify;
pub(crate) mod fit;
pub(crate) mod gaps;
pub(crate) mod held;
pub(crate) mod log;
pub(crate) mod model;
pub(crate) mod read;
pub(crate) mod rules;
pub(crate) mod scan;
pub(crate) mod write;

use std::collections::HashMap;
use std::path::PathBuf;

use classify::Protocol;
use scan::{Scan, ScanOptions, Session};

/// A client whose pauses between sessions vary less than this (their standard deviation
/// over their mean), over at least [`PERIODIC_GAPS`] of them, polls at an interval: it is
/// one of a closed population. (Random arrivals' gaps have a CV near 1; with four gaps
/// one in fifty still falls below 0.35 by chance.)
pub(crate) const PERIODIC_CV: f64 = 0.35;
pub(crate) const PERIODIC_GAPS: u64 = 4;
/// Think samples a transition needs for a distribution of its own: as many as `fidelity`
/// needs to judge a transition's think times, so that what it judges, `infer` models.
pub(crate) const TRANSITION_THINK_SAMPLES: usize = 30;

/// What `infer` reads and how it models it.
#[derive(Debug, Clone)]
pub struct InferOptions {
    /// The access logs, read in order as one.
    pub files: Vec<PathBuf>,
    /// The user's names for requests (`--rules`), tried first.
    pub rules: Option<std::sync::Arc<rules::Rules>>,
    /// The logs' format; `None` finds it from the first lines.
    pub format: Option<log::Format>,
    /// The gap that ends a session, µs; `None` finds it from the gaps.
    pub timeout_us: Option<i64>,
    /// The most behaviours a class may have.
    pub max_behaviours: usize,
    /// The seed of the model's fits.
    pub seed: u64,
}

impl InferOptions {
    /// `files` read as `loadmix infer` reads them without options: the format and the
    /// timeout found from the logs, at most 4 behaviours a class, seed 1.
    pub fn of(files: Vec<PathBuf>) -> Self {
        InferOptions {
            files,
            rules: None,
            format: None,
            timeout_us: None,
            max_behaviours: 4,
            seed: 1,
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum InferError {
    #[error(transparent)]
    Scan(#[from] scan::ScanError),
    #[error(
        "the logs hold no whole session of an operation loadmix can run: {sessions} sessions, \
         {cut} of them begun before the log or still going at its end (timeout {timeout}; \
         the log spans {span}); a --session-timeout a little over the longest pause within a \
         session may find some"
    )]
    NoSessions {
        sessions: u64,
        cut: u64,
        timeout: String,
        span: String,
    },
    #[error(
        "every request in the logs comes from one client (told apart by its User-Agent, \
         session cookie, user or address): {sessions} sessions, {cut} of them begun before \
         the log or still going at its end, and a population cannot be modelled from one \
         client; give logs of several, or a format that names them (see `infer` in the book)"
    )]
    OneClient { sessions: u64, cut: u64 },
}

/// How a class's users come.
#[derive(Debug, Clone, PartialEq)]
pub enum Population {
    /// Clients that poll: this many at once, pausing between sessions.
    Closed {
        /// Clients at once.
        count: u32,
        /// The pause between a client's sessions, when there are enough to fit one.
        pause: Option<fit::Fit>,
    },
    /// Sessions arriving at this rate per second, at most this many at once (seen).
    Open {
        /// Sessions a second.
        rate: f64,
        /// The most in progress at once.
        max_concurrency: u32,
        /// Sessions per second in each hour of the log, when it spans two hours or more.
        hourly: Vec<f64>,
    },
}

/// One behaviour of a class.
#[derive(Debug, Clone)]
pub struct Behaviour {
    /// Its states and transitions.
    pub chain: model::Chain,
    /// Its think time, when there are enough gaps to fit one.
    pub think: Option<fit::Fit>,
    /// `(from, to)` local indices with a think of their own.
    pub transition_thinks: Vec<((usize, usize), fit::Fit)>,
}

/// One inferred class.
#[derive(Debug, Clone)]
pub struct Class {
    /// Its name in the written workload.
    pub name: String,
    /// The protocol its requests were.
    pub protocol: Protocol,
    /// How its users come.
    pub population: Population,
    /// Global op index of each local one.
    pub ops: Vec<usize>,
    /// Its behaviours, a mixture of Markov chains.
    pub behaviours: Vec<Behaviour>,
    /// The BIC of each number of behaviours tried.
    pub bic: Vec<(usize, f64)>,
    /// Whole sessions it rests on.
    pub sessions: usize,
    /// Sessions the log's edges cut, left out.
    pub cut: usize,
    /// Distinct clients seen.
    pub clients: usize,
    /// The most operations of a whole session.
    pub max_ops: usize,
    /// The items (events, entries) each user must hold before its first request for
    /// its sessions to act as the log's did (see `held.rs`); 0 when none.
    pub held: u64,
    /// The class's think time, over all its gaps.
    pub think: Option<fit::Fit>,
    /// What was taken off every gap before fitting (its 1st percentile), µs.
    pub floor_us: f64,
}

/// What `infer` found.
#[derive(Debug)]
pub struct Inferred {
    /// The logs' requests, sessions and what they were.
    pub scan: Scan,
    /// The classes found.
    pub classes: Vec<Class>,
    /// The path before `/dav/`, `/mc/`, `/atom/`, `/cmp/` in the log (`/cosmo`).
    pub context: String,
}

/// Read the logs and infer their workload.
pub fn infer(o: &InferOptions) -> Result<Inferred, InferError> {
    let s = scan::scan(&ScanOptions {
        files: o.files.clone(),
        rules: o.rules.clone(),
        format: o.format,
        timeout_us: o.timeout_us,
        seed: o.seed,
    })?;
    let periodic = periodic_clients(&s);
    let floor = gap_floor(&s);
    let mut protocols: Vec<Protocol> = s.ops.iter().map(|d| d.protocol).collect();
    protocols.sort();
    protocols.dedup();
    let groups: Vec<(Protocol, bool)> = protocols
        .into_iter()
        .flat_map(|p| [(p, true), (p, false)])
        .collect();
    // The classes are fitted on one thread per core, each taking the next class not yet
    // taken: they share nothing but the scan they read, and fitting is a third of the
    // command's time on a large log. No more at once than cores, so the memory held is
    // that of as many fits. Put back in the groups' order, as one by one.
    let next = std::sync::atomic::AtomicUsize::new(0);
    let threads = std::thread::available_parallelism()
        .map_or(1, |n| n.get())
        .clamp(1, groups.len().max(1));
    let mut fitted: Vec<(usize, Class)> = std::thread::scope(|scope| {
        let workers: Vec<_> = (0..threads)
            .map(|_| {
                let (s, periodic, groups, next) = (&s, &periodic, &groups, &next);
                scope.spawn(move || {
                    let mut done = Vec::new();
                    loop {
                        let i = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                        let Some(&(p, closed)) = groups.get(i) else {
                            return done;
                        };
                        let group: Vec<&Session> = s
                            .sessions
                            .iter()
                            .filter(|x| x.protocol == p && periodic[x.client as usize] == closed)
                            .collect();
                        if let Some(c) = class_of(s, p, closed, &group, o, floor) {
                            done.push((i, c));
                        }
                    }
                })
            })
            .collect();
        workers
            .into_iter()
            .flat_map(|w| w.join().unwrap_or_else(|e| std::panic::resume_unwind(e)))
            .collect()
    });
    fitted.sort_by_key(|(i, _)| *i);
    let classes: Vec<Class> = fitted.into_iter().map(|(_, c)| c).collect();
    // One client's sessions, however cut, tell nothing of a population.
    if s.between.len() == 1 {
        return Err(InferError::OneClient {
            sessions: s.sessions_seen,
            cut: s.sessions_cut,
        });
    }
    if classes.is_empty() {
        return Err(InferError::NoSessions {
            sessions: s.sessions_seen,
            cut: s.sessions_cut,
            timeout: s.timeouts(),
            span: write::duration(s.last_us.saturating_sub(s.first_us).max(0) as f64),
        });
    }
    let context = context(&s);
    Ok(Inferred {
        scan: s,
        classes,
        context,
    })
}

/// Per client: whether it comes back at a steady interval.
fn periodic_clients(s: &Scan) -> Vec<bool> {
    s.between
        .iter()
        .map(|&(n, mean, m2)| {
            n >= PERIODIC_GAPS && mean > 0.0 && {
                let sd = (m2 / (n - 1) as f64).max(0.0).sqrt();
                sd / mean < PERIODIC_CV
            }
        })
        .collect()
}

fn context(s: &Scan) -> String {
    for d in &s.ops {
        let path = d.example.split('?').next().unwrap_or("");
        for mark in ["/dav/", "/mc/", "/atom/", "/cmp/"] {
            if let Some(i) = path.find(mark) {
                return path[..i].to_string();
            }
        }
    }
    String::new()
}

/// The class of protocol `p`'s closed or open sessions, if it has any whole one.
fn class_of(
    s: &Scan,
    p: Protocol,
    closed: bool,
    group: &[&Session],
    o: &InferOptions,
    floor: f64,
) -> Option<Class> {
    let whole: Vec<&Session> = group.iter().copied().filter(|x| !x.cut).collect();
    if whole.is_empty() {
        return None;
    }
    // Local operation indices: those the whole sessions use, in the log's order.
    let mut ops: Vec<usize> = Vec::new();
    for x in &whole {
        for r in &x.requests {
            if !ops.contains(&(r.op as usize)) {
                ops.push(r.op as usize);
            }
        }
    }
    ops.sort_unstable();
    let local: HashMap<usize, usize> = ops.iter().enumerate().map(|(i, &g)| (g, i)).collect();
    let n = ops.len();
    let seqs: Vec<Vec<usize>> = whole
        .iter()
        .map(|x| x.requests.iter().map(|r| local[&(r.op as usize)]).collect())
        .collect();
    let paths: Vec<model::Path> = seqs.iter().filter_map(|q| model::Path::of(q, n)).collect();
    let mix = model::fit(&paths, n, o.max_behaviours.max(1), o.seed)?;
    let thinks_of = |pick: &dyn Fn(usize) -> bool| -> Vec<(usize, usize, f64)> {
        whole
            .iter()
            .enumerate()
            .filter(|(i, _)| pick(*i))
            .flat_map(|(_, x)| {
                s.thinks_of(x)
                    .into_iter()
                    .map(|(a, b, t)| (local[&(a as usize)], local[&(b as usize)], t))
                    .collect::<Vec<_>>()
            })
            .collect()
    };
    // The gaps' floor is the client's own work between an answer and its next request,
    // not thinking: loadmix does that work too and adds its own, so it is taken off every
    // gap before the think times are fitted. It is the log's, not the class's: a class
    // whose users think for seconds has a low percentile that is thinking, and a replay
    // adds the same work to every class's gaps. The caller computes it once.
    let thinks_of = |pick: &dyn Fn(usize) -> bool| -> Vec<(usize, usize, f64)> {
        thinks_of(pick)
            .into_iter()
            .map(|(a, b, t)| (a, b, (t - floor).max(0.0)))
            .collect()
    };
    let all = thinks_of(&|_| true);
    let class_think = fit::best(&all.iter().map(|t| t.2).collect::<Vec<_>>());
    let behaviours = mix
        .chains
        .iter()
        .enumerate()
        .map(|(k, chain)| {
            let mine = if mix.assignment.is_empty() {
                Vec::new()
            } else {
                thinks_of(&|i| mix.assignment.get(i) == Some(&k))
            };
            let think = fit::best(&mine.iter().map(|t| t.2).collect::<Vec<_>>()).or(class_think);
            let mut by: HashMap<(usize, usize), Vec<f64>> = HashMap::new();
            for (a, b, t) in &mine {
                by.entry((*a, *b)).or_default().push(*t);
            }
            let mut transition_thinks: Vec<((usize, usize), fit::Fit)> = by
                .into_iter()
                .filter(|(_, v)| v.len() >= TRANSITION_THINK_SAMPLES)
                // Only where the transition's own think differs from the behaviour's.
                .filter(|(_, v)| think.is_none_or(|t| differs_from(v, t.median)))
                .filter_map(|(k, v)| fit::best(&v).map(|f| (k, f)))
                .collect();
            transition_thinks.sort_by_key(|(k, _)| *k);
            Behaviour {
                chain: chain.clone(),
                think,
                transition_thinks,
            }
        })
        .collect();
    let span = (s.last_us - s.first_us).max(1) as f64 / 1e6;
    let clients: Vec<u32> = {
        let mut c: Vec<u32> = group.iter().map(|x| x.client).collect();
        c.sort_unstable();
        c.dedup();
        c
    };
    let population = if closed {
        // As many users as the clients present on average over the log.
        let mut spans: HashMap<u32, (i64, i64)> = HashMap::new();
        for x in group {
            let e = spans.entry(x.client).or_insert((i64::MAX, i64::MIN));
            e.0 = e.0.min(x.start_us());
            e.1 = e.1.max(x.end_us());
        }
        let present: f64 = spans.values().map(|(a, b)| (b - a) as f64 / 1e6).sum();
        Population::Closed {
            count: ((present / span).round() as u32).max(1),
            pause: fit::best(
                &pauses(group)
                    .iter()
                    .map(|p| (p - floor).max(0.0))
                    .collect::<Vec<_>>(),
            ),
        }
    } else {
        // The kept sessions may be a sample of those seen: rates are scaled back up.
        let scale = s.sessions_seen as f64 / s.sessions.len().max(1) as f64;
        Population::Open {
            rate: group.len() as f64 * scale / span,
            max_concurrency: concurrency_peak(group).saturating_mul(2).max(10),
            hourly: hourly(group, s.first_us, s.last_us, scale),
        }
    };
    let name = format!(
        "{}_{}",
        p.name(),
        if closed { "clients" } else { "visitors" }
    );
    Some(Class {
        name,
        protocol: p,
        population,
        ops,
        behaviours,
        bic: mix.bic,
        sessions: whole.len(),
        cut: group.len() - whole.len(),
        clients: clients.len(),
        max_ops: seqs.iter().map(Vec::len).max().unwrap_or(1),
        held: held_before(s, p, closed, group),
        think: class_think,
        floor_us: floor,
    })
}

/// The log's floor of the gaps between an answer and the next request (µs), over every
/// whole session: the clients' own work between requests (see [`fit::floor`]).
pub(crate) fn gap_floor(log: &Scan) -> f64 {
    let gaps: Vec<f64> = log
        .sessions
        .iter()
        .filter(|s| !s.cut)
        .flat_map(|s| log.thinks_of(s).into_iter().map(|(_, _, t)| t))
        .collect();
    fit::floor(&gaps)
}

/// Whether a transition's think times `v` stand apart from a behaviour's, whose median
/// is `median`: by a sign test (under the same distribution each falls above the median
/// with probability ½; more than three standard deviations off that says otherwise),
/// and by more than a tenth, so that a huge log does not give every transition a think
/// of its own for a difference nobody would see.
fn differs_from(v: &[f64], median: f64) -> bool {
    let n = v.len() as f64;
    let above = v.iter().filter(|x| **x > median).count() as f64;
    let z = (above - n / 2.0) / (n.sqrt() / 2.0);
    let mut sorted = v.to_vec();
    sorted.sort_by(f64::total_cmp);
    let own = sorted[sorted.len() / 2];
    let r = own / median.max(1.0);
    z.abs() > 3.0 && !(0.9..=1.0 / 0.9).contains(&r)
}

/// The items each user of a class must start with (`held.rs`): the most any one needed,
/// a closed client over all its sessions (it keeps what it made), an open one per
/// session (each arrival is a new user).
fn held_before(s: &Scan, p: Protocol, closed: bool, group: &[&Session]) -> u64 {
    let items = match p {
        Protocol::Caldav => held::CALDAV,
        Protocol::Atom => held::ATOM,
        Protocol::Morse | Protocol::Http => return 0,
    };
    let names = |x: &Session| -> Vec<&str> {
        x.requests
            .iter()
            .map(|r| s.ops[r.op as usize].name.as_str())
            .collect()
    };
    if !closed {
        return group
            .iter()
            .map(|x| held::needed(&items, names(x)))
            .max()
            .unwrap_or(0);
    }
    let mut by_client: HashMap<u32, Vec<&Session>> = HashMap::new();
    for x in group {
        by_client.entry(x.client).or_default().push(x);
    }
    by_client
        .into_values()
        .map(|mut xs| {
            xs.sort_by_key(|x| x.start_us());
            held::needed(&items, xs.iter().flat_map(|x| names(x)))
        })
        .max()
        .unwrap_or(0)
}

/// Sessions started per second in each whole or partial hour from `first` to `last`;
/// empty for a log shorter than two hours (or longer than a year).
fn hourly(group: &[&Session], first: i64, last: i64, scale: f64) -> Vec<f64> {
    const HOUR: i64 = 3_600_000_000;
    let hours = (last - first) / HOUR + 1;
    if !(3..=24 * 366).contains(&hours) {
        return Vec::new();
    }
    let mut n = vec![0f64; hours as usize];
    for x in group {
        if let Some(h) = n.get_mut(((x.start_us() - first) / HOUR) as usize) {
            *h += scale;
        }
    }
    // The last hour is partial: its rate is over what the log covers of it.
    let tail = ((last - first) % HOUR).max(1) as f64 / 1e6;
    let len = n.len();
    n.iter()
        .enumerate()
        .map(|(i, c)| c / if i + 1 == len { tail } else { 3600.0 })
        .collect()
}

/// The pauses between one client's consecutive sessions (µs).
fn pauses(group: &[&Session]) -> Vec<f64> {
    let mut by: HashMap<u32, Vec<(i64, i64)>> = HashMap::new();
    for x in group {
        by.entry(x.client)
            .or_default()
            .push((x.start_us(), x.end_us()));
    }
    let mut out = Vec::new();
    for v in by.values_mut() {
        v.sort_unstable();
        for w in v.windows(2) {
            out.push((w[1].0 - w[0].1).max(0) as f64);
        }
    }
    out
}

/// The most sessions open at once.
pub(crate) fn concurrency_peak(group: &[&Session]) -> u32 {
    let mut edges: Vec<(i64, i32)> = group
        .iter()
        .flat_map(|x| [(x.start_us(), 1), (x.end_us(), -1)])
        .collect();
    edges.sort_unstable();
    let (mut now, mut peak) = (0i32, 0i32);
    for (_, d) in edges {
        now += d;
        peak = peak.max(now);
    }
    peak.max(0) as u32
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_transition_gets_its_own_think_only_when_it_stands_apart() {
        // A fixed 200 ms after a delete, in a behaviour whose median is 300 ms.
        assert!(differs_from(&[200_000.0; 40], 300_000.0));
        // Spread around the behaviour's median: the same think.
        let around: Vec<f64> = (0..40).map(|i| 250_000.0 + 2_500.0 * i as f64).collect();
        assert!(!differs_from(&around, 300_000.0));
        // Significant, but within a tenth: not worth a think of its own.
        assert!(!differs_from(&[290_000.0; 10_000], 300_000.0));
    }
}
