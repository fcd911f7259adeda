//! Writes the format-version-1 fixture kept in `tests/fixtures/v1/`:
//! `cargo run -p weir-wal --example write_fixture -- crates/weir-wal/tests/fixtures/v1`.
//!
//! Seven records `fixture record N` (append time 1_700_000_000_000 + N ms) over two
//! segments, and cursor `sink` committed at offset 3. Only rerun it to make a fixture
//! for a new format version, in a new directory: the old fixtures must keep opening.

use weir_wal::{Batch, CursorConfig, OnFull, ReadLimits, Wal, WalConfig};

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let dir = std::env::args().nth(1).ok_or("usage: write_fixture DIR")?;
    let config = WalConfig::builder(&dir)
        .max_disk(1 << 20)
        .segment_bytes(200)
        .on_full(OnFull::Reject)
        .cursor("sink", CursorConfig::default())
        .build()?;
    let (wal, _) = Wal::open(config)?;
    for i in 0..7u64 {
        let mut b = Batch::with_time_ms(1_700_000_000_000 + i);
        b.push(format!("fixture record {i}").as_bytes())?;
        wal.append(b).await?;
    }
    let mut reader = wal.reader("sink")?;
    reader
        .read(ReadLimits {
            max_records: 3,
            max_bytes: 1 << 20,
        })
        .await?;
    reader.commit(3).await?;
    drop(reader);
    wal.close().await;
    std::fs::remove_file(std::path::Path::new(&dir).join("LOCK"))?;
    Ok(())
}
