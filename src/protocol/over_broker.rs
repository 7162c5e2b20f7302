//! The [`User`] of every broker protocol ([`BrokerUser`], around the protocol's own
//! [`OverBroker`] state): it holds where the broker is, and hands the destinations the
//! user used and its ledger to the round's teardown.

use async_trait::async_trait;

use super::broker::Queue;
use super::contract::{DataRng, Done, Handoff, Reach, User, Wire};
use super::{Outcome, SetupError};
use crate::ledger::Ledger;

/// One user's state of a broker protocol: the steps of [`User`], each given where the
/// broker is, and what the user hands to the round's teardown. Used only inside
/// [`BrokerUser`], so its steps are plain futures.
pub(crate) trait OverBroker: Send + 'static {
    /// Connect, and subscribe when the class consumes.
    fn set_up(&mut self, reach: &Reach) -> impl Future<Output = Result<(), SetupError>> + Send;
    /// Run operation `op` of the class's table.
    fn run(
        &mut self,
        op: usize,
        reach: &Reach,
        rng: &mut DataRng,
    ) -> impl Future<Output = Done> + Send;
    /// What the user still waits for when its round ends, or, when it `stays`, when its
    /// session ends and it returns for another (its connection then kept open).
    fn wait_out(
        &mut self,
        reach: &Reach,
        stays: bool,
    ) -> impl Future<Output = Option<Outcome>> + Send;
    /// The run's own destinations it used, for the teardown to drain.
    fn queues(&self) -> Vec<Queue>;
    /// What it sent and received, by stamp.
    fn take_ledger(&mut self) -> Ledger;
    /// Connections it opened.
    fn opened(&self) -> u64;
}

/// A user of a broker: the protocol's state and where the broker is.
pub(crate) struct BrokerUser<V> {
    vu: V,
    reach: Reach,
}

impl<V: OverBroker> BrokerUser<V> {
    /// A user whose connections go where `reach` says.
    pub(crate) fn new(vu: V, reach: Reach) -> Self {
        BrokerUser { vu, reach }
    }
}

#[async_trait]
impl<V: OverBroker> User for BrokerUser<V> {
    fn round_ends_at(&mut self, end: Option<tokio::time::Instant>) {
        self.reach.round_end = end;
    }

    async fn setup(&mut self) -> Result<(), SetupError> {
        self.vu.set_up(&self.reach).await
    }

    async fn execute(&mut self, op: usize, _seq: u64, rng: &mut DataRng) -> Done {
        self.vu.run(op, &self.reach, rng).await
    }

    async fn finish(&mut self) -> Option<Outcome> {
        self.vu.wait_out(&self.reach, false).await
    }

    async fn rest(&mut self) -> Option<Outcome> {
        self.vu.wait_out(&self.reach, true).await
    }

    /// Nothing made over HTTP: what the round left on the broker is in its queues.
    fn hand_off(&mut self) -> Handoff {
        Handoff {
            queues: self.vu.queues(),
            ledger: self.vu.take_ledger(),
            wire: Wire {
                opened: self.vu.opened(),
                ..Wire::default()
            },
            leftovers: Vec::new(),
            visibility: Default::default(),
        }
    }
}
