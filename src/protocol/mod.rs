//! Protocol drivers: what an operation sends, how its answer is judged, and the per-VU state
//! that carries over between operations (captured values, collections, tokens, ETags).
//!
//! The engine knows nothing of HTTP paths or bodies; a driver knows nothing of scheduling.
//! The boundary is [`VuDriver::execute`]: one operation in, one [`Outcome`] out.

pub mod http;

use std::sync::Arc;
use std::time::Duration;

use rand::rngs::Xoshiro256PlusPlus;

use crate::transport::{Conn, Endpoint, ErrorClass};
use crate::workload::{Protocol, UserClass, Workload};

/// What one operation did.
#[derive(Debug, Clone, Default)]
pub struct Outcome {
    /// A refinement of the operation's label (index into the class's labels), e.g. Morse
    /// Code `sync` reported as `sync_no_change`. `None` keeps the operation's own label.
    pub label: Option<usize>,
    /// Status of the last response, if any arrived.
    pub status: Option<u16>,
    /// `None` is success: the expected status and a body that parses.
    pub error: Option<ErrorClass>,
    /// Why it failed, for the first few failures shown in the report.
    pub detail: Option<String>,
    pub bytes_sent: u64,
    pub bytes_received: u64,
    /// Time spent on the wire (the sum over the operation's requests).
    pub latency: Duration,
}

/// Errors that stop a run before it starts (exit 3).
#[derive(Debug, Clone, thiserror::Error)]
pub enum ProtocolError {
    #[error(
        "class '{class}' uses protocol {protocol}, which this version of loadmix cannot drive yet"
    )]
    Unsupported {
        class: String,
        protocol: &'static str,
    },
    #[error("preflight of class '{class}' failed: {request} -> {answer}")]
    Preflight {
        class: String,
        request: String,
        answer: String,
    },
}

/// What every VU of a class shares, built once per run.
pub enum ClassDriver {
    Http(Arc<http::HttpClass>),
}

impl ClassDriver {
    /// Build the driver of a class, refusing protocols that have no driver.
    pub fn new(
        workload: &Workload,
        class: &UserClass,
        seed: u64,
    ) -> Result<ClassDriver, ProtocolError> {
        match class.protocol {
            Protocol::Http => Ok(ClassDriver::Http(Arc::new(http::HttpClass::new(
                workload, class, seed,
            )))),
            p @ (Protocol::Morse | Protocol::Atom | Protocol::Caldav) => {
                Err(ProtocolError::Unsupported {
                    class: class.name.clone(),
                    protocol: p.name(),
                })
            }
        }
    }

    /// One probe against the target before the clock starts.
    pub async fn preflight(
        &self,
        class: &UserClass,
        endpoint: &Endpoint,
        timeout: Duration,
    ) -> Result<(), ProtocolError> {
        match self {
            ClassDriver::Http(_) => {
                crate::transport::probe(endpoint, timeout)
                    .await
                    .map_err(|answer| ProtocolError::Preflight {
                        class: class.name.clone(),
                        request: format!("TCP connect to {}", endpoint.display),
                        answer,
                    })
            }
        }
    }

    /// Fresh per-VU state for a round.
    pub fn new_vu(&self, ids: VuIds) -> VuDriver {
        match self {
            ClassDriver::Http(c) => VuDriver::Http(c.new_vu(ids)),
        }
    }
}

/// Who a VU is, for templates and for naming what it creates.
#[derive(Debug, Clone)]
pub struct VuIds {
    /// Index within its class, from 0.
    pub vu: u32,
    /// Round number, from 1.
    pub round: u32,
    pub run_id: Arc<str>,
}

/// Per-VU protocol state.
pub enum VuDriver {
    Http(http::HttpVu),
}

impl VuDriver {
    /// Run operation `op` (index into the class's table). `seq` counts this VU's operations.
    pub async fn execute(
        &mut self,
        op: usize,
        seq: u64,
        conn: &mut Conn,
        rng: &mut Xoshiro256PlusPlus,
    ) -> Outcome {
        match self {
            VuDriver::Http(v) => v.execute(op, seq, conn, rng).await,
        }
    }
}
