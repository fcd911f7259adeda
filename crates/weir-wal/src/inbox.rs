//! The writer's queue: the jobs appenders hand over, and each job's tie to the
//! [`Chain`](crate::Chain) it was submitted through, if any.

use std::collections::VecDeque;
use std::ops::Range;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use tokio::sync::oneshot;
use weir_flow::semaphore::Permit;

use crate::batch::Batch;
use crate::error::AppendError;

/// One append handed to the writer.
pub(crate) struct Job {
    pub batch: Batch,
    /// Holds `max_pending_bytes` room until the job is answered.
    pub _permit: Permit,
    pub reply: oneshot::Sender<Result<Range<u64>, AppendError>>,
    /// The [`Chain`](crate::Chain) it was submitted through, if any.
    pub chain: Option<Link>,
}

/// Work for the writer thread. Its length is bounded by the pending-bytes semaphore:
/// every job holds a permit of at least one frame's bytes.
#[derive(Default)]
pub(crate) struct Inbox {
    pub jobs: VecDeque<Job>,
    pub retention: bool,
    pub shutdown: bool,
}

/// Shared by a chain and its jobs in the writer's queue.
#[derive(Debug, Default)]
pub(crate) struct ChainState {
    /// One more than the latest epoch in which a batch was refused (0: none): jobs of
    /// an epoch below it are refused.
    pub(crate) refused_below: AtomicU64,
}

/// A job's tie to its chain.
#[derive(Debug)]
pub(crate) struct Link {
    pub(crate) state: Arc<ChainState>,
    pub(crate) epoch: u64,
}

impl Link {
    /// Whether an earlier batch of this job's chain (in its epoch) was refused.
    pub(crate) fn is_behind(&self) -> bool {
        self.epoch < self.state.refused_below.load(Ordering::Acquire)
    }

    /// The writer refused this job: later jobs of the epoch are refused too.
    pub(crate) fn refused(&self) {
        self.state
            .refused_below
            .fetch_max(self.epoch + 1, Ordering::AcqRel);
    }
}
