//! Behaviour models: a class of behaviours runs exactly the operations and think times
//! `plan` lists for it, session after session; its sessions are counted by behaviour and
//! every one started ends or is cut; a guard keeps a transition out while its pool is
//! empty and the rest of the row is renormalised, counted per state.

use std::collections::BTreeMap;
use std::sync::Arc;

use axum::Router;
use loadmix::plan;

use crate::common::*;
use crate::pools::{Share, handle};

fn share_server(rt: &tokio::runtime::Runtime) -> (Arc<Share>, std::net::SocketAddr) {
    let share = Arc::new(Share::default());
    let app = Router::new().fallback(handle).with_state(share.clone());
    let addr = serve_app(rt, app);
    (share, addr)
}

/// A pick as the op log has it: seq, operation, think µs.
type Pick = (u64, String, u64);

/// The op log's picks per (round, vu).
fn picks(log: &str) -> BTreeMap<(u32, u32), Vec<Pick>> {
    let mut out: BTreeMap<(u32, u32), Vec<Pick>> = BTreeMap::new();
    for line in log.lines().skip(1) {
        let f: Vec<&str> = line.split(',').collect();
        out.entry((f[0].parse().unwrap(), f[2].parse().unwrap()))
            .or_default()
            .push((
                f[3].parse().unwrap(),
                f[4].to_string(),
                f[6].parse().unwrap(),
            ));
    }
    out
}

