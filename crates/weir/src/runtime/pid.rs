//! `runtime.pid_file`: the daemon's process id, written while it runs, for
//! `weir reload CONFIG` (and any supervisor that wants it).
//!
//! The file holds the id and a newline. It is written whole (a temporary file, then a
//! rename), refused when it names another process that is alive (two daemons with one
//! pid file), taken over when it names a process that is gone (a crash), and removed
//! at exit if it still holds this process's id.

use std::path::{Path, PathBuf};

use anyhow::{Context as _, bail};

/// The pid file of this process; removed when dropped.
#[derive(Debug)]
pub struct PidFile {
    path: PathBuf,
}

/// Reads the process id in `path`.
///
/// # Errors
///
/// The file cannot be read or does not hold a process id.
pub fn read(path: &Path) -> anyhow::Result<i32> {
    let text = std::fs::read_to_string(path)
        .with_context(|| format!("reading the pid file {}", path.display()))?;
    let pid: i32 = text.trim().parse().with_context(|| {
        format!(
            "{} does not hold a process id (found {:?})",
            path.display(),
            text.trim()
        )
    })?;
    if pid <= 0 {
        bail!("{} holds {pid}, not a process id", path.display());
    }
    Ok(pid)
}

/// Whether process `pid` exists (it may belong to another user).
pub fn alive(pid: i32) -> bool {
    let Some(pid) = rustix::process::Pid::from_raw(pid) else {
        return false;
    };
    match rustix::process::test_kill_process(pid) {
        Ok(()) => true,
        Err(e) => e == rustix::io::Errno::PERM,
    }
}

impl PidFile {
    /// Writes this process's id to `path`.
    ///
    /// # Errors
    ///
    /// `path` names a live process other than this one, or cannot be written.
    pub fn create(path: &Path) -> anyhow::Result<Self> {
        let me = std::process::id();
        if let Ok(pid) = read(path)
            && u32::try_from(pid).ok() != Some(me)
            && alive(pid)
        {
            bail!(
                "{} names process {pid}, which is running: another weir uses this pid file; \
                 stop it, or give this one its own runtime.pid_file",
                path.display()
            );
        }
        let dir = path.parent().filter(|p| !p.as_os_str().is_empty());
        if let Some(dir) = dir {
            std::fs::create_dir_all(dir)
                .with_context(|| format!("creating the directory {}", dir.display()))?;
        }
        let tmp = path.with_extension("pid.tmp");
        std::fs::write(&tmp, format!("{me}\n"))
            .with_context(|| format!("writing {}", tmp.display()))?;
        std::fs::rename(&tmp, path).with_context(|| format!("writing {}", path.display()))?;
        Ok(Self {
            path: path.to_owned(),
        })
    }
}

impl Drop for PidFile {
    fn drop(&mut self) {
        if read(&self.path).ok().and_then(|p| u32::try_from(p).ok()) == Some(std::process::id()) {
            let _ = std::fs::remove_file(&self.path);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn written_while_held_removed_when_dropped() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("run/weir.pid");
        let file = PidFile::create(&path).unwrap();
        assert_eq!(
            read(&path).unwrap(),
            i32::try_from(std::process::id()).unwrap()
        );
        drop(file);
        assert!(!path.exists());
    }

    #[test]
    fn a_live_process_keeps_its_file_a_dead_one_does_not() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("weir.pid");
        // Process 1 is always alive.
        std::fs::write(&path, "1\n").unwrap();
        let err = PidFile::create(&path).unwrap_err();
        assert!(err.to_string().contains("process 1"), "{err}");
        // A process that exited: its id is free (reused only after a wrap-around).
        let mut child = std::process::Command::new("true").spawn().unwrap();
        let gone = child.id();
        child.wait().unwrap();
        std::fs::write(&path, format!("{gone}\n")).unwrap();
        let _file = PidFile::create(&path).unwrap();
        assert_eq!(
            read(&path).unwrap(),
            i32::try_from(std::process::id()).unwrap()
        );
        std::fs::write(&path, "weir\n").unwrap();
        assert!(read(&path).is_err());
    }
}
