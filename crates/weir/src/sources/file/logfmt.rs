//! logfmt (`level=info msg="request done" took=12ms cached`) read into a JSON object.
//!
//! Pairs are separated by spaces (or tabs). A key runs to `=` or a space; a value is a
//! bare word (to the next space) or a double-quoted string with `\"`, `\\`, `\n`, `\r`
//! and `\t` escapes; a key with no `=` is `true`, one with `=` and nothing after it is
//! `""`. Values are strings: logfmt carries no types. A key given twice keeps its last
//! value. No kept crate reads logfmt, so this is a small parser, tested here and by
//! property against a writer.

use super::format::json_string;

/// Writes the JSON object of `line` into `out`.
///
/// # Errors
///
/// What could not be read: not UTF-8, an empty line, a key that is empty or holds a
/// quote, an unterminated quoted value, a quoted value not followed by a space.
pub fn to_json(line: &[u8], out: &mut Vec<u8>) -> Result<(), String> {
    let text = std::str::from_utf8(line).map_err(|e| {
        format!(
            "not UTF-8 at byte {} (format = \"logfmt\")",
            e.valid_up_to()
        )
    })?;
    let pairs = pairs(text)?;
    if pairs.is_empty() {
        return Err("an empty line has no key=value pair (format = \"logfmt\")".into());
    }
    out.push(b'{');
    let mut first = true;
    for (i, (key, value)) in pairs.iter().enumerate() {
        // Later values win: skip a key that comes again.
        if pairs[i + 1..].iter().any(|(k, _)| k == key) {
            continue;
        }
        if !first {
            out.push(b',');
        }
        first = false;
        json_string(key.as_bytes(), out);
        out.push(b':');
        match value {
            Some(v) => json_string(v.as_bytes(), out),
            None => out.extend_from_slice(b"true"),
        }
    }
    out.push(b'}');
    Ok(())
}

/// A key and its value (`None`: a key alone).
type Pair<'a> = (&'a str, Option<std::borrow::Cow<'a, str>>);

/// The pairs of `text`, in order.
fn pairs(text: &str) -> Result<Vec<Pair<'_>>, String> {
    let bytes = text.as_bytes();
    let mut pairs = Vec::new();
    let mut i = 0;
    let space = |b: u8| b == b' ' || b == b'\t';
    loop {
        while i < bytes.len() && space(bytes[i]) {
            i += 1;
        }
        if i == bytes.len() {
            return Ok(pairs);
        }
        let key_start = i;
        while i < bytes.len() && !space(bytes[i]) && bytes[i] != b'=' {
            if bytes[i] == b'"' {
                return Err(format!(
                    "a quote in a key at byte {i} (format = \"logfmt\")"
                ));
            }
            i += 1;
        }
        let key = &text[key_start..i];
        if key.is_empty() {
            return Err(format!("an empty key at byte {i} (format = \"logfmt\")"));
        }
        if i == bytes.len() || space(bytes[i]) {
            pairs.push((key, None));
            continue;
        }
        i += 1; // '='
        if i < bytes.len() && bytes[i] == b'"' {
            let (value, next) = quoted(text, i)?;
            if next < bytes.len() && !space(bytes[next]) {
                return Err(format!(
                    "no space after the quoted value of {key:?} at byte {next} (format = \"logfmt\")"
                ));
            }
            pairs.push((key, Some(value)));
            i = next;
        } else {
            let value_start = i;
            while i < bytes.len() && !space(bytes[i]) {
                i += 1;
            }
            pairs.push((key, Some(text[value_start..i].into())));
        }
    }
}

/// The quoted string opening at `at`, unescaped, and the byte after its closing quote.
fn quoted(text: &str, at: usize) -> Result<(std::borrow::Cow<'_, str>, usize), String> {
    let bytes = text.as_bytes();
    let mut i = at + 1;
    let start = i;
    let mut owned: Option<String> = None;
    while i < bytes.len() {
        match bytes[i] {
            b'"' => {
                let value = match owned {
                    Some(s) => s.into(),
                    None => text[start..i].into(),
                };
                return Ok((value, i + 1));
            }
            b'\\' if i + 1 < bytes.len() => {
                let s = owned.get_or_insert_with(|| text[start..i].to_owned());
                match bytes[i + 1] {
                    b'n' => s.push('\n'),
                    b'r' => s.push('\r'),
                    b't' => s.push('\t'),
                    b'"' => s.push('"'),
                    b'\\' => s.push('\\'),
                    other => {
                        s.push('\\');
                        s.push(char::from(other));
                    }
                }
                i += 2;
            }
            _ => {
                let c = text[i..].chars().next().expect("in bounds");
                if let Some(s) = &mut owned {
                    s.push(c);
                }
                i += c.len_utf8();
            }
        }
    }
    Err(format!(
        "a quoted value opened at byte {at} is not closed (format = \"logfmt\")"
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn json(line: &str) -> Result<serde_json::Value, String> {
        let mut out = Vec::new();
        to_json(line.as_bytes(), &mut out)?;
        Ok(serde_json::from_slice(&out).expect("valid JSON"))
    }

    #[test]
    fn pairs_quotes_and_flags() {
        assert_eq!(
            json(r#"ts=2024-10-10T13:55:36Z level=info msg="request done \"ok\"" took=12ms cached path=/a=b empty="#).unwrap(),
            serde_json::json!({
                "ts": "2024-10-10T13:55:36Z", "level": "info", "msg": "request done \"ok\"",
                "took": "12ms", "cached": true, "path": "/a=b", "empty": ""
            })
        );
        assert_eq!(json("a=1 a=2").unwrap(), serde_json::json!({ "a": "2" }));
        assert_eq!(
            json("  x=\"é\\n\"\t").unwrap(),
            serde_json::json!({ "x": "é\n" })
        );
    }

    #[test]
    fn what_cannot_be_read_says_where() {
        for (line, expected) in [
            ("", "empty line"),
            ("a=\"open", "not closed"),
            ("=x", "empty key"),
            ("a\"b=1", "quote in a key"),
            ("a=\"x\"y", "no space after"),
        ] {
            let e = json(line).unwrap_err();
            assert!(e.contains(expected), "{line:?}: {e}");
        }
    }

    proptest::proptest! {
        /// What a logfmt writer writes reads back as the same pairs.
        #[test]
        fn written_pairs_read_back(
            pairs in proptest::collection::vec(("[a-z_][a-z0-9_.]{0,8}", "[ -~é\\n\\t]{0,12}"), 1..6)
        ) {
            let mut line = String::new();
            let mut expected = serde_json::Map::new();
            for (k, v) in &pairs {
                if !line.is_empty() { line.push(' '); }
                let escaped = v.replace('\\', "\\\\").replace('"', "\\\"").replace('\n', "\\n").replace('\t', "\\t");
                line.push_str(&format!("{k}=\"{escaped}\""));
                expected.insert(k.clone(), serde_json::Value::String(v.clone()));
            }
            proptest::prop_assert_eq!(json(&line).unwrap(), serde_json::Value::Object(expected));
        }
    }
}
