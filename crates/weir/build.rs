//! Records the git commit the binary is built from, for `weir --version`: the
//! environment variable `WEIR_GIT_COMMIT` holds `git rev-parse --short HEAD`, or
//! `unknown` when git or the repository is missing (a build from a source tarball).
//!
//! The script runs again only when the checked-out commit can have changed: when the
//! repository's `HEAD` file, the branch's ref file or `packed-refs` changes (those that
//! exist). So an edit to the sources rebuilds nothing more than it did without it.

use std::path::{Path, PathBuf};
use std::process::Command;

fn main() {
    let manifest_dir = PathBuf::from(std::env::var_os("CARGO_MANIFEST_DIR").unwrap_or_default());
    let commit = git(&manifest_dir, &["rev-parse", "--short", "HEAD"])
        // A tarball unpacked inside another repository: that repository's commit is
        // not this source's.
        .filter(|_| {
            git(
                &manifest_dir,
                &["ls-files", "--error-unmatch", "Cargo.toml"],
            )
            .is_some()
        })
        .unwrap_or_else(|| "unknown".to_owned());
    println!("cargo:rustc-env=WEIR_GIT_COMMIT={commit}");
    if commit == "unknown" {
        // Without git, nothing but a change of this script can change the answer.
        println!("cargo:rerun-if-changed=build.rs");
        return;
    }
    let mut watched = vec![PathBuf::from("build.rs")];
    for file in ["HEAD", "packed-refs"] {
        watched.extend(git_path(&manifest_dir, file));
    }
    if let Some(branch) = git(&manifest_dir, &["symbolic-ref", "-q", "HEAD"]) {
        watched.extend(git_path(&manifest_dir, &branch));
    }
    for path in watched.iter().filter(|p| manifest_dir.join(p).exists()) {
        println!("cargo:rerun-if-changed={}", path.display());
    }
}

/// The trimmed standard output of `git ARGS` run in `dir`, if it succeeded and said
/// something.
fn git(dir: &Path, args: &[&str]) -> Option<String> {
    let out = Command::new("git")
        .arg("-C")
        .arg(dir)
        .args(args)
        .output()
        .ok()?;
    let text = String::from_utf8(out.stdout).ok()?.trim().to_owned();
    (out.status.success() && !text.is_empty()).then_some(text)
}

/// Where git keeps `file` (`HEAD`, `packed-refs`, `refs/heads/…`): in a worktree,
/// `HEAD` is the worktree's own and the refs are the main repository's.
fn git_path(dir: &Path, file: &str) -> Option<PathBuf> {
    git(
        dir,
        &["rev-parse", "--path-format=absolute", "--git-path", file],
    )
    .map(PathBuf::from)
}
