//! What every broker check reads from loadmix's side: the run's counts from its typed
//! report, and the ledger's word that every destination was drained and nothing was
//! lost, doubled or foreign.

use loadmix::reports::Report;

use crate::handed::answers;

/// loadmix's side of one broker run.
#[derive(Debug)]
pub(crate) struct Counts {
    pub(crate) run_id: String,
    /// Answers that acknowledge a send (receipts, confirms, commits).
    pub(crate) acknowledged: u64,
    /// Messages the consumers received.
    pub(crate) received: u64,
    /// Failed operations.
    pub(crate) failures: u64,
    /// Messages the drain took after the rounds.
    pub(crate) drained: u64,
}

/// The counts of a run whose sends are acknowledged by `(op, answer)` and whose receipts
/// are `(op, answer)`, after checking its ledger is whole.
pub(crate) fn counts(r: &Report, sent: (&str, &str), received: (&str, &str)) -> Counts {
    ledger_is_whole(r);
    Counts {
        run_id: r.run_id.clone(),
        acknowledged: answers(r, sent.0, sent.1),
        received: answers(r, received.0, received.1),
        failures: r.summary.failures(),
        drained: drained(r),
    }
}

/// Messages the drains after the rounds took.
pub(crate) fn drained(r: &Report) -> u64 {
    r.rounds.iter().map(|x| x.cleanup.drained_messages).sum()
}

/// Every destination drained; nothing lost, doubled or foreign; everything sent either
/// received or drained.
pub(crate) fn ledger_is_whole(r: &Report) {
    let l = r
        .ledger
        .as_ref()
        .expect("a broker run's report has a ledger");
    assert!(l.drained, "not every destination was drained: {l:?}");
    for d in &l.destinations {
        let c = &d.counts;
        assert_eq!(c.lost, 0, "{}: {c:?}", d.name);
        assert_eq!(c.duplicated, 0, "{}: {c:?}", d.name);
        assert_eq!(c.foreign, 0, "{}: {c:?}", d.name);
        assert_eq!(c.sent, c.received + c.drained, "{}: {c:?}", d.name);
        // A consumer that ends its iterations hands back what it had prefetched (at most
        // 10, the prefetch of the AMQP check), and the other takes those after later ones;
        // not every broker flags them redelivered. Anything more is a broker out of order.
        assert!(c.out_of_order <= 2 * 10, "{}: {c:?}", d.name);
    }
}

/// The topic check (fixtures/workloads/broker-topic.yaml): 100 sent, each durable
/// subscriber took 60 and the drain the other 40, both subscriptions removed. The copies
/// the two subscribers took in all.
pub(crate) fn topic_is_whole(r: &Report) -> u64 {
    assert_eq!(
        r.summary.failures(),
        0,
        "{:?}",
        &r.failures[..r.failures.len().min(3)]
    );
    let l = r.ledger.as_ref().expect("a ledger");
    assert!(l.drained, "{l:?}");
    let row = |sub: Option<&str>| {
        l.destinations
            .iter()
            .find(|d| d.name.split_once('#').map(|(_, s)| s) == sub)
            .unwrap_or_else(|| panic!("no ledger row for {sub:?}: {l:?}"))
    };
    let topic = row(None);
    assert_eq!(topic.counts.sent, 100, "{topic:?}");
    assert_eq!(topic.counts.lost, 0, "{topic:?}");
    let mut copies = 0;
    for sub in ["sub-0", "sub-1"] {
        let c = &row(Some(sub)).counts;
        assert_eq!(
            (c.received, c.drained, c.duplicated),
            (60, 40, 0),
            "{sub}: {c:?}"
        );
        copies += c.received + c.drained;
    }
    let deleted: u64 = r.rounds.iter().map(|x| x.cleanup.deleted_queues).sum();
    assert_eq!(deleted, 2, "durable subscriptions removed by the teardown");
    copies
}
