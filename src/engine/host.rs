//! The machine the generator runs on, sampled once a second during a round: this
//! process's CPU, and the host's (busy share of all cores, the share the hypervisor took as
//! steal, the run queue, and the CPU pressure stall information where the kernel keeps it),
//! so a late start can be blamed on the right party: loadmix itself, or other processes
//! crowding the cores, or the hypervisor.

use std::time::Duration;

use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

/// One round's samples, one per second.
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct HostSamples {
    /// This process's CPU, percent of one core.
    pub process_cpu: Vec<f64>,
    /// The host's busy CPU (everything but idle and I/O wait), percent of all cores.
    pub host_busy: Vec<f64>,
    /// CPU the hypervisor gave to others (steal), percent of all cores.
    pub steal: Vec<f64>,
    /// Processes runnable at the sample (`procs_running`, this one included).
    pub run_queue: Vec<u32>,
    /// Users active at the sample: closed users inside their active window, open sessions
    /// in progress.
    pub users: Vec<u64>,
    /// The share of the second in which some runnable task waited for a core
    /// (`/proc/pressure/cpu`, `some`), percent; empty where the kernel has no such file.
    pub pressure: Vec<f64>,
    /// The embedded server's threads' CPU, percent of one core (part of `process_cpu`:
    /// they run in this process, on the same cores); empty when none runs.
    pub embedded_cpu: Vec<f64>,
    /// This process's CPU over the whole round, seconds: from the sampler's start to its
    /// end, the last part of a second included (the samples above leave it out).
    pub process_cpu_s: f64,
    /// The embedded server's threads' share of `process_cpu_s`; `None` when none runs.
    pub embedded_cpu_s: Option<f64>,
    /// How long each class's users' tasks ran on the runtime's threads over the round,
    /// seconds, by class index (`engine::meter`): the proportions the report shares the
    /// generator's CPU out in.
    pub class_busy_s: Vec<f64>,
}

/// The name the embedded server's runtime gives its threads, as `/proc` keeps it (15
/// bytes at most).
const EMBEDDED_THREADS: &str = "loadmix-embedde";

/// CPU time of this process's threads that serve the embedded target, from
/// `/proc/self/task`; `None` when there are none (or no `/proc`).
fn embedded_cpu_time() -> Option<Duration> {
    // SAFETY: sysconf reads a constant of the system and touches no memory of ours.
    let ticks = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    let ticks = u64::try_from(ticks).ok().filter(|t| *t > 0)?;
    let mut total = 0u64;
    let mut any = false;
    for task in std::fs::read_dir("/proc/self/task").ok()?.flatten() {
        let dir = task.path();
        let comm = std::fs::read_to_string(dir.join("comm")).unwrap_or_default();
        if !comm.trim_end().starts_with(EMBEDDED_THREADS) {
            continue;
        }
        if let Some(t) = std::fs::read_to_string(dir.join("stat"))
            .ok()
            .and_then(|s| thread_ticks(&s))
        {
            total = total.saturating_add(t);
            any = true;
        }
    }
    any.then(|| Duration::from_micros(total.saturating_mul(1_000_000) / ticks))
}

/// User plus system ticks from a `/proc/.../stat` line (fields 14 and 15, counted after
/// the command name's closing parenthesis, which may itself hold spaces).
fn thread_ticks(stat: &str) -> Option<u64> {
    let rest = &stat[stat.rfind(')')? + 1..];
    let f: Vec<&str> = rest.split_ascii_whitespace().collect();
    let utime: u64 = f.get(11)?.parse().ok()?;
    let stime: u64 = f.get(12)?.parse().ok()?;
    utime.checked_add(stime)
}

/// Microseconds some task has waited for a core since boot (`/proc/pressure/cpu`'s
/// `some total=`), or `None` where there is no such file.
fn read_pressure() -> Option<u64> {
    let text = std::fs::read_to_string("/proc/pressure/cpu").ok()?;
    parse_pressure(&text)
}

fn parse_pressure(text: &str) -> Option<u64> {
    some_field(text, "total=")?.parse().ok()
}

/// A field of the pressure file's `some` line, by its `name=`.
fn some_field<'t>(text: &'t str, name: &str) -> Option<&'t str> {
    let line = text.lines().find(|l| l.starts_with("some "))?;
    line.split_ascii_whitespace()
        .find_map(|f| f.strip_prefix(name))
}

/// The host's CPU pressure now: `some avg10`, percent (the share of the last ten seconds
/// in which a task waited for a core); `None` where the kernel does not keep it.
pub(crate) fn cpu_pressure_now() -> Option<f64> {
    let text = std::fs::read_to_string("/proc/pressure/cpu").ok()?;
    some_field(&text, "avg10=")?.parse().ok()
}

/// This process's user and system CPU time so far.
pub(crate) fn cpu_time() -> Duration {
    // SAFETY: getrusage fills the struct we pass and reads nothing else; a zeroed rusage is
    // a valid value of that plain C struct.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    let rc = unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut ru) };
    if rc != 0 {
        return Duration::ZERO;
    }
    let tv = |t: libc::timeval| {
        Duration::from_secs(t.tv_sec.max(0) as u64) + Duration::from_micros(t.tv_usec.max(0) as u64)
    };
    tv(ru.ru_utime) + tv(ru.ru_stime)
}

