//! Records inside chunk payloads (format 1.2, `docs/FORMAT.md` section 6.3): what a network
//! source records. Each datagram or packet keeps its boundary, its receive timestamp, its
//! captured and original length, the stream it came in on and its addresses; a loss is a
//! record too, at the position in the stream where it happened.
//!
//! A payload of a chunk flagged `RECORDS` is records back to back, each a 64-byte header,
//! its data and zero padding to a multiple of 8 bytes. Every record decodes on its own, so a
//! chunk can be read alone (a ring that overwrote the start, a time window, a damaged
//! neighbour). Since 1.4 a packet too large for the room left in a payload spans payloads:
//! its data is cut into fragments, each a record with the packet's header and a [`Part`]
//! flag, the first ending one payload and the next starting the next
//! ([`frame_span`] writes them, `layout::reassembly` puts them back together), so that a
//! payload is full whatever the sizes of the packets.

use super::codec::{get_array, get_u16, get_u32, get_u64, put_u16, put_u32, put_u64};
use super::error::{LayoutError, Structure};
use std::net::{IpAddr, Ipv6Addr, SocketAddr};

const R: Structure = Structure::Record;

/// Bytes of a record header.
pub const RECORD_HEADER_BYTES: usize = 64;
/// Bytes of a loss record's data: the count of datagrams or packets, and of bytes (0 when
/// not known).
pub const LOSS_DATA_BYTES: usize = 16;

mod off {
    pub const KIND: usize = 0;
    pub const STREAM: usize = 2;
    pub const CAPTURED_LEN: usize = 4;
    pub const ORIGINAL_LEN: usize = 8;
    pub const FLAGS: usize = 12;
    pub const TIMESTAMP_NS: usize = 16;
    pub const PEER_ADDR: usize = 24;
    pub const PEER_PORT: usize = 40;
    pub const FAMILY: usize = 42;
    pub const LOCAL_ADDR: usize = 44;
    pub const LOCAL_PORT: usize = 60;
    pub const CONTENT: usize = 62;
}

const KIND_PACKET: u16 = 1;
const KIND_LOSS: u16 = 2;
/// A part of a flow index block (format 1.9, `flow::index`): what the recorder wrote of
/// the flows of the chunks before it. Index records stand at the start of a payload, before
/// its own records (a continuation still comes first among those); walks over a payload's
/// records pass over them.
const KIND_INDEX: u16 = 3;
/// Packet flag: the data was cut short (`captured_len < original_len`).
const FLAG_TRUNCATED: u32 = 1;
/// Packet flag: the stream ended after this data (a TCP connection closed).
const FLAG_END: u32 = 2;
/// Packet flag (1.4): the packet's data goes on in a fragment at the start of the next
/// payload.
const FLAG_CONTINUES: u32 = 4;
/// Packet flag (1.4): this fragment goes on from one at the end of the previous payload.
const FLAG_CONTINUED: u32 = 8;
/// The least room a fragment takes: a header and 8 bytes of data. Less room left in a
/// payload than this is left empty.
pub const FRAGMENT_BYTES_MIN: usize = RECORD_HEADER_BYTES + 8;

/// Which part of its packet a packet record holds (format 1.4). A packet that does not fit
/// in the room left in a payload spans payloads: `First` ends that payload, `Middle`s fill
/// whole payloads, `Last` starts the next one; every fragment carries the packet's header
/// (stream, time, addresses, `original_len`) with its own `captured_len`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Part {
    Whole,
    First,
    Middle,
    Last,
}

impl Part {
    fn from_flags(flags: u32) -> Part {
        match (flags & FLAG_CONTINUED != 0, flags & FLAG_CONTINUES != 0) {
            (false, false) => Part::Whole,
            (false, true) => Part::First,
            (true, true) => Part::Middle,
            (true, false) => Part::Last,
        }
    }

    fn flags(self) -> u32 {
        match self {
            Part::Whole => 0,
            Part::First => FLAG_CONTINUES,
            Part::Middle => FLAG_CONTINUES | FLAG_CONTINUED,
            Part::Last => FLAG_CONTINUED,
        }
    }

