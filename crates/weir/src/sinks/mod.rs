//! Sinks: where records go after the WAL.
//!
//! A sink driver ([`crate::pipeline::driver`]) reads the sink's cursor, decodes the
//! records of the sink's `inputs` and hands them to the running [`Sink`] in batches;
//! the sink answers with the offset up to which everything is stored, and only then
//! does the driver commit the cursor.
//!
//! One folder per sink type, with the same file names: `config.rs` (its keys, checks
//! and bounds: [`SinkKeys`]), `core.rs` (its sans-IO policy), `shell.rs` (the running
//! sink: [`OpenSink`] and [`crate::pipeline::Sink`]) and `mod.rs` (docs and
//! re-exports). Adding a sink is one folder and one line in the registry below.
//!
//! | sink | stores | durable when |
//! |---|---|---|
//! | [`file`] | NDJSON files, rotated by bytes and age | the batch is written and fsynced |
//! | [`parquet`] | Parquet files, rotated by bytes and age | the file holding the batch is closed and renamed |
//! | [`blackhole`] | nothing; counts, optionally at a limited rate | at once |
//! | [`object_store`] | Parquet or NDJSON objects in S3, GCS, Azure, a directory, partitioned by a `layout` | the objects holding the batch's records are stored (PUT or CompleteMultipartUpload) |
//! | [`http`] | batches sent to an HTTP endpoint | the endpoint answered 2xx (refused records: in the quarantine) |
//! | [`nats`] | messages published to a JetStream subject | every PubAck of the batch came back (deduplicated by `Nats-Msg-Id` on replay) |

pub mod blackhole;
mod component;
mod config;
pub mod file;
mod healthcheck;
pub mod http;
pub mod layout;
pub mod lines;
pub mod nats;
pub mod object_store;
pub mod parquet;
pub mod reserve;
pub mod rotate;
pub mod schema;

use std::path::Path;
use std::sync::Arc;

use serde::Serialize;

pub use self::component::{ConfigStamp, OpenSink, SinkContext, SinkKeys};
pub use self::config::{MaxLag, Retry, SinkConfig};
use crate::keys::{Bounds, Section, SectionDoc, document};
use crate::pipeline::{self, SinkBatch, SinkError, Unencodable, Written};

