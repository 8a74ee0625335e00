//! Writes not yet flushed, kept in memory so that a power cut can lose them.
//!
//! The overlay holds whole 4 KiB sectors, keyed by sector index. A write into a sector not yet
//! held first reads the sector from the backing file (what a power cut falls back to), then
//! patches it, so reads see the writes (read-your-writes) and a partial-sector write keeps
//! the rest of its sector. A flush writes every held sector to the backing file, syncs it and
//! empties the overlay. A power cut empties it without writing, or, torn, writes a seeded
//! subset of the held sectors first: each survives on a coin flip from a SplitMix64 stream
//! seeded with the seed, in sector order, so the same seed and the same unflushed sectors
//! keep the same subset ([`torn_keep`]).
//!
//! Memory is bounded: a write that would take the overlay past its limit fails as a whole,
//! and nothing of it is kept.

use std::collections::BTreeMap;
use std::fs::File;
use std::io;
use std::os::unix::fs::FileExt;

/// The overlay's unit: what a torn write keeps or loses.
pub const SECTOR_BYTES: u64 = 4096;

/// What a write puts into the sectors it touches.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Fill<'a> {
    /// These bytes.
    Bytes(&'a [u8]),
    /// This many zero bytes (a discard).
    Zeros(u64),
}

impl Fill<'_> {
    fn len(&self) -> u64 {
        match self {
            Fill::Bytes(bytes) => bytes.len() as u64,
            Fill::Zeros(len) => *len,
        }
    }

    fn copy_into(&self, from: u64, to: &mut [u8]) {
        match self {
            Fill::Bytes(bytes) => to.copy_from_slice(&bytes[from as usize..][..to.len()]),
            Fill::Zeros(_) => to.fill(0),
        }
    }
}

/// A write that would take the overlay past its limit.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Full {
    pub unflushed_bytes: u64,
    pub needed_bytes: u64,
    pub max_bytes: u64,
}

/// What a power cut did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PowerCut {
    /// Unflushed sectors lost.
    pub sectors_dropped: u64,
    /// Unflushed sectors written anyway (a torn cut).
    pub sectors_kept: u64,
}

/// Unflushed sectors over a backing file.
#[derive(Debug)]
pub(crate) struct Overlay {
    sectors: BTreeMap<u64, Box<[u8]>>,
    max_bytes: u64,
}

impl Overlay {
    pub fn new(max_bytes: u64) -> Overlay {
        Overlay {
            sectors: BTreeMap::new(),
            max_bytes,
        }
    }

    /// Bytes held.
    pub fn bytes(&self) -> u64 {
        self.sectors.len() as u64 * SECTOR_BYTES
    }

    /// Overwrites the parts of `buf`, read from the backing file at `offset`, that unflushed
    /// writes changed.
    pub fn patch_read(&self, offset: u64, buf: &mut [u8]) {
        let end = offset + buf.len() as u64;
        let first = offset / SECTOR_BYTES;
        for (&index, sector) in self.sectors.range(first..end.div_ceil(SECTOR_BYTES)) {
            let (from, to) = overlap(index, offset, end);
            let start = index * SECTOR_BYTES;
            buf[(from - offset) as usize..(to - offset) as usize]
                .copy_from_slice(&sector[(from - start) as usize..(to - start) as usize]);
        }
    }

    /// Keeps a write in memory.
    pub fn write(&mut self, backing: &File, offset: u64, fill: Fill<'_>) -> Result<(), WriteError> {
        let end = offset + fill.len();
        let sector_range = offset / SECTOR_BYTES..end.div_ceil(SECTOR_BYTES);
        let new_sectors = sector_range
            .clone()
            .filter(|index| !self.sectors.contains_key(index))
            .count() as u64;
        let needed_bytes = new_sectors * SECTOR_BYTES;
        if self.bytes() + needed_bytes > self.max_bytes {
            return Err(WriteError::Full(Full {
                unflushed_bytes: self.bytes(),
                needed_bytes,
                max_bytes: self.max_bytes,
            }));
        }
        for index in sector_range {
            let sector = match self.sectors.entry(index) {
                std::collections::btree_map::Entry::Occupied(entry) => entry.into_mut(),
                std::collections::btree_map::Entry::Vacant(entry) => {
                    entry.insert(read_sector(backing, index).map_err(WriteError::Io)?)
                }
            };
            let (from, to) = overlap(index, offset, end);
            let start = index * SECTOR_BYTES;
            fill.copy_into(
                from - offset,
                &mut sector[(from - start) as usize..(to - start) as usize],
            );
        }
        Ok(())
    }

