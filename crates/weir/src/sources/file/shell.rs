//! The `file` source's tokio task (see the [module docs](super)).

use std::io::{BufRead, Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::{mpsc, watch};
use weir_wal::Batch;

use super::config::FileSourceConfig;
use super::core::{Line, LineSplitter};
use crate::pipeline::appends::{Event, InFlight, OrderedAppends};
use crate::pipeline::ingest::Ingest;
use crate::pipeline::stats::add;
use crate::record::Record;
use crate::sources::{SourceContext, StartSource};
use crate::telemetry::State;

/// How often the end of a followed file is polled for new lines.
const FOLLOW_POLL: Duration = Duration::from_millis(100);

/// Batches on their way to durability at once (each up to `batch_bytes`).
pub const UNITS_IN_FLIGHT: usize = 4;

/// Lines read and the position after the last one.
struct Chunk {
    lines: Vec<Vec<u8>>,
    end: u64,
}

impl StartSource for FileSourceConfig {
    type Checked = ();

    async fn check(&self, _name: &str) -> anyhow::Result<()> {
        Ok(())
    }

    fn start(self, (): (), cx: SourceContext) -> impl Future<Output = ()> + Send + 'static {
        run(cx.name, self, cx.data_dir, cx.ingest, cx.stop)
    }
}

/// Runs the source until `stop` turns true (or standard input ends).
///
/// # Cancel safety
///
/// Not meant to be cancelled; stop it through `stop`.
pub async fn run(
    name: Arc<str>,
    config: FileSourceConfig,
    data_dir: PathBuf,
    ingest: Ingest,
    mut stop: watch::Receiver<bool>,
) {
    let stdin = config.path.as_os_str() == "-";
    let position_file = data_dir.join("sources").join(format!("{name}.position"));
    let start = if stdin {
        0
    } else {
        match tokio::task::spawn_blocking({
            let f = position_file.clone();
            move || load_position(&f)
        })
        .await
        {
            Ok(Ok(p)) => p,
            Ok(Err(e)) => {
                return fail(
                    &ingest,
                    &name,
                    format!("reading {}: {e}", position_file.display()),
                );
            }
            Err(e) => return fail(&ingest, &name, e.to_string()),
        }
    };
    let (tx, mut rx) = mpsc::channel::<Chunk>(1);
    let reader = ReaderThread {
        path: config.path.clone(),
        stdin,
        start,
        max_line_bytes: config.max_line_bytes.bytes() as usize,
        batch_lines: config.batch_size.get() as usize,
        batch_bytes: config.batch_bytes.bytes() as usize,
        stats_name: Arc::clone(&name),
        ingest: ingest.clone(),
    };
    // A plain thread: a read blocked on stdin must not hold up runtime shutdown.
    if let Err(e) = std::thread::Builder::new()
        .name(format!("weir-source-{name}"))
        .spawn(move || reader.run(tx))
    {
        return fail(&ingest, &name, e.to_string());
    }
    // Batches go to the WAL in file order with a few in flight (the next is appended
    // while the last is fsynced); the position is saved, in order, only past durable
    // batches. A batch the WAL refuses (`on_full = "reject"`) is tried again, first:
    // the file keeps it, so the source waits instead of dropping lines.
    let in_flight = InFlight {
        units: UNITS_IN_FLIGHT,
        bytes: config
            .batch_bytes
            .bytes()
            .saturating_mul(UNITS_IN_FLIGHT as u64),
    };
    let mut appends = OrderedAppends::new(ingest.clone(), in_flight);
    let mut input_done = false;
    loop {
        if input_done && appends.is_empty() {
            break; // standard input ended and everything read is durable
        }
        tokio::select! {
            biased;
            Some(event) = appends.next(), if !appends.is_empty() => match event {
                Event::Durable(end) => {
                    if !stdin && let Err(e) = save_position(&position_file, end).await {
                        tracing::warn!("source {name}: saving its position failed: {e}");
                    }
                }
                Event::Refused => {
                    if let Err((message, _)) = appends.resubmit(None).await {
                        return fail(&ingest, &name, message);
                    }
                }
                Event::Failed(_, message) => return fail(&ingest, &name, message),
            },
            () = crate::pipeline::stopped(&mut stop) => break,
            chunk = rx.recv(), if !input_done && appends.has_room() => {
                let Some(chunk) = chunk else {
                    input_done = true;
                    continue;
                };
                let batch = encode(&name, &chunk);
                let submitted = tokio::select! {
                    biased;
                    // Not queued yet: read again from the saved position next time.
                    () = crate::pipeline::stopped(&mut stop) => break,
                    r = appends.submit(chunk.end, vec![batch], None) => r,
                };
                if let Err((message, _)) = submitted {
                    return fail(&ingest, &name, message);
                }
            }
            else => break,
        }
    }
    // Batches in flight become durable (or are refused); positions saved in order. What
    // was refused is not retried at shutdown: the next run reads it again.
    while let Some(event) = appends.next().await {
        match event {
            Event::Durable(end) => {
                if !stdin && let Err(e) = save_position(&position_file, end).await {
                    tracing::warn!("source {name}: saving its position failed: {e}");
                }
            }
            Event::Refused => {
                appends.give_up();
            }
            Event::Failed(_, message) => return fail(&ingest, &name, message),
        }
    }
    if input_done {
        tracing::info!(source = %name, "file: standard input ended");
    }
    ingest.stats().component.set_state(State::Stopped);
}

