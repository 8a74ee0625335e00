//! The receiver: recvmmsg with UDP GRO into a [`Checker`].
//!
//! With UDP GRO (Linux 5.0) the kernel hands over the datagrams of a GSO packet (or of
//! datagrams it coalesced) as one message with their segment size in a control message:
//! one copy and one header per 64 KiB, which is what lets one core take tens of Gbit/s.
//! The socket's drop counter (SO_RXQ_OVFL) says how many the kernel dropped for a full
//! receive buffer.

use crate::check::{CheckReport, Checker};
use crate::send::set_option;
use std::io;
use std::net::{SocketAddr, UdpSocket};
use std::os::fd::AsRawFd;
use std::time::{Duration, Instant};

/// Messages per recvmmsg call.
const BATCH: usize = 16;
/// Room per message: a whole GRO message.
const MESSAGE_BYTES: usize = 65536;
const CONTROL_BYTES: usize = 64;
const SOL_UDP: libc::c_int = 17;
const UDP_GRO: libc::c_int = 104;
/// How often a blocked receive looks at the clock.
const WAKE: Duration = Duration::from_millis(50);

#[derive(Debug, Clone)]
pub struct ReceiveOptions {
    pub bind: SocketAddr,
    /// Stop once this many distinct datagrams arrived (over all streams); loss is then
    /// counted against it.
    pub expect: Option<u64>,
    /// Streams expected, each with `expect / streams` datagrams.
    pub streams: u32,
    /// Stop after this long in all.
    pub duration: Option<Duration>,
    /// Stop when nothing arrived for this long after the first datagram.
    pub idle: Duration,
    /// Ask for UDP GRO (fewer, larger messages).
    pub gro: bool,
    pub receive_buffer_bytes: usize,
}

impl ReceiveOptions {
    pub fn new(bind: SocketAddr) -> ReceiveOptions {
        ReceiveOptions {
            bind,
            expect: None,
            streams: 1,
            duration: None,
            idle: Duration::from_secs(1),
            gro: true,
            receive_buffer_bytes: 256 << 20,
        }
    }
}

#[derive(Debug, Clone, Default, serde::Serialize)]
pub struct ReceiveReport {
    pub check: CheckReport,
    /// Dropped by the kernel for a full receive buffer (SO_RXQ_OVFL).
    pub dropped_socket: u64,
    /// From the first datagram to the last.
    pub elapsed_s: f64,
    pub rate_bits_per_s: f64,
}

/// A bound receiving socket; [`Receiver::run`] takes datagrams until a stop condition.
pub struct Receiver {
    socket: UdpSocket,
    options: ReceiveOptions,
}

impl Receiver {
    pub fn bind(options: ReceiveOptions) -> io::Result<Receiver> {
        let socket = UdpSocket::bind(options.bind).map_err(|error| {
            io::Error::new(error.kind(), format!("binding {}: {error}", options.bind))
        })?;
        let fd = socket.as_raw_fd();
        let room = options.receive_buffer_bytes.min(i32::MAX as usize) as libc::c_int;
        if set_option(fd, libc::SOL_SOCKET, libc::SO_RCVBUFFORCE, room).is_err() {
            set_option(fd, libc::SOL_SOCKET, libc::SO_RCVBUF, room)?;
        }
        set_option(fd, libc::SOL_SOCKET, libc::SO_RXQ_OVFL, 1)?;
        if options.gro {
            set_option(fd, SOL_UDP, UDP_GRO, 1)?;
        }
        socket.set_read_timeout(Some(WAKE))?;
        Ok(Receiver { socket, options })
    }

    pub fn local_address(&self) -> io::Result<SocketAddr> {
        self.socket.local_addr()
    }

