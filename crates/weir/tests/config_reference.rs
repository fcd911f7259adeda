//! The configuration reference is generated: `docs/configuration.md` is exactly what
//! `weir config reference` prints, every key an example configuration reads is in it,
//! and `weir config example TYPE` prints a section that `weir validate` accepts.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn weir(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_weir"))
        .args(args)
        .output()
        .expect("the weir binary runs")
}

fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

#[test]
fn docs_configuration_md_is_the_generated_reference() {
    let output = weir(&["config", "reference"]);
    assert!(output.status.success(), "{}", text(&output.stderr));
    let generated = text(&output.stdout);
    let path = repo_root().join("docs/configuration.md");
    let written = std::fs::read_to_string(&path).unwrap_or_default();
    if written != generated {
        let line = written
            .lines()
            .zip(generated.lines())
            .position(|(a, b)| a != b)
            .unwrap_or_else(|| written.lines().count().min(generated.lines().count()));
        panic!(
            "docs/configuration.md is not the output of `weir config reference` (first \
             difference at line {}); regenerate it with:\n\n    \
             cargo run -p weir -- config reference > docs/configuration.md\n",
            line + 1
        );
    }
}

#[test]
fn every_key_an_example_reads_is_documented() {
    let mut checked = 0;
    for entry in std::fs::read_dir(repo_root().join("examples")).expect("examples/") {
        let path = entry.expect("an entry").path();
        if path.extension().is_none_or(|e| e != "toml") {
            continue;
        }
        let config = std::fs::read_to_string(&path).expect("readable");
        let missing = weir::config::reference::undocumented_keys(&config)
            .unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        assert!(
            missing.is_empty(),
            "{}: read but not in the reference (declare them with Section::key): {}",
            path.display(),
            missing.join(", ")
        );
        checked += 1;
    }
    assert!(checked >= 5, "only {checked} examples found");
}

/// Types whose example cannot be valid yet: their keys have no examples (see
/// `NOT_DESCRIBED_YET` in `config/reference/tests.rs`).
const NOT_CONVERTED: &[&str] = &[];

#[test]
fn every_type_example_passes_validate_in_a_minimal_config() {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let kinds = [
        ("source", weir::sources::TYPES),
        ("sink", weir::sinks::TYPES),
    ];
    for (kind, types) in kinds {
        for type_name in types {
            let name = format!("{kind}/{type_name}");
            let example = weir(&["config", "example", &name]);
            assert!(
                example.status.success(),
                "{name}: {}",
                text(&example.stderr)
            );
            let config = format!(
                "[runtime]\ndata_dir = {:?}\n\n[wal]\nmax_disk = \"1 GiB\"\non_full = \"block\"\n\n\
                 [sources.gen]\ntype = \"generator\"\nrate = 10\n\n\
                 [sinks.out]\ntype = \"blackhole\"\ninputs = [\"gen\"]\n\n{}",
                dir.path().join("data"),
                text(&example.stdout)
            );
            let path = dir.path().join(format!("{kind}-{type_name}.toml"));
            std::fs::write(&path, &config).expect("write the config");
            let validate = weir(&["validate", path.to_str().expect("UTF-8 path")]);
            let valid = validate.status.success();
            if NOT_CONVERTED.contains(&name.as_str()) {
                assert!(!valid, "{name} is valid now: remove it from NOT_CONVERTED");
                continue;
            }
            assert!(
                valid,
                "{name}: `weir validate` refused its example:\n{}\n{config}",
                text(&validate.stderr)
            );
        }
    }
}

#[test]
fn an_unknown_type_is_refused_with_the_list_of_types() {
    let output = weir(&["config", "example", "parket"]);
    assert!(!output.status.success());
    let stderr = text(&output.stderr);
    assert!(
        stderr.contains("no source or sink type \"parket\"")
            && stderr.contains("source types: generator, file, http, mqtt, nats, kafka")
            && stderr.contains("sink types: file, parquet, blackhole, object_store, http, nats"),
        "{stderr}"
    );
    let both = text(&weir(&["config", "example", "nats"]).stdout);
    assert!(
        both.contains("[sources.nats]") && both.contains("[sinks.nats]"),
        "{both}"
    );
}
