//! Configurations loadmix starts itself (`--start NAME=COMMAND`): each target's server
//! started from a scratch folder of its own, in a process group of its own, with the
//! environment the command line gives it; waited for until it is ready (a port that
//! accepts, or a URL that answers); watched as a group, so no PID is passed; and stopped
//! when its rounds are over, whatever ended them: `--stop`'s command, else SIGTERM to the
//! group, then SIGKILL. If loadmix itself dies, however it dies (`kill -9` too), the
//! server's group is stopped all the same: beside each server a reaper runs (loadmix
//! itself, `loadmix __reap`, in a group of its own, deaf to the terminal's signals),
//! holding a pipe from the run; when the pipe closes without the run's word that it
//! stopped the server, the reaper sends the group SIGTERM, and SIGKILL after the grace
//! ([`STOP_GRACE`]). The kernel also sends the command's shell SIGTERM when loadmix dies.
//!
//! Commands come only from the command line, never from a workload file, and each is
//! printed before it runs.

use std::path::{Path, PathBuf};
use std::time::Duration;

use tokio::process::{Child, Command};
use tokio_util::sync::CancellationToken;

/// How long a stop command, then SIGTERM, may take before the group is killed.
const STOP_GRACE: Duration = Duration::from_secs(20);
/// How often readiness is probed.
const PROBE_EVERY: Duration = Duration::from_millis(100);

/// How to know a started server is ready.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Ready {
    /// `tcp://HOST:PORT`: the port accepts a connection.
    Tcp(String),
    /// `http://HOST:PORT/PATH`: the URL answers anything at all.
    Http { addr: String, path: String },
}

impl Ready {
    /// `tcp://127.0.0.1:61613` or `http://127.0.0.1:8080/health` (loopback only).
    pub(crate) fn parse(s: &str) -> Result<Ready, String> {
        let (scheme, rest) = s
            .split_once("://")
            .ok_or_else(|| format!("--ready {s}: give tcp://HOST:PORT or http://HOST:PORT/PATH"))?;
        let (addr, path) = match rest.split_once('/') {
            Some((a, p)) => (a, format!("/{p}")),
            None => (rest, "/".to_string()),
        };
        let host = addr.rsplit_once(':').map(|(h, _)| h).unwrap_or(addr);
        let host = host.trim_start_matches('[').trim_end_matches(']');
        if !["127.0.0.1", "localhost", "::1"].contains(&host) {
            return Err(format!(
                "--ready {s}: a started server is on this machine: give 127.0.0.1, ::1 or localhost"
            ));
        }
        if addr
            .rsplit_once(':')
            .is_none_or(|(_, p)| p.parse::<u16>().is_err())
        {
            return Err(format!("--ready {s}: name the port (HOST:PORT)"));
        }
        match scheme {
            "tcp" => Ok(Ready::Tcp(addr.to_string())),
            "http" => Ok(Ready::Http {
                addr: addr.to_string(),
                path,
            }),
            _ => Err(format!("--ready {s}: tcp:// or http://")),
        }
    }

    /// Whether the server is ready now.
    async fn probe(&self) -> bool {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        match self {
            Ready::Tcp(addr) => tokio::net::TcpStream::connect(addr.as_str()).await.is_ok(),
            Ready::Http { addr, path } => {
                let Ok(mut s) = tokio::net::TcpStream::connect(addr.as_str()).await else {
                    return false;
                };
                let req =
                    format!("GET {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n");
                if s.write_all(req.as_bytes()).await.is_err() {
                    return false;
                }
                let mut head = [0u8; 12];
                matches!(s.read(&mut head).await, Ok(n) if n >= 12 && head.starts_with(b"HTTP/"))
            }
        }
    }
}

/// What the command line says of one target's server.
#[derive(Debug, Clone, Default)]
pub(crate) struct StartSpec {
    pub command: String,
    pub ready: Option<Ready>,
    pub stop: Option<String>,
    pub env: Vec<(String, String)>,
    /// How long it may take to be ready.
    pub ready_timeout: Duration,
}

