//! Where a crashed recording really ends, found from its last checkpoint forward.
//!
//! Each member is read from its checkpoint position on, at most the recovery window (never
//! more than a lap), keeping the chunks that continue its run: this recording's, where
//! they say they are, stamped after the checkpoint and in increasing sequence (a retired
//! member's write redirected here, where the checkpoint's retirements place it, does not
//! end the run). The recording ends at the first sequence no member holds; the chunks
//! past that hole are not part of the stream. A ring's writer may have gone on past that
//! end, over older chunks of the recording, with writes the crash lost or tore: each ring
//! member is walked on for their traces, and its oldest survivors start after the last.
//!
//! The checkpoint found is the newest one the writer made durable, unless the drive lost a
//! newer one (a write it acknowledged and did not keep). A ring's writer goes on less than
//! a lap past its newest checkpoint, so it may then have gone round past the position of
//! the one found, over chunks the lost one claimed, and the run from that position is a lap
//! younger than the search takes it for. The walk for traces tells (see
//! [`past_lost_writes`]): nowhere else within a lap of the position can a chunk written
//! after the checkpoint lie after a newer one. Such a member is searched again from just
//! after its newest chunk (its write point, where its oldest survivors begin), a lap round,
//! and the recording's run without a hole starts at the newest of those oldest survivors
//! rather than at the checkpoint's durable end, whose chunks the ring overwrote.
//!
//! The lost checkpoint may also have let the writer's next lap discard ahead past the
//! position (trimming), and no further: its writes stayed before it. The slot just before
//! the position then no longer holds its durable chunk (see
//! [`EndSearch::discarded_round`]), and the member's run goes on past the slots left blank
//! or torn to the chunks that continue it, which the lost checkpoint made durable; the
//! sequences crossed count as held for the end (the reader reports them missing).
//!
//! This module only reads: closing the recording on disk is [`super::recover`]'s.

use super::{holds_redirect, RecoveredEnd, SCAN_SLOTS_PER_READ};
use crate::layout::{
    decode_chunk, Checkpoint, ChunkFlags, ChunkHeader, MemberPosition, RecordingEntry,
    RecordingFlags, RecordingState, VolumeLayout,
};
use crate::recording::volume::{self, VolumeSet};
use crate::recording::writer::IO_CHUNK_COUNT_MAX;
use crate::recording::RecordingError;

/// [`recovered_end`](super::recovered_end)'s search, up to the chunks stamped now where
/// `bounded`.
pub(super) fn search_end(
    set: &VolumeSet,
    bounded: bool,
) -> Result<Option<(Checkpoint, RecoveredEnd)>, RecordingError> {
    let Some((checkpoint, entry)) = open_at_checkpoint(set)? else {
        return Ok(None);
    };
    let ring = entry.flags.contains(RecordingFlags::RING);
    let search = EndSearch {
        set,
        checkpoint: &checkpoint,
        entry: &entry,
        ring,
        stamped_by_ns: bounded.then(|| set.clock().wall_ns()),
        kept: match ring {
            true => kept_spans(set, &entry)?,
            false => Vec::new(),
        },
    };
    let none = vec![false; set.members.len()];
    let (recovered, lapped) = search.search(&none, &none)?;
    if lapped.contains(&true) {
        // A newer checkpoint was lost: the lapped members are searched again from their
        // write points (see the module docs).
        let (recovered, _) = search.search(&lapped, &none)?;
        return Ok(Some((checkpoint, recovered)));
    }
    let mut discarded = Vec::with_capacity(set.members.len());
    for (index, member) in set.members.iter().enumerate() {
        discarded.push(match member {
            Some(member) => search.discarded_round(index, member)?,
            None => false,
        });
    }
    if !discarded.contains(&true) {
        return Ok(Some((checkpoint, recovered)));
    }
    // A newer checkpoint was lost, and the writer's next lap discarded ahead past the
    // position: those members' runs go on past the slots it left blank or tore.
    let (recovered, _) = search.search(&none, &discarded)?;
    Ok(Some((checkpoint, recovered)))
}

/// The newest checkpoint and the entry of the recording it says was open, if one was
/// (and its entry still says so).
fn open_at_checkpoint(
    set: &VolumeSet,
) -> Result<Option<(Checkpoint, RecordingEntry)>, RecordingError> {
    let Some(checkpoint) = set.newest_checkpoint()? else {
        return Ok(None);
    };
    if checkpoint.recording_id == 0 {
        return Ok(None);
    }
    let entry = set
        .recordings()?
        .into_iter()
        .find(|e| e.recording_id == checkpoint.recording_id);
    Ok(entry
        .filter(|entry| entry.state == RecordingState::Open)
        .map(|entry| (checkpoint, entry)))
}

/// The spans of slots that marks keep apart from ring `entry`'s laps, as the index names
/// them: (member, first slot, end slot), the end before the first where the span wraps.
fn kept_spans(
    set: &VolumeSet,
    entry: &RecordingEntry,
) -> Result<Vec<(usize, u64, u64)>, RecordingError> {
    let mut spans = Vec::new();
    for mark in crate::recording::marks::kept_over(set, entry)? {
        if mark.state == RecordingState::Open {
            continue;
        }
        for (member, span) in mark.members.iter().enumerate() {
            if span.start_slot_index != span.end_slot_index {
                spans.push((member, span.start_slot_index, span.end_slot_index));
            }
        }
    }
    Ok(spans)
}

