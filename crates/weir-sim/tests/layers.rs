//! weir-sim's modules are layered, and every import points down: a module names
//! (`crate::…`, or `super::…` where `super` is the crate root) only modules of a lower
//! layer. This test reads the sources and fails on an import that points up or
//! sideways, naming the file and line. The check is shared with the other crates
//! (`crates/layers.rs`).

#[path = "../../layers.rs"]
mod layers;

use std::path::Path;

/// The layers, lowest first. A module may use modules of lower layers only; modules of
/// one layer do not use each other. Tests beside a module (`x_tests.rs`, `x/…`) belong
/// to its layer.
const LAYERS: &[&[&str]] = &[
    // Leaves: the virtual clock, the error, the seeded generator, the strategies a run
    // can choose (a description; `lanes` runs them).
    &["clock", "error", "rng", "strategy"],
    // Arrivals and service times.
    &["workload"],
    // The millisecond engine.
    &["engine"],
    // On the engine: the credit-paced publisher, the tables, the time series.
    &["paced", "report", "series"],
    // Each strategy's lane over its `weir-flow` core.
    &["lanes"],
    // The experiments.
    &["kafka", "lesson", "littles_law", "scenario"],
    // The lesson's charts.
    &["chart"],
];

#[test]
fn every_import_points_down() {
    layers::check(
        Path::new(env!("CARGO_MANIFEST_DIR")),
        LAYERS,
        "ARCHITECTURE.md",
        30,
    );
}

#[test]
fn the_scan_sees_groups_and_super_and_skips_comments_and_strings() {
    layers::scan_self_test();
}
