//! How bytes reach a target: io_uring, or a portable pool of worker threads.
//!
//! # The model
//! An [`Engine`] owns the [`BufferPool`] and one or more open targets (the members of a
//! striped recording share one engine and one pool; with io_uring each member gets a thread
//! and a ring of its own, [`PerMemberEngine`], so that one member's kernel work never holds
//! up another's; the caller still drives them all from one thread). The caller (the stream) fills a
//! slot, then [`Engine::push`]es a request naming the slot, the target offset and the length;
//! nothing reaches the kernel until [`Engine::submit_and_reap`], which submits everything
//! pushed in one batch and collects completions, waiting for at least `wait_min` of them.
//! A completion is final: the engine has already resubmitted the rest of a short transfer and
//! retried an interrupted one, so the caller sees either "all `len_bytes` moved" or an
//! [`IoError`] with a named cause. A zero-byte transfer is an error, never success.
//!
//! The caller must keep at most [`Engine::queue_depth`] requests in flight and must not touch a
//! slot between pushing it and seeing its completion: [`Engine::push`] is an `unsafe fn`
//! whose contract says so, so that every place that hands memory to the kernel says, in a
//! `SAFETY` comment, why nothing touches it until it comes back. Engines do not allocate per I/O: their
//! tables are sized by the queue depth at creation.
//!
//! Waiting may return early with no completion when a signal arrives, so that the caller can
//! look at its stop and abort flags; callers loop.

/// Writes [`Engine`] methods that engines answer alike from fields of the same names, so
/// that an engine's `impl Engine` holds only what is its own. A macro because trait methods
/// cannot be shared by a function. Each form writes one group:
/// - `pool, KIND`: `kind`, and `queue_depth`, `pool`, `pool_mut` from those fields;
/// - `files`: `in_flight`, `sync_data`, `write_back` and `discard`, for engines on open
///   files (`files`, `in_flight`);
/// - `stats`: `stats` from that field;
/// - `batched`: `in_flight` and `push`, for the simulated engines, which hold pushed
///   requests in `pushed` until `submit_and_reap` serves them into `pending`.
macro_rules! shared_engine_methods {
    (pool, $kind:expr) => {
        fn kind(&self) -> EngineKind {
            $kind
        }

        fn queue_depth(&self) -> u32 {
            self.queue_depth
        }

        fn pool(&self) -> &BufferPool {
            &self.pool
        }

        fn pool_mut(&mut self) -> &mut BufferPool {
            &mut self.pool
        }
    };
    (files) => {
        fn in_flight(&self) -> u32 {
            self.in_flight
        }

        fn sync_data(&mut self) -> Result<(), IoError> {
            debug_assert_eq!(self.in_flight, 0);
            super::sync_files(&self.files)
        }

        fn write_back(&mut self) -> Result<(), IoError> {
            debug_assert_eq!(self.in_flight, 0);
            super::write_back_files(&self.files)
        }

        fn discard(&mut self, file: u16, offset_bytes: u64, len_bytes: u64) -> Result<(), IoError> {
            super::discard_file(&self.files[file as usize], offset_bytes, len_bytes)
        }
    };
    (stats) => {
        fn stats(&self) -> EngineStats {
            self.stats
        }
    };
    (batched) => {
        fn in_flight(&self) -> u32 {
            (self.pushed.len() + self.pending.len()) as u32
        }

        unsafe fn push(&mut self, request: IoRequest) {
            check_push(self, &request);
            self.pushed.push(request);
        }
    };
}

mod per_member;
mod sim;
mod simdisks;
mod threads;
mod uring;

use crate::buffer::BufferPool;
use std::fs::File;

pub use per_member::PerMemberEngine;
pub use sim::{SimCounters, SimDrive, SimEngine, SimModel, SimSpecError, SIM_SPEC_KEYS};
pub use simdisks::{
    DiskFault, FaultStart, RangeFault, SilentStrike, SilentWrite, SimDisks, SimDisksCounters,
    SimDisksEngine, TEAR_BLOCK_BYTES,
};
pub use threads::ThreadsEngine;
pub use uring::UringEngine;

/// Requests one request may be resubmitted for (short transfers, EINTR, EAGAIN) before the
/// engine gives up on it.
pub const RESUBMIT_COUNT_MAX: u32 = 64;
/// Deepest queue an engine accepts.
pub const QUEUE_DEPTH_MAX: u32 = 4096;

