//! Errors of the simulator.

/// Why a simulation could not produce its result.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum SimError {
    /// The run was still going at its horizon: the strategy stopped making progress.
    #[error(
        "strategy `{strategy}` was not finished after {horizon_ms} ms of simulated time \
         ({sent} messages sent, {completed} finished); check that its limits let messages through \
         (a credit window or capacity of at least 1)"
    )]
    Stalled {
        /// The strategy's name.
        strategy: String,
        /// The horizon that was reached.
        horizon_ms: u64,
        /// Messages sent by then.
        sent: u64,
        /// Messages finished by then.
        completed: u64,
    },
    /// A limit is outside the range the simulator accepts.
    #[error("{name} must be {expected}, found {found}")]
    BadLimit {
        /// The limit's name, as the command line or scenario file spells it.
        name: &'static str,
        /// What was expected.
        expected: &'static str,
        /// What was found.
        found: String,
    },
}