    /// The packet goes on in the next payload.
    pub fn continues(self) -> bool {
        matches!(self, Part::First | Part::Middle)
    }

    /// The record goes on from the previous payload.
    pub fn is_continuation(self) -> bool {
        matches!(self, Part::Middle | Part::Last)
    }
}

/// Why datagrams or packets were lost.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum LossCause {
    /// The kernel dropped them: the socket's receive buffer was full (SO_RXQ_OVFL).
    SocketOverflow = 1,
    /// The kernel dropped them before a capture ring (PACKET_STATISTICS).
    CaptureDrop = 2,
    /// The recorder had no buffer for them (its drives or CPU could not keep up).
    RecorderOverrun = 3,
    /// Never stored: a reader's name for a packet that spans payloads of which it found only
    /// part (a chunk holding the rest is missing or damaged, lies before a ring's oldest
    /// chunk or past a crash's end). `count` 1, `bytes` its `original_len`.
    Partial = 4,
}

impl LossCause {
    fn from_u32(value: u32) -> Option<LossCause> {
        match value {
            1 => Some(LossCause::SocketOverflow),
            2 => Some(LossCause::CaptureDrop),
            3 => Some(LossCause::RecorderOverrun),
            // 4 (Partial) is a reader's finding, never stored.
            _ => None,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            LossCause::SocketOverflow => "socket overflow",
            LossCause::CaptureDrop => "capture drop",
            LossCause::RecorderOverrun => "recorder overrun",
            LossCause::Partial => "only part read",
        }
    }
}

/// What a packet record's data is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Content {
    /// The payload of a UDP datagram.
    Udp = 1,
    /// Bytes of a TCP connection's stream, as one read took them.
    Tcp = 2,
    /// A whole Ethernet frame, as a capture took it.
    Ethernet = 3,
}

impl Content {
    fn from_u16(value: u16) -> Option<Content> {
        match value {
            1 => Some(Content::Udp),
            2 => Some(Content::Tcp),
            3 => Some(Content::Ethernet),
            _ => None,
        }
    }
}

/// A datagram or packet as recorded.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Packet<'a> {
    /// Which of the recording's sources it came from (0 for the first `--source`).
    pub stream: u16,
    pub content: Content,
    /// When the kernel received it: nanoseconds since the Unix epoch.
    pub timestamp_ns: u64,
    /// Its length as received, of which `data` is what was kept.
    pub original_len: u32,
    pub data: &'a [u8],
    /// The sender's address (datagrams), and the address it was sent to.
    pub peer: Option<SocketAddr>,
    pub local: Option<SocketAddr>,
    /// The stream ended after this data (a TCP connection closed; the data may be empty).
    pub end: bool,
}

impl Packet<'_> {
    pub fn is_truncated(&self) -> bool {
        (self.data.len() as u64) < self.original_len as u64
    }
}

/// A record as a payload holds it: a whole record, or a fragment of a packet that spans
/// payloads (its `record` is then a packet whose `data` is the fragment's and whose
/// `original_len` is the whole packet's).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Piece<'a> {
    pub record: Record<'a>,
    pub part: Part,
}

/// A loss, at the place in the stream where it happened.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Loss {
    pub stream: u16,
    pub timestamp_ns: u64,
    pub cause: LossCause,
    /// Datagrams or packets lost.
    pub count: u64,
    /// Bytes lost, 0 when not known.
    pub bytes: u64,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Record<'a> {
    Packet(Packet<'a>),
    Loss(Loss),
}

impl Record<'_> {
    /// When the packet arrived, or when the loss was seen.
    pub fn timestamp_ns(&self) -> u64 {
        match self {
            Record::Packet(packet) => packet.timestamp_ns,
            Record::Loss(loss) => loss.timestamp_ns,
        }
    }
}

