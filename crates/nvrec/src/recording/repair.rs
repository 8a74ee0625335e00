//! `nvrec repair`: makes a set's metadata whole again from what survives.
//!
//! In order, each step only from good copies or from the chunks themselves:
//! 1. A crashed recording's recovered end is written into its entry (what `--append`
//!    would do first), so the set no longer depends on recovery.
//! 2. Each member's damaged superblock copy is rewritten from its other copy.
//! 3. With `scan`, recordings whose entries are all lost are rebuilt from their chunks.
//! 4. A recording table slot with any damaged copy gets its newest entry rewritten to both
//!    copies on every member (as two new revisions, so the rule "revision r in copy
//!    r mod 2" holds).
//! 5. Checkpoint slots likewise get the newest checkpoint as new generations, one per slot.
//!    When no valid checkpoint survives anywhere, one is rebuilt: no recording open, each
//!    member's position after its newest chunk and the next sequence number past every
//!    chunk on the set, found by a scan (so that nothing recorded is ever overwritten or
//!    outnumbered by what comes next).
//!
//! Every write goes to the members that are present; a member whose write fails is named
//! in the report and the rest go on.

use super::health::{self, MetaDamage, Severity};
use super::scan::{self, Scan};
use super::volume::{write_meta, MetaPlace, VolumeSet};
use super::{RecordingError, RECOVERY_WINDOW_SLOTS};
use crate::layout::{Checkpoint, MemberPosition, RecordingEntry, SuperblockCopies};
use crate::stream::Control;

/// What `repair` did.
#[derive(Debug, Clone, Default, serde::Serialize)]
pub struct RepairReport {
    /// Damage found before the repair.
    pub found: Vec<MetaDamage>,
    /// What was rewritten, a line each.
    pub rewrote: Vec<String>,
    /// Writes that failed, a line each: that damage remains.
    pub failed: Vec<String>,
    /// The recovered end written for a crashed recording, if one was.
    pub recovered_recording: Option<u32>,
    /// Entries rebuilt from a scan of the chunks.
    pub rebuilt_recordings: Vec<u32>,
    /// Damage left after the repair (checked again from the disks).
    pub left: Vec<MetaDamage>,
}

/// Repairs `set` (opened for writing). With `scan`, also rebuilds lost entries.
pub fn repair(
    set: &mut VolumeSet,
    scan_chunks: bool,
    control: &Control,
) -> Result<RepairReport, RecordingError> {
    let mut report = RepairReport {
        found: health::check(set)?,
        ..RepairReport::default()
    };
    if let Some(checkpoint) = set.newest_checkpoint()? {
        if super::reader::recover(set)?.is_some() {
            report.recovered_recording = Some(checkpoint.recording_id);
        }
    }
    superblocks(set, &mut report);
    let set = &*set;
    let checkpoint_lost = set.newest_checkpoint()?.is_none();
    let scanned = if scan_chunks || checkpoint_lost {
        Some(scan::scan(set, control)?)
    } else {
        None
    };
    if let (true, Some(found)) = (scan_chunks, &scanned) {
        rebuild_entries(set, found, &mut report)?;
    }
    entries(set, &report.found.clone(), &mut report)?;
    checkpoints(set, scanned.as_ref(), &mut report)?;
    report.left = health::check(set)?;
    Ok(report)
}

fn note(report: &mut RepairReport, result: Result<(), RecordingError>, what: String) {
    match result {
        Ok(()) => report.rewrote.push(what),
        Err(error) => report.failed.push(format!("{what}: {error}")),
    }
}

fn superblocks(set: &mut VolumeSet, report: &mut RepairReport) {
    for member in set.members.iter_mut().flatten() {
        let copy = match member.copies {
            SuperblockCopies::Both => continue,
            SuperblockCopies::OnlyA => 1,
            SuperblockCopies::OnlyB => 0,
        };
        let offset = member.layout().superblock_offsets_bytes()[copy];
        let result = member
            .superblock
            .encode()
            .map_err(RecordingError::from)
            .and_then(|bytes| {
                let mut block = vec![0u8; member.layout().meta_block_bytes as usize];
                block[..bytes.len()].copy_from_slice(&bytes);
                write_meta(
                    &member.disk,
                    offset,
                    member.layout().meta_block_bytes,
                    &block,
                )
                .and_then(|()| member.flush())
            });
        if result.is_ok() {
            member.copies = SuperblockCopies::Both;
        }
        let place = MetaPlace::Superblock { copy: copy as u32 };
        note(report, result, format!("member {} {place}", member.index()));
    }
}

