//! Reactive Streams demand rules on the sans-IO `DemandCore`, and seed 000's Part 3
//! traces reproduced by a `PacedPublisher` written as a thin loop over the core.

use std::cell::{Cell, RefCell};

use proptest::prelude::*;
use weir_flow::credit::{
    DemandCore, IgnoreReason, RequestError, RequestOutcome, StreamState, UNBOUNDED,
};

/// What the subscriber does from inside `onNext`.
type OnNext = Box<dyn FnMut(&PacedPublisher, u64)>;

/// Seed 000's `PacedPublisher`: `total` items, one ready every `interval_ms`, on a
/// clock that moves only when told. The core sits in a `RefCell` and is never
/// borrowed across a call into the subscriber, so the subscriber may call back into
/// `request`/`cancel` from inside `onNext`, as a Java subscriber would.
struct PacedPublisher {
    core: RefCell<DemandCore>,
    total: u64,
    interval_ms: u64,
    next_item: Cell<u64>,
    ready_at_ms: Cell<u64>,
    now_ms: Cell<u64>,
    log: RefCell<Vec<String>>,
    on_next: RefCell<Option<OnNext>>,
    nesting: Cell<u32>,
    max_nesting: Cell<u32>,
}

impl PacedPublisher {
    fn subscribe(total: u64, interval_ms: u64) -> Self {
        let publisher = PacedPublisher {
            core: RefCell::new(DemandCore::new()),
            total,
            interval_ms,
            next_item: Cell::new(0),
            ready_at_ms: Cell::new(0),
            now_ms: Cell::new(0),
            log: RefCell::new(Vec::new()),
            on_next: RefCell::new(None),
            nesting: Cell::new(0),
            max_nesting: Cell::new(0),
        };
        publisher.say("onSubscribe (no demand yet)");
        publisher
    }

    fn say(&self, line: &str) {
        let t = self.now_ms.get();
        self.log.borrow_mut().push(format!("t={t:<4}{line}"));
    }

    fn request(&self, n: u64) -> RequestOutcome {
        let outcome = self.core.borrow_mut().request(n);
        match outcome {
            RequestOutcome::Added { .. } => self.drain(),
            RequestOutcome::Errored(RequestError::NonPositive(n)) => self.say(&format!(
                "onError(IllegalArgumentException: request(n) needs n > 0, got {n})"
            )),
            _ => {}
        }
        outcome
    }

    fn cancel(&self) {
        self.core.borrow_mut().cancel();
    }

    fn tick(&self, now_ms: u64) {
        self.now_ms.set(now_ms);
        self.drain();
    }

    fn item_ready(&self) -> bool {
        self.next_item.get() < self.total && self.now_ms.get() >= self.ready_at_ms.get()
    }

    fn drain(&self) {
        if !self.core.borrow_mut().begin_drain() {
            return; // a request from inside onNext: the running loop picks it up (3.3)
        }
        while self.item_ready() && self.core.borrow_mut().try_claim() {
            let item = self.next_item.get();
            self.next_item.set(item + 1);
            self.ready_at_ms.set(self.now_ms.get() + self.interval_ms);
            self.deliver(item);
        }
        if self.next_item.get() == self.total && self.core.borrow_mut().complete() {
            self.say("onComplete");
        }
        self.core.borrow_mut().end_drain();
    }

    fn deliver(&self, item: u64) {
        self.nesting.set(self.nesting.get() + 1);
        self.max_nesting
            .set(self.max_nesting.get().max(self.nesting.get()));
        self.say(&format!("onNext({item})"));
        // Take the hook out while it runs, so the subscriber can call back into us.
        let hook = self.on_next.borrow_mut().take();
        if let Some(mut hook) = hook {
            hook(self, item);
            *self.on_next.borrow_mut() = Some(hook);
        }
        self.nesting.set(self.nesting.get() - 1);
    }

    fn demand(&self) -> u64 {
        self.core.borrow().demand()
    }

    fn emitted(&self) -> u64 {
        self.core.borrow().emitted()
    }

    fn lines(&self) -> Vec<String> {
        self.log.borrow().clone()
    }
}

fn expected(block: &str) -> Vec<String> {
    block.lines().map(|l| l.trim_start().to_owned()).collect()
}

#[test]
fn seed_000_part_3a_items_are_sent_only_against_demand() {
    let p = PacedPublisher::subscribe(3, 10);
    p.tick(20);
    p.say("tick: item 0 is ready, but demand is 0, so nothing is sent");
    let _ = p.request(2);
    p.say(&format!("request(2) done, demand left {}", p.demand()));
    p.tick(30);
    p.say(&format!("tick: demand left {}", p.demand()));
    p.tick(40);
    p.say("tick: item 2 is ready, demand is 0, so nothing is sent");
    let _ = p.request(UNBOUNDED);
    p.say(&format!(
        "request(Long.MAX_VALUE) done, emitted {} of 3",
        p.emitted()
    ));
    assert_eq!(
        p.request(1),
        RequestOutcome::Ignored(IgnoreReason::Terminated)
    );
    p.say("request(1) after the terminal signal: nothing happens");

    assert_eq!(
        p.lines(),
        expected(
            "t=0   onSubscribe (no demand yet)
             t=20  tick: item 0 is ready, but demand is 0, so nothing is sent
             t=20  onNext(0)
             t=20  request(2) done, demand left 1
             t=30  onNext(1)
             t=30  tick: demand left 0
             t=40  tick: item 2 is ready, demand is 0, so nothing is sent
             t=40  onNext(2)
             t=40  onComplete
             t=40  request(Long.MAX_VALUE) done, emitted 3 of 3
             t=40  request(1) after the terminal signal: nothing happens"
        )
    );
}

