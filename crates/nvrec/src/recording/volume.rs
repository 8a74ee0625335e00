//! Volume sets on targets: formatting, opening, and the metadata I/O of `docs/FORMAT.md`.
//!
//! Metadata (superblocks, checkpoints, recording entries) is small and rare, so it is read
//! and written synchronously with aligned buffers on the control path; chunks go through
//! the engine. Every metadata write is followed by a flush before anything depends on it.

use super::disk::{Disk, Members};
use super::RecordingError;
use crate::buffer::BufferPool;
use crate::clock::Clock;
use crate::device::{Access, OpenOptions, Safety};
use crate::engine::SimDisks;
use crate::layout::{
    select_superblock, Checkpoint, Label, MemberPosition, RecordingEntry, Superblock,
    SuperblockCopies, Uuid, VolumeLayout, RECORDING_ENTRY_COPIES, SUPERBLOCK_SIZE_BYTES,
};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};

/// Nanoseconds since the Unix epoch, the format's clock.
pub fn now_ns() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_nanos() as u64)
        .unwrap_or(0)
}

/// A fresh random (version 4) set uuid from the kernel's generator.
pub fn random_uuid() -> Result<Uuid, RecordingError> {
    let mut bytes = [0u8; 16];
    // SAFETY: getrandom writes at most 16 bytes into our 16-byte buffer.
    let got = unsafe { libc::getrandom(bytes.as_mut_ptr().cast(), bytes.len(), 0) };
    if got != bytes.len() as isize {
        return Err(RecordingError::Io {
            what: "drawing a random set uuid".into(),
            source: std::io::Error::last_os_error(),
        });
    }
    Ok(Uuid::from_random_bytes(bytes))
}

/// A new set's uuid: random from the kernel for targets; on simulated disks, drawn from
/// the set's seeded generator, so that a simulated run writes the same bytes every time.
fn new_set_uuid(members: &Members<'_>) -> Result<Uuid, RecordingError> {
    match members {
        Members::Paths(_) => random_uuid(),
        Members::Sim(set) => {
            let mut bytes = [0u8; 16];
            bytes[..8].copy_from_slice(&set.draw_u64().to_le_bytes());
            bytes[8..].copy_from_slice(&set.draw_u64().to_le_bytes());
            Ok(Uuid::from_random_bytes(bytes))
        }
    }
}

/// One member of an open set.
#[derive(Debug)]
pub struct Member {
    pub disk: Disk,
    pub superblock: Superblock,
    pub copies: SuperblockCopies,
}

impl Member {
    pub fn layout(&self) -> &VolumeLayout {
        &self.superblock.layout
    }

    pub fn index(&self) -> u16 {
        self.superblock.member_index
    }

    /// A second handle on a member on a simulated disk (`None` on a target).
    fn clone_simulated(&self) -> Option<Member> {
        Some(Member {
            disk: self.disk.clone_simulated()?,
            superblock: self.superblock.clone(),
            copies: self.copies,
        })
    }

    /// Makes what was written durable (fdatasync).
    pub fn flush(&self) -> Result<(), RecordingError> {
        self.disk
            .sync_data()
            .map_err(|source| RecordingError::Flush {
                path: self.disk.path().to_path_buf(),
                source,
            })
    }

    /// Writes an encoded checkpoint of generation `generation` to its slot here.
    pub fn write_checkpoint(&self, bytes: &[u8], generation: u64) -> Result<(), RecordingError> {
        let layout = self.layout();
        let slot = layout
            .checkpoint_slot_for_generation(generation)
            .unwrap_or(0);
        let offset = layout.checkpoint_slot_offset_bytes(slot).unwrap_or(0);
        write_meta(&self.disk, offset, layout.meta_block_bytes, bytes)
    }
}

impl Member {
    /// Writes an encoded entry to its place: the slot of its recording, the copy of its
    /// revision. Returns the place (not flushed).
    pub fn write_entry(
        &self,
        bytes: &[u8],
        entry: &RecordingEntry,
    ) -> Result<MetaPlace, RecordingError> {
        let layout = self.layout();
        let slot = layout
            .recording_slot_for_id(entry.recording_id)
            .unwrap_or(0);
        let copy = (entry.revision % 2) as u32;
        let offset = layout.recording_entry_offset_bytes(slot, copy).unwrap_or(0);
        write_meta(&self.disk, offset, layout.meta_block_bytes, bytes)?;
        Ok(MetaPlace::Entry { slot, copy })
    }
}

/// What was found on a target that is not a usable member of the set.
#[derive(Debug, Clone, serde::Serialize)]
pub struct MemberProblem {
    pub path: PathBuf,
    pub kind: ProblemKind,
    pub problem: String,
}

impl MemberProblem {
    /// The word a listing puts before it: a target that could not be read is not said to
    /// be anything it may not be.
    pub fn heading(&self) -> &'static str {
        match self.kind {
            ProblemKind::Unreadable => "UNREADABLE",
            _ => "NOT A MEMBER",
        }
    }
}

