//! A small filesystem for tests of what weir does when its disk, not its budget, runs
//! out: a tmpfs of a given size, mounted on a directory and unmounted when dropped.
//! Mounting needs root (CI runs as root); elsewhere the test says why it is skipped.

use std::path::{Path, PathBuf};
use std::process::Command;

/// A mounted tmpfs; unmounted on drop.
pub struct SmallFs {
    dir: PathBuf,
}

impl SmallFs {
    /// Mounts a tmpfs of `size` (`mount` syntax: `24m`) on `dir` (created), or prints
    /// why it cannot and returns `None`.
    pub fn mount(dir: &Path, size: &str) -> Option<SmallFs> {
        if !rustix::process::geteuid().is_root() {
            eprintln!("skipped: mounting a {size} tmpfs needs root (CI runs as root)");
            return None;
        }
        std::fs::create_dir_all(dir).unwrap();
        let out = Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={size}"), "tmpfs"])
            .arg(dir)
            .output();
        match out {
            Ok(out) if out.status.success() => Some(SmallFs {
                dir: dir.to_path_buf(),
            }),
            Ok(out) => {
                eprintln!(
                    "skipped: mount -t tmpfs failed: {}",
                    String::from_utf8_lossy(&out.stderr).trim()
                );
                None
            }
            Err(e) => {
                eprintln!("skipped: cannot run mount: {e}");
                None
            }
        }
    }

    pub fn path(&self) -> &Path {
        &self.dir
    }
}

impl Drop for SmallFs {
    fn drop(&mut self) {
        // Lazy: a process still holding a file there (weir killed by a failed
        // assertion) does not keep it mounted.
        let _ = Command::new("umount").arg("-l").arg(&self.dir).status();
    }
}
