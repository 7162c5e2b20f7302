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

/// What most tests here start from: the embedded broker, a scratch folder with the
/// workload written in it, the broker's STOMP target and an output folder.
struct Setup {
    rt: tokio::runtime::Runtime,
    h: loadmix::embedded::ServerHandle,
    tmp: tempfile::TempDir,
    w: String,
    target: String,
    out: std::path::PathBuf,
}

fn set_up(workload: &str) -> Setup {
    let rt = runtime();
    let h = broker(&rt, true);
    let tmp = tempdir();
    let w = write_workload(tmp.path(), workload);
    let target = format!("stomp://{}", h.stomp_addr.unwrap());
    let out = out_dir(&tmp);
    Setup {
        rt,
        h,
        tmp,
        w,
        target,
        out,
    }
}

/// `loadmix run W --target TARGET --quiet --out OUT [EXTRA...]`, in-process: its exit code.
fn run_to(w: &str, target: &str, out: &std::path::Path, extra: &[&str]) -> i32 {
    let out = path_str(out);
    let mut args = vec!["run", w, "--target", target, "--quiet", "--out", &out];
    args.extend_from_slice(extra);
    loadmix(&args)
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
    let Setup {
        rt,
        h,
        tmp: _tmp,
        w,
        target,
        out,
    } = set_up(
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
thresholds:
  - { op: sent, errors: "< 1%" }
  - { op: received, p99: "< 5s" }
"#,
    );
    let code = run_to(&w, &target, &out, &[]);
    assert_eq!(code, 0);
    let r = read_report(&out);
    // The sums can be judged as any operation can.
    let judged: Vec<_> = r.thresholds.iter().map(|t| (&t.op[..], t.passed)).collect();
    assert_eq!(judged, [("sent", true), ("received", true)]);
    assert!(r.thresholds.iter().all(|t| t.observed.is_some()));
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
    // Messages are summed apart, as PerfTest reports them: sends in `sent`, what was
    // taken in `received` (their e2e figures in neither), and nothing in `total`, which
    // adds up requests answered.
    let sum = |name: &str| r.summary.sum(name).map(|o| o.requests);
    assert_eq!(sum("sent"), Some(send.requests));
    assert_eq!(sum("received"), Some(recv.requests));
    assert_eq!(r.summary.total.requests, 0);
    assert_eq!(r.summary.headline().requests, send.requests);
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

/// A round whose consumers take less than its producers sent: what is left is drained
/// after the round (the run's own destination), every message accounted by its stamp.
const LEFTOVERS: &str = r#"
name: broker-leftovers
run: { iterations: 50, rounds: 2 }
users:
  - class: producer
    protocol: stomp
    count: 4
    mix:
      send: { weight: 1, params: { destination: "/queue/left-{run_id}-{round}", size: 64B } }
  - class: other
    protocol: stomp
    count: 1
    iterations: 10
    mix:
      send: { weight: 1, params: { destination: "/queue/not-the-runs", size: 64B } }
  - class: consumer
    protocol: stomp
    count: 2
    iterations: 60
    params: { subscribe: "/queue/left-{run_id}-{round}", ack: client-individual, prefetch: 1 }
    mix:
      receive: { weight: 1, params: { timeout: 5s } }
"#;

#[test]
fn what_a_round_leaves_is_drained_after_it_and_every_message_is_accounted_by_its_stamp() {
    let Setup {
        rt,
        h,
        tmp,
        w,
        target,
        out,
    } = set_up(LEFTOVERS);
    let code = run_to(&w, &target, &out, &[]);
    assert_eq!(code, 0);
    let r = read_report(&out);
    let counts = h.broker.destinations();
    let ledger = r.ledger.as_ref().expect("a ledger");
    assert!(
        !ledger.drained,
        "/queue/not-the-runs is not the run's: not drained"
    );
    for (name, c) in &counts {
        let d = ledger
            .destinations
            .iter()
            .find(|d| d.name == *name)
            .unwrap_or_else(|| panic!("{name} not in {ledger:?}"));
        assert_eq!(d.counts.sent, c.enqueued, "{name}");
        assert_eq!(d.counts.duplicated + d.counts.out_of_order, 0, "{name}");
        if name.starts_with("/queue/left-") {
            // The broker's queue is empty: what consumers did not take, the drain did.
            assert_eq!((c.enqueued, c.dequeued), (200, 200), "{name}: {c:?}");
            assert_eq!(d.counts.received, 120, "{name}");
            assert_eq!(d.counts.drained, 80, "{name}");
            assert_eq!(d.counts.lost, 0, "{name}");
        } else {
            // Never touched: its messages are still there, and not received.
            assert_eq!((c.enqueued, c.dequeued), (20, 0), "{name}: {c:?}");
            assert_eq!(
                (d.counts.received, d.counts.drained, d.counts.lost),
                (0, 0, 20)
            );
        }
    }
    let drained: u64 = r.rounds.iter().map(|x| x.cleanup.drained_messages).sum();
    assert_eq!(drained, 160);
    let table = std::fs::read_to_string(out.join("report.txt")).unwrap();
    assert!(
        table.contains("drain: after the rounds, 160 message(s) taken from 2 destination(s)"),
        "{table}"
    );
    assert!(
        table.contains("received 120 · drained 80 · lost 0"),
        "{table}"
    );
    // Kept (--keep-data): nothing drained, and the report says what lost may mean.
    let kept = tmp.path().join("kept");
    let code = run_to(&w, &target, &kept, &["--keep-data"]);
    assert_eq!(code, 0);
    let r = read_report(&kept);
    let l = r.ledger.as_ref().unwrap();
    assert!(!l.drained);
    let left: u64 = l
        .destinations
        .iter()
        .filter(|d| d.name.starts_with("/queue/left-"))
        .map(|d| d.counts.lost)
        .sum();
    assert_eq!(left, 160);
    let table = std::fs::read_to_string(kept.join("report.txt")).unwrap();
    assert!(
        table.contains("not drained: lost counts what may still be on the broker"),
        "{table}"
    );
    h_stop(&rt, h);
}

#[test]
fn a_brokers_error_is_counted_in_its_own_words_and_the_run_goes_on() {
    // The embedded broker has queues and topics, no exchanges: each send is answered ERROR
    // and the connection closed; each next send opens a new one.
    let Setup {
        rt,
        h,
        tmp: _tmp,
        w,
        target,
        out,
    } = set_up(
        r#"
name: broker-error
run: { iterations: 10 }
users:
  - class: producer
    protocol: stomp
    count: 2
    mix:
      send: { weight: 1, params: { destination: "/exchange/news" } }
"#,
    );
    run_to(&w, &target, &out, &[]);
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
            .contains("is not a destination here"),
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

#[test]
fn shards_share_the_runs_stamp_and_their_merged_ledger_loses_and_doubles_nothing() {
    let Setup { rt, h, tmp, w, .. } = set_up(
        r#"
name: broker-shards
run: { iterations: 50, rounds: 1, timeout: 5s }
users:
  - class: producer
    protocol: stomp
    count: 2
    mix:
      send: { weight: 1, params: { destination: "/queue/shards-{run_id}", size: 64B } }
  - class: consumer
    protocol: stomp
    count: 2
    iterations: 40
    params: { subscribe: "/queue/shards-{run_id}", prefetch: 1 }
    mix:
      receive: { weight: 1, params: { timeout: 2s } }
"#,
    );
    let target = format!("stomp://{}", h.stomp_addr.unwrap());
    let at = (chrono::Utc::now() + chrono::Duration::seconds(3))
        .to_rfc3339_opts(chrono::SecondsFormat::Millis, true);
    let children: Vec<_> = (0..2)
        .map(|i| {
            let out = tmp.path().join(format!("s{i}"));
            let child = std::process::Command::new(env!("CARGO_BIN_EXE_loadmix"))
                .args(["run", &w, "--target", &target, "--shard", &format!("{i}/2")])
                .args(["--start-at", &at, "--quiet", "--out", &path_str(&out)])
                .stdout(std::process::Stdio::null())
                .spawn()
                .unwrap();
            (child, out)
        })
        .collect();
    let mut files = Vec::new();
    for (mut child, out) in children {
        assert!(child.wait().unwrap().success());
        let r = read_report(&out);
        let l = r.ledger.as_ref().unwrap();
        // The other shard's messages carry the same run's stamp: none is foreign.
        assert!(
            l.destinations.iter().all(|d| d.counts.foreign == 0),
            "{l:?}"
        );
        files.push(path_str(&out.join("run.json")));
    }
    let (r0, r1) = (
        read_report(&tmp.path().join("s0")),
        read_report(&tmp.path().join("s1")),
    );
    assert_eq!(
        r0.run_id, r1.run_id,
        "shards under one --start-at share the run id"
    );
    let merged = tmp.path().join("merged");
    let args = [
        "merge",
        &files[0],
        &files[1],
        "--out",
        &path_str(&merged),
        "--format",
        "json",
    ];
    assert_eq!(loadmix(&args), 0);
    let m = read_report(&merged);
    let l = m.ledger.as_ref().unwrap();
    let [d] = &l.destinations[..] else {
        panic!("{l:?}")
    };
    let c = &d.counts;
    let taken = h
        .broker
        .destinations()
        .values()
        .map(|c| c.dequeued)
        .sum::<u64>();
    assert_eq!(c.sent, 100);
    assert_eq!(
        (c.received + c.drained, c.lost, c.duplicated),
        (100, 0, 0),
        "{c:?}"
    );
    assert_eq!(c.received + c.drained, taken);
    // A message sent on one shard and received on another is timed on the wall clock both
    // processes share, not on either's own monotonic clock (which starts with it).
    let e2e = op(&m, "consumer.receive.e2e");
    assert!(e2e.latency_ms.p50 > 0.0, "{:?}", e2e.latency_ms);
    assert!(e2e.latency_ms.max < 10_000.0, "{:?}", e2e.latency_ms);
    h_stop(&rt, h);
    a_shard_that_says_what_its_run_did_not_do_is_refused(tmp.path(), &files);
}

/// A shard's report edited to say what its run did not do (another run's destination in
/// its ledger, a class renamed) is refused by `merge`, naming it, before anything is
/// written.
fn a_shard_that_says_what_its_run_did_not_do_is_refused(dir: &std::path::Path, files: &[String]) {
    let forged = |name: &str, change: &dyn Fn(&mut serde_json::Value)| {
        let mut v: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(&files[1]).unwrap()).unwrap();
        change(&mut v);
        let p = dir.join(name);
        std::fs::write(&p, v.to_string()).unwrap();
        let out = dir.join(format!("{name}.merged"));
        let o = loadmix_bin(&["merge", &files[0], &path_str(&p), "--out", &path_str(&out)]);
        assert!(!out.exists());
        (
            o.status.code(),
            String::from_utf8_lossy(&o.stderr).to_string(),
        )
    };
    let (code, err) = forged("elsewhere.json", &|v| {
        let mut d = v["ledger"]["destinations"][0].clone();
        d["name"] = "/queue/someone-else".into();
        v["ledger"]["destinations"].as_array_mut().unwrap().push(d);
    });
    assert_eq!(code, Some(2), "{err}");
    assert!(
        err.contains("elsewhere.json: its message ledger names \"/queue/someone-else\""),
        "{err}"
    );
    let (code, err) = forged("renamed.json", &|v| {
        v["workload"]["classes"][1]["name"] = "reader".into();
    });
    assert_eq!(code, Some(2), "{err}");
    assert!(
        err.contains("are not shards of one run: workloads"),
        "{err}"
    );
}

#[test]
fn a_window_of_unconfirmed_sends_times_each_receipt_apart_and_loses_none() {
    // 4 MiB left on the queue: more than the broker sends an auto-ack drain in one batch.
    let Setup {
        rt,
        h,
        w,
        target,
        out,
        tmp: _tmp,
    } = set_up(
        r#"
name: broker-window
run: { iterations: 1000, rounds: 1 }
users:
  - class: producer
    protocol: stomp
    count: 2
    params: { max_pending: 16 }
    mix:
      send: { weight: 1, params: { destination: "/queue/window-{run_id}", size: 2KiB } }
"#,
    );
    assert_eq!(run_to(&w, &target, &out, &[]), 0);
    let r = read_report(&out);
    let counts = h.broker.destinations();
    let c = counts.values().next().unwrap();
    let send = op(&r, "producer.send");
    let confirm = op(&r, "producer.send.confirm");
    // Every send has its receipt, timed apart; the send itself is the write.
    assert_eq!((send.successes, confirm.successes), (2000, 2000));
    assert_eq!(answer_count(confirm, "RECEIPT"), c.enqueued);
    assert_eq!(c.enqueued, 2000);
    assert!(confirm.latency_ms.p50 >= send.latency_ms.p50);
    // The drain took all 4 MiB back: nothing lost.
    assert_eq!(c.dequeued, 2000, "{c:?}");
    let l = &r.ledger.as_ref().unwrap().destinations[0].counts;
    assert_eq!((l.sent, l.drained, l.lost), (2000, 2000, 0));
    h_stop(&rt, h);
}

#[test]
fn sends_in_transactions_are_committed_every_n_and_at_the_end_each_commit_timed() {
    let Setup {
        rt,
        h,
        tmp,
        w,
        target,
        out,
    } = set_up(
        r#"
name: broker-tx
run: { iterations: 95, rounds: 1 }
users:
  - class: producer
    protocol: stomp
    count: 2
    params: { transaction: 10 }
    mix:
      send: { weight: 1, params: { destination: "/queue/tx-{run_id}", size: 256B } }
"#,
    );
    assert_eq!(run_to(&w, &target, &out, &["--keep-data"]), 0);
    let r = read_report(&out);
    let c = h.broker.destinations().into_values().next().unwrap();
    // 9 full transactions each, and the last 5 sends committed as the user ends.
    let commit = op(&r, "producer.send.commit");
    assert_eq!((commit.requests, commit.failures), (20, 0));
    assert_eq!(answer_count(commit, "RECEIPT"), 20);
    assert_eq!(op(&r, "producer.send").successes, 190);
    assert_eq!(
        c.enqueued, 190,
        "every committed send is on the queue: {c:?}"
    );
    // BEGIN, SEND and COMMIT frames are all in the bytes sent.
    assert!(op(&r, "producer.send").bytes_sent >= 190 * 256);
    // A window of unconfirmed sends does not go with transactions.
    let bad = tmp.path().join("bad.yaml");
    std::fs::write(
        &bad,
        std::fs::read_to_string(&w)
            .unwrap()
            .replace("transaction: 10", "transaction: 10, max_pending: 8"),
    )
    .unwrap();
    let o = loadmix_bin(&["validate", &path_str(&bad)]);
    assert_eq!(o.status.code(), Some(2));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("bad.yaml:") && err.contains("do not go together"),
        "{err}"
    );
    h_stop(&rt, h);
}

