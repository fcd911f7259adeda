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
    // The killed run talks to the server through a proxy, which forwards only requests
    // it has read whole and says when every one of them has been answered.
    let proxy = FaultProxy::start(server.addr);
    let dir = tempfile::tempdir().unwrap();
    let status = free_addr();
    let extra = "rotate = { bytes = \"24 MiB\", age = \"30s\" }\ncompression = \"none\"\n";
    let text = config(dir.path(), status, proxy.addr, 100_000, None, extra);
    let daemon = start(dir.path(), &text, status, &server);
    // Kill it while an object's multipart upload is under way, after some objects
    // completed.
    daemon.wait_for(
        "completed objects and an upload under way",
        Duration::from_secs(90),
        |s| details(s, "objects") >= 1 && details(s, "parts") >= 2 && details(s, "in_flight") >= 1,
    );
    daemon.kill9();
    // Parts the killed run had sent whole are still being written by the server; one
    // that lands after the restart's abort would stay (S3 documents the same race: an
    // abort may have to be repeated). The restart comes once the server has answered
    // everything, as it would after any pause longer than its slowest write.
    proxy.wait_idle(Duration::from_secs(60));
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
fn a_restart_aborts_no_completed_upload_and_warns_of_none() {
    let server = S3Server::start();
    let dir = tempfile::tempdir().unwrap();
    let status = free_addr();
    let total = 100_000;
    let extra = "rotate = { bytes = \"12 MiB\", age = \"2s\" }\ncompression = \"none\"\n";
    let text = config(dir.path(), status, server.addr, 0, Some(total), extra);
    let daemon = start(dir.path(), &text, status, &server);
    let s = wait_caught_up(&daemon, Some(total), Duration::from_secs(90));
    assert!(details(&s, "parts") >= 2, "multipart uploads: {s:#}");
    assert_eq!(daemon.stop(), Some(0));
    // The journal still records those uploads; the cursor has passed them all.
    let text = config(dir.path(), status, server.addr, 1, Some(1), extra);
    let daemon = start(dir.path(), &text, status, &server);
    let s = wait_caught_up(&daemon, Some(total + 1), Duration::from_secs(90));
    let log = daemon.stderr();
    assert_eq!(daemon.stop(), Some(0));
    assert!(!log.contains("could not abort"), "{log}");
    assert_eq!(details(&s, "unabortable_uploads"), 0, "{s:#}");
    assert_eq!(details(&s, "aborted_uploads"), 0, "{s:#}");
    assert_exact_cover(&read_parquet_objects(server.addr, "weir/lake"), total + 1);
}

