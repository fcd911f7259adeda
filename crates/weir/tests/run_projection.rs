//! What JSON sinks write per record, end to end: the envelope, the payload alone
//! (`encoding = "payload"`), or an object of chosen payload fields (`fields`).

mod run_support;

use std::time::Duration;

use run_support::{Daemon, free_addr, write_config};

const INPUT: &str = "{\"device\":\"d1\",\"temp\":21.5,\"loc\":{\"lat\":48.1},\"fw\":\"1.2\"}\n{\"device\":\"d2\",\"temp\":19}\nnot json\n";

/// Tails INPUT into the sinks in `sinks` (TOML); returns the directory once `out` has
/// `records` records.
fn run(sinks: &str, records: u64) -> tempfile::TempDir {
    let tmp = tempfile::tempdir().unwrap();
    std::fs::write(tmp.path().join("input.log"), INPUT).unwrap();
    let status = free_addr();
    let path = write_config(
        tmp.path(),
        &format!(
            r#"
[runtime]
data_dir = "{data}"
status_addr = "{status}"

[wal]
max_disk = "16 MiB"
segment_bytes = "1 MiB"
on_full = "block"

[sources.devices]
type = "file"
path = "{input}"
{sinks}
"#,
            data = tmp.path().join("data").display(),
            input = tmp.path().join("input.log").display(),
            sinks = sinks.replace("DIR", &tmp.path().display().to_string()),
        ),
    );
    let daemon = Daemon::start(tmp.path(), &path, status, &[]);
    daemon.wait_for("the sink's records", Duration::from_secs(10), |s| {
        s["sinks"]["out"]["records"] == records
    });
    assert_eq!(daemon.stop(), Some(0));
    tmp
}

fn lines(dir: &std::path::Path) -> Vec<String> {
    let mut files: Vec<_> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    files.sort();
    files
        .iter()
        .flat_map(|f| {
            std::fs::read_to_string(f)
                .unwrap()
                .lines()
                .map(str::to_owned)
                .collect::<Vec<_>>()
        })
        .collect()
}

#[test]
fn fields_write_a_projected_object_and_quarantine_what_is_not_one() {
    let tmp = run(
        r#"
[sinks.out]
type = "file"
inputs = ["devices"]
path = "DIR/out"
fields = { device = "/device", lat = "/loc/lat", temp = "/temp" }
"#,
        2,
    );
    assert_eq!(
        lines(&tmp.path().join("out")),
        [
            r#"{"device":"d1","lat":48.1,"temp":21.5}"#,
            r#"{"device":"d2","lat":null,"temp":19}"#,
        ]
    );
    let q =
        std::fs::read_to_string(tmp.path().join("data/quarantine/out/quarantine.ndjson")).unwrap();
    assert!(q.contains("cannot project it"), "{q}");
}

#[test]
fn encoding_payload_writes_the_payload_alone() {
    let tmp = run(
        r#"
[sinks.out]
type = "file"
inputs = ["devices"]
path = "DIR/out"
encoding = "payload"

[sinks.objects]
type = "object_store"
inputs = ["devices"]
url = "file://DIR/objects"
format = "ndjson"
encoding = "payload"
rotate = { age = "1s" }
"#,
        3,
    );
    assert_eq!(
        lines(&tmp.path().join("out")),
        [
            r#"{"device":"d1","temp":21.5,"loc":{"lat":48.1},"fw":"1.2"}"#,
            r#"{"device":"d2","temp":19}"#,
            r#""not json""#,
        ]
    );
    let objects: Vec<_> = walk(&tmp.path().join("objects"));
    let text: String = objects
        .iter()
        .map(|p| std::fs::read_to_string(p).unwrap())
        .collect();
    assert!(text.starts_with("{\"device\":\"d1\""), "{text}");
    assert_eq!(text.lines().count(), 3, "{text}");
}

fn walk(dir: &std::path::Path) -> Vec<std::path::PathBuf> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let p = e.path();
        if p.is_dir() {
            out.extend(walk(&p));
        } else if p.extension().is_some_and(|x| x == "ndjson") {
            out.push(p);
        }
    }
    out.sort();
    out
}

#[test]
fn projection_mistakes_name_the_key() {
    let tmp = tempfile::tempdir().unwrap();
    let path = write_config(
        tmp.path(),
        &format!(
            r#"
[runtime]
data_dir = "{data}"

[wal]
max_disk = "16 MiB"
segment_bytes = "1 MiB"
on_full = "block"

[sources.gen]
type = "generator"
rate = 1

[sinks.a]
type = "file"
inputs = ["gen"]
path = "{dir}/a"
encoding = "payload"
fields = {{ x = "/x" }}

[sinks.b]
type = "file"
inputs = ["gen"]
path = "{dir}/b"
fields = {{ x = "x" }}

[sinks.c]
type = "http"
inputs = ["gen"]
url = "http://127.0.0.1:1/"
encoding = "payload"
fields = {{ x = "/x" }}

[sinks.d]
type = "object_store"
inputs = ["gen"]
url = "file://{dir}/d"
encoding = "payload"
"#,
            data = tmp.path().join("data").display(),
            dir = tmp.path().display(),
        ),
    );
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_weir"))
        .arg("validate")
        .arg(&path)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    for expected in [
        "sinks.a.fields: writes a projected object instead of the payload",
        "sinks.b.fields.x: expected a JSON pointer starting with '/'",
        "sinks.c.fields: writes each record as an object of payload fields, not its payload",
        "sinks.d.encoding: only applies to format = \"ndjson\"",
    ] {
        assert!(stderr.contains(expected), "no {expected:?} in:\n{stderr}");
    }
}
