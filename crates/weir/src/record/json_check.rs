//! Whether a payload is one JSON value, in one pass over its bytes and without
//! allocating (unless it nests deeper than 128 levels).
//!
//! It accepts exactly what `serde_json::from_str::<serde::de::IgnoredAny>` accepts on
//! the payload read as UTF-8 (the grammar serde_json checks when it skips a value: any
//! `\u` escape, no control character in a string, numbers of any size, any depth, one
//! value with whitespace around it), and it requires what that call's `&str` implies:
//! the bytes are UTF-8. Outside strings the grammar admits only ASCII, so only strings
//! are checked for UTF-8, with `std::str::from_utf8` on their non-ASCII stretches.
//!
//! Before, a sink's encoder checked UTF-8 over the whole payload and then ran serde_json
//! over it: two passes, and serde_json's per-byte dispatch, for every record an NDJSON or
//! HTTP sink writes (about a fifth of the HTTP sink's drain).

/// What [`check`] found in a valid JSON payload.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Json {
    /// Line breaks in the whitespace between its tokens (not before or after the value;
    /// a string holds none): it must be compacted to fit on one line.
    pub(crate) line_breaks: bool,
}

/// Whether a string's fast scan stops at `b`: its end, an escape, a control character
/// (refused) or the first byte of a non-ASCII character (checked as UTF-8).
fn stops_at(b: u8) -> bool {
    b == b'"' || b == b'\\' || !(0x20..0x80).contains(&b)
}

/// The length of the run of plain string bytes at the start of `rest` (bytes
/// [`stops_at`] is false for), or `None` if it runs to the end. Eight bytes at a time:
/// most of a payload's bytes are inside strings.
fn plain_run(rest: &[u8]) -> Option<usize> {
    const ONES: u64 = 0x0101_0101_0101_0101;
    const HIGH: u64 = 0x8080_8080_8080_8080;
    let mut words = rest.chunks_exact(8);
    let mut at = 0;
    for word in &mut words {
        let w = u64::from_le_bytes(word.try_into().unwrap_or_default());
        // A byte's high bit is set in each term for a byte that is: below 0x20; a quote;
        // a backslash (the usual zero-byte tests, on `w` and on `w` xor the byte);
        // 0x80 or above. Each test is exact for its lowest flagged byte (a borrow only
        // carries upwards), so the lowest bit of all of them is the first stop.
        let quote = w ^ (ONES * u64::from(b'"'));
        let backslash = w ^ (ONES * u64::from(b'\\'));
        let stops = (w.wrapping_sub(ONES * 0x20) & !w)
            | (quote.wrapping_sub(ONES) & !quote)
            | (backslash.wrapping_sub(ONES) & !backslash)
            | w;
        let stops = stops & HIGH;
        if stops != 0 {
            return Some(at + (stops.trailing_zeros() / 8) as usize);
        }
        at += 8;
    }
    words
        .remainder()
        .iter()
        .position(|&b| stops_at(b))
        .map(|p| at + p)
}

/// Levels of nesting tracked without allocating.
const INLINE_DEPTH: u32 = 128;

/// The open arrays and objects, innermost last: a bit per level (1 for an object) in a
/// `u128`, and in a vector past that.
struct Stack {
    inline: u128,
    depth: u32,
    deeper: Vec<bool>,
}

impl Stack {
    fn push(&mut self, object: bool) {
        if self.depth < INLINE_DEPTH {
            let bit = 1u128 << self.depth;
            if object {
                self.inline |= bit;
            } else {
                self.inline &= !bit;
            }
        } else {
            self.deeper.push(object);
        }
        self.depth += 1;
    }

    /// The innermost container: `Some(true)` for an object, `None` at the top level.
    fn top(&self) -> Option<bool> {
        match self.depth {
            0 => None,
            d if d <= INLINE_DEPTH => Some(self.inline >> (d - 1) & 1 == 1),
            _ => self.deeper.last().copied(),
        }
    }

