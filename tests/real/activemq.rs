//! ActiveMQ Classic 5.17 (Debian's) over STOMP, started by scripts/brokers_check.sh: for
//! each queue of a run, the broker's own EnqueueCount, DequeueCount and QueueSize (read
//! over JMX with ActiveMQ's `query` command) against loadmix's receipts, deliveries and
//! drains; on KahaDB, and on the JDBC store with its message table emptied.

use crate::broker_counts::{counts, topic_is_whole};
use crate::handed::{ask, path, run, run_with, scratch, var};

/// ActiveMQ's own counts of a set of destinations.
#[derive(Debug, PartialEq)]
struct Jmx {
    queues: u64,
    enqueued: u64,
    dequeued: u64,
    left: u64,
}

/// `activemq query` over JMX at `jmx` for destinations of `kind` (`Queue`, `Topic`)
/// named like `pattern`.
fn jmx(jmx: &str, kind: &str, pattern: &str) -> Jmx {
    let text = ask(
        &var("LOADMIX_REAL_ACTIVEMQ_QUERY"),
        &[
            "--jmxurl",
            jmx,
            &format!("-Q{kind}={pattern}"),
            "--view",
            "Name,EnqueueCount,DequeueCount,QueueSize",
        ],
    );
    let values = |key: &str| -> Vec<u64> {
        text.lines()
            .filter_map(|l| {
                l.strip_prefix(key)?
                    .strip_prefix(" = ")?
                    .trim()
                    .parse()
                    .ok()
            })
            .collect()
    };
    let enqueued = values("EnqueueCount");
    Jmx {
        queues: enqueued.len() as u64,
        enqueued: enqueued.iter().sum(),
        dequeued: values("DequeueCount").iter().sum(),
        left: values("QueueSize").iter().sum(),
    }
}

mod kahadb {
    use super::*;

    fn target() -> String {
        var("LOADMIX_REAL_ACTIVEMQ_STOMP")
    }

    fn jmx_url() -> String {
        var("LOADMIX_REAL_ACTIVEMQ_JMX")
    }

    #[test]
    #[ignore = "handed ActiveMQ by scripts/brokers_check.sh"]
    fn receipts_and_deliveries_equal_the_brokers_enqueue_and_dequeue_counts() {
        let tmp = scratch();
        let r = run(
            tmp.path(),
            &[
                "fixtures/workloads/broker-check.yaml",
                "--target",
                &target(),
            ],
        );
        let c = counts(
            &r,
            ("producer.send", "RECEIPT"),
            ("consumer.receive", "MESSAGE"),
        );
        let amq = jmx(&jmx_url(), "Queue", &format!("check-{}-*", c.run_id));
        eprintln!("loadmix {c:?} · ActiveMQ {amq:?}");
        assert_eq!(c.failures, 0);
        assert_eq!(c.acknowledged, 400);
        assert_eq!(c.received, 320);
        assert_eq!(c.drained, 80);
        assert_eq!(amq.queues, 2);
        assert_eq!(amq.enqueued, c.acknowledged);
        assert_eq!(amq.dequeued, c.received + c.drained);
        assert_eq!(amq.left, 0);
    }

    #[test]
    #[ignore = "handed ActiveMQ by scripts/brokers_check.sh"]
    fn sends_in_transactions_of_ten_are_forty_commits_and_all_enqueued() {
        let tmp = scratch();
        let r = run(
            tmp.path(),
            &[
                "fixtures/workloads/broker-check.yaml",
                "--target",
                &target(),
                "--set",
                "users.producer.params.transaction=10",
            ],
        );
        let c = counts(
            &r,
            ("producer.send.commit", "RECEIPT"),
            ("consumer.receive", "MESSAGE"),
        );
        let amq = jmx(&jmx_url(), "Queue", &format!("check-{}-*", c.run_id));
        eprintln!("loadmix {c:?} · ActiveMQ {amq:?}");
        assert_eq!(c.failures, 0);
        assert_eq!(c.acknowledged, 40, "commits");
        assert_eq!(amq.enqueued, 400);
        assert_eq!(amq.dequeued, c.received + c.drained);
        assert_eq!(amq.left, 0);
    }

