//! A [`Reader`](crate::Reader)'s read-ahead: one task on the blocking pool reads batch
//! after batch from the cursor's position, a batch ahead of the caller, while at least
//! a full batch more is durable, so that a replay does not wait for a thread to wake
//! between two batches. A batch read ahead is what a read would return when the caller
//! takes it (the same records under the same limits), unless records were evicted
//! meanwhile: the reader checks that and reads again.

use std::sync::Arc;

use tokio::sync::mpsc;
use tokio::task::JoinHandle;

use crate::chunk_frames::ChunkPool;
use crate::core::Locate;
use crate::error::ReadError;
use crate::read_batch::{ReadBatch, ReadLimits};
use crate::segment_read::{OpenSegment, read_blocking};
use crate::shared::Shared;

/// Batches read and not yet taken: with the one the task holds while it waits to hand
/// it over, a reader has at most two batches of its own in memory besides the caller's.
pub(crate) const AHEAD_BATCHES: usize = 1;

/// Whether `batch` stopped at a limit (not at the durable end, a gap or damage).
fn full(batch: &ReadBatch, limits: ReadLimits) -> bool {
    batch.gap.is_none()
        && (batch.records.len() >= limits.max_records.max(1)
            || (!batch.records.is_empty() && batch.bytes >= limits.max_bytes))
}

/// Whether a batch read at `next` now would certainly stop at `max_records`: only then
/// is one read ahead, so that a batch read ahead holds what a read when the caller
/// asks would return (a shorter one would miss what became durable meanwhile).
fn full_batch_durable(shared: &Shared, next: u64, limits: ReadLimits) -> bool {
    let durable = *shared.durable.borrow();
    durable.saturating_sub(next) >= limits.max_records.max(1) as u64
}

/// Whether a batch read ahead still holds what a read from `next` would return now:
/// its first record has not been evicted since (eviction takes the oldest segments
/// first, so then none of them has).
pub(crate) fn still_current(shared: &Shared, next: u64) -> bool {
    matches!(
        shared.core().locate(next),
        Locate::Segment { .. } | Locate::End
    )
}

/// The reading task and the batches it has read.
pub(crate) struct ReadAhead {
    /// The limits every batch of this task was read with.
    pub(crate) limits: ReadLimits,
    /// Batches in offset order, the first starting where the task started. An error ends
    /// the task; so do an empty batch and catching up with the durable end.
    pub(crate) batches: mpsc::Receiver<Result<ReadBatch, ReadError>>,
    /// Hands back the open segment when the task ends, to continue from.
    pub(crate) task: JoinHandle<Option<OpenSegment>>,
}

impl ReadAhead {
    /// Starts reading at `next` (within `open`, if it is there).
    pub(crate) fn start(
        shared: Arc<Shared>,
        mut next: u64,
        mut open: Option<OpenSegment>,
        limits: ReadLimits,
        pool: ChunkPool,
    ) -> ReadAhead {
        let pool = pool.for_reads_of(limits.max_bytes);
        let (tx, batches) = mpsc::channel(AHEAD_BATCHES);
        let task = tokio::task::spawn_blocking(move || {
            loop {
                if tx.is_closed() {
                    // The reader is gone (dropped, or it discarded what was read ahead):
                    // read nothing more for it. Its `Wal` may be closed by now and its
                    // files deleted by the next one.
                    break;
                }
                let result = read_blocking(&shared, next, &mut open, limits, &pool);
                let more = match &result {
                    Ok(batch) => {
                        next = batch.next;
                        full(batch, limits) && full_batch_durable(&shared, next, limits)
                    }
                    Err(_) => false,
                };
                // Fails once the reader has dropped or closed the receiver.
                if tx.blocking_send(result).is_err() || !more {
                    break;
                }
            }
            open
        });
        ReadAhead {
            limits,
            batches,
            task,
        }
    }
}
