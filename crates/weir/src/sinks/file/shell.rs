//! The `file` sink's tokio task (see the [module docs](super)).

use std::fs::File;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Instant;

use super::config::FileSinkConfig;
use super::core::{DONE_SUFFIX, OPEN_SUFFIX, Rotation, file_stem};
use crate::pipeline::{Sink, SinkBatch, SinkError, Unencodable, Written};
use crate::sinks::rotate::{CloseReason, Closes, FILE_CLOSES};
use crate::sinks::{OpenSink, SinkContext};

/// Writes NDJSON files.
#[derive(Debug)]
pub struct FileSink {
    state: Arc<Mutex<State>>,
}

#[derive(Debug)]
struct State {
    dir: PathBuf,
    rotation: Rotation,
    started_ms: i64,
    seq: u64,
    open: Option<OpenFile>,
    /// What each line is.
    line: crate::record::Line,
    /// Encoding buffer, reused.
    buf: Vec<u8>,
    /// A write failed mid-file: start a new file before writing again.
    broken: bool,
    /// Failures injected by tests into the next writes.
    fault: Fault,
    /// Files closed, by reason (`closes` in `/status`).
    closes: Arc<Closes>,
}

/// Write failures to inject (tests): the next `failures` batch writes put at most
/// `accept_bytes` bytes in the file and then fail with ENOSPC, as a filling disk does.
#[derive(Debug, Default, Clone, Copy)]
pub(super) struct Fault {
    pub(super) failures: u32,
    pub(super) accept_bytes: usize,
}

/// `write_all`, failing as `fault` says.
fn write_all(file: &mut File, bytes: &[u8], fault: &mut Fault) -> std::io::Result<()> {
    if fault.failures > 0 {
        fault.failures -= 1;
        file.write_all(&bytes[..fault.accept_bytes.min(bytes.len())])?;
        return Err(std::io::Error::from_raw_os_error(28)); // ENOSPC
    }
    file.write_all(bytes)
}

#[derive(Debug)]
struct OpenFile {
    file: File,
    path: PathBuf,
    stem: String,
    bytes: u64,
    opened: Instant,
}

fn lock(state: &Mutex<State>) -> MutexGuard<'_, State> {
    state
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

impl OpenSink for FileSinkConfig {
    type Sink = FileSink;

    fn open(&self, _name: &str, cx: &SinkContext) -> Result<FileSink, SinkError> {
        let sink = FileSink::open(self)?;
        let closes = Arc::clone(&lock(&sink.state).closes);
        let _ = cx.detail.set(crate::pipeline::Detail(Arc::new(
            move || serde_json::json!({ "closes": closes.status() }),
        )));
        Ok(sink)
    }
}

impl FileSink {
    /// Creates the directory and closes any `.open` file a crash left behind. Blocking.
    ///
    /// # Errors
    ///
    /// [`SinkError::Io`] if the directory cannot be created or read.
    pub fn open(config: &FileSinkConfig) -> Result<Self, SinkError> {
        let dir = config.path.clone();
        std::fs::create_dir_all(&dir).map_err(|e| SinkError::io("creating", &dir, e))?;
        let entries = std::fs::read_dir(&dir).map_err(|e| SinkError::io("reading", &dir, e))?;
        for entry in entries {
            let entry = entry.map_err(|e| SinkError::io("reading", &dir, e))?;
            let name = entry.file_name();
            if let Some(stem) = name.to_str().and_then(|n| n.strip_suffix(OPEN_SUFFIX)) {
                let path = entry.path();
                if !cut_to_last_line(&path)? {
                    std::fs::remove_file(&path)
                        .map_err(|e| SinkError::io("removing the empty", &path, e))?;
                    continue;
                }
                let done = dir.join(format!("{stem}{DONE_SUFFIX}"));
                std::fs::rename(&path, &done)
                    .map_err(|e| SinkError::io("closing a file left open in", &dir, e))?;
            }
        }
        sync_dir(&dir)?;
        Ok(FileSink {
            state: Arc::new(Mutex::new(State {
                dir,
                rotation: Rotation {
                    max_bytes: config.rotate.bytes.bytes(),
                    max_age: config.rotate.age.map(|d| d.get()),
                },
                started_ms: crate::record::now_ms(),
                seq: 0,
                open: None,
                line: config.line.clone(),
                buf: Vec::new(),
                broken: false,
                fault: Fault::default(),
                closes: Arc::new(Closes::new(FILE_CLOSES)),
            })),
        })
    }
}

