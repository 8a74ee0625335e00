//! The directory store (`file://DIR`): `object_store`'s `LocalFileSystem` for everything
//! but whole-object PUTs, which are written here with O_DIRECT and made durable before the
//! PUT returns.
//!
//! Why a PUT of our own, measured on a 4 GiB archive beside `cp` (bench/archive): the
//! crate's buffered write spent more than half of the run's CPU copying into the page
//! cache (`copy_folio_from_iter_atomic`), which on two cores held the archive to 0.86x
//! `cp`; and it never syncs, so an object it acknowledged could vanish in a power cut,
//! after `--delete-after-verify` had freed the drives on its word. Here the bytes go from
//! the segment through a small aligned bounce buffer straight to the disk, then the file's
//! data, its rename into place and the directory entry are synced: a PUT that returned is
//! on the disk. Everything else (GET, HEAD, LIST, the staging names `KEY#N`, entity tags)
//! is the crate's own, so reading an archive is the same code path as on any store.

use std::fmt;
use std::fs::{File, OpenOptions};
use std::io::ErrorKind;
use std::ops::Range;
use std::os::unix::fs::{FileExt, OpenOptionsExt};
use std::path::{Path as FsPath, PathBuf};
use std::sync::Mutex;

use async_trait::async_trait;
use bytes::Bytes;
use futures::stream::BoxStream;
use nvrec::buffer::{BufferPool, SLOT_ALIGN_BYTES};
use object_store::local::LocalFileSystem;
use object_store::path::Path;
use object_store::{
    GetOptions, GetResult, ListResult, MultipartUpload, ObjectMeta, ObjectStore, PutMode,
    PutMultipartOptions, PutOptions, PutPayload, PutResult,
};

/// Bytes written per O_DIRECT write: large enough that the disk sees deep requests, small
/// enough to stay in the CPU's cache between the copy and the write.
const BOUNCE_BYTES: usize = 4 << 20;

/// A directory as an object store, PUTs written direct and durable (see the module).
pub struct DirectoryStore {
    inner: LocalFileSystem,
    root: PathBuf,
    /// Bounce buffers of finished PUTs, for the next ones (a fresh buffer's pages are
    /// faulted in on first touch, which costs more than the copy through it).
    bounces: Mutex<Vec<BufferPool>>,
}

impl DirectoryStore {
    /// The store of the existing directory `root`.
    pub fn new(root: &FsPath) -> object_store::Result<DirectoryStore> {
        Ok(DirectoryStore {
            inner: LocalFileSystem::new_with_prefix(root)?,
            root: root.to_path_buf(),
            bounces: Mutex::new(Vec::new()),
        })
    }

    fn take_bounce(&self) -> std::io::Result<BufferPool> {
        if let Some(pool) = self.bounces.lock().expect("bounce lock").pop() {
            return Ok(pool);
        }
        BufferPool::new(1, BOUNCE_BYTES).map_err(std::io::Error::other)
    }

    fn give_bounce(&self, pool: BufferPool) {
        self.bounces.lock().expect("bounce lock").push(pool);
    }

    /// Writes `payload` to `dest` durably: a staging file beside it, synced, renamed into
    /// place, the directory synced.
    fn put_durably(&self, dest: &FsPath, payload: &PutPayload) -> std::io::Result<()> {
        let (file, staging) = create_staging(dest)?;
        let mut bounce = self.take_bounce()?;
        let written = write_all(&file, payload, &mut bounce)
            .and_then(|()| file.sync_data())
            .and_then(|()| std::fs::rename(&staging, dest));
        self.give_bounce(bounce);
        drop(file);
        if let Err(error) = written {
            let _ = std::fs::remove_file(&staging);
            return Err(error);
        }
        sync_parent(dest)
    }
}