/// The flags that start servers, as given: `--start NAME=COMMAND`, `--ready NAME=URL`,
/// `--stop NAME=COMMAND`, `--start-env NAME:KEY=VALUE`.
#[derive(Debug, Clone, Default)]
pub struct StartFlags {
    pub start: Vec<String>,
    pub ready: Vec<String>,
    pub stop: Vec<String>,
    pub env: Vec<String>,
    pub ready_timeout: Duration,
}

/// Each target's spec, the flags checked against the targets: every flag names a target
/// that `--start` starts, and only targets reached by URL are started.
pub(crate) fn specs(
    f: &StartFlags,
    targets: &[super::NamedTarget],
) -> Result<Vec<(String, StartSpec)>, String> {
    let split = |flag: &str, s: &str| -> Result<(String, String), String> {
        s.split_once('=')
            .map(|(n, v)| (n.trim().to_string(), v.to_string()))
            .filter(|(n, v)| !n.is_empty() && !v.trim().is_empty())
            .ok_or_else(|| format!("{flag} {s}: give NAME=..."))
    };
    let mut out: Vec<(String, StartSpec)> = Vec::new();
    for s in &f.start {
        let (name, command) = split("--start", s)?;
        let Some(t) = targets.iter().find(|t| t.name == name) else {
            return Err(format!("--start {name}=...: no target named {name}"));
        };
        if matches!(t.spec, crate::workload::TargetSpec::Embedded { .. }) {
            return Err(format!(
                "--start {name}: an embedded target is started by loadmix already"
            ));
        }
        if out.iter().any(|(n, _)| *n == name) {
            return Err(format!("--start {name}: given twice"));
        }
        out.push((
            name,
            StartSpec {
                command,
                ready_timeout: f.ready_timeout,
                ..StartSpec::default()
            },
        ));
    }
    let of = |out: &[(String, StartSpec)], flag: &str, name: &str| -> Result<usize, String> {
        out.iter()
            .position(|(n, _)| n == name)
            .ok_or_else(|| format!("{flag} {name}: no --start {name}=COMMAND to go with it"))
    };
    for s in &f.ready {
        let (name, url) = split("--ready", s)?;
        let i = of(&out, "--ready", &name)?;
        out[i].1.ready = Some(Ready::parse(&url)?);
    }
    for s in &f.stop {
        let (name, cmd) = split("--stop", s)?;
        let i = of(&out, "--stop", &name)?;
        out[i].1.stop = Some(cmd);
    }
    for s in &f.env {
        let (name, kv) = s
            .split_once(':')
            .ok_or_else(|| format!("--start-env {s}: give NAME:KEY=VALUE"))?;
        let i = of(&out, "--start-env", name.trim())?;
        let (k, v) = kv
            .split_once('=')
            .filter(|(k, _)| {
                !k.is_empty() && k.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_')
            })
            .ok_or_else(|| {
                format!("--start-env {s}: give NAME:KEY=VALUE, KEY in letters, digits and _")
            })?;
        out[i].1.env.push((k.to_string(), v.to_string()));
    }
    if let Some((name, _)) = out.iter().find(|(_, s)| s.ready.is_none()) {
        return Err(format!(
            "--start {name}: say how to know it is ready: --ready {name}=tcp://127.0.0.1:PORT (or http://...)"
        ));
    }
    Ok(out)
}

/// Why a server could not be started.
#[derive(Debug, thiserror::Error)]
pub(crate) enum StartError {
    #[error("{target}: cannot start `{command}`: {source}")]
    Spawn {
        target: String,
        command: String,
        source: std::io::Error,
    },
    #[error("{target}: the started server exited ({status}) before it was ready; its output is in {}", dir.display())]
    Exited {
        target: String,
        status: String,
        dir: PathBuf,
    },
    #[error("{target}: not ready after {timeout:?}; its output is in {}", dir.display())]
    NotReady {
        target: String,
        timeout: Duration,
        dir: PathBuf,
    },
    #[error("{target}: stopped before the server was ready")]
    Stopped { target: String },
}

