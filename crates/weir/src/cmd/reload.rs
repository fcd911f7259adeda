//! `weir reload CONFIG` or `weir reload --status-addr ADDR`: asks a running daemon to
//! read its configuration file again and apply what changed.
//!
//! With CONFIG, the file is checked first (a file with errors is not sent: the errors
//! are printed and nothing is asked); then, when it sets `runtime.pid_file`, the
//! daemon named there gets SIGHUP and the outcome is read from its `/status`
//! (`config.last_reload`); without a pid file, `POST /reload` goes to its
//! `runtime.status_addr`. With `--status-addr`, `POST /reload` goes there (the daemon
//! accepts it only from loopback). Exits 0 when the reload was applied, 1 when it was
//! refused or only partly applied (the errors are printed).

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::{Duration, Instant};

use anyhow::{Context as _, anyhow, bail};
use bytes::Bytes;
use http_body_util::{BodyExt as _, Empty, Limited};
use hyper::header::{CONNECTION, HOST};
use hyper_util::rt::TokioIo;
use serde_json::Value;

use crate::config::Config;
use crate::runtime::pid;

/// The largest answer read.
const MAX_ANSWER_BYTES: usize = 1 << 20;

/// Arguments of `weir reload`.
#[derive(Debug, clap::Args)]
pub struct ReloadArgs {
    /// The daemon's configuration file: checked first, then its `runtime.pid_file` gets
    /// SIGHUP (or, without one, its `runtime.status_addr` gets `POST /reload`).
    #[arg(required_unless_present = "status_addr")]
    pub config: Option<PathBuf>,
    /// Send `POST /reload` to this status address instead (a loopback address).
    #[arg(long, conflicts_with = "config")]
    pub status_addr: Option<SocketAddr>,
    /// How long to wait for the outcome (a reload stops what it replaces within
    /// `runtime.shutdown_timeout`).
    #[arg(long, default_value = "90s", value_parser = humantime::parse_duration)]
    pub timeout: Duration,
}

