//! Servers loadmix starts itself (`--start`): started from a scratch folder beside the
//! report, waited for, watched as a process group without a PID being given, and stopped
//! when the run ends, by a signal too; and flags that cannot work refused before anything
//! starts.

use std::io::BufRead;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use crate::common::*;

/// A loopback port free a moment ago.
fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// A run of 20 two-second rounds against target `srv` on `port`, whose server is
/// started by `serve` (`srv=COMMAND`), until `signal` (`-INT`, `-KILL`) is sent once its
/// first round is measured: what it exited with, and all it said on stderr (read to its
/// end, whoever holds it last).
fn run_until_signal(
    out: &std::path::Path,
    port: u16,
    serve: &str,
    signal: &str,
) -> (std::process::Output, String) {
    let w = out.with_file_name("w.yaml");
    std::fs::write(
        &w,
        "name: started\ncontext: /cosmo\nrun: { duration: 2s, rounds: 20, warmup: 0s, seed: 1 }\nthink: 0ms\nusers:\n  - class: web\n    protocol: http\n    count: 2\n    mix:\n      wait: { weight: 1, path: '{context}/_loadmix/delay/1' }\n",
    )
    .unwrap();
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_loadmix"))
        .args([
            "run",
            &path_str(&w),
            "--target",
            &format!("srv=http://127.0.0.1:{port}"),
            "--start",
            serve,
            "--ready",
            &format!("srv=tcp://127.0.0.1:{port}"),
            "--start-env",
            "srv:LOADMIX_STARTED=yes",
            "--out",
            &path_str(out),
        ])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    // Once the first round has been measured (its line on stderr), the signal.
    let measured = Arc::new(AtomicBool::new(false));
    let said = Arc::new(std::sync::Mutex::new(String::new()));
    let reader = {
        let (measured, said) = (measured.clone(), said.clone());
        let err = child.stderr.take().unwrap();
        std::thread::spawn(move || {
            for line in std::io::BufReader::new(err).lines().map_while(Result::ok) {
                if line.contains("round 1/20") {
                    measured.store(true, Ordering::SeqCst);
                }
                said.lock().unwrap().push_str(&format!("{line}\n"));
            }
        })
    };
    let output = interrupt(child, signal, || measured.load(Ordering::SeqCst));
    reader.join().unwrap();
    let said = said.lock().unwrap().clone();
    (output, said)
}

#[test]
fn a_started_server_is_watched_without_a_pid_and_stopped_after_an_interrupt() {
    let _alone = alone();
    let tmp = tempdir();
    let out = out_dir(&tmp);
    let port = free_port();
    let serve = format!(
        "srv=exec {} serve --bind 127.0.0.1:{port}",
        env!("CARGO_BIN_EXE_loadmix")
    );
    let (output, said) = run_until_signal(&out, port, &serve, "-INT");
    assert_eq!(output.status.code(), Some(130), "{said}");
    assert!(
        said.contains("starting srv: sh -c"),
        "the command is said before it runs: {said}"
    );
    let r = read_report(&out);
    assert!(r.interrupted);
    // The started group was watched, under its program's name, with no PID given.
    let server = r
        .summary
        .server
        .iter()
        .find(|p| p.process == "loadmix")
        .unwrap_or_else(|| panic!("{:?}", r.summary.server));
    assert!(server.cpu_user_s + server.cpu_system_s > 0.0, "{server:?}");
    assert!(server.rss_peak_mib > 0.0);
    // Its output is kept beside the report, and it is gone.
    assert!(out.join("server").join("server.err").exists());
    assert!(
        std::net::TcpStream::connect(("127.0.0.1", port)).is_err(),
        "the started server still listens after the run"
    );
}

/// Whether process `pid` runs (a zombie, killed and not yet reaped, does not).
fn runs(pid: &str) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .ok()
        .and_then(|s| s.rsplit_once(") ").map(|(_, rest)| !rest.starts_with('Z')))
        .unwrap_or(false)
}

/// A run killed with `kill -9` leaves nothing it started: not a server under a compound
/// command, not one in the background, not one that ignores SIGTERM (killed after the
/// grace). The reaper that does it holds the run's stderr until it is done, so the run's
/// output ends when the group is gone.
#[test]
fn a_killed_run_leaves_no_server_it_started_even_one_deaf_to_term() {
    let _alone = alone();
    let tmp = tempdir();
    let out = out_dir(&tmp);
    let port = free_port();
    // In the background, a process deaf to SIGTERM; in front, the server, and a word
    // after it, so that the shell does not hand its place to the server.
    let serve = format!(
        "srv=sh -c 'trap \"\" TERM; echo $$ > deaf.pid; exec sleep 600' & {} serve --bind 127.0.0.1:{port}; echo done",
        env!("CARGO_BIN_EXE_loadmix")
    );
    // The stderr pipe closes when the last holder, the reaper, is done.
    let (output, said) = run_until_signal(&out, port, &serve, "-KILL");
    assert_eq!(output.status.code(), None, "killed");
    assert!(said.contains("SIGTERM"), "{said}");
    assert!(
        said.contains("SIGKILL"),
        "the deaf one outlived SIGTERM: {said}"
    );
    assert!(
        std::net::TcpStream::connect(("127.0.0.1", port)).is_err(),
        "the started server still listens after the run was killed: {said}"
    );
    let deaf = std::fs::read_to_string(out.join("server").join("deaf.pid")).unwrap();
    assert!(
        !runs(deaf.trim()),
        "the process deaf to SIGTERM is still there"
    );
}

#[test]
fn start_flags_that_cannot_work_are_refused_before_anything_starts() {
    let tmp = tempdir();
    let w = tmp.path().join("w.yaml");
    std::fs::write(
        &w,
        "run: { duration: 1s }\nusers:\n  - class: web\n    protocol: http\n    count: 1\n    mix: { g: { weight: 1, path: /x } }\n",
    )
    .unwrap();
    let marker = tmp.path().join("ran");
    let touch = format!("touch {}", path_str(&marker));
    for (args, says) in [
        (
            vec![
                "--target",
                "a=http://127.0.0.1:9",
                "--start",
                &format!("b={touch}"),
            ],
            "no target named b",
        ),
        (
            vec![
                "--target",
                "a=http://127.0.0.1:9",
                "--start",
                &format!("a={touch}"),
            ],
            "--ready a=",
        ),
        (
            vec![
                "--target",
                "a=http://127.0.0.1:9",
                "--start",
                &format!("a={touch}"),
                "--ready",
                "a=tcp://10.1.2.3:80",
            ],
            "on this machine",
        ),
        (
            vec!["--target", "a=embedded", "--start", &format!("a={touch}")],
            "embedded",
        ),
        (
            vec!["--target", "a=http://127.0.0.1:9", "--stop", "a=true"],
            "no --start a=COMMAND",
        ),
    ] {
        let mut all = vec!["run", w.to_str().unwrap()];
        all.extend(args.iter().map(|s| &**s));
        let o = loadmix_bin(&all);
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(2), "{all:?}: {err}");
        assert!(err.contains(says), "{all:?}: {err}");
        assert!(!marker.exists(), "{all:?} ran the command");
    }
}
