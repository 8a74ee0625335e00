//! The io_uring engine: fixed buffers, a fixed file, batched submission.
//!
//! Each request gets a tag (its index in a table sized by the queue depth) that travels in the
//! sqe's user_data; the table remembers the caller's user_data and how much of the transfer is
//! done, so a short cqe is resubmitted for the rest without the caller knowing. The ring is set
//! up single-issuer with deferred task running when the kernel supports it (fewer interrupts of
//! the submitting thread); SQPOLL is opt-in. If registering the buffers fails (RLIMIT_MEMLOCK
//! for an unprivileged user), plain Read/Write sqes with the same memory are used instead.

use super::{
    check_push, step, Engine, EngineConfig, EngineError, EngineKind, EngineStats, IoCompletion,
    IoError, IoOp, IoRequest, Step,
};
use crate::buffer::BufferPool;
use io_uring::{opcode, squeue, types, IoUring};
use std::fs::File;
use std::os::fd::AsRawFd;

#[derive(Debug, Clone, Copy)]
struct InFlight {
    request: IoRequest,
    done_bytes: u32,
    resubmit_count: u32,
}

pub struct UringEngine {
    ring: IoUring,
    pool: BufferPool,
    /// The engine's own handles on the targets, registered as fixed files 0.. and used for
    /// fdatasync; duplicates, so their life does not depend on the caller's.
    files: Vec<File>,
    fixed_buffers: bool,
    setup_flags: &'static str,
    table: Vec<Option<InFlight>>,
    free_tags: Vec<u32>,
    /// sqes built but not yet in the submission queue (only when it was full).
    pending: Vec<u32>,
    /// Reaped (user_data, result) pairs, sized for a full completion queue.
    cqe_batch: Vec<(u64, i32)>,
    queue_depth: u32,
    in_flight: u32,
    stats: EngineStats,
    /// The longest a wait may last (`bound_waits`), where the kernel takes a timeout.
    wait_limit: Option<types::Timespec>,
    /// An eventfd whose write ends a wait (`wake_on`), and whether its poll is in the ring.
    wake_fd: Option<i32>,
    wake_armed: bool,
}

/// The user_data of the wake-up poll: tags are below the queue depth, so never this.
const WAKE_TAG: u64 = u64::MAX;

impl UringEngine {
    /// Sets up the ring. On failure the pool is handed back so the caller can fall back.
    pub fn new(
        files: &[&File],
        pool: BufferPool,
        config: EngineConfig,
    ) -> Result<UringEngine, (EngineError, BufferPool)> {
        // One entry more than the queue depth: room for the wake-up poll (`wake_on`).
        let entries = (config.queue_depth + 1).next_power_of_two().max(8);
        let (ring, setup_flags) = match build_ring(entries, config.sqpoll, config.caller_may_block)
        {
            Ok(pair) => pair,
            Err(error) => return Err((EngineError::UringUnavailable(error), pool)),
        };
        let files: Vec<File> = match files.iter().map(|file| file.try_clone()).collect() {
            Ok(files) => files,
            Err(source) => return Err((EngineError::Duplicate(source), pool)),
        };
        let fds: Vec<i32> = files.iter().map(|file| file.as_raw_fd()).collect();
        if let Err(source) = ring.submitter().register_files(&fds) {
            return Err((
                EngineError::UringSetup {
                    what: "registering the target file",
                    source,
                },
                pool,
            ));
        }
        let iovecs: Vec<libc::iovec> = (0..pool.slot_count())
            .map(|index| libc::iovec {
                iov_base: pool.slot_ptr(index).cast(),
                iov_len: pool.slot_bytes(),
            })
            .collect();
        // SAFETY: the iovecs point into `pool`, which the engine owns and keeps alive (and
        // unmoved: the allocation is on the heap) until after the ring is dropped; see Drop.
        let fixed_buffers = unsafe { ring.submitter().register_buffers(&iovecs) }.is_ok();
        let queue_depth = config.queue_depth;
        Ok(UringEngine {
            ring,
            pool,
            files,
            fixed_buffers,
            setup_flags,
            table: vec![None; queue_depth as usize],
            free_tags: (0..queue_depth).rev().collect(),
            pending: Vec::with_capacity(queue_depth as usize),
            cqe_batch: Vec::with_capacity(entries as usize * 2),
            queue_depth,
            in_flight: 0,
            stats: EngineStats::default(),
            wait_limit: None,
            wake_fd: None,
            wake_armed: false,
        })
    }

    /// Makes every wait also end when `eventfd` is written (and clears it), so that a thread
    /// that drives this engine can be handed new requests while it waits for completions.
    /// The caller keeps the eventfd open for the engine's life.
    pub fn wake_on(&mut self, eventfd: i32) {
        self.wake_fd = Some(eventfd);
    }