/// What a target given with a set is, where it is not a usable member of it. Only a
/// target whose every superblock copy was read is called blank or damaged: one whose reads
/// fail may hold a member (a cable, a controller), and is never called anything else.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ProblemKind {
    /// A read of its superblock copies failed: what it holds cannot be told.
    Unreadable,
    /// Every copy read back all zero: never written, or wiped.
    Blank,
    /// Its copies read, and hold no valid superblock (damage, or another program's data).
    Damaged,
    /// A member of another volume set.
    OtherSet,
    /// A member of this set that does not fit it (chunk size, member count), or one given
    /// twice.
    Mismatch,
}

/// The members of one volume set, in member order. Members may be missing (`None`).
#[derive(Debug)]
pub struct VolumeSet {
    pub set_uuid: Uuid,
    pub label: String,
    pub chunk_size_bytes: u32,
    pub members: Vec<Option<Member>>,
    /// Targets given that are not members: foreign sets, duplicates, unformatted.
    pub problems: Vec<MemberProblem>,
}

impl VolumeSet {
    pub fn member_count(&self) -> usize {
        self.members.len()
    }

    pub fn missing_indices(&self) -> Vec<u16> {
        self.members
            .iter()
            .enumerate()
            .filter(|(_, m)| m.is_none())
            .map(|(i, _)| i as u16)
            .collect()
    }

    /// Fails with a message naming what is missing or foreign unless every member is here.
    pub fn require_complete(&self) -> Result<(), RecordingError> {
        let missing = self.missing_indices();
        if !missing.is_empty() || !self.problems.is_empty() {
            return Err(RecordingError::IncompleteSet {
                set_uuid: self.set_uuid.to_string(),
                missing,
                member_count: self.members.len(),
                problems: self
                    .problems
                    .iter()
                    .map(|p| format!("{}: {}", p.path.display(), p.problem))
                    .collect(),
            });
        }
        Ok(())
    }

    /// Takes every present member's recording lock: nothing else writes them while the
    /// set is open for a recording.
    pub fn lock_for_recording(&self) -> Result<(), RecordingError> {
        self.present()
            .try_for_each(|member| member.disk.lock_for_recording())
    }

    /// The recording another program is writing on this set right now, if any: a member
    /// is locked by a recording, and the recording is the one the newest checkpoint names,
    /// or a later one whose entry is open (it began after that checkpoint and has made
    /// none of its own yet; a recorder closes a crashed recording's entry before it begins).
    pub fn live_recording(&self) -> Result<Option<u32>, RecordingError> {
        if !self.present().any(|member| member.disk.is_recording()) {
            return Ok(None);
        }
        let checkpointed = self
            .newest_checkpoint()?
            .map(|checkpoint| checkpoint.recording_id)
            .filter(|&id| id != 0);
        let opened = self
            .recordings()?
            .into_iter()
            .filter(|entry| entry.state == crate::layout::RecordingState::Open)
            .map(|entry| entry.recording_id)
            .max();
        Ok(checkpointed.max(opened))
    }

    pub fn present(&self) -> impl Iterator<Item = &Member> {
        self.members.iter().flatten()
    }

    /// The clock the members' I/O runs on: virtual on simulated disks, real otherwise.
    pub fn clock(&self) -> Clock {
        self.present()
            .next()
            .map_or(Clock::Real, |member| member.disk.clock())
    }

    /// The simulated disks the members are on, where they are simulated.
    pub fn simulated(&self) -> Option<&SimDisks> {
        self.present()
            .next()
            .and_then(|member| member.disk.simulated())
    }

    /// A second handle on a set whose members are all simulated disks, as it is open now
    /// (`None` where a member is a target): for work the set's own thread carries out
    /// later, out of reach of a borrow of the set.
    pub fn clone_simulated(&self) -> Option<VolumeSet> {
        let members = self
            .members
            .iter()
            .map(|member| match member {
                Some(member) => member.clone_simulated().map(Some),
                None => Some(None),
            })
            .collect::<Option<Vec<_>>>()?;
        Some(VolumeSet {
            set_uuid: self.set_uuid,
            label: self.label.clone(),
            chunk_size_bytes: self.chunk_size_bytes,
            members,
            problems: self.problems.clone(),
        })
    }

    /// The newest checkpoint over every slot of every member. A copy that cannot be read
    /// counts as damaged, as one that fails its check does: any other member's serves.
    pub fn newest_checkpoint(&self) -> Result<Option<Checkpoint>, RecordingError> {
        Ok(self
            .checkpoint_copies()
            .iter()
            .filter_map(|copy| self.checkpoint_of(copy).ok())
            .max_by_key(|checkpoint| checkpoint.generation))
    }

    /// The checkpoint a copy holds if it is one of this set's, for as many members as the
    /// set has; else what is wrong with it.
    pub fn checkpoint_of(&self, copy: &MetaCopy) -> Result<Checkpoint, CopyProblem> {
        let bytes = copy
            .bytes
            .as_ref()
            .map_err(|e| CopyProblem::Unreadable(e.clone()))?;
        let found = self.of_set(Checkpoint::decode(bytes), |c| c.set_uuid)?;
        self.member_count_matches(found.members.len())?;
        Ok(found)
    }

