//! `weir run` end to end: the HTTP source's answers (200, 400, 401, 413, 415) and
//! config errors that stop `weir run` before it starts.

mod run_support;

use std::net::SocketAddr;
use std::path::Path;

use run_support::{Daemon, free_addr, header, post, request, run_to_exit, write_config};

fn config(dir: &Path, status: SocketAddr, http: SocketAddr, extra: &str) -> String {
    format!(
        r#"
[runtime]
data_dir = "{data}"
status_addr = "{status}"

[wal]
max_disk = "16 MiB"
segment_bytes = "1 MiB"
on_full = "reject"

[sources.api]
type = "http"
listen = "{http}"
max_body = "1 KiB"
{extra}

[sinks.out]
type = "file"
inputs = ["api"]
path = "{out}"
"#,
        data = dir.join("data").display(),
        out = dir.join("out").display(),
    )
}

#[test]
fn status_codes_of_the_http_source() {
    let tmp = tempfile::tempdir().unwrap();
    let (status, http) = (free_addr(), free_addr());
    let path = write_config(
        tmp.path(),
        &config(
            tmp.path(),
            status,
            http,
            r#"auth_token_env = "WEIR_TEST_TOKEN""#,
        ),
    );
    let daemon = Daemon::start(tmp.path(), &path, status, &[("WEIR_TEST_TOKEN", "s3cret")]);
    let auth = "Authorization: Bearer s3cret";

    // 401 without the token, or with a wrong one.
    let r = post(http, "/ingest", &[], b"{\"a\":1}\n").unwrap();
    assert_eq!(r.0, 401);
    assert_eq!(header(&r, "www-authenticate"), Some("Bearer"));
    let r = post(http, "/ingest", &["Authorization: Bearer nope"], b"{}").unwrap();
    assert_eq!(r.0, 401);

    // 200 once durable, counting the records.
    let r = post(http, "/ingest", &[auth], b"{\"a\":1}\n\n[2]\n\"three\"\n").unwrap();
    assert_eq!(r.0, 200, "{}", String::from_utf8_lossy(&r.2));
    let v: serde_json::Value = serde_json::from_slice(&r.2).unwrap();
    assert_eq!(v["accepted"], 3);

    // A raw body is one record.
    let r = post(
        http,
        "/ingest",
        &[auth, "Content-Type: application/octet-stream"],
        b"not json",
    )
    .unwrap();
    assert_eq!(r.0, 200);
    assert_eq!(
        serde_json::from_slice::<serde_json::Value>(&r.2).unwrap()["accepted"],
        1
    );

    // 400 names the first bad line.
    let r = post(
        http,
        "/ingest",
        &[auth],
        b"{}\n{\"ok\":true}\nnot json\n{oops\n",
    )
    .unwrap();
    assert_eq!(r.0, 400);
    let v: serde_json::Value = serde_json::from_slice(&r.2).unwrap();
    assert!(
        v["error"]
            .as_str()
            .unwrap()
            .starts_with("line 3 is not JSON"),
        "{v}"
    );

    // Invalid UTF-8 inside a JSON string is a bad line too, not a record written raw.
    let r = post(
        http,
        "/ingest",
        &[auth],
        b"{\"id\":1}\n{\"id\":\"\xff\xfe\"}\n",
    )
    .unwrap();
    assert_eq!(r.0, 400, "{}", String::from_utf8_lossy(&r.2));
    let v: serde_json::Value = serde_json::from_slice(&r.2).unwrap();
    let message = v["error"].as_str().unwrap();
    assert!(
        message.starts_with("line 2 is not JSON (invalid UTF-8"),
        "{message}"
    );

    // 413 by Content-Length, before the body is read.
    let big = vec![b'x'; 4096];
    let r = post(http, "/ingest", &[auth], &big).unwrap();
    assert_eq!(r.0, 413);
    assert!(String::from_utf8_lossy(&r.2).contains("max_body"));

    // 413 while streaming a chunked body that passes max_body.
    let chunk = format!("{:x}\r\n{}\r\n", 600, "y".repeat(600));
    let chunked = format!("{chunk}{chunk}0\r\n\r\n");
    let r = request(
        http,
        &format!("POST /ingest HTTP/1.1\r\nHost: x\r\nConnection: close\r\n{auth}\r\nTransfer-Encoding: chunked\r\n\r\n"),
        chunked.as_bytes(),
    )
    .unwrap();
    assert_eq!(r.0, 413);

    // Only the accepted records were ingested; refusals are counted.
    let s = daemon.wait_for(
        "the sink to store 4 records",
        std::time::Duration::from_secs(10),
        |s| s["sinks"]["out"]["records"] == 4,
    );
    assert_eq!(s["sources"]["api"]["records"], 4);
    assert_eq!(s["sources"]["api"]["refused_requests"], 6);
    assert_eq!(daemon.stop(), Some(0));
}

