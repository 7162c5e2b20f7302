//! The embedded STOMP 1.2 broker: what `loadmix serve` answers on its STOMP port, so the
//! message-broker workloads run with no broker installed, and their counts can be held
//! against the broker's own.
//!
//! Queues (`/queue/NAME`), kept in the server's store (memory, or SQLite for a store that
//! is a file), with each message its sender's headers: `SEND` stores a message (and
//! answers its `receipt` once stored),
//! `SUBSCRIBE` with `ack: auto | client | client-individual` and a prefetch
//! (`activemq.prefetchSize` or `prefetch-count`, default 1,000) receives them; `ACK`
//! settles (cumulative under `client`), `NACK`, `UNSUBSCRIBE` and a closed connection put
//! what was not settled back in its queue. `BEGIN`/`COMMIT`/`ABORT` hold a transaction's
//! sends until its commit. No heart-beats are offered.
//!
//! Topics (`/topic/NAME`) fan out: each subscription to a topic takes from a queue of its
//! own, into which every message sent to the topic is copied. A durable subscription (a
//! `client-id` on CONNECT and `activemq.subscriptionName`, or RabbitMQ's `durable:true`)
//! keeps its queue while its subscriber is away, until an UNSUBSCRIBE that names it
//! removes it; any other ends with its consumer.
//!
//! Clients are hostile: every frame is bounded by the codec's [`Limits`] (before login,
//! by [`BEFORE_LOGIN`]'s, what a CONNECT needs: a few KiB), the bytes of frames being
//! read by all connections together by [`LARGEST_AT_ONCE`] frames of the largest size, a
//! frame must
//! arrive whole within the header timeout (so a client that trickles bytes is dropped),
//! `CONNECT` must come first and within that timeout, subscriptions, a transaction's
//! messages, the bytes of open transactions (per connection and in all) and unsettled
//! messages per connection are bounded, and at most [`MAX_CONNECTIONS`] are served at
//! once, of which one client address holds at most the server's per-address share
//! (`--max-connections-per-address`). A protocol error is answered with an ERROR
//! frame and the connection closed, as STOMP requires.

use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

use bytes::Bytes;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::Notify;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::guard::Addresses;
use super::settings::Settings;
use super::store::{Store, Taken};
use crate::formats::stomp::{self, Command, Frame, Limits};

/// STOMP connections served at once; more are answered with an ERROR and closed.
pub(crate) const MAX_CONNECTIONS: usize = 20_000;
/// Subscriptions one connection may hold.
const MAX_SUBSCRIPTIONS: usize = 64;
/// Messages one connection may hold unsettled, whatever the prefetches add up to.
const MAX_UNSETTLED: usize = 100_000;
/// Messages one transaction may hold before its commit.
const MAX_TX_MESSAGES: usize = 100_000;
/// Bytes (bodies and destinations) one connection's open transactions may hold.
const MAX_TX_BYTES: u64 = 64 << 20;
/// Bytes all connections' open transactions may hold at once: what uncommitted work can
/// cost the server whatever the number of connections.
const MAX_TX_BYTES_ALL: u64 = 1 << 30;
/// Open transactions per connection.
const MAX_TRANSACTIONS: usize = 16;
/// Topic subscriptions the broker keeps in all.
const MAX_TOPIC_SUBSCRIPTIONS: usize = 1_000_000;
/// Topic subscriptions one client (a login, or an address without one) may hold of
/// those, durable ones included: a hundredth, so that it takes a hundred accounts (which
/// only the administrator makes) to fill the broker.
const MAX_TOPIC_SUBSCRIPTIONS_PER_CLIENT: usize = MAX_TOPIC_SUBSCRIPTIONS / 100;
/// Destinations (queues and topics) clients may name, in all (a few hundred bytes each).
pub(crate) const MAX_DESTINATIONS: usize = 1_000_000;
/// Destinations one client may have named and still in use (holding messages, or
/// subscribed to): a hundredth of all. Those empty and unused are forgotten to make room.
pub(crate) const MAX_DESTINATIONS_PER_CLIENT: usize = MAX_DESTINATIONS / 100;
/// The row the counts of forgotten destinations are added to: no destination's name.
pub const FORGOTTEN: &str = "(forgotten: empty and unused)";
/// A subscription id's length, in bytes: it names the subscription's queue.
const MAX_SUBSCRIPTION_ID: usize = 256;
/// What a frame before login may be: a CONNECT (or STOMP) frame's head, and no body.
/// What a connection nobody has vouched for holds is this, whatever it says it will send.
pub(crate) const BEFORE_LOGIN: Limits = Limits {
    max_head: 8 * 1024,
    max_headers: 32,
    max_body: 0,
};
/// Bytes of frames not yet whole, in all connections' buffers, in frames of the largest
/// size the broker takes (256 MiB at the default 16 MiB): past it, a connection whose
/// frame needs more is answered with an ERROR, so many large senders together cannot
/// take the server's memory.
const LARGEST_AT_ONCE: u64 = 16;
/// What one connection's buffer may hold without a claim on the reading budget: small
/// frames never wait on large ones.
const READING_FREE: usize = 64 * 1024;
/// Copies of a topic's message written at once, between which its publisher yields.
const FAN_OUT_CHUNK: usize = 256;
/// A subscription's prefetch when it names none (ActiveMQ's default for queues).
const DEFAULT_PREFETCH: usize = 1000;

/// What one destination went through, as the broker counts it.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize)]
pub struct DestinationCounts {
    /// Messages stored (a transaction's when it committed).
    pub enqueued: u64,
    /// Messages handed to a subscriber (again after a requeue).
    pub dispatched: u64,
    /// Messages settled: acknowledged, or dispatched to an `ack: auto` subscription.
    pub dequeued: u64,
    /// Messages put back: NACKed, or unsettled when their subscription or connection ended.
    pub requeued: u64,
}

/// Who named each admitted destination first, and how many each client holds.
#[derive(Debug, Default)]
struct Named {
    by: HashMap<String, String>,
    held: HashMap<String, usize>,
}

/// The broker's own counters: per destination, and the frames it took and refused.
#[derive(Debug, Default)]
pub struct BrokerStats {
    destinations: Mutex<BTreeMap<String, DestinationCounts>>,
    /// Locked after `destinations` when both are.
    named: Mutex<Named>,
    /// Frames received, any command.
    pub frames: AtomicU64,
    /// ERROR frames sent (each ends a connection).
    pub errors: AtomicU64,
    /// Connections accepted.
    pub connections: AtomicU64,
}

