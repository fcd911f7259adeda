//! Bounded HTTP serving, shared by the HTTP source and the status server.
//!
//! `axum::serve` accepts every connection the kernel hands it and waits for a request
//! head forever, so clients that open connections and send half a head hold a file
//! descriptor each until the process runs out of them. [`Server`] bounds that:
//!
//! - **Connection cap** (`max_connections`): the accept loop takes a connection permit
//!   *before* it accepts. At the cap, further clients wait in the kernel's listen
//!   backlog, which holds no descriptor of this process, until a connection closes.
//! - **Header timeout** (`header_timeout`): a connection whose request head has not
//!   fully arrived within it of connecting is closed.
//! - **Idle timeout**: the same timer runs again after each response, so a keep-alive
//!   connection that sends no new request head within `header_timeout` is closed.
//! - **Memory**: a request head must fit in [`CONNECTION_BUFFER_BYTES`] (a larger one
//!   gets 431), and an open connection holds at most [`CONNECTION_MEMORY_BYTES`] of
//!   buffers.
//! - **Failed accepts** (EMFILE, ENFILE, ENOBUFS): the loop backs off, from 100 ms up to
//!   1 s, and logs the first failure at once and then at most one line every 10 s
//!   with the count ([`AcceptErrors`]).
//!
//! The server is generic over the [`Listener`] (a TCP listener today) and over the
//! hyper service it runs on each connection.

mod accept;
mod connection;
mod listener;
mod server;

#[cfg(test)]
mod tests;

pub use self::accept::{AcceptErrors, AcceptFailed};
pub use self::listener::{Listener, PeerAddr};
pub use self::server::{Connections, Limits, Server};

/// hyper's read and write buffer limit per connection: a request head must fit (a
/// larger one gets 431), and a body streams through it.
pub const CONNECTION_BUFFER_BYTES: usize = 16 * 1024;

/// What an open connection holds at most: its read and its write buffer.
pub const CONNECTION_MEMORY_BYTES: u64 = 2 * CONNECTION_BUFFER_BYTES as u64;
