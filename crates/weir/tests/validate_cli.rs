//! `weir validate` end to end: the shipped examples, a broken config, the estimate and
//! its warning.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn weir() -> Command {
    Command::new(env!("CARGO_BIN_EXE_weir"))
}

fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn validate(path: &Path) -> Output {
    weir()
        .arg("validate")
        .arg(path)
        .output()
        .expect("the weir binary runs")
}

fn stdout(output: &Output) -> String {
    String::from_utf8_lossy(&output.stdout).into_owned()
}

fn stderr(output: &Output) -> String {
    String::from_utf8_lossy(&output.stderr).into_owned()
}

/// Writes `text` to a temporary config file and validates it.
fn validate_text(text: &str) -> Output {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let path = dir.path().join("weir.toml");
    std::fs::write(&path, text).expect("write the config");
    validate(&path)
}

#[test]
fn quickstart_is_valid_and_prints_inventory_estimate_budgets_and_hash() {
    let output = validate(&repo_root().join("examples/quickstart.toml"));
    let out = stdout(&output);
    assert!(
        output.status.success(),
        "stdout:\n{out}\nstderr:\n{}",
        stderr(&output)
    );
    for needle in [
        "quickstart.toml: valid",
        "config hash: sha256:",
        "sources.gen.batch",
        "sources.gen.tickets",
        "wal.channel",
        "sinks.lake.channel",
        "sinks.lake.encoder",
        "sinks.slow.channel",
        "runtime.log_queue",
        "status.connections",
        "status_max_connections 64 × 32 KiB; a request head within status_header_timeout 10s",
        "runtime.history",
        "/history ring: 900 samples (15m at one a second) × (1 + 40 series) × 8 bytes",
        "memory estimate:",
        "of runtime.memory_target = 256 MiB",
        "32 MiB",
        "on_full = block",
        "quarantine",
    ] {
        assert!(out.contains(needle), "{needle:?} missing from:\n{out}");
    }
    assert!(!out.contains("WARNING"), "{out}");
}

#[test]
fn every_example_is_valid() {
    for name in [
        "quickstart",
        "http",
        "mqtt",
        "http-sink",
        "s3",
        "azure",
        "nats",
        "mqtt-to-nats",
    ] {
        let output = validate(&repo_root().join(format!("examples/{name}.toml")));
        assert!(output.status.success(), "{name}: {}", stderr(&output));
    }
}

#[test]
fn a_bad_config_lists_every_error_with_its_path() {
    let output = validate_text(
        r#"
[runtime]
data_dir = "d"
status_addr = "0.0.0.0:9464"

[wal]
max_disk = "1 GiB"

[sources.gen]
type = "generator"
rate = 10
batch_size = 0

[sinks.lake]
type = "parquet"
inputs = ["gne"]
path = "out"
rotate = { bytes = "lots" }
colour = "blue"
"#,
    );
    assert_eq!(output.status.code(), Some(1));
    assert!(stdout(&output).is_empty());
    let err = stderr(&output);
    let lines: Vec<&str> = err.lines().collect();
    assert_eq!(lines.len(), 7, "{err}");
    let expected_starts = [
        "error: runtime.status_addr: ",
        "error: wal.on_full: missing required key",
        "error: sources.gen.batch_size: ",
        "error: sinks.lake.inputs[0]: no source named \"gne\"",
        "error: sinks.lake.rotate.bytes: expected a size like \"128 MiB\" (or a whole number of bytes), found \"lots\"",
        "error: sinks.lake.colour: unknown key; allowed keys here: ",
    ];
    for (line, start) in lines.iter().zip(expected_starts) {
        assert!(
            line.starts_with(start),
            "{line:?} should start with {start:?}"
        );
    }
    assert!(lines[6].ends_with("invalid, 6 errors"), "{}", lines[6]);
}

#[test]
fn an_invalid_filter_names_its_key_and_character() {
    let output = validate_text(
        r#"
[runtime]
data_dir = "d"

[wal]
max_disk = "1 GiB"
on_full = "block"

[sources.gen]
type = "generator"
rate = 10

[sinks.hot]
type = "blackhole"
inputs = ["gen"]
where = '.device == "d1" and .temp > > 30'

[sinks.cold]
type = "blackhole"
inputs = ["gen"]
where = '$device == "d1"'

[sinks.all]
type = "blackhole"
inputs = ["gen"]
on_filter_error = "keep"
"#,
    );
    assert_eq!(output.status.code(), Some(1));
    let err = stderr(&output);
    let lines: Vec<&str> = err.lines().collect();
    assert_eq!(
        lines[..3],
        [
            "error: sinks.all.on_filter_error: only applies to a sink with `where`",
            "error: sinks.cold.where: at character 1 of the expression: undefined variable \
             $device; a record's variables are $key, $source, $attributes and $ts",
            "error: sinks.hot.where: at character 29 of the expression: expected term, found \">\"",
        ],
        "{err}"
    );
    assert!(lines[3].ends_with("invalid, 3 errors"), "{err}");
}

