//! The `file` source: lines of a file (`path`), or of standard input (`path = "-"`).
//!
//! Each non-blank line is one record (payload: the line without its newline). Lines
//! longer than `max_line_bytes` are skipped whole and counted as refused. A dedicated
//! reader thread does the blocking reads and hands batches (`batch_size` lines,
//! `batch_bytes` bytes) over a channel of one batch, so it waits when the pipeline
//! does: under backpressure the file is simply read later.
//!
//! For a path, the byte position after the last line of each durable batch is saved in
//! `<data_dir>/sources/<name>.position` (written to a temporary file, fsynced, renamed,
//! directory fsynced), and a restart resumes there: nothing durable is read twice, and
//! at most the batches in flight at a crash are read again. If the file is now shorter
//! than the saved position (truncated or replaced), it is read from the start. At the
//! end of the file the source waits for more lines (like `tail -f`). Standard input
//! has no position; at its end the source shows `stopped` (the pipeline keeps running).

mod config;
mod core;
mod shell;

pub use self::config::FileSourceConfig;
pub use self::core::{Line, LineSplitter};
pub use self::shell::run;
