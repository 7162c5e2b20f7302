//! From log files to sessions, in two passes. The first streams the files, classifies
//! every line and gathers the gaps between one client's requests, from which the session
//! timeout is taken (the valley between think times and the pauses between sessions)
//! unless one is given; it keeps each request as its client's and operation's numbers,
//! up to [`MAX_KEPT`] of them. The second cuts each client's requests into sessions at
//! that timeout, from what the first kept, or from the files read again past it. Only
//! open sessions are held while cutting; finished ones are kept up to [`MAX_SESSIONS`]
//! (a uniform sample beyond) for the model, while every count stays exact.
//!
//! A client is a loadmix user by its User-Agent (`loadmix/VERSION (run RUN; CLASS#N)`,
//! however many users share an account), else its session cookie, else its authenticated
//! user, else its address and user agent, and one protocol: a key speaking two protocols
//! is two clients.

use std::collections::HashMap;
use std::path::PathBuf;

use rand::rngs::Xoshiro256PlusPlus;
use rand::{RngExt, SeedableRng};

use super::classify::{Kind, Protocol};
use super::gaps::{BINS, Gaps, bin, cut_of};
use super::log::Format;
use super::read::{Seen, read_all};

pub use super::gaps::Cut;
pub(crate) use super::read::{FileCounts, OpDef, ScanError};

/// Finished sessions kept for the model; a uniform sample of the rest beyond this.
pub(crate) const MAX_SESSIONS: usize = 200_000;
/// Requests of one session kept; a longer session is cut there (and counted).
pub(crate) const MAX_SESSION_OPS: usize = 10_000;
/// Distinct clients tracked; requests of further clients are counted, not sessionised.
pub(crate) const MAX_CLIENTS: usize = 2_000_000;
/// Distinct operations; requests of further ones are counted as unclassified.
pub(crate) const MAX_OPS: usize = 256;

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
    /// How each group of clients' sessions were cut (see [`Cut`]).
    pub cuts: Vec<Cut>,
    /// Per client: its group's place in `cuts`.
    pub client_cut: Vec<u16>,
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

impl Scan {
    /// The timeouts the sessions were cut at, for a reader: one, or one per group.
    pub fn timeouts(&self) -> String {
        let one = |c: &Cut| {
            format!(
                "{} ({})",
                super::write::duration(c.timeout_us as f64),
                c.from
            )
        };
        match &self.cuts[..] {
            [] => "none (no client came twice)".into(),
            [c] => one(c),
            cuts => cuts
                .iter()
                .map(|c| match c.group.as_str() {
                    "" => format!("other clients {}", one(c)),
                    g => format!("{g} {}", one(c)),
                })
                .collect::<Vec<_>>()
                .join("; "),
        }
    }

    /// The timeout of client `c`'s group (`scan` leaves no scan without one).
    fn cut_for(&self, c: usize) -> &Cut {
        let i = self.client_cut.get(c).copied().unwrap_or(0) as usize;
        &self.cuts[i.min(self.cuts.len().saturating_sub(1))]
    }
}

/// Groups with gaps of their own; the clients of further loadmix classes are in `""`'s.
const MAX_GROUPS: usize = 64;

/// The place in `cuts` of `group` (past [`MAX_GROUPS`], the shared `""`'s).
fn group_index(cuts: &[Cut], group: &str) -> u16 {
    let at = |name: &str| cuts.iter().position(|c| c.group == name);
    at(group)
        .or_else(|| at(""))
        .unwrap_or(0)
        .try_into()
        .unwrap_or(0)
}

/// The group of a client by its key (`PROTOCOL l run RUN; CLASS#N` for a loadmix user):
/// its loadmix class, or `""`.
fn group_of(client: &str) -> &str {
    client
        .split_once(' ')
        .and_then(|(_, who)| who.strip_prefix("l "))
        .and_then(|user| user.split_once("; "))
        .and_then(|(_, user)| user.split_once('#'))
        .map_or("", |(class, _)| class)
}

