//! A STOMP producer's sends: each SEND with its receipt, a window of receipts waited
//! for at once, transactions (BEGIN, COMMIT, ABORT) with the commit timed apart, and
//! what the ledger is told of each send that was written, confirmed or failed.

use std::time::Duration;

use rand::rngs::Xoshiro256PlusPlus;
use tokio::time::Instant;

use crate::answer::Answer;
use crate::formats::stomp::{Command, Frame};
use crate::protocol::Outcome;
use crate::protocol::broker::{Failed, body, done, producer, render};

use crate::protocol::contract::Reach;
use crate::transport::ErrorClass;
use crate::workload::protocols::STAMP_LEN;

use super::wire::{broker_error, persistence, read, write};
use super::{Pending, Read, Send, StompClass, StompVu, Tx};

impl StompVu {
    /// Read what the broker sent until at most `keep` sends wait for their receipts: what
    /// has come at once, then, while more wait, the oldest one's receipt (or its timeout,
    /// a failed step). A broken connection fails the exchange.
    pub(super) async fn settle(
        &mut self,
        class: &StompClass,
        keep: usize,
        timeout: Duration,
    ) -> Result<(), Failed> {
        loop {
            let Some(front) = self.pending.front() else {
                return Ok(());
            };
            let blocking = self.pending.len() > keep;
            let by = match blocking {
                true => front.written + timeout,
                false => Instant::now(),
            };
            let Some(link) = self.link.as_mut() else {
                return Err(Failed::no_connection());
            };
            let r = match read(link, &class.limits, by).await {
                Ok(r) => r,
                Err(f) if f.class == ErrorClass::Timeout && !blocking => return Ok(()),
                Err(f) if f.class == ErrorClass::Timeout => {
                    let detail = format!("no RECEIPT within {timeout:?} of the send");
                    self.fail_front(class, ErrorClass::Timeout, &detail);
                    continue;
                }
                Err(f) => return Err(f),
            };
            match r.frame.command {
                Command::Receipt => self.on_receipt(class, &r),
                Command::Message => self.keep_message(r)?,
                Command::Error => return Err(broker_error(&r.frame)),
                _ => {}
            }
        }
    }

    /// A RECEIPT for a windowed send: its step, timed from the send's write.
    pub(super) fn on_receipt(&mut self, class: &StompClass, r: &Read) {
        let Some(id) = r
            .frame
            .get("receipt-id")
            .and_then(|v| v.parse::<u64>().ok())
        else {
            return;
        };
        // Receipts come in order: the oldest is nearly always the one.
        let Some(i) = self.pending.iter().position(|p| p.receipt == id) else {
            return;
        };
        if let Some(p) = self.pending.remove(i) {
            let o = done(class.receipt, 0, r.bytes, p.written.elapsed());
            self.settled.push((class.params.label_confirm, o));
        }
    }

    /// Commit the open transaction, and wait for the commit's receipt: a step of its own.
    /// A commit that fails fails every send in it.
    pub(super) async fn commit(
        &mut self,
        class: &StompClass,
        timeout: Duration,
    ) -> Result<(), Failed> {
        let Some(tx) = self.tx.take() else {
            return Ok(());
        };
        let want = self.next_receipt.to_string();
        self.next_receipt += 1;
        let mut wire = Vec::new();
        Frame::new(Command::Commit)
            .header("transaction", &tx.id)
            .header("receipt", &want)
            .encode(&mut wire);
        let start = Instant::now();
        let Some(link) = self.link.as_mut() else {
            self.tx = Some(tx);
            return Err(Failed::no_connection());
        };
        let sent = wire.len() as u64;
        let done_ = match write(link, &wire, start + timeout).await {
            Ok(()) => self.confirm(class, &want, start + timeout, sent).await,
            Err(f) => Err(f),
        };
        match done_ {
            Ok(received) => {
                let o = done(class.receipt, sent, received, start.elapsed());
                self.settled.push((class.params.label_commit, o));
                Ok(())
            }
            Err(f) => {
                let mut o = Outcome::failed(f.class, f.detail.clone());
                o.latency = start.elapsed();
                self.settled.push((class.params.label_commit, o));
                self.tx = Some(tx);
                self.abort_tx(class);
                Err(f)
            }
        }
    }

    /// The open transaction will never be committed: its sends failed, in the ledger.
    pub(super) fn abort_tx(&mut self, class: &StompClass) {
        let Some(tx) = self.tx.take() else {
            return;
        };
        let from = producer(class.index, &self.ids);
        if let Some(l) = self.ledger.as_mut() {
            for (seq, dest) in &tx.sends {
                l.send_failed(dest, from, *seq);
            }
        }
    }

    /// Begin a transaction for the sends to come, unless one is open: the bytes written.
    pub(super) async fn begin(&mut self, deadline: Instant) -> Result<u64, Failed> {
        if self.tx.is_some() {
            return Ok(0);
        }
        let id = format!("tx-{}", self.next_tx);
        self.next_tx += 1;
        let mut wire = Vec::new();
        Frame::new(Command::Begin)
            .header("transaction", &id)
            .encode(&mut wire);
        let Some(link) = self.link.as_mut() else {
            return Err(Failed::no_connection());
        };
        write(link, &wire, deadline).await?;
        self.tx = Some(Box::new(Tx {
            id,
            sends: Vec::new(),
        }));
        Ok(wire.len() as u64)
    }