/// A new staging file `DEST#N` (the crate's own naming, so that its listings skip it),
/// opened for O_DIRECT where the filesystem allows it; parent directories are created.
fn create_staging(dest: &FsPath) -> std::io::Result<(File, PathBuf)> {
    let mut suffix = 1u64;
    loop {
        let mut name = dest.as_os_str().to_owned();
        name.push(format!("#{suffix}"));
        let staging = PathBuf::from(name);
        let open = |flags| {
            OpenOptions::new()
                .write(true)
                .create_new(true)
                .custom_flags(flags)
                .open(&staging)
        };
        let opened = match open(libc::O_DIRECT) {
            // A filesystem without O_DIRECT: written through the page cache, still synced.
            Err(error) if error.raw_os_error() == Some(libc::EINVAL) => open(0),
            other => other,
        };
        match opened {
            Ok(file) => return Ok((file, staging)),
            Err(error) if error.kind() == ErrorKind::AlreadyExists => suffix += 1,
            Err(error) if error.kind() == ErrorKind::NotFound => {
                let parent = dest.parent().ok_or(error)?;
                std::fs::create_dir_all(parent)?;
            }
            Err(error) => return Err(error),
        }
    }
}

/// Writes every byte of `payload` to `file` from offset 0, through `bounce` in aligned
/// blocks; the last block is padded to the alignment, then the file cut to the payload's
/// length.
fn write_all(file: &File, payload: &PutPayload, bounce: &mut BufferPool) -> std::io::Result<()> {
    let buffer = bounce.slot_mut(0);
    let mut filled = 0usize;
    let mut offset = 0u64;
    for part in payload.iter() {
        let mut rest: &[u8] = part;
        while !rest.is_empty() {
            let take = rest.len().min(buffer.len() - filled);
            buffer[filled..filled + take].copy_from_slice(&rest[..take]);
            filled += take;
            rest = &rest[take..];
            if filled == buffer.len() {
                file.write_all_at(&buffer[..filled], offset)?;
                offset += filled as u64;
                filled = 0;
            }
        }
    }
    if filled > 0 {
        let padded = filled.next_multiple_of(SLOT_ALIGN_BYTES);
        buffer[filled..padded].fill(0);
        file.write_all_at(&buffer[..padded], offset)?;
        file.set_len(offset + filled as u64)?;
    }
    Ok(())
}

/// Syncs the directory holding `path`, so that its new name survives a power cut.
fn sync_parent(path: &FsPath) -> std::io::Result<()> {
    match path.parent() {
        Some(parent) => File::open(parent)?.sync_all(),
        None => Ok(()),
    }
}

impl fmt::Display for DirectoryStore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "DirectoryStore({})", self.root.display())
    }
}

impl fmt::Debug for DirectoryStore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self, f)
    }
}

fn io_error(path: &FsPath, source: std::io::Error) -> object_store::Error {
    object_store::Error::Generic {
        store: "DirectoryStore",
        source: Box::new(std::io::Error::new(
            source.kind(),
            format!("{}: {source}", path.display()),
        )),
    }
}

#[async_trait]
impl ObjectStore for DirectoryStore {
    async fn put_opts(
        &self,
        location: &Path,
        payload: PutPayload,
        opts: PutOptions,
    ) -> object_store::Result<PutResult> {
        // What the archive never asks for (create-only, attributes) stays the crate's.
        if !matches!(opts.mode, PutMode::Overwrite) || !opts.attributes.is_empty() {
            return self.inner.put_opts(location, payload, opts).await;
        }
        let dest = self.inner.path_to_filesystem(location)?;
        // The archive's runtime blocks on each request from its own thread: the write
        // runs here rather than on a pool thread, which would cost a hand-over per PUT.
        tokio::task::block_in_place(|| self.put_durably(&dest, &payload))
            .map_err(|source| io_error(&dest, source))?;
        // The entity tag as the crate computes it for HEAD and GET (inode, mtime, size).
        let meta = self.inner.head(location).await?;
        Ok(PutResult {
            e_tag: meta.e_tag,
            version: None,
        })
    }

    async fn put_multipart_opts(
        &self,
        location: &Path,
        opts: PutMultipartOptions,
    ) -> object_store::Result<Box<dyn MultipartUpload>> {
        self.inner.put_multipart_opts(location, opts).await
    }