/// A request as the second pass reads it: its client by the first pass's number, its
/// operation by its place in [`Scan::ops`] (or [`UNTRACKED_OP`]).
#[derive(Debug, Clone, Copy)]
struct Rec {
    client: u32,
    op: u16,
    at_us: i64,
    done_us: i64,
}

/// The operation of a request past [`MAX_OPS`] others.
const UNTRACKED_OP: u16 = u16::MAX;

/// Requests the first pass keeps for the second, 24 bytes each: the second reads them
/// instead of reading and parsing the files again. A log with more is read twice.
pub(crate) const MAX_KEPT: usize = 4_000_000;

/// What the first pass learnt of its clients (at most [`MAX_CLIENTS`]).
#[derive(Default)]
struct Clients {
    /// By key: the client's number.
    ids: HashMap<String, u32>,
    /// By number: its last request's start and end, and its group's place in `cuts`.
    last: Vec<(i64, i64, usize)>,
}

impl Clients {
    /// Client `key`, first seen with request `x`, in the group `group` gives: its number,
    /// while there are fewer than [`MAX_CLIENTS`]. The group is asked for only then (the
    /// first pass makes a group the first time one of its clients is tracked).
    fn add(&mut self, key: &str, x: &Seen<'_>, group: impl FnOnce() -> usize) -> Option<u32> {
        if self.ids.len() >= MAX_CLIENTS {
            return None;
        }
        let n = self.last.len() as u32;
        self.ids.insert(key.to_string(), n);
        self.last.push((x.at_us, x.done_us, group()));
        Some(n)
    }
}

/// The place in `s.ops` of `x`'s operation, added the first time it is seen.
fn op_of(s: &mut Scan, index: &mut HashMap<Protocol, HashMap<String, usize>>, x: Seen) -> u16 {
    if let Some(&i) = index
        .get(&x.protocol)
        .and_then(|m| m.get(x.op.name.as_str()))
    {
        return i as u16;
    }
    if s.ops.len() >= MAX_OPS {
        return UNTRACKED_OP;
    }
    let mut d = x.op;
    d.example = x.target.chars().take(2048).collect();
    index
        .entry(d.protocol)
        .or_default()
        .insert(d.name.clone(), s.ops.len());
    s.ops.push(d);
    s.op_requests.push(0);
    (s.ops.len() - 1) as u16
}

/// Read the logs: the timeouts, then the sessions, from the requests the first pass kept
/// or, past [`MAX_KEPT`] of them, from the files again.
pub(crate) fn scan(o: &ScanOptions) -> Result<Scan, ScanError> {
    scan_keeping(o, MAX_KEPT)
}

fn scan_keeping(o: &ScanOptions, max_kept: usize) -> Result<Scan, ScanError> {
    let mut s = Scan {
        first_us: i64::MAX,
        last_us: i64::MIN,
        ..Default::default()
    };
    let mut counts = Vec::new();
    let mut op_index: HashMap<Protocol, HashMap<String, usize>> = HashMap::new();
    let mut clients = Clients::default();
    let (groups, kept) = gaps_pass(
        o,
        &mut s,
        &mut counts,
        &mut op_index,
        &mut clients,
        max_kept,
    )?;
    s.cuts = groups
        .iter()
        .map(|g| cut_of(g, o.timeout_us, s.subsecond))
        .collect();
    // Pass 2: sessions.
    let mut cut = Sessions::new(o.seed);
    match kept {
        Some(kept) => {
            clients.ids = HashMap::new();
            for r in kept {
                cut.add(&mut s, r, &clients.last);
            }
        }
        None => read_all(&o.files, o.format, o.rules.as_deref(), &mut counts, |r| {
            let Ok(x) = r else { return };
            let client = match clients.ids.get(x.client) {
                Some(&c) => c,
                // A log that grew between the passes.
                None => clients
                    .add(x.client, &x, || {
                        group_index(&s.cuts, group_of(x.client)).into()
                    })
                    .unwrap_or(u32::MAX),
            };
            let (at_us, done_us) = (x.at_us, x.done_us);
            let op = op_of(&mut s, &mut op_index, x);
            if client == u32::MAX {
                s.untracked += 1;
                return;
            }
            let r = Rec {
                client,
                op,
                at_us,
                done_us,
            };
            cut.add(&mut s, r, &clients.last);
        })?,
    }
    cut.close_all(&mut s);
    s.files = counts;
    Ok(s)
}

