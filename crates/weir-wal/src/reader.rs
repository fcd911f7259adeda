//! [`Reader`]: reads one cursor's records in batches and commits its position.

use std::fs::OpenOptions;
use std::io::Write;
use std::sync::Arc;

use tokio::sync::watch;

use crate::chunk_frames::ChunkPool;
use crate::error::{CommitError, CursorError, ReadError};
use crate::format::encode_cursor;
use crate::read_ahead::{self, ReadAhead};
use crate::read_batch::{ReadBatch, ReadLimits};
use crate::recovery::CURSOR_DIR;
use crate::segment::sync_dir;
use crate::segment_read::OpenSegment;
use crate::shared::Shared;

/// The most memory a [`Reader`] holds of its own besides the batch its caller has, for
/// reads of at most `max_bytes`: the batch read ahead and the one its task holds while
/// it waits to hand it over, in chunks of `max_bytes` (64 KiB to 1 MiB; consecutive
/// batches share the chunk between them, so together they reach at most one chunk
/// past each end and one between), plus the spare chunks kept for reuse. Payloads
/// slice their chunk, so a caller holding a record holds its whole chunk.
pub fn reader_memory_bound(max_bytes: u64) -> u64 {
    let chunk = crate::chunk_frames::chunk_len(max_bytes) as u64;
    let batches = crate::read_ahead::AHEAD_BATCHES as u64 + 1;
    let chunks = batches + 1 + crate::chunk_frames::SPARE_CHUNKS as u64;
    batches
        .saturating_mul(max_bytes)
        .saturating_add(chunks * chunk)
}

/// Reads a cursor's records in batches, never past the durable end.
///
/// Reading does not move the saved cursor: call [`Reader::commit`] once the sink has
/// written and synced what it read.
///
/// While a full batch more is durable than the caller has taken (a replay, a sink
/// catching up), the reader reads the next batch on the blocking pool while the caller
/// handles this one: a reader then holds up to two batches of its own (one read, one
/// being read) besides those it returned, plus up to 4 chunk buffers kept for reuse.
/// Payloads are slices of chunks read from the segment file, as large as the read's
/// `max_bytes` within 64 KiB..=1 MiB; a chunk's buffer is reused once all of its
/// payloads are dropped.
pub struct Reader {
    shared: Arc<Shared>,
    index: usize,
    name: String,
    next: u64,
    open: Option<OpenSegment>,
    /// Reads on the blocking pool from `next`: the batches the next calls return.
    ahead: Option<ReadAhead>,
    durable: watch::Receiver<u64>,
    /// Chunk buffers to read into, returned when the payloads sliced from them drop.
    pool: ChunkPool,
}

impl std::fmt::Debug for Reader {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Reader")
            .field("cursor", &self.name)
            .field("next", &self.next)
            .finish_non_exhaustive()
    }
}

impl Reader {
    pub(crate) fn new(shared: Arc<Shared>, name: &str) -> Result<Reader, CursorError> {
        let (index, next) = {
            let mut core = shared.core();
            let Some(index) = core
                .cursors
                .iter()
                .position(|c| c.name == name && !c.detached)
            else {
                return Err(CursorError::Unknown(name.to_owned()));
            };
            let c = &mut core.cursors[index];
            if c.reader_out {
                return Err(CursorError::InUse(name.to_owned()));
            }
            c.reader_out = true;
            (index, c.committed)
        };
        let durable = shared.durable.subscribe();
        Ok(Reader {
            shared,
            index,
            name: name.to_owned(),
            next,
            open: None,
            ahead: None,
            durable,
            pool: ChunkPool::default(),
        })
    }

    /// The cursor's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The next offset this reader will read.
    pub fn position(&self) -> u64 {
        self.next
    }

    /// The saved (committed) offset.
    pub fn committed(&self) -> u64 {
        self.shared.core().cursors[self.index].committed
    }

    /// Reads the next records, waiting until there is at least one record or a gap.
    ///
    /// A read waiting on a WAL that has been closed keeps waiting (no record will come):
    /// cancel it, e.g. with a shutdown signal in a `select!`.
    ///
    /// # Errors
    ///
    /// [`ReadError`] if a segment cannot be read.
    ///
    /// # Cancel safety
    ///
    /// Cancel-safe: the position moves only when a batch is returned; a cancelled read is
    /// read again by the next call.
    pub async fn read(&mut self, limits: ReadLimits) -> Result<ReadBatch, ReadError> {
        loop {
            self.durable.borrow_and_update();
            let batch = self.try_read(limits).await?;
            if !batch.is_empty() {
                return Ok(batch);
            }
            if self.durable.changed().await.is_err() {
                return Ok(batch);
            }
        }
    }

