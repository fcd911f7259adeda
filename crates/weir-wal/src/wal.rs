//! [`Wal`]: the async handle: open, append, readers, stats, close.

use std::ops::Range;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::thread::JoinHandle;

use hdrhistogram::Histogram;
use tokio::sync::futures::Notified;
use tokio::sync::{Notify, oneshot, watch};

use crate::batch::Batch;
use crate::config::{OnFull, WalConfig};
use crate::error::{AppendError, CursorError, OpenError};
use crate::inbox::{Inbox, Job, Link};
use crate::open_report::OpenReport;
use crate::reader::Reader;
use crate::recovery::open_dir;
use crate::shared::{Shared, lock};
use crate::stats::WalStats;
use crate::writer::Writer;
use weir_flow::semaphore::{AcquireError, Oversize, Semaphore, SemaphoreConfig};

/// A durable, segmented write-ahead log. Cheap to clone; every clone appends to the same
/// log.
///
/// [`Wal::close`] stops the writer thread and waits for it. Dropping the last clone
/// without `close` asks the writer to stop but does not wait: the drop never blocks (it
/// may run on a runtime thread). The writer then finishes in the background what it was
/// handed (written, fsynced, answered), and releases the directory lock only when it
/// exits; so `close().await` before opening the same directory again, or that open may
/// fail with [`OpenError::Locked`].
///
/// # Examples
///
/// ```
/// use weir_wal::{Batch, CursorConfig, OnFull, ReadLimits, Wal, WalConfig};
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// let dir = tempfile::tempdir()?;
/// let config = WalConfig::builder(dir.path())
///     .max_disk(64 << 20)
///     .on_full(OnFull::Block)
///     .segment_bytes(1 << 20)
///     .cursor("lake", CursorConfig::default())
///     .build()?;
/// let (wal, report) = Wal::open(config)?;
/// assert_eq!(report.durable_end, 0);
///
/// let mut batch = Batch::new();
/// batch.push(b"hello")?;
/// batch.push(b"world")?;
/// let offsets = wal.append(batch).await?; // returns after the fsync
/// assert_eq!(offsets, 0..2);
///
/// let mut reader = wal.reader("lake")?;
/// let read = reader.read(ReadLimits::default()).await?;
/// assert_eq!(read.records[1].payload, &b"world"[..]);
/// reader.commit(read.next_offset()).await?; // after the sink has stored them
/// wal.close().await;
/// # Ok(())
/// # }
/// ```
#[derive(Debug, Clone)]
pub struct Wal {
    inner: Arc<Inner>,
}

#[derive(Debug)]
struct Inner {
    shared: Arc<Shared>,
    pending: Semaphore,
    max_batch_bytes: u64,
    /// The WAL's identity (`wal.id`).
    id: String,
    /// The writer thread; it owns the directory lock and releases it when it exits.
    writer: Mutex<Option<JoinHandle<()>>>,
}

impl std::fmt::Debug for Shared {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Shared")
            .field("dir", &self.dir)
            .finish_non_exhaustive()
    }
}

