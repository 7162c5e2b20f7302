//! Where a `command` fault's commands run: `sh -c` in the current folder, in a process
//! group of their own that is told SIGTERM if loadmix dies, their output (stdout and
//! stderr together) in a log of the lane's `faults/` folder, the whole group killed past
//! the command's timeout. Each is shown before it runs.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use super::started::{group_command, signal_group};
use crate::fault::{Ran, Shell};

/// A lane's shell: its target's name and the folder its commands' logs go in.
pub(super) struct LaneShell {
    pub(super) target: String,
    pub(super) dir: PathBuf,
}

#[async_trait::async_trait]
impl Shell for LaneShell {
    async fn run(
        &self,
        command: &str,
        timeout: Duration,
        log: &str,
        env: &[(&str, String)],
    ) -> Ran {
        let path = self.dir.join(log);
        let mut ran = Ran {
            what: "run",
            command: command.to_string(),
            exit: None,
            timed_out: false,
            took: Duration::ZERO,
            log: path.display().to_string(),
            error: None,
        };
        eprintln!(
            "loadmix: fault: {}: running sh -c {command:?} (timeout {}s, output in {})",
            self.target,
            timeout.as_secs_f64(),
            ran.log
        );
        let began = Instant::now();
        match self.spawn(command, &path, env).await {
            Ok(mut child) => {
                let pgid = child.id().unwrap_or(0);
                match tokio::time::timeout(timeout, child.wait()).await {
                    Ok(Ok(status)) => ran.exit = status.code(),
                    Ok(Err(e)) => ran.error = Some(format!("could not be waited for: {e}")),
                    Err(_) => {
                        ran.timed_out = true;
                        signal_group(pgid, libc::SIGKILL);
                        let _ = child.wait().await;
                    }
                }
            }
            Err(e) => ran.error = Some(e),
        }
        ran.took = began.elapsed();
        ran
    }
}

impl LaneShell {
    async fn spawn(
        &self,
        command: &str,
        log: &std::path::Path,
        env: &[(&str, String)],
    ) -> Result<tokio::process::Child, String> {
        tokio::fs::create_dir_all(&self.dir)
            .await
            .map_err(|e| format!("{}: {e}", self.dir.display()))?;
        let out = std::fs::File::create(log).map_err(|e| format!("{}: {e}", log.display()))?;
        let err = out
            .try_clone()
            .map_err(|e| format!("{}: {e}", log.display()))?;
        let mut cmd = group_command(command);
        cmd.envs(env.iter().map(|(k, v)| (k, v)))
            .stdout(out)
            .stderr(err);
        cmd.spawn().map_err(|e| format!("could not start: {e}"))
    }
}