/// The engines nvrec has.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum EngineKind {
    IoUring,
    Threads,
    /// The simulated drive (a test tool; see [`SimDrive`]).
    Sim,
}

impl EngineKind {
    pub fn name(self) -> &'static str {
        match self {
            EngineKind::IoUring => "io_uring",
            EngineKind::Threads => "threads",
            EngineKind::Sim => "sim",
        }
    }
}

/// Which engine the user asked for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EngineChoice {
    /// io_uring when the kernel allows it, else threads.
    Auto,
    Only(EngineKind),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum IoOp {
    Read,
    Write,
    Flush,
}

impl IoOp {
    pub fn name(self) -> &'static str {
        match self {
            IoOp::Read => "read",
            IoOp::Write => "write",
            IoOp::Flush => "flush",
        }
    }
}

/// One transfer between a pool slot and the target.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct IoRequest {
    pub op: IoOp,
    /// Which of the engine's files (index into the slice given to `open_engine`).
    pub file_index: u16,
    pub slot: u32,
    /// Where in the slot the transfer starts (a buffer may go out in two parts).
    pub slot_offset_bytes: u32,
    pub offset_bytes: u64,
    pub len_bytes: u32,
    /// Returned untouched in the completion.
    pub user_data: u64,
}

#[derive(Debug)]
pub struct IoCompletion {
    pub user_data: u64,
    pub result: Result<(), IoError>,
}

/// The named causes of a failed transfer (errno mapped to what it means for direct I/O).
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum IoErrorKind {
    /// EINVAL: offset, length or buffer not aligned to the logical block size.
    Alignment,
    /// ENOSPC: the target is full.
    TargetFull,
    /// EIO: the device reported a failure.
    DeviceFailed,
    /// The kernel moved zero bytes (end of file or device).
    ZeroTransfer,
    /// A short transfer kept coming back short.
    RetriesExhausted,
    /// EBADF, EPERM, EROFS: the target is not open for this.
    NotPermitted,
    /// Anything else.
    Os,
}

/// A transfer that did not complete, with everything needed to say where and why.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error, serde::Serialize)]
#[error("{} of {len_bytes} bytes at offset {offset_bytes:#x} failed: {} ({})", op.name(), kind_text(*kind), os_text(*errno))]
pub struct IoError {
    pub op: IoOp,
    pub offset_bytes: u64,
    pub len_bytes: u64,
    pub kind: IoErrorKind,
    /// The OS error number, 0 when there was none (zero transfer, retries exhausted).
    pub errno: i32,
}

fn kind_text(kind: IoErrorKind) -> &'static str {
    match kind {
        IoErrorKind::Alignment => "misaligned for direct I/O",
        IoErrorKind::TargetFull => "target full",
        IoErrorKind::DeviceFailed => "device I/O error",
        IoErrorKind::ZeroTransfer => "zero bytes transferred (end of target?)",
        IoErrorKind::RetriesExhausted => "transfer stayed short after retries",
        IoErrorKind::NotPermitted => "target not open for this",
        IoErrorKind::Os => "operating system error",
    }
}

fn os_text(errno: i32) -> String {
    if errno == 0 {
        "no OS error".to_string()
    } else {
        std::io::Error::from_raw_os_error(errno).to_string()
    }
}

impl IoError {
    pub fn from_errno(op: IoOp, offset_bytes: u64, len_bytes: u64, errno: i32) -> IoError {
        let kind = match errno {
            libc::EINVAL => IoErrorKind::Alignment,
            libc::ENOSPC => IoErrorKind::TargetFull,
            libc::EIO => IoErrorKind::DeviceFailed,
            libc::EBADF | libc::EPERM | libc::EROFS | libc::EACCES => IoErrorKind::NotPermitted,
            _ => IoErrorKind::Os,
        };
        IoError {
            op,
            offset_bytes,
            len_bytes,
            kind,
            errno,
        }
    }

    pub fn without_errno(
        op: IoOp,
        offset_bytes: u64,
        len_bytes: u64,
        kind: IoErrorKind,
    ) -> IoError {
        IoError {
            op,
            offset_bytes,
            len_bytes,
            kind,
            errno: 0,
        }
    }
}

