//! The sans-IO demand core: Reactive Streams 1.0.4 demand rules as a state machine.

use super::error::RequestError;

/// Demand at this value is unbounded: it is never decremented (rule 3.17).
pub const UNBOUNDED: u64 = u64::MAX;

/// Where a stream is in its life.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum StreamState {
    /// Items may flow against demand.
    Active,
    /// The subscriber cancelled; nothing more is sent (rule 3.6 makes requests no-ops).
    Cancelled,
    /// The publisher signalled `onComplete`.
    Completed,
    /// The publisher signalled `onError`.
    Failed,
    /// `request(0)` ended the stream with an error (rule 3.9).
    InvalidRequest,
}

impl StreamState {
    /// Whether a terminal signal (`onComplete` or `onError`) was produced.
    pub fn is_terminated(self) -> bool {
        matches!(
            self,
            StreamState::Completed | StreamState::Failed | StreamState::InvalidRequest
        )
    }
}

/// Why a `request(n)` changed nothing.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum IgnoreReason {
    /// The subscription was cancelled (rule 3.6).
    Cancelled,
    /// A terminal signal was already produced (rule 1.7).
    Terminated,
}

/// What a call to [`DemandCore::request`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[must_use = "an `Errored` outcome obliges the publisher to signal onError"]
#[non_exhaustive]
pub enum RequestOutcome {
    /// Demand grew; `demand` is the outstanding demand now ([`UNBOUNDED`] when saturated).
    /// The publisher should drain, unless it is already draining (rule 3.3).
    Added {
        /// The outstanding demand after the request.
        demand: u64,
    },
    /// The request was invalid: the stream is now terminated and the publisher must
    /// signal `onError` with this error, then nothing more (rules 3.9, 1.7).
    Errored(RequestError),
    /// The request was a no-op because the stream was cancelled or had ended.
    Ignored(IgnoreReason),
}

/// The demand bookkeeping of one subscription, with no I/O and no callbacks of its own.
///
/// A publisher owns one `DemandCore` per subscriber and asks it before every emit.
/// The core enforces:
///
/// * **1.1** — an item is emitted only after [`try_claim`](Self::try_claim) took one
///   unit of outstanding demand; the total emitted never exceeds the total requested.
/// * **1.7** — after a terminal signal ([`complete`](Self::complete),
///   [`fail`](Self::fail), or an errored request) nothing is claimed and no second
///   terminal signal is allowed.
/// * **3.6** — after [`cancel`](Self::cancel), requests are no-ops and nothing is claimed.
/// * **3.9** — `request(0)` terminates the stream with [`RequestError::NonPositive`].
/// * **3.17** — demand saturates at [`UNBOUNDED`] (`u64::MAX`), which means
///   unbounded: it is then never decremented.
/// * **3.3** — [`begin_drain`](Self::begin_drain) / [`end_drain`](Self::end_drain)
///   (or [`drain`](Self::drain)) mark a running delivery loop, so a request made from
///   inside `onNext` only adds demand and the running loop picks it up.
///
/// Requests take `u64`, so the only non-positive value is `0`; a caller translating a
/// signed request (Java's `long`) maps negatives to `0` before calling.
///
/// # Examples
///
/// A paced publisher (seed 000's `PacedPublisher`) is a thin loop over the core:
///
/// ```
/// use weir_flow::credit::{DemandCore, RequestOutcome};
///
/// let mut core = DemandCore::new();
/// let mut next_item = 0;
/// let mut sent = Vec::new();
///
/// assert_eq!(core.request(2), RequestOutcome::Added { demand: 2 });
/// core.drain(
///     || (next_item < 3).then(|| { next_item += 1; next_item - 1 }),
///     |core, item| {
///         sent.push(item);
///         // A request from inside onNext only adds demand (rule 3.3).
///         if item == 0 {
///             let _ = core.request(1);
///         }
///     },
/// );
/// assert_eq!(sent, vec![0, 1, 2]);
/// assert_eq!(core.demand(), 0);
/// assert!(core.complete());
/// assert!(!core.try_claim()); // nothing after the terminal signal (rule 1.7)
/// ```
#[derive(Debug, Clone)]
pub struct DemandCore {
    demand: u64,
    state: StreamState,
    draining: bool,
    emitted: u64,
}

