//! Network sources: what arrives on sockets, recorded as records (`layout::records`).

mod bpf;
mod capture;
mod inject;
mod tcp;
mod udp;

use std::collections::VecDeque;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::Duration;

/// Reads of a source remembered for [`NetCounters::report_stored`]: the most recent ones,
/// which cover at least what a recorder holds in memory (its buffers) many times over.
pub const TAKEN_LOG_MAX: usize = 1 << 16;

pub use bpf::{
    parse_bpf_program, BpfError, BpfFilter, BpfInstruction, BpfTextError, BPF_INSTRUCTIONS_MAX,
};
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
    /// Received from the kernel but never framed into a payload (left in the source's
    /// staging when it was dropped: the recording ended, a full target, an error).
    pub unframed: AtomicU64,
    /// TCP connections accepted while every stream number was in use: closed at once.
    pub refused_connections: AtomicU64,
    /// Where each recent read ended in the stream, and the counts then.
    taken: Mutex<VecDeque<Taken>>,
}

/// The counts when a read of the source ended at `end_offset_bytes` of the stream.
#[derive(Debug, Clone, Copy, Default)]
struct Taken {
    end_offset_bytes: u64,
    datagrams: u64,
    bytes: u64,
}

/// A snapshot of [`NetCounters`], for reports.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
pub struct NetReport {
    pub datagrams: u64,
    pub bytes: u64,
    pub dropped_socket: u64,
    pub truncated: u64,
    /// Of `datagrams`, framed into payloads the recording never stored (a full target, an
    /// abort: the writer's `unrecorded_bytes`), with their bytes as received; a datagram
    /// whose first part was stored and its rest was not is one of them. Lost.
    pub not_stored: u64,
    pub not_stored_bytes: u64,
    /// Whether `not_stored` is exact: false when the unstored part reaches back past the
    /// reads remembered ([`TAKEN_LOG_MAX`]); then it is a lower bound.
    pub not_stored_exact: bool,
    /// Received but never framed (see [`NetCounters::unframed`]). Lost.
    pub unframed: u64,
    /// TCP connections refused because every stream number was in use. Lost.
    pub refused_connections: u64,
}

impl NetReport {
    /// Datagrams (frames, reads, connections) taken or offered and not in the recording,
    /// whatever the cause.
    pub fn lost(&self) -> u64 {
        self.dropped_socket + self.not_stored + self.unframed + self.refused_connections
    }
}

impl NetCounters {
    pub fn snapshot(&self) -> NetReport {
        NetReport {
            datagrams: self.datagrams.load(Ordering::Relaxed),
            bytes: self.bytes.load(Ordering::Relaxed),
            dropped_socket: self.dropped_socket.load(Ordering::Relaxed),
            truncated: self.truncated.load(Ordering::Relaxed),
            not_stored: 0,
            not_stored_bytes: 0,
            not_stored_exact: true,
            unframed: self.unframed.load(Ordering::Relaxed),
            refused_connections: self.refused_connections.load(Ordering::Relaxed),
        }
    }

    /// Notes that a read of the source ended at `end_offset_bytes` of the stream, with
    /// the counts as they are now. A read never crosses the end of a payload, so the
    /// stream's stored end is where one ended.
    pub fn note_taken(&self, end_offset_bytes: u64) {
        let Ok(mut taken) = self.taken.lock() else {
            return;
        };
        if taken.len() == TAKEN_LOG_MAX {
            taken.pop_front();
        }
        taken.push_back(Taken {
            end_offset_bytes,
            datagrams: self.datagrams.load(Ordering::Relaxed),
            bytes: self.bytes.load(Ordering::Relaxed),
        });
    }

    /// Notes where a read of the source that wrote `read` bytes (or failed) ended, as
    /// [`NetCounters::note_taken`] does for a read that wrote something; hands `read` back.
    #[inline]
    fn note_read(&self, offset_bytes: u64, read: io::Result<usize>) -> io::Result<usize> {
        if let Ok(written) = read {
            if written > 0 {
                self.note_taken(offset_bytes + written as u64);
            }
        }
        read
    }

    /// The report once the recording ended, `unrecorded_bytes` of what the source gave
    /// not stored (the writer's count): the datagrams framed past the stored end are
    /// counted not stored.
    pub fn report_stored(&self, unrecorded_bytes: u64) -> NetReport {
        let mut report = self.snapshot();
        let Ok(taken) = self.taken.lock() else {
            return report;
        };
        let Some(last) = taken.back() else {
            return report;
        };
        let stored_end = last.end_offset_bytes.saturating_sub(unrecorded_bytes);
        let stored = taken
            .iter()
            .rev()
            .find(|read| read.end_offset_bytes <= stored_end);
        let (datagrams, bytes) = match (stored, taken.front()) {
            (Some(read), _) => (read.datagrams, read.bytes),
            // The log reaches back to the first read: nothing was stored.
            _ if taken.len() < TAKEN_LOG_MAX => (0, 0),
            // It does not: at most what the oldest read remembered was stored.
            (None, oldest) => {
                report.not_stored_exact = false;
                oldest.map_or((0, 0), |read| (read.datagrams, read.bytes))
            }
        };
        report.not_stored = report.datagrams - datagrams;
        report.not_stored_bytes = report.bytes - bytes;
        report
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

/// An AF_PACKET raw socket for the interface `name` (root or CAP_NET_RAW), and the
/// interface's index. Opened for protocol 0, so that no frame is queued on it before
/// [`bind_packet_socket`] names a protocol: a capture first attaches its filter and maps
/// its ring, a sender never receives. `named` says which interface an error is about.
fn packet_socket(name: &str, named: impl Fn(io::Error) -> io::Error) -> io::Result<(OwnedFd, u32)> {
    let c_name = std::ffi::CString::new(name)
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "an interface name has no NUL"))?;
    // SAFETY: if_nametoindex reads a NUL-terminated string.
    let ifindex = unsafe { libc::if_nametoindex(c_name.as_ptr()) };
    if ifindex == 0 {
        return Err(named(io::Error::new(
            io::ErrorKind::NotFound,
            "no such network interface",
        )));
    }
    // SAFETY: plain socket creation.
    let fd = unsafe { libc::socket(libc::AF_PACKET, libc::SOCK_RAW | libc::SOCK_CLOEXEC, 0) };
    if fd < 0 {
        return Err(named(io::Error::last_os_error()));
    }
    // SAFETY: the descriptor was just created and is owned by nothing else.
    Ok((unsafe { OwnedFd::from_raw_fd(fd) }, ifindex))
}

