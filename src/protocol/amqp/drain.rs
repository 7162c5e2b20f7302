//! The run's own AMQP queues drained at the round's end: each read to its end (at most
//! what was sent to it and a bound more), what was taken put in the ledger as drained,
//! the queues declared by the run deleted.

use futures_util::StreamExt as _;
use lapin::options::{BasicConsumeOptions, BasicQosOptions, QueueDeleteOptions};
use lapin::types::{FieldTable, ShortString};
use tokio::time::Instant;

use crate::protocol::contract::Reach;

use crate::ledger::Ledger;
use crate::protocol::broker::Queue;
use crate::protocol::broker::{self};

use super::failed;
use super::wire::{connect, within};

/// AMQP's drain, as the teardown calls it.
pub(crate) struct Drain;

#[async_trait::async_trait]
impl broker::Drainer for Drain {
    fn protocol(&self) -> &'static str {
        "amqp"
    }

    /// The teardown's drain of one queue: consume with automatic acknowledgement until
    /// nothing has come for `idle` (or `until`), each message in `ledger`; then delete the
    /// queue when `delete`. How many were taken is added to `taken` as they come (a failed
    /// drain's count stands); whether the queue was deleted.
    async fn drain(
        &self,
        q: &Queue,
        conn: &Reach,
        bounds: broker::Bounds<'_>,
        delete: bool,
        ledger: &mut Ledger,
        taken: &mut u64,
    ) -> Result<bool, String> {
        // Only a queue the run's declaration created is the run's to delete.
        let delete = delete && q.created;
        let (idle, until) = (bounds.idle, bounds.until);
        let rq = conn.timeouts().request;
        let connection = connect(&q.session, conn).await.map_err(|f| f.detail)?;
        let channel = within(rq, connection.create_channel(), "the channel")
            .await
            .map_err(|f| f.detail)?
            .map_err(|e| failed("channel.open", e).detail)?;
        let step = |what: &'static str| move |e: lapin::Error| failed(what, e).detail;
        within(
            rq,
            channel.basic_qos(1000, BasicQosOptions::default()),
            "basic.qos",
        )
        .await
        .map_err(|f| f.detail)?
        .map_err(step("basic.qos"))?;
        let mut consumer = within(
            rq,
            channel.basic_consume(
                ShortString::from(q.name.as_str()),
                ShortString::from("loadmix-drain"),
                BasicConsumeOptions {
                    no_ack: true,
                    ..BasicConsumeOptions::default()
                },
                FieldTable::default(),
            ),
            "basic.consume",
        )
        .await
        .map_err(|f| f.detail)?
        .map_err(step("basic.consume"))?;
        loop {
            let by = (Instant::now() + idle).min(until.at);
            let next = match tokio::time::timeout_at(by, consumer.next()).await {
                Err(_) if until.passed() => {
                    return Err(super::broker::cut_off(&q.name, *taken, until));
                }
                Err(_) => break,
                Ok(n) => n,
            };
            match next {
                Some(Ok(d)) => {
                    *taken += 1;
                    broker::drained(ledger, &q.name, q.nonce, &d.data);
                }
                Some(Err(e)) => return Err(failed("basic.consume", e).detail),
                None => break,
            }
            // A flood that never pauses is cut off too (what was taken is counted).
            if let Some(why) = bounds.stop(&q.name, *taken) {
                return Err(why);
            }
        }
        if !delete {
            return Ok(false);
        }
        within(
            rq,
            channel.queue_delete(
                ShortString::from(q.name.as_str()),
                QueueDeleteOptions::default(),
            ),
            "queue.delete",
        )
        .await
        .map_err(|f| f.detail)?
        .map_err(step("queue.delete"))?;
        Ok(true)
    }
}
