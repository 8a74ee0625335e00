//! The flow index a recorder writes as it records packets (format 1.9): for each bucket of
//! chunks (a run of consecutive sequences), the flows its packets belong to, with their
//! times, packets, bytes and the chunks they lie in, the losses the source recorded there,
//! and each chunk's time on the recording's timeline, so that a reader seeks straight to the
//! chunks a flow lies in.
//!
//! A bucket's block is written into the recording itself, in index records
//! (`layout::encode_index`) at the start of the payloads that follow it: the first part in
//! the bucket's next chunk, which begins the next bucket, so that each block is found from
//! the one after it (its bucket's first chunk holds the block before). A block larger than
//! a part takes several parts, one per payload. The whole block is checksummed: a part
//! that is missing or damaged makes the block unreadable, never a block with fewer flows.
//!
//! [`FlowIndexer`] builds the blocks from the payloads as a recorder fills them;
//! [`IndexBlock`] encodes and decodes one; [`PartsJoin`] puts parts read back together.
//! All pure: tested without a drive.

use super::community::CommunityId;
use super::key::{FlowKey, IpFlow};
use super::scan::FlowScan;
use super::table::FlowEntry;
use crate::layout::crc32c;
use crate::window::Window;
use std::collections::VecDeque;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

/// The first bytes of every index part.
pub const INDEX_MAGIC: [u8; 4] = *b"NVFX";
/// The index format's version.
pub const INDEX_VERSION: u16 = 1;
/// Bytes of an index part's own header, before its share of the block.
pub const PART_HEADER_BYTES: usize = 32;
/// A bucket holds at most this many bytes of chunks (so a reader never scans more than one
/// bucket's chunks where a block is missing at the end of a recording)...
pub const BUCKET_BYTES_MAX: u64 = 64 << 20;
/// ...and at most this long of the recording's time.
pub const BUCKET_SPAN_NS_MAX: u64 = 5_000_000_000;

/// Why an index part or block could not be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum IndexError {
    #[error("an index part shorter than its header ({0} bytes)")]
    ShortPart(usize),
    #[error("an index part without its magic")]
    Magic,
    #[error("an index part of version {0} (this reader knows {INDEX_VERSION})")]
    Version(u16),
    #[error("index part {part} of {parts} is out of place")]
    PartOutOfPlace { part: u16, parts: u16 },
    #[error("the index block of bucket {first_sequence} fails its CRC")]
    Crc { first_sequence: u64 },
    #[error("the index block ends inside its {0}")]
    Truncated(&'static str),
    #[error("the index block holds {0} that cannot be")]
    Malformed(&'static str),
}

/// One bucket's flows, as a block of the index holds them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IndexBlock {
    /// The bucket's first chunk.
    pub first_sequence: u64,
    /// Each chunk's time on the recording's timeline (`ChunkHeader::time_ns`), in order:
    /// as many as the bucket has chunks.
    pub chunk_times_ns: Vec<u64>,
    /// Its flows, each with the packets completed in the bucket (a packet that spans
    /// chunks from the bucket before lies in chunks of both).
    pub flows: Vec<FlowEntry>,
    /// The losses the source recorded in the bucket: when, and what they were.
    pub losses: Vec<(u64, String)>,
    /// What the recorder could not key there (records that did not decode): a reader scans
    /// such a bucket instead.
    pub unkeyed: Vec<String>,
}

impl IndexBlock {
    /// The sequence after the bucket's last chunk.
    pub fn end_sequence(&self) -> u64 {
        self.first_sequence + self.chunk_times_ns.len() as u64
    }

    /// The time of chunk `sequence`, where it is one of the bucket's.
    pub fn chunk_time_ns(&self, sequence: u64) -> Option<u64> {
        let index = sequence.checked_sub(self.first_sequence)?;
        self.chunk_times_ns
            .get(usize::try_from(index).ok()?)
            .copied()
    }

    /// The first and last packet's time, if it has packets.
    pub fn packet_times_ns(&self) -> Option<(u64, u64)> {
        let first = self.flows.iter().map(|flow| flow.first_ns).min()?;
        let last = self.flows.iter().map(|flow| flow.last_ns).max()?;
        Some((first, last))
    }

