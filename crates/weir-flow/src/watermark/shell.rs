//! A shared watermark controller that producers can wait on.

use std::sync::PoisonError;
use std::time::Duration;

use tokio::sync::watch;

use super::core::{Transition, Watermark};
use crate::Clock;
use crate::sync::{Arc, Mutex};

/// A [`Watermark`] shared between the side that sees the depth (the consumer) and the
/// side that must stop (the producer), on tokio's clock.
///
/// The consumer calls [`observe`](Self::observe) with the depth; a producer that can
/// simply wait calls [`wait_running`](Self::wait_running) before producing more.
/// Clones share the same controller.
///
/// # Examples
///
/// ```
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() {
/// use weir_flow::watermark::{Transition, Watermark, WatermarkGate};
///
/// let gate = WatermarkGate::new(Watermark::new(400, 1600).unwrap());
/// assert_eq!(gate.observe(1_600), Some(Transition::Pause));
/// let producer = {
///     let gate = gate.clone();
///     tokio::spawn(async move { gate.wait_running().await })
/// };
/// assert_eq!(gate.observe(400), Some(Transition::Resume));
/// producer.await.unwrap();
/// # }
/// ```
#[derive(Debug, Clone)]
pub struct WatermarkGate {
    shared: Arc<Shared>,
}

#[derive(Debug)]
struct Shared {
    watermark: Mutex<Watermark>,
    paused: watch::Sender<bool>,
    clock: Clock,
}

impl WatermarkGate {
    /// Wraps `watermark`, whose current state (paused or running) is kept.
    pub fn new(watermark: Watermark) -> Self {
        let (paused, _) = watch::channel(watermark.is_paused());
        WatermarkGate {
            shared: Arc::new(Shared {
                watermark: Mutex::new(watermark),
                paused,
                clock: Clock::new(),
            }),
        }
    }

    fn with<R>(&self, f: impl FnOnce(&mut Watermark) -> R) -> R {
        let mut watermark = self
            .shared
            .watermark
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        let result = f(&mut watermark);
        // Published under the lock, so observers see states in transition order.
        self.shared.paused.send_if_modified(|paused| {
            let changed = *paused != watermark.is_paused();
            *paused = watermark.is_paused();
            changed
        });
        result
    }

    /// Feeds the current depth; returns the transition, if any. Waiters in
    /// [`wait_running`](Self::wait_running) wake on `Resume`.
    pub fn observe(&self, depth: u64) -> Option<Transition> {
        let now = self.shared.clock.now();
        self.with(|w| w.observe(now, depth))
    }

    /// Back to running without a transition (see [`Watermark::reset`]); wakes waiters.
    pub fn reset(&self) {
        let now = self.shared.clock.now();
        self.with(|w| w.reset(now));
    }

    /// Whether the controller is paused.
    pub fn is_paused(&self) -> bool {
        *self.shared.paused.borrow()
    }

    /// Waits until the controller is running (returns at once if it is).
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: it only watches the state, so dropping the future loses nothing.
    pub async fn wait_running(&self) {
        let mut state = self.shared.paused.subscribe();
        // The sender lives in `self.shared`, so the channel cannot close while we wait.
        let _ = state.wait_for(|paused| !paused).await;
    }

    /// `(pauses, resumes, time spent paused so far)`.
    pub fn counts(&self) -> (u64, u64, Duration) {
        let now = self.shared.clock.now();
        self.with(|w| (w.pauses(), w.resumes(), w.paused_time(now)))
    }
}
