//! The `http` source: `POST {path}` on `listen`.
//!
//! The body is NDJSON (one record per non-blank line, each a JSON value), or, with
//! `Content-Type: application/octet-stream` or `text/plain`, one record holding the
//! whole body. Answers:
//!
//! | status | when |
//! |---|---|
//! | 200 `{"accepted": N}` | every record of the body is durable in the WAL |
//! | 400 | a line is not JSON or not valid UTF-8 (the first bad line is named) |
//! | 401 | `auth_token_env` is set and the request lacks `Authorization: Bearer <token>` |
//! | 408 + `Connection: close` | the body has not fully arrived `body_timeout` after the request head (default 10 s) |
//! | 413 | the body is larger than `max_body` (by `Content-Length`, or while streaming: the body is never read past it) |
//! | 415 | the request has a `Content-Encoding` other than `identity` (compressed bodies are not decoded): the body names the coding; for every `Content-Type` |
//! | 503 + `Retry-After` | `max_concurrent_requests` are already in flight (at once); admission did not succeed within `admission_timeout`; the WAL refused (`on_full = "reject"`) or is poisoned. Always before any record of the request was appended: none of them will be delivered |
//! | 500 `{"outcome": "unknown"}` | the records were written and the WAL failed before they were fsynced: they may or may not be delivered after a restart |
//!
//! Connections: at most `max_connections` (default 256) are open at once; more clients
//! wait in the kernel's listen backlog. A client must send its request head within
//! `header_timeout` (default 10 s) of connecting, or of its previous request on a
//! keep-alive connection, or the connection is closed; a head must fit in 16 KiB. The
//! accept loop is [`crate::serve`], shared with the status server.
//!
//! Bounded: at most `max_concurrent_requests` bodies of at most `max_body` bytes are in
//! memory, and a client that sends its body slowly holds its slot at most
//! `body_timeout`. A request waits for admission (source → WAL channel, and under `on_full =
//! "block"` the WAL's disk budget) at most `admission_timeout`; once admitted, it waits
//! for the fsync that makes it durable, however long that takes: a 503 is only ever
//! answered before anything of the request is handed to the WAL, so a client may
//! retry it without duplicates. Only a 500 `"outcome": "unknown"` leaves the client
//! not knowing; retrying it gives at-least-once.

mod config;
mod core;
mod shell;

pub use self::config::HttpSourceConfig;
pub use self::core::{
    BodyKind, SUPPORTED_ENCODINGS, authorized, body_kind, split_ndjson, unsupported_encoding,
};
pub use self::shell::{run, server, token};
