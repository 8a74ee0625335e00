//! Where everything lives on a volume: the alignment and placement math.

use super::error::{LayoutError, Structure};
use super::{
    payload_capacity_bytes, DEFAULT_CHECKPOINT_SLOT_COUNT, DEFAULT_RECORDING_SLOT_COUNT,
    MAX_CHECKPOINT_SLOT_COUNT, MAX_CHUNK_SIZE_BYTES, MAX_LOGICAL_BLOCK_BYTES, MAX_META_BLOCK_BYTES,
    MAX_RECORDING_SLOT_COUNT, MIN_CHECKPOINT_SLOT_COUNT, MIN_CHUNK_SIZE_BYTES,
    MIN_LOGICAL_BLOCK_BYTES, MIN_META_BLOCK_BYTES, RECORDING_ENTRY_COPIES,
    SUPERBLOCK_A_OFFSET_BYTES,
};

const S: Structure = Structure::VolumeLayout;

/// How many checkpoint slots and recording table slots the index area holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct IndexGeometry {
    /// Checkpoint slots, written in turn (generation modulo count).
    pub checkpoint_slot_count: u32,
    /// Recording table slots; each has [`RECORDING_ENTRY_COPIES`] copies.
    pub recording_slot_count: u32,
}

impl Default for IndexGeometry {
    fn default() -> Self {
        IndexGeometry {
            checkpoint_slot_count: DEFAULT_CHECKPOINT_SLOT_COUNT,
            recording_slot_count: DEFAULT_RECORDING_SLOT_COUNT,
        }
    }
}

impl IndexGeometry {
    fn validate(&self) -> Result<(), LayoutError> {
        let c = self.checkpoint_slot_count;
        if !(MIN_CHECKPOINT_SLOT_COUNT..=MAX_CHECKPOINT_SLOT_COUNT).contains(&c) {
            return Err(LayoutError::invalid(
                S,
                "checkpoint_slot_count",
                format!("{c} is outside {MIN_CHECKPOINT_SLOT_COUNT}..={MAX_CHECKPOINT_SLOT_COUNT}"),
            ));
        }
        let r = self.recording_slot_count;
        if !(1..=MAX_RECORDING_SLOT_COUNT).contains(&r) {
            return Err(LayoutError::invalid(
                S,
                "recording_slot_count",
                format!("{r} is outside 1..={MAX_RECORDING_SLOT_COUNT}"),
            ));
        }
        Ok(())
    }

    /// Metadata blocks the index area takes: the checkpoint slots, then every copy of
    /// every recording table slot.
    fn block_count(&self) -> u64 {
        u64::from(self.checkpoint_slot_count)
            + u64::from(self.recording_slot_count) * u64::from(RECORDING_ENTRY_COPIES)
    }
}

/// The metadata block size for a logical block size: 4096 bytes, or the logical block
/// size when that is larger, so that each metadata structure is one O_DIRECT write of its
/// own and a torn write of one never touches another.
pub const fn meta_block_bytes_for(logical_block_bytes: u32) -> u32 {
    if logical_block_bytes > MIN_META_BLOCK_BYTES {
        logical_block_bytes
    } else {
        MIN_META_BLOCK_BYTES
    }
}

/// Offset of superblock copy B: the last whole metadata block of the volume. `None` when
/// the volume is smaller than two metadata blocks or `meta_block_bytes` is 0. A reader
/// whose copy A is unreadable finds copy B from the volume size alone this way.
pub const fn superblock_b_offset_bytes(
    volume_size_bytes: u64,
    meta_block_bytes: u32,
) -> Option<u64> {
    let meta = meta_block_bytes as u64;
    if meta == 0 {
        return None;
    }
    let whole = volume_size_bytes - volume_size_bytes % meta;
    if whole < 2 * meta {
        return None;
    }
    Some(whole - meta)
}

