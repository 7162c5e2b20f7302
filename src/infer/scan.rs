//! From log files to sessions, in two streamed passes. The first classifies every line and
//! gathers the gaps between one client's requests, from which the session timeout is
//! taken (the valley between think times and the pauses between sessions) unless one is
//! given. The second cuts each client's requests into sessions at that timeout. Only
//! open sessions are held while reading; finished ones are kept up to [`MAX_SESSIONS`]
//! (a uniform sample beyond) for the model, while every count stays exact.
//!
//! A client is a loadmix user by its User-Agent (`loadmix/VERSION (run RUN; CLASS#N)`,
//! however many users share an account), else its session cookie, else its authenticated
//! user, else its address and user agent, and one protocol: a key speaking two protocols
//! is two clients.

use std::collections::HashMap;
use std::io::BufReader;
use std::path::{Path, PathBuf};

use rand::rngs::Xoshiro256PlusPlus;
use rand::{RngExt, SeedableRng};

use super::classify::{Kind, Protocol, classify};
use super::log::{self, Entry, Format, Line};

/// Finished sessions kept for the model; a uniform sample of the rest beyond this.
pub(crate) const MAX_SESSIONS: usize = 200_000;
/// Requests of one session kept; a longer session is cut there (and counted).
pub(crate) const MAX_SESSION_OPS: usize = 10_000;
/// Distinct clients tracked; requests of further clients are counted, not sessionised.
pub(crate) const MAX_CLIENTS: usize = 2_000_000;
/// Distinct operations; requests of further ones are counted as unclassified.
pub(crate) const MAX_OPS: usize = 256;
/// Lines refused that are shown, per file.
const SHOWN: usize = 5;

#[derive(Debug, thiserror::Error)]
pub enum ScanError {
    #[error("{file}: {source}")]
    Io {
        file: String,
        source: std::io::Error,
    },
    #[error("{file}: {source}")]
    File {
        file: String,
        source: crate::files::FileError,
    },
    #[error("{0}: no line of it is a request")]
    Empty(String),
}

/// One operation the log showed.
#[derive(Debug, Clone, PartialEq)]
pub struct OpDef {
    pub protocol: Protocol,
    pub name: String,
    /// http: method and path template, and the first target seen.
    pub template: Option<(String, String)>,
    pub example: String,
}

/// One request of a session.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Request {
    pub op: u16,
    pub at_us: i64,
    pub done_us: i64,
}

/// One client's run of requests with no gap longer than the timeout.
#[derive(Debug, Clone, PartialEq)]
pub struct Session {
    pub client: u32,
    pub protocol: Protocol,
    pub requests: Vec<Request>,
    /// Begun before the log did or still going when it ended (within one timeout of its
    /// first or last line): its length is not known.
    pub cut: bool,
}

impl Session {
    pub fn start_us(&self) -> i64 {
        self.requests.first().map_or(0, |r| r.at_us)
    }
    pub fn end_us(&self) -> i64 {
        self.requests.iter().map(|r| r.done_us).max().unwrap_or(0)
    }
}

/// Two numbers in [0, 1) fixed by `seed` (splitmix64), for a jitter that is the same on
/// every reading of one log.
fn unit_pair(seed: u64) -> (f64, f64) {
    let mix = |mut z: u64| {
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    };
    let a = mix(seed.wrapping_add(0x9e37_79b9_7f4a_7c15));
    let b = mix(a);
    (
        (a >> 11) as f64 / (1u64 << 53) as f64,
        (b >> 11) as f64 / (1u64 << 53) as f64,
    )
}

impl Scan {
    /// The think times of `x` (µs): from each answer to the next request, never negative.
    /// A log whose clock counts whole seconds knows a gap only to within a second either
    /// way: each is spread over that interval (a triangular jitter, fixed by the session
    /// and the step), so that fits and tests see a distribution rather than steps.
    pub fn thinks_of(&self, x: &Session) -> Vec<(u16, u16, f64)> {
        x.requests
            .windows(2)
            .enumerate()
            .map(|(i, w)| {
                let mut gap = (w[1].at_us - w[0].done_us) as f64;
                if !self.subsecond {
                    let seed = (x.start_us() as u64) ^ (u64::from(x.client) << 32) ^ i as u64;
                    let (u1, u2) = unit_pair(seed);
                    gap += (u1 - u2) * 1e6;
                }
                (w[0].op, w[1].op, gap.max(0.0))
            })
            .collect()
    }
}

/// What one file gave.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct FileCounts {
    pub file: String,
    pub format: Option<&'static str>,
    pub lines: u64,
    pub refused: u64,
    pub too_long: u64,
    /// `file:line:column: why`, the first few.
    pub shown: Vec<String>,
}

