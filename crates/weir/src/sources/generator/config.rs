//! `type = "generator"`: its keys and its bounds.

use std::num::{NonZeroU32, NonZeroU64};

use serde::Serialize;

use crate::keys::{Bounds, ByteSize, Section, times};
use crate::sources::SourceKeys;

/// `type = "generator"`: synthetic records at a set rate.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct GeneratorConfig {
    /// Records per second; 0 means as fast as the WAL admits them. Required.
    pub rate: u64,
    /// Records to produce before stopping; unlimited when absent.
    pub count: Option<NonZeroU64>,
    /// Payload bytes per record. Default 100 B.
    pub size: ByteSize,
    /// Number of distinct keys (`key-0` … `key-{keys-1}`). Default 16.
    pub keys: NonZeroU32,
    /// Seed of the payload and key sequence. Default 0.
    pub seed: u64,
    /// Records per batch handed to the WAL. Default 100.
    pub batch_size: NonZeroU32,
}

impl SourceKeys for GeneratorConfig {
    const TYPE: &'static str = "generator";

    fn parse(s: &mut Section<'_>, _name: &str) -> Option<Self> {
        let rate = s.req(
            "rate",
            "records per second, 0 for as fast as the WAL admits",
        );
        Some(Self {
            count: s.opt("count"),
            size: s.or("size", ByteSize::new(100).expect("100 > 0")),
            keys: s.or("keys", NonZeroU32::new(16).expect("16 > 0")),
            seed: s.or("seed", 0),
            batch_size: s.or("batch_size", NonZeroU32::new(100).expect("100 > 0")),
            rate: rate?,
        })
    }

    fn bounds(&self, bounds: &mut Bounds<'_>) {
        bounds.add(
            "batch",
            Some(self.batch_size.get().into()),
            times(self.batch_size.get(), self.size.bytes()),
            format!(
                "the batch being built: batch_size {} × size {}",
                self.batch_size, self.size
            ),
        );
    }

    fn max_batch_bytes(&self) -> (u64, &'static str) {
        (
            times(self.batch_size.get(), self.size.bytes()),
            "batch_size × size",
        )
    }
}
