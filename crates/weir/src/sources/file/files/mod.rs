//! One followed file ([`Tracked`]) and what the tailer does with it: opening it and
//! matching its saved position (here), reading a turn of it into chunks ([`read`]),
//! and what happens when it is truncated, rotated or released ([`rotation`]).

mod read;
mod rotation;

use std::fs::File;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

pub use self::read::{assembled, flush_partial, poll_multiline, take, turn};
pub use self::rotation::{close, find_inode, release, truncated};
use super::chunk::{Builder, FileUpdate, Origin};
use super::config::{FileSourceConfig, ReadFrom};
use super::core::Lines;
use super::identity::{Fingerprint, Inode, read_head};
use super::multiline::{Assembler, MultilineConfig};
use super::positions::{Claim, Resume, Saved};
use super::status::{FileState, FileStatus, Shared};

/// The tailer's settings, from the source's config.
#[derive(Debug, Clone)]
pub struct Settings {
    /// The source's name.
    pub name: Arc<str>,
    /// `path`, as configured.
    pub path: PathBuf,
    /// `max_open_files`.
    pub max_open: usize,
    /// `rotate_wait`.
    pub rotate_wait: Duration,
    /// `scan_interval`.
    pub scan_interval: Duration,
    /// `fingerprint_bytes`.
    pub fingerprint_bytes: usize,
    /// `forget_after`.
    pub forget_after: Duration,
    /// `read_from`.
    pub read_from: ReadFrom,
    /// `allow_binary`.
    pub allow_binary: bool,
    /// `max_line_bytes`.
    pub max_line_bytes: usize,
    /// `partial_flush`.
    pub partial_flush: Option<Duration>,
    /// `multiline`.
    pub multiline: Option<MultilineConfig>,
}

/// How many of a file's first bytes are checked for NUL (binary files).
const BINARY_CHECK_BYTES: usize = 1024;

/// What the file operations share: the chunk being built, the buffers, the saved
/// positions not yet matched.
pub struct Ctx {
    /// Settings.
    pub settings: Settings,
    /// Chunks for the task.
    pub builder: Builder,
    /// `/status`.
    pub shared: Arc<Shared>,
    /// The read buffer (`max_line_bytes` + 64 KiB).
    pub buf: Vec<u8>,
    /// A file's first bytes.
    pub head: Vec<u8>,
    /// Saved positions not matched yet.
    pub resume: Resume,
    /// The next file id.
    pub next_id: u64,
    /// Files found while reading others (a truncated file's copy), for the tailer to
    /// follow.
    pub found: Vec<Tracked>,
}

impl Ctx {
    /// The context of source `name` with `config`.
    pub fn new(
        name: &Arc<str>,
        config: &FileSourceConfig,
        builder: Builder,
        shared: Arc<Shared>,
        resume: Resume,
        next_id: u64,
    ) -> Self {
        let max_line_bytes = usize::try_from(config.max_line_bytes.bytes()).unwrap_or(usize::MAX);
        let settings = Settings {
            name: Arc::clone(name),
            path: config.path.clone(),
            max_open: config.max_open_files.get() as usize,
            rotate_wait: config.rotate_wait.get(),
            scan_interval: config.scan_interval.get(),
            fingerprint_bytes: usize::try_from(config.fingerprint_bytes.bytes()).unwrap_or(1024),
            forget_after: config.forget_after.get(),
            read_from: config.read_from,
            allow_binary: config.allow_binary,
            max_line_bytes,
            partial_flush: config.partial_flush.map(crate::keys::Duration::get),
            multiline: config.multiline.clone(),
        };
        let buf_len =
            usize::try_from(read_buffer_bytes(max_line_bytes as u64)).unwrap_or(usize::MAX);
        Ctx {
            settings,
            builder,
            shared,
            buf: vec![0u8; buf_len],
            head: Vec::new(),
            resume,
            next_id,
            found: Vec::new(),
        }
    }
}

/// A file the tailer knows of.
#[derive(Debug)]
pub struct Tracked {
    /// Its id (positions are saved under it).
    pub id: u64,
    /// Its path (its last known one once rotated).
    pub path: PathBuf,
    /// Its key and attributes.
    pub origin: Origin,
    /// Its device and inode.
    pub inode: Inode,
    /// Its first bytes' hash (`len` 0 until read).
    pub fingerprint: Fingerprint,
    /// Open, or not.
    pub file: Option<File>,
    /// Where it stands.
    pub state: FileState,
    /// No longer at a path the glob matches (renamed, replaced, deleted): read to its
    /// end, then released.
    pub rotated: bool,
    /// The next byte to read (a line start).
    pub read_at: u64,
    /// The position last put in a chunk.
    pub reported: u64,
    /// Its size when last looked at.
    pub size: u64,
    /// The size at which nothing more could be taken (a partial line remains).
    pub idle_at: Option<u64>,
    /// When it last grew.
    pub last_growth: Instant,
    /// When it was opened (or last yielded its slot).
    pub opened_at: Instant,
    /// Splitting its lines.
    pub lines: Lines,
    /// Assembling its multi-line records.
    pub multiline: Option<Assembler>,
    /// When to try again after an error, and the backoff.
    pub retry: Option<(Instant, Duration)>,
    /// Opened at least once (its identity is known).
    pub opened_once: bool,
    /// Found by the startup listing (`read_from = "end"` applies).
    pub at_startup: bool,
    /// Its last error (state `error`).
    pub error: Option<String>,
}

