//! The scenario file format (TOML): what a user writes for `weir lab run FILE.toml`.

use serde::Deserialize;

/// A whole scenario file.
///
/// ```toml
/// title = "Bursts against a slow consumer"
/// messages = 1000            # or duration_ms = 60000 (one of the two)
///
/// [arrivals]
/// process = "bursts"         # constant | poisson | bursts
/// size = 40
/// every_ms = 400
///
/// [service]
/// default_ms = 8
/// periods = [{ from_ms = 2000, until_ms = 4000, service_ms = 25 }]
///
/// [[strategies]]
/// kind = "reject"            # unbounded | reject | drop_newest | drop_oldest | expire
/// capacity = 50              # | block | credit | latest_per_key | adaptive_credit
/// ```
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ScenarioFile {
    /// A title printed above the table.
    pub title: Option<String>,
    /// How many messages the producer sends.
    pub messages: Option<u64>,
    /// Or: the producer sends every message its undisturbed schedule makes due before
    /// this many milliseconds.
    pub duration_ms: Option<u64>,
    /// When messages arrive.
    pub arrivals: ArrivalsFile,
    /// How long the consumer needs per message.
    pub service: ServiceFile,
    /// The strategies to compare, one table row each.
    pub strategies: Vec<StrategyFile>,
}

/// `[arrivals]`: the arrival process. Which keys apply depends on `process`:
/// `constant` takes `interval_ms`; `poisson` takes `mean_interval_ms` and `seed`;
/// `bursts` takes `size` and `every_ms`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ArrivalsFile {
    /// The kind of process.
    pub process: ProcessKind,
    /// `constant`: milliseconds between messages.
    pub interval_ms: Option<u64>,
    /// `poisson`: mean milliseconds between messages.
    pub mean_interval_ms: Option<f64>,
    /// `poisson`: seed of the gaps (the same seed gives the same run).
    pub seed: Option<u64>,
    /// `bursts`: messages per burst.
    pub size: Option<u64>,
    /// `bursts`: milliseconds from one burst to the next.
    pub every_ms: Option<u64>,
}

/// The arrival processes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ProcessKind {
    /// One message every `interval_ms`.
    Constant,
    /// Exponential gaps, seeded.
    Poisson,
    /// `size` messages at once, every `every_ms`.
    Bursts,
}

/// `[service]`: a piecewise service-time schedule.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ServiceFile {
    /// Service time outside every period.
    pub default_ms: u64,
    /// Periods with another service time, for services starting in `[from_ms, until_ms)`.
    #[serde(default)]
    pub periods: Vec<PeriodFile>,
}

/// One `[[service.periods]]` entry.
#[derive(Debug, Clone, Copy, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PeriodFile {
    /// First millisecond of the period.
    pub from_ms: u64,
    /// First millisecond after it.
    pub until_ms: u64,
    /// Service time of a message whose service starts in the period.
    pub service_ms: u64,
}

/// One `[[strategies]]` entry: `kind` and the limits it takes.
///
/// | kind | limits |
/// |---|---|
/// | `unbounded` | — |
/// | `reject`, `drop_newest`, `drop_oldest`, `block` | `capacity` |
/// | `expire` | `deadline_ms` |
/// | `credit` | `window` |
/// | `latest_per_key` | `keys` |
/// | `adaptive_credit` | `window`, `target_age_ms` |
///
/// Every kind takes an optional `name` for its row.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StrategyFile {
    /// The strategy.
    pub kind: StrategyKind,
    /// The row's name (default: the kind and its limits).
    pub name: Option<String>,
    /// Most messages waiting.
    pub capacity: Option<u64>,
    /// The age above which `expire` discards a message.
    pub deadline_ms: Option<u64>,
    /// The credit window (the largest one for `adaptive_credit`).
    pub window: Option<u64>,
    /// Distinct keys of `latest_per_key` (key = message index mod keys).
    pub keys: Option<u64>,
    /// The oldest-message age `adaptive_credit` steers towards.
    pub target_age_ms: Option<u64>,
}

/// The strategies a scenario can compare.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum StrategyKind {
    /// An unbounded queue.
    Unbounded,
    /// A bounded queue that refuses when full.
    Reject,
    /// A bounded queue that drops the incoming message when full.
    DropNewest,
    /// A bounded queue that evicts the oldest message when full.
    DropOldest,
    /// Discard messages older than the deadline at each pick.
    Expire,
    /// A bounded queue whose producer waits for room.
    Block,
    /// Reactive Streams credits.
    Credit,
    /// One waiting message per key.
    LatestPerKey,
    /// Credits with an age-steered window.
    AdaptiveCredit,
}

impl StrategyKind {
    /// The kind as the file spells it.
    pub fn as_str(self) -> &'static str {
        match self {
            StrategyKind::Unbounded => "unbounded",
            StrategyKind::Reject => "reject",
            StrategyKind::DropNewest => "drop_newest",
            StrategyKind::DropOldest => "drop_oldest",
            StrategyKind::Expire => "expire",
            StrategyKind::Block => "block",
            StrategyKind::Credit => "credit",
            StrategyKind::LatestPerKey => "latest_per_key",
            StrategyKind::AdaptiveCredit => "adaptive_credit",
        }
    }
}
