//! Rewrites: a member whose flush fails never made durable what it completed since its last
//! flush that succeeded, though the writer let go of those buffers when the writes
//! completed. A power cut may take them from it, and the recording would then miss chunks
//! that it claims, while `record` said (exit 6) that every byte is on the others.
//!
//! So a member retired because its flush failed has those writes read back from it (a
//! drive that fails its flushes still reads what it holds) and written again to the
//! member that takes its unfinished writes, with their own sequence numbers, as redirected
//! chunks: the retirement's run of redirected slots holds both, one after the other, and
//! the member's slots from its first such write on are its void (`retired_first_slot`), as
//! for its unfinished writes. A chunk that does not read back whole is lost with the
//! member; the report counts it among the member's unconfirmed chunks.
//!
//! A member retired because a write failed has not shown yet whether its flush works: the
//! next checkpoint flushes it. Until that checkpoint's outcome (at most [`GATE_LIMIT`]),
//! no new write goes out (its retirement's run of redirected slots stays open), so that
//! where that flush fails too, the writes it left in doubt join the run as above. A member
//! that timed out is not waited for (its flush would stall as its writes did); where its
//! flush fails later, or the wait ran out, what it held unflushed is noted in the report.
//!
//! Until the rewrites have completed, no checkpoint is offered (it would claim them while
//! their only copy is the one the failed flush left in doubt), unless the redirect member
//! cannot take the next one before a checkpoint makes room; and the source leaves a few
//! free buffers to them (a paced source may lose what comes meanwhile, counted).

use super::parts::Parts;
use super::retire;
use super::retire::tag;
use super::retire::untag;
use super::ChunkMeta;
use super::Flight;
use super::Writer;
use super::{MemberError, MemberErrorReport, Unconfirmed};
use crate::engine::IoCompletion;
use crate::engine::IoError;
use crate::layout::decode_chunk;
use crate::layout::ChunkFlags;
use crate::recording::failure::MemberFault;
use crate::recording::failure::RecordingFailure;
use crate::recording::failure::Step;
use crate::recording::Fill;
use crate::recording::RecordingError;
use std::collections::VecDeque;
use std::time::Duration;
use std::time::Instant;

/// Rewrites are tagged with this bit in the flight number of their completions.
const REWRITE_BIT: u64 = 1 << 55;

/// Free buffers the source leaves to rewrites.
const REWRITE_BUFFERS: usize = 4;

/// The longest a retirement holds new writes back for its member's next flush.
pub(super) const GATE_LIMIT: Duration = Duration::from_millis(250);

/// New writes held back until a retired member's next flush tells whether what it
/// completed is durable.
#[derive(Debug, Clone, Copy)]
pub(super) struct Gate {
    member: usize,
    /// The ring position where its retirement's void starts.
    void_position: u64,
    /// A checkpoint that flushes it was offered since.
    offered: bool,
    until: Instant,
}

/// A write a member completed: where it went and what it held.
#[derive(Debug, Clone, Copy)]
pub(super) struct Done {
    pub(super) first_sequence: u64,
    pub(super) chunk_count: u32,
    pub(super) slot: u64,
    /// Its ring position (lap x lap slots + slot; the slot in a linear recording).
    pub(super) position: u64,
    /// Every slot of it, an I/O a part (see `parts.rs`).
    pub(super) lie: Parts,
    /// The stream offset of its first chunk.
    pub(super) stream_offset_bytes: u64,
}

impl Done {
    /// A write of 4 chunks from sequence and slot `first` (tests of the stages that keep
    /// completions).
    #[cfg(test)]
    pub(super) fn four_at(first: u64) -> Done {
        Done {
            first_sequence: first,
            chunk_count: 4,
            slot: first,
            position: first,
            lie: Parts::one(first, 4),
            stream_offset_bytes: first * 1000,
        }
    }
}

/// A write of a retired member to be read back from it and written again.
#[derive(Debug, Clone, Copy)]
pub(super) struct Rewrite {
    pub(super) from: usize,
    pub(super) done: Done,
}

/// A rewrite in flight on the redirect member.
#[derive(Debug, Clone, Copy)]
pub(super) struct RewriteFlight {
    user_data: u64,
    buffer: u32,
    from: usize,
    done: Done,
    /// Where it went.
    member: usize,
    placed: Done,
    parts_left: u8,
    failed: Option<IoError>,
    submitted: Instant,
}

