//! Faults put into a run (`faults:`, `--fault`), held to truths known in advance: a
//! latency fault raises the median in its window by its delay and nowhere else; a reset at
//! toxicity 0.5 resets about half the connections, and every reset is a failure counted
//! as one; a pause of a server loadmix started stops answers for its length, costs the
//! open arrivals of the window, and the server is back at once after SIGCONT. A timeline
//! that cannot act is refused before anything starts.

use crate::common::*;
use loadmix::reports::{FaultWindow, Report};

fn write(dir: &std::path::Path, yaml: &str) -> String {
    let p = dir.join("w.yaml");
    std::fs::write(&p, yaml).unwrap();
    path_str(&p)
}

fn window(r: &Report) -> &FaultWindow {
    let w = &r.rounds[0].faults;
    assert_eq!(w.len(), 1, "{w:?}");
    &w[0]
}

#[test]
fn a_latency_fault_raises_the_median_by_its_delay_in_its_window_only() {
    let _alone = alone();
    let tmp = tempdir();
    let out = out_dir(&tmp);
    let w = write(
        tmp.path(),
        "name: lat\ntarget: embedded\ncontext: /cosmo\nrun: { duration: 11s, rounds: 1, warmup: 1s, seed: 2 }\nthink: { constant: 10ms }\nusers:\n  - class: web\n    protocol: http\n    count: 4\n    mix:\n      wait: { weight: 1, path: '{context}/_loadmix/delay/1' }\nfaults:\n  - { fault: latency, at: 4s, for: 3s, delay: 50ms }\n",
    );
    assert_eq!(loadmix(&["run", &w, "--out", &path_str(&out)]), 0);
    let r = read_report(&out);
    let f = window(&r);
    let p50 = |p: &loadmix::reports::FaultPart| p.p50_ms.unwrap_or(f64::NAN);
    let (before, during, after) = (p50(&f.before), p50(&f.during), p50(&f.after));
    assert!(
        (during - before - 50.0).abs() <= 2.0,
        "p50 before {before} ms, during {during} ms: {f:?}"
    );
    assert!(
        (after - before).abs() <= 2.0,
        "p50 before {before} ms, after {after} ms"
    );
    // Second by second: only the window's seconds are slow.
    for (i, s) in r.rounds[0].per_second.iter().enumerate() {
        let Some(p) = s.p50_ms else { continue };
        match (4..7).contains(&i) {
            true => assert!(p >= before + 48.0, "second {i}: p50 {p} ms"),
            false => assert!(p <= before + 2.0, "second {i}: p50 {p} ms, before {before}"),
        }
    }
    assert_eq!(f.fault, "latency 50ms");
    assert_eq!(f.during.errors.len() + f.after.errors.len(), 0);
    // The first to show it did so within the delay; the operations were back at once.
    let detect = f.detect_ms.unwrap_or(f64::NAN);
    assert!(detect <= 50.0, "detect {detect} ms");
    assert!(f.recover_s.is_some_and(|r| r < 0.5), "{f:?}");
    let text = std::fs::read_to_string(out.join("report.txt")).unwrap();
    assert!(text.contains("faults (1 window(s)):"), "{text}");
    assert!(text.contains("latency 50ms"), "{text}");
}

