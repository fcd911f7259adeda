//! `weir run` with an object-store sink on an `az://` URL against Azurite (Azure's
//! storage emulator, started by the test on a free loopback port): every durable
//! record reaches the container exactly once, across block-blob uploads (Put Block,
//! Put Block List) and kill -9; read back with pyarrow's Azure filesystem.

mod run_support;

use std::net::SocketAddr;
use std::path::Path;
use std::time::Duration;

use run_support::azurite::{Azurite, CONTAINER};
use run_support::lake::{self, details, durable_end, wait_caught_up};
use run_support::s3::assert_exact_cover;
use run_support::{Daemon, free_addr};

/// A generator of `count` records (none: without end) at `rate` into an object-store
/// sink on Azurite; `extra` lines go into the sink's table.
fn config(
    dir: &Path,
    status: SocketAddr,
    azurite: &Azurite,
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
url = "az://{CONTAINER}/weir"
endpoint = "{endpoint}"
allow_http = true
part_size = "5 MiB"
upload_concurrency = 4
timeout = "10s"
retry = {{ initial = "100ms", max = "1s" }}
compression = "none"
{extra}
"#,
        data = dir.join("data").display(),
        endpoint = azurite.endpoint(),
    )
}

fn start(dir: &Path, text: &str, status: SocketAddr, azurite: &Azurite) -> Daemon {
    lake::start(dir, text, status, &azurite.env())
}

#[test]
fn every_durable_record_reaches_the_container_once_through_block_uploads() {
    let azurite = Azurite::start();
    let dir = tempfile::tempdir().unwrap();
    let status = free_addr();
    let total = 150_000;
    let text = config(
        dir.path(),
        status,
        &azurite,
        0,
        Some(total),
        "rotate = { bytes = \"12 MiB\", age = \"2s\" }\n",
    );
    let daemon = start(dir.path(), &text, status, &azurite);
    let s = wait_caught_up(&daemon, Some(total), Duration::from_secs(120));
    assert!(
        details(&s, "parts") >= 2,
        "objects above part_size go multipart: {s:#}"
    );
    assert_eq!(daemon.stop(), Some(0));
    // Multipart objects went through Put Block and Put Block List.
    assert!(azurite.requests("comp=block&") >= 2, "{}", azurite.log());
    assert!(azurite.requests("comp=blocklist") >= 1, "{}", azurite.log());
    let objects = azurite.read_parquet_objects("weir/lake");
    assert!(objects.len() >= 2, "{objects:#?}");
    for o in &objects {
        assert!(
            o.key.starts_with(&format!("{CONTAINER}/weir/lake/dt=")),
            "{o:?}"
        );
    }
    assert_exact_cover(&objects, total);
}

#[test]
fn kill_9_mid_upload_then_restart_loses_nothing_and_overlaps_nothing() {
    let azurite = Azurite::start();
    let dir = tempfile::tempdir().unwrap();
    let status = free_addr();
    let extra = "rotate = { bytes = \"24 MiB\", age = \"30s\" }\n";
    let text = config(dir.path(), status, &azurite, 100_000, None, extra);
    let daemon = start(dir.path(), &text, status, &azurite);
    // Kill it while an object's block upload is under way, after some objects
    // completed.
    daemon.wait_for(
        "completed objects and an upload under way",
        Duration::from_secs(120),
        |s| details(s, "objects") >= 1 && details(s, "parts") >= 2 && details(s, "in_flight") >= 1,
    );
    daemon.kill9();
    // The restart writes one more record, then the sink catches up and stops.
    let text = config(dir.path(), status, &azurite, 1, Some(1), extra);
    let daemon = start(dir.path(), &text, status, &azurite);
    let s = wait_caught_up(&daemon, None, Duration::from_secs(120));
    let end = durable_end(&s);
    assert_eq!(daemon.stop(), Some(0));
    assert_exact_cover(&azurite.read_parquet_objects("weir/lake"), end);
}

#[test]
fn objects_below_part_size_are_single_puts_with_their_offsets_in_blob_metadata() {
    let azurite = Azurite::start();
    let dir = tempfile::tempdir().unwrap();
    let status = free_addr();
    let total = 30_000;
    let text = config(
        dir.path(),
        status,
        &azurite,
        20_000,
        Some(total),
        "rotate = { bytes = \"12 MiB\", age = \"500ms\" }\n",
    );
    let daemon = start(dir.path(), &text, status, &azurite);
    let s = wait_caught_up(&daemon, Some(total), Duration::from_secs(60));
    assert_eq!(details(&s, "parts"), 0, "every object is one PUT: {s:#}");
    assert_eq!(daemon.stop(), Some(0));
    assert_eq!(azurite.requests("comp=blocklist"), 0, "{}", azurite.log());
    let objects = azurite.read_parquet_objects("weir/lake");
    assert!(objects.len() >= 2, "{objects:#?}");
    assert_exact_cover(&objects, total);
    // Azure metadata names are C# identifiers: weir's are written with underscores.
    for o in &objects {
        let meta = azurite.user_metadata(&o.key);
        assert_eq!(meta["weir_first_offset"], o.first.to_string(), "{meta:?}");
        assert_eq!(meta["weir_last_offset"], o.last.to_string(), "{meta:?}");
        assert!(meta.contains_key("weir_wal_id"), "{meta:?}");
    }
}
