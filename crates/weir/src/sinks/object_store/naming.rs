//! Object names: `{prefix}/{sink}/{folders}/{wal_id}-{first:020}.{ext}`. Sans-IO.
//!
//! - `{sink}/` keeps sinks that share a prefix apart (a Parquet sink's own directory,
//!   written through this engine when it has a `layout`, has none).
//! - The folders are the [layout](crate::sinks::layout)'s partition of the object's
//!   records; without a layout, `dt=YYYY-MM-DD/hour=HH` of the object's first record.
//! - `wal_id` is the WAL's identity, so that names from two weir instances writing to
//!   one bucket, or from a WAL directory recreated after a disk loss, never collide.
//! - `first` is the first WAL offset the object covers. An object's end is not in its
//!   name (a multipart upload needs its key before the object ends): it is in the
//!   object's metadata (and the sink's journal).
//! - Times are WAL append times (UTC) or event times from the payload, the same on
//!   every replay, unlike the clock at the sink.

/// What names the objects of one sink.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Naming {
    /// The URL's prefix (may be empty).
    pub prefix: String,
    /// The sink's name (empty: no folder of its own).
    pub sink: String,
    /// The WAL's identity.
    pub wal_id: String,
    /// The file extension (`parquet`, `ndjson`, `ndjson.gz`, `ndjson.zst`).
    pub extension: &'static str,
}

impl Naming {
    /// The key of the object in `folders` whose first WAL offset is `first`.
    pub fn key_in(&self, folders: &str, first: u64) -> String {
        let mut key = String::with_capacity(self.prefix.len() + self.sink.len() + 80);
        for part in [&self.prefix, &self.sink, folders] {
            if !part.is_empty() {
                key.push_str(part);
                key.push('/');
            }
        }
        key.push_str(&format!("{}-{first:020}.{}", self.wal_id, self.extension));
        key
    }
}

/// `dt=YYYY-MM-DD/hour=HH` of `time_ms`, the folders of an object without a layout.
pub fn hour_folders(time_ms: u64) -> String {
    let (year, month, day, hour) = civil_hour(time_ms);
    format!("dt={year:04}-{month:02}-{day:02}/hour={hour:02}")
}

/// The UTC year, month, day and hour of `time_ms` (milliseconds since the Unix epoch),
/// by Howard Hinnant's `civil_from_days`.
fn civil_hour(time_ms: u64) -> (i64, u32, u32, u32) {
    let secs = i64::try_from(time_ms / 1000).unwrap_or(i64::MAX);
    let days = secs.div_euclid(86_400);
    let hour = u32::try_from(secs.rem_euclid(86_400) / 3_600).unwrap_or(0);
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1_460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = u32::try_from(doy - (153 * mp + 2) / 5 + 1).unwrap_or(1);
    let month = u32::try_from(if mp < 10 { mp + 3 } else { mp - 9 }).unwrap_or(1);
    let year = yoe + era * 400 + i64::from(month <= 2);
    (year, month, day, hour)
}

#[cfg(test)]
mod tests {
    use super::*;

    impl Naming {
        fn key(&self, first: u64, time_ms: u64) -> String {
            self.key_in(&hour_folders(time_ms), first)
        }
    }

    fn naming(prefix: &str) -> Naming {
        Naming {
            prefix: prefix.into(),
            sink: "lake".into(),
            wal_id: "0123456789abcdef".into(),
            extension: "parquet",
        }
    }

    #[test]
    fn keys_carry_prefix_sink_partition_wal_id_and_first_offset() {
        // 2026-12-01T12:34:56Z
        let t = 1_796_128_496_000;
        assert_eq!(
            naming("data/weir").key(42, t),
            "data/weir/lake/dt=2026-12-01/hour=12/0123456789abcdef-00000000000000000042.parquet"
        );
        assert_eq!(
            naming("").key(0, 0),
            "lake/dt=1970-01-01/hour=00/0123456789abcdef-00000000000000000000.parquet"
        );
    }

    #[test]
    fn layout_folders_go_between_the_sink_and_the_name() {
        assert_eq!(
            naming("p").key_in("dt=2026-12-01/device=d1", 7),
            "p/lake/dt=2026-12-01/device=d1/0123456789abcdef-00000000000000000007.parquet"
        );
        let own_directory = Naming {
            sink: String::new(),
            ..naming("")
        };
        assert_eq!(
            own_directory.key_in("d=x", 7),
            "d=x/0123456789abcdef-00000000000000000007.parquet"
        );
    }

    #[test]
    fn civil_dates_match_known_days() {
        assert_eq!(civil_hour(0), (1970, 1, 1, 0));
        // 2000-02-29T23:00:00Z (a leap day).
        assert_eq!(civil_hour(951_865_200_000), (2000, 2, 29, 23));
        // 2024-12-31T23:59:59Z, then the next second.
        assert_eq!(civil_hour(1_735_689_599_000), (2024, 12, 31, 23));
        assert_eq!(civil_hour(1_735_689_600_000), (2025, 1, 1, 0));
    }

    #[test]
    fn names_sort_by_first_offset_within_a_partition() {
        let n = naming("p");
        assert!(n.key(9, 0) < n.key(10, 0));
        assert!(n.key(999_999, 0) < n.key(1_000_000, 0));
    }
}
