//! Where archived objects go: a directory (`file://DIR`), an S3 bucket (`s3://BUCKET/PREFIX`)
//! or memory (tests), behind one interface, through the `object_store` crate.
//!
//! S3 takes its settings from the usual environment: `AWS_ACCESS_KEY_ID`,
//! `AWS_SECRET_ACCESS_KEY`, `AWS_DEFAULT_REGION` (or `AWS_REGION`), and for a server other
//! than AWS `AWS_ENDPOINT_URL` with `AWS_ALLOW_HTTP=true` when it speaks plain HTTP.
//! Everything here is synchronous to its callers: the archive runs its own small Tokio
//! runtime and blocks on it, so the CLI stays free of async code.

use std::ops::Range;
use std::path::PathBuf;
use std::sync::Arc;

use bytes::Bytes;
use object_store::memory::InMemory;
use object_store::multipart::MultipartStore;
use object_store::path::Path;
use object_store::{ObjectMeta, ObjectStore, PutPayload};

use crate::counted::Counted;
use crate::dir::DirectoryStore;
use crate::{ArchiveError, Result};

/// How long a request to S3 is retried (by `object_store`, with exponential backoff from
/// 100 ms) before the run fails and leaves the rest to the next one: a connection lost for a
/// moment is ridden out, a server that is gone is reported within this time.
const RETRY_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(20);
const RETRIES_MAX: usize = 6;

/// Worker threads of the archive's runtime: enough to keep several requests in flight while
/// the recorder and the reader keep theirs.
const RUNTIME_THREADS: usize = 2;

/// A parsed archive URL.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ArchiveUrl {
    /// `file://DIR`: objects are files under DIR (created when archiving).
    File(PathBuf),
    /// `s3://BUCKET/PREFIX`: objects under PREFIX in BUCKET.
    S3 { bucket: String, prefix: String },
    /// An in-memory store: gone with the process (tests).
    Memory,
}

impl ArchiveUrl {
    /// Whether `text` names an archive rather than a target (a file or device).
    pub fn looks_like_url(text: &str) -> bool {
        text.starts_with("file://") || text.starts_with("s3://") || text.starts_with("memory://")
    }

    pub fn parse(text: &str) -> Result<ArchiveUrl> {
        if let Some(dir) = text.strip_prefix("file://") {
            if dir.is_empty() {
                return Err(ArchiveError::Usage(format!(
                    "{text}: name the directory, as file:///srv/archive"
                )));
            }
            return Ok(ArchiveUrl::File(PathBuf::from(dir)));
        }
        if let Some(rest) = text.strip_prefix("s3://") {
            let (bucket, prefix) = rest.split_once('/').unwrap_or((rest, ""));
            if bucket.is_empty() {
                return Err(ArchiveError::Usage(format!(
                    "{text}: name the bucket, as s3://BUCKET/PREFIX"
                )));
            }
            let prefix = prefix.trim_matches('/').to_string();
            if prefix.split('/').any(|part| part == "." || part == "..") {
                return Err(ArchiveError::Usage(format!(
                    "{text}: a prefix with . or .. parts is not a key prefix"
                )));
            }
            return Ok(ArchiveUrl::S3 {
                bucket: bucket.to_string(),
                prefix,
            });
        }
        if text == "memory://" {
            return Ok(ArchiveUrl::Memory);
        }
        Err(ArchiveError::Usage(format!(
            "{text}: an archive is file://DIR or s3://BUCKET/PREFIX"
        )))
    }
}

impl std::fmt::Display for ArchiveUrl {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ArchiveUrl::File(dir) => write!(f, "file://{}", dir.display()),
            ArchiveUrl::S3 { bucket, prefix } if prefix.is_empty() => write!(f, "s3://{bucket}"),
            ArchiveUrl::S3 { bucket, prefix } => write!(f, "s3://{bucket}/{prefix}"),
            ArchiveUrl::Memory => f.write_str("memory://"),
        }
    }
}

/// Whether the archive is being written or only read: a directory is created only for
/// writing, so that reading a mistyped path says so instead of making it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    Read,
    Write,
}

/// An open archive: a store, the key prefix inside it, and a runtime to drive it.
pub struct Archive {
    url: ArchiveUrl,
    /// The store, every request through it counted ([`Counted`]).
    pub(crate) store: Arc<dyn ObjectStore>,
    counted: Arc<Counted>,
    /// Stores with resumable multipart uploads (S3, memory); a directory takes each object
    /// whole (a file renamed into place, so never half there).
    pub(crate) multipart: Option<Arc<dyn MultipartStore>>,
    prefix: String,
    pub(crate) runtime: tokio::runtime::Runtime,
}

