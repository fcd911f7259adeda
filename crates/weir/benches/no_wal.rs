//! The generator → blackhole pipeline without the WAL: the baseline that
//! `scripts/bench-pipeline.sh` prints next to `weir run`'s figures.
//!
//! `cargo bench -p weir --bench no_wal` runs, for `WEIR_BENCH_SECS` seconds (default 5),
//! the same per-record work as `weir run` with a `generator` source and a `blackhole`
//! sink, with the WAL replaced by an in-memory channel:
//!
//! - source side, as `sources::generator::run`: `RecordMaker::next_record` (the
//!   generator's own code, from the library), `Record::encode_into` the WAL form,
//!   `weir_wal::Batch::push` (framing and CRC), `batch_size` records per batch;
//! - then, instead of appending (write, fsync, disk budget) and reading back through a
//!   cursor (segment read, cursor commit), the framed batch goes through a bounded
//!   channel;
//! - sink side, as `pipeline::driver`: each framed record is unpacked with its CRC
//!   checked and copied out (`Batch::payloads`, the frame reader a cursor uses), its
//!   source peeked, `Record::decode_with`d into a batch of records, which goes through a
//!   channel of 2 batches to a writer task that counts it (an unlimited blackhole does
//!   nothing else).
//!
//! Three tasks on a 2-thread tokio runtime, like the daemon's generator, sink reader and
//! sink writer. `WEIR_BENCH_SIZE` sets the payload size (default 200 B, as the
//! script's pipeline cases). It prints one line: records/s, MB/s of WAL-framed bytes
//! (the unit of the daemon's `weir_source_bytes_total`) and MB/s of payload.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use bytes::Bytes;
use tokio::sync::mpsc;
use weir_wal::Batch;

use weir::record::{Record, peek_source};
use weir::sources::generator::RecordMaker;

/// The generator's defaults (`config::GeneratorConfig`).
const BATCH_SIZE: u64 = 100;
const KEYS: u32 = 16;
/// Batches between source and sink, in place of the WAL (the daemon's source → WAL
/// channel holds 256).
const CHANNEL_BATCHES: usize = 256;

fn env<T: std::str::FromStr>(name: &str, default: T) -> T {
    std::env::var(name)
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(default)
}

#[derive(Default)]
struct Counted {
    records: u64,
    framed_bytes: u64,
    payload_bytes: u64,
}

async fn source(name: Arc<str>, size: usize, tx: mpsc::Sender<Batch>, stop: Arc<AtomicBool>) {
    let mut maker = RecordMaker::new(name, 0, KEYS, size);
    let mut wire = Vec::new();
    while !stop.load(Ordering::Relaxed) {
        let now_ms = weir::record::now_ms();
        let mut batch = Batch::new();
        for _ in 0..BATCH_SIZE {
            let record = maker.next_record(now_ms);
            wire.clear();
            record.encode_into(&mut wire);
            batch.push(&wire).expect("record size");
        }
        if tx.send(batch).await.is_err() {
            break;
        }
    }
}

/// Decodes like the sink driver's read loop; returns the framed bytes it read.
async fn sink_reader(
    input: Arc<str>,
    mut rx: mpsc::Receiver<Batch>,
    tx: mpsc::Sender<(Vec<Record>, u64)>,
) -> u64 {
    let mut framed = 0;
    while let Some(batch) = rx.recv().await {
        framed += batch.encoded_len();
        let mut records = Vec::with_capacity(batch.len() as usize);
        let mut bytes = 0;
        for payload in batch.payloads() {
            match peek_source(&payload) {
                Ok(source) if *source == *input => {}
                _ => continue,
            }
            // As the sink driver: the source name is the input's, already held.
            let record =
                Record::decode_with(Bytes::from(payload), |_| Arc::clone(&input)).expect("decodes");
            bytes += record.payload.len() as u64;
            records.push(record);
        }
        if tx.send((records, bytes)).await.is_err() {
            break;
        }
    }
    framed
}

/// The blackhole: counts.
async fn sink_writer(mut rx: mpsc::Receiver<(Vec<Record>, u64)>) -> (u64, u64) {
    let (mut records, mut bytes) = (0, 0);
    while let Some((batch, b)) = rx.recv().await {
        records += batch.len() as u64;
        bytes += b;
    }
    (records, bytes)
}

async fn run(secs: f64, size: usize) -> (Counted, f64) {
    let name: Arc<str> = Arc::from("gen");
    let stop = Arc::new(AtomicBool::new(false));
    let (batches_tx, batches_rx) = mpsc::channel(CHANNEL_BATCHES);
    let (decoded_tx, decoded_rx) = mpsc::channel(2);
    let started = Instant::now();
    let source = tokio::spawn(source(
        Arc::clone(&name),
        size,
        batches_tx,
        Arc::clone(&stop),
    ));
    let reader = tokio::spawn(sink_reader(name, batches_rx, decoded_tx));
    let writer = tokio::spawn(sink_writer(decoded_rx));
    tokio::time::sleep(Duration::from_secs_f64(secs)).await;
    stop.store(true, Ordering::Relaxed);
    source.await.expect("source");
    let framed_bytes = reader.await.expect("reader");
    let (records, payload_bytes) = writer.await.expect("writer");
    let counted = Counted {
        records,
        framed_bytes,
        payload_bytes,
    };
    (counted, started.elapsed().as_secs_f64())
}

fn main() {
    let secs: f64 = env("WEIR_BENCH_SECS", 5.0);
    let size: usize = env("WEIR_BENCH_SIZE", 200);
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime");
    let (c, elapsed) = rt.block_on(run(secs, size));
    println!(
        "no-WAL: {:.0} records/s  {:.1} MB/s WAL-framed  {:.1} MB/s payload  ({} records of {size} B in {elapsed:.1} s)",
        c.records as f64 / elapsed,
        c.framed_bytes as f64 / elapsed / 1e6,
        c.payload_bytes as f64 / elapsed / 1e6,
        c.records,
    );
}
