//! Whole workloads against the embedded server, in-process: what the report counts is what
//! the server answered, the JSON round-trips through `loadmix report`, and `run` executes
//! exactly the sequence `plan` prints.

use std::collections::BTreeMap;

use crate::common::*;
use loadmix::plan;

/// Run `workloads/queue-sizes.yaml` against `url` with extra flags; the report must be written.
fn run_queue(url: &str, extra: &[&str]) -> loadmix::reports::Report {
    let tmp = tempdir();
    let out = out_dir(&tmp);
    let file = path_str(&root().join("workloads/queue-sizes.yaml"));
    let out_s = path_str(&out);
    let mut args = vec!["run", &file, "--target", url, "--out", &out_s, "--quiet"];
    args.extend_from_slice(extra);
    assert_eq!(loadmix(&args), 0);
    read_report(&out)
}

#[test]
fn queue_workload_report_matches_what_the_server_counted() {
    let rt = runtime();
    let srv = embedded(&rt);
    let r = run_queue(&srv.url(), &[]);
    let send = op(&r, "producer.send");
    let recv = op(&r, "consumer.receive");
    // 4 producers × 250 messages × 3 rounds, every one accepted.
    assert_eq!(send.requests, 3000);
    assert_eq!(send.successes, 3000);
    assert_eq!(srv.stats.count("POST", 201), 3000);
    assert_eq!(srv.stats.method_total("POST"), 3000);
    // 2 consumers × 250 polls × 3 rounds, each answered 200 (a message) or 204 (empty).
    assert_eq!(recv.requests, 1500);
    assert_eq!(srv.stats.method_total("GET"), 1500);
    assert_eq!(
        recv.status.get("200").copied().unwrap_or(0),
        srv.stats.count("GET", 200)
    );
    assert_eq!(
        recv.status.get("204").copied().unwrap_or(0),
        srv.stats.count("GET", 204)
    );
    assert_eq!(r.summary.total.failures, 0);
    assert_eq!(r.summary.rounds, 3);
    assert_eq!(r.rounds.len(), 3);
    for round in &r.rounds {
        assert_eq!(round.vus, 6);
        let s = round.ops.iter().find(|o| o.op == "producer.send").unwrap();
        assert_eq!(s.requests, 1000);
        assert!(s.ops_per_sec > 0.0);
    }
    // Bytes: each send carries a 1 KiB body.
    assert!(send.bytes_sent >= 3000 * 1024, "{}", send.bytes_sent);
    // Received bodies: every 200 returned one 1 KiB message.
    assert!(recv.bytes_received >= recv.status.get("200").copied().unwrap_or(0) * 1024);
    let ci = send
        .across_rounds
        .as_ref()
        .unwrap()
        .ops_per_sec_ci95
        .unwrap();
    assert!(ci[0] <= send.ops_per_sec && send.ops_per_sec <= ci[1]);
    rt.block_on(srv.stop());
}

#[test]
fn report_json_round_trips_through_loadmix_report() {
    let tmp = tempdir();
    let out = out_dir(&tmp);
    let run = loadmix_bin(&[
        "run",
        "fixtures/workloads/mixed-http.yaml",
        "--duration",
        "1s",
        "--out",
        &path_str(&out),
        "--quiet",
    ]);
    assert_eq!(
        run.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&run.stderr)
    );
    let original = read_report(&out);
    // JSON → report → JSON: nothing lost or changed.
    let again = loadmix_bin(&[
        "report",
        &path_str(&out.join("run.json")),
        "--format",
        "json",
    ]);
    assert_eq!(again.status.code(), Some(0));
    let reparsed: loadmix::reports::Report = serde_json::from_slice(&again.stdout).unwrap();
    assert_eq!(reparsed, original);
    // The wide table rendered from the saved run is the one written at run time.
    let wide = loadmix_bin(&["report", &path_str(&out.join("run.json")), "--wide"]);
    let written = std::fs::read_to_string(out.join("report.txt")).unwrap();
    assert_eq!(String::from_utf8_lossy(&wide.stdout), written);
    // And what run printed is the table `report` prints at the same width (no terminal
    // here: 100 columns).
    let table = loadmix_bin(&["report", &path_str(&out.join("run.json"))]);
    assert_eq!(run.stdout, table.stdout);
    // The serialised histograms decode to the reported counts.
    for o in &original.summary.ops {
        let h = loadmix::reports::decode_histogram(&o.histogram).unwrap();
        assert_eq!(h.len(), o.successes, "{}", o.op);
    }
    assert_eq!(original.schema, "loadmix/report/v2");
    assert!(!original.workload.hash.is_empty());
    assert!(original.workload.source.contains("mixed-http"));
}

