//! A file that changed under the tailer: truncated (copytruncate; the rest of its old
//! content read from the copy when one is found), looked for by inode after a rename,
//! or read to its end and released after a rotation.

use std::fs::File;
use std::path::{Path, PathBuf};
use std::time::Instant;

use super::{Ctx, Tracked, assembled, flush_partial, turn};
use crate::sources::file::identity::{Fingerprint, Inode, read_head};
use crate::sources::file::multiline::Assembler;
use crate::sources::file::status::FileState;

/// `f` is shorter than its position, or its first bytes changed (copytruncate, or
/// rewritten in place). What it held before is read from its copy when one is found
/// beside it (copytruncate's), followed as a rotated file ([`Ctx::found`]); `f` is
/// read again from byte 0.
pub fn truncated(f: &mut Tracked, ctx: &mut Ctx, size: u64, why: &str, now: Instant) {
    let name = &ctx.settings.name;
    let path = f.path.display().to_string();
    let known_unread = f.size.saturating_sub(f.read_at);
    let copy = (f.read_at > 0 && f.fingerprint.len > 0)
        .then(|| find_copy(&f.path, f.inode, f.fingerprint, f.read_at))
        .flatten();
    ctx.shared.count(|c| &c.truncations, 1);
    match copy {
        Some((copy_path, file, inode, copy_size)) => {
            tracing::warn!(
                source = %name,
                "file: {path} was truncated ({why}); its bytes after position {} are read from its copy {} (copytruncate), then it is read again from byte 0",
                f.read_at,
                copy_path.display()
            );
            let mut c = Tracked::new(ctx, copy_path, inode, copy_size, now);
            c.file = Some(file);
            c.rotated = true;
            c.state = FileState::Rotated;
            c.opened_once = true;
            c.fingerprint = f.fingerprint;
            c.read_at = f.read_at;
            c.reported = f.read_at;
            c.lines = f.lines.clone();
            c.multiline = f.multiline.take();
            f.multiline = ctx.settings.multiline.as_ref().map(Assembler::new);
            ctx.builder.update(c.update(None));
            ctx.builder.position(c.id, c.read_at);
            ctx.shared
                .open_files
                .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            c.show(&ctx.shared);
            ctx.found.push(c);
        }
        None => {
            tracing::warn!(
                source = %name,
                "file: {path} was truncated ({why}) from {} to {size} bytes; reading it again from byte 0. {known_unread} bytes it had past position {} were not read (with copytruncate, lines written between the copy and the truncation cannot be read by any tailer)",
                f.size,
                f.read_at
            );
            ctx.shared
                .count(|c| &c.truncated_unread_bytes, known_unread);
            if let Some(r) = f.multiline.as_mut().and_then(Assembler::flush) {
                assembled(r, &f.origin, &mut ctx.builder, &ctx.shared);
            }
        }
    }
    f.lines.reset();
    f.read_at = 0;
    f.reported = 0;
    f.size = size;
    f.idle_at = None;
    f.fingerprint = Fingerprint::of(&[]);
    ctx.builder.update(f.update(None));
    ctx.builder.position(f.id, 0);
}

/// A file beside `path` (not `inode`) at least `min_size` long whose first bytes are
/// `fingerprint`'s: the copy copytruncate made.
fn find_copy(
    path: &Path,
    inode: Inode,
    fingerprint: Fingerprint,
    min_size: u64,
) -> Option<(PathBuf, File, Inode, u64)> {
    let dir = path.parent()?;
    let mut head = Vec::new();
    for entry in std::fs::read_dir(dir).ok()?.flatten() {
        let Ok(meta) = entry.metadata() else { continue };
        if !meta.is_file() || Inode::of(&meta) == inode || meta.len() < min_size {
            continue;
        }
        let Ok(file) = File::open(entry.path()) else {
            continue;
        };
        if read_head(&file, fingerprint.len as usize, &mut head).is_ok()
            && Fingerprint::of(&head) == fingerprint
        {
            let inode = Inode::of(&meta);
            return Some((entry.path(), file, inode, meta.len()));
        }
    }
    None
}

/// The file in `dir` with `inode` (and, when given, first bytes `fingerprint`'s).
pub fn find_inode(dir: &Path, inode: Inode, fingerprint: Option<Fingerprint>) -> Option<PathBuf> {
    let mut head = Vec::new();
    for entry in std::fs::read_dir(dir).ok()?.flatten() {
        let Ok(meta) = entry.metadata() else { continue };
        if !meta.is_file() || Inode::of(&meta) != inode {
            continue;
        }
        let Some(fp) = fingerprint else {
            return Some(entry.path());
        };
        let Ok(file) = File::open(entry.path()) else {
            continue;
        };
        if read_head(&file, fp.len as usize, &mut head).is_ok() && Fingerprint::of(&head) == fp {
            return Some(entry.path());
        }
    }
    None
}

/// Reads `f` to its end, emits what it holds (a partial last line, a multi-line
/// record), and closes it: a rotated file after `rotate_wait`.
pub fn release(f: &mut Tracked, ctx: &mut Ctx, now_ms: u64) {
    if f.file.is_some() {
        while !f.at_end() {
            match turn(f, ctx, Instant::now(), now_ms) {
                Ok(true) => {}
                Ok(false) => break,
                Err(e) => {
                    tracing::warn!(source = %ctx.settings.name, "file: reading {} before releasing it: {e}", f.path.display());
                    break;
                }
            }
        }
        if let Err(e) = flush_partial(f, ctx, now_ms) {
            tracing::warn!(source = %ctx.settings.name, "file: reading the last line of {}: {e}", f.path.display());
        }
    }
    if let Some(r) = f.multiline.as_mut().and_then(Assembler::flush) {
        assembled(r, &f.origin, &mut ctx.builder, &ctx.shared);
    }
    f.report(ctx);
    ctx.builder.release(f.id);
    ctx.shared.count(|c| &c.released, 1);
    tracing::info!(
        source = %ctx.settings.name,
        "file: {} released after its rotation ({} bytes read)",
        f.path.display(),
        f.read_at
    );
    close(f, ctx);
    f.state = FileState::Released;
    f.show(&ctx.shared);
}

/// Closes `f` (if open).
pub fn close(f: &mut Tracked, ctx: &Ctx) {
    if f.file.take().is_some() {
        ctx.shared
            .open_files
            .fetch_sub(1, std::sync::atomic::Ordering::Relaxed);
    }
}
