//! `loadmix new`: a starter workload written for a target, each class tried against it
//! first; what it writes runs there with no failure, and it says plainly what it could not
//! use and why.

use crate::common::*;
use loadmix::embedded::{self as server, ServerConfig};

/// `new` then `run` of what it wrote, both as the binary; the run's report.
fn new_then_run(target: &str, extra: &[&str]) -> (String, loadmix::reports::Report) {
    let tmp = tempdir();
    let file = tmp.path().join("starter.yaml");
    let mut args = vec!["new", "--target", target, "-o", file.to_str().unwrap()];
    args.extend_from_slice(extra);
    let o = loadmix_bin(&args);
    assert!(
        o.status.success(),
        "new: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    let text = std::fs::read_to_string(&file).unwrap();
    let out = out_dir(&tmp);
    let o = loadmix_bin(&[
        "run",
        file.to_str().unwrap(),
        "--duration",
        "4s",
        "--rounds",
        "1",
        "--quiet",
        "--out",
        out.to_str().unwrap(),
    ]);
    assert!(
        o.status.success(),
        "run: {}\n{text}",
        String::from_utf8_lossy(&o.stderr)
    );
    (text, read_report(&out))
}

#[test]
fn a_starter_for_the_embedded_server_has_cosmo_caldav_and_carddav_and_runs_clean() {
    let (text, r) = new_then_run("embedded", &[]);
    for class in [
        "class: morse",
        "class: atom",
        "class: caldav",
        "class: carddav",
    ] {
        assert!(text.contains(class), "{class}:\n{text}");
    }
    assert!(
        text.starts_with("# A first workload for embedded"),
        "{text}"
    );
    assert_eq!(r.summary.total.failures, 0, "{:?}", r.failures);
    assert!(r.summary.total.requests > 0);
}

#[test]
fn a_starter_for_a_broker_sends_and_receives_and_an_http_server_keeps_what_answers() {
    let rt = runtime();
    let h = rt
        .block_on(server::start(ServerConfig {
            no_auth: true,
            ..ServerConfig::default()
        }))
        .unwrap();
    let stomp = format!("stomp://{}", h.stomp_addr.unwrap());
    let (text, r) = new_then_run(&stomp, &[]);
    assert!(
        text.contains("protocol: stomp") && text.contains("receive:"),
        "{text}"
    );
    assert_eq!(r.summary.total.failures, 0, "{:?}", r.failures);
    assert!(
        r.summary
            .ops
            .iter()
            .any(|o| o.op == "consumer.receive" && o.successes > 0)
    );
    // Over HTTP the embedded server speaks CalDAV, Morse Code and Atom; a GET of its
    // context is a 404, so the plain GET is left out, and the file says why.
    let url = format!("{}/cosmo", h.url());
    let (text, r) = new_then_run(&url, &[]);
    assert!(
        text.contains("class: caldav") && text.contains("class: morse"),
        "{text}"
    );
    assert!(!text.contains("class: web"), "{text}");
    assert!(
        text.contains("#   http: ") && text.contains("404"),
        "{text}"
    );
    assert_eq!(r.summary.total.failures, 0, "{:?}", r.failures);
    // Only what --protocol names is tried.
    let (text, _) = new_then_run(&url, &["--protocol", "caldav"]);
    assert!(
        text.contains("class: caldav") && !text.contains("class: morse"),
        "{text}"
    );
}

#[test]
fn new_refuses_what_it_cannot_do_in_words() {
    let tmp = tempdir();
    let file = tmp.path().join("w.yaml");
    let f = file.to_str().unwrap();
    let o = loadmix_bin(&["new", "--target", "ftp://x", "-o", f]);
    assert_eq!(o.status.code(), Some(2));
    assert!(
        String::from_utf8_lossy(&o.stderr)
            .contains("scheme is one of http, https, stomp, stomp+ssl, amqp, amqps")
    );
    let o = loadmix_bin(&["new", "--target", "embedded", "--protocol", "amqp", "-o", f]);
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("--protocol amqp"));
    // Nothing listens: every trial fails, each says why, nothing is written.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let o = loadmix_bin(&[
        "new",
        "--target",
        &format!("amqp://127.0.0.1:{port}"),
        "-o",
        f,
    ]);
    assert_eq!(
        o.status.code(),
        Some(3),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("no protocol worked") && err.contains("amqp:"),
        "{err}"
    );
    assert!(!file.exists());
    // An existing file is never overwritten.
    std::fs::write(&file, "mine").unwrap();
    let o = loadmix_bin(&["new", "--target", "embedded", "-o", f]);
    assert_eq!(o.status.code(), Some(2));
    assert_eq!(std::fs::read_to_string(&file).unwrap(), "mine");
}
