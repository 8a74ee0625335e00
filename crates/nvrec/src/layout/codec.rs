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
/// 0xFFFFFFFF), the checksum of every structure in the format. Folds long buffers with
/// VPCLMULQDQ where the CPU has it (see `crc_fold`), else uses the SSE4.2 `crc32`
/// instruction when the CPU has it. `crc32c(b"123456789") == 0xE306_9283`.
pub fn crc32c(bytes: &[u8]) -> u32 {
    super::crc_fold::crc32c_append(0, bytes)
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
    super::crc_fold::crc32c_append(crc, bytes)
}

/// Joins two CRC-32Cs: `crc32c_combine(crc32c(a), crc32c(b), b.len()) == crc32c(a ++ b)`.
///
/// The CRC of `a` is advanced over `b.len()` zero bytes by multiplying it with
/// `x^(8 * len_b)` modulo the polynomial (in the reflected bit order the CRC uses), then
/// the CRC of `b` is added. The power of x is found by repeated squaring and cached for the
/// last length asked for: on the hot path every chunk of a recording has the same payload
/// length, so a combine costs one 32-step multiplication.
pub(crate) fn crc32c_combine(crc_a: u32, crc_b: u32, len_b: usize) -> u32 {
    use std::sync::atomic::{AtomicU64, Ordering};
    /// (length << 32) | operator of the last length combined; length 0 never caches.
    static LAST: AtomicU64 = AtomicU64::new(0);
    let cached = LAST.load(Ordering::Relaxed);
    let operator = if len_b != 0 && (cached >> 32) == len_b as u64 {
        cached as u32
    } else {
        let operator = x_pow_8n_mod_p(len_b as u64);
        if len_b != 0 && (len_b as u64) < (1 << 32) {
            LAST.store(((len_b as u64) << 32) | operator as u64, Ordering::Relaxed);
        }
        operator
    };
    multiply_mod_p(operator, crc_a) ^ crc_b
}

/// CRC-32C's polynomial in reflected bit order.
const POLY_REFLECTED: u32 = 0x82F6_3B78;

/// `a * b` modulo the polynomial, both in reflected order (bit 31 is x^0).
fn multiply_mod_p(a: u32, mut b: u32) -> u32 {
    let mut product = 0u32;
    let mut power = a;
    let mut bit = 0x8000_0000u32;
    while bit != 0 {
        if b & bit != 0 {
            product ^= power;
            b ^= bit;
            if b == 0 {
                break;
            }
        }
        power = if power & 1 != 0 {
            (power >> 1) ^ POLY_REFLECTED
        } else {
            power >> 1
        };
        bit >>= 1;
    }
    product
}

/// `x^(8n)` modulo the polynomial, reflected, by repeated squaring.
fn x_pow_8n_mod_p(n: u64) -> u32 {
    let mut result = 0x8000_0000u32; // x^0
    let mut square = 0x0080_0000u32; // x^8: one byte
    let mut n = n;
    while n != 0 {
        if n & 1 != 0 {
            result = multiply_mod_p(square, result);
        }
        square = multiply_mod_p(square, square);
        n >>= 1;
    }
    result
}

#[cfg(test)]
mod combine_tests {
    use super::*;

    #[test]
    fn combine_matches_a_crc_over_the_whole() {
        let data: Vec<u8> = (0..300_000u32)
            .map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8)
            .collect();
        for split in [0usize, 1, 127, 128, 4096, 131_072, 299_999, 300_000] {
            let (a, b) = data.split_at(split);
            assert_eq!(
                crc32c_combine(crc32c(a), crc32c(b), b.len()),
                crc32c(&data),
                "split at {split}"
            );
            // Again: the cached operator for this length gives the same.
            assert_eq!(
                crc32c_combine(crc32c(a), crc32c(b), b.len()),
                crc32c(&data),
                "split at {split}"
            );
        }
    }
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
    put_preamble_minor(b, magic, FORMAT_VERSION_MINOR);
}

/// The preamble with minor version `minor` (chunk headers keep the minor of their layout).
pub(crate) fn put_preamble_minor(b: &mut [u8], magic: &[u8; 8], minor: u16) {
    put_bytes(b, MAGIC_OFFSET, magic);
    put_u16(b, VERSION_MAJOR_OFFSET, FORMAT_VERSION_MAJOR);
    put_u16(b, VERSION_MINOR_OFFSET, minor);
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