/// Failures of the engine itself, as opposed to one transfer.
#[derive(Debug, thiserror::Error)]
pub enum EngineError {
    #[error("io_uring is unavailable: {0} (kernel.io_uring_disabled, seccomp, or an old kernel; use --engine threads)")]
    UringUnavailable(std::io::Error),
    #[error("io_uring setup failed while {what}: {source}")]
    UringSetup {
        what: &'static str,
        source: std::io::Error,
    },
    #[error("io_uring submission failed: {0}")]
    Submit(std::io::Error),
    #[error("could not start I/O worker threads: {0}")]
    Threads(std::io::Error),
    #[error("an I/O worker thread died")]
    WorkerLost,
    #[error("queue depth {0} is out of range 1..={QUEUE_DEPTH_MAX}")]
    QueueDepth(u32),
    #[error("an engine drives 1 to {FILE_COUNT_MAX} files, not {0}")]
    FileCount(usize),
    #[error("the sim engine drives only a simulated drive (a target written sim:...)")]
    SimNeedsSimTarget,
    #[error("could not duplicate a target descriptor: {0}")]
    Duplicate(std::io::Error),
}

/// Accounting of what the state of completions is, reported by each engine.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
pub struct EngineStats {
    /// Times the engine entered the kernel to submit or wait.
    pub syscall_count: u64,
    /// Transfers that came back short and were resubmitted.
    pub resubmit_count: u64,
}

/// Settings every engine understands.
#[derive(Debug, Clone, Copy)]
pub struct EngineConfig {
    pub queue_depth: u32,
    /// Ask for a kernel thread that polls the submission queue (io_uring only).
    pub sqpoll: bool,
    /// The caller may block elsewhere (reading a pipe) with I/O in flight. io_uring then
    /// lets the kernel run the ring's deferred work (completions, reissues) by interrupting
    /// that wait, instead of only when the caller next enters the ring: otherwise writes
    /// queued before a read that never returns would never reach the target.
    pub caller_may_block: bool,
}

/// See the module documentation for the model.
pub trait Engine {
    fn kind(&self) -> EngineKind;
    fn queue_depth(&self) -> u32;
    /// Requests pushed and not yet reaped.
    fn in_flight(&self) -> u32;
    fn pool(&self) -> &BufferPool;
    fn pool_mut(&mut self) -> &mut BufferPool;
    /// Queues a request; it reaches the kernel at the next `submit_and_reap`.
    ///
    /// # Safety
    /// From this call until `submit_and_reap` returns the request's completion, the bytes
    /// the request names (`slot`, from `slot_offset_bytes`, `len_bytes` long) belong to the
    /// kernel: the caller must not write them (a write in flight is reading them) nor read
    /// them (a read in flight is filling them) through [`Engine::pool`] or
    /// [`Engine::pool_mut`], nor name them in another request that reads into them while
    /// this one is in flight. The caller also keeps at most [`Engine::queue_depth`] requests
    /// in flight. Breaking this is a data race with the device: torn or stale data on the
    /// target or in the slot, silently.
    unsafe fn push(&mut self, request: IoRequest);
    /// Submits what was pushed, then puts completions in `completions` (cleared first),
    /// waiting for at least `wait_min` unless a signal interrupts the wait.
    fn submit_and_reap(
        &mut self,
        wait_min: u32,
        completions: &mut Vec<IoCompletion>,
    ) -> Result<(), EngineError> {
        completions.clear();
        self.reap(wait_min, completions)
    }
    /// [`Engine::submit_and_reap`] as each engine does it: `out` is empty on entry.
    fn reap(&mut self, wait_min: u32, out: &mut Vec<IoCompletion>) -> Result<(), EngineError>;
    /// Makes written data durable on every file (fdatasync). Call with nothing in flight.
    fn sync_data(&mut self) -> Result<(), IoError>;
    /// Waits until every byte written through the page cache (a target opened without
    /// O_DIRECT, `--buffered`) has been written to the targets and the devices have
    /// acknowledged it: the moment a direct write completes, without the flush of the
    /// devices' caches that `sync_data` adds. Nothing to wait for where writes never go
    /// through the page cache (direct I/O, the simulated drives). Call with nothing in flight.
    fn write_back(&mut self) -> Result<(), IoError> {
        Ok(())
    }
    fn stats(&self) -> EngineStats;
    /// Human words on how the engine is set up ("fixed buffers, single issuer").
    fn features(&self) -> String;
    /// The clock completions are timed by, in nanoseconds from an arbitrary origin: the
    /// monotonic clock, or the simulated drive's virtual clock. Measurements use this, never
    /// their own clock, so that they run unchanged on the simulated drive.
    fn now_ns(&self) -> u64 {
        monotonic_ns()
    }
    /// Bounds every wait of `submit_and_reap` by `limit`: a wait that reaches it returns
    /// with what completed so far (possibly nothing), as a signal would, so that a caller
    /// can notice a request that never completes. Engines that cannot bound a wait keep
    /// waiting as before (the threads engine already wakes every few milliseconds).
    fn bound_waits(&mut self, _limit: std::time::Duration) {}
    /// Tells the target that a range holds nothing worth keeping (TRIM): BLKDISCARD on a
    /// block device, a punched hole in a file. Synchronous; does not touch requests in flight.
    fn discard(
        &mut self,
        file_index: u16,
        offset_bytes: u64,
        len_bytes: u64,
    ) -> Result<(), IoError>;
}

