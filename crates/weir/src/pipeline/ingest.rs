//! The source → WAL path: admission, then an append that completes once durable.
//!
//! Every source holds an [`Ingest`]. A batch goes through two bounds before the WAL:
//!
//! 1. a **ticket** from the source's own semaphore (`max_uncommitted_tickets`, 64): at
//!    most that many of its batches are on their way to durability at once;
//! 2. a **slot** in the source → WAL channel shared by all sources: a
//!    [`DualSemaphore`] of `wal.channel_batches` (256) batches and
//!    `wal.max_pending_bytes` (8 MiB) bytes.
//!
//! Both are futures (FIFO, cancel-safe): waiting never parks a thread. Under
//! `on_full = "block"` with a deadline, admission also waits for room in the WAL's disk
//! budget; that wait is woken by the WAL freeing room or by another batch giving its
//! reservation back ([`Reserved`]), never polled. Then
//! [`Admission::append`] hands the batch to the WAL's writer thread and resolves once
//! the WAL reports it durable; only then may the source acknowledge.

use std::ops::Range;
use std::pin::pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use tokio::sync::Notify;

use weir_flow::semaphore::{
    AcquireError, DualAmount, DualPermit, DualSemaphore, Permit, Semaphore, SemaphoreConfig,
};
use weir_wal::{AppendError, Batch, Chain, Wal};

use super::stats::{SourceStats, add};

/// Why a batch was not admitted.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum AdmitError {
    /// Not admitted within the deadline.
    #[error("the WAL did not admit the batch within {0:?}; retry later")]
    Timeout(Duration),
    /// Larger than the source → WAL channel's byte bound.
    #[error(
        "a batch of {bytes} bytes is larger than wal.max_pending_bytes ({max} bytes); \
         send smaller batches or raise wal.max_pending_bytes"
    )]
    TooLarge {
        /// The batch's encoded size.
        bytes: u64,
        /// The bound.
        max: u64,
    },
    /// Too many requests are already waiting, or the pipeline is shutting down.
    #[error("the WAL is not admitting batches (too many waiting, or shutting down); retry later")]
    Unavailable,
}

/// Bytes admitted by every source of a pipeline and not yet answered (see
/// [`Ingest::admit`]), shared by their [`Ingest`] handles; and the wakeup of admissions
/// waiting for room next to them.
#[derive(Debug, Default)]
pub struct Reserved {
    bytes: AtomicU64,
    /// Woken (`notify_waiters`) each time a reservation is given back.
    released: Notify,
}

impl Reserved {
    /// Nothing reserved.
    pub fn new() -> Self {
        Self::default()
    }

    /// The bytes reserved now.
    pub fn bytes(&self) -> u64 {
        self.bytes.load(Ordering::Acquire)
    }
}

/// The handle a source ingests through. Cheap to clone.
#[derive(Clone)]
pub struct Ingest {
    inner: Arc<Inner>,
}

struct Inner {
    wal: Wal,
    channel: DualSemaphore,
    /// Bytes admitted by every source and not yet answered (see [`Reservation`]).
    reserved: Arc<Reserved>,
    tickets: Semaphore,
    max_tickets: u64,
    stats: Arc<SourceStats>,
}

impl std::fmt::Debug for Ingest {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Ingest").finish_non_exhaustive()
    }
}

/// A batch's place on the way to the WAL: a ticket and a channel slot.
#[must_use = "an admission is given back when dropped"]
#[derive(Debug)]
pub struct Admission {
    ingest: Ingest,
    _ticket: Permit,
    _slot: DualPermit,
    _reservation: Reservation,
}

/// Bytes admitted towards the WAL and not yet answered, shared by every source, given
/// back when dropped (after the append is answered).
#[derive(Debug)]
struct Reservation {
    reserved: Arc<Reserved>,
    bytes: u64,
}

impl Reservation {
    fn take(reserved: &Arc<Reserved>, bytes: u64) -> Self {
        reserved.bytes.fetch_add(bytes, Ordering::AcqRel);
        Reservation {
            reserved: Arc::clone(reserved),
            bytes,
        }
    }
}

