//! RabbitMQ 3.10 (Debian's) with its STOMP and Prometheus plugins, started by
//! scripts/brokers_check.sh: over STOMP and AMQP 0-9-1 (plain and TLS), what the broker
//! counted (its Prometheus endpoint, `rabbitmqctl`) against what loadmix reports; its
//! refusals in its own words; a restart under a run counted and survived.

use std::collections::BTreeMap;

use crate::broker_counts::{Counts, counts, topic_is_whole};
use crate::handed::{
    ask, get, loadmix, op, port_of, prom_samples, prom_sum, run, run_code, run_with, scratch,
    settle, var, wait_port,
};

fn stomp() -> String {
    var("LOADMIX_REAL_RABBITMQ_STOMP")
}

fn amqp() -> String {
    var("LOADMIX_REAL_RABBITMQ_AMQP")
}

fn rabbitmqctl(args: &[&str]) -> String {
    ask(&var("LOADMIX_REAL_RABBITMQCTL"), args)
}

/// RabbitMQ's global message counters, read from its Prometheus page.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
struct Totals {
    received: u64,
    confirmed: u64,
    acknowledged: u64,
    /// Taken with automatic acknowledgement: what loadmix's drain takes.
    auto_ack: u64,
}

impl Totals {
    fn read() -> (Totals, String) {
        let page = get(&var("LOADMIX_REAL_RABBITMQ_PROMETHEUS"));
        let n = |s: &str| prom_sum(&page, s) as u64;
        let t = Totals {
            received: n("rabbitmq_global_messages_received_total"),
            confirmed: n("rabbitmq_global_messages_confirmed_total"),
            acknowledged: n("rabbitmq_global_messages_acknowledged_total"),
            auto_ack: n("rabbitmq_global_messages_delivered_consume_auto_ack_total"),
        };
        (t, page)
    }

    /// What the broker counted since `before`.
    fn since(self, before: Totals) -> Totals {
        Totals {
            received: self.received - before.received,
            confirmed: self.confirmed - before.confirmed,
            acknowledged: self.acknowledged - before.acknowledged,
            auto_ack: self.auto_ack - before.auto_ack,
        }
    }
}

/// The messages left in each of a run's queues (`check-RUN-*`), by queue.
fn queues_left(page: &str, run_id: &str) -> BTreeMap<String, u64> {
    let prefix = format!("check-{run_id}-");
    prom_samples(page, "rabbitmq_queue_messages")
        .filter_map(|(labels, v)| {
            let q = labels.split("queue=\"").nth(1)?.split('"').next()?;
            q.starts_with(&prefix).then(|| (q.to_string(), v as u64))
        })
        .collect()
}

/// RabbitMQ refreshes its figures every few seconds: read until what it counted since
/// `before` is what loadmix expects, or a minute has passed; the last reading.
fn counted_since(before: Totals, expect: Totals) -> (Totals, String) {
    settle(
        600,
        || {
            let (t, page) = Totals::read();
            (t.since(before), page)
        },
        |(t, _)| *t == expect,
    )
}

mod over_stomp {
    use super::*;

    #[test]
    #[ignore = "handed RabbitMQ by scripts/brokers_check.sh"]
    fn receipts_deliveries_and_drains_equal_the_brokers_counters() {
        let tmp = scratch();
        let (before, _) = Totals::read();
        let r = run(
            tmp.path(),
            &["fixtures/workloads/broker-check.yaml", "--target", &stomp()],
        );
        let c = counts(
            &r,
            ("producer.send", "RECEIPT"),
            ("consumer.receive", "MESSAGE"),
        );
        // RabbitMQ's STOMP plugin answers a receipted SEND once the message is confirmed:
        // each receipt is one of its publisher confirms.
        let expect = Totals {
            received: c.acknowledged,
            confirmed: c.acknowledged,
            acknowledged: c.received,
            auto_ack: c.drained,
        };
        let (seen, page) = counted_since(before, expect);
        let left = queues_left(&page, &c.run_id);
        eprintln!("loadmix {c:?} · RabbitMQ {seen:?}, left {left:?}");
        assert_eq!(c.failures, 0);
        assert_eq!(c.acknowledged, 400);
        assert_eq!(c.drained, 80);
        assert_eq!(seen, expect);
        assert_eq!(left.len(), 2, "the run's two queues");
        assert_eq!(left.values().sum::<u64>(), 0);
    }

