//! `path = "-"`: standard input, read to its end with the same lines, multi-line
//! records and format as a file, and no position (a pipe cannot be read again).
//!
//! The read blocks this source's own thread only. A multi-line record's `timeout`
//! counts from its last line but is looked at when a read returns, so on a quiet pipe
//! the record goes when more input (or the end) comes.

use std::io::Read;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use super::chunk::{Builder, Origin};
use super::core::Lines;
use super::files::{assembled, read_buffer_bytes, take};
use super::multiline::{Assembler, MultilineConfig};
use super::status::Shared;
use super::tailer::Send;

/// Reads standard input into chunks until it ends, `stop` is set, or the task is gone.
pub fn run(
    mut builder: Builder,
    shared: &Arc<Shared>,
    max_line_bytes: usize,
    multiline: Option<&MultilineConfig>,
    stop: &AtomicBool,
    mut send: Send,
) -> std::io::Result<()> {
    let origin = Origin {
        id: None,
        path: "-".into(),
        name: String::new(),
    };
    let mut lines = Lines::new(max_line_bytes, true);
    let mut multiline = multiline.map(Assembler::new);
    let capacity = usize::try_from(read_buffer_bytes(max_line_bytes as u64)).unwrap_or(usize::MAX);
    let mut buf = vec![0u8; capacity];
    let mut filled = 0;
    let mut at = 0u64;
    let mut input = std::io::stdin().lock();
    while !stop.load(Ordering::Acquire) {
        let n = match input.read(&mut buf[filled..]) {
            Ok(n) => n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        };
        let now_ms = crate::record::now_ms();
        builder.set_now(now_ms);
        let now_ms = u64::try_from(now_ms).unwrap_or(0);
        let short = filled + n < buf.len();
        filled += n;
        if let Some(r) = multiline.as_mut().and_then(|m| m.poll(now_ms)) {
            assembled(r, &origin, &mut builder, shared);
        }
        let consumed = lines.split(&buf[..filled], at, |piece| {
            take(piece, &origin, &mut multiline, &mut builder, shared, now_ms);
        });
        at += consumed as u64;
        buf.copy_within(consumed..filled, 0);
        filled -= consumed;
        if n == 0 {
            lines.flush(&buf[..filled], at, |piece| {
                take(piece, &origin, &mut multiline, &mut builder, shared, now_ms);
            });
            if let Some(r) = multiline.as_mut().and_then(Assembler::flush) {
                assembled(r, &origin, &mut builder, shared);
            }
        }
        // A short read: nothing more is waiting now, so what is batched goes.
        if short || n == 0 {
            builder.cut();
        }
        while let Some(chunk) = builder.pop_ready() {
            if !send(chunk) {
                return Ok(());
            }
        }
        if n == 0 {
            return Ok(());
        }
    }
    Ok(())
}
