//! What the fault proxy's parts share: a window's toxic as connections read it, what it
//! did to them, one connection as the proxy and its pumps know it, and which connections
//! a window draws.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, RwLock};
use std::time::Duration;

use tokio_util::sync::CancellationToken;

use crate::workload::faults::{FaultAction, Stream};

/// A window's toxic as the connections read it.
pub(super) struct Active {
    pub(super) action: FaultAction,
    pub(super) toxicity: f64,
    pub(super) stream: Stream,
    /// Drawn with the connection's id: which connections it touches.
    pub(super) seq: u64,
    /// Bytes that passed in the window (`limit_data`), over all its connections.
    pub(super) bytes: AtomicU64,
    pub(super) counts: Arc<Counts>,
}

/// What a window did to connections.
#[derive(Debug, Default)]
pub(crate) struct Counts {
    /// Connections open at its begin or accepted during it.
    pub touched: AtomicU64,
    /// Of those, the ones its toxicity drew.
    pub drawn: AtomicU64,
    /// Connections reset (TCP RST to both ends).
    pub reset: AtomicU64,
    /// Connections closed by the fault (down, timeout's close, limit_data).
    pub closed: AtomicU64,
    /// Connections refused or closed at once while the proxy was down.
    pub refused: AtomicU64,
}

/// What the proxy knows of one open connection, shared by its pumps and by a window's
/// begin.
#[derive(Clone)]
pub(super) struct Conn {
    pub(super) id: u64,
    /// Ends both directions; `reset` says how.
    pub(super) kill: CancellationToken,
    pub(super) reset: Arc<std::sync::atomic::AtomicBool>,
    /// The last window that acted on it (its `seq` + 1): each acts once, whether its
    /// begin found the connection open or the connection found the window going on.
    pub(super) seen: Arc<AtomicU64>,
}

impl Conn {
    /// Window `a` acts on this connection, once: counted, drawn or not, and reset or
    /// closed as its kind says.
    pub(super) fn meet(&self, seed: u64, a: &Arc<Active>) {
        let mark = a.seq + 1;
        if self.seen.swap(mark, Ordering::AcqRel) == mark {
            return;
        }
        let c = &a.counts;
        c.touched.fetch_add(1, Ordering::Relaxed);
        if a.action == FaultAction::Down {
            c.closed.fetch_add(1, Ordering::Relaxed);
            self.kill.cancel();
            return;
        }
        if !draws(seed, self.id, a) {
            return;
        }
        c.drawn.fetch_add(1, Ordering::Relaxed);
        match a.action {
            FaultAction::Reset => {
                c.reset.fetch_add(1, Ordering::Relaxed);
                self.reset.store(true, Ordering::Relaxed);
                self.kill.cancel();
            }
            FaultAction::Timeout { after: Some(after) } => {
                close_after(self.kill.clone(), after, a.clone())
            }
            _ => {}
        }
    }
}

/// The proxy's state, shared by its accept loop, its connections and its windows.
pub(super) struct Shared {
    pub(super) upstream: SocketAddr,
    pub(super) active: RwLock<Option<Arc<Active>>>,
    pub(super) conns: Mutex<HashMap<u64, Conn>>,
    pub(super) next_id: AtomicU64,
    /// Connections accepted over the proxy's life.
    pub(super) accepted: AtomicU64,
    /// A seed of the run's, so that which connections a toxicity draws is repeatable.
    pub(super) seed: u64,
}

/// Whether window `a` draws connection `id` (a fixed draw per connection and window).
pub(super) fn draws(seed: u64, id: u64, a: &Active) -> bool {
    if a.toxicity >= 1.0 {
        return true;
    }
    let mut z =
        seed ^ id.wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ a.seq.wrapping_mul(0xD1B5_4A32_D192_ED03);
    // splitmix64's finaliser: a well-mixed draw from the three.
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^= z >> 31;
    ((z >> 11) as f64 / (1u64 << 53) as f64) < a.toxicity
}

/// Close a connection `after` from now, unless the window ends first.
pub(super) fn close_after(kill: CancellationToken, after: Duration, active: Arc<Active>) {
    tokio::spawn(async move {
        tokio::time::sleep(after).await;
        active.counts.closed.fetch_add(1, Ordering::Relaxed);
        kill.cancel();
    });
}
