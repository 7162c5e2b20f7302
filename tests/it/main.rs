//! The integration tests, one binary: each module below is one suite, and `common` is the
//! harness they share (servers on loopback, the command line in-process or as the binary).
//! One binary links the crate once instead of once per suite.

mod common;

mod architecture;
mod auth;
mod behaviours;

mod bad_workloads;
mod brokers;
mod capacity;
mod carddav;
mod client_timeout;
mod comparing;
mod docs;
mod drivers;
mod end_to_end;
mod engine_behaviour;
mod fault_windows;
mod faults;
mod fuzz;
mod kept_state;
mod live;
mod mix_fidelity;
mod monitor;
mod open_model;
mod options;
mod pools;
mod realized_mix;
mod scalability;
mod scheduling;
mod secrets;
mod server;
mod server_limits;
mod sharding;
mod started;
mod starter;
mod teams;
mod tls;
