//! Listing a set's recordings as they really are: a crashed recording's entry closed (in
//! memory, or on the drives by [`recover`]) at the end recovery finds after its last
//! checkpoint, and the one a recorder writes now marked open.

use super::recovery::search_end;
use crate::layout::{
    Checkpoint, MemberPosition, RecordingEntry, RecordingFlags, RecordingState, Retirement,
};
use crate::recording::volume::VolumeSet;
use crate::recording::RecordingError;

/// Where a crashed recording really ends, found from the last checkpoint forward.
#[derive(Debug, Clone, serde::Serialize)]
pub struct RecoveredEnd {
    pub recording_id: u32,
    /// Closed or aborted (its END chunk was found: only the entry's update was lost), or
    /// interrupted.
    #[serde(serialize_with = "state_word")]
    pub state: RecordingState,
    pub end_sequence: u64,
    pub highest_sequence_seen: Option<u64>,
    pub end_ns: u64,
    pub stream_len_bytes: u64,
    pub lost_bytes: u64,
    pub end_slots: Vec<u64>,
    pub laps: Vec<u64>,
    /// Chunks found after the checkpoint and kept.
    pub recovered_chunk_count: u64,
    /// Slots read by the search (bounded by the recovery window).
    pub searched_slot_count: u64,
    /// Members retired before the crash, from the checkpoint.
    #[serde(skip)]
    pub retirements: Vec<Retirement>,
}

/// A recovered state as one lowercase word (`closed`, `aborted`, `interrupted`).
fn state_word<S: serde::Serializer>(
    state: &RecordingState,
    serializer: S,
) -> Result<S::Ok, S::Error> {
    let word = match state {
        RecordingState::Closed => "closed",
        RecordingState::Aborted => "aborted",
        _ => "interrupted",
    };
    serializer.serialize_str(word)
}

/// Every recording of `set` as a listing shows it now: [`recordings`], with the one a
/// recorder is writing right now (another process, or this one) marked open, whatever its
/// entry says.
pub fn listed(set: &VolumeSet) -> Result<Vec<RecordingEntry>, RecordingError> {
    let mut entries = recordings(set)?;
    if let Some(live) = set.live_recording()? {
        for entry in entries.iter_mut().filter(|e| e.recording_id == live) {
            entry.state = RecordingState::Open;
        }
    }
    Ok(entries)
}

/// The recordings of a set as they really are: entries of crashed recordings are closed
/// (in memory) at their recovered end, marked interrupted.
pub fn recordings(set: &VolumeSet) -> Result<Vec<RecordingEntry>, RecordingError> {
    let mut entries = set.recordings()?;
    if let Some((checkpoint, recovered)) = recovered_end(set)? {
        if let Some(entry) = entries
            .iter_mut()
            .find(|e| e.recording_id == checkpoint.recording_id)
        {
            apply_recovery(entry, &recovered);
        }
    }
    Ok(entries)
}

fn apply_recovery(entry: &mut RecordingEntry, recovered: &RecoveredEnd) {
    entry.state = recovered.state;
    entry.end_sequence = recovered.end_sequence;
    entry.end_ns = recovered.end_ns;
    entry.stream_len_bytes = recovered.stream_len_bytes;
    entry.lost_bytes = recovered.lost_bytes;
    if entry.retirements.is_empty() {
        entry.retirements = recovered.retirements.clone();
    }
    for (span, &end) in entry.members.iter_mut().zip(&recovered.end_slots) {
        span.end_slot_index = end;
    }
    // Which ring members wrapped over their own start: a lap and a bit since they began.
    if entry.flags.contains(RecordingFlags::LAPS) {
        entry.overwrote = (0..entry.members.len())
            .map(|i| {
                let start_lap = entry.start_laps.get(i).copied().unwrap_or(0);
                let end_lap = recovered.laps.get(i).copied().unwrap_or(0) as u32;
                let laps = end_lap.wrapping_sub(start_lap);
                let span = entry.members[i];
                laps >= 2 || laps == 1 && span.end_slot_index > span.start_slot_index
            })
            .collect();
    }
}

/// Finds the end of a recording that was open at the last checkpoint (a crash), reading
/// only from the checkpoint forward. `None` when no recording was open.
///
/// A recording another program is writing right now is searched only for the chunks
/// stamped before the search began, or the search would chase the recorder to its end (at
/// a recorder's full rate, `ls` waited for as long as the recording ran); one that ended
/// meanwhile is searched again whole. A crashed recording is searched whole, whatever its
/// clock said.
pub fn recovered_end(
    set: &VolumeSet,
) -> Result<Option<(Checkpoint, RecoveredEnd)>, RecordingError> {
    let live = set.live_recording()?.is_some();
    let found = search_end(set, live)?;
    if live && set.live_recording()?.is_none() {
        return search_end(set, false);
    }
    Ok(found)
}