/// What the search for a crashed recording's end goes by.
struct EndSearch<'a> {
    set: &'a VolumeSet,
    checkpoint: &'a Checkpoint,
    /// The recording's entry, as the table holds it.
    entry: &'a RecordingEntry,
    ring: bool,
    /// Only chunks stamped by then count (a recording another program is writing now).
    stamped_by_ns: Option<u64>,
    /// Slots marks keep, which a ring's write point jumps over (see [`kept_spans`]).
    kept: Vec<(usize, u64, u64)>,
}

/// Where [`search_end`] found each member's run to end, and what it read on the way.
#[derive(Default)]
struct SearchEnds {
    end_slots: Vec<u64>,
    laps: Vec<u64>,
    highest: Option<u64>,
    searched_slot_count: u64,
    /// Runs of sequences that a member's run went on past, over slots its writer's next
    /// lap discarded (see [`EndSearch::discarded_round`]): `[first, end)`, `end` the
    /// sequence of the chunk that continued the run after them.
    crossed: Vec<(u64, u64)>,
}

impl SearchEnds {
    fn saw(&mut self, sequence: u64) {
        self.highest = Some(self.highest.map_or(sequence, |h| h.max(sequence)));
    }

    /// Puts each member's write point and its lap after the last chunk kept (which may lie
    /// in the lap before the one where the search ended), else where the checkpoint left it.
    fn place_write_points(
        &mut self,
        set: &VolumeSet,
        checkpoint: &Checkpoint,
        contiguous: &[&(ChunkHeader, u64)],
    ) {
        for (index, member) in set.members.iter().enumerate() {
            if member.is_none() {
                continue;
            }
            let position = checkpoint.members.get(index).copied().unwrap_or_default();
            let last_kept = contiguous
                .iter()
                .rfind(|(h, _)| h.member_index as usize == index);
            (self.end_slots[index], self.laps[index]) = match last_kept {
                Some((h, lap)) => (h.slot_index + 1, *lap),
                None => (position.next_slot_index, position.lap),
            };
        }
    }
}

/// How far [`EndSearch::member_run`] follows a member's run.
#[derive(Clone, Copy)]
struct Reach {
    /// At most these slots (never more than a lap).
    slots: u64,
    /// On past blank and torn slots, in the first lap (see [`EndSearch::discarded_round`]).
    cross: bool,
}

/// Where a position is in a member's run after the checkpoint, as the search goes.
struct MemberRun {
    slot: u64,
    lap: u64,
    last_sequence: Option<u64>,
    /// Just past the last chunk kept: (slot, lap).
    end: (u64, u64),
    /// The run goes on past blank and torn slots (in its first lap only): see
    /// [`EndSearch::discarded_round`].
    cross: bool,
    /// The run is past blank or torn slots, looking for the chunk that continues it.
    in_gap: bool,
}

