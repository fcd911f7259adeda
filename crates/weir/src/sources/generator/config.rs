//! `type = "generator"`: its keys and its bounds.

use std::num::{NonZeroU32, NonZeroU64};

use serde::Serialize;

use crate::keys::{Bounds, ByteSize, Section, times};
use crate::sources::SourceKeys;

/// `type = "generator"`: synthetic records at a set rate. The keys, their defaults and
/// their descriptions are declared in [`SourceKeys::parse`] (`weir config reference`).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct GeneratorConfig {
    /// `rate`: records per second, 0 for as fast as the WAL admits.
    pub rate: u64,
    /// `count`: records to produce before stopping; unlimited when `None`.
    pub count: Option<NonZeroU64>,
    /// `size`: payload bytes per record.
    pub size: ByteSize,
    /// `keys`: the number of distinct keys.
    pub keys: NonZeroU32,
    /// `seed`: of the payload and key sequence.
    pub seed: u64,
    /// `batch_size`: records per batch handed to the WAL.
    pub batch_size: NonZeroU32,
}

impl SourceKeys for GeneratorConfig {
    const TYPE: &'static str = "generator";
    const ABOUT: &'static str = "Synthetic records at a set rate.";

    fn parse(s: &mut Section<'_>, _name: &str) -> Option<Self> {
        let rate = s
            .key(
                "rate",
                "Records per second; 0 means as fast as the WAL admits them.",
            )
            .unit("records per second")
            .example(5000)
            .req("records per second, 0 for as fast as the WAL admits");
        let count = s
            .key("count", "Records to produce before stopping.")
            .unit("records")
            .default_text("unlimited")
            .example(1_000_000)
            .opt();
        let size = s
            .key("size", "Payload bytes per record.")
            .or(ByteSize::new(100).expect("100 > 0"));
        let keys = s
            .key(
                "keys",
                "Number of distinct keys (`key-0` … `key-{keys-1}`).",
            )
            .or(NonZeroU32::new(16).expect("16 > 0"));
        let seed = s.key("seed", "Seed of the payload and key sequence.").or(0);
        let batch_size = s
            .key("batch_size", "Records per batch handed to the WAL.")
            .unit("records")
            .or(NonZeroU32::new(100).expect("100 > 0"));
        Some(Self {
            count,
            size,
            keys,
            seed,
            batch_size,
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