    /// The block's bytes.
    pub fn encode(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(64 + self.flows.len() * 40);
        put_varint(&mut out, self.chunk_times_ns.len() as u64);
        let base = self.chunk_times_ns.first().copied().unwrap_or(0);
        out.extend_from_slice(&base.to_le_bytes());
        let mut before = base;
        for &time in &self.chunk_times_ns {
            put_signed(&mut out, time.wrapping_sub(before) as i64);
            before = time;
        }
        put_varint(&mut out, self.flows.len() as u64);
        for flow in &self.flows {
            put_flow(&mut out, flow, base, self.first_sequence);
        }
        put_varint(&mut out, self.losses.len() as u64);
        for (time, text) in &self.losses {
            out.extend_from_slice(&time.to_le_bytes());
            put_text(&mut out, text);
        }
        put_varint(&mut out, self.unkeyed.len() as u64);
        for text in &self.unkeyed {
            put_text(&mut out, text);
        }
        out
    }

    /// The block of bucket `first_sequence` from its bytes; Community IDs take `seed`.
    pub fn decode(first_sequence: u64, bytes: &[u8], seed: u16) -> Result<IndexBlock, IndexError> {
        let mut at = Reader { bytes, at: 0 };
        let chunks = at.count("chunk times")?;
        let base = at.u64("chunk times")?;
        let mut chunk_times_ns = Vec::with_capacity(chunks);
        let mut time = base;
        for _ in 0..chunks {
            time = time.wrapping_add(at.signed("chunk times")? as u64);
            chunk_times_ns.push(time);
        }
        let flows = (0..at.count("flows")?)
            .map(|_| take_flow(&mut at, base, first_sequence, seed))
            .collect::<Result<_, _>>()?;
        let mut losses = Vec::new();
        for _ in 0..at.count("losses")? {
            let time = at.u64("losses")?;
            losses.push((time, at.text("losses")?));
        }
        let unkeyed = (0..at.count("notes")?)
            .map(|_| at.text("notes"))
            .collect::<Result<_, _>>()?;
        if at.at != bytes.len() {
            return Err(IndexError::Malformed("bytes after its end"));
        }
        Ok(IndexBlock {
            first_sequence,
            chunk_times_ns,
            flows,
            losses,
            unkeyed,
        })
    }

    /// The block cut into the data of index records of at most `part_max` bytes each.
    pub fn parts(&self, part_max: usize) -> Vec<Vec<u8>> {
        let bytes = self.encode();
        let share = part_max.saturating_sub(PART_HEADER_BYTES).max(8);
        let parts = bytes.len().div_ceil(share).max(1);
        let crc = crc32c(&bytes);
        (0..parts)
            .map(|part| {
                let slice =
                    &bytes[(part * share).min(bytes.len())..((part + 1) * share).min(bytes.len())];
                let mut out = Vec::with_capacity(PART_HEADER_BYTES + slice.len());
                out.extend_from_slice(&INDEX_MAGIC);
                out.extend_from_slice(&INDEX_VERSION.to_le_bytes());
                out.extend_from_slice(&(part as u16).to_le_bytes());
                out.extend_from_slice(&(parts as u16).to_le_bytes());
                out.extend_from_slice(&[0, 0]);
                out.extend_from_slice(&self.first_sequence.to_le_bytes());
                out.extend_from_slice(&(bytes.len() as u32).to_le_bytes());
                out.extend_from_slice(&crc.to_le_bytes());
                out.extend_from_slice(&[0; 4]);
                debug_assert_eq!(out.len(), PART_HEADER_BYTES);
                out.extend_from_slice(slice);
                out
            })
            .collect()
    }
}

/// An index part as a record holds it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct IndexPart<'a> {
    /// The bucket whose block it is part of.
    pub first_sequence: u64,
    pub part: u16,
    pub parts: u16,
    block_len: u32,
    block_crc: u32,
    bytes: &'a [u8],
}

