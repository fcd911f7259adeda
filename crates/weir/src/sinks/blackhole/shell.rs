//! The running `blackhole` sink (see the [module docs](super)).

use std::sync::Arc;

use super::config::BlackholeConfig;
use super::core::Pacer;
use crate::pipeline::{Sink, SinkBatch, SinkError, Unencodable, Written};
use crate::sinks::{OpenSink, SinkContext};

/// Discards records, at most `rate` per second if configured.
#[derive(Debug)]
pub struct BlackholeSink {
    pacer: Option<Pacer>,
}

impl BlackholeSink {
    /// A blackhole as configured.
    pub fn new(config: &BlackholeConfig) -> Self {
        BlackholeSink {
            pacer: config.rate.map(|r| Pacer::new(r.get())),
        }
    }
}

impl OpenSink for BlackholeConfig {
    type Sink = BlackholeSink;

    fn open(&self, _name: &str, _cx: &SinkContext) -> Result<BlackholeSink, SinkError> {
        Ok(BlackholeSink::new(self))
    }
}

impl Sink for BlackholeSink {
    /// Takes a batch, after the pacing delay if a rate is set.
    ///
    /// # Cancel safety
    ///
    /// Cancel-safe: a cancelled write counts as not taken (its time share is spent).
    async fn write(
        &mut self,
        batch: &Arc<SinkBatch>,
        _rejects: &mut Vec<Unencodable>,
    ) -> Result<Written, SinkError> {
        if let Some(pacer) = &mut self.pacer {
            let done = pacer.take(batch.len() as u64, std::time::Instant::now());
            tokio::time::sleep_until(done.into()).await;
        }
        Ok(Written {
            durable_through: Some(batch.next_offset),
            unencodable: 0,
            buffered_bytes: 0,
        })
    }

    /// It only counts: its records are never decoded (no key or attribute strings made
    /// and freed per record).
    fn takes_wire(&self) -> bool {
        true
    }
}
