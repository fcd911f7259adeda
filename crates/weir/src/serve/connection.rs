//! One connection: HTTP/1.1 with the header timeout and bounded buffers, closed
//! gracefully when the server stops.

use std::pin::pin;
use std::time::Duration;

use hyper::body::{Body, Incoming};
use hyper::service::Service;
use hyper_util::rt::{TokioIo, TokioTimer};
use tokio::sync::watch;
use weir_flow::semaphore::Permit;

use super::CONNECTION_BUFFER_BYTES;
use super::listener::{Listener, PeerAddr};
use super::server::OpenGuard;

/// Serves requests on `io` until the client closes, a request head is late by
/// `header_timeout`, or `closing` turns true (the request in flight is answered
/// first). `slot` is the connection's permit and its count in
/// [`Connections`](super::Connections), both freed when this returns.
///
/// # Cancel safety
///
/// Dropping it drops the connection mid-request; the server never does.
pub(super) async fn serve_connection<L, S, B>(
    io: L::Io,
    service: S,
    header_timeout: Duration,
    mut closing: watch::Receiver<bool>,
    slot: (Permit, OpenGuard),
) where
    L: Listener,
    S: Service<hyper::Request<Incoming>, Response = hyper::Response<B>>,
    S::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
    B: Body + 'static,
    B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    let _slot = slot;
    let peer = L::peer(&io).map(PeerAddr);
    let service = hyper::service::service_fn(move |mut request: hyper::Request<Incoming>| {
        if let Some(peer) = peer {
            request.extensions_mut().insert(peer);
        }
        service.call(request)
    });
    let mut builder = hyper::server::conn::http1::Builder::new();
    builder
        .timer(TokioTimer::new())
        .header_read_timeout(header_timeout)
        .max_buf_size(CONNECTION_BUFFER_BYTES);
    let mut conn = pin!(builder.serve_connection(TokioIo::new(io), service));
    let mut shutting_down = false;
    loop {
        tokio::select! {
            result = conn.as_mut() => {
                if let Err(e) = result {
                    tracing::debug!("HTTP connection ended: {e}");
                }
                return;
            }
            _ = closing.wait_for(|c| *c), if !shutting_down => {
                shutting_down = true;
                conn.as_mut().graceful_shutdown();
            }
        }
    }
}