/// The part an index record's data holds.
pub fn decode_part(data: &[u8]) -> Result<IndexPart<'_>, IndexError> {
    if data.len() < PART_HEADER_BYTES {
        return Err(IndexError::ShortPart(data.len()));
    }
    if data[..4] != INDEX_MAGIC {
        return Err(IndexError::Magic);
    }
    let u16_at = |at: usize| u16::from_le_bytes([data[at], data[at + 1]]);
    let u32_at = |at: usize| u32::from_le_bytes(data[at..at + 4].try_into().expect("4 bytes"));
    let version = u16_at(4);
    if version != INDEX_VERSION {
        return Err(IndexError::Version(version));
    }
    let (part, parts) = (u16_at(6), u16_at(8));
    if part >= parts {
        return Err(IndexError::PartOutOfPlace { part, parts });
    }
    Ok(IndexPart {
        first_sequence: u64::from_le_bytes(data[12..20].try_into().expect("8 bytes")),
        part,
        parts,
        block_len: u32_at(20),
        block_crc: u32_at(24),
        bytes: &data[PART_HEADER_BYTES..],
    })
}

/// Parts read back in the order they were written, put together into blocks.
#[derive(Debug, Default)]
pub struct PartsJoin {
    /// The block being joined: its first part, and its bytes so far.
    joining: Option<(u64, u16, u16, u32, u32)>,
    bytes: Vec<u8>,
}

impl PartsJoin {
    pub fn new() -> PartsJoin {
        PartsJoin::default()
    }

    /// Takes the next part read; the block it completes, if it does (decoded with `seed`).
    /// A part out of place (one missing before it) drops the block being joined.
    pub fn part(
        &mut self,
        part: &IndexPart<'_>,
        seed: u16,
    ) -> Option<Result<IndexBlock, IndexError>> {
        let expected = match self.joining {
            Some((first, next, parts, _, _)) => {
                first == part.first_sequence && next == part.part && parts == part.parts
            }
            None => part.part == 0,
        };
        if !expected {
            self.joining = None;
            self.bytes.clear();
            if part.part != 0 {
                return Some(Err(IndexError::PartOutOfPlace {
                    part: part.part,
                    parts: part.parts,
                }));
            }
        }
        self.bytes.extend_from_slice(part.bytes);
        let next = part.part + 1;
        if next < part.parts {
            self.joining = Some((
                part.first_sequence,
                next,
                part.parts,
                part.block_len,
                part.block_crc,
            ));
            return None;
        }
        self.joining = None;
        let bytes = std::mem::take(&mut self.bytes);
        Some(join(part, &bytes, seed))
    }
}

/// The block whose whole bytes are `bytes`, checked against what its last part says.
fn join(last: &IndexPart<'_>, bytes: &[u8], seed: u16) -> Result<IndexBlock, IndexError> {
    if bytes.len() != last.block_len as usize || crc32c(bytes) != last.block_crc {
        return Err(IndexError::Crc {
            first_sequence: last.first_sequence,
        });
    }
    IndexBlock::decode(last.first_sequence, bytes, seed)
}

/// Builds a recording's index as its payloads are filled: keys every packet of each chunk,
/// closes a bucket when it holds [`BUCKET_BYTES_MAX`] of chunks or spans
/// [`BUCKET_SPAN_NS_MAX`], and keeps the closed buckets' parts until they are placed at the
/// start of the next payloads.
#[derive(Debug, Clone)]
pub struct FlowIndexer {
    scan: FlowScan,
    /// The open bucket's first chunk, and its chunks' times.
    bucket_first: u64,
    chunk_times_ns: Vec<u64>,
    chunks_max: usize,
    part_max: usize,
    pending: VecDeque<Vec<u8>>,
    /// What has been made: blocks, and the bytes of their index records.
    blocks: u64,
    record_bytes: u64,
}

