//! [`ParquetFileWriter`]: records in, closed and renamed Parquet files out.

use std::fs::{self, File};
use std::path::{Path, PathBuf};
use std::time::SystemTime;

use super::encoder::{EncoderSettings, ParquetEncoder};
use super::error::ParquetSinkError;
use weir_wal::OnFull;

use super::config::ParquetConfig;
use crate::pipeline::Unencodable;
use crate::record::Record;
use crate::sinks::rotate::Rotate;
use crate::sinks::{ConfigStamp, SinkContext};

/// Footer key: the configuration hash (`sha256:` and 64 hex digits).
pub const KEY_CONFIG_HASH: &str = "weir.config_hash";
/// Footer key: the WAL's `on_full` choice (`block`, `reject` or `drop_oldest`).
pub const KEY_ON_FULL: &str = "weir.on_full";
/// Footer key: the first WAL offset the file covers (decimal).
pub const KEY_FIRST_OFFSET: &str = "weir.first_offset";
/// Footer key: the last WAL offset the file covers (decimal).
pub const KEY_LAST_OFFSET: &str = "weir.last_offset";
/// Footer key: the sources of the file's rows, a sorted JSON array of names.
pub const KEY_SOURCE_NAMES: &str = "weir.source_names";
/// Footer key: the version of weir that wrote the file.
pub const KEY_WEIR_VERSION: &str = "weir.version";

/// What every file's footer says about the configuration that wrote it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FooterMetadata {
    /// The configuration hash, written as `weir.config_hash`.
    pub config_hash: String,
    /// The WAL's `on_full` choice, written as `weir.on_full`: the one place weir may
    /// lose acknowledged data, so every file records it.
    pub on_full: OnFull,
}

impl FooterMetadata {
    /// Footer metadata of the pipeline a sink belongs to, as in force now: the
    /// configuration's full hash and its `wal.on_full`.
    pub fn from_context(cx: &SinkContext) -> Self {
        cx.stamp.get()
    }
}

/// A file closed, fsynced and renamed to its final name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Committed {
    /// The file's final path.
    pub path: PathBuf,
    /// Every record through this WAL offset is durable in closed files: the sink's
    /// cursor may be committed here.
    pub through_offset: u64,
    /// Rows in the file.
    pub rows: u64,
    /// The file's size in bytes.
    pub bytes: u64,
}

/// The file being written.
struct OpenFile {
    encoder: ParquetEncoder<File>,
    tmp_path: PathBuf,
    path: PathBuf,
    first_offset: u64,
    last_offset: u64,
    opened_at: SystemTime,
}

/// Writes records into Parquet files of the [documented schema](super::record_schema),
/// one file open at a time.
///
/// Synchronous: it does file I/O and CPU-heavy encoding, so the runtime calls it on a
/// blocking thread.
///
/// - **Row groups** are flushed at `row_group_rows` rows or when the buffered row group
///   reaches `row_group_bytes` (encoded estimate or memory held, whichever first).
///   Records are converted to Arrow in chunks of at most `row_group_rows` rows and
///   `row_group_bytes` bytes, so the writer's memory stays around two row groups
///   (plus the encoders' fixed buffers, about 80 KiB: a `row_group_bytes` below that
///   flushes a row group on every write).
/// - **Rotation**: a file is closed after the write that brings it to `rotate.bytes`
///   (a file may exceed it by up to one `write` call), or by [`poll_age`] once it is
///   `rotate.age` old.
/// - **Durability**: a file is written as `.NAME.parquet.tmp`, fsynced, renamed to
///   `NAME.parquet`, and the directory fsynced; only then is it reported
///   [`Committed`]. `NAME` is `<prefix>-<first WAL offset, 20 digits>`, so after a
///   crash the retry from the last committed cursor rewrites the same name instead of
///   adding a duplicate; stale `.tmp` files of this prefix are removed by [`new`].
/// - **Errors**: after a failed write or close the open file is abandoned (its `.tmp`
///   removed) and the writer rewinds to the open file's first offset: re-send
///   everything after the last [`Committed::through_offset`] (offsets may go back that
///   far, and no further).
///
/// [`poll_age`]: ParquetFileWriter::poll_age
/// [`new`]: ParquetFileWriter::new
pub struct ParquetFileWriter {
    dir: PathBuf,
    prefix: String,
    rotate: Rotate,
    settings: EncoderSettings,
    footer: ConfigStamp,
    open: Option<OpenFile>,
    /// Records that did not fit the schema since [`Self::take_rejects`].
    rejects: Vec<Unencodable>,
    /// The first offset of the next file, once known.
    next_first_offset: Option<u64>,
    /// The highest `last_offset` seen, to refuse a batch that goes backwards.
    last_seen: Option<u64>,
}

impl std::fmt::Debug for ParquetFileWriter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ParquetFileWriter")
            .field("dir", &self.dir)
            .field("prefix", &self.prefix)
            .field("open", &self.open.as_ref().map(|open| &open.path))
            .field("next_first_offset", &self.next_first_offset)
            .finish_non_exhaustive()
    }
}