/// Pass 1: operations, set-up counts, log span and each group's gaps; the requests kept
/// for pass 2 while there are at most `max_kept`.
fn gaps_pass(
    o: &ScanOptions,
    s: &mut Scan,
    counts: &mut Vec<FileCounts>,
    op_index: &mut HashMap<Protocol, HashMap<String, usize>>,
    clients: &mut Clients,
    max_kept: usize,
) -> Result<(Vec<Gaps>, Option<Vec<Rec>>), ScanError> {
    let mut groups: Vec<Gaps> = Vec::new();
    let mut kept = Some(Vec::new());
    read_all(
        &o.files,
        o.format,
        o.rules.as_deref(),
        counts,
        |r| match r {
            Ok(x) => {
                s.first_us = s.first_us.min(x.at_us);
                s.last_us = s.last_us.max(x.done_us);
                s.subsecond |= x.at_us % 1_000_000 != 0;
                let client = match clients.ids.get(x.client) {
                    Some(&c) => {
                        let (at, done, g) = &mut clients.last[c as usize];
                        let gaps = &mut groups[*g];
                        gaps.after_answer[bin(x.at_us - *done)] += 1;
                        // The same second: half of the clock's resolution.
                        gaps.between_starts[bin((x.at_us - *at).max(500_000))] += 1;
                        *at = (*at).max(x.at_us);
                        *done = (*done).max(x.done_us);
                        Some(c)
                    }
                    None => {
                        clients.add(x.client, &x, || group_for(&mut groups, group_of(x.client)))
                    }
                };
                let (at_us, done_us) = (x.at_us, x.done_us);
                let op = op_of(s, op_index, x);
                match (client, kept.as_mut()) {
                    (Some(client), Some(k)) if k.len() < max_kept => k.push(Rec {
                        client,
                        op,
                        at_us,
                        done_us,
                    }),
                    // Past the clients tracked or the requests kept: read again.
                    _ => kept = None,
                }
            }
            Err(Kind::SetUp(what)) => *s.setup.entry(what).or_default() += 1,
            Err(Kind::Unclassified) => s.unclassified += 1,
            Err(_) => s.statics += 1,
        },
    )?;
    if groups.is_empty() {
        // A log that gained its first requests between the passes: its clients share one.
        groups.push(Gaps {
            group: String::new(),
            after_answer: [0; BINS],
            between_starts: [0; BINS],
        });
    }
    Ok((groups, kept))
}

/// The place of group `name` among `groups`, added while there are fewer than
/// [`MAX_GROUPS`] (past them, the shared `""`'s).
fn group_for(groups: &mut Vec<Gaps>, name: &str) -> usize {
    if let Some(g) = groups.iter().position(|g| g.group == name) {
        return g;
    }
    let name = if groups.len() < MAX_GROUPS { name } else { "" };
    groups
        .iter()
        .position(|g| g.group == name)
        .unwrap_or_else(|| {
            groups.push(Gaps {
                group: name.to_string(),
                after_answer: [0; BINS],
                between_starts: [0; BINS],
            });
            groups.len() - 1
        })
}

/// Pass 2: each client's requests cut into sessions at its group's timeout.
struct Sessions {
    /// By the first pass's number: the client's number in the scan, once it has one.
    number: Vec<Option<u32>>,
    open: HashMap<u32, Session>,
    /// By the scan's number: when the client's last finished session ended.
    last_end: Vec<i64>,
    rng: Xoshiro256PlusPlus,
    since_sweep: u32,
    now: i64,
}

impl Sessions {
    fn new(seed: u64) -> Sessions {
        Sessions {
            number: Vec::new(),
            open: HashMap::new(),
            last_end: Vec::new(),
            rng: Xoshiro256PlusPlus::seed_from_u64(seed),
            since_sweep: 0,
            now: i64::MIN,
        }
    }

