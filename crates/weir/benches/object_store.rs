//! The object-store sink against a real S3-protocol server (s3s-fs on loopback), each
//! figure next to its alternative in the same run:
//!
//! 1. **Upload MB/s**: the sink (NDJSON objects of `part_size` parts, `upload_concurrency`
//!    4) next to a bare `object_store` multipart loop uploading the same bytes with the
//!    same part size and concurrency. Target ≥ 0.8×.
//! 2. **Seed 002's law**: small single-PUT objects through a proxy that adds latency L
//!    to every request and forwards at most 8 at once (the link): objects/s at depth
//!    (`upload_concurrency`) 1, 2, 4, 8 and 16, next to Little's law's prediction
//!    `min(depth, link) ÷ L`. Target: within 10%.
//! 3. **Peak RSS** of `weir run` (generator → object store) next to `weir validate`'s
//!    memory estimate.
//!
//! `cargo bench -p weir --bench object_store` (needs s3s-fs: `WEIR_S3S`, or
//! `scripts/install-s3s.sh` builds it once). Settings: `OBJECT_BENCH_MIB` (bytes for 1,
//! default 256), `OBJECT_BENCH_LATENCY_MS` (L for 2, default 50).

#[allow(unused_imports)]
#[path = "../tests/run_support/mod.rs"]
mod run_support;

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use bytes::Bytes;
use futures::StreamExt;
use object_store::multipart::MultipartStore;
use object_store::path::Path as StorePath;
use run_support::s3::{ACCESS_KEY, BUCKET, FaultProxy, S3Server, SECRET_KEY};
use weir::keys::{Diagnostics, Section};
use weir::pipeline::{Position, Sink, SinkBatch};
use weir::record::Record;
use weir::sinks::object_store::{ObjectStoreConfig, ObjectStoreSink};
use weir::sinks::{OpenSink, SinkContext, SinkKeys};
use weir_wal::{CursorConfig, OnFull, Wal, WalConfig};

const PART_MIB: u64 = 8;
const CONCURRENCY: usize = 4;

