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
use tokio::io::AsyncWriteExt;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;

use super::guard::Addresses;
use super::settings::Settings;
use super::store::Store;
use loadmix_formats::stomp::{Command, Frame, Limits};

mod connection;
mod stored;

use connection::{Connection, End};

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
    /// Bytes claimed now by connections' buffers past [`READING_FREE`], against the
    /// broker's reading budget: the frames being read from all connections at once.
    pub reading: AtomicU64,
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

#[cfg(test)]
mod tests {
    use super::*;

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
