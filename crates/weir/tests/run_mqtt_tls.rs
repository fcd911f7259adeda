//! `weir run` end to end with `mqtts://`: a throwaway CA and server certificate made with
//! the `openssl` CLI, a Mosquitto of the test's own with a TLS listener on a free
//! loopback port, and `mosquitto_pub --cafile` as the publisher.

mod run_support;

use std::net::SocketAddr;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use run_support::tls::{make_ca, make_server_cert};
use run_support::{Daemon, free_addr, ndjson_lines, run_to_exit, write_config};

/// The broker binary: `$WEIR_MOSQUITTO` (set by scripts/test.sh), else what
/// scripts/install-mosquitto.sh prints, else `mosquitto` on the PATH.
fn mosquitto_bin() -> PathBuf {
    if let Some(bin) = std::env::var_os("WEIR_MOSQUITTO").filter(|b| !b.is_empty()) {
        return PathBuf::from(bin);
    }
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scripts/install-mosquitto.sh");
    if let Ok(out) = Command::new(&script).stderr(Stdio::inherit()).output() {
        let printed = String::from_utf8_lossy(&out.stdout).trim().to_owned();
        if out.status.success() && !printed.is_empty() {
            return PathBuf::from(printed);
        }
    }
    PathBuf::from("mosquitto")
}

/// A Mosquitto with one TLS listener on a free loopback port; killed on drop.
struct TlsBroker {
    child: Child,
    addr: SocketAddr,
    log_path: PathBuf,
    ca: PathBuf,
}

impl TlsBroker {
    /// Starts the broker with certificates from `dir` (`ca.crt`, `server.crt`,
    /// `server.key`); waits until it listens.
    fn start(dir: &Path) -> TlsBroker {
        let mut last_error = String::new();
        // The free port may be taken between free_addr() and the broker's bind.
        for attempt in 0..5 {
            match Self::try_start(dir, attempt) {
                Ok(broker) => return broker,
                Err(e) => last_error = e,
            }
        }
        panic!("mosquitto did not start: {last_error}");
    }

    fn try_start(dir: &Path, attempt: u32) -> Result<TlsBroker, String> {
        let addr = free_addr();
        let conf = format!(
            "listener {port} 127.0.0.1\n\
             cafile {ca}\n\
             certfile {crt}\n\
             keyfile {key}\n\
             allow_anonymous true\n\
             persistence false\n\
             log_dest stderr\n\
             log_type error\nlog_type warning\nlog_type notice\nlog_type information\n\
             connection_messages true\n",
            port = addr.port(),
            ca = dir.join("ca.crt").display(),
            crt = dir.join("server.crt").display(),
            key = dir.join("server.key").display(),
        );
        let conf_path = dir.join(format!("mosquitto-{attempt}.conf"));
        std::fs::write(&conf_path, conf).expect("write mosquitto.conf");
        // The log goes to a file this process opens: run as root, the broker drops to
        // the `mosquitto` user, which could not create one in our temp dir.
        let log_path = dir.join(format!("mosquitto-{attempt}.log"));
        let log = std::fs::File::create(&log_path).expect("mosquitto log");
        let bin = mosquitto_bin();
        let child = Command::new(&bin)
            .arg("-c")
            .arg(&conf_path)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .map_err(|e| format!("spawn {}: {e}", bin.display()))?;
        let mut broker = TlsBroker {
            child,
            addr,
            log_path,
            ca: dir.join("ca.crt"),
        };
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            if let Some(status) = broker.child.try_wait().expect("try_wait") {
                return Err(format!("mosquitto exited ({status}):\n{}", broker.log()));
            }
            if std::net::TcpStream::connect_timeout(&addr, Duration::from_millis(200)).is_ok() {
                return Ok(broker);
            }
            if Instant::now() > deadline {
                return Err(format!("mosquitto never listened:\n{}", broker.log()));
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    fn log(&self) -> String {
        std::fs::read_to_string(&self.log_path).unwrap_or_default()
    }

    /// `mosquitto_pub --cafile CA -h 127.0.0.1 -p PORT -q 1 -t TOPIC -m MESSAGE`.
    fn publish(&self, topic: &str, message: &str) {
        let out = Command::new("mosquitto_pub")
            .arg("--cafile")
            .arg(&self.ca)
            .args(["-h", "127.0.0.1", "-p", &self.addr.port().to_string()])
            .args(["-q", "1", "-t", topic, "-m", message])
            .output()
            .expect("run mosquitto_pub (apt-get install mosquitto-clients)");
        assert!(
            out.status.success(),
            "mosquitto_pub failed ({}): {}\nbroker log:\n{}",
            out.status,
            String::from_utf8_lossy(&out.stderr),
            self.log()
        );
    }
}

impl Drop for TlsBroker {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A CA, a server certificate it signed for 127.0.0.1, and a broker using them; the
/// certificates live in `dir/certs`.
fn tls_setup(dir: &Path) -> TlsBroker {
    let certs = dir.join("certs");
    std::fs::create_dir_all(&certs).unwrap();
    make_ca(&certs, "ca");
    make_server_cert(&certs, "ca");
    // Run as root, the broker drops to the `mosquitto` user before it loads the key:
    // let that user through the temp dir (0700) and read the throwaway files.
    for (path, mode) in [(dir, 0o755), (&certs, 0o755)] {
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).unwrap();
    }
    for file in ["ca.crt", "server.crt", "server.key"] {
        std::fs::set_permissions(certs.join(file), std::fs::Permissions::from_mode(0o644)).unwrap();
    }
    TlsBroker::start(&certs)
}

fn config(dir: &Path, status: SocketAddr, sources: &str, inputs: &str) -> String {
    format!(
        r#"
[runtime]
data_dir = "{data}"
status_addr = "{status}"

[wal]
max_disk = "16 MiB"
segment_bytes = "1 MiB"
on_full = "block"

{sources}

[sinks.out]
type = "file"
inputs = [{inputs}]
path = "{out}"
"#,
        data = dir.join("data").display(),
        out = dir.join("out").display(),
    )
}

fn mqtt_source(
    name: &str,
    url: &str,
    ca_file: Option<&Path>,
    protocol: &str,
    topic: &str,
) -> String {
    let ca = ca_file.map_or(String::new(), |p| {
        format!("ca_file = \"{}\"\n", p.display())
    });
    format!(
        r#"
[sources.{name}]
type = "mqtt"
url = "{url}"
{ca}protocol = "{protocol}"
keepalive = "5s"
clean_session = true
topics = [{{ filter = "{topic}", qos = 1 }}]
"#
    )
}

fn mqtt_status<'a>(status: &'a serde_json::Value, source: &str) -> &'a serde_json::Value {
    &status["sources"][source]["mqtt"]
}

