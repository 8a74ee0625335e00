//! Network sources: what arrives on sockets, recorded as records (`layout::records`).

mod bpf;
mod capture;
mod inject;
mod tcp;
mod udp;

use std::io;
use std::os::fd::RawFd;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

pub use bpf::{parse_bpf_program, BpfError, BpfFilter, BpfInstruction, BPF_INSTRUCTIONS_MAX};
pub use capture::{
    default_capture_threads, CaptureOptions, CaptureSource, BLOCK_BYTES, BLOCK_COUNT,
    CAPTURE_THREADS_MAX, SNAPLEN_MAX,
};
pub use inject::{FrameSender, InjectReport};
pub use tcp::TcpSource;
pub use udp::{UdpSource, RECEIVE_BUFFER_BYTES};

/// Counters a network source keeps, read live (progress) and at the end (the report).
#[derive(Debug, Default)]
pub struct NetCounters {
    /// Datagrams or packets framed into payloads.
    pub datagrams: AtomicU64,
    /// Their bytes as received (before any truncation).
    pub bytes: AtomicU64,
    /// Dropped by the kernel: a socket's receive buffer, or a capture ring, was full.
    pub dropped_socket: AtomicU64,
    /// Kept shorter than they arrived.
    pub truncated: AtomicU64,
}

/// A snapshot of [`NetCounters`], for reports.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
pub struct NetReport {
    pub datagrams: u64,
    pub bytes: u64,
    pub dropped_socket: u64,
    pub truncated: u64,
}

impl NetCounters {
    pub fn snapshot(&self) -> NetReport {
        NetReport {
            datagrams: self.datagrams.load(Ordering::Relaxed),
            bytes: self.bytes.load(Ordering::Relaxed),
            dropped_socket: self.dropped_socket.load(Ordering::Relaxed),
            truncated: self.truncated.load(Ordering::Relaxed),
        }
    }
}

/// Waits until one of `fds` is readable (or has an error to report), at most `timeout`;
/// false if the time ran out.
fn poll_readable(fds: impl Iterator<Item = RawFd>, timeout: Duration) -> io::Result<bool> {
    let mut fds: Vec<libc::pollfd> = fds
        .map(|fd| libc::pollfd {
            fd,
            events: libc::POLLIN,
            revents: 0,
        })
        .collect();
    let timeout_ms = timeout.as_millis().min(i32::MAX as u128) as i32;
    // SAFETY: `fds` holds valid pollfds for descriptors the caller keeps open.
    let ready = unsafe { libc::poll(fds.as_mut_ptr(), fds.len() as _, timeout_ms) };
    if ready < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(ready > 0)
}
