//! Where each file was read to: one store per source,
//! `<data_dir>/sources/<name>.positions.json`, rewritten whole (temporary file,
//! fsync, rename, directory fsync) after batches become durable in the WAL.
//!
//! Each entry names a file by fingerprint, device and inode, with its last path, its
//! position (every byte before it is durable in the WAL or in the quarantine), and its
//! size when last seen. An entry whose file is no longer followed is dropped
//! `forget_after` after it was last seen.
//!
//! The position file of earlier versions (`<name>.position`, one number for one path)
//! is read when no store exists yet, applied to the file at `path`, and removed once the
//! store is written.

use std::io::{Read, Write};
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::identity::{Fingerprint, Inode};

/// The store's format version.
const VERSION: u32 = 1;

/// The largest store read (a corrupt or foreign file is refused, not read whole).
const MAX_STORE_BYTES: u64 = 64 * 1024 * 1024;

/// One file's saved position.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Saved {
    /// Its path when last seen.
    pub path: PathBuf,
    /// Its first bytes' hash.
    pub fingerprint: Fingerprint,
    /// Its device and inode.
    pub inode: Inode,
    /// Every byte before it is durable.
    pub position: u64,
    /// Its size when last seen.
    pub size: u64,
    /// When it was last followed (ms since the epoch).
    pub seen_unix_ms: u64,
}

#[derive(Serialize, Deserialize)]
struct StoreFile {
    version: u32,
    files: Vec<Saved>,
}

/// What a store held at startup.
#[derive(Debug, Default)]
pub struct Loaded {
    /// Every entry.
    pub files: Vec<Saved>,
    /// The position of the older single-file store, if only that exists.
    pub legacy: Option<u64>,
    /// When the store was last written.
    pub written: Option<std::time::SystemTime>,
}

/// One source's position store.
#[derive(Debug, Clone)]
pub struct Store {
    path: PathBuf,
    legacy: PathBuf,
}

impl Store {
    /// The store of source `name` under `data_dir`.
    pub fn new(data_dir: &Path, name: &str) -> Self {
        let dir = data_dir.join("sources");
        Store {
            path: dir.join(format!("{name}.positions.json")),
            legacy: dir.join(format!("{name}.position")),
        }
    }

    /// The store's path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Reads the store (or the older position file).
    ///
    /// # Errors
    ///
    /// A store that cannot be read or parsed, with what to do.
    pub fn load(&self) -> Result<Loaded, String> {
        match read_limited(&self.path) {
            Ok(Some(bytes)) => {
                let store: StoreFile = serde_json::from_slice(&bytes).map_err(|e| {
                    format!(
                        "{} is not a position store ({e}); move it away to read every file from its start",
                        self.path.display()
                    )
                })?;
                if store.version != VERSION {
                    return Err(format!(
                        "{} has version {}, this weir reads version {VERSION}",
                        self.path.display(),
                        store.version
                    ));
                }
                let written = std::fs::metadata(&self.path)
                    .and_then(|m| m.modified())
                    .ok();
                Ok(Loaded {
                    files: store.files,
                    legacy: None,
                    written,
                })
            }
            Ok(None) => {
                let legacy = match read_limited(&self.legacy) {
                    Ok(Some(bytes)) => Some(
                        std::str::from_utf8(&bytes)
                            .ok()
                            .and_then(|s| s.trim().parse().ok())
                            .ok_or_else(|| {
                                format!(
                                    "{} is not a byte position; delete it to read from the start",
                                    self.legacy.display()
                                )
                            })?,
                    ),
                    Ok(None) => None,
                    Err(e) => return Err(format!("reading {}: {e}", self.legacy.display())),
                };
                Ok(Loaded {
                    files: Vec::new(),
                    legacy,
                    written: None,
                })
            }
            Err(e) => Err(format!("reading {}: {e}", self.path.display())),
        }
    }

    /// Writes `files` as the whole store, durably; then removes the older position file.
    ///
    /// # Errors
    ///
    /// A failed write, fsync or rename.
    pub fn save(&self, files: &[Saved]) -> std::io::Result<()> {
        let dir = self.path.parent().unwrap_or(Path::new("."));
        std::fs::create_dir_all(dir)?;
        let tmp = self.path.with_extension("json.tmp");
        let store = StoreFile {
            version: VERSION,
            files: files.to_vec(),
        };
        let mut f = std::fs::File::create(&tmp)?;
        let bytes = serde_json::to_vec(&store).map_err(std::io::Error::other)?;
        f.write_all(&bytes)?;
        f.sync_all()?;
        std::fs::rename(&tmp, &self.path)?;
        match std::fs::remove_file(&self.legacy) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(e),
        }
        std::fs::File::open(dir)?.sync_all()
    }
}

