//! The accept loop: a connection permit first, then an accept, then a task per
//! connection.

use std::future::Future;
use std::num::NonZeroU32;
use std::pin::pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use hyper::body::{Body, Incoming};
use hyper::service::Service;
use tokio::sync::watch;
use weir_flow::FlowStats;
use weir_flow::semaphore::{Semaphore, SemaphoreConfig};

use super::accept::{AcceptErrors, BACKOFF_MAX, LOG_EVERY};
use super::connection::serve_connection;
use super::{CONNECTION_MEMORY_BYTES, Listener};
use crate::log_window::LogWindow;

/// A server's limits.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Connections open at once; further clients wait in the listen backlog.
    pub max_connections: NonZeroU32,
    /// How long a client may take to send a request head, counted from when it
    /// connected or from the previous response (the idle timeout of a keep-alive
    /// connection).
    pub header_timeout: Duration,
}

/// A bounded HTTP/1.1 server (see the [module docs](super)).
#[derive(Debug)]
pub struct Server {
    /// Who serves, for the log: `source api`, `status server`.
    who: String,
    /// The key that sets the connection cap, for the log.
    cap_key: String,
    limits: Limits,
    /// One permit per connection; taken before the accept.
    permits: Semaphore,
    connections: Connections,
}

/// The open connections of a [`Server`], read while it serves.
#[derive(Debug, Clone)]
pub struct Connections {
    open: Arc<AtomicU64>,
    max: u64,
}

impl Connections {
    /// Connections open now (accepted and not yet closed).
    pub fn open(&self) -> u64 {
        self.open.load(Ordering::Relaxed)
    }

    /// The cap.
    pub fn max(&self) -> u64 {
        self.max
    }

    /// The probe of a queue whose items are the open connections and whose bytes are
    /// what their buffers may hold ([`CONNECTION_MEMORY_BYTES`] each).
    pub fn flow_stats(&self) -> FlowStats {
        let open = self.open();
        let mut flow = FlowStats::default();
        flow.depth = open;
        flow.bytes = open.saturating_mul(CONNECTION_MEMORY_BYTES);
        flow
    }

    /// Counts a connection open until the guard is dropped.
    fn opened(&self) -> OpenGuard {
        self.open.fetch_add(1, Ordering::Relaxed);
        OpenGuard(Arc::clone(&self.open))
    }
}

/// One open connection, counted in [`Connections::open`] while it lives.
#[derive(Debug)]
pub(super) struct OpenGuard(Arc<AtomicU64>);

impl Drop for OpenGuard {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::Relaxed);
    }
}

impl Server {
    /// A server within `limits`; `who` and `cap_key` name it and its cap in log lines
    /// (`"source api"`, `"max_connections"`).
    pub fn new(who: impl Into<String>, cap_key: impl Into<String>, limits: Limits) -> Self {
        let max = u64::from(limits.max_connections.get());
        Server {
            who: who.into(),
            cap_key: cap_key.into(),
            limits,
            permits: Semaphore::new(SemaphoreConfig::new(max)),
            connections: Connections {
                open: Arc::new(AtomicU64::new(0)),
                max,
            },
        }
    }

    /// Its open connections, to report while it serves.
    pub fn connections(&self) -> Connections {
        self.connections.clone()
    }

    /// Serves `service` on `listener` until `shutdown` completes; then every open
    /// connection finishes its request in flight and closes, and `serve` returns once
    /// all have.
    ///
    /// # Cancel safety
    ///
    /// Not meant to be cancelled (its connections would be left running); stop it
    /// through `shutdown`.
    pub async fn serve<L, S, B>(
        self,
        mut listener: L,
        service: S,
        shutdown: impl Future<Output = ()>,
    ) where
        L: Listener,
        S: Service<hyper::Request<Incoming>, Response = hyper::Response<B>>
            + Clone
            + Send
            + 'static,
        S::Future: Send + 'static,
        S::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
        B: Body + Send + 'static,
        B::Data: Send,
        B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
    {
        let max = self.permits.total();
        let (closing_tx, closing_rx) = watch::channel(false);
        let mut shutdown = pin!(shutdown);
        let mut errors = AcceptErrors::default();
        // Times every connection was taken, logged at most every LOG_EVERY.
        let mut full = LogWindow::default();
        loop {
            let permit = tokio::select! {
                permit = self.permits.acquire(1) => permit,
                () = &mut shutdown => break,
            };
            let Ok(permit) = permit else { break };
            if self.permits.available() == 0
                && let Some(times) = full.note(Instant::now(), 1)
            {
                tracing::warn!(
                    "{}: {max} connections open ({}), {times} times since the last such line; \
                     further clients wait in the listen backlog",
                    self.who,
                    self.cap_key
                );
            }
            let accepted = tokio::select! {
                accepted = listener.accept() => accepted,
                () = &mut shutdown => break,
            };
            let io = match accepted {
                Ok(io) => io,
                Err(e) if is_connection_error(&e) => continue,
                Err(e) => {
                    drop(permit);
                    let failed = errors.failed(Instant::now());
                    if let Some(failures) = failed.log {
                        tracing::warn!(
                            "{}: accepting a connection failed ({failures} since the last such line): {e}; \
                             the client waits in the listen backlog; retrying in {:?}, backing off up to {:?} \
                             (this line at most every {}s)",
                            self.who,
                            failed.retry_in,
                            BACKOFF_MAX,
                            LOG_EVERY.as_secs()
                        );
                    }
                    tokio::select! {
                        () = tokio::time::sleep(failed.retry_in) => continue,
                        () = &mut shutdown => break,
                    }
                }
            };
            errors.succeeded();
            tokio::spawn(serve_connection::<L, S, B>(
                io,
                service.clone(),
                self.limits.header_timeout,
                closing_rx.clone(),
                (permit, self.connections.opened()),
            ));
        }
        drop(listener);
        closing_tx.send_replace(true);
        // Every connection holds a permit until it has closed.
        let _all = self.permits.acquire(max).await;
    }
}

/// Errors of one connection that the next accept does not share.
fn is_connection_error(e: &std::io::Error) -> bool {
    use std::io::ErrorKind;
    matches!(
        e.kind(),
        ErrorKind::ConnectionRefused | ErrorKind::ConnectionAborted | ErrorKind::ConnectionReset
    )
}