    /// The entry a copy holds if it is one of this set's, as [`VolumeSet::checkpoint_of`],
    /// and where it belongs: a table slot holds only the entries of the ids that map to it
    /// (`docs/FORMAT.md` 5), so an entry found in another one was written there by mistake
    /// (a misdirected write) and is not the table's, however good its checks.
    pub fn entry_of(&self, copy: &MetaCopy) -> Result<RecordingEntry, CopyProblem> {
        let bytes = copy
            .bytes
            .as_ref()
            .map_err(|e| CopyProblem::Unreadable(e.clone()))?;
        let found = self.of_set(RecordingEntry::decode(bytes), |e| e.set_uuid)?;
        self.member_count_matches(found.members.len())?;
        if let MetaPlace::Entry { slot, .. } = copy.place {
            let layout = self.members[copy.member_index as usize]
                .as_ref()
                .map(|member| member.layout());
            let belongs = layout.and_then(|l| l.recording_slot_for_id(found.recording_id));
            if belongs != Some(slot) {
                return Err(CopyProblem::Misplaced {
                    recording_id: found.recording_id,
                    revision: found.revision,
                    belongs,
                });
            }
        }
        Ok(found)
    }

    fn of_set<T>(
        &self,
        decoded: Result<T, crate::layout::LayoutError>,
        uuid_of: impl Fn(&T) -> Uuid,
    ) -> Result<T, CopyProblem> {
        match decoded {
            Ok(found) if uuid_of(&found) == self.set_uuid => Ok(found),
            Ok(found) => Err(CopyProblem::OtherSet(uuid_of(&found))),
            Err(crate::layout::LayoutError::Blank { .. }) => Err(CopyProblem::Blank),
            Err(error) => Err(CopyProblem::FailsCheck(error)),
        }
    }

    fn member_count_matches(&self, count: usize) -> Result<(), CopyProblem> {
        if count == self.member_count() {
            return Ok(());
        }
        Err(CopyProblem::MemberCount {
            named: count,
            has: self.member_count(),
        })
    }

    /// Every checkpoint slot of every present member, read as it is.
    pub fn checkpoint_copies(&self) -> Vec<MetaCopy> {
        let mut copies = Vec::new();
        for member in self.present() {
            let layout = member.layout();
            let area = IndexArea::read(member, layout.checkpoint_slot_count);
            for slot in 0..layout.checkpoint_slot_count {
                let offset = layout.checkpoint_slot_offset_bytes(slot).unwrap_or(0);
                copies.push(area.copy(member, MetaPlace::Checkpoint { slot }, offset));
            }
        }
        copies
    }

    /// Slots in the recording table (the first present member's geometry).
    pub fn recording_slot_count(&self) -> u32 {
        self.present()
            .next()
            .map_or(0, |member| member.layout().recording_slot_count)
    }

    /// Both copies of every recording table slot on every present member, by slot: the
    /// table read in one request a member (see `IndexArea`).
    pub fn all_entry_copies(&self) -> Vec<Vec<MetaCopy>> {
        let slot_count = self.recording_slot_count();
        let areas: Vec<(&Member, IndexArea)> = self
            .present()
            .map(|member| {
                let blocks =
                    member.layout().checkpoint_slot_count + slot_count * RECORDING_ENTRY_COPIES;
                (member, IndexArea::read(member, blocks))
            })
            .collect();
        (0..slot_count)
            .map(|slot| {
                areas
                    .iter()
                    .flat_map(|(member, area)| {
                        (0..RECORDING_ENTRY_COPIES).map(move |copy| {
                            let offset = member
                                .layout()
                                .recording_entry_offset_bytes(slot, copy)
                                .unwrap_or(0);
                            area.copy(member, MetaPlace::Entry { slot, copy }, offset)
                        })
                    })
                    .collect()
            })
            .collect()
    }

    /// Recording `id`'s entry as the table holds it now: the newest valid copy of its slot
    /// on any present member (two small reads a member, not the whole table), or `None`
    /// when the slot holds another recording or nothing.
    pub fn entry(&self, id: u32) -> Option<RecordingEntry> {
        self.present()
            .flat_map(|member| {
                let layout = member.layout();
                let slot = layout.recording_slot_for_id(id);
                (0..RECORDING_ENTRY_COPIES).filter_map(move |copy| {
                    let slot = slot?;
                    let offset = layout.recording_entry_offset_bytes(slot, copy)?;
                    Some(MetaCopy::read(
                        member,
                        MetaPlace::Entry { slot, copy },
                        offset,
                    ))
                })
            })
            .filter_map(|copy| self.entry_of(&copy).ok())
            .filter(|entry| entry.recording_id == id)
            .max_by_key(|entry| entry.revision)
    }

    /// Every recording the table knows, oldest first (marks left out: see
    /// [`VolumeSet::marks`]). Unreadable copies are passed over.
    pub fn recordings(&self) -> Result<Vec<RecordingEntry>, RecordingError> {
        let mut entries = self.entries()?;
        entries.retain(|entry| !entry.flags.contains(crate::layout::RecordingFlags::MARK));
        Ok(entries)
    }