/// How the fake STOMP broker below misbehaves.
#[derive(Clone, Copy, PartialEq, Debug)]
enum Stomp {
    /// Answers as a broker should (CONNECTED, RECEIPT).
    Fine,
    /// Closes the connection instead of answering every third SEND.
    CloseEveryThird,
    /// Answers every SEND with bytes that are no frame.
    Malformed,
    /// Never answers a SEND.
    Silent,
    /// Sends a 1 MiB MESSAGE for a subscription nobody made before each RECEIPT.
    Unasked,
    /// Answers SENDs, and floods every SUBSCRIBE with messages that never end.
    FloodDrain,
}

/// A loopback STOMP broker of a few lines that records the head of every SEND frame.
fn fake_stomp(
    rt: &tokio::runtime::Runtime,
    how: Stomp,
) -> (
    std::net::SocketAddr,
    std::sync::Arc<std::sync::Mutex<Vec<String>>>,
) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let seen = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let log = seen.clone();
    let addr = rt.block_on(async move {
        let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = l.local_addr().unwrap();
        tokio::spawn(async move {
            let sends = std::sync::Arc::new(std::sync::atomic::AtomicU64::new(0));
            loop {
                let Ok((mut s, _)) = l.accept().await else {
                    return;
                };
                let (log, sends) = (log.clone(), sends.clone());
                tokio::spawn(async move {
                    let mut buf = Vec::new();
                    let mut chunk = [0u8; 8192];
                    loop {
                        // Whole frames only: each ends at a NUL (these bodies hold none).
                        while let Some(end) = buf.iter().position(|b| *b == 0) {
                            let frame: Vec<u8> = buf.drain(..=end).collect();
                            let text = String::from_utf8_lossy(&frame).to_string();
                            let text = text.trim_start_matches(['\n', '\r']);
                            let head = text.split("\n\n").next().unwrap_or("").to_string();
                            let reply = if head.starts_with("CONNECT") {
                                "CONNECTED\nversion:1.2\n\n\0".to_string()
                            } else if head.starts_with("SEND") {
                                log.lock().unwrap().push(head.clone());
                                let n = sends.fetch_add(1, std::sync::atomic::Ordering::SeqCst) + 1;
                                match how {
                                    Stomp::CloseEveryThird if n % 3 == 0 => return,
                                    Stomp::Malformed => "NOT A FRAME\n\n\0".to_string(),
                                    Stomp::Silent => continue,
                                    Stomp::Unasked => {
                                        let body = "x".repeat(1 << 20);
                                        let id = head.lines().find_map(|l| l.strip_prefix("receipt:")).unwrap_or("");
                                        format!("MESSAGE\nsubscription:nobodys\nmessage-id:m\ndestination:/queue/q\n\n{body}\0RECEIPT\nreceipt-id:{id}\n\n\0")
                                    }
                                    _ => {
                                        match head.lines().find_map(|l| l.strip_prefix("receipt:"))
                                        {
                                            Some(id) => format!("RECEIPT\nreceipt-id:{id}\n\n\0"),
                                            None => continue,
                                        }
                                    }
                                }
                            } else if head.starts_with("SUBSCRIBE") && matches!(how, Stomp::FloodDrain) {
                                let batch = "MESSAGE\nsubscription:drain\nmessage-id:m\ndestination:/queue/q\n\nnot the run's\0".repeat(1000);
                                // Until the client goes: it is then written to a closed socket.
                                while s.write_all(batch.as_bytes()).await.is_ok() {}
                                return;
                            } else {
                                continue;
                            };
                            if s.write_all(reply.as_bytes()).await.is_err() {
                                return;
                            }
                        }
                        match s.read(&mut chunk).await {
                            Ok(0) | Err(_) => return,
                            Ok(n) => buf.extend_from_slice(&chunk[..n]),
                        }
                    }
                });
            }
        });
        addr
    });
    (addr, seen)
}

