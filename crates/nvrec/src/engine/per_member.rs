//! One thread and one io_uring per member: the engine of a set of several targets.
//!
//! A recording (or a read of a set) drives all its members from one thread, and that thread
//! must never wait on one member's kernel work: a drive that stalls, throttles or fails
//! costs only its own share. So each target gets a *member thread* that owns an io_uring of
//! its own (created on that thread, which is then its single issuer) over that one file.
//! The owner's thread keeps the buffer pool and the decisions; this engine carries requests
//! to the member threads and completions back.
//!
//! # Protocol
//! - [`Engine::push`] routes a request to its file's member thread (batched: the batch goes
//!   out at the next `submit_and_reap`, with one eventfd write that wakes the member thread
//!   if it is waiting on its ring).
//! - A member thread pushes what it is handed into its ring, waits for completions *or* its
//!   eventfd, and sends every completion back on one channel shared by all members.
//! - `submit_and_reap` waits on that channel (bounded by `bound_waits`), so a member whose
//!   writes never complete delays nothing: its requests simply stay in flight.
//!
//! # Buffers
//! The pool belongs to this engine; each member ring registers a view of it
//! ([`BufferPool::view`]). A slot is owned by exactly one side at a time, as with one ring:
//! from `push` until its completion comes back, only the member thread's kernel ring may
//! touch it. Views are dropped (member threads joined) before the pool. A member thread
//! that still has I/O in the kernel when the engine is dropped and does not finish within
//! [`DROP_PATIENCE`] is left behind with the pool leaked: memory the kernel may still
//! write into is never unmapped.

use super::uring::UringEngine;
use super::{
    check_push, Engine, EngineConfig, EngineError, EngineKind, EngineStats, IoCompletion, IoError,
    IoRequest,
};
use crate::buffer::BufferPool;
use std::fs::File;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError, Sender, TryRecvError};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// How long dropping the engine waits for a member thread whose I/O has not come back.
pub const DROP_PATIENCE: Duration = Duration::from_secs(10);

/// What a member thread sends back.
type Report = Result<IoCompletion, EngineError>;

/// A member thread's counters, read by the owner for `stats`.
#[derive(Default)]
struct Counters {
    syscall_count: AtomicU64,
    resubmit_count: AtomicU64,
}

struct Member {
    requests: Option<Sender<Vec<IoRequest>>>,
    /// Requests pushed since the last `submit_and_reap`, in order.
    batch: Vec<IoRequest>,
    wake: Arc<OwnedFd>,
    counters: Arc<Counters>,
    thread: Option<JoinHandle<()>>,
}

pub struct PerMemberEngine {
    /// Stopped and joined (in `Drop`) before the pool goes.
    members: Vec<Member>,
    done: Receiver<Report>,
    pool: Option<BufferPool>,
    files: Vec<File>,
    queue_depth: u32,
    in_flight: u32,
    wait_limit: Option<Duration>,
    features: String,
}

impl PerMemberEngine {
    /// Starts a member thread with its ring for each file. Fails (handing the pool back)
    /// when a ring cannot be made, so that the caller can fall back to threads.
    pub fn new(
        files: &[&File],
        pool: BufferPool,
        config: EngineConfig,
    ) -> Result<PerMemberEngine, (EngineError, BufferPool)> {
        let owned: Vec<File> = match files.iter().map(|file| file.try_clone()).collect() {
            Ok(files) => files,
            Err(source) => return Err((EngineError::Duplicate(source), pool)),
        };
        let (done_sender, done) = mpsc::channel();
        let mut engine = PerMemberEngine {
            members: Vec::with_capacity(files.len()),
            done,
            pool: Some(pool),
            files: owned,
            queue_depth: config.queue_depth,
            in_flight: 0,
            wait_limit: None,
            features: String::new(),
        };
        for index in 0..engine.files.len() {
            match engine.start_member(index, config, done_sender.clone()) {
                Ok(features) => engine.features = features,
                Err(error) => {
                    let pool = engine.stop_members().expect("no I/O was ever in flight");
                    return Err((error, pool));
                }
            }
        }
        Ok(engine)
    }

