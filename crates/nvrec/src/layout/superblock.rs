//! The superblock: what a volume is, written twice (start and end of the volume).

use super::codec::{
    check_meta_crc, check_preamble, get_array, get_u16, get_u32, get_u64, put_bytes, put_preamble,
    put_u16, put_u32, put_u64, seal_meta, take,
};
use super::error::{LayoutError, Structure};
use super::label::Label;
use super::uuid::Uuid;
use super::volume::VolumeLayout;
use super::{LABEL_MAX_BYTES, MAX_MEMBERS, SUPERBLOCK_MAGIC, SUPERBLOCK_SIZE_BYTES};

const S: Structure = Structure::Superblock;

/// Byte offsets of the superblock fields (see `docs/FORMAT.md`, "Superblock").
pub(crate) mod off {
    pub const MEMBER_INDEX: usize = 12;
    pub const MEMBER_COUNT: usize = 14;
    pub const SET_UUID: usize = 16;
    pub const CREATED_NS: usize = 32;
    pub const VOLUME_SIZE_BYTES: usize = 40;
    pub const LOGICAL_BLOCK_BYTES: usize = 48;
    pub const META_BLOCK_BYTES: usize = 52;
    pub const CHUNK_SIZE_BYTES: usize = 56;
    // 60..64 reserved
    pub const CHECKPOINT_SLOT_COUNT: usize = 64;
    pub const RECORDING_SLOT_COUNT: usize = 68;
    pub const INDEX_OFFSET_BYTES: usize = 72;
    pub const DATA_OFFSET_BYTES: usize = 80;
    pub const DATA_SLOT_COUNT: usize = 88;
    pub const SUPERBLOCK_B_OFFSET_BYTES: usize = 96;
    pub const LABEL: usize = 104;
    // 168..4092 reserved, 4092..4096 CRC32C
}

/// What one volume is: which set it belongs to, which member it is, and its map.
///
/// Written once when the volume is formatted, identically to both copies, and never
/// rewritten while the set exists.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Superblock {
    /// The volume set this volume is a member of; never nil.
    pub set_uuid: Uuid,
    /// This volume's index in the set, `0..member_count`.
    pub member_index: u16,
    /// Number of volumes in the set, `1..=MAX_MEMBERS`.
    pub member_count: u16,
    /// When the set was formatted: nanoseconds since the Unix epoch (UTC).
    pub created_ns: u64,
    /// The set's label, the same on every member.
    pub label: Label,
    /// Where everything lives on this volume (members may differ in size).
    pub layout: VolumeLayout,
}

impl Superblock {
    /// Checks the fields: a non-nil uuid, a member index inside the count, a sound map.
    pub fn validate(&self) -> Result<(), LayoutError> {
        if self.set_uuid.is_nil() {
            return Err(LayoutError::invalid(S, "set_uuid", "is nil"));
        }
        if !(1..=MAX_MEMBERS).contains(&self.member_count) {
            return Err(LayoutError::invalid(
                S,
                "member_count",
                format!("{} is outside 1..={MAX_MEMBERS}", self.member_count),
            ));
        }
        if self.member_index >= self.member_count {
            return Err(LayoutError::invalid(
                S,
                "member_index",
                format!(
                    "{} is not below the member count {}",
                    self.member_index, self.member_count
                ),
            ));
        }
        self.layout.validate()
    }

    /// The 4096 bytes of either copy. Fails only when [`Superblock::validate`] does, so
    /// that nothing is written that a reader would refuse.
    pub fn encode(&self) -> Result<[u8; SUPERBLOCK_SIZE_BYTES], LayoutError> {
        self.validate()?;
        let l = &self.layout;
        let mut b = [0u8; SUPERBLOCK_SIZE_BYTES];
        put_preamble(&mut b, &SUPERBLOCK_MAGIC);
        put_u16(&mut b, off::MEMBER_INDEX, self.member_index);
        put_u16(&mut b, off::MEMBER_COUNT, self.member_count);
        put_bytes(&mut b, off::SET_UUID, self.set_uuid.as_bytes());
        put_u64(&mut b, off::CREATED_NS, self.created_ns);
        put_u64(&mut b, off::VOLUME_SIZE_BYTES, l.volume_size_bytes);
        put_u32(&mut b, off::LOGICAL_BLOCK_BYTES, l.logical_block_bytes);
        put_u32(&mut b, off::META_BLOCK_BYTES, l.meta_block_bytes);
        put_u32(&mut b, off::CHUNK_SIZE_BYTES, l.chunk_size_bytes);
        put_u32(&mut b, off::CHECKPOINT_SLOT_COUNT, l.checkpoint_slot_count);
        put_u32(&mut b, off::RECORDING_SLOT_COUNT, l.recording_slot_count);
        put_u64(&mut b, off::INDEX_OFFSET_BYTES, l.index_offset_bytes);
        put_u64(&mut b, off::DATA_OFFSET_BYTES, l.data_offset_bytes);
        put_u64(&mut b, off::DATA_SLOT_COUNT, l.data_slot_count);
        put_u64(
            &mut b,
            off::SUPERBLOCK_B_OFFSET_BYTES,
            l.superblock_b_offset_bytes,
        );
        put_bytes(&mut b, off::LABEL, &self.label.encode());
        seal_meta(&mut b);
        Ok(b)
    }

