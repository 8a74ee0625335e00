//! Placement: ready buffers become writes: sequence numbers, the member's next slots (a ring
//! write goes on at slot 0 where its lap ends, and round slots marks keep, an I/O a part:
//! see `parts.rs`), headers framed in place, trim ahead of a ring's write point.

use super::member::MemberState;
use super::parts::lay_ring;
use super::parts::Lay;
use super::parts::Part;
use super::parts::Parts;
use super::parts::PARTS_MAX;
use super::reclaim::Room;
use super::retire::tag;
use super::retire::untag;
use super::Flight;
use super::MemberReport;
use super::Placed;
use super::Writer;
use super::TRIM_AHEAD_IO_COUNT;
use crate::control::ControlState;
use crate::engine::IoOp;
use crate::engine::IoRequest;
use crate::layout::ChunkFlags;
use crate::layout::ChunkHeader;
use crate::layout::MemberSpan;
use crate::layout::RecordingEntry;
use crate::recording::failure::RecordingFailure;
use crate::recording::failure::Step;
use crate::recording::volume::VolumeSet;
use crate::recording::Fill;
use crate::recording::RecordingError;
use std::time::Duration;

/// Where a write lands on its member: its parts (see `parts.rs`), the ring position of its
/// first chunk, and the ring positions it takes (kept slots it goes round included).
#[derive(Debug, Clone, Copy)]
struct Span {
    ring: bool,
    lap: u64,
    usable_slots: u64,
    ring_position: u64,
    chunk_count: u32,
    parts: Parts,
    /// Kept slots between the write point and the first chunk.
    lead: u64,
    extent: u64,
}

/// Where each member's span in the recording's entry ends.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum SpanEnd {
    /// Where it began: the entry is open.
    Start,
    /// Past its last write the durable frontier passed: a failed linear recording ends
    /// where its claim does.
    Frontier,
    /// At its write point.
    WritePoint,
}

/// The placement stage's state: every member's slots, laps and limits, which member comes
/// next, and the sequence numbers given out.
pub(super) struct Placement {
    pub(super) members: Vec<MemberState>,
    /// Where round-robin (and ties of adaptive striping) go on.
    pub(super) rr_next: usize,
    /// The sequence number of the next chunk placed.
    pub(super) next_sequence: u64,
    /// Gap bytes carried by the chunks submitted so far (chunks go out in stream order).
    pub(super) submitted_gap_bytes: u64,
    /// Discards ahead of a ring's write point that failed, by member: each fails its member
    /// once the write being placed is out.
    pub(super) trim_failures: Vec<(usize, RecordingError)>,
    /// No member has room for another write.
    pub(super) full: bool,
}

impl Placement {
    pub(super) fn new(members: Vec<MemberState>, next_sequence: u64) -> Placement {
        Placement {
            members,
            rr_next: 0,
            next_sequence,
            submitted_gap_bytes: 0,
            trim_failures: Vec::new(),
            full: false,
        }
    }

    /// The members a checkpoint flushes: the live ones, and those retired since their
    /// last flush (what they completed before they failed is claimed).
    pub(super) fn flush_set(&self) -> Vec<bool> {
        self.members
            .iter()
            .map(|member| !member.retired || member.flushes.owed())
            .collect()
    }

    /// Which members still take writes and metadata.
    pub(super) fn live(&self) -> Vec<bool> {
        self.members.iter().map(|member| !member.retired).collect()
    }

    /// Each member's span in the recording's entry: from where the recording began on it
    /// to where `end` says.
    pub(super) fn spans(&self, end: SpanEnd) -> Vec<MemberSpan> {
        let span = |member: &MemberState| {
            let start = member.point.start().next_slot_index;
            MemberSpan {
                start_slot_index: start,
                end_slot_index: match end {
                    SpanEnd::Start => start,
                    SpanEnd::Frontier => member.point.frontier_end(),
                    SpanEnd::WritePoint => member.point.slot(),
                },
            }
        };
        self.members.iter().map(span).collect()
    }

    /// The lap each member of a ring began in.
    pub(super) fn start_laps(&self) -> Vec<u32> {
        let lap = |member: &MemberState| member.point.start().lap as u32;
        self.members.iter().map(lap).collect()
    }

