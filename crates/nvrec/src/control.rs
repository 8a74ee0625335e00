//! What a long run is told and what it tells: [`Control`] (stop or abort, set from signal
//! handlers, the service, or a run's own trigger) and [`Progress`] (live counters a display
//! on another thread reads), with the process's CPU time ([`process_cpu_s`]) that reports
//! quote. Every run of the library (a stream, a recording, a read, a bench, an archive)
//! takes them; they depend on nothing of the project.

use std::sync::atomic::{AtomicBool, AtomicU64, AtomicU8, Ordering};

const STATE_RUN: u8 = 0;
const STATE_STOP: u8 = 1;
const STATE_ABORT: u8 = 2;

/// What a run has been asked to do. Set from signal handlers: only atomics inside.
#[derive(Debug)]
pub struct Control {
    state: AtomicU8,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ControlState {
    Run,
    Stop,
    Abort,
}

impl Control {
    pub const fn new() -> Control {
        Control {
            state: AtomicU8::new(STATE_RUN),
        }
    }

    /// Asks for a stop; an abort already asked for stays an abort. Async-signal-safe.
    pub fn request_stop(&self) {
        let _ =
            self.state
                .compare_exchange(STATE_RUN, STATE_STOP, Ordering::SeqCst, Ordering::SeqCst);
    }

    /// Asks for an abort. Async-signal-safe.
    pub fn request_abort(&self) {
        self.state.store(STATE_ABORT, Ordering::SeqCst);
    }

    pub fn state(&self) -> ControlState {
        match self.state.load(Ordering::SeqCst) {
            STATE_RUN => ControlState::Run,
            STATE_STOP => ControlState::Stop,
            _ => ControlState::Abort,
        }
    }

    /// Back to running, for reuse between runs (tests, the self-test).
    pub fn reset(&self) {
        self.state.store(STATE_RUN, Ordering::SeqCst);
    }
}

impl Default for Control {
    fn default() -> Self {
        Control::new()
    }
}

/// Sets its flag when dropped: the end of a run that threads beside it wait for, said
/// however the run ends (returned, or unwound by a panic, which would otherwise leave them
/// waiting and the run's scope never joined).
pub struct SetOnDrop<'a>(pub &'a AtomicBool);

impl Drop for SetOnDrop<'_> {
    fn drop(&mut self) {
        self.0.store(true, Ordering::Relaxed);
    }
}

/// Live counters for a progress display on another thread.
#[derive(Debug, Default)]
pub struct Progress {
    pub done_bytes: AtomicU64,
    /// 0 when the total is not known (a recording of a stream without --size).
    pub total_bytes: AtomicU64,
    /// Bytes lost because the input outran the targets (recordings of paced sources).
    pub lost_bytes: AtomicU64,
    /// Recordings: stream bytes that a checkpoint (or the closed entry) made durable, what
    /// a crash from now on can no longer take away.
    pub durable_bytes: AtomicU64,
}

/// User and system CPU seconds of the whole process so far (all threads).
pub fn process_cpu_s() -> (f64, f64) {
    // SAFETY: getrusage writes into the zeroed struct we pass; RUSAGE_SELF is always valid.
    let usage = unsafe {
        let mut usage: libc::rusage = std::mem::zeroed();
        libc::getrusage(libc::RUSAGE_SELF, &mut usage);
        usage
    };
    let seconds = |tv: libc::timeval| tv.tv_sec as f64 + tv.tv_usec as f64 / 1e6;
    (seconds(usage.ru_utime), seconds(usage.ru_stime))
}
