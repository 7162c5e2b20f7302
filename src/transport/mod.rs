//! The wire to the target, for every protocol: where it is ([`Endpoint`], resolved once),
//! the stream to it ([`stream`]: TCP or TLS, connect and handshake timed, the error
//! classes every protocol reports, bytes counted), and HTTP/1.1 on that stream ([`conn`]:
//! a user's connection, kept or per request, the request timeout, retries; [`h1`]: the
//! framing and its bounds). A frame protocol (a message broker's) opens a
//! [`stream::Stream`] of its own and gets the same timing and the same error classes.
//! The target's clock is read from its answers (`clock.rs`); TLS settings are [`tls`]'s.

pub(crate) mod clock;
pub(crate) mod conn;
mod h1;
pub(crate) mod stream;
pub(crate) mod tls;

use std::net::{SocketAddr, ToSocketAddrs};
use std::time::Duration;

use hyper::header::HeaderValue;

use crate::formats::scheme::{Family, Scheme};

pub(crate) use conn::Doubt;
pub use conn::{Conn, Response};
pub(crate) use conn::{Tally, add_tally};
pub(crate) use h1::{BodyLease, BodyUse, limit_kept_bodies};
pub(crate) use stream::Handshake;
pub(crate) use tls::{TlsClient, TlsError, TlsOptions};

pub(crate) use hyper::Method;
pub use hyper::Request;

/// Why a request did not produce a usable answer. Ordered as reported.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, serde::Serialize, serde::Deserialize,
)]
#[serde(rename_all = "lowercase")]
pub enum ErrorClass {
    /// The TCP connection could not be opened (refused, unreachable, connect timeout).
    Connect,
    /// No complete answer within the request timeout.
    Timeout,
    /// The connection was closed or reset before a complete answer arrived.
    Reset,
    /// The answer was not one the operation expects: an HTTP status, a broker's refusal.
    /// (Serialised as `status`, the name reports have always used.)
    Status,
    /// The answer was complete but malformed (bad framing, or a body that does not parse).
    Body,
    /// The answer came, and was the one expected, but after the client's own patience
    /// (its class's or operation's `client_timeout`): a failure for that client, though
    /// the server answered, and apart from loadmix's own request timeout (`timeout`).
    #[serde(rename = "timed_out_for_client")]
    ClientTimeout,
}

impl ErrorClass {
    /// Every class, in the order reports list them.
    pub const ALL: [ErrorClass; ErrorClass::COUNT] = [
        ErrorClass::Connect,
        ErrorClass::Timeout,
        ErrorClass::Reset,
        ErrorClass::Status,
        ErrorClass::Body,
        ErrorClass::ClientTimeout,
    ];
    /// How many classes there are.
    pub const COUNT: usize = 6;
    /// Its name in reports.
    pub fn name(self) -> &'static str {
        match self {
            ErrorClass::Connect => "connect",
            ErrorClass::Timeout => "timeout",
            ErrorClass::Reset => "reset",
            ErrorClass::Status => "status",
            ErrorClass::Body => "body",
            ErrorClass::ClientTimeout => "timed_out_for_client",
        }
    }
    /// Its place in `ALL`.
    pub fn index(self) -> usize {
        self as usize
    }
}

/// A request that failed on the wire, classified.
#[derive(Debug, Clone, thiserror::Error)]
#[error("{class:?}: {message}", class = .class.name())]
pub struct TransportError {
    /// What kind of failure.
    pub class: ErrorClass,
    /// What happened, in words.
    pub message: String,
    /// Bytes already written when the failure happened.
    pub bytes_sent: u64,
}

/// The server side of the wire: where to connect and what to call it.
#[derive(Debug, Clone)]
pub struct Endpoint {
    /// The address connected to.
    pub addr: SocketAddr,
    /// Value of the `Host` header.
    pub host: HeaderValue,
    /// Path prefix from the target URL, prepended to every request path.
    pub base_path: String,
    /// How the target is shown in reports.
    pub display: String,
    /// `https://` targets: the TLS client every user of this target shares.
    pub tls: Option<TlsClient>,
    /// The target's clock against ours, from the `Date` of its answers.
    pub clock: std::sync::Arc<clock::ClockBounds>,
    /// Where the target takes each wire of its own port (a scheme family other than
    /// HTTP): a `stomp://` or `amqp://` target's own address, the embedded server's broker
    /// port. A new family needs no field here: [`Endpoint::port_for`] finds it.
    pub ports: Vec<(Family, SocketAddr)>,
    /// `amqps://`: what AMQP's TLS needs (lapin runs it).
    pub amqp_tls: Option<std::sync::Arc<AmqpTls>>,
    /// The target URL's scheme (plain HTTP for the embedded server, whose broker port
    /// is `broker`): whether the target answers HTTP.
    pub scheme: Scheme,
}

impl Endpoint {
    /// Where the target takes the wire of `family`, when it does.
    pub fn port_for(&self, family: Family) -> Option<SocketAddr> {
        self.ports
            .iter()
            .find(|(f, _)| *f == family)
            .map(|&(_, a)| a)
    }

    /// The full URL of `path` (a path on the server), for messages.
    pub fn url_of(&self, path: &str) -> String {
        let scheme = if self.tls.is_some() { "https" } else { "http" };
        format!("{scheme}://{}{path}", self.host.to_str().unwrap_or("?"))
    }

    /// The path of `location` (a `Location` header: a path, or an absolute URL) when it
    /// is on this server; `None` for another server.
    pub fn same_origin_path(&self, location: &str) -> Option<String> {
        if location.starts_with('/') {
            return Some(location.to_string());
        }
        let prefix = self.url_of("");
        let rest = location.strip_prefix(&prefix)?;
        match rest.chars().next() {
            None => Some("/".into()),
            Some('/') => Some(rest.to_string()),
            _ => None,
        }
    }
}