/// Binds a [`packet_socket`] to its interface, for frames of `protocol` (an ETH_P_ value in
/// network byte order; 0 receives nothing).
fn bind_packet_socket(socket: &OwnedFd, ifindex: u32, protocol: u16) -> io::Result<()> {
    // SAFETY: sockaddr_ll is plain data; the fields set are those bind reads.
    let mut address: libc::sockaddr_ll = unsafe { std::mem::zeroed() };
    address.sll_family = libc::AF_PACKET as u16;
    address.sll_protocol = protocol;
    address.sll_ifindex = ifindex as i32;
    // SAFETY: binds the socket to the address we pass, of the size we pass.
    let bound = unsafe {
        libc::bind(
            socket.as_raw_fd(),
            (&address as *const libc::sockaddr_ll).cast(),
            std::mem::size_of::<libc::sockaddr_ll>() as u32,
        )
    };
    if bound != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// Sets a socket option at `level` to `value`, passed by pointer at its own size.
fn set_socket_option<T>(
    fd: RawFd,
    level: libc::c_int,
    option: libc::c_int,
    value: &T,
) -> io::Result<()> {
    let value_ptr: *const libc::c_void = (value as *const T).cast();
    let value_len = std::mem::size_of::<T>() as libc::socklen_t;
    // SAFETY: passes a pointer to a `T` of the size given, for a socket the caller holds.
    match unsafe { libc::setsockopt(fd, level, option, value_ptr, value_len) } {
        0 => Ok(()),
        _ => Err(io::Error::last_os_error()),
    }
}

/// What `source` has, read as a recording's payloads of `payload_bytes` each (each filled
/// until the source says it is full or has nothing) until it has been quiet for `quiet`.
#[cfg(test)]
fn read_payloads(
    source: &mut impl crate::source::Source,
    payload_bytes: usize,
    quiet: Duration,
) -> Vec<Vec<u8>> {
    source.set_payload_capacity(payload_bytes);
    let mut payloads = Vec::new();
    while source.wait_readable(quiet).unwrap() {
        let mut buf = vec![0u8; payload_bytes];
        let mut filled = 0;
        loop {
            match source.read_at(0, &mut buf[filled..]) {
                Ok(0) => break,
                Ok(count) => filled += count,
                Err(error) if error.kind() == io::ErrorKind::Interrupted => break,
                Err(error) => panic!("{error}"),
            }
        }
        buf.truncate(filled);
        payloads.push(buf);
    }
    payloads
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Reads end at 100, 200, 300 with 1, 2, 3 datagrams counted: with the last 100 bytes
    /// not stored, the third read's datagram is not stored; with 150, the second's too (a
    /// read never crosses a payload's end, so the stored end is where one ended).
    #[test]
    fn what_was_framed_past_the_stored_end_is_counted_not_stored() {
        let counters = NetCounters::default();
        for (end, count) in [(100, 1), (200, 2), (300, 3)] {
            counters.datagrams.store(count, Ordering::Relaxed);
            counters.bytes.store(count * 90, Ordering::Relaxed);
            counters.note_taken(end);
        }
        let report = counters.report_stored(100);
        assert_eq!((report.not_stored, report.not_stored_bytes), (1, 90));
        assert!(report.not_stored_exact);
        assert_eq!(report.lost(), 1);
        assert_eq!(counters.report_stored(0).not_stored, 0);
        assert_eq!(counters.report_stored(150).not_stored, 2);
        assert_eq!(counters.report_stored(300).not_stored, 3);
        // Past what the log remembers: a lower bound, said so.
        let counters = NetCounters::default();
        for read in 1..=(TAKEN_LOG_MAX as u64 + 10) {
            counters.datagrams.store(read, Ordering::Relaxed);
            counters.note_taken(read * 8);
        }
        let report = counters.report_stored(TAKEN_LOG_MAX as u64 * 8);
        assert!(!report.not_stored_exact);
        // The oldest read remembered ended at 88 with 11 counted: at least the rest.
        assert_eq!(report.not_stored, TAKEN_LOG_MAX as u64 + 10 - 11);
    }
}
