//! Sources: where records come from. Each writes into the WAL through an
//! [`Ingest`](crate::pipeline::Ingest) handle and acknowledges (or answers) only after
//! the WAL reports its batch durable.
//!
//! One folder per source type, with the same file names: `config.rs` (its keys, checks
//! and bounds: [`SourceKeys`]), `core.rs` (its sans-IO policy, tested without a
//! runtime), `shell.rs` (its tokio task: [`StartSource`]) and `mod.rs` (docs and
//! re-exports). Adding a source is one folder and one line in the registry below.
//!
//! | source | under backpressure |
//! |---|---|
//! | [`generator`] | waits for admission |
//! | [`file`] | waits for admission; remembers its byte position after each durable batch |
//! | [`http`] | answers 503 + `Retry-After` when admission fails within `admission_timeout` |
//! | [`mqtt`] | withholds QoS 1/2 acks (the broker stops at its window); QoS 0 drops the newest, counted |
//! | [`nats`] | fetches only against credits freed by durability; acks once durable, progress-acks what waits |
//! | [`kafka`] | pauses its partitions above a byte watermark and keeps polling; commits only durable offsets |

mod component;
pub mod file;
pub mod generator;
pub mod http;
pub mod kafka;
pub mod mqtt;
pub mod nats;

use std::net::SocketAddr;
use std::num::NonZeroU32;

use serde::Serialize;
use tokio::task::JoinSet;

pub use self::component::{SourceContext, SourceKeys, StartSource};
use crate::keys::{Bounds, Section, SectionDoc, document, read_type};

/// Declares the source types `weir run` drives: the [`SourceKind`] enum of their
/// configurations, the [`Checked`] enum of their startup checks, and the dispatch.
macro_rules! registry {
    ($($variant:ident => $config:ty),+ $(,)?) => {
        /// A source type with its own keys.
        #[derive(Debug, Clone, PartialEq, Serialize)]
        #[serde(tag = "type", rename_all = "snake_case")]
        #[allow(clippy::large_enum_variant, reason = "built once per configured source")]
        pub enum SourceKind {
            $(
                #[doc = concat!("`type = \"", stringify!($variant), "\"`.")]
                $variant($config),
            )+
        }

        /// What a source's startup check produced, for its start.
        pub enum Checked {
            $(
                #[doc = concat!("Of a [`SourceKind::", stringify!($variant), "`].")]
                $variant(<$config as StartSource>::Checked),
            )+
        }

        /// The `type` values of the sources `weir run` drives.
        pub const TYPES: &[&str] = &[$(<$config as SourceKeys>::TYPE),+];

        /// The reference of the sources: the keys every source has, then each type's
        /// own (those not built yet last), from the documenting walk of their parse
        /// functions.
        pub fn reference() -> Vec<SectionDoc> {
            let built = [$((
                <$config as SourceKeys>::TYPE,
                <$config as SourceKeys>::ABOUT,
                document(|mut s| {
                    <$config as SourceKeys>::parse(&mut s, DOC_NAME);
                }),
            )),+];
            let not_built = NOT_BUILT.iter().map(|(type_name, parse)| {
                (*type_name, document(|mut s| {
                    parse(&mut s, DOC_NAME);
                }))
            });
            let common = document(|s| {
                SourceConfig::parse(s, DOC_NAME);
            });
            SectionDoc::components(HEADER, "The keys every source has, whatever its type.", common, built, not_built)
        }

        impl SourceKind {
            fn parse(type_name: &str, s: &mut Section<'_>, name: &str) -> Option<Self> {
                $(
                    if type_name == <$config as SourceKeys>::TYPE {
                        return <$config as SourceKeys>::parse(s, name).map(SourceKind::$variant);
                    }
                )+
                None
            }

            /// The `type` value.
            pub fn type_name(&self) -> &'static str {
                match self { $(SourceKind::$variant(_) => <$config as SourceKeys>::TYPE,)+ }
            }

            /// Its buffers and their bounds.
            pub fn bounds(&self, bounds: &mut Bounds<'_>) {
                match self { $(SourceKind::$variant(c) => c.bounds(bounds),)+ }
            }

            /// The largest unit it hands the WAL whole, and the keys that set it.
            pub fn max_batch_bytes(&self) -> (u64, &'static str) {
                match self { $(SourceKind::$variant(c) => c.max_batch_bytes(),)+ }
            }

            /// The address it listens on, and the key, if it listens.
            pub fn listen(&self) -> Option<(&'static str, SocketAddr)> {
                match self { $(SourceKind::$variant(c) => c.listen(),)+ }
            }

            /// Things allowed but probably not meant.
            pub fn warnings(&self, path: &str, out: &mut Vec<String>) {
                match self { $(SourceKind::$variant(c) => c.warnings(path, out),)+ }
            }

            /// The startup check ([`StartSource::check`]).
            ///
            /// # Errors
            ///
            /// What is wrong, naming the key after `sources.NAME.`.
            pub async fn check(&self, name: &str) -> anyhow::Result<Checked> {
                Ok(match self { $(SourceKind::$variant(c) => Checked::$variant(c.check(name).await?),)+ })
            }

            /// Spawns the source's task into `tasks`; `checked` is what [`Self::check`]
            /// returned for this same source.
            pub fn start(&self, checked: Checked, cx: SourceContext, tasks: &mut JoinSet<()>) {
                match (self, checked) {
                    $((SourceKind::$variant(c), Checked::$variant(checked)) => {
                        tasks.spawn(c.clone().start(checked, cx));
                    })+
                    #[allow(unreachable_patterns, reason = "with one source type every pair matches")]
                    _ => unreachable!("a source is started with its own check"),
                }
            }
        }
    };
}

