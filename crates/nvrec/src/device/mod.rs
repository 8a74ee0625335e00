//! Opening targets for direct I/O: regular files and block devices.
//!
//! What this module does:
//! - [`open`] stats a path, creates and preallocates a regular file when asked, opens it
//!   or a block device with `O_DIRECT | O_CLOEXEC`, and probes its capacity and the
//!   alignment O_DIRECT needs (`BLKGETSIZE64` / `BLKSSZGET` for block devices,
//!   `statx(STATX_DIOALIGN)` for files).
//! - [`open_buffered`] does the same without `O_DIRECT`, for the one use of the page cache:
//!   measuring what it costs (`write`, `read` and `bench sweep` with `--buffered`), and
//!   [`drop_cached`] (`cache.rs`) empties the page cache of a range before such a transfer
//!   and says how, and what it could not.
//! - Before a block device is opened for writing, it refuses a device that is mounted
//!   (itself or a partition), active swap, held by device-mapper / md / bcache, or
//!   opened exclusively by someone else (`O_EXCL`, which it then holds itself), whatever
//!   the [`Safety`]; with [`Safety::Check`] also one whose first 128 KiB hold a known
//!   signature ([`detect_signature`]), which [`Safety::Force`] overrides. Each refusal is
//!   a [`DeviceError`] naming what was found.
//! - [`describe`] gathers facts for reports from sysfs (transport, model, serial,
//!   firmware, PCIe link, loop backing file) and never fails.
//!
//! What it deliberately does not do:
//! - It never creates, partitions, formats, discards or writes to a block device, and
//!   never writes to a file beyond creating and preallocating it.
//! - It does not run safety checks on regular files, nor on any open for reading.
//! - It does not look for signatures at the end of a device (md metadata 0.90/1.0,
//!   backup GPT), nor validate the superblocks whose magic it finds.
//! - It does not issue NVMe admin commands; everything comes from sysfs and procfs.

mod cache;
pub mod pcie;
mod procfs;
mod safety;
mod signature;
mod sys;
pub(crate) mod sysfs;

#[cfg(test)]
mod tests;

use std::fs::File;
use std::io;
use std::os::unix::fs::{FileTypeExt, MetadataExt, OpenOptionsExt};
use std::os::unix::io::AsRawFd;
use std::path::{Path, PathBuf};

pub use cache::{drop_cached, CacheDrop, CacheDropMethod};
pub use safety::{usage, Usage};
pub use signature::{detect_signature, Signature, SignatureKind, SIGNATURE_PROBE_BYTES};

use sysfs::DevNum;
/// The sysfs reader, shared with `nvme::discover`.
pub(crate) use sysfs::{read_trimmed, Sysfs};

/// What kind of object a target is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum TargetKind {
    File,
    BlockDevice,
}

/// Whether the target is opened for reading only or for writing.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Access {
    Read,
    Write,
}

/// How a target's data moves: straight between our buffers and the device, or through the
/// kernel's page cache.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum IoPath {
    /// `O_DIRECT`: what nvrec always records and reads with.
    Direct,
    /// Through the page cache (`--buffered`), only to measure it against direct I/O.
    Buffered,
}

/// Whether the safety checks run before a write open.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Safety {
    /// Refuse a mounted or in-use device, or one whose first blocks hold a signature.
    Check,
    /// The user said `--force`: open anyway.
    Force,
}

#[derive(Debug, Clone)]
pub struct OpenOptions {
    pub access: Access,
    /// For a regular file opened for writing: create it if missing and make sure it is at
    /// least this long, preallocated (fallocate). Ignored for block devices.
    pub create_len_bytes: Option<u64>,
    pub safety: Safety,
}

/// An open target, ready for O_DIRECT I/O.
#[derive(Debug)]
pub struct Target {
    pub path: PathBuf,
    pub kind: TargetKind,
    /// Usable bytes: the device size, or the file length after any preallocation.
    pub capacity_bytes: u64,
    /// Alignment that O_DIRECT needs for offsets, lengths and buffer addresses.
    pub logical_block_bytes: u32,
    /// Opened with O_DIRECT unless `io_path` says buffered (and O_CLOEXEC); read-write
    /// when `Access::Write`.
    pub file: File,
    pub io_path: IoPath,
    /// This process holds the recording's exclusive lock through `file` ([`lock`]).
    pub recording_lock: std::sync::atomic::AtomicBool,
}

