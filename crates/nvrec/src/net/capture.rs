//! Packet capture as a record source: `--source capture:IFACE`, one stream per interface.
//!
//! An AF_PACKET socket with a TPACKET_V3 receive ring: the kernel fills blocks of 1 MiB
//! with frames (a virtual interface delivers GSO packets whole, up to 64 KiB and more, so a
//! frame of up to [`SNAPLEN_MAX`] fits a block), hands a block over when it is full or
//! [`BLOCK_TIMEOUT_MS`] old, and the recorder frames each frame into the chunk payload as a
//! record (content Ethernet) straight from the ring, then gives the block back. The
//! kernel's drop counter (PACKET_STATISTICS, which resets on every read) is read after each
//! block; drops become a loss record before the next frame, where they happened.

use super::NetCounters;
use crate::layout::{
    encode_loss, encode_packet_header, record_bytes, Content, Loss, LossCause, Packet,
    LOSS_DATA_BYTES, RECORD_HEADER_BYTES,
};
use crate::source::Source;
use std::collections::VecDeque;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::sync::atomic::{fence, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// Bytes of a ring block, and blocks per ring: 64 MiB of ring per interface absorbs the
/// input while the drives are busy.
pub const BLOCK_BYTES: u32 = 1 << 20;
pub const BLOCK_COUNT: u32 = 64;
/// A block is handed over at the latest this long after its first frame.
pub const BLOCK_TIMEOUT_MS: u32 = 10;
/// The longest frame kept whole (a block holds one with its headers).
pub const SNAPLEN_MAX: u32 = 256 << 10;

// linux/if_packet.h and linux/socket.h.
const SOL_PACKET: libc::c_int = 263;
const PACKET_RX_RING: libc::c_int = 5;
const PACKET_STATISTICS: libc::c_int = 6;
const PACKET_VERSION: libc::c_int = 10;
const TPACKET_V3: libc::c_int = 2;
const TP_STATUS_KERNEL: u32 = 0;
const TP_STATUS_USER: u32 = 1;
const ETH_P_ALL: u16 = 0x0003;

#[repr(C)]
struct TpacketReq3 {
    block_size: u32,
    block_nr: u32,
    frame_size: u32,
    frame_nr: u32,
    retire_blk_tov: u32,
    sizeof_priv: u32,
    feature_req_word: u32,
}

#[repr(C)]
#[derive(Default)]
struct TpacketStatsV3 {
    packets: u32,
    drops: u32,
    freeze_q_cnt: u32,
}

/// Offsets in a block descriptor (struct tpacket_block_desc with tpacket_hdr_v1).
mod block {
    pub const STATUS: usize = 8;
    pub const PACKET_COUNT: usize = 12;
    pub const FIRST_PACKET: usize = 16;
}

/// Offsets in a frame header (struct tpacket3_hdr).
mod frame {
    pub const NEXT_OFFSET: usize = 0;
    pub const SEC: usize = 4;
    pub const NSEC: usize = 8;
    pub const SNAPLEN: usize = 12;
    pub const LEN: usize = 16;
    pub const MAC: usize = 24;
}

/// The mapped ring of one socket.
struct Ring {
    base: *mut u8,
    len: usize,
}

impl Drop for Ring {
    fn drop(&mut self) {
        // SAFETY: base and len are exactly the mapping made in `open_interface`.
        unsafe { libc::munmap(self.base.cast(), self.len) };
    }
}

/// Where reading stands in the block the kernel handed over.
#[derive(Debug, Clone, Copy)]
struct Cursor {
    block: u32,
    packets_left: u32,
    offset: usize,
}

struct Interface {
    name: String,
    ring: Ring,
    /// Declared after the ring: the socket closes after the mapping is gone.
    socket: OwnedFd,
    next_block: u32,
    cursor: Option<Cursor>,
}

pub struct CaptureSource {
    interfaces: Vec<Interface>,
    /// Losses to frame before the next frame of their stream.
    losses: VecDeque<Loss>,
    next_interface: usize,
    payload_capacity_bytes: usize,
    counters: Arc<NetCounters>,
}

// SAFETY: the ring pointers refer to mappings the source owns; it is used by one thread
// at a time.
unsafe impl Send for CaptureSource {}

impl CaptureSource {
    /// Opens a capture ring on each interface (root or CAP_NET_RAW).
    pub fn open(names: &[String]) -> io::Result<CaptureSource> {
        let interfaces = names
            .iter()
            .map(|name| open_interface(name))
            .collect::<io::Result<Vec<_>>>()?;
        Ok(CaptureSource {
            interfaces,
            losses: VecDeque::new(),
            next_interface: 0,
            payload_capacity_bytes: usize::MAX,
            counters: Arc::new(NetCounters::default()),
        })
    }

    pub fn counters(&self) -> Arc<NetCounters> {
        Arc::clone(&self.counters)
    }

    /// Takes the next block the kernel handed over, on some interface, if any.
    fn take_block(&mut self) -> bool {
        for turn in 0..self.interfaces.len() {
            let index = (self.next_interface + turn) % self.interfaces.len();
            let interface = &mut self.interfaces[index];
            if interface.cursor.is_some() {
                self.next_interface = index;
                return true;
            }
            let block = interface.next_block;
            let descriptor = interface.block(block);
            // SAFETY: the descriptor lies in the mapped ring; the kernel writes its status.
            let status =
                unsafe { std::ptr::read_volatile(descriptor.add(block::STATUS).cast::<u32>()) };
            if status & TP_STATUS_USER == 0 {
                continue;
            }
            fence(Ordering::Acquire);
            // SAFETY: the block is ours (TP_STATUS_USER) until we set it back.
            let (count, first) = unsafe {
                (
                    std::ptr::read(descriptor.add(block::PACKET_COUNT).cast::<u32>()),
                    std::ptr::read(descriptor.add(block::FIRST_PACKET).cast::<u32>()),
                )
            };
            interface.cursor = Some(Cursor {
                block,
                packets_left: count,
                offset: first as usize,
            });
            self.next_interface = index;
            return true;
        }
        false
    }

    /// Reads the kernel's drop counter of interface `index` (it resets on each read).
    fn note_drops(&mut self, index: usize, timestamp_ns: u64) {
        let mut stats = TpacketStatsV3::default();
        let mut len = std::mem::size_of::<TpacketStatsV3>() as libc::socklen_t;
        // SAFETY: getsockopt writes at most `len` bytes into `stats`.
        let result = unsafe {
            libc::getsockopt(
                self.interfaces[index].socket.as_raw_fd(),
                SOL_PACKET,
                PACKET_STATISTICS,
                (&mut stats as *mut TpacketStatsV3).cast(),
                &mut len,
            )
        };
        if result == 0 && stats.drops > 0 {
            self.counters
                .dropped_socket
                .fetch_add(stats.drops as u64, Ordering::Relaxed);
            self.losses.push_back(Loss {
                stream: index as u16,
                timestamp_ns,
                cause: LossCause::CaptureDrop,
                count: stats.drops as u64,
                bytes: 0,
            });
        }
    }

    /// Frames the next loss or frame into `out` if it fits; its length, or 0.
    fn place(&mut self, out: &mut [u8]) -> usize {
        if let Some(loss) = self.losses.front() {
            if out.len() < record_bytes(LOSS_DATA_BYTES) {
                return 0;
            }
            let len = encode_loss(out, loss);
            self.losses.pop_front();
            return len;
        }
        let index = self.next_interface;
        let Some(cursor) = self.interfaces[index].cursor else {
            return 0;
        };
        let interface = &self.interfaces[index];
        // SAFETY: the frame lies in a block the kernel handed over (TP_STATUS_USER), at an
        // offset the kernel gave; its data lies `mac` bytes in, `snaplen` long.
        let (packet, next_offset) = unsafe {
            let header = interface.block(cursor.block).add(cursor.offset);
            let read = |at: usize| std::ptr::read_unaligned(header.add(at).cast::<u32>());
            let mac = std::ptr::read_unaligned(header.add(frame::MAC).cast::<u16>());
            let snaplen = read(frame::SNAPLEN) as usize;
            let data = std::slice::from_raw_parts(header.add(mac as usize), snaplen);
            let packet = Packet {
                stream: index as u16,
                content: Content::Ethernet,
                timestamp_ns: read(frame::SEC) as u64 * 1_000_000_000 + read(frame::NSEC) as u64,
                original_len: read(frame::LEN),
                data,
                peer: None,
                local: None,
                end: false,
            };
            (packet, read(frame::NEXT_OFFSET) as usize)
        };
        let empty_payload = out.len() >= self.payload_capacity_bytes;
        let room = out.len().saturating_sub(RECORD_HEADER_BYTES) / 8 * 8;
        let kept = if record_bytes(packet.data.len()) <= out.len() {
            packet.data.len()
        } else if empty_payload && room > 0 {
            room
        } else {
            return 0;
        };
        let packet = Packet {
            data: &packet.data[..kept],
            ..packet
        };
        out[RECORD_HEADER_BYTES..RECORD_HEADER_BYTES + kept].copy_from_slice(packet.data);
        let len = encode_packet_header(out, &packet);
        self.counters.datagrams.fetch_add(1, Ordering::Relaxed);
        self.counters
            .bytes
            .fetch_add(packet.original_len as u64, Ordering::Relaxed);
        if packet.is_truncated() {
            self.counters.truncated.fetch_add(1, Ordering::Relaxed);
        }
        let timestamp_ns = packet.timestamp_ns;
        self.advance(index, next_offset, timestamp_ns);
        len
    }

    /// Moves past the frame just framed; a block read to its end goes back to the kernel.
    fn advance(&mut self, index: usize, next_offset: usize, timestamp_ns: u64) {
        let interface = &mut self.interfaces[index];
        let Some(cursor) = interface.cursor.as_mut() else {
            return;
        };
        cursor.packets_left -= 1;
        cursor.offset += next_offset;
        if cursor.packets_left > 0 {
            return;
        }
        let block = cursor.block;
        interface.cursor = None;
        let descriptor = interface.block(block);
        fence(Ordering::Release);
        // SAFETY: the block is ours until this store gives it back to the kernel.
        unsafe {
            std::ptr::write_volatile(
                descriptor.add(block::STATUS).cast::<u32>(),
                TP_STATUS_KERNEL,
            )
        };
        interface.next_block = (block + 1) % BLOCK_COUNT;
        self.note_drops(index, timestamp_ns);
        self.next_interface = (index + 1) % self.interfaces.len();
    }
}

impl Interface {
    fn block(&self, block: u32) -> *mut u8 {
        debug_assert!((block as usize + 1) * BLOCK_BYTES as usize <= self.ring.len);
        // SAFETY: block < BLOCK_COUNT, so the offset stays inside the mapping.
        unsafe { self.ring.base.add(block as usize * BLOCK_BYTES as usize) }
    }
}

impl Source for CaptureSource {
    fn read_at(&mut self, _offset_bytes: u64, buf: &mut [u8]) -> io::Result<usize> {
        let mut written = 0;
        loop {
            if self.losses.is_empty() && !self.take_block() {
                break;
            }
            let placed = self.place(&mut buf[written..]);
            if placed == 0 {
                break;
            }
            written += placed;
        }
        if written == 0 && self.losses.is_empty() && !self.take_block() {
            return Err(io::ErrorKind::Interrupted.into());
        }
        Ok(written)
    }

    fn wait_readable(&mut self, timeout: Duration) -> io::Result<bool> {
        if !self.losses.is_empty() || self.take_block() {
            return Ok(true);
        }
        // POLLIN: the kernel handed a block over (or a socket error is there to report).
        let ready = super::poll_readable(
            self.interfaces.iter().map(|i| i.socket.as_raw_fd()),
            timeout,
        )?;
        Ok(ready && self.take_block())
    }

    fn packs_records(&self) -> bool {
        true
    }

    fn set_payload_capacity(&mut self, bytes: usize) {
        self.payload_capacity_bytes = bytes;
    }
}

fn open_interface(name: &str) -> io::Result<Interface> {
    let named = |error: io::Error| io::Error::new(error.kind(), format!("capture:{name}: {error}"));
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
    let fd = unsafe {
        libc::socket(
            libc::AF_PACKET,
            libc::SOCK_RAW | libc::SOCK_CLOEXEC,
            ETH_P_ALL.to_be() as libc::c_int,
        )
    };
    if fd < 0 {
        return Err(named(io::Error::last_os_error()));
    }
    // SAFETY: the descriptor was just created and is owned by nothing else.
    let socket = unsafe { OwnedFd::from_raw_fd(fd) };
    set_packet_option(fd, PACKET_VERSION, &TPACKET_V3).map_err(named)?;
    let request = TpacketReq3 {
        block_size: BLOCK_BYTES,
        block_nr: BLOCK_COUNT,
        frame_size: 2048,
        frame_nr: BLOCK_BYTES / 2048 * BLOCK_COUNT,
        retire_blk_tov: BLOCK_TIMEOUT_MS,
        sizeof_priv: 0,
        feature_req_word: 0,
    };
    set_packet_option(fd, PACKET_RX_RING, &request).map_err(named)?;
    let len = BLOCK_BYTES as usize * BLOCK_COUNT as usize;
    // SAFETY: maps the ring the kernel just made for this socket.
    let base = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            len,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_SHARED,
            fd,
            0,
        )
    };
    if base == libc::MAP_FAILED {
        return Err(named(io::Error::last_os_error()));
    }
    let ring = Ring {
        base: base.cast(),
        len,
    };
    // SAFETY: sockaddr_ll is plain data; the fields set are those bind reads.
    let mut address: libc::sockaddr_ll = unsafe { std::mem::zeroed() };
    address.sll_family = libc::AF_PACKET as u16;
    address.sll_protocol = ETH_P_ALL.to_be();
    address.sll_ifindex = ifindex as i32;
    // SAFETY: binds the socket to the address we pass, of the size we pass.
    let bound = unsafe {
        libc::bind(
            fd,
            (&address as *const libc::sockaddr_ll).cast(),
            std::mem::size_of::<libc::sockaddr_ll>() as u32,
        )
    };
    if bound != 0 {
        return Err(named(io::Error::last_os_error()));
    }
    Ok(Interface {
        name: name.to_string(),
        ring,
        socket,
        next_block: 0,
        cursor: None,
    })
}

