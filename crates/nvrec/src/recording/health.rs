//! The health of a set's metadata: every copy of every structure on every member, compared
//! with the best copy the set holds (`docs/FORMAT.md` 5: every member holds the same index).
//!
//! Readers go by the best copy anywhere, so one damaged copy costs nothing; but damage is
//! never silent: [`check`] names each copy that is unreadable, fails its check, is blank
//! where the others hold a structure, or is older than theirs, and says whether a good copy
//! exists to repair it from ([`Severity::Repairable`]; [`Severity::Unreadable`] where the
//! copy cannot be read at all, which `repair` will not write over) or what the set has lost
//! ([`Severity::Lost`]). `nvrec repair` ([`super::repair`]) rewrites the repairable ones.

use super::volume::{CopyProblem, MetaCopy, MetaPlace, VolumeSet};
use super::RecordingError;
use crate::layout::{
    decode_chunk_header, RecordingEntry, SuperblockCopies, CHUNK_HEADER_SIZE_BYTES,
};
use std::path::PathBuf;

/// How bad one piece of damage is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Severity {
    /// Another copy holds what this one should: `nvrec repair` rewrites it from there.
    Repairable,
    /// The copy cannot be read at all (an I/O error, not a failed check). Other copies hold
    /// what it should, but `repair` writes nothing while a copy it cannot read may be the
    /// newest: the member is left out of the repair, or replaced.
    Unreadable,
    /// No copy anywhere holds it: the set's state or a recording's entry is gone (the
    /// chunks remain; `ls --scan` and `repair --scan` rebuild entries from them).
    Lost,
}

/// One damaged metadata copy, or one structure the set has lost.
#[derive(Debug, Clone, serde::Serialize)]
pub struct MetaDamage {
    pub severity: Severity,
    /// The member and where on it; `None` for a structure lost on every member.
    pub member_index: Option<u16>,
    pub path: Option<PathBuf>,
    pub place: Option<MetaPlace>,
    pub offset_bytes: Option<u64>,
    pub problem: String,
}

impl MetaDamage {
    /// A structure the set holds on no member at all.
    fn lost_everywhere(problem: String) -> MetaDamage {
        MetaDamage {
            severity: Severity::Lost,
            member_index: None,
            path: None,
            place: None,
            offset_bytes: None,
            problem,
        }
    }
}

impl std::fmt::Display for MetaDamage {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let severity = match self.severity {
            Severity::Repairable => "repairable",
            Severity::Unreadable => "UNREADABLE",
            Severity::Lost => "LOST",
        };
        write!(f, "{severity}: ")?;
        if let (Some(index), Some(path)) = (self.member_index, &self.path) {
            write!(f, "member {index} ({}) ", path.display())?;
        }
        if let (Some(place), Some(offset)) = (self.place, self.offset_bytes) {
            write!(f, "{place} at {offset:#x}: ")?;
        }
        f.write_str(&self.problem)
    }
}

/// Checks every metadata copy of `set`: superblocks, checkpoint slots, the recording
/// table, the members' sizes, and recording ids the table should hold but does not.
pub fn check(set: &VolumeSet) -> Result<Vec<MetaDamage>, RecordingError> {
    let mut damage = Vec::new();
    superblocks(set, &mut damage);
    let retired = retired_members(set)?;
    checkpoints(set, &retired, &mut damage);
    let entries = set.entries()?; // Marks hold ids too (format 1.7).
    for copies in set.all_entry_copies() {
        entry_slot(set, &copies, &retired, &mut damage);
    }
    lost_entries(set, &entries, &mut damage)?;
    stale_open_entries(set, &mut damage)?;
    // Past the end of a truncated member nothing can be read: its truncation says so once.
    damage.retain(|item| match (item.member_index, item.offset_bytes) {
        (Some(index), Some(offset)) => set.members[index as usize]
            .as_ref()
            .is_none_or(|member| offset < member.disk.capacity_bytes()),
        _ => true,
    });
    Ok(damage)
}

/// Whether any damage loses something (the exit status of `ls` and `verify` says so).
pub fn loses_anything(damage: &[MetaDamage]) -> bool {
    damage.iter().any(|d| d.severity == Severity::Lost)
}

