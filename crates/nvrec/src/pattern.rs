//! The test pattern: seekable, incompressible, and fast enough to outrun any drive.
//!
//! The streamer this project replaces uses an LFSR, which must be stepped from the start of a
//! stream. nvrec instead computes every 4-byte word from the seed and the word's absolute
//! position on the target. For word `j` (bytes `4j..4j+4`, little-endian):
//!
//! ```text
//! key      = mix64(seed ^ SEED_SALT)              (64 bits, bijective: every seed bit
//!                                                  reaches both halves)
//! lane_key = (j even ? low half : high half of key) ^ mix(j >> 32 ^ BLOCK_SALT)
//! word     = mix(lane_key + (j mod 2^32 + 1) * GOLDEN)          (all mod 2^32)
//! ```
//!
//! where `mix` is a bijective 32-bit finalizer (xor-shift, multiply, xor-shift, multiply,
//! xor-shift). Consequences:
//! - any chunk can be produced or checked from the seed and its offset alone (seekable);
//! - the same bytes at another address, or an old write with another seed, do not check;
//! - because `mix` is invertible, two words that fail the check reveal which seed wrote them,
//!   so the checker tells "written with seed 7" apart from corruption (streamer TEST #02/#05);
//! - 32-bit lanes vectorize with AVX2 (eight words per multiply) and NEON on aarch64 (four),
//!   which is how generation and checking run at many GiB/s on one core; the same code runs
//!   unvectorized elsewhere.
//!
//! Offsets passed here must be multiples of 8 (every chunk address is). This module is pure:
//! no I/O and, on the fast path, no allocation.

/// Added per word: the 32-bit golden ratio, odd, so `(i + 1) * GOLDEN` walks all 2^32 values.
const GOLDEN: u32 = 0x9E37_79B9;
/// Keeps seed 0 from giving key 0.
const SEED_SALT: u64 = 0x6A09_E667_F3BC_C909;
const KEY_MUL_1: u64 = 0xBF58_476D_1CE4_E5B9;
const KEY_MUL_2: u64 = 0x94D0_49BB_1331_11EB;
/// Separates the 16 GiB blocks of the address space (word index bits 32 and up).
const BLOCK_SALT: u32 = 0xBB67_AE85;
const MUL_1: u32 = 0x7FEB_352D;
const MUL_2: u32 = 0x846C_A68B;
const MUL_1_INVERSE: u32 = inverse_mod_2_32(MUL_1);
const MUL_2_INVERSE: u32 = inverse_mod_2_32(MUL_2);
/// Words per step of the vectorized kernels (64 bytes: two AVX2 registers).
const LANES: usize = 16;
/// Bytes of one step.
const STEP_BYTES: usize = LANES * 4;
/// Words of the pattern that must follow a recovered seed before the checker believes it.
const SEED_CONFIRM_WORDS: usize = 6;

/// The multiplicative inverse of an odd number modulo 2^32 (Newton's iteration).
const fn inverse_mod_2_32(odd: u32) -> u32 {
    let mut inverse = odd; // Correct to 3 bits for any odd number.
    let mut step = 0;
    while step < 4 {
        inverse = inverse.wrapping_mul(2u32.wrapping_sub(odd.wrapping_mul(inverse)));
        step += 1;
    }
    inverse
}

#[inline(always)]
fn mix(mut x: u32) -> u32 {
    x ^= x >> 16;
    x = x.wrapping_mul(MUL_1);
    x ^= x >> 15;
    x = x.wrapping_mul(MUL_2);
    x ^= x >> 16;
    x
}

/// A bijective 64-bit mixer for turning a seed into a key (not on the hot path).
fn mix64(mut x: u64) -> u64 {
    x ^= x >> 30;
    x = x.wrapping_mul(KEY_MUL_1);
    x ^= x >> 27;
    x = x.wrapping_mul(KEY_MUL_2);
    x ^ (x >> 31)
}

fn unmix64(mut x: u64) -> u64 {
    let unshift = |y: u64, shift: u32| {
        let mut x = y;
        let mut applied = shift;
        while applied < 64 {
            x = y ^ (x >> shift);
            applied += shift;
        }
        x
    };
    x = unshift(x, 31);
    x = x.wrapping_mul(inverse_mod_2_64(KEY_MUL_2));
    x = unshift(x, 27);
    x = x.wrapping_mul(inverse_mod_2_64(KEY_MUL_1));
    unshift(x, 30)
}

const fn inverse_mod_2_64(odd: u64) -> u64 {
    let mut inverse = odd;
    let mut step = 0;
    while step < 5 {
        inverse = inverse.wrapping_mul(2u64.wrapping_sub(odd.wrapping_mul(inverse)));
        step += 1;
    }
    inverse
}

/// Inverts `x ^= x >> shift` for `shift` > 0.
fn unshift_xor(y: u32, shift: u32) -> u32 {
    let mut x = y;
    let mut applied = shift;
    while applied < 32 {
        x = y ^ (x >> shift);
        applied += shift;
    }
    x
}

fn unmix(mut x: u32) -> u32 {
    x = unshift_xor(x, 16);
    x = x.wrapping_mul(MUL_2_INVERSE);
    x = unshift_xor(x, 15);
    x = x.wrapping_mul(MUL_1_INVERSE);
    unshift_xor(x, 16)
}

/// The per-lane constants of one 16 GiB block: `lane_key[i] + i * GOLDEN`, so that a step is
/// one broadcast add away from the words' pre-mix values.
#[derive(Clone, Copy)]
struct BlockKeys {
    lane_base: [u32; LANES],
}

