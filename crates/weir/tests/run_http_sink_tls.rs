//! `weir run` end to end with an HTTP sink sending to `https://`: a throwaway CA and
//! server certificate made with the `openssl` CLI, and the test endpoint serving TLS
//! with HTTP/2 and HTTP/1.1 offered by ALPN.

mod run_support;

use std::path::{Path, PathBuf};
use std::time::Duration;

use axum::http::Version;
use run_support::http_sink::{config, generator, http, lag, quarantined, wait_failed};
use run_support::http_target::Target;
use run_support::tls::{make_ca, make_server_cert};
use run_support::{Daemon, free_addr, run_to_exit, write_config};

/// A CA `ca` and a server certificate for 127.0.0.1 signed by `signer` (`ca` or a
/// second CA `other`), under `dir/certs`: (the CA file, the server's cert and key).
fn certificates(dir: &Path, signer: &str) -> (PathBuf, PathBuf, PathBuf) {
    let certs = dir.join("certs");
    std::fs::create_dir_all(&certs).unwrap();
    let ca = make_ca(&certs, "ca");
    if signer != "ca" {
        make_ca(&certs, signer);
    }
    let (crt, key) = make_server_cert(&certs, signer);
    (ca, crt, key)
}

fn sink_keys(ca: &Path) -> String {
    format!(
        "ca_file = \"{}\"\nbatch_records = 100\nmax_concurrency = 4\n",
        ca.display()
    )
}

#[test]
fn https_with_a_ca_file_delivers_every_record_over_http2() {
    let tmp = tempfile::tempdir().unwrap();
    let (ca, crt, key) = certificates(tmp.path(), "ca");
    let target = Target::start_tls(&crt, &key);
    assert!(target.url().starts_with("https://127.0.0.1:"));
    let status = free_addr();
    let path = write_config(
        tmp.path(),
        &config(
            tmp.path(),
            status,
            &target.url(),
            &generator(5_000, Some(3_000)),
            &sink_keys(&ca),
        ),
    );
    let daemon = Daemon::start(tmp.path(), &path, status, &[]);
    daemon.wait_for("every record delivered", Duration::from_secs(30), |s| {
        http(s)["records_delivered"].as_u64().unwrap_or(0) >= 3_000 && lag(s) == 0
    });
    assert_eq!(daemon.stop(), Some(0));
    let seqs = target.shared.distinct();
    assert_eq!(seqs, (0..3_000).collect(), "every record, once or more");
    let events = target.shared.events();
    assert!(!events.is_empty());
    let not_h2: Vec<_> = events
        .iter()
        .filter(|e| e.version != Version::HTTP_2)
        .map(|e| e.version)
        .collect();
    assert!(not_h2.is_empty(), "requests not over HTTP/2: {not_h2:?}");
}

#[test]
fn a_certificate_the_ca_file_did_not_sign_stops_weir_run_at_startup() {
    let tmp = tempfile::tempdir().unwrap();
    let (ca, crt, key) = certificates(tmp.path(), "other");
    let target = Target::start_tls(&crt, &key);
    let path = write_config(
        tmp.path(),
        &config(
            tmp.path(),
            free_addr(),
            &target.url(),
            &generator(1_000, Some(500)),
            &sink_keys(&ca),
        ),
    );
    let (code, stderr) = run_to_exit(&path, &[]);
    assert_eq!(code, Some(1), "{stderr}");
    assert!(
        stderr.contains("sinks.out: startup check failed")
            && stderr.contains("TLS handshake with 127.0.0.1")
            && stderr.contains("not trusted: set ca_file"),
        "{stderr}"
    );
    assert!(target.shared.events().is_empty(), "no request was sent");
    assert!(
        !tmp.path().join("data/wal").exists(),
        "the WAL was not opened"
    );
}

#[test]
fn a_certificate_the_ca_file_did_not_sign_fails_the_sink_and_sends_nothing() {
    let tmp = tempfile::tempdir().unwrap();
    let (ca, crt, key) = certificates(tmp.path(), "other");
    let target = Target::start_tls(&crt, &key);
    let status = free_addr();
    // Without the startup check, the sink starts and shows the refusal.
    let path = write_config(
        tmp.path(),
        &config(
            tmp.path(),
            status,
            &target.url(),
            &generator(1_000, Some(500)),
            &format!("{}healthcheck = false\n", sink_keys(&ca)),
        ),
    );
    let daemon = Daemon::start(tmp.path(), &path, status, &[]);
    let (st, component) = wait_failed(&daemon);
    let reason = component["reason"].as_str().unwrap_or_default();
    assert!(reason.contains("certificate"), "{component:#}");
    assert!(reason.contains("ca_file"), "{component:#}");
    assert!(http(&st)["config_errors"].as_u64().unwrap() >= 1);
    assert!(target.shared.events().is_empty(), "no request got through");
    assert!(quarantined(tmp.path()).is_empty(), "nothing dead-lettered");
    assert_eq!(daemon.stop(), Some(0));
}

#[test]
fn an_unreadable_ca_file_stops_weir_run_at_startup() {
    let tmp = tempfile::tempdir().unwrap();
    let missing = tmp.path().join("no-such-ca.pem");
    let path = write_config(
        tmp.path(),
        &config(
            tmp.path(),
            free_addr(),
            "https://127.0.0.1:9/ingest",
            &generator(1_000, Some(10)),
            &sink_keys(&missing),
        ),
    );
    let (code, stderr) = run_to_exit(&path, &[]);
    assert_ne!(code, Some(0), "{stderr}");
    assert!(stderr.contains("sinks.out"), "{stderr}");
    assert!(stderr.contains("ca_file: cannot read"), "{stderr}");
    assert!(stderr.contains("no-such-ca.pem"), "{stderr}");
}
