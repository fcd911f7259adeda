//! Whole-configuration tests: defaults, every error kind, every error at once.

mod properties;
mod sources;
mod types;

use weir_wal::{OnFull, StartFrom, SyncMode};

use super::*;
use crate::sinks::{MaxLag, SinkKind};

const MINIMAL: &str = r#"
[runtime]
data_dir = "./weir-data"

[wal]
max_disk = "1 GiB"
on_full = "block"

[sources.gen]
type = "generator"
rate = 5000

[sinks.lake]
type = "parquet"
inputs = ["gen"]
path = "./weir-out/lake"
"#;

/// Replaces `MINIMAL`'s budget with one any disk the tests run on holds, so that a test
/// of the other warnings does not depend on the machine's free space (`with`'s pair).
const BUDGET_ANY_DISK_HOLDS: (&str, &str) = (
    "max_disk = \"1 GiB\"",
    "max_disk = \"8 MiB\"\nsegment_bytes = \"1 MiB\"",
);

fn errors(text: &str) -> Vec<String> {
    match Config::from_toml(text) {
        Ok(config) => panic!("expected errors, got {config:#?}"),
        Err(errors) => errors.errors().iter().map(ToString::to_string).collect(),
    }
}

#[test]
fn minimal_config_fills_defaults() {
    let config = Config::from_toml(MINIMAL).expect("valid");
    assert_eq!(config.wal.on_full, OnFull::Block);
    assert_eq!(config.wal.dir, std::path::Path::new("./weir-data/wal"));
    assert_eq!(config.wal.max_pending_bytes.bytes(), 8 << 20);
    assert_eq!(config.wal.channel_batches.get(), 256);
    assert_eq!(config.wal.sync, SyncMode::Always);
    assert_eq!(config.runtime.status_addr.to_string(), "127.0.0.1:9464");
    assert_eq!(
        config.quarantine.dir,
        std::path::Path::new("./weir-data/quarantine")
    );
    let sink = &config.sinks["lake"];
    assert!(sink.required);
    assert_eq!(sink.start_from, StartFrom::Earliest);
    assert_eq!(sink.channel_batches.get(), 2);
    assert_eq!(config.sources["gen"].max_uncommitted_tickets.get(), 64);
}

/// `MINIMAL` with `extra` appended and `replace` pairs applied.
fn with(replace: &[(&str, &str)], extra: &str) -> String {
    let mut text = MINIMAL.to_owned();
    for (from, to) in replace {
        assert!(text.contains(from), "MINIMAL has no {from:?}");
        text = text.replace(from, to);
    }
    text.push_str(extra);
    text
}

fn paths(text: &str) -> Vec<String> {
    match Config::from_toml(text) {
        Ok(_) => panic!("expected errors"),
        Err(errors) => errors
            .errors()
            .iter()
            .map(|e| e.path().unwrap_or("<no path>").to_owned())
            .collect(),
    }
}

#[test]
fn five_mistakes_give_five_errors_with_paths() {
    let text = r#"
[runtime]
data_dir = "./d"
memory_target = "lots"

[wal]
max_disk = "1 GiB"

[sources.gen]
type = "generator"
rate = 10
batch_size = 0

[sinks.lake]
type = "parquet"
inputs = ["gne"]
path = "./out"
rotate = { bytes = "128 MiB", agee = "5m" }
"#;
    assert_eq!(
        paths(text),
        [
            "runtime.memory_target",
            "wal.on_full",
            "sources.gen.batch_size",
            "sinks.lake.inputs[0]",
            "sinks.lake.rotate.agee",
        ]
    );
}

#[test]
fn missing_on_full_explains_why_and_lists_the_choices() {
    let errors = errors(&MINIMAL.replace("on_full = \"block\"", ""));
    assert_eq!(errors.len(), 1, "{errors:?}");
    let message = &errors[0];
    assert!(
        message.starts_with("wal.on_full: missing required key"),
        "{message}"
    );
    for needle in [
        "no default",
        "\"block\"",
        "\"reject\"",
        "\"drop_oldest\"",
        "acknowledged data",
    ] {
        assert!(message.contains(needle), "{needle} not in {message}");
    }
}

#[test]
fn an_empty_file_reports_every_required_key() {
    assert_eq!(
        paths(""),
        [
            "runtime.data_dir",
            "wal.max_disk",
            "wal.on_full",
            "sources",
            "sinks"
        ]
    );
}

