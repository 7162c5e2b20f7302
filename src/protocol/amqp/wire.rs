//! AMQP through lapin for one user: the connection opened (and its TLS) within the
//! connect timeout, its channel, the queue declared with its type, the consumer with its
//! prefetch, each step within its deadline and its failure in words.

use std::time::Duration;

use lapin::options::{
    BasicConsumeOptions, BasicQosOptions, ConfirmSelectOptions, QueueDeclareOptions,
};
use lapin::types::{AMQPValue, FieldTable, ShortString};
use lapin::{Channel, Connection, ConnectionProperties, Consumer};
use tokio::time::Instant;

use crate::formats::scheme::Family;
use crate::protocol::contract::Reach;
use crate::protocol::{Session, VuIds};
use crate::transport::ErrorClass;
use crate::transport::stream::Handshake;
use crate::workload::protocols::{AmqpOp, DIRECT_REPLY_TO, QueueType};

use crate::protocol::broker::{Failed, render};

use super::{AmqpClass, Session091, failed};

/// `work` within `timeout`, or a `timeout` failure naming what did not come.
pub(super) async fn within<F: Future>(
    timeout: Duration,
    work: F,
    what: &str,
) -> Result<F::Output, Failed> {
    tokio::time::timeout(timeout, work).await.map_err(|_| {
        Failed::of(
            ErrorClass::Timeout,
            format!("{what} did not come within {timeout:?}"),
        )
    })
}

/// Connect as the user, open a channel, turn confirms on, declare the queue, and start a
/// consumer when the class consumes; and whether the declaration created the queue.
pub(super) async fn open(
    class: &AmqpClass,
    s: &Session,
    ids: &VuIds,
    conn: &Reach,
) -> Result<(Session091, bool), Failed> {
    let t0 = Instant::now();
    let connection = connect(s, conn).await?;
    let handshake = Handshake {
        connect: t0.elapsed(),
        tls: None,
        resumed: false,
    };
    let rq = conn.timeouts().request;
    let queue = render(&class.params.queue, &class.class, ids, 0, &mut rand::rng());
    let (channel, created) = channel_for(class, &connection, &queue, &ids.run_id, rq).await?;
    prepare(class, &channel, &queue, rq).await?;
    let consumes = class
        .ops
        .iter()
        .any(|o| matches!(o, AmqpOp::Consume { .. } | AmqpOp::Reply { .. }));
    let consumer = match consumes {
        false => None,
        true => Some(consume_from(class, &channel, &queue, ids, rq).await?),
    };
    let requests = class
        .ops
        .iter()
        .any(|o| matches!(o, AmqpOp::Request { .. }));
    let replies = match requests {
        false => None,
        true => Some(replies_on(&channel, rq).await?),
    };
    let open = Session091 {
        _connection: connection,
        channel,
        consumer,
        replies,
        queue,
        opened: Some(handshake),
    };
    Ok((open, created))
}

/// An AMQP connection to the target as the session's user (RabbitMQ's `guest` without a
/// password), on the target's virtual host.
pub(super) async fn connect(s: &Session, conn: &Reach) -> Result<Connection, Failed> {
    let endpoint = conn.endpoint();
    let addr = endpoint.port_for(Family::Amqp).ok_or_else(|| {
        Failed::of(
            ErrorClass::Connect,
            format!(
                "{} takes no AMQP: give an amqp://HOST:PORT target",
                endpoint.display
            ),
        )
    })?;
    let (user, password) = match s.password.is_empty() {
        // RabbitMQ's own default account, as every AMQP client assumes.
        true => ("guest".to_string(), "guest".to_string()),
        false => (s.user.clone(), s.password.clone()),
    };
    let tls = endpoint.amqp_tls.as_deref();
    let uri = lapin::uri::AMQPUri {
        scheme: match tls {
            Some(_) => lapin::uri::AMQPScheme::AMQPS,
            None => lapin::uri::AMQPScheme::AMQP,
        },
        authority: lapin::uri::AMQPAuthority {
            userinfo: lapin::uri::AMQPUserInfo {
                username: user,
                password,
            },
            // Over TLS, the name the broker's certificate is checked against.
            host: tls.map_or_else(|| addr.ip().to_string(), |t| t.host.clone()),
            port: addr.port(),
        },
        vhost: match endpoint.base_path.trim_start_matches('/') {
            "" => "/".to_string(),
            v => v.to_string(),
        },
        ..Default::default()
    };
    let connecting = async {
        match tls {
            None => Connection::connect_uri(uri, ConnectionProperties::default()).await,
            Some(t) => {
                let config = lapin::tcp::OwnedTLSConfig {
                    identity: None,
                    cert_chain: t.ca_pem.clone(),
                };
                lapin::DefaultConnectionBuilder::new()?
                    .with_uri(uri)
                    .with_tls_config(config)
                    .connect()
                    .await
            }
        }
    };
    within(conn.timeouts().connect, connecting, "the AMQP connection")
        .await?
        .map_err(|e| match e.kind() {
            lapin::ErrorKind::IOError(_) => {
                Failed::of(ErrorClass::Connect, format!("connect to {addr}: {e}"))
            }
            _ => failed("AMQP connection", e),
        })
}

