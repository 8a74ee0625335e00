//! Recognising what the first blocks of a device hold: partition tables, filesystems,
//! swap, and volume-manager, RAID and encryption headers.
//!
//! This is a pure function over bytes ([`detect_signature`]); the caller reads the bytes.
//! It looks only at fixed magic numbers in the first [`SIGNATURE_PROBE_BYTES`]; it does
//! not validate checksums or superblock contents, and it cannot see formats whose only
//! marker sits at the end of a device (md RAID metadata 0.90 and 1.0, some ZFS labels).
//! A false "found" only costs the user a `--force`; a false "nothing here" could cost
//! them their data, so the magics are matched loosely.

use std::fmt;

/// How many leading bytes of a device [`detect_signature`] looks at (the btrfs magic at
/// 65600 and the iso9660 descriptor at 32769 lie inside).
pub const SIGNATURE_PROBE_BYTES: usize = 128 * 1024;

/// What kind of existing data a signature says a device holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum SignatureKind {
    /// GUID partition table ("EFI PART" header).
    GptPartitionTable,
    /// DOS/MBR partition table (0x55AA boot signature without a FAT or NTFS boot sector).
    DosPartitionTable,
    Ext2,
    Ext3,
    Ext4,
    Xfs,
    Btrfs,
    F2fs,
    Squashfs,
    Iso9660,
    Ntfs,
    Exfat,
    /// FAT12, FAT16 or FAT32 (vfat).
    Fat,
    /// Linux swap area.
    Swap,
    /// LVM2 physical volume label.
    Lvm2PhysicalVolume,
    /// Linux md RAID superblock, metadata 1.1 or 1.2.
    MdRaid,
    /// LUKS encrypted volume header.
    Luks,
    /// bcache backing or cache device.
    Bcache,
}

impl SignatureKind {
    /// Short name, as `blkid` users know it: "ext4", "gpt", "swap", "LVM2_member".
    pub fn short_name(self) -> &'static str {
        match self {
            Self::GptPartitionTable => "gpt",
            Self::DosPartitionTable => "dos",
            Self::Ext2 => "ext2",
            Self::Ext3 => "ext3",
            Self::Ext4 => "ext4",
            Self::Xfs => "xfs",
            Self::Btrfs => "btrfs",
            Self::F2fs => "f2fs",
            Self::Squashfs => "squashfs",
            Self::Iso9660 => "iso9660",
            Self::Ntfs => "ntfs",
            Self::Exfat => "exfat",
            Self::Fat => "vfat",
            Self::Swap => "swap",
            Self::Lvm2PhysicalVolume => "LVM2_member",
            Self::MdRaid => "linux_raid_member",
            Self::Luks => "crypto_LUKS",
            Self::Bcache => "bcache",
        }
    }

    /// A phrase for messages: "an ext4 filesystem", "a GPT partition table".
    pub fn description(self) -> &'static str {
        match self {
            Self::GptPartitionTable => "a GPT partition table",
            Self::DosPartitionTable => "a DOS/MBR partition table",
            Self::Ext2 => "an ext2 filesystem",
            Self::Ext3 => "an ext3 filesystem",
            Self::Ext4 => "an ext4 filesystem",
            Self::Xfs => "an XFS filesystem",
            Self::Btrfs => "a btrfs filesystem",
            Self::F2fs => "an F2FS filesystem",
            Self::Squashfs => "a squashfs image",
            Self::Iso9660 => "an ISO 9660 (CD/DVD) image",
            Self::Ntfs => "an NTFS filesystem",
            Self::Exfat => "an exFAT filesystem",
            Self::Fat => "a FAT (vfat) filesystem",
            Self::Swap => "a Linux swap area",
            Self::Lvm2PhysicalVolume => "an LVM2 physical volume",
            Self::MdRaid => "a Linux md RAID member (metadata 1.1/1.2)",
            Self::Luks => "a LUKS encrypted volume",
            Self::Bcache => "a bcache device",
        }
    }
}

