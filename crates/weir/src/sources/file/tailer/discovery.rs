//! How the tailer finds and follows files: the listings, the notifications, the
//! startup's matching of saved positions and rotated files, renames, and files that
//! vanished while they waited.

use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::time::Instant;

use super::{SWEEP_MARGIN, Tailer};
use crate::sources::file::files::{self, Tracked};
use crate::sources::file::identity::Inode;
use crate::sources::file::paths::Patterns;
use crate::sources::file::status::FileState;
use crate::sources::file::watch::Wake;

impl Tailer {
    /// The first listing: files found now may start at their end (`read_from`), saved
    /// positions whose files are not under the glob are looked for beside their paths.
    pub(in crate::sources::file) fn startup(&mut self) {
        let now = Instant::now();
        self.scan(now, true);
        let unclaimed: Vec<_> = self.ctx.resume.unclaimed().to_vec();
        for (id, saved) in unclaimed {
            if self.by_inode.contains_key(&saved.inode) {
                continue;
            }
            let dir = saved.path.parent().unwrap_or(Path::new("."));
            match files::find_inode(dir, saved.inode, Some(saved.fingerprint)) {
                Some(path) => {
                    tracing::info!(
                        source = %self.ctx.settings.name,
                        "file: {} is now {}: reading it from its saved position ({}) to its end",
                        saved.path.display(),
                        path.display(),
                        saved.position
                    );
                    let mut f = Tracked::new(&mut self.ctx, path, saved.inode, saved.size, now);
                    f.rotated = true;
                    self.add(f, true);
                }
                None if saved.size > saved.position => {
                    tracing::warn!(
                        source = %self.ctx.settings.name,
                        "file: {} is gone; {} bytes of it past position {} were never read (it was rotated and removed while weir was stopped)",
                        saved.path.display(),
                        saved.size - saved.position,
                        saved.position
                    );
                    self.ctx
                        .shared
                        .count(|c| &c.lost_bytes, saved.size - saved.position);
                    let _ = id;
                }
                None => {}
            }
        }
        self.sweep_rotated(now);
        if self.files.is_empty() {
            tracing::warn!(
                source = %self.ctx.settings.name,
                "file: no file matches {} yet; {} is watched and listed every scan_interval",
                self.patterns_text(),
                self.patterns.base().display()
            );
        }
    }

    /// At start, after a stop or a crash: rotated files beside the followed ones
    /// (`app.log.1` of `app.log`) that the store does not know and that were renamed or
    /// written since shortly before its last write were never read durably: rotated
    /// while weir was stopped, or between its last looks before a crash. They are read
    /// from their start.
    fn sweep_rotated(&mut self, now: Instant) {
        use std::os::unix::fs::MetadataExt;
        let Some(written) = self.ctx.resume.written else {
            return; // the first start: rotated files of the past are not read
        };
        let margin = self.ctx.settings.rotate_wait.max(SWEEP_MARGIN);
        let since = written
            .checked_sub(margin)
            .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
            .map_or(0, |d| d.as_secs());
        let known: HashSet<Inode> = self
            .ctx
            .resume
            .unclaimed()
            .iter()
            .map(|(_, s)| s.inode)
            .chain(self.by_inode.keys().copied())
            .collect();
        let mut names: Vec<(PathBuf, String)> = self
            .files
            .values()
            .map(|f| f.path.clone())
            .chain(
                self.ctx
                    .resume
                    .unclaimed()
                    .iter()
                    .map(|(_, s)| s.path.clone()),
            )
            .filter_map(|p| Some((p.parent()?.to_owned(), p.file_name()?.to_str()?.to_owned())))
            .collect();
        names.sort();
        names.dedup();
        let mut dirs: Vec<&PathBuf> = names.iter().map(|(d, _)| d).collect();
        dirs.dedup();
        let mut found = Vec::new();
        for dir in dirs {
            let Ok(entries) = std::fs::read_dir(dir) else {
                continue;
            };
            for entry in entries.flatten() {
                let name = entry.file_name().to_string_lossy().into_owned();
                let rotated = names
                    .iter()
                    .any(|(d, of)| d == dir && Patterns::rotated_name_of(&name, of));
                let Ok(meta) = entry.metadata() else { continue };
                let recent = u64::try_from(meta.ctime()).unwrap_or(0) >= since;
                if rotated && recent && meta.is_file() && !known.contains(&Inode::of(&meta)) {
                    found.push((entry.path(), Inode::of(&meta), meta.len()));
                }
            }
        }
        for (path, inode, size) in found {
            tracing::info!(
                source = %self.ctx.settings.name,
                "file: {} was rotated after weir last saved its positions, before it was read: reading it from its start",
                path.display()
            );
            let mut f = Tracked::new(&mut self.ctx, path, inode, size, now);
            f.rotated = true;
            self.add(f, true);
        }
    }