impl Wal {
    /// Opens (or creates) the WAL: takes the directory lock, recovers the tail,
    /// quarantines damaged segments, loads the cursors, starts the writer thread.
    ///
    /// This does blocking file I/O; from async code call it in `spawn_blocking`.
    ///
    /// # Errors
    ///
    /// [`OpenError`] if the directory is locked by another process, a segment has an
    /// unknown format version, or the filesystem fails.
    pub fn open(config: WalConfig) -> Result<(Wal, OpenReport), OpenError> {
        let (opened, report) = open_dir(&config, crate::clock::now_ms())?;
        // With the directory lock held (taken by `open_dir`).
        let id = crate::identity::load_or_create(&config.dir)?;
        let (durable, _) = watch::channel(opened.core.durable_end);
        let disk = opened.core.disk_bytes;
        let shared = Arc::new(Shared {
            dir: config.dir.clone(),
            sync: config.sync,
            core: Mutex::new(opened.core),
            inbox: Mutex::new(Inbox::default()),
            wake: Condvar::new(),
            durable,
            room: Notify::new(),
            poisoned: AtomicBool::new(false),
            poison_cause: Mutex::new(None),
            disk_bytes: AtomicU64::new(disk),
            fsyncs: AtomicU64::new(0),
            fsync_us: Mutex::new(
                Histogram::new_with_bounds(1, 60_000_000, 2)
                    .unwrap_or_else(|_| Histogram::new(2).unwrap_or_else(|_| unreachable!())),
            ),
            fsync_total_us: AtomicU64::new(0),
            write_total_us: AtomicU64::new(0),
            appended_records: AtomicU64::new(0),
            appended_bytes: AtomicU64::new(0),
            faults: config.faults.clone(),
        });
        let writer = Writer::new(Arc::clone(&shared), opened.active);
        let dir_lock = opened.lock;
        let handle = std::thread::Builder::new()
            .name("weir-wal-writer".into())
            .spawn(move || {
                writer.run();
                // Only now may another `Wal::open` take the directory: nothing writes it
                // any more, even when the last handle was dropped without `close`.
                drop(dir_lock);
            })
            .map_err(|e| OpenError::io("starting the writer thread for", &config.dir, e))?;
        let pending = Semaphore::new(SemaphoreConfig {
            total: config.max_pending_bytes,
            max_waiters: config.max_pending_waiters,
            oversize: Oversize::Reject,
        });
        let wal = Wal {
            inner: Arc::new(Inner {
                shared,
                pending,
                max_batch_bytes: config.max_batch_bytes(),
                id,
                writer: Mutex::new(Some(handle)),
            }),
        };
        Ok((wal, report))
    }

    /// Appends a batch; returns its offsets once it is durable (with
    /// [`SyncMode::Always`](crate::SyncMode::Always): after the fsync that covers it).
    ///
    /// Appenders first wait, in FIFO order, for room in `max_pending_bytes`; then the
    /// writer applies the disk budget: with `on_full = block` the append waits for
    /// retention, with `reject` it fails with [`AppendError::Full`], with `drop_oldest`
    /// the oldest segments are evicted.
    ///
    /// # Errors
    ///
    /// [`AppendError`]; every refusal hands the batch back except
    /// [`AppendError::Poisoned`] (the log is unusable).
    ///
    /// # Cancel safety
    ///
    /// Cancelling while waiting for pending room gives up the place in line and drops the
    /// batch: nothing is written. Cancelling after the batch was handed to the writer
    /// does not withdraw it: it may still become durable, but it was not acknowledged,
    /// so the caller must treat it as not stored (a retry may duplicate it).
    pub async fn append(&self, batch: Batch) -> Result<Range<u64>, AppendError> {
        match self.submit(batch, None).await? {
            Submitted::Done(range) => Ok(range),
            Submitted::Queued(queued) => queued.durable().await,
        }
    }

    /// Waits for pending room and hands the batch to the writer; returns once it is in
    /// the writer's queue (appends are written in the order they were handed over).
    pub(crate) async fn submit(
        &self,
        batch: Batch,
        chain: Option<Link>,
    ) -> Result<Submitted, AppendError> {
        let shared = &self.inner.shared;
        if let Some(err) = shared.poison_error() {
            return Err(err);
        }
        if batch.is_empty() {
            let end = shared.core().written_end();
            return Ok(Submitted::Done(end..end));
        }
        let len = batch.encoded_len();
        if len > self.inner.max_batch_bytes {
            return Err(AppendError::TooLarge {
                batch,
                len,
                max: self.inner.max_batch_bytes,
            });
        }
        let permit = match self.inner.pending.acquire(len).await {
            Ok(p) => p,
            Err(AcquireError::Closed) => return Err(AppendError::Closed(batch)),
            Err(AcquireError::TooLarge { .. }) => {
                return Err(AppendError::TooLarge {
                    batch,
                    len,
                    max: self.inner.max_batch_bytes,
                });
            }
            Err(_) => return Err(AppendError::Busy(batch)),
        };
        let (tx, rx) = oneshot::channel();
        {
            let mut inbox = lock(&shared.inbox);
            if inbox.shutdown {
                return Err(AppendError::Closed(batch));
            }
            inbox.jobs.push_back(Job {
                batch,
                _permit: permit,
                reply: tx,
                chain,
            });
        }
        shared.wake.notify_one();
        Ok(Submitted::Queued(Queued {
            reply: rx,
            shared: Arc::clone(shared),
        }))
    }