impl BrokerStats {
    /// Each destination's counts, by name (`/queue/NAME`).
    pub fn destinations(&self) -> BTreeMap<String, DestinationCounts> {
        self.destinations
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    /// Admit a destination `client` names (SEND, SUBSCRIBE): one already known, or a new
    /// one while the client holds fewer than [`MAX_DESTINATIONS_PER_CLIENT`] and the
    /// broker fewer than [`MAX_DESTINATIONS`]. At a bound, the destinations that are
    /// empty and that nobody uses (`unused` says so) are forgotten first, their counts
    /// kept under [`FORGOTTEN`]: without the bounds, every new name would grow the
    /// broker's memory for good, and one client could take every name.
    fn admit(&self, dest: &str, client: &str, unused: &dyn Fn(&str) -> bool) -> Result<(), String> {
        if self.known(dest) {
            return Ok(());
        }
        if self.full(client) {
            self.forget_unused(unused);
        }
        let mut d = self.destinations.lock().unwrap_or_else(|p| p.into_inner());
        let mut n = self.named.lock().unwrap_or_else(|p| p.into_inner());
        if d.contains_key(dest) {
            return Ok(());
        }
        if n.held.get(client).copied().unwrap_or(0) >= MAX_DESTINATIONS_PER_CLIENT {
            return Err(format!(
                "one client ({client}) holds {MAX_DESTINATIONS_PER_CLIENT} destinations in use, its most: '{dest}' would be one more"
            ));
        }
        if d.len() >= MAX_DESTINATIONS {
            return Err(format!(
                "this broker holds {MAX_DESTINATIONS} destinations in use, its most: '{dest}' would be one more"
            ));
        }
        d.insert(dest.to_string(), DestinationCounts::default());
        n.by.insert(dest.to_string(), client.to_string());
        *n.held.entry(client.to_string()).or_default() += 1;
        Ok(())
    }

    fn known(&self, dest: &str) -> bool {
        let d = self.destinations.lock().unwrap_or_else(|p| p.into_inner());
        d.contains_key(dest)
    }

    /// Whether `client`, or the broker, is at its bound of destinations.
    fn full(&self, client: &str) -> bool {
        let all = self
            .destinations
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .len();
        let n = self.named.lock().unwrap_or_else(|p| p.into_inner());
        all >= MAX_DESTINATIONS
            || n.held.get(client).copied().unwrap_or(0) >= MAX_DESTINATIONS_PER_CLIENT
    }

    /// Forget every admitted destination that holds nothing (all it took was settled)
    /// and that `unused` says nobody subscribes to; their counts go to [`FORGOTTEN`].
    fn forget_unused(&self, unused: &dyn Fn(&str) -> bool) {
        let empty: Vec<String> = {
            let d = self.destinations.lock().unwrap_or_else(|p| p.into_inner());
            let n = self.named.lock().unwrap_or_else(|p| p.into_inner());
            d.iter()
                .filter(|(k, c)| c.enqueued == c.dequeued && n.by.contains_key(*k))
                .map(|(k, _)| k.clone())
                .collect()
        };
        // Asked with no lock of these held: `unused` takes the broker's own.
        let idle: Vec<String> = empty.into_iter().filter(|k| unused(k)).collect();
        let mut d = self.destinations.lock().unwrap_or_else(|p| p.into_inner());
        let mut n = self.named.lock().unwrap_or_else(|p| p.into_inner());
        for k in idle {
            if d.get(&k).is_none_or(|c| c.enqueued != c.dequeued) {
                continue;
            }
            if let Some(c) = d.remove(&k) {
                let f = d.entry(FORGOTTEN.to_string()).or_default();
                f.enqueued += c.enqueued;
                f.dispatched += c.dispatched;
                f.dequeued += c.dequeued;
                f.requeued += c.requeued;
            }
            if let Some(owner) = n.by.remove(&k)
                && let Some(h) = n.held.get_mut(&owner)
            {
                *h = h.saturating_sub(1);
                if *h == 0 {
                    n.held.remove(&owner);
                }
            }
        }
    }

    /// The counts of `from` (a topic subscription's queue, now gone) added to `into` and
    /// `from` forgotten: the counters keep every message without a row for every
    /// subscription that ever was.
    fn fold(&self, from: &str, into: &str) {
        let mut d = self.destinations.lock().unwrap_or_else(|p| p.into_inner());
        let Some(c) = d.remove(from) else {
            return;
        };
        let to = d.entry(into.to_string()).or_default();
        to.enqueued += c.enqueued;
        to.dispatched += c.dispatched;
        to.dequeued += c.dequeued;
        to.requeued += c.requeued;
    }

    fn count(&self, dest: &str, f: impl FnOnce(&mut DestinationCounts)) {
        let mut d = self.destinations.lock().unwrap_or_else(|p| p.into_inner());
        f(d.entry(dest.to_string()).or_default());
    }
}

/// The topics' subscriptions, and who made each.
#[derive(Default)]
struct Topics {
    /// Per topic, the queues of its subscriptions.
    queues: HashMap<String, std::collections::BTreeSet<String>>,
    /// Per subscription queue, the client that made it.
    owner: HashMap<String, String>,
    /// Per client, the subscriptions it holds.
    held: HashMap<String, usize>,
    total: usize,
}

/// The broker's shared state.
pub(crate) struct Broker {
    store: Arc<dyn Store>,
    settings: Arc<Settings>,
    stats: Arc<BrokerStats>,
    /// Per destination, the connections waiting for its messages.
    waiters: Mutex<HashMap<String, Vec<Weak<Notify>>>>,
    connections: AtomicUsize,
    next_message: AtomicU64,
    header_timeout: Duration,
    limits: Limits,
    /// A CONNECT without a login is taken.
    anonymous: bool,
    /// Per topic, the queues of its subscriptions: a message sent to the topic goes into
    /// each. A durable subscription's queue stays while its subscriber is away.
    topics: Mutex<Topics>,
    next_connection: AtomicU64,
    /// Bytes held in all connections' open transactions.
    tx_bytes: AtomicU64,
    /// Bytes claimed by connections' buffers past [`READING_FREE`], against
    /// `reading_budget`.
    reading: AtomicU64,
    /// [`LARGEST_AT_ONCE`] frames of the largest size.
    reading_budget: u64,
}

impl Broker {
    pub(crate) fn new(
        store: Arc<dyn Store>,
        settings: Arc<Settings>,
        stats: Arc<BrokerStats>,
        header_timeout: Duration,
        anonymous: bool,
    ) -> Broker {
        let reading_budget = (settings.max_body as u64).saturating_mul(LARGEST_AT_ONCE);
        Broker {
            limits: Limits {
                max_body: settings.max_body,
                ..Limits::default()
            },
            store,
            settings,
            stats,
            waiters: Mutex::new(HashMap::new()),
            connections: AtomicUsize::new(0),
            next_message: AtomicU64::new(1),
            header_timeout,
            anonymous,
            topics: Mutex::new(Topics::default()),
            next_connection: AtomicU64::new(1),
            tx_bytes: AtomicU64::new(0),
            reading: AtomicU64::new(0),
            reading_budget,
        }
    }

    /// Wake the connections waiting on `dest`, and forget those that are gone.
    fn wake(&self, dest: &str) {
        let mut w = self.waiters.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(list) = w.get_mut(dest) {
            list.retain(|n| match n.upgrade() {
                Some(n) => {
                    n.notify_one();
                    true
                }
                None => false,
            });
            if list.is_empty() {
                w.remove(dest);
            }
        }
    }

    /// Whether nobody subscribes to `dest`: no connection waits on it, and, a topic, it
    /// has no subscription.
    fn unused(&self, dest: &str) -> bool {
        let waiting = self
            .waiters
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .get(dest)
            .is_some_and(|w| w.iter().any(|n| n.strong_count() > 0));
        let subscribed = self
            .topics
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .queues
            .get(dest)
            .is_some_and(|q| !q.is_empty());
        !waiting && !subscribed
    }

    /// Admit `dest`, named by `client` (see [`BrokerStats::admit`]).
    fn admit(&self, dest: &str, client: &str) -> Result<(), String> {
        self.stats.admit(dest, client, &|d| self.unused(d))
    }

    fn wait_on(&self, dest: &str, notify: &Arc<Notify>) {
        let mut w = self.waiters.lock().unwrap_or_else(|p| p.into_inner());
        let list = w.entry(dest.to_string()).or_default();
        list.retain(|n| n.strong_count() > 0);
        list.push(Arc::downgrade(notify));
    }

