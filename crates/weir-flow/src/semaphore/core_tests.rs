//! Unit tests of the sans-IO core.

use std::time::Duration;

use super::amount::DualAmount;
use super::core::{Offer, Oversize, SemaphoreCore, WaiterId};
use super::error::{AcquireError, TryAcquireError};
use crate::Timestamp;

type Core = SemaphoreCore<u64, &'static str>;

fn ms(millis: u64) -> Timestamp {
    Timestamp::from_millis(millis)
}

/// Grants everything grantable at `now`; returns the payloads in grant order.
fn grant_all<A: super::Amount>(
    core: &mut SemaphoreCore<A, &'static str>,
    now: Timestamp,
) -> Vec<&'static str> {
    let mut granted = Vec::new();
    while core.grant(now, usize::MAX, |_, who| granted.push(who)) {}
    granted
}

fn queue(core: &mut Core, need: u64, now: Timestamp, who: &'static str) -> WaiterId {
    assert_eq!(
        core.offer(need, 0),
        Ok(Offer::MustWait),
        "{who} should have to wait"
    );
    core.enqueue(need, 0, now, None, who)
        .expect("room in the queue")
}

fn assert_conserved(core: &Core, now: Timestamp) {
    let stats = core.stats(now);
    assert!(stats.flow.is_conserved(), "{stats:?}");
    assert_eq!(stats.held + stats.available, stats.total.max(stats.held));
}

#[test]
fn large_head_waiter_is_not_overtaken_by_smaller_ones() {
    let mut core = Core::new(10, 8, Oversize::Reject);
    assert_eq!(core.offer(6, 0), Ok(Offer::Granted));
    queue(&mut core, 8, ms(0), "big");
    // 4 are free and 1 would fit, but "big" is first.
    queue(&mut core, 1, ms(1), "small");
    assert_eq!(core.available(), 4);
    assert!(!core.can_grant());
    assert_eq!(core.try_acquire(1), Err(TryAcquireError::NoPermits));
    core.release(6);
    assert_eq!(grant_all(&mut core, ms(5)), ["big", "small"]);
    assert_eq!((core.held(), core.available()), (9, 1));
    assert_conserved(&core, ms(5));
}

#[test]
fn grants_stop_at_the_first_waiter_that_does_not_fit() {
    let mut core = Core::new(10, 8, Oversize::Reject);
    assert_eq!(core.offer(10, 0), Ok(Offer::Granted));
    queue(&mut core, 3, ms(0), "a");
    queue(&mut core, 3, ms(0), "b");
    queue(&mut core, 5, ms(0), "c");
    queue(&mut core, 1, ms(0), "d");
    core.release(10);
    assert_eq!(grant_all(&mut core, ms(1)), ["a", "b"]);
    assert_eq!(core.waiters(), 2);
    core.release(3);
    assert_eq!(grant_all(&mut core, ms(2)), ["c", "d"]);
    assert_conserved(&core, ms(2));
}

#[test]
fn grant_respects_its_limit() {
    let mut core = Core::new(10, 8, Oversize::Reject);
    assert_eq!(core.offer(10, 0), Ok(Offer::Granted));
    for _ in 0..5 {
        queue(&mut core, 1, ms(0), "w");
    }
    core.release(10);
    let mut granted = 0;
    assert!(
        core.grant(ms(0), 2, |_, _| granted += 1),
        "more can be granted"
    );
    assert_eq!(granted, 2);
    assert!(!core.grant(ms(0), 10, |_, _| granted += 1));
    assert_eq!(granted, 5);
}

#[test]
fn max_waiters_refuses_at_once_with_a_distinct_error() {
    let mut core = Core::new(1, 2, Oversize::Reject);
    assert_eq!(core.offer(1, 0), Ok(Offer::Granted));
    queue(&mut core, 1, ms(0), "a");
    queue(&mut core, 1, ms(0), "b");
    assert_eq!(core.offer(1, 0), Ok(Offer::MustWait));
    assert_eq!(
        core.enqueue(1, 0, ms(0), None, "c"),
        Err(AcquireError::TooManyWaiters { max_waiters: 2 })
    );
    let stats = core.stats(ms(0));
    assert_eq!(stats.rejected_too_many_waiters, 1);
    assert_eq!(
        (stats.flow.offered, stats.flow.rejected, stats.flow.depth),
        (4, 1, 2)
    );
    assert_conserved(&core, ms(0));
}

#[test]
fn oversize_reject_refuses_requests_above_the_total() {
    let mut core = Core::new(10, 8, Oversize::Reject);
    assert_eq!(
        core.offer(11, 0),
        Err(AcquireError::TooLarge {
            requested: 11,
            total: 10
        })
    );
    assert_eq!(
        core.try_acquire(11),
        Err(TryAcquireError::TooLarge {
            requested: 11,
            total: 10
        })
    );
    // A resize is judged on the permit's new amount as a whole.
    assert_eq!(core.offer(4, 0), Ok(Offer::Granted));
    assert_eq!(
        core.offer(7, 4),
        Err(AcquireError::TooLarge {
            requested: 11,
            total: 10
        })
    );
    assert_eq!(core.stats(ms(0)).rejected_too_large, 3);
    assert_conserved(&core, ms(0));
}

