//! UDP datagrams as a record source: `--source udp://ADDR:PORT`, one stream per address.
//!
//! Each socket gets a large receive buffer (it is what absorbs the input while the drives
//! are busy), kernel receive timestamps (SO_TIMESTAMPNS) and the socket's drop counter with
//! every datagram (SO_RXQ_OVFL). Datagrams are taken in batches with recvmmsg into a staging
//! area and framed into the chunk payload as records (`layout::records`); a datagram larger
//! than the room left spans into the next payload (`layout::frame_span`), so payloads are
//! full whatever the datagrams' size. A rise of the drop counter becomes a loss record right
//! before the datagram that carried it, so a loss sits where it happened.
//!
//! Measured here, copying from the staging area into the payload is not what limits the
//! rate (the kernel's copy into the socket buffer and the drives are), so the staging area
//! keeps the receive path simple: whole datagrams of any size up to 64 KiB, in one call.

use super::NetCounters;
use crate::layout::{
    encode_loss, frame_span, packet_header, record_bytes, Content, Loss, LossCause, Packet,
    LOSS_DATA_BYTES,
};
use crate::source::Source;
use std::collections::VecDeque;
use std::io;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr, UdpSocket};
use std::os::fd::AsRawFd;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

/// Receive buffer asked for per socket: what absorbs input while the recorder is busy.
pub const RECEIVE_BUFFER_BYTES: usize = 256 << 20;
/// Datagrams taken per recvmmsg call.
const BATCH: usize = 64;
/// Room per datagram in the staging area: the largest UDP payload fits.
const DATAGRAM_BYTES_MAX: usize = 65536;
/// Control-message room per datagram (a timespec and a u32, with headers).
const CONTROL_BYTES: usize = 128;

/// A datagram or a loss waiting in the staging area for a payload with room.
#[derive(Debug, Clone, Copy)]
enum Staged {
    Datagram {
        stream: u16,
        at: usize,
        len: usize,
        original_len: u32,
        timestamp_ns: u64,
        peer: Option<SocketAddr>,
    },
    Loss(Loss),
}

struct Stream {
    socket: UdpSocket,
    local: SocketAddr,
    /// The socket's drop counter as last seen (SO_RXQ_OVFL counts from the socket's start).
    drops_seen: u32,
}

pub struct UdpSource {
    streams: Vec<Stream>,
    staging: Vec<u8>,
    control: Vec<u8>,
    names: Vec<libc::sockaddr_storage>,
    staged: VecDeque<Staged>,
    /// Bytes of the oldest staged datagram already framed (it spans payloads).
    front_placed_bytes: usize,
    next_stream: usize,
    counters: Arc<NetCounters>,
}

impl UdpSource {
    /// Binds a socket to each address and sets it up for recording.
    pub fn bind(addresses: &[SocketAddr]) -> io::Result<UdpSource> {
        let streams = addresses
            .iter()
            .map(|&address| open_stream(address))
            .collect::<io::Result<Vec<_>>>()?;
        Ok(UdpSource {
            streams,
            staging: vec![0u8; BATCH * DATAGRAM_BYTES_MAX],
            control: vec![0u8; BATCH * CONTROL_BYTES],
            // SAFETY: sockaddr_storage is plain data; all zero is a valid (unspecified) value.
            names: vec![unsafe { std::mem::zeroed() }; BATCH],
            staged: VecDeque::with_capacity(2 * BATCH),
            front_placed_bytes: 0,
            next_stream: 0,
            counters: Arc::new(NetCounters::default()),
        })
    }

    /// The counters the source keeps (datagrams, bytes, drops, truncations), to show live.
    pub fn counters(&self) -> Arc<NetCounters> {
        Arc::clone(&self.counters)
    }

    /// The addresses the sockets are bound to (a port 0 asked for is a real port here).
    pub fn local_addresses(&self) -> Vec<SocketAddr> {
        self.streams.iter().map(|stream| stream.local).collect()
    }