/// Everything read from the logs.
#[derive(Debug, Default)]
pub struct Scan {
    pub files: Vec<FileCounts>,
    pub ops: Vec<OpDef>,
    /// Requests per op, exact.
    pub op_requests: Vec<u64>,
    pub setup: std::collections::BTreeMap<&'static str, u64>,
    pub statics: u64,
    /// Requests no rule names (a method that is no HTTP token).
    pub unclassified: u64,
    /// Requests past [`MAX_OPS`] or [`MAX_CLIENTS`].
    pub untracked: u64,
    pub first_us: i64,
    pub last_us: i64,
    pub timeout_us: i64,
    /// How the timeout was found.
    pub timeout_from: String,
    /// Whether any time in the logs has a fraction of a second (else think times are
    /// known to the second only).
    pub subsecond: bool,
    /// Finished sessions (a uniform sample past [`MAX_SESSIONS`]).
    pub sessions: Vec<Session>,
    pub sessions_seen: u64,
    pub sessions_cut: u64,
    /// Per client: the gaps between its sessions (end to next start), count, mean, M2.
    pub between: Vec<(u64, f64, f64)>,
    pub client_protocol: Vec<Protocol>,
}

/// What `scan` is told.
#[derive(Debug, Clone)]
pub(crate) struct ScanOptions {
    pub files: Vec<PathBuf>,
    /// The user's rules, tried before the built-in classifiers.
    pub rules: Option<std::sync::Arc<super::rules::Rules>>,
    pub format: Option<Format>,
    pub timeout_us: Option<i64>,
    pub seed: u64,
}

/// A request reduced to what sessions need.
struct Seen {
    client: String,
    protocol: Protocol,
    op: OpDef,
    /// The request target in origin form.
    target: String,
    at_us: i64,
    done_us: i64,
}

/// Read every line of every file, calling `each` with what each request was.
fn read_all(
    o: &ScanOptions,
    counts: &mut Vec<FileCounts>,
    mut each: impl FnMut(Result<Seen, Kind>),
) -> Result<(), ScanError> {
    counts.clear();
    for path in &o.files {
        let io = |source| ScanError::Io {
            file: path.display().to_string(),
            source,
        };
        let f =
            crate::files::open_stream(path, "an access log").map_err(|source| ScanError::File {
                file: path.display().to_string(),
                source,
            })?;
        let mut r = BufReader::with_capacity(256 << 10, f);
        let mut c = FileCounts {
            file: path.display().to_string(),
            ..Default::default()
        };
        let mut format = o.format;
        let mut buf = Vec::new();
        loop {
            let line = match log::next_line(&mut r, &mut buf).map_err(io)? {
                Line::End => break,
                Line::TooLong => {
                    c.lines += 1;
                    c.too_long += 1;
                    c.refused += 1;
                    note(
                        &mut c,
                        path,
                        1,
                        &format!("longer than {} bytes", log::MAX_LINE),
                    );
                    continue;
                }
                Line::Text(t) => t,
            };
            c.lines += 1;
            if line.iter().all(u8::is_ascii_whitespace) {
                continue;
            }
            let fmt = *format.get_or_insert_with(|| Format::detect(&line));
            c.format = Some(match fmt {
                Format::Clf => "common/combined",
                Format::Json => "json lines",
            });
            match log::parse(&line, fmt) {
                Ok(e) => each(seen(&e, o.rules.as_deref())),
                Err(e) => {
                    c.refused += 1;
                    note(&mut c, path, e.column, &e.why);
                }
            }
            buf = line;
        }
        if c.lines == c.refused {
            return Err(ScanError::Empty(c.file));
        }
        counts.push(c);
    }
    Ok(())
}

fn note(c: &mut FileCounts, path: &Path, column: usize, why: &str) {
    if c.shown.len() < SHOWN {
        c.shown
            .push(format!("{}:{}:{column}: {why}", path.display(), c.lines));
    }
}