/// A started server: its process group, and where its output goes.
pub(crate) struct Started {
    target: String,
    child: Child,
    pgid: u32,
    /// The group as the run's watch follows it.
    group: crate::monitor::GroupId,
    dir: PathBuf,
    spec: StartSpec,
    /// The group's reaper: a byte on its stdin says the run stopped the group itself.
    reaper: Option<std::process::Child>,
}

impl Started {
    /// Start `spec`'s command with `sh -c` in `dir` (created), its output into
    /// `dir/server.out` and `dir/server.err`, and wait until it is ready.
    pub(crate) async fn start(
        target: &str,
        spec: &StartSpec,
        dir: &Path,
        stop: &CancellationToken,
    ) -> Result<Started, StartError> {
        let spawn_err = |source| StartError::Spawn {
            target: target.into(),
            command: spec.command.clone(),
            source,
        };
        std::fs::create_dir_all(dir).map_err(spawn_err)?;
        // Appended to: a server a fault starts again writes after what it wrote before.
        let open = |name: &str| {
            std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(dir.join(name))
        };
        let out = open("server.out").map_err(spawn_err)?;
        let err = open("server.err").map_err(spawn_err)?;
        eprintln!(
            "loadmix: starting {target}: sh -c {:?} in {}",
            spec.command,
            dir.display()
        );
        let mut cmd = group_command(&spec.command);
        cmd.current_dir(dir)
            .envs(spec.env.iter().map(|(k, v)| (k, v)))
            .stdout(out)
            .stderr(err);
        let child = cmd.spawn().map_err(spawn_err)?;
        let pgid = child.id().unwrap_or(0);
        let reaper = spawn_reaper(target, pgid);
        let mut started = Started {
            target: target.into(),
            child,
            pgid,
            group: crate::monitor::GroupId::new(pgid),
            dir: dir.to_path_buf(),
            spec: spec.clone(),
            reaper,
        };
        if let Err(e) = started.wait_ready(stop).await {
            started.stop().await;
            return Err(e);
        }
        Ok(started)
    }

    async fn wait_ready(&mut self, stop: &CancellationToken) -> Result<(), StartError> {
        let Some(ready) = self.spec.ready.clone() else {
            return Ok(());
        };
        let until = tokio::time::Instant::now() + self.spec.ready_timeout;
        loop {
            if ready.probe().await {
                return Ok(());
            }
            if let Ok(Some(status)) = self.child.try_wait() {
                return Err(StartError::Exited {
                    target: self.target.clone(),
                    status: status.to_string(),
                    dir: self.dir.clone(),
                });
            }
            if tokio::time::Instant::now() >= until {
                return Err(StartError::NotReady {
                    target: self.target.clone(),
                    timeout: self.spec.ready_timeout,
                    dir: self.dir.clone(),
                });
            }
            tokio::select! {
                _ = tokio::time::sleep(PROBE_EVERY) => {}
                _ = stop.cancelled() => return Err(StartError::Stopped { target: self.target.clone() }),
            }
        }
    }

    /// The started group, to watch as the target's server.
    pub(crate) fn watch(&self) -> crate::monitor::Watch {
        crate::monitor::group_watch(self.group.clone())
    }

    /// Started again after a fault: the watch of the group before follows this one.
    pub(crate) fn adopt(&mut self, group: &crate::monitor::GroupId) {
        group.moved_to(self.pgid);
        self.group = group.clone();
    }

    /// Its group, as watches follow it.
    pub(crate) fn group(&self) -> &crate::monitor::GroupId {
        &self.group
    }