impl Archive {
    /// Opens the archive at `url`. S3 credentials and endpoint come from the environment.
    pub fn open(url: &ArchiveUrl, mode: Mode) -> Result<Archive> {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(RUNTIME_THREADS)
            .thread_name("nvrec-archive")
            .enable_all()
            .build()
            .map_err(|source| ArchiveError::Io {
                what: "starting the archive's runtime".into(),
                source,
            })?;
        let store_error = |source| ArchiveError::Store {
            url: url.to_string(),
            operation: "open",
            key: String::new(),
            source: Box::new(source),
        };
        let (store, multipart, prefix): (Arc<dyn ObjectStore>, Option<Arc<dyn MultipartStore>>, _) =
            match url {
                ArchiveUrl::File(dir) => {
                    if mode == Mode::Write {
                        std::fs::create_dir_all(dir).map_err(|source| ArchiveError::Io {
                            what: format!("creating the archive directory {}", dir.display()),
                            source,
                        })?;
                    } else if !dir.is_dir() {
                        return Err(ArchiveError::Usage(format!(
                            "{url}: no such directory, so no archive there"
                        )));
                    }
                    let store = DirectoryStore::new(dir).map_err(store_error)?;
                    (Arc::new(store), None, String::new())
                }
                ArchiveUrl::S3 { bucket, prefix } => {
                    let mut builder = object_store::aws::AmazonS3Builder::from_env()
                        .with_bucket_name(bucket)
                        .with_retry(object_store::RetryConfig {
                            backoff: object_store::BackoffConfig::default(),
                            max_retries: RETRIES_MAX,
                            retry_timeout: RETRY_TIMEOUT,
                        });
                    if std::env::var_os("AWS_DEFAULT_REGION").is_none() {
                        if let Ok(region) = std::env::var("AWS_REGION") {
                            builder = builder.with_region(region);
                        }
                    }
                    if std::env::var_os("AWS_ENDPOINT_URL").is_some()
                        || std::env::var_os("AWS_ENDPOINT").is_some()
                    {
                        // An S3-compatible server: buckets are addressed by path, as most
                        // of them (MinIO, Garage, Ceph) expect without DNS set up.
                        builder = builder.with_virtual_hosted_style_request(false);
                    }
                    let store = Arc::new(builder.build().map_err(store_error)?);
                    (store.clone(), Some(store), prefix.clone())
                }
                ArchiveUrl::Memory => {
                    let store = Arc::new(InMemory::new());
                    (store.clone(), Some(store), String::new())
                }
            };
        let counted = Arc::new(Counted::new(store));
        Ok(Archive {
            url: url.clone(),
            store: counted.clone(),
            counted,
            multipart,
            prefix,
            runtime,
        })
    }

    pub fn url(&self) -> &ArchiveUrl {
        &self.url
    }

    /// The requests made to the store so far, but for multipart parts (see [`Counted`]).
    pub fn requests(&self) -> u64 {
        self.counted.requests()
    }

    /// The full key of `relative` (a key below the archive's prefix).
    pub(crate) fn path(&self, relative: &str) -> Path {
        if self.prefix.is_empty() {
            Path::from(relative)
        } else {
            Path::from(format!("{}/{relative}", self.prefix))
        }
    }

    /// `full` made relative to the archive's prefix again.
    fn relative(&self, full: &Path) -> String {
        let full = full.as_ref();
        if self.prefix.is_empty() {
            full.to_string()
        } else {
            full.strip_prefix(&self.prefix)
                .map(|rest| rest.trim_start_matches('/').to_string())
                .unwrap_or_else(|| full.to_string())
        }
    }

    pub(crate) fn error(
        &self,
        operation: &'static str,
        key: &str,
        source: object_store::Error,
    ) -> ArchiveError {
        ArchiveError::Store {
            url: self.url.to_string(),
            operation,
            key: key.to_string(),
            source: Box::new(source),
        }
    }

    /// Puts a whole object; returns its entity tag where the store gives one.
    pub fn put(&self, key: &str, bytes: Bytes) -> Result<Option<String>> {
        let path = self.path(key);
        self.runtime
            .block_on(self.store.put(&path, PutPayload::from(bytes)))
            .map(|result| result.e_tag)
            .map_err(|source| self.error("PUT", key, source))
    }

    /// The whole object.
    pub fn get(&self, key: &str) -> Result<Bytes> {
        let path = self.path(key);
        self.runtime
            .block_on(async { self.store.get(&path).await?.bytes().await })
            .map_err(|source| self.error("GET", key, source))
    }

    /// Bytes `range` of an object (one ranged GET).
    pub fn get_range(&self, key: &str, range: Range<u64>) -> Result<Bytes> {
        let path = self.path(key);
        self.runtime
            .block_on(self.store.get_range(&path, range))
            .map_err(|source| self.error("GET", key, source))
    }

    /// The object's size and entity tag, or `None` where there is no such object.
    pub fn head(&self, key: &str) -> Result<Option<ObjectMeta>> {
        let path = self.path(key);
        match self.runtime.block_on(self.store.head(&path)) {
            Ok(meta) => Ok(Some(meta)),
            Err(object_store::Error::NotFound { .. }) => Ok(None),
            Err(source) => Err(self.error("HEAD", key, source)),
        }
    }

    /// Every object below `relative_prefix` (the whole archive for ""), as keys relative to
    /// the archive's prefix with their sizes.
    pub fn list(&self, relative_prefix: &str) -> Result<Vec<(String, u64)>> {
        use futures::TryStreamExt;
        let path = if relative_prefix.is_empty() {
            (!self.prefix.is_empty()).then(|| Path::from(self.prefix.as_str()))
        } else {
            Some(self.path(relative_prefix))
        };
        let objects: Vec<ObjectMeta> = self
            .runtime
            .block_on(self.store.list(path.as_ref()).try_collect())
            .map_err(|source| self.error("LIST", relative_prefix, source))?;
        let mut keys: Vec<(String, u64)> = objects
            .iter()
            .map(|meta| (self.relative(&meta.location), meta.size))
            .collect();
        keys.sort();
        Ok(keys)
    }
}
