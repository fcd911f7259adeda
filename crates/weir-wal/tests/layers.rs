//! weir-wal's modules are layered, and every import points down: a module names
//! (`crate::…`, or `super::…` where `super` is the crate root) only modules of a lower
//! layer. The check (shared with the other crates, `crates/layers.rs`) reads the
//! sources and fails on an import that points up or sideways, naming the file and
//! line, so the layers drawn in the crate's README cannot drift silently.

#[path = "../../layers.rs"]
mod layers;

use std::path::Path;

/// The layers, lowest first. A module may use modules of lower layers only; modules of
/// one layer do not use each other. Tests beside a module (`x_tests.rs`, `x/…`) belong
/// to its layer.
const LAYERS: &[&[&str]] = &[
    // Leaves: the wall clock, CRC32C, injected I/O failures, a segment's time index.
    &["clock", "crc", "faults", "time_index"],
    // The on-disk format, byte by byte.
    &["format"],
    // What an append takes, what a read returns, the configuration, what opening found.
    &["batch", "read_batch", "config", "open_report"],
    &["error"],
    // The log's books (sans-IO), segment files, the log's id, the writer's queue.
    &["core", "segment", "identity", "inbox"],
    // Opening a directory: stray files, then the tail, the quarantine and the cursors.
    &["strays"],
    &["recovery"],
    // What the writer thread, the readers and the handles share.
    &["shared"],
    // The read side's parts, lowest first.
    &["chunk_frames"],
    &["segment_read"],
    &["read_ahead"],
    // What a `Wal` holds: the writer thread, the readers, the figures.
    &["writer", "reader", "stats"],
    // The handle, and the offline tools.
    &["wal", "tools"],
    // Ordered appends over a `Wal`; changes to an open `Wal` (budget, cursors).
    &["chain", "live"],
];

#[test]
fn every_import_points_down() {
    layers::check(
        Path::new(env!("CARGO_MANIFEST_DIR")),
        LAYERS,
        "the README",
        100,
    );
}

#[test]
fn the_scan_sees_groups_and_super_and_skips_comments_and_strings() {
    layers::scan_self_test();
}
