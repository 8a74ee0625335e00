//! `nvrec repair`: makes a set's metadata whole again from what survives.
//!
//! In order, each step only from good copies or from the chunks themselves:
//! 1. A crashed recording's recovered end is written into its entry (what `--append`
//!    would do first), so the set no longer depends on recovery.
//! 2. Each member's damaged superblock copy is rewritten from its other copy.
//! 3. With `scan`, recordings whose entries are all lost are rebuilt from their chunks.
//!    Then every entry that ends before chunks its recording holds (`scan::unaccounted`:
//!    the slots right after its end on each member, never a scan of the drive) is extended
//!    over them; the checkpoint, where it still stands at such an entry's end, moves past
//!    them, so that the next recording neither overwrites them nor reuses their sequences.
//!    A recording that no entry names at all (its entry write lost, the index as it was
//!    before it began) is found the same way at the set's write point (`scan::unnamed`)
//!    and gets its entry back, without its name, which was lost with it.
//! 4. A recording table slot with any damaged copy gets its newest entry rewritten to both
//!    copies on every member (as two new revisions, so the rule "revision r in copy
//!    r mod 2" holds).
//! 5. Checkpoint slots likewise get the newest checkpoint as new generations, one per slot.
//!    When no valid checkpoint survives anywhere, one is rebuilt: no recording open, each
//!    member's position after its newest chunk and the next sequence number past every
//!    chunk on the set, found by a scan (so that nothing recorded is ever overwritten or
//!    outnumbered by what comes next).
//!
//! Nothing is written while a checkpoint or entry copy cannot be read (an I/O error): that
//! copy may be the newest, and every step writes what the readable ones say over it.
//!
//! Every write goes to the members that are present; a member whose write fails is named
//! in the report and the rest go on. A member that is missing (not given, or not readable as
//! one: a dying drive) is named too, and its copies are not repaired. Step 1 waits for it:
//! a crashed recording's end is searched for on every member, and one that is missing may
//! hold its chunks past what the others show, so an end written without it would cut them
//! off while the report called the set whole.

use super::health::{self, MetaDamage, Severity};
use super::scan::{self, Scan, Unaccounted};
use super::volume::{write_meta, MetaPlace, VolumeSet};
use super::{RecordingError, RECOVERY_WINDOW_SLOTS};
use crate::control::Control;
use crate::layout::{Checkpoint, MemberPosition, RecordingEntry, RecordingState, SuperblockCopies};

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
    /// A crashed recording whose end was not written because members are missing (step 1
    /// waits for every member): it stays open, and the reader recovers it on each read.
    pub unrecovered_recording: Option<u32>,
    /// Members of the set that were not there to repair (not given, or not readable as a
    /// member): their metadata copies and chunks are out of reach.
    pub missing_members: Vec<u16>,
    /// Entries rebuilt from a scan of the chunks.
    pub rebuilt_recordings: Vec<u32>,
    /// Entries extended over chunks of their recording that they did not account for:
    /// what each was extended over.
    pub extended: Vec<Unaccounted>,
    /// Recordings no entry named (an entry write lost) whose entries were written anew
    /// from their chunks at the set's write point (`scan::unnamed`); each is in `extended`
    /// too, with what it holds.
    pub restored: Vec<u32>,
    /// Chunks still unaccounted for after the repair (looked for again on the disks).
    pub unaccounted_left: Vec<Unaccounted>,
    /// Damage left after the repair (checked again from the disks).
    pub left: Vec<MetaDamage>,
}

