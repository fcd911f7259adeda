//! The `nats` source: a NATS JetStream durable pull consumer whose credits are the
//! messages fetched and not yet durable, each acked only once its WAL batch is fsynced.
//!
//! At startup ([`StartSource::check`](crate::sources::StartSource::check)) it connects
//! (the first answering server of `url`), refuses more than one subject below
//! nats-server 2.10 (older servers ignore `filter_subjects` and deliver the whole
//! stream), creates the durable consumer or binds an existing one, refuses an ack
//! policy other than `explicit`, checks the filter the server reports, and warns (log
//! and `/status`) about a `max_ack_pending` below `max_inflight × instances`, a finite
//! `max_deliver`, and a duplicate window shorter than `ack_wait`.
//!
//! Three tasks share a [`core::Ledger`]:
//!
//! - the **fetcher** is the sender of a weir-flow credit channel: it waits for demand
//!   and fetches at most `min(demand, fetch_batch)` messages, so at most
//!   `max_inflight` messages are fetched and not yet durable. When the WAL is full it
//!   gets no demand and simply stops pulling (the stream keeps the backlog, nothing is
//!   nacked into `max_deliver`). A redelivery of a message already durable in this run
//!   is acked at once and not written again;
//! - the **appender** is the receiver: it grants `max_inflight` up front, takes what
//!   arrived in stream order in units (up to 4096 records or 4 MiB), admits and
//!   appends unit k+1 while unit k is being fsynced (up to 4 in flight, in stream
//!   order through [`crate::pipeline::appends`]), and once a unit is durable acks each
//!   message (`+ACK`, or a confirmed double ack with `ack_confirm`) and grants the
//!   freed credits back;
//! - the **progress** task sends `+WPI` for every message waiting longer than half of
//!   the consumer's `ack_wait` (a full WAL, a slow fsync), so JetStream does not
//!   redeliver it, and reads the consumer's info (ack pending) for `/status`.
//!
//! A failed fetch is retried with backoff and logged at WARN (the first at once, then
//! at most every 10 s). When the durable consumer turns out deleted, the fetcher creates
//! it again with the configured settings, delivering from the message after the last one
//! known durable ([`core::Ledger::resume_after`]), logged at WARN; when it cannot (the
//! stream is gone too), the source is `failed` with the cause and tries again every 10 s.
//!
//! Records: key = subject; attributes `nats.stream`, `nats.seq`, `nats.subject`,
//! `nats.redelivered` and each header as `nats.header.NAME`. A message above
//! `max_message_bytes` goes to the quarantine, then is acked; the quarantine logs it
//! (rate-limited) and counts it.
//!
//! Delivery: at least once. After a crash the server redelivers what was not acked
//! (after `ack_wait`); what was acked is in the WAL. Several instances bound to one
//! consumer share the stream: each message is durable in one instance's WAL.

mod append;
pub mod client;
mod config;
mod consumer;
pub mod core;
mod fetch;
mod shell;
mod status;

pub use self::config::{DeliverPolicy, NatsConfig};
pub use self::consumer::Connected;
pub use self::shell::{Shared, run};
pub use self::status::register;
