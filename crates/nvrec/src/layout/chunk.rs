//! The chunk header: the self-describing frame around every payload in the data area.

use std::ops::Range;

use super::codec::{
    check_crc, check_preamble, crc32c, crc32c_append, crc32c_combine, get_array, get_u16, get_u32,
    get_u64, put_bytes, put_preamble_minor, put_u16, put_u32, put_u64, take,
};
use super::error::{LayoutError, Structure};
use super::flags::flag_set;
use super::uuid::Uuid;
use super::{
    payload_capacity_bytes, CHUNK_HEADER_SIZE_BYTES, CHUNK_MAGIC, CHUNK_VERSION_MINOR,
    MAX_CHUNK_SIZE_BYTES, MAX_MEMBERS,
};

const H: Structure = Structure::ChunkHeader;
const HEADER: usize = CHUNK_HEADER_SIZE_BYTES;

/// Byte offsets of the chunk header fields (see `docs/FORMAT.md`, "Chunk header").
pub(crate) mod off {
    pub const MEMBER_INDEX: usize = 12;
    pub const STREAM_ID: usize = 14;
    pub const SET_UUID: usize = 16;
    pub const RECORDING_ID: usize = 32;
    pub const FLAGS: usize = 36;
    pub const SEQUENCE: usize = 40;
    pub const SLOT_INDEX: usize = 48;
    pub const TIMESTAMP_NS: usize = 56;
    pub const STREAM_OFFSET_BYTES: usize = 64;
    pub const GAP_BYTES: usize = 72;
    pub const PAYLOAD_LEN_BYTES: usize = 80;
    pub const ELAPSED_NS: usize = 84;
    // 92..120 reserved
    pub const CHUNK_CRC: usize = 120;
    pub const HEADER_CRC: usize = 124;
}

flag_set! {
    /// Flags of a chunk. Bits 0..16 must be understood by a reader (unknown ones make the
    /// chunk undecodable: [`LayoutError::UnsupportedFeature`]); bits 16..32 may be ignored.
    pub struct ChunkFlags {
        /// `gap_bytes` stream bytes were lost just before this chunk's payload (the input
        /// outran the drives). Set exactly when `gap_bytes > 0`. The payload may be empty.
        const GAP = 1 << 0;
        /// The first chunk of its recording (its stream offset is its `gap_bytes`).
        const FIRST = 1 << 1;
        /// The last chunk of its recording: the end-of-recording marker. The payload may
        /// be empty. Without [`ChunkFlags::ABORTED`] the recording was closed cleanly.
        const END = 1 << 2;
        /// With `END`: the recording was ended early by an error or an abort request.
        const ABORTED = 1 << 3;
        /// The payload is whole records (datagrams, packets, losses; format 1.2,
        /// `records`), not a byte stream.
        const RECORDS = 1 << 4;
        /// With `RECORDS`: the payload may begin with index records (format 1.9,
        /// `flow::index`), which a reader that does not know them would take for packets.
        const FLOW_INDEX = 1 << 5;
        /// The payload came from the seekable test pattern (checkable without a copy of
        /// the input). Ignorable.
        const PATTERN = 1 << 16;
        /// Written again on this member after the member it first went to was retired
        /// (format 1.1): its sequence number is lower than those of the chunks before it
        /// here. The recording's retirement table says where such chunks lie. Ignorable.
        const REDIRECTED = 1 << 17;
        /// `elapsed_ns` holds the chunk's time on the monotonic clock since the recording
        /// began (format 1.5). Ignorable: without it the chunk has only its wall-clock
        /// time.
        const ELAPSED = 1 << 18;
    }
}