    /// Starts member `index`'s thread and waits for its ring; returns the ring's features.
    fn start_member(
        &mut self,
        index: usize,
        config: EngineConfig,
        done: Sender<Report>,
    ) -> Result<String, EngineError> {
        // SAFETY: eventfd takes plain integers.
        let fd = unsafe { libc::eventfd(0, libc::EFD_NONBLOCK | libc::EFD_CLOEXEC) };
        if fd < 0 {
            return Err(EngineError::Threads(std::io::Error::last_os_error()));
        }
        // SAFETY: `fd` was just created and is owned by nothing else.
        let wake = Arc::new(unsafe { OwnedFd::from_raw_fd(fd) });
        let file = self.files[index]
            .try_clone()
            .map_err(EngineError::Duplicate)?;
        let pool = self.pool.as_ref().expect("the pool is here until drop");
        // SAFETY: the view goes to the member thread, which is joined (or, if it never
        // finishes, the pool leaked) before the pool is dropped; slots reach it only through
        // requests and come back through completions (module documentation).
        let view = unsafe { pool.view() };
        let (requests, inbox) = mpsc::channel();
        let (ready_sender, ready) = mpsc::channel();
        let counters = Arc::new(Counters::default());
        let thread = std::thread::Builder::new()
            .name(format!("nvrec-member-{index}"))
            .spawn({
                let wake = Arc::clone(&wake);
                let counters = Arc::clone(&counters);
                // The member thread waits on nothing but its ring (woken through the
                // eventfd), so its ring needs no interrupting task work, whatever the owner
                // waits on.
                let config = EngineConfig {
                    caller_may_block: false,
                    ..config
                };
                move || {
                    let mut engine = match UringEngine::new(&[&file], view, config) {
                        Ok(engine) => engine,
                        Err((error, _view)) => {
                            let _ = ready_sender.send(Err(error));
                            return;
                        }
                    };
                    engine.wake_on(wake.as_raw_fd());
                    let _ = ready_sender.send(Ok(engine.features()));
                    serve(&mut engine, &inbox, &done, &counters);
                }
            })
            .map_err(EngineError::Threads)?;
        self.members.push(Member {
            requests: Some(requests),
            batch: Vec::with_capacity(self.queue_depth as usize),
            wake,
            counters,
            thread: Some(thread),
        });
        ready.recv().map_err(|_| EngineError::WorkerLost)?
    }

    /// Closes every member's inbox and joins its thread, each within [`DROP_PATIENCE`].
    /// Hands the pool back when every thread finished; otherwise leaks it (module docs).
    fn stop_members(&mut self) -> Option<BufferPool> {
        for member in &mut self.members {
            member.requests = None;
            wake(&member.wake);
        }
        let deadline = Instant::now() + DROP_PATIENCE;
        let mut all_joined = true;
        for member in &mut self.members {
            let Some(thread) = member.thread.take() else {
                continue;
            };
            while !thread.is_finished() && Instant::now() < deadline {
                std::thread::sleep(Duration::from_millis(1));
            }
            if thread.is_finished() {
                let _ = thread.join();
            } else {
                all_joined = false; // Detached: its ring may still write into the pool.
            }
        }
        let pool = self.pool.take()?;
        if all_joined {
            Some(pool)
        } else {
            std::mem::forget(pool);
            None
        }
    }

    /// Hands every member its batch and wakes it.
    fn send_batches(&mut self) -> Result<(), EngineError> {
        for member in &mut self.members {
            if member.batch.is_empty() {
                continue;
            }
            let capacity = member.batch.capacity();
            let batch = std::mem::replace(&mut member.batch, Vec::with_capacity(capacity));
            let sender = member.requests.as_ref().ok_or(EngineError::WorkerLost)?;
            sender.send(batch).map_err(|_| EngineError::WorkerLost)?;
            wake(&member.wake);
        }
        Ok(())
    }

    fn take(
        &mut self,
        report: Report,
        completions: &mut Vec<IoCompletion>,
    ) -> Result<(), EngineError> {
        let completion = report?;
        self.in_flight -= 1;
        completions.push(completion);
        Ok(())
    }
}

/// Writes the eventfd: a member thread waiting on its ring wakes and reads its inbox.
fn wake(fd: &OwnedFd) {
    let one = 1u64;
    // SAFETY: writes 8 bytes from `one` to an eventfd we own.
    unsafe { libc::write(fd.as_raw_fd(), (&one as *const u64).cast(), 8) };
}

/// A member thread's loop: take requests, wait for completions or new requests, send the
/// completions back. Ends when the inbox is closed and nothing is in flight, or when the
/// ring fails (the failure is sent back; dropping the engine waits out what is in flight).
fn serve(
    engine: &mut UringEngine,
    inbox: &Receiver<Vec<IoRequest>>,
    done: &Sender<Report>,
    counters: &Counters,
) {
    let mut completions = Vec::with_capacity(engine.queue_depth() as usize);
    let mut open = true;
    loop {
        while open {
            match inbox.try_recv() {
                Ok(batch) => push_all(engine, batch),
                Err(TryRecvError::Empty) => break,
                Err(TryRecvError::Disconnected) => open = false,
            }
        }
        if engine.in_flight() == 0 {
            if !open {
                return;
            }
            match inbox.recv() {
                Ok(batch) => push_all(engine, batch),
                Err(_) => return,
            }
        }
        let reaped = engine.submit_and_reap(1, &mut completions);
        let stats = engine.stats();
        counters
            .syscall_count
            .store(stats.syscall_count, Ordering::Relaxed);
        counters
            .resubmit_count
            .store(stats.resubmit_count, Ordering::Relaxed);
        for completion in completions.drain(..) {
            // The owner may be gone (dropping); the ring still has to be reaped.
            let _ = done.send(Ok(completion));
        }
        if let Err(error) = reaped {
            let _ = done.send(Err(error));
            return;
        }
    }
}

