//! Tests of the leaf value types: reading and writing sizes, durations, numbers, addresses.

use super::*;

fn size(value: Value) -> Result<u64, String> {
    ByteSize::from_value(&value).map(ByteSize::bytes)
}

fn duration(text: &str) -> Result<std::time::Duration, String> {
    Duration::from_value(&Value::String(text.to_owned())).map(Duration::get)
}

#[test]
fn sizes_accept_units_integers_and_fractions() {
    assert_eq!(size("8 MiB".into()), Ok(8 * 1024 * 1024));
    assert_eq!(size("8MiB".into()), Ok(8 * 1024 * 1024));
    assert_eq!(size("8 mib".into()), Ok(8 * 1024 * 1024));
    assert_eq!(size("1 GB".into()), Ok(1_000_000_000));
    assert_eq!(size("1.5 KiB".into()), Ok(1536));
    assert_eq!(size(" 64 KiB ".into()), Ok(65536));
    assert_eq!(size("4096".into()), Ok(4096));
    assert_eq!(size(Value::Integer(4096)), Ok(4096));
}

#[test]
fn sizes_refuse_zero_negatives_garbage_and_overflow() {
    let lots = size("lots".into()).unwrap_err();
    assert_eq!(
        lots,
        r#"expected a size like "128 MiB" (or a whole number of bytes), found "lots""#
    );
    assert!(
        size(Value::Integer(0))
            .unwrap_err()
            .contains("at least 1 byte")
    );
    assert!(
        size("0 MiB".into())
            .unwrap_err()
            .contains("at least 1 byte")
    );
    assert!(size(Value::Integer(-1)).is_err());
    assert!(size("-1 MiB".into()).is_err());
    assert!(size("8 MiBs".into()).is_err());
    assert!(size("".into()).is_err());
    assert!(size(Value::Float(1.5)).is_err());
    assert!(size("99999999999 EiB".into()).is_err());
}

#[test]
fn durations_accept_humantime_and_refuse_bare_numbers_and_zero() {
    assert_eq!(duration("30s"), Ok(std::time::Duration::from_secs(30)));
    assert_eq!(duration("100ms"), Ok(std::time::Duration::from_millis(100)));
    assert_eq!(duration("1h 30m"), Ok(std::time::Duration::from_secs(5400)));
    assert!(duration("0s").unwrap_err().contains("longer than zero"));
    assert!(
        duration("soon")
            .unwrap_err()
            .starts_with("expected a duration like \"30s\"")
    );
    let bare = Duration::from_value(&Value::Integer(30)).unwrap_err();
    assert!(bare.contains("write the unit, e.g. \"30s\""), "{bare}");
    assert_eq!(
        std::time::Duration::from_value(&Value::String("0s".into())),
        Ok(std::time::Duration::ZERO)
    );
}

#[test]
fn positive_integers_explain_zero() {
    assert!(
        NonZeroU64::from_value(&Value::Integer(0))
            .unwrap_err()
            .contains("at least 1")
    );
    assert!(NonZeroU32::from_value(&Value::Integer(1 << 40)).is_err());
    assert_eq!(
        NonZeroU32::from_value(&Value::Integer(7)).map(NonZeroU32::get),
        Ok(7)
    );
    assert_eq!(u64::from_value(&Value::Integer(0)), Ok(0));
    assert!(u64::from_value(&Value::String("5".into())).is_err());
}

#[test]
fn addresses_must_be_ip_and_port() {
    assert!(SocketAddr::from_value(&Value::String("127.0.0.1:9464".into())).is_ok());
    let named = SocketAddr::from_value(&Value::String("localhost:9464".into())).unwrap_err();
    assert!(named.contains("write an IP address"), "{named}");
}

#[test]
fn formats_bytes_exactly_when_whole() {
    assert_eq!(format_bytes(512), "512 B");
    assert_eq!(format_bytes(8 * 1024 * 1024), "8 MiB");
    assert_eq!(format_bytes(1536), "1.5 KiB");
    assert_eq!(format_bytes(3 * 1024 * 1024 * 1024), "3 GiB");
    assert_eq!(format_bytes(u64::MAX), "16.0 EiB");
}

#[test]
fn defaults_are_written_as_they_read_back() {
    fn back<T: FromValue + ToValue + PartialEq + std::fmt::Debug>(value: T) -> String {
        let written = value.to_value();
        assert_eq!(T::from_value(&written).as_ref(), Ok(&value), "{written}");
        written.to_string()
    }
    assert_eq!(back(ByteSize::mib(8)), r#""8 MiB""#);
    assert_eq!(back(ByteSize::new(100).expect("100 > 0")), r#""100 B""#);
    assert_eq!(back(ByteSize::new(1025).expect("1025 > 0")), "1025");
    assert_eq!(back(Duration::secs(300)), r#""5m""#);
    assert_eq!(back(Duration::millis(100)), r#""100ms""#);
    assert_eq!(back(std::time::Duration::ZERO), r#""0s""#);
    assert_eq!(back(NonZeroU32::new(256).expect("256 > 0")), "256");
    assert_eq!(back(0u64), "0");
    assert_eq!(back(0.1f64), "0.1");
    assert_eq!(back(true), "true");
    assert_eq!(back(PathBuf::from("./weir-data")), r#""./weir-data""#);
    assert_eq!(
        back(SocketAddr::from(([127, 0, 0, 1], 9464))),
        r#""127.0.0.1:9464""#
    );
    assert_eq!(back(weir_wal::OnFull::DropOldest), r#""drop_oldest""#);
    assert_eq!(
        <weir_wal::OnFull as FromValue>::KIND,
        r#"one of "block" | "reject" | "drop_oldest""#
    );
}
