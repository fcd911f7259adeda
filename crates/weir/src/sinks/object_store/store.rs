//! The stores the sink writes to: S3, GCS and Azure through the `object_store` crate
//! (credentials from its standard chains, never from the TOML file), `memory://`
//! through its in-memory store, and `file://` written by weir itself with fsync.
//!
//! Every remote client is built with the crate's own retries off (`max_retries = 0`),
//! so that the ordered stage's retries, with full jitter, are the only ones that run
//! and each is counted; `timeout` bounds every request (an attempt).

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use object_store::multipart::{MultipartStore, PartId};
use object_store::path::Path as StorePath;
use object_store::{
    Attribute, AttributeValue, Attributes, BackoffConfig, ClientOptions, ObjectStore,
    ObjectStoreExt, PutMultipartOptions, PutOptions, PutPayload, RetryConfig,
};

use super::config::{Location, ObjectStoreConfig};
use super::credentials::AwsChain;

/// A failed store operation.
#[derive(Debug, Clone, thiserror::Error)]
#[error("{message}")]
pub struct StoreError {
    /// Whether retrying cannot help (403, invalid credentials, a missing bucket).
    pub permanent: bool,
    /// What failed, with the store's answer.
    pub message: String,
}

impl StoreError {
    fn remote(action: &str, key: &str, e: &object_store::Error) -> Self {
        use object_store::Error as E;
        let permanent = matches!(
            e,
            E::PermissionDenied { .. }
                | E::Unauthenticated { .. }
                | E::NotFound { .. }
                | E::InvalidPath { .. }
                | E::NotSupported { .. }
                | E::NotImplemented { .. }
        );
        StoreError {
            permanent,
            message: format!("{action} {key}: {e}"),
        }
    }

    fn local(action: &str, path: &Path, e: &std::io::Error) -> Self {
        StoreError {
            permanent: e.kind() == std::io::ErrorKind::PermissionDenied,
            message: format!("{action} {}: {e}", path.display()),
        }
    }
}

/// User metadata of an object (S3 `x-amz-meta-*`, GCS `x-goog-meta-*`, Azure
/// `x-ms-meta-*`), its names in `kebab-case`. Azure's must be C# identifiers: there
/// they are written in `snake_case`.
pub type Metadata = Vec<(&'static str, String)>;

/// Where the sink's objects go.
#[derive(Debug, Clone)]
pub struct Store {
    kind: Kind,
    /// S3's credential provider, resolved by the startup check on its own.
    aws_credentials: Option<object_store::aws::AwsCredentialProvider>,
}

#[derive(Clone)]
enum Kind {
    Remote {
        store: Arc<dyn ObjectStore>,
        multipart: Arc<dyn MultipartStore>,
        /// Azure Blob Storage, whose metadata rules differ ([`Metadata`]): names are
        /// C# identifiers, so weir's are written with `_` for `-`; and a multipart
        /// upload cannot carry any through `MultipartStore` (`create_multipart_opts`
        /// refuses attributes, and they would belong to Put Block List, which
        /// `complete_multipart` sends without any), so multipart objects have none.
        azure: bool,
    },
    Local(Arc<LocalDir>),
}

impl std::fmt::Debug for Kind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Kind::Remote { store, .. } => write!(f, "Remote({store})"),
            Kind::Local(local) => write!(f, "Local({})", local.dir.display()),
        }
    }
}