impl Sink for FileSink {
    /// Writes and fsyncs a batch; rotates when due.
    ///
    /// # Errors
    ///
    /// [`SinkError::Io`]; the batch is not stored and the next write starts a new file.
    ///
    /// # Cancel safety
    ///
    /// The write finishes on a blocking thread even if this future is dropped; it is
    /// then not acknowledged and will be written again.
    async fn write(
        &mut self,
        batch: &Arc<SinkBatch>,
        rejects: &mut Vec<Unencodable>,
    ) -> Result<Written, SinkError> {
        let state = Arc::clone(&self.state);
        let records = Arc::clone(batch);
        let next = batch.next_offset;
        let (written, rejected) = tokio::task::spawn_blocking(move || {
            let mut state = lock(&state);
            let mut rejected = Vec::new();
            let result = state.write(&records.records, &mut rejected);
            (result.map(|()| next), rejected)
        })
        .await
        .map_err(|_| SinkError::Cancelled)?;
        let unencodable = rejected.len() as u64;
        rejects.extend(rejected);
        Ok(Written {
            durable_through: Some(written?),
            unencodable,
            buffered_bytes: 0,
        })
    }

    /// Rotates the open file if it is older than `rotate.age`.
    ///
    /// # Errors
    ///
    /// [`SinkError::Io`] if closing it failed.
    ///
    /// # Cancel safety
    ///
    /// Cancel-safe: the rotation finishes on a blocking thread.
    async fn tick(&mut self) -> Result<Option<u64>, SinkError> {
        let state = Arc::clone(&self.state);
        tokio::task::spawn_blocking(move || {
            let mut state = lock(&state);
            let due = state
                .open
                .as_ref()
                .and_then(|o| state.rotation.due_for(o.bytes, o.opened, Instant::now()));
            if let Some(reason) = due {
                state.close()?;
                state.closes.count(reason);
            }
            Ok(None)
        })
        .await
        .map_err(|_| SinkError::Cancelled)?
    }

    /// Closes the open file (shutdown).
    ///
    /// # Errors
    ///
    /// [`SinkError::Io`] if closing it failed.
    ///
    /// # Cancel safety
    ///
    /// Cancel-safe: the close finishes on a blocking thread.
    async fn finish(&mut self) -> Result<Option<u64>, SinkError> {
        let state = Arc::clone(&self.state);
        tokio::task::spawn_blocking(move || {
            let mut state = lock(&state);
            let written = state.open.as_ref().is_some_and(|o| o.bytes > 0);
            state.close()?;
            if written {
                state.closes.count(CloseReason::Shutdown);
            }
            Ok(None)
        })
        .await
        .map_err(|_| SinkError::Cancelled)?
    }
}

impl State {
    fn write(
        &mut self,
        records: &[crate::record::Record],
        rejected: &mut Vec<Unencodable>,
    ) -> Result<(), SinkError> {
        if records.is_empty() {
            return Ok(());
        }
        let mut buf = std::mem::take(&mut self.buf);
        buf.clear();
        for record in records {
            if let Err(reason) = record.write_line(&self.line, &mut buf) {
                rejected.push(Unencodable {
                    record: record.clone(),
                    reason,
                });
            }
        }
        let result = self.write_bytes(&buf);
        self.buf = buf;
        result
    }

