//! The server's side of a run: local processes (the target, its database), named by PID or
//! by name, sampled from `/proc` once a second during every round, on the round's clock.
//! Per round: CPU seconds (user and system), CPU per second, peak resident memory, most
//! threads, context switches and bytes read and written.
//!
//! A name matches every process whose command name or program file is that name
//! (`postgres` is the postmaster and all its backends), looked up again every second, so
//! processes that come and go (a backend per connection) are counted while they live. A
//! process born during a second counts all its CPU; one that ends during a second loses
//! that second's last part: a sampler cannot see it. The round's end takes one last look.
//!
//! A watched process that is a HotSpot JVM also gets its collections, their time and its
//! heap, from the JVM's own perf-data file ([`jvm`]).
//!
//! Nothing here can stop a run: a process that cannot be found or read is reported as
//! such, and the load figures stand. [`prometheus`] scrapes the metrics servers publish.

pub(crate) mod jvm;
pub(crate) mod prometheus;

use std::collections::HashMap;
use std::time::Duration;

use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

/// Threads of one process whose context switches are read each second.
const MAX_THREADS_READ: usize = 1024;

/// A process to watch, as the user named it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum ProcessSpec {
    Pid(u32),
    Name(String),
    /// Every process of a process group: a server loadmix started (`--start`), with
    /// whatever it forks (a JVM under a wrapper script, PostgreSQL's backends).
    Group(GroupId),
}

/// A started server's process group, which a fault's restart moves to the new group: the
/// watch follows it, second by second.
#[derive(Debug, Clone)]
pub(crate) struct GroupId(std::sync::Arc<std::sync::atomic::AtomicU32>);

impl GroupId {
    pub(crate) fn new(pgid: u32) -> GroupId {
        GroupId(std::sync::Arc::new(std::sync::atomic::AtomicU32::new(pgid)))
    }

    /// The group now.
    pub(crate) fn get(&self) -> u32 {
        self.0.load(std::sync::atomic::Ordering::Relaxed)
    }

    /// The server was started again, in group `pgid`.
    pub(crate) fn moved_to(&self, pgid: u32) {
        self.0.store(pgid, std::sync::atomic::Ordering::Relaxed);
    }
}

impl PartialEq for GroupId {
    fn eq(&self, o: &GroupId) -> bool {
        self.get() == o.get()
    }
}

impl Eq for GroupId {}

impl ProcessSpec {
    /// `1234` or `pid:1234` is a PID; anything else a process name.
    pub(crate) fn parse(s: &str) -> Result<ProcessSpec, String> {
        let s = s.trim();
        let digits = s.strip_prefix("pid:").unwrap_or(s);
        if !digits.is_empty() && digits.bytes().all(|b| b.is_ascii_digit()) {
            return digits
                .parse()
                .map(ProcessSpec::Pid)
                .map_err(|_| format!("'{s}' is not a process id"));
        }
        if s.is_empty() || s.contains('/') || s.len() > 255 {
            return Err(format!(
                "'{s}' is not a process name (give the program's name, e.g. postgres, or its PID)"
            ));
        }
        Ok(ProcessSpec::Name(s.to_string()))
    }

    pub(crate) fn label(&self) -> String {
        match self {
            ProcessSpec::Pid(p) => format!("pid {p}"),
            ProcessSpec::Name(n) => n.clone(),
            ProcessSpec::Group(g) => format!("group {}", g.get()),
        }
    }

    /// Whether anything matches now: a message for the user when not.
    pub(crate) fn check(&self) -> Result<(), String> {
        if matching(self).is_empty() {
            Err(match self {
                ProcessSpec::Pid(p) => format!("monitor: no process with PID {p}"),
                ProcessSpec::Name(n) => format!("monitor: no process named '{n}' is running"),
                ProcessSpec::Group(g) => {
                    format!("monitor: no process left in group {}", g.get())
                }
            })
        } else {
            Ok(())
        }
    }
}

/// The name a started server's figures go under: its group leader's program (`java`,
/// `loadmix`), as a PID watched for one target is.
pub(crate) fn group_watch(group: GroupId) -> Watch {
    let label = program_of(group.get());
    let spec = ProcessSpec::Group(group);
    Watch {
        label: label.unwrap_or_else(|| spec.label()),
        spec,
    }
}

/// A process to watch during the rounds of one target, and the name its figures go under.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Watch {
    pub spec: ProcessSpec,
    pub label: String,
}