    #[test]
    #[ignore = "handed RabbitMQ by scripts/brokers_check.sh"]
    fn each_request_is_answered_once() {
        let tmp = scratch();
        let r = run(
            tmp.path(),
            &[
                "fixtures/workloads/broker-request-reply.yaml",
                "--target",
                &stomp(),
            ],
        );
        let c = counts(
            &r,
            ("client.request", "MESSAGE"),
            ("service.reply", "MESSAGE"),
        );
        assert_eq!(c.failures, 0);
        assert_eq!(c.acknowledged, 40, "replies");
        assert_eq!(c.received, 40, "requests served");
    }

    #[test]
    #[ignore = "handed RabbitMQ by scripts/brokers_check.sh"]
    fn durable_topic_subscriptions_are_drained_and_removed() {
        let tmp = scratch();
        let r = run(
            tmp.path(),
            &["fixtures/workloads/broker-topic.yaml", "--target", &stomp()],
        );
        let copies = topic_is_whole(&r);
        // The broker's own list, not its metrics, which lag by seconds.
        let queues = rabbitmqctl(&["list_queues", "name", "-q"]);
        let left = queues
            .lines()
            .filter(|l| l.starts_with("stomp-subscription-"))
            .count();
        assert_eq!(copies, 200);
        assert_eq!(left, 0, "subscription queues left: {queues}");
    }
}

mod over_amqp {
    use super::*;

    /// The AMQP check workload with `extra` settings: loadmix's counts (confirms counted
    /// under `confirms`) and what RabbitMQ counted meanwhile, once it settled on them.
    fn check_run(confirms: &str, extra: &[&str]) -> (Counts, Totals, String) {
        let tmp = scratch();
        let (before, _) = Totals::read();
        let mut args = vec!["fixtures/workloads/broker-check-amqp.yaml", "--target"];
        let target = amqp();
        args.push(&target);
        for e in extra {
            args.extend(["--set", e]);
        }
        let r = run(tmp.path(), &args);
        let c = counts(
            &r,
            (confirms, "basic.ack"),
            ("consumer.consume", "basic.deliver"),
        );
        let expect = Totals {
            received: c.acknowledged,
            confirmed: c.acknowledged,
            acknowledged: c.received,
            auto_ack: c.drained,
        };
        let (seen, page) = counted_since(before, expect);
        eprintln!("loadmix {c:?} · RabbitMQ {seen:?}");
        (c, seen, page)
    }

    fn confirmed_delivered_and_drained_equal_the_brokers(
        queue_type: &str,
        confirms: &str,
        extra: &[&str],
    ) {
        let q = format!("users.producer.params.queue_type={queue_type}");
        let cq = format!("users.consumer.params.queue_type={queue_type}");
        let mut all = vec![q.as_str(), cq.as_str()];
        all.extend_from_slice(extra);
        let (c, seen, page) = check_run(confirms, &all);
        assert_eq!(c.failures, 0);
        assert_eq!(c.acknowledged, 400, "confirmed");
        assert_eq!(c.received, 320, "delivered");
        assert_eq!(c.drained, 80);
        assert_eq!(seen.received, c.acknowledged);
        assert_eq!(seen.confirmed, c.acknowledged);
        assert_eq!(seen.acknowledged, c.received);
        assert_eq!(seen.auto_ack, c.drained);
        assert!(
            queues_left(&page, &c.run_id).is_empty(),
            "the drain deletes the run's queues"
        );
    }

    #[test]
    #[ignore = "handed RabbitMQ by scripts/brokers_check.sh"]
    fn confirms_on_a_classic_queue_equal_the_brokers_counters() {
        // The queue is named with the run's id: declared without a passive ask first, so
        // the broker's log gains no `not_found` channel error from it.
        let log = var("LOADMIX_REAL_RABBITMQ_LOG");
        let not_found = || {
            std::fs::read_to_string(&log)
                .unwrap_or_else(|e| panic!("RabbitMQ's log {log}: {e}"))
                .matches("not_found")
                .count()
        };
        let before = not_found();
        confirmed_delivered_and_drained_equal_the_brokers("classic", "producer.publish", &[]);
        assert_eq!(not_found(), before, "not_found lines added to {log}");
    }

    #[test]
    #[ignore = "handed RabbitMQ by scripts/brokers_check.sh"]
    fn confirms_on_a_quorum_queue_equal_the_brokers_counters() {
        confirmed_delivered_and_drained_equal_the_brokers("quorum", "producer.publish", &[]);
    }

    #[test]
    #[ignore = "handed RabbitMQ by scripts/brokers_check.sh"]
    fn a_window_of_32_unconfirmed_and_every_fifth_ack_equal_the_brokers_counters() {
        confirmed_delivered_and_drained_equal_the_brokers(
            "classic",
            "producer.publish.confirm",
            &[
                "users.producer.params.max_pending=32",
                "users.consumer.params.ack_every=5",
            ],
        );
    }

