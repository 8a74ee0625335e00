//! Where written bytes come from.
//!
//! Pull model, like `std::io::Read`: the stream asks a [`Source`] for the bytes that belong at a
//! target offset, chunk by chunk and in address order. A source may return fewer bytes than
//! asked (call again for the rest); zero means the stream has ended. A signal that interrupts
//! a blocking read surfaces as `ErrorKind::Interrupted`, so the stream can look at its stop
//! and abort flags before asking again. Sources never allocate per call.

use crate::pattern::Pattern;
use std::fs::File;
use std::io::{self, Read};
use std::mem::ManuallyDrop;
use std::os::fd::FromRawFd;

/// What the user chose with `--source`.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum SourceSpec {
    Pattern { seed: u64 },
    Zero,
    Stdin,
    Path(std::path::PathBuf),
}

impl SourceSpec {
    pub fn describe(&self) -> String {
        match self {
            SourceSpec::Pattern { seed } => format!("pattern (seed {seed:#x})"),
            SourceSpec::Zero => "zero".to_string(),
            SourceSpec::Stdin => "stdin".to_string(),
            SourceSpec::Path(path) => path.display().to_string(),
        }
    }

    /// Whether the source can run out before the range is full.
    pub fn is_finite(&self) -> bool {
        matches!(self, SourceSpec::Stdin | SourceSpec::Path(_))
    }
}

pub trait Source {
    /// Puts the bytes that belong at `offset_bytes` into `buf`; returns how many (0 = ended).
    fn read_at(&mut self, offset_bytes: u64, buf: &mut [u8]) -> io::Result<usize>;
    /// Whether every read gives the same bytes whatever the offset, and never ends (zeros):
    /// a buffer it filled once holds what it would fill again, so callers may skip the
    /// refill, as fio reuses its buffers.
    fn is_constant(&self) -> bool {
        false
    }
    /// Whether a read may wait for someone else (a pipe, a file being written): a caller
    /// must hand over what it has queued before reading. Generators never wait.
    fn may_block(&self) -> bool {
        true
    }
}

/// The seekable test pattern.
pub struct PatternSource(pub Pattern);

impl Source for PatternSource {
    fn read_at(&mut self, offset_bytes: u64, buf: &mut [u8]) -> io::Result<usize> {
        self.0.fill(offset_bytes, buf);
        Ok(buf.len())
    }

    fn may_block(&self) -> bool {
        false
    }
}

/// Zeros, for clearing a range.
pub struct ZeroSource;

impl Source for ZeroSource {
    fn read_at(&mut self, _offset_bytes: u64, buf: &mut [u8]) -> io::Result<usize> {
        buf.fill(0);
        Ok(buf.len())
    }

    fn may_block(&self) -> bool {
        false
    }

    fn is_constant(&self) -> bool {
        true
    }
}

/// A byte stream: standard input or a file, read in order (the offset is not used).
pub struct StreamSource {
    file: ManuallyDrop<File>,
    owned: bool,
}

impl StreamSource {
    /// Standard input, read directly (no intermediate buffer) and left open afterwards.
    pub fn stdin() -> StreamSource {
        // SAFETY: descriptor 0 stays open for the life of the process; ManuallyDrop keeps us
        // from closing it.
        StreamSource {
            file: ManuallyDrop::new(unsafe { File::from_raw_fd(0) }),
            owned: false,
        }
    }

    pub fn file(file: File) -> StreamSource {
        StreamSource {
            file: ManuallyDrop::new(file),
            owned: true,
        }
    }
}

impl Drop for StreamSource {
    fn drop(&mut self) {
        if self.owned {
            // SAFETY: dropped exactly once, here; we own this descriptor.
            unsafe { ManuallyDrop::drop(&mut self.file) };
        }
    }
}

impl Source for StreamSource {
    fn read_at(&mut self, _offset_bytes: u64, buf: &mut [u8]) -> io::Result<usize> {
        self.file.read(buf)
    }
}

/// Opens the source a spec names.
pub fn open_source(spec: &SourceSpec) -> io::Result<Box<dyn Source>> {
    Ok(match spec {
        SourceSpec::Pattern { seed } => Box::new(PatternSource(Pattern::new(*seed))),
        SourceSpec::Zero => Box::new(ZeroSource),
        SourceSpec::Stdin => Box::new(StreamSource::stdin()),
        SourceSpec::Path(path) => {
            Box::new(StreamSource::file(File::open(path).map_err(|error| {
                io::Error::new(
                    error.kind(),
                    format!("opening source {}: {error}", path.display()),
                )
            })?))
        }
    })
}
