//! [`FaultyDisk`]: the mounted file system and the handle that controls its faults.
//!
//! Starting mounts the file system on a FUSE session in background threads; every control
//! method goes to the same [`Server`] the control file drives. Stopping (`unmount`, or
//! dropping the handle) clears the faults so that nothing stays held, then unmounts: a plain
//! unmount when nothing uses the disk, else a lazy one, and never leaves a mount behind.

use std::ops::Range;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use fuser::{BackgroundSession, Config, MountOption, SessionACL};

use crate::control::FaultState;
use crate::fault::{Command, Errno, Fault, Op};
use crate::fs::{DiskFs, CTL_NAME, DISK_NAME};
use crate::loopdev::LoopDevice;
use crate::overlay::{PowerCut, SECTOR_BYTES};
use crate::server::Server;
use crate::stats::{Counters, Stats};
use crate::store::{Durability, Store};
use crate::{Error, Result};

/// FUSE threads reading requests by default: the loop device keeps several in flight.
pub const FUSE_THREADS_DEFAULT: usize = 4;

/// How to start a faulty disk.
#[derive(Clone, Debug)]
pub struct Options {
    /// Whether writes wait in memory for a flush (so a power cut can lose them).
    pub durability: Durability,
    /// Where to mount; `None` makes a fresh directory under the temp dir, removed on stop.
    pub mount_dir: Option<PathBuf>,
    /// FUSE threads reading requests.
    pub fuse_threads: usize,
}

impl Default for Options {
    fn default() -> Options {
        Options {
            durability: Durability::WriteThrough,
            mount_dir: None,
            fuse_threads: FUSE_THREADS_DEFAULT,
        }
    }
}

/// How the file system came down.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Unmount {
    /// Unmounted and its threads joined.
    Clean,
    /// Busy (a loop device still over `disk`): detached from the tree at once, and served
    /// until its last user lets go. Nothing is left mounted.
    Lazy,
}

/// A mounted faulty disk: `disk` and `ctl` in [`FaultyDisk::mount_dir`].
#[derive(Debug)]
pub struct FaultyDisk {
    server: Arc<Server>,
    session: Option<BackgroundSession>,
    mount_dir: PathBuf,
    remove_mount_dir: bool,
}

impl FaultyDisk {
    /// Creates `backing` sparse if it is missing (extends it if shorter than `size_bytes`) and
    /// mounts a file system that serves it as `disk`, `size_bytes` long. Needs root (or a
    /// FUSE mount helper) and `/dev/fuse`.
    pub fn start(backing: &Path, size_bytes: u64, options: Options) -> Result<FaultyDisk> {
        check_size(size_bytes)?;
        assert!(options.fuse_threads > 0, "FUSE needs a thread");
        let store = Store::open(backing, size_bytes, options.durability)?;
        let server = Arc::new(Server {
            store,
            faults: FaultState::new(),
            counters: Counters::default(),
        });
        let (mount_dir, remove_mount_dir) = match options.mount_dir {
            Some(dir) => (dir, false),
            None => (fresh_dir()?, true),
        };
        let session = mount(&server, &mount_dir, options.fuse_threads).inspect_err(|_| {
            if remove_mount_dir {
                let _ = std::fs::remove_dir(&mount_dir);
            }
        })?;
        Ok(FaultyDisk {
            server,
            session: Some(session),
            mount_dir,
            remove_mount_dir,
        })
    }

    /// The mount point.
    pub fn mount_dir(&self) -> &Path {
        &self.mount_dir
    }

    /// The disk file: put a loop device over it ([`FaultyDisk::attach_loop`]).
    pub fn disk_path(&self) -> PathBuf {
        self.mount_dir.join(DISK_NAME)
    }

    /// The control file: write command lines, read counters as JSON.
    pub fn ctl_path(&self) -> PathBuf {
        self.mount_dir.join(CTL_NAME)
    }

    /// The disk's size.
    pub fn size_bytes(&self) -> u64 {
        self.server.store.size_bytes()
    }

    /// Attaches a loop device over the disk (direct I/O where the kernel allows it). The
    /// device clears this disk's faults before it detaches, so that a stalled request cannot
    /// hold the detach.
    pub fn attach_loop(&self) -> Result<LoopDevice> {
        let mut device = LoopDevice::attach(&self.disk_path())?;
        device.release_before_detach(self.server.clone());
        Ok(device)
    }

    /// Applies a control command, as a line written to the control file would.
    pub fn apply(&self, command: Command) -> Result<()> {
        self.server.apply(command)
    }

    /// Adds a fault.
    pub fn inject(&self, fault: Fault) {
        self.server.faults.inject(fault);
    }

    /// Fails requests of kind `op` that touch `range` with `errno`.
    pub fn fail(&self, op: Op, range: Range<u64>, errno: Errno) {
        assert!(range.start < range.end, "an empty range fails nothing");
        self.inject(Fault::Fail { op, range, errno });
    }

    /// Holds every request until [`FaultyDisk::resume`] (or [`FaultyDisk::clear`]).
    pub fn stall(&self) {
        self.inject(Fault::Stall { duration: None });
    }

    /// Holds every request for `duration` from now, or until resumed.
    pub fn stall_for(&self, duration: Duration) {
        self.inject(Fault::Stall {
            duration: Some(duration),
        });
    }

    /// Ends a stall.
    pub fn resume(&self) {
        self.server.faults.resume();
    }

    /// Limits reads and writes together to `rate_bytes_per_s`.
    pub fn slow(&self, rate_bytes_per_s: u64) {
        self.inject(Fault::Slow { rate_bytes_per_s });
    }