    /// Stop the server: `--stop`'s command if there is one, else SIGTERM to its group;
    /// SIGKILL to the group if it is still there after the grace period. Said on stderr.
    pub(crate) async fn stop(mut self) {
        if let Some(cmd) = self.spec.stop.clone() {
            eprintln!("loadmix: stopping {}: sh -c {cmd:?}", self.target);
            let ran = Command::new("sh")
                .arg("-c")
                .arg(&cmd)
                .current_dir(&self.dir)
                .envs(self.spec.env.iter().map(|(k, v)| (k, v)))
                .stdin(std::process::Stdio::null())
                .status();
            match tokio::time::timeout(STOP_GRACE, ran).await {
                Ok(Ok(status)) if status.success() => {}
                Ok(Ok(status)) => {
                    eprintln!("loadmix: {}'s stop command ended {status}", self.target)
                }
                Ok(Err(e)) => eprintln!("loadmix: {}'s stop command did not run: {e}", self.target),
                Err(_) => eprintln!(
                    "loadmix: {}'s stop command took over {STOP_GRACE:?}",
                    self.target
                ),
            }
        } else {
            // A group a fault paused takes the TERM only once it runs again.
            signal_group(self.pgid, libc::SIGCONT);
            signal_group(self.pgid, libc::SIGTERM);
        }
        self.reap_group().await;
    }

    /// SIGSTOP (`true`) or SIGCONT (`false`) to the whole group: a fault's pause.
    pub(crate) fn hold(&self, stopped: bool) {
        signal_group(
            self.pgid,
            match stopped {
                true => libc::SIGSTOP,
                false => libc::SIGCONT,
            },
        );
    }

    /// A fault's kill: SIGKILL to the group at once, its leader waited for.
    pub(crate) async fn kill(mut self) {
        signal_group(self.pgid, libc::SIGKILL);
        self.reap_group().await;
    }

    /// A fault's restart: SIGTERM to the group (never `--stop`'s command, which may stop
    /// more than this group), SIGKILL after the grace.
    pub(crate) async fn terminate(mut self) {
        signal_group(self.pgid, libc::SIGCONT);
        signal_group(self.pgid, libc::SIGTERM);
        self.reap_group().await;
    }

    /// Where its output goes.
    pub(crate) fn dir(&self) -> &Path {
        &self.dir
    }

    /// Wait for the leader (SIGKILL to the group after the grace), then tell the reaper
    /// the group is gone.
    async fn reap_group(&mut self) {
        let exited = tokio::time::timeout(STOP_GRACE, self.child.wait()).await;
        if exited.is_err() {
            eprintln!(
                "loadmix: {} did not stop within {STOP_GRACE:?}: killed",
                self.target
            );
        }
        // Whatever the leader did, nothing of the group outlives the run.
        signal_group(self.pgid, libc::SIGKILL);
        let _ = self.child.wait().await;
        // The group is gone: the reaper is told so, leaves it be, and is waited for (it
        // ends as soon as its pipe closes), so that no reaper outlives its server.
        if let Some(mut reaper) = self.reaper.take() {
            use std::io::Write;
            if let Some(mut pipe) = reaper.stdin.take() {
                let _ = pipe.write_all(b"stopped");
            }
            let _ = reaper.wait();
        }
    }
}

/// Start the reaper of `target`'s group `pgid`: this program again, `__reap PGID GRACE`,
/// in a group of its own, reading its stdin. `None` (said) when it could not be
/// started; `None` too when this program is not loadmix (loadmix's library in a test).
fn spawn_reaper(target: &str, pgid: u32) -> Option<std::process::Child> {
    use std::os::unix::process::CommandExt;
    let me = std::env::current_exe().ok()?;
    let is_loadmix = me
        .file_name()
        .is_some_and(|n| n.to_string_lossy().starts_with("loadmix"));
    if pgid <= 1 || !is_loadmix {
        return None;
    }
    let spawned = std::process::Command::new(me)
        .args([
            "__reap",
            &pgid.to_string(),
            &STOP_GRACE.as_secs().to_string(),
        ])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::null())
        .process_group(0)
        .spawn();
    match spawned {
        Ok(child) => Some(child),
        Err(e) => {
            eprintln!(
                "loadmix: no reaper for {target} ({e}): if this run is killed, its server may outlive it"
            );
            None
        }
    }
}

