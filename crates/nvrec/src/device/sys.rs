//! Thin, checked wrappers around the system calls the device module needs and that `std`
//! does not offer: the block-device size ioctls, `statx` for direct-I/O alignment,
//! `fallocate`, a page-aligned heap buffer for O_DIRECT reads, and what dropping a range from
//! the page cache takes (`fdatasync`, `posix_fadvise`, `mincore`, `sync`).
//!
//! Every `unsafe` block of the device module outside its tests lives here.

use std::alloc::Layout;
use std::fs::File;
use std::io;
use std::os::fd::AsRawFd;
use std::ptr::NonNull;

/// `_IOR(0x12, 114, size_t)` from `<linux/fs.h>`: the size of a block device in bytes.
/// `libc` does not export it, so it is built here from the ioctl number encoding.
const BLKGETSIZE64: libc::Ioctl = ioctl_read_request(0x12, 114, std::mem::size_of::<usize>());

/// The `_IOR` encoding: direction "read" in the top bits, then the argument size, the type
/// and the number. A handful of architectures put the direction one bit lower and give the
/// size 13 bits instead of 14.
const fn ioctl_read_request(kind: u32, number: u32, arg_size_bytes: usize) -> libc::Ioctl {
    const DIR_SHIFT: u32 = if cfg!(any(
        target_arch = "mips",
        target_arch = "mips64",
        target_arch = "powerpc",
        target_arch = "powerpc64",
        target_arch = "sparc",
        target_arch = "sparc64"
    )) {
        29
    } else {
        30
    };
    const IOC_READ: u32 = 2;
    let request = (IOC_READ << DIR_SHIFT) | ((arg_size_bytes as u32) << 16) | (kind << 8) | number;
    // The request is a bit pattern; on libcs where `Ioctl` is a signed int the cast keeps
    // the bits, which is what the kernel reads.
    request as libc::Ioctl
}

/// Size of the block device behind `file`, in bytes (`BLKGETSIZE64`).
pub(crate) fn block_device_size_bytes(file: &File) -> io::Result<u64> {
    let mut size_bytes: u64 = 0;
    // SAFETY: `file` owns an open descriptor for the duration of the call, and
    // BLKGETSIZE64 writes exactly one u64 through the pointer, which points at a live,
    // writable, properly aligned u64 on our stack.
    let rc = unsafe { libc::ioctl(file.as_raw_fd(), BLKGETSIZE64, &mut size_bytes as *mut u64) };
    if rc < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(size_bytes)
}

/// Logical block size of the block device behind `file`, in bytes (`BLKSSZGET`): the
/// smallest unit O_DIRECT can address on it.
pub(crate) fn block_device_logical_block_bytes(file: &File) -> io::Result<u32> {
    let mut block_bytes: libc::c_int = 0;
    // SAFETY: `file` owns an open descriptor for the duration of the call, and BLKSSZGET
    // writes exactly one C int through the pointer, which points at a live, writable,
    // properly aligned c_int on our stack.
    let rc = unsafe {
        libc::ioctl(
            file.as_raw_fd(),
            libc::BLKSSZGET,
            &mut block_bytes as *mut libc::c_int,
        )
    };
    if rc < 0 {
        return Err(io::Error::last_os_error());
    }
    u32::try_from(block_bytes)
        .ok()
        .filter(|&bytes| bytes > 0)
        .ok_or_else(|| {
            io::Error::new(
                io::ErrorKind::InvalidData,
                format!("the kernel reported a logical block size of {block_bytes} bytes"),
            )
        })
}

/// Direct-I/O alignment of the open regular file, in bytes, as `statx(STATX_DIOALIGN)`
/// reports it (Linux 6.1 and later): the larger of the offset and the memory alignment.
/// `None` when the kernel or the filesystem does not report it.
pub(crate) fn dio_alignment_bytes(file: &File) -> Option<u32> {
    let mut stx = std::mem::MaybeUninit::<libc::statx>::zeroed();
    // SAFETY: the path is a NUL-terminated empty C string literal, which AT_EMPTY_PATH
    // turns into "the descriptor itself"; the descriptor is open for the duration of the
    // call; `stx` is a zeroed, writable buffer of the size the kernel expects for the
    // struct libc declares, and the kernel writes at most that much.
    let rc = unsafe {
        libc::statx(
            file.as_raw_fd(),
            c"".as_ptr(),
            libc::AT_EMPTY_PATH,
            libc::STATX_DIOALIGN,
            stx.as_mut_ptr(),
        )
    };
    if rc != 0 {
        return None;
    }
    // SAFETY: statx returned success, so the kernel filled the struct; it was zeroed
    // before, so every field is initialised either way.
    let stx = unsafe { stx.assume_init() };
    if stx.stx_mask & libc::STATX_DIOALIGN == 0 || stx.stx_dio_offset_align == 0 {
        return None;
    }
    Some(stx.stx_dio_offset_align.max(stx.stx_dio_mem_align))
}

