//! An S3-protocol server of the test's own (s3s-fs on a free loopback port, with its own
//! root directory), a fault proxy to put in front of it, and a reader of what it holds
//! through pyarrow's S3 filesystem.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use super::free_addr;

/// The access key the tests use (the server's, passed to weir through the standard
/// AWS environment variables).
pub const ACCESS_KEY: &str = "weir-test-access";
/// The secret key the tests use.
pub const SECRET_KEY: &str = "weir-test-secret";
/// The bucket every server has.
pub const BUCKET: &str = "lake";

/// The server binary: `$WEIR_S3S` (set by scripts/test.sh), else what
/// scripts/install-s3s.sh prints (building it once). Resolved once.
pub fn s3s_bin() -> PathBuf {
    static BIN: OnceLock<PathBuf> = OnceLock::new();
    BIN.get_or_init(|| {
        if let Some(bin) = std::env::var_os("WEIR_S3S").filter(|b| !b.is_empty()) {
            return PathBuf::from(bin);
        }
        let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scripts/install-s3s.sh");
        let out = Command::new(&script)
            .stderr(Stdio::inherit())
            .output()
            .expect("run scripts/install-s3s.sh");
        let printed = String::from_utf8_lossy(&out.stdout).trim().to_owned();
        assert!(
            out.status.success() && !printed.is_empty(),
            "install-s3s.sh failed"
        );
        PathBuf::from(printed)
    })
    .clone()
}

/// A running s3s-fs; killed on drop. Stopping and starting it again keeps its root.
pub struct S3Server {
    child: Option<Child>,
    /// Where it listens.
    pub addr: SocketAddr,
    /// Its root directory (a bucket is a directory under it).
    pub root: PathBuf,
    log: PathBuf,
    _dir: tempfile::TempDir,
}

impl S3Server {
    /// Starts a server with an empty root holding [`BUCKET`].
    pub fn start() -> S3Server {
        let dir = tempfile::tempdir().expect("temp dir");
        let root = dir.path().join("root");
        std::fs::create_dir_all(root.join(BUCKET)).expect("bucket directory");
        let mut server = S3Server {
            child: None,
            addr: free_addr(),
            root,
            log: dir.path().join("s3s.log"),
            _dir: dir,
        };
        server.restart();
        server
    }

    /// Starts it again (on the same port) after [`S3Server::stop`].
    pub fn restart(&mut self) {
        assert!(self.child.is_none(), "already running");
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&self.log)
            .expect("log file");
        let child = Command::new(s3s_bin())
            .args(["--host", "127.0.0.1", "--port"])
            .arg(self.addr.port().to_string())
            .args(["--access-key", ACCESS_KEY, "--secret-key", SECRET_KEY])
            .arg(&self.root)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .expect("spawn s3s-fs");
        self.child = Some(child);
        let deadline = Instant::now() + Duration::from_secs(10);
        while TcpStream::connect_timeout(&self.addr, Duration::from_millis(200)).is_err() {
            assert!(
                Instant::now() < deadline,
                "s3s-fs never listened:\n{}",
                self.log()
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// Kills it (its root stays).
    pub fn stop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// Its log.
    pub fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// Files of unfinished multipart uploads under its root.
    pub fn unfinished_uploads(&self) -> Vec<String> {
        std::fs::read_dir(&self.root)
            .expect("list root")
            .filter_map(|e| e.ok()?.file_name().into_string().ok())
            .filter(|name| name.starts_with(".upload"))
            .collect()
    }

    /// The upload ids those files belong to (`.upload_id-{id}` and its `.part-N`s).
    pub fn unfinished_upload_ids(&self) -> std::collections::BTreeSet<String> {
        self.unfinished_uploads()
            .iter()
            .filter_map(|name| {
                let id = name.strip_prefix(".upload_id-")?;
                Some(id.split_once(".part-").map_or(id, |(id, _)| id).to_owned())
            })
            .collect()
    }

    /// The environment weir needs to reach it.
    pub fn env(&self) -> Vec<(&'static str, String)> {
        vec![
            ("AWS_ACCESS_KEY_ID", ACCESS_KEY.to_owned()),
            ("AWS_SECRET_ACCESS_KEY", SECRET_KEY.to_owned()),
            ("AWS_REGION", "us-east-1".to_owned()),
        ]
    }
}

impl Drop for S3Server {
    fn drop(&mut self) {
        self.stop();
    }
}

/// One object as pyarrow reads it: its key, rows and footer offsets.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoredObject {
    /// Its key under the bucket.
    pub key: String,
    /// Rows in it.
    pub rows: u64,
    /// `weir.first_offset` from its footer.
    pub first: u64,
    /// `weir.last_offset` from its footer.
    pub last: u64,
    /// The `seq` of each row's payload (a generator's; none when the payloads have no
    /// `seq`).
    pub seqs: Vec<u64>,
}

/// Every Parquet object under `prefix` of [`BUCKET`] at `addr`, read with pyarrow's S3
/// filesystem (the client users read the lake with), sorted by first offset.
pub fn read_parquet_objects(addr: SocketAddr, prefix: &str) -> Vec<StoredObject> {
    let filesystem = format!(
        r#"fs.S3FileSystem(access_key="{ACCESS_KEY}", secret_key="{SECRET_KEY}",
    endpoint_override="127.0.0.1:{port}", scheme="http", region="us-east-1")"#,
        port = addr.port()
    );
    read_parquet_objects_with(&filesystem, &format!("{BUCKET}/{prefix}"))
}

