//! The startup check of a sink (`healthcheck = true`, the default): before `weir run`
//! opens the WAL, each sink that writes to a server reaches it the way it will when
//! running, so that missing credentials, a missing bucket or stream, or an unreachable
//! host stop the start with a message naming the key, instead of a sink that fails
//! once records flow. Each type's check is its [`OpenSink::healthcheck`]
//! (`sinks/<type>/healthcheck.rs`); sinks that write local files have none.

#[cfg(doc)]
use super::OpenSink;
use super::SinkConfig;

/// How much longer than `healthcheck_timeout` a check may run before it is cancelled.
const BACKSTOP: std::time::Duration = std::time::Duration::from_secs(2);

impl SinkConfig {
    /// Runs the startup check of the sink `name`, bounded by `healthcheck_timeout`.
    /// The caller decides whether to run it (`healthcheck`).
    ///
    /// # Errors
    ///
    /// What failed, prefixed with `sinks.NAME` and followed by what to do.
    ///
    /// # Cancel safety
    ///
    /// Cancel-safe: a check creates nothing that outlives it (an object-store probe
    /// left by a cancelled check is overwritten by the next one).
    pub async fn healthcheck(&self, name: &str) -> anyhow::Result<()> {
        let timeout = self.healthcheck_timeout.get();
        // Each check gives up within `timeout` saying what it waited for; this bound
        // only catches one that does not.
        let check = self.kind.healthcheck(name, timeout);
        let failed = match tokio::time::timeout(timeout + BACKSTOP, check).await {
            Ok(Ok(())) => return Ok(()),
            Ok(Err(message)) => message,
            Err(_) => format!(
                "no answer within healthcheck_timeout = {}",
                humantime::format_duration(timeout)
            ),
        };
        anyhow::bail!(
            "sinks.{name}: startup check failed: {failed}. To start without the check, set \
             sinks.{name}.healthcheck = false: the sink then shows `failed` with the reason \
             in /status and retries until it succeeds"
        )
    }
}