#[test]
fn run_executes_exactly_the_planned_sequence() {
    let tmp = tempdir();
    let out = out_dir(&tmp);
    let log = tmp.path().join("ops.csv");
    let file = root().join("fixtures/workloads/mixed-http.yaml");
    let code = loadmix(&[
        "run",
        &path_str(&file),
        "--out",
        &path_str(&out),
        "--log-ops",
        &path_str(&log),
        "--quiet",
    ]);
    assert_eq!(code, 0);
    let w = loadmix::load(&file, &[]).unwrap();
    // (round, class, vu) -> ops in order
    let mut executed: BTreeMap<(u32, String, u32), Vec<String>> = BTreeMap::new();
    let text = std::fs::read_to_string(&log).unwrap();
    for line in text.lines().skip(1) {
        let f: Vec<&str> = line.split(',').collect();
        let key = (
            f[0].parse().unwrap(),
            f[1].to_string(),
            f[2].parse().unwrap(),
        );
        let ops = executed.entry(key).or_default();
        assert_eq!(
            f[3].parse::<usize>().unwrap(),
            ops.len(),
            "seq numbers are consecutive"
        );
        ops.push(f[4].to_string());
    }
    assert_eq!(executed.len(), 2 * 5, "every VU of both rounds ran");
    for ((round, class, vu), ops) in &executed {
        assert!(ops.len() > 50, "{class}#{vu} ran only {} ops", ops.len());
        let c = w.class(class).unwrap();
        let planned: Vec<String> = plan::sequence(w.run.seed, c, *vu, *round, ops.len() as u64)
            .into_iter()
            .map(|p| p.name)
            .collect();
        assert_eq!(&planned, ops, "{class}#{vu} round {round}");
    }
    // The plan command prints the same sequence.
    let printed = loadmix_bin(&[
        "plan",
        "fixtures/workloads/mixed-http.yaml",
        "--vu",
        "reader#1",
        "--round",
        "2",
        "--ops",
        "30",
    ]);
    let names: Vec<String> = String::from_utf8_lossy(&printed.stdout)
        .lines()
        .skip(2)
        .map(|l| l.rsplit('\t').next().unwrap().to_string())
        .collect();
    let ran = &executed[&(2, "reader".to_string(), 1)];
    assert_eq!(names, ran[..30].to_vec());
}

/// A user that bootstraps (its first collection, and again after deleting its last one)
/// still picks exactly the planned operations after exactly the planned think times: the
/// op log and `plan` agree field by field.
#[test]
fn plan_and_op_log_agree_with_bootstraps_in_between() {
    let tmp = tempdir();
    let out = out_dir(&tmp);
    let log = tmp.path().join("ops.csv");
    let file = tmp.path().join("w.yaml");
    std::fs::write(
        &file,
        "name: boots\nrun: { iterations: 80, rounds: 1, seed: 11 }\naccounts: { create: cmp }\n\
         think: { uniform: [0ms, 2ms] }\nusers:\n  - class: m\n    protocol: morse\n    count: 2\n\
         \x20   params: { collection_size: 3 }\n    mix: { sync: 4, update: 3, delete: 3 }\n",
    )
    .unwrap();
    let code = loadmix(&[
        "run",
        &path_str(&file),
        "--out",
        &path_str(&out),
        "--log-ops",
        &path_str(&log),
        "--quiet",
    ]);
    assert_eq!(code, 0);
    let w = loadmix::load(&file, &[]).unwrap();
    let c = w.class("m").unwrap();
    let text = std::fs::read_to_string(&log).unwrap();
    let mut lines = text.lines();
    assert_eq!(
        lines.next().unwrap(),
        "round,class,vu,seq,op,label,think_us,start_us,latency_us,status,error"
    );
    let mut picks: BTreeMap<u32, Vec<(u64, String, u64)>> = BTreeMap::new();
    let mut boots = 0;
    for line in lines {
        let f: Vec<&str> = line.split(',').collect();
        let (vu, seq, op, think) = (
            f[2].parse::<u32>().unwrap(),
            f[3].parse::<u64>().unwrap(),
            f[4],
            f[6].parse::<u64>().unwrap(),
        );
        let mine = picks.entry(vu).or_default();
        if op == "(bootstrap)" {
            boots += 1;
            assert_eq!(
                seq,
                mine.len() as u64,
                "a bootstrap carries the next pick's seq"
            );
            continue;
        }
        mine.push((seq, op.to_string(), think));
    }
    assert!(
        boots > 2,
        "deletes made users bootstrap again ({boots} bootstraps)"
    );
    for (vu, ran) in &picks {
        let planned = plan::sequence(w.run.seed, c, *vu, 1, ran.len() as u64);
        for ((seq, op, think), p) in ran.iter().zip(&planned) {
            assert_eq!(*seq, p.seq, "m#{vu}");
            assert_eq!(op, &p.name, "m#{vu} seq {seq}");
            assert_eq!(*think, p.think.as_micros() as u64, "m#{vu} seq {seq} think");
        }
    }
}

#[test]
fn same_seed_same_plan_other_seed_other_plan() {
    let file = root().join("fixtures/workloads/mixed-http.yaml");
    let w = loadmix::load(&file, &[]).unwrap();
    let c = w.class("writer").unwrap();
    let a = plan::sequence(7, c, 0, 1, 200);
    assert_eq!(a, plan::sequence(7, c, 0, 1, 200));
    assert_ne!(a, plan::sequence(8, c, 0, 1, 200));
    assert_ne!(a, plan::sequence(7, c, 1, 1, 200));
    assert_ne!(a, plan::sequence(7, c, 0, 2, 200));
}

#[test]
fn overrides_change_the_run() {
    let rt = runtime();
    let srv = embedded(&rt);
    let r = run_queue(
        &srv.url(),
        &[
            "--users",
            "producer=2,consumer=1",
            "--iterations",
            "10",
            "--rounds",
            "1",
            "--set",
            "users.producer.mix.send.body.random=4KiB",
        ],
    );
    assert_eq!(op(&r, "producer.send").requests, 20);
    assert_eq!(op(&r, "consumer.receive").requests, 10);
    assert!(op(&r, "producer.send").bytes_sent >= 20 * 4096);
    assert_eq!(r.workload.overrides.len(), 4, "{:?}", r.workload.overrides);
    rt.block_on(srv.stop());
}
