//! `type = "file"` (a source): its keys, their checks and its bounds.

use std::num::NonZeroU32;
use std::path::PathBuf;

use serde::Serialize;

use super::format::{FieldType, Format};
use super::multiline::MultilineConfig;
use super::paths::Patterns;
use crate::keys::units::string_enum;
use crate::keys::{Bounds, ByteSize, Duration, Section, times};
use crate::sources::SourceKeys;

/// Where a file with no saved position starts at startup.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReadFrom {
    /// Its first byte.
    Beginning,
    /// Its end as found at startup: only lines written later are read.
    End,
}

string_enum!(ReadFrom { "beginning" => Beginning, "end" => End });

/// `type = "file"`: lines of the files a pattern matches, followed as they grow and
/// across rotations, or standard input for `-`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct FileSourceConfig {
    /// A file, a glob (`*`, `?`, `[..]`, `**`), or `-` for standard input.
    pub path: PathBuf,
    /// Globs of paths not to read.
    pub exclude: Vec<String>,
    /// Whether rotated names (`*.1`, `*.gz`, …) are left out unless `path` names them.
    pub exclude_rotated: bool,
    /// How often the directories are listed again, besides notifications.
    pub scan_interval: Duration,
    /// Files open at once (file descriptors); the rest wait, oldest first.
    pub max_open_files: NonZeroU32,
    /// How long a rotated or deleted file is kept open after its last growth.
    pub rotate_wait: Duration,
    /// Bytes of a file's start that identify it (its fingerprint).
    pub fingerprint_bytes: ByteSize,
    /// How long the saved position of a file no longer followed is kept.
    pub forget_after: Duration,
    /// Where a file without a saved position starts, at startup.
    pub read_from: ReadFrom,
    /// Whether a file whose first KiB holds a NUL byte is read.
    pub allow_binary: bool,
    /// Longest line (or multi-line record) accepted; a longer one is quarantined, never
    /// held whole. At most `batch_bytes`.
    pub max_line_bytes: ByteSize,
    /// A last line without a newline is emitted after this long without growth (none:
    /// it waits for its newline).
    pub partial_flush: Option<Duration>,
    /// Lines per batch handed to the WAL.
    pub batch_size: NonZeroU32,
    /// Bytes per batch handed to the WAL; a batch is cut before it would pass this.
    pub batch_bytes: ByteSize,
    /// How a line becomes a payload.
    pub format: Format,
    /// Multi-line records (stack traces), if configured.
    pub multiline: Option<MultilineConfig>,
    /// The `host` attribute (none: this machine's host name).
    pub host: Option<String>,
}

impl FileSourceConfig {
    /// Whether the source reads standard input.
    pub fn is_stdin(&self) -> bool {
        self.path.as_os_str() == "-"
    }

    /// The compiled path and exclude patterns (valid: checked by `parse`).
    pub fn patterns(&self) -> Patterns {
        Patterns::new(&self.path, &self.exclude, self.exclude_rotated)
            .expect("checked when the configuration was read")
    }
}

impl SourceKeys for FileSourceConfig {
    const TYPE: &'static str = "file";
    const ABOUT: &'static str = "Lines of the files a path or glob matches, followed across rotations (positions saved past durable lines), or of standard input.";

