//! Thin drivers ("lanes") over the real `weir-flow` cores, one per strategy, and
//! [`Strategy::lane`], which builds a strategy's lane.
//!
//! A lane holds no policy of its own: it offers, takes and requests on a core and reads
//! the core's [`FlowStats`](weir_flow::FlowStats). The queue strategies run on
//! [`weir_flow::queue::QueueCore`]; the credit strategies run a [`PacedPublisher`]
//! (a loop over [`weir_flow::credit::DemandCore`]) into a bounded `QueueCore` buffer,
//! with [`weir_flow::credit::WindowedDemand`] and
//! [`weir_flow::credit::AdaptiveWindow`] on the subscriber's side.
//!
//! [`PacedPublisher`]: crate::PacedPublisher

mod credit;
mod queue;

use crate::engine::Lane;
use crate::strategy::Strategy;

impl Strategy {
    /// A lane that runs this strategy on its `weir-flow` core, named `name` in tables
    /// and errors.
    pub fn lane(&self, name: &str) -> Box<dyn Lane> {
        match *self {
            Strategy::Credit { window } => Box::new(credit::CreditLane::fixed(name, window)),
            Strategy::AdaptiveCredit {
                window,
                target_age_ms,
            } => Box::new(credit::CreditLane::adaptive(name, window, target_age_ms)),
            queued => Box::new(queue::QueueLane::new(name, queued)),
        }
    }
}

/// `NonZeroU64` → the `usize` a queue capacity takes (saturating on 32-bit targets).
fn items(n: std::num::NonZeroU64) -> usize {
    usize::try_from(n.get()).unwrap_or(usize::MAX)
}