    /// Takes what one socket has (trying each in turn from the next one); false when none
    /// had anything.
    fn receive(&mut self) -> io::Result<bool> {
        for turn in 0..self.streams.len() {
            let index = (self.next_stream + turn) % self.streams.len();
            let count = self.receive_from(index)?;
            if count > 0 {
                self.next_stream = (index + 1) % self.streams.len();
                return Ok(true);
            }
        }
        Ok(false)
    }

    /// One recvmmsg on stream `index`, staging what came; returns the datagram count.
    fn receive_from(&mut self, index: usize) -> io::Result<usize> {
        let mut iovecs: [libc::iovec; BATCH] = std::array::from_fn(|slot| libc::iovec {
            iov_base: self.staging[slot * DATAGRAM_BYTES_MAX..]
                .as_mut_ptr()
                .cast(),
            iov_len: DATAGRAM_BYTES_MAX,
        });
        let control = self.control.as_mut_ptr();
        let names = self.names.as_mut_ptr();
        // SAFETY: mmsghdr is plain data; every pointer is set below before use.
        let mut headers: [libc::mmsghdr; BATCH] = unsafe { std::mem::zeroed() };
        for (slot, header) in headers.iter_mut().enumerate() {
            header.msg_hdr.msg_iov = &mut iovecs[slot];
            header.msg_hdr.msg_iovlen = 1;
            // SAFETY: `slot` < BATCH, within `names` and `control`, which were sized so.
            header.msg_hdr.msg_name = unsafe { names.add(slot) }.cast();
            header.msg_hdr.msg_namelen = std::mem::size_of::<libc::sockaddr_storage>() as u32;
            header.msg_hdr.msg_control = unsafe { control.add(slot * CONTROL_BYTES) }.cast();
            header.msg_hdr.msg_controllen = CONTROL_BYTES as _;
        }
        let fd = self.streams[index].socket.as_raw_fd();
        // SAFETY: BATCH headers, each naming buffers of ours that outlive the call.
        let count = unsafe {
            libc::recvmmsg(
                fd,
                headers.as_mut_ptr(),
                BATCH as u32,
                libc::MSG_DONTWAIT as _,
                std::ptr::null_mut(),
            )
        };
        if count < 0 {
            let error = io::Error::last_os_error();
            return match error.kind() {
                io::ErrorKind::WouldBlock | io::ErrorKind::Interrupted => Ok(0),
                _ => Err(error),
            };
        }
        for (slot, header) in headers.iter().enumerate().take(count as usize) {
            self.stage(index, slot, header);
        }
        Ok(count as usize)
    }