/// Why a target could not be opened. Every message says what happened, to which path,
/// and what the user can do about it.
#[derive(Debug, thiserror::Error)]
pub enum DeviceError {
    #[error("{} does not exist{}", .path.display(), if *.can_create {
        "; to create it, say how large it must be (write: --size, record: --create-size)"
    } else { "" })]
    NotFound {
        path: PathBuf,
        /// Whether giving a size would have created it (a write open).
        can_create: bool,
    },

    #[error("{} is {found}, not a regular file or a block device; give a file path or a \
             block device such as /dev/nvme0n1", .path.display())]
    NotFileOrBlockDevice { path: PathBuf, found: &'static str },

    #[error("{} does not exist; refusing to create a file under /dev, where a device of that \
             name was meant (a partition the kernel has not listed yet?): give an existing \
             device, or a file path elsewhere", .path.display())]
    NoSuchDevice { path: PathBuf },

    #[error("could not open {}: {source}; check the path and your permissions (block \
             devices usually need root or the `disk` group)", .path.display())]
    Open { path: PathBuf, source: io::Error },

    #[error("the filesystem holding {} does not support direct I/O (O_DIRECT); put the file \
             on one that does, such as ext4 or XFS, or record onto a block device",
             .path.display())]
    DirectIoUnsupported { path: PathBuf },

    #[error("could not preallocate {len_bytes} bytes for {}: {source}; check the free space \
             on its filesystem or give a smaller --size", .path.display())]
    Preallocate {
        path: PathBuf,
        len_bytes: u64,
        source: io::Error,
    },

    #[error("{}; refusing to overwrite a mounted filesystem (unmount it first; --force \
             does not override this)",
             in_use_subject(.path, .device, "is mounted on", Some(.mount_point)))]
    Mounted {
        path: PathBuf,
        /// The device that is mounted: the target itself or one of its partitions.
        device: PathBuf,
        mount_point: PathBuf,
    },

    #[error("{}; refusing to overwrite it (swapoff it first; --force does not override \
             this)",
             in_use_subject(.path, .device, "is in use as swap", None))]
    Swap {
        path: PathBuf,
        /// The swap device: the target itself or one of its partitions.
        device: PathBuf,
    },

    #[error("{} is in use by {} (device-mapper, md RAID or bcache); refusing to overwrite it \
             (tear those down first; --force does not override this)",
             .path.display(), .holders.join(", "))]
    Held { path: PathBuf, holders: Vec<String> },

    #[error("{} holds {what} (magic at byte {offset_bytes}); refusing to overwrite it (use \
             --force to override)", .path.display())]
    Signature {
        path: PathBuf,
        what: SignatureKind,
        offset_bytes: u64,
    },

    #[error("{} is busy: another program holds it open exclusively (a mounted filesystem, \
             swap, device-mapper, md RAID, or another recorder); refusing to overwrite it \
             (stop that user first; --force does not override this)", .path.display())]
    Busy { path: PathBuf },

    #[error("{} is a member of a recording that is running (another nvrec holds its lock); \
             refusing to write it (stop that recording first; --force does not override \
             this)", .path.display())]
    Recording { path: PathBuf },

    #[error("{}: could not {what}: {source}", .path.display())]
    Probe {
        path: PathBuf,
        what: String,
        source: io::Error,
    },

    #[error("{} reports a capacity of 0 bytes, so there is nothing to record onto (is it a \
             loop device without a backing file, or a card reader without a card?)",
             .path.display())]
    ZeroCapacity { path: PathBuf },
}

/// "/dev/sda is mounted on /mnt", or, when a partition of the target is the one in use,
/// "/dev/sda: /dev/sda1 is mounted on /mnt".
fn in_use_subject(path: &Path, device: &Path, verb: &str, place: Option<&PathBuf>) -> String {
    let mut text = if device == path {
        format!("{} {verb}", path.display())
    } else {
        format!("{}: {} {verb}", path.display(), device.display())
    };
    if let Some(place) = place {
        text.push(' ');
        text.push_str(&place.display().to_string());
    }
    text
}

