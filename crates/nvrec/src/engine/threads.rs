//! The portable engine: worker threads doing pread and pwrite.
//!
//! Used when io_uring is unavailable (kernel.io_uring_disabled, a container's seccomp filter,
//! an old kernel) or asked for with `--engine threads`. One worker per queue slot, up to
//! [`THREAD_COUNT_MAX`], take requests from a bounded channel and send completions back on
//! another; both channels are sized by the queue depth, so nothing blocks or allocates per I/O.
//! Short transfers are continued inside the worker with the same rules as io_uring's.

use super::{
    check_push, step, Engine, EngineConfig, EngineError, EngineKind, EngineStats, IoCompletion,
    IoError, IoOp, IoRequest, Step,
};
use crate::buffer::BufferPool;
use std::fs::File;
use std::os::fd::AsRawFd;
use std::sync::mpsc::{self, Receiver, RecvTimeoutError, SyncSender};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

/// Most worker threads one engine starts.
pub const THREAD_COUNT_MAX: u32 = 64;
/// Longest a wait blocks before giving the caller a chance to look at its stop flags.
const WAIT_SLICE: Duration = Duration::from_millis(50);

struct Job {
    request: IoRequest,
    /// Start of the request's slot; stays valid because the pool outlives the workers.
    address: usize,
}

struct Done {
    user_data: u64,
    result: Result<(), IoError>,
    resubmit_count: u32,
}

pub struct ThreadsEngine {
    pool: BufferPool,
    files: Arc<Vec<File>>,
    jobs: Option<SyncSender<Job>>,
    done: Receiver<Done>,
    workers: Vec<JoinHandle<()>>,
    queue_depth: u32,
    in_flight: u32,
    stats: EngineStats,
}

impl ThreadsEngine {
    pub fn new(
        files: &[&File],
        pool: BufferPool,
        config: EngineConfig,
    ) -> Result<ThreadsEngine, EngineError> {
        let files: Vec<File> = files
            .iter()
            .map(|file| file.try_clone())
            .collect::<Result<_, _>>()
            .map_err(EngineError::Duplicate)?;
        let files = Arc::new(files);
        let (jobs_tx, jobs_rx) = mpsc::sync_channel::<Job>(config.queue_depth as usize);
        let (done_tx, done_rx) = mpsc::sync_channel::<Done>(config.queue_depth as usize);
        let jobs_rx = Arc::new(Mutex::new(jobs_rx));
        let thread_count = config.queue_depth.min(THREAD_COUNT_MAX);
        let mut workers = Vec::with_capacity(thread_count as usize);
        for index in 0..thread_count {
            let jobs_rx = Arc::clone(&jobs_rx);
            let done_tx = done_tx.clone();
            let files = Arc::clone(&files);
            let worker = std::thread::Builder::new()
                .name(format!("nvrec-io-{index}"))
                .spawn(move || worker_loop(&files, &jobs_rx, &done_tx))
                .map_err(EngineError::Threads)?;
            workers.push(worker);
        }
        Ok(ThreadsEngine {
            pool,
            files,
            jobs: Some(jobs_tx),
            done: done_rx,
            workers,
            queue_depth: config.queue_depth,
            in_flight: 0,
            stats: EngineStats::default(),
        })
    }

    fn account(&mut self, done: Done, completions: &mut Vec<IoCompletion>) {
        self.in_flight -= 1;
        self.stats.resubmit_count += done.resubmit_count as u64;
        completions.push(IoCompletion {
            user_data: done.user_data,
            result: done.result,
        });
    }
}

fn worker_loop(files: &[File], jobs: &Mutex<Receiver<Job>>, done: &SyncSender<Done>) {
    loop {
        let job = {
            let Ok(receiver) = jobs.lock() else { return };
            match receiver.recv() {
                Ok(job) => job,
                Err(_) => return, // The engine is gone.
            }
        };
        let (result, resubmit_count) = transfer(&files[job.request.file_index as usize], &job);
        if done
            .send(Done {
                user_data: job.request.user_data,
                result,
                resubmit_count,
            })
            .is_err()
        {
            return;
        }
    }
}

/// Moves the whole request, continuing short transfers as `step` says.
fn transfer(file: &File, job: &Job) -> (Result<(), IoError>, u32) {
    let request = &job.request;
    let mut done_bytes = 0u32;
    let mut resubmit_count = 0u32;
    loop {
        let address = job.address + done_bytes as usize;
        let len_bytes = (request.len_bytes - done_bytes) as usize;
        let offset = (request.offset_bytes + done_bytes as u64) as libc::off_t;
        // SAFETY: address..address+len_bytes lies inside the request's slot, which the caller
        // does not touch until this request's completion is reaped, and the pool outlives us.
        let result = unsafe {
            match request.op {
                IoOp::Write => libc::pwrite(
                    file.as_raw_fd(),
                    address as *const libc::c_void,
                    len_bytes,
                    offset,
                ),
                IoOp::Read => libc::pread(
                    file.as_raw_fd(),
                    address as *mut libc::c_void,
                    len_bytes,
                    offset,
                ),
                IoOp::Flush => unreachable!("flush goes through sync_data"),
            }
        };
        let result = if result < 0 {
            -(std::io::Error::last_os_error()
                .raw_os_error()
                .unwrap_or(libc::EIO) as i64)
        } else {
            result as i64
        };
        match step(request, done_bytes, result, resubmit_count) {
            Step::Complete => return (Ok(()), resubmit_count),
            Step::Resubmit {
                done_bytes: now_done,
            } => {
                done_bytes = now_done;
                resubmit_count += 1;
            }
            Step::Fail(error) => return (Err(error), resubmit_count),
        }
    }
}

impl Engine for ThreadsEngine {
    shared_engine_methods!(pool, EngineKind::Threads);
    shared_engine_methods!(files);
    shared_engine_methods!(stats);

    unsafe fn push(&mut self, request: IoRequest) {
        check_push(self, &request);
        let address =
            self.pool.slot_ptr(request.slot as usize) as usize + request.slot_offset_bytes as usize;
        let jobs = self.jobs.as_ref().expect("engine is open");
        // The channel holds queue_depth jobs and at most queue_depth are in flight: no block.
        if jobs.send(Job { request, address }).is_ok() {
            self.in_flight += 1;
        }
    }

    fn reap(&mut self, wait_min: u32, out: &mut Vec<IoCompletion>) -> Result<(), EngineError> {
        while (out.len() as u32) < wait_min && self.in_flight > 0 {
            self.stats.syscall_count += 1;
            match self.done.recv_timeout(WAIT_SLICE) {
                Ok(done) => self.account(done, out),
                Err(RecvTimeoutError::Timeout) => return Ok(()),
                Err(RecvTimeoutError::Disconnected) => return Err(EngineError::WorkerLost),
            }
        }
        while let Ok(done) = self.done.try_recv() {
            self.account(done, out);
        }
        Ok(())
    }

    fn features(&self) -> String {
        format!("{} worker threads, pread/pwrite", self.workers.len())
    }
}

impl Drop for ThreadsEngine {
    fn drop(&mut self) {
        // Wait for every job still running: they write into the pool, freed after us.
        while self.in_flight > 0 {
            match self.done.recv() {
                Ok(_) => self.in_flight -= 1,
                Err(_) => break,
            }
        }
        self.jobs = None; // Closing the channel ends the workers.
        for worker in self.workers.drain(..) {
            let _ = worker.join();
        }
    }
}
