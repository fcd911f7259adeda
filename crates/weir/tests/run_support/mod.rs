//! Shared helpers of the `weir run` end-to-end tests: start the real binary with a
//! config in its own temp dir, talk HTTP to it, stop it with signals.

#![allow(dead_code, reason = "each test file uses a different subset")]

pub mod azurite;
pub mod http_sink;
pub mod http_target;
pub mod instance;
pub mod kafka;
pub mod lake;
pub mod mosquitto;
pub mod nats;
pub mod process;
pub mod s3;
pub mod tail;
pub mod tls;
pub mod tmpfs;

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// A free loopback port (bound to 0, then released).
pub fn free_addr() -> SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind 127.0.0.1:0");
    listener.local_addr().expect("local addr")
}

/// A running `weir run`.
pub struct Daemon {
    pub child: Child,
    pub status_addr: SocketAddr,
    pub stderr_path: PathBuf,
}

/// The config of an HTTP → WAL → file pipeline under `dir`: source `api` on `http`, a
/// 64 MiB WAL of 256 KiB segments (`block`), admission waits of 2 s, and a file sink
/// `out` in `dir/out` rotating at `rotate`; `shutdown_timeout` as given.
pub fn http_to_file_config(
    dir: &std::path::Path,
    status: std::net::SocketAddr,
    http: std::net::SocketAddr,
    shutdown_timeout: &str,
    rotate: &str,
) -> String {
    format!(
        r#"
[runtime]
data_dir = "{data}"
status_addr = "{status}"
shutdown_timeout = "{shutdown_timeout}"

[wal]
max_disk = "64 MiB"
segment_bytes = "256 KiB"
on_full = "block"

[sources.api]
type = "http"
listen = "{http}"
admission_timeout = "2s"

[sinks.out]
type = "file"
inputs = ["api"]
path = "{out}"
rotate = {{ bytes = "{rotate}" }}
"#,
        data = dir.join("data").display(),
        out = dir.join("out").display(),
    )
}

/// Writes `config` to `dir/weir.toml`.
pub fn write_config(dir: &Path, config: &str) -> PathBuf {
    let path = dir.join("weir.toml");
    std::fs::write(&path, config).expect("write config");
    path
}