fn env_u64(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn sink_config(url: &str, extra: &str) -> ObjectStoreConfig {
    let table: toml::Table = format!("url = \"{url}\"\n{extra}").parse().expect("TOML");
    let diag = Diagnostics::default();
    let mut section = Section::new("sinks.lake".into(), &table, &diag);
    let config = ObjectStoreConfig::parse(&mut section);
    section.finish();
    let errors: Vec<String> = diag.into_errors().iter().map(ToString::to_string).collect();
    assert!(errors.is_empty(), "{errors:?}");
    config.expect("a valid sink")
}

struct Context {
    _dir: tempfile::TempDir,
    cx: SinkContext,
}

fn context() -> Context {
    let dir = tempfile::tempdir().expect("temp dir");
    let config = WalConfig::builder(dir.path().join("wal"))
        .max_disk(64 << 20)
        .segment_bytes(1 << 20)
        .on_full(OnFull::Block)
        .cursor("lake", CursorConfig::default())
        .build()
        .expect("WAL config");
    let (wal, _) = Wal::open(config).expect("WAL");
    let cx = SinkContext {
        stamp: weir::sinks::parquet::FooterMetadata {
            config_hash: "sha256:bench".into(),
            on_full: OnFull::Block,
        }
        .into(),
        wal,
        data_dir: dir.path().join("data"),
        retry: weir::sinks::Retry {
            initial: weir::keys::Duration::millis(100),
            max: weir::keys::Duration::secs(1),
        },
        telemetry: weir::telemetry::Telemetry::new("sha256:test".into()),
        quarantine: weir::quarantine::Quarantine::new(&dir.path().join("quarantine"), 1 << 20)
            .expect("quarantine"),
        detail: Arc::default(),
        unencodable: Arc::default(),
    };
    Context { _dir: dir, cx }
}

/// Batches of `per_batch` records of about `size` bytes each, from offset 0.
fn batches(count: usize, per_batch: u64, size: usize) -> Vec<Arc<SinkBatch>> {
    let pad = "x".repeat(size.saturating_sub(24));
    (0..count as u64)
        .map(|b| {
            let from = b * per_batch;
            let records: Vec<Record> = (from..from + per_batch)
                .map(|i| Record {
                    source: "gen".into(),
                    key: String::new(),
                    timestamp_ms: 1,
                    payload: Bytes::from(format!("{{\"i\":{i},\"p\":\"{pad}\"}}")),
                    attributes: Vec::new(),
                })
                .collect();
            Arc::new(SinkBatch {
                bytes: records.iter().map(|r| r.payload.len() as u64).sum(),
                positions: (from..from + per_batch)
                    .map(|offset| Position { offset, time_ms: 0 })
                    .collect(),
                records,
                next_offset: from + per_batch,
                wire: Vec::new(),
            })
        })
        .collect()
}

/// Feeds `batches` to the sink and finishes; returns the time and the bytes stored.
async fn drive(sink: &mut ObjectStoreSink, batches: &[Arc<SinkBatch>]) -> (Duration, u64) {
    let stats = sink.stats();
    let started = Instant::now();
    sink.resume_at(0);
    let mut rejects = Vec::new();
    for b in batches {
        sink.write(b, &mut rejects).await.expect("write");
    }
    sink.finish().await.expect("finish");
    (started.elapsed(), stats.bytes.load(Ordering::Relaxed))
}

/// Multipart uploads of `object` bytes each, `PART_MIB` parts, `CONCURRENCY` parts at
/// once, until `total` bytes are stored.
async fn bare_loop(addr: std::net::SocketAddr, total: u64, object: u64) -> Duration {
    let store = Arc::new(
        object_store::aws::AmazonS3Builder::new()
            .with_bucket_name(BUCKET)
            .with_endpoint(format!("http://{addr}"))
            .with_allow_http(true)
            .with_region("us-east-1")
            .with_access_key_id(ACCESS_KEY)
            .with_secret_access_key(SECRET_KEY)
            .build()
            .expect("S3 client"),
    );
    let part = usize::try_from(PART_MIB << 20).expect("fits");
    let data = Bytes::from(vec![b'x'; part]);
    let started = Instant::now();
    let mut done = 0;
    let mut n = 0;
    while done < total {
        let key = StorePath::from(format!("bare/{n:06}"));
        n += 1;
        let size = object.min(total - done);
        let id = store.create_multipart(&key).await.expect("create");
        let parts = size.div_ceil(part as u64) as usize;
        let mut tags: Vec<(usize, String)> = futures::stream::iter(0..parts)
            .map(|i| {
                let (store, key, id) = (Arc::clone(&store), key.clone(), id.clone());
                let len = (size - (i * part) as u64).min(part as u64) as usize;
                let body = data.slice(..len);
                async move {
                    let tag = store
                        .put_part(&key, &id, i, body.into())
                        .await
                        .expect("part");
                    (i, tag.content_id)
                }
            })
            .buffer_unordered(CONCURRENCY)
            .collect()
            .await;
        tags.sort();
        let parts = tags
            .into_iter()
            .map(|(_, content_id)| object_store::multipart::PartId { content_id })
            .collect();
        store
            .complete_multipart(&key, &id, parts)
            .await
            .expect("complete");
        done += size;
    }
    started.elapsed()
}

fn mb_per_s(bytes: u64, t: Duration) -> f64 {
    bytes as f64 / 1e6 / t.as_secs_f64()
}

async fn throughput(server: &S3Server) {
    let mib = env_u64("OBJECT_BENCH_MIB", 256);
    let object_mib = 64;
    let records_per_batch = 1_000;
    let batch_count = usize::try_from(mib).expect("fits");
    let input = batches(batch_count, records_per_batch, 1_000);
    let cx = context();
    let config = sink_config(
        &format!("s3://{BUCKET}/sink"),
        &format!(
            "endpoint = \"http://{}\"\nallow_http = true\nregion = \"us-east-1\"\nformat = \"ndjson\"\npart_size = \"{PART_MIB} MiB\"\nupload_concurrency = {CONCURRENCY}\nrotate = {{ bytes = \"{object_mib} MiB\" }}\n",
            server.addr
        ),
    );
    let mut sink = config.open("lake", &cx.cx).expect("open the sink");
    let (t_sink, bytes) = drive(&mut sink, &input).await;
    let t_bare = bare_loop(server.addr, bytes, object_mib << 20).await;
    let (sink_rate, bare_rate) = (mb_per_s(bytes, t_sink), mb_per_s(bytes, t_bare));
    println!(
        "1. upload throughput, {:.0} MB in {object_mib} MiB objects, {PART_MIB} MiB parts, {CONCURRENCY} at once",
        bytes as f64 / 1e6
    );
    println!("   {:<34} {:>10} {:>8}", "", "MB/s", "time");
    println!(
        "   {:<34} {sink_rate:>10.1} {:>7.2}s",
        "weir object_store sink (NDJSON)",
        t_sink.as_secs_f64()
    );
    println!(
        "   {:<34} {bare_rate:>10.1} {:>7.2}s",
        "bare object_store multipart loop",
        t_bare.as_secs_f64()
    );
    println!(
        "   sink / bare = {:.2} (target >= 0.8)\n",
        sink_rate / bare_rate
    );
}

async fn littles_law(server: &S3Server) {
    let latency = Duration::from_millis(env_u64("OBJECT_BENCH_LATENCY_MS", 50));
    let link = 8;
    let proxy = FaultProxy::start(server.addr);
    proxy.set(&[], latency);
    proxy.set_link(link);
    println!(
        "2. seed 002's law: 1 KiB objects in one PUT each, L = {} ms per request, link = {link} requests at once",
        latency.as_millis()
    );
    println!(
        "   {:>5} {:>12} {:>14} {:>7} {:>14} {:>7}",
        "depth", "objects/s", "min(d,link)/L", "ratio", "min(d,link)/R", "ratio"
    );
    // R: the round trip measured at depth 1 (L plus the server's own time).
    let mut round_trip: Option<f64> = None;
    for depth in [1u64, 2, 4, 8, 16] {
        let objects = (40 * depth.min(link)).max(40) as usize;
        let input = batches(objects, 1, 1_000);
        let cx = context();
        let config = sink_config(
            &format!("s3://{BUCKET}/law{depth}"),
            &format!(
                "endpoint = \"http://{}\"\nallow_http = true\nregion = \"us-east-1\"\nformat = \"ndjson\"\nupload_concurrency = {depth}\nrotate = {{ bytes = \"1 KiB\" }}\n",
                proxy.addr
            ),
        );
        let mut sink = config.open("lake", &cx.cx).expect("open the sink");
        let (t, _) = drive(&mut sink, &input).await;
        let measured = objects as f64 / t.as_secs_f64();
        let by_l = depth.min(link) as f64 / latency.as_secs_f64();
        let r = *round_trip.get_or_insert(1.0 / measured);
        let by_r = depth.min(link) as f64 / r;
        println!(
            "   {depth:>5} {measured:>12.1} {by_l:>14.1} {:>7.2} {by_r:>14.1} {:>7.2}",
            measured / by_l,
            measured / by_r
        );
    }
    println!(
        "   (Little's law: depth / latency, capped by the link, as `weir lab littles-law` computes it; R = {:.1} ms; target: within 10%)\n",
        round_trip.unwrap_or(0.0) * 1e3
    );
}

/// One `weir run` of `count` records of 1 KB into Parquet objects: its peak RSS,
/// `weir validate`'s estimate and the bytes uploaded.
fn run_to_parquet(server: &S3Server, count: u64) -> (u64, u64, u64) {
    let dir = tempfile::tempdir().expect("temp dir");
    let status = run_support::free_addr();
    let text = format!(
        r#"
[runtime]
data_dir = "{data}"
status_addr = "{status}"
[wal]
max_disk = "256 MiB"
segment_bytes = "8 MiB"
on_full = "block"
[sources.gen]
type = "generator"
rate = 0
size = 1000
count = {count}
[sinks.lake]
type = "object_store"
inputs = ["gen"]
url = "s3://{BUCKET}/rss-{count}"
endpoint = "http://{addr}"
allow_http = true
region = "us-east-1"
part_size = "{PART_MIB} MiB"
upload_concurrency = {CONCURRENCY}
rotate = {{ bytes = "64 MiB", age = "5s" }}
"#,
        data = dir.path().join("data").display(),
        addr = server.addr,
    );
    let path = run_support::write_config(dir.path(), &text);
    let validate = std::process::Command::new(env!("CARGO_BIN_EXE_weir"))
        .arg("validate")
        .arg(&path)
        .output()
        .expect("weir validate");
    let text = String::from_utf8_lossy(&validate.stdout).into_owned();
    let estimate = text
        .lines()
        .find_map(|l| l.strip_prefix("memory estimate: "))
        .and_then(|l| l.split('(').nth(1))
        .and_then(|l| l.split_whitespace().next())
        .and_then(|n| n.parse::<u64>().ok())
        .unwrap_or(0);
    let env = server.env();
    let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (*k, v.as_str())).collect();
    let daemon = run_support::Daemon::start(dir.path(), &path, status, &env);
    let s = daemon.wait_for("the sink to catch up", Duration::from_secs(300), |s| {
        s["wal"]["durable_end"].as_u64() == Some(count)
            && s["sinks"]["lake"]["cursor"]["committed"].as_u64() == Some(count)
    });
    let peak = run_support::process::peak_rss(daemon.child.id());
    let uploaded = s["sinks"]["lake"]["object_store"]["bytes"]
        .as_u64()
        .unwrap_or(0);
    daemon.stop();
    (peak, estimate, uploaded)
}