    /// Every mark the table knows (format 1.7), oldest first.
    pub fn marks(&self) -> Result<Vec<RecordingEntry>, RecordingError> {
        let mut entries = self.entries()?;
        entries.retain(|entry| entry.flags.contains(crate::layout::RecordingFlags::MARK));
        Ok(entries)
    }

    /// Every entry the table knows, recordings and marks, oldest first.
    pub fn entries(&self) -> Result<Vec<RecordingEntry>, RecordingError> {
        let mut entries: Vec<RecordingEntry> = Vec::new();
        for copies in self.all_entry_copies() {
            // The highest (id, revision) wins: a slot reused by recording id + nR leaves
            // the older recording in the other copy.
            let newest = copies
                .iter()
                .filter_map(|copy| self.entry_of(copy).ok())
                .max_by_key(|entry| (entry.recording_id, entry.revision));
            entries.extend(newest);
        }
        entries.sort_by_key(|entry| entry.recording_id);
        Ok(entries)
    }

    /// Writes a checkpoint to its slot on every member, then flushes.
    pub fn write_checkpoint(&self, checkpoint: &Checkpoint) -> Result<(), RecordingError> {
        self.write_checkpoint_on(checkpoint, &[])
    }

    /// The members `live` marks (all where it is shorter): a retired member takes no
    /// metadata.
    fn live_members<'a>(&'a self, live: &'a [bool]) -> impl Iterator<Item = &'a Member> {
        self.present()
            .filter(move |member| live.get(member.index() as usize).copied().unwrap_or(true))
    }

    /// Writes a checkpoint to its slot on the members `live` marks, then flushes them.
    pub fn write_checkpoint_on(
        &self,
        checkpoint: &Checkpoint,
        live: &[bool],
    ) -> Result<(), RecordingError> {
        let bytes = checkpoint.encode()?;
        for member in self.live_members(live) {
            member.write_checkpoint(&bytes, checkpoint.generation)?;
        }
        self.flush_members(live)
    }

    /// Writes a recording entry revision to its copy on every member, then flushes.
    pub fn write_entry(&self, entry: &RecordingEntry) -> Result<(), RecordingError> {
        self.write_entry_on(entry, &[])
    }

    /// Writes a recording entry revision to the members `live` marks, then flushes them.
    pub fn write_entry_on(
        &self,
        entry: &RecordingEntry,
        live: &[bool],
    ) -> Result<(), RecordingError> {
        let bytes = entry.encode()?;
        for member in self.live_members(live) {
            member.write_entry(&bytes, entry)?;
        }
        self.flush_members(live)
    }

    pub fn flush(&self) -> Result<(), RecordingError> {
        self.flush_members(&[])
    }

    /// Flushes the members `live` marks (all where it is shorter).
    pub fn flush_members(&self, live: &[bool]) -> Result<(), RecordingError> {
        self.live_members(live).try_for_each(Member::flush)
    }
}

/// What is wrong with a metadata copy (checkpoint or entry): why it is not this set's.
/// A copy that could not be read is never taken for a blank one.
#[derive(Debug, Clone, thiserror::Error)]
pub enum CopyProblem {
    #[error("unreadable: {0}")]
    Unreadable(Arc<RecordingError>),
    /// It holds nothing (never written).
    #[error("blank")]
    Blank,
    #[error("belongs to another set ({0})")]
    OtherSet(Uuid),
    #[error("fails its check: {0}")]
    FailsCheck(crate::layout::LayoutError),
    #[error("names {named} members, the set has {has}: it cannot describe this set")]
    MemberCount { named: usize, has: usize },
    /// An entry in a table slot its id does not map to: a misdirected write.
    #[error(
        "misplaced: holds recording {recording_id}'s entry (revision {revision}), which belongs \
         in table slot {}: a write that went astray",
        belongs.map_or("none".into(), |s| s.to_string())
    )]
    Misplaced {
        recording_id: u32,
        revision: u64,
        belongs: Option<u32>,
    },
}

/// Where a metadata copy lives on a member.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(tag = "structure", rename_all = "snake_case")]
pub enum MetaPlace {
    /// Superblock copy A (`copy` 0, at offset 0) or B (`copy` 1, at the end).
    Superblock {
        copy: u32,
    },
    Checkpoint {
        slot: u32,
    },
    Entry {
        slot: u32,
        copy: u32,
    },
}

impl std::fmt::Display for MetaPlace {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            MetaPlace::Superblock { copy } => {
                write!(f, "superblock copy {}", if *copy == 0 { 'A' } else { 'B' })
            }
            MetaPlace::Checkpoint { slot } => write!(f, "checkpoint slot {slot}"),
            MetaPlace::Entry { slot, copy } => {
                write!(f, "recording table slot {slot} copy {copy}")
            }
        }
    }
}