#[test]
fn syntax_errors_carry_line_and_column() {
    let errors = errors("[runtime]\ndata_dir = \"x\"\nmemory_target = = 3\n");
    assert_eq!(errors.len(), 1);
    assert!(errors[0].starts_with("line 3, column "), "{}", errors[0]);
    assert!(errors[0].contains("invalid TOML"));
}

#[test]
fn unknown_keys_and_sections_name_the_path_and_the_allowed_keys() {
    let errors = errors(&with(
        &[("on_full", "segment_bytez = \"8 MiB\"\non_full")],
        "\n[extra]\nx = 1\n",
    ));
    assert_eq!(errors.len(), 2, "{errors:?}");
    assert!(
        errors[0].starts_with("wal.segment_bytez: unknown key (did you mean `segment_bytes`?)")
    );
    assert!(errors[0].contains("allowed keys here: channel_batches, dir, max_disk"));
    assert!(errors[1].starts_with("extra: unknown key"));
    assert!(errors[1].contains("quarantine, runtime, sinks, sources, wal"));
}

#[test]
fn an_unknown_type_is_one_error_with_a_suggestion() {
    let errors = errors(&MINIMAL.replace("type = \"parquet\"", "type = \"parket\""));
    assert_eq!(
        errors,
        [
            r#"sinks.lake.type: expected one of "file", "parquet", "blackhole", "object_store", "http", "nats", found "parket" (did you mean "parquet"?)"#
        ]
    );
    let missing = errors_of_source("rate = 5");
    assert_eq!(missing.len(), 1);
    assert!(
        missing[0].starts_with("sources.s.type: missing required key; expected one of: generator")
    );
}

fn errors_of_source(body: &str) -> Vec<String> {
    let text = with(
        &[("inputs = [\"gen\"]", "inputs = [\"gen\", \"s\"]")],
        &format!("\n[sources.s]\n{body}\n"),
    );
    errors(&text)
}

#[test]
fn zero_bounds_are_refused() {
    let text = with(
        &[(
            "on_full = \"block\"",
            "on_full = \"block\"\nmax_pending_bytes = 0\nchannel_batches = 0",
        )],
        "",
    );
    assert_eq!(
        paths(&text),
        ["wal.max_pending_bytes", "wal.channel_batches"]
    );
}

#[test]
fn status_addr_must_be_loopback_unless_public() {
    let public = with(
        &[("data_dir", "status_addr = \"0.0.0.0:9464\"\ndata_dir")],
        "",
    );
    assert_eq!(paths(&public), ["runtime.status_addr"]);
    let explicit = public.replace("data_dir", "status_public = true\ndata_dir");
    let config = Config::from_toml(&explicit).expect("explicitly public");
    assert!(config.runtime.status_public);
}

#[test]
fn listen_addresses_must_not_collide() {
    let http = |name: &str, listen: &str| {
        format!("\n[sources.{name}]\ntype = \"http\"\nlisten = \"{listen}\"\n")
    };
    let same_as_status = with(&[], &http("api", "127.0.0.1:9464"));
    let errors = errors(&same_as_status);
    assert_eq!(
        errors,
        [
            "sources.api.listen: 127.0.0.1:9464 conflicts with runtime.status_addr = 127.0.0.1:9464; give each listener its own port"
        ]
    );
    let wildcard = with(
        &[],
        &format!(
            "{}{}",
            http("a", "0.0.0.0:8080"),
            http("b", "127.0.0.1:8080")
        ),
    );
    assert_eq!(paths(&wildcard), ["sources.b.listen"]);
    let any_port = with(
        &[],
        &format!("{}{}", http("a", "127.0.0.1:0"), http("b", "127.0.0.1:0")),
    );
    assert!(Config::from_toml(&any_port).is_ok());
}

