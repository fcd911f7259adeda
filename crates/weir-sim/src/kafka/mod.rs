//! `weir lab kafka`: seed 001's consumer experiment — an unbounded hand-off against a
//! bounded queue with pause/resume watermarks — and its AIMD rate limiter against a
//! downstream whose capacity moves.
//!
//! Time here has nanosecond resolution ([`weir_flow::Timestamp`]): the downstream needs
//! 1,000 µs per record. The engine is event-driven (it jumps from one poll return or
//! completion to the next) and keeps the lesson's ordering rule: within one instant the
//! producer side (the poll loop, the client) acts before the consumer side (completion,
//! then the next pick).

mod aimd;
mod handoff;

use std::fmt::Write as _;

pub use aimd::{AimdExperiment, AimdResult, CapacityPhase, RateSample, rate_table, run_aimd};
pub use handoff::{
    HandOff, HandOffConfig, HandOffResult, SERIES_BUCKET_MS, comparison_table, run_handoff,
};

use crate::error::SimError;

/// Both hand-offs of Part 1, run.
#[derive(Debug, Clone)]
pub struct Kafka {
    /// The parameters.
    pub config: HandOffConfig,
    /// The unbounded hand-off.
    pub unbounded: HandOffResult,
    /// The bounded queue with pause/resume watermarks.
    pub bounded: HandOffResult,
}

impl Kafka {
    /// Runs both hand-offs.
    ///
    /// # Errors
    ///
    /// [`SimError`] if the configuration is refused.
    pub fn run(config: &HandOffConfig) -> Result<Kafka, SimError> {
        Ok(Kafka {
            config: config.clone(),
            unbounded: run_handoff(config, HandOff::Unbounded)?,
            bounded: run_handoff(config, HandOff::Watermarked)?,
        })
    }
}

/// The whole `weir lab kafka` report.
///
/// # Errors
///
/// [`SimError`] if a configuration is refused.
pub fn report(config: &HandOffConfig, experiment: &AimdExperiment) -> Result<String, SimError> {
    let kafka = Kafka::run(config)?;
    report_of(&kafka, experiment)
}

/// The report of hand-offs already run, followed by the AIMD experiment.
///
/// # Errors
///
/// [`SimError`] if the AIMD configuration is refused.
pub fn report_of(kafka: &Kafka, experiment: &AimdExperiment) -> Result<String, SimError> {
    let (config, unbounded, bounded) = (&kafka.config, &kafka.unbounded, &kafka.bounded);
    let mut out = String::new();
    let _ = writeln!(
        out,
        "Kafka-style consumer lab. All times are simulated; nothing here reads a real clock."
    );
    let _ = writeln!(
        out,
        "{} records are available at once; the downstream needs {} µs per record; a poll returns up to {} records {} ms after it starts.",
        config.records,
        config.service.as_micros(),
        config.max_poll_records,
        config.poll_latency.as_millis()
    );
    out.push('\n');
    let _ = writeln!(
        out,
        "Part 1. Unbounded hand-off against a bounded queue (capacity {}) that pauses fetching at {} and resumes at {}.",
        config.capacity, config.high, config.low
    );
    out.push_str(&comparison_table(config, unbounded, bounded));
    let _ = writeln!(
        out,
        "Pause/resume log ({} pauses; the first transitions and the end of fetching):",
        bounded.pauses
    );
    for line in &bounded.log {
        let _ = writeln!(out, "  {line}");
    }
    out.push('\n');
    let phases: Vec<String> = experiment
        .phases
        .iter()
        .map(|p| format!("{}/s from {} s", p.per_second, p.from.as_secs()))
        .collect();
    let _ = writeln!(
        out,
        "Part 2. AIMD rate limiter (start {:.0}/s, +20/s per on-target second, x0.8 when p99 > {} ms) against a downstream of {}.",
        experiment.initial_rate,
        experiment.target_latency.as_millis(),
        phases.join(", ")
    );
    let trace = run_aimd(experiment)?;
    out.push_str(&rate_table(&trace));
    Ok(out)
}
