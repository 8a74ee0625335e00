//! The test pattern: seekable, incompressible, and fast enough to outrun any drive.
//!
//! The streamer this project replaces uses an LFSR, which must be stepped from the start of a
//! stream. nvrec instead computes every 8-byte word from the seed and the word's absolute byte
//! offset on the target: word `i` (bytes `8i..8i+8`, little-endian) is
//! `mix((seed ^ SEED_SALT) + (i + 1) * GOLDEN)`, where `mix` is a bijective 64-bit finalizer
//! (xor-shift, multiply, xor-shift, multiply, xor-shift). Consequences:
//! - any chunk can be produced or checked from the seed and its offset alone (seekable);
//! - the same bytes at another address, or an old write with another seed, do not check;
//! - because `mix` is invertible, a word that fails the check reveals which seed wrote it,
//!   so the checker tells "written with seed 7" apart from corruption (streamer TEST #02/#05).
//!
//! Offsets passed here must be multiples of 8 (every chunk address is). This module is pure:
//! no I/O and no allocation.

/// Added per word; the 64-bit golden ratio, odd, so `(i + 1) * GOLDEN` walks all 2^64 values.
const GOLDEN: u64 = 0x9E37_79B9_7F4A_7C15;
/// Keeps seed 0 from starting the sequence at a small number.
const SEED_SALT: u64 = 0x6A09_E667_F3BC_C909;
const MUL_1: u64 = 0xBF58_476D_1CE4_E5B9;
const MUL_2: u64 = 0x94D0_49BB_1331_11EB;
const MUL_1_INVERSE: u64 = inverse_mod_2_64(MUL_1);
const MUL_2_INVERSE: u64 = inverse_mod_2_64(MUL_2);
/// Words compared per block before the fast check looks at the accumulated difference.
const CHECK_BLOCK_WORDS: usize = 64;

/// The multiplicative inverse of an odd number modulo 2^64 (Newton's iteration).
const fn inverse_mod_2_64(odd: u64) -> u64 {
    let mut inverse = odd; // Correct to 3 bits for any odd number.
    let mut step = 0;
    while step < 5 {
        inverse = inverse.wrapping_mul(2u64.wrapping_sub(odd.wrapping_mul(inverse)));
        step += 1;
    }
    inverse
}

#[inline(always)]
fn mix(mut x: u64) -> u64 {
    x ^= x >> 30;
    x = x.wrapping_mul(MUL_1);
    x ^= x >> 27;
    x = x.wrapping_mul(MUL_2);
    x ^= x >> 31;
    x
}

/// Inverts `x ^= x >> shift` for `shift` > 0.
fn unshift_xor(y: u64, shift: u32) -> u64 {
    let mut x = y;
    let mut applied = shift;
    while applied < 64 {
        x = y ^ (x >> shift);
        applied += shift;
    }
    y ^ (x >> shift)
}

fn unmix(mut x: u64) -> u64 {
    x = unshift_xor(x, 31);
    x = x.wrapping_mul(MUL_2_INVERSE);
    x = unshift_xor(x, 27);
    x = x.wrapping_mul(MUL_1_INVERSE);
    unshift_xor(x, 30)
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
        }
    }
}

impl Pattern {
    pub fn new(seed: u64) -> Pattern {
        Pattern { seed, key: seed ^ SEED_SALT }
    }

    pub fn seed(&self) -> u64 {
        self.seed
    }

    /// The word that belongs at word index `word_index` (byte offset `8 * word_index`).
    #[inline(always)]
    pub fn word(&self, word_index: u64) -> u64 {
        mix(self.key.wrapping_add(word_index.wrapping_add(1).wrapping_mul(GOLDEN)))
    }

    /// Which seed, if any, would have put `word` at `word_index`.
    pub fn seed_of_word(word: u64, word_index: u64) -> u64 {
        unmix(word).wrapping_sub(word_index.wrapping_add(1).wrapping_mul(GOLDEN)) ^ SEED_SALT
    }

    /// Fills `buf` with the pattern bytes that belong at absolute `offset_bytes`.
    pub fn fill(&self, offset_bytes: u64, buf: &mut [u8]) {
        assert!(offset_bytes % 8 == 0, "pattern offsets are multiples of 8");
        let first_word = offset_bytes / 8;
        let mut words = buf.chunks_exact_mut(8);
        let mut word_index = first_word;
        for out in &mut words {
            out.copy_from_slice(&self.word(word_index).to_le_bytes());
            word_index += 1;
        }
        let tail = words.into_remainder();
        if !tail.is_empty() {
            let bytes = self.word(word_index).to_le_bytes();
            tail.copy_from_slice(&bytes[..tail.len()]);
        }
    }