#[test]
fn a_missing_file_and_a_syntax_error_fail_cleanly() {
    let missing = validate(Path::new("/nonexistent/weir.toml"));
    assert_eq!(missing.status.code(), Some(1));
    assert!(stderr(&missing).starts_with("error: cannot read /nonexistent/weir.toml"));
    let syntax = validate_text("[runtime\n");
    assert_eq!(syntax.status.code(), Some(1));
    assert!(
        stderr(&syntax).starts_with("error: line 1, column 9: invalid TOML"),
        "{}",
        stderr(&syntax)
    );
}

const SMALL: &str = r#"
[runtime]
data_dir = "d"
memory_target = "TARGET"
log_queue = 16
log_line_max_bytes = "1 KiB"
status_max_connections = 2

[wal]
max_disk = "64 MiB"
segment_bytes = "1 MiB"
on_full = "drop_oldest"
max_pending_bytes = "128 KiB"

[sources.gen]
type = "generator"
rate = 100
batch_size = 50
size = 1000

[sinks.lake]
type = "parquet"
inputs = ["gen"]
path = "out"
read_batch_bytes = "64 KiB"
row_group_bytes = "256 KiB"
"#;

/// 50 × 1000 (batch) + 128 KiB (WAL) + 2 × 64 KiB (sink channel) + the cursor's
/// read-ahead (2 batches of 64 KiB and 7 chunks of 64 KiB) + 256 KiB (the open file's
/// row group) + 16 × 1 KiB (logs) + 2 × 32 KiB (the status server's connections) + the
/// `/history` ring: 900 samples × (1 + 28 series: 7 for the source, 7 for the WAL, 10
/// for the sink, 2 for each of 2 queues) × 8 bytes.
const SMALL_ESTIMATE: u64 = 50 * 1000
    + 128 * 1024
    + 2 * 64 * 1024
    + 9 * 64 * 1024
    + 256 * 1024
    + 16 * 1024
    + 2 * 32 * 1024
    + 900 * 29 * 8;

#[test]
fn the_memory_estimate_is_the_hand_computed_sum() {
    let output = validate_text(&SMALL.replace("TARGET", "2 MiB"));
    let out = stdout(&output);
    assert!(output.status.success(), "{}", stderr(&output));
    assert!(
        out.contains(&format!(
            "({SMALL_ESTIMATE} bytes, the sum of the bounds above)"
        )),
        "{out}"
    );
    assert!(out.contains("on_full = drop_oldest"), "{out}");
    assert!(!out.contains("WARNING"), "{out}");
}

#[test]
fn an_estimate_above_the_target_warns_but_stays_valid() {
    let output = validate_text(&SMALL.replace("TARGET", "512 KiB"));
    let out = stdout(&output);
    assert!(output.status.success(), "{}", stderr(&output));
    let warning = out
        .lines()
        .find(|line| line.starts_with("WARNING: "))
        .unwrap_or_else(|| panic!("no WARNING line in:\n{out}"));
    assert!(
        warning.contains("above runtime.memory_target 512 KiB"),
        "{warning}"
    );
}

/// A key a component does not use (the Parquet sink's old `max_open_files`) is unknown
/// and a bad choice is named: a `weir validate` error, not "valid". `weir run` refuses
/// the same file with the same errors, before it connects to anything (the `nats`
/// source's server is not running) or creates its data_dir.
#[test]
fn validate_refuses_what_run_cannot_drive() {
    let text = r#"
[runtime]
data_dir = "d"
[wal]
max_disk = "64 MiB"
on_full = "block"
[sources.js]
type = "nats"
url = "nats://127.0.0.1:4222"
stream = "S"
consumer = "weir"
[sinks.api]
type = "http"
inputs = ["js"]
url = "http://127.0.0.1:9/"
encoding = "xml"
[sinks.lake]
type = "parquet"
inputs = ["js"]
path = "out"
max_open_files = 2
"#;
    let output = validate_text(text);
    assert!(!output.status.success());
    let err = stderr(&output);
    for needle in [
        r#"sinks.api.encoding: expected one of "ndjson", "json_array", "payload""#,
        "sinks.lake.max_open_files: unknown key",
    ] {
        assert!(err.contains(needle), "{needle:?} missing from:\n{err}");
    }

    let dir = tempfile::tempdir().expect("a temporary directory");
    let path = dir.path().join("weir.toml");
    std::fs::write(
        &path,
        text.replace(
            "data_dir = \"d\"",
            &format!("data_dir = {:?}", dir.path().join("d")),
        ),
    )
    .expect("write the config");
    let run = weir()
        .arg("run")
        .arg(&path)
        .output()
        .expect("the weir binary runs");
    assert_eq!(run.status.code(), Some(1));
    let run_err = stderr(&run);
    assert!(
        run_err.contains("sinks.lake.max_open_files: unknown key"),
        "{run_err}"
    );
    assert!(
        !dir.path().join("d").exists(),
        "weir run created its data_dir: {run_err}"
    );
}

