//! Environment variables in the configuration's string values: `${VAR}`,
//! `${VAR:-default}`, and `$$` for a literal `$`.
//!
//! Interpolation runs on the parsed TOML table, before the typed walk, so a variable's
//! value only ever becomes (part of) one string value: it cannot add a key, a table or
//! a quote, whatever it holds. Every string value is interpolated, at any depth (inside
//! arrays and inline tables); keys (`[sinks.NAME]`, `headers = { Name = … }`) are not.
//!
//! - `${NAME}`: the value of `NAME`. Unset, it is an error naming the key and the
//!   variable; set but empty, it is the empty string (as in a shell).
//! - `${NAME:-default}`: the value of `NAME` when it is set and not empty, else
//!   `default`, taken as written up to the first `}` (it is not interpolated itself).
//! - `$$`: one `$`.
//! - `$` followed by anything else (`$HOME`, `5$`) is kept as written, so a file written
//!   before interpolation existed reads the same.
//! - `${` with no closing `}`, or braces around something that is not a variable name
//!   (letters, digits and `_`, not starting with a digit), is an error.
//!
//! A problem is reported with the key's dotted path (`sinks.lake.url`, list elements as
//! `topics[0]`), never with the variable's value: it may be a secret.

use toml::Value;

use crate::keys::{ConfigError, join};

/// Looks up an environment variable: `None` when it is unset. [`Config::from_toml`]
/// reads the process's environment; tests pass their own.
///
/// [`Config::from_toml`]: super::Config::from_toml
pub type Env<'a> = &'a dyn Fn(&str) -> Option<String>;

/// The process's environment: a variable that is unset or not valid Unicode is `None`.
pub fn process_env(name: &str) -> Option<String> {
    std::env::var(name).ok()
}

/// Interpolates every string value of `table` in place. A value with a problem is left
/// as written; the problems are returned, one per bad reference, with their key path.
pub(super) fn interpolate(table: &mut toml::Table, env: Env<'_>) -> Vec<ConfigError> {
    let mut errors = Vec::new();
    for (key, value) in table.iter_mut() {
        walk(&join("", key), value, env, &mut errors);
    }
    errors
}

fn walk(path: &str, value: &mut Value, env: Env<'_>, errors: &mut Vec<ConfigError>) {
    match value {
        Value::String(text) if text.contains('$') => match expand(text, env) {
            Ok(expanded) => *text = expanded,
            Err(problems) => errors.extend(problems.into_iter().map(|message| ConfigError::Key {
                path: path.to_owned(),
                message,
            })),
        },
        Value::Array(items) => {
            for (i, item) in items.iter_mut().enumerate() {
                walk(&format!("{path}[{i}]"), item, env, errors);
            }
        }
        Value::Table(table) => {
            for (key, item) in table.iter_mut() {
                walk(&join(path, key), item, env, errors);
            }
        }
        _ => {}
    }
}

/// `text` with its references replaced, or every problem found in it.
fn expand(text: &str, env: Env<'_>) -> Result<String, Vec<String>> {
    let mut out = String::with_capacity(text.len());
    let mut problems = Vec::new();
    let mut rest = text;
    while let Some(at) = rest.find('$') {
        out.push_str(&rest[..at]);
        let after = &rest[at + 1..];
        if let Some(tail) = after.strip_prefix('$') {
            out.push('$');
            rest = tail;
            continue;
        }
        let Some(inside) = after.strip_prefix('{') else {
            out.push('$');
            rest = after;
            continue;
        };
        let Some(close) = inside.find('}') else {
            problems.push(
                "\"${\" has no closing \"}\": write ${NAME} or ${NAME:-default}, or $$ for a literal $"
                    .to_owned(),
            );
            rest = "";
            break;
        };
        let body = &inside[..close];
        rest = &inside[close + 1..];
        let (name, default) = match body.split_once(":-") {
            Some((name, default)) => (name, Some(default)),
            None => (body, None),
        };
        if !is_variable_name(name) {
            problems.push(format!(
                "expected a variable name (letters, digits and _, not starting with a digit) \
                 in ${{…}}, found {:?}; the forms are ${{NAME}} and ${{NAME:-default}}, and $$ is a literal $",
                shorten(name)
            ));
            continue;
        }
        match (env(name), default) {
            (Some(value), Some(default)) if value.is_empty() => out.push_str(default),
            (Some(value), _) => out.push_str(&value),
            (None, Some(default)) => out.push_str(default),
            (None, None) => problems.push(format!(
                "the environment variable {name} is not set (${{{name}}}) and has no default; \
                 set it in weir's environment, or write ${{{name}:-default}}"
            )),
        }
    }
    out.push_str(rest);
    if problems.is_empty() {
        Ok(out)
    } else {
        Err(problems)
    }
}

