//! The sink's journal: the boundaries, keys and upload ids of the objects it is
//! writing, durable before the store sees them.
//!
//! One JSON line per event, appended and fsynced:
//! - `{"first":F,"key":K,"upload":ID,"shape":S}` when a multipart upload starts;
//! - `{"first":F,"key":K,"last":L,"shape":S}` when an object is closed, before its PUT
//!   or its CompleteMultipartUpload.
//!
//! With a `layout`, each line also has `"partition":P`, the folders of the object's
//! records. An object holds the records of its partition from `first` through `last`:
//! objects of different partitions interleave in the WAL, and a replay puts each record
//! back in the object of its partition whose range holds it. Without a layout there is
//! one partition (no `partition` in the lines) and objects are contiguous ranges.
//!
//! `S` is the [`Shape`] of the config that wrote the line: a hash of each key that
//! shapes the object's bytes or its name. Lines written before it existed have none;
//! they are taken as written by the current config.
//!
//! After a crash the sink reads it back ([`Journal::open`]): every object recorded with
//! its `last` is cut again at exactly that boundary and under the same key, so it is
//! overwritten rather than duplicated, even when it had completed but the cursor had
//! not yet moved past it; every recorded upload is aborted (a completed one is simply
//! gone). Entries the committed cursor has passed are dropped when the journal is
//! rewritten ([`Journal::compact`]).

use std::collections::BTreeMap;
use std::fs::{self, File, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::shape::Shape;

/// The journal's file name in the sink's state directory.
pub const JOURNAL_FILE: &str = "object_store.journal";

/// What the journal knows of one object, by its first offset.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Recorded {
    /// Its key.
    pub key: String,
    /// Its partition (empty without a layout).
    pub partition: String,
    /// Its multipart upload, if one was started.
    pub upload: Option<String>,
    /// Its last offset, once it was closed.
    pub last: Option<u64>,
    /// The shape of the config that recorded it (none from a journal older than
    /// shapes).
    pub shape: Option<Shape>,
}

#[derive(Debug, Serialize, Deserialize)]
struct Line {
    first: u64,
    key: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    partition: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    upload: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    last: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    shape: Option<Shape>,
}

/// An open journal (blocking I/O: call it on a blocking thread).
#[derive(Debug)]
pub struct Journal {
    path: PathBuf,
    file: File,
    /// The shape stamped on every line appended.
    shape: Shape,
    /// Lines appended since the last rewrite.
    lines: u64,
}

fn io(action: &str, path: &Path, e: std::io::Error) -> String {
    format!(
        "object store journal: cannot {action} {}: {e}",
        path.display()
    )
}

impl Journal {
    /// Opens (creating) the journal in `dir` and reads back what it records; lines
    /// appended from now on carry `shape`. A torn last line (a crash while appending)
    /// is ignored: nothing was sent for it.
    ///
    /// # Errors
    ///
    /// What could not be created, read or parsed, with the path.
    pub fn open(dir: &Path, shape: Shape) -> Result<(Journal, BTreeMap<u64, Recorded>), String> {
        fs::create_dir_all(dir).map_err(|e| io("create", dir, e))?;
        let path = dir.join(JOURNAL_FILE);
        let text = match fs::read(&path) {
            Ok(bytes) => bytes,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Vec::new(),
            Err(e) => return Err(io("read", &path, e)),
        };
        let mut recorded: BTreeMap<u64, Recorded> = BTreeMap::new();
        let complete = text.iter().rposition(|&b| b == b'\n').map_or(0, |i| i + 1);
        let mut lines = 0;
        for (n, line) in text[..complete].split(|&b| b == b'\n').enumerate() {
            if line.is_empty() {
                continue;
            }
            let line: Line = serde_json::from_slice(line).map_err(|e| {
                format!(
                    "object store journal {} line {}: {e}; the file is damaged: move it away to start without it (objects may then be written twice)",
                    path.display(),
                    n + 1
                )
            })?;
            lines += 1;
            let entry = recorded.entry(line.first).or_default();
            entry.key = line.key;
            entry.partition = line.partition;
            if line.upload.is_some() {
                entry.upload = line.upload;
            }
            if line.last.is_some() {
                entry.last = line.last;
            }
            if line.shape.is_some() {
                entry.shape = line.shape;
            }
        }
        let file = OpenOptions::new()
            .create(true)
            .append(true)
            .open(&path)
            .map_err(|e| io("open", &path, e))?;
        let mut journal = Journal {
            path,
            file,
            shape,
            lines,
        };
        if complete < text.len() {
            tracing::warn!(
                "object store journal {}: ignoring a torn last line of {} bytes (a crash while it was written)",
                journal.path.display(),
                text.len() - complete
            );
            // Rewritten without it, so that the next line starts on its own.
            journal.rewrite(&recorded)?;
        }
        Ok((journal, recorded))
    }

