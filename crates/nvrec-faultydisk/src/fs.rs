//! The FUSE file system: a root directory holding `disk` and `ctl`, and nothing else.
//!
//! `disk` is opened with `FOPEN_DIRECT_IO`, so the kernel keeps no page cache of it: every
//! read and write, buffered or not, reaches [`Server`] as a request, and a power cut or a
//! failed read cannot be hidden by a cached page. `ctl` is direct I/O too, so that reads
//! return the counters however the file's size is reported (0); each open of `ctl` takes a
//! snapshot of the counters, which its reads return.
//!
//! Disk requests are served on the FUSE thread that received them unless a fault may hold
//! them (see `pool`). Nothing here creates, removes or renames files.

use std::collections::HashMap;
use std::ffi::OsStr;
use std::io;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

use fuser::{
    Errno, FileAttr, FileHandle, FileType, Filesystem, FopenFlags, Generation, INodeNo, InitFlags,
    KernelConfig, LockOwner, OpenFlags, ReplyAttr, ReplyData, ReplyDirectory, ReplyEmpty,
    ReplyEntry, ReplyOpen, ReplyWrite, Request, WriteFlags,
};

use crate::fault::parse_commands;
use crate::pool::Pool;
use crate::server::Server;

/// The disk file's inode.
const DISK_INO: INodeNo = INodeNo(2);
/// The control file's inode.
const CTL_INO: INodeNo = INodeNo(3);
/// The names in the root directory.
pub const DISK_NAME: &str = "disk";
/// The control file's name.
pub const CTL_NAME: &str = "ctl";
/// How long the kernel may cache attributes and names: nothing here ever changes.
const ATTR_TTL: Duration = Duration::from_secs(3600);
/// The largest request asked of the kernel (it caps this at `fs.fuse.max_pages_limit`
/// pages, 1 MiB by default).
pub const MAX_WRITE_BYTES: u32 = 1 << 20;
/// Asynchronous requests (the loop device's direct I/O) the kernel may have outstanding.
const MAX_BACKGROUND: u16 = 64;
/// Threads serving requests a fault may hold.
const DELAY_THREADS: usize = 8;

#[derive(Debug)]
pub(crate) struct DiskFs {
    server: Arc<Server>,
    pool: Pool,
    created: SystemTime,
    uid: u32,
    gid: u32,
    /// The counters each open `ctl` handle returns, by handle.
    snapshots: Mutex<HashMap<u64, Arc<[u8]>>>,
    next_handle: AtomicU64,
}

impl DiskFs {
    pub fn new(server: Arc<Server>) -> io::Result<DiskFs> {
        // SAFETY: geteuid and getegid cannot fail and touch no memory.
        let (uid, gid) = unsafe { (libc::geteuid(), libc::getegid()) };
        Ok(DiskFs {
            server,
            pool: Pool::new(DELAY_THREADS)?,
            created: SystemTime::now(),
            uid,
            gid,
            snapshots: Mutex::new(HashMap::new()),
            next_handle: AtomicU64::new(1),
        })
    }

    fn attr(&self, ino: INodeNo) -> Option<FileAttr> {
        let (kind, perm, size, nlink) = match ino {
            INodeNo::ROOT => (FileType::Directory, 0o755, 0, 2),
            DISK_INO => (
                FileType::RegularFile,
                0o600,
                self.server.store.size_bytes(),
                1,
            ),
            CTL_INO => (FileType::RegularFile, 0o600, 0, 1),
            _ => return None,
        };
        Some(FileAttr {
            ino,
            size,
            blocks: size.div_ceil(512),
            atime: self.created,
            mtime: self.created,
            ctime: self.created,
            crtime: self.created,
            kind,
            perm,
            nlink,
            uid: self.uid,
            gid: self.gid,
            rdev: 0,
            blksize: 4096,
            flags: 0,
        })
    }

    fn reply_attr(&self, ino: INodeNo, reply: ReplyAttr) {
        match self.attr(ino) {
            Some(attr) => reply.attr(&ATTR_TTL, &attr),
            None => reply.error(Errno::ENOENT),
        }
    }

    /// Runs a disk request here, or on the pool while a fault may hold it.
    fn serve(&self, job: impl FnOnce(&Server) + Send + 'static) {
        if self.server.faults.delaying() {
            self.defer(job);
        } else {
            job(&self.server);
        }
    }

    /// Queues a disk request for the pool, counted while it waits for a thread.
    fn defer(&self, job: impl FnOnce(&Server) + Send + 'static) {
        crate::stats::bump(&self.server.counters.queued_now);
        let server = self.server.clone();
        self.pool.run(move || {
            server.counters.queued_now.fetch_sub(1, Ordering::Relaxed);
            job(&server);
        });
    }

