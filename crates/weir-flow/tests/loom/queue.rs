//! loom models of the bounded queue.
