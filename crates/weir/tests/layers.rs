//! The `weir` crate's modules are layered, and every import points down: a module
//! names (`crate::…`) only modules of a lower layer. This test reads the sources and
//! fails on an arrow that points up or sideways, naming the file and line, so the
//! layout described in `ARCHITECTURE.md` cannot drift silently.

use std::path::{Path, PathBuf};

/// The layers, lowest first. A module may use modules of lower layers only; modules of
/// one layer (the sources and the sinks) do not use each other.
const LAYERS: &[&[&str]] = &[
    &["keys", "record"],
    &["telemetry"],
    &["logging", "quarantine"],
    &["pipeline"],
    &["sources", "sinks"],
    &["config"],
    &["runtime"],
    &["cmd"],
];

fn layer_of(module: &str) -> Option<usize> {
    LAYERS.iter().position(|layer| layer.contains(&module))
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).expect("read src") {
        let path = entry.expect("entry").path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// The top-level module a file belongs to (`src/sources/mqtt/core.rs` → `sources`,
/// `src/quarantine_tests.rs` → `quarantine`); `None` for `lib.rs` and `main.rs`.
fn module_of(src: &Path, file: &Path) -> Option<String> {
    let relative = file.strip_prefix(src).expect("under src");
    let first = relative
        .components()
        .next()?
        .as_os_str()
        .to_str()?
        .to_owned();
    let name = first.trim_end_matches(".rs").trim_end_matches("_tests");
    (name != "lib" && name != "main").then(|| name.to_owned())
}

/// Every `crate::NAME` in `text`, with its line number (from 1): the names in a group
/// (`use crate::{a, b::c}`, over several lines too) each count. Comment lines (and doc
/// comments) are skipped: a doc link is not an import.
fn crate_paths(text: &str) -> Vec<(usize, String)> {
    // Comment lines become empty, so that offsets still give line numbers.
    let code: String = text
        .lines()
        .map(|line| {
            if line.trim_start().starts_with("//") {
                ""
            } else {
                line
            }
        })
        .collect::<Vec<_>>()
        .join("\n");
    let line_at = |offset: usize| code[..offset].matches('\n').count() + 1;
    let ident = |s: &str| -> String {
        s.chars()
            .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
            .collect()
    };
    let mut found = Vec::new();
    let mut at = 0;
    while let Some(i) = code[at..].find("crate::") {
        let start = at + i + "crate::".len();
        let rest = &code[start..];
        if let Some(group) = rest.strip_prefix('{') {
            // The names at the group's top level: up to the matching brace.
            let mut depth = 1;
            let mut element_start = true;
            for (k, c) in group.char_indices() {
                match c {
                    '{' => depth += 1,
                    '}' => {
                        depth -= 1;
                        if depth == 0 {
                            break;
                        }
                    }
                    ',' if depth == 1 => element_start = true,
                    c if element_start && (c.is_ascii_alphanumeric() || c == '_') => {
                        element_start = false;
                        if depth == 1 {
                            let offset = start + 1 + k;
                            found.push((line_at(offset), ident(&code[offset..])));
                        }
                    }
                    _ => {}
                }
            }
        } else {
            let name = ident(rest);
            if !name.is_empty() {
                found.push((line_at(start), name));
            }
        }
        at = start;
    }
    found
}

#[test]
fn every_import_points_down() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    rust_files(&src, &mut files);
    files.sort();
    assert!(files.len() > 50, "found only {} files", files.len());
    let mut wrong = Vec::new();
    let mut checked = 0;
    for file in &files {
        let Some(module) = module_of(&src, file) else {
            continue;
        };
        let Some(own) = layer_of(&module) else {
            wrong.push(format!(
                "{}: module `{module}` is in no layer; add it to LAYERS and ARCHITECTURE.md",
                file.display()
            ));
            continue;
        };
        let text = std::fs::read_to_string(file).expect("read");
        for (line, used) in crate_paths(&text) {
            checked += 1;
            if used == module {
                continue;
            }
            match layer_of(&used) {
                Some(layer) if layer < own => {}
                _ => wrong.push(format!(
                    "{}:{line}: `{module}` uses `crate::{used}`, which is not below it",
                    file.display(),
                )),
            }
        }
    }
    assert!(
        checked > 100,
        "only {checked} crate paths found: is the scan broken?"
    );
    assert!(
        wrong.is_empty(),
        "imports pointing up:\n{}",
        wrong.join("\n")
    );
}

#[test]
fn the_scan_sees_imports_and_groups_and_skips_comments() {
    let names = |text: &str| -> Vec<(usize, String)> { crate_paths(text) };
    let owned = |v: &[(usize, &str)]| -> Vec<(usize, String)> {
        v.iter().map(|(l, n)| (*l, (*n).to_owned())).collect()
    };
    assert_eq!(
        names("use crate::pipeline::{Ingest, Sink}; // crate::cmd"),
        owned(&[(1, "pipeline"), (1, "cmd")])
    );
    assert!(names("    /// [`Config`](crate::config::Config)").is_empty());
    assert_eq!(
        names("let x = crate::record::now_ms() + crate::keys::times(1, 2);"),
        owned(&[(1, "record"), (1, "keys")])
    );
    assert_eq!(
        names(
            "use crate::{sinks, sources::{a, b}};\n// crate::cmd\nuse crate::{\n    telemetry::X,\n    runtime,\n};"
        ),
        owned(&[
            (1, "sinks"),
            (1, "sources"),
            (4, "telemetry"),
            (5, "runtime")
        ])
    );
}
