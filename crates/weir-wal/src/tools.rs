//! Offline tools behind `weir wal inspect`, `weir wal verify` and `weir wal cursors`.
//!
//! `inspect`, `verify` and [`cursors()`] work on a directory no process has open, and
//! change nothing: no lock is taken for writing, nothing is truncated or quarantined. If
//! a daemon does have the WAL open, the figures may move while they are read (the
//! report says so). Removing or renaming a cursor file takes the directory's lock
//! ([`lock`]) first, so it is refused while a daemon runs.

mod cursors;

pub use self::cursors::{CursorLag, CursorsReport, DirLock, cursor_names, cursors, lock};

use std::fmt;
use std::fs::{self, File};
use std::path::{Path, PathBuf};

use crate::format::decode_cursor;
use crate::recovery::{CURSOR_DIR, list_segments};
use crate::segment::{scan_segment, segment_path};

/// Why a tool could not run at all.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ToolError {
    /// The directory is missing or unreadable.
    #[error("reading WAL directory {path}: {source}")]
    Io {
        /// The path.
        path: PathBuf,
        /// The OS error.
        source: std::io::Error,
    },
    /// No segment files: not a WAL directory.
    #[error("{0} holds no WAL segment (*.seg); is it the WAL directory?")]
    NotAWal(PathBuf),
    /// A process holds the WAL open, so its cursor files may not be changed.
    #[error(
        "the WAL directory {0} is open by a running weir (its LOCK is held); stop it first: \
         a running daemon keeps its cursors in memory and writes them back"
    )]
    Locked(PathBuf),
    /// No cursor file of that name.
    #[error("no cursor named {name:?} in {}; {}", dir.display(), listed(existing))]
    NoCursor {
        /// The `cursors/` directory.
        dir: PathBuf,
        /// The name asked for.
        name: String,
        /// The cursors there.
        existing: Vec<String>,
    },
    /// The target of a rename already has a cursor file.
    #[error("a cursor named {name:?} already exists in {}", dir.display())]
    CursorExists {
        /// The `cursors/` directory.
        dir: PathBuf,
        /// The name.
        name: String,
    },
    /// A name no cursor can have (a cursor's file is named after it).
    #[error(
        "{0:?} is not a cursor name: 1 to 64 characters of A-Z a-z 0-9 _ - . (not starting with .)"
    )]
    BadName(String),
}

/// `cursors there: a, b`, or `there are none`.
fn listed(names: &[String]) -> String {
    if names.is_empty() {
        "there are none".to_owned()
    } else {
        format!("cursors there: {}", names.join(", "))
    }
}

/// One segment as found on disk.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct SegmentInfo {
    /// File name.
    pub name: String,
    /// First offset (from the name).
    pub first: u64,
    /// Valid records found.
    pub records: u64,
    /// File length.
    pub bytes: u64,
    /// Append time of the last valid record (ms since the UNIX epoch).
    pub last_time_ms: Option<u64>,
    /// `None` when every frame checks out; otherwise what is wrong.
    pub problem: Option<String>,
}

/// A cursor file as found on disk.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct CursorInfo {
    /// The cursor's name.
    pub name: String,
    /// Its committed offset, `None` if the file is unreadable.
    pub offset: Option<u64>,
    /// Records from the offset to the end of the log.
    pub lag_records: Option<u64>,
}

/// What `weir wal inspect` prints.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct InspectReport {
    /// The directory.
    pub dir: PathBuf,
    /// Whether another process holds the WAL open.
    pub in_use: bool,
    /// Segments in offset order.
    pub segments: Vec<SegmentInfo>,
    /// Files in `quarantine/`.
    pub quarantined: Vec<String>,
    /// Cursors.
    pub cursors: Vec<CursorInfo>,
    /// First offset on disk.
    pub start: u64,
    /// End of the valid records (next offset).
    pub end: u64,
    /// Bytes of segment files.
    pub disk_bytes: u64,
}

/// What `weir wal verify` prints.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct VerifyReport {
    /// The inspection it is based on.
    pub inspect: InspectReport,
    /// Every problem: segment, offset and what is wrong.
    pub problems: Vec<String>,
}

impl VerifyReport {
    /// No corruption found.
    pub fn is_ok(&self) -> bool {
        self.problems.is_empty()
    }
}

