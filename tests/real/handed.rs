//! What every check of a real server shares: the variables its script hands over, loadmix
//! run as the real binary with its typed report, and the server's side read back (an
//! access log, a Prometheus page, a command that asks the server).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

use loadmix::reports::{OpReport, Report};

/// The crate root: workloads and fixtures are named from there, as in the docs.
pub(crate) fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// A variable the script that starts the server sets; its absence is a failure that says
/// which script to run, never a skip.
pub(crate) fn var(name: &str) -> String {
    std::env::var(name).unwrap_or_else(|_| {
        panic!(
            "{name} is not set: this check is handed its server by a script under scripts/ \
             (brokers_check.sh, servers_check.sh, peers_check.sh, live_check.sh, docs_check.sh); \
             run that script, which installs and starts the server"
        )
    })
}

/// A handed variable that names a file or folder.
pub(crate) fn path(name: &str) -> PathBuf {
    PathBuf::from(var(name))
}

/// A scratch folder for one check's reports.
pub(crate) fn scratch() -> tempfile::TempDir {
    tempfile::tempdir().expect("a scratch folder")
}

/// What one `loadmix` command did.
pub(crate) struct Ran {
    pub(crate) code: i32,
    pub(crate) stderr: String,
}

/// The real binary, from the crate root, with these arguments (and, when given, these
/// variables on top of the handed environment).
pub(crate) fn loadmix(args: &[&str], env: &[(&str, &str)]) -> Ran {
    let out = Command::new(env!("CARGO_BIN_EXE_loadmix"))
        .current_dir(root())
        .args(args)
        .envs(env.iter().copied())
        .output()
        .expect("the loadmix binary runs");
    Ran {
        code: out.status.code().unwrap_or(-1),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

/// `loadmix run ARGS --quiet --out OUT`, which must exit 0; its report.
pub(crate) fn run(out: &Path, args: &[&str]) -> Report {
    let code = run_code(out, args);
    assert_eq!(
        code.code, 0,
        "loadmix run {args:?} exited {}:\n{}",
        code.code, code.stderr
    );
    report(out)
}

/// `loadmix run ARGS --quiet --out OUT` whatever its exit code.
pub(crate) fn run_code(out: &Path, args: &[&str]) -> Ran {
    run_with(out, args, &[])
}

/// `loadmix run ARGS --quiet --out OUT` with extra variables.
pub(crate) fn run_with(out: &Path, args: &[&str], env: &[(&str, &str)]) -> Ran {
    let out = out.display().to_string();
    let mut all = vec!["run"];
    all.extend_from_slice(args);
    all.extend_from_slice(&["--quiet", "--out", &out]);
    loadmix(&all, env)
}

/// The typed report a run wrote.
pub(crate) fn report(out: &Path) -> Report {
    loadmix::reports::load(&out.join("run.json"))
        .unwrap_or_else(|e| panic!("{}: {e}", out.display()))
}

/// One operation's row of the summary.
pub(crate) fn op<'a>(r: &'a Report, name: &str) -> &'a OpReport {
    r.summary
        .ops
        .iter()
        .find(|o| o.op == name)
        .unwrap_or_else(|| panic!("no operation {name} in the report"))
}

/// How often the server answered operation `op` with `name` (`RECEIPT`, `basic.ack`).
pub(crate) fn answers(r: &Report, op_name: &str, name: &str) -> u64 {
    op(r, op_name)
        .answers
        .iter()
        .filter(|a| a.name == name)
        .map(|a| a.count)
        .sum()
}

/// Every request the report says was sent: measured answers (statuses and protocol
/// answers), warm-up, preflight, set-up and cleanup.
pub(crate) struct Sent {
    pub(crate) measured: u64,
    pub(crate) warmup: u64,
    pub(crate) setup: u64,
    pub(crate) cleanup: u64,
}

