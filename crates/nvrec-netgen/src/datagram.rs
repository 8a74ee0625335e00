//! The datagram format, byte by byte (little endian):
//!
//! | bytes   | field                                                        |
//! |---------|--------------------------------------------------------------|
//! | 0..8    | sequence number, from 0, one per datagram of a stream         |
//! | 8..12   | stream number                                                |
//! | 12..16  | magic `NGv1`                                                 |
//! | 16..    | pattern: word `j` (8 bytes, from byte 16) is `mix(j) ^ key`, where `key` mixes the sequence and stream numbers; a tail shorter than a word holds the first bytes of the next word |
//!
//! The pattern depends on the sequence number, so a datagram delivered in another's place,
//! cut short or changed is seen as damaged, not only as out of order. Filling and checking
//! are an xor with a precomputed template, so they run at memory speed.

/// Bytes before the pattern; the smallest datagram.
pub const HEADER_BYTES: usize = 16;
/// The largest datagram (a UDP payload over IPv4).
pub const DATAGRAM_BYTES_MAX: usize = 65507;
const MAGIC: [u8; 4] = *b"NGv1";

/// The header of a datagram.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Header {
    pub sequence: u64,
    pub stream: u32,
}

/// What a datagram is, as far as its bytes tell.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    /// Header and pattern as sent.
    Intact(Header),
    /// The header reads, the pattern does not match (changed or mixed up with another).
    Damaged(Header),
    /// Too short, or not one of ours.
    Foreign,
}

fn key(sequence: u64, stream: u32) -> u64 {
    (sequence ^ (u64::from(stream) << 48)).wrapping_mul(0x9E37_79B9_7F4A_7C15)
        ^ 0x5851_F42D_4C95_7F2D
}

/// The pattern words before they are keyed: enough for the largest datagram.
pub struct Template {
    words: Vec<u64>,
}

impl Default for Template {
    fn default() -> Self {
        Template::new()
    }
}

impl Template {
    pub fn new() -> Template {
        let count = DATAGRAM_BYTES_MAX.div_ceil(8) + 1;
        let words = (0..count as u64)
            .map(|j| {
                let mut x = j.wrapping_add(1).wrapping_mul(0xD1B5_4A32_D192_ED03);
                x ^= x >> 29;
                x.wrapping_mul(0xBF58_476D_1CE4_E5B9)
            })
            .collect();
        Template { words }
    }

    /// Writes datagram `sequence` of `stream` into `out` (its whole length, at least
    /// [`HEADER_BYTES`], at most [`DATAGRAM_BYTES_MAX`]).
    pub fn fill(&self, out: &mut [u8], stream: u32, sequence: u64) {
        assert!((HEADER_BYTES..=DATAGRAM_BYTES_MAX).contains(&out.len()));
        out[0..8].copy_from_slice(&sequence.to_le_bytes());
        out[8..12].copy_from_slice(&stream.to_le_bytes());
        out[12..16].copy_from_slice(&MAGIC);
        let key = key(sequence, stream);
        let body = &mut out[HEADER_BYTES..];
        let whole_words = body.len() / 8;
        let mut chunks = body.chunks_exact_mut(8);
        for (chunk, word) in (&mut chunks).zip(&self.words) {
            chunk.copy_from_slice(&(word ^ key).to_le_bytes());
        }
        let tail = chunks.into_remainder();
        if !tail.is_empty() {
            let word = self.words[whole_words] ^ key;
            let len = tail.len();
            tail.copy_from_slice(&word.to_le_bytes()[..len]);
        }
    }

    /// Reads and checks a datagram.
    pub fn check(&self, data: &[u8]) -> Verdict {
        let Some(header) = header(data) else {
            return Verdict::Foreign;
        };
        let key = key(header.sequence, header.stream);
        let body = &data[HEADER_BYTES..];
        let chunks = body.chunks_exact(8);
        let tail = chunks.remainder();
        let mut differ = 0u64;
        for (chunk, word) in chunks.zip(&self.words) {
            differ |= u64::from_le_bytes(chunk.try_into().unwrap()) ^ word ^ key;
        }
        if !tail.is_empty() {
            let word = (self.words[body.len() / 8] ^ key).to_le_bytes();
            if tail != &word[..tail.len()] {
                differ = 1;
            }
        }
        if differ == 0 {
            Verdict::Intact(header)
        } else {
            Verdict::Damaged(header)
        }
    }
}

/// The header of a datagram of ours; None if too short or the magic is not there.
pub fn header(data: &[u8]) -> Option<Header> {
    if data.len() < HEADER_BYTES || data[12..16] != MAGIC {
        return None;
    }
    Some(Header {
        sequence: u64::from_le_bytes(data[0..8].try_into().unwrap()),
        stream: u32::from_le_bytes(data[8..12].try_into().unwrap()),
    })
}

/// One datagram, allocated: for tests that send a few.
pub fn make(stream: u32, sequence: u64, len: usize) -> Vec<u8> {
    let mut out = vec![0u8; len];
    Template::new().fill(&mut out, stream, sequence);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_length_round_trips_and_any_changed_byte_is_seen() {
        let template = Template::new();
        for len in [
            16,
            17,
            23,
            24,
            25,
            100,
            1400,
            1472,
            8999,
            DATAGRAM_BYTES_MAX,
        ] {
            let mut data = vec![0u8; len];
            template.fill(&mut data, 3, 77);
            let expected = Header {
                sequence: 77,
                stream: 3,
            };
            assert_eq!(template.check(&data), Verdict::Intact(expected), "{len}");
            for at in [HEADER_BYTES, len / 2, len - 1] {
                if !(HEADER_BYTES..len).contains(&at) {
                    continue;
                }
                let mut bad = data.clone();
                bad[at] ^= 0x40;
                assert_eq!(
                    template.check(&bad),
                    Verdict::Damaged(expected),
                    "{len} {at}"
                );
            }
        }
    }

    #[test]
    fn datagrams_of_other_sequences_and_streams_differ() {
        let template = Template::new();
        let a = make(0, 1, 200);
        let b = make(0, 2, 200);
        let c = make(1, 1, 200);
        assert_ne!(a[16..], b[16..]);
        assert_ne!(a[16..], c[16..]);
        // A header swapped onto another's body is damage, not a valid datagram.
        let mut swapped = b.clone();
        swapped[..16].copy_from_slice(&a[..16]);
        assert!(matches!(template.check(&swapped), Verdict::Damaged(_)));
        assert_eq!(template.check(&[0u8; 15]), Verdict::Foreign);
        assert_eq!(template.check(&[0u8; 40]), Verdict::Foreign);
    }
}
