//! Append and read throughput of the WAL against raw file I/O, in the same run.
//!
//! `cargo bench -p weir-wal --bench append` prints a table. For each record size (100 B,
//! 1 KiB, 64 KiB) and appender count (1, 8), the WAL appends for a fixed time with group
//! commit (`sync = always`); then a baseline writes the same bytes with `write_all` +
//! `sync_data` at the same cadence (the same number of bytes per fsync the WAL
//! achieved), alternating with the WAL in short rounds ([`ROUNDS`]). `ratio` is the
//! WAL's MB/s over the baseline's over all rounds, `median` the median of the rounds'
//! ratios, `rounds` their range.
//!
//! A second baseline, `handed`, runs the same raw loop on a thread of its own, each chunk
//! handed over and answered through channels (one chunk in flight in the one-at-a-time
//! mode, four when pipelined): the least that any log which keeps fsync off its callers'
//! threads pays (the WAL must: an async task that blocked in fsync would park a thread
//! serving others). `÷handed` is the WAL over it, so the raw ratio splits into what the
//! design costs (raw ÷ handed) and what the WAL itself adds (÷handed).
//!
//! Two appender modes: pipelined (each appender keeps four batches in flight through a
//! `Chain`, as the MQTT, NATS and file sources keep four units, so the writer finds the
//! next batch queued when an fsync ends), and one at a time (`Wal::append`: the disk
//! idles from the end of each fsync until an appender has woken and handed over its
//! next batch).
//!
//! Last, a cursor reads the 1 KiB × 8 case's WAL back, against a raw sequential read of
//! the same segment files (`--bench replay` does the same with more data and more
//! record sizes). `WEIR_BENCH_SECS` sets the WAL's time per case (default 3).

use std::fs::File;
use std::io::Write;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use weir_wal::{Batch, CursorConfig, OnFull, Wal, WalConfig};

#[path = "support/read.rs"]
mod support_read;

struct Run {
    records: u64,
    bytes: u64,
    fsyncs: u64,
    secs: f64,
    /// Time in fsyncs and in writes, µs.
    fsync_us: u64,
    write_us: u64,
}

fn config(dir: &Path) -> WalConfig {
    WalConfig::builder(dir)
        .max_disk(16 << 30)
        .segment_bytes(64 << 20)
        .max_pending_bytes(32 << 20)
        .on_full(OnFull::Reject)
        .cursor("reader", CursorConfig::default())
        .build()
        .expect("bench config")
}

/// Records per batch: about 16 KiB of payload per batch, at least one record.
fn per_batch(size: usize) -> usize {
    (16 * 1024 / size).max(1)
}

/// How each appender hands batches over.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Mode {
    /// `Wal::append`: the next batch only once the previous one is durable.
    OneAtATime,
    /// Through a `Chain`, up to [`DEPTH`] batches in flight (what the MQTT source does):
    /// the writer finds the next batch queued when an fsync ends.
    Pipelined,
}

/// Batches in flight per appender in [`Mode::Pipelined`].
const DEPTH: usize = 4;

async fn wal_run(dir: &Path, size: usize, appenders: usize, mode: Mode, secs: f64) -> Run {
    let (wal, _) = Wal::open(config(dir)).expect("open");
    let stop = Arc::new(AtomicBool::new(false));
    let payload = vec![0x5au8; size];
    let started = Instant::now();
    let mut tasks = Vec::new();
    for _ in 0..appenders {
        let (wal, stop, payload) = (wal.clone(), Arc::clone(&stop), payload.clone());
        tasks.push(tokio::spawn(async move {
            let batch = || {
                let mut b = Batch::new();
                for _ in 0..per_batch(size) {
                    b.push(&payload).expect("record size");
                }
                b
            };
            match mode {
                Mode::OneAtATime => {
                    while !stop.load(Ordering::Relaxed) {
                        wal.append(batch()).await.expect("append");
                    }
                }
                Mode::Pipelined => {
                    let chain = wal.chain();
                    let mut in_flight = std::collections::VecDeque::new();
                    while !stop.load(Ordering::Relaxed) {
                        in_flight.push_back(chain.submit(batch()).await.expect("submit"));
                        if in_flight.len() >= DEPTH {
                            let oldest = in_flight.pop_front().expect("in flight");
                            oldest.durable().await.expect("append");
                        }
                    }
                    for p in in_flight {
                        p.durable().await.expect("append");
                    }
                }
            }
        }));
    }
    tokio::time::sleep(Duration::from_secs_f64(secs)).await;
    stop.store(true, Ordering::Relaxed);
    for t in tasks {
        t.await.expect("appender");
    }
    let secs = started.elapsed().as_secs_f64();
    let s = wal.stats();
    wal.close().await;
    Run {
        records: s.appended_records,
        bytes: s.appended_bytes,
        fsyncs: s.fsyncs,
        secs,
        fsync_us: s.fsync_time_us,
        write_us: s.write_time_us,
    }
}

