//! What each fault window of a round cost: the operations before, during and after it,
//! when the fault first showed (time to detect), when the operations were back within a
//! band of what they were before it and stayed there (time to recover), and the
//! successes it cost against the rate before it (the dip). Worked out once, from the
//! window's figures the aggregator kept (`metrics::windows`), by the rule printed with it.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::ledger::{Ledger, WindowMessages};
use crate::metrics::windows::{TICK_BUCKETS, TICK_US, Tick, WindowStats, bucket_bound_us};
use crate::transport::ErrorClass;

/// How recovery is judged: back within `band` of the seconds before the fault, in
/// successes started a second and in their latency percentile, for `hold_s` seconds in a
/// row.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq)]
pub struct RecoveryRule {
    /// A share: 0.25 is within 25 %.
    pub band: f64,
    /// How long, in whole seconds, it must hold.
    pub hold_s: f64,
    /// The latency percentile held to the band (50 for p50).
    pub percentile: f64,
}

impl Default for RecoveryRule {
    fn default() -> Self {
        RecoveryRule {
            band: 0.25,
            hold_s: 3.0,
            percentile: 50.0,
        }
    }
}

/// One part of a window, by when its operations started.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct FaultPart {
    /// Its span on the round's clock, s.
    pub from_s: f64,
    /// Its end, s.
    pub to_s: f64,
    /// Operations started in it.
    pub ops: u64,
    /// Of those, the successes.
    pub ok: u64,
    /// Successes started in it a second (as a run's ops/s counts them).
    pub ops_per_s: f64,
    /// Latency of its successes, ms: the median.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub p50_ms: Option<f64>,
    /// The 99th percentile.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub p99_ms: Option<f64>,
    /// Its failures by class.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub errors: BTreeMap<ErrorClass, u64>,
    /// Operations that opened a new connection.
    pub connections_opened: u64,
    /// Successes that ended in it, whenever they started.
    pub ended_ok: u64,
}

/// What a network fault did to connections, over the target's proxies.
#[derive(Debug, Clone, Copy, Default, Serialize, Deserialize, PartialEq, Eq)]
pub struct FaultConnections {
    /// Open at the window's begin or accepted during it.
    pub touched: u64,
    /// Of those, the ones its toxicity drew.
    pub drawn: u64,
    /// Connections reset (RST to both ends).
    pub reset: u64,
    /// Connections closed by the fault.
    pub closed: u64,
    /// Connects refused while the proxy was down.
    pub refused: u64,
}

/// One window of a round and what it cost.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct FaultWindow {
    /// As the timeline names it (`latency 50ms`).
    pub fault: String,
    /// Its entry in the timeline, from 0.
    pub entry: usize,
    /// Scheduled begin and end on the round's clock, s.
    pub at_s: f64,
    /// Its scheduled end, s.
    pub until_s: f64,
    /// When it began and ended (a kill's end: the server ready again); absent when the
    /// round ended first.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub began_s: Option<f64>,
    /// When it ended, s.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ended_s: Option<f64>,
    /// From the round's measured start (or the window before's end) to its begin.
    pub before: FaultPart,
    /// The window as scheduled.
    pub during: FaultPart,
    /// From its end to the next window (or the round's end).
    pub after: FaultPart,
    /// The seconds it is held against: before it, once the window before it settled (or
    /// the round's first such seconds, when it had none of its own); absent when no
    /// operation ran in any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub baseline: Option<FaultPart>,
    /// From the begin to the first operation past the late bound or failed, ms.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub detect_ms: Option<f64>,
    /// The late bound: the baseline's p99, widened by the band, ms.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub late_ms: Option<f64>,
    /// From the end to the first moment from which the rule held, s; absent when it
    /// never held within the round (`unrecovered_s` then says for how long it was seen).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub recover_s: Option<f64>,
    /// How long after the end it was watched without the rule holding, s.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub unrecovered_s: Option<f64>,
    /// Successes expected in the window as it happened, at the baseline's rate.
    pub expected: f64,
    /// Of those, the ones not done (0 when at least as many were).
    pub dip: f64,
    /// What a network fault did to connections.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub connections: Option<FaultConnections>,
    /// What went wrong in carrying the fault out.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub trouble: Option<String>,
    /// The rule its recovery was judged by.
    pub rule: RecoveryRule,
    /// The teams' writes acknowledged while it was on, and how long they took to be
    /// seen; absent without teams.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub visibility: Option<super::VisibilityRow>,
    /// A `command` fault's commands as they ran.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub commands: Vec<FaultCommand>,
    /// The message ledger's share of it: what was lost, duplicated and redelivered of the
    /// messages sent before and during it; absent when no message was stamped.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub messages: Option<WindowMessages>,
}

/// One command of a `command` fault, as it ran.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct FaultCommand {
    /// `run` (at the window's begin) or `undo` (at its end).
    pub what: String,
    pub command: String,
    /// Its exit code; absent when it was killed or never started.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub exit: Option<i32>,
    /// Killed after its timeout.
    #[serde(default)]
    pub timed_out: bool,
    pub took_s: f64,
    /// Where its output is.
    pub log: String,
}