registry! {
    Generator => generator::GeneratorConfig,
    File => file::FileSourceConfig,
    Http => http::HttpSourceConfig,
    Mqtt => mqtt::MqttConfig,
    Nats => nats::NatsConfig,
    Kafka => kafka::KafkaConfig,
}

/// The header of a source's section, as the reference shows it.
const HEADER: &str = "[sources.NAME]";

/// The name a documenting walk gives the source (a default such as MQTT's `client_id`
/// is made from it).
const DOC_NAME: &str = "NAME";

/// Reads the keys of a source type that is not built yet; whether they were valid.
type ParseKeys = fn(&mut Section<'_>, &str) -> bool;

/// Source types whose keys are known but that this build does not drive yet: their
/// keys are checked (so the rest of the file is), then the type is refused.
const NOT_BUILT: &[(&str, ParseKeys)] = &[];

/// One configured source: the keys every source has, and its type's own.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SourceConfig {
    /// Batches appended to the WAL but not yet durable (commit tickets this source may
    /// hold). Default 64.
    pub max_uncommitted_tickets: NonZeroU32,
    /// The source type and its own keys.
    #[serde(flatten)]
    pub kind: SourceKind,
}

impl SourceConfig {
    /// Default `max_uncommitted_tickets`.
    pub const DEFAULT_MAX_UNCOMMITTED_TICKETS: NonZeroU32 = NonZeroU32::new(64).expect("64 > 0");

    /// Reads one source; `name` is its key under `[sources]`. Unknown keys are
    /// reported only when the type is known (otherwise every key would look unknown).
    /// Walked empty (no `type`), it declares only the keys every source has.
    pub fn parse(mut s: Section<'_>, name: &str) -> Option<Self> {
        let type_name = read_type(
            &mut s,
            TYPES,
            NOT_BUILT.iter().map(|(t, _)| *t),
            "source",
            "The source type: its own keys are listed under its name below.",
        );
        let max_uncommitted_tickets = s
            .key(
                "max_uncommitted_tickets",
                "Batches appended to the WAL but not yet durable (the commit tickets this source may hold).",
            )
            .or(Self::DEFAULT_MAX_UNCOMMITTED_TICKETS);
        let type_name = type_name?;
        if let Some((_, parse)) = NOT_BUILT.iter().find(|(t, _)| *t == type_name) {
            parse(&mut s, name);
            s.finish();
            return None;
        }
        let kind = SourceKind::parse(type_name, &mut s, name);
        s.finish();
        Some(Self {
            max_uncommitted_tickets,
            kind: kind?,
        })
    }
}
