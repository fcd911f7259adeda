//! State shared by the `Wal` handles, the writer thread and the readers.

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError};

use hdrhistogram::Histogram;
use tokio::sync::{Notify, watch};

use crate::config::SyncMode;
use crate::core::Core;
use crate::error::AppendError;
use crate::faults::{IoFaults, IoStep};
use crate::inbox::Inbox;

pub(crate) struct Shared {
    pub dir: PathBuf,
    pub sync: SyncMode,
    pub core: Mutex<Core>,
    pub inbox: Mutex<Inbox>,
    pub wake: Condvar,
    pub durable: watch::Sender<u64>,
    /// Woken (`notify_waiters`) whenever room may have appeared in the disk budget:
    /// segments deleted, or the log poisoned. See `Wal::room_freed`.
    pub room: Notify,
    pub poisoned: AtomicBool,
    pub poison_cause: Mutex<Option<String>>,
    pub disk_bytes: AtomicU64,
    pub fsyncs: AtomicU64,
    pub fsync_us: Mutex<Histogram<u64>>,
    /// Time spent in fsyncs of segment data, in µs, since open.
    pub fsync_total_us: AtomicU64,
    /// Time spent writing batches to the active segment, in µs, since open.
    pub write_total_us: AtomicU64,
    pub appended_records: AtomicU64,
    pub appended_bytes: AtomicU64,
    /// Injected I/O failures ([`crate::faults`]), if configured.
    pub faults: Option<Arc<dyn IoFaults>>,
}

/// Locks a mutex, ignoring poisoning (a panic elsewhere must not take the log down).
pub(crate) fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

impl Shared {
    pub fn core(&self) -> MutexGuard<'_, Core> {
        lock(&self.core)
    }

    pub fn poison(&self, cause: String) {
        let mut slot = lock(&self.poison_cause);
        if slot.is_none() {
            tracing::error!(%cause, dir = %self.dir.display(), "WAL poisoned: no more writes");
            *slot = Some(cause);
        }
        self.poisoned.store(true, Ordering::Release);
        // `Wal::would_block` is false from now on: waiters must look again.
        self.room.notify_waiters();
    }

    pub fn poison_error(&self) -> Option<AppendError> {
        if !self.poisoned.load(Ordering::Acquire) {
            return None;
        }
        let cause = lock(&self.poison_cause).clone().unwrap_or_default();
        Some(AppendError::Poisoned { cause })
    }

    /// The failure injected into `step`, if any ([`crate::faults`]).
    pub fn injected(&self, step: IoStep) -> Option<std::io::Error> {
        self.faults.as_ref().and_then(|f| f.fail(step))
    }

    /// Asks the writer to run retention (after a cursor commit).
    pub fn request_retention(&self) {
        lock(&self.inbox).retention = true;
        self.wake.notify_one();
    }
}