/// Each window's messages, from the run's ledger: the window's place in its round is the
/// place its timeline gave it, by begin.
pub(super) fn add_messages(rounds: &mut [super::RoundReport], ledger: &Ledger) {
    let of = |r: &super::RoundReport| {
        Some((
            u16::try_from(r.index).ok()?,
            u16::try_from(r.faults.len()).ok()?,
        ))
    };
    let windows: BTreeMap<u16, u16> = rounds
        .iter()
        .filter(|r| !r.faults.is_empty())
        .filter_map(of)
        .collect();
    if windows.is_empty() {
        return;
    }
    let by = ledger.by_window(&windows);
    for r in rounds.iter_mut() {
        let Some((round, _)) = of(r) else {
            continue;
        };
        for (k, f) in r.faults.iter_mut().enumerate() {
            f.messages = u16::try_from(k)
                .ok()
                .and_then(|k| by.get(&(round, k)))
                .copied();
        }
    }
}

/// The windows of round `r` of workload `w`, judged by its `recovery:`.
pub(super) fn of_round(
    w: &crate::workload::Workload,
    r: &crate::engine::RoundResult,
) -> Vec<FaultWindow> {
    let rule = RecoveryRule {
        band: w.recovery.band,
        hold_s: w.recovery.hold.as_secs_f64(),
        percentile: w.recovery.percentile,
    };
    let mut windows = of(&r.faults, &r.stats.windows, rule, r.elapsed.as_secs_f64());
    // The teams' writes made while each window was on, in the same order of begin.
    if let Some(v) = &r.products.visibility {
        for (f, t) in windows.iter_mut().zip(&v.by_fault) {
            f.visibility = Some(super::visibility::row("writes in the window".into(), t));
        }
    }
    windows
}

/// The windows of a round: what happened (`done`) beside what the operations did
/// (`stats`, in the same order of begin), judged by `rule`; `round_s` is the round's
/// clock.
pub(super) fn of(
    done: &[crate::fault::Window],
    stats: &[WindowStats],
    rule: RecoveryRule,
    round_s: f64,
) -> Vec<FaultWindow> {
    let mut done: Vec<&crate::fault::Window> = done.iter().collect();
    done.sort_by_key(|w| w.at);
    // A window too soon after the one before it to have settled seconds of its own is
    // held against the round's first undisturbed seconds.
    let first = stats.iter().map(|s| &s.baseline).find(|b| usable(b));
    done.iter()
        .zip(stats)
        .map(|(d, s)| {
            let base = Some(&s.baseline).filter(|b| usable(b)).or(first);
            window(d, s, base, rule, round_s)
        })
        .collect()
}

/// Seconds with successes in them, to hold a window against.
fn usable(p: &crate::metrics::windows::Part) -> bool {
    p.to_us > p.from_us && !p.latency.is_empty()
}

fn window(
    d: &crate::fault::Window,
    s: &WindowStats,
    base: Option<&crate::metrics::windows::Part>,
    rule: RecoveryRule,
    round_s: f64,
) -> FaultWindow {
    let secs = |us: u64| us as f64 / 1e6;
    let end_s = round_s.max(secs(s.end_us));
    let [before, during, after] = &s.parts;
    let part = |p: &crate::metrics::windows::Part| part_of(p, end_s);
    let p99_base = base
        .filter(|b| !b.latency.is_empty())
        .map(|b| b.latency.value_at_quantile(0.99));
    let late_us = p99_base.map(|p| (p as f64 * (1.0 + rule.band)).ceil() as u64);
    // Without seconds to hold it against, only a failure shows the fault.
    let detect_ms = s
        .detected_us(late_us.unwrap_or(u64::MAX))
        .map(|t| secs(t.saturating_sub(s.at_us)) * 1000.0);
    let ended = d.ended.map_or(secs(s.end_us), |e| e.as_secs_f64());
    let (recover_s, unrecovered_s) = match base {
        Some(b) => recovery(s, b, rule, ended, round_s),
        None => (None, None),
    };
    // Over the window as it happened (a killed server is down until it is ready again).
    let began = d.began.map_or(secs(s.at_us), |b| b.as_secs_f64());
    let expected = base.map_or(0.0, |b| {
        b.ended_ok as f64 / secs(b.to_us - b.from_us) * (ended - began).max(0.0)
    });
    let done = ended_ok_between(s, began, ended);
    FaultWindow {
        fault: d.text.clone(),
        entry: d.index,
        at_s: d.at.as_secs_f64(),
        until_s: d.until.as_secs_f64(),
        began_s: d.began.map(|b| b.as_secs_f64()),
        ended_s: d.ended.map(|e| e.as_secs_f64()),
        before: part(before),
        during: part(during),
        after: part(after),
        baseline: base.map(part),
        detect_ms,
        late_ms: late_us.map(|l| l as f64 / 1000.0),
        recover_s,
        unrecovered_s,
        expected,
        dip: match base {
            Some(_) => (expected - done as f64).max(0.0),
            None => 0.0,
        },
        connections: d.connections.map(|c| FaultConnections {
            touched: c.touched,
            drawn: c.drawn,
            reset: c.reset,
            closed: c.closed,
            refused: c.refused,
        }),
        trouble: d.trouble.clone(),
        rule,
        visibility: None,
        commands: d
            .commands
            .iter()
            .map(|c| FaultCommand {
                what: c.what.to_string(),
                command: c.command.clone(),
                exit: c.exit,
                timed_out: c.timed_out,
                took_s: c.took.as_secs_f64(),
                log: c.log.clone(),
            })
            .collect(),
        messages: None,
    }
}

