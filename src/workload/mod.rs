//! Workload files: YAML in, a validated and resolved [`Workload`] out. Pure: no network.
//!
//! Flow: text → positioned tree ([`yaml`]) → `--set`/`--users` overrides applied to the tree
//! ([`overrides`]) → checked against each protocol's schema ([`protocols`]) and resolved ([`resolve`]). Nothing
//! downstream sees raw strings or re-validates; every mistake is a [`WorkloadError`] naming
//! file:line:column and key.

mod requests;
mod target;
mod threshold;

pub(crate) use requests::{
    Body, Capture, CaptureFrom, HttpRequest, HttpStep, Pick, PickOrder, Pool, Prefill, Remember,
};
pub(crate) use requests::{MAX_POOL, MAX_PREFILL, MAX_STEPS, is_step_label};
pub(crate) use target::{EmbeddedStore, MetricsWatch, TargetSpec};
pub(crate) use threshold::{Comparison, Threshold, ThresholdMetric};

pub(crate) mod chain;
pub(crate) mod dist;
pub(crate) mod error;
pub(crate) mod faults;
pub(crate) mod overrides;
pub(crate) mod protocols;
mod resolve;
pub(crate) mod teams;
pub(crate) mod template;
pub(crate) mod units;
pub(crate) mod yaml;

use std::path::Path;
use std::time::Duration;

pub(crate) use dist::Dist;
pub use error::{Diagnostic, WorkloadError};
pub use overrides::Override;
pub use protocols::Protocol;
pub(crate) use protocols::Tally;
pub(crate) use protocols::{AtomOp, CaldavOp, ClassKind, MorseOp};
pub(crate) use teams::{Grant, Seat, Team};
pub(crate) use template::Template;

/// A workload ready to run: every value checked, every default filled in.
#[derive(Debug, Clone)]
pub struct Workload {
    /// Its `name:`.
    pub name: String,
    /// Its `description:`.
    pub description: Option<String>,
    /// The file it was loaded from, as given.
    pub file: String,
    /// The file's text, kept so a report can be traced back to exactly what ran.
    pub source_text: String,
    /// The overrides applied, in order, as the user wrote them.
    pub overrides: Vec<String>,
    /// SHA-256 of the workload's mix (everything but `run` and `target`), so reports of the
    /// same mix can be compared even when durations or targets differ.
    pub hash: String,
    /// Where it runs by default (`target:`; `embedded` unless given).
    pub target: TargetSpec,
    /// Path prefix of the server's services, e.g. `/cosmo`; empty for none.
    pub context: String,
    /// Rounds, duration or iterations, warm-up, timeouts, seed.
    pub run: RunSpec,
    /// How accounts are made or found (`accounts:`).
    pub accounts: Option<Accounts>,
    /// Its classes of users, in order.
    pub classes: Vec<UserClass>,
    /// Its teams (`teams:`): users of several classes sharing a calendar.
    pub teams: Vec<Team>,
    /// Its thresholds (`thresholds:`).
    pub thresholds: Vec<Threshold>,
    /// Its fault timeline (`faults:`, then `--fault`s).
    pub(crate) faults: Vec<faults::Fault>,
    /// How a fault window's recovery is judged (`recovery:`).
    pub(crate) recovery: faults::Recovery,
    /// `monitor.process`: the server's processes to watch (names or PIDs, as written).
    pub monitor_processes: Vec<String>,
    /// `monitor.prometheus`: metrics endpoints and the series to keep from each.
    pub monitor_metrics: Vec<MetricsWatch>,
}

/// How long, how often, how reproducibly.
#[derive(Debug, Clone, PartialEq)]
pub struct RunSpec {
    pub stop: Stop,
    pub rounds: u32,
    /// Operations that start within the warm-up are executed but not counted.
    pub warmup: Duration,
    /// Whole rounds run first for every target and thrown away (a cold JVM, an empty
    /// cache), recorded as such.
    pub warmup_rounds: u32,
    /// Users keep what they made (accounts, calendars, items, connections) from one
    /// round to the next, and it is removed once, after the last (`run.keep_state`);
    /// otherwise each round starts every user afresh.
    pub keep_state: bool,
    pub seed: u64,
    /// Whole-request timeout (connect, send, response head and body).
    pub timeout: Duration,
    pub connect_timeout: Duration,
}