    fn write_bytes(&mut self, bytes: &[u8]) -> Result<(), SinkError> {
        if bytes.is_empty() {
            return Ok(());
        }
        if self.broken {
            // The last failed batch could not be cut off: try again before writing.
            self.repair()?;
        }
        if self.open.is_none() {
            self.open = Some(self.create()?);
        }
        let rotation = self.rotation;
        let Some(open) = self.open.as_mut() else {
            return Ok(());
        };
        let written = write_all(&mut open.file, bytes, &mut self.fault)
            .map_err(|e| SinkError::io("writing", &open.path, e))
            .and_then(|()| {
                open.file
                    .sync_data()
                    .map_err(|e| SinkError::io("syncing", &open.path, e))
            });
        if let Err(e) = written {
            // Part of the batch may be in the file: cut it back to the whole batches
            // before it, so that the file never holds a torn line and the retry (the
            // same batch, from the committed cursor) continues in the same file
            // instead of leaving one file per attempt.
            if self.repair().is_err() {
                self.broken = true;
            }
            return Err(e);
        }
        open.bytes += bytes.len() as u64;
        if let Some(reason) = rotation.due_for(open.bytes, open.opened, Instant::now()) {
            self.close()?;
            self.closes.count(reason);
        }
        Ok(())
    }

    /// Truncates the open file to the batches written and synced whole.
    fn repair(&mut self) -> Result<(), SinkError> {
        if let Some(open) = &self.open {
            open.file
                .set_len(open.bytes)
                .and_then(|()| open.file.sync_data())
                .map_err(|e| SinkError::io("cutting a failed write off", &open.path, e))?;
        }
        self.broken = false;
        Ok(())
    }

    fn create(&mut self) -> Result<OpenFile, SinkError> {
        let stem = file_stem(self.started_ms, self.seq);
        self.seq += 1;
        let path = self.dir.join(format!("{stem}{OPEN_SUFFIX}"));
        // Append: after a failed write is cut off, the next one starts at the new end.
        let file = File::options()
            .create_new(true)
            .append(true)
            .open(&path)
            .map_err(|e| SinkError::io("creating", &path, e))?;
        sync_dir(&self.dir)?;
        Ok(OpenFile {
            file,
            path,
            stem,
            bytes: 0,
            opened: Instant::now(),
        })
    }

    /// Fsyncs, renames to `.ndjson`, fsyncs the directory; a file with no line is
    /// removed instead. A file whose failed write could not be cut off stays open.
    fn close(&mut self) -> Result<(), SinkError> {
        if self.broken {
            self.repair()?;
        }
        let Some(open) = self.open.take() else {
            return Ok(());
        };
        if open.bytes == 0 {
            drop(open.file);
            std::fs::remove_file(&open.path)
                .map_err(|e| SinkError::io("removing the empty", &open.path, e))?;
            return sync_dir(&self.dir);
        }
        open.file
            .sync_all()
            .map_err(|e| SinkError::io("syncing", &open.path, e))?;
        let done = self.dir.join(format!("{}{DONE_SUFFIX}", open.stem));
        std::fs::rename(&open.path, &done).map_err(|e| SinkError::io("renaming", &open.path, e))?;
        sync_dir(&self.dir)
    }
}

/// Cuts a file left open by a crash after its last whole line (a torn line was never
/// acknowledged: its records are written again from the cursor); false if no line is
/// left. Blocking.
fn cut_to_last_line(path: &Path) -> Result<bool, SinkError> {
    use std::io::{Read, Seek, SeekFrom};
    let io = |e| SinkError::io("closing a file left open:", path, e);
    let mut file = File::options()
        .read(true)
        .write(true)
        .open(path)
        .map_err(io)?;
    let len = file.metadata().map_err(io)?.len();
    // Scan back from the end in blocks for the last newline.
    let mut end = len;
    let mut block = vec![0u8; 64 * 1024];
    let keep = loop {
        if end == 0 {
            break 0;
        }
        let start = end.saturating_sub(block.len() as u64);
        let n = usize::try_from(end - start).unwrap_or(block.len());
        file.seek(SeekFrom::Start(start)).map_err(io)?;
        file.read_exact(&mut block[..n]).map_err(io)?;
        if let Some(i) = block[..n].iter().rposition(|&b| b == b'\n') {
            break start + i as u64 + 1;
        }
        end = start;
    };
    if keep < len {
        file.set_len(keep)
            .and_then(|()| file.sync_all())
            .map_err(io)?;
    }
    Ok(keep > 0)
}

