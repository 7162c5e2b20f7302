//! loadmix: weighted populations of protocol clients against calendar and collaboration
//! servers, timed into throughput reports.
//!
//! Data flows one way (see ARCHITECTURE.md): [`workload`] (YAML → typed `Workload`, no I/O)
//! → [`run`] (targets, rounds, outputs) → [`engine`] (virtual users on tokio) →
//! [`protocol`] (what each operation sends and how its answer is judged) → [`transport`]
//! (HTTP/1.1 connections, timeouts, error classes); samples → [`metrics`] → [`report`].
//! [`formats`] holds the wire formats both the client and the embedded [`server`] speak;
//! the server stands beside the client, on `formats` only. [`cli`] is the command line.
//! [`secrets`] masks every credential in whatever any layer writes out. [`monitor`]
//! watches the server's processes on the rounds' clock.

pub mod answer;
pub mod cli;
pub mod engine;
pub mod formats;
pub mod metrics;
pub mod monitor;
pub mod protocol;
pub mod report;
pub mod run;
pub mod secrets;
pub mod server;
pub mod transport;
pub mod workload;
