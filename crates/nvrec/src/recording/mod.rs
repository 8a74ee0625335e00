//! Recordings: striped, self-describing, crash-safe streams on a volume set.
//!
//! A recording is a stream cut into chunks; each chunk is framed with a header
//! ([`crate::layout::ChunkHeader`]: set, recording, global sequence number, timestamp,
//! stream offset, CRC32C) and written to one member of the volume set. Members are written
//! strictly sequentially; *which* member a chunk goes to is decided when it is submitted:
//! the member with room in its queue ([`Stripe::Adaptive`]), or the next in turn
//! ([`Stripe::RoundRobin`], classic RAID0). A checkpoint every sync interval makes
//! everything before it durable and bounds the search after a crash.
//!
//! - [`disk`]: a member's device: an open target, or a simulated disk with faults.
//! - [`volume`]: formatting and opening volume sets, metadata I/O.
//! - [`writer`]: the `record` command's engine room.
//! - [`failure`]: why a recording failed, typed from the writer to the report.
//! - [`counters`]: a running recording's live counters, for a monitor on another thread.
//! - [`reader`]: reading chunks back in sequence order: `replay`, `verify`, and recovery.
//! - [`health`]: every metadata copy judged against the best one; what is lost.
//! - [`scan`]: recordings found from their chunks alone, and the chunks past an entry's end
//!   that it does not account for.
//! - [`retention`]: reclaiming the space of a set's oldest recordings, and the lock that
//!   keeps a recording being read from being reclaimed.
//! - [`repair`]: damaged metadata rewritten from good copies, lost entries rebuilt, short
//!   entries extended.
//! - [`fuzzing`]: reading a damaged set never panics or runs away, as a property the fuzz
//!   target and the tests share.
//!
//! The format is specified in `docs/FORMAT.md`; this module follows its writing and
//! reading rules.

pub mod counters;
pub mod disk;
mod durability;
pub mod failure;
pub mod fuzzing;
pub mod health;
pub mod load;
pub mod marks;
pub mod reader;
pub mod repair;
pub mod retention;
pub mod scan;
pub mod seek;
pub mod volume;
pub mod writer;

use crate::device::DeviceError;
use crate::layout::LayoutError;
pub use failure::{MemberFault, RecordingFailure};

/// Slots per member that recovery may search past the last checkpoint. The writer
/// checkpoints before any member gets further than half of this from its last checkpoint.
pub const RECOVERY_WINDOW_SLOTS: u32 = 1 << 16;

/// How chunks are spread over the members.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Stripe {
    /// Each I/O goes to the member expected to finish it soonest (its queue over the rate it
    /// has been writing at): fast members take more, a slow one never holds work back.
    Adaptive,
    /// Members in turn, waiting for the next one if it is busy (RAID0).
    RoundRobin,
}

/// What happens when the members are full.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Fill {
    /// Stop cleanly when full.
    Linear,
    /// Wrap to the start and overwrite the oldest chunks; with `trim`, discard ahead of
    /// the write point.
    Ring { trim: bool },
}

/// What a member failure (a write error, a full target, no completion within the member
/// timeout) does to a recording.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum MemberFailure {
    /// Retire the member, send its unfinished writes to another, and go on (degraded).
    Retire,
    /// Stop the recording with an error.
    Stop,
}

/// How long a member's oldest write may stay in flight before the member counts as failed.
pub const MEMBER_TIMEOUT_DEFAULT: std::time::Duration = std::time::Duration::from_secs(5);