fn seen(e: &Entry, rules: Option<&super::rules::Rules>) -> Result<Seen, Kind> {
    // loadmix marks what its users send off the clock: set-up, whatever it looks like.
    if loadmix_setup(e.agent.as_deref()) {
        return Err(Kind::SetUp("loadmix set-up"));
    }
    let target = super::classify::origin_form(&e.target).ok_or(Kind::Unclassified)?;
    let path = target.split(['?', '#']).next().unwrap_or("");
    let query = target.split_once('?').map(|(_, q)| q);
    let kind = rules
        .filter(|_| super::classify::is_method(&e.method))
        .and_then(|r| r.classify(&e.method, path, query))
        .unwrap_or_else(|| classify(&e.method, path, query, e.status));
    match kind {
        Kind::Op {
            protocol,
            name,
            template,
        } => {
            let who = loadmix_user(e.agent.as_deref())
                .map(|u| format!("l {u}"))
                .or_else(|| e.cookie.as_ref().map(|c| format!("c {c}")))
                .or_else(|| e.user.as_ref().map(|u| format!("u {u}")))
                .unwrap_or_else(|| format!("a {} {}", e.host, e.agent.as_deref().unwrap_or("-")));
            Ok(Seen {
                client: format!("{} {who}", protocol.name()),
                protocol,
                op: OpDef {
                    protocol,
                    name,
                    template,
                    // Filled in only for an operation seen the first time.
                    example: String::new(),
                },
                target: target.to_string(),
                at_us: e.at_us,
                done_us: e.done_us(),
            })
        }
        other => Err(other),
    }
}

/// Bins of the gap histogram: a twentieth of a decade each, from 1 µs to 10^11 µs.
const BINS: usize = 220;

fn bin(gap_us: i64) -> usize {
    if gap_us <= 1 {
        return 0;
    }
    (((gap_us as f64).log10() * 20.0) as usize).min(BINS - 1)
}

/// Bins a gap count is smoothed over, either side: a tenth of a decade.
const SMOOTH: usize = 2;

/// The timeout between the two kinds of gap in `hist`: think times within a session and
/// pauses between sessions, from `from_us` on; `None` when the gaps show no such valley.
///
/// The valley is the bin whose smoothed count lies deepest below the lower of the two
/// highest peaks either side of it (its prominence), the peaks at least half a decade
/// apart and the valley under half the lower peak. A split that maximises the variance
/// between the groups (Otsu) is not used: exponential think times spread over two decades
/// on a log scale and that split then falls inside them.
fn valley(hist: &[u64; BINS], from_us: i64) -> Option<i64> {
    let total: u64 = hist.iter().sum();
    if total < 10 {
        return None;
    }
    let smooth: Vec<u64> = (0..BINS)
        .map(|i| {
            hist[i.saturating_sub(SMOOTH)..=(i + SMOOTH).min(BINS - 1)]
                .iter()
                .sum()
        })
        .collect();
    let peak = |r: std::ops::Range<usize>| {
        r.clone()
            .map(|j| (smooth[j], j))
            .max_by(|a, b| a.0.cmp(&b.0).then(b.1.cmp(&a.1)))
    };
    let mut best: Option<(u64, usize, usize, usize)> = None;
    let start = bin(from_us).max(1);
    for (i, &here) in smooth.iter().enumerate().take(BINS - 1).skip(start) {
        let (Some((left, l)), Some((right, r))) = (peak(0..i), peak(i + 1..BINS)) else {
            continue;
        };
        let lower = left.min(right);
        let deep = here * 2 < lower && r - l >= 10 && lower >= 5;
        let prominence = lower - here.min(lower);
        if deep && best.is_none_or(|b| prominence > b.0) {
            best = Some((prominence, i, l, r));
        }
    }
    let (_, _, l, r) = best?;
    // The middle of the widest run of the fewest gaps between the two peaks, so that
    // neither group's tail is cut.
    let fewest = smooth[l..=r].iter().copied().min()?;
    let (mut run, mut widest) = (None::<usize>, (l, l));
    for i in l..=r + 1 {
        match (run, i <= r && smooth.get(i) == Some(&fewest)) {
            (None, true) => run = Some(i),
            (Some(a), false) => {
                if i - a > widest.1 - widest.0 {
                    widest = (a, i);
                }
                run = None;
            }
            _ => {}
        }
    }
    let x = |i: usize| i as f64 / 20.0;
    Some(10f64.powf((x(widest.0) + x(widest.1)) / 2.0).round() as i64)
}

/// A web analytics session's usual timeout, when the log shows none.
const DEFAULT_TIMEOUT_US: i64 = 30 * 60 * 1_000_000;

