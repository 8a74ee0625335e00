//! Placement: ready buffers become writes: sequence numbers, the member's next slots (a ring
//! write at the end of a lap goes on at slot 0 as a second I/O), headers framed in place,
//! trim ahead of a ring's write point.

use super::*;

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
            .map(|member| !member.retired || member.unflushed)
            .collect()
    }

    /// Which members still take writes and metadata.
    pub(super) fn live(&self) -> Vec<bool> {
        self.members.iter().map(|member| !member.retired).collect()
    }
}

impl Writer<'_> {
    /// Sends ready buffers to members. Returns whether anything was submitted.
    pub(super) fn submit(&mut self) -> bool {
        // A retired member's writes go out again first, one after another on one member:
        // those it had not completed (the frontier waits for them), and those it had
        // completed and never made durable.
        let mut progressed = self.submit_redirects() | self.submit_rewrites();
        if self.retiring.holds_new_writes() {
            return progressed;
        }
        while let Some(&buffer) = self.ingest.ready.front() {
            if !self.frontier.has_room() {
                break; // The frontier must move first: wait for the oldest write.
            }
            if !self.placement.trim_failures.is_empty() {
                break; // A member failed: it is retired before anything else goes out.
            }
            if self.engine.in_flight() + self.max_parts() > self.engine_queue_depth {
                break;
            }
            let chunk_count = self.ingest.buffer_chunk_counts[buffer as usize];
            let now = self.clock.now();
            let (fill, stripe) = (self.options.fill, self.options.stripe);
            let Some(member_index) = self.placement.choose_member(chunk_count, fill, stripe, now)
            else {
                break;
            };
            self.ingest.ready.pop_front();
            if let Err(error) = self.submit_buffer(buffer, member_index, chunk_count) {
                self.error.get_or_insert(error.to_string());
                self.ingest.free.push(buffer);
                break;
            }
            progressed = true;
        }
        if self.placement.full {
            // Nothing more fits: what is buffered cannot be recorded.
            while let Some(buffer) = self.ingest.ready.pop_front() {
                self.ingest.drop_buffer(buffer);
            }
        }
        self.trims_failed();
        progressed
    }

    /// Fails the members whose discard ahead of the write point failed (a dying drive
    /// fails its discards with its writes): each is retired, its writes sent elsewhere.
    pub(super) fn trims_failed(&mut self) {
        for (member, error) in std::mem::take(&mut self.placement.trim_failures) {
            self.member_io_failed(member, &error);
        }
    }

    /// I/Os one write may need: two in a ring (the end of a lap, then slot 0).
    pub(super) fn max_parts(&self) -> u32 {
        match self.options.fill {
            Fill::Linear => 1,
            Fill::Ring { .. } => 2,
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
        self.frontier.flights.push(Flight {
            buffer,
            member: member_index as u16,
            first_sequence,
            chunk_count,
            stream_end_bytes: placed.stream_end_bytes,
            // Not the loss counted so far: input lost after this write's chunks were cut
            // belongs to later chunks (it would exceed the stream this write ends).
            lost_bytes_through: self.placement.submitted_gap_bytes,
            parts_left: placed.parts,
            failed: false,
            slot: placed.slot,
            position: placed.position,
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
    /// slots of `member_index` and pushes the write (two I/Os where a ring lap ends),
    /// tagged `user_data`. A write sent again after a retirement carries `REDIRECTED`.
    pub(super) fn place(
        &mut self,
        buffer: u32,
        member_index: usize,
        chunk_count: u32,
        first_sequence: u64,
        user_data: u64,
    ) -> Result<Placed, RecordingError> {
        let redirected = untag(user_data).1 > 0;
        let ring = matches!(self.options.fill, Fill::Ring { .. });
        if let Fill::Ring { trim } = self.options.fill {
            // A position at the end of the lap (as a checkpoint may hold) is slot 0 of the next.
            let member = &mut self.placement.members[member_index];
            let (_, lap, slot) = member.ring_next();
            if lap != member.lap {
                member.trimmed_to_slot = 0;
            }
            member.lap = lap;
            member.next_slot = slot;
            if trim && member.lap > 0 {
                self.trim_ahead(member_index)?;
            }
        }
        let chunk_bytes = self.chunk_bytes();
        let member = &self.placement.members[member_index];
        let first_slot = member.next_slot;
        let lap = member.lap;
        let usable_slots = member.usable_slots;
        let ring_position = lap * usable_slots + first_slot;
        // A ring write that reaches the end of the lap goes on at slot 0, so that every lap
        // fills every usable slot in order (what is left at the end of a lap would otherwise
        // hold an older lap's data).
        let first_part_count = if ring {
            (usable_slots - first_slot).min(chunk_count as u64) as u32
        } else {
            chunk_count
        };
        if ring {
            debug_assert!(
                member.pending.iter().all(|&(_, start, count)| {
                    !ring_ranges_overlap(
                        (start, count),
                        (ring_position, chunk_count as u64),
                        usable_slots,
                    )
                }),
                "a ring write overlaps a write in flight"
            );
        }
        let slot_of = |index: u32| {
            if index < first_part_count {
                first_slot + index as u64
            } else {
                (index - first_part_count) as u64
            }
        };
        let base = buffer as usize * self.k as usize;
        let mut flags = ChunkFlags::empty();
        if self.options.pattern {
            flags.insert(ChunkFlags::PATTERN);
        }
        if self.ingest.records {
            flags.insert(ChunkFlags::RECORDS);
        }
        if redirected {
            flags.insert(ChunkFlags::REDIRECTED);
        }
        let mut stream_end_bytes = 0;
        for index in 0..chunk_count as usize {
            let meta = self.ingest.metas[base + index];
            let sequence = first_sequence + index as u64;
            let mut chunk_flags = flags;
            if sequence == self.first_sequence {
                chunk_flags.insert(ChunkFlags::FIRST);
            }
            if meta.gap_bytes > 0 {
                chunk_flags.insert(ChunkFlags::GAP);
            }
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
                slot_index: slot_of(index as u32),
                timestamp_ns: meta.timestamp_ns,
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
        // The I/Os: (first slot, first chunk of the buffer, chunk count).
        let all_parts = [
            (first_slot, 0u32, first_part_count),
            (0, first_part_count, chunk_count - first_part_count),
        ];
        let parts = &all_parts[..if first_part_count < chunk_count { 2 } else { 1 }];
        let mut offsets_bytes = [0u64; 2];
        for (part, &(slot, _, _)) in parts.iter().enumerate() {
            offsets_bytes[part] = self.set.members[member_index]
                .as_ref()
                .and_then(|m| m.layout().data_slot_offset_bytes(slot))
                .ok_or_else(|| {
                    RecordingError::Usage(format!("slot {slot} is outside member {member_index}"))
                })?;
        }
        for (part, &(_, first_chunk, count)) in parts.iter().enumerate() {
            // SAFETY: `buffer` left the ready queue for this write and is freed only by its
            // completion (a retry after a member's failure copies it into a buffer of its own
            // while an attempt may still hold it); a ring write's two parts name disjoint
            // chunks of it, and both only read it.
            unsafe {
                self.engine.push(IoRequest {
                    op: IoOp::Write,
                    file_index: member_index as u16,
                    slot: buffer,
                    slot_offset_bytes: first_chunk * chunk_bytes as u32,
                    offset_bytes: offsets_bytes[part],
                    len_bytes: count * chunk_bytes as u32,
                    user_data,
                });
            }
        }
        let member = &mut self.placement.members[member_index];
        for (part, &(slot, first_chunk, _)) in parts.iter().enumerate() {
            // Redirected slots just before this part: those before the write, and in a
            // redirected write, its own first part.
            let tail = match (redirected, part) {
                (_, 0) => member.redirect_tail_slots,
                (true, _) => member.redirect_tail_slots + first_part_count as u64,
                (false, _) => 0,
            };
            member.undurable.push_back((
                first_sequence + first_chunk as u64,
                slot,
                lap + part as u64,
                tail,
            ));
        }
        member.redirect_tail_slots = if redirected {
            member.redirect_tail_slots + chunk_count as u64
        } else {
            0
        };
        member
            .pending
            .push_back((untag(user_data).0, ring_position, chunk_count as u64));
        member.next_slot = first_slot + chunk_count as u64;
        if ring && member.next_slot >= usable_slots {
            member.next_slot -= usable_slots;
            member.lap += 1;
            member.trimmed_to_slot = 0;
        }
        if member.in_flight == 0 {
            member.busy_since = Some(self.clock.now());
            member.idle_since = None;
        }
        member.in_flight += 1;
        if let Some(counters) = self.counters {
            counters.members[member_index].submitted();
        }
        member.chunk_count += chunk_count as u64;
        member.io_count += parts.len() as u64;
        member.since_checkpoint_slots += chunk_count as u64;
        member.since_durable_slots += chunk_count as u64;
        Ok(Placed {
            parts: parts.len() as u8,
            slot: first_slot,
            position: ring_position,
            stream_end_bytes,
        })
    }

    /// Ring with trim: keep the slots ahead of the write point discarded. A discard that
    /// fails is kept in `trim_failures`, to fail its member once the write being placed is
    /// out (nothing was discarded that a write needs: the write goes on).
    pub(super) fn trim_ahead(&mut self, member_index: usize) -> Result<(), RecordingError> {
        let io_slots = self.k as u64;
        let member = &self.placement.members[member_index];
        // Discarding overwrites as a write does: no further past the last durable
        // checkpoint than writes may go.
        let room = member
            .recovery_limit_slots
            .saturating_sub(member.since_durable_slots + member.durable_guard_slots);
        // Never the lap's last write either: a discard not yet flushed may be torn by a power
        // cut, leaving discarded slots blank around older chunks it kept. Recovery tells a
        // discard ahead of lost writes by the older chunk that follows blank slots, and at
        // the end of the lap nothing would follow them (the slots a lap of whole writes
        // leaves unused are blank too): the oldest survivors would seem to begin before them.
        let mut want_to = (member.next_slot + (TRIM_AHEAD_IO_COUNT * io_slots).min(room))
            .min(member.usable_slots.saturating_sub(io_slots));
        // Never discard slots that a write in flight (of the lap before) still goes to.
        if let Some(&(_, oldest, _)) = member.pending.front() {
            let lap_start = member.lap * member.usable_slots;
            want_to = want_to.min((oldest + member.usable_slots).saturating_sub(lap_start));
        }
        if member.trimmed_to_slot >= want_to.min(member.next_slot + io_slots) {
            return Ok(());
        }
        let from = member.trimmed_to_slot.max(member.next_slot);
        if want_to <= from {
            return Ok(());
        }
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
        self.placement.members[member_index].trimmed_to_slot = want_to;
        Ok(())
    }
}
