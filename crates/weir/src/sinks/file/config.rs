//! `type = "file"` (a sink): its keys.

use std::path::{Path, PathBuf};

use serde::Serialize;

use crate::keys::Section;
use crate::record::Line;
use crate::sinks::SinkKeys;
use crate::sinks::lines::parse_line;
use crate::sinks::rotate::{Rotate, parse_rotate};

/// `type = "file"`: NDJSON, one JSON object per record.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct FileSinkConfig {
    /// `path`: the output directory.
    pub path: PathBuf,
    /// `rotate`: when a file is closed and the next one started.
    pub rotate: Rotate,
    /// `encoding` and `fields`: what each line is.
    pub line: Line,
}

impl SinkKeys for FileSinkConfig {
    const TYPE: &'static str = "file";
    const ABOUT: &'static str =
        "NDJSON files, one JSON object per record, rotated by size and age; durable once fsynced.";

    fn parse(s: &mut Section<'_>) -> Option<Self> {
        let path = s
            .key("path", "Output directory (the sink's own).")
            .example("./weir-out/ndjson")
            .req("the output directory");
        let rotate = parse_rotate(s, None, false);
        let line = parse_line(s, true, "");
        Some(Self {
            path: path?,
            rotate,
            line,
        })
    }

    fn directory(&self) -> Option<&Path> {
        Some(&self.path)
    }
}