impl ParquetFileWriter {
    /// A writer of `<dir>/<prefix>-<offset>.parquet` files. Creates `dir` when missing
    /// and removes stale `.<prefix>-*.parquet.tmp` files left by a crash.
    ///
    /// # Errors
    ///
    /// [`ParquetSinkError::Io`] when the directory cannot be created or listed, or a
    /// stale file cannot be removed; [`ParquetSinkError::Prefix`] for a prefix that is
    /// empty or contains a path separator.
    pub fn new(
        dir: &Path,
        prefix: &str,
        config: &ParquetConfig,
        footer: impl Into<ConfigStamp>,
    ) -> Result<Self, ParquetSinkError> {
        if prefix.is_empty() || prefix.contains(['/', '\\']) || prefix.starts_with('.') {
            return Err(ParquetSinkError::Prefix(prefix.to_owned()));
        }
        fs::create_dir_all(dir).map_err(|e| ParquetSinkError::io("create directory", dir, e))?;
        remove_stale_tmp_files(dir, prefix)?;
        Ok(Self {
            dir: dir.to_owned(),
            prefix: prefix.to_owned(),
            rotate: config.rotate,
            settings: EncoderSettings::new(&config.encoding, config.schema.as_ref()),
            rejects: Vec::new(),
            footer: footer.into(),
            open: None,
            next_first_offset: None,
            last_seen: None,
        })
    }

    /// Tells the writer the WAL offset its sink resumes from (the offset after its
    /// committed cursor), which names the next file. Call it once before the first
    /// [`write`](Self::write). Without it, the first file is named after
    /// `last_offset + 1 - records.len()` of its first batch, which is exact only when
    /// the sink reads every record of its range.
    ///
    /// After an error, call it again with the committed cursor before re-sending.
    /// Ignored while a file is open.
    pub fn resume_at(&mut self, next_offset: u64) {
        if self.open.is_none() {
            self.rewind_to(next_offset);
        }
    }

    /// The next file starts at `next_offset`, and batches from there are accepted.
    fn rewind_to(&mut self, next_offset: u64) {
        self.next_first_offset = Some(next_offset);
        self.last_seen = next_offset.checked_sub(1);
    }

    /// The path of the file being written, if one is open (it has its final name only
    /// once committed).
    pub fn open_path(&self) -> Option<&Path> {
        self.open.as_ref().map(|open| open.path.as_path())
    }

    /// The first WAL offset the open file covers, if one is open.
    pub fn open_first_offset(&self) -> Option<u64> {
        self.open.as_ref().map(|open| open.first_offset)
    }

    /// Bytes the open file's unflushed row group holds in memory (encoded pages and
    /// encoder buffers): kept below `row_group_bytes` after every
    /// [`write`](Self::write).
    pub fn buffered_bytes(&self) -> u64 {
        self.open
            .as_ref()
            .map_or(0, |open| open.encoder.buffered_bytes())
    }

    /// Appends `records`, which cover the WAL through `last_offset` (records of other
    /// sources in that range are simply not among them). Returns the file it closed,
    /// if this write brought the open file to `rotate.bytes`.
    ///
    /// An empty `records` with no file open moves the start of the next file past
    /// `last_offset`.
    ///
    /// # Errors
    ///
    /// [`ParquetSinkError::OffsetRegression`] when `last_offset` is below an earlier
    /// one (nothing is written); [`ParquetSinkError::Io`] or
    /// [`ParquetSinkError::Encode`] when writing fails, after which the open file is
    /// abandoned (see the type's docs).
    pub fn write(
        &mut self,
        records: &[Record],
        last_offset: u64,
    ) -> Result<Option<Committed>, ParquetSinkError> {
        if let Some(previous) = self.last_seen
            && last_offset < previous
        {
            return Err(ParquetSinkError::OffsetRegression {
                previous,
                found: last_offset,
            });
        }
        self.last_seen = Some(last_offset);
        if records.is_empty() {
            match &mut self.open {
                Some(open) => open.last_offset = last_offset,
                None => self.next_first_offset = Some(last_offset.saturating_add(1)),
            }
            return Ok(None);
        }
        if self.open.is_none() {
            let first = self.next_first_offset.unwrap_or_else(|| {
                last_offset
                    .saturating_add(1)
                    .saturating_sub(records.len() as u64)
            });
            self.open = Some(self.open_file(first)?);
        }
        if let Err(err) = self.append(records, last_offset) {
            self.abandon();
            return Err(err);
        }
        let open = self.open.as_ref().expect("a file is open after append");
        if open.encoder.size() >= self.rotate.bytes.bytes() {
            return self.close().map(Some);
        }
        Ok(None)
    }

    /// Closes the open file if it is at least `rotate.age` old at `now` (never when
    /// `rotate.age` is not set).
    ///
    /// # Errors
    ///
    /// As for [`finish`](Self::finish).
    pub fn poll_age(&mut self, now: SystemTime) -> Result<Option<Committed>, ParquetSinkError> {
        let (Some(age), Some(open)) = (self.rotate.age, &self.open) else {
            return Ok(None);
        };
        let open_for = now.duration_since(open.opened_at).unwrap_or_default();
        if open_for >= age.get() {
            return self.close().map(Some);
        }
        Ok(None)
    }