/// One STOMP frame from the front of `buf`, binary-safe: its head, and its body (up to
/// `content-length` when given, else the NUL); `None` until it is whole.
fn take_frame(buf: &mut Vec<u8>) -> Option<(String, Vec<u8>)> {
    let start = buf.iter().position(|b| !matches!(b, b'\n' | b'\r'))?;
    buf.drain(..start);
    let head_end = buf.windows(2).position(|w| w == b"\n\n")?;
    let head = String::from_utf8_lossy(&buf[..head_end]).to_string();
    let len = head
        .lines()
        .find_map(|l| l.strip_prefix("content-length:"))
        .and_then(|n| n.parse::<usize>().ok());
    let body_end = match len {
        Some(n) => head_end + 2 + n,
        None => head_end + 2 + buf[head_end + 2..].iter().position(|b| *b == 0)?,
    };
    if buf.len() <= body_end {
        return None;
    }
    let body = buf[head_end + 2..body_end].to_vec();
    buf.drain(..=body_end);
    Some((head, body))
}

/// A loopback STOMP broker that delivers each message sent to the one subscriber, and
/// once the subscriber acknowledges it, delivers it again flagged `redelivered:true`:
/// a broker resending what was settled. Answers every `receipt:`.
fn resending_broker(rt: &tokio::runtime::Runtime) -> std::net::SocketAddr {
    use std::collections::HashMap;
    use std::sync::{Arc, Mutex};
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    type Tx = tokio::sync::mpsc::UnboundedSender<Vec<u8>>;
    #[derive(Default)]
    struct Broker {
        subscriber: Option<(Tx, String)>,
        waiting: Vec<(String, Vec<u8>)>,
        next: u64,
        given: HashMap<String, (String, Vec<u8>, bool)>,
    }
    fn message(
        b: &mut Broker,
        (dest, body): (String, Vec<u8>),
        again: bool,
    ) -> Option<(Tx, Vec<u8>)> {
        let (tx, sub) = b.subscriber.clone()?;
        b.next += 1;
        let id = format!("m{}", b.next);
        let flag = if again { "redelivered:true\n" } else { "" };
        let mut f = format!(
            "MESSAGE\nsubscription:{sub}\nmessage-id:{id}\nack:{id}\ndestination:{dest}\n{flag}content-length:{}\n\n",
            body.len()
        )
        .into_bytes();
        f.extend_from_slice(&body);
        f.push(0);
        b.given.insert(id, (dest, body, again));
        Some((tx, f))
    }
    let state = Arc::new(Mutex::new(Broker::default()));
    rt.block_on(async move {
        let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = l.local_addr().unwrap();
        tokio::spawn(async move {
            while let Ok((mut s, _)) = l.accept().await {
                let state = state.clone();
                tokio::spawn(async move {
                    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel::<Vec<u8>>();
                    let (mut buf, mut chunk) = (Vec::new(), [0u8; 8192]);
                    loop {
                        while let Some((head, body)) = take_frame(&mut buf) {
                            let header = |k: &str| {
                                head.lines()
                                    .find_map(|l| l.strip_prefix(k))
                                    .map(str::to_string)
                            };
                            let mut out: Vec<(Tx, Vec<u8>)> = Vec::new();
                            {
                                let mut b = state.lock().unwrap();
                                let command = head.lines().next().unwrap_or("");
                                match command {
                                    "CONNECT" | "STOMP" => out.push((
                                        tx.clone(),
                                        b"CONNECTED\nversion:1.2\n\n\0".to_vec(),
                                    )),
                                    "SEND" => {
                                        let sent =
                                            (header("destination:").unwrap_or_default(), body);
                                        match message(&mut b, sent.clone(), false) {
                                            Some(m) => out.push(m),
                                            None => b.waiting.push(sent),
                                        }
                                    }
                                    "SUBSCRIBE" => {
                                        b.subscriber =
                                            Some((tx.clone(), header("id:").unwrap_or_default()));
                                        for sent in std::mem::take(&mut b.waiting) {
                                            out.extend(message(&mut b, sent, false));
                                        }
                                    }
                                    "ACK" => {
                                        let id = header("id:").unwrap_or_default();
                                        if let Some((dest, body, false)) = b.given.get(&id).cloned()
                                        {
                                            out.extend(message(&mut b, (dest, body), true));
                                        }
                                    }
                                    _ => {}
                                }
                            }
                            if let Some(r) = header("receipt:") {
                                out.push((
                                    tx.clone(),
                                    format!("RECEIPT\nreceipt-id:{r}\n\n\0").into_bytes(),
                                ));
                            }
                            for (to, frame) in out {
                                let _ = to.send(frame);
                            }
                        }
                        tokio::select! {
                            Some(frame) = rx.recv() => {
                                if s.write_all(&frame).await.is_err() {
                                    return;
                                }
                            }
                            r = s.read(&mut chunk) => match r {
                                Ok(0) | Err(_) => return,
                                Ok(n) => buf.extend_from_slice(&chunk[..n]),
                            },
                        }
                    }
                });
            }
        });
        addr
    })
}

