//! Finding recordings from their chunks alone: every chunk names its set, recording,
//! member, slot and sequence number (`docs/FORMAT.md` 6.1), so a recording whose entries
//! were all lost can still be found and its entry rebuilt.
//!
//! A scan reads the header block of every data slot of every present member: it costs one
//! small read per slot, which is why it runs only when asked (`ls --scan`, `repair --scan`)
//! or when the set's checkpoints are all lost and the members' ends must be found.
//!
//! [`unaccounted`] is the cheap look that `ls`, `verify` and `repair` take at every
//! recording: only the slots right after its entry's end on each member, for chunks of the
//! recording that its entry does not claim. [`unnamed`] is the same look at the set's write
//! point, for a recording that no entry names at all: the chunks of a recording whose entry
//! write was lost (a drive without power-loss protection) while the index still stands as
//! it did before the recording began. [`stale_open`] tells an entry left open by a closing
//! revision that was lost the same way (the set went on as if it were closed): `unaccounted`
//! looks past its stated end too.

use super::reader::holds_redirect;
use super::volume::{read_aligned, read_meta, Member, VolumeSet};
use super::RecordingError;
use crate::control::{Control, ControlState};
use crate::layout::{
    decode_chunk, decode_chunk_header, Checkpoint, ChunkFlags, ChunkHeader, Label, MemberSpan,
    RecordingEntry, RecordingFlags, RecordingState, CHUNK_HEADER_SIZE_BYTES,
};
use std::collections::BTreeMap;

/// What the chunks of one recording say about it.
#[derive(Debug, Clone, serde::Serialize)]
pub struct Found {
    pub recording_id: u32,
    pub chunk_count: u64,
    pub first_sequence: u64,
    pub last_sequence: u64,
    pub start_ns: u64,
    pub end_ns: u64,
    /// One past the furthest payload byte: the stream's length as far as it survives.
    pub stream_len_bytes: u64,
    pub lost_bytes: u64,
    pub payload_bytes: u64,
    /// The last chunk carries END (ABORTED with it: the recording was aborted).
    pub ended: bool,
    pub aborted: bool,
    pub pattern: bool,
    /// Per member: the first and one past the last slot holding a chunk of it.
    pub spans: Vec<Option<(u64, u64)>>,
    /// Per member: the slots of its oldest and newest chunk of the recording.
    pub ends: Vec<Option<(Slotted, Slotted)>>,
}

/// A chunk's sequence number and slot.
#[derive(Debug, Clone, Copy, serde::Serialize)]
pub struct Slotted {
    pub sequence: u64,
    pub slot: u64,
}

impl Found {
    /// Where a ring's run without a hole starts: at the newest of the oldest chunks of the
    /// members that went round (older chunks on the others have lost their neighbours).
    fn surviving_first_sequence(&self) -> u64 {
        self.ends
            .iter()
            .flatten()
            .filter(|(oldest, newest)| oldest.slot > newest.slot)
            .map(|(oldest, _)| oldest.sequence)
            .max()
            .unwrap_or(self.first_sequence)
    }

    /// Whether the recording wrapped on some member: its oldest chunk there lies after its
    /// newest (a ring that went round). Only then can a scan tell a ring from a line.
    pub fn wrapped(&self) -> bool {
        self.ends
            .iter()
            .flatten()
            .any(|(oldest, newest)| oldest.slot > newest.slot)
    }
}

/// Everything a scan found on a set.
#[derive(Debug, Clone, serde::Serialize)]
pub struct Scan {
    pub recordings: Vec<Found>,
    /// The highest sequence number of any chunk of the set.
    pub highest_sequence: Option<u64>,
    /// Per member: one past the slot of its chunk with the highest sequence number.
    pub member_ends: Vec<Option<u64>>,
    pub slots_read: u64,
    pub unreadable_slots: u64,
}

/// Reads every slot header of every present member of `set`. Stops early (returning what
/// it has) when `control` leaves the run state.
pub fn scan(set: &VolumeSet, control: &Control) -> Result<Scan, RecordingError> {
    let member_count = set.member_count();
    let mut by_id: BTreeMap<u32, Found> = BTreeMap::new();
    let mut result = Scan {
        recordings: Vec::new(),
        highest_sequence: None,
        member_ends: vec![None; member_count],
        slots_read: 0,
        unreadable_slots: 0,
    };
    let mut member_highest: Vec<Option<u64>> = vec![None; member_count];
    for member in set.present() {
        let layout = member.layout();
        let index = member.index() as usize;
        for slot in 0..layout.data_slot_count {
            if control.state() != ControlState::Run {
                break;
            }
            let Some(offset) = layout.data_slot_offset_bytes(slot) else {
                break;
            };
            result.slots_read += 1;
            let Ok(bytes) = read_meta(&member.disk, offset, layout.meta_block_bytes) else {
                result.unreadable_slots += 1;
                continue;
            };
            let Ok(header) = decode_chunk_header(&bytes[..CHUNK_HEADER_SIZE_BYTES]) else {
                continue;
            };
            if header.set_uuid != set.set_uuid
                || header.member_index as usize != index
                || header.slot_index != slot
            {
                continue;
            }
            if member_highest[index].is_none_or(|h| header.sequence > h) {
                member_highest[index] = Some(header.sequence);
                result.member_ends[index] = Some(slot + 1);
            }
            add(&mut by_id, &header, member_count);
        }
    }
    result.highest_sequence = member_highest.iter().flatten().copied().max();
    result.recordings = by_id.into_values().collect();
    Ok(result)
}