/// Read the logs twice: the timeout, then the sessions.
pub(crate) fn scan(o: &ScanOptions) -> Result<Scan, ScanError> {
    let mut s = Scan {
        first_us: i64::MAX,
        last_us: i64::MIN,
        ..Default::default()
    };
    // Pass 1: operations, set-up counts, log span and the gap histogram.
    // Gaps from an answer to the next request, and from one request to the next: a log
    // whose clock counts whole seconds can only tell the second.
    let mut hist = [0u64; BINS];
    let mut hist_arrivals = [0u64; BINS];
    let mut last: HashMap<String, (i64, i64)> = HashMap::new();
    let mut counts = Vec::new();
    read_all(o, &mut counts, |r| match r {
        Ok(x) => {
            s.first_us = s.first_us.min(x.at_us);
            s.last_us = s.last_us.max(x.done_us);
            s.subsecond |= x.at_us % 1_000_000 != 0;
            if let Some((at, done)) = last.get_mut(&x.client) {
                hist[bin(x.at_us - *done)] += 1;
                // The same second: half of the clock's resolution.
                hist_arrivals[bin((x.at_us - *at).max(500_000))] += 1;
                *at = (*at).max(x.at_us);
                *done = (*done).max(x.done_us);
            } else if last.len() < MAX_CLIENTS {
                last.insert(x.client, (x.at_us, x.done_us));
            }
        }
        Err(Kind::SetUp(what)) => *s.setup.entry(what).or_default() += 1,
        Err(Kind::Unclassified) => s.unclassified += 1,
        Err(_) => s.statics += 1,
    })?;
    drop(last);
    // Whole seconds leave the bins between 1 s and 2 s, 2 s and 3 s... empty: the valley
    // is looked for where a bin spans more than a second.
    let found = if s.subsecond {
        valley(&hist, 0)
    } else {
        valley(&hist_arrivals, 10_000_000)
    };
    (s.timeout_us, s.timeout_from) = match (o.timeout_us, found) {
        (Some(t), _) => (t, "given".into()),
        (None, Some(t)) => (
            t,
            "the valley between think times and pauses in the gaps".into(),
        ),
        (None, None) => (
            DEFAULT_TIMEOUT_US,
            "30 min: the gaps show no valley between think times and pauses".into(),
        ),
    };
    // Pass 2: sessions.
    let mut clients: HashMap<String, u32> = HashMap::new();
    let mut open: HashMap<u32, Session> = HashMap::new();
    let mut last_end: Vec<i64> = Vec::new();
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(o.seed);
    let mut since_sweep = 0u32;
    let mut now = i64::MIN;
    let mut op_index: HashMap<Protocol, HashMap<String, usize>> = HashMap::new();
    read_all(o, &mut counts, |r| {
        let Ok(x) = r else { return };
        let known = op_index
            .get(&x.protocol)
            .and_then(|m| m.get(x.op.name.as_str()));
        let op = match known {
            Some(&i) => i,
            None if s.ops.len() < MAX_OPS => {
                let mut d = x.op;
                d.example = x.target.chars().take(2048).collect();
                op_index
                    .entry(d.protocol)
                    .or_default()
                    .insert(d.name.clone(), s.ops.len());
                s.ops.push(d);
                s.op_requests.push(0);
                s.ops.len() - 1
            }
            None => {
                s.untracked += 1;
                return;
            }
        };
        let client = match clients.get(&x.client) {
            Some(&c) => c,
            None if clients.len() < MAX_CLIENTS => {
                let c = clients.len() as u32;
                clients.insert(x.client, c);
                s.between.push((0, 0.0, 0.0));
                s.client_protocol.push(x.protocol);
                last_end.push(i64::MIN);
                c
            }
            None => {
                s.untracked += 1;
                return;
            }
        };
        s.op_requests[op] += 1;
        now = now.max(x.at_us);
        let req = Request {
            op: op as u16,
            at_us: x.at_us,
            done_us: x.done_us,
        };
        let timeout = s.timeout_us;
        let ends = open
            .get(&client)
            .is_some_and(|o| x.at_us - o.end_us() > timeout || o.requests.len() >= MAX_SESSION_OPS);
        if ends && let Some(done) = open.remove(&client) {
            finish(done, &mut s, &mut last_end, &mut rng);
        }
        open.entry(client)
            .or_insert_with(|| Session {
                client,
                protocol: x.protocol,
                requests: Vec::new(),
                cut: false,
            })
            .requests
            .push(req);
        since_sweep += 1;
        if since_sweep >= 10_000 {
            since_sweep = 0;
            let idle: Vec<u32> = open
                .iter()
                .filter(|(_, o)| now - o.end_us() > 2 * timeout)
                .map(|(c, _)| *c)
                .collect();
            for c in idle {
                if let Some(done) = open.remove(&c) {
                    finish(done, &mut s, &mut last_end, &mut rng);
                }
            }
        }
    })?;
    let mut rest: Vec<Session> = open.into_values().collect();
    rest.sort_by_key(|x| (x.start_us(), x.client));
    for done in rest {
        finish(done, &mut s, &mut last_end, &mut rng);
    }
    s.files = counts;
    Ok(s)
}