impl BlockKeys {
    fn new(key: u64, block: u32) -> BlockKeys {
        let block_key = mix(block ^ BLOCK_SALT);
        let halves = [key as u32 ^ block_key, (key >> 32) as u32 ^ block_key];
        let mut lane_base = [0u32; LANES];
        for (lane, base) in lane_base.iter_mut().enumerate() {
            *base = halves[lane & 1].wrapping_add((lane as u32).wrapping_mul(GOLDEN));
        }
        BlockKeys { lane_base }
    }
}

/// Fills whole steps; `first_low` is the even, in-block index of the first word.
/// Lanes are indexed explicitly: that is the shape the vectorizer turns into AVX2.
#[inline(always)]
#[allow(clippy::needless_range_loop)]
fn fill_steps(keys: &BlockKeys, first_low: u32, out: &mut [u8]) {
    let mut shift = first_low.wrapping_add(1).wrapping_mul(GOLDEN);
    let advance = (LANES as u32).wrapping_mul(GOLDEN);
    for step in out.chunks_exact_mut(STEP_BYTES) {
        let mut words = [0u32; LANES];
        for lane in 0..LANES {
            words[lane] = mix(keys.lane_base[lane].wrapping_add(shift));
        }
        for lane in 0..LANES {
            step[lane * 4..lane * 4 + 4].copy_from_slice(&words[lane].to_le_bytes());
        }
        shift = shift.wrapping_add(advance);
    }
}

/// Steps compared before looking at the accumulated difference (a branch per 512 bytes).
const CHECK_GROUP_STEPS: usize = 8;

/// Compares whole steps; returns the index of a step at or before the first difference
/// (the start of the group that holds it).
#[inline(always)]
#[allow(clippy::needless_range_loop)]
fn check_steps(keys: &BlockKeys, first_low: u32, data: &[u8]) -> Option<usize> {
    let mut shift = first_low.wrapping_add(1).wrapping_mul(GOLDEN);
    let advance = (LANES as u32).wrapping_mul(GOLDEN);
    for (group_index, group) in data.chunks(STEP_BYTES * CHECK_GROUP_STEPS).enumerate() {
        let mut difference = [0u32; LANES];
        for step in group.chunks_exact(STEP_BYTES) {
            let Ok(step) = <&[u8; STEP_BYTES]>::try_from(step) else {
                unreachable!()
            };
            let mut found = [0u32; LANES];
            for lane in 0..LANES {
                found[lane] = u32::from_le_bytes([
                    step[lane * 4],
                    step[lane * 4 + 1],
                    step[lane * 4 + 2],
                    step[lane * 4 + 3],
                ]);
            }
            for lane in 0..LANES {
                difference[lane] |= found[lane] ^ mix(keys.lane_base[lane].wrapping_add(shift));
            }
            shift = shift.wrapping_add(advance);
        }
        if difference.iter().any(|&d| d != 0) {
            return Some(group_index * CHECK_GROUP_STEPS);
        }
    }
    None
}

/// The kernels on AVX2 registers, written with intrinsics: the 16 lanes of a step are two
/// registers of eight words, and each register's pre-mix values advance by one broadcast add
/// per step. (Left to the vectorizer, the checker came out gathering words across steps with
/// scalar inserts, at half the speed.) They compute exactly what the portable kernels compute,
/// which a test checks.
#[cfg(target_arch = "x86_64")]
mod avx2 {
    use super::{BlockKeys, CHECK_GROUP_STEPS, GOLDEN, LANES, MUL_1, MUL_2, STEP_BYTES};
    use std::arch::x86_64::*;

    /// Bytes of one AVX2 register: eight words.
    const REGISTER_BYTES: usize = 32;

    /// `mix` on eight words at once.
    #[inline(always)]
    unsafe fn mix8(mut x: __m256i) -> __m256i {
        x = _mm256_xor_si256(x, _mm256_srli_epi32::<16>(x));
        x = _mm256_mullo_epi32(x, _mm256_set1_epi32(MUL_1 as i32));
        x = _mm256_xor_si256(x, _mm256_srli_epi32::<15>(x));
        x = _mm256_mullo_epi32(x, _mm256_set1_epi32(MUL_2 as i32));
        _mm256_xor_si256(x, _mm256_srli_epi32::<16>(x))
    }

    /// The pre-mix values of the first step's two registers, and the per-step advance.
    #[inline(always)]
    unsafe fn first_step(keys: &BlockKeys, first_low: u32) -> (__m256i, __m256i, __m256i) {
        let shift = _mm256_set1_epi32(first_low.wrapping_add(1).wrapping_mul(GOLDEN) as i32);
        // SAFETY: `lane_base` holds 16 words: two unaligned 32-byte loads stay inside it.
        let (low, high) = unsafe {
            let base = keys.lane_base.as_ptr().cast::<__m256i>();
            (_mm256_loadu_si256(base), _mm256_loadu_si256(base.add(1)))
        };
        let advance = _mm256_set1_epi32((LANES as u32).wrapping_mul(GOLDEN) as i32);
        (
            _mm256_add_epi32(low, shift),
            _mm256_add_epi32(high, shift),
            advance,
        )
    }

    /// # Safety
    /// The CPU must support AVX2 (checked by the caller).
    #[target_feature(enable = "avx2")]
    pub unsafe fn fill_steps(keys: &BlockKeys, first_low: u32, out: &mut [u8]) {
        let (mut low, mut high, advance) = first_step(keys, first_low);
        for step in out.chunks_exact_mut(STEP_BYTES) {
            let at = step.as_mut_ptr();
            // SAFETY: a step is 64 bytes, two unaligned 32-byte stores.
            unsafe {
                _mm256_storeu_si256(at.cast(), mix8(low));
                _mm256_storeu_si256(at.add(REGISTER_BYTES).cast(), mix8(high));
            }
            low = _mm256_add_epi32(low, advance);
            high = _mm256_add_epi32(high, advance);
        }
    }