fn add(by_id: &mut BTreeMap<u32, Found>, header: &ChunkHeader, member_count: usize) {
    let found = by_id.entry(header.recording_id).or_insert_with(|| Found {
        recording_id: header.recording_id,
        chunk_count: 0,
        first_sequence: header.sequence,
        last_sequence: header.sequence,
        start_ns: header.timestamp_ns,
        end_ns: header.timestamp_ns,
        stream_len_bytes: 0,
        lost_bytes: 0,
        payload_bytes: 0,
        ended: false,
        aborted: false,
        pattern: false,
        spans: vec![None; member_count],
        ends: vec![None; member_count],
    });
    found.chunk_count += 1;
    found.first_sequence = found.first_sequence.min(header.sequence);
    if header.sequence >= found.last_sequence {
        found.last_sequence = header.sequence;
        found.ended = header.flags.contains(ChunkFlags::END);
        found.aborted = header.flags.contains(ChunkFlags::ABORTED);
    }
    found.start_ns = found.start_ns.min(header.timestamp_ns);
    found.end_ns = found.end_ns.max(header.timestamp_ns);
    let end = header
        .stream_offset_bytes
        .saturating_add(header.payload_len_bytes as u64);
    found.stream_len_bytes = found.stream_len_bytes.max(end);
    found.lost_bytes = found.lost_bytes.saturating_add(header.gap_bytes);
    found.payload_bytes += header.payload_len_bytes as u64;
    found.pattern |= header.flags.contains(ChunkFlags::PATTERN);
    let this = Slotted {
        sequence: header.sequence,
        slot: header.slot_index,
    };
    let ends = &mut found.ends[header.member_index as usize];
    *ends = Some(match *ends {
        None => (this, this),
        Some((oldest, newest)) => (
            if this.sequence < oldest.sequence {
                this
            } else {
                oldest
            },
            if this.sequence > newest.sequence {
                this
            } else {
                newest
            },
        ),
    });
    let span = &mut found.spans[header.member_index as usize];
    *span = Some(match *span {
        None => (header.slot_index, header.slot_index + 1),
        Some((start, end)) => (start.min(header.slot_index), end.max(header.slot_index + 1)),
    });
}

impl Found {
    /// An entry for this recording as its chunks describe it: closed (or aborted) when its
    /// last chunk carries the end marker, else interrupted. Its name is lost with its
    /// entries; a member that holds none of its chunks gets an empty span at `default_slot`.
    pub fn rebuilt_entry(&self, set: &VolumeSet, default_slots: &[u64]) -> RecordingEntry {
        let state = match (self.ended, self.aborted) {
            (true, false) => RecordingState::Closed,
            (true, true) => RecordingState::Aborted,
            _ => RecordingState::Interrupted,
        };
        let ring = self.wrapped();
        let members = self
            .spans
            .iter()
            .zip(&self.ends)
            .enumerate()
            .map(|(index, (span, ends))| {
                // A ring's span runs from its oldest chunk to after its newest, round the
                // lap; a reader then takes one lap ending there.
                let span = match ends {
                    Some((oldest, newest)) if ring => Some((oldest.slot, newest.slot + 1)),
                    _ => *span,
                };
                let (start, end) = span.unwrap_or_else(|| {
                    let slot = default_slots.get(index).copied().unwrap_or(0);
                    (slot, slot)
                });
                MemberSpan {
                    start_slot_index: start,
                    end_slot_index: end,
                }
            })
            .collect();
        let mut flags = RecordingFlags::empty();
        if ring {
            flags |= RecordingFlags::RING;
        }
        if self.pattern {
            flags |= RecordingFlags::PATTERN;
        }
        RecordingEntry {
            set_uuid: set.set_uuid,
            recording_id: self.recording_id,
            revision: 1,
            state,
            flags,
            first_sequence: if ring {
                self.surviving_first_sequence()
            } else {
                self.first_sequence
            },
            end_sequence: self.last_sequence + 1,
            start_ns: self.start_ns,
            end_ns: self.end_ns,
            stream_len_bytes: self.stream_len_bytes,
            lost_bytes: self.lost_bytes.min(self.stream_len_bytes),
            name: Label::default(),
            members,
            retirements: Vec::new(),
            start_laps: vec![0; set.member_count()],
            overwrote: vec![false; set.member_count()],
            // A signal's facts live in the entry alone: lost with it, as its name is.
            signal: None,
            reclaimed: None,
            mark_of: None,
        }
    }
}

/// Chunks of a recording that its entry does not account for: on some member past the end
/// the entry claims, going on from its `end_sequence` without a hole. A writer that failed
/// (or a damaged entry) can leave them; read by the entry alone they are silently lost.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize)]
pub struct Unaccounted {
    pub recording_id: u32,
    /// Chunks that go on from the entry's end without a hole, on any member: the recording
    /// holds them and its entry does not claim them.
    pub chunk_count: u64,
    /// Their payload bytes.
    pub payload_bytes: u64,
    /// Their sequences: from the entry's `end_sequence` up to one before this.
    pub first_sequence: u64,
    pub end_sequence: u64,
    /// The stream's length with them (lost bytes included).
    pub stream_len_bytes: u64,
    /// Stream bytes lost to gaps among them.
    pub lost_bytes: u64,
    /// When the last of them began (the entry's end when later).
    pub end_ns: u64,
    /// The last of them carries the end marker; with `ABORTED`.
    pub end_marker: bool,
    pub aborted: bool,
    /// Where they lie, member by member (members that hold none left out).
    pub members: Vec<UnaccountedOn>,
    /// Chunks of the recording past its end that come after a sequence no member holds
    /// there: not part of a stream without a hole, which recovery discards the same way
    /// (FORMAT.md 8.4), so neither claimed nor counted above.
    pub after_hole_chunk_count: u64,
    /// The highest sequence of any chunk of the recording found past its end, after a hole
    /// or not: a set's next sequence must be past it.
    pub highest_sequence_seen: Option<u64>,
    /// Slot headers read by the look, and reads that failed (each ends its member's look).
    pub slots_read: u64,
    pub unreadable_slots: u64,
}

/// The unaccounted chunks of a recording on one member.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct UnaccountedOn {
    pub member_index: u16,
    pub chunk_count: u64,
    /// The slots that hold them, as `[first, end)` runs in the order they were written (a
    /// ring's run that goes on at slot 0 is two).
    pub slot_runs: Vec<(u64, u64)>,
    /// Where the member's span ends once it covers them.
    pub end_slot_index: u64,
    /// The run went on at slot 0 (a ring's next lap).
    pub wrapped: bool,
    /// A ring member whose run went over the slot its part of the recording started at:
    /// it overwrote its own oldest chunks of the recording.
    pub overwrote: bool,
}