/// A compressed body is refused with 415 naming its coding, whatever its
/// `Content-Type` (it was read as NDJSON and refused as "not JSON", or stored as a raw
/// record of compressed bytes); nothing of it is stored, and each refusal is counted.
#[test]
fn an_unsupported_content_encoding_gets_415_for_every_content_type() {
    use std::io::Write as _;
    let tmp = tempfile::tempdir().unwrap();
    let (status, http) = (free_addr(), free_addr());
    let path = write_config(tmp.path(), &config(tmp.path(), status, http, ""));
    let daemon = Daemon::start(tmp.path(), &path, status, &[]);

    let mut gzip = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    gzip.write_all(b"{\"a\":1}\n{\"a\":2}\n").unwrap();
    let gzip = gzip.finish().unwrap();
    // Not real Brotli: the body is refused by its header before it is read.
    let br = b"\x1b\x0f\x00\xf8\xa5\x40".to_vec();
    let content_types = [
        None,
        Some("application/x-ndjson"),
        Some("application/octet-stream"),
        Some("text/plain"),
    ];
    let mut refused = 0;
    for (coding, body) in [("gzip", &gzip), ("br", &br)] {
        for content_type in content_types {
            let encoding = format!("Content-Encoding: {coding}");
            let mut headers = vec![encoding.as_str()];
            let content_type = content_type.map(|ct| format!("Content-Type: {ct}"));
            headers.extend(content_type.as_deref());
            let r = post(http, "/ingest", &headers, body).unwrap();
            let answer = String::from_utf8_lossy(&r.2);
            assert_eq!(r.0, 415, "{coding}, {content_type:?}: {answer}");
            let v: serde_json::Value = serde_json::from_slice(&r.2).unwrap();
            let message = v["error"].as_str().unwrap();
            assert!(
                message.contains(&format!("Content-Encoding {coding} is not supported"))
                    && message.contains("identity"),
                "{message}"
            );
            refused += 1;
        }
    }

    // identity is the body as sent.
    let r = post(
        http,
        "/ingest",
        &["Content-Encoding: identity"],
        b"{\"a\":1}\n",
    )
    .unwrap();
    assert_eq!(r.0, 200, "{}", String::from_utf8_lossy(&r.2));
    let s = daemon.wait_for(
        "the sink to store the identity record",
        std::time::Duration::from_secs(10),
        |s| s["sinks"]["out"]["records"] == 1,
    );
    assert_eq!(s["sources"]["api"]["records"], 1);
    assert_eq!(s["sources"]["api"]["refused_requests"], refused);
    assert_eq!(daemon.stop(), Some(0));
}

/// `weir run` makes every check that needs no file before it opens the WAL or creates
/// a directory: a failed check leaves nothing behind.
fn assert_nothing_created(dir: &Path, stderr: &str) {
    for created in ["data", "out"] {
        assert!(
            !dir.join(created).exists(),
            "{created} was created before the check failed: {stderr}"
        );
    }
}