impl Store {
    /// The store `config.url` names (no request is made yet).
    ///
    /// # Errors
    ///
    /// The client could not be built (a malformed endpoint, missing credentials
    /// settings the crate needs up front).
    pub fn open(config: &ObjectStoreConfig) -> Result<Store, String> {
        let client = ClientOptions::new()
            .with_timeout(config.timeout.get())
            .with_connect_timeout(config.timeout.get().min(Duration::from_secs(10)))
            .with_allow_http(config.allow_http);
        let retry = RetryConfig {
            backoff: BackoffConfig::default(),
            max_retries: 0,
            retry_timeout: config.timeout.get(),
        };
        let remote = |store: Arc<dyn ObjectStore>, multipart: Arc<dyn MultipartStore>| Store {
            kind: Kind::Remote {
                store,
                multipart,
                azure: false,
            },
            aws_credentials: None,
        };
        let built = match &config.location {
            Location::S3 { bucket, .. } => {
                let mut b = object_store::aws::AmazonS3Builder::from_env()
                    .with_bucket_name(bucket)
                    .with_client_options(client)
                    .with_retry(retry)
                    .with_allow_http(config.allow_http)
                    .with_virtual_hosted_style_request(!config.path_style)
                    // The sink deletes one object only (the startup check's probe): a
                    // plain DELETE, answered 404 NoSuchBucket by every server when the
                    // bucket is missing, unlike a bulk DeleteObjects.
                    .with_disable_bulk_delete(true);
                if let Some(endpoint) = &config.endpoint {
                    b = b.with_endpoint(endpoint);
                }
                if let Some(region) = &config.region {
                    b = b.with_region(region);
                }
                let s = Arc::new(b.build().map_err(|e| format!("S3 client: {e}"))?);
                Store {
                    aws_credentials: Some(Arc::clone(s.credentials())),
                    ..remote(s.clone(), s)
                }
            }
            Location::Gcs { bucket, .. } => {
                let mut b = object_store::gcp::GoogleCloudStorageBuilder::from_env()
                    .with_bucket_name(bucket)
                    .with_client_options(client)
                    .with_retry(retry);
                if let Some(endpoint) = &config.endpoint {
                    b = b.with_base_url(endpoint);
                }
                let s = Arc::new(b.build().map_err(|e| format!("GCS client: {e}"))?);
                remote(s.clone(), s)
            }
            Location::Azure { container, .. } => {
                let mut b = object_store::azure::MicrosoftAzureBuilder::from_env()
                    .with_container_name(container)
                    .with_client_options(client)
                    .with_retry(retry);
                if let Some(endpoint) = &config.endpoint {
                    b = b.with_endpoint(endpoint.clone());
                }
                let s = Arc::new(b.build().map_err(|e| format!("Azure client: {e}"))?);
                Store {
                    kind: Kind::Remote {
                        store: s.clone(),
                        multipart: s,
                        azure: true,
                    },
                    aws_credentials: None,
                }
            }
            Location::Memory { .. } => {
                let s = Arc::new(object_store::memory::InMemory::new());
                remote(s.clone(), s)
            }
            Location::File { dir } => Store {
                kind: Kind::Local(Arc::new(LocalDir {
                    dir: dir.clone(),
                    part_size: config.part_size.bytes(),
                })),
                aws_credentials: None,
            },
        };
        Ok(built)
    }

    /// S3's credentials, resolved (fetched from the source the environment sets up, or
    /// taken from its cache); `None` for the other stores.
    ///
    /// # Errors
    ///
    /// The credential source's error.
    ///
    /// # Cancel safety
    ///
    /// Cancel-safe: it only reads (the provider caches what it fetched).
    pub async fn resolve_aws_credentials(&self) -> Option<Result<(), String>> {
        let provider = self.aws_credentials.as_ref()?;
        Some(
            provider
                .get_credential()
                .await
                .map(drop)
                .map_err(|e| e.to_string()),
        )
    }

    /// `e`, or, when it is S3's and its credentials cannot be resolved, why not: every
    /// source of the chain tried ([`AwsChain::no_credentials`]), so that the metadata
    /// service's error is never all an operator sees.
    ///
    /// # Cancel safety
    ///
    /// Cancel-safe, as [`Store::resolve_aws_credentials`].
    pub async fn explain(&self, e: StoreError) -> StoreError {
        if e.permanent {
            // An answer from the store (404, 403): the request was signed.
            return e;
        }
        match self.resolve_aws_credentials().await {
            Some(Err(cause)) => StoreError {
                permanent: false,
                message: AwsChain::from_env().no_credentials(&cause),
            },
            _ => e,
        }
    }