impl DeviceError {
    /// True when the open was refused to protect existing data or a device in use
    /// (mounted, swap, held, signature found, exclusively opened elsewhere). `--force`
    /// overrides only a signature: a device in use is never written.
    pub fn is_safety_refusal(&self) -> bool {
        matches!(
            self,
            Self::Mounted { .. }
                | Self::Swap { .. }
                | Self::Held { .. }
                | Self::Signature { .. }
                | Self::Busy { .. }
                | Self::Recording { .. }
                | Self::NoSuchDevice { .. }
        )
    }
}

/// Alignment assumed for a regular file when the kernel does not report one.
const DEFAULT_FILE_ALIGN_BYTES: u32 = 4096;

/// Opens `path` for direct I/O, creating or safety-checking it as `options` say.
pub fn open(path: &Path, options: &OpenOptions) -> Result<Target, DeviceError> {
    open_as(path, options, IoPath::Direct)
}

/// Opens `path` as [`open`] does (the same creation, the same safety checks) but without
/// `O_DIRECT`: its transfers go through the page cache. Only for measuring the page cache
/// against direct I/O; nothing records this way.
pub fn open_buffered(path: &Path, options: &OpenOptions) -> Result<Target, DeviceError> {
    open_as(path, options, IoPath::Buffered)
}

fn open_as(path: &Path, options: &OpenOptions, io_path: IoPath) -> Result<Target, DeviceError> {
    match std::fs::metadata(path) {
        Ok(meta) => {
            let file_type = meta.file_type();
            if file_type.is_file() {
                open_regular_file(path, options, true, io_path)
            } else if file_type.is_block_device() {
                open_block_device(path, options, DevNum::from_dev_t(meta.rdev()), io_path)
            } else {
                Err(DeviceError::NotFileOrBlockDevice {
                    path: path.to_path_buf(),
                    found: file_type_phrase(&meta.file_type()),
                })
            }
        }
        Err(e) if e.kind() == io::ErrorKind::NotFound => {
            match (options.access, options.create_len_bytes) {
                (Access::Write, Some(_)) if under_dev(path) => Err(DeviceError::NoSuchDevice {
                    path: path.to_path_buf(),
                }),
                (Access::Write, Some(_)) => open_regular_file(path, options, false, io_path),
                (Access::Write, None) => Err(DeviceError::NotFound {
                    path: path.to_path_buf(),
                    can_create: true,
                }),
                (Access::Read, _) => Err(DeviceError::NotFound {
                    path: path.to_path_buf(),
                    can_create: false,
                }),
            }
        }
        Err(source) => Err(DeviceError::Probe {
            path: path.to_path_buf(),
            what: "look up the path".to_string(),
            source,
        }),
    }
}

/// Whether `path` names something under `/dev` (through its parent directory as it
/// resolves, so that `/tmp/link-to-dev/x` counts too): only devices live there.
fn under_dev(path: &Path) -> bool {
    let absolute = match path
        .parent()
        .filter(|parent| !parent.as_os_str().is_empty())
    {
        Some(parent) => parent
            .canonicalize()
            .unwrap_or_else(|_| parent.to_path_buf()),
        None => std::env::current_dir().unwrap_or_default(),
    };
    absolute.starts_with("/dev")
}

fn file_type_phrase(file_type: &std::fs::FileType) -> &'static str {
    if file_type.is_dir() {
        "a directory"
    } else if file_type.is_char_device() {
        "a character device"
    } else if file_type.is_fifo() {
        "a FIFO"
    } else if file_type.is_socket() {
        "a socket"
    } else {
        "neither a regular file nor a block device"
    }
}

