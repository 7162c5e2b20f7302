//! The report's sums over operations, one rule for every writer of a report (a run,
//! `merge`): `total` adds up the requests answered; a workload whose classes carry
//! messages also gets `sent` (messages sent or published: their write or confirm
//! latency) and `received` (messages taken: their wait), never added into `total`, as
//! PerfTest reports its sending and receiving rates apart. Which operation goes where is
//! its typed operation's word (`ClassKind::tally`). The headline (what a
//! sweep, a drift test, a comparison's first row and the server's cost per operation
//! read) is `total` when it has requests, else `sent`, else `received`.

use crate::metrics::OpStats;
use crate::workload::Tally;

use super::{OpReport, RoundReport, Summary};

/// The sums' figures while they are added up.
#[derive(Debug, Clone, Default)]
pub(crate) struct Sums {
    pub total: OpStats,
    /// `Some` when the workload carries messages.
    pub sent: Option<OpStats>,
    pub received: Option<OpStats>,
}

impl Sums {
    /// Empty sums; `messages` when any class of the workload carries messages.
    pub(crate) fn new(messages: bool) -> Sums {
        Sums {
            total: OpStats::default(),
            sent: messages.then(OpStats::default),
            received: messages.then(OpStats::default),
        }
    }

    /// Adds one operation's figures to the sum its tally names.
    pub(crate) fn add(&mut self, tally: Tally, s: &OpStats) {
        let into = match tally {
            Tally::Total => Some(&mut self.total),
            Tally::Sent => self.sent.as_mut(),
            Tally::Received => self.received.as_mut(),
            Tally::Apart => None,
        };
        if let Some(into) = into {
            into.merge(s);
        }
    }

    /// The headline's successes: what the server's cost is divided by.
    pub(crate) fn headline_successes(&self) -> u64 {
        let pick = [
            Some(&self.total),
            self.sent.as_ref(),
            self.received.as_ref(),
        ]
        .into_iter()
        .flatten()
        .find(|s| s.requests > 0);
        pick.map_or(0, |s| s.successes)
    }
}

/// The names a threshold or a comparison can give a sum.
pub(crate) const NAMES: [&str; 3] = ["total", "sent", "received"];

/// Whether a row of that name is a sum (operations are `class.label`).
pub(crate) fn is_sum(name: &str) -> bool {
    NAMES.contains(&name)
}

/// A round's or the run's rows as the sums see them.
struct Rows<'a> {
    ops: &'a [OpReport],
    total: &'a OpReport,
    sent: Option<&'a OpReport>,
    received: Option<&'a OpReport>,
}

impl<'a> Rows<'a> {
    fn new(
        ops: &'a [OpReport],
        total: &'a OpReport,
        sent: &'a Option<OpReport>,
        received: &'a Option<OpReport>,
    ) -> Rows<'a> {
        Rows {
            ops,
            total,
            sent: sent.as_ref(),
            received: received.as_ref(),
        }
    }

    /// `total`, `sent`, `received`, in [`NAMES`]' order.
    fn sums(&self) -> [Option<&'a OpReport>; 3] {
        [Some(self.total), self.sent, self.received]
    }

    /// The first of the sums with requests, in the order total, sent, received; `total`
    /// when none has any.
    fn headline(&self) -> &'a OpReport {
        let mut with_requests = self.sums().into_iter().flatten().filter(|o| o.requests > 0);
        with_requests.next().unwrap_or(self.total)
    }

    /// The sums a table shows: `total` unless the workload carries messages and `total`
    /// has nothing, then `sent` and `received`.
    fn shown(&self) -> Vec<&'a OpReport> {
        let messages = self.sent.is_some() || self.received.is_some();
        let mut v = Vec::new();
        if self.total.requests > 0 || !messages {
            v.push(self.total);
        }
        v.extend(self.sent);
        v.extend(self.received);
        v
    }

    fn sum(&self, name: &str) -> Option<&'a OpReport> {
        NAMES
            .iter()
            .position(|n| *n == name)
            .and_then(|k| self.sums()[k])
    }

    /// The successes of what `name` names among these rows: a sum, an operation
    /// (`class.label`), or a class (its operations, steps aside).
    fn successes_of(&self, name: &str) -> Option<u64> {
        if is_sum(name) {
            return self.sum(name).map(|o| o.successes);
        }
        if let Some(o) = self.ops.iter().find(|o| o.op == name) {
            return Some(o.successes);
        }
        let of_class: Vec<&OpReport> = self
            .ops
            .iter()
            .filter(|o| o.class.as_deref() == Some(name))
            .filter(|o| {
                let label = o.op.split_once('.').map_or("", |(_, l)| l);
                !crate::workload::is_step_label(label)
            })
            .collect();
        (!of_class.is_empty()).then(|| of_class.iter().map(|o| o.successes).sum())
    }

    /// What each scraped series' increase is divided by: the successes of what its
    /// `per` names, or of the headline sum.
    fn denominators(&self, metrics: &[super::ServerSeries]) -> Vec<u64> {
        let headline = self.headline().successes;
        metrics
            .iter()
            .map(|m| {
                m.per
                    .as_deref()
                    .and_then(|n| self.successes_of(n))
                    .unwrap_or(headline)
            })
            .collect()
    }
}