    #[test]
    #[ignore = "handed RabbitMQ by scripts/brokers_check.sh"]
    fn publishes_in_transactions_of_ten_are_forty_commits_every_message_on_the_broker_once() {
        let tmp = scratch();
        let (before, _) = Totals::read();
        let r = run(
            tmp.path(),
            &[
                "fixtures/workloads/broker-check-amqp.yaml",
                "--target",
                &amqp(),
                "--set",
                "users.producer.params.transaction=10",
                "--set",
                "users.producer.mix.publish.params.confirm=false",
            ],
        );
        let c = counts(
            &r,
            ("producer.publish.commit", "tx.commit-ok"),
            ("consumer.consume", "basic.deliver"),
        );
        let expect = Totals {
            received: 400,
            confirmed: 0,
            acknowledged: c.received,
            auto_ack: c.drained,
        };
        let (seen, _) = counted_since(before, expect);
        eprintln!("loadmix {c:?} · RabbitMQ {seen:?}");
        assert_eq!(c.failures, 0);
        assert_eq!(c.acknowledged, 40, "commits");
        assert_eq!(c.received + c.drained, 400);
        assert_eq!(seen, expect);
    }

    #[test]
    #[ignore = "handed RabbitMQ by scripts/brokers_check.sh"]
    fn requests_are_answered_once_over_direct_reply_to() {
        let tmp = scratch();
        let r = run(
            tmp.path(),
            &[
                "fixtures/workloads/broker-request-reply-amqp.yaml",
                "--target",
                &amqp(),
            ],
        );
        assert_eq!(r.summary.failures(), 0, "{:?}", r.failures.first());
        assert_eq!(op(&r, "client.request").successes, 40);
        assert_eq!(op(&r, "service.reply").successes, 40);
        let l = r.ledger.as_ref().expect("a ledger");
        let row = |f: &dyn Fn(&str) -> bool| {
            l.destinations
                .iter()
                .find(|d| f(&d.name))
                .unwrap_or_else(|| panic!("{l:?}"))
                .counts
                .clone()
        };
        let replies = row(&|n| n == "amq.rabbitmq.reply-to");
        assert_eq!(
            (
                replies.sent,
                replies.received,
                replies.lost,
                replies.duplicated
            ),
            (40, 40, 0, 0)
        );
        let service = row(&|n| n.starts_with("svc-"));
        assert_eq!((service.sent, service.received, service.lost), (40, 40, 0));
    }

    #[test]
    #[ignore = "handed RabbitMQ by scripts/brokers_check.sh"]
    fn over_tls_the_brokers_certificate_is_checked_against_the_ca_given() {
        let tmp = scratch();
        let target = var("LOADMIX_REAL_RABBITMQ_AMQPS");
        let ca = var("LOADMIX_REAL_RABBITMQ_CA");
        let r = run(
            &tmp.path().join("trusted"),
            &[
                "fixtures/workloads/broker-check-amqp.yaml",
                "--target",
                &target,
                "--ca-cert",
                &ca,
            ],
        );
        let c = counts(
            &r,
            ("producer.publish", "basic.ack"),
            ("consumer.consume", "basic.deliver"),
        );
        assert_eq!(c.failures, 0);
        assert_eq!(c.acknowledged, 400);
        assert_eq!(c.received + c.drained, 400);
        let untrusted = run_code(
            &tmp.path().join("untrusted"),
            &[
                "fixtures/workloads/broker-check-amqp.yaml",
                "--target",
                &target,
            ],
        );
        assert_eq!(untrusted.code, 3, "{}", untrusted.stderr);
        let said = untrusted.stderr.to_lowercase();
        assert!(
            ["certificate", "unknown", "issuer"]
                .iter()
                .any(|w| said.contains(w)),
            "{}",
            untrusted.stderr
        );
    }

    #[test]
    #[ignore = "handed RabbitMQ by scripts/brokers_check.sh"]
    fn a_queue_declared_with_another_type_is_counted_in_rabbitmqs_words() {
        let tmp = scratch();
        let w = tmp.path().join("clash.yaml");
        std::fs::write(
            &w,
            r#"run: { iterations: 3, timeout: 5s }
users:
  - class: first
    protocol: amqp
    count: 1
    params: { queue: "clash-{run_id}", queue_type: quorum }
    mix:
      publish: { weight: 1 }
  - class: second
    protocol: amqp
    count: 1
    params: { queue: "clash-{run_id}", queue_type: classic }
    mix:
      publish: { weight: 1 }
"#,
        )
        .unwrap();
        let w = w.display().to_string();
        run_code(&tmp.path().join("out"), &[&w, "--target", &amqp()]);
        let r = crate::handed::report(&tmp.path().join("out"));
        let refusal = r
            .summary
            .ops
            .iter()
            .flat_map(|o| &o.answers)
            .find(|a| a.code == Some(406))
            .unwrap_or_else(|| panic!("no 406 counted: {:?}", r.summary.ops));
        let reason = refusal.reason.as_deref().unwrap_or_default();
        assert!(reason.contains("PRECONDITION_FAILED"), "{reason}");
        assert!(refusal.count > 0);
    }

