//! The layering check the crates' `tests/layers.rs` share (included with `#[path]`):
//! a crate's modules are layered, and every import points down. It reads `src/` and
//! finds each crate-level name a module uses (`crate::x`, each name of a group
//! `crate::{x, y::z}` over several lines too, `super::x` where `super` is the crate
//! root, and names re-exported by `lib.rs` traced to their module), then fails on one
//! whose module is not in a lower layer, naming the file and the line.

use std::path::{Path, PathBuf};

fn layer_of(layers: &[&[&str]], module: &str) -> Option<usize> {
    layers.iter().position(|layer| layer.contains(&module))
}

fn is_ident(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '_'
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

/// The source without comments, string and char literals; newlines stay, so line
/// numbers hold. (Block comments and raw strings are not expected in these sources.)
fn code_only(text: &str) -> String {
    let s: Vec<char> = text.chars().collect();
    let at = |i: usize| s.get(i).copied().unwrap_or('\n');
    let mut out = String::new();
    let mut i = 0;
    while i < s.len() {
        let end = match (s[i], at(i + 1), at(i + 2)) {
            ('/', '/', _) => (i..s.len()).find(|&j| s[j] == '\n').unwrap_or(s.len()),
            ('"', ..) => {
                let mut j = i + 1;
                while j < s.len() && s[j] != '"' {
                    j += if s[j] == '\\' { 2 } else { 1 };
                }
                j + 1
            }
            ('\'', '\\', _) => (i + 3..s.len())
                .find(|&j| s[j] == '\'')
                .map_or(s.len(), |j| j + 1),
            ('\'', _, '\'') => i + 3,
            (c, ..) => {
                out.push(c);
                i += 1;
                continue;
            }
        };
        out.extend(s[i..end.min(s.len())].iter().filter(|&&c| c == '\n'));
        i = end;
    }
    out
}

/// The crate-level names this code uses, each with its line: `crate::x`, each name of a
/// group `crate::{x, y::z}` (over several lines too), and `super::x` where `super` is
/// the crate root. `depth` is how deep the file's module is: 1 for `src/x.rs`.
fn crate_names(code: &str, depth: usize) -> Vec<(String, usize)> {
    let line = |at: usize| code[..at].matches('\n').count() + 1;
    let mut found = Vec::new();
    // One per open brace: whether it opens an inline `mod` (one more `super` to the root).
    let mut mods: Vec<bool> = Vec::new();
    let mut i = 0;
    while let Some(c) = code[i..].chars().next() {
        let rest = &code[i..];
        let ups = (0..)
            .take_while(|n| rest.get(n * 7..).is_some_and(|r| r.starts_with("super::")))
            .count();
        if c == '{' {
            let before = code[..i].trim_end();
            let keyword = before.trim_end_matches(is_ident).trim_end();
            let mod_keyword = keyword
                .strip_suffix("mod")
                .is_some_and(|k| !k.ends_with(is_ident));
            mods.push(mod_keyword && keyword.len() < before.len());
        } else if c == '}' {
            mods.pop();
        } else if !code[..i].ends_with(is_ident) && (ups > 0 || rest.starts_with("crate::")) {
            // `crate::` and `super::` are both 7 bytes long.
            i += 7 * ups.max(1);
            if ups == 0 || ups == depth + mods.iter().filter(|&&m| m).count() {
                let tail = code[i..].trim_start();
                let mut starts = vec![code.len() - tail.len()];
                if let Some(group) = tail.strip_prefix('{') {
                    let open = code.len() - group.len();
                    starts = vec![open];
                    let mut nesting = 1;
                    for (n, c) in group.char_indices() {
                        match c {
                            '{' => nesting += 1,
                            '}' if nesting == 1 => break,
                            '}' => nesting -= 1,
                            ',' if nesting == 1 => starts.push(open + n + 1),
                            _ => {}
                        }
                    }
                }
                for start in starts {
                    let item = code[start..].trim_start();
                    let name: String = item.chars().take_while(|&c| is_ident(c)).collect();
                    if !name.is_empty() {
                        found.push((name, line(code.len() - item.len())));
                    }
                }
            }
            continue;
        }
        i += c.len_utf8();
    }
    found
}

/// Each name `lib.rs` re-exports (`pub use x::{A, B};`), with the module it comes from.
fn reexports(lib: &str) -> Vec<(String, String)> {
    let mut out = Vec::new();
    for item in lib.split(';') {
        let Some((module, names)) = item
            .trim()
            .strip_prefix("pub use ")
            .and_then(|p| p.split_once("::"))
        else {
            continue;
        };
        for name in names
            .split(|c: char| !is_ident(c))
            .filter(|n| !n.is_empty())
        {
            out.push((name.to_owned(), module.to_owned()));
        }
    }
    out
}

/// Fails, naming file and line, on every import under `root/src` that points up or
/// sideways in `layers` (lowest first); `hint` says where the layers are drawn. Fewer
/// than `at_least` crate paths found means the scan is broken.
pub fn check(root: &Path, layers: &[&[&str]], hint: &str, at_least: usize) {
    let layer_of = |module: &str| layer_of(layers, module);
    let src = root.join("src");
    let read = |path: &Path| code_only(&std::fs::read_to_string(path).expect("read"));
    let reexported = reexports(&read(&src.join("lib.rs")));
    let mut files = Vec::new();
    rust_files(&src, &mut files);
    files.sort();
    let mut wrong = Vec::new();
    let mut checked = 0;
    for file in &files {
        let shown = file.strip_prefix(root).unwrap_or(file).display();
        let parts: Vec<&str> = file
            .strip_prefix(&src)
            .expect("under src")
            .iter()
            .filter_map(|p| p.to_str())
            .collect();
        let module = parts[0].trim_end_matches(".rs").trim_end_matches("_tests");
        if matches!(module, "lib" | "main" | "bin") {
            continue;
        }
        // `src/x.rs` and `src/x/mod.rs` are `x`; `src/x/y.rs` and `src/x_tests.rs` are
        // one deeper (`x::y`, `x::tests`).
        let depth = parts.len() - usize::from(parts.last() == Some(&"mod.rs"))
            + usize::from(parts.len() == 1 && parts[0].ends_with("_tests.rs"));
        let Some(own) = layer_of(module) else {
            wrong.push(format!(
                "{shown}: module `{module}` is in no layer; add it to LAYERS and {hint}"
            ));
            continue;
        };
        for (name, line) in crate_names(&read(file), depth) {
            checked += 1;
            let used = match reexported.iter().find(|(n, _)| *n == name) {
                Some((_, from)) if layer_of(&name).is_none() => from.as_str(),
                _ => name.as_str(),
            };
            let what = match layer_of(used) {
                _ if used == module => continue,
                Some(layer) if layer < own => continue,
                Some(_) => "is not below it",
                None => "is in no layer",
            };
            let via = if used == name {
                String::new()
            } else {
                format!(" (from `{used}`)")
            };
            wrong.push(format!(
                "{shown}:{line}: `{module}` uses `{name}`{via}, which {what}"
            ));
        }
    }
    assert!(
        checked >= at_least,
        "only {checked} crate paths found: is the scan broken?"
    );
    assert!(
        wrong.is_empty(),
        "imports pointing up or sideways:\n{}",
        wrong.join("\n")
    );
}

/// The scan's own test: groups, `super`, comments and strings.
pub fn scan_self_test() {
    let code = code_only(
        "use crate::format::{A, B}; // crate::wal\n\
         use crate::{\n    batch::Batch,\n    reader::{self, Reader},\n};\n\
         use super::chain;\n\
         /// [`Wal`](crate::wal::Wal)\n\
         fn f() { let _ = (\"crate::tools\", '\"', super::super::x); crate::clock::now_ms(); }\n\
         mod tests {\n    use super::*;\n    use super::super::stats;\n}\n",
    );
    let names = crate_names(&code, 1);
    let names: Vec<(&str, usize)> = names.iter().map(|(n, l)| (n.as_str(), *l)).collect();
    let expected = [
        ("format", 1),
        ("batch", 3),
        ("reader", 4),
        ("chain", 6),
        ("clock", 8),
        ("stats", 11),
    ];
    assert_eq!(names, expected);
    // The same text as `x::tests` (`src/x_tests.rs`): `super` is `x`, `super::super` the root.
    let names: Vec<String> = crate_names(&code, 2).into_iter().map(|(n, _)| n).collect();
    assert_eq!(names, ["format", "batch", "reader", "x", "clock"]);
}