/// `PROC` watches PROC whichever target runs; `PROC@TARGET` only during TARGET's rounds,
/// for servers that are different processes (two Tomcats, two PostgreSQL clusters). A PID
/// watched for one target goes under its program's name (`java`), so two targets' figures
/// line up in a comparison. Returns the watch and the target it is for.
pub(crate) fn parse_watch(s: &str) -> Result<(Watch, Option<String>), String> {
    let (proc, target) = match s.rsplit_once('@') {
        Some((p, t)) if !t.trim().is_empty() => (p, Some(t.trim().to_string())),
        Some(_) => return Err(format!("'{s}': name the target after '@'")),
        None => (s, None),
    };
    let spec = ProcessSpec::parse(proc)?;
    let label = match (&spec, &target) {
        (ProcessSpec::Pid(pid), Some(_)) => program_of(*pid).unwrap_or_else(|| spec.label()),
        _ => spec.label(),
    };
    Ok((Watch { spec, label }, target))
}

/// A process's group, from `/proc/PID/stat` (the field after the state, past the
/// command name in parentheses, which may hold anything).
fn group_of(pid: u32) -> Option<u32> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let after = &stat[stat.rfind(')')? + 1..];
    after.split_whitespace().nth(2)?.parse().ok()
}

/// The command name of a running process.
fn program_of(pid: u32) -> Option<String> {
    let comm = std::fs::read_to_string(format!("/proc/{pid}/comm")).ok()?;
    let comm = comm.trim();
    (!comm.is_empty()).then(|| comm.chars().take(64).collect())
}

/// One monitored process (or group of processes) over one round.
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct ProcessRound {
    pub label: String,
    /// Most processes matched at once.
    pub processes_max: u32,
    /// User and system CPU over the round, seconds.
    pub cpu_user_s: f64,
    pub cpu_system_s: f64,
    /// Per second of the round: CPU, percent of one core.
    pub cpu_percent: Vec<f64>,
    pub rss_peak_bytes: u64,
    pub threads_max: u64,
    pub context_switches: u64,
    pub read_bytes: u64,
    pub write_bytes: u64,
    /// Why nothing (or not everything) could be measured.
    pub problem: Option<String>,
    /// When the processes are HotSpot JVMs: their collections over the round.
    pub jvm: Option<JvmRound>,
}

/// The JVMs among a watched spec's processes, over one round.
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct JvmRound {
    /// Collections during the round, and the time they took (seconds), over every
    /// collector.
    pub gc_count: u64,
    pub gc_time_s: f64,
    /// Most heap in use at a look, and most heap committed, bytes.
    pub heap_used_peak: u64,
    pub heap_committed_max: u64,
    pub collectors: Vec<String>,
}

/// What one process reads as at one moment.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
struct Reading {
    utime: u64,
    stime: u64,
    /// Clock ticks after boot when the process started.
    start: u64,
    threads: u64,
    rss_pages: u64,
    ctx: u64,
    read_bytes: u64,
    write_bytes: u64,
}

fn sysconf(name: libc::c_int, fallback: u64) -> u64 {
    // SAFETY: sysconf reads a system constant and has no other effect.
    let v = unsafe { libc::sysconf(name) };
    if v > 0 { v as u64 } else { fallback }
}

/// The fields of `/proc/PID/stat` that matter, after the command name (which may hold
/// spaces and parentheses: the last ')' ends it).
fn parse_stat(text: &str) -> Option<Reading> {
    let rest = &text[text.rfind(')')? + 1..];
    let f: Vec<&str> = rest.split_ascii_whitespace().collect();
    // After ')': state is field 3 of the file, so field N is f[N - 3].
    let n = |i: usize| f.get(i - 3).and_then(|x| x.parse::<u64>().ok());
    Some(Reading {
        utime: n(14)?,
        stime: n(15)?,
        threads: n(20)?,
        start: n(22)?,
        rss_pages: n(24)?,
        ..Reading::default()
    })
}

fn read(pid: u32) -> Option<Reading> {
    let mut r = parse_stat(&std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?)?;
    // Context switches are counted per thread: add up the process's threads (bounded, so a
    // process with a huge thread count costs a bounded look).
    if let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) {
        for t in tasks.filter_map(Result::ok).take(MAX_THREADS_READ) {
            let Ok(status) = std::fs::read_to_string(t.path().join("status")) else {
                continue;
            };
            for line in status.lines() {
                if let Some(v) = line
                    .strip_prefix("voluntary_ctxt_switches:")
                    .or_else(|| line.strip_prefix("nonvoluntary_ctxt_switches:"))
                {
                    r.ctx += v.trim().parse::<u64>().unwrap_or(0);
                }
            }
        }
    }
    // Another user's process: its I/O is not ours to read; the rest still is.
    if let Ok(io) = std::fs::read_to_string(format!("/proc/{pid}/io")) {
        for line in io.lines() {
            if let Some(v) = line.strip_prefix("read_bytes:") {
                r.read_bytes = v.trim().parse().unwrap_or(0);
            } else if let Some(v) = line.strip_prefix("write_bytes:") {
                r.write_bytes = v.trim().parse().unwrap_or(0);
            }
        }
    }
    Some(r)
}

