//! The HTTP source's sans-IO part: what a body holds, and who may send it.

use bytes::Bytes;
use subtle::ConstantTimeEq;

/// How a request body becomes records.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BodyKind {
    /// One record per non-blank line; each line must be JSON.
    Ndjson,
    /// The whole body is one record's payload.
    Raw,
}

/// The body kind for a `Content-Type`: `application/octet-stream` and `text/plain` are
/// one raw record; anything else (NDJSON types, none, curl's form default) is NDJSON.
pub fn body_kind(content_type: Option<&str>) -> BodyKind {
    let Some(ct) = content_type else {
        return BodyKind::Ndjson;
    };
    let essence = ct
        .split(';')
        .next()
        .unwrap_or("")
        .trim()
        .to_ascii_lowercase();
    match essence.as_str() {
        "application/octet-stream" | "text/plain" => BodyKind::Raw,
        _ => BodyKind::Ndjson,
    }
}

/// The content codings the source decodes: none besides `identity` (the body as sent).
pub const SUPPORTED_ENCODINGS: &str = "identity";

/// The first coding of the `Content-Encoding` header values that the source cannot
/// decode, if any: every coding but `identity` (absent: `identity`). The values are
/// comma-separated lists, as HTTP allows several codings and several header lines.
pub fn unsupported_encoding<'a>(values: impl IntoIterator<Item = &'a [u8]>) -> Option<String> {
    values
        .into_iter()
        .flat_map(|value| value.split(|&b| b == b','))
        .map(|coding| String::from_utf8_lossy(coding.trim_ascii()).to_ascii_lowercase())
        .find(|coding| !coding.is_empty() && coding != "identity")
}

/// A line of an NDJSON body that is not JSON (or not UTF-8, which JSON text must be).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("line {line} is not JSON ({reason}); send one UTF-8 JSON value per line")]
pub struct BadLine {
    /// 1-based line number.
    pub line: usize,
    /// The parser's message.
    pub reason: String,
}

/// Splits an NDJSON body into payloads (slices of `body`, no copy), skipping blank
/// lines; the first line that is not JSON, or not valid UTF-8, is an error. (serde_json
/// does not check the bytes of strings it skips, so UTF-8 is checked first: a record
/// written raw would otherwise break the NDJSON a sink writes.)
///
/// # Errors
///
/// [`BadLine`] naming the first bad line.
pub fn split_ndjson(body: &Bytes) -> Result<Vec<Bytes>, BadLine> {
    let mut out = Vec::new();
    let mut start = 0;
    for (i, line) in body.split(|&b| b == b'\n').enumerate() {
        let end = start + line.len();
        let trimmed = line.trim_ascii();
        if !trimmed.is_empty() {
            if let Err(e) = std::str::from_utf8(trimmed) {
                return Err(BadLine {
                    line: i + 1,
                    reason: format!(
                        "invalid UTF-8 at byte {} of the line",
                        line.len() - line.trim_ascii_start().len() + e.valid_up_to() + 1
                    ),
                });
            }
            if let Err(e) = serde_json::from_slice::<serde::de::IgnoredAny>(trimmed) {
                return Err(BadLine {
                    line: i + 1,
                    reason: e.to_string(),
                });
            }
            let lead = line.len() - line.trim_ascii_start().len();
            out.push(body.slice(start + lead..start + lead + trimmed.len()));
        }
        start = end + 1;
    }
    Ok(out)
}

