//! https: the embedded server behind TLS, the generator trusting a given CA, connect and
//! handshake times apart from the latency, session resumption, and every certificate
//! problem stopping the run at preflight (exit 3) or before it (exit 2) with a plain reason.

use std::path::Path;
use std::sync::Arc;

use crate::common::*;
use loadmix::embedded::{self as server, ServerConfig, ServerHandle, certs};

/// The embedded server serving https with `dir`'s cert.pem and key.pem.
fn https_server(rt: &tokio::runtime::Runtime, dir: &Path) -> ServerHandle {
    let tls = certs::server_config(&dir.join("cert.pem"), &dir.join("key.pem")).unwrap();
    rt.block_on(server::start(ServerConfig {
        tls: Some(tls),
        ..ServerConfig::default()
    }))
    .unwrap()
}

fn make_certs(dir: &Path, names: &[&str]) {
    let names: Vec<String> = names.iter().map(|s| s.to_string()).collect();
    certs::write_pair(dir, &names).unwrap();
}

fn queue_run(url: &str, out: &Path, extra: &[&str]) -> std::process::Output {
    let out_s = path_str(out);
    let mut args = vec![
        "run",
        "workloads/queue-sizes.yaml",
        "--target",
        url,
        "--out",
        &out_s,
        "--quiet",
        "--rounds",
        "1",
        "--iterations",
        "30",
    ];
    args.extend_from_slice(extra);
    loadmix_bin(&args)
}

