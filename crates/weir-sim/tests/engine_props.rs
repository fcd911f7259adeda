//! Property tests of the engine: the clock never goes backwards, every message is
//! accounted for at every millisecond, and bounds hold, for every strategy and random
//! workloads.

use std::num::NonZeroU64;

use proptest::prelude::*;
use weir_sim::{
    Arrivals, Observer, ServicePeriod, ServiceSchedule, Step, Strategy as Lab, Workload, run,
};

/// Checks every step as it happens.
#[derive(Default)]
struct Checker {
    last_ms: Option<u64>,
    failures: Vec<String>,
    max_waiting: u64,
}

impl Observer for Checker {
    fn step(&mut self, step: &Step) {
        if let Some(last) = self.last_ms
            && step.now_ms <= last
        {
            self.failures
                .push(format!("time went from {last} ms to {} ms", step.now_ms));
        }
        self.last_ms = Some(step.now_ms);
        if !step.is_conserved() {
            self.failures.push(format!("not conserved at {step:?}"));
        }
        self.max_waiting = self.max_waiting.max(step.stats.depth);
    }
}

fn nz(n: u64) -> NonZeroU64 {
    NonZeroU64::new(n).unwrap()
}

fn arrivals() -> impl proptest::strategy::Strategy<Value = Arrivals> {
    prop_oneof![
        (0u64..30).prop_map(|interval_ms| Arrivals::Constant { interval_ms }),
        (0.5f64..30.0, any::<u64>()).prop_map(|(mean_interval_ms, seed)| Arrivals::Poisson {
            mean_interval_ms,
            seed
        }),
        (1u64..20, 0u64..200).prop_map(|(size, every_ms)| Arrivals::Bursts { size, every_ms }),
    ]
}

fn workload() -> impl proptest::strategy::Strategy<Value = Workload> {
    (
        0u64..300,
        arrivals(),
        1u64..10,
        0u64..2_000,
        0u64..2_000,
        1u64..40,
    )
        .prop_map(
            |(messages, arrivals, fast, from_ms, len_ms, slow)| Workload {
                messages,
                arrivals,
                service: ServiceSchedule::new(nz(fast)).with_period(ServicePeriod {
                    from_ms,
                    until_ms: from_ms + len_ms,
                    service_ms: nz(slow),
                }),
            },
        )
}

fn strategy() -> impl proptest::strategy::Strategy<Value = Lab> {
    let limit = || (1u64..60).prop_map(nz);
    prop_oneof![
        Just(Lab::Unbounded),
        limit().prop_map(|capacity| Lab::Reject { capacity }),
        limit().prop_map(|capacity| Lab::DropNewest { capacity }),
        limit().prop_map(|capacity| Lab::DropOldest { capacity }),
        (0u64..1_000).prop_map(|deadline_ms| Lab::Expire { deadline_ms }),
        limit().prop_map(|capacity| Lab::Block { capacity }),
        limit().prop_map(|window| Lab::Credit { window }),
        limit().prop_map(|keys| Lab::LatestPerKey { keys }),
        (limit(), 0u64..500).prop_map(|(window, target_age_ms)| Lab::AdaptiveCredit {
            window,
            target_age_ms
        }),
    ]
}

/// The bound a strategy promises on waiting messages, if any.
fn bound(strategy: &Lab) -> Option<u64> {
    match *strategy {
        Lab::Reject { capacity }
        | Lab::DropNewest { capacity }
        | Lab::DropOldest { capacity }
        | Lab::Block { capacity } => Some(capacity.get()),
        Lab::Credit { window } | Lab::AdaptiveCredit { window, .. } => Some(window.get()),
        Lab::LatestPerKey { keys } => Some(keys.get()),
        Lab::Unbounded | Lab::Expire { .. } => None,
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(200))]

    #[test]
    fn time_moves_forward_and_every_message_is_accounted_for(
        workload in workload(),
        strategy in strategy(),
    ) {
        let mut lane = strategy.lane("under test");
        let mut checker = Checker::default();
        let outcome = run(&workload, lane.as_mut(), &mut checker, 1_000_000);
        let outcome = outcome.map_err(|e| TestCaseError::fail(e.to_string()))?;
        prop_assert!(checker.failures.is_empty(), "{:?}", checker.failures);
        prop_assert_eq!(outcome.offered, workload.messages);
        prop_assert_eq!(
            outcome.offered,
            outcome.completed + outcome.rejected + outcome.dropped + outcome.expired + outcome.superseded
        );
        if let Some(bound) = bound(&strategy) {
            prop_assert!(outcome.max_depth <= bound, "{outcome:?} above {bound}");
            prop_assert!(checker.max_waiting <= bound);
        }
        // Only the shedding strategies lose messages.
        match strategy {
            Lab::Unbounded | Lab::Block { .. } | Lab::Credit { .. }
            | Lab::AdaptiveCredit { .. } => {
                prop_assert_eq!(outcome.completed, workload.messages);
                prop_assert_eq!(outcome.rejected, 0);
            }
            _ => {}
        }
        if let Lab::Expire { deadline_ms } = strategy {
            prop_assert!(outcome.max_queue_wait_ms <= deadline_ms);
        }
    }

    #[test]
    fn the_same_run_gives_the_same_outcome(workload in workload(), strategy in strategy()) {
        let a = run(&workload, strategy.lane("a").as_mut(), &mut (), 1_000_000);
        let b = run(&workload, strategy.lane("b").as_mut(), &mut (), 1_000_000);
        prop_assert_eq!(a, b);
    }
}

/// Records, for a blocking queue, every millisecond at which the producer put a message
/// in although the queue was full at the end of the previous millisecond.
struct BlockOrder {
    capacity: u64,
    previous: Option<Step>,
    violations: Vec<u64>,
}

impl Observer for BlockOrder {
    fn step(&mut self, step: &Step) {
        if let Some(previous) = self.previous
            && step.sent > previous.sent
            && previous.stats.depth >= self.capacity
        {
            self.violations.push(step.now_ms);
        }
        self.previous = Some(*step);
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(100))]

    /// The producer moves before the consumer within a millisecond, so room freed by a
    /// pick at `q` is used at `q + 1`, never at `q` itself.
    #[test]
    fn a_blocked_producer_uses_freed_room_only_in_the_next_millisecond(
        workload in workload(),
        capacity in 1u64..20,
    ) {
        let strategy = Lab::Block { capacity: nz(capacity) };
        let mut observer = BlockOrder { capacity, previous: None, violations: Vec::new() };
        run(&workload, strategy.lane("block").as_mut(), &mut observer, 1_000_000)
            .map_err(|e| TestCaseError::fail(e.to_string()))?;
        prop_assert!(observer.violations.is_empty(), "{:?}", observer.violations);
    }
}