/// Every Parquet object under `root` of the pyarrow filesystem the Python expression
/// `filesystem` builds (`pyarrow.fs` is `fs`), sorted by first offset.
pub fn read_parquet_objects_with(filesystem: &str, root: &str) -> Vec<StoredObject> {
    let script = format!(
        r#"
import json, pyarrow.fs as fs, pyarrow.parquet as pq
store = {filesystem}
out = []
for info in store.get_file_info(fs.FileSelector("{root}", recursive=True)):
    if info.type != fs.FileType.File:
        continue
    with store.open_input_file(info.path) as f:
        table = pq.read_table(f)
        meta = pq.read_metadata(store.open_input_file(info.path)).metadata
    first, last = int(meta[b"weir.first_offset"]), int(meta[b"weir.last_offset"])
    try:
        seqs = [json.loads(p)["seq"] for p in table.column("payload").to_pylist()]
    except Exception:
        seqs = []
    out.append(dict(key=info.path, rows=table.num_rows, first=first, last=last, seqs=seqs))
print(json.dumps(out))
"#
    );
    let out = Command::new("python3")
        .arg("-c")
        .arg(&script)
        .output()
        .expect("run python3");
    assert!(
        out.status.success(),
        "reading the store with pyarrow failed (run scripts/test.sh, which installs it):\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let list: Vec<serde_json::Value> = serde_json::from_slice(&out.stdout).expect("JSON");
    let mut objects: Vec<StoredObject> = list
        .iter()
        .map(|o| StoredObject {
            key: o["key"].as_str().unwrap_or_default().to_owned(),
            rows: o["rows"].as_u64().unwrap_or_default(),
            first: o["first"].as_u64().unwrap_or_default(),
            last: o["last"].as_u64().unwrap_or_default(),
            seqs: o["seqs"]
                .as_array()
                .map(|a| a.iter().filter_map(serde_json::Value::as_u64).collect())
                .unwrap_or_default(),
        })
        .collect();
    objects.sort_by_key(|o| o.first);
    objects
}

/// Checks that every offset in `0..end` is in exactly one of `objects`: no gap, no
/// overlap, no loss.
///
/// When every object holds one row per offset from its first to its last (contiguous
/// objects), those are its offsets, and the ranges must tile `0..end`. Otherwise (a
/// partitioned sink, whose objects interleave) rows are told apart by their payload's
/// `seq` (a generator's, unique within one run): no record may be in two objects, no
/// object may hold more rows than its range has offsets, and the objects must hold
/// `end` rows in all, so that each of the WAL's `end` records is in exactly one. (A
/// generator's concurrent appends may reach the WAL out of order, so `seq` is not the
/// offset.)
pub fn assert_exact_cover(objects: &[StoredObject], end: u64) {
    let ranges: Vec<(&str, u64, u64, u64)> = objects
        .iter()
        .map(|o| (o.key.as_str(), o.first, o.last, o.rows))
        .collect();
    let contiguous = objects.iter().all(|o| o.rows == o.last - o.first + 1);
    if contiguous {
        let mut next = 0;
        for o in objects {
            assert_eq!(
                o.first, next,
                "a gap or an overlap before {o:?}; objects (key, first, last, rows): {ranges:#?}"
            );
            next = o.last + 1;
        }
        assert_eq!(
            next, end,
            "objects end at {next}, the WAL at {end}: {ranges:#?}"
        );
        return;
    }
    let mut holder: std::collections::HashMap<u64, &str> = std::collections::HashMap::new();
    let mut rows = 0;
    for o in objects {
        assert!(
            o.rows <= o.last - o.first + 1,
            "{} holds {} rows, more than its offsets {}..={}",
            o.key,
            o.rows,
            o.first,
            o.last
        );
        assert_eq!(o.seqs.len() as u64, o.rows, "rows of {}", o.key);
        rows += o.rows;
        for &seq in &o.seqs {
            if let Some(other) = holder.insert(seq, &o.key) {
                panic!("the record of seq {seq} is in {other} and in {}", o.key);
            }
        }
    }
    assert_eq!(
        rows, end,
        "the objects hold {rows} records, the WAL {end}: {ranges:#?}"
    );
}

/// What the fault proxy does to each request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fault {
    /// Forward it.
    Pass,
    /// Answer 503 SlowDown without forwarding.
    SlowDown,
    /// Close the connection without answering.
    Drop,
}

