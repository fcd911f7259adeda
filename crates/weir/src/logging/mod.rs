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
//!
//! Lines are text, or JSON objects with `--log-format json` ([`LogFormat`], see
//! [`JsonFormat`]). A JSON line is shortened by its formatter so that it fits
//! `line_max_bytes` and stays valid JSON; one that cannot fit (a bound of less than
//! about 200 bytes) is dropped and counted as truncated and dropped, never cut.
//!
//! The same thread draws the terminal's status line ([`LogHandle::status_line`], the
//! live line of `weir run`): one slot, where a newer line replaces one not yet drawn.
//! The writer clears it before log lines and draws it again after them, so the two
//! never garble each other.
//!
//! Nothing here waits on a caller's thread except [`LogHandle::shutdown`], which is
//! bounded by its timeout and belongs on the synchronous edge (after the tokio runtime
//! has returned). Dropping the last [`LogHandle`] only tells the writer to stop.

use std::io::Write;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, PoisonError};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use tracing_subscriber::fmt::MakeWriter;
use weir_flow::queue::QueueCore;
use weir_flow::{FlowStats, Timestamp};

use crate::telemetry::Telemetry;

mod json;
mod setup;

pub use self::json::{JsonFormat, LogFormat, plain_line};
pub use self::setup::{bounded_writer, bounded_writer_for, init};

/// Appended to a line cut at `line_max_bytes`.
const TRUNCATED: &[u8] = "…[truncated]\n".as_bytes();
/// Lines the writer thread takes from the queue per lock.
const DRAIN_BATCH: usize = 64;
/// Goes to the start of the line and clears it: before a status line, and to take
/// one off the screen before log lines.
const CLEAR_LINE: &[u8] = b"\r\x1b[2K";

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

/// Where the status line is in its life.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum StatusPhase {
    /// Status lines are drawn.
    Open,
    /// To be ended with a newline by the writer thread.
    Ending,
    /// Ended: later status lines are ignored.
    Ended,
}

struct State {
    queue: QueueCore<Vec<u8>>,
    /// The newest status line not yet drawn; a newer one replaces it.
    status: Option<Vec<u8>>,
    status_phase: StatusPhase,
    closed: bool,
    /// The writer thread has written all it will and returned.
    finished: bool,
}

impl State {
    fn has_work(&self) -> bool {
        !self.queue.is_empty()
            || self.status.is_some()
            || self.status_phase == StatusPhase::Ending
            || self.closed
    }
}

struct Shared {
    state: Mutex<State>,
    /// Signalled when there is work for the writer thread.
    ready: Condvar,
    /// Signalled when the writer thread has finished.
    finished: Condvar,
    /// The queue's time origin (a std clock: logging runs outside tokio too).
    origin: Instant,
    line_max_bytes: usize,
    /// Text or JSON lines: a JSON line is never cut, and there is no status line.
    format: LogFormat,
    dropped: AtomicU64,
    truncated: AtomicU64,
    written: AtomicU64,
    status_dropped: AtomicU64,
}

