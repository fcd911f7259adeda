//! Replay throughput: a cursor reading a WAL back, as a sink catching up after an outage
//! does, against a raw sequential `read` of the same segment files, in the same run.
//!
//! `cargo bench -p weir-wal --bench replay` fills a WAL with `WEIR_BENCH_READ_MB` MB of
//! 1 KiB records (default 1024), then alternates raw reads and cursor reads of it
//! ([`support_read::READ_ROUNDS`] each, page cache warm; the cursor drops every batch,
//! like a blackhole sink) and prints the cursor's MB/s of payload, the raw MB/s, their
//! ratio and the minutes each needs for 10 GiB. Then the same for 100 B and 64 KiB
//! records, with a quarter of the bytes. `WEIR_BENCH_READ_RECORD` (100, 1024 or 65536)
//! runs one record size only.

#[path = "support/read.rs"]
mod support_read;

fn main() {
    let mb: u64 = std::env::var("WEIR_BENCH_READ_MB")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(1024);
    let only: Option<usize> = std::env::var("WEIR_BENCH_READ_RECORD")
        .ok()
        .and_then(|s| s.parse().ok());
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime");
    for (record, bytes, label) in [
        (1024usize, mb << 20, "1 KiB records"),
        (100, (mb << 20) / 4, "100 B records"),
        (64 * 1024, (mb << 20) / 4, "64 KiB records"),
    ] {
        if only.is_some_and(|only| only != record) {
            continue;
        }
        let dir = tempfile::tempdir().expect("tempdir");
        rt.block_on(support_read::fill(dir.path(), bytes, record));
        support_read::report(&rt, dir.path(), label);
    }
}