/// The header at the start of every chunk, [`CHUNK_HEADER_SIZE_BYTES`] long. With it, a
/// chunk is decodable on its own: which set and recording it belongs to, where its
/// payload sits in the stream and in time, and two CRC32Cs (header alone, header and
/// payload).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ChunkHeader {
    /// The volume set; never nil.
    pub set_uuid: Uuid,
    /// The recording, numbered from 1 within the set.
    pub recording_id: u32,
    /// The member the chunk was written to (lets a reader catch a misplaced drive).
    pub member_index: u16,
    /// Which input stream of the recording the payload belongs to (0 for a single one).
    pub stream_id: u16,
    /// Global sequence number within the set: every chunk written to any member gets the
    /// next one, across recordings; never reused. Orders chunks, and in ring mode tells a
    /// new chunk from an overwritten one.
    pub sequence: u64,
    /// The data slot of the member the chunk was written to (catches misdirected writes
    /// and stale slots).
    pub slot_index: u64,
    /// When the payload's first byte arrived: nanoseconds since the Unix epoch (UTC), as
    /// the wall clock said then (a step of the wall clock shows here).
    pub timestamp_ns: u64,
    /// With [`ChunkFlags::ELAPSED`] (format 1.5): the same moment on the monotonic clock,
    /// nanoseconds since the recording began, which no step of the wall clock moves; 0
    /// without the flag. [`ChunkHeader::time_ns`] puts a chunk on the recording's timeline.
    pub elapsed_ns: u64,
    /// Offset of the payload's first byte in its stream, lost bytes included.
    pub stream_offset_bytes: u64,
    /// Stream bytes lost right before this payload: `stream_offset_bytes - gap_bytes ..
    /// stream_offset_bytes`. Non-zero exactly when [`ChunkFlags::GAP`] is set.
    pub gap_bytes: u64,
    /// Payload bytes used; the payload starts right after the header.
    pub payload_len_bytes: u32,
    pub flags: ChunkFlags,
}

/// A decoded chunk: its header and its payload, borrowed from the slot.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ChunkView<'a> {
    pub header: ChunkHeader,
    pub payload: &'a [u8],
}

impl ChunkHeader {
    /// Checks the fields and the rules that tie them together.
    pub fn validate(&self) -> Result<(), LayoutError> {
        if self.set_uuid.is_nil() {
            return Err(LayoutError::invalid(H, "set_uuid", "is nil"));
        }
        if self.recording_id == 0 {
            return Err(LayoutError::invalid(
                H,
                "recording_id",
                "is 0 (ids start at 1)",
            ));
        }
        if self.member_index >= MAX_MEMBERS {
            return Err(LayoutError::invalid(
                H,
                "member_index",
                format!("{} is not below {MAX_MEMBERS}", self.member_index),
            ));
        }
        let unknown = self.flags.unknown_incompat_bits();
        if unknown != 0 {
            return Err(LayoutError::UnsupportedFeature {
                structure: H,
                field: "flags",
                bits: unknown,
            });
        }
        if !self.flags.contains(ChunkFlags::ELAPSED) && self.elapsed_ns != 0 {
            return Err(LayoutError::invalid(
                H,
                "elapsed_ns",
                "is set without the ELAPSED flag",
            ));
        }
        if self.flags.contains(ChunkFlags::ABORTED) && !self.flags.contains(ChunkFlags::END) {
            return Err(LayoutError::invalid(H, "flags", "ABORTED without END"));
        }
        if self.flags.contains(ChunkFlags::GAP) != (self.gap_bytes > 0) {
            return Err(LayoutError::invalid(
                H,
                "gap_bytes",
                format!(
                    "{} does not agree with the GAP flag (set exactly when bytes were lost)",
                    self.gap_bytes
                ),
            ));
        }
        if self.gap_bytes > self.stream_offset_bytes {
            return Err(LayoutError::invalid(
                H,
                "gap_bytes",
                format!(
                    "{} lost bytes before stream offset {}",
                    self.gap_bytes, self.stream_offset_bytes
                ),
            ));
        }
        if self.flags.contains(ChunkFlags::FIRST) && self.stream_offset_bytes != self.gap_bytes {
            return Err(LayoutError::invalid(
                H,
                "stream_offset_bytes",
                format!(
                    "{} in the first chunk of a recording, which starts at its gap ({})",
                    self.stream_offset_bytes, self.gap_bytes
                ),
            ));
        }
        let max_payload = payload_capacity_bytes(MAX_CHUNK_SIZE_BYTES);
        if self.payload_len_bytes > max_payload {
            return Err(LayoutError::invalid(
                H,
                "payload_len_bytes",
                format!("{} exceeds {max_payload}", self.payload_len_bytes),
            ));
        }
        if self
            .stream_offset_bytes
            .checked_add(u64::from(self.payload_len_bytes))
            .is_none()
        {
            return Err(LayoutError::invalid(
                H,
                "stream_offset_bytes",
                "payload would end past 2^64",
            ));
        }
        Ok(())
    }

