//! loadmix's own loopback proxy, put between a target's users and one of its ports when
//! the timeline has network faults: it listens on 127.0.0.1 only, forwards only to the
//! address it was made for, and passes bytes untouched until a window makes one of
//! Toxiproxy's kinds of trouble on the share of connections its toxicity draws.
//!
//! Each direction of a connection is a `pump::Pump`.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, RwLock};
use std::time::Duration;

use tokio::net::{TcpListener, TcpSocket, TcpStream};
use tokio_util::sync::CancellationToken;

use super::link::{Active, Conn, Counts, Shared};
use super::pump::Pump;

use crate::workload::faults::{Fault, FaultAction};

/// How long a connect to the target may take.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);
/// The most connections the proxy holds at once; past it, a new one is closed at once.
const MAX_CONNECTIONS: usize = 16_384;

/// One proxy: its address, its state, its accept loop.
pub(crate) struct Proxy {
    addr: SocketAddr,
    shared: Arc<Shared>,
    /// Cancelled to stop accepting (down, or the proxy's end).
    listening: Mutex<CancellationToken>,
    ended: CancellationToken,
}

impl Proxy {
    /// Listen on an unused loopback port, forwarding to `upstream`.
    pub(crate) async fn start(upstream: SocketAddr, seed: u64) -> std::io::Result<Arc<Proxy>> {
        let bind: SocketAddr = match upstream {
            SocketAddr::V6(_) if upstream.ip().is_loopback() => "[::1]:0",
            _ => "127.0.0.1:0",
        }
        .parse()
        .map_err(std::io::Error::other)?;
        let listener = TcpListener::bind(bind).await?;
        let addr = listener.local_addr()?;
        let p = Arc::new(Proxy {
            addr,
            shared: Arc::new(Shared {
                upstream,
                active: RwLock::new(None),
                conns: Mutex::new(HashMap::new()),
                next_id: AtomicU64::new(0),
                accepted: AtomicU64::new(0),
                seed,
            }),
            listening: Mutex::new(CancellationToken::new()),
            ended: CancellationToken::new(),
        });
        p.listen(listener);
        Ok(p)
    }

    /// Where the users connect.
    pub(crate) fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Where it forwards.
    pub(crate) fn upstream(&self) -> SocketAddr {
        self.shared.upstream
    }

    fn listen(&self, listener: TcpListener) {
        let token = self.ended.child_token();
        if let Ok(mut l) = self.listening.lock() {
            *l = token.clone();
        }
        let shared = self.shared.clone();
        tokio::spawn(async move {
            loop {
                let accepted = tokio::select! {
                    _ = token.cancelled() => return,
                    a = listener.accept() => a,
                };
                let Ok((client, _)) = accepted else {
                    // Out of descriptors, say: a moment, then go on.
                    tokio::time::sleep(Duration::from_millis(10)).await;
                    continue;
                };
                shared.accepted.fetch_add(1, Ordering::Relaxed);
                tokio::spawn(connection(shared.clone(), client));
            }
        });
    }

    /// A window begins: its toxic acts on the connections it draws from now on, and
    /// those open now that it resets or closes at once are.
    pub(crate) fn begin(&self, f: &Fault, seq: u64) -> Arc<Counts> {
        let counts = Arc::new(Counts::default());
        let active = Arc::new(Active {
            action: f.action.clone(),
            toxicity: f.toxicity,
            stream: f.stream,
            seq,
            bytes: AtomicU64::new(0),
            counts: counts.clone(),
        });
        if let Ok(mut a) = self.shared.active.write() {
            *a = Some(active.clone());
        }
        if active.action == FaultAction::Down
            && let Ok(l) = self.listening.lock()
        {
            l.cancel();
        }
        let open: Vec<Conn> = self
            .shared
            .conns
            .lock()
            .map(|c| c.values().cloned().collect())
            .unwrap_or_default();
        for c in open {
            c.meet(self.shared.seed, &active);
        }
        counts
    }

