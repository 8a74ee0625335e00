//! Packet capture as a record source: `--source capture:IFACE`, one stream per interface.
//!
//! An AF_PACKET socket with a TPACKET_V3 receive ring: the kernel fills blocks of
//! [`BLOCK_BYTES`] (1 MiB) or more with frames (a virtual interface delivers GSO packets
//! whole, up to 64 KiB and more, so a frame of up to [`SNAPLEN_MAX`] fits a block), hands a
//! block over when it is full or [`BLOCK_TIMEOUT_MS`] old, and the recorder frames each frame
//! into the chunk payload as a record (content Ethernet), kept up to the snap length, then
//! gives the block back. The kernel's drop counter (PACKET_STATISTICS, which resets on every
//! read) is read after each block and whenever the ring is idle; drops become a loss record
//! before the next frame, where they happened. An optional classic BPF program
//! (SO_ATTACH_FILTER) is attached before the socket is bound, so no frame it rejects is
//! ever seen.
//!
//! With [`CaptureOptions::threads`] above 1, each interface gets that many sockets in one
//! PACKET_FANOUT group (by flow hash, so a flow's frames stay in order in one ring), and a
//! thread per fanout member frames records from its rings into staging buffers of a payload's
//! size, handed to the recorder over a bounded queue: the rings are drained in parallel and
//! the recorder's thread only copies whole buffers of records. The counters count a record
//! when it reaches the recorder, so what is counted is what is recorded. With one thread
//! (the default where there are few cores) the recorder frames straight from the ring.
//!
//! Deliberately absent: filter compilation from an expression (no well-kept pure-Rust
//! compiler exists; `tcpdump -ddd EXPR` prints the program [`super::parse_bpf_program`] reads).

use super::bpf::BpfInstruction;
use super::NetCounters;
use crate::layout::{
    encode_loss, encode_packet_header, frame_span, packet_header, packet_parts, record_bytes,
    Content, Loss, LossCause, Packet, LOSS_DATA_BYTES, RECORD_HEADER_BYTES,
};
use crate::source::Source;
use std::collections::VecDeque;
use std::io;
use std::os::fd::{AsRawFd, OwnedFd};
use std::sync::atomic::{fence, AtomicBool, Ordering};
use std::sync::mpsc::{Receiver, RecvTimeoutError, SyncSender, TryRecvError, TrySendError};
use std::sync::Arc;
use std::time::Duration;

/// Bytes of a ring block (the least), and blocks per ring: 256 MiB of ring per socket
/// absorbs the input while the drives or the CPU are busy (200 ms at 10 Gbit/s; with 64 MiB
/// a capture at 10 Gbit/s on a busy 2-core machine lost a third more, bench/net).
pub const BLOCK_BYTES: u32 = 1 << 20;
pub const BLOCK_COUNT: u32 = 256;
/// A block is handed over at the latest this long after its first frame.
pub const BLOCK_TIMEOUT_MS: u32 = 10;
/// The longest frame kept whole (a block holds one with its headers).
pub const SNAPLEN_MAX: u32 = 256 << 10;
/// Fanout members (threads) per interface, at most.
pub const CAPTURE_THREADS_MAX: usize = 16;
/// Staging buffers per capture thread, filled or waiting for the recorder.
const STAGING_BUFFERS: usize = 8;

// linux/if_packet.h and linux/socket.h.
const SOL_PACKET: libc::c_int = 263;
const PACKET_RX_RING: libc::c_int = 5;
const PACKET_STATISTICS: libc::c_int = 6;
const PACKET_VERSION: libc::c_int = 10;
const PACKET_FANOUT: libc::c_int = 18;
const PACKET_FANOUT_HASH: u32 = 0;
const PACKET_FANOUT_FLAG_DEFRAG: u32 = 0x8000;
const TPACKET_V3: libc::c_int = 2;
const TP_STATUS_KERNEL: u32 = 0;
const TP_STATUS_USER: u32 = 1;
/// A frame's VLAN tag, taken off by the kernel (or the driver), is in its header.
const TP_STATUS_VLAN_VALID: u32 = 1 << 4;
/// ... with the tag's protocol identifier (else it is 802.1Q's).
const TP_STATUS_VLAN_TPID_VALID: u32 = 1 << 6;
const ETH_P_8021Q: u16 = 0x8100;
/// Bytes of struct tpacket3_hdr with the struct sockaddr_ll after it: a frame's data begins
/// no earlier (TPACKET3_HDRLEN).
const TPACKET3_HDRLEN: usize = 48 + 20;
const ETH_P_ALL: u16 = 0x0003;

/// How a capture is set up.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CaptureOptions {
    /// Sockets in a fanout group per interface, each drained by a thread of its own; 1: one
    /// socket per interface, drained by the recorder's thread.
    pub threads: usize,
    /// Bytes of a frame kept (the rest is counted truncated), at most [`SNAPLEN_MAX`].
    pub snaplen_bytes: u32,
    /// Bytes of a ring block (at least [`BLOCK_BYTES`], a multiple of the page size) and
    /// blocks per ring.
    pub block_bytes: u32,
    pub block_count: u32,
    /// A classic BPF program that frames must pass.
    pub filter: Option<Vec<BpfInstruction>>,
}

impl Default for CaptureOptions {
    fn default() -> Self {
        CaptureOptions {
            threads: 1,
            snaplen_bytes: SNAPLEN_MAX,
            block_bytes: BLOCK_BYTES,
            block_count: BLOCK_COUNT,
            filter: None,
        }
    }
}

/// Capture threads by the cores there are: one per two cores beyond the first two (the
/// recorder's thread, the drives' completions and the kernel's receive path need cores of
/// their own), at least 1, at most 4.
pub fn default_capture_threads() -> usize {
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    (cores.saturating_sub(2) / 2).clamp(1, 4)
}

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

#[repr(C)]
struct SockFprog {
    len: u16,
    filter: *const BpfInstruction,
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
    pub const STATUS: usize = 20;
    pub const MAC: usize = 24;
    pub const VLAN_TCI: usize = 32;
    pub const VLAN_TPID: usize = 36;
}