    fn pop(&mut self) {
        if self.depth > INLINE_DEPTH {
            self.deeper.pop();
        }
        self.depth -= 1;
    }
}

/// `Some` when `bytes` are one JSON value with optional whitespace around it, and UTF-8.
pub(crate) fn check(bytes: &[u8]) -> Option<Json> {
    let mut p = Pos {
        bytes,
        at: 0,
        line_breaks: false,
    };
    let mut stack = Stack {
        inline: 0,
        depth: 0,
        deeper: Vec::new(),
    };
    'value: loop {
        p.whitespace(stack.depth > 0);
        match p.peek()? {
            b'{' | b'[' => {
                let object = p.peek() == Some(b'{');
                p.at += 1;
                p.whitespace(true);
                let close = if object { b'}' } else { b']' };
                if p.peek() == Some(close) {
                    p.at += 1;
                } else {
                    stack.push(object);
                    if object {
                        p.key()?;
                    }
                    continue 'value;
                }
            }
            b'"' => {
                p.at += 1;
                p.string()?;
            }
            b't' => p.literal(b"true")?,
            b'f' => p.literal(b"false")?,
            b'n' => p.literal(b"null")?,
            b'-' => {
                p.at += 1;
                p.number()?;
            }
            b'0'..=b'9' => p.number()?,
            _ => return None,
        }
        // After a value: a comma and the next one, or the ends of containers.
        loop {
            p.whitespace(stack.depth > 0);
            let Some(object) = stack.top() else {
                return (p.at == bytes.len()).then_some(Json {
                    line_breaks: p.line_breaks,
                });
            };
            match p.peek()? {
                b',' => {
                    p.at += 1;
                    if object {
                        p.whitespace(true);
                        p.key()?;
                    }
                    continue 'value;
                }
                b'}' if object => {
                    p.at += 1;
                    stack.pop();
                }
                b']' if !object => {
                    p.at += 1;
                    stack.pop();
                }
                _ => return None,
            }
        }
    }
}

struct Pos<'a> {
    bytes: &'a [u8],
    at: usize,
    line_breaks: bool,
}