impl fmt::Display for SignatureKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.description())
    }
}

/// A recognised signature: what it says the device holds, and where its magic sits.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub struct Signature {
    pub kind: SignatureKind,
    /// Byte offset of the magic from the start of the device.
    pub offset_bytes: u64,
}

impl fmt::Display for Signature {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} (magic at byte {})", self.kind, self.offset_bytes)
    }
}

/// One entry of the detection table: any of `magics` at any of `offsets_bytes`.
struct MagicRule {
    kind: SignatureKind,
    magics: &'static [&'static [u8]],
    offsets_bytes: &'static [usize],
}

/// The ext2/3/4 magic 0xEF53, little-endian, at 56 bytes into the superblock at 1024.
const EXT_MAGIC_OFFSET_BYTES: usize = 1080;
const EXT_SUPERBLOCK_OFFSET_BYTES: usize = 1024;

/// Checked in order; the first hit wins. Containers and partition tables whose headers
/// can coexist with a filesystem-looking sector come first, and the bare 0x55AA boot
/// signature comes last, because FAT, NTFS, exFAT, GPT (protective MBR) and hybrid ISO
/// images carry it too.
const RULES: &[MagicRule] = &[
    MagicRule {
        kind: SignatureKind::GptPartitionTable,
        magics: &[b"EFI PART"],
        // After the protective MBR on 512-byte-sector disks, or on 4Kn disks.
        offsets_bytes: &[512, 4096],
    },
    MagicRule {
        kind: SignatureKind::Luks,
        magics: &[b"LUKS\xba\xbe"],
        offsets_bytes: &[0],
    },
    MagicRule {
        kind: SignatureKind::MdRaid,
        // 0xa92b4efc little-endian; metadata 1.1 at 0, 1.2 at 4 KiB.
        magics: &[&[0xfc, 0x4e, 0x2b, 0xa9]],
        offsets_bytes: &[0, 4096],
    },
    MagicRule {
        kind: SignatureKind::Lvm2PhysicalVolume,
        // The label may sit in any of the first four sectors.
        magics: &[b"LABELONE"],
        offsets_bytes: &[0, 512, 1024, 1536],
    },
    MagicRule {
        kind: SignatureKind::Bcache,
        // The bcache superblock sits at 4 KiB; its 16-byte magic at offset 24 in it.
        magics: &[&[
            0xc6, 0x85, 0x73, 0xf6, 0x4e, 0x1a, 0x45, 0xca, 0x82, 0x65, 0xf5, 0x7f, 0x48, 0xba,
            0x6d, 0x81,
        ]],
        offsets_bytes: &[4096 + 24],
    },
    MagicRule {
        kind: SignatureKind::Xfs,
        magics: &[b"XFSB"],
        offsets_bytes: &[0],
    },
    MagicRule {
        kind: SignatureKind::Btrfs,
        // Superblock at 64 KiB, magic at 0x40 into it.
        magics: &[b"_BHRfS_M"],
        offsets_bytes: &[65536 + 0x40],
    },
    MagicRule {
        // Refined into ext2, ext3 or ext4 from the feature flags (see `ext_generation`).
        kind: SignatureKind::Ext4,
        magics: &[&[0x53, 0xef]],
        offsets_bytes: &[EXT_MAGIC_OFFSET_BYTES],
    },
    MagicRule {
        kind: SignatureKind::F2fs,
        // 0xF2F52010 little-endian, superblock at 1 KiB.
        magics: &[&[0x10, 0x20, 0xf5, 0xf2]],
        offsets_bytes: &[1024],
    },
    MagicRule {
        kind: SignatureKind::Squashfs,
        magics: &[b"hsqs"],
        offsets_bytes: &[0],
    },
    MagicRule {
        kind: SignatureKind::Swap,
        // At the end of the first page: page sizes 4, 8, 16 and 64 KiB.
        magics: &[b"SWAPSPACE2", b"SWAP-SPACE"],
        offsets_bytes: &[4096 - 10, 8192 - 10, 16384 - 10, 65536 - 10],
    },
    MagicRule {
        kind: SignatureKind::Ntfs,
        magics: &[b"NTFS    "],
        offsets_bytes: &[3],
    },
    MagicRule {
        kind: SignatureKind::Exfat,
        magics: &[b"EXFAT   "],
        offsets_bytes: &[3],
    },
    MagicRule {
        kind: SignatureKind::Fat,
        // BS_FilSysType: at 54 for FAT12/16, at 82 for FAT32.
        magics: &[b"FAT12", b"FAT16", b"FAT32"],
        offsets_bytes: &[54, 82],
    },
    MagicRule {
        kind: SignatureKind::Iso9660,
        // Primary volume descriptor in sector 16 (of 2 KiB): type byte, then "CD001".
        magics: &[b"CD001"],
        offsets_bytes: &[32769],
    },
    MagicRule {
        kind: SignatureKind::DosPartitionTable,
        magics: &[&[0x55, 0xaa]],
        offsets_bytes: &[510],
    },
];