    /// As [`fill_steps`], with streaming (non-temporal) stores that go to memory without
    /// first reading each line into the cache: for buffers a device reads next. On the
    /// virtio disk here it cut the user CPU of a pattern recording by 40-50 % (the lines of
    /// a buffer the host has just read by DMA are not in this core's cache, and a normal
    /// store reads each one before writing it).
    ///
    /// # Safety
    /// The CPU must support AVX2 (checked by the caller), and `out` must start on a 32-byte
    /// boundary (the streaming store's alignment).
    #[target_feature(enable = "avx2")]
    pub unsafe fn fill_steps_streaming(keys: &BlockKeys, first_low: u32, out: &mut [u8]) {
        debug_assert!((out.as_ptr() as usize).is_multiple_of(REGISTER_BYTES));
        let (mut low, mut high, advance) = first_step(keys, first_low);
        for step in out.chunks_exact_mut(STEP_BYTES) {
            let at = step.as_mut_ptr();
            // SAFETY: a step is 64 bytes, two aligned 32-byte stores (`out` is aligned and
            // steps are whole multiples of 32 bytes from its start).
            unsafe {
                _mm256_stream_si256(at.cast(), mix8(low));
                _mm256_stream_si256(at.add(REGISTER_BYTES).cast(), mix8(high));
            }
            low = _mm256_add_epi32(low, advance);
            high = _mm256_add_epi32(high, advance);
        }
        // Streaming stores are weakly ordered: fence them before the buffer is handed on.
        _mm_sfence();
    }

    /// # Safety
    /// The CPU must support AVX2 (checked by the caller).
    #[target_feature(enable = "avx2")]
    pub unsafe fn check_steps(keys: &BlockKeys, first_low: u32, data: &[u8]) -> Option<usize> {
        let (mut low, mut high, advance) = first_step(keys, first_low);
        for (group_index, group) in data.chunks(STEP_BYTES * CHECK_GROUP_STEPS).enumerate() {
            // Two accumulators, one per register of a step, so the ORs do not chain.
            let mut difference_low = _mm256_setzero_si256();
            let mut difference_high = _mm256_setzero_si256();
            for step in group.chunks_exact(STEP_BYTES) {
                let at = step.as_ptr();
                // SAFETY: a step is 64 bytes, two unaligned 32-byte loads.
                let (found_low, found_high) = unsafe {
                    (
                        _mm256_loadu_si256(at.cast()),
                        _mm256_loadu_si256(at.add(REGISTER_BYTES).cast()),
                    )
                };
                difference_low =
                    _mm256_or_si256(difference_low, _mm256_xor_si256(found_low, mix8(low)));
                difference_high =
                    _mm256_or_si256(difference_high, _mm256_xor_si256(found_high, mix8(high)));
                low = _mm256_add_epi32(low, advance);
                high = _mm256_add_epi32(high, advance);
            }
            let difference = _mm256_or_si256(difference_low, difference_high);
            if _mm256_testz_si256(difference, difference) == 0 {
                return Some(group_index * CHECK_GROUP_STEPS);
            }
        }
        None
    }
}

/// The kernels on NEON registers (aarch64), written with intrinsics as the AVX2 ones are: the
/// 16 lanes of a step are four registers of four words, and each register's pre-mix values
/// advance by one broadcast add per step. Loads and stores go through byte vectors, which
/// take any alignment; on a little-endian CPU a byte vector read as four words holds the
/// little-endian words the pattern specifies. They compute exactly what the portable kernels
/// compute, which a test checks (under qemu-aarch64 where no aarch64 CPU is at hand).
#[cfg(all(target_arch = "aarch64", target_endian = "little"))]
mod neon {
    use super::{BlockKeys, CHECK_GROUP_STEPS, GOLDEN, LANES, MUL_1, MUL_2, STEP_BYTES};
    use std::arch::aarch64::*;

    /// Bytes of one NEON register: four words.
    const REGISTER_BYTES: usize = 16;
    /// Registers of one step.
    const REGISTERS: usize = STEP_BYTES / REGISTER_BYTES;

    /// `mix` on four words at once.
    #[inline(always)]
    unsafe fn mix4(mut x: uint32x4_t) -> uint32x4_t {
        x = veorq_u32(x, vshrq_n_u32::<16>(x));
        x = vmulq_n_u32(x, MUL_1);
        x = veorq_u32(x, vshrq_n_u32::<15>(x));
        x = vmulq_n_u32(x, MUL_2);
        veorq_u32(x, vshrq_n_u32::<16>(x))
    }

    /// The pre-mix values of the first step's four registers, and the per-step advance.
    #[inline(always)]
    unsafe fn first_step(
        keys: &BlockKeys,
        first_low: u32,
    ) -> ([uint32x4_t; REGISTERS], uint32x4_t) {
        let shift = vdupq_n_u32(first_low.wrapping_add(1).wrapping_mul(GOLDEN));
        let base = keys.lane_base.as_ptr();
        // SAFETY: `lane_base` holds 16 words: four loads of four words stay inside it, and a
        // u32 pointer into it is aligned for them.
        let registers = unsafe {
            [
                vaddq_u32(vld1q_u32(base), shift),
                vaddq_u32(vld1q_u32(base.add(4)), shift),
                vaddq_u32(vld1q_u32(base.add(8)), shift),
                vaddq_u32(vld1q_u32(base.add(12)), shift),
            ]
        };
        (registers, vdupq_n_u32((LANES as u32).wrapping_mul(GOLDEN)))
    }

