//! `loadmix fidelity`: whether two access logs show the same traffic, or a log and a
//! workload sampled offline (`model.rs`), or a log and a run's report (`report.rs`), one
//! table of checks, each with its statistic and the gate it is judged by. The logs are
//! read as `infer` reads them (the same classification, both cut into sessions by the
//! same rule: the timeout given, else each group of clients at its own gaps), so that a
//! log and the log of a run of the workload inferred from it can be held side by side. A check passes when the difference is not significant
//! (p ≥ [`ALPHA`]) or too small to matter (below its effect-size gate): big logs make
//! any difference significant, and a load test needs the shape, not the last digit.

pub(crate) mod model;
pub(crate) mod report;
pub(crate) mod stats;

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;

use crate::infer::scan::{self, Scan, ScanOptions};

/// Below this p-value a difference is significant.
pub(crate) const ALPHA: f64 = 0.01;
/// The most two operation mixes, or two rows of transitions, may differ by (TVD).
pub(crate) const MIX_TVD: f64 = 0.05;
pub(crate) const ROW_TVD: f64 = 0.10;
/// The largest KS distance between two distributions that passes.
pub(crate) const KS_D: f64 = 0.10;
/// Rates (sessions per second, sessions at once) may differ by this factor.
pub(crate) const RATE_RATIO: f64 = 1.15;
/// Dispersion indices may differ by this factor.
pub(crate) const DISPERSION_RATIO: f64 = 2.0;
/// How far two logs' think times may sit apart without the difference being judged, µs:
/// a log's clock (nginx writes milliseconds) and the clients' own work between an answer
/// and the next request (which `infer` estimates from the log's floor of gaps) each move
/// every gap by about a millisecond, which a think time held constant (a fixed pause
/// of 200 ms) would show as a KS distance near 1.
pub(crate) const THINK_SHIFT_US: f64 = 2_000.0;
/// Samples a row or a transition's think times need in both logs to be compared: as
/// many as `infer` needs to give a transition a think of its own.
pub(crate) const MIN_SAMPLES: usize = crate::infer::TRANSITION_THINK_SAMPLES;