/// The host's CPU counters (jiffies since boot: all, busy, steal) and the run queue, from
/// `/proc/stat`; `None` where there is no such file.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
struct Stat {
    total: u64,
    busy: u64,
    steal: u64,
    running: u32,
}

fn read_stat() -> Option<Stat> {
    let text = std::fs::read_to_string("/proc/stat").ok()?;
    parse_stat(&text)
}

fn parse_stat(text: &str) -> Option<Stat> {
    let mut s = Stat::default();
    let mut seen = false;
    for line in text.lines() {
        let mut f = line.split_ascii_whitespace();
        match f.next() {
            Some("cpu") => {
                let v: Vec<u64> = f.filter_map(|x| x.parse().ok()).collect();
                // user nice system idle iowait irq softirq steal [guest guest_nice]
                if v.len() < 8 {
                    return None;
                }
                // guest time is already counted in user; leave it out of the total.
                s.total = v[..8].iter().sum();
                s.busy = s.total - v[3] - v[4];
                s.steal = v[7];
                seen = true;
            }
            Some("procs_running") => {
                s.running = f.next().and_then(|x| x.parse().ok()).unwrap_or(0);
            }
            _ => {}
        }
    }
    seen.then_some(s)
}

/// Sample once a second until `done`.
pub(crate) fn sampler(
    done: CancellationToken,
    users: std::sync::Arc<std::sync::atomic::AtomicU64>,
) -> tokio::task::JoinHandle<HostSamples> {
    tokio::spawn(async move {
        let mut out = HostSamples::default();
        let mut last = (Instant::now(), cpu_time(), read_stat(), read_pressure());
        let mut embedded = embedded_cpu_time();
        let first = (last.1, embedded);
        loop {
            tokio::select! {
                _ = tokio::time::sleep(Duration::from_secs(1)) => {}
                _ = done.cancelled() => break,
            }
            let now = (Instant::now(), cpu_time(), read_stat(), read_pressure());
            out.users
                .push(users.load(std::sync::atomic::Ordering::Relaxed));
            let wall = now.0.duration_since(last.0).as_secs_f64();
            if wall > 0.0 {
                out.process_cpu
                    .push((now.1.saturating_sub(last.1)).as_secs_f64() / wall * 100.0);
                if let (Some(a), Some(b)) = (last.3, now.3) {
                    let stalled = b.saturating_sub(a) as f64 / 1e6;
                    out.pressure.push((stalled / wall * 100.0).min(100.0));
                }
                let served = embedded_cpu_time();
                if let (Some(a), Some(b)) = (embedded, served) {
                    out.embedded_cpu
                        .push(b.saturating_sub(a).as_secs_f64() / wall * 100.0);
                }
                embedded = served;
            }
            if let (Some(a), Some(b)) = (last.2, now.2) {
                let total = b.total.saturating_sub(a.total);
                if total > 0 {
                    let pct = |x: u64, y: u64| y.saturating_sub(x) as f64 / total as f64 * 100.0;
                    out.host_busy.push(pct(a.busy, b.busy));
                    out.steal.push(pct(a.steal, b.steal));
                    out.run_queue.push(b.running);
                }
            }
            last = now;
        }
        out.process_cpu_s = cpu_time().saturating_sub(first.0).as_secs_f64();
        out.embedded_cpu_s = match (first.1, embedded_cpu_time()) {
            (Some(a), Some(b)) => Some(b.saturating_sub(a).as_secs_f64()),
            _ => None,
        };
        out
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_threads_ticks_are_read_past_a_name_with_spaces() {
        let stat = "4242 (loadmix embedded) S 1 2 3 4 5 6 7 8 9 10 130 25 0 0 20 0 9 0";
        assert_eq!(thread_ticks(stat), Some(155));
        assert_eq!(thread_ticks("4242 (x) S 1 2"), None);
        assert_eq!(thread_ticks("no parenthesis"), None);
    }

    #[test]
    fn cpu_pressure_is_read_from_its_some_line() {
        let text = "some avg10=2.35 avg60=3.14 avg300=2.96 total=27389921\nfull avg10=0.00 avg60=0.00 avg300=0.00 total=0\n";
        assert_eq!(parse_pressure(text), Some(27_389_921));
        assert_eq!(parse_pressure("full total=3\n"), None);
        assert_eq!(parse_pressure("some avg10=x total=-1\n"), None);
    }

    #[test]
    fn proc_stat_is_read_as_busy_steal_and_run_queue() {
        let s = parse_stat(
            "cpu  100 0 50 800 20 0 10 20 0 0\ncpu0 50 0 25 400 10 0 5 10 0 0\nintr 1\nprocs_running 3\nprocs_blocked 0\n",
        )
        .unwrap();
        assert_eq!(s.total, 1000);
        assert_eq!(s.busy, 180);
        assert_eq!(s.steal, 20);
        assert_eq!(s.running, 3);
        assert!(parse_stat("nothing here").is_none());
        assert!(parse_stat("cpu 1 2").is_none());
    }
}
