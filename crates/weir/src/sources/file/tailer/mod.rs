//! The tailer: the file source's own thread, which finds files, holds at most
//! `max_open_files` of them open, reads them in turns, and follows them across
//! rotations.
//!
//! - **Finding files.** The glob's base directory is listed at start, every
//!   `scan_interval`, and whenever notifications were lost; a file created or renamed
//!   into place is found at once by notification.
//! - **Slots.** Files wait for a slot in a queue, oldest (by modification time) first.
//!   While others wait, a file at its end gives its slot up, and so does one that held
//!   it for [`TURN`] with more to read (it goes to the back of the queue). A file that
//!   holds bytes in memory (a multi-line record, a long line's head) and a rotated file
//!   keep their slots.
//! - **Turns.** Each open file is read in turn, up to a buffer at a time, so no file
//!   starves another. Chunks are handed to the task as they fill; a full channel blocks
//!   this thread only (the source waits, the file keeps the data).
//! - **Rotation.** Every [`CHECK`] (and on notification) the path of each open file is
//!   looked at again: gone, or another inode there, means the file was renamed,
//!   replaced or deleted. It is read to its end through the descriptor it has, and
//!   released after `rotate_wait` without growth; the new file at the path is found
//!   and read from its start. A closed file whose path now leads elsewhere is looked
//!   for by inode beside its old path. A file found shorter than its position, or with
//!   other first bytes, was truncated: see [`files::truncated`].

mod discovery;

use std::collections::{BTreeMap, HashMap, HashSet, VecDeque};
#[cfg(test)]
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use super::chunk::Chunk;
use super::files::{self, Ctx, OpenError, Tracked};
use super::identity::Inode;
use super::paths::Patterns;
use super::status::FileState;
use super::watch::Watch;

pub use super::files::read_buffer_bytes;

/// How often open files' paths are checked for rotation, released ones looked at.
const CHECK: Duration = Duration::from_millis(250);
/// How long the tailer sleeps with nothing to read and no notification.
const POLL: Duration = Duration::from_millis(100);
/// How long a file with more to read keeps its slot while others wait.
const TURN: Duration = Duration::from_secs(1);
/// At start, rotated files changed this long before the store's last write, or later,
/// and unknown to it, are read (at least `rotate_wait`).
const SWEEP_MARGIN: Duration = Duration::from_secs(10);
/// The longest wait before retrying a file that could not be read.
const MAX_RETRY: Duration = Duration::from_secs(60);

/// Where chunks go: `false` when the task is gone.
pub type Send = Box<dyn FnMut(Chunk) -> bool + std::marker::Send>;

/// See the [module docs](self).
pub struct Tailer {
    ctx: Ctx,
    send: Send,
    /// The task is gone: stop.
    gone: bool,
    patterns: Patterns,
    files: BTreeMap<u64, Tracked>,
    by_inode: HashMap<Inode, u64>,
    /// Open files, in turn order.
    open: Vec<u64>,
    /// Files waiting for a slot.
    queue: VecDeque<u64>,
    watch: Watch,
    next_scan: Instant,
    next_check: Instant,
    /// Listing errors already logged (logged once each).
    warned: HashSet<String>,
}

impl Tailer {
    /// A tailer over `patterns`, handing chunks to `send`.
    pub fn new(ctx: Ctx, patterns: Patterns, send: Send) -> Self {
        let (watch, error) = Watch::new();
        if let Some(e) = error {
            tracing::warn!(
                source = %ctx.settings.name,
                "file: no filesystem notifications ({e}); new files are found by listing every scan_interval"
            );
        }
        let now = Instant::now();
        Tailer {
            ctx,
            send,
            gone: false,
            patterns,
            files: BTreeMap::new(),
            by_inode: HashMap::new(),
            open: Vec::new(),
            queue: VecDeque::new(),
            watch,
            next_scan: now,
            next_check: now,
            warned: HashSet::new(),
        }
    }

    /// Runs until `stop`, or until the task is gone.
    pub fn run(mut self, stop: &AtomicBool) {
        self.startup();
        while !stop.load(Ordering::Acquire) && !self.gone {
            let progressed = self.step(Instant::now());
            if !progressed {
                let now = Instant::now();
                let timeout = self.next_wake(now);
                if let Some(wake) = self.watch.wait(timeout) {
                    self.on_wake(wake, Instant::now());
                }
            }
        }
    }