/// The mapped ring of one socket.
struct Ring {
    base: *mut u8,
    len: usize,
    block_bytes: usize,
    block_count: u32,
}

impl Drop for Ring {
    fn drop(&mut self) {
        // SAFETY: base and len are exactly the mapping made in `map_ring`.
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

/// One capture socket and its ring: an interface's, or one fanout member of it.
struct Member {
    /// The stream: the interface's index in the order given.
    stream: u16,
    ring: Ring,
    /// Declared after the ring: the socket closes after the mapping is gone.
    socket: OwnedFd,
    next_block: u32,
    cursor: Option<Cursor>,
}

// SAFETY: the ring pointer refers to a mapping the member owns; one thread at a time uses it.
unsafe impl Send for Member {}

impl Member {
    fn block(&self, block: u32) -> *mut u8 {
        debug_assert!((block as usize + 1) * self.ring.block_bytes <= self.ring.len);
        // SAFETY: block < block_count, so the offset stays inside the mapping.
        unsafe { self.ring.base.add(block as usize * self.ring.block_bytes) }
    }

    /// Takes the next block the kernel handed over, if any (true also while one is held).
    fn take_block(&mut self) -> bool {
        if self.cursor.is_some() {
            return true;
        }
        let block = self.next_block;
        let descriptor = self.block(block);
        // SAFETY: the descriptor lies in the mapped ring; the kernel writes its status.
        let status =
            unsafe { std::ptr::read_volatile(descriptor.add(block::STATUS).cast::<u32>()) };
        if status & TP_STATUS_USER == 0 {
            return false;
        }
        fence(Ordering::Acquire);
        // SAFETY: the block is ours (TP_STATUS_USER) until we set it back.
        let (count, first) = unsafe {
            (
                std::ptr::read(descriptor.add(block::PACKET_COUNT).cast::<u32>()),
                std::ptr::read(descriptor.add(block::FIRST_PACKET).cast::<u32>()),
            )
        };
        self.cursor = Some(Cursor {
            block,
            packets_left: count,
            offset: first as usize,
        });
        if count == 0 {
            self.give_back();
            return false;
        }
        true
    }

    /// The frame at the cursor (a block must be held) and the offset of the next.
    fn frame(&self) -> (Packet<'_>, usize) {
        let cursor = self.cursor.expect("a block is held");
        // SAFETY: the frame lies in a block the kernel handed over (TP_STATUS_USER), at an
        // offset the kernel gave; its data lies `mac` bytes in, `snaplen` long.
        unsafe {
            let header = self.block(cursor.block).add(cursor.offset);
            tag_in_place(header);
            let read = |at: usize| std::ptr::read_unaligned(header.add(at).cast::<u32>());
            let mac = std::ptr::read_unaligned(header.add(frame::MAC).cast::<u16>());
            let snaplen = read(frame::SNAPLEN) as usize;
            let data = std::slice::from_raw_parts(header.add(mac as usize), snaplen);
            let packet = Packet {
                stream: self.stream,
                content: Content::Ethernet,
                timestamp_ns: read(frame::SEC) as u64 * 1_000_000_000 + read(frame::NSEC) as u64,
                original_len: read(frame::LEN),
                data,
                peer: None,
                local: None,
                end: false,
            };
            (packet, read(frame::NEXT_OFFSET) as usize)
        }
    }

    /// Moves past the frame just framed; true when that ended the block (given back).
    fn advance(&mut self, next_offset: usize) -> bool {
        let Some(cursor) = self.cursor.as_mut() else {
            return false;
        };
        cursor.packets_left -= 1;
        cursor.offset += next_offset;
        if cursor.packets_left > 0 {
            return false;
        }
        self.give_back();
        true
    }

    fn give_back(&mut self) {
        let Some(cursor) = self.cursor.take() else {
            return;
        };
        let descriptor = self.block(cursor.block);
        fence(Ordering::Release);
        // SAFETY: the block is ours until this store gives it back to the kernel.
        unsafe {
            std::ptr::write_volatile(
                descriptor.add(block::STATUS).cast::<u32>(),
                TP_STATUS_KERNEL,
            )
        };
        self.next_block = (cursor.block + 1) % self.ring.block_count;
    }

    /// The kernel's drop counter since the last read (PACKET_STATISTICS resets on read),
    /// as a loss record to frame, if it rose.
    fn drops(&self, timestamp_ns: u64) -> Option<Loss> {
        let mut stats = TpacketStatsV3::default();
        let mut len = std::mem::size_of::<TpacketStatsV3>() as libc::socklen_t;
        // SAFETY: getsockopt writes at most `len` bytes into `stats`.
        let result = unsafe {
            libc::getsockopt(
                self.socket.as_raw_fd(),
                SOL_PACKET,
                PACKET_STATISTICS,
                (&mut stats as *mut TpacketStatsV3).cast(),
                &mut len,
            )
        };
        (result == 0 && stats.drops > 0).then_some(Loss {
            stream: self.stream,
            timestamp_ns,
            cause: LossCause::CaptureDrop,
            count: stats.drops as u64,
            bytes: 0,
        })
    }
}

/// Puts a frame's VLAN tag back where it was on the wire, when the kernel took it off into
/// the frame's header (as it does on most interfaces): the 12 bytes of addresses move 4
/// bytes back into the room before the frame, the tag goes after them, and the header is
/// made to say so (its data, lengths and status), so that a second look at the frame finds
/// it done. Without it every tagged frame was recorded untagged, and its flow under no
/// VLAN. Where the kernel left less room than 4 bytes (it leaves 14), the frame stays as it
/// is.
///
/// # Safety
/// `header` is a frame header in a block that is the caller's (TP_STATUS_USER).
unsafe fn tag_in_place(header: *mut u8) {
    let read32 = |at: usize| std::ptr::read_unaligned(header.add(at).cast::<u32>());
    let status = read32(frame::STATUS);
    let mac = std::ptr::read_unaligned(header.add(frame::MAC).cast::<u16>()) as usize;
    let snaplen = read32(frame::SNAPLEN) as usize;
    if status & TP_STATUS_VLAN_VALID == 0 || mac < TPACKET3_HDRLEN + 4 || snaplen < 12 {
        return;
    }
    let tpid = match status & TP_STATUS_VLAN_TPID_VALID {
        0 => ETH_P_8021Q,
        _ => std::ptr::read_unaligned(header.add(frame::VLAN_TPID).cast::<u16>()),
    };
    let tci = read32(frame::VLAN_TCI) as u16;
    let data = header.add(mac);
    std::ptr::copy(data, data.sub(4), 12);
    std::ptr::copy_nonoverlapping(tpid.to_be_bytes().as_ptr(), data.add(8), 2);
    std::ptr::copy_nonoverlapping(tci.to_be_bytes().as_ptr(), data.add(10), 2);
    let write32 = |at: usize, value: u32| {
        std::ptr::write_unaligned(header.add(at).cast::<u32>(), value);
    };
    write32(frame::SNAPLEN, snaplen as u32 + 4);
    write32(frame::LEN, read32(frame::LEN) + 4);
    write32(frame::STATUS, status & !TP_STATUS_VLAN_VALID);
    std::ptr::write_unaligned(header.add(frame::MAC).cast::<u16>(), (mac - 4) as u16);
}

/// Frames records from a set of members into payloads: the logic the recorder's thread
/// runs with one capture thread, and each capture thread runs into its staging buffers.
struct Framer {
    members: Vec<Member>,
    /// Losses to frame before the next frame.
    losses: VecDeque<Loss>,
    next_member: usize,
    snaplen_bytes: usize,
    last_timestamp_ns: u64,
    /// The member whose frame spans payloads, and the bytes of it framed so far (direct
    /// mode).
    spanning: Option<(usize, usize)>,
}

/// What one framed record was, for the counters.
#[derive(Debug, Clone, Copy)]
enum Framed {
    Frame { original_len: u32, truncated: bool },
    Loss { count: u64 },
}

impl Framer {
    /// A member with a block held or handed over, from the next in turn.
    fn ready_member(&mut self) -> Option<usize> {
        for turn in 0..self.members.len() {
            let index = (self.next_member + turn) % self.members.len();
            if self.members[index].take_block() {
                self.next_member = index;
                return Some(index);
            }
        }
        None
    }

    /// Whether something waits to be framed.
    fn ready(&mut self) -> bool {
        self.spanning.is_some() || !self.losses.is_empty() || self.ready_member().is_some()
    }

    /// Reads every member's drop counter (when idle: drops at the end of a burst are not
    /// followed by another block).
    fn note_idle_drops(&mut self) {
        let timestamp_ns = self.last_timestamp_ns.max(super::udp::realtime_ns());
        for member in &self.members {
            self.losses.extend(member.drops(timestamp_ns));
        }
    }

    /// Frames the next loss or frame into `out` if it fits (in an empty payload of
    /// `capacity` bytes a frame too large is cut to fit); its length and what it was, or
    /// None.
    fn place(&mut self, out: &mut [u8], capacity: usize) -> Option<(usize, Framed)> {
        if let Some(loss) = self.losses.front() {
            if out.len() < record_bytes(LOSS_DATA_BYTES) {
                return None;
            }
            let framed = Framed::Loss { count: loss.count };
            let len = encode_loss(out, loss);
            self.losses.pop_front();
            return Some((len, framed));
        }
        let index = self.ready_member()?;
        let member = &self.members[index];
        let (packet, next_offset) = member.frame();
        let wanted = packet.data.len().min(self.snaplen_bytes);
        let empty_payload = out.len() >= capacity;
        let room = out.len().saturating_sub(RECORD_HEADER_BYTES) / 8 * 8;
        let kept = if record_bytes(wanted) <= out.len() {
            wanted
        } else if empty_payload && room > 0 {
            room
        } else {
            return None;
        };
        let packet = Packet {
            data: &packet.data[..kept],
            ..packet
        };
        out[RECORD_HEADER_BYTES..RECORD_HEADER_BYTES + kept].copy_from_slice(packet.data);
        let len = encode_packet_header(out, &packet);
        let framed = Framed::Frame {
            original_len: packet.original_len,
            truncated: packet.is_truncated(),
        };
        self.finish_frame(index, packet.timestamp_ns, next_offset);
        Some((len, framed))
    }

    /// As [`Framer::place`], into a payload of the recording: a frame that does not fit in
    /// the room left spans into the next payload, whose first record its rest is. Its
    /// length, and what was framed once a record is whole.
    fn place_spanning(&mut self, out: &mut [u8]) -> Option<(usize, Option<Framed>)> {
        let (index, placed) = match self.spanning {
            Some(spanning) => spanning,
            None if !self.losses.is_empty() => {
                let (len, framed) = self.place(out, usize::MAX)?;
                return Some((len, Some(framed)));
            }
            None => (self.ready_member()?, 0),
        };
        let (packet, next_offset) = self.members[index].frame();
        let kept = packet.data.len().min(self.snaplen_bytes);
        let packet = Packet {
            data: &packet.data[..kept],
            ..packet
        };
        let header = packet_header(&packet, kept);
        let spanned = frame_span(out, &header, packet.data, placed)?;
        if spanned.part.continues() {
            self.spanning = Some((index, placed + spanned.data_bytes));
            return Some((spanned.record_bytes, None));
        }
        self.spanning = None;
        let framed = Framed::Frame {
            original_len: packet.original_len,
            truncated: packet.is_truncated(),
        };
        self.finish_frame(index, packet.timestamp_ns, next_offset);
        Some((spanned.record_bytes, Some(framed)))
    }

    /// After a frame is framed whole: moves its member past it, and notes the drops at the
    /// end of a block.
    fn finish_frame(&mut self, index: usize, timestamp_ns: u64, next_offset: usize) {
        self.last_timestamp_ns = timestamp_ns;
        if self.members[index].advance(next_offset) {
            let member = &self.members[index];
            self.losses.extend(member.drops(timestamp_ns));
            self.next_member = (index + 1) % self.members.len();
        }
    }

    fn poll(&mut self, timeout: Duration) -> io::Result<bool> {
        if self.ready() {
            return Ok(true);
        }
        // POLLIN: the kernel handed a block over (or a socket error is there to report).
        let polled =
            super::poll_readable(self.members.iter().map(|m| m.socket.as_raw_fd()), timeout)?;
        if polled && self.ready() {
            return Ok(true);
        }
        self.note_idle_drops();
        Ok(!self.losses.is_empty())
    }
}

fn count(counters: &NetCounters, framed: Framed) {
    match framed {
        Framed::Frame {
            original_len,
            truncated,
        } => {
            counters.datagrams.fetch_add(1, Ordering::Relaxed);
            counters
                .bytes
                .fetch_add(original_len as u64, Ordering::Relaxed);
            if truncated {
                counters.truncated.fetch_add(1, Ordering::Relaxed);
            }
        }
        Framed::Loss { count } => {
            counters.dropped_socket.fetch_add(count, Ordering::Relaxed);
        }
    }
}

/// A buffer of whole records a capture thread framed, with where each ends and what it
/// was.
struct Staged {
    data: Vec<u8>,
    records: Vec<(usize, Framed)>,
}

/// The capture threads and the queue their buffers come over.
struct Workers {
    filled: Receiver<Staged>,
    empty: SyncSender<Staged>,
    stop: Arc<AtomicBool>,
    threads: Vec<std::thread::JoinHandle<()>>,
    /// The buffer being copied out, the index of its next record, where that starts, and
    /// the bytes of its data already framed (it spans payloads).
    current: Option<(Staged, usize, usize, usize)>,
}

impl Drop for Workers {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        for thread in self.threads.drain(..) {
            let _ = thread.join();
        }
    }
}

enum Mode {
    /// The recorder's thread frames straight from the rings.
    Direct(Framer),
    /// Capture threads frame into staging buffers; set up at the first read, when the
    /// payload size is known.
    Threads {
        framers: Vec<Framer>,
        workers: Option<Workers>,
    },
}

pub struct CaptureSource {
    names: Vec<String>,
    mode: Mode,
    payload_capacity_bytes: usize,
    counters: Arc<NetCounters>,
}

impl CaptureSource {
    /// Opens a capture ring on each interface (root or CAP_NET_RAW), with the defaults.
    pub fn open(names: &[String]) -> io::Result<CaptureSource> {
        CaptureSource::open_with(names, &CaptureOptions::default())
    }