/// A broker that resends messages after the consumer acknowledged them, flagged
/// redelivered: each resend is a duplicate, not excused as a redelivery (the consumer had
/// settled the first copy).
#[test]
fn a_message_resent_after_its_acknowledgement_is_a_duplicate_though_flagged_redelivered() {
    let rt = runtime();
    let addr = resending_broker(&rt);
    let tmp = tempdir();
    let w = write_workload(
        tmp.path(),
        r#"
name: resending
run: { rounds: 1, duration: 3s, timeout: 2s }
users:
  - class: producer
    protocol: stomp
    count: 1
    iterations: 20
    mix:
      send: { weight: 1, params: { destination: "/queue/q-{run_id}", size: 64B } }
  - class: consumer
    protocol: stomp
    count: 1
    iterations: 40
    params: { subscribe: "/queue/q-{run_id}", ack: client-individual, prefetch: 1 }
    mix:
      receive: { weight: 1, params: { timeout: 2s } }
"#,
    );
    let out = out_dir(&tmp);
    let code = run_to(&w, &format!("stomp://{addr}"), &out, &["--keep-data"]);
    assert_eq!(code, 0);
    let r = read_report(&out);
    let l = r.ledger.as_ref().unwrap();
    let c = &l.destinations[0].counts;
    assert_eq!(c.sent, 20, "{c:?}");
    assert_eq!(c.received, 20, "{c:?}");
    // Every resend was flagged by the broker, and none is excused: each is a duplicate.
    assert_eq!(c.redelivered, 20, "{c:?}");
    assert_eq!(c.duplicated, 20, "every resend of a settled message: {c:?}");
    assert_eq!(c.lost, 0, "{c:?}");
}

const TWO_PRODUCERS: &str = r#"
name: fake-broker
run: { iterations: 12, rounds: 1, timeout: 300ms }
users:
  - class: producer
    protocol: stomp
    count: 2
    mix:
      send:
        weight: 1
        params:
          destination: "/queue/fake-{run_id}"
          size: 64B
          headers: { JMSType: "order-{vu}", priority: "4" }
"#;

#[test]
fn a_sends_headers_are_on_its_frame_with_their_templates_rendered() {
    let rt = runtime();
    let (addr, seen) = fake_stomp(&rt, Stomp::Fine);
    let tmp = tempdir();
    let w = write_workload(tmp.path(), TWO_PRODUCERS);
    let out = out_dir(&tmp);
    assert_eq!(
        run_to(&w, &format!("stomp://{addr}"), &out, &["--keep-data"]),
        0
    );
    let seen = seen.lock().unwrap();
    assert_eq!(seen.len(), 24);
    for vu in 0..2 {
        let n = seen
            .iter()
            .filter(|h| h.contains(&format!("\nJMSType:order-{vu}")))
            .count();
        assert_eq!(n, 12, "{seen:?}");
    }
    assert!(seen.iter().all(|h| h.contains("\npriority:4")), "{seen:?}");
}

#[test]
fn a_broker_that_closes_garbles_or_stays_silent_is_counted_and_the_run_goes_on() {
    let rt = runtime();
    for (how, class) in [
        (Stomp::CloseEveryThird, "reset"),
        (Stomp::Malformed, "body"),
        (Stomp::Silent, "timeout"),
    ] {
        let (addr, seen) = fake_stomp(&rt, how);
        let tmp = tempdir();
        let w = write_workload(tmp.path(), TWO_PRODUCERS);
        let out = out_dir(&tmp);
        run_to(&w, &format!("stomp://{addr}"), &out, &["--keep-data"]);
        let r = read_report(&out);
        let send = op(&r, "producer.send");
        // Every operation ran, each failure in its class, and the user reconnected after
        // each: the broker saw every send.
        assert_eq!(send.requests, 24, "{how:?}");
        let failed = send.errors.get(class).copied().unwrap_or(0);
        assert_eq!(failed, send.failures, "{:?}: {:?}", class, send.errors);
        assert_eq!(seen.lock().unwrap().len(), 24, "{class}");
        let expected_failures = match how {
            Stomp::CloseEveryThird => 8,
            _ => 24,
        };
        assert_eq!(send.failures, expected_failures, "{class}");
        // A new connection after each failure but a user's last.
        let opened = r.rounds[0].connections_opened;
        assert!(opened >= 2 + expected_failures - 2, "{class}: {opened}");
        // The ledger knows those sends failed: never confirmed, never lost as "stored".
        let l = &r.ledger.as_ref().unwrap().destinations[0].counts;
        assert_eq!((l.sent, l.send_failed), (24, expected_failures), "{class}");
    }
}

