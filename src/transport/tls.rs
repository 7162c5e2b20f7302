//! TLS for `https://` targets: the client configuration all of a target's users share
//! (trust roots, an optional client certificate, verification turned off on request), the
//! handshake on a freshly opened TCP connection, and a plain reason for every certificate
//! problem.
//!
//! One `ClientConfig` per target means one session cache per target: a user that opens a
//! new connection per request resumes the session another connection left behind, as a
//! browser or Java client would, instead of paying a full handshake each time. A class can
//! ask for full handshakes (`tls_resumption: false`), which gets a config with no cache.

use std::path::PathBuf;
use std::sync::Arc;

use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use rustls::{CertificateError, ClientConfig, DigitallySignedStruct, RootCertStore};
use tokio::net::TcpStream;
use tokio_rustls::TlsConnector;
use tokio_rustls::client::TlsStream;

use crate::formats::pem::{self, PemError};

/// What the command line says about TLS (all optional).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct TlsOptions {
    /// PEM file of the certificates to trust instead of the system's roots.
    pub ca_cert: Option<PathBuf>,
    /// PEM certificate chain and private key for mutual TLS.
    pub client_cert: Option<PathBuf>,
    pub client_key: Option<PathBuf>,
    /// Accept any certificate (the run says so in its report).
    pub insecure: bool,
}

/// A TLS set-up that cannot work: refused before anything is sent.
#[derive(Debug, Clone, thiserror::Error)]
pub enum TlsError {
    #[error(transparent)]
    File(#[from] PemError),
    #[error("--client-cert and --client-key go together; give both or neither")]
    HalfClientIdentity,
    #[error("{cert} and {key}: the key does not belong to the certificate")]
    KeyMismatch { cert: String, key: String },
    #[error("'{0}' cannot be used as a TLS server name")]
    ServerName(String),
    #[error("TLS configuration: {0}")]
    Config(String),
}

/// The TLS side of one target: how to connect, and to whom.
#[derive(Clone)]
pub struct TlsClient {
    resuming: TlsConnector,
    fresh: TlsConnector,
    name: ServerName<'static>,
}

impl std::fmt::Debug for TlsClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TlsClient")
            .field("name", &self.name)
            .finish_non_exhaustive()
    }
}

fn provider() -> Arc<rustls::crypto::CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

impl TlsClient {
    /// The client side for a target named `host` (SNI and certificate name).
    pub fn new(host: &str, opts: &TlsOptions) -> Result<TlsClient, TlsError> {
        let name = ServerName::try_from(host.to_string())
            .map_err(|_| TlsError::ServerName(host.to_string()))?;
        let mut config = client_config(opts)?;
        // HTTP/1.1 is what loadmix speaks; a server that offers h2 must not pick it.
        config.alpn_protocols = vec![b"http/1.1".to_vec()];
        let mut fresh = config.clone();
        fresh.resumption = rustls::client::Resumption::disabled();
        Ok(TlsClient {
            resuming: TlsConnector::from(Arc::new(config)),
            fresh: TlsConnector::from(Arc::new(fresh)),
            name,
        })
    }

    /// The TLS handshake on an open TCP connection. `resume` lets it reuse a session from
    /// this target's cache.
    pub async fn handshake(
        &self,
        tcp: TcpStream,
        resume: bool,
    ) -> std::io::Result<TlsStream<TcpStream>> {
        let c = if resume { &self.resuming } else { &self.fresh };
        c.connect(self.name.clone(), tcp).await
    }
}

