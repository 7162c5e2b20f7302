//! One process's share of a run that N processes make together (`--shard I/N`): closed
//! users are dealt out by index (user u lives on shard u mod N), open arrivals by their
//! place in the one seeded schedule (arrival k on shard k mod N). Every user and arrival
//! keeps the index, and so the seed, it has in a single process, so the N shards together
//! run exactly what one process would.

use std::fmt;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, SystemTime};

/// Shard `index` (from 0) of `count`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Shard {
    /// This process's index, from 0.
    pub index: u32,
    /// How many processes share the run.
    pub count: u32,
}

/// More shards than this is a typo, not a cluster.
pub(crate) const MAX_SHARDS: u32 = 10_000;

impl Default for Shard {
    fn default() -> Shard {
        Shard { index: 0, count: 1 }
    }
}

impl fmt::Display for Shard {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.index, self.count)
    }
}

impl Shard {
    /// `I/N` (I from 0 to N − 1), or `N` alone with I taken from `index_env` (a Kubernetes
    /// Indexed Job's `JOB_COMPLETION_INDEX`).
    pub fn parse(s: &str, index_env: Option<&str>) -> Result<Shard, String> {
        let s = s.trim();
        let (i, n) = match s.split_once('/') {
            Some((i, n)) => (i.trim().to_string(), n.trim()),
            None => match index_env {
                Some(i) => (i.trim().to_string(), s),
                None => {
                    return Err(format!(
                        "--shard {s}: give I/N (I from 0), or N with JOB_COMPLETION_INDEX set"
                    ));
                }
            },
        };
        let count: u32 = n
            .parse()
            .map_err(|_| format!("--shard {s}: '{n}' is not a shard count"))?;
        let index: u32 = i
            .parse()
            .map_err(|_| format!("--shard {s}: '{i}' is not a shard index"))?;
        if count == 0 || count > MAX_SHARDS {
            return Err(format!("--shard {s}: the count must be 1 to {MAX_SHARDS}"));
        }
        if index >= count {
            return Err(format!(
                "--shard {s}: shards are numbered 0 to {} (the index comes first)",
                count - 1
            ));
        }
        Ok(Shard { index, count })
    }

    /// True for the whole run (one process).
    pub fn is_whole(&self) -> bool {
        self.count == 1
    }

    /// Closed user `vu` of a class runs here.
    pub fn owns_user(&self, vu: u32) -> bool {
        vu % self.count == self.index
    }

    /// Arrival `k` (from 0) of an open class's schedule starts here.
    pub fn owns_arrival(&self, k: u64) -> bool {
        k % u64::from(self.count) == u64::from(self.index)
    }

    /// This shard's part of a limit the whole run shares (`max_concurrency`): the limit
    /// divided as evenly as it goes, and at least 1 so no shard is shut.
    pub fn share(&self, total: u32) -> u32 {
        let base = total / self.count;
        let extra = u32::from(self.index < total % self.count);
        (base + extra).max(1)
    }
}

/// A common start for processes that begin minutes apart (`--start-at`): the n-th round a
/// process runs (warm-up rounds included, in the order every shard runs them) starts its
/// clock at `at + n × every`, after its users are set up. A round whose set-up ran past
/// its slot starts at once, and its lateness is recorded.
#[derive(Debug)]
pub(crate) struct RoundClock {
    pub at: SystemTime,
    /// Slot length; `None` for a run bound by iterations: only the first round waits.
    pub every: Option<Duration>,
    next: AtomicU32,
}

impl RoundClock {
    pub(crate) fn new(at: SystemTime, every: Option<Duration>) -> RoundClock {
        RoundClock {
            at,
            every,
            next: AtomicU32::new(0),
        }
    }

    /// When the next round's clock should start; `None` when it should not wait.
    pub(crate) fn next_slot(&self) -> Option<SystemTime> {
        let n = self.next.fetch_add(1, Ordering::Relaxed);
        match (n, self.every) {
            (0, _) => Some(self.at),
            (_, None) => None,
            (n, Some(every)) => every.checked_mul(n).and_then(|d| self.at.checked_add(d)),
        }
    }
}