fn read_limited(path: &Path) -> std::io::Result<Option<Vec<u8>>> {
    let file = match std::fs::File::open(path) {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(e),
    };
    let mut bytes = Vec::new();
    file.take(MAX_STORE_BYTES + 1).read_to_end(&mut bytes)?;
    if bytes.len() as u64 > MAX_STORE_BYTES {
        return Err(std::io::Error::other(format!(
            "larger than {MAX_STORE_BYTES} bytes"
        )));
    }
    Ok(Some(bytes))
}

/// The saved positions not yet matched to a file, matched as files are opened.
#[derive(Debug, Default)]
pub struct Resume {
    /// Entries with the id they were given at load.
    unclaimed: Vec<(u64, Saved)>,
    /// The older store's position, for the file at `path`.
    legacy: Option<(PathBuf, u64)>,
    /// When the store was last written (none: no store yet).
    pub written: Option<std::time::SystemTime>,
}

/// What a file opened for the first time resumes from.
#[derive(Debug, PartialEq, Eq)]
pub enum Claim {
    /// A saved entry: its id and position.
    Saved(u64, Saved),
    /// The older store's position.
    Legacy(u64),
    /// Nothing saved; the entry with this file's inode and path did not match its
    /// fingerprint (the file was truncated or replaced while weir was stopped): its id
    /// and what it held.
    Changed(u64, Saved),
    /// Nothing saved.
    New,
}

impl Resume {
    /// Entries to match, and the older store's position for `path`.
    pub fn new(unclaimed: Vec<(u64, Saved)>, legacy: Option<(PathBuf, u64)>) -> Self {
        Resume {
            unclaimed,
            legacy,
            written: None,
        }
    }

    /// The entries not matched yet.
    pub fn unclaimed(&self) -> &[(u64, Saved)] {
        &self.unclaimed
    }

    /// Takes the entry for the file at `path` with `inode` whose first bytes are `head`:
    /// the one whose fingerprint `head` reproduces, preferring the same inode.
    pub fn claim(&mut self, path: &Path, inode: Inode, head: &[u8]) -> Claim {
        // Entries mostly share one length (fingerprint_bytes): hash each length once.
        let mut hashes: Vec<(u32, Fingerprint)> = Vec::new();
        let mut matches = |s: &Saved| {
            let len = s.fingerprint.len;
            if len == 0 || len as usize > head.len() {
                return false;
            }
            let fp = match hashes.iter().find(|(l, _)| *l == len) {
                Some((_, fp)) => *fp,
                None => {
                    let fp = Fingerprint::of(&head[..len as usize]);
                    hashes.push((len, fp));
                    fp
                }
            };
            fp == s.fingerprint
        };
        let found = self
            .unclaimed
            .iter()
            .position(|(_, s)| s.inode == inode && matches(s))
            .or_else(|| self.unclaimed.iter().position(|(_, s)| matches(s)));
        if let Some(i) = found {
            let (id, saved) = self.unclaimed.swap_remove(i);
            return Claim::Saved(id, saved);
        }
        if let Some((legacy_path, position)) = &self.legacy
            && legacy_path == path
        {
            let position = *position;
            self.legacy = None;
            return Claim::Legacy(position);
        }
        if let Some(i) = self
            .unclaimed
            .iter()
            .position(|(_, s)| s.inode == inode && s.path == path)
        {
            let (id, saved) = self.unclaimed.swap_remove(i);
            return Claim::Changed(id, saved);
        }
        Claim::New
    }

    /// Keeps the position of a file no longer followed, in case it is found again.
    pub fn remember(&mut self, id: u64, saved: Saved) {
        self.unclaimed.push((id, saved));
    }

    /// Drops entries last seen before `before_unix_ms`.
    pub fn expire(&mut self, before_unix_ms: u64) {
        self.unclaimed
            .retain(|(_, s)| s.seen_unix_ms >= before_unix_ms);
    }
}

