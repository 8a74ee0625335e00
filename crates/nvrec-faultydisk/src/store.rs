//! The disk's data: a backing file, and, when unflushed writes are tracked, the overlay in
//! front of it.
//!
//! Writing through, every request goes straight to the backing file with `pread`/`pwrite`
//! from whichever thread serves it, and an fsync is an `fdatasync` of the backing file.
//! Tracking, every request takes the overlay's lock for its whole duration, so that a read
//! never sees a sector between the overlay and the file while a flush moves it; that
//! serializes I/O, which is fine for the small power-cut tests tracking is for.

use std::fs::File;
use std::io;
use std::os::fd::AsRawFd;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::{Mutex, MutexGuard};

use crate::overlay::{self, Fill, Overlay, PowerCut, WriteError};
use crate::{Error, Result};

/// What a write has to survive before it counts as written.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Durability {
    /// Writes go straight to the backing file; a power cut is refused. For benchmarks and
    /// big tests: nothing is held in memory.
    #[default]
    WriteThrough,
    /// Writes stay in memory until a flush (fsync) reaches the disk, so that a power cut can
    /// lose or tear them. A write that would hold more than `max_bytes` fails with EIO, and
    /// the failure is counted and printed.
    TrackUnflushed {
        /// The bound on unflushed data held, in bytes.
        max_bytes: u64,
    },
}

/// The default bound on unflushed data when tracking: 256 MiB.
pub const UNFLUSHED_MAX_BYTES_DEFAULT: u64 = 256 << 20;

/// Zeros written at a time where the backing file cannot punch holes.
const ZERO_CHUNK_BYTES: usize = 1 << 20;

#[derive(Debug)]
pub(crate) struct Store {
    backing: File,
    path: PathBuf,
    size_bytes: u64,
    overlay: Option<Mutex<Overlay>>,
}

impl Store {
    /// Opens the backing file, creating it sparse, and makes it at least `size_bytes` long.
    pub fn open(path: &Path, size_bytes: u64, durability: Durability) -> Result<Store> {
        let backing = File::options()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(path)
            .map_err(|e| Error::io("opening backing file", path, e))?;
        let len = backing
            .metadata()
            .map_err(|e| Error::io("reading the size of", path, e))?
            .len();
        if len < size_bytes {
            backing
                .set_len(size_bytes)
                .map_err(|e| Error::io("extending (sparse)", path, e))?;
        }
        let overlay = match durability {
            Durability::WriteThrough => None,
            Durability::TrackUnflushed { max_bytes } => Some(Mutex::new(Overlay::new(max_bytes))),
        };
        Ok(Store {
            backing,
            path: path.to_path_buf(),
            size_bytes,
            overlay,
        })
    }

    pub fn size_bytes(&self) -> u64 {
        self.size_bytes
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Fills `buf` with the disk's bytes at `offset`, unflushed writes included.
    pub fn read(&self, offset: u64, buf: &mut [u8]) -> io::Result<()> {
        match self.overlay() {
            None => overlay::read_at_or_zero(&self.backing, offset, buf),
            Some(overlay) => {
                overlay::read_at_or_zero(&self.backing, offset, buf)?;
                overlay.patch_read(offset, buf);
                Ok(())
            }
        }
    }

    /// Writes bytes or zeros at `offset`.
    pub fn write(&self, offset: u64, fill: Fill<'_>) -> Result<(), WriteError> {
        match (self.overlay(), fill) {
            (Some(mut overlay), fill) => overlay.write(&self.backing, offset, fill),
            (None, Fill::Bytes(bytes)) => self
                .backing
                .write_all_at(bytes, offset)
                .map_err(WriteError::Io),
            (None, Fill::Zeros(len)) => self.zero(offset, len).map_err(WriteError::Io),
        }
    }

    /// Makes every write so far durable: commits the overlay, syncs the backing file.
    pub fn sync(&self) -> io::Result<()> {
        match self.overlay() {
            None => self.backing.sync_data(),
            Some(mut overlay) => overlay.commit(&self.backing),
        }
    }

    /// Loses (or tears, with a seed) every write not yet flushed.
    pub fn power_cut(&self, seed: Option<u64>) -> Result<PowerCut> {
        let mut overlay = self.overlay().ok_or(Error::NotTracking)?;
        overlay
            .cut(&self.backing, seed)
            .map_err(|e| Error::io("writing torn sectors to", &self.path, e))
    }

    /// Bytes held unflushed (0 when writing through).
    pub fn unflushed_bytes(&self) -> u64 {
        self.overlay().map_or(0, |overlay| overlay.bytes())
    }

    fn overlay(&self) -> Option<MutexGuard<'_, Overlay>> {
        self.overlay
            .as_ref()
            .map(|mutex| mutex.lock().unwrap_or_else(|p| p.into_inner()))
    }

    /// Zeros a range of the backing file: a hole where the file system can punch one.
    fn zero(&self, offset: u64, len: u64) -> io::Result<()> {
        let mode = libc::FALLOC_FL_PUNCH_HOLE | libc::FALLOC_FL_KEEP_SIZE;
        // SAFETY: fallocate on a file descriptor this struct owns; the kernel checks the
        // range. Offsets and lengths beyond i64 are rejected by the conversions.
        let rc = unsafe {
            libc::fallocate(
                self.backing.as_raw_fd(),
                mode,
                i64::try_from(offset).map_err(|_| io::ErrorKind::InvalidInput)?,
                i64::try_from(len).map_err(|_| io::ErrorKind::InvalidInput)?,
            )
        };
        if rc == 0 {
            return Ok(());
        }
        let err = io::Error::last_os_error();
        if err.raw_os_error() != Some(libc::EOPNOTSUPP) {
            return Err(err);
        }
        let zeros = vec![0u8; ZERO_CHUNK_BYTES];
        let mut done = 0;
        while done < len {
            let n = (len - done).min(ZERO_CHUNK_BYTES as u64) as usize;
            self.backing.write_all_at(&zeros[..n], offset + done)?;
            done += n as u64;
        }
        Ok(())
    }
}