impl Sent {
    pub(crate) fn of(r: &Report) -> Sent {
        let measured = r
            .summary
            .ops
            .iter()
            .map(|o| {
                o.status.values().sum::<u64>() + o.answers.iter().map(|a| a.count).sum::<u64>()
            })
            .sum();
        Sent {
            measured,
            warmup: r.rounds.iter().map(|x| x.warmup_requests).sum(),
            setup: r.preflight.requests + r.rounds.iter().map(|x| x.setup.requests).sum::<u64>(),
            cleanup: r.rounds.iter().map(|x| x.cleanup.requests).sum(),
        }
    }

    pub(crate) fn all(&self) -> u64 {
        self.measured + self.warmup + self.setup + self.cleanup
    }
}

/// A server's access log written as `METHOD STATUS` per line: requests by status.
pub(crate) fn logged_statuses(log: &Path) -> BTreeMap<String, u64> {
    let text = std::fs::read_to_string(log).unwrap_or_else(|e| panic!("{}: {e}", log.display()));
    let mut by = BTreeMap::new();
    for line in text.lines() {
        let status = line
            .split_whitespace()
            .nth(1)
            .unwrap_or_else(|| panic!("{}: not `METHOD STATUS`: {line:?}", log.display()));
        *by.entry(status.to_string()).or_insert(0) += 1;
    }
    by
}

/// A server's own access log in the Common Log Format, among its other output (as
/// Xandikos writes both to one stream): requests by status. A line that is not a request
/// (`... "METHOD PATH HTTP/x" STATUS ...`) is the server's other words, not counted.
pub(crate) fn common_log_statuses(log: &Path) -> BTreeMap<String, u64> {
    let text = std::fs::read_to_string(log).unwrap_or_else(|e| panic!("{}: {e}", log.display()));
    let mut by = BTreeMap::new();
    for line in text.lines() {
        let Some((request, rest)) = line.split_once('"').and_then(|(_, r)| r.split_once('"'))
        else {
            continue;
        };
        let status = rest.split_whitespace().next().unwrap_or("");
        if request.contains(" HTTP/")
            && status.len() == 3
            && status.bytes().all(|b| b.is_ascii_digit())
        {
            *by.entry(status.to_string()).or_insert(0) += 1;
        }
    }
    by
}

/// How many requests a log gained while `f` ran, by status.
pub(crate) fn logged_during<T>(log: &Path, f: impl FnOnce() -> T) -> (T, BTreeMap<String, u64>) {
    logged_during_by(logged_statuses, log, f)
}

/// How many requests a log read by `read` gained while `f` ran, by status.
pub(crate) fn logged_during_by<T>(
    read: fn(&Path) -> BTreeMap<String, u64>,
    log: &Path,
    f: impl FnOnce() -> T,
) -> (T, BTreeMap<String, u64>) {
    let before = read(log);
    let out = f();
    let mut gained = read(log);
    for (status, n) in before {
        let now = gained.entry(status).or_insert(0);
        *now -= n;
    }
    gained.retain(|_, n| *n > 0);
    (out, gained)
}

/// Every file under `dir`, at any depth.
pub(crate) fn files_under(dir: &Path) -> Vec<PathBuf> {
    let mut files = Vec::new();
    let mut todo = vec![dir.to_path_buf()];
    while let Some(d) = todo.pop() {
        for e in std::fs::read_dir(&d).unwrap_or_else(|e| panic!("{}: {e}", d.display())) {
            let p = e.expect("a folder entry").path();
            if p.is_dir() {
                todo.push(p);
            } else {
                files.push(p);
            }
        }
    }
    files
}

