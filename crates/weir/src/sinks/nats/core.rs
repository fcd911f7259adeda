//! The `nats` sink's policy, sans IO: the subject a record goes to, its headers and
//! its `Nats-Msg-Id`.

/// A part of a subject template.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Part {
    Literal(String),
    Key,
    Source,
}

/// A subject template: literal text with `{key}` and `{source}`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SubjectTemplate {
    parts: Vec<Part>,
}

impl SubjectTemplate {
    /// Parses a template; the literal parts must be valid subject text.
    ///
    /// # Errors
    ///
    /// What is wrong with it.
    pub fn parse(text: &str) -> Result<Self, String> {
        let mut parts = Vec::new();
        let mut rest = text;
        while let Some(open) = rest.find('{') {
            if open > 0 {
                parts.push(Part::Literal(rest[..open].to_owned()));
            }
            let close = rest[open..]
                .find('}')
                .ok_or_else(|| format!("{text:?}: a '{{' without '}}'"))?;
            match &rest[open + 1..open + close] {
                "key" => parts.push(Part::Key),
                "source" => parts.push(Part::Source),
                other => {
                    return Err(format!(
                        "{text:?}: unknown placeholder {{{other}}}; expected {{key}} or {{source}}"
                    ));
                }
            }
            rest = &rest[open + close + 1..];
        }
        if !rest.is_empty() {
            parts.push(Part::Literal(rest.to_owned()));
        }
        for p in &parts {
            if let Part::Literal(l) = p
                && (l.contains(['*', '>', '}']) || l.contains(char::is_whitespace))
            {
                return Err(format!(
                    "{text:?}: a subject to publish to has no wildcards ('*', '>') or whitespace"
                ));
            }
        }
        if parts.is_empty() {
            return Err("expected a subject, found an empty string".to_owned());
        }
        Ok(SubjectTemplate { parts })
    }

    /// Renders the subject of a record into `out` (cleared first).
    pub fn render(&self, source: &str, key: &str, out: &mut String) {
        out.clear();
        for p in &self.parts {
            match p {
                Part::Literal(l) => out.push_str(l),
                Part::Key => push_token_text(key, out),
                Part::Source => push_token_text(source, out),
            }
        }
        tidy_tokens(out);
    }
}

impl SubjectTemplate {
    /// Every subject the template can render, as one subject filter: its literal
    /// tokens, then `>` from the first token that holds a placeholder (a key can become
    /// several tokens). `weir.{key}` gives `weir.>`.
    pub fn filter(&self) -> String {
        let mut tokens = Vec::new();
        let mut token = String::new();
        for p in &self.parts {
            let Part::Literal(l) = p else {
                tokens.push(">".to_owned());
                return tokens.join(".");
            };
            for c in l.chars() {
                if c == '.' {
                    tokens.push(std::mem::take(&mut token));
                } else {
                    token.push(c);
                }
            }
        }
        tokens.push(token);
        tokens.join(".")
    }
}

/// Whether some subject matches both filters `a` and `b` (`*` is one token, `>` one or
/// more at the end): a stream whose subjects collide with a sink's filter takes some of
/// its publishes.
pub fn subjects_collide(a: &str, b: &str) -> bool {
    let mut a = a.split('.');
    let mut b = b.split('.');
    loop {
        match (a.next(), b.next()) {
            (None, None) | (Some(">"), Some(_)) | (Some(_), Some(">")) => return true,
            (None, Some(_)) | (Some(_), None) => return false,
            (Some(x), Some(y)) if x != y && x != "*" && y != "*" => return false,
            (Some(_), Some(_)) => {}
        }
    }
}

/// Appends `text` as subject text: `/` becomes `.`, wildcards, whitespace and `%`
/// are percent-escaped.
fn push_token_text(text: &str, out: &mut String) {
    for c in text.chars() {
        match c {
            '/' => out.push('.'),
            '*' => out.push_str("%2A"),
            '>' => out.push_str("%3E"),
            '%' => out.push_str("%25"),
            c if c.is_whitespace() || c.is_control() => {
                for b in c.to_string().bytes() {
                    out.push_str(&format!("%{b:02X}"));
                }
            }
            c => out.push(c),
        }
    }
}

