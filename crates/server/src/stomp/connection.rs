//! One STOMP connection of the embedded broker: its frames read within their bounds
//! (before login only what a CONNECT needs), CONNECT first, then SEND, SUBSCRIBE, ACK,
//! NACK, transactions and DISCONNECT, messages dispatched to its subscriptions within
//! their prefetch, what it did not settle given back when it ends.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::sync::atomic::Ordering;

use bytes::Bytes;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::sync::Notify;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use crate::store::Taken;
use loadmix_formats::stomp::{self, Command, Frame};

use super::stored::{OWN_HEADERS, pack, unpack};
use super::{
    BEFORE_LOGIN, Broker, DEFAULT_PREFETCH, MAX_SUBSCRIPTION_ID, MAX_SUBSCRIPTIONS,
    MAX_TRANSACTIONS, MAX_TX_BYTES, MAX_TX_BYTES_ALL, MAX_TX_MESSAGES, MAX_UNSETTLED, READING_FREE,
};

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
pub(super) enum End {
    Quietly,
    Error(String),
}

pub(super) struct Connection {
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
    pub(super) fn new(socket: TcpStream, broker: Arc<Broker>) -> Connection {
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

    pub(super) async fn run(mut self, stop: CancellationToken) {
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
        let r = &self.broker.stats.reading;
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

/// A frame's destination: `/queue/NAME` or `/topic/NAME`, NAME letters, digits, '-', '_' or '.'.
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