fn fail(ingest: &Ingest, name: &str, message: String) {
    tracing::warn!("source {name}: {message}");
    ingest.stats().component.set_state(State::Failed(message));
}

fn encode(name: &Arc<str>, chunk: &Chunk) -> Batch {
    let now_ms = crate::record::now_ms();
    let mut batch = Batch::new();
    let mut wire = Vec::new();
    for line in &chunk.lines {
        let record = Record {
            source: Arc::clone(name),
            key: String::new(),
            timestamp_ms: now_ms,
            payload: bytes::Bytes::copy_from_slice(line),
            attributes: Vec::new(),
        };
        wire.clear();
        record.encode_into(&mut wire);
        // max_line_bytes is far below the WAL's record limit (validated config).
        let _ = batch.push(&wire);
    }
    batch
}

struct ReaderThread {
    path: PathBuf,
    stdin: bool,
    start: u64,
    max_line_bytes: usize,
    batch_lines: usize,
    batch_bytes: usize,
    stats_name: Arc<str>,
    ingest: Ingest,
}

impl ReaderThread {
    fn run(self, tx: mpsc::Sender<Chunk>) {
        let result = if self.stdin {
            let stdin = std::io::stdin();
            self.pump(stdin.lock(), 0, false, &tx)
        } else {
            self.open_and_pump(&tx)
        };
        if let Err(e) = result {
            fail(
                &self.ingest,
                &self.stats_name,
                format!("reading {}: {e}", self.path.display()),
            );
        }
    }

    fn open_and_pump(&self, tx: &mpsc::Sender<Chunk>) -> std::io::Result<()> {
        let mut file = std::fs::File::open(&self.path)?;
        let len = file.metadata()?.len();
        let start = if self.start > len { 0 } else { self.start };
        file.seek(SeekFrom::Start(start))?;
        self.pump(std::io::BufReader::new(file), start, true, tx)
    }

    /// Reads lines into chunks until the input ends (stdin) or the receiver is gone.
    fn pump(
        &self,
        mut input: impl BufRead,
        start: u64,
        follow: bool,
        tx: &mpsc::Sender<Chunk>,
    ) -> std::io::Result<()> {
        let mut splitter = LineSplitter::new(self.max_line_bytes, start);
        let mut chunk = Chunk {
            lines: Vec::new(),
            end: start,
        };
        let mut chunk_bytes = 0;
        let mut buf = vec![0u8; 64 * 1024];
        loop {
            let n = input.read(&mut buf)?;
            let at_end = n == 0;
            let mut full = Vec::new();
            splitter.feed(&buf[..n], &mut |line: Line| {
                if !line.bytes.trim_ascii().is_empty() {
                    chunk_bytes += line.bytes.len();
                    chunk.lines.push(line.bytes);
                }
                chunk.end = line.end;
                if chunk.lines.len() >= self.batch_lines || chunk_bytes >= self.batch_bytes {
                    full.push(std::mem::replace(
                        &mut chunk,
                        Chunk {
                            lines: Vec::new(),
                            end: line.end,
                        },
                    ));
                    chunk_bytes = 0;
                }
            });
            if at_end
                && !follow
                && let Some(line) = splitter.finish()
            {
                chunk.end = line.end;
                chunk.lines.push(line.bytes);
            }
            if splitter.skipped > 0 {
                add(&self.ingest.stats().refused_records, splitter.skipped);
                splitter.skipped = 0;
            }
            if at_end && !chunk.lines.is_empty() {
                let end = chunk.end;
                full.push(std::mem::replace(
                    &mut chunk,
                    Chunk {
                        lines: Vec::new(),
                        end,
                    },
                ));
                chunk_bytes = 0;
            }
            for c in full {
                if tx.blocking_send(c).is_err() {
                    return Ok(()); // the source stopped
                }
            }
            if at_end {
                if !follow {
                    return Ok(());
                }
                if tx.is_closed() {
                    return Ok(());
                }
                std::thread::sleep(FOLLOW_POLL);
            }
        }
    }
}

fn load_position(path: &Path) -> std::io::Result<u64> {
    let mut bytes = Vec::new();
    match std::fs::File::open(path) {
        Ok(f) => {
            f.take(64).read_to_end(&mut bytes)?;
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(0),
        Err(e) => return Err(e),
    }
    std::str::from_utf8(&bytes)
        .ok()
        .and_then(|s| s.trim().parse().ok())
        .ok_or_else(|| {
            std::io::Error::other("not a byte position; delete the file to read from the start")
        })
}

async fn save_position(path: &Path, position: u64) -> std::io::Result<()> {
    let path = path.to_owned();
    tokio::task::spawn_blocking(move || {
        let dir = path.parent().unwrap_or(Path::new("."));
        std::fs::create_dir_all(dir)?;
        let tmp = path.with_extension("position.tmp");
        let mut f = std::fs::File::create(&tmp)?;
        f.write_all(format!("{position}\n").as_bytes())?;
        f.sync_all()?;
        std::fs::rename(&tmp, &path)?;
        std::fs::File::open(dir)?.sync_all()
    })
    .await
    .map_err(std::io::Error::other)?
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn position_round_trips_atomically() {
        let tmp = tempfile::tempdir().unwrap();
        let path = tmp.path().join("sources").join("f.position");
        assert_eq!(load_position(&path).unwrap(), 0);
        save_position(&path, 1234).await.unwrap();
        assert_eq!(load_position(&path).unwrap(), 1234);
        std::fs::write(&path, "garbage").unwrap();
        assert!(load_position(&path).is_err());
    }
}
