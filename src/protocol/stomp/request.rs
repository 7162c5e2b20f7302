//! STOMP request-reply: a requester's request to a service's queue with `reply-to` and
//! `correlation-id`, timed to its reply; a service's answer to where the request says.

use std::time::Duration;

use rand::rngs::Xoshiro256PlusPlus;
use tokio::time::Instant;

use crate::formats::stomp::{Command, Frame};
use crate::protocol::Outcome;
use crate::protocol::broker::{self, Failed, body, done, producer, render};

use crate::protocol::contract::Reach;
use crate::transport::ErrorClass;
use crate::workload::Dist;
use crate::workload::protocols::STAMP_LEN;

use super::wire::{broker_error, persistence, write};
use super::{Read, Request, StompClass, StompVu};

impl StompVu {
    /// A request with `reply-to` and a `correlation-id` of this run, user and sequence
    /// number, then its reply: timed from the request's write to the reply's arrival. A
    /// reply to an earlier request that timed out is taken and left out.
    pub(super) async fn request(
        &mut self,
        class: &StompClass,
        conn: &Reach,
        q: Request<'_>,
        rng: &mut Xoshiro256PlusPlus,
    ) -> Result<Outcome, Failed> {
        self.ensure(class, conn).await?;
        let seq = self.sent;
        self.sent = self.sent.saturating_add(1);
        let dest = render(q.destination, &class.class, &self.ids, u64::from(seq), rng);
        let size = (q.size.sample(rng).max(STAMP_LEN as f64) as usize).min(class.limits.max_body);
        let wait = Duration::from_micros(q.timeout.sample(rng).max(0.0) as u64);
        let from = producer(class.index, &self.ids);
        let reply_to = self.reply_to.clone().unwrap_or_default();
        let correlation = format!("{:x}-{}-{}-{seq}", class.nonce, class.index, self.ids.vu);
        let mut f = persistence(
            Frame::new(Command::Send).header("destination", &dest),
            q.persistent,
        )
        .header("reply-to", &reply_to)
        .header("correlation-id", &correlation);
        f.body = body(class.nonce, class.clock, from, seq, size);
        let mut wire = Vec::with_capacity(size + 160);
        f.encode(&mut wire);
        let Some(link) = self.link.as_mut() else {
            return Err(Failed::no_connection());
        };
        let start = Instant::now();
        write(link, &wire, start + conn.timeouts().request).await?;
        self.ledger.get_or_insert_with(Box::default).sent_in(
            &dest,
            from,
            seq,
            broker::phase_now(&class.phases),
        );
        let sent = wire.len() as u64;
        let reply = self
            .reply_for(class, &correlation, start + wait)
            .await
            .map_err(|f| f.with_bytes(sent, 0))?;
        let Some(r) = reply else {
            return Err(Failed::of(
                ErrorClass::Timeout,
                format!("no reply to {dest} within {wait:?}"),
            )
            .with_bytes(sent, 0));
        };
        Ok(done(class.message, sent, r.bytes, start.elapsed()))
    }

    /// The reply whose `correlation-id` is `want`, before `until`; `None` if none came.
    /// Every reply taken goes in the ledger.
    pub(super) async fn reply_for(
        &mut self,
        class: &StompClass,
        want: &str,
        until: Instant,
    ) -> Result<Option<Read>, Failed> {
        loop {
            while let Some(r) = self.replies.pop_front() {
                self.took_reply(class, &r);
                if r.frame.get("correlation-id") == Some(want) {
                    return Ok(Some(r));
                }
            }
            let Some(r) = self.next_frame(class, until).await? else {
                return Ok(None);
            };
            match r.frame.command {
                Command::Message => self.keep_message(r)?,
                Command::Receipt => self.on_receipt(class, &r),
                Command::Error => return Err(broker_error(&r.frame)),
                _ => {}
            }
        }
    }

    /// A reply in the ledger: taken from the reply queue, by the stamp its service wrote.
    pub(super) fn took_reply(&mut self, class: &StompClass, r: &Read) {
        let dest = self.reply_to.as_deref().unwrap_or("");
        let l = self.ledger.get_or_insert_with(Box::default);
        match broker::stamp_of(&r.frame.body, class.nonce) {
            Some(st) => {
                // A reply subscription acknowledges automatically.
                l.took_acknowledged(dest, st.producer, st.seq, false);
            }
            None => l.foreign(dest),
        }
    }

    /// A service's turn: the next request of its subscription (as a receive takes it),
    /// answered to its `reply-to` with its `correlation-id`, stamped by this user. Timed
    /// from the start to the reply's write; a request with no `reply-to` is only taken.
    pub(super) async fn reply(
        &mut self,
        class: &StompClass,
        conn: &Reach,
        size: &Dist,
        timeout: &Dist,
        rng: &mut Xoshiro256PlusPlus,
    ) -> Result<Outcome, Failed> {
        let start = Instant::now();
        let mut o = self.receive(class, conn, timeout, rng).await?;
        if o.label == Some(class.params.label_receive_empty) {
            o.label = Some(class.params.label_reply_empty);
            return Ok(o);
        }
        // The request's end-to-end latency is the service's, not a consumer's.
        for (label, _) in o.steps.iter_mut() {
            if *label == class.params.label_e2e {
                *label = class.params.label_reply_e2e;
            }
        }
        let Some((to, correlation)) = self.last_request.take() else {
            return Ok(o);
        };
        let seq = self.sent;
        self.sent = self.sent.saturating_add(1);
        let from = producer(class.index, &self.ids);
        let size = (size.sample(rng).max(STAMP_LEN as f64) as usize).min(class.limits.max_body);
        let mut f = Frame::new(Command::Send).header("destination", &to);
        if let Some(c) = &correlation {
            f = f.header("correlation-id", c);
        }
        f.body = body(class.nonce, class.clock, from, seq, size);
        let mut wire = Vec::with_capacity(size + 128);
        f.encode(&mut wire);
        let Some(link) = self.link.as_mut() else {
            return Err(Failed::no_connection());
        };
        write(link, &wire, Instant::now() + conn.timeouts().request)
            .await
            .map_err(|f| f.with_bytes(o.bytes_sent, o.bytes_received))?;
        self.ledger.get_or_insert_with(Box::default).sent_in(
            &to,
            from,
            seq,
            broker::phase_now(&class.phases),
        );
        o.bytes_sent += wire.len() as u64;
        o.latency = start.elapsed();
        Ok(o)
    }
}