    async fn get_opts(
        &self,
        location: &Path,
        options: GetOptions,
    ) -> object_store::Result<GetResult> {
        self.inner.get_opts(location, options).await
    }

    async fn get_range(&self, location: &Path, range: Range<u64>) -> object_store::Result<Bytes> {
        self.inner.get_range(location, range).await
    }

    async fn get_ranges(
        &self,
        location: &Path,
        ranges: &[Range<u64>],
    ) -> object_store::Result<Vec<Bytes>> {
        self.inner.get_ranges(location, ranges).await
    }

    async fn head(&self, location: &Path) -> object_store::Result<ObjectMeta> {
        self.inner.head(location).await
    }

    async fn delete(&self, location: &Path) -> object_store::Result<()> {
        self.inner.delete(location).await
    }

    fn list(&self, prefix: Option<&Path>) -> BoxStream<'static, object_store::Result<ObjectMeta>> {
        self.inner.list(prefix)
    }

    fn list_with_offset(
        &self,
        prefix: Option<&Path>,
        offset: &Path,
    ) -> BoxStream<'static, object_store::Result<ObjectMeta>> {
        self.inner.list_with_offset(prefix, offset)
    }

    async fn list_with_delimiter(&self, prefix: Option<&Path>) -> object_store::Result<ListResult> {
        self.inner.list_with_delimiter(prefix).await
    }

    async fn copy(&self, from: &Path, to: &Path) -> object_store::Result<()> {
        self.inner.copy(from, to).await
    }

    async fn rename(&self, from: &Path, to: &Path) -> object_store::Result<()> {
        self.inner.rename(from, to).await
    }

    async fn copy_if_not_exists(&self, from: &Path, to: &Path) -> object_store::Result<()> {
        self.inner.copy_if_not_exists(from, to).await
    }

    async fn rename_if_not_exists(&self, from: &Path, to: &Path) -> object_store::Result<()> {
        self.inner.rename_if_not_exists(from, to).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn runtime() -> tokio::runtime::Runtime {
        tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_all()
            .build()
            .unwrap()
    }

    #[test]
    fn puts_of_every_length_read_back_whole_and_leave_no_staging_file() {
        let dir = std::env::temp_dir().join(format!("nvrec-dirstore-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let store = DirectoryStore::new(&dir).unwrap();
        let runtime = runtime();
        // Empty, under one block, one block, across the bounce buffer, from several parts.
        let lengths = [
            0usize,
            1,
            4095,
            4096,
            4097,
            BOUNCE_BYTES + 12_345,
            3 * BOUNCE_BYTES,
        ];
        for (n, &len) in lengths.iter().enumerate() {
            let bytes: Vec<u8> = (0..len).map(|i| (i * 31 + n) as u8).collect();
            let split = len / 3;
            let payload = PutPayload::from_iter([
                Bytes::copy_from_slice(&bytes[..split]),
                Bytes::copy_from_slice(&bytes[split..]),
            ]);
            let location = Path::from(format!("a/b/object-{n}"));
            let put = runtime.block_on(store.put(&location, payload)).unwrap();
            let back = runtime
                .block_on(async { store.get(&location).await?.bytes().await })
                .unwrap();
            assert_eq!(back.len(), len);
            assert!(back[..] == bytes[..], "object of {len} bytes differs");
            let head = runtime.block_on(store.head(&location)).unwrap();
            assert_eq!(head.e_tag, put.e_tag);
        }
        // Written again: replaced whole.
        let location = Path::from("a/b/object-1");
        runtime
            .block_on(store.put(&location, PutPayload::from_static(b"again")))
            .unwrap();
        let back = runtime
            .block_on(async { store.get(&location).await?.bytes().await })
            .unwrap();
        assert_eq!(&back[..], b"again");
        let names: Vec<String> = std::fs::read_dir(dir.join("a/b"))
            .unwrap()
            .map(|entry| entry.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        assert!(names.iter().all(|name| !name.contains('#')), "{names:?}");
        assert_eq!(names.len(), lengths.len());
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
