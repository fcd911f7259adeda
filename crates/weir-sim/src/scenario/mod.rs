//! `weir lab run FILE.toml`: a user's own scenario — arrival process, service-time
//! schedule, strategies and their limits — run on the same engine and cores as the
//! lesson.
//!
//! The format is [`ScenarioFile`]; unknown keys are errors, and every problem is
//! reported with the key's path (`strategies[1].capacity: ...`).

mod file;

use std::fmt::Write as _;
use std::num::NonZeroU64;

pub use file::{
    ArrivalsFile, PeriodFile, ProcessKind, ScenarioFile, ServiceFile, StrategyFile, StrategyKind,
};

use crate::engine::{self, Outcome};
use crate::error::SimError;
use crate::report::format_table;
use crate::series::{DEFAULT_BUCKET_MS, Series};
use crate::strategy::Strategy;
use crate::workload::{ArrivalGaps, Arrivals, ServicePeriod, ServiceSchedule, Workload};

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

/// Reads the keys of one table for its kind: each required key must be there, and
/// keys the kind does not take must not.
struct Keys<'a> {
    path: String,
    kind: &'a str,
    problems: &'a mut Vec<String>,
}

impl Keys<'_> {
    fn required<T: Copy>(&mut self, key: &str, value: Option<T>) -> Option<T> {
        if value.is_none() {
            self.problems.push(format!(
                "{}.{key}: required by {} = \"{}\", missing",
                self.path,
                if self.path == "arrivals" {
                    "process"
                } else {
                    "kind"
                },
                self.kind
            ));
        }
        value
    }

    fn unused<T>(&mut self, key: &str, value: &Option<T>) {
        if value.is_some() {
            self.problems.push(format!(
                "{}.{key}: not used by {} = \"{}\"; remove it",
                self.path,
                if self.path == "arrivals" {
                    "process"
                } else {
                    "kind"
                },
                self.kind
            ));
        }
    }

    fn at_least_one(&mut self, key: &str, value: Option<u64>) -> Option<NonZeroU64> {
        let value = self.required(key, value)?;
        let nonzero = NonZeroU64::new(value);
        if nonzero.is_none() {
            self.problems
                .push(format!("{}.{key}: must be at least 1, found 0", self.path));
        }
        nonzero
    }
}

fn arrivals(file: &ArrivalsFile, problems: &mut Vec<String>) -> Option<Arrivals> {
    let kind = match file.process {
        ProcessKind::Constant => "constant",
        ProcessKind::Poisson => "poisson",
        ProcessKind::Bursts => "bursts",
    };
    let mut keys = Keys {
        path: "arrivals".to_owned(),
        kind,
        problems,
    };
    let constant = file.process == ProcessKind::Constant;
    let poisson = file.process == ProcessKind::Poisson;
    let bursts = file.process == ProcessKind::Bursts;
    if !constant {
        keys.unused("interval_ms", &file.interval_ms);
    }
    if !poisson {
        keys.unused("mean_interval_ms", &file.mean_interval_ms);
        keys.unused("seed", &file.seed);
    }
    if !bursts {
        keys.unused("size", &file.size);
        keys.unused("every_ms", &file.every_ms);
    }
    match file.process {
        ProcessKind::Constant => Some(Arrivals::Constant {
            interval_ms: keys.required("interval_ms", file.interval_ms)?,
        }),
        ProcessKind::Poisson => {
            let mean = keys.required("mean_interval_ms", file.mean_interval_ms);
            let seed = keys.required("seed", file.seed);
            let mean_interval_ms = mean?;
            if !(mean_interval_ms.is_finite() && mean_interval_ms > 0.0) {
                keys.problems.push(format!(
                    "arrivals.mean_interval_ms: must be a positive number of milliseconds, found {mean_interval_ms}"
                ));
                return None;
            }
            Some(Arrivals::Poisson {
                mean_interval_ms,
                seed: seed?,
            })
        }
        ProcessKind::Bursts => {
            let size = keys.at_least_one("size", file.size);
            let every_ms = keys.required("every_ms", file.every_ms);
            Some(Arrivals::Bursts {
                size: size?.get(),
                every_ms: every_ms?,
            })
        }
    }
}

fn service(file: &ServiceFile, problems: &mut Vec<String>) -> Option<ServiceSchedule> {
    let Some(default_ms) = NonZeroU64::new(file.default_ms) else {
        problems.push("service.default_ms: must be at least 1, found 0".to_owned());
        return None;
    };
    let mut schedule = ServiceSchedule::new(default_ms);
    let mut ok = true;
    for (i, p) in file.periods.iter().enumerate() {
        if p.until_ms <= p.from_ms {
            problems.push(format!(
                "service.periods[{i}].until_ms: must be after from_ms ({}), found {}",
                p.from_ms, p.until_ms
            ));
            ok = false;
        }
        match NonZeroU64::new(p.service_ms) {
            Some(service_ms) => {
                schedule = schedule.with_period(ServicePeriod {
                    from_ms: p.from_ms,
                    until_ms: p.until_ms,
                    service_ms,
                });
            }
            None => {
                problems.push(format!(
                    "service.periods[{i}].service_ms: must be at least 1, found 0"
                ));
                ok = false;
            }
        }
    }
    ok.then_some(schedule)
}