fn sync_dir(dir: &Path) -> Result<(), SinkError> {
    File::open(dir)
        .and_then(|d| d.sync_all())
        .map_err(|e| SinkError::io("syncing directory", dir, e))
}

impl FileSink {
    /// Makes the next writes fail as `fault` says (tests).
    #[cfg(test)]
    pub(super) fn inject(&self, fault: Fault) {
        lock(&self.state).fault = fault;
    }
}

#[cfg(test)]
mod tests {
    use bytes::Bytes;

    use super::*;
    use crate::record::Record;

    fn config(dir: &Path, bytes: u64) -> FileSinkConfig {
        FileSinkConfig {
            path: dir.join("out"),
            line: crate::record::Line::Envelope,
            rotate: crate::sinks::rotate::Rotate {
                bytes: crate::keys::ByteSize::new(bytes).unwrap(),
                age: None,
                max_wal_share: crate::sinks::rotate::DEFAULT_MAX_WAL_SHARE,
            },
        }
    }

    fn record(i: u32, payload: &'static [u8]) -> Record {
        Record {
            source: "g".into(),
            key: format!("k{i}"),
            timestamp_ms: 1,
            payload: Bytes::from_static(payload),
            attributes: Vec::new(),
        }
    }

    fn files(dir: &Path, suffix: &str) -> Vec<PathBuf> {
        let mut v: Vec<_> = std::fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().path())
            .filter(|p| p.to_str().unwrap().ends_with(suffix))
            .collect();
        v.sort();
        v
    }

    #[tokio::test]
    async fn writes_rotates_and_rejects_binary() {
        let tmp = tempfile::tempdir().unwrap();
        let cfg = config(tmp.path(), 150);
        let mut sink = FileSink::open(&cfg).unwrap();
        let mut rejects = Vec::new();
        let batch = Arc::new(SinkBatch {
            records: vec![
                record(1, b"{\"a\":1}"),
                record(2, b"\xff"),
                record(3, b"text"),
            ],
            next_offset: 3,
            bytes: 0,
            ..SinkBatch::default()
        });
        let w = sink.write(&batch, &mut rejects).await.unwrap();
        assert_eq!(
            w,
            Written {
                durable_through: Some(3),
                unencodable: 1,
                buffered_bytes: 0,
            }
        );
        assert_eq!(rejects.len(), 1);
        assert_eq!(rejects[0].record.key, "k2");
        assert_eq!(files(&cfg.path, OPEN_SUFFIX).len(), 1);
        // The second batch crosses 150 bytes: the file is closed.
        sink.write(&batch, &mut rejects).await.unwrap();
        let done = files(&cfg.path, DONE_SUFFIX);
        assert_eq!(done.len(), 1);
        assert!(files(&cfg.path, OPEN_SUFFIX).is_empty());
        let text = std::fs::read_to_string(&done[0]).unwrap();
        assert_eq!(text.lines().count(), 4);
        for line in text.lines() {
            serde_json::from_str::<serde_json::Value>(line).unwrap();
        }
        // Closed by its size; the next one by shutdown.
        sink.write(&batch, &mut rejects).await.unwrap();
        sink.finish().await.unwrap();
        let closes = Arc::clone(&lock(&sink.state).closes);
        assert_eq!(
            closes.status(),
            serde_json::json!({"size": 1, "age": 0, "shutdown": 1})
        );
    }

    #[tokio::test]
    async fn a_file_left_open_is_closed_at_open() {
        let tmp = tempfile::tempdir().unwrap();
        let cfg = config(tmp.path(), 1 << 20);
        let mut sink = FileSink::open(&cfg).unwrap();
        let batch = Arc::new(SinkBatch {
            records: vec![record(1, b"1")],
            next_offset: 1,
            bytes: 1,
            ..SinkBatch::default()
        });
        sink.write(&batch, &mut Vec::new()).await.unwrap();
        drop(sink); // a crash: never finished
        let _again = FileSink::open(&cfg).unwrap();
        assert!(files(&cfg.path, OPEN_SUFFIX).is_empty());
        assert_eq!(files(&cfg.path, DONE_SUFFIX).len(), 1);
    }
}
