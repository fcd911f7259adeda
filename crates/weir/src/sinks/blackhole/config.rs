//! `type = "blackhole"`: its keys.

use std::num::NonZeroU64;

use serde::Serialize;

use crate::keys::Section;
use crate::sinks::SinkKeys;

/// `type = "blackhole"`: counts records and drops them.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct BlackholeConfig {
    /// Records per second it accepts, to play a slow downstream; unlimited when absent.
    pub rate: Option<NonZeroU64>,
}

impl SinkKeys for BlackholeConfig {
    const TYPE: &'static str = "blackhole";

    fn parse(s: &mut Section<'_>) -> Option<Self> {
        Some(Self {
            rate: s.opt("rate"),
        })
    }
}
