//! `type = "http"` (a source): its keys and its bounds.

use std::net::SocketAddr;
use std::num::NonZeroU32;

use serde::Serialize;

use super::serve::CONNECTION_MEMORY_BYTES;
use crate::keys::units::serialize_std_duration;
use crate::keys::{Bounds, ByteSize, Duration, Section, check_env_name, times};
use crate::sources::SourceKeys;

/// `type = "http"`: POST NDJSON; 200 once durable, 503 + `Retry-After` when admission
/// fails, 413 above `max_body`, 408 when the body is slower than `body_timeout`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct HttpSourceConfig {
    /// Address to listen on. Required.
    pub listen: SocketAddr,
    /// Request path. Default `/ingest`.
    pub path: String,
    /// Largest request body; larger requests get 413. Default 1 MiB.
    pub max_body: ByteSize,
    /// How long a request may wait for WAL admission before 503 (zero: refuse at once).
    /// Default 100 ms.
    #[serde(serialize_with = "serialize_std_duration")]
    pub admission_timeout: std::time::Duration,
    /// Environment variable holding the bearer token; no authentication when absent.
    pub auth_token_env: Option<String>,
    /// Requests served at once; more wait in the accept queue. Default 16.
    pub max_concurrent_requests: NonZeroU32,
    /// How long the whole body may take to arrive once the request head is in; a
    /// slower body gets 408 and the connection is closed, freeing its request slot.
    /// Default 10 s.
    pub body_timeout: Duration,
    /// Connections open at once (each holds a file descriptor and up to 32 KiB of
    /// buffers); further clients wait in the kernel's listen backlog. Default 256.
    pub max_connections: NonZeroU32,
    /// How long a client may take to send a request head once connected (or after its
    /// previous request on a keep-alive connection); then the connection is closed.
    /// Default 10 s.
    pub header_timeout: Duration,
}

impl SourceKeys for HttpSourceConfig {
    const TYPE: &'static str = "http";

    fn parse(s: &mut Section<'_>, _name: &str) -> Option<Self> {
        let listen = s.req("listen", "an address like \"127.0.0.1:8080\"");
        let path = s.or("path", "/ingest".to_owned());
        if !path.starts_with('/') {
            s.error(
                "path",
                format!("expected a path starting with '/', found {path:?}"),
            );
        }
        let auth_token_env = s.opt::<String>("auth_token_env");
        if let Some(name) = &auth_token_env {
            check_env_name(s, "auth_token_env", name);
        }
        Some(Self {
            path,
            max_body: s.or("max_body", ByteSize::mib(1)),
            admission_timeout: s.or("admission_timeout", std::time::Duration::from_millis(100)),
            auth_token_env,
            max_concurrent_requests: s.or(
                "max_concurrent_requests",
                NonZeroU32::new(16).expect("16 > 0"),
            ),
            body_timeout: s.or("body_timeout", Duration::secs(10)),
            max_connections: s.or("max_connections", NonZeroU32::new(256).expect("256 > 0")),
            header_timeout: s.or("header_timeout", Duration::secs(10)),
            listen: listen?,
        })
    }

    fn bounds(&self, bounds: &mut Bounds<'_>) {
        bounds.add(
            "requests",
            Some(self.max_concurrent_requests.get().into()),
            times(self.max_concurrent_requests.get(), self.max_body.bytes()),
            format!(
                "request bodies in flight: max_concurrent_requests {} × max_body {}",
                self.max_concurrent_requests, self.max_body
            ),
        );
        bounds.add(
            "connections",
            Some(self.max_connections.get().into()),
            times(self.max_connections.get(), CONNECTION_MEMORY_BYTES),
            format!(
                "open connections' buffers: max_connections {} × {}",
                self.max_connections,
                ByteSize::kib(CONNECTION_MEMORY_BYTES / 1024)
            ),
        );
    }

    fn max_batch_bytes(&self) -> (u64, &'static str) {
        (self.max_body.bytes(), "max_body")
    }

    fn listen(&self) -> Option<(&'static str, SocketAddr)> {
        Some(("listen", self.listen))
    }
}