/// Peak RSS under load next to `weir validate`'s estimate. The estimate counts the
/// pipeline's buffers, not the process itself (code, runtime, TLS roots, thread
/// stacks), so the same daemon's peak with one record is printed too, and what the
/// load adds to it is compared with the estimate.
fn rss(server: &S3Server) {
    let (rest, _, _) = run_to_parquet(server, 1);
    let (peak, estimate, uploaded) = run_to_parquet(server, 300_000);
    let mib = |b: u64| b as f64 / 1048576.0;
    println!(
        "3. weir run: 300,000 records of 1 KB → Parquet objects ({:.0} MB uploaded)",
        uploaded as f64 / 1e6
    );
    println!(
        "   peak RSS {:.1} MiB ({:.1} MiB with 1 record: the process itself), weir validate's estimate {:.1} MiB",
        mib(peak),
        mib(rest),
        mib(estimate),
    );
    println!(
        "   what the load adds: {:.1} MiB, {:.2}× the estimate (target ≤ 1); peak ÷ estimate {:.2}",
        mib(peak.saturating_sub(rest)),
        peak.saturating_sub(rest) as f64 / estimate.max(1) as f64,
        peak as f64 / estimate.max(1) as f64
    );
}

fn main() {
    // The in-process sink reads its credentials from the environment, like `weir run`:
    // run again with the test server's keys set (the workspace forbids `set_var`).
    if std::env::var_os("AWS_ACCESS_KEY_ID").is_none() {
        let exe = std::env::current_exe().expect("the bench's path");
        let status = std::process::Command::new(exe)
            .args(std::env::args_os().skip(1))
            .env("AWS_ACCESS_KEY_ID", ACCESS_KEY)
            .env("AWS_SECRET_ACCESS_KEY", SECRET_KEY)
            .env("AWS_REGION", "us-east-1")
            .status()
            .expect("run the bench again");
        std::process::exit(status.code().unwrap_or(1));
    }
    // `cargo bench` passes `--bench`; nothing else is read from the arguments.
    // The allocator as `weir run` sets it, for the in-process sink and loop alike.
    weir::runtime::malloc::pin_thresholds();
    let server = S3Server::start();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime");
    rt.block_on(async {
        throughput(&server).await;
        littles_law(&server).await;
    });
    rss(&server);
}