impl FlowIndexer {
    /// The index of a recording whose first chunk is `first_sequence`, in chunks of
    /// `chunk_bytes` with room for `payload_bytes` each, in buckets of at most
    /// `bucket_bytes` of chunks.
    pub fn new(
        first_sequence: u64,
        (chunk_bytes, payload_bytes): (u32, u32),
        bucket_bytes: u64,
    ) -> FlowIndexer {
        FlowIndexer {
            // Every packet is keyed (no window): the chunks' times are not asked.
            scan: FlowScan::new(0, Window::default(), 0),
            bucket_first: first_sequence,
            chunk_times_ns: Vec::new(),
            chunks_max: (bucket_bytes / u64::from(chunk_bytes.max(1))).max(1) as usize,
            part_max: part_max(payload_bytes),
            pending: VecDeque::new(),
            blocks: 0,
            record_bytes: 0,
        }
    }

    /// The most bytes of a part placed at the start of a payload.
    pub fn part_max(&self) -> usize {
        self.part_max
    }

    /// The next chunk was filled: `payload` (index records first, then the source's), at
    /// `stream_offset_bytes` of the stream, at `time_ns` on the recording's timeline.
    pub fn chunk(&mut self, time_ns: u64, stream_offset_bytes: u64, payload: &[u8]) {
        let sequence = self.bucket_first + self.chunk_times_ns.len() as u64;
        self.scan.records_at(sequence, stream_offset_bytes, payload);
        self.chunk_times_ns.push(time_ns);
        let span = time_ns.saturating_sub(self.chunk_times_ns[0]);
        if self.chunk_times_ns.len() >= self.chunks_max || span >= BUCKET_SPAN_NS_MAX {
            self.close_bucket();
        }
    }

    /// Closes the open bucket, if it has chunks: its block's parts wait to be placed.
    pub fn close_bucket(&mut self) {
        if self.chunk_times_ns.is_empty() {
            return;
        }
        let (table, unkeyed, losses) = self.scan.take_with_losses();
        let chunk_times_ns = std::mem::take(&mut self.chunk_times_ns);
        let block = IndexBlock {
            first_sequence: self.bucket_first,
            flows: table.matching_all().into_iter().cloned().collect(),
            losses,
            unkeyed,
            chunk_times_ns,
        };
        self.bucket_first = block.end_sequence();
        self.blocks += 1;
        self.pending.extend(block.parts(self.part_max));
    }

    /// The data of the next index record to place at the start of a payload, if any.
    pub fn pending_part(&self) -> Option<&[u8]> {
        self.pending.front().map(Vec::as_slice)
    }

    /// The data of the index records waiting to be placed, in order.
    pub fn pending_parts(&self) -> impl Iterator<Item = &[u8]> {
        self.pending.iter().map(Vec::as_slice)
    }

    /// The pending part was placed, as a record of `record_bytes`.
    pub fn part_placed(&mut self, record_bytes: usize) {
        self.parts_placed(1, record_bytes);
    }

    /// The first `parts` pending parts were placed, as records of `record_bytes` in all.
    pub fn parts_placed(&mut self, parts: usize, record_bytes: usize) {
        self.pending.drain(..parts.min(self.pending.len()));
        self.record_bytes += record_bytes as u64;
    }

    /// Whether parts wait to be placed.
    pub fn has_pending(&self) -> bool {
        !self.pending.is_empty()
    }

    /// Blocks made, and the bytes of the index records placed.
    pub fn made(&self) -> (u64, u64) {
        (self.blocks, self.record_bytes)
    }
}

/// The most bytes of an index part in a payload of `payload_bytes`: an eighth of it (at
/// least 256 bytes), in whole 8-byte words.
fn part_max(payload_bytes: u32) -> usize {
    ((payload_bytes as usize / 8).max(256) / 8) * 8
}

fn put_varint(out: &mut Vec<u8>, mut value: u64) {
    while value >= 0x80 {
        out.push(value as u8 | 0x80);
        value >>= 7;
    }
    out.push(value as u8);
}

fn put_signed(out: &mut Vec<u8>, value: i64) {
    put_varint(out, ((value << 1) ^ (value >> 63)) as u64);
}

fn put_text(out: &mut Vec<u8>, text: &str) {
    put_varint(out, text.len() as u64);
    out.extend_from_slice(text.as_bytes());
}