/// An HTTP/1.1 proxy in front of the S3 server that injects faults: for each
/// `(fault, every)` set, every `every`th request gets `fault` (the first that applies),
/// and each forwarded request waits `delay` first. Counts what it did.
pub struct FaultProxy {
    /// Where it listens.
    pub addr: SocketAddr,
    /// Requests seen.
    pub requests: Arc<AtomicU64>,
    /// Faults injected (503s and dropped connections).
    pub faults: Arc<AtomicU64>,
    stop: Arc<AtomicBool>,
    config: Arc<std::sync::Mutex<Faults>>,
    link: Arc<Link>,
    open: Arc<AtomicU64>,
    hold: Arc<Hold>,
}

/// Requests whose request line contains `pattern` wait until it is cleared.
#[derive(Default)]
struct Hold {
    pattern: std::sync::Mutex<Option<String>>,
    released: std::sync::Condvar,
    /// Requests waiting now.
    waiting: AtomicU64,
}

impl Hold {
    fn wait_if_matching(&self, request: &[u8]) {
        let line_end = request
            .windows(2)
            .position(|w| w == b"\r\n")
            .unwrap_or(request.len());
        let line = String::from_utf8_lossy(&request[..line_end]).into_owned();
        let mut pattern = self.pattern.lock().expect("lock");
        if !pattern.as_deref().is_some_and(|p| line.contains(p)) {
            return;
        }
        self.waiting.fetch_add(1, Ordering::Relaxed);
        while pattern.as_deref().is_some_and(|p| line.contains(p)) {
            pattern = self.released.wait(pattern).expect("wait");
        }
        self.waiting.fetch_sub(1, Ordering::Relaxed);
    }
}

/// At most `max` requests forwarded at once (0: no cap): the proxy's link capacity.
#[derive(Default)]
struct Link {
    max: AtomicU64,
    busy: std::sync::Mutex<u64>,
    freed: std::sync::Condvar,
}

