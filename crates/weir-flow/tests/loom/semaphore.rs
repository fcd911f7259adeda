//! loom models of the semaphore.