/// The store's entries as the task keeps them, by file id: what is durable.
#[derive(Debug, Default)]
pub struct Table {
    entries: std::collections::BTreeMap<u64, Entry>,
}

#[derive(Debug, Clone)]
struct Entry {
    saved: Saved,
    /// When the file stopped being followed (ms since the epoch).
    released_ms: Option<u64>,
}

impl Table {
    /// The loaded entries, numbered from 1, none of them followed yet; with the list
    /// for [`Resume`]. `forget_after` counts from `now_ms` for them (not from when
    /// they were last seen): a long stop forgets nothing.
    pub fn load(files: Vec<Saved>, now_ms: u64) -> (Self, Vec<(u64, Saved)>) {
        let mut table = Table::default();
        let mut unclaimed = Vec::with_capacity(files.len());
        for (i, mut saved) in files.into_iter().enumerate() {
            let id = i as u64 + 1;
            let mut seen = saved.clone();
            seen.seen_unix_ms = now_ms;
            unclaimed.push((id, seen));
            saved.seen_unix_ms = saved.seen_unix_ms.min(now_ms);
            table.entries.insert(
                id,
                Entry {
                    saved,
                    released_ms: Some(now_ms),
                },
            );
        }
        (table, unclaimed)
    }

    /// The first id not taken.
    pub fn next_id(&self) -> u64 {
        self.entries.keys().next_back().map_or(1, |id| id + 1)
    }

    /// A file's identity is known (or changed): `replaces` moves an earlier entry's
    /// position to it.
    pub fn update(&mut self, update: &super::chunk::FileUpdate) {
        let old = update.replaces.and_then(|old| self.entries.remove(&old));
        let position = old
            .as_ref()
            .map(|e| e.saved.position)
            .or_else(|| self.entries.get(&update.id).map(|e| e.saved.position))
            .unwrap_or(0);
        let size = self.entries.get(&update.id).map_or(0, |e| e.saved.size);
        self.entries.insert(
            update.id,
            Entry {
                saved: Saved {
                    path: update.path.clone(),
                    fingerprint: update.fingerprint,
                    inode: update.inode,
                    position,
                    size,
                    seen_unix_ms: 0,
                },
                released_ms: None,
            },
        );
    }

    /// Every byte of file `id` before `position` is durable.
    pub fn set_position(&mut self, id: u64, position: u64) {
        if let Some(e) = self.entries.get_mut(&id) {
            e.saved.position = position;
        }
    }

    /// File `id` is no longer followed.
    pub fn release(&mut self, id: u64, now_ms: u64) {
        if let Some(e) = self.entries.get_mut(&id) {
            e.released_ms = Some(now_ms);
        }
    }

