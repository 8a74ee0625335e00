//! The crate's one error type: what failed, on what, and the OS error where there is one.

use std::io;
use std::path::PathBuf;

/// Everything that can go wrong starting, controlling or stopping a faulty disk, or attaching
/// a loop device over it.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A system call on a file failed.
    #[error("{op} {path}: {source}")]
    Io {
        /// What was being done ("opening", "mounting FUSE at", ...).
        op: &'static str,
        /// On what.
        path: PathBuf,
        /// The OS error.
        #[source]
        source: io::Error,
    },
    /// The disk's size is not usable.
    #[error("disk size {size_bytes} bytes: {why}")]
    Size {
        /// The size asked for.
        size_bytes: u64,
        /// Why it cannot be used.
        why: &'static str,
    },
    /// A control line could not be parsed.
    #[error("control line '{line}': {reason}")]
    Command {
        /// The line, trimmed.
        line: String,
        /// What is wrong with it and what is expected.
        reason: String,
    },
    /// A power cut was asked of a disk that writes through.
    #[error(
        "power cut needs unflushed writes to be tracked (Durability::TrackUnflushed, --track-unflushed); this disk writes through"
    )]
    NotTracking,
    /// `losetup` failed or could not be run.
    #[error("losetup {args}: {why}")]
    Losetup {
        /// Its arguments.
        args: String,
        /// Its standard error, or why it could not run.
        why: String,
    },
}

impl Error {
    pub(crate) fn io(op: &'static str, path: impl Into<PathBuf>, source: io::Error) -> Error {
        Error::Io {
            op,
            path: path.into(),
            source,
        }
    }
}

/// The crate's result.
pub type Result<T, E = Error> = std::result::Result<T, E>;
