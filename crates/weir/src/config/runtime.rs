//! `[runtime]`, `[wal]` and `[quarantine]`: the daemon-wide sections.

use std::net::{Ipv4Addr, SocketAddr};
use std::num::NonZeroU32;
use std::path::PathBuf;

use serde::Serialize;
use weir_wal::{OnFull, SyncMode};

use crate::keys::units::{serialize_std_duration, string_enum};
use crate::keys::{ByteSize, Duration, Section};

/// `[runtime]`: where weir keeps its data, how much memory it may plan for, where it
/// reports.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RuntimeConfig {
    /// Root of weir's own files (`<data_dir>/wal`, `<data_dir>/quarantine`). Required.
    pub data_dir: PathBuf,
    /// The memory the worst-case estimate of `weir validate` is compared against.
    /// Default 256 MiB.
    pub memory_target: ByteSize,
    /// Address of `/status`, `/metrics` and the dashboard. Default `127.0.0.1:9464`.
    pub status_addr: SocketAddr,
    /// Whether a non-loopback `status_addr` is intended (the endpoints have no
    /// authentication). Default false.
    pub status_public: bool,
    /// How long shutdown may drain sinks before giving up (zero: do not drain).
    /// Default 30 s.
    #[serde(serialize_with = "serialize_std_duration")]
    pub shutdown_timeout: std::time::Duration,
    /// Lines the bounded log writer holds before it drops (and counts) new ones.
    /// Default 1024.
    pub log_queue: NonZeroU32,
    /// Longest log line kept; longer lines are truncated. Default 4 KiB.
    pub log_line_max_bytes: ByteSize,
}

impl RuntimeConfig {
    /// Default `memory_target`.
    pub const DEFAULT_MEMORY_TARGET: ByteSize = ByteSize::mib(256);
    /// Default `status_addr`.
    pub const DEFAULT_STATUS_ADDR: SocketAddr =
        SocketAddr::new(std::net::IpAddr::V4(Ipv4Addr::LOCALHOST), 9464);

    pub(super) fn parse(s: &mut Section<'_>) -> Option<Self> {
        let data_dir = s.req("data_dir", "weir keeps its WAL and cursors under it");
        let memory_target = s.or("memory_target", Self::DEFAULT_MEMORY_TARGET);
        let status_addr = s.or("status_addr", Self::DEFAULT_STATUS_ADDR);
        let status_public = s.or("status_public", false);
        let shutdown_timeout = s.or("shutdown_timeout", std::time::Duration::from_secs(30));
        let log_queue = s.or(
            "log_queue",
            NonZeroU32::new(1024).unwrap_or(NonZeroU32::MIN),
        );
        let log_line_max_bytes = s.or("log_line_max_bytes", ByteSize::kib(4));
        if !status_addr.ip().is_loopback() && !status_public {
            s.error(
                "status_addr",
                format!(
                    "{status_addr} is not a loopback address, and /status and /metrics have no \
                     authentication; use 127.0.0.1, or set runtime.status_public = true to expose them"
                ),
            );
        }
        Some(Self {
            data_dir: data_dir?,
            memory_target,
            status_addr,
            status_public,
            shutdown_timeout,
            log_queue,
            log_line_max_bytes,
        })
    }
}

/// The `sync` key's value before `sync_interval` is attached to make a
/// [`weir_wal::SyncMode`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum SyncKey {
    Always,
    Interval,
}

string_enum!(SyncKey { "always" => Always, "interval" => Interval });

