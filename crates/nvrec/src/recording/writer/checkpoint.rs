//! Checkpoints: when one is due, what it claims (the durable frontier, each member's oldest
//! write not covered, the retirements), and what its outcome from the durability
//! coordinator changes.
//!
//! A member whose flush or metadata write fails is a failing member, as one whose write
//! fails: it is retired while another member remains (see `retire.rs`), and the recording
//! fails only where none does. Where its flush failed, what it completed since its last
//! good flush is written again elsewhere (see `rewrite.rs`). A member retired for another
//! cause is flushed until one flush succeeds, so that what it completed before it failed
//! is durable; where that flush fails too, it is noted (the report counts the chunks the
//! drive never confirmed) and not tried again, and the recording goes on: its chunks are
//! on the drive, and the entry counts them.

use super::retire;
use super::Writer;
use super::{MemberError, MemberErrorReport};
use crate::layout::Checkpoint;
use crate::recording::durability as coordinator;
use crate::recording::durability::Outcome;
use crate::recording::failure::MemberFault;
use crate::recording::failure::RecordingFailure;
use crate::recording::failure::Step;
use crate::recording::volume::Member;
use crate::recording::Fill;
use crate::recording::RecordingError;
use crate::recording::RECOVERY_WINDOW_SLOTS;
use std::sync::atomic::Ordering;
use std::sync::Arc;

