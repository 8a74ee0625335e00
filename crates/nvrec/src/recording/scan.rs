//! Finding recordings from their chunks alone: every chunk names its set, recording,
//! member, slot and sequence number (`docs/FORMAT.md` 6.1), so a recording whose entries
//! were all lost can still be found and its entry rebuilt.
//!
//! A scan reads the header block of every data slot of every present member: it costs one
//! small read per slot, which is why it runs only when asked (`ls --scan`, `repair --scan`)
//! or when the set's checkpoints are all lost and the members' ends must be found.

use super::volume::{read_meta, VolumeSet};
use super::RecordingError;
use crate::layout::{
    decode_chunk_header, ChunkFlags, ChunkHeader, Label, MemberSpan, RecordingEntry,
    RecordingFlags, RecordingState, CHUNK_HEADER_SIZE_BYTES,
};
use crate::stream::{Control, ControlState};
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
        }
    }
}