/// One metadata block of one member as read: its bytes, or why they could not be read.
#[derive(Debug)]
pub struct MetaCopy {
    pub member_index: u16,
    pub place: MetaPlace,
    pub offset_bytes: u64,
    pub bytes: Result<Vec<u8>, Arc<RecordingError>>,
}

impl MetaCopy {
    fn read(member: &Member, place: MetaPlace, offset_bytes: u64) -> MetaCopy {
        MetaCopy {
            member_index: member.index(),
            place,
            offset_bytes,
            bytes: read_meta(&member.disk, offset_bytes, member.layout().meta_block_bytes)
                .map_err(Arc::new),
        }
    }
}

/// The first blocks of a member's index area (checkpoint slots, then the recording table),
/// read at once: one request instead of one a block, which matters when a recorder keeps
/// the drive's queue full (`ls` of a live recording read block by block waited behind it
/// for as long as it ran). Where the one read fails, each block is read on its own, so
/// that a bad block costs only its own copy.
struct IndexArea {
    start_bytes: u64,
    bytes: Option<Vec<u8>>,
}

impl IndexArea {
    fn read(member: &Member, blocks: u32) -> IndexArea {
        let layout = member.layout();
        let len = u64::from(blocks) * u64::from(layout.meta_block_bytes);
        let bytes = usize::try_from(len)
            .ok()
            .and_then(|len| read_aligned(&member.disk, layout.index_offset_bytes, len).ok());
        IndexArea {
            start_bytes: layout.index_offset_bytes,
            bytes,
        }
    }

    /// The copy at `offset_bytes`: from the area where it holds it, else read alone.
    fn copy(&self, member: &Member, place: MetaPlace, offset_bytes: u64) -> MetaCopy {
        let block = member.layout().meta_block_bytes as usize;
        let within = offset_bytes
            .checked_sub(self.start_bytes)
            .and_then(|at| usize::try_from(at).ok());
        match (&self.bytes, within) {
            (Some(bytes), Some(at)) if at + block <= bytes.len() => MetaCopy {
                member_index: member.index(),
                place,
                offset_bytes,
                bytes: Ok(bytes[at..at + block].to_vec()),
            },
            _ => MetaCopy::read(member, place, offset_bytes),
        }
    }
}

/// Reads one metadata block at `offset_bytes`.
pub fn read_meta(
    disk: &Disk,
    offset_bytes: u64,
    block_bytes: u32,
) -> Result<Vec<u8>, RecordingError> {
    read_aligned(disk, offset_bytes, block_bytes as usize)
}

/// Reads `len_bytes` at `offset_bytes` through an aligned buffer (O_DIRECT).
pub fn read_aligned(
    disk: &Disk,
    offset_bytes: u64,
    len_bytes: usize,
) -> Result<Vec<u8>, RecordingError> {
    let failed = |source| RecordingError::Io {
        what: format!(
            "reading {len_bytes} bytes at {offset_bytes:#x} of {}",
            disk.path().display()
        ),
        source,
    };
    if disk.simulated().is_some() {
        // No direct I/O to align for: straight into the result (the simulation reads its
        // whole index this way many times a case).
        let mut bytes = vec![0u8; len_bytes];
        disk.read_exact_at(&mut bytes, offset_bytes)
            .map_err(failed)?;
        return Ok(bytes);
    }
    let mut buffer = BufferPool::new(1, len_bytes.next_multiple_of(4096))?;
    let slot = buffer.slot_mut(0);
    disk.read_exact_at(&mut slot[..len_bytes], offset_bytes)
        .map_err(failed)?;
    Ok(slot[..len_bytes].to_vec())
}

/// Writes `bytes` (at most one block) as one whole metadata block, zero-padded.
pub fn write_meta(
    disk: &Disk,
    offset_bytes: u64,
    block_bytes: u32,
    bytes: &[u8],
) -> Result<(), RecordingError> {
    let mut buffer = BufferPool::new(1, (block_bytes as usize).next_multiple_of(4096))?;
    let slot = buffer.slot_mut(0);
    slot[..bytes.len()].copy_from_slice(bytes);
    disk.write_all_at(&slot[..block_bytes as usize], offset_bytes)
        .map_err(|source| RecordingError::Io {
            what: format!(
                "writing metadata at {offset_bytes:#x} of {}",
                disk.path().display()
            ),
            source,
        })
}

/// What a target holds of a volume set: which set, which member, which recordings.
#[derive(Debug, Clone, serde::Serialize)]
pub struct Membership {
    pub set_uuid: String,
    pub label: String,
    pub member: u16,
    pub member_count: u16,
    /// (id, name, stream bytes) of each recording the set's index on this target names.
    pub recordings: Vec<(u32, String, u64)>,
}

impl Membership {
    /// One line for listings: `nvrec set 1a2b... "label", member 0 of 2, 3 recordings`.
    pub fn describe(&self) -> String {
        format!(
            "nvrec set {} \"{}\", member {} of {}, {} recording(s)",
            self.set_uuid,
            self.label,
            self.member,
            self.member_count,
            self.recordings.len()
        )
    }
}