    #[test]
    #[ignore = "handed RabbitMQ by scripts/brokers_check.sh"]
    fn the_starter_loadmix_new_writes_runs_without_a_failure() {
        let tmp = scratch();
        let w = tmp.path().join("starter.yaml").display().to_string();
        let made = loadmix(&["new", "--target", &amqp(), "--quiet", "-o", &w], &[]);
        assert_eq!(made.code, 0, "{}", made.stderr);
        let r = run(
            &tmp.path().join("out"),
            &[&w, "--duration", "3s", "--rounds", "1"],
        );
        assert_eq!(r.summary.failures(), 0, "{:?}", r.failures.first());
        assert!(op(&r, "producer.publish").successes > 0);
        assert!(op(&r, "consumer.consume").successes > 0);
    }

    #[test]
    #[ignore = "handed RabbitMQ by scripts/brokers_check.sh"]
    fn a_refused_login_is_exit_3_with_access_refused() {
        let tmp = scratch();
        let ran = run_with(
            tmp.path(),
            &[
                "fixtures/workloads/broker-check-amqp.yaml",
                "--target",
                &amqp(),
                "--user",
                "nobody",
            ],
            &[("LOADMIX_PASSWORD", "wrong")],
        );
        assert_eq!(ran.code, 3, "{}", ran.stderr);
        assert!(ran.stderr.contains("ACCESS_REFUSED"), "{}", ran.stderr);
    }
}

mod restarted {
    use super::*;

    fn connections() -> usize {
        rabbitmqctl(&["-q", "list_connections", "--no-table-headers", "name"])
            .lines()
            .filter(|l| !l.trim().is_empty())
            .count()
    }

    #[test]
    #[ignore = "handed RabbitMQ by scripts/brokers_check.sh"]
    fn a_restart_under_a_run_is_counted_the_users_reconnect_and_nothing_confirmed_is_lost() {
        let tmp = scratch();
        let out = tmp.path().display().to_string();
        let target = amqp();
        let mut run = std::process::Command::new(env!("CARGO_BIN_EXE_loadmix"))
            .current_dir(crate::handed::root())
            .args([
                "run",
                "fixtures/workloads/broker-restart.yaml",
                "--target",
                &target,
            ])
            .args(["--quiet", "--out", &out])
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .expect("loadmix starts");
        // Restart once the run's four users are connected and a second of their traffic
        // has passed (a fixed sleep restarted the broker before they were, on a slow
        // machine, so no user had to reconnect).
        let connected = settle(300, connections, |n| *n >= 4);
        assert!(connected >= 4, "the restart run's users never connected");
        std::thread::sleep(std::time::Duration::from_secs(1));
        rabbitmqctl(&["stop_app"]);
        rabbitmqctl(&["start_app"]);
        wait_port(port_of(&target));
        run.wait().expect("loadmix ends");
        let r = crate::handed::report(tmp.path());
        let t = &r.summary;
        let errors: std::collections::BTreeSet<&String> =
            r.summary.ops.iter().flat_map(|o| o.errors.keys()).collect();
        eprintln!(
            "restarted mid-run: {} ok, {} failed ({errors:?}), {} connections",
            t.successes(),
            t.failures(),
            r.rounds[0].connections_opened
        );
        assert!(t.failures() > 0, "the restart was not seen");
        for e in &errors {
            assert!(
                ["reset", "connect", "timeout", "status"].contains(&e.as_str()),
                "{e}"
            );
        }
        let round = &r.rounds[0];
        assert!(round.connections_opened > 4, "the users reconnected");
        let late: u64 = round
            .ops
            .iter()
            .flat_map(|o| o.timeline.iter().rev().take(3))
            .map(|b| b.successes)
            .sum();
        assert!(late > 0, "nothing succeeded after the restart");
        for d in &r.ledger.as_ref().expect("a ledger").destinations {
            let c = &d.counts;
            assert_eq!(c.lost, c.lost_failed, "a confirmed message was lost: {d:?}");
            // At least once: a delivery whose ack the restart cut off comes again, flagged
            // as redelivered. A copy that is not so flagged is a real duplicate.
            assert!(c.duplicated <= c.redelivered, "{d:?}");
        }
    }
}