    fn patterns_text(&self) -> String {
        self.ctx.settings.path.display().to_string()
    }

    pub(super) fn on_wake(&mut self, wake: Wake, now: Instant) {
        match wake {
            Wake::Data => {}
            Wake::Path(path) => self.on_path(&path, now),
            Wake::Renamed(from, to) => {
                self.renamed(&from, &to);
                self.on_path(&from, now);
                self.on_path(&to, now);
                if self.patterns.matches(&from) && !self.patterns.matches(&to) {
                    self.left_glob(to, now);
                }
            }
        }
    }

    /// A followed file was renamed: it is known by its new name from now on; renamed out
    /// of the glob, it is rotated (read to its end, then released).
    fn renamed(&mut self, from: &Path, to: &Path) {
        let Ok(meta) = std::fs::metadata(to) else {
            return;
        };
        let Some(&id) = self.by_inode.get(&Inode::of(&meta)) else {
            return;
        };
        let f = self.files.get_mut(&id).expect("indexed");
        if f.path != from {
            return;
        }
        f.set_path(to.to_owned());
        let rotated_now = !f.rotated && !self.patterns.matches(to);
        let closed = f.file.is_none();
        if rotated_now {
            tracing::info!(
                source = %self.ctx.settings.name,
                "file: {} was rotated to {}; reading it to its end, then releasing it after rotate_wait ({:?}) without growth",
                from.display(),
                to.display(),
                self.ctx.settings.rotate_wait
            );
            f.rotated = true;
            if !closed {
                f.state = FileState::Rotated;
            }
            self.ctx.shared.count(|c| &c.rotations, 1);
        }
        f.show(&self.ctx.shared);
        if rotated_now && closed {
            // Closed while it waited: opened again, first, to read what it has.
            self.queue.retain(|&q| q != id);
            self.queue.push_front(id);
        }
    }

    /// A file renamed out of the glob: if it was never followed (it lived between two
    /// looks), it is read whole, as a rotated file.
    fn left_glob(&mut self, path: PathBuf, now: Instant) {
        let Ok(meta) = std::fs::metadata(&path) else {
            return;
        };
        let inode = Inode::of(&meta);
        if !meta.is_file() || self.by_inode.contains_key(&inode) {
            return;
        }
        tracing::info!(
            source = %self.ctx.settings.name,
            "file: {} was rotated before it could be read; reading it whole",
            path.display()
        );
        let mut f = Tracked::new(&mut self.ctx, path, inode, meta.len(), now);
        f.rotated = true;
        self.add(f, true);
    }

    fn on_path(&mut self, path: &Path, now: Instant) {
        if self.patterns.matches(path) {
            self.discover(path, now, false);
        }
        let rotated: Vec<u64> = self
            .open
            .iter()
            .copied()
            .filter(|id| {
                self.files
                    .get(id)
                    .is_some_and(|f| !f.rotated && f.path == path)
            })
            .collect();
        for id in rotated {
            self.check_path(id, now);
        }
    }

    /// Lists the glob's matches: new files are queued, renamed ones followed, closed
    /// ones that vanished looked for.
    pub(super) fn scan(&mut self, now: Instant, startup: bool) {
        self.next_scan = now + self.ctx.settings.scan_interval;
        let base = self.patterns.base().to_owned();
        let recursive = self.patterns.depth() != Some(1);
        if let Err(e) = self.watch.ensure(&base, recursive)
            && base.exists()
            && self.warned.insert(format!("watch {e}"))
        {
            tracing::warn!(
                source = %self.ctx.settings.name,
                "file: cannot watch {}: {e}; new files are found by listing every scan_interval",
                base.display()
            );
        }
        let (paths, errors) = self.patterns.list();
        for e in errors {
            if self.warned.insert(e.clone()) {
                tracing::warn!(source = %self.ctx.settings.name, "file: listing {}: {e}", base.display());
            }
        }
        let mut found = Vec::new();
        let mut seen = HashSet::new();
        for path in &paths {
            if let Some((inode, new)) = self.discover_quiet(path, now, startup) {
                seen.insert(inode);
                found.extend(new);
            }
        }
        // New files wait oldest first.
        found.sort_by_key(|(mtime, _)| *mtime);
        for (_, id) in found {
            self.queue.push_back(id);
        }
        let vanished: Vec<u64> = self
            .files
            .values()
            .filter(|f| f.file.is_none() && !f.rotated && !seen.contains(&f.inode))
            .filter(|f| matches!(f.state, FileState::Waiting | FileState::Error))
            .map(|f| f.id)
            .collect();
        for id in vanished {
            self.vanished(id, now);
        }
        let gone_binary: Vec<u64> = self
            .files
            .values()
            .filter(|f| f.state == FileState::Binary && !seen.contains(&f.inode))
            .map(|f| f.id)
            .collect();
        for id in gone_binary {
            self.forget(id);
        }
    }