/// Cuts `line` to at most `max` bytes on a UTF-8 boundary, so it stays valid text.
fn cut(line: &mut Vec<u8>, max: usize) {
    if line.len() <= max {
        return;
    }
    let mut cut = max;
    while cut > 0 && (line[cut] & 0b1100_0000) == 0b1000_0000 {
        cut -= 1;
    }
    line.truncate(cut);
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
        if line.len() > self.line_max_bytes && self.format == LogFormat::Json {
            // Cut, it would not be JSON: its formatter (which counted it as truncated)
            // could not make it fit.
            self.dropped.fetch_add(1, Ordering::Relaxed);
            return;
        }
        if line.len() > self.line_max_bytes {
            cut(
                &mut line,
                self.line_max_bytes.saturating_sub(TRUNCATED.len()),
            );
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

    /// Tells the writer thread to write what is queued and stop; never waits for it.
    fn close(&self) {
        self.lock().closed = true;
        self.ready.notify_all();
    }
}

/// The writer thread's loop: log lines and the status line to `output` until closed.
fn write_loop(shared: &Shared, output: &mut impl Write) {
    let mut batch = Vec::with_capacity(DRAIN_BATCH);
    // The status line on the screen, drawn again after log lines.
    let mut drawn: Option<Vec<u8>> = None;
    // Nowhere to report a failing output: what it refuses is lost either way.
    loop {
        let (status, end, closed) = {
            let mut state = shared.lock();
            while !state.has_work() {
                state = shared
                    .ready
                    .wait(state)
                    .unwrap_or_else(PoisonError::into_inner);
            }
            let now = shared.now();
            while batch.len() < DRAIN_BATCH {
                match state.queue.take(now) {
                    Some(taken) => batch.push(taken.item),
                    None => break,
                }
            }
            let end = state.status_phase == StatusPhase::Ending;
            if end {
                state.status_phase = StatusPhase::Ended;
            }
            (state.status.take(), end, state.closed)
        };
        if closed && batch.is_empty() && status.is_none() && !end {
            break;
        }
        if let Some(line) = status {
            let _ = output
                .write_all(CLEAR_LINE)
                .and_then(|()| output.write_all(&line));
            drawn = Some(line);
        }
        if end && drawn.take().is_some() {
            let _ = output.write_all(b"\n");
        }
        if !batch.is_empty() {
            if drawn.is_some() {
                let _ = output.write_all(CLEAR_LINE);
            }
            for line in batch.drain(..) {
                if output.write_all(&line).is_ok() {
                    shared.written.fetch_add(1, Ordering::Relaxed);
                }
            }
            if let Some(line) = &drawn {
                let _ = output
                    .write_all(CLEAR_LINE)
                    .and_then(|()| output.write_all(line));
            }
        }
        let _ = output.flush();
    }
    if drawn.is_some() {
        let _ = output.write_all(b"\n").and_then(|()| output.flush());
    }
}

/// Marks the writer thread finished when it returns, or panics.
struct FinishOnDrop(Arc<Shared>);

impl Drop for FinishOnDrop {
    fn drop(&mut self) {
        self.0.lock().finished = true;
        self.0.finished.notify_all();
    }
}

/// The writer thread. Dropping it (with the last [`LogHandle`]) tells the thread to
/// stop and never joins it: the drop may run on an async worker.
struct WriterThread {
    shared: Arc<Shared>,
    join: Mutex<Option<JoinHandle<()>>>,
}

impl Drop for WriterThread {
    fn drop(&mut self) {
        self.shared.close();
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

impl BoundedLogWriter {
    /// The JSON event format whose lines fit this writer's `line_max_bytes`.
    pub fn json_format(&self) -> JsonFormat {
        JsonFormat::new(Arc::clone(&self.shared))
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

/// Counts of the log writer, the status line, and the writer's shutdown. Clones share
/// the counts. Dropping the last clone tells the writer thread to stop, without
/// waiting for it; [`shutdown`](Self::shutdown) waits, within a timeout.
#[derive(Clone)]
pub struct LogHandle {
    shared: Arc<Shared>,
    thread: Arc<WriterThread>,
}

impl std::fmt::Debug for LogHandle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LogHandle")
            .field("dropped", &self.dropped())
            .field("truncated", &self.truncated())
            .field("written", &self.written())
            .field("status_dropped", &self.status_dropped())
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

    /// Status lines never drawn: replaced by a newer one before the writer thread got
    /// to them, or given after [`end_status_line`](Self::end_status_line) or
    /// [`shutdown`](Self::shutdown).
    pub fn status_dropped(&self) -> u64 {
        self.shared.status_dropped.load(Ordering::Relaxed)
    }

    /// Shows `text` as the terminal's status line: the writer thread draws it as
    /// `\r\x1b[2K{text}` with no newline, below the log lines (cleared before each
    /// and drawn again after). Line breaks in `text` become spaces; it is cut to
    /// `line_max_bytes`. Only for a terminal output.
    ///
    /// Never waits: one line waits to be drawn, and a newer one replaces it (counted in
    /// [`status_dropped`](Self::status_dropped)). Ignored with JSON lines, which a
    /// status line would break.
    pub fn status_line(&self, text: &str) {
        if self.shared.format == LogFormat::Json {
            return;
        }
        let mut line = text.replace(['\n', '\r'], " ").into_bytes();
        cut(&mut line, self.shared.line_max_bytes);
        let mut state = self.shared.lock();
        let replaced = if state.closed || state.status_phase != StatusPhase::Open {
            true
        } else {
            state.status.replace(line).is_some()
        };
        drop(state);
        if replaced {
            self.shared.status_dropped.fetch_add(1, Ordering::Relaxed);
        }
        self.shared.ready.notify_one();
    }

    /// Ends the status line: it stays as last drawn, followed by a newline, and later
    /// status lines are ignored. Never waits.
    pub fn end_status_line(&self) {
        let mut state = self.shared.lock();
        if state.status_phase != StatusPhase::Open {
            return;
        }
        state.status_phase = StatusPhase::Ending;
        drop(state);
        self.shared.ready.notify_one();
    }

    /// The format of the lines.
    pub fn format(&self) -> LogFormat {
        self.shared.format
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
        telemetry.register_counter_fn(
            "weir_log_status_lines_dropped_total",
            "Terminal status lines replaced by a newer one before they were drawn.",
            &[],
            move || handle.status_dropped(),
        );
        let handle = self.clone();
        telemetry.register_queue("log", Some(queue_lines), Some(queue_bytes), move || {
            handle.queue_stats()
        });
    }

    /// Stops taking lines, and waits at most `timeout` for the writer thread to
    /// write what is queued (ending the status line) and finish; joins it if it did.
    /// Lines logged afterwards are counted as dropped. Returns whether the writer
    /// finished: on `false` (a stalled output) the thread is left to finish alone.
    ///
    /// It blocks the calling thread: call it on the synchronous edge (after the tokio
    /// runtime has returned), never on an async worker.
    pub fn shutdown(&self, timeout: Duration) -> bool {
        self.shared.close();
        let state = self.shared.lock();
        let (state, _) = self
            .shared
            .finished
            .wait_timeout_while(state, timeout, |state| !state.finished)
            .unwrap_or_else(PoisonError::into_inner);
        if !state.finished {
            return false;
        }
        drop(state);
        let thread = self
            .thread
            .join
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take();
        if let Some(thread) = thread {
            // Finished: the join is immediate. A panicked writer has nothing to flush.
            let _ = thread.join();
        }
        true
    }
}

#[cfg(test)]
mod tests;