/// The PIDs a spec matches now.
fn matching(spec: &ProcessSpec) -> Vec<u32> {
    match spec {
        ProcessSpec::Pid(p) => {
            if std::path::Path::new(&format!("/proc/{p}/stat")).exists() {
                vec![*p]
            } else {
                Vec::new()
            }
        }
        ProcessSpec::Group(g) => {
            let Ok(dir) = std::fs::read_dir("/proc") else {
                return Vec::new();
            };
            dir.filter_map(|e| e.ok()?.file_name().to_str()?.parse::<u32>().ok())
                .filter(|pid| group_of(*pid) == Some(g.get()))
                .collect()
        }
        ProcessSpec::Name(name) => {
            let Ok(dir) = std::fs::read_dir("/proc") else {
                return Vec::new();
            };
            // The kernel keeps 15 bytes of a command name.
            let comm_name: String = name.chars().take(15).collect();
            dir.filter_map(|e| e.ok()?.file_name().to_str()?.parse::<u32>().ok())
                .filter(|pid| {
                    let comm =
                        std::fs::read_to_string(format!("/proc/{pid}/comm")).unwrap_or_default();
                    if comm.trim_end() == comm_name {
                        return true;
                    }
                    let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
                    let argv0 = cmdline.split(|b| *b == 0).next().unwrap_or(&[]);
                    let argv0 = String::from_utf8_lossy(argv0);
                    argv0.rsplit('/').next() == Some(name.as_str())
                })
                .collect()
        }
    }
}

/// Seconds since boot, in clock ticks (to tell processes born after a sample).
fn uptime_ticks(hz: u64) -> u64 {
    std::fs::read_to_string("/proc/uptime")
        .ok()
        .and_then(|t| t.split_ascii_whitespace().next()?.parse::<f64>().ok())
        .map_or(0, |s| (s * hz as f64) as u64)
}

/// Add what the JVMs did since the last look. A JVM first seen now counts from here on (its
/// collections before the round are not the round's).
fn add_jvm(
    o: &mut ProcessRound,
    before: &HashMap<u32, jvm::JvmReading>,
    now: &HashMap<u32, jvm::JvmReading>,
) {
    if now.is_empty() {
        return;
    }
    let j = o.jvm.get_or_insert_with(JvmRound::default);
    let (mut used, mut committed) = (0u64, 0u64);
    for (pid, r) in now {
        if let Some(b) = before.get(pid) {
            j.gc_count += r.gc_count.saturating_sub(b.gc_count);
            j.gc_time_s += (r.gc_time_s - b.gc_time_s).max(0.0);
        }
        used = used.saturating_add(r.heap_used);
        committed = committed.saturating_add(r.heap_committed);
        for c in &r.collectors {
            if !j.collectors.contains(c) {
                j.collectors.push(c.clone());
            }
        }
    }
    j.heap_used_peak = j.heap_used_peak.max(used);
    j.heap_committed_max = j.heap_committed_max.max(committed);
}

/// This process's resident memory, bytes, from its own `/proc/self/stat`.
pub(crate) fn own_resident_bytes() -> Option<u64> {
    let r = parse_stat(&std::fs::read_to_string("/proc/self/stat").ok()?)?;
    r.rss_pages.checked_mul(sysconf(libc::_SC_PAGESIZE, 4096))
}

/// One watched process (or group) in the last second, as the live pages show it.
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize)]
pub(crate) struct Now {
    pub label: String,
    /// CPU, percent of one core.
    pub cpu_percent: f64,
}

/// The last second of each watch, written by the sampler for whoever shows it live.
pub(crate) type Latest = std::sync::Arc<std::sync::Mutex<Vec<Now>>>;