    /// # Safety
    /// The CPU must support NEON (checked by the caller; every aarch64 Linux CPU has it).
    #[target_feature(enable = "neon")]
    pub unsafe fn fill_steps(keys: &BlockKeys, first_low: u32, out: &mut [u8]) {
        let (mut registers, advance) = first_step(keys, first_low);
        for step in out.chunks_exact_mut(STEP_BYTES) {
            let at = step.as_mut_ptr();
            for (index, register) in registers.iter_mut().enumerate() {
                // SAFETY: a step is 64 bytes: four 16-byte stores at 0, 16, 32 and 48, of
                // byte vectors (no alignment needed).
                unsafe {
                    vst1q_u8(
                        at.add(index * REGISTER_BYTES),
                        vreinterpretq_u8_u32(mix4(*register)),
                    )
                };
                *register = vaddq_u32(*register, advance);
            }
        }
    }

    /// # Safety
    /// The CPU must support NEON (checked by the caller; every aarch64 Linux CPU has it).
    #[target_feature(enable = "neon")]
    pub unsafe fn check_steps(keys: &BlockKeys, first_low: u32, data: &[u8]) -> Option<usize> {
        let (mut registers, advance) = first_step(keys, first_low);
        for (group_index, group) in data.chunks(STEP_BYTES * CHECK_GROUP_STEPS).enumerate() {
            // One accumulator per register of a step, so the ORs do not chain.
            let mut differences = [vdupq_n_u32(0); REGISTERS];
            for step in group.chunks_exact(STEP_BYTES) {
                let at = step.as_ptr();
                for index in 0..REGISTERS {
                    // SAFETY: a step is 64 bytes: four 16-byte loads at 0, 16, 32 and 48, of
                    // byte vectors (no alignment needed).
                    let found =
                        vreinterpretq_u32_u8(unsafe { vld1q_u8(at.add(index * REGISTER_BYTES)) });
                    differences[index] =
                        vorrq_u32(differences[index], veorq_u32(found, mix4(registers[index])));
                    registers[index] = vaddq_u32(registers[index], advance);
                }
            }
            let difference = vorrq_u32(
                vorrq_u32(differences[0], differences[1]),
                vorrq_u32(differences[2], differences[3]),
            );
            if vmaxvq_u32(difference) != 0 {
                return Some(group_index * CHECK_GROUP_STEPS);
            }
        }
        None
    }
}

fn fill_steps_fast(keys: &BlockKeys, first_low: u32, out: &mut [u8]) {
    #[cfg(target_arch = "x86_64")]
    if std::arch::is_x86_feature_detected!("avx2") {
        // SAFETY: AVX2 support was just detected.
        return unsafe { avx2::fill_steps(keys, first_low, out) };
    }
    #[cfg(all(target_arch = "aarch64", target_endian = "little"))]
    if std::arch::is_aarch64_feature_detected!("neon") {
        // SAFETY: NEON support was just detected.
        return unsafe { neon::fill_steps(keys, first_low, out) };
    }
    fill_steps(keys, first_low, out)
}

/// The fill for a buffer a device reads next: streaming stores where the CPU and the
/// buffer's alignment allow them, else [`fill_steps_fast`].
fn fill_steps_for_device(keys: &BlockKeys, first_low: u32, out: &mut [u8]) {
    #[cfg(target_arch = "x86_64")]
    if std::arch::is_x86_feature_detected!("avx2") && (out.as_ptr() as usize).is_multiple_of(32) {
        // SAFETY: AVX2 support was just detected and `out` is 32-byte aligned.
        return unsafe { avx2::fill_steps_streaming(keys, first_low, out) };
    }
    fill_steps_fast(keys, first_low, out)
}

fn check_steps_fast(keys: &BlockKeys, first_low: u32, data: &[u8]) -> Option<usize> {
    #[cfg(target_arch = "x86_64")]
    if std::arch::is_x86_feature_detected!("avx2") {
        // SAFETY: AVX2 support was just detected.
        return unsafe { avx2::check_steps(keys, first_low, data) };
    }
    #[cfg(all(target_arch = "aarch64", target_endian = "little"))]
    if std::arch::is_aarch64_feature_detected!("neon") {
        // SAFETY: NEON support was just detected.
        return unsafe { neon::check_steps(keys, first_low, data) };
    }
    check_steps(keys, first_low, data)
}

/// The pattern of one seed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Pattern {
    seed: u64,
    key: u64,
}

/// How a checked buffer differs from the pattern.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum MismatchKind {
    /// The data is this pattern, but written with another seed (old data, wrong session).
    WrongSeed { found_seed: u64 },
    /// The pattern stops at a chunk boundary and what follows is not pattern at all: the data
    /// written was shorter than the length being checked.
    EndsEarly,
    /// Anything else: the bytes were damaged.
    Corrupt,
    /// The range cannot hold the pattern: its offset is not a multiple of 8 (the pattern is
    /// made in pairs of words), so whatever it holds, it was not written there. A damaged
    /// or forged stream offset reads as this, never as a crash.
    Unaligned,
    /// The range would end past 2^64 bytes: no pattern was ever written there.
    BeyondEnd,
}

/// The first byte that differs, with what was expected there.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub struct Mismatch {
    /// Absolute byte offset on the target of the first differing byte.
    pub offset_bytes: u64,
    pub expected_byte: u8,
    pub found_byte: u8,
    #[serde(flatten)]
    pub kind: MismatchKind,
}

impl std::fmt::Display for Mismatch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.kind {
            MismatchKind::WrongSeed { found_seed } => write!(
                f,
                "pattern error at byte {:#x}: data was written with seed {found_seed:#x}",
                self.offset_bytes
            ),
            MismatchKind::EndsEarly => write!(
                f,
                "length error: the pattern ends at byte {:#x}, before the end of the checked range",
                self.offset_bytes
            ),
            MismatchKind::Corrupt => write!(
                f,
                "data error at byte {:#x}: expected {:#04x}, found {:#04x}",
                self.offset_bytes, self.expected_byte, self.found_byte
            ),
            MismatchKind::Unaligned => write!(
                f,
                "pattern error at byte {:#x}: not a multiple of 8, where no pattern starts",
                self.offset_bytes
            ),
            MismatchKind::BeyondEnd => write!(
                f,
                "pattern error at byte {:#x}: the range ends past 2^64 bytes",
                self.offset_bytes
            ),
        }
    }
}

