//! What the faulty-disk tests share: a disk with a loop device over it, set up and torn down
//! in the right order, and aligned direct I/O on the loop device.

#![allow(dead_code)] // Each test binary uses a part.

use std::alloc::{self, Layout};
use std::fs::File;
use std::io;
use std::os::unix::fs::{FileExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use nvrec_faultydisk::{missing_requirement, Durability, FaultyDisk, LoopDevice, Missing, Options};

/// Alignment of direct I/O buffers: a page covers every logical block size.
pub const ALIGN_BYTES: usize = 4096;

/// A file under /dev/shm (or the temp dir), removed on drop.
pub struct TempFile(pub PathBuf);

impl TempFile {
    pub fn new(name: &str) -> TempFile {
        let dir = if Path::new("/dev/shm").is_dir() {
            PathBuf::from("/dev/shm")
        } else {
            std::env::temp_dir()
        };
        let path = dir.join(format!(
            "nvrec-faultydisk-{name}-{}.img",
            std::process::id()
        ));
        let _ = std::fs::remove_file(&path);
        TempFile(path)
    }
}

impl Drop for TempFile {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

/// A faulty disk with a loop device over it and the device open for direct I/O. Fields
/// drop in order: the open device, the loop device, the disk, the backing file.
pub struct Rig {
    pub device: File,
    pub loop_device: LoopDevice,
    pub disk: FaultyDisk,
    pub backing: TempFile,
    loop_sysfs: PathBuf,
    mount_dir: PathBuf,
}

/// Whether the calling test must skip, because this machine cannot run faulty disks and
/// loop devices; if so, reported through `nvrec_testkit::skip` (which fails the test under
/// `NVREC_NO_SKIP=1`). The test returns when this is true.
pub fn skipped() -> bool {
    let Some((missing, why)) = missing_requirement() else {
        return false;
    };
    let need = match missing {
        Missing::Root => nvrec_testkit::ROOT,
        Missing::Fuse => nvrec_testkit::FUSE,
        Missing::Losetup => nvrec_testkit::LOSETUP,
    };
    nvrec_testkit::skip(need, why);
    true
}

/// The rig for a test, or `None` (reported by [`skipped`]) where this machine cannot run it.
pub fn rig(name: &str, size_bytes: u64, durability: Durability) -> Option<Rig> {
    if skipped() {
        return None;
    }
    let backing = TempFile::new(name);
    let options = Options {
        durability,
        ..Options::default()
    };
    let disk = FaultyDisk::start(&backing.0, size_bytes, options).expect("starting the disk");
    let loop_device = disk.attach_loop().expect("attaching a loop device");
    eprintln!(
        "{name}: {} over {} (direct I/O: {})",
        loop_device.path().display(),
        disk.disk_path().display(),
        loop_device.direct_io()
    );
    let device = open_direct(loop_device.path());
    let loop_sysfs = Path::new("/sys/block")
        .join(loop_device.path().file_name().unwrap())
        .join("loop/backing_file");
    let mount_dir = disk.mount_dir().to_path_buf();
    Some(Rig {
        device,
        loop_device,
        disk,
        backing,
        loop_sysfs,
        mount_dir,
    })
}

impl Rig {
    /// Tears everything down and checks nothing is left: no loop device over the disk, no
    /// mount, no backing file.
    pub fn finish(self) {
        let (loop_sysfs, mount_dir, backing) = (
            self.loop_sysfs.clone(),
            self.mount_dir.clone(),
            self.backing.0.clone(),
        );
        drop(self);
        assert_clean(&loop_sysfs, &mount_dir);
        assert!(!backing.exists(), "{} left behind", backing.display());
    }
}

/// Checks that a loop device is detached and a mount point unmounted.
pub fn assert_clean(loop_sysfs: &Path, mount_dir: &Path) {
    let backing_file = std::fs::read_to_string(loop_sysfs).unwrap_or_default();
    assert!(
        !backing_file.contains(&*mount_dir.to_string_lossy()),
        "loop device still attached over {backing_file}"
    );
    assert!(
        !is_mounted(mount_dir),
        "{} still mounted",
        mount_dir.display()
    );
}

/// Whether a directory is a mount point, by /proc/self/mountinfo.
pub fn is_mounted(dir: &Path) -> bool {
    let mountinfo = std::fs::read_to_string("/proc/self/mountinfo").unwrap();
    let dir = dir.to_string_lossy();
    mountinfo
        .lines()
        .any(|line| line.split(' ').nth(4) == Some(&*dir))
}

pub fn open_direct(path: &Path) -> File {
    File::options()
        .read(true)
        .write(true)
        .custom_flags(libc::O_DIRECT)
        .open(path)
        .unwrap_or_else(|e| panic!("opening {} with O_DIRECT: {e}", path.display()))
}

/// A page-aligned buffer for direct I/O.
pub struct AlignedBuf {
    ptr: *mut u8,
    len: usize,
}

// SAFETY: the buffer is owned memory, like a Vec<u8>.
unsafe impl Send for AlignedBuf {}

impl AlignedBuf {
    pub fn filled(len: usize, byte: u8) -> AlignedBuf {
        assert!(len > 0 && len.is_multiple_of(ALIGN_BYTES));
        let layout = Layout::from_size_align(len, ALIGN_BYTES).unwrap();
        // SAFETY: the layout has a non-zero size.
        let ptr = unsafe { alloc::alloc(layout) };
        assert!(!ptr.is_null(), "out of memory");
        // SAFETY: ptr points to len writable bytes.
        unsafe { ptr.write_bytes(byte, len) };
        AlignedBuf { ptr, len }
    }

    pub fn from_slice(bytes: &[u8]) -> AlignedBuf {
        let mut buf = AlignedBuf::filled(bytes.len(), 0);
        buf.as_mut().copy_from_slice(bytes);
        buf
    }
}

impl AsRef<[u8]> for AlignedBuf {
    fn as_ref(&self) -> &[u8] {
        // SAFETY: ptr points to len initialized bytes owned by self.
        unsafe { std::slice::from_raw_parts(self.ptr, self.len) }
    }
}

impl AsMut<[u8]> for AlignedBuf {
    fn as_mut(&mut self) -> &mut [u8] {
        // SAFETY: as above, borrowed mutably through self.
        unsafe { std::slice::from_raw_parts_mut(self.ptr, self.len) }
    }
}

impl Drop for AlignedBuf {
    fn drop(&mut self) {
        let layout = Layout::from_size_align(self.len, ALIGN_BYTES).unwrap();
        // SAFETY: allocated in `filled` with this layout.
        unsafe { alloc::dealloc(self.ptr, layout) };
    }
}

/// Writes `len` bytes of `byte` at `offset` with one direct write.
pub fn write(device: &File, offset: u64, len: usize, byte: u8) -> io::Result<()> {
    write_bytes(device, offset, &AlignedBuf::filled(len, byte))
}

pub fn write_bytes(device: &File, offset: u64, buf: &AlignedBuf) -> io::Result<()> {
    device.write_all_at(buf.as_ref(), offset)
}

/// Reads `len` bytes at `offset` with one direct read.
pub fn read(device: &File, offset: u64, len: usize) -> io::Result<Vec<u8>> {
    let mut buf = AlignedBuf::filled(len, 0);
    device.read_exact_at(buf.as_mut(), offset)?;
    Ok(buf.as_ref().to_vec())
}

/// How long `f` takes.
pub fn timed<T>(f: impl FnOnce() -> T) -> (T, Duration) {
    let start = Instant::now();
    let value = f();
    (value, start.elapsed())
}

/// The errno of an I/O result, or 0 for success.
pub fn errno<T>(result: &io::Result<T>) -> i32 {
    match result {
        Ok(_) => 0,
        Err(err) => err.raw_os_error().unwrap_or(-1),
    }
}
