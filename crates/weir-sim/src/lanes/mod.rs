//! Thin drivers ("lanes") over the real `weir-flow` cores, one per strategy.

mod scratch;

use crate::engine::Lane;
use crate::strategy::Strategy;

/// The lane that runs `strategy`, named `name` in tables and errors.
pub(crate) fn build(strategy: Strategy, name: &str) -> Box<dyn Lane> {
    scratch::build(strategy, name)
}
