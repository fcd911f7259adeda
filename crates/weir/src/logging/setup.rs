//! Setting the log writer up: [`bounded_writer`] (for tests, nothing global) and
//! [`init`] (the process's subscriber, text or JSON lines to stderr).

use std::io::Write;
use std::sync::atomic::AtomicU64;
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

use tracing_subscriber::EnvFilter;
use weir_flow::queue::{Capacity, OnFull, QueueConfig, QueueCore};

use super::{
    BoundedLogWriter, FinishOnDrop, LogError, LogFormat, LogHandle, Shared, State, StatusPhase,
    TRUNCATED, WriterThread, write_loop,
};

/// A bounded writer to `output` and its handle, without installing anything globally
/// (tests use it with `tracing::subscriber::with_default`).
///
/// # Errors
///
/// [`LogError::Thread`] when the writer thread cannot be spawned.
pub fn bounded_writer(
    queue_lines: u32,
    line_max_bytes: u64,
    output: impl Write + Send + 'static,
) -> Result<(BoundedLogWriter, LogHandle), LogError> {
    bounded_writer_for(LogFormat::Text, queue_lines, line_max_bytes, output)
}

/// [`bounded_writer`] for lines in `format`; with [`LogFormat::Json`], give the
/// subscriber [`BoundedLogWriter::json_format`] as its event format.
///
/// # Errors
///
/// [`LogError::Thread`] when the writer thread cannot be spawned.
pub fn bounded_writer_for(
    format: LogFormat,
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
            status: None,
            status_phase: StatusPhase::Open,
            closed: false,
            finished: false,
        }),
        ready: Condvar::new(),
        finished: Condvar::new(),
        origin: Instant::now(),
        line_max_bytes,
        format,
        dropped: AtomicU64::new(0),
        truncated: AtomicU64::new(0),
        written: AtomicU64::new(0),
        status_dropped: AtomicU64::new(0),
    });
    let drain = Arc::clone(&shared);
    let thread = std::thread::Builder::new()
        .name("weir-log".to_owned())
        .spawn(move || {
            let finish = FinishOnDrop(drain);
            write_loop(&finish.0, &mut output);
        })
        .map_err(LogError::Thread)?;
    let handle = LogHandle {
        shared: Arc::clone(&shared),
        thread: Arc::new(WriterThread {
            shared: Arc::clone(&shared),
            join: Mutex::new(Some(thread)),
        }),
    };
    Ok((BoundedLogWriter { shared }, handle))
}

/// Installs the global `tracing` subscriber: `level` (a level or filter directives),
/// lines in `format` through a bounded queue of `queue_lines` lines of at most
/// `line_max_bytes` bytes to stderr.
///
/// # Errors
///
/// [`LogError::Level`] for a bad level, [`LogError::AlreadyInitialised`] when called
/// twice, [`LogError::Thread`] when the writer thread cannot start.
pub fn init(
    level: &str,
    format: LogFormat,
    queue_lines: u32,
    line_max_bytes: u64,
) -> Result<LogHandle, LogError> {
    let filter = EnvFilter::try_new(level).map_err(|e| LogError::Level {
        level: level.to_owned(),
        message: e.to_string(),
    })?;
    let (writer, handle) =
        bounded_writer_for(format, queue_lines, line_max_bytes, std::io::stderr())?;
    let subscriber = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(writer.clone())
        .with_ansi(false);
    let installed = match format {
        LogFormat::Text => subscriber.try_init(),
        LogFormat::Json => subscriber.event_format(writer.json_format()).try_init(),
    };
    if installed.is_err() {
        handle.shutdown(Duration::from_secs(1));
        return Err(LogError::AlreadyInitialised);
    }
    Ok(handle)
}
