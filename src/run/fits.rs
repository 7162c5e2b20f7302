//! Will the workload fit this machine? Users cost memory whether or not they are busy; a
//! count that cannot fit is refused before anything is sent, instead of growing until the
//! allocator aborts.

use crate::workload::Workload;

/// Memory one virtual user or open session may hold: 5.7 KiB measured for an idle user
/// (100,000 in 569 MiB, `bench/generator.sh`), plus an HTTP connection's read and write
/// buffers once it is busy.
pub(crate) const BYTES_PER_USER: u64 = 16 * 1024;

/// The most users or sessions the workload has at once, over all classes.
pub(crate) fn peak_users(w: &Workload) -> u64 {
    w.classes
        .iter()
        .map(|c| match &c.arrival {
            Some(a) => (a.max_concurrency as u64).max(a.returning.unwrap_or(0) as u64),
            None => Workload::peak_users(c) as u64,
        })
        .sum()
}

/// `Err` with what to do when the workload's users cannot fit in this machine's memory.
pub(crate) fn check(w: &Workload) -> Result<(), String> {
    let Some(avail) = crate::formats::files::memory_available() else {
        return Ok(());
    };
    check_against(w, avail)
}

/// Bound the large answer bodies the users may hold at once to half of what the machine
/// has available, so that answers larger than a user's share (a Morse Code sync of 60 MiB
/// to each of 16 users) fail, counted, rather than take the machine's memory.
pub(crate) fn bound_bodies() {
    if let Some(avail) = crate::formats::files::memory_available() {
        crate::transport::limit_kept_bodies(avail / 2);
    }
}

fn check_against(w: &Workload, available: u64) -> Result<(), String> {
    let users = peak_users(w);
    let need = users.saturating_mul(BYTES_PER_USER);
    // Leave a fifth for everything else the process and the machine need.
    if need <= available / 5 * 4 {
        return Ok(());
    }
    let gib = |b: u64| b as f64 / (1u64 << 30) as f64;
    Err(format!(
        "{} users or sessions at once need about {:.1} GiB ({} KiB each); this machine has {:.1} GiB available. Lower the counts (or max_concurrency), or split the load over several machines",
        users,
        gib(need),
        BYTES_PER_USER / 1024,
        gib(available)
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn w(count: u64) -> Workload {
        crate::workload::load_str(
            "t.yaml",
            &format!(
                "users:\n  - class: a\n    protocol: http\n    count: {count}\n    mix: {{ g: {{ weight: 1, path: /x }} }}\n  - class: b\n    protocol: http\n    arrival: {{ rate: 1/s, max_concurrency: 100 }}\n    mix: {{ g: {{ weight: 1, path: /x }} }}\n"
            ),
            &[],
            None,
        )
        .unwrap()
    }

    #[test]
    fn counts_that_do_not_fit_are_refused_with_the_figures() {
        assert_eq!(peak_users(&w(10)), 110);
        let gib = 1u64 << 30;
        assert!(check_against(&w(100_000), 24 * gib).is_ok());
        let e = check_against(&w(10_000_000), 24 * gib).unwrap_err();
        assert!(
            e.contains("10000100 users") && e.contains("split the load"),
            "{e}"
        );
    }
}