    /// One subscription of the connection behind `notify` no longer waits on `dest`; a
    /// destination nobody waits on is forgotten, so names used once do not stay for good.
    fn stop_waiting(&self, dest: &str, notify: &Arc<Notify>) {
        let mut w = self.waiters.lock().unwrap_or_else(|p| p.into_inner());
        let Some(list) = w.get_mut(dest) else {
            return;
        };
        let me = Arc::downgrade(notify);
        if let Some(i) = list.iter().position(|n| n.ptr_eq(&me)) {
            list.swap_remove(i);
        }
        list.retain(|n| n.strong_count() > 0);
        if list.is_empty() {
            w.remove(dest);
        }
    }

    fn key(dest: &str) -> String {
        format!("stomp{dest}")
    }

    /// Store a message and wake its consumers.
    fn enqueue(&self, dest: &str, body: Bytes) -> Result<(), String> {
        self.store
            .queue_push(&Self::key(dest), body)
            .map_err(|e| format!("the store refused the message: {e}"))?;
        self.stats.count(dest, |c| c.enqueued += 1);
        self.wake(dest);
        Ok(())
    }

    /// A message to a queue, or a copy into each of a topic's subscriptions (counted once,
    /// under the topic). The copies go [`FAN_OUT_CHUNK`] at a time, one write each, and
    /// the task yields between them: a topic with 50,000 subscribers costs its time
    /// without holding a worker (and the HTTP side behind it) for all of it.
    async fn publish(&self, dest: &str, body: Bytes) -> Result<(), String> {
        if !dest.starts_with("/topic/") {
            return self.enqueue(dest, body);
        }
        let queues: Vec<String> = self
            .topics
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .queues
            .get(dest)
            .map(|q| q.iter().cloned().collect())
            .unwrap_or_default();
        self.stats.count(dest, |c| c.enqueued += 1);
        for (i, chunk) in queues.chunks(FAN_OUT_CHUNK).enumerate() {
            if i > 0 {
                tokio::task::yield_now().await;
            }
            let keys: Vec<String> = chunk.iter().map(|q| Self::key(q)).collect();
            self.store
                .queue_push_many(&keys, body.clone())
                .map_err(|e| format!("the store refused the message: {e}"))?;
            for queue in chunk {
                self.stats.count(queue, |c| c.enqueued += 1);
                self.wake(queue);
            }
        }
        Ok(())
    }

    /// A topic subscription's queue, made by `client`, joins the topic; past
    /// [`MAX_TOPIC_SUBSCRIPTIONS`] in all or [`MAX_TOPIC_SUBSCRIPTIONS_PER_CLIENT`] of one
    /// client (durable ones outlive their connections) it is refused.
    fn join(&self, topic: &str, queue: &str, client: &str) -> Result<(), String> {
        let mut t = self.topics.lock().unwrap_or_else(|p| p.into_inner());
        if t.queues.get(topic).is_some_and(|q| q.contains(queue)) {
            return Ok(());
        }
        if t.total >= MAX_TOPIC_SUBSCRIPTIONS {
            return Err(format!(
                "at most {MAX_TOPIC_SUBSCRIPTIONS} topic subscriptions on this broker"
            ));
        }
        if t.held.get(client).copied().unwrap_or(0) >= MAX_TOPIC_SUBSCRIPTIONS_PER_CLIENT {
            return Err(format!(
                "one client ({client}) holds at most {MAX_TOPIC_SUBSCRIPTIONS_PER_CLIENT} topic subscriptions"
            ));
        }
        t.queues
            .entry(topic.to_string())
            .or_default()
            .insert(queue.to_string());
        t.owner.insert(queue.to_string(), client.to_string());
        *t.held.entry(client.to_string()).or_default() += 1;
        t.total += 1;
        Ok(())
    }

    /// A topic subscription's queue leaves the topic, and what it held goes with it.
    fn leave(&self, topic: &str, queue: &str) {
        {
            let mut t = self.topics.lock().unwrap_or_else(|p| p.into_inner());
            let removed = t.queues.get_mut(topic).is_some_and(|q| q.remove(queue));
            if t.queues.get(topic).is_some_and(|q| q.is_empty()) {
                t.queues.remove(topic);
            }
            if removed {
                t.total -= 1;
                if let Some(client) = t.owner.remove(queue)
                    && let Some(n) = t.held.get_mut(&client)
                {
                    *n -= 1;
                    if *n == 0 {
                        t.held.remove(&client);
                    }
                }
            }
        }
        let _ = self.store.queue_clear(&Self::key(queue));
        self.stats.fold(queue, &format!("{topic}#ended"));
    }

    /// Remove the topic subscription whose queue's name ends with `suffix` (a durable
    /// subscription by its client id and name), wherever its topic.
    fn forget(&self, suffix: &str) {
        let found: Vec<(String, String)> = self
            .topics
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .queues
            .iter()
            .flat_map(|(t, qs)| qs.iter().map(move |q| (t.clone(), q.clone())))
            .filter(|(_, q)| q.ends_with(suffix))
            .collect();
        for (topic, queue) in found {
            self.leave(&topic, &queue);
        }
    }

    /// A dispatched message given back: ready again, in its place, for its consumers.
    fn requeue(&self, dest: &str, id: u64) {
        if self.store.queue_settle(&Self::key(dest), id, false).is_ok() {
            self.stats.count(dest, |c| c.requeued += 1);
            self.wake(dest);
        }
    }

    /// A dispatched message acknowledged: gone from the store.
    fn acked(&self, dest: &str, id: u64) -> Result<(), End> {
        self.store
            .queue_settle(&Self::key(dest), id, true)
            .map_err(|e| End::Error(format!("the store failed: {e}")))?;
        self.stats.count(dest, |c| c.dequeued += 1);
        Ok(())
    }
}

/// How many connections the broker serves at once, and how many of them one client
/// address may hold; the rest are answered with an ERROR and closed.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Admission {
    pub total: usize,
    pub per_address: usize,
}

/// Accept STOMP connections until `stop`, as many at once as `admission` allows.
pub(crate) async fn serve(
    listener: TcpListener,
    broker: Arc<Broker>,
    admission: Admission,
    stop: CancellationToken,
) {
    let addresses = Addresses::new(admission.per_address);
    let mut conns = tokio::task::JoinSet::new();
    loop {
        let (socket, peer) = tokio::select! {
            a = listener.accept() => match a {
                Ok(a) => a,
                // Out of descriptors and the like: wait a little rather than spin.
                Err(_) => {
                    tokio::time::sleep(Duration::from_millis(10)).await;
                    continue;
                }
            },
            _ = stop.cancelled() => break,
        };
        // Reap what ended, so the set does not grow with every connection ever made.
        while conns.try_join_next().is_some() {}
        let _ = socket.set_nodelay(true);
        broker.stats.connections.fetch_add(1, Ordering::Relaxed);
        let b = broker.clone();
        let stop = stop.clone();
        // Held for the connection's life: its address's place is given back as it ends.
        let ticket = addresses.admit(peer.ip());
        conns.spawn(async move {
            let mut s = socket;
            if b.connections.fetch_add(1, Ordering::AcqRel) >= admission.total {
                let _ = refuse(&b, &mut s, "too many connections").await;
            } else if ticket.is_none() {
                let _ = refuse(&b, &mut s, "too many connections from this address").await;
            } else {
                Connection::new(s, b.clone()).run(stop).await;
            }
            drop(ticket);
            b.connections.fetch_sub(1, Ordering::AcqRel);
        });
    }
    conns.shutdown().await;
}