    /// The scan's number of the first pass's client `c`, given the first time it is
    /// seen with an operation tracked.
    fn number(&mut self, s: &mut Scan, c: u32, group: usize, protocol: Protocol) -> u32 {
        let c = c as usize;
        if self.number.len() <= c {
            self.number.resize(c + 1, None);
        }
        *self.number[c].get_or_insert_with(|| {
            s.client_cut.push(u16::try_from(group).unwrap_or(0));
            s.between.push((0, 0.0, 0.0));
            s.client_protocol.push(protocol);
            self.last_end.push(i64::MIN);
            (s.between.len() - 1) as u32
        })
    }

    fn add(&mut self, s: &mut Scan, r: Rec, last: &[(i64, i64, usize)]) {
        if r.op == UNTRACKED_OP {
            s.untracked += 1;
            return;
        }
        let op = usize::from(r.op);
        let protocol = s.ops[op].protocol;
        let group = last.get(r.client as usize).map_or(0, |l| l.2);
        let client = self.number(s, r.client, group, protocol);
        s.op_requests[op] += 1;
        self.now = self.now.max(r.at_us);
        let req = Request {
            op: r.op,
            at_us: r.at_us,
            done_us: r.done_us,
        };
        let timeout = s.cut_for(client as usize).timeout_us;
        let ends = self
            .open
            .get(&client)
            .is_some_and(|o| r.at_us - o.end_us() > timeout || o.requests.len() >= MAX_SESSION_OPS);
        if ends && let Some(done) = self.open.remove(&client) {
            finish(done, s, &mut self.last_end, &mut self.rng);
        }
        self.open
            .entry(client)
            .or_insert_with(|| Session {
                client,
                protocol,
                requests: Vec::new(),
                cut: false,
            })
            .requests
            .push(req);
        self.since_sweep += 1;
        if self.since_sweep >= 10_000 {
            self.since_sweep = 0;
            self.sweep(s);
        }
    }

    /// Finish the sessions idle for two timeouts.
    fn sweep(&mut self, s: &mut Scan) {
        let now = self.now;
        let mut idle: Vec<(i64, u32)> = self
            .open
            .iter()
            .filter(|(c, o)| {
                now.saturating_sub(o.end_us())
                    > s.cut_for(**c as usize).timeout_us.saturating_mul(2)
            })
            .map(|(c, o)| (o.start_us(), *c))
            .collect();
        // In the order they began, not the map's (which differs from run to run): the
        // sessions kept, and the sample drawn past the cap, are then the same for the
        // same log.
        idle.sort_unstable();
        for (_, c) in idle {
            if let Some(done) = self.open.remove(&c) {
                finish(done, s, &mut self.last_end, &mut self.rng);
            }
        }
    }

    /// The log is over: finish every session still open.
    fn close_all(mut self, s: &mut Scan) {
        let mut rest: Vec<Session> = self.open.drain().map(|(_, x)| x).collect();
        rest.sort_by_key(|x| (x.start_us(), x.client));
        for done in rest {
            finish(done, s, &mut self.last_end, &mut self.rng);
        }
    }
}

