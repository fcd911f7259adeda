//! The queue inventory of a configuration: every bounded buffer with its bound in items
//! and bytes, the worst-case memory estimate, and the disk budgets. `weir validate`
//! prints it; the daemon and `/status` can report live depths against the same bounds.

use std::path::PathBuf;

use weir_wal::OnFull;

use super::Config;
use crate::keys::{Bounds, QueueBound, join, times};

/// A disk budget and what happens when it is reached.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DiskBudget {
    /// `wal` or `quarantine`.
    pub name: &'static str,
    /// Its directory.
    pub dir: PathBuf,
    /// The budget in bytes.
    pub max_bytes: u64,
    /// What happens at the budget.
    pub when_full: String,
}

/// Every bound of a configuration.
///
/// The memory estimate is the sum of every queue's byte bound: an upper bound, since a
/// record counted in one queue (say a source's window) has usually moved on before the
/// next (the WAL channel) fills. Not counted: the allocator's overhead, the runtime's
/// own memory, and per-record decoding scratch space.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Inventory {
    /// Each queue with its bound, sources first, then the WAL, sinks and logs.
    pub queues: Vec<QueueBound>,
    /// Sum of every queue's byte bound (saturating).
    pub memory_estimate_bytes: u64,
    /// `runtime.memory_target`.
    pub memory_target_bytes: u64,
    /// The WAL's and the quarantine's disk budgets.
    pub disks: Vec<DiskBudget>,
}

impl Inventory {
    /// Whether the worst-case estimate exceeds `runtime.memory_target`.
    pub fn over_target(&self) -> bool {
        self.memory_estimate_bytes > self.memory_target_bytes
    }
}

impl Config {
    /// Every queue's bound, the memory estimate and the disk budgets.
    pub fn inventory(&self) -> Inventory {
        let mut queues = Vec::new();
        for (name, source) in &self.sources {
            let mut bounds = Bounds::new(join("sources", name), &mut queues);
            source.kind.bounds(&mut bounds);
            bounds.add(
                "tickets",
                Some(source.max_uncommitted_tickets.get().into()),
                0,
                "commit tickets of batches not yet durable; their bytes count under wal.channel"
                    .to_owned(),
            );
        }
        Bounds::new("wal".to_owned(), &mut queues).add(
            "channel",
            Some(self.wal.channel_batches.get().into()),
            self.wal.max_pending_bytes.bytes(),
            format!(
                "source → WAL: channel_batches {} batches, bytes held by the semaphore wal.max_pending_bytes",
                self.wal.channel_batches
            ),
        );
        for (name, sink) in &self.sinks {
            let mut bounds = Bounds::new(join("sinks", name), &mut queues);
            bounds.add(
                "channel",
                Some(sink.channel_batches.get().into()),
                sink.channel_bytes(),
                format!(
                    "WAL → sink driver: channel_batches {} × read_batch_bytes {}",
                    sink.channel_batches, sink.read_batch_bytes
                ),
            );
            bounds.add(
                "reader",
                Some(2),
                weir_wal::reader_memory_bound(sink.read_batch_bytes.bytes()),
                format!(
                    "the WAL cursor's read-ahead: a batch read ahead and one handed over, of read_batch_bytes {} in chunks, and spare chunks kept for reuse",
                    sink.read_batch_bytes
                ),
            );
            sink.kind.bounds(&mut bounds);
        }
        Bounds::new("runtime".to_owned(), &mut queues).add(
            "log_queue",
            Some(self.runtime.log_queue.get().into()),
            times(
                self.runtime.log_queue.get(),
                self.runtime.log_line_max_bytes.bytes(),
            ),
            format!(
                "log lines: log_queue {} × log_line_max_bytes {}; newest dropped and counted when full",
                self.runtime.log_queue, self.runtime.log_line_max_bytes
            ),
        );
        Bounds::new("status".to_owned(), &mut queues).add(
            "connections",
            Some(self.runtime.status_max_connections.get().into()),
            times(
                self.runtime.status_max_connections.get(),
                crate::serve::CONNECTION_MEMORY_BYTES,
            ),
            format!(
                "the status server's open connections' buffers: status_max_connections {} × {}; \
                 a request head within status_header_timeout {}",
                self.runtime.status_max_connections,
                crate::keys::ByteSize::kib(crate::serve::CONNECTION_MEMORY_BYTES / 1024),
                self.runtime.status_header_timeout
            ),
        );
        let history = crate::telemetry::history::HistoryLayout::pipeline(
            self.sources.keys().map(String::as_str),
            self.sinks.keys().map(String::as_str),
        );
        Bounds::new("runtime".to_owned(), &mut queues).add(
            "history",
            Some(crate::telemetry::history::SAMPLES as u64),
            history.memory_bytes(crate::telemetry::history::SAMPLES),
            format!(
                "/history ring: {} samples ({} at one a second) × (1 + {} series) × 8 bytes, allocated at start",
                crate::telemetry::history::SAMPLES,
                humantime::format_duration(crate::telemetry::history::WINDOW),
                history.series().len()
            ),
        );
        let memory_estimate_bytes = queues
            .iter()
            .fold(0u64, |sum, q| sum.saturating_add(q.bytes));
        Inventory {
            queues,
            memory_estimate_bytes,
            memory_target_bytes: self.runtime.memory_target.bytes(),
            disks: self.disk_budgets(),
        }
    }