/// `--start-at`: an RFC 3339 time (`2026-12-01T09:30:00Z`), or `+DURATION` from now.
pub(crate) fn parse_start_at(s: &str, now: SystemTime) -> Result<SystemTime, String> {
    let s = s.trim();
    if let Some(rest) = s.strip_prefix('+') {
        let d = crate::workload::units::parse_duration(rest)
            .map_err(|e| format!("--start-at {s}: {e}"))?;
        return now
            .checked_add(d)
            .ok_or_else(|| format!("--start-at {s}: too far ahead"));
    }
    let t = chrono::DateTime::parse_from_rfc3339(s).map_err(|_| {
        format!("--start-at {s}: give an RFC 3339 time (2026-12-01T09:30:00Z) or +DURATION (+2m)")
    })?;
    let ms = t.timestamp_millis();
    let from_epoch = u64::try_from(ms)
        .map_err(|_| format!("--start-at {s}: before 1970"))
        .map(Duration::from_millis)?;
    let at = SystemTime::UNIX_EPOCH
        .checked_add(from_epoch)
        .ok_or_else(|| format!("--start-at {s}: too far ahead"))?;
    // A day ahead is a mistake in the date, not a plan.
    if at
        .duration_since(now)
        .is_ok_and(|d| d > Duration::from_secs(24 * 3600))
    {
        return Err(format!("--start-at {s}: more than a day ahead"));
    }
    Ok(at)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_round_clock_gives_each_round_its_slot() {
        let at = SystemTime::UNIX_EPOCH + Duration::from_secs(1_000);
        let c = RoundClock::new(at, Some(Duration::from_secs(40)));
        assert_eq!(c.next_slot(), Some(at));
        assert_eq!(c.next_slot(), Some(at + Duration::from_secs(40)));
        assert_eq!(c.next_slot(), Some(at + Duration::from_secs(80)));
        let c = RoundClock::new(at, None);
        assert_eq!(c.next_slot(), Some(at));
        assert_eq!(c.next_slot(), None);
    }

    #[test]
    fn start_times_are_rfc3339_or_from_now() {
        let now = SystemTime::UNIX_EPOCH + Duration::from_secs(1_764_000_000);
        assert_eq!(
            parse_start_at("+30s", now),
            Ok(now + Duration::from_secs(30))
        );
        let t = parse_start_at("2025-11-24T16:00:30Z", now).unwrap();
        assert_eq!(
            t.duration_since(SystemTime::UNIX_EPOCH).unwrap().as_secs(),
            1_764_000_030
        );
        assert!(parse_start_at("tomorrow", now).is_err());
        assert!(parse_start_at("+soon", now).is_err());
        assert!(
            parse_start_at("2025-12-24T16:00:00Z", now)
                .unwrap_err()
                .contains("a day ahead")
        );
    }

    #[test]
    fn shards_are_parsed_from_the_flag_or_the_job_index() {
        assert_eq!(Shard::parse("1/3", None), Ok(Shard { index: 1, count: 3 }));
        assert_eq!(
            Shard::parse("4", Some("2")),
            Ok(Shard { index: 2, count: 4 })
        );
        assert!(
            Shard::parse("3/2", None)
                .unwrap_err()
                .contains("numbered 0 to 1")
        );
        assert!(
            Shard::parse("0/0", None)
                .unwrap_err()
                .contains("count must be")
        );
        assert!(
            Shard::parse("4", None)
                .unwrap_err()
                .contains("JOB_COMPLETION_INDEX")
        );
        assert!(Shard::parse("x/2", None).is_err());
        assert!(Shard::parse("4", Some("4")).is_err());
        assert!(Shard::parse("0/99999999", None).is_err());
    }

    #[test]
    fn every_user_and_arrival_lives_on_exactly_one_shard_and_limits_add_up() {
        for n in [1u32, 2, 3, 7] {
            let shards: Vec<Shard> = (0..n).map(|index| Shard { index, count: n }).collect();
            for vu in 0..50 {
                assert_eq!(shards.iter().filter(|s| s.owns_user(vu)).count(), 1);
            }
            for k in 0..50u64 {
                assert_eq!(shards.iter().filter(|s| s.owns_arrival(k)).count(), 1);
            }
            for total in [n, 10, 64, 101] {
                assert_eq!(shards.iter().map(|s| s.share(total)).sum::<u32>(), total);
            }
        }
        assert_eq!(Shard { index: 2, count: 3 }.share(1), 1, "never shut");
    }
}
