//! `type = "blackhole"`: its keys.

use std::num::NonZeroU64;

use serde::Serialize;

use crate::keys::Section;
use crate::sinks::SinkKeys;

/// `type = "blackhole"`: counts records and drops them.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct BlackholeConfig {
    /// `rate`: records per second it accepts; unlimited when `None`.
    pub rate: Option<NonZeroU64>,
}

impl SinkKeys for BlackholeConfig {
    const TYPE: &'static str = "blackhole";
    const ABOUT: &'static str =
        "Counts records and drops them; with `rate`, plays a slow downstream.";

    fn parse(s: &mut Section<'_>) -> Option<Self> {
        let rate = s
            .key(
                "rate",
                "Records per second it accepts, to play a slow downstream.",
            )
            .unit("records per second")
            .default_text("unlimited")
            .example(500)
            .opt();
        Some(Self { rate })
    }
}
