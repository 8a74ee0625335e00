//! On-disk format of nvrec volumes and recordings, format version 1.0.
//!
//! `docs/FORMAT.md` is the byte-by-byte specification; this module is its one
//! implementation. Every target of a recording is a *volume*, one member of a *volume set*
//! named by a [`Uuid`]. A volume holds, in this order (see [`VolumeLayout`]):
//!
//! 1. superblock copy A ([`Superblock`]) in the first metadata block;
//! 2. the index area: [`Checkpoint`] slots written in turn, then the recording table, two
//!    [`RecordingEntry`] copies per table slot, also written in turn, so that a torn write
//!    never destroys the last good version of either;
//! 3. the data area, aligned to the chunk size: fixed-size slots, each holding one chunk,
//!    a [`ChunkHeader`] followed by its payload, decodable on its own;
//! 4. superblock copy B in the last metadata block of the volume.
//!
//! All integers are little-endian, every structure carries a magic number and the format
//! version, and every structure is covered by a CRC32C (Castagnoli). The metadata
//! structures are [`META_STRUCT_SIZE_BYTES`] (4096) bytes long so that each fills one
//! O_DIRECT write on its own; a chunk fills one data slot of `chunk_size_bytes`.
//!
//! What this module does: encode structures into byte arrays, decode and validate byte
//! slices (magic, version, lengths, CRCs, field ranges and cross-field rules), compute
//! where everything lives on a volume, and choose between redundant copies
//! ([`select_superblock`], [`newest_checkpoint`], [`newest_recording_entry`]).
//!
//! What it deliberately does not do: no I/O of any kind (no files, no devices, no clocks,
//! no random numbers: the set uuid and all timestamps come from the caller), no
//! allocation on the chunk hot path ([`ChunkHeader::encode_into`] frames a chunk in place
//! around a payload that is already in its slot), no policy (which member a chunk goes
//! to, when to checkpoint, how to recover: the recording layer decides, following the
//! rules in `docs/FORMAT.md`).
//!
//! Decoders never panic on any input, whatever its length or content; a decode that
//! succeeds returns a value whose re-encoding decodes to the same value. The
//! [`fuzzing`] module states these properties as functions that the fuzz targets under
//! `fuzz/` and this module's own property tests both run.

mod chunk;
mod chunk_size;
mod codec;
mod crc_fold;
mod error;
mod flags;
#[doc(hidden)]
pub mod fuzzing;
mod index;
#[cfg(test)]
pub(crate) use chunk::tests::sample as sample_chunk_header;
/// Sample structures for the tests of other modules.
#[cfg(test)]
pub(crate) use index::tests::{sample_checkpoint, sample_entry, sample_retirement};
mod label;
mod reassembly;
mod records;
mod retirement;
mod signal;
mod superblock;
mod uuid;
mod volume;

#[cfg(test)]
mod proptests;

pub use chunk::{
    decode_chunk, decode_chunk_header, slot_payload_mut, ChunkFlags, ChunkHeader, ChunkView,
};
pub use chunk_size::{ChunkSize, ChunkSizeError};
pub use codec::{crc32c, format_version_of};
pub use error::{LayoutError, Structure};
pub use index::{
    newest_checkpoint, newest_recording_entry, Checkpoint, MarkOf, MemberPosition, MemberSpan,
    Reclaim, ReclaimCause, RecordingEntry, RecordingFlags, RecordingState,
};
pub use label::Label;
#[cfg(test)]
pub(crate) use reassembly::for_each_record;
pub use reassembly::{Reassembly, Walk, SPAN_DATA_MAX_BYTES};
pub use records::{
    decode_record, encode_index, encode_loss, encode_packet, encode_packet_header, frame_in_place,
    frame_span, index_records, packet_header, packet_parts, record_bytes, records,
    skip_index_records, whole_frame, Content, Loss, LossCause, Packet, Part, Piece, Record,
    Records, Spanned, WholeFrame, FRAGMENT_BYTES_MIN, LOSS_DATA_BYTES, RECORD_HEADER_BYTES,
};
pub use retirement::{Retirement, RetirementCause, RETIREMENTS_MAX, RETIREMENT_SIZE_BYTES};
pub use signal::{
    parse_center_freq_hz, parse_meta, parse_sample_rate_hz, ByteOrder, Component, SampleFormat,
    Signal, SignalError, CORE_TEXT_KEYS, SIGNAL_HZ_MAX, SIGNAL_META_BYTES_MAX,
};
pub use superblock::{select_superblock, Superblock, SuperblockChoice, SuperblockCopies};
pub use uuid::Uuid;
pub use volume::{meta_block_bytes_for, superblock_b_offset_bytes, IndexGeometry, VolumeLayout};

/// Major format version. A reader rejects any structure whose major version differs from
/// its own ([`LayoutError::UnsupportedVersion`]): a major change may move anything.
pub const FORMAT_VERSION_MAJOR: u16 = 1;

