//! `--shard I/N`: N processes that together run exactly what one would. The union of the
//! shards' parts (closed users, open arrivals) is the whole plan, each part on exactly one
//! shard; a sharded run's operations add up, operation by operation, to the unsharded
//! run's; a bad shard is refused before anything runs.

use loadmix::Shard;
use loadmix::plan::{Part, shard_part};

use crate::common::*;

/// A closed class under a ramp beside an open class with Poisson arrivals.
const MIXED: &str = "name: mixed\ntarget: http://127.0.0.1:1\nrun: { duration: 4s, rounds: 2, seed: 77 }\nusers:\n  - class: closed\n    protocol: http\n    count: 11\n    ramp: [{ to: 11, over: 2s }]\n    mix:\n      get: { weight: 1, path: /x }\n  - class: open\n    protocol: http\n    arrival: { rate: 150/s, process: poisson, max_concurrency: 10 }\n    mix:\n      get: { weight: 1, path: /y }\n";

/// `loadmix run W --shard SHARD --quiet --out OUT`, in-process.
fn run_shard(w: &std::path::Path, shard: &str, out: &std::path::Path) -> i32 {
    loadmix(&[
        "run",
        &path_str(w),
        "--shard",
        shard,
        "--quiet",
        "--out",
        &path_str(out),
    ])
}

fn key(p: &Part) -> (String, u8, u64, u128) {
    match p {
        Part::User { class, vu } => (class.clone(), 0, u64::from(*vu), 0),
        Part::Arrival { class, k, at } => (class.clone(), 1, *k, at.as_nanos()),
    }
}

fn assert_union_is_whole(w: &loadmix::Workload) {
    for round in 1..=w.run.rounds.min(2) {
        let mut whole: Vec<_> = shard_part(w, Shard::default(), round)
            .map(|p| key(&p))
            .collect();
        whole.sort();
        assert!(!whole.is_empty());
        for n in [1u32, 2, 3, 7] {
            let mut union = Vec::new();
            for index in 0..n {
                union.extend(shard_part(w, Shard { index, count: n }, round).map(|p| key(&p)));
            }
            union.sort();
            // Equal as sorted lists: nothing missing, nothing on two shards.
            assert_eq!(union, whole, "{} round {round}, {n} shards", w.name);
        }
    }
}

#[test]
fn the_shards_parts_together_are_the_whole_plan() {
    let cosmo = loadmix::load(&root().join("workloads/cosmo-0.7.yaml"), &[]).unwrap();
    assert_union_is_whole(&cosmo);
    let mixed = loadmix::load_str("mixed.yaml", MIXED, &[], None).unwrap();
    assert_union_is_whole(&mixed);
    // The open class's arrivals are one schedule dealt out, not N schedules at rate / N.
    let arrivals = |s: Shard| {
        shard_part(&mixed, s, 1)
            .filter(|p| matches!(p, Part::Arrival { .. }))
            .count()
    };
    let whole = arrivals(Shard::default());
    assert!((450..750).contains(&whole), "{whole}");
    let third = arrivals(Shard { index: 2, count: 3 });
    assert!(
        third == whole / 3 || third == whole / 3 + 1,
        "{third} of {whole}"
    );
}

