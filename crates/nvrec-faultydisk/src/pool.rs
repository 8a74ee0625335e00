//! Threads that serve the requests a fault may hold, off the FUSE threads.
//!
//! A stalled request blocks whatever thread serves it. Were that a FUSE thread, a stall would
//! soon hold every one of them and nobody would be left to read `resume` from the control
//! file. So while a stall or a rate limit is in force, disk requests become jobs here, and the
//! FUSE threads stay free for the control file and for metadata.
//!
//! A request that reads the flag just before a fault starts is served on its FUSE thread
//! and may wait there; the window is a few instructions wide and there are several FUSE
//! threads, so the control file stays answerable.
//!
//! The queue is unbounded in type but bounded in practice: a job is a FUSE request not yet
//! answered, and the kernel bounds those (`max_background` for the loop device's
//! asynchronous direct I/O, one per blocked caller otherwise).

use std::sync::mpsc::{self, Receiver, Sender};
use std::sync::{Arc, Mutex};
use std::thread::{self, JoinHandle};

type Job = Box<dyn FnOnce() + Send>;

#[derive(Debug)]
pub(crate) struct Pool {
    sender: Option<Sender<Job>>,
    threads: Vec<JoinHandle<()>>,
}

impl Pool {
    pub fn new(thread_count: usize) -> std::io::Result<Pool> {
        assert!(thread_count > 0, "a pool needs a thread");
        let (sender, receiver) = mpsc::channel::<Job>();
        let receiver = Arc::new(Mutex::new(receiver));
        let threads = (0..thread_count)
            .map(|index| {
                let receiver = receiver.clone();
                thread::Builder::new()
                    .name(format!("faultydisk-{index}"))
                    .spawn(move || work(&receiver))
            })
            .collect::<std::io::Result<_>>()?;
        Ok(Pool {
            sender: Some(sender),
            threads,
        })
    }

    /// Queues a job. Runs it on the calling thread when the pool is gone (never, while the
    /// file system lives).
    pub fn run(&self, job: impl FnOnce() + Send + 'static) {
        let job: Job = Box::new(job);
        match &self.sender {
            Some(sender) => {
                if let Err(mpsc::SendError(job)) = sender.send(job) {
                    job();
                }
            }
            None => job(),
        }
    }
}

fn work(receiver: &Mutex<Receiver<Job>>) {
    loop {
        let job = {
            let receiver = receiver.lock().unwrap_or_else(|p| p.into_inner());
            receiver.recv()
        };
        match job {
            Ok(job) => job(),
            Err(mpsc::RecvError) => return,
        }
    }
}

impl Drop for Pool {
    /// Lets the queued jobs finish, then joins the threads. The owner releases stalls first.
    fn drop(&mut self) {
        self.sender.take();
        for thread in self.threads.drain(..) {
            let _ = thread.join();
        }
    }
}
