//! What a source type provides: [`SourceKeys`] (its keys, checks and bounds, in its
//! `config.rs`) and [`StartSource`] (its startup check and its task, in its
//! `shell.rs`). The registry in `sources/mod.rs` lists the types that have both.

use std::future::Future;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;

use tokio::sync::watch;

use crate::keys::{Bounds, Section};
use crate::pipeline::Ingest;
use crate::quarantine::Quarantine;
use crate::telemetry::Telemetry;

/// A source type's configuration: the keys it reads under `[sources.NAME]`.
pub trait SourceKeys: Sized {
    /// The value of `type` that selects it.
    const TYPE: &'static str;

    /// What it does, in one line, for the reference: its heading's first line.
    const ABOUT: &'static str = "";

    /// Reads the type's own keys (the section's `type` and the keys every source has
    /// are already read), each declared with [`Section::key`](crate::keys::Section::key)
    /// so that the reference lists it. Every problem is recorded in the section; `None`
    /// when a required key is missing or wrong. `name` is the source's name
    /// (`NAME` in a documenting walk).
    fn parse(s: &mut Section<'_>, name: &str) -> Option<Self>;

    /// Its buffers and their bounds, for the memory inventory.
    fn bounds(&self, bounds: &mut Bounds<'_>);

    /// The largest unit this source must hand the WAL whole, in bytes, and the keys
    /// that set it: what the WAL's byte semaphore must be able to admit at once.
    fn max_batch_bytes(&self) -> (u64, &'static str);

    /// The address it listens on, and the key that sets it, if it listens.
    fn listen(&self) -> Option<(&'static str, SocketAddr)> {
        None
    }

    /// Things that are allowed but probably not meant; `path` is `sources.NAME`.
    fn warnings(&self, path: &str, out: &mut Vec<String>) {
        let _ = (path, out);
    }
}

/// What a source's task gets when the pipeline starts.
pub struct SourceContext {
    /// The source's name (its `[sources.NAME]`).
    pub name: Arc<str>,
    /// Its way into the WAL; its counters are `ingest.stats()`.
    pub ingest: Ingest,
    /// Turns true at shutdown: stop taking input, finish what is in flight.
    pub stop: watch::Receiver<bool>,
    /// Where records that cannot be written go, with the reason.
    pub quarantine: Quarantine,
    /// For the source's own `/status` and `/metrics` figures.
    pub telemetry: Telemetry,
    /// `runtime.data_dir`, for state a source keeps (a file source's position).
    pub data_dir: PathBuf,
}

/// A source type that `weir run` drives.
pub trait StartSource: SourceKeys {
    /// What the startup check hands to [`StartSource::start`] (a bound listener).
    type Checked: Send + 'static;

    /// Everything that can fail before the pipeline runs (a missing credential
    /// variable, an unreadable CA file, an address in use), without creating files.
    ///
    /// # Errors
    ///
    /// What is wrong, naming the key after `sources.NAME.`.
    fn check(&self, name: &str) -> impl Future<Output = anyhow::Result<Self::Checked>> + Send;

    /// The source's task: runs until `stop`, acknowledging only what is durable.
    fn start(
        self,
        checked: Self::Checked,
        cx: SourceContext,
    ) -> impl Future<Output = ()> + Send + 'static;
}
