//! One request and its answer: the kept client, a request made from the sink's URL,
//! method, headers and body, its answer read to the end (an error body kept up to
//! [`ANSWER_BODY_MAX`]), and a request that got no answer told apart: an untrusted
//! certificate (a configuration error) or a connection error (transient).

use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt as _, Full, Limited};
use hyper::header::{CONTENT_ENCODING, CONTENT_TYPE, RETRY_AFTER};
use hyper_rustls::HttpsConnector;
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::{TokioExecutor, TokioTimer};

use super::body;
use super::config::HttpSinkConfig;
use super::deliver::Shared;
use crate::keys::tls;

/// The most bytes of an error answer's body kept (for the log, `/status` and dead
/// letters).
const ANSWER_BODY_MAX: usize = 4 * 1024;

pub(super) type HttpClient = Client<HttpsConnector<HttpConnector>, Full<Bytes>>;

/// The kept client: pooled connections, HTTP/1.1, and HTTP/2 where TLS negotiates it
/// (ALPN). `https://` trusts `ca_file`, or the system's CA certificates.
pub(super) fn client(config: &HttpSinkConfig, https: bool) -> Result<HttpClient, String> {
    let roots = if https {
        tls::roots(config.ca_file.as_deref(), "endpoint")?
    } else {
        rustls::RootCertStore::empty()
    };
    let connector = hyper_rustls::HttpsConnectorBuilder::new()
        .with_tls_config(tls::client_config(roots)?)
        .https_or_http()
        .enable_all_versions()
        .build();
    Ok(Client::builder(TokioExecutor::new())
        .pool_timer(TokioTimer::new())
        .timer(TokioTimer::new())
        .pool_idle_timeout(Duration::from_secs(60))
        .pool_max_idle_per_host(config.max_concurrency.get() as usize)
        .build(connector))
}

/// A request that got no answer.
pub(super) enum SendError {
    /// The endpoint's TLS certificate was refused: a configuration error.
    Certificate(String),
    /// Connecting, sending or reading failed: transient.
    Connection(String),
}

/// `e` and its sources, `: `-separated (hyper's own message is only "client error
/// (Connect)").
fn chain(e: &(dyn std::error::Error + 'static)) -> String {
    let mut text = e.to_string();
    let mut next = inner(e);
    while let Some(cause) = next {
        let more = cause.to_string();
        if !text.contains(&more) {
            text.push_str(": ");
            text.push_str(&more);
        }
        next = inner(cause);
    }
    text
}

/// The error beneath `e`; for an `io::Error` wrapping another error, that error (its
/// `source` skips it).
fn inner<'e>(
    e: &'e (dyn std::error::Error + 'static),
) -> Option<&'e (dyn std::error::Error + 'static)> {
    match e
        .downcast_ref::<std::io::Error>()
        .and_then(std::io::Error::get_ref)
    {
        Some(wrapped) => Some(wrapped),
        None => e.source(),
    }
}

/// Whether rustls refused the peer's certificate somewhere beneath `e`.
fn untrusted_certificate(e: &(dyn std::error::Error + 'static)) -> bool {
    let mut next = Some(e);
    while let Some(cause) = next {
        if matches!(
            cause.downcast_ref::<rustls::Error>(),
            Some(rustls::Error::InvalidCertificate(_))
        ) {
            return true;
        }
        next = inner(cause);
    }
    false
}

/// An answer, as far as the sink reads it.
pub(super) struct Answer {
    pub(super) status: u16,
    pub(super) retry_after: Option<String>,
    pub(super) body: String,
}

impl Shared {
    /// One request.
    pub(super) async fn send(&self, body: Bytes) -> Result<Answer, SendError> {
        let mut request = hyper::Request::new(Full::new(body));
        *request.method_mut() = self.method.clone();
        *request.uri_mut() = self.uri.clone();
        let headers = request.headers_mut();
        for (name, value) in &self.headers {
            headers.append(name.clone(), value.clone());
        }
        headers.insert(
            CONTENT_TYPE,
            hyper::header::HeaderValue::from_static(body::content_type(self.config.encoding)),
        );
        if let Some(encoding) = body::content_encoding(self.config.compression) {
            headers.insert(
                CONTENT_ENCODING,
                hyper::header::HeaderValue::from_static(encoding),
            );
        }
        let response = self.client.request(request).await.map_err(|e| {
            let message = format!(
                "{} {}: {}",
                self.method,
                crate::keys::redact::url(&self.config.url),
                chain(&e)
            );
            if untrusted_certificate(&e) {
                SendError::Certificate(message)
            } else {
                SendError::Connection(message)
            }
        })?;
        let status = response.status().as_u16();
        let retry_after = response
            .headers()
            .get(RETRY_AFTER)
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned);
        // Read to the end so the connection goes back to the pool; an error body is
        // kept (cut at ANSWER_BODY_MAX) for the log and dead letters.
        let body = match Limited::new(response.into_body(), ANSWER_BODY_MAX)
            .collect()
            .await
        {
            Ok(collected) => String::from_utf8_lossy(&collected.to_bytes()).into_owned(),
            Err(_) => String::from("(body not read: too long or cut)"),
        };
        Ok(Answer {
            status,
            retry_after,
            body,
        })
    }
}