    /// Which members of a ring overwrote their own oldest chunks (none while the entry is
    /// `open`): one that wrote more than a lap, or whose write point or discards went past
    /// its start a lap on though it holds fewer chunks (a retired member's writes that
    /// failed, or did not complete in time and may land yet, are not counted, but they went
    /// over its oldest chunks all the same, and a trim ahead of them discarded more).
    pub(super) fn overwrote(&self, open: bool) -> Vec<bool> {
        let overwrote = |member: &MemberState| {
            !open
                && (member.queue.counts().0 > member.point.lap_slots() || member.point.went_round())
        };
        self.members.iter().map(overwrote).collect()
    }

    /// Each member's share for the report: its path (`path_of` its index), chunks, I/Os,
    /// bytes of `chunk_bytes` chunks, laps, and rate over `elapsed`.
    pub(super) fn member_reports(
        &self,
        path_of: impl Fn(usize) -> std::path::PathBuf,
        chunk_bytes: u64,
        elapsed: Duration,
    ) -> Vec<MemberReport> {
        let report = |(index, member): (usize, &MemberState)| {
            let (chunk_count, io_count) = member.queue.counts();
            let bytes = chunk_count * chunk_bytes;
            MemberReport {
                path: path_of(index),
                chunk_count,
                io_count,
                bytes,
                laps: member.point.lap(),
                rate_mib_per_s: crate::unit::rate_mib_per_s(bytes, elapsed),
            }
        };
        self.members.iter().enumerate().map(report).collect()
    }

    /// A linear recording added to `set`, whose `marks` keep slots: each member keeps out
    /// of them (see [`WritePoint::keep_out_of`]).
    pub(super) fn keep_out_of_marks(&mut self, set: &VolumeSet, marks: &[RecordingEntry]) {
        for (index, member) in self.members.iter_mut().enumerate() {
            let slots = set.members[index]
                .as_ref()
                .map_or(member.point.data_slots(), |m| m.layout().data_slot_count);
            member
                .point
                .keep_out_of(&crate::recording::marks::kept_runs(marks, index, slots));
        }
    }
}

