//! `weir run` with an object-store sink against a real S3-protocol server (s3s-fs,
//! started by the test on a free loopback port): every durable record reaches the
//! bucket exactly once, across multipart uploads, kill -9, a stopped server and
//! injected throttling; read back with pyarrow's S3 filesystem.

mod run_support;

use std::net::SocketAddr;
use std::path::Path;
use std::time::Duration;

use run_support::lake::{self, details, durable_end, wait_caught_up};
use run_support::s3::{
    BUCKET, Fault, FaultProxy, S3Server, assert_exact_cover, read_parquet_objects,
};
use run_support::{Daemon, free_addr};

/// A generator of `count` records (none: without end) at `rate` into an object-store
/// sink on `endpoint`; `extra` lines go into the sink's table.
fn config(
    dir: &Path,
    status: SocketAddr,
    endpoint: SocketAddr,
    rate: u64,
    count: Option<u64>,
    extra: &str,
) -> String {
    let count = count.map_or(String::new(), |c| format!("count = {c}\n"));
    format!(
        r#"
[runtime]
data_dir = "{data}"
status_addr = "{status}"
shutdown_timeout = "30s"

[wal]
max_disk = "512 MiB"
segment_bytes = "8 MiB"
on_full = "block"

[sources.gen]
type = "generator"
rate = {rate}
size = 200
{count}
[sinks.lake]
type = "object_store"
inputs = ["gen"]
url = "s3://{BUCKET}/weir"
endpoint = "http://{endpoint}"
allow_http = true
region = "us-east-1"
part_size = "5 MiB"
upload_concurrency = 4
timeout = "5s"
retry = {{ initial = "100ms", max = "1s" }}
{extra}
"#,
        data = dir.join("data").display(),
    )
}

fn start(dir: &Path, text: &str, status: SocketAddr, server: &S3Server) -> Daemon {
    lake::start(dir, text, status, &server.env())
}

#[test]
fn every_durable_record_reaches_the_bucket_once_through_multipart_uploads() {
    let server = S3Server::start();
    let dir = tempfile::tempdir().unwrap();
    let status = free_addr();
    let total = 150_000;
    let text = config(
        dir.path(),
        status,
        server.addr,
        0,
        Some(total),
        "rotate = { bytes = \"12 MiB\", age = \"2s\" }\ncompression = \"none\"\n",
    );
    let daemon = start(dir.path(), &text, status, &server);
    let s = wait_caught_up(&daemon, Some(total), Duration::from_secs(90));
    assert!(
        details(&s, "parts") >= 2,
        "objects above part_size go multipart: {s:#}"
    );
    assert!(
        details(&s, "max_uploading_bytes") == 4 * 5 * 1024 * 1024,
        "{s:#}"
    );
    assert_eq!(daemon.stop(), Some(0));
    let objects = read_parquet_objects(server.addr, "weir/lake");
    assert!(objects.len() >= 2, "{objects:#?}");
    for o in &objects {
        assert!(
            o.key.starts_with(&format!("{BUCKET}/weir/lake/dt=")),
            "{o:?}"
        );
    }
    assert_exact_cover(&objects, total);
    assert!(
        server.unfinished_uploads().is_empty(),
        "{:?}",
        server.unfinished_uploads()
    );
}