impl Default for DemandCore {
    fn default() -> Self {
        DemandCore::new()
    }
}

impl DemandCore {
    /// An active subscription with no demand yet (right after `onSubscribe`).
    pub const fn new() -> Self {
        DemandCore {
            demand: 0,
            state: StreamState::Active,
            draining: false,
            emitted: 0,
        }
    }

    /// Adds `n` to the outstanding demand, saturating at [`UNBOUNDED`].
    ///
    /// `request(0)` terminates the stream and returns [`RequestOutcome::Errored`]: the
    /// publisher must then signal `onError` once. After a cancel or a terminal signal
    /// the call changes nothing and returns [`RequestOutcome::Ignored`].
    pub fn request(&mut self, n: u64) -> RequestOutcome {
        match self.state {
            StreamState::Active => {}
            StreamState::Cancelled => return RequestOutcome::Ignored(IgnoreReason::Cancelled),
            _ => return RequestOutcome::Ignored(IgnoreReason::Terminated),
        }
        if n == 0 {
            self.state = StreamState::InvalidRequest;
            self.demand = 0;
            return RequestOutcome::Errored(RequestError::NonPositive(n));
        }
        self.demand = self.demand.saturating_add(n);
        RequestOutcome::Added {
            demand: self.demand,
        }
    }

    /// Takes one unit of demand before an emit. Returns `false` — emit nothing — when
    /// there is no demand or the stream is not active. Unbounded demand is not
    /// decremented.
    pub fn try_claim(&mut self) -> bool {
        if !self.can_emit() {
            return false;
        }
        if self.demand != UNBOUNDED {
            self.demand -= 1;
        }
        self.emitted = self.emitted.saturating_add(1);
        true
    }

    /// Whether an emit would be allowed now: active and demand outstanding.
    pub fn can_emit(&self) -> bool {
        self.state == StreamState::Active && self.demand > 0
    }

    /// Cancels the subscription. Idempotent; returns `true` only for the call that
    /// cancelled. Cancelling an ended stream changes nothing and returns `false`.
    pub fn cancel(&mut self) -> bool {
        if self.state != StreamState::Active {
            return false;
        }
        self.state = StreamState::Cancelled;
        self.demand = 0;
        true
    }

    /// Records `onComplete`. Returns `true` if the publisher should now signal it;
    /// `false` if the stream was already cancelled or ended (nothing follows, rule 1.7).
    pub fn complete(&mut self) -> bool {
        self.terminate(StreamState::Completed)
    }

    /// Records `onError`. Returns `true` if the publisher should now signal it;
    /// `false` if the stream was already cancelled or ended.
    pub fn fail(&mut self) -> bool {
        self.terminate(StreamState::Failed)
    }

    fn terminate(&mut self, to: StreamState) -> bool {
        if self.state != StreamState::Active {
            return false;
        }
        self.state = to;
        self.demand = 0;
        true
    }

    /// The outstanding demand ([`UNBOUNDED`] when saturated; `0` once not active).
    pub fn demand(&self) -> u64 {
        self.demand
    }

    /// Whether demand has saturated to unbounded.
    pub fn is_unbounded(&self) -> bool {
        self.demand == UNBOUNDED
    }

    /// How many items were claimed (emitted) so far.
    pub fn emitted(&self) -> u64 {
        self.emitted
    }

    /// The stream's state.
    pub fn state(&self) -> StreamState {
        self.state
    }

    /// Whether items may still flow (not cancelled, not ended).
    pub fn is_active(&self) -> bool {
        self.state == StreamState::Active
    }

    /// Whether the subscriber cancelled.
    pub fn is_cancelled(&self) -> bool {
        self.state == StreamState::Cancelled
    }

    /// Whether a terminal signal was produced.
    pub fn is_terminated(&self) -> bool {
        self.state.is_terminated()
    }

