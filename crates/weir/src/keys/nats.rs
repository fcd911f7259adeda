//! Keys NATS sources and sinks share.

use toml::Value;

use super::Section;
use super::units::describe;

/// Reads `url` (a NATS source's or sink's): a string or a non-empty list of strings, each `nats://` or `tls://`.
pub fn nats_urls(s: &mut Section<'_>) -> Option<Vec<String>> {
    let declared = s
        .key(
            "url",
            "NATS servers, `nats://host:port` or `tls://host:port`: one URL, or a list for a cluster.",
        )
        .required()
        .example("nats://127.0.0.1:4222")
        .raw("URL or list of URLs");
    let Some(value) = declared else {
        s.error(
            "url",
            "missing required key (e.g. \"nats://127.0.0.1:4222\", or a list for a cluster)",
        );
        return None;
    };
    let urls: Vec<String> = match value {
        Value::String(u) => vec![u.clone()],
        Value::Array(a) if !a.is_empty() && a.iter().all(Value::is_str) => a
            .iter()
            .filter_map(|v| v.as_str().map(str::to_owned))
            .collect(),
        other => {
            s.error(
                "url",
                format!(
                    "expected a URL or a non-empty list of URLs, found {}",
                    describe(other)
                ),
            );
            return None;
        }
    };
    let mut ok = true;
    for url in &urls {
        let Some((_, rest)) = url
            .split_once("://")
            .filter(|(scheme, _)| *scheme == "nats" || *scheme == "tls")
        else {
            s.error(
                "url",
                format!("expected a URL starting with nats:// or tls://, found {url:?}"),
            );
            ok = false;
            continue;
        };
        if rest.is_empty() || rest.contains(['@', '/', '?', '#']) {
            s.error(
                "url",
                format!("{url:?}: expected nats://host:port; credentials go in creds_file, token_env or nkey_seed_*"),
            );
            ok = false;
        }
    }
    let tls = urls.iter().filter(|u| u.starts_with("tls://")).count();
    if tls != 0 && tls != urls.len() {
        s.error(
            "url",
            "mixes nats:// and tls://; use one scheme for every server",
        );
        ok = false;
    }
    ok.then_some(urls)
}