    /// Puts the wake-up poll in the submission queue unless it is there already. There is
    /// always room: pending requests fill at most `queue_depth` of the `queue_depth + 1`
    /// entries.
    fn arm_wake(&mut self) {
        let Some(fd) = self.wake_fd else { return };
        if self.wake_armed {
            return;
        }
        let entry = opcode::PollAdd::new(types::Fd(fd), libc::POLLIN as u32)
            .build()
            .user_data(WAKE_TAG);
        // SAFETY: a poll reads no buffer of ours; the eventfd outlives the ring (`wake_on`).
        self.wake_armed = unsafe { self.ring.submission().push(&entry) }.is_ok();
    }

    /// The wake-up poll fired: clear the eventfd so that the next poll waits again.
    fn woken(&mut self) {
        self.wake_armed = false;
        if let Some(fd) = self.wake_fd {
            let mut count = 0u64;
            // SAFETY: reads 8 bytes into `count`; the eventfd is non-blocking, so a read of
            // one already cleared returns EAGAIN at once.
            unsafe { libc::read(fd, (&mut count as *mut u64).cast(), 8) };
        }
    }

    fn sqe_for(&self, tag: u32) -> squeue::Entry {
        let flight = self.table[tag as usize].expect("tag in use");
        let request = flight.request;
        // SAFETY: slot_offset_bytes + done_bytes < slot_offset_bytes + len_bytes <= slot_bytes
        // (checked in push), so the address stays inside the slot.
        let address = unsafe {
            self.pool
                .slot_ptr(request.slot as usize)
                .add(request.slot_offset_bytes as usize + flight.done_bytes as usize)
        };
        let len_bytes = request.len_bytes - flight.done_bytes;
        let offset_bytes = request.offset_bytes + flight.done_bytes as u64;
        let file = types::Fixed(request.file_index as u32);
        let entry = match (request.op, self.fixed_buffers) {
            (IoOp::Write, true) => {
                opcode::WriteFixed::new(file, address, len_bytes, request.slot as u16)
                    .offset(offset_bytes)
                    .build()
            }
            (IoOp::Read, true) => {
                opcode::ReadFixed::new(file, address, len_bytes, request.slot as u16)
                    .offset(offset_bytes)
                    .build()
            }
            (IoOp::Write, false) => opcode::Write::new(file, address, len_bytes)
                .offset(offset_bytes)
                .build(),
            (IoOp::Read, false) => opcode::Read::new(file, address, len_bytes)
                .offset(offset_bytes)
                .build(),
            (IoOp::Flush, _) => unreachable!("flush goes through sync_data"),
        };
        entry.user_data(tag as u64)
    }

    /// Moves pending tags into the submission queue while it has room.
    fn fill_submission_queue(&mut self) {
        let mut moved = 0;
        while moved < self.pending.len() {
            let entry = self.sqe_for(self.pending[moved]);
            // SAFETY: the sqe's buffer lives in the pool, which outlives the ring, and the slot
            // is reserved for this request until its completion is reaped.
            if unsafe { self.ring.submission().push(&entry) }.is_err() {
                break;
            }
            moved += 1;
        }
        self.pending.drain(..moved);
    }
}

fn build_ring(
    entries: u32,
    sqpoll: bool,
    caller_may_block: bool,
) -> std::io::Result<(IoUring, &'static str)> {
    if sqpoll {
        return IoUring::builder()
            .setup_sqpoll(1000)
            .build(entries)
            .map(|ring| (ring, "sqpoll"));
    }
    if caller_may_block {
        // Task work may interrupt the caller's other waits (they restart transparently).
        return IoUring::builder()
            .build(entries)
            .map(|ring| (ring, "interrupting taskrun"));
    }
    // Single issuer + deferred task running (Linux 6.1+): completions are processed only when
    // this thread asks for them, with no interrupting task work. Fall back on older kernels.
    match IoUring::builder()
        .setup_single_issuer()
        .setup_defer_taskrun()
        .build(entries)
    {
        Ok(ring) => Ok((ring, "single issuer, deferred taskrun")),
        Err(error) if error.raw_os_error() == Some(libc::EINVAL) => IoUring::builder()
            .setup_coop_taskrun()
            .build(entries)
            .map(|ring| (ring, "cooperative taskrun")),
        Err(error) => Err(error),
    }
}

impl Engine for UringEngine {
    shared_engine_methods!(pool, EngineKind::IoUring);
    shared_engine_methods!(files);
    shared_engine_methods!(stats);

    unsafe fn push(&mut self, request: IoRequest) {
        check_push(self, &request);
        debug_assert!(request.op != IoOp::Flush);
        debug_assert!((request.file_index as usize) < self.files.len());
        let tag = self
            .free_tags
            .pop()
            .expect("caller keeps at most queue_depth requests in flight");
        self.table[tag as usize] = Some(InFlight {
            request,
            done_bytes: 0,
            resubmit_count: 0,
        });
        self.pending.push(tag);
        self.in_flight += 1;
    }

