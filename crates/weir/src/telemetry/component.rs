//! Components and their states: what `/status` and `weir_component_state` report.

use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Instant, SystemTime};

/// What part of the pipeline a component is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum ComponentKind {
    /// A source (`[sources.NAME]`).
    Source,
    /// The write-ahead log.
    Wal,
    /// A sink (`[sinks.NAME]`).
    Sink,
    /// The runtime itself (telemetry server, shutdown).
    Runtime,
}

impl ComponentKind {
    /// The lower-case name used in labels and JSON.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Source => "source",
            Self::Wal => "wal",
            Self::Sink => "sink",
            Self::Runtime => "runtime",
        }
    }
}

/// A component's state. `Paused` and `Backpressured` are where the backpressure wave
/// is: a paused component stopped taking work on purpose (a watermark, withheld
/// credits), a backpressured one is waiting on a full queue or budget downstream.
/// `Degraded` is a component that keeps moving records but loses some on the way (its
/// quarantine is full): see [`Component::set_degraded`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum State {
    /// Starting up (recovering the WAL, connecting).
    Starting,
    /// Moving records.
    Running,
    /// Deliberately not taking work (pause watermark, no credits).
    Paused,
    /// Waiting on a full queue or budget downstream.
    Backpressured,
    /// Moving records but dropping some; the reason says which and what to do.
    Degraded(String),
    /// Failed; the reason says why and what to do.
    Failed(String),
    /// Stopped (shutdown).
    Stopped,
}

impl State {
    /// Every state's name, in the order the `weir_component_state` gauges list them.
    pub const NAMES: [&'static str; 7] = [
        "starting",
        "running",
        "paused",
        "backpressured",
        "degraded",
        "failed",
        "stopped",
    ];

    /// The lower-case name used in labels and JSON.
    pub fn as_str(&self) -> &'static str {
        match self {
            Self::Starting => "starting",
            Self::Running => "running",
            Self::Paused => "paused",
            Self::Backpressured => "backpressured",
            Self::Degraded(_) => "degraded",
            Self::Failed(_) => "failed",
            Self::Stopped => "stopped",
        }
    }

    /// The reason, for `Degraded` and `Failed`.
    pub fn reason(&self) -> Option<&str> {
        match self {
            Self::Degraded(reason) | Self::Failed(reason) => Some(reason),
            _ => None,
        }
    }
}

/// A state and since when it holds.
#[derive(Debug, Clone)]
pub(super) struct Since {
    pub(super) state: State,
    pub(super) since: SystemTime,
    pub(super) since_instant: Instant,
}

#[derive(Debug)]
pub(super) struct ComponentCell {
    pub(super) kind: ComponentKind,
    pub(super) name: String,
    /// The state its code sets ([`Component::set_state`]).
    pub(super) state: Mutex<Since>,
    /// Set apart from the state, so that the code that moves records can keep setting
    /// `running` and `backpressured` while it holds: a [`State::Degraded`] or nothing.
    pub(super) degraded: Mutex<Option<Since>>,
}

impl ComponentCell {
    pub(super) fn new(kind: ComponentKind, name: &str) -> Self {
        Self {
            kind,
            name: name.to_owned(),
            state: Mutex::new(Since {
                state: State::Starting,
                since: SystemTime::now(),
                since_instant: Instant::now(),
            }),
            degraded: Mutex::new(None),
        }
    }

    /// The state reported: degraded, when it is, unless the component failed or
    /// stopped.
    pub(super) fn snapshot(&self) -> Since {
        let state = lock(&self.state).clone();
        match (&state.state, &*lock(&self.degraded)) {
            (State::Failed(_) | State::Stopped, _) | (_, None) => state,
            (_, Some(degraded)) => degraded.clone(),
        }
    }
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

/// A handle on one component's state, from [`Telemetry::component`]. Clones share the
/// state.
///
/// [`Telemetry::component`]: super::Telemetry::component
#[derive(Debug, Clone)]
pub struct Component {
    pub(super) cell: Arc<ComponentCell>,
}

impl Component {
    /// Sets the state. The time it was entered ("since") changes only when the state
    /// does, so setting `Running` on every batch keeps the time it started running.
    pub fn set_state(&self, state: State) {
        let mut current = lock(&self.cell.state);
        if current.state != state {
            *current = Since {
                state,
                since: SystemTime::now(),
                since_instant: Instant::now(),
            };
        }
    }

    /// The state reported: [`State::Degraded`] while [`set_degraded`](Self::set_degraded)
    /// holds (unless it failed or stopped), else the one last set.
    pub fn state(&self) -> State {
        self.cell.snapshot().state
    }

    /// The state last set with [`set_state`](Self::set_state), degraded or not: what
    /// the code that moves records reasons about.
    pub fn flow_state(&self) -> State {
        lock(&self.cell.state).state.clone()
    }

    /// Marks the component degraded for `reason` (it keeps its flow state, reported
    /// again once [`clear_degraded`](Self::clear_degraded) is called). The time it
    /// became degraded is kept while the reason changes.
    pub fn set_degraded(&self, reason: &str) {
        let mut degraded = lock(&self.cell.degraded);
        match &mut *degraded {
            Some(Since {
                state: State::Degraded(current),
                ..
            }) if current == reason => {}
            Some(since) => since.state = State::Degraded(reason.to_owned()),
            None => {
                *degraded = Some(Since {
                    state: State::Degraded(reason.to_owned()),
                    since: SystemTime::now(),
                    since_instant: Instant::now(),
                });
            }
        }
    }

    /// Ends [`set_degraded`](Self::set_degraded): the flow state is reported again.
    pub fn clear_degraded(&self) {
        lock(&self.cell.degraded).take();
    }

    /// Whether [`set_degraded`](Self::set_degraded) holds.
    pub fn is_degraded(&self) -> bool {
        lock(&self.cell.degraded).is_some()
    }

    /// The component's name.
    pub fn name(&self) -> &str {
        &self.cell.name
    }

    /// The component's kind.
    pub fn kind(&self) -> ComponentKind {
        self.cell.kind
    }
}
