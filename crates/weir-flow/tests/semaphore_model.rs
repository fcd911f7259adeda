//! Model test: random acquire / release / cancel / resize / split / close sequences run
//! against the real async semaphore (polled by hand) and a plain FIFO model. After every
//! step: nothing is over-granted, grants follow FIFO order and wake their waiters, what
//! the permits hold matches the semaphore's gauges, and the stats are conserved.

use std::collections::{BTreeMap, VecDeque};
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::task::{Context, Poll, Wake, Waker};

use proptest::prelude::*;
use weir_flow::semaphore::{AcquireError, Oversize, Permit, Semaphore, SemaphoreConfig};

const TOTAL: u64 = 10;
const MAX_WAITERS: usize = 4;

#[derive(Debug, Clone)]
enum Op {
    Acquire(u64),
    Release(usize),
    Cancel(usize),
    Resize(usize, u64),
    Split(usize, u64),
    Close,
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        6 => (0..=TOTAL + 2).prop_map(Op::Acquire),
        4 => any::<usize>().prop_map(Op::Release),
        2 => any::<usize>().prop_map(Op::Cancel),
        3 => (any::<usize>(), 0..=TOTAL + 2).prop_map(|(i, n)| Op::Resize(i, n)),
        1 => (any::<usize>(), 0..=TOTAL).prop_map(|(i, n)| Op::Split(i, n)),
        1 => Just(Op::Close),
    ]
}

#[derive(Default)]
struct Flag(AtomicBool);

impl Wake for Flag {
    fn wake(self: Arc<Self>) {
        self.0.store(true, Ordering::SeqCst);
    }
}

/// What a pending future resolves to: the permit (new or resized) or why not, with the
/// permit a refused resize keeps.
type Outcome = Result<Permit, (Option<Permit>, AcquireError)>;

struct Pending<'a> {
    future: Pin<Box<dyn Future<Output = Outcome> + 'a>>,
    woken: Arc<Flag>,
    /// What the permit inside a pending resize holds meanwhile (zero for an acquire).
    holding: u64,
}

impl Pending<'_> {
    fn poll(&mut self) -> Poll<Outcome> {
        self.woken.0.store(false, Ordering::SeqCst);
        let waker = Waker::from(Arc::clone(&self.woken));
        self.future.as_mut().poll(&mut Context::from_waker(&waker))
    }
}

/// The reference model: a FIFO queue of (key, need, holding) and what is held.
struct Model {
    oversize: Oversize,
    total: u64,
    held: u64,
    closed: bool,
    queue: VecDeque<(u64, u64, u64)>,
    /// Keys granted by the model in this step.
    granted: Vec<u64>,
}

impl Model {
    fn admissible(&self, need: u64, holding: u64) -> bool {
        if holding + need <= self.total {
            self.held + need <= self.total
        } else {
            self.oversize == Oversize::AdmitAloneWhenIdle && self.held == holding
        }
    }

    fn grant(&mut self) {
        while let Some(&(key, need, holding)) = self.queue.front() {
            if !self.admissible(need, holding) {
                break;
            }
            self.queue.pop_front();
            self.held += need;
            self.granted.push(key);
        }
    }

    /// What a new request should meet: Ok(true) granted now, Ok(false) queued.
    fn offer(&mut self, key: u64, need: u64, holding: u64) -> Result<bool, AcquireError> {
        if self.closed {
            return Err(AcquireError::Closed);
        }
        if holding + need > self.total && self.oversize == Oversize::Reject {
            return Err(AcquireError::TooLarge {
                requested: holding + need,
                total: self.total,
            });
        }
        if self.queue.is_empty() && self.admissible(need, holding) {
            self.held += need;
            return Ok(true);
        }
        if self.queue.len() >= MAX_WAITERS {
            return Err(AcquireError::TooManyWaiters {
                max_waiters: MAX_WAITERS,
            });
        }
        self.queue.push_back((key, need, holding));
        Ok(false)
    }
}