/// Bytes a record with `data_len` bytes of data takes: header, data, padding to 8.
pub fn record_bytes(data_len: usize) -> usize {
    RECORD_HEADER_BYTES + data_len.div_ceil(8) * 8
}

/// Writes the header of a packet record whose data (`packet.data.len()` bytes) the caller
/// puts right after it, then the padding; returns the record's length. `out` must hold
/// [`record_bytes`] of the data length.
pub fn encode_packet_header(out: &mut [u8], packet: &Packet<'_>) -> usize {
    frame_in_place(out, packet, packet.data.len())
}

/// Writes the header and padding of a packet record whose `len` bytes of data are already
/// in place right after the header (read there straight from a socket); `packet.data` is
/// not looked at. Returns the record's length.
pub fn frame_in_place(out: &mut [u8], packet: &Packet<'_>, len: usize) -> usize {
    let total = record_bytes(len);
    let original_len = packet.original_len.max(len as u32);
    let header = &mut out[..RECORD_HEADER_BYTES];
    header.fill(0);
    put_u16(header, off::KIND, KIND_PACKET);
    put_u16(header, off::STREAM, packet.stream);
    put_u32(header, off::CAPTURED_LEN, len as u32);
    put_u32(header, off::ORIGINAL_LEN, original_len);
    let truncated = (len as u64) < original_len as u64;
    let flags = if truncated { FLAG_TRUNCATED } else { 0 } | if packet.end { FLAG_END } else { 0 };
    put_u32(header, off::FLAGS, flags);
    put_u64(header, off::TIMESTAMP_NS, packet.timestamp_ns);
    let family = put_address(header, off::PEER_ADDR, off::PEER_PORT, packet.peer).max(put_address(
        header,
        off::LOCAL_ADDR,
        off::LOCAL_PORT,
        packet.local,
    ));
    put_u16(header, off::FAMILY, family);
    put_u16(header, off::CONTENT, packet.content as u16);
    out[RECORD_HEADER_BYTES + len..total].fill(0);
    total
}

/// The header of a packet record for `len` bytes of data (the whole of what is kept of it),
/// for [`frame_span`].
pub fn packet_header(packet: &Packet<'_>, len: usize) -> [u8; RECORD_HEADER_BYTES] {
    let mut record = [0u8; RECORD_HEADER_BYTES + 8];
    // `frame_in_place` pads the data too; with no data, the padding is empty.
    frame_in_place(&mut record, packet, 0);
    let mut header: [u8; RECORD_HEADER_BYTES] =
        record[..RECORD_HEADER_BYTES].try_into().expect("64 bytes");
    put_u32(&mut header, off::CAPTURED_LEN, len as u32);
    let original_len = packet.original_len.max(len as u32);
    put_u32(&mut header, off::ORIGINAL_LEN, original_len);
    let truncated = if (len as u64) < original_len as u64 {
        FLAG_TRUNCATED
    } else {
        0
    };
    let flags = (get_u32(&header, off::FLAGS) & !FLAG_TRUNCATED) | truncated;
    put_u32(&mut header, off::FLAGS, flags);
    header
}

/// What [`frame_span`] put into a payload.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Spanned {
    /// Bytes of the record written (header, data, padding).
    pub record_bytes: usize,
    /// Bytes of the packet's data it holds.
    pub data_bytes: usize,
    pub part: Part,
}

