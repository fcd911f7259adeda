//! The WAL's reserve on a filesystem it shares with a sink. The WAL keeps
//! [`weir_wal::FS_RESERVE`] of its filesystem free and stops appending short of it; a
//! sink writing files on the same filesystem (a Parquet lake under the data directory)
//! must not take that room, or the WAL could no longer append, the sink's cursor could
//! no longer release it, and the pipeline would retry ENOSPC for ever. So such a sink
//! checks, before it writes, that its write leaves the reserve free: if not, it waits
//! (the driver retries the batch, the sink shows `failed` with the reason) until room
//! returns, without writing a byte into the reserve.

use std::os::unix::fs::MetadataExt as _;
use std::path::{Path, PathBuf};

use weir_wal::FS_RESERVE;

/// A sink's directory on the WAL's filesystem: checked before each write.
#[derive(Debug, Clone)]
pub struct WalReserve {
    dir: PathBuf,
}

impl WalReserve {
    /// For a sink writing under `dir`: `Some` when `dir` (or its nearest existing
    /// ancestor) is on the same filesystem as the WAL's directory `wal_dir`.
    pub fn for_dir(wal_dir: &Path, dir: &Path) -> Option<Self> {
        let device = |path: &Path| {
            path.ancestors()
                .find_map(|p| std::fs::metadata(p).ok())
                .map(|m| m.dev())
        };
        (device(wal_dir)? == device(dir)?).then(|| WalReserve {
            dir: dir.to_path_buf(),
        })
    }

    /// The sink's directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Whether `bytes` more may be written under the directory: `Err` with the reason
    /// when they would leave less than the WAL's reserve free. A filesystem that cannot
    /// be measured does not stop the write (its own errors will say what is wrong).
    pub fn check(&self, bytes: u64) -> Result<(), String> {
        let Some(free) = self
            .dir
            .ancestors()
            .find_map(|p| rustix::fs::statvfs(p).ok())
            .map(|s| s.f_bavail.saturating_mul(s.f_frsize))
        else {
            return Ok(());
        };
        if free >= bytes.saturating_add(FS_RESERVE) {
            return Ok(());
        }
        Err(format!(
            "{free} bytes free and the sink needs up to {bytes}: the WAL on the same \
             filesystem keeps its last {FS_RESERVE} bytes, so the sink waits for room \
             (free space on that filesystem, or move the sink's path to another one)"
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_directory_on_the_wals_filesystem_is_checked_and_another_is_not() {
        let dir = tempfile::tempdir().unwrap();
        let wal = dir.path().join("wal");
        std::fs::create_dir_all(&wal).unwrap();
        // Not created yet: its nearest existing ancestor decides.
        let reserve = WalReserve::for_dir(&wal, &dir.path().join("lake/x")).expect("same fs");
        assert!(reserve.check(0).is_ok(), "a fresh temp dir has room");
        let err = reserve.check(u64::MAX / 2).unwrap_err();
        assert!(err.contains("keeps its last"), "{err}");
        // /proc is another filesystem than any temp dir.
        assert!(WalReserve::for_dir(&wal, Path::new("/proc")).is_none());
    }
}
