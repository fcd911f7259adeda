//! Logs through a bounded, lossy writer: logging never blocks the caller, and what it
//! drops is counted.
//!
//! Each formatted line is offered to a [`weir_flow`] bounded queue (`DropNewest`,
//! bounded in lines and bytes); one writer thread drains it to stderr. When stderr is
//! slow (a full pipe, a stalled terminal) and the queue is full, new lines are dropped
//! and counted ([`LogHandle::dropped`], exported as `weir_log_dropped_total`). Lines
//! longer than `line_max_bytes` are cut to it, marked `…[truncated]`, and counted
//! ([`LogHandle::truncated`]).
//!
//! Memory is bounded by `queue_lines × line_max_bytes` plus the line being written.

use std::io::Write;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, PoisonError};
use std::thread::JoinHandle;
use std::time::Instant;

use tracing_subscriber::EnvFilter;
use tracing_subscriber::fmt::MakeWriter;
use weir_flow::queue::{Capacity, OnFull, QueueConfig, QueueCore};
use weir_flow::{FlowStats, Timestamp};

use crate::telemetry::Telemetry;

/// Appended to a line cut at `line_max_bytes`.
const TRUNCATED: &[u8] = "…[truncated]\n".as_bytes();
/// Lines the writer thread takes from the queue per lock.
const DRAIN_BATCH: usize = 64;

/// Why logging could not be set up.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum LogError {
    /// The level is not a tracing filter.
    #[error(
        "log level {level:?}: expected a level (error, warn, info, debug, trace) or filter directives like \"weir=debug,info\": {message}"
    )]
    Level {
        /// The level as given.
        level: String,
        /// The parser's message.
        message: String,
    },
    /// A global subscriber is already installed.
    #[error("logging is already initialised in this process")]
    AlreadyInitialised,
    /// The writer thread could not be started.
    #[error("cannot start the log writer thread: {0}")]
    Thread(#[source] std::io::Error),
}

struct State {
    queue: QueueCore<Vec<u8>>,
    closed: bool,
}

struct Shared {
    state: Mutex<State>,
    ready: Condvar,
    /// The queue's time origin (a std clock: logging runs outside tokio too).
    origin: Instant,
    line_max_bytes: usize,
    dropped: AtomicU64,
    truncated: AtomicU64,
    written: AtomicU64,
}

impl Shared {
    fn now(&self) -> Timestamp {
        Timestamp::from_nanos(u64::try_from(self.origin.elapsed().as_nanos()).unwrap_or(u64::MAX))
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Offers one line; never waits for room.
    fn offer(&self, mut line: Vec<u8>) {
        if line.is_empty() {
            return;
        }
        if line.len() > self.line_max_bytes {
            let mut cut = self.line_max_bytes.saturating_sub(TRUNCATED.len());
            // Cut on a UTF-8 boundary so the line stays valid text.
            while cut > 0 && (line[cut] & 0b1100_0000) == 0b1000_0000 {
                cut -= 1;
            }
            line.truncate(cut);
            line.extend_from_slice(TRUNCATED);
            self.truncated.fetch_add(1, Ordering::Relaxed);
        }
        let now = self.now();
        let mut state = self.lock();
        if state.closed {
            drop(state);
            self.dropped.fetch_add(1, Ordering::Relaxed);
            return;
        }
        // DropNewest: a full queue refuses the line at once, never waits.
        let accepted = state.queue.offer(line, now).is_accepted();
        drop(state);
        if accepted {
            self.ready.notify_one();
        } else {
            self.dropped.fetch_add(1, Ordering::Relaxed);
        }
    }
}

/// The [`MakeWriter`] given to `tracing_subscriber::fmt`: each event's line goes to
/// the bounded queue when its writer is dropped.
#[derive(Clone)]
pub struct BoundedLogWriter {
    shared: Arc<Shared>,
}

/// One event's line, handed to the queue on drop.
pub struct LineWriter {
    shared: Arc<Shared>,
    line: Vec<u8>,
}

impl Write for LineWriter {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        // Keep at most one byte past the limit: enough to know the line was cut.
        let room = (self.shared.line_max_bytes + 1).saturating_sub(self.line.len());
        self.line.extend_from_slice(&buf[..buf.len().min(room)]);
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl Drop for LineWriter {
    fn drop(&mut self) {
        self.shared.offer(std::mem::take(&mut self.line));
    }
}

impl<'a> MakeWriter<'a> for BoundedLogWriter {
    type Writer = LineWriter;

    fn make_writer(&'a self) -> Self::Writer {
        LineWriter {
            shared: Arc::clone(&self.shared),
            line: Vec::new(),
        }
    }
}

/// Counts of the log writer, and its shutdown. Clones share the counts.
#[derive(Clone)]
pub struct LogHandle {
    shared: Arc<Shared>,
    thread: Arc<Mutex<Option<JoinHandle<()>>>>,
}

impl std::fmt::Debug for LogHandle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LogHandle")
            .field("dropped", &self.dropped())
            .field("truncated", &self.truncated())
            .field("written", &self.written())
            .finish_non_exhaustive()
    }
}

impl LogHandle {
    /// Lines dropped because the queue was full (or logging had shut down).
    pub fn dropped(&self) -> u64 {
        self.shared.dropped.load(Ordering::Relaxed)
    }

