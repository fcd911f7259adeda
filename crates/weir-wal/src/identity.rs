//! The WAL's identity: a random id created with the WAL directory and kept in it
//! (`wal.id`).
//!
//! Offsets start at 0 in every WAL, so an offset names a record only together with the
//! WAL it belongs to: two weir instances writing to one bucket, or a WAL directory
//! recreated after a disk loss, would otherwise produce the same object names. Sinks
//! that name what they write after offsets put this id next to them.

use std::fs::{self, File};
use std::io::{ErrorKind, Write};
use std::path::Path;

use crate::error::OpenError;

/// The file in the WAL directory that holds the id.
pub const ID_FILE: &str = "wal.id";

/// Hex digits of an id (64 random bits).
const ID_LEN: usize = 16;

/// Reads the WAL's id, creating it (fsynced, then the directory) when the directory
/// has none. Called with the directory lock held.
pub(crate) fn load_or_create(dir: &Path) -> Result<String, OpenError> {
    let path = dir.join(ID_FILE);
    match fs::read_to_string(&path) {
        Ok(text) => {
            let id = text.trim();
            if is_valid(id) {
                Ok(id.to_owned())
            } else {
                Err(OpenError::io(
                    "reading the WAL id in",
                    &path,
                    std::io::Error::new(
                        ErrorKind::InvalidData,
                        format!(
                            "expected {ID_LEN} lowercase hex digits, found {:?}; restore the file or remove it to give this WAL a new id",
                            truncate(id)
                        ),
                    ),
                ))
            }
        }
        Err(e) if e.kind() == ErrorKind::NotFound => create(dir),
        Err(e) => Err(OpenError::io("reading the WAL id in", &path, e)),
    }
}

fn create(dir: &Path) -> Result<String, OpenError> {
    let mut raw = [0u8; ID_LEN / 2];
    getrandom::fill(&mut raw).map_err(|e| {
        OpenError::io(
            "drawing a WAL id for",
            dir,
            std::io::Error::other(e.to_string()),
        )
    })?;
    let id: String = raw.iter().map(|b| format!("{b:02x}")).collect();
    let tmp = dir.join(format!(".{ID_FILE}.tmp"));
    let path = dir.join(ID_FILE);
    let write = || -> std::io::Result<()> {
        let mut file = File::create(&tmp)?;
        file.write_all(format!("{id}\n").as_bytes())?;
        file.sync_all()?;
        fs::rename(&tmp, &path)?;
        File::open(dir)?.sync_all()
    };
    write().map_err(|e| OpenError::io("writing the WAL id in", &path, e))?;
    Ok(id)
}

fn is_valid(id: &str) -> bool {
    id.len() == ID_LEN && id.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
}

fn truncate(text: &str) -> String {
    text.chars().take(40).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_id_is_created_once_and_kept() {
        let dir = tempfile::tempdir().unwrap();
        let id = load_or_create(dir.path()).unwrap();
        assert!(is_valid(&id), "{id}");
        assert_eq!(load_or_create(dir.path()).unwrap(), id);
        let other = tempfile::tempdir().unwrap();
        assert_ne!(load_or_create(other.path()).unwrap(), id);
        assert!(!dir.path().join(format!(".{ID_FILE}.tmp")).exists());
    }

    #[test]
    fn a_damaged_id_is_an_error_not_a_new_identity() {
        let dir = tempfile::tempdir().unwrap();
        fs::write(dir.path().join(ID_FILE), "not an id\n").unwrap();
        let err = load_or_create(dir.path()).unwrap_err().to_string();
        assert!(err.contains("wal.id") && err.contains("remove it"), "{err}");
    }
}
