//! Faults put into a run: one target's timeline carried out on each measured round's
//! clock, on the loopback proxies in front of its ports (`proxy.rs`), on the process
//! group loadmix started for it (through [`Group`], which the run gives) or by a command
//! of the user's (through [`Shell`], which the run gives too). Whatever ends
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

/// Where a `command` fault's commands run, as the run gives it.
#[async_trait::async_trait]
pub(crate) trait Shell: Send + Sync {
    /// Run `command` with `sh -c` in a process group of its own, its output to the file
    /// `log` names beside the report, the whole group killed past `timeout`; `env` is
    /// what it is told of the window.
    async fn run(&self, command: &str, timeout: Duration, log: &str, env: &[(&str, String)])
    -> Ran;
}

/// What a `command` fault's command did.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Ran {
    /// `run` (at the window's begin) or `undo` (at its end).
    pub what: &'static str,
    pub command: String,
    /// Its exit code; `None` when it was killed (its timeout) or never started.
    pub exit: Option<i32>,
    pub timed_out: bool,
    pub took: Duration,
    /// Its output, beside the report.
    pub log: String,
    /// Why it could not be started.
    pub error: Option<String>,
}

impl Ran {
    /// What went wrong with it, when something did.
    fn trouble(&self) -> Option<String> {
        let what = format!("{} `{}`", self.what, self.command);
        if let Some(e) = &self.error {
            return Some(format!("{what}: {e}"));
        }
        if self.timed_out {
            return Some(format!(
                "{what}: killed after its timeout ({:.0}s); output in {}",
                self.took.as_secs_f64(),
                self.log
            ));
        }
        match self.exit {
            Some(0) => None,
            Some(c) => Some(format!("{what}: exited {c}; output in {}", self.log)),
            None => Some(format!("{what}: ended by a signal; output in {}", self.log)),
        }
    }
}

/// What a target's timeline acts on: the proxies in front of its ports (for network
/// faults), the server loadmix started for it, and the shell for commands.
#[derive(Default)]
pub(crate) struct Acts {
    pub proxies: Vec<Arc<Proxy>>,
    pub group: Option<Arc<dyn Group>>,
    pub shell: Option<Arc<dyn Shell>>,
}

/// A window's edge, as the timeline tells whoever watches the round: its name when it
/// began; its place in the round and when (on the round's clock) it ended.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Edge<'a> {
    Began { text: &'a str },
    Ended { k: usize, at: Duration },
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
    /// became ready, a command that failed).
    pub trouble: Option<String>,
    /// A `command` fault's commands, as they ran.
    pub commands: Vec<Ran>,
}

impl Window {
    /// Adds `t` to what went wrong.
    fn troubled(&mut self, t: String) {
        self.trouble = Some(match self.trouble.take() {
            Some(before) => format!("{before}; {t}"),
            None => t,
        });
    }
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
    shell: Option<Arc<dyn Shell>>,
    /// The round's warm-up, and how long a window takes to settle (the recovery hold):
    /// what each window is held against starts after both.
    warmup: Duration,
    settle: Duration,
    /// Where each round stands in the timeline, for the message ledger.
    phases: Arc<Phases>,
}

impl Injector {
    /// The entries of `timeline` that act on `target`, on what `acts` gives.
    pub(crate) fn new(
        target: &str,
        timeline: &[Fault],
        acts: Acts,
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
            proxies: acts.proxies,
            group: acts.group,
            shell: acts.shell,
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
    /// began is always ended; `edge` is told of each begin and end. The round's phases
    /// start afresh when this is called, before its users send anything, not when the
    /// future first runs.
    pub(crate) fn round(
        self: Arc<Self>,
        round: u32,
        start: Instant,
        over: CancellationToken,
        edge: impl Fn(Edge<'_>) + Send + 'static,
    ) -> impl std::future::Future<Output = Vec<Window>> + Send + 'static {
        self.phases.round_begins(round);
        self.carry_out(round, start, over, edge)
    }

    async fn carry_out(
        self: Arc<Self>,
        round: u32,
        start: Instant,
        over: CancellationToken,
        edge: impl Fn(Edge<'_>) + Send + 'static,
    ) -> Vec<Window> {
        let mut todo: Vec<(usize, &Fault)> = self.of_round(round).collect();
        todo.sort_by_key(|(_, f)| f.at);
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
                commands: Vec::new(),
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
            edge(Edge::Began { text: &f.text });
            let counts = self.begin(f, round, i, &mut w).await;
            tokio::select! {
                _ = tokio::time::sleep_until(start + f.until()) => {}
                _ = over.cancelled() => {}
            }
            self.end(f, round, i, &mut w).await;
            let at = start.elapsed();
            w.ended = Some(at);
            edge(Edge::Ended { k, at });
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
        if let FaultAction::Command { run, timeout, .. } = &f.action {
            self.command("run", run, *timeout, round, i, w).await;
            return None;
        }
        if f.action.on_network() {
            let seq = u64::from(round) << 32 | i as u64;
            return Some(self.proxies.iter().map(|p| p.begin(f, seq)).collect());
        }
        let Some(g) = &self.group else {
            w.troubled("no started server to act on".into());
            return None;
        };
        let done = match f.action {
            FaultAction::Pause => g.pause().await,
            FaultAction::Kill => g.kill().await,
            _ => g.terminate().await,
        };
        if let Err(e) = done {
            w.troubled(e);
        }
        None
    }

    async fn end(&self, f: &Fault, round: u32, i: usize, w: &mut Window) {
        if let FaultAction::Command { undo, timeout, .. } = &f.action {
            if let Some(undo) = undo {
                self.command("undo", undo, *timeout, round, i, w).await;
            }
            return;
        }
        if f.action.on_network() {
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
            w.troubled(e);
        }
    }

    /// A command fault's `run` or `undo`: run to its end or its timeout, whatever else
    /// happens (a stop included: an `undo` puts back what `run` did).
    async fn command(
        &self,
        what: &'static str,
        command: &str,
        timeout: Duration,
        round: u32,
        i: usize,
        w: &mut Window,
    ) {
        let Some(shell) = &self.shell else {
            w.troubled("no shell to run commands in".into());
            return;
        };
        let log = format!("round-{round}-fault-{}-{what}.log", i + 1);
        let env = [
            ("LOADMIX_TARGET", self.target.clone()),
            ("LOADMIX_ROUND", round.to_string()),
            ("LOADMIX_FAULT", what.to_string()),
        ];
        let mut ran = shell.run(command, timeout, &log, &env).await;
        ran.what = what;
        if let Some(t) = ran.trouble() {
            w.troubled(t);
        }
        w.commands.push(ran);
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