    /// A reader for the named cursor (one at a time per cursor).
    ///
    /// # Errors
    ///
    /// [`CursorError`] if the cursor was not declared or already has a reader.
    pub fn reader(&self, cursor: &str) -> Result<Reader, CursorError> {
        Reader::new(Arc::clone(&self.inner.shared), cursor)
    }

    /// A snapshot of the WAL's figures.
    pub fn stats(&self) -> WalStats {
        WalStats::collect(&self.inner.shared, crate::clock::now_ms())
    }

    /// The largest batch [`append`](Self::append) takes (in encoded bytes):
    /// [`WalConfig::max_batch_bytes`].
    pub fn max_batch_bytes(&self) -> u64 {
        self.inner.max_batch_bytes
    }

    /// Whether an append of `bytes` more bytes would have to wait for retention now:
    /// `on_full = block`, the disk budget has no room for them, and the log is not
    /// poisoned (a poisoned log fails appends at once instead). A cheap check (one short
    /// lock, no allocation) for callers that must refuse on time rather than wait.
    pub fn would_block(&self, bytes: u64) -> bool {
        let shared = &self.inner.shared;
        if shared.poisoned.load(Ordering::Acquire) {
            return false;
        }
        let core = shared.core();
        core.on_full == OnFull::Block && core.disk_bytes.saturating_add(bytes) > core.max_disk
    }

    /// A future that completes the next time room may have appeared in the disk budget:
    /// the writer deleted segments (retention after a commit, or eviction), or the log
    /// was poisoned (then [`would_block`](Self::would_block) is false). Nothing else
    /// completes it: it is woken, never a timer.
    ///
    /// To wait for room without missing a wakeup, register first and check second:
    /// create the future, pin it and [`enable`](Notified::enable) it, then call
    /// `would_block`, and await the future only if there is still no room. A completion
    /// says that room *may* have appeared (others may take it first): check again.
    ///
    /// # Examples
    ///
    /// ```
    /// # async fn example(wal: &weir_wal::Wal) {
    /// let bytes = 4096;
    /// loop {
    ///     let freed = wal.room_freed();
    ///     let mut freed = std::pin::pin!(freed);
    ///     freed.as_mut().enable(); // registered: a wakeup from now on is not lost
    ///     if !wal.would_block(bytes) {
    ///         break;
    ///     }
    ///     freed.await; // in practice with a deadline, in a `select!`
    /// }
    /// # }
    /// ```
    ///
    /// # Cancel safety
    ///
    /// Cancel-safe: the future only waits; dropping it gives up nothing.
    pub fn room_freed(&self) -> Notified<'_> {
        self.inner.shared.room.notified()
    }

    /// Whether a failed write or fsync has poisoned the log.
    pub fn is_poisoned(&self) -> bool {
        self.inner.shared.poisoned.load(Ordering::Acquire)
    }

    /// The WAL's identity: a random id created with its directory and kept in it
    /// (`wal.id`), so that an offset names a record only together with it.
    pub fn id(&self) -> &str {
        &self.inner.id
    }

    /// The log's directory.
    pub fn dir(&self) -> &std::path::Path {
        &self.inner.shared.dir
    }

    /// The disk budget (`max_disk`), as last set ([`set_budget`](Self::set_budget)).
    pub fn max_disk(&self) -> u64 {
        self.inner.shared.core().max_disk
    }

    /// The most the log can hold now: `max_disk`, or, when its filesystem has less room
    /// left (its reserve kept back), what it holds plus that room. What budget-aware
    /// rotation measures against: on a filesystem smaller than `max_disk`, the disk
    /// fills long before the budget does. Cheap: one lock, no I/O.
    pub fn capacity(&self) -> u64 {
        self.inner.shared.core().capacity()
    }

    /// Frame bytes the log holds from `offset` to its end (estimated in proportion
    /// within the segment holding `offset`): what a cursor at `offset` keeps from
    /// retention. Cheap: one lock, no I/O.
    pub fn bytes_since(&self, offset: u64) -> u64 {
        self.inner.shared.core().lag_bytes(offset)
    }

    /// The state shared with the writer and the readers.
    pub(crate) fn shared(&self) -> &Arc<Shared> {
        &self.inner.shared
    }

    /// The state shared with the writer (tests stall the writer by holding its lock).
    #[cfg(test)]
    pub(crate) fn inner_shared(&self) -> &Arc<Shared> {
        &self.inner.shared
    }

    /// The durable end: every offset below it is on disk.
    pub fn durable_end(&self) -> u64 {
        *self.inner.shared.durable.borrow()
    }

    /// Stops the writer after it has written, fsynced and answered every batch already
    /// handed to it (appends still waiting for pending room fail with `Closed`), and
    /// waits for it to exit, on the blocking pool: once this returns, the directory is
    /// unlocked and may be opened again. Other clones of this `Wal` stay usable as
    /// handles, but their appends fail with [`AppendError::Closed`].
    ///
    /// # Cancel safety
    ///
    /// Cancel-safe: the writer stops either way; this future only waits for it.
    pub async fn close(self) {
        self.inner.shutdown();
        let handle = lock(&self.inner.writer).take();
        if let Some(handle) = handle {
            let _ = tokio::task::spawn_blocking(move || handle.join()).await;
        }
    }
}

