//! Little-endian field access, the common preamble (magic + version) and CRC32C helpers
//! shared by every structure.

use super::error::{LayoutError, Structure};
use super::{FORMAT_VERSION_MAJOR, FORMAT_VERSION_MINOR, META_STRUCT_SIZE_BYTES};

/// Offset of the magic number in every structure.
pub(crate) const MAGIC_OFFSET: usize = 0;
/// Offset of the major version (u16) in every structure.
pub(crate) const VERSION_MAJOR_OFFSET: usize = 8;
/// Offset of the minor version (u16) in every structure.
pub(crate) const VERSION_MINOR_OFFSET: usize = 10;
/// Offset of the CRC32C (u32) in a 4096-byte metadata structure: its last 4 bytes.
pub(crate) const META_CRC_OFFSET: usize = META_STRUCT_SIZE_BYTES - 4;

/// CRC-32C (Castagnoli, reflected polynomial 0x82F63B78, initial value and final XOR
/// 0xFFFFFFFF), the checksum of every structure in the format. Uses the SSE4.2 `crc32`
/// instruction when the CPU has it. `crc32c(b"123456789") == 0xE306_9283`.
pub fn crc32c(bytes: &[u8]) -> u32 {
    ::crc32c::crc32c(bytes)
}

/// The `(major, minor)` format version stored in bytes 8..12 of any structure, read
/// without any other check (`None` if `bytes` is shorter). For diagnostics, and for the
/// rule that a writer does not modify a volume set written by a newer minor version.
pub fn format_version_of(bytes: &[u8]) -> Option<(u16, u16)> {
    if bytes.len() < VERSION_MINOR_OFFSET + 2 {
        return None;
    }
    Some((
        get_u16(bytes, VERSION_MAJOR_OFFSET),
        get_u16(bytes, VERSION_MINOR_OFFSET),
    ))
}

/// Continues a CRC-32C: `crc32c_append(crc32c(a), b) == crc32c(a ++ b)`.
pub(crate) fn crc32c_append(crc: u32, bytes: &[u8]) -> u32 {
    ::crc32c::crc32c_append(crc, bytes)
}

pub(crate) fn get_u16(b: &[u8], off: usize) -> u16 {
    let mut a = [0u8; 2];
    a.copy_from_slice(&b[off..off + 2]);
    u16::from_le_bytes(a)
}

pub(crate) fn get_u32(b: &[u8], off: usize) -> u32 {
    let mut a = [0u8; 4];
    a.copy_from_slice(&b[off..off + 4]);
    u32::from_le_bytes(a)
}

pub(crate) fn get_u64(b: &[u8], off: usize) -> u64 {
    let mut a = [0u8; 8];
    a.copy_from_slice(&b[off..off + 8]);
    u64::from_le_bytes(a)
}

pub(crate) fn get_array<const N: usize>(b: &[u8], off: usize) -> [u8; N] {
    let mut a = [0u8; N];
    a.copy_from_slice(&b[off..off + N]);
    a
}

pub(crate) fn put_u16(b: &mut [u8], off: usize, v: u16) {
    b[off..off + 2].copy_from_slice(&v.to_le_bytes());
}

pub(crate) fn put_u32(b: &mut [u8], off: usize, v: u32) {
    b[off..off + 4].copy_from_slice(&v.to_le_bytes());
}

pub(crate) fn put_u64(b: &mut [u8], off: usize, v: u64) {
    b[off..off + 8].copy_from_slice(&v.to_le_bytes());
}

pub(crate) fn put_bytes(b: &mut [u8], off: usize, v: &[u8]) {
    b[off..off + v.len()].copy_from_slice(v);
}

/// The first `N` bytes of `bytes`, or [`LayoutError::Truncated`].
pub(crate) fn take<const N: usize>(
    structure: Structure,
    bytes: &[u8],
) -> Result<&[u8; N], LayoutError> {
    bytes.first_chunk::<N>().ok_or(LayoutError::Truncated {
        structure,
        needed_bytes: N,
        got_bytes: bytes.len(),
    })
}