impl Drop for Reservation {
    fn drop(&mut self) {
        self.reserved.bytes.fetch_sub(self.bytes, Ordering::AcqRel);
        // Admissions waiting for room next to the reserved bytes look again.
        self.reserved.released.notify_waiters();
    }
}

impl Ingest {
    /// An ingest handle for one source. `reserved` is shared by every source of the
    /// pipeline: the bytes admitted and not yet answered.
    pub fn new(
        wal: Wal,
        channel: DualSemaphore,
        reserved: Arc<Reserved>,
        max_tickets: u32,
        stats: Arc<SourceStats>,
    ) -> Self {
        let max_tickets = u64::from(max_tickets.max(1));
        Ingest {
            inner: Arc::new(Inner {
                wal,
                channel,
                reserved,
                tickets: Semaphore::new(SemaphoreConfig::new(max_tickets)),
                max_tickets,
                stats,
            }),
        }
    }

    /// The largest batch this handle can admit and append (encoded bytes): the smaller
    /// of the source → WAL channel's byte bound and the WAL's own batch limit. A source
    /// that gathers more splits it.
    pub fn max_batch_bytes(&self) -> u64 {
        self.inner
            .channel
            .total()
            .bytes
            .min(self.inner.wal.max_batch_bytes())
    }

    /// The source's counters.
    pub fn stats(&self) -> &SourceStats {
        &self.inner.stats
    }

    /// The source's counters, shared.
    pub fn stats_arc(&self) -> &Arc<SourceStats> {
        &self.inner.stats
    }

    /// Waits for a ticket and a channel slot for a batch of `bytes` encoded bytes (with
    /// `deadline`, refused once it passes). While it waits, the source's state is
    /// `backpressured`. Under `on_full = "block"` with a deadline, it also waits for the
    /// WAL's disk budget to have room, so that a request is refused on time instead of
    /// waiting inside the WAL.
    ///
    /// # Errors
    ///
    /// [`AdmitError`].
    ///
    /// # Cancel safety
    ///
    /// Cancel-safe: dropping the future gives back whatever it held and its place in
    /// line.
    pub async fn admit(
        &self,
        bytes: u64,
        deadline: Option<Instant>,
    ) -> Result<Admission, AdmitError> {
        let inner = &self.inner;
        let waiting = Waiting::start(&inner.stats);
        let ticket = match deadline {
            None => inner.tickets.acquire(1).await,
            Some(d) => inner.tickets.acquire_timeout(1, remaining(d)).await,
        }
        .map_err(|e| admit_error(e, bytes, deadline))?;
        let slot = match deadline {
            None => inner.channel.acquire(1, bytes).await,
            Some(d) => inner.channel.acquire_timeout(1, bytes, remaining(d)).await,
        }
        .map_err(|e| dual_error(e, bytes, deadline))?;
        let reservation = match deadline {
            Some(d) => self.wait_for_room(bytes, d).await?,
            None => Reservation::take(&inner.reserved, bytes),
        };
        drop(waiting);
        Ok(Admission {
            ingest: self.clone(),
            _ticket: ticket,
            _slot: slot,
            _reservation: reservation,
        })
    }

    /// Under `on_full = "block"`, waits until `bytes` fit in the WAL's budget next to
    /// every batch already admitted and not yet answered (they reach the disk first),
    /// then reserves them; or the deadline passes. Checking `bytes` alone would let
    /// every concurrent request through at once, to wait inside the WAL past its
    /// deadline. A batch written but not yet answered is counted twice for a moment:
    /// the check errs on the side of refusing on time.
    ///
    /// Room appears only when the WAL deletes segments (or is poisoned), signalled by
    /// [`Wal::room_freed`], or when a reservation is given back, signalled by
    /// [`Reserved`]: the wait is woken by either, or by the deadline; it never polls.
    async fn wait_for_room(
        &self,
        bytes: u64,
        deadline: Instant,
    ) -> Result<Reservation, AdmitError> {
        let wal = &self.inner.wal;
        let reserved = &self.inner.reserved;
        let mut expired = pin!(tokio::time::sleep_until(deadline.into()));
        loop {
            // Register for both wakeups before checking: room freed between the check
            // and the wait then still wakes this wait. (`enable` takes each `Notify`'s
            // lock, which `notify_waiters` takes after the change it announces.)
            let mut freed = pin!(wal.room_freed());
            let mut released = pin!(reserved.released.notified());
            freed.as_mut().enable();
            released.as_mut().enable();
            let held = reserved.bytes.load(Ordering::Acquire);
            if !wal.would_block(held.saturating_add(bytes)) {
                if reserved
                    .bytes
                    .compare_exchange(held, held + bytes, Ordering::AcqRel, Ordering::Acquire)
                    .is_ok()
                {
                    return Ok(Reservation {
                        reserved: Arc::clone(reserved),
                        bytes,
                    });
                }
                continue; // another batch reserved meanwhile: check again
            }
            if Instant::now() >= deadline {
                return Err(AdmitError::Timeout(Duration::ZERO));
            }
            tokio::select! {
                () = freed => {}
                () = released => {}
                () = &mut expired => return Err(AdmitError::Timeout(Duration::ZERO)),
            }
        }
    }

