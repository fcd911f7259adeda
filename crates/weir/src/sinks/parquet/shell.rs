//! The async shell around the synchronous [`ParquetFileWriter`]: each call runs on a
//! blocking thread, and the sink reports durable what closed files hold.
//!
//! The writer buffers a file's records until the file is closed (by `rotate.bytes`,
//! `rotate.age` or shutdown) and renamed. Whenever no file is open, every batch handed
//! to it so far is in closed files, so the cursor may move to the last batch's end;
//! while a file is open, the cursor waits.

use std::sync::{Arc, Mutex, MutexGuard};
use std::time::SystemTime;

use super::config::ParquetConfig;
use super::error::ParquetSinkError;
use super::writer::ParquetFileWriter;
use crate::pipeline::{Sink, SinkBatch, SinkError, Unencodable, Written};
use crate::sinks::object_store::ObjectStoreSink;
use crate::sinks::reserve::WalReserve;
use crate::sinks::rotate::{
    CloseReason, Closes, PINNING_CLOSES, Rotate, early_close_note, pins_too_much,
};
use crate::sinks::{ConfigStamp, OpenSink, SinkContext};

/// A Parquet sink.
#[derive(Debug)]
pub struct ParquetSink {
    state: Arc<Mutex<State>>,
}

#[derive(Debug)]
struct State {
    writer: ParquetFileWriter,
    /// Budget-aware rotation: the rotation settings and the WAL whose budget the open
    /// file pins (none in unit tests of the writer alone).
    pinning: Option<(Rotate, weir_wal::Wal)>,
    /// The end (next offset) of the last batch handed to the writer.
    last_next: Option<u64>,
    /// Set when the lake is on the WAL's filesystem: a write that would take the WAL's
    /// reserve waits instead.
    reserve: Option<WalReserve>,
    /// Files closed, by reason (`closes` in `/status`).
    closes: Arc<Closes>,
}

fn lock(state: &Mutex<State>) -> MutexGuard<'_, State> {
    state
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

fn to_sink_error(e: ParquetSinkError) -> SinkError {
    SinkError::Abandoned(format!("parquet: {e}"))
}

impl State {
    /// Closes the open file early when it pins too much of the WAL's budget
    /// ([`Rotate::max_wal_share`]).
    fn close_if_pinning(&mut self) -> Result<(), ParquetSinkError> {
        if let (Some((rotate, wal)), Some(first), Some(next)) = (
            &self.pinning,
            self.writer.open_first_offset(),
            self.last_next,
        ) && pins_too_much(rotate, wal, first, next)
            && self.writer.finish()?.is_some()
        {
            self.closes.count(CloseReason::WalShare);
        }
        Ok(())
    }

    /// Counts a close for `reason` when `closed` says a file was.
    fn counted<T>(&self, closed: Option<T>, reason: CloseReason) {
        if closed.is_some() {
            self.closes.count(reason);
        }
    }

    /// Everything handed over is in closed files when none is open.
    fn durable(&self) -> Option<u64> {
        if self.writer.open_path().is_none() {
            self.last_next
        } else {
            None
        }
    }
}

/// A running `parquet` sink: its own writer of one file at a time, or, with a `layout`,
/// the object-store sink's engine over its directory (several files open, a journal).
#[derive(Debug)]
pub enum ParquetOutput {
    /// Without a layout.
    Files(ParquetSink),
    /// With a layout.
    Layout(Box<ObjectStoreSink>),
}

impl OpenSink for ParquetConfig {
    type Sink = ParquetOutput;

    fn open(&self, name: &str, cx: &SinkContext) -> Result<ParquetOutput, SinkError> {
        if self.partitioning.layout.is_some() {
            let sink = ObjectStoreSink::open(name, &self.as_object_store(), cx, false)?;
            return Ok(ParquetOutput::Layout(Box::new(sink)));
        }
        self.open_files(name, cx).map(ParquetOutput::Files)
    }
}

impl Sink for ParquetOutput {
    async fn write(
        &mut self,
        batch: &Arc<SinkBatch>,
        rejects: &mut Vec<Unencodable>,
    ) -> Result<Written, SinkError> {
        match self {
            ParquetOutput::Files(s) => s.write(batch, rejects).await,
            ParquetOutput::Layout(s) => s.write(batch, rejects).await,
        }
    }

    async fn tick(&mut self) -> Result<Option<u64>, SinkError> {
        match self {
            ParquetOutput::Files(s) => s.tick().await,
            ParquetOutput::Layout(s) => s.tick().await,
        }
    }

    async fn finish(&mut self) -> Result<Option<u64>, SinkError> {
        match self {
            ParquetOutput::Files(s) => s.finish().await,
            ParquetOutput::Layout(s) => s.finish().await,
        }
    }

    async fn settled(&mut self) -> Result<Option<u64>, SinkError> {
        match self {
            ParquetOutput::Files(s) => s.settled().await,
            ParquetOutput::Layout(s) => s.settled().await,
        }
    }

    fn resume_at(&mut self, next_offset: u64) {
        match self {
            ParquetOutput::Files(s) => s.resume_at(next_offset),
            ParquetOutput::Layout(s) => s.resume_at(next_offset),
        }
    }

    fn failing(&self) -> Option<String> {
        match self {
            ParquetOutput::Files(s) => s.failing(),
            ParquetOutput::Layout(s) => s.failing(),
        }
    }
}

