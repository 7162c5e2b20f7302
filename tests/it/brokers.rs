//! STOMP producers and consumers against the embedded broker: what loadmix reports equals
//! what the broker counted, a broker's ERROR is counted in its own words and the run goes
//! on, and a refused login stops the run before it starts.

use crate::common::*;
use loadmix::embedded::{self as server, ServerConfig};

fn broker(rt: &tokio::runtime::Runtime, no_auth: bool) -> loadmix::embedded::ServerHandle {
    rt.block_on(server::start(ServerConfig {
        no_auth,
        ..ServerConfig::default()
    }))
    .unwrap()
}

fn write_workload(dir: &std::path::Path, text: &str) -> String {
    let f = dir.join("w.yaml");
    std::fs::write(&f, text).unwrap();
    path_str(&f)
}

fn answer_count(r: &loadmix::reports::OpReport, name: &str) -> u64 {
    r.answers
        .iter()
        .filter(|a| a.name == name)
        .map(|a| a.count)
        .sum()
}

#[test]
fn sends_and_receives_equal_what_the_broker_counted() {
    let rt = runtime();
    let h = broker(&rt, true);
    let tmp = tempdir();
    let w = write_workload(
        tmp.path(),
        r#"
name: broker-counts
run: { iterations: 50, rounds: 2 }
users:
  - class: producer
    protocol: stomp
    count: 4
    mix:
      send: { weight: 1, params: { destination: "/queue/counts-{round}", size: 2KiB } }
  - class: consumer
    protocol: stomp
    count: 2
    iterations: 100
    params: { subscribe: "/queue/counts-{round}", ack: client-individual, prefetch: 5 }
    mix:
      receive: { weight: 1, params: { timeout: 5s } }
"#,
    );
    let target = format!("stomp://{}", h.stomp_addr.unwrap());
    let out = out_dir(&tmp);
    let code = loadmix(&[
        "run",
        &w,
        "--target",
        &target,
        "--quiet",
        "--out",
        &path_str(&out),
    ]);
    assert_eq!(code, 0);
    let r = read_report(&out);
    let counts = h.broker.destinations();
    let send = op(&r, "producer.send");
    let recv = op(&r, "consumer.receive");
    // Two rounds, a queue each: 4 × 50 sent and received in each.
    assert_eq!(counts.len(), 2, "{counts:?}");
    for c in counts.values() {
        assert_eq!((c.enqueued, c.dequeued), (200, 200), "{counts:?}");
        // A consumer that ends its iterations with messages prefetched and not taken
        // gives them back as it leaves; the other takes them: handed out again, once.
        assert_eq!(c.dispatched, c.dequeued + c.requeued, "{counts:?}");
    }
    let enqueued: u64 = counts.values().map(|c| c.enqueued).sum();
    let dequeued: u64 = counts.values().map(|c| c.dequeued).sum();
    assert_eq!(send.successes, enqueued);
    assert_eq!(answer_count(send, "RECEIPT"), enqueued);
    assert_eq!(recv.successes, dequeued);
    assert_eq!(answer_count(recv, "MESSAGE"), dequeued);
    // Every message this run sent came back stamped: an end-to-end latency each.
    assert_eq!(op(&r, "consumer.receive.e2e").successes, dequeued);
    // The wire: each send's frame holds its 2 KiB body.
    assert!(send.bytes_sent >= 400 * 2048, "{}", send.bytes_sent);
    // The e2e figures are left out of the total, which counts each operation once.
    assert_eq!(r.summary.total.requests, send.requests + recv.requests);
    // The table gives the message rates in the studies' units.
    let table = std::fs::read_to_string(out.join("report.txt")).unwrap();
    let line = table
        .lines()
        .find(|l| l.trim_start().starts_with("producer.send:") && l.contains("msg/min"))
        .unwrap_or_else(|| panic!("{table}"));
    assert!(line.contains("msg/s") && line.contains("MiB/s"), "{line}");
    assert!(!table.contains("receive.e2e: "), "{table}");
    h_stop(&rt, h);
}