    /// An ordered appender on the WAL for this source (see [`Admission::submit`]).
    pub fn chain(&self) -> Chain {
        self.inner.wal.chain()
    }

    /// Waits until every admitted batch of this source has been answered (shutdown).
    ///
    /// # Cancel safety
    ///
    /// Cancel-safe: it only waits.
    pub async fn idle(&self) {
        let _all = self.inner.tickets.acquire(self.inner.max_tickets).await;
    }
}

impl Admission {
    /// Appends the batch; resolves once the WAL reports it durable (then the source may
    /// acknowledge). Counts the outcome in the source's stats.
    ///
    /// # Errors
    ///
    /// The WAL's [`AppendError`], which hands the batch back where it can.
    ///
    /// # Cancel safety
    ///
    /// As [`Wal::append`]: once handed to the writer the batch may become durable even
    /// if this future is dropped; it then counts as not acknowledged.
    pub async fn append(self, batch: Batch) -> Result<Range<u64>, AppendError> {
        let stats = &self.ingest.inner.stats;
        let records = batch.len();
        let bytes = batch.encoded_len();
        let waiting = Waiting::start(stats);
        let result = self.ingest.inner.wal.append(batch).await;
        drop(waiting);
        match &result {
            Ok(_) => {
                add(&stats.records, records);
                add(&stats.bytes, bytes);
                add(&stats.batches, 1);
            }
            Err(e) => count_failure(stats, e, records),
        }
        result
    }
}

impl Admission {
    /// Hands the batch to the WAL through `chain` and returns once it is queued there,
    /// before it is durable: the caller may admit and submit the next batch while this
    /// one is written and fsynced, and the log keeps them in submission order (see
    /// [`weir_wal::Chain`]). [`Appending::durable`] waits for the answer.
    ///
    /// # Errors
    ///
    /// What the WAL refuses before queuing the batch (the batch handed back where it can).
    ///
    /// # Cancel safety
    ///
    /// As [`weir_wal::Chain::submit`].
    pub async fn submit(self, chain: &Chain, batch: Batch) -> Result<Appending, AppendError> {
        let records = batch.len();
        let bytes = batch.encoded_len();
        match chain.submit(batch).await {
            Ok(pending) => Ok(Appending {
                admission: self,
                pending,
                records,
                bytes,
            }),
            Err(e) => {
                let stats = &self.ingest.inner.stats;
                add(&stats.refused_records, records);
                add(&stats.refused_batches, 1);
                Err(e)
            }
        }
    }
}

/// A batch queued in the WAL through a chain, holding its admission until answered.
#[derive(Debug)]
#[must_use = "a batch is acknowledged only once `durable` returns Ok"]
pub struct Appending {
    admission: Admission,
    pending: weir_wal::Pending,
    records: u64,
    bytes: u64,
}

impl Appending {
    /// Resolves once the WAL reports the batch durable; counts the outcome in the
    /// source's stats, as [`Admission::append`].
    ///
    /// # Errors
    ///
    /// The WAL's [`AppendError`] (with [`AppendError::Behind`] when an earlier batch of
    /// the chain was refused).
    ///
    /// # Cancel safety
    ///
    /// As [`Admission::append`].
    pub async fn durable(self) -> Result<Range<u64>, AppendError> {
        let stats = &self.admission.ingest.inner.stats;
        let waiting = Waiting::start(stats);
        let result = self.pending.durable().await;
        drop(waiting);
        match &result {
            Ok(_) => {
                add(&stats.records, self.records);
                add(&stats.bytes, self.bytes);
                add(&stats.batches, 1);
            }
            Err(e) => count_failure(stats, e, self.records),
        }
        result
    }
}

