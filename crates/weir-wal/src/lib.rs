//! weir's segmented write-ahead log.
//!
//! Sources acknowledge a record only once [`Wal::append`] has returned its offsets:
//! from then on the record survives a process crash (and, with [`SyncMode::Always`],
//! a power loss), until every required cursor has committed past it or the disk budget's
//! `on_full = drop_oldest` evicts it, visibly and counted.
//!
//! # Layout
//!
//! ```text
//! <dir>/LOCK                           exclusive lock (File::try_lock), held by the
//!                                      writer thread until it exits
//! <dir>/00000000000000000000.seg       segments, named by their first offset
//! <dir>/00000000000000001234.seg
//! <dir>/cursors/<name>.cursor          one per sink, replaced atomically
//! <dir>/quarantine/<first>.seg         damaged segments moved aside at open
//! ```
//!
//! The byte-by-byte format of segments, frames and cursor files is in [`format`].
//! Offsets are record numbers: dense `u64`s from 0, increasing by one per record.
//!
//! # Durability guarantees
//!
//! - **Group commit.** Appenders hand encoded batches to one writer thread, which takes
//!   everything queued, writes it in order, calls `sync_data` once, and only then
//!   answers each append with its offsets. Blocking I/O never runs on a runtime thread.
//! - **Rotation.** A segment is sealed at `segment_bytes`: it is fsynced, the next one is
//!   created with its header fsynced, and the directory is fsynced. Deleting segments
//!   (retention, eviction) also fsyncs the directory. A batch never spans segments.
//! - **Poisoning.** A failed fsync, or a write, create or delete that fails for any
//!   reason other than a lack of space, inodes or file descriptors, poisons the log:
//!   every later append fails with [`AppendError::Poisoned`], and the batches whose
//!   fate is unknown are answered [`AppendError::InDoubt`]. Nothing that failed is
//!   acknowledged. Restarting recovers every acknowledged record.
//! - **Refusals.** Lacking space, inodes or descriptors (`ENOSPC`, `EDQUOT`, `EMFILE`,
//!   `ENFILE`) while writing or creating a segment never poisons: a partly written
//!   batch is cut back, no offset is used, and `on_full` applies (`reject` refuses,
//!   `block` and `drop_oldest` wait and retry). [`faults`] injects these failures in
//!   tests.
//! - **Readers** never see past the durable end (data fsynced), in either sync mode.
//! - **Recovery** CRC-checks the last segment, truncates a torn or corrupt tail back to
//!   the last good record and reports what it cut ([`OpenReport`]); a segment whose
//!   header is damaged is moved to `quarantine/` and its offsets become a gap, so a bad
//!   file never makes the process crash-loop. An unknown format version is refused with
//!   a clear error, never "repaired".
//! - **Budget.** `max_disk` bounds the segment files, headers included; `on_full`
//!   ([`OnFull`], no default) decides what an append does when the next batch would
//!   exceed it.
//! - **Retention.** Segments every required cursor has committed past are deleted when
//!   cursors commit; when no cursor holds retention, sealed segments are deleted only
//!   when an append needs the room.
//! - **Memory.** Bytes handed to the writer and not yet durable are bounded by
//!   `max_pending_bytes` (a FIFO semaphore); each segment keeps a bounded time index.
#![warn(missing_docs)]

mod batch;
mod chain;
mod chunk_frames;
mod clock;
mod config;
mod core;
mod crc;
mod error;
pub mod faults;
pub mod format;
mod identity;
mod inbox;
mod live;
mod open_report;
mod read_ahead;
mod read_batch;
mod reader;
mod recovery;
mod segment;
mod segment_read;
mod shared;
mod stats;
mod strays;
mod time_index;
pub mod tools;
mod wal;
mod writer;

pub use batch::{Batch, RecordTooLarge};
pub use chain::{Chain, Pending};
pub use config::{
    ConfigError, CursorConfig, MaxLag, OnFull, RecoveryScan, StartFrom, SyncMode, WalConfig,
    WalConfigBuilder,
};
pub use core::FS_RESERVE;
pub use error::{AppendError, CommitError, CursorError, OpenError, ReadError};
pub use identity::ID_FILE;
pub use live::LiveError;
pub use open_report::{OpenReport, QuarantinedSegment};
pub use read_batch::{Gap, ReadBatch, ReadLimits, Record};
pub use reader::{Reader, reader_memory_bound};
pub use stats::{CursorStats, WalStats};
pub use wal::Wal;
