//! The writer thread: group commit, rotation, retention, eviction, poisoning.
//!
//! It is the only code that writes or deletes segment files. Appenders hand it
//! [`Job`]s; it takes every queued job at once, writes them in order, fsyncs once and
//! answers them all (group commit).

use std::collections::VecDeque;
use std::fs::File;
use std::io::{self, IoSlice, Seek, Write};
use std::ops::Range;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use crate::config::{OnFull, SyncMode};
use crate::core::{FS_RESERVE, INODE_RESERVE, Plan};
use crate::error::AppendError;
use crate::faults::IoStep;
use crate::inbox::{Job, Link};
use crate::segment::{create_segment, segment_path, sync_dir};
use crate::shared::{Shared, lock};

/// How often a writer blocked on the budget re-checks `max_lag` by age.
const BLOCKED_RECHECK: Duration = Duration::from_millis(200);

pub(crate) struct Writer {
    shared: Arc<Shared>,
    file: File,
    /// Jobs taken from the inbox, in order; the head may be waiting for room.
    pending: VecDeque<Job>,
    blocked: bool,
    /// Written, not yet answered (sync always) or not yet fsynced (sync interval).
    written: Vec<(Job, Range<u64>)>,
    /// How many of the last `written` jobs are not yet written to the file.
    unflushed: usize,
    unsynced_since: Option<Instant>,
    /// Appends find the filesystem (not `max_disk`) full now.
    fs_short: bool,
    /// Why the next segment could not be opened (out of space, inodes or file
    /// descriptors), while that lasts.
    resource_cause: Option<String>,
}

/// What became of a rotation.
enum Rotated {
    Yes,
    /// The log is poisoned.
    Failed,
    /// A resource ran out; nothing was written. The cause.
    Refused(String),
}

fn micros(d: Duration) -> u64 {
    u64::try_from(d.as_micros()).unwrap_or(u64::MAX)
}

/// Out of space (ENOSPC, EDQUOT) or file descriptors (EMFILE, ENFILE): conditions that
/// pass, unlike a failing disk.
fn is_resource_error(e: &io::Error) -> bool {
    use rustix::io::Errno;
    let resource = [Errno::NOSPC, Errno::DQUOT, Errno::MFILE, Errno::NFILE];
    e.raw_os_error()
        .is_some_and(|code| resource.iter().any(|r| r.raw_os_error() == code))
        || e.kind() == io::ErrorKind::StorageFull
}

/// Bytes the filesystem holding `file` can still take above [`FS_RESERVE`] (none when
/// its free inodes are down to [`INODE_RESERVE`]); `u64::MAX` when the filesystem does
/// not say (then only `max_disk` bounds the log).
fn fs_room(file: &File) -> u64 {
    match rustix::fs::fstatvfs(file) {
        Ok(st) if st.f_files > 0 && st.f_favail <= INODE_RESERVE => 0,
        Ok(st) => st
            .f_bavail
            .saturating_mul(st.f_frsize)
            .saturating_sub(FS_RESERVE),
        Err(_) => u64::MAX,
    }
}

impl Writer {
    pub fn new(shared: Arc<Shared>, file: File) -> Self {
        Writer {
            shared,
            file,
            pending: VecDeque::new(),
            blocked: false,
            written: Vec::new(),
            unflushed: 0,
            unsynced_since: None,
            fs_short: false,
            resource_cause: None,
        }
    }

    pub fn run(mut self) {
        loop {
            let (retention, shutdown) = self.gather();
            if retention && !self.is_poisoned() {
                self.retain();
            }
            self.process();
            let interval_due = match (self.shared.sync, self.unsynced_since) {
                (SyncMode::Interval(d), Some(since)) => since.elapsed() >= d,
                _ => false,
            };
            if self.shared.sync == SyncMode::Always || interval_due || shutdown {
                self.sync_and_answer();
            }
            if shutdown {
                self.fail_pending(AppendError::Closed);
                return;
            }
        }
    }

    fn is_poisoned(&self) -> bool {
        self.shared.poisoned.load(Ordering::Acquire)
    }