#[test]
fn oversize_admit_alone_waits_for_idle_and_its_fifo_turn() {
    let mut core = Core::new(10, 8, Oversize::AdmitAloneWhenIdle);
    assert_eq!(core.offer(2, 0), Ok(Offer::Granted));
    queue(&mut core, 15, ms(0), "huge");
    queue(&mut core, 1, ms(0), "small");
    // 8 free, but the huge request is first and needs the semaphore idle.
    assert!(!core.can_grant());
    core.release(2);
    assert_eq!(grant_all(&mut core, ms(1)), ["huge"]);
    assert_eq!((core.held(), core.available()), (15, 0));
    // While it is held nothing else goes through.
    assert_eq!(core.try_acquire(1), Err(TryAcquireError::NoPermits));
    core.release(15);
    assert_eq!(grant_all(&mut core, ms(2)), ["small"]);
    // Idle and nobody waiting: granted at once.
    core.release(1);
    assert_eq!(core.offer(15, 0), Ok(Offer::Granted));
    assert_conserved(&core, ms(2));
}

#[test]
fn growing_resize_waits_in_fifo_turn_and_may_grow_oversize_alone() {
    let mut core = Core::new(10, 8, Oversize::AdmitAloneWhenIdle);
    assert_eq!(core.offer(4, 0), Ok(Offer::Granted)); // the permit that will grow
    assert_eq!(core.offer(4, 0), Ok(Offer::Granted)); // another holder
    queue(&mut core, 3, ms(0), "first");
    // Grow 4 -> 6: 2 are free, but "first" is queued ahead.
    assert_eq!(core.offer(2, 4), Ok(Offer::MustWait));
    core.enqueue(2, 4, ms(0), None, "grow").expect("room");
    assert!(!core.can_grant());
    core.release(4); // the other holder is done
    assert_eq!(grant_all(&mut core, ms(1)), ["first", "grow"]);
    assert_eq!(core.held(), 9);
    // Grow 6 -> 12, above the total: it must be alone, and "first" still holds 3.
    assert_eq!(core.offer(6, 6), Ok(Offer::MustWait));
    core.enqueue(6, 6, ms(1), None, "grow big").expect("room");
    assert!(!core.can_grant());
    core.release(3);
    assert_eq!(grant_all(&mut core, ms(2)), ["grow big"]);
    assert_eq!((core.held(), core.available()), (12, 0));
    // Shrinking is a release.
    core.release(11);
    assert_eq!((core.held(), core.available()), (1, 9));
    assert_conserved(&core, ms(2));
}

#[test]
fn forget_shrinks_the_total_and_refuses_waiters_that_no_longer_fit() {
    let mut core = Core::new(10, 8, Oversize::Reject);
    assert_eq!(core.offer(4, 0), Ok(Offer::Granted));
    assert_eq!(core.offer(3, 0), Ok(Offer::Granted));
    queue(&mut core, 8, ms(0), "eight");
    queue(&mut core, 5, ms(0), "five");
    let mut refused = Vec::new();
    core.forget(4, |_, who, error| refused.push((who, error)));
    assert_eq!(
        refused,
        [(
            "eight",
            AcquireError::TooLarge {
                requested: 8,
                total: 6
            }
        )]
    );
    assert_eq!((core.total(), core.held(), core.available()), (6, 3, 3));
    core.release(3);
    assert_eq!(grant_all(&mut core, ms(1)), ["five"]);
    core.add_permits(4);
    assert_eq!((core.total(), core.available()), (10, 5));
    assert_conserved(&core, ms(1));
}

#[test]
fn close_fails_every_waiter_and_every_later_request() {
    let mut core = Core::new(4, 8, Oversize::Reject);
    assert_eq!(core.offer(4, 0), Ok(Offer::Granted));
    queue(&mut core, 1, ms(0), "a");
    queue(&mut core, 2, ms(0), "b");
    let mut failed = Vec::new();
    core.close(|_, who| failed.push(who));
    assert_eq!(failed, ["a", "b"]);
    assert!(core.is_closed());
    assert_eq!(core.offer(1, 0), Err(AcquireError::Closed));
    assert_eq!(core.try_acquire(1), Err(TryAcquireError::Closed));
    assert_eq!(
        core.enqueue(1, 0, ms(0), None, "c"),
        Err(AcquireError::Closed)
    );
    // Held permits are still returned normally.
    core.release(4);
    assert_eq!(core.available(), 4);
    let stats = core.stats(ms(0));
    assert_eq!(stats.rejected_closed, 5);
    assert_conserved(&core, ms(0));
}