impl ParquetConfig {
    fn open_files(&self, name: &str, cx: &SinkContext) -> Result<ParquetSink, SinkError> {
        let sink = ParquetSink::open(name, self, cx.stamp.clone())?;
        let mut state = lock(&sink.state);
        state.pinning = Some((self.rotate, cx.wal.clone()));
        state.reserve = WalReserve::for_dir(cx.wal.dir(), &self.path);
        let typed = state.writer.typed_stats().cloned();
        if let Some(stats) = &typed {
            crate::sinks::schema::register(name, stats, &cx.telemetry);
        }
        let closes = Arc::clone(&state.closes);
        let _ = cx.detail.set(crate::pipeline::Detail(Arc::new(move || {
            let mut detail = serde_json::json!({ "closes": closes.status() });
            if let (Some(typed), Some(map)) = (&typed, detail.as_object_mut()) {
                map.insert("schema".to_owned(), typed.status());
            }
            detail
        })));
        drop(state);
        let (max_disk, capacity) = (cx.wal.stats().max_disk, cx.wal.capacity());
        if let Some(note) = early_close_note(name, "file", &self.rotate, max_disk, Some(capacity)) {
            tracing::info!(sink = %name, "{note}");
        }
        Ok(sink)
    }
}

impl ParquetSink {
    /// Opens the writer for sink `name` (blocking: creates the directory, removes stale
    /// temporary files).
    ///
    /// # Errors
    ///
    /// [`SinkError::Abandoned`] if the directory cannot be prepared.
    pub fn open(
        name: &str,
        config: &ParquetConfig,
        footer: impl Into<ConfigStamp>,
    ) -> Result<Self, SinkError> {
        let writer =
            ParquetFileWriter::new(&config.path, name, config, footer).map_err(to_sink_error)?;
        Ok(ParquetSink {
            state: Arc::new(Mutex::new(State {
                writer,
                pinning: None,
                last_next: None,
                reserve: None,
                closes: Arc::new(Closes::new(PINNING_CLOSES)),
            })),
        })
    }
}

impl Sink for ParquetSink {
    /// The offset the sink's cursor resumes from (at start, and after a failure before
    /// the driver sends again from the committed cursor): names the next file.
    fn resume_at(&mut self, next_offset: u64) {
        let mut state = lock(&self.state);
        state.writer.resume_at(next_offset);
        // Nothing handed over since the committed cursor is stored yet.
        state.last_next = None;
    }

    /// Hands a batch to the writer.
    ///
    /// # Errors
    ///
    /// [`SinkError::Abandoned`]: the writer abandoned its open file, earlier batches
    /// included, so the driver rewinds to the committed cursor and sends them again
    /// ([`SinkError::needs_rewind`]).
    ///
    /// # Cancel safety
    ///
    /// The write finishes on a blocking thread even if this future is dropped.
    async fn write(
        &mut self,
        batch: &Arc<SinkBatch>,
        rejects: &mut Vec<Unencodable>,
    ) -> Result<Written, SinkError> {
        let state = Arc::clone(&self.state);
        let batch = Arc::clone(batch);
        let (written, rejected) = tokio::task::spawn_blocking(move || {
            let mut state = lock(&state);
            let Some(last) = batch.next_offset.checked_sub(1) else {
                return Ok((Written::default(), Vec::new()));
            };
            // At most what is buffered and the batch's payloads reach the disk now.
            if let Some(reserve) = &state.reserve {
                let needed = state.writer.buffered_bytes() + batch.bytes;
                reserve.check(needed).map_err(|reason| SinkError::Io {
                    action: "writing into",
                    path: reserve.dir().to_path_buf(),
                    source: std::io::Error::new(std::io::ErrorKind::StorageFull, reason),
                })?;
            }
            let closed = state
                .writer
                .write(&batch.records, last)
                .map_err(to_sink_error)?;
            state.counted(closed, CloseReason::Bytes);
            state.last_next = Some(batch.next_offset);
            state.close_if_pinning().map_err(to_sink_error)?;
            let rejected = state.writer.take_rejects();
            Ok((
                Written {
                    durable_through: state.durable(),
                    unencodable: rejected.len() as u64,
                    buffered_bytes: state.writer.buffered_bytes(),
                },
                rejected,
            ))
        })
        .await
        .map_err(|_| SinkError::Cancelled)??;
        rejects.extend(rejected);
        Ok(written)
    }

    /// Closes the open file if it is older than `rotate.age`, or pins more than
    /// `rotate.max_wal_share` of the WAL.
    ///
    /// # Errors
    ///
    /// [`SinkError::Abandoned`] if closing it failed.
    ///
    /// # Cancel safety
    ///
    /// Cancel-safe: the work finishes on a blocking thread.
    async fn tick(&mut self) -> Result<Option<u64>, SinkError> {
        let state = Arc::clone(&self.state);
        tokio::task::spawn_blocking(move || {
            let mut state = lock(&state);
            let closed = state
                .writer
                .poll_age(SystemTime::now())
                .map_err(to_sink_error)?;
            state.counted(closed, CloseReason::Age);
            state.close_if_pinning().map_err(to_sink_error)?;
            Ok(state.durable())
        })
        .await
        .map_err(|_| SinkError::Cancelled)?
    }

    /// Closes the open file (shutdown).
    ///
    /// # Errors
    ///
    /// [`SinkError::Abandoned`] if closing it failed.
    ///
    /// # Cancel safety
    ///
    /// Cancel-safe: the work finishes on a blocking thread.
    async fn finish(&mut self) -> Result<Option<u64>, SinkError> {
        let state = Arc::clone(&self.state);
        tokio::task::spawn_blocking(move || {
            let mut state = lock(&state);
            let closed = state.writer.finish().map_err(to_sink_error)?;
            state.counted(closed, CloseReason::Shutdown);
            Ok(state.durable())
        })
        .await
        .map_err(|_| SinkError::Cancelled)?
    }
}

#[cfg(test)]
#[path = "shell_tests.rs"]
mod tests;
