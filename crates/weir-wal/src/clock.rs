//! The wall clock: the one place the log reads the time of day (record append times,
//! segment creation times, the lag of cursors).

/// Wall-clock milliseconds since the UNIX epoch (record append times).
pub(crate) fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}