/// Replaces empty tokens (a leading, trailing or doubled `.`, as from MQTT's
/// `/a//b/`) with `_`, so the subject is valid.
fn tidy_tokens(subject: &mut String) {
    if !subject.is_empty()
        && !subject.starts_with('.')
        && !subject.ends_with('.')
        && !subject.contains("..")
    {
        return;
    }
    let tidy = subject
        .split('.')
        .map(|t| if t.is_empty() { "_" } else { t })
        .collect::<Vec<_>>()
        .join(".");
    *subject = tidy;
}

/// A header name from an attribute name: characters NATS header names may not hold
/// (`:`, whitespace, controls) become `_`.
pub fn header_name(attribute: &str) -> String {
    attribute
        .chars()
        .map(|c| {
            if c == ':' || c.is_whitespace() || c.is_control() {
                '_'
            } else {
                c
            }
        })
        .collect()
}

/// A header value: CR and LF become spaces.
pub fn header_value(value: &str) -> String {
    value.replace(['\r', '\n'], " ")
}

/// The `Nats-Msg-Id` of the record at `offset`: the WAL's identity (random, created
/// with its directory), the sink's name and the offset. A replay after a crash sends
/// the same id, which the server deduplicates within its duplicate window; two
/// instances (two WALs) or two sinks never share one.
pub fn msg_id(wal_id: &str, sink: &str, offset: u64) -> String {
    format!("{wal_id}:{sink}:{offset}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_template_filter_keeps_literal_tokens_and_ends_at_the_first_placeholder() {
        let filter = |t: &str| SubjectTemplate::parse(t).unwrap().filter();
        assert_eq!(filter("weir.{key}"), "weir.>");
        assert_eq!(filter("weir.{source}.raw"), "weir.>");
        assert_eq!(filter("a.b{key}.c"), "a.>");
        assert_eq!(filter("{key}"), ">");
        assert_eq!(filter("events.all"), "events.all");
    }

    #[test]
    fn subjects_collide_when_one_subject_can_match_both() {
        for (a, b) in [
            ("weir.>", "weir.>"),
            ("weir.>", "weir.sensors.>"),
            ("weir.*.x", "weir.y.*"),
            ("events.all", "events.*"),
            (">", "a.b"),
        ] {
            assert!(subjects_collide(a, b), "{a} {b}");
            assert!(subjects_collide(b, a), "{b} {a}");
        }
        for (a, b) in [
            ("weir.>", "other.>"),
            ("weir.>", "weir"),
            ("weir.*", "weir.a.b"),
            ("events.all", "events.some"),
        ] {
            assert!(!subjects_collide(a, b), "{a} {b}");
            assert!(!subjects_collide(b, a), "{b} {a}");
        }
    }

    fn render(t: &str, key: &str) -> String {
        let mut out = String::new();
        SubjectTemplate::parse(t)
            .unwrap()
            .render("src", key, &mut out);
        out
    }

    #[test]
    fn keys_become_subject_tokens() {
        assert_eq!(
            render("weir.{key}", "sensors/a/temp"),
            "weir.sensors.a.temp"
        );
        assert_eq!(render("weir.{key}", "in.3"), "weir.in.3");
        assert_eq!(render("weir.{source}.{key}", "k"), "weir.src.k");
        assert_eq!(render("weir.{key}", "a/+/*/>"), "weir.a.+.%2A.%3E");
        assert_eq!(render("weir.{key}", "a b%"), "weir.a%20b%25");
        assert_eq!(render("weir.{key}", "/a//b/"), "weir._.a._.b._");
        assert_eq!(render("weir.{key}", ""), "weir._");
        assert_eq!(render("{key}", ""), "_");
    }

    #[test]
    fn bad_templates_are_refused() {
        assert!(SubjectTemplate::parse("weir.*").is_err());
        assert!(SubjectTemplate::parse("weir.{nope}").is_err());
        assert!(SubjectTemplate::parse("weir.{key").is_err());
        assert!(SubjectTemplate::parse("").is_err());
        assert!(SubjectTemplate::parse("a b").is_err());
    }

    #[test]
    fn ids_and_headers() {
        assert_eq!(msg_id("w1", "out", 42), "w1:out:42");
        assert_ne!(msg_id("w1", "out", 42), msg_id("w2", "out", 42));
        assert_eq!(header_name("mqtt.topic"), "mqtt.topic");
        assert_eq!(header_name("a:b c"), "a_b_c");
        assert_eq!(header_value("x\r\ny"), "x  y");
    }
}