/// Looks past the end of `entry` on every present member of `set` for chunks of the
/// recording that the entry does not claim.
///
/// Only the slots right after each member's span are read, one header block each, while
/// they go on with the recording there: the set's uuid, the recording's id, this member and
/// slot, a sequence at or past the entry's end and above the one before it on the member.
/// The first slot that does not (blank, another recording or set, an older chunk of this
/// one: a ring's earlier lap) ends the look, so a recording whose entry is right costs one
/// small read per member; a ring's member one more, at slot 0, where its lap may end before
/// the member's last slot. Never more than a lap of any member. An open entry (a recording
/// running now, or a crash not yet recovered) has no end to look past: nothing is read. A
/// retired member is skipped: it took no chunk after its retirement, and its slots from its
/// first unfinished write on hold failed writes and leftovers of writes sent again.
pub fn unaccounted(set: &VolumeSet, entry: &RecordingEntry) -> Unaccounted {
    let mut result = Unaccounted {
        recording_id: entry.recording_id,
        first_sequence: entry.end_sequence,
        end_sequence: entry.end_sequence,
        stream_len_bytes: entry.stream_len_bytes,
        end_ns: entry.end_ns,
        ..Unaccounted::default()
    };
    if entry.state == RecordingState::Open && !stale_open(set, entry).unwrap_or(false) {
        return result;
    }
    let ring = entry.flags.contains(RecordingFlags::RING);
    let mut walks = Vec::new();
    for member in set.present() {
        let index = member.index();
        if entry.retirements.iter().any(|r| r.member_index == index) {
            continue;
        }
        let Some(&span) = entry.members.get(index as usize) else {
            continue;
        };
        let walk = walk_past_end(set, entry, member, span.end_slot_index, &mut result);
        if !walk.is_empty() {
            walks.push((index, span, walk));
        }
    }
    // The run without a hole from the entry's end, over every member.
    let mut found: Vec<&ChunkHeader> = walks
        .iter()
        .flat_map(|(_, _, walk)| walk.iter().map(|(header, _)| header))
        .collect();
    found.sort_by_key(|header| header.sequence);
    result.highest_sequence_seen = found.last().map(|header| header.sequence);
    let mut end = entry.end_sequence;
    let mut last: Option<&ChunkHeader> = None;
    for header in found {
        if header.sequence == end {
            let Some(next) = end.checked_add(1) else {
                break; // A sequence of 2^64 - 1 was never written.
            };
            end = next;
            result.chunk_count += 1;
            result.payload_bytes += u64::from(header.payload_len_bytes);
            result.lost_bytes = result.lost_bytes.saturating_add(header.gap_bytes);
            last = Some(header);
        } else if header.sequence > end {
            result.after_hole_chunk_count += 1;
        }
    }
    result.end_sequence = end;
    if let Some(last) = last {
        result.stream_len_bytes = entry.stream_len_bytes.max(
            last.stream_offset_bytes
                .saturating_add(u64::from(last.payload_len_bytes)),
        );
        result.end_ns = entry.end_ns.max(last.timestamp_ns);
        result.end_marker = last.flags.contains(ChunkFlags::END);
        result.aborted = last.flags.contains(ChunkFlags::ABORTED);
    }
    for (index, span, walk) in walks {
        let Some(last_at) = walk.iter().rposition(|(h, _)| h.sequence < end) else {
            continue;
        };
        let held = &walk[..=last_at];
        let mut slot_runs: Vec<(u64, u64)> = Vec::new();
        for (header, _) in held {
            match slot_runs.last_mut() {
                Some(run) if run.1 == header.slot_index => run.1 += 1,
                _ => slot_runs.push((header.slot_index, header.slot_index + 1)),
            }
        }
        // Over its own start: the slot its part began at, after chunks of the recording
        // there (the member's span held some, or the run had begun elsewhere).
        let had_chunks = span.end_slot_index != span.start_slot_index
            || entry.overwrote.get(index as usize) == Some(&true);
        let overwrote = ring
            && held.iter().enumerate().any(|(at, (header, _))| {
                header.slot_index == span.start_slot_index && (at > 0 || had_chunks)
            });
        let (last_header, wrapped) = held[last_at];
        result.members.push(UnaccountedOn {
            member_index: index,
            chunk_count: held.iter().filter(|(h, _)| h.sequence < end).count() as u64,
            slot_runs,
            end_slot_index: last_header.slot_index + 1,
            wrapped,
            overwrote,
        });
    }
    result
}

/// The chunks that go on with `entry` on `member` from slot `origin` (where its span ends),
/// in slot order, each with whether the look had gone on at slot 0 before it.
fn walk_past_end(
    set: &VolumeSet,
    entry: &RecordingEntry,
    member: &Member,
    origin: u64,
    result: &mut Unaccounted,
) -> Vec<(ChunkHeader, bool)> {
    let layout = member.layout();
    let slots = layout.data_slot_count;
    let index = member.index();
    let ring = entry.flags.contains(RecordingFlags::RING);
    let mut found = Vec::new();
    if origin > slots {
        return found; // A span past the member's slots: the reader reports it.
    }
    let (mut slot, mut wrapped) = (origin, false);
    let mut last: Option<u64> = None;
    let mut looked = 0u64;
    while looked < slots {
        if slot >= slots {
            if !ring || wrapped {
                break;
            }
            (slot, wrapped) = (0, true);
        }
        if wrapped && slot >= origin {
            break; // Round to where the look began.
        }
        looked += 1;
        let Some(offset) = layout.data_slot_offset_bytes(slot) else {
            break;
        };
        let Ok(bytes) = read_meta(&member.disk, offset, layout.meta_block_bytes) else {
            result.unreadable_slots += 1;
            break;
        };
        result.slots_read += 1;
        // A retired member's write sent again here, where the entry's retirements say: its
        // sequence is lower than those before it.
        let redirected = |header: &ChunkHeader| {
            header.flags.contains(ChunkFlags::REDIRECTED)
                && entry
                    .retirements
                    .iter()
                    .any(|r| r.redirect_member == index && holds_redirect(r, slots, slot))
        };
        let goes_on = |header: &ChunkHeader| {
            header.set_uuid == set.set_uuid
                && header.recording_id == entry.recording_id
                && header.member_index == index
                && header.slot_index == slot
                && header.sequence >= entry.end_sequence
                && (redirected(header) || last.is_none_or(|last| header.sequence > last))
        };
        match decode_chunk_header(&bytes) {
            Ok(header) if goes_on(&header) => {
                // Claimed only whole, as recovery claims chunks: a power cut may keep a
                // chunk's header block and tear the rest.
                match whole_chunk(member, offset) {
                    Ok(true) => {}
                    Ok(false) => break,
                    Err(()) => {
                        result.unreadable_slots += 1;
                        break;
                    }
                }
                if !redirected(&header) {
                    last = Some(header.sequence);
                }
                found.push((header, wrapped));
                slot += 1;
            }
            // A ring's lap may end before the member's last slot (the writer laps in whole
            // writes): where the run stops, it may go on at slot 0 of the next lap, once.
            _ if ring && !wrapped && slot > 0 => (slot, wrapped) = (0, true),
            _ => break,
        }
    }
    found
}

