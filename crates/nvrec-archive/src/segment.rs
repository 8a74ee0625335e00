//! Segments: a recording's chunks back to back in one object, and their checksum.
//!
//! Each chunk is stored as the drives hold it, header and payload, without the padding
//! to the slot size: `[header 128 B][payload][header][payload]...`. A chunk therefore
//! decodes on its own ([`nvrec::layout::decode_chunk`]: both CRC32Cs checked), and a
//! reader can start at any chunk the manifest's index names.
//!
//! The object's CRC32C is built while the segment is filled, from each chunk's header and
//! its payload's CRC32C (the reader has just checked that payload against the chunk CRC
//! on the drive), joined with `crc32c_combine`: no second pass over the data. Before the
//! upload the bytes actually handed to the store are summed once more and must agree
//! ([`Segment::check`]): a verified archive is then the recording, without a read-back.
//! The join applies "append N zero bytes" to a CRC as a 32×32 matrix over GF(2) (`Shift`),
//! made once per length: chunks have one payload length but for the last, so each join
//! costs a few dozen XORs.

use std::sync::Mutex;

use bytes::Bytes;
use nvrec::layout::{crc32c, decode_chunk, ChunkHeader, ChunkView, CHUNK_HEADER_SIZE_BYTES};

use crate::manifest::SegmentInfo;
use crate::{ArchiveError, Result};

/// Segments are cut before the chunk that would make them larger than this (one chunk
/// larger than it gets a segment of its own).
pub const SEGMENT_SIZE_BYTES_DEFAULT: u64 = 64 << 20;

/// Appending `len` zero bytes to a CRC-32C's message, as a 32×32 matrix over GF(2) (one
/// column a bit): `crc32c(a ++ b) == Shift::zeros(b.len()).times(crc32c(a)) ^ crc32c(b)`,
/// the pre- and post-inversions cancelling as in zlib's `crc32_combine`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Shift([u32; 32]);

impl Shift {
    fn times(&self, mut vector: u32) -> u32 {
        let mut sum = 0;
        let mut column = 0;
        while vector != 0 {
            if vector & 1 != 0 {
                sum ^= self.0[column];
            }
            vector >>= 1;
            column += 1;
        }
        sum
    }

    /// This shift, then `next`.
    fn then(&self, next: &Shift) -> Shift {
        Shift(self.0.map(|column| next.times(column)))
    }

    fn zeros(len_bytes: usize) -> Shift {
        // One zero bit of the reflected CRC: bit 0 feeds the polynomial back, the others
        // move down by one.
        let mut one_bit = [0u32; 32];
        one_bit[0] = 0x82F6_3B78;
        for (bit, column) in one_bit.iter_mut().enumerate().skip(1) {
            *column = 1 << (bit - 1);
        }
        let mut power = Shift(one_bit);
        for _ in 0..3 {
            power = power.then(&power); // 2, 4, 8 bits: one byte.
        }
        let mut result = Shift(std::array::from_fn(|bit| 1u32 << bit));
        let mut n = len_bytes;
        while n > 0 {
            if n & 1 == 1 {
                result = result.then(&power);
            }
            power = power.then(&power);
            n >>= 1;
        }
        result
    }
}

/// The shifts of the last few lengths joined (a chunk header, the payload length).
#[derive(Default)]
struct Shifts(Vec<(usize, Shift)>);

impl Shifts {
    const KEPT: usize = 4;

    /// `crc32c(a ++ b)` from `crc32c(a)`, `crc32c(b)` and `b.len()`.
    fn combine(&mut self, crc_a: u32, crc_b: u32, len_b: usize) -> u32 {
        if len_b == 0 {
            return crc_a;
        }
        let shift = match self.0.iter().find(|(len, _)| *len == len_b) {
            Some((_, shift)) => *shift,
            None => {
                let shift = Shift::zeros(len_b);
                if self.0.len() == Self::KEPT {
                    self.0.remove(0);
                }
                self.0.push((len_b, shift));
                shift
            }
        };
        shift.times(crc_a) ^ crc_b
    }
}

