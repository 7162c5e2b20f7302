//! Stop signals: Ctrl-C (SIGINT), SIGTERM (what `timeout`, systemd and Kubernetes send)
//! and SIGHUP (a closed terminal) all stop a run the same way, so the report of what ran
//! is still written. A second signal means "now": the process exits at once.

/// Which signal arrived.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Signal {
    Interrupt,
    Terminate,
    Hangup,
}

impl Signal {
    pub(crate) fn name(self) -> &'static str {
        match self {
            Signal::Interrupt => "SIGINT",
            Signal::Terminate => "SIGTERM",
            Signal::Hangup => "SIGHUP",
        }
    }

    /// The shell's exit status for a process ended by this signal (128 + its number).
    pub(crate) fn exit_status(self) -> i32 {
        128 + match self {
            Signal::Interrupt => 2,
            Signal::Terminate => 15,
            Signal::Hangup => 1,
        }
    }
}

/// The signals to listen for; `None` where they cannot be installed (then only Ctrl-C).
pub(crate) struct Signals {
    #[cfg(unix)]
    term: Option<tokio::signal::unix::Signal>,
    #[cfg(unix)]
    hup: Option<tokio::signal::unix::Signal>,
}

impl Signals {
    /// Install the handlers now, before the run starts, so an early signal is not lost.
    pub(crate) fn install() -> Signals {
        #[cfg(unix)]
        {
            use tokio::signal::unix::{SignalKind, signal};
            Signals {
                term: signal(SignalKind::terminate()).ok(),
                hup: signal(SignalKind::hangup()).ok(),
            }
        }
        #[cfg(not(unix))]
        Signals {}
    }

    /// The next stop signal.
    pub(crate) async fn next(&mut self) -> Signal {
        #[cfg(unix)]
        {
            async fn on(s: &mut Option<tokio::signal::unix::Signal>) {
                match s {
                    Some(s) => {
                        s.recv().await;
                    }
                    None => std::future::pending::<()>().await,
                }
            }
            tokio::select! {
                r = tokio::signal::ctrl_c() => match r {
                    Ok(()) => Signal::Interrupt,
                    // No Ctrl-C handler: wait for the others only.
                    Err(_) => tokio::select! {
                        _ = on(&mut self.term) => Signal::Terminate,
                        _ = on(&mut self.hup) => Signal::Hangup,
                    },
                },
                _ = on(&mut self.term) => Signal::Terminate,
                _ = on(&mut self.hup) => Signal::Hangup,
            }
        }
        #[cfg(not(unix))]
        {
            let _ = tokio::signal::ctrl_c().await;
            Signal::Interrupt
        }
    }
}