/// Send an ERROR and close.
async fn refuse(b: &Broker, s: &mut TcpStream, why: &str) -> std::io::Result<()> {
    b.stats.errors.fetch_add(1, Ordering::Relaxed);
    let mut out = Vec::new();
    Frame::new(Command::Error)
        .header("message", why)
        .encode(&mut out);
    s.write_all(&out).await?;
    s.shutdown().await
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum AckMode {
    Auto,
    Client,
    ClientIndividual,
}

struct Subscription {
    id: String,
    /// What its subscriber named: a queue, or a topic.
    dest: String,
    /// Where its messages are taken from: the queue itself, or the subscription's own
    /// queue of the topic.
    queue: String,
    /// A durable subscription to a topic, kept when its subscriber leaves.
    durable: bool,
    ack: AckMode,
    prefetch: usize,
    /// Messages dispatched to it and not settled.
    unsettled: usize,
}

/// A message dispatched and not settled: where it goes back if it is not.
struct Unsettled {
    sub: String,
    dest: String,
    /// The store's id of the message, which it keeps until it is settled.
    id: u64,
}

/// Why a connection ends: the client left, or an ERROR (with its message) must be sent.
enum End {
    Quietly,
    Error(String),
}

struct Connection {
    socket: TcpStream,
    broker: Arc<Broker>,
    buf: stomp::FrameBuffer,
    out: Vec<u8>,
    subs: Vec<Subscription>,
    /// By ack id, in dispatch order.
    unsettled: BTreeMap<u64, Unsettled>,
    transactions: HashMap<String, Vec<(String, Bytes)>>,
    /// Bytes its open transactions hold (also counted in the broker's `tx_bytes`).
    tx_bytes: u64,
    notify: Arc<Notify>,
    /// CONNECT's `client-id`, which names a durable subscription with its name.
    client_id: Option<String>,
    /// Who is connected, for the bounds per client: its login, else its address.
    client: String,
    number: u64,
    /// When the bytes of the frame being read began to come: it must be whole within the
    /// header timeout from then, however the wait for it is interrupted.
    begun: Option<Instant>,
    /// The login was taken: frames may be as large as the broker's limits allow.
    logged_in: bool,
    /// Bytes this connection's buffer claims of the broker's reading budget.
    claimed: u64,
}

impl Connection {
    fn new(socket: TcpStream, broker: Arc<Broker>) -> Connection {
        let client = match socket.peer_addr() {
            Ok(a) => format!("address {}", a.ip()),
            Err(_) => "address unknown".into(),
        };
        let number = broker.next_connection.fetch_add(1, Ordering::Relaxed);
        Connection {
            socket,
            broker,
            buf: stomp::FrameBuffer::with_capacity(4096),
            out: Vec::new(),
            subs: Vec::new(),
            unsettled: BTreeMap::new(),
            transactions: HashMap::new(),
            tx_bytes: 0,
            notify: Arc::new(Notify::new()),
            client_id: None,
            client,
            number,
            begun: None,
            logged_in: false,
            claimed: 0,
        }
    }

    async fn run(mut self, stop: CancellationToken) {
        let end = match self.handshake().await {
            Ok(()) => self.serve(&stop).await,
            Err(e) => e,
        };
        if let End::Error(why) = end {
            self.broker.stats.errors.fetch_add(1, Ordering::Relaxed);
            Frame::new(Command::Error)
                .header("message", &why)
                .encode(&mut self.out);
        }
        let _ = self.flush().await;
        let _ = self.socket.shutdown().await;
        self.claim_reading(0);
        // What its open transactions held is dropped, and given back to the broker's budget.
        self.transactions.clear();
        self.release_tx_bytes(self.tx_bytes);
        // What was dispatched and not settled goes back, as with any broker.
        for (_, u) in std::mem::take(&mut self.unsettled) {
            self.broker.requeue(&u.dest, u.id);
        }
        // A topic subscription ends with its connection, unless it is durable.
        for sub in &self.subs {
            self.broker.stop_waiting(&sub.queue, &self.notify);
            if sub.queue != sub.dest && !sub.durable {
                self.broker.leave(&sub.dest, &sub.queue);
            }
        }
    }

    /// The first frame must be CONNECT (or STOMP), within the header timeout, with
    /// credentials the server knows.
    async fn handshake(&mut self) -> Result<(), End> {
        let deadline = Instant::now() + self.broker.header_timeout;
        let f = self.next_frame(Some(deadline)).await?.ok_or(End::Quietly)?;
        if !matches!(f.command, Command::Connect | Command::Stomp) {
            return Err(End::Error(format!(
                "the first frame must be CONNECT, not {}",
                f.command.name()
            )));
        }
        if let Some(v) = f.get("accept-version")
            && !v.split(',').any(|v| v.trim() == "1.2")
        {
            return Err(End::Error(format!(
                "this broker speaks STOMP 1.2 only (accept-version: {v})"
            )));
        }
        if !self.login_ok(f.get("login"), f.get("passcode")) {
            return Err(End::Error(
                "login refused: unknown user or wrong passcode".into(),
            ));
        }
        if let Some(login) = f.get("login") {
            self.client = format!("login {login}");
        }
        self.logged_in = true;
        self.client_id = f
            .get("client-id")
            .filter(|c| c.len() <= 200)
            .map(str::to_string);
        Frame::new(Command::Connected)
            .header("version", "1.2")
            .header("heart-beat", "0,0")
            .header("server", concat!("loadmix/", env!("CARGO_PKG_VERSION")))
            .encode(&mut self.out);
        self.flush().await.map_err(|_| End::Quietly)
    }

    fn login_ok(&self, login: Option<&str>, passcode: Option<&str>) -> bool {
        let s = &self.broker.settings;
        if s.no_auth || (self.broker.anonymous && login.is_none()) {
            return true;
        }
        let (Some(user), Some(pass)) = (login, passcode) else {
            return false;
        };
        if user == s.admin_user {
            return pass == s.admin_password;
        }
        matches!(self.broker.store.user(user), Ok(Some(u)) if u.password == pass)
    }

    async fn serve(&mut self, stop: &CancellationToken) -> End {
        // Once the client stops taking frames (it closed while messages were on their way
        // to it), what it sent before it left still counts: its last ACKs are read and
        // settled, nothing more is dispatched, and what it was not sent goes back.
        let mut gone = false;
        loop {
            let mut more = false;
            if !gone {
                more = match self.dispatch() {
                    Ok(more) => more,
                    Err(e) => return e,
                };
                gone = self.flush().await.is_err();
            }
            self.out.clear();
            // A frame begun must end within the header timeout from its first byte;
            // between frames a connection may wait for messages as long as it likes.
            let notify = self.notify.clone();
            // A batch cut short goes on at once; a frame that has come is read first.
            let frame = tokio::select! {
                biased;
                f = self.next_frame(None) => f,
                _ = notify.notified() => continue,
                _ = stop.cancelled() => return End::Quietly,
                _ = std::future::ready(()), if more => continue,
            };
            match frame {
                Ok(Some(f)) => {
                    if let Err(e) = self.handle(f).await {
                        return e;
                    }
                }
                Ok(None) => return End::Quietly,
                Err(e) => return e,
            }
        }
    }

    /// The next whole frame, by `first` when given, and within the header timeout of
    /// its first byte; `None` when the client closed between frames.
    async fn next_frame(&mut self, first: Option<Instant>) -> Result<Option<Frame>, End> {
        loop {
            let limits = match self.logged_in {
                true => self.broker.limits,
                false => BEFORE_LOGIN,
            };
            match self.buf.decode(&limits) {
                Ok(Some(f)) => {
                    self.broker.stats.frames.fetch_add(1, Ordering::Relaxed);
                    // What the frame took is given back (its body, kept until handled,
                    // is bounded by one frame a connection).
                    let held = self.buf.tail().capacity();
                    self.claim_reading(held);
                    // What is left is the next frame's start, which came just now.
                    self.begun = (!self.buf.is_empty()).then(Instant::now);
                    return Ok(Some(f));
                }
                Ok(None) => {}
                Err(e) if !self.logged_in => {
                    return Err(End::Error(format!(
                        "malformed frame before login (a CONNECT: a head of at most {} \
                         KiB, no body): {e}",
                        BEFORE_LOGIN.max_head >> 10
                    )));
                }
                Err(e) => return Err(End::Error(format!("malformed frame: {e}"))),
            }
            // Heart-beats (bare line ends) were skipped: only a frame's bytes begin one.
            match self.buf.is_empty() {
                true => self.begun = None,
                false => {
                    self.begun.get_or_insert_with(Instant::now);
                }
            }
            let whole_by = self.begun.map(|b| b + self.broker.header_timeout);
            let deadline = match (first, whole_by) {
                (Some(a), Some(b)) => Some(a.min(b)),
                (a, b) => a.or(b),
            };
            let read = self.socket.read_buf(self.buf.tail());
            let n = match deadline {
                Some(d) => match tokio::time::timeout_at(d, read).await {
                    Ok(r) => r,
                    Err(_) => {
                        return Err(End::Error(format!(
                            "no whole frame within {:?}",
                            self.broker.header_timeout
                        )));
                    }
                },
                None => read.await,
            };
            match n {
                Ok(0) | Err(_) => return Ok(None),
                Ok(_) => {}
            }
            let held = self.buf.tail().capacity();
            if !self.claim_reading(held) {
                return Err(End::Error(format!(
                    "the broker is reading {} MiB of frames from all its connections, its \
                     most: this frame would be more",
                    self.broker.reading_budget >> 20
                )));
            }
        }
    }

    /// Claim what a buffer of `capacity` bytes needs of the broker's reading budget (all
    /// of it past [`READING_FREE`]; none below), giving back what it no longer needs;
    /// false when the budget has not that much left (the claim is then unchanged).
    fn claim_reading(&mut self, capacity: usize) -> bool {
        let want = match capacity > READING_FREE {
            true => capacity as u64,
            false => 0,
        };
        let r = &self.broker.reading;
        if want <= self.claimed {
            r.fetch_sub(self.claimed - want, Ordering::Relaxed);
            self.claimed = want;
            return true;
        }
        let more = want - self.claimed;
        let before = r.fetch_add(more, Ordering::Relaxed);
        if before.saturating_add(more) > self.broker.reading_budget {
            r.fetch_sub(more, Ordering::Relaxed);
            return false;
        }
        self.claimed = want;
        true
    }

    async fn flush(&mut self) -> std::io::Result<()> {
        if self.out.is_empty() {
            return Ok(());
        }
        let r = self.socket.write_all(&self.out).await;
        self.out.clear();
        r
    }

    fn receipt(&mut self, f: &Frame) {
        if let Some(id) = f.get("receipt") {
            Frame::new(Command::Receipt)
                .header("receipt-id", id)
                .encode(&mut self.out);
        }
    }

    async fn handle(&mut self, f: Frame) -> Result<(), End> {
        match f.command {
            Command::Send => self.send(&f).await?,
            Command::Subscribe => self.subscribe(&f)?,
            Command::Unsubscribe => self.unsubscribe(&f)?,
            Command::Ack => self.settle(&f, true)?,
            Command::Nack => self.settle(&f, false)?,
            Command::Begin => self.begin(&f)?,
            Command::Commit => self.commit(&f).await?,
            Command::Abort => {
                self.take_transaction(&f)?;
            }
            Command::Disconnect => {
                self.receipt(&f);
                return Err(End::Quietly);
            }
            other => {
                return Err(End::Error(format!(
                    "{} is not a frame a client sends",
                    other.name()
                )));
            }
        }
        self.receipt(&f);
        Ok(())
    }

    async fn send(&mut self, f: &Frame) -> Result<(), End> {
        let dest = destination(f)?;
        self.broker.admit(&dest, &self.client).map_err(End::Error)?;
        match f.get("transaction") {
            Some(tx) => {
                let held = self
                    .transactions
                    .get_mut(tx)
                    .ok_or_else(|| End::Error(format!("no transaction '{tx}'")))?;
                if held.len() >= MAX_TX_MESSAGES {
                    return Err(End::Error(format!(
                        "a transaction holds at most {MAX_TX_MESSAGES} messages"
                    )));
                }
                let body = pack(f);
                let size = (body.len() + dest.len()) as u64;
                if self.tx_bytes + size > MAX_TX_BYTES {
                    return Err(End::Error(format!(
                        "a connection's open transactions hold at most {} MiB",
                        MAX_TX_BYTES >> 20
                    )));
                }
                let all = self.broker.tx_bytes.fetch_add(size, Ordering::AcqRel) + size;
                if all > MAX_TX_BYTES_ALL {
                    self.broker.tx_bytes.fetch_sub(size, Ordering::AcqRel);
                    return Err(End::Error(format!(
                        "this broker's open transactions hold at most {} MiB in all",
                        MAX_TX_BYTES_ALL >> 20
                    )));
                }
                self.tx_bytes += size;
                held.push((dest, body));
                Ok(())
            }
            None => self
                .broker
                .publish(&dest, pack(f))
                .await
                .map_err(End::Error),
        }
    }

    fn begin(&mut self, f: &Frame) -> Result<(), End> {
        let tx = required(f, "transaction")?;
        if self.transactions.contains_key(tx) {
            return Err(End::Error(format!("transaction '{tx}' is already open")));
        }
        if self.transactions.len() >= MAX_TRANSACTIONS {
            return Err(End::Error(format!(
                "at most {MAX_TRANSACTIONS} transactions open at once"
            )));
        }
        self.transactions.insert(tx.to_string(), Vec::new());
        Ok(())
    }

    /// The messages of the transaction `f` names, no longer held by it (COMMIT, ABORT).
    fn take_transaction(&mut self, f: &Frame) -> Result<Vec<(String, Bytes)>, End> {
        let tx = required(f, "transaction")?;
        let held = self
            .transactions
            .remove(tx)
            .ok_or_else(|| End::Error(format!("no transaction '{tx}'")))?;
        let size: u64 = held.iter().map(|(d, b)| (d.len() + b.len()) as u64).sum();
        self.release_tx_bytes(size);
        Ok(held)
    }

    fn release_tx_bytes(&mut self, size: u64) {
        let size = size.min(self.tx_bytes);
        self.tx_bytes -= size;
        self.broker.tx_bytes.fetch_sub(size, Ordering::AcqRel);
    }

    async fn commit(&mut self, f: &Frame) -> Result<(), End> {
        let held = self.take_transaction(f)?;
        for (dest, body) in held {
            self.broker.publish(&dest, body).await.map_err(End::Error)?;
        }
        Ok(())
    }

    fn subscribe(&mut self, f: &Frame) -> Result<(), End> {
        let id = required(f, "id")?.to_string();
        if id.len() > MAX_SUBSCRIPTION_ID {
            return Err(End::Error(format!(
                "a subscription id is at most {MAX_SUBSCRIPTION_ID} bytes"
            )));
        }
        let dest = destination(f)?;
        self.broker.admit(&dest, &self.client).map_err(End::Error)?;
        if self.subs.iter().any(|s| s.id == id) {
            return Err(End::Error(format!("subscription '{id}' already exists")));
        }
        if self.subs.len() >= MAX_SUBSCRIPTIONS {
            return Err(End::Error(format!(
                "at most {MAX_SUBSCRIPTIONS} subscriptions per connection"
            )));
        }
        let ack = match f.get("ack").unwrap_or("auto") {
            "auto" => AckMode::Auto,
            "client" => AckMode::Client,
            "client-individual" => AckMode::ClientIndividual,
            other => return Err(End::Error(format!("unknown ack mode '{other}'"))),
        };
        let prefetch = match f.get("activemq.prefetchSize").or(f.get("prefetch-count")) {
            None => DEFAULT_PREFETCH,
            Some(p) => p
                .trim()
                .parse::<usize>()
                .ok()
                .filter(|n| *n >= 1)
                .ok_or_else(|| End::Error(format!("prefetch '{p}' is not a positive number")))?
                .min(MAX_UNSETTLED),
        };
        // A topic's subscriber takes from a queue of its own: named by its client id and
        // subscription name when durable (ActiveMQ's headers, or RabbitMQ's durable id),
        // else by its connection and id.
        let name = f.get("activemq.subscriptionName").or(f
            .get("durable")
            .filter(|d| *d == "true")
            .map(|_| id.as_str()));
        let durable = dest.starts_with("/topic/") && name.is_some();
        let queue = match (dest.starts_with("/topic/"), name) {
            (false, _) => dest.clone(),
            (true, Some(n)) => format!(
                "{dest}#durable-{}-{n}",
                self.client_id.as_deref().unwrap_or("")
            ),
            (true, None) => format!("{dest}#{}-{id}", self.number),
        };
        if queue != dest {
            self.broker
                .join(&dest, &queue, &self.client)
                .map_err(End::Error)?;
        }
        self.broker.wait_on(&queue, &self.notify);
        self.subs.push(Subscription {
            id,
            dest,
            queue,
            durable,
            ack,
            prefetch,
            unsettled: 0,
        });
        Ok(())
    }

    fn unsubscribe(&mut self, f: &Frame) -> Result<(), End> {
        let id = required(f, "id")?;
        let Some(i) = self.subs.iter().position(|s| s.id == id) else {
            // ActiveMQ's way: a durable subscription no longer consumed, removed by name.
            if let Some(name) = f.get("activemq.subscriptionName") {
                let client = self.client_id.as_deref().unwrap_or("");
                self.broker.forget(&format!("#durable-{client}-{name}"));
                return Ok(());
            }
            return Err(End::Error(format!("no subscription '{id}'")));
        };
        let sub = self.subs.remove(i);
        self.broker.stop_waiting(&sub.queue, &self.notify);
        // What it was handed and did not settle goes back first, so that a topic queue
        // removed below takes it along.
        let gone: Vec<u64> = self
            .unsettled
            .iter()
            .filter(|(_, u)| u.sub == id)
            .map(|(k, _)| *k)
            .collect();
        for k in gone {
            if let Some(u) = self.unsettled.remove(&k) {
                self.broker.requeue(&u.dest, u.id);
            }
        }
        // A topic's subscription goes with its consumer, unless it is durable and the
        // UNSUBSCRIBE does not say to remove it (ActiveMQ's name, RabbitMQ's durable).
        let remove = f.get("activemq.subscriptionName").is_some()
            || f.get("durable") == Some("true")
            || !sub.durable;
        if sub.queue != sub.dest && remove {
            self.broker.leave(&sub.dest, &sub.queue);
        }
        Ok(())
    }

    /// ACK (`ok`) or NACK a dispatched message; under `ack: client` an ACK settles every
    /// earlier message of its subscription too.
    fn settle(&mut self, f: &Frame, ok: bool) -> Result<(), End> {
        let id = required(f, "id")?;
        let key: u64 = id
            .parse()
            .ok()
            .filter(|k| self.unsettled.contains_key(k))
            .ok_or_else(|| End::Error(format!("no unsettled message '{id}'")))?;
        let sub = self.unsettled[&key].sub.clone();
        let cumulative = self
            .subs
            .iter()
            .any(|s| s.id == sub && s.ack == AckMode::Client);
        let keys: Vec<u64> = match cumulative {
            true => self
                .unsettled
                .range(..=key)
                .filter(|(_, u)| u.sub == sub)
                .map(|(k, _)| *k)
                .collect(),
            false => vec![key],
        };
        for k in keys {
            let Some(u) = self.unsettled.remove(&k) else {
                continue;
            };
            if let Some(s) = self.subs.iter_mut().find(|s| s.id == u.sub) {
                s.unsettled = s.unsettled.saturating_sub(1);
            }
            match ok {
                true => self.broker.acked(&u.dest, u.id)?,
                false => self.broker.requeue(&u.dest, u.id),
            }
        }
        Ok(())
    }

    /// Hand each subscription what its prefetch allows; `true` when a batch was cut at its
    /// bound with messages perhaps still queued, so dispatching must go on once written.
    fn dispatch(&mut self) -> Result<bool, End> {
        let mut more = false;
        for i in 0..self.subs.len() {
            loop {
                let s = &self.subs[i];
                let full = s.ack != AckMode::Auto
                    && (s.unsettled >= s.prefetch || self.unsettled.len() >= MAX_UNSETTLED);
                if full {
                    break;
                }
                // What must still be acknowledged stays stored (taken) until it is.
                let key = Broker::key(&s.queue);
                let popped = self
                    .broker
                    .store
                    .queue_take(&key, s.ack != AckMode::Auto)
                    .map_err(|e| End::Error(format!("the store failed: {e}")))?;
                let Some(taken) = popped else { break };
                self.deliver(i, taken);
                // An auto-ack subscription is not bounded by acks: bound the batch by
                // what one write may hold, and let the socket's pace do the rest.
                if self.subs[i].ack == AckMode::Auto && self.out.len() >= 1 << 20 {
                    more = true;
                    break;
                }
            }
        }
        Ok(more)
    }

    /// Write subscription `i`'s MESSAGE for the stored message `id` (0 under auto ack).
    fn deliver(&mut self, i: usize, taken: Taken) {
        let n = self.broker.next_message.fetch_add(1, Ordering::Relaxed);
        let s = &mut self.subs[i];
        let mut m = Frame::new(Command::Message)
            .header("subscription", &s.id)
            .header("message-id", &n.to_string())
            .header("destination", &s.dest);
        // As ActiveMQ and RabbitMQ say it: handed out before, to a consumer that left
        // without settling it, so a second copy is not a duplicate.
        if taken.redelivered {
            m = m.header("redelivered", "true");
        }
        self.broker.stats.count(&s.queue, |c| c.dispatched += 1);
        match s.ack {
            AckMode::Auto => self.broker.stats.count(&s.queue, |c| c.dequeued += 1),
            AckMode::Client | AckMode::ClientIndividual => {
                m = m.header("ack", &n.to_string());
                s.unsettled += 1;
                self.unsettled.insert(
                    n,
                    Unsettled {
                        sub: s.id.clone(),
                        dest: s.queue.clone(),
                        id: taken.id,
                    },
                );
            }
        }
        // What its sender added (reply-to, correlation-id, its own) goes with it.
        let (headers, payload) = unpack(&taken.body);
        for (k, v) in headers {
            if !OWN_HEADERS.contains(&k.as_str()) {
                m = m.header(&k, &v);
            }
        }
        m.body = payload;
        m.encode(&mut self.out);
    }
}

fn required<'f>(f: &'f Frame, name: &str) -> Result<&'f str, End> {
    f.get(name)
        .ok_or_else(|| End::Error(format!("{} needs a '{name}' header", f.command.name())))
}