#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Stop {
    /// Run each round for this long (operations in flight at the end finish).
    Duration(Duration),
    /// Each VU runs this many operations.
    Iterations(u64),
}

/// Connection policy of a class.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Connection {
    /// One persistent connection per VU, re-opened after errors.
    KeepAlive,
    /// A new TCP connection for every request, as the 2007 Cosmo client did.
    PerRequest,
}

impl Connection {
    pub fn name(self) -> &'static str {
        match self {
            Connection::KeepAlive => "keep_alive",
            Connection::PerRequest => "per_request",
        }
    }
}

/// How a user proves who it is (`auth:`, per workload or per class).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AuthScheme {
    /// User and password with every request.
    Basic,
    /// RFC 7616 Digest: the server's nonce, reused with a counted `nc`.
    Digest,
    /// A token (`token: '{env:NAME}'`) with every request.
    Bearer,
    /// Whatever the server's first 401 asks for.
    Auto,
}

impl AuthScheme {
    pub fn name(self) -> &'static str {
        match self {
            AuthScheme::Basic => "Basic",
            AuthScheme::Digest => "Digest",
            AuthScheme::Bearer => "Bearer",
            AuthScheme::Auto => "auto",
        }
    }
}

/// `auth:` resolved: the scheme, and the bearer token read from the environment or a file.
#[derive(Debug, Clone, PartialEq)]
pub struct AuthSpec {
    pub scheme: AuthScheme,
    pub token: Option<crate::secrets::Secret>,
}

/// How accounts come to exist on the target (used by the protocol drivers).
#[derive(Debug, Clone, PartialEq)]
pub struct Accounts {
    pub create: AccountMode,
    pub admin_username: Option<String>,
    pub admin_password_env: Option<String>,
    pub password_env: Option<String>,
    pub username: Option<String>,
    pub file: Option<String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AccountMode {
    /// Create each account through Cosmo's CMP as the admin (untimed).
    Cmp,
    /// Use accounts listed in a file.
    Existing,
    /// Every VU shares one principal.
    Shared,
    /// No authentication.
    None,
}

/// What a user says it is, unless the workload says otherwise: the tool, its version,
/// the run and the user, so that a server's log tells users apart (and a load test from
/// its clients), and `loadmix infer` reads one user per agent.
pub(crate) const DEFAULT_USER_AGENT: &str = "loadmix/{version} (run {run_id}; {class}#{vu})";

/// A population of identical virtual users.
#[derive(Debug, Clone)]
pub struct UserClass {
    /// Its `class:` name.
    pub name: String,
    /// The protocol its users speak.
    pub protocol: Protocol,
    /// Users of a closed class (0 for an open class).
    pub count: u32,
    /// Open model: sessions arrive at a rate instead of `count` users looping.
    pub arrival: Option<Arrival>,
    /// Ramp of the count (closed) or the rate (open); empty for a constant population.
    pub ramp: Vec<Stage>,
    /// Closed model with a fixed schedule: operation k of a user is due at k × pacing
    /// (instead of a think time), and latency is also measured from that due time.
    pub pacing: Option<Duration>,
    /// Per-class cap on operations per VU (overrides `run.iterations`; with a duration the
    /// class stops at whichever comes first).
    pub iterations: Option<u64>,
    /// The think time before each pick (its own, else the workload's).
    pub think: Dist,
    /// Kept alive, or one connection per request.
    pub connection: Connection,
    /// https: a new connection may resume an earlier TLS session (default); `false` makes
    /// every connection pay a full handshake.
    pub tls_resumption: bool,
    /// The `User-Agent` its users send, a template of `{version}`, `{run_id}`, `{class}`
    /// and `{vu}` ([`DEFAULT_USER_AGENT`] unless the workload or the class says).
    pub user_agent: String,
    /// How its users authenticate; `None`: the protocol's default (Basic for the drivers
    /// when there are accounts, nothing for `http`).
    pub auth: Option<AuthSpec>,
    /// Its operation table, in the order written.
    pub ops: Vec<Operation>,
    /// Every label this class may report: its operations first, in table order, then the
    /// protocol's extra labels. Metrics are indexed by position in this list.
    pub labels: Vec<String>,
    /// How its users go from one operation to the next: its behaviours, or its `mix:`
    /// table as a chain of one.
    pub chain: chain::Chain,
    /// The typed operations (one per row of `ops`) and parameters of its protocol.
    pub kind: ClassKind,
    /// Names of values captured from responses (generic `http` protocol).
    pub captures: Vec<String>,
}

/// How sessions of an open class arrive.
#[derive(Debug, Clone, PartialEq)]
pub struct Arrival {
    /// Sessions per second (before any ramp).
    pub rate: f64,
    pub process: ArrivalProcess,
    /// At most this many sessions at once.
    pub max_concurrency: u32,
    pub when_full: WhenFull,
    /// A population of this many returning users, set up before the round's clock, each
    /// session taking one that is not in a session (the one away longest) and acting on
    /// what it made before; `None`: every session is a new user.
    pub returning: Option<u32>,
}

/// The most sessions a second one class may ask for. One process cannot start sessions
/// much faster than this, and a schedule it cannot keep would measure the generator.
pub(crate) const MAX_ARRIVAL_RATE: f64 = 200_000.0;

/// The most returning users an open class may have.
pub(crate) const MAX_RETURNING: i64 = 100_000;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ArrivalProcess {
    /// Exponential gaps: the arrivals of many independent clients.
    Poisson,
    /// Evenly spaced, as wrk2 does.
    Constant,
}

/// What an arrival does when `max_concurrency` sessions are already running.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WhenFull {
    /// Wait for a free slot; counted as late, latency still measured from the intended time.
    Queue,
    /// Give up; counted as dropped.
    Drop,
}

