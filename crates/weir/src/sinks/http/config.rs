//! `type = "http"` (a sink): its keys. The sink itself is not built yet (`weir validate`
//! and `weir run` refuse the type); its keys are read so that a configuration written
//! for it is checked all the same.

use std::num::NonZeroU32;

use serde::Serialize;

use crate::keys::{Duration, Section};

/// `type = "http"`: POST NDJSON batches; 429/503 with `Retry-After` slow it down.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct HttpSinkConfig {
    /// Endpoint, `http://` or `https://`. Required.
    pub url: String,
    /// Records per request. Default 500.
    pub batch_records: NonZeroU32,
    /// Request timeout. Default 10 s.
    pub timeout: Duration,
}

impl HttpSinkConfig {
    /// Reads the keys of a `type = "http"` sink.
    pub fn parse(s: &mut Section<'_>) -> Option<Self> {
        let url = s.req::<String>("url", "e.g. \"http://127.0.0.1:8080/ingest\"");
        if let Some(url) = &url
            && !(url.starts_with("http://") || url.starts_with("https://"))
        {
            s.error(
                "url",
                format!("expected a URL starting with http:// or https://, found {url:?}"),
            );
        }
        Some(Self {
            batch_records: s.or("batch_records", NonZeroU32::new(500).expect("500 > 0")),
            timeout: s.or("timeout", Duration::secs(10)),
            url: url?,
        })
    }
}