/// The slots of a completed write, in chunk order.
pub(super) fn slots_of(done: &Done) -> Vec<u64> {
    let mut slots = done.lie.slots();
    slots.truncate(done.chunk_count as usize);
    slots
}

/// Whether a completion is a rewrite's.
pub(super) fn is_rewrite(user_data: u64) -> bool {
    untag(user_data).0 & REWRITE_BIT != 0
}

/// The rewrite stage's state: the writes a failed flush left in doubt, queued to be read
/// back from their member and written again to the redirect member, those in flight there,
/// and the gate that holds new writes back for a retired member's next flush.
#[derive(Default)]
pub(super) struct Rewriting {
    queued: VecDeque<Rewrite>,
    flights: Vec<RewriteFlight>,
    next_number: u64,
    gate: Option<Gate>,
}

impl Rewriting {
    /// Whether writes wait to be read back and written again.
    pub(super) fn queued(&self) -> bool {
        !self.queued.is_empty()
    }

    /// Queues the writes `member` left in doubt, in the order given.
    pub(super) fn queue(&mut self, member: usize, dones: Vec<Done>) {
        let rewrites = dones.into_iter().map(|done| Rewrite { from: member, done });
        self.queued.extend(rewrites);
    }

    /// Whether new writes wait: rewrites are queued, or the gate holds them back for a
    /// retired member's flush.
    pub(super) fn holds_new_writes(&self) -> bool {
        self.queued() || self.gate.is_some()
    }

    /// Holds new writes back until retired `member` has been flushed, or for
    /// [`GATE_LIMIT`] from `now` (no longer than the `member_timeout`); its void begins at
    /// ring position `void_position`.
    pub(super) fn hold(
        &mut self,
        member: usize,
        void_position: u64,
        (now, member_timeout): (Instant, Duration),
    ) {
        self.gate = Some(Gate {
            member,
            void_position,
            offered: false,
            until: now + GATE_LIMIT.min(member_timeout),
        });
    }

    /// Whether new writes are held back.
    pub(super) fn gated(&self) -> bool {
        self.gate.is_some()
    }

    /// Whether they are held back for `member`'s flush.
    pub(super) fn gates(&self, member: usize) -> bool {
        self.gate.is_some_and(|gate| gate.member == member)
    }

    /// Whether the gate waits for a checkpoint that flushes its member to be offered.
    pub(super) fn waits_for_offer(&self) -> bool {
        self.gate.is_some_and(|gate| !gate.offered)
    }

    /// A checkpoint was offered that flushes the members `flush` says.
    pub(super) fn offered(&mut self, flush: &[bool]) {
        if let Some(gate) = self.gate.as_mut() {
            gate.offered |= flush.get(gate.member).copied().unwrap_or(false);
        }
    }

    /// The gate, where a checkpoint that flushes its member was offered since it went up.
    pub(super) fn offered_gate(&self) -> Option<Gate> {
        self.gate.filter(|gate| gate.offered)
    }

    /// New writes go again.
    pub(super) fn lift_gate(&mut self) {
        self.gate = None;
    }

    /// Whether the gate has been up for as long as it may be, at `now`; it is then lifted.
    pub(super) fn gate_expired(&mut self, now: Instant) -> bool {
        let expired = self.gate.is_some_and(|gate| now >= gate.until);
        if expired {
            self.gate = None;
        }
        expired
    }
}