#[test]
fn behaviours_run_their_plan_and_every_session_is_counted() {
    let rt = runtime();
    let (_share, addr) = share_server(&rt);
    let tmp = tempdir();
    let w = tmp.path().join("b.yaml");
    std::fs::write(
        &w,
        format!(
            r#"
target: http://{addr}
context: ""
run: {{ iterations: 80, rounds: 2, warmup: 0s, seed: 5 }}
think: {{ uniform: [0ms, 1ms] }}
users:
  - class: c
    protocol: http
    count: 3
    session: {{ pause: {{ uniform: [1ms, 2ms] }}, max_ops: 6 }}
    ops:
      home: {{ path: /home }}
      list: {{ path: /list }}
      item: {{ path: "/item/{{seq}}" }}
      help: {{ path: /help }}
    behaviours:
      browser:
        weight: 3
        start: home
        states:
          home: {{ list: 0.8, exit: 0.2 }}
          list: {{ item: 0.7, list: 0.1, exit: 0.2 }}
          item: {{ list: {{ p: 0.5, think: 2ms }}, item: 0.2, exit: 0.3 }}
      lost:
        weight: 1
        start: {{ help: 1, home: 1 }}
        think: 0ms
        states:
          help: {{ home: 0.5, exit: 0.5 }}
          home: {{ exit: 1 }}
"#
        ),
    )
    .unwrap();
    let (out, log) = (out_dir(&tmp), tmp.path().join("ops.csv"));
    let o = loadmix_bin(&[
        "run",
        &path_str(&w),
        "--out",
        &path_str(&out),
        "--log-ops",
        &path_str(&log),
        "--quiet",
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let wl = loadmix::load(&w, &[]).unwrap();
    let c = wl.class("c").unwrap();
    let ran = picks(&std::fs::read_to_string(&log).unwrap());
    assert_eq!(ran.len(), 6, "3 users × 2 rounds");
    for ((round, vu), ops) in &ran {
        assert_eq!(ops.len(), 80);
        let planned = plan::sequence(wl.run.seed, c, *vu, *round, 80);
        for ((seq, op, think), p) in ops.iter().zip(&planned) {
            assert_eq!(
                (*seq, op.as_str()),
                (p.seq, p.name.as_str()),
                "c#{vu} round {round}"
            );
            assert_eq!(*think, p.think.as_micros() as u64, "c#{vu} seq {seq} think");
        }
    }
    // Sessions, by behaviour: every one started ended (exit or max_ops) or was cut by the
    // user's iterations; as many sessions as the plan has session starts.
    let r = read_report(&out);
    for (i, round) in r.rounds.iter().enumerate() {
        let s = &round.sessions;
        assert_eq!(s.len(), 1);
        assert_eq!(s[0].class, "c");
        let names: Vec<&str> = s[0]
            .behaviours
            .iter()
            .map(|b| b.behaviour.as_str())
            .collect();
        assert_eq!(names, ["browser", "lost"]);
        let mut started = 0;
        for b in &s[0].behaviours {
            assert_eq!(
                b.started,
                b.exited + b.max_ops + b.dead_ends + b.cut,
                "{b:?}"
            );
            let ended: u64 = b.ops_per_session.counts.iter().map(|(_, n)| n).sum();
            assert_eq!(ended, b.exited + b.max_ops + b.dead_ends);
            assert!(b.ops_per_session.max <= 6.0, "max_ops holds: {b:?}");
            started += b.started;
        }
        let planned_sessions: u64 = (0..3)
            .map(|vu| {
                let p = plan::sequence(wl.run.seed, c, vu, i as u32 + 1, 80);
                p.last().unwrap().session + 1
            })
            .sum();
        assert_eq!(started, planned_sessions, "round {}", i + 1);
        assert_eq!(s[0].behaviours.iter().map(|b| b.cut).sum::<u64>(), 3);
    }
    let table = std::fs::read_to_string(out.join("report.txt")).unwrap();
    assert!(table.contains("sessions of c ("), "{table}");
    // The HTML report has the same rows, each with its share against its weight.
    let html = std::fs::read_to_string(out.join("report.html")).unwrap();
    let started: u64 = r
        .rounds
        .iter()
        .flat_map(|x| &x.sessions[0].behaviours)
        .map(|b| b.started)
        .sum();
    assert!(
        html.contains(&format!("Sessions of c ({started} started)")),
        "{html}"
    );
    assert!(html.contains("<td>browser</td>") && html.contains("<td>lost</td>"));
    assert!(html.contains("share against weight"));
}

#[test]
fn a_guard_keeps_a_transition_out_while_its_pool_is_empty() {
    let rt = runtime();
    let (share, addr) = share_server(&rt);
    let tmp = tempdir();
    let w = tmp.path().join("g.yaml");
    std::fs::write(
        &w,
        format!(
            r#"
target: http://{addr}
context: ""
run: {{ iterations: 60, rounds: 1, warmup: 0s, seed: 9 }}
think: 0ms
users:
  - class: g
    protocol: http
    count: 2
    cleanup: {{ files: DELETE }}
    ops:
      put: {{ method: PUT, path: "/f-{{vu}}-{{seq}}", body: x, expect: [201], remember: files }}
      del: {{ method: DELETE, path: "{{f}}", expect: [204], pick: {{ pool: files, as: f }}, forget: true }}
    behaviours:
      b:
        weight: 1
        start: {{ put: 1, del: {{ p: 3, when: {{ pool: files }} }} }}
        states:
          put: {{ put: 1, del: {{ p: 3, when: {{ pool: files }} }}, exit: 1 }}
          del: {{ del: {{ p: 3, when: {{ pool: files }} }}, exit: 1 }}
"#
        ),
    )
    .unwrap();
    let out = out_dir(&tmp);
    let o = loadmix_bin(&["run", &path_str(&w), "--out", &path_str(&out), "--quiet"]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let r = read_report(&out);
    assert_eq!(r.summary.total.failures, 0, "{:?}", r.failures);
    let answered = share.answered.lock().unwrap().clone();
    // A delete was never drawn on an empty pool: none was skipped, none missed.
    assert!(
        !answered.contains_key(&("DELETE".into(), 404)),
        "{answered:?}"
    );
    let del = r.summary.ops.iter().find(|o| o.op == "g.del").unwrap();
    assert!(del.requests > 10, "{del:?}");
    assert_eq!(r.summary.total.requests, 120, "every pick was sent");
    // An empty pool at a session's start (always, for the first) and after a delete
    // took the last: the rows were renormalised there, and counted.
    let s = &r.rounds[0].sessions[0];
    assert!(
        s.renormalised.get("start").copied().unwrap_or(0) >= 2,
        "{s:?}"
    );
    assert!(s.renormalised.get("del").copied().unwrap_or(0) > 0, "{s:?}");
    // The same report, edited to name a state its behaviour has not, is not read again.
    let file = out.join("run.json");
    let text = std::fs::read_to_string(&file).unwrap();
    let forged = text.replacen("\"del\":", "\"gone\":", 1);
    assert_ne!(forged, text);
    std::fs::write(&file, forged).unwrap();
    let o = loadmix_bin(&["report", &path_str(&file)]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(
        err.contains("g: draws renormalised at \"gone\", a state its behaviours have not"),
        "{err}"
    );
}

/// `serve --access-log` writes one Combined Log Format line per request answered: a run
/// of the behaviour models against it finds its every request there (measured, set-up,
/// preflight and cleanup), each line with its status and the microseconds it took.
#[test]
fn the_embedded_servers_access_log_has_every_request_of_a_run() {
    let tmp = tempdir();
    let log = tmp.path().join("access.log");
    let (serve, port) = spawn_serve(&[
        "--stomp-bind",
        "127.0.0.1:0",
        "--access-log",
        &path_str(&log),
    ]);
    let out = out_dir(&tmp);
    let o = loadmix_bin(&[
        "run",
        "workloads/caldav-clients.yaml",
        "--target",
        &format!("http://127.0.0.1:{port}/cosmo"),
        "--duration",
        "2s",
        "--rounds",
        "1",
        "--out",
        &path_str(&out),
        "--quiet",
    ]);
    stop_serve(serve);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let r = read_report(&out);
    let sent = r.summary.total.requests
        + r.preflight.requests
        + r.rounds
            .iter()
            .map(|x| x.warmup_requests + x.setup.requests + x.cleanup.requests)
            .sum::<u64>();
    let text = std::fs::read_to_string(&log).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(
        lines.len() as u64,
        sent,
        "the log has every request, and no other"
    );
    let mut reports = 0;
    for l in &lines {
        // host - user [time] "METHOD path HTTP/1.1" status bytes "referer" "agent" micros
        let quoted: Vec<&str> = l.split('"').collect();
        assert_eq!(quoted.len(), 7, "{l}");
        assert!(
            quoted[0].starts_with("127.0.0.1 - ") && quoted[0].ends_with("] "),
            "{l}"
        );
        let status_bytes: Vec<&str> = quoted[2].split_whitespace().collect();
        assert!(
            status_bytes[0]
                .parse::<u16>()
                .is_ok_and(|s| (200..600).contains(&s)),
            "{l}"
        );
        assert!(quoted[6].trim().parse::<u64>().is_ok(), "micros: {l}");
        reports += u64::from(quoted[1].starts_with("REPORT "));
    }
    let time_range = r
        .summary
        .ops
        .iter()
        .filter(|o| o.op.ends_with("time_range_report"))
        .map(|o| o.requests)
        .sum::<u64>();
    assert!(
        reports >= time_range && time_range > 0,
        "{reports} REPORTs, {time_range} time-range"
    );
}