    fn reap(&mut self, wait_min: u32, out: &mut Vec<IoCompletion>) -> Result<(), EngineError> {
        loop {
            self.fill_submission_queue();
            let must_wait = (out.len() as u32) < wait_min && self.in_flight > 0;
            if must_wait {
                self.arm_wake();
            }
            self.stats.syscall_count += 1;
            let entered = match (&self.wait_limit, must_wait) {
                (Some(limit), true) => self
                    .ring
                    .submitter()
                    .submit_with_args(1, &types::SubmitArgs::new().timespec(limit)),
                _ => self.ring.submit_and_wait(usize::from(must_wait)),
            };
            match entered {
                Ok(_) => {}
                // A signal, or the wait limit: let the caller look at its flags and clocks.
                Err(error)
                    if matches!(error.raw_os_error(), Some(libc::EINTR) | Some(libc::ETIME)) =>
                {
                    return Ok(())
                }
                // The completion queue is full: reap below, then submit again.
                Err(error) if error.raw_os_error() == Some(libc::EBUSY) => {}
                Err(error) => return Err(EngineError::Submit(error)),
            }
            // The completion queue has at most twice the ring's entries, and cqe_batch was
            // allocated with that capacity: this never allocates.
            self.cqe_batch.clear();
            self.cqe_batch.extend(
                self.ring
                    .completion()
                    .map(|cqe| (cqe.user_data(), cqe.result())),
            );
            let mut woken = false;
            for index in 0..self.cqe_batch.len() {
                let (tag, result) = self.cqe_batch[index];
                if tag == WAKE_TAG {
                    self.woken();
                    woken = true;
                    continue;
                }
                self.handle_cqe(tag as u32, result, out);
            }
            if out.len() as u32 >= wait_min || self.in_flight == 0 || woken {
                if !self.pending.is_empty() {
                    // Resubmissions of short transfers go out now, without waiting.
                    self.fill_submission_queue();
                    self.stats.syscall_count += 1;
                    self.ring.submit().map_err(EngineError::Submit)?;
                }
                return Ok(());
            }
        }
    }

    fn bound_waits(&mut self, limit: std::time::Duration) {
        // A timed wait needs the extended enter arguments (Linux 5.11); without them the
        // wait stays unbounded.
        if self.ring.params().is_feature_ext_arg() {
            self.wait_limit = Some(
                types::Timespec::new()
                    .sec(limit.as_secs())
                    .nsec(limit.subsec_nanos()),
            );
        }
    }

    fn features(&self) -> String {
        let buffers = if self.fixed_buffers {
            "fixed buffers"
        } else {
            "plain buffers (register failed)"
        };
        format!("{buffers}, fixed file, {}", self.setup_flags)
    }
}

impl UringEngine {
    fn handle_cqe(&mut self, tag: u32, result: i32, completions: &mut Vec<IoCompletion>) {
        let mut flight = self.table[tag as usize].expect("completion for a tag in use");
        match step(
            &flight.request,
            flight.done_bytes,
            result as i64,
            flight.resubmit_count,
        ) {
            Step::Complete => self.finish(tag, Ok(()), completions),
            Step::Resubmit { done_bytes } => {
                flight.done_bytes = done_bytes;
                flight.resubmit_count += 1;
                self.stats.resubmit_count += 1;
                self.table[tag as usize] = Some(flight);
                self.pending.push(tag);
            }
            Step::Fail(error) => self.finish(tag, Err(error), completions),
        }
    }

    fn finish(
        &mut self,
        tag: u32,
        result: Result<(), IoError>,
        completions: &mut Vec<IoCompletion>,
    ) {
        let flight = self.table[tag as usize].take().expect("tag in use");
        self.free_tags.push(tag);
        self.in_flight -= 1;
        completions.push(IoCompletion {
            user_data: flight.request.user_data,
            result,
        });
    }
}

impl Drop for UringEngine {
    fn drop(&mut self) {
        // Nothing may still be writing into the pool when it is freed: wait out what is left.
        let mut completions = Vec::with_capacity(self.queue_depth as usize);
        let mut rounds = 0;
        while self.in_flight > 0 && rounds < 1_000_000 {
            if self.submit_and_reap(1, &mut completions).is_err() {
                break;
            }
            rounds += 1;
        }
        // Drop the registrations now: a ring's teardown is deferred to a kernel worker, and a
        // block device opened exclusively would otherwise stay claimed for a while after
        // we are gone. Fields then drop in declaration order: the ring before the pool.
        let _ = self.ring.submitter().unregister_files();
        let _ = self.ring.submitter().unregister_buffers();
    }
}