/// Allocates `[0, len_bytes)` of `file` on disk with `fallocate(mode 0)`, which also
/// extends the file to `len_bytes` when it is shorter. Retries on EINTR.
pub(crate) fn fallocate(file: &File, len_bytes: u64) -> io::Result<()> {
    let len = libc::off_t::try_from(len_bytes).map_err(|_| {
        io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("{len_bytes} bytes is too large for this platform's file offsets"),
        )
    })?;
    loop {
        // SAFETY: plain system call on a descriptor `file` keeps open for the duration of
        // the call; no pointers are involved.
        let rc = unsafe { libc::fallocate(file.as_raw_fd(), 0, 0, len) };
        if rc == 0 {
            return Ok(());
        }
        let err = io::Error::last_os_error();
        if err.kind() != io::ErrorKind::Interrupted {
            return Err(err);
        }
    }
}

/// `fdatasync(2)` on `file`: its data written back and the device's cache flushed.
pub(crate) fn fdatasync(file: &File) -> io::Result<()> {
    // SAFETY: plain system call on a descriptor `file` keeps open for the call.
    if unsafe { libc::fdatasync(file.as_raw_fd()) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// `posix_fadvise(POSIX_FADV_DONTNEED)` over `[offset_bytes, offset_bytes + len_bytes)`:
/// the kernel drops the clean pages of the range from the page cache (dirty ones it only
/// starts writing back, which is why callers flush first).
pub(crate) fn fadvise_dont_need(file: &File, offset_bytes: u64, len_bytes: u64) -> io::Result<()> {
    let (offset, len) = offsets(offset_bytes, len_bytes)?;
    // SAFETY: plain system call on a descriptor `file` keeps open; no pointers.
    let rc =
        unsafe { libc::posix_fadvise(file.as_raw_fd(), offset, len, libc::POSIX_FADV_DONTNEED) };
    // posix_fadvise returns the error number instead of setting errno.
    if rc != 0 {
        return Err(io::Error::from_raw_os_error(rc));
    }
    Ok(())
}

/// How much of a mapping [`cached_bytes`] looks at once, so that its residency vector
/// stays small (256 KiB of it for 1 GiB of 4 KiB pages).
const RESIDENCY_WINDOW_BYTES: u64 = 1 << 30;

/// Bytes of `[offset_bytes, offset_bytes + len_bytes)` of `file` that are in the page cache
/// now, by `mincore(2)` over a read-only shared mapping of the range, a window at a time.
/// Whole pages: the range is widened to page boundaries. Nothing is read: mincore looks at
/// the page cache, it does not fault pages in.
pub(crate) fn cached_bytes(file: &File, offset_bytes: u64, len_bytes: u64) -> io::Result<u64> {
    // SAFETY: sysconf only reads a system setting.
    let page_bytes = match unsafe { libc::sysconf(libc::_SC_PAGESIZE) } {
        bytes if bytes > 0 => bytes as u64,
        _ => 4096,
    };
    let mut start = offset_bytes / page_bytes * page_bytes;
    let end = offset_bytes.saturating_add(len_bytes);
    let mut cached = 0u64;
    let mut residency: Vec<u8> = Vec::new();
    while start < end {
        let window = (end - start).min(RESIDENCY_WINDOW_BYTES);
        let (offset, _) = offsets(start, window)?;
        let pages = window.div_ceil(page_bytes) as usize;
        residency.clear();
        residency.resize(pages, 0);
        // SAFETY: a new read-only shared mapping of the file, placed by the kernel (no fixed
        // address), so it overlaps nothing of ours; it is unmapped below on every path and
        // never read through: only mincore looks at it.
        let map = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                window as usize,
                libc::PROT_READ,
                libc::MAP_SHARED,
                file.as_raw_fd(),
                offset,
            )
        };
        if map == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: `map` is the page-aligned start of a mapping `window` bytes long, and
        // `residency` holds one byte for each of its pages, as mincore writes.
        let rc = unsafe { libc::mincore(map, window as usize, residency.as_mut_ptr()) };
        let error = (rc != 0).then(io::Error::last_os_error);
        // SAFETY: the mapping made above, of that length, not used after this.
        unsafe { libc::munmap(map, window as usize) };
        if let Some(error) = error {
            return Err(error);
        }
        let resident_pages = residency.iter().filter(|page| **page & 1 != 0).count() as u64;
        cached += (resident_pages * page_bytes).min(window);
        start += window;
    }
    Ok(cached)
}