/// Hands requests the owner pushed to the member's ring.
fn push_all(engine: &mut UringEngine, batch: Vec<IoRequest>) {
    for request in batch {
        // SAFETY: the owner made this request's promise when it pushed it to
        // `PerMemberEngine`, and that promise lasts until the completion this ring returns
        // reaches the owner; at most the owner's queue depth, which this ring has, is in
        // flight.
        unsafe { engine.push(request) };
    }
}

impl Engine for PerMemberEngine {
    fn kind(&self) -> EngineKind {
        EngineKind::IoUring
    }

    fn queue_depth(&self) -> u32 {
        self.queue_depth
    }

    shared_engine_methods!(files);

    fn pool(&self) -> &BufferPool {
        self.pool.as_ref().expect("the pool is here until drop")
    }

    fn pool_mut(&mut self) -> &mut BufferPool {
        self.pool.as_mut().expect("the pool is here until drop")
    }

    /// # Safety
    /// As [`Engine::push`].
    unsafe fn push(&mut self, request: IoRequest) {
        check_push(self, &request);
        let member = &mut self.members[request.file_index as usize];
        // The member's ring drives one file: its index 0.
        member.batch.push(IoRequest {
            file_index: 0,
            ..request
        });
        self.in_flight += 1;
    }

    fn reap(&mut self, wait_min: u32, out: &mut Vec<IoCompletion>) -> Result<(), EngineError> {
        self.send_batches()?;
        loop {
            match self.done.try_recv() {
                Ok(report) => self.take(report, out)?,
                Err(TryRecvError::Empty) => break,
                Err(TryRecvError::Disconnected) => return Err(EngineError::WorkerLost),
            }
        }
        while (out.len() as u32) < wait_min && self.in_flight > 0 {
            let report = match self.wait_limit {
                Some(limit) => match self.done.recv_timeout(limit) {
                    Ok(report) => report,
                    Err(RecvTimeoutError::Timeout) => return Ok(()),
                    Err(RecvTimeoutError::Disconnected) => return Err(EngineError::WorkerLost),
                },
                None => self.done.recv().map_err(|_| EngineError::WorkerLost)?,
            };
            self.take(report, out)?;
        }
        Ok(())
    }

    fn bound_waits(&mut self, limit: Duration) {
        self.wait_limit = Some(limit);
    }

    fn stats(&self) -> EngineStats {
        let sum = |count: fn(&Counters) -> &AtomicU64| {
            self.members
                .iter()
                .map(|member| count(&member.counters).load(Ordering::Relaxed))
                .sum()
        };
        EngineStats {
            syscall_count: sum(|counters| &counters.syscall_count),
            resubmit_count: sum(|counters| &counters.resubmit_count),
        }
    }

    fn features(&self) -> String {
        format!("a thread and ring per member: {}", self.features)
    }
}