/// Key tags and flags as a block stores them.
const TAG_IP: u8 = 1;
const TAG_NOT_IP: u8 = 2;
const TAG_UNREADABLE: u8 = 3;
const KEY_SOURCE_V6: u8 = 1;
const KEY_DESTINATION_V6: u8 = 2;
const KEY_PORTS: u8 = 4;
const KEY_VLAN: u8 = 8;

fn put_address(out: &mut Vec<u8>, address: &IpAddr) {
    match address {
        IpAddr::V4(v4) => out.extend_from_slice(&v4.octets()),
        IpAddr::V6(v6) => out.extend_from_slice(&v6.octets()),
    }
}

fn put_key(out: &mut Vec<u8>, key: &FlowKey) {
    match key {
        FlowKey::Ip(flow) => {
            let mut flags = 0;
            flags |= if flow.source.is_ipv6() {
                KEY_SOURCE_V6
            } else {
                0
            };
            flags |= if flow.destination.is_ipv6() {
                KEY_DESTINATION_V6
            } else {
                0
            };
            flags |= if flow.ports.is_some() { KEY_PORTS } else { 0 };
            flags |= if flow.vlan.is_some() { KEY_VLAN } else { 0 };
            out.extend_from_slice(&[TAG_IP, flags, flow.protocol]);
            put_address(out, &flow.source);
            put_address(out, &flow.destination);
            if let Some((from, to)) = flow.ports {
                out.extend_from_slice(&from.to_le_bytes());
                out.extend_from_slice(&to.to_le_bytes());
            }
            if let Some(vlan) = flow.vlan {
                out.extend_from_slice(&vlan.to_le_bytes());
            }
        }
        FlowKey::NotIp { ethertype, vlan } => {
            let flags = if vlan.is_some() { KEY_VLAN } else { 0 };
            out.extend_from_slice(&[TAG_NOT_IP, flags]);
            out.extend_from_slice(&ethertype.to_le_bytes());
            if let Some(vlan) = vlan {
                out.extend_from_slice(&vlan.to_le_bytes());
            }
        }
        FlowKey::Unreadable => out.push(TAG_UNREADABLE),
    }
}

/// A flow: its key, times from `base_ns`, packets, bytes, and its chunk runs from the
/// bucket's first chunk (a run may begin in the bucket before).
fn put_flow(out: &mut Vec<u8>, flow: &FlowEntry, base_ns: u64, bucket_first: u64) {
    put_key(out, &flow.key);
    put_signed(out, flow.first_ns.wrapping_sub(base_ns) as i64);
    put_varint(out, flow.last_ns.saturating_sub(flow.first_ns));
    put_varint(out, flow.packets);
    put_varint(out, flow.bytes);
    put_varint(out, flow.chunks.len() as u64);
    let mut before = bucket_first;
    for &(first, count) in &flow.chunks {
        put_signed(out, first.wrapping_sub(before) as i64);
        put_varint(out, count);
        before = first + count;
    }
}

/// A cursor over a block's bytes.
struct Reader<'a> {
    bytes: &'a [u8],
    at: usize,
}