    /// The oldest waiting send failed: a failed step, and a failed send in the ledger.
    pub(super) fn fail_front(&mut self, class: &StompClass, why: ErrorClass, detail: &str) {
        let Some(p) = self.pending.pop_front() else {
            return;
        };
        let from = producer(class.index, &self.ids);
        if let Some(l) = self.ledger.as_mut() {
            l.send_failed(&p.destination, from, p.seq);
        }
        let mut o = Outcome::failed(why, detail.to_string());
        o.latency = p.written.elapsed();
        self.settled.push((class.params.label_confirm, o));
    }

    /// Every waiting send failed (its connection ended before the receipt came).
    pub(super) fn fail_pending(&mut self, class: &StompClass, why: ErrorClass, detail: &str) {
        while !self.pending.is_empty() {
            self.fail_front(class, why, detail);
        }
    }

    pub(super) async fn send(
        &mut self,
        class: &StompClass,
        conn: &Reach,
        s: Send<'_>,
        rng: &mut Xoshiro256PlusPlus,
    ) -> Result<Outcome, Failed> {
        self.ensure(class, conn).await?;
        let windowed = s.receipt && class.params.max_pending > 1;
        if windowed {
            let keep = class.params.max_pending as usize - 1;
            self.settle(class, keep, conn.timeouts().request).await?;
        }
        let dest = render(
            s.destination,
            &class.class,
            &self.ids,
            u64::from(self.sent),
            rng,
        );
        let size = (s.size.sample(rng).max(STAMP_LEN as f64) as usize).min(class.limits.max_body);
        let seq = self.sent;
        self.sent = self.sent.saturating_add(1);
        let from = producer(class.index, &self.ids);
        let want = self.next_receipt.to_string();
        self.next_receipt += 1;
        let mut f = persistence(
            Frame::new(Command::Send).header("destination", &dest),
            s.persistent,
        );
        for (name, t) in s.headers {
            let value = render(t, &class.class, &self.ids, u64::from(seq), rng);
            f = f.header(name, &value);
        }
        let in_tx = class.params.transaction > 0;
        let mut begun = 0;
        if in_tx {
            begun = self.begin(Instant::now() + conn.timeouts().request).await?;
            if let Some(tx) = &self.tx {
                f = f.header("transaction", &tx.id);
            }
        } else if s.receipt {
            f = f.header("receipt", &want);
        }
        let mut wire = Vec::with_capacity(size + 128);
        // The stamp is written at the last moment, so its send time is the write's.
        f.body = body(class.nonce, class.clock, from, seq, size);
        f.encode(&mut wire);
        let deadline = Instant::now() + conn.timeouts().request;
        let Some(link) = self.link.as_mut() else {
            return Err(Failed::no_connection());
        };
        let start = Instant::now();
        write(link, &wire, deadline).await?;
        let ledger = self.ledger.get_or_insert_with(Box::default);
        ledger.sent_in(&dest, from, seq, super::broker::phase_now(&class.phases));
        let sent = wire.len() as u64 + begun;
        if in_tx {
            // The send is its write; the commit that ends its transaction is timed apart.
            let elapsed = start.elapsed();
            let full = self.tx.as_mut().is_some_and(|tx| {
                tx.sends.push((seq, dest.into()));
                tx.sends.len() >= class.params.transaction as usize
            });
            if full {
                self.commit(class, conn.timeouts().request).await?;
            }
            return Ok(done(Answer::NONE, sent, 0, elapsed));
        }
        if !s.receipt {
            return Ok(done(Answer::NONE, sent, 0, start.elapsed()));
        }
        if windowed {
            self.pending.push_back(Pending {
                receipt: self.next_receipt - 1,
                seq,
                destination: dest.into(),
                written: start,
            });
            return Ok(done(Answer::NONE, sent, 0, start.elapsed()));
        }
        let confirmed = self.confirm(class, &want, deadline, sent).await;
        let elapsed = start.elapsed();
        if confirmed.is_err()
            && let Some(l) = self.ledger.as_mut()
        {
            l.send_failed(&dest, from, seq);
        }
        confirmed.map(|received| done(class.receipt, sent, received, elapsed))
    }

    /// The broker's RECEIPT `want` for a send of `sent` bytes: the bytes read till then.
    /// MESSAGE frames that come first are kept for the next receive.
    pub(super) async fn confirm(
        &mut self,
        class: &StompClass,
        want: &str,
        deadline: Instant,
        sent: u64,
    ) -> Result<u64, Failed> {
        let mut received = 0u64;
        loop {
            let Some(link) = self.link.as_mut() else {
                return Err(Failed::no_connection());
            };
            let r = read(link, &class.limits, deadline)
                .await
                .map_err(|f| f.with_bytes(sent, received))?;
            received += r.bytes;
            match r.frame.command {
                Command::Receipt if r.frame.get("receipt-id") == Some(want) => {
                    return Ok(received);
                }
                Command::Message => self
                    .keep_message(r)
                    .map_err(|f| f.with_bytes(sent, received))?,
                Command::Error => return Err(broker_error(&r.frame).with_bytes(sent, received)),
                Command::Receipt => self.on_receipt(class, &r),
                _ => {}
            }
        }
    }
}
