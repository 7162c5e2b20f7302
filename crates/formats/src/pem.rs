//! PEM files: certificate chains and private keys, for the TLS client (`--ca-cert`,
//! `--client-cert/--client-key`) and the embedded server (`serve --tls-cert/--tls-key`).
//! A file that holds nothing usable is an error naming the file, never an empty list.

use std::path::Path;

use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, PrivateKeyDer};

/// A PEM file that cannot be used, and why.
#[derive(Debug, Clone, thiserror::Error)]
#[error("{path}: {reason}")]
pub struct PemError {
    /// The file.
    pub path: String,
    /// What is wrong with it.
    pub reason: String,
}

fn err(path: &Path, reason: impl std::fmt::Display) -> PemError {
    PemError {
        path: path.display().to_string(),
        reason: reason.to_string(),
    }
}

fn read(path: &Path) -> Result<Vec<u8>, PemError> {
    crate::files::read(path, crate::files::PEM).map_err(|e| err(path, e))
}

/// The certificates of a PEM file, checked as `certs` checks them, as PEM text again (for
/// a library that takes PEM, as lapin's TLS does).
pub fn certs_pem(path: &Path) -> Result<String, PemError> {
    use base64::Engine as _;
    let mut out = String::new();
    for c in certs(path)? {
        let b64 = base64::engine::general_purpose::STANDARD.encode(c.as_ref());
        out.push_str("-----BEGIN CERTIFICATE-----\n");
        for line in b64.as_bytes().chunks(64) {
            out.push_str(&String::from_utf8_lossy(line));
            out.push('\n');
        }
        out.push_str("-----END CERTIFICATE-----\n");
    }
    Ok(out)
}

/// Every certificate in a PEM file, in order.
pub fn certs(path: &Path) -> Result<Vec<CertificateDer<'static>>, PemError> {
    let text = read(path)?;
    let certs = CertificateDer::pem_slice_iter(&text)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| err(path, format!("not a readable PEM certificate file ({e})")))?;
    if certs.is_empty() {
        return Err(err(
            path,
            "holds no certificate (no '-----BEGIN CERTIFICATE-----' block)",
        ));
    }
    Ok(certs)
}

/// The private key of a PEM file (PKCS#8, PKCS#1 or SEC1).
pub fn key(path: &Path) -> Result<PrivateKeyDer<'static>, PemError> {
    let text = read(path)?;
    PrivateKeyDer::from_pem_slice(&text)
        .map_err(|e| err(path, format!("holds no readable PEM private key ({e})")))
}