/// The argument checks every engine makes in [`Engine::push`]: the transfer stays inside
/// its slot (the kernel would otherwise read or fill the next slot) and the caller keeps at
/// most the queue depth in flight (every engine's tables are sized by it). Plain asserts,
/// because a request that breaks either is memory the kernel must never be handed.
#[inline]
pub(crate) fn check_push<E: Engine + ?Sized>(engine: &E, request: &IoRequest) {
    assert!(
        request.slot_offset_bytes as usize + request.len_bytes as usize
            <= engine.pool().slot_bytes(),
        "the transfer lies inside its slot"
    );
    assert!(
        engine.in_flight() < engine.queue_depth(),
        "caller keeps at most queue_depth requests in flight"
    );
}

/// Locks a simulated drive's state. Every update under the lock is a few assignments and
/// copies: a panic elsewhere leaves the state consistent, so a poisoned lock is taken over.
pub(crate) fn lock_taken_over<T>(state: &std::sync::Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    state
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// CLOCK_MONOTONIC in nanoseconds.
pub fn monotonic_ns() -> u64 {
    let mut now = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime writes into the timespec we pass; CLOCK_MONOTONIC always exists.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut now) };
    now.tv_sec as u64 * 1_000_000_000 + now.tv_nsec as u64
}

/// BLKDISCARD on a block device, a punched hole (keeping the size) in a regular file.
pub fn discard_file(file: &File, offset_bytes: u64, len_bytes: u64) -> Result<(), IoError> {
    use std::os::fd::AsRawFd;
    use std::os::unix::fs::FileTypeExt;
    let fail = |errno: i32| IoError::from_errno(IoOp::Write, offset_bytes, len_bytes, errno);
    let is_block_device = file
        .metadata()
        .map_err(|error| fail(error.raw_os_error().unwrap_or(0)))?
        .file_type()
        .is_block_device();
    let fd = file.as_raw_fd();
    let result = if is_block_device {
        const BLKDISCARD: libc::Ioctl = 0x1277; // _IO(0x12, 119), linux/fs.h
        let range: [u64; 2] = [offset_bytes, len_bytes];
        // SAFETY: BLKDISCARD reads two u64s (start, length) from the pointer we pass.
        unsafe { libc::ioctl(fd, BLKDISCARD, range.as_ptr()) }
    } else {
        // SAFETY: fallocate takes plain integers; the descriptor is open.
        unsafe {
            libc::fallocate(
                fd,
                libc::FALLOC_FL_PUNCH_HOLE | libc::FALLOC_FL_KEEP_SIZE,
                offset_bytes as libc::off_t,
                len_bytes as libc::off_t,
            )
        }
    };
    if result != 0 {
        return Err(fail(
            std::io::Error::last_os_error().raw_os_error().unwrap_or(0),
        ));
    }
    Ok(())
}

/// What `open_engine` chose and why.
pub struct OpenedEngine {
    pub engine: Box<dyn Engine>,
    /// Set when `Auto` fell back from io_uring: the reason.
    pub fallback_reason: Option<std::sync::Arc<EngineError>>,
}

