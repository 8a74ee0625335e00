//! Property tests on stable Rust: the properties of [`super::fuzzing`] over 100 000
//! seeded pseudo-random inputs per decoder. Inputs are of three kinds, so that every
//! layer of each decoder is reached, not only the magic check:
//! - random bytes of random length, sometimes stamped with the right magic and version,
//!   sometimes with a correct CRC on top (so field validation sees random values);
//! - a valid encoding with a few bytes changed, sometimes with the CRC fixed up after;
//! - a valid encoding cut short.

use super::codec::{crc32c_append, META_CRC_OFFSET};
use super::{
    crc32c, fuzzing, Checkpoint, RecordingEntry, Superblock, CHECKPOINT_MAGIC,
    CHUNK_HEADER_SIZE_BYTES, CHUNK_MAGIC, FORMAT_VERSION_MAJOR, RECORDING_ENTRY_MAGIC,
    SUPERBLOCK_MAGIC,
};

/// Inputs per property in the full run (`NVREC_FULL_TESTS=1`, as CI), natively. Under
/// qemu-aarch64's emulation (the runner sets `NVREC_QEMU_USER`) a twentieth: the properties
/// do not depend on the architecture, the emulated run proves the decoders on it, and 100 000
/// inputs there take minutes. The quick run takes a tenth.
fn cases() -> u32 {
    if std::env::var_os("NVREC_QEMU_USER").is_some() {
        5_000
    } else {
        nvrec_testkit::quick_or_full(10_000, 100_000)
    }
}

/// xorshift64* (Vigna): small, fast, and deterministic for a seed.
struct Rng(u64);

impl Rng {
    fn new(seed: u64) -> Self {
        Rng(seed.max(1))
    }

    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    /// Uniform enough in `0..n` for test inputs (`n > 0`).
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }

    fn fill(&mut self, bytes: &mut [u8]) {
        for chunk in bytes.chunks_mut(8) {
            let r = self.next().to_le_bytes();
            chunk.copy_from_slice(&r[..chunk.len()]);
        }
    }

    /// A value that is often at an edge: 0, 1, a power of two, all ones, or random.
    fn edgy_u64(&mut self) -> u64 {
        match self.below(6) {
            0 => 0,
            1 => 1,
            2 => 1 << self.below(64),
            3 => u64::MAX,
            4 => self.below(1 << 20),
            _ => self.next(),
        }
    }
}

/// Fixes the trailing CRC32C of a 4096-byte metadata structure at the start of `b`.
fn reseal_meta(b: &mut [u8]) {
    if b.len() >= 4096 {
        let crc = crc32c(&b[..META_CRC_OFFSET]);
        b[META_CRC_OFFSET..4096].copy_from_slice(&crc.to_le_bytes());
    }
}

/// Fixes both CRCs of a chunk at the start of `b`, for as much payload as `b` holds.
fn reseal_chunk(b: &mut [u8]) {
    const H: usize = CHUNK_HEADER_SIZE_BYTES;
    if b.len() < H {
        return;
    }
    let len = u32::from_le_bytes([b[80], b[81], b[82], b[83]]) as usize;
    let end = H.saturating_add(len).min(b.len());
    b[120..H].fill(0);
    let crc = crc32c_append(crc32c(&b[..H]), &b[H..end]);
    b[120..124].copy_from_slice(&crc.to_le_bytes());
    let crc = crc32c(&b[..124]);
    b[124..128].copy_from_slice(&crc.to_le_bytes());
}

struct Target {
    name: &'static str,
    magic: [u8; 8],
    /// Valid encodings to mutate.
    seeds: Vec<Vec<u8>>,
    reseal: fn(&mut [u8]),
    /// The fuzz targets' sealing of raw input (see `fuzzing::sealed_meta`).
    sealed: fn(&[u8]) -> Vec<u8>,
    check: fn(&[u8]),
    /// Decodes successfully (to count how often the round trip was exercised).
    decodes: fn(&[u8]) -> bool,
}