    /// Waits for work; moves the inbox's jobs behind the pending ones.
    fn gather(&mut self) -> (bool, bool) {
        let shared = Arc::clone(&self.shared);
        let mut inbox = lock(&shared.inbox);
        loop {
            let work = !inbox.jobs.is_empty() && !self.blocked;
            if work || inbox.retention || inbox.shutdown {
                break;
            }
            let timeout = match (shared.sync, self.unsynced_since) {
                (SyncMode::Interval(d), Some(since)) => Some(d.saturating_sub(since.elapsed())),
                _ if self.blocked => Some(BLOCKED_RECHECK),
                _ => None,
            };
            match timeout {
                Some(t) if t.is_zero() => break,
                Some(t) => {
                    let (guard, res) = shared
                        .wake
                        .wait_timeout(inbox, t)
                        .unwrap_or_else(std::sync::PoisonError::into_inner);
                    inbox = guard;
                    if res.timed_out() {
                        break;
                    }
                }
                None => {
                    inbox = shared
                        .wake
                        .wait(inbox)
                        .unwrap_or_else(std::sync::PoisonError::into_inner);
                }
            }
        }
        self.pending.extend(inbox.jobs.drain(..));
        let retention = std::mem::take(&mut inbox.retention);
        (retention || self.blocked, inbox.shutdown)
    }

    /// Writes pending jobs in order until one must wait for room.
    fn process(&mut self) {
        self.blocked = false;
        let fs_room = fs_room(&self.file);
        {
            let mut core = self.shared.core();
            core.update_releases(crate::clock::now_ms());
            core.fs_room = fs_room;
        }
        while let Some(job) = self.pending.pop_front() {
            if let Some(err) = self.shared.poison_error() {
                let _ = job.reply.send(Err(err));
                continue;
            }
            if job.chain.as_ref().is_some_and(Link::is_behind) {
                let _ = job.reply.send(Err(AppendError::Behind(job.batch)));
                continue;
            }
            let len = job.batch.encoded_len();
            loop {
                let (plan, fs_short) = {
                    let core = self.shared.core();
                    let plan = core.plan_append(len);
                    let short = !matches!(plan, Plan::Write { .. } | Plan::Retain { .. })
                        && core.fs_is_short(len);
                    (plan, short)
                };
                self.note_fs_short(fs_short);
                match plan {
                    Plan::Write { rotate } => {
                        if rotate {
                            match self.rotate() {
                                // The segment just sealed, and any before it, may already be
                                // behind every required cursor (sinks that keep up): without
                                // this they would wait for the next commit, and a commit
                                // racing the rotation would decide whether they go now or
                                // then.
                                Rotated::Yes => {
                                    self.retain();
                                    if let Some(err) = self.shared.poison_error() {
                                        // Deleting a file failed: nothing of this job
                                        // was written.
                                        let _ = job.reply.send(Err(err));
                                        break;
                                    }
                                }
                                Rotated::Failed => break,
                                Rotated::Refused(cause) => {
                                    if self.refuse_for_resource(job, &cause) {
                                        // Waits: retried after BLOCKED_RECHECK.
                                        return;
                                    }
                                    break;
                                }
                            }
                        }
                        self.resource_short(None);
                        self.write(job);
                        break;
                    }
                    Plan::Retain { segments } => {
                        if !self.delete_front(segments, false) {
                            break;
                        }
                    }
                    Plan::Evict { segments } => {
                        if !self.delete_front(segments, true) {
                            break;
                        }
                    }
                    Plan::Reject { needed } => {
                        if let Some(link) = &job.chain {
                            link.refused();
                        }
                        let (used, max_disk, room) = {
                            let core = self.shared.core();
                            (core.disk_bytes, core.max_disk, core.fs_room)
                        };
                        let refusal = if fs_short {
                            AppendError::NoSpace {
                                batch: job.batch,
                                room,
                                reserve: FS_RESERVE,
                                needed,
                            }
                        } else {
                            AppendError::Full {
                                batch: job.batch,
                                used,
                                max_disk,
                                needed,
                            }
                        };
                        let _ = job.reply.send(Err(refusal));
                        break;
                    }
                    Plan::Wait => {
                        self.pending.push_front(job);
                        self.blocked = true;
                        // Answer what was written before waiting.
                        self.sync_and_answer();
                        return;
                    }
                }
            }
            if self.is_poisoned() {
                // The job that failed was answered by the poisoning path; keep going to
                // answer the rest.
                continue;
            }
        }
        self.flush();
    }

