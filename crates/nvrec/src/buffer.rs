//! The aligned buffer pool: every byte the data path touches, allocated once at start.
//!
//! O_DIRECT needs buffer addresses aligned to the target's logical block size; io_uring's
//! fixed buffers want memory that stays put for the life of the ring. So the pool is one
//! allocation, aligned to a page (or more), cut into equal slots, and never resized. Slots are
//! handed out by index; a slot is touched by the CPU only while no I/O on it is in flight,
//! which every caller of the unsafe `Engine::push` promises for the slot it names. The pool does no bookkeeping of its own: which slot is free is the
//! stream's business.

use std::ptr::NonNull;

/// Alignment of every slot: a page, which satisfies every logical block size up to 4 KiB and
/// lets the kernel pin whole pages for fixed buffers.
pub const SLOT_ALIGN_BYTES: usize = 4096;
/// Largest pool nvrec agrees to allocate (a bound, not a target): 64 GiB.
pub const POOL_BYTES_MAX: u64 = 64 << 30;
/// Pools at least this large are faulted in by several threads at once.
const POPULATE_PARALLEL_MIN_BYTES: usize = 256 << 20;
/// Each populating thread gets at least this much of the pool.
const POPULATE_THREAD_MIN_BYTES: usize = 128 << 20;
/// Threads that fault a pool in, at most.
const POPULATE_THREAD_COUNT_MAX: usize = 8;

#[derive(Debug, thiserror::Error)]
pub enum BufferError {
    #[error("buffer pool of {slot_count} slots of {slot_bytes} bytes is invalid: {why}")]
    Invalid {
        slot_count: usize,
        slot_bytes: usize,
        why: &'static str,
    },
    #[error("could not allocate a buffer pool of {bytes} bytes")]
    OutOfMemory { bytes: u64 },
}

/// How many threads fault a pool of `total_bytes` in: one below
/// [`POPULATE_PARALLEL_MIN_BYTES`], else one per [`POPULATE_THREAD_MIN_BYTES`], at most one per
/// core and [`POPULATE_THREAD_COUNT_MAX`].
fn populate_thread_count(total_bytes: usize) -> usize {
    if total_bytes < POPULATE_PARALLEL_MIN_BYTES {
        return 1;
    }
    let cores = std::thread::available_parallelism().map_or(1, |count| count.get());
    // At least one core is counted, so the upper bound is never below the lower.
    (total_bytes / POPULATE_THREAD_MIN_BYTES).clamp(1, cores.min(POPULATE_THREAD_COUNT_MAX))
}

/// Faults every page of the mapping at `base` in, `threads` page-aligned parts at once, each
/// with MADV_POPULATE_WRITE (Linux 5.14), or by writing a zero into each of its pages where
/// the kernel lacks it. Returns false when the memory cannot be had.
fn populate_in_parallel(base: NonNull<u8>, total_bytes: usize, threads: usize) -> bool {
    let page_bytes = SLOT_ALIGN_BYTES;
    let part_bytes = total_bytes.div_ceil(threads).div_ceil(page_bytes) * page_bytes;
    // Raw pointers are not Send; each thread gets its part's address as a number.
    let base_address = base.as_ptr() as usize;
    std::thread::scope(|scope| {
        let parts: Vec<_> = (0..threads)
            .map(|part| part * part_bytes)
            .filter(|&start| start < total_bytes)
            .map(|start| {
                let len = part_bytes.min(total_bytes - start);
                scope.spawn(move || {
                    let at = (base_address + start) as *mut u8;
                    // SAFETY: [at, at + len) lies within the mapping, which outlives the scope;
                    // the advice only faults pages in (zeroed) and moves no data.
                    let advised =
                        unsafe { libc::madvise(at.cast(), len, libc::MADV_POPULATE_WRITE) };
                    if advised == 0 {
                        return true;
                    }
                    if std::io::Error::last_os_error().raw_os_error() != Some(libc::EINVAL) {
                        return false; // ENOMEM, EFAULT: the memory cannot be had.
                    }
                    for page in (0..len).step_by(page_bytes) {
                        // SAFETY: within this thread's part of the mapping, which no other
                        // thread touches; writing the zero a fresh page holds changes nothing.
                        unsafe { at.add(page).write_volatile(0) };
                    }
                    true
                })
            })
            .collect();
        parts.into_iter().all(|part| part.join().unwrap_or(false))
    })
}

