//! No output ever holds a credential: passwords and tokens from the environment and from
//! files, through every workload kind and every output (run.json with the embedded
//! workload source, report.txt, HTML, CSV, the op log, stdout in both formats, stderr),
//! even when a failing request's URL carries one.

use crate::common::*;

const PASSWORD: &str = "Pw-7#q;x' \"{}\\ü";
const ADMIN: &str = "Adm1n-p@ss:w0rd";
const TOKEN: &str = "tok_9f8e7d6c5b4a";
const KEY: &str = "file-secret-5150";

const HTTP: &str = r#"
name: secret-http
auth: { scheme: bearer, token: "{env:LOADMIX_TEST_TOKEN}" }
run: { iterations: 20, rounds: 1, warmup: 0s }
users:
  - class: api
    protocol: http
    count: 2
    mix:
      send: { weight: 2, method: POST, path: "{context}/queue/q", body: "m", expect: [201] }
      # Answered 404: the failure's detail quotes this URL, key and all.
      probe: { weight: 1, path: "{context}/nothing?key={file:key.txt}", headers: { X-Api-Key: "{env:LOADMIX_TEST_TOKEN}" } }
"#;

fn files_under(dir: &std::path::Path, out: &mut Vec<std::path::PathBuf>) {
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        if p.is_dir() {
            files_under(&p, out);
        } else {
            out.push(p);
        }
    }
}

fn assert_clean(what: &str, text: &str) {
    for s in [PASSWORD, ADMIN, TOKEN, KEY] {
        assert!(!text.contains(s), "{what} contains the secret {s:?}");
    }
}

#[test]
fn no_output_contains_a_credential() {
    let tmp = tempdir();
    std::fs::write(tmp.path().join("key.txt"), format!("{KEY}\n")).unwrap();
    let http = tmp.path().join("http.yaml");
    std::fs::write(&http, HTTP).unwrap();
    let runs: Vec<(String, Vec<String>)> = vec![
        (path_str(&http), vec![]),
        (
            path_str(&root().join("workloads/cosmo-0.7.yaml")),
            vec![
                "--duration".into(),
                "2s".into(),
                "--set".into(),
                "run.warmup=0s".into(),
            ],
        ),
    ];
    for (i, (file, extra)) in runs.iter().enumerate() {
        for format in ["table", "json"] {
            let out = tmp.path().join(format!("out-{i}-{format}"));
            let mut args: Vec<String> = vec![
                "run".into(),
                file.clone(),
                "--rounds".into(),
                "1".into(),
                "--format".into(),
                format.into(),
                "--out".into(),
                path_str(&out),
                "--html".into(),
                path_str(&out.join("extra.html")),
                "--csv".into(),
                path_str(&out.join("extra.csv")),
                "--log-ops".into(),
                path_str(&out.join("ops.csv")),
            ];
            args.extend(extra.iter().cloned());
            let o = std::process::Command::new(env!("CARGO_BIN_EXE_loadmix"))
                .current_dir(root())
                .args(&args)
                .env("LOADMIX_PASSWORD", PASSWORD)
                .env("LOADMIX_ADMIN_PASSWORD", ADMIN)
                .env("LOADMIX_TEST_TOKEN", TOKEN)
                .output()
                .unwrap();
            let stdout = String::from_utf8_lossy(&o.stdout);
            let stderr = String::from_utf8_lossy(&o.stderr);
            assert!(o.status.success(), "{file}: {stderr}");
            assert_clean("stdout", &stdout);
            assert_clean("stderr", &stderr);
            let mut files = Vec::new();
            files_under(&out, &mut files);
            assert!(files.len() >= 6, "{files:?}");
            for f in &files {
                let text = String::from_utf8_lossy(&std::fs::read(f).unwrap()).into_owned();
                assert_clean(&f.display().to_string(), &text);
            }
            if i == 0 {
                // The masked URL is still there to read, and the probes did fail.
                let run = std::fs::read_to_string(out.join("run.json")).unwrap();
                assert!(run.contains("key=[redacted]"), "{run}");
                assert!(run.contains("{env:LOADMIX_TEST_TOKEN}"));
            }
        }
    }
}

#[test]
fn credentials_cannot_be_written_in_a_workload_and_missing_ones_are_named() {
    let tmp = tempdir();
    let cases = [
        (
            "users: [{class: a, protocol: http, count: 1, mix: {g: {weight: 1, path: /, headers: {Authorization: 'Basic dXNlcjpwYXNz'}}}}]",
            "a credential cannot be written in the workload",
        ),
        (
            "auth: {scheme: bearer, token: abc123}\nusers: [{class: a, protocol: http, count: 1, mix: {g: {weight: 1, path: /}}}]",
            "a token cannot be written in the workload",
        ),
        (
            "users: [{class: a, protocol: http, count: 1, mix: {g: {weight: 1, path: '/x?k={env:LOADMIX_SURELY_UNSET_VAR}'}}}]",
            "LOADMIX_SURELY_UNSET_VAR is not set",
        ),
        (
            "users: [{class: a, protocol: http, count: 1, mix: {g: {weight: 1, path: '/x?k={file:no-such-secret}'}}}]",
            "no-such-secret",
        ),
        (
            "auth: kerberos\nusers: [{class: a, protocol: http, count: 1, mix: {g: {weight: 1, path: /}}}]",
            "unknown authentication scheme 'kerberos'",
        ),
        (
            "auth: digest\nusers: [{class: a, protocol: http, count: 1, mix: {g: {weight: 1, path: /}}}]",
            "has no accounts",
        ),
    ];
    for (i, (yaml, said)) in cases.iter().enumerate() {
        let f = tmp.path().join(format!("w{i}.yaml"));
        std::fs::write(&f, yaml).unwrap();
        let o = loadmix_bin(&["validate", &path_str(&f)]);
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(2), "{yaml}: {err}");
        assert!(err.contains(said), "{yaml}: {err}");
        // file:line:column of the offending value.
        assert!(err.contains(&format!("w{i}.yaml:")), "{err}");
    }
}