#[test]
fn a_consumer_acknowledging_every_fifth_message_takes_each_once_and_acks_the_rest_as_it_ends() {
    let Setup {
        rt,
        h,
        tmp,
        w,
        target,
        out,
    } = set_up(
        r#"
name: broker-ack-every
run: { iterations: 50, rounds: 1 }
users:
  - class: producer
    protocol: stomp
    count: 2
    mix:
      send: { weight: 1, params: { destination: "/queue/acks-{run_id}", size: 64B } }
  - class: consumer
    protocol: stomp
    count: 1
    iterations: 98
    params: { subscribe: "/queue/acks-{run_id}", ack: client, ack_every: 5, prefetch: 10 }
    mix:
      receive: { weight: 1, params: { timeout: 5s } }
"#,
    );
    assert_eq!(run_to(&w, &target, &out, &[]), 0);
    let r = read_report(&out);
    let c = h.broker.destinations().into_values().next().unwrap();
    assert_eq!((c.enqueued, c.dequeued), (100, 100), "{c:?}");
    // The last 3 were acknowledged as the consumer ended, not handed out again: the drain
    // took only the 2 it never had, and nothing came twice.
    let l = &r.ledger.as_ref().unwrap().destinations[0].counts;
    assert_eq!((l.received, l.drained, l.duplicated), (98, 2, 0), "{l:?}");
    // What was prefetched and never taken went back, once.
    assert_eq!(c.dispatched, c.dequeued + c.requeued, "{c:?}");
    // An N beyond the prefetch would wait for ever: refused.
    let bad = tmp.path().join("bad.yaml");
    let text = std::fs::read_to_string(&w)
        .unwrap()
        .replace("prefetch: 10", "prefetch: 2");
    std::fs::write(&bad, text).unwrap();
    let o = loadmix_bin(&["validate", &path_str(&bad)]);
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("more than the prefetch 2"));
    h_stop(&rt, h);
}

#[test]
fn requests_are_answered_by_a_service_to_their_reply_to_and_timed_to_the_reply() {
    let Setup {
        rt,
        h,
        w,
        target,
        out,
        tmp: _tmp,
    } = set_up(
        r#"
name: broker-request-reply
run: { iterations: 20, rounds: 1, timeout: 5s }
users:
  - class: client
    protocol: stomp
    count: 2
    mix:
      request: { weight: 1, params: { destination: "/queue/svc-{run_id}", size: 128B } }
  - class: service
    protocol: stomp
    count: 1
    iterations: 40
    params: { subscribe: "/queue/svc-{run_id}", prefetch: 4 }
    mix:
      reply: { weight: 1, params: { size: 256B, timeout: 5s } }
"#,
    );
    assert_eq!(run_to(&w, &target, &out, &[]), 0);
    let r = read_report(&out);
    let request = op(&r, "client.request");
    let reply = op(&r, "service.reply");
    assert_eq!((request.successes, request.failures), (40, 0));
    assert_eq!((reply.successes, reply.failures), (40, 0));
    // A request's time is to its reply: at least what the service took to answer it.
    assert!(request.latency_ms.p50 > 0.0);
    assert!(
        request.bytes_received >= 40 * 256,
        "{}",
        request.bytes_received
    );
    // The broker saw 40 requests and 40 replies, each taken once: nothing left, nothing lost.
    let counts = h.broker.destinations();
    let enqueued: u64 = counts.values().map(|c| c.enqueued).sum();
    let dequeued: u64 = counts.values().map(|c| c.dequeued).sum();
    assert_eq!((enqueued, dequeued), (80, 80), "{counts:?}");
    let l = r.ledger.as_ref().unwrap();
    assert!(l.drained);
    for d in &l.destinations {
        let c = &d.counts;
        assert_eq!(
            (c.lost, c.duplicated, c.drained),
            (0, 0, 0),
            "{}: {c:?}",
            d.name
        );
        assert_eq!(c.sent, c.received, "{}", d.name);
    }
    assert_eq!(
        l.destinations.len(),
        3,
        "the service's queue and each client's reply queue"
    );
    h_stop(&rt, h);
}

#[test]
fn the_embedded_broker_fans_a_topic_out_to_each_subscriber_and_keeps_a_durable_ones_messages() {
    let Setup {
        rt,
        h,
        tmp: _tmp,
        w,
        target,
        out,
    } = set_up(
        r#"
name: broker-topic
run: { iterations: 50, rounds: 1 }
users:
  - class: producer
    protocol: stomp
    count: 2
    mix:
      send: { weight: 1, params: { destination: "/topic/news-{run_id}", size: 64B } }
  - class: durable
    protocol: stomp
    count: 2
    iterations: 60
    params: { subscribe: "/topic/news-{run_id}", durable: "sub-{vu}", prefetch: 10 }
    mix:
      receive: { weight: 1, params: { timeout: 5s } }
  - class: listener
    protocol: stomp
    count: 1
    iterations: 100
    params: { subscribe: "/topic/news-{run_id}", ack: auto }
    mix:
      receive: { weight: 1, params: { timeout: 5s } }
"#,
    );
    assert_eq!(run_to(&w, &target, &out, &[]), 0);
    let r = read_report(&out);
    let l = r.ledger.as_ref().unwrap();
    let row = |suffix: &str| {
        l.destinations
            .iter()
            .find(|d| d.name.ends_with(suffix))
            .map(|d| d.counts.clone())
            .unwrap_or_else(|| panic!("{suffix} not in {l:?}"))
    };
    // Every subscriber has each of the 100 messages: the listener all of them, each
    // durable one 60 in the round and the other 40 from the drain, which then removed it.
    assert_eq!(row("#listener-0").received, 100);
    for sub in ["#sub-0", "#sub-1"] {
        let c = row(sub);
        assert_eq!((c.received, c.drained, c.duplicated), (60, 40, 0), "{sub}");
    }
    let topic = l
        .destinations
        .iter()
        .find(|d| !d.name.contains('#'))
        .unwrap();
    assert_eq!((topic.counts.sent, topic.counts.lost), (100, 0));
    let deleted: u64 = r.rounds.iter().map(|x| x.cleanup.deleted_queues).sum();
    assert_eq!(deleted, 2);
    // The broker counted the topic's 100 once, and each subscription's queue took its own.
    let counts = h.broker.destinations();
    let topic_counts = counts.iter().find(|(n, _)| !n.contains('#')).unwrap().1;
    assert_eq!(topic_counts.enqueued, 100, "{counts:?}");
    let copies: u64 = counts
        .iter()
        .filter(|(n, _)| n.contains('#'))
        .map(|(_, c)| c.enqueued)
        .sum();
    assert_eq!(copies, 300, "{counts:?}");
    h_stop(&rt, h);
}

#[test]
fn a_consumer_waiting_for_a_message_stops_waiting_at_the_rounds_bell() {
    // Three consumers wait up to 5 s each for messages one producer sends every 100 ms:
    // most of their receives wait. At the end of a 2 s round the waiting ones stop there,
    // instead of holding the round open for their whole timeout.
    let Setup {
        rt,
        h,
        tmp: _tmp,
        w,
        target,
        out,
    } = set_up(
        r#"
run: { duration: 2s, rounds: 2, warmup: 0s }
users:
  - class: producer
    protocol: stomp
    count: 1
    think: 100ms
    mix:
      send: { weight: 1, params: { destination: "/queue/bell-{run_id}" } }
  - class: consumer
    protocol: stomp
    count: 3
    params: { subscribe: "/queue/bell-{run_id}" }
    mix:
      receive: { weight: 1, params: { timeout: 5s } }
"#,
    );
    assert_eq!(run_to(&w, &target, &out, &[]), 0);
    let r = read_report(&out);
    for round in &r.rounds {
        assert_eq!(round.measured_s, 2.0);
        let over = round.overran_s.unwrap_or(0.0);
        assert!(
            over < 0.5,
            "round {} ran {over} s past its bell",
            round.index
        );
    }
    h_stop(&rt, h);
}