/// A fixed set of aligned, equally sized slots.
pub struct BufferPool {
    base: NonNull<u8>,
    total_bytes: usize,
    slot_count: usize,
    slot_bytes: usize,
    /// False for a view made by [`BufferPool::view`]: dropping it unmaps nothing.
    owned: bool,
}

// SAFETY: the pool owns its allocation exclusively; access to slots is coordinated by the
// owner (the stream hands a slot to at most one I/O at a time).
unsafe impl Send for BufferPool {}

impl std::fmt::Debug for BufferPool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BufferPool")
            .field("slot_count", &self.slot_count)
            .field("slot_bytes", &self.slot_bytes)
            .finish()
    }
}

impl BufferPool {
    /// Allocates `slot_count` slots of `slot_bytes` each, zeroed and touched so that no page
    /// fault happens later on the data path.
    pub fn new(slot_count: usize, slot_bytes: usize) -> Result<BufferPool, BufferError> {
        let invalid = |why| BufferError::Invalid {
            slot_count,
            slot_bytes,
            why,
        };
        if slot_count == 0 {
            return Err(invalid("no slots"));
        }
        if slot_bytes == 0 || !slot_bytes.is_multiple_of(SLOT_ALIGN_BYTES) {
            return Err(invalid("slot size must be a non-zero multiple of 4096"));
        }
        let total_bytes = slot_count
            .checked_mul(slot_bytes)
            .ok_or_else(|| invalid("size overflows"))?;
        if total_bytes as u64 > POOL_BYTES_MAX {
            return Err(invalid("larger than the 64 GiB bound"));
        }
        let threads = populate_thread_count(total_bytes);
        // An anonymous mapping is page-aligned and zeroed, and MAP_POPULATE has the kernel
        // fault every page in at once, far cheaper than touching them one by one: no page
        // fault happens later on the data path. A large pool is faulted in by several
        // threads instead (below): one thread takes seconds per GiB where memory is slow to
        // come by (a virtual machine whose host backs memory on first touch).
        let populate = if threads > 1 { 0 } else { libc::MAP_POPULATE };
        // SAFETY: a fresh private anonymous mapping; no existing memory is affected.
        let raw = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                total_bytes,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | populate,
                -1,
                0,
            )
        };
        if raw == libc::MAP_FAILED {
            return Err(BufferError::OutOfMemory {
                bytes: total_bytes as u64,
            });
        }
        let base = NonNull::new(raw.cast::<u8>()).ok_or(BufferError::OutOfMemory {
            bytes: total_bytes as u64,
        })?;
        let pool = BufferPool {
            base,
            total_bytes,
            slot_count,
            slot_bytes,
            owned: true,
        };
        if threads > 1 && !populate_in_parallel(base, total_bytes, threads) {
            // Dropping the pool unmaps what was faulted in.
            return Err(BufferError::OutOfMemory {
                bytes: total_bytes as u64,
            });
        }
        Ok(pool)
    }

    pub fn slot_count(&self) -> usize {
        self.slot_count
    }

    /// A second handle on the same memory, for an engine that runs on another thread (one
    /// per member: see `engine::per_member`). Dropping it unmaps nothing.
    ///
    /// # Safety
    /// The caller must drop the view before `self`, and must hand each slot to one side at
    /// a time: a slot the view's engine has in flight is not touched through `self`, and the
    /// view touches only slots whose requests it was given, until their completions are
    /// handed back. The view is then no more than another path to memory its owner lent.
    pub unsafe fn view(&self) -> BufferPool {
        BufferPool {
            base: self.base,
            total_bytes: self.total_bytes,
            slot_count: self.slot_count,
            slot_bytes: self.slot_bytes,
            owned: false,
        }
    }

    pub fn slot_bytes(&self) -> usize {
        self.slot_bytes
    }

    pub fn total_bytes(&self) -> usize {
        self.slot_count * self.slot_bytes
    }

    /// Start address of slot `index`, for handing to the kernel.
    pub fn slot_ptr(&self, index: usize) -> *mut u8 {
        assert!(
            index < self.slot_count,
            "slot {index} out of {}",
            self.slot_count
        );
        // SAFETY: index < slot_count, so the offset stays inside the allocation.
        unsafe { self.base.as_ptr().add(index * self.slot_bytes) }
    }

    pub fn slot(&self, index: usize) -> &[u8] {
        // SAFETY: slot_ptr is valid for slot_bytes; the stream does not read a slot that has
        // an I/O in flight, and &self prevents a concurrent &mut from this side.
        unsafe { std::slice::from_raw_parts(self.slot_ptr(index), self.slot_bytes) }
    }

    pub fn slot_mut(&mut self, index: usize) -> &mut [u8] {
        // SAFETY: as for `slot`, and &mut self makes this the only CPU-side view.
        unsafe { std::slice::from_raw_parts_mut(self.slot_ptr(index), self.slot_bytes) }
    }
}