    /// Stages datagram `slot` of a batch from stream `index`, after a loss record if the
    /// socket's drop counter rose.
    fn stage(&mut self, index: usize, slot: usize, header: &libc::mmsghdr) {
        let (timestamp_ns, drops) = read_control(&header.msg_hdr);
        let timestamp_ns = timestamp_ns.unwrap_or_else(realtime_ns);
        if let Some(drops) = drops {
            let stream = &mut self.streams[index];
            let lost = drops.wrapping_sub(stream.drops_seen);
            stream.drops_seen = drops;
            if lost > 0 {
                self.counters
                    .dropped_socket
                    .fetch_add(lost as u64, Ordering::Relaxed);
                self.staged.push_back(Staged::Loss(Loss {
                    stream: index as u16,
                    timestamp_ns,
                    cause: LossCause::SocketOverflow,
                    count: lost as u64,
                    bytes: 0,
                }));
            }
        }
        let len = header.msg_len as usize;
        let cut = header.msg_hdr.msg_flags & libc::MSG_TRUNC != 0;
        self.staged.push_back(Staged::Datagram {
            stream: index as u16,
            at: slot * DATAGRAM_BYTES_MAX,
            len: len.min(DATAGRAM_BYTES_MAX),
            original_len: len as u32,
            timestamp_ns,
            peer: peer_address(&self.names[slot], header.msg_hdr.msg_namelen),
        });
        if cut {
            self.counters.truncated.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// Frames the oldest staged record into `out`: a loss if it fits, a datagram whole or,
    /// where it does not fit, as much of it as fills `out` (the rest goes first into the next
    /// payload). Returns the bytes written (0: `out` is full).
    fn place(&mut self, out: &mut [u8]) -> usize {
        let Some(&front) = self.staged.front() else {
            return 0;
        };
        let len = match front {
            Staged::Loss(loss) => {
                if out.len() < record_bytes(LOSS_DATA_BYTES) {
                    return 0;
                }
                encode_loss(out, &loss)
            }
            Staged::Datagram {
                stream,
                at,
                len,
                original_len,
                timestamp_ns,
                peer,
            } => {
                let data = &self.staging[at..at + len];
                let packet = Packet {
                    stream,
                    content: Content::Udp,
                    timestamp_ns,
                    original_len,
                    data,
                    peer,
                    local: Some(self.streams[stream as usize].local),
                    end: false,
                };
                let header = packet_header(&packet, len);
                let Some(spanned) = frame_span(out, &header, data, self.front_placed_bytes) else {
                    return 0;
                };
                if spanned.part.continues() {
                    self.front_placed_bytes += spanned.data_bytes;
                    return spanned.record_bytes;
                }
                self.front_placed_bytes = 0;
                self.counters.datagrams.fetch_add(1, Ordering::Relaxed);
                self.counters
                    .bytes
                    .fetch_add(original_len as u64, Ordering::Relaxed);
                spanned.record_bytes
            }
        };
        self.staged.pop_front();
        len
    }
}

impl UdpSource {
    /// [`Source::read_at`], but for noting where the read ended.
    fn read_records(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let mut written = 0;
        loop {
            if self.staged.is_empty() && (written > 0 || !self.receive()?) {
                break;
            }
            let placed = self.place(&mut buf[written..]);
            if placed == 0 {
                break;
            }
            written += placed;
        }
        if written == 0 && self.staged.is_empty() {
            return Err(io::ErrorKind::Interrupted.into());
        }
        Ok(written)
    }
}

impl Drop for UdpSource {
    /// Datagrams received and not framed when the recording ends are counted: lost, never
    /// in silence.
    fn drop(&mut self) {
        let unframed = self
            .staged
            .iter()
            .filter(|staged| matches!(staged, Staged::Datagram { .. }))
            .count();
        self.counters
            .unframed
            .fetch_add(unframed as u64, Ordering::Relaxed);
    }
}

impl Source for UdpSource {
    /// Frames records into `buf`, the last spanning into the next payload where it does not
    /// fit: 0 when `buf` is full (see [`Source::packs_records`]); `Interrupted` when no
    /// socket had anything after all.
    fn read_at(&mut self, offset_bytes: u64, buf: &mut [u8]) -> io::Result<usize> {
        let read = self.read_records(buf);
        self.counters.note_read(offset_bytes, read)
    }

    fn wait_readable(&mut self, timeout: Duration) -> io::Result<bool> {
        if !self.staged.is_empty() {
            return Ok(true);
        }
        super::poll_readable(
            self.streams.iter().map(|stream| stream.socket.as_raw_fd()),
            timeout,
        )
    }

    fn packs_records(&self) -> bool {
        true
    }
}

fn open_stream(address: SocketAddr) -> io::Result<Stream> {
    let socket = UdpSocket::bind(address).map_err(|error| {
        io::Error::new(error.kind(), format!("binding udp://{address}: {error}"))
    })?;
    socket.set_nonblocking(true)?;
    let fd = socket.as_raw_fd();
    // Root may go past net.core.rmem_max; others get what the limit allows.
    if set_option(fd, libc::SO_RCVBUFFORCE, RECEIVE_BUFFER_BYTES as i32).is_err() {
        set_option(fd, libc::SO_RCVBUF, RECEIVE_BUFFER_BYTES as i32)?;
    }
    set_option(fd, libc::SO_TIMESTAMPNS, 1)?;
    set_option(fd, libc::SO_RXQ_OVFL, 1)?;
    let local = socket.local_addr()?;
    Ok(Stream {
        socket,
        local,
        drops_seen: 0,
    })
}

fn set_option(fd: i32, option: libc::c_int, value: libc::c_int) -> io::Result<()> {
    super::set_socket_option(fd, libc::SOL_SOCKET, option, &value)
}

/// The receive timestamp (SCM_TIMESTAMPNS) and drop counter (SO_RXQ_OVFL) of a message.
fn read_control(header: &libc::msghdr) -> (Option<u64>, Option<u32>) {
    let mut timestamp = None;
    let mut drops = None;
    // SAFETY: the kernel filled msg_control up to msg_controllen; the CMSG macros walk
    // within it, and each payload is read unaligned at the size its type gives.
    unsafe {
        let mut cmsg = libc::CMSG_FIRSTHDR(header);
        while !cmsg.is_null() {
            let data = libc::CMSG_DATA(cmsg);
            match ((*cmsg).cmsg_level, (*cmsg).cmsg_type) {
                (libc::SOL_SOCKET, libc::SCM_TIMESTAMPNS) => {
                    let ts = std::ptr::read_unaligned(data.cast::<libc::timespec>());
                    timestamp = Some(ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64);
                }
                (libc::SOL_SOCKET, libc::SO_RXQ_OVFL) => {
                    drops = Some(std::ptr::read_unaligned(data.cast::<u32>()));
                }
                _ => {}
            }
            cmsg = libc::CMSG_NXTHDR(header, cmsg);
        }
    }
    (timestamp, drops)
}

fn peer_address(name: &libc::sockaddr_storage, len: u32) -> Option<SocketAddr> {
    match name.ss_family as i32 {
        libc::AF_INET if len as usize >= std::mem::size_of::<libc::sockaddr_in>() => {
            // SAFETY: the family says the storage holds a sockaddr_in.
            let v4 =
                unsafe { *(name as *const libc::sockaddr_storage).cast::<libc::sockaddr_in>() };
            let ip = Ipv4Addr::from(u32::from_be(v4.sin_addr.s_addr));
            Some(SocketAddr::new(IpAddr::V4(ip), u16::from_be(v4.sin_port)))
        }
        libc::AF_INET6 if len as usize >= std::mem::size_of::<libc::sockaddr_in6>() => {
            // SAFETY: the family says the storage holds a sockaddr_in6.
            let v6 =
                unsafe { *(name as *const libc::sockaddr_storage).cast::<libc::sockaddr_in6>() };
            let ip = Ipv6Addr::from(v6.sin6_addr.s6_addr);
            Some(SocketAddr::new(IpAddr::V6(ip), u16::from_be(v6.sin6_port)))
        }
        _ => None,
    }
}

pub(super) fn realtime_ns() -> u64 {
    let mut now = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime writes the timespec we pass.
    unsafe { libc::clock_gettime(libc::CLOCK_REALTIME, &mut now) };
    now.tv_sec as u64 * 1_000_000_000 + now.tv_nsec as u64
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::layout::{for_each_record, records, Part, Record, FRAGMENT_BYTES_MIN};

    /// Moves this test's thread into a network namespace of its own with its loopback up,
    /// so that the test's addresses exist nowhere else; false (the test skips) where that
    /// is not permitted (not root).
    pub(crate) fn private_loopback() -> bool {
        if crate::under_qemu_user(
            "network source test",
            "it does not translate the socket options (SO_RXQ_OVFL, SO_TIMESTAMPNS, \
             PACKET_RX_RING) the network sources set",
        ) {
            return false;
        }
        // SAFETY: unshare takes a flag; it moves only the calling thread.
        if unsafe { libc::unshare(libc::CLONE_NEWNET) } != 0 {
            nvrec_testkit::skip(
                nvrec_testkit::NET_NAMESPACE,
                format_args!("unshare(CLONE_NEWNET): {}", io::Error::last_os_error()),
            );
            return false;
        }
        // A fresh namespace has its loopback down: bring it up.
        // SAFETY: ifreq is plain data; SIOCGIFFLAGS/SIOCSIFFLAGS read and write it.
        unsafe {
            let fd = libc::socket(libc::AF_INET, libc::SOCK_DGRAM, 0);
            let mut request: libc::ifreq = std::mem::zeroed();
            for (at, byte) in b"lo".iter().enumerate() {
                request.ifr_name[at] = *byte as libc::c_char;
            }
            libc::ioctl(fd, libc::SIOCGIFFLAGS as _, &mut request);
            request.ifr_ifru.ifru_flags |= libc::IFF_UP as libc::c_short;
            let up = libc::ioctl(fd, libc::SIOCSIFFLAGS as _, &mut request) == 0;
            libc::close(fd);
            if !up {
                nvrec_testkit::skip(
                    nvrec_testkit::NET_NAMESPACE,
                    "could not bring up the namespace's loopback",
                );
            }
            up
        }
    }

    fn source_and_sender() -> (UdpSource, UdpSocket, SocketAddr) {
        let source = UdpSource::bind(&["127.0.0.1:0".parse().unwrap()]).unwrap();
        let local = source.local_addresses()[0];
        let sender = UdpSocket::bind("127.0.0.1:0").unwrap();
        (source, sender, local)
    }

    fn read_all(source: &mut UdpSource, payload_bytes: usize) -> Vec<Vec<u8>> {
        super::super::read_payloads(source, payload_bytes, Duration::from_millis(100))
    }

    #[test]
    fn datagrams_become_whole_records_with_addresses_and_times() {
        if !private_loopback() {
            return;
        }
        let (mut source, sender, local) = source_and_sender();
        for index in 0..10u8 {
            sender
                .send_to(&vec![index; 1000 + index as usize], local)
                .unwrap();
        }
        // Room for two and a half records per payload: payloads are full, the datagrams
        // that do not fit span two, and every one is read back whole.
        let capacity = 5 * record_bytes(1009) / 2 / 8 * 8;
        let payloads = read_all(&mut source, capacity);
        let mut seen = Vec::new();
        for payload in &payloads[..payloads.len() - 1] {
            assert!(
                payload.len() > capacity - FRAGMENT_BYTES_MIN,
                "{}",
                payload.len()
            );
        }
        for_each_record(&payloads, |record| {
            let Record::Packet(packet) = record.unwrap() else {
                panic!("no loss expected")
            };
            assert_eq!(packet.peer, Some(sender.local_addr().unwrap()));
            assert_eq!(packet.local, Some(local));
            assert!(packet.timestamp_ns > 1_600_000_000_000_000_000);
            assert!(!packet.is_truncated());
            seen.push(packet.data.to_vec());
        });
        let expected: Vec<Vec<u8>> = (0..10u8)
            .map(|index| vec![index; 1000 + index as usize])
            .collect();
        assert_eq!(seen, expected);
        let counters = source.counters();
        assert_eq!(counters.datagrams.load(Ordering::Relaxed), 10);
        assert_eq!(counters.truncated.load(Ordering::Relaxed), 0);
    }

    /// A GSO send of ten datagrams (the socket does not ask for UDP GRO: with it the kernel
    /// would count a dropped GSO packet as one drop, not as its datagrams, and loss must be
    /// exact) arrives as ten datagrams; each becomes a record.
    #[test]
    fn datagrams_coalesced_by_gro_become_a_record_each() {
        if !private_loopback() {
            return;
        }
        let (mut source, sender, local) = source_and_sender();
        // linux/udp.h UDP_SEGMENT: the kernel cuts what is sent into datagrams of 500.
        let segment: libc::c_int = 500;
        // SAFETY: passes a pointer to an int of the size given, for a socket we hold.
        let set = unsafe {
            libc::setsockopt(
                sender.as_raw_fd(),
                libc::SOL_UDP,
                103,
                (&segment as *const libc::c_int).cast(),
                std::mem::size_of::<libc::c_int>() as u32,
            )
        };
        assert_eq!(set, 0);
        let data: Vec<u8> = (0..4700u32).map(|at| (at / 500) as u8).collect();
        sender.send_to(&data, local).unwrap();
        let mut seen = Vec::new();
        for_each_record(&read_all(&mut source, 1 << 20), |record| {
            let Record::Packet(packet) = record.unwrap() else {
                panic!("no loss expected")
            };
            assert_eq!(packet.peer, Some(sender.local_addr().unwrap()));
            seen.push(packet.data.to_vec());
        });
        let expected: Vec<Vec<u8>> = data.chunks(500).map(<[u8]>::to_vec).collect();
        assert_eq!(seen, expected);
        assert_eq!(source.counters().datagrams.load(Ordering::Relaxed), 10);
    }

    #[test]
    fn a_datagram_larger_than_a_payload_spans_payloads_whole() {
        if !private_loopback() {
            return;
        }
        let (mut source, sender, local) = source_and_sender();
        let data: Vec<u8> = (0..5000u32).map(|at| (at % 251) as u8).collect();
        sender.send_to(&data, local).unwrap();
        sender.send_to(b"after", local).unwrap();
        let payloads = read_all(&mut source, 1024);
        assert_eq!(
            payloads.len(),
            6,
            "5000 bytes in fragments of 960, then the next"
        );
        let first = records(&payloads[0]).next().unwrap().unwrap();
        assert_eq!(first.part, Part::First);
        let mut seen = Vec::new();
        for_each_record(&payloads, |record| {
            let Record::Packet(packet) = record.unwrap() else {
                panic!("no loss expected")
            };
            assert!(!packet.is_truncated());
            seen.push(packet.data.to_vec());
        });
        assert_eq!(seen, [data, b"after".to_vec()]);
        assert_eq!(source.counters().truncated.load(Ordering::Relaxed), 0);
        assert_eq!(source.counters().datagrams.load(Ordering::Relaxed), 2);
    }

    #[test]
    fn a_full_socket_buffer_becomes_a_loss_record_where_it_happened() {
        if !private_loopback() {
            return;
        }
        let source = UdpSource::bind(&["127.0.0.1:0".parse().unwrap()]).unwrap();
        let local = source.local_addresses()[0];
        // A small receive buffer, so that the kernel drops.
        set_option(source.streams[0].socket.as_raw_fd(), libc::SO_RCVBUF, 4096).unwrap();
        let mut source = source;
        let sender = UdpSocket::bind("127.0.0.1:0").unwrap();
        for _ in 0..200 {
            sender.send_to(&[1u8; 1400], local).unwrap();
        }
        // Drops are reported with the next datagram that gets through.
        std::thread::sleep(Duration::from_millis(20));
        let mut kept = 0;
        for_each_record(&read_all(&mut source, 1 << 20), |record| {
            if let Record::Packet(_) = record.unwrap() {
                kept += 1;
            }
        });
        sender.send_to(&[2u8; 100], local).unwrap();
        let mut lost = 0;
        for_each_record(&read_all(&mut source, 1 << 20), |record| {
            match record.unwrap() {
                Record::Packet(_) => kept += 1,
                Record::Loss(loss) => {
                    assert_eq!(loss.cause, LossCause::SocketOverflow);
                    lost += loss.count;
                }
            }
        });
        assert!(lost > 0, "the kernel dropped and said so");
        assert_eq!(kept + lost, 201, "kept and lost add up to what was sent");
        assert_eq!(
            source.counters().dropped_socket.load(Ordering::Relaxed),
            lost
        );
    }
}
