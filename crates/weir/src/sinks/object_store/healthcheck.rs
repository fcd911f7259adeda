//! The startup check of a remote object store (`healthcheck = true`): a probe PUT and
//! DELETE of `_weir_healthcheck` under the sink's prefix.
//!
//! A probe write is what the running sink needs (it only ever writes); a HEAD or a
//! listing would pass with read-only credentials and fail with write-only ones, which
//! are the usual ones for an ingest role. The probe is an empty object under the prefix
//! the sink writes to, deleted at once; if the DELETE is refused (a policy without
//! `s3:DeleteObject`), it stays, is logged at WARN, and the next check overwrites it.
//!
//! For S3 a DELETE of the probe comes first: S3 answers it 204 in a bucket that exists
//! (whether the key does or not) and 404 `NoSuchBucket` in one that does not, on every
//! server, while some S3-compatible servers create a missing bucket on a PUT. A refusal
//! or a transient error of that DELETE is left to the PUT to decide. (GCS and Azure
//! answer 404 for a missing object too, so there the PUT's 404 names the bucket.)
//!
//! For S3 the credentials are resolved first, on their own, so that a failure there
//! names every source the chain tried ([`AwsChain`]) instead of only the last one's
//! error (the instance metadata service's). Transient errors (a refused connection, a
//! 5xx) are tried again twice within `healthcheck_timeout`; a 404 (no such bucket) or a
//! refusal (403, 401) is final. `file://` and `memory://` have nothing to check.

use std::time::Duration;

use bytes::Bytes;
use object_store::path::Path as StorePath;
use object_store::{ObjectStore, ObjectStoreExt, PutPayload};
use tokio::time::{Instant, timeout_at};

use super::config::{Location, ObjectStoreConfig};
use super::credentials::{AwsChain, AwsSource};
use super::store::Store;

/// The probe object's name under the prefix.
pub const PROBE: &str = "_weir_healthcheck";

/// Attempts of the probe PUT when the store's answer is transient.
const ATTEMPTS: u32 = 3;
/// The wait before the second attempt (doubled before the third).
const RETRY_DELAY: Duration = Duration::from_millis(200);

impl ObjectStoreConfig {
    /// The startup check of the sink `name` (see the [module docs](self)), giving up
    /// within `timeout`.
    ///
    /// # Errors
    ///
    /// What failed: the credentials (with every source tried), the bucket (missing,
    /// or refusing the credentials), or the store (unreachable), naming `url`.
    ///
    /// # Cancel safety
    ///
    /// Cancel-safe: a probe object a cancelled check left is empty, and the next
    /// check deletes it.
    pub(super) async fn healthcheck_store(
        &self,
        name: &str,
        timeout: Duration,
    ) -> Result<(), String> {
        let (bucket, prefix) = match &self.location {
            Location::S3 { bucket, prefix } | Location::Gcs { bucket, prefix } => (bucket, prefix),
            Location::Azure { container, prefix } => (container, prefix),
            Location::File { .. } | Location::Memory { .. } => return Ok(()),
        };
        let deadline = Instant::now() + timeout;
        let waited = || {
            format!(
                "no answer within healthcheck_timeout = {}",
                humantime::format_duration(timeout)
            )
        };
        let target = format!("url = {:?} ({})", self.url, self.store_name());
        let store = Store::open(self).map_err(|e| format!("{target}: {e}"))?;
        let chain = matches!(self.location, Location::S3 { .. }).then(AwsChain::from_env);
        if let Some(chain) = chain.as_ref().filter(|c| c.used != AwsSource::Anonymous) {
            match timeout_at(deadline, store.resolve_aws_credentials()).await {
                Err(_) => return Err(format!("{target}: {}", chain.no_credentials(&waited()))),
                Ok(Some(Err(e))) => return Err(format!("{target}: {}", chain.no_credentials(&e))),
                Ok(_) => {}
            }
        }
        let Some(remote) = store.remote() else {
            return Ok(());
        };
        let key = if prefix.is_empty() {
            PROBE.to_owned()
        } else {
            format!("{prefix}/{PROBE}")
        };
        let path = StorePath::from(key.as_str());
        if matches!(self.location, Location::S3 { .. }) {
            match timeout_at(deadline, remote.delete(&path)).await {
                Err(_) => return Err(format!("{target}: DELETE {key}: {}", waited())),
                Ok(Err(e @ object_store::Error::NotFound { .. })) => {
                    let request = format!("DELETE {key}");
                    return Err(self.refused(&target, bucket, &request, &e, chain.as_ref()));
                }
                Ok(_) => {}
            }
        }
        let put = timeout_at(deadline, put_probe(remote.as_ref(), &path)).await;
        match put {
            Err(_) => return Err(format!("{target}: PUT {key}: {}", waited())),
            Ok(Err(e)) => {
                let request = format!("PUT {key}");
                return Err(self.refused(&target, bucket, &request, &e, chain.as_ref()));
            }
            Ok(Ok(())) => {}
        }
        match timeout_at(deadline, remote.delete(&path)).await {
            Ok(Ok(())) => {}
            Ok(Err(e)) => tracing::warn!(
                "sink {name}: startup check: the probe object {key} was written but not deleted ({e}); it is empty and harmless, and the next check overwrites it"
            ),
            Err(_) => tracing::warn!(
                "sink {name}: startup check: the probe object {key} was written; its DELETE got no answer within healthcheck_timeout"
            ),
        }
        Ok(())
    }