/// Most files one engine drives.
pub const FILE_COUNT_MAX: usize = 256;

/// Builds the engine the user asked for over `files` and `pool`.
pub fn open_engine(
    choice: EngineChoice,
    files: &[&File],
    pool: BufferPool,
    config: EngineConfig,
) -> Result<OpenedEngine, EngineError> {
    if config.queue_depth == 0 || config.queue_depth > QUEUE_DEPTH_MAX {
        return Err(EngineError::QueueDepth(config.queue_depth));
    }
    if files.is_empty() || files.len() > FILE_COUNT_MAX {
        return Err(EngineError::FileCount(files.len()));
    }
    match choice {
        EngineChoice::Only(EngineKind::IoUring) => {
            let engine = open_uring(files, pool, config).map_err(|(error, _)| error)?;
            Ok(OpenedEngine {
                engine,
                fallback_reason: None,
            })
        }
        EngineChoice::Only(EngineKind::Sim) => Err(EngineError::SimNeedsSimTarget),
        EngineChoice::Only(EngineKind::Threads) => Ok(OpenedEngine {
            engine: Box::new(ThreadsEngine::new(files, pool, config)?),
            fallback_reason: None,
        }),
        EngineChoice::Auto => match open_uring(files, pool, config) {
            Ok(engine) => Ok(OpenedEngine {
                engine,
                fallback_reason: None,
            }),
            Err((error, pool)) => {
                let engine = ThreadsEngine::new(files, pool, config)?;
                Ok(OpenedEngine {
                    engine: Box::new(engine),
                    fallback_reason: Some(std::sync::Arc::new(error)),
                })
            }
        },
    }
}

/// io_uring over `files`: one ring for one file, a thread and a ring per file for several.
/// On failure the pool is handed back so the caller can fall back.
fn open_uring(
    files: &[&File],
    pool: BufferPool,
    config: EngineConfig,
) -> Result<Box<dyn Engine>, (EngineError, BufferPool)> {
    if files.len() == 1 {
        Ok(Box::new(UringEngine::new(files, pool, config)?))
    } else {
        Ok(Box::new(PerMemberEngine::new(files, pool, config)?))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn errno_maps_to_named_causes() {
        let cases = [
            (libc::EINVAL, IoErrorKind::Alignment),
            (libc::ENOSPC, IoErrorKind::TargetFull),
            (libc::EIO, IoErrorKind::DeviceFailed),
            (libc::EROFS, IoErrorKind::NotPermitted),
            (libc::ENOMEM, IoErrorKind::Os),
        ];
        for (errno, kind) in cases {
            assert_eq!(IoError::from_errno(IoOp::Write, 0, 4096, errno).kind, kind);
        }
        let text = IoError::from_errno(IoOp::Write, 0x20000, 131072, libc::ENOSPC).to_string();
        assert!(
            text.contains("write of 131072 bytes at offset 0x20000"),
            "{text}"
        );
        assert!(text.contains("target full"), "{text}");
    }
}

/// fdatasync on every file; the first failure is reported.
pub(crate) fn sync_files(files: &[File]) -> Result<(), IoError> {
    use std::os::fd::AsRawFd;
    for file in files {
        // SAFETY: the descriptor belongs to `file`, open for the duration of the call.
        if unsafe { libc::fdatasync(file.as_raw_fd()) } != 0 {
            let errno = std::io::Error::last_os_error().raw_os_error().unwrap_or(0);
            return Err(IoError::from_errno(IoOp::Flush, 0, 0, errno));
        }
    }
    Ok(())
}

/// Writes back every dirty page of `files` and waits for it (`sync_file_range` with
/// WAIT_BEFORE, WRITE and WAIT_AFTER over the whole file): data on the device, no cache
/// flush. Files opened with O_DIRECT have nothing to write back.
pub(crate) fn write_back_files(files: &[File]) -> Result<(), IoError> {
    use std::os::fd::AsRawFd;
    let flags = libc::SYNC_FILE_RANGE_WAIT_BEFORE
        | libc::SYNC_FILE_RANGE_WRITE
        | libc::SYNC_FILE_RANGE_WAIT_AFTER;
    for file in files {
        // SAFETY: plain system call on a descriptor `file` keeps open; offset 0 and length 0
        // name the whole file.
        if unsafe { libc::sync_file_range(file.as_raw_fd(), 0, 0, flags) } != 0 {
            let errno = std::io::Error::last_os_error().raw_os_error().unwrap_or(0);
            return Err(IoError::from_errno(IoOp::Flush, 0, 0, errno));
        }
    }
    Ok(())
}

/// What to do after the kernel reported `result` (bytes moved, or -errno) for the part of a
/// request that starts `done_bytes` in. Shared by both engines so that short transfers are
/// handled one way, and tested once.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Step {
    Complete,
    /// Submit the rest again: from `done_bytes` to the end of the request.
    Resubmit {
        done_bytes: u32,
    },
    Fail(IoError),
}

