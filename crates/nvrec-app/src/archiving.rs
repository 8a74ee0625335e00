//! `archive`: a volume set's finished recordings (or a running one, followed) copied into
//! object storage as segments and a manifest each, resumably, each added to the catalog;
//! with `delete_after_verify`, a recording's space on the drives given back once its
//! archive is verified in the store. The copying itself is `nvrec_archive::upload`'s.

use crate::outcome::{Class, UsageError};
use anyhow::{Context, Result};
use nvrec::control::{Control, ControlState, Progress};
use nvrec::device::{Access, Safety};
use nvrec::recording::{reader, volume};
use nvrec::unit::format_bytes;
use nvrec_archive::catalog::{Catalog, CatalogLocation};
use nvrec_archive::free::{self, Freed};
use nvrec_archive::state::State;
use nvrec_archive::store::Mode;
use nvrec_archive::upload::{self, ArchiveOptions, Outcome, RecordingReport};
use nvrec_archive::{Archive, ArchiveUrl, Manifest};
use std::path::PathBuf;
use std::sync::Arc;

/// What an archive run is asked to do.
pub struct ArchiveRequest {
    /// The members of the volume set.
    pub targets: Vec<PathBuf>,
    pub url: ArchiveUrl,
    pub options: ArchiveOptions,
    /// The resume state (SQLite).
    pub state_path: PathBuf,
    pub catalog: CatalogLocation,
    pub delete_after_verify: bool,
}

impl ArchiveRequest {
    /// Everything about the request that can be checked before the drives or the store
    /// are touched.
    pub fn check(&self) -> Result<(), UsageError> {
        if self.url == ArchiveUrl::Memory {
            return Err(UsageError(format!(
                "--to {}: an archive in memory is gone when nvrec ends; give file://DIR or s3://BUCKET/PREFIX",
                self.url
            )));
        }
        if let upload::Live::Follow { poll } = self.options.live {
            if poll.is_zero() {
                return Err(UsageError("--poll must be longer than 0".into()));
            }
        }
        check_options(&self.options)
    }
}

fn check_options(options: &ArchiveOptions) -> Result<(), UsageError> {
    nvrec_archive::manifest::check_node(&options.node).map_err(|e| UsageError(e.to_string()))?;
    if options.part_size_bytes < 5 << 20 {
        return Err(UsageError(format!(
            "--part-size {}: S3 takes parts of 5 MiB and more",
            format_bytes(options.part_size_bytes)
        )));
    }
    if options.segment_size_bytes < options.part_size_bytes {
        return Err(UsageError(format!(
            "--segment-size {} is smaller than --part-size {}",
            format_bytes(options.segment_size_bytes),
            format_bytes(options.part_size_bytes)
        )));
    }
    if options.parts_in_flight == 0 {
        return Err(UsageError("--parts-in-flight must be 1 or more".into()));
    }
    if options
        .max_rate_bytes_per_s
        .is_some_and(|rate| !(rate.is_finite() && rate > 0.0))
    {
        return Err(UsageError("--max-rate must be above 0".into()));
    }
    Ok(())
}

/// How an archive run went.
pub struct ArchiveRun {
    pub set_uuid: String,
    pub recordings: Vec<RecordingReport>,
    /// With `delete_after_verify`: what became of each archived recording's space.
    pub freed: Vec<(u32, Freed)>,
    /// With `delete_after_verify`: the marks of the archived recordings (format 1.7),
    /// released where the archive holds their window whole.
    pub marks: Vec<MarkArchived>,
    /// The run was aborted.
    pub aborted: bool,
}

impl ArchiveRun {
    pub fn class(&self) -> Class {
        // Holes, a followed ring that ran ahead of its archive, or a recording whose
        // archive the drives' entry no longer goes on from: what the archive was there to
        // keep is not all in it.
        let holes = self.recordings.iter().any(|r| {
            !r.holes.is_empty()
                || r.followed && !r.overwritten.is_empty()
                || r.outcome == Outcome::Kept
        });
        match (self.aborted, holes) {
            (true, _) => Class::Aborted,
            (false, true) => Class::Failed,
            (false, false) => Class::Done,
        }
    }

    /// What became of `recording_id`'s space on the drives, if it was to be freed.
    pub fn freed(&self, recording_id: u32) -> Option<&Freed> {
        self.freed
            .iter()
            .find(|(id, _)| *id == recording_id)
            .map(|(_, freed)| freed)
    }
}

/// Archives the set `request` names, checked first ([`ArchiveRequest::check`]).
pub fn archive(
    request: &ArchiveRequest,
    control: &Control,
    progress: &Progress,
) -> Result<ArchiveRun> {
    request.check()?;
    // Freeing writes the members (a discard): opened for writing, which a running
    // recording refuses.
    let access = if request.delete_after_verify {
        Access::Write
    } else {
        Access::Read
    };
    let set = volume::open(&request.targets, access, Safety::Check)?;
    let archive = Archive::open(&request.url, Mode::Write)?;
    let state = State::open(&request.state_path)?;
    let catalog = Catalog::open(&request.catalog)?;
    let recordings = upload::archive_set(
        &archive,
        &set,
        &state,
        Some(&catalog),
        &request.options,
        control,
        progress,
    )
    .with_context(|| format!("archiving to {}", request.url))?;
    let (freed, marks) = if request.delete_after_verify {
        (
            free_archived(&archive, &set, &recordings)?,
            release_archived_marks(&archive, &set, &recordings)?,
        )
    } else {
        (Vec::new(), Vec::new())
    };
    Ok(ArchiveRun {
        set_uuid: set.set_uuid.to_string(),
        recordings,
        freed,
        marks,
        aborted: control.state() == ControlState::Abort,
    })
}