/// The bytes of the read buffer: the longest line, and a read past it.
pub fn read_buffer_bytes(max_line_bytes: u64) -> u64 {
    max_line_bytes.saturating_add(64 * 1024)
}

fn origin(id: Option<u64>, path: &Path) -> Origin {
    Origin {
        id,
        path: path.to_string_lossy().into_owned(),
        name: path
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default(),
    }
}

fn blank(bytes: &[u8]) -> bool {
    bytes.iter().all(u8::is_ascii_whitespace)
}

impl Tracked {
    /// A file found at `path`, not opened yet.
    pub fn new(ctx: &mut Ctx, path: PathBuf, inode: Inode, size: u64, now: Instant) -> Self {
        let id = ctx.next_id;
        ctx.next_id += 1;
        Tracked {
            id,
            origin: origin(Some(id), &path),
            path,
            inode,
            fingerprint: Fingerprint::of(&[]),
            file: None,
            state: FileState::Waiting,
            rotated: false,
            read_at: 0,
            reported: 0,
            size,
            idle_at: None,
            last_growth: now,
            opened_at: now,
            lines: Lines::new(ctx.settings.max_line_bytes, false),
            multiline: ctx.settings.multiline.as_ref().map(Assembler::new),
            retry: None,
            opened_once: false,
            at_startup: false,
            error: None,
        }
    }

    /// Every byte before it is emitted (or sent to the quarantine, or skipped).
    pub fn safe(&self) -> u64 {
        let mut safe = self.read_at;
        if let Some(at) = self.lines.held_from() {
            safe = safe.min(at);
        }
        if let Some(at) = self.multiline.as_ref().and_then(Assembler::held_from) {
            safe = safe.min(at);
        }
        safe
    }

    /// Whether it holds bytes in memory (a long line's head, a multi-line record): it
    /// keeps its slot until they are out.
    pub fn holds(&self) -> bool {
        self.safe() < self.read_at
    }

    /// Whether everything it has is taken (at its end, or only a partial line left).
    pub fn at_end(&self) -> bool {
        self.size <= self.read_at || self.idle_at == Some(self.size)
    }

    /// Sets its path (renamed within the glob).
    pub fn set_path(&mut self, path: PathBuf) {
        self.origin = origin(Some(self.id), &path);
        self.path = path;
    }

    /// What the position store keeps of it.
    pub fn saved(&self) -> Saved {
        Saved {
            path: self.path.clone(),
            fingerprint: self.fingerprint,
            inode: self.inode,
            position: self.safe(),
            size: self.size,
            seen_unix_ms: u64::try_from(crate::record::now_ms()).unwrap_or(0),
        }
    }

    fn update(&self, replaces: Option<u64>) -> FileUpdate {
        FileUpdate {
            id: self.id,
            path: self.path.clone(),
            fingerprint: self.fingerprint,
            inode: self.inode,
            replaces,
        }
    }

    /// Shows it in `/status`.
    pub fn show(&self, shared: &Shared) {
        let status = || FileStatus {
            path: String::new(),
            fingerprint: String::new(),
            inode: 0,
            position: self.reported,
            read: 0,
            size: 0,
            lag_bytes: 0,
            state: self.state,
            error: None,
        };
        shared.update(self.id, status, |s| {
            s.path.clone_from(&self.origin.path);
            s.fingerprint = self.fingerprint.hex();
            s.inode = self.inode.ino;
            s.read = self.read_at;
            s.size = self.size;
            s.state = self.state;
            s.error.clone_from(&self.error);
        });
    }

    /// Puts its position in the chunk if it moved.
    fn report(&mut self, ctx: &mut Ctx) {
        let safe = self.safe();
        if safe != self.reported {
            ctx.builder.position(self.id, safe);
            self.reported = safe;
        }
    }
}

/// Why a file could not be opened.
#[derive(Debug)]
pub enum OpenError {
    /// Nothing at its path.
    Gone,
    /// Its path holds another file now (it was rotated while closed).
    Moved,
    /// Another error (permissions, …).
    Io(std::io::Error),
}