    /// The chunk's time on the timeline of a recording that began at `recording_start_ns`
    /// (the entry's `start_ns`): the start plus the monotonic time elapsed, so that a step
    /// of the wall clock during the recording moves no chunk; a chunk without
    /// [`ChunkFlags::ELAPSED`] (before format 1.5) has only its wall-clock time. Windows and
    /// pacing go by this.
    #[inline]
    pub fn time_ns(&self, recording_start_ns: u64) -> u64 {
        if self.flags.contains(ChunkFlags::ELAPSED) {
            recording_start_ns.saturating_add(self.elapsed_ns)
        } else {
            self.timestamp_ns
        }
    }

    /// How far the wall clock had been stepped, relative to the recording's monotonic time,
    /// when this chunk was made: its wall-clock time less its time on the timeline (zero
    /// without [`ChunkFlags::ELAPSED`]). A change of it between chunks is a clock step.
    #[inline]
    pub fn wall_offset_ns(&self, recording_start_ns: u64) -> i64 {
        self.timestamp_ns
            .wrapping_sub(self.time_ns(recording_start_ns)) as i64
    }

    /// Where the payload sits in a slot: `CHUNK_HEADER_SIZE_BYTES..+payload_len_bytes`.
    pub fn payload_range(&self) -> Range<usize> {
        HEADER..HEADER.saturating_add(self.payload_len_bytes as usize)
    }

    /// Frames a chunk in place: `slot` already holds `payload_len_bytes` of payload at
    /// [`CHUNK_HEADER_SIZE_BYTES`]; this writes the header into `slot[..128]`, with the
    /// chunk CRC32C over the header and that payload, and the header CRC32C. The payload
    /// is read once (for its CRC) and never copied. Bytes of the slot after the payload
    /// are left as they are and are not covered by any CRC.
    ///
    /// Fails if the header is invalid ([`ChunkHeader::validate`]) or the slot is shorter
    /// than header plus payload ([`LayoutError::Truncated`]); the slot is untouched then.
    pub fn encode_into(&self, slot: &mut [u8]) -> Result<(), LayoutError> {
        self.seal_into(slot, crc32c_append)
    }

    /// As [`ChunkHeader::encode_into`], for a payload whose CRC32C the caller already has
    /// (computed when the payload was made, while it was still in the cache): the payload is
    /// not read again. `payload_crc32c` must be `crc32c(payload)`; the reader checks the
    /// chunk CRC over the bytes as they are, so a wrong value can only make the chunk fail.
    pub fn encode_into_with_payload_crc(
        &self,
        slot: &mut [u8],
        payload_crc32c: u32,
    ) -> Result<(), LayoutError> {
        let payload_len_bytes = self.payload_len_bytes as usize;
        self.seal_into(slot, |header_crc, _payload| {
            crc32c_combine(header_crc, payload_crc32c, payload_len_bytes)
        })
    }

    /// What both `encode_into`s share: checks the header and the slot's length, then
    /// writes the header into `slot[..128]` with the chunk CRC32C `chunk_crc` gives from the
    /// header's CRC32C and the payload, and the header CRC32C.
    #[inline]
    fn seal_into(
        &self,
        slot: &mut [u8],
        chunk_crc: impl FnOnce(u32, &[u8]) -> u32,
    ) -> Result<(), LayoutError> {
        self.validate()?;
        let end = self.payload_range().end;
        if slot.len() < end {
            return Err(LayoutError::Truncated {
                structure: Structure::Chunk,
                needed_bytes: end,
                got_bytes: slot.len(),
            });
        }
        let mut h = self.header_bytes_without_crcs();
        let chunk_crc = chunk_crc(crc32c(&h), &slot[HEADER..end]);
        put_u32(&mut h, off::CHUNK_CRC, chunk_crc);
        let header_crc = crc32c(&h[..off::HEADER_CRC]);
        put_u32(&mut h, off::HEADER_CRC, header_crc);
        slot[..HEADER].copy_from_slice(&h);
        Ok(())
    }

