//! What the command line is given is checked before anything runs: files that are not
//! regular files (a device never ends, a FIFO never opens) are refused whatever they are
//! given as, and options that conflict, or ask for more than the machine has, are
//! refused with exit 2 and a message naming them.

use crate::common::*;

fn refused(args: &[&str], says: &str) {
    let out = loadmix_bin(args);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
    assert!(err.contains(says), "{args:?}: {err}");
}

#[test]
fn devices_and_fifos_are_refused_as_workloads_certificates_secrets_and_reports() {
    let tmp = tempdir();
    let fifo = tmp.path().join("fifo");
    let c = std::ffi::CString::new(path_str(&fifo)).unwrap();
    // SAFETY: mkfifo reads the NUL-terminated path it is given.
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
    let fifo = path_str(&fifo);
    let special = "not a regular file";
    refused(&["run", "/dev/zero"], special);
    refused(&["validate", "/dev/urandom"], special);
    refused(&["validate", &fifo], special);
    refused(&["run", &fifo], special);
    refused(
        &["run", "workloads/cosmo-0.7.yaml", "--ca-cert", "/dev/zero"],
        special,
    );
    // A secret read from a device, as a bearer token.
    let w = tmp.path().join("w.yaml");
    std::fs::write(
        &w,
        "name: s\ntarget: embedded\nrun: { iterations: 1 }\nusers:\n  - class: c\n    protocol: http\n    count: 1\n    auth: { scheme: bearer, token: '{file:/dev/zero}' }\n    mix:\n      get: { weight: 1, path: /x }\n",
    )
    .unwrap();
    refused(&["run", &path_str(&w)], special);
    refused(&["merge", "/dev/zero", &path_str(&w)], special);
    refused(&["compare", "/dev/zero", &fifo], special);
}

#[test]
fn options_that_conflict_or_exceed_the_machine_are_refused() {
    let w = "workloads/cosmo-0.7.yaml";
    refused(
        &["run", w, "--duration", "1s", "--iterations", "5"],
        "--iterations",
    );
    refused(
        &["validate", w, "--duration", "1s", "--iterations", "5"],
        "--iterations",
    );
    refused(&["plan", w, "--vu", "morse#1", "--shard", "0/2"], "--vu");
    refused(
        &["run", w, "--workers", "100000"],
        "--workers: 100000 is not between 1 and",
    );
    refused(
        &["run", w, "--workers", "0"],
        "--workers: 0 is not between 1 and",
    );
}

#[test]
fn validate_says_when_run_would_refuse_the_workload_for_memory() {
    // 100 million users: more memory than any machine this runs on.
    let args = ["workloads/cosmo-0.7.yaml", "--users", "morse=100000000"];
    let out = loadmix_bin(&[&["validate"][..], &args].concat());
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(
        err.contains("error: `loadmix run` would refuse this workload on this machine"),
        "{err}"
    );
    assert!(err.contains("available"), "{err}");
    refused(&[&["run"][..], &args].concat(), "available");
}

/// What set-up will cost is said before it is paid: 1,000 users each filled with 100,000
/// events is a hundred million PUTs, and a count past what set-up puts is refused.
#[test]
fn validate_says_what_set_up_will_cost_and_refuses_what_it_cannot_put() {
    let tmp = tempdir();
    let w = tmp.path().join("w.yaml");
    let text = |n: u32| {
        format!(
            "name: big\nrun: {{ duration: 10s }}\nusers:\n  - class: cal\n    protocol: caldav\n    count: 1000\n    params: {{ initial_events: {n} }}\n    mix:\n      sync_collection: 1\n"
        )
    };
    std::fs::write(&w, text(100_000)).unwrap();
    let out = loadmix_bin(&["validate", &path_str(&w)]);
    let said = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{said}");
    assert!(
        said.contains(
            "set-up: about 100000000 events put before the first pick (1000 users × mean 100000"
        ) && said.contains("27.8 h at 1,000 PUTs or 100 MiB a second, whichever is slower"),
        "{said}"
    );
    std::fs::write(&w, text(100_001)).unwrap();
    let out = loadmix_bin(&["validate", &path_str(&w)]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("set-up puts at most 100000"), "{err}");
}