impl Reader<'_> {
    fn take(&mut self, len: usize, what: &'static str) -> Result<&[u8], IndexError> {
        let end = self
            .at
            .checked_add(len)
            .filter(|&end| end <= self.bytes.len());
        let end = end.ok_or(IndexError::Truncated(what))?;
        let taken = &self.bytes[self.at..end];
        self.at = end;
        Ok(taken)
    }

    fn u8(&mut self, what: &'static str) -> Result<u8, IndexError> {
        Ok(self.take(1, what)?[0])
    }

    fn u16(&mut self, what: &'static str) -> Result<u16, IndexError> {
        Ok(u16::from_le_bytes(
            self.take(2, what)?.try_into().expect("2 bytes"),
        ))
    }

    fn u64(&mut self, what: &'static str) -> Result<u64, IndexError> {
        Ok(u64::from_le_bytes(
            self.take(8, what)?.try_into().expect("8 bytes"),
        ))
    }

    fn varint(&mut self, what: &'static str) -> Result<u64, IndexError> {
        let mut value = 0u64;
        for shift in (0..64).step_by(7) {
            let byte = self.u8(what)?;
            value |= u64::from(byte & 0x7f) << shift;
            if byte & 0x80 == 0 {
                return Ok(value);
            }
        }
        Err(IndexError::Malformed("a number longer than 64 bits"))
    }

    fn signed(&mut self, what: &'static str) -> Result<i64, IndexError> {
        let value = self.varint(what)?;
        Ok((value >> 1) as i64 ^ -((value & 1) as i64))
    }

    /// A count of items, each at least a byte: never more than the bytes left.
    fn count(&mut self, what: &'static str) -> Result<usize, IndexError> {
        let count = self.varint(what)?;
        match usize::try_from(count) {
            Ok(count) if count <= self.bytes.len() - self.at => Ok(count),
            _ => Err(IndexError::Malformed("a count larger than the block")),
        }
    }

    fn text(&mut self, what: &'static str) -> Result<String, IndexError> {
        let len = self.count(what)?;
        let bytes = self.take(len, what)?;
        String::from_utf8(bytes.to_vec())
            .map_err(|_| IndexError::Malformed("text that is not UTF-8"))
    }

    fn address(&mut self, v6: bool) -> Result<IpAddr, IndexError> {
        Ok(match v6 {
            true => {
                let octets: [u8; 16] = self.take(16, "flows")?.try_into().expect("16 bytes");
                IpAddr::V6(Ipv6Addr::from(octets))
            }
            false => {
                let octets: [u8; 4] = self.take(4, "flows")?.try_into().expect("4 bytes");
                IpAddr::V4(Ipv4Addr::from(octets))
            }
        })
    }
}

fn take_key(at: &mut Reader<'_>) -> Result<FlowKey, IndexError> {
    match at.u8("flows")? {
        TAG_IP => {
            let flags = at.u8("flows")?;
            let protocol = at.u8("flows")?;
            let source = at.address(flags & KEY_SOURCE_V6 != 0)?;
            let destination = at.address(flags & KEY_DESTINATION_V6 != 0)?;
            let ports = match flags & KEY_PORTS != 0 {
                true => Some((at.u16("flows")?, at.u16("flows")?)),
                false => None,
            };
            let vlan = match flags & KEY_VLAN != 0 {
                true => Some(at.u16("flows")?),
                false => None,
            };
            Ok(FlowKey::Ip(IpFlow {
                source,
                destination,
                protocol,
                ports,
                vlan,
            }))
        }
        TAG_NOT_IP => {
            let flags = at.u8("flows")?;
            let ethertype = at.u16("flows")?;
            let vlan = match flags & KEY_VLAN != 0 {
                true => Some(at.u16("flows")?),
                false => None,
            };
            Ok(FlowKey::NotIp { ethertype, vlan })
        }
        TAG_UNREADABLE => Ok(FlowKey::Unreadable),
        _ => Err(IndexError::Malformed("a flow key of no known kind")),
    }
}

fn take_flow(
    at: &mut Reader<'_>,
    base_ns: u64,
    bucket_first: u64,
    seed: u16,
) -> Result<FlowEntry, IndexError> {
    let key = take_key(at)?;
    let first_ns = base_ns.wrapping_add(at.signed("flows")? as u64);
    let last_ns = first_ns.saturating_add(at.varint("flows")?);
    let packets = at.varint("flows")?;
    let bytes = at.varint("flows")?;
    let mut chunks = Vec::new();
    let mut before = bucket_first;
    for _ in 0..at.count("flows")? {
        let first = before.wrapping_add(at.signed("flows")? as u64);
        let count = at.varint("flows")?;
        chunks.push((first, count));
        before = first.wrapping_add(count);
    }
    let community_id = match &key {
        FlowKey::Ip(flow) => Some(CommunityId::of(flow, seed)),
        _ => None,
    };
    Ok(FlowEntry {
        key,
        community_id,
        first_ns,
        last_ns,
        packets,
        bytes,
        chunks,
    })
}

#[cfg(test)]
mod tests {
    use super::super::scan::tests::frame;
    use super::*;
    use crate::layout::{encode_index, encode_packet, index_records, records, Content, Packet};