#[test]
fn returning_producers_keep_their_connection_from_session_to_session() {
    let Setup {
        rt,
        h,
        tmp: _tmp,
        w,
        target,
        out,
    } = set_up(
        r#"
name: broker-returning
run: { duration: 1s, rounds: 1, seed: 3 }
users:
  - class: producer
    protocol: stomp
    arrival: { rate: 60/s, process: constant, returning: 3 }
    mix:
      send: { weight: 1, params: { destination: "/queue/back-{run_id}", size: 64B, receipt: true } }
"#,
    );
    assert_eq!(run_to(&w, &target, &out, &[]), 0);
    let r = read_report(&out);
    let send = op(&r, "producer.send");
    // About 60 sessions, each of one send, by 3 producers that each connected once (at
    // their set-up) and disconnected once, at the round's end.
    assert!(send.successes >= 50, "{}", send.successes);
    assert_eq!(r.rounds[0].connections_opened, 3);
    let counts = h.broker.destinations();
    let enqueued: u64 = counts.values().map(|c| c.enqueued).sum();
    assert_eq!(send.successes, enqueued, "{counts:?}");
    assert_eq!(answer_count(send, "RECEIPT"), enqueued);
    h_stop(&rt, h);
}

#[test]
fn the_destinations_a_client_can_name_are_bounded_and_what_is_known_still_works() {
    use std::io::{Read, Write};
    let rt = runtime();
    let h = broker(&rt, true);
    let addr = h.stomp_addr.unwrap();
    let talk = |login: &str, bytes: &[u8]| -> String {
        let mut s = std::net::TcpStream::connect(addr).unwrap();
        s.set_read_timeout(Some(std::time::Duration::from_secs(30)))
            .unwrap();
        s.write_all(format!("CONNECT\naccept-version:1.2\nlogin:{login}\n\n\0").as_bytes())
            .unwrap();
        s.write_all(bytes).unwrap();
        let _ = s.shutdown(std::net::Shutdown::Write);
        let mut out = Vec::new();
        let _ = s.read_to_end(&mut out);
        String::from_utf8_lossy(&out).into_owned()
    };
    // One byte to each of 10,001 names from one client: the last is refused, in the
    // broker's words, each of the others holding its message.
    let mut frames = Vec::new();
    for i in 0..=10_000 {
        frames.extend_from_slice(format!("SEND\ndestination:/queue/n{i}\n\nx\0").as_bytes());
    }
    let out = talk("mallory", &frames);
    assert!(
        out.contains("ERROR") && out.contains("holds 10000 destinations in use"),
        "{out}"
    );
    let known = h.broker.destinations();
    assert_eq!(known.len(), 10_000);
    assert!(!known.contains_key("/queue/n10000"));
    // A destination it knows still takes messages; another client names new ones.
    let out = talk("mallory", b"SEND\ndestination:/queue/n7\nreceipt:ok\n\nx\0");
    assert!(out.contains("receipt-id:ok"), "{out}");
    let out = talk("alice", b"SEND\ndestination:/queue/hers\nreceipt:ok\n\nx\0");
    assert!(out.contains("receipt-id:ok"), "{out}");
    assert_eq!(h.broker.destinations()["/queue/n7"].enqueued, 2);
    // A client's destinations that are empty and unused are forgotten to make room:
    // 10,000 subscribed to and left, then one more.
    let mut frames = Vec::new();
    for i in 0..10_000 {
        frames.extend_from_slice(
            format!("SUBSCRIBE\nid:0\ndestination:/queue/e{i}\n\n\0UNSUBSCRIBE\nid:0\n\n\0")
                .as_bytes(),
        );
    }
    frames.extend_from_slice(b"SEND\ndestination:/queue/one-more\nreceipt:ok\n\nx\0");
    let out = talk("bob", &frames);
    assert!(
        out.contains("receipt-id:ok") && !out.contains("ERROR"),
        "{out}"
    );
    let known = h.broker.destinations();
    assert!(known.contains_key("/queue/one-more"));
    assert!(
        known.contains_key(loadmix::embedded::FORGOTTEN),
        "{:?}",
        known.len()
    );
    // Mallory's, which hold messages, are all still there.
    assert!((0..10_000).all(|i| known.contains_key(&format!("/queue/n{i}"))));
    h_stop(&rt, h);
}

#[test]
fn messages_a_broker_sends_for_no_subscription_of_the_user_are_its_fault_not_kept() {
    let rt = runtime();
    let (addr, seen) = fake_stomp(&rt, Stomp::Unasked);
    let tmp = tempdir();
    let w = write_workload(
        tmp.path(),
        &TWO_PRODUCERS.replace("size: 64B", "size: 64B\n          receipt: true"),
    );
    let out = out_dir(&tmp);
    run_to(&w, &format!("stomp://{addr}"), &out, &["--keep-data"]);
    let r = read_report(&out);
    let send = op(&r, "producer.send");
    // Every send reached the broker, and each failed on the MESSAGE that came unasked.
    assert_eq!(seen.lock().unwrap().len(), 24);
    assert_eq!(
        (send.requests, send.failures),
        (24, 24),
        "{:?}",
        send.errors
    );
    assert_eq!(
        send.errors.get("body").copied(),
        Some(24),
        "{:?}",
        send.errors
    );
    let why = r
        .failures
        .first()
        .map(|f| f.detail.clone())
        .unwrap_or_default();
    assert!(
        why.contains("'nobodys', which this user never made"),
        "{why}"
    );
}

#[test]
fn a_frame_begun_after_connect_must_end_within_the_header_timeout() {
    use std::io::{Read, Write};
    let rt = runtime();
    let h = rt
        .block_on(server::start(ServerConfig {
            no_auth: true,
            header_timeout: std::time::Duration::from_millis(300),
            ..ServerConfig::default()
        }))
        .unwrap();
    let mut s = std::net::TcpStream::connect(h.stomp_addr.unwrap()).unwrap();
    s.write_all(b"CONNECT\naccept-version:1.2\n\n\0").unwrap();
    // Half a SEND, then nothing: the broker ends it, though it is past its CONNECT and
    // idle between frames was allowed.
    std::thread::sleep(std::time::Duration::from_millis(500));
    s.write_all(b"SEND\ndestination:/queue/slow\n").unwrap();
    let mut out = Vec::new();
    let _ = s.read_to_end(&mut out);
    let text = String::from_utf8_lossy(&out);
    assert!(text.starts_with("CONNECTED"), "{text}");
    assert!(
        text.contains("ERROR") && text.contains("no whole frame"),
        "{text}"
    );
    h_stop(&rt, h);
}

