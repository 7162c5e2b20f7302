//! loadmix's own loopback proxy, put between a target's users and one of its ports when
//! the timeline has network faults: it listens on 127.0.0.1 only, forwards only to the
//! address it was made for, and passes bytes untouched until a window makes one of
//! Toxiproxy's kinds of trouble on the share of connections its toxicity draws.
//!
//! Each direction of a connection is one loop over a queue of chunks, each chunk given
//! the moment it may go on as it is read (now plus a latency, after the one before it
//! at a bandwidth, in slices), so that a delay never adds up over the chunks of one
//! answer and bytes never overtake each other.

use std::collections::{HashMap, VecDeque};
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, RwLock};
use std::time::Duration;

use bytes::Bytes;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::tcp::{OwnedReadHalf, OwnedWriteHalf};
use tokio::net::{TcpListener, TcpSocket, TcpStream};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use crate::workload::faults::{Fault, FaultAction, Stream};

/// The largest chunk read at once.
const CHUNK: usize = 64 * 1024;
/// Chunks a direction holds back before it stops reading (and the sender's window fills).
const QUEUE: usize = 64;
/// How long a connect to the target may take.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);
/// The most connections the proxy holds at once; past it, a new one is closed at once.
const MAX_CONNECTIONS: usize = 16_384;

