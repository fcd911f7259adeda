//! The HTTP source's accept loop and connections: at most `max_connections` open at
//! once, each given `header_timeout` to send a request head.
//!
//! `axum::serve` accepts every connection the kernel hands it and waits for a request
//! head forever, so clients that open connections and send half a head hold a file
//! descriptor each until the process runs out of them. Here the accept loop takes a
//! connection permit *before* it accepts: at the cap, further clients wait in the
//! kernel's listen backlog (which holds no descriptor of this process) until a
//! connection closes. hyper's `header_read_timeout` closes a connection whose request
//! head has not fully arrived in time; the read buffer is capped at
//! [`CONNECTION_BUFFER_BYTES`], so an open connection holds a bounded amount of memory.

use std::pin::pin;
use std::time::Duration;

use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::service::TowerToHyperService;
use tokio::net::TcpListener;
use tokio::sync::watch;
use weir_flow::semaphore::{Semaphore, SemaphoreConfig};

/// hyper's read and write buffer limit per connection: a request head must fit (a
/// larger one gets 431), and the body streams through it.
pub const CONNECTION_BUFFER_BYTES: usize = 16 * 1024;

/// What an open connection holds at most: its read and its write buffer.
pub const CONNECTION_MEMORY_BYTES: u64 = 2 * CONNECTION_BUFFER_BYTES as u64;

/// How long the accept loop waits after a failed accept (EMFILE, ENFILE, ENOBUFS)
/// before trying again; the connection stays in the backlog meanwhile.
const ACCEPT_RETRY: Duration = Duration::from_millis(100);

/// The accept loop's limits.
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    /// Connections open at once.
    pub max_connections: u32,
    /// How long a client may take to send a request head (also after a keep-alive
    /// request: an idle connection is closed after it).
    pub header_timeout: Duration,
}

/// Serves `router` on `listener` within `limits` until `stop` turns true; then every
/// open connection finishes its request in flight and closes, and `serve` returns once
/// all have.
///
/// # Cancel safety
///
/// Not meant to be cancelled (its connections would be left running); stop it
/// through `stop`.
pub async fn serve(
    name: &str,
    listener: TcpListener,
    router: axum::Router,
    limits: Limits,
    mut stop: watch::Receiver<bool>,
) {
    let max = u64::from(limits.max_connections.max(1));
    let connections = Semaphore::new(SemaphoreConfig::new(max));
    let (closing_tx, closing_rx) = watch::channel(false);
    let mut warned_full = false;
    loop {
        let permit = tokio::select! {
            permit = connections.acquire(1) => permit,
            () = crate::pipeline::stopped(&mut stop) => break,
        };
        let Ok(permit) = permit else { break };
        if connections.available() == 0 && !warned_full {
            warned_full = true;
            tracing::warn!(
                "source {name}: {max} connections open (max_connections); \
                 further clients wait in the listen backlog"
            );
        }
        let accepted = tokio::select! {
            accepted = listener.accept() => accepted,
            () = crate::pipeline::stopped(&mut stop) => break,
        };
        let stream = match accepted {
            Ok((stream, _peer)) => stream,
            Err(e) if is_connection_error(&e) => continue,
            Err(e) => {
                tracing::warn!(
                    "source {name}: accepting a connection failed: {e}; retrying in {ACCEPT_RETRY:?}"
                );
                drop(permit);
                tokio::time::sleep(ACCEPT_RETRY).await;
                continue;
            }
        };
        if connections.available() > 0 {
            warned_full = false;
        }
        let service = TowerToHyperService::new(router.clone());
        let mut closing = closing_rx.clone();
        let header_timeout = limits.header_timeout;
        tokio::spawn(async move {
            let _permit = permit;
            let mut builder = hyper::server::conn::http1::Builder::new();
            builder
                .timer(TokioTimer::new())
                .header_read_timeout(header_timeout)
                .max_buf_size(CONNECTION_BUFFER_BYTES);
            let mut conn = pin!(builder.serve_connection(TokioIo::new(stream), service));
            let mut shutting_down = false;
            loop {
                tokio::select! {
                    result = conn.as_mut() => {
                        if let Err(e) = result {
                            tracing::debug!("HTTP connection ended: {e}");
                        }
                        break;
                    }
                    () = crate::pipeline::stopped(&mut closing), if !shutting_down => {
                        shutting_down = true;
                        conn.as_mut().graceful_shutdown();
                    }
                }
            }
        });
    }
    drop(listener);
    closing_tx.send_replace(true);
    // Every connection holds a permit until it has closed.
    let _all = connections.acquire(max).await;
}

/// Errors of one connection that the next accept does not share.
fn is_connection_error(e: &std::io::Error) -> bool {
    use std::io::ErrorKind;
    matches!(
        e.kind(),
        ErrorKind::ConnectionRefused | ErrorKind::ConnectionAborted | ErrorKind::ConnectionReset
    )
}