impl Drop for BufferPool {
    fn drop(&mut self) {
        if !self.owned {
            return;
        }
        // SAFETY: base and total_bytes are exactly the mapping made in `new`, unmapped once
        // (views do not unmap).
        unsafe { libc::munmap(self.base.as_ptr().cast(), self.total_bytes) };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slots_are_aligned_and_disjoint() {
        let mut pool = BufferPool::new(4, 8192).unwrap();
        for index in 0..4 {
            assert_eq!(pool.slot_ptr(index) as usize % SLOT_ALIGN_BYTES, 0);
            pool.slot_mut(index).fill(index as u8 + 1);
        }
        for index in 0..4 {
            assert!(pool.slot(index).iter().all(|&b| b == index as u8 + 1));
        }
        assert_eq!(pool.total_bytes(), 32768);
    }

    /// Minor page faults of this thread so far.
    fn minor_faults() -> i64 {
        // SAFETY: an all-zero rusage is valid; getrusage fills it.
        let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
        // SAFETY: `usage` is a valid rusage for the call to write.
        assert_eq!(
            unsafe { libc::getrusage(libc::RUSAGE_THREAD, &mut usage) },
            0
        );
        usage.ru_minflt
    }

    #[test]
    fn every_page_is_faulted_in_before_use_small_and_large() {
        if crate::under_qemu_user(
            "every_page_is_faulted_in_before_use_small_and_large",
            "qemu-user accepts MADV_POPULATE_WRITE without faulting pages in, and reports the \
             host's page faults",
        ) {
            return;
        }
        let page_count = |pool: &BufferPool| (pool.total_bytes() / SLOT_ALIGN_BYTES) as i64;
        // One thread (MAP_POPULATE) below the threshold, several above it where there are
        // cores for them.
        for (slot_count, slot_bytes) in [(16, 1 << 20), (288, 1 << 20)] {
            let mut pool = BufferPool::new(slot_count, slot_bytes).unwrap();
            assert!(pool.slot(slot_count - 1).iter().all(|&byte| byte == 0));
            let before = minor_faults();
            for index in 0..slot_count {
                for page in pool.slot_mut(index).chunks_mut(SLOT_ALIGN_BYTES) {
                    page[0] = 1;
                }
            }
            let faults = minor_faults() - before;
            // Touching every page of an unpopulated pool would fault once per page.
            assert!(
                faults < page_count(&pool) / 100,
                "{faults} faults writing {} pages of a {slot_count}-slot pool",
                page_count(&pool)
            );
        }
        assert_eq!(populate_thread_count(16 << 20), 1);
        assert_eq!(populate_thread_count(POPULATE_PARALLEL_MIN_BYTES - 1), 1);
        let cores = std::thread::available_parallelism().map_or(1, |count| count.get());
        assert_eq!(
            populate_thread_count(8 << 30),
            cores.min(POPULATE_THREAD_COUNT_MAX)
        );
    }

    #[test]
    fn bad_shapes_are_refused() {
        assert!(BufferPool::new(0, 4096).is_err());
        assert!(BufferPool::new(1, 1000).is_err());
        assert!(BufferPool::new(1 << 20, 1 << 20).is_err());
    }
}
