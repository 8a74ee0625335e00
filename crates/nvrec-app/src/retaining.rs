//! Retention's questions to an archive: `record --append --reclaim archived=URL` reclaims
//! a recording only once the archive at URL holds it whole. The library asks through
//! [`ArchiveCheck`]; this answers from the archive's manifests and objects.

use nvrec::layout::RecordingEntry;
use nvrec::recording::retention::{ArchiveCheck, ArchiveUnanswered, ReclaimPolicy, Retention};
use nvrec_archive::read;
use nvrec_archive::store::Mode;
use nvrec_archive::{Archive, ArchiveUrl};
use std::sync::Arc;
use std::time::Duration;

/// What a recording may reclaim, as asked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ReclaimRequest {
    /// The set's oldest recordings, whatever they are.
    Oldest,
    /// The oldest, once the archive at this URL holds them whole.
    Archived { url: String },
}

/// The library's retention for a request: the reclaim policy (opening the archive it
/// names) and the age limit.
pub fn retention_of(
    reclaim: Option<&ReclaimRequest>,
    keep: Option<Duration>,
) -> anyhow::Result<Retention> {
    let reclaim = match reclaim {
        None => None,
        Some(ReclaimRequest::Oldest) => Some(ReclaimPolicy::Oldest),
        Some(ReclaimRequest::Archived { url }) => {
            let archive = Archive::open(&ArchiveUrl::parse(url)?, Mode::Read)?;
            Some(ReclaimPolicy::Archived(Arc::new(ArchiveHolds { archive })))
        }
    };
    Ok(Retention { reclaim, keep })
}

/// An archive asked whether it holds a recording whole.
struct ArchiveHolds {
    archive: Archive,
}

impl ArchiveCheck for ArchiveHolds {
    /// Whole: a manifest of this very recording (set, id, sequences and stream length as the
    /// entry states them) that names no hole and no loss the drives did not have, and every
    /// segment it lists in the store at its size.
    fn holds(&self, entry: &RecordingEntry) -> Result<bool, ArchiveUnanswered> {
        let (found, _) = read::recordings(&self.archive)?;
        let set_uuid = entry.set_uuid.to_string();
        let Some(archived) = found.iter().find(|r| {
            r.manifest.set_uuid == set_uuid && r.manifest.recording_id == entry.recording_id
        }) else {
            return Ok(false);
        };
        let manifest = &archived.manifest;
        let same = manifest.first_sequence == entry.first_sequence
            && manifest.end_sequence == entry.end_sequence
            && manifest.stream_len_bytes == entry.stream_len_bytes
            && manifest.lost_bytes == entry.lost_bytes
            && manifest.holes.is_empty()
            && manifest.payload_bytes == entry.stream_len_bytes - entry.lost_bytes;
        if !same {
            return Ok(false);
        }
        for segment in &manifest.segments {
            let present = self
                .archive
                .head(&segment.key)?
                .is_some_and(|meta| meta.size == segment.size_bytes);
            if !present {
                return Ok(false);
            }
        }
        Ok(true)
    }
}