/// Opens (and, for a write with a length, creates and preallocates) a regular file.
/// `existed` says whether the path was there when we looked, so that a file we created
/// ourselves is removed again if its filesystem turns out not to support O_DIRECT.
fn open_regular_file(
    path: &Path,
    options: &OpenOptions,
    existed: bool,
    io_path: IoPath,
) -> Result<Target, DeviceError> {
    let write = options.access == Access::Write;
    let create_len_bytes = if write {
        options.create_len_bytes
    } else {
        None
    };
    let mut open_options = std::fs::OpenOptions::new();
    open_options
        .read(true)
        .write(write)
        .custom_flags(direct_flag(io_path) | libc::O_CLOEXEC);
    if create_len_bytes.is_some() {
        open_options.create(true).mode(0o644);
    }
    let file = open_options.open(path).map_err(|source| {
        match source.raw_os_error() {
            Some(libc::EINVAL) if io_path == IoPath::Direct => {
                // Linux creates the file before it checks for O_DIRECT support; do not
                // leave an empty file behind that the user never had.
                if !existed {
                    let _ = std::fs::remove_file(path);
                }
                DeviceError::DirectIoUnsupported {
                    path: path.to_path_buf(),
                }
            }
            Some(libc::ENOENT) if create_len_bytes.is_none() => DeviceError::NotFound {
                path: path.to_path_buf(),
                can_create: write,
            },
            _ => DeviceError::Open {
                path: path.to_path_buf(),
                source,
            },
        }
    })?;

    let meta = stat_opened(path, &file, "stat the open file", |kind| kind.is_file())?;

    if write {
        lock(path, &file, Lock::Writer)?;
    }
    if let Some(len_bytes) = create_len_bytes {
        preallocate(path, &file, len_bytes, meta.len())?;
    }

    let capacity_bytes = file
        .metadata()
        .map_err(|source| probe_error(path, "stat the open file", source))?
        .len();
    let logical_block_bytes = sys::dio_alignment_bytes(&file).unwrap_or(DEFAULT_FILE_ALIGN_BYTES);
    Ok(Target {
        path: path.to_path_buf(),
        kind: TargetKind::File,
        capacity_bytes,
        logical_block_bytes,
        file,
        io_path,
        recording_lock: Default::default(),
    })
}

/// `O_DIRECT` for direct I/O, nothing for the page cache.
fn direct_flag(io_path: IoPath) -> libc::c_int {
    match io_path {
        IoPath::Direct => libc::O_DIRECT,
        IoPath::Buffered => 0,
    }
}

/// Makes sure `[0, len_bytes)` of the file is allocated, which also extends it when it
/// is shorter. Filesystems without fallocate get a plain (sparse) extension instead.
fn preallocate(
    path: &Path,
    file: &File,
    len_bytes: u64,
    current_len_bytes: u64,
) -> Result<(), DeviceError> {
    if len_bytes == 0 {
        return Ok(());
    }
    let error = |source| DeviceError::Preallocate {
        path: path.to_path_buf(),
        len_bytes,
        source,
    };
    match sys::fallocate(file, len_bytes) {
        Ok(()) => Ok(()),
        Err(e) if e.raw_os_error() == Some(libc::EOPNOTSUPP) => {
            if current_len_bytes < len_bytes {
                file.set_len(len_bytes).map_err(error)?;
            }
            Ok(())
        }
        Err(e) => Err(error(e)),
    }
}

/// Opens a block device for writing only when nothing uses it (mounted, swap, held, or
/// open exclusively: refused whatever the safety), and, with `Safety::Check`, when its
/// first blocks hold no signature.
/// Times an exclusive open that found the device busy is retried, 50 ms apart.
const EBUSY_RETRY_COUNT: u32 = 20;