/// A frame's destination: `/queue/NAME`, NAME letters, digits, '-', '_' or '.'.
/// Headers of a SEND that are the broker's business, not kept with the message.
const OWN_HEADERS: &[&str] = &[
    "destination",
    "receipt",
    "transaction",
    "content-length",
    "subscription",
    "message-id",
    "ack",
    "redelivered",
];

/// What a stored message starts with when it keeps its sender's headers; a stored body
/// without it (an older store's) is a body alone.
const PACKED: &[u8; 4] = b"LMX1";

/// A SEND's message as the store keeps it: its sender's headers, then its body. The
/// frame's own bounds bound both.
fn pack(f: &Frame) -> Bytes {
    let kept: Vec<&(String, String)> = f
        .headers
        .iter()
        .filter(|(k, _)| !OWN_HEADERS.contains(&k.as_str()))
        .collect();
    if kept.is_empty() && !f.body.starts_with(PACKED) {
        // A copy: the frame's body is a slice of the buffer it was read into, which a
        // queued message would otherwise keep whole for as long as it waits.
        return Bytes::copy_from_slice(&f.body);
    }
    let mut b = Vec::with_capacity(f.body.len() + 64);
    b.extend_from_slice(PACKED);
    b.extend_from_slice(&(kept.len() as u32).to_le_bytes());
    for (k, v) in kept {
        for part in [k, v] {
            b.extend_from_slice(&(part.len() as u32).to_le_bytes());
            b.extend_from_slice(part.as_bytes());
        }
    }
    b.extend_from_slice(&f.body);
    Bytes::from(b)
}