/// Records in the sink whose key is `topic`.
fn payloads_of(dir: &Path, topic: &str) -> Vec<String> {
    ndjson_lines(&dir.join("out"))
        .into_iter()
        .filter(|r| r["key"] == topic)
        .map(|r| r["payload"].as_str().unwrap_or_default().to_owned())
        .collect()
}

#[test]
fn mqtts_with_a_ca_file_delivers_over_mqtt_3_and_5() {
    let tmp = tempfile::tempdir().unwrap();
    let broker = tls_setup(tmp.path());
    let url = format!("mqtts://{}", broker.addr);
    let status = free_addr();
    let sources = [
        mqtt_source("v3", &url, Some(&broker.ca), "3.1.1", "tls/v3"),
        mqtt_source("v5", &url, Some(&broker.ca), "5", "tls/v5"),
    ]
    .concat();
    let path = write_config(
        tmp.path(),
        &config(tmp.path(), status, &sources, r#""v3", "v5""#),
    );
    let daemon = Daemon::start(tmp.path(), &path, status, &[]);
    daemon.wait_for("both TLS connections", Duration::from_secs(15), |s| {
        mqtt_status(s, "v3")["connected"] == true && mqtt_status(s, "v5")["connected"] == true
    });

    for i in 0..5 {
        broker.publish("tls/v3", &format!("three-{i}"));
        broker.publish("tls/v5", &format!("five-{i}"));
    }
    let deadline = Instant::now() + Duration::from_secs(15);
    let expected = |prefix: &str| (0..5).map(|i| format!("{prefix}-{i}")).collect::<Vec<_>>();
    loop {
        let (v3, v5) = (
            payloads_of(tmp.path(), "tls/v3"),
            payloads_of(tmp.path(), "tls/v5"),
        );
        if v3 == expected("three") && v5 == expected("five") {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "records did not arrive: v3 {v3:?}, v5 {v5:?}; status {:#}\n{}\nbroker log:\n{}",
            daemon.status(),
            daemon.stderr(),
            broker.log()
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    let s = daemon.status();
    for source in ["v3", "v5"] {
        assert!(
            broker.log().contains(&format!(" as weir-{source} ")),
            "{}",
            broker.log()
        );
        assert_eq!(mqtt_status(&s, source)["acked"], 5, "{s:#}");
        assert_eq!(
            mqtt_status(&s, source)["last_error"],
            serde_json::Value::Null,
            "{s:#}"
        );
    }
    assert_eq!(daemon.stop(), Some(0));
}

#[test]
fn mqtts_refuses_a_broker_the_ca_did_not_sign_or_a_host_the_certificate_does_not_name() {
    let tmp = tempfile::tempdir().unwrap();
    let broker = tls_setup(tmp.path());
    // A second CA, unrelated to the broker's certificate.
    let other_dir = tmp.path().join("other");
    std::fs::create_dir_all(&other_dir).unwrap();
    let other_ca = make_ca(&other_dir, "other");
    let status = free_addr();
    // The right CA, but the URL names "localhost" and the certificate only 127.0.0.1.
    let sources = [
        mqtt_source(
            "wrongca",
            &format!("mqtts://{}", broker.addr),
            Some(&other_ca),
            "3.1.1",
            "tls/a",
        ),
        mqtt_source(
            "wronghost",
            &format!("mqtts://localhost:{}", broker.addr.port()),
            Some(&broker.ca),
            "5",
            "tls/b",
        ),
    ]
    .concat();
    let path = write_config(
        tmp.path(),
        &config(tmp.path(), status, &sources, r#""wrongca", "wronghost""#),
    );
    let daemon = Daemon::start(tmp.path(), &path, status, &[]);
    let s = daemon.wait_for("both TLS errors", Duration::from_secs(15), |s| {
        ["wrongca", "wronghost"]
            .iter()
            .all(|n| mqtt_status(s, n)["last_error"].is_string())
    });
    let error = |n: &str| {
        mqtt_status(&s, n)["last_error"]
            .as_str()
            .unwrap()
            .to_owned()
    };
    assert!(
        error("wrongca").contains("invalid peer certificate: UnknownIssuer"),
        "{}",
        error("wrongca")
    );
    assert!(
        error("wronghost").contains("not valid for name \"localhost\""),
        "{}",
        error("wronghost")
    );

    // Messages published meanwhile (with the right CA) never reach weir.
    broker.publish("tls/a", "never");
    broker.publish("tls/b", "never");
    std::thread::sleep(Duration::from_millis(500));
    let s = daemon.status();
    for n in ["wrongca", "wronghost"] {
        assert_eq!(mqtt_status(&s, n)["connected"], false, "{s:#}");
        assert_eq!(mqtt_status(&s, n)["received"], 0, "{s:#}");
    }
    assert!(ndjson_lines(&tmp.path().join("out")).is_empty());
    // The broker saw TLS handshakes fail, never a client connect.
    let log = broker.log();
    for n in ["wrongca", "wronghost"] {
        assert!(!log.contains(&format!(" as weir-{n} ")), "{log}");
    }
    assert_eq!(daemon.stop(), Some(0));
}

#[test]
fn ca_file_and_host_problems_stop_weir_run_at_startup() {
    let tmp = tempfile::tempdir().unwrap();
    let status = free_addr();
    let run = |ca: &Path| {
        let sources = mqtt_source("secure", "mqtts://127.0.0.1:1", Some(ca), "3.1.1", "t");
        let path = write_config(
            tmp.path(),
            &config(tmp.path(), status, &sources, r#""secure""#),
        );
        run_to_exit(&path, &[])
    };

    let missing = tmp.path().join("no-such-ca.crt");
    let (code, stderr) = run(&missing);
    assert_ne!(code, Some(0), "{stderr}");
    assert!(
        stderr.contains(&format!(
            "sources.secure.ca_file: cannot read {}",
            missing.display()
        )),
        "{stderr}"
    );

    let not_pem = tmp.path().join("not-pem.crt");
    std::fs::write(&not_pem, b"\x30\x82\x01\x0a garbage, not PEM\n").unwrap();
    let (code, stderr) = run(&not_pem);
    assert_ne!(code, Some(0), "{stderr}");
    assert!(
        stderr.contains("sources.secure.ca_file:") && stderr.contains("holds no PEM certificate"),
        "{stderr}"
    );

    // No ca_file and no system CA certificates (rustls-native-certs reads only these
    // two when they are set).
    let sources = mqtt_source("secure", "mqtts://127.0.0.1:1", None, "3.1.1", "t");
    let path = write_config(
        tmp.path(),
        &config(tmp.path(), status, &sources, r#""secure""#),
    );
    let nowhere = tmp.path().join("no-system-certs");
    let nowhere = nowhere.to_str().unwrap();
    let (code, stderr) = run_to_exit(
        &path,
        &[("SSL_CERT_FILE", nowhere), ("SSL_CERT_DIR", nowhere)],
    );
    assert_ne!(code, Some(0), "{stderr}");
    assert!(
        stderr.contains(
            "sources.secure.ca_file: not set, and no system CA certificate could be loaded"
        ),
        "{stderr}"
    );

    // A host that no certificate can name (an IPv6 literal keeps its brackets).
    let sources = mqtt_source("secure", "mqtts://[::1]:8883", None, "3.1.1", "t");
    let path = write_config(
        tmp.path(),
        &config(tmp.path(), status, &sources, r#""secure""#),
    );
    let (code, stderr) = run_to_exit(&path, &[]);
    assert_ne!(code, Some(0), "{stderr}");
    assert!(
        stderr
            .contains("sources.secure.url: \"[::1]\" cannot be checked against a TLS certificate"),
        "{stderr}"
    );
}