    /// Decodes and validates the first 4096 bytes of `bytes` (longer input, such as a
    /// whole metadata block, is fine). Checks length, magic, major version, CRC32C and
    /// then every field; reserved bytes are ignored.
    pub fn decode(bytes: &[u8]) -> Result<Self, LayoutError> {
        let b = take::<SUPERBLOCK_SIZE_BYTES>(S, bytes)?;
        check_preamble(S, b, &SUPERBLOCK_MAGIC)?;
        check_meta_crc(S, b)?;
        let label: [u8; LABEL_MAX_BYTES] = get_array(b, off::LABEL);
        let sb = Superblock {
            set_uuid: Uuid(get_array(b, off::SET_UUID)),
            member_index: get_u16(b, off::MEMBER_INDEX),
            member_count: get_u16(b, off::MEMBER_COUNT),
            created_ns: get_u64(b, off::CREATED_NS),
            label: Label::decode(S, "label", &label)?,
            layout: VolumeLayout {
                volume_size_bytes: get_u64(b, off::VOLUME_SIZE_BYTES),
                logical_block_bytes: get_u32(b, off::LOGICAL_BLOCK_BYTES),
                meta_block_bytes: get_u32(b, off::META_BLOCK_BYTES),
                chunk_size_bytes: get_u32(b, off::CHUNK_SIZE_BYTES),
                checkpoint_slot_count: get_u32(b, off::CHECKPOINT_SLOT_COUNT),
                recording_slot_count: get_u32(b, off::RECORDING_SLOT_COUNT),
                index_offset_bytes: get_u64(b, off::INDEX_OFFSET_BYTES),
                data_offset_bytes: get_u64(b, off::DATA_OFFSET_BYTES),
                data_slot_count: get_u64(b, off::DATA_SLOT_COUNT),
                superblock_b_offset_bytes: get_u64(b, off::SUPERBLOCK_B_OFFSET_BYTES),
            },
        };
        sb.validate().map_err(|e| match e {
            // A bad map found while decoding is a bad superblock field.
            LayoutError::InvalidField { field, reason, .. } => LayoutError::InvalidField {
                structure: S,
                field,
                reason,
            },
            other => other,
        })?;
        Ok(sb)
    }
}

/// Which superblock copies were good.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SuperblockCopies {
    /// Both copies decode and agree.
    Both,
    /// Only copy A decodes; copy B should be rewritten from it.
    OnlyA,
    /// Only copy B decodes; copy A should be rewritten from it.
    OnlyB,
}

/// The superblock a reader goes by, and the health of its two copies.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SuperblockChoice {
    pub superblock: Superblock,
    pub copies: SuperblockCopies,
}