/// Opens `f` (the first time: matches its saved position, checks for a binary file).
///
/// # Errors
///
/// See [`OpenError`].
pub fn open(f: &mut Tracked, ctx: &mut Ctx, now: Instant) -> Result<(), OpenError> {
    let file = File::open(&f.path).map_err(|e| match e.kind() {
        std::io::ErrorKind::NotFound => OpenError::Gone,
        _ => OpenError::Io(e),
    })?;
    let meta = file.metadata().map_err(OpenError::Io)?;
    let inode = Inode::of(&meta);
    if f.opened_once && inode != f.inode {
        return Err(OpenError::Moved);
    }
    let size = meta.len();
    read_head(&file, ctx.settings.fingerprint_bytes, &mut ctx.head).map_err(OpenError::Io)?;
    f.inode = inode;
    f.size = size;
    f.idle_at = None;
    f.error = None;
    f.retry = None;
    if f.opened_once {
        if !prefix_matches(&ctx.head, f.fingerprint) {
            f.file = Some(file);
            truncated(f, ctx, size, "its first bytes changed while it waited", now);
        } else {
            f.file = Some(file);
        }
    } else {
        if binary(ctx, f) {
            return Ok(());
        }
        resume(f, ctx, &file, size);
        f.fingerprint = Fingerprint::of(&ctx.head);
        f.file = Some(file);
        f.opened_once = true;
    }
    ctx.shared
        .open_files
        .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    f.state = if f.rotated {
        FileState::Rotated
    } else {
        FileState::Reading
    };
    f.opened_at = now;
    f.last_growth = now;
    f.show(&ctx.shared);
    Ok(())
}

/// Whether `head` starts with the bytes `fingerprint` was made of.
fn prefix_matches(head: &[u8], fingerprint: Fingerprint) -> bool {
    let len = fingerprint.len as usize;
    len <= head.len() && Fingerprint::of(&head[..len]) == fingerprint
}

/// A NUL byte in the first KiB: not read, unless `allow_binary`.
fn binary(ctx: &Ctx, f: &mut Tracked) -> bool {
    let check = &ctx.head[..ctx.head.len().min(BINARY_CHECK_BYTES)];
    if ctx.settings.allow_binary || !check.contains(&0) {
        return false;
    }
    tracing::warn!(
        source = %ctx.settings.name,
        "file: {} looks binary (a NUL byte in its first KiB); it is not read (allow_binary = true reads it)",
        f.path.display()
    );
    ctx.shared.count(|c| &c.binary_files, 1);
    f.state = FileState::Binary;
    f.opened_once = true;
    f.fingerprint = Fingerprint::of(&ctx.head);
    f.show(&ctx.shared);
    true
}

/// Where a file opened for the first time starts.
fn resume(f: &mut Tracked, ctx: &mut Ctx, file: &File, size: u64) {
    let name = &ctx.settings.name;
    let path = f.path.display();
    let (start, replaces) = match ctx.resume.claim(&f.path, f.inode, &ctx.head) {
        Claim::Saved(old, saved) if saved.position <= size => {
            tracing::debug!(source = %name, "file: {path} resumes at byte {}", saved.position);
            (saved.position, Some(old))
        }
        Claim::Saved(old, saved) => {
            tracing::warn!(
                source = %name,
                "file: {path} is shorter ({size} bytes) than its saved position ({}): it was truncated while weir was stopped; reading it from byte 0",
                saved.position
            );
            ctx.shared.count(|c| &c.truncations, 1);
            (0, Some(old))
        }
        Claim::Legacy(position) if position <= size => {
            tracing::info!(source = %name, "file: {path} resumes at byte {position}, the position saved by an earlier weir");
            (position, None)
        }
        Claim::Legacy(position) => {
            tracing::warn!(
                source = %name,
                "file: {path} is shorter ({size} bytes) than the position an earlier weir saved ({position}); reading it from byte 0"
            );
            ctx.shared.count(|c| &c.truncations, 1);
            (0, None)
        }
        Claim::Changed(old, saved) => {
            tracing::warn!(
                source = %name,
                "file: {path} changed while weir was stopped (its first bytes differ: truncated, replaced, or its inode reused); reading it from byte 0. Lines written after byte {} before the change were not read",
                saved.position
            );
            ctx.shared.count(|c| &c.truncations, 1);
            (0, Some(old))
        }
        Claim::New if f.at_startup && ctx.settings.read_from == ReadFrom::End => {
            let mut last = [0u8; 1];
            let mid_line =
                size > 0 && file.read_at(&mut last, size - 1).is_ok() && last[0] != b'\n';
            if mid_line {
                f.lines.resync();
            }
            (size, None)
        }
        Claim::New => (0, None),
    };
    f.read_at = start;
    f.reported = start;
    f.fingerprint = Fingerprint::of(&ctx.head);
    ctx.builder.update(f.update(replaces));
    ctx.builder.position(f.id, start);
}