fn member_damage(set: &VolumeSet, copy: &MetaCopy, problem: String) -> MetaDamage {
    MetaDamage {
        severity: match copy.bytes {
            Ok(_) => Severity::Repairable,
            Err(_) => Severity::Unreadable,
        },
        member_index: Some(copy.member_index),
        path: set.members[copy.member_index as usize]
            .as_ref()
            .map(|m| m.disk.path().to_path_buf()),
        place: Some(copy.place),
        offset_bytes: Some(copy.offset_bytes),
        problem,
    }
}

fn superblocks(set: &VolumeSet, damage: &mut Vec<MetaDamage>) {
    for member in set.present() {
        let bad_copy = match member.copies {
            SuperblockCopies::Both => None,
            SuperblockCopies::OnlyA => Some(1),
            SuperblockCopies::OnlyB => Some(0),
        };
        let layout = member.layout();
        let path = Some(member.disk.path().to_path_buf());
        if let Some(copy) = bad_copy {
            damage.push(MetaDamage {
                severity: Severity::Repairable,
                member_index: Some(member.index()),
                path: path.clone(),
                place: Some(MetaPlace::Superblock { copy }),
                offset_bytes: Some(layout.superblock_offsets_bytes()[copy as usize]),
                problem: "unreadable or fails its check; the other copy holds it".into(),
            });
        }
        let size = member.superblock.layout.volume_size_bytes;
        if member.disk.capacity_bytes() < size {
            damage.push(MetaDamage {
                severity: Severity::Lost,
                member_index: Some(member.index()),
                path,
                place: None,
                offset_bytes: None,
                problem: format!(
                    "the target holds {} bytes, the volume was {size}: it was truncated, \
                     and what lay past its end is gone",
                    member.disk.capacity_bytes()
                ),
            });
        }
    }
}

/// Members that take no metadata: retired by the newest recording.
fn retired_members(set: &VolumeSet) -> Result<Vec<u16>, RecordingError> {
    let mut retired: Vec<u16> = Vec::new();
    if let Some(checkpoint) = set.newest_checkpoint()? {
        retired.extend(checkpoint.retirements.iter().map(|r| r.member_index));
    }
    if let Some(entry) = set.recordings()?.last() {
        retired.extend(entry.retirements.iter().map(|r| r.member_index));
    }
    Ok(retired)
}

fn checkpoints(set: &VolumeSet, retired: &[u16], damage: &mut Vec<MetaDamage>) {
    let copies = set.checkpoint_copies();
    let decode = |copy: &MetaCopy| set.checkpoint_of(copy);
    let best = copies
        .iter()
        .filter_map(|copy| decode(copy).ok())
        .max_by_key(|c| c.generation);
    let Some(best) = best else {
        damage.push(MetaDamage::lost_everywhere(
            "no valid checkpoint on any member: where the writers stood is lost (nvrec \
             repair rebuilds it from the recording table and the chunks)"
                .into(),
        ));
        for copy in &copies {
            match decode(copy) {
                Err(CopyProblem::Blank) | Ok(_) => {}
                Err(why) => damage.push(member_damage(set, copy, why.to_string())),
            }
        }
        return;
    };
    let slot_count = set
        .present()
        .next()
        .map_or(0, |m| m.layout().checkpoint_slot_count);
    for slot in 0..slot_count {
        let in_slot: Vec<&MetaCopy> = copies.iter().filter(|c| slot_of(c.place) == slot).collect();
        let newest = in_slot
            .iter()
            .filter_map(|c| decode(c).ok())
            .map(|c| c.generation)
            .max();
        // Generation g goes to slot g mod nC: a slot no generation has reached yet is blank.
        let used = best.generation >= slot_count as u64
            || (1..=best.generation).any(|g| g % slot_count as u64 == slot as u64);
        for copy in in_slot {
            if retired.contains(&copy.member_index) {
                continue;
            }
            let problem = match (decode(copy), newest) {
                (Ok(found), Some(newest)) if found.generation < newest => format!(
                    "stale: generation {}, another member holds {newest}",
                    found.generation
                ),
                (Ok(_), _) => continue,
                (Err(CopyProblem::Blank), _) if !used => continue,
                (Err(why), _) => why.to_string(),
            };
            damage.push(member_damage(set, copy, problem));
        }
    }
}

fn slot_of(place: MetaPlace) -> u32 {
    match place {
        MetaPlace::Checkpoint { slot } | MetaPlace::Entry { slot, .. } => slot,
        MetaPlace::Superblock { copy } => copy,
    }
}

