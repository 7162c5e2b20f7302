//! `loadmix new`: a starter workload of the protocols a target answers.

use super::{Exit, TlsArgs};
use clap::Args;
use std::path::PathBuf;

#[derive(Debug, Args)]
pub(super) struct NewArgs {
    /// The server: http(s)://HOST[:PORT][/PATH], stomp://HOST:PORT, amqp(s)://HOST:PORT,
    /// or embedded.
    #[arg(long, value_name = "URL")]
    pub target: String,
    /// Try only this protocol (caldav, morse, atom, http, stomp, amqp; repeatable).
    #[arg(long = "protocol", value_name = "NAME")]
    pub protocols: Vec<String>,
    /// An existing account every user shares; its password from $LOADMIX_PASSWORD.
    #[arg(long, value_name = "NAME")]
    pub user: Option<String>,
    /// The workload file to write (never overwritten).
    #[arg(short, long, value_name = "FILE")]
    pub out: PathBuf,
    /// Only errors on stderr.
    #[arg(long, short)]
    pub quiet: bool,
    #[command(flatten)]
    pub tls: TlsArgs,
}

pub(super) async fn new_workload(a: NewArgs) -> Exit {
    let out = a.out.clone();
    let quiet = a.quiet;
    let o = crate::starter::NewOptions {
        target: a.target,
        protocols: a.protocols,
        user: a.user,
        out: a.out,
        tls: a.tls.into(),
        quiet: a.quiet,
    };
    match crate::starter::new(o).await {
        Ok(kept) => {
            if !quiet {
                eprintln!(
                    "wrote {} ({}); run it with: loadmix run {}",
                    out.display(),
                    kept.join(", "),
                    out.display()
                );
            }
            Exit::Ok
        }
        Err(e @ crate::starter::NewError::Write(_)) => Exit::Write.fail(e),
        Err(e @ crate::starter::NewError::Usage(_)) => Exit::Usage.fail(e),
        Err(e @ crate::starter::NewError::Nothing { .. }) => Exit::Unreachable.fail(e),
    }
}
