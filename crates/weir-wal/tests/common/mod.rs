//! Helpers shared by the integration tests.
#![allow(dead_code)]

use std::path::Path;

use weir_wal::{Batch, CursorConfig, OnFull, WalConfig, WalConfigBuilder};

/// A builder with small segments for tests.
pub fn small(dir: &Path, on_full: OnFull) -> WalConfigBuilder {
    WalConfig::builder(dir)
        .max_disk(1 << 20)
        .segment_bytes(4096)
        .on_full(on_full)
}

/// One cursor named `sink`, required.
pub fn with_sink(b: WalConfigBuilder) -> WalConfig {
    b.cursor("sink", CursorConfig::default()).build().unwrap()
}

/// A batch of `n` records `prefix-i`.
pub fn batch(prefix: &str, n: usize) -> Batch {
    let mut b = Batch::new();
    for i in 0..n {
        b.push(format!("{prefix}-{i}").as_bytes()).unwrap();
    }
    b
}

/// The payload written for offset `i` by [`numbered`].
pub fn payload_for(i: u64, size: usize) -> Vec<u8> {
    let mut p = format!("record-{i:08}-").into_bytes();
    while p.len() < size {
        p.push(b'a' + (i % 26) as u8);
    }
    p.truncate(size.max(16));
    p
}

/// A batch of records `first..first+n` as made by [`payload_for`].
pub fn numbered(first: u64, n: u64, size: usize) -> Batch {
    let mut b = Batch::new();
    for i in first..first + n {
        b.push(&payload_for(i, size)).unwrap();
    }
    b
}