#[test]
fn config_errors_stop_weir_run_naming_the_key() {
    let tmp = tempfile::tempdir().unwrap();
    let (status, http) = (free_addr(), free_addr());

    // A validation error: on_full missing, a typo in a key.
    let bad = config(tmp.path(), status, http, "max_bodyy = \"1 KiB\"")
        .replace("on_full = \"reject\"\n", "");
    let path = write_config(tmp.path(), &bad);
    let (code, stderr) = run_to_exit(&path, &[]);
    assert_eq!(code, Some(1), "{stderr}");
    assert!(stderr.contains("wal.on_full"), "{stderr}");
    assert!(stderr.contains("sources.api.max_bodyy"), "{stderr}");

    // A startup error: the token variable is not set.
    let path = write_config(
        tmp.path(),
        &config(
            tmp.path(),
            status,
            http,
            r#"auth_token_env = "WEIR_TEST_UNSET_TOKEN""#,
        ),
    );
    let (code, stderr) = run_to_exit(&path, &[]);
    assert_eq!(code, Some(1), "{stderr}");
    assert!(stderr.contains("sources.api.auth_token_env"), "{stderr}");
    assert_nothing_created(tmp.path(), &stderr);

    // A startup error: the listen address is taken.
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let path = write_config(
        tmp.path(),
        &config(tmp.path(), status, taken.local_addr().unwrap(), ""),
    );
    let (code, stderr) = run_to_exit(&path, &[]);
    assert_eq!(code, Some(1), "{stderr}");
    assert!(stderr.contains("sources.api.listen"), "{stderr}");
    assert_nothing_created(tmp.path(), &stderr);

    // A startup error: the status address is taken.
    let path = write_config(
        tmp.path(),
        &config(tmp.path(), taken.local_addr().unwrap(), http, ""),
    );
    let (code, stderr) = run_to_exit(&path, &[]);
    assert_eq!(code, Some(1), "{stderr}");
    assert!(stderr.contains("runtime.status_addr"), "{stderr}");
    assert_nothing_created(tmp.path(), &stderr);
}

#[test]
fn requests_beyond_max_concurrent_requests_get_503_at_once() {
    use std::io::{Read, Write};

    let tmp = tempfile::tempdir().unwrap();
    let (status, http) = (free_addr(), free_addr());
    let path = write_config(
        tmp.path(),
        &config(tmp.path(), status, http, "max_concurrent_requests = 1"),
    );
    let daemon = Daemon::start(tmp.path(), &path, status, &[]);

    // The first request holds the only slot while its body trickles in. (On a loaded
    // machine it may reach the handler late; a request that got no answer after a
    // pause is the one holding the slot.)
    let body = format!("{:<100}", "{\"slow\":true}");
    let mut first = hold_slot(http, &body);
    let started = std::time::Instant::now();
    let r = post(http, "/ingest", &[], b"{\"a\":1}\n").unwrap();
    let took = started.elapsed();
    assert_eq!(r.0, 503, "{}", String::from_utf8_lossy(&r.2));
    assert_eq!(header(&r, "retry-after"), Some("1"));
    assert!(
        took < std::time::Duration::from_secs(1),
        "refused after {took:?}"
    );

    // The first completes normally.
    first.write_all(&body.as_bytes()[10..]).unwrap();
    let mut answer = String::new();
    first.read_to_string(&mut answer).unwrap();
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
    assert!(answer.contains("{\"accepted\":1}"), "{answer}");
    assert_eq!(daemon.stop(), Some(0));
}

/// Opens a request that sends its headers and the first 10 bytes of `body`, and
/// returns it once the server is holding it (no answer after a pause).
fn hold_slot(http: std::net::SocketAddr, body: &str) -> std::net::TcpStream {
    use std::io::{Read, Write};

    for _ in 0..50 {
        let mut stream = std::net::TcpStream::connect(http).unwrap();
        let head = format!(
            "POST /ingest HTTP/1.1\r\nHost: x\r\nConnection: close\r\nContent-Length: {}\r\n\r\n",
            body.len()
        );
        stream.write_all(head.as_bytes()).unwrap();
        stream.write_all(&body.as_bytes()[..10]).unwrap();
        stream
            .set_read_timeout(Some(std::time::Duration::from_millis(300)))
            .unwrap();
        let mut byte = [0u8; 1];
        // Any answer (or a close) means this request was refused: try again.
        if stream.read(&mut byte).is_ok_and(|n| n <= byte.len()) {
            continue;
        }
        stream
            .set_read_timeout(Some(std::time::Duration::from_secs(20)))
            .unwrap();
        return stream;
    }
    panic!("no request could hold the slot");
}
