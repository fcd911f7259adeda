//! The startup check of an HTTP sink (`healthcheck = true`): the URL's host is resolved,
//! a TCP connection opened to the first address that accepts one, and for `https://`
//! the TLS handshake made with the sink's own trust (`ca_file`, or the system's CA
//! certificates) and ALPN offer. No request is sent: an endpoint's answer to a probe
//! would say little (many refuse a `HEAD` or an empty `POST`), and the records' first
//! request shows the rest.

use std::sync::Arc;
use std::time::Duration;

use rustls::pki_types::ServerName;
use tokio::net::TcpStream;
use tokio::time::{Instant, timeout_at};

use super::config::HttpSinkConfig;
use crate::keys::tls;

impl HttpSinkConfig {
    /// The startup check (see the [module docs](self)), giving up within `timeout`.
    ///
    /// # Errors
    ///
    /// The name does not resolve, no address accepts a connection, or the TLS
    /// handshake fails (an untrusted certificate names `ca_file`), naming `url`.
    ///
    /// # Cancel safety
    ///
    /// Cancel-safe: the connection is dropped with the future.
    pub(super) async fn reach(&self, timeout: Duration) -> Result<(), String> {
        let deadline = Instant::now() + timeout;
        let waited = || {
            format!(
                "no answer within healthcheck_timeout = {}",
                humantime::format_duration(timeout)
            )
        };
        let target = format!("url = {:?}", self.url);
        let uri: hyper::Uri = self
            .url
            .parse()
            .map_err(|e| format!("{target} is not a valid URL: {e}"))?;
        let https = uri.scheme_str() == Some("https");
        let host = uri
            .host()
            .map(|h| h.trim_start_matches('[').trim_end_matches(']').to_owned())
            .ok_or_else(|| format!("{target} names no host"))?;
        let port = uri.port_u16().unwrap_or(if https { 443 } else { 80 });
        // The trust is read first: a missing `ca_file` is the key to fix, whatever
        // the network does.
        let tls_config = if https {
            let roots = tls::roots(self.ca_file.as_deref(), "endpoint")?;
            let mut config = tls::client_config(roots)?;
            config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
            Some(Arc::new(config))
        } else {
            None
        };
        let addrs: Vec<_> =
            match timeout_at(deadline, tokio::net::lookup_host((host.as_str(), port))).await {
                Err(_) => return Err(format!("{target}: resolving {host}: {}", waited())),
                Ok(Err(e)) => return Err(format!("{target}: cannot resolve {host}: {e}")),
                Ok(Ok(addrs)) => addrs.collect(),
            };
        let mut refused = Vec::new();
        let mut stream = None;
        for addr in &addrs {
            match timeout_at(deadline, TcpStream::connect(addr)).await {
                Err(_) => {
                    refused.push(format!("{addr}: {}", waited()));
                    break;
                }
                Ok(Err(e)) => refused.push(format!("{addr}: {e}")),
                Ok(Ok(s)) => {
                    stream = Some(s);
                    break;
                }
            }
        }
        let Some(stream) = stream else {
            return Err(format!(
                "{target}: cannot connect to {host} port {port} ({}); is the endpoint running and reachable from here?",
                if refused.is_empty() {
                    "the name resolves to no address".to_owned()
                } else {
                    refused.join("; ")
                }
            ));
        };
        let Some(tls_config) = tls_config else {
            return Ok(());
        };
        let name = ServerName::try_from(host.clone())
            .map_err(|e| format!("{target}: {host:?} is not a name TLS can check: {e}"))?;
        let handshake = tokio_rustls::TlsConnector::from(tls_config).connect(name, stream);
        match timeout_at(deadline, handshake).await {
            Err(_) => Err(format!("{target}: TLS handshake with {host}: {}", waited())),
            Ok(Err(e)) if untrusted(&e) => Err(format!(
                "{target}: TLS handshake with {host}: {e}; the endpoint's TLS certificate is \
                 not trusted: set ca_file to the PEM file of the CA that signed it, or use \
                 the host name it names"
            )),
            Ok(Err(e)) => Err(format!("{target}: TLS handshake with {host}: {e}")),
            Ok(Ok(_)) => Ok(()),
        }
    }
}

/// Whether rustls refused the peer's certificate.
fn untrusted(e: &std::io::Error) -> bool {
    matches!(
        e.get_ref()
            .and_then(|inner| inner.downcast_ref::<rustls::Error>()),
        Some(rustls::Error::InvalidCertificate(_))
    )
}