/// Segments' memory kept for the next segments of an archive run, over all its passes
/// and recordings: a segment of 64 MiB made anew each time is 64 MiB touched anew (the
/// allocator gives memory that large back to the system when it is dropped), so the
/// resident memory of a long `archive --follow` rose and fell with every segment instead
/// of staying where its first segments brought it.
#[derive(Debug, Default)]
pub struct Spares {
    kept: Mutex<Vec<Vec<u8>>>,
}

/// Segments' memory [`Spares`] keeps at most: the one filling, the one uploading, the one
/// read ahead.
const SPARES_KEPT: usize = 3;

impl Spares {
    /// Memory kept, if there is some.
    pub fn take(&self) -> Option<Vec<u8>> {
        self.kept.lock().expect("the spares' lock").pop()
    }

    /// Keeps `bytes` (emptied) for a later segment, unless enough is kept already.
    pub fn give(&self, mut bytes: Vec<u8>) {
        let mut kept = self.kept.lock().expect("the spares' lock");
        if kept.len() < SPARES_KEPT && bytes.capacity() > 0 {
            bytes.clear();
            kept.push(bytes);
        }
    }

    /// How many are kept.
    pub fn len(&self) -> usize {
        self.kept.lock().expect("the spares' lock").len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// A segment being filled.
pub struct SegmentBuilder {
    recording_start_ns: u64,
    bytes: Vec<u8>,
    crc32c: u32,
    shifts: Shifts,
    capacity_bytes: u64,
    first_sequence: u64,
    last_sequence: u64,
    offsets: Vec<u64>,
    timestamps_ns: Vec<u64>,
}

/// A finished segment: its bytes and what the manifest says about it.
pub struct Segment {
    pub index: u32,
    pub bytes: Bytes,
    pub info: SegmentInfo,
}

impl SegmentBuilder {
    /// A builder for segments of about `capacity_bytes` of a recording that began at
    /// `recording_start_ns` (its entry's `start_ns`): the chunk index holds each chunk's
    /// time on the recording's timeline (`ChunkHeader::time_ns`), what windows are found
    /// by.
    pub fn new(capacity_bytes: u64, recording_start_ns: u64) -> SegmentBuilder {
        SegmentBuilder {
            recording_start_ns,
            bytes: Vec::with_capacity(capacity_bytes.min(1 << 30) as usize),
            crc32c: 0,
            shifts: Shifts::default(),
            capacity_bytes,
            first_sequence: 0,
            last_sequence: 0,
            offsets: Vec::new(),
            timestamps_ns: Vec::new(),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.offsets.is_empty()
    }

    /// The sequence and timestamp of the segment's first chunk, if it has one.
    pub fn first(&self) -> Option<(u64, u64)> {
        Some((self.first_sequence, *self.timestamps_ns.first()?))
    }

    /// When `header`'s chunk began on the recording's timeline, as the chunk index holds it.
    pub fn time_ns(&self, header: &ChunkHeader) -> u64 {
        header.time_ns(self.recording_start_ns)
    }

    /// Whether a chunk with `payload_len_bytes` no longer fits (an empty segment takes any).
    pub fn is_full_for(&self, payload_len_bytes: usize) -> bool {
        !self.is_empty()
            && (self.bytes.len() + CHUNK_HEADER_SIZE_BYTES + payload_len_bytes) as u64
                > self.capacity_bytes
    }

    /// Appends a chunk, framed as on the drive.
    pub fn push(&mut self, header: &ChunkHeader, payload: &[u8]) -> Result<()> {
        assert_eq!(header.payload_len_bytes as usize, payload.len());
        let start = self.bytes.len();
        let payload_crc = crc32c(payload);
        self.bytes.resize(start + CHUNK_HEADER_SIZE_BYTES, 0);
        self.bytes.extend_from_slice(payload);
        header
            .encode_into_with_payload_crc(&mut self.bytes[start..], payload_crc)
            .map_err(|error| ArchiveError::Checksum {
                key: format!("chunk sequence {}", header.sequence),
                why: format!("its header does not encode again: {error}"),
            })?;
        let header_crc = crc32c(&self.bytes[start..start + CHUNK_HEADER_SIZE_BYTES]);
        self.crc32c = self
            .shifts
            .combine(self.crc32c, header_crc, CHUNK_HEADER_SIZE_BYTES);
        self.crc32c = self.shifts.combine(self.crc32c, payload_crc, payload.len());
        if self.offsets.is_empty() {
            self.first_sequence = header.sequence;
        }
        self.last_sequence = header.sequence;
        self.offsets.push(start as u64);
        self.timestamps_ns.push(self.time_ns(header));
        Ok(())
    }

    /// Fills `spare` (a segment's memory that was uploaded: its pages are already
    /// there) from now on, instead of the memory it has, which is returned. Only an empty
    /// builder changes its memory.
    pub fn refill(&mut self, mut spare: Vec<u8>) -> Vec<u8> {
        assert!(
            self.is_empty(),
            "a builder's memory changes only between segments"
        );
        spare.clear();
        std::mem::replace(&mut self.bytes, spare)
    }

    /// The memory being filled, for the next builder (what it holds is dropped).
    pub fn into_bytes(self) -> Vec<u8> {
        self.bytes
    }

    /// The segment, ready for `key`; the builder is empty again, filling `reuse` (a
    /// segment's memory that was uploaded: its pages are already there) where given.
    pub fn take(&mut self, index: u32, key: String, reuse: Option<Vec<u8>>) -> Segment {
        let next = match reuse {
            Some(mut bytes) => {
                bytes.clear();
                bytes
            }
            None => Vec::with_capacity(self.capacity_bytes.min(1 << 30) as usize),
        };
        let bytes = std::mem::replace(&mut self.bytes, next);
        let offsets = std::mem::take(&mut self.offsets);
        let timestamps_ns = std::mem::take(&mut self.timestamps_ns);
        let info = SegmentInfo {
            key,
            size_bytes: bytes.len() as u64,
            crc32c: std::mem::take(&mut self.crc32c),
            e_tag: None,
            chunk_count: offsets.len() as u64,
            first_sequence: self.first_sequence,
            last_sequence: self.last_sequence,
            first_timestamp_ns: timestamps_ns.first().copied().unwrap_or(0),
            last_timestamp_ns: timestamps_ns.last().copied().unwrap_or(0),
            chunk_offsets: offsets,
            chunk_timestamps_ns: timestamps_ns,
            flows: None,
        };
        Segment {
            index,
            bytes: Bytes::from(bytes),
            info,
        }
    }
}

impl Segment {
    /// Sums the bytes about to be uploaded and compares them with the CRC32C built from
    /// the recorded chunks.
    pub fn check(&self) -> Result<()> {
        let actual = crc32c(&self.bytes);
        if actual == self.info.crc32c {
            Ok(())
        } else {
            Err(ArchiveError::Checksum {
                key: self.info.key.clone(),
                why: format!(
                    "the bytes to upload sum to CRC32C {actual:#010x}, the recorded chunks to {:#010x}",
                    self.info.crc32c
                ),
            })
        }
    }
}

/// The chunk at `offset` of a segment's bytes (which may start anywhere in the object, at
/// `base` of it), decoded and checked; returns it with the offset of the next one.
pub fn chunk_at(
    bytes: &[u8],
    offset: usize,
) -> std::result::Result<(ChunkView<'_>, usize), nvrec::layout::LayoutError> {
    let rest = bytes.get(offset..).unwrap_or_default();
    let view = decode_chunk(rest)?;
    let end = offset + CHUNK_HEADER_SIZE_BYTES + view.payload.len();
    Ok((view, end))
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use nvrec::layout::{ChunkFlags, Uuid};

    /// The header of chunk `sequence` of a test recording, with `len` bytes of payload.
    pub(crate) fn header(sequence: u64, len: usize) -> ChunkHeader {
        ChunkHeader {
            set_uuid: Uuid([7; 16]),
            recording_id: 1,
            member_index: (sequence % 2) as u16,
            stream_id: 0,
            sequence,
            slot_index: sequence / 2,
            timestamp_ns: 1_000_000 + sequence,
            elapsed_ns: 0,
            stream_offset_bytes: sequence * 1000,
            gap_bytes: 0,
            payload_len_bytes: len as u32,
            flags: if sequence == 0 {
                ChunkFlags::FIRST
            } else {
                ChunkFlags::empty()
            },
        }
    }

    #[test]
    fn the_checksum_built_from_the_chunks_is_the_objects() {
        let mut builder = SegmentBuilder::new(1 << 20, 0);
        for sequence in 0..20u64 {
            let len = (sequence as usize * 37) % 1000;
            let payload: Vec<u8> = (0..len).map(|i| (i as u64 * 31 + sequence) as u8).collect();
            builder.push(&header(sequence, len), &payload).unwrap();
        }
        let segment = builder.take(0, "seg".into(), None);
        assert!(builder.is_empty());
        segment.check().unwrap();
        assert_eq!(segment.info.crc32c, crc32c(&segment.bytes));
        assert_eq!(segment.info.chunk_count, 20);
        // Every chunk decodes where the index says, with its CRCs.
        let mut offset = 0;
        for (i, &start) in segment.info.chunk_offsets.iter().enumerate() {
            assert_eq!(start as usize, offset);
            let (view, next) = chunk_at(&segment.bytes, offset).unwrap();
            assert_eq!(view.header.sequence, i as u64);
            assert_eq!(
                view.header.timestamp_ns,
                segment.info.chunk_timestamps_ns[i]
            );
            offset = next;
        }
        assert_eq!(offset, segment.bytes.len());
    }

    #[test]
    fn spares_keep_segments_memory_emptied_up_to_a_bound() {
        let spares = Spares::default();
        let mut builder = SegmentBuilder::new(1 << 20, 0);
        builder.push(&header(0, 100), &[5u8; 100]).unwrap();
        let segment = builder.take(0, "seg".into(), None);
        let used = Vec::from(segment.bytes.try_into_mut().unwrap());
        let (capacity, at) = (used.capacity(), used.as_ptr());
        spares.give(used);
        let mut next = SegmentBuilder::new(1 << 20, 0);
        drop(next.refill(spares.take().unwrap()));
        let again = next.into_bytes();
        assert!(again.is_empty(), "a spare is handed out empty");
        assert_eq!(
            (again.capacity(), again.as_ptr()),
            (capacity, at),
            "the same memory"
        );
        for _ in 0..SPARES_KEPT + 2 {
            spares.give(Vec::with_capacity(64));
        }
        spares.give(Vec::new());
        assert_eq!(spares.len(), SPARES_KEPT);
    }

    #[test]
    fn a_changed_byte_fails_the_check() {
        let mut builder = SegmentBuilder::new(1 << 20, 0);
        builder.push(&header(0, 100), &[5u8; 100]).unwrap();
        let mut segment = builder.take(0, "seg".into(), None);
        let mut bytes = segment.bytes.to_vec();
        bytes[150] ^= 1;
        segment.bytes = Bytes::from(bytes);
        assert!(matches!(
            segment.check(),
            Err(ArchiveError::Checksum { .. })
        ));
        assert!(chunk_at(&segment.bytes, 0).is_err());
    }

    #[test]
    fn the_shift_joins_crcs_as_the_reference_does() {
        let mut shifts = Shifts::default();
        let mut state = 0x1234_5678_9abc_def0u64;
        for len in [
            1usize,
            2,
            7,
            8,
            128,
            131_072 - 128,
            131_072,
            1 << 20,
            1_000_003,
        ] {
            for _ in 0..3 {
                state = state
                    .wrapping_mul(6364136223846793005)
                    .wrapping_add(1442695040888963407);
                let (a, b) = ((state >> 32) as u32, state as u32);
                assert_eq!(
                    shifts.combine(a, b, len),
                    crc32c::crc32c_combine(a, b, len),
                    "length {len}"
                );
            }
        }
        assert_eq!(shifts.0.len(), Shifts::KEPT);
        assert_eq!(shifts.combine(7, 9, 0), 7);
        let (a, b) = (b"chunk header".as_slice(), b" and its payload".as_slice());
        let joined = [a, b].concat();
        assert_eq!(
            shifts.combine(crc32c(a), crc32c(b), b.len()),
            crc32c(&joined)
        );
    }

    #[test]
    fn segments_are_cut_before_the_chunk_that_overflows() {
        let mut builder = SegmentBuilder::new(1000, 0);
        assert!(
            !builder.is_full_for(5000),
            "an empty segment takes any chunk"
        );
        builder.push(&header(0, 500), &[0; 500]).unwrap();
        // 628 bytes so far; a header and 244 bytes make exactly 1000.
        assert!(!builder.is_full_for(244));
        assert!(builder.is_full_for(245));
    }
}
