//! `[runtime]`, `[wal]` and `[quarantine]`: the daemon-wide sections.

use std::net::{Ipv4Addr, SocketAddr};
use std::num::NonZeroU32;
use std::path::PathBuf;

use serde::Serialize;
use weir_wal::{OnFull, SyncMode};

use crate::keys::units::{serialize_std_duration, string_enum};
use crate::keys::{ByteSize, Duration, Section};

/// `[runtime]`: where weir keeps its data, how much memory it may plan for, where it
/// reports. Its keys are declared in its parse function (`weir config reference`).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RuntimeConfig {
    /// `data_dir`: the root of weir's own files.
    pub data_dir: PathBuf,
    /// `memory_target`: what the worst-case memory estimate is compared against.
    pub memory_target: ByteSize,
    /// `status_addr`: the address of `/status`, `/metrics` and the dashboard.
    pub status_addr: SocketAddr,
    /// `status_public`: whether a non-loopback `status_addr` is intended.
    pub status_public: bool,
    /// `status_max_connections`: connections the status server holds open at once;
    /// further clients wait in the kernel's listen backlog.
    pub status_max_connections: NonZeroU32,
    /// `status_header_timeout`: how long a status client may take to send a request
    /// head, once connected or after its previous response (the idle timeout).
    pub status_header_timeout: Duration,
    /// `shutdown_timeout`: how long shutdown may drain sinks (zero: do not drain).
    #[serde(serialize_with = "serialize_std_duration")]
    pub shutdown_timeout: std::time::Duration,
    /// `log_queue`: lines the bounded log writer holds.
    pub log_queue: NonZeroU32,
    /// `log_line_max_bytes`: the longest log line kept.
    pub log_line_max_bytes: ByteSize,
    /// `pid_file`: where `weir run` writes its process id (for `weir reload`).
    pub pid_file: Option<PathBuf>,
}

impl RuntimeConfig {
    /// Default `memory_target`.
    pub const DEFAULT_MEMORY_TARGET: ByteSize = ByteSize::mib(256);
    /// Default `status_addr`.
    pub const DEFAULT_STATUS_ADDR: SocketAddr =
        SocketAddr::new(std::net::IpAddr::V4(Ipv4Addr::LOCALHOST), 9464);

    pub(super) fn parse(s: &mut Section<'_>) -> Option<Self> {
        let data_dir = s
            .key(
                "data_dir",
                "Root of weir's own files (`<data_dir>/wal`, `<data_dir>/quarantine`, cursors).",
            )
            .example("./weir-data")
            .req("weir keeps its WAL and cursors under it");
        let memory_target = s
            .key(
                "memory_target",
                "The memory the worst-case estimate of `weir validate` is compared against.",
            )
            .or(Self::DEFAULT_MEMORY_TARGET);
        let status_addr = s
            .key(
                "status_addr",
                "Address of `/status`, `/metrics` and the dashboard; loopback unless `status_public`.",
            )
            .or(Self::DEFAULT_STATUS_ADDR);
        let status_public = s
            .key(
                "status_public",
                "Whether a non-loopback `status_addr` is intended (the endpoints have no authentication).",
            )
            .or(false);
        let status_max_connections = s
            .key(
                "status_max_connections",
                "Connections the status server holds open at once (each holds a file descriptor and up to 32 KiB of buffers); further clients wait in the listen backlog.",
            )
            .unit("connections")
            .or(NonZeroU32::new(64).unwrap_or(NonZeroU32::MIN));
        let status_header_timeout = s
            .key(
                "status_header_timeout",
                "How long a status client may take to send a request head once connected or after its previous response; then its connection is closed.",
            )
            .or(Duration::secs(10));
        let shutdown_timeout = s
            .key(
                "shutdown_timeout",
                "How long shutdown may drain sinks before giving up (0s: do not drain).",
            )
            .or(std::time::Duration::from_secs(30));
        let log_queue = s
            .key(
                "log_queue",
                "Lines the bounded log writer holds before it drops (and counts) new ones.",
            )
            .unit("lines")
            .or(NonZeroU32::new(1024).unwrap_or(NonZeroU32::MIN));
        let log_line_max_bytes = s
            .key(
                "log_line_max_bytes",
                "Longest log line kept; longer lines are truncated.",
            )
            .or(ByteSize::kib(4));
        let pid_file = s
            .key(
                "pid_file",
                "Where `weir run` writes its process id while it runs (removed at exit); `weir reload CONFIG` sends SIGHUP to it. Unset: no file.",
            )
            .example("/run/weir/weir.pid")
            .opt();
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
            status_max_connections,
            status_header_timeout,
            shutdown_timeout,
            log_queue,
            log_line_max_bytes,
            pid_file,
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

/// `[wal]`: the write-ahead log every source writes to and every sink reads from. Its
/// keys are declared in its parse function (`weir config reference`).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct WalConfig {
    /// `dir`: the directory of the segment files.
    pub dir: PathBuf,
    /// `max_disk`: the disk budget of all segments together.
    pub max_disk: ByteSize,
    /// `on_full`: what happens at `max_disk` (weir-wal's own enum).
    pub on_full: OnFull,
    /// `segment_bytes`: the size at which a segment is closed (eviction and retention
    /// work in whole segments).
    pub segment_bytes: ByteSize,
    /// `max_pending_bytes`: source batches admitted but not yet durable (the byte
    /// semaphore of the source → WAL channel).
    pub max_pending_bytes: ByteSize,
    /// `sync` and `sync_interval`: the durability mode (weir-wal's own enum).
    pub sync: SyncMode,
    /// `channel_batches`: batches the source → WAL channel holds.
    pub channel_batches: NonZeroU32,
}

impl WalConfig {
    /// Default `segment_bytes`.
    pub const DEFAULT_SEGMENT_BYTES: ByteSize = ByteSize::mib(64);