impl Pattern {
    pub fn new(seed: u64) -> Pattern {
        Pattern {
            seed,
            key: mix64(seed ^ SEED_SALT),
        }
    }

    pub fn seed(&self) -> u64 {
        self.seed
    }

    /// The 4-byte word that belongs at word index `word_index` (byte offset `4 * word_index`).
    pub fn word(&self, word_index: u64) -> u32 {
        let block_key = mix((word_index >> 32) as u32 ^ BLOCK_SALT);
        let half = if word_index & 1 == 0 {
            self.key as u32
        } else {
            (self.key >> 32) as u32
        };
        mix((half ^ block_key)
            .wrapping_add((word_index as u32).wrapping_add(1).wrapping_mul(GOLDEN)))
    }

    /// Which seed, if any, would have put `even_word` at the even index `word_index` and
    /// `odd_word` right after it.
    pub fn seed_of_words(even_word: u32, odd_word: u32, word_index: u64) -> u64 {
        debug_assert!(word_index.is_multiple_of(2));
        let block_key = mix((word_index >> 32) as u32 ^ BLOCK_SALT);
        let low = (word_index as u32).wrapping_add(1).wrapping_mul(GOLDEN);
        let high = (word_index as u32).wrapping_add(2).wrapping_mul(GOLDEN);
        let key_low = unmix(even_word).wrapping_sub(low) ^ block_key;
        let key_high = unmix(odd_word).wrapping_sub(high) ^ block_key;
        unmix64(((key_high as u64) << 32) | key_low as u64) ^ SEED_SALT
    }

    /// Splits `[offset, offset + len)` at 16 GiB block boundaries: (block, first low index,
    /// byte range within the buffer).
    fn for_each_block(
        offset_bytes: u64,
        len: usize,
        mut each: impl FnMut(u32, u32, std::ops::Range<usize>),
    ) {
        let mut done = 0usize;
        while done < len {
            let word_index = (offset_bytes + done as u64) / 4;
            let block = (word_index >> 32) as u32;
            let low = word_index as u32;
            let block_left_bytes = ((1u64 << 32) - low as u64) * 4;
            let count = ((len - done) as u64).min(block_left_bytes) as usize;
            each(block, low, done..done + count);
            done += count;
        }
    }

    /// Fills `buf` with the pattern bytes that belong at absolute `offset_bytes`.
    pub fn fill(&self, offset_bytes: u64, buf: &mut [u8]) {
        self.fill_with(offset_bytes, buf, fill_steps_fast);
    }

    /// As [`Pattern::fill`], for a buffer that a device reads next (an I/O buffer of
    /// `record` or `write`): the bytes are the same, written with streaming stores where
    /// the CPU allows, so that filling does not first read every line into the cache.
    pub fn fill_for_device(&self, offset_bytes: u64, buf: &mut [u8]) {
        self.fill_with(offset_bytes, buf, fill_steps_for_device);
    }

    fn fill_with(&self, offset_bytes: u64, buf: &mut [u8], kernel: fn(&BlockKeys, u32, &mut [u8])) {
        assert!(
            offset_bytes.is_multiple_of(8),
            "pattern offsets are multiples of 8"
        );
        let len = buf.len();
        Self::for_each_block(offset_bytes, len, |block, low, range| {
            let keys = BlockKeys::new(self.key, block);
            let part = &mut buf[range.clone()];
            let whole = part.len() / STEP_BYTES * STEP_BYTES;
            kernel(&keys, low, &mut part[..whole]);
            // The tail: word by word, the last one possibly cut short.
            let first_tail_word = (offset_bytes + (range.start + whole) as u64) / 4;
            for (word_index, tail) in (first_tail_word..).zip(part[whole..].chunks_mut(4)) {
                let bytes = self.word(word_index).to_le_bytes();
                tail.copy_from_slice(&bytes[..tail.len()]);
            }
        });
    }

    /// Checks `buf` against the pattern at absolute `offset_bytes`. `chunk_size_bytes` is
    /// used only to classify a mismatch (a pattern that ends on a chunk boundary).
    pub fn check(
        &self,
        offset_bytes: u64,
        buf: &[u8],
        chunk_size_bytes: u64,
    ) -> Result<(), Mismatch> {
        Self::placeable(offset_bytes, buf)?;
        let mut first_bad_byte: Option<usize> = None;
        Self::for_each_block(offset_bytes, buf.len(), |block, low, range| {
            if first_bad_byte.is_some() {
                return;
            }
            let keys = BlockKeys::new(self.key, block);
            let part = &buf[range.clone()];
            let whole = part.len() / STEP_BYTES * STEP_BYTES;
            if let Some(step) = check_steps_fast(&keys, low, &part[..whole]) {
                // The difference lies in the group that starts here; locate finds the byte.
                first_bad_byte = Some(range.start + step * STEP_BYTES);
                return;
            }
            let mut expected = [0u8; STEP_BYTES];
            let tail = &part[whole..];
            self.fill(
                offset_bytes + (range.start + whole) as u64,
                &mut expected[..tail.len()],
            );
            if tail != &expected[..tail.len()] {
                first_bad_byte = Some(range.start + whole);
            }
        });
        match first_bad_byte {
            None => Ok(()),
            Some(from) => Err(self.locate(offset_bytes, buf, from, chunk_size_bytes)),
        }
    }