impl Writer<'_> {
    /// Sends ready buffers to members. Returns whether anything was submitted.
    pub(super) fn submit(&mut self) -> bool {
        // A retired member's writes go out again first, one after another on one member:
        // those it had not completed (the frontier waits for them), and those it had
        // completed and never made durable.
        let mut progressed = self.submit_redirects() | self.submit_rewrites();
        if self.holds_new_writes() {
            return progressed;
        }
        while let Some(buffer) = self.ingest.ready_front() {
            if !self.frontier.has_room() {
                break; // The frontier must move first: wait for the oldest write.
            }
            if !self.placement.trim_failures.is_empty() {
                break; // A member failed: it is retired before anything else goes out.
            }
            if self.engine.in_flight() + self.max_parts() > self.engine_queue_depth {
                break;
            }
            let chunk_count = self.ingest.chunk_count(buffer);
            let now = self.clock.now();
            let (fill, stripe) = (self.options.fill, self.options.stripe);
            let Some(member_index) = self.placement.choose_member(chunk_count, fill, stripe, now)
            else {
                if self.placement.full {
                    match self.make_room() {
                        Room::Made => {
                            self.placement.full = false;
                            continue;
                        }
                        // A reader has the oldest recording: the buffers wait for it.
                        Room::Wait => self.placement.full = false,
                        Room::None => {}
                    }
                }
                break;
            };
            self.ingest.take_ready();
            if let Err(error) = self.submit_buffer(buffer, member_index, chunk_count) {
                self.fail(RecordingFailure::step(
                    Step::Submit(member_index as u16),
                    error,
                ));
                self.ingest.free_buffer(buffer);
                break;
            }
            progressed = true;
        }
        if self.placement.full {
            // Nothing more fits: what is buffered cannot be recorded.
            self.ingest.drop_ready();
        }
        self.trims_failed();
        progressed
    }

    /// Fails the members whose discard ahead of the write point failed (a dying drive
    /// fails its discards with its writes): each is retired, its writes sent elsewhere.
    pub(super) fn trims_failed(&mut self) {
        for (member, error) in std::mem::take(&mut self.placement.trim_failures) {
            self.member_io_failed(member, error);
        }
    }

    /// I/Os one write may need: in a ring, one a part (see `parts.rs`).
    pub(super) fn max_parts(&self) -> u32 {
        match self.options.fill {
            Fill::Linear => 1,
            Fill::Ring { .. } => PARTS_MAX as u32,
        }
    }

    /// Sends a filled buffer to `member_index` as the next chunks of the stream.
    pub(super) fn submit_buffer(
        &mut self,
        buffer: u32,
        member_index: usize,
        chunk_count: u32,
    ) -> Result<(), RecordingError> {
        let number = self.frontier.next_number();
        let first_sequence = self.placement.next_sequence;
        let placed = self.place(
            buffer,
            member_index,
            chunk_count,
            first_sequence,
            tag(number, 0),
        )?;
        self.frontier.flights_mut().push(Flight {
            buffer,
            member: member_index as u16,
            first_sequence,
            chunk_count,
            stream_end_bytes: placed.stream_end_bytes,
            // Not the loss counted so far: input lost after this write's chunks were cut
            // belongs to later chunks (it would exceed the stream this write ends).
            lost_bytes_through: self.placement.submitted_gap_bytes,
            parts_left: placed.lie.len() as u8,
            failed: false,
            slot: placed.slot,
            position: placed.position,
            lie: placed.lie,
            attempt: 0,
            submitted: self.clock.now(),
            error: None,
            needs_copy: false,
            landed: 0,
        });
        self.placement.next_sequence += chunk_count as u64;
        Ok(())
    }

    /// Frames the chunks of `buffer` (sequence numbers from `first_sequence`) for the next
    /// slots of `member_index` and pushes the write (one I/O a part: see `parts.rs`),
    /// tagged `user_data`. A write sent again after a retirement carries `REDIRECTED`, and
    /// lies in one run.
    pub(super) fn place(
        &mut self,
        buffer: u32,
        member_index: usize,
        chunk_count: u32,
        first_sequence: u64,
        user_data: u64,
    ) -> Result<Placed, RecordingError> {
        let redirected = untag(user_data).1 > 0;
        if let Fill::Ring { trim } = self.options.fill {
            self.ring_write_point(member_index, trim)?;
            let member = &mut self.placement.members[member_index];
            if redirected && member.jump_kept(chunk_count as u64, true) {
                self.widen_marks_or_fail(member_index);
            }
        }
        let span = self.span(member_index, chunk_count, redirected);
        let stream_end_bytes =
            self.frame(buffer, member_index, &span, first_sequence, redirected)?;
        self.push_parts(buffer, member_index, span.parts.as_slice(), user_data)?;
        self.note_placed(member_index, &span, first_sequence, redirected, user_data);
        let placed = Placed {
            lie: span.parts,
            slot: span.parts.first_slot(),
            position: span.ring_position,
            stream_end_bytes,
        };
        self.note_mark_write(
            member_index,
            &placed,
            (buffer, chunk_count),
            first_sequence,
            redirected,
        );
        Ok(placed)
    }

    /// A ring's write point before a write: a position at the end of the lap (as a
    /// checkpoint may hold) is slot 0 of the next; with `trim`, the slots ahead are
    /// discarded once the ring has gone round.
    #[inline]
    fn ring_write_point(&mut self, member_index: usize, trim: bool) -> Result<(), RecordingError> {
        let member = &mut self.placement.members[member_index];
        member.point.onto_ring_next();
        if trim && member.point.lap() > 0 {
            self.trim_ahead(member_index)?;
        }
        Ok(())
    }

    /// The slots a write of `chunk_count` chunks takes at `member_index`'s write point: in
    /// a ring, round kept slots and on at slot 0 where the lap ends (see `parts.rs`); a
    /// redirected write in one run, the write point having jumped past kept slots in its way.
    #[inline]
    fn span(&self, member_index: usize, chunk_count: u32, redirected: bool) -> Span {
        let ring = matches!(self.options.fill, Fill::Ring { .. });
        let member = &self.placement.members[member_index];
        let usable_slots = member.point.lap_slots();
        let slot = member.point.slot();
        let write_point = member.point.lap() * usable_slots + slot;
        if !ring {
            return Span {
                ring,
                lap: member.point.lap(),
                usable_slots,
                ring_position: write_point,
                chunk_count,
                parts: Parts::one(slot, chunk_count),
                lead: 0,
                extent: chunk_count as u64,
            };
        }
        let count = chunk_count as u64;
        let laid = match redirected {
            false => member.lay(count),
            true => lay_ring(slot, count, usable_slots, &[], &[]),
        };
        let (parts, lead, extent) = match laid {
            Lay::At {
                parts,
                lead,
                extent,
            } => (parts, lead, extent),
            // `can_take` let no such write through; should one come, it is laid as
            // before kept slots were gone round: one run, on at slot 0.
            Lay::Unsettled | Lay::Scattered => {
                debug_assert!(false, "a ring write that may not go round kept slots");
                match lay_ring(slot, count, usable_slots, &[], &[]) {
                    Lay::At { parts, .. } => (parts, 0, count),
                    _ => unreachable!("nothing kept"),
                }
            }
        };
        let ring_position = write_point + lead;
        debug_assert!(
            !member
                .queue
                .overlaps(ring_position, extent - lead, usable_slots),
            "a ring write overlaps a write in flight"
        );
        Span {
            ring,
            lap: ring_position / usable_slots.max(1),
            usable_slots,
            ring_position,
            chunk_count,
            parts,
            lead,
            extent,
        }
    }

    /// The flags every chunk of a write carries.
    #[inline]
    fn write_flags(&self, redirected: bool) -> ChunkFlags {
        let mut flags = ChunkFlags::empty();
        if self.options.pattern {
            flags.insert(ChunkFlags::PATTERN);
        }
        if self.ingest.records() {
            flags.insert(ChunkFlags::RECORDS);
        }
        if self.ingest.indexed() {
            flags.insert(ChunkFlags::FLOW_INDEX);
        }
        if redirected {
            flags.insert(ChunkFlags::REDIRECTED);
        }
        flags
    }

    /// Encodes each chunk's header in place in `buffer`, for the slots of `span`; returns
    /// where the write's stream ends.
    #[inline]
    fn frame(
        &mut self,
        buffer: u32,
        member_index: usize,
        span: &Span,
        first_sequence: u64,
        redirected: bool,
    ) -> Result<u64, RecordingError> {
        let chunk_bytes = self.chunk_bytes();
        let flags = self.write_flags(redirected);
        let mut stream_end_bytes = 0;
        for index in 0..span.chunk_count as usize {
            let meta = self.ingest.meta(buffer, index as u32);
            let sequence = first_sequence + index as u64;
            let mut chunk_flags = flags;
            if sequence == self.first_sequence {
                chunk_flags.insert(ChunkFlags::FIRST);
            }
            if meta.gap_bytes > 0 {
                chunk_flags.insert(ChunkFlags::GAP);
            }
            chunk_flags.insert(ChunkFlags::ELAPSED);
            if meta.end {
                chunk_flags.insert(ChunkFlags::END);
                if self.state() == ControlState::Abort || self.error.is_some() {
                    chunk_flags.insert(ChunkFlags::ABORTED);
                }
            }
            let header = ChunkHeader {
                set_uuid: self.set.set_uuid,
                recording_id: self.recording_id,
                member_index: member_index as u16,
                stream_id: 0,
                sequence,
                slot_index: span.parts.slot_of(index as u32),
                timestamp_ns: meta.timestamp_ns,
                elapsed_ns: meta.elapsed_ns,
                stream_offset_bytes: meta.stream_offset_bytes,
                gap_bytes: meta.gap_bytes,
                payload_len_bytes: meta.payload_len_bytes,
                flags: chunk_flags,
            };
            let slot = &mut self.engine.pool_mut().slot_mut(buffer as usize)
                [index * chunk_bytes..(index + 1) * chunk_bytes];
            header.encode_into_with_payload_crc(slot, meta.payload_crc32c)?;
            stream_end_bytes = meta.stream_offset_bytes + meta.payload_len_bytes as u64;
            if !redirected {
                self.placement.submitted_gap_bytes += meta.gap_bytes;
            }
        }
        Ok(stream_end_bytes)
    }

    /// Pushes the write's I/Os, one a part; nothing is pushed when a part's slot lies
    /// outside the member.
    #[inline]
    fn push_parts(
        &mut self,
        buffer: u32,
        member_index: usize,
        parts: &[Part],
        user_data: u64,
    ) -> Result<(), RecordingError> {
        let chunk_bytes = self.chunk_bytes();
        let layout = self.set.members[member_index].as_ref().map(|m| *m.layout());
        let offsets_bytes = layout
            .and_then(|layout| part_offsets(&layout, parts))
            .ok_or_else(|| {
                RecordingError::Usage(format!(
                    "a slot of {parts:?} is outside member {member_index}"
                ))
            })?;
        for (&(_, first_chunk, count), offset_bytes) in parts.iter().zip(offsets_bytes) {
            // SAFETY: `buffer` left the ready queue for this write and is freed only by its
            // completion (a retry after a member's failure copies it into a buffer of its own
            // while an attempt may still hold it); a ring write's parts name disjoint chunks
            // of it, and all only read it.
            unsafe {
                self.engine.push(IoRequest {
                    op: IoOp::Write,
                    file_index: member_index as u16,
                    slot: buffer,
                    slot_offset_bytes: first_chunk * chunk_bytes as u32,
                    offset_bytes,
                    len_bytes: count * chunk_bytes as u32,
                    user_data,
                });
            }
        }
        Ok(())
    }

    /// The member's books after a write is pushed: its slots not yet durable, its place
    /// among the writes in flight, the write point past it, and the counts.
    #[inline]
    fn note_placed(
        &mut self,
        member_index: usize,
        span: &Span,
        first_sequence: u64,
        redirected: bool,
        user_data: u64,
    ) {
        let parts = span.parts.as_slice();
        let chunk_count = span.chunk_count as u64;
        let member = &mut self.placement.members[member_index];
        for &(slot, first_chunk, _) in parts {
            let position =
                span.parts
                    .position_of(first_chunk, span.ring_position, span.usable_slots);
            let lap = match span.ring {
                true => position / span.usable_slots.max(1),
                false => span.lap,
            };
            let sequence = first_sequence + first_chunk as u64;
            member
                .reach
                .part_placed(sequence, (slot, lap), first_chunk, redirected);
        }
        member.reach.write_placed(chunk_count, redirected);
        match span.ring {
            true => member.ring_wrote(span.extent, chunk_count),
            false => {
                member
                    .point
                    .linear_wrote(span.parts.first_slot(), chunk_count);
                member.reach.wrote(chunk_count);
            }
        }
        let (number, now) = (untag(user_data).0, self.clock.now());
        let taken = (span.ring_position, span.extent - span.lead);
        member.queue.submitted(number, taken, now);
        if let Some(counters) = self.counters {
            counters.members[member_index].submitted();
        }
        member.queue.count(chunk_count, parts.len() as u64);
    }

    /// Ring with trim: keep the slots ahead of the write point discarded. A discard that
    /// fails is kept in `trim_failures`, to fail its member once the write being placed is
    /// out (nothing was discarded that a write needs: the write goes on).
    pub(super) fn trim_ahead(&mut self, member_index: usize) -> Result<(), RecordingError> {
        let io_slots = self.k as u64;
        let member = &self.placement.members[member_index];
        // Discarding overwrites as a write does: no further past the last durable
        // checkpoint than writes may go.
        let room = member.reach.discard_room();
        // Never the lap's last write either: a discard not yet flushed may be torn by a power
        // cut, leaving discarded slots blank around older chunks it kept. Recovery tells a
        // discard ahead of lost writes by the older chunk that follows blank slots, and at
        // the end of the lap nothing would follow them (the slots a lap of whole writes
        // leaves unused are blank too): the oldest survivors would seem to begin before them.
        let reach = (TRIM_AHEAD_IO_COUNT * io_slots)
            .min(room)
            .min(member.slots_before_kept());
        // Never discard slots that a write in flight (of the lap before) still goes to.
        let oldest = member.queue.oldest().map(|(_, position)| position);
        let Some((from, want_to)) = member.point.discard_next(io_slots, reach, oldest) else {
            return Ok(());
        };
        let Some(target_member) = self.set.members[member_index].as_ref() else {
            return Ok(());
        };
        let layout = target_member.layout();
        let offset = layout.data_slot_offset_bytes(from).unwrap_or(0);
        let len = (want_to - from) * layout.chunk_size_bytes as u64;
        if let Err(source) = target_member.disk.discard(offset, len) {
            let error = RecordingError::Io {
                what: format!(
                    "discarding ahead of the write point on {}",
                    target_member.disk.path().display()
                ),
                source,
            };
            if !self
                .placement
                .trim_failures
                .iter()
                .any(|&(m, _)| m == member_index)
            {
                self.placement.trim_failures.push((member_index, error));
            }
            return Ok(());
        }
        self.placement.members[member_index]
            .point
            .discarded_to(want_to);
        Ok(())
    }
}

