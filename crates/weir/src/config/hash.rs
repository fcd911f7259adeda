//! The configuration hash: the identity of a configuration, written into every Parquet
//! footer (key `weir.config_hash`) next to the `on_full` choice.

use std::fmt;

use sha2::{Digest, Sha256};

use super::Config;

/// SHA-256 of the canonical serialization of a parsed [`Config`].
///
/// The canonical form is the compact JSON of the typed model with every default filled
/// in: map keys sorted, fields in declaration order, sizes in bytes, durations in
/// humantime form. So formatting, comments, key order, and whether a default is written
/// out or left implicit do not change the hash; any value weir would run with does.
/// Displayed as `sha256:` and the first 16 hex digits.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct ConfigHash([u8; 32]);

impl ConfigHash {
    /// All 64 hex digits.
    pub fn hex(&self) -> String {
        self.0.iter().map(|byte| format!("{byte:02x}")).collect()
    }
}

impl fmt::Display for ConfigHash {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let hex = self.hex();
        write!(f, "sha256:{}", &hex[..16])
    }
}

/// Feeds serialized bytes straight into the hasher.
struct HashWriter<'a>(&'a mut Sha256);

impl std::io::Write for HashWriter<'_> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.update(buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl Config {
    /// The configuration's hash; see [`ConfigHash`].
    pub fn hash(&self) -> ConfigHash {
        let mut hasher = Sha256::new();
        serde_json::to_writer(HashWriter(&mut hasher), self).expect(
            "a Config serializes to JSON: every map key is a string and the writer never fails",
        );
        ConfigHash(hasher.finalize().into())
    }
}
