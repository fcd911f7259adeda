//! Reading a turn of a file into chunks: complete lines only, long lines' heads read
//! again from the file, multi-line records assembled, the position reported past what
//! was taken.

use std::fs::File;
use std::os::unix::fs::FileExt;
use std::time::Instant;

use super::{BINARY_CHECK_BYTES, Ctx, Tracked, binary, blank, close, prefix_matches, truncated};
use crate::sources::file::chunk::{Builder, Origin};
use crate::sources::file::core::Piece;
use crate::sources::file::identity::{Fingerprint, read_head};
use crate::sources::file::multiline::{Assembled, Assembler};
use crate::sources::file::status::Shared;

/// Reads `buf.len()` bytes at `at`, or fewer at the end of the file.
fn read_full(file: &File, buf: &mut [u8], at: u64) -> std::io::Result<usize> {
    let mut filled = 0;
    while filled < buf.len() {
        match file.read_at(&mut buf[filled..], at + filled as u64) {
            Ok(0) => break,
            Ok(n) => filled += n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(filled)
}

/// A long line's head, read again from the file when the splitter did not keep it.
fn with_head<'a>(piece: Piece<'a>, file: &File, max_line_bytes: usize) -> Piece<'a> {
    match piece {
        Piece::Long {
            head,
            start,
            len,
            end,
        } if head.is_empty() && len > 0 => {
            let mut head = vec![
                0u8;
                usize::try_from(len)
                    .unwrap_or(usize::MAX)
                    .min(max_line_bytes)
            ];
            // A file truncated meanwhile gives what it still has.
            let n = read_full(file, &mut head, start).unwrap_or(0);
            head.truncate(n);
            Piece::Long {
                head,
                start,
                len,
                end,
            }
        }
        piece => piece,
    }
}

/// Hands a piece to the multi-line assembler or the chunk.
pub fn take(
    piece: Piece<'_>,
    origin: &Origin,
    multiline: &mut Option<Assembler>,
    builder: &mut Builder,
    shared: &Shared,
    now_ms: u64,
) {
    match piece {
        Piece::Line { bytes, start, end } => match multiline {
            Some(m) => m.push(bytes, start, end, now_ms, &mut |r| {
                assembled(r, origin, builder, shared)
            }),
            None if blank(bytes) => {}
            None => builder.record(origin, bytes, start, end),
        },
        Piece::Long {
            head,
            start,
            len,
            end,
        } => {
            if let Some(r) = multiline.as_mut().and_then(Assembler::flush) {
                assembled(r, origin, builder, shared);
            }
            builder.long_line(origin, &head, start, len, end);
        }
    }
}

/// A multi-line record, done.
pub fn assembled(r: Assembled, origin: &Origin, builder: &mut Builder, shared: &Shared) {
    if r.bounded {
        shared.count(|c| &c.multiline_bounded, 1);
    }
    if !blank(&r.bytes) {
        builder.record(origin, &r.bytes, r.start, r.end);
    }
}