/// A stored message's headers and body; what does not read as packed is a body alone.
fn unpack(stored: &Bytes) -> (Vec<(String, String)>, Bytes) {
    fn read(stored: &[u8]) -> Option<(Vec<(String, String)>, usize)> {
        let mut at = PACKED.len();
        let u32_at = |at: &mut usize| -> Option<usize> {
            let v = u32::from_le_bytes(stored.get(*at..*at + 4)?.try_into().ok()?);
            *at += 4;
            Some(v as usize)
        };
        let n = u32_at(&mut at)?;
        let mut headers = Vec::with_capacity(n.min(64));
        for _ in 0..n {
            let mut pair = [String::new(), String::new()];
            for part in pair.iter_mut() {
                let len = u32_at(&mut at)?;
                let bytes = stored.get(at..at.checked_add(len)?)?;
                *part = String::from_utf8(bytes.to_vec()).ok()?;
                at += len;
            }
            let [k, v] = pair;
            headers.push((k, v));
        }
        Some((headers, at))
    }
    if !stored.starts_with(PACKED) {
        return (Vec::new(), stored.clone());
    }
    match read(stored) {
        Some((headers, at)) => (headers, stored.slice(at..)),
        None => (Vec::new(), stored.clone()),
    }
}

fn destination(f: &Frame) -> Result<String, End> {
    let d = required(f, "destination")?;
    match d.strip_prefix("/queue/").or(d.strip_prefix("/topic/")) {
        Some(name)
            if !name.is_empty()
                && name.len() <= 200
                && name
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b"-_.".contains(&b)) =>
        {
            Ok(d.to_string())
        }
        _ => Err(End::Error(format!(
            "'{d}' is not a destination here: /queue/NAME or /topic/NAME, NAME letters, digits, '-', '_' or '.'"
        ))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_message_keeps_its_senders_headers_and_a_bare_body_stays_bare() {
        let f = Frame::new(Command::Send)
            .header("destination", "/queue/a")
            .header("reply-to", "/queue/r")
            .header("correlation-id", "c-1");
        let mut f = f;
        f.body = Bytes::from_static(b"LMX1 looks packed but is a body");
        let (headers, body) = unpack(&pack(&f));
        assert_eq!(
            headers,
            vec![
                ("reply-to".to_string(), "/queue/r".to_string()),
                ("correlation-id".to_string(), "c-1".to_string())
            ]
        );
        assert_eq!(body, f.body);
        // A body with nothing to keep is stored as it came, and read back as it is.
        let mut bare = Frame::new(Command::Send).header("destination", "/queue/a");
        bare.body = Bytes::from_static(b"plain");
        assert_eq!(pack(&bare), bare.body);
        assert_eq!(unpack(&bare.body), (Vec::new(), bare.body.clone()));
        // A packed message cut short is a body, not a panic.
        let cut = pack(&f).slice(..10);
        assert_eq!(unpack(&cut).1, cut);
    }

    #[test]
    fn a_stored_message_does_not_share_the_buffer_it_was_read_into() {
        use bytes::BytesMut;
        // A small SEND read with a large one behind it, as a connection's buffer holds.
        let mut buf = BytesMut::new();
        buf.extend_from_slice(b"SEND\ndestination:/queue/a\n\nsmall\0");
        buf.extend_from_slice(&vec![b'x'; 1 << 20]);
        let whole = buf.as_ptr() as usize..buf.as_ptr() as usize + buf.len();
        let f = crate::formats::stomp::decode(&mut buf, &Limits::default())
            .unwrap()
            .unwrap();
        let kept = pack(&f);
        assert_eq!(kept, "small");
        assert!(
            !whole.contains(&(kept.as_ptr() as usize)),
            "the kept body is a slice of the connection's buffer"
        );
    }

    /// A broker on a memory store taking anyone, served on a free port until `stop`.
    async fn served(
        max_body: usize,
    ) -> (
        Arc<Broker>,
        std::net::SocketAddr,
        CancellationToken,
        tokio::task::JoinHandle<()>,
    ) {
        let settings = Arc::new(Settings {
            context: "/cosmo".into(),
            admin_user: "root".into(),
            admin_password: "cosmo".into(),
            no_auth: true,
            max_body,
        });
        let broker = Arc::new(Broker::new(
            Arc::new(super::super::store::MemoryStore::new()),
            settings,
            Arc::new(BrokerStats::default()),
            Duration::from_secs(10),
            true,
        ));
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let stop = CancellationToken::new();
        let admission = Admission {
            total: 10,
            per_address: 10,
        };
        let served = tokio::spawn(serve(listener, broker.clone(), admission, stop.clone()));
        (broker, addr, stop, served)
    }

    /// `f` against a broker served on a one-thread runtime (another task runs only when
    /// the one running yields), stopped after it.
    fn on_broker<F, Fut>(max_body: usize, f: F)
    where
        F: FnOnce(Arc<Broker>, std::net::SocketAddr) -> Fut,
        Fut: std::future::Future<Output = ()>,
    {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        rt.block_on(async {
            let (broker, addr, stop, served) = served(max_body).await;
            f(broker, addr).await;
            stop.cancel();
            served.await.unwrap();
        });
    }

    /// Read from `s` until what came holds `until`.
    async fn read_until(s: &mut TcpStream, got: &mut Vec<u8>, until: &str) {
        use tokio::io::AsyncReadExt;
        while !String::from_utf8_lossy(got).contains(until) {
            let mut b = [0u8; 4096];
            let n = s.read(&mut b).await.unwrap();
            assert!(
                n > 0,
                "closed before {until}: {}",
                String::from_utf8_lossy(got)
            );
            got.extend_from_slice(&b[..n]);
        }
    }

    /// Wait until the broker serves no connection.
    async fn all_gone(broker: &Broker) {
        for _ in 0..1000 {
            if broker.connections.load(Ordering::Acquire) == 0 {
                return;
            }
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
        panic!("a connection is still served");
    }

    #[test]
    fn subscriptions_that_ended_leave_nothing_waiting_behind() {
        use tokio::io::AsyncReadExt;
        on_broker(1 << 20, |broker, addr| async move {
            let waiting = || broker.waiters.lock().unwrap().len();
            let mut s = TcpStream::connect(addr).await.unwrap();
            let mut frames = String::from("CONNECT\naccept-version:1.2\n\n\0");
            for i in 0..50 {
                let (id, dest) = (
                    format!("s{i}-{}", "x".repeat(200)),
                    ["/topic/t", "/queue/q"][i % 2],
                );
                frames.push_str(&format!(
                    "SUBSCRIBE\nid:{id}\ndestination:{dest}\n\n\0SEND\ndestination:/topic/t\n\nm\0UNSUBSCRIBE\nid:{id}\n\n\0"
                ));
            }
            // One kept to the end: its connection's end must take it along too.
            frames.push_str("SUBSCRIBE\nid:last\ndestination:/topic/t\n\n\0");
            frames.push_str("SEND\ndestination:/queue/x\nreceipt:r\n\nm\0");
            s.write_all(frames.as_bytes()).await.unwrap();
            let mut got = Vec::new();
            read_until(&mut s, &mut got, "receipt-id:r").await;
            assert_eq!(waiting(), 1, "only the subscription still held waits");
            // The counters keep every copy, not a row for every subscription that was.
            let rows = broker.stats.destinations();
            assert_eq!(rows.len(), 4, "{:?}", rows.keys());
            let copies: u64 = rows
                .iter()
                .filter(|(n, _)| n.starts_with("/topic/t#"))
                .map(|(_, c)| c.enqueued)
                .sum();
            assert_eq!((rows["/topic/t"].enqueued, copies), (50, 25), "{rows:?}");
            s.write_all(b"DISCONNECT\n\n\0").await.unwrap();
            let _ = s.read_to_end(&mut got).await;
            all_gone(&broker).await;
            assert_eq!(waiting(), 0);
        });
    }

    #[test]
    fn open_transactions_are_bounded_in_bytes_and_give_them_back() {
        use tokio::io::AsyncReadExt;
        on_broker(8 << 20, |broker, addr| async move {
            let held = || broker.tx_bytes.load(Ordering::Acquire);
            let body = vec![b'x'; 4 << 20];
            let send = |tx: &str, receipt: &str| {
                let mut f = format!(
                    "SEND\ndestination:/queue/t\ntransaction:{tx}\nreceipt:{receipt}\ncontent-length:{}\n\n",
                    body.len()
                )
                .into_bytes();
                f.extend_from_slice(&body);
                f.push(0);
                f
            };
            let mut s = TcpStream::connect(addr).await.unwrap();
            let mut got = Vec::new();
            s.write_all(b"CONNECT\naccept-version:1.2\n\n\0BEGIN\ntransaction:a\n\n\0")
                .await
                .unwrap();
            // 15 × 4 MiB fit in 64 MiB; ABORT gives them back.
            for i in 0..15 {
                s.write_all(&send("a", &format!("a{i}"))).await.unwrap();
            }
            read_until(&mut s, &mut got, "receipt-id:a14").await;
            assert!(held() > 60 << 20, "{}", held());
            s.write_all(b"ABORT\ntransaction:a\nreceipt:gone\n\n\0")
                .await
                .unwrap();
            read_until(&mut s, &mut got, "receipt-id:gone").await;
            assert_eq!(held(), 0);
            // The 16th 4 MiB message (with its destination) is one too many.
            s.write_all(b"BEGIN\ntransaction:b\n\n\0").await.unwrap();
            // Each awaited, so that nothing unread is left when the broker closes.
            for i in 0..15 {
                s.write_all(&send("b", &format!("b{i}"))).await.unwrap();
                read_until(&mut s, &mut got, &format!("receipt-id:b{i}\n")).await;
            }
            s.write_all(&send("b", "b15")).await.unwrap();
            let _ = s.read_to_end(&mut got).await;
            let said = String::from_utf8_lossy(&got).into_owned();
            assert!(said.contains("hold at most 64 MiB"), "{said}");
            assert!(!said.contains("receipt-id:b15"), "{said}");
            // The connection ended with a transaction open: its bytes came back.
            all_gone(&broker).await;
            assert_eq!(held(), 0);
        });
    }

    #[test]
    fn a_topics_fan_out_lets_other_tasks_run_between_its_writes() {
        on_broker(1 << 20, |broker, _| async move {
            let n = FAN_OUT_CHUNK * 8;
            for i in 0..n {
                broker
                    .join("/topic/t", &format!("/topic/t#{i}"), "test")
                    .unwrap();
            }
            // One thread: another task runs only when the publisher yields.
            let ran = Arc::new(AtomicU64::new(0));
            let (counter, done) = (ran.clone(), CancellationToken::new());
            let watching = done.clone();
            let other = tokio::spawn(async move {
                while !watching.is_cancelled() {
                    counter.fetch_add(1, Ordering::Relaxed);
                    tokio::task::yield_now().await;
                }
            });
            tokio::task::yield_now().await;
            let before = ran.load(Ordering::Relaxed);
            broker
                .publish("/topic/t", Bytes::from_static(b"m"))
                .await
                .unwrap();
            let during = ran.load(Ordering::Relaxed) - before;
            done.cancel();
            other.await.unwrap();
            assert!(during >= 7, "the other task ran {during} times in 8 chunks");
            for i in [0, n - 1] {
                let q = Broker::key(&format!("/topic/t#{i}"));
                assert!(broker.store.queue_pop(&q).unwrap().is_some());
            }
        });
    }

    #[test]
    fn one_client_holds_at_most_its_share_of_the_topic_subscriptions() {
        on_broker(1 << 20, |broker, _| async move {
            let q = |who: &str, i: usize| format!("/topic/t#{who}-{i}");
            for i in 0..MAX_TOPIC_SUBSCRIPTIONS_PER_CLIENT {
                broker.join("/topic/t", &q("a", i), "login a").unwrap();
            }
            let e = broker
                .join("/topic/t", &q("a", usize::MAX), "login a")
                .unwrap_err();
            assert!(e.contains("one client (login a) holds at most"), "{e}");
            // Another client still subscribes; one of the first's leaving makes room.
            broker.join("/topic/u", &q("b", 0), "login b").unwrap();
            broker.leave("/topic/t", &q("a", 0));
            broker
                .join("/topic/t", &q("a", usize::MAX), "login a")
                .unwrap();
            // Joining again what it holds is no new subscription.
            broker.join("/topic/t", &q("a", 1), "login a").unwrap();
            // Ten accounts at their share leave room for the rest: it takes a hundred.
            for who in ["c", "d", "e", "f", "g", "h", "i", "j", "k"] {
                for i in 0..MAX_TOPIC_SUBSCRIPTIONS_PER_CLIENT {
                    broker
                        .join("/topic/t", &q(who, i), &format!("login {who}"))
                        .unwrap();
                }
            }
            broker.join("/topic/t", &q("z", 0), "login z").unwrap();
        });
    }
}