/// Frames a packet's `data` from byte `placed` on into `out`: the whole record when the
/// rest fits (`Whole` when nothing was placed before, else `Last`), otherwise a fragment
/// that fills `out` to its end (`First`, or `Middle`), to go on at the start of the next
/// payload. `header` is [`packet_header`] for the whole `data`. None when `out` is shorter
/// than [`FRAGMENT_BYTES_MIN`] and the rest does not fit: the payload is full. A fragment's
/// data is a multiple of 8 bytes, so it fills `out` exactly when `out` is.
pub fn frame_span(
    out: &mut [u8],
    header: &[u8; RECORD_HEADER_BYTES],
    data: &[u8],
    placed: usize,
) -> Option<Spanned> {
    debug_assert!(placed <= data.len());
    debug_assert_eq!(get_u32(header, off::CAPTURED_LEN) as usize, data.len());
    let rest = data.len() - placed;
    let (take, part) = if record_bytes(rest) <= out.len() {
        (rest, if placed == 0 { Part::Whole } else { Part::Last })
    } else if out.len() >= FRAGMENT_BYTES_MIN {
        // record_bytes(rest) > out.len() makes this less than rest.
        let take = (out.len() - RECORD_HEADER_BYTES) / 8 * 8;
        (
            take,
            if placed == 0 {
                Part::First
            } else {
                Part::Middle
            },
        )
    } else {
        return None;
    };
    let total = record_bytes(take);
    out[..RECORD_HEADER_BYTES].copy_from_slice(header);
    put_u32(out, off::CAPTURED_LEN, take as u32);
    let flags = get_u32(header, off::FLAGS) | part.flags();
    put_u32(out, off::FLAGS, flags);
    out[RECORD_HEADER_BYTES..RECORD_HEADER_BYTES + take]
        .copy_from_slice(&data[placed..placed + take]);
    out[RECORD_HEADER_BYTES + take..total].fill(0);
    Some(Spanned {
        record_bytes: total,
        data_bytes: take,
        part,
    })
}

/// The header and data of an encoded whole packet record (as [`encode_packet`] wrote it),
/// for [`frame_span`]; None for a loss record or bytes that are not a whole packet record.
pub fn packet_parts(record: &[u8]) -> Option<(&[u8; RECORD_HEADER_BYTES], &[u8])> {
    let header: &[u8; RECORD_HEADER_BYTES] = record.get(..RECORD_HEADER_BYTES)?.try_into().ok()?;
    if get_u16(header, off::KIND) != KIND_PACKET
        || Part::from_flags(get_u32(header, off::FLAGS)) != Part::Whole
    {
        return None;
    }
    let captured = get_u32(header, off::CAPTURED_LEN) as usize;
    let data = record.get(RECORD_HEADER_BYTES..RECORD_HEADER_BYTES.checked_add(captured)?)?;
    Some((header, data))
}

/// Writes a whole packet record (header, data, padding); returns its length.
pub fn encode_packet(out: &mut [u8], packet: &Packet<'_>) -> usize {
    let len = packet.data.len();
    out[RECORD_HEADER_BYTES..RECORD_HEADER_BYTES + len].copy_from_slice(packet.data);
    encode_packet_header(out, packet)
}

/// Writes a loss record; returns its length.
pub fn encode_loss(out: &mut [u8], loss: &Loss) -> usize {
    let total = record_bytes(LOSS_DATA_BYTES);
    let record = &mut out[..total];
    record.fill(0);
    put_u16(record, off::KIND, KIND_LOSS);
    put_u16(record, off::STREAM, loss.stream);
    put_u32(record, off::CAPTURED_LEN, LOSS_DATA_BYTES as u32);
    put_u32(record, off::FLAGS, loss.cause as u32);
    put_u64(record, off::TIMESTAMP_NS, loss.timestamp_ns);
    put_u64(record, RECORD_HEADER_BYTES, loss.count);
    put_u64(record, RECORD_HEADER_BYTES + 8, loss.bytes);
    total
}

/// Writes an index record holding `data` (a part of a flow index block), stamped
/// `timestamp_ns`; returns its length ([`record_bytes`] of the data's).
pub fn encode_index(out: &mut [u8], timestamp_ns: u64, data: &[u8]) -> usize {
    let total = record_bytes(data.len());
    let record = &mut out[..total];
    record.fill(0);
    put_u16(record, off::KIND, KIND_INDEX);
    put_u32(record, off::CAPTURED_LEN, data.len() as u32);
    put_u32(record, off::ORIGINAL_LEN, data.len() as u32);
    put_u64(record, off::TIMESTAMP_NS, timestamp_ns);
    record[RECORD_HEADER_BYTES..RECORD_HEADER_BYTES + data.len()].copy_from_slice(data);
    total
}