/// Scans every segment and cursor of the WAL in `dir` (read-only).
///
/// # Errors
///
/// [`ToolError`] if the directory cannot be read or holds no segment.
pub fn inspect(dir: &Path) -> Result<InspectReport, ToolError> {
    let io = |source| ToolError::Io {
        path: dir.to_owned(),
        source,
    };
    fs::read_dir(dir).map_err(io)?;
    let firsts = list_segments(dir).map_err(|e| ToolError::Io {
        path: dir.to_owned(),
        source: std::io::Error::other(e.to_string()),
    })?;
    if firsts.is_empty() {
        return Err(ToolError::NotAWal(dir.to_owned()));
    }
    let mut segments = Vec::with_capacity(firsts.len());
    let mut disk_bytes = 0;
    for (i, &first) in firsts.iter().enumerate() {
        let path = segment_path(dir, first);
        let scan = scan_segment(&path).map_err(io)?;
        disk_bytes += scan.file_len;
        let last = i + 1 == firsts.len();
        let problem = match (&scan.header, &scan.problem) {
            (Err(e), _) => Some(format!("header: {e}")),
            (Ok(h), _) if h.first_offset != first => Some(format!(
                "header says first offset {}, file name says {first}",
                h.first_offset
            )),
            (Ok(_), Some(p)) => Some(format!(
                "offset {} (byte {}): {p}{}",
                first + scan.records,
                scan.good_len,
                if last {
                    format!(
                        "; recovery will truncate {} bytes",
                        scan.file_len - scan.good_len
                    )
                } else {
                    String::new()
                }
            )),
            (Ok(_), None) => match firsts.get(i + 1) {
                Some(&next) if first + scan.records != next => Some(format!(
                    "holds offsets {first}..{} but the next segment starts at {next}",
                    first + scan.records
                )),
                _ => None,
            },
        };
        segments.push(SegmentInfo {
            name: path
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_default(),
            first,
            records: scan.records,
            bytes: scan.file_len,
            last_time_ms: scan.last_time_ms,
            problem,
        });
    }
    let start = segments.first().map_or(0, |s| s.first);
    let end = segments.last().map_or(0, |s| s.first + s.records);
    let mut quarantined = Vec::new();
    if let Ok(entries) = fs::read_dir(dir.join("quarantine")) {
        for e in entries.flatten() {
            quarantined.push(e.file_name().to_string_lossy().into_owned());
        }
    }
    quarantined.sort();
    let mut cursors = Vec::new();
    if let Ok(entries) = fs::read_dir(dir.join(CURSOR_DIR)) {
        for e in entries.flatten() {
            let file_name = e.file_name().to_string_lossy().into_owned();
            let Some(name) = file_name.strip_suffix(".cursor") else {
                continue;
            };
            let offset = read_small(&e.path()).and_then(|b| decode_cursor(&b));
            cursors.push(CursorInfo {
                name: name.to_owned(),
                offset,
                lag_records: offset.map(|o| end.saturating_sub(o)),
            });
        }
    }
    cursors.sort_by(|a, b| a.name.cmp(&b.name));
    Ok(InspectReport {
        dir: dir.to_owned(),
        in_use: in_use(dir),
        segments,
        quarantined,
        cursors,
        start,
        end,
        disk_bytes,
    })
}

/// Checks every CRC of every segment and every cursor file (read-only).
///
/// # Errors
///
/// [`ToolError`] if the directory cannot be read or holds no segment.
pub fn verify(dir: &Path) -> Result<VerifyReport, ToolError> {
    let inspect = inspect(dir)?;
    let mut problems = Vec::new();
    for s in &inspect.segments {
        if let Some(p) = &s.problem {
            problems.push(format!("{}: {p}", dir.join(&s.name).display()));
        }
    }
    for c in &inspect.cursors {
        if c.offset.is_none() {
            problems.push(format!(
                "{}: cursor file unreadable (bad magic, version or CRC)",
                dir.join(CURSOR_DIR)
                    .join(format!("{}.cursor", c.name))
                    .display()
            ));
        }
    }
    Ok(VerifyReport { inspect, problems })
}

/// Reads a file of at most a few bytes (a cursor file), refusing anything larger.
fn read_small(path: &Path) -> Option<Vec<u8>> {
    use std::io::Read;
    let mut buf = Vec::new();
    File::open(path).ok()?.take(64).read_to_end(&mut buf).ok()?;
    Some(buf)
}

/// Whether another process holds the WAL's lock.
fn in_use(dir: &Path) -> bool {
    let Ok(file) = File::open(dir.join("LOCK")) else {
        return false;
    };
    match file.try_lock_shared() {
        Ok(()) => {
            let _ = file.unlock();
            false
        }
        Err(_) => true,
    }
}

impl fmt::Display for InspectReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(f, "WAL {}", self.dir.display())?;
        if self.in_use {
            writeln!(f, "  (open by another process: figures may be moving)")?;
        }
        writeln!(
            f,
            "  offsets {}..{} ({} records), {} segments, {} bytes on disk",
            self.start,
            self.end,
            self.end - self.start,
            self.segments.len(),
            self.disk_bytes
        )?;
        writeln!(
            f,
            "  {:<26} {:>20} {:>10} {:>12}  status",
            "segment", "first offset", "records", "bytes"
        )?;
        for s in &self.segments {
            writeln!(
                f,
                "  {:<26} {:>20} {:>10} {:>12}  {}",
                s.name,
                s.first,
                s.records,
                s.bytes,
                s.problem.as_deref().unwrap_or("ok")
            )?;
        }
        if self.cursors.is_empty() {
            writeln!(f, "  no cursors")?;
        }
        for c in &self.cursors {
            match (c.offset, c.lag_records) {
                (Some(o), Some(lag)) => writeln!(
                    f,
                    "  cursor {:<20} offset {o:>12}  lag {lag} records",
                    c.name
                )?,
                _ => writeln!(f, "  cursor {:<20} unreadable", c.name)?,
            }
        }
        for q in &self.quarantined {
            writeln!(f, "  quarantined: {q}")?;
        }
        Ok(())
    }
}

impl fmt::Display for VerifyReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let records: u64 = self.inspect.segments.iter().map(|s| s.records).sum();
        if self.is_ok() {
            writeln!(
                f,
                "ok: {} segments, {records} records, every CRC matches",
                self.inspect.segments.len()
            )
        } else {
            writeln!(
                f,
                "CORRUPT: {} problem(s) in {} segments ({records} good records):",
                self.problems.len(),
                self.inspect.segments.len()
            )?;
            for p in &self.problems {
                writeln!(f, "  {p}")?;
            }
            Ok(())
        }
    }
}
