//! The paced sender: sequence-numbered datagrams with sendmmsg and UDP GSO.
//!
//! With GSO (UDP_SEGMENT, Linux 4.18) one message of up to 64 KiB is split into datagrams of
//! the segment size by the kernel (or the NIC) after it has crossed the stack once, so a
//! single core sends tens of Gbit/s; sendmmsg then hands several such messages over per
//! system call. Over a veth pair the large packet crosses whole and is split at the
//! receiving socket (or kept whole for a receiver that asked for UDP GRO).
//!
//! Pacing is by the clock: after each call the sender sleeps until the bytes sent so far are
//! due at the rate asked for, so bursts are at most one call ([`SendOptions::batch`]
//! messages) long.

use crate::datagram::{Template, DATAGRAM_BYTES_MAX, HEADER_BYTES};
use std::io;
use std::net::{SocketAddr, UdpSocket};
use std::os::fd::AsRawFd;
use std::time::{Duration, Instant};

/// The most segments one GSO message may carry (UDP_MAX_SEGMENTS of older kernels).
pub const SEGMENTS_MAX: usize = 64;
/// Bytes of UDP payload one GSO message may carry over IPv4 (64 KiB less the headers).
const GSO_BYTES_MAX: usize = 65507 - 8;
/// Messages per sendmmsg call, at most.
pub const BATCH_MAX: usize = 64;
// linux/udp.h
const SOL_UDP: libc::c_int = 17;
const UDP_SEGMENT: libc::c_int = 103;

/// When the sender stops.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Until {
    /// This many datagrams per stream.
    Count(u64),
    /// This long.
    Duration(Duration),
}

#[derive(Debug, Clone)]
pub struct SendOptions {
    pub destination: SocketAddr,
    /// UDP payload bytes of each datagram (at least [`HEADER_BYTES`]).
    pub datagram_bytes: usize,
    /// Payload bits per second over all streams; None sends as fast as the path takes.
    pub rate_bits_per_s: Option<u64>,
    pub until: Until,
    /// Datagrams per GSO message; 1 sends without GSO. Reduced to what fits 64 KiB.
    pub segments: usize,
    /// GSO messages per sendmmsg call.
    pub batch: usize,
    /// Stream numbers written into the datagrams: `first_stream..first_stream + streams`,
    /// each with its own sequence numbers, sent to consecutive ports from the destination's.
    pub first_stream: u32,
    pub streams: u32,
    /// Send without a UDP checksum (0, allowed over IPv4; SO_NO_CHECK): the frames on the
    /// wire are then complete as they are, where with checksum offload a capture on a
    /// virtual interface sees the checksum not yet filled in. Not with GSO.
    pub no_checksum: bool,
}

impl SendOptions {
    pub fn new(destination: SocketAddr) -> SendOptions {
        SendOptions {
            destination,
            datagram_bytes: 1400,
            rate_bits_per_s: None,
            until: Until::Count(1000),
            segments: SEGMENTS_MAX,
            batch: 8,
            first_stream: 0,
            streams: 1,
            no_checksum: false,
        }
    }
}

#[derive(Debug, Clone, Default, PartialEq, serde::Serialize)]
pub struct SendReport {
    /// Datagrams sent, per stream (the first `datagrams_per_stream` sequence numbers).
    pub datagrams_per_stream: u64,
    pub datagrams: u64,
    pub bytes: u64,
    pub elapsed_s: f64,
    pub rate_bits_per_s: f64,
    /// Calls that found the transmit queue full (ENOBUFS) and waited.
    pub full_queue_waits: u64,
    pub segments: usize,
}

/// Sends until the count or the time is reached; every stream gets the same count.
pub fn send(options: &SendOptions) -> io::Result<SendReport> {
    let segments = segments_per_message(options)?;
    let socket = open_socket(options, segments)?;
    let mut call = Call::new(options, segments);
    let started = Instant::now();
    let mut report = SendReport {
        segments,
        ..SendReport::default()
    };
    let limit = match options.until {
        Until::Count(count) => count,
        Until::Duration(_) => u64::MAX,
    };
    let deadline = match options.until {
        Until::Duration(duration) => Some(started + duration),
        Until::Count(_) => None,
    };
    while call.next_sequence < limit {
        if deadline.is_some_and(|deadline| Instant::now() >= deadline) {
            break;
        }
        call.plan(limit);
        call.fill();
        call.send(socket.as_raw_fd(), &mut report)?;
        let datagrams = call.datagram_count();
        report.datagrams += datagrams as u64;
        report.bytes += (datagrams * options.datagram_bytes) as u64;
        if let Some(rate) = options.rate_bits_per_s {
            if !pace(rate, report.bytes, started, deadline) {
                break;
            }
        }
    }
    report.elapsed_s = started.elapsed().as_secs_f64();
    report.datagrams_per_stream = report.datagrams / u64::from(options.streams);
    report.rate_bits_per_s = report.bytes as f64 * 8.0 / report.elapsed_s.max(1e-9);
    Ok(report)
}