    /// Notes whether appends now find the filesystem, not `max_disk`, full: counted and
    /// logged once when that begins (WARN) and once when room returns.
    fn note_fs_short(&mut self, short: bool) {
        if short == self.fs_short {
            return;
        }
        self.fs_short = short;
        let (room, on_full) = {
            let mut core = self.shared.core();
            if short {
                core.fs_full_events += 1;
            }
            (core.fs_room, core.on_full)
        };
        let dir = self.shared.dir.display();
        if short {
            tracing::warn!(
                "WAL {dir}: its filesystem is full before max_disk ({room} bytes left above the \
                 {FS_RESERVE}-byte reserve): appends {} until space returns; lower max_disk to the disk's size",
                match on_full {
                    OnFull::Block => "wait",
                    OnFull::Reject => "are refused",
                    OnFull::DropOldest => "evict the oldest segments",
                }
            );
        } else {
            tracing::info!("WAL {dir}: its filesystem has room again; appends go on");
        }
    }

    /// Books a batch in the active segment; its bytes go out with the group's single
    /// vectored write in [`Writer::flush`].
    fn write(&mut self, mut job: Job) {
        let records = job.batch.len();
        let range = {
            let mut core = self.shared.core();
            let first = core.record_write(records, job.batch.encoded_len(), job.batch.time_ms());
            job.batch.set_first_offset(first);
            self.shared
                .disk_bytes
                .store(core.disk_bytes, Ordering::Relaxed);
            first..first + records
        };
        self.shared
            .appended_records
            .fetch_add(records, Ordering::Relaxed);
        self.shared
            .appended_bytes
            .fetch_add(job.batch.encoded_len(), Ordering::Relaxed);
        self.written.push((job, range));
        self.unflushed += 1;
    }

    /// Writes the booked batches not yet written, in one vectored write. With
    /// `sync = interval` they are answered now (durable for readers after the fsync).
    /// False if the write failed (the log is then poisoned).
    fn flush(&mut self) -> bool {
        if self.unflushed > 0 {
            let from = self.written.len() - self.unflushed;
            let mut slices: Vec<IoSlice<'_>> = self.written[from..]
                .iter()
                .map(|(job, _)| IoSlice::new(job.batch.bytes()))
                .collect();
            let result = match self.shared.injected(IoStep::Write) {
                // A short write, then the error: as a disk filling mid-write does.
                Some(e) => {
                    let half = slices.first().map_or(0, |s| s.len() / 2);
                    let _ = self.file.write_all(&slices[0][..half]);
                    Err(e)
                }
                None => {
                    let started = Instant::now();
                    let written = write_all_vectored(&mut self.file, &mut slices);
                    self.shared
                        .write_total_us
                        .fetch_add(micros(started.elapsed()), Ordering::Relaxed);
                    written
                }
            };
            drop(slices);
            if let Err(e) = result {
                if is_resource_error(&e) {
                    return self.roll_back_unflushed(from, &e);
                }
                self.fail(format!("writing a batch: {e}"), None);
                return false;
            }
            self.unflushed = 0;
        }
        if let SyncMode::Interval(_) = self.shared.sync
            && !self.written.is_empty()
        {
            // Weaker mode: answered once written.
            self.unsynced_since.get_or_insert_with(Instant::now);
            for (job, range) in self.written.drain(..) {
                let _ = job.reply.send(Ok(range));
            }
        }
        true
    }

    /// The write of `written[from..]` failed for want of space: none of it was answered
    /// or fsynced, so the segment is cut back to where it ended before them (whatever
    /// part reached the file goes) and they are taken off the books. Then, by `on_full`,
    /// they are refused (`reject`: [`AppendError::NoSpace`]) or wait at the head of the
    /// queue and are written again once room returns. False (and the log poisoned) only
    /// if the cut fails: then what is on disk is not known.
    fn roll_back_unflushed(&mut self, from: usize, cause: &io::Error) -> bool {
        let failed: Vec<(Job, Range<u64>)> = self.written.drain(from..).collect();
        self.unflushed = 0;
        let Some(first) = failed.first().map(|(_, r)| r.start) else {
            return true;
        };
        let bytes: u64 = failed.iter().map(|(j, _)| j.batch.encoded_len()).sum();
        let records: u64 = failed.iter().map(|(j, _)| j.batch.len()).sum();
        let keep = {
            let core = self.shared.core();
            core.segments
                .back()
                .map_or(0, |s| s.bytes)
                .saturating_sub(bytes)
        };
        let cut = self
            .file
            .set_len(keep)
            .and_then(|()| self.file.seek(io::SeekFrom::Start(keep)).map(|_| ()));
        if let Err(e) = cut {
            self.written.extend(failed);
            self.unflushed = self.written.len() - from;
            self.fail(
                format!("writing a batch: {cause}; cutting the segment back to {keep} bytes: {e}"),
                None,
            );
            return false;
        }
        let on_full = {
            let mut core = self.shared.core();
            core.unrecord_writes(first, bytes);
            core.fs_room = 0;
            self.shared
                .disk_bytes
                .store(core.disk_bytes, Ordering::Relaxed);
            core.on_full
        };
        self.shared
            .appended_records
            .fetch_sub(records, Ordering::Relaxed);
        self.shared
            .appended_bytes
            .fetch_sub(bytes, Ordering::Relaxed);
        self.resource_short(Some(&format!("writing to the active segment: {cause}")));
        if on_full == OnFull::Reject {
            for (job, _) in failed {
                if let Some(link) = &job.chain {
                    link.refused();
                }
                let needed = job.batch.encoded_len();
                let _ = job.reply.send(Err(AppendError::NoSpace {
                    batch: job.batch,
                    room: 0,
                    reserve: FS_RESERVE,
                    needed,
                }));
            }
        } else {
            for (job, _) in failed.into_iter().rev() {
                self.pending.push_front(job);
            }
            self.blocked = true;
        }
        true
    }