#[test]
fn a_reset_at_toxicity_one_half_resets_about_half_the_connections() {
    let _alone = alone();
    let tmp = tempdir();
    let out = out_dir(&tmp);
    let w = write(
        tmp.path(),
        "name: reset\ntarget: embedded\ncontext: /cosmo\nrun: { duration: 10s, rounds: 1, warmup: 1s, seed: 3 }\nconnection: per_request\nthink: { constant: 5ms }\nusers:\n  - class: web\n    protocol: http\n    count: 4\n    mix:\n      wait: { weight: 1, path: '{context}/_loadmix/delay/1' }\n",
    );
    let code = loadmix(&[
        "run",
        &w,
        "--fault",
        "fault=reset,at=3s,for=3s,toxicity=0.5",
        "--out",
        &path_str(&out),
    ]);
    assert_eq!(code, 0);
    let r = read_report(&out);
    let f = window(&r);
    let c = f.connections.unwrap_or_else(|| panic!("{f:?}"));
    let n = c.touched as f64;
    assert!(n >= 100.0, "too few connections to judge: {c:?}");
    // Binomial(n, 0.5): within 4.5 standard deviations.
    let sd = (n * 0.25).sqrt();
    assert!(
        (c.reset as f64 - n / 2.0).abs() <= 4.5 * sd,
        "{} of {} reset",
        c.reset,
        c.touched
    );
    assert_eq!(c.reset, c.drawn);
    // Each reset connection failed its one operation, unless its answer had come and it
    // was only waiting to be closed (at most one a user as the window began); nothing
    // else failed.
    let failed: u64 = [&f.before, &f.during, &f.after]
        .iter()
        .map(|p| p.errors.values().sum::<u64>())
        .sum();
    assert!(
        failed <= c.reset && c.reset - failed <= 4,
        "{failed} failed: {f:?}"
    );
    assert_eq!(r.summary.total.failures, failed);
}

#[test]
fn a_paused_server_costs_the_arrivals_of_its_window_and_is_back_at_once() {
    let _alone = alone();
    let tmp = tempdir();
    let out = out_dir(&tmp);
    let port = free_port();
    let w = write(
        tmp.path(),
        "name: pause\ncontext: /cosmo\nrun: { duration: 10s, rounds: 1, warmup: 1s, seed: 4, timeout: 20s }\nusers:\n  - class: q\n    protocol: http\n    arrival: { rate: 100/s, process: constant, max_concurrency: 2000 }\n    mix:\n      wait: { weight: 1, path: '{context}/_loadmix/delay/1' }\nfaults:\n  - { fault: pause, at: 4s, for: 2s }\n",
    );
    let code = loadmix(&[
        "run",
        &w,
        "--target",
        &format!("srv=http://127.0.0.1:{port}"),
        "--start",
        &format!(
            "srv=exec {} serve --bind 127.0.0.1:{port}",
            env!("CARGO_BIN_EXE_loadmix")
        ),
        "--ready",
        &format!("srv=tcp://127.0.0.1:{port}"),
        "--out",
        &path_str(&out),
    ]);
    assert_eq!(code, 0);
    let r = read_report(&out);
    let f = window(&r);
    assert!(f.trouble.is_none(), "{f:?}");
    // Constant arrivals: 200 in the window, none of them answered in it.
    assert!((f.during.ops as i64 - 200).abs() <= 2, "{f:?}");
    assert!(
        (f.dip - f.during.ops as f64).abs() <= 0.05 * f.during.ops as f64 + 3.0,
        "dip {} against {} arrivals: {f:?}",
        f.dip,
        f.during.ops
    );
    assert!(f.recover_s.is_some_and(|r| r < 0.5), "{f:?}");
    assert_eq!(
        r.summary.total.failures, 0,
        "a pause shorter than the timeout fails nothing"
    );
    // The started server stops with the run, SIGCONT or not.
    assert!(std::net::TcpStream::connect(("127.0.0.1", port)).is_err());
}

