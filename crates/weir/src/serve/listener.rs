//! Where connections come from: a TCP listener, or anything that yields streams.

use std::future::Future;

use tokio::io::{AsyncRead, AsyncWrite};

/// A source of connections for a [`Server`](super::Server).
pub trait Listener: Send + 'static {
    /// One accepted connection.
    type Io: AsyncRead + AsyncWrite + Unpin + Send + 'static;

    /// The next connection, or the error of this accept.
    ///
    /// # Cancel safety
    ///
    /// Must be cancel-safe: the server drops it when it stops.
    fn accept(&mut self) -> impl Future<Output = std::io::Result<Self::Io>> + Send;
}

impl Listener for tokio::net::TcpListener {
    type Io = tokio::net::TcpStream;

    async fn accept(&mut self) -> std::io::Result<Self::Io> {
        let (stream, _peer) = tokio::net::TcpListener::accept(self).await?;
        Ok(stream)
    }
}
