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
