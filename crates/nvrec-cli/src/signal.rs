//! SIGINT and SIGTERM become stop and abort requests on the process-wide [`Control`].
//!
//! First SIGINT: stop (chunks already taken complete, flush, report). Second SIGINT, or any
//! SIGTERM: abort (chunks not yet submitted are discarded). The handlers only touch atomics,
//! which is all a signal handler may do. They are installed without SA_RESTART so that a
//! blocking read of stdin or a wait for completions returns EINTR and the loop sees the flag.

use nvrec::control::Control;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};

pub static CONTROL: Control = Control::new();
static SIGINT_COUNT: AtomicU32 = AtomicU32::new(0);

extern "C" fn on_signal(signal: libc::c_int) {
    if signal == libc::SIGINT && SIGINT_COUNT.fetch_add(1, Ordering::SeqCst) == 0 {
        CONTROL.request_stop();
    } else {
        CONTROL.request_abort();
    }
}

/// Set by SIGUSR1 with `record --mark-on-signal`: the recording takes a mark.
pub static MARK: AtomicBool = AtomicBool::new(false);

extern "C" fn on_mark_signal(_signal: libc::c_int) {
    MARK.store(true, Ordering::SeqCst);
}

/// Makes SIGUSR1 take a mark (see [`MARK`]) instead of ending the process.
pub fn install_mark() {
    // SAFETY: as in `install`; the handler only stores an atomic.
    unsafe {
        let mut action: libc::sigaction = std::mem::zeroed();
        action.sa_sigaction = on_mark_signal as extern "C" fn(libc::c_int) as usize;
        action.sa_flags = libc::SA_RESTART;
        libc::sigemptyset(&mut action.sa_mask);
        libc::sigaction(libc::SIGUSR1, &action, std::ptr::null_mut());
    }
}

/// Installs the handlers. Call once, before any long run.
pub fn install() {
    for signal in [libc::SIGINT, libc::SIGTERM] {
        // SAFETY: a zeroed sigaction is a valid starting point; the handler is an extern "C"
        // fn that only performs atomic operations, so it is async-signal-safe.
        unsafe {
            let mut action: libc::sigaction = std::mem::zeroed();
            action.sa_sigaction = on_signal as extern "C" fn(libc::c_int) as usize;
            action.sa_flags = 0; // No SA_RESTART: blocking calls return EINTR.
            libc::sigemptyset(&mut action.sa_mask);
            libc::sigaction(signal, &action, std::ptr::null_mut());
        }
    }
}