fn open_block_device(
    path: &Path,
    options: &OpenOptions,
    dev: DevNum,
    io_path: IoPath,
) -> Result<Target, DeviceError> {
    let write = options.access == Access::Write;
    // In use is never overridden; a signature is, by --force.
    let check = write;
    let check_signature = write && options.safety == Safety::Check;
    if check {
        // Before the exclusive open, so that a mounted device is reported with its mount
        // point rather than as a bare EBUSY.
        safety::check_not_in_use(path, dev)?;
    }

    let mut flags = direct_flag(io_path) | libc::O_CLOEXEC;
    if check {
        // On a block device, O_EXCL without O_CREAT means "open exclusively": it fails
        // with EBUSY while a filesystem, swap, dm, md or another exclusive opener holds
        // it, and keeps them out while we hold it.
        flags |= libc::O_EXCL;
    }
    // An exclusive claim can outlive its holder by a moment (a ring torn down by a kernel
    // worker after its process exited): retry EBUSY briefly before calling it busy.
    let open = || {
        std::fs::OpenOptions::new()
            .read(true)
            .write(write)
            .custom_flags(flags)
            .open(path)
    };
    let mut attempt = open();
    for _ in 0..EBUSY_RETRY_COUNT {
        match &attempt {
            Err(error) if check && error.raw_os_error() == Some(libc::EBUSY) => {
                std::thread::sleep(std::time::Duration::from_millis(50));
                attempt = open();
            }
            _ => break,
        }
    }
    let file = attempt.map_err(|source| match source.raw_os_error() {
        Some(libc::EBUSY) if check => DeviceError::Busy {
            path: path.to_path_buf(),
        },
        Some(libc::ENOENT) => DeviceError::NotFound {
            path: path.to_path_buf(),
            can_create: false,
        },
        _ => DeviceError::Open {
            path: path.to_path_buf(),
            source,
        },
    })?;

    stat_opened(path, &file, "stat the open device", |kind| {
        kind.is_block_device()
    })?;

    if options.access == Access::Write {
        lock(path, &file, Lock::Writer)?;
    }
    let capacity_bytes = sys::block_device_size_bytes(&file)
        .map_err(|source| probe_error(path, "read the device size (ioctl BLKGETSIZE64)", source))?;
    if capacity_bytes == 0 {
        return Err(DeviceError::ZeroCapacity {
            path: path.to_path_buf(),
        });
    }
    let logical_block_bytes = sys::block_device_logical_block_bytes(&file).map_err(|source| {
        probe_error(
            path,
            "read the logical block size (ioctl BLKSSZGET)",
            source,
        )
    })?;

    if check_signature {
        safety::check_no_signature(path, &file, capacity_bytes, logical_block_bytes)?;
    }

    Ok(Target {
        path: path.to_path_buf(),
        kind: TargetKind::BlockDevice,
        capacity_bytes,
        logical_block_bytes,
        file,
        io_path,
        recording_lock: Default::default(),
    })
}

/// The advisory lock (flock(2)) on a target: every program of nvrec that writes a target
/// holds it shared for as long as the target is open, and a recording holds it exclusive,
/// so that nothing else writes a member of a running recording and a recording never
/// starts on a target something else is writing. Readers only look at it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Lock {
    /// Shared: any number of writers that are not recordings.
    Writer,
    /// Exclusive: a recording, alone on the target.
    Recording,
}

/// How long a lock held elsewhere is waited for before it counts as taken.
const LOCK_PATIENCE: std::time::Duration = std::time::Duration::from_secs(2);