    /// Hands the chunks that are ready to the task (blocking while it is full).
    fn send_ready(&mut self) {
        while !self.gone
            && let Some(chunk) = self.ctx.builder.pop_ready()
        {
            self.gone = !(self.send)(chunk);
        }
    }

    /// One round: notifications, listing and checks when due, slots, a turn of every
    /// open file, timeouts. Returns whether anything was read.
    pub fn step(&mut self, now: Instant) -> bool {
        let now_ms = crate::record::now_ms();
        self.ctx.builder.set_now(now_ms);
        let now_ms = u64::try_from(now_ms).unwrap_or(0);
        while let Some(wake) = self.watch.try_next() {
            self.on_wake(wake, now);
        }
        if self.watch.take_rescan() || now >= self.next_scan {
            self.scan(now, false);
        }
        if now >= self.next_check {
            self.check(now, now_ms);
        }
        self.fill(now);
        let progressed = self.read_round(now, now_ms);
        for f in self.files.values_mut() {
            files::poll_multiline(f, &mut self.ctx, now_ms);
        }
        self.adopt_found();
        if !progressed {
            // Nothing more to read now: what is batched goes.
            self.ctx.builder.cut();
        }
        self.send_ready();
        self.publish();
        progressed
    }

    fn publish(&self) {
        let shared = &self.ctx.shared;
        shared
            .waiting_files
            .store(self.queue.len() as u64, Ordering::Relaxed);
    }

    /// When to wake with nothing read: a poll, the next listing or check, a multi-line
    /// timeout.
    fn next_wake(&self, now: Instant) -> Duration {
        let mut wake = POLL;
        for at in [self.next_scan, self.next_check] {
            wake = wake.min(at.saturating_duration_since(now));
        }
        let now_ms = u64::try_from(crate::record::now_ms()).unwrap_or(0);
        for f in self.files.values() {
            if let Some(at) = f.multiline.as_ref().and_then(|m| m.deadline_ms()) {
                wake = wake.min(Duration::from_millis(at.saturating_sub(now_ms)));
            }
        }
        wake.max(Duration::from_millis(1))
    }

    /// Adds a file found some other way; `first` puts it at the front of the queue.
    fn add(&mut self, f: Tracked, first: bool) {
        let id = f.id;
        f.show(&self.ctx.shared);
        self.by_inode.insert(f.inode, id);
        let open = f.file.is_some();
        self.files.insert(id, f);
        if open {
            self.open.push(id);
        } else if first {
            self.queue.push_front(id);
        } else {
            self.queue.push_back(id);
        }
    }

    fn adopt_found(&mut self) {
        for f in std::mem::take(&mut self.ctx.found) {
            self.add(f, true);
        }
    }

    /// Stops following `id`. Its position stays for `forget_after`, in the store and
    /// here: found again under the glob (a rotated name the glob matches), it resumes.
    fn forget(&mut self, id: u64) {
        if let Some(mut f) = self.files.remove(&id) {
            files::close(&mut f, &self.ctx);
            if f.opened_once && f.fingerprint.len > 0 {
                self.ctx.resume.remember(id, f.saved());
            }
            if self.by_inode.get(&f.inode) == Some(&id) {
                self.by_inode.remove(&f.inode);
            }
            if f.opened_once {
                self.ctx.builder.release(id);
            }
            if f.state != FileState::Released {
                f.state = FileState::Released;
                f.show(&self.ctx.shared);
            }
        }
        self.open.retain(|&o| o != id);
        self.queue.retain(|&q| q != id);
    }

    /// Open files: rotated? Rotated files: released? Files past their turn: yield.
    /// Files in error: due for a retry?
    fn check(&mut self, now: Instant, now_ms: u64) {
        self.next_check = now + CHECK;
        let forget_ms =
            u64::try_from(self.ctx.settings.forget_after.as_millis()).unwrap_or(u64::MAX);
        self.ctx.resume.expire(now_ms.saturating_sub(forget_ms));
        for id in self.open.clone() {
            self.check_path(id, now);
        }
        let wait = self.ctx.settings.rotate_wait;
        let release: Vec<u64> = self
            .open
            .iter()
            .copied()
            .filter(|id| {
                let f = &self.files[id];
                f.rotated && f.at_end() && now.duration_since(f.last_growth) >= wait
            })
            .collect();
        for id in release {
            if let Some(f) = self.files.get_mut(&id) {
                files::release(f, &mut self.ctx, now_ms);
            }
            self.forget(id);
        }
        let due: Vec<u64> = self
            .files
            .values()
            .filter(|f| f.state == FileState::Error && f.retry.is_some_and(|(at, _)| now >= at))
            .map(|f| f.id)
            .collect();
        for id in due {
            if !self.queue.contains(&id) {
                self.queue.push_back(id);
            }
        }
        self.yield_slots(now);
    }

