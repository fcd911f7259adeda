//! `weir run` end to end: SIGHUP drains like SIGTERM (issue 16, item 8). There is no
//! config reload, and a hangup used to kill the daemon at once (exit 129, no drain).

mod run_support;

use std::net::SocketAddr;
use std::path::Path;
use std::time::{Duration, Instant};

use run_support::{Daemon, free_addr, write_config};

fn config(dir: &Path, status: SocketAddr) -> String {
    format!(
        r#"
[runtime]
data_dir = "{data}"
status_addr = "{status}"

[wal]
max_disk = "16 MiB"
segment_bytes = "1 MiB"
on_full = "block"

[sources.gen]
type = "generator"
rate = 2000
batch_size = 10
size = 50

[sinks.out]
type = "file"
inputs = ["gen"]
path = "{out}"
"#,
        data = dir.join("data").display(),
        out = dir.join("out").display(),
    )
}

#[test]
fn sighup_drains_and_exits_0_like_sigterm() {
    let tmp = tempfile::tempdir().unwrap();
    let status = free_addr();
    let path = write_config(tmp.path(), &config(tmp.path(), status));
    let mut daemon = Daemon::start(tmp.path(), &path, status, &[]);
    daemon.wait_for("records to arrive", Duration::from_secs(10), |s| {
        s["sinks"]["out"]["records"].as_u64().unwrap_or(0) > 100
    });
    daemon.signal("HUP");
    let started = Instant::now();
    let code = loop {
        if let Some(status) = daemon.child.try_wait().unwrap() {
            break status.code();
        }
        assert!(
            started.elapsed() < Duration::from_secs(30),
            "no exit after SIGHUP:\n{}",
            daemon.stderr()
        );
        std::thread::sleep(Duration::from_millis(20));
    };
    let stderr = daemon.stderr();
    assert_eq!(code, Some(0), "{stderr}");
    assert!(stderr.contains("SIGHUP: shutting down"), "{stderr}");
    // Drained: the sink's cursor reached everything the WAL made durable.
    let inspect = std::process::Command::new(env!("CARGO_BIN_EXE_weir"))
        .args([
            "wal".as_ref(),
            "inspect".as_ref(),
            tmp.path().join("data/wal").as_os_str(),
        ])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&inspect.stdout);
    assert!(text.contains("lag 0 records"), "{text}");
}