/// Where each of a write's parts (at most [`PARTS_MAX`]) starts on a member of `layout`;
/// None when a part's slot lies outside it.
fn part_offsets(layout: &crate::layout::VolumeLayout, parts: &[Part]) -> Option<[u64; PARTS_MAX]> {
    let mut offsets_bytes = [0u64; PARTS_MAX];
    for (offset, &(slot, _, _)) in offsets_bytes.iter_mut().zip(parts) {
        *offset = layout.data_slot_offset_bytes(slot)?;
    }
    (parts.len() <= PARTS_MAX).then_some(offsets_bytes)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::layout::MemberPosition;
    use crate::recording::writer::point::WritePoint;
    use crate::recording::writer::queue::MemberQueue;

    /// A ring write laid round kept ranges and the lap's end is up to [`PARTS_MAX`] I/Os:
    /// each is placed (the writer once had room for two, and a write of three parts in the
    /// hour's soak panicked); a part outside the member places none.
    #[test]
    fn every_part_of_a_write_has_its_place_on_the_member() {
        let layout = crate::layout::VolumeLayout::compute(64 << 20, 128 << 10, 4096).unwrap();
        let last = layout.data_slot_count - 1;
        let parts: [Part; PARTS_MAX] = [(last - 2, 0, 3), (0, 3, 2), (5, 5, 1), (9, 6, 2)];
        let offsets = part_offsets(&layout, &parts).expect("every slot is on the member");
        for (&(slot, _, _), offset) in parts.iter().zip(offsets) {
            assert_eq!(Some(offset), layout.data_slot_offset_bytes(slot));
        }
        assert_eq!(part_offsets(&layout, &parts[..1]).unwrap()[0], offsets[0]);
        assert_eq!(part_offsets(&layout, &[(0, 0, 1), (last + 1, 1, 1)]), None);
    }

    #[test]
    fn the_entry_and_the_report_take_each_members_span_laps_and_counts_from_its_stages() {
        let started = |slot, lap| MemberState {
            point: WritePoint::new(MemberPosition::at(slot, lap), 101, 1),
            queue: MemberQueue::new(4),
            ..MemberState::default()
        };
        let mut placement = Placement::new(vec![started(10, 2), started(50, 0)], 0);
        // The first went a lap and a half on, the second a few slots.
        placement.members[0].point.ring_wrote(150);
        placement.members[0].queue.count(150, 40);
        placement.members[1].point.linear_wrote(50, 8);
        placement.members[1].point.frontier_passed(54);
        placement.members[1].queue.count(8, 2);
        let ends = |end| -> Vec<(u64, u64)> {
            let spans = placement.spans(end);
            spans
                .iter()
                .map(|span| (span.start_slot_index, span.end_slot_index))
                .collect()
        };
        assert_eq!(ends(SpanEnd::Start), [(10, 10), (50, 50)]);
        assert_eq!(ends(SpanEnd::WritePoint), [(10, 60), (50, 58)]);
        assert_eq!(ends(SpanEnd::Frontier), [(10, 10), (50, 54)]);
        assert_eq!(placement.start_laps(), [2, 0]);
        assert_eq!(placement.overwrote(false), [true, false]);
        assert_eq!(
            placement.overwrote(true),
            [false, false],
            "an open entry claims none"
        );
        let reports = placement.member_reports(
            |index| std::path::PathBuf::from(format!("m{index}")),
            4096,
            Duration::from_secs(1),
        );
        let counts: Vec<(u64, u64, u64, u64)> = reports
            .iter()
            .map(|r| (r.chunk_count, r.io_count, r.bytes, r.laps))
            .collect();
        assert_eq!(counts, [(150, 40, 150 * 4096, 3), (8, 2, 8 * 4096, 0)]);
        assert_eq!(reports[1].path, std::path::PathBuf::from("m1"));
    }
}
