//! A tansu broker of the test's own (Kafka protocol, in-memory storage) on a free
//! loopback port, never 9092; topics made with its CLI; records produced with
//! rdkafka's producer.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use std::sync::atomic::{AtomicU64, Ordering};

use rdkafka::consumer::{BaseConsumer, CommitMode, Consumer};
use rdkafka::producer::{BaseProducer, BaseRecord, DeliveryResult, Producer, ProducerContext};
use rdkafka::{ClientConfig, ClientContext, Offset, TopicPartitionList};

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
    /// Commits `offset` for `topic`/`partition` in `group` (as a consumer that assigned
    /// itself the partition, outside any group generation).
    pub fn commit(&self, group: &str, topic: &str, partition: i32, offset: i64) {
        let consumer: BaseConsumer = ClientConfig::new()
            .set("bootstrap.servers", self.brokers())
            .set("group.id", group)
            .set("enable.auto.commit", "false")
            .create()
            .expect("consumer");
        let mut tpl = TopicPartitionList::new();
        tpl.add_partition_offset(topic, partition, Offset::Offset(offset))
            .expect("offset");
        consumer.commit(&tpl, CommitMode::Sync).unwrap_or_else(|e| {
            panic!(
                "commit {group} {topic}/{partition} at {offset}: {e}\n{}",
                self.log()
            )
        });
    }

    /// Every record must be acknowledged by the broker: a failed delivery panics.
    pub fn produce(&self, topic: &str, partitions: i32, per_partition: u64, pad: usize) {
        self.produce_batched(topic, partitions, per_partition, pad, true);
    }

    /// [`produce`](Self::produce), one record per record batch. tansu 0.6.0 answers a
    /// fetch from an offset inside a batch with the next batch: the rest of the batch
    /// is never returned (seen: a fetch at 1 returns 978 first). A consumer that
    /// restarts at a committed offset (a restart, a rebalance) then skips records
    /// (weir counts the gap). Kafka returns the batch holding the offset; tests of
    /// restarts and rebalances produce with this so that they test weir, not tansu.
    pub fn produce_unbatched(&self, topic: &str, partitions: i32, per_partition: u64, pad: usize) {
        self.produce_batched(topic, partitions, per_partition, pad, false);
    }

    fn produce_batched(
        &self,
        topic: &str,
        partitions: i32,
        per_partition: u64,
        pad: usize,
        batched: bool,
    ) {
        let started = Instant::now();
        let producer: BaseProducer<Deliveries> = ClientConfig::new()
            .set("bootstrap.servers", self.brokers())
            .set("linger.ms", if batched { "5" } else { "0" })
            .set("batch.num.messages", if batched { "10000" } else { "1" })
            .set("acks", "all")
            .set("queue.buffering.max.messages", "200000")
            .create_with_context(Deliveries::default())
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
        eprintln!(
            "produced {} records to {topic} in {:.1} s",
            per_partition * partitions as u64,
            started.elapsed().as_secs_f64()
        );
        let d = producer.context();
        let (ok, failed) = (
            d.ok.load(Ordering::Relaxed),
            d.failed.load(Ordering::Relaxed),
        );
        assert!(
            failed == 0 && ok == per_partition * partitions as u64,
            "produce: {ok} delivered, {failed} failed of {}\n{}",
            per_partition * partitions as u64,
            self.log()
        );
    }
}

/// Counts the broker's answers to the records produced.
#[derive(Default)]
pub struct Deliveries {
    ok: AtomicU64,
    failed: AtomicU64,
}

impl ClientContext for Deliveries {}

impl ProducerContext for Deliveries {
    type DeliveryOpaque = ();

    fn delivery(&self, result: &DeliveryResult<'_>, (): ()) {
        match result {
            Ok(_) => self.ok.fetch_add(1, Ordering::Relaxed),
            Err(_) => self.failed.fetch_add(1, Ordering::Relaxed),
        };
    }
}

impl Drop for Tansu {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