/// One stage of a ramp: move linearly to `to` over `over`, or hold (`to: None`).
#[derive(Debug, Clone, PartialEq)]
pub struct Stage {
    pub to: Option<f64>,
    pub over: Duration,
}

/// The value of a ramped quantity `t` into the round: `start` before any stage, linear
/// within a stage, the last value after the last stage.
pub(crate) fn ramp_value(start: f64, ramp: &[Stage], t: Duration) -> f64 {
    let mut from = start;
    let mut at = Duration::ZERO;
    for s in ramp {
        let to = s.to.unwrap_or(from);
        if t < at + s.over {
            let f = (t - at).as_secs_f64() / s.over.as_secs_f64().max(1e-9);
            return from + (to - from) * f;
        }
        at += s.over;
        from = to;
    }
    from
}

/// One row of a class's probability table. What the operation does is in the class's
/// [`ClassKind`], at the same position.
#[derive(Debug, Clone)]
pub struct Operation {
    pub name: String,
    pub weight: f64,
    /// Normalised weight: the chance this operation is picked.
    pub probability: f64,
    /// Statuses counted as success; `None` means the protocol's own rule.
    pub expect: Option<Vec<u16>>,
    /// The client's patience: an answer that takes longer (any one request of the
    /// operation) fails for that client, `timed_out_for_client`, though it came. The
    /// operation's own `client_timeout`, else its class's; `None`: no such verdict.
    pub client_timeout: Option<Duration>,
}

/// Named parameter values, checked against the catalog; turned into typed operations by
/// [`ops`] before anything downstream sees them.
#[derive(Debug, Clone, Default)]
pub(crate) struct Params(pub Vec<(String, ParamValue)>);

impl Params {
    pub(crate) fn get(&self, name: &str) -> Option<&ParamValue> {
        self.0.iter().find(|(n, _)| n == name).map(|(_, v)| v)
    }
    pub(crate) fn dist(&self, name: &str) -> Option<&Dist> {
        match self.get(name) {
            Some(ParamValue::Dist(d)) => Some(d),
            _ => None,
        }
    }
    pub(crate) fn number(&self, name: &str) -> Option<f64> {
        match self.get(name) {
            Some(ParamValue::Number(n)) => Some(*n),
            _ => None,
        }
    }
    pub(crate) fn text(&self, name: &str) -> Option<&str> {
        match self.get(name) {
            Some(ParamValue::Text(t)) => Some(t),
            _ => None,
        }
    }
    pub(crate) fn flag(&self, name: &str) -> Option<bool> {
        match self.get(name) {
            Some(ParamValue::Flag(b)) => Some(*b),
            _ => None,
        }
    }
    /// A map of names to templates (message headers).
    pub(crate) fn headers(&self, name: &str) -> &[(String, Template)] {
        match self.get(name) {
            Some(ParamValue::Headers(h)) => h,
            _ => &[],
        }
    }