/// The NATS source's credits (`max_inflight × max_message_bytes`) and units in flight,
/// and the NATS sink's publishes in flight, are in the inventory.
#[test]
fn the_nats_source_and_sink_show_their_bounds() {
    let output = validate(&repo_root().join("examples/nats.toml"));
    assert!(output.status.success(), "{}", stderr(&output));
    // Columns are padded to the longest queue name: compare with spaces squeezed.
    let squeezed = |s: String| s.split_whitespace().collect::<Vec<_>>().join(" ");
    let out = squeezed(stdout(&output));
    assert!(
        out.contains("sources.events.credits 256 64 MiB messages fetched, not yet durable: max_inflight 256 × max_message_bytes 256 KiB"),
        "{out}"
    );
    assert!(
        out.contains("sources.events.appends_in_flight 4 - units encoded for the WAL"),
        "{out}"
    );
    let output = validate(&repo_root().join("examples/mqtt-to-nats.toml"));
    assert!(output.status.success(), "{}", stderr(&output));
    let out = squeezed(stdout(&output));
    assert!(out.contains("sinks.core.publishes 256"), "{out}");
}

/// An az:// sink takes an emulator's account URL as its endpoint; a plain-HTTP one
/// only with allow_http, and the S3-only keys are refused.
#[test]
fn an_azure_sink_takes_an_emulator_endpoint_and_refuses_s3_keys() {
    let text = std::fs::read_to_string(repo_root().join("examples/azure.toml")).unwrap();
    let text = text
        .replace("allow_http = true", "region = \"westeurope\"")
        .replace(
            "format = \"parquet\"",
            "format = \"parquet\"\npath_style = true",
        );
    let output = validate_text(&text);
    assert!(!output.status.success());
    let err = stderr(&output);
    for needle in [
        "sinks.lake.endpoint: \"http://127.0.0.1:10000/devstoreaccount1\" is plain HTTP: set allow_http = true",
        "sinks.lake.region: only applies to s3:// URLs",
        "sinks.lake.path_style: only applies to s3:// URLs",
    ] {
        assert!(err.contains(needle), "{needle:?} missing from:\n{err}");
    }
}

/// The object-store sink's memory is in the inventory: the parts uploading
/// (`upload_concurrency × part_size`) and the open object's encoder.
#[test]
fn the_object_store_sink_shows_its_upload_memory() {
    let output = validate(&repo_root().join("examples/s3.toml"));
    assert!(output.status.success(), "{}", stderr(&output));
    let out = stdout(&output);
    assert!(
        out.contains("sinks.lake.uploads         4      32 MiB  parts uploading: upload_concurrency 4 × part_size 8 MiB"),
        "{out}"
    );
    assert!(
        out.contains("sinks.lake.encoder         1      24 MiB"),
        "{out}"
    );
}

#[test]
fn validate_states_when_budget_aware_rotation_closes_files_early() {
    let sink = |name: &str, kind: &str, rotate: &str| {
        let location = if kind == "parquet" {
            format!("path = \"./weir-out/{name}\"")
        } else {
            "url = \"file:///tmp/weir-objects\"".to_owned()
        };
        format!(
            "[sinks.{name}]\ntype = \"{kind}\"\ninputs = [\"gen\"]\n{location}\nrotate = {rotate}\n"
        )
    };
    let text = format!(
        "[runtime]\ndata_dir = \"./weir-data\"\n[wal]\nmax_disk = \"32 MiB\"\n\
         segment_bytes = \"4 MiB\"\non_full = \"block\"\n\
         [sources.gen]\ntype = \"generator\"\nrate = 1000\n{}{}{}",
        sink(
            "lake",
            "parquet",
            "{ bytes = \"16 MiB\", age = \"30s\", max_wal_share = \"25%\" }"
        ),
        sink("big", "parquet", "{ bytes = \"4 MiB\" }"),
        sink("objects", "object_store", "{ bytes = \"64 MiB\" }"),
    );
    let output = validate_text(&text);
    let out = stdout(&output);
    assert!(output.status.success(), "{out}\n{}", stderr(&output));
    assert!(
        out.contains(
            "note: sinks.lake: a file closes once the WAL records it holds reach 8 MiB \
             (rotate.max_wal_share 25% of wal.max_disk 32 MiB), before its rotate.bytes 16 MiB"
        ),
        "{out}"
    );
    assert!(
        out.contains(
            "note: sinks.objects: an object closes once the WAL records it holds reach 16 MiB"
        ),
        "{out}"
    );
    // rotate.bytes comes first: nothing to say.
    assert!(!out.contains("sinks.big:"), "{out}");
}
