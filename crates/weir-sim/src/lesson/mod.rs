//! The backpressure lesson's lab (seed 000): Part 1, Part 2 and the Part 3 demand-rule
//! traces, followed by the two rows the lesson leaves as a stretch.

mod trace;

use std::fmt::Write as _;
use std::num::NonZeroU64;

pub use trace::part3;

use crate::engine::{self, Outcome};
use crate::error::SimError;
use crate::report::format_table;
use crate::series::{DEFAULT_BUCKET_MS, Series};
use crate::strategy::Strategy;
use crate::workload::{Arrivals, ServicePeriod, ServiceSchedule, Workload};

/// Messages the lesson's producer sends.
pub const MESSAGES: u64 = 600;
/// Milliseconds between the lesson's messages.
pub const INTERVAL_MS: u64 = 10;
/// The consumer's normal service time.
pub const FAST_SERVICE_MS: u64 = 5;
/// The consumer's service time in the slow period.
pub const SLOW_SERVICE_MS: u64 = 20;
/// First millisecond of the slow period.
pub const SLOW_FROM_MS: u64 = 2_000;
/// Last millisecond of the slow period.
pub const SLOW_LAST_MS: u64 = 5_999;

/// No lesson run takes longer than this; a strategy that does has stalled.
const HORIZON_MS: u64 = 10_000_000;

/// The limits of the lesson's strategies (`--capacity`, `--deadline`, `--window`,
/// `--keys`).
///
/// # Examples
///
/// ```
/// use weir_sim::lesson::Limits;
///
/// let limits = Limits::default();
/// assert_eq!((limits.capacity.get(), limits.deadline_ms, limits.window.get(), limits.keys.get()), (50, 500, 10, 20));
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Capacity of the bounded queues, in waiting messages.
    pub capacity: NonZeroU64,
    /// The age above which "drop if too old" discards a message.
    pub deadline_ms: u64,
    /// The credit window.
    pub window: NonZeroU64,
    /// Distinct keys of "latest per key".
    pub keys: NonZeroU64,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            capacity: NonZeroU64::MIN.saturating_add(49),
            deadline_ms: 500,
            window: NonZeroU64::MIN.saturating_add(9),
            keys: NonZeroU64::MIN.saturating_add(19),
        }
    }
}

impl Limits {
    /// The lesson's seven rows, in order: its five strategies, then `latest per key` and
    /// `adaptive credit`.
    pub fn rows(&self) -> [(&'static str, Strategy); 7] {
        [
            ("unbounded queue", Strategy::Unbounded),
            (
                "bounded, reject",
                Strategy::Reject {
                    capacity: self.capacity,
                },
            ),
            (
                "drop if too old",
                Strategy::Expire {
                    deadline_ms: self.deadline_ms,
                },
            ),
            (
                "bounded, block",
                Strategy::Block {
                    capacity: self.capacity,
                },
            ),
            (
                "credit (Flow)",
                Strategy::Credit {
                    window: self.window,
                },
            ),
            ("latest per key", Strategy::LatestPerKey { keys: self.keys }),
            (
                "adaptive credit",
                Strategy::AdaptiveCredit {
                    window: self.window,
                    target_age_ms: self.adaptive_target_age_ms(),
                },
            ),
        ]
    }

    /// The oldest-message age the adaptive window aims for: a fifth of the deadline.
    pub fn adaptive_target_age_ms(&self) -> u64 {
        self.deadline_ms / 5
    }
}

/// The lesson's workload: 600 messages, one every 10 ms; 5 ms per message, and 20 ms for
/// services that start in t=2000..=5999 when `slow` is set.
pub fn workload(slow: bool) -> Workload {
    let fast = NonZeroU64::MIN.saturating_add(FAST_SERVICE_MS - 1);
    let mut service = ServiceSchedule::new(fast);
    if slow {
        service = service.with_period(ServicePeriod {
            from_ms: SLOW_FROM_MS,
            until_ms: SLOW_LAST_MS + 1,
            service_ms: NonZeroU64::MIN.saturating_add(SLOW_SERVICE_MS - 1),
        });
    }
    Workload {
        messages: MESSAGES,
        arrivals: Arrivals::Constant {
            interval_ms: INTERVAL_MS,
        },
        service,
    }
}

/// One row of a part: the strategy, its outcome and its time series.
#[derive(Debug, Clone)]
pub struct Row {
    /// The row's name in the table.
    pub name: &'static str,
    /// The strategy and its limits.
    pub strategy: Strategy,
    /// The numbers of the row.
    pub outcome: Outcome,
    /// The run's time series in 10 ms buckets.
    pub series: Series,
    /// The strategy's remark about the run, if any.
    pub note: Option<String>,
}

/// Part 1 (slow consumer) and Part 2 (healthy consumer), seven rows each.
///
/// # Examples
///
/// ```
/// use weir_sim::lesson::{Lesson, Limits};
///
/// let lesson = Lesson::run(Limits::default()).unwrap();
/// let credit = &lesson.slow[4];
/// assert_eq!(credit.name, "credit (Flow)");
/// assert_eq!((credit.outcome.max_depth, credit.outcome.max_queue_wait_ms), (10, 180));
/// assert!(lesson.report().starts_with("Backpressure lab."));
/// ```
#[derive(Debug, Clone)]
pub struct Lesson {
    /// The limits the rows ran with.
    pub limits: Limits,
    /// Part 1: the consumer is slow from t=2000 to t=5999.
    pub slow: Vec<Row>,
    /// Part 2: the consumer keeps up.
    pub healthy: Vec<Row>,
}

impl Lesson {
    /// Runs every row of both parts.
    ///
    /// # Errors
    ///
    /// [`SimError::Stalled`] if a strategy stops making progress.
    pub fn run(limits: Limits) -> Result<Lesson, SimError> {
        Ok(Lesson {
            limits,
            slow: run_part(&limits, true)?,
            healthy: run_part(&limits, false)?,
        })
    }

