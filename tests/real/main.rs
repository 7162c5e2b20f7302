//! Checks of real servers: loadmix's typed report held against the server's own counts,
//! one expectation per line. The servers are Debian's and PyPI's packages, which the
//! scripts under `scripts/` install and start on loopback and hand to these tests through
//! `LOADMIX_REAL_*` variables (addresses, logs, the commands that ask a broker for its
//! counts). Each test is `#[ignore]`d, so `cargo test` alone does not run it against
//! nothing; the scripts run them with `--ignored`, and a test handed nothing fails saying
//! which script hands it what. No test skips itself.

mod handed;

mod activemq;
mod book;
mod broker_counts;
mod cyrus;
mod davical;
mod infer_nginx;
mod kubernetes;
mod live;
mod peers;
mod rabbitmq;
mod recipes;
mod web_servers;
