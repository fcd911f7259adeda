//! How the file source knows a file: its device and inode, and a fingerprint of its
//! first bytes.
//!
//! The inode follows a file across renames; the fingerprint tells a reused inode from
//! the file that had it (a new file's first bytes differ), and finds a file again when
//! its inode changed (copied elsewhere). A file shorter than `fingerprint_bytes` is
//! fingerprinted whole and again as it grows: the fingerprint records how many bytes
//! it covers, and a longer file matches it when its first that-many bytes hash the
//! same.

use std::fs::File;
use std::os::unix::fs::{FileExt, MetadataExt};

use serde::{Deserialize, Serialize};

/// The hash of a file's first `len` bytes (xxh3, 64 bits).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Fingerprint {
    /// The hash, written as 16 hex digits.
    #[serde(with = "hex64")]
    pub hash: u64,
    /// How many of the file's first bytes it covers.
    pub len: u32,
}

impl Fingerprint {
    /// The fingerprint of `bytes`.
    pub fn of(bytes: &[u8]) -> Self {
        Fingerprint {
            hash: xxhash_rust::xxh3::xxh3_64(bytes),
            len: u32::try_from(bytes.len()).unwrap_or(u32::MAX),
        }
    }

    /// 16 hex digits, for `/status` and logs.
    pub fn hex(&self) -> String {
        format!("{:016x}", self.hash)
    }
}

/// Reads up to `want` bytes from the start of `file` into `buf` (cleared first).
///
/// # Errors
///
/// A failed read.
pub fn read_head(file: &File, want: usize, buf: &mut Vec<u8>) -> std::io::Result<()> {
    buf.clear();
    buf.resize(want, 0);
    let mut filled = 0;
    while filled < want {
        match file.read_at(&mut buf[filled..], filled as u64) {
            Ok(0) => break,
            Ok(n) => filled += n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    buf.truncate(filled);
    Ok(())
}

/// A file's device and inode.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Inode {
    /// `st_dev`.
    pub dev: u64,
    /// `st_ino`.
    pub ino: u64,
}

impl Inode {
    /// Of `metadata`.
    pub fn of(metadata: &std::fs::Metadata) -> Self {
        Inode {
            dev: metadata.dev(),
            ino: metadata.ino(),
        }
    }
}

mod hex64 {
    use serde::{Deserialize, Deserializer, Serializer};

    #[allow(clippy::trivially_copy_pass_by_ref, reason = "serde's signature")]
    pub fn serialize<S: Serializer>(hash: &u64, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&format!("{hash:016x}"))
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<u64, D::Error> {
        let text = String::deserialize(d)?;
        u64::from_str_radix(&text, 16).map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_prefix_is_checked_by_length() {
        let tmp = tempfile::tempdir().unwrap();
        let path = tmp.path().join("f");
        std::fs::write(&path, b"hello world").unwrap();
        let file = File::open(&path).unwrap();
        let mut buf = Vec::new();
        read_head(&file, 5, &mut buf).unwrap();
        assert_eq!(Fingerprint::of(&buf), Fingerprint::of(b"hello"));
        read_head(&file, 1024, &mut buf).unwrap();
        assert_eq!(buf, b"hello world");
        assert_eq!(Fingerprint::of(&buf).len, 11);
        let json = serde_json::to_string(&Fingerprint::of(b"x")).unwrap();
        let back: Fingerprint = serde_json::from_str(&json).unwrap();
        assert_eq!(back, Fingerprint::of(b"x"));
        assert!(json.contains(&Fingerprint::of(b"x").hex()), "{json}");
    }
}