/// The length of the index record at the start of `b`, if one stands there whole.
fn index_record_len(b: &[u8]) -> Option<usize> {
    if b.len() < RECORD_HEADER_BYTES || get_u16(b, off::KIND) != KIND_INDEX {
        return None;
    }
    let total = record_bytes(get_u32(b, off::CAPTURED_LEN) as usize);
    (total <= b.len()).then_some(total)
}

/// A payload with the index records at its start passed over: its own records.
pub fn skip_index_records(mut payload: &[u8]) -> &[u8] {
    while let Some(len) = index_record_len(payload) {
        payload = &payload[len..];
    }
    payload
}

/// The data of the index records at the start of `payload`, in order.
pub fn index_records(mut payload: &[u8]) -> impl Iterator<Item = &[u8]> {
    std::iter::from_fn(move || {
        let len = index_record_len(payload)?;
        let captured = get_u32(payload, off::CAPTURED_LEN) as usize;
        let data = &payload[RECORD_HEADER_BYTES..RECORD_HEADER_BYTES + captured];
        payload = &payload[len..];
        Some(data)
    })
}

/// A whole captured frame's record, as [`whole_frame`] reads it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WholeFrame<'a> {
    pub timestamp_ns: u64,
    pub original_len: u32,
    pub data: &'a [u8],
}

/// The record at the start of `b` where it is a whole Ethernet frame as a capture records
/// it (no fragment, no flag a decode would refuse), and its length; None for anything else
/// (a loss, a fragment, a datagram, a record that does not decode), which
/// [`decode_record`] reads. What it returns is what `decode_record` would.
#[inline]
pub fn whole_frame(b: &[u8]) -> Option<(WholeFrame<'_>, usize)> {
    if b.len() < RECORD_HEADER_BYTES
        || get_u16(b, off::KIND) != KIND_PACKET
        || get_u16(b, off::CONTENT) != Content::Ethernet as u16
        || get_u32(b, off::FLAGS) & !(FLAG_TRUNCATED | FLAG_END) != 0
    {
        return None;
    }
    let captured = get_u32(b, off::CAPTURED_LEN) as usize;
    let original_len = get_u32(b, off::ORIGINAL_LEN);
    let total = record_bytes(captured);
    if total > b.len() || (original_len as usize) < captured {
        return None;
    }
    let frame = WholeFrame {
        timestamp_ns: get_u64(b, off::TIMESTAMP_NS),
        original_len,
        data: &b[RECORD_HEADER_BYTES..RECORD_HEADER_BYTES + captured],
    };
    Some((frame, total))
}

/// Stores an address as IPv6 (IPv4 mapped) and its port; returns its family (4, 6, or 0).
fn put_address(b: &mut [u8], addr_at: usize, port_at: usize, addr: Option<SocketAddr>) -> u16 {
    let Some(addr) = addr else { return 0 };
    let (ip, family) = match addr.ip() {
        IpAddr::V4(v4) => (v4.to_ipv6_mapped(), 4),
        IpAddr::V6(v6) => (v6, 6),
    };
    b[addr_at..addr_at + 16].copy_from_slice(&ip.octets());
    put_u16(b, port_at, addr.port());
    family
}

#[inline]
fn get_address(b: &[u8], addr_at: usize, port_at: usize, family: u16) -> Option<SocketAddr> {
    if family == 0 {
        return None; // No address was stored (a captured frame's are in its data).
    }
    let ip = Ipv6Addr::from(get_array::<16>(b, addr_at));
    let port = get_u16(b, port_at);
    if ip.is_unspecified() && port == 0 {
        return None;
    }
    let ip = match (family, ip.to_ipv4_mapped()) {
        (4, Some(v4)) => IpAddr::V4(v4),
        _ => IpAddr::V6(ip),
    };
    Some(SocketAddr::new(ip, port))
}