    pub(super) fn parse(s: &mut Section<'_>, data_dir: Option<&PathBuf>) -> Option<Self> {
        let dir = s
            .key("dir", "Directory of the segment files.")
            .default_text("`<data_dir>/wal`")
            .example("/var/lib/weir/wal")
            .opt::<PathBuf>();
        let max_disk = s
            .key("max_disk", "Disk budget of all segments together.")
            .example("1 GiB")
            .req::<ByteSize>("the WAL needs a disk budget, e.g. max_disk = \"1 GiB\"");
        let on_full = s
            .key(
                "on_full",
                "What happens at `max_disk`: sources wait, sources refuse, or the oldest data is deleted (a counted gap).",
            )
            .example("block")
            .req::<OnFull>(
                "there is no default because this decides what happens to acknowledged data when \
                 the disk budget is full: \"block\" (sources wait until sinks catch up), \"reject\" \
                 (sources refuse new data) or \"drop_oldest\" (the oldest data is deleted and every \
                 sink that had not read it sees a counted gap)",
            );
        let segment_bytes = s
            .key(
                "segment_bytes",
                "Size at which a segment is closed and a new one started; at most half of `max_disk`.",
            )
            .or(Self::DEFAULT_SEGMENT_BYTES);
        let max_pending_bytes = s
            .key(
                "max_pending_bytes",
                "Bytes of source batches admitted but not yet durable (the source → WAL channel's byte bound).",
            )
            .or(ByteSize::mib(8));
        let mode = s
            .key(
                "sync",
                "When appends are fsynced: before each is acknowledged, or every `sync_interval`.",
            )
            .or(SyncKey::Always);
        let interval = s
            .key(
                "sync_interval",
                "With `sync = \"interval\"`: how often appends are fsynced.",
            )
            .default_text("100ms with `sync = \"interval\"`")
            .example("100ms")
            .opt::<Duration>();
        let channel_batches = s
            .key("channel_batches", "Batches the source → WAL channel holds.")
            .or(NonZeroU32::new(256).unwrap_or(NonZeroU32::MIN));

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
    /// `dir`: the directory.
    pub dir: PathBuf,
    /// `max_disk`: the disk budget; above it, quarantined records are dropped and counted.
    pub max_disk: ByteSize,
}

impl QuarantineConfig {
    pub(super) fn parse(s: &mut Section<'_>, data_dir: Option<&PathBuf>) -> Option<Self> {
        let dir = s
            .key("dir", "Directory of the quarantined records.")
            .default_text("`<data_dir>/quarantine`")
            .example("/var/lib/weir/quarantine")
            .opt::<PathBuf>();
        let max_disk = s
            .key(
                "max_disk",
                "Disk budget; above it, quarantined records are dropped and counted.",
            )
            .or(ByteSize::mib(256));
        let dir = match (dir, data_dir) {
            (Some(dir), _) => dir,
            (None, Some(data_dir)) => data_dir.join("quarantine"),
            (None, None) => return None,
        };
        Some(Self { dir, max_disk })
    }
}