/// A handed command (a script the server's starter wrote) with arguments: its output,
/// which must have exited 0.
pub(crate) fn ask(command: &str, args: &[&str]) -> String {
    let out = Command::new(command)
        .args(args)
        .output()
        .unwrap_or_else(|e| panic!("{command}: {e}"));
    assert!(
        out.status.success(),
        "{command} {args:?}: {}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// A page over plain HTTP (curl, which the scripts need anyway).
pub(crate) fn get(url: &str) -> String {
    ask("curl", &["-sf", "--max-time", "10", url])
}

/// The sum of every sample of a series on a Prometheus text page, whatever its labels.
pub(crate) fn prom_sum(page: &str, series: &str) -> f64 {
    prom_samples(page, series).map(|(_, v)| v).sum()
}

/// A series' samples on a Prometheus text page: (labels as written, value).
pub(crate) fn prom_samples<'a>(
    page: &'a str,
    series: &'a str,
) -> impl Iterator<Item = (&'a str, f64)> + 'a {
    page.lines()
        .filter(|l| !l.starts_with('#'))
        .filter_map(move |l| {
            let rest = l.strip_prefix(series)?;
            let (labels, value) = match rest.strip_prefix('{') {
                Some(r) => {
                    let (labels, v) = r.split_once("} ")?;
                    (labels, v)
                }
                None => ("", rest.strip_prefix(' ')?),
            };
            let value = value.split_whitespace().next()?.parse().ok()?;
            Some((labels, value))
        })
}

/// Ask again (every 100 ms, up to `tries` times) until `read` gives what `done` accepts;
/// the last reading either way, for the caller to compare. A server that refreshes its
/// figures every few seconds is read until they settle, not after a fixed sleep.
pub(crate) fn settle<T>(tries: u32, mut read: impl FnMut() -> T, done: impl Fn(&T) -> bool) -> T {
    let mut last = read();
    for _ in 1..tries {
        if done(&last) {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(100));
        last = read();
    }
    last
}

/// Wait until something accepts on a loopback port (a restarted server).
pub(crate) fn wait_port(port: u16) {
    let ok = settle(
        600,
        || std::net::TcpStream::connect(("127.0.0.1", port)).is_ok(),
        |up| *up,
    );
    assert!(ok, "nothing accepts on 127.0.0.1:{port}");
}

/// The port of a `scheme://host:port/...` target.
pub(crate) fn port_of(target: &str) -> u16 {
    let after = target.split("://").nth(1).unwrap_or(target);
    let hostport = after.split('/').next().unwrap_or(after);
    hostport
        .rsplit(':')
        .next()
        .and_then(|p| p.parse().ok())
        .unwrap_or_else(|| panic!("no port in {target}"))
}

/// What `workloads/caldav-team.yaml`'s visibility figures must hold on any server: every
/// acknowledged put and update counted once, each to be seen by the three pollers of its
/// team and accounted seen, superseded or unseen, and no stamp out of place but at most
/// `unacknowledged` sights of writes whose answer was a failure.
pub(crate) fn team_saw_every_write(r: &Report, unacknowledged: u64) {
    let v = r.visibility.as_ref().expect("a visibility section");
    let row = |name: &str| v.by_write.iter().find(|w| w.op == name);
    let (put, update) = (row("editors.put_event"), row("editors.update_event"));
    let writes = op(r, "editors.put_event").successes + op(r, "editors.update_event").successes;
    let counted = put.map_or(0, |w| w.writes) + update.map_or(0, |w| w.writes);
    let expected = put.map_or(0, |w| w.expected) + update.map_or(0, |w| w.expected);
    eprintln!(
        "{writes} writes, {} expected sights in all: {} seen, {} superseded, {} unseen, {} duplicated; p50 {:?} ms",
        v.all.expected,
        v.all.seen,
        v.all.superseded,
        v.all.unseen,
        v.all.duplicated,
        v.all.latency_ms.as_ref().map(|l| l.p50)
    );
    assert!(writes > 0);
    assert_eq!(counted, writes, "every acknowledged write, once");
    // One editor and three pollers a team: the three see each of its editor's writes.
    assert_eq!(expected, 3 * writes);
    assert_eq!(v.all.seen + v.all.superseded + v.all.unseen, v.all.expected);
    assert!(v.all.seen > 0);
    assert_eq!(v.unexpected + v.foreign + v.garbled, 0);
    assert!(v.unacknowledged <= unacknowledged, "{}", v.unacknowledged);
}

/// Every failure of a run is a 500 (DAViCal's deadlock victims): `what` names the run.
pub(crate) fn only_500s(r: &Report, what: &str) {
    assert!(
        r.failures
            .iter()
            .all(|f| f.error == "status" && f.detail.ends_with("500")),
        "{what}: {:?}",
        r.failures
    );
}

/// What the team's invitations must come to on a server that schedules: every
/// acknowledged invitation and cancellation held against the two attendees of its team,
/// every answer against its organizer, some of each seen, none seen twice.
pub(crate) fn team_invited_and_answered(r: &Report) {
    let v = r.visibility.as_ref().expect("a visibility section");
    let row = |name: &str| v.by_write.iter().find(|w| w.op == name).unwrap();
    let seen_by = |name: &str| v.by_observer.iter().find(|w| w.op == name).unwrap();
    let (invite, answer) = (row("organizers.invite"), row("attendees.answer"));
    eprintln!("invitations {invite:?}\nanswers {answer:?}");
    assert_eq!(invite.writes, op(r, "organizers.invite").successes);
    assert_eq!(invite.expected, 2 * invite.writes);
    assert_eq!(answer.writes, op(r, "attendees.answer").successes);
    assert_eq!(answer.expected, answer.writes);
    assert!(invite.seen > 0 && answer.seen > 0);
    // Cancellations are for the same attendees, seen in the same inboxes.
    let cancelled = v.by_write.iter().find(|w| w.op == "organizers.cancel");
    if let Some(c) = cancelled {
        assert_eq!(c.writes, op(r, "organizers.cancel").successes);
        assert_eq!(c.expected, 2 * c.writes);
    }
    let cancels_seen = cancelled.map_or(0, |c| c.seen);
    assert_eq!(seen_by("attendees.inbox").seen, invite.seen + cancels_seen);
    assert_eq!(seen_by("organizers.inbox").seen, answer.seen);
    assert_eq!(invite.duplicated + answer.duplicated, 0);
    assert_eq!(seen_by("organizers.inbox").duplicated, 0);
    // A server may send the other attendees the invitation again when one answers (DAViCal
    // does, with their PARTSTATs brought up to date): the same version twice, counted,
    // at most once per answer for the one other attendee of a team.
    assert!(
        seen_by("attendees.inbox").duplicated <= answer.writes,
        "{:?}",
        seen_by("attendees.inbox")
    );
}

/// `workloads/caldav-team.yaml` for one brief round of `duration` on a real server, one
/// account per user from `accounts`; `more` are the server's own options. With what `log`
/// gained meanwhile.
pub(crate) fn team_run(
    out: &Path,
    (log, accounts): (&Path, &Path),
    duration: &str,
    more: &[&str],
) -> (Report, BTreeMap<String, u64>) {
    let file = format!("accounts.file={}", accounts.display());
    let mut args = vec![
        "workloads/caldav-team.yaml",
        "--set",
        "accounts.create=existing",
        "--set",
        &file,
        "--set",
        "run.warmup=0s",
        "--duration",
        duration,
        "--rounds",
        "1",
    ];
    args.extend_from_slice(more);
    logged_during(log, || run(out, &args))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prometheus_samples_are_summed_across_labels() {
        let page = "# TYPE x_total counter\nx_total{a=\"1\"} 2\nx_total{a=\"2\"} 3.5\nx_totals 9\nx_total 1\n";
        assert_eq!(prom_sum(page, "x_total"), 6.5);
        assert_eq!(prom_samples(page, "x_total").next(), Some(("a=\"1\"", 2.0)));
    }

    #[test]
    fn a_targets_port_is_read() {
        assert_eq!(port_of("amqp://127.0.0.1:5672"), 5672);
        assert_eq!(port_of("http://127.0.0.1:80/dav"), 80);
    }
}