/// Whether an `Authorization` header carries `Bearer <token>` (the token compared in
/// constant time; the scheme in any case, as RFC 9110 makes auth schemes
/// case-insensitive).
pub fn authorized(header: Option<&[u8]>, token: &str) -> bool {
    const SCHEME: &[u8] = b"bearer ";
    let Some(given) = header.and_then(|h| {
        let (scheme, rest) = h.split_at_checked(SCHEME.len())?;
        scheme.eq_ignore_ascii_case(SCHEME).then_some(rest)
    }) else {
        return false;
    };
    // `ct_eq` on slices answers false at once for different lengths (the length is not
    // the secret) and compares equal lengths in time independent of the bytes.
    given.ct_eq(token.as_bytes()).into()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn content_types() {
        assert_eq!(body_kind(None), BodyKind::Ndjson);
        assert_eq!(body_kind(Some("application/x-ndjson")), BodyKind::Ndjson);
        assert_eq!(
            body_kind(Some("application/x-www-form-urlencoded")),
            BodyKind::Ndjson
        );
        assert_eq!(body_kind(Some("Application/Octet-Stream")), BodyKind::Raw);
        assert_eq!(body_kind(Some("text/plain; charset=utf-8")), BodyKind::Raw);
    }

    #[test]
    fn ndjson_lines_become_slices() {
        let body = Bytes::from_static(b"{\"a\":1}\n\n  [2] \r\n\"x\"");
        let lines = split_ndjson(&body).unwrap();
        assert_eq!(lines, [&b"{\"a\":1}"[..], b"[2]", b"\"x\""]);
    }

    #[test]
    fn the_first_bad_line_is_named() {
        let body = Bytes::from_static(b"{}\nnot json\n{oops");
        let err = split_ndjson(&body).unwrap_err();
        assert_eq!(err.line, 2);
        assert!(err.to_string().starts_with("line 2 is not JSON"));
    }

    #[test]
    fn invalid_utf8_inside_a_string_is_a_bad_line() {
        let body = Bytes::from_static(b"{\"id\":1}\n{\"id\":\"\xff\xfe\"}\n");
        let err = split_ndjson(&body).unwrap_err();
        assert_eq!(err.line, 2);
        assert!(
            err.to_string()
                .starts_with("line 2 is not JSON (invalid UTF-8 at byte 8 of the line)"),
            "{err}"
        );
        // An overlong encoding and a lone surrogate are not UTF-8 either.
        for bad in [&b"\"\xc0\xaf\""[..], b"\"\xed\xa0\x80\""] {
            let err = split_ndjson(&Bytes::copy_from_slice(bad)).unwrap_err();
            assert_eq!(err.line, 1, "{err}");
        }
        let good = Bytes::from("{\"id\":\"h\u{e9}\u{2603}\"}".as_bytes().to_vec());
        assert_eq!(split_ndjson(&good).unwrap().len(), 1);
    }

    #[test]
    fn every_coding_but_identity_is_unsupported() {
        let none: [&[u8]; 0] = [];
        assert_eq!(unsupported_encoding(none), None);
        assert_eq!(unsupported_encoding([&b"identity"[..]]), None);
        assert_eq!(unsupported_encoding([&b" Identity "[..]]), None);
        assert_eq!(unsupported_encoding([&b"br"[..]]), Some("br".to_owned()));
        assert_eq!(
            unsupported_encoding([&b"GZIP"[..]]),
            Some("gzip".to_owned())
        );
        assert_eq!(
            unsupported_encoding([&b"identity, zstd"[..]]),
            Some("zstd".to_owned())
        );
        assert_eq!(
            unsupported_encoding([&b"identity"[..], &b"deflate"[..]]),
            Some("deflate".to_owned())
        );
    }

    #[test]
    fn bearer_tokens() {
        assert!(authorized(Some(b"Bearer s3cret"), "s3cret"));
        assert!(!authorized(Some(b"Bearer s3cre"), "s3cret"));
        assert!(!authorized(Some(b"Basic s3cret"), "s3cret"));
        assert!(!authorized(None, "s3cret"));
        assert!(!authorized(Some(b"Bearer s3cret2"), "s3cret"));
        assert!(!authorized(Some(b"Bearer s3creT"), "s3cret"));
        assert!(!authorized(Some(b"Bearer S3cret"), "s3cret"));
        assert!(!authorized(Some(b"Bearer "), "s3cret"));
        assert!(authorized(Some(b"bearer s3cret"), "s3cret"));
        assert!(authorized(Some(b"BEARER s3cret"), "s3cret"));
        assert!(!authorized(Some(b"bearer"), "s3cret"));
        assert!(!authorized(Some(b"bearers3cret"), "s3cret"));
        assert!(!authorized(Some(b"Bearer  s3cret"), "s3cret"));
        assert!(!authorized(Some(b""), "s3cret"));
    }
}