fn messages(
    file: &ScenarioFile,
    arrivals: &Option<Arrivals>,
    problems: &mut Vec<String>,
) -> Option<u64> {
    let messages = match (file.messages, file.duration_ms) {
        (Some(_), Some(_)) => {
            problems.push(
                "messages, duration_ms: set one of them, found both (messages counts messages; duration_ms sends what arrives before it)".to_owned(),
            );
            return None;
        }
        (None, None) => {
            problems.push("messages, duration_ms: set one of them, found neither".to_owned());
            return None;
        }
        (Some(messages), None) => messages,
        (None, Some(duration_ms)) => count_before(arrivals.as_ref()?, duration_ms),
    };
    let key = if file.messages.is_some() {
        "messages"
    } else {
        "duration_ms"
    };
    if messages == 0 || messages > MAX_MESSAGES {
        problems.push(format!(
            "{key}: must make between 1 and {MAX_MESSAGES} messages, found {messages}{}",
            if messages > MAX_MESSAGES {
                " or more"
            } else {
                ""
            }
        ));
        return None;
    }
    Some(messages)
}

/// How many messages the undisturbed schedule makes due before `duration_ms` (counting
/// stops just above [`MAX_MESSAGES`]).
fn count_before(arrivals: &Arrivals, duration_ms: u64) -> u64 {
    let mut gaps = ArrivalGaps::new(arrivals);
    let mut due_ms = 0u64;
    let mut count = 0;
    while due_ms < duration_ms && count <= MAX_MESSAGES {
        count += 1;
        due_ms = due_ms.saturating_add(gaps.next_gap_ms());
    }
    count
}

/// A bound on how long any strategy's run can take: every message's gap plus every
/// message served at the slowest service time.
fn horizon_ms(workload: &Workload) -> u64 {
    let slowest = workload
        .service
        .periods()
        .iter()
        .map(|p| p.service_ms.get())
        .chain([workload.service.default_ms()])
        .max()
        .unwrap_or(1);
    let mut gaps = ArrivalGaps::new(&workload.arrivals);
    let arrivals_ms =
        (0..workload.messages).fold(0u64, |sum, _| sum.saturating_add(gaps.next_gap_ms()));
    arrivals_ms
        .saturating_add(workload.messages.saturating_mul(slowest))
        .saturating_add(1)
}

fn strategy(
    index: usize,
    file: &StrategyFile,
    problems: &mut Vec<String>,
) -> Option<(String, Strategy)> {
    use StrategyKind as K;
    let mut keys = Keys {
        path: format!("strategies[{index}]"),
        kind: file.kind.as_str(),
        problems,
    };
    let takes_capacity = matches!(
        file.kind,
        K::Reject | K::DropNewest | K::DropOldest | K::Block
    );
    if !takes_capacity {
        keys.unused("capacity", &file.capacity);
    }
    if file.kind != K::Expire {
        keys.unused("deadline_ms", &file.deadline_ms);
    }
    if !matches!(file.kind, K::Credit | K::AdaptiveCredit) {
        keys.unused("window", &file.window);
    }
    if file.kind != K::LatestPerKey {
        keys.unused("keys", &file.keys);
    }
    if file.kind != K::AdaptiveCredit {
        keys.unused("target_age_ms", &file.target_age_ms);
    }
    let strategy = match file.kind {
        K::Unbounded => Strategy::Unbounded,
        K::Reject => Strategy::Reject {
            capacity: keys.at_least_one("capacity", file.capacity)?,
        },
        K::DropNewest => Strategy::DropNewest {
            capacity: keys.at_least_one("capacity", file.capacity)?,
        },
        K::DropOldest => Strategy::DropOldest {
            capacity: keys.at_least_one("capacity", file.capacity)?,
        },
        K::Block => Strategy::Block {
            capacity: keys.at_least_one("capacity", file.capacity)?,
        },
        K::Expire => Strategy::Expire {
            deadline_ms: keys.required("deadline_ms", file.deadline_ms)?,
        },
        K::Credit => Strategy::Credit {
            window: keys.at_least_one("window", file.window)?,
        },
        K::LatestPerKey => Strategy::LatestPerKey {
            keys: keys.at_least_one("keys", file.keys)?,
        },
        K::AdaptiveCredit => {
            let window = keys.at_least_one("window", file.window);
            let target = keys.at_least_one("target_age_ms", file.target_age_ms);
            Strategy::AdaptiveCredit {
                window: window?,
                target_age_ms: target?.get(),
            }
        }
    };
    let name = file.name.clone().unwrap_or_else(|| strategy.describe());
    Some((name, strategy))
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