/// Watch `specs` once a second until `done`; one result per spec. Each second's figures
/// also go to `latest`, emptied when the round ends.
pub(crate) fn sampler(
    watches: Vec<Watch>,
    done: CancellationToken,
    latest: Latest,
) -> tokio::task::JoinHandle<Vec<ProcessRound>> {
    tokio::task::spawn(async move {
        let clock = Clock {
            hz: sysconf(libc::_SC_CLK_TCK, 100),
            page: sysconf(libc::_SC_PAGESIZE, 4096),
        };
        let mut out: Vec<ProcessRound> = watches
            .iter()
            .map(|w| ProcessRound {
                label: w.label.clone(),
                ..ProcessRound::default()
            })
            .collect();
        let specs: Vec<ProcessSpec> = watches.into_iter().map(|w| w.spec).collect();
        let mut jvm_files = jvm::Files::default();
        // The first look sets each process's starting point.
        let mut last: Vec<Look> = specs.iter().map(|s| look(s, &mut jvm_files)).collect();
        let mut last_tick = uptime_ticks(clock.hz);
        let mut missing = vec![0u32; specs.len()];
        let mut seconds = 0u32;
        let mut last_at = Instant::now();
        let mut finishing = false;
        while !finishing {
            tokio::select! {
                _ = tokio::time::sleep(Duration::from_secs(1)) => {}
                // The round is over: one last look, so its last part second counts.
                _ = done.cancelled() => finishing = true,
            }
            let now_tick = uptime_ticks(clock.hz);
            let wall = last_at.elapsed().as_secs_f64();
            last_at = Instant::now();
            for (i, s) in specs.iter().enumerate() {
                let now = look(s, &mut jvm_files);
                add_jvm(&mut out[i], &last[i].jvm, &now.jvm);
                add_second(
                    &mut out[i],
                    &last[i].procs,
                    &now.procs,
                    last_tick,
                    clock,
                    wall,
                );
                missing[i] += u32::from(now.procs.is_empty());
                last[i] = now;
            }
            seconds += 1;
            last_tick = now_tick;
            publish(&latest, &out);
        }
        // Between rounds nothing is watched: no second is shown rather than a stale one.
        publish(&latest, &[]);
        for (o, m) in out.iter_mut().zip(missing) {
            o.problem = problem(o, m, seconds);
        }
        out
    })
}

/// Each watch's last second into `latest`.
fn publish(latest: &Latest, out: &[ProcessRound]) {
    let now = out
        .iter()
        .map(|o| Now {
            label: o.label.clone(),
            cpu_percent: o.cpu_percent.last().copied().unwrap_or(0.0),
        })
        .collect();
    if let Ok(mut l) = latest.lock() {
        *l = now;
    }
}

/// The kernel's clock tick rate and page size, for reading `/proc`.
#[derive(Clone, Copy)]
struct Clock {
    hz: u64,
    page: u64,
}

/// One look at the processes a spec matches: their `/proc` readings and, for JVMs, their
/// perf-data readings, by PID.
struct Look {
    procs: HashMap<u32, Reading>,
    jvm: HashMap<u32, jvm::JvmReading>,
}

fn look(spec: &ProcessSpec, jvm_files: &mut jvm::Files) -> Look {
    let mut l = Look {
        procs: HashMap::new(),
        jvm: HashMap::new(),
    };
    for pid in matching(spec) {
        if let Some(r) = read(pid) {
            l.procs.insert(pid, r);
        }
        if let Some(j) = jvm_files.read(pid) {
            l.jvm.insert(pid, j);
        }
    }
    l
}

/// Add what the processes did between two looks (`wall` seconds apart). A process born
/// since the last look counts from its start; one seen for the first time but running
/// before counts from now on.
fn add_second(
    o: &mut ProcessRound,
    last: &HashMap<u32, Reading>,
    now: &HashMap<u32, Reading>,
    last_tick: u64,
    clock: Clock,
    wall: f64,
) {
    let (mut user, mut system, mut ctx, mut rd, mut wr) = (0u64, 0, 0, 0, 0);
    let (mut rss, mut threads) = (0u64, 0u64);
    for (pid, r) in now {
        let before = match last.get(pid) {
            Some(b) => *b,
            None if r.start >= last_tick => Reading::default(),
            None => *r,
        };
        user += r.utime.saturating_sub(before.utime);
        system += r.stime.saturating_sub(before.stime);
        ctx += r.ctx.saturating_sub(before.ctx);
        rd += r.read_bytes.saturating_sub(before.read_bytes);
        wr += r.write_bytes.saturating_sub(before.write_bytes);
        rss += r.rss_pages * clock.page;
        threads += r.threads;
    }
    let hz = clock.hz as f64;
    o.cpu_user_s += user as f64 / hz;
    o.cpu_system_s += system as f64 / hz;
    if wall > 0.0 {
        o.cpu_percent
            .push((user + system) as f64 / hz / wall * 100.0);
    }
    o.context_switches += ctx;
    o.read_bytes += rd;
    o.write_bytes += wr;
    o.rss_peak_bytes = o.rss_peak_bytes.max(rss);
    o.threads_max = o.threads_max.max(threads);
    o.processes_max = o.processes_max.max(now.len() as u32);
}

