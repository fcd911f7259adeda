//! Test helper for the crash-safety test: appends batches to a WAL and prints every
//! acknowledged range, until it is killed.
//!
//! Usage: `wal-crash-writer DIR SEED`. Prints `ack FIRST COUNT TASK SEQ` once each
//! append has returned (the batch is durable), flushing stdout every time. Records of
//! batch `(TASK, SEQ)` are made by [`record`], so a checker can tell what each offset
//! must hold. A reader commits its cursor now and then, so cursor files are replaced
//! while the process may be killed.

use std::io::Write;

use weir_wal::{Batch, CursorConfig, OnFull, ReadLimits, Wal, WalConfig};

/// The payload of record `j` of batch `(task, seq)`: a self-describing header and a
/// filler that depends on all three.
fn record(task: u64, seq: u64, j: u64, len: usize) -> Vec<u8> {
    let mut p = format!("t{task} s{seq} j{j} n{len};").into_bytes();
    let mut x = task.wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ seq.rotate_left(17) ^ j;
    while p.len() < len {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        p.push(b'a' + (x % 26) as u8);
    }
    p
}

fn main() {
    let mut args = std::env::args().skip(1);
    let (Some(dir), Some(seed)) = (args.next(), args.next()) else {
        eprintln!("usage: wal-crash-writer DIR SEED");
        std::process::exit(2);
    };
    let seed: u64 = seed.parse().unwrap_or(1);
    let config = WalConfig::builder(&dir)
        .max_disk(256 << 20)
        .segment_bytes(64 * 1024)
        .on_full(OnFull::Block)
        .cursor("sink", CursorConfig::default())
        // Never read: holds retention, so the checker can see every record ever written.
        .cursor("audit", CursorConfig::default())
        .build()
        .unwrap_or_else(|e| panic!("config: {e}"));
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap_or_else(|e| panic!("runtime: {e}"));
    runtime.block_on(async move {
        let (wal, _report) = Wal::open(config).unwrap_or_else(|e| panic!("open: {e}"));
        let mut reader = wal.reader("sink").unwrap_or_else(|e| panic!("reader: {e}"));
        tokio::spawn(async move {
            loop {
                let Ok(batch) = reader
                    .read(ReadLimits {
                        max_records: 50,
                        max_bytes: 1 << 20,
                    })
                    .await
                else {
                    return;
                };
                let _ = reader.commit(batch.next_offset()).await;
            }
        });
        let mut tasks = Vec::new();
        for task in 0..4u64 {
            let wal = wal.clone();
            tasks.push(tokio::spawn(async move {
                let mut rng = seed ^ (task + 1).wrapping_mul(0x2545_F491_4F6C_DD1D);
                for seq in 0.. {
                    rng ^= rng << 13;
                    rng ^= rng >> 7;
                    rng ^= rng << 17;
                    let n = 1 + rng % 20;
                    let len = 16 + (rng >> 8) as usize % 3000;
                    let mut batch = Batch::new();
                    for j in 0..n {
                        let _ = batch.push(&record(task, seq, j, len));
                    }
                    match wal.append(batch).await {
                        Ok(range) => {
                            let mut out = std::io::stdout().lock();
                            let _ = writeln!(
                                out,
                                "ack {} {} {task} {seq} {len}",
                                range.start,
                                range.end - range.start
                            );
                            let _ = out.flush();
                        }
                        Err(e) => panic!("append: {e}"),
                    }
                }
            }));
        }
        for t in tasks {
            let _ = t.await;
        }
    });
}
