//! `--delete-after-verify`: a recording's space on the drives given back once its archive
//! is verified in the store.
//!
//! A member cannot be cut short without breaking its set, so freeing means what the drives
//! themselves understand: the recording's data slots on every member are discarded
//! (BLKDISCARD on a block device, which lets an SSD reclaim them; a punched hole in a file,
//! which gives the filesystem its blocks back). First its entry is flagged reclaimed (format
//! 1.6, cause `freed`, its archive holding it), on every member, flushed, as retention
//! does before it reuses a recording's space: `ls` on the drives lists it as reclaimed with
//! when and why, `replay` or `verify` of it there is refused with that, and it is read from
//! the archive. A recording being read is kept, and freed by a later run.
//!
//! Only what is safe is freed: a recording that has ended, written linearly (a ring's slots
//! are reused by the recorder anyway), with no holes (what the drives could not give might
//! still be recovered there), whose every object the store holds as uploaded (size and
//! entity tag by HEAD, no read-back: the bytes were checked against the chunks' CRCs before
//! they left). Anything else is kept, saying why.

use nvrec::layout::{ReclaimCause, RecordingEntry, RecordingFlags, RecordingState};
use nvrec::recording::retention::{self, ReclaimPolicy, Refusal};
use nvrec::recording::volume::VolumeSet;

use crate::manifest::Manifest;
use crate::store::Archive;
use crate::{ArchiveError, Result};

/// What freeing one recording did.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Freed {
    /// Its slots were discarded: this many bytes of the drives.
    Freed { bytes: u64 },
    /// Kept on the drives, and why.
    Kept { why: String },
}

/// Checks that the store holds every object of `manifest` as it was uploaded: the
/// manifest itself, and each segment with its size and (where the store keeps one that
/// the upload saw) its entity tag.
pub fn verify_stored(archive: &Archive, manifest: &Manifest) -> Result<()> {
    let key = manifest.key();
    let stored = archive.get(&key)?;
    if Manifest::decode(&key, &stored)? != *manifest {
        return Err(ArchiveError::Checksum {
            key,
            why: "the manifest in the store is not the one written".into(),
        });
    }
    for segment in &manifest.segments {
        let meta = archive.head(&segment.key)?;
        let Some(meta) = meta else {
            return Err(ArchiveError::Checksum {
                key: segment.key.clone(),
                why: "missing from the store".into(),
            });
        };
        if meta.size != segment.size_bytes {
            return Err(ArchiveError::Checksum {
                key: segment.key.clone(),
                why: format!(
                    "the store holds {} bytes, the manifest says {}",
                    meta.size, segment.size_bytes
                ),
            });
        }
        if let (Some(uploaded), Some(stored)) = (&segment.e_tag, &meta.e_tag) {
            if uploaded != stored {
                return Err(ArchiveError::Checksum {
                    key: segment.key.clone(),
                    why: format!("entity tag {stored} in the store, {uploaded} when uploaded"),
                });
            }
        }
        if let Some(flows) = &segment.flows {
            let size = archive.head(&flows.key)?.map(|meta| meta.size);
            if size != Some(flows.size_bytes) {
                return Err(ArchiveError::Checksum {
                    key: flows.key.clone(),
                    why: match size {
                        None => "missing from the store".into(),
                        Some(size) => format!(
                            "the store holds {size} bytes, the manifest says {}",
                            flows.size_bytes
                        ),
                    },
                });
            }
        }
    }
    Ok(())
}

/// Discards recording `entry`'s data slots on every present member of `set` (opened for
/// writing), after `verify_stored` said its archive is whole.
pub fn free_recording(
    archive: &Archive,
    set: &VolumeSet,
    entry: &RecordingEntry,
    manifest: &Manifest,
) -> Result<Freed> {
    let kept = |why: &str| Ok(Freed::Kept { why: why.into() });
    if entry.flags.contains(RecordingFlags::RING) {
        return kept("a ring recording: the recorder reuses its slots anyway");
    }
    if entry.state == RecordingState::Open || set.live_recording()? == Some(entry.recording_id) {
        return kept("still being recorded");
    }
    if !manifest.holes.is_empty() {
        return kept("it has holes on the drives, which a repair may still recover there");
    }
    if manifest.recording_entry(&manifest.key())? != *entry {
        return kept("the drives' entry is not the archived one");
    }
    verify_stored(archive, manifest)?;
    // The entry says the data is gone before any of it is: flagged reclaimed (format 1.6),
    // on every member, flushed; never under a reader, who holds the recording's lock.
    let verified = Some(&ReclaimPolicy::Verified);
    match retention::reclaim(set, entry, ReclaimCause::Freed, verified, &[])? {
        Ok(_) => {}
        Err(Refusal::BeingRead) => return kept("it is being read"),
        Err(Refusal::Kept(why)) => return kept(&why.to_string()),
    }
    let mut freed_bytes = 0;
    for (index, span) in entry.members.iter().enumerate() {
        let Some(member) = set.members.get(index).and_then(|m| m.as_ref()) else {
            continue;
        };
        let layout = member.layout();
        if span.end_slot_index <= span.start_slot_index
            || span.end_slot_index > layout.data_slot_count
        {
            continue; // Nothing here, or a span the member does not have.
        }
        let (Some(offset), Some(last)) = (
            layout.data_slot_offset_bytes(span.start_slot_index),
            layout.data_slot_offset_bytes(span.end_slot_index - 1),
        ) else {
            continue;
        };
        let len = last + u64::from(layout.chunk_size_bytes) - offset;
        member
            .disk
            .discard(offset, len)
            .map_err(|source| ArchiveError::Io {
                what: format!(
                    "discarding recording {}'s {len} bytes at {offset} on {}",
                    entry.recording_id,
                    member.disk.path().display()
                ),
                source,
            })?;
        freed_bytes += len;
    }
    Ok(Freed::Freed { bytes: freed_bytes })
}
