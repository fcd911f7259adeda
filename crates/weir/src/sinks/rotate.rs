//! `rotate = { bytes, age }`: when a file-writing sink closes its output and starts a
//! new one. Shared by the sinks that write files or objects.

use serde::Serialize;

use crate::keys::{ByteSize, Duration, Section};

/// The rotation age of Parquet files and objects when `rotate.age` is not set.
pub const DEFAULT_ROTATE_AGE: Duration = Duration::secs(300);

/// `rotate = { bytes, age }`: when an output file is closed and a new one started.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Rotate {
    /// Size of an output file. Default 128 MiB.
    pub bytes: ByteSize,
    /// Age of an output file; files are readable only once closed.
    pub age: Option<Duration>,
}

/// Reads `rotate`; `default_age` applies when `rotate.age` is absent.
pub fn parse_rotate(s: &mut Section<'_>, default_age: Option<Duration>) -> Rotate {
    let default = Rotate {
        bytes: ByteSize::mib(128),
        age: default_age,
    };
    let Some(mut t) = s.table("rotate") else {
        return default;
    };
    let rotate = Rotate {
        bytes: t.or("bytes", default.bytes),
        age: t.opt("age").or(default.age),
    };
    t.finish();
    rotate
}
