//! A Mosquitto broker of the test's own, on a free loopback port with a config the test
//! writes (never the system broker on 1883), and a small MQTT 3.1.1 publisher that
//! waits for the broker's acknowledgements.

use std::io::{BufReader, BufWriter, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use super::free_addr;

/// The broker's settings that the tests vary.
#[derive(Debug, Clone)]
pub struct MosquittoOpts {
    /// `max_inflight_messages`: QoS 1/2 messages in flight to one client (MQTT 3.1.1;
    /// an MQTT 5 client's receive maximum overrides it when smaller).
    pub max_inflight_messages: u32,
    /// `max_packet_size` (0: the broker's default, no limit).
    pub max_packet_size: u32,
    /// `log_type all`: every packet in the log (for debugging a test).
    pub log_all: bool,
    /// The broker binary (default: [`mosquitto_bin`]).
    pub bin: Option<PathBuf>,
}

impl Default for MosquittoOpts {
    fn default() -> Self {
        MosquittoOpts {
            max_inflight_messages: 20,
            max_packet_size: 0,
            log_all: false,
            bin: None,
        }
    }
}

/// A running `mosquitto -c CONF`; killed on drop.
pub struct Mosquitto {
    child: Child,
    opts: MosquittoOpts,
    /// Where it listens (127.0.0.1, a free port).
    pub addr: SocketAddr,
    /// Its log file.
    pub log_path: PathBuf,
    _dir: tempfile::TempDir,
}

/// The broker binary: `$WEIR_MOSQUITTO` (set by scripts/test.sh), else what
/// scripts/install-mosquitto.sh prints (a Mosquitto >= 2.0.13, which holds its inflight
/// window; Debian 12's 2.0.11 does not), else `mosquitto` on the PATH. Resolved once.
pub fn mosquitto_bin() -> PathBuf {
    static BIN: OnceLock<PathBuf> = OnceLock::new();
    BIN.get_or_init(|| {
        if let Some(bin) = std::env::var_os("WEIR_MOSQUITTO").filter(|b| !b.is_empty()) {
            return PathBuf::from(bin);
        }
        let script =
            Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scripts/install-mosquitto.sh");
        if let Ok(out) = Command::new(&script).stderr(Stdio::inherit()).output() {
            let printed = String::from_utf8_lossy(&out.stdout).trim().to_owned();
            if out.status.success() && !printed.is_empty() {
                return PathBuf::from(printed);
            }
        }
        PathBuf::from("mosquitto")
    })
    .clone()
}

/// The distribution's broker (Debian 12: 2.0.11, which does not hold its inflight
/// window once acks flow): `$WEIR_MOSQUITTO_DISTRO` (set by scripts/test.sh), else
/// `/usr/sbin/mosquitto`. Panics, saying how to get it, when neither exists.
pub fn distro_mosquitto_bin() -> PathBuf {
    let bin = std::env::var_os("WEIR_MOSQUITTO_DISTRO")
        .filter(|b| !b.is_empty())
        .map_or_else(|| PathBuf::from("/usr/sbin/mosquitto"), PathBuf::from);
    assert!(
        bin.is_file(),
        "the distribution's Mosquitto is needed at {} (apt-get install mosquitto, or set \
         WEIR_MOSQUITTO_DISTRO; scripts/test.sh does both)",
        bin.display()
    );
    bin
}

/// A Mosquitto that holds its window (>= 2.0.13): `$WEIR_MOSQUITTO`, else what
/// scripts/install-mosquitto.sh prints. Unlike [`mosquitto_bin`], never falls back to
/// the PATH (which may hold the distribution's); panics, saying how to get one.
pub fn fixed_mosquitto_bin() -> PathBuf {
    let bin = mosquitto_bin();
    assert!(
        bin.is_file(),
        "a Mosquitto >= 2.0.13 is needed: set WEIR_MOSQUITTO or run \
         scripts/install-mosquitto.sh (scripts/test.sh does); found only {}",
        bin.display()
    );
    bin
}

/// `mosquitto -h`'s version, e.g. `2.0.11`.
pub fn mosquitto_version(bin: &Path) -> String {
    let out = Command::new(bin)
        .arg("-h")
        .output()
        .unwrap_or_else(|e| panic!("run {} -h: {e}", bin.display()));
    let text = String::from_utf8_lossy(&out.stdout);
    text.split_whitespace()
        .skip_while(|w| *w != "version")
        .nth(1)
        .unwrap_or_else(|| panic!("no version in {} -h: {text}", bin.display()))
        .to_owned()
}

impl Mosquitto {
    /// Writes a config and starts the broker on a free loopback port; waits until it
    /// accepts connections.
    pub fn start(opts: MosquittoOpts) -> Mosquitto {
        let mut last_error = String::new();
        // The free port may be taken between free_addr() and the broker's bind.
        for _ in 0..5 {
            match Self::try_start(&opts) {
                Ok(broker) => return broker,
                Err(e) => last_error = e,
            }
        }
        panic!("mosquitto did not start: {last_error}");
    }

    fn try_start(opts: &MosquittoOpts) -> Result<Mosquitto, String> {
        let dir = tempfile::tempdir().expect("temp dir");
        let addr = free_addr();
        let log_path = dir.path().join("mosquitto.log");
        // max_queued_messages 0 = no limit: the default (1000) silently drops QoS 1
        // messages queued behind a full inflight window, which zero-loss tests must not
        // see. persistence false: sessions live in the broker's memory, which is enough
        // for weir's restarts (the broker keeps running).
        let mut conf = format!(
            "listener {port} 127.0.0.1\n\
             allow_anonymous true\n\
             persistence false\n\
             max_inflight_messages {inflight}\n\
             max_queued_messages 0\n\
             max_queued_bytes 0\n\
             log_dest stderr\n\
             log_type error\nlog_type warning\nlog_type notice\nlog_type information\n\
             connection_messages true\n",
            port = addr.port(),
            inflight = opts.max_inflight_messages,
        );
        if opts.log_all {
            conf.push_str("log_type all\n");
        }
        if opts.max_packet_size > 0 {
            conf.push_str(&format!("max_packet_size {}\n", opts.max_packet_size));
        }
        let conf_path = dir.path().join("mosquitto.conf");
        std::fs::write(&conf_path, conf).expect("write mosquitto.conf");
        // The log goes to stderr, into a file this process opens: run as root, the broker
        // drops to the `mosquitto` user, which could not open a file in our temp dir.
        let log = std::fs::File::create(&log_path).expect("mosquitto log file");
        let bin = opts.bin.clone().unwrap_or_else(mosquitto_bin);
        let child = Command::new(&bin)
            .arg("-c")
            .arg(&conf_path)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .map_err(|e| format!("spawn {}: {e}", bin.display()))?;
        let mut broker = Mosquitto {
            child,
            opts: opts.clone(),
            addr,
            log_path,
            _dir: dir,
        };
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            if let Some(status) = broker.child.try_wait().expect("try_wait") {
                return Err(format!("mosquitto exited ({status}):\n{}", broker.log()));
            }
            if TcpStream::connect_timeout(&addr, Duration::from_millis(200)).is_ok() {
                return Ok(broker);
            }
            if Instant::now() > deadline {
                return Err(format!("mosquitto never listened:\n{}", broker.log()));
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// The broker's log so far.
    pub fn log(&self) -> String {
        std::fs::read_to_string(&self.log_path).unwrap_or_default()
    }

    /// `mqtt://127.0.0.1:PORT`.
    pub fn url(&self) -> String {
        format!("mqtt://{}", self.addr)
    }

    /// Runs `mosquitto_pub -h 127.0.0.1 -p PORT ARGS…` to completion; panics on failure.
    pub fn mosquitto_pub(&self, args: &[&str]) {
        let out = Command::new("mosquitto_pub")
            .arg("-h")
            .arg(self.addr.ip().to_string())
            .arg("-p")
            .arg(self.addr.port().to_string())
            .args(args)
            .output()
            .expect("run mosquitto_pub (apt-get install mosquitto-clients)");
        assert!(
            out.status.success(),
            "mosquitto_pub {args:?} failed ({}): {}",
            out.status,
            String::from_utf8_lossy(&out.stderr)
        );
    }

    /// A connected [`Publisher`] with a clean session, its QoS 2 window at the broker's
    /// incoming limit.
    pub fn publisher(&self, client_id: &str) -> Publisher {
        let mut publisher =
            Publisher::connect(self.addr, client_id).expect("connect the publisher");
        publisher.qos2_window = self.opts.max_inflight_messages as usize;
        publisher
    }
}

impl Drop for Mosquitto {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A minimal MQTT 3.1.1 publisher over a blocking socket: QoS 0, 1 and 2, up to
/// [`Publisher::WINDOW`] QoS 1 messages in flight (QoS 2: `qos2_window`, as the broker
/// holds those until PUBREL and disconnects a client above its `max_inflight_messages`), and [`Publisher::publish_all`] returns
/// only once the broker acknowledged every message (for QoS 0: once a PINGRESP sent
/// after them came back, so the broker has read them all).
pub struct Publisher {
    reader: BufReader<TcpStream>,
    writer: BufWriter<TcpStream>,
    next_id: u16,
    inflight: usize,
    /// QoS 2 messages in flight at once. Default 20 (mosquitto's default window).
    pub qos2_window: usize,
    /// Messages the broker acknowledged (PUBACK, or PUBCOMP for QoS 2).
    pub acked: u64,
}

impl Publisher {
    /// Messages in flight at once.
    pub const WINDOW: usize = 256;

    /// Connects with a clean session and waits for the CONNACK.
    pub fn connect(addr: SocketAddr, client_id: &str) -> std::io::Result<Publisher> {
        let stream = TcpStream::connect_timeout(&addr, Duration::from_secs(5))?;
        stream.set_nodelay(true)?;
        stream.set_read_timeout(Some(Duration::from_secs(30)))?;
        let mut publisher = Publisher {
            reader: BufReader::with_capacity(64 * 1024, stream.try_clone()?),
            writer: BufWriter::with_capacity(64 * 1024, stream),
            next_id: 0,
            inflight: 0,
            qos2_window: 20,
            acked: 0,
        };
        let mut body = Vec::new();
        put_str(&mut body, "MQTT");
        body.push(4); // protocol level: 3.1.1
        body.push(0x02); // clean session
        body.extend_from_slice(&60u16.to_be_bytes()); // keepalive
        put_str(&mut body, client_id);
        publisher.send(0x10, &body)?;
        publisher.writer.flush()?;
        let (kind, body) = publisher.read_packet()?;
        if kind >> 4 != 2 || body.len() != 2 || body[1] != 0 {
            return Err(std::io::Error::other(format!(
                "expected CONNACK accepted, got type {kind:#x} {body:?}"
            )));
        }
        Ok(publisher)
    }

    /// Publishes every `(topic, payload)` at `qos` and waits until the broker has
    /// acknowledged all of them; returns how many were published.
    pub fn publish_all(
        &mut self,
        qos: u8,
        messages: impl IntoIterator<Item = (String, Vec<u8>)>,
    ) -> std::io::Result<u64> {
        assert!(qos <= 2, "QoS {qos}");
        let window = if qos == 2 {
            self.qos2_window
        } else {
            Self::WINDOW
        };
        let mut count = 0;
        for (topic, payload) in messages {
            while self.inflight >= window {
                self.writer.flush()?;
                self.read_ack()?;
            }
            let mut body = Vec::with_capacity(topic.len() + payload.len() + 4);
            put_str(&mut body, &topic);
            if qos > 0 {
                self.next_id = self.next_id.checked_add(1).unwrap_or(1);
                body.extend_from_slice(&self.next_id.to_be_bytes());
                self.inflight += 1;
            }
            body.extend_from_slice(&payload);
            self.send(0x30 | (qos << 1), &body)?;
            count += 1;
        }
        self.writer.flush()?;
        while self.inflight > 0 {
            self.read_ack()?;
        }
        if qos == 0 {
            self.send(0xC0, &[])?; // PINGREQ
            self.writer.flush()?;
            let (kind, _) = self.read_packet()?;
            if kind != 0xD0 {
                return Err(std::io::Error::other(format!(
                    "expected PINGRESP, got {kind:#x}"
                )));
            }
            self.acked += count;
        }
        Ok(count)
    }

    /// Sends DISCONNECT and closes.
    pub fn disconnect(mut self) {
        let _ = self.send(0xE0, &[]);
        let _ = self.writer.flush();
    }

    fn read_ack(&mut self) -> std::io::Result<()> {
        let (kind, body) = self.read_packet()?;
        match kind >> 4 {
            4 | 7 => {
                // PUBACK (QoS 1) or PUBCOMP (QoS 2): done.
                self.inflight -= 1;
                self.acked += 1;
            }
            5 => {
                // PUBREC: release it.
                self.send(0x62, &body[..2])?;
                self.writer.flush()?;
            }
            other => {
                return Err(std::io::Error::other(format!(
                    "unexpected packet type {other} while publishing"
                )));
            }
        }
        Ok(())
    }

    fn send(&mut self, header: u8, body: &[u8]) -> std::io::Result<()> {
        self.writer.write_all(&[header])?;
        let mut len = body.len();
        loop {
            let mut byte = (len % 128) as u8;
            len /= 128;
            if len > 0 {
                byte |= 0x80;
            }
            self.writer.write_all(&[byte])?;
            if len == 0 {
                break;
            }
        }
        self.writer.write_all(body)
    }

    fn read_packet(&mut self) -> std::io::Result<(u8, Vec<u8>)> {
        let mut byte = [0u8; 1];
        self.reader.read_exact(&mut byte)?;
        let kind = byte[0];
        let (mut len, mut shift) = (0usize, 0);
        loop {
            self.reader.read_exact(&mut byte)?;
            len |= usize::from(byte[0] & 0x7f) << shift;
            if byte[0] & 0x80 == 0 {
                break;
            }
            shift += 7;
        }
        let mut body = vec![0; len];
        self.reader.read_exact(&mut body)?;
        Ok((kind, body))
    }
}

fn put_str(out: &mut Vec<u8>, s: &str) {
    let len = u16::try_from(s.len()).expect("MQTT strings are at most 65535 bytes");
    out.extend_from_slice(&len.to_be_bytes());
    out.extend_from_slice(s.as_bytes());
}

/// `per_topic` messages on each of `topics` topics `t/0` … `t/{topics-1}`, interleaved
/// round-robin; each payload is JSON `{"topic":"t/I","seq":N,"pad":"…"}` with `pad`
/// of `pad` bytes, `seq` counting from 0 per topic.
pub fn sequenced(
    topics: usize,
    per_topic: u64,
    pad: usize,
) -> impl Iterator<Item = (String, Vec<u8>)> {
    let padding = "p".repeat(pad);
    (0..per_topic).flat_map(move |seq| {
        let padding = padding.clone();
        (0..topics).map(move |t| {
            let topic = format!("t/{t}");
            let payload = format!(r#"{{"topic":"{topic}","seq":{seq},"pad":"{padding}"}}"#);
            (topic, payload.into_bytes())
        })
    })
}