/// Runs `weir reload`.
///
/// # Errors
///
/// The daemon cannot be reached or signalled, or gave no outcome within the timeout.
pub fn run(args: ReloadArgs) -> anyhow::Result<ExitCode> {
    let report = match (&args.config, args.status_addr) {
        (_, Some(addr)) => post_reload(addr, args.timeout)?,
        (Some(path), None) => {
            let config = match Config::load(path) {
                Ok(config) => config,
                Err(errors) => {
                    for error in errors.errors() {
                        eprintln!("error: {error}");
                    }
                    eprintln!("{}: invalid, not reloaded", path.display());
                    return Ok(ExitCode::from(1));
                }
            };
            let addr = config.runtime.status_addr;
            match &config.runtime.pid_file {
                Some(pid_file) => signal_and_wait(pid_file, addr, args.timeout)?,
                None => post_reload(addr, args.timeout)?,
            }
        }
        (None, None) => bail!("give the configuration file, or --status-addr"),
    };
    out!("{}", describe(&report));
    let applied = report.get("result").and_then(Value::as_str) == Some("applied");
    Ok(if applied {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}

/// One line per part of a reload report.
pub fn describe(report: &Value) -> String {
    let text = |key: &str| report.get(key).and_then(Value::as_str).unwrap_or("?");
    let list = |key: &str| {
        report
            .get(key)
            .and_then(Value::as_array)
            .map(|items| {
                items
                    .iter()
                    .filter_map(Value::as_str)
                    .collect::<Vec<_>>()
                    .join(", ")
            })
            .unwrap_or_default()
    };
    let mut out = format!("reload {} (config {})\n", text("result"), text("hash"));
    for (key, label) in [
        ("added", "added"),
        ("removed", "removed"),
        ("restarted", "restarted"),
        ("live", "applied live"),
    ] {
        let items = list(key);
        if !items.is_empty() {
            out.push_str(&format!("  {label}: {items}\n"));
        }
    }
    if let Some(n) = report.get("unchanged").and_then(Value::as_u64) {
        out.push_str(&format!("  unchanged: {n} components\n"));
    }
    for error in report
        .get("errors")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
    {
        out.push_str(&format!("  error: {error}\n"));
    }
    out
}

/// SIGHUP to the process in `pid_file`, then the outcome from `/status` at `addr`.
fn signal_and_wait(
    pid_file: &std::path::Path,
    addr: SocketAddr,
    timeout: Duration,
) -> anyhow::Result<Value> {
    let before = last_reload(addr).ok().flatten();
    let pid = pid::read(pid_file).context("runtime.pid_file: is weir running?")?;
    let target = rustix::process::Pid::from_raw(pid)
        .ok_or_else(|| anyhow!("{} holds {pid}, not a process id", pid_file.display()))?;
    rustix::process::kill_process(target, rustix::process::Signal::HUP).map_err(|e| {
        anyhow!(
            "sending SIGHUP to process {pid} (from {}): {e}; is weir running, and as this user?",
            pid_file.display()
        )
    })?;
    let deadline = Instant::now() + timeout;
    loop {
        std::thread::sleep(Duration::from_millis(200));
        match last_reload(addr) {
            Ok(Some(report)) if Some(&report) != before.as_ref() => return Ok(report),
            Ok(_) => {}
            Err(e) if Instant::now() >= deadline => {
                return Err(e.context(format!(
                    "sent SIGHUP to process {pid}, but its status on {addr} did not answer"
                )));
            }
            Err(_) => {}
        }
        if Instant::now() >= deadline {
            bail!(
                "sent SIGHUP to process {pid}; no reload outcome in its /status on {addr} \
                 within {timeout:?} (see its log)"
            );
        }
    }
}

/// `config.last_reload` from `/status` at `addr`.
fn last_reload(addr: SocketAddr) -> anyhow::Result<Option<Value>> {
    let body = super::status::fetch_path(addr, "/status", Duration::from_secs(5), 16 << 20)?;
    let status: Value = serde_json::from_str(&body).context("/status is not JSON")?;
    Ok(status
        .get("config")
        .and_then(|c| c.get("last_reload"))
        .filter(|r| !r.is_null())
        .cloned())
}

/// `POST /reload` to `addr`; the outcome it answers.
fn post_reload(addr: SocketAddr, timeout: Duration) -> anyhow::Result<Value> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_io()
        .enable_time()
        .build()
        .context("starting the runtime for POST /reload")?;
    runtime
        .block_on(async { tokio::time::timeout(timeout, post(addr)).await })
        .map_err(|_| anyhow!("no answer to POST /reload from {addr} within {timeout:?}"))?
}

async fn post(addr: SocketAddr) -> anyhow::Result<Value> {
    let stream = tokio::net::TcpStream::connect(addr)
        .await
        .with_context(|| {
            format!("connecting to {addr}: is `weir run` running with runtime.status_addr {addr}?")
        })?;
    let (mut sender, connection) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
        .await
        .with_context(|| format!("starting HTTP/1.1 with {addr}"))?;
    tokio::spawn(connection);
    let request = hyper::Request::post("/reload")
        .header(HOST, addr.to_string())
        .header(CONNECTION, "close")
        .body(Empty::<Bytes>::new())
        .context("building POST /reload")?;
    let response = sender
        .send_request(request)
        .await
        .with_context(|| format!("{addr} gave no HTTP answer to POST /reload"))?;
    let status = response.status();
    let body = Limited::new(response.into_body(), MAX_ANSWER_BYTES)
        .collect()
        .await
        .map_err(|e| anyhow!("reading the answer of {addr}: {e}"))?
        .to_bytes();
    let text = String::from_utf8_lossy(&body);
    match status.as_u16() {
        200 | 422 => serde_json::from_str(&text)
            .with_context(|| format!("{addr} answered POST /reload with {status}: {text}")),
        _ => bail!(
            "{addr} answered POST /reload with {status}: {}",
            text.trim()
        ),
    }
}