/// Reads what `f` has (up to a buffer) into the chunk. Returns whether it read.
///
/// # Errors
///
/// A failed stat or read.
pub fn turn(f: &mut Tracked, ctx: &mut Ctx, now: Instant, now_ms: u64) -> std::io::Result<bool> {
    let Some(file) = &f.file else {
        return Ok(false);
    };
    let size = file.metadata()?.len();
    if size < f.read_at || size < f.size {
        truncated(f, ctx, size, "it shrank", now);
    } else if size > f.size {
        f.last_growth = now;
        f.size = size;
    }
    // A file shorter than fingerprint_bytes is fingerprinted again as it grows.
    let fp_len = u64::from(f.fingerprint.len);
    if fp_len < ctx.settings.fingerprint_bytes as u64 && f.size > fp_len {
        let file = f.file.as_ref().expect("open");
        read_head(file, ctx.settings.fingerprint_bytes, &mut ctx.head)?;
        if !prefix_matches(&ctx.head, f.fingerprint) {
            truncated(f, ctx, f.size, "its first bytes changed", now);
            return Ok(true);
        }
        if fp_len < BINARY_CHECK_BYTES as u64 && binary(ctx, f) {
            close(f, ctx);
            return Ok(false);
        }
        f.fingerprint = Fingerprint::of(&ctx.head);
        ctx.builder.update(f.update(None));
    }
    if f.at_end() {
        if let Some(wait) = ctx.settings.partial_flush
            && f.idle_at == Some(f.size)
            && now.duration_since(f.last_growth) >= wait
        {
            flush_partial(f, ctx, now_ms)?;
        }
        return Ok(false);
    }
    let file = f.file.as_ref().expect("open");
    let want = usize::try_from(f.size - f.read_at)
        .unwrap_or(usize::MAX)
        .min(ctx.buf.len());
    let at = f.read_at;
    let n = read_full(file, &mut ctx.buf[..want], at)?;
    // The file may have been truncated and rewritten while it was read: what was read
    // is used only if its first bytes are still the ones fingerprinted.
    if f.fingerprint.len > 0 {
        read_head(file, f.fingerprint.len as usize, &mut ctx.head)?;
        if Fingerprint::of(&ctx.head) != f.fingerprint {
            truncated(
                f,
                ctx,
                file.metadata()?.len(),
                "its first bytes changed",
                now,
            );
            return Ok(true);
        }
    }
    let (consumed, _) = hand_on(f, ctx, n, at, now_ms, false);
    f.read_at = at + consumed as u64;
    f.idle_at = (at + n as u64 >= f.size && consumed < n).then_some(f.size);
    f.report(ctx);
    f.show(&ctx.shared);
    Ok(n > 0)
}

/// Hands on the pieces of the `n` bytes of `f` read at `at` (in `ctx.buf`): its complete
/// lines, and with `flush` its partial last line too. Returns the bytes consumed and
/// whether a partial line was taken.
fn hand_on(
    f: &mut Tracked,
    ctx: &mut Ctx,
    n: usize,
    at: u64,
    now_ms: u64,
    flush: bool,
) -> (usize, bool) {
    let buf = std::mem::take(&mut ctx.buf);
    let Tracked {
        lines,
        multiline,
        origin,
        file,
        ..
    } = f;
    let file = file.as_ref().expect("open");
    let max = ctx.settings.max_line_bytes;
    let mut partial = false;
    let mut take_piece = |piece: Piece<'_>| {
        partial |= flush && matches!(piece, Piece::Line { .. });
        take(
            with_head(piece, file, max),
            origin,
            multiline,
            &mut ctx.builder,
            &ctx.shared,
            now_ms,
        );
    };
    let consumed = if flush {
        lines.flush(&buf[..n], at, &mut take_piece);
        n
    } else {
        lines.split(&buf[..n], at, &mut take_piece)
    };
    ctx.buf = buf;
    (consumed, partial)
}

/// Emits the partial last line (no newline), counted.
pub fn flush_partial(f: &mut Tracked, ctx: &mut Ctx, now_ms: u64) -> std::io::Result<()> {
    let Some(file) = &f.file else {
        return Ok(());
    };
    let at = f.read_at;
    let want = usize::try_from(f.size.saturating_sub(at))
        .unwrap_or(usize::MAX)
        .min(ctx.buf.len());
    let n = read_full(file, &mut ctx.buf[..want], at)?;
    let (_, emitted) = hand_on(f, ctx, n, at, now_ms, true);
    if emitted {
        ctx.shared.count(|c| &c.partial_lines, 1);
    }
    f.read_at = at + n as u64;
    f.idle_at = None;
    f.report(ctx);
    Ok(())
}

/// Ends the open multi-line record if its timeout has passed.
pub fn poll_multiline(f: &mut Tracked, ctx: &mut Ctx, now_ms: u64) {
    let Some(r) = f.multiline.as_mut().and_then(|m| m.poll(now_ms)) else {
        return;
    };
    assembled(r, &f.origin, &mut ctx.builder, &ctx.shared);
    f.report(ctx);
}