    /// The object store itself, for reading back (tests, `memory://`).
    pub fn remote(&self) -> Option<Arc<dyn ObjectStore>> {
        match &self.kind {
            Kind::Remote { store, .. } => Some(Arc::clone(store)),
            Kind::Local(_) => None,
        }
    }

    /// Stores `body` as the whole object `key`, with `metadata`.
    ///
    /// # Errors
    ///
    /// [`StoreError`].
    pub async fn put(&self, key: &str, body: Bytes, metadata: &Metadata) -> Result<(), StoreError> {
        match &self.kind {
            Kind::Remote { store, azure, .. } => {
                let opts = PutOptions {
                    attributes: attributes(metadata, *azure),
                    ..PutOptions::default()
                };
                store
                    .put_opts(&StorePath::from(key), PutPayload::from(body), opts)
                    .await
                    .map(drop)
                    .map_err(|e| StoreError::remote("PUT", key, &e))
            }
            Kind::Local(local) => {
                let (local, key) = (Arc::clone(local), key.to_owned());
                blocking(move || local.put(&key, &body)).await
            }
        }
    }

    /// Starts a multipart upload of `key` with `metadata`; returns its id.
    ///
    /// # Errors
    ///
    /// [`StoreError`].
    pub async fn create(&self, key: &str, metadata: &Metadata) -> Result<String, StoreError> {
        match &self.kind {
            Kind::Remote {
                multipart, azure, ..
            } => {
                let opts = if *azure {
                    PutMultipartOptions::default()
                } else {
                    PutMultipartOptions {
                        attributes: attributes(metadata, false),
                        ..PutMultipartOptions::default()
                    }
                };
                multipart
                    .create_multipart_opts(&StorePath::from(key), opts)
                    .await
                    .map_err(|e| StoreError::remote("CreateMultipartUpload", key, &e))
            }
            Kind::Local(local) => {
                let local = Arc::clone(local);
                blocking(move || local.create()).await
            }
        }
    }

    /// Uploads part `index` (from 0) of upload `id`; returns the part's tag.
    ///
    /// # Errors
    ///
    /// [`StoreError`].
    pub async fn put_part(
        &self,
        key: &str,
        id: &str,
        index: usize,
        body: Bytes,
    ) -> Result<String, StoreError> {
        match &self.kind {
            Kind::Remote { multipart, .. } => multipart
                .put_part(
                    &StorePath::from(key),
                    &id.to_owned(),
                    index,
                    PutPayload::from(body),
                )
                .await
                .map(|part| part.content_id)
                .map_err(|e| StoreError::remote(&format!("UploadPart {index} of"), key, &e)),
            Kind::Local(local) => {
                let (local, id) = (Arc::clone(local), id.to_owned());
                blocking(move || local.put_part(&id, index, &body)).await
            }
        }
    }

    /// Completes upload `id` of `key` from its parts' tags, in order.
    ///
    /// # Errors
    ///
    /// [`StoreError`].
    pub async fn complete(
        &self,
        key: &str,
        id: &str,
        parts: Vec<String>,
    ) -> Result<(), StoreError> {
        match &self.kind {
            Kind::Remote { multipart, .. } => {
                let parts = parts
                    .into_iter()
                    .map(|content_id| PartId { content_id })
                    .collect();
                multipart
                    .complete_multipart(&StorePath::from(key), &id.to_owned(), parts)
                    .await
                    .map(drop)
                    .map_err(|e| StoreError::remote("CompleteMultipartUpload", key, &e))
            }
            Kind::Local(local) => {
                let (local, key, id) = (Arc::clone(local), key.to_owned(), id.to_owned());
                blocking(move || local.complete(&key, &id)).await
            }
        }
    }

