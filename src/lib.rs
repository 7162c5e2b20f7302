//! loadmix: weighted populations of protocol clients (CalDAV, Morse Code, Atom, generic
//! HTTP, STOMP, AMQP 0-9-1) against calendar, collaboration and messaging servers, timed
//! into throughput reports.
//!
//! Data flows one way (see ARCHITECTURE.md): `workload` (YAML → typed `Workload`, no I/O)
//! → `run` (targets, rounds, outputs) → `engine` (virtual users on tokio) → `protocol`
//! (what each operation sends and how its answer is judged) → `transport` (streams to the
//! target, HTTP/1.1 on them); samples → `metrics` → `report`. `answer` is a protocol's
//! answer in its own words, from the drivers to the reports. [`formats`] holds the wire
//! formats both the client and the embedded server speak, and `files` reads every file
//! loadmix is given, bounded by its kind: both from the `loadmix-formats` crate. The
//! embedded server is the `loadmix-server` crate, beside the client and on `formats` only;
//! Cargo keeps that border. `cli` is the command line. `secrets` masks every credential
//! in whatever any layer writes out. `monitor` watches the server's processes on the
//! rounds' clock.
//!
//! The public surface below is what a caller needs: load a workload ([`load`],
//! [`load_str`]), see what it will do ([`plan`]), run it ([`run()`]), read, render,
//! compare and merge reports ([`reports`]), start the embedded server ([`embedded`]),
//! drive one HTTP/1.1 connection as a virtual user does ([`client`]), and the command line
//! itself ([`main`]). Everything else is the crate's own.

mod answer;
mod cli;
mod engine;
mod fault;
mod fidelity;
mod infer;
mod ledger;
mod live;
mod metrics;
mod monitor;
mod protocol;
mod report;
mod run;
mod secrets;
mod starter;
mod transport;
mod visibility;
mod workload;

/// The wire formats both sides speak (XML, WebDAV multistatus, EIM, iCalendar, STOMP
/// frames, PEM, target schemes): the `loadmix-formats` crate.
pub use loadmix_formats as formats;
use loadmix_server as server;

/// The command line: `loadmix ARGS...` as the binary runs it; the exit code.
pub use cli::main;

/// Load a workload: a YAML file (or its text) checked and resolved into typed classes.
pub use workload::{
    Diagnostic, LoadOptions, Override, Protocol, UserClass, Workload, WorkloadError, load, load_str,
};

/// What each user of a workload will pick, and the think before each, without a server:
/// exactly what a run sends (plan = run).
pub use engine::plan;

/// Run a workload against its targets, round by round, with every output written.
pub use engine::shard::Shard;
pub use run::{Finished, RunError, RunOptions, run};

/// Reports: read a saved `run.json`, render it (table, HTML), compare runs, merge the
/// shards of a sharded run.
pub mod reports {
    pub use crate::answer::Answer;
    pub use crate::report::model::{
        AnswerCount, FaultConnections, FaultPart, FaultWindow, LatencyPart, OpReport, RecoveryRule,
        VisibilityRecord, VisibilityRow, decode_histogram, drift,
    };
    pub use crate::report::{
        Report, ReportError, compare, html, load, merge, table, to_json, write_dir,
    };
}

/// Access logs: a workload inferred from them (`loadmix infer`), and whether two of them
/// show the same traffic (`loadmix fidelity`).
pub mod logs {
    pub use crate::fidelity::{Check, Fidelity, compare};
    pub use crate::infer::classify::Protocol;
    pub use crate::infer::scan::Cut;
    pub use crate::infer::write::{Target, workload};
    pub use crate::infer::{Behaviour, Class, InferOptions, Inferred, Population, infer};
}

/// The embedded reference server (`loadmix serve`): Morse Code, Atom, CalDAV over memory
/// or SQLite, plain or TLS on loopback.
pub mod embedded {
    pub use crate::server::{
        FORGOTTEN, ServerConfig, ServerError, ServerHandle, StoreSpec, certs, parse_ics, start,
    };
}

/// One virtual user's HTTP/1.1 connection, as the drivers use it: kept alive or one per
/// request, timed, with every failure classified.
pub mod client {
    pub use crate::transport::{
        Conn, Endpoint, ErrorClass, Request, Response, Reuse, Timeouts, TransportError,
    };
}
