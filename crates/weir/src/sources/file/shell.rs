//! The `file` source's tokio task (see the [module docs](super)): it starts the tailer's
//! thread, writes the lines it refuses to the quarantine, appends its chunks to the WAL
//! in order with a few in flight, and saves positions past what is durable.

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use tokio::sync::mpsc;
use tokio::task::JoinHandle;

use super::chunk::{Builder, Chunk, FileUpdate, Limits};
use super::config::FileSourceConfig;
use super::files::Ctx;
use super::format::Parser;
use super::positions::{Resume, Store, Table};
use super::status::{self, Shared};
use super::tailer::Tailer;
use crate::pipeline::Detail;
use crate::pipeline::appends::{Event, InFlight, OrderedAppends};
use crate::pipeline::ingest::Ingest;
use crate::quarantine::{Quarantine, QuarantineError};
use crate::sources::{SourceContext, StartSource};
use crate::telemetry::State;

/// Batches on their way to durability at once (each up to `batch_bytes`).
pub const UNITS_IN_FLIGHT: usize = 4;

/// What a chunk's durability changes in the position store.
struct Tag {
    files: Vec<FileUpdate>,
    positions: Vec<(u64, u64)>,
    released: Vec<u64>,
}

impl StartSource for FileSourceConfig {
    type Checked = ();

    async fn check(&self, _name: &str) -> anyhow::Result<()> {
        Ok(())
    }

    fn start(self, (): (), cx: SourceContext) -> impl Future<Output = ()> + Send + 'static {
        let shared = Arc::new(Shared::new(u64::from(self.max_open_files.get())));
        if !self.is_stdin() {
            status::register(&cx.name, &shared, &cx.telemetry);
            let detail = Arc::clone(&shared);
            let _ = cx.ingest.stats().fields.set(Detail(Arc::new(move || {
                serde_json::to_value(detail.report()).unwrap_or_default()
            })));
        }
        run(cx, self, shared)
    }
}

fn host_name(config: &FileSourceConfig) -> String {
    config.host.clone().unwrap_or_else(|| {
        let uname = rustix::system::uname();
        uname.nodename().to_string_lossy().into_owned()
    })
}