/// Repairs `set` (opened for writing). With `scan`, also rebuilds lost entries.
pub fn repair(
    set: &mut VolumeSet,
    scan_chunks: bool,
    control: &Control,
) -> Result<RepairReport, RecordingError> {
    refuse_unreadable_copies(set)?;
    let mut report = RepairReport {
        found: health::check(set)?,
        missing_members: set.missing_indices(),
        ..RepairReport::default()
    };
    if let Some(checkpoint) = set.newest_checkpoint()? {
        if !report.missing_members.is_empty() && crashed(set, &checkpoint)? {
            report.unrecovered_recording = Some(checkpoint.recording_id);
        } else if super::reader::recover(set)?.is_some() {
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
    extend_entries(set, &mut report)?;
    entries(set, &report.found.clone(), &mut report)?;
    checkpoints(set, scanned.as_ref(), &mut report)?;
    report.left = health::check(set)?;
    report.unaccounted_left = unaccounted_chunks(set)?;
    Ok(report)
}

/// Refuses a set with a checkpoint or entry copy that cannot be read (an I/O error, not a
/// copy that fails its check): it may be the newest the set holds, and every step below
/// writes what the readable copies say over all of them. Copies past the end of a
/// truncated member are not refused: there is nothing to read there (the truncation is
/// named as damage of its own).
fn refuse_unreadable_copies(set: &VolumeSet) -> Result<(), RecordingError> {
    let copies = set
        .checkpoint_copies()
        .into_iter()
        .chain(set.all_entry_copies().into_iter().flatten());
    for copy in copies {
        let Err(error) = &copy.bytes else { continue };
        let Some(member) = set.members[copy.member_index as usize].as_ref() else {
            continue;
        };
        if copy.offset_bytes >= member.disk.capacity_bytes() {
            continue;
        }
        return Err(RecordingError::MetadataUnreadable {
            member_index: copy.member_index,
            path: member.disk.path().to_path_buf(),
            place: copy.place.to_string(),
            offset_bytes: copy.offset_bytes,
            error: error.to_string(),
        });
    }
    Ok(())
}

/// Whether `checkpoint` names a recording whose entry is still open: one that crashed (or
/// runs), whose end recovery searches for.
fn crashed(set: &VolumeSet, checkpoint: &Checkpoint) -> Result<bool, RecordingError> {
    Ok(checkpoint.recording_id != 0
        && set.recordings()?.iter().any(|entry| {
            entry.recording_id == checkpoint.recording_id && entry.state == RecordingState::Open
        }))
}

/// What every entry of `set` leaves unaccounted, for the recordings that leave any or
/// whose look past the end met a slot it could not read (what lies there is unknown), and
/// the chunks of recordings that no entry names (`scan::unnamed`).
pub fn unaccounted_chunks(set: &VolumeSet) -> Result<Vec<Unaccounted>, RecordingError> {
    Ok(set
        .recordings()?
        .iter()
        .chain(&scan::unnamed(set)?)
        .map(|entry| scan::unaccounted(set, entry))
        .filter(|found| !found.is_clear())
        .collect())
}

/// Entries that end before chunks their recording holds: each extended over them, as a new
/// revision on every member. A checkpoint of no open recording whose position on a member
/// still stands where such an entry ended there moves past the chunks, and its next
/// sequence past every one found, so that nothing extended over is overwritten or
/// outnumbered by the next recording.
fn extend_entries(set: &VolumeSet, report: &mut RepairReport) -> Result<(), RecordingError> {
    let mut extended: Vec<(RecordingEntry, Unaccounted)> = Vec::new();
    let unnamed = scan::unnamed(set)?;
    for entry in set.recordings()?.into_iter().chain(unnamed) {
        let found = scan::unaccounted(set, &entry);
        if found.chunk_count == 0 {
            continue;
        }
        write_entry_everywhere(set, &found.extended_entry(&entry), report);
        if entry.revision == 0 {
            report.restored.push(entry.recording_id);
        }
        report.extended.push(found.clone());
        extended.push((entry, found));
    }
    let Some(checkpoint) = set.newest_checkpoint()? else {
        return Ok(());
    };
    if extended.is_empty() || checkpoint.recording_id != 0 {
        return Ok(());
    }
    let mut next = checkpoint.clone();
    for (entry, found) in &extended {
        let past = found
            .highest_sequence_seen
            .map_or(0, |s| s.saturating_add(1))
            .max(found.end_sequence);
        next.durable_sequence_end = next.durable_sequence_end.max(past);
        for on in &found.members {
            let index = on.member_index as usize;
            let (Some(position), Some(span)) =
                (next.members.get_mut(index), entry.members.get(index))
            else {
                continue;
            };
            if position.next_slot_index == span.end_slot_index {
                position.next_slot_index = on.end_slot_index;
                if on.wrapped {
                    position.lap = position.lap.saturating_add(1);
                }
            }
        }
    }
    if next == checkpoint {
        return Ok(());
    }
    next.generation = checkpoint.generation.saturating_add(1);
    next.written_ns = set.clock().wall_ns();
    write_checkpoint_everywhere(
        set,
        &next,
        " (past the chunks an entry was extended over)",
        report,
    )
}

/// Writes `checkpoint` to every present member and flushes it there, noting each
/// member's outcome; `why` follows the generation in the note.
fn write_checkpoint_everywhere(
    set: &VolumeSet,
    checkpoint: &Checkpoint,
    why: &str,
    report: &mut RepairReport,
) -> Result<(), RecordingError> {
    let bytes = checkpoint.encode()?;
    for member in set.present() {
        let result = member
            .write_checkpoint(&bytes, checkpoint.generation)
            .and_then(|()| member.flush());
        note(
            report,
            result,
            format!(
                "member {} checkpoint generation {}{why}",
                member.index(),
                checkpoint.generation
            ),
        );
    }
    Ok(())
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
    // Marks' entries too (format 1.7): a mark lives in the table as a recording does.
    for entry in set.entries()? {
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
        next.written_ns = set.clock().wall_ns();
        write_checkpoint_everywhere(set, &next, "", report)?;
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
        written_ns: set.clock().wall_ns(),
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
