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
    /// The run was aborted.
    pub aborted: bool,
}

impl ArchiveRun {
    pub fn class(&self) -> Class {
        // Holes, or a followed ring that ran ahead of its archive: what the archive was
        // there to keep is not all in it.
        let holes = self
            .recordings
            .iter()
            .any(|r| !r.holes.is_empty() || r.followed && !r.overwritten.is_empty());
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
    let freed = if request.delete_after_verify {
        free_archived(&archive, &set, &recordings)?
    } else {
        Vec::new()
    };
    Ok(ArchiveRun {
        set_uuid: set.set_uuid.to_string(),
        recordings,
        freed,
        aborted: control.state() == ControlState::Abort,
    })
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