#[derive(Debug, thiserror::Error)]
pub enum RecordingError {
    #[error(transparent)]
    Device(#[from] DeviceError),
    #[error("on-disk format: {0}")]
    Layout(#[from] LayoutError),
    #[error("{what}: {source}")]
    Io {
        what: String,
        source: std::io::Error,
    },
    /// A member's flush (fdatasync) failed: what it completed since its last good flush
    /// is in doubt.
    #[error("flushing {}: {source}", .path.display())]
    Flush {
        path: std::path::PathBuf,
        source: std::io::Error,
    },
    #[error(transparent)]
    Engine(#[from] crate::engine::EngineError),
    #[error(transparent)]
    Buffer(#[from] crate::buffer::BufferError),
    #[error("{0}")]
    Usage(String),
    /// The recording failed (before its first chunk, where nothing was recorded).
    #[error(transparent)]
    Failed(#[from] RecordingFailure),
    #[error("not an nvrec volume set: {0}")]
    NotAVolumeSet(String),
    #[error("volume set {set_uuid} is incomplete: {} of {member_count} members missing{}{}", missing.len(),
        if missing.is_empty() { String::new() } else { format!(" (member {})", missing.iter().map(|m| m.to_string()).collect::<Vec<_>>().join(", ")) },
        if problems.is_empty() { String::new() } else { format!("; {}", problems.join("; ")) })]
    IncompleteSet {
        set_uuid: String,
        missing: Vec<u16>,
        member_count: usize,
        problems: Vec<String>,
    },
    #[error("{} holds nvrec volume set {set_uuid} (\"{label}\", member {member} of {member_count}) with {}; \
             --append adds a recording to it, --overwrite formats it anew and loses them",
        .path.display(), describe_recordings(recordings))]
    HoldsSet {
        path: std::path::PathBuf,
        set_uuid: String,
        label: String,
        member: u16,
        member_count: u16,
        /// (id, name, stream bytes) of each recording the set holds.
        recordings: Vec<(u32, String, u64)>,
    },
    #[error("recording {0} is not on this volume set")]
    NoSuchRecording(u32),
    /// `repair` found a metadata copy it cannot read: one that may be the newest, which
    /// it would otherwise overwrite with what older copies say.
    #[error("member {member_index} ({}): {place} at {offset_bytes:#x} cannot be read ({error}); \
             repair writes nothing it did not read first, since that copy may be the newest. \
             Leave member {member_index} out to repair the rest without it",
        .path.display())]
    MetadataUnreadable {
        member_index: u16,
        path: std::path::PathBuf,
        place: String,
        offset_bytes: u64,
        error: String,
    },
    #[error("mark {0} is not on this volume set")]
    NoSuchMark(u32),
    /// The set holds chunks of a recording that no entry names (its entry write was lost):
    /// a recording added now would begin where they lie and write over them.
    #[error(
        "the volume set holds {chunk_count} chunks of recording {recording_id} that no entry \
         names (an entry write was lost); a recording added now would write over them: run \
         nvrec repair first, which restores its entry"
    )]
    Unnamed { recording_id: u32, chunk_count: u64 },
    /// A recording added to a set whose marks keep slots (format 1.7) would write over
    /// one or take its entry's table slot: what, and how to give the mark back.
    #[error("{0}")]
    KeptMark(String),
    /// The mark was released (format 1.7): its slots may hold newer chunks now.
    #[error(
        "mark {mark_id} was released at {when}: its recording's ring may have written over it"
    )]
    MarkReleased { mark_id: u32, when: String },
    #[error("the volume set holds no recording")]
    NoRecordings,
    /// The recording's space was reused by newer ones (format 1.6).
    #[error("recording {recording_id} was reclaimed ({cause}{archived}) at {when}: its space holds newer recordings now")]
    Reclaimed {
        recording_id: u32,
        cause: &'static str,
        archived: &'static str,
        when: String,
    },
}

fn describe_recordings(recordings: &[(u32, String, u64)]) -> String {
    if recordings.is_empty() {
        return "no recording".into();
    }
    let each: Vec<String> = recordings
        .iter()
        .map(|(id, name, bytes)| {
            let name = if name.is_empty() {
                String::new()
            } else {
                format!(" \"{name}\"")
            };
            format!("{id}{name}: {}", crate::unit::format_bytes(*bytes))
        })
        .collect();
    format!("{} recording(s) ({})", recordings.len(), each.join(", "))
}

impl RecordingError {
    /// Whether the error is a refusal to destroy what a target holds (exit status 3).
    pub fn is_refusal(&self) -> bool {
        matches!(
            self,
            RecordingError::HoldsSet { .. }
                | RecordingError::MetadataUnreadable { .. }
                | RecordingError::Unnamed { .. }
                | RecordingError::KeptMark(_)
        )
    }

    /// Whether the error is the user's to fix in the arguments (exit status 2).
    pub fn is_usage(&self) -> bool {
        matches!(
            self,
            RecordingError::Usage(_)
                | RecordingError::NoSuchRecording(_)
                | RecordingError::Reclaimed { .. }
                | RecordingError::NoSuchMark(_)
                | RecordingError::MarkReleased { .. }
        )
    }
}
