//! The file source's sans-IO part: splitting a file's bytes into lines without ever
//! holding a fragment.
//!
//! [`Lines::split`] is given the bytes of a file from an offset, and hands out every
//! complete line (one whose newline it has seen) with its offsets. The bytes after the
//! last newline are not taken: the caller reads them again, with what follows, next
//! time; so a file's partial last line costs no memory. A line longer than
//! `max_line_bytes` is never held whole: it is skipped to its newline, then handed out
//! as [`Piece::Long`] with its full length and its first `max_line_bytes` (kept meanwhile
//! for a stream; a file's are read again from the file, so they cost no memory either).

/// What a file's bytes became.
#[derive(Debug, PartialEq, Eq)]
pub enum Piece<'a> {
    /// A complete line, without its `\n` (or `\r\n`).
    Line {
        /// The line's bytes.
        bytes: &'a [u8],
        /// Offset of its first byte.
        start: u64,
        /// Offset just past its newline: where to resume after it.
        end: u64,
    },
    /// A line longer than `max_line_bytes`, now ended.
    Long {
        /// Its first `max_line_bytes` bytes; empty when the splitter keeps no heads and
        /// the line began in an earlier buffer (read them again from the file).
        head: Vec<u8>,
        /// Offset of its first byte.
        start: u64,
        /// Its length without the newline.
        len: u64,
        /// Offset just past its newline.
        end: u64,
    },
}

/// A long line being skipped: where it began, and its head.
#[derive(Debug, Clone, PartialEq, Eq)]
struct LongLine {
    start: u64,
    head: Vec<u8>,
    /// The last byte skipped was `\r` (not counted if the newline follows).
    ends_cr: bool,
}

/// Splits a file's bytes into lines; see the [module docs](self).
#[derive(Debug, Clone)]
pub struct Lines {
    max_line_bytes: usize,
    /// Keep a long line's head until its end (a stream cannot be read again).
    keep_heads: bool,
    long: Option<LongLine>,
    /// Reading began mid-line (`read_from = "end"`): drop bytes through the next newline.
    resync: bool,
}

impl Lines {
    /// A splitter for lines of at most `max_line_bytes`; `keep_heads` for a stream,
    /// whose long lines' heads cannot be read again.
    pub fn new(max_line_bytes: usize, keep_heads: bool) -> Self {
        Lines {
            max_line_bytes,
            keep_heads,
            long: None,
            resync: false,
        }
    }

    /// Drops everything through the next newline first (reading starts mid-line).
    pub fn resync(&mut self) {
        self.resync = true;
    }

    /// Forgets a long line in progress (the file was truncated).
    pub fn reset(&mut self) {
        self.long = None;
        self.resync = false;
    }

    /// Where a long line being skipped began: nothing from there on is handed out yet.
    pub fn held_from(&self) -> Option<u64> {
        self.long.as_ref().map(|l| l.start)
    }