/// Whether `entry` says that its recording is open where the set has gone on without it:
/// no recorder holds the set, the newest checkpoint names no open recording or another one,
/// and a chunk of the recording lies where it began on some member. A recorder writes a
/// checkpoint naming its recording before the recording's first chunk, and such an entry
/// is what a crash leaves (the checkpoint names it, and recovery finds its end): only a
/// revision of the entry that the drive acknowledged and did not keep (its closing one,
/// lost or misdirected), or a checkpoint naming it lost the same way, leaves the entry open
/// and the set past it. Its stated end is then short of its chunks: [`unaccounted`] looks
/// past it, and `health::check` names it.
pub fn stale_open(set: &VolumeSet, entry: &RecordingEntry) -> Result<bool, RecordingError> {
    if entry.state != RecordingState::Open || entry.flags.contains(RecordingFlags::MARK) {
        return Ok(false);
    }
    let Some(checkpoint) = set.newest_checkpoint()? else {
        return Ok(false);
    };
    if checkpoint.recording_id == entry.recording_id || set.live_recording()?.is_some() {
        return Ok(false);
    }
    Ok(set.present().any(|member| {
        let Some(span) = entry.members.get(member.index() as usize) else {
            return false;
        };
        slot_header(member, span.start_slot_index).is_some_and(|header| {
            header.set_uuid == set.set_uuid
                && header.recording_id == entry.recording_id
                && header.member_index == member.index()
                && header.slot_index == span.start_slot_index
        })
    }))
}

/// Recordings whose chunks lie at the set's write point and that no entry names: each as
/// a placeholder entry (revision 0, ending where it begins, at each member's position in
/// the newest checkpoint), which [`unaccounted`] then looks past as it does past any
/// entry's end, and [`Unaccounted::extended_entry`] turns into the entry to write.
///
/// Where a recording's entry write is lost and no checkpoint of it was made durable (a
/// power cut right after it began), the set's index stands as it did before: an idle
/// checkpoint whose positions are where the recording's first writes went. One header read
/// per member finds it; none is made while the checkpoint names a recording (recovery
/// looks past that one) or where the slot holds a recording no newer than the newest the
/// table knows (an older one's entry may have given its table slot to a newer one).
pub fn unnamed(set: &VolumeSet) -> Result<Vec<RecordingEntry>, RecordingError> {
    let Some(checkpoint) = set.newest_checkpoint()? else {
        return Ok(Vec::new());
    };
    if checkpoint.recording_id != 0 {
        return Ok(Vec::new());
    }
    // Newer than every entry the table holds: an older id it lacks was given its slot to a
    // newer entry (the table holds the last `recording_slot_count`), not lost.
    let newest_known = set
        .entries()?
        .iter()
        .map(|e| e.recording_id)
        .max()
        .unwrap_or(0);
    let mut firsts: BTreeMap<u32, ChunkHeader> = BTreeMap::new();
    for member in set.present() {
        let index = member.index();
        let Some(position) = checkpoint.members.get(index as usize) else {
            continue;
        };
        let slot = match position.next_slot_index {
            next if next >= member.layout().data_slot_count => 0,
            next => next,
        };
        // A slot that cannot be read: the reader names it where it matters.
        let Some(header) = slot_header(member, slot) else {
            continue;
        };
        let ours = header.set_uuid == set.set_uuid
            && header.member_index == index
            && header.slot_index == slot
            && header.sequence >= checkpoint.durable_sequence_end
            && header.recording_id > newest_known;
        if ours {
            let first = firsts.entry(header.recording_id).or_insert(header);
            if header.sequence < first.sequence {
                *first = header;
            }
        }
    }
    Ok(firsts
        .into_values()
        .map(|first| placeholder(set, &checkpoint, &first))
        .collect())
}

/// An entry for recording `first.recording_id` that ends where it begins: at each
/// member's position in `checkpoint`, at `first`'s sequence and time.
fn placeholder(set: &VolumeSet, checkpoint: &Checkpoint, first: &ChunkHeader) -> RecordingEntry {
    let mut flags = RecordingFlags::empty();
    if first.flags.contains(ChunkFlags::RECORDS) {
        flags |= RecordingFlags::RECORDS;
    }
    if first.flags.contains(ChunkFlags::FLOW_INDEX) {
        flags |= RecordingFlags::FLOW_INDEX;
    }
    if first.flags.contains(ChunkFlags::PATTERN) {
        flags |= RecordingFlags::PATTERN;
    }
    RecordingEntry {
        set_uuid: set.set_uuid,
        recording_id: first.recording_id,
        revision: 0,
        state: RecordingState::Closed,
        flags,
        first_sequence: first.sequence,
        end_sequence: first.sequence,
        start_ns: first.timestamp_ns,
        end_ns: first.timestamp_ns,
        stream_len_bytes: 0,
        lost_bytes: 0,
        name: Label::default(),
        members: checkpoint
            .members
            .iter()
            .map(|position| MemberSpan {
                start_slot_index: position.next_slot_index,
                end_slot_index: position.next_slot_index,
            })
            .collect(),
        retirements: Vec::new(),
        start_laps: vec![0; set.member_count()],
        overwrote: vec![false; set.member_count()],
        signal: None,
        reclaimed: None,
        mark_of: None,
    }
}