/// The user's channel, and whether the queue is the run's own, to be deleted after: one
/// named with the run's id is (no other run could have made it, as with a STOMP
/// destination), and is declared without asking. Another is first asked for passively,
/// so that a queue that was there before is never deleted; the broker answers that by
/// closing the channel (404, and a `not_found` line in RabbitMQ's log) when it is not
/// there, so a second channel is opened then.
pub(super) async fn channel_for(
    class: &AmqpClass,
    connection: &Connection,
    queue: &str,
    run_id: &str,
    rq: Duration,
) -> Result<(Channel, bool), Failed> {
    let new_channel = || async {
        within(rq, connection.create_channel(), "the channel")
            .await?
            .map_err(|e| failed("channel.open", e))
    };
    let channel = new_channel().await?;
    if class.params.queue_type == QueueType::Existing {
        return Ok((channel, false));
    }
    if !run_id.is_empty() && queue.contains(run_id) {
        return Ok((channel, true));
    }
    let passive = QueueDeclareOptions {
        passive: true,
        ..QueueDeclareOptions::default()
    };
    let found = within(
        rq,
        channel.queue_declare(ShortString::from(queue), passive, FieldTable::default()),
        "queue.declare (passive)",
    )
    .await?;
    match found {
        Ok(_) => Ok((channel, false)),
        Err(e) if matches!(e.kind(), lapin::ErrorKind::ProtocolError(p) if p.get_id() == 404) => {
            Ok((new_channel().await?, true))
        }
        Err(e) => Err(failed("queue.declare (passive)", e)),
    }
}

/// Publisher confirms on for a confirming class, and the queue declared with its type.
pub(super) async fn prepare(
    class: &AmqpClass,
    channel: &Channel,
    queue: &str,
    rq: Duration,
) -> Result<(), Failed> {
    if class.confirms {
        within(
            rq,
            channel.confirm_select(ConfirmSelectOptions::default()),
            "confirm.select",
        )
        .await?
        .map_err(|e| failed("confirm.select", e))?;
    }
    if class.params.transaction > 0 {
        within(rq, channel.tx_select(), "tx.select")
            .await?
            .map_err(|e| failed("tx.select", e))?;
    }
    if class.params.queue_type != QueueType::Existing {
        let mut args = FieldTable::default();
        let kind = match class.params.queue_type {
            QueueType::Quorum => "quorum",
            _ => "classic",
        };
        args.insert("x-queue-type".into(), AMQPValue::LongString(kind.into()));
        within(
            rq,
            channel.queue_declare(
                ShortString::from(queue),
                QueueDeclareOptions {
                    durable: true,
                    ..QueueDeclareOptions::default()
                },
                args,
            ),
            "queue.declare",
        )
        .await?
        .map_err(|e| failed("queue.declare", e))?;
    }
    Ok(())
}

/// The user's consumer on `queue`, with the class's prefetch and acknowledgements.
pub(super) async fn consume_from(
    class: &AmqpClass,
    channel: &Channel,
    queue: &str,
    ids: &VuIds,
    rq: Duration,
) -> Result<Consumer, Failed> {
    within(
        rq,
        channel.basic_qos(class.params.prefetch, BasicQosOptions::default()),
        "basic.qos",
    )
    .await?
    .map_err(|e| failed("basic.qos", e))?;
    let tag = format!("loadmix-{}-{}-{}", ids.run_id, class.class, ids.vu);
    let c = within(
        rq,
        channel.basic_consume(
            ShortString::from(queue),
            ShortString::from(tag.as_str()),
            BasicConsumeOptions {
                no_ack: !class.params.manual_ack,
                ..BasicConsumeOptions::default()
            },
            FieldTable::default(),
        ),
        "basic.consume",
    )
    .await?
    .map_err(|e| failed("basic.consume", e))?;
    Ok(c)
}

pub(super) async fn replies_on(channel: &Channel, rq: Duration) -> Result<Consumer, Failed> {
    within(
        rq,
        channel.basic_consume(
            ShortString::from(DIRECT_REPLY_TO),
            ShortString::from(""),
            BasicConsumeOptions {
                no_ack: true,
                ..BasicConsumeOptions::default()
            },
            FieldTable::default(),
        ),
        "basic.consume (direct reply-to)",
    )
    .await?
    .map_err(|e| failed("basic.consume (direct reply-to)", e))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_step_that_does_not_come_in_time_is_a_timeout_naming_it() {
        let late = within(
            Duration::from_millis(10),
            std::future::pending::<()>(),
            "basic.qos",
        )
        .await
        .err()
        .unwrap();
        assert_eq!(late.class, ErrorClass::Timeout);
        assert_eq!(late.detail, "basic.qos did not come within 10ms");
        let done = within(Duration::from_secs(5), async { 7 }, "x").await;
        assert_eq!(done.ok(), Some(7));
    }

    #[test]
    fn a_lapin_failure_is_classed_by_what_ended() {
        let io = lapin::Error::from(lapin::ErrorKind::IOError(std::sync::Arc::new(
            std::io::Error::from(std::io::ErrorKind::ConnectionReset),
        )));
        let f = failed("basic.publish", io);
        assert_eq!(f.class, ErrorClass::Reset);
        assert!(f.detail.starts_with("basic.publish: "), "{}", f.detail);
        let gone = failed(
            "basic.get",
            lapin::Error::from(lapin::ErrorKind::MissingHeartbeatError),
        );
        assert_eq!(gone.class, ErrorClass::Reset);
    }
}