    /// Fsyncs the active segment, publishes the durable end, answers written jobs.
    fn sync_and_answer(&mut self) {
        if self.is_poisoned() {
            return;
        }
        if !self.flush() {
            return;
        }
        let end = self.shared.core().written_end();
        if end == *self.shared.durable.borrow() && self.written.is_empty() {
            self.unsynced_since = None;
            return;
        }
        if let Err(e) = self.fsync() {
            self.fail(format!("fsync of the active segment: {e}"), None);
            return;
        }
        self.unsynced_since = None;
        self.shared.core().durable_end = end;
        self.shared.durable.send_replace(end);
        for (job, range) in self.written.drain(..) {
            let _ = job.reply.send(Ok(range));
        }
    }

    fn fsync(&mut self) -> std::io::Result<()> {
        let started = Instant::now();
        if let Some(e) = self.shared.injected(IoStep::Fsync) {
            return Err(e);
        }
        self.file.sync_data()?;
        let us = micros(started.elapsed());
        self.shared.fsyncs.fetch_add(1, Ordering::Relaxed);
        self.shared
            .fsync_total_us
            .fetch_add(us.max(1), Ordering::Relaxed);
        let _ = lock(&self.shared.fsync_us).record(us.max(1));
        Ok(())
    }

    /// Seals the active segment (fsynced) and opens a new one.
    fn rotate(&mut self) -> Rotated {
        // Seal the active segment and answer what it holds first: if creating the next
        // segment fails, those batches are durable and must not be answered as failed.
        self.sync_and_answer();
        if self.is_poisoned() {
            return Rotated::Failed;
        }
        let first = self.shared.core().written_end();
        let now = crate::clock::now_ms();
        let created = match self.shared.injected(IoStep::CreateSegment) {
            Some(e) => Err(e),
            None => create_segment(&self.shared.dir, first, now),
        };
        match created {
            Ok(file) => {
                self.file = file;
                let mut core = self.shared.core();
                core.push_segment(first, now);
                self.shared
                    .disk_bytes
                    .store(core.disk_bytes, Ordering::Relaxed);
                Rotated::Yes
            }
            Err(e) if is_resource_error(&e) => {
                // Out of space, inodes or file descriptors: nothing was written to the
                // log and nothing acknowledged is in doubt. Take back the file if it was
                // created, then refuse or wait by on_full; the next attempt may succeed.
                let path = segment_path(&self.shared.dir, first);
                match std::fs::remove_file(&path) {
                    Ok(()) => {}
                    Err(r) if r.kind() == io::ErrorKind::NotFound => {}
                    Err(r) => {
                        self.fail(
                            format!(
                                "creating segment {first}: {e}; removing the partial file: {r}"
                            ),
                            None,
                        );
                        return Rotated::Failed;
                    }
                }
                Rotated::Refused(format!("creating segment {}: {e}", path.display()))
            }
            Err(e) => {
                self.fail(format!("creating segment {first}: {e}"), None);
                Rotated::Failed
            }
        }
    }

    /// A job that could not be written for want of a resource (space, inodes, file
    /// descriptors) while opening the next segment: under `reject` it is refused
    /// ([`AppendError::Resource`]); otherwise it waits at the head of the queue and is
    /// tried again after [`BLOCKED_RECHECK`], so the log resumes by itself once the
    /// resource returns. True if it waits.
    fn refuse_for_resource(&mut self, job: Job, cause: &str) -> bool {
        self.resource_short(Some(cause));
        let on_full = self.shared.core().on_full;
        if on_full == OnFull::Reject {
            if let Some(link) = &job.chain {
                link.refused();
            }
            let _ = job.reply.send(Err(AppendError::Resource {
                batch: job.batch,
                cause: cause.to_owned(),
            }));
            return false;
        }
        self.pending.push_front(job);
        self.blocked = true;
        true
    }

