//! systemd's readiness protocol (`sd_notify(3)`): under a unit with `Type=notify`, `weir
//! run` tells the service manager when every component runs (`READY=1`: `systemctl
//! start` returns, units ordered after weir start), when it reloads (`RELOADING=1`) and
//! when it stops (`STOPPING=1`).
//!
//! Each function sends one datagram to the socket named by `NOTIFY_SOCKET` and is a
//! no-op when that variable is unset (weir was not started by systemd). A failure to
//! send is logged at DEBUG and otherwise ignored: the pipeline never depends on it.

use sd_notify::NotifyState;

/// The variable systemd sets to the socket it listens on.
const NOTIFY_SOCKET: &str = "NOTIFY_SOCKET";

/// `READY=1`: startup is complete, every source and sink runs (also sent after a reload).
pub fn ready() {
    send("READY=1", &[NotifyState::Ready]);
}

/// `RELOADING=1` with the current `MONOTONIC_USEC`: a reload has begun; [`ready`] ends
/// it.
pub fn reloading() {
    match NotifyState::monotonic_usec_now() {
        Ok(now) => send("RELOADING=1", &[NotifyState::Reloading, now]),
        Err(e) => {
            tracing::debug!("systemd notification RELOADING=1 sent without MONOTONIC_USEC: {e}");
            send("RELOADING=1", &[NotifyState::Reloading]);
        }
    }
}

/// `STOPPING=1`: the shutdown has begun (sources stop, sinks drain).
pub fn stopping() {
    send("STOPPING=1", &[NotifyState::Stopping]);
}

fn send(what: &str, states: &[NotifyState<'_>]) {
    if std::env::var_os(NOTIFY_SOCKET).is_none() {
        return;
    }
    if let Err(e) = sd_notify::notify(states) {
        tracing::debug!("systemd notification {what} not sent to ${NOTIFY_SOCKET}: {e}");
    }
}