/// The map of one volume. All offsets are bytes from the start of the volume.
///
/// ```text
/// 0                     superblock copy A           (one metadata block)
/// index_offset_bytes    checkpoint slots            (checkpoint_slot_count blocks)
///                       recording table             (recording_slot_count × 2 blocks)
///                       unused, zero                (up to the next chunk boundary)
/// data_offset_bytes     data slots                  (data_slot_count × chunk_size_bytes)
///                       unused                      (less than one chunk)
/// superblock_b_offset   superblock copy B           (the last metadata block)
///                       unused                      (less than one metadata block)
/// volume_size_bytes
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct VolumeLayout {
    /// Size of the target the volume was laid out on.
    pub volume_size_bytes: u64,
    /// The target's O_DIRECT alignment; a power of two.
    pub logical_block_bytes: u32,
    /// Size of the block each metadata structure sits alone in:
    /// [`meta_block_bytes_for`]`(logical_block_bytes)` for volumes this version lays out.
    pub meta_block_bytes: u32,
    /// Size of a data slot (chunk header + payload capacity); a multiple of the meta block.
    pub chunk_size_bytes: u32,
    pub checkpoint_slot_count: u32,
    pub recording_slot_count: u32,
    /// Start of the index area (checkpoint slots, then the recording table).
    pub index_offset_bytes: u64,
    /// Start of the data area; a multiple of `chunk_size_bytes`.
    pub data_offset_bytes: u64,
    /// Number of data slots.
    pub data_slot_count: u64,
    /// Offset of superblock copy B.
    pub superblock_b_offset_bytes: u64,
}

impl VolumeLayout {
    /// Lays out a volume with the default index geometry.
    pub fn compute(
        volume_size_bytes: u64,
        chunk_size_bytes: u32,
        logical_block_bytes: u32,
    ) -> Result<Self, LayoutError> {
        Self::compute_with(
            volume_size_bytes,
            chunk_size_bytes,
            logical_block_bytes,
            IndexGeometry::default(),
        )
    }

    /// Lays out a volume: superblock A at 0, the index area right after it, the data area
    /// at the next multiple of the chunk size, as many data slots as fit before superblock
    /// B in the last metadata block.
    pub fn compute_with(
        volume_size_bytes: u64,
        chunk_size_bytes: u32,
        logical_block_bytes: u32,
        geometry: IndexGeometry,
    ) -> Result<Self, LayoutError> {
        check_logical_block(logical_block_bytes)?;
        let meta_block_bytes = meta_block_bytes_for(logical_block_bytes);
        check_chunk_size(chunk_size_bytes, meta_block_bytes)?;
        geometry.validate()?;

        let meta = u64::from(meta_block_bytes);
        let chunk = u64::from(chunk_size_bytes);
        // Bounded: at most (64 + 2 × 65536) blocks of 64 KiB, chunks of 256 MiB.
        let index_offset_bytes = SUPERBLOCK_A_OFFSET_BYTES + meta;
        let index_end = index_offset_bytes + geometry.block_count() * meta;
        let data_offset_bytes = index_end.div_ceil(chunk) * chunk;
        let min_volume_bytes = data_offset_bytes + chunk + meta;
        if volume_size_bytes < min_volume_bytes {
            return Err(LayoutError::VolumeTooSmall {
                volume_size_bytes,
                min_volume_bytes,
            });
        }
        let superblock_b_offset_bytes = (volume_size_bytes - volume_size_bytes % meta) - meta;
        let data_slot_count = (superblock_b_offset_bytes - data_offset_bytes) / chunk;

        let layout = VolumeLayout {
            volume_size_bytes,
            logical_block_bytes,
            meta_block_bytes,
            chunk_size_bytes,
            checkpoint_slot_count: geometry.checkpoint_slot_count,
            recording_slot_count: geometry.recording_slot_count,
            index_offset_bytes,
            data_offset_bytes,
            data_slot_count,
            superblock_b_offset_bytes,
        };
        layout.validate()?;
        Ok(layout)
    }

