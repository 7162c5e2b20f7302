//! Every mistake in `fixtures/bad-workloads/` is refused with the message in its `.err`
//! file (file:line:column, key, what is wrong, and a hint where one helps), and the binary
//! exits 2 without sending anything. `LOADMIX_BLESS=1 cargo test` rewrites the `.err` files.

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::common::{loadmix_bin, tempdir};

fn fixtures() -> Vec<PathBuf> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/bad-workloads");
    let mut v: Vec<PathBuf> = std::fs::read_dir(&dir)
        .expect("fixtures/bad-workloads exists")
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "yaml"))
        .collect();
    v.sort();
    v
}

/// The path as the user would type it from the crate root, so messages are stable.
fn rel(p: &Path) -> String {
    p.strip_prefix(env!("CARGO_MANIFEST_DIR"))
        .map(|r| r.display().to_string())
        .unwrap_or_else(|_| p.display().to_string())
}

#[test]
fn each_bad_workload_has_its_expected_message() {
    let all = fixtures();
    assert!(
        all.len() >= 15,
        "at least 15 bad workloads, found {}",
        all.len()
    );
    let bless = std::env::var_os("LOADMIX_BLESS").is_some();
    let mut mismatches = Vec::new();
    for yaml in &all {
        let text = std::fs::read_to_string(yaml).unwrap();
        let err = match loadmix::load_str(&rel(yaml), &text, &[], yaml.parent()) {
            Ok(_) => {
                mismatches.push(format!("{}: was accepted", rel(yaml)));
                continue;
            }
            Err(e) => e.to_string(),
        };
        let golden = yaml.with_extension("err");
        if bless {
            std::fs::write(&golden, format!("{err}\n")).unwrap();
            continue;
        }
        let expected = std::fs::read_to_string(&golden)
            .unwrap_or_else(|_| panic!("{} is missing; run with LOADMIX_BLESS=1", rel(&golden)));
        if expected.trim_end() != err.trim_end() {
            mismatches.push(format!(
                "{}:\n--- expected\n{}\n--- got\n{}",
                rel(yaml),
                expected.trim_end(),
                err
            ));
        }
    }
    assert!(mismatches.is_empty(), "{}", mismatches.join("\n\n"));
}

#[test]
fn every_located_message_names_file_line_and_column() {
    for yaml in fixtures() {
        let golden = std::fs::read_to_string(yaml.with_extension("err")).unwrap_or_default();
        // One mistake is its message; several are listed under a count, each as it would
        // be alone, a blank line apart.
        let firsts: Vec<&str> = match golden.lines().next() {
            Some(l) if l.ends_with("mistakes in the workload:") => golden
                .split("\n\n")
                .skip(1)
                .filter_map(|p| p.lines().next())
                .collect(),
            Some(l) => vec![l],
            None => vec![""],
        };
        for first in firsts {
            let prefix = format!("{}:", rel(&yaml));
            assert!(first.starts_with(&prefix), "{first}");
            let rest = &first[prefix.len()..];
            let mut parts = rest.splitn(3, ':');
            let line: Option<u32> = parts.next().and_then(|s| s.parse().ok());
            let col: Option<u32> = parts.next().and_then(|s| s.parse().ok());
            assert!(line.is_some() && col.is_some(), "no line:column in {first}");
        }
    }
}

#[test]
fn the_binary_exits_2_and_prints_the_message() {
    for name in [
        "06-unknown-operation.yaml",
        "01-yaml-syntax.yaml",
        "13-zero-users.yaml",
    ] {
        let path = Path::new("fixtures/bad-workloads").join(name);
        for cmd in ["validate", "run"] {
            let out = Command::new(env!("CARGO_BIN_EXE_loadmix"))
                .current_dir(env!("CARGO_MANIFEST_DIR"))
                .args([cmd, path.to_str().unwrap()])
                .output()
                .unwrap();
            assert_eq!(out.status.code(), Some(2), "{cmd} {name}");
            let stderr = String::from_utf8_lossy(&out.stderr);
            assert!(
                stderr.starts_with(&format!("error: {}:", path.display())),
                "{stderr}"
            );
            assert!(
                out.stdout.is_empty(),
                "nothing on stdout for a refused workload"
            );
        }
    }
}

#[test]
fn bad_overrides_exit_2_too() {
    let cases: &[&[&str]] = &[
        &[
            "validate",
            "workloads/queue-sizes.yaml",
            "--set",
            "run.duration",
        ],
        &[
            "validate",
            "workloads/queue-sizes.yaml",
            "--users",
            "producr=3",
        ],
        &[
            "validate",
            "workloads/queue-sizes.yaml",
            "--duration",
            "ten",
        ],
        &[
            "validate",
            "workloads/queue-sizes.yaml",
            "--set",
            "users.producer.mix.send.weight=-1",
        ],
        &["run", "workloads/queue-sizes.yaml", "--target", "ftp://x"],
        &["validate", "no/such/file.yaml"],
    ];
    for args in cases {
        let out = Command::new(env!("CARGO_BIN_EXE_loadmix"))
            .current_dir(env!("CARGO_MANIFEST_DIR"))
            .args(*args)
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {stderr}");
        assert!(stderr.starts_with("error: "), "{stderr}");
    }
    let out = Command::new(env!("CARGO_BIN_EXE_loadmix"))
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .args([
            "validate",
            "workloads/queue-sizes.yaml",
            "--users",
            "producr=3",
        ])
        .output()
        .unwrap();
    assert!(String::from_utf8_lossy(&out.stderr).contains("did you mean 'producer'?"));
}

/// Files that are not workload text: named with where the problem is, exit 2.
#[test]
fn files_that_are_not_yaml_text_are_refused_with_a_position() {
    let tmp = tempdir();
    let bad = tmp.path().join("latin1.yaml");
    std::fs::write(&bad, b"users:\n  - class: caf\xe9\n").unwrap();
    let nul = tmp.path().join("nul.yaml");
    std::fs::write(&nul, b"users:\0\n").unwrap();
    for (path, want) in [
        (
            bad.clone(),
            "latin1.yaml:2:15: cannot read workload file: not UTF-8".to_string(),
        ),
        (nul, "contains NUL bytes".into()),
        (tmp.path().to_path_buf(), "is a folder".into()),
    ] {
        let out = loadmix_bin(&["validate", path.to_str().unwrap()]);
        assert_eq!(out.status.code(), Some(2));
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains(&want), "{want}: {err}");
    }
}