    /// Whether `buf` can hold the pattern at `offset_bytes` at all: the offset comes from
    /// data read back (a chunk's stream offset), which may be damaged or forged.
    fn placeable(offset_bytes: u64, buf: &[u8]) -> Result<(), Mismatch> {
        let kind = if !offset_bytes.is_multiple_of(8) {
            MismatchKind::Unaligned
        } else if offset_bytes.checked_add(buf.len() as u64).is_none() {
            MismatchKind::BeyondEnd
        } else {
            return Ok(());
        };
        Err(Mismatch {
            offset_bytes,
            expected_byte: 0,
            found_byte: buf.first().copied().unwrap_or(0),
            kind,
        })
    }

    /// Slow path: find and classify the first differing byte at or after byte `from`.
    fn locate(
        &self,
        offset_bytes: u64,
        buf: &[u8],
        from: usize,
        chunk_size_bytes: u64,
    ) -> Mismatch {
        let mut expected = [0u8; 4];
        let mut position = from;
        loop {
            assert!(
                position < buf.len(),
                "locate is called only when a difference exists"
            );
            let word_offset = (offset_bytes + position as u64) & !3;
            let word = self.word(word_offset / 4).to_le_bytes();
            let within = (offset_bytes + position as u64 - word_offset) as usize;
            expected[0] = word[within];
            if buf[position] != expected[0] {
                break;
            }
            position += 1;
        }
        let mismatch_offset_bytes = offset_bytes + position as u64;
        let kind = self.classify(offset_bytes, buf, position, chunk_size_bytes);
        Mismatch {
            offset_bytes: mismatch_offset_bytes,
            expected_byte: expected[0],
            found_byte: buf[position],
            kind,
        }
    }

