//! loadmix: weighted populations of protocol clients against calendar and collaboration
//! servers, timed into throughput reports.
//!
//! Data flows one way (DESIGN §4): [`workload`] (YAML → resolved `Workload`, no I/O) →
//! [`engine`] (virtual users on tokio, rounds, think time) → [`protocol`] (what each operation
//! sends and how its answer is judged) → [`transport`] (HTTP/1.1 connections, timeouts,
//! error classes) → [`metrics`] (histograms and counters, merged without locks) →
//! [`report`] (JSON, table). [`server`] is the embedded reference server. [`cli`] is the
//! command line the thin binary calls.

pub mod cli;
pub mod engine;
pub mod formats;
pub mod metrics;
pub mod protocol;
pub mod report;
pub mod run;
pub mod server;
pub mod transport;
pub mod workload;
