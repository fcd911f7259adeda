//! The files in `examples/` stay true: every config passes `weir validate`, every lab
//! scenario runs under `weir lab run`, each file opens with a comment that says what it
//! shows and which server it needs, and none calls a component type unbuilt.
//!
//! The header convention: the first line is a comment saying what the example shows,
//! and the opening comment block holds a `Needs:` line naming every outside service the
//! config talks to (the MQTT broker, the NATS server, the Kafka broker, the object
//! store, the HTTP endpoint), or saying `no outside service`.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// The workspace's root, where `examples/` is.
fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// The `.toml` files directly in `dir`, sorted.
fn tomls(dir: &Path) -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("reading {}: {e}", dir.display()))
        .map(|entry| entry.expect("a directory entry").path())
        .filter(|p| p.extension().is_some_and(|e| e == "toml"))
        .collect();
    files.sort();
    assert!(!files.is_empty(), "no examples in {}", dir.display());
    files
}

fn configs() -> Vec<PathBuf> {
    tomls(&root().join("examples"))
}

fn scenarios() -> Vec<PathBuf> {
    tomls(&root().join("examples/lab"))
}

/// `weir ARGS`, run from the workspace's root (the examples' relative paths are
/// relative to it).
fn weir(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_weir"))
        .args(args)
        .current_dir(root())
        .output()
        .expect("the weir binary runs")
}

/// `examples/NAME` as the examples name themselves.
fn shown(path: &Path) -> String {
    path.strip_prefix(root())
        .unwrap_or(path)
        .display()
        .to_string()
}

/// Runs `weir ARGS FILE` for each file and fails with every file that did not pass.
fn each_passes(files: &[PathBuf], args: &[&str]) {
    let failed: Vec<String> = files
        .iter()
        .filter_map(|path| {
            let file = shown(path);
            let mut all = args.to_vec();
            all.push(&file);
            let out = weir(&all);
            (!out.status.success() || out.stdout.is_empty()).then(|| {
                format!(
                    "weir {}: {}\n{}",
                    all.join(" "),
                    out.status,
                    String::from_utf8_lossy(&out.stderr)
                )
            })
        })
        .collect();
    assert!(failed.is_empty(), "{}", failed.join("\n"));
}

#[test]
fn every_config_validates() {
    // Credentials are named by `*_env` keys and read by `weir run` only, so the
    // examples validate without them.
    each_passes(&configs(), &["validate"]);
}

#[test]
fn every_lab_scenario_runs() {
    each_passes(&scenarios(), &["lab", "run"]);
}

/// What an example says about a component type that `weir run` does not drive: the
/// words an example that drifted from the code uses.
const UNBUILT: &[&str] = &[
    "not built",
    "does not drive",
    "doesn't drive",
    "not driven",
    "not yet supported",
    "not supported yet",
    "not implemented",
];

#[test]
fn no_example_calls_a_component_unbuilt() {
    let mut found = Vec::new();
    for path in configs().iter().chain(&scenarios()) {
        let text = std::fs::read_to_string(path).expect("the example reads");
        // Sentences may run over several comment lines: join them first.
        let joined = text
            .lines()
            .map(|l| l.trim_start_matches('#').trim())
            .collect::<Vec<_>>()
            .join(" ")
            .to_lowercase();
        for words in UNBUILT {
            if joined.contains(words) {
                found.push(format!("{}: {words:?}", shown(path)));
            }
        }
        // "not yet" only in the sense of data not yet durable (acked, written), never of
        // a component.
        for (at, _) in joined.match_indices("not yet") {
            let next = joined[at + "not yet".len()..]
                .split_whitespace()
                .next()
                .unwrap_or("")
                .trim_end_matches(|c: char| !c.is_alphanumeric());
            if !["durable", "acked", "written"].contains(&next) {
                found.push(format!("{}: \"not yet {next}\"", shown(path)));
            }
        }
        // Every component type named, in a table or a comment, is one `weir run` drives.
        for line in text.lines() {
            let line = line.trim_start_matches('#').trim();
            for (at, _) in line.match_indices("type = \"") {
                // Inside an inline table: a schema column's type, not a component's.
                let before = &line[..at];
                if before.matches('{').count() > before.matches('}').count() {
                    continue;
                }
                let rest = &line[at + "type = \"".len()..];
                let name = rest.split('"').next().unwrap_or("");
                let known =
                    weir::sources::TYPES.contains(&name) || weir::sinks::TYPES.contains(&name);
                if !known && !is_scenario(path) {
                    found.push(format!("{}: type = {name:?} is not built", shown(path)));
                }
            }
        }
    }
    assert!(found.is_empty(), "{}", found.join("\n"));
}