/// Counts a batch the WAL did not make durable: in doubt when it may still be (written,
/// then the WAL failed before the fsync), refused otherwise.
fn count_failure(stats: &SourceStats, e: &AppendError, records: u64) {
    if e.may_be_durable() {
        add(&stats.in_doubt_records, records);
    } else {
        add(&stats.refused_records, records);
        add(&stats.refused_batches, 1);
    }
}

/// Counts a wait on admission or durability; `/status` shows the source
/// `backpressured` while one lasts longer than a moment.
struct Waiting<'a> {
    stats: &'a SourceStats,
}

impl<'a> Waiting<'a> {
    fn start(stats: &'a SourceStats) -> Self {
        stats.wait_begin();
        Waiting { stats }
    }
}

impl Drop for Waiting<'_> {
    fn drop(&mut self) {
        self.stats.wait_end();
    }
}

fn remaining(deadline: Instant) -> Duration {
    deadline.saturating_duration_since(Instant::now())
}

fn admit_error(e: AcquireError, bytes: u64, deadline: Option<Instant>) -> AdmitError {
    match e {
        AcquireError::Timeout { waited } => AdmitError::Timeout(waited),
        AcquireError::TooLarge { total, .. } => AdmitError::TooLarge { bytes, max: total },
        _ if deadline.is_some_and(|d| Instant::now() >= d) => AdmitError::Timeout(Duration::ZERO),
        _ => AdmitError::Unavailable,
    }
}

