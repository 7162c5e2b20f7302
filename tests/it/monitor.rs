//! The server's own cost beside its throughput: the embedded server served as a separate
//! process, watched by PID, its CPU per operation and memory in the report; a process
//! that is not there is reported and costs no load figure.

use std::process::{Command, Stdio};

use crate::common::*;

#[test]
fn a_watched_server_process_reports_its_cpu_per_operation() {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let mut serve = Command::new(env!("CARGO_BIN_EXE_loadmix"))
        .args(["serve", "--bind", &format!("127.0.0.1:{port}")])
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // The banner says it listens; reading it waits exactly as long as start-up takes.
    let mut banner = std::io::BufReader::new(serve.stderr.take().unwrap());
    let mut line = String::new();
    std::io::BufRead::read_line(&mut banner, &mut line).unwrap();
    assert!(line.contains("listening on"), "{line}");
    let tmp = tempdir();
    let w = tmp.path().join("w.yaml");
    std::fs::write(
        &w,
        "context: /cosmo\nmonitor: { process: [no-such-program-xyz] }\nrun: { duration: 2s, rounds: 2 }\nusers:\n  - { class: q, protocol: http, count: 4, mix: { send: { weight: 1, method: POST, path: '{context}/queue/m', body: x, expect: [201] } } }\n",
    )
    .unwrap();
    let out = out_dir(&tmp);
    let o = loadmix_bin(&[
        "run",
        &path_str(&w),
        "--target",
        &format!("http://127.0.0.1:{port}"),
        "--monitor-process",
        &serve.id().to_string(),
        "--out",
        &path_str(&out),
        "--quiet",
    ]);
    let _ = serve.kill();
    let _ = serve.wait();
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "{stderr}");
    assert!(
        stderr.contains("no process named 'no-such-program-xyz'"),
        "{stderr}"
    );
    let r = read_report(&out);
    assert!(r.summary.total.successes > 0);
    let server = &r.summary.server;
    assert_eq!(server.len(), 2, "{server:?}");
    let missing = server
        .iter()
        .find(|p| p.process == "no-such-program-xyz")
        .unwrap();
    assert!(
        missing
            .problem
            .as_deref()
            .unwrap_or("")
            .contains("no process matched")
    );
    let srv = server
        .iter()
        .find(|p| p.process.starts_with("pid "))
        .unwrap();
    assert!(srv.problem.is_none(), "{srv:?}");
    assert!(srv.cpu_user_s + srv.cpu_system_s > 0.0, "{srv:?}");
    assert!(srv.cpu_ms_per_op > 0.0 && srv.rss_peak_mib > 1.0 && srv.threads_max >= 1);
    // Each round has its own figures, on the round's clock.
    for round in &r.rounds {
        let p = round
            .server
            .iter()
            .find(|p| p.process == srv.process)
            .unwrap();
        assert!(!p.cpu_percent.is_empty());
    }
    // The server's CPU is drawn on the request timeline's time axis.
    let page = std::fs::read_to_string(out.join("report.html")).unwrap();
    assert!(
        page.contains("<figure data-chart=\"server\"><svg"),
        "no server chart"
    );
    let table = std::fs::read_to_string(out.join("report.txt")).unwrap();
    assert!(table.contains("ms CPU per operation"), "{table}");
    assert!(table.contains("WARNING: monitor: no process matched no-such-program-xyz"));
}