pub(crate) fn step(request: &IoRequest, done_bytes: u32, result: i64, resubmit_count: u32) -> Step {
    let offset_bytes = request.offset_bytes + done_bytes as u64;
    let rest_bytes = (request.len_bytes - done_bytes) as u64;
    let retry_or_fail = |done_bytes: u32| {
        if resubmit_count < RESUBMIT_COUNT_MAX {
            Step::Resubmit { done_bytes }
        } else {
            Step::Fail(IoError::without_errno(
                request.op,
                offset_bytes,
                rest_bytes,
                IoErrorKind::RetriesExhausted,
            ))
        }
    };
    if result < 0 {
        let errno = (-result) as i32;
        return match errno {
            libc::EINTR | libc::EAGAIN => retry_or_fail(done_bytes),
            _ => Step::Fail(IoError::from_errno(
                request.op,
                offset_bytes,
                rest_bytes,
                errno,
            )),
        };
    }
    if result == 0 {
        return Step::Fail(IoError::without_errno(
            request.op,
            offset_bytes,
            rest_bytes,
            IoErrorKind::ZeroTransfer,
        ));
    }
    let moved_bytes = result as u64;
    if moved_bytes > rest_bytes {
        return Step::Fail(IoError::from_errno(
            request.op,
            offset_bytes,
            rest_bytes,
            libc::EOVERFLOW,
        ));
    }
    if moved_bytes == rest_bytes {
        Step::Complete
    } else {
        retry_or_fail(done_bytes + moved_bytes as u32)
    }
}

#[cfg(test)]
mod step_tests {
    use super::*;

    const REQUEST: IoRequest = IoRequest {
        op: IoOp::Write,
        file_index: 0,
        slot: 0,
        slot_offset_bytes: 0,
        offset_bytes: 0x10000,
        len_bytes: 8192,
        user_data: 0,
    };

    #[test]
    fn short_transfers_resubmit_the_rest() {
        assert_eq!(step(&REQUEST, 0, 8192, 0), Step::Complete);
        assert_eq!(
            step(&REQUEST, 0, 4096, 0),
            Step::Resubmit { done_bytes: 4096 }
        );
        assert_eq!(step(&REQUEST, 4096, 4096, 1), Step::Complete);
        assert_eq!(
            step(&REQUEST, 0, -(libc::EINTR as i64), 0),
            Step::Resubmit { done_bytes: 0 }
        );
        assert_eq!(
            step(&REQUEST, 512, -(libc::EAGAIN as i64), 3),
            Step::Resubmit { done_bytes: 512 }
        );
    }

    #[test]
    fn failures_name_the_rest_of_the_range() {
        let Step::Fail(error) = step(&REQUEST, 4096, -(libc::ENOSPC as i64), 1) else {
            panic!()
        };
        assert_eq!(
            (error.kind, error.offset_bytes, error.len_bytes),
            (IoErrorKind::TargetFull, 0x11000, 4096)
        );
        let Step::Fail(error) = step(&REQUEST, 0, 0, 0) else {
            panic!()
        };
        assert_eq!(error.kind, IoErrorKind::ZeroTransfer);
        let Step::Fail(error) = step(&REQUEST, 0, 100, RESUBMIT_COUNT_MAX) else {
            panic!()
        };
        assert_eq!(error.kind, IoErrorKind::RetriesExhausted);
        let Step::Fail(error) = step(&REQUEST, 0, 9000, 0) else {
            panic!()
        };
        assert_eq!(error.kind, IoErrorKind::Os);
    }
}