    /// Makes every flush fail with EIO from now on, until [`FaultyDisk::clear`]; reads and
    /// writes keep working. A flush is an FSYNC of `disk`, which is what the loop device
    /// sends for a block-layer flush: `fsync`/`fdatasync` of the loop device, or an O_DSYNC
    /// (FUA) write, which then fails too although its data was written. A failed flush
    /// commits nothing. The control line `fail flush`.
    pub fn fail_flushes(&self) {
        self.fail_flushes_after(0);
    }

    /// Lets `successes` more flushes through, then fails every later one with EIO, until
    /// [`FaultyDisk::clear`]. Replaces an earlier flush rule. The control line `fail flush
    /// after=N`.
    pub fn fail_flushes_after(&self, successes: u64) {
        self.inject(Fault::FailFlush { after: successes });
    }

    /// Makes the disk a dying drive: every write, discard and flush fails with EIO from now
    /// on; reads keep working (see [`FaultyDisk::dying_with_reads`]). [`FaultyDisk::clear`]
    /// brings it back. The control line `dying`.
    pub fn dying(&self) {
        self.inject(Fault::Dying { fail_reads: false });
    }

    /// As [`FaultyDisk::dying`], and reads fail with EIO too: nothing works. The control
    /// line `dying reads=eio`.
    pub fn dying_with_reads(&self) {
        self.inject(Fault::Dying { fail_reads: true });
    }

    /// Loses every write not yet flushed, or with a seed keeps a seeded subset of their
    /// 4 KiB sectors ([`crate::torn_keep`]). Needs [`Durability::TrackUnflushed`].
    pub fn power_cut(&self, seed: Option<u64>) -> Result<PowerCut> {
        self.server.power_cut(seed)
    }

    /// Removes every fault (failing ranges, flush rule, dying, stall, rate) and releases
    /// every held request: the disk works again.
    pub fn clear(&self) {
        self.server.faults.clear();
    }

    /// The counters and the faults in force.
    pub fn stats(&self) -> Stats {
        self.server.stats()
    }

    /// Clears the faults and unmounts.
    pub fn unmount(mut self) -> Result<Unmount> {
        self.stop()
    }

    fn stop(&mut self) -> Result<Unmount> {
        let Some(session) = self.session.take() else {
            return Ok(Unmount::Clean);
        };
        self.server.faults.clear();
        let result = unmount(&self.mount_dir);
        match result {
            Ok(Unmount::Clean) => {
                // The kernel ended the connection: the FUSE threads return.
                let _ = session.join();
            }
            // Still in use: dropping the session detaches its threads, which serve the last
            // users until they let go. Its own unmount then finds nothing to do.
            _ => drop(session),
        }
        if self.remove_mount_dir {
            let _ = std::fs::remove_dir(&self.mount_dir);
        }
        result
    }
}

impl Drop for FaultyDisk {
    fn drop(&mut self) {
        if let Err(err) = self.stop() {
            eprintln!("nvrec-faultydisk: {err}");
        }
    }
}

fn check_size(size_bytes: u64) -> Result<()> {
    if size_bytes == 0 || !size_bytes.is_multiple_of(SECTOR_BYTES) {
        return Err(Error::Size {
            size_bytes,
            why: "must be a positive multiple of 4096",
        });
    }
    if i64::try_from(size_bytes).is_err() {
        return Err(Error::Size {
            size_bytes,
            why: "must fit in a file offset",
        });
    }
    Ok(())
}

fn mount(server: &Arc<Server>, dir: &Path, fuse_threads: usize) -> Result<BackgroundSession> {
    let fs = DiskFs::new(server.clone()).map_err(|e| Error::io("starting threads for", dir, e))?;
    let mut config = Config::default();
    config.mount_options = vec![
        MountOption::FSName("nvrec-faultydisk".to_string()),
        MountOption::Subtype("nvrec-faultydisk".to_string()),
        MountOption::NoAtime,
    ];
    config.acl = SessionACL::Owner;
    config.n_threads = Some(fuse_threads);
    config.clone_fd = true;
    fuser::spawn_mount(fs, dir, &config).map_err(|e| Error::io("mounting FUSE at", dir, e))
}

/// Unmounts, lazily if busy.
fn unmount(dir: &Path) -> Result<Unmount> {
    let path = std::ffi::CString::new(dir.as_os_str().as_encoded_bytes())
        .map_err(|_| Error::io("unmounting", dir, std::io::ErrorKind::InvalidInput.into()))?;
    // SAFETY: umount2 reads a NUL-terminated path that lives across the call.
    if unsafe { libc::umount2(path.as_ptr(), 0) } == 0 {
        return Ok(Unmount::Clean);
    }
    let err = std::io::Error::last_os_error();
    if err.raw_os_error() != Some(libc::EBUSY) {
        return Err(Error::io("unmounting", dir, err));
    }
    // SAFETY: as above.
    if unsafe { libc::umount2(path.as_ptr(), libc::MNT_DETACH) } == 0 {
        return Ok(Unmount::Lazy);
    }
    Err(Error::io(
        "unmounting (lazily)",
        dir,
        std::io::Error::last_os_error(),
    ))
}

/// A new empty directory under the temp dir, named after the process and a counter.
fn fresh_dir() -> Result<PathBuf> {
    static NEXT: AtomicU64 = AtomicU64::new(0);
    loop {
        let dir = std::env::temp_dir().join(format!(
            "nvrec-faultydisk.{}.{}",
            std::process::id(),
            NEXT.fetch_add(1, Ordering::Relaxed)
        ));
        match std::fs::create_dir(&dir) {
            Ok(()) => return Ok(dir),
            Err(err) if err.kind() == std::io::ErrorKind::AlreadyExists => continue,
            Err(err) => return Err(Error::io("creating mount point", dir, err)),
        }
    }
}