    pub(crate) fn template(&self, name: &str) -> Option<&Template> {
        match self.get(name) {
            Some(ParamValue::Template(t)) => Some(t),
            _ => None,
        }
    }
}

#[derive(Debug, Clone)]
pub(crate) enum ParamValue {
    Number(f64),
    Dist(Dist),
    Text(String),
    Flag(bool),
    Template(Template),
    Headers(Vec<(String, Template)>),
}

impl Workload {
    /// What a rule (a threshold, a service level) can name: the sums (`total`, or `sent`
    /// and `received` where classes carry messages), each class and each `class.op`.
    pub(crate) fn rule_names(&self) -> Vec<String> {
        resolve::rule_names(&self.classes)
    }

    /// Total virtual users across closed classes (open classes have sessions instead).
    pub fn total_users(&self) -> u64 {
        self.classes.iter().map(|c| c.count as u64).sum()
    }

    /// The users of a class set up before each round's clock: a closed class's most
    /// users, an open class's returning users.
    pub fn standing_users(class: &UserClass) -> u32 {
        match &class.arrival {
            Some(a) => a.returning.unwrap_or(0),
            None => Workload::peak_users(class),
        }
    }

    /// The most users a closed class ever has: its count, or the ramp's peak.
    pub fn peak_users(class: &UserClass) -> u32 {
        class
            .ramp
            .iter()
            .filter_map(|s| s.to)
            .fold(class.count as f64, f64::max)
            .ceil() as u32
    }

    /// How long a round is, as a user would write it: `10s`, or `250 ops/user`.
    pub fn length_text(&self) -> String {
        match self.run.stop {
            Stop::Duration(d) => units::format_duration(d),
            Stop::Iterations(n) => format!("{n} ops/user"),
        }
    }

    /// What the `context` prefix applies to in this workload, as `validate` names it:
    /// Cosmo's paths (Morse Code, Atom, CMP accounts), CalDAV discovery's fallback, and
    /// templates that say `{context}`. Empty when nothing does (a broker workload, a
    /// CalDAV one whose discovery and homes never use it), so no context is shown.
    pub fn context_users(&self) -> Vec<&'static str> {
        let says = |t: &template::Template| t.source.contains("{context}");
        let http_says = |r: &HttpRequest| {
            says(&r.path)
                || r.headers.iter().any(|(_, v)| says(v))
                || matches!(&r.body, Body::Template(t) if says(t))
                || r.steps.iter().any(|s| says(&s.request.path))
        };
        let mut users = Vec::new();
        let mut add = |what: &'static str| {
            if !users.contains(&what) {
                users.push(what);
            }
        };
        if self
            .accounts
            .as_ref()
            .is_some_and(|a| a.create == AccountMode::Cmp)
        {
            add("CMP accounts");
        }
        for c in &self.classes {
            match &c.kind {
                ClassKind::Morse { .. } | ClassKind::Atom { .. } => add("Cosmo's paths"),
                ClassKind::Caldav { params, .. } => {
                    let templated =
                        |t: &Option<String>| t.as_deref().is_some_and(|t| t.contains("{context}"));
                    if params.discovery.is_none() || templated(&params.discovery) {
                        add("CalDAV discovery");
                    }
                    if templated(&params.calendar_home) {
                        add("calendar homes");
                    }
                }
                ClassKind::Carddav { params, .. } => {
                    let templated =
                        |t: &Option<String>| t.as_deref().is_some_and(|t| t.contains("{context}"));
                    if params.discovery.is_none() || templated(&params.discovery) {
                        add("CardDAV discovery");
                    }
                    if templated(&params.addressbook_home) {
                        add("address book homes");
                    }
                }
                ClassKind::Http { requests, .. } => {
                    if requests.iter().any(http_says) {
                        add("{context} in templates");
                    }
                }
                // A broker's destinations are not paths under a context.
                ClassKind::Stomp { .. } | ClassKind::Amqp { .. } => {}
            }
        }
        users
    }

    /// The class named `name`.
    pub fn class(&self, name: &str) -> Option<&UserClass> {
        self.classes.iter().find(|c| c.name == name)
    }
}