fn run(oversize: Oversize, ops: Vec<Op>) -> Result<(), TestCaseError> {
    let sem = Semaphore::new(SemaphoreConfig {
        total: TOTAL,
        max_waiters: MAX_WAITERS,
        oversize,
    });
    let mut model = Model {
        oversize,
        total: TOTAL,
        held: 0,
        closed: false,
        queue: VecDeque::new(),
        granted: Vec::new(),
    };
    let mut permits: Vec<Permit> = Vec::new();
    let mut pending: BTreeMap<u64, Pending<'_>> = BTreeMap::new();
    let mut next_key = 0_u64;

    for op in ops {
        let mut started: Option<(u64, Pending<'_>, Result<bool, AcquireError>)> = None;
        match op {
            Op::Acquire(need) => {
                let future = Box::pin({
                    let sem = &sem;
                    async move { sem.acquire(need).await.map_err(|e| (None, e)) }
                });
                let expected = model.offer(next_key, need, 0);
                started = Some((
                    next_key,
                    Pending {
                        future,
                        woken: Arc::default(),
                        holding: 0,
                    },
                    expected,
                ));
            }
            Op::Release(i) if !permits.is_empty() => {
                let permit = permits.swap_remove(i % permits.len());
                model.held -= permit.amount();
                drop(permit);
            }
            Op::Cancel(i) if !pending.is_empty() => {
                let key = *pending.keys().nth(i % pending.len()).expect("in range");
                drop(pending.remove(&key));
                // Everything granted was collected after the previous step, so the
                // dropped future was still queued. A dropped resize drops its permit.
                let pos = model.queue.iter().position(|&(k, ..)| k == key);
                prop_assert!(pos.is_some(), "pending request {key} unknown to the model");
                if let Some((_, _, holding)) = pos.and_then(|pos| model.queue.remove(pos)) {
                    model.held -= holding;
                }
            }
            Op::Resize(i, target) if !permits.is_empty() => {
                let mut permit = permits.swap_remove(i % permits.len());
                let amount = permit.amount();
                let expected = if target <= amount {
                    model.held -= amount - target;
                    Ok(true)
                } else {
                    model.offer(next_key, target - amount, amount)
                };
                let future = Box::pin(async move {
                    match permit.resize(target).await {
                        Ok(()) => Ok(permit),
                        Err(e) => Err((Some(permit), e)),
                    }
                });
                started = Some((
                    next_key,
                    Pending {
                        future,
                        woken: Arc::default(),
                        holding: amount,
                    },
                    expected,
                ));
            }
            Op::Split(i, part) if !permits.is_empty() => {
                let index = i % permits.len();
                let amount = permits[index].amount();
                match permits[index].split(part) {
                    Some(split) => {
                        prop_assert!(part <= amount);
                        prop_assert_eq!(permits[index].amount() + split.amount(), amount);
                        permits.push(split);
                    }
                    None => prop_assert!(part > amount),
                }
            }
            Op::Close => {
                sem.close();
                model.closed = true;
                model.queue.clear();
            }
            Op::Release(_) | Op::Cancel(_) | Op::Resize(..) | Op::Split(..) => {}
        }
        model.grant();

        // A new request: its first poll must match the model's decision.
        if let Some((key, mut fut, expected)) = started {
            next_key += 1;
            match (fut.poll(), expected) {
                (Poll::Ready(Ok(permit)), Ok(true)) => permits.push(permit),
                (Poll::Pending, Ok(false)) => {
                    pending.insert(key, fut);
                }
                (Poll::Ready(Err((kept, error))), Err(expected)) => {
                    prop_assert_eq!(error, expected);
                    permits.extend(kept);
                }
                (got, expected) => {
                    return Err(TestCaseError::fail(format!(
                        "request {key}: expected {expected:?}, got ready: {}",
                        got.is_ready()
                    )));
                }
            }
        }
        // Waiters the model granted must have been woken, in FIFO (key) order, and
        // must complete; waiters failed by close must be woken and fail.
        let granted: Vec<u64> = std::mem::take(&mut model.granted);
        let mut keys: Vec<u64> = pending.keys().copied().collect();
        keys.sort_unstable();
        for key in keys {
            let should_finish = granted.contains(&key) || model.closed;
            let fut = pending.get_mut(&key).expect("key listed");
            let woken = fut.woken.0.load(Ordering::SeqCst);
            match fut.poll() {
                Poll::Ready(Ok(permit)) => {
                    prop_assert!(granted.contains(&key), "request {key} granted out of turn");
                    prop_assert!(woken, "request {key} granted but not woken");
                    permits.push(permit);
                    pending.remove(&key);
                }
                Poll::Ready(Err((kept, error))) => {
                    prop_assert!(model.closed, "request {key} failed with {error:?}");
                    prop_assert_eq!(error, AcquireError::Closed);
                    prop_assert!(woken, "request {key} failed but not woken");
                    permits.extend(kept);
                    pending.remove(&key);
                }
                Poll::Pending => prop_assert!(!should_finish, "request {key} should be done"),
            }
        }

        // Never over-granted; the gauges match what the permits hold; conserved.
        let held: u64 = permits.iter().map(Permit::amount).sum::<u64>()
            + pending.values().map(|p| p.holding).sum::<u64>();
        prop_assert_eq!(held, model.held);
        let stats = sem.semaphore_stats();
        prop_assert_eq!(stats.held, held);
        prop_assert!(held <= TOTAL || oversize == Oversize::AdmitAloneWhenIdle);
        prop_assert_eq!(stats.available, TOTAL.saturating_sub(held));
        prop_assert_eq!(stats.waiters, model.queue.len());
        prop_assert!(stats.flow.is_conserved(), "{:?}", stats);
    }
    drop(pending);
    drop(permits);
    let stats = sem.semaphore_stats();
    prop_assert_eq!(stats.available, TOTAL);
    prop_assert_eq!(stats.held, 0);
    prop_assert!(stats.flow.is_conserved());
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]

    #[test]
    fn matches_the_fifo_model_when_oversize_is_rejected(ops in prop::collection::vec(op(), 1..60)) {
        run(Oversize::Reject, ops)?;
    }

    #[test]
    fn matches_the_fifo_model_when_oversize_is_admitted_alone(ops in prop::collection::vec(op(), 1..60)) {
        run(Oversize::AdmitAloneWhenIdle, ops)?;
    }
}