fn run(target: &Target, seed: u64) {
    let mut rng = Rng::new(seed);
    let mut decoded = 0u32;
    let cases = cases();
    for case in 0..cases {
        let input: Vec<u8> = match case % 3 {
            0 => {
                let len = rng.below(4300) as usize;
                let mut b = vec![0u8; len];
                rng.fill(&mut b);
                if len >= 12 && rng.below(2) == 0 {
                    b[..8].copy_from_slice(&target.magic);
                    b[8..10].copy_from_slice(&FORMAT_VERSION_MAJOR.to_le_bytes());
                    // Plant edge values in a few aligned fields.
                    for _ in 0..rng.below(8) {
                        let at =
                            12 + 4 * rng.below(((len as u64 - 12) / 4).max(1)).min(60) as usize;
                        let v = rng.edgy_u64().to_le_bytes();
                        let n = (len - at).min(8);
                        b[at..at + n].copy_from_slice(&v[..n]);
                    }
                    if rng.below(2) == 0 {
                        (target.reseal)(&mut b);
                    }
                }
                b
            }
            1 => {
                let mut b = target.seeds[rng.below(target.seeds.len() as u64) as usize].clone();
                for _ in 0..=rng.below(4) {
                    let at = rng.below(b.len() as u64) as usize;
                    match rng.below(3) {
                        0 => b[at] ^= 1 << rng.below(8),
                        1 => b[at] = rng.next() as u8,
                        _ => {
                            // An edge value into an aligned field of the first 256 bytes.
                            let at = (at % 256) & !7;
                            let v = rng.edgy_u64().to_le_bytes();
                            let n = (b.len() - at).min(8);
                            b[at..at + n].copy_from_slice(&v[..n]);
                        }
                    }
                }
                if rng.below(4) != 0 {
                    (target.reseal)(&mut b);
                }
                b
            }
            _ => {
                let b = &target.seeds[rng.below(target.seeds.len() as u64) as usize];
                let len = rng.below(b.len() as u64 + 1) as usize;
                b[..len].to_vec()
            }
        };
        let sealed = (target.sealed)(&input);
        for input in [&input, &sealed] {
            (target.check)(input);
            if (target.decodes)(input) {
                decoded += 1;
            }
        }
    }
    // The round-trip half of the property must actually have been exercised.
    assert!(
        decoded > cases / 100,
        "{}: only {decoded} of {cases} inputs decoded",
        target.name
    );
}

#[test]
fn sealing_keeps_valid_structures_valid() {
    let sb = super::superblock::tests::sample()
        .encode()
        .expect("encodes");
    assert_eq!(
        fuzzing::sealed_meta(&SUPERBLOCK_MAGIC, &sb[12..4092]),
        sb.to_vec()
    );
    let cp = super::index::tests::sample_checkpoint()
        .encode()
        .expect("encodes");
    assert_eq!(
        fuzzing::sealed_meta(&CHECKPOINT_MAGIC, &cp[12..]),
        cp.to_vec()
    );
    let header = super::chunk::tests::sample();
    let slot = super::chunk::tests::framed(&header);
    let end = header.payload_range().end;
    let mut data = slot[12..120].to_vec();
    data.extend_from_slice(&slot[128..end]);
    assert_eq!(fuzzing::sealed_chunk(&data), slot[..end].to_vec());
    assert!(super::decode_chunk(&fuzzing::sealed_chunk(&[])).is_err());
}

#[test]
fn superblock_decoder_property() {
    use super::superblock::tests::sample;
    let mut seeds = Vec::new();
    for (volume, chunk, lbs) in [(1u64 << 34, 131_072, 512), (1 << 30, 4096, 4096)] {
        let layout = super::VolumeLayout::compute(volume, chunk, lbs).expect("fits");
        let sb = Superblock { layout, ..sample() };
        seeds.push(sb.encode().expect("encodes").to_vec());
    }
    seeds.push(sample().encode().expect("encodes").to_vec());
    run(
        &Target {
            name: "superblock",
            magic: SUPERBLOCK_MAGIC,
            seeds,
            reseal: reseal_meta,
            sealed: |d| fuzzing::sealed_meta(&SUPERBLOCK_MAGIC, d),
            check: fuzzing::superblock,
            decodes: |b| Superblock::decode(b).is_ok(),
        },
        0x5eed_0001,
    );
}

#[test]
fn chunk_decoder_property() {
    use super::chunk::tests::sample;
    use super::{decode_chunk, ChunkFlags};
    let mut seeds = Vec::new();
    let mut rng = Rng::new(7);
    for (len, flags, gap) in [
        (0u32, ChunkFlags::END, 0u64),
        (1, ChunkFlags::empty(), 0),
        (1000, ChunkFlags::GAP, 4096),
        (3968, ChunkFlags::PATTERN, 0),
    ] {
        let header = super::ChunkHeader {
            payload_len_bytes: len,
            flags,
            gap_bytes: gap,
            ..sample()
        };
        let mut slot = vec![0u8; 4096];
        rng.fill(&mut slot);
        header.encode_into(&mut slot).expect("frames");
        seeds.push(slot);
    }
    run(
        &Target {
            name: "chunk",
            magic: CHUNK_MAGIC,
            seeds,
            reseal: reseal_chunk,
            sealed: fuzzing::sealed_chunk,
            check: fuzzing::chunk,
            decodes: |b| decode_chunk(b).is_ok(),
        },
        0x5eed_0002,
    );
}

