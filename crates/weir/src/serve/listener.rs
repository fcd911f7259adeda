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

    /// The address of the peer of `io`, when it has one: handed to each request as a
    /// [`PeerAddr`] extension.
    fn peer(io: &Self::Io) -> Option<std::net::SocketAddr> {
        let _ = io;
        None
    }
}

/// The client's address, in the extensions of every request a
/// [`Server`](super::Server) serves on a TCP listener.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PeerAddr(pub std::net::SocketAddr);

impl Listener for tokio::net::TcpListener {
    type Io = tokio::net::TcpStream;

    async fn accept(&mut self) -> std::io::Result<Self::Io> {
        let (stream, _peer) = tokio::net::TcpListener::accept(self).await?;
        Ok(stream)
    }

    fn peer(io: &Self::Io) -> Option<std::net::SocketAddr> {
        io.peer_addr().ok()
    }
}