impl Pos<'_> {
    fn peek(&self) -> Option<u8> {
        self.bytes.get(self.at).copied()
    }

    /// Skips whitespace; `inner`: it lies between two tokens of the value.
    fn whitespace(&mut self, inner: bool) {
        while let Some(b) = self.peek() {
            match b {
                b' ' | b'\t' => {}
                b'\n' | b'\r' => self.line_breaks |= inner,
                _ => return,
            }
            self.at += 1;
        }
    }

    /// An object's key and its colon (the whitespace before the key already skipped).
    fn key(&mut self) -> Option<()> {
        if self.peek()? != b'"' {
            return None;
        }
        self.at += 1;
        self.string()?;
        self.whitespace(true);
        if self.peek()? != b':' {
            return None;
        }
        self.at += 1;
        Some(())
    }

    fn literal(&mut self, word: &[u8]) -> Option<()> {
        if self.bytes.get(self.at..self.at + word.len())? != word {
            return None;
        }
        self.at += word.len();
        Some(())
    }

    /// The rest of a string after its opening quote, up to and past its closing one.
    fn string(&mut self) -> Option<()> {
        loop {
            self.at += plain_run(&self.bytes[self.at..])?;
            match self.bytes[self.at] {
                b'"' => {
                    self.at += 1;
                    return Some(());
                }
                b'\\' => {
                    self.at += 1;
                    match self.peek()? {
                        b'"' | b'\\' | b'/' | b'b' | b'f' | b'n' | b'r' | b't' => self.at += 1,
                        b'u' => {
                            let hex = self.bytes.get(self.at + 1..self.at + 5)?;
                            if !hex.iter().all(u8::is_ascii_hexdigit) {
                                return None;
                            }
                            self.at += 5;
                        }
                        _ => return None,
                    }
                }
                b if b < 0x20 => return None,
                _ => {
                    // Non-ASCII: the stretch up to the next ASCII byte must be UTF-8.
                    let rest = &self.bytes[self.at..];
                    let len = rest.iter().position(u8::is_ascii).unwrap_or(rest.len());
                    std::str::from_utf8(&rest[..len]).ok()?;
                    self.at += len;
                }
            }
        }
    }

    /// A number after its optional minus sign.
    fn number(&mut self) -> Option<()> {
        match self.peek()? {
            b'0' => {
                self.at += 1;
                if self.peek().is_some_and(|b| b.is_ascii_digit()) {
                    return None; // only one leading zero
                }
            }
            b'1'..=b'9' => self.digits(),
            _ => return None,
        }
        if self.peek() == Some(b'.') {
            self.at += 1;
            if !self.peek()?.is_ascii_digit() {
                return None;
            }
            self.digits();
        }
        if matches!(self.peek(), Some(b'e' | b'E')) {
            self.at += 1;
            if matches!(self.peek(), Some(b'+' | b'-')) {
                self.at += 1;
            }
            if !self.peek()?.is_ascii_digit() {
                return None;
            }
            self.digits();
        }
        Some(())
    }

    fn digits(&mut self) {
        while self.peek().is_some_and(|b| b.is_ascii_digit()) {
            self.at += 1;
        }
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    /// The reference: serde_json on the bytes read as UTF-8.
    fn serde_says(bytes: &[u8]) -> bool {
        std::str::from_utf8(bytes)
            .is_ok_and(|text| serde_json::from_str::<serde::de::IgnoredAny>(text).is_ok())
    }

    #[test]
    fn agrees_with_serde_json_on_the_edges_of_the_grammar() {
        let cases: &[&[u8]] = &[
            b"{}",
            b"[]",
            b" {\"a\" : [1, -2.5e+3, true, false, null, \"x\"]}\n",
            b"{\"a\":1,}",
            b"[1,]",
            b"[1 2]",
            b"{\"a\" 1}",
            b"{1:2}",
            b"01",
            b"-0",
            b"-",
            b"1.",
            b"1.e5",
            b"1e",
            b"1e+",
            b"1E-07",
            b"1e400",
            b"123456789012345678901234567890",
            b"tru",
            b"truex",
            b"nul",
            b"\"\\u12\"",
            b"\"\\u12G4\"",
            b"\"\\ud800\"",
            b"\"\\q\"",
            b"\"tab\there\"",
            b"\"caf\xc3\xa9\"",
            b"\"\xff\xfe\"",
            b"{\"id\":\"\xff\xfe\"}",
            b"\"\xe2\x82\"",
            b"\"unterminated",
            b"",
            b"   ",
            b"[[[[]]]]",
            b"[[[[]]]",
            b"[]]",
            b"{}{}",
            b"\"a\" \"b\"",
            b"\xef\xbb\xbf{}",
            b"[1,\r\n2]",
            b"{\"a\":{\"b\":{\"c\":[{}]}}}",
        ];
        for &case in cases {
            assert_eq!(
                check(case).is_some(),
                serde_says(case),
                "{:?}",
                String::from_utf8_lossy(case)
            );
        }
    }

    #[test]
    fn any_depth_is_checked_as_serde_json_does() {
        for depth in [1, 127, 128, 129, 300] {
            let nested = format!("{}{}", "[".repeat(depth), "]".repeat(depth));
            assert!(check(nested.as_bytes()).is_some(), "depth {depth}");
            let objects = format!("{}1{}", "{\"k\":".repeat(depth), "}".repeat(depth));
            assert!(check(objects.as_bytes()).is_some(), "depth {depth}");
            let unbalanced = format!("{}{}", "[".repeat(depth), "]".repeat(depth - 1));
            assert!(check(unbalanced.as_bytes()).is_none(), "depth {depth}");
            let mixed = format!("{}}}{}", "[".repeat(depth), "]".repeat(depth - 1));
            assert!(check(mixed.as_bytes()).is_none(), "depth {depth}");
        }
    }

    #[test]
    fn line_breaks_between_tokens_are_reported() {
        assert_eq!(check(b"{\"a\":1}"), Some(Json { line_breaks: false }));
        assert_eq!(
            check(b"\n{\"a\": 1}\r\n"),
            Some(Json { line_breaks: false })
        );
        assert_eq!(check(b"{\n \"a\": 1\r}"), Some(Json { line_breaks: true }));
        assert_eq!(check(b"\"a\\nb\""), Some(Json { line_breaks: false }));
    }

    proptest! {
        #[test]
        fn a_plain_run_stops_where_a_byte_loop_does(bytes in prop::collection::vec(
            prop_oneof![4 => 0x20u8..0x7f, 1 => any::<u8>(), 1 => Just(b'"'), 1 => Just(b'\\')],
            0..40,
        )) {
            let by_byte = bytes.iter().position(|&b| stops_at(b));
            prop_assert_eq!(plain_run(&bytes), by_byte);
        }
    }

    fn json_ish() -> impl Strategy<Value = Vec<u8>> {
        let token = prop_oneof![
            Just(&b"{"[..]),
            Just(&b"}"[..]),
            Just(&b"["[..]),
            Just(&b"]"[..]),
            Just(&b","[..]),
            Just(&b":"[..]),
            Just(&b" "[..]),
            Just(&b"\n"[..]),
            Just(&b"\"k\""[..]),
            Just(&b"\"\\u00e9\\n\""[..]),
            Just(&b"\"\xc3\xa9\""[..]),
            Just(&b"\"\xff\""[..]),
            Just(&b"\""[..]),
            Just(&b"\\"[..]),
            Just(&b"0"[..]),
            Just(&b"-1.5e3"[..]),
            Just(&b"1"[..]),
            Just(&b"."[..]),
            Just(&b"e"[..]),
            Just(&b"true"[..]),
            Just(&b"null"[..]),
            Just(&b"\x01"[..]),
        ];
        prop::collection::vec(token, 0..24).prop_map(|tokens| tokens.concat())
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(4096))]

        #[test]
        fn agrees_with_serde_json_on_json_like_bytes(bytes in json_ish()) {
            prop_assert_eq!(check(&bytes).is_some(), serde_says(&bytes));
        }

        #[test]
        fn agrees_with_serde_json_on_any_bytes(bytes in prop::collection::vec(any::<u8>(), 0..64)) {
            prop_assert_eq!(check(&bytes).is_some(), serde_says(&bytes));
        }

        #[test]
        fn agrees_with_serde_json_on_values_it_writes(value in json_value()) {
            let text = serde_json::to_string_pretty(&value).unwrap();
            prop_assert!(check(text.as_bytes()).is_some());
            prop_assert_eq!(check(text.as_bytes()).unwrap().line_breaks, text.contains('\n'));
            let padded = format!("\n {text}\r\n");
            prop_assert_eq!(check(padded.as_bytes()).unwrap().line_breaks, text.contains('\n'));
        }
    }

    fn json_value() -> impl Strategy<Value = serde_json::Value> {
        let leaf = prop_oneof![
            Just(serde_json::Value::Null),
            any::<bool>().prop_map(serde_json::Value::from),
            any::<i64>().prop_map(serde_json::Value::from),
            any::<f64>()
                .prop_filter("finite", |f| f.is_finite())
                .prop_map(serde_json::Value::from),
            ".*".prop_map(serde_json::Value::from),
        ];
        leaf.prop_recursive(4, 32, 4, |inner| {
            prop_oneof![
                prop::collection::vec(inner.clone(), 0..4).prop_map(serde_json::Value::from),
                prop::collection::btree_map(".*", inner, 0..4)
                    .prop_map(|m| serde_json::Value::Object(m.into_iter().collect())),
            ]
        })
    }
}