    /// Whether the object `key` is stored.
    ///
    /// # Errors
    ///
    /// [`StoreError`] if the store could not say.
    pub async fn exists(&self, key: &str) -> Result<bool, StoreError> {
        match &self.kind {
            Kind::Remote { store, .. } => match store.head(&StorePath::from(key)).await {
                Ok(_) => Ok(true),
                Err(object_store::Error::NotFound { .. }) => Ok(false),
                Err(e) => Err(StoreError::remote("HeadObject", key, &e)),
            },
            Kind::Local(local) => {
                let path = local.object_path(key);
                blocking(move || Ok(path.is_file())).await
            }
        }
    }

    /// Aborts upload `id` of `key`; returns whether there was one to abort. An upload
    /// the store no longer knows (completed or aborted before) is not an error.
    ///
    /// # Errors
    ///
    /// [`StoreError`].
    pub async fn abort(&self, key: &str, id: &str) -> Result<bool, StoreError> {
        match &self.kind {
            Kind::Remote { multipart, .. } => {
                match multipart
                    .abort_multipart(&StorePath::from(key), &id.to_owned())
                    .await
                {
                    Ok(()) => Ok(true),
                    Err(object_store::Error::NotFound { .. }) => Ok(false),
                    Err(e) => Err(StoreError::remote("AbortMultipartUpload", key, &e)),
                }
            }
            Kind::Local(local) => {
                let (local, id) = (Arc::clone(local), id.to_owned());
                blocking(move || local.abort(&id)).await
            }
        }
    }
}

/// `metadata` as object attributes; for Azure (`azure`) with `_` for `-` in names.
fn attributes(metadata: &Metadata, azure: bool) -> Attributes {
    let mut attributes = Attributes::new();
    for (key, value) in metadata {
        let name = if azure {
            key.replace('-', "_").into()
        } else {
            (*key).into()
        };
        attributes.insert(
            Attribute::Metadata(name),
            AttributeValue::from(value.clone()),
        );
    }
    attributes
}

async fn blocking<T: Send + 'static>(
    f: impl FnOnce() -> Result<T, StoreError> + Send + 'static,
) -> Result<T, StoreError> {
    tokio::task::spawn_blocking(f).await.unwrap_or_else(|_| {
        Err(StoreError {
            permanent: false,
            message: "a blocking file task was cancelled by runtime shutdown".into(),
        })
    })
}

/// Where unfinished `file://` uploads are kept, under the store's directory.
pub const LOCAL_UPLOADS_DIR: &str = ".weir-uploads";

/// A `file://` store: objects are files under `dir`, each written under a temporary
/// name, fsynced, renamed to its key and its directory fsynced, so that an object that
/// exists is complete and durable (object_store's own local store does not fsync).
/// A multipart upload is a file under `dir/.weir-uploads/` whose parts are written at
/// `index × part_size` (parts are all `part_size` but the last).
#[derive(Debug)]
struct LocalDir {
    dir: PathBuf,
    part_size: u64,
}

impl LocalDir {
    fn uploads(&self) -> PathBuf {
        self.dir.join(LOCAL_UPLOADS_DIR)
    }

    fn upload_path(&self, id: &str) -> Result<PathBuf, StoreError> {
        if id.is_empty() || !id.bytes().all(|b| b.is_ascii_hexdigit()) {
            return Err(StoreError {
                permanent: true,
                message: format!("file store: {id:?} is not an upload id of this store"),
            });
        }
        Ok(self.uploads().join(id))
    }

    fn object_path(&self, key: &str) -> PathBuf {
        self.dir.join(key)
    }

    fn put(&self, key: &str, body: &[u8]) -> Result<(), StoreError> {
        let id = self.create()?;
        let path = self.upload_path(&id)?;
        std::fs::write(&path, body).map_err(|e| StoreError::local("write", &path, &e))?;
        self.complete(key, &id)
    }

