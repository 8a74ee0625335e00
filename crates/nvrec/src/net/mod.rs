//! Network sources: what arrives on sockets, recorded as records (`layout::records`).

mod capture;
mod tcp;
mod udp;

use std::sync::atomic::{AtomicU64, Ordering};

pub use capture::{CaptureSource, BLOCK_BYTES, BLOCK_COUNT, SNAPLEN_MAX};
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
