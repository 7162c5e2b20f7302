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
    assert_eq!(out.status.code(), Some(0), "{err}");
    assert!(
        err.contains("`loadmix run` would refuse this workload on this machine"),
        "{err}"
    );
    assert!(err.contains("available"), "{err}");
    refused(&[&["run"][..], &args].concat(), "available");
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