#[test]
fn wal_consistency_checks() {
    let interval_without_mode = with(&[("on_full", "sync_interval = \"10ms\"\non_full")], "");
    assert_eq!(paths(&interval_without_mode), ["wal.sync_interval"]);
    let interval = with(
        &[
            ("on_full", "sync = \"interval\"\non_full"),
            BUDGET_ANY_DISK_HOLDS,
        ],
        "",
    );
    let config = Config::from_toml(&interval).expect("valid");
    assert_eq!(
        config.wal.sync,
        SyncMode::Interval(std::time::Duration::from_millis(100))
    );
    assert!(config.warnings().iter().any(|w| w.starts_with("wal.sync")));
    assert!(
        !config
            .warnings()
            .iter()
            .any(|w| w.starts_with("wal.max_disk")),
        "8 MiB fits any disk the tests run on"
    );
    // A budget no disk here holds: the filesystem, not max_disk, would decide.
    let beyond_the_disk = with(&[("max_disk = \"1 GiB\"", "max_disk = \"1000 TiB\"")], "");
    let config = Config::from_toml(&beyond_the_disk).expect("valid");
    let warning = config
        .warnings()
        .into_iter()
        .find(|w| w.starts_with("wal.max_disk"))
        .expect("a max_disk larger than the disk is warned about");
    assert!(
        warning.contains("filesystem can hold only about"),
        "{warning}"
    );
    let huge_segments = with(&[("on_full", "segment_bytes = \"600 MiB\"\non_full")], "");
    assert_eq!(paths(&huge_segments), ["wal.segment_bytes"]);
    let big_body = with(
        &[(
            "type = \"generator\"\nrate = 5000",
            "type = \"http\"\nlisten = \"127.0.0.1:8080\"\nmax_body = \"9 MiB\"",
        )],
        "",
    );
    let errors = errors(&big_body);
    assert_eq!(errors.len(), 1);
    assert!(errors[0].starts_with(
        "sources.gen: a batch of max_body = 9 MiB is larger than wal.max_pending_bytes = 8 MiB"
    ));
}

#[test]
fn sink_keys_are_checked() {
    let lag_on_optional = with(&[], "required = false\nmax_lag = { bytes = \"1 GiB\" }\n");
    assert_eq!(paths(&lag_on_optional), ["sinks.lake.max_lag"]);
    let empty_lag = with(&[], "max_lag = {}\n");
    assert_eq!(paths(&empty_lag), ["sinks.lake.max_lag"]);
    let retry = with(&[], "retry = { initial = \"1m\", max = \"1s\" }\n");
    assert_eq!(paths(&retry), ["sinks.lake.retry.initial"]);
    let inputs = with(&[("inputs = [\"gen\"]", "inputs = []")], "");
    assert_eq!(paths(&inputs), ["sinks.lake.inputs"]);
    let twice = with(&[("inputs = [\"gen\"]", "inputs = [\"gen\", \"gen\"]")], "");
    assert_eq!(paths(&twice), ["sinks.lake.inputs[1]"]);
    let config = Config::from_toml(&with(
        &[],
        "max_lag = { age = \"1h\" }\nstart_from = \"latest\"\n",
    ))
    .expect("valid");
    let sink = &config.sinks["lake"];
    assert_eq!(
        sink.max_lag,
        Some(MaxLag {
            bytes: None,
            age: Some(Duration::secs(3600))
        })
    );
    assert_eq!(sink.start_from, StartFrom::Latest);
}

fn http_sink(url: &str, extra: &str) -> String {
    with(
        &[
            ("type = \"parquet\"", "type = \"http\""),
            ("path = \"./weir-out/lake\"", &format!("url = \"{url}\"")),
        ],
        extra,
    )
}