/// A session is done: mark it cut if the log's edges cut it, note the gap since the
/// client's last one, keep it (or sample it in).
fn finish(mut done: Session, s: &mut Scan, last_end: &mut [i64], rng: &mut Xoshiro256PlusPlus) {
    done.requests.sort_by_key(|r| r.at_us);
    let (start, end) = (done.start_us(), done.end_us());
    let reach = s.cut_for(done.client as usize).reach_us;
    done.cut = start - s.first_us <= reach
        || s.last_us - end <= reach
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

#[cfg(test)]
mod tests {
    use super::super::read::{loadmix_setup, loadmix_user};
    use super::*;

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
        // A client's key names its class when a loadmix User-Agent named its user.
        assert_eq!(
            group_of(&format!("caldav l {}", loadmix_user(Some(agent)).unwrap())),
            "caldav"
        );
        assert_eq!(group_of("caldav c JSESSIONID=ab#cd; x"), "");
        assert_eq!(group_of("http a 10.0.0.1 curl/8"), "");
    }

    /// The same log gives the same sessions in the same order, run after run: sessions
    /// the sweeps close (every 10,000 lines) are taken in the order they began, not in
    /// the order of a hash map, whose seed differs between maps and runs.
    #[test]
    fn the_same_log_is_cut_into_the_same_sessions_in_the_same_order() {
        let t0 = 1_764_000_000i64;
        let mut text = String::new();
        // 400 clients, each a session of three requests every third minute for two
        // hours: 48,000 lines, four sweeps, each closing the sessions of the clients
        // that have been away since.
        for minute in 0..120 {
            for step in 0..3 {
                for c in (0..400).filter(|c| (minute + c) % 3 == 0) {
                    let at = t0 + minute * 60 + step;
                    text.push_str(&format!(
                        r#"{{"msec":{at}.{c:03},"remote_addr":"10.0.{}.{}","request_method":"GET","request_uri":"/p/{step}","status":200,"request_time":0.001,"http_user_agent":"a"}}"#,
                        c / 250,
                        c % 250
                    ));
                    text.push('\n');
                }
            }
        }
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("access.json");
        std::fs::write(&path, text).unwrap();
        let cut = || {
            let s = scan(&ScanOptions {
                files: vec![path.clone()],
                rules: None,
                format: None,
                timeout_us: Some(10_000_000),
                seed: 1,
            })
            .unwrap();
            s.sessions
                .iter()
                .map(|x| (x.client, x.start_us()))
                .collect::<Vec<_>>()
        };
        let first = cut();
        assert_eq!(first.len(), 400 * 40);
        for _ in 0..3 {
            assert!(cut() == first, "the sessions came in another order");
        }
    }

    /// The second pass cuts the same sessions, counts the same requests and numbers the
    /// same clients from the requests the first kept as from the files read again, and
    /// from both when the first stops keeping partway: people, authenticated users and
    /// two loadmix classes, 300 operations (past the 256 tracked), assets, set-up, a
    /// refused line, and sessions swept as the reading goes.
    #[test]
    fn the_requests_kept_are_cut_as_the_files_read_again() {
        let mut text = String::new();
        let word = |i: usize| -> String {
            let b = i.to_le_bytes();
            [b'a' + b[0] % 26, b'a' + (b[0] / 26) % 26, b'a' + b[1] % 26]
                .map(char::from)
                .iter()
                .collect()
        };
        for i in 0..24_000usize {
            let (minute, second) = (i / 200, i % 60);
            let at = format!(
                "02/Dec/2026:{:02}:{:02}:{second:02} +0000",
                minute / 60,
                minute % 60
            );
            let (who, agent) = match i % 7 {
                0 => ("-", format!("loadmix/0.1.0 (run r; poller#{})", i % 5)),
                1 => ("-", format!("loadmix/0.1.0 (run r; editor#{})", i % 9)),
                2 => ("-", "loadmix/0.1.0 (run r; editor#1; setup)".to_string()),
                3 => ("bob", "DAVx5".to_string()),
                _ => ("-", format!("browser {}", i % 31)),
            };
            let target = match i % 11 {
                0 => "/style.css".to_string(),
                1 => format!("/shop/{}/list", word(i % 300)),
                _ => format!("/cosmo/dav/u/c{}/", i % 3),
            };
            let method = if i % 13 == 0 { "REPORT" } else { "GET" };
            text.push_str(&format!(
                "10.0.0.{} - {who} [{at}] \"{method} {target} HTTP/1.1\" 200 5 \"-\" \"{agent}\" 0.00{}\n",
                i % 4,
                i % 9
            ));
            if i == 5_000 {
                text.push_str("not a line of any log\n");
            }
        }
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("access.log");
        std::fs::write(&path, text).unwrap();
        let o = ScanOptions {
            files: vec![path],
            rules: None,
            format: None,
            timeout_us: None,
            seed: 3,
        };
        let kept = scan_keeping(&o, MAX_KEPT).unwrap();
        assert!(
            kept.untracked > 0 && kept.setup.values().sum::<u64>() > 0,
            "{kept:?}"
        );
        assert!(
            kept.files[0].refused == 1 && kept.sessions.len() > 100,
            "{kept:?}"
        );
        let group = |g: &str| kept.cuts.iter().any(|c| c.group == g);
        assert!(group("poller") && group("editor"), "{:?}", kept.cuts);
        let all = format!("{kept:?}");
        for max_kept in [0, 7_000] {
            assert!(
                format!("{:?}", scan_keeping(&o, max_kept).unwrap()) == all,
                "{max_kept}"
            );
        }
    }

    /// A log of two loadmix classes whose gaps overlap: pollers thinking up to 300 ms and
    /// pausing 1-3 s, and people arriving at 4/s who each make one session with lognormal
    /// think times (median 300 ms, p95 2 s, some longer than the pollers' pauses). No one
    /// timeout cuts both; each class's own gaps do.
    #[test]
    fn each_loadmix_class_is_cut_at_its_own_gaps() {
        use rand::RngExt;
        let mut rng = Xoshiro256PlusPlus::seed_from_u64(5);
        let t0 = 1_764_000_000_000_000i64;
        let mut lines: Vec<(i64, String)> = Vec::new();
        let mut line = |at: i64, method: &str, who: &str| {
            let agent = format!("loadmix/0.1.0 (run 20261205T000000Z-abcdef; {who})");
            let text = format!(
                r#"{{"msec":{:.3},"remote_addr":"127.0.0.1","request_method":"{method}","request_uri":"/cosmo/dav/u/lm-1-c/","status":207,"request_time":0.002,"http_user_agent":"{agent}"}}"#,
                (at + 2_000) as f64 / 1e6
            );
            lines.push((at, text));
        };
        let span = 60_000_000i64;
        let mut poller_sessions = 0;
        for p in 0..6 {
            let mut at = t0 + rng.random_range(0..2_000_000);
            while at < t0 + span {
                poller_sessions += 1;
                for step in 0..rng.random_range(2..5) {
                    let method = if step == 0 { "PROPFIND" } else { "REPORT" };
                    line(at, method, &format!("poller#{p}"));
                    at += 2_000 + rng.random_range(1_000..300_000);
                }
                at += rng.random_range(1_000_000..3_000_000);
            }
        }
        let sigma = (2.0f64 / 0.3).ln() / 1.645;
        let editors = 240;
        for e in 0..editors {
            let mut at = t0 + 2_000_000 + e * 250_000;
            for _ in 0..rng.random_range(2..6) {
                line(at, "REPORT", &format!("editor#{e}"));
                let z: f64 = (0..12).map(|_| rng.random::<f64>()).sum::<f64>() - 6.0;
                at += 2_000 + (300_000.0 * (sigma * z).exp()) as i64;
            }
        }
        lines.sort();
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("access.json");
        let text: Vec<String> = lines.into_iter().map(|(_, l)| l).collect();
        std::fs::write(&path, text.join("\n")).unwrap();
        let s = scan(&ScanOptions {
            files: vec![path],
            rules: None,
            format: None,
            timeout_us: None,
            seed: 1,
        })
        .unwrap();
        let cut = |g: &str| s.cuts.iter().find(|c| c.group == g).unwrap();
        let (p, e) = (cut("poller"), cut("editor"));
        assert!((300_000..1_000_000).contains(&p.timeout_us), "{p:?}");
        assert!(p.from.contains("valley"), "{p:?}");
        assert!(e.from.contains("no valley"), "{e:?}");
        let of = |g: &str| {
            s.sessions
                .iter()
                .filter(|x| s.cuts[s.client_cut[x.client as usize] as usize].group == g)
                .count()
        };
        // Every person's requests are one session, and every poller's session is one.
        assert_eq!(of("editor"), editors as usize);
        assert_eq!(of("poller"), poller_sessions);
        // Only the sessions near the log's edges are cut: a few seconds of 60.
        assert!(
            s.sessions_cut * 5 < s.sessions_seen,
            "{} of {}",
            s.sessions_cut,
            s.sessions_seen
        );
    }
}