#[test]
fn validate_says_a_behaviour_too_light_to_draw_never_runs() {
    let tmp = tempdir();
    let w = tmp.path().join("w.yaml");
    std::fs::write(
        &w,
        "users:\n  - class: c\n    protocol: caldav\n    count: 2\n    ops: { propfind: {} }\n    behaviours:\n      light: { weight: 1e-320, start: propfind, states: { propfind: { exit: 1 } } }\n      heavy: { weight: 1, start: propfind, states: { propfind: { exit: 1 } } }\n",
    )
    .unwrap();
    let out = loadmix_bin(&["validate", &path_str(&w)]);
    let plan = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{plan}");
    assert!(
        plan.contains("behaviour light · weight 1e-320 (0.0% of sessions)"),
        "{plan}"
    );
    assert!(plan.contains("behaviour 'light' never runs"), "{plan}");
}

#[test]
fn a_classs_only_behaviour_needs_no_weight() {
    let tmp = tempdir();
    let w = tmp.path().join("w.yaml");
    std::fs::write(
        &w,
        "users:\n  - class: c\n    protocol: caldav\n    count: 2\n    ops: { propfind: {} }\n    behaviours:\n      only: { start: propfind, states: { propfind: { exit: 1 } } }\n",
    )
    .unwrap();
    let out = loadmix_bin(&["validate", &path_str(&w)]);
    let plan = String::from_utf8_lossy(&out.stdout);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{plan}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        plan.contains("behaviour only · weight 1 (100.0% of sessions)"),
        "{plan}"
    );
}

#[test]
fn validate_says_what_will_run_open_classes_rates_and_sizes_included() {
    let tmp = tempdir();
    let w = tmp.path().join("w.yaml");
    std::fs::write(
        &w,
        "run: { duration: 10s, keep_state: true, warmup_rounds: 2 }\nusers:\n  - class: web\n    protocol: http\n    arrival: { rate: 20/s, process: constant, max_concurrency: 50, when_full: drop }\n    iterations: 3\n    mix: { get: { weight: 1, path: /x } }\n  - class: paced\n    protocol: http\n    count: 4\n    pacing: 100ms\n    mix: { get: { weight: 1, path: /y } }\n  - class: producer\n    protocol: stomp\n    count: 2\n    think: 50ms\n    mix: { send: { weight: 1, params: { destination: /queue/q, size: 4KiB } } }\n",
    )
    .unwrap();
    let o = loadmix_bin(&["validate", &path_str(&w)]);
    let said = String::from_utf8_lossy(&o.stdout);
    assert_eq!(
        o.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    for line in [
        "2 warm-up round(s) first, run and thrown away",
        "users keep what they made (accounts, calendars, items) from round to round",
        "class web · protocol http · open: sessions arrive at 20/s (constant), at most 50 at once, when full drop, 3 op(s) each, each a new user",
        // 20/s × 3 ops; 4 users every 100 ms; 2 users thinking 50 ms.
        "offered: 60.0 ops/s",
        "offered: 40.0 ops/s",
        "offered: up to about 40.0 ops/s",
        "class paced · protocol http · 4 user(s) · pacing 100ms (no think)",
        "size 4KiB",
        "share of all ops from each class's offered rate",
    ] {
        assert!(said.contains(line), "{line:?} not in:\n{said}");
    }
    // 60 of 140 offered ops/s are the open class's.
    assert!(said.contains("42.86%"), "{said}");
    // Nothing here uses the context prefix, so none is shown; Cosmo's mix names its uses.
    assert!(!said.contains("context '"), "{said}");
    let cosmo = loadmix_bin(&["validate", "workloads/cosmo-0.7.yaml"]);
    assert!(
        String::from_utf8_lossy(&cosmo.stdout)
            .contains("context '/cosmo' (for CMP accounts, Cosmo's paths, CalDAV discovery)")
    );
}

/// An open class of behaviours runs each arrival's session to its exit: `validate` says
/// so, offers its rate times the operations a session runs, and walks each sampled
/// session to its exit, so a tidier that arrives with nothing to delete is warned of
/// (before, it followed one pick a session and found every pick had something to act on).
#[test]
fn validate_follows_an_open_session_of_behaviours_to_its_exit() {
    let tmp = tempdir();
    let w = tmp.path().join("w.yaml");
    let class = |initial: &str| {
        format!(
            "target: embedded\nrun: {{ duration: 10s }}\nusers:\n  - class: editor\n    protocol: caldav\n    arrival: {{ rate: 4/s }}\n    {initial}ops: {{ time_range_report: {{}}, put_event: {{}}, delete_event: {{}} }}\n    behaviours:\n      planner:\n        weight: 1\n        start: put_event\n        states:\n          put_event: {{ exit: 1 }}\n      tidier:\n        weight: 1\n        start: time_range_report\n        states:\n          time_range_report: {{ delete_event: 0.6, exit: 0.4 }}\n          delete_event: {{ time_range_report: 0.5, exit: 0.5 }}\n"
        )
    };
    std::fs::write(&w, class("")).unwrap();
    let o = loadmix_bin(&["validate", &path_str(&w)]);
    let (said, warned) = (
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr),
    );
    // A tidier's visits per session: report 1/(1 - 0.6 × 0.5) = 1.4286, delete 0.8571:
    // 2.29 ops; a planner's 1; half and half, 1.64 ops a session, 6.6 a second.
    for line in [
        "when full queue, each to its exit (about 1.64 ops), each a new user",
        "offered: 6.6 ops/s",
        "a sampled plan (50 session(s), each to its exit) finds nothing to act on",
    ] {
        assert!(said.contains(line), "{line:?} not in:\n{said}");
    }
    assert!(
        warned.contains("class 'editor'")
            && warned.contains("let its sessions come back to what they made (arrival.returning)"),
        "{warned}"
    );
    // With events to delete, no warning.
    std::fs::write(&w, class("params: { initial_events: 20 }\n    ")).unwrap();
    let o = loadmix_bin(&["validate", &path_str(&w)]);
    let said = String::from_utf8_lossy(&o.stdout);
    assert!(
        said.contains("a sampled plan (50 session(s), each to its exit) finds something to act on for every pick"),
        "{said}"
    );
    assert!(!String::from_utf8_lossy(&o.stderr).contains("warning"));
}