    /// The header with both CRC fields zero: what the chunk CRC starts from.
    fn header_bytes_without_crcs(&self) -> [u8; HEADER] {
        let mut h = [0u8; HEADER];
        put_preamble_minor(&mut h, &CHUNK_MAGIC, CHUNK_VERSION_MINOR);
        put_u16(&mut h, off::MEMBER_INDEX, self.member_index);
        put_u16(&mut h, off::STREAM_ID, self.stream_id);
        put_bytes(&mut h, off::SET_UUID, self.set_uuid.as_bytes());
        put_u32(&mut h, off::RECORDING_ID, self.recording_id);
        put_u32(&mut h, off::FLAGS, self.flags.bits());
        put_u64(&mut h, off::SEQUENCE, self.sequence);
        put_u64(&mut h, off::SLOT_INDEX, self.slot_index);
        put_u64(&mut h, off::TIMESTAMP_NS, self.timestamp_ns);
        put_u64(&mut h, off::STREAM_OFFSET_BYTES, self.stream_offset_bytes);
        put_u64(&mut h, off::GAP_BYTES, self.gap_bytes);
        put_u32(&mut h, off::PAYLOAD_LEN_BYTES, self.payload_len_bytes);
        put_u64(&mut h, off::ELAPSED_NS, self.elapsed_ns);
        h
    }
}

/// The payload area of a slot (everything after the header), where the hot path puts
/// the payload before [`ChunkHeader::encode_into`]. Empty for a slot not longer than a
/// header.
pub fn slot_payload_mut(slot: &mut [u8]) -> &mut [u8] {
    slot.get_mut(HEADER..).unwrap_or_default()
}

/// Decodes a header on its own, from the first [`CHUNK_HEADER_SIZE_BYTES`] of `bytes`:
/// magic, major version, header CRC32C and fields. The payload is not checked; a scan
/// that reads only the first logical block of each slot uses this, then
/// [`decode_chunk`] for the slots it keeps.
pub fn decode_chunk_header(bytes: &[u8]) -> Result<ChunkHeader, LayoutError> {
    parse_header(bytes).map(|(header, _)| header)
}

/// Decodes a whole chunk from a slot (or any slice that holds at least header and
/// payload): everything [`decode_chunk_header`] checks, then that the payload fits in
/// `slot` and the chunk CRC32C over header and payload.
pub fn decode_chunk(slot: &[u8]) -> Result<ChunkView<'_>, LayoutError> {
    let (header, stored_chunk_crc) = parse_header(slot)?;
    let range = header.payload_range();
    let payload = slot.get(range.clone()).ok_or(LayoutError::Truncated {
        structure: Structure::Chunk,
        needed_bytes: range.end,
        got_bytes: slot.len(),
    })?;
    // Over the header as stored (its CRC fields taken as zero), not as this version would
    // write it: a header of another minor version (reserved bytes given meaning, another
    // version number) still checks.
    let mut stored = [0u8; HEADER];
    stored[..off::CHUNK_CRC].copy_from_slice(&slot[..off::CHUNK_CRC]);
    let computed = crc32c_append(crc32c(&stored), payload);
    check_crc(Structure::Chunk, stored_chunk_crc, computed)?;
    Ok(ChunkView { header, payload })
}