/// The volume set `disk` is a member of, if any (read only).
fn membership_of(disk: Disk) -> Option<Membership> {
    let (superblock, copies) = read_superblock(&disk).ok()?;
    // The set as this one member sees it: the others missing, in their places.
    let mut members: Vec<Option<Member>> = (0..superblock.member_count).map(|_| None).collect();
    members[superblock.member_index as usize] = Some(Member {
        disk,
        superblock: superblock.clone(),
        copies,
    });
    let set = VolumeSet {
        set_uuid: superblock.set_uuid,
        label: superblock.label.as_str().to_string(),
        chunk_size_bytes: superblock.layout.chunk_size_bytes,
        members,
        problems: Vec::new(),
    };
    let recordings = set
        .recordings()
        .unwrap_or_default()
        .iter()
        .map(|entry| {
            (
                entry.recording_id,
                entry.name.as_str().to_string(),
                entry.stream_len_bytes,
            )
        })
        .collect();
    Some(Membership {
        set_uuid: superblock.set_uuid.to_string(),
        label: superblock.label.as_str().to_string(),
        member: superblock.member_index,
        member_count: superblock.member_count,
        recordings,
    })
}

fn read_only() -> OpenOptions {
    OpenOptions {
        access: Access::Read,
        create_len_bytes: None,
        // Only read; a write opens again, with every safety check.
        safety: Safety::Force,
    }
}

/// The volume set the file or device at `path` is a member of, if any: for listings.
pub fn membership(path: &std::path::Path) -> Option<Membership> {
    let disk = Members::Paths(&[path.to_path_buf()])
        .open(&read_only())
        .ok()?
        .pop()?;
    membership_of(disk)
}

/// Refuses to format over a volume set: the first target of `members` that holds a member
/// of one is named, with the set's recordings. Targets that do not exist or cannot be read
/// are left to the open that formats them.
pub fn refuse_sets(members: Members<'_>) -> Result<(), RecordingError> {
    let disks: Vec<Disk> = match members {
        Members::Paths(paths) => paths
            .iter()
            .filter(|path| path.exists())
            .filter_map(|path| {
                Members::Paths(std::slice::from_ref(path))
                    .open(&read_only())
                    .ok()
            })
            .flatten()
            .collect(),
        Members::Sim(_) => members.open(&read_only())?,
    };
    for disk in disks {
        let path = disk.path().to_path_buf();
        if let Some(found) = membership_of(disk) {
            return Err(RecordingError::HoldsSet {
                path,
                set_uuid: found.set_uuid,
                label: found.label,
                member: found.member,
                member_count: found.member_count,
                recordings: found.recordings,
            });
        }
    }
    Ok(())
}

/// How much of each member a new set uses (`record --usable`): the rest is never written
/// or read, but for superblock copy B in the member's last meta block, and the drive keeps
/// it as spare area (over-provisioning, as `plan` advises).
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Usable {
    /// The first this many bytes of each member (all of a smaller one).
    Bytes(u64),
    /// This share of each member's capacity, in (0, 1].
    Share(f64),
}

impl Usable {
    /// The bytes of a member of `capacity_bytes` a set uses.
    pub fn bytes_of(self, capacity_bytes: u64) -> u64 {
        match self {
            Usable::Bytes(bytes) => bytes.min(capacity_bytes),
            Usable::Share(share) => (capacity_bytes as f64 * share.clamp(0.0, 1.0)) as u64,
        }
    }
}

impl std::fmt::Display for Usable {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Usable::Bytes(bytes) => write!(f, "{}", crate::unit::format_bytes(*bytes)),
            Usable::Share(share) => write!(f, "{}%", share * 100.0),
        }
    }
}

/// Refuses `usable` for an existing set whose members it would lay out otherwise: a set's
/// data area is fixed when it is made (`--usable` with `--overwrite`, or on new targets).
pub fn check_usable(set: &VolumeSet, usable: Option<Usable>) -> Result<(), RecordingError> {
    let Some(usable) = usable else {
        return Ok(());
    };
    for member in set.present() {
        let layout = member.layout();
        let full = VolumeLayout::compute_with(
            layout.volume_size_bytes,
            layout.chunk_size_bytes,
            layout.logical_block_bytes,
            layout.geometry(),
        )?;
        let asked = full.with_usable_bytes(usable.bytes_of(layout.volume_size_bytes))?;
        if asked.data_slot_count != layout.data_slot_count {
            return Err(RecordingError::Usage(format!(
                "--usable {usable}: member {} ({}) was made using {} of its {} bytes, and a \
                 set's usable part is fixed when the set is made: leave --usable out to \
                 append, or give it with --overwrite to make the set anew",
                member.index(),
                member.disk.path().display(),
                layout.data_end_bytes(),
                layout.volume_size_bytes
            )));
        }
    }
    Ok(())
}

