//! Connecting to NATS: credentials (never in the TOML: a `.creds` file, a token or an
//! nkey seed from a file or the environment), TLS through the MQTT source's rustls
//! setup (ring provider, `ca_file` or the system's roots), and the server list.

use std::time::Duration;

use async_nats::{Client, ConnectOptions};

use super::config::NatsConfig;
use crate::keys::tls;

/// How long one connection attempt may take.
pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);

/// The connect options of `config` (reads the credential files and variables).
///
/// # Errors
///
/// The key and what is wrong with it.
pub async fn options(config: &NatsConfig, name: &str) -> Result<ConnectOptions, String> {
    let mut options = match &config.creds_file {
        Some(path) => ConnectOptions::with_credentials_file(path)
            .await
            .map_err(|e| format!("creds_file: cannot read {}: {e}", path.display()))?,
        None => ConnectOptions::new(),
    };
    if let Some(var) = &config.token_env {
        let token = std::env::var(var)
            .map_err(|_| format!("token_env: the environment variable {var} is not set"))?;
        options = options.token(token);
    }
    let seed = match (&config.nkey_seed_file, &config.nkey_seed_env) {
        (Some(path), _) => Some(
            std::fs::read_to_string(path)
                .map_err(|e| format!("nkey_seed_file: cannot read {}: {e}", path.display()))?
                .trim()
                .to_owned(),
        ),
        (None, Some(var)) => Some(
            std::env::var(var)
                .map_err(|_| format!("nkey_seed_env: the environment variable {var} is not set"))?
                .trim()
                .to_owned(),
        ),
        (None, None) => None,
    };
    if let Some(seed) = seed {
        if !seed.starts_with("SU") {
            let key = if config.nkey_seed_file.is_some() {
                "nkey_seed_file"
            } else {
                "nkey_seed_env"
            };
            return Err(format!(
                "{key}: expected a user nkey seed (starting with SU), found something else"
            ));
        }
        options = options.nkey(seed);
    }
    if config.url.iter().all(|u| u.starts_with("tls://")) {
        let roots = tls::roots(config.ca_file.as_deref(), "server")?;
        let tls = tls::client_config(roots)?;
        options = options.require_tls(true).tls_client_config(tls);
    }
    Ok(options
        .name(format!("weir-{name}"))
        .connection_timeout(CONNECT_TIMEOUT)
        .max_reconnects(None))
}

/// Connects to the first server of `config.url` that answers.
///
/// # Errors
///
/// The key and what is wrong.
pub async fn connect(config: &NatsConfig, name: &str) -> Result<Client, String> {
    let options = options(config, name).await?;
    let addrs = config
        .url
        .iter()
        .map(|u| u.parse::<async_nats::ServerAddr>())
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| format!("url: {e}"))?;
    tokio::time::timeout(CONNECT_TIMEOUT * 2, options.connect(addrs))
        .await
        .map_err(|_| {
            format!(
                "url: no answer from {:?} within {:?}",
                config.url,
                CONNECT_TIMEOUT * 2
            )
        })?
        .map_err(|e| format!("url: cannot connect to {:?}: {e}", config.url))
}
