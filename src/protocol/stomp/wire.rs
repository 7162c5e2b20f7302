//! STOMP on the wire for one user: the connection opened and logged in, frames written
//! and read within their deadlines and bounds, subscriptions, persistence headers, a
//! broker's ERROR in words.

use tokio::io::AsyncReadExt;
use tokio::time::Instant;

use crate::answer::Answer;
use crate::formats::scheme::Family;
use crate::formats::stomp::{self, Command, Frame, Limits};
use crate::protocol::Session;
use crate::protocol::broker::Failed;
use crate::transport::stream::{Deadline, Stream};

use crate::protocol::contract::Reach;
use crate::transport::{Endpoint, ErrorClass};
use crate::workload::protocols::AckMode;

use super::{Link, Read};

/// A SUBSCRIBE: its id, destination, ack mode, prefetch, and for a durable subscription
/// its name.
pub(super) struct Subscription<'a> {
    pub(super) id: &'a str,
    pub(super) dest: &'a str,
    pub(super) ack: AckMode,
    pub(super) prefetch: &'a str,
    pub(super) durable: Option<&'a str>,
}

/// Subscribe, with the prefetch (and a durable subscription's name) in ActiveMQ's and
/// RabbitMQ's words for them.
pub(super) async fn subscribe(
    link: &mut Link,
    sub: &Subscription<'_>,
    receipt: Option<&str>,
    deadline: Instant,
) -> Result<(), Failed> {
    let mut f = Frame::new(Command::Subscribe)
        .header("id", sub.id)
        .header("destination", sub.dest)
        .header("ack", sub.ack.name())
        .header("activemq.prefetchSize", sub.prefetch)
        .header("prefetch-count", sub.prefetch);
    if let Some(name) = sub.durable {
        f = f
            .header("activemq.subscriptionName", name)
            .header("durable", "true")
            .header("auto-delete", "false");
    }
    if let Some(r) = receipt {
        f = f.header("receipt", r);
    }
    let mut wire = Vec::new();
    f.encode(&mut wire);
    write(link, &wire, deadline).await
}

/// A persistent message says so; a transient one says nothing, STOMP's default. RabbitMQ
/// reads `persistent:false` on a SEND as "declare the queue transient", which an existing
/// durable queue refuses (RESOURCE_LOCKED).
pub(super) fn persistence(f: Frame, persistent: bool) -> Frame {
    match persistent {
        true => f.header("persistent", "true"),
        false => f,
    }
}

/// A broker's ERROR as a failure in its own words.
pub(super) fn broker_error(f: &Frame) -> Failed {
    let message = f.get("message").unwrap_or("");
    let detail = String::from_utf8_lossy(&f.body[..f.body.len().min(200)]).into_owned();
    Failed {
        class: ErrorClass::Status,
        // Brokers often repeat the message in the body: say it once.
        detail: match detail.trim() {
            "" => format!("the broker answered ERROR: {message}"),
            d if d == message.trim() => format!("the broker answered ERROR: {message}"),
            d => format!("the broker answered ERROR: {message}: {d}"),
        },
        answer: Answer::named("stomp", "ERROR", None, Some(message)),
        sent: 0,
        received: 0,
    }
}

/// Open a stream to the target's broker and log in: CONNECT, and CONNECTED back within
/// the request timeout.
pub(super) async fn open(
    limits: &Limits,
    s: &Session,
    conn: &Reach,
    client_id: Option<&str>,
) -> Result<Link, Failed> {
    let endpoint = conn.endpoint();
    let timeouts = conn.timeouts();
    let addr = endpoint.port_for(Family::Stomp).ok_or_else(|| {
        Failed::of(
            ErrorClass::Connect,
            format!(
                "{} has no STOMP broker: give a stomp://HOST:PORT target, or embedded",
                endpoint.display
            ),
        )
    })?;
    let (stream, handshake) =
        Stream::connect_at(endpoint, addr, timeouts.connect, conn.resumes_tls())
            .await
            .map_err(|e| Failed::of(e.class, e.message))?;
    let mut link = Link {
        stream,
        // Small to begin with: an idle consumer holds it for as long as it waits, and a
        // frame larger than it grows it.
        buf: stomp::FrameBuffer::with_capacity(512),
        deadline: Deadline::default(),
        opened: Some(handshake),
        subscribed: false,
        replies_subscribed: false,
        server: Box::from(""),
    };
    let mut f = Frame::new(Command::Connect)
        .header("accept-version", "1.2")
        .header("host", host_of(endpoint))
        .header("heart-beat", "0,0");
    if !s.password.is_empty() {
        f = f.header("login", &s.user).header("passcode", &s.password);
    }
    // ActiveMQ keeps a durable subscription for a client id.
    if let Some(id) = client_id {
        f = f.header("client-id", id);
    }
    let mut wire = Vec::new();
    f.encode(&mut wire);
    let deadline = Instant::now() + timeouts.request;
    write(&mut link, &wire, deadline).await?;
    let r = read(&mut link, limits, deadline).await?;
    match r.frame.command {
        Command::Connected => {
            link.server = r.frame.get("server").unwrap_or("").into();
            Ok(link)
        }
        Command::Error => Err(broker_error(&r.frame)),
        other => Err(Failed::of(
            ErrorClass::Body,
            format!("the broker answered CONNECT with {}", other.name()),
        )),
    }
}

/// The virtual host a CONNECT names: the target's path (`stomp://host/vhost`), else `/`.
pub(super) fn host_of(endpoint: &Endpoint) -> &str {
    match endpoint.base_path.trim_start_matches('/') {
        "" => "/",
        v => v,
    }
}