    /// A payload of `frames` (each from its port) at `time_ns`, after `prefix` index
    /// records.
    fn payload(prefix: &[Vec<u8>], frames: &[(u16, usize)], time_ns: u64) -> Vec<u8> {
        let mut out = vec![0u8; 1 << 16];
        let mut at = 0;
        for data in prefix {
            at += encode_index(&mut out[at..], time_ns, data);
        }
        for &(port, len) in frames {
            let data = frame(port, len);
            let packet = Packet {
                stream: 0,
                content: Content::Ethernet,
                timestamp_ns: time_ns,
                original_len: data.len() as u32,
                data: &data,
                peer: None,
                local: None,
                end: false,
            };
            at += encode_packet(&mut out[at..], &packet);
        }
        out.truncate(at);
        out
    }

    fn v6_flow() -> FlowEntry {
        FlowEntry {
            key: FlowKey::Ip(IpFlow {
                source: "fd00::1".parse().unwrap(),
                destination: "10.0.0.9".parse().unwrap(),
                protocol: 58,
                ports: None,
                vlan: Some(7),
            }),
            community_id: None,
            first_ns: 1_000,
            last_ns: 9_000,
            packets: 3,
            bytes: 4_000,
            chunks: vec![(99, 2), (105, 1)],
        }
    }

    fn block() -> IndexBlock {
        let mut flows = vec![v6_flow()];
        flows.push(FlowEntry {
            key: FlowKey::NotIp {
                ethertype: 0x0806,
                vlan: None,
            },
            chunks: vec![(100, 1)],
            ..v6_flow()
        });
        flows.push(FlowEntry {
            key: FlowKey::Unreadable,
            first_ns: 500, // before the first chunk's time
            ..v6_flow()
        });
        IndexBlock {
            first_sequence: 100,
            chunk_times_ns: vec![2_000, 2_500, 2_500, 4_000, 3_900, 8_000],
            flows,
            losses: vec![(3_000, "3 packets lost".into())],
            unkeyed: vec!["records that do not decode".into()],
        }
    }

    /// With the Community IDs a decode computes.
    fn with_ids(mut block: IndexBlock, seed: u16) -> IndexBlock {
        for flow in &mut block.flows {
            if let FlowKey::Ip(ip) = &flow.key {
                flow.community_id = Some(CommunityId::of(ip, seed));
            }
        }
        block
    }

    #[test]
    fn a_block_comes_back_as_it_was_whole_or_in_parts() {
        let block = block();
        let decoded = IndexBlock::decode(100, &block.encode(), 5).unwrap();
        assert_eq!(decoded, with_ids(block.clone(), 5));
        assert_eq!(decoded.end_sequence(), 106);
        assert_eq!(decoded.chunk_time_ns(103), Some(4_000));
        assert_eq!(decoded.chunk_time_ns(106), None);
        for part_max in [40, 64, 4096] {
            let parts = block.parts(part_max);
            assert!(parts.iter().all(|part| part.len() <= part_max.max(40)));
            let mut join = PartsJoin::new();
            let mut done = Vec::new();
            for data in &parts {
                done.extend(join.part(&decode_part(data).unwrap(), 5));
            }
            assert_eq!(done, vec![Ok(with_ids(block.clone(), 5))], "{part_max}");
        }
    }

    #[test]
    fn a_damaged_or_missing_part_makes_the_block_unreadable_never_smaller() {
        let block = block();
        let parts = block.parts(48);
        assert!(parts.len() > 3);
        // A byte of a part changed.
        let mut damaged = parts.clone();
        damaged[1][PART_HEADER_BYTES] ^= 1;
        let mut join = PartsJoin::new();
        let done: Vec<_> = (damaged.iter())
            .filter_map(|data| join.part(&decode_part(data).unwrap(), 0))
            .collect();
        assert_eq!(
            done,
            vec![Err(IndexError::Crc {
                first_sequence: 100
            })]
        );
        // A part missing: the next is out of place, and the rest come to nothing.
        let mut join = PartsJoin::new();
        let done: Vec<_> = (parts.iter().enumerate())
            .filter(|(index, _)| *index != 1)
            .filter_map(|(_, data)| join.part(&decode_part(data).unwrap(), 0))
            .collect();
        assert!(
            matches!(done[0], Err(IndexError::PartOutOfPlace { part: 2, .. })),
            "{done:?}"
        );
        assert!(done.iter().all(Result::is_err));
        // Cut short, or with a wrong magic or version.
        let bytes = block.encode();
        assert!(IndexBlock::decode(100, &bytes[..bytes.len() - 1], 0).is_err());
        assert_eq!(decode_part(&parts[0][..20]), Err(IndexError::ShortPart(20)));
        let mut wrong = parts[0].clone();
        wrong[0] = b'X';
        assert_eq!(decode_part(&wrong), Err(IndexError::Magic));
        wrong = parts[0].clone();
        wrong[4] = 9;
        assert_eq!(decode_part(&wrong), Err(IndexError::Version(9)));
    }

