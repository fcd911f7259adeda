//! Parking the calling thread on a future, for the `acquire_blocking` methods only.

use std::future::Future;
use std::task::{Context, Poll, Wake, Waker};
use std::thread::{self, Thread};

/// Wakes a parked thread.
struct ThreadWaker(Thread);

impl Wake for ThreadWaker {
    fn wake(self: std::sync::Arc<Self>) {
        self.0.unpark();
    }

    fn wake_by_ref(self: &std::sync::Arc<Self>) {
        self.0.unpark();
    }
}

/// Runs `future` to completion on the calling thread, parking it while it is pending.
///
/// # Panics
///
/// When called from a thread that runs a tokio runtime: parking it would stall every
/// task that runtime schedules there, and could deadlock the releases it waits for.
pub(crate) fn block_on<F: Future>(what: &str, future: F) -> F::Output {
    assert!(
        tokio::runtime::Handle::try_current().is_err(),
        "{what} was called on a tokio runtime thread; it parks the thread, which must \
         never happen there: use the async method (`.await`) instead"
    );
    let waker = Waker::from(std::sync::Arc::new(ThreadWaker(thread::current())));
    let mut cx = Context::from_waker(&waker);
    let mut future = std::pin::pin!(future);
    loop {
        if let Poll::Ready(output) = future.as_mut().poll(&mut cx) {
            return output;
        }
        // A spurious unpark only costs one more poll.
        thread::park();
    }
}