/// The baseline's time, in seconds: in all, in `sync_data`, in `write_all`.
#[derive(Default)]
struct Raw {
    secs: f64,
    fsync: f64,
    write: f64,
}

/// The same bytes, `fsyncs` chunks of `write_all` + `sync_data`.
fn baseline(dir: &Path, bytes: u64, fsyncs: u64) -> Raw {
    let mut f = File::create(dir.join("baseline")).expect("create");
    let chunk = (bytes / fsyncs.max(1)).max(1) as usize;
    let buf = vec![0x5au8; chunk];
    let mut raw = Raw::default();
    let started = Instant::now();
    let mut left = bytes;
    while left > 0 {
        let n = (chunk as u64).min(left) as usize;
        let t = Instant::now();
        f.write_all(&buf[..n]).expect("write");
        let w = t.elapsed().as_secs_f64();
        f.sync_data().expect("sync");
        raw.fsync += t.elapsed().as_secs_f64() - w;
        raw.write += w;
        left -= n as u64;
    }
    raw.secs = started.elapsed().as_secs_f64();
    raw
}

/// The baseline's chunks written and fsynced by a thread of its own: the caller hands
/// each chunk over through a channel and takes the answer back through another, with up
/// to `depth` chunks handed over and not yet answered. What any log that keeps fsync off
/// its callers' threads pays at least (two cross-thread wake-ups per fsync when `depth`
/// is 1), with none of a log's framing, checksums or bookkeeping. Seconds in all.
fn handed_over(dir: &Path, bytes: u64, fsyncs: u64, depth: usize) -> f64 {
    let mut f = File::create(dir.join("handed")).expect("create");
    let chunk = (bytes / fsyncs.max(1)).max(1) as usize;
    let (to_writer, chunks) = std::sync::mpsc::sync_channel::<usize>(depth);
    let (to_caller, answers) = std::sync::mpsc::channel::<()>();
    let writer = std::thread::spawn(move || {
        let buf = vec![0x5au8; chunk];
        for n in chunks {
            f.write_all(&buf[..n]).expect("write");
            f.sync_data().expect("sync");
            if to_caller.send(()).is_err() {
                return;
            }
        }
    });
    let started = Instant::now();
    let (mut left, mut unanswered) = (bytes, 0usize);
    while left > 0 {
        if unanswered == depth {
            answers.recv().expect("answer");
            unanswered -= 1;
        }
        let n = (chunk as u64).min(left) as usize;
        to_writer.send(n).expect("hand over");
        unanswered += 1;
        left -= n as u64;
    }
    for _ in 0..unanswered {
        answers.recv().expect("answer");
    }
    let secs = started.elapsed().as_secs_f64();
    drop(to_writer);
    writer.join().expect("writer");
    secs
}

/// WAL/baseline alternations per case.
const ROUNDS: usize = 6;

fn mb(bytes: u64, secs: f64) -> f64 {
    bytes as f64 / secs / 1e6
}

/// `WEIR_BENCH_CASES` (e.g. `pipelined:100:1,once:1024:8`) runs only those cases.
fn chosen(mode: Mode, size: usize, appenders: usize) -> bool {
    let Ok(cases) = std::env::var("WEIR_BENCH_CASES") else {
        return true;
    };
    let name = match mode {
        Mode::Pipelined => "pipelined",
        Mode::OneAtATime => "once",
    };
    let case = format!("{name}:{size}:{appenders}");
    cases.split(',').any(|c| c.trim() == case)
}

