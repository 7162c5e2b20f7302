//! The generic `http` protocol: each operation is a request template from the workload
//! (method, path, headers, body, expected statuses, captures). It is how users drive servers
//! that no built-in driver speaks, such as a REST message queue or a WebDAV share.
//!
//! Operations can act on what earlier ones made: `remember:` keeps a created resource's
//! path (or a captured value) in a per-user pool, `pick:` takes one back into a variable,
//! `forget:` drops it once deleted. An operation whose pool is empty sends nothing and is
//! not counted, like a driver's operation with nothing to act on. At the end of a round,
//! what is left in a pool with a `cleanup:` method is removed, untimed.

mod prepare;
mod request;
mod user;

use prepare::{PreparedOp, prepare};
pub(crate) use user::HttpVu;

use std::sync::Arc;

use rand::SeedableRng;
use rand::rngs::Xoshiro256PlusPlus;

use async_trait::async_trait;

use super::auth::Auth;
use super::contract::{Preflight, Protocol, Reach};
use super::over_http::HttpUser;
use super::session::Session;
use super::{ProtocolError, VuIds};
use crate::workload::template::Ctx;
use std::collections::VecDeque;

use crate::workload::{HttpRequest, Pool, Prefill, UserClass, Workload};

pub(crate) struct HttpClass {
    ops: Vec<PreparedOp>,
    context: Arc<str>,
    class: Arc<str>,
    /// Names of the captured variables, by index.
    vars: Vec<String>,
    pools: Vec<Pool>,
    /// Operations run in each user's set-up to fill its pools.
    prefill: Vec<Prefill>,
}

impl HttpClass {
    pub(crate) fn new(
        workload: &Workload,
        class: &UserClass,
        requests: &[HttpRequest],
        pools: &[Pool],
        prefill: &[Prefill],
        seed: u64,
    ) -> HttpClass {
        // Random bodies are made once per class: their content does not matter to a server,
        // and per-VU copies would cost memory with many users.
        let mut rng = Xoshiro256PlusPlus::seed_from_u64(seed ^ 0x006c_6f61_646d_6978);
        let ops = class
            .ops
            .iter()
            .zip(requests)
            .map(|(op, h)| {
                let mut p = prepare(h, op.expect.clone(), &mut rng);
                p.steps = h
                    .steps
                    .iter()
                    .map(|st| (st.label, prepare(&st.request, st.expect.clone(), &mut rng)))
                    .collect();
                p
            })
            .collect();
        HttpClass {
            ops,
            context: workload.context.as_str().into(),
            class: class.name.as_str().into(),
            vars: class.captures.clone(),
            pools: pools.to_vec(),
            prefill: prefill.to_vec(),
        }
    }

    /// What a user's templates are rendered with.
    fn ctx<'a>(
        &'a self,
        ids: &'a VuIds,
        seq: u64,
        vars: &'a [Option<String>],
        rng: &'a mut Xoshiro256PlusPlus,
    ) -> Ctx<'a, Xoshiro256PlusPlus> {
        Ctx {
            vu: ids.vu,
            round: ids.round,
            seq,
            context: &self.context,
            run_id: &ids.run_id,
            class: &self.class,
            vars,
            rng,
        }
    }

    fn new_vu(self: &Arc<HttpClass>, ids: VuIds, auth: Option<Auth>) -> HttpVu {
        HttpVu {
            class: self.clone(),
            ids,
            auth,
            vars: vec![None; self.vars.len()],
            pools: vec![VecDeque::new(); self.pools.len()],
            path_buf: String::new(),
        }
    }
}

#[async_trait]
impl Protocol for HttpClass {
    type User = HttpUser<HttpVu>;

    fn user(self: &Arc<Self>, session: Session, ids: VuIds, reach: Reach) -> Self::User {
        let vu = self.new_vu(ids, session.auth.clone());
        // Requests are the workload's own: no account is made for them.
        HttpUser::new(vu, session, &reach, None)
    }

    /// Something listens and speaks HTTP: the workload's requests are its own, so no
    /// request of them is sent before the clock.
    async fn preflight(self: &Arc<Self>, cx: Preflight<'_>) -> Result<(), ProtocolError> {
        super::over_http::probe(&cx).await
    }
}
