//! Over many sampled operations the observed mix matches the table's weights (Pearson's
//! chi-square), and the same test rejects a table that is not the one sampled from.

use loadmix::UserClass;
use loadmix::plan;
use statrs::distribution::{ChiSquared, ContinuousCDF};

const N: u64 = 200_000;

fn class(yaml: &str, name: &str) -> UserClass {
    let w = loadmix::load_str("mix.yaml", yaml, &[], None).unwrap();
    w.class(name).unwrap().clone()
}

/// p-value of observed counts against expected probabilities.
fn chi_square_p(observed: &[u64], probs: &[f64]) -> f64 {
    let n: u64 = observed.iter().sum();
    let stat: f64 = observed
        .iter()
        .zip(probs)
        .map(|(o, p)| {
            let e = p * n as f64;
            (*o as f64 - e).powi(2) / e
        })
        .sum();
    let dist = ChiSquared::new((observed.len() - 1) as f64).unwrap();
    1.0 - dist.cdf(stat)
}

fn observed(c: &UserClass, seed: u64) -> Vec<u64> {
    let mut counts = vec![0u64; c.ops.len()];
    // Several VUs, as a run would have them.
    for vu in 0..4 {
        for p in plan::sequence(seed, c, vu, 1, N / 4) {
            counts[p.op] += 1;
        }
    }
    counts
}

const COSMO_MORSE: &str = r#"
users:
  - class: morse
    protocol: morse
    count: 10
    mix: { publish: 0.5, sync: 76.5, update: 15, subscribe: 7.75, delete: 0.25 }
  - class: caldav
    protocol: caldav
    count: 2
    mix: { create_calendar: 0.5, put_event: 25, delete_event: 0.5, time_range_report: 69, get_event: 5 }
"#;

#[test]
fn observed_mix_matches_the_weights() {
    for name in ["morse", "caldav"] {
        let c = class(COSMO_MORSE, name);
        let probs: Vec<f64> = c.ops.iter().map(|o| o.probability).collect();
        assert!((probs.iter().sum::<f64>() - 1.0).abs() < 1e-12);
        let p = chi_square_p(&observed(&c, 2007), &probs);
        assert!(p > 0.001, "{name}: p = {p}");
    }
}

#[test]
fn a_wrong_table_is_rejected() {
    let c = class(COSMO_MORSE, "morse");
    // Swap sync and update: the sample still comes from the real table.
    let mut wrong: Vec<f64> = c.ops.iter().map(|o| o.probability).collect();
    wrong.swap(1, 2);
    assert!(chi_square_p(&observed(&c, 2007), &wrong) < 1e-9);
    // A subtle error: 1 % moved from sync to subscribe.
    let mut subtle: Vec<f64> = c.ops.iter().map(|o| o.probability).collect();
    subtle[1] -= 0.01;
    subtle[3] += 0.01;
    assert!(chi_square_p(&observed(&c, 2007), &subtle) < 1e-6);
}

#[test]
fn weights_need_not_sum_to_one() {
    let a = class(COSMO_MORSE, "morse");
    let b = class(
        &COSMO_MORSE.replace(
            "publish: 0.5, sync: 76.5, update: 15, subscribe: 7.75, delete: 0.25",
            "publish: 0.005, sync: 0.765, update: 0.15, subscribe: 0.0775, delete: 0.0025",
        ),
        "morse",
    );
    for (x, y) in a.ops.iter().zip(&b.ops) {
        assert!((x.probability - y.probability).abs() < 1e-12);
    }
}

const CHAIN: &str = r#"
users:
  - class: c
    protocol: caldav
    count: 4
    ops: { propfind: {}, sync_collection: {}, multiget: {}, put_event: {} }
    behaviours:
      poll:
        weight: 3
        start: propfind
        states:
          propfind: { sync_collection: 1 }
          sync_collection: { multiget: 0.4, sync_collection: 0.2, exit: 0.4 }
          multiget: { sync_collection: 0.5, exit: 0.5 }
      edit:
        weight: 1
        start: { put_event: 1 }
        states:
          put_event: { put_event: 0.3, propfind: 0.2, exit: 0.5 }
          propfind: { sync_collection: 1 }
          sync_collection: { exit: 1 }
"#;

/// A behaviour model's sampled operations match the mix its chain implies, worked out
/// from the fundamental matrix; and the same test rejects a mix that is not the chain's.
#[test]
fn a_chains_observed_mix_matches_the_one_it_implies() {
    let c = class(CHAIN, "c");
    let probs: Vec<f64> = c.ops.iter().map(|o| o.probability).collect();
    assert!((probs.iter().sum::<f64>() - 1.0).abs() < 1e-9, "{probs:?}");
    let seen = observed(&c, 77);
    let p = chi_square_p(&seen, &probs);
    assert!(p > 0.001, "p = {p}, observed {seen:?}, implied {probs:?}");
    let mut off = probs.clone();
    off[0] += 0.02;
    off[1] -= 0.02;
    assert!(chi_square_p(&seen, &off) < 1e-6);
    // Sessions as long as the chain says: poll 1 + (1 + …) — checked against sampling.
    let planned = plan::sequence(77, &c, 0, 1, N);
    let sessions = planned.last().unwrap().session + 1;
    let mean = N as f64 / sessions as f64;
    let expected: f64 = (0..2)
        .map(|b| {
            c.chain.behaviours[b].probability * c.chain.expected(b, 4).ops_per_session.unwrap()
        })
        .sum();
    assert!(
        (mean - expected).abs() / expected < 0.02,
        "{mean} vs {expected}"
    );
}

/// Think times from a samples file (`empirical:`, a path beside the workload) are drawn
/// as often as their counts say, and only those.
#[test]
fn empirical_think_times_come_from_their_file_by_count() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::copy(
        concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/fixtures/workloads/think-samples.txt"
        ),
        dir.path().join("t.txt"),
    )
    .unwrap();
    let w = dir.path().join("w.yaml");
    std::fs::write(
        &w,
        "users:\n  - class: c\n    protocol: caldav\n    count: 1\n    think: { empirical: t.txt }\n    mix: { propfind: 1 }\n",
    )
    .unwrap();
    let wl = loadmix::load(&w, &[]).unwrap();
    let c = wl.class("c").unwrap();
    let mut seen = std::collections::BTreeMap::<u128, u64>::new();
    for p in plan::sequence(3, c, 0, 1, 120_000) {
        *seen.entry(p.think.as_millis()).or_default() += 1;
    }
    assert_eq!(seen.keys().copied().collect::<Vec<_>>(), [120, 350, 2000]);
    let counts: Vec<u64> = seen.values().copied().collect();
    let p = chi_square_p(&counts, &[4.0 / 12.0, 7.0 / 12.0, 1.0 / 12.0]);
    assert!(p > 0.001, "{counts:?}: p = {p}");
}
