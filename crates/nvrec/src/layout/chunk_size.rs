//! The size of a recording's chunks, and its one rule: the CLI, the service (both through
//! `nvrec_app::record`) and the writer check it here. (The address ranges of `write` and
//! `read`, the streamer's job, take chunks of a power of two instead: `stream::StreamConfig`.)

/// A recording's chunk size: a whole number of 4 KiB pages (what O_DIRECT and every
/// drive's logical block take) from 8 KiB to 64 MiB.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ChunkSize(u32);

/// A chunk size the rule refuses, in bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error(
    "a chunk size of {0} bytes is refused: a recording's chunk is a multiple of 4 KiB from \
     8 KiB to 64 MiB (128K by default)"
)]
pub struct ChunkSizeError(pub u64);

impl ChunkSize {
    pub const ALIGN_BYTES: u32 = 4096;
    pub const MIN_BYTES: u32 = 8192;
    pub const MAX_BYTES: u32 = 64 << 20;
    pub const DEFAULT: ChunkSize = ChunkSize(128 << 10);

    pub fn new(bytes: u64) -> Result<ChunkSize, ChunkSizeError> {
        let fits = (u64::from(Self::MIN_BYTES)..=u64::from(Self::MAX_BYTES)).contains(&bytes)
            && bytes.is_multiple_of(u64::from(Self::ALIGN_BYTES));
        match fits {
            true => Ok(ChunkSize(bytes as u32)),
            false => Err(ChunkSizeError(bytes)),
        }
    }

    pub fn bytes(self) -> u32 {
        self.0
    }
}

impl Default for ChunkSize {
    fn default() -> ChunkSize {
        ChunkSize::DEFAULT
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn whole_pages_from_8_kib_to_64_mib_and_nothing_else() {
        for bytes in [8192, 12 << 10, 128 << 10, 96 << 10, 1 << 20, 64 << 20] {
            assert_eq!(
                ChunkSize::new(bytes).map(ChunkSize::bytes),
                Ok(bytes as u32)
            );
        }
        for bytes in [
            0,
            512,
            4096,
            6144,
            (128 << 10) + 512,
            (64 << 20) + 4096,
            1 << 40,
        ] {
            assert_eq!(ChunkSize::new(bytes), Err(ChunkSizeError(bytes)), "{bytes}");
        }
        assert_eq!(ChunkSize::default().bytes(), 128 << 10);
        assert!(ChunkSizeError(6144).to_string().contains("6144 bytes"));
    }
}
