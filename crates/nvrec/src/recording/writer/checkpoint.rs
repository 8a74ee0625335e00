//! Checkpoints: when one is due, what it claims (the durable frontier, each member's oldest
//! write not covered, the retirements), and what its outcome from the durability
//! coordinator changes.

use super::*;

impl Writer<'_> {
    pub(super) fn due_for_checkpoint(&self) -> bool {
        // Slots alone call for a new checkpoint only once the frontier has moved: while a
        // member lags, another checkpoint would claim nothing more.
        let moved = self.durable_sequence_end > self.checkpointed_sequence_end;
        self.last_checkpoint.elapsed() >= self.options.sync_interval
            || moved
                && self.members.iter().any(|member| {
                    // Also halfway to how far a member may go past the last durable
                    // checkpoint (the recovery window; in a ring, half a lap), so that
                    // the next one is made before a member has to wait for it.
                    member.since_checkpoint_slots >= (member.recovery_limit_slots / 2).max(1)
                })
    }

    /// Hands a checkpoint of what has completed to the durability coordinator, which
    /// flushes the members and writes it while the data path goes on.
    pub(super) fn offer_checkpoint(&mut self) -> Result<(), RecordingError> {
        let checkpoint = self.build_checkpoint(self.recording_id);
        let live = self.live();
        let flush = self.flush_set();
        // Only a member retired when the flush starts has all its writes covered by it.
        self.offered_flush = self
            .members
            .iter()
            .map(|member| member.retired && member.unflushed)
            .collect();
        self.durability.offer(checkpoint, live, flush)
    }

    /// The members a checkpoint flushes: the live ones, and those retired since their
    /// last flush (what they completed before they failed is claimed).
    pub(super) fn flush_set(&self) -> Vec<bool> {
        self.members
            .iter()
            .map(|member| !member.retired || member.unflushed)
            .collect()
    }

    /// The flush of a retired member failed: what it completed since its last flush may be
    /// gone, so the recording can claim no more than the last durable checkpoint.
    pub(super) fn retired_flush_failed(&mut self, what: String) {
        self.error.get_or_insert(what);
        self.claim_limit = Some(self.durable_claim);
    }

    /// Which members still take writes and metadata.
    pub(super) fn live(&self) -> Vec<bool> {
        self.members.iter().map(|member| !member.retired).collect()
    }

    /// Takes the outcome of a checkpoint the coordinator finished: recovery now starts
    /// from its positions.
    pub(super) fn poll_durability(&mut self) {
        if let Some(outcome) = self.durability.poll() {
            self.checkpoint_made(outcome);
        }
    }

    pub(super) fn checkpoint_made(&mut self, outcome: Result<Checkpoint, DurabilityError>) {
        match outcome {
            Ok(checkpoint) => {
                self.checkpoint_count += 1;
                for (member, flushed) in self.members.iter_mut().zip(&self.offered_flush) {
                    if *flushed {
                        member.unflushed = false;
                    }
                }
                if checkpoint.recording_id == self.recording_id {
                    self.durable_claim = Claimed {
                        sequence_end: checkpoint.durable_sequence_end,
                        stream_bytes: checkpoint.durable_stream_bytes,
                        lost_bytes: checkpoint.durable_lost_bytes,
                    };
                }
                if checkpoint.recording_id == self.recording_id {
                    if let Some(counters) = self.counters {
                        counters.checkpoint_durable(now_ns());
                    }
                    self.progress
                        .durable_bytes
                        .store(checkpoint.durable_stream_bytes, Ordering::Relaxed);
                }
                for member in &mut self.members {
                    member.since_durable_slots = member.since_checkpoint_slots;
                    member.durable_guard_slots = member.checkpoint_guard_slots;
                }
            }
            // A member whose flush or metadata write failed is retired where it may be;
            // the next checkpoint goes to the others.
            Err(DurabilityError {
                member: Some(member),
                error,
            }) if self.members[member].retired => self.retired_flush_failed(error.to_string()),
            Err(DurabilityError {
                member: Some(member),
                error,
            }) => self.member_failed(member, retire::cause_of_io(&error), error.to_string()),
            Err(DurabilityError {
                member: None,
                error,
            }) => {
                self.error.get_or_insert(error.to_string());
            }
        }
    }

    /// Writes a checkpoint here and now (at the start and the end of a recording).
    pub(super) fn write_checkpoint(&mut self, recording_id: u32) -> Result<(), RecordingError> {
        let checkpoint = self.build_checkpoint(recording_id);
        self.flush_retired();
        self.offered_flush = vec![false; self.members.len()];
        self.set.write_checkpoint_on(&checkpoint, &self.live())?;
        self.checkpoint_made(Ok(checkpoint));
        Ok(())
    }

    /// Flushes the members retired since their last flush, here and now.
    pub(super) fn flush_retired(&mut self) {
        for index in 0..self.members.len() {
            if !(self.members[index].retired && self.members[index].unflushed) {
                continue;
            }
            let Some(member) = self.set.members[index].as_ref() else {
                continue;
            };
            match member.flush() {
                Ok(()) => self.members[index].unflushed = false,
                Err(error) => self.retired_flush_failed(error.to_string()),
            }
        }
    }

    /// A checkpoint of everything up to the durable frontier (writes whose completions
    /// have been seen), with each member's position at its oldest write not covered.
    pub(super) fn build_checkpoint(&mut self, recording_id: u32) -> Checkpoint {
        let durable_end = self.durable_sequence_end;
        let ring = matches!(self.options.fill, Fill::Ring { .. });
        let k = self.k as u64;
        let positions = self
            .members
            .iter_mut()
            .map(|member| {
                while member
                    .undurable
                    .front()
                    .is_some_and(|&(sequence, ..)| sequence < durable_end)
                {
                    member.undurable.pop_front();
                }
                let (position, guard) = match member.undurable.front() {
                    Some(&(_, slot, lap, tail)) => (
                        MemberPosition {
                            next_slot_index: slot,
                            lap,
                        },
                        tail,
                    ),
                    None => (
                        MemberPosition {
                            next_slot_index: member.next_slot,
                            lap: member.lap,
                        },
                        member.redirect_tail_slots,
                    ),
                };
                // Never so much that the member could take no write of its own (a checkpoint
                // made after one moves the position past the redirected slots).
                member.checkpoint_guard_slots = if ring {
                    guard.min(
                        member
                            .recovery_limit_slots
                            .saturating_sub(member.redirect_reserve_slots + k),
                    )
                } else {
                    0
                };
                // Slots from that position to the write point (ring positions count laps).
                let lap_slots = member.usable_slots.max(1);
                member.since_checkpoint_slots = (member.lap * lap_slots + member.next_slot)
                    .saturating_sub(position.lap * lap_slots + position.next_slot_index);
                position
            })
            .collect();
        self.checkpoint_generation += 1;
        self.checkpointed_sequence_end = durable_end;
        self.last_checkpoint = Instant::now();
        Checkpoint {
            set_uuid: self.set.set_uuid,
            generation: self.checkpoint_generation,
            written_ns: now_ns(),
            recording_id,
            recovery_window_slots: RECOVERY_WINDOW_SLOTS,
            recording_first_sequence: if recording_id == 0 {
                0
            } else {
                self.first_sequence
            },
            durable_sequence_end: durable_end,
            durable_stream_bytes: self.durable_stream_bytes,
            durable_lost_bytes: self.durable_lost_bytes,
            members: positions,
            retirements: self.retirements.clone(),
        }
    }
}