/// Minor format version written by this implementation. A reader accepts any minor
/// version of its major version: minor versions only give meaning to bytes that earlier
/// minors write as zero and read as "reserved, ignore" (see `docs/FORMAT.md`).
pub const FORMAT_VERSION_MINOR: u16 = 1;
/// Minor version written in chunk headers: 5, since format 1.5 gave bytes 84..92 a meaning
/// (`elapsed_ns`, with the ignorable flag `ELAPSED`). Readers since 1.1 check a chunk's CRC
/// over its header as stored and read such chunks, ignoring what they do not know; a 1.0
/// reader computes it over the header as it would write it and sees them as damaged (1.1
/// to 1.4 kept chunk headers at 0 for it).
pub const CHUNK_VERSION_MINOR: u16 = 5;

/// Magic number of a [`Superblock`], the first 8 bytes of the structure.
pub const SUPERBLOCK_MAGIC: [u8; 8] = *b"NVRECSUP";
/// Magic number of a [`ChunkHeader`], the first 8 bytes of every data slot in use.
pub const CHUNK_MAGIC: [u8; 8] = *b"NVRECCHK";
/// Magic number of a [`Checkpoint`].
pub const CHECKPOINT_MAGIC: [u8; 8] = *b"NVRECCKP";
/// Magic number of a [`RecordingEntry`].
pub const RECORDING_ENTRY_MAGIC: [u8; 8] = *b"NVRECREC";

/// Encoded size of each metadata structure (superblock, checkpoint, recording entry):
/// one 4 KiB block, the largest logical block size common on NVMe drives.
pub const META_STRUCT_SIZE_BYTES: usize = 4096;
/// Encoded size of a [`Superblock`].
pub const SUPERBLOCK_SIZE_BYTES: usize = META_STRUCT_SIZE_BYTES;
/// Encoded size of a [`Checkpoint`].
pub const CHECKPOINT_SIZE_BYTES: usize = META_STRUCT_SIZE_BYTES;
/// Encoded size of a [`RecordingEntry`].
pub const RECORDING_ENTRY_SIZE_BYTES: usize = META_STRUCT_SIZE_BYTES;
/// Size of the header at the start of every chunk; the payload follows it directly.
pub const CHUNK_HEADER_SIZE_BYTES: usize = 128;

/// Offset of superblock copy A: the very start of the volume.
pub const SUPERBLOCK_A_OFFSET_BYTES: u64 = 0;

/// Smallest logical block size accepted (a power of two).
pub const MIN_LOGICAL_BLOCK_BYTES: u32 = 512;
/// Largest logical block size accepted (a power of two).
pub const MAX_LOGICAL_BLOCK_BYTES: u32 = 64 * 1024;
/// Smallest metadata block: each metadata structure sits alone in one such block.
pub const MIN_META_BLOCK_BYTES: u32 = META_STRUCT_SIZE_BYTES as u32;
/// Largest metadata block.
pub const MAX_META_BLOCK_BYTES: u32 = MAX_LOGICAL_BLOCK_BYTES;
/// Smallest chunk (data slot) size.
pub const MIN_CHUNK_SIZE_BYTES: u32 = 4096;
/// Largest chunk (data slot) size.
pub const MAX_CHUNK_SIZE_BYTES: u32 = 256 * 1024 * 1024;
/// Largest number of members in a volume set.
pub const MAX_MEMBERS: u16 = 128;

/// Checkpoint slots a new volume gets: two, written in turn.
pub const DEFAULT_CHECKPOINT_SLOT_COUNT: u32 = 2;
/// Fewest checkpoint slots a volume may have (two, so that one may be torn).
pub const MIN_CHECKPOINT_SLOT_COUNT: u32 = 2;
/// Most checkpoint slots a volume may have.
pub const MAX_CHECKPOINT_SLOT_COUNT: u32 = 64;
/// Recording table slots a new volume gets.
pub const DEFAULT_RECORDING_SLOT_COUNT: u32 = 256;
/// Most recording table slots a volume may have.
pub const MAX_RECORDING_SLOT_COUNT: u32 = 65_536;
/// Copies kept of each recording table slot, written in turn.
pub const RECORDING_ENTRY_COPIES: u32 = 2;

/// Longest [`Label`] in bytes of UTF-8.
pub const LABEL_MAX_BYTES: usize = 64;

/// Payload bytes that fit in one chunk of `chunk_size_bytes`: the chunk size minus the
/// chunk header (0 for a chunk size not larger than the header).
pub const fn payload_capacity_bytes(chunk_size_bytes: u32) -> u32 {
    chunk_size_bytes.saturating_sub(CHUNK_HEADER_SIZE_BYTES as u32)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn payload_capacity_is_chunk_minus_header() {
        assert_eq!(payload_capacity_bytes(128 * 1024), 128 * 1024 - 128);
        assert_eq!(payload_capacity_bytes(4096), 4096 - 128);
        assert_eq!(payload_capacity_bytes(100), 0);
    }

    #[test]
    fn magics_are_distinct() {
        let magics = [
            SUPERBLOCK_MAGIC,
            CHUNK_MAGIC,
            CHECKPOINT_MAGIC,
            RECORDING_ENTRY_MAGIC,
        ];
        for (i, a) in magics.iter().enumerate() {
            for b in &magics[i + 1..] {
                assert_ne!(a, b);
            }
        }
    }
}