/// `[wal]`: the write-ahead log every source writes to and every sink reads from.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct WalConfig {
    /// Directory of the segment files. Default `<data_dir>/wal`.
    pub dir: PathBuf,
    /// Disk budget of all segments together. Required.
    pub max_disk: ByteSize,
    /// What happens at `max_disk` (weir-wal's own enum). Required, no default.
    pub on_full: OnFull,
    /// Size at which a segment is closed and a new one started. Default 64 MiB, and at
    /// most half of `max_disk` (eviction and retention work in whole segments).
    pub segment_bytes: ByteSize,
    /// Bytes of source batches admitted but not yet durable (the byte semaphore of the
    /// source → WAL channel). Default 8 MiB.
    pub max_pending_bytes: ByteSize,
    /// Durability mode (weir-wal's own enum). Default `always`; `interval` with
    /// `sync_interval` (default 100 ms).
    pub sync: SyncMode,
    /// Batches the source → WAL channel holds. Default 256.
    pub channel_batches: NonZeroU32,
}

impl WalConfig {
    /// Default `segment_bytes`.
    pub const DEFAULT_SEGMENT_BYTES: ByteSize = ByteSize::mib(64);

    pub(super) fn parse(s: &mut Section<'_>, data_dir: Option<&PathBuf>) -> Option<Self> {
        let dir = s.opt::<PathBuf>("dir");
        let max_disk = s.req::<ByteSize>(
            "max_disk",
            "the WAL needs a disk budget, e.g. max_disk = \"1 GiB\"",
        );
        let on_full = s.req::<OnFull>(
            "on_full",
            "there is no default because this decides what happens to acknowledged data when \
             the disk budget is full: \"block\" (sources wait until sinks catch up), \"reject\" \
             (sources refuse new data) or \"drop_oldest\" (the oldest data is deleted and every \
             sink that had not read it sees a counted gap)",
        );
        let segment_bytes = s.or("segment_bytes", Self::DEFAULT_SEGMENT_BYTES);
        let max_pending_bytes = s.or("max_pending_bytes", ByteSize::mib(8));
        let mode = s.or("sync", SyncKey::Always);
        let interval = s.opt::<Duration>("sync_interval");
        let channel_batches = s.or(
            "channel_batches",
            NonZeroU32::new(256).unwrap_or(NonZeroU32::MIN),
        );

        let sync = match (mode, interval) {
            (SyncKey::Always, None) => SyncMode::Always,
            (SyncKey::Always, Some(_)) => {
                s.error(
                    "sync_interval",
                    "only applies with sync = \"interval\"; remove it or set sync = \"interval\"",
                );
                SyncMode::Always
            }
            (SyncKey::Interval, every) => {
                SyncMode::Interval(every.unwrap_or(Duration::millis(100)).get())
            }
        };
        if let Some(max_disk) = max_disk
            && segment_bytes.bytes() > max_disk.bytes() / 2
            && !s.failed(&["segment_bytes"])
        {
            s.error(
                "segment_bytes",
                format!(
                    "{segment_bytes} leaves room for fewer than 2 segments in wal.max_disk = {max_disk}; \
                     retention and eviction work in whole segments: lower segment_bytes or raise max_disk"
                ),
            );
        }
        let dir = match (dir, data_dir) {
            (Some(dir), _) => dir,
            (None, Some(data_dir)) => data_dir.join("wal"),
            (None, None) => return None,
        };
        Some(Self {
            dir,
            max_disk: max_disk?,
            on_full: on_full?,
            segment_bytes,
            max_pending_bytes,
            sync,
            channel_batches,
        })
    }
}

/// `[quarantine]`: where records a sink cannot encode are kept, with the reason.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct QuarantineConfig {
    /// Directory. Default `<data_dir>/quarantine`.
    pub dir: PathBuf,
    /// Disk budget; above it, quarantined records are dropped and counted. Default 256 MiB.
    pub max_disk: ByteSize,
}

impl QuarantineConfig {
    pub(super) fn parse(s: &mut Section<'_>, data_dir: Option<&PathBuf>) -> Option<Self> {
        let dir = s.opt::<PathBuf>("dir");
        let max_disk = s.or("max_disk", ByteSize::mib(256));
        let dir = match (dir, data_dir) {
            (Some(dir), _) => dir,
            (None, Some(data_dir)) => data_dir.join("quarantine"),
            (None, None) => return None,
        };
        Some(Self { dir, max_disk })
    }
}