    /// Opens capture rings on each interface as `options` say.
    pub fn open_with(names: &[String], options: &CaptureOptions) -> io::Result<CaptureSource> {
        let invalid = |what: String| io::Error::new(io::ErrorKind::InvalidInput, what);
        if !(1..=CAPTURE_THREADS_MAX).contains(&options.threads) {
            return Err(invalid(format!(
                "capture threads: 1 to {CAPTURE_THREADS_MAX}, not {}",
                options.threads
            )));
        }
        if options.snaplen_bytes == 0 || options.snaplen_bytes > SNAPLEN_MAX {
            return Err(invalid(format!(
                "snap length: 1 to {SNAPLEN_MAX} bytes, not {}",
                options.snaplen_bytes
            )));
        }
        if options.block_bytes < BLOCK_BYTES
            || !options.block_bytes.is_power_of_two()
            || options.block_count == 0
        {
            return Err(invalid(format!(
                "ring blocks: a power of two of at least {BLOCK_BYTES} bytes, not {}",
                options.block_bytes
            )));
        }
        // A fanout group id per source and interface, unique among this process's sources.
        static GROUPS: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
        let mut framers: Vec<Framer> = (0..options.threads)
            .map(|_| Framer {
                members: Vec::new(),
                losses: VecDeque::new(),
                next_member: 0,
                snaplen_bytes: options.snaplen_bytes as usize,
                last_timestamp_ns: 0,
                spanning: None,
            })
            .collect();
        for (stream, name) in names.iter().enumerate() {
            let group = (options.threads > 1).then(|| {
                let serial = GROUPS.fetch_add(1, Ordering::Relaxed);
                ((std::process::id() as u32)
                    .wrapping_mul(31)
                    .wrapping_add(serial)
                    & 0xffff) as u16
            });
            for framer in framers.iter_mut() {
                framer
                    .members
                    .push(open_socket(name, stream as u16, options, group)?);
            }
        }
        if options.threads > 1 {
            for member in framers.iter().flat_map(|framer| &framer.members) {
                admit(member, options).map_err(|error| {
                    let name = &names[member.stream as usize];
                    io::Error::new(error.kind(), format!("capture:{name}: {error}"))
                })?;
            }
        }
        let mode = if options.threads == 1 {
            Mode::Direct(framers.pop().expect("one framer"))
        } else {
            Mode::Threads {
                framers,
                workers: None,
            }
        };
        Ok(CaptureSource {
            names: names.to_vec(),
            mode,
            payload_capacity_bytes: usize::MAX,
            counters: Arc::new(NetCounters::default()),
        })
    }

