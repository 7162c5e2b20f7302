//! One process's share of a run that N processes make together (`--shard I/N`): closed
//! users are dealt out by index (user u lives on shard u mod N), open arrivals by their
//! place in the one seeded schedule (arrival k on shard k mod N). Every user and arrival
//! keeps the index, and so the seed, it has in a single process, so the N shards together
//! run exactly what one process would.

use std::fmt;

/// Shard `index` (from 0) of `count`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Shard {
    pub index: u32,
    pub count: u32,
}

/// More shards than this is a typo, not a cluster.
pub const MAX_SHARDS: u32 = 10_000;

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

#[cfg(test)]
mod tests {
    use super::*;

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
