//! The `file` sink: NDJSON files under `path`, rotated by `rotate.bytes` and
//! `rotate.age`.
//!
//! The file being written is `<stem>.ndjson.open`; at rotation it is fsynced, renamed to
//! `<stem>.ndjson` and the directory fsynced. Every batch is written and fsynced
//! (`sync_data`) before the sink reports it durable, so the cursor never passes data
//! that is not on disk. An `.open` file left by a crash is renamed at open: it holds
//! only whole batches that were synced, possibly followed by a torn last line, and the
//! records after the last committed cursor are written again (at-least-once).
//!
//! Records whose payload is neither JSON nor UTF-8 cannot be written as NDJSON; they are
//! reported as [`Unencodable`](super::Unencodable).

mod config;
mod core;
mod shell;

pub use self::config::FileSinkConfig;
pub use self::core::{DONE_SUFFIX, OPEN_SUFFIX, Rotation, file_stem};
pub use self::shell::FileSink;
