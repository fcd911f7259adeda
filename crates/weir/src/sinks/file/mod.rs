//! The `file` sink: NDJSON files under `path`, rotated by `rotate.bytes` and
//! `rotate.age`.
//!
//! The file being written is `<stem>.ndjson.open`; at rotation it is fsynced, renamed to
//! `<stem>.ndjson` and the directory fsynced. Every batch is written and fsynced
//! (`sync_data`) before the sink reports it durable, so the cursor never passes data
//! that is not on disk. A write that fails (a full disk) is cut off again
//! (`set_len` back to the whole batches before it), and the retry continues in the same
//! file: a closed file never ends in a torn line, and an outage leaves no file per
//! retry; a file that never got a line is removed, not closed. An `.open` file left by
//! a crash is cut after its last whole line and renamed at open (removed if empty); the
//! records after the last committed cursor are written again (at-least-once).
//!
//! Records whose payload is neither JSON nor UTF-8 cannot be written as NDJSON; they are
//! reported as [`Unencodable`](super::Unencodable).

mod config;
mod core;
mod shell;
#[cfg(test)]
mod tests;

pub use self::config::FileSinkConfig;
pub use self::core::{DONE_SUFFIX, OPEN_SUFFIX, Rotation, file_stem};
pub use self::shell::FileSink;
