//! TLS trust for the components that connect out (the MQTT and NATS sources, the HTTP
//! sink): the PEM certificates of a `ca_file` key, or the system's CA certificates,
//! and one rustls client configuration over the ring provider (chosen here rather than
//! process-wide).

use std::path::Path;
use std::sync::Arc;

use rustls::RootCertStore;
use rustls::pki_types::CertificateDer;
use rustls::pki_types::pem::PemObject;

/// Every certificate of the PEM file `path` (a `ca_file` key); each must be a usable
/// trust anchor.
///
/// # Errors
///
/// `ca_file: …`: the file cannot be read, is not PEM, holds no certificate, or holds
/// one that is not a usable CA certificate.
pub fn file_roots(path: &Path) -> Result<RootCertStore, String> {
    let shown = path.display();
    let pem = std::fs::read(path).map_err(|e| format!("ca_file: cannot read {shown}: {e}"))?;
    let certs = CertificateDer::pem_slice_iter(&pem)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| format!("ca_file: {shown} is not valid PEM: {e}"))?;
    if certs.is_empty() {
        return Err(format!(
            "ca_file: {shown} holds no PEM certificate (expected \
             -----BEGIN CERTIFICATE----- blocks)"
        ));
    }
    let mut roots = RootCertStore::empty();
    for (i, cert) in certs.into_iter().enumerate() {
        roots.add(cert).map_err(|e| {
            format!(
                "ca_file: certificate {} of {shown} is not a usable CA certificate: {e}",
                i + 1
            )
        })?;
    }
    Ok(roots)
}

/// The system's CA certificates (those that parse). `peer` names what the certificate
/// belongs to in the error ("broker", "endpoint").
///
/// # Errors
///
/// `ca_file: …` when none could be loaded, with the reasons found.
pub fn system_roots(peer: &str) -> Result<RootCertStore, String> {
    let found = rustls_native_certs::load_native_certs();
    let mut roots = RootCertStore::empty();
    roots.add_parsable_certificates(found.certs);
    if roots.is_empty() {
        let why = found
            .errors
            .iter()
            .map(ToString::to_string)
            .collect::<Vec<_>>()
            .join("; ");
        return Err(format!(
            "ca_file: not set, and no system CA certificate could be loaded{}; set ca_file to \
             the PEM file of the CA that signed the {peer}'s certificate",
            if why.is_empty() {
                String::new()
            } else {
                format!(" ({why})")
            }
        ));
    }
    Ok(roots)
}

/// The roots of `ca_file` when it is set, else the system's.
///
/// # Errors
///
/// As [`file_roots`] and [`system_roots`].
pub fn roots(ca_file: Option<&Path>, peer: &str) -> Result<RootCertStore, String> {
    match ca_file {
        Some(path) => file_roots(path),
        None => system_roots(peer),
    }
}

/// A rustls client configuration over the ring provider trusting `roots`, without a
/// client certificate.
///
/// # Errors
///
/// `url: setting up TLS: …` if the provider offers no safe protocol version.
pub fn client_config(roots: RootCertStore) -> Result<rustls::ClientConfig, String> {
    Ok(rustls::ClientConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .map_err(|e| format!("url: setting up TLS: {e}"))?
    .with_root_certificates(roots)
    .with_no_client_auth())
}