/// What [`Wal::submit`] did with a batch.
pub(crate) enum Submitted {
    /// Nothing to write (an empty batch): its (empty) range.
    Done(Range<u64>),
    /// In the writer's queue.
    Queued(Queued),
}

/// A batch in the writer's queue: [`durable`](Queued::durable) waits for its answer.
/// Dropping it does not withdraw the batch (it may still become durable).
#[derive(Debug)]
#[must_use = "a queued batch is acknowledged only once `durable` returns Ok"]
pub(crate) struct Queued {
    reply: oneshot::Receiver<Result<Range<u64>, AppendError>>,
    shared: Arc<Shared>,
}

impl Queued {
    /// The batch's offsets once it is durable, or why it was not written.
    ///
    /// # Errors
    ///
    /// [`AppendError`], as [`Wal::append`]; through a [`Chain`](crate::Chain) also
    /// [`AppendError::Behind`].
    ///
    /// # Cancel safety
    ///
    /// Dropping the future does not withdraw the batch: treat it as not stored.
    pub(crate) async fn durable(self) -> Result<Range<u64>, AppendError> {
        match self.reply.await {
            Ok(result) => result,
            // The writer dropped the job unanswered: it may have written it.
            Err(_) => Err(AppendError::InDoubt {
                cause: match self.shared.poison_error() {
                    Some(AppendError::Poisoned { cause }) => cause,
                    _ => "the writer thread stopped".into(),
                },
            }),
        }
    }
}

impl Inner {
    fn shutdown(&self) {
        self.pending.close();
        lock(&self.shared.inbox).shutdown = true;
        self.shared.wake.notify_all();
    }
}

/// Asks the writer to stop and returns at once, without joining it: a drop may run on a
/// runtime thread, which must not wait for a thread that may be in an fsync. The writer
/// finishes its queue and exits on its own (detached), releasing the directory lock.
/// [`Wal::close`] is the way to wait for it.
impl Drop for Inner {
    fn drop(&mut self) {
        self.shutdown();
    }
}

#[cfg(test)]
mod tests;

// The reader's and the writer's tests drive a whole `Wal`, so they sit at its layer.
#[cfg(test)]
mod reader_tests;
#[cfg(test)]
mod writer_tests;