    /// Lines cut to `line_max_bytes`.
    pub fn truncated(&self) -> u64 {
        self.shared.truncated.load(Ordering::Relaxed)
    }

    /// Lines written to the output.
    pub fn written(&self) -> u64 {
        self.shared.written.load(Ordering::Relaxed)
    }

    /// The queue's statistics (depth, bytes, oldest age).
    pub fn queue_stats(&self) -> FlowStats {
        let now = self.shared.now();
        self.shared.lock().queue.stats(now)
    }

    /// Exports `weir_log_dropped_total`, `weir_log_truncated_total` and the queue as
    /// `log` in `telemetry`.
    pub fn register_metrics(&self, telemetry: &Telemetry, queue_lines: u64, queue_bytes: u64) {
        let handle = self.clone();
        telemetry.register_counter_fn(
            "weir_log_dropped_total",
            "Log lines dropped because the log queue was full.",
            &[],
            move || handle.dropped(),
        );
        let handle = self.clone();
        telemetry.register_counter_fn(
            "weir_log_truncated_total",
            "Log lines cut to runtime.log_line_max_bytes.",
            &[],
            move || handle.truncated(),
        );
        let handle = self.clone();
        telemetry.register_queue("log", Some(queue_lines), Some(queue_bytes), move || {
            handle.queue_stats()
        });
    }

    /// Stops taking lines, writes what is queued, and joins the writer thread. Lines
    /// logged afterwards are counted as dropped.
    pub fn shutdown(&self) {
        self.shared.lock().closed = true;
        self.shared.ready.notify_all();
        let thread = self
            .thread
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take();
        if let Some(thread) = thread {
            // A panicked writer thread has nothing left to flush.
            let _ = thread.join();
        }
    }
}

/// A bounded writer to `output` and its handle, without installing anything globally
/// (tests use it with `tracing::subscriber::with_default`).
///
/// # Errors
///
/// [`LogError::Thread`] when the writer thread cannot be spawned.
pub fn bounded_writer(
    queue_lines: u32,
    line_max_bytes: u64,
    mut output: impl Write + Send + 'static,
) -> Result<(BoundedLogWriter, LogHandle), LogError> {
    let line_max_bytes = usize::try_from(line_max_bytes)
        .unwrap_or(usize::MAX)
        .max(TRUNCATED.len() + 1);
    let lines = usize::try_from(queue_lines).unwrap_or(usize::MAX).max(1);
    let bytes = (lines as u64).saturating_mul(line_max_bytes as u64);
    let config = QueueConfig::new(Capacity::items_and_weight(lines, bytes), OnFull::DropNewest)
        .weigh_by(|line: &Vec<u8>| line.len() as u64);
    let shared = Arc::new(Shared {
        state: Mutex::new(State {
            queue: QueueCore::new(config),
            closed: false,
        }),
        ready: Condvar::new(),
        origin: Instant::now(),
        line_max_bytes,
        dropped: AtomicU64::new(0),
        truncated: AtomicU64::new(0),
        written: AtomicU64::new(0),
    });
    let drain = Arc::clone(&shared);
    let thread = std::thread::Builder::new()
        .name("weir-log".to_owned())
        .spawn(move || {
            let mut batch = Vec::with_capacity(DRAIN_BATCH);
            loop {
                {
                    let mut state = drain.lock();
                    while state.queue.is_empty() && !state.closed {
                        state = drain
                            .ready
                            .wait(state)
                            .unwrap_or_else(PoisonError::into_inner);
                    }
                    let now = drain.now();
                    while batch.len() < DRAIN_BATCH {
                        match state.queue.take(now) {
                            Some(taken) => batch.push(taken.item),
                            None => break,
                        }
                    }
                    if batch.is_empty() && state.closed {
                        break;
                    }
                }
                for line in batch.drain(..) {
                    // Nowhere to report a failing stderr: the line is lost either way.
                    if output.write_all(&line).is_ok() {
                        drain.written.fetch_add(1, Ordering::Relaxed);
                    }
                }
                let _ = output.flush();
            }
        })
        .map_err(LogError::Thread)?;
    let handle = LogHandle {
        shared: Arc::clone(&shared),
        thread: Arc::new(Mutex::new(Some(thread))),
    };
    Ok((BoundedLogWriter { shared }, handle))
}

/// Installs the global `tracing` subscriber: `level` (a level or filter directives),
/// formatted lines through a bounded queue of `queue_lines` lines of at most
/// `line_max_bytes` bytes to stderr.
///
/// # Errors
///
/// [`LogError::Level`] for a bad level, [`LogError::AlreadyInitialised`] when called
/// twice, [`LogError::Thread`] when the writer thread cannot start.
pub fn init(level: &str, queue_lines: u32, line_max_bytes: u64) -> Result<LogHandle, LogError> {
    let filter = EnvFilter::try_new(level).map_err(|e| LogError::Level {
        level: level.to_owned(),
        message: e.to_string(),
    })?;
    let (writer, handle) = bounded_writer(queue_lines, line_max_bytes, std::io::stderr())?;
    let installed = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(writer)
        .with_ansi(false)
        .try_init();
    if installed.is_err() {
        handle.shutdown();
        return Err(LogError::AlreadyInitialised);
    }
    Ok(handle)
}

#[cfg(test)]
#[path = "logging_tests.rs"]
mod tests;