/// Why a target URL cannot be used.
#[derive(Debug, Clone, thiserror::Error)]
pub enum EndpointError {
    /// The host name does not resolve.
    #[error("{0}")]
    Resolve(String),
    /// The TLS options cannot work (bad PEM, a key that is not the certificate's).
    #[error(transparent)]
    Tls(#[from] TlsError),
}

/// Whether a connection is kept for the next request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reuse {
    /// One persistent connection, re-opened after errors.
    KeepAlive,
    /// A new TCP connection for every request.
    PerRequest,
}

/// Where a target lives, as its URL says it: host, port and base path.
#[derive(Debug, Clone, Copy)]
pub struct Address<'a> {
    pub host: &'a str,
    pub port: u16,
    pub base_path: &'a str,
    /// The URL as given, for messages.
    pub raw: &'a str,
    /// TLS or not, and what the port speaks.
    pub scheme: Scheme,
}

impl Endpoint {
    /// Resolve a target URL once, up front (name lookups never run on the request path).
    pub fn resolve(url: Address<'_>, tls: &TlsOptions) -> Result<Endpoint, EndpointError> {
        let addr = (url.host, url.port)
            .to_socket_addrs()
            .map_err(|e| EndpointError::Resolve(format!("cannot resolve {}: {e}", url.host)))?
            .next()
            .ok_or_else(|| {
                EndpointError::Resolve(format!("{} resolves to no address", url.host))
            })?;
        let default_port = url.scheme.default_port;
        let host = if url.port == default_port {
            url.host.to_string()
        } else if url.host.contains(':') {
            format!("[{}]:{}", url.host, url.port)
        } else {
            format!("{}:{}", url.host, url.port)
        };
        // lapin runs AMQP's TLS itself: it is given the host and the CA certificates.
        let (amqp_tls, tls) = match (url.scheme.tls, url.scheme.family) {
            (false, Family::Http | Family::Stomp | Family::Amqp) => (None, None),
            (true, Family::Amqp) => (
                Some(std::sync::Arc::new(AmqpTls::new(url.host, tls)?)),
                None,
            ),
            (true, Family::Http | Family::Stomp) => (None, Some(TlsClient::new(url.host, tls)?)),
        };
        let ports = match url.scheme.family {
            Family::Http => Vec::new(),
            Family::Stomp | Family::Amqp => vec![(url.scheme.family, addr)],
        };
        Ok(Endpoint {
            addr,
            host: HeaderValue::from_str(&host)
                .map_err(|_| EndpointError::Resolve(format!("'{host}' is not a valid host")))?,
            base_path: url.base_path.to_string(),
            display: url.raw.to_string(),
            tls,
            clock: Default::default(),
            ports,
            amqp_tls,
            scheme: url.scheme,
        })
    }

    /// A plain-HTTP endpoint on `addr`, named `display`.
    pub fn local(addr: SocketAddr, display: &str) -> Endpoint {
        Endpoint {
            addr,
            host: HeaderValue::from_str(&addr.to_string())
                .unwrap_or(HeaderValue::from_static("localhost")),
            base_path: String::new(),
            display: display.to_string(),
            tls: None,
            clock: Default::default(),
            ports: Vec::new(),
            amqp_tls: None,
            scheme: Scheme::http(),
        }
    }
}

/// What an `amqps://` connection's TLS needs: the name the broker's certificate must
/// carry, and the CA certificates to trust (`--ca-cert`, as PEM; `None`: the system's).
#[derive(Debug)]
pub struct AmqpTls {
    pub host: String,
    pub ca_pem: Option<String>,
}

impl AmqpTls {
    fn new(host: &str, opts: &TlsOptions) -> Result<AmqpTls, TlsError> {
        if opts.insecure || opts.client_cert.is_some() {
            return Err(TlsError::Config(
                "amqps:// takes --ca-cert only: --insecure and client certificates are https and stomp+ssl's".into(),
            ));
        }
        let ca_pem = match &opts.ca_cert {
            Some(path) => Some(crate::formats::pem::certs_pem(path)?),
            None => None,
        };
        Ok(AmqpTls {
            host: host.to_string(),
            ca_pem,
        })
    }
}

/// Timeouts of a connection.
#[derive(Debug, Clone, Copy)]
pub struct Timeouts {
    /// How long a TCP connect (and TLS handshake) may take.
    pub connect: Duration,
    /// How long a request may take, from when it is sent until its whole answer is read.
    pub request: Duration,
}

pub(crate) use stream::probe;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn redirects_are_followed_only_on_the_same_server() {
        let e = Endpoint::resolve(
            Address {
                host: "127.0.0.1",
                port: 5232,
                base_path: "/dav",
                raw: "http://127.0.0.1:5232/dav",
                scheme: Scheme::http(),
            },
            &TlsOptions::default(),
        )
        .unwrap();
        assert_eq!(e.url_of("/x"), "http://127.0.0.1:5232/x");
        assert_eq!(e.same_origin_path("/caldav/").as_deref(), Some("/caldav/"));
        assert_eq!(
            e.same_origin_path("http://127.0.0.1:5232/p/").as_deref(),
            Some("/p/")
        );
        assert_eq!(
            e.same_origin_path("http://127.0.0.1:5232").as_deref(),
            Some("/")
        );
        assert_eq!(e.same_origin_path("http://127.0.0.1:52320/p/"), None);
        assert_eq!(e.same_origin_path("https://127.0.0.1:5232/p/"), None);
        assert_eq!(e.same_origin_path("http://evil.example/p/"), None);
    }
}
