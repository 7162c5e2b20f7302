//! A lane's fault timeline made ready: checked against the run's targets and the servers
//! it started (a `kill` needs a server loadmix started), a loopback proxy put in front of
//! each of the target's ports when a network fault acts on it, and the started server
//! handed to the timeline as a [`Group`] it can pause, kill and start again.

use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio_util::sync::CancellationToken;

use super::RunError;
use super::shell::LaneShell;
use super::started::{StartSpec, Started};
use super::targets::NamedTarget;
use crate::fault::{Acts, Group, Injector, Phases, Proxy};
use crate::transport::Endpoint;
use crate::workload::Workload;

/// Refuse, before anything starts, a timeline this run cannot carry out: a `target:`
/// that no target is, a process fault on a target loadmix does not start, any fault in
/// one shard of a run (each shard would put its own).
pub(super) fn check(
    w: &Workload,
    targets: &[NamedTarget],
    starts: &[(String, StartSpec)],
    whole: bool,
) -> Result<(), RunError> {
    if let (Some(f), false) = (w.faults.first(), whole) {
        return Err(RunError::Usage(format!(
            "{}: faults act on a whole run: run it unsharded (every shard would put the same fault in again)",
            f.origin
        )));
    }
    for f in &w.faults {
        if let Some(t) = &f.target
            && !targets.iter().any(|n| &n.name == t)
        {
            let names: Vec<&str> = targets.iter().map(|n| n.name.as_str()).collect();
            return Err(RunError::Usage(format!(
                "{}: fault {}: no target is named '{t}' (this run's: {})",
                f.origin,
                f.text,
                names.join(", ")
            )));
        }
        if f.action.on_process() {
            for t in targets
                .iter()
                .filter(|n| f.target.as_deref().is_none_or(|t| t == n.name))
            {
                if !starts.iter().any(|(n, _)| *n == t.name) {
                    return Err(RunError::Usage(format!(
                        "{}: fault {}: loadmix did not start target '{}': give it --start {}=COMMAND (and --ready), or name another target",
                        f.origin,
                        f.action.name(),
                        t.name,
                        t.name
                    )));
                }
            }
        }
    }
    Ok(())
}

/// The timeline for target `t`, with a proxy in front of each of `endpoint`'s ports
/// (the endpoint then points at them) when a network fault acts on it; `None` when no
/// fault does.
pub(super) async fn injector(
    w: &Workload,
    t: &NamedTarget,
    endpoint: &mut Endpoint,
    group: Option<Arc<StartedGroup>>,
    dir: &std::path::Path,
) -> Result<Option<Arc<Injector>>, RunError> {
    let mine: Vec<_> = w
        .faults
        .iter()
        .filter(|f| f.target.as_deref().is_none_or(|n| n == t.name))
        .collect();
    if mine.is_empty() {
        return Ok(None);
    }
    let mut proxies = Vec::new();
    if mine.iter().any(|f| f.action.on_network()) {
        let proxy = |to| async move {
            Proxy::start(to, w.run.seed).await.map_err(|e| {
                RunError::Unreachable(format!(
                    "target {}: the fault proxy could not listen on loopback: {e}",
                    t.name
                ))
            })
        };
        let p = proxy(endpoint.addr).await?;
        endpoint.addr = p.addr();
        proxies.push(p);
        for (_, a) in endpoint.ports.iter_mut() {
            let p = proxy(*a).await?;
            *a = p.addr();
            proxies.push(p);
        }
        for p in &proxies {
            eprintln!(
                "loadmix: {}: fault proxy on {} in front of {}",
                t.name,
                p.addr(),
                p.upstream()
            );
        }
    }
    let acts = Acts {
        proxies,
        group: group.map(|g| g as Arc<dyn Group>),
        // Command logs go beside the report, in the lane's `faults/`.
        shell: Some(Arc::new(LaneShell {
            target: t.name.clone(),
            dir: dir.join("faults"),
        })),
    };
    Ok(Some(Arc::new(Injector::new(
        &t.name,
        &w.faults,
        acts,
        w.run.warmup,
        w.recovery.hold,
        // Faults act on whole runs only, whose stamps carry the process's clock.
        Arc::new(Phases::new(|| {
            crate::protocol::StampClock::Monotonic.now_ns()
        })),
    ))))
}

/// A server `--start` started, shared by its lane (which stops it) and its timeline
/// (which may kill it and start it again).
pub(super) struct StartedGroup {
    target: String,
    spec: StartSpec,
    /// The folder it was started in (its output there, appended to).
    dir: std::path::PathBuf,
    /// Its group as the run watches it, moved to each new start's.
    group: crate::monitor::GroupId,
    stop: CancellationToken,
    server: tokio::sync::Mutex<Option<Started>>,
}

impl StartedGroup {
    pub(super) fn new(
        target: &str,
        spec: &StartSpec,
        stop: &CancellationToken,
        s: Started,
    ) -> Self {
        StartedGroup {
            target: target.to_string(),
            spec: spec.clone(),
            dir: s.dir().to_path_buf(),
            group: s.group().clone(),
            stop: stop.clone(),
            server: tokio::sync::Mutex::new(Some(s)),
        }
    }

    /// Stop it for good (the lane is over).
    pub(super) async fn stop(&self) {
        if let Some(s) = self.server.lock().await.take() {
            s.stop().await;
        }
    }

    fn gone(&self) -> String {
        format!("{}'s server is not running", self.target)
    }
}

#[async_trait::async_trait]
impl Group for StartedGroup {
    async fn pause(&self) -> Result<(), String> {
        let s = self.server.lock().await;
        let s = s.as_ref().ok_or_else(|| self.gone())?;
        s.hold(true);
        Ok(())
    }

    async fn resume(&self) -> Result<(), String> {
        let s = self.server.lock().await;
        let s = s.as_ref().ok_or_else(|| self.gone())?;
        s.hold(false);
        Ok(())
    }

    async fn kill(&self) -> Result<(), String> {
        let s = self.server.lock().await.take().ok_or_else(|| self.gone())?;
        eprintln!("loadmix: fault: SIGKILL to {}'s server", self.target);
        s.kill().await;
        Ok(())
    }

    async fn terminate(&self) -> Result<(), String> {
        let s = self.server.lock().await.take().ok_or_else(|| self.gone())?;
        eprintln!("loadmix: fault: SIGTERM to {}'s server", self.target);
        s.terminate().await;
        Ok(())
    }

    async fn start_again(&self) -> Result<Duration, String> {
        let mut held = self.server.lock().await;
        if held.is_some() {
            return Ok(Duration::ZERO);
        }
        let began = Instant::now();
        let mut s = Started::start(&self.target, &self.spec, &self.dir, &self.stop)
            .await
            .map_err(|e| e.to_string())?;
        s.adopt(&self.group);
        *held = Some(s);
        Ok(began.elapsed())
    }
}