    /// Records that a multipart upload `upload` started for the object at `first`.
    ///
    /// # Errors
    ///
    /// The write or the fsync failed.
    pub fn started(
        &mut self,
        first: u64,
        partition: &str,
        key: &str,
        upload: &str,
    ) -> Result<(), String> {
        self.append(&Line {
            first,
            key: key.to_owned(),
            partition: partition.to_owned(),
            upload: Some(upload.to_owned()),
            last: None,
            shape: Some(self.shape.clone()),
        })
    }

    /// Records that the object at `first` ends at `last` (before it is completed).
    ///
    /// # Errors
    ///
    /// The write or the fsync failed.
    pub fn closed(
        &mut self,
        first: u64,
        partition: &str,
        key: &str,
        last: u64,
    ) -> Result<(), String> {
        self.append(&Line {
            first,
            key: key.to_owned(),
            partition: partition.to_owned(),
            upload: None,
            last: Some(last),
            shape: Some(self.shape.clone()),
        })
    }

    /// Its path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The shape stamped on the lines appended.
    pub fn shape(&self) -> &Shape {
        &self.shape
    }

    /// Lines appended since the journal was last rewritten.
    pub fn lines(&self) -> u64 {
        self.lines
    }

    /// Rewrites the journal with `recorded` only (write, fsync, rename, fsync the
    /// directory).
    ///
    /// # Errors
    ///
    /// A step failed; the old journal is then still in place.
    pub fn rewrite(&mut self, recorded: &BTreeMap<u64, Recorded>) -> Result<(), String> {
        let dir = self.path.parent().unwrap_or(Path::new("."));
        let tmp = dir.join(format!(".{JOURNAL_FILE}.tmp"));
        let mut text = Vec::new();
        for (&first, r) in recorded {
            let line = Line {
                first,
                key: r.key.clone(),
                partition: r.partition.clone(),
                upload: r.upload.clone(),
                last: r.last,
                shape: r.shape.clone(),
            };
            serde_json::to_writer(&mut text, &line).expect("a journal line serializes");
            text.push(b'\n');
        }
        let mut file = File::create(&tmp).map_err(|e| io("create", &tmp, e))?;
        file.write_all(&text).map_err(|e| io("write", &tmp, e))?;
        file.sync_all().map_err(|e| io("fsync", &tmp, e))?;
        fs::rename(&tmp, &self.path).map_err(|e| io("rename", &tmp, e))?;
        File::open(dir)
            .and_then(|d| d.sync_all())
            .map_err(|e| io("fsync", dir, e))?;
        self.file = OpenOptions::new()
            .append(true)
            .open(&self.path)
            .map_err(|e| io("open", &self.path, e))?;
        self.lines = recorded.len() as u64;
        Ok(())
    }

    /// Drops from `recorded` the objects wholly below `committed` (the cursor has
    /// passed them) and rewrites the journal with the rest.
    ///
    /// # Errors
    ///
    /// As [`Journal::rewrite`].
    pub fn compact(
        &mut self,
        recorded: &mut BTreeMap<u64, Recorded>,
        committed: u64,
    ) -> Result<(), String> {
        // An object the cursor has passed was stored: its upload completed.
        recorded.retain(|&first, r| r.last.map_or(first >= committed, |last| last >= committed));
        self.rewrite(recorded)
    }