    fn disk_budgets(&self) -> Vec<DiskBudget> {
        let wal_when_full = match self.wal.on_full {
            OnFull::Block => {
                "on_full = block: appends wait for retention; sources are backpressured"
            }
            OnFull::Reject => "on_full = reject: appends fail at once; sources refuse new data",
            OnFull::DropOldest => {
                "on_full = drop_oldest: oldest segments are evicted; sinks that had not read them see a counted gap"
            }
        };
        vec![
            DiskBudget {
                name: "wal",
                dir: self.wal.dir.clone(),
                max_bytes: self.wal.max_disk.bytes(),
                when_full: format!("{wal_when_full} (segments of {})", self.wal.segment_bytes),
            },
            DiskBudget {
                name: "quarantine",
                dir: self.quarantine.dir.clone(),
                max_bytes: self.quarantine.max_disk.bytes(),
                when_full: "new quarantined records are dropped and counted".to_owned(),
            },
        ]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SMALL: &str = r#"
[runtime]
data_dir = "d"
memory_target = "1 MiB"
log_queue = 10
log_line_max_bytes = "1 KiB"

[wal]
max_disk = "1 GiB"
on_full = "reject"
max_pending_bytes = "64 KiB"
channel_batches = 4

[sources.gen]
type = "generator"
rate = 0
batch_size = 10
size = 100

[sources.api]
type = "http"
listen = "127.0.0.1:8080"
max_body = "16 KiB"
max_concurrent_requests = 3
max_connections = 10
max_uncommitted_tickets = 5

[sinks.out]
type = "blackhole"
inputs = ["gen", "api"]
read_batch_bytes = "8 KiB"
channel_batches = 3

[sinks.store]
type = "parquet"
inputs = ["api"]
path = "out/lake"
row_group_bytes = "5 MiB"
"#;

    #[test]
    fn the_estimate_is_the_hand_computed_sum() {
        let config = Config::from_toml(SMALL).expect("valid");
        let inventory = config.inventory();
        let rows: Vec<(&str, Option<u64>, u64)> = inventory
            .queues
            .iter()
            .map(|q| (q.name.as_str(), q.items, q.bytes))
            .collect();
        const KIB: u64 = 1024;
        const MIB: u64 = 1024 * 1024;
        assert_eq!(
            rows,
            [
                ("sources.api.requests", Some(3), 3 * 16 * KIB),
                ("sources.api.connections", Some(10), 10 * 32 * KIB),
                ("sources.api.tickets", Some(5), 0),
                ("sources.gen.batch", Some(10), 10 * 100),
                ("sources.gen.tickets", Some(64), 0),
                ("wal.channel", Some(4), 64 * KIB),
                ("sinks.out.channel", Some(3), 3 * 8 * KIB),
                // Two batches read ahead, in 64 KiB chunks (the smallest): 3 pinned
                // around them and 4 spare.
                ("sinks.out.reader", Some(2), 2 * 8 * KIB + 7 * 64 * KIB),
                ("sinks.store.channel", Some(2), 2 * MIB),
                ("sinks.store.reader", Some(2), 2 * MIB + 7 * MIB),
                ("sinks.store.encoder", Some(1), 5 * MIB),
                ("runtime.log_queue", Some(10), 10 * KIB),
                // The default status_max_connections.
                ("status.connections", Some(64), 64 * 32 * KIB),
                // 2 sources × 7 + the WAL's 7 + 2 sinks × 10 + 3 queues × 2 = 47
                // series, and a timestamp, for each of 900 samples.
                ("runtime.history", Some(900), 900 * (1 + 47) * 8),
            ]
        );
        let hand_sum = 3 * 16 * KIB
            + 10 * 32 * KIB
            + 1000
            + 64 * KIB
            + 24 * KIB
            + (16 * KIB + 7 * 64 * KIB)
            + 2 * MIB
            + 9 * MIB
            + 5 * MIB
            + 10 * KIB
            + 64 * 32 * KIB
            + 900 * 48 * 8;
        assert_eq!(inventory.memory_estimate_bytes, hand_sum);
        assert_eq!(inventory.memory_target_bytes, MIB);
        assert!(inventory.over_target());
    }

    #[test]
    fn mqtt_bounds_come_from_the_window_and_the_qos0_budget() {
        let text = SMALL.replace(
            "type = \"http\"\nlisten = \"127.0.0.1:8080\"\nmax_body = \"16 KiB\"\nmax_concurrent_requests = 3\nmax_connections = 10",
            "type = \"mqtt\"\nurl = \"mqtt://127.0.0.1:18830\"\ntopics = [\"t/#\"]\nmax_message_bytes = \"2 KiB\"\n\
             expected_broker_window = 7\nqos0_queue_bytes = \"32 KiB\"",
        );
        let inventory = Config::from_toml(&text).expect("valid").inventory();
        let window = &inventory.queues[0];
        assert_eq!(
            (window.name.as_str(), window.items, window.bytes),
            ("sources.api.window", Some(7), 7 * 2048)
        );
        assert!(
            window
                .note
                .contains("or 28 unacked (a broker sending beyond its window), reading pauses"),
            "{}",
            window.note
        );
        let qos0 = &inventory.queues[1];
        assert_eq!(
            (qos0.name.as_str(), qos0.items, qos0.bytes),
            ("sources.api.qos0_queue", None, 32 * 1024)
        );
        let acks = &inventory.queues[2];
        assert_eq!(acks.name, "sources.api.acks");
        // MQTT 3.1.1: acks due at once are at most one per packet id (about the guard's
        // 28 unless the broker redelivers), written by the connection task; the
        // client's channel holds only subscriptions.
        assert_eq!(acks.items, Some(65_535));
        assert_eq!(
            acks.bytes,
            65_535 * crate::sources::mqtt::client::ACK_BYTES
                + 16 * crate::sources::mqtt::client::request_bytes()
        );
        assert!(acks.note.contains("guard's 28"), "{}", acks.note);
        // MQTT 5: the acks go through the client's channel, a guard's number and some.
        let v5 = Config::from_toml(&text.replace(
            "expected_broker_window = 7",
            "expected_broker_window = 7\nprotocol = \"5\"",
        ))
        .expect("valid")
        .inventory();
        let acks = &v5.queues[2];
        assert_eq!(acks.items, Some(28 + 64));
        assert_eq!(
            acks.bytes,
            (28 + 64) * crate::sources::mqtt::client::request_bytes()
        );
    }

    #[test]
    fn huge_bounds_saturate_instead_of_overflowing() {
        let text = SMALL.replace(
            "read_batch_bytes = \"8 KiB\"",
            "read_batch_bytes = \"8 EiB\"",
        );
        let inventory = Config::from_toml(&text).expect("valid").inventory();
        assert_eq!(inventory.memory_estimate_bytes, u64::MAX);
    }

    #[test]
    fn disk_budgets_name_the_on_full_choice() {
        let inventory = Config::from_toml(SMALL).expect("valid").inventory();
        assert_eq!(inventory.disks[0].name, "wal");
        assert_eq!(inventory.disks[0].max_bytes, 1 << 30);
        assert!(inventory.disks[0].when_full.starts_with("on_full = reject"));
        assert_eq!(inventory.disks[1].dir, PathBuf::from("d/quarantine"));
    }
}
