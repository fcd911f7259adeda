//! Temporary stand-in for `weir_flow::semaphore` (branch `flow-sem`), same API.
//! Removed once the real semaphore lands on main.
#![allow(dead_code, missing_docs)]

use std::sync::Arc;

/// What to do with a request larger than the total.
#[derive(Debug, Clone, Copy)]
pub enum Oversize {
    /// Refuse it.
    Reject,
}

/// Semaphore settings.
#[derive(Debug, Clone, Copy)]
pub struct SemaphoreConfig {
    pub total: u64,
    pub max_waiters: usize,
    pub oversize: Oversize,
}

/// Why an acquire failed.
#[derive(Debug, thiserror::Error)]
pub enum AcquireError {
    #[error("request larger than the total")]
    Oversize,
    #[error("closed")]
    Closed,
}

/// A FIFO byte semaphore.
#[derive(Debug, Clone)]
pub struct Semaphore {
    inner: Arc<tokio::sync::Semaphore>,
    total: u64,
}

/// Held bytes; released on drop.
#[derive(Debug)]
pub struct Permit {
    _inner: tokio::sync::OwnedSemaphorePermit,
    amount: u64,
}

impl Permit {
    pub fn amount(&self) -> u64 {
        self.amount
    }
}

impl Semaphore {
    pub fn new(config: SemaphoreConfig) -> Self {
        let total = config.total.min(u64::from(u32::MAX));
        Semaphore {
            inner: Arc::new(tokio::sync::Semaphore::new(total as usize)),
            total,
        }
    }

    pub async fn acquire(&self, n: u64) -> Result<Permit, AcquireError> {
        if n > self.total {
            return Err(AcquireError::Oversize);
        }
        let p = self
            .inner
            .clone()
            .acquire_many_owned(n as u32)
            .await
            .map_err(|_| AcquireError::Closed)?;
        Ok(Permit {
            _inner: p,
            amount: n,
        })
    }
}