    fn append(&mut self, line: &Line) -> Result<(), String> {
        let mut text = serde_json::to_vec(line).expect("a journal line serializes");
        text.push(b'\n');
        self.file
            .write_all(&text)
            .map_err(|e| io("append to", &self.path, e))?;
        self.file
            .sync_data()
            .map_err(|e| io("fsync", &self.path, e))?;
        self.lines += 1;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn what_is_recorded_is_read_back_and_a_torn_line_is_ignored() {
        let dir = tempfile::tempdir().unwrap();
        {
            let (mut j, recorded) = Journal::open(dir.path(), Shape::default()).unwrap();
            assert!(recorded.is_empty());
            j.started(0, "", "a/0", "up-1").unwrap();
            j.closed(0, "", "a/0", 99).unwrap();
            j.closed(100, "p=1", "a/100", 150).unwrap();
            j.started(151, "", "a/151", "up-2").unwrap();
        }
        let path = dir.path().join(JOURNAL_FILE);
        let mut text = fs::read(&path).unwrap();
        text.extend_from_slice(b"{\"first\":200,\"ke");
        fs::write(&path, text).unwrap();

        let (mut j, recorded) = Journal::open(dir.path(), Shape::default()).unwrap();
        assert_eq!(recorded.len(), 3);
        assert_eq!(
            recorded[&0],
            Recorded {
                key: "a/0".into(),
                partition: String::new(),
                upload: Some("up-1".into()),
                last: Some(99),
                shape: Some(Shape::default()),
            }
        );
        assert_eq!(recorded[&100].last, Some(150));
        assert_eq!(recorded[&100].partition, "p=1");
        assert_eq!(recorded[&100].upload, None);
        assert_eq!(recorded[&151].last, None);
        // The torn line is gone: the next append starts a line of its own.
        j.closed(151, "", "a/151", 160).unwrap();
        let (_, again) = Journal::open(dir.path(), Shape::default()).unwrap();
        assert_eq!(again[&151].last, Some(160));
    }

    #[test]
    fn compaction_keeps_what_the_cursor_has_not_passed() {
        let dir = tempfile::tempdir().unwrap();
        let (mut j, _) = Journal::open(dir.path(), Shape::default()).unwrap();
        j.closed(0, "", "k0", 9).unwrap();
        j.closed(10, "", "k10", 19).unwrap();
        j.started(20, "", "k20", "up").unwrap();
        let (_, mut recorded) = Journal::open(dir.path(), Shape::default()).unwrap();
        j.compact(&mut recorded, 10).unwrap();
        assert_eq!(recorded.keys().copied().collect::<Vec<_>>(), vec![10, 20]);
        let (_, back) = Journal::open(dir.path(), Shape::default()).unwrap();
        assert_eq!(back, recorded);
        assert_eq!(j.lines(), 2);
    }

    #[test]
    fn each_entry_keeps_the_shape_it_was_recorded_with_and_old_lines_have_none() {
        let dir = tempfile::tempdir().unwrap();
        fs::write(
            dir.path().join(JOURNAL_FILE),
            "{\"first\":0,\"key\":\"k0\",\"last\":9}\n",
        )
        .unwrap();
        let shape: Shape = serde_json::from_str(r#"{"format":"00000000000000aa"}"#).unwrap();
        let (mut j, recorded) = Journal::open(dir.path(), shape.clone()).unwrap();
        assert_eq!(recorded[&0].shape, None, "a line from before shapes");
        j.closed(10, "", "k10", 19).unwrap();
        let (mut j, mut recorded) = Journal::open(dir.path(), Shape::default()).unwrap();
        assert_eq!(recorded[&10].shape.as_ref(), Some(&shape));
        j.compact(&mut recorded, 0).unwrap();
        let (_, back) = Journal::open(dir.path(), Shape::default()).unwrap();
        assert_eq!(back[&0].shape, None);
        assert_eq!(
            back[&10].shape.as_ref(),
            Some(&shape),
            "kept through a rewrite"
        );
    }

    #[test]
    fn a_damaged_line_is_an_error_naming_the_file_and_line() {
        let dir = tempfile::tempdir().unwrap();
        fs::write(
            dir.path().join(JOURNAL_FILE),
            "{\"first\":1,\"key\":\"k\"}\nnot json\n",
        )
        .unwrap();
        let err = Journal::open(dir.path(), Shape::default()).unwrap_err();
        assert!(
            err.contains("line 2") && err.contains(JOURNAL_FILE),
            "{err}"
        );
    }
}