    fn snapshot(&self, fh: FileHandle) -> Option<Arc<[u8]>> {
        let snapshots = self.snapshots.lock().unwrap_or_else(|p| p.into_inner());
        snapshots.get(&fh.0).cloned()
    }

    fn write_ctl(&self, data: &[u8]) -> Result<(), crate::Error> {
        let text = std::str::from_utf8(data).map_err(|_| crate::Error::Command {
            line: String::from_utf8_lossy(data).into_owned(),
            reason: "not UTF-8".to_string(),
        })?;
        for command in parse_commands(text)? {
            self.server.apply(command)?;
        }
        Ok(())
    }
}

impl Filesystem for DiskFs {
    fn init(&mut self, _req: &Request, config: &mut KernelConfig) -> io::Result<()> {
        if let Err(nearest) = config.set_max_write(MAX_WRITE_BYTES) {
            let _ = config.set_max_write(nearest);
        }
        let _ = config.set_max_background(MAX_BACKGROUND);
        // Asynchronous direct I/O lets the loop device keep several requests in flight; a
        // kernel without it serves them one at a time, which is slower but correct.
        let _ = config.add_capabilities(InitFlags::FUSE_ASYNC_DIO);
        Ok(())
    }

    fn destroy(&mut self) {
        // Nothing may stay held once the file system goes: the pool joins its threads.
        self.server.faults.clear();
    }

    fn lookup(&self, _req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEntry) {
        let ino = match name.to_str() {
            Some(DISK_NAME) if parent == INodeNo::ROOT => DISK_INO,
            Some(CTL_NAME) if parent == INodeNo::ROOT => CTL_INO,
            _ => return reply.error(Errno::ENOENT),
        };
        match self.attr(ino) {
            Some(attr) => reply.entry(&ATTR_TTL, &attr, Generation(0)),
            None => reply.error(Errno::ENOENT),
        }
    }

    fn getattr(&self, _req: &Request, ino: INodeNo, _fh: Option<FileHandle>, reply: ReplyAttr) {
        self.reply_attr(ino, reply);
    }

    /// Truncating `ctl` (a shell's `>`) is accepted and changes nothing; the disk's size is
    /// fixed.
    fn setattr(
        &self,
        _req: &Request,
        ino: INodeNo,
        _mode: Option<u32>,
        _uid: Option<u32>,
        _gid: Option<u32>,
        size: Option<u64>,
        _atime: Option<fuser::TimeOrNow>,
        _mtime: Option<fuser::TimeOrNow>,
        _ctime: Option<SystemTime>,
        _fh: Option<FileHandle>,
        _crtime: Option<SystemTime>,
        _chgtime: Option<SystemTime>,
        _bkuptime: Option<SystemTime>,
        _flags: Option<fuser::BsdFileFlags>,
        reply: ReplyAttr,
    ) {
        if ino == DISK_INO && size.is_some_and(|size| size != self.server.store.size_bytes()) {
            return reply.error(Errno::EPERM);
        }
        self.reply_attr(ino, reply);
    }

    fn open(&self, _req: &Request, ino: INodeNo, _flags: OpenFlags, reply: ReplyOpen) {
        match ino {
            DISK_INO => reply.opened(
                FileHandle(0),
                FopenFlags::FOPEN_DIRECT_IO | FopenFlags::FOPEN_PARALLEL_DIRECT_WRITES,
            ),
            CTL_INO => {
                let fh = self.next_handle.fetch_add(1, Ordering::Relaxed);
                let json: Arc<[u8]> = self.server.stats().to_json().into_bytes().into();
                let mut snapshots = self.snapshots.lock().unwrap_or_else(|p| p.into_inner());
                snapshots.insert(fh, json);
                reply.opened(FileHandle(fh), FopenFlags::FOPEN_DIRECT_IO);
            }
            _ => reply.error(Errno::EISDIR),
        }
    }

    fn read(
        &self,
        _req: &Request,
        ino: INodeNo,
        fh: FileHandle,
        offset: u64,
        size: u32,
        _flags: OpenFlags,
        _lock_owner: Option<LockOwner>,
        reply: ReplyData,
    ) {
        match ino {
            DISK_INO => self.serve(move |server| server.serve_read(offset, size, reply)),
            CTL_INO => {
                let json = self.snapshot(fh).unwrap_or_default();
                let start = (offset as usize).min(json.len());
                let end = start.saturating_add(size as usize).min(json.len());
                reply.data(&json[start..end]);
            }
            _ => reply.error(Errno::EISDIR),
        }
    }