    /// Checks every rule of the volume map (what a decoded superblock must satisfy before
    /// anything trusts its offsets). All arithmetic is checked: no field value can make
    /// this panic or overflow.
    pub fn validate(&self) -> Result<(), LayoutError> {
        check_logical_block(self.logical_block_bytes)?;
        let mb = self.meta_block_bytes;
        if !mb.is_power_of_two()
            || !(MIN_META_BLOCK_BYTES..=MAX_META_BLOCK_BYTES).contains(&mb)
            || mb < self.logical_block_bytes
        {
            return Err(LayoutError::invalid(
                S,
                "meta_block_bytes",
                format!(
                    "{mb} is not a power of two in {MIN_META_BLOCK_BYTES}..={MAX_META_BLOCK_BYTES} \
                     and at least the logical block size {}",
                    self.logical_block_bytes
                ),
            ));
        }
        check_chunk_size(self.chunk_size_bytes, mb)?;
        self.geometry().validate()?;

        let meta = u64::from(mb);
        let chunk = u64::from(self.chunk_size_bytes);
        let overflow = |field| LayoutError::invalid(S, field, "offset arithmetic overflows");

        if self.index_offset_bytes < SUPERBLOCK_A_OFFSET_BYTES + meta
            || !self.index_offset_bytes.is_multiple_of(meta)
        {
            return Err(LayoutError::invalid(
                S,
                "index_offset_bytes",
                format!(
                    "{} is not a multiple of the meta block {meta} after superblock A",
                    self.index_offset_bytes
                ),
            ));
        }
        let index_end = self
            .geometry()
            .block_count()
            .checked_mul(meta)
            .and_then(|len| len.checked_add(self.index_offset_bytes))
            .ok_or_else(|| overflow("index_offset_bytes"))?;
        if self.data_offset_bytes < index_end || !self.data_offset_bytes.is_multiple_of(chunk) {
            return Err(LayoutError::invalid(
                S,
                "data_offset_bytes",
                format!(
                    "{} is not a multiple of the chunk size {chunk} at or after the index \
                     area's end {index_end}",
                    self.data_offset_bytes
                ),
            ));
        }
        if self.data_slot_count == 0 {
            return Err(LayoutError::invalid(S, "data_slot_count", "is zero"));
        }
        let data_end = self
            .data_slot_count
            .checked_mul(chunk)
            .and_then(|len| len.checked_add(self.data_offset_bytes))
            .ok_or_else(|| overflow("data_slot_count"))?;
        let expected_b = superblock_b_offset_bytes(self.volume_size_bytes, mb);
        if expected_b != Some(self.superblock_b_offset_bytes) {
            return Err(LayoutError::invalid(
                S,
                "superblock_b_offset_bytes",
                format!(
                    "{} is not the last meta block of a {}-byte volume",
                    self.superblock_b_offset_bytes, self.volume_size_bytes
                ),
            ));
        }
        if data_end > self.superblock_b_offset_bytes {
            return Err(LayoutError::invalid(
                S,
                "data_slot_count",
                format!(
                    "{} slots end at {data_end}, past superblock B at {}",
                    self.data_slot_count, self.superblock_b_offset_bytes
                ),
            ));
        }
        Ok(())
    }

    /// The index geometry of this volume.
    pub fn geometry(&self) -> IndexGeometry {
        IndexGeometry {
            checkpoint_slot_count: self.checkpoint_slot_count,
            recording_slot_count: self.recording_slot_count,
        }
    }

    /// Offsets of superblock copies A and B.
    pub fn superblock_offsets_bytes(&self) -> [u64; 2] {
        [SUPERBLOCK_A_OFFSET_BYTES, self.superblock_b_offset_bytes]
    }

    /// Length of the index area (checkpoint slots and recording table).
    pub fn index_len_bytes(&self) -> u64 {
        self.geometry()
            .block_count()
            .saturating_mul(u64::from(self.meta_block_bytes))
    }

    /// Offset of checkpoint slot `slot`, `None` if there is no such slot.
    pub fn checkpoint_slot_offset_bytes(&self, slot: u32) -> Option<u64> {
        if slot >= self.checkpoint_slot_count {
            return None;
        }
        u64::from(slot)
            .checked_mul(u64::from(self.meta_block_bytes))?
            .checked_add(self.index_offset_bytes)
    }