    /// The entries to write now, with the sizes `size` reports; entries released more
    /// than `forget_after_ms` ago are dropped, and their ids returned.
    pub fn snapshot(
        &mut self,
        now_ms: u64,
        forget_after_ms: u64,
        size: impl Fn(u64) -> Option<u64>,
    ) -> (Vec<Saved>, Vec<u64>) {
        let mut forgotten = Vec::new();
        self.entries.retain(|id, e| {
            let keep = e
                .released_ms
                .is_none_or(|at| now_ms.saturating_sub(at) <= forget_after_ms);
            if !keep {
                forgotten.push(*id);
            }
            keep
        });
        let mut files = Vec::with_capacity(self.entries.len());
        for (id, e) in &mut self.entries {
            // An entry for an empty file start (no fingerprint yet) matches nothing.
            if e.saved.fingerprint.len == 0 {
                continue;
            }
            if e.released_ms.is_none() {
                e.saved.seen_unix_ms = now_ms;
                if let Some(size) = size(*id) {
                    e.saved.size = size;
                }
            }
            files.push(e.saved.clone());
        }
        (files, forgotten)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn saved(path: &str, head: &[u8], ino: u64, position: u64) -> Saved {
        Saved {
            path: path.into(),
            fingerprint: Fingerprint::of(head),
            inode: Inode { dev: 1, ino },
            position,
            size: position,
            seen_unix_ms: 1000,
        }
    }

    #[test]
    fn the_store_round_trips_and_replaces_the_old_position_file() {
        let tmp = tempfile::tempdir().unwrap();
        let store = Store::new(tmp.path(), "tail");
        assert!(store.load().unwrap().files.is_empty());
        std::fs::create_dir_all(tmp.path().join("sources")).unwrap();
        std::fs::write(tmp.path().join("sources/tail.position"), "1234\n").unwrap();
        assert_eq!(store.load().unwrap().legacy, Some(1234));
        let files = vec![saved("/l/a.log", b"abc", 7, 99)];
        store.save(&files).unwrap();
        assert!(!tmp.path().join("sources/tail.position").exists());
        let loaded = store.load().unwrap();
        assert_eq!((loaded.files, loaded.legacy), (files, None));
        std::fs::write(store.path(), "{").unwrap();
        assert!(store.load().unwrap_err().contains("not a position store"));
    }

    #[test]
    fn claims_match_by_fingerprint_preferring_the_inode() {
        let head = b"first line\nsecond line\n";
        let mut resume = Resume::new(
            vec![
                (1, saved("/l/a.log", &head[..11], 5, 11)),
                (2, saved("/l/b.log", &head[..11], 6, 20)),
                (3, saved("/l/c.log", b"other", 8, 5)),
            ],
            Some(("/l/legacy.log".into(), 42)),
        );
        // Renamed while stopped: same inode, fingerprint of its (then shorter) start.
        let claim = resume.claim(Path::new("/l/a.log.1"), Inode { dev: 1, ino: 6 }, head);
        assert!(
            matches!(claim, Claim::Saved(2, ref s) if s.position == 20),
            "{claim:?}"
        );
        // Copied elsewhere (new inode): the fingerprint alone.
        let claim = resume.claim(Path::new("/x/a.log"), Inode { dev: 2, ino: 1 }, head);
        assert!(matches!(claim, Claim::Saved(1, _)), "{claim:?}");
        // Same inode and path, other content: truncated or replaced.
        let claim = resume.claim(Path::new("/l/c.log"), Inode { dev: 1, ino: 8 }, b"new!!");
        assert!(
            matches!(claim, Claim::Changed(3, ref s) if s.position == 5),
            "{claim:?}"
        );
        assert_eq!(
            resume.claim(Path::new("/l/legacy.log"), Inode { dev: 1, ino: 9 }, b"x"),
            Claim::Legacy(42)
        );
        assert_eq!(
            resume.claim(Path::new("/l/legacy.log"), Inode { dev: 1, ino: 9 }, b"x"),
            Claim::New
        );
        // An inode reused by a file with another start is not the saved file.
        let mut resume = Resume::new(vec![(1, saved("/l/a.log", b"old start", 5, 9))], None);
        let claim = resume.claim(
            Path::new("/l/b.log"),
            Inode { dev: 1, ino: 5 },
            b"new start",
        );
        assert_eq!(claim, Claim::New);
    }
}

#[cfg(test)]
mod table_tests {
    use super::*;
    use crate::sources::file::chunk::FileUpdate;

    #[test]
    fn entries_move_follow_and_expire() {
        let old = Saved {
            path: "/l/a.log".into(),
            fingerprint: Fingerprint::of(b"abc"),
            inode: Inode { dev: 1, ino: 2 },
            position: 40,
            size: 50,
            seen_unix_ms: 1_000,
        };
        let (mut table, unclaimed) = Table::load(vec![old.clone()], 2_000);
        assert_eq!(unclaimed[0].0, 1);
        assert_eq!(
            unclaimed[0].1.seen_unix_ms, 2_000,
            "forget_after counts from the start"
        );
        assert_eq!(table.next_id(), 2);
        // Matched to file 7 (renamed): the position moves with it.
        table.update(&FileUpdate {
            id: 7,
            path: "/l/a.log.1".into(),
            fingerprint: old.fingerprint,
            inode: old.inode,
            replaces: Some(1),
        });
        table.set_position(7, 45);
        let (files, forgotten) = table.snapshot(5_000, 1_000, |_| Some(60));
        assert!(forgotten.is_empty());
        assert_eq!(files.len(), 1);
        assert_eq!(
            (files[0].position, files[0].size, files[0].seen_unix_ms),
            (45, 60, 5_000)
        );
        assert_eq!(files[0].path, Path::new("/l/a.log.1"));
        // Released, then forgotten after forget_after.
        table.release(7, 6_000);
        assert_eq!(table.snapshot(7_000, 1_000, |_| None).0.len(), 1);
        assert_eq!(table.snapshot(7_001, 1_000, |_| None), (vec![], vec![7]));
    }
}