    /// Notes that a resource ran out (`Some(cause)`) or is back (`None`): counted and
    /// logged once at WARN when it begins, and once when appends go on.
    fn resource_short(&mut self, cause: Option<&str>) {
        match (cause, self.resource_cause.is_some()) {
            (Some(cause), false) => {
                self.shared.core().resource_refusals += 1;
                tracing::warn!(
                    "WAL {}: {cause}: appends {} until the resource returns (nothing is lost)",
                    self.shared.dir.display(),
                    if self.shared.core().on_full == OnFull::Reject {
                        "are refused"
                    } else {
                        "wait"
                    }
                );
                self.resource_cause = Some(cause.to_owned());
            }
            (None, true) => {
                tracing::info!(
                    "WAL {}: the next segment was opened; appends go on",
                    self.shared.dir.display()
                );
                self.resource_cause = None;
            }
            _ => {}
        }
    }

    /// Deletes the sealed segments every required cursor has passed (retention).
    fn retain(&mut self) {
        let n = self.shared.core().eager_retention();
        if n > 0 {
            self.delete_front(n, false);
        }
    }

    /// Deletes the `n` oldest segments (retention, or eviction by `drop_oldest`), then
    /// wakes whoever waits for room in the budget ([`Shared::room`]).
    fn delete_front(&mut self, n: usize, evict: bool) -> bool {
        let deleted = self.delete_front_files(n, evict);
        self.shared.room.notify_waiters();
        deleted
    }

    fn delete_front_files(&mut self, n: usize, evict: bool) -> bool {
        let firsts = {
            let mut core = self.shared.core();
            let firsts = core.pop_front(n, evict);
            self.shared
                .disk_bytes
                .store(core.disk_bytes, Ordering::Relaxed);
            firsts
        };
        for first in &firsts {
            let path = segment_path(&self.shared.dir, *first);
            if let Err(e) = std::fs::remove_file(&path)
                && e.kind() != std::io::ErrorKind::NotFound
            {
                self.fail(format!("deleting {}: {e}", path.display()), None);
                return false;
            }
            if evict {
                tracing::warn!(segment = %path.display(), "WAL full: evicted the oldest segment (drop_oldest)");
            }
        }
        if !firsts.is_empty()
            && let Err(e) = sync_dir(&self.shared.dir)
        {
            self.fail(format!("fsync of the WAL directory: {e}"), None);
            return false;
        }
        true
    }

    /// Poisons the log and answers every job in hand with the error.
    fn fail(&mut self, cause: String, job: Option<Job>) {
        self.shared.poison(cause);
        let err = || self.shared.poison_error();
        if let Some(job) = job {
            let _ = job.reply.send(Err(err().unwrap_or(AppendError::Poisoned {
                cause: String::new(),
            })));
        }
        self.unflushed = 0;
        // Booked and handed to the file (or about to be), not fsynced: whole frames of
        // them may be on disk and recovered at the next start.
        let cause = match self.shared.poison_error() {
            Some(AppendError::Poisoned { cause }) => cause,
            _ => String::new(),
        };
        for (job, _) in self.written.drain(..) {
            let _ = job.reply.send(Err(AppendError::InDoubt {
                cause: cause.clone(),
            }));
        }
        self.fail_pending(|_| AppendError::Poisoned {
            cause: String::new(),
        });
    }

    fn fail_pending(&mut self, make: impl Fn(crate::batch::Batch) -> AppendError) {
        let mut inbox = lock(&self.shared.inbox);
        self.pending.extend(inbox.jobs.drain(..));
        drop(inbox);
        for job in self.pending.drain(..) {
            let err = self
                .shared
                .poison_error()
                .unwrap_or_else(|| make(job.batch));
            let _ = job.reply.send(Err(err));
        }
    }
}

/// `write_all` for a vectored write: retries short writes and interruptions.
fn write_all_vectored(file: &mut File, mut slices: &mut [IoSlice<'_>]) -> io::Result<()> {
    while !slices.is_empty() {
        match file.write_vectored(slices) {
            Ok(0) => {
                return Err(io::Error::new(
                    io::ErrorKind::WriteZero,
                    "the file accepted no more bytes",
                ));
            }
            Ok(n) => IoSlice::advance_slices(&mut slices, n),
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
}
