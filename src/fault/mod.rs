//! Faults put into a run: one target's timeline carried out on each measured round's
//! clock, on the loopback proxies in front of its ports (`proxy.rs`) or on the process
//! group loadmix started for it (through [`Group`], which the run gives). Whatever ends
//! a round (its clock, a stop, a signal), a fault that began is ended: the group gets
//! SIGCONT or is started again, the proxy passes bytes untouched. What each window did
//! to the operations is measured by `metrics::windows` and judged by the report.

mod link;
mod phases;
mod proxy;
mod pump;

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

pub(crate) use phases::Phases;
pub(crate) use proxy::Proxy;

use crate::workload::faults::{Fault, FaultAction};

/// A process group loadmix started for a target, as the timeline acts on it.
#[async_trait::async_trait]
pub(crate) trait Group: Send + Sync {
    /// SIGSTOP to the group.
    async fn pause(&self) -> Result<(), String>;
    /// SIGCONT to the group.
    async fn resume(&self) -> Result<(), String>;
    /// SIGKILL to the group, and wait for its leader.
    async fn kill(&self) -> Result<(), String>;
    /// SIGTERM to the group, SIGKILL after the stop grace, and wait for its leader.
    async fn terminate(&self) -> Result<(), String>;
    /// Start the same command again and wait until it is ready; how long that took.
    async fn start_again(&self) -> Result<Duration, String>;
}

/// One window as it happened.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Window {
    /// Its entry in the timeline (0-based).
    pub index: usize,
    /// As the report names it (`latency 50ms`).
    pub text: String,
    /// Scheduled begin and end on the round's clock.
    pub at: Duration,
    pub until: Duration,
    /// When it began and ended, on the round's clock (a kill's end is when the server
    /// was ready again); `None` when the round ended first.
    pub began: Option<Duration>,
    pub ended: Option<Duration>,
    /// Connections the proxies saw in it, when it was a network fault.
    pub connections: Option<Connections>,
    /// What went wrong in carrying it out (a group already gone, a restart that never
    /// became ready).
    pub trouble: Option<String>,
}

/// What a network window did to connections, over the target's proxies.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Connections {
    pub touched: u64,
    pub drawn: u64,
    pub reset: u64,
    pub closed: u64,
    pub refused: u64,
}

/// One target's timeline and what it acts on.
pub(crate) struct Injector {
    target: String,
    faults: Vec<Fault>,
    proxies: Vec<Arc<Proxy>>,
    group: Option<Arc<dyn Group>>,
    /// The round's warm-up, and how long a window takes to settle (the recovery hold):
    /// what each window is held against starts after both.
    warmup: Duration,
    settle: Duration,
    /// Where each round stands in the timeline, for the message ledger.
    phases: Arc<Phases>,
}

impl Injector {
    /// The entries of `timeline` that act on `target`, on its `proxies` and `group`.
    pub(crate) fn new(
        target: &str,
        timeline: &[Fault],
        proxies: Vec<Arc<Proxy>>,
        group: Option<Arc<dyn Group>>,
        warmup: Duration,
        settle: Duration,
        phases: Arc<Phases>,
    ) -> Injector {
        Injector {
            target: target.to_string(),
            faults: timeline
                .iter()
                .filter(|f| f.target.as_deref().is_none_or(|t| t == target))
                .cloned()
                .collect(),
            proxies,
            group,
            warmup,
            settle,
            phases,
        }
    }

    /// Where a round stands in the timeline, as the users' ledgers read it.
    pub(crate) fn phases(&self) -> Arc<Phases> {
        self.phases.clone()
    }

    /// The windows measured round `round` has, as scheduled, in order: where the
    /// seconds each is held against start (the warm-up's end, or the window before's end
    /// and its settling), its begin and its end.
    pub(crate) fn scheduled(&self, round: u32) -> Vec<(Duration, Duration, Duration)> {
        let mut s: Vec<(Duration, Duration)> = self
            .of_round(round)
            .map(|(_, f)| (f.at, f.until()))
            .collect();
        s.sort();
        let mut settled = self.warmup;
        s.into_iter()
            .map(|(at, until)| {
                let from = settled.min(at);
                settled = until + self.settle;
                (from, at, until)
            })
            .collect()
    }

