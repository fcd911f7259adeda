//! The sinks' startup checks (`healthcheck = true`, the default), against real servers
//! on loopback: missing S3 credentials, a missing bucket, an unreachable endpoint, a
//! missing NATS stream and a closed HTTP port each stop `weir run` before it opens the
//! WAL, with a message naming the key; with `healthcheck = false` weir starts, and the
//! object-store sink shows `failed` with the reason until the store comes back.
//!
//! No test reaches the AWS instance metadata service: each removes the `AWS_*`
//! variables from weir's environment and points `AWS_METADATA_ENDPOINT` at a closed
//! loopback port.

mod run_support;

use std::net::SocketAddr;
use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use run_support::lake::{self, wait_caught_up};
use run_support::nats::{Js, NatsServer, nats_bin};
use run_support::s3::{BUCKET, S3Server, assert_exact_cover, read_parquet_objects};
use run_support::{Daemon, free_addr, get, write_config};

/// Records the generator of [`s3_config`] makes.
const RECORDS: u64 = 2_000;

/// `weir run CONFIG` with the `AWS_*` variables of this process removed and `env` set.
fn weir_run(config: &Path, env: &[(&str, String)]) -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_weir"));
    cmd.arg("run").arg(config);
    for (name, _) in std::env::vars().filter(|(k, _)| k.starts_with("AWS_")) {
        cmd.env_remove(name);
    }
    for (k, v) in env {
        cmd.env(k, v);
    }
    cmd
}