impl Writer<'_> {
    pub(super) fn due_for_checkpoint(&self) -> bool {
        if self.rewrites_hold_checkpoints() {
            return false;
        }
        if self.entries_waiting() {
            return true; // A mark's entry is waited for: its recorder answers once durable.
        }
        if self.rewriting.waits_for_offer() {
            return true; // A retired member's flush is waited for.
        }
        let now = self.clock.now();
        (self.frontier).due(now, self.options.sync_interval, &self.placement.members)
    }

    /// Hands a checkpoint of what has completed to the durability coordinator, which
    /// flushes the members and writes it while the data path goes on.
    pub(super) fn offer_checkpoint(&mut self) -> Result<(), RecordingError> {
        let checkpoint = self.build_checkpoint(self.recording_id);
        let live = self.placement.live();
        let flush = self.placement.flush_set();
        (self.frontier).offered(&self.placement.members, &live, &flush);
        self.rewriting.offered(&flush);
        let entries = self.entries_to_offer();
        self.durability.offer(coordinator::Offer {
            checkpoint,
            live,
            flush,
            entries,
        })
    }

    /// The flush of a retired member failed: it is not flushed again, and the recording
    /// goes on. What it completed since its last good flush is on the drive (reads find
    /// it, and so does recovery) and the entry counts it; the report names the member and
    /// how many chunks the drive never confirmed durable. (Ending the recording here, or
    /// claiming no more than the last checkpoint, would leave everything the other members
    /// hold past it out of the entry: a silent loss.)
    pub(super) fn retired_flush_failed(&mut self, member: usize, error: RecordingError) {
        if self.placement.members[member].flushes.failed() || self.gated_flush_failed(member) {
            return;
        }
        self.note_member_error(member, MemberError::Failed(Arc::new(error)));
        self.placement.members[member].flushes.failed_now();
    }

    /// Records a failure of `member` that ends nothing, for the report.
    pub(super) fn note_member_error(&mut self, member: usize, error: MemberError) {
        let report = self.member_error_report(member, error);
        self.retiring.note_member_error(report);
    }

    /// A report of `member`'s failure that ends nothing, with the chunks it completed
    /// since its last good flush.
    pub(super) fn member_error_report(
        &self,
        member: usize,
        error: MemberError,
    ) -> MemberErrorReport {
        MemberErrorReport {
            member_index: member as u16,
            path: self.set.members[member]
                .as_ref()
                .map(|m| m.disk.path().to_path_buf())
                .unwrap_or_default(),
            error,
            unflushed_chunk_count: self.unflushed_chunk_count(member),
        }
    }

    /// A flush or metadata write of `member` failed: a live member fails (it is retired,
    /// or the recording fails), a retired one is flushed no more.
    pub(super) fn member_io_failed(&mut self, member: usize, error: RecordingError) {
        if self.placement.members[member].retired {
            self.retired_flush_failed(member, error);
        } else if is_flush_failure(&error) {
            let (_, errno) = retire::cause_of_io(&error);
            let cause = (crate::layout::RetirementCause::FlushFailed, errno);
            self.member_flush_failed(member, cause, MemberFault::Other(Arc::new(error)));
        } else {
            let cause = retire::cause_of_io(&error);
            self.member_failed(member, cause, MemberFault::Other(Arc::new(error)));
        }
    }

    /// The error of a metadata write no member took: the recording's failure (the first
    /// member that failed could not be retired), else that no member was left for it.
    pub(super) fn failure_or(&self, what: &str) -> RecordingError {
        match &self.error {
            Some(failure) => failure.clone().into(),
            None => RecordingError::Io {
                what: what.into(),
                source: std::io::Error::other("no member is left to take it"),
            },
        }
    }

    /// Runs `work` (a metadata write, a flush) on every live member at once, here and now;
    /// each member that fails is a failing member ([`Writer::member_io_failed`]). Returns how
    /// many members took it, and the first member that failed.
    pub(super) fn on_live_members(
        &mut self,
        work: impl Fn(&Member) -> Result<(), RecordingError> + Sync,
    ) -> (usize, Option<usize>) {
        let (taken, failed) = coordinator::on_every_member(self.set, &self.placement.live(), work);
        let mut first = None;
        for (member, error) in failed {
            self.member_io_failed(member, error);
            first.get_or_insert(member);
        }
        (taken, first)
    }

    /// Flushes every live member here and now.
    pub(super) fn flush_live(&mut self) {
        let live = self.placement.live();
        let (_, failed) = coordinator::on_every_member(self.set, &live, Member::flush);
        for (index, member) in self.placement.members.iter_mut().enumerate() {
            if live[index] && !failed.iter().any(|&(failed, _)| failed == index) {
                member.flushes.flushed();
            }
        }
        for (member, error) in failed {
            self.member_io_failed(member, error);
        }
    }

    /// Takes the outcome of a checkpoint the coordinator finished: recovery now starts
    /// from its positions.
    pub(super) fn poll_durability(&mut self) {
        if let Some(outcome) = self.durability.poll() {
            self.checkpoint_made(outcome);
        }
    }

    pub(super) fn checkpoint_made(&mut self, outcome: Outcome) {
        // A checkpoint offered since a retirement held new writes back has flushed the
        // retired member: its outcome says whether what that member completed is durable.
        let gate = self.rewriting.offered_gate();
        if let Some(checkpoint) = outcome.made {
            self.frontier.made(&mut self.placement.members);
            if checkpoint.recording_id == self.recording_id {
                if let Some(counters) = self.counters {
                    counters.checkpoint_durable(self.clock.wall_ns());
                }
                self.progress
                    .durable_bytes
                    .store(checkpoint.durable_stream_bytes, Ordering::Relaxed);
            }
        }
        // A member whose flush or metadata write failed is retired where it may be; the
        // next checkpoint goes to the others. One that was live when the checkpoint was
        // offered and has been retired since (its write failed meanwhile) stays retired as
        // it is: it is flushed again as a retired member.
        for (member, error) in outcome.failed {
            let was_live = self.frontier.was_live_at_offer(member);
            // Its flush failing matters to a retirement waiting for it; its metadata
            // write failing does not (the flush before it succeeded).
            let gated = self.rewriting.gates(member) && is_flush_failure(&error);
            if was_live && self.placement.members[member].retired && !gated {
                continue;
            }
            self.member_io_failed(member, error);
        }
        if gate.is_some() {
            self.rewriting.lift_gate();
        }
        self.entries_made(outcome.entries_made, outcome.entries_left);
        if let Some(error) = outcome.error {
            self.fail(RecordingFailure::step(Step::Checkpoint, error));
        }
    }

    /// Writes a checkpoint here and now (at the start of a recording, and at its end when a
    /// member must move on first): every member flushed (a live one that fails is retired,
    /// a retired one is noted), then the checkpoint written to the live members. Fails only
    /// where no member took it.
    pub(super) fn write_checkpoint(&mut self, recording_id: u32) -> Result<(), RecordingError> {
        self.flush_live();
        self.flush_retired();
        self.write_waiting_entries();
        let checkpoint = self.build_checkpoint(recording_id);
        let bytes = checkpoint.encode()?;
        let generation = checkpoint.generation;
        let (taken, _) = self.on_live_members(|member| {
            member.write_checkpoint(&bytes, generation)?;
            member.flush()
        });
        if taken == 0 {
            return Err(self.failure_or("writing a checkpoint"));
        }
        self.frontier.written_here(self.placement.members.len());
        self.checkpoint_made(Outcome::made(checkpoint));
        Ok(())
    }

    /// Flushes the members retired since their last flush, here and now.
    pub(super) fn flush_retired(&mut self) {
        for index in 0..self.placement.members.len() {
            if !(self.placement.members[index].retired
                && self.placement.members[index].flushes.owed())
            {
                continue;
            }
            let Some(member) = self.set.members[index].as_ref() else {
                continue;
            };
            match member.flush() {
                Ok(()) => self.placement.members[index].flushes.flushed(),
                Err(error) => self.retired_flush_failed(index, error),
            }
        }
    }

    /// A checkpoint of everything up to the durable frontier (writes whose completions
    /// have been seen), with each member's position at its oldest write not covered.
    pub(super) fn build_checkpoint(&mut self, recording_id: u32) -> Checkpoint {
        let ring = matches!(self.options.fill, Fill::Ring { .. });
        let now = self.clock.now();
        let members = &mut self.placement.members;
        let (generation, positions) = self.frontier.build(members, ring, self.k as u64, now);
        Checkpoint {
            set_uuid: self.set.set_uuid,
            generation,
            written_ns: self.clock.wall_ns(),
            recording_id,
            recovery_window_slots: RECOVERY_WINDOW_SLOTS,
            recording_first_sequence: if recording_id == 0 {
                0
            } else {
                self.first_sequence
            },
            durable_sequence_end: self.frontier.checkpointed_sequence_end(),
            durable_stream_bytes: self.frontier.durable_stream().0,
            durable_lost_bytes: self.frontier.durable_stream().1,
            members: positions,
            retirements: self.retiring.retirements().to_vec(),
        }
    }
}

/// Whether a member's failure was its flush ([`Member::flush`]'s error), which leaves what
/// it completed since its last good flush in doubt.
fn is_flush_failure(error: &RecordingError) -> bool {
    matches!(error, RecordingError::Flush { .. })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A member's flush that fails is told from its other failures by its type.
    #[test]
    fn a_flush_failure_is_known_by_its_kind_not_its_words() {
        let flush = RecordingError::Flush {
            path: "/dev/loop7".into(),
            source: std::io::Error::from_raw_os_error(libc::EIO),
        };
        assert!(is_flush_failure(&flush));
        assert_eq!(
            flush.to_string(),
            format!(
                "flushing /dev/loop7: {}",
                std::io::Error::from_raw_os_error(libc::EIO)
            )
        );
        // A write whose words begin the same is not one.
        let worded = RecordingError::Io {
            what: "flushing the checkpoint".into(),
            source: std::io::Error::from_raw_os_error(libc::EIO),
        };
        assert!(!is_flush_failure(&worded));
    }
}