    /// While files wait: one at its end gives its slot up; one with more to read after
    /// its turn goes to the back of the queue.
    fn yield_slots(&mut self, now: Instant) {
        let mut wanted = self.queue.len();
        if wanted == 0 || self.open.len() < self.ctx.settings.max_open {
            return;
        }
        for id in self.open.clone() {
            if wanted == 0 {
                break;
            }
            let f = self.files.get_mut(&id).expect("open files are tracked");
            if f.rotated || f.holds() {
                continue;
            }
            let at_end = f.at_end();
            if !at_end && now.duration_since(f.opened_at) < TURN {
                continue;
            }
            files::close(f, &self.ctx);
            f.state = FileState::Waiting;
            f.show(&self.ctx.shared);
            self.open.retain(|&o| o != id);
            if !at_end {
                self.queue.push_back(id);
            }
            wanted -= 1;
        }
    }

    /// Opens queued files while slots are free.
    fn fill(&mut self, now: Instant) {
        while self.open.len() < self.ctx.settings.max_open {
            let Some(id) = self.queue.pop_front() else {
                return;
            };
            let Some(f) = self.files.get_mut(&id) else {
                continue;
            };
            if f.file.is_some() {
                continue;
            }
            if f.retry.is_some_and(|(at, _)| now < at) {
                continue;
            }
            match files::open(f, &mut self.ctx, now) {
                Ok(()) if f.file.is_some() => self.open.push(id),
                Ok(()) => {} // binary: not read
                Err(OpenError::Gone) => self.vanished(id, now),
                Err(OpenError::Moved) => {
                    // Its path leads to another file: it was rotated while it waited.
                    let path = f.path.clone();
                    self.vanished(id, now);
                    if self.patterns.matches(&path) {
                        self.discover(&path, now, false);
                    }
                }
                Err(OpenError::Io(e)) => self.failed(id, &e.to_string(), now),
            }
        }
    }

    /// A file could not be opened or read: a WARN, and a retry with backoff.
    fn failed(&mut self, id: u64, error: &str, now: Instant) {
        let Some(f) = self.files.get_mut(&id) else {
            return;
        };
        files::close(f, &self.ctx);
        self.open.retain(|&o| o != id);
        let delay = f
            .retry
            .map_or(Duration::from_secs(1), |(_, d)| (d * 2).min(MAX_RETRY));
        if f.error.as_deref() != Some(error) {
            tracing::warn!(
                source = %self.ctx.settings.name,
                "file: cannot read {}: {error}; trying again in {delay:?} (other files go on)",
                f.path.display()
            );
        }
        self.ctx.shared.count(|c| &c.read_errors, 1);
        f.error = Some(error.to_owned());
        f.state = FileState::Error;
        f.retry = Some((now + delay, delay));
        f.show(&self.ctx.shared);
    }

    /// A turn of every open file. Returns whether any read.
    fn read_round(&mut self, now: Instant, now_ms: u64) -> bool {
        let mut progressed = false;
        for id in self.open.clone() {
            let Some(f) = self.files.get_mut(&id) else {
                continue;
            };
            match files::turn(f, &mut self.ctx, now, now_ms) {
                Ok(read) => progressed |= read,
                Err(e) => self.failed(id, &e.to_string(), now),
            }
            if f_closed(&self.files, id) {
                self.open.retain(|&o| o != id);
            }
            // Full chunks go at once: what is held stays within a buffer's worth.
            self.send_ready();
            if self.gone {
                break;
            }
        }
        progressed
    }
}

fn f_closed(files: &BTreeMap<u64, Tracked>, id: u64) -> bool {
    files.get(&id).is_none_or(|f| f.file.is_none())
}

/// The paths of the files a test saw, by state.
#[cfg(test)]
impl Tailer {
    pub(super) fn states(&self) -> Vec<(PathBuf, FileState)> {
        self.files
            .values()
            .map(|f| (f.path.clone(), f.state))
            .collect()
    }
}

#[cfg(test)]
mod tests;