/// The chunk header in data slot `slot` of `member`, where one decodes there (one small
/// read).
pub fn slot_header(member: &Member, slot: u64) -> Option<ChunkHeader> {
    let layout = member.layout();
    let offset = layout.data_slot_offset_bytes(slot)?;
    let bytes = read_meta(&member.disk, offset, layout.meta_block_bytes).ok()?;
    decode_chunk_header(&bytes[..CHUNK_HEADER_SIZE_BYTES]).ok()
}

/// A later recording found in a slot of a recording's span: `by` wrote over it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("recording {by} wrote over it (member {member} slot {slot})")]
pub struct WrittenOver {
    pub by: u32,
    pub member: usize,
    pub slot: u64,
}

/// Whether a later recording of `set` wrote over `entry`'s chunks, looked at cheaply
/// (`ls`): on each member, the slots of its oldest and newest chunk (a linear span's first
/// and last slot; a ring that went round, the slots at and before its write point). A slot
/// holding a chunk of a later recording of the set names it; `verify` reads the whole. A
/// recording appended as a ring goes round over what the set held before it (only kept
/// marks are kept), and this is how `ls` says so.
pub fn written_over(set: &VolumeSet, entry: &RecordingEntry) -> Option<WrittenOver> {
    if entry.state == RecordingState::Open || entry.reclaimed.is_some() {
        return None;
    }
    let ring = entry.flags.contains(RecordingFlags::RING);
    for member in set.present() {
        let index = member.index() as usize;
        let span = entry.members.get(index)?;
        let slots = member.layout().data_slot_count;
        let went_round = ring && entry.overwrote.get(index) == Some(&true);
        let oldest = match went_round {
            true => span.end_slot_index % slots.max(1),
            false => span.start_slot_index,
        };
        if span.start_slot_index == span.end_slot_index && !went_round {
            continue; // No chunk of it on this member.
        }
        let newest = (span.end_slot_index + slots - 1) % slots.max(1);
        for slot in [oldest, newest] {
            let Some(header) = slot_header(member, slot) else {
                continue;
            };
            if header.set_uuid == set.set_uuid
                && header.slot_index == slot
                && header.recording_id > entry.recording_id
            {
                return Some(WrittenOver {
                    by: header.recording_id,
                    member: index,
                    slot,
                });
            }
        }
    }
    None
}

/// Whether the chunk at `offset` on `member` decodes whole (its payload's check too);
/// `Err` where it cannot be read.
fn whole_chunk(member: &Member, offset: u64) -> Result<bool, ()> {
    let chunk_bytes = member.layout().chunk_size_bytes as usize;
    let bytes = read_aligned(&member.disk, offset, chunk_bytes).map_err(|_| ())?;
    Ok(decode_chunk(&bytes).is_ok())
}

impl Unaccounted {
    /// Whether the look past the entry's end found nothing and read every slot it meant
    /// to: the entry is known to account for every chunk of its recording.
    pub fn is_clear(&self) -> bool {
        self.chunk_count == 0 && self.unreadable_slots == 0
    }