    /// A path a notification named.
    pub(super) fn discover(&mut self, path: &Path, now: Instant, startup: bool) {
        if let Some((_, Some((_, id)))) = self.discover_quiet(path, now, startup) {
            self.queue.push_back(id);
        }
    }

    /// Looks at `path`: returns its inode, and a new file's modification time and id
    /// (not yet queued).
    #[allow(clippy::type_complexity, reason = "one private helper")]
    fn discover_quiet(
        &mut self,
        path: &Path,
        now: Instant,
        startup: bool,
    ) -> Option<(Inode, Option<(std::time::SystemTime, u64)>)> {
        let meta = std::fs::metadata(path).ok()?;
        if !meta.is_file() {
            return None;
        }
        let inode = Inode::of(&meta);
        if let Some(&id) = self.by_inode.get(&inode) {
            let f = self.files.get_mut(&id).expect("indexed");
            if f.path != path && !f.rotated {
                f.set_path(path.to_owned());
                f.show(&self.ctx.shared);
            }
            // A closed file that grew goes back in the queue.
            let grew = meta.len() != f.size;
            if f.file.is_none()
                && f.state == FileState::Waiting
                && grew
                && !self.queue.contains(&id)
            {
                f.size = meta.len();
                self.queue.push_back(id);
            }
            return Some((inode, None));
        }
        let mut f = Tracked::new(&mut self.ctx, path.to_owned(), inode, meta.len(), now);
        f.at_startup = startup;
        f.show(&self.ctx.shared);
        let id = f.id;
        self.by_inode.insert(inode, id);
        self.files.insert(id, f);
        let mtime = meta.modified().unwrap_or(std::time::UNIX_EPOCH);
        Some((inode, Some((mtime, id))))
    }

    /// A closed file is no longer at its path: looked for beside it by inode (it was
    /// rotated while it waited), else forgotten, its unread bytes counted.
    pub(super) fn vanished(&mut self, id: u64, now: Instant) {
        let Some(f) = self.files.get_mut(&id) else {
            return;
        };
        let dir = f.path.parent().unwrap_or(Path::new(".")).to_owned();
        let fingerprint = (f.fingerprint.len > 0).then_some(f.fingerprint);
        if let Some(path) = files::find_inode(&dir, f.inode, fingerprint) {
            tracing::info!(
                source = %self.ctx.settings.name,
                "file: {} was rotated to {} while it waited; reading it to its end",
                f.path.display(),
                path.display()
            );
            f.set_path(path);
            f.rotated = true;
            self.queue.retain(|&q| q != id);
            self.queue.push_front(id);
            let _ = now;
            return;
        }
        let unread = f.size.saturating_sub(f.read_at);
        if unread > 0 {
            tracing::warn!(
                source = %self.ctx.settings.name,
                "file: {} vanished while it waited for a slot (max_open_files = {}); {unread} bytes of it past position {} were not read",
                f.path.display(),
                self.ctx.settings.max_open,
                f.read_at
            );
            self.ctx.shared.count(|c| &c.lost_bytes, unread);
        }
        self.forget(id);
    }

    /// Looks at an open file's path: gone or another inode means it was rotated.
    pub(super) fn check_path(&mut self, id: u64, now: Instant) {
        let Some(f) = self.files.get_mut(&id) else {
            return;
        };
        if f.rotated {
            return;
        }
        let why = match std::fs::metadata(&f.path) {
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => "moved or deleted",
            Ok(meta) if Inode::of(&meta) != f.inode => "another file is at its path",
            _ => return,
        };
        tracing::info!(
            source = %self.ctx.settings.name,
            "file: {} was rotated ({why}); reading it to its end, then releasing it after rotate_wait ({:?}) without growth",
            f.path.display(),
            self.ctx.settings.rotate_wait
        );
        f.rotated = true;
        f.state = FileState::Rotated;
        f.show(&self.ctx.shared);
        self.ctx.shared.count(|c| &c.rotations, 1);
        let path = f.path.clone();
        if self.patterns.matches(&path) {
            self.discover(&path, now, false);
        }
    }
}