#[test]
fn http_sink_keys_are_read_and_checked() {
    let config = Config::from_toml(&http_sink(
        "http://127.0.0.1:8080/ingest",
        "method = \"PUT\"\nencoding = \"json_array\"\ncompression = \"zstd\"\n\
         batch_records = 50\nbatch_bytes = \"256 KiB\"\nbatch_linger = \"50ms\"\n\
         target_latency = \"200ms\"\nmin_concurrency = 2\nmax_concurrency = 40\n\
         retry_budget = 0.2\nretry_budget_floor = 0.5\nretry_budget_window = \"30s\"\n\
         max_retry_after = \"30s\"\n\
         headers = { \"X-Tenant\" = \"a\" }\nheaders_env = { Authorization = \"WEIR_AUTH\" }\n",
    ))
    .expect("valid");
    let crate::sinks::SinkKind::Http(http) = &config.sinks["lake"].kind else {
        panic!("an http sink: {:?}", config.sinks["lake"].kind);
    };
    assert_eq!(http.method, crate::sinks::http::Method::Put);
    assert_eq!(http.encoding, crate::sinks::http::Encoding::JsonArray);
    assert_eq!(http.batch_records.get(), 50);
    assert_eq!(http.batch_bytes.bytes(), 256 << 10);
    assert_eq!(http.max_concurrency.get(), 40);
    assert_eq!(http.retry_budget_floor, 0.5);
    assert_eq!(http.retry_budget_window, 30);
    assert_eq!(http.headers.len(), 2);
    assert_eq!(
        http.headers[1].value,
        crate::sinks::http::HeaderValue::Env("WEIR_AUTH".to_owned())
    );
    // Defaults.
    let config = Config::from_toml(&http_sink("https://example.invalid/x", "")).expect("valid");
    let crate::sinks::SinkKind::Http(http) = &config.sinks["lake"].kind else {
        panic!("an http sink");
    };
    assert_eq!(http.batch_records.get(), 500);
    assert_eq!(http.timeout.get(), std::time::Duration::from_secs(10));
    assert_eq!(http.target_latency, None);
    assert_eq!(http.retry_budget, 0.1);
    assert_eq!(http.retry_budget_floor, 3.0);
    assert_eq!(http.retry_budget_window, 10);
    assert_eq!(http.ca_file, None);
    let config = Config::from_toml(&http_sink(
        "https://example.invalid/x",
        "ca_file = \"ca.pem\"\n",
    ))
    .expect("valid");
    let crate::sinks::SinkKind::Http(http) = &config.sinks["lake"].kind else {
        panic!("an http sink");
    };
    assert_eq!(
        http.ca_file.as_deref(),
        Some(std::path::Path::new("ca.pem"))
    );
    assert_eq!(
        http.max_retry_after.get(),
        std::time::Duration::from_secs(60)
    );

    assert_eq!(paths(&http_sink("ftp://x", "")), ["sinks.lake.url"]);
    assert_eq!(
        paths(&http_sink(
            "http://h/",
            "method = \"GET\"\nencoding = \"xml\"\nretry_budget = 2\n\
             min_concurrency = 8\nmax_concurrency = 4\nheaders_env = { A = \"not a name\" }\n\
             ca_file = \"ca.pem\"\nretry_budget_floor = -1\nretry_budget_window = \"1500ms\"\n"
        )),
        [
            "sinks.lake.ca_file",
            "sinks.lake.headers_env",
            "sinks.lake.min_concurrency",
            "sinks.lake.retry_budget",
            "sinks.lake.retry_budget_floor",
            "sinks.lake.retry_budget_window",
            "sinks.lake.method",
            "sinks.lake.encoding",
        ]
    );
}

