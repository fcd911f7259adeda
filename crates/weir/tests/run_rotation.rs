//! Budget-aware rotation: a healthy Parquet sink whose open file pins half of the WAL's
//! budget closes it early, so it never backpressures the sources under `block`.

mod run_support;

use std::time::{Duration, Instant};

use run_support::{Daemon, free_addr, write_config};

#[test]
fn a_parquet_file_pinning_half_the_wal_is_closed_before_its_age() {
    let dir = tempfile::tempdir().unwrap();
    let status = free_addr();
    let out = dir.path().join("lake");
    // About 4 MB/s into a 32 MiB WAL: without budget-aware rotation the file, open for
    // 60 s, would pin the whole WAL after about 8 s and block the generator.
    let text = format!(
        r#"
[runtime]
data_dir = "{data}"
status_addr = "{status}"

[wal]
max_disk = "32 MiB"
segment_bytes = "1 MiB"
on_full = "block"

[sources.gen]
type = "generator"
rate = 20000
size = 200

[sinks.lake]
type = "parquet"
inputs = ["gen"]
path = "{out}"
rotate = {{ age = "60s", max_wal_share = "50%" }}
"#,
        data = dir.path().join("data").display(),
        out = out.display(),
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
    assert_eq!(daemon.stop(), Some(0));
}