fn is_scenario(path: &Path) -> bool {
    path.parent().is_some_and(|p| p.ends_with("lab"))
}

/// The opening comment block, without the `#`s.
fn header(text: &str) -> Vec<&str> {
    text.lines()
        .take_while(|l| l.starts_with('#'))
        .map(|l| l.trim_start_matches('#').trim())
        .collect()
}

/// The `Needs:` sentence of a header (it may run over several lines), lowercased.
fn needs(header: &[&str]) -> Option<String> {
    let start = header.iter().position(|l| l.starts_with("Needs:"))?;
    let mut sentence = String::new();
    for line in &header[start..] {
        sentence.push_str(line);
        sentence.push(' ');
        if line.is_empty() || line.ends_with('.') {
            break;
        }
    }
    Some(sentence.to_lowercase())
}

/// The outside services a config talks to, each as a word its `Needs:` line must hold.
fn services(config: &toml::Table) -> Vec<&'static str> {
    let mut out = Vec::new();
    for (section, kind) in [("sources", true), ("sinks", false)] {
        let Some(components) = config.get(section).and_then(toml::Value::as_table) else {
            continue;
        };
        for component in components.values() {
            let type_name = component.get("type").and_then(toml::Value::as_str);
            let url = component
                .get("url")
                .and_then(toml::Value::as_str)
                .unwrap_or("");
            let service = match (type_name, kind) {
                (Some("mqtt"), _) => "mqtt",
                (Some("nats"), _) => "nats",
                (Some("kafka"), _) => "kafka",
                (Some("http"), false) => "http endpoint",
                (Some("object_store"), _) if url.starts_with("s3://") => "s3",
                (Some("object_store"), _) if url.starts_with("az://") => "azure",
                (Some("object_store"), _) if url.starts_with("gs://") => "gcs",
                _ => continue,
            };
            if !out.contains(&service) {
                out.push(service);
            }
        }
    }
    out
}

#[test]
fn every_example_says_what_it_shows_and_what_it_needs() {
    let mut wrong = Vec::new();
    for path in configs().iter().chain(&scenarios()) {
        let file = shown(path);
        let text = std::fs::read_to_string(path).expect("the example reads");
        let header = header(&text);
        if header.first().is_none_or(|first| first.len() < 10) {
            wrong.push(format!(
                "{file}: the first line must be a comment saying what the example shows"
            ));
            continue;
        }
        let Some(needs) = needs(&header) else {
            wrong.push(format!(
                "{file}: the opening comment has no `Needs:` line (the servers it needs, or \
                 \"no outside service\")"
            ));
            continue;
        };
        let wanted = if is_scenario(path) {
            Vec::new()
        } else {
            let config: toml::Table = text
                .parse()
                .unwrap_or_else(|e| panic!("{file} is not TOML: {e}"));
            services(&config)
        };
        if wanted.is_empty() {
            if !needs.contains("no outside service") {
                wrong.push(format!(
                    "{file}: talks to no outside service, but its `Needs:` line does not say \
                     \"no outside service\": {needs}"
                ));
            }
        } else {
            for service in wanted {
                if !needs.contains(service) {
                    wrong.push(format!(
                        "{file}: talks to {service}, which its `Needs:` line does not name: {needs}"
                    ));
                }
            }
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}