    /// The window ends: bytes pass untouched again, and a proxy that was down listens
    /// again on the same port.
    pub(crate) async fn end(&self) {
        let was = self.shared.active.write().ok().and_then(|mut a| a.take());
        if was.is_some_and(|a| a.action == FaultAction::Down) {
            self.relisten().await;
        }
    }

    async fn relisten(&self) {
        // The port was ours a moment ago; nobody else binds loopback ports we chose, but
        // a socket in TIME_WAIT may hold it for a moment without SO_REUSEADDR.
        for _ in 0..100 {
            let socket = match self.addr {
                SocketAddr::V4(_) => TcpSocket::new_v4(),
                SocketAddr::V6(_) => TcpSocket::new_v6(),
            };
            let bound = socket.and_then(|s| {
                s.set_reuseaddr(true)?;
                s.bind(self.addr)?;
                s.listen(1024)
            });
            if let Ok(l) = bound {
                self.listen(l);
                return;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        eprintln!(
            "loadmix: the fault proxy could not listen on {} again: its target stays unreachable",
            self.addr
        );
    }

    /// Stop accepting and close every connection (the run is over).
    pub(crate) fn stop(&self) {
        self.ended.cancel();
        if let Ok(mut a) = self.shared.active.write() {
            *a = None;
        }
        if let Ok(c) = self.shared.conns.lock() {
            for conn in c.values() {
                conn.kill.cancel();
            }
        }
    }
}

/// One connection: the target connected, then both directions until either ends.
async fn connection(shared: Arc<Shared>, client: TcpStream) {
    if let Some(a) = shared.active.read().ok().and_then(|a| a.clone())
        && a.action == FaultAction::Down
    {
        a.counts.refused.fetch_add(1, Ordering::Relaxed);
        return;
    }
    let too_many = shared
        .conns
        .lock()
        .map_or(true, |c| c.len() >= MAX_CONNECTIONS);
    if too_many {
        return;
    }
    let Ok(Ok(server)) =
        tokio::time::timeout(CONNECT_TIMEOUT, TcpStream::connect(shared.upstream)).await
    else {
        // The client sees what a refused connect looks like through a proxy: a close.
        return;
    };
    let _ = (client.set_nodelay(true), server.set_nodelay(true));
    let id = shared.next_id.fetch_add(1, Ordering::Relaxed);
    let conn = Conn {
        id,
        kill: CancellationToken::new(),
        reset: Arc::new(std::sync::atomic::AtomicBool::new(false)),
        seen: Arc::new(AtomicU64::new(0)),
    };
    if let Ok(mut c) = shared.conns.lock() {
        c.insert(id, conn.clone());
    }
    // Read after the connection is in the table: a window that began before is met
    // here, one that begins after finds it there (and `meet` acts only once).
    let active = shared.active.read().ok().and_then(|a| a.clone());
    if let Some(a) = &active {
        conn.meet(shared.seed, a);
    }
    let (kill, reset) = (conn.kill.clone(), conn.reset.clone());
    let (cr, cw) = client.into_split();
    let (sr, sw) = server.into_split();
    let lane = |from, to, down| Pump {
        shared: shared.clone(),
        conn: conn.clone(),
        down,
        kill: kill.clone(),
        reset: reset.clone(),
        from,
        to,
        rng: (shared.seed ^ id.wrapping_mul(0x9E37_79B9_7F4A_7C15)) | 1,
    };
    let (up, down) = tokio::join!(lane(cr, sw, false).run(), lane(sr, cw, true).run());
    let (cr, sw) = up;
    let (sr, cw) = down;
    if let Ok(mut c) = shared.conns.lock() {
        c.remove(&id);
    }
    if reset.load(Ordering::Relaxed) {
        // SO_LINGER 0: the close sends RST, which each peer reads as a reset.
        for s in [cr.reunite(cw), sr.reunite(sw)].into_iter().flatten() {
            // Deprecated for the blocking close a non-zero linger makes; a zero one never
            // blocks: the close is the reset.
            #[allow(deprecated)]
            let _ = s.set_linger(Some(Duration::ZERO));
        }
    }
}