impl Link {
    fn acquire(&self) {
        let max = self.max.load(Ordering::Relaxed);
        if max == 0 {
            return;
        }
        let mut busy = self.busy.lock().expect("lock");
        while *busy >= max {
            busy = self.freed.wait(busy).expect("wait");
        }
        *busy += 1;
    }

    fn release(&self) {
        if self.max.load(Ordering::Relaxed) == 0 {
            return;
        }
        *self.busy.lock().expect("lock") -= 1;
        self.freed.notify_one();
    }
}

type Faults = (Vec<(Fault, u64)>, Duration);

impl FaultProxy {
    /// A proxy to `upstream`, passing everything until [`FaultProxy::set`].
    pub fn start(upstream: SocketAddr) -> FaultProxy {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
        let addr = listener.local_addr().expect("addr");
        listener.set_nonblocking(true).expect("nonblocking");
        let proxy = FaultProxy {
            addr,
            requests: Arc::default(),
            faults: Arc::default(),
            stop: Arc::default(),
            config: Arc::new(std::sync::Mutex::new((Vec::new(), Duration::ZERO))),
            link: Arc::default(),
            open: Arc::default(),
            hold: Arc::default(),
        };
        let (requests, faults, stop, config, link, open, hold) = (
            Arc::clone(&proxy.requests),
            Arc::clone(&proxy.faults),
            Arc::clone(&proxy.stop),
            Arc::clone(&proxy.config),
            Arc::clone(&proxy.link),
            Arc::clone(&proxy.open),
            Arc::clone(&proxy.hold),
        );
        std::thread::spawn(move || {
            while !stop.load(Ordering::Relaxed) {
                match listener.accept() {
                    Ok((client, _)) => {
                        let (requests, faults, config, link, open, hold) = (
                            Arc::clone(&requests),
                            Arc::clone(&faults),
                            Arc::clone(&config),
                            Arc::clone(&link),
                            Arc::clone(&open),
                            Arc::clone(&hold),
                        );
                        open.fetch_add(1, Ordering::SeqCst);
                        std::thread::spawn(move || {
                            let shared = Shared {
                                requests: &requests,
                                faults: &faults,
                                config: &config,
                                link: &link,
                                hold: &hold,
                            };
                            serve(client, upstream, &shared);
                            open.fetch_sub(1, Ordering::SeqCst);
                        });
                    }
                    Err(_) => std::thread::sleep(Duration::from_millis(5)),
                }
            }
        });
        proxy
    }

    /// At most `max` requests are forwarded at once (each holds its place for the
    /// proxy's delay and the upstream's answer); 0 lifts the cap.
    pub fn set_link(&self, max: u64) {
        self.link.max.store(max, Ordering::Relaxed);
    }

    /// Requests whose request line contains `pattern` (`"?uploads"`: a
    /// CreateMultipartUpload) wait before they are forwarded, until
    /// [`FaultProxy::release`].
    pub fn hold(&self, pattern: &str) {
        *self.hold.pattern.lock().expect("lock") = Some(pattern.to_owned());
    }

    /// Lets held requests go on.
    pub fn release(&self) {
        *self.hold.pattern.lock().expect("lock") = None;
        self.hold.released.notify_all();
    }

    /// Requests held now.
    pub fn held(&self) -> u64 {
        self.hold.waiting.load(Ordering::Relaxed)
    }