/// Decodes and checks the header; returns it with the stored chunk CRC.
fn parse_header(bytes: &[u8]) -> Result<(ChunkHeader, u32), LayoutError> {
    let h = take::<HEADER>(H, bytes)?;
    check_preamble(H, h, &CHUNK_MAGIC)?;
    check_crc(
        H,
        get_u32(h, off::HEADER_CRC),
        crc32c(&h[..off::HEADER_CRC]),
    )?;
    let header = ChunkHeader {
        set_uuid: Uuid(get_array(h, off::SET_UUID)),
        recording_id: get_u32(h, off::RECORDING_ID),
        member_index: get_u16(h, off::MEMBER_INDEX),
        stream_id: get_u16(h, off::STREAM_ID),
        sequence: get_u64(h, off::SEQUENCE),
        slot_index: get_u64(h, off::SLOT_INDEX),
        timestamp_ns: get_u64(h, off::TIMESTAMP_NS),
        stream_offset_bytes: get_u64(h, off::STREAM_OFFSET_BYTES),
        gap_bytes: get_u64(h, off::GAP_BYTES),
        payload_len_bytes: get_u32(h, off::PAYLOAD_LEN_BYTES),
        flags: ChunkFlags::from_bits_retain(get_u32(h, off::FLAGS)),
        elapsed_ns: get_u64(h, off::ELAPSED_NS),
    };
    header.validate()?;
    Ok((header, get_u32(h, off::CHUNK_CRC)))
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::layout::codec::VERSION_MAJOR_OFFSET;

    pub(crate) fn sample() -> ChunkHeader {
        ChunkHeader {
            set_uuid: Uuid::from_random_bytes([0xa5; 16]),
            recording_id: 3,
            member_index: 1,
            stream_id: 0,
            sequence: 1_000_001,
            slot_index: 4242,
            timestamp_ns: 1_767_225_600_000_000_000,
            elapsed_ns: 0,
            stream_offset_bytes: 131_072_000,
            gap_bytes: 0,
            payload_len_bytes: 4000,
            flags: ChunkFlags::PATTERN,
        }
    }

    /// An 8 KiB slot of 0xee with `header`'s payload filled with a recognizable pattern,
    /// framed.
    pub(crate) fn framed(header: &ChunkHeader) -> Vec<u8> {
        let mut slot = vec![0xeeu8; 8192];
        let len = header.payload_len_bytes as usize;
        for (i, b) in slot_payload_mut(&mut slot)[..len].iter_mut().enumerate() {
            *b = (i * 7 + 3) as u8;
        }
        header.encode_into(&mut slot).expect("frames");
        slot
    }

    #[test]
    fn two_clocks_round_trip_and_a_chunk_of_one_clock_reads_as_before() {
        let start_ns = sample().timestamp_ns - 5_000;
        let both = ChunkHeader {
            flags: ChunkFlags::ELAPSED,
            elapsed_ns: 2_000,
            ..sample()
        };
        let slot = framed(&both);
        assert_eq!(get_u16(&slot, 10), CHUNK_VERSION_MINOR);
        let view = decode_chunk(&slot).unwrap();
        assert_eq!(view.header, both);
        assert_eq!(view.header.time_ns(start_ns), start_ns + 2_000);
        assert_eq!(view.header.wall_offset_ns(start_ns), 3_000);
        // A chunk of format 1.4 and before: version 0, the bytes zero, one clock.
        let mut old = framed(&sample());
        put_u16(&mut old, 10, 0);
        let mut stored = [0u8; HEADER];
        stored[..off::CHUNK_CRC].copy_from_slice(&old[..off::CHUNK_CRC]);
        let end = sample().payload_range().end;
        let chunk_crc = crc32c_append(crc32c(&stored), &old[HEADER..end]);
        put_u32(&mut old, off::CHUNK_CRC, chunk_crc);
        let header_crc = crc32c(&old[..off::HEADER_CRC]);
        put_u32(&mut old, off::HEADER_CRC, header_crc);
        let view = decode_chunk(&old).unwrap();
        assert_eq!(view.header.elapsed_ns, 0);
        assert_eq!(view.header.time_ns(start_ns), sample().timestamp_ns);
        // Elapsed time without its flag is refused.
        let stray = ChunkHeader {
            elapsed_ns: 1,
            ..sample()
        };
        assert!(stray.validate().is_err());
    }

    #[test]
    fn a_chunk_of_another_minor_version_still_checks() {
        // A later minor may stamp another version and give reserved bytes a meaning: the
        // chunk CRC covers the header as stored, so this reader still accepts it.
        let h = sample();
        let mut slot = framed(&h);
        slot[10] = 7; // minor version 7
        slot[100] = 0xab; // a reserved byte
        let len = h.payload_len_bytes as usize;
        let mut stored = [0u8; HEADER];
        stored[..off::CHUNK_CRC].copy_from_slice(&slot[..off::CHUNK_CRC]);
        let chunk_crc = crc32c_append(crc32c(&stored), &slot[HEADER..HEADER + len]);
        slot[off::CHUNK_CRC..off::CHUNK_CRC + 4].copy_from_slice(&chunk_crc.to_le_bytes());
        let header_crc = crc32c(&slot[..off::HEADER_CRC]);
        slot[off::HEADER_CRC..off::HEADER_CRC + 4].copy_from_slice(&header_crc.to_le_bytes());
        let view = decode_chunk(&slot).expect("a 1.7 chunk decodes");
        assert_eq!(view.header, h);
        // And a flipped payload byte still fails.
        slot[HEADER] ^= 1;
        assert!(decode_chunk(&slot).is_err());
    }

    #[test]
    fn framing_with_a_precomputed_payload_crc_is_identical() {
        for len in [0u32, 1, 4000, 8064] {
            let header = ChunkHeader {
                payload_len_bytes: len,
                ..sample()
            };
            let expected = framed(&header);
            let mut slot = expected.clone();
            slot[..HEADER].fill(0);
            let payload_crc = crc32c(&slot[HEADER..HEADER + len as usize]);
            header
                .encode_into_with_payload_crc(&mut slot, payload_crc)
                .unwrap();
            assert_eq!(slot, expected, "payload of {len} bytes");
            assert!(decode_chunk(&slot).is_ok());
        }
    }

    /// Recomputes both CRCs of a framed slot after a deliberate edit of the header.
    fn reframe(slot: &mut [u8]) {
        let len = get_u32(slot, off::PAYLOAD_LEN_BYTES) as usize;
        slot[off::CHUNK_CRC..HEADER].fill(0);
        let crc = crc32c_append(crc32c(&slot[..HEADER]), &slot[HEADER..HEADER + len]);
        put_u32(slot, off::CHUNK_CRC, crc);
        let crc = crc32c(&slot[..off::HEADER_CRC]);
        put_u32(slot, off::HEADER_CRC, crc);
    }

    #[test]
    fn round_trip_in_place() {
        let mut gap = sample();
        gap.flags = ChunkFlags::GAP;
        gap.gap_bytes = 12_345;
        let mut first = sample();
        first.flags = ChunkFlags::FIRST | ChunkFlags::GAP;
        first.gap_bytes = 99;
        first.stream_offset_bytes = 99;
        let mut end = sample();
        end.flags = ChunkFlags::END | ChunkFlags::ABORTED | ChunkFlags::from_bits_retain(1 << 31);
        end.payload_len_bytes = 0;
        let mut full = sample();
        full.payload_len_bytes = payload_capacity_bytes(8192);
        full.stream_id = u16::MAX;
        full.member_index = MAX_MEMBERS - 1;
        full.sequence = u64::MAX;
        for header in [sample(), gap, first, end, full] {
            let slot = framed(&header);
            let view = decode_chunk(&slot).expect("decodes");
            assert_eq!(view.header, header);
            assert_eq!(view.payload, &slot[header.payload_range()]);
            assert_eq!(decode_chunk_header(&slot[..HEADER]), Ok(header));
            // A slice of exactly header + payload is enough.
            assert_eq!(decode_chunk(&slot[..header.payload_range().end]), Ok(view));
        }
    }

    #[test]
    fn fields_sit_where_the_format_says() {
        let h = ChunkHeader {
            flags: ChunkFlags::PATTERN | ChunkFlags::ELAPSED,
            elapsed_ns: 0x0102_0304,
            ..sample()
        };
        let slot = framed(&h);
        assert_eq!(&slot[0..8], b"NVRECCHK");
        assert_eq!(slot[8..12], [1, 0, 5, 0]);
        assert_eq!(slot[12..14], [1, 0]);
        assert_eq!(&slot[16..32], h.set_uuid.as_bytes());
        assert_eq!(slot[32..36], [3, 0, 0, 0]);
        assert_eq!(slot[36..40], (1u32 << 16 | 1 << 18).to_le_bytes());
        assert_eq!(slot[40..48], 1_000_001u64.to_le_bytes());
        assert_eq!(slot[80..84], 4000u32.to_le_bytes());
        assert_eq!(slot[84..92], 0x0102_0304u64.to_le_bytes());
        assert!(slot[92..120].iter().all(|&x| x == 0));
        let mut zeroed = [0u8; HEADER];
        zeroed.copy_from_slice(&slot[..HEADER]);
        zeroed[120..].fill(0);
        let chunk_crc = crc32c_append(crc32c(&zeroed), &slot[HEADER..HEADER + 4000]);
        assert_eq!(get_u32(&slot, 120), chunk_crc);
        assert_eq!(get_u32(&slot, 124), crc32c(&slot[..124]));
        // Bytes past the payload are untouched and outside every CRC.
        assert!(slot[HEADER + 4000..].iter().all(|&x| x == 0xee));
    }

    #[test]
    fn every_flipped_byte_of_header_and_payload_is_rejected() {
        let h = sample();
        let good = framed(&h);
        let end = h.payload_range().end;
        for i in 0..end {
            let mut slot = good.clone();
            slot[i] ^= 0x01;
            let err = decode_chunk(&slot).expect_err("a flipped byte must be caught");
            match i {
                0..=7 => assert!(matches!(err, LayoutError::BadMagic { .. }), "{i}: {err}"),
                8..=9 => assert!(
                    matches!(err, LayoutError::UnsupportedVersion { .. }),
                    "{i}: {err}"
                ),
                10..=127 => assert!(
                    matches!(
                        err,
                        LayoutError::BadCrc {
                            structure: Structure::ChunkHeader,
                            ..
                        }
                    ),
                    "{i}: {err}"
                ),
                _ => {
                    assert!(
                        matches!(
                            err,
                            LayoutError::BadCrc {
                                structure: Structure::Chunk,
                                ..
                            }
                        ),
                        "{i}: {err}"
                    );
                    // The header alone is still good: a scan still learns the sequence.
                    assert_eq!(decode_chunk_header(&slot), Ok(h));
                }
            }
        }
        // A flip after the payload is outside the chunk.
        let mut slot = good.clone();
        slot[end] ^= 0xff;
        assert!(decode_chunk(&slot).is_ok());
    }

    #[test]
    fn rejections_table() {
        let good = framed(&sample());
        type Case = (&'static str, fn(&mut Vec<u8>), fn(&LayoutError) -> bool);
        let cases: Vec<Case> = vec![
            (
                "magic",
                |s| s[3] = b'x',
                |e| matches!(e, LayoutError::BadMagic { .. }),
            ),
            (
                "major version",
                |s| {
                    s[VERSION_MAJOR_OFFSET] = 9;
                    reframe(s);
                },
                |e| matches!(e, LayoutError::UnsupportedVersion { found_major: 9, .. }),
            ),
            (
                "chunk crc",
                |s| s[off::CHUNK_CRC] ^= 0x40,
                |e| matches!(e, LayoutError::BadCrc { .. }),
            ),
            (
                "payload longer than the slot",
                |s| {
                    put_u32(s, off::PAYLOAD_LEN_BYTES, 8192);
                    reframe_header_only(s);
                },
                |e| {
                    matches!(
                        e,
                        LayoutError::Truncated {
                            structure: Structure::Chunk,
                            needed_bytes: 8320,
                            got_bytes: 8192
                        }
                    )
                },
            ),
            (
                "unknown must-understand flag",
                |s| {
                    put_u32(s, off::FLAGS, 1 << 9);
                    reframe(s);
                },
                |e| matches!(e, LayoutError::UnsupportedFeature { bits: 0x200, .. }),
            ),
            (
                "gap flag without bytes",
                |s| {
                    put_u32(s, off::FLAGS, ChunkFlags::GAP.bits());
                    reframe(s);
                },
                |e| {
                    matches!(
                        e,
                        LayoutError::InvalidField {
                            field: "gap_bytes",
                            ..
                        }
                    )
                },
            ),
            (
                "gap bytes without flag",
                |s| {
                    put_u64(s, off::GAP_BYTES, 5);
                    reframe(s);
                },
                |e| {
                    matches!(
                        e,
                        LayoutError::InvalidField {
                            field: "gap_bytes",
                            ..
                        }
                    )
                },
            ),
            (
                "aborted without end",
                |s| {
                    put_u32(s, off::FLAGS, ChunkFlags::ABORTED.bits());
                    reframe(s);
                },
                |e| matches!(e, LayoutError::InvalidField { field: "flags", .. }),
            ),
            (
                "recording 0",
                |s| {
                    put_u32(s, off::RECORDING_ID, 0);
                    reframe(s);
                },
                |e| {
                    matches!(
                        e,
                        LayoutError::InvalidField {
                            field: "recording_id",
                            ..
                        }
                    )
                },
            ),
            (
                "nil set",
                |s| {
                    s[off::SET_UUID..off::SET_UUID + 16].fill(0);
                    reframe(s);
                },
                |e| {
                    matches!(
                        e,
                        LayoutError::InvalidField {
                            field: "set_uuid",
                            ..
                        }
                    )
                },
            ),
            (
                "first chunk not at stream start",
                |s| {
                    put_u32(s, off::FLAGS, ChunkFlags::FIRST.bits());
                    reframe(s);
                },
                |e| {
                    matches!(
                        e,
                        LayoutError::InvalidField {
                            field: "stream_offset_bytes",
                            ..
                        }
                    )
                },
            ),
            (
                "blank slot",
                |s| s.fill(0),
                |e| matches!(e, LayoutError::Blank { .. }),
            ),
        ];
        for (name, mutate, expected) in cases {
            let mut slot = good.clone();
            mutate(&mut slot);
            let err = decode_chunk(&slot).expect_err(name);
            assert!(expected(&err), "{name}: {err}");
        }
    }

    /// Recomputes only the header CRC (for edits that make the chunk CRC unreachable).
    fn reframe_header_only(slot: &mut [u8]) {
        let crc = crc32c(&slot[..off::HEADER_CRC]);
        put_u32(slot, off::HEADER_CRC, crc);
    }

    #[test]
    fn truncated_input() {
        let good = framed(&sample());
        for len in [0, 1, 64, 127] {
            assert_eq!(
                decode_chunk(&good[..len]),
                Err(LayoutError::Truncated {
                    structure: Structure::ChunkHeader,
                    needed_bytes: 128,
                    got_bytes: len
                })
            );
            assert!(decode_chunk_header(&good[..len]).is_err());
        }
        for len in [128, 129, 4127] {
            assert_eq!(
                decode_chunk(&good[..len]),
                Err(LayoutError::Truncated {
                    structure: Structure::Chunk,
                    needed_bytes: 4128,
                    got_bytes: len
                })
            );
        }
    }

    #[test]
    fn encode_into_refuses_short_slots_and_bad_headers() {
        let h = sample();
        let mut slot = vec![0u8; 4127];
        assert_eq!(
            h.encode_into(&mut slot),
            Err(LayoutError::Truncated {
                structure: Structure::Chunk,
                needed_bytes: 4128,
                got_bytes: 4127
            })
        );
        assert!(slot.iter().all(|&b| b == 0), "slot untouched on error");
        let mut bad = h;
        bad.gap_bytes = 1;
        assert!(bad.encode_into(&mut vec![0u8; 8192]).is_err());
        let mut tiny = [0u8; 16];
        assert!(slot_payload_mut(&mut tiny).is_empty());
    }

    #[test]
    fn flags_debug_names_known_and_unknown_bits() {
        let f = ChunkFlags::GAP | ChunkFlags::END | ChunkFlags::from_bits_retain(1 << 20);
        assert_eq!(format!("{f:?}"), "ChunkFlags(GAP | END | 0x100000)");
        assert_eq!(format!("{:?}", ChunkFlags::empty()), "ChunkFlags(0x0)");
        assert_eq!(f.unknown_incompat_bits(), 0);
        assert_eq!(
            ChunkFlags::from_bits_retain(0xe0).unknown_incompat_bits(),
            0xc0
        );
    }
}