    /// Reads what is durable now; the batch may be empty.
    ///
    /// # Errors
    ///
    /// [`ReadError`] if a segment cannot be read.
    ///
    /// # Cancel safety
    ///
    /// Cancel-safe, as [`Reader::read`]. The read itself runs on the blocking pool and
    /// is not abandoned: the next call with the same limits takes its result (the open
    /// segment and its position included), so a reader polled in a `select!` never
    /// reads a segment again from its start. A call with other limits than the last
    /// discards what was read ahead.
    pub async fn try_read(&mut self, limits: ReadLimits) -> Result<ReadBatch, ReadError> {
        if let Some(ahead) = self.ahead.as_mut().filter(|a| a.limits != limits) {
            // Reading with other limits: keep none of its batches, only the open segment
            // (which `read_blocking` reopens at `next` if it has moved past it).
            ahead.batches.close();
            let open = (&mut ahead.task).await;
            self.ahead = None;
            self.open = open.ok().flatten();
        }
        let mut started_here = false;
        loop {
            let ahead = match &mut self.ahead {
                Some(ahead) => ahead,
                None => {
                    started_here = true;
                    self.ahead.insert(ReadAhead::start(
                        Arc::clone(&self.shared),
                        self.next,
                        self.open.take(),
                        limits,
                        self.pool.clone(),
                    ))
                }
            };
            let Some(result) = ahead.batches.recv().await else {
                // The task has ended and every batch it read has been taken.
                let open = (&mut ahead.task).await;
                self.ahead = None;
                self.open = open.map_err(|_| ReadError::Cancelled)?;
                continue;
            };
            let batch = result?;
            if !started_here
                && !batch.is_empty()
                && !read_ahead::still_current(&self.shared, self.next)
            {
                // Read before this call, and records of it were evicted since: a read
                // now starts with a gap. Read again (a gap is counted only when a batch
                // with it is returned).
                ahead.batches.close();
                let open = (&mut ahead.task).await;
                self.ahead = None;
                self.open = open.ok().flatten();
                continue;
            }
            self.next = batch.next;
            if batch.is_empty() && !started_here {
                // Read before this call: what became durable since may be missing from
                // it. Read again.
                continue;
            }
            if let Some(gap) = &batch.gap {
                crate::segment_read::note_gap(&self.shared, self.index, gap.records());
            }
            return Ok(batch);
        }
    }

    /// Saves the cursor at `offset` (every record below it is done): writes a temporary
    /// file, fsyncs it, renames it over the cursor file and fsyncs the directory. Then
    /// retention may delete segments every required cursor has passed.
    ///
    /// # Errors
    ///
    /// [`CommitError::AheadOfRead`] past what was read; [`CommitError::Io`] if saving
    /// failed (the previous position stays saved).
    ///
    /// # Cancel safety
    ///
    /// Cancel-safe: a cancelled commit either saved the new position or left the old
    /// one; either way no record is lost (at worst, some are delivered again).
    pub async fn commit(&mut self, offset: u64) -> Result<(), CommitError> {
        if offset > self.next {
            return Err(CommitError::AheadOfRead {
                requested: offset,
                read: self.next,
            });
        }
        let dir = self.shared.dir.join(CURSOR_DIR);
        let name = self.name.clone();
        tokio::task::spawn_blocking(move || save_cursor(&dir, &name, offset))
            .await
            .map_err(|_| CommitError::Cancelled)??;
        {
            let mut core = self.shared.core();
            let c = &mut core.cursors[self.index];
            c.committed = c.committed.max(offset);
        }
        self.shared.request_retention();
        Ok(())
    }
}

impl Drop for Reader {
    fn drop(&mut self) {
        self.shared.core().cursors[self.index].reader_out = false;
    }
}

fn save_cursor(dir: &std::path::Path, name: &str, offset: u64) -> Result<(), CommitError> {
    let path = dir.join(format!("{name}.cursor"));
    let tmp = dir.join(format!("{name}.cursor.tmp"));
    let io = |source| CommitError::Io {
        path: path.clone(),
        source,
    };
    let mut file = OpenOptions::new()
        .create(true)
        .write(true)
        .truncate(true)
        .open(&tmp)
        .map_err(io)?;
    file.write_all(&encode_cursor(offset)).map_err(io)?;
    file.sync_all().map_err(io)?;
    std::fs::rename(&tmp, &path).map_err(io)?;
    sync_dir(dir).map_err(io)?;
    Ok(())
}

/// What the reader's tests (`wal/reader_tests.rs`, beside the `Wal` they read) look at.
#[cfg(test)]
impl Reader {
    /// The state shared with the writer: a test stalls a read by holding its lock.
    pub(crate) fn shared(&self) -> &Arc<Shared> {
        &self.shared
    }

    /// The task reading ahead, if one runs.
    pub(crate) fn ahead(&self) -> Option<&ReadAhead> {
        self.ahead.as_ref()
    }

    /// The chunk buffers kept for reuse.
    pub(crate) fn pool(&self) -> &ChunkPool {
        &self.pool
    }
}
