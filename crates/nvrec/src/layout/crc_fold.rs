//! CRC-32C of long buffers by folding with carry-less multiplication (VPCLMULQDQ), on x86-64
//! CPUs that have it: on 512-bit registers where the CPU has AVX-512, else on 256-bit
//! registers, interleaved with the `crc32` instruction, where it has AVX2. Everything else,
//! and every buffer shorter than the path's minimum ([`FOLD512_MIN_BYTES`],
//! [`FOLD256_MIN_BYTES`]), goes through the `crc32` instruction.
//!
//! On aarch64 every buffer goes to the `crc32c` crate, which detects the ARMv8 CRC
//! instructions at run time and runs three independent `crc32cx` chains over long buffers
//! (its table-driven code where the CPU lacks them); no folding is done there.
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
//! multiplies it by x once more.) VPCLMULQDQ does this for every 128-bit lane of a register
//! at once: four lanes of a 512-bit register, two of a 256-bit one. Several registers in
//! flight fold that many times 64 (or 32) bytes per step: four 512-bit ones 256 bytes.
//!
//! The initial value (the inverted CRC so far) is XORed into the first four message bytes,
//! which is the same as starting the register with it.
//!
//! # Interleaving with the `crc32` instruction (the 256-bit path)
//!
//! Without AVX-512 (AMD Zen 3, for one) VPCLMULQDQ on a 256-bit register issues once every
//! two cycles: folding alone takes 8 bytes a cycle, no more than the `crc32` instruction
//! (one 8-byte word a cycle, at three cycles' latency, so three independent chains). The two
//! run on different execution units, so the 256-bit path does both at once. After the
//! accumulators' first load (`x86::YMM_STEP_BYTES`), the message is cut into blocks
//! (`x86::BLOCK_BYTES`): first `x86::CRC_STREAMS` slices of `x86::STREAM_SLICE_BYTES`, each
//! fed to its own `crc32` chain started from zero, then `x86::VECTOR_PART_BYTES` for the
//! 256-bit accumulators; chains and accumulators advance together, one step of each at a
//! time. After the last whole block the accumulators go on alone to the end.
//!
//! A chain's register `r` over its slice is the CRC of the slice alone, which the rest of
//! the message sees exactly as if the slice were zeros and `r` were XORed into the four
//! bytes after it (the rule the initial value follows). So the accumulators fold straight
//! over the slices (a longer fold distance), and `r`, read as a 64-bit word (zero-extended)
//! ending 8 bytes after the slice, moves `d` bytes further like the word H above: one
//! product `r * k_hi(d)`, XORed into the first lane of the block's last folding step.

/// Buffers shorter than this are not worth the set-up of the 512-bit path; the `crc32`
/// instruction takes them.
#[cfg(target_arch = "x86_64")]
pub(super) const FOLD512_MIN_BYTES: usize = 1024;

/// Buffers shorter than this are not worth the set-up of the 256-bit path; the `crc32`
/// instruction takes them. (Measured on Zen 3 through [`crc32c_append`]: the two are level
/// at 160 to 192 bytes; the 256-bit path is a quarter faster at 256, nearly twice as fast
/// at 512.)
#[cfg(target_arch = "x86_64")]
pub(super) const FOLD256_MIN_BYTES: usize = 192;

