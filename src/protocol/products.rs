//! What a round leaves behind besides its samples, owned by the protocols and opaque to
//! the engine: the teardown's cleanup and drain, the message ledger, and the teams'
//! visibility settled for the round; and a run's, added up over its measured rounds. The
//! engine holds and adds them up without looking inside (a new protocol's products go
//! here, not into the engine); the report reads them.

use super::cleanup::CleanupStats;
use super::drain::DrainStats;
use crate::ledger::Ledger;
use crate::visibility::Settled;

/// One round's products, once its teardown is done and its books settled.
#[derive(Debug, Clone, Default)]
pub(crate) struct RoundProducts {
    /// Removing what the round made, after its clock stopped.
    pub(crate) cleanup: CleanupStats,
    /// What the users left on the target drained, and what the run declared deleted.
    pub(crate) drain: DrainStats,
    /// What its producers sent and its consumers (and the drain) took, by stamp. Moved
    /// into the run's when the round is measured, so it is kept once.
    pub(crate) ledger: Ledger,
    /// How its teams' writes reached the members who read; `None` without teams.
    pub(crate) visibility: Option<Settled>,
}

impl RoundProducts {
    /// The requests the round's teardown sent, untimed: a warm-up round counts them
    /// among its other requests, so that its figures add up to what the server answered.
    pub(crate) fn untimed_requests(&self) -> u64 {
        self.cleanup.requests
    }
}

/// A run's products: its measured rounds' added up.
#[derive(Debug, Clone, Default)]
pub(crate) struct RunProducts {
    /// The measured rounds' ledgers added up; `None` when no message was stamped.
    pub(crate) ledger: Option<Ledger>,
    /// The measured rounds' visibility added up; `None` without teams.
    pub(crate) visibility: Option<Settled>,
}

impl RunProducts {
    /// Add a measured round's: its ledger moves here (the run's is drained only when
    /// every round's was), its visibility is added.
    pub(crate) fn add(&mut self, round: &mut RoundProducts) {
        let ledger = std::mem::take(&mut round.ledger);
        if !ledger.is_empty() {
            let run = self.ledger.get_or_insert_with(Ledger::drained);
            let drained = run.drained && ledger.drained;
            run.absorb(ledger);
            run.drained = drained;
        }
        if let Some(v) = &round.visibility {
            self.visibility
                .get_or_insert_with(Default::default)
                .add(v.clone());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_run_is_drained_only_when_every_round_with_messages_was() {
        let mut run = RunProducts::default();
        let mut quiet = RoundProducts::default();
        run.add(&mut quiet);
        assert!(run.ledger.is_none(), "no message stamped, no ledger");
        let mut drained = RoundProducts {
            ledger: stamped(true),
            ..Default::default()
        };
        run.add(&mut drained);
        assert!(
            drained.ledger.is_empty(),
            "the round's ledger moves to the run"
        );
        assert!(run.ledger.as_ref().is_some_and(|l| l.drained));
        let mut left = RoundProducts {
            ledger: stamped(false),
            ..Default::default()
        };
        run.add(&mut left);
        assert!(run.ledger.as_ref().is_some_and(|l| !l.drained));
    }

    /// A ledger with one message sent, drained or not.
    fn stamped(drained: bool) -> Ledger {
        let mut l = match drained {
            true => Ledger::drained(),
            false => Ledger::default(),
        };
        let p = crate::ledger::Producer {
            class: 0,
            round: 1,
            vu: 0,
        };
        l.sent("q", p, 1);
        l
    }
}
