//! One user of an http class: its pools and captured values, and each operation sent,
//! checked and remembered as its template says (the driver contract's `OverHttp`).

use std::collections::VecDeque;
use std::sync::Arc;

use rand::rngs::Xoshiro256PlusPlus;

use super::HttpClass;
use super::prepare::PREFILL_SEQ;
use super::request::{VuData, request};
use crate::protocol::auth::Auth;
use crate::protocol::cleanup;
use crate::protocol::contract::Done;
use crate::protocol::over_http::OverHttp;
use crate::protocol::{Outcome, VuIds};
use crate::transport::{Conn, ErrorClass, Method};
use crate::workload::MAX_PREFILL;

pub(crate) struct HttpVu {
    pub(super) class: Arc<HttpClass>,
    pub(super) ids: VuIds,
    /// Values captured from responses, by capture index.
    pub(super) vars: Vec<Option<String>>,
    /// Reused for every request path, so rendering does not allocate once warm.
    pub(super) path_buf: String,
    /// The user's credentials, when the class authenticates.
    pub(super) auth: Option<Auth>,
    /// What it made, by pool, oldest first.
    pub(super) pools: Vec<VecDeque<String>>,
}

impl OverHttp for HttpVu {
    /// Pools are http's only guard: whether pool `index` holds a value.
    fn guard_holds(&self, guard: &crate::workload::chain::Guard) -> bool {
        match guard {
            crate::workload::chain::Guard::Pool { index, .. } => {
                self.pools.get(*index).is_some_and(|p| !p.is_empty())
            }
            crate::workload::chain::Guard::Invited | crate::workload::chain::Guard::Synced(_) => {
                false
            }
        }
    }

    /// The class's `prefill:` operations, each run its drawn count of times (at most
    /// [`MAX_PREFILL`]) before the first pick, their `{seq}` from [`PREFILL_SEQ`]. Stops
    /// at the first that fails or finds nothing to act on.
    async fn prefill(
        &mut self,
        conn: &mut Conn,
        rng: &mut Xoshiro256PlusPlus,
    ) -> Result<(), String> {
        let class = self.class.clone();
        let mut seq = PREFILL_SEQ;
        for p in &class.prefill {
            let n = p.count.sample_count(rng, MAX_PREFILL);
            for i in 0..n {
                let why = match self.execute(p.op, seq, conn, rng).await {
                    Done::Sent(o) if o.error.is_none() => None,
                    Done::Sent(o) => Some(o.detail.unwrap_or_else(|| "failed".into())),
                    Done::Skipped => Some("found nothing to act on".into()),
                };
                if let Some(why) = why {
                    return Err(format!("prefill {} {} of {n}: {why}", p.name, i + 1));
                }
                seq = seq.saturating_add(1);
            }
        }
        Ok(())
    }

    /// Its pools and variables go on; `{round}` names the round it is in.
    fn begin_round(&mut self, round: u32) {
        self.ids.round = round;
    }

    /// What the end of the round removes: `(method, path)` for every entry still held in
    /// a pool that has a cleanup method. Paths are as remembered (without the base path).
    fn leftovers(&self) -> Vec<(Method, cleanup::Place)> {
        self.class
            .pools
            .iter()
            .zip(&self.pools)
            .filter_map(|(def, held)| def.cleanup.as_ref().map(|m| (m, held)))
            .flat_map(|(m, held)| {
                held.iter()
                    .map(move |p| (m.clone(), cleanup::Place::Base(p.clone())))
            })
            .collect()
    }

    async fn execute(
        &mut self,
        op: usize,
        seq: u64,
        conn: &mut Conn,
        rng: &mut Xoshiro256PlusPlus,
    ) -> Done {
        // Disjoint borrows of the VU's fields: no Arc clone per request, whose reference
        // count all VUs of the class would bounce between cores.
        let HttpVu {
            class,
            ids,
            vars,
            path_buf,
            auth,
            pools,
        } = self;
        let class: &HttpClass = class;
        // The resolver built the table the engine picks from: an index past it is a pick
        // of nothing.
        let Some(p) = class.ops.get(op) else {
            return Done::Skipped;
        };
        let mut st = VuData {
            vars,
            path_buf,
            pools,
        };
        if p.steps.is_empty() {
            return request(class, ids, auth.as_ref(), &mut st, p, seq, conn, rng).await;
        }
        // A sequence: timed as one operation, each step also reported under its own
        // label. It stops at the first step that fails.
        let mut done: Option<Outcome> = None;
        let mut steps = Vec::with_capacity(p.steps.len());
        for (label, step) in &p.steps {
            let mut o =
                match request(class, ids, auth.as_ref(), &mut st, step, seq, conn, rng).await {
                    Done::Sent(o) => o,
                    // Nothing to act on, nothing sent: the whole operation is skipped.
                    Done::Skipped if done.is_none() => return Done::Skipped,
                    Done::Skipped => Outcome::failed(
                        ErrorClass::Body,
                        "a step found nothing to act on after earlier steps ran".into(),
                    ),
                };
            steps.push((*label, o.clone()));
            let failed = o.error.is_some();
            if let Some(before) = &done {
                o.add_cost(before);
                if o.error.is_none() {
                    o.error = before.error;
                    o.detail = before.detail.clone();
                }
            }
            done = Some(o);
            if failed {
                break;
            }
        }
        let Some(mut o) = done else {
            return Done::Skipped;
        };
        o.steps = steps;
        Done::Sent(o)
    }
}