fn part_of(p: &crate::metrics::windows::Part, end_s: f64) -> FaultPart {
    let from_s = p.from_us as f64 / 1e6;
    let to_s = match p.to_us {
        u64::MAX => end_s,
        t => t as f64 / 1e6,
    };
    let ms =
        |q: f64| (!p.latency.is_empty()).then(|| p.latency.value_at_quantile(q) as f64 / 1000.0);
    let span = to_s - from_s;
    FaultPart {
        from_s,
        to_s,
        ops: p.started(),
        ok: p.latency.len(),
        ops_per_s: match span > 0.0 {
            true => p.latency.len() as f64 / span,
            false => 0.0,
        },
        p50_ms: ms(0.5),
        p99_ms: ms(0.99),
        errors: ErrorClass::ALL
            .iter()
            .filter(|c| p.errors[c.index()] > 0)
            .map(|c| (*c, p.errors[c.index()]))
            .collect(),
        connections_opened: p.opened,
        ended_ok: p.ended_ok,
    }
}

/// The first tick from the window's end from which every second of the hold has its
/// successes started within the band of the rate before, and its percentile at most
/// the band above the one before; from `ended` (s) to it. When none does while the
/// round's clock lasts: how long after the end it was watched for.
fn recovery(
    s: &WindowStats,
    base: &crate::metrics::windows::Part,
    rule: RecoveryRule,
    ended: f64,
    round_s: f64,
) -> (Option<f64>, Option<f64>) {
    let rate = base.latency.len() as f64 / ((base.to_us - base.from_us) as f64 / 1e6);
    let q = (rule.percentile / 100.0).clamp(0.0, 1.0);
    let pct = base.latency.value_at_quantile(q) as f64;
    let per_s = (1_000_000 / TICK_US) as usize;
    let hold = (rule.hold_s.max(1.0).round() as usize) * per_s;
    let tick_s = |k: usize| (s.ticks_from_us + k as u64 * TICK_US) as f64 / 1e6;
    // The first tick wholly after the fault's actual end.
    let first = s
        .ticks
        .iter()
        .enumerate()
        .position(|(k, _)| tick_s(k) >= ended - 1e-9)
        .unwrap_or(s.ticks.len());
    for k in first..s.ticks.len() {
        if tick_s(k + hold) > round_s + 1e-9 || k + hold > s.ticks.len() {
            return (None, Some((tick_s(k) - ended).max(0.0)));
        }
        let holds = (0..hold / per_s).all(|j| {
            let second = &s.ticks[k + j * per_s..k + (j + 1) * per_s];
            let ok: u32 = second.iter().map(|t| t.ok).sum();
            let within_rate = (ok as f64 - rate).abs() <= rule.band * rate;
            within_rate && percentile_of(second, q).is_none_or(|p| p <= pct * (1.0 + rule.band))
        });
        if holds {
            return (Some((tick_s(k) - ended).max(0.0)), None);
        }
    }
    (None, Some((tick_s(s.ticks.len()) - ended).max(0.0)))
}

/// Successes that ended in the ticks from `from` to `to` (s), to the tick.
fn ended_ok_between(s: &WindowStats, from: f64, to: f64) -> u64 {
    let tick = |t: f64| ((t * 1e6) as u64).saturating_sub(s.ticks_from_us) / TICK_US;
    let (a, b) = (tick(from) as usize, tick(to) as usize);
    s.ticks
        .iter()
        .take(b)
        .skip(a)
        .map(|t| u64::from(t.ended_ok))
        .sum()
}

/// The `q` quantile of the successes of `ticks`, µs (the middle of its bucket).
fn percentile_of(ticks: &[Tick], q: f64) -> Option<f64> {
    let mut sum = [0u64; TICK_BUCKETS];
    for b in ticks.iter().filter_map(|t| t.buckets.as_deref()) {
        for (a, b) in sum.iter_mut().zip(b.iter()) {
            *a += u64::from(*b);
        }
    }
    let n: u64 = sum.iter().sum();
    if n == 0 {
        return None;
    }
    let rank = ((q * n as f64).ceil() as u64).max(1);
    let mut seen = 0;
    for (k, c) in sum.iter().enumerate() {
        seen += c;
        if seen >= rank {
            return Some(bucket_bound_us(k) / 2f64.powf(0.125));
        }
    }
    None
}