/// Looks for a known signature in the leading bytes of a device (pass up to
/// [`SIGNATURE_PROBE_BYTES`]; fewer is fine, magics beyond the end are simply not seen).
/// Returns the first one found, in the order the module's table lists them.
pub fn detect_signature(first_bytes: &[u8]) -> Option<Signature> {
    for rule in RULES {
        for &offset in rule.offsets_bytes {
            let hit = rule
                .magics
                .iter()
                .any(|magic| bytes_at(first_bytes, offset, magic.len()) == Some(magic));
            if hit {
                let kind = match rule.kind {
                    SignatureKind::Ext4 => ext_generation(first_bytes),
                    other => other,
                };
                return Some(Signature {
                    kind,
                    offset_bytes: offset as u64,
                });
            }
        }
    }
    None
}

fn bytes_at(bytes: &[u8], offset: usize, len: usize) -> Option<&[u8]> {
    bytes.get(offset..offset.checked_add(len)?)
}

fn le_u32_at(bytes: &[u8], offset: usize) -> Option<u32> {
    let raw = bytes_at(bytes, offset, 4)?;
    Some(u32::from_le_bytes([raw[0], raw[1], raw[2], raw[3]]))
}

/// Tells ext2, ext3 and ext4 apart by the superblock's feature flags: any feature ext3
/// does not know (extents, 64bit, flex_bg, huge_file, metadata_csum, ...) means ext4; a
/// journal without those means ext3; neither means ext2. Missing bytes read as zero.
fn ext_generation(first_bytes: &[u8]) -> SignatureKind {
    const COMPAT_HAS_JOURNAL: u32 = 0x4;
    // filetype, recover, journal_dev, meta_bg: all known to ext3.
    const INCOMPAT_EXT3: u32 = 0x1 | 0x2 | 0x4 | 0x8 | 0x10;
    // sparse_super, large_file, btree_dir.
    const RO_COMPAT_EXT3: u32 = 0x1 | 0x2 | 0x4;
    let sb = EXT_SUPERBLOCK_OFFSET_BYTES;
    let compat = le_u32_at(first_bytes, sb + 0x5c).unwrap_or(0);
    let incompat = le_u32_at(first_bytes, sb + 0x60).unwrap_or(0);
    let ro_compat = le_u32_at(first_bytes, sb + 0x64).unwrap_or(0);
    if incompat & !INCOMPAT_EXT3 != 0 || ro_compat & !RO_COMPAT_EXT3 != 0 {
        SignatureKind::Ext4
    } else if compat & COMPAT_HAS_JOURNAL != 0 {
        SignatureKind::Ext3
    } else {
        SignatureKind::Ext2
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn zeroed() -> Vec<u8> {
        vec![0u8; SIGNATURE_PROBE_BYTES]
    }

    fn put(buf: &mut [u8], offset: usize, bytes: &[u8]) {
        buf[offset..offset + bytes.len()].copy_from_slice(bytes);
    }

    fn put_le_u32(buf: &mut [u8], offset: usize, value: u32) {
        put(buf, offset, &value.to_le_bytes());
    }

    /// An ext superblock with the given compat / incompat / ro_compat flags.
    fn ext(compat: u32, incompat: u32, ro_compat: u32) -> Vec<u8> {
        let mut buf = zeroed();
        put(&mut buf, 1080, &[0x53, 0xef]);
        put_le_u32(&mut buf, 1024 + 0x5c, compat);
        put_le_u32(&mut buf, 1024 + 0x60, incompat);
        put_le_u32(&mut buf, 1024 + 0x64, ro_compat);
        buf
    }

    fn with(writes: &[(usize, &[u8])]) -> Vec<u8> {
        let mut buf = zeroed();
        for &(offset, bytes) in writes {
            put(&mut buf, offset, bytes);
        }
        buf
    }

    /// A FAT boot sector: jump, OEM name, filesystem type, boot signature.
    fn fat_boot_sector(type_offset: usize, fs_type: &[u8]) -> Vec<u8> {
        with(&[
            (0, &[0xeb, 0x3c, 0x90]),
            (3, b"mkfs.fat"),
            (type_offset, fs_type),
            (510, &[0x55, 0xaa]),
        ])
    }

    #[test]
    fn device_signature_table() {
        use SignatureKind as K;
        let md_magic: &[u8] = &[0xfc, 0x4e, 0x2b, 0xa9];
        let cases: Vec<(&str, Vec<u8>, K, u64)> = vec![
            (
                "mbr",
                with(&[(510, &[0x55, 0xaa])]),
                K::DosPartitionTable,
                510,
            ),
            (
                "gpt at 512 with protective mbr",
                with(&[(510, &[0x55, 0xaa]), (512, b"EFI PART")]),
                K::GptPartitionTable,
                512,
            ),
            (
                "gpt 4kn",
                with(&[(4096, b"EFI PART")]),
                K::GptPartitionTable,
                4096,
            ),
            ("ext2", ext(0, 0x2, 0x1 | 0x2), K::Ext2, 1080),
            ("ext3", ext(0x4 | 0x10 | 0x20, 0x2, 0x1), K::Ext3, 1080),
            ("ext4 extents", ext(0x4, 0x2 | 0x40, 0x1), K::Ext4, 1080),
            ("ext4 metadata_csum", ext(0x4, 0x2, 0x400), K::Ext4, 1080),
            ("xfs", with(&[(0, b"XFSB")]), K::Xfs, 0),
            ("btrfs", with(&[(65600, b"_BHRfS_M")]), K::Btrfs, 65600),
            ("swap v1", with(&[(4086, b"SWAPSPACE2")]), K::Swap, 4086),
            ("swap v0", with(&[(4086, b"SWAP-SPACE")]), K::Swap, 4086),
            (
                "swap 64k pages",
                with(&[(65526, b"SWAPSPACE2")]),
                K::Swap,
                65526,
            ),
            (
                "lvm2 sector 0",
                with(&[(0, b"LABELONE")]),
                K::Lvm2PhysicalVolume,
                0,
            ),
            (
                "lvm2 sector 1",
                with(&[(512, b"LABELONE")]),
                K::Lvm2PhysicalVolume,
                512,
            ),
            (
                "lvm2 sector 3",
                with(&[(1536, b"LABELONE")]),
                K::Lvm2PhysicalVolume,
                1536,
            ),
            ("md 1.1", with(&[(0, md_magic)]), K::MdRaid, 0),
            ("md 1.2", with(&[(4096, md_magic)]), K::MdRaid, 4096),
            ("luks", with(&[(0, b"LUKS\xba\xbe\x00\x02")]), K::Luks, 0),
            (
                "ntfs with boot signature",
                with(&[
                    (0, &[0xeb, 0x52, 0x90]),
                    (3, b"NTFS    "),
                    (510, &[0x55, 0xaa]),
                ]),
                K::Ntfs,
                3,
            ),
            (
                "exfat with boot signature",
                with(&[(3, b"EXFAT   "), (510, &[0x55, 0xaa])]),
                K::Exfat,
                3,
            ),
            ("fat12", fat_boot_sector(54, b"FAT12   "), K::Fat, 54),
            ("fat16", fat_boot_sector(54, b"FAT16   "), K::Fat, 54),
            ("fat32", fat_boot_sector(82, b"FAT32   "), K::Fat, 82),
            (
                "f2fs",
                with(&[(1024, &[0x10, 0x20, 0xf5, 0xf2])]),
                K::F2fs,
                1024,
            ),
            ("squashfs", with(&[(0, b"hsqs")]), K::Squashfs, 0),
            (
                "iso9660",
                with(&[(32768, b"\x01CD001\x01")]),
                K::Iso9660,
                32769,
            ),
            (
                "hybrid iso with mbr",
                with(&[(510, &[0x55, 0xaa]), (32768, b"\x01CD001\x01")]),
                K::Iso9660,
                32769,
            ),
            (
                "bcache",
                with(&[(
                    4096 + 24,
                    &[
                        0xc6, 0x85, 0x73, 0xf6, 0x4e, 0x1a, 0x45, 0xca, 0x82, 0x65, 0xf5, 0x7f,
                        0x48, 0xba, 0x6d, 0x81,
                    ],
                )]),
                K::Bcache,
                4120,
            ),
        ];
        for (name, bytes, kind, offset_bytes) in cases {
            assert_eq!(
                detect_signature(&bytes),
                Some(Signature { kind, offset_bytes }),
                "case {name}"
            );
        }
    }

    #[test]
    fn device_signature_none_on_blank_or_pattern_data() {
        assert_eq!(detect_signature(&zeroed()), None);
        assert_eq!(detect_signature(&[]), None);
        // Bytes that merely look busy (a fixed xorshift stream) hold no magic.
        let mut state: u64 = 0x9e37_79b9_7f4a_7c15;
        let noise: Vec<u8> = (0..SIGNATURE_PROBE_BYTES)
            .map(|_| {
                state ^= state << 13;
                state ^= state >> 7;
                state ^= state << 17;
                (state >> 24) as u8
            })
            .collect();
        assert_eq!(detect_signature(&noise), None);
    }

    #[test]
    fn device_signature_short_buffers_do_not_panic_and_see_what_fits() {
        let full = with(&[(510, &[0x55, 0xaa]), (65600, b"_BHRfS_M")]);
        // The btrfs magic is beyond a 64 KiB read, the boot signature is not.
        assert_eq!(
            detect_signature(&full[..65536]).map(|s| s.kind),
            Some(SignatureKind::DosPartitionTable)
        );
        assert_eq!(
            detect_signature(&full).map(|s| s.kind),
            Some(SignatureKind::Btrfs)
        );
        // Magic cut in half by the end of the buffer.
        assert_eq!(detect_signature(&full[..511]), None);
        for len in [0, 1, 3, 54, 511, 512, 1081, 4095, 32770] {
            let _ = detect_signature(&full[..len]);
        }
        // An ext magic with the superblock's feature words cut off still counts.
        let ext4 = ext(0x4, 0x40, 0);
        assert_eq!(
            detect_signature(&ext4[..1082]),
            Some(Signature {
                kind: SignatureKind::Ext2,
                offset_bytes: 1080
            })
        );
    }

    #[test]
    fn device_signature_messages_name_what_and_where() {
        let sig = Signature {
            kind: SignatureKind::Ext4,
            offset_bytes: 1080,
        };
        assert_eq!(sig.to_string(), "an ext4 filesystem (magic at byte 1080)");
        assert_eq!(SignatureKind::Swap.short_name(), "swap");
    }
}