    /// `entry` as its next revision, extended over the unaccounted chunks: its end, each
    /// member's span, the stream's length, its lost bytes and its end time go on to the
    /// last of them, and its state is what that chunk says (closed or aborted with the end
    /// marker; without it an aborted recording stays aborted, any other is interrupted).
    /// Only the revision changes where there is nothing to extend over.
    pub fn extended_entry(&self, entry: &RecordingEntry) -> RecordingEntry {
        let mut next = entry.clone();
        next.revision = entry.revision.saturating_add(1);
        if self.chunk_count == 0 {
            return next;
        }
        next.end_sequence = self.end_sequence;
        next.stream_len_bytes = self.stream_len_bytes;
        next.lost_bytes = entry
            .lost_bytes
            .saturating_add(self.lost_bytes)
            .min(next.stream_len_bytes);
        next.end_ns = self.end_ns;
        next.state = match (self.end_marker, self.aborted, entry.state) {
            (true, false, _) => RecordingState::Closed,
            (true, true, _) | (false, _, RecordingState::Aborted) => RecordingState::Aborted,
            _ => RecordingState::Interrupted,
        };
        for on in &self.members {
            let index = on.member_index as usize;
            if let Some(span) = next.members.get_mut(index) {
                span.end_slot_index = on.end_slot_index;
            }
            if on.overwrote {
                if let Some(overwrote) = next.overwrote.get_mut(index) {
                    *overwrote = true;
                }
            }
        }
        next
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::control::Progress;
    use crate::device::{Access, Safety};
    use crate::engine::{EngineChoice, SimDisks};
    use crate::layout::{Checkpoint, MemberPosition};
    use crate::pattern::Pattern;
    use crate::recording::disk::Members;
    use crate::recording::reader::{self, Item};
    use crate::recording::volume::{self, write_meta};
    use crate::recording::writer::{self, RecordOptions};
    use crate::recording::{repair, Fill, Stripe};
    use crate::source::PatternSource;

    const DISK_BYTES: u64 = 4 << 20;
    const CHUNK_BYTES: u32 = 8192;
    const LOGICAL_BLOCK_BYTES: u32 = 512;
    const SEED: u64 = 11;

    /// Small chunks, in turn on the members, so that every member holds some of any run.
    fn linear(limit_bytes: u64) -> RecordOptions {
        RecordOptions {
            chunk_size_bytes: CHUNK_BYTES,
            io_chunk_count: 2,
            queue_depth: 2,
            buffer_bytes: 8 * 2 * u64::from(CHUNK_BYTES),
            stripe: Stripe::RoundRobin,
            limit_bytes: Some(limit_bytes),
            pattern: true,
            label: "past the end".into(),
            ..RecordOptions::default()
        }
    }

    /// `members` simulated disks holding each of `runs` in turn, closed cleanly.
    fn recorded(members: usize, runs: &[RecordOptions]) -> SimDisks {
        let sim = SimDisks::new(members, DISK_BYTES, LOGICAL_BLOCK_BYTES, 1);
        for (at, options) in runs.iter().enumerate() {
            let options = RecordOptions {
                append: at > 0,
                ..options.clone()
            };
            writer::record_on(
                Members::Sim(&sim),
                &mut PatternSource(Pattern::new(SEED)),
                &options,
                &Control::new(),
                &Progress::default(),
            )
            .unwrap();
        }
        sim.crash();
        SimDisks::from_images(sim.power_cut_images().unwrap(), LOGICAL_BLOCK_BYTES, 1)
    }

    fn open(sim: &SimDisks) -> VolumeSet {
        volume::open_members(Members::Sim(sim), Access::Write, Safety::Check).unwrap()
    }

    /// Every chunk of recording `id` on the members, read slot by slot.
    fn chunks_of(set: &VolumeSet, id: u32) -> Vec<ChunkHeader> {
        let mut headers = Vec::new();
        for member in set.present() {
            let layout = member.layout();
            for slot in 0..layout.data_slot_count {
                let offset = layout.data_slot_offset_bytes(slot).unwrap();
                let bytes = read_meta(&member.disk, offset, layout.meta_block_bytes).unwrap();
                if let Ok(header) = decode_chunk_header(&bytes) {
                    if header.set_uuid == set.set_uuid
                        && header.recording_id == id
                        && header.member_index == member.index()
                        && header.slot_index == slot
                    {
                        headers.push(header);
                    }
                }
            }
        }
        headers
    }

    /// Writes `entry` as a writer that claimed all but its last `cut` chunks would have
    /// closed it (end, spans and stream length at the chunk before them); returns it.
    fn shorten(set: &VolumeSet, entry: &RecordingEntry, cut: u64) -> RecordingEntry {
        let end = entry.end_sequence - cut;
        let kept: Vec<ChunkHeader> = chunks_of(set, entry.recording_id)
            .into_iter()
            .filter(|h| h.sequence < end)
            .collect();
        let last = kept.iter().max_by_key(|h| h.sequence).unwrap();
        let mut short = entry.clone();
        short.revision += 1;
        short.end_sequence = end;
        short.stream_len_bytes = last.stream_offset_bytes + u64::from(last.payload_len_bytes);
        for (index, span) in short.members.iter_mut().enumerate() {
            if let Some(h) = kept
                .iter()
                .filter(|h| h.member_index as usize == index)
                .max_by_key(|h| h.sequence)
            {
                span.end_slot_index = h.slot_index + 1;
            }
        }
        set.write_entry(&short).unwrap();
        short
    }

    /// `entry` as its next revision, nothing else changed.
    fn next_revision_of(entry: &RecordingEntry) -> RecordingEntry {
        RecordingEntry {
            revision: entry.revision + 1,
            ..entry.clone()
        }
    }

    /// Reads `entry` as verify does: (chunks, missing, damaged), every payload checked.
    fn read_back(set: &VolumeSet, entry: &RecordingEntry) -> (u64, u64, u64) {
        let pattern = Pattern::new(SEED);
        let summary = reader::read_recording(
            set,
            entry,
            EngineChoice::Auto,
            &Control::new(),
            &Progress::default(),
            &mut |item| {
                if let Item::Chunk { header, payload } = item {
                    pattern
                        .check(header.stream_offset_bytes, payload, 0)
                        .unwrap();
                }
                true
            },
        )
        .unwrap();
        (
            summary.chunk_count,
            summary.missing_chunk_count,
            summary.damage_count,
        )
    }

    #[test]
    fn a_recording_whose_entry_is_right_costs_one_read_per_member() {
        let sim = recorded(2, &[linear(300 << 10)]);
        let set = open(&sim);
        let entry = set.recordings().unwrap().remove(0);
        let found = unaccounted(&set, &entry);
        assert_eq!(found.chunk_count, 0, "{found:?}");
        assert_eq!(found.after_hole_chunk_count, 0, "{found:?}");
        assert!(found.members.is_empty());
        assert_eq!(found.slots_read, 2, "the slot after each member's end");
        assert_eq!(found.extended_entry(&entry), next_revision_of(&entry));
    }

    #[test]
    fn chunks_past_a_short_entry_are_found_and_extending_over_them_gives_the_entry_back() {
        let sim = recorded(2, &[linear(300 << 10)]);
        let set = open(&sim);
        let entry = set.recordings().unwrap().remove(0);
        let short = shorten(&set, &entry, 10);
        assert_eq!(set.recordings().unwrap()[0], short);
        let cut: Vec<ChunkHeader> = chunks_of(&set, 1)
            .into_iter()
            .filter(|h| h.sequence >= short.end_sequence)
            .collect();
        assert_eq!(cut.len(), 10);
        let found = unaccounted(&set, &short);
        assert_eq!(found.chunk_count, 10, "{found:?}");
        assert_eq!(
            found.payload_bytes,
            cut.iter()
                .map(|h| u64::from(h.payload_len_bytes))
                .sum::<u64>()
        );
        assert_eq!(found.first_sequence, short.end_sequence);
        assert_eq!(found.end_sequence, entry.end_sequence);
        assert_eq!(found.highest_sequence_seen, Some(entry.end_sequence - 1));
        assert_eq!(found.after_hole_chunk_count, 0);
        assert!(found.end_marker && !found.aborted);
        assert_eq!(found.members.len(), 2, "round robin: both hold some");
        for on in &found.members {
            let index = on.member_index as usize;
            let here = cut.iter().filter(|h| h.member_index == on.member_index);
            assert_eq!(on.chunk_count, here.count() as u64);
            let span = (
                short.members[index].end_slot_index,
                entry.members[index].end_slot_index,
            );
            assert_eq!(on.slot_runs, vec![span]);
            assert_eq!(on.end_slot_index, entry.members[index].end_slot_index);
            assert!(!on.wrapped && !on.overwrote);
        }
        // The look went over the cut chunks and one slot more on each member.
        assert_eq!(found.slots_read, 10 + 2);
        assert_eq!(
            found.extended_entry(&short),
            next_revision_of(&short).with(&entry)
        );
    }

    #[test]
    fn the_next_recordings_chunks_are_not_counted_for_the_one_before() {
        let sim = recorded(2, &[linear(200 << 10), linear(200 << 10)]);
        let set = open(&sim);
        let entries = set.recordings().unwrap();
        assert_eq!(entries.len(), 2);
        for entry in &entries {
            let found = unaccounted(&set, entry);
            assert_eq!(found.chunk_count, 0, "{found:?}");
            assert_eq!(found.after_hole_chunk_count, 0, "{found:?}");
        }
        // The second begins right after the first on each member.
        for index in 0..2 {
            assert_eq!(
                entries[1].members[index].start_slot_index,
                entries[0].members[index].end_slot_index
            );
        }
        let short = shorten(&set, &entries[0], 6);
        let found = unaccounted(&set, &short);
        assert_eq!(found.chunk_count, 6, "{found:?}");
        assert_eq!(found.end_sequence, entries[0].end_sequence);
        assert_eq!(
            found.extended_entry(&short),
            next_revision_of(&short).with(&entries[0])
        );
        assert_eq!(unaccounted(&set, &entries[1]).chunk_count, 0);
    }

    #[test]
    fn a_wrapped_ring_has_nothing_past_its_end_and_a_short_one_is_found() {
        let ring = RecordOptions {
            fill: Fill::Ring { trim: false },
            ..linear(6 << 20)
        };
        let sim = recorded(2, &[linear(200 << 10), ring]);
        let set = open(&sim);
        let entries = set.recordings().unwrap();
        let ring = &entries[1];
        assert!(ring.flags.contains(RecordingFlags::RING));
        assert!(ring.overwrote.iter().all(|&o| o), "{:?}", ring.overwrote);
        for entry in &entries {
            let found = unaccounted(&set, entry);
            assert_eq!(found.chunk_count, 0, "{found:?}");
            assert_eq!(found.after_hole_chunk_count, 0, "{found:?}");
            assert!(found.slots_read <= 4, "{found:?}");
        }
        // Where member 0's last lap began: the chunk at slot 0, and the one before it there
        // (at the end of the lap before).
        let on_0: Vec<ChunkHeader> = chunks_of(&set, ring.recording_id)
            .into_iter()
            .filter(|h| h.member_index == 0)
            .collect();
        let lap_start = on_0.iter().find(|h| h.slot_index == 0).unwrap().sequence;
        let lap_before_end = on_0
            .iter()
            .map(|h| h.sequence)
            .filter(|&q| q < lap_start)
            .max()
            .unwrap();
        // A short ring entry: its older laps follow the chunks it does not claim, and end
        // the look; a cut from the end of a lap goes on at slot 0.
        for cut in [1, 7, 40, ring.end_sequence - lap_before_end] {
            let short = shorten(&set, ring, cut);
            let found = unaccounted(&set, &short);
            assert_eq!(found.chunk_count, cut, "{found:?}");
            assert_eq!(found.after_hole_chunk_count, 0, "{found:?}");
            let wrapped = found.members.iter().any(|on| on.wrapped);
            assert_eq!(wrapped, short.end_sequence <= lap_before_end, "{found:?}");
            assert_eq!(
                found.extended_entry(&short),
                next_revision_of(&short).with(ring)
            );
            set.write_entry(&next_revision_of(&short).with(ring))
                .unwrap();
        }
    }

    #[test]
    fn chunks_after_a_hole_are_counted_apart_and_not_claimed() {
        let sim = recorded(2, &[linear(300 << 10)]);
        let set = open(&sim);
        let entry = set.recordings().unwrap().remove(0);
        let short = shorten(&set, &entry, 12);
        let cut: Vec<ChunkHeader> = chunks_of(&set, 1)
            .into_iter()
            .filter(|h| h.sequence >= short.end_sequence)
            .collect();
        // The first chunk past the end is lost (blank): the others do not go on from the
        // entry's end.
        let first = cut
            .iter()
            .find(|h| h.sequence == short.end_sequence)
            .unwrap();
        let member = set.members[first.member_index as usize].as_ref().unwrap();
        let layout = member.layout();
        let offset = layout.data_slot_offset_bytes(first.slot_index).unwrap();
        let blank = vec![0u8; layout.meta_block_bytes as usize];
        write_meta(&member.disk, offset, layout.meta_block_bytes, &blank).unwrap();
        let found = unaccounted(&set, &short);
        assert_eq!(found.chunk_count, 0, "{found:?}");
        assert!(found.members.is_empty());
        // The look ends at the blank slot on its member and sees every chunk on the other.
        let elsewhere: Vec<&ChunkHeader> = cut
            .iter()
            .filter(|h| h.member_index != first.member_index)
            .collect();
        assert!(!elsewhere.is_empty());
        assert_eq!(
            found.after_hole_chunk_count,
            elsewhere.len() as u64,
            "{found:?}"
        );
        assert_eq!(
            found.highest_sequence_seen,
            elsewhere.iter().map(|h| h.sequence).max()
        );
        assert_eq!(found.extended_entry(&short), next_revision_of(&short));
    }

    #[test]
    fn repair_extends_a_short_entry_and_moves_a_checkpoint_left_at_its_end() {
        let sim = recorded(2, &[linear(300 << 10)]);
        let mut set = open(&sim);
        let entry = set.recordings().unwrap().remove(0);
        let short = shorten(&set, &entry, 10);
        // As a writer that also checkpointed only what the entry claims would leave it.
        let checkpoint = set.newest_checkpoint().unwrap().unwrap();
        set.write_checkpoint(&Checkpoint {
            generation: checkpoint.generation + 1,
            durable_sequence_end: short.end_sequence,
            members: short
                .members
                .iter()
                .map(|span| MemberPosition {
                    next_slot_index: span.end_slot_index,
                    lap: 0,
                })
                .collect(),
            ..checkpoint
        })
        .unwrap();
        let claimed = short.end_sequence - short.first_sequence;
        assert_eq!(read_back(&set, &short), (claimed, 0, 0));
        let report = repair::repair(&mut set, false, &Control::new()).unwrap();
        assert!(report.found.is_empty(), "{:?}", report.found);
        assert_eq!(report.extended.len(), 1, "{report:?}");
        assert_eq!(report.extended[0].chunk_count, 10);
        assert!(report.unaccounted_left.is_empty(), "{report:?}");
        assert!(
            report.failed.is_empty() && report.left.is_empty(),
            "{report:?}"
        );
        let repaired = set.recordings().unwrap().remove(0);
        assert_eq!(repaired, next_revision_of(&short).with(&entry));
        assert_eq!(
            read_back(&set, &repaired),
            (entry.end_sequence - entry.first_sequence, 0, 0)
        );
        let moved = set.newest_checkpoint().unwrap().unwrap();
        assert_eq!(moved.recording_id, 0);
        assert_eq!(moved.durable_sequence_end, entry.end_sequence);
        for (position, span) in moved.members.iter().zip(&entry.members) {
            assert_eq!(position.next_slot_index, span.end_slot_index);
        }
        // The next recording goes after them: both read back whole.
        writer::record_on(
            Members::Sim(&sim),
            &mut PatternSource(Pattern::new(SEED)),
            &RecordOptions {
                append: true,
                ..linear(100 << 10)
            },
            &Control::new(),
            &Progress::default(),
        )
        .unwrap();
        let set = open(&sim);
        let entries = set.recordings().unwrap();
        assert_eq!(entries[1].first_sequence, entry.end_sequence);
        for entry in &entries {
            let (_, missing, damaged) = read_back(&set, entry);
            assert_eq!((missing, damaged), (0, 0));
            assert_eq!(unaccounted(&set, entry).chunk_count, 0);
        }
    }

    /// The cut chunks of `short`, in sequence order.
    fn cut_chunks(set: &VolumeSet, short: &RecordingEntry) -> Vec<ChunkHeader> {
        let mut cut: Vec<ChunkHeader> = chunks_of(set, short.recording_id)
            .into_iter()
            .filter(|h| h.sequence >= short.end_sequence)
            .collect();
        cut.sort_by_key(|h| h.sequence);
        cut
    }

    #[test]
    fn a_chunk_past_the_end_whose_payload_a_power_cut_tore_is_not_claimed() {
        let sim = recorded(1, &[linear(300 << 10)]);
        let mut set = open(&sim);
        let entry = set.recordings().unwrap().remove(0);
        let short = shorten(&set, &entry, 6);
        let cut = cut_chunks(&set, &short);
        // The third cut chunk keeps its header block; the block after it is torn.
        let torn = cut[2];
        let member = set.present().next().unwrap();
        let layout = *member.layout();
        let offset = layout.data_slot_offset_bytes(torn.slot_index).unwrap();
        let block = layout.meta_block_bytes;
        write_meta(
            &member.disk,
            offset + u64::from(block),
            block,
            &vec![0xa5; block as usize],
        )
        .unwrap();
        let found = unaccounted(&set, &short);
        assert_eq!(found.chunk_count, 2, "{found:?}");
        assert_eq!(found.end_sequence, torn.sequence);
        assert!(!found.end_marker, "the end marker lies past the tear");
        let report = repair::repair(&mut set, false, &Control::new()).unwrap();
        assert_eq!(report.extended.len(), 1, "{report:?}");
        assert_eq!(report.extended[0].chunk_count, 2);
        let repaired = set.recordings().unwrap().remove(0);
        assert_eq!(repaired.end_sequence, torn.sequence);
        assert_eq!(repaired.state, RecordingState::Interrupted);
        let claimed = repaired.end_sequence - repaired.first_sequence;
        assert_eq!(
            read_back(&set, &repaired),
            (claimed, 0, 0),
            "every claimed chunk whole"
        );
    }

    #[test]
    fn a_slot_past_the_end_that_cannot_be_read_never_leaves_the_entry_clear() {
        let sim = recorded(1, &[linear(300 << 10)]);
        let mut set = open(&sim);
        let entry = set.recordings().unwrap().remove(0);
        let short = shorten(&set, &entry, 4);
        let first_cut = cut_chunks(&set, &short)[0];
        let layout = *set.present().next().unwrap().layout();
        sim.fail(crate::engine::RangeFault {
            disk: 0,
            op: crate::engine::IoOp::Read,
            offset_bytes: layout.data_slot_offset_bytes(first_cut.slot_index).unwrap(),
            len_bytes: u64::from(layout.chunk_size_bytes),
            errno: libc::EIO,
        });
        let found = unaccounted(&set, &short);
        assert_eq!(
            (found.chunk_count, found.unreadable_slots),
            (0, 1),
            "{found:?}"
        );
        assert!(!found.is_clear());
        assert_eq!(
            repair::unaccounted_chunks(&set).unwrap(),
            vec![found.clone()]
        );
        let report = repair::repair(&mut set, false, &Control::new()).unwrap();
        assert!(report.extended.is_empty(), "{report:?}");
        assert_eq!(
            report.unaccounted_left,
            vec![found],
            "repair never calls it whole"
        );
    }

    /// What the extended entry must be: `self` (the next revision of the short one) with
    /// the ends of the entry the writer would have written.
    trait With {
        fn with(self, whole: &RecordingEntry) -> RecordingEntry;
    }

    impl With for RecordingEntry {
        fn with(self, whole: &RecordingEntry) -> RecordingEntry {
            RecordingEntry {
                revision: self.revision,
                ..whole.clone()
            }
        }
    }
}
