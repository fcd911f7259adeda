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
    /// Failed; the reason says why and what to do.
    Failed(String),
    /// Stopped (shutdown).
    Stopped,
}

impl State {
    /// Every state's name, in the order the `weir_component_state` gauges list them.
    pub const NAMES: [&'static str; 6] = [
        "starting",
        "running",
        "paused",
        "backpressured",
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
            Self::Failed(_) => "failed",
            Self::Stopped => "stopped",
        }
    }

    /// The failure reason, for `Failed`.
    pub fn reason(&self) -> Option<&str> {
        match self {
            Self::Failed(reason) => Some(reason),
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
    pub(super) state: Mutex<Since>,
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
        }
    }

    pub(super) fn snapshot(&self) -> Since {
        self.state
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }
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
        let mut current = self
            .cell
            .state
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        if current.state != state {
            *current = Since {
                state,
                since: SystemTime::now(),
                since_instant: Instant::now(),
            };
        }
    }

    /// The current state.
    pub fn state(&self) -> State {
        self.cell.snapshot().state
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