/// Checks the options, and says how many datagrams one message carries: as many as asked
/// for that fit a GSO message.
fn segments_per_message(options: &SendOptions) -> io::Result<usize> {
    let len = options.datagram_bytes;
    if !(HEADER_BYTES..=DATAGRAM_BYTES_MAX).contains(&len) {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("a datagram is {HEADER_BYTES} to {DATAGRAM_BYTES_MAX} bytes, not {len}"),
        ));
    }
    if options.streams == 0 || options.batch == 0 || options.batch > BATCH_MAX {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("streams >= 1 and batch 1..={BATCH_MAX}"),
        ));
    }
    Ok(options
        .segments
        .clamp(1, SEGMENTS_MAX)
        .min((GSO_BYTES_MAX / len).max(1)))
}

/// A UDP socket of the destination's family with a large send buffer, without checksums
/// or with GSO as asked.
fn open_socket(options: &SendOptions, segments: usize) -> io::Result<UdpSocket> {
    let bind: SocketAddr = if options.destination.is_ipv4() {
        "0.0.0.0:0".parse().unwrap()
    } else {
        "[::]:0".parse().unwrap()
    };
    let socket = UdpSocket::bind(bind)?;
    let fd = socket.as_raw_fd();
    let send_buffer: libc::c_int = 64 << 20;
    if set_option(fd, libc::SOL_SOCKET, libc::SO_SNDBUFFORCE, send_buffer).is_err() {
        set_option(fd, libc::SOL_SOCKET, libc::SO_SNDBUF, send_buffer)?;
    }
    if options.no_checksum {
        if segments > 1 {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "no checksum needs one datagram per message (GSO needs the checksum)",
            ));
        }
        set_option(fd, libc::SOL_SOCKET, libc::SO_NO_CHECK, 1)?;
    }
    if segments > 1 {
        let len = options.datagram_bytes as libc::c_int;
        set_option(fd, SOL_UDP, UDP_SEGMENT, len).map_err(|error| {
            io::Error::new(
                error.kind(),
                format!("UDP GSO (UDP_SEGMENT, Linux 4.18) refused: {error}; use --segments 1"),
            )
        })?;
    }
    Ok(socket)
}

/// One sendmmsg call's messages and what they point to, made once and reused by every call.
struct Call {
    /// Bytes of one datagram.
    len: usize,
    segments: usize,
    message_bytes: usize,
    /// Rounds of one message per stream in a call.
    rounds: usize,
    streams: u32,
    first_stream: u32,
    /// The next sequence number of every stream.
    next_sequence: u64,
    buffers: Vec<u8>,
    /// Messages of the call being built: (stream index, first sequence, datagram count).
    messages: Vec<(u32, u64, usize)>,
    iovecs: Vec<libc::iovec>,
    headers: Vec<libc::mmsghdr>,
    /// Stream N's destination: the destination's port plus N.
    destinations: Vec<libc::sockaddr_storage>,
    destination_len: u32,
    template: Template,
}

impl Call {
    fn new(options: &SendOptions, segments: usize) -> Call {
        let len = options.datagram_bytes;
        let destinations = (0..options.streams)
            .map(|stream| {
                let mut address = options.destination;
                address.set_port(options.destination.port().wrapping_add(stream as u16));
                socket_address(address)
            })
            .collect();
        let message_bytes = segments * len;
        // Every call covers each stream with the same sequence numbers, so that the streams'
        // counts stay equal whenever the sender stops.
        let rounds = (options.batch / options.streams as usize).max(1);
        let messages_max = rounds * options.streams as usize;
        Call {
            len,
            segments,
            message_bytes,
            rounds,
            streams: options.streams,
            first_stream: options.first_stream,
            next_sequence: 0,
            buffers: vec![0u8; messages_max * message_bytes],
            messages: Vec::with_capacity(messages_max),
            iovecs: Vec::with_capacity(messages_max),
            headers: Vec::with_capacity(messages_max),
            destinations,
            destination_len: address_len(&options.destination),
            template: Template::new(),
        }
    }

    /// Chooses the messages of the next call: each round one per stream, with the same
    /// sequence numbers, none past `limit`.
    fn plan(&mut self, limit: u64) {
        self.messages.clear();
        for _ in 0..self.rounds {
            let count = (self.segments as u64).min(limit - self.next_sequence) as usize;
            if count == 0 {
                break;
            }
            for stream in 0..self.streams {
                self.messages.push((stream, self.next_sequence, count));
            }
            self.next_sequence += count as u64;
        }
    }