    /// The records that did not fit the schema, written since the last call (for the
    /// quarantine); they are in no file.
    pub fn take_rejects(&mut self) -> Vec<Unencodable> {
        std::mem::take(&mut self.rejects)
    }

    /// The schema's counters, with one.
    pub fn typed_stats(&self) -> Option<&std::sync::Arc<crate::sinks::schema::TypedStats>> {
        self.settings.typed_stats()
    }

    /// Closes the open file, if any (on shutdown).
    ///
    /// # Errors
    ///
    /// [`ParquetSinkError::Io`] or [`ParquetSinkError::Encode`] when the footer, the
    /// fsync or the rename fails; the file is abandoned and its `.tmp` removed.
    pub fn finish(&mut self) -> Result<Option<Committed>, ParquetSinkError> {
        if self.open.is_none() {
            return Ok(None);
        }
        self.close().map(Some)
    }

    fn open_file(&self, first_offset: u64) -> Result<OpenFile, ParquetSinkError> {
        let name = format!("{}-{first_offset:020}.parquet", self.prefix);
        let path = self.dir.join(&name);
        let tmp_path = self.dir.join(format!(".{name}.tmp"));
        let file =
            File::create(&tmp_path).map_err(|e| ParquetSinkError::io("create", &tmp_path, e))?;
        let encoder = ParquetEncoder::new(file, &self.settings)
            .map_err(|e| ParquetSinkError::encode(&tmp_path, e))?;
        Ok(OpenFile {
            encoder,
            tmp_path,
            path,
            first_offset,
            last_offset: first_offset,
            opened_at: SystemTime::now(),
        })
    }

    fn append(&mut self, records: &[Record], last_offset: u64) -> Result<(), ParquetSinkError> {
        let open = self.open.as_mut().expect("append runs with a file open");
        open.encoder
            .append(records, &mut self.rejects)
            .map_err(|e| ParquetSinkError::encode(&open.tmp_path, e))?;
        open.last_offset = last_offset;
        Ok(())
    }

    /// Writes the footer, fsyncs, renames, fsyncs the directory.
    fn close(&mut self) -> Result<Committed, ParquetSinkError> {
        let open = self.open.take().expect("close runs with a file open");
        let OpenFile {
            first_offset,
            last_offset,
            ..
        } = open;
        let rows = open.encoder.rows();
        let tmp_path = open.tmp_path.clone();
        let result = (|| {
            let file = open
                .encoder
                .finish(&self.footer.get(), first_offset, last_offset)
                .map_err(|e| ParquetSinkError::encode(&tmp_path, e))?;
            file.sync_all()
                .map_err(|e| ParquetSinkError::io("fsync", &tmp_path, e))?;
            let bytes = file
                .metadata()
                .map_err(|e| ParquetSinkError::io("stat", &tmp_path, e))?
                .len();
            drop(file);
            fs::rename(&tmp_path, &open.path)
                .map_err(|e| ParquetSinkError::io("rename", &tmp_path, e))?;
            sync_dir(&self.dir)?;
            Ok(bytes)
        })();
        match result {
            Ok(bytes) => {
                self.next_first_offset = Some(last_offset.saturating_add(1));
                Ok(Committed {
                    path: open.path,
                    through_offset: last_offset,
                    rows,
                    bytes,
                })
            }
            Err(err) => {
                // Best effort: the error being returned is the one that matters.
                let _ = fs::remove_file(&tmp_path);
                self.rewind_to(first_offset);
                Err(err)
            }
        }
    }

    /// Drops the open file after a failed write and removes its `.tmp`.
    fn abandon(&mut self) {
        // The abandoned range is sent again: its rejects are found again then.
        self.rejects.clear();
        if let Some(open) = self.open.take() {
            self.rewind_to(open.first_offset);
            let tmp_path = open.tmp_path.clone();
            drop(open);
            // Best effort: the write error is what the caller needs; `new` sweeps
            // leftovers of this prefix on the next start.
            let _ = fs::remove_file(tmp_path);
        }
    }
}

fn remove_stale_tmp_files(dir: &Path, prefix: &str) -> Result<(), ParquetSinkError> {
    let entries = fs::read_dir(dir).map_err(|e| ParquetSinkError::io("list", dir, e))?;
    let stale_prefix = format!(".{prefix}-");
    for entry in entries {
        let entry = entry.map_err(|e| ParquetSinkError::io("list", dir, e))?;
        let name = entry.file_name();
        let Some(name) = name.to_str() else { continue };
        if name.starts_with(&stale_prefix) && name.ends_with(".parquet.tmp") {
            let path = entry.path();
            fs::remove_file(&path).map_err(|e| ParquetSinkError::io("remove stale", &path, e))?;
        }
    }
    Ok(())
}

/// Fsyncs a directory so a rename in it survives a crash.
fn sync_dir(dir: &Path) -> Result<(), ParquetSinkError> {
    File::open(dir)
        .and_then(|d| d.sync_all())
        .map_err(|e| ParquetSinkError::io("fsync directory", dir, e))
}