/// A session is done: mark it cut if the log's edges cut it, note the gap since the
/// client's last one, keep it (or sample it in).
fn finish(mut done: Session, s: &mut Scan, last_end: &mut [i64], rng: &mut Xoshiro256PlusPlus) {
    done.requests.sort_by_key(|r| r.at_us);
    let (start, end) = (done.start_us(), done.end_us());
    done.cut = start - s.first_us <= s.timeout_us
        || s.last_us - end <= s.timeout_us
        || done.requests.len() >= MAX_SESSION_OPS;
    let c = done.client as usize;
    if last_end[c] != i64::MIN {
        let gap = (start - last_end[c]).max(0) as f64 / 1e6;
        let (n, mean, m2) = &mut s.between[c];
        *n += 1;
        let d = gap - *mean;
        *mean += d / *n as f64;
        *m2 += d * (gap - *mean);
    }
    last_end[c] = end;
    s.sessions_seen += 1;
    if done.cut {
        s.sessions_cut += 1;
    }
    if s.sessions.len() < MAX_SESSIONS {
        s.sessions.push(done);
    } else {
        let k = rng.random_range(0..s.sessions_seen);
        if let Some(slot) = s.sessions.get_mut(k as usize) {
            *slot = done;
        }
    }
}

/// The user a loadmix User-Agent names (`run RUN; CLASS#N`), when the agent is loadmix's
/// default one: each of its users is a client of its own.
/// Whether `agent` is a loadmix user's, sent off the clock (`...; setup)`).
fn loadmix_setup(agent: Option<&str>) -> bool {
    loadmix_user(agent).is_some_and(|u| u.ends_with("; setup"))
}

fn loadmix_user(agent: Option<&str>) -> Option<&str> {
    let rest = agent?.strip_prefix("loadmix/")?;
    let inside = rest.split_once(" (")?.1.strip_suffix(')')?;
    let (run, user) = inside.split_once("; ")?;
    (run.starts_with("run ") && user.contains('#')).then_some(inside)
}

#[cfg(test)]
mod tests {

    #[test]
    fn a_loadmix_user_agent_names_its_user_and_nothing_else_does() {
        let agent = "loadmix/0.1.0 (run 20261202T150007Z-ab2b98; caldav#7)";
        assert_eq!(
            loadmix_user(Some(agent)),
            Some("run 20261202T150007Z-ab2b98; caldav#7")
        );
        assert_eq!(loadmix_user(Some("Mozilla/5.0 (X11; Linux)")), None);
        assert_eq!(loadmix_user(Some("loadmix/0.1.0")), None);
        assert_eq!(loadmix_user(Some("loadmix/0.1.0 (something else)")), None);
        assert_eq!(loadmix_user(None), None);
        // Set-up is told apart; the workload's own requests are not set-up.
        assert!(loadmix_setup(Some(
            "loadmix/0.1.0 (run 20261202T150007Z-ab2b98; caldav#7; setup)"
        )));
        assert!(!loadmix_setup(Some(agent)));
        assert!(!loadmix_setup(Some("DAVx5/4.3 (setup)")));
    }

    use super::*;

    #[test]
    fn the_timeout_is_the_valley_between_two_kinds_of_gap() {
        let mut h = [0u64; BINS];
        // Think times around 20 ms, pauses around 2 s.
        for g in [15_000, 20_000, 25_000, 18_000, 22_000] {
            h[bin(g)] += 100;
        }
        for g in [1_500_000, 2_000_000, 2_500_000] {
            h[bin(g)] += 30;
        }
        let t = valley(&h, 0).unwrap();
        assert!((25_000..1_500_000).contains(&t), "{t}");
        // One kind of gap only: no valley.
        let mut one = [0u64; BINS];
        for g in [15_000, 20_000, 25_000, 30_000] {
            one[bin(g)] += 100;
        }
        assert_eq!(valley(&one, 0), None);
    }

    #[test]
    fn exponential_think_times_are_not_split_from_themselves() {
        // Think times exponential of mean 150 ms spread over two decades on a log scale;
        // pauses of 2-3 s. The timeout belongs between them, not inside the think times.
        let mut h = [0u64; BINS];
        let n = 600;
        for k in 0..n {
            let q = (k as f64 + 0.5) / n as f64;
            h[bin((-150_000.0 * (1.0 - q).ln()) as i64)] += 1;
        }
        for k in 0..120 {
            h[bin(2_000_000 + k * 8_000)] += 1;
        }
        let t = valley(&h, 0).unwrap();
        assert!((900_000..2_000_000).contains(&t), "{t}");
    }
}