/// The reaper's life (`loadmix __reap`): wait for the run's pipe to close; unless the
/// run said first that it stopped group `pgid` itself, send the group SIGTERM, and
/// SIGKILL if anything of it is left after `grace`. Terminal signals are ignored: the
/// run decides, by its pipe, and a Ctrl-C reaches the run.
pub(crate) fn reap(pgid: u32, grace: Duration) {
    use std::io::Read;
    for sig in [libc::SIGINT, libc::SIGTERM, libc::SIGHUP, libc::SIGPIPE] {
        // SAFETY: setting a signal's disposition to ignore touches no memory of ours.
        unsafe {
            libc::signal(sig, libc::SIG_IGN);
        }
    }
    let mut word = Vec::new();
    let _ = std::io::stdin().take(64).read_to_end(&mut word);
    if !word.is_empty() {
        return;
    }
    eprintln!("loadmix: the run ended without stopping its server (group {pgid}): SIGTERM");
    signal_group(pgid, libc::SIGTERM);
    let until = std::time::Instant::now() + grace;
    while group_alive(pgid) && std::time::Instant::now() < until {
        std::thread::sleep(Duration::from_millis(100));
    }
    if group_alive(pgid) {
        eprintln!("loadmix: group {pgid} still there after {grace:?}: SIGKILL");
        signal_group(pgid, libc::SIGKILL);
    }
}

/// `sh -c command` in a process group of its own (which a signal to the group reaches
/// whole), reading nothing, told SIGTERM when loadmix dies: a killed run leaves nothing
/// it started running.
pub(super) fn group_command(command: &str) -> Command {
    let mut cmd = Command::new("sh");
    cmd.arg("-c")
        .arg(command)
        .stdin(std::process::Stdio::null())
        .process_group(0)
        .kill_on_drop(false);
    // SAFETY: prctl is async-signal-safe; it only asks the kernel to send SIGTERM to the
    // child when its parent (loadmix) dies.
    unsafe {
        cmd.pre_exec(|| {
            libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGTERM);
            Ok(())
        });
    }
    cmd
}

/// Whether any process of group `pgid` is left.
fn group_alive(pgid: u32) -> bool {
    let Ok(g) = libc::pid_t::try_from(pgid) else {
        return false;
    };
    // SAFETY: kill(2) with signal 0 only asks whether the group exists.
    g > 1 && unsafe { libc::kill(-g, 0) } == 0
}

/// Send `sig` to every process of group `pgid` (never to group 0, this process's own).
pub(super) fn signal_group(pgid: u32, sig: libc::c_int) {
    let Ok(g) = libc::pid_t::try_from(pgid) else {
        return;
    };
    if g > 1 {
        // SAFETY: kill(2) with a negative pid signals that process group; no memory is
        // touched.
        unsafe {
            libc::kill(-g, sig);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn readiness_is_a_loopback_port_or_url() {
        assert_eq!(
            Ready::parse("tcp://127.0.0.1:61613"),
            Ok(Ready::Tcp("127.0.0.1:61613".into()))
        );
        assert_eq!(
            Ready::parse("http://localhost:8080/health"),
            Ok(Ready::Http {
                addr: "localhost:8080".into(),
                path: "/health".into()
            })
        );
        for bad in [
            "127.0.0.1:80",
            "tcp://example.com:80",
            "tcp://127.0.0.1",
            "udp://127.0.0.1:5",
        ] {
            assert!(Ready::parse(bad).is_err(), "{bad}");
        }
    }
}