fn dual_error(e: AcquireError<DualAmount>, bytes: u64, deadline: Option<Instant>) -> AdmitError {
    match e {
        AcquireError::Timeout { waited } => AdmitError::Timeout(waited),
        AcquireError::TooLarge { total, .. } => AdmitError::TooLarge {
            bytes,
            max: total.bytes,
        },
        _ if deadline.is_some_and(|d| Instant::now() >= d) => AdmitError::Timeout(Duration::ZERO),
        _ => AdmitError::Unavailable,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use weir_flow::semaphore::DualSemaphoreConfig;
    use weir_wal::{CursorConfig, OnFull, WalConfig};

    fn batch(bytes: usize) -> Batch {
        let mut b = Batch::new();
        b.push(&vec![b'x'; bytes]).expect("fits");
        b
    }

    /// A WAL under `on_full = "block"` that never frees room by itself (the required
    /// cursor `slow` does not commit), and an ingest handle on it.
    fn blocking_wal(dir: &std::path::Path) -> (Wal, Ingest) {
        let config = WalConfig::builder(dir)
            .max_disk(256 * 1024)
            .segment_bytes(16 * 1024)
            .on_full(OnFull::Block)
            .cursor("slow", CursorConfig::default())
            .build()
            .unwrap();
        let (wal, _) = weir_wal::Wal::open(config).unwrap();
        let telemetry = crate::telemetry::Telemetry::new("test".into());
        let stats = Arc::new(SourceStats::new(
            telemetry.component(crate::telemetry::ComponentKind::Source, "s"),
        ));
        let ingest = Ingest::new(
            wal.clone(),
            DualSemaphore::new(DualSemaphoreConfig::new(256, 8 << 20)),
            Arc::new(Reserved::new()),
            64,
            stats,
        );
        (wal, ingest)
    }

    /// Appends small batches until `room` more bytes would block and fewer would not.
    async fn fill_until(wal: &Wal, room: u64) {
        while !wal.would_block(room) {
            wal.append(batch(100)).await.unwrap();
        }
    }

    /// An admission waiting for room next to another's reservation is admitted the
    /// moment that reservation is given back: woken, not polled. The clock is paused
    /// and auto-advances only when every task waits on a timer, so a waiter that slept
    /// between checks would move it; this one leaves it where it was.
    #[tokio::test(start_paused = true)]
    async fn a_waiting_admission_wakes_when_a_reservation_is_given_back() {
        let dir = tempfile::tempdir().unwrap();
        let (wal, ingest) = blocking_wal(dir.path());
        let size = batch(2000).encoded_len();
        fill_until(&wal, 2 * size).await;
        assert!(!wal.would_block(size), "room for one batch is left");
        let deadline = Instant::now() + Duration::from_secs(3600);
        let first = ingest.admit(size, Some(deadline)).await.unwrap();
        let waiter = {
            let ingest = ingest.clone();
            tokio::spawn(async move { ingest.admit(size, Some(deadline)).await })
        };
        for _ in 0..10 {
            tokio::task::yield_now().await;
        }
        assert!(
            !waiter.is_finished(),
            "no room next to the first reservation"
        );
        let before = tokio::time::Instant::now();
        drop(first);
        let second = waiter
            .await
            .unwrap()
            .expect("admitted once room was given back");
        assert_eq!(tokio::time::Instant::now(), before, "no timer ran");
        drop(second);
        wal.close().await;
    }

    /// An admission waiting for the WAL's disk budget is admitted once the sink's
    /// commit lets retention free room, long before its deadline.
    #[tokio::test]
    async fn a_waiting_admission_wakes_when_retention_frees_the_budget() {
        let dir = tempfile::tempdir().unwrap();
        let (wal, ingest) = blocking_wal(dir.path());
        let mut slow = wal.reader("slow").unwrap();
        let size = batch(2000).encoded_len();
        fill_until(&wal, size).await;
        let started = Instant::now();
        let waiter = {
            let ingest = ingest.clone();
            let deadline = started + Duration::from_secs(60);
            tokio::spawn(async move { ingest.admit(size, Some(deadline)).await })
        };
        tokio::time::sleep(Duration::from_millis(20)).await;
        assert!(!waiter.is_finished(), "the budget is full");
        let end = wal.durable_end();
        while slow.position() < end {
            let read = slow.read(weir_wal::ReadLimits::default()).await.unwrap();
            slow.commit(read.next_offset()).await.unwrap();
        }
        let admitted = tokio::time::timeout(Duration::from_secs(10), waiter)
            .await
            .expect("woken by retention")
            .unwrap()
            .expect("admitted");
        admitted.append(batch(2000)).await.unwrap();
        assert!(started.elapsed() < Duration::from_secs(10));
        wal.close().await;
    }

    /// With room for two batches, eight concurrent admissions with a deadline: two are
    /// admitted (and append without waiting), six are refused on time. Checking each
    /// batch alone against the room would admit all eight, six to wait in the WAL.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn concurrent_deadlines_share_the_room_instead_of_all_passing() {
        let dir = tempfile::tempdir().unwrap();
        let (wal, ingest) = blocking_wal(dir.path());
        // The largest admissible batch is the WAL's own limit here (half of max_disk),
        // below the channel's 8 MiB.
        assert_eq!(ingest.max_batch_bytes(), 128 * 1024);
        assert_eq!(ingest.max_batch_bytes(), wal.max_batch_bytes());
        let size = batch(2000).encoded_len();
        // Fill with small batches until two more batches fit and three do not.
        while !wal.would_block(3 * size) {
            let b = batch(100);
            let a = ingest.admit(b.encoded_len(), None).await.unwrap();
            a.append(b).await.unwrap();
        }
        assert!(!wal.would_block(2 * size), "room for two batches is left");
        let deadline = Instant::now() + Duration::from_millis(300);
        let tries: Vec<_> = (0..8)
            .map(|_| {
                let ingest = ingest.clone();
                tokio::spawn(async move { ingest.admit(size, Some(deadline)).await })
            })
            .collect();
        let mut admitted = Vec::new();
        let mut refused = 0;
        for t in tries {
            match t.await.unwrap() {
                Ok(a) => admitted.push(a),
                Err(AdmitError::Timeout(_)) => refused += 1,
                Err(e) => panic!("{e}"),
            }
        }
        assert_eq!((admitted.len(), refused), (2, 6));
        for a in admitted {
            tokio::time::timeout(Duration::from_secs(2), a.append(batch(2000)))
                .await
                .expect("an admitted batch appends without waiting for retention")
                .unwrap();
        }
    }
}
