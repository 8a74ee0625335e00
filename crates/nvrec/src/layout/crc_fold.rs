//! CRC-32C of long buffers by folding with carry-less multiplication (VPCLMULQDQ on 512-bit
//! registers), for CPUs that have AVX-512 and VPCLMULQDQ. Everything else, and every
//! buffer shorter than [`FOLD_MIN_BYTES`], goes through the `crc32` instruction.
//!
//! # The arithmetic
//!
//! The CRC without its initial value and final XOR is `M(x) * x^32 mod P(x)`. Two messages
//! whose polynomials are congruent modulo P have the same CRC, so a long message can be
//! shrunk, 16 bytes at a time, into a 16-byte block congruent to it, and the `crc32`
//! instruction finishes on those 16 bytes.
//!
//! The CRC is bit-reflected: in a 16-byte block loaded into a 128-bit lane, lane bit `i`
//! is the coefficient of `x^(127 - i)`. Split the lane into its low and high 64-bit words
//! L and H (each read with bit `i` as `x^(63 - i)`): the block is `L * x^64 + H`. Moving it
//! `d` bytes further down the message multiplies it by `x^(8d)`, and
//!
//! ```text
//! L * x^(64 + 8d) + H * x^(8d)  ≡  L * k_lo + H * k_hi   (mod P),
//! k_lo = x^(64 + 8d - 1) mod P,  k_hi = x^(8d - 1) mod P
//! ```
//!
//! a sum of two 64 x 32-bit carry-less products that fits in 128 bits, ready to be XORed
//! into the block `d` bytes later. (The `- 1` in the exponents: a carry-less product of two
//! reflected 64-bit words lands one bit short of the reflected 128-bit lane, which
//! multiplies it by x once more.) VPCLMULQDQ does this for four lanes of a 512-bit register
//! at once; four registers in flight fold 256 bytes per step.
//!
//! The initial value (the inverted CRC so far) is XORed into the first four message bytes,
//! which is the same as starting the register with it.

/// Buffers shorter than this are not worth the set-up; the `crc32` instruction takes them.
pub(super) const FOLD_MIN_BYTES: usize = 1024;

/// Continues a CRC-32C (initial value and final XOR included, as `crc32c::crc32c_append`).
pub(super) fn crc32c_append(crc: u32, bytes: &[u8]) -> u32 {
    #[cfg(target_arch = "x86_64")]
    if bytes.len() >= FOLD_MIN_BYTES && x86::available() {
        // SAFETY: `available` checked that the CPU has every feature `append_folded` uses.
        return unsafe { x86::append_folded(crc, bytes) };
    }
    ::crc32c::crc32c_append(crc, bytes)
}

#[cfg(target_arch = "x86_64")]
mod x86 {
    use std::arch::x86_64::*;

    /// The Castagnoli polynomial without its x^32 term, bit `d` the coefficient of x^d.
    const POLY_LOW: u32 = 0x1EDC_6F41;

    /// `x^n mod P` as a reflected 64-bit word: the coefficient of x^d at bit 63 - d.
    const fn x_pow_mod_reflected(n: u32) -> u64 {
        let mut remainder: u32 = 1;
        let mut step = 0;
        while step < n {
            let carry = remainder >> 31;
            remainder <<= 1;
            if carry != 0 {
                remainder ^= POLY_LOW;
            }
            step += 1;
        }
        (remainder as u64).reverse_bits()
    }

    /// The (low word, high word) multipliers that move a 16-byte block `distance_bytes`
    /// further down the message.
    const fn fold_keys(distance_bytes: u32) -> (u64, u64) {
        (
            x_pow_mod_reflected(8 * distance_bytes + 64 - 1),
            x_pow_mod_reflected(8 * distance_bytes - 1),
        )
    }

    const KEYS_256: (u64, u64) = fold_keys(256);
    const KEYS_64: (u64, u64) = fold_keys(64);
    const KEYS_48: (u64, u64) = fold_keys(48);
    const KEYS_32: (u64, u64) = fold_keys(32);
    const KEYS_16: (u64, u64) = fold_keys(16);

    pub(super) fn available() -> bool {
        is_x86_feature_detected!("avx512f")
            && is_x86_feature_detected!("vpclmulqdq")
            && is_x86_feature_detected!("pclmulqdq")
            && is_x86_feature_detected!("sse4.2")
    }

    #[inline(always)]
    unsafe fn keys512(keys: (u64, u64)) -> __m512i {
        // Lane layout: low word at the low address.
        _mm512_broadcast_i32x4(_mm_set_epi64x(keys.1 as i64, keys.0 as i64))
    }

    #[inline(always)]
    unsafe fn keys128(keys: (u64, u64)) -> __m128i {
        _mm_set_epi64x(keys.1 as i64, keys.0 as i64)
    }

    /// `fold(block) ^ next` for the four lanes of a 512-bit register.
    #[inline(always)]
    unsafe fn fold512(block: __m512i, keys: __m512i, next: __m512i) -> __m512i {
        let low = _mm512_clmulepi64_epi128::<0x00>(block, keys);
        let high = _mm512_clmulepi64_epi128::<0x11>(block, keys);
        // 0x96: a ^ b ^ c.
        _mm512_ternarylogic_epi64::<0x96>(low, high, next)
    }

