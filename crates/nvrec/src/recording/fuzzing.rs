//! Reading a damaged volume set, as a property over arbitrary bytes: whatever its members
//! hold, listing its recordings (`ls`), `verify` and `replay` finish without a panic and
//! without reading, emitting or zero-filling more than the set can hold. The fuzz target
//! `volume_image` (under `fuzz/`) calls [`volume_image`] with libFuzzer's inputs; the crate's
//! tests call it with seeded pseudo-random ones, so CI checks the same property on stable
//! Rust. Not a stable API.
//!
//! The input patches a valid base image: one small member (4 KiB chunks) holding a linear
//! pattern recording and a ring recording that wrapped, recorded once through the real
//! writer on a simulated disk. Patches aim at its structures (superblocks, checkpoints,
//! recording entries, chunks) and can re-seal them with correct CRC32Cs, so that mutated
//! fields get past the CRCs to the checks behind them; a patch can also cut the image short.

use super::disk::Members;
use super::reader::{self, Item};
use super::volume::{self, VolumeSet};
use super::writer::{self, RecordOptions};
use super::Fill;
use crate::control::{Control, Progress};
use crate::device::{Access, Safety};
use crate::engine::{EngineChoice, SimDisks};
use crate::layout::{
    crc32c, ChunkFlags, RecordingEntry, Superblock, VolumeLayout, CHUNK_HEADER_SIZE_BYTES,
    META_STRUCT_SIZE_BYTES,
};
use crate::pattern::Pattern;
use crate::sink::GapFill;
use crate::source::PatternSource;
use std::sync::OnceLock;

/// Size of the base image: the index area (about 2 MiB) and a few hundred data slots.
pub const IMAGE_BYTES: u64 = 4 << 20;
/// Chunk size of the base image: the smallest the writer takes, for the most slots.
pub const CHUNK_BYTES: u32 = 8192;
const LOGICAL_BLOCK_BYTES: u32 = 512;
/// Seed of the pattern the base image's recordings hold.
pub const PATTERN_SEED: u64 = 0x5EED;
/// Bytes a patch record takes before its data: region, offset (2), length.
const PATCH_HEAD_BYTES: usize = 4;

/// The base image, made once per process.
pub fn base_image() -> &'static [u8] {
    static IMAGE: OnceLock<Vec<u8>> = OnceLock::new();
    IMAGE.get_or_init(make_base_image)
}

/// Records the base image's two recordings through the writer, on one simulated disk.
fn make_base_image() -> Vec<u8> {
    let sim = SimDisks::new(1, IMAGE_BYTES, LOGICAL_BLOCK_BYTES, 1);
    let linear = RecordOptions {
        chunk_size_bytes: CHUNK_BYTES,
        io_chunk_count: 4,
        queue_depth: 2,
        buffer_bytes: 8 * 4 * u64::from(CHUNK_BYTES),
        label: "fuzz".into(),
        limit_bytes: Some(300 << 10),
        pattern: true,
        ..RecordOptions::default()
    };
    let ring = RecordOptions {
        append: true,
        fill: Fill::Ring { trim: false },
        limit_bytes: Some(2560 << 10),
        ..linear.clone()
    };
    for options in [linear, ring] {
        let mut source = PatternSource(Pattern::new(PATTERN_SEED));
        writer::record_on(
            Members::Sim(&sim),
            &mut source,
            &options,
            &Control::new(),
            &Progress::default(),
        )
        .expect("the base image records");
    }
    sim.crash();
    let mut images = sim.power_cut_images().expect("crashed");
    images.remove(0)
}

/// The property: `input`, taken as patches on the base image (see [`patch`]), makes a
/// member that `ls`, `verify` and `replay` read through without a panic or a runaway.
pub fn volume_image(input: &[u8]) {
    let mut image = base_image().to_vec();
    patch(&mut image, input);
    read_everything(image);
}

/// Applies `input` to `image` as a sequence of patch records: a region byte, a 16-bit
/// offset, a length byte, then that many bytes (fewer at the end of the input). The region
/// byte's low 3 bits say where: 0 superblock A, 1 superblock B, 2 a checkpoint slot, 3 a
/// recording entry copy, 4 a data slot's chunk re-sealed after the patch, 5 a data slot as
/// it is, 6 anywhere, 7 cut the image short; its high bits (and the offset's, for slots)
/// pick which one.
pub fn patch(image: &mut Vec<u8>, input: &[u8]) {
    let Ok(base) = Superblock::decode(&base_image()[..META_STRUCT_SIZE_BYTES]) else {
        return;
    };
    let layout = base.layout;
    let mut rest = input;
    while rest.len() >= PATCH_HEAD_BYTES {
        let (head, tail) = rest.split_at(PATCH_HEAD_BYTES);
        let (region, at) = (head[0], u16::from_le_bytes([head[1], head[2]]));
        let (bytes, tail) = tail.split_at(usize::from(head[3]).min(tail.len()));
        rest = tail;
        apply(image, &layout, region, at, bytes);
    }
}

