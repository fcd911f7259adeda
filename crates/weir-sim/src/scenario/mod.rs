//! `weir lab run FILE.toml`: a user's own scenario — arrival process, service-time
//! schedule, strategies and their limits — run on the same engine and cores as the
//! lesson.
//!
//! The format is [`ScenarioFile`]; unknown keys are errors, and every problem is
//! reported with the key's path (`strategies[1].capacity: ...`).

mod file;
mod validate;

use std::fmt::Write as _;

pub use file::{
    ArrivalsFile, PeriodFile, ProcessKind, ScenarioFile, ServiceFile, StrategyFile, StrategyKind,
};

use crate::engine::{self, Outcome};
use crate::error::SimError;
use crate::report::format_table;
use crate::series::{DEFAULT_BUCKET_MS, Series};
use crate::strategy::Strategy;
use crate::workload::{Arrivals, Workload};
use validate::{arrivals, horizon_ms, messages, service, strategy};

/// The most messages a scenario may send.
pub const MAX_MESSAGES: u64 = 1_000_000;
/// The most strategies a scenario may compare.
pub const MAX_STRATEGIES: usize = 16;
/// The most simulated milliseconds a scenario's runs may need, at worst.
pub const MAX_SIMULATED_MS: u64 = 50_000_000;

/// Why a scenario file was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ScenarioError {
    /// The file is not valid TOML for the format (an unknown key, a missing key, a
    /// value of the wrong type); the message names the key and shows the line.
    #[error("the scenario file does not match the format: {0}")]
    Parse(String),
    /// The file parsed, but some values are out of range; one line per problem, each
    /// starting with the key's path.
    #[error("the scenario file has {} problem(s):\n{}", .0.len(), .0.join("\n"))]
    Invalid(Vec<String>),
}

/// A validated scenario, ready to run.
///
/// # Examples
///
/// ```
/// use weir_sim::scenario::Scenario;
///
/// let scenario = Scenario::from_toml(r#"
///     messages = 100
///     arrivals = { process = "constant", interval_ms = 10 }
///     service = { default_ms = 20 }
///     strategies = [{ kind = "reject", capacity = 5 }]
/// "#).unwrap();
/// let run = scenario.run().unwrap();
/// assert_eq!(run.rows[0].outcome.max_depth, 5);
///
/// let err = Scenario::from_toml(r#"
///     messages = 100
///     arrivals = { process = "constant", interval_ms = 10 }
///     service = { default_ms = 0 }
///     strategies = []
/// "#).unwrap_err().to_string();
/// assert!(err.contains("service.default_ms: must be at least 1"));
/// assert!(err.contains("strategies: list at least one strategy"));
/// ```
#[derive(Debug, Clone)]
pub struct Scenario {
    /// The title, if the file has one.
    pub title: Option<String>,
    /// Messages, arrivals and service times.
    pub workload: Workload,
    /// Row names and strategies.
    pub strategies: Vec<(String, Strategy)>,
    horizon_ms: u64,
}

/// One row of a scenario run.
#[derive(Debug, Clone)]
pub struct ScenarioRow {
    /// The row's name.
    pub name: String,
    /// The numbers.
    pub outcome: Outcome,
    /// The time series in 10 ms buckets.
    pub series: Series,
}

/// A scenario's results.
#[derive(Debug, Clone)]
pub struct ScenarioRun {
    /// One row per strategy, in file order.
    pub rows: Vec<ScenarioRow>,
}

impl Scenario {
    /// Parses and validates a scenario file's text.
    ///
    /// # Errors
    ///
    /// [`ScenarioError::Parse`] for TOML or format errors, [`ScenarioError::Invalid`]
    /// with every out-of-range value otherwise.
    pub fn from_toml(text: &str) -> Result<Scenario, ScenarioError> {
        let file: ScenarioFile =
            toml::from_str(text).map_err(|e| ScenarioError::Parse(e.to_string()))?;
        Scenario::from_file(file)
    }