#[derive(Debug, thiserror::Error)]
pub enum FidelityError {
    #[error(transparent)]
    Scan(#[from] scan::ScanError),
    #[error("{0}: no whole session to compare")]
    NoSessions(String),
    #[error(transparent)]
    Workload(#[from] crate::workload::WorkloadError),
    #[error("not a run's report ({report}), nor a log ({log})")]
    Neither { report: String, log: String },
}

/// One judged check.
#[derive(Debug, Clone, PartialEq)]
pub struct Check {
    /// What is compared: `mix`, `think`, `session length`, ...
    pub name: String,
    /// The first log's figure, in words.
    pub first: String,
    /// The second's (a log, a report or a sampled workload).
    pub second: String,
    /// The test statistic and its value.
    pub statistic: String,
    /// What the statistic must stay within to pass.
    pub gate: String,
    /// `None`: not enough samples to judge.
    pub pass: Option<bool>,
    /// Why it was not judged, or what to read into it.
    pub note: Option<String>,
}

/// What one log shows, reduced to what the checks compare.
#[derive(Debug, Default)]
struct Traffic {
    ops: BTreeMap<String, f64>,
    /// from → (to or `exit`) → count.
    rows: BTreeMap<String, BTreeMap<String, f64>>,
    ops_per_session: Vec<f64>,
    duration_us: Vec<f64>,
    thinks: BTreeMap<(String, String), Vec<f64>>,
    requests_us: Vec<i64>,
    /// When each session started, whole or cut by the log's edges.
    starts_us: Vec<i64>,
    sessions: usize,
    span_us: i64,
    first_us: i64,
    last_us: i64,
    busy_us: f64,
    /// Sessions open on average in each of [`WINDOWS`] equal parts of the span, for the
    /// standard error of the whole span's mean (empty when only a total is known).
    busy_windows: Vec<f64>,
}

/// The parts a span is cut into to tell how much its mean sessions at once would vary
/// from run to run (batch means).
const WINDOWS: usize = 10;

/// An estimate and its standard error, when one is known.
#[derive(Debug, Clone, Copy)]
struct Estimate {
    value: f64,
    se: Option<f64>,
}

impl Traffic {
    /// Sessions started a second; a count of starts varies as a Poisson count does.
    fn rate(&self) -> Estimate {
        let span_s = self.span_us as f64 / 1e6;
        Estimate {
            value: self.sessions as f64 / span_s,
            se: Some((self.sessions as f64).sqrt() / span_s),
        }
    }

    /// Sessions open at once on average, with the spread of its windows' means.
    fn at_once(&self) -> Estimate {
        let value = self.busy_us / self.span_us as f64;
        let w = &self.busy_windows;
        let se = (w.len() >= 2).then(|| {
            let n = w.len() as f64;
            let mean = w.iter().sum::<f64>() / n;
            let var = w.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / (n - 1.0);
            (var / n).sqrt()
        });
        Estimate { value, se }
    }
}

/// Each session's time within each of [`WINDOWS`] equal parts of `[first, last]`, over
/// the part's length.
fn busy_windows(sessions: &[(i64, i64)], first: i64, last: i64) -> Vec<f64> {
    let len = ((last - first) / WINDOWS as i64).max(1);
    let mut w = [0f64; WINDOWS];
    for &(a, b) in sessions {
        for (k, slot) in w.iter_mut().enumerate() {
            let lo = first + len * k as i64;
            let overlap = (b.min(lo + len) - a.max(lo)).max(0);
            *slot += overlap as f64;
        }
    }
    w.iter().map(|x| x / len as f64).collect()
}

fn traffic(s: &Scan) -> Traffic {
    // Counted by operation index and named once at the end: a name per transition of
    // every session was most of this function's time on a million-line log.
    let names: Vec<String> = s
        .ops
        .iter()
        .map(|d| format!("{}.{}", d.protocol.name(), d.name))
        .collect();
    let n = names.len();
    let mut t = Traffic {
        span_us: (s.last_us - s.first_us).max(1),
        first_us: s.first_us,
        last_us: s.last_us,
        ..Default::default()
    };
    for (i, c) in s.op_requests.iter().enumerate() {
        *t.ops.entry(names[i].clone()).or_default() += *c as f64;
    }
    t.busy_windows = busy_windows(
        &s.sessions
            .iter()
            .map(|x| (x.start_us(), x.end_us()))
            .collect::<Vec<_>>(),
        s.first_us,
        s.last_us,
    );
    // from × (to, or `exit` at n) and from × to.
    let mut rows = vec![0.0f64; n * (n + 1)];
    let mut thinks: Vec<Vec<f64>> = vec![Vec::new(); n * n];
    for x in &s.sessions {
        t.requests_us.extend(x.requests.iter().map(|r| r.at_us));
        t.busy_us += (x.end_us() - x.start_us()).max(0) as f64;
        // Every session started is counted, whole or cut by an edge: how long a session
        // must lie from the edges to be known whole differs from log to log, and a rate
        // of whole sessions alone would differ with it.
        t.sessions += 1;
        t.starts_us.push(x.start_us());
        if x.cut {
            continue;
        }
        t.ops_per_session.push(x.requests.len() as f64);
        t.duration_us
            .push((x.end_us() - x.start_us()).max(0) as f64);
        for w in x.requests.windows(2) {
            rows[usize::from(w[0].op) * (n + 1) + usize::from(w[1].op)] += 1.0;
        }
        if let Some(last) = x.requests.last() {
            rows[usize::from(last.op) * (n + 1) + n] += 1.0;
        }
        for (a, b, th) in s.thinks_of(x) {
            thinks[usize::from(a) * n + usize::from(b)].push(th);
        }
    }
    for (cell, count) in rows.into_iter().enumerate().filter(|(_, c)| *c > 0.0) {
        let (a, b) = (cell / (n + 1), cell % (n + 1));
        let to = names.get(b).map_or("exit", String::as_str);
        t.rows
            .entry(names[a].clone())
            .or_default()
            .insert(to.to_string(), count);
    }
    for (cell, th) in thinks
        .into_iter()
        .enumerate()
        .filter(|(_, v)| !v.is_empty())
    {
        t.thinks
            .insert((names[cell / n].clone(), names[cell % n].clone()), th);
    }
    t
}

/// Counts of `a` and `b` over the union of their keys.
fn aligned(a: &BTreeMap<String, f64>, b: &BTreeMap<String, f64>) -> (Vec<f64>, Vec<f64>) {
    let keys: BTreeSet<&String> = a.keys().chain(b.keys()).collect();
    keys.iter()
        .map(|k| {
            (
                a.get(*k).copied().unwrap_or(0.0),
                b.get(*k).copied().unwrap_or(0.0),
            )
        })
        .unzip()
}

fn judged(p: f64, effect: f64, gate: f64) -> bool {
    p >= ALPHA || effect <= gate
}

fn median(v: &[f64]) -> f64 {
    let mut v = v.to_vec();
    v.sort_by(f64::total_cmp);
    v.get(v.len() / 2).copied().unwrap_or(0.0)
}

fn ms(us: f64) -> String {
    crate::infer::write::duration(us)
}

/// The checks of `second` against `first`.
fn checks(a: &Traffic, b: &Traffic) -> Vec<Check> {
    let mut out = Vec::new();
    let mix = |t: &Traffic| {
        let total: f64 = t.ops.values().sum();
        let mut v: Vec<(&String, f64)> = t.ops.iter().map(|(k, n)| (k, *n)).collect();
        v.sort_by(|x, y| y.1.total_cmp(&x.1));
        v.iter()
            .take(3)
            .map(|(k, n)| {
                format!(
                    "{} {:.0}%",
                    k.rsplit('.').next().unwrap_or(k),
                    100.0 * n / total.max(1.0)
                )
            })
            .collect::<Vec<_>>()
            .join(", ")
    };
    let (x, y) = aligned(&a.ops, &b.ops);
    let (d, p) = (stats::tvd(&x, &y), stats::chi2_p(&x, &y));
    out.push(Check {
        name: "operation mix".into(),
        first: mix(a),
        second: mix(b),
        statistic: format!("TVD {d:.3}, χ² p={}", pval(p)),
        gate: format!("TVD ≤ {MIX_TVD} or p ≥ {ALPHA}"),
        pass: Some(judged(p, d, MIX_TVD)),
        note: None,
    });
    // The worst row among those both logs have enough of.
    let mut worst: Option<(String, f64, f64)> = None;
    for (from, ra) in &a.rows {
        let Some(rb) = b.rows.get(from) else { continue };
        let (x, y) = aligned(ra, rb);
        if x.iter().sum::<f64>() < MIN_SAMPLES as f64 || y.iter().sum::<f64>() < MIN_SAMPLES as f64
        {
            continue;
        }
        let (d, p) = (stats::tvd(&x, &y), stats::chi2_p(&x, &y));
        if worst.as_ref().is_none_or(|w| d > w.1) {
            worst = Some((from.clone(), d, p));
        }
    }
    out.push(match worst {
        Some((from, d, p)) => Check {
            name: "worst transition row".into(),
            first: short_name(&from).to_string(),
            second: short_name(&from).to_string(),
            statistic: format!("TVD {d:.3}, χ² p={}", pval(p)),
            gate: format!("TVD ≤ {ROW_TVD} or p ≥ {ALPHA}"),
            pass: Some(judged(p, d, ROW_TVD)),
            note: None,
        },
        None => unjudged(
            "worst transition row",
            "no row with enough transitions in both",
        ),
    });
    out.push(distribution(
        "operations per session",
        &a.ops_per_session,
        &b.ops_per_session,
        |v| {
            format!(
                "median {:.0}, mean {:.2}",
                median(v),
                v.iter().sum::<f64>() / v.len().max(1) as f64
            )
        },
    ));
    out.push(distribution(
        "session duration",
        &a.duration_us,
        &b.duration_us,
        |v| format!("median {}", ms(median(v))),
    ));
    // Think times: the worst transition both logs have enough of.
    let mut worst: Option<Check> = None;
    let mut worst_d = -1.0;
    for (k, ta) in &a.thinks {
        let Some(tb) = b.thinks.get(k) else { continue };
        if ta.len() < MIN_SAMPLES || tb.len() < MIN_SAMPLES {
            continue;
        }
        // The second moved toward the first by their medians' difference, up to
        // THINK_SHIFT_US: what the logs' clocks and the clients' own work account for.
        let (ma, mb) = (median(ta), median(tb));
        let shift = (ma - mb).clamp(-THINK_SHIFT_US, THINK_SHIFT_US);
        let moved: Vec<f64> = tb.iter().map(|x| x + shift).collect();
        if let Some((d, p)) = stats::ks(ta, &moved)
            && d > worst_d
        {
            worst_d = d;
            let after = match shift.abs() >= 1.0 {
                true => format!(", the second moved {:+.1} ms", shift / 1e3),
                false => String::new(),
            };
            worst = Some(Check {
                name: format!("think {} → {}", short_name(&k.0), short_name(&k.1)),
                first: format!("median {}", ms(ma)),
                second: format!("median {}", ms(mb)),
                statistic: format!("KS D {d:.3}, p={}{after}", pval(p)),
                gate: format!("D ≤ {KS_D} or p ≥ {ALPHA}"),
                pass: Some(judged(p, d, KS_D)),
                note: None,
            });
        }
    }
    out.push(
        worst.unwrap_or_else(|| {
            unjudged("think times", "no transition with enough samples in both")
        }),
    );
    out.push(ratio_of_estimates(
        "sessions per second",
        a.rate(),
        b.rate(),
        RATE_RATIO,
        |r| format!("{r:.3}"),
    ));
    out.extend(hourly(a, b));
    out.push(ratio_of_estimates(
        "sessions at once (mean)",
        a.at_once(),
        b.at_once(),
        RATE_RATIO,
        |r| format!("{r:.2}"),
    ));
    if b.requests_us.is_empty() {
        out.push(unjudged(
            "burstiness",
            "no request times on the second side",
        ));
    }
    for (label, window) in [
        ("1 s", 1_000_000i64),
        ("10 s", 10_000_000),
        ("60 s", 60_000_000),
    ] {
        let (Some((da, na)), Some((db, nb))) = (
            stats::dispersion(&a.requests_us, a.first_us, a.last_us, window),
            stats::dispersion(&b.requests_us, b.first_us, b.last_us, window),
        ) else {
            continue;
        };
        let mut c = ratio(
            &format!("burstiness ({label} windows)"),
            da,
            db,
            DISPERSION_RATIO,
            |r| format!("dispersion {r:.2}"),
        );
        // Over a few windows a dispersion index is itself uncertain: a ratio no F test
        // tells from chance passes.
        let p = stats::dispersion_p(da, na, db, nb);
        c.statistic = format!("{}, F p={}", c.statistic, pval(p));
        c.gate = format!("{} or p ≥ {ALPHA}", c.gate);
        c.pass = c.pass.map(|ok| ok || p >= ALPHA);
        if da > 3.0 * db.max(1.0) {
            c.note = Some(format!(
                "the first log is burstier ({da:.1}) than {} (a model of Poisson arrivals and independent sessions stays near 1)",
                if db <= 1.5 {
                    "a Poisson model can be"
                } else {
                    "the second"
                }
            ));
        }
        out.push(c);
    }
    out
}

/// The sessions started in each hour, when both sides span two hours or more: hour by
/// hour from each one's start, over the hours both have.
fn hourly(a: &Traffic, b: &Traffic) -> Option<Check> {
    const HOUR: i64 = 3_600_000_000;
    let hours = (a.span_us.min(b.span_us) / HOUR).min(24 * 366);
    if hours < 2 || a.starts_us.is_empty() || b.starts_us.is_empty() {
        return None;
    }
    let count = |t: &Traffic| {
        let mut n = vec![0f64; hours as usize];
        for s in &t.starts_us {
            if let Some(h) = usize::try_from((s - t.first_us) / HOUR)
                .ok()
                .and_then(|i| n.get_mut(i))
            {
                *h += 1.0;
            }
        }
        n
    };
    let (x, y) = (count(a), count(b));
    let (d, p) = (stats::tvd(&x, &y), stats::chi2_p(&x, &y));
    let peak = |v: &[f64]| {
        v.iter()
            .enumerate()
            .max_by(|p, q| p.1.total_cmp(q.1))
            .map_or(0, |(i, _)| i + 1)
    };
    Some(Check {
        name: format!("arrivals per hour ({hours} h)"),
        first: format!("peak hour {}", peak(&x)),
        second: format!("peak hour {}", peak(&y)),
        statistic: format!("TVD {d:.3}, χ² p={}", pval(p)),
        gate: format!("TVD ≤ {ROW_TVD} or p ≥ {ALPHA}"),
        pass: Some(judged(p, d, ROW_TVD)),
        note: None,
    })
}

/// `put_event` of `caldav.put_event`: the operation without its protocol.
fn short_name(op: &str) -> &str {
    op.rsplit('.').next().unwrap_or(op)
}

fn pval(p: f64) -> String {
    if p < 0.001 {
        "<0.001".into()
    } else {
        format!("{p:.3}")
    }
}

fn unjudged(name: &str, why: &str) -> Check {
    Check {
        name: name.into(),
        first: "-".into(),
        second: "-".into(),
        statistic: "-".into(),
        gate: "-".into(),
        pass: None,
        note: Some(why.into()),
    }
}

fn distribution(name: &str, a: &[f64], b: &[f64], show: impl Fn(&[f64]) -> String) -> Check {
    if a.len() < MIN_SAMPLES || b.len() < MIN_SAMPLES {
        return unjudged(name, &format!("fewer than {MIN_SAMPLES} whole sessions"));
    }
    let Some((d, p)) = stats::ks(a, b) else {
        return unjudged(name, "no sample");
    };
    Check {
        name: name.into(),
        first: show(a),
        second: show(b),
        statistic: format!("KS D {d:.3}, p={}", pval(p)),
        gate: format!("D ≤ {KS_D} or p ≥ {ALPHA}"),
        pass: Some(judged(p, d, KS_D)),
        note: None,
    }
}

/// As [`ratio`], and when both sides' standard errors are known, a ratio outside the gate
/// still passes if it cannot be told from 1: a z-test of its logarithm (each side's
/// relative error its logarithm's), p ≥ [`ALPHA`]. A short log's rates vary by more than
/// the gate from run to run; a long one's are held to it.
fn ratio_of_estimates(
    name: &str,
    a: Estimate,
    b: Estimate,
    gate: f64,
    show: impl Fn(f64) -> String,
) -> Check {
    let mut c = ratio(name, a.value, b.value, gate, show);
    let (Some(sa), Some(sb)) = (a.se, b.se) else {
        return c;
    };
    if a.value <= 0.0 || b.value <= 0.0 {
        return c;
    }
    let rel = ((sa / a.value).powi(2) + (sb / b.value).powi(2)).sqrt();
    let p = match rel > 0.0 {
        true => {
            let z = (b.value / a.value).ln().abs() / rel;
            statrs::function::erf::erfc(z / std::f64::consts::SQRT_2)
        }
        false => 0.0,
    };
    c.statistic = format!("{}, p={}", c.statistic, pval(p));
    c.gate = format!("{} or p ≥ {ALPHA}", c.gate);
    c.pass = c.pass.map(|ok| ok || p >= ALPHA);
    c
}

fn ratio(name: &str, a: f64, b: f64, gate: f64, show: impl Fn(f64) -> String) -> Check {
    let r = if a > 0.0 {
        b / a
    } else if b > 0.0 {
        f64::INFINITY
    } else {
        1.0
    };
    Check {
        name: name.into(),
        first: show(a),
        second: show(b),
        statistic: format!("ratio {r:.3}"),
        gate: format!("within ×{gate}"),
        pass: Some(r.is_finite() && r <= gate && r >= 1.0 / gate),
        note: None,
    }
}

/// The outcome of `fidelity`.
#[derive(Debug)]
pub struct Fidelity {
    /// Every check, judged or not.
    pub checks: Vec<Check>,
    /// The session timeouts the sides were cut at, as the reader is told.
    pub timeouts: String,
    /// What the first side was (its file).
    pub first: String,
    /// What the second side was.
    pub second: String,
}

impl Fidelity {
    /// No judged check failed.
    pub fn passed(&self) -> bool {
        self.checks.iter().all(|c| c.pass != Some(false))
    }

    /// The table as printed.
    pub fn table(&self) -> String {
        let width = crate::report::compare::terminal_width();
        let mut t = comfy_table::Table::new();
        t.load_preset(comfy_table::presets::UTF8_FULL_CONDENSED)
            .set_content_arrangement(comfy_table::ContentArrangement::Dynamic)
            .set_width(width);
        t.set_header(["check", "first", "second", "statistic", "gate", "verdict"]);
        for c in &self.checks {
            t.add_row([
                c.name.as_str(),
                c.first.as_str(),
                c.second.as_str(),
                c.statistic.as_str(),
                c.gate.as_str(),
                match c.pass {
                    Some(true) => "pass",
                    Some(false) => "FAIL",
                    None => "not judged",
                },
            ]);
        }
        let mut out = format!(
            "fidelity of {} against {} (sessions cut at {})\n{t}\n",
            self.second, self.first, self.timeouts
        );
        for c in &self.checks {
            if let Some(n) = &c.note {
                out.push_str(&crate::report::compare::wrap(
                    &format!("{}: {n}", c.name),
                    width.into(),
                    "  ",
                ));
            }
        }
        let failed = self.checks.iter().filter(|c| c.pass == Some(false)).count();
        out.push_str(&if failed == 0 {
            "every judged check passes\n".to_string()
        } else {
            format!("{failed} check(s) fail\n")
        });
        out
    }
}

/// Whether `path` names a workload file rather than a log.
fn is_workload(path: &std::path::Path) -> bool {
    path.extension()
        .and_then(|e| e.to_str())
        .is_some_and(|e| e.eq_ignore_ascii_case("yaml") || e.eq_ignore_ascii_case("yml"))
}

/// `log` against workload `w` sampled offline over its span.
pub(crate) fn against_model(
    log: &Scan,
    w: &crate::workload::Workload,
    first: &str,
    second: &str,
) -> Result<Fidelity, FidelityError> {
    let sampled = model::sample(w, log);
    let (ta, tb) = (traffic(log), traffic(&sampled));
    for (t, f) in [(&ta, first), (&tb, second)] {
        if t.sessions == 0 {
            return Err(FidelityError::NoSessions(f.to_string()));
        }
    }
    Ok(Fidelity {
        checks: checks(&ta, &tb),
        timeouts: log.timeouts(),
        first: first.to_string(),
        second: format!(
            "{second} (sampled without traffic, each gap plus the log's floor of {})",
            ms(model::gap_floor(log))
        ),
    })
}

/// Compare `second` (a log, or a workload file sampled offline) with log `first`.
pub fn compare(
    first: PathBuf,
    second: PathBuf,
    timeout_us: Option<i64>,
    rules: Option<std::sync::Arc<crate::infer::rules::Rules>>,
) -> Result<Fidelity, FidelityError> {
    let a = scan::scan(&ScanOptions {
        files: vec![first.clone()],
        rules: rules.clone(),
        format: None,
        timeout_us,
        seed: 1,
    })?;
    // A .json file is a run's report, or JSON lines; if it is neither, both reasons are
    // given, so that a broken report is not reported as a log without a request.
    let mut not_a_report = None;
    if second
        .extension()
        .is_some_and(|e| e.eq_ignore_ascii_case("json"))
        && let Some(r) = crate::report::load(&second)
            .map_err(|e| not_a_report = Some(e.to_string()))
            .ok()
    {
        let tb = report::traffic(&r);
        let ta = traffic(&a);
        if tb.sessions == 0 && tb.ops.is_empty() {
            return Err(FidelityError::NoSessions(second.display().to_string()));
        }
        return Ok(Fidelity {
            checks: checks(&ta, &tb),
            timeouts: a.timeouts(),
            first: first.display().to_string(),
            second: format!("{} (a run's report)", second.display()),
        });
    }
    if is_workload(&second) {
        let w = crate::workload::load(&second, &[])?;
        return against_model(
            &a,
            &w,
            &first.display().to_string(),
            &second.display().to_string(),
        );
    }
    let b = scan::scan(&ScanOptions {
        files: vec![second.clone()],
        rules,
        format: None,
        // Cut by the same rule: the timeout given, else each group's own gaps (a log of
        // the inferred workload names its classes as the workload does, not as the first).
        timeout_us,
        seed: 1,
    })
    .map_err(|e| match not_a_report {
        Some(r) => FidelityError::Neither {
            report: r,
            log: e.to_string(),
        },
        None => e.into(),
    })?;
    let (ta, tb) = (traffic(&a), traffic(&b));
    for (t, f) in [(&ta, &first), (&tb, &second)] {
        if t.sessions == 0 {
            return Err(FidelityError::NoSessions(f.display().to_string()));
        }
    }
    Ok(Fidelity {
        checks: checks(&ta, &tb),
        timeouts: match (a.timeouts(), b.timeouts()) {
            (x, y) if x == y => x,
            (x, y) => format!("{x} in the first; {y} in the second"),
        },
        first: first.display().to_string(),
        second: second.display().to_string(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_ratio_outside_its_gate_passes_only_when_noise_can_explain_it() {
        let e = |value: f64, se: f64| Estimate {
            value,
            se: Some(se),
        };
        // 0.77 with a fifth of noise on each side: not told from 1.
        let c = ratio_of_estimates("x", e(3.96, 0.4), e(3.04, 0.4), 1.15, |r| r.to_string());
        assert_eq!(c.pass, Some(true), "{c:?}");
        // The same ratio measured tightly fails.
        let c = ratio_of_estimates("x", e(3.96, 0.04), e(3.04, 0.04), 1.15, |r| r.to_string());
        assert_eq!(c.pass, Some(false), "{c:?}");
        // Without errors, the gate alone.
        let bare = Estimate {
            value: 3.04,
            se: None,
        };
        let c = ratio_of_estimates("x", e(3.96, 0.4), bare, 1.15, |r| r.to_string());
        assert_eq!(c.pass, Some(false), "{c:?}");
    }

    #[test]
    fn sessions_at_once_are_counted_in_each_window_they_overlap() {
        // One session over the whole span, one over its first tenth.
        let w = busy_windows(&[(0, 1_000), (0, 100)], 0, 1_000);
        assert_eq!(w.len(), WINDOWS);
        assert_eq!(w[0], 2.0);
        assert!(w[1..].iter().all(|x| *x == 1.0), "{w:?}");
    }
}