/// Applies one patch record (see [`patch`]).
fn apply(image: &mut Vec<u8>, layout: &VolumeLayout, region: u8, at: u16, bytes: &[u8]) {
    const META: usize = META_STRUCT_SIZE_BYTES;
    let which = usize::from(region >> 3);
    let at = usize::from(at);
    let meta_at = |block: u64| block as usize * META;
    match region & 7 {
        0 => overwrite_meta(image, 0, at % META, bytes),
        1 => overwrite_meta(
            image,
            layout.superblock_b_offset_bytes as usize,
            at % META,
            bytes,
        ),
        2 => overwrite_meta(image, meta_at(1 + which as u64 % 2), at % META, bytes),
        3 => overwrite_meta(image, meta_at(3 + which as u64 % 4), at % META, bytes),
        4 | 5 => {
            let slot = (which | (at >> 12) << 5) as u64 % layout.data_slot_count;
            let start = layout.data_slot_offset_bytes(slot).unwrap_or(0) as usize;
            let chunk = CHUNK_BYTES as usize;
            overwrite(image, start + at % chunk, bytes);
            if region & 7 == 4 {
                seal_chunk(image, start);
            }
        }
        6 => {
            let offset = ((which << 16 | at) as u64 * image.len() as u64) >> 21;
            overwrite(image, offset as usize, bytes);
        }
        _ => {
            let keep = ((at as u64 * image.len() as u64) >> 16) as usize;
            image.truncate(keep / 4096 * 4096);
        }
    }
}

/// Writes `bytes` at `offset`, cut at the end of the image.
fn overwrite(image: &mut [u8], offset: usize, bytes: &[u8]) {
    let Some(space) = image.get_mut(offset..) else {
        return;
    };
    let n = bytes.len().min(space.len());
    space[..n].copy_from_slice(&bytes[..n]);
}

/// Writes `bytes` into the metadata structure at `start`, from `within`, and seals it again
/// (its CRC32C over the bytes before the CRC).
fn overwrite_meta(image: &mut [u8], start: usize, within: usize, bytes: &[u8]) {
    const CRC_AT: usize = META_STRUCT_SIZE_BYTES - 4;
    let Some(structure) = image.get_mut(start..start + META_STRUCT_SIZE_BYTES) else {
        return;
    };
    overwrite(&mut structure[..CRC_AT], within, bytes);
    let crc = crc32c(&structure[..CRC_AT]);
    structure[CRC_AT..].copy_from_slice(&crc.to_le_bytes());
}

/// Gives the chunk in the slot at `start` correct CRC32Cs for what it now holds: the chunk
/// CRC over the header (CRC fields as zero) and as much of the payload as the slot has,
/// then the header CRC.
fn seal_chunk(image: &mut [u8], start: usize) {
    const H: usize = CHUNK_HEADER_SIZE_BYTES;
    let Some(slot) = image.get_mut(start..start + CHUNK_BYTES as usize) else {
        return;
    };
    let payload_len = u32::from_le_bytes([slot[80], slot[81], slot[82], slot[83]]) as usize;
    let end = H.saturating_add(payload_len).min(slot.len());
    let mut covered = slot[..end].to_vec();
    covered[120..H].fill(0);
    let crc = crc32c(&covered);
    slot[120..124].copy_from_slice(&crc.to_le_bytes());
    let crc = crc32c(&slot[..124]);
    slot[124..H].copy_from_slice(&crc.to_le_bytes());
}

/// Opens `image` as a one-member set and reads it as `ls`, `verify` and `replay` do,
/// checking that nothing runs away.
fn read_everything(image: Vec<u8>) {
    let capacity_bytes = image.len() as u64;
    let sim = SimDisks::from_images(vec![image], LOGICAL_BLOCK_BYTES, 0);
    let Ok(set) = volume::open_members(Members::Sim(&sim), Access::Read, Safety::Check) else {
        return;
    };
    let Ok(entries) = reader::recordings(&set) else {
        return;
    };
    for entry in &entries {
        verify_and_replay(&set, entry, capacity_bytes);
    }
}