    /// The whole report, as `weir lab` prints it.
    pub fn report(&self) -> String {
        let mut out = String::new();
        let _ = writeln!(
            out,
            "Backpressure lab. All times are simulated milliseconds; nothing here reads a real clock."
        );
        let _ = writeln!(
            out,
            "A producer offers {MESSAGES} messages, one every {INTERVAL_MS} ms. A consumer handles one message at a time."
        );
        let _ = writeln!(
            out,
            "Limits: queue capacity {}, deadline {} ms, credit window {}.",
            self.limits.capacity, self.limits.deadline_ms, self.limits.window
        );
        out.push('\n');
        let _ = writeln!(
            out,
            "Part 1. Slow consumer: {FAST_SERVICE_MS} ms per message, but {SLOW_SERVICE_MS} ms per message from t={SLOW_FROM_MS} to t={SLOW_LAST_MS} (offered load {}/s, slow capacity {}/s).",
            1_000 / INTERVAL_MS,
            1_000 / SLOW_SERVICE_MS
        );
        out.push_str(&table(&self.slow));
        out.push_str(&self.notes(&self.slow));
        out.push('\n');
        let _ = writeln!(
            out,
            "Part 2. Healthy consumer: {FAST_SERVICE_MS} ms per message all the time (capacity {}/s). The limits should never bite.",
            1_000 / FAST_SERVICE_MS
        );
        out.push_str(&table(&self.healthy));
        out.push_str(&self.notes(&self.healthy));
        out.push('\n');
        out.push_str(&part3());
        out
    }

    /// The lines under a table about the two rows the lesson does not have: how many
    /// messages were superseded (the layout has no column for it), and the strategies'
    /// remarks.
    fn notes(&self, rows: &[Row]) -> String {
        let superseded = |latest: bool| -> u64 {
            rows.iter()
                .filter(|r| matches!(r.strategy, Strategy::LatestPerKey { .. }) == latest)
                .map(|r| r.outcome.superseded)
                .sum()
        };
        let mut out = String::new();
        let _ = writeln!(
            out,
            "  superseded: latest per key {} (key = message index mod {}; a newer message replaces the waiting one of its key), every other row {}.",
            superseded(true),
            self.limits.keys,
            superseded(false),
        );
        for row in rows {
            if let Some(note) = &row.note {
                let _ = writeln!(out, "  {}: {note}.", row.name);
            }
        }
        out
    }
}

fn table(rows: &[Row]) -> String {
    format_table(rows.iter().map(|r| (r.name, &r.outcome)))
}

fn run_part(limits: &Limits, slow: bool) -> Result<Vec<Row>, SimError> {
    let workload = workload(slow);
    limits
        .rows()
        .into_iter()
        .map(|(name, strategy)| {
            let mut series = Series::new(DEFAULT_BUCKET_MS);
            let mut lane = strategy.lane(name);
            let outcome = engine::run(&workload, lane.as_mut(), &mut series, HORIZON_MS)?;
            Ok(Row {
                name,
                strategy,
                outcome,
                series,
                note: lane.note(),
            })
        })
        .collect()
}
