//! The virtual clock: whole milliseconds that only move forward.

use weir_flow::Timestamp;

/// A virtual clock in whole milliseconds. Nothing in the simulator reads a real clock.
///
/// # Examples
///
/// ```
/// use weir_sim::VirtualClock;
///
/// let mut clock = VirtualClock::new();
/// clock.advance_to(20);
/// assert_eq!(clock.now_ms(), 20);
/// assert_eq!(clock.now().as_millis(), 20);
/// ```
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct VirtualClock {
    now_ms: u64,
}

impl VirtualClock {
    /// A clock at t=0.
    pub fn new() -> Self {
        VirtualClock { now_ms: 0 }
    }

    /// The current millisecond.
    pub fn now_ms(&self) -> u64 {
        self.now_ms
    }

    /// The current time as the `weir-flow` cores take it.
    pub fn now(&self) -> Timestamp {
        Timestamp::from_millis(self.now_ms)
    }

    /// Moves the clock to `ms`.
    ///
    /// # Panics
    ///
    /// If `ms` is earlier than now: time never goes backwards, and a caller that asks it
    /// to has a bug.
    pub fn advance_to(&mut self, ms: u64) {
        assert!(
            ms >= self.now_ms,
            "the virtual clock cannot go back from {} ms to {ms} ms",
            self.now_ms
        );
        self.now_ms = ms;
    }
}