/// A window's toxic as the connections read it.
struct Active {
    action: FaultAction,
    toxicity: f64,
    stream: Stream,
    /// Drawn with the connection's id: which connections it touches.
    seq: u64,
    /// Bytes that passed in the window (`limit_data`), over all its connections.
    bytes: AtomicU64,
    counts: Arc<Counts>,
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
struct Conn {
    id: u64,
    /// Ends both directions; `reset` says how.
    kill: CancellationToken,
    reset: Arc<std::sync::atomic::AtomicBool>,
    /// The last window that acted on it (its `seq` + 1): each acts once, whether its
    /// begin found the connection open or the connection found the window going on.
    seen: Arc<AtomicU64>,
}

impl Conn {
    /// Window `a` acts on this connection, once: counted, drawn or not, and reset or
    /// closed as its kind says.
    fn meet(&self, seed: u64, a: &Arc<Active>) {
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

struct Shared {
    upstream: SocketAddr,
    active: RwLock<Option<Arc<Active>>>,
    conns: Mutex<HashMap<u64, Conn>>,
    next_id: AtomicU64,
    /// Connections accepted over the proxy's life.
    accepted: AtomicU64,
    /// A seed of the run's, so that which connections a toxicity draws is repeatable.
    seed: u64,
}

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

/// Whether window `a` draws connection `id` (a fixed draw per connection and window).
fn draws(seed: u64, id: u64, a: &Active) -> bool {
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
fn close_after(kill: CancellationToken, after: Duration, active: Arc<Active>) {
    tokio::spawn(async move {
        tokio::time::sleep(after).await;
        active.counts.closed.fetch_add(1, Ordering::Relaxed);
        kill.cancel();
    });
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

/// One direction of one connection.
struct Pump {
    shared: Arc<Shared>,
    conn: Conn,
    /// From the target to the users (answers).
    down: bool,
    kill: CancellationToken,
    reset: Arc<std::sync::atomic::AtomicBool>,
    from: OwnedReadHalf,
    to: OwnedWriteHalf,
    /// The jitter's random stream (never zero).
    rng: u64,
}

/// What the queue holds: bytes, or the peer's close, each with when it may go on.
enum Item {
    Bytes(Bytes),
    Close,
}

impl Pump {
    /// Read, hold back as the window says, write; the halves back when it ends.
    async fn run(mut self) -> (OwnedReadHalf, OwnedWriteHalf) {
        let mut queue: VecDeque<(Instant, Item)> = VecDeque::new();
        let mut buf = vec![0u8; CHUNK];
        let mut reading = true;
        let mut last = Instant::now();
        loop {
            let due = queue.front().map(|(t, _)| *t);
            tokio::select! {
                biased;
                _ = self.kill.cancelled() => break,
                _ = tokio::time::sleep_until(due.unwrap_or_else(Instant::now)), if due.is_some() => {
                    let Some((_, item)) = queue.pop_front() else { continue };
                    match item {
                        Item::Bytes(b) => {
                            if self.to.write_all(&b).await.is_err() {
                                self.fail();
                                break;
                            }
                        }
                        Item::Close => {
                            let _ = self.to.shutdown().await;
                            break;
                        }
                    }
                }
                r = self.from.read(&mut buf), if reading && queue.len() < QUEUE => {
                    let now = Instant::now();
                    match r {
                        Ok(0) => {
                            reading = false;
                            let at = self.close_at(now).max(last);
                            queue.push_back((at, Item::Close));
                        }
                        Ok(n) => {
                            let chunk = Bytes::copy_from_slice(&buf[..n]);
                            if !self.shape(chunk, now, &mut last, &mut queue) {
                                break;
                            }
                        }
                        Err(_) => {
                            self.fail();
                            break;
                        }
                    }
                }
            }
        }
        (self.from, self.to)
    }

    /// A read or write failed (a peer reset): the other end is reset too.
    fn fail(&self) {
        self.reset.store(true, Ordering::Relaxed);
        self.kill.cancel();
    }

    /// The window's toxic on this direction, when it draws this connection.
    fn toxic(&self) -> Option<Arc<Active>> {
        let a = self.shared.active.read().ok()?.clone()?;
        let touches = match self.down {
            true => a.stream.touches_down(),
            false => a.stream.touches_up(),
        };
        // A window that began while this connection was being made is met here.
        self.conn.meet(self.shared.seed, &a);
        (touches && draws(self.shared.seed, self.conn.id, &a)).then_some(a)
    }

    fn close_at(&self, now: Instant) -> Instant {
        match self.toxic().map(|a| a.action.clone()) {
            Some(FaultAction::SlowClose { delay }) => now + delay,
            _ => now,
        }
    }

    /// Queue `chunk` as the toxic says; false when the connection is to end now.
    fn shape(
        &mut self,
        chunk: Bytes,
        now: Instant,
        last: &mut Instant,
        queue: &mut VecDeque<(Instant, Item)>,
    ) -> bool {
        let Some(a) = self.toxic() else {
            *last = now.max(*last);
            queue.push_back((*last, Item::Bytes(chunk)));
            return true;
        };
        match &a.action {
            FaultAction::Latency { delay, jitter } => {
                let offset = (self.uniform() * 2.0 - 1.0) * jitter.as_secs_f64();
                let d = (delay.as_secs_f64() + offset).max(0.0);
                *last = (now + Duration::from_secs_f64(d)).max(*last);
                queue.push_back((*last, Item::Bytes(chunk)));
            }
            FaultAction::Bandwidth { bytes_per_s } => {
                let d = chunk.len() as f64 / *bytes_per_s as f64;
                *last = now.max(*last) + Duration::from_secs_f64(d);
                queue.push_back((*last, Item::Bytes(chunk)));
            }
            FaultAction::Slicer { size, delay } => {
                let size = usize::try_from(*size).unwrap_or(usize::MAX).max(1);
                let mut at = now.max(*last);
                let mut rest = chunk;
                while !rest.is_empty() {
                    let piece = rest.split_to(size.min(rest.len()));
                    queue.push_back((at, Item::Bytes(piece)));
                    at += *delay;
                }
                *last = at;
            }
            FaultAction::LimitData { bytes } => {
                let passed =
                    a.bytes.fetch_add(chunk.len() as u64, Ordering::Relaxed) + chunk.len() as u64;
                let room = bytes.saturating_sub(passed.saturating_sub(chunk.len() as u64));
                if room < chunk.len() as u64 {
                    let mut c = chunk;
                    c.truncate(room as usize);
                    *last = now.max(*last);
                    queue.push_back((*last, Item::Bytes(c)));
                    queue.push_back((*last, Item::Close));
                    a.counts.closed.fetch_add(1, Ordering::Relaxed);
                    return true;
                }
                *last = now.max(*last);
                queue.push_back((*last, Item::Bytes(chunk)));
            }
            // Swallowed: the peer waits for bytes that never come.
            FaultAction::Timeout { .. } => {}
            // `meet` reset it already.
            FaultAction::Reset => return false,
            FaultAction::SlowClose { .. }
            | FaultAction::Down
            | FaultAction::Pause
            | FaultAction::Kill
            | FaultAction::Restart => {
                *last = now.max(*last);
                queue.push_back((*last, Item::Bytes(chunk)));
            }
        }
        true
    }

    /// A uniform draw in [0, 1) from the pump's own stream (xorshift64*).
    fn uniform(&mut self) -> f64 {
        let mut x = self.rng;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.rng = x;
        (x.wrapping_mul(0x2545_F491_4F6C_DD1D) >> 11) as f64 / (1u64 << 53) as f64
    }
}