#[test]
fn in_flight_counts_an_upload_whose_create_is_pending() {
    let server = S3Server::start();
    let proxy = FaultProxy::start(server.addr);
    proxy.hold("?uploads");
    let dir = tempfile::tempdir().unwrap();
    let status = free_addr();
    let extra = "rotate = { bytes = \"24 MiB\", age = \"30s\" }\ncompression = \"none\"\n";
    let text = config(dir.path(), status, proxy.addr, 100_000, None, extra)
        .replace("timeout = \"5s\"", "timeout = \"60s\"");
    let daemon = start(dir.path(), &text, status, &server);
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    while proxy.held() == 0 {
        assert!(
            std::time::Instant::now() < deadline,
            "no CreateMultipartUpload"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    let s = daemon.status();
    proxy.release();
    assert_eq!(details(&s, "parts"), 0, "{s:#}");
    assert!(
        details(&s, "in_flight") >= 1,
        "the upload being created is in flight: {s:#}"
    );
    assert_eq!(daemon.stop(), Some(0));
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

/// Closed objects the journal records (`"last"` lines).
fn closed_in_journal(dir: &Path) -> usize {
    let journal = dir.join("data/sinks/lake/object_store.journal");
    std::fs::read_to_string(journal)
        .unwrap_or_default()
        .matches("\"last\"")
        .count()
}

/// Runs weir on `text` expecting it to refuse to start; its stderr.
fn refused(dir: &Path, text: &str, server: &S3Server) -> String {
    let path = run_support::write_config(dir, text);
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_weir"))
        .arg("run")
        .arg(&path)
        .envs(server.env())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    while child.try_wait().unwrap().is_none() {
        if std::time::Instant::now() > deadline {
            let _ = child.kill();
            panic!("weir started with a config that would rewrite recorded objects otherwise");
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let out = child.wait_with_output().unwrap();
    assert!(!out.status.success());
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// Rows of the Parquet objects and lines of the NDJSON objects under `dir`, read
/// with DuckDB's `read_parquet` over `**/*.parquet`, as users query the lake.
fn parquet_rows_and_ndjson_lines(dir: &Path) -> (u64, u64) {
    let script = format!(
        r#"
import duckdb, glob
root = "{root}"
rows = duckdb.sql(f"select count(*) from read_parquet('{{root}}/**/*.parquet')").fetchall()[0][0]
lines = sum(1 for f in glob.glob(root + "/**/*.ndjson", recursive=True) for _ in open(f))
print(rows, lines)
"#,
        root = dir.display()
    );
    let out = std::process::Command::new("python3")
        .arg("-c")
        .arg(&script)
        .output()
        .expect("run python3");
    assert!(
        out.status.success(),
        "DuckDB could not read the lake:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8_lossy(&out.stdout);
    let mut n = text.split_whitespace().map(|v| v.parse::<u64>().unwrap());
    (n.next().unwrap(), n.next().unwrap())
}

#[test]
fn a_format_change_across_kill_9_waits_until_the_recorded_objects_are_written() {
    let mut server = S3Server::start();
    let dir = tempfile::tempdir().unwrap();
    let status = free_addr();
    let rotate = "rotate = { bytes = \"1 MiB\", age = \"1s\" }\n";
    let ndjson = format!("{rotate}format = \"ndjson\"\n");
    let text = config(dir.path(), status, server.addr, 10_000, None, rotate);
    let daemon = start(dir.path(), &text, status, &server);
    daemon.wait_for("a first object", Duration::from_secs(60), |s| {
        details(s, "objects") >= 1
    });
    // The store goes down: the next object is closed, recorded as .parquet, and not
    // stored; then a kill -9.
    let closed = closed_in_journal(dir.path());
    server.stop();
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    while closed_in_journal(dir.path()) <= closed + 1 {
        assert!(std::time::Instant::now() < deadline, "no object closed");
        std::thread::sleep(Duration::from_millis(50));
    }
    daemon.kill9();
    server.restart();

    // NDJSON now: refused, naming the key and the journal.
    let once = |extra: &str| config(dir.path(), status, server.addr, 1, Some(1), extra);
    let log = refused(dir.path(), &once(&ndjson), &server);
    assert!(
        log.contains("`format`")
            && log.contains("object_store.journal")
            && log.contains(".parquet"),
        "{log}"
    );
    // The earlier format catches up; then the new one starts.
    let caught_up = |daemon: &run_support::Daemon| {
        daemon.wait_for("its record stored", Duration::from_secs(90), |s| {
            s["sources"]["gen"]["records"].as_u64() == Some(1)
                && lake::committed(s) == durable_end(s)
        })
    };
    let daemon = start(dir.path(), &once(rotate), status, &server);
    caught_up(&daemon);
    assert_eq!(daemon.stop(), Some(0));
    let daemon = start(dir.path(), &once(&ndjson), status, &server);
    let s = caught_up(&daemon);
    assert_eq!(daemon.stop(), Some(0));
    let (rows, lines) = parquet_rows_and_ndjson_lines(&server.root.join(BUCKET));
    assert!(
        lines >= 1,
        "the new objects are NDJSON: {:?}",
        walkdir::WalkDir::new(&server.root)
            .into_iter()
            .filter_map(|e| Some(e.ok()?.path().display().to_string()))
            .collect::<Vec<_>>()
    );
    assert_eq!(rows + lines, durable_end(&s), "every record once");
}

/// kill -9 while objects of several partitions are open and uploading, three times with
/// different seeds (keys, hence how the partitions' records interleave), each followed
/// by a restart that reads the rest: every offset ends up in exactly one object.
#[test]
fn kill_9_with_several_partitions_open_puts_every_record_in_exactly_one_object() {
    for seed in [1u64, 2, 3] {
        let server = S3Server::start();
        let proxy = FaultProxy::start(server.addr);
        let dir = tempfile::tempdir().unwrap();
        let status = free_addr();
        let extra = "rotate = { bytes = \"6 MiB\", age = \"30s\" }\ncompression = \"none\"\n\
                     layout = \"key={key}\"\nmax_open_partitions = 4\n";
        let text = config(dir.path(), status, proxy.addr, 30_000, None, extra).replace(
            "size = 200\n",
            &format!("size = 200\nkeys = 4\nseed = {seed}\n"),
        );
        let daemon = start(dir.path(), &text, status, &server);
        daemon.wait_for(
            "objects of several partitions stored, open and uploading",
            Duration::from_secs(120),
            |s| {
                details(s, "objects") >= 2
                    && details(s, "open_objects") >= 3
                    && details(s, "in_flight") >= 1
            },
        );
        daemon.kill9();
        proxy.wait_idle(Duration::from_secs(60));
        // The restart reads what the killed run made durable; its source (an HTTP
        // listener no one posts to) adds nothing. Its objects close after 2 s, so that
        // the last ones, which no later record closes, are stored soon.
        let restart = text
            .replace("age = \"30s\"", "age = \"2s\"")
            .replace(
                &format!("endpoint = \"http://{}\"", proxy.addr),
                &format!("endpoint = \"http://{}\"", server.addr),
            )
            .replace(
                &format!(
                    "type = \"generator\"\nrate = 30000\nsize = 200\nkeys = 4\nseed = {seed}\n"
                ),
                &format!("type = \"http\"\nlisten = \"{}\"\n", free_addr()),
            );
        assert!(restart.contains("type = \"http\""), "{restart}");
        let daemon = start(dir.path(), &restart, status, &server);
        let s = wait_caught_up(&daemon, None, Duration::from_secs(120));
        let end = durable_end(&s);
        assert_eq!(details(&s, "open_objects"), 0, "{s:#}");
        assert_eq!(daemon.stop(), Some(0));
        let objects = read_parquet_objects(server.addr, "weir/lake");
        let partitions: std::collections::BTreeSet<&str> = objects
            .iter()
            .filter_map(|o| o.key.rsplit_once('/').map(|(folder, _)| folder))
            .collect();
        assert_eq!(partitions.len(), 4, "seed {seed}: {partitions:?}");
        assert!(
            objects.iter().any(|o| o.rows < o.last - o.first + 1),
            "seed {seed}: the partitions' records interleave"
        );
        assert_exact_cover(&objects, end);
    }
}
