//! What a sink type provides: [`SinkKeys`] (its keys, checks and bounds, in its
//! `config.rs`) and [`OpenSink`] (how it opens into a running
//! [`Sink`](crate::pipeline::Sink), in its `shell.rs`). The registry in `sinks/mod.rs`
//! lists the types that have both.

use std::path::Path;
use std::sync::{Arc, OnceLock};

use crate::keys::{Bounds, Section};
use crate::pipeline::{Detail, Sink, SinkError};
use crate::quarantine::Quarantine;
use crate::sinks::Retry;
use crate::sinks::parquet::FooterMetadata;
use crate::telemetry::Telemetry;

/// A sink type's configuration: the keys it reads under `[sinks.NAME]`.
pub trait SinkKeys: Sized {
    /// The value of `type` that selects it.
    const TYPE: &'static str;

    /// What it does, in one line, for the reference: its heading's first line.
    const ABOUT: &'static str = "";

    /// Reads the type's own keys (the keys every sink has are already read), each
    /// declared with [`Section::key`](crate::keys::Section::key) so that the reference
    /// lists it. Every problem is recorded in the section; `None` when a required key
    /// is missing or wrong.
    fn parse(s: &mut Section<'_>) -> Option<Self>;

    /// Its buffers and their bounds, for the memory inventory (beyond the driver
    /// channel every sink has).
    fn bounds(&self, bounds: &mut Bounds<'_>) {
        let _ = bounds;
    }

    /// The directory it writes to (its `path` key), which must be its own.
    fn directory(&self) -> Option<&Path> {
        None
    }

    /// When budget-aware rotation closes its files before `rotate.bytes` would, under
    /// a WAL of `max_disk`: the sentence `weir validate` prints
    /// ([`crate::sinks::rotate::early_close_note`]). `None` for a sink whose open file
    /// never pins the WAL.
    fn early_close_note(&self, name: &str, max_disk: u64) -> Option<String> {
        let _ = (name, max_disk);
        None
    }
}

/// The configuration in force as sinks record it in what they write (Parquet footers,
/// object metadata): its hash and `wal.on_full`. One per pipeline, shared by its sinks;
/// a reload sets it, and every file or object finished afterwards carries the new
/// values.
#[derive(Debug, Clone)]
pub struct ConfigStamp(Arc<std::sync::Mutex<FooterMetadata>>);

impl ConfigStamp {
    /// A stamp holding `footer`.
    pub fn new(footer: FooterMetadata) -> Self {
        Self(Arc::new(std::sync::Mutex::new(footer)))
    }

    /// The values in force now.
    pub fn get(&self) -> FooterMetadata {
        self.0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone()
    }

    /// Sets the values in force (a reload).
    pub fn set(&self, footer: FooterMetadata) {
        *self
            .0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = footer;
    }
}

impl From<FooterMetadata> for ConfigStamp {
    fn from(footer: FooterMetadata) -> Self {
        Self::new(footer)
    }
}

/// What every sink may record about the pipeline it belongs to (Parquet footers do).
#[derive(Debug, Clone)]
pub struct SinkContext {
    /// The configuration's full hash (`sha256:…`) and `wal.on_full`, as in force.
    pub stamp: ConfigStamp,
    /// The WAL: its id names objects; what an open file pins of its budget decides
    /// budget-aware rotation ([`crate::sinks::rotate::pins_too_much`]).
    pub wal: weir_wal::Wal,
    /// `runtime.data_dir`: a sink that keeps state of its own (the object-store sink's
    /// journal) keeps it under `<data_dir>/sinks/<name>/`.
    pub data_dir: std::path::PathBuf,
    /// The sink's own `retry = { initial, max }`.
    pub retry: Retry,
    /// Where a sink registers its own metrics.
    pub telemetry: Telemetry,
    /// Where a sink puts records its destination refused (dead letters).
    pub quarantine: Quarantine,
    /// The sink's `unencodable` count (in `/status`), for a sink whose own tasks refuse
    /// records it cannot encode (rather than returning them from `write`); it also
    /// quarantines them.
    pub unencodable: Arc<std::sync::atomic::AtomicU64>,
    /// Where a sink puts its type-specific `/status` details (its
    /// [`SinkStats::detail`](crate::pipeline::SinkStats::detail)).
    pub detail: Arc<OnceLock<Detail>>,
}

/// A sink type that `weir run` drives.
pub trait OpenSink: SinkKeys {
    /// The running sink.
    type Sink: Sink;

    /// Opens the sink `name` (blocking file I/O: called on a blocking thread): creates
    /// its directory, removes what an earlier run left half-written.
    ///
    /// # Errors
    ///
    /// [`SinkError`] if it cannot be prepared.
    fn open(&self, name: &str, cx: &SinkContext) -> Result<Self::Sink, SinkError>;

    /// The startup check (`healthcheck = true`), made before the WAL is opened: reaches
    /// the destination the way the running sink will (credentials, a connection, the
    /// bucket or stream) without writing records. The default checks nothing: a sink
    /// that writes local files finds its problems when it is opened.
    ///
    /// # Errors
    ///
    /// What failed, naming the key to fix and the sources of credentials it tried; the
    /// caller adds `sinks.NAME`.
    ///
    /// # Cancel safety
    ///
    /// Cancel-safe: it leaves nothing behind that the next check or the running sink
    /// would trip over.
    ///
    /// It should give up within `timeout` (`healthcheck_timeout`) saying what it was
    /// waiting for; the caller cancels it a little later.
    fn healthcheck(
        &self,
        name: &str,
        timeout: std::time::Duration,
    ) -> impl Future<Output = Result<(), String>> + Send {
        let _ = (name, timeout);
        std::future::ready(Ok(()))
    }
}