/// What a connection says before the broker has its login is a CONNECT: a head of a
/// few KiB and no body. A frame that says it will be larger is refused at once, whatever
/// it says, and the connection holds no more than that meanwhile.
#[test]
fn before_login_a_connection_holds_no_more_than_a_connect_needs() {
    use std::io::{Read, Write};
    let rt = runtime();
    let h = broker(&rt, false);
    let addr = h.stomp_addr.unwrap();
    let refused = |head: &[u8], then: &[u8]| -> String {
        let mut s = std::net::TcpStream::connect(addr).unwrap();
        s.set_read_timeout(Some(std::time::Duration::from_secs(60)))
            .unwrap();
        let _ = s.write_all(head);
        // The broker may have closed already: what it said is what counts.
        let _ = s.write_all(then);
        let mut out = Vec::new();
        let _ = s.read_to_end(&mut out);
        String::from_utf8_lossy(&out).into_owned()
    };
    // A CONNECT that announces a 10 MB body and sends 256 KiB of it.
    let out = refused(
        b"CONNECT\naccept-version:1.2\ncontent-length:10000000\n\n",
        &vec![b'x'; 256 << 10],
    );
    assert!(
        out.starts_with("ERROR") && out.contains("before login"),
        "{out}"
    );
    // A head of 20 KiB.
    let mut head = b"CONNECT\naccept-version:1.2\n".to_vec();
    for i in 0..20 {
        head.extend_from_slice(format!("h{i}:{}\n", "y".repeat(1000)).as_bytes());
    }
    let out = refused(&head, b"\n\0");
    assert!(
        out.starts_with("ERROR") && out.contains("before login"),
        "{out}"
    );
    // A SEND before login, with a body: refused as what it is not.
    let out = refused(
        b"SEND\ndestination:/queue/a\ncontent-length:4\n\nabcd\0",
        b"",
    );
    assert!(
        out.starts_with("ERROR") && out.contains("before login"),
        "{out}"
    );
    assert!(h.broker.destinations().is_empty());
    h_stop(&rt, h);
}

/// Frames being read by all connections together hold at most a bounded number of
/// frames of the largest size: many large senders at once are refused past it, in the
/// broker's words, and what it took is given back when they go.
#[test]
fn large_frames_read_at_once_by_many_connections_are_bounded_together() {
    use std::io::{Read, Write};
    let rt = runtime();
    let h = rt
        .block_on(server::start(ServerConfig {
            no_auth: true,
            max_body: 1 << 20,
            max_per_address: 100,
            ..ServerConfig::default()
        }))
        .unwrap();
    let addr = h.stomp_addr.unwrap();
    // 24 senders each begin a 1 MiB message and stop just short of its end: together,
    // 24 of the 16 such frames the broker reads at once.
    let mut held = Vec::new();
    for _ in 0..24 {
        let mut s = std::net::TcpStream::connect(addr).unwrap();
        s.set_read_timeout(Some(std::time::Duration::from_secs(60)))
            .unwrap();
        s.write_all(b"CONNECT\naccept-version:1.2\n\n\0").unwrap();
        let _ = s.write_all(b"SEND\ndestination:/queue/big\ncontent-length:1048000\n\n");
        let _ = s.write_all(&vec![b'x'; 1_000_000]);
        held.push(s);
    }
    // The broker reads the senders' bytes in its own time: before any frame ends (and
    // gives its share back for another to take), each sender is refused or holds its
    // share. A wait for that state, not a limit on it.
    let settled = || {
        let (errors, reading) = (
            h.broker.errors.load(std::sync::atomic::Ordering::Relaxed),
            h.broker.reading.load(std::sync::atomic::Ordering::Relaxed),
        );
        errors + reading / 1_000_000 >= 24
    };
    for _ in 0..6_000 {
        if settled() {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    // Each then ends its frame, and says what the broker answered.
    let mut refused = 0;
    let mut taken = 0;
    for mut s in held {
        let _ = s.write_all(&vec![b'x'; 48_000]);
        let _ = s.write_all(b"\0DISCONNECT\nreceipt:bye\n\n\0");
        let mut out = Vec::new();
        let _ = s.read_to_end(&mut out);
        let out = String::from_utf8_lossy(&out);
        if out.contains("is reading") {
            refused += 1;
        } else if out.contains("receipt-id:bye") {
            taken += 1;
        }
    }
    assert!(refused > 0 && taken > 0, "refused {refused}, taken {taken}");
    assert!(taken <= 16, "taken {taken}");
    // Once they are gone, one more large frame is read whole.
    let mut s = std::net::TcpStream::connect(addr).unwrap();
    s.write_all(b"CONNECT\naccept-version:1.2\n\n\0").unwrap();
    s.write_all(b"SEND\ndestination:/queue/big\ncontent-length:1048000\nreceipt:r\n\n")
        .unwrap();
    s.write_all(&vec![b'x'; 1_048_000]).unwrap();
    s.write_all(b"\0DISCONNECT\nreceipt:bye\n\n\0").unwrap();
    let mut out = Vec::new();
    let _ = s.read_to_end(&mut out);
    assert!(String::from_utf8_lossy(&out).contains("receipt-id:r"));
    h_stop(&rt, h);
}

/// A raw STOMP connection for the tests that talk to the broker frame by frame.
struct Raw {
    s: std::net::TcpStream,
    pending: Vec<u8>,
}

impl Raw {
    fn connect(addr: std::net::SocketAddr) -> Raw {
        let s = std::net::TcpStream::connect(addr).unwrap();
        s.set_read_timeout(Some(std::time::Duration::from_secs(60)))
            .unwrap();
        let mut r = Raw {
            s,
            pending: Vec::new(),
        };
        r.write("CONNECT\naccept-version:1.2\n\n\0");
        assert!(r.frame().starts_with("CONNECTED"));
        r
    }

    fn write(&mut self, frames: &str) {
        use std::io::Write;
        self.s.write_all(frames.as_bytes()).unwrap();
    }

    /// The next frame, its NUL left off (the bodies here hold none).
    fn frame(&mut self) -> String {
        use std::io::Read;
        loop {
            while self.pending.first().is_some_and(|b| *b == b'\n') {
                self.pending.remove(0);
            }
            if let Some(end) = self.pending.iter().position(|b| *b == 0) {
                let f: Vec<u8> = self.pending.drain(..=end).collect();
                return String::from_utf8_lossy(&f[..end]).into_owned();
            }
            let mut buf = [0u8; 4096];
            let n = self.s.read(&mut buf).unwrap();
            assert!(n > 0, "the broker closed the connection");
            self.pending.extend_from_slice(&buf[..n]);
        }
    }

    /// Frames until the RECEIPT for `id`, which must come.
    fn until_receipt(&mut self, id: &str) -> Vec<String> {
        let mut before = Vec::new();
        loop {
            let f = self.frame();
            if f.starts_with("RECEIPT") && f.contains(&format!("receipt-id:{id}\n")) {
                return before;
            }
            assert!(!f.starts_with("ERROR"), "{f}");
            before.push(f);
        }
    }
}

fn header<'f>(frame: &'f str, name: &str) -> &'f str {
    frame
        .lines()
        .find_map(|l| l.strip_prefix(&format!("{name}:")))
        .unwrap_or_else(|| panic!("no {name} in {frame}"))
}

