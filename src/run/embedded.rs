//! The embedded server a run starts for a target, on a runtime of its own: its handlers
//! call their store synchronously (a SQLite commit waits for the disk), and on the
//! generator's runtime that wait would hold up the generator's timers too, so a store
//! that blocks would be measured as a generator that fell behind.

use crate::server::{self, ServerConfig, ServerError, ServerHandle};

/// A started embedded server and the threads it runs on.
pub(super) struct Embedded {
    handle: ServerHandle,
    runtime: tokio::runtime::Runtime,
}

impl Embedded {
    /// Start the server on a multi-threaded runtime of its own, one worker per core.
    pub(super) async fn start(cfg: ServerConfig) -> Result<Embedded, ServerError> {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .thread_name("loadmix-embedded")
            .enable_all()
            .build()
            .map_err(ServerError::Threads)?;
        let started = runtime.spawn(server::start(cfg)).await;
        match started {
            Ok(Ok(handle)) => Ok(Embedded { handle, runtime }),
            Ok(Err(e)) => {
                runtime.shutdown_background();
                Err(e)
            }
            Err(join) => {
                runtime.shutdown_background();
                Err(ServerError::Threads(std::io::Error::other(
                    join.to_string(),
                )))
            }
        }
    }

    pub(super) fn handle(&self) -> &ServerHandle {
        &self.handle
    }

    /// Stop the server (requests in progress finish, its log is flushed), then its
    /// threads.
    pub(super) async fn stop(self) {
        let Embedded { handle, runtime } = self;
        let _ = runtime.spawn(handle.stop()).await;
        // Dropping a runtime may not block inside another one's task.
        runtime.shutdown_background();
    }
}