/// Formats `members` as a new volume set and returns it open for writing; with `usable`,
/// each member's data area ends within that part of it.
pub fn format(
    members: Members<'_>,
    chunk_size_bytes: u32,
    label: &str,
    create_len_bytes: Option<u64>,
    usable: Option<Usable>,
    safety: Safety,
) -> Result<VolumeSet, RecordingError> {
    if members.is_empty() || members.len() > crate::layout::MAX_MEMBERS as usize {
        return Err(RecordingError::Usage(format!(
            "a recording needs 1 to {} targets, not {}",
            crate::layout::MAX_MEMBERS,
            members.len()
        )));
    }
    let set_uuid = new_set_uuid(&members)?;
    let created_ns = members.clock().wall_ns();
    let label =
        Label::new(label).map_err(|error| RecordingError::Usage(format!("label: {error}")))?;
    let options = OpenOptions {
        access: Access::Write,
        create_len_bytes,
        safety,
    };
    let disks = members.open(&options)?;
    // A new set is a recording's: nothing else writes its members from here on.
    for disk in &disks {
        disk.lock_for_recording()?;
    }
    let member_count = disks.len();
    let mut members = Vec::new();
    for (index, disk) in disks.into_iter().enumerate() {
        let superblock = Superblock {
            set_uuid,
            member_index: index as u16,
            member_count: member_count as u16,
            created_ns,
            label: label.clone(),
            layout: new_layout(&disk, chunk_size_bytes, usable)?,
        };
        members.push(Some(format_member(disk, superblock)?));
    }
    let set = VolumeSet {
        set_uuid,
        label: label.as_str().to_string(),
        chunk_size_bytes,
        members,
        problems: Vec::new(),
    };
    set.write_checkpoint(&first_checkpoint(set_uuid, created_ns, member_count))?;
    write_superblocks(&set)?;
    Ok(set)
}

/// The layout of a new set's member on `disk`, with chunks of `chunk_size_bytes`, its data
/// area within the `usable` part of it.
fn new_layout(
    disk: &Disk,
    chunk_size_bytes: u32,
    usable: Option<Usable>,
) -> Result<VolumeLayout, RecordingError> {
    let capacity = disk.capacity_bytes();
    let path = disk.path().display();
    let layout = VolumeLayout::compute(capacity, chunk_size_bytes, disk.logical_block_bytes())
        .map_err(|error| RecordingError::Usage(format!("{path}: {error}")))?;
    match usable {
        None => Ok(layout),
        Some(usable) => layout
            .with_usable_bytes(usable.bytes_of(capacity))
            .map_err(|error| RecordingError::Usage(format!("{path}: --usable {usable}: {error}"))),
    }
}

/// Makes `disk` a new set's member under `superblock`: its index area zeroed, so that
/// nothing of an earlier set survives there. The superblock itself is written last (see
/// `write_superblocks`).
fn format_member(disk: Disk, superblock: Superblock) -> Result<Member, RecordingError> {
    superblock.validate()?;
    let layout = superblock.layout;
    let zeros = BufferPool::new(
        1,
        (layout.index_len_bytes() as usize).next_multiple_of(4096),
    )?;
    disk.write_all_at(
        &zeros.slot(0)[..layout.index_len_bytes() as usize],
        layout.index_offset_bytes,
    )
    .map_err(|source| RecordingError::Io {
        what: format!("clearing the index of {}", disk.path().display()),
        source,
    })?;
    Ok(Member {
        disk,
        superblock,
        copies: SuperblockCopies::Both,
    })
}

/// A new set's first checkpoint: no recording yet, every member at slot 0 of lap 0.
fn first_checkpoint(set_uuid: Uuid, created_ns: u64, member_count: usize) -> Checkpoint {
    Checkpoint {
        set_uuid,
        generation: 1,
        written_ns: created_ns,
        recording_id: 0,
        recovery_window_slots: super::RECOVERY_WINDOW_SLOTS,
        recording_first_sequence: 0,
        durable_sequence_end: 0,
        durable_stream_bytes: 0,
        durable_lost_bytes: 0,
        members: vec![
            MemberPosition {
                next_slot_index: 0,
                lap: 0
            };
            member_count
        ],
        retirements: Vec::new(),
    }
}

/// Writes every member's superblock, copy B first, then A: a crash in between leaves no
/// valid-looking half set.
fn write_superblocks(set: &VolumeSet) -> Result<(), RecordingError> {
    for copy in [1usize, 0] {
        for member in set.present() {
            let bytes = member.superblock.encode()?;
            let offset = member.layout().superblock_offsets_bytes()[copy];
            write_meta(
                &member.disk,
                offset,
                member.layout().meta_block_bytes,
                &bytes,
            )?;
        }
        set.flush()?;
    }
    Ok(())
}

/// Opens the volume set on `paths`. Targets that are not members of the set the first
/// good one belongs to are listed in `problems`; missing members are `None`.
pub fn open(
    paths: &[PathBuf],
    access: Access,
    safety: Safety,
) -> Result<VolumeSet, RecordingError> {
    open_members(Members::Paths(paths), access, safety)
}