fn set_packet_option<T>(fd: i32, option: libc::c_int, value: &T) -> io::Result<()> {
    // SAFETY: passes a pointer to a `T` of the size given, for a socket we hold.
    let result = unsafe {
        libc::setsockopt(
            fd,
            SOL_PACKET,
            option,
            (value as *const T).cast(),
            std::mem::size_of::<T>() as u32,
        )
    };
    if result != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

impl std::fmt::Debug for CaptureSource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let names: Vec<&str> = self.interfaces.iter().map(|i| i.name.as_str()).collect();
        f.debug_struct("CaptureSource")
            .field("interfaces", &names)
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::layout::{records, Record};
    use std::net::UdpSocket;

    /// Frames sent on the namespace's loopback are captured whole (loopback shows each
    /// frame twice, outgoing and incoming), with their timestamps and lengths.
    #[test]
    fn frames_on_an_interface_become_records() {
        if !crate::net::udp::tests::private_loopback() {
            return;
        }
        let mut source = CaptureSource::open(&["lo".to_string()]).unwrap();
        source.set_payload_capacity(1 << 20);
        let receiver = UdpSocket::bind("127.0.0.1:0").unwrap();
        let sender = UdpSocket::bind("127.0.0.1:0").unwrap();
        for index in 0..50u8 {
            sender
                .send_to(&[index; 300], receiver.local_addr().unwrap())
                .unwrap();
        }
        let mut seen = Vec::new();
        let mut buf = vec![0u8; 1 << 20];
        while source.wait_readable(Duration::from_millis(200)).unwrap() {
            let filled = match source.read_at(0, &mut buf) {
                Ok(filled) => filled,
                Err(error) if error.kind() == io::ErrorKind::Interrupted => continue,
                Err(error) => panic!("{error}"),
            };
            for record in records(&buf[..filled]) {
                if let Record::Packet(packet) = record.unwrap() {
                    assert_eq!(packet.content, Content::Ethernet);
                    assert!(packet.timestamp_ns > 1_600_000_000_000_000_000);
                    // Ethernet (14) + IPv4 (20) + UDP (8) + 300.
                    if packet.data.len() == 342 {
                        seen.push(packet.data[341]);
                    }
                }
            }
        }
        let mut expected: Vec<u8> = (0..50u8).flat_map(|index| [index, index]).collect();
        expected.sort();
        seen.sort();
        assert_eq!(seen, expected);
        assert_eq!(source.counters().dropped_socket.load(Ordering::Relaxed), 0);
    }
}
