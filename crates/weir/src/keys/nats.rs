//! Keys NATS sources and sinks share: the servers, the credentials, the CA file.

use std::path::PathBuf;

use toml::Value;

use super::units::describe;
use super::{Section, check_env_name};

/// The credentials of a NATS connection: at most one of the four.
#[derive(Debug, Default)]
pub struct NatsAuth {
    /// `creds_file`: a NATS `.creds` file.
    pub creds_file: Option<PathBuf>,
    /// `token_env`: the environment variable holding a token.
    pub token_env: Option<String>,
    /// `nkey_seed_file`: the file holding an nkey seed.
    pub nkey_seed_file: Option<PathBuf>,
    /// `nkey_seed_env`: the environment variable holding an nkey seed.
    pub nkey_seed_env: Option<String>,
}

/// Reads `creds_file`, `token_env`, `nkey_seed_file` and `nkey_seed_env`; more than one
/// is reported at `creds_file`.
pub fn nats_auth(s: &mut Section<'_>) -> NatsAuth {
    let auth = NatsAuth {
        creds_file: s
            .key("creds_file", "A NATS `.creds` file (JWT and nkey seed).")
            .example("/etc/weir/nats.creds")
            .opt(),
        token_env: s
            .key("token_env", "Environment variable holding a token.")
            .example("WEIR_NATS_TOKEN")
            .opt(),
        nkey_seed_file: s
            .key("nkey_seed_file", "File holding an nkey seed (`SU…`).")
            .example("/etc/weir/nats.nk")
            .opt(),
        nkey_seed_env: s
            .key(
                "nkey_seed_env",
                "Environment variable holding an nkey seed.",
            )
            .example("WEIR_NATS_NKEY")
            .opt(),
    };
    for (key, env) in [
        ("token_env", &auth.token_env),
        ("nkey_seed_env", &auth.nkey_seed_env),
    ] {
        if let Some(env) = env {
            check_env_name(s, key, env);
        }
    }
    let ways = [
        auth.creds_file.is_some(),
        auth.token_env.is_some(),
        auth.nkey_seed_file.is_some(),
        auth.nkey_seed_env.is_some(),
    ];
    if ways.iter().filter(|w| **w).count() > 1 {
        s.error(
            "creds_file",
            "choose one of creds_file, token_env, nkey_seed_file, nkey_seed_env",
        );
    }
    auth
}

/// Reads `ca_file`: the CA certificate(s) that `tls://` trusts.
pub fn nats_ca_file(s: &mut Section<'_>) -> Option<PathBuf> {
    s.key(
        "ca_file",
        "PEM file of the CA certificate(s) that `tls://` trusts.",
    )
    .default_text("the system's CA certificates")
    .example("/etc/weir/ca.pem")
    .opt()
}

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
                format!(
                    "expected a URL starting with nats:// or tls://, found {:?}",
                    super::redact::url(url)
                ),
            );
            ok = false;
            continue;
        };
        if rest.is_empty() || rest.contains(['@', '/', '?', '#']) {
            s.error(
                "url",
                format!(
                    "{:?}: expected nats://host:port; credentials go in creds_file, token_env or nkey_seed_*",
                    super::redact::url(url)
                ),
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