/// Writes `entry` as a new revision to its copy on every present member.
fn write_entry_everywhere(set: &VolumeSet, entry: &RecordingEntry, report: &mut RepairReport) {
    let bytes = match entry.encode() {
        Ok(bytes) => bytes,
        Err(error) => {
            report
                .failed
                .push(format!("recording {}: {error}", entry.recording_id));
            return;
        }
    };
    for member in set.present() {
        let written = member
            .write_entry(&bytes, entry)
            .and_then(|place| member.flush().map(|()| place));
        let what = |place: String| {
            format!(
                "member {} recording {} revision {}{place}",
                member.index(),
                entry.recording_id,
                entry.revision,
            )
        };
        match written {
            Ok(place) => report.rewrote.push(what(format!(" ({place})"))),
            Err(error) => report
                .failed
                .push(format!("{}: {error}", what(String::new()))),
        }
    }
}

/// Table slots with any damaged copy: the newest entry, twice, as two new revisions.
fn entries(
    set: &VolumeSet,
    found: &[MetaDamage],
    report: &mut RepairReport,
) -> Result<(), RecordingError> {
    let damaged_slots: Vec<u32> = found
        .iter()
        .filter(|d| d.severity == Severity::Repairable)
        .filter_map(|d| match d.place {
            Some(MetaPlace::Entry { slot, .. }) => Some(slot),
            _ => None,
        })
        .collect();
    for entry in set.recordings()? {
        let slot = set
            .present()
            .next()
            .and_then(|m| m.layout().recording_slot_for_id(entry.recording_id));
        if slot.is_some_and(|slot| damaged_slots.contains(&slot)) {
            for step in 1..=2 {
                let mut next = entry.clone();
                next.revision = entry.revision + step;
                write_entry_everywhere(set, &next, report);
            }
        }
    }
    Ok(())
}

/// Recordings the chunks hold and the table does not: an entry rebuilt from the chunks.
fn rebuild_entries(
    set: &VolumeSet,
    found: &Scan,
    report: &mut RepairReport,
) -> Result<(), RecordingError> {
    let known: Vec<u32> = set.recordings()?.iter().map(|e| e.recording_id).collect();
    for recording in &found.recordings {
        if known.contains(&recording.recording_id) {
            continue;
        }
        let entry = recording.rebuilt_entry(set, &[]);
        write_entry_everywhere(set, &entry, report);
        report.rebuilt_recordings.push(recording.recording_id);
    }
    Ok(())
}

/// Checkpoint slots: the newest checkpoint (or one rebuilt from a scan) as new
/// generations, one per slot, when any slot is damaged or none survives.
fn checkpoints(
    set: &VolumeSet,
    scanned: Option<&Scan>,
    report: &mut RepairReport,
) -> Result<(), RecordingError> {
    let newest = set.newest_checkpoint()?;
    let damaged = newest.is_none()
        || report
            .found
            .iter()
            .any(|d| matches!(d.place, Some(MetaPlace::Checkpoint { .. })));
    if !damaged {
        return Ok(());
    }
    let base = match (newest, scanned) {
        (Some(checkpoint), _) => checkpoint,
        (None, Some(found)) => rebuilt_checkpoint(set, found)?,
        (None, None) => return Ok(()),
    };
    let slot_count = set
        .present()
        .next()
        .map_or(0, |m| m.layout().checkpoint_slot_count);
    for step in 1..=slot_count as u64 {
        let mut next = base.clone();
        next.generation = base.generation + step;
        next.written_ns = super::volume::now_ns();
        let bytes = next.encode()?;
        for member in set.present() {
            let result = member
                .write_checkpoint(&bytes, next.generation)
                .and_then(|()| member.flush());
            note(
                report,
                result,
                format!(
                    "member {} checkpoint generation {}",
                    member.index(),
                    next.generation
                ),
            );
        }
    }
    Ok(())
}

/// A checkpoint for a set that lost all of its own: idle, each member's position after
/// its newest chunk (or its newest recording's end), and the next sequence number past
/// every chunk found.
fn rebuilt_checkpoint(set: &VolumeSet, found: &Scan) -> Result<Checkpoint, RecordingError> {
    let entries = set.recordings()?;
    let newest = entries.last();
    let next_sequence = found
        .highest_sequence
        .map_or(0, |s| s + 1)
        .max(entries.iter().map(|e| e.end_sequence).max().unwrap_or(0));
    let members = (0..set.member_count())
        .map(|index| {
            let from_entry = newest
                .and_then(|e| e.members.get(index))
                .map_or(0, |span| span.end_slot_index);
            MemberPosition {
                next_slot_index: found.member_ends[index].unwrap_or(0).max(from_entry),
                lap: 0,
            }
        })
        .collect();
    Ok(Checkpoint {
        set_uuid: set.set_uuid,
        generation: 1,
        written_ns: super::volume::now_ns(),
        recording_id: 0,
        recovery_window_slots: RECOVERY_WINDOW_SLOTS,
        recording_first_sequence: next_sequence,
        durable_sequence_end: next_sequence,
        durable_stream_bytes: 0,
        durable_lost_bytes: 0,
        members,
        retirements: Vec::new(),
    })
}