impl RoundReport {
    fn rows(&self) -> Rows<'_> {
        Rows::new(&self.ops, &self.total, &self.sent, &self.received)
    }

    /// Each scraped counter's increase per 1,000 successes of what its `per` names, or
    /// of the headline sum.
    pub(crate) fn rebase_metrics(&mut self) {
        let per = self.rows().denominators(&self.metrics);
        for (m, n) in self.metrics.iter_mut().zip(per) {
            m.per_ops(n);
        }
    }

    /// The round's headline sum (see the module's header).
    pub fn headline(&self) -> &OpReport {
        self.rows().headline()
    }

    /// The sums its table rows show, `total` first.
    pub fn sums(&self) -> Vec<&OpReport> {
        self.rows().shown()
    }

    /// The sum of that name (`total`, `sent`, `received`).
    pub fn sum(&self, name: &str) -> Option<&OpReport> {
        self.rows().sum(name)
    }
}

impl Summary {
    fn rows(&self) -> Rows<'_> {
        Rows::new(&self.ops, &self.total, &self.sent, &self.received)
    }

    /// Each scraped counter's increase per 1,000 successes of what its `per` names, or
    /// of the headline sum, over the whole run.
    pub(crate) fn rebase_metrics(&mut self) {
        let per = self.rows().denominators(&self.metrics);
        for (m, n) in self.metrics.iter_mut().zip(per) {
            m.per_ops(n);
        }
    }

    /// Failures over every sum: each operation counted once, whatever it adds to.
    pub fn failures(&self) -> u64 {
        self.rows()
            .sums()
            .iter()
            .flatten()
            .map(|o| o.failures)
            .sum()
    }

    /// Successes over every sum, likewise.
    pub fn successes(&self) -> u64 {
        self.rows()
            .sums()
            .iter()
            .flatten()
            .map(|o| o.successes)
            .sum()
    }

    /// The run's headline sum (see the module's header).
    pub fn headline(&self) -> &OpReport {
        self.rows().headline()
    }

    /// The sums its table rows show, `total` first.
    pub fn sums(&self) -> Vec<&OpReport> {
        self.rows().shown()
    }

    /// The sum of that name (`total`, `sent`, `received`).
    pub fn sum(&self, name: &str) -> Option<&OpReport> {
        self.rows().sum(name)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The sum label `label` of class `class` adds to, in a workload of a STOMP, an AMQP
    /// and a CalDAV class.
    fn tally_of(class: &str, label: &str) -> Tally {
        let w = crate::workload::load_str(
            "t.yaml",
            "target: embedded\nusers:\n  - class: stomp\n    protocol: stomp\n    count: 1\n    params: { subscribe: /queue/q }\n    mix: { send: { weight: 1, params: { destination: /queue/q } }, receive: 1, request: { weight: 1, params: { destination: /queue/s } } }\n  - class: amqp\n    protocol: amqp\n    count: 1\n    params: { queue: q }\n    mix: { publish: 1, consume: 1 }\n  - class: caldav\n    protocol: caldav\n    count: 1\n    mix: { put_event: 1 }\n",
            &[],
            None,
        )
        .unwrap();
        let c = w.classes.iter().find(|c| c.name == class).unwrap();
        let i = c
            .labels
            .iter()
            .position(|l| l == label)
            .unwrap_or_else(|| panic!("{label} not in {:?}", c.labels));
        c.kind.tally(i)
    }

    fn stats(requests: u64) -> OpStats {
        OpStats {
            requests,
            successes: requests,
            ..Default::default()
        }
    }

    #[test]
    fn messages_never_enter_the_total_and_steps_enter_nothing() {
        let mut s = Sums::new(true);
        s.add(tally_of("stomp", "send"), &stats(10));
        s.add(tally_of("stomp", "receive"), &stats(9));
        s.add(tally_of("stomp", "receive.e2e"), &stats(9));
        s.add(tally_of("stomp", "receive_empty"), &stats(3));
        s.add(tally_of("amqp", "publish"), &stats(5));
        s.add(tally_of("amqp", "consume_foreign"), &stats(1));
        s.add(tally_of("stomp", "request"), &stats(2));
        s.add(tally_of("caldav", "put_event"), &stats(7));
        assert_eq!(s.total.requests, 9);
        assert_eq!(s.sent.as_ref().map(|x| x.requests), Some(15));
        assert_eq!(s.received.as_ref().map(|x| x.requests), Some(10));
        assert_eq!(s.headline_successes(), 9);
    }

    #[test]
    fn without_requests_the_headline_is_what_was_sent_then_what_was_taken() {
        let mut s = Sums::new(true);
        s.add(Tally::Received, &stats(4));
        assert_eq!(s.headline_successes(), 4);
        s.add(Tally::Sent, &stats(6));
        assert_eq!(s.headline_successes(), 6);
        let plain = Sums::new(false);
        assert!(plain.sent.is_none() && plain.received.is_none());
    }
}