fn entry_slot(set: &VolumeSet, copies: &[MetaCopy], retired: &[u16], damage: &mut Vec<MetaDamage>) {
    let decode = |copy: &MetaCopy| set.entry_of(copy);
    let newest = copies
        .iter()
        .filter_map(|copy| decode(copy).ok())
        .max_by_key(|e| (e.recording_id, e.revision));
    for copy in copies {
        let MetaPlace::Entry { copy: index, .. } = copy.place else {
            continue;
        };
        let holds_newest = newest
            .as_ref()
            .is_some_and(|n| (n.revision % 2) as u32 == index);
        let exempt = retired.contains(&copy.member_index)
            || newest.as_ref().is_some_and(|n| {
                n.retirements
                    .iter()
                    .any(|r| r.member_index == copy.member_index)
            });
        let problem = match (decode(copy), &newest) {
            (Ok(found), Some(n))
                if holds_newest
                    && (found.recording_id, found.revision) < (n.recording_id, n.revision) =>
            {
                format!(
                    "stale: recording {} revision {}, another member holds recording {} revision {}",
                    found.recording_id, found.revision, n.recording_id, n.revision
                )
            }
            (Ok(_), _) => continue,
            (Err(CopyProblem::Blank | CopyProblem::OtherSet(_)), _) if !holds_newest => continue,
            (Err(why), _) => why.to_string(),
        };
        if !exempt {
            damage.push(member_damage(set, copy, problem));
        }
    }
}

/// Recording ids the table should hold (the last `nR` up to the highest id the set has
/// used) but holds on no member.
fn lost_entries(
    set: &VolumeSet,
    entries: &[RecordingEntry],
    damage: &mut Vec<MetaDamage>,
) -> Result<(), RecordingError> {
    let highest = highest_recording_id(set)?;
    let slots = set.recording_slot_count().max(1);
    let first = highest.saturating_sub(slots - 1).max(1);
    for id in first..=highest {
        if entries.iter().all(|e| e.recording_id != id) {
            damage.push(MetaDamage::lost_everywhere(format!(
                "recording {id}: every copy of its entry is lost (its chunks remain: nvrec \
                 ls --scan finds them, nvrec repair --scan rebuilds the entry)"
            )));
        }
    }
    Ok(())
}

/// Entries left open by a lost closing revision (`scan::stale_open`): what the table says
/// of their recordings is not what their chunks hold.
fn stale_open_entries(set: &VolumeSet, damage: &mut Vec<MetaDamage>) -> Result<(), RecordingError> {
    for entry in set.recordings()? {
        if super::scan::stale_open(set, &entry)? {
            damage.push(MetaDamage::lost_everywhere(format!(
                "recording {}: its entry says it is open (revision {}), and the set went on \
                 past it: its newer revisions are lost, and its chunks past the end it states \
                 are not accounted for (nvrec repair extends the entry over those that go \
                 on from that end; nvrec ls --scan finds them all)",
                entry.recording_id, entry.revision
            )));
        }
    }
    Ok(())
}

/// The highest recording id the set has used: from the table, the newest checkpoint, and
/// the chunk each member wrote last before that checkpoint's position. A new recording
/// takes the next one, so an id is never reused even when an entry was lost.
pub fn highest_recording_id(set: &VolumeSet) -> Result<u32, RecordingError> {
    let mut highest = set
        .entries()?
        .iter()
        .map(|e| e.recording_id)
        .max()
        .unwrap_or(0);
    let Some(checkpoint) = set.newest_checkpoint()? else {
        return Ok(highest);
    };
    highest = highest.max(checkpoint.recording_id);
    for member in set.present() {
        let Some(position) = checkpoint.members.get(member.index() as usize) else {
            continue;
        };
        let layout = member.layout();
        let last_slot = match position.next_slot_index {
            0 if position.lap > 0 => layout.data_slot_count - 1,
            0 => continue,
            next => next - 1,
        };
        let Some(offset) = layout.data_slot_offset_bytes(last_slot) else {
            continue;
        };
        let Ok(bytes) = super::volume::read_meta(&member.disk, offset, layout.meta_block_bytes)
        else {
            continue;
        };
        if let Ok(header) = decode_chunk_header(&bytes[..CHUNK_HEADER_SIZE_BYTES]) {
            if header.set_uuid == set.set_uuid {
                highest = highest.max(header.recording_id);
            }
        }
    }
    Ok(highest)
}