/// Chooses between the decode results of copy A and copy B: either one that decodes is
/// enough; when both decode they must be equal, else [`LayoutError::SuperblockConflict`]
/// (never silently pick one: it means an interrupted format or a foreign write).
pub fn select_superblock(
    a: Result<Superblock, LayoutError>,
    b: Result<Superblock, LayoutError>,
) -> Result<SuperblockChoice, LayoutError> {
    match (a, b) {
        (Ok(a), Ok(b)) => {
            if a == b {
                Ok(SuperblockChoice {
                    superblock: a,
                    copies: SuperblockCopies::Both,
                })
            } else {
                let difference = if a.set_uuid != b.set_uuid {
                    "set uuid"
                } else if a.member_index != b.member_index || a.member_count != b.member_count {
                    "member index or count"
                } else if a.layout != b.layout {
                    "volume map"
                } else {
                    "creation time or label"
                };
                Err(LayoutError::SuperblockConflict { difference })
            }
        }
        (Ok(a), Err(_)) => Ok(SuperblockChoice {
            superblock: a,
            copies: SuperblockCopies::OnlyA,
        }),
        (Err(_), Ok(b)) => Ok(SuperblockChoice {
            superblock: b,
            copies: SuperblockCopies::OnlyB,
        }),
        (Err(a), Err(b)) => Err(LayoutError::NoValidSuperblock {
            a: Box::new(a),
            b: Box::new(b),
        }),
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::layout::codec::{META_CRC_OFFSET, VERSION_MAJOR_OFFSET, VERSION_MINOR_OFFSET};
    use crate::layout::{crc32c, FORMAT_VERSION_MAJOR};

    pub(crate) fn sample() -> Superblock {
        Superblock {
            set_uuid: Uuid::from_random_bytes([0x5a; 16]),
            member_index: 2,
            member_count: 4,
            created_ns: 1_767_225_600_123_456_789,
            label: Label::new("bench rig 7").expect("valid"),
            layout: VolumeLayout::compute(3_840_755_982_336, 1024 * 1024, 512).expect("fits"),
        }
    }

    fn reseal(b: &mut [u8; SUPERBLOCK_SIZE_BYTES]) {
        let crc = crc32c(&b[..META_CRC_OFFSET]);
        b[META_CRC_OFFSET..].copy_from_slice(&crc.to_le_bytes());
    }

    #[test]
    fn round_trip() {
        for sb in [
            sample(),
            Superblock {
                member_index: 0,
                member_count: 1,
                created_ns: 0,
                label: Label::empty(),
                layout: VolumeLayout::compute(1 << 30, 4096, 4096).expect("fits"),
                ..sample()
            },
            Superblock {
                member_index: MAX_MEMBERS - 1,
                member_count: MAX_MEMBERS,
                created_ns: u64::MAX,
                label: Label::new(&"z".repeat(LABEL_MAX_BYTES)).expect("valid"),
                ..sample()
            },
        ] {
            let bytes = sb.encode().expect("encodes");
            assert_eq!(Superblock::decode(&bytes), Ok(sb.clone()));
            // A whole larger metadata block decodes the same.
            let mut block = vec![0u8; 16384];
            block[..SUPERBLOCK_SIZE_BYTES].copy_from_slice(&bytes);
            assert_eq!(Superblock::decode(&block), Ok(sb));
        }
    }

    #[test]
    fn fields_sit_where_the_format_says() {
        let sb = sample();
        let b = sb.encode().expect("encodes");
        assert_eq!(&b[0..8], b"NVRECSUP");
        assert_eq!(b[8..12], [1, 0, 1, 0]);
        assert_eq!(b[12..16], [2, 0, 4, 0]);
        assert_eq!(&b[16..32], sb.set_uuid.as_bytes());
        assert_eq!(b[56..60], (1024u32 * 1024).to_le_bytes());
        assert_eq!(&b[104..115], b"bench rig 7");
        assert!(b[168..4092].iter().all(|&x| x == 0));
        let crc = u32::from_le_bytes([b[4092], b[4093], b[4094], b[4095]]);
        assert_eq!(crc, crc32c(&b[..4092]));
    }

    #[test]
    fn every_flipped_byte_is_rejected() {
        let good = sample().encode().expect("encodes");
        for i in 0..SUPERBLOCK_SIZE_BYTES {
            for mask in [0x01u8, 0x80, 0xff] {
                let mut b = good;
                b[i] ^= mask;
                let err = Superblock::decode(&b).expect_err("a flipped byte must be caught");
                crate::layout::index::tests::assert_flip_is_caught(i, &err);
            }
        }
    }

    #[test]
    fn rejections_table() {
        let good = sample().encode().expect("encodes");
        type Case = (&'static str, Box<dyn Fn(&mut [u8; SUPERBLOCK_SIZE_BYTES])>);
        let cases: Vec<Case> = vec![
            ("magic", Box::new(|b| b[0] = b'X')),
            (
                "major version 2",
                Box::new(|b| {
                    b[VERSION_MAJOR_OFFSET] = 2;
                    reseal(b);
                }),
            ),
            (
                "major version 0",
                Box::new(|b| {
                    b[VERSION_MAJOR_OFFSET] = 0;
                    reseal(b);
                }),
            ),
            ("crc", Box::new(|b| b[META_CRC_OFFSET] ^= 1)),
            (
                "nil uuid",
                Box::new(|b| {
                    b[off::SET_UUID..off::SET_UUID + 16].fill(0);
                    reseal(b);
                }),
            ),
            (
                "member index = count",
                Box::new(|b| {
                    b[off::MEMBER_INDEX] = 4;
                    reseal(b);
                }),
            ),
            (
                "zero members",
                Box::new(|b| {
                    b[off::MEMBER_COUNT] = 0;
                    b[off::MEMBER_INDEX] = 0;
                    reseal(b);
                }),
            ),
            (
                "too many members",
                Box::new(|b| {
                    b[off::MEMBER_COUNT] = 129;
                    reseal(b);
                }),
            ),
            (
                "data area unaligned",
                Box::new(|b| {
                    b[off::DATA_OFFSET_BYTES + 1] ^= 0x10;
                    reseal(b);
                }),
            ),
            (
                "volume size changed",
                Box::new(|b| {
                    b[off::VOLUME_SIZE_BYTES + 2] ^= 0x01;
                    reseal(b);
                }),
            ),
            (
                "label not utf-8",
                Box::new(|b| {
                    b[off::LABEL] = 0xff;
                    reseal(b);
                }),
            ),
        ];
        for (name, mutate) in cases {
            let mut b = good;
            mutate(&mut b);
            let err = Superblock::decode(&b).expect_err(name);
            let expected_kind = match name {
                "magic" => matches!(err, LayoutError::BadMagic { .. }),
                n if n.starts_with("major") => matches!(
                    err,
                    LayoutError::UnsupportedVersion {
                        supported_major: FORMAT_VERSION_MAJOR,
                        ..
                    }
                ),
                "crc" => matches!(err, LayoutError::BadCrc { .. }),
                _ => matches!(
                    err,
                    LayoutError::InvalidField {
                        structure: Structure::Superblock,
                        ..
                    }
                ),
            };
            assert!(expected_kind, "{name}: {err}");
        }
    }

    #[test]
    fn newer_minor_version_and_reserved_bytes_are_accepted() {
        let sb = sample();
        let mut b = sb.encode().expect("encodes");
        b[VERSION_MINOR_OFFSET] = 7;
        b[60] = 0xaa;
        b[2000] = 0x55;
        reseal(&mut b);
        assert_eq!(Superblock::decode(&b), Ok(sb));
    }

    #[test]
    fn truncated_and_blank_input() {
        let good = sample().encode().expect("encodes");
        for len in [0, 1, 8, 12, 4091, 4095] {
            assert_eq!(
                Superblock::decode(&good[..len]),
                Err(LayoutError::Truncated {
                    structure: S,
                    needed_bytes: 4096,
                    got_bytes: len
                })
            );
        }
        assert_eq!(
            Superblock::decode(&[0u8; 4096]),
            Err(LayoutError::Blank { structure: S })
        );
    }

    #[test]
    fn encode_refuses_what_decode_would_refuse() {
        let mut sb = sample();
        sb.member_index = sb.member_count;
        assert!(sb.encode().is_err());
        let mut sb = sample();
        sb.set_uuid = Uuid::NIL;
        assert!(sb.encode().is_err());
        let mut sb = sample();
        sb.layout.data_slot_count += 1;
        assert!(sb.encode().is_err());
    }

    #[test]
    fn selection_between_copies() {
        let sb = sample();
        let bad = || Err(LayoutError::Blank { structure: S });
        assert_eq!(
            select_superblock(Ok(sb.clone()), Ok(sb.clone())).map(|c| c.copies),
            Ok(SuperblockCopies::Both)
        );
        assert_eq!(
            select_superblock(Ok(sb.clone()), bad()).map(|c| c.copies),
            Ok(SuperblockCopies::OnlyA)
        );
        let choice = select_superblock(bad(), Ok(sb.clone())).expect("B is enough");
        assert_eq!(
            (choice.superblock, choice.copies),
            (sb.clone(), SuperblockCopies::OnlyB)
        );
        assert!(matches!(
            select_superblock(bad(), bad()),
            Err(LayoutError::NoValidSuperblock { .. })
        ));
        let mut other = sb.clone();
        other.set_uuid = Uuid([1; 16]);
        assert_eq!(
            select_superblock(Ok(sb), Ok(other)),
            Err(LayoutError::SuperblockConflict {
                difference: "set uuid"
            })
        );
    }
}