fn client_config(opts: &TlsOptions) -> Result<ClientConfig, TlsError> {
    let builder = ClientConfig::builder_with_provider(provider())
        .with_safe_default_protocol_versions()
        .map_err(|e| TlsError::Config(e.to_string()))?;
    let builder = if opts.insecure {
        builder
            .dangerous()
            .with_custom_certificate_verifier(Arc::new(AcceptAny(provider())))
    } else {
        let mut roots = RootCertStore::empty();
        match &opts.ca_cert {
            Some(path) => {
                let given = pem::certs(path)?;
                for c in &given {
                    roots.add(c.clone()).map_err(|e| PemError {
                        path: path.display().to_string(),
                        reason: format!("not a usable CA certificate ({e})"),
                    })?;
                }
                let chain = rustls::client::WebPkiServerVerifier::builder_with_provider(
                    Arc::new(roots),
                    provider(),
                )
                .build()
                .map_err(|e| TlsError::Config(e.to_string()))?;
                let verifier = Pinned { chain, given };
                return client_identity(
                    builder
                        .dangerous()
                        .with_custom_certificate_verifier(Arc::new(verifier)),
                    opts,
                );
            }
            None => {
                // Certificates the system store cannot parse are skipped, as browsers do.
                let found = rustls_native_certs::load_native_certs();
                roots.add_parsable_certificates(found.certs);
                if roots.is_empty() {
                    return Err(TlsError::Config(
                        "the system has no trusted root certificates; give --ca-cert FILE".into(),
                    ));
                }
            }
        }
        builder.with_root_certificates(roots)
    };
    client_identity(builder, opts)
}

/// The client certificate, when one is given.
fn client_identity(
    builder: rustls::ConfigBuilder<ClientConfig, rustls::client::WantsClientCert>,
    opts: &TlsOptions,
) -> Result<ClientConfig, TlsError> {
    match (&opts.client_cert, &opts.client_key) {
        (None, None) => Ok(builder.with_no_client_auth()),
        (Some(cert), Some(key)) => {
            let chain = pem::certs(cert)?;
            let der = pem::key(key)?;
            let mismatch = || TlsError::KeyMismatch {
                cert: cert.display().to_string(),
                key: key.display().to_string(),
            };
            let signing = provider()
                .key_provider
                .load_private_key(der.clone_key())
                .map_err(|e| PemError {
                    path: key.display().to_string(),
                    reason: format!("not a usable private key ({e})"),
                })?;
            let certified = rustls::sign::CertifiedKey::new(chain.clone(), signing);
            match certified.keys_match() {
                Ok(())
                | Err(rustls::Error::InconsistentKeys(rustls::InconsistentKeys::Unknown)) => {}
                Err(_) => return Err(mismatch()),
            }
            builder
                .with_client_auth_cert(chain, der)
                .map_err(|_| mismatch())
        }
        _ => Err(TlsError::HalfClientIdentity),
    }
}

/// `--ca-cert`: a server certificate is verified against the given certificates as CAs,
/// and one that is itself one of them, byte for byte, is accepted even though it says
/// `CA:TRUE` (as `openssl req -x509` makes them, and curl, Python and k6 accept): the
/// user named that very certificate. Its validity period was checked before the CA flag
/// (webpki checks in that order), and its names are checked here.
#[derive(Debug)]
struct Pinned {
    chain: Arc<rustls::client::WebPkiServerVerifier>,
    given: Vec<CertificateDer<'static>>,
}

/// A CA certificate served as the server's own: webpki's `CaUsedAsEndEntity`, which
/// rustls passes on only as an opaque error.
fn ca_used_as_end_entity(e: &rustls::Error) -> bool {
    matches!(e, rustls::Error::InvalidCertificate(CertificateError::Other(o))
        if format!("{o:?}").contains("CaUsedAsEndEntity"))
}

impl ServerCertVerifier for Pinned {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        server_name: &ServerName<'_>,
        ocsp: &[u8],
        now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        match self
            .chain
            .verify_server_cert(end_entity, intermediates, server_name, ocsp, now)
        {
            Err(e)
                if ca_used_as_end_entity(&e)
                    && self.given.iter().any(|g| g.as_ref() == end_entity.as_ref()) =>
            {
                let parsed = rustls::server::ParsedCertificate::try_from(end_entity)?;
                rustls::client::verify_server_name(&parsed, server_name)?;
                Ok(ServerCertVerified::assertion())
            }
            other => other,
        }
    }

    // The handshake's signatures are checked as for any chain.
    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.chain.verify_tls12_signature(message, cert, dss)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.chain.verify_tls13_signature(message, cert, dss)
    }

    fn supported_verify_schemes(&self) -> Vec<rustls::SignatureScheme> {
        self.chain.supported_verify_schemes()
    }
}

/// `--insecure`: any certificate is accepted, but the handshake's signatures are still
/// checked so the session keys are the server's.
#[derive(Debug)]
struct AcceptAny(Arc<rustls::crypto::CryptoProvider>);