    pub fn counters(&self) -> Arc<NetCounters> {
        Arc::clone(&self.counters)
    }

    /// Starts the capture threads (once), each with staging buffers of a payload's size, or
    /// of the largest record where that is more (records span payloads, not buffers).
    fn workers(&mut self) -> &mut Workers {
        let capacity = self
            .payload_capacity_bytes
            .min(64 << 20)
            .max(record_bytes(SNAPLEN_MAX as usize));
        let Mode::Threads { framers, workers } = &mut self.mode else {
            unreachable!("threads mode")
        };
        workers.get_or_insert_with(|| {
            let stop = Arc::new(AtomicBool::new(false));
            let pool = STAGING_BUFFERS * framers.len();
            let (filled_tx, filled) = std::sync::mpsc::sync_channel::<Staged>(pool);
            let (empty, empty_rx) = std::sync::mpsc::sync_channel::<Staged>(pool);
            let empty_rx = Arc::new(std::sync::Mutex::new(empty_rx));
            for _ in 0..pool {
                let _ = empty.send(Staged {
                    data: vec![0u8; capacity],
                    records: Vec::new(),
                });
            }
            let threads = framers
                .drain(..)
                .enumerate()
                .map(|(index, framer)| {
                    let stop = Arc::clone(&stop);
                    let filled = filled_tx.clone();
                    let empty = Arc::clone(&empty_rx);
                    std::thread::Builder::new()
                        .name(format!("capture-{index}"))
                        .spawn(move || capture_thread(framer, capacity, &stop, &filled, &empty))
                        .expect("starting a capture thread")
                })
                .collect();
            Workers {
                filled,
                empty,
                stop,
                threads,
                current: None,
            }
        })
    }
}

/// A capture thread: frames records from its members into staging buffers; a buffer goes
/// to the recorder when the next record does not fit or the rings have nothing more now.
fn capture_thread(
    mut framer: Framer,
    capacity: usize,
    stop: &AtomicBool,
    filled: &SyncSender<Staged>,
    empty: &std::sync::Mutex<Receiver<Staged>>,
) {
    const WAIT: Duration = Duration::from_millis(20);
    let mut staged: Option<Staged> = None;
    while !stop.load(Ordering::Relaxed) {
        if staged.is_none() {
            let next = match empty.lock() {
                Ok(rx) => rx.recv_timeout(WAIT),
                Err(_) => break,
            };
            match next {
                Ok(mut buffer) => {
                    buffer.records.clear();
                    staged = Some(buffer);
                }
                Err(RecvTimeoutError::Timeout) => continue,
                Err(RecvTimeoutError::Disconnected) => break,
            }
        }
        match framer.poll(WAIT) {
            Ok(true) => {}
            Ok(false) => continue,
            Err(_) => break,
        }
        let buffer = staged.as_mut().expect("a buffer");
        let mut used = 0;
        while let Some((len, framed)) = framer.place(&mut buffer.data[used..], capacity) {
            used += len;
            buffer.records.push((used, framed));
        }
        if !buffer.records.is_empty() {
            // The queue is full while the recorder is behind: wait, but not past a stop
            // (the recorder may be gone; a blocking send would never return).
            let mut buffer = staged.take().expect("a buffer");
            loop {
                match filled.try_send(buffer) {
                    Ok(()) => break,
                    Err(TrySendError::Full(back)) if !stop.load(Ordering::Relaxed) => {
                        buffer = back;
                        std::thread::sleep(Duration::from_micros(100));
                    }
                    Err(_) => return,
                }
            }
        }
    }
}

impl CaptureSource {
    /// [`Source::read_at`], but for noting where the read ended.
    fn read_records(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let counters = Arc::clone(&self.counters);
        if let Mode::Direct(framer) = &mut self.mode {
            let mut written = 0;
            while let Some((len, framed)) = framer.place_spanning(&mut buf[written..]) {
                if let Some(framed) = framed {
                    count(&counters, framed);
                }
                written += len;
            }
            if written == 0 && !framer.ready() {
                return Err(io::ErrorKind::Interrupted.into());
            }
            return Ok(written);
        }
        let workers = self.workers();
        let mut written = 0;
        loop {
            if workers.current.is_none() {
                match workers.filled.try_recv() {
                    Ok(staged) => workers.current = Some((staged, 0, 0, 0)),
                    Err(TryRecvError::Empty) => break,
                    Err(TryRecvError::Disconnected) => {
                        return Err(io::Error::other("a capture thread ended"))
                    }
                }
            }
            let current = workers.current.as_mut().expect("a buffer");
            let (full, placed) = copy_staged(current, &mut buf[written..], &counters);
            written += placed;
            if full {
                break;
            }
            let (staged, _, _, _) = workers.current.take().expect("a buffer");
            let _ = workers.empty.send(staged);
        }
        if written == 0 && workers.current.is_none() {
            return Err(io::ErrorKind::Interrupted.into());
        }
        Ok(written)
    }
}

impl Drop for CaptureSource {
    /// Frames taken from the rings and not framed into a payload when the recording ends
    /// (a frame half framed, records in staging buffers) are counted: lost, never in
    /// silence.
    fn drop(&mut self) {
        let unframed = match &mut self.mode {
            Mode::Direct(framer) => u64::from(framer.spanning.is_some()),
            Mode::Threads {
                workers: Some(workers),
                ..
            } => {
                // The threads stop first, so that no buffer comes after the count.
                workers.stop.store(true, Ordering::Relaxed);
                for thread in workers.threads.drain(..) {
                    let _ = thread.join();
                }
                let mut left = workers.current.take().map_or(0, |(staged, next, _, _)| {
                    staged.records[next..]
                        .iter()
                        .filter(|(_, framed)| matches!(framed, Framed::Frame { .. }))
                        .count()
                });
                while let Ok(staged) = workers.filled.try_recv() {
                    left += staged
                        .records
                        .iter()
                        .filter(|(_, framed)| matches!(framed, Framed::Frame { .. }))
                        .count();
                }
                left as u64
            }
            Mode::Threads { workers: None, .. } => 0,
        };
        self.counters
            .unframed
            .fetch_add(unframed, Ordering::Relaxed);
    }
}

impl Source for CaptureSource {
    fn read_at(&mut self, offset_bytes: u64, buf: &mut [u8]) -> io::Result<usize> {
        let read = self.read_records(buf);
        self.counters.note_read(offset_bytes, read)
    }

