//! The `weir` crate's modules are layered, and every import points down: a module
//! names (`crate::…`, each name of a `crate::{…}` group, or `super::…` where `super` is
//! the crate root) only modules of a lower layer. The check (shared with the other
//! crates, `crates/layers.rs`) reads the sources and fails on an import that points up
//! or sideways, naming the file and line, so the layout described in `ARCHITECTURE.md`
//! cannot drift silently.

#[path = "../../layers.rs"]
mod layers;

use std::path::Path;

/// The layers, lowest first. A module may use modules of lower layers only; modules of
/// one layer (the sources and the sinks) do not use each other.
const LAYERS: &[&[&str]] = &[
    &["log_window"],
    &["keys", "record", "serve"],
    &["telemetry"],
    &["logging", "quarantine"],
    &["pipeline"],
    &["sources", "sinks"],
    &["config"],
    &["runtime"],
    &["cmd"],
];

#[test]
fn every_import_points_down() {
    layers::check(
        Path::new(env!("CARGO_MANIFEST_DIR")),
        LAYERS,
        "ARCHITECTURE.md",
        100,
    );
}

#[test]
fn the_scan_sees_groups_and_super_and_skips_comments_and_strings() {
    layers::scan_self_test();
}
