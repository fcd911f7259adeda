//! Validation of a parsed scenario file: every problem is collected with its key's path.

use std::num::NonZeroU64;

use super::MAX_MESSAGES;
use super::file::{
    ArrivalsFile, ProcessKind, ScenarioFile, ServiceFile, StrategyFile, StrategyKind,
};
use crate::strategy::Strategy;
use crate::workload::{ArrivalGaps, Arrivals, ServicePeriod, ServiceSchedule, Workload};

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

pub(super) fn arrivals(file: &ArrivalsFile, problems: &mut Vec<String>) -> Option<Arrivals> {
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

pub(super) fn service(file: &ServiceFile, problems: &mut Vec<String>) -> Option<ServiceSchedule> {
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

pub(super) fn messages(
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
pub(super) fn horizon_ms(workload: &Workload) -> u64 {
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

pub(super) fn strategy(
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