/// A `command` fault from the command line: its `run` at the window's begin and its
/// `undo` at the end, each told the round and which it is, shown before it runs, its
/// output kept beside the report; an `undo` that hangs is killed at its timeout and said
/// to be. The same fault in a workload file is refused: its text is not trusted to run
/// programs.
#[test]
fn a_command_runs_at_its_window_and_one_that_hangs_is_killed_at_its_timeout() {
    let _alone = alone();
    let tmp = tempdir();
    let out = out_dir(&tmp);
    let marks = path_str(&tmp.path().join("marks"));
    let w = write(
        tmp.path(),
        "name: cmd\ntarget: embedded\ncontext: /cosmo\nrun: { duration: 10s, rounds: 1, warmup: 1s, seed: 3 }\nthink: { constant: 20ms }\nusers:\n  - class: web\n    protocol: http\n    count: 2\n    mix:\n      wait: { weight: 1, path: '{context}/_loadmix/delay/1' }\n",
    );
    let fault = format!(
        "{{fault: command, at: 3s, for: 2s, timeout: 1s, run: 'echo \"$LOADMIX_ROUND $LOADMIX_FAULT\" >> {marks}; echo said', undo: 'echo \"$LOADMIX_ROUND $LOADMIX_FAULT\" >> {marks}; sleep 30'}}"
    );
    let run = loadmix_bin(&["run", &w, "--fault", &fault, "--out", &path_str(&out)]);
    let err = String::from_utf8_lossy(&run.stderr);
    assert_eq!(run.status.code(), Some(0), "{err}");
    assert!(err.contains("running sh -c"), "{err}");
    assert_eq!(std::fs::read_to_string(&marks).unwrap(), "1 run\n1 undo\n");
    let r = read_report(&out);
    let f = window(&r);
    let (began, ended) = (f.began_s.unwrap_or(0.0), f.ended_s.unwrap_or(0.0));
    let [run_c, undo_c] = &f.commands[..] else {
        panic!("{f:?}")
    };
    // Never begun early; ended once the undo, begun at the window's end (5 s), was
    // killed: a second at least after that end, never before.
    assert!(began >= 3.0 - 1e-3 && began < ended, "{f:?}");
    assert!(ended >= 5.0 + undo_c.took_s - 1e-3, "{f:?}");
    assert_eq!(
        (run_c.what.as_str(), run_c.exit, run_c.timed_out),
        ("run", Some(0), false)
    );
    assert_eq!(std::fs::read_to_string(&run_c.log).unwrap(), "said\n");
    assert!(
        // Killed at its 1 s timeout, far before the 30 s it would have slept.
        undo_c.timed_out && (1.0..10.0).contains(&undo_c.took_s),
        "{undo_c:?}"
    );
    let trouble = f.trouble.as_deref().unwrap_or("");
    assert!(trouble.contains("undo `echo"), "{trouble}");
    assert!(trouble.contains("killed after its timeout"), "{trouble}");
    let text = std::fs::read_to_string(out.join("report.txt")).unwrap();
    assert!(text.contains("run `echo"), "{text}");
    // In a workload file, refused where it is written.
    let bad = tmp.path().join("bad.yaml");
    std::fs::write(
        &bad,
        format!(
            "{}faults:\n  - {{ fault: command, at: 3s, for: 2s, run: 'touch {marks}-x' }}\n",
            std::fs::read_to_string(&w).unwrap()
        ),
    )
    .unwrap();
    let v = loadmix_bin(&["run", &path_str(&bad), "--out", &path_str(&out)]);
    let err = String::from_utf8_lossy(&v.stderr);
    assert_eq!(v.status.code(), Some(2), "{err}");
    assert!(err.contains("bad.yaml:13:14: faults[0].fault:"), "{err}");
    assert!(err.contains("only the command line is"), "{err}");
    assert!(!std::path::Path::new(&format!("{marks}-x")).exists());
}