/// The object-store sink's keys: every mistake is reported at its key.
#[test]
fn object_store_keys_are_checked() {
    let store = |url: &str, extra: &str| {
        with(
            &[
                ("type = \"parquet\"", "type = \"object_store\""),
                ("path = \"./weir-out/lake\"", &format!("url = \"{url}\"")),
            ],
            extra,
        )
    };
    let config = Config::from_toml(&store("s3://bucket/a/b", "")).expect("valid");
    let SinkKind::ObjectStore(c) = &config.sinks["lake"].kind else {
        panic!("an object_store sink")
    };
    assert_eq!(
        c.location,
        crate::sinks::object_store::Location::S3 {
            bucket: "bucket".into(),
            prefix: "a/b".into()
        }
    );
    assert_eq!(c.part_size.bytes(), 8 << 20);
    assert_eq!(c.upload_concurrency.get(), 4);
    assert!(c.parquet.is_some());
    assert_eq!(
        paths(&store("s3://bucket/prefix", "part_size = \"1 MiB\"\n")),
        ["sinks.lake.part_size"]
    );
    // file:// has no smallest part.
    Config::from_toml(&store("file:///tmp/lake", "part_size = \"1 MiB\"\n")).expect("valid");
    Config::from_toml(&store(
        "s3://b",
        "format = \"ndjson\"\ncompression = \"zstd\"\n",
    ))
    .expect("valid");
    assert_eq!(
        paths(&store(
            "s3://b",
            "format = \"ndjson\"\ncompression = \"snappy\"\n"
        )),
        ["sinks.lake.compression"]
    );
    assert_eq!(
        paths(&store(
            "s3://b",
            "format = \"ndjson\"\nrow_group_rows = 5\n"
        )),
        ["sinks.lake.row_group_rows"]
    );
    assert_eq!(paths(&store("bucket", "")), ["sinks.lake.url"]);
    assert_eq!(paths(&store("file://relative", "")), ["sinks.lake.url"]);
    assert_eq!(
        paths(&store("s3://b", "max_open_files = 2\n")),
        ["sinks.lake.max_open_files"]
    );
    assert_eq!(
        paths(&store("s3://b", "endpoint = \"http://127.0.0.1:9000\"\n")),
        ["sinks.lake.endpoint"]
    );
    Config::from_toml(&store(
        "s3://b",
        "endpoint = \"http://127.0.0.1:9000\"\nallow_http = true\nregion = \"us-east-1\"\npath_style = true\n",
    ))
    .expect("valid");
    assert_eq!(
        paths(&store("gs://b", "region = \"x\"\n")),
        ["sinks.lake.region"]
    );
    // Azure: the account URL (an emulator's, plain HTTP only with allow_http); region
    // and path_style are S3's.
    Config::from_toml(&store(
        "az://container/p",
        "endpoint = \"http://127.0.0.1:10000/devstoreaccount1\"\nallow_http = true\n",
    ))
    .expect("valid");
    assert_eq!(
        paths(&store(
            "az://container/p",
            "endpoint = \"http://127.0.0.1:10000/devstoreaccount1\"\n"
        )),
        ["sinks.lake.endpoint"]
    );
    assert_eq!(
        paths(&store("az://container", "path_style = false\n")),
        ["sinks.lake.path_style"]
    );
    assert_eq!(
        paths(&store("file:///tmp/x", "endpoint = \"https://x\"\n")),
        ["sinks.lake.endpoint"]
    );
    assert_eq!(
        paths(&store("s3://b", "rotate = { max_wal_share = \"0%\" }\n")),
        ["sinks.lake.rotate.max_wal_share"]
    );
    let file_sink = with(
        &[("type = \"parquet\"", "type = \"file\"")],
        "rotate = { max_wal_share = \"30%\" }\n",
    );
    assert_eq!(paths(&file_sink), ["sinks.lake.rotate.max_wal_share"]);
}

#[test]
fn names_must_be_usable_in_metrics_and_files() {
    let text = with(
        &[("inputs = [\"gen\"]", "inputs = [\"gen\", \"my gen\"]")],
        "\n[sources.\"my gen\"]\ntype = \"generator\"\nrate = 1\n",
    );
    assert_eq!(paths(&text), ["sources.\"my gen\""]);
}

#[test]
fn unread_sources_are_warned_about() {
    let text = with(
        &[BUDGET_ANY_DISK_HOLDS],
        "\n[sources.extra]\ntype = \"generator\"\nrate = 1\n",
    );
    let config = Config::from_toml(&text).expect("valid");
    assert_eq!(
        config.warnings(),
        [
            "sources.extra: no sink reads this source; its records fill the WAL and are only deleted by retention"
        ]
    );
}

#[test]
fn the_hash_ignores_formatting_and_explicit_defaults() {
    let base = Config::from_toml(MINIMAL).expect("valid").hash();
    let spelled_out = with(
        &[(
            "on_full = \"block\"",
            "on_full = \"block\" # comment\nmax_pending_bytes = \"8 MiB\"\nsync = \"always\"",
        )],
        "required = true\n",
    );
    assert_eq!(Config::from_toml(&spelled_out).expect("valid").hash(), base);
    let other_choice = MINIMAL.replace("\"block\"", "\"drop_oldest\"");
    assert_ne!(
        Config::from_toml(&other_choice).expect("valid").hash(),
        base
    );
    let shown = base.to_string();
    assert!(
        shown.starts_with("sha256:") && shown.len() == "sha256:".len() + 16,
        "{shown}"
    );
    assert_eq!(base.hex().len(), 64);
}

#[test]
fn cross_checks_skip_keys_that_already_failed() {
    let text = with(
        &[
            (
                "on_full = \"block\"",
                "on_full = \"block\"\nmax_pending_bytes = \"tiny\"",
            ),
            (
                "data_dir = \"./weir-data\"",
                "data_dir = \"./weir-data\"\nstatus_addr = \"127.0.0.1\"",
            ),
        ],
        "\n[sources.api]\ntype = \"http\"\nlisten = \"127.0.0.1:9464\"\nmax_body = \"9 MiB\"\n",
    );
    // Without the skip, the stand-in defaults (8 MiB, 127.0.0.1:9464) would add two
    // errors that are only consequences of these two.
    assert_eq!(
        paths(&text),
        ["runtime.status_addr", "wal.max_pending_bytes"]
    );
}