/// Takes `kind` on `file`, waiting at most two seconds; a lock held elsewhere is a safety
/// refusal.
pub fn lock(path: &Path, file: &File, kind: Lock) -> Result<(), DeviceError> {
    let operation = match kind {
        Lock::Writer => libc::LOCK_SH,
        Lock::Recording => libc::LOCK_EX,
    };
    // A recorder killed a moment ago may still hold the lock while the kernel tears down
    // its io_uring (which keeps the file open until the I/O in flight completes): wait a
    // little before calling the target taken.
    let deadline = std::time::Instant::now() + LOCK_PATIENCE;
    let source = loop {
        // SAFETY: flock only reads the descriptor, which `file` keeps open.
        let status = unsafe { libc::flock(file.as_raw_fd(), operation | libc::LOCK_NB) };
        if status == 0 {
            return Ok(());
        }
        let error = io::Error::last_os_error();
        if error.raw_os_error() != Some(libc::EWOULDBLOCK) || std::time::Instant::now() >= deadline
        {
            break error;
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    };
    match (source.raw_os_error(), kind) {
        (Some(libc::EWOULDBLOCK), Lock::Writer) => Err(DeviceError::Recording {
            path: path.to_path_buf(),
        }),
        (Some(libc::EWOULDBLOCK), Lock::Recording) => Err(DeviceError::Busy {
            path: path.to_path_buf(),
        }),
        _ => Err(probe_error(path, "lock it (flock)", source)),
    }
}

/// Whether a recording holds `file`'s target right now (its exclusive lock is taken).
///
/// The probe takes a shared lock on a descriptor of its own, a new open file description
/// of the same file, and lets it go by closing it: flock(2) converts and releases the lock
/// of the open file description it is given, so a probe through `file` itself would give
/// up the lock this process holds through it (a recording's own, which then no longer kept
/// other programs off its members).
pub fn is_recording(file: &File) -> bool {
    let Ok(probe) = File::open(format!("/proc/self/fd/{}", file.as_raw_fd())) else {
        return false;
    };
    // SAFETY: as in `lock`; the lock goes with `probe`, closed at the end of this call.
    let status = unsafe { libc::flock(probe.as_raw_fd(), libc::LOCK_SH | libc::LOCK_NB) };
    status != 0 && io::Error::last_os_error().raw_os_error() == Some(libc::EWOULDBLOCK)
}

/// The metadata of a file just opened at `path`, checked to be still of the kind that was
/// looked at before the open (`is_kind`): the path may have been swapped for something else
/// between the stat and the open.
fn stat_opened(
    path: &Path,
    file: &File,
    what: &str,
    is_kind: fn(&std::fs::FileType) -> bool,
) -> Result<std::fs::Metadata, DeviceError> {
    let meta = file
        .metadata()
        .map_err(|source| probe_error(path, what, source))?;
    if !is_kind(&meta.file_type()) {
        return Err(DeviceError::NotFileOrBlockDevice {
            path: path.to_path_buf(),
            found: file_type_phrase(&meta.file_type()),
        });
    }
    Ok(meta)
}

fn probe_error(path: &Path, what: &str, source: io::Error) -> DeviceError {
    DeviceError::Probe {
        path: path.to_path_buf(),
        what: what.to_string(),
        source,
    }
}

/// Facts about a target for reports (TEST #00 of the self-test).
#[derive(Debug, Clone, Default, serde::Serialize)]
pub struct TargetInfo {
    /// "file", "loop", "nvme", "virtio", "block".
    pub transport: String,
    pub model: Option<String>,
    pub serial: Option<String>,
    pub firmware: Option<String>,
    /// For an NVMe drive: its own PCIe link.
    pub pcie_link: Option<PcieLink>,
    /// For an NVMe drive: the PCI functions from the drive (first) up to its root port
    /// (last), each with the link it reports (see [`TargetInfo::pcie_root_port`]). Only the
    /// drive where it sits on the host bridge itself, with no root port; empty for a target
    /// that is not on the PCI bus.
    pub pcie_path: Vec<pcie::PcieHop>,
    /// For a loop device: its backing file and whether it does direct I/O.
    pub loop_backing_file: Option<PathBuf>,
    pub loop_direct_io: Option<bool>,
    /// For a regular file: the block device that holds its filesystem, if known.
    pub backing_device: Option<String>,
}

impl TargetInfo {
    /// The root port above an NVMe drive, the far end of its PCIe path; `None` where the
    /// drive sits on the host bridge itself or is not on the PCI bus.
    pub fn pcie_root_port(&self) -> Option<&pcie::PcieHop> {
        (self.pcie_path.len() >= 2)
            .then(|| self.pcie_path.last())
            .flatten()
    }
}

#[derive(Debug, Clone, Default, PartialEq, serde::Serialize)]
pub struct PcieLink {
    pub current_speed: String,
    pub current_width: u32,
    pub max_speed: String,
    pub max_width: u32,
}

/// Gathers what sysfs knows about `target`. Never fails: facts that cannot be read are
/// `None`.
pub fn describe(target: &Target) -> TargetInfo {
    let sysfs = Sysfs::system();
    let meta = target.file.metadata().ok();
    match target.kind {
        TargetKind::BlockDevice => match meta {
            Some(meta) => sysfs.describe_block(DevNum::from_dev_t(meta.rdev())),
            None => TargetInfo {
                transport: "block".to_string(),
                ..TargetInfo::default()
            },
        },
        TargetKind::File => TargetInfo {
            transport: "file".to_string(),
            backing_device: meta.and_then(|meta| backing_device_name(&sysfs, meta.dev())),
            ..TargetInfo::default()
        },
    }
}

/// Name of the block device holding the filesystem whose `st_dev` is `st_dev`. Falls
/// back to the mount source for filesystems with anonymous device numbers (btrfs).
fn backing_device_name(sysfs: &Sysfs, st_dev: u64) -> Option<String> {
    let dev = DevNum::from_dev_t(st_dev);
    if let Some(name) = sysfs.block_name(dev) {
        return Some(name);
    }
    let mounts = procfs::read_mountinfo().ok()?;
    let source = mounts
        .iter()
        .find(|mount| mount.dev == dev && mount.source.starts_with("/dev"))?
        .source
        .clone();
    let resolved = source.canonicalize().unwrap_or(source);
    Some(resolved.file_name()?.to_string_lossy().into_owned())
}