#[test]
fn shards_run_together_what_one_process_runs_operation_for_operation() {
    let rt = runtime();
    let srv = embedded(&rt);
    let tmp = tempdir();
    let w = tmp.path().join("w.yaml");
    // Iterations, not a duration: each user's operations are fixed by its seed.
    std::fs::write(
        &w,
        format!(
            "target: {}\ncontext: /cosmo\nrun: {{ iterations: 7, seed: 5 }}\nusers:\n  - class: a\n    protocol: http\n    count: 5\n    mix:\n      send: {{ weight: 2, method: POST, path: '{{context}}/queue/s', body: x, expect: [201] }}\n      wait: {{ weight: 1, path: '{{context}}/_loadmix/delay/0' }}\n  - class: b\n    protocol: http\n    count: 3\n    mix:\n      wait: {{ weight: 1, path: '{{context}}/_loadmix/delay/0' }}\n      send: {{ weight: 1, method: POST, path: '{{context}}/queue/s', body: y, expect: [201] }}\n",
            srv.url()
        ),
    )
    .unwrap();
    let counts = |r: &loadmix::reports::Report| -> Vec<(String, u64)> {
        r.summary
            .ops
            .iter()
            .map(|o| (o.op.clone(), o.requests))
            .collect()
    };
    let whole_dir = tmp.path().join("whole");
    assert_eq!(
        loadmix(&[
            "run",
            &path_str(&w),
            "--quiet",
            "--out",
            &path_str(&whole_dir)
        ]),
        0
    );
    let whole = read_report(&whole_dir);
    assert!(whole.shard.is_none());
    let mut summed: std::collections::BTreeMap<String, u64> = Default::default();
    for index in 0..3 {
        let dir = tmp.path().join(format!("shard-{index}"));
        let shard = format!("{index}/3");
        assert_eq!(run_shard(&w, &shard, &dir), 0);
        let r = read_report(&dir);
        let info = r.shard.unwrap();
        assert_eq!((info.index, info.count), (index, 3));
        for (op, n) in counts(&r) {
            *summed.entry(op).or_default() += n;
        }
    }
    let whole_counts: std::collections::BTreeMap<String, u64> =
        counts(&whole).into_iter().collect();
    assert_eq!(summed, whole_counts);
    assert_eq!(whole_counts.values().sum::<u64>(), (5 + 3) * 7);
    // Merged, the three reports are one run with the unsharded run's counts, which
    // `compare` takes like any other.
    let shard_files: Vec<String> = (0..3)
        .map(|i| path_str(&tmp.path().join(format!("shard-{i}/run.json"))))
        .collect();
    let merged_dir = tmp.path().join("merged");
    let mut args = vec!["merge"];
    args.extend(shard_files.iter().map(String::as_str));
    let merged_out = path_str(&merged_dir);
    args.extend(["--out", merged_out.as_str()]);
    assert_eq!(loadmix(&args), 0);
    let merged = read_report(&merged_dir);
    assert_eq!(merged.shards.len(), 3);
    assert_eq!(
        counts(&merged)
            .into_iter()
            .collect::<std::collections::BTreeMap<_, _>>(),
        whole_counts
    );
    assert_eq!(merged.summary.total.requests, whole.summary.total.requests);
    assert_eq!(merged.rounds[0].vus, whole.rounds[0].vus);
    let c = loadmix::reports::compare::compare(
        &["whole".into(), "merged".into()],
        &[whole.clone(), merged.clone()],
        false,
    )
    .unwrap();
    assert_eq!(c.rows.len(), whole.summary.ops.len() + 1);
    // A shard missing, twice, or a file that is no report: exit 2, nothing written.
    for (files, says) in [
        (
            vec![&shard_files[0], &shard_files[2]],
            "shard 1 of 3 is missing",
        ),
        (
            vec![
                &shard_files[0],
                &shard_files[1],
                &shard_files[1],
                &shard_files[2],
            ],
            "shard 1 is given twice",
        ),
        (
            vec![&shard_files[0], &path_str(&whole_dir.join("run.json"))],
            "not a shard's report",
        ),
        (vec![&path_str(&w)], "not a loadmix report"),
    ] {
        let nothing = tmp.path().join("nothing");
        let mut args = vec!["merge".to_string()];
        args.extend(files.iter().map(|f| f.to_string()));
        args.extend(["--out".into(), path_str(&nothing)]);
        let o = loadmix_bin(&args.iter().map(String::as_str).collect::<Vec<_>>());
        assert_eq!(o.status.code(), Some(2), "{says}");
        let stderr = String::from_utf8_lossy(&o.stderr);
        assert!(stderr.contains(says), "{says}: {stderr}");
        assert!(!nothing.exists(), "{says}: nothing is written");
    }
    rt.block_on(srv.stop());
}

#[test]
fn a_bad_shard_is_refused_before_anything_runs() {
    for (shard, says) in [
        ("3/2", "numbered 0 to 1"),
        ("0/0", "count must be"),
        ("two/3", "not a shard index"),
    ] {
        let o = loadmix_bin(&["run", "workloads/cosmo-0.7.yaml", "--shard", shard]);
        assert_eq!(o.status.code(), Some(2), "{shard}");
        let stderr = String::from_utf8_lossy(&o.stderr);
        assert!(stderr.contains(says), "{shard}: {stderr}");
    }
    let o = loadmix_bin(&["plan", "workloads/cosmo-0.7.yaml", "--shard", "7/7"]);
    assert_eq!(o.status.code(), Some(2));
}