    fn parse(s: &mut Section<'_>, _name: &str) -> Option<Self> {
        let path: Option<PathBuf> = s
            .key(
                "path",
                "The file or glob (`*`, `?`, `[..]`, `**`) to read, or `-` for standard input.",
            )
            .example("/var/log/app/*.log")
            .req("a file path or glob (\"/var/log/app/*.log\"), or \"-\" for standard input");
        let exclude = s
            .key(
                "exclude",
                "Globs of files not to read: by name, or by whole path when the glob has a `/`.",
            )
            .example(toml::Value::Array(vec!["*-debug.log".into()]))
            .list::<String>()
            .unwrap_or_default();
        let exclude_rotated = s
            .key(
                "exclude_rotated",
                "Leave rotated names (`app.log.1`, `app.log-20241206`, `*.gz`) out unless `path` names them.",
            )
            .or(true);
        if let Some(path) = &path
            && path.as_os_str() != "-"
            && let Err(e) = Patterns::new(path, &exclude, exclude_rotated)
        {
            s.error(e.key, e.message);
        }
        let scan_interval = s
            .key(
                "scan_interval",
                "How often the glob's directories are listed again (inotify finds new files sooner).",
            )
            .or(Duration::secs(1));
        let max_open_files = s
            .key(
                "max_open_files",
                "Files open at once; the others wait, oldest first.",
            )
            .unit("files")
            .or(NonZeroU32::new(64).expect("64 > 0"));
        let rotate_wait = s
            .key(
                "rotate_wait",
                "How long a renamed or deleted file is kept open after its last growth.",
            )
            .or(Duration::secs(5));
        let forget_after = s
            .key(
                "forget_after",
                "How long the saved position of a file no longer followed is kept.",
            )
            .or(Duration::secs(600));
        let floor = rotate_wait.max(Duration::secs(10));
        if forget_after <= floor && !s.failed(&["forget_after", "rotate_wait"]) {
            s.error(
                "forget_after",
                format!("{forget_after} is too short: it must be longer than rotate_wait and 10s ({floor}), or a rotated file read to its end could be read again after a restart"),
            );
        }
        let fingerprint_bytes = s
            .key(
                "fingerprint_bytes",
                "Bytes of a file's start that identify it, with its inode.",
            )
            .or(ByteSize::kib(1));
        if !(16..=64 * 1024).contains(&fingerprint_bytes.bytes())
            && !s.failed(&["fingerprint_bytes"])
        {
            s.error(
                "fingerprint_bytes",
                format!("expected between 16 B and 64 KiB, found {fingerprint_bytes}"),
            );
        }
        let read_from = s
            .key(
                "read_from",
                "Where a file with no saved position found at start begins (files found later: their start).",
            )
            .or(ReadFrom::Beginning);
        let allow_binary = s
            .key(
                "allow_binary",
                "Read files with a NUL byte in their first KiB (skipped with a warning otherwise).",
            )
            .or(false);
        let max_line_bytes = s
            .key(
                "max_line_bytes",
                "Longest line (or multi-line record); a longer one's head goes to the quarantine.",
            )
            .or(ByteSize::kib(256));
        let partial_flush = s
            .key(
                "partial_flush",
                "Emit a last line without a newline after this long without growth.",
            )
            .default_text("never: it waits for its newline")
            .example("5s")
            .opt::<Duration>();
        let batch_size = s
            .key("batch_size", "Lines per batch handed to the WAL.")
            .unit("lines")
            .or(NonZeroU32::new(4096).expect("4096 > 0"));
        let batch_bytes = s
            .key(
                "batch_bytes",
                "Bytes per batch handed to the WAL; a batch is cut before it would pass this.",
            )
            .or(ByteSize::kib(512));
        if max_line_bytes > batch_bytes && !s.failed(&["max_line_bytes", "batch_bytes"]) {
            s.error(
                "max_line_bytes",
                format!("{max_line_bytes} is more than batch_bytes = {batch_bytes}; the longest line must fit in a batch"),
            );
        }
        let format = Format::parse(s);
        let multiline = MultilineConfig::parse(s);
        if let Some(m) = &multiline
            && m.max_bytes > max_line_bytes
            && !s.failed(&["multiline", "max_line_bytes"])
        {
            s.diagnostics().error(
                &format!("{}.max_bytes", s.key_path("multiline")),
                format!("{} is more than max_line_bytes = {max_line_bytes}; a record must fit in a line's bound", m.max_bytes),
            );
        }
        let host = s
            .key("host", "The `host` attribute of every record.")
            .default_text("this machine's host name")
            .example("web-1")
            .opt::<String>();
        if host.as_deref() == Some("") {
            s.error("host", "expected a host name, found an empty string");
        }
        Some(Self {
            exclude,
            exclude_rotated,
            scan_interval,
            max_open_files,
            rotate_wait,
            fingerprint_bytes,
            forget_after,
            read_from,
            allow_binary,
            max_line_bytes,
            partial_flush,
            batch_size,
            batch_bytes,
            format: format?,
            multiline,
            host,
            path: path?,
        })
    }

