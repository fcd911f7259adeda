//! The startup check of a NATS sink (`healthcheck = true`): it connects with the sink's
//! credentials and TLS, then finds the stream its publishes land in. With `stream`
//! set, that stream must exist and capture some subject of the template; without it,
//! some stream must capture one ([`SubjectTemplate::filter`], [`subjects_collide`]).
//! A publish no stream captures gets no PubAck: the sink would retry it for ever.

use std::time::Duration;

use async_nats::jetstream;
use futures::StreamExt;
use tokio::time::{Instant, timeout_at};

use super::config::NatsSinkConfig;
use super::core::{SubjectTemplate, subjects_collide};
use super::shell::credentials;

impl NatsSinkConfig {
    /// The startup check (see the [module docs](self)), giving up within `timeout`.
    ///
    /// # Errors
    ///
    /// A credential that cannot be read, a server that cannot be reached, or no stream
    /// for the subject, naming the key to fix.
    ///
    /// # Cancel safety
    ///
    /// Cancel-safe: the connection is dropped with the future; nothing is created.
    pub(super) async fn find_stream(&self, name: &str, timeout: Duration) -> Result<(), String> {
        let deadline = Instant::now() + timeout;
        let waited = || {
            format!(
                "no answer within healthcheck_timeout = {}",
                humantime::format_duration(timeout)
            )
        };
        let servers = self.url.join(", ");
        let filter = SubjectTemplate::parse(&self.subject)
            .map_err(|e| format!("subject: {e}"))?
            .filter();
        let addrs = self
            .url
            .iter()
            .map(|u| u.parse::<async_nats::ServerAddr>())
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| format!("url: {e}"))?;
        let options = credentials(self)
            .await?
            .name(format!("weir-sink-{name}-healthcheck"))
            .connection_timeout(timeout);
        let client = match timeout_at(deadline, options.connect(addrs)).await {
            Err(_) => return Err(format!("url: connecting to {servers}: {}", waited())),
            Ok(Err(e)) => {
                return Err(format!(
                    "url: cannot connect to {servers}: {e}; is nats-server running and reachable from here?"
                ));
            }
            Ok(Ok(client)) => client,
        };
        let js = jetstream::new(client);
        let found = match &self.stream {
            Some(stream) => {
                timeout_at(deadline, named_stream(&js, stream, &filter, &self.subject)).await
            }
            None => timeout_at(deadline, any_stream(&js, &filter, &self.subject)).await,
        };
        match found {
            Err(_) => Err(format!("looking up streams on {servers}: {}", waited())),
            Ok(Err(e)) => Err(format!("{e} (on {servers})")),
            Ok(Ok(())) => Ok(()),
        }
    }
}

/// The stream `stream` exists and captures some subject of `filter`.
async fn named_stream(
    js: &jetstream::Context,
    stream: &str,
    filter: &str,
    subject: &str,
) -> Result<(), String> {
    let mut found = js.get_stream(stream).await.map_err(|e| {
        format!(
            "stream = {stream:?}: no such stream ({e}); create it, e.g. `nats stream add {stream} --subjects '{filter}'`, or fix stream"
        )
    })?;
    let info = found
        .info()
        .await
        .map_err(|e| format!("stream = {stream:?}: reading its configuration: {e}"))?;
    let subjects = &info.config.subjects;
    if subjects.iter().any(|s| subjects_collide(s, filter)) {
        return Ok(());
    }
    Err(format!(
        "stream = {stream:?} captures none of the subjects of subject = {subject:?} ({filter}); its subjects: {}; add {filter} to the stream, or fix subject",
        if subjects.is_empty() {
            "none".to_owned()
        } else {
            subjects.join(", ")
        }
    ))
}

/// Some stream captures some subject of `filter`.
async fn any_stream(js: &jetstream::Context, filter: &str, subject: &str) -> Result<(), String> {
    let mut streams = js.streams();
    while let Some(info) = streams.next().await {
        let info = info.map_err(|e| format!("listing the streams: {e}"))?;
        if info
            .config
            .subjects
            .iter()
            .any(|s| subjects_collide(s, filter))
        {
            return Ok(());
        }
    }
    Err(format!(
        "subject = {subject:?}: no stream captures {filter}, so no publish would be acknowledged; create one, e.g. `nats stream add EVENTS --subjects '{filter}'`, and set stream to it"
    ))
}