/// Declares the sink types `weir run` drives: the [`SinkKind`] enum of their
/// configurations, the [`Sink`] enum of running sinks, and the dispatch.
macro_rules! registry {
    ($($variant:ident => $config:ty),+ $(,)?) => {
        /// A sink type with its own keys.
        #[derive(Debug, Clone, PartialEq, Serialize)]
        #[serde(tag = "type", rename_all = "snake_case")]
        pub enum SinkKind {
            $(
                #[doc = concat!("`type = \"", stringify!($variant), "\"`.")]
                $variant($config),
            )+
        }

        /// A running sink of any type.
        #[derive(Debug)]
        #[allow(clippy::large_enum_variant, reason = "one per configured sink, made once")]
        pub enum Sink {
            $(
                #[doc = concat!("Of a [`SinkKind::", stringify!($variant), "`].")]
                $variant(<$config as OpenSink>::Sink),
            )+
        }

        /// The `type` values of the sinks `weir run` drives.
        pub const TYPES: &[&str] = &[$(<$config as SinkKeys>::TYPE),+];

        /// The reference of the sinks: the keys every sink has, then each type's own
        /// (those not built yet last), from the documenting walk of their parse
        /// functions.
        pub fn reference() -> Vec<SectionDoc> {
            let built = [$((
                <$config as SinkKeys>::TYPE,
                <$config as SinkKeys>::ABOUT,
                document(|mut s| {
                    <$config as SinkKeys>::parse(&mut s);
                }),
            )),+];
            let not_built = NOT_BUILT.iter().map(|(type_name, parse)| {
                (*type_name, document(|mut s| {
                    parse(&mut s);
                }))
            });
            let common = document(|s| {
                SinkConfig::parse(s, &[]);
            });
            SectionDoc::components(HEADER, "The keys every sink has, whatever its type.", common, built, not_built)
        }

        impl SinkKind {
            fn parse(type_name: &str, s: &mut Section<'_>) -> Option<Self> {
                $(
                    if type_name == <$config as SinkKeys>::TYPE {
                        return <$config as SinkKeys>::parse(s).map(SinkKind::$variant);
                    }
                )+
                None
            }

            /// The `type` value.
            pub fn type_name(&self) -> &'static str {
                match self { $(SinkKind::$variant(_) => <$config as SinkKeys>::TYPE,)+ }
            }

            /// Its buffers and their bounds.
            pub fn bounds(&self, bounds: &mut Bounds<'_>) {
                match self { $(SinkKind::$variant(c) => c.bounds(bounds),)+ }
            }

            /// The directory it writes to, if it writes files.
            pub fn directory(&self) -> Option<&Path> {
                match self { $(SinkKind::$variant(c) => c.directory(),)+ }
            }

            /// When budget-aware rotation closes its files before `rotate.bytes`
            /// would, under a WAL of `max_disk` ([`SinkKeys::early_close_note`]).
            pub fn early_close_note(&self, name: &str, max_disk: u64) -> Option<String> {
                match self { $(SinkKind::$variant(c) => c.early_close_note(name, max_disk),)+ }
            }

            /// Opens the sink `name` (blocking: call it on a blocking thread).
            ///
            /// # Errors
            ///
            /// [`SinkError`] if it cannot be prepared.
            pub fn open(&self, name: &str, cx: &SinkContext) -> Result<Sink, SinkError> {
                Ok(match self { $(SinkKind::$variant(c) => Sink::$variant(c.open(name, cx)?),)+ })
            }

            /// The startup check of the sink `name` ([`OpenSink::healthcheck`]), which
            /// gives up within about `timeout`.
            ///
            /// # Errors
            ///
            /// What failed, naming the key to fix.
            ///
            /// # Cancel safety
            ///
            /// Cancel-safe, as [`OpenSink::healthcheck`].
            pub async fn healthcheck(&self, name: &str, timeout: std::time::Duration) -> Result<(), String> {
                match self { $(SinkKind::$variant(c) => c.healthcheck(name, timeout).await,)+ }
            }
        }

        impl Sink {
            /// The sink's type, as configured.
            pub fn type_name(&self) -> &'static str {
                match self { $(Sink::$variant(_) => <$config as SinkKeys>::TYPE,)+ }
            }
        }

        impl pipeline::Sink for Sink {
            fn takes_wire(&self) -> bool {
                match self { $(Sink::$variant(s) => s.takes_wire(),)+ }
            }

            async fn write(
                &mut self,
                batch: &Arc<SinkBatch>,
                rejects: &mut Vec<Unencodable>,
            ) -> Result<Written, SinkError> {
                match self { $(Sink::$variant(s) => s.write(batch, rejects).await,)+ }
            }

            async fn tick(&mut self) -> Result<Option<u64>, SinkError> {
                match self { $(Sink::$variant(s) => s.tick().await,)+ }
            }

            async fn finish(&mut self) -> Result<Option<u64>, SinkError> {
                match self { $(Sink::$variant(s) => s.finish().await,)+ }
            }

            async fn settled(&mut self) -> Result<Option<u64>, SinkError> {
                match self { $(Sink::$variant(s) => s.settled().await,)+ }
            }

            fn resume_at(&mut self, next_offset: u64) {
                match self { $(Sink::$variant(s) => s.resume_at(next_offset),)+ }
            }

            fn failing(&self) -> Option<String> {
                match self { $(Sink::$variant(s) => s.failing(),)+ }
            }
        }
    };
}

registry! {
    File => file::FileSinkConfig,
    Parquet => parquet::ParquetConfig,
    Blackhole => blackhole::BlackholeConfig,
    ObjectStore => object_store::ObjectStoreConfig,
    Http => http::HttpSinkConfig,
    Nats => nats::NatsSinkConfig,
}

/// The header of a sink's section, as the reference shows it.
const HEADER: &str = "[sinks.NAME]";

/// Reads the keys of a sink type that is not built yet; whether they were valid.
type ParseKeys = fn(&mut Section<'_>) -> bool;

/// Sink types whose keys are known but that this build does not drive yet: their keys
/// are checked (so the rest of the file is), then the type is refused.
const NOT_BUILT: &[(&str, ParseKeys)] = &[];