    /// Writes every held sector to the backing file, syncs it and empties the overlay.
    pub fn commit(&mut self, backing: &File) -> io::Result<()> {
        for (&index, sector) in &self.sectors {
            backing.write_all_at(sector, index * SECTOR_BYTES)?;
        }
        backing.sync_data()?;
        self.sectors.clear();
        Ok(())
    }

    /// Loses the held sectors, or with a seed writes a seeded subset of them first.
    pub fn cut(&mut self, backing: &File, seed: Option<u64>) -> io::Result<PowerCut> {
        let keep = match seed {
            None => vec![false; self.sectors.len()],
            Some(seed) => torn_keep(seed, self.sectors.len()),
        };
        let mut report = PowerCut::default();
        for ((&index, sector), keep) in self.sectors.iter().zip(keep) {
            if keep {
                backing.write_all_at(sector, index * SECTOR_BYTES)?;
                report.sectors_kept += 1;
            } else {
                report.sectors_dropped += 1;
            }
        }
        if report.sectors_kept > 0 {
            backing.sync_data()?;
        }
        self.sectors.clear();
        Ok(report)
    }
}

/// Why a write could not be kept.
#[derive(Debug)]
pub(crate) enum WriteError {
    Full(Full),
    Io(io::Error),
}

/// The bytes of sector `index` inside `[offset, end)`.
fn overlap(index: u64, offset: u64, end: u64) -> (u64, u64) {
    let start = index * SECTOR_BYTES;
    (start.max(offset), (start + SECTOR_BYTES).min(end))
}

fn read_sector(backing: &File, index: u64) -> io::Result<Box<[u8]>> {
    let mut sector = vec![0u8; SECTOR_BYTES as usize].into_boxed_slice();
    read_at_or_zero(backing, index * SECTOR_BYTES, &mut sector)?;
    Ok(sector)
}

/// Fills `buf` from the file at `offset`; what lies past the file's end reads as zeros.
pub(crate) fn read_at_or_zero(file: &File, offset: u64, buf: &mut [u8]) -> io::Result<()> {
    let mut done = 0;
    while done < buf.len() {
        match file.read_at(&mut buf[done..], offset + done as u64) {
            Ok(0) => break,
            Ok(n) => done += n,
            Err(err) if err.kind() == io::ErrorKind::Interrupted => {}
            Err(err) => return Err(err),
        }
    }
    buf[done..].fill(0);
    Ok(())
}

/// Which of `sector_count` unflushed sectors, in address order, a torn power cut with `seed`
/// keeps: one coin flip each, the top bit of successive SplitMix64 outputs.
pub fn torn_keep(seed: u64, sector_count: usize) -> Vec<bool> {
    let mut state = seed;
    (0..sector_count)
        .map(|_| splitmix64(&mut state) >> 63 == 1)
        .collect()
}

