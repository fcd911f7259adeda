//! `type = "http"` (a source): its keys and its bounds.

use std::net::SocketAddr;
use std::num::NonZeroU32;

use serde::Serialize;

use crate::keys::units::serialize_std_duration;
use crate::keys::{Bounds, ByteSize, Duration, Section, check_env_name, times};
use crate::serve::CONNECTION_MEMORY_BYTES;
use crate::sources::SourceKeys;

/// `type = "http"`: POST NDJSON; 200 once durable, 503 + `Retry-After` when admission
/// fails, 413 above `max_body`, 408 when the body is slower than `body_timeout`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct HttpSourceConfig {
    /// `listen`: the address to listen on.
    pub listen: SocketAddr,
    /// `path`: the request path.
    pub path: String,
    /// `max_body`: the largest request body; larger requests get 413.
    pub max_body: ByteSize,
    /// `admission_timeout`: how long a request may wait for WAL admission before 503
    /// (zero: refuse at once).
    #[serde(serialize_with = "serialize_std_duration")]
    pub admission_timeout: std::time::Duration,
    /// `auth_token_env`: the environment variable holding the bearer token; no
    /// authentication when `None`.
    pub auth_token_env: Option<String>,
    /// `max_concurrent_requests`: requests served at once.
    pub max_concurrent_requests: NonZeroU32,
    /// `body_timeout`: how long the whole body may take to arrive once the request head
    /// is in; a slower body gets 408 and the connection is closed, freeing its slot.
    pub body_timeout: Duration,
    /// `max_connections`: connections open at once; further clients wait in the
    /// kernel's listen backlog.
    pub max_connections: NonZeroU32,
    /// `header_timeout`: how long a client may take to send a request head.
    pub header_timeout: Duration,
}

impl SourceKeys for HttpSourceConfig {
    const TYPE: &'static str = "http";
    const ABOUT: &'static str = "POSTed NDJSON: 200 once durable, 503 + `Retry-After` when WAL admission fails, 413 above `max_body`, 400 naming a bad line.";

    fn parse(s: &mut Section<'_>, _name: &str) -> Option<Self> {
        let listen = s
            .key("listen", "Address to listen on.")
            .example("127.0.0.1:8080")
            .req("an address like \"127.0.0.1:8080\"");
        let path = s
            .key("path", "Request path that takes POSTed NDJSON.")
            .or("/ingest".to_owned());
        if !path.starts_with('/') {
            s.error(
                "path",
                format!("expected a path starting with '/', found {path:?}"),
            );
        }
        let auth_token_env = s
            .key(
                "auth_token_env",
                "Environment variable holding the bearer token requests must carry.",
            )
            .default_text("no authentication")
            .example("WEIR_HTTP_TOKEN")
            .opt::<String>();
        if let Some(name) = &auth_token_env {
            check_env_name(s, "auth_token_env", name);
        }
        let max_body = s
            .key(
                "max_body",
                "Largest request body; a larger request gets 413.",
            )
            .or(ByteSize::mib(1));
        let admission_timeout = s
            .key(
                "admission_timeout",
                "How long a request may wait for WAL admission before 503 (0s: refuse at once).",
            )
            .or(std::time::Duration::from_millis(100));
        let max_concurrent_requests = s
            .key(
                "max_concurrent_requests",
                "Requests served at once; one more is answered 503 at once.",
            )
            .unit("requests")
            .or(NonZeroU32::new(16).expect("16 > 0"));
        let body_timeout = s
            .key(
                "body_timeout",
                "How long a body may take to arrive once the request head is in; a slower one gets 408.",
            )
            .or(Duration::secs(10));
        let max_connections = s
            .key(
                "max_connections",
                "Connections open at once (each holds a file descriptor and up to 32 KiB of buffers).",
            )
            .unit("connections")
            .or(NonZeroU32::new(256).expect("256 > 0"));
        let header_timeout = s
            .key(
                "header_timeout",
                "How long a client may take to send a request head once connected (or after its previous request).",
            )
            .or(Duration::secs(10));
        Some(Self {
            path,
            max_body,
            admission_timeout,
            auth_token_env,
            max_concurrent_requests,
            body_timeout,
            max_connections,
            header_timeout,
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
