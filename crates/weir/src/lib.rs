//! weir, the daemon and CLI of a backpressure-aware ingest pipeline, as a library: the
//! `weir` binary (`main.rs`) only parses the command line and calls [`cmd`].
//!
//! The modules are layered; each imports only from the layers below it:
//!
//! ```text
//! cmd        one module per subcommand
//! runtime    assembles a pipeline from a config: check → open → start → wait → drain
//! config     the file as a whole: [runtime], [wal], [quarantine], cross-checks, the inventory
//! sources/   sinks/     one folder per component type, and the registry of types
//! pipeline   what components share with the WAL: ingest, the sink driver, stats
//! quarantine logging   records that cannot be written; the bounded log writer
//! telemetry  states, probes, counters; /status, /metrics, the dashboard
//! keys       record     reading config keys; the record and its encodings
//! serve      bounded HTTP serving (the HTTP source, the status server)
//! weir-wal   weir-flow  (other crates)
//! ```
//!
//! `ARCHITECTURE.md` at the repository's root says where each kind of change goes;
//! `tests/layers.rs` checks that every import points down.

#![warn(missing_docs)]

pub mod cmd;
pub mod config;
pub mod keys;
pub mod log_window;
pub mod logging;
pub mod pipeline;
pub mod quarantine;
pub mod record;
pub mod runtime;
pub mod serve;
pub mod sinks;
pub mod sources;
pub mod telemetry;