/// A mark of an archived recording: released, its archive holding its window, or kept and
/// why.
#[derive(Debug, Clone, serde::Serialize)]
pub struct MarkArchived {
    pub mark_id: u32,
    pub recording_id: u32,
    #[serde(serialize_with = "nvrec::serialize_message")]
    pub kept_because: Option<MarkKept>,
}

/// Why a mark of an archived recording was kept on the drives.
#[derive(Debug, Clone, thiserror::Error)]
pub enum MarkKept {
    #[error("its archive does not verify: {0}")]
    ArchiveUnverified(Arc<nvrec_archive::ArchiveError>),
    #[error("its window is not in the archive (archive the ring with --follow while it records)")]
    WindowNotArchived,
    #[error("part of its window is missing from the archive")]
    PartMissing,
    #[error("it is being read")]
    BeingRead,
    #[error(transparent)]
    NotReleased(Arc<nvrec::recording::RecordingError>),
}

/// With `delete_after_verify`: releases the marks of each archived recording whose window
/// the archive holds whole (every chunk of it in segments verified in the store, no range of
/// it overwritten before it was archived): the ring may write over them, and `ls` says they
/// were released held by the archive. A mark the archive lacks stays kept, with why.
fn release_archived_marks(
    archive: &Archive,
    set: &volume::VolumeSet,
    reports: &[RecordingReport],
) -> Result<Vec<MarkArchived>> {
    let mut released = Vec::new();
    for report in reports {
        if !matches!(report.outcome, Outcome::Archived | Outcome::AlreadyArchived) {
            continue;
        }
        let marks = nvrec::recording::marks::marks_of(set, report.recording_id)?;
        if marks.iter().all(|mark| mark.reclaimed.is_some()) {
            continue;
        }
        let manifest = Manifest::decode(&report.manifest_key, &archive.get(&report.manifest_key)?)?;
        let stored = free::verify_stored(archive, &manifest).map_err(Arc::new);
        for mark in marks.iter().filter(|mark| mark.reclaimed.is_none()) {
            let outcome = match (&stored, lacks(&manifest, mark)) {
                (Err(error), _) => Err(MarkKept::ArchiveUnverified(Arc::clone(error))),
                (Ok(()), Some(why)) => Err(why),
                (Ok(()), None) => release_held(set, mark),
            };
            released.push(MarkArchived {
                mark_id: mark.recording_id,
                recording_id: report.recording_id,
                kept_because: outcome.err(),
            });
        }
    }
    Ok(released)
}

/// Why the archive of `manifest` does not hold all of `mark`'s window, if it does not.
fn lacks(manifest: &Manifest, mark: &nvrec::layout::RecordingEntry) -> Option<MarkKept> {
    let (first, end) = (
        mark.first_sequence,
        mark.end_sequence.min(manifest.end_sequence),
    );
    if end <= first {
        return None;
    }
    let archived_first = manifest.segments.first().map(|s| s.first_sequence);
    let archived_last = manifest.segments.last().map(|s| s.last_sequence);
    if archived_first.is_none_or(|f| f > first) || archived_last.is_none_or(|l| l + 1 < end) {
        return Some(MarkKept::WindowNotArchived);
    }
    let overwritten = manifest.overwritten().any(|loss| {
        let lost_from = loss.first_sequence_lost.unwrap_or(loss.sequence);
        lost_from < end && loss.sequence > first
    });
    if overwritten || !manifest.holes.is_empty() {
        return Some(MarkKept::PartMissing);
    }
    None
}

/// Releases `mark`, its archive holding it (`RECLAIMED`, cause released, flag archived).
fn release_held(
    set: &volume::VolumeSet,
    mark: &nvrec::layout::RecordingEntry,
) -> Result<(), MarkKept> {
    use nvrec::recording::retention::{reclaim, ReclaimPolicy};
    match reclaim(
        set,
        mark,
        nvrec::layout::ReclaimCause::Released,
        Some(&ReclaimPolicy::Verified),
        &[],
    ) {
        Ok(Ok(_)) => Ok(()),
        Ok(Err(_)) => Err(MarkKept::BeingRead),
        Err(error) => Err(MarkKept::NotReleased(Arc::new(error))),
    }
}

/// Gives back the drives' space of every recording now whole in the archive.
fn free_archived(
    archive: &Archive,
    set: &volume::VolumeSet,
    reports: &[RecordingReport],
) -> Result<Vec<(u32, Freed)>> {
    let entries = reader::recordings(set)?;
    let mut freed = Vec::new();
    for report in reports {
        if !matches!(report.outcome, Outcome::Archived | Outcome::AlreadyArchived) {
            continue;
        }
        let Some(entry) = entries
            .iter()
            .find(|e| e.recording_id == report.recording_id)
        else {
            continue;
        };
        let manifest = Manifest::decode(&report.manifest_key, &archive.get(&report.manifest_key)?)?;
        let outcome = free::free_recording(archive, set, entry, &manifest).with_context(|| {
            format!(
                "freeing recording {} after its archive",
                report.recording_id
            )
        })?;
        freed.push((report.recording_id, outcome));
    }
    Ok(freed)
}