impl EndSearch<'_> {
    /// Searches every member from its checkpoint position, or, for a member `lapped` says
    /// went round past it, from its write point: the recording's end, and the members whose
    /// walk for traces showed that they went round past the position.
    /// A member `discarded` says its writer's next lap discarded past its position goes on
    /// past the slots left blank or torn (see [`EndSearch::discarded_round`]).
    fn search(
        &self,
        lapped: &[bool],
        discarded: &[bool],
    ) -> Result<(RecoveredEnd, Vec<bool>), RecordingError> {
        let checkpoint = self.checkpoint;
        // Each with the lap it was found in.
        let mut kept: Vec<(ChunkHeader, u64)> = Vec::new();
        let mut ends = SearchEnds::default();
        // Where the run without a hole starts: the checkpoint's durable end, or the newest
        // of the lapped members' oldest survivors.
        let mut run_start = checkpoint.durable_sequence_end;
        for (index, member) in self.set.members.iter().enumerate() {
            let position = checkpoint
                .members
                .get(index)
                .copied()
                .unwrap_or(MemberPosition {
                    next_slot_index: 0,
                    lap: 0,
                });
            let (end_slot, end_lap) = match (member, lapped[index]) {
                (None, _) => (position.next_slot_index, position.lap),
                (Some(member), false) => {
                    // The window comes from disk: never more than a lap of this member.
                    let reach = Reach {
                        slots: u64::from(checkpoint.recovery_window_slots),
                        cross: discarded[index],
                    };
                    self.member_run(index, member, position, reach, &mut kept, &mut ends)?
                }
                (Some(member), true) => {
                    let before = kept.len();
                    let end = self.lapped_run(index, member, position, &mut kept, &mut ends)?;
                    if let Some((oldest, _)) = kept.get(before) {
                        run_start = run_start.max(oldest.sequence);
                    }
                    end
                }
            };
            ends.end_slots.push(end_slot);
            ends.laps.push(end_lap);
        }
        kept.sort_by_key(|(header, _)| header.sequence);
        let end_sequence = run_end(&kept, run_start, &ends.crossed);
        // Chunks past the first hole are not part of a contiguous stream: their slots are
        // free.
        let contiguous: Vec<&(ChunkHeader, u64)> = kept
            .iter()
            .filter(|(h, _)| h.sequence < end_sequence)
            .collect();
        ends.place_write_points(self.set, checkpoint, &contiguous);
        let mut found_lapped = vec![false; self.set.members.len()];
        if self.ring {
            found_lapped = self.past_lost_writes(end_sequence, &contiguous, lapped, &mut ends)?;
        }
        let recovered = recovered_from(checkpoint, end_sequence, &contiguous, ends);
        Ok((recovered, found_lapped))
    }

    /// Member `index`'s run of chunks, which went round past its checkpoint `position`:
    /// from the first slot after its newest chunk that holds a whole chunk (slots a trim
    /// ahead of the writer left blank, and writes the crash tore, may come first), a lap
    /// round, keeping them in `kept` with their lap. Returns where the run ends: (slot,
    /// lap).
    fn lapped_run(
        &self,
        index: usize,
        member: &volume::Member,
        position: MemberPosition,
        kept: &mut Vec<(ChunkHeader, u64)>,
        ends: &mut SearchEnds,
    ) -> Result<(u64, u64), RecordingError> {
        let layout = member.layout();
        let slot_count = layout.data_slot_count;
        let (newest_slot, newest_lap) = self.newest_in_lap(index, member, position, ends)?;
        let (mut slot, mut lap) = (newest_slot + 1, newest_lap);
        for _ in 0..slot_count {
            if slot >= slot_count {
                (slot, lap) = (0, lap.saturating_add(1));
            }
            let offset = layout.data_slot_offset_bytes(slot).unwrap_or(0);
            let bytes =
                volume::read_aligned(&member.disk, offset, layout.chunk_size_bytes as usize)?;
            ends.searched_slot_count += 1;
            if decode_chunk(&bytes).is_ok() {
                break;
            }
            slot += 1;
        }
        let oldest = MemberPosition {
            next_slot_index: slot,
            lap,
        };
        let reach = Reach {
            slots: slot_count,
            cross: false,
        };
        self.member_run(index, member, oldest, reach, kept, ends)
    }

    /// Where member `index`'s newest chunk written after the checkpoint lies, in a lap from
    /// `position`: its slot, and the lap the search counts there from the position, which
    /// is that of the older chunks after it (a lapped member's newest chunk is a lap
    /// younger). The position itself where the lap holds none.
    fn newest_in_lap(
        &self,
        index: usize,
        member: &volume::Member,
        position: MemberPosition,
        ends: &mut SearchEnds,
    ) -> Result<(u64, u64), RecordingError> {
        let layout = member.layout();
        let slot_count = layout.data_slot_count;
        let chunk_bytes = layout.chunk_size_bytes as usize;
        let traces = Traces {
            set: self.set,
            checkpoint: self.checkpoint,
            index,
            slot_count,
            ends: RunEnds {
                end_sequence: 0,
                own_newest: None,
            },
        };
        let (mut slot, mut lap) = (position.next_slot_index.min(slot_count), position.lap);
        let mut newest: Option<(u64, u64, u64)> = None;
        let mut remaining = slot_count;
        while remaining > 0 {
            if slot >= slot_count {
                (slot, lap) = (0, lap.saturating_add(1));
            }
            let count = SCAN_SLOTS_PER_READ.min(slot_count - slot).min(remaining);
            let offset = layout.data_slot_offset_bytes(slot).unwrap_or(0);
            let bytes = volume::read_aligned(&member.disk, offset, count as usize * chunk_bytes)?;
            for (within, slot_bytes) in bytes.chunks(chunk_bytes).enumerate() {
                let this_slot = slot + within as u64;
                if let Some(sequence) = traces.written_since_checkpoint(this_slot, slot_bytes) {
                    if newest.is_none_or(|(newer, _, _)| sequence > newer) {
                        newest = Some((sequence, this_slot, lap));
                    }
                }
            }
            ends.searched_slot_count += count;
            slot += count;
            remaining -= count;
        }
        Ok(newest.map_or(
            (position.next_slot_index, position.lap),
            |(_, slot, lap)| (slot, lap),
        ))
    }

    /// Follows member `index`'s run of chunks forward from `position` (its checkpoint's),
    /// at most `reach.slots` slots and never more than a lap, keeping them in `kept` with
    /// their lap. Returns where the run ends: (slot, lap).
    fn member_run(
        &self,
        index: usize,
        member: &volume::Member,
        position: MemberPosition,
        reach: Reach,
        kept: &mut Vec<(ChunkHeader, u64)>,
        ends: &mut SearchEnds,
    ) -> Result<(u64, u64), RecordingError> {
        let layout = member.layout();
        let slot_count = layout.data_slot_count;
        let mut run = MemberRun {
            slot: position.next_slot_index,
            lap: position.lap,
            last_sequence: None,
            end: (position.next_slot_index, position.lap),
            cross: reach.cross,
            in_gap: false,
        };
        let mut remaining = reach.slots.min(slot_count);
        // A ring's lap may end before the member's last slot (the writer uses whole I/Os):
        // where the run stops, it may go on at slot 0 of the next lap, once.
        let mut wrapped = false;
        while remaining > 0 {
            if run.slot >= slot_count {
                if !self.ring || wrapped {
                    break;
                }
                run.slot = 0;
                run.lap = run.lap.saturating_add(1);
                wrapped = true;
                (run.cross, run.in_gap) = (false, false);
            }
            let count = SCAN_SLOTS_PER_READ
                .min(slot_count - run.slot)
                .min(remaining);
            let offset = layout.data_slot_offset_bytes(run.slot).unwrap_or(0);
            let bytes = volume::read_aligned(
                &member.disk,
                offset,
                (count * layout.chunk_size_bytes as u64) as usize,
            )?;
            let stop = self.keep_chunks(index, layout, &bytes, &mut run, kept, ends);
            if let Some(stop) = stop {
                // The write point jumped over slots a mark keeps: the run goes on past them.
                if let Some((slot, laps)) = self.past_kept(index, stop) {
                    let distance = match laps {
                        0 => slot - stop,
                        _ => slot_count - stop + slot,
                    };
                    remaining = remaining.saturating_sub(stop - run.slot + distance);
                    run.slot = slot;
                    run.lap = run.lap.saturating_add(laps);
                    wrapped |= laps > 0;
                    if laps > 0 {
                        (run.cross, run.in_gap) = (false, false);
                    }
                    continue;
                }
                if !self.ring || wrapped || run.slot == 0 && run.last_sequence.is_none() {
                    break;
                }
                run.slot = 0;
                run.lap = run.lap.saturating_add(1);
                wrapped = true;
                (run.cross, run.in_gap) = (false, false);
                remaining = remaining.saturating_sub(count);
                continue;
            }
            run.slot += count;
            remaining -= count;
        }
        Ok(run.end)
    }

    /// Whether ring member `index`'s writer came round, in the lap after its checkpoint
    /// position, to the slot just before it: that slot no longer holds a whole chunk (it is
    /// blank or torn), where the checkpoint says the recording's chunk there was durable.
    ///
    /// A writer that keeps its promise never goes so far past its newest durable checkpoint
    /// (its writes and discards stay within a lap less one write of it), so a newer
    /// checkpoint was acknowledged and lost, and the writer's next lap, trimming ahead, may
    /// have discarded the chunks after the position, which a power cut may also have left
    /// torn. The member's run then goes on past blank and torn slots, in the lap of the
    /// position, to the chunks that continue it: the discarded ones are reported missing,
    /// and those after them, which the lost checkpoint made durable, are not lost with
    /// them. Going on never takes a wrong chunk: one is kept only where it continues the
    /// member's run.
    fn discarded_round(
        &self,
        index: usize,
        member: &volume::Member,
    ) -> Result<bool, RecordingError> {
        let (checkpoint, entry) = (self.checkpoint, self.entry);
        let Some(position) = checkpoint.members.get(index).copied() else {
            return Ok(false);
        };
        let layout = member.layout();
        let slot = position.next_slot_index;
        if !self.ring
            || slot == 0
            || slot >= layout.data_slot_count
            || checkpoint.durable_sequence_end <= entry.first_sequence
        {
            return Ok(false);
        }
        // The slot before the position was written in its lap by this recording.
        let start_lap = entry.start_laps.get(index).map_or(0, |&lap| u64::from(lap));
        let start_slot = entry
            .members
            .get(index)
            .map_or(0, |span| span.start_slot_index);
        let before = slot - 1;
        let written = position.lap > start_lap || (position.lap == start_lap && start_slot < slot);
        let kept = self.kept.iter().any(|&(m, first, end)| {
            m == index
                && match first < end {
                    true => (first..end).contains(&before),
                    false => before >= first || before < end,
                }
        });
        if !written || kept {
            return Ok(false);
        }
        let offset = layout.data_slot_offset_bytes(before).unwrap_or(0);
        let bytes = volume::read_aligned(&member.disk, offset, layout.chunk_size_bytes as usize)?;
        Ok(decode_chunk(&bytes).is_err())
    }

    /// Where a run of member `index` that stopped at `stop` goes on when a mark's kept slots
    /// begin there, or fewer than a write's slots later (a write that would have reached into
    /// them left those unwritten; the mark's entry may not say so yet): (slot, laps on). A
    /// span that wraps begins at its first slot, and its part in the next lap at slot 0.
    ///
    /// Going on past them never takes a wrong chunk: a chunk past them is kept only where
    /// it continues the member's run, and the recording ends at the first sequence no
    /// member holds.
    fn past_kept(&self, index: usize, stop: u64) -> Option<(u64, u64)> {
        let ahead = |first: u64| {
            first
                .checked_sub(stop)
                .filter(|&d| d < u64::from(IO_CHUNK_COUNT_MAX))
        };
        self.kept
            .iter()
            .filter(|&&(member, _, _)| member == index)
            .filter_map(|&(_, first, end)| match (ahead(first), end > first) {
                (Some(d), true) => Some((d, end, 0)),
                (Some(d), false) => Some((d, end, 1)),
                (None, false) if stop == 0 && end > 0 => Some((0, end, 0)),
                _ => None,
            })
            .min_by_key(|&(distance, _, _)| distance)
            .map(|(_, slot, laps)| (slot, laps))
    }

    /// Keeps the chunks of one read from `run.slot` on while they continue the run.
    /// Returns the slot where the run stopped, if it stopped within the read.
    fn keep_chunks(
        &self,
        index: usize,
        layout: &VolumeLayout,
        bytes: &[u8],
        run: &mut MemberRun,
        kept: &mut Vec<(ChunkHeader, u64)>,
        ends: &mut SearchEnds,
    ) -> Option<u64> {
        for (within, slot_bytes) in bytes.chunks(layout.chunk_size_bytes as usize).enumerate() {
            ends.searched_slot_count += 1;
            let this_slot = run.slot + within as u64;
            let header = match decode_chunk(slot_bytes) {
                Ok(view) if self.continues(index, layout, this_slot, run, &view.header) => {
                    view.header
                }
                // Blank or torn: discarded by the writer's next lap (see
                // [`Self::discarded_round`]); the run goes on to the chunk that continues it.
                Err(_) if run.cross => {
                    run.in_gap = true;
                    continue;
                }
                _ => return Some(this_slot),
            };
            if !header.flags.contains(ChunkFlags::REDIRECTED) {
                if std::mem::take(&mut run.in_gap) {
                    let from = run
                        .last_sequence
                        .map_or(self.checkpoint.durable_sequence_end, |last| {
                            last.saturating_add(1)
                        });
                    ends.crossed.push((from, header.sequence));
                }
                run.last_sequence = Some(header.sequence);
            }
            ends.saw(header.sequence);
            kept.push((header, run.lap));
            run.end = (this_slot + 1, run.lap);
        }
        None
    }

    /// Whether `header`, found at `this_slot` of member `index`, continues its run.
    fn continues(
        &self,
        index: usize,
        layout: &VolumeLayout,
        this_slot: u64,
        run: &MemberRun,
        header: &ChunkHeader,
    ) -> bool {
        let checkpoint = self.checkpoint;
        // A redirected chunk (a retired member's write sent again here) has a lower
        // sequence than the chunks before it and does not end the run, where the
        // checkpoint's retirements say it was sent here: the reader finds it by them.
        let accounted = |header: &ChunkHeader| {
            header.flags.contains(ChunkFlags::REDIRECTED)
                && checkpoint.retirements.iter().any(|r| {
                    r.redirect_member as usize == index
                        && holds_redirect(r, layout.data_slot_count, this_slot)
                })
        };
        header.set_uuid == self.set.set_uuid
            && header.recording_id == checkpoint.recording_id
            && header.member_index as usize == index
            && header.slot_index == this_slot
            && header.sequence >= checkpoint.durable_sequence_end
            && self
                .stamped_by_ns
                .is_none_or(|by| header.timestamp_ns <= by)
            && (run.last_sequence.is_none_or(|last| header.sequence > last) || accounted(header))
    }

    /// The writer may have gone on past the recovered end, over older chunks of this
    /// recording, with writes the crash lost or tore: each ring member's oldest survivors
    /// start after the last trace of them.
    /// Returns the members whose walk showed that they went round past the checkpoint's
    /// position; a member `lapped` already says did is walked a lap round.
    fn past_lost_writes(
        &self,
        end_sequence: u64,
        contiguous: &[&(ChunkHeader, u64)],
        lapped: &[bool],
        ends: &mut SearchEnds,
    ) -> Result<Vec<bool>, RecordingError> {
        let mut found = vec![false; self.set.members.len()];
        for (index, member) in self.set.members.iter().enumerate() {
            let Some(member) = member else { continue };
            let from = (ends.end_slots[index], ends.laps[index]);
            let own_newest = contiguous
                .iter()
                .filter(|(h, _)| h.member_index as usize == index)
                .filter(|(h, _)| !h.flags.contains(ChunkFlags::REDIRECTED))
                .map(|(h, _)| h.sequence)
                .max();
            let run_ends = RunEnds {
                end_sequence,
                own_newest,
            };
            let walk_a_lap = lapped[index];
            let past = past_lost_writes(self, member, index, from, run_ends, walk_a_lap)?;
            ends.searched_slot_count += past.searched_slot_count;
            (ends.end_slots[index], ends.laps[index]) = past.end;
            if let Some(seen) = past.highest_sequence {
                ends.saw(seen);
            }
            found[index] = past.lapped;
        }
        Ok(found)
    }
}

