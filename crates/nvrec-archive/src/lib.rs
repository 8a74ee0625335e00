//! Recordings in object storage: archive, catalog, and read in place.
//!
//! A recording leaves its volume set as a few large, immutable *segment* objects and one
//! JSON *manifest* (see `docs/ARCHIVE.md`). A segment is the recording's chunks back to back,
//! each framed exactly as on the drives (header and payload, without the slot padding), so
//! an object is self-describing and every chunk keeps its own CRC32C. The manifest says
//! which segments hold which sequences and times, and carries each segment's CRC32C,
//! computed from the chunks' CRCs before upload, so that an upload is checked against the
//! recording without reading it back.
//!
//! - [`store`]: where objects go: `file://DIR` (a directory) and `s3://BUCKET/PREFIX` (the
//!   S3 API, any compatible server), or an in-memory store for tests; one code path.
//! - [`counted`]: every request to the store counted (what a read costs on S3).
//! - [`dir`]: the directory store: PUTs written with O_DIRECT and synced before they count.
//! - [`manifest`]: the manifest and the object keys.
//! - [`segment`]: chunks into segments (and back), with their checksums.
//! - [`flows`]: each segment's flows (a recording of packets) as Parquet beside it, for
//!   DuckDB, Spark or Trino, and for `find` over an archive.
//! - [`state`]: the local SQLite file that makes an archive run resumable.
//! - [`upload`]: `nvrec archive`: a volume set's recordings into the store, paced by `pace`
//!   (`--max-rate`, and pauses while a recorder on the same set needs the drives).
//! - `pack`: the reading side of `upload`: chunks into segments, with what was found
//!   between them (gaps, holes, and the stream ranges a ring overwrote before they were read).
//! - [`read`]: replay, verify and export straight from the store, through ranged GETs.
//! - [`catalog`]: an SQLite catalog of archived recordings, rebuildable from the manifests.
//! - [`free`]: `--delete-after-verify`: a recording's slots discarded once its archive is
//!   verified in the store.
//!
//! The archive is a sink of the read pipeline: it takes chunks from
//! [`nvrec::recording::reader`] in sequence order, as `replay` does, and gives them back in
//! the same shape ([`nvrec::recording::reader::Item`]), so that `replay`, `verify` and
//! `export` read an archive with the code they read drives with.
//!
//! What it deliberately does not do: delete anything in the store (remote retention is left
//! to the bucket's lifecycle rules), or write to the drives, but for the discard that
//! `--delete-after-verify` asks for ([`free`]).

pub mod catalog;
pub mod counted;
pub mod dir;
pub mod flows;
pub mod free;
pub mod manifest;
mod pace;
mod pack;
pub mod read;
pub mod segment;
pub mod state;
pub mod store;
pub mod upload;

pub use manifest::Manifest;
pub use store::{Archive, ArchiveUrl};

/// What can go wrong between a recording and its archive.
#[derive(Debug, thiserror::Error)]
pub enum ArchiveError {
    /// A URL or option that cannot be used: nothing was read or written.
    #[error("{0}")]
    Usage(String),
    #[error("object store {url}: {operation} {key}: {source}")]
    Store {
        url: String,
        operation: &'static str,
        key: String,
        source: Box<object_store::Error>,
    },
    #[error("archive state {path}: {source}")]
    State {
        path: String,
        source: rusqlite::Error,
    },
    /// The catalog's database (an SQLite file, or a PostgreSQL server) failed.
    #[error("catalog {location}: {source}")]
    Catalog {
        location: String,
        source: Box<dyn std::error::Error + Send + Sync>,
    },
    #[error("manifest {key}: {why}")]
    Manifest { key: String, why: String },
    /// The bytes given to the store are not the recorded chunks, or the store did not
    /// take them as given: nothing is marked archived.
    #[error("{key}: checksum mismatch: {why}")]
    Checksum { key: String, why: String },
    #[error(transparent)]
    Recording(#[from] nvrec::recording::RecordingError),
    #[error("{what}: {source}")]
    Io {
        what: String,
        source: std::io::Error,
    },
}

impl ArchiveError {
    /// Whether the error is a mistake in what was asked (exit status 2).
    pub fn is_usage(&self) -> bool {
        match self {
            ArchiveError::Usage(_) => true,
            ArchiveError::Recording(error) => error.is_usage(),
            _ => false,
        }
    }
}

pub type Result<T, E = ArchiveError> = std::result::Result<T, E>;
