//! Deterministic discrete-event simulator for weir's flow-control primitives.
//!
//! It drives the real `weir-flow` cores on a virtual clock in integer milliseconds and
//! reproduces the experiments of the seed documents (`weir lab`).
#![warn(missing_docs)]