/// Whether a slot's header block is blank: never written, or discarded.
fn is_blank(slot_bytes: &[u8]) -> bool {
    slot_bytes[..crate::layout::CHUNK_HEADER_SIZE_BYTES]
        .iter()
        .all(|&b| b == 0)
}

/// The end of the run of sequences from `durable_sequence_end` without a hole, in `kept`
/// (sorted by sequence), where the sequences of a `crossed` run (`[first, end)`: chunks a
/// writer's next lap discarded, which the reader reports missing) count as held.
fn run_end(kept: &[(ChunkHeader, u64)], durable_sequence_end: u64, crossed: &[(u64, u64)]) -> u64 {
    let mut end_sequence = durable_sequence_end;
    for (header, _) in kept {
        while let Some(&(_, end)) = crossed
            .iter()
            .find(|&&(first, end)| first <= end_sequence && end_sequence < end)
        {
            end_sequence = end;
        }
        if header.sequence == end_sequence {
            let Some(next) = end_sequence.checked_add(1) else {
                break; // A sequence of 2^64 - 1 was never written: it ends the run.
            };
            end_sequence = next;
        } else if header.sequence > end_sequence {
            break;
        }
    }
    end_sequence
}

/// The recovered end: the recording as the checkpoint left it, carried on through the
/// `contiguous` chunks found after it.
fn recovered_from(
    checkpoint: &Checkpoint,
    end_sequence: u64,
    contiguous: &[&(ChunkHeader, u64)],
    ends: SearchEnds,
) -> RecoveredEnd {
    let last = contiguous.last().map(|(h, _)| h);
    let state = match last {
        Some(h) if h.flags.contains(ChunkFlags::END) && h.flags.contains(ChunkFlags::ABORTED) => {
            RecordingState::Aborted
        }
        Some(h) if h.flags.contains(ChunkFlags::END) => RecordingState::Closed,
        _ => RecordingState::Interrupted,
    };
    let lost_after = contiguous
        .iter()
        .fold(0u64, |sum, (h, _)| sum.saturating_add(h.gap_bytes));
    RecoveredEnd {
        recording_id: checkpoint.recording_id,
        state,
        end_sequence,
        highest_sequence_seen: ends.highest,
        end_ns: last.map_or(checkpoint.written_ns, |h| h.timestamp_ns),
        stream_len_bytes: last.map_or(checkpoint.durable_stream_bytes, |h| {
            h.stream_offset_bytes + h.payload_len_bytes as u64
        }),
        lost_bytes: checkpoint.durable_lost_bytes.saturating_add(lost_after),
        end_slots: ends.end_slots,
        laps: ends.laps,
        recovered_chunk_count: contiguous.len() as u64,
        searched_slot_count: ends.searched_slot_count,
        retirements: checkpoint.retirements.clone(),
    }
}