/// What to say of a watch that matched nothing, or not every second.
fn problem(o: &ProcessRound, missing: u32, seconds: u32) -> Option<String> {
    match (o.processes_max, missing) {
        (0, _) if seconds > 0 => Some(format!("no process matched {} during the round", o.label)),
        (_, m) if m > 0 => Some(format!(
            "{} was not running for {m} of {seconds} seconds",
            o.label
        )),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn the_live_figures_show_each_watched_second_and_nothing_once_the_round_ends() {
        let (watch, _) = parse_watch(&std::process::id().to_string()).unwrap();
        let latest = Latest::default();
        let done = CancellationToken::new();
        let sampling = sampler(vec![watch], done.clone(), latest.clone());
        while latest.lock().unwrap().is_empty() {
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        assert_eq!(
            latest.lock().unwrap()[0].label,
            format!("pid {}", std::process::id())
        );
        done.cancel();
        let rounds = sampling.await.unwrap();
        assert!(!rounds[0].cpu_percent.is_empty());
        assert!(
            latest.lock().unwrap().is_empty(),
            "no stale second between rounds"
        );
    }

    #[test]
    fn a_group_is_every_process_that_shares_it() {
        // SAFETY: getpgrp(2) only reads this process's group.
        let mine = unsafe { libc::getpgrp() } as u32;
        assert_eq!(group_of(std::process::id()), Some(mine));
        assert!(matching(&ProcessSpec::Group(GroupId::new(mine))).contains(&std::process::id()));
        assert_eq!(
            group_watch(GroupId::new(mine)).spec,
            ProcessSpec::Group(GroupId::new(mine))
        );
    }

    #[test]
    fn specs_are_pids_or_names() {
        assert_eq!(ProcessSpec::parse("1234"), Ok(ProcessSpec::Pid(1234)));
        assert_eq!(ProcessSpec::parse("pid:7"), Ok(ProcessSpec::Pid(7)));
        assert_eq!(
            ProcessSpec::parse("postgres"),
            Ok(ProcessSpec::Name("postgres".into()))
        );
        assert!(ProcessSpec::parse("/usr/bin/x").is_err());
        assert!(ProcessSpec::parse("").is_err());
        assert!(ProcessSpec::parse("99999999999999999999").is_err());
    }

    #[test]
    fn a_stat_line_with_a_hostile_command_name_is_read() {
        let line = "42 (we ird) (x)) S 1 42 42 0 -1 4194560 100 0 0 0 150 30 0 0 20 0 7 0 5000 100000 321 18446744073709551615";
        let r = parse_stat(line).unwrap();
        assert_eq!(
            (r.utime, r.stime, r.threads, r.start, r.rss_pages),
            (150, 30, 7, 5000, 321)
        );
        assert!(parse_stat("garbage").is_none());
        assert!(parse_stat("1 (x) S 2").is_none());
    }

    #[test]
    fn a_watch_may_be_for_one_target_and_a_pid_then_goes_under_its_program() {
        let me = std::process::id();
        let (w, t) = parse_watch(&format!("{me}@serial")).unwrap();
        assert_eq!(t.as_deref(), Some("serial"));
        assert_eq!(w.spec, ProcessSpec::Pid(me));
        assert!(!w.label.starts_with("pid "), "{}", w.label);
        let (w, t) = parse_watch(&me.to_string()).unwrap();
        assert_eq!((w.label, t), (format!("pid {me}"), None));
        let (w, t) = parse_watch("postgres@sync-on").unwrap();
        assert_eq!(
            (w.label.as_str(), t.as_deref()),
            ("postgres", Some("sync-on"))
        );
        assert!(parse_watch("postgres@").is_err());
        assert!(parse_watch("@x").is_err());
    }

    #[test]
    fn this_process_can_be_watched() {
        let me = ProcessSpec::Pid(std::process::id());
        assert!(me.check().is_ok());
        assert!(read(std::process::id()).is_some_and(|r| r.threads >= 1 && r.rss_pages > 0));
        assert!(
            ProcessSpec::Name("no-such-program-xyz".into())
                .check()
                .is_err()
        );
    }
}