/// A workload file and the flags that override it, as plain data (no clap here).
#[derive(Debug, Clone, Default)]
pub struct LoadOptions {
    /// The workload file.
    pub path: std::path::PathBuf,
    /// `KEY=VALUE` overrides, in order.
    pub set: Vec<String>,
    /// `CLASS=N,...`
    pub users: Option<String>,
    /// `--duration`.
    pub duration: Option<String>,
    /// `--iterations`.
    pub iterations: Option<String>,
    /// `--rounds`.
    pub rounds: Option<String>,
    /// `--seed`.
    pub seed: Option<String>,
    /// An existing account every user shares (`accounts.create=shared`,
    /// `accounts.username=NAME`); its password from `$LOADMIX_PASSWORD`.
    pub user: Option<String>,
    /// `--fault`s, each added to the workload's timeline.
    pub faults: Vec<String>,
}

impl LoadOptions {
    /// Load the workload with every override the options ask for, then `extra` (a sweep
    /// point).
    pub fn load(&self, extra: &[Override]) -> Result<Workload, WorkloadError> {
        let mut ovr = Vec::new();
        for (key, v) in [
            ("run.duration", &self.duration),
            ("run.iterations", &self.iterations),
            ("run.rounds", &self.rounds),
            ("run.seed", &self.seed),
        ] {
            if let Some(v) = v {
                ovr.push(Override::set(&format!("{key}={v}"))?);
            }
        }
        if let Some(u) = &self.user {
            ovr.push(Override::set("accounts.create=shared")?);
            ovr.push(Override::set(&format!("accounts.username={u}"))?);
        }
        for s in &self.set {
            ovr.push(Override::set(s)?);
        }
        if let Some(u) = &self.users {
            ovr.push(Override::users(u)?);
        }
        ovr.extend_from_slice(extra);
        let mut w = load(&self.path, &ovr)?;
        for (i, text) in self.faults.iter().enumerate() {
            let f = resolve::resolve_fault_flag(text, i + 1, &w.run, w.recovery.hold, &w.faults)?;
            w.faults.push(f);
        }
        if w.faults.len() > faults::MAX_FAULTS {
            return Err(WorkloadError::Read {
                path: "--fault".into(),
                message: format!("at most {} faults in all", faults::MAX_FAULTS),
            });
        }
        Ok(w)
    }
}

/// Read, override and resolve a workload file (a regular file of at most 4 MiB).
pub fn load(path: &Path, overrides: &[Override]) -> Result<Workload, WorkloadError> {
    let fail = |message: String| WorkloadError::Read {
        path: path.display().to_string(),
        message,
    };
    let bytes = match crate::formats::files::read(path, crate::formats::files::WORKLOAD) {
        Ok(b) => b,
        Err(crate::formats::files::FileError::Folder(_)) => {
            return Err(fail("is a folder; give the workload's YAML file".into()));
        }
        Err(e) => return Err(fail(e.to_string())),
    };
    let text = String::from_utf8(bytes).map_err(|e| {
        // Where the first byte that is not UTF-8 is, as an editor counts lines and columns.
        let good = &e.as_bytes()[..e.utf8_error().valid_up_to()];
        let text = String::from_utf8_lossy(good);
        let line = text.matches('\n').count() + 1;
        let column = text.rsplit('\n').next().map_or(0, |l| l.chars().count()) + 1;
        WorkloadError::Read {
            path: format!("{}:{line}:{column}", path.display()),
            message: "not UTF-8 text (is this a YAML file?)".into(),
        }
    })?;
    if text.contains('\0') {
        return Err(fail("contains NUL bytes: not a YAML text file".into()));
    }
    load_str(&path.display().to_string(), &text, overrides, path.parent())
}

/// The workload a report ran, from the text and the overrides it keeps: files it names
/// are read beside `file`, secrets from this environment.
pub(crate) fn reload(
    file: &str,
    text: &str,
    overrides: &[String],
) -> Result<Workload, WorkloadError> {
    let ovr = overrides
        .iter()
        .map(|o| Override::from_display(o))
        .collect::<Result<Vec<_>, _>>()?;
    load_str(file, text, &ovr, Path::new(file).parent())
}

/// Resolve workload text; `base_dir` is where `body: {file: ...}` paths are relative to.
pub fn load_str(
    file: &str,
    text: &str,
    overrides: &[Override],
    base_dir: Option<&Path>,
) -> Result<Workload, WorkloadError> {
    resolve::resolve(file, text, overrides, base_dir)
}