impl Writer<'_> {
    /// Whether a retirement's writes are still to go out again (redirects, rewrites).
    pub(super) fn resending(&self) -> bool {
        self.retiring.redirecting() || self.rewriting.queued()
    }

    /// Whether new writes wait: a retired member's writes are still to go out again, or a
    /// retirement holds them back for its member's flush.
    pub(super) fn holds_new_writes(&self) -> bool {
        self.retiring.redirecting() || self.rewriting.holds_new_writes()
    }

    /// What a completed write of `flight` put on its member, as a rewrite needs it.
    pub(super) fn done_of(&self, flight: &Flight) -> Done {
        Done {
            first_sequence: flight.first_sequence,
            chunk_count: flight.chunk_count,
            slot: flight.slot,
            position: flight.position,
            lie: flight.lie,
            stream_offset_bytes: self.ingest.meta(flight.buffer, 0).stream_offset_bytes,
        }
    }

    /// Whether a rewrite holds the next checkpoint back (see the module docs).
    pub(super) fn rewrites_hold_checkpoints(&self) -> bool {
        if !self.rewriting.flights.is_empty() {
            return true;
        }
        let (Some(rewrite), Some(target)) =
            (self.rewriting.queued.front(), self.retiring.redirect_to())
        else {
            return false;
        };
        let member = &self.placement.members[target];
        // Room past the last durable checkpoint: without it, only a checkpoint helps.
        member
            .reach
            .room_for_redirect(rewrite.done.chunk_count as u64)
    }

    /// Whether the source may take a free buffer: while rewrites wait for buffers, or a
    /// retirement waits to know whether there will be any, it leaves a few to them (one
    /// rewrite goes out per free buffer, and each frees its buffer when it completes).
    pub(super) fn input_may_take_buffers(&self) -> bool {
        let reserve = match self.rewriting.queued.is_empty() && self.rewriting.gate.is_none() {
            true => 0,
            false => REWRITE_BUFFERS,
        };
        self.ingest.free_count() > reserve
    }

    /// Of the writes `member` left in doubt, those the run of redirected slots on `target`
    /// has room for after `outstanding` chunks of its unfinished writes, in sequence order:
    /// in a linear recording, the slots the target has left; in a ring, half a lap of it
    /// (a run longer than a lap would overwrite itself, and one as long would overwrite
    /// every chunk the target holds), the newest first. The rest is noted.
    pub(super) fn within_room(
        &mut self,
        member: usize,
        target: usize,
        mut in_doubt: Vec<Done>,
        outstanding: u64,
    ) -> Vec<Done> {
        in_doubt.sort_by_key(|done| done.first_sequence);
        let state = &self.placement.members[target];
        let room = match self.options.fill {
            Fill::Linear => state
                .point
                .linear_end_slot()
                .saturating_sub(state.point.slot()),
            Fill::Ring { .. } => state.point.lap_slots() / 2,
        }
        .saturating_sub(outstanding);
        let mut kept = 0u64;
        let mut from = in_doubt.len();
        while from > 0 && kept + in_doubt[from - 1].chunk_count as u64 <= room {
            from -= 1;
            kept += in_doubt[from].chunk_count as u64;
        }
        let left: u64 = in_doubt[..from]
            .iter()
            .map(|done| done.chunk_count as u64)
            .sum();
        if left > 0 {
            self.note_unconfirmed(member, left, Unconfirmed::NoRoom);
        }
        in_doubt.split_off(from)
    }

    /// A retired member's flush failed while its retirement held new writes back: what it
    /// completed since its last good flush joins the retirement's run, as for a member
    /// retired because its flush failed. Returns false where the run cannot take them (a
    /// later retirement came since): they are then noted by the caller.
    pub(super) fn gated_flush_failed(&mut self, member: usize) -> bool {
        let Some(gate) = self.rewriting.gate.filter(|gate| gate.member == member) else {
            return false;
        };
        self.rewriting.gate = None;
        let Some(target) = self.retiring.redirect_to() else {
            return false;
        };
        let Some((newest, run)) = self.retiring.newest() else {
            return false;
        };
        if newest != member {
            return false;
        }
        let in_doubt: Vec<Done> = self.placement.members[member]
            .flushes
            .take_in_doubt()
            .into();
        let outstanding: u64 = run
            + self
                .retiring
                .redirect_numbers()
                .filter_map(|number| self.frontier.flights().get(number))
                .map(|flight| flight.chunk_count as u64)
                .sum::<u64>();
        // The retirement starts where the stream stood at the first chunk that goes
        // elsewhere, its void at the first of their slots.
        let earliest = in_doubt
            .iter()
            .min_by_key(|done| done.first_sequence)
            .copied();
        let void = in_doubt.iter().min_by_key(|done| done.position).copied();
        (self.retiring).start_earlier(earliest, void, gate.void_position);
        self.placement.members[member].flushes.failed_now();
        let rewrites = self.within_room(member, target, in_doubt, outstanding);
        self.rewriting.queue(member, rewrites);
        true
    }

    /// Lets new writes go again once the retired member's flush has had its chance.
    pub(super) fn gate_expired(&mut self) {
        let now = self.clock.now();
        self.rewriting.gate_expired(now);
    }

    /// Chunks `member` completed since its last good flush.
    pub(super) fn unflushed_chunk_count(&self, member: usize) -> u64 {
        self.placement.members[member].flushes.in_doubt_chunks()
    }

    /// Sends the queued rewrites to the redirect member, as far as its queue, its room and
    /// the free buffers allow. Returns whether anything moved.
    pub(super) fn submit_rewrites(&mut self) -> bool {
        let mut progressed = false;
        while let (Some(&rewrite), Some(target)) =
            (self.rewriting.queued.front(), self.retiring.redirect_to())
        {
            let Some(buffer) = self.rewrite_buffer(rewrite, target) else {
                break;
            };
            self.rewriting.queued.pop_front();
            progressed = true;
            let whole = self.read_back_whole(rewrite, buffer);
            if whole == 0 {
                self.ingest.free_buffer(buffer);
                continue;
            }
            if let Err(error) = self.send_rewrite(rewrite, target, buffer, whole) {
                self.fail(RecordingFailure::step(Step::Rewrite(target as u16), error));
                self.ingest.free_buffer(buffer);
                self.rewriting.queued.clear();
                break;
            }
        }
        progressed
    }

    /// A free buffer for `rewrite` to `target`, where the run, the target and the queue
    /// take it now. Where they never will, what is left of the rewrites is given up.
    fn rewrite_buffer(&mut self, rewrite: Rewrite, target: usize) -> Option<u32> {
        let ring = matches!(self.options.fill, Fill::Ring { .. });
        if self.retiring.newest_run_cut() {
            // A write sent again failed on the redirect member: nothing more joins the
            // run. What is left stays where the failed flush left it, noted.
            self.rewrites_given_up();
            return None;
        }
        let count = rewrite.done.chunk_count;
        let state = &self.placement.members[target];
        if !ring && state.point.slot() + count as u64 > state.point.linear_end_slot() {
            // No room left on the member (it filled meanwhile).
            self.rewrites_given_up();
            return None;
        }
        let room = self.engine.in_flight() + self.max_parts() <= self.engine_queue_depth;
        if !room || !self.placement.members[target].can_take_redirect(count as u64, ring) {
            return None;
        }
        let buffer = self.ingest.take_free();
        if buffer.is_none() && self.engine.in_flight() == 0 {
            // Every buffer waits, filled, behind the rewrites: none comes back. What
            // is left stays where the failed flush left it, noted.
            self.rewrites_given_up();
        }
        buffer
    }

    /// Reads `rewrite` back into `buffer`; returns how many chunks from the first read back
    /// whole. The chunks after one that did not go back to the front of the queue.
    fn read_back_whole(&mut self, rewrite: Rewrite, buffer: u32) -> u32 {
        let count = rewrite.done.chunk_count;
        let (whole, overwritten) = self.read_back(rewrite, buffer);
        if whole < count && overwritten {
            // A later lap of the member went over it: gone as a ring drops its oldest.
            if whole + 1 < count {
                let rest = self.rest_of(rewrite, whole + 1);
                self.rewriting.queued.push_front(rest);
            }
        } else if whole < count {
            // Lost with the member: chunk `whole` did not read back. The rest goes on
            // its own, after it.
            self.note_unconfirmed(rewrite.from, 1, Unconfirmed::NotReadBack);
            if whole + 1 < count {
                let skip = whole + 1;
                let rest = self.rest_of(rewrite, skip);
                self.rewriting.queued.push_front(rest);
            }
        }
        whole
    }

    /// Writes the first `whole` chunks of `rewrite`, read back into `buffer`, to `target`,
    /// and counts them in the retirement's run.
    fn send_rewrite(
        &mut self,
        rewrite: Rewrite,
        target: usize,
        buffer: u32,
        whole: u32,
    ) -> Result<(), RecordingError> {
        let user_data = tag(REWRITE_BIT | self.rewriting.next_number, 1);
        self.rewriting.next_number += 1;
        let placed = self.place(
            buffer,
            target,
            whole,
            rewrite.done.first_sequence,
            user_data,
        )?;
        self.retiring.count_in_run(placed.slot, whole);
        // The chunks count where they land.
        self.placement.members[rewrite.from]
            .queue
            .uncount(whole as u64);
        self.rewriting.flights.push(RewriteFlight {
            user_data,
            buffer,
            from: rewrite.from,
            done: Done {
                chunk_count: whole,
                ..rewrite.done
            },
            member: target,
            placed: Done {
                first_sequence: rewrite.done.first_sequence,
                chunk_count: whole,
                slot: placed.slot,
                position: placed.position,
                lie: placed.lie,
                stream_offset_bytes: self.ingest.meta(buffer, 0).stream_offset_bytes,
            },
            parts_left: placed.lie.len() as u8,
            failed: None,
            submitted: self.clock.now(),
        });
        Ok(())
    }

    /// Reads `rewrite` back from its member into `buffer` and describes its chunks for
    /// framing. Returns how many chunks, from the first, read back whole (each decodes,
    /// and is the chunk of this recording, member, slot and sequence written there), and
    /// whether the next one was overwritten by a later chunk of the recording (a ring).
    fn read_back(&mut self, rewrite: Rewrite, buffer: u32) -> (u32, bool) {
        let set = self.set;
        let Some(member) = set.members[rewrite.from].as_ref() else {
            return (0, false);
        };
        let chunk_bytes = self.chunk_bytes();
        let count = rewrite.done.chunk_count;
        let slots = slots_of(&rewrite.done);
        let layout = member.layout();
        let bytes = self.engine.pool_mut().slot_mut(buffer as usize);
        // Runs of consecutive slots: one read each (a ring write may go on at slot 0).
        let mut index = 0usize;
        while index < count as usize {
            let mut end = index + 1;
            while end < count as usize && slots[end] == slots[end - 1] + 1 {
                end += 1;
            }
            let Some(offset) = layout.data_slot_offset_bytes(slots[index]) else {
                return (index as u32, false);
            };
            let into = &mut bytes[index * chunk_bytes..end * chunk_bytes];
            if member.disk.read_exact_at(into, offset).is_err() {
                return (index as u32, false);
            }
            index = end;
        }
        let mut whole = 0;
        let mut overwritten = false;
        for (index, &slot) in slots.iter().enumerate() {
            let view = match decode_chunk(&bytes[index * chunk_bytes..(index + 1) * chunk_bytes]) {
                Ok(view) => view,
                Err(_) => break,
            };
            let header = view.header;
            let sequence = rewrite.done.first_sequence + index as u64;
            let ours = header.set_uuid == set.set_uuid
                && header.recording_id == self.recording_id
                && header.member_index as usize == rewrite.from
                && header.slot_index == slot;
            if !(ours && header.sequence == sequence) {
                overwritten = ours && header.sequence > sequence;
                break;
            }
            let meta = ChunkMeta {
                timestamp_ns: header.timestamp_ns,
                elapsed_ns: header.elapsed_ns,
                stream_offset_bytes: header.stream_offset_bytes,
                gap_bytes: header.gap_bytes,
                // A rewrite never joins the ready FIFO, so no rewind of the stream reads it.
                lost_through_bytes: 0,
                payload_len_bytes: header.payload_len_bytes,
                payload_crc32c: crate::layout::crc32c(view.payload),
                end: header.flags.contains(ChunkFlags::END),
            };
            self.ingest.read_back(buffer, index as u32, meta);
            whole += 1;
        }
        self.ingest.read_back_count(buffer, whole);
        (whole, overwritten)
    }

    /// What is left of `rewrite` from its chunk `skip` on (its stream offset is read back
    /// with it).
    fn rest_of(&self, rewrite: Rewrite, skip: u32) -> Rewrite {
        let usable = self.placement.members[rewrite.from].point.lap_slots();
        let lie = rewrite.done.lie.rest_after(skip);
        Rewrite {
            from: rewrite.from,
            done: Done {
                first_sequence: rewrite.done.first_sequence + skip as u64,
                chunk_count: rewrite.done.chunk_count - skip,
                slot: lie.first_slot(),
                position: match self.options.fill {
                    Fill::Ring { .. } => {
                        rewrite
                            .done
                            .lie
                            .position_of(skip, rewrite.done.position, usable)
                    }
                    Fill::Linear => lie.first_slot(),
                },
                lie,
                stream_offset_bytes: rewrite.done.stream_offset_bytes,
            },
        }
    }

    /// A part of a rewrite completed.
    pub(super) fn rewrite_completed(&mut self, completion: IoCompletion) {
        let Some(at) = self
            .rewriting
            .flights
            .iter()
            .position(|flight| flight.user_data == completion.user_data)
        else {
            return;
        };
        if let Err(error) = completion.result {
            self.rewriting.flights[at].failed.get_or_insert(error);
        }
        self.rewriting.flights[at].parts_left -= 1;
        if self.rewriting.flights[at].parts_left > 0 {
            return;
        }
        let flight = self.rewriting.flights.swap_remove(at);
        let io_bytes = flight.placed.chunk_count as u64 * self.set.chunk_size_bytes as u64;
        if let Some(counters) = self.counters {
            let written_bytes = if flight.failed.is_some() { 0 } else { io_bytes };
            counters.members[flight.member]
                .completed(written_bytes, self.clock.since(flight.submitted));
        }
        let now = self.clock.now();
        let member = &mut self.placement.members[flight.member];
        let (number, _) = untag(flight.user_data);
        member.queue.completed(number, io_bytes, now);
        self.ingest.free_buffer(flight.buffer);
        match flight.failed {
            None => member.flushes.completed(flight.placed),
            Some(error) => {
                // The chunks stay where the failed flush left them; the member they went to
                // fails as a member whose write fails does.
                let chunks = flight.done.chunk_count as u64;
                self.note_unconfirmed(flight.from, chunks, Unconfirmed::NotRewritten);
                // Its slots hold nothing: the run ends before them.
                self.cut_run_at(flight.member, flight.placed.slot);
                let cause = (retire::cause_of_write(&error), error.errno);
                self.member_failed(flight.member, cause, MemberFault::Write(error));
            }
        }
    }

    /// Rewrites that cannot go out stay where the failed flush left them, noted.
    pub(super) fn rewrites_given_up(&mut self) {
        while let Some(rewrite) = self.rewriting.queued.pop_front() {
            let chunks = rewrite.done.chunk_count as u64;
            self.note_unconfirmed(rewrite.from, chunks, Unconfirmed::NotRewritten);
        }
    }

    /// Notes `chunks` of `member` that no drive confirmed durable, for `why` (one note per
    /// member and reason, counting them all).
    fn note_unconfirmed(&mut self, member: usize, chunks: u64, why: Unconfirmed) {
        let report = self.member_error_report(member, MemberError::Unconfirmed(why));
        self.retiring.note_member_error(MemberErrorReport {
            unflushed_chunk_count: chunks,
            ..report
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::recording::writer::parts::{lay_ring, Lay};

    #[test]
    fn new_writes_wait_for_rewrites_and_a_gate_until_it_expires_or_its_flush_was_offered() {
        let mut rewriting = Rewriting::default();
        assert!(!rewriting.holds_new_writes());
        rewriting.queue(1, vec![Done::four_at(0), Done::four_at(4)]);
        assert!(rewriting.queued() && rewriting.holds_new_writes());
        assert_eq!(rewriting.queued[1].from, 1);
        rewriting.queued.clear();
        let now = Instant::now();
        rewriting.hold(1, 0, (now, Duration::from_secs(10)));
        assert!(rewriting.holds_new_writes() && rewriting.gates(1) && !rewriting.gates(0));
        assert!(rewriting.waits_for_offer());
        rewriting.offered(&[true, false]);
        assert!(rewriting.offered_gate().is_none(), "not its member's flush");
        rewriting.offered(&[false, true]);
        assert!(!rewriting.waits_for_offer());
        assert_eq!(rewriting.offered_gate().map(|gate| gate.member), Some(1));
        assert!(!rewriting.gate_expired(now + Duration::from_millis(249)));
        assert!(rewriting.holds_new_writes());
        assert!(rewriting.gate_expired(now + Duration::from_millis(250)));
        assert!(!rewriting.holds_new_writes() && !rewriting.gated());
    }

    #[test]
    fn a_completed_writes_slots_are_its_chunks_in_order_across_its_parts() {
        assert_eq!(slots_of(&Done::four_at(10)), [10, 11, 12, 13]);
        // A ring write that went round kept slots 2..4 of a lap of 8, from slot 6.
        let Lay::At { parts, .. } = lay_ring(6, 4, 8, &[(2, 2)], &[]) else {
            panic!("lies in the lap");
        };
        let done = Done {
            chunk_count: 4,
            lie: parts,
            ..Done::four_at(6)
        };
        assert_eq!(slots_of(&done), [6, 7, 0, 1]);
        // Fewer chunks than its parts hold (a failed write's landed ones): those alone.
        let landed = Done {
            chunk_count: 3,
            ..done
        };
        assert_eq!(slots_of(&landed), [6, 7, 0]);
    }

    #[test]
    fn a_rewrites_completion_is_told_from_a_writes_whatever_its_attempt() {
        for attempt in [0, 1, 7] {
            assert!(is_rewrite(tag(REWRITE_BIT | 42, attempt)));
            assert!(!is_rewrite(tag(42, attempt)));
        }
    }
}
