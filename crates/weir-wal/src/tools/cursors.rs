//! Cursor files offline: list them with how far behind the log's end each one is, and,
//! under the directory's lock, remove or rename one (`weir wal cursors`, a sink's
//! `rename_from`).
//!
//! The lag is read from the files alone, as the WAL itself counts it: the log's end from
//! a scan of the last segment (the only one read), the records in every other segment
//! from the file names, and a cursor's bytes behind as the bytes of the segments after
//! the one it points into plus that one's share (its bytes × the records left of it ÷
//! its records). Nothing is changed.

use std::fs::{self, File};
use std::io::BufReader;
use std::path::{Path, PathBuf};

use super::{ToolError, in_use, read_small};
use crate::config::valid_cursor_name;
use crate::format::{FrameReader, SEGMENT_HEADER_LEN, decode_cursor};
use crate::recovery::{CURSOR_DIR, list_segments, lock_dir};
use crate::segment::{READ_BUFFER, read_header, segment_path, sync_dir};

/// One cursor file and how far behind the log's end it is.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct CursorLag {
    /// The cursor's name (a sink's name, in weir).
    pub name: String,
    /// Its committed offset: the next record it reads. `None` if the file is unreadable.
    pub offset: Option<u64>,
    /// Records from its offset to the log's end; `None` when either is unknown.
    pub lag_records: Option<u64>,
    /// Bytes of records from its offset to the log's end (frames and batch marks,
    /// without segment headers), counted as the WAL's `/status` counts a cursor's
    /// `lag_bytes`; all the segments' for a cursor older than the first segment.
    pub lag_bytes: Option<u64>,
}

/// The cursors of a WAL directory, as `weir wal cursors DIR` shows them.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct CursorsReport {
    /// The directory.
    pub dir: PathBuf,
    /// Whether a process holds the WAL open (the figures may be moving).
    pub in_use: bool,
    /// The first offset on disk.
    pub start: u64,
    /// The end of the valid records (the next offset); 0 with no segment.
    pub end: u64,
    /// Every cursor file, by name.
    pub cursors: Vec<CursorLag>,
}

/// The names of the cursor files in the WAL directory `dir`, sorted; none when it has
/// no `cursors/` directory. Reads no file.
///
/// # Errors
///
/// [`ToolError::Io`] if `cursors/` exists but cannot be listed.
pub fn cursor_names(dir: &Path) -> Result<Vec<String>, ToolError> {
    let cursors = dir.join(CURSOR_DIR);
    let entries = match fs::read_dir(&cursors) {
        Ok(entries) => entries,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(source) => {
            return Err(ToolError::Io {
                path: cursors,
                source,
            });
        }
    };
    let mut names: Vec<String> = entries
        .flatten()
        .filter_map(|e| {
            e.file_name()
                .to_str()
                .and_then(|n| n.strip_suffix(".cursor"))
                .map(str::to_owned)
        })
        .collect();
    names.sort();
    Ok(names)
}

/// Every cursor of the WAL in `dir` with its offset and lag (read-only; a daemon may
/// have the WAL open).
///
/// # Errors
///
/// [`ToolError::Io`] if the directory or a segment cannot be read.
pub fn cursors(dir: &Path) -> Result<CursorsReport, ToolError> {
    let io = |path: &Path| {
        let path = path.to_owned();
        move |source| ToolError::Io { path, source }
    };
    fs::read_dir(dir).map_err(io(dir))?;
    let layout = Layout::read(dir)?;
    let mut cursors = Vec::new();
    for name in cursor_names(dir)? {
        let path = dir.join(CURSOR_DIR).join(format!("{name}.cursor"));
        let offset = read_small(&path).and_then(|bytes| decode_cursor(&bytes));
        let (lag_records, lag_bytes) = match (offset, &layout) {
            (Some(offset), Some(layout)) => (
                Some(layout.end.saturating_sub(offset)),
                Some(layout.bytes_behind(offset)),
            ),
            _ => (None, None),
        };
        cursors.push(CursorLag {
            name,
            offset,
            lag_records,
            lag_bytes,
        });
    }
    Ok(CursorsReport {
        dir: dir.to_owned(),
        in_use: in_use(dir),
        start: layout.as_ref().map_or(0, |l| l.firsts[0]),
        end: layout.as_ref().map_or(0, |l| l.end),
        cursors,
    })
}

/// The segments of a log: first offsets, bytes of records in each, and the end.
struct Layout {
    /// Not empty.
    firsts: Vec<u64>,
    /// Bytes after each segment's header; the last segment's up to its last valid
    /// record.
    lens: Vec<u64>,
    end: u64,
}

impl Layout {
    fn read(dir: &Path) -> Result<Option<Layout>, ToolError> {
        let firsts = list_segments(dir).map_err(|e| ToolError::Io {
            path: dir.to_owned(),
            source: std::io::Error::other(e.to_string()),
        })?;
        let Some(&last) = firsts.last() else {
            return Ok(None);
        };
        let io = |path: PathBuf| move |source| ToolError::Io { path, source };
        let mut lens = Vec::with_capacity(firsts.len());
        for &first in &firsts[..firsts.len() - 1] {
            let path = segment_path(dir, first);
            let len = fs::metadata(&path).map_err(io(path))?.len();
            lens.push(len.saturating_sub(SEGMENT_HEADER_LEN));
        }
        let path = segment_path(dir, last);
        let (records, good_len) = frames(&path, last).map_err(io(path))?;
        lens.push(good_len);
        Ok(Some(Layout {
            firsts,
            lens,
            end: last + records,
        }))
    }