    fn wait_readable(&mut self, timeout: Duration) -> io::Result<bool> {
        if let Mode::Direct(framer) = &mut self.mode {
            return framer.poll(timeout);
        }
        let workers = self.workers();
        if workers.current.is_some() {
            return Ok(true);
        }
        match workers.filled.recv_timeout(timeout) {
            Ok(staged) => {
                workers.current = Some((staged, 0, 0, 0));
                Ok(true)
            }
            Err(RecvTimeoutError::Timeout) => Ok(false),
            Err(RecvTimeoutError::Disconnected) => Err(io::Error::other("a capture thread ended")),
        }
    }

    fn packs_records(&self) -> bool {
        true
    }

    fn set_payload_capacity(&mut self, bytes: usize) {
        self.payload_capacity_bytes = bytes;
    }
}

/// Copies the records of a staging buffer into `out` from its next one: whole where they
/// fit, the first that does not as much of it as fills `out` (its rest goes first into the
/// next payload). Returns whether `out` is full (records are left), and the bytes written.
fn copy_staged(
    current: &mut (Staged, usize, usize, usize),
    out: &mut [u8],
    counters: &NetCounters,
) -> (bool, usize) {
    let (staged, next, start, placed) = current;
    let mut written = 0;
    if *placed == 0 {
        let mut end = *start;
        while *next < staged.records.len() && staged.records[*next].0 - *start <= out.len() {
            end = staged.records[*next].0;
            count(counters, staged.records[*next].1);
            *next += 1;
        }
        written = end - *start;
        out[..written].copy_from_slice(&staged.data[*start..end]);
        *start = end;
    }
    if *next < staged.records.len() {
        let (end, framed) = staged.records[*next];
        // A loss that does not fit waits; a packet spans.
        let Some((header, data)) = packet_parts(&staged.data[*start..end]) else {
            return (true, written);
        };
        let Some(spanned) = frame_span(&mut out[written..], header, data, *placed) else {
            return (true, written);
        };
        written += spanned.record_bytes;
        if spanned.part.continues() {
            *placed += spanned.data_bytes;
            return (true, written);
        }
        *placed = 0;
        count(counters, framed);
        *next += 1;
        *start = end;
        return (*next < staged.records.len(), written);
    }
    (false, written)
}

/// Opens one capture socket on interface `name`: its filter attached and its ring mapped
/// before it is bound, so that every frame it queues has passed the filter, then joined to
/// the fanout group that spreads the interface's flows over the capture threads.
///
/// A socket of a group is bound before it may join (the kernel's rule), and a frame that
/// comes between reaches it and the group both: it would be recorded twice. So each socket
/// of a group takes no frame until every thread's socket has joined ([`admit`] lets them in).
fn open_socket(
    name: &str,
    stream: u16,
    options: &CaptureOptions,
    fanout_group: Option<u16>,
) -> io::Result<Member> {
    let named = |error: io::Error| io::Error::new(error.kind(), format!("capture:{name}: {error}"));
    let (socket, ifindex) = super::packet_socket(name, named)?;
    let fd = socket.as_raw_fd();
    match (fanout_group, &options.filter) {
        (Some(_), _) => attach_filter(fd, &TAKE_NOTHING).map_err(named)?,
        (None, Some(program)) => attach_filter(fd, program).map_err(named)?,
        (None, None) => {}
    }
    let ring = map_ring(fd, options).map_err(named)?;
    super::bind_packet_socket(&socket, ifindex, ETH_P_ALL.to_be()).map_err(named)?;
    if let Some(group) = fanout_group {
        // By flow hash (a flow's frames stay in one ring, in order), IP fragments
        // reassembled first so that they hash alike.
        let argument: u32 =
            u32::from(group) | ((PACKET_FANOUT_HASH | PACKET_FANOUT_FLAG_DEFRAG) << 16);
        set_packet_option(fd, PACKET_FANOUT, &argument).map_err(named)?;
    }
    Ok(Member {
        stream,
        ring,
        socket,
        next_block: 0,
        cursor: None,
    })
}

/// A classic BPF program that passes no frame (`ret #0`).
const TAKE_NOTHING: [BpfInstruction; 1] = [BpfInstruction {
    code: 0x06,
    jt: 0,
    jf: 0,
    k: 0,
}];

/// Lets frames into a socket of a fanout group, once every socket of the group has joined
/// (see [`open_socket`]): its filter, or none.
fn admit(member: &Member, options: &CaptureOptions) -> io::Result<()> {
    let fd = member.socket.as_raw_fd();
    match &options.filter {
        // SO_ATTACH_FILTER replaces the program in place.
        Some(program) => attach_filter(fd, program),
        None => super::set_socket_option(fd, libc::SOL_SOCKET, libc::SO_DETACH_FILTER, &0i32),
    }
}

/// Attaches the classic BPF program every frame must pass to be queued.
fn attach_filter(fd: i32, program: &[BpfInstruction]) -> io::Result<()> {
    let fprog = SockFprog {
        len: program.len() as u16,
        filter: program.as_ptr(),
    };
    // SO_ATTACH_FILTER copies the program the sock_fprog points to.
    super::set_socket_option(fd, libc::SOL_SOCKET, libc::SO_ATTACH_FILTER, &fprog).map_err(
        |error| {
            io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("the kernel refused the BPF program: {error}"),
            )
        },
    )
}

