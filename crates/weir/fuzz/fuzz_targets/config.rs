//! Fuzz the configuration: any text through `Config::from_toml`, as `weir validate` and
//! `weir run` read it. It must never panic; a valid configuration must give the same
//! configuration and hash when read again, and its inventory, warnings and report must
//! be computed without a panic; an invalid one must name at least one error, each
//! with some text.
#![no_main]

use libfuzzer_sys::fuzz_target;
use weir::config::Config;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    match Config::from_toml(text) {
        Ok(config) => {
            let again = Config::from_toml(text).expect("valid once, valid twice");
            assert_eq!(config, again);
            assert_eq!(config.hash(), again.hash());
            let inventory = config.inventory();
            let largest = inventory.queues.iter().map(|q| q.bytes).max().unwrap_or(0);
            assert!(inventory.memory_estimate_bytes >= largest);
            for q in &inventory.queues {
                assert!(!q.to_string().is_empty());
            }
            let _ = config.warnings();
        }
        Err(errors) => {
            assert!(!errors.errors().is_empty(), "an error with no message");
            for e in errors.errors() {
                assert!(!e.to_string().is_empty());
            }
        }
    }
});
