//! A tansu broker of the test's own (Kafka protocol, in-memory storage) on a free
//! loopback port, never 9092; topics made with its CLI; records produced with
//! rdkafka's producer.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use rdkafka::ClientConfig;
use rdkafka::producer::{BaseProducer, BaseRecord, Producer};

use super::free_addr;

/// `$WEIR_TANSU` (set by scripts/test.sh from scripts/install-tansu.sh), or `None`:
/// the tests then say they are skipped.
pub fn tansu_bin() -> Option<PathBuf> {
    std::env::var_os("WEIR_TANSU")
        .filter(|b| !b.is_empty())
        .map(PathBuf::from)
}

/// One running `tansu broker`; killed on drop.
pub struct Tansu {
    child: Child,
    bin: PathBuf,
    /// Its listener (127.0.0.1, a free port).
    pub addr: SocketAddr,
    log_path: PathBuf,
    _dir: tempfile::TempDir,
}

impl Tansu {
    /// Starts a broker from `bin` with in-memory storage and waits until it listens.
    pub fn start(bin: PathBuf) -> Tansu {
        let dir = tempfile::tempdir().expect("temp dir");
        let addr = free_addr();
        let url = format!("tcp://{addr}");
        let log_path = dir.path().join("tansu.log");
        let log = std::fs::File::create(&log_path).expect("log file");
        let child = Command::new(&bin)
            .args([
                "broker",
                "--listener-url",
                &url,
                "--advertised-listener-url",
                &url,
            ])
            .args(["--storage-engine", "memory://tansu/"])
            .current_dir(dir.path())
            .stdin(Stdio::null())
            .stdout(log.try_clone().expect("log"))
            .stderr(log)
            .spawn()
            .expect("start tansu");
        let t = Tansu {
            child,
            bin,
            addr,
            log_path,
            _dir: dir,
        };
        let deadline = Instant::now() + Duration::from_secs(20);
        while std::net::TcpStream::connect(addr).is_err() {
            assert!(
                Instant::now() < deadline,
                "tansu did not listen:\n{}",
                t.log()
            );
            std::thread::sleep(Duration::from_millis(20));
        }
        t
    }

    /// The broker's output so far.
    pub fn log(&self) -> String {
        std::fs::read_to_string(&self.log_path).unwrap_or_default()
    }

    /// `host:port` for `brokers`.
    pub fn brokers(&self) -> String {
        self.addr.to_string()
    }

    /// `tansu topic create NAME --partitions N`.
    pub fn create_topic(&self, name: &str, partitions: u32) {
        let out = Command::new(&self.bin)
            .args([
                "topic",
                "create",
                name,
                "--partitions",
                &partitions.to_string(),
            ])
            .args(["--broker", &format!("tcp://{}", self.addr)])
            .output()
            .expect("tansu topic create");
        assert!(
            out.status.success(),
            "tansu topic create {name} failed: {}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
    }

    /// Produces `per_partition` records to each of `partitions` partitions of `topic`:
    /// key `k<p>`, payload `<p>:<n>` padded with spaces to `pad` bytes, header `h = n`.
    pub fn produce(&self, topic: &str, partitions: i32, per_partition: u64, pad: usize) {
        let producer: BaseProducer = ClientConfig::new()
            .set("bootstrap.servers", self.brokers())
            .set("linger.ms", "5")
            .set("acks", "all")
            .set("queue.buffering.max.messages", "200000")
            .create()
            .expect("producer");
        for n in 0..per_partition {
            for p in 0..partitions {
                let key = format!("k{p}");
                let mut payload = format!("{p}:{n}");
                while payload.len() < pad {
                    payload.push(' ');
                }
                let headers =
                    rdkafka::message::OwnedHeaders::new().insert(rdkafka::message::Header {
                        key: "h",
                        value: Some(n.to_string().as_bytes()),
                    });
                let mut record = BaseRecord::to(topic)
                    .partition(p)
                    .key(key.as_str())
                    .payload(payload.as_str())
                    .headers(headers);
                loop {
                    match producer.send(record) {
                        Ok(()) => break,
                        Err((_, r)) => {
                            record = r;
                            producer.poll(Duration::from_millis(10));
                        }
                    }
                }
                producer.poll(Duration::ZERO);
            }
        }
        producer
            .flush(Duration::from_secs(60))
            .unwrap_or_else(|e| panic!("flush: {e}\n{}", self.log()));
    }
}

impl Drop for Tansu {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
