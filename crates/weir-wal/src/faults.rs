//! Injected I/O failures: what the log does when its disk fails, tested without a
//! failing disk.
//!
//! The writer asks an [`IoFaults`] before each of its I/O steps ([`IoStep`]) whether
//! the step fails, and with which error. Nothing is asked unless
//! [`WalConfigBuilder::io_faults`](crate::WalConfigBuilder::io_faults) set one: a log
//! in production pays one `Option` check per step. [`FaultPlan`] is the ready-made
//! one: each armed fault fires once, at the next step of its kind.
//!
//! What the log does with each failure is its contract (see the crate docs): a lack of
//! space, inodes or file descriptors (`ENOSPC`, `EDQUOT`, `EMFILE`, `ENFILE`) while
//! writing or creating a segment is a refusal under `on_full` and never poisons; any
//! other failure of a write or create, and any failed fsync, poisons the log.

use std::collections::VecDeque;
use std::io;
use std::sync::Mutex;

/// An I/O step of the writer where a failure can be injected.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum IoStep {
    /// Creating the next segment file at rotation (the file is not created).
    CreateSegment,
    /// Writing batches to the active segment. The failure comes after half of the first
    /// batch's bytes reached the file, as a disk filling up in mid-write does.
    Write,
    /// The fsync of the active segment.
    Fsync,
}

/// Decides, before each [`IoStep`], whether it fails.
pub trait IoFaults: Send + Sync + std::fmt::Debug {
    /// The error `step` fails with, or `None` to let it run.
    fn fail(&self, step: IoStep) -> Option<io::Error>;
}

/// Faults armed in advance, each firing once at the next step of its kind, in the order
/// they were armed; it remembers which fired.
#[derive(Debug, Default)]
pub struct FaultPlan {
    state: Mutex<PlanState>,
}

#[derive(Debug, Default)]
struct PlanState {
    armed: VecDeque<(IoStep, i32)>,
    fired: Vec<(IoStep, i32)>,
}

impl FaultPlan {
    /// An empty plan: nothing fails.
    pub fn new() -> Self {
        Self::default()
    }

    /// Makes the next `step` (after those already armed for it) fail with the OS error
    /// `errno` (e.g. `libc`'s `ENOSPC` = 28, `EMFILE` = 24, `EIO` = 5).
    pub fn arm(&self, step: IoStep, errno: i32) {
        self.lock().armed.push_back((step, errno));
    }

    /// Forgets the faults that have not fired.
    pub fn disarm(&self) {
        self.lock().armed.clear();
    }

    /// The faults that fired, in order, and forgets them.
    pub fn take_fired(&self) -> Vec<(IoStep, i32)> {
        std::mem::take(&mut self.lock().fired)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, PlanState> {
        self.state
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

impl IoFaults for FaultPlan {
    fn fail(&self, step: IoStep) -> Option<io::Error> {
        let mut state = self.lock();
        let at = state.armed.iter().position(|(s, _)| *s == step)?;
        let fault = state.armed.remove(at)?;
        state.fired.push(fault);
        Some(io::Error::from_raw_os_error(fault.1))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_armed_fault_fires_once_at_its_own_step() {
        let plan = FaultPlan::new();
        plan.arm(IoStep::Fsync, 5);
        plan.arm(IoStep::Write, 28);
        plan.arm(IoStep::Write, 5);
        assert!(plan.fail(IoStep::CreateSegment).is_none());
        assert_eq!(plan.fail(IoStep::Write).unwrap().raw_os_error(), Some(28));
        assert_eq!(plan.fail(IoStep::Write).unwrap().raw_os_error(), Some(5));
        assert!(plan.fail(IoStep::Write).is_none());
        assert_eq!(
            plan.take_fired(),
            vec![(IoStep::Write, 28), (IoStep::Write, 5)]
        );
        plan.disarm();
        assert!(plan.fail(IoStep::Fsync).is_none());
        assert!(plan.take_fired().is_empty());
    }
}
