//! `type = "file"` (a sink): its keys.

use std::path::{Path, PathBuf};

use serde::Serialize;

use crate::keys::Section;
use crate::sinks::SinkKeys;
use crate::sinks::rotate::{Rotate, parse_rotate};

/// `type = "file"`: NDJSON, one JSON object per record.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct FileSinkConfig {
    /// Output directory. Required.
    pub path: PathBuf,
    /// Rotation. Default 128 MiB, no age.
    pub rotate: Rotate,
}

impl SinkKeys for FileSinkConfig {
    const TYPE: &'static str = "file";

    fn parse(s: &mut Section<'_>) -> Option<Self> {
        let path = s.req("path", "the output directory");
        let rotate = parse_rotate(s, None, false);
        Some(Self {
            path: path?,
            rotate,
        })
    }

    fn directory(&self) -> Option<&Path> {
        Some(&self.path)
    }
}