/// Reads `entry` once, checking each chunk as `verify` does and filling holes as
/// `replay --gaps zero` does; asserts the bounds a read of a member of `capacity_bytes`
/// must keep, whatever the member holds.
fn verify_and_replay(set: &VolumeSet, entry: &RecordingEntry, capacity_bytes: u64) {
    let pattern = Pattern::new(PATTERN_SEED);
    let mut gaps = GapFill::new(entry.stream_len_bytes);
    let mut zero_bytes = 0u64;
    let mut damage_count = 0u64;
    let mut each = |item: Item<'_>| {
        match item {
            Item::Chunk { header, payload } => {
                if header.flags.contains(ChunkFlags::PATTERN) {
                    let _ = pattern.check(header.stream_offset_bytes, payload, 0);
                }
                zero_bytes += gaps
                    .before(header.stream_offset_bytes, payload.len() as u64)
                    .zero_bytes;
            }
            Item::Missing { .. } => {}
            Item::Damage(_) => damage_count += 1,
        }
        true
    };
    let Ok(summary) = reader::read_recording(
        set,
        entry,
        EngineChoice::Auto,
        &Control::new(),
        &Progress::default(),
        &mut each,
    ) else {
        return;
    };
    let slot_count = capacity_bytes / u64::from(CHUNK_BYTES);
    // Each slot is read once by its member's scan and at most once more for redirects.
    assert!(
        summary.read_bytes <= 2 * capacity_bytes,
        "read {} bytes of a {capacity_bytes}-byte member",
        summary.read_bytes
    );
    assert!(
        summary.chunk_count <= 2 * slot_count,
        "{} chunks",
        summary.chunk_count
    );
    assert!(
        zero_bytes <= entry.stream_len_bytes,
        "{zero_bytes} zeros filled in a stream of {}",
        entry.stream_len_bytes
    );
    assert!(
        damage_count <= 3 * slot_count + 16,
        "{damage_count} damages"
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A small xorshift generator: the same cases on every run.
    fn next(state: &mut u64) -> u64 {
        *state ^= *state << 13;
        *state ^= *state >> 7;
        *state ^= *state << 17;
        *state
    }

    /// Patch records aimed at the structures, `count` of them.
    fn random_patches(state: &mut u64, count: usize) -> Vec<u8> {
        let mut input = Vec::new();
        for _ in 0..count {
            let word = next(state);
            let len = (word >> 32) as u8 % 24;
            input.push(word as u8);
            // Mostly the first 256 bytes of a structure, where its fields are (the high bits
            // pick a data slot).
            let mut at = (word >> 8) as u16;
            if (word >> 56) & 3 != 0 {
                at &= 0xF0FF;
            }
            input.extend_from_slice(&at.to_le_bytes());
            input.push(len);
            // Small values, big ones and all-ones: the edges of the fields.
            let fill = match (word >> 40) % 4 {
                0 => 0u8,
                1 => 0xFF,
                2 => 1,
                _ => (word >> 48) as u8,
            };
            input.extend((0..len).map(|k| fill.wrapping_add(if word >> 60 == 0 { k } else { 0 })));
        }
        input
    }

    #[test]
    fn the_base_image_reads_back_whole() {
        let sim = SimDisks::from_images(vec![base_image().to_vec()], LOGICAL_BLOCK_BYTES, 0);
        let set = volume::open_members(Members::Sim(&sim), Access::Read, Safety::Check).unwrap();
        let entries = reader::recordings(&set).unwrap();
        assert_eq!(entries.len(), 2);
        // The ring (recording 2) wrapped over the linear recording's slots: recording 1
        // reads as damaged there, the ring whole.
        for entry in &entries {
            let summary = reader::read_recording(
                &set,
                entry,
                EngineChoice::Auto,
                &Control::new(),
                &Progress::default(),
                &mut |_| true,
            )
            .unwrap();
            let whole = summary.damage_count == 0 && summary.missing_chunk_count == 0;
            assert_eq!(whole, entry.recording_id == 2, "{summary:?}");
            assert_eq!(
                summary.chunk_count > 0,
                entry.recording_id == 2,
                "{summary:?}"
            );
        }
    }

    #[test]
    fn seeded_patches_of_a_volume_image_never_panic_or_run_away() {
        let cases: u64 = std::env::var("NVREC_FUZZ_IMAGE_CASES")
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(300);
        for case in 0..cases {
            let mut state = 0x9E37_79B9_7F4A_7C15 ^ case.wrapping_mul(0x2545_F491);
            let count = 1 + (next(&mut state) % 6) as usize;
            let input = random_patches(&mut state, count);
            let outcome = std::panic::catch_unwind(|| volume_image(&input));
            assert!(outcome.is_ok(), "case {case}: input {input:?}");
        }
    }
}