pub(super) async fn write(link: &mut Link, wire: &[u8], deadline: Instant) -> Result<(), Failed> {
    let mut timer = std::mem::take(&mut link.deadline);
    let parts = [wire];
    let written = {
        let w = std::pin::pin!(link.stream.write(&parts));
        timer.within(deadline, w).await
    };
    link.deadline = timer;
    match written {
        Some(Ok(())) => Ok(()),
        Some(Err((n, e))) => Err(Failed {
            class: ErrorClass::Reset,
            detail: format!("sending to the broker: {e}"),
            answer: Answer::NONE,
            sent: n,
            received: 0,
        }),
        None => Err(Failed::of(
            ErrorClass::Timeout,
            "the broker took no frame in time".into(),
        )),
    }
}

/// The next frame from the broker before `deadline`.
pub(super) async fn read(
    link: &mut Link,
    limits: &Limits,
    deadline: Instant,
) -> Result<Read, Failed> {
    let mut timer = std::mem::take(&mut link.deadline);
    let got = {
        let r = std::pin::pin!(read_frame(&mut link.stream, &mut link.buf, limits));
        timer.within(deadline, r).await
    };
    link.deadline = timer;
    got.unwrap_or_else(|| {
        Err(Failed::of(
            ErrorClass::Timeout,
            "no answer from the broker in time".into(),
        ))
    })
}

pub(super) async fn read_frame(
    stream: &mut Stream,
    buf: &mut stomp::FrameBuffer,
    limits: &Limits,
) -> Result<Read, Failed> {
    loop {
        let before = buf.len();
        match buf.decode(limits) {
            Ok(Some(frame)) => {
                return Ok(Read {
                    bytes: (before - buf.len()) as u64,
                    frame,
                });
            }
            Ok(None) => {}
            Err(e) => {
                return Err(Failed::of(
                    ErrorClass::Body,
                    format!("a malformed frame from the broker: {e}"),
                ));
            }
        }
        match stream.read_buf(buf.tail()).await {
            Ok(0) => {
                return Err(Failed::of(
                    ErrorClass::Reset,
                    "the broker closed the connection".into(),
                ));
            }
            Ok(_) => {}
            Err(e) => {
                return Err(Failed::of(
                    ErrorClass::Reset,
                    format!("reading from the broker: {e}"),
                ));
            }
        }
    }
}

/// The frames that end and remove durable subscription `name`, in the broker's own way.
/// RabbitMQ: one UNSUBSCRIBE of its id, saying durable, deletes its queue. ActiveMQ: its
/// consumer must go first (UNSUBSCRIBE of the id), then the subscription (the id again,
/// and the subscription's name, which makes it a removal).
pub(super) fn unsubscribe_durable(server: &str, name: &str, wire: &mut Vec<u8>) {
    if server.starts_with("RabbitMQ") {
        Frame::new(Command::Unsubscribe)
            .header("id", name)
            .header("durable", "true")
            .encode(wire);
        return;
    }
    Frame::new(Command::Unsubscribe)
        .header("id", name)
        .encode(wire);
    Frame::new(Command::Unsubscribe)
        .header("id", name)
        .header("activemq.subscriptionName", name)
        .encode(wire);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn error(message: &str, body: &str) -> Frame {
        let mut f = Frame::new(Command::Error).header("message", message);
        f.body = bytes::Bytes::from(body.to_string());
        f
    }

    #[test]
    fn a_brokers_error_is_said_once_in_its_own_words() {
        let said = |f: &Frame| broker_error(f).detail;
        assert_eq!(
            said(&error("no access", "")),
            "the broker answered ERROR: no access"
        );
        // ActiveMQ repeats the message in the body: once is enough.
        assert_eq!(
            said(&error("no access", "no access\n")),
            "the broker answered ERROR: no access"
        );
        assert_eq!(
            said(&error("bad frame", "line 3: no colon")),
            "the broker answered ERROR: bad frame: line 3: no colon"
        );
        // A long body is cut, not copied whole into every failure.
        let long = said(&error("x", &"y".repeat(10_000)));
        assert!(long.len() < 300, "{}", long.len());
        assert_eq!(broker_error(&error("x", "")).class, ErrorClass::Status);
    }

    /// The frames `wire` holds, decoded back.
    fn frames(mut wire: &[u8]) -> Vec<Frame> {
        let mut buf = bytes::BytesMut::from(std::mem::take(&mut wire));
        let mut out = Vec::new();
        while let Ok(Some(f)) = stomp::decode(&mut buf, &Limits::default()) {
            out.push(f);
        }
        out
    }

    #[test]
    fn a_durable_subscription_is_removed_as_its_broker_names_it() {
        let mut wire = Vec::new();
        unsubscribe_durable("RabbitMQ/3.12.1", "sub-1", &mut wire);
        let f = frames(&wire);
        assert_eq!(f.len(), 1);
        assert_eq!(
            (f[0].get("id"), f[0].get("durable")),
            (Some("sub-1"), Some("true"))
        );
        let mut wire = Vec::new();
        unsubscribe_durable("ActiveMQ/5.17.6", "sub-1", &mut wire);
        let f = frames(&wire);
        assert_eq!(
            f.len(),
            2,
            "the subscriber's, then the durable subscription's"
        );
        assert_eq!(f[1].get("activemq.subscriptionName"), Some("sub-1"));
        let sent = persistence(Frame::new(Command::Send), true);
        assert_eq!(sent.get("persistent"), Some("true"));
        assert_eq!(
            persistence(Frame::new(Command::Send), false).get("persistent"),
            None
        );
    }
}