impl ServerCertVerifier for AcceptAny {
    fn verify_server_cert(
        &self,
        _end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        _ocsp: &[u8],
        _now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        Ok(ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }

    fn supported_verify_schemes(&self) -> Vec<rustls::SignatureScheme> {
        self.0.signature_verification_algorithms.supported_schemes()
    }
}

/// A plain reason for a failed handshake, in the words an operator would search for.
pub(crate) fn explain(e: &std::io::Error) -> String {
    let Some(tls) = e
        .get_ref()
        .and_then(|inner| inner.downcast_ref::<rustls::Error>())
    else {
        return e.to_string();
    };
    match tls {
        rustls::Error::InvalidCertificate(c) => format!(
            "the server's certificate was refused: {}",
            certificate_reason(c)
        ),
        rustls::Error::AlertReceived(a) => format!(
            "the server refused the handshake ({a:?}); if it asks for a client certificate, give --client-cert and --client-key"
        ),
        rustls::Error::NoApplicationProtocol => {
            "the server does not offer HTTP/1.1 over TLS (ALPN)".into()
        }
        other => format!("TLS handshake failed: {other}"),
    }
}

/// webpki's errors that rustls passes on as opaque ones, in words.
fn other_reason(debug: &str) -> String {
    let words = [
        (
            "CaUsedAsEndEntity",
            "it is a CA certificate (CA:TRUE) served as the server's own; give that very certificate with --ca-cert to trust it",
        ),
        (
            "EndEntityUsedAsCa",
            "a certificate in its chain that is not a CA signed it",
        ),
        (
            "PathLenConstraintViolated",
            "its chain is longer than a CA in it allows",
        ),
        (
            "NameConstraintViolation",
            "its names are outside what its CA may issue for",
        ),
        (
            "MissingOrMalformedExtensions",
            "its extensions are missing or malformed",
        ),
        (
            "RequiredEkuNotFound",
            "it is not issued for TLS servers (its extended key usage)",
        ),
        ("MaximumPathDepthExceeded", "its chain is too long"),
        ("BadDer", "not a well-formed certificate"),
        ("InvalidCertValidity", "its validity period is malformed"),
        (
            "UnsupportedCertVersion",
            "its X.509 version is not supported",
        ),
    ];
    words.iter().find(|(k, _)| debug.contains(k)).map_or_else(
        || format!("refused by the verifier ({debug})"),
        |(_, w)| w.to_string(),
    )
}

fn certificate_reason(c: &CertificateError) -> String {
    match c {
        CertificateError::UnknownIssuer => "unknown issuer: it is not signed by a trusted CA (give the CA with --ca-cert FILE, or --insecure to skip verification)".into(),
        CertificateError::Expired | CertificateError::ExpiredContext { .. } => {
            "expired".into()
        }
        CertificateError::NotValidYet | CertificateError::NotValidYetContext { .. } => {
            "not valid yet (check the clocks)".into()
        }
        CertificateError::NotValidForName | CertificateError::NotValidForNameContext { .. } => {
            "wrong host name: the certificate is not issued for the target's host".into()
        }
        CertificateError::Revoked => "revoked".into(),
        CertificateError::BadEncoding => "not a well-formed certificate".into(),
        CertificateError::BadSignature => "its signature does not verify".into(),
        CertificateError::UnsupportedSignatureAlgorithmContext { .. } => {
            "it is signed with an algorithm loadmix does not support".into()
        }
        CertificateError::UnhandledCriticalExtension => {
            "it has a critical extension loadmix does not understand".into()
        }
        CertificateError::InvalidPurpose | CertificateError::InvalidPurposeContext { .. } => {
            "it is not issued for TLS servers (its extended key usage)".into()
        }
        CertificateError::UnknownRevocationStatus
        | CertificateError::ExpiredRevocationList
        | CertificateError::ExpiredRevocationListContext { .. } => {
            "its revocation status cannot be established".into()
        }
        CertificateError::InvalidOcspResponse => "the server's OCSP response is not valid".into(),
        CertificateError::ApplicationVerificationFailure => "the verifier refused it".into(),
        CertificateError::Other(o) => other_reason(&format!("{o:?}")),
        other => format!("{other:?}"),
    }
}
