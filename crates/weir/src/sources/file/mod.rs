//! The `file` source: the lines of the files a path or glob matches, followed as they
//! grow and across rotations, or of standard input (`path = "-"`).
//!
//! - **Finding files** ([`paths`], [`watch`]): `path` is a file or a glob; `exclude`
//!   leaves paths out, and rotated names (`*.1`, `*.gz`) are left out unless `path`
//!   names them. New files are found by inotify at once, and by listing the glob's base
//!   every `scan_interval`.
//! - **Identity** ([`identity`]): a file is its device, inode and a fingerprint of its
//!   first `fingerprint_bytes`; a reused inode with other first bytes is a new file.
//! - **Reading** ([`tailer`], [`files`]): one thread, at most `max_open_files` open,
//!   each read in turn; files past the limit wait, oldest first. A line is taken only
//!   once its newline is read ([`core`]); a partial last line waits (`partial_flush`),
//!   and a line longer than `max_line_bytes` sends its head to the quarantine.
//! - **Rotation**: a renamed or deleted file is read to its end through its open
//!   descriptor and released after `rotate_wait` without growth; the new file at the
//!   path is read from its start. A truncation (copytruncate) is logged, counted, and
//!   the file is read again from byte 0, the rest of its old content from the copy
//!   when one is found beside it.
//! - **Records** ([`multiline`], [`format`], [`chunk`]): multi-line records are
//!   assembled, the `format` turns each into a payload, and the record carries
//!   `file.path`, `file.name` and `host`, keyed by the file's path.
//! - **Positions** ([`positions`]): one fsynced store per source, keyed by
//!   fingerprint; a file's position moves only past lines durable in the WAL (or the
//!   quarantine), so a restart reads again at most what was in flight. Rotation while
//!   weir is stopped is found by fingerprint at start.
//! - **Backpressure**: the thread waits for the channel to the WAL: under
//!   backpressure the files are simply read later; nothing is dropped.
//!
//! `/status` → `sources.NAME.files` lists each file ([`status`]).

mod chunk;
mod config;
mod core;
mod files;
mod format;
mod identity;
mod logfmt;
mod multiline;
mod paths;
mod positions;
mod shell;
mod status;
mod stdin;
mod tailer;
mod watch;

pub use self::config::{FileSourceConfig, ReadFrom};
pub use self::core::{Lines, Piece};
pub use self::format::{FieldType, Format, FormatKind, OnMismatch, OnNotJson};
pub use self::multiline::{MultilineConfig, Rule};
pub use self::status::{FileState, FileStatus};
