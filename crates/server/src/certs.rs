//! Certificates for serving https on loopback: `loadmix cert` makes a private CA and a
//! server certificate it signs (the layout nginx, Apache and `loadmix serve` take), and
//! [`server_config`] turns a certificate chain and key into the server's TLS settings.
//!
//! A CA plus a leaf, rather than one self-signed certificate, because that is what a
//! client is given in real deployments (`--ca-cert ca.pem`), and a self-signed leaf used as
//! its own trust anchor is refused by some verifiers.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use rcgen::{BasicConstraints, CertificateParams, DnType, IsCa, Issuer, KeyPair, KeyUsagePurpose};

use loadmix_formats::pem::{self, PemError};

/// Why certificates could not be made, written or used.
#[derive(Debug, thiserror::Error)]
pub enum CertError {
    /// The certificate could not be made.
    #[error("making the certificate: {0}")]
    Generate(#[from] rcgen::Error),
    /// A file could not be written.
    #[error("{path}: {source}")]
    Write {
        /// The file.
        path: String,
        /// Why.
        source: std::io::Error,
    },
    /// A PEM file could not be read.
    #[error(transparent)]
    Pem(#[from] PemError),
    /// The certificate and key do not make a server's identity.
    #[error("{cert} and {key}: {reason}")]
    Unusable {
        /// The certificate's file.
        cert: String,
        /// The key's file.
        key: String,
        /// Why not.
        reason: String,
    },
}

/// The files `write_pair` wrote.
#[derive(Debug, Clone)]
pub struct CertFiles {
    /// The CA's certificate, for the client's `--ca-cert`.
    pub ca: PathBuf,
    /// The server's certificate, signed by the CA.
    pub cert: PathBuf,
    /// The server's key.
    pub key: PathBuf,
}

/// Make a CA and a server certificate for `names` (host names or IP addresses), and write
/// `ca.pem`, `cert.pem` and `key.pem` into `dir` (the key readable by its owner only).
pub fn write_pair(dir: &Path, names: &[String]) -> Result<CertFiles, CertError> {
    let write = |name: &str, text: &str, private: bool| -> Result<PathBuf, CertError> {
        let path = dir.join(name);
        let io = |source| CertError::Write {
            path: path.display().to_string(),
            source,
        };
        std::fs::create_dir_all(dir).map_err(io)?;
        let mut opts = std::fs::OpenOptions::new();
        opts.write(true).create(true).truncate(true);
        #[cfg(unix)]
        if private {
            use std::os::unix::fs::OpenOptionsExt;
            opts.mode(0o600);
        }
        let _ = private;
        use std::io::Write;
        let mut f = opts.open(&path).map_err(io)?;
        f.write_all(text.as_bytes()).map_err(io)?;
        Ok(path)
    };
    let mut ca_params = CertificateParams::new(Vec::<String>::new())?;
    // Each CA its own name: two CAs of one name look like one to a verifier, which then
    // reports a bad signature instead of an unknown issuer.
    let id = uuid::Uuid::new_v4().simple().to_string();
    ca_params.distinguished_name.push(
        DnType::CommonName,
        format!("loadmix local CA {}", &id[..12]),
    );
    ca_params.is_ca = IsCa::Ca(BasicConstraints::Constrained(0));
    ca_params.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign];
    let ca_key = KeyPair::generate()?;
    let ca_cert = ca_params.self_signed(&ca_key)?;
    let issuer = Issuer::new(ca_params, ca_key);

    let mut leaf = CertificateParams::new(names.to_vec())?;
    leaf.distinguished_name.push(
        DnType::CommonName,
        names.first().map_or("localhost", String::as_str),
    );
    let key = KeyPair::generate()?;
    let cert = leaf.signed_by(&key, &issuer)?;
    Ok(CertFiles {
        ca: write("ca.pem", &ca_cert.pem(), false)?,
        // The chain a server sends: its own certificate, then the CA's.
        cert: write(
            "cert.pem",
            &format!("{}{}", cert.pem(), ca_cert.pem()),
            false,
        )?,
        key: write("key.pem", &key.serialize_pem(), true)?,
    })
}

/// The server's TLS settings from a PEM chain and key; refuses a key that is not the
/// certificate's. Offers HTTP/1.1 only (ALPN), which is what the server speaks.
pub fn server_config(cert: &Path, key: &Path) -> Result<Arc<rustls::ServerConfig>, CertError> {
    let chain = pem::certs(cert)?;
    let der = pem::key(key)?;
    let unusable = |reason: String| CertError::Unusable {
        cert: cert.display().to_string(),
        key: key.display().to_string(),
        reason,
    };
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut cfg = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| unusable(e.to_string()))?
        .with_no_client_auth()
        .with_single_cert(chain, der)
        .map_err(|e| match e {
            rustls::Error::InconsistentKeys(_) => {
                unusable("the key does not belong to the certificate".into())
            }
            other => unusable(other.to_string()),
        })?;
    cfg.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(Arc::new(cfg))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_made_pair_serves_and_a_foreign_key_is_refused() {
        let a = tempfile::tempdir().unwrap();
        let b = tempfile::tempdir().unwrap();
        let fa = write_pair(a.path(), &["localhost".into()]).unwrap();
        let fb = write_pair(b.path(), &["localhost".into()]).unwrap();
        assert!(server_config(&fa.cert, &fa.key).is_ok());
        let e = server_config(&fa.cert, &fb.key).unwrap_err().to_string();
        assert!(e.contains("does not belong"), "{e}");
        assert!(matches!(
            server_config(&fa.ca, &fa.ca),
            Err(CertError::Pem(_))
        ));
    }
}