fn main() {
    let secs: f64 = std::env::var("WEIR_BENCH_SECS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(3.0);
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime");
    println!(
        "append: WAL (group commit, sync=always) vs write_all+sync_data at the same bytes per fsync"
    );
    println!(
        "{:>8} {:>9} {:>12} {:>10} {:>10} {:>12} {:>12} {:>7} {:>7} {:>11}  {:>19}  {:>12}  {:>11} {:>8} {:>7}",
        "record",
        "appenders",
        "records/s",
        "WAL MB/s",
        "fsyncs/s",
        "bytes/fsync",
        "raw MB/s",
        "ratio",
        "median",
        "rounds",
        "WAL fsync/write/rest",
        "raw fsync/write",
        "handed MB/s",
        "÷handed",
        "median"
    );
    println!(
        "(the last two columns: µs per fsync cycle in the fsync, in writes, and the rest: the \
         log's bookkeeping and the hand-over from appenders); then the raw loop on a thread \
         of its own, each chunk handed over and answered through channels (1 in flight one \
         at a time, 4 pipelined): the least a log with a writer thread pays, and the WAL \
         over it (all rounds, then the median of the rounds)"
    );
    let mut read_dir = None;
    for (mode, label) in [
        (
            Mode::Pipelined,
            "pipelined: each appender keeps 4 batches in flight through a Chain",
        ),
        (
            Mode::OneAtATime,
            "one at a time: Wal::append, the next batch once the last is durable",
        ),
    ] {
        println!("{label}");
        for size in [100usize, 1024, 64 * 1024] {
            for appenders in [1usize, 8] {
                if !chosen(mode, size, appenders) {
                    continue;
                }
                // Rounds alternate WAL and baseline so that drift in the machine's fsync
                // latency hits both alike.
                let mut run = Run {
                    records: 0,
                    bytes: 0,
                    fsyncs: 0,
                    secs: 0.0,
                    fsync_us: 0,
                    write_us: 0,
                };
                let mut raw_all = Raw::default();
                let mut ratios = Vec::new();
                let (mut handed_secs, mut handed_ratios) = (0.0, Vec::new());
                let depth = match mode {
                    Mode::OneAtATime => 1,
                    Mode::Pipelined => DEPTH,
                };
                let mut dir = tempfile::tempdir().expect("tempdir");
                for _ in 0..ROUNDS {
                    dir = tempfile::tempdir().expect("tempdir");
                    let r = rt.block_on(wal_run(
                        dir.path(),
                        size,
                        appenders,
                        mode,
                        secs / ROUNDS as f64,
                    ));
                    let raw = baseline(dir.path(), r.bytes, r.fsyncs);
                    ratios.push(raw.secs / r.secs);
                    let handed = handed_over(dir.path(), r.bytes, r.fsyncs, depth);
                    handed_ratios.push(handed / r.secs);
                    handed_secs += handed;
                    raw_all.secs += raw.secs;
                    raw_all.fsync += raw.fsync;
                    raw_all.write += raw.write;
                    run.records += r.records;
                    run.bytes += r.bytes;
                    run.fsyncs += r.fsyncs;
                    run.secs += r.secs;
                    run.fsync_us += r.fsync_us;
                    run.write_us += r.write_us;
                }
                let wal_mb = mb(run.bytes, run.secs);
                let raw_mb = mb(run.bytes, raw_all.secs);
                let per = |us: f64| us / run.fsyncs.max(1) as f64;
                let (fsync, write) = (per(run.fsync_us as f64), per(run.write_us as f64));
                let rest = per(run.secs * 1e6) - fsync - write;
                let (raw_fsync, raw_write) = (per(raw_all.fsync * 1e6), per(raw_all.write * 1e6));
                ratios.sort_by(f64::total_cmp);
                handed_ratios.sort_by(f64::total_cmp);
                let handed_mb = mb(run.bytes, handed_secs);
                println!(
                    "{:>8} {:>9} {:>12.0} {:>10.1} {:>10.0} {:>12} {:>12.1} {:>7.2} {:>7.2} {:>11}  {:>19}  {:>12}  {:>11.1} {:>8.2} {:>7.2}",
                    size,
                    appenders,
                    run.records as f64 / run.secs,
                    wal_mb,
                    run.fsyncs as f64 / run.secs,
                    run.bytes / run.fsyncs.max(1),
                    raw_mb,
                    wal_mb / raw_mb,
                    (ratios[ROUNDS / 2 - 1] + ratios[ROUNDS / 2]) / 2.0,
                    format!("{:.2}-{:.2}", ratios[0], ratios[ROUNDS - 1]),
                    format!("{fsync:.0}/{write:.0}/{rest:.0}"),
                    format!("{raw_fsync:.0}/{raw_write:.0}"),
                    handed_mb,
                    wal_mb / handed_mb,
                    (handed_ratios[ROUNDS / 2 - 1] + handed_ratios[ROUNDS / 2]) / 2.0,
                );
                if size == 1024 && appenders == 8 && mode == Mode::Pipelined {
                    let _ = std::fs::remove_file(dir.path().join("baseline"));
                    read_dir = Some(dir);
                }
            }
        }
    }
    if let Some(dir) = read_dir {
        support_read::report(&rt, dir.path(), "1 KiB records");
    }
}