    /// Marks the start of a delivery loop. Returns `false` if a loop is already
    /// running — the caller is inside `onNext` and must return at once, leaving the
    /// new demand to the running loop (rule 3.3).
    ///
    /// Use this pair when the core sits behind a `RefCell` and cannot stay borrowed
    /// across `onNext`; otherwise [`drain`](Self::drain) is simpler.
    pub fn begin_drain(&mut self) -> bool {
        if self.draining {
            return false;
        }
        self.draining = true;
        true
    }

    /// Marks the end of the delivery loop started by [`begin_drain`](Self::begin_drain).
    pub fn end_drain(&mut self) {
        self.draining = false;
    }

    /// Whether a delivery loop is running.
    pub fn is_draining(&self) -> bool {
        self.draining
    }

    /// Delivers items while there is demand and `ready` has one, and returns how many
    /// were delivered.
    ///
    /// `ready` is asked for an item only when a unit of demand is available, so an
    /// item is never taken out of the source without a licence to send it. `deliver`
    /// receives the core, so it may call [`request`](Self::request) (which only adds
    /// demand: the loop picks it up) or [`cancel`](Self::cancel) (the loop stops).
    /// Returns `0` without calling anything if a drain is already running.
    pub fn drain<T>(
        &mut self,
        mut ready: impl FnMut() -> Option<T>,
        mut deliver: impl FnMut(&mut Self, T),
    ) -> u64 {
        if !self.begin_drain() {
            return 0;
        }
        let mut delivered = 0;
        while self.can_emit() {
            let Some(item) = ready() else { break };
            let claimed = self.try_claim();
            debug_assert!(claimed, "can_emit was checked just before");
            delivered += 1;
            deliver(self, item);
        }
        self.end_drain();
        delivered
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn demand_saturates_and_unbounded_is_never_decremented() {
        let mut core = DemandCore::new();
        assert_eq!(
            core.request(u64::MAX - 1),
            RequestOutcome::Added {
                demand: u64::MAX - 1
            }
        );
        assert_eq!(core.request(5), RequestOutcome::Added { demand: UNBOUNDED });
        for _ in 0..1000 {
            assert!(core.try_claim());
        }
        assert!(core.is_unbounded());
        assert_eq!(core.emitted(), 1000);
    }

    #[test]
    fn request_zero_terminates_once() {
        let mut core = DemandCore::new();
        let _ = core.request(3);
        assert_eq!(
            core.request(0),
            RequestOutcome::Errored(RequestError::NonPositive(0))
        );
        assert_eq!(core.state(), StreamState::InvalidRequest);
        assert_eq!(
            core.request(0),
            RequestOutcome::Ignored(IgnoreReason::Terminated)
        );
        assert!(!core.try_claim());
        assert!(!core.fail());
        assert!(!core.complete());
    }

    #[test]
    fn cancel_is_idempotent_and_stops_everything() {
        let mut core = DemandCore::new();
        let _ = core.request(3);
        assert!(core.cancel());
        assert!(!core.cancel());
        assert_eq!(
            core.request(1),
            RequestOutcome::Ignored(IgnoreReason::Cancelled)
        );
        assert!(!core.try_claim());
        assert!(!core.complete());
        assert_eq!(core.state(), StreamState::Cancelled);
    }

    #[test]
    fn drain_asks_for_items_only_with_demand() {
        let mut core = DemandCore::new();
        let _ = core.request(2);
        let mut asked = 0;
        let delivered = core.drain(
            || {
                asked += 1;
                Some(asked)
            },
            |_, _| {},
        );
        assert_eq!(delivered, 2);
        assert_eq!(asked, 2, "no item is taken from the source without demand");
    }

    #[test]
    fn cancel_from_inside_delivery_stops_the_loop() {
        let mut core = DemandCore::new();
        let _ = core.request(10);
        let delivered = core.drain(
            || Some(()),
            |core, ()| {
                core.cancel();
            },
        );
        assert_eq!(delivered, 1);
    }

    #[test]
    fn nested_drain_is_refused() {
        let mut core = DemandCore::new();
        assert!(core.begin_drain());
        assert!(!core.begin_drain());
        assert_eq!(core.drain(|| Some(1), |_, _| {}), 0);
        core.end_drain();
        assert!(!core.is_draining());
    }
}