    /// Splits `buf`, the file's bytes from offset `at`, calling `emit` for each piece.
    /// Returns how many bytes of `buf` were consumed: through the last newline, or all
    /// of them while a long line (or a resync) is being skipped. The rest is a partial
    /// line, to be read again.
    pub fn split(&mut self, buf: &[u8], at: u64, mut emit: impl FnMut(Piece<'_>)) -> usize {
        let mut pos = 0;
        while let Some(i) = memchr::memchr(b'\n', &buf[pos..]) {
            let newline = pos + i;
            let end = at + newline as u64 + 1;
            if self.resync {
                self.resync = false;
            } else if let Some(long) = self.long.take() {
                let cr = if newline > 0 {
                    buf[newline - 1] == b'\r'
                } else {
                    long.ends_cr
                };
                emit(Piece::Long {
                    len: end - 1 - long.start - u64::from(cr),
                    head: long.head,
                    start: long.start,
                    end,
                });
            } else {
                let mut line = &buf[pos..newline];
                if line.last() == Some(&b'\r') {
                    line = &line[..line.len() - 1];
                }
                let start = at + pos as u64;
                if line.len() > self.max_line_bytes {
                    emit(Piece::Long {
                        head: line[..self.max_line_bytes].to_vec(),
                        start,
                        len: line.len() as u64,
                        end,
                    });
                } else {
                    emit(Piece::Line {
                        bytes: line,
                        start,
                        end,
                    });
                }
            }
            pos = newline + 1;
        }
        let rest = &buf[pos..];
        if self.resync {
            return buf.len();
        }
        if let Some(long) = &mut self.long {
            if let Some(&last) = rest.last() {
                long.ends_cr = last == b'\r';
            }
            return buf.len();
        }
        // A last `\r` may be the start of a `\r\n`: it does not count yet.
        let len = rest.len() - usize::from(rest.last() == Some(&b'\r'));
        if len > self.max_line_bytes {
            let head = if self.keep_heads {
                rest[..self.max_line_bytes].to_vec()
            } else {
                Vec::new()
            };
            self.long = Some(LongLine {
                start: at + pos as u64,
                head,
                ends_cr: rest.last() == Some(&b'\r'),
            });
            return buf.len();
        }
        pos
    }

    /// The partial line `rest` (the file's bytes from `at` to its end, no newline) taken
    /// as a line: a partial flush, or a rotated file released. A long line in progress
    /// ends here instead.
    pub fn flush(&mut self, rest: &[u8], at: u64, mut emit: impl FnMut(Piece<'_>)) {
        let end = at + rest.len() as u64;
        if self.resync {
            self.resync = false;
            return;
        }
        if let Some(long) = self.long.take() {
            let cr = rest.last().map_or(long.ends_cr, |&b| b == b'\r');
            emit(Piece::Long {
                len: end - long.start - u64::from(cr),
                head: long.head,
                start: long.start,
                end,
            });
            return;
        }
        if rest.is_empty() {
            return;
        }
        let mut line = rest;
        if line.last() == Some(&b'\r') {
            line = &line[..line.len() - 1];
        }
        if line.len() > self.max_line_bytes {
            emit(Piece::Long {
                head: line[..self.max_line_bytes].to_vec(),
                start: at,
                len: line.len() as u64,
                end,
            });
        } else {
            emit(Piece::Line {
                bytes: line,
                start: at,
                end,
            });
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Owned pieces: (text or "LONG head/len", start, end).
    fn split(lines: &mut Lines, buf: &[u8], at: u64) -> (Vec<(String, u64, u64)>, usize) {
        let mut out = Vec::new();
        let consumed = lines.split(buf, at, |p| out.push(owned(p)));
        (out, consumed)
    }

    fn owned(p: Piece<'_>) -> (String, u64, u64) {
        match p {
            Piece::Line { bytes, start, end } => {
                (String::from_utf8(bytes.to_vec()).unwrap(), start, end)
            }
            Piece::Long {
                head,
                start,
                len,
                end,
            } => (
                format!("LONG {}/{len}", String::from_utf8(head).unwrap()),
                start,
                end,
            ),
        }
    }

    #[test]
    fn complete_lines_only_and_the_rest_is_left() {
        let mut l = Lines::new(100, true);
        let (out, consumed) = split(&mut l, b"abc\r\nde\n\nfg", 10);
        assert_eq!(
            out,
            [
                ("abc".into(), 10, 15),
                ("de".into(), 15, 18),
                (String::new(), 18, 19)
            ]
        );
        assert_eq!(consumed, 9, "\"fg\" is read again next time");
        let (out, consumed) = split(&mut l, b"fgh\n", 19);
        assert_eq!(out, [("fgh".into(), 19, 23)]);
        assert_eq!(consumed, 4);
    }

    #[test]
    fn a_long_line_is_never_held_whole() {
        let mut l = Lines::new(3, true);
        // Within one buffer.
        let (out, consumed) = split(&mut l, b"abcdef\nxy\n", 0);
        assert_eq!(out, [("LONG abc/6".into(), 0, 7), ("xy".into(), 7, 10)]);
        assert_eq!(consumed, 10);
        // Across buffers: the head is kept, the rest consumed, the length counted.
        let (out, consumed) = split(&mut l, b"123456", 10);
        assert!(out.is_empty());
        assert_eq!(consumed, 6);
        assert_eq!(l.held_from(), Some(10));
        let (out, consumed) = split(&mut l, b"78\nok\n", 16);
        assert_eq!(out, [("LONG 123/8".into(), 10, 19), ("ok".into(), 19, 22)]);
        assert_eq!(consumed, 6);
        assert_eq!(l.held_from(), None);
        // A file's splitter keeps no head across buffers: the caller reads it again.
        let mut l = Lines::new(3, false);
        let (out, _) = split(&mut l, b"12345", 0);
        assert!(out.is_empty());
        let (out, _) = split(
            &mut l, b"6
", 5,
        );
        assert_eq!(out, [("LONG /6".into(), 0, 7)]);
    }

    #[test]
    fn resync_drops_through_the_next_newline() {
        let mut l = Lines::new(100, true);
        l.resync();
        let (out, consumed) = split(&mut l, b"tail of a line", 50);
        assert!(out.is_empty());
        assert_eq!(consumed, 14);
        let (out, _) = split(&mut l, b"x\nnext\n", 64);
        assert_eq!(out, [("next".into(), 66, 71)]);
    }

    #[test]
    fn flush_takes_the_partial_line() {
        let mut l = Lines::new(4, true);
        let mut out = Vec::new();
        l.flush(b"abc", 7, |p| out.push(owned(p)));
        l.flush(b"", 10, |p| out.push(owned(p)));
        l.flush(b"abcdefg", 10, |p| out.push(owned(p)));
        assert_eq!(out, [("abc".into(), 7, 10), ("LONG abcd/7".into(), 10, 17)]);
    }

    proptest::proptest! {
        /// However the bytes are cut into reads, the same lines come out, each once, with
        /// offsets that tile the input; what is left is never a line.
        #[test]
        fn reads_of_any_size_give_the_same_lines(
            text in proptest::collection::vec(proptest::sample::select(vec![b'a', b'b', b'\n', b'\r']), 0..200),
            max in 1usize..8,
            read in 1usize..20,
        ) {
            let mut whole = Lines::new(max, true);
            let (expected, whole_consumed) = split(&mut whole, &text, 0);
            let mut cut = Lines::new(max, true);
            let mut got = Vec::new();
            let mut at = 0usize;
            // Like the tailer: read `read` bytes past what was consumed (more when a
            // partial line fills the read), split, and resume at the consumed offset.
            let mut want = read;
            while at < text.len() {
                let end = (at + want).min(text.len());
                let (out, consumed) = split(&mut cut, &text[at..end], at as u64);
                got.extend(out);
                if consumed == 0 {
                    if end == text.len() { break; }
                    want += read;
                } else {
                    want = read;
                }
                at += consumed;
            }
            proptest::prop_assert_eq!(&got, &expected);
            proptest::prop_assert!(whole_consumed <= text.len());
            let mut next = 0;
            for (_, start, end) in &expected {
                proptest::prop_assert!(*start >= next);
                next = *end;
            }
        }
    }
}