#[test]
fn cancelling_the_head_lets_the_next_through_and_a_middle_one_changes_nothing() {
    let mut core = Core::new(10, 8, Oversize::Reject);
    assert_eq!(core.offer(5, 0), Ok(Offer::Granted));
    let head = queue(&mut core, 9, ms(0), "head");
    let middle = queue(&mut core, 7, ms(0), "middle");
    queue(&mut core, 2, ms(0), "tail");
    assert_eq!(core.cancel(middle), Some("middle"));
    assert_eq!(core.cancel(middle), None, "already gone");
    assert!(!core.can_grant());
    assert_eq!(core.cancel(head), Some("head"));
    assert_eq!(grant_all(&mut core, ms(1)), ["tail"]);
    assert_eq!(core.cancel(head), None);
    let stats = core.stats(ms(1));
    assert_eq!(
        (stats.cancelled, stats.flow.depth, stats.waiting),
        (2, 0, 0)
    );
    assert_conserved(&core, ms(1));
}

#[test]
fn timeouts_refuse_due_waiters_and_report_their_wait() {
    let mut core = Core::new(1, 8, Oversize::Reject);
    assert_eq!(core.offer(1, 0), Ok(Offer::Granted));
    assert_eq!(core.offer(1, 0), Ok(Offer::MustWait));
    core.enqueue(1, 0, ms(0), Some(ms(100)), "short")
        .expect("room");
    core.enqueue(1, 0, ms(10), None, "forever").expect("room");
    let patient = core
        .enqueue(1, 0, ms(20), Some(ms(500)), "patient")
        .expect("room");
    let mut expired = Vec::new();
    core.expire(ms(99), |_, who, waited| expired.push((who, waited)));
    assert!(expired.is_empty());
    core.expire(ms(100), |_, who, waited| expired.push((who, waited)));
    assert_eq!(expired, [("short", Duration::from_millis(100))]);
    assert_eq!(
        core.time_out(patient, ms(50)),
        Some(("patient", Duration::from_millis(30)))
    );
    assert_eq!(core.time_out(patient, ms(60)), None);
    let stats = core.stats(ms(60));
    assert_eq!(stats.rejected_timeout, 2);
    assert_eq!(stats.flow.oldest_age, Duration::from_millis(50));
    assert_conserved(&core, ms(60));
}

#[test]
fn stats_follow_the_documented_mapping() {
    let mut core = Core::new(100, 8, Oversize::Reject);
    assert_eq!(core.offer(60, 0), Ok(Offer::Granted));
    queue(&mut core, 50, ms(10), "a");
    queue(&mut core, 30, ms(20), "b");
    let stats = core.stats(ms(50));
    assert_eq!(stats.flow.offered, 3);
    assert_eq!(stats.flow.accepted, 3);
    assert_eq!(stats.flow.delivered, 1);
    assert_eq!(stats.flow.depth, 2);
    assert_eq!(stats.flow.bytes, 80);
    assert_eq!(stats.flow.oldest_age, Duration::from_millis(40));
    assert_eq!(stats.flow.max_depth, 2);
    assert_eq!(
        (stats.total, stats.available, stats.held, stats.waiters),
        (100, 40, 60, 2)
    );
    core.release(60);
    assert_eq!(grant_all(&mut core, ms(70)), ["a", "b"]);
    let stats = core.stats(ms(80));
    assert_eq!(stats.flow.delivered, 3);
    assert_eq!(stats.flow.max_queue_wait, Duration::from_millis(60));
    assert_eq!(
        (stats.flow.depth, stats.flow.bytes, stats.flow.oldest_age),
        (0, 0, Duration::ZERO)
    );
    assert_conserved(&core, ms(80));
}

#[test]
fn zero_sized_requests_still_respect_fifo() {
    let mut core = Core::new(1, 8, Oversize::Reject);
    assert_eq!(core.offer(0, 0), Ok(Offer::Granted));
    assert_eq!(core.offer(1, 0), Ok(Offer::Granted));
    queue(&mut core, 1, ms(0), "one");
    assert_eq!(core.offer(0, 0), Ok(Offer::MustWait));
}

#[test]
fn dual_requests_need_both_dimensions_at_once() {
    let mut core: SemaphoreCore<DualAmount, &'static str> =
        SemaphoreCore::new(DualAmount::new(2, 100), 8, Oversize::Reject);
    assert_eq!(
        core.offer(DualAmount::new(1, 90), DualAmount::default()),
        Ok(Offer::Granted)
    );
    // One item free but only 10 bytes: must wait, and blocks a later small one.
    assert_eq!(
        core.offer(DualAmount::new(1, 20), DualAmount::default()),
        Ok(Offer::MustWait)
    );
    core.enqueue(
        DualAmount::new(1, 20),
        DualAmount::default(),
        ms(0),
        None,
        "wide",
    )
    .expect("room");
    assert_eq!(
        core.offer(DualAmount::new(3, 1), DualAmount::default()),
        Err(AcquireError::TooLarge {
            requested: DualAmount::new(3, 1),
            total: DualAmount::new(2, 100)
        })
    );
    core.release(DualAmount::new(1, 90));
    assert_eq!(grant_all(&mut core, ms(1)), ["wide"]);
    assert_eq!(core.available(), DualAmount::new(1, 80));
    let stats = core.stats(ms(1));
    assert!(stats.flow.is_conserved());
}
