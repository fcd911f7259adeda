//! Read throughput: a cursor replaying a WAL against a raw sequential `read` of the same
//! segment files, alternating in rounds, page cache warm. Shared by the `append` bench
//! (its last line) and the `replay` bench.

// The `append` bench reads a WAL it wrote itself and does not use `fill`.
#![allow(dead_code)]

use std::fs::File;
use std::io::Read;
use std::path::Path;
use std::time::Instant;

use weir_wal::{Batch, CursorConfig, OnFull, ReadLimits, Wal, WalConfig};

/// Raw/cursor alternations.
pub const READ_ROUNDS: usize = 3;

/// The read limits of the cursor (the daemon's defaults for `read_batch_*`).
pub const LIMITS: ReadLimits = ReadLimits {
    max_records: 4096,
    max_bytes: 4 << 20,
};

fn config(dir: &Path) -> WalConfig {
    WalConfig::builder(dir)
        .max_disk(64 << 30)
        .segment_bytes(64 << 20)
        .max_pending_bytes(32 << 20)
        .on_full(OnFull::Reject)
        .cursor("reader", CursorConfig::default())
        .build()
        .expect("bench config")
}

/// Appends `bytes` of payload in `record`-byte records (4 MiB batches).
pub async fn fill(dir: &Path, bytes: u64, record: usize) {
    let (wal, _) = Wal::open(config(dir)).expect("open");
    let payload: Vec<u8> = (0..record).map(|i| (i * 7) as u8).collect();
    let per_batch = ((4 << 20) / record).max(1);
    let mut written = 0u64;
    while written < bytes {
        let mut b = Batch::new();
        for _ in 0..per_batch {
            b.push(&payload).expect("record size");
        }
        written += (per_batch * record) as u64;
        wal.append(b).await.expect("append");
    }
    wal.close().await;
}

/// Reads the whole WAL through a cursor, dropping each batch (a blackhole sink).
pub async fn read_cursor(dir: &Path) -> (u64, f64) {
    let (wal, _) = Wal::open(config(dir)).expect("open");
    let mut reader = wal.reader("reader").expect("reader");
    let end = wal.durable_end();
    let started = Instant::now();
    let mut bytes = 0u64;
    while reader.position() < end {
        let b = reader.try_read(LIMITS).await.expect("read");
        bytes += b
            .records
            .iter()
            .map(|r| r.payload.len() as u64)
            .sum::<u64>();
    }
    let secs = started.elapsed().as_secs_f64();
    drop(reader);
    wal.close().await;
    (bytes, secs)
}

/// Reads every segment file with 256 KiB `read`s into one reused buffer.
pub fn read_raw(dir: &Path) -> (u64, f64) {
    let started = Instant::now();
    let mut total = 0u64;
    let mut buf = vec![0u8; 256 * 1024];
    let mut paths: Vec<_> = std::fs::read_dir(dir)
        .expect("dir")
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|e| e == "seg"))
        .collect();
    paths.sort();
    for p in paths {
        let mut f = File::open(p).expect("open");
        loop {
            let n = f.read(&mut buf).expect("read");
            if n == 0 {
                break;
            }
            total += n as u64;
        }
    }
    (total, started.elapsed().as_secs_f64())
}

fn mb(bytes: u64, secs: f64) -> f64 {
    bytes as f64 / secs / 1e6
}

/// Minutes to move 10 GiB at `mb_s` MB/s.
fn minutes_10gib(mb_s: f64) -> f64 {
    10.0 * 1024.0 * 1024.0 * 1024.0 / (mb_s * 1e6) / 60.0
}

/// Alternates raw reads and cursor reads of the WAL in `dir` ([`READ_ROUNDS`] each,
/// after one raw read that warms the page cache) and prints both rates, their ratio and
/// the minutes each needs for 10 GiB.
pub fn report(rt: &tokio::runtime::Runtime, dir: &Path, label: &str) {
    read_raw(dir); // warms the page cache
    let (mut raw_bytes, mut raw_secs) = (0u64, 0.0f64);
    let (mut bytes, mut secs) = (0u64, 0.0f64);
    let mut ratios = Vec::new();
    for _ in 0..READ_ROUNDS {
        let (rb, rs) = read_raw(dir);
        let (b, s) = rt.block_on(read_cursor(dir));
        ratios.push(mb(b, s) / mb(rb, rs));
        (raw_bytes, raw_secs, bytes, secs) = (raw_bytes + rb, raw_secs + rs, bytes + b, secs + s);
    }
    ratios.sort_by(f64::total_cmp);
    let (cursor, raw) = (mb(bytes, secs), mb(raw_bytes, raw_secs));
    println!();
    println!(
        "read ({label}, page cache warm): cursor vs raw sequential read of the segment files, \
         {READ_ROUNDS} rounds"
    );
    println!(
        "cursor {cursor:.1} MB/s of payload ({} MB a round), raw {raw:.1} MB/s, ratio {:.2} \
         (rounds {:.2}-{:.2})",
        bytes / READ_ROUNDS as u64 / 1_000_000,
        cursor / raw,
        ratios[0],
        ratios[READ_ROUNDS - 1],
    );
    let (cursor_min, raw_min) = (minutes_10gib(cursor), minutes_10gib(raw));
    println!(
        "replaying 10 GiB of payload at the cursor's rate: {cursor_min:.3} min ({:.1} s); \
         raw read: {raw_min:.3} min ({:.1} s)",
        cursor_min * 60.0,
        raw_min * 60.0,
    );
}