    /// Checks `buf` against the pattern at absolute `offset_bytes`. `chunk_size_bytes` is
    /// used only to classify a mismatch (a pattern that ends on a chunk boundary).
    pub fn check(&self, offset_bytes: u64, buf: &[u8], chunk_size_bytes: u64) -> Result<(), Mismatch> {
        assert!(offset_bytes % 8 == 0, "pattern offsets are multiples of 8");
        let first_word = offset_bytes / 8;
        let words = buf.chunks_exact(8);
        let tail = words.remainder();
        // Fast path: XOR-accumulate differences over blocks, look closer only on a hit.
        let whole_words = buf.len() / 8;
        let mut block_start = 0usize;
        while block_start < whole_words {
            let block_end = (block_start + CHECK_BLOCK_WORDS).min(whole_words);
            let mut difference = 0u64;
            for index in block_start..block_end {
                let found = u64::from_le_bytes(buf[index * 8..index * 8 + 8].try_into().unwrap_or_default());
                difference |= found ^ self.word(first_word + index as u64);
            }
            if difference != 0 {
                return Err(self.locate(offset_bytes, buf, block_start, chunk_size_bytes));
            }
            block_start = block_end;
        }
        if !tail.is_empty() {
            let expected = self.word(first_word + whole_words as u64).to_le_bytes();
            if tail != &expected[..tail.len()] {
                return Err(self.locate(offset_bytes, buf, whole_words, chunk_size_bytes));
            }
        }
        Ok(())
    }

    /// Slow path: find and classify the first differing byte at or after word `from_word`.
    fn locate(&self, offset_bytes: u64, buf: &[u8], from_word: usize, chunk_size_bytes: u64) -> Mismatch {
        let first_word = offset_bytes / 8;
        let mut expected = vec![0u8; buf.len() - from_word * 8];
        self.fill(offset_bytes + from_word as u64 * 8, &mut expected);
        let found = &buf[from_word * 8..];
        let position = found
            .iter()
            .zip(&expected)
            .position(|(a, b)| a != b)
            .expect("locate is called only when a difference exists");
        let byte_index = from_word * 8 + position;
        let mismatch_offset_bytes = offset_bytes + byte_index as u64;
        let word_index = byte_index / 8;
        let kind = self.classify(first_word, buf, word_index, mismatch_offset_bytes, chunk_size_bytes);
        Mismatch {
            offset_bytes: mismatch_offset_bytes,
            expected_byte: expected[position],
            found_byte: found[position],
            kind,
        }
    }

    fn classify(
        &self,
        first_word: u64,
        buf: &[u8],
        word_index: usize,
        mismatch_offset_bytes: u64,
        chunk_size_bytes: u64,
    ) -> MismatchKind {
        let read_word = |index: usize| -> Option<u64> {
            buf.get(index * 8..index * 8 + 8).map(|b| u64::from_le_bytes(b.try_into().unwrap_or_default()))
        };
        // Two consecutive words from the same foreign seed identify it beyond chance.
        if let (Some(a), Some(b)) = (read_word(word_index), read_word(word_index + 1)) {
            let seed_a = Pattern::seed_of_word(a, first_word + word_index as u64);
            let seed_b = Pattern::seed_of_word(b, first_word + word_index as u64 + 1);
            if seed_a == seed_b && seed_a != self.seed {
                return MismatchKind::WrongSeed { found_seed: seed_a };
            }
        }
        // A pattern that stops at a chunk boundary, with nothing of it in the rest of that chunk.
        if chunk_size_bytes > 0 && mismatch_offset_bytes % chunk_size_bytes == 0 {
            let words_in_chunk = (chunk_size_bytes / 8) as usize;
            let end = (word_index + words_in_chunk).min(buf.len() / 8);
            let any_match = (word_index..end)
                .any(|index| read_word(index) == Some(self.word(first_word + index as u64)));
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
    fn inverse_constants_are_inverses() {
        assert_eq!(MUL_1.wrapping_mul(MUL_1_INVERSE), 1);
        assert_eq!(MUL_2.wrapping_mul(MUL_2_INVERSE), 1);
        for x in [0u64, 1, 42, u64::MAX, 0x0123_4567_89AB_CDEF] {
            assert_eq!(unmix(mix(x)), x);
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
        let word = u64::from_le_bytes(buf[..8].try_into().unwrap());
        assert_eq!(Pattern::seed_of_word(word, (1 << 20) / 8), 0xC0FFEE);
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
        let chi_square: f64 = counts.iter().map(|&c| (c as f64 - expected).powi(2) / expected).sum();
        assert!(chi_square < 400.0, "byte histogram too uneven: chi^2 = {chi_square}");
        let mut words: Vec<u64> =
            buf.chunks_exact(8).map(|w| u64::from_le_bytes(w.try_into().unwrap())).collect();
        words.sort_unstable();
        words.dedup();
        assert_eq!(words.len(), buf.len() / 8);
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