    /// Bytes from `offset` to the end: each segment after it whole, the one holding
    /// it by its share of records.
    fn bytes_behind(&self, offset: u64) -> u64 {
        let mut total: u64 = 0;
        for (i, (&first, &bytes)) in self.firsts.iter().zip(&self.lens).enumerate() {
            let end = self.firsts.get(i + 1).copied().unwrap_or(self.end);
            if end <= offset {
                continue;
            }
            if first >= offset {
                total = total.saturating_add(bytes);
            } else {
                let share =
                    u128::from(bytes) * u128::from(end - offset) / u128::from((end - first).max(1));
                total = total.saturating_add(u64::try_from(share).unwrap_or(u64::MAX));
            }
        }
        total
    }
}

/// Walks the frames of the segment at `path` (first offset `first`) up to the first
/// bad byte. Returns the records and their bytes (after the segment's header).
fn frames(path: &Path, first: u64) -> std::io::Result<(u64, u64)> {
    let mut file = File::open(path)?;
    let len = file.metadata()?.len();
    if len < SEGMENT_HEADER_LEN || read_header(&mut file)?.is_err() {
        return Ok((0, 0));
    }
    let body = BufReader::with_capacity(READ_BUFFER, file);
    let mut reader = FrameReader::new(body, len - SEGMENT_HEADER_LEN).at_offset(first);
    let (mut records, mut position) = (0, 0);
    while let Ok(Some(meta)) = reader.next_frame() {
        records += 1;
        position += meta.frame_len;
    }
    Ok((records, position))
}

/// The lock of a WAL directory, held by a tool that changes its cursor files: while it
/// is held, no daemon has the WAL open (one that did would keep its cursors in memory
/// and write them back). Released when dropped.
#[derive(Debug)]
pub struct DirLock {
    dir: PathBuf,
    _file: File,
}

/// Takes the lock of the WAL directory `dir`.
///
/// # Errors
///
/// [`ToolError::Locked`] while a process holds the WAL open; [`ToolError::Io`] if `dir`
/// is not a directory or the lock file cannot be created.
pub fn lock(dir: &Path) -> Result<DirLock, ToolError> {
    if !dir.is_dir() {
        return Err(ToolError::Io {
            path: dir.to_owned(),
            source: std::io::Error::new(std::io::ErrorKind::NotFound, "not a directory"),
        });
    }
    match lock_dir(dir) {
        Ok(file) => Ok(DirLock {
            dir: dir.to_owned(),
            _file: file,
        }),
        Err(crate::OpenError::Locked { .. }) => Err(ToolError::Locked(dir.to_owned())),
        Err(e) => Err(ToolError::Io {
            path: dir.to_owned(),
            source: std::io::Error::other(e.to_string()),
        }),
    }
}

impl DirLock {
    /// The directory locked.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The path of cursor `name`'s file, after checking the name.
    fn cursor_path(&self, name: &str) -> Result<PathBuf, ToolError> {
        if !valid_cursor_name(name) {
            return Err(ToolError::BadName(name.to_owned()));
        }
        Ok(self.dir.join(CURSOR_DIR).join(format!("{name}.cursor")))
    }

    fn no_cursor(&self, name: &str) -> ToolError {
        ToolError::NoCursor {
            dir: self.dir.join(CURSOR_DIR),
            name: name.to_owned(),
            existing: cursor_names(&self.dir).unwrap_or_default(),
        }
    }

    /// Deletes cursor `name`'s file, then fsyncs `cursors/`. Returns the offset it held
    /// (`None` if unreadable).
    ///
    /// # Errors
    ///
    /// [`ToolError::NoCursor`] when there is no such cursor, [`ToolError::BadName`] for a
    /// name no cursor can have, [`ToolError::Io`] if it cannot be removed.
    pub fn remove_cursor(&self, name: &str) -> Result<Option<u64>, ToolError> {
        let path = self.cursor_path(name)?;
        if !path.is_file() {
            return Err(self.no_cursor(name));
        }
        let offset = read_small(&path).and_then(|bytes| decode_cursor(&bytes));
        let io = |path: &Path| {
            let path = path.to_owned();
            move |source| ToolError::Io { path, source }
        };
        fs::remove_file(&path).map_err(io(&path))?;
        let cursors = self.dir.join(CURSOR_DIR);
        sync_dir(&cursors).map_err(io(&cursors))?;
        Ok(offset)
    }

    /// Renames cursor `from`'s file to `to`'s, then fsyncs `cursors/`: the cursor named
    /// `to` starts where `from` was.
    ///
    /// # Errors
    ///
    /// [`ToolError::NoCursor`] when `from` has no file, [`ToolError::CursorExists`] when
    /// `to` has one, [`ToolError::BadName`], [`ToolError::Io`].
    pub fn rename_cursor(&self, from: &str, to: &str) -> Result<(), ToolError> {
        let (source, target) = (self.cursor_path(from)?, self.cursor_path(to)?);
        if !source.is_file() {
            return Err(self.no_cursor(from));
        }
        if target.exists() {
            return Err(ToolError::CursorExists {
                dir: self.dir.join(CURSOR_DIR),
                name: to.to_owned(),
            });
        }
        let io = |path: &Path| {
            let path = path.to_owned();
            move |source| ToolError::Io { path, source }
        };
        fs::rename(&source, &target).map_err(io(&source))?;
        let cursors = self.dir.join(CURSOR_DIR);
        sync_dir(&cursors).map_err(io(&cursors))?;
        Ok(())
    }
}
