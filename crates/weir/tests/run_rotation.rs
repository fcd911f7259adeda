//! Budget-aware rotation: a healthy Parquet sink whose open file pins half of the WAL's
//! budget, or of what its filesystem can hold, closes it early, so it never
//! backpressures the sources under `block`; and a lake on the WAL's filesystem leaves
//! the WAL's reserve alone.

mod run_support;

use std::net::SocketAddr;
use std::path::Path;
use std::time::{Duration, Instant};

use run_support::{Daemon, free_addr, write_config};

/// A generator at about 4.5 MB/s into a Parquet sink `lake` at `lake`, with `wal` the
/// `[wal]` keys besides `segment_bytes` and `on_full`, and `sink` more keys of the sink.
fn config(data: &Path, status: SocketAddr, wal: &str, lake: &Path, sink: &str) -> String {
    format!(
        r#"
[runtime]
data_dir = "{data}"
status_addr = "{status}"

[wal]
{wal}
segment_bytes = "1 MiB"
on_full = "block"

[sources.gen]
type = "generator"
rate = 20000
size = 200

[sinks.lake]
type = "parquet"
inputs = ["gen"]
path = "{lake}"
{sink}
"#,
        data = data.display(),
        lake = lake.display(),
    )
}

#[test]
fn a_parquet_file_pinning_half_the_wal_is_closed_before_its_age() {
    let dir = tempfile::tempdir().unwrap();
    let status = free_addr();
    let out = dir.path().join("lake");
    // About 4 MB/s into a 32 MiB WAL: without budget-aware rotation the file, open for
    // 60 s, would pin the whole WAL after about 8 s and block the generator.
    let text = config(
        &dir.path().join("data"),
        status,
        "max_disk = \"32 MiB\"",
        &out,
        "rotate = { age = \"60s\", max_wal_share = \"50%\" }",
    );
    let path = write_config(dir.path(), &text);
    let daemon = Daemon::start(dir.path(), &path, status, &[]);
    let started = Instant::now();
    let parquet_files = || {
        std::fs::read_dir(&out)
            .map(|d| {
                d.filter_map(|e| e.ok())
                    .filter(|e| e.file_name().to_string_lossy().ends_with(".parquet"))
                    .count()
            })
            .unwrap_or(0)
    };
    let mut max_used: f64 = 0.0;
    while started.elapsed() < Duration::from_secs(16) {
        let s = daemon.status();
        max_used = max_used.max(s["wal"]["budget_used"].as_f64().unwrap_or(0.0));
        std::thread::sleep(Duration::from_millis(200));
    }
    let s = daemon.status();
    let files = parquet_files();
    assert!(
        files >= 2,
        "files closed by the WAL they pinned, long before their age: {files}"
    );
    assert!(
        max_used < 0.9,
        "the WAL never filled: at most {max_used:.2} of its budget"
    );
    let waiting = s["sources"]["gen"]["waiting_ms"]
        .as_u64()
        .unwrap_or(u64::MAX);
    assert!(
        waiting < 2_000,
        "the generator was hardly held up: {waiting} ms: {s:#}"
    );
    // /status counts the closes by reason: the WAL's share, never the age.
    let closes = &s["sinks"]["lake"]["parquet"]["closes"];
    assert!(closes["wal_share"].as_u64().unwrap_or(0) >= 2, "{closes}");
    assert_eq!(closes["age"], 0, "{closes}");
    assert_eq!(closes["size"], 0, "{closes}");
    // The startup log said so, with the bound in force.
    let stderr = daemon.stderr();
    assert!(
        stderr.contains(
            "sinks.lake: a file closes once the WAL records it holds reach 16 MiB \
             (rotate.max_wal_share 50% of wal.max_disk 32 MiB), before its rotate.bytes 128 MiB"
        ),
        "{stderr}"
    );
    assert_eq!(daemon.stop(), Some(0));
}

