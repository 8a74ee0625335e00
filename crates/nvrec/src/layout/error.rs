//! Errors of the layout module: one case per way a structure can be refused.

use std::fmt;

/// Which on-disk structure (or which part of one) an error is about.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Structure {
    Superblock,
    /// The 128-byte header of a chunk, checked by its own header CRC.
    ChunkHeader,
    /// A whole chunk: header and payload, checked by the chunk CRC.
    Chunk,
    Checkpoint,
    RecordingEntry,
    VolumeLayout,
    Uuid,
    Label,
    /// A record inside a chunk's payload (datagrams, packets, losses).
    Record,
}

impl fmt::Display for Structure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Structure::Superblock => "superblock",
            Structure::ChunkHeader => "chunk header",
            Structure::Chunk => "chunk",
            Structure::Checkpoint => "checkpoint",
            Structure::RecordingEntry => "recording entry",
            Structure::VolumeLayout => "volume layout",
            Structure::Uuid => "uuid",
            Structure::Label => "label",
            Structure::Record => "record",
        })
    }
}

/// Why bytes could not be decoded, or a value could not be encoded or laid out.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LayoutError {
    /// The bytes are all zero: a slot or block that was never written (or was wiped).
    /// Distinct from [`LayoutError::BadMagic`] so that a scan can tell "nothing here"
    /// from "something else here".
    #[error("{structure}: blank (all zero), never written")]
    Blank { structure: Structure },

    /// The first 8 bytes are not this structure's magic number.
    #[error("{structure}: bad magic {}, expected {}", show_magic(.found), show_magic(.expected))]
    BadMagic {
        structure: Structure,
        expected: [u8; 8],
        found: [u8; 8],
    },

    /// The structure was written by a format major version this reader does not read.
    #[error(
        "{structure}: format version {found_major}.{found_minor} is not supported \
         (this reader reads {supported_major}.x)"
    )]
    UnsupportedVersion {
        structure: Structure,
        found_major: u16,
        found_minor: u16,
        supported_major: u16,
    },

    /// The CRC32C stored in the structure does not match the one computed over its bytes.
    #[error("{structure}: CRC32C mismatch: stored {stored:#010x}, computed {computed:#010x}")]
    BadCrc {
        structure: Structure,
        stored: u32,
        computed: u32,
    },

    /// The input (or output) slice is shorter than the structure needs.
    #[error("{structure}: truncated: needs {needed_bytes} bytes, got {got_bytes}")]
    Truncated {
        structure: Structure,
        needed_bytes: usize,
        got_bytes: usize,
    },

    /// A field holds a value outside its range, or breaks a rule that ties fields together.
    #[error("{structure}: invalid {field}: {reason}")]
    InvalidField {
        structure: Structure,
        field: &'static str,
        reason: String,
    },

    /// A flags field has must-understand bits that this format version does not define.
    #[error("{structure}: {field} has unknown must-understand bits {bits:#010x}")]
    UnsupportedFeature {
        structure: Structure,
        field: &'static str,
        bits: u32,
    },

    /// The volume cannot hold the two superblocks, the index area and one data slot.
    #[error(
        "volume of {volume_size_bytes} bytes is too small: this chunk size and logical \
         block size need at least {min_volume_bytes} bytes"
    )]
    VolumeTooSmall {
        volume_size_bytes: u64,
        min_volume_bytes: u64,
    },

    /// Neither superblock copy could be decoded.
    #[error("no valid superblock: copy A: {a}; copy B: {b}")]
    NoValidSuperblock {
        a: Box<LayoutError>,
        b: Box<LayoutError>,
    },

    /// Both superblock copies are valid but say different things; nvrec never rewrites a
    /// superblock, so this means an interrupted format or a foreign write.
    #[error("superblock copies A and B are both valid but differ ({difference})")]
    SuperblockConflict { difference: &'static str },
}

impl LayoutError {
    pub(crate) fn invalid(
        structure: Structure,
        field: &'static str,
        reason: impl Into<String>,
    ) -> Self {
        LayoutError::InvalidField {
            structure,
            field,
            reason: reason.into(),
        }
    }
}

/// Magic numbers are ASCII; show them as text when they are printable, else as hex.
fn show_magic(magic: &[u8; 8]) -> String {
    if magic.iter().all(|b| b.is_ascii_graphic()) {
        format!("\"{}\"", String::from_utf8_lossy(magic))
    } else {
        let hex: Vec<String> = magic.iter().map(|b| format!("{b:02x}")).collect();
        format!("0x{}", hex.join(""))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_name_the_structure_and_values() {
        let e = LayoutError::BadMagic {
            structure: Structure::Superblock,
            expected: *b"NVRECSUP",
            found: [0xde, 0xad, 0, 0, 0, 0, 0, 1],
        };
        assert_eq!(
            e.to_string(),
            "superblock: bad magic 0xdead000000000001, expected \"NVRECSUP\""
        );
        let e = LayoutError::BadCrc {
            structure: Structure::Chunk,
            stored: 1,
            computed: 0xe306_9283,
        };
        assert_eq!(
            e.to_string(),
            "chunk: CRC32C mismatch: stored 0x00000001, computed 0xe3069283"
        );
    }
}