/// A receipt promises the message is kept: one handed to a consumer and not acknowledged
/// when the server is killed (SIGKILL: nothing of it runs after) is there, in its place,
/// when the server starts again on the same file.
#[test]
fn a_stored_message_handed_out_and_not_acknowledged_outlives_a_killed_server() {
    let tmp = tempdir();
    let db = path_str(&tmp.path().join("broker.db"));
    let stomp = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap();
    let (mut serve, _) = spawn_serve(&[
        "--no-auth",
        "--store",
        &format!("sqlite:{db}"),
        "--stomp-bind",
        &stomp.to_string(),
    ]);
    let mut producer = Raw::connect(stomp);
    let sends: String = (0..200)
        .map(|i| format!("SEND\ndestination:/queue/keep\nreceipt:s{i}\n\nm{i}\0"))
        .collect();
    producer.write(&sends);
    producer.until_receipt("s199");
    // A consumer takes 50, acknowledges 10, and is still holding the rest when the
    // server is killed.
    let mut consumer = Raw::connect(stomp);
    consumer.write(
        "SUBSCRIBE\nid:0\ndestination:/queue/keep\nack:client-individual\nactivemq.prefetchSize:50\n\n\0",
    );
    let taken: Vec<String> = (0..50).map(|_| consumer.frame()).collect();
    for (i, m) in taken.iter().take(10).enumerate() {
        let ack = header(m, "ack");
        consumer.write(&format!("ACK\nid:{ack}\nreceipt:a{i}\n\n\0"));
        consumer.until_receipt(&format!("a{i}"));
    }
    serve.kill().unwrap();
    serve.wait().unwrap();

    let rt = runtime();
    let h = rt
        .block_on(server::start(ServerConfig {
            no_auth: true,
            store: server::StoreSpec::Sqlite(db),
            ..ServerConfig::default()
        }))
        .unwrap();
    let mut reader = Raw::connect(h.stomp_addr.unwrap());
    reader.write("SEND\ndestination:/queue/keep\nreceipt:last\n\nlast\0");
    reader.until_receipt("last");
    reader.write("SUBSCRIBE\nid:0\ndestination:/queue/keep\n\n\0");
    let (mut bodies, mut again) = (Vec::new(), Vec::new());
    loop {
        let f = reader.frame();
        let (head, body) = f.split_once("\n\n").unwrap();
        if body == "last" {
            break;
        }
        if head.contains("\nredelivered:true") {
            again.push(body.to_string());
        }
        bodies.push(body.to_string());
    }
    let expected: Vec<String> = (10..200).map(|i| format!("m{i}")).collect();
    assert_eq!(
        bodies, expected,
        "every receipted message not acknowledged, in order"
    );
    // Fifty were out at once; each acknowledgement let one more go out.
    let handed_out: Vec<String> = (10..60).map(|i| format!("m{i}")).collect();
    assert_eq!(again, handed_out, "flagged: those handed out before");
    h_stop(&rt, h);
}

/// A broker that floods the teardown's drain: it stops past what the round could have left
/// there (the round's sends and a margin; in a shard, that for every shard), says why, and
/// the run ends.
#[test]
fn a_broker_flooding_the_drain_is_stopped_past_what_the_round_left() {
    // (extra flags, messages this process sent, the most its drain takes)
    let cases: [(&[&str], u64, u64); 2] = [
        (&[], 24, 24 + 10_000),
        (&["--shard", "0/2"], 12, (12 + 10_000) * 2),
    ];
    for (flags, sent, most) in cases {
        let rt = runtime();
        let (addr, seen) = fake_stomp(&rt, Stomp::FloodDrain);
        let tmp = tempdir();
        let w = write_workload(tmp.path(), TWO_PRODUCERS);
        let out = out_dir(&tmp);
        let code = run_to(&w, &format!("stomp://{addr}"), &out, flags);
        assert_eq!(code, 0);
        assert_eq!(seen.lock().unwrap().len() as u64, sent);
        let r = read_report(&out);
        let c = &r.rounds[0].cleanup;
        assert_eq!(c.drain_failures, 1, "{c:?}");
        // The next one past the bound stops it.
        assert_eq!(c.drained_messages, most + 1, "{flags:?} {c:?}");
        assert!(
            c.failed
                .iter()
                .any(|f| f.contains(&format!("more than the {most} messages"))),
            "{c:?}"
        );
        let l = r.ledger.as_ref().unwrap();
        assert!(!l.drained);
        let c = &l.destinations[0].counts;
        assert_eq!(c.foreign, most + 1);
        // What the round sent is behind the flood: not drained, not known lost.
        assert!(c.drain_stopped, "{c:?}");
        assert_eq!((c.lost, c.not_drained), (0, sent), "{c:?}");
    }
}

#[test]
fn one_address_holds_at_most_its_share_of_the_brokers_connections() {
    use std::io::{Read, Write};
    let rt = runtime();
    let h = rt
        .block_on(server::start(ServerConfig {
            no_auth: true,
            max_per_address: 3,
            ..ServerConfig::default()
        }))
        .unwrap();
    let addr = h.stomp_addr.unwrap();
    let connected = || {
        let mut s = std::net::TcpStream::connect(addr).unwrap();
        s.set_read_timeout(Some(std::time::Duration::from_secs(30)))
            .unwrap();
        s.write_all(b"CONNECT\naccept-version:1.2\n\n\0").unwrap();
        let mut got = Vec::new();
        let mut byte = [0u8; 1];
        while s.read(&mut byte).unwrap_or(0) == 1 && byte[0] != 0 {
            got.push(byte[0]);
        }
        (s, String::from_utf8_lossy(&got).into_owned())
    };
    let held: Vec<_> = (0..3).map(|_| connected()).collect();
    for (_, answer) in &held {
        assert!(answer.starts_with("CONNECTED"), "{answer}");
    }
    let (_, fourth) = connected();
    assert!(
        fourth.starts_with("ERROR") && fourth.contains("from this address"),
        "{fourth}"
    );
    // A place given back is taken again.
    drop(held);
    let again = (0..100)
        .map(|_| {
            std::thread::sleep(std::time::Duration::from_millis(20));
            connected().1
        })
        .find(|a| a.starts_with("CONNECTED"));
    assert!(again.is_some(), "no place came back");
    h_stop(&rt, h);
}

#[test]
fn broker_connections_cannot_take_the_descriptors_http_needs() {
    use std::io::{Read, Write};
    // 256 descriptors: the broker serves at most (256 - 64) / 2 = 96 connections.
    let stomp = free_port();
    let stomp_bind = format!("127.0.0.1:{stomp}");
    let (serve, port) = spawn_serve_under(Some(256), &["--no-auth", "--stomp-bind", &stomp_bind]);
    let answer = |s: &mut std::net::TcpStream| {
        let mut got = Vec::new();
        let mut byte = [0u8; 1];
        while s.read(&mut byte).unwrap_or(0) == 1 && byte[0] != 0 {
            got.push(byte[0]);
        }
        String::from_utf8_lossy(&got).into_owned()
    };
    let mut held = Vec::new();
    let (mut connected, mut refused) = (0, 0);
    for _ in 0..300 {
        let mut s = std::net::TcpStream::connect(("127.0.0.1", stomp)).unwrap();
        s.set_read_timeout(Some(std::time::Duration::from_secs(30)))
            .unwrap();
        s.write_all(b"CONNECT\naccept-version:1.2\n\n\0").unwrap();
        let a = answer(&mut s);
        match a.starts_with("CONNECTED") {
            true => connected += 1,
            false => {
                assert!(a.contains("too many connections"), "{a}");
                refused += 1;
            }
        }
        held.push(s);
    }
    assert_eq!((connected, refused), (96, 204));
    // HTTP still accepts and answers while the broker's connections are all held.
    let mut http = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
    http.set_read_timeout(Some(std::time::Duration::from_secs(30)))
        .unwrap();
    http.write_all(b"GET /cosmo/_loadmix/metrics HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        .unwrap();
    let mut page = String::new();
    let _ = http.read_to_string(&mut page);
    assert!(page.starts_with("HTTP/1.1 200"), "{page}");
    drop(held);
    stop_serve(serve);
}