/// Continues a CRC-32C (initial value and final XOR included, as `crc32c::crc32c_append`).
pub(super) fn crc32c_append(crc: u32, bytes: &[u8]) -> u32 {
    #[cfg(target_arch = "x86_64")]
    match x86::fold_width() {
        x86::FoldWidth::Bits512 if bytes.len() >= FOLD512_MIN_BYTES => {
            // SAFETY: `fold_width` found every feature `append_folded512` uses, and the
            // buffer is longer than it needs.
            return unsafe { x86::append_folded512(crc, bytes) };
        }
        x86::FoldWidth::Bits256 if bytes.len() >= FOLD256_MIN_BYTES => {
            // SAFETY: `fold_width` found every feature `append_folded256` uses, and the
            // buffer is longer than it needs.
            return unsafe { x86::append_folded256(crc, bytes) };
        }
        _ => {}
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

    /// The folding path a CPU takes: the 512-bit one where it has everything for it, else
    /// the 256-bit one where it has everything for that.
    #[derive(Clone, Copy, PartialEq, Eq, Debug)]
    pub(super) enum FoldWidth {
        None = 0,
        Bits256 = 1,
        Bits512 = 2,
    }

    /// This CPU's [`FoldWidth`], found on the first call. (`is_x86_feature_detected!`
    /// caches too, but the handful of look-ups cost a 256-byte buffer a tenth of its time.)
    pub(super) fn fold_width() -> FoldWidth {
        use std::sync::atomic::{AtomicU8, Ordering};
        const NOT_YET: u8 = u8::MAX;
        static FOUND: AtomicU8 = AtomicU8::new(NOT_YET);
        match FOUND.load(Ordering::Relaxed) {
            0 => FoldWidth::None,
            1 => FoldWidth::Bits256,
            2 => FoldWidth::Bits512,
            _ => {
                let width = if has_fold512() {
                    FoldWidth::Bits512
                } else if has_fold256() {
                    FoldWidth::Bits256
                } else {
                    FoldWidth::None
                };
                FOUND.store(width as u8, Ordering::Relaxed);
                width
            }
        }
    }

    /// Whether the CPU has everything [`append_folded512`] uses.
    pub(super) fn has_fold512() -> bool {
        is_x86_feature_detected!("avx512f")
            && is_x86_feature_detected!("vpclmulqdq")
            && is_x86_feature_detected!("pclmulqdq")
            && is_x86_feature_detected!("sse4.2")
    }

    /// Whether the CPU has everything [`append_folded256`] uses.
    pub(super) fn has_fold256() -> bool {
        is_x86_feature_detected!("avx2")
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
    unsafe fn keys256(keys: (u64, u64)) -> __m256i {
        _mm256_broadcastsi128_si256(_mm_set_epi64x(keys.1 as i64, keys.0 as i64))
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

    /// `fold(block) ^ next` for the two lanes of a 256-bit register.
    #[inline(always)]
    unsafe fn fold256(block: __m256i, keys: __m256i, next: __m256i) -> __m256i {
        let low = _mm256_clmulepi64_epi128::<0x00>(block, keys);
        let high = _mm256_clmulepi64_epi128::<0x11>(block, keys);
        _mm256_xor_si256(_mm256_xor_si256(low, next), high)
    }

    #[inline(always)]
    unsafe fn fold128(block: __m128i, keys: __m128i, next: __m128i) -> __m128i {
        let low = _mm_clmulepi64_si128::<0x00>(block, keys);
        let high = _mm_clmulepi64_si128::<0x11>(block, keys);
        _mm_xor_si128(_mm_xor_si128(low, high), next)
    }

    /// The CRC-32C of everything folded into the 16-byte `block`, then of `rest`: the rest's
    /// whole 16-byte blocks folded in, then the `crc32` instruction over the block, from
    /// zero, and over the last bytes.
    #[inline(always)]
    unsafe fn finish(mut block: __m128i, mut rest: &[u8]) -> u32 {
        while rest.len() >= 16 {
            // SAFETY: `rest` holds at least the 16 bytes read.
            let next = unsafe { _mm_loadu_si128(rest.as_ptr().cast()) };
            block = fold128(block, keys128(KEYS_16), next);
            rest = &rest[16..];
        }
        let mut register = _mm_crc32_u64(0, _mm_cvtsi128_si64(block) as u64);
        register = _mm_crc32_u64(register, _mm_extract_epi64::<1>(block) as u64);
        ::crc32c::crc32c_append(!(register as u32), rest)
    }

    /// # Safety
    /// The CPU must have AVX-512F, VPCLMULQDQ, PCLMULQDQ and SSE4.2, and `bytes` must be at
    /// least 256 bytes long.
    #[target_feature(enable = "avx512f,vpclmulqdq,pclmulqdq,sse4.2")]
    pub(super) unsafe fn append_folded512(crc: u32, bytes: &[u8]) -> u32 {
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
        finish(block, rest)
    }

    /// 256-bit accumulators in flight. Three keep the clmul unit busy (a fold's latency is
    /// about six cycles, its two products take four); measured on Zen 3, interleaved as
    /// below: three 36 GiB/s, two 35, four 34 to 35.
    const YMM_ACCUMULATORS: usize = 3;
    /// What the accumulators take in one step.
    pub(super) const YMM_STEP_BYTES: usize = 32 * YMM_ACCUMULATORS;
    /// Independent `crc32` chains: the instruction's latency (3 cycles) times its
    /// throughput (1 a cycle).
    const CRC_STREAMS: usize = 3;
    /// What each chain takes in one step: four words, so that the three chains' twelve
    /// `crc32`s take as many cycles as the accumulators' six products.
    const STREAM_STEP_BYTES: usize = 32;
    /// Steps in a block. Longer blocks gain little (36.5 GiB/s at 32 steps, measured on
    /// Zen 3) and leave more of a 4 KiB structure to the accumulators alone.
    const BLOCK_STEPS: usize = 8;
    /// The slice of a block that each `crc32` chain takes.
    const STREAM_SLICE_BYTES: usize = STREAM_STEP_BYTES * BLOCK_STEPS;
    /// The part of a block that the accumulators take, after the slices.
    const VECTOR_PART_BYTES: usize = YMM_STEP_BYTES * BLOCK_STEPS;
    /// A block of the interleaved loop.
    const BLOCK_BYTES: usize = CRC_STREAMS * STREAM_SLICE_BYTES + VECTOR_PART_BYTES;

    /// One accumulator step further.
    const KEYS_YMM_STEP: (u64, u64) = fold_keys(YMM_STEP_BYTES as u32);
    /// From the last step of a block's vector part (or the first load) to the first step
    /// of the next one, over the `crc32` slices.
    const KEYS_OVER_SLICES: (u64, u64) =
        fold_keys((YMM_STEP_BYTES + CRC_STREAMS * STREAM_SLICE_BYTES) as u32);
    /// For each chain: its register, as a word ending 8 bytes after its slice, moved to the
    /// first lane of the block's last vector step (the high-word multiplier of that move).
    const KEYS_STREAM_TO_LAST_STEP: [u64; CRC_STREAMS] = {
        let mut keys = [0; CRC_STREAMS];
        let mut stream = 0;
        while stream < CRC_STREAMS {
            let word_end = (stream + 1) * STREAM_SLICE_BYTES + 8;
            let lane_end =
                CRC_STREAMS * STREAM_SLICE_BYTES + (BLOCK_STEPS - 1) * YMM_STEP_BYTES + 16;
            keys[stream] = fold_keys((lane_end - word_end) as u32).1;
            stream += 1;
        }
        keys
    };

    /// # Safety
    /// The CPU must have AVX2, VPCLMULQDQ, PCLMULQDQ and SSE4.2, and `bytes` must be at
    /// least [`YMM_STEP_BYTES`] long.
    #[target_feature(enable = "avx2,vpclmulqdq,pclmulqdq,sse4.2")]
    pub(super) unsafe fn append_folded256(crc: u32, bytes: &[u8]) -> u32 {
        debug_assert!(bytes.len() >= YMM_STEP_BYTES);
        let load256 = |at: &[u8], lane: usize| -> __m256i {
            assert!(at.len() >= 32 * (lane + 1));
            // SAFETY: `at` holds the 32 bytes read (checked above; the check folds away
            // where callers index with constants).
            unsafe { _mm256_loadu_si256(at.as_ptr().add(32 * lane).cast()) }
        };
        let initial = _mm256_zextsi128_si256(_mm_cvtsi32_si128(!crc as i32));
        let mut acc: [__m256i; YMM_ACCUMULATORS] = std::array::from_fn(|lane| load256(bytes, lane));
        acc[0] = _mm256_xor_si256(acc[0], initial);
        let mut rest = &bytes[YMM_STEP_BYTES..];

        let step_keys = keys256(KEYS_YMM_STEP);
        let over_slices_keys = keys256(KEYS_OVER_SLICES);
        // Whole blocks, `crc32` chains and accumulators interleaved step by step.
        let mut blocks = rest.chunks_exact(BLOCK_BYTES);
        for block in &mut blocks {
            let (slices, vector_part) = block.split_at(CRC_STREAMS * STREAM_SLICE_BYTES);
            let mut registers = [0u32; CRC_STREAMS];
            for step in 0..BLOCK_STEPS {
                for (stream, register) in registers.iter_mut().enumerate() {
                    let at = stream * STREAM_SLICE_BYTES + step * STREAM_STEP_BYTES;
                    for word in slices[at..at + STREAM_STEP_BYTES].chunks_exact(8) {
                        let word = u64::from_le_bytes(word.try_into().unwrap());
                        *register = _mm_crc32_u64(u64::from(*register), word) as u32;
                    }
                }
                let keys = if step == 0 {
                    over_slices_keys
                } else {
                    step_keys
                };
                let next = &vector_part[step * YMM_STEP_BYTES..];
                for (lane, value) in acc.iter_mut().enumerate() {
                    *value = fold256(*value, keys, load256(next, lane));
                }
            }
            let mut streams = _mm_setzero_si128();
            for (register, key) in registers.iter().zip(KEYS_STREAM_TO_LAST_STEP) {
                let moved = _mm_clmulepi64_si128::<0x00>(
                    _mm_cvtsi32_si128(*register as i32),
                    _mm_cvtsi64_si128(key as i64),
                );
                streams = _mm_xor_si128(streams, moved);
            }
            acc[0] = _mm256_xor_si256(acc[0], _mm256_zextsi128_si256(streams));
        }
        rest = blocks.remainder();

        // The rest, accumulators alone.
        while rest.len() >= YMM_STEP_BYTES {
            for (lane, value) in acc.iter_mut().enumerate() {
                *value = fold256(*value, step_keys, load256(rest, lane));
            }
            rest = &rest[YMM_STEP_BYTES..];
        }
        let keys = keys256(KEYS_32);
        let mut one = acc[0];
        for value in &acc[1..] {
            one = fold256(one, keys, *value);
        }
        while rest.len() >= 32 {
            one = fold256(one, keys, load256(rest, 0));
            rest = &rest[32..];
        }
        // Two 16-byte lanes, 16 and 0 bytes before the end of the folded part.
        let lanes = [
            _mm256_extracti128_si256::<0>(one),
            _mm256_extracti128_si256::<1>(one),
        ];
        let block = fold128(lanes[0], keys128(KEYS_16), lanes[1]);
        finish(block, rest)
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

    /// A folding path: its name, the shortest buffer it takes, and the path itself.
    type FoldingPath = (&'static str, usize, fn(u32, &[u8]) -> u32);

    /// Every folding path this CPU has, each also below its minimum in
    /// [`crc32c_append`] (down to the shortest buffer it takes).
    fn folding_paths() -> Vec<FoldingPath> {
        #[cfg_attr(not(target_arch = "x86_64"), allow(unused_mut))]
        let mut paths: Vec<FoldingPath> = Vec::new();
        #[cfg(target_arch = "x86_64")]
        {
            if x86::has_fold512() {
                paths.push(("512-bit", 256, |crc, slice| {
                    assert!(slice.len() >= 256);
                    // SAFETY: the CPU has the features, and the slice is long enough.
                    unsafe { x86::append_folded512(crc, slice) }
                }));
            }
            if x86::has_fold256() {
                paths.push(("256-bit", x86::YMM_STEP_BYTES, |crc, slice| {
                    assert!(slice.len() >= x86::YMM_STEP_BYTES);
                    // SAFETY: the CPU has the features, and the slice is long enough.
                    unsafe { x86::append_folded256(crc, slice) }
                }));
            }
        }
        paths
    }

    #[test]
    fn folding_agrees_with_the_crc32_instruction_for_every_length_and_start() {
        let data = bytes(6000, 1);
        let paths = folding_paths();
        for len in (0..2100).chain([3167, 3168, 3169, 4092, 4095, 4096, 4097, 5999]) {
            for (start, crc) in [(0, 0), (1, 0xFFFF_FFFF), (7, 0x1234_5678)] {
                let slice = &data[start..start + len.min(data.len() - start)];
                let expected = ::crc32c::crc32c_append(crc, slice);
                let length = slice.len();
                assert_eq!(
                    crc32c_append(crc, slice),
                    expected,
                    "dispatch, length {length} from {start}, crc {crc:#x}"
                );
                for (name, min_bytes, path) in &paths {
                    if length >= *min_bytes {
                        assert_eq!(
                            path(crc, slice),
                            expected,
                            "{name}, length {length} from {start}, crc {crc:#x}"
                        );
                    }
                }
            }
        }
    }

    #[test]
    fn folding_agrees_on_large_buffers_and_known_values() {
        let data = bytes(2 << 20, 2);
        let zeros = vec![0u8; 1 << 20];
        let ones = vec![0xFFu8; 4096];
        let (a, b) = data.split_at(777_777);
        let dispatch: FoldingPath = ("dispatch", 0, crc32c_append);
        for (name, _, path) in folding_paths().into_iter().chain([dispatch]) {
            assert_eq!(path(0, &data), ::crc32c::crc32c(&data), "{name}");
            assert_eq!(path(0, &zeros), ::crc32c::crc32c(&zeros), "{name}");
            assert_eq!(path(0, &ones), ::crc32c::crc32c(&ones), "{name}");
            // Appending in pieces is the same as at once.
            assert_eq!(path(path(0, a), b), ::crc32c::crc32c(&data), "{name}");
        }
        assert_eq!(crc32c_append(0, b"123456789"), 0xE306_9283);
    }

    #[cfg(target_arch = "x86_64")]
    #[test]
    fn the_dispatch_takes_the_widest_path_the_cpu_has() {
        let expected = if x86::has_fold512() {
            x86::FoldWidth::Bits512
        } else if x86::has_fold256() {
            x86::FoldWidth::Bits256
        } else {
            x86::FoldWidth::None
        };
        // Found once (by whichever call came first), then read back.
        assert_eq!(x86::fold_width(), expected);
        assert_eq!(x86::fold_width(), expected);
    }
}