    /// The store, as the messages name it: the endpoint, or the service.
    fn store_name(&self) -> String {
        match (&self.endpoint, &self.location) {
            (Some(endpoint), _) => format!("endpoint {endpoint}"),
            (None, Location::S3 { .. }) => match &self.region {
                Some(region) => format!("AWS S3 in {region}"),
                None => "AWS S3".to_owned(),
            },
            (None, Location::Gcs { .. }) => "Google Cloud Storage".to_owned(),
            (None, Location::Azure { .. }) => "Azure Blob Storage".to_owned(),
            (None, _) => "local".to_owned(),
        }
    }

    /// The message of a failed probe `request` (`PUT key`).
    fn refused(
        &self,
        target: &str,
        bucket: &str,
        request: &str,
        e: &object_store::Error,
        chain: Option<&AwsChain>,
    ) -> String {
        let what = match &self.location {
            Location::Azure { .. } => "container",
            _ => "bucket",
        };
        match e {
            object_store::Error::NotFound { .. } => format!(
                "{target}: the {what} {bucket:?} does not exist ({request} answered: {e}); create it, or fix url"
            ),
            object_store::Error::PermissionDenied { .. }
            | object_store::Error::Unauthenticated { .. } => {
                let from =
                    chain.map_or_else(|| "the environment".to_owned(), |c| c.used_as().to_owned());
                format!(
                    "{target}: the store refused the credentials from {from} ({request} answered: {e}); fix them, or grant them writes under the prefix"
                )
            }
            _ => format!("{target}: {request} failed after {ATTEMPTS} attempts: {e}"),
        }
    }
}

/// PUTs an empty object at `path`, trying a transient failure again.
async fn put_probe(store: &dyn ObjectStore, path: &StorePath) -> Result<(), object_store::Error> {
    let mut delay = RETRY_DELAY;
    let mut attempt = 1;
    loop {
        match store.put(path, PutPayload::from(Bytes::new())).await {
            Ok(_) => return Ok(()),
            Err(e) if attempt >= ATTEMPTS || !transient(&e) => return Err(e),
            Err(_) => {
                tokio::time::sleep(delay).await;
                delay *= 2;
                attempt += 1;
            }
        }
    }
}

/// Whether trying again may help: not after a 404, a refusal or a bad request.
fn transient(e: &object_store::Error) -> bool {
    !matches!(
        e,
        object_store::Error::NotFound { .. }
            | object_store::Error::PermissionDenied { .. }
            | object_store::Error::Unauthenticated { .. }
            | object_store::Error::InvalidPath { .. }
            | object_store::Error::NotSupported { .. }
            | object_store::Error::NotImplemented { .. }
    )
}