#[test]
fn a_brokers_error_is_counted_in_its_own_words_and_the_run_goes_on() {
    let rt = runtime();
    let h = broker(&rt, true);
    let tmp = tempdir();
    // The embedded broker has no topics: each send is answered ERROR and the connection
    // closed; each next send opens a new one.
    let w = write_workload(
        tmp.path(),
        r#"
name: broker-error
run: { iterations: 10 }
users:
  - class: producer
    protocol: stomp
    count: 2
    mix:
      send: { weight: 1, params: { destination: "/topic/news" } }
"#,
    );
    let target = format!("stomp://{}", h.stomp_addr.unwrap());
    let out = out_dir(&tmp);
    loadmix(&[
        "run",
        &w,
        "--target",
        &target,
        "--quiet",
        "--out",
        &path_str(&out),
    ]);
    let r = read_report(&out);
    let send = op(&r, "producer.send");
    assert_eq!((send.requests, send.failures), (20, 20));
    assert_eq!(send.errors.get("status"), Some(&20));
    let error = send.answers.iter().find(|a| a.name == "ERROR").unwrap();
    assert_eq!(error.count, 20);
    assert!(
        error
            .reason
            .as_deref()
            .unwrap_or("")
            .contains("queues only"),
        "{error:?}"
    );
    assert_eq!(
        h.broker.errors.load(std::sync::atomic::Ordering::Relaxed),
        20
    );
    // The preflight's login, then per user 10 sends: the first on the connection its
    // set-up opened, each later one on a new connection, since each ERROR ended one.
    assert_eq!(
        h.broker
            .connections
            .load(std::sync::atomic::Ordering::Relaxed),
        1 + 2 * 10
    );
    h_stop(&rt, h);
}

#[test]
fn a_refused_login_stops_the_run_at_preflight_with_the_brokers_reason() {
    let rt = runtime();
    let h = broker(&rt, false);
    let target = format!("stomp://{}", h.stomp_addr.unwrap());
    let tmp = tempdir();
    let w = write_workload(
        tmp.path(),
        r#"
name: broker-login
run: { iterations: 1 }
accounts: { create: shared, username: someone }
users:
  - class: producer
    protocol: stomp
    count: 1
    mix:
      send: { weight: 1, params: { destination: "/queue/x" } }
"#,
    );
    let o = std::process::Command::new(env!("CARGO_BIN_EXE_loadmix"))
        .args(["run", &w, "--target", &target, "--quiet"])
        .env("LOADMIX_PASSWORD", "not-the-passcode")
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(3), "{err}");
    assert!(err.contains("login refused"), "{err}");
    assert!(!err.contains("not-the-passcode"), "{err}");
    // Nothing was sent.
    assert!(h.broker.destinations().is_empty());
    h_stop(&rt, h);
}

#[test]
fn a_consumer_class_without_a_subscription_is_refused_with_its_place() {
    let tmp = tempdir();
    let w = write_workload(
        tmp.path(),
        r#"
users:
  - class: consumer
    protocol: stomp
    count: 1
    mix:
      receive: { weight: 1 }
"#,
    );
    let o = loadmix_bin(&["validate", &w]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(
        err.contains("w.yaml:7:") && err.contains("needs a subscription"),
        "{err}"
    );
    let small = write_workload(
        tmp.path(),
        "users:\n  - class: p\n    protocol: stomp\n    count: 1\n    mix:\n      send: { weight: 1, params: { size: 10B } }\n",
    );
    let o = loadmix_bin(&["validate", &small]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(err.contains("smaller than the 24-byte stamp"), "{err}");
}

fn h_stop(rt: &tokio::runtime::Runtime, h: loadmix::embedded::ServerHandle) {
    rt.block_on(h.stop());
}