    #[inline(always)]
    unsafe fn fold128(block: __m128i, keys: __m128i, next: __m128i) -> __m128i {
        let low = _mm_clmulepi64_si128::<0x00>(block, keys);
        let high = _mm_clmulepi64_si128::<0x11>(block, keys);
        _mm_xor_si128(_mm_xor_si128(low, high), next)
    }

    /// # Safety
    /// The CPU must have AVX-512F, VPCLMULQDQ, PCLMULQDQ and SSE4.2, and `bytes` must be at
    /// least 256 bytes long.
    #[target_feature(enable = "avx512f,vpclmulqdq,pclmulqdq,sse4.2")]
    pub(super) unsafe fn append_folded(crc: u32, bytes: &[u8]) -> u32 {
        debug_assert!(bytes.len() >= 256);
        let mut rest = bytes;
        let load512 = |at: &[u8], lane: usize| -> __m512i {
            // SAFETY: callers index within `at`, which holds at least 64 * (lane + 1) bytes.
            unsafe { _mm512_loadu_si512(at.as_ptr().add(64 * lane).cast()) }
        };
        let initial = _mm512_zextsi128_si512(_mm_cvtsi32_si128(!crc as i32));
        let mut acc = [
            _mm512_xor_si512(load512(rest, 0), initial),
            load512(rest, 1),
            load512(rest, 2),
            load512(rest, 3),
        ];
        rest = &rest[256..];
        let keys = keys512(KEYS_256);
        while rest.len() >= 256 {
            for (lane, value) in acc.iter_mut().enumerate() {
                *value = fold512(*value, keys, load512(rest, lane));
            }
            rest = &rest[256..];
        }
        let keys = keys512(KEYS_64);
        let mut one = fold512(acc[0], keys, acc[1]);
        one = fold512(one, keys, acc[2]);
        one = fold512(one, keys, acc[3]);
        while rest.len() >= 64 {
            one = fold512(one, keys, load512(rest, 0));
            rest = &rest[64..];
        }
        // Four 16-byte lanes, 48, 32, 16 and 0 bytes before the end of the folded part.
        let lanes = [
            _mm512_extracti32x4_epi32::<0>(one),
            _mm512_extracti32x4_epi32::<1>(one),
            _mm512_extracti32x4_epi32::<2>(one),
            _mm512_extracti32x4_epi32::<3>(one),
        ];
        let mut block = fold128(lanes[0], keys128(KEYS_48), lanes[3]);
        block = fold128(lanes[1], keys128(KEYS_32), block);
        block = fold128(lanes[2], keys128(KEYS_16), block);
        while rest.len() >= 16 {
            let next = _mm_loadu_si128(rest.as_ptr().cast());
            block = fold128(block, keys128(KEYS_16), next);
            rest = &rest[16..];
        }
        // The CRC register over the 16-byte block, from zero, then over the tail.
        let mut register = _mm_crc32_u64(0, _mm_cvtsi128_si64(block) as u64);
        register = _mm_crc32_u64(register, _mm_extract_epi64::<1>(block) as u64);
        ::crc32c::crc32c_append(!(register as u32), rest)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bytes(len: usize, seed: u64) -> Vec<u8> {
        let mut state = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
        (0..len)
            .map(|_| {
                state ^= state << 13;
                state ^= state >> 7;
                state ^= state << 17;
                state as u8
            })
            .collect()
    }

    /// The folding path itself, also below [`FOLD_MIN_BYTES`] (down to its 256 bytes).
    fn folded(crc: u32, slice: &[u8]) -> u32 {
        #[cfg(target_arch = "x86_64")]
        if slice.len() >= 256 && x86::available() {
            // SAFETY: the CPU has the features, and the slice is long enough.
            return unsafe { x86::append_folded(crc, slice) };
        }
        crc32c_append(crc, slice)
    }

    #[test]
    fn folding_agrees_with_the_crc32_instruction_for_every_length_and_start() {
        let data = bytes(6000, 1);
        for len in (0..2100).chain([4095, 4096, 4097, 5999]) {
            for (start, crc) in [(0, 0), (1, 0xFFFF_FFFF), (7, 0x1234_5678)] {
                let slice = &data[start..start + len.min(data.len() - start)];
                assert_eq!(
                    folded(crc, slice),
                    ::crc32c::crc32c_append(crc, slice),
                    "length {} from {start}, crc {crc:#x}",
                    slice.len()
                );
            }
        }
    }

    #[test]
    fn folding_agrees_on_large_buffers_and_known_values() {
        let data = bytes(2 << 20, 2);
        assert_eq!(crc32c_append(0, &data), ::crc32c::crc32c(&data));
        let zeros = vec![0u8; 1 << 20];
        assert_eq!(crc32c_append(0, &zeros), ::crc32c::crc32c(&zeros));
        let ones = vec![0xFFu8; 4096];
        assert_eq!(crc32c_append(0, &ones), ::crc32c::crc32c(&ones));
        // Appending in pieces is the same as at once.
        let (a, b) = data.split_at(777_777);
        assert_eq!(
            crc32c_append(crc32c_append(0, a), b),
            ::crc32c::crc32c(&data)
        );
    }
}