    /// Writes the planned messages' datagrams and the headers that name them.
    fn fill(&mut self) {
        self.iovecs.clear();
        self.headers.clear();
        for (slot, &(stream, first, count)) in self.messages.iter().enumerate() {
            let start = slot * self.message_bytes;
            let buffer = &mut self.buffers[start..start + count * self.len];
            for (index, datagram) in buffer.chunks_exact_mut(self.len).enumerate() {
                self.template
                    .fill(datagram, self.first_stream + stream, first + index as u64);
            }
            self.iovecs.push(libc::iovec {
                iov_base: buffer.as_mut_ptr().cast(),
                iov_len: buffer.len(),
            });
        }
        for (slot, &(stream, _, _)) in self.messages.iter().enumerate() {
            // SAFETY: mmsghdr is plain data; the pointers set are valid for the call.
            let mut header: libc::mmsghdr = unsafe { std::mem::zeroed() };
            header.msg_hdr.msg_name = (&self.destinations[stream as usize]
                as *const libc::sockaddr_storage)
                .cast_mut()
                .cast();
            header.msg_hdr.msg_namelen = self.destination_len;
            header.msg_hdr.msg_iov = &mut self.iovecs[slot];
            header.msg_hdr.msg_iovlen = 1;
            self.headers.push(header);
        }
    }

    /// Sends every filled message, waiting out a full transmit queue.
    fn send(&mut self, fd: i32, report: &mut SendReport) -> io::Result<()> {
        let mut done = 0;
        while done < self.headers.len() {
            // SAFETY: each header names a buffer, an iovec and an address of ours that
            // outlive the call.
            let sent = unsafe {
                libc::sendmmsg(
                    fd,
                    self.headers[done..].as_mut_ptr(),
                    (self.headers.len() - done) as u32,
                    0,
                )
            };
            if sent < 0 {
                let error = io::Error::last_os_error();
                match error.raw_os_error() {
                    Some(libc::ENOBUFS) | Some(libc::EAGAIN) => {
                        report.full_queue_waits += 1;
                        std::thread::sleep(Duration::from_micros(20));
                        continue;
                    }
                    Some(libc::EINTR) => continue,
                    // Nobody listening (ICMP port unreachable came back): keep sending, as
                    // a sender on the wire would.
                    Some(libc::ECONNREFUSED) => continue,
                    _ => return Err(error),
                }
            }
            done += sent as usize;
        }
        Ok(())
    }

    fn datagram_count(&self) -> usize {
        self.messages.iter().map(|&(_, _, count)| count).sum()
    }
}

/// Sleeps until `bytes` are due at `rate_bits_per_s` from `started`. False when the
/// deadline comes first: then it sleeps until the deadline and the sender stops.
fn pace(rate_bits_per_s: u64, bytes: u64, started: Instant, deadline: Option<Instant>) -> bool {
    let due = Duration::from_secs_f64(bytes as f64 * 8.0 / rate_bits_per_s as f64);
    let elapsed = started.elapsed();
    if due > elapsed {
        let wait = due - elapsed;
        if let Some(deadline) = deadline {
            if Instant::now() + wait >= deadline {
                std::thread::sleep(deadline.saturating_duration_since(Instant::now()));
                return false;
            }
        }
        std::thread::sleep(wait);
    }
    true
}

pub(crate) fn set_option(
    fd: i32,
    level: libc::c_int,
    option: libc::c_int,
    value: libc::c_int,
) -> io::Result<()> {
    // SAFETY: passes a pointer to an int of the size given, for a socket the caller holds.
    let result = unsafe {
        libc::setsockopt(
            fd,
            level,
            option,
            (&value as *const libc::c_int).cast(),
            std::mem::size_of::<libc::c_int>() as u32,
        )
    };
    if result != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

fn address_len(address: &SocketAddr) -> u32 {
    match address {
        SocketAddr::V4(_) => std::mem::size_of::<libc::sockaddr_in>() as u32,
        SocketAddr::V6(_) => std::mem::size_of::<libc::sockaddr_in6>() as u32,
    }
}

fn socket_address(address: SocketAddr) -> libc::sockaddr_storage {
    // SAFETY: sockaddr_storage is plain data, large enough for either family.
    let mut storage: libc::sockaddr_storage = unsafe { std::mem::zeroed() };
    match address {
        SocketAddr::V4(v4) => {
            let sin = libc::sockaddr_in {
                sin_family: libc::AF_INET as libc::sa_family_t,
                sin_port: v4.port().to_be(),
                sin_addr: libc::in_addr {
                    s_addr: u32::from(*v4.ip()).to_be(),
                },
                sin_zero: [0; 8],
            };
            // SAFETY: a sockaddr_in fits in sockaddr_storage.
            unsafe { std::ptr::write((&mut storage as *mut libc::sockaddr_storage).cast(), sin) };
        }
        SocketAddr::V6(v6) => {
            let sin6 = libc::sockaddr_in6 {
                sin6_family: libc::AF_INET6 as libc::sa_family_t,
                sin6_port: v6.port().to_be(),
                sin6_flowinfo: v6.flowinfo(),
                sin6_addr: libc::in6_addr {
                    s6_addr: v6.ip().octets(),
                },
                sin6_scope_id: v6.scope_id(),
            };
            // SAFETY: a sockaddr_in6 fits in sockaddr_storage.
            unsafe { std::ptr::write((&mut storage as *mut libc::sockaddr_storage).cast(), sin6) };
        }
    }
    storage
}
