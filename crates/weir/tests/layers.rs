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

/// Every `crate::NAME` on a line of code (comments and doc comments are skipped: a doc
/// link is not an import).
fn crate_paths(line: &str) -> Vec<String> {
    let code = line.trim_start();
    if code.starts_with("//") {
        return Vec::new();
    }
    let mut found = Vec::new();
    let mut rest = code;
    while let Some(at) = rest.find("crate::") {
        let after = &rest[at + "crate::".len()..];
        let name: String = after
            .chars()
            .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
            .collect();
        if !name.is_empty() {
            found.push(name);
        }
        rest = after;
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
        for (n, line) in text.lines().enumerate() {
            for used in crate_paths(line) {
                checked += 1;
                if used == module {
                    continue;
                }
                match layer_of(&used) {
                    Some(layer) if layer < own => {}
                    _ => wrong.push(format!(
                        "{}:{}: `{module}` uses `crate::{used}`, which is not below it",
                        file.display(),
                        n + 1
                    )),
                }
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
fn the_scan_sees_imports_and_skips_comments() {
    assert_eq!(
        crate_paths("use crate::pipeline::{Ingest, Sink}; // crate::cmd"),
        ["pipeline", "cmd"]
    );
    assert!(crate_paths("    /// [`Config`](crate::config::Config)").is_empty());
    assert_eq!(
        crate_paths("let x = crate::record::now_ms() + crate::keys::times(1, 2);"),
        ["record", "keys"]
    );
}