/// The WAL on a 24 MiB filesystem with `max_disk = "1 GiB"`: the disk fills long before
/// the budget. Budget-aware rotation measures the open file against what the WAL can
/// hold there, so the file is closed before the disk is full, and the generator is not
/// held for the file's whole age. (Before, it measured against `max_disk` alone: the
/// disk filled at about 20 MiB and the generator waited for `rotate.age`.)
#[test]
fn rotation_sees_the_room_left_on_the_wals_filesystem() {
    let dir = tempfile::tempdir().unwrap();
    let Some(fs) = run_support::tmpfs::SmallFs::mount(&dir.path().join("small"), "24m") else {
        return;
    };
    let status = free_addr();
    let out = dir.path().join("lake");
    let text = config(
        &dir.path().join("data"),
        status,
        &format!(
            "dir = \"{}\"\nmax_disk = \"1 GiB\"",
            fs.path().join("wal").display()
        ),
        &out,
        "rotate = { age = \"60s\", max_wal_share = \"50%\" }",
    );
    let path = write_config(dir.path(), &text);
    let daemon = Daemon::start(dir.path(), &path, status, &[]);
    // About 4.5 MB/s: 60 MB through a 24 MiB disk is ~13 s of flow; blocked until the
    // file's age it would take over 60 s.
    let s = daemon.wait_for(
        "three times the filesystem's size through the WAL",
        Duration::from_secs(40),
        |s| s["wal"]["appended_bytes"].as_u64().unwrap_or(0) >= 60_000_000,
    );
    let files = std::fs::read_dir(&out)
        .unwrap()
        .filter_map(|e| e.ok())
        .filter(|e| e.file_name().to_string_lossy().ends_with(".parquet"))
        .count();
    assert!(files >= 3, "files closed by the room they pinned: {files}");
    assert!(
        s["wal"]["poisoned"].is_null() && s["wal"]["fs_full_events"] == 0,
        "the disk never filled: {:#}",
        s["wal"]
    );
    assert_eq!(daemon.stop(), Some(0));
    drop(fs);
}

/// The WAL and a Parquet lake on one 24 MiB filesystem, until the lake fills it: the
/// sink stops short of the WAL's 4 MiB reserve and waits, `failed` with the reason,
/// instead of taking the reserve (after which the WAL could not append and the pipeline
/// retried ENOSPC for ever). Once files are moved away, it goes on by itself.
#[test]
fn a_lake_on_the_wals_filesystem_leaves_the_wals_reserve_alone() {
    lake_on_the_wals_filesystem("");
}

/// The same with a layout: the files, in their partitions' folders, are written by the
/// object-store engine, which keeps off the WAL's reserve too.
#[test]
fn a_partitioned_lake_on_the_wals_filesystem_leaves_the_wals_reserve_alone() {
    lake_on_the_wals_filesystem("layout = \"k={key}\"\n");
}

/// Every `.parquet` file under `dir`, in any folder.
fn parquet_files(dir: &std::path::Path) -> Vec<std::path::PathBuf> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            found.extend(parquet_files(&path));
        } else if path.extension().is_some_and(|e| e == "parquet") {
            found.push(path);
        }
    }
    found
}

fn lake_on_the_wals_filesystem(layout: &str) {
    let dir = tempfile::tempdir().unwrap();
    let Some(fs) = run_support::tmpfs::SmallFs::mount(&dir.path().join("small"), "24m") else {
        return;
    };
    let status = free_addr();
    let lake = fs.path().join("lake");
    let text = config(
        &fs.path().join("data"),
        status,
        "max_disk = \"1 GiB\"",
        &lake,
        &format!(
            "retry = {{ initial = \"100ms\", max = \"500ms\" }}\nrotate = {{ age = \"1s\" }}\n{layout}"
        ),
    );
    let path = write_config(dir.path(), &text);
    let daemon = Daemon::start(dir.path(), &path, status, &[]);
    let lake_state = |s: &serde_json::Value| {
        s["components"]
            .as_array()
            .unwrap()
            .iter()
            .find(|c| c["kind"] == "sink" && c["name"] == "lake")
            .cloned()
            .unwrap()
    };
    let s = daemon.wait_for("the lake to fill the disk", Duration::from_secs(90), |s| {
        lake_state(s)["state"] == "failed"
    });
    let reason = lake_state(&s)["reason"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    assert!(reason.contains("keeps its last"), "{reason}");
    let free = {
        let st = rustix::fs::statvfs(fs.path()).unwrap();
        st.f_bavail * st.f_frsize
    };
    assert!(
        free >= 3 << 20,
        "the WAL's reserve is still free: {free} bytes ({reason})"
    );
    assert!(s["wal"]["poisoned"].is_null(), "{:#}", s["wal"]);

    // The operator moves the lake's files away: it goes on.
    let before = s["sources"]["gen"]["records"].as_u64().unwrap();
    for path in parquet_files(&lake) {
        std::fs::remove_file(path).unwrap();
    }
    daemon.wait_for("the pipeline to go on", Duration::from_secs(30), |s| {
        s["sources"]["gen"]["records"].as_u64().unwrap_or(0) > before + 20_000
    });
    // Room again for the files the shutdown closes (with a layout, one per open
    // partition): on a full disk they would be retried until shutdown_timeout.
    for path in parquet_files(&lake) {
        std::fs::remove_file(path).unwrap();
    }
    assert_eq!(daemon.stop(), Some(0));
    drop(fs);
}