    #[test]
    fn the_indexer_keys_each_chunk_and_closes_buckets_that_go_on_from_each_other() {
        // Chunks of 8 MiB: a bucket of eight.
        let mut indexer = FlowIndexer::new(50, (8 << 20, 8 << 20), BUCKET_BYTES_MAX);
        let mut offset = 0;
        let mut blocks = Vec::new();
        let mut join = PartsJoin::new();
        for chunk in 0..20u64 {
            let mut prefix = Vec::new();
            while let Some(part) = indexer.pending_part() {
                prefix.push(part.to_vec());
                indexer.part_placed(64 + part.len());
            }
            let port = 1000 + (chunk % 3) as u16;
            let payload = payload(&prefix, &[(port, 100), (9, 50)], 1_000 * chunk);
            assert_eq!(
                records(&payload).count(),
                2,
                "the index records are passed over"
            );
            for data in index_records(&payload) {
                blocks.extend(join.part(&decode_part(data).unwrap(), 0));
            }
            indexer.chunk(1_000 * chunk, offset, &payload);
            offset += payload.len() as u64;
        }
        indexer.close_bucket();
        assert!(indexer.has_pending());
        assert_eq!(indexer.made().0, 3);
        let blocks: Vec<IndexBlock> = blocks.into_iter().map(Result::unwrap).collect();
        assert_eq!(blocks.len(), 2, "the third waits for a payload");
        assert_eq!(
            (blocks[0].first_sequence, blocks[0].end_sequence()),
            (50, 58)
        );
        assert_eq!(
            (blocks[1].first_sequence, blocks[1].end_sequence()),
            (58, 66)
        );
        assert_eq!(blocks[1].chunk_time_ns(60), Some(10_000));
        type Flow = (u16, u64, Vec<(u64, u64)>);
        let flows = |block: &IndexBlock| -> Vec<Flow> {
            block
                .flows
                .iter()
                .map(|flow| match flow.key {
                    FlowKey::Ip(IpFlow {
                        ports: Some((from, _)),
                        ..
                    }) => (from, flow.packets, flow.chunks.clone()),
                    _ => panic!("{flow:?}"),
                })
                .collect()
        };
        let mut first = flows(&blocks[0]);
        first.sort();
        assert_eq!(
            first,
            vec![
                (9, 8, vec![(50, 8)]),
                (1000, 3, vec![(50, 1), (53, 1), (56, 1)]),
                (1001, 3, vec![(51, 1), (54, 1), (57, 1)]),
                (1002, 2, vec![(52, 1), (55, 1)]),
            ]
        );
    }

    #[test]
    fn a_bucket_closes_at_its_time_span_too() {
        let mut indexer = FlowIndexer::new(0, (4096, 4000), BUCKET_BYTES_MAX);
        indexer.chunk(0, 0, &[]);
        indexer.chunk(BUCKET_SPAN_NS_MAX - 1, 0, &[]);
        assert!(!indexer.has_pending());
        indexer.chunk(BUCKET_SPAN_NS_MAX, 0, &[]);
        assert!(indexer.has_pending());
        assert_eq!(indexer.part_max(), 496);
        let part = decode_part(indexer.pending_part().unwrap()).unwrap();
        assert_eq!((part.first_sequence, part.part, part.parts), (0, 0, 1));
    }
}