/// Where the recovered run ends, for [`past_lost_writes`].
#[derive(Clone, Copy)]
struct RunEnds {
    /// The recording's recovered end sequence.
    end_sequence: u64,
    /// The newest of the member's own chunks in the recovered run (redirected ones left
    /// out), if it holds any.
    own_newest: Option<u64>,
}

impl RunEnds {
    /// Whether a chunk of the member's own, found past its recovered end, was written after
    /// that end: its sequence is past the recording's end, or past the member's newest
    /// chunk in the run (the older laps past the write point hold only older sequences; a
    /// failed write, sent again elsewhere, may leave whole chunks of its own behind).
    fn written_after(&self, header: &ChunkHeader, durable_sequence_end: u64) -> bool {
        header.sequence >= self.end_sequence
            || match self.own_newest {
                Some(newest) => header.sequence > newest,
                None => header.sequence >= durable_sequence_end,
            }
    }
}

/// What a ring member holds past its recovered end.
struct PastEnd {
    /// Just past the last slot that shows a write after the recovered end: (slot, lap).
    end: (u64, u64),
    highest_sequence: Option<u64>,
    searched_slot_count: u64,
    /// The member went round past the checkpoint's position (the walk stopped there).
    lapped: bool,
}

/// Walks a crashed ring member forward from its recovered end `from` (slot, lap), as far
/// as its writer may have gone past the checkpoint (the recovery window, at most a lap),
/// for traces of writes after the recovered end: a chunk of the recording with a later
/// sequence (past the recording's end, or past the member's newest in the run: see
/// [`RunEnds::written_after`]), a torn one (its header is the recording's, the chunk does not check), or a
/// run of blank slots followed by anything (discarded ahead of them). The
/// chunks such writes overwrote are gone; the older ones after the last trace survive.
///
/// Within a lap of the checkpoint's position, the member's chunks written after the
/// checkpoint come in increasing sequence whatever the crash kept of them (the writer
/// places them in slot order, and writes nothing there that it wrote before the
/// checkpoint): one that comes after a newer one shows that the writer went round past the
/// position, a newer checkpoint lost, and the walk stops there (`lapped`). A member already
/// known to have gone round (`walk_a_lap`) is walked a lap round, as far as its writer may
/// have gone.
fn past_lost_writes(
    search: &EndSearch<'_>,
    member: &volume::Member,
    index: usize,
    from: (u64, u64),
    ends: RunEnds,
    walk_a_lap: bool,
) -> Result<PastEnd, RecordingError> {
    let (set, checkpoint) = (search.set, search.checkpoint);
    let layout = member.layout();
    let slots = layout.data_slot_count;
    let reach = match walk_a_lap {
        true => slots.saturating_sub(1),
        false => writer_reach(checkpoint, index, slots, from),
    };
    let traces = Traces {
        set,
        checkpoint,
        index,
        slot_count: slots,
        ends,
    };
    let mut past = PastEnd {
        end: from,
        highest_sequence: None,
        searched_slot_count: 0,
        lapped: false,
    };
    // The newest of the member's chunks written after the checkpoint so far, in slot order.
    let mut newest = ends.own_newest;
    let (mut slot, mut lap) = from;
    // One slot more than the reach: the first one the writer cannot have touched, which
    // shows whether blank slots up to the reach were discarded ahead of lost writes (it
    // holds an older chunk) or never written. A writer that went as far as it may, trimming
    // ahead, leaves no other slot after its discards to tell.
    let mut remaining = if reach > 0 { reach + 1 } else { 0 };
    let mut blank_until = None;
    while remaining > 0 {
        if slot >= slots {
            slot = 0;
            lap = lap.saturating_add(1);
            // Blank up to the end of the device: the slots a lap of whole writes leaves
            // unused (a trim never reaches them: it keeps the lap's last write); nothing
            // older follows in this lap.
            blank_until = None;
        }
        let count = SCAN_SLOTS_PER_READ.min(slots - slot).min(remaining);
        let offset = layout.data_slot_offset_bytes(slot).unwrap_or(0);
        let chunk_bytes = layout.chunk_size_bytes as usize;
        let bytes = volume::read_aligned(&member.disk, offset, count as usize * chunk_bytes)?;
        for (within, slot_bytes) in bytes.chunks(chunk_bytes).enumerate() {
            let this_slot = slot + within as u64;
            if !walk_a_lap {
                if let Some(sequence) = traces.written_since_checkpoint(this_slot, slot_bytes) {
                    if newest.is_some_and(|newer| sequence < newer) {
                        past.lapped = true;
                        past.searched_slot_count += within as u64 + 1;
                        return Ok(past);
                    }
                    newest = Some(sequence);
                }
            }
            let peek = remaining - within as u64 == 1;
            let trace = !peek && traces.shows_write(this_slot, slot_bytes, &mut past);
            if is_blank(slot_bytes) {
                // Discarded by a trim ahead of lost writes, if older chunks follow it.
                blank_until = Some((this_slot + 1, lap));
                continue;
            }
            if let Some(end) = blank_until.take() {
                past.end = end;
            }
            if trace {
                past.end = (this_slot + 1, lap);
            }
        }
        past.searched_slot_count += count;
        slot += count;
        remaining -= count;
    }
    Ok(past)
}

