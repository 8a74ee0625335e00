//! The aligned buffer pool: every byte the data path touches, allocated once at start.
//!
//! O_DIRECT needs buffer addresses aligned to the target's logical block size; io_uring's
//! fixed buffers want memory that stays put for the life of the ring. So the pool is one
//! allocation, aligned to a page (or more), cut into equal slots, and never resized. Slots are
//! handed out by index; the stream guarantees that a slot is touched by the CPU only while no
//! I/O on it is in flight. The pool does no bookkeeping of its own: which slot is free is the
//! stream's business.

use std::ptr::NonNull;

/// Alignment of every slot: a page, which satisfies every logical block size up to 4 KiB and
/// lets the kernel pin whole pages for fixed buffers.
pub const SLOT_ALIGN_BYTES: usize = 4096;
/// Largest pool nvrec agrees to allocate (a bound, not a target): 64 GiB.
pub const POOL_BYTES_MAX: u64 = 64 << 30;

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

/// A fixed set of aligned, equally sized slots.
pub struct BufferPool {
    base: NonNull<u8>,
    total_bytes: usize,
    slot_count: usize,
    slot_bytes: usize,
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
        // An anonymous mapping is page-aligned and zeroed, and MAP_POPULATE has the kernel
        // fault every page in at once, far cheaper than touching them one by one: no page
        // fault happens later on the data path.
        // SAFETY: a fresh private anonymous mapping; no existing memory is affected.
        let raw = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                total_bytes,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_POPULATE,
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
        Ok(BufferPool {
            base,
            total_bytes,
            slot_count,
            slot_bytes,
        })
    }

    pub fn slot_count(&self) -> usize {
        self.slot_count
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
        // SAFETY: base and total_bytes are exactly the mapping made in `new`, unmapped once.
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

    #[test]
    fn bad_shapes_are_refused() {
        assert!(BufferPool::new(0, 4096).is_err());
        assert!(BufferPool::new(1, 1000).is_err());
        assert!(BufferPool::new(1 << 20, 1 << 20).is_err());
    }
}