#[test]
fn pair_checks_skip_a_key_that_already_failed() {
    // An invalid segment_bytes stands in as 64 MiB, which would not fit twice in 100 MiB.
    let segments = with(
        &[(
            "max_disk = \"1 GiB\"",
            "max_disk = \"100 MiB\"\nsegment_bytes = \"x\"",
        )],
        "",
    );
    assert_eq!(paths(&segments), ["wal.segment_bytes"]);
    let retry = with(&[], "retry = { initial = \"1h\", max = 5 }\n");
    assert_eq!(paths(&retry), ["sinks.lake.retry.max"]);
}

#[test]
fn directories_are_not_shared() {
    let text = with(
        &[(
            "max_disk = \"1 GiB\"",
            "max_disk = \"1 GiB\"\ndir = \"./weir-data/quarantine/\"",
        )],
        "\n[sinks.copy]\ntype = \"file\"\ninputs = [\"gen\"]\npath = \"weir-out/lake\"\n",
    );
    assert_eq!(
        errors(&text),
        [
            "quarantine.dir: ./weir-data/quarantine is also wal.dir; each needs its own directory, or their files would collide",
            "sinks.lake.path: ./weir-out/lake is also sinks.copy.path; each needs its own directory, or their files would collide",
        ]
    );
}

#[test]
fn directories_are_compared_as_the_file_system_resolves_them() {
    // `..` and a symbolic link are resolved, not compared as text.
    let tmp = tempfile::tempdir().unwrap();
    let data = tmp.path().join("data");
    std::fs::create_dir_all(data.join("x")).unwrap();
    std::os::unix::fs::symlink(&data, tmp.path().join("link")).unwrap();
    for quarantine in [
        data.join("x/../wal"),
        tmp.path().join("link/wal"),
        data.join("./wal/"),
    ] {
        let text = with(
            &[(
                "max_disk = \"1 GiB\"",
                &format!(
                    "max_disk = \"1 GiB\"\ndir = \"{}\"",
                    data.join("wal").display()
                ),
            )],
            &format!("\n[quarantine]\ndir = \"{}\"\n", quarantine.display()),
        );
        let found = errors(&text);
        assert_eq!(found.len(), 1, "{}: {found:?}", quarantine.display());
        assert!(
            found[0].starts_with("quarantine.dir: ") && found[0].contains(" is also wal.dir;"),
            "{found:?}"
        );
    }
}

#[test]
fn a_source_and_a_sink_may_not_share_a_name() {
    let text = with(
        &[],
        "\n[sinks.gen]\ntype = \"file\"\ninputs = [\"gen\"]\npath = \"weir-out/gen\"\n",
    );
    assert_eq!(
        errors(&text),
        [
            "sinks.gen: a source is named \"gen\" too; a source and a sink need different names (the quarantine keeps records, counts and logs under the name): rename one"
        ]
    );
}

#[test]
fn a_duplicate_key_is_reported_with_its_path() {
    let found = errors(
        "[runtime]\ndata_dir = \"x\"\n[wal]\nmax_disk = \"1 GiB\"\non_full = \"reject\"\nmax_disk = \"2 GiB\"\n",
    );
    assert_eq!(found.len(), 1, "{found:?}");
    assert!(
        found[0].starts_with("wal.max_disk: set twice (line 6 repeats it)"),
        "{}",
        found[0]
    );
    let found = errors(
        "[runtime]\ndata_dir = \"x\"\n[sinks.\"out\"]\ntype = \"blackhole\"\ntype = \"file\"\n",
    );
    assert!(
        found[0].starts_with("sinks.out.type: set twice"),
        "{}",
        found[0]
    );
}

#[test]
fn sink_paths_inside_the_wal_directory_are_refused() {
    let text = with(
        &[],
        "\n[sinks.copy]\ntype = \"file\"\ninputs = [\"gen\"]\npath = \"./weir-data/wal/copy\"\n",
    );
    assert_eq!(
        errors(&text),
        [
            "sinks.copy.path: ./weir-data/wal/copy is inside wal.dir (./weir-data/wal); the WAL owns that directory (its recovery lists, quarantines and deletes files there): choose a directory outside it",
        ]
    );
}
