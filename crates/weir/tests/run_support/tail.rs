//! The file source's end-to-end tests: a config that tails a glob into a file sink,
//! writers of numbered lines, and the check that every number arrived once.

use std::collections::BTreeMap;
use std::io::Write;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use super::{Daemon, ndjson_lines, write_config};

/// `weir run` tailing `path` (with `source` keys added) into a file sink `out`.
pub fn config(dir: &Path, status: SocketAddr, path: &str, source: &str) -> PathBuf {
    let config = format!(
        r#"
[runtime]
data_dir = "{data}"
status_addr = "{status}"
shutdown_timeout = "10s"

[wal]
max_disk = "256 MiB"
segment_bytes = "8 MiB"
on_full = "block"

[sources.tail]
type = "file"
path = "{path}"
{source}

[sinks.out]
type = "file"
inputs = ["tail"]
path = "{out}"
"#,
        data = dir.join("data").display(),
        out = dir.join("out").display(),
    );
    write_config(dir, &config)
}

/// One numbered JSON line, padded to about 200 bytes.
pub fn line(n: u64) -> String {
    format!("{{\"n\":{n},\"pad\":\"{}\"}}\n", "x".repeat(180))
}

/// Appends lines `range` to `path`.
pub fn append(path: &Path, range: std::ops::Range<u64>) {
    let mut f = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)
        .unwrap();
    let mut buf = String::new();
    for n in range {
        buf.push_str(&line(n));
    }
    f.write_all(buf.as_bytes()).unwrap();
}

/// What the sink wrote: how often each number arrived, and the payloads that were not
/// numbered lines (fragments).
#[derive(Debug, Default)]
pub struct Delivered {
    pub counts: BTreeMap<u64, u32>,
    pub fragments: Vec<String>,
    pub envelopes: Vec<serde_json::Value>,
}

impl Delivered {
    pub fn read(out: &Path) -> Self {
        let mut d = Delivered::default();
        for envelope in ndjson_lines(out) {
            match envelope["payload"]["n"].as_u64() {
                Some(n)
                    if envelope["payload"]["pad"]
                        .as_str()
                        .is_some_and(|p| p.len() == 180) =>
                {
                    *d.counts.entry(n).or_default() += 1;
                }
                _ => d.fragments.push(envelope["payload"].to_string()),
            }
            d.envelopes.push(envelope);
        }
        d
    }

    pub fn distinct(&self) -> u64 {
        self.counts.len() as u64
    }

    /// Numbers in `0..end` that never arrived.
    pub fn missing(&self, end: u64) -> Vec<u64> {
        (0..end).filter(|n| !self.counts.contains_key(n)).collect()
    }

    /// Extra copies, over every number.
    pub fn duplicates(&self) -> u64 {
        self.counts
            .values()
            .map(|&c| u64::from(c.saturating_sub(1)))
            .sum()
    }
}

/// Waits until the sink holds `n` distinct numbers.
pub fn wait_delivered(daemon: &Daemon, out: &Path, n: u64, timeout: Duration) -> Delivered {
    let deadline = Instant::now() + timeout;
    loop {
        let d = Delivered::read(out);
        if d.distinct() >= n {
            return d;
        }
        if Instant::now() >= deadline {
            let missing = d.missing(n);
            let dir = out.parent().unwrap();
            panic!(
                "{} of {n} lines delivered; missing {:?}…\n{}\nstatus: {:#}\n{}",
                d.distinct(),
                missing.iter().take(20).collect::<Vec<_>>(),
                locate(dir, &missing),
                daemon.status()["sources"]["tail"],
                daemon.stderr()
            );
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// Where the first missing lines are in the files under `dir` (for a failure's message).
fn locate(dir: &Path, missing: &[u64]) -> String {
    let mut found = String::new();
    let mut files = Vec::new();
    for entry in walkdir(dir) {
        if entry.to_string_lossy().contains("/out/") || entry.to_string_lossy().contains("/data/") {
            continue;
        }
        files.push(entry);
    }
    for n in missing.iter().take(3) {
        let needle = format!("{{\"n\":{n},");
        for f in &files {
            let Ok(text) = std::fs::read_to_string(f) else {
                continue;
            };
            if let Some(at) = text.find(&needle) {
                found.push_str(&format!(
                    "line {n}: {} at byte {at} of {}\n",
                    f.display(),
                    text.len()
                ));
            }
        }
    }
    found
}

fn walkdir(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    if let Ok(entries) = std::fs::read_dir(dir) {
        for e in entries.flatten() {
            let p = e.path();
            if p.is_dir() {
                out.extend(walkdir(&p));
            } else {
                out.push(p);
            }
        }
    }
    out
}

/// A thread appending numbered lines to `path` at about `per_second`, each write a
/// whole line through a descriptor opened with O_APPEND (as loggers do), reopening
/// `path` when asked (after a rotation).
pub struct Writer {
    pub next: Arc<AtomicU64>,
    reopen: Arc<AtomicBool>,
    stop: Arc<AtomicBool>,
    handle: Option<std::thread::JoinHandle<()>>,
}

impl Writer {
    pub fn start(path: PathBuf, per_second: u64) -> Writer {
        let next = Arc::new(AtomicU64::new(0));
        let reopen = Arc::new(AtomicBool::new(false));
        let stop = Arc::new(AtomicBool::new(false));
        let handle = {
            let (next, reopen, stop) = (Arc::clone(&next), Arc::clone(&reopen), Arc::clone(&stop));
            std::thread::spawn(move || {
                let open = || {
                    std::fs::OpenOptions::new()
                        .create(true)
                        .append(true)
                        .open(&path)
                        .unwrap()
                };
                let mut file = open();
                let started = Instant::now();
                let mut written = 0u64;
                while !stop.load(Ordering::Acquire) {
                    if reopen.swap(false, Ordering::AcqRel) {
                        file = open();
                    }
                    let due = started.elapsed().as_secs_f64() * per_second as f64;
                    if (written as f64) < due {
                        let n = next.fetch_add(1, Ordering::AcqRel);
                        file.write_all(line(n).as_bytes()).unwrap();
                        written += 1;
                    } else {
                        std::thread::sleep(Duration::from_millis(1));
                    }
                }
            })
        };
        Writer {
            next,
            reopen,
            stop,
            handle: Some(handle),
        }
    }

    /// The writer opens its path again before its next line (the logger's reopen after
    /// a rotation); returns once it has.
    pub fn reopen(&self) {
        self.reopen.store(true, Ordering::Release);
        while self.reopen.load(Ordering::Acquire) {
            std::thread::sleep(Duration::from_micros(200));
        }
    }

    /// Stops; returns how many lines were written.
    pub fn stop(mut self) -> u64 {
        self.stop.store(true, Ordering::Release);
        if let Some(h) = self.handle.take() {
            h.join().unwrap();
        }
        self.next.load(Ordering::Acquire)
    }
}