/// Recovers and closes a crashed recording on disk (entry and checkpoint), so that the set
/// can take a new recording. Returns what was found, or `None` if nothing was open.
pub fn recover(set: &VolumeSet) -> Result<Option<RecoveredEnd>, RecordingError> {
    let Some((checkpoint, recovered)) = recovered_end(set)? else {
        // A crash after the entry was closed leaves only the idle checkpoint missing.
        if let Some(checkpoint) = set.newest_checkpoint()? {
            if checkpoint.recording_id != 0 {
                let entries = set.recordings()?;
                if let Some(entry) = entries
                    .iter()
                    .find(|e| e.recording_id == checkpoint.recording_id)
                {
                    let positions = entry
                        .members
                        .iter()
                        .zip(&checkpoint.members)
                        .map(|(span, position)| MemberPosition {
                            next_slot_index: span.end_slot_index,
                            lap: position.lap,
                        })
                        .collect();
                    set.write_checkpoint(&Checkpoint {
                        generation: checkpoint.generation.saturating_add(1),
                        written_ns: set.clock().wall_ns(),
                        recording_id: 0,
                        recording_first_sequence: 0,
                        durable_sequence_end: entry
                            .end_sequence
                            .max(checkpoint.durable_sequence_end),
                        members: positions,
                        ..checkpoint
                    })?;
                }
            }
        }
        return Ok(None);
    };
    let mut entries = set.recordings()?;
    if let Some(entry) = entries
        .iter_mut()
        .find(|e| e.recording_id == checkpoint.recording_id)
    {
        apply_recovery(entry, &recovered);
        entry.revision += 1;
        set.write_entry(entry)?;
        crate::recording::marks::close_open(set, entry)?;
    }
    let next_sequence = recovered.end_sequence.max(
        recovered
            .highest_sequence_seen
            .map_or(0, |h| h.saturating_add(1)),
    );
    set.write_checkpoint(&Checkpoint {
        generation: checkpoint.generation.saturating_add(1),
        written_ns: set.clock().wall_ns(),
        recording_id: 0,
        recording_first_sequence: 0,
        durable_sequence_end: next_sequence,
        durable_stream_bytes: recovered.stream_len_bytes,
        durable_lost_bytes: recovered.lost_bytes,
        members: recovered
            .end_slots
            .iter()
            .zip(&recovered.laps)
            .map(|(&slot, &lap)| MemberPosition {
                next_slot_index: slot,
                lap,
            })
            .collect(),
        retirements: Vec::new(),
        ..checkpoint
    })?;
    Ok(Some(recovered))
}

/// Picks recording `id`, or the last one.
pub fn select(
    entries: &[RecordingEntry],
    id: Option<u32>,
) -> Result<RecordingEntry, RecordingError> {
    match id {
        Some(id) => entries
            .iter()
            .find(|e| e.recording_id == id)
            .cloned()
            .ok_or(RecordingError::NoSuchRecording(id)),
        None => entries.last().cloned().ok_or(RecordingError::NoRecordings),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::layout::MemberSpan;
    use crate::layout::{sample_entry, sample_retirement};

    /// What recovery found of the sample entry's recording after a crash: its end, and
    /// each member's end slot and lap.
    fn recovered(state: RecordingState, laps: Vec<u64>) -> RecoveredEnd {
        RecoveredEnd {
            recording_id: 5,
            state,
            end_sequence: 12_345,
            highest_sequence_seen: Some(12_400),
            end_ns: 1_767_225_630_000_000_000,
            stream_len_bytes: 2_345 * 131_000,
            lost_bytes: 8192,
            end_slots: vec![1200, 1150, 0],
            laps,
            recovered_chunk_count: 345,
            searched_slot_count: 1000,
            retirements: vec![sample_retirement()],
        }
    }

    #[test]
    fn a_crashed_entry_takes_the_recovered_end_and_its_state() {
        for (state, word) in [
            (RecordingState::Closed, "closed"),
            (RecordingState::Aborted, "aborted"),
            (RecordingState::Interrupted, "interrupted"),
        ] {
            let mut entry = RecordingEntry {
                state: RecordingState::Open,
                retirements: Vec::new(),
                ..sample_entry()
            };
            let found = recovered(state, vec![0, 0, 0]);
            assert_eq!(serde_json::to_value(&found).unwrap()["state"], word);
            apply_recovery(&mut entry, &found);
            assert_eq!(entry.state, state);
            assert_eq!(entry.end_sequence, 12_345);
            assert_eq!(entry.stream_len_bytes, 2_345 * 131_000);
            assert_eq!(entry.lost_bytes, 8192);
            let ends: Vec<u64> = entry.members.iter().map(|m| m.end_slot_index).collect();
            assert_eq!(ends, vec![1200, 1150, 0]);
            // The checkpoint's retirements, where the entry had none of its own.
            assert_eq!(entry.retirements, vec![sample_retirement()]);
        }
    }

    #[test]
    fn a_ring_member_wrapped_where_it_went_a_lap_and_a_bit_past_its_start() {
        let mut entry = RecordingEntry {
            state: RecordingState::Open,
            flags: RecordingFlags::RING | RecordingFlags::LAPS,
            start_laps: vec![3, 3, 3],
            members: vec![
                MemberSpan {
                    start_slot_index: 100,
                    end_slot_index: 0,
                };
                3
            ],
            ..sample_entry()
        };
        // Member 0: one lap on, past its start (1200 > 100); member 1: two laps on;
        // member 2: one lap on but not back at its start (0 < 100).
        let mut found = recovered(RecordingState::Interrupted, vec![4, 5, 4]);
        found.end_slots = vec![1200, 50, 0];
        apply_recovery(&mut entry, &found);
        assert_eq!(entry.overwrote, vec![true, true, false]);
    }

    #[test]
    fn a_recording_is_picked_by_its_id_or_the_last_and_a_wrong_id_is_named() {
        let entries = vec![
            sample_entry(),
            RecordingEntry {
                recording_id: 6,
                ..sample_entry()
            },
        ];
        assert_eq!(select(&entries, None).unwrap().recording_id, 6);
        assert_eq!(select(&entries, Some(5)).unwrap().recording_id, 5);
        assert!(matches!(
            select(&entries, Some(9)),
            Err(RecordingError::NoSuchRecording(9))
        ));
        assert!(matches!(
            select(&[], None),
            Err(RecordingError::NoRecordings)
        ));
    }
}