    fn bounds(&self, bounds: &mut Bounds<'_>) {
        bounds.add(
            "batch",
            Some(self.batch_size.get().into()),
            self.batch_bytes.bytes(),
            format!(
                "lines being batched: batch_size {} lines or batch_bytes {}",
                self.batch_size, self.batch_bytes
            ),
        );
        let units = super::shell::UNITS_IN_FLIGHT as u64;
        bounds.add(
            "appends_in_flight",
            Some(units),
            times(units, self.batch_bytes.bytes()),
            format!(
                "batches on their way to the WAL, in file order (the next appended while the last is fsynced): \
                 {units} × batch_bytes {}; a refused batch is retried, never dropped",
                self.batch_bytes
            ),
        );
        if self.is_stdin() {
            bounds.add(
                "read_buffer",
                None,
                times(2u32, super::tailer::read_buffer_bytes(self.max_line_bytes.bytes())),
                format!(
                    "standard input's read buffer (the longest line, max_line_bytes {}, and a read) and a long line's head kept until its end",
                    self.max_line_bytes
                ),
            );
            return;
        }
        let files = u64::from(self.max_open_files.get());
        bounds.add(
            "open_files",
            Some(files),
            0,
            format!(
                "file descriptors: max_open_files {files} (files past it wait, oldest first; rotated files keep theirs until read)"
            ),
        );
        bounds.add(
            "read_buffer",
            None,
            super::tailer::read_buffer_bytes(self.max_line_bytes.bytes()),
            format!(
                "one read buffer for every file (a partial line or a long line's head is read again from the file, never held): max_line_bytes {} and a 64 KiB read",
                self.max_line_bytes
            ),
        );
        if let Some(m) = &self.multiline {
            bounds.add(
                "multiline",
                Some(files),
                times(files, m.max_bytes.bytes()),
                format!(
                    "multi-line records being assembled: max_open_files {files} × multiline.max_bytes {}",
                    m.max_bytes
                ),
            );
        }
    }

    fn max_batch_bytes(&self) -> (u64, &'static str) {
        (self.batch_bytes.bytes(), "batch_bytes")
    }

    fn warnings(&self, path: &str, out: &mut Vec<String>) {
        if let Some(flush) = self.partial_flush {
            out.push(format!(
                "{path}.partial_flush = {flush}: a last line still being written when it passes is emitted in two records"
            ));
        }
    }
}

impl FieldType {
    /// Reads `types = { NAME = "int", … }`.
    pub(super) fn parse_table(s: &mut Section<'_>, applies: bool) -> Vec<(String, FieldType)> {
        let Some(value) = s
            .key(
                "types",
                "`format = \"regex\"`: capture types, `int`, `float`, `bool` or `timestamp:<strftime>` (others stay strings).",
            )
            .example(toml::Value::Table(toml::Table::from_iter([(
                "status".to_owned(),
                toml::Value::from("int"),
            )])))
            .only_if(applies, "applies only to format = \"regex\"")
            .raw("table of capture name = type")
        else {
            return Vec::new();
        };
        let path = s.key_path("types");
        let Some(table) = value.as_table() else {
            s.error(
                "types",
                format!(
                    "expected a table of capture names and types, e.g. types = {{ status = \"int\" }}, found {}",
                    crate::keys::units::describe(value)
                ),
            );
            return Vec::new();
        };
        let mut types = Vec::with_capacity(table.len());
        for (name, value) in table {
            match value.as_str().map(FieldType::parse) {
                Some(Ok(t)) => types.push((name.clone(), t)),
                Some(Err(message)) => s
                    .diagnostics()
                    .error(&crate::keys::join(&path, name), message),
                None => s.diagnostics().error(
                    &crate::keys::join(&path, name),
                    format!(
                        "expected one of \"int\", \"float\", \"bool\", \"timestamp:<strftime format>\", found {}",
                        crate::keys::units::describe(value)
                    ),
                ),
            }
        }
        types
    }
}
