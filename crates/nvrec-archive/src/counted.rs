//! A store that counts the requests made to it: what reading an archive costs on S3, where
//! every request is billed and has its latency, is what `replay` and `export` report, and
//! what the tests hold a window to (docs/ARCHIVE.md, "Reading in place").
//!
//! Each call is one request, as S3 serves it: a PUT, a GET (whole or one range), a HEAD, a
//! DELETE, a COPY; a GET of several ranges counts one per range, and a listing one per page
//! of up to 1,000 keys. Multipart parts go through the store's multipart interface, beside
//! this one, and are not counted here.

use std::fmt;
use std::ops::Range;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use async_trait::async_trait;
use bytes::Bytes;
use futures::stream::{BoxStream, StreamExt};
use object_store::path::Path;
use object_store::{
    GetOptions, GetResult, ListResult, MultipartUpload, ObjectMeta, ObjectStore,
    PutMultipartOptions, PutOptions, PutPayload, PutResult,
};

/// Keys in one page of an S3 listing.
const LIST_PAGE_KEYS: u64 = 1000;

/// `inner`, with every request counted.
pub struct Counted {
    inner: Arc<dyn ObjectStore>,
    requests: Arc<AtomicU64>,
}

impl Counted {
    pub fn new(inner: Arc<dyn ObjectStore>) -> Counted {
        Counted {
            inner,
            requests: Arc::new(AtomicU64::new(0)),
        }
    }

    /// The requests made so far.
    pub fn requests(&self) -> u64 {
        self.requests.load(Ordering::Relaxed)
    }

    fn count(&self, requests: u64) {
        self.requests.fetch_add(requests, Ordering::Relaxed);
    }

    /// `listing`, counted a request per page (the first when it begins).
    fn counted_list(
        &self,
        listing: BoxStream<'static, object_store::Result<ObjectMeta>>,
    ) -> BoxStream<'static, object_store::Result<ObjectMeta>> {
        self.count(1);
        let requests = Arc::clone(&self.requests);
        let mut listed = 0u64;
        listing
            .inspect(move |_| {
                listed += 1;
                if listed.is_multiple_of(LIST_PAGE_KEYS) {
                    requests.fetch_add(1, Ordering::Relaxed);
                }
            })
            .boxed()
    }
}

impl fmt::Display for Counted {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(&self.inner, f)
    }
}

impl fmt::Debug for Counted {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self, f)
    }
}

#[async_trait]
impl ObjectStore for Counted {
    async fn put_opts(
        &self,
        location: &Path,
        payload: PutPayload,
        opts: PutOptions,
    ) -> object_store::Result<PutResult> {
        self.count(1);
        self.inner.put_opts(location, payload, opts).await
    }

    async fn put_multipart_opts(
        &self,
        location: &Path,
        opts: PutMultipartOptions,
    ) -> object_store::Result<Box<dyn MultipartUpload>> {
        self.count(1);
        self.inner.put_multipart_opts(location, opts).await
    }

    async fn get_opts(
        &self,
        location: &Path,
        options: GetOptions,
    ) -> object_store::Result<GetResult> {
        self.count(1);
        self.inner.get_opts(location, options).await
    }

    async fn get_range(&self, location: &Path, range: Range<u64>) -> object_store::Result<Bytes> {
        self.count(1);
        self.inner.get_range(location, range).await
    }

    async fn get_ranges(
        &self,
        location: &Path,
        ranges: &[Range<u64>],
    ) -> object_store::Result<Vec<Bytes>> {
        self.count(ranges.len() as u64);
        self.inner.get_ranges(location, ranges).await
    }

    async fn head(&self, location: &Path) -> object_store::Result<ObjectMeta> {
        self.count(1);
        self.inner.head(location).await
    }

    async fn delete(&self, location: &Path) -> object_store::Result<()> {
        self.count(1);
        self.inner.delete(location).await
    }

    fn list(&self, prefix: Option<&Path>) -> BoxStream<'static, object_store::Result<ObjectMeta>> {
        self.counted_list(self.inner.list(prefix))
    }

    fn list_with_offset(
        &self,
        prefix: Option<&Path>,
        offset: &Path,
    ) -> BoxStream<'static, object_store::Result<ObjectMeta>> {
        self.counted_list(self.inner.list_with_offset(prefix, offset))
    }

    async fn list_with_delimiter(&self, prefix: Option<&Path>) -> object_store::Result<ListResult> {
        self.count(1);
        self.inner.list_with_delimiter(prefix).await
    }

    async fn copy(&self, from: &Path, to: &Path) -> object_store::Result<()> {
        self.count(1);
        self.inner.copy(from, to).await
    }

    async fn copy_if_not_exists(&self, from: &Path, to: &Path) -> object_store::Result<()> {
        self.count(1);
        self.inner.copy_if_not_exists(from, to).await
    }

    // S3 has no rename: a copy and a delete, two requests.
    async fn rename(&self, from: &Path, to: &Path) -> object_store::Result<()> {
        self.count(2);
        self.inner.rename(from, to).await
    }

    async fn rename_if_not_exists(&self, from: &Path, to: &Path) -> object_store::Result<()> {
        self.count(2);
        self.inner.rename_if_not_exists(from, to).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use object_store::memory::InMemory;

    #[test]
    fn every_request_is_counted_once() {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap();
        let store = Counted::new(Arc::new(InMemory::new()));
        let path = Path::from("a/b");
        runtime.block_on(async {
            store
                .put(&path, Bytes::from_static(b"0123456789").into())
                .await
                .unwrap();
            assert_eq!(store.requests(), 1);
            store.head(&path).await.unwrap();
            store.get_range(&path, 2..5).await.unwrap();
            assert_eq!(
                store.get(&path).await.unwrap().bytes().await.unwrap().len(),
                10
            );
            assert_eq!(store.requests(), 4);
            let listed: Vec<_> = store.list(None).collect().await;
            assert_eq!(listed.len(), 1);
            assert_eq!(store.requests(), 5);
        });
    }
}