fn is_variable_name(name: &str) -> bool {
    !name.is_empty()
        && !name.starts_with(|c: char| c.is_ascii_digit())
        && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
}

/// At most 40 characters of what was found between the braces, for the message.
fn shorten(found: &str) -> String {
    match found.char_indices().nth(40) {
        Some((end, _)) => format!("{}…", &found[..end]),
        None => found.to_owned(),
    }
}

/// Whether a configuration error of the typed walk at `walked` is about a value whose
/// interpolation failed at `failed` (the same key, an element of it, or the list that
/// holds it): such an error only repeats the first one.
pub(super) fn follows_from(walked: &str, failed: &str) -> bool {
    let inside_failed = walked
        .strip_prefix(failed)
        .is_some_and(|tail| tail.is_empty() || tail.starts_with('.') || tail.starts_with('['));
    let list_of_failed = failed
        .strip_prefix(walked)
        .is_some_and(|tail| tail.starts_with('['));
    inside_failed || list_of_failed
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env(name: &str) -> Option<String> {
        match name {
            "BUCKET" => Some("lake".to_owned()),
            "EMPTY" => Some(String::new()),
            "TOKEN" => Some("s3cr3t\"] [x".to_owned()),
            _ => None,
        }
    }

    fn expanded(text: &str) -> Result<String, Vec<String>> {
        expand(text, &env)
    }

    #[test]
    fn variables_defaults_and_dollars() {
        assert_eq!(expanded("s3://${BUCKET}/x").unwrap(), "s3://lake/x");
        assert_eq!(expanded("${BUCKET}${BUCKET}").unwrap(), "lakelake");
        assert_eq!(expanded("${NOPE:-d}").unwrap(), "d");
        assert_eq!(expanded("${NOPE:-}").unwrap(), "");
        assert_eq!(expanded("${BUCKET:-d}").unwrap(), "lake");
        // Set but empty: the default applies with `:-`, the empty value without.
        assert_eq!(expanded("${EMPTY:-d}").unwrap(), "d");
        assert_eq!(expanded("[${EMPTY}]").unwrap(), "[]");
        // A default is taken as written: no nesting, `$$` kept.
        assert_eq!(expanded("${NOPE:-a$$b}").unwrap(), "a$$b");
        assert_eq!(expanded("$$").unwrap(), "$");
        assert_eq!(expanded("$${BUCKET}").unwrap(), "${BUCKET}");
        assert_eq!(expanded("$$$${X}").unwrap(), "$${X}");
        // A lone `$` stays as written.
        assert_eq!(
            expanded("5$ and $HOME and $").unwrap(),
            "5$ and $HOME and $"
        );
        // A value is inserted as text, whatever it holds.
        assert_eq!(expanded("t=${TOKEN}").unwrap(), "t=s3cr3t\"] [x");
    }

    #[test]
    fn problems_name_the_variable_and_say_what_to_write() {
        let problems = expanded("${A}/${BUCKET}/${B}").unwrap_err();
        assert_eq!(problems.len(), 2, "{problems:?}");
        assert!(
            problems[0].contains("variable A is not set"),
            "{problems:?}"
        );
        assert!(problems[0].contains("${A:-default}"), "{problems:?}");
        assert!(
            problems[1].contains("variable B is not set"),
            "{problems:?}"
        );

        let unclosed = expanded("x${BUCKET").unwrap_err();
        assert!(unclosed[0].contains("no closing"), "{unclosed:?}");
        for bad in ["${}", "${1X}", "${A-b}", "${a b}"] {
            let problems = expanded(bad).unwrap_err();
            assert!(
                problems[0].contains("expected a variable name"),
                "{bad}: {problems:?}"
            );
        }
    }

    #[test]
    fn every_string_at_any_depth_is_interpolated_and_errors_carry_paths() {
        let mut table: toml::Table = r#"
            top = "${BUCKET}"
            n = 5
            [sinks.lake]
            url = "s3://${BUCKET}/p"
            list = ["a", "${NOPE}", { inner = "${BUCKET}", bad = "${MISSING}" }]
            headers = { "X-Token" = "${TOKEN}" }
        "#
        .parse()
        .unwrap();
        let errors = interpolate(&mut table, &env);
        let shown: Vec<String> = errors.iter().map(ToString::to_string).collect();
        assert_eq!(shown.len(), 2, "{shown:?}");
        assert!(
            shown[0].starts_with("sinks.lake.list[1]: ") && shown[0].contains("NOPE"),
            "{shown:?}"
        );
        assert!(
            shown[1].starts_with("sinks.lake.list[2].bad: ") && shown[1].contains("MISSING"),
            "{shown:?}"
        );
        assert_eq!(table["top"].as_str(), Some("lake"));
        let lake = &table["sinks"]["lake"];
        assert_eq!(lake["url"].as_str(), Some("s3://lake/p"));
        assert_eq!(lake["list"][2]["inner"].as_str(), Some("lake"));
        assert_eq!(lake["headers"]["X-Token"].as_str(), Some("s3cr3t\"] [x"));
        // A value with a problem is left as written.
        assert_eq!(lake["list"][1].as_str(), Some("${NOPE}"));
    }

    #[test]
    fn a_config_reports_each_unset_variable_once_beside_its_other_errors() {
        let text = r#"
            [runtime]
            data_dir = "${DATA:-/tmp/weir-interpolate-never-created}"
            [wal]
            max_disk = "${WAL_SIZE}"
            on_full = "${ON_FULL:-block}"
            [sources.gen]
            type = "generator"
            rate = 0
            [sinks.lake]
            type = "file"
            inputs = ["gen", "${SECOND}"]
            path = "/tmp/weir-$$-never/${BUCKET}"
            rotate = { bytes = "8 MiB", age = "${AGE}" }
            mystery = 1
        "#;
        let errors = match crate::config::Config::from_toml_with_env(text, &env) {
            Ok(config) => panic!("{config:?}"),
            Err(e) => e
                .errors()
                .iter()
                .map(ToString::to_string)
                .collect::<Vec<_>>(),
        };
        let mut paths: Vec<&str> = errors
            .iter()
            .map(|e| e.split(": ").next().unwrap_or_default())
            .collect();
        paths.sort_unstable();
        // One error per unset variable, none for what the value left as written would
        // have caused (not a size, no source named "${SECOND}"), and the file's other
        // errors beside them.
        assert_eq!(
            paths,
            [
                "sinks.lake.inputs[1]",
                "sinks.lake.mystery",
                "sinks.lake.rotate.age",
                "wal.max_disk",
            ],
            "{errors:#?}"
        );
        assert!(
            errors
                .iter()
                .any(|e| e.starts_with("wal.max_disk: ") && e.contains("WAL_SIZE")),
            "{errors:?}"
        );
    }

    #[test]
    fn defaults_and_dollars_reach_the_typed_config() {
        let text = r#"
            [runtime]
            data_dir = "${DATA:-/tmp/weir-interpolate-never-created}"
            [wal]
            max_disk = "${WAL_SIZE:-1 GiB}"
            on_full = "${ON_FULL:-block}"
            [sources.gen]
            type = "generator"
            rate = 0
            [sinks.lake]
            type = "file"
            inputs = ["gen"]
            path = "/tmp/weir-$$-never/${BUCKET}"
        "#;
        let config = crate::config::Config::from_toml_with_env(text, &env).unwrap();
        assert_eq!(config.wal.max_disk.bytes(), 1 << 30);
        assert_eq!(
            config.runtime.data_dir.to_str(),
            Some("/tmp/weir-interpolate-never-created")
        );
        let crate::config::SinkKind::File(file) = &config.sinks["lake"].kind else {
            panic!("a file sink");
        };
        assert_eq!(file.path.to_str(), Some("/tmp/weir-$-never/lake"));
    }

    #[test]
    fn walk_errors_about_a_failed_value_are_recognised() {
        assert!(follows_from("sinks.a.url", "sinks.a.url"));
        assert!(follows_from("sinks.a.inputs", "sinks.a.inputs[0]"));
        assert!(follows_from("sinks.a.rotate.bytes", "sinks.a.rotate"));
        assert!(!follows_from("sinks.a.url2", "sinks.a.url"));
        assert!(!follows_from("sinks.a.path", "sinks.a.url"));
        // The section holding a failed key keeps its own errors.
        assert!(!follows_from("sinks.a", "sinks.a.url"));
    }
}
