//! Where a reader's chunks come from: a volume set's members, or an archive in object
//! storage. `ls`, `replay`, `verify` and `export` read both through [`ChunkSource`], with
//! the same items ([`Item`]) in the same order.

use crate::outcome::UsageError;
use anyhow::Result;
use nvrec::control::{Control, Progress};
use nvrec::device::{Access, Safety};
use nvrec::engine::EngineChoice;
use nvrec::layout::RecordingEntry;
use nvrec::recording::reader::{self, Item, ReadSummary};
use nvrec::recording::volume::{self, VolumeSet};
use nvrec_archive::read::ArchivedRecording;
use nvrec_archive::store::Mode;
use nvrec_archive::{Archive, ArchiveUrl};
use std::path::PathBuf;

/// The archive URL among `targets`, if they name one: exactly one URL, and nothing else.
pub fn url_of(targets: &[PathBuf]) -> Result<Option<ArchiveUrl>, UsageError> {
    let urls: Vec<&str> = targets
        .iter()
        .filter_map(|t| t.to_str())
        .filter(|t| ArchiveUrl::looks_like_url(t))
        .collect();
    match (urls.as_slice(), targets.len()) {
        ([], _) => Ok(None),
        ([url], 1) => ArchiveUrl::parse(url)
            .map(Some)
            .map_err(|error| UsageError(error.to_string())),
        _ => Err(UsageError(
            "an archive URL comes alone: read one archive, or the members of one volume set".into(),
        )),
    }
}

/// Where a reader's chunks come from: a volume set's members, or an archive.
pub enum ChunkSource {
    Set(VolumeSet),
    Archive {
        archive: Archive,
        recordings: Vec<ArchivedRecording>,
        /// Manifests that could not be read, each "KEY: why": what they describe is not
        /// among `recordings`, so whoever checks the archive must count them as bad.
        unreadable: Vec<String>,
    },
}

impl ChunkSource {
    /// Opens `targets`: an archive URL, or the members of a volume set.
    pub fn open(targets: &[PathBuf]) -> Result<ChunkSource> {
        match url_of(targets)? {
            Some(url) => {
                let archive = Archive::open(&url, Mode::Read)?;
                let (recordings, unreadable) = nvrec_archive::read::recordings(&archive)?;
                Ok(ChunkSource::Archive {
                    archive,
                    recordings,
                    unreadable: unreadable
                        .iter()
                        .map(|bad| format!("{}: {}", bad.key, bad.error))
                        .collect(),
                })
            }
            None => Ok(ChunkSource::Set(volume::open(
                targets,
                Access::Read,
                Safety::Check,
            )?)),
        }
    }

    /// Manifests of an archive that could not be read, each "KEY: why" (none for a volume
    /// set): the front end says so, and a check counts them as bad.
    pub fn unreadable(&self) -> &[String] {
        match self {
            ChunkSource::Set(_) => &[],
            ChunkSource::Archive { unreadable, .. } => unreadable,
        }
    }

    /// Checks, for an archive, that the store holds every object of each of `entries` as
    /// it was uploaded, by HEAD requests (see [`nvrec_archive::free::verify_stored`]):
    /// `None` for a volume set, else per entry what is wrong, if anything.
    pub fn check_stored(
        &self,
        entries: &[RecordingEntry],
    ) -> Option<Vec<Option<std::sync::Arc<nvrec_archive::ArchiveError>>>> {
        let ChunkSource::Archive {
            archive,
            recordings,
            ..
        } = self
        else {
            return None;
        };
        Some(
            entries
                .iter()
                .map(|entry| {
                    let recording = archived(recordings, entry);
                    nvrec_archive::free::verify_stored(archive, &recording.manifest)
                        .err()
                        .map(std::sync::Arc::new)
                })
                .collect(),
        )
    }

    /// The requests made to an archive's store so far (none for drives).
    pub fn archive_requests(&self) -> Option<u64> {
        match self {
            ChunkSource::Set(_) => None,
            ChunkSource::Archive { archive, .. } => Some(archive.requests()),
        }
    }

    /// The archive's URL, for an archive.
    pub fn archive_url(&self) -> Option<String> {
        match self {
            ChunkSource::Set(_) => None,
            ChunkSource::Archive { archive, .. } => Some(archive.url().to_string()),
        }
    }

    pub fn set(&self) -> Option<&VolumeSet> {
        match self {
            ChunkSource::Set(set) => Some(set),
            ChunkSource::Archive { .. } => None,
        }
    }

    /// The recordings, as readers see them.
    pub fn recordings(&self) -> Result<Vec<RecordingEntry>> {
        match self {
            ChunkSource::Set(set) => Ok(nvrec::recording::reader::listed(set)?),
            ChunkSource::Archive { recordings, .. } => {
                Ok(recordings.iter().map(|r| r.entry.clone()).collect())
            }
        }
    }

