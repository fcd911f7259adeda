//! A paced publisher: a thin single-threaded loop over the credit core
//! ([`weir_flow::credit::DemandCore`]), the Rust form of the lesson's `PacedPublisher`.

use weir_flow::credit::{DemandCore, RequestError, RequestOutcome};

use crate::engine::Producer;

/// What a subscriber receives from a [`PacedPublisher`].
pub trait Subscriber {
    /// One item (`onNext`).
    fn on_next(&mut self, item: u64);
    /// The stream ended normally (`onComplete`).
    fn on_complete(&mut self);
    /// The stream ended with an error (`onError`).
    fn on_error(&mut self, error: RequestError);
}

/// A publisher whose items come from a [`Producer`]'s schedule and leave only against
/// demand, following the Reactive Streams rules the credit core enforces.
///
/// Item `i + 1` is ready one arrival gap after item `i` was sent; an item that is ready
/// waits for demand, and the time it waits is the producer's wait. The publisher emits
/// inside [`request`](Self::request) when an item is ready, and on each
/// [`tick`](Self::tick) of the clock. Delivery runs inside the core's reentrancy-safe
/// drain loop.
///
/// # Examples
///
/// ```
/// use weir_flow::credit::RequestError;
/// use weir_sim::{Arrivals, PacedPublisher, Producer, ServiceSchedule, Subscriber, Workload};
///
/// #[derive(Default)]
/// struct Log(Vec<u64>, bool);
/// impl Subscriber for Log {
///     fn on_next(&mut self, item: u64) { self.0.push(item) }
///     fn on_complete(&mut self) { self.1 = true }
///     fn on_error(&mut self, _: RequestError) {}
/// }
///
/// let workload = Workload {
///     messages: 3,
///     arrivals: Arrivals::Constant { interval_ms: 10 },
///     service: ServiceSchedule::new(std::num::NonZeroU64::MIN),
/// };
/// let mut producer = Producer::new(&workload);
/// let mut publisher = PacedPublisher::new();
/// let mut log = Log::default();
/// let _ = publisher.request(5, 0, &mut producer, &mut log); // item 0 is ready at t=0
/// publisher.tick(5, &mut producer, &mut log); // item 1 is not ready before t=10
/// publisher.tick(10, &mut producer, &mut log);
/// publisher.tick(20, &mut producer, &mut log);
/// assert_eq!(log.0, [0, 1, 2]);
/// assert!(log.1, "onComplete after the last item");
/// ```
#[derive(Debug, Clone, Default)]
pub struct PacedPublisher {
    core: DemandCore,
}

impl PacedPublisher {
    /// A publisher right after `onSubscribe`: no demand yet.
    pub fn new() -> Self {
        PacedPublisher {
            core: DemandCore::new(),
        }
    }

    /// The subscriber's `request(n)` at `now_ms`: adds demand and sends what is ready.
    /// `request(0)` ends the stream with `onError`; after a cancel or a terminal signal
    /// nothing happens.
    pub fn request(
        &mut self,
        n: u64,
        now_ms: u64,
        producer: &mut Producer,
        subscriber: &mut dyn Subscriber,
    ) -> RequestOutcome {
        let outcome = self.core.request(n);
        match outcome {
            RequestOutcome::Added { .. } => self.drain(now_ms, producer, subscriber),
            RequestOutcome::Errored(error) => subscriber.on_error(error),
            _ => {}
        }
        outcome
    }

    /// The clock reached `now_ms`: send what is ready, as far as demand allows.
    pub fn tick(&mut self, now_ms: u64, producer: &mut Producer, subscriber: &mut dyn Subscriber) {
        self.drain(now_ms, producer, subscriber);
    }

    /// The subscriber's `cancel()`: nothing is sent after it.
    pub fn cancel(&mut self) {
        self.core.cancel();
    }

    /// Outstanding demand.
    pub fn demand(&self) -> u64 {
        self.core.demand()
    }

    /// Items sent so far.
    pub fn emitted(&self) -> u64 {
        self.core.emitted()
    }

    /// The credit core, for inspection.
    pub fn core(&self) -> &DemandCore {
        &self.core
    }

    fn drain(&mut self, now_ms: u64, producer: &mut Producer, subscriber: &mut dyn Subscriber) {
        // The core asks for an item only when it holds a unit of demand for it, so an
        // item leaves the producer only with a licence to send it.
        self.core.drain(
            || {
                let item = producer.due_at(now_ms)?;
                producer.mark_sent(now_ms);
                Some(item)
            },
            |_, item| subscriber.on_next(item),
        );
        if producer.is_done() && self.core.complete() {
            subscriber.on_complete();
        }
    }
}