/// The records of one payload as it holds them, fragments included, in order; a malformed
/// record ends the walk with an error. Readers of a recording take payloads through
/// `layout::Reassembly`, which puts packets that span payloads back together.
pub fn records(payload: &[u8]) -> Records<'_> {
    Records {
        rest: skip_index_records(payload),
    }
}

pub struct Records<'a> {
    rest: &'a [u8],
}

impl<'a> Iterator for Records<'a> {
    type Item = Result<Piece<'a>, LayoutError>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.rest.is_empty() {
            return None;
        }
        match decode_record(self.rest) {
            Ok((piece, len)) => {
                self.rest = &self.rest[len..];
                Some(Ok(piece))
            }
            Err(error) => {
                self.rest = &[];
                Some(Err(error))
            }
        }
    }
}

/// Decodes the record at the start of `b`: the record (or fragment) and its length.
pub fn decode_record(b: &[u8]) -> Result<(Piece<'_>, usize), LayoutError> {
    if b.len() < RECORD_HEADER_BYTES {
        return Err(LayoutError::Truncated {
            structure: R,
            needed_bytes: RECORD_HEADER_BYTES,
            got_bytes: b.len(),
        });
    }
    let captured = get_u32(b, off::CAPTURED_LEN) as usize;
    let total = RECORD_HEADER_BYTES
        .checked_add(captured.div_ceil(8) * 8)
        .filter(|&total| total <= b.len())
        .ok_or_else(|| LayoutError::Truncated {
            structure: R,
            needed_bytes: RECORD_HEADER_BYTES.saturating_add(captured),
            got_bytes: b.len(),
        })?;
    let stream = get_u16(b, off::STREAM);
    let timestamp_ns = get_u64(b, off::TIMESTAMP_NS);
    let flags = get_u32(b, off::FLAGS);
    let data = &b[RECORD_HEADER_BYTES..RECORD_HEADER_BYTES + captured];
    let mut part = Part::Whole;
    let record = match get_u16(b, off::KIND) {
        KIND_PACKET => {
            let original_len = get_u32(b, off::ORIGINAL_LEN);
            if (original_len as usize) < captured {
                return Err(LayoutError::invalid(
                    R,
                    "original_len",
                    "is less than captured_len",
                ));
            }
            if flags & !(FLAG_TRUNCATED | FLAG_END | FLAG_CONTINUES | FLAG_CONTINUED) != 0 {
                return Err(LayoutError::invalid(R, "flags", "has unknown bits"));
            }
            part = Part::from_flags(flags);
            if part != Part::Whole && captured == 0 {
                return Err(LayoutError::invalid(
                    R,
                    "captured_len",
                    "of a fragment is 0",
                ));
            }
            let family = get_u16(b, off::FAMILY);
            let content = Content::from_u16(get_u16(b, off::CONTENT))
                .ok_or_else(|| LayoutError::invalid(R, "content", "is not 1, 2 or 3"))?;
            Record::Packet(Packet {
                stream,
                content,
                timestamp_ns,
                original_len,
                data,
                peer: get_address(b, off::PEER_ADDR, off::PEER_PORT, family),
                local: get_address(b, off::LOCAL_ADDR, off::LOCAL_PORT, family),
                end: flags & FLAG_END != 0,
            })
        }
        KIND_LOSS => {
            let cause = LossCause::from_u32(flags)
                .ok_or_else(|| LayoutError::invalid(R, "flags", "names no known loss cause"))?;
            if get_u16(b, off::CONTENT) != 0 {
                return Err(LayoutError::invalid(R, "content", "of a loss is not 0"));
            }
            if captured != LOSS_DATA_BYTES {
                return Err(LayoutError::invalid(
                    R,
                    "captured_len",
                    "of a loss is not 16",
                ));
            }
            Record::Loss(Loss {
                stream,
                timestamp_ns,
                cause,
                count: get_u64(data, 0),
                bytes: get_u64(data, 8),
            })
        }
        _ => return Err(LayoutError::invalid(R, "kind", "is not 1 or 2")),
    };
    Ok((Piece { record, part }, total))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn packet(data: &[u8]) -> Packet<'_> {
        Packet {
            stream: 2,
            content: Content::Udp,
            timestamp_ns: 1_700_000_000_123_456_789,
            original_len: data.len() as u32,
            data,
            peer: Some("10.1.2.3:4000".parse().unwrap()),
            local: Some("10.1.2.4:5000".parse().unwrap()),
            end: false,
        }
    }

    /// `whole_frame` takes exactly the records `decode_record` reads as whole Ethernet
    /// frames, with the same fields; anything else is left to `decode_record`.
    #[test]
    fn a_whole_frame_reads_as_decode_record_reads_it_and_nothing_else_does() {
        let frame = Packet {
            content: Content::Ethernet,
            peer: None,
            local: None,
            original_len: 200,
            ..packet(&[5u8; 100])
        };
        let mut records = Vec::new();
        let mut encode = |write: &dyn Fn(&mut [u8]) -> usize| {
            let mut out = vec![0u8; 512];
            let len = write(&mut out);
            out.truncate(len);
            records.push(out);
        };
        encode(&|out| encode_packet(out, &frame));
        encode(&|out| encode_packet(out, &Packet { end: true, ..frame }));
        encode(&|out| encode_packet(out, &packet(b"a datagram")));
        encode(&|out| {
            let loss = Loss {
                stream: 0,
                timestamp_ns: 9,
                cause: LossCause::CaptureDrop,
                count: 1,
                bytes: 0,
            };
            encode_loss(out, &loss)
        });
        encode(&|out| encode_index(out, 3, b"an index part"));
        let header = packet_header(&frame, frame.data.len());
        encode(&|out| {
            frame_span(&mut out[..120], &header, frame.data, 0)
                .unwrap()
                .record_bytes
        });
        encode(&|out| {
            frame_span(out, &header, frame.data, 40)
                .unwrap()
                .record_bytes
        });
        let mut unknown_flag = records[0].clone();
        put_u32(&mut unknown_flag, off::FLAGS, 64);
        let mut short = records[0].clone();
        put_u32(&mut short, off::ORIGINAL_LEN, 10);
        records.extend([unknown_flag, short, records[0][..100].to_vec()]);
        let mut whole = 0;
        for record in &records {
            let decoded = decode_record(record);
            let expected = match &decoded {
                Ok((
                    Piece {
                        record: Record::Packet(packet),
                        part: Part::Whole,
                    },
                    len,
                )) if packet.content == Content::Ethernet => Some((
                    WholeFrame {
                        timestamp_ns: packet.timestamp_ns,
                        original_len: packet.original_len,
                        data: packet.data,
                    },
                    *len,
                )),
                _ => None,
            };
            assert_eq!(whole_frame(record), expected, "{decoded:?}");
            whole += usize::from(expected.is_some());
        }
        assert_eq!(whole, 2);
    }

    #[test]
    fn packets_and_losses_round_trip_back_to_back() {
        let mut payload = vec![0xee; 4096];
        let mut at = encode_packet(&mut payload, &packet(b"hello"));
        assert_eq!(at, 64 + 8);
        let loss = Loss {
            stream: 1,
            timestamp_ns: 7,
            cause: LossCause::SocketOverflow,
            count: 3,
            bytes: 0,
        };
        at += encode_loss(&mut payload[at..], &loss);
        let v6 = Packet {
            peer: Some("[fd00::1]:9".parse().unwrap()),
            local: Some("[fd00::2]:10".parse().unwrap()),
            original_len: 100,
            ..packet(&[1u8; 16])
        };
        at += encode_packet(&mut payload[at..], &v6);
        let found: Vec<_> = records(&payload[..at])
            .map(|piece| piece.map(|piece| piece.record))
            .collect::<Result<_, _>>()
            .unwrap();
        assert_eq!(
            found,
            [
                Record::Packet(packet(b"hello")),
                Record::Loss(loss),
                Record::Packet(v6)
            ]
        );
        let Record::Packet(last) = found[2] else {
            panic!()
        };
        assert!(last.is_truncated());
    }

    #[test]
    fn malformed_records_are_refused_not_misread() {
        let mut payload = vec![0u8; 256];
        let len = encode_packet(&mut payload, &packet(&[5u8; 20]));
        let mut cut = payload[..len].to_vec();
        cut.truncate(len - 8);
        assert!(matches!(
            records(&cut).next(),
            Some(Err(LayoutError::Truncated { .. }))
        ));
        let mut bad_kind = payload.clone();
        put_u16(&mut bad_kind, off::KIND, 9);
        assert!(records(&bad_kind[..len]).next().unwrap().is_err());
        let mut short_original = payload.clone();
        put_u32(&mut short_original, off::ORIGINAL_LEN, 3);
        assert!(records(&short_original[..len]).next().unwrap().is_err());
        assert!(records(&payload[..10]).next().unwrap().is_err());
        // A walk stops at the first bad record.
        let mut walk = records(&bad_kind[..len]);
        assert!(walk.next().unwrap().is_err());
        assert!(walk.next().is_none());
    }

    #[test]
    fn a_packet_larger_than_the_room_spans_payloads_in_fragments() {
        let data: Vec<u8> = (0..1000u32).map(|i| i as u8).collect();
        let header = packet_header(&packet(&data), data.len());
        // Room for a header and 200 bytes, then 504, then the rest.
        let mut first = vec![0xee; 64 + 200];
        let spanned = frame_span(&mut first, &header, &data, 0).unwrap();
        assert_eq!(
            spanned,
            Spanned {
                record_bytes: 264,
                data_bytes: 200,
                part: Part::First
            }
        );
        let mut middle = vec![0xee; 64 + 504];
        let spanned = frame_span(&mut middle, &header, &data, 200).unwrap();
        assert_eq!((spanned.data_bytes, spanned.part), (504, Part::Middle));
        let mut last = vec![0xee; 4096];
        let spanned = frame_span(&mut last, &header, &data, 704).unwrap();
        assert_eq!((spanned.data_bytes, spanned.part), (296, Part::Last));
        assert_eq!(spanned.record_bytes, record_bytes(296));
        let mut joined = Vec::new();
        for (bytes, part) in [
            (&first[..], Part::First),
            (&middle[..], Part::Middle),
            (&last[..record_bytes(296)], Part::Last),
        ] {
            let piece = records(bytes).next().unwrap().unwrap();
            assert_eq!(piece.part, part);
            let Record::Packet(fragment) = piece.record else {
                panic!("{piece:?}")
            };
            assert_eq!(fragment.original_len, 1000);
            assert_eq!(fragment.timestamp_ns, packet(&data).timestamp_ns);
            joined.extend_from_slice(fragment.data);
        }
        assert_eq!(joined, data);
        // Whole when it fits; nothing when even a fragment does not.
        let mut roomy = vec![0u8; 2048];
        let whole = frame_span(&mut roomy, &header, &data, 0).unwrap();
        assert_eq!((whole.part, whole.record_bytes), (Part::Whole, 1064));
        assert_eq!(
            records(&roomy[..1064]).next().unwrap().unwrap().record,
            Record::Packet(packet(&data))
        );
        assert_eq!(frame_span(&mut [0u8; 64], &header, &data, 0), None);
        // An empty fragment is refused.
        let mut empty = first.clone();
        put_u32(&mut empty, off::CAPTURED_LEN, 0);
        assert!(records(&empty[..64]).next().unwrap().is_err());
    }

    #[test]
    fn any_bytes_decode_or_fail_without_panicking() {
        let mut state = 0x9e37_79b9_7f4a_7c15u64;
        for _ in 0..2000 {
            let mut bytes = vec![0u8; 200];
            for byte in &mut bytes {
                state ^= state << 13;
                state ^= state >> 7;
                state ^= state << 17;
                *byte = state as u8 % 4; // small values make plausible lengths and kinds
            }
            for record in records(&bytes) {
                let _ = record;
            }
        }
    }
}