/// Runs the source until `stop` turns true (or standard input ends).
async fn run(cx: SourceContext, config: FileSourceConfig, shared: Arc<Shared>) {
    let SourceContext {
        name,
        ingest,
        mut stop,
        quarantine,
        data_dir,
        ..
    } = cx;
    let stdin = config.is_stdin();
    let store = Store::new(&data_dir, &name);
    let now_ms = u64::try_from(crate::record::now_ms()).unwrap_or(0);
    let (mut table, resume) = if stdin {
        (Table::default(), Resume::default())
    } else {
        let loaded = {
            let store = store.clone();
            tokio::task::spawn_blocking(move || store.load()).await
        };
        let loaded = match loaded {
            Ok(Ok(loaded)) => loaded,
            Ok(Err(message)) => return fail(&ingest, &name, message),
            Err(e) => return fail(&ingest, &name, e.to_string()),
        };
        let (table, unclaimed) = Table::load(loaded.files, now_ms);
        let legacy = loaded.legacy.and_then(|position| {
            if config.patterns().is_literal() {
                Some((config.path.clone(), position))
            } else {
                tracing::warn!(
                    source = %name,
                    "file: the position an earlier weir saved ({position}) is for one file, and path is now a glob: every matched file is read from its start"
                );
                None
            }
        });
        let mut resume = Resume::new(unclaimed, legacy);
        resume.written = loaded.written;
        (table, resume)
    };
    let (tx, mut rx) = mpsc::channel::<Chunk>(1);
    let halt = Arc::new(AtomicBool::new(false));
    let started = spawn_reader(
        &name,
        &config,
        resume,
        table.next_id(),
        &shared,
        &ingest,
        tx,
        &halt,
    );
    if let Err(e) = started {
        return fail(&ingest, &name, e.to_string());
    }
    // Chunks go to the WAL in order with a few in flight (the next is appended while
    // the last is fsynced); positions are saved, in order, only past durable chunks. A
    // chunk the WAL refuses (`on_full = "reject"`) is tried again, first: the file
    // keeps it, so the source waits instead of dropping lines.
    let in_flight = InFlight {
        units: UNITS_IN_FLIGHT,
        bytes: config
            .batch_bytes
            .bytes()
            .saturating_mul(UNITS_IN_FLIGHT as u64),
    };
    let mut appends = OrderedAppends::new(ingest.clone(), in_flight);
    let mut saver = Saver::new(store, config.forget_after.get(), !stdin);
    let mut input_done = false;
    loop {
        if input_done && appends.is_empty() {
            break; // standard input ended and everything read is durable
        }
        tokio::select! {
            biased;
            Some(event) = appends.next(), if !appends.is_empty() => match event {
                Event::Durable(tag) => saver.durable(&mut table, &shared, tag),
                Event::Refused => {
                    if let Err((message, _)) = appends.resubmit(None).await {
                        return fail(&ingest, &name, message);
                    }
                }
                Event::Failed(_, message) => return fail(&ingest, &name, message),
            },
            () = saver.saved(), if saver.is_saving() => {}
            () = crate::pipeline::stopped(&mut stop) => break,
            chunk = rx.recv(), if !input_done && appends.has_room() => {
                let Some(chunk) = chunk else {
                    input_done = true;
                    continue;
                };
                let submitted = tokio::select! {
                    biased;
                    // Not queued yet: read again from the saved position next time.
                    () = crate::pipeline::stopped(&mut stop) => break,
                    r = submit(&name, &quarantine, &mut appends, chunk) => r,
                };
                if let Err(message) = submitted {
                    return fail(&ingest, &name, message);
                }
            }
            else => break,
        }
        saver.start(&mut table, &shared);
    }
    halt.store(true, Ordering::Release);
    drop(rx);
    // Chunks in flight become durable (or are refused); positions saved in order. What
    // was refused is not retried at shutdown: the next run reads it again.
    while let Some(event) = appends.next().await {
        match event {
            Event::Durable(tag) => saver.durable(&mut table, &shared, tag),
            Event::Refused => {
                appends.give_up();
            }
            Event::Failed(_, message) => return fail(&ingest, &name, message),
        }
    }
    saver.finish(&mut table, &shared).await;
    if input_done {
        tracing::info!(source = %name, "file: standard input ended");
    }
    ingest.stats().component.set_state(State::Stopped);
}

/// Starts the reading thread: the tailer, or standard input's reader.
#[allow(clippy::too_many_arguments, reason = "the parts of one start")]
fn spawn_reader(
    name: &Arc<str>,
    config: &FileSourceConfig,
    resume: Resume,
    next_id: u64,
    shared: &Arc<Shared>,
    ingest: &Ingest,
    tx: mpsc::Sender<Chunk>,
    halt: &Arc<AtomicBool>,
) -> std::io::Result<()> {
    let max_line_bytes = usize::try_from(config.max_line_bytes.bytes()).unwrap_or(usize::MAX);
    let limits = Limits {
        max_line_bytes,
        batch_records: u64::from(config.batch_size.get()),
        batch_bytes: config.batch_bytes.bytes(),
    };
    let builder = Builder::new(
        Arc::clone(name),
        host_name(config),
        Parser::new(&config.format),
        &limits,
        Arc::clone(shared),
    );
    let send: super::tailer::Send = Box::new(move |chunk| tx.blocking_send(chunk).is_ok());
    let (halt, shared) = (Arc::clone(halt), Arc::clone(shared));
    let (name2, ingest) = (Arc::clone(name), ingest.clone());
    let multiline = config.multiline.clone();
    // A plain thread: a read blocked on stdin must not hold up runtime shutdown.
    let body: Box<dyn FnOnce() + std::marker::Send> = if config.is_stdin() {
        Box::new(move || {
            if let Err(e) = super::stdin::run(
                builder,
                &shared,
                max_line_bytes,
                multiline.as_ref(),
                &halt,
                send,
            ) {
                fail(&ingest, &name2, format!("reading standard input: {e}"));
            }
        })
    } else {
        let ctx = Ctx::new(name, config, builder, shared, resume, next_id);
        let patterns = config.patterns();
        Box::new(move || Tailer::new(ctx, patterns, send).run(&halt))
    };
    std::thread::Builder::new()
        .name(format!("weir-source-{name}"))
        .spawn(body)
        .map(drop)
}