    /// Validates a parsed file.
    ///
    /// # Errors
    ///
    /// [`ScenarioError::Invalid`] listing every problem with its key's path.
    pub fn from_file(file: ScenarioFile) -> Result<Scenario, ScenarioError> {
        let mut problems = Vec::new();
        let arrivals = arrivals(&file.arrivals, &mut problems);
        let service = service(&file.service, &mut problems);
        let messages = messages(&file, &arrivals, &mut problems);
        if file.strategies.is_empty() {
            problems.push("strategies: list at least one strategy, found none".to_owned());
        }
        if file.strategies.len() > MAX_STRATEGIES {
            problems.push(format!(
                "strategies: at most {MAX_STRATEGIES} strategies, found {}",
                file.strategies.len()
            ));
        }
        let strategies: Vec<(String, Strategy)> = file
            .strategies
            .iter()
            .enumerate()
            .filter_map(|(i, s)| strategy(i, s, &mut problems))
            .collect();
        let (Some(arrivals), Some(service), Some(messages)) = (arrivals, service, messages) else {
            return Err(ScenarioError::Invalid(problems));
        };
        let workload = Workload {
            messages,
            arrivals,
            service,
        };
        let horizon_ms = horizon_ms(&workload);
        if horizon_ms > MAX_SIMULATED_MS {
            problems.push(format!(
                "messages: the runs could need up to {horizon_ms} simulated ms, more than the {MAX_SIMULATED_MS} ms allowed; send fewer messages or shorten the service times"
            ));
        }
        if !problems.is_empty() || strategies.len() != file.strategies.len() {
            return Err(ScenarioError::Invalid(problems));
        }
        Ok(Scenario {
            title: file.title,
            workload,
            strategies,
            horizon_ms,
        })
    }

    /// Runs every strategy.
    ///
    /// # Errors
    ///
    /// [`SimError::Stalled`] if a strategy stops making progress (validated limits
    /// prevent it).
    pub fn run(&self) -> Result<ScenarioRun, SimError> {
        let rows = self
            .strategies
            .iter()
            .map(|(name, strategy)| {
                let mut series = Series::new(DEFAULT_BUCKET_MS);
                let mut lane = strategy.lane(name);
                let outcome =
                    engine::run(&self.workload, lane.as_mut(), &mut series, self.horizon_ms)?;
                Ok(ScenarioRow {
                    name: name.clone(),
                    outcome,
                    series,
                })
            })
            .collect::<Result<_, SimError>>()?;
        Ok(ScenarioRun { rows })
    }

    /// The report of a run: a description of the workload, the table, and what was
    /// dropped or superseded (the table has no column for those).
    pub fn report(&self, run: &ScenarioRun) -> String {
        let mut out = String::new();
        if let Some(title) = &self.title {
            let _ = writeln!(out, "{title}");
        }
        let _ = writeln!(
            out,
            "{} messages, {}; service {} ms per message{}.",
            self.workload.messages,
            describe_arrivals(&self.workload.arrivals),
            self.workload.service.default_ms(),
            self.workload
                .service
                .periods()
                .iter()
                .map(|p| format!(
                    ", {} ms from t={} to t={}",
                    p.service_ms,
                    p.from_ms,
                    p.until_ms - 1
                ))
                .collect::<String>()
        );
        out.push_str(&format_table(
            run.rows.iter().map(|r| (r.name.as_str(), &r.outcome)),
        ));
        for row in &run.rows {
            if row.outcome.dropped > 0 || row.outcome.superseded > 0 {
                let _ = writeln!(
                    out,
                    "  {}: {} dropped, {} superseded.",
                    row.name, row.outcome.dropped, row.outcome.superseded
                );
            }
        }
        out
    }

    /// The first period slower than the default, for shading charts.
    pub fn slow_period(&self) -> Option<(u64, u64)> {
        let default_ms = self.workload.service.default_ms();
        self.workload
            .service
            .periods()
            .iter()
            .find(|p| p.service_ms.get() > default_ms)
            .map(|p| (p.from_ms, p.until_ms))
    }
}

fn describe_arrivals(arrivals: &Arrivals) -> String {
    match arrivals {
        Arrivals::Constant { interval_ms } => format!("one every {interval_ms} ms"),
        Arrivals::Poisson {
            mean_interval_ms,
            seed,
        } => format!("Poisson arrivals, one every {mean_interval_ms} ms on average (seed {seed})"),
        Arrivals::Bursts { size, every_ms } => format!("bursts of {size} every {every_ms} ms"),
    }
}