/// Completions and man pages come from the command definitions: every command and flag
/// is in them, the bash script parses, and a page is written per command.
#[test]
fn completions_and_man_pages_name_every_command() {
    for shell in ["bash", "zsh", "fish", "elvish", "powershell"] {
        let o = loadmix_bin(&["completions", shell]);
        assert!(
            o.status.success(),
            "{shell}: {}",
            String::from_utf8_lossy(&o.stderr)
        );
        let text = String::from_utf8(o.stdout).unwrap();
        for word in ["run", "infer", "fidelity", "dashboard", "linger", "wide"] {
            assert!(text.contains(word), "{shell} completion lacks {word}");
        }
    }
    let tmp = tempdir();
    let script = tmp.path().join("loadmix.bash");
    std::fs::write(&script, loadmix_bin(&["completions", "bash"]).stdout).unwrap();
    let syntax = std::process::Command::new("bash")
        .arg("-n")
        .arg(&script)
        .output()
        .unwrap();
    assert!(
        syntax.status.success(),
        "{}",
        String::from_utf8_lossy(&syntax.stderr)
    );
    let page = loadmix_bin(&["man"]);
    let page = String::from_utf8(page.stdout).unwrap();
    assert!(page.starts_with(".ie") && page.contains(".SH NAME") && page.contains("fidelity"));
    let dir = tmp.path().join("man");
    let o = loadmix_bin(&["man", "--out", dir.to_str().unwrap()]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let run = std::fs::read_to_string(dir.join("loadmix-run.1")).unwrap();
    assert!(run.contains("dashboard") && run.contains("linger"), "{run}");
    assert!(dir.join("loadmix-infer.1").is_file());
}

/// `--dashboard` stays up after the run until Ctrl-C only where a terminal can send it:
/// without one (a script, a CI job; stdin is not a terminal here) the run ends, and says
/// why the dashboard closed with it.
#[test]
fn a_dashboard_run_without_a_terminal_ends_with_its_run() {
    let tmp = tempdir();
    let w = tmp.path().join("w.yaml");
    std::fs::write(
        &w,
        "name: brief\nrun: { iterations: 5, rounds: 1, warmup: 0s }\nusers:\n  - class: c\n    protocol: http\n    count: 1\n    mix:\n      get: { weight: 1, path: /cosmo/queue/none }\n",
    )
    .unwrap();
    let out = out_dir(&tmp);
    let o = loadmix_bin(&[
        "run",
        &path_str(&w),
        "--target",
        "embedded",
        "--dashboard",
        "127.0.0.1:0",
        "--quiet",
        "--out",
        &path_str(&out),
    ]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "{err}");
    assert!(err.contains("the dashboard closes with the run"), "{err}");
    assert!(!err.contains("until Ctrl-C"), "{err}");
}