#[test]
fn a_timeline_that_cannot_act_is_refused_before_anything_starts() {
    let tmp = tempdir();
    let w = write(
        tmp.path(),
        "name: bad\ntarget: embedded\nrun: { duration: 10s, warmup: 0s }\nusers:\n  - class: web\n    protocol: http\n    count: 1\n    mix:\n      g: { weight: 1, path: /x }\nfaults:\n  - { fault: kill, at: 2s }\n",
    );
    let out = loadmix_bin(&["run", &w, "--out", &path_str(&out_dir(&tmp))]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(
        err.contains("w.yaml:11:5: fault kill: loadmix did not start target"),
        "{err}"
    );
    // A `--fault` whose window ends past the round, named by its flag.
    let out = loadmix_bin(&[
        "validate",
        &w,
        "--fault",
        "fault=latency,at=6s,for=2s,delay=5ms",
    ]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("--fault 1:1:"), "{err}");
    assert!(err.contains("does not end inside the round"), "{err}");
}

/// Two producers with receipts and a slower reader through the embedded broker on
/// `store` (`memory`, or `sqlite` on a file in `tmp`), which loadmix starts and kills 3 s
/// into the round: the run's exit code and its report's folder. Recovery is judged
/// within 60 %: the sends' median is a fraction of a millisecond, which a busy host
/// moves by a quarter either way.
fn killed_broker(tmp: &tempfile::TempDir, store: &str) -> (i32, std::path::PathBuf) {
    let out = out_dir(tmp);
    let (http, stomp) = (free_port(), free_port());
    let store = match store {
        "sqlite" => format!("sqlite:{}", path_str(&tmp.path().join("broker.db"))),
        other => other.to_string(),
    };
    let w = write(
        tmp.path(),
        "name: kill\nrun: { duration: 9s, rounds: 1, warmup: 1s, seed: 5, timeout: 5s, connect_timeout: 1s }\nthink: { constant: 5ms }\nusers:\n  - class: producer\n    protocol: stomp\n    count: 2\n    mix:\n      send: { weight: 1, params: { destination: '/queue/kill-{run_id}', size: 512B, persistent: true, receipt: true } }\n  - class: reader\n    protocol: stomp\n    count: 1\n    think: { constant: 40ms }\n    params: { subscribe: '/queue/kill-{run_id}', ack: client-individual, prefetch: 1 }\n    mix:\n      receive: { weight: 1, params: { timeout: 1s } }\nfaults:\n  - { fault: kill, at: 3s, for: 1s }\nrecovery: { band: 60%, hold: 2s }\n",
    );
    let code = loadmix(&[
        "run",
        &w,
        "--target",
        &format!("srv=stomp://127.0.0.1:{stomp}"),
        "--start",
        &format!(
            "srv=exec {} serve --no-auth --bind 127.0.0.1:{http} --stomp-bind 127.0.0.1:{stomp} --store {store}",
            env!("CARGO_BIN_EXE_loadmix")
        ),
        "--ready",
        &format!("srv=tcp://127.0.0.1:{stomp}"),
        "--out",
        &path_str(&out),
    ]);
    (code, out)
}

#[test]
fn a_killed_broker_started_again_loses_no_receipted_message() {
    let _alone = alone();
    let tmp = tempdir();
    let (code, out) = killed_broker(&tmp, "sqlite");
    let r = read_report(&out);
    let f = window(&r);
    assert!(f.trouble.is_none(), "{f:?}");
    // Down from the kill until the server, started again on its file, was ready.
    let (began, ended) = (f.began_s.unwrap_or(0.0), f.ended_s.unwrap_or(0.0));
    assert!(ended - began >= 1.0, "{f:?}");
    let failed: u64 = f.during.errors.values().sum::<u64>() + f.after.errors.values().sum::<u64>();
    assert!(failed > 0, "the kill was felt: {f:?}");
    // The window lasts until the server was ready again: what failed while it was down
    // is the window's.
    assert!(f.during.errors.values().sum::<u64>() > 0, "{f:?}");
    assert!((f.during.to_s - ended).abs() < 1e-3, "{f:?}");
    assert!(f.recover_s.is_some(), "sends came back: {f:?}");
    // Every message the broker receipted is still there (the drain took it); of those
    // lost, every one is a send whose receipt never came.
    let l = r.ledger.as_ref().expect("a ledger");
    let c = &l.destinations[0].counts;
    assert!(c.sent > 100 && c.drained > 100, "{c:?}");
    assert_eq!(c.lost, c.lost_failed, "a receipted message was lost: {c:?}");
    assert!(c.send_failed >= c.lost_failed, "{c:?}");
    // The window's share of the ledger: every loss is the kill's, sent before or into
    // it; the reader, slower than the producers, took after the restart messages sent
    // before the kill (the broker kept them on its file).
    let m = f.messages.expect("the window's messages");
    assert_eq!((m.lost, m.lost_failed), (c.lost, c.lost_failed), "{m:?}");
    assert!(
        m.sent_before > 100 && m.sent_before + m.sent_during <= c.sent,
        "{m:?}"
    );
    assert!(m.crossed > 0 && m.crossed <= m.sent_before, "{m:?}");
    let txt = std::fs::read_to_string(out.join("report.txt")).expect("report.txt");
    assert!(txt.contains("messages by window"), "{txt}");
    assert!(!txt.contains("durability breach"), "{txt}");
    // The run ends 1 only for what the kill failed.
    assert!(matches!(code, 0 | 1), "{code}");
}

/// The same kill on a broker that keeps its queue in memory: what it had receipted and
/// not yet delivered is gone with it, and the window's ledger says so.
#[test]
fn a_broker_killed_with_its_queue_in_memory_is_called_out_for_what_it_receipted() {
    let _alone = alone();
    let tmp = tempdir();
    let (code, out) = killed_broker(&tmp, "memory");
    assert!(matches!(code, 0 | 1), "{code}");
    let r = read_report(&out);
    let m = window(&r).messages.expect("the window's messages");
    let c = &r.ledger.as_ref().expect("a ledger").destinations[0].counts;
    // The reader is slower than the producers: a backlog of receipted messages was in
    // the broker's memory at the kill, and nothing sent before it came out after it.
    assert!(m.lost > m.lost_failed + 100, "{m:?}");
    assert_eq!(m.crossed, 0, "{m:?}");
    assert_eq!(
        (m.lost, m.lost_failed),
        (c.lost, c.lost_failed),
        "{m:?} {c:?}"
    );
    let txt = std::fs::read_to_string(out.join("report.txt")).expect("report.txt");
    let breach = format!(
        "round 1, kill: {} lost message(s) whose send had not failed",
        m.lost - m.lost_failed
    );
    assert!(txt.contains(&breach), "{txt}");
}

#[test]
fn a_comparison_sets_each_targets_recovery_side_by_side() {
    let _alone = alone();
    let tmp = tempdir();
    let out = out_dir(&tmp);
    let w = write(
        tmp.path(),
        "name: cmpf\ntarget: embedded\ncontext: /cosmo\nrun: { duration: 7s, rounds: 2, warmup: 1s, seed: 2 }\nthink: { constant: 10ms }\nusers:\n  - class: web\n    protocol: http\n    count: 4\n    mix:\n      wait: { weight: 1, path: '{context}/_loadmix/delay/1' }\nfaults:\n  - { fault: latency, at: 2s, for: 1s, delay: 50ms }\n",
    );
    let code = loadmix(&[
        "run",
        &w,
        "--target",
        "a=embedded",
        "--target",
        "b=embedded",
        "--out",
        &path_str(&out),
    ]);
    assert_eq!(code, 0);
    let c: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("compare.json")).unwrap()).unwrap();
    let rows = c["faults"].as_array().cloned().unwrap_or_default();
    let row = |m: &str| {
        rows.iter()
            .find(|r| r["measure"] == m)
            .unwrap_or_else(|| panic!("no row {m}: {rows:?}"))
            .clone()
    };
    for m in [
        "recover · latency 50ms at 2s",
        "detect · latency 50ms at 2s",
        "dip · latency 50ms at 2s",
    ] {
        let r = row(m);
        let cells = r["cells"].as_array().cloned().unwrap_or_default();
        assert_eq!(cells.len(), 2, "{r}");
        for cell in &cells {
            assert_eq!(cell["rounds"], 2, "{m}: each target's two rounds: {r}");
        }
    }
    // The detect of a 50 ms delay is under it, in both.
    for cell in row("detect · latency 50ms at 2s")["cells"]
        .as_array()
        .unwrap()
    {
        assert!(cell["mean"].as_f64().unwrap_or(f64::NAN) < 50.0, "{cell}");
    }
    let text = std::fs::read_to_string(out.join("compare.txt")).unwrap();
    assert!(text.contains("recover · latency 50ms at 2s"), "{text}");
}