#[test]
fn kill_9_mid_upload_then_restart_loses_nothing_and_overlaps_nothing() {
    let server = S3Server::start();
    let dir = tempfile::tempdir().unwrap();
    let status = free_addr();
    let extra = "rotate = { bytes = \"24 MiB\", age = \"30s\" }\ncompression = \"none\"\n";
    let text = config(dir.path(), status, server.addr, 100_000, None, extra);
    let daemon = start(dir.path(), &text, status, &server);
    // Kill it while an object's multipart upload is under way, after some objects
    // completed.
    daemon.wait_for(
        "completed objects and an upload under way",
        Duration::from_secs(90),
        |s| details(s, "objects") >= 1 && details(s, "parts") >= 2 && details(s, "in_flight") >= 1,
    );
    daemon.kill9();
    // The restart writes one more record, then the sink catches up and stops.
    let text = config(dir.path(), status, server.addr, 1, Some(1), extra);
    let daemon = start(dir.path(), &text, status, &server);
    let s = wait_caught_up(&daemon, None, Duration::from_secs(90));
    let end = durable_end(&s);
    let log = daemon.stderr();
    assert_eq!(daemon.stop(), Some(0));
    let objects = read_parquet_objects(server.addr, "weir/lake");
    assert_exact_cover(&objects, end);
    // Every upload the killed run left is aborted, except one whose completion the kill
    // cut off: s3s-fs forgets the upload before it joins the parts, so the parts it had
    // not joined yet stay, and aborting it is refused (403). weir must have tried, and
    // said so (the replay wrote the object again under the same key).
    let left = server.unfinished_upload_ids();
    for id in &left {
        assert!(
            log.contains(&format!("could not abort the recorded upload {id} ")),
            "upload {id} was left unfinished and never aborted: {:?}\n{log}",
            server.unfinished_uploads()
        );
    }
    assert!(
        details(&s, "unabortable_uploads") >= left.len() as u64,
        "{s:#}"
    );
}

#[test]
fn a_stopped_server_is_backpressure_and_the_sink_catches_up() {
    let mut server = S3Server::start();
    let dir = tempfile::tempdir().unwrap();
    let status = free_addr();
    let total = 400_000;
    let text = config(
        dir.path(),
        status,
        server.addr,
        10_000,
        Some(total),
        "rotate = { bytes = \"8 MiB\", age = \"1s\" }\n",
    );
    let daemon = start(dir.path(), &text, status, &server);
    daemon.wait_for("a first object", Duration::from_secs(60), |s| {
        details(s, "objects") >= 1
    });
    server.stop();
    std::thread::sleep(Duration::from_secs(20));
    let s = daemon.status();
    let lag = s["sinks"]["lake"]["cursor"]["lag_records"]
        .as_u64()
        .unwrap_or(0);
    assert!(lag > 50_000, "the sink lags while the store is down: {s:#}");
    assert!(
        details(&s, "upload_retries") + s["sinks"]["lake"]["retries"].as_u64().unwrap_or(0) > 0,
        "{s:#}"
    );
    server.restart();
    wait_caught_up(&daemon, Some(total), Duration::from_secs(120));
    assert_eq!(daemon.stop(), Some(0));
    assert_exact_cover(&read_parquet_objects(server.addr, "weir/lake"), total);
    assert!(server.unfinished_uploads().is_empty());
}

#[test]
fn throttling_and_dropped_connections_are_retried_counted_and_lose_nothing() {
    let server = S3Server::start();
    let proxy = FaultProxy::start(server.addr);
    // Every 3rd request a 503 SlowDown, every 7th (not 3rd) a dropped connection, and
    // 20 ms before each forwarded one.
    proxy.set(
        &[(Fault::SlowDown, 3), (Fault::Drop, 7)],
        Duration::from_millis(20),
    );
    let dir = tempfile::tempdir().unwrap();
    let status = free_addr();
    let total = 100_000;
    let text = config(
        dir.path(),
        status,
        proxy.addr,
        25_000,
        Some(total),
        "rotate = { bytes = \"8 MiB\", age = \"500ms\" }\n",
    );
    let daemon = start(dir.path(), &text, status, &server);
    let s = wait_caught_up(&daemon, Some(total), Duration::from_secs(120));
    let faults = proxy.faults.load(std::sync::atomic::Ordering::Relaxed);
    assert!(faults >= 4, "{faults} faults injected");
    assert!(details(&s, "upload_retries") >= 4, "{s:#}");
    assert_eq!(daemon.stop(), Some(0));
    assert_exact_cover(&read_parquet_objects(server.addr, "weir/lake"), total);
}