#[test]
fn https_run_counts_what_the_server_answered_and_reports_handshakes() {
    let rt = runtime();
    let tmp = tempdir();
    make_certs(tmp.path(), &["localhost", "127.0.0.1"]);
    let srv = https_server(&rt, tmp.path());
    assert!(srv.url().starts_with("https://"));
    let ca = path_str(&tmp.path().join("ca.pem"));
    let out = out_dir(&tmp);
    let o = queue_run(&srv.url(), &out, &["--ca-cert", &ca]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let r = read_report(&out);
    assert_eq!(r.summary.total.failures, 0);
    let send = op(&r, "producer.send");
    assert_eq!(send.requests, 4 * 30);
    assert_eq!(srv.stats.count("POST", 201), send.requests);
    // Keep-alive users open one connection each: 6 connections, each with a handshake.
    let total = &r.summary.total;
    let connect = total.connect_ms.as_ref().expect("connect times");
    let tls = total
        .tls_handshake_ms
        .as_ref()
        .expect("TLS handshake times");
    assert_eq!(connect.count, 6);
    assert_eq!(tls.count, 6);
    assert!(tls.p50 > 0.0);
    let info = r.tls.as_ref().expect("tls settings in the report");
    assert!(info.verified);
    assert_eq!(info.ca_cert.as_deref(), Some(ca.as_str()));
    rt.block_on(srv.stop());
}

#[test]
fn per_request_https_resumes_sessions_unless_the_class_says_not_to() {
    let rt = runtime();
    let tmp = tempdir();
    make_certs(tmp.path(), &["127.0.0.1"]);
    let srv = https_server(&rt, tmp.path());
    let ca = path_str(&tmp.path().join("ca.pem"));
    for (resume, dir) in [("true", "a"), ("false", "b")] {
        let out = tmp.path().join(dir);
        let o = queue_run(
            &srv.url(),
            &out,
            &[
                "--ca-cert",
                &ca,
                "--set",
                "users.producer.connection=per_request",
                "--set",
                &format!("users.producer.tls_resumption={resume}"),
            ],
        );
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        let r = read_report(&out);
        let send = op(&r, "producer.send");
        assert_eq!(send.failures, 0);
        let tls = send.tls_handshake_ms.as_ref().unwrap();
        // A new connection, and a handshake, for every request.
        assert_eq!(tls.count, send.requests);
        if resume == "true" {
            // Only the very first connections can find no session to resume.
            assert!(
                send.tls_resumed >= send.requests - 4,
                "{} of {} resumed",
                send.tls_resumed,
                send.requests
            );
        } else {
            assert_eq!(send.tls_resumed, 0);
        }
    }
    rt.block_on(srv.stop());
}

#[test]
fn certificate_problems_stop_the_run_at_preflight_with_the_reason() {
    let rt = runtime();
    let tmp = tempdir();
    let good = tmp.path().join("good");
    let other = tmp.path().join("other");
    let wrong_name = tmp.path().join("wrong-name");
    make_certs(&good, &["127.0.0.1"]);
    make_certs(&other, &["127.0.0.1"]);
    make_certs(&wrong_name, &["elsewhere.example"]);
    let srv = https_server(&rt, &good);
    let misnamed = https_server(&rt, &wrong_name);
    let cases: Vec<(String, String, &str)> = vec![
        (srv.url(), path_str(&other.join("ca.pem")), "unknown issuer"),
        (
            misnamed.url(),
            path_str(&wrong_name.join("ca.pem")),
            "wrong host name",
        ),
    ];
    for (url, ca, reason) in cases {
        let out = tmp.path().join("out");
        let o = queue_run(&url, &out, &["--ca-cert", &ca]);
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(3), "{err}");
        assert!(err.contains(reason), "{reason}: {err}");
        assert!(!out.join("run.json").exists());
    }
    // Nothing but the preflight's handshakes reached the server.
    assert_eq!(srv.stats.method_total("POST"), 0);
    // --insecure runs anyway, and the report says the server was not verified.
    let out = tmp.path().join("insecure");
    let o = queue_run(&misnamed.url(), &out, &["--insecure"]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert!(String::from_utf8_lossy(&o.stderr).contains("--insecure"));
    assert!(!read_report(&out).tls.unwrap().verified);
    rt.block_on(srv.stop());
    rt.block_on(misnamed.stop());
}

#[test]
fn a_self_signed_certificate_that_says_ca_true_is_trusted_when_given_itself() {
    let rt = runtime();
    let tmp = tempdir();
    // As `openssl req -x509 -newkey rsa:2048 -nodes -subj /CN=localhost -addext
    // subjectAltName=...` makes it: self-signed, with CA:TRUE.
    let mut params =
        rcgen::CertificateParams::new(vec!["localhost".to_string(), "127.0.0.1".to_string()])
            .unwrap();
    params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
    let key = rcgen::KeyPair::generate().unwrap();
    let cert = params.self_signed(&key).unwrap();
    std::fs::write(tmp.path().join("cert.pem"), cert.pem()).unwrap();
    std::fs::write(tmp.path().join("key.pem"), key.serialize_pem()).unwrap();
    let srv = https_server(&rt, tmp.path());
    let out = out_dir(&tmp);
    let pinned = path_str(&tmp.path().join("cert.pem"));
    let o = queue_run(&srv.url(), &out, &["--ca-cert", &pinned]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let r = read_report(&out);
    assert_eq!(r.summary.total.failures, 0);
    assert_eq!(
        srv.stats.count("POST", 201),
        op(&r, "producer.send").requests
    );
    // Another such certificate is still refused, in words.
    let other = tmp.path().join("other");
    std::fs::create_dir_all(&other).unwrap();
    let k2 = rcgen::KeyPair::generate().unwrap();
    std::fs::write(
        other.join("cert.pem"),
        params.self_signed(&k2).unwrap().pem(),
    )
    .unwrap();
    let o = queue_run(
        &srv.url(),
        &tmp.path().join("refused"),
        &["--ca-cert", &path_str(&other.join("cert.pem"))],
    );
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(3), "{err}");
    assert!(
        err.contains("the server's certificate was refused"),
        "{err}"
    );
    assert!(!err.contains("Other("), "{err}");
    rt.block_on(srv.stop());
}

#[test]
fn an_expired_certificate_is_named_as_such() {
    let rt = runtime();
    let tmp = tempdir();
    // A CA and a leaf whose validity ended yesterday.
    let mut ca_params = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
    ca_params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
    let ca_key = rcgen::KeyPair::generate().unwrap();
    let ca = ca_params.self_signed(&ca_key).unwrap();
    let issuer = rcgen::Issuer::new(ca_params, ca_key);
    let mut leaf = rcgen::CertificateParams::new(vec!["127.0.0.1".to_string()]).unwrap();
    leaf.not_before = rcgen::date_time_ymd(2020, 1, 1);
    leaf.not_after = rcgen::date_time_ymd(2021, 1, 1);
    let key = rcgen::KeyPair::generate().unwrap();
    let cert = leaf.signed_by(&key, &issuer).unwrap();
    std::fs::write(tmp.path().join("ca.pem"), ca.pem()).unwrap();
    std::fs::write(tmp.path().join("cert.pem"), cert.pem()).unwrap();
    std::fs::write(tmp.path().join("key.pem"), key.serialize_pem()).unwrap();
    let srv = https_server(&rt, tmp.path());
    let o = queue_run(
        &srv.url(),
        &out_dir(&tmp),
        &["--ca-cert", &path_str(&tmp.path().join("ca.pem"))],
    );
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(3), "{err}");
    assert!(err.contains("expired"), "{err}");
    rt.block_on(srv.stop());
}