    #[test]
    #[ignore = "handed ActiveMQ by scripts/brokers_check.sh"]
    fn each_request_is_answered_to_its_reply_to_and_taken_once() {
        let tmp = scratch();
        let r = run(
            tmp.path(),
            &[
                "fixtures/workloads/broker-request-reply.yaml",
                "--target",
                &target(),
            ],
        );
        let c = counts(
            &r,
            ("client.request", "MESSAGE"),
            ("service.reply", "MESSAGE"),
        );
        let amq = jmx(&jmx_url(), "Queue", &format!("*{}*", c.run_id));
        eprintln!("loadmix {c:?} · ActiveMQ {amq:?}");
        assert_eq!(c.failures, 0);
        assert_eq!(c.acknowledged, 40, "replies");
        assert_eq!(c.received, 40, "requests served");
        assert_eq!(amq.queues, 3);
        assert_eq!(amq.enqueued, 80);
        assert_eq!(amq.dequeued, 80);
        assert_eq!(amq.left, 0);
    }

    #[test]
    #[ignore = "handed ActiveMQ by scripts/brokers_check.sh"]
    fn durable_topic_subscribers_are_drained_and_removed_after_the_run() {
        let tmp = scratch();
        let r = run(
            tmp.path(),
            &[
                "fixtures/workloads/broker-topic.yaml",
                "--target",
                &target(),
            ],
        );
        let copies = topic_is_whole(&r);
        let amq = jmx(&jmx_url(), "Topic", &format!("news-{}", r.run_id));
        let subscriptions = ask(
            &var("LOADMIX_REAL_ACTIVEMQ_QUERY"),
            &[
                "--jmxurl",
                &jmx_url(),
                "--objname",
                "type=Broker,brokerName=check,*",
                "--view",
                "SubscriptionName",
            ],
        )
        .lines()
        .filter(|l| l.contains("SubscriptionName = sub-"))
        .count();
        eprintln!(
            "loadmix {copies} copies · ActiveMQ {amq:?}, {subscriptions} durable subscriptions"
        );
        assert_eq!(copies, 200);
        assert_eq!(amq.enqueued, 100);
        assert_eq!(amq.dequeued, 200);
        assert_eq!(subscriptions, 0);
    }

    #[test]
    #[ignore = "handed ActiveMQ by scripts/brokers_check.sh"]
    fn a_refused_login_stops_the_run_at_preflight_in_activemqs_words() {
        let tmp = scratch();
        let ran = run_with(
            tmp.path(),
            &[
                "fixtures/workloads/broker-check.yaml",
                "--target",
                &target(),
                "--user",
                "loadmix",
            ],
            &[("LOADMIX_PASSWORD", "wrong-passcode")],
        );
        assert_eq!(ran.code, 3, "{}", ran.stderr);
        assert!(
            ran.stderr
                .contains("User name [loadmix] or password is invalid"),
            "{}",
            ran.stderr
        );
        assert!(
            !ran.stderr.contains("wrong-passcode"),
            "the secret reached the output"
        );
    }
}

mod jdbc {
    use super::*;

    #[test]
    #[ignore = "handed ActiveMQ on PostgreSQL by scripts/brokers_check.sh"]
    fn counts_equal_the_brokers_and_its_message_table_is_emptied() {
        let tmp = scratch();
        let r = run(
            tmp.path(),
            &[
                "fixtures/workloads/broker-check.yaml",
                "--target",
                &var("LOADMIX_REAL_ACTIVEMQ_JDBC_STOMP"),
            ],
        );
        let c = counts(
            &r,
            ("producer.send", "RECEIPT"),
            ("consumer.receive", "MESSAGE"),
        );
        let amq = jmx(
            &var("LOADMIX_REAL_ACTIVEMQ_JDBC_JMX"),
            "Queue",
            &format!("check-{}-*", c.run_id),
        );
        let rows = ask(
            &path("LOADMIX_REAL_ACTIVEMQ_JDBC_ROWS")
                .display()
                .to_string(),
            &[],
        );
        eprintln!(
            "loadmix {c:?} · ActiveMQ (JDBC) {amq:?}, {} rows in activemq_msgs",
            rows.trim()
        );
        assert_eq!(c.failures, 0);
        assert_eq!(c.acknowledged, 400);
        assert_eq!(amq.queues, 2);
        assert_eq!(amq.enqueued, c.acknowledged);
        assert_eq!(amq.dequeued, c.received + c.drained);
        assert_eq!(amq.left, 0);
        assert_eq!(rows.trim(), "0");
    }
}
