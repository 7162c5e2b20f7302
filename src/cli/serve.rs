//! `loadmix serve` (the embedded reference server until Ctrl-C) and `loadmix cert` (a CA
//! and a server certificate for https on loopback).

use super::Exit;
use crate::server::{self, ServerConfig};
use crate::workload::{EmbeddedStore, TargetSpec, units};
use clap::Args;
use std::net::SocketAddr;
use std::path::PathBuf;

#[derive(Debug, Args)]
pub(super) struct ServeArgs {
    #[arg(long, default_value = "127.0.0.1:8080")]
    pub bind: SocketAddr,
    /// memory, or sqlite:PATH (a file that survives restarts).
    #[arg(long, default_value = "memory")]
    pub store: String,
    /// The administrator account that creates users through CMP.
    #[arg(long, default_value = "root")]
    pub admin_user: String,
    /// The administrator's password [default: $LOADMIX_ADMIN_PASSWORD, else Cosmo's "cosmo"].
    #[arg(long, env = "LOADMIX_ADMIN_PASSWORD", hide_env_values = true)]
    pub admin_password: Option<String>,
    /// Accept any credentials and skip ownership checks (quick local use).
    #[arg(long)]
    pub no_auth: bool,
    #[arg(long, default_value = "/cosmo")]
    pub context: String,
    /// Largest request body accepted, e.g. 16MiB; larger ones get 413.
    #[arg(long, default_value = "16MiB")]
    pub max_body: String,
    /// Connections one client address may hold open, of the 10,000 served at once; past
    /// it, a connection gets the counters or 503. The broker holds as many per address
    /// apart (of its 20,000); past it, a connection gets an ERROR.
    #[arg(long, value_name = "N", default_value_t = server::DEFAULT_PER_ADDRESS as u32,
          value_parser = clap::value_parser!(u32).range(1..=server::MAX_CONNECTIONS as i64))]
    pub max_connections_per_address: u32,
    /// Write a Combined Log Format line per answered request to FILE (appended), with the
    /// microseconds to the answer's head at the end (Apache's %D).
    #[arg(long, value_name = "FILE")]
    pub access_log: Option<PathBuf>,
    /// Serve https with this certificate chain (PEM); `loadmix cert` makes one.
    #[arg(long, value_name = "FILE", requires = "tls_key")]
    pub tls_cert: Option<PathBuf>,
    /// The certificate's private key (PEM).
    #[arg(long, value_name = "FILE", requires = "tls_cert")]
    pub tls_key: Option<PathBuf>,
    /// Where the STOMP 1.2 broker listens (plain TCP), its queues in the same store
    /// [default: 127.0.0.1:61613, or a free port when that one is taken; the banner says].
    #[arg(long, value_name = "ADDR")]
    pub stomp_bind: Option<SocketAddr>,
}

#[derive(Debug, Args)]
pub(super) struct CertArgs {
    /// Folder to write ca.pem, cert.pem and key.pem into.
    #[arg(long, value_name = "DIR")]
    pub out: PathBuf,
    /// Names the certificate is valid for (repeatable).
    #[arg(long = "name", value_name = "HOST", default_values_t = ["localhost".to_string(), "127.0.0.1".to_string(), "::1".to_string()])]
    pub names: Vec<String>,
}

/// STOMP's usual port on loopback when it is free, else any free port: a second
/// `loadmix serve` on the machine still starts, and its banner names the port it took.
pub(super) fn default_stomp_bind() -> SocketAddr {
    let usual = SocketAddr::from(([127, 0, 0, 1], 61613));
    match std::net::TcpListener::bind(usual) {
        Ok(_) => usual,
        Err(_) => SocketAddr::from(([127, 0, 0, 1], 0)),
    }
}

pub(super) async fn serve(a: ServeArgs) -> Exit {
    let store = match TargetSpec::parse(&format!("embedded:{}", a.store)) {
        Ok(TargetSpec::Embedded {
            store: EmbeddedStore::Memory,
        }) => server::StoreSpec::Memory,
        Ok(TargetSpec::Embedded {
            store: EmbeddedStore::Sqlite(p),
        }) if !p.is_empty() => server::StoreSpec::Sqlite(p),
        _ => {
            return Exit::Usage.fail(format!(
                "--store: '{}' is not a store; use memory or sqlite:PATH",
                a.store
            ));
        }
    };
    let max_body = match units::parse_size(&a.max_body) {
        Ok(n) => n as usize,
        Err(m) => return Exit::Usage.fail(format!("--max-body: {m}")),
    };
    if !a.context.is_empty() && !a.context.starts_with('/') {
        return Exit::Usage.fail(format!("--context: '{}' must start with '/'", a.context));
    }
    let tls = match (&a.tls_cert, &a.tls_key) {
        (Some(c), Some(k)) => match server::certs::server_config(c, k) {
            Ok(t) => Some(t),
            Err(e) => return Exit::Usage.fail(e),
        },
        _ => None,
    };
    let cfg = ServerConfig {
        bind: a.bind,
        tls,
        store,
        context: a.context.trim_end_matches('/').to_string(),
        max_body,
        admin_user: a.admin_user.clone(),
        admin_password: a
            .admin_password
            .clone()
            .unwrap_or_else(|| server::DEFAULT_ADMIN.1.to_string()),
        no_auth: a.no_auth,
        max_per_address: a.max_connections_per_address as usize,
        stomp_bind: Some(a.stomp_bind.unwrap_or_else(default_stomp_bind)),
        access_log: match a.access_log.as_deref().map(server::AccessLog::open) {
            None => None,
            Some(Ok(l)) => Some(l),
            Some(Err(e)) => {
                return Exit::Usage.fail(format!(
                    "--access-log {}: {e}",
                    a.access_log
                        .as_deref()
                        .unwrap_or(std::path::Path::new(""))
                        .display()
                ));
            }
        },
        ..ServerConfig::default()
    };
    let ctx = cfg.context.clone();
    let h = match server::start(cfg).await {
        Ok(h) => h,
        Err(e @ server::ServerError::Store { .. }) => return Exit::Usage.fail(e),
        Err(e) => return Exit::Unreachable.fail(e),
    };
    eprintln!(
        "loadmix serve: {} store, listening on {url}{ctx}\n  CMP {ctx}/cmp/user/NAME · Morse Code {ctx}/mc/collection/UID · Atom {ctx}/atom/collection/UID · CalDAV {ctx}/dav/USER/\n  queue {ctx}/queue/NAME · counters {ctx}/_loadmix/stats · metrics {ctx}/_loadmix/metrics{auth}\n  STOMP 1.2 broker on {stomp} (queues /queue/NAME)\nCtrl-C stops",
        h.store_kind,
        url = h.url(),
        stomp = h
            .stomp_addr
            .map_or_else(|| "no port".to_string(), |a| format!("stomp://{a}")),
        auth = if a.no_auth {
            " · no authentication"
        } else {
            ""
        }
    );
    let sig = crate::run::signals::Signals::install().next().await;
    eprintln!("{}: stopping the server", sig.name());
    h.stop().await;
    Exit::Ok
}

pub(super) fn cert(a: CertArgs) -> Exit {
    match server::certs::write_pair(&a.out, &a.names) {
        Ok(files) => {
            eprintln!(
                "wrote {} (trust it: --ca-cert), {} and {} (serve --tls-cert/--tls-key)",
                files.ca.display(),
                files.cert.display(),
                files.key.display()
            );
            Exit::Ok
        }
        Err(e) => Exit::Write.fail(e),
    }
}
