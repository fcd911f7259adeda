//! The credit strategies: a [`PacedPublisher`] over the credit core, sending into the
//! subscriber's bounded buffer against the demand the subscriber grants.

use std::num::NonZeroU64;
use std::time::Duration;

use weir_flow::credit::{AdaptiveWindow, AdaptiveWindowConfig, RequestError, WindowedDemand};
use weir_flow::queue::{Capacity, OnFull, QueueConfig, QueueCore};
use weir_flow::{FlowStats, Timestamp};

use super::items;
use crate::engine::{Lane, Producer};
use crate::paced::{PacedPublisher, Subscriber};

/// The subscriber's buffer, as the publisher sees it while delivering at `now`.
struct Buffer<'a> {
    queue: &'a mut QueueCore<u64>,
    now: Timestamp,
}

impl Subscriber for Buffer<'_> {
    fn on_next(&mut self, item: u64) {
        // The buffer holds the largest window, and the publisher sends only against
        // demand, so this is always accepted. Were the demand rules broken, the buffer
        // would refuse and count the item as rejected: visible in the table.
        let _ = self.queue.offer(item, self.now);
    }

    fn on_complete(&mut self) {}

    fn on_error(&mut self, _error: RequestError) {}
}

/// Credits with a fixed or adaptive window.
pub(crate) struct CreditLane {
    name: String,
    publisher: PacedPublisher,
    buffer: QueueCore<u64>,
    demand: WindowedDemand,
    adaptive: Option<AdaptiveWindow>,
    subscribed: bool,
    smallest_window: u64,
}

impl CreditLane {
    /// Credits with a fixed window.
    pub(crate) fn fixed(name: &str, window: NonZeroU64) -> Self {
        CreditLane {
            name: name.to_owned(),
            publisher: PacedPublisher::new(),
            buffer: QueueCore::new(QueueConfig::new(
                Capacity::items(items(window)),
                OnFull::Reject,
            )),
            demand: WindowedDemand::new(window),
            adaptive: None,
            subscribed: false,
            smallest_window: window.get(),
        }
    }

    /// Credits whose window (at most `window`) shrinks while the oldest buffered
    /// message is older than `target_age_ms` (at least 1 ms).
    pub(crate) fn adaptive(name: &str, window: NonZeroU64, target_age_ms: u64) -> Self {
        let config = AdaptiveWindowConfig::new(window, Duration::from_millis(target_age_ms.max(1)));
        let mut lane = CreditLane::fixed(name, window);
        // The config is valid by construction: min 1 ≤ max, factor 0.5, target > 0.
        lane.adaptive = AdaptiveWindow::new(config).ok();
        lane
    }

    fn request_top_up(&mut self, now: Timestamp, producer: &mut Producer) {
        if let Some(n) = self.demand.top_up() {
            let mut buffer = Buffer {
                queue: &mut self.buffer,
                now,
            };
            let _ = self
                .publisher
                .request(n.get(), now.as_millis(), producer, &mut buffer);
        }
    }
}

impl Lane for CreditLane {
    fn name(&self) -> &str {
        &self.name
    }

    fn produce(&mut self, now: Timestamp, producer: &mut Producer) {
        if !self.subscribed {
            // onSubscribe at t=0: the subscriber requests its window up front.
            self.subscribed = true;
            self.request_top_up(now, producer);
        }
        let mut buffer = Buffer {
            queue: &mut self.buffer,
            now,
        };
        self.publisher.tick(now.as_millis(), producer, &mut buffer);
    }

    fn completed(&mut self, now: Timestamp, producer: &mut Producer) {
        self.demand.finished();
        if let Some(adaptive) = &mut self.adaptive {
            let oldest_age = self.buffer.stats(now).oldest_age;
            let window = adaptive.observe(now, oldest_age);
            self.demand.set_window(window);
            self.smallest_window = self.smallest_window.min(window.get());
        }
        self.request_top_up(now, producer);
    }

    fn pick(&mut self, now: Timestamp) -> Option<u64> {
        self.buffer.take(now).map(|taken| taken.item)
    }

    fn stats(&self, now: Timestamp) -> FlowStats {
        self.buffer.stats(now)
    }

    fn note(&self) -> Option<String> {
        let adaptive = self.adaptive.as_ref()?;
        let config = adaptive.config();
        Some(format!(
            "window between {} and {} (shrank {} times, grew {} times), steering the oldest buffered message towards {} ms",
            self.smallest_window,
            config.max_window,
            adaptive.shrinks(),
            adaptive.grows(),
            config.target_age.as_millis()
        ))
    }
}