    /// Receives until the expected count, the duration or the idle time is reached.
    pub fn run(self) -> io::Result<ReceiveReport> {
        let options = &self.options;
        let fd = self.socket.as_raw_fd();
        let mut checker = Checker::new();
        let mut buffers = vec![0u8; BATCH * MESSAGE_BYTES];
        let mut control = vec![0u8; BATCH * CONTROL_BYTES];
        let started = Instant::now();
        let mut first: Option<Instant> = None;
        let mut last = started;
        let mut drops = 0u32;
        loop {
            let now = Instant::now();
            if options.duration.is_some_and(|d| now >= started + d)
                || first.is_some() && now.duration_since(last) >= options.idle
                || options.expect.is_some_and(|n| checker.unique() >= n)
            {
                break;
            }
            let mut iovecs: [libc::iovec; BATCH] = std::array::from_fn(|slot| libc::iovec {
                iov_base: buffers[slot * MESSAGE_BYTES..].as_mut_ptr().cast(),
                iov_len: MESSAGE_BYTES,
            });
            // SAFETY: mmsghdr is plain data; every pointer is set below before use.
            let mut headers: [libc::mmsghdr; BATCH] = unsafe { std::mem::zeroed() };
            for (slot, header) in headers.iter_mut().enumerate() {
                header.msg_hdr.msg_iov = &mut iovecs[slot];
                header.msg_hdr.msg_iovlen = 1;
                header.msg_hdr.msg_control = control[slot * CONTROL_BYTES..].as_mut_ptr().cast();
                header.msg_hdr.msg_controllen = CONTROL_BYTES as _;
            }
            // Blocks for the first message (up to the socket's timeout), then takes what
            // is there.
            // SAFETY: BATCH headers naming buffers of ours that outlive the call.
            let count = unsafe {
                libc::recvmmsg(
                    fd,
                    headers.as_mut_ptr(),
                    BATCH as u32,
                    libc::MSG_WAITFORONE as _,
                    std::ptr::null_mut(),
                )
            };
            if count < 0 {
                let error = io::Error::last_os_error();
                match error.kind() {
                    io::ErrorKind::WouldBlock
                    | io::ErrorKind::TimedOut
                    | io::ErrorKind::Interrupted => continue,
                    _ => return Err(error),
                }
            }
            let now = Instant::now();
            first.get_or_insert(now);
            last = now;
            for (slot, header) in headers.iter().enumerate().take(count as usize) {
                let len = header.msg_len as usize;
                let (segment, dropped) = read_control(&header.msg_hdr);
                if let Some(dropped) = dropped {
                    drops = dropped;
                }
                let data = &buffers[slot * MESSAGE_BYTES..slot * MESSAGE_BYTES + len];
                match segment {
                    Some(size) if size > 0 => checker.fixed_size(data, size),
                    _ => checker.datagram(data),
                }
            }
        }
        let check = match options.expect {
            Some(expected) => checker.report_expecting(
                options.streams,
                expected / u64::from(options.streams.max(1)),
            ),
            None => checker.report(),
        };
        let elapsed_s = match first {
            Some(first) => last.duration_since(first).as_secs_f64(),
            None => 0.0,
        };
        Ok(ReceiveReport {
            rate_bits_per_s: check.bytes as f64 * 8.0 / elapsed_s.max(1e-9),
            check,
            dropped_socket: u64::from(drops),
            elapsed_s,
        })
    }
}

/// Binds and receives: [`Receiver::bind`] then [`Receiver::run`].
pub fn receive(options: ReceiveOptions) -> io::Result<ReceiveReport> {
    Receiver::bind(options)?.run()
}

/// The GRO segment size (UDP_GRO) and the drop counter (SO_RXQ_OVFL) of a message.
fn read_control(header: &libc::msghdr) -> (Option<usize>, Option<u32>) {
    let mut segment = None;
    let mut drops = None;
    // SAFETY: the kernel filled msg_control up to msg_controllen; the CMSG macros walk
    // within it, and each payload is read unaligned at the size its type gives.
    unsafe {
        let mut cmsg = libc::CMSG_FIRSTHDR(header);
        while !cmsg.is_null() {
            let data = libc::CMSG_DATA(cmsg);
            match ((*cmsg).cmsg_level, (*cmsg).cmsg_type) {
                (SOL_UDP, UDP_GRO) => {
                    segment = Some(std::ptr::read_unaligned(data.cast::<libc::c_int>()) as usize);
                }
                (libc::SOL_SOCKET, libc::SO_RXQ_OVFL) => {
                    drops = Some(std::ptr::read_unaligned(data.cast::<u32>()));
                }
                _ => {}
            }
            cmsg = libc::CMSG_NXTHDR(header, cmsg);
        }
    }
    (segment, drops)
}