#[test]
fn checkpoint_decoder_property() {
    use super::index::tests::sample_checkpoint;
    let one = Checkpoint {
        members: vec![Default::default()],
        recording_id: 0,
        ..sample_checkpoint()
    };
    let seeds = vec![
        sample_checkpoint().encode().expect("encodes").to_vec(),
        one.encode().expect("encodes").to_vec(),
    ];
    run(
        &Target {
            name: "checkpoint",
            magic: CHECKPOINT_MAGIC,
            seeds,
            reseal: reseal_meta,
            sealed: |d| fuzzing::sealed_meta(&CHECKPOINT_MAGIC, d),
            check: fuzzing::checkpoint,
            decodes: |b| Checkpoint::decode(b).is_ok(),
        },
        0x5eed_0003,
    );
}

#[test]
fn recording_entry_decoder_property() {
    use super::index::tests::sample_entry;
    let seeds = vec![sample_entry().encode().expect("encodes").to_vec()];
    run(
        &Target {
            name: "recording entry",
            magic: RECORDING_ENTRY_MAGIC,
            seeds,
            reseal: reseal_meta,
            sealed: |d| fuzzing::sealed_meta(&RECORDING_ENTRY_MAGIC, d),
            check: fuzzing::recording_entry,
            decodes: |b| RecordingEntry::decode(b).is_ok(),
        },
        0x5eed_0004,
    );
}

#[test]
fn volume_layout_property() {
    let mut rng = Rng::new(0x5eed_0005);
    let mut laid_out = 0u32;
    let cases = cases();
    for _ in 0..cases {
        // Mostly plausible parameters, sometimes wild ones.
        let volume = match rng.below(4) {
            0 => rng.edgy_u64(),
            1 => rng.below(64 << 20),
            _ => rng.below(1 << 44),
        };
        let lbs = if rng.below(8) == 0 {
            rng.next() as u32
        } else {
            1 << (8 + rng.below(10))
        };
        let chunk = match rng.below(4) {
            0 => rng.next() as u32,
            1 => (1 + rng.below(64) as u32) * 4096,
            _ => 1 << (11 + rng.below(19)),
        };
        let cp = rng.below(70) as u16;
        let rec = if rng.below(2) == 0 {
            256
        } else {
            rng.next() as u16
        };
        let mut data = Vec::with_capacity(20);
        data.extend_from_slice(&volume.to_le_bytes());
        data.extend_from_slice(&chunk.to_le_bytes());
        data.extend_from_slice(&lbs.to_le_bytes());
        data.extend_from_slice(&cp.to_le_bytes());
        data.extend_from_slice(&rec.to_le_bytes());
        fuzzing::volume_layout(&data);
        let (v, c, l, g) = fuzzing::layout_params(&data);
        if super::VolumeLayout::compute_with(v, c, l, g).is_ok() {
            laid_out += 1;
        }
    }
    assert!(laid_out > cases / 100, "only {laid_out} layouts computed");
    // Short inputs are read as zero-padded.
    for len in 0..20 {
        fuzzing::volume_layout(&[0xff; 20][..len]);
    }
}

#[test]
fn records_span_property() {
    let mut rng = Rng::new(0x5eed_0006);
    for _ in 0..cases() / 10 {
        let mut data = vec![0u8; rng.below(160) as usize];
        rng.fill(&mut data);
        if rng.below(2) == 0 {
            // Real payloads, cut and changed: the reassembly meets fragments out of place.
            let sizes: Vec<u8> = data.iter().skip(1).copied().collect();
            let datas: Vec<Vec<u8>> = sizes
                .chunks(2)
                .map(|size| vec![7u8; (size[0] as usize) * 40])
                .collect();
            let mut payloads =
                fuzzing::pack_records(&datas, 72 + 8 * data.first().map_or(0, |&b| b as usize));
            payloads.retain(|_| rng.below(4) != 0);
            let mut joined = Vec::new();
            for payload in payloads {
                joined.extend_from_slice(&payload);
                joined.push(0xa5);
            }
            let at = rng.below(joined.len() as u64 + 1) as usize;
            if let Some(byte) = joined.get_mut(at) {
                *byte ^= 1 << rng.below(8);
            }
            fuzzing::records_span(&joined);
        } else {
            fuzzing::records_span(&data);
        }
    }
}