/// SplitMix64 (Steele, Lea and Flood, 2014): a tiny seeded generator, good enough for coin
/// flips and the same on every platform.
fn splitmix64(state: &mut u64) -> u64 {
    *state = state.wrapping_add(0x9e37_79b9_7f4a_7c15);
    let mut z = *state;
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn backing(bytes: &[u8]) -> File {
        let path = std::env::temp_dir().join(format!(
            "nvrec-faultydisk-overlay-{}-{}",
            std::process::id(),
            rand_suffix()
        ));
        std::fs::write(&path, bytes).unwrap();
        let file = File::options().read(true).write(true).open(&path).unwrap();
        std::fs::remove_file(&path).unwrap();
        file
    }

    fn rand_suffix() -> u64 {
        use std::sync::atomic::{AtomicU64, Ordering};
        static NEXT: AtomicU64 = AtomicU64::new(0);
        NEXT.fetch_add(1, Ordering::Relaxed)
    }

    fn read(overlay: &Overlay, file: &File, offset: u64, len: usize) -> Vec<u8> {
        let mut buf = vec![0; len];
        read_at_or_zero(file, offset, &mut buf).unwrap();
        overlay.patch_read(offset, &mut buf);
        buf
    }

    #[test]
    fn reads_see_unflushed_writes_and_the_rest_of_their_sectors() {
        let file = backing(&[1u8; 16384]);
        let mut overlay = Overlay::new(1 << 20);
        overlay.write(&file, 4000, Fill::Bytes(&[2; 200])).unwrap();
        overlay.write(&file, 8192, Fill::Zeros(10)).unwrap();
        assert_eq!(overlay.bytes(), 3 * SECTOR_BYTES);
        let got = read(&overlay, &file, 0, 16384);
        let mut want = vec![1u8; 16384];
        want[4000..4200].fill(2);
        want[8192..8202].fill(0);
        assert_eq!(got, want);
        // Nothing reached the file.
        assert_eq!(read(&Overlay::new(0), &file, 0, 16384), vec![1u8; 16384]);
        overlay.commit(&file).unwrap();
        assert_eq!(overlay.bytes(), 0);
        assert_eq!(read(&Overlay::new(0), &file, 0, 16384), want);
    }

    #[test]
    fn a_power_cut_loses_everything_unflushed() {
        let file = backing(&[1u8; 8192]);
        let mut overlay = Overlay::new(1 << 20);
        overlay.write(&file, 0, Fill::Bytes(&[3; 8192])).unwrap();
        let report = overlay.cut(&file, None).unwrap();
        assert_eq!(report.sectors_dropped, 2);
        assert_eq!(read(&overlay, &file, 0, 8192), vec![1u8; 8192]);
    }

    #[test]
    fn a_torn_cut_keeps_the_seeded_subset() {
        let count = 32;
        let file = backing(&vec![0u8; count * 4096]);
        let mut overlay = Overlay::new(1 << 20);
        overlay
            .write(&file, 0, Fill::Bytes(&vec![9u8; count * 4096]))
            .unwrap();
        let report = overlay.cut(&file, Some(7)).unwrap();
        let keep = torn_keep(7, count);
        assert_eq!(
            report.sectors_kept,
            keep.iter().filter(|k| **k).count() as u64
        );
        assert!(report.sectors_kept > 0 && report.sectors_dropped > 0);
        let data = read(&overlay, &file, 0, count * 4096);
        for (index, keep) in keep.iter().enumerate() {
            let sector = &data[index * 4096..][..4096];
            assert!(sector.iter().all(|b| *b == if *keep { 9 } else { 0 }));
        }
    }

    #[test]
    fn a_write_past_the_limit_fails_whole() {
        let file = backing(&[0u8; 16384]);
        let mut overlay = Overlay::new(2 * SECTOR_BYTES);
        overlay.write(&file, 0, Fill::Bytes(&[1; 4096])).unwrap();
        let err = overlay.write(&file, 4096, Fill::Bytes(&[1; 8192]));
        assert!(matches!(
            err,
            Err(WriteError::Full(Full {
                unflushed_bytes: 4096,
                needed_bytes: 8192,
                max_bytes: 8192
            }))
        ));
        assert_eq!(overlay.bytes(), SECTOR_BYTES);
        // Rewriting a held sector needs no more room.
        overlay.write(&file, 0, Fill::Bytes(&[2; 4096])).unwrap();
    }

    #[test]
    fn torn_keep_is_a_fixed_function_of_the_seed() {
        assert_eq!(torn_keep(7, 64), torn_keep(7, 64));
        assert_ne!(torn_keep(7, 64), torn_keep(8, 64));
        let kept = torn_keep(1, 1000).iter().filter(|k| **k).count();
        assert!((400..600).contains(&kept), "{kept}");
    }
}