impl Drop for PerMemberEngine {
    fn drop(&mut self) {
        if let Some(pool) = self.stop_members() {
            drop(pool);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::IoOp;
    use std::io::Read;
    use std::os::unix::fs::FileExt;

    const SLOT: usize = 1 << 20;

    fn config() -> EngineConfig {
        EngineConfig {
            queue_depth: 8,
            sqpoll: false,
            caller_may_block: false,
        }
    }

    fn scratch(name: &str) -> (std::path::PathBuf, File) {
        let path =
            std::env::temp_dir().join(format!("nvrec-per-member-{}-{name}", std::process::id()));
        let file = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(true)
            .open(&path)
            .unwrap();
        file.set_len(4 * SLOT as u64).unwrap();
        (path, file)
    }

    fn write(file_index: u16, slot: u32, offset_bytes: u64) -> IoRequest {
        IoRequest {
            op: IoOp::Write,
            file_index,
            slot,
            slot_offset_bytes: 0,
            offset_bytes,
            len_bytes: SLOT as u32,
            user_data: slot as u64,
        }
    }

    /// None where io_uring is unavailable here (the test then has nothing to check).
    fn engine(files: &[&File], pool: BufferPool) -> Option<PerMemberEngine> {
        match PerMemberEngine::new(files, pool, config()) {
            Ok(engine) => Some(engine),
            Err((error, _)) => {
                nvrec_testkit::skip(nvrec_testkit::IO_URING, error);
                None
            }
        }
    }

    #[test]
    fn each_member_gets_what_was_pushed_for_it() {
        let (path_a, a) = scratch("a");
        let (path_b, b) = scratch("b");
        let (path_c, c) = scratch("c");
        let mut pool = BufferPool::new(6, SLOT).unwrap();
        for slot in 0..6 {
            pool.slot_mut(slot).fill(slot as u8 + 1);
        }
        let Some(mut engine) = engine(&[&a, &b, &c], pool) else {
            return;
        };
        for slot in 0..6u32 {
            let file_index = (slot % 3) as u16;
            // SAFETY: the slot is touched again only after the completion, with no read into it
            // in flight meanwhile.
            unsafe {
                engine.push(write(file_index, slot, (slot / 3) as u64 * SLOT as u64));
            }
        }
        let mut seen = Vec::new();
        let mut completions = Vec::new();
        while engine.in_flight() > 0 {
            engine.submit_and_reap(1, &mut completions).unwrap();
            for completion in completions.drain(..) {
                completion.result.unwrap();
                seen.push(completion.user_data);
            }
        }
        seen.sort();
        assert_eq!(seen, [0, 1, 2, 3, 4, 5]);
        assert!(engine
            .features()
            .starts_with("a thread and ring per member"));
        drop(engine);
        for (index, file) in [&a, &b, &c].into_iter().enumerate() {
            let mut data = vec![0u8; 2 * SLOT];
            file.read_exact_at(&mut data, 0).unwrap();
            assert!(data[..SLOT].iter().all(|&byte| byte == index as u8 + 1));
            assert!(data[SLOT..].iter().all(|&byte| byte == index as u8 + 4));
        }
        for path in [path_a, path_b, path_c] {
            std::fs::remove_file(path).unwrap();
        }
    }

    /// A member whose write cannot complete (a full pipe nobody reads) delays no other
    /// member's completions, and a bounded wait with only it in flight comes back empty.
    #[test]
    fn a_stalled_member_holds_up_no_other() {
        let mut fds = [0; 2];
        // SAFETY: pipe writes two descriptors into the array.
        assert_eq!(unsafe { libc::pipe(fds.as_mut_ptr()) }, 0);
        // SAFETY: both descriptors were just created and are owned by nothing else.
        let (mut reader, writer) =
            unsafe { (File::from_raw_fd(fds[0]), File::from_raw_fd(fds[1])) };
        let (path, file) = scratch("stall");
        let pool = BufferPool::new(4, SLOT).unwrap();
        let Some(mut engine) = engine(&[&writer, &file], pool) else {
            return;
        };
        engine.bound_waits(Duration::from_millis(20));
        // 1 MiB into a pipe that holds 64 KiB: it stays in flight until someone reads.
        // SAFETY: the slot is touched again only after the completion, with no read into it
        // in flight meanwhile.
        unsafe {
            engine.push(IoRequest {
                offset_bytes: 0,
                ..write(0, 0, 0)
            });
        }
        let mut completions = Vec::new();
        engine.submit_and_reap(1, &mut completions).unwrap();
        assert!(completions.is_empty(), "the pipe write cannot be done");
        for slot in 1..4u32 {
            // SAFETY: the slot is touched again only after the completion, with no read into it
            // in flight meanwhile.
            unsafe {
                engine.push(write(1, slot, (slot - 1) as u64 * SLOT as u64));
            }
        }
        let mut done = Vec::new();
        let started = Instant::now();
        while done.len() < 3 && started.elapsed() < Duration::from_secs(10) {
            engine.submit_and_reap(1, &mut completions).unwrap();
            done.extend(completions.drain(..).map(|completion| completion.user_data));
        }
        done.sort();
        assert_eq!(done, [1, 2, 3], "the file member's writes all completed");
        assert_eq!(engine.in_flight(), 1, "the pipe write is still in flight");
        // Unstall the member: its write completes and comes back.
        let drain = std::thread::spawn(move || {
            let mut sink = vec![0u8; SLOT];
            reader.read_exact(&mut sink).unwrap();
        });
        while engine.in_flight() > 0 {
            engine.submit_and_reap(1, &mut completions).unwrap();
            for completion in completions.drain(..) {
                assert_eq!(completion.user_data, 0);
                completion.result.unwrap();
            }
        }
        drain.join().unwrap();
        drop(engine);
        std::fs::remove_file(path).unwrap();
    }
}
