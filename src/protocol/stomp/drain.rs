//! The run's own STOMP destinations drained at the round's end: each read to its end (at
//! most what was sent to it and a bound more), durable subscriptions removed, what was
//! taken put in the ledger as drained.

use tokio::time::Instant;

use crate::formats::stomp::{Command, Frame, Limits};
use crate::ledger::Ledger;
use crate::protocol::broker::Queue;
use crate::protocol::broker::{self};

use crate::protocol::contract::Reach;
use crate::transport::ErrorClass;
use crate::workload::protocols::AckMode;

use super::wire::{Subscription, broker_error, open, read, subscribe, unsubscribe_durable, write};

/// STOMP's drain, as the teardown calls it.
pub(crate) struct Drain;

#[async_trait::async_trait]
impl broker::Drainer for Drain {
    fn protocol(&self) -> &'static str {
        "stomp"
    }

    /// The teardown's drain of one destination: subscribe with automatic acknowledgement and
    /// take every message until none has come for `idle` (or `until`), each in `ledger`; a
    /// durable topic subscription is subscribed to again as its subscriber, and removed when
    /// `delete`. Then leave with a receipt, so the broker has settled them. How many were
    /// taken is added to `taken` as it comes (a failed drain's count stands); whether a
    /// subscription was removed.
    async fn drain(
        &self,
        q: &Queue,
        conn: &Reach,
        bounds: broker::Bounds<'_>,
        delete: bool,
        ledger: &mut Ledger,
        taken: &mut u64,
    ) -> Result<bool, String> {
        let limits = Limits::default();
        let client_id = q.durable.as_ref().map(|d| d.0.as_str());
        let mut link = open(&limits, &q.session, conn, client_id)
            .await
            .map_err(|f| f.detail)?;
        let name = q.durable.as_ref().map(|d| d.1.as_str());
        let sub = Subscription {
            id: name.unwrap_or("drain"),
            dest: &q.name,
            ack: AckMode::Auto,
            prefetch: "1000",
            durable: name,
        };
        let rq = conn.timeouts().request;
        subscribe(&mut link, &sub, None, Instant::now() + rq)
            .await
            .map_err(|f| f.detail)?;
        let as_named = q.ledger_name.as_deref().unwrap_or(&q.name);
        loop {
            let by = (Instant::now() + bounds.idle).min(bounds.until.at);
            let r = match read(&mut link, &limits, by).await {
                Ok(r) => r,
                // Quiet for `idle`: drained. Cut off by the drain's time instead: not.
                Err(f) if f.class == ErrorClass::Timeout && bounds.until.passed() => {
                    return Err(broker::cut_off(&q.name, *taken, bounds.until));
                }
                Err(f) if f.class == ErrorClass::Timeout => break,
                Err(f) => return Err(f.detail),
            };
            match r.frame.command {
                Command::Message => {
                    *taken += 1;
                    broker::drained(ledger, as_named, q.nonce, &r.frame.body)
                }
                Command::Error => return Err(broker_error(&r.frame).detail),
                _ => {}
            }
            if let Some(why) = bounds.stop(&q.name, *taken) {
                return Err(why);
            }
        }
        let mut wire = Vec::new();
        let removed = delete && name.is_some();
        if let Some(name) = name.filter(|_| delete) {
            unsubscribe_durable(&link.server, name, &mut wire);
        }
        Frame::new(Command::Disconnect)
            .header("receipt", "drained")
            .encode(&mut wire);
        let deadline = Instant::now() + rq;
        write(&mut link, &wire, deadline)
            .await
            .map_err(|f| f.detail)?;
        // Messages after the DISCONNECT: a broker that answers with more of them, and never
        // with the RECEIPT, is said to, not called silent.
        let mut after = 0u64;
        loop {
            let r = match read(&mut link, &limits, deadline).await {
                Ok(r) => r,
                Err(f) if f.class == ErrorClass::Timeout && after > 0 => {
                    return Err(format!(
                        "{}: the broker sent {after} more messages after the DISCONNECT and no RECEIPT within {rq:?}",
                        q.name
                    ));
                }
                Err(f) => return Err(f.detail),
            };
            match r.frame.command {
                Command::Receipt => return Ok(removed),
                // Dispatched before the broker read the DISCONNECT: taken all the same, up to
                // the drain's bound (a broker flooding it would keep the RECEIPT back).
                Command::Message => {
                    after += 1;
                    *taken += 1;
                    broker::drained(ledger, as_named, q.nonce, &r.frame.body);
                    if let Some(why) = bounds.stop(&q.name, *taken) {
                        return Err(why);
                    }
                }
                Command::Error => return Err(broker_error(&r.frame).detail),
                _ => {}
            }
        }
    }
}