    /// Waits until no client connection is open: every request a client sent whole
    /// has been forwarded and answered upstream (after a client was killed, the store
    /// has finished all it had been asked).
    pub fn wait_idle(&self, timeout: Duration) {
        let deadline = Instant::now() + timeout;
        while self.open.load(Ordering::SeqCst) > 0 {
            assert!(
                Instant::now() < deadline,
                "{} proxied connections still open",
                self.open.load(Ordering::SeqCst)
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// From now on, every `every`th request gets `fault`, for each pair; forwarded ones
    /// wait `delay`.
    pub fn set(&self, faults: &[(Fault, u64)], delay: Duration) {
        let faults = faults.iter().map(|&(f, every)| (f, every.max(1))).collect();
        *self.config.lock().expect("lock") = (faults, delay);
    }
}

impl Drop for FaultProxy {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        self.release();
    }
}

/// Reads one request (head and `Content-Length` body); `None` at EOF.
fn read_request(client: &mut TcpStream) -> Option<Vec<u8>> {
    let mut buf = Vec::new();
    let mut byte = [0u8; 4096];
    let head_end = loop {
        if let Some(i) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            break i + 4;
        }
        let n = client.read(&mut byte).ok()?;
        if n == 0 {
            return None;
        }
        buf.extend_from_slice(&byte[..n]);
    };
    let head = String::from_utf8_lossy(&buf[..head_end]).to_ascii_lowercase();
    let length: usize = head
        .lines()
        .find_map(|l| l.strip_prefix("content-length:"))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(0);
    while buf.len() < head_end + length {
        let n = client.read(&mut byte).ok()?;
        if n == 0 {
            return None;
        }
        buf.extend_from_slice(&byte[..n]);
    }
    Some(buf)
}

/// What the proxy's connections share.
struct Shared<'a> {
    requests: &'a AtomicU64,
    faults: &'a AtomicU64,
    config: &'a std::sync::Mutex<Faults>,
    link: &'a Link,
    hold: &'a Hold,
}

fn serve(mut client: TcpStream, upstream: SocketAddr, shared: &Shared<'_>) {
    let Shared {
        requests,
        faults,
        config,
        link,
        hold,
    } = shared;
    while let Some(request) = read_request(&mut client) {
        hold.wait_if_matching(&request);
        let n = requests.fetch_add(1, Ordering::Relaxed) + 1;
        let (rules, delay) = config.lock().expect("lock").clone();
        let fault = rules
            .iter()
            .find(|(_, every)| n.is_multiple_of(*every))
            .map_or(Fault::Pass, |&(fault, _)| fault);
        match fault {
            Fault::SlowDown => {
                faults.fetch_add(1, Ordering::Relaxed);
                let body = "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<Error><Code>SlowDown</Code><Message>Please reduce your request rate.</Message></Error>";
                let response = format!(
                    "HTTP/1.1 503 Slow Down\r\nContent-Type: application/xml\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                    body.len()
                );
                let _ = client.write_all(response.as_bytes());
                return;
            }
            Fault::Drop => {
                faults.fetch_add(1, Ordering::Relaxed);
                return;
            }
            Fault::Pass => {}
        }
        link.acquire();
        let answered = forward(&request, upstream, delay);
        link.release();
        let Some(response) = answered else { return };
        if client.write_all(&response).is_err() {
            return;
        }
        // The upstream closed after one response; so does this connection, unless the
        // response said nothing (then the client may reuse it).
        if String::from_utf8_lossy(&response[..response.len().min(2048)])
            .to_ascii_lowercase()
            .contains("connection: close")
        {
            return;
        }
    }
}

/// Waits `delay`, sends `request` upstream and reads its whole answer.
fn forward(request: &[u8], upstream: SocketAddr, delay: Duration) -> Option<Vec<u8>> {
    {
        std::thread::sleep(delay);
        // One upstream connection per request, closed by the server after its answer:
        // the response is forwarded as it comes, to its end.
        let Ok(mut up) = TcpStream::connect(upstream) else {
            return None;
        };
        let head_end = request
            .windows(4)
            .position(|w| w == b"\r\n\r\n")
            .map_or(request.len(), |i| i + 2);
        let mut forwarded = request[..head_end].to_vec();
        forwarded.extend_from_slice(b"Connection: close\r\n");
        forwarded.extend_from_slice(&request[head_end..]);
        if up.write_all(&forwarded).is_err() {
            return None;
        }
        let mut response = Vec::new();
        up.read_to_end(&mut response).ok()?;
        Some(response)
    }
}