/// Runs `weir run CONFIG` to completion (for configs that must fail).
pub fn run_to_exit(config: &Path, env: &[(&str, &str)]) -> (Option<i32>, String) {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_weir"));
    cmd.arg("run").arg(config);
    for (k, v) in env {
        cmd.env(k, v);
    }
    let out = cmd.output().expect("run weir");
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

impl Daemon {
    /// Starts `weir run` and waits until `/status` answers.
    pub fn start(
        dir: &Path,
        config: &Path,
        status_addr: SocketAddr,
        env: &[(&str, &str)],
    ) -> Daemon {
        Self::start_with_stdin(dir, config, status_addr, env, Stdio::null())
    }

    /// [`start`](Self::start) with the given standard input.
    pub fn start_with_stdin(
        dir: &Path,
        config: &Path,
        status_addr: SocketAddr,
        env: &[(&str, &str)],
        stdin: Stdio,
    ) -> Daemon {
        Self::start_wrapped(dir, &[], config, status_addr, env, stdin)
    }

    /// [`start_with_stdin`](Self::start_with_stdin) under a wrapper command (e.g.
    /// `["prlimit", "--nofile=200:200"]`), which runs `weir run CONFIG`.
    pub fn start_wrapped(
        dir: &Path,
        wrapper: &[&str],
        config: &Path,
        status_addr: SocketAddr,
        env: &[(&str, &str)],
        stdin: Stdio,
    ) -> Daemon {
        let stderr_path = dir.join(format!(
            "stderr-{}.txt",
            Instant::now().elapsed().as_nanos()
        ));
        let stderr_path = unique(stderr_path);
        let stderr = std::fs::File::create(&stderr_path).expect("stderr file");
        let mut cmd = match wrapper.split_first() {
            None => Command::new(env!("CARGO_BIN_EXE_weir")),
            Some((program, args)) => {
                let mut cmd = Command::new(program);
                cmd.args(args).arg(env!("CARGO_BIN_EXE_weir"));
                cmd
            }
        };
        cmd.arg("run")
            .arg(config)
            .stdin(stdin)
            .stdout(Stdio::null())
            .stderr(stderr);
        for (k, v) in env {
            cmd.env(k, v);
        }
        let child = cmd.spawn().expect("spawn weir");
        let mut daemon = Daemon {
            child,
            status_addr,
            stderr_path,
        };
        // Longer than any startup check may retry (the NATS source waits up to 30 s for
        // a cluster to elect a JetStream leader before it gives up), so that a slow
        // start under load is told apart from one that never comes.
        let deadline = Instant::now() + Duration::from_secs(45);
        loop {
            if let Some(status) = daemon.child.try_wait().expect("try_wait") {
                panic!("weir exited at startup ({status}):\n{}", daemon.stderr());
            }
            if get(status_addr, "/status").is_some() {
                return daemon;
            }
            assert!(
                Instant::now() < deadline,
                "weir did not start:\n{}",
                daemon.stderr()
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    pub fn stderr(&self) -> String {
        std::fs::read_to_string(&self.stderr_path).unwrap_or_default()
    }

    pub fn status(&self) -> serde_json::Value {
        let (code, _, body) = get(self.status_addr, "/status").expect("GET /status");
        assert_eq!(code, 200);
        serde_json::from_slice(&body).expect("status JSON")
    }

    /// Sends a signal with `kill`.
    pub fn signal(&self, signal: &str) {
        let ok = Command::new("kill")
            .arg(format!("-{signal}"))
            .arg(self.child.id().to_string())
            .status()
            .expect("kill")
            .success();
        assert!(ok, "kill -{signal} failed");
    }

    /// SIGTERM, then waits for the exit; returns the exit code.
    pub fn stop(mut self) -> Option<i32> {
        self.signal("TERM");
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            if let Some(status) = self.child.try_wait().expect("try_wait") {
                return status.code();
            }
            assert!(
                Instant::now() < deadline,
                "weir did not stop:\n{}",
                self.stderr()
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// kill -9 and reap.
    pub fn kill9(mut self) {
        self.child.kill().expect("kill -9");
        let _ = self.child.wait();
    }

    /// Waits until `pred(status)` holds.
    pub fn wait_for(
        &self,
        what: &str,
        timeout: Duration,
        pred: impl Fn(&serde_json::Value) -> bool,
    ) -> serde_json::Value {
        let deadline = Instant::now() + timeout;
        loop {
            let status = self.status();
            if pred(&status) {
                return status;
            }
            assert!(
                Instant::now() < deadline,
                "timed out waiting for {what}; last status: {status:#}\n{}",
                self.stderr()
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

impl Drop for Daemon {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn unique(path: PathBuf) -> PathBuf {
    let mut n = 0;
    loop {
        let candidate = path.with_extension(format!("{n}.txt"));
        if !candidate.exists() {
            return candidate;
        }
        n += 1;
    }
}

/// An HTTP response: status, headers (lower-case names), body.
pub type Response = (u16, Vec<(String, String)>, Vec<u8>);

/// `GET path`, or `None` if nothing listens.
pub fn get(addr: SocketAddr, path: &str) -> Option<Response> {
    request(
        addr,
        &format!("GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"),
        b"",
    )
    .ok()
}

/// `POST path` with `headers` (`Name: value` lines) and `body`.
pub fn post(
    addr: SocketAddr,
    path: &str,
    headers: &[&str],
    body: &[u8],
) -> std::io::Result<Response> {
    let mut head = format!(
        "POST {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\nContent-Length: {}\r\n",
        body.len()
    );
    for h in headers {
        head.push_str(h);
        head.push_str("\r\n");
    }
    head.push_str("\r\n");
    request(addr, &head, body)
}

/// Sends a raw request head and body; reads the response to EOF.
pub fn request(addr: SocketAddr, head: &str, body: &[u8]) -> std::io::Result<Response> {
    let mut stream = TcpStream::connect_timeout(&addr, Duration::from_secs(2))?;
    stream.set_read_timeout(Some(Duration::from_secs(20)))?;
    stream.write_all(head.as_bytes())?;
    // The server may answer (413) before reading the body, and close.
    let _ = stream.write_all(body);
    let mut raw = Vec::new();
    stream
        .read_to_end(&mut raw)
        .or_else(|e| if raw.is_empty() { Err(e) } else { Ok(0) })?;
    parse_response(&raw).ok_or_else(|| {
        std::io::Error::other(format!("bad response: {:?}", String::from_utf8_lossy(&raw)))
    })
}

fn parse_response(raw: &[u8]) -> Option<Response> {
    let split = raw.windows(4).position(|w| w == b"\r\n\r\n")?;
    let head = std::str::from_utf8(&raw[..split]).ok()?;
    let mut lines = head.split("\r\n");
    let code = lines.next()?.split(' ').nth(1)?.parse().ok()?;
    let headers: Vec<(String, String)> = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(k, v)| (k.trim().to_ascii_lowercase(), v.trim().to_owned()))
        .collect();
    let mut body = raw[split + 4..].to_vec();
    if headers
        .iter()
        .any(|(k, v)| k == "transfer-encoding" && v == "chunked")
    {
        body = dechunk(&body)?;
    }
    Some((code, headers, body))
}

fn dechunk(mut raw: &[u8]) -> Option<Vec<u8>> {
    let mut out = Vec::new();
    loop {
        let line_end = raw.windows(2).position(|w| w == b"\r\n")?;
        let size =
            usize::from_str_radix(std::str::from_utf8(&raw[..line_end]).ok()?.trim(), 16).ok()?;
        raw = &raw[line_end + 2..];
        if size == 0 {
            return Some(out);
        }
        out.extend_from_slice(raw.get(..size)?);
        raw = raw.get(size + 2..)?;
    }
}

pub fn header<'a>(response: &'a Response, name: &str) -> Option<&'a str> {
    response
        .1
        .iter()
        .find(|(k, _)| k == name)
        .map(|(_, v)| v.as_str())
}

/// Every JSON line of every NDJSON file (closed or still open) under `dir`.
pub fn ndjson_lines(dir: &Path) -> Vec<serde_json::Value> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut files: Vec<PathBuf> = entries
        .map(|e| e.expect("dir entry").path())
        .filter(|p| {
            let name = p.to_string_lossy();
            name.ends_with(".ndjson") || name.ends_with(".ndjson.open")
        })
        .collect();
    files.sort();
    let mut out = Vec::new();
    for f in files {
        let text = std::fs::read_to_string(&f).expect("read sink file");
        for line in text.lines() {
            // A kill -9 may leave a torn last line in an open file; it was never committed.
            if let Ok(v) = serde_json::from_str(line) {
                out.push(v);
            }
        }
    }
    out
}

/// Asserts that weir closes each of `streams` (EOF or a reset) within `within`: half-sent
/// requests a bounded server must not keep open.
pub fn assert_closed_within(
    streams: &mut [std::net::TcpStream],
    within: Duration,
    daemon: &Daemon,
) {
    let deadline = Instant::now() + within;
    for stream in streams {
        stream
            .set_read_timeout(Some(
                deadline
                    .saturating_duration_since(Instant::now())
                    .max(Duration::from_millis(1)),
            ))
            .unwrap();
        let mut buf = [0u8; 256];
        match stream.read(&mut buf) {
            Ok(_) => {}
            Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => {}
            Err(e) => panic!(
                "a half-sent request was not closed: {e}\n{}",
                daemon.stderr()
            ),
        }
    }
}