#[test]
fn bad_tls_files_are_refused_before_anything_is_sent() {
    let tmp = tempdir();
    make_certs(&tmp.path().join("a"), &["localhost"]);
    make_certs(&tmp.path().join("b"), &["localhost"]);
    let junk = tmp.path().join("junk.pem");
    std::fs::write(&junk, "-----BEGIN CERTIFICATE-----\nnot base64 at all!\n").unwrap();
    let empty = tmp.path().join("empty.pem");
    std::fs::write(&empty, "just text\n").unwrap();
    let a = |f: &str| path_str(&tmp.path().join("a").join(f));
    let b = |f: &str| path_str(&tmp.path().join("b").join(f));
    // Nothing listens at this URL: exit 2 proves the files were checked first.
    let url = "https://127.0.0.1:9";
    let cases: Vec<(Vec<String>, &str)> = vec![
        (vec!["--ca-cert".into(), path_str(&junk)], "junk.pem"),
        (
            vec!["--ca-cert".into(), path_str(&empty)],
            "holds no certificate",
        ),
        (
            vec![
                "--ca-cert".into(),
                path_str(&tmp.path().join("missing.pem")),
            ],
            "missing.pem",
        ),
        (
            vec![
                "--client-cert".into(),
                a("cert.pem"),
                "--client-key".into(),
                b("key.pem"),
            ],
            "does not belong",
        ),
        (vec!["--client-cert".into(), a("cert.pem")], "--client-key"),
    ];
    for (flags, said) in cases {
        let flags: Vec<&str> = flags.iter().map(String::as_str).collect();
        let o = queue_run(url, &out_dir(&tmp), &flags);
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(2), "{flags:?}: {err}");
        assert!(err.contains(said), "{flags:?}: {err}");
    }
    // The server refuses a key that is not its certificate's.
    let o = loadmix_bin(&[
        "serve",
        "--tls-cert",
        &a("cert.pem"),
        "--tls-key",
        &b("key.pem"),
    ]);
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("does not belong"));
}

#[test]
fn a_server_asking_for_a_client_certificate_gets_one() {
    let rt = runtime();
    let tmp = tempdir();
    let srv_dir = tmp.path().join("server");
    let client_dir = tmp.path().join("client");
    make_certs(&srv_dir, &["127.0.0.1"]);
    make_certs(&client_dir, &["loadmix-client"]);
    // The server trusts the client's CA and requires a certificate from it.
    let mut roots = rustls::RootCertStore::empty();
    for c in loadmix::formats::pem::certs(&client_dir.join("ca.pem")).unwrap() {
        roots.add(c).unwrap();
    }
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let verifier = rustls::server::WebPkiClientVerifier::builder_with_provider(
        Arc::new(roots),
        provider.clone(),
    )
    .build()
    .unwrap();
    let cfg = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_client_cert_verifier(verifier)
        .with_single_cert(
            loadmix::formats::pem::certs(&srv_dir.join("cert.pem")).unwrap(),
            loadmix::formats::pem::key(&srv_dir.join("key.pem")).unwrap(),
        )
        .unwrap();
    let srv = rt
        .block_on(server::start(ServerConfig {
            tls: Some(Arc::new(cfg)),
            ..ServerConfig::default()
        }))
        .unwrap();
    let ca = path_str(&srv_dir.join("ca.pem"));
    // Without a client certificate the server refuses each connection once its handshake
    // is over (TLS 1.3 sends the alert after the client's Finished): every request fails,
    // counted, and the failure says what to do.
    let bare = tmp.path().join("bare");
    let o = queue_run(&srv.url(), &bare, &["--ca-cert", &ca]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.code() != Some(2), "{err}");
    let r = read_report(&bare);
    assert_eq!(r.summary.total.successes, 0);
    assert_eq!(r.summary.total.failures, r.summary.total.requests);
    assert!(
        r.failures
            .iter()
            .any(|f| f.detail.contains("--client-cert")),
        "{:?}",
        r.failures
    );
    let out = tmp.path().join("mtls");
    let o = queue_run(
        &srv.url(),
        &out,
        &[
            "--ca-cert",
            &ca,
            "--client-cert",
            &path_str(&client_dir.join("cert.pem")),
            "--client-key",
            &path_str(&client_dir.join("key.pem")),
        ],
    );
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let r = read_report(&out);
    assert_eq!(r.summary.total.failures, 0);
    assert!(r.tls.unwrap().client_certificate);
    rt.block_on(srv.stop());
}