    fn of_round(&self, round: u32) -> impl Iterator<Item = (usize, &Fault)> {
        self.faults
            .iter()
            .enumerate()
            .filter(move |(_, f)| f.applies(round, &self.target))
    }

    /// Carry out round `round`'s windows on the clock that started at `start`, until
    /// the last has ended or `over` (the round's end, a stop) comes; a window that
    /// began is always ended.
    pub(crate) async fn round(
        self: Arc<Self>,
        round: u32,
        start: Instant,
        over: CancellationToken,
    ) -> Vec<Window> {
        let mut todo: Vec<(usize, &Fault)> = self.of_round(round).collect();
        todo.sort_by_key(|(_, f)| f.at);
        self.phases.round_begins();
        let mut out = Vec::new();
        for (k, (i, f)) in todo.into_iter().enumerate() {
            let mut w = Window {
                index: i,
                text: f.text.clone(),
                at: f.at,
                until: f.until(),
                began: None,
                ended: None,
                connections: None,
                trouble: None,
            };
            if over.is_cancelled() {
                out.push(w);
                continue;
            }
            tokio::select! {
                _ = tokio::time::sleep_until(start + f.at) => {}
                _ = over.cancelled() => { out.push(w); continue; }
            }
            w.began = Some(start.elapsed());
            self.phases.began(k);
            let counts = self.begin(f, round, i, &mut w).await;
            tokio::select! {
                _ = tokio::time::sleep_until(start + f.until()) => {}
                _ = over.cancelled() => {}
            }
            self.end(f, &mut w).await;
            w.ended = Some(start.elapsed());
            self.phases.ended(k);
            w.connections = counts.map(|c| sum_counts(&c));
            out.push(w);
        }
        out
    }

    async fn begin(
        &self,
        f: &Fault,
        round: u32,
        i: usize,
        w: &mut Window,
    ) -> Option<Vec<Arc<link::Counts>>> {
        if !f.action.on_process() {
            let seq = u64::from(round) << 32 | i as u64;
            return Some(self.proxies.iter().map(|p| p.begin(f, seq)).collect());
        }
        let Some(g) = &self.group else {
            w.trouble = Some("no started server to act on".into());
            return None;
        };
        let done = match f.action {
            FaultAction::Pause => g.pause().await,
            FaultAction::Kill => g.kill().await,
            _ => g.terminate().await,
        };
        if let Err(e) = done {
            w.trouble = Some(e);
        }
        None
    }

    async fn end(&self, f: &Fault, w: &mut Window) {
        if !f.action.on_process() {
            for p in &self.proxies {
                p.end().await;
            }
            return;
        }
        let Some(g) = &self.group else {
            return;
        };
        let done = match f.action {
            FaultAction::Pause => g.resume().await,
            _ => g.start_again().await.map(|_| ()),
        };
        if let Err(e) = done {
            let before = w
                .trouble
                .take()
                .map(|t| format!("{t}; "))
                .unwrap_or_default();
            w.trouble = Some(format!("{before}{e}"));
        }
    }

    /// The proxies stop: the run is over.
    pub(crate) fn stop(&self) {
        for p in &self.proxies {
            p.stop();
        }
    }
}

fn sum_counts(c: &[Arc<link::Counts>]) -> Connections {
    let mut s = Connections::default();
    for c in c {
        s.touched += c.touched.load(Ordering::Relaxed);
        s.drawn += c.drawn.load(Ordering::Relaxed);
        s.reset += c.reset.load(Ordering::Relaxed);
        s.closed += c.closed.load(Ordering::Relaxed);
        s.refused += c.refused.load(Ordering::Relaxed);
    }
    s
}