/// How many slots past `from` (slot, lap) member `index`'s writer may have gone beyond its
/// checkpoint position: its writes and discards stay below the recovery window, or a lap
/// less one write, plus the unused slots at the end of the member a lap of whole writes
/// skips; never past the bound (less than a lap: it never comes back to the position).
fn writer_reach(checkpoint: &Checkpoint, index: usize, slots: u64, from: (u64, u64)) -> u64 {
    let position = checkpoint.members.get(index).copied().unwrap_or_default();
    let run_slots = if from.1 > position.lap {
        slots
            .saturating_sub(position.next_slot_index)
            .saturating_add(from.0)
    } else {
        from.0.saturating_sub(position.next_slot_index)
    };
    let bound = (checkpoint.recovery_window_slots as u64).min(slots.saturating_sub(1));
    bound.saturating_sub(run_slots)
}

/// What tells, on a crashed ring member past its recovered end, a write after that end.
struct Traces<'a> {
    set: &'a VolumeSet,
    checkpoint: &'a Checkpoint,
    index: usize,
    slot_count: u64,
    ends: RunEnds,
}

impl Traces<'_> {
    /// Whether `slot_bytes`, read at `this_slot`, show a write after the recovered end: a
    /// later chunk of the recording (its sequence noted in `past`) or a torn one.
    fn shows_write(&self, this_slot: u64, slot_bytes: &[u8], past: &mut PastEnd) -> bool {
        let ours = |header: &ChunkHeader| {
            header.set_uuid == self.set.set_uuid
                && header.recording_id == self.checkpoint.recording_id
                && header.member_index as usize == self.index
                && header.slot_index == this_slot
        };
        match decode_chunk(slot_bytes) {
            Ok(view) if ours(&view.header) && self.written_after(this_slot, &view.header) => {
                let seen = view.header.sequence;
                past.highest_sequence = Some(past.highest_sequence.map_or(seen, |h| h.max(seen)));
                true
            }
            Ok(_) => false,
            Err(_) => crate::layout::decode_chunk_header(slot_bytes).is_ok_and(|h| ours(&h)),
        }
    }

    /// The sequence of the chunk `slot_bytes` hold at `this_slot`, where its header (whole,
    /// or what a torn write left: the header's own CRC vouches for it) names a chunk of the
    /// recording written there after the checkpoint (a redirected one left out).
    fn written_since_checkpoint(&self, this_slot: u64, slot_bytes: &[u8]) -> Option<u64> {
        let header = crate::layout::decode_chunk_header(slot_bytes).ok()?;
        let own = header.set_uuid == self.set.set_uuid
            && header.recording_id == self.checkpoint.recording_id
            && header.member_index as usize == self.index
            && header.slot_index == this_slot
            && !header.flags.contains(ChunkFlags::REDIRECTED)
            && header.sequence >= self.checkpoint.durable_sequence_end;
        own.then_some(header.sequence)
    }

    /// Whether a chunk of the recording found at `this_slot` was written after the end.
    fn written_after(&self, this_slot: u64, header: &ChunkHeader) -> bool {
        let checkpoint = self.checkpoint;
        if !header.flags.contains(ChunkFlags::REDIRECTED) {
            return self
                .ends
                .written_after(header, checkpoint.durable_sequence_end);
        }
        // A redirected chunk here was written after the write point, whatever its
        // sequence (a retired member's write sent again), unless the checkpoint already
        // placed it: a scan that goes round a lap comes back to the redirected run of a
        // retirement written before the write point.
        let known_redirect = || {
            checkpoint.retirements.iter().any(|r| {
                r.redirect_member as usize == self.index
                    && holds_redirect(r, self.slot_count, this_slot)
            })
        };
        header.sequence >= self.ends.end_sequence || !known_redirect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::layout::{sample_checkpoint, sample_chunk_header};

    fn chunk(sequence: u64, flags: ChunkFlags) -> (ChunkHeader, u64) {
        let header = ChunkHeader {
            sequence,
            flags,
            stream_offset_bytes: sequence * 1000,
            payload_len_bytes: 1000,
            gap_bytes: if sequence == 12 { 64 } else { 0 },
            timestamp_ns: 5_000 + sequence,
            ..sample_chunk_header()
        };
        (header, sequence)
    }

    #[test]
    fn the_run_ends_at_the_first_sequence_no_member_holds_past_the_checkpoint() {
        let kept: Vec<_> = [10, 11, 12, 14, 15]
            .map(|sequence| chunk(sequence, ChunkFlags::empty()))
            .to_vec();
        assert_eq!(run_end(&kept, 10, &[]), 13);
        // A run a writer's next lap discarded counts as held: the reader names it missing.
        assert_eq!(run_end(&kept, 10, &[(13, 14)]), 16);
        // Nothing past the checkpoint: it ends where the checkpoint said.
        assert_eq!(run_end(&[], 10, &[]), 10);
        assert_eq!(run_end(&kept, 9, &[]), 9);
    }

    #[test]
    fn the_recovered_end_is_the_last_contiguous_chunk_and_its_flags_say_how_it_ended() {
        let checkpoint = Checkpoint {
            durable_stream_bytes: 10_000,
            durable_lost_bytes: 100,
            ..sample_checkpoint()
        };
        let found = [
            chunk(10, ChunkFlags::empty()),
            chunk(11, ChunkFlags::empty()),
            chunk(12, ChunkFlags::empty()),
        ];
        let ended = |last: ChunkFlags| {
            let last = chunk(13, last);
            let run: Vec<&(ChunkHeader, u64)> = found.iter().chain([&last]).collect();
            recovered_from(&checkpoint, 14, &run, SearchEnds::default())
        };
        let interrupted = ended(ChunkFlags::empty());
        assert_eq!(interrupted.state, RecordingState::Interrupted);
        assert_eq!(interrupted.end_sequence, 14);
        assert_eq!(interrupted.stream_len_bytes, 14_000);
        assert_eq!(
            interrupted.lost_bytes, 164,
            "the checkpoint's and the gaps after it"
        );
        assert_eq!(interrupted.end_ns, 5_013);
        assert_eq!(interrupted.recovered_chunk_count, 4);
        assert_eq!(ended(ChunkFlags::END).state, RecordingState::Closed);
        let aborted = ended(ChunkFlags::END | ChunkFlags::ABORTED);
        assert_eq!(aborted.state, RecordingState::Aborted);
        // Nothing found past the checkpoint: the checkpoint's own end.
        let none = recovered_from(&checkpoint, 10, &[], SearchEnds::default());
        assert_eq!(none.state, RecordingState::Interrupted);
        assert_eq!(none.stream_len_bytes, 10_000);
        assert_eq!(none.lost_bytes, 100);
    }

    #[test]
    fn a_chunk_past_the_recovered_end_was_written_after_it_where_it_is_newer() {
        let run = RunEnds {
            end_sequence: 50,
            own_newest: Some(40),
        };
        let header = |sequence| chunk(sequence, ChunkFlags::empty()).0;
        assert!(run.written_after(&header(50), 30));
        assert!(run.written_after(&header(41), 30));
        assert!(!run.written_after(&header(40), 30));
        let none_own = RunEnds {
            own_newest: None,
            ..run
        };
        assert!(none_own.written_after(&header(30), 30));
        assert!(!none_own.written_after(&header(29), 30));
    }

    #[test]
    fn a_writer_reaches_less_than_its_window_past_its_checkpoint_position() {
        let mut checkpoint = sample_checkpoint();
        checkpoint.recovery_window_slots = 64;
        checkpoint.members[0] = MemberPosition {
            next_slot_index: 100,
            lap: 2,
        };
        // From the position itself: the whole window; 40 slots on: what is left of it.
        assert_eq!(writer_reach(&checkpoint, 0, 1000, (100, 2)), 64);
        assert_eq!(writer_reach(&checkpoint, 0, 1000, (140, 2)), 24);
        // Into the next lap: the slots to the member's end count too.
        assert_eq!(writer_reach(&checkpoint, 0, 120, (10, 3)), 34);
        // Never a lap: a member smaller than the window bounds it.
        assert_eq!(writer_reach(&checkpoint, 0, 50, (100, 2)), 49);
        assert!(is_blank(&[0; 4096]));
        let mut written = [0u8; 4096];
        written[127] = 1;
        assert!(!is_blank(&written));
        written[127] = 0;
        written[200] = 1;
        assert!(is_blank(&written), "only the header block counts");
    }
}
