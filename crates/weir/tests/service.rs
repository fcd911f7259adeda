//! weir as a service: `weir --version` names the commit, the configuration the Debian
//! package installs validates, and `weir run` speaks systemd's readiness protocol
//! (`READY=1` once running, `STOPPING=1` when it drains, nothing when it fails to
//! start) to the socket `NOTIFY_SOCKET` names.

mod run_support;

use std::os::unix::net::UnixDatagram;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use run_support::{Daemon, free_addr, http_to_file_config, post, write_config};

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

#[test]
fn version_names_the_package_version_and_the_git_commit() {
    let out = Command::new(env!("CARGO_BIN_EXE_weir"))
        .arg("--version")
        .output()
        .unwrap();
    assert!(out.status.success());
    let text = String::from_utf8(out.stdout).unwrap();
    let line = text.trim_end();
    let commit = line
        .strip_prefix(&format!("weir {} (commit ", env!("CARGO_PKG_VERSION")))
        .and_then(|rest| rest.strip_suffix(')'))
        .unwrap_or_else(|| panic!("not `weir VERSION (commit HASH)`: {line:?}"));
    // Built from a git checkout (the tests always are): the short hash of HEAD, as the
    // build script read it.
    let head = Command::new("git")
        .args(["rev-parse", "--short", "HEAD"])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .ok()
        .filter(|o| o.status.success())
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_owned());
    match head {
        Some(head) => assert_eq!(commit, head, "{line}"),
        None => assert_eq!(commit, "unknown", "{line}"),
    }
}

#[test]
fn the_packaged_configuration_validates() {
    let config = root().join("packaging/debian/weir.toml");
    let out = Command::new(env!("CARGO_BIN_EXE_weir"))
        .arg("validate")
        .arg(&config)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stdout}\n{stderr}");
    // It writes only where the unit lets it (ReadWritePaths=/var/lib/weir).
    let text = std::fs::read_to_string(&config).unwrap();
    let table: toml::Table = toml::from_str(&text).unwrap();
    let mut dirs = vec![table["runtime"]["data_dir"].as_str().unwrap()];
    for section in ["wal", "quarantine"] {
        dirs.extend(table[section].get("dir").and_then(|d| d.as_str()));
    }
    for sink in table["sinks"].as_table().unwrap().values() {
        dirs.extend(sink.get("path").and_then(|d| d.as_str()));
    }
    assert!(dirs.len() >= 2, "{dirs:?}");
    for dir in dirs {
        assert!(dir.starts_with("/var/lib/weir"), "{dir} in {text}");
    }
}

/// A socket standing in for systemd's, in `dir`.
fn notify_socket(dir: &Path) -> (UnixDatagram, PathBuf) {
    let path = dir.join("notify.sock");
    let socket = UnixDatagram::bind(&path).unwrap();
    socket
        .set_read_timeout(Some(Duration::from_secs(60)))
        .unwrap();
    (socket, path)
}

fn next_message(socket: &UnixDatagram) -> String {
    let mut buf = [0u8; 4096];
    let n = socket.recv(&mut buf).expect("a notification within 60 s");
    String::from_utf8_lossy(&buf[..n]).into_owned()
}

#[test]
fn weir_run_says_ready_once_every_component_runs_and_stopping_when_it_drains() {
    let dir = tempfile::tempdir().unwrap();
    let (socket, path) = notify_socket(dir.path());
    let status = free_addr();
    let http = free_addr();
    let config = write_config(
        dir.path(),
        &http_to_file_config(dir.path(), status, http, "5s", "1 MiB"),
    );
    let socket_path = path.to_str().unwrap();
    let daemon = Daemon::start(
        dir.path(),
        &config,
        status,
        &[("NOTIFY_SOCKET", socket_path)],
    );
    assert_eq!(next_message(&socket), "READY=1\n");
    // Ready means running: every component is, and the source takes records.
    let s = daemon.status();
    let components = s["components"].as_array().unwrap();
    assert!(components.len() >= 3, "{s:#}");
    for c in components {
        assert_eq!(c["state"], "running", "{s:#}");
    }
    let (code, _, _) = post(http, "/ingest", &[], b"{\"n\":1}\n").unwrap();
    assert_eq!(code, 200);

    // A reload (SIGHUP, the same file): RELOADING=1 with the time, then READY=1.
    daemon.signal("HUP");
    let reloading = next_message(&socket);
    assert!(
        reloading.starts_with("RELOADING=1\n") && reloading.contains("MONOTONIC_USEC="),
        "{reloading:?}"
    );
    assert_eq!(next_message(&socket), "READY=1\n");

    // SIGTERM; the datagram waits in the socket's queue.
    assert_eq!(daemon.stop(), Some(0));
    assert_eq!(next_message(&socket), "STOPPING=1\n");
    socket
        .set_read_timeout(Some(Duration::from_millis(200)))
        .unwrap();
    let mut buf = [0u8; 64];
    assert!(socket.recv(&mut buf).is_err(), "nothing after STOPPING=1");
}

#[test]
fn a_start_that_fails_its_checks_never_says_ready() {
    let dir = tempfile::tempdir().unwrap();
    let (socket, path) = notify_socket(dir.path());
    let closed = free_addr();
    let text = format!(
        r#"
[runtime]
data_dir = "{data}"
status_addr = "{status}"

[wal]
max_disk = "64 MiB"
segment_bytes = "4 MiB"
on_full = "block"

[sources.gen]
type = "generator"
rate = 10

[sinks.out]
type = "http"
inputs = ["gen"]
url = "http://{closed}/ingest"
"#,
        data = dir.path().join("data").display(),
        status = free_addr(),
    );
    let config = write_config(dir.path(), &text);
    let started = Instant::now();
    let out = Command::new(env!("CARGO_BIN_EXE_weir"))
        .arg("run")
        .arg(&config)
        .env("NOTIFY_SOCKET", &path)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains("sinks.out: startup check failed"),
        "{stderr}"
    );
    assert!(started.elapsed() < Duration::from_secs(10));
    socket
        .set_read_timeout(Some(Duration::from_millis(200)))
        .unwrap();
    let mut buf = [0u8; 64];
    assert!(
        socket.recv(&mut buf).is_err(),
        "no READY=1 from a failed start"
    );
}