/// Whether this process runs as root (effective user 0), which writing
/// `/proc/sys/vm/drop_caches` needs.
pub(crate) fn is_root() -> bool {
    // SAFETY: geteuid cannot fail and takes nothing.
    unsafe { libc::geteuid() == 0 }
}

/// `sync(2)`: every dirty page of every file system written back.
pub(crate) fn sync_everything() {
    // SAFETY: sync takes nothing and cannot fail.
    unsafe { libc::sync() }
}

/// An offset and a length as `off_t`, or why they are not.
fn offsets(offset_bytes: u64, len_bytes: u64) -> io::Result<(libc::off_t, libc::off_t)> {
    let too_large = || {
        io::Error::new(
            io::ErrorKind::InvalidInput,
            format!(
                "{offset_bytes} + {len_bytes} bytes is too large for this platform's file offsets"
            ),
        )
    };
    Ok((
        libc::off_t::try_from(offset_bytes).map_err(|_| too_large())?,
        libc::off_t::try_from(len_bytes).map_err(|_| too_large())?,
    ))
}

/// A zero-filled heap buffer whose address is aligned as O_DIRECT needs.
pub(crate) struct AlignedBuf {
    ptr: NonNull<u8>,
    layout: Layout,
}

impl AlignedBuf {
    /// Allocates `len_bytes` (at least 1) zeroed bytes aligned to `align_bytes` (a power
    /// of two).
    pub(crate) fn zeroed(len_bytes: usize, align_bytes: usize) -> io::Result<Self> {
        let layout = Layout::from_size_align(len_bytes.max(1), align_bytes).map_err(|e| {
            io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("bad buffer layout ({len_bytes} bytes aligned to {align_bytes}): {e}"),
            )
        })?;
        // SAFETY: the layout has a non-zero size (at least 1 byte, see above).
        let raw = unsafe { std::alloc::alloc_zeroed(layout) };
        let ptr = NonNull::new(raw).ok_or_else(|| {
            io::Error::new(
                io::ErrorKind::OutOfMemory,
                format!("could not allocate a {len_bytes}-byte aligned buffer"),
            )
        })?;
        Ok(Self { ptr, layout })
    }

    pub(crate) fn as_slice(&self) -> &[u8] {
        // SAFETY: `ptr` points at `layout.size()` initialised (zeroed at allocation) bytes
        // that this value owns until drop; the shared borrow of `self` keeps them alive
        // and prevents mutation for the slice's lifetime.
        unsafe { std::slice::from_raw_parts(self.ptr.as_ptr(), self.layout.size()) }
    }

    pub(crate) fn as_mut_slice(&mut self) -> &mut [u8] {
        // SAFETY: as in `as_slice`; the exclusive borrow of `self` makes this the only
        // live reference to the bytes.
        unsafe { std::slice::from_raw_parts_mut(self.ptr.as_ptr(), self.layout.size()) }
    }
}

impl Drop for AlignedBuf {
    fn drop(&mut self) {
        // SAFETY: `ptr` came from `alloc_zeroed` with exactly this layout and is freed
        // only here, once.
        unsafe { std::alloc::dealloc(self.ptr.as_ptr(), self.layout) };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn device_blkgetsize64_request_matches_the_kernel_header_on_common_arches() {
        #[cfg(any(target_arch = "x86_64", target_arch = "aarch64"))]
        assert_eq!(BLKGETSIZE64 as u32, 0x8008_1272_u32);
    }

    #[test]
    fn device_aligned_buf_is_aligned_and_zeroed() {
        let mut buf = AlignedBuf::zeroed(8192, 4096).expect("allocation");
        assert_eq!(buf.as_slice().as_ptr() as usize % 4096, 0);
        assert_eq!(buf.as_slice().len(), 8192);
        assert!(buf.as_slice().iter().all(|&b| b == 0));
        buf.as_mut_slice()[8191] = 7;
        assert_eq!(buf.as_slice()[8191], 7);
        assert!(AlignedBuf::zeroed(10, 3).is_err());
    }
}