    /// The checkpoint slot that checkpoint `generation` is written to: generation modulo
    /// the slot count, so consecutive checkpoints never share a slot.
    pub fn checkpoint_slot_for_generation(&self, generation: u64) -> Option<u32> {
        let count = u64::from(self.checkpoint_slot_count);
        if count == 0 {
            return None;
        }
        u32::try_from(generation % count).ok()
    }

    /// The recording table slot of recording `recording_id` (ids start at 1):
    /// `(recording_id - 1) % recording_slot_count`. `None` for id 0.
    pub fn recording_slot_for_id(&self, recording_id: u32) -> Option<u32> {
        let id = recording_id.checked_sub(1)?;
        id.checked_rem(self.recording_slot_count)
    }

    /// Offset of copy `copy` (0 or 1) of recording table slot `slot`; a revision is
    /// written to copy `revision % 2`.
    pub fn recording_entry_offset_bytes(&self, slot: u32, copy: u32) -> Option<u64> {
        if slot >= self.recording_slot_count || copy >= RECORDING_ENTRY_COPIES {
            return None;
        }
        let block = u64::from(self.checkpoint_slot_count)
            + u64::from(slot) * u64::from(RECORDING_ENTRY_COPIES)
            + u64::from(copy);
        block
            .checked_mul(u64::from(self.meta_block_bytes))?
            .checked_add(self.index_offset_bytes)
    }

    /// Offset of data slot `slot`, `None` if there is no such slot.
    pub fn data_slot_offset_bytes(&self, slot: u64) -> Option<u64> {
        if slot >= self.data_slot_count {
            return None;
        }
        slot.checked_mul(u64::from(self.chunk_size_bytes))?
            .checked_add(self.data_offset_bytes)
    }

    /// Length of the data area: slot count times chunk size.
    pub fn data_len_bytes(&self) -> u64 {
        self.data_slot_count
            .saturating_mul(u64::from(self.chunk_size_bytes))
    }

    /// Payload bytes one data slot holds.
    pub fn payload_capacity_bytes(&self) -> u32 {
        payload_capacity_bytes(self.chunk_size_bytes)
    }

    /// This layout with its data area ending at or before `usable_bytes` from the start of
    /// the volume (`record --usable`): the slots past it are never written or read, the
    /// drive's to use as spare area. Only superblock copy B stays in the volume's last
    /// meta block, where a reader finds it when copy A is lost. At least one data slot
    /// must remain; a limit past the data area's end changes nothing.
    pub fn with_usable_bytes(self, usable_bytes: u64) -> Result<Self, LayoutError> {
        let chunk = u64::from(self.chunk_size_bytes);
        let slots = usable_bytes.saturating_sub(self.data_offset_bytes) / chunk;
        if slots == 0 {
            return Err(LayoutError::VolumeTooSmall {
                volume_size_bytes: usable_bytes,
                min_volume_bytes: self.data_offset_bytes + chunk,
            });
        }
        let layout = VolumeLayout {
            data_slot_count: self.data_slot_count.min(slots),
            ..self
        };
        layout.validate()?;
        Ok(layout)
    }

    /// Where the data area ends: past it, only superblock copy B is ever written.
    pub fn data_end_bytes(&self) -> u64 {
        self.data_offset_bytes.saturating_add(self.data_len_bytes())
    }
}

fn check_logical_block(logical_block_bytes: u32) -> Result<(), LayoutError> {
    if !logical_block_bytes.is_power_of_two()
        || !(MIN_LOGICAL_BLOCK_BYTES..=MAX_LOGICAL_BLOCK_BYTES).contains(&logical_block_bytes)
    {
        return Err(LayoutError::invalid(
            S,
            "logical_block_bytes",
            format!(
                "{logical_block_bytes} is not a power of two in \
                 {MIN_LOGICAL_BLOCK_BYTES}..={MAX_LOGICAL_BLOCK_BYTES}"
            ),
        ));
    }
    Ok(())
}