/// `weir run` on `text` in `dir` (see [`weir_run`]); it must fail: (exit code, stderr).
/// Fails the test if weir opened its WAL first.
fn refused(dir: &Path, text: &str, env: &[(&str, String)]) -> (Option<i32>, String) {
    let path = write_config(dir, text);
    let started = Instant::now();
    let mut child = weir_run(&path, env)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("run weir");
    while child.try_wait().expect("try_wait").is_none() {
        if started.elapsed() > Duration::from_secs(30) {
            let _ = child.kill();
            let out = child.wait_with_output().expect("wait");
            panic!(
                "weir started, its startup check passed:\n{}",
                String::from_utf8_lossy(&out.stderr)
            );
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let out = child.wait_with_output().expect("wait");
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert_ne!(out.status.code(), Some(0), "{stderr}");
    assert!(
        started.elapsed() < Duration::from_secs(20),
        "the check took {:?}:\n{stderr}",
        started.elapsed()
    );
    assert!(
        !dir.join("data/wal").exists(),
        "the WAL was opened before the check failed:\n{stderr}"
    );
    (out.status.code(), stderr)
}

/// A generator into an object-store sink `lake` at `url` on `endpoint`; `extra` goes
/// into the sink's table.
fn s3_config(
    dir: &Path,
    status: SocketAddr,
    url: &str,
    endpoint: SocketAddr,
    extra: &str,
) -> String {
    format!(
        r#"
[runtime]
data_dir = "{data}"
status_addr = "{status}"
shutdown_timeout = "10s"

[wal]
max_disk = "64 MiB"
segment_bytes = "4 MiB"
on_full = "block"

[sources.gen]
type = "generator"
rate = 200
count = {RECORDS}
size = 100

[sinks.lake]
type = "object_store"
inputs = ["gen"]
url = "{url}"
endpoint = "http://{endpoint}"
allow_http = true
region = "us-east-1"
timeout = "2s"
rotate = {{ age = "1s" }}
retry = {{ initial = "100ms", max = "1s" }}
{extra}
"#,
        data = dir.join("data").display(),
    )
}

/// The environment of a weir without S3 credentials whose metadata service is a
/// closed loopback port.
fn no_credentials() -> (Vec<(&'static str, String)>, String) {
    let metadata = format!("http://{}", free_addr());
    (vec![("AWS_METADATA_ENDPOINT", metadata.clone())], metadata)
}

#[test]
fn missing_s3_credentials_stop_the_start_naming_the_key_and_every_source_tried() {
    let server = S3Server::start();
    let dir = tempfile::tempdir().unwrap();
    let url = format!("s3://{BUCKET}/weir");
    let text = s3_config(dir.path(), free_addr(), &url, server.addr, "");
    let (env, metadata) = no_credentials();
    let (code, stderr) = refused(dir.path(), &text, &env);
    assert_eq!(code, Some(1), "{stderr}");
    println!("weir run said:\n{stderr}");
    for needle in [
        "sinks.lake: startup check failed",
        &format!("url = \"{url}\""),
        "no S3 credentials",
        "AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY: not set",
        "web identity, AWS_WEB_IDENTITY_TOKEN_FILE and AWS_ROLE_ARN: not set",
        "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI: not set",
        &format!("the instance metadata service at {metadata} (AWS_METADATA_ENDPOINT)"),
        "sinks.lake.healthcheck = false",
    ] {
        assert!(stderr.contains(needle), "{needle:?} not in:\n{stderr}");
    }
}

#[test]
fn a_missing_bucket_stops_the_start() {
    let server = S3Server::start();
    let dir = tempfile::tempdir().unwrap();
    let text = s3_config(
        dir.path(),
        free_addr(),
        "s3://no-such-bucket/weir",
        server.addr,
        "",
    );
    let (code, stderr) = refused(dir.path(), &text, &server.env());
    assert_eq!(code, Some(1), "{stderr}");
    assert!(
        stderr.contains("sinks.lake: startup check failed")
            && stderr.contains("the bucket \"no-such-bucket\" does not exist"),
        "{stderr}"
    );
}

#[test]
fn an_unreachable_endpoint_stops_the_start() {
    let dir = tempfile::tempdir().unwrap();
    let closed = free_addr();
    let text = s3_config(
        dir.path(),
        free_addr(),
        &format!("s3://{BUCKET}/weir"),
        closed,
        "",
    );
    let env = vec![
        ("AWS_ACCESS_KEY_ID", "k".to_owned()),
        ("AWS_SECRET_ACCESS_KEY", "s".to_owned()),
    ];
    let (code, stderr) = refused(dir.path(), &text, &env);
    assert_eq!(code, Some(1), "{stderr}");
    assert!(
        stderr.contains("sinks.lake: startup check failed")
            && stderr.contains(&format!("endpoint http://{closed}"))
            && stderr.contains("PUT weir/_weir_healthcheck failed"),
        "{stderr}"
    );
}

/// The sink's component in `/status`.
fn lake_component(status: &serde_json::Value) -> serde_json::Value {
    status["components"]
        .as_array()
        .and_then(|c| c.iter().find(|c| c["name"] == "lake"))
        .cloned()
        .unwrap_or_default()
}

#[test]
fn without_the_check_weir_starts_and_the_sink_shows_failed_until_the_store_is_back() {
    let mut server = S3Server::start();
    server.stop();
    let dir = tempfile::tempdir().unwrap();
    let status = free_addr();
    let text = s3_config(
        dir.path(),
        status,
        &format!("s3://{BUCKET}/weir"),
        server.addr,
        "healthcheck = false\n",
    );
    let daemon = lake::start(dir.path(), &text, status, &server.env());
    // The first upload fails: failed, with the store's answer, and it stays failed
    // while the uploads are retried (the records keep coming in and being encoded).
    let failed = |s: &serde_json::Value| lake_component(s)["state"] == "failed";
    daemon.wait_for("the sink failed", Duration::from_secs(30), failed);
    let mut reasons = Vec::new();
    for _ in 0..20 {
        let s = daemon.status();
        assert!(
            failed(&s),
            "the sink shows failed while the store is down: {s:#}"
        );
        reasons.push(
            lake_component(&s)["reason"]
                .as_str()
                .unwrap_or_default()
                .to_owned(),
        );
        std::thread::sleep(Duration::from_millis(150));
    }
    assert!(
        reasons.iter().all(|r| r.contains(&server.addr.to_string())),
        "the reason names the store: {reasons:#?}"
    );
    server.restart();
    let s = daemon.wait_for("the sink running again", Duration::from_secs(60), |s| {
        lake_component(s)["state"] == "running" && lake::details(s, "objects") >= 1
    });
    assert!(lake::committed(&s) > 0, "{s:#}");
    // Every record stored once, none lost to the failures.
    wait_caught_up(&daemon, Some(RECORDS), Duration::from_secs(60));
    assert_eq!(daemon.stop(), Some(0));
    assert_exact_cover(&read_parquet_objects(server.addr, "weir/lake"), RECORDS);
}

#[test]
fn without_the_check_missing_credentials_show_in_status_with_every_source_tried() {
    let server = S3Server::start();
    let dir = tempfile::tempdir().unwrap();
    let status = free_addr();
    let text = s3_config(
        dir.path(),
        status,
        &format!("s3://{BUCKET}/weir"),
        server.addr,
        "healthcheck = false\n",
    );
    let (env, metadata) = no_credentials();
    let path = write_config(dir.path(), &text);
    let stderr_path = dir.path().join("stderr.txt");
    let child = weir_run(&path, &env)
        .stdout(std::process::Stdio::null())
        .stderr(std::fs::File::create(&stderr_path).unwrap())
        .spawn()
        .unwrap();
    let mut daemon = Daemon {
        child,
        status_addr: status,
        stderr_path,
    };
    let deadline = Instant::now() + Duration::from_secs(30);
    while get(status, "/status").is_none() {
        assert!(
            daemon.child.try_wait().unwrap().is_none(),
            "{}",
            daemon.stderr()
        );
        assert!(Instant::now() < deadline, "{}", daemon.stderr());
        std::thread::sleep(Duration::from_millis(20));
    }
    let s = daemon.wait_for("the sink failed", Duration::from_secs(30), |s| {
        lake_component(s)["state"] == "failed"
    });
    let reason = lake_component(&s)["reason"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    for needle in [
        "no S3 credentials",
        "AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY: not set",
        &format!("the instance metadata service at {metadata}"),
    ] {
        assert!(reason.contains(needle), "{needle:?} not in {reason}");
    }
    assert_eq!(daemon.stop(), Some(0));
}

/// A generator into a NATS sink `bus` on `url`; `extra` goes into the sink's table.
fn nats_config(dir: &Path, status: SocketAddr, url: &str, extra: &str) -> String {
    format!(
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

[sinks.bus]
type = "nats"
inputs = ["gen"]
url = "{url}"
subject = "weir.{{key}}"
{extra}
"#,
        data = dir.join("data").display(),
    )
}

#[test]
fn a_nats_sink_without_its_stream_stops_the_start() {
    let server = NatsServer::start(nats_bin());
    let js = Js::connect(&[server.url()]);
    js.stream("OTHER", &["other.>"], 1);
    let dir = tempfile::tempdir().unwrap();
    // A named stream that does not exist.
    let url = server.url();
    let config = |extra: &str| nats_config(dir.path(), free_addr(), &url, extra);
    let (code, stderr) = refused(dir.path(), &config("stream = \"OUT\"\n"), &[]);
    assert_eq!(code, Some(1), "{stderr}");
    assert!(
        stderr.contains("sinks.bus: startup check failed")
            && stderr.contains("stream = \"OUT\": no such stream"),
        "{stderr}"
    );
    // No stream named, and none captures weir.>.
    let (_, stderr) = refused(dir.path(), &config(""), &[]);
    assert!(
        stderr.contains("subject = \"weir.{key}\": no stream captures weir.>"),
        "{stderr}"
    );
    // A stream that exists but captures other subjects.
    let (_, stderr) = refused(dir.path(), &config("stream = \"OTHER\"\n"), &[]);
    assert!(
        stderr.contains("stream = \"OTHER\" captures none of the subjects")
            && stderr.contains("other.>"),
        "{stderr}"
    );
    // Once the stream exists, weir starts.
    js.stream("OUT", &["weir.>"], 1);
    let status = free_addr();
    let path = write_config(
        dir.path(),
        &nats_config(dir.path(), status, &url, "stream = \"OUT\"\n"),
    );
    let daemon = Daemon::start(dir.path(), &path, status, &[]);
    assert_eq!(daemon.stop(), Some(0));
}

#[test]
fn an_http_sink_whose_port_is_closed_stops_the_start() {
    let dir = tempfile::tempdir().unwrap();
    let closed = free_addr();
    let text = run_support::http_sink::config(
        dir.path(),
        free_addr(),
        &format!("http://{closed}/ingest"),
        &run_support::http_sink::generator(10, None),
        "",
    );
    let (code, stderr) = refused(dir.path(), &text, &[]);
    assert_eq!(code, Some(1), "{stderr}");
    assert!(
        stderr.contains("sinks.out: startup check failed")
            && stderr.contains(&format!(
                "cannot connect to 127.0.0.1 port {}",
                closed.port()
            )),
        "{stderr}"
    );
}
