//! The file source's sans-IO part: splitting bytes into bounded lines, tracking the
//! byte position after each complete line.

/// One complete line (without its `\n` or `\r\n`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Line {
    /// The line's bytes.
    pub bytes: Vec<u8>,
    /// The byte position just after its newline: where to resume after it.
    pub end: u64,
}

/// Splits a byte stream into lines of at most `max_line_bytes`; longer lines are
/// skipped whole and counted.
#[derive(Debug)]
pub struct LineSplitter {
    max_line_bytes: usize,
    partial: Vec<u8>,
    /// The current line is over the limit: drop bytes until its newline.
    skipping: bool,
    /// Position of the next byte fed.
    position: u64,
    /// Lines skipped for length.
    pub skipped: u64,
}

impl LineSplitter {
    /// A splitter whose stream starts at byte `position`.
    pub fn new(max_line_bytes: usize, position: u64) -> Self {
        LineSplitter {
            max_line_bytes,
            partial: Vec::new(),
            skipping: false,
            position,
            skipped: 0,
        }
    }

    /// Feeds bytes; complete lines go to `out`. Memory held: at most one partial line
    /// of `max_line_bytes`.
    pub fn feed(&mut self, mut chunk: &[u8], out: &mut impl FnMut(Line)) {
        while !chunk.is_empty() {
            let newline = chunk.iter().position(|&b| b == b'\n');
            let (part, rest, complete) = match newline {
                Some(i) => (&chunk[..i], &chunk[i + 1..], true),
                None => (chunk, &[][..], false),
            };
            self.position += (part.len() + usize::from(complete)) as u64;
            if !self.skipping {
                if self.partial.len() + part.len() > self.max_line_bytes {
                    self.partial.clear();
                    self.skipping = true;
                } else {
                    self.partial.extend_from_slice(part);
                }
            }
            if complete {
                if self.skipping {
                    self.skipped += 1;
                    self.skipping = false;
                } else {
                    let mut bytes = std::mem::take(&mut self.partial);
                    if bytes.last() == Some(&b'\r') {
                        bytes.pop();
                    }
                    out(Line {
                        bytes,
                        end: self.position,
                    });
                }
            }
            chunk = rest;
        }
    }

    /// At the end of a stream that will not grow (stdin): the last line without a
    /// newline, if any.
    pub fn finish(&mut self) -> Option<Line> {
        if self.skipping {
            self.skipping = false;
            self.skipped += 1;
            return None;
        }
        (!self.partial.is_empty()).then(|| Line {
            bytes: std::mem::take(&mut self.partial),
            end: self.position,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn split(s: &mut LineSplitter, chunks: &[&[u8]]) -> Vec<(String, u64)> {
        let mut out = Vec::new();
        for c in chunks {
            s.feed(c, &mut |l| {
                out.push((String::from_utf8(l.bytes).unwrap(), l.end))
            });
        }
        out
    }

    #[test]
    fn lines_across_chunks_with_positions() {
        let mut s = LineSplitter::new(100, 10);
        let lines = split(&mut s, &[b"ab", b"c\r\nde", b"\n\nf"]);
        assert_eq!(
            lines,
            [("abc".into(), 15), ("de".into(), 18), (String::new(), 19)]
        );
        assert_eq!(
            s.finish().map(|l| (l.bytes, l.end)),
            Some((b"f".to_vec(), 20))
        );
    }

    #[test]
    fn long_lines_are_skipped_and_counted() {
        let mut s = LineSplitter::new(3, 0);
        let lines = split(&mut s, &[b"abcd", b"ef\nxy\n"]);
        assert_eq!(lines, [("xy".into(), 10)]);
        assert_eq!(s.skipped, 1);
    }
}