fn check_chunk_size(chunk_size_bytes: u32, meta_block_bytes: u32) -> Result<(), LayoutError> {
    if !(MIN_CHUNK_SIZE_BYTES..=MAX_CHUNK_SIZE_BYTES).contains(&chunk_size_bytes)
        || meta_block_bytes == 0
        || !chunk_size_bytes.is_multiple_of(meta_block_bytes)
    {
        return Err(LayoutError::invalid(
            S,
            "chunk_size_bytes",
            format!(
                "{chunk_size_bytes} is not a multiple of {meta_block_bytes} in \
                 {MIN_CHUNK_SIZE_BYTES}..={MAX_CHUNK_SIZE_BYTES}"
            ),
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    const KIB: u64 = 1024;
    const MIB: u64 = 1024 * KIB;
    const GIB: u64 = 1024 * MIB;

    /// Every placement rule, checked from the outside rather than by `validate`, and
    /// that `compute` placed as many slots as fit.
    fn assert_map_is_sound(l: &VolumeLayout) {
        crate::layout::fuzzing::check_map(l);
        let chunk = u64::from(l.chunk_size_bytes);
        assert!(l.data_offset_bytes + l.data_len_bytes() + chunk > l.superblock_b_offset_bytes);
        assert_eq!(
            l.meta_block_bytes,
            meta_block_bytes_for(l.logical_block_bytes)
        );
        assert_eq!(l.index_offset_bytes, u64::from(l.meta_block_bytes));
    }

    #[test]
    fn typical_volumes_are_sound() {
        let cases: &[(u64, u32, u32)] = &[
            (4 * GIB, 128 * 1024, 512),
            (4 * GIB, 128 * 1024, 4096),
            (3_840_755_982_336, 1024 * 1024, 512), // a "3.84 TB" NVMe drive
            (3_840_755_982_336 + 777, 4 * 1024 * 1024, 4096),
            (100 * MIB + 512, 128 * 1024, 512), // a file whose size is not block-aligned
            (64 * MIB, 4096, 512),
            (64 * MIB, 192 * 1024, 4096), // chunk size not a power of two
            (GIB, 256 * 1024, 16 * 1024),
            (GIB, 256 * 1024 * 1024, 64 * 1024),
        ];
        for &(volume, chunk, lbs) in cases {
            let l = VolumeLayout::compute(volume, chunk, lbs)
                .unwrap_or_else(|e| panic!("{volume}/{chunk}/{lbs}: {e}"));
            assert_map_is_sound(&l);
        }
    }

    #[test]
    fn a_usable_limit_ends_the_data_area_and_keeps_copy_b_at_the_end() {
        let full = VolumeLayout::compute(4 * GIB, 128 * 1024, 512).expect("fits");
        let half = full.with_usable_bytes(2 * GIB).expect("fits");
        assert!(half.data_end_bytes() <= 2 * GIB);
        assert!(half.data_end_bytes() + 128 * KIB > 2 * GIB);
        assert_eq!(
            half.superblock_b_offset_bytes,
            full.superblock_b_offset_bytes
        );
        assert_eq!(half.data_offset_bytes, full.data_offset_bytes);
        crate::layout::fuzzing::check_map(&half);
        // A limit past the data area changes nothing; one before its first slot is refused.
        assert_eq!(full.with_usable_bytes(8 * GIB).expect("fits"), full);
        assert!(matches!(
            full.with_usable_bytes(full.data_offset_bytes + 1),
            Err(LayoutError::VolumeTooSmall { .. })
        ));
        assert_eq!(
            full.with_usable_bytes(full.data_offset_bytes + 128 * KIB)
                .expect("one slot")
                .data_slot_count,
            1
        );
    }

    #[test]
    fn default_map_of_a_4_gib_volume() {
        let l = VolumeLayout::compute(4 * GIB, 128 * 1024, 512).expect("fits");
        assert_eq!(l.meta_block_bytes, 4096);
        assert_eq!(l.index_offset_bytes, 4096);
        // 2 checkpoint blocks + 256 × 2 entry blocks = 514 blocks, ends at 515 × 4 KiB,
        // rounded up to the next 128 KiB.
        assert_eq!(l.index_len_bytes(), 514 * 4096);
        assert_eq!(l.data_offset_bytes, 17 * 128 * KIB);
        assert_eq!(l.superblock_b_offset_bytes, 4 * GIB - 4096);
        assert_eq!(
            l.data_slot_count,
            (4 * GIB - 4096 - 17 * 128 * KIB) / (128 * KIB)
        );
        assert_eq!(l.checkpoint_slot_offset_bytes(1), Some(8192));
        assert_eq!(l.recording_entry_offset_bytes(0, 0), Some(3 * 4096));
        assert_eq!(l.recording_entry_offset_bytes(0, 1), Some(4 * 4096));
        assert_eq!(l.recording_entry_offset_bytes(255, 1), Some(514 * 4096));
        assert_eq!(l.recording_entry_offset_bytes(256, 0), None);
        assert_eq!(l.recording_entry_offset_bytes(0, 2), None);
        assert_eq!(l.checkpoint_slot_offset_bytes(2), None);
        assert_eq!(l.payload_capacity_bytes(), 128 * 1024 - 128);
    }

    #[test]
    fn slot_selection_rules() {
        let l = VolumeLayout::compute(GIB, 128 * 1024, 4096).expect("fits");
        assert_eq!(l.checkpoint_slot_for_generation(1), Some(1));
        assert_eq!(l.checkpoint_slot_for_generation(2), Some(0));
        assert_eq!(l.checkpoint_slot_for_generation(u64::MAX), Some(1));
        assert_eq!(l.recording_slot_for_id(0), None);
        assert_eq!(l.recording_slot_for_id(1), Some(0));
        assert_eq!(l.recording_slot_for_id(256), Some(255));
        assert_eq!(l.recording_slot_for_id(257), Some(0));
    }

    #[test]
    fn smallest_volume_fits_exactly_one_slot() {
        let geometry = IndexGeometry {
            checkpoint_slot_count: 2,
            recording_slot_count: 1,
        };
        // A(4K) + index 4 × 4K = 20K, data at 32K (chunk 32K), one slot to 64K, B at 64K.
        let l = VolumeLayout::compute_with(68 * KIB, 32 * 1024, 4096, geometry).expect("fits");
        assert_eq!(l.data_offset_bytes, 32 * KIB);
        assert_eq!(l.data_slot_count, 1);
        assert_eq!(l.superblock_b_offset_bytes, 64 * KIB);
        assert_map_is_sound(&l);
        let err = VolumeLayout::compute_with(68 * KIB - 1, 32 * 1024, 4096, geometry);
        assert_eq!(
            err,
            Err(LayoutError::VolumeTooSmall {
                volume_size_bytes: 68 * KIB - 1,
                min_volume_bytes: 68 * KIB,
            })
        );
    }

    #[test]
    fn too_small_volumes_are_rejected_with_the_minimum() {
        for volume in [0, 1, 4096, 8192, MIB, 2 * MIB] {
            match VolumeLayout::compute(volume, 128 * 1024, 512) {
                Err(
                    e @ LayoutError::VolumeTooSmall {
                        min_volume_bytes, ..
                    },
                ) => {
                    assert!(min_volume_bytes > volume);
                    assert!(e.to_string().contains("too small"), "{e}");
                    // The minimum it names is enough.
                    let l = VolumeLayout::compute(min_volume_bytes, 128 * 1024, 512)
                        .expect("the named minimum fits");
                    assert_eq!(l.data_slot_count, 1);
                }
                other => panic!("{volume}: {other:?}"),
            }
        }
    }

    #[test]
    fn bad_parameters_are_rejected() {
        let bad: &[(u32, u32, &str)] = &[
            (128 * 1024, 0, "logical_block_bytes"),
            (128 * 1024, 256, "logical_block_bytes"),
            (128 * 1024, 1000, "logical_block_bytes"),
            (128 * 1024, 128 * 1024, "logical_block_bytes"),
            (0, 512, "chunk_size_bytes"),
            (2048, 512, "chunk_size_bytes"),
            (4096 + 512, 512, "chunk_size_bytes"),
            (48 * 1024, 32 * 1024, "chunk_size_bytes"),
            (512 * 1024 * 1024, 4096, "chunk_size_bytes"),
        ];
        for &(chunk, lbs, field) in bad {
            match VolumeLayout::compute(GIB, chunk, lbs) {
                Err(LayoutError::InvalidField { field: f, .. }) => {
                    assert_eq!(f, field, "{chunk}/{lbs}")
                }
                other => panic!("{chunk}/{lbs}: {other:?}"),
            }
        }
        for geometry in [
            IndexGeometry {
                checkpoint_slot_count: 1,
                recording_slot_count: 8,
            },
            IndexGeometry {
                checkpoint_slot_count: 2,
                recording_slot_count: 0,
            },
            IndexGeometry {
                checkpoint_slot_count: 65,
                recording_slot_count: 8,
            },
        ] {
            assert!(VolumeLayout::compute_with(GIB, 128 * 1024, 512, geometry).is_err());
        }
    }

    #[test]
    fn validate_rejects_each_broken_rule() {
        let good = VolumeLayout::compute(GIB, 128 * 1024, 512).expect("fits");
        type Breaker = (&'static str, fn(&mut VolumeLayout));
        let breakers: Vec<Breaker> = vec![
            ("index overlaps A", |l| l.index_offset_bytes = 0),
            ("index unaligned", |l| l.index_offset_bytes = 4096 + 512),
            ("data unaligned", |l| l.data_offset_bytes += 4096),
            ("data overlaps index", |l| l.data_offset_bytes = 128 * 1024),
            ("no slots", |l| l.data_slot_count = 0),
            ("data past B", |l| l.data_slot_count += 1),
            ("slot overflow", |l| l.data_slot_count = u64::MAX),
            ("B not last", |l| l.superblock_b_offset_bytes -= 4096),
            ("B outside", |l| {
                l.superblock_b_offset_bytes = l.volume_size_bytes
            }),
            ("volume shrunk", |l| l.volume_size_bytes -= 4096),
            ("meta too small", |l| l.meta_block_bytes = 512),
            ("meta not pow2", |l| l.meta_block_bytes = 12288),
            ("meta below lbs", |l| {
                l.logical_block_bytes = 16384;
                l.meta_block_bytes = 8192;
            }),
            ("chunk not multiple", |l| l.chunk_size_bytes = 6144),
            ("geometry", |l| l.checkpoint_slot_count = 0),
            ("index overflow", |l| l.index_offset_bytes = u64::MAX - 4095),
        ];
        for (name, brk) in breakers {
            let mut l = good;
            brk(&mut l);
            assert!(l.validate().is_err(), "{name}: {l:?}");
        }
    }

    #[test]
    fn superblock_b_is_findable_from_the_size() {
        assert_eq!(superblock_b_offset_bytes(GIB, 4096), Some(GIB - 4096));
        assert_eq!(superblock_b_offset_bytes(GIB + 100, 4096), Some(GIB - 4096));
        assert_eq!(superblock_b_offset_bytes(8191, 4096), None);
        assert_eq!(superblock_b_offset_bytes(8192, 4096), Some(4096));
        assert_eq!(superblock_b_offset_bytes(GIB, 0), None);
        assert_eq!(
            superblock_b_offset_bytes(u64::MAX, 65536),
            Some(u64::MAX - 65535 - 65536)
        );
        assert_eq!(meta_block_bytes_for(512), 4096);
        assert_eq!(meta_block_bytes_for(4096), 4096);
        assert_eq!(meta_block_bytes_for(16384), 16384);
    }
}