/// Asks for a TPACKET_V3 receive ring of the blocks `options` names and maps it.
fn map_ring(fd: i32, options: &CaptureOptions) -> io::Result<Ring> {
    set_packet_option(fd, PACKET_VERSION, &TPACKET_V3)?;
    let request = TpacketReq3 {
        block_size: options.block_bytes,
        block_nr: options.block_count,
        frame_size: 2048,
        frame_nr: options.block_bytes / 2048 * options.block_count,
        retire_blk_tov: BLOCK_TIMEOUT_MS,
        sizeof_priv: 0,
        feature_req_word: 0,
    };
    set_packet_option(fd, PACKET_RX_RING, &request)?;
    let len = options.block_bytes as usize * options.block_count as usize;
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
        return Err(io::Error::last_os_error());
    }
    Ok(Ring {
        base: base.cast(),
        len,
        block_bytes: options.block_bytes as usize,
        block_count: options.block_count,
    })
}

fn set_packet_option<T>(fd: i32, option: libc::c_int, value: &T) -> io::Result<()> {
    super::set_socket_option(fd, SOL_PACKET, option, value)
}

impl std::fmt::Debug for CaptureSource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CaptureSource")
            .field("interfaces", &self.names)
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_tag_the_kernel_took_off_is_put_back_once_in_front_of_the_ethertype() {
        let mut block = vec![0u8; 256];
        let mac = 82usize;
        let frame_bytes: Vec<u8> = (0..60u8).collect();
        block[mac..mac + 60].copy_from_slice(&frame_bytes);
        let put32 = |block: &mut Vec<u8>, at: usize, value: u32| {
            block[at..at + 4].copy_from_slice(&value.to_ne_bytes());
        };
        put32(&mut block, frame::SNAPLEN, 60);
        put32(&mut block, frame::LEN, 1000);
        put32(
            &mut block,
            frame::STATUS,
            TP_STATUS_USER | TP_STATUS_VLAN_VALID,
        );
        block[frame::MAC..frame::MAC + 2].copy_from_slice(&(mac as u16).to_ne_bytes());
        put32(&mut block, frame::VLAN_TCI, 0x2065);
        let header = block.as_mut_ptr();
        for _ in 0..2 {
            // SAFETY: a header in a buffer of our own, as the kernel lays one out.
            unsafe { tag_in_place(header) };
        }
        let read32 = |at: usize| u32::from_ne_bytes(block[at..at + 4].try_into().unwrap());
        assert_eq!(read32(frame::SNAPLEN), 64);
        assert_eq!(read32(frame::LEN), 1004);
        assert_eq!(
            read32(frame::STATUS),
            TP_STATUS_USER,
            "done once: the flag is cleared"
        );
        let start = u16::from_ne_bytes([block[frame::MAC], block[frame::MAC + 1]]) as usize;
        assert_eq!(start, mac - 4);
        let data = &block[start..start + 64];
        assert_eq!(&data[..12], &frame_bytes[..12], "the addresses");
        assert_eq!(&data[12..16], &[0x81, 0x00, 0x20, 0x65], "the tag");
        assert_eq!(
            &data[16..],
            &frame_bytes[12..],
            "the ethertype and the rest"
        );
    }
    use crate::layout::{records, Record};
    use crate::net::parse_bpf_program;
    use std::net::UdpSocket;

    /// Rings of 8 MiB: the tests run side by side, and what they send fits.
    fn small_ring() -> CaptureOptions {
        CaptureOptions {
            block_count: 8,
            ..CaptureOptions::default()
        }
    }

    fn capture_all(source: &mut CaptureSource) -> Vec<(Vec<u8>, u32)> {
        capture_in_payloads(source, 1 << 20)
    }

    /// What the source captures, read as a recording's payloads of `payload_bytes` each
    /// (each filled until the source says it is full or has nothing) and put back together.
    fn capture_in_payloads(
        source: &mut CaptureSource,
        payload_bytes: usize,
    ) -> Vec<(Vec<u8>, u32)> {
        let payloads =
            super::super::read_payloads(source, payload_bytes, Duration::from_millis(300));
        let mut seen = Vec::new();
        crate::layout::for_each_record(&payloads, |record| match record.unwrap() {
            Record::Packet(packet) => seen.push((packet.data.to_vec(), packet.original_len)),
            Record::Loss(loss) => panic!("no loss expected: {loss:?}"),
        });
        seen
    }

    /// Frames larger than a payload (20 042 bytes in payloads of 8 KiB) span payloads and
    /// come back whole, framed by the recorder's thread and by capture threads alike.
    #[test]
    fn frames_larger_than_a_payload_span_payloads_and_come_back_whole() {
        if !crate::net::udp::tests::private_loopback() {
            return;
        }
        for threads in [1, 2] {
            let options = CaptureOptions {
                threads,
                ..small_ring()
            };
            let mut source = CaptureSource::open_with(&["lo".to_string()], &options).unwrap();
            const COUNT: usize = 40;
            send_on_loopback(COUNT, 20_000, 2);
            let seen = capture_in_payloads(&mut source, 8 << 10);
            let mut last_bytes: Vec<u8> = seen
                .iter()
                .filter(|(data, original_len)| data.len() == 20_042 && *original_len == 20_042)
                .map(|(data, _)| data[20_041])
                .collect();
            last_bytes.sort();
            let mut expected: Vec<u8> = (0..COUNT).flat_map(|i| [i as u8, i as u8]).collect();
            expected.sort();
            assert_eq!(last_bytes, expected, "{threads} threads");
            let counters = source.counters();
            assert_eq!(counters.truncated.load(Ordering::Relaxed), 0);
            assert_eq!(
                counters.datagrams.load(Ordering::Relaxed),
                seen.len() as u64
            );
        }
    }

    /// Sends `count` datagrams of `len` bytes from `senders` sockets (flows) on the
    /// loopback; each datagram's last byte is its index.
    fn send_on_loopback(count: usize, len: usize, senders: usize) {
        let receiver = UdpSocket::bind("127.0.0.1:0").unwrap();
        let sockets: Vec<UdpSocket> = (0..senders)
            .map(|_| UdpSocket::bind("127.0.0.1:0").unwrap())
            .collect();
        for index in 0..count {
            let mut data = vec![0u8; len];
            data[len - 1] = index as u8;
            sockets[index % senders]
                .send_to(&data, receiver.local_addr().unwrap())
                .unwrap();
        }
    }

    /// Only frames longer than 1000 bytes pass the program: the short ones are never seen
    /// (and not counted as drops).
    #[test]
    fn a_bpf_filter_keeps_only_the_frames_it_passes() {
        if !crate::net::udp::tests::private_loopback() {
            return;
        }
        let options = CaptureOptions {
            filter: Some(
                parse_bpf_program("4\n128 0 0 0\n37 0 1 1000\n6 0 0 262144\n6 0 0 0").unwrap(),
            ),
            ..small_ring()
        };
        let mut source = CaptureSource::open_with(&["lo".to_string()], &options).unwrap();
        send_on_loopback(20, 300, 1);
        send_on_loopback(30, 1200, 1);
        let seen = capture_all(&mut source);
        assert_eq!(seen.len(), 2 * 30, "each long frame twice on the loopback");
        assert!(seen.iter().all(|(data, _)| data.len() == 42 + 1200));
        assert_eq!(source.counters().dropped_socket.load(Ordering::Relaxed), 0);
    }

    #[test]
    fn frames_beyond_the_snap_length_are_cut_and_counted() {
        if !crate::net::udp::tests::private_loopback() {
            return;
        }
        let options = CaptureOptions {
            snaplen_bytes: 100,
            ..small_ring()
        };
        let mut source = CaptureSource::open_with(&["lo".to_string()], &options).unwrap();
        send_on_loopback(10, 500, 1);
        let seen = capture_all(&mut source);
        assert_eq!(seen.len(), 20);
        assert!(seen
            .iter()
            .all(|(data, len)| data.len() == 100 && *len == 542));
        assert_eq!(source.counters().truncated.load(Ordering::Relaxed), 20);
    }

    /// Three capture threads in a fanout group: every frame is recorded once, from
    /// whichever ring its flow hashed to.
    #[test]
    fn a_fanout_over_threads_records_every_frame_once() {
        if !crate::net::udp::tests::private_loopback() {
            return;
        }
        let options = CaptureOptions {
            threads: 3,
            ..small_ring()
        };
        let mut source = CaptureSource::open_with(&["lo".to_string()], &options).unwrap();
        const COUNT: usize = 3000;
        send_on_loopback(COUNT, 400, 8);
        let seen = capture_all(&mut source);
        let mut last_bytes: Vec<u8> = seen
            .iter()
            .filter(|(data, _)| data.len() == 442)
            .map(|(data, _)| data[441])
            .collect();
        last_bytes.sort();
        let mut expected: Vec<u8> = (0..COUNT).flat_map(|i| [i as u8, i as u8]).collect();
        expected.sort();
        assert_eq!(last_bytes, expected);
        let counters = source.counters();
        assert_eq!(counters.dropped_socket.load(Ordering::Relaxed), 0);
        assert_eq!(
            counters.datagrams.load(Ordering::Relaxed),
            seen.len() as u64
        );
        assert!(CaptureSource::open_with(
            &["lo".to_string()],
            &CaptureOptions {
                threads: 0,
                ..small_ring()
            }
        )
        .is_err());
        assert!(CaptureSource::open_with(
            &["lo".to_string()],
            &CaptureOptions {
                snaplen_bytes: SNAPLEN_MAX + 1,
                ..small_ring()
            }
        )
        .is_err());
    }

    /// Capture threads that join their fanout group while frames arrive: a frame that came
    /// while one thread's socket was bound and not yet in the group reached that socket and
    /// the group both, and was recorded twice. Every frame is recorded as often as the
    /// loopback shows it (twice), never more.
    #[test]
    fn frames_that_arrive_while_the_threads_join_their_group_are_recorded_once() {
        if !crate::net::udp::tests::private_loopback() {
            return;
        }
        let options = CaptureOptions {
            threads: CAPTURE_THREADS_MAX,
            ..small_ring()
        };
        for round in 0..2u32 {
            // About 600 ms of datagrams: the threads join their group meanwhile (making
            // their rings takes most of that).
            let sender = std::thread::spawn(|| send_numbered(30_000, 16));
            let mut source = CaptureSource::open_with(&["lo".to_string()], &options).unwrap();
            // What a ring cannot take is counted as dropped, and does not matter here.
            let payloads =
                super::super::read_payloads(&mut source, 1 << 20, Duration::from_millis(300));
            sender.join().unwrap();
            let mut times = std::collections::HashMap::<u32, u32>::new();
            crate::layout::for_each_record(&payloads, |record| {
                if let Record::Packet(packet) = record.unwrap() {
                    if packet.data.len() == 42 + 64 {
                        let number = u32::from_le_bytes(packet.data[42..46].try_into().unwrap());
                        *times.entry(number).or_default() += 1;
                    }
                }
            });
            let more: Vec<(u32, u32)> = times
                .iter()
                .filter(|&(_, &n)| n > 2)
                .map(|(&k, &n)| (k, n))
                .collect();
            assert!(
                more.is_empty(),
                "round {round}: recorded more than twice: {more:?}"
            );
            assert!(
                times.values().any(|&n| n == 2),
                "round {round}: none captured"
            );
        }
    }

    /// Sends `count` datagrams of 64 bytes numbered from 0 (the first 4 bytes) from `flows`
    /// sockets on the loopback, `flows` at a time, about 50,000 a second.
    fn send_numbered(count: u32, flows: usize) {
        let receiver = UdpSocket::bind("127.0.0.1:0").unwrap();
        let to = receiver.local_addr().unwrap();
        let sockets: Vec<UdpSocket> = (0..flows)
            .map(|_| UdpSocket::bind("127.0.0.1:0").unwrap())
            .collect();
        for number in 0..count {
            let mut data = [0u8; 64];
            data[..4].copy_from_slice(&number.to_le_bytes());
            // The receiver's queue may fill: what matters is what was captured.
            let _ = sockets[number as usize % flows].send_to(&data, to);
            if (number as usize + 1).is_multiple_of(flows) {
                std::thread::sleep(Duration::from_micros(300));
            }
        }
    }

    /// Frames sent on the namespace's loopback are captured whole (loopback shows each
    /// frame twice, outgoing and incoming), with their timestamps and lengths.
    #[test]
    fn frames_on_an_interface_become_records() {
        if !crate::net::udp::tests::private_loopback() {
            return;
        }
        let mut source = CaptureSource::open_with(&["lo".to_string()], &small_ring()).unwrap();
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
                if let Record::Packet(packet) = record.unwrap().record {
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