#[test]
fn shards_started_apart_begin_their_rounds_at_the_common_start_and_merge() {
    let tmp = tempdir();
    // An absolute time all shards share, a few seconds ahead, to the millisecond.
    let start = chrono::Utc::now() + chrono::Duration::seconds(4);
    let at = start.to_rfc3339_opts(chrono::SecondsFormat::Millis, true);
    let children: Vec<_> = (0..2)
        .map(|i| {
            let out = tmp.path().join(format!("s{i}"));
            let child = std::process::Command::new(env!("CARGO_BIN_EXE_loadmix"))
                .current_dir(root())
                .args([
                    "run",
                    "workloads/queue-sizes.yaml",
                    "--duration",
                    "1s",
                    "--rounds",
                    "2",
                    "--start-at",
                    &at,
                    "--round-every",
                    "3s",
                    "--quiet",
                    "--out",
                    &path_str(&out),
                ])
                .env("LOADMIX_SHARD", format!("{i}/2"))
                .stdout(std::process::Stdio::null())
                .spawn()
                .unwrap();
            (child, out)
        })
        .collect();
    let mut files = Vec::new();
    for (mut child, out) in children {
        assert!(child.wait().unwrap().success());
        let r = read_report(&out);
        assert!(r.shard.is_some(), "LOADMIX_SHARD is read");
        // No round's clock starts before its slot: the first at the common start, the
        // second one slot later.
        for (k, round) in r.rounds.iter().enumerate() {
            let began = chrono::DateTime::parse_from_rfc3339(&round.started_at).unwrap();
            let slot = start + chrono::Duration::seconds(3 * k as i64);
            assert!(
                began.timestamp_millis() >= slot.timestamp_millis(),
                "round {} began {began} before its slot {slot}",
                k + 1
            );
            assert!(round.start_late_ms.is_some());
            // The samplers start with the round's clock, not before the wait for it.
            assert!(
                round.per_second.len() <= round.total.timeline.len() + 1,
                "{} seconds sampled for a {}-second timeline",
                round.per_second.len(),
                round.total.timeline.len()
            );
        }
        files.push(path_str(&out.join("run.json")));
    }
    let merged = tmp.path().join("merged");
    let code = loadmix(&[
        "merge",
        &files[0],
        &files[1],
        "--out",
        &path_str(&merged),
        "--format",
        "json",
    ]);
    assert_eq!(code, 0);
    assert_eq!(read_report(&merged).shards.len(), 2);
}

#[test]
fn the_merged_run_is_judged_by_the_workloads_thresholds() {
    let tmp = tempdir();
    for (rule, code) in [("'> 0'", 0), ("'> 100000000'", 1)] {
        let w = tmp.path().join(format!("w{code}.yaml"));
        std::fs::write(
            &w,
            format!(
                "target: embedded\ncontext: /cosmo\nrun: {{ iterations: 20, seed: 9 }}\nthresholds:\n  - {{ op: total, ops_per_sec: {rule} }}\nusers:\n  - class: a\n    protocol: http\n    count: 4\n    mix:\n      send: {{ weight: 1, method: POST, path: '{{context}}/queue/t', body: x, expect: [201] }}\n"
            ),
        )
        .unwrap();
        let mut files = Vec::new();
        for i in 0..2 {
            let out = tmp.path().join(format!("r{code}-{i}"));
            let shard = format!("{i}/2");
            let ran = run_shard(&w, &shard, &out);
            assert_eq!(ran, code, "each shard judges its own part too");
            files.push(path_str(&out.join("run.json")));
        }
        let merged = tmp.path().join(format!("m{code}"));
        assert_eq!(
            loadmix(&["merge", &files[0], &files[1], "--out", &path_str(&merged)]),
            code,
            "{rule}"
        );
        let r = read_report(&merged);
        assert_eq!(r.thresholds.len(), 1);
        assert_eq!(r.thresholds[0].passed, code == 0);
        assert!(r.thresholds[0].observed.is_some());
    }
}

#[test]
fn a_sweeps_points_take_the_slots_after_each_other_under_a_common_start() {
    let tmp = tempdir();
    let start = chrono::Utc::now() + chrono::Duration::seconds(2);
    let at = start.to_rfc3339_opts(chrono::SecondsFormat::Millis, true);
    let out = tmp.path().join("sweep");
    let code = loadmix(&[
        "run",
        "workloads/queue-sizes.yaml",
        "--duration",
        "1s",
        "--rounds",
        "1",
        "--sweep",
        "users.producer.count=1,2",
        "--start-at",
        &at,
        "--round-every",
        "3s",
        "--quiet",
        "--out",
        &path_str(&out),
    ]);
    assert_eq!(code, 0);
    // The second point's round has the second slot, not the first one again.
    for (k, point) in ["users.producer.count=1", "users.producer.count=2"]
        .iter()
        .enumerate()
    {
        let r = read_report(&out.join(point));
        let began = chrono::DateTime::parse_from_rfc3339(&r.rounds[0].started_at).unwrap();
        let slot = start + chrono::Duration::seconds(3 * k as i64);
        assert!(
            began.timestamp_millis() >= slot.timestamp_millis(),
            "{point} began {began}, before its slot {slot}"
        );
    }
}
