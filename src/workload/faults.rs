//! A fault timeline (`faults:` in the workload, `--fault` on the command line): what is
//! done to a target during each measured round, when, for how long, and to which share
//! of its connections. Pure data, checked where it is read; what does the harm is the
//! `fault` module's.

use std::time::Duration;

/// The most entries a timeline may hold: each is a task and a window in every round.
pub(crate) const MAX_FAULTS: usize = 64;
/// The longest a fault may last (`for`).
pub(crate) const MAX_FAULT_FOR: Duration = Duration::from_secs(24 * 3600);

/// How a window's recovery is judged (`recovery:`): back within `band` of the seconds
/// before the fault, in operations started a second and in the `percentile` of latency,
/// for `hold` in a row.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct Recovery {
    pub band: f64,
    pub hold: Duration,
    pub percentile: f64,
}

impl Default for Recovery {
    fn default() -> Self {
        Recovery {
            band: 0.25,
            hold: Duration::from_secs(3),
            percentile: 50.0,
        }
    }
}

/// One entry of the timeline.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Fault {
    /// When it begins: an offset into the round's clock (warm-up included).
    pub at: Duration,
    /// How long it lasts (`for`); a kill's or a restart's is how long the server stays
    /// down before it is started again (0: at once).
    pub length: Duration,
    /// Only this measured round (1-based); every measured round when absent.
    pub round: Option<u32>,
    /// Only this target (a name `--target` gave); every target when absent.
    pub target: Option<String>,
    /// What happens.
    pub action: FaultAction,
    /// The share of connections a network fault touches, 0 to 1 (Toxiproxy's toxicity):
    /// each connection is drawn once per window.
    pub toxicity: f64,
    /// Which way a network fault acts on the bytes.
    pub stream: Stream,
    /// Where it was written: `file:line:column`, for what only a run can refuse (a
    /// `kill` of a target loadmix did not start, a target no `--target` names).
    pub origin: String,
    /// As the report names it: `latency 50ms` and so on.
    pub text: String,
}

/// Which bytes a network fault acts on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Stream {
    /// From the server to the users (answers): Toxiproxy's default.
    Downstream,
    /// From the users to the server (requests).
    Upstream,
    /// Both.
    Both,
}

impl Stream {
    pub(crate) fn touches_down(self) -> bool {
        matches!(self, Stream::Downstream | Stream::Both)
    }

    pub(crate) fn touches_up(self) -> bool {
        matches!(self, Stream::Upstream | Stream::Both)
    }
}

/// What a fault does.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum FaultAction {
    /// SIGSTOP to a started server's group, SIGCONT at the window's end.
    Pause,
    /// SIGKILL to a started server's group; started again with the same command at the
    /// window's end and waited for as `--ready` says.
    Kill,
    /// SIGTERM (with the stop grace) to a started server's group; started again at the
    /// window's end.
    Restart,
    /// Every chunk of bytes held `delay` (± `jitter`, uniform) before it goes on.
    Latency { delay: Duration, jitter: Duration },
    /// At most `bytes_per_s` bytes a second on each connection.
    Bandwidth { bytes_per_s: u64 },
    /// A peer's close passed on only after `delay`.
    SlowClose { delay: Duration },
    /// Bytes swallowed (a black hole); the connection closed after `after` when given.
    Timeout { after: Option<Duration> },
    /// The connection reset (TCP RST to both ends) at its next byte, or at once.
    Reset,
    /// Bytes passed on in slices of `size`, `delay` apart.
    Slicer { size: u64, delay: Duration },
    /// The connection closed once `bytes` more have passed in the window.
    LimitData { bytes: u64 },
    /// The proxy stops listening and closes every connection: connects are refused.
    Down,
    /// A shell command run at the window's begin (`run`), and `undo` at its end, each
    /// killed past `timeout`: what only the user's own tools can do (restart the database
    /// under the server). Only from the command line (`--fault`), never from a workload
    /// file, whose text is not the user's to trust.
    Command {
        run: String,
        undo: Option<String>,
        timeout: Duration,
    },
}

/// How long a `command` fault's command may run when `timeout:` does not say.
pub(crate) const COMMAND_TIMEOUT: Duration = Duration::from_secs(60);
/// The longest `timeout:` a command may have.
pub(crate) const MAX_COMMAND_TIMEOUT: Duration = Duration::from_secs(600);

impl FaultAction {
    /// The names `fault:` takes, in the order the book lists them.
    pub(crate) const NAMES: &'static [&'static str] = &[
        "pause",
        "kill",
        "restart",
        "latency",
        "bandwidth",
        "slow_close",
        "timeout",
        "reset",
        "slicer",
        "limit_data",
        "down",
        "command",
    ];

    /// A fault of the target's process group, which loadmix must have started.
    pub(crate) fn on_process(&self) -> bool {
        matches!(
            self,
            FaultAction::Pause | FaultAction::Kill | FaultAction::Restart
        )
    }

    /// A fault of the network between users and target, which loadmix's proxy carries
    /// out.
    pub(crate) fn on_network(&self) -> bool {
        !self.on_process() && !matches!(self, FaultAction::Command { .. })
    }

    /// Its name as `fault:` writes it.
    pub(crate) fn name(&self) -> &'static str {
        match self {
            FaultAction::Pause => "pause",
            FaultAction::Kill => "kill",
            FaultAction::Restart => "restart",
            FaultAction::Latency { .. } => "latency",
            FaultAction::Bandwidth { .. } => "bandwidth",
            FaultAction::SlowClose { .. } => "slow_close",
            FaultAction::Timeout { .. } => "timeout",
            FaultAction::Reset => "reset",
            FaultAction::Slicer { .. } => "slicer",
            FaultAction::LimitData { .. } => "limit_data",
            FaultAction::Down => "down",
            FaultAction::Command { .. } => "command",
        }
    }
}

impl Fault {
    /// Whether it acts in measured round `round` (1-based) against `target`.
    pub(crate) fn applies(&self, round: u32, target: &str) -> bool {
        self.round.is_none_or(|r| r == round) && self.target.as_deref().is_none_or(|t| t == target)
    }

    /// Its window's end as scheduled: `at + for`.
    pub(crate) fn until(&self) -> Duration {
        self.at.saturating_add(self.length)
    }
}
