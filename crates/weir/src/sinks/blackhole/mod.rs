//! The `blackhole` sink: counts records and discards them, optionally at a limited
//! `rate` (records per second) to play a slow downstream.

mod core;

pub use self::core::Pacer;

use super::{SinkBatch, Written};
use crate::config;

/// Discards records, at most `rate` per second if configured.
#[derive(Debug)]
pub struct BlackholeSink {
    pacer: Option<Pacer>,
}

impl BlackholeSink {
    /// A blackhole as configured.
    pub fn new(config: &config::BlackholeSink) -> Self {
        BlackholeSink {
            pacer: config.rate.map(|r| Pacer::new(r.get())),
        }
    }

    /// Takes a batch, after the pacing delay if a rate is set.
    ///
    /// # Cancel safety
    ///
    /// Cancel-safe: a cancelled write counts as not taken (its time share is spent).
    pub async fn write(&mut self, batch: &SinkBatch) -> Written {
        if let Some(pacer) = &mut self.pacer {
            let done = pacer.take(batch.records.len() as u64, std::time::Instant::now());
            tokio::time::sleep_until(done.into()).await;
        }
        Written {
            durable_through: Some(batch.next_offset),
            unencodable: 0,
            buffered_bytes: 0,
        }
    }
}