/// Opens the volume set on `members`; see [`open`].
pub fn open_members(
    members: Members<'_>,
    access: Access,
    safety: Safety,
) -> Result<VolumeSet, RecordingError> {
    let options = OpenOptions {
        access,
        create_len_bytes: None,
        safety,
    };
    let mut found: Vec<(Disk, Superblock, SuperblockCopies)> = Vec::new();
    let mut problems = Vec::new();
    let mut first_error = None;
    for disk in members.open(&options)? {
        match read_superblock(&disk) {
            Ok((superblock, copies)) => found.push((disk, superblock, copies)),
            Err((kind, why)) => {
                first_error.get_or_insert_with(|| format!("{}: {why}", disk.path().display()));
                problems.push(MemberProblem {
                    path: disk.path().to_path_buf(),
                    kind,
                    problem: why,
                });
            }
        }
    }
    let Some((_, reference, _)) = found.first() else {
        return Err(RecordingError::NotAVolumeSet(
            first_error.unwrap_or_else(|| "no targets given".into()),
        ));
    };
    let set_uuid = reference.set_uuid;
    let member_count = reference.member_count as usize;
    let label = reference.label.as_str().to_string();
    let chunk_size_bytes = reference.layout.chunk_size_bytes;
    let mut members: Vec<Option<Member>> = (0..member_count).map(|_| None).collect();
    for (disk, superblock, copies) in found {
        if superblock.set_uuid != set_uuid {
            problems.push(MemberProblem {
                path: disk.path().to_path_buf(),
                kind: ProblemKind::OtherSet,
                problem: format!(
                    "belongs to another volume set ({}), not {set_uuid}",
                    superblock.set_uuid
                ),
            });
            continue;
        }
        let index = superblock.member_index as usize;
        if superblock.layout.chunk_size_bytes != chunk_size_bytes {
            problems.push(MemberProblem {
                path: disk.path().to_path_buf(),
                kind: ProblemKind::Mismatch,
                problem: format!(
                    "says chunks of {} bytes, the set has {chunk_size_bytes}",
                    superblock.layout.chunk_size_bytes
                ),
            });
            continue;
        }
        if superblock.member_count as usize != member_count || index >= member_count {
            problems.push(MemberProblem {
                path: disk.path().to_path_buf(),
                kind: ProblemKind::Mismatch,
                problem: format!(
                    "says member {index} of {}, the set has {member_count}",
                    superblock.member_count
                ),
            });
            continue;
        }
        if let Some(existing) = &members[index] {
            problems.push(MemberProblem {
                path: disk.path().to_path_buf(),
                kind: ProblemKind::Mismatch,
                problem: format!(
                    "is member {index} again (already {})",
                    existing.disk.path().display()
                ),
            });
            continue;
        }
        members[index] = Some(Member {
            disk,
            superblock,
            copies,
        });
    }
    Ok(VolumeSet {
        set_uuid,
        label,
        chunk_size_bytes,
        members,
        problems,
    })
}

/// Reads and chooses between the two superblock copies of a target; where neither is
/// valid, what the target is and why (see [`ProblemKind`]).
fn read_superblock(disk: &Disk) -> Result<(Superblock, SuperblockCopies), (ProblemKind, String)> {
    use crate::layout::LayoutError;
    let blank = || LayoutError::Blank {
        structure: crate::layout::Structure::Superblock,
    };
    let mut read_error = None;
    let mut read = |offset: u64| match read_meta(disk, offset, 4096) {
        Ok(block) => Superblock::decode(&block[..SUPERBLOCK_SIZE_BYTES]),
        Err(error) => {
            read_error.get_or_insert_with(|| error.to_string());
            Err(blank())
        }
    };
    // An unreadable copy A is a damaged one: copy B is found from the target size.
    let a = read(0);
    // Copy B's offset from copy A, or from the target size when A is lost.
    let b_offsets: Vec<u64> = match &a {
        Ok(superblock) => vec![superblock.layout.superblock_b_offset_bytes],
        Err(_) => (12..=16)
            .map(|shift| 1u64 << shift)
            .filter_map(|meta| (disk.capacity_bytes() / meta * meta).checked_sub(meta))
            .collect(),
    };
    let mut b = Err(blank());
    for offset in b_offsets {
        b = read(offset);
        if b.is_ok() {
            break;
        }
    }
    let all_blank = matches!(
        (&a, &b),
        (
            Err(LayoutError::Blank { .. }),
            Err(LayoutError::Blank { .. })
        )
    );
    match select_superblock(a, b) {
        Ok(choice) => Ok((choice.superblock, choice.copies)),
        Err(why) => Err(match read_error {
            Some(error) => (
                ProblemKind::Unreadable,
                format!(
                    "its superblocks cannot be read ({error}): it may hold a member of this \
                     set; check the drive's connection, and do not format it"
                ),
            ),
            None if all_blank => (ProblemKind::Blank, format!("not an nvrec volume ({why})")),
            None => (ProblemKind::Damaged, format!("not an nvrec volume ({why})")),
        }),
    }
}

/// For messages: the path of a target, or a placeholder for a missing member.
pub fn describe_member(set: &VolumeSet, index: usize) -> String {
    match &set.members[index] {
        Some(member) => member.disk.path().display().to_string(),
        None => format!("(missing member {index})"),
    }
}
