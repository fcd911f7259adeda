//! Filesystem notifications (inotify, through `notify`) that wake the tailer.
//!
//! The watcher's own thread hands the tailer: the paths of files created, renamed or
//! removed (so a new file is found at once, and a rotation is seen at once), and a
//! single "data changed" wake-up however many writes happened. The hand-over is a
//! bounded channel: when it is full, or the kernel's queue overflowed, or the watcher
//! reports an error, the tailer is told to list the directories again. Notifications
//! are an optimisation; the periodic listing (`scan_interval`) and the polling of open
//! files are what guarantee that nothing is missed.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{Receiver, RecvTimeoutError, SyncSender, TrySendError};
use std::time::Duration;

use notify::event::{ModifyKind, RenameMode};
use notify::{EventKind, RecursiveMode, Watcher};

/// Paths held between the watcher's thread and the tailer.
const QUEUE: usize = 4096;

/// What woke the tailer.
#[derive(Debug, PartialEq, Eq)]
pub enum Wake {
    /// A file was created, renamed or removed at this path.
    Path(PathBuf),
    /// A file was renamed from the first path to the second.
    Renamed(PathBuf, PathBuf),
    /// Some file's data changed.
    Data,
}

/// The watcher and its channel.
pub struct Watch {
    watcher: Option<notify::RecommendedWatcher>,
    /// Directories watched.
    watched: Vec<PathBuf>,
    rx: Receiver<Wake>,
    /// Notifications were lost: list the directories again.
    rescan: Arc<AtomicBool>,
    /// A [`Wake::Data`] is in the channel.
    data_queued: Arc<AtomicBool>,
    /// Kept so that the channel never reports disconnection while the watcher is off.
    _tx: SyncSender<Wake>,
}

impl std::fmt::Debug for Watch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Watch")
            .field("watched", &self.watched)
            .finish_non_exhaustive()
    }
}

impl Watch {
    /// Starts the watcher thread. Without inotify (or out of inotify instances), the
    /// tailer works by listing and polling alone; the error says why.
    pub fn new() -> (Self, Option<String>) {
        let (tx, rx) = std::sync::mpsc::sync_channel(QUEUE);
        let rescan = Arc::new(AtomicBool::new(false));
        let data_queued = Arc::new(AtomicBool::new(false));
        let handler = {
            let (tx, rescan, data_queued) =
                (tx.clone(), Arc::clone(&rescan), Arc::clone(&data_queued));
            move |event: notify::Result<notify::Event>| {
                let event = match event {
                    Ok(event) if !event.need_rescan() => event,
                    _ => {
                        rescan.store(true, Ordering::Release);
                        let _ = tx.try_send(Wake::Data);
                        return;
                    }
                };
                let send = |wake| {
                    if let Err(TrySendError::Full(_)) = tx.try_send(wake) {
                        rescan.store(true, Ordering::Release);
                    }
                };
                match event.kind {
                    EventKind::Modify(ModifyKind::Name(RenameMode::Both))
                        if event.paths.len() == 2 =>
                    {
                        let mut paths = event.paths.into_iter();
                        let (from, to) = (paths.next().expect("two"), paths.next().expect("two"));
                        send(Wake::Renamed(from, to));
                    }
                    EventKind::Create(_)
                    | EventKind::Remove(_)
                    | EventKind::Modify(ModifyKind::Name(_)) => {
                        for path in event.paths {
                            send(Wake::Path(path));
                        }
                    }
                    EventKind::Access(_) => {}
                    _ => {
                        if !data_queued.swap(true, Ordering::AcqRel)
                            && tx.try_send(Wake::Data).is_err()
                        {
                            data_queued.store(false, Ordering::Release);
                        }
                    }
                }
            }
        };
        let (watcher, error) = match notify::recommended_watcher(handler) {
            Ok(w) => (Some(w), None),
            Err(e) => (None, Some(e.to_string())),
        };
        let watch = Watch {
            watcher,
            watched: Vec::new(),
            rx,
            rescan,
            data_queued,
            _tx: tx,
        };
        (watch, error)
    }

    /// Watches `dir` (and below it with `recursive`), once. `Ok(false)` when there is no
    /// watcher.
    ///
    /// # Errors
    ///
    /// The directory cannot be watched (it does not exist yet, or the inotify watch
    /// limit is reached): the caller tries again at its next listing.
    pub fn ensure(&mut self, dir: &Path, recursive: bool) -> Result<bool, String> {
        let Some(watcher) = &mut self.watcher else {
            return Ok(false);
        };
        if self.watched.iter().any(|w| w == dir) {
            return Ok(true);
        }
        let mode = if recursive {
            RecursiveMode::Recursive
        } else {
            RecursiveMode::NonRecursive
        };
        watcher.watch(dir, mode).map_err(|e| e.to_string())?;
        self.watched.push(dir.to_owned());
        Ok(true)
    }

    /// The next wake-up, waiting at most `timeout`.
    pub fn wait(&self, timeout: Duration) -> Option<Wake> {
        match self.rx.recv_timeout(timeout) {
            Ok(wake) => Some(self.taken(wake)),
            Err(RecvTimeoutError::Timeout | RecvTimeoutError::Disconnected) => None,
        }
    }

    /// The next wake-up already queued.
    pub fn try_next(&self) -> Option<Wake> {
        self.rx.try_recv().ok().map(|w| self.taken(w))
    }

    fn taken(&self, wake: Wake) -> Wake {
        if wake == Wake::Data {
            self.data_queued.store(false, Ordering::Release);
        }
        wake
    }

    /// Whether notifications were lost since the last call.
    pub fn take_rescan(&self) -> bool {
        self.rescan.swap(false, Ordering::AcqRel)
    }
}
