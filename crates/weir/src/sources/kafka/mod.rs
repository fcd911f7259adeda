//! The `kafka` source: a consumer in a Kafka consumer group (librdkafka, through
//! rdkafka) that pauses its partitions while too much is fetched and not yet durable,
//! and commits to the group only offsets already durable in the WAL.
//!
//! - **Pause and resume on watermarks** (seed 001, weir-flow's
//!   [`Watermark`](weir_flow::watermark::Watermark)): the bytes of records fetched and
//!   not yet durable are counted; at `high_watermark` the whole assignment is paused,
//!   at `low_watermark` resumed. librdkafka's own prefetch queue is bounded by
//!   `prefetch_bytes` (`queued.max.messages.kbytes`) and one fetch by
//!   `fetch_max_bytes` (`fetch.max.bytes`), so what the source holds stays below
//!   `high_watermark + fetch_max_bytes + prefetch_bytes` (`max_held_bytes`, counted by
//!   `weir validate`). The poll loop never stops while paused: it polls librdkafka at
//!   least every 50 ms, so the consumer never trips `max.poll.interval.ms` and the group
//!   does not rebalance. A rebalance resets the watermarks (the new assignment starts
//!   unpaused; it is paused again at once if the bytes held are still above the mark).
//! - **Offsets**: committed per partition, in order, only up to the last record whose
//!   WAL unit is durable (units are reported durable in the order they were handed
//!   over: [`OrderedAppends`](crate::pipeline::appends::OrderedAppends)), at most every
//!   200 ms and once more at shutdown. On a revocation the durable offsets of the
//!   partitions that go are committed (synchronously) before they go; what was fetched
//!   and not yet durable is read again by the new owner: at least once. A partition
//!   revoked and assigned again starts a new generation: units of the old one still in
//!   flight are written, but never committed for the new one.
//! - **Gaps**: when a partition's next record is past the offset expected (its
//!   committed offset at assignment, then the last offset + 1), the missing range is a
//!   counted gap (`/status` `gaps`, `gap_offsets`, `last_gap`; metric
//!   `weir_kafka_gap_offsets_total`) with a WARN naming the partition and the range:
//!   retention deleted records before weir read them, or the group's offset was out
//!   of range and librdkafka reset it (`start_from`). Transaction markers and
//!   compaction also leave offsets without records, and are counted the same way.
//! - **Records**: key = the Kafka key (the topic when there is none), `ts` = the
//!   record's timestamp; attributes `kafka.topic`, `kafka.partition`, `kafka.offset`
//!   and each header as `kafka.header.NAME`. A record too large for one WAL batch goes
//!   to the quarantine.
//! - **Scale-out**: several weir instances with the same `group_id` share the
//!   partitions (librdkafka's group protocol). Each record is durable in the WAL of
//!   the instance that owned its partition when it was fetched; after a rebalance the
//!   new owner starts at the last durable commit, so a record may be in two WALs, none
//!   is in none.
//!
//! `/status` `sources.NAME.kafka`: the assigned partitions (paused, fetched, durable,
//! committed, high watermark, lag), the bytes held and the watermarks, pauses,
//! resumes, rebalances, commits, gaps and `last_error`.
//!
//! Client properties pass through `properties`, except those weir owns
//! ([`OWNED_PROPERTIES`]): they are refused.

mod client;
mod config;
pub mod core;
mod offsets;
mod poll;
mod shell;
mod status;

pub use self::config::{KafkaConfig, OWNED_PROPERTIES, Security, StartFrom};
pub use self::shell::{Shared, run};
pub use self::status::register;