/// Writes the chunk's refused lines to the quarantine (fsynced), then submits its
/// batch. The quarantine logs (rate-limited) and counts what it keeps and what it
/// drops, full or failing, and the lines are not retried: the position moves past
/// them.
async fn submit(
    name: &str,
    quarantine: &Quarantine,
    appends: &mut OrderedAppends<Tag>,
    chunk: Chunk,
) -> Result<(), String> {
    let Chunk {
        batch,
        records,
        rejected,
        files,
        positions,
        released,
    } = chunk;
    if !rejected.is_empty()
        && let Err(QuarantineError::Blocking(e)) = quarantine.put_durable(name, rejected).await
    {
        tracing::error!(source = %name, "file: quarantining refused lines did not complete: {e}");
    }
    let batches = if records > 0 { vec![batch] } else { Vec::new() };
    let tag = Tag {
        files,
        positions,
        released,
    };
    appends
        .submit(tag, batches, None)
        .await
        .map_err(|(message, _)| message)
}

fn fail(ingest: &Ingest, name: &str, message: String) {
    tracing::warn!("source {name}: {message}");
    ingest.stats().component.set_state(State::Failed(message));
}

/// Saves the position store: at most one save at a time, the next one with
/// everything that became durable meanwhile.
struct Saver {
    store: Store,
    forget_after_ms: u64,
    enabled: bool,
    dirty: bool,
    saving: Option<JoinHandle<std::io::Result<()>>>,
    path: PathBuf,
}

impl Saver {
    fn new(store: Store, forget_after: std::time::Duration, enabled: bool) -> Self {
        Saver {
            path: store.path().to_owned(),
            store,
            forget_after_ms: u64::try_from(forget_after.as_millis()).unwrap_or(u64::MAX),
            enabled,
            dirty: false,
            saving: None,
        }
    }

    /// A chunk is durable: its positions and files go in the table.
    fn durable(&mut self, table: &mut Table, shared: &Shared, tag: Tag) {
        if !self.enabled {
            return;
        }
        let now_ms = u64::try_from(crate::record::now_ms()).unwrap_or(0);
        for update in &tag.files {
            table.update(update);
        }
        for (id, position) in tag.positions {
            table.set_position(id, position);
            shared.set_position(id, position);
        }
        for id in tag.released {
            table.release(id, now_ms);
        }
        self.dirty = true;
    }

    fn is_saving(&self) -> bool {
        self.saving.is_some()
    }

    /// Waits for the save in progress (cancel-safe: the handle is kept until it ends).
    async fn saved(&mut self) {
        let Some(handle) = &mut self.saving else {
            return std::future::pending().await;
        };
        let result = handle.await;
        self.saving = None;
        match result {
            Ok(Ok(())) => {}
            Ok(Err(e)) => tracing::warn!("file: saving positions to {}: {e}", self.path.display()),
            Err(e) => tracing::warn!("file: saving positions to {}: {e}", self.path.display()),
        }
    }

    /// Starts a save if the table changed and none is running.
    fn start(&mut self, table: &mut Table, shared: &Shared) {
        if !self.dirty || self.saving.is_some() {
            return;
        }
        self.dirty = false;
        let now_ms = u64::try_from(crate::record::now_ms()).unwrap_or(0);
        let (files, forgotten) = table.snapshot(now_ms, self.forget_after_ms, |id| shared.size(id));
        for id in forgotten {
            shared.remove(id);
        }
        let store = self.store.clone();
        self.saving = Some(tokio::task::spawn_blocking(move || store.save(&files)));
    }

    /// The last save, with everything durable.
    async fn finish(&mut self, table: &mut Table, shared: &Shared) {
        if self.saving.is_some() {
            self.saved().await;
        }
        self.start(table, shared);
        if self.saving.is_some() {
            self.saved().await;
        }
    }
}