    fn write(
        &self,
        _req: &Request,
        ino: INodeNo,
        _fh: FileHandle,
        offset: u64,
        data: &[u8],
        _write_flags: WriteFlags,
        _flags: OpenFlags,
        _lock_owner: Option<LockOwner>,
        reply: ReplyWrite,
    ) {
        match ino {
            DISK_INO if self.server.faults.delaying() => {
                let data = data.to_vec();
                self.defer(move |server| server.serve_write(offset, &data, reply));
            }
            DISK_INO => self.server.serve_write(offset, data, reply),
            CTL_INO => match self.write_ctl(data) {
                Ok(()) => reply.written(data.len() as u32),
                Err(err) => {
                    eprintln!("nvrec-faultydisk: {err}");
                    reply.error(match err {
                        crate::Error::Command { .. } | crate::Error::NotTracking => Errno::EINVAL,
                        _ => Errno::EIO,
                    });
                }
            },
            _ => reply.error(Errno::EISDIR),
        }
    }

    /// A FLUSH comes with every `close` of the file, not with a block-layer flush (that
    /// arrives as FSYNC): it commits nothing, as closing a block device does not flush the
    /// drive's cache, and no fault fails it (a failing flush rule or dying fails FSYNC).
    fn flush(
        &self,
        _req: &Request,
        ino: INodeNo,
        _fh: FileHandle,
        _lock_owner: LockOwner,
        reply: ReplyEmpty,
    ) {
        if ino == DISK_INO {
            crate::stats::bump(&self.server.counters.flushes);
        }
        reply.ok();
    }

    fn release(
        &self,
        _req: &Request,
        ino: INodeNo,
        fh: FileHandle,
        _flags: OpenFlags,
        _lock_owner: Option<LockOwner>,
        _flush: bool,
        reply: ReplyEmpty,
    ) {
        if ino == CTL_INO {
            let mut snapshots = self.snapshots.lock().unwrap_or_else(|p| p.into_inner());
            snapshots.remove(&fh.0);
        }
        reply.ok();
    }

    /// An FSYNC is the loop device's flush: the loop device calls `vfs_fsync(file, 0)` on
    /// `disk` for every REQ_OP_FLUSH (its queue reports a volatile write cache, "write
    /// back", and no FUA). Measured on Linux 6.18 with `losetup --direct-io=on`: `fsync` and
    /// `fdatasync` of the loop device each arrive as exactly one FSYNC, always with
    /// `datasync` false; an O_DSYNC write (a FUA write, emulated by the block layer) arrives
    /// between two; attaching with direct I/O sends one; `blockdev --flushbufs`, `sync(2)`,
    /// `syncfs`, plain writes and opening or closing the device send none. So this is the
    /// one place a flush rule or dying fails a flush (the loop device answers EIO for it),
    /// and `datasync` makes no difference.
    fn fsync(
        &self,
        _req: &Request,
        ino: INodeNo,
        _fh: FileHandle,
        _datasync: bool,
        reply: ReplyEmpty,
    ) {
        match ino {
            DISK_INO => self.serve(move |server| server.serve_fsync(reply)),
            _ => reply.ok(),
        }
    }

    fn readdir(
        &self,
        _req: &Request,
        ino: INodeNo,
        _fh: FileHandle,
        offset: u64,
        mut reply: ReplyDirectory,
    ) {
        if ino != INodeNo::ROOT {
            return reply.error(Errno::ENOTDIR);
        }
        let entries = [
            (INodeNo::ROOT, FileType::Directory, "."),
            (INodeNo::ROOT, FileType::Directory, ".."),
            (DISK_INO, FileType::RegularFile, DISK_NAME),
            (CTL_INO, FileType::RegularFile, CTL_NAME),
        ];
        for (index, (ino, kind, name)) in entries.iter().enumerate().skip(offset as usize) {
            if reply.add(*ino, index as u64 + 1, *kind, name) {
                break;
            }
        }
        reply.ok();
    }

    /// The directory has nothing to make durable.
    fn fsyncdir(
        &self,
        _req: &Request,
        _ino: INodeNo,
        _fh: FileHandle,
        _datasync: bool,
        reply: ReplyEmpty,
    ) {
        reply.ok();
    }

    /// The loop device turns discards into punched holes and write-zeroes into zeroed
    /// ranges; both zero the bytes. Plain allocation has nothing to do.
    fn fallocate(
        &self,
        _req: &Request,
        ino: INodeNo,
        _fh: FileHandle,
        offset: u64,
        length: u64,
        mode: i32,
        reply: ReplyEmpty,
    ) {
        if ino != DISK_INO {
            return reply.error(Errno::EOPNOTSUPP);
        }
        let zeroing = libc::FALLOC_FL_PUNCH_HOLE | libc::FALLOC_FL_ZERO_RANGE;
        if mode & zeroing != 0 {
            self.serve(move |server| server.serve_discard(offset, length, reply));
        } else if mode & !libc::FALLOC_FL_KEEP_SIZE == 0 {
            reply.ok();
        } else {
            reply.error(Errno::EOPNOTSUPP);
        }
    }
}