#[test]
fn seed_000_part_3b_request_zero_is_an_error() {
    let p = PacedPublisher::subscribe(3, 10);
    let _ = p.request(0);
    assert_eq!(
        p.request(5),
        RequestOutcome::Ignored(IgnoreReason::Terminated)
    );
    p.say(&format!(
        "request(5) after onError: nothing happens, emitted {}",
        p.emitted()
    ));
    assert_eq!(
        p.lines(),
        expected(
            "t=0   onSubscribe (no demand yet)
             t=0   onError(IllegalArgumentException: request(n) needs n > 0, got 0)
             t=0   request(5) after onError: nothing happens, emitted 0"
        )
    );
}

#[test]
fn seed_000_part_3c_after_cancel_nothing_more_is_sent() {
    let p = PacedPublisher::subscribe(3, 10);
    let _ = p.request(1);
    p.now_ms.set(10);
    p.cancel();
    assert_eq!(
        p.request(5),
        RequestOutcome::Ignored(IgnoreReason::Cancelled)
    );
    p.tick(10);
    p.say(&format!(
        "cancelled, then request(5) and a tick: emitted {} of 3",
        p.emitted()
    ));
    assert_eq!(
        p.lines(),
        expected(
            "t=0   onSubscribe (no demand yet)
             t=0   onNext(0)
             t=10  cancelled, then request(5) and a tick: emitted 1 of 3"
        )
    );
}

#[test]
fn rule_3_3_request_from_on_next_only_adds_demand_without_recursion() {
    // 10,000 items all ready at once; the subscriber asks for one more in every
    // onNext. With recursion the stack would be 10,000 frames deep.
    let p = PacedPublisher::subscribe(10_000, 0);
    *p.on_next.borrow_mut() = Some(Box::new(|publisher, _item| {
        assert!(matches!(publisher.request(1), RequestOutcome::Added { .. }));
    }));
    let _ = p.request(1);
    assert_eq!(p.emitted(), 10_000);
    assert_eq!(p.max_nesting.get(), 1, "onNext was never re-entered");
    assert_eq!(p.core.borrow().state(), StreamState::Completed);
}

#[test]
fn rule_3_3_cancel_from_on_next_stops_the_running_loop() {
    let p = PacedPublisher::subscribe(100, 0);
    *p.on_next.borrow_mut() = Some(Box::new(|publisher, item| {
        if item == 4 {
            publisher.cancel();
        }
    }));
    let _ = p.request(50);
    assert_eq!(p.emitted(), 5);
}

#[test]
fn rule_1_7_nothing_follows_a_terminal_signal() {
    for end in ["complete", "fail", "request0"] {
        let mut core = DemandCore::new();
        let _ = core.request(10);
        match end {
            "complete" => assert!(core.complete()),
            "fail" => assert!(core.fail()),
            _ => assert!(matches!(core.request(0), RequestOutcome::Errored(_))),
        }
        assert!(core.is_terminated(), "{end}");
        assert!(!core.try_claim(), "{end}: no onNext after the end");
        assert!(!core.complete(), "{end}: no second terminal signal");
        assert!(!core.fail(), "{end}: no second terminal signal");
        assert_eq!(
            core.request(3),
            RequestOutcome::Ignored(IgnoreReason::Terminated)
        );
        assert_eq!(core.demand(), 0);
    }
}

#[test]
fn rule_3_6_request_after_cancel_is_a_no_op() {
    let mut core = DemandCore::new();
    let _ = core.request(2);
    assert!(core.try_claim());
    assert!(core.cancel());
    assert!(!core.cancel(), "cancel is idempotent");
    assert_eq!(
        core.request(7),
        RequestOutcome::Ignored(IgnoreReason::Cancelled)
    );
    assert!(!core.try_claim());
    assert!(!core.complete(), "no terminal signal after cancel");
    assert_eq!(core.emitted(), 1);
}

#[test]
fn rule_3_9_request_zero_terminates_with_an_error() {
    let mut core = DemandCore::new();
    let outcome = core.request(0);
    let RequestOutcome::Errored(error) = outcome else {
        panic!("expected an error, got {outcome:?}");
    };
    assert_eq!(error, RequestError::NonPositive(0));
    assert!(error.to_string().contains("needs n > 0, got 0"));
    assert_eq!(core.state(), StreamState::InvalidRequest);
}

#[test]
fn rule_3_17_demand_saturates_at_u64_max_and_means_unbounded() {
    let mut core = DemandCore::new();
    let _ = core.request(u64::MAX / 2 + 1);
    assert_eq!(
        core.request(u64::MAX / 2 + 1),
        RequestOutcome::Added { demand: UNBOUNDED }
    );
    for _ in 0..10_000 {
        assert!(core.try_claim());
    }
    assert_eq!(
        core.demand(),
        UNBOUNDED,
        "unbounded demand is never decremented"
    );
}

proptest! {
    /// Rule 1.1: whatever the interleaving of requests and emit attempts, the items
    /// emitted never exceed the items requested, and every unit of demand is usable.
    #[test]
    fn rule_1_1_never_more_items_than_requested(
        ops in proptest::collection::vec(prop_oneof![
            (1u64..20).prop_map(Some),
            Just(None),
        ], 1..200)
    ) {
        let mut core = DemandCore::new();
        let mut requested: u64 = 0;
        for op in ops {
            match op {
                Some(n) => {
                    let _ = core.request(n);
                    requested += n;
                }
                None => {
                    let had_demand = core.demand() > 0;
                    prop_assert_eq!(core.try_claim(), had_demand);
                }
            }
            prop_assert!(core.emitted() <= requested);
            prop_assert_eq!(core.emitted() + core.demand(), requested);
        }
    }
}