    fn create(&self) -> Result<String, StoreError> {
        let uploads = self.uploads();
        std::fs::create_dir_all(&uploads).map_err(|e| StoreError::local("create", &uploads, &e))?;
        let mut raw = [0u8; 16];
        getrandom::fill(&mut raw).map_err(|e| StoreError {
            permanent: false,
            message: format!("drawing an upload id: {e}"),
        })?;
        let id: String = raw.iter().map(|b| format!("{b:02x}")).collect();
        let path = self.upload_path(&id)?;
        std::fs::File::create(&path).map_err(|e| StoreError::local("create", &path, &e))?;
        Ok(id)
    }

    fn put_part(&self, id: &str, index: usize, body: &[u8]) -> Result<String, StoreError> {
        use std::os::unix::fs::FileExt;
        let path = self.upload_path(id)?;
        let file = std::fs::OpenOptions::new()
            .write(true)
            .open(&path)
            .map_err(|e| StoreError::local("open", &path, &e))?;
        let at = (index as u64).saturating_mul(self.part_size);
        file.write_all_at(body, at)
            .map_err(|e| StoreError::local("write", &path, &e))?;
        Ok(format!("{index}"))
    }

    fn complete(&self, key: &str, id: &str) -> Result<(), StoreError> {
        let upload = self.upload_path(id)?;
        let file =
            std::fs::File::open(&upload).map_err(|e| StoreError::local("open", &upload, &e))?;
        file.sync_all()
            .map_err(|e| StoreError::local("fsync", &upload, &e))?;
        drop(file);
        let path = self.object_path(key);
        let parent = path.parent().unwrap_or(&self.dir).to_owned();
        std::fs::create_dir_all(&parent).map_err(|e| StoreError::local("create", &parent, &e))?;
        std::fs::rename(&upload, &path).map_err(|e| StoreError::local("rename", &upload, &e))?;
        // The new name, and every directory created for it, must survive a crash.
        let mut dir = parent.as_path();
        loop {
            std::fs::File::open(dir)
                .and_then(|d| d.sync_all())
                .map_err(|e| StoreError::local("fsync", dir, &e))?;
            if dir == self.dir {
                break;
            }
            match dir.parent() {
                Some(up) if up.starts_with(&self.dir) => dir = up,
                _ => break,
            }
        }
        Ok(())
    }

    fn abort(&self, id: &str) -> Result<bool, StoreError> {
        let path = self.upload_path(id)?;
        match std::fs::remove_file(&path) {
            Ok(()) => Ok(true),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(false),
            Err(e) => Err(StoreError::local("remove", &path, &e)),
        }
    }
}

#[cfg(test)]
mod tests {
    use object_store::{Attribute, AttributeValue};

    use super::{StoreError, attributes};

    #[test]
    fn azure_metadata_names_are_identifiers_the_others_keep_their_dashes() {
        let metadata = vec![("weir-first-offset", "7".to_owned())];
        let name = |azure| {
            let attributes = attributes(&metadata, azure);
            let (name, value) = attributes
                .iter()
                .next()
                .map(|(k, v)| (k.clone(), v.clone()))
                .unwrap();
            assert_eq!(value, AttributeValue::from("7"));
            name
        };
        assert_eq!(name(true), Attribute::Metadata("weir_first_offset".into()));
        assert_eq!(name(false), Attribute::Metadata("weir-first-offset".into()));
    }

    #[test]
    fn an_operation_the_store_does_not_support_is_permanent_not_retried() {
        let e = object_store::Error::NotSupported {
            source: "create_multipart_opts with attributes".into(),
        };
        assert!(StoreError::remote("CreateMultipartUpload", "k", &e).permanent);
        let e = object_store::Error::Generic {
            store: "Azure",
            source: "connection reset".into(),
        };
        assert!(!StoreError::remote("PUT", "k", &e).permanent);
    }
}