    /// Recording `id` (default: the last). In an archive of several volume sets, an id
    /// that more than one holds must be told apart (its manifest key) and is refused.
    pub fn select(&self, id: Option<u32>) -> Result<RecordingEntry> {
        let entries = self.recordings()?;
        if let (ChunkSource::Archive { recordings, .. }, Some(id)) = (self, id) {
            let matching: Vec<&ArchivedRecording> = recordings
                .iter()
                .filter(|r| r.entry.recording_id == id)
                .collect();
            if matching.len() > 1 {
                return Err(UsageError(format!(
                    "recording {id} is in the archive {} times: {}; give the archive URL down to \
                     one node and set (URL/NODE/SET-UUID)",
                    matching.len(),
                    matching
                        .iter()
                        .map(|r| r.manifest.key())
                        .collect::<Vec<_>>()
                        .join(", ")
                ))
                .into());
            }
        }
        Ok(reader::select(&entries, id)?)
    }

    /// Recording `recording` (default: the last) or, given, mark `mark` of a set (format
    /// 1.7): its entry, which reads as the mark's window of its recording.
    pub fn pick(&self, recording: Option<u32>, mark: Option<u32>) -> Result<RecordingEntry> {
        let Some(id) = mark else {
            return self.select(recording);
        };
        let ChunkSource::Set(set) = self else {
            return Err(UsageError(
                "--mark reads a mark from the drives that keep it; an archive holds recordings"
                    .into(),
            )
            .into());
        };
        let (mark, _) = nvrec::recording::marks::find(set, id, &reader::recordings(set)?)?;
        if let Some(reclaim) = mark.reclaimed {
            return Err(nvrec::recording::RecordingError::MarkReleased {
                mark_id: id,
                when: nvrec::unit::format_rfc3339_ns(reclaim.reclaimed_ns),
            }
            .into());
        }
        Ok(mark)
    }

    /// For an archive, the stream ranges a ring overwrote before they were archived that
    /// lie within what a read of `entry` (`summary`) went over: all of them where it began
    /// at the start, else those after its first chunk up to its last, and the one after
    /// the archive's last chunk where the read went to it. None for drives.
    pub fn overwritten(
        &self,
        entry: &RecordingEntry,
        summary: &ReadSummary,
    ) -> Vec<nvrec_archive::manifest::Loss> {
        let ChunkSource::Archive { recordings, .. } = self else {
            return Vec::new();
        };
        let (Some(first), Some(last)) = (summary.first_sequence, summary.last_sequence) else {
            return Vec::new();
        };
        let manifest = &archived(recordings, entry).manifest;
        let whole = manifest
            .segments
            .first()
            .is_some_and(|s| s.first_sequence == first);
        let to_end = manifest
            .segments
            .last()
            .is_some_and(|s| s.last_sequence == last);
        manifest
            .overwritten()
            .filter(|loss| (loss.sequence <= last || to_end) && (whole || loss.sequence > first))
            .cloned()
            .collect()
    }

    /// A member, as messages name it.
    pub fn describe_member(&self, index: usize) -> String {
        match self {
            ChunkSource::Set(set) => volume::describe_member(set, index),
            ChunkSource::Archive { archive, .. } => {
                format!("member {index}, archived in {}", archive.url())
            }
        }
    }

    /// Reads `entry` from the first chunk at or after `from_ns`, as
    /// [`reader::read_recording_from`] does.
    pub fn read_from(
        &self,
        entry: &RecordingEntry,
        engine: EngineChoice,
        from_ns: Option<u64>,
        control: &Control,
        progress: &Progress,
        each: &mut dyn FnMut(Item<'_>) -> bool,
    ) -> Result<ReadSummary> {
        self.read_window(entry, engine, (from_ns, None), control, progress, each)
    }

    /// As [`ChunkSource::read_from`], for the window `(from_ns, to_ns)`: the caller stops
    /// at the first chunk after `to_ns`, which an archive reads no further than (the drives'
    /// reader is stopped by the caller).
    pub fn read_window(
        &self,
        entry: &RecordingEntry,
        engine: EngineChoice,
        (from_ns, to_ns): (Option<u64>, Option<u64>),
        control: &Control,
        progress: &Progress,
        each: &mut dyn FnMut(Item<'_>) -> bool,
    ) -> Result<ReadSummary> {
        match self {
            ChunkSource::Set(set) => Ok(reader::read_recording_from(
                set, entry, engine, from_ns, control, progress, each,
            )?),
            ChunkSource::Archive {
                archive,
                recordings,
                ..
            } => {
                let recording = archived(recordings, entry);
                let window = nvrec_archive::read::Window { from_ns, to_ns };
                Ok(nvrec_archive::read::read_window(
                    archive, recording, window, control, progress, each,
                )?)
            }
        }
    }
}

impl ChunkSource {
    /// The archive and the archived recording `entry` is (one of the archive's own
    /// entries), where the source is an archive.
    pub fn archived(&self, entry: &RecordingEntry) -> Option<(&Archive, &ArchivedRecording)> {
        match self {
            ChunkSource::Set(_) => None,
            ChunkSource::Archive {
                archive,
                recordings,
                ..
            } => Some((archive, archived(recordings, entry))),
        }
    }
}

/// The archived recording that `entry` (one of the archive's own entries) came from.
fn archived<'a>(
    recordings: &'a [ArchivedRecording],
    entry: &RecordingEntry,
) -> &'a ArchivedRecording {
    recordings
        .iter()
        .find(|r| r.entry.set_uuid == entry.set_uuid && r.entry.recording_id == entry.recording_id)
        .expect("entries of an archive come from its manifests")
}