    fn classify(
        &self,
        offset_bytes: u64,
        buf: &[u8],
        position: usize,
        chunk_size_bytes: u64,
    ) -> MismatchKind {
        let word_at = |byte: usize| -> Option<u32> {
            buf.get(byte..byte + 4)
                .map(|b| u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
        };
        // Start at the even word holding the mismatch, and confirm a recovered seed over
        // the words that follow before naming it.
        let even_byte = (((offset_bytes + position as u64) & !7) - offset_bytes) as usize;
        if let (Some(even), Some(odd)) = (word_at(even_byte), word_at(even_byte + 4)) {
            let word_index = (offset_bytes + even_byte as u64) / 4;
            let seed = Pattern::seed_of_words(even, odd, word_index);
            let other = Pattern::new(seed);
            let confirmed = (2..2 + SEED_CONFIRM_WORDS).all(|k| match word_at(even_byte + 4 * k) {
                Some(found) => found == other.word(word_index + k as u64),
                None => k > 2,
            });
            if seed != self.seed && confirmed {
                return MismatchKind::WrongSeed { found_seed: seed };
            }
        }
        // A pattern that stops at a chunk boundary, with nothing of it in the rest of that chunk.
        let mismatch_offset_bytes = offset_bytes + position as u64;
        if chunk_size_bytes > 0 && mismatch_offset_bytes.is_multiple_of(chunk_size_bytes) {
            let end = (position + chunk_size_bytes as usize).min(buf.len()) / 4 * 4;
            let any_match = (position..end)
                .step_by(4)
                .any(|byte| word_at(byte) == Some(self.word((offset_bytes + byte as u64) / 4)));
            if !any_match {
                return MismatchKind::EndsEarly;
            }
        }
        MismatchKind::Corrupt
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const CHUNK: u64 = 128 * 1024;

    #[test]
    fn an_offset_the_pattern_cannot_start_at_is_a_mismatch_not_a_panic() {
        let pattern = Pattern::new(5);
        let mut buf = vec![0u8; 4096];
        pattern.fill(1 << 20, &mut buf);
        for offset in [1u64, 4, 7, (1 << 20) + 4, u64::MAX] {
            let mismatch = pattern.check(offset, &buf, CHUNK).unwrap_err();
            assert_eq!(mismatch.kind, MismatchKind::Unaligned, "offset {offset}");
            assert_eq!(mismatch.offset_bytes, offset);
            assert!(mismatch.to_string().contains("not a multiple of 8"));
        }
        let near_end = (u64::MAX - 100) & !7;
        let mismatch = pattern.check(near_end, &buf, CHUNK).unwrap_err();
        assert_eq!(mismatch.kind, MismatchKind::BeyondEnd);
        // The last whole range below 2^64 still checks.
        let last = (u64::MAX - 4096 - 8) & !7;
        let mut tail = vec![0u8; 4096];
        pattern.fill(last, &mut tail);
        assert_eq!(pattern.check(last, &tail, CHUNK), Ok(()));
        assert_eq!(pattern.check(1 << 20, &buf, CHUNK), Ok(()));
    }

    #[test]
    fn inverse_constants_are_inverses() {
        assert_eq!(MUL_1.wrapping_mul(MUL_1_INVERSE), 1);
        assert_eq!(MUL_2.wrapping_mul(MUL_2_INVERSE), 1);
        for x in [0u32, 1, 42, u32::MAX, 0x89AB_CDEF] {
            assert_eq!(unmix(mix(x)), x);
        }
        for x in [0u64, 1, u64::MAX, 0x0123_4567_89AB_CDEF] {
            assert_eq!(unmix64(mix64(x)), x);
        }
    }

    #[test]
    fn seekable_any_offset_matches_a_whole_fill() {
        let pattern = Pattern::new(7);
        let mut whole = vec![0u8; 1 << 16];
        pattern.fill(0, &mut whole);
        for offset in [0usize, 8, 4096, 12344, 65528] {
            let mut part = vec![0u8; whole.len() - offset];
            pattern.fill(offset as u64, &mut part);
            assert_eq!(part, whole[offset..]);
        }
    }

    #[test]
    fn a_correct_buffer_checks_and_the_seed_is_recovered() {
        let pattern = Pattern::new(0xC0FFEE);
        let mut buf = vec![0u8; 4096 + 5];
        pattern.fill(1 << 20, &mut buf);
        assert_eq!(pattern.check(1 << 20, &buf, CHUNK), Ok(()));
        let even = u32::from_le_bytes(buf[..4].try_into().unwrap());
        let odd = u32::from_le_bytes(buf[4..8].try_into().unwrap());
        assert_eq!(Pattern::seed_of_words(even, odd, (1 << 20) / 4), 0xC0FFEE);
    }

    #[test]
    fn a_flipped_byte_is_found_exactly() {
        let pattern = Pattern::new(1);
        let mut buf = vec![0u8; 2 * CHUNK as usize];
        pattern.fill(0, &mut buf);
        for position in [0usize, 7, 8, 1000, 131071, 131072, 262143] {
            let mut damaged = buf.clone();
            damaged[position] ^= 0x10;
            let mismatch = pattern.check(0, &damaged, CHUNK).unwrap_err();
            assert_eq!(mismatch.offset_bytes, position as u64);
            assert_eq!(mismatch.kind, MismatchKind::Corrupt, "at {position}");
            assert_eq!(mismatch.found_byte, buf[position] ^ 0x10);
        }
    }

    #[test]
    fn another_seed_is_named() {
        let mut buf = vec![0u8; CHUNK as usize * 4];
        Pattern::new(1).fill(0, &mut buf[..CHUNK as usize * 2]);
        Pattern::new(2).fill(CHUNK * 2, &mut buf[CHUNK as usize * 2..]);
        let mismatch = Pattern::new(1).check(0, &buf, CHUNK).unwrap_err();
        assert_eq!(mismatch.offset_bytes, CHUNK * 2);
        assert_eq!(mismatch.kind, MismatchKind::WrongSeed { found_seed: 2 });
    }

    #[test]
    fn a_pattern_that_stops_is_a_length_error() {
        let mut buf = vec![0u8; CHUNK as usize * 3];
        Pattern::new(9).fill(0, &mut buf[..CHUNK as usize]);
        let mismatch = Pattern::new(9).check(0, &buf, CHUNK).unwrap_err();
        assert_eq!(mismatch.offset_bytes, CHUNK);
        assert_eq!(mismatch.kind, MismatchKind::EndsEarly);
    }

    #[test]
    fn the_pattern_does_not_compress() {
        // Byte histogram close to uniform, and no repeated word in 1 MiB.
        let mut buf = vec![0u8; 1 << 20];
        Pattern::new(0).fill(0, &mut buf);
        let mut counts = [0u64; 256];
        for byte in &buf {
            counts[*byte as usize] += 1;
        }
        let expected = buf.len() as f64 / 256.0;
        let chi_square: f64 = counts
            .iter()
            .map(|&c| (c as f64 - expected).powi(2) / expected)
            .sum();
        assert!(
            chi_square < 400.0,
            "byte histogram too uneven: chi^2 = {chi_square}"
        );
        // Pairs of 4-byte words (8 bytes) never repeat in 1 MiB.
        let mut words: Vec<u64> = buf
            .chunks_exact(8)
            .map(|w| u64::from_le_bytes(w.try_into().unwrap()))
            .collect();
        words.sort_unstable();
        words.dedup();
        assert_eq!(words.len(), buf.len() / 8);
    }

    /// A vectorized kernel pair: its name, fill, and check.
    type Kernels = (
        &'static str,
        fn(&BlockKeys, u32, &mut [u8]),
        fn(&BlockKeys, u32, &[u8]) -> Option<usize>,
    );

    /// Every vectorized kernel pair this CPU has.
    fn vector_kernels() -> Vec<Kernels> {
        #[allow(unused_mut)]
        let mut kernels: Vec<Kernels> = Vec::new();
        #[cfg(target_arch = "x86_64")]
        if std::arch::is_x86_feature_detected!("avx2") {
            kernels.push((
                "avx2",
                // SAFETY: AVX2 support was just detected.
                |keys, first_low, out| unsafe { avx2::fill_steps(keys, first_low, out) },
                // SAFETY: AVX2 support was just detected.
                |keys, first_low, data| unsafe { avx2::check_steps(keys, first_low, data) },
            ));
        }
        #[cfg(all(target_arch = "aarch64", target_endian = "little"))]
        if std::arch::is_aarch64_feature_detected!("neon") {
            kernels.push((
                "neon",
                // SAFETY: NEON support was just detected.
                |keys, first_low, out| unsafe { neon::fill_steps(keys, first_low, out) },
                // SAFETY: NEON support was just detected.
                |keys, first_low, data| unsafe { neon::check_steps(keys, first_low, data) },
            ));
        }
        kernels
    }

    #[test]
    fn the_vector_kernels_agree_with_the_portable_ones() {
        let kernels = vector_kernels();
        // Every aarch64 Linux CPU has NEON: finding none there is a broken dispatch, not a CPU
        // to skip. (An x86-64 CPU may lack AVX2, and then has only the portable kernels.)
        if cfg!(all(target_arch = "aarch64", target_endian = "little")) {
            assert!(
                kernels.iter().any(|(name, _, _)| *name == "neon"),
                "no NEON kernel was detected"
            );
        }
        let keys = BlockKeys::new(Pattern::new(0x5EED).key, 3);
        let steps = 3 * CHECK_GROUP_STEPS + 5;
        let first_low = 0xFFFF_FF00u32; // The in-block index wraps within the buffer.
        let mut scalar = vec![0u8; steps * STEP_BYTES];
        fill_steps(&keys, first_low, &mut scalar);
        let mut damaged = scalar.clone();
        let flipped_step = 2 * CHECK_GROUP_STEPS + 3;
        damaged[flipped_step * STEP_BYTES + 17] ^= 0x40;
        let group_start = Some(2 * CHECK_GROUP_STEPS);
        assert_eq!(check_steps(&keys, first_low, &scalar), None);
        assert_eq!(check_steps(&keys, first_low, &damaged), group_start);
        for (name, fill, check) in kernels {
            let mut out = vec![0u8; scalar.len()];
            fill(&keys, first_low, &mut out);
            assert!(
                out == scalar,
                "{name} fills other bytes than the scalar kernel"
            );
            assert_eq!(check(&keys, first_low, &scalar), None, "{name}");
            assert_eq!(check(&keys, first_low, &damaged), group_start, "{name}");
            // Every byte of a step, in every register, is checked (one step of the last
            // group, which is shorter than a whole group).
            let last_step = steps - 1;
            for byte in 0..STEP_BYTES {
                let mut damaged = scalar.clone();
                damaged[last_step * STEP_BYTES + byte] ^= 0x01;
                assert_eq!(
                    check(&keys, first_low, &damaged),
                    Some(3 * CHECK_GROUP_STEPS),
                    "{name}: byte {byte} of a step"
                );
            }
            // Unaligned buffers: the kernels take any address.
            let mut shifted = vec![0u8; scalar.len() + 1];
            fill(&keys, first_low, &mut shifted[1..]);
            assert!(shifted[1..] == scalar[..], "{name} at an odd address");
            assert_eq!(check(&keys, first_low, &shifted[1..]), None, "{name}");
        }
    }

    #[test]
    fn the_fill_for_a_device_gives_the_same_bytes_at_every_alignment() {
        let pattern = Pattern::new(0x77);
        let mut backing = vec![0u8; (1 << 20) + 256];
        let mut expected = vec![0u8; 1 << 20];
        for (shift, offset, len) in [
            (0, 0u64, 1 << 20),
            (32, 8, 130944),
            (8, 4096, 1000),
            (0, (16 << 30) - 512, 4096),
        ] {
            let buf = &mut backing[shift..shift + len];
            buf.fill(0);
            pattern.fill_for_device(offset, buf);
            pattern.fill(offset, &mut expected[..len]);
            assert!(
                buf == &expected[..len],
                "shift {shift} offset {offset:#x} len {len}"
            );
            assert_eq!(pattern.check(offset, buf, CHUNK), Ok(()));
        }
        #[cfg(target_arch = "x86_64")]
        if std::arch::is_x86_feature_detected!("avx2") {
            let keys = BlockKeys::new(pattern.key, 1);
            let mut scalar = vec![0u8; 64 * STEP_BYTES];
            fill_steps(&keys, 5, &mut scalar);
            let start = backing.as_ptr().align_offset(32);
            let out = &mut backing[start..start + scalar.len()];
            // SAFETY: AVX2 support was just detected; `out` starts on a 32-byte boundary.
            unsafe { avx2::fill_steps_streaming(&keys, 5, out) };
            assert!(out == &scalar[..], "the streaming kernel fills other bytes");
        }
    }

    #[test]
    fn the_fast_path_agrees_with_the_word_function() {
        let pattern = Pattern::new(0xABCD);
        // Around the first 16 GiB block boundary too.
        for offset in [0u64, 8, 4096, (16 << 30) - 64, (16 << 30) - 8, 16 << 30] {
            let mut buf = vec![0u8; 200];
            pattern.fill(offset, &mut buf);
            for (index, word) in buf.chunks(4).enumerate() {
                let expected = pattern.word(offset / 4 + index as u64).to_le_bytes();
                assert_eq!(
                    word,
                    &expected[..word.len()],
                    "offset {offset:#x} word {index}"
                );
            }
            assert_eq!(pattern.check(offset, &buf, CHUNK), Ok(()));
        }
        let keys = BlockKeys::new(pattern.key, 0);
        let mut plain = vec![0u8; 4096];
        let mut fast = vec![0u8; 4096];
        fill_steps(&keys, 6, &mut plain);
        fill_steps_fast(&keys, 6, &mut fast);
        assert_eq!(plain, fast);
    }

    #[test]
    fn blocks_16_gib_apart_differ() {
        let pattern = Pattern::new(3);
        let mut a = vec![0u8; 4096];
        let mut b = vec![0u8; 4096];
        pattern.fill(0, &mut a);
        pattern.fill(16 << 30, &mut b);
        assert_ne!(a, b);
        assert!(pattern.check(16 << 30, &a, CHUNK).is_err());
    }

    #[test]
    #[ignore = "a measurement, not a test: cargo test --release -- --ignored pattern_speed"]
    fn pattern_speed() {
        let pattern = Pattern::new(1);
        let mut buf = vec![0u8; 8 << 20];
        let rounds = 64;
        let started = std::time::Instant::now();
        for round in 0..rounds {
            pattern.fill(round * buf.len() as u64, &mut buf);
        }
        let fill = started.elapsed().as_secs_f64();
        let started = std::time::Instant::now();
        for _ in 0..rounds {
            assert!(pattern
                .check((rounds - 1) * buf.len() as u64, &buf, CHUNK)
                .is_ok());
        }
        let check = started.elapsed().as_secs_f64();
        let gib = (rounds as f64 * buf.len() as f64) / (1u64 << 30) as f64;
        eprintln!(
            "fill {:.1} GiB/s, check {:.1} GiB/s",
            gib / fill,
            gib / check
        );
    }

    #[test]
    fn seeds_give_different_data() {
        let mut a = vec![0u8; 4096];
        let mut b = vec![0u8; 4096];
        Pattern::new(0).fill(0, &mut a);
        Pattern::new(1).fill(0, &mut b);
        assert_ne!(a, b);
        assert!(a.iter().zip(&b).filter(|(x, y)| x == y).count() < 64);
    }
}