/// Writes magic and the current format version at the start of a structure.
pub(crate) fn put_preamble(b: &mut [u8], magic: &[u8; 8]) {
    put_bytes(b, MAGIC_OFFSET, magic);
    put_u16(b, VERSION_MAJOR_OFFSET, FORMAT_VERSION_MAJOR);
    put_u16(b, VERSION_MINOR_OFFSET, FORMAT_VERSION_MINOR);
}

/// Checks the magic and the major version, in that order. `b` is the whole structure
/// (used to tell a blank one from a foreign one).
pub(crate) fn check_preamble(
    structure: Structure,
    b: &[u8],
    magic: &[u8; 8],
) -> Result<(), LayoutError> {
    let found: [u8; 8] = get_array(b, MAGIC_OFFSET);
    if &found != magic {
        if b.iter().all(|&x| x == 0) {
            return Err(LayoutError::Blank { structure });
        }
        return Err(LayoutError::BadMagic {
            structure,
            expected: *magic,
            found,
        });
    }
    let major = get_u16(b, VERSION_MAJOR_OFFSET);
    if major != FORMAT_VERSION_MAJOR {
        return Err(LayoutError::UnsupportedVersion {
            structure,
            found_major: major,
            found_minor: get_u16(b, VERSION_MINOR_OFFSET),
            supported_major: FORMAT_VERSION_MAJOR,
        });
    }
    Ok(())
}

/// Stores the CRC32C of bytes `0..4092` of a metadata structure in its last 4 bytes.
pub(crate) fn seal_meta(b: &mut [u8; META_STRUCT_SIZE_BYTES]) {
    let crc = crc32c(&b[..META_CRC_OFFSET]);
    put_u32(b, META_CRC_OFFSET, crc);
}

/// Checks the CRC32C in the last 4 bytes of a metadata structure.
pub(crate) fn check_meta_crc(
    structure: Structure,
    b: &[u8; META_STRUCT_SIZE_BYTES],
) -> Result<(), LayoutError> {
    check_crc(
        structure,
        get_u32(b, META_CRC_OFFSET),
        crc32c(&b[..META_CRC_OFFSET]),
    )
}

pub(crate) fn check_crc(
    structure: Structure,
    stored: u32,
    computed: u32,
) -> Result<(), LayoutError> {
    if stored == computed {
        Ok(())
    } else {
        Err(LayoutError::BadCrc {
            structure,
            stored,
            computed,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn crc32c_known_answers() {
        // The check value of CRC-32C (RFC 3720 appendix B.4 and the CRC catalogue).
        assert_eq!(crc32c(b"123456789"), 0xE306_9283);
        assert_eq!(crc32c(b""), 0);
        // RFC 3720 B.4: 32 bytes of zeros, and 32 bytes of 0xFF.
        assert_eq!(crc32c(&[0u8; 32]), 0x8A91_36AA);
        assert_eq!(crc32c(&[0xFFu8; 32]), 0x62A8_AB43);
        // Appending is the same as one pass.
        assert_eq!(crc32c_append(crc32c(b"1234"), b"56789"), 0xE306_9283);
    }

    #[test]
    fn version_is_readable_without_decoding() {
        let mut b = [0u8; 12];
        put_preamble(&mut b, b"ABCDEFGH");
        assert_eq!(
            format_version_of(&b),
            Some((FORMAT_VERSION_MAJOR, FORMAT_VERSION_MINOR))
        );
        assert_eq!(format_version_of(&b[..11]), None);
    }

    #[test]
    fn little_endian_round_trip() {
        let mut b = [0u8; 16];
        put_u16(&mut b, 0, 0x0102);
        put_u32(&mut b, 2, 0x0304_0506);
        put_u64(&mut b, 6, 0x0708_090a_0b0c_0d0e);
        assert_eq!(b[..6], [0x02, 0x01, 0x06, 0x05, 0x04, 0x03]);
        assert_eq!(get_u16(&b, 0), 0x0102);
        assert_eq!(get_u32(&b, 2), 0x0304_0506);
        assert_eq!(get_u64(&b, 6), 0x0708_090a_0b0c_0d0e);
    }
}
