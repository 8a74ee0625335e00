//! Degraded recording: a member that fails is retired and the recording goes on.
//!
//! A member fails when a write comes back with an error (EIO, ENOSPC...), when a write
//! has not completed within the member timeout, or when its flush or metadata write
//! fails. With [`MemberFailure::Retire`] (the default) the member is retired, if another
//! member can take its work:
//!
//! 1. every write given to it and not completed is sent again, in sequence order, with its
//!    own sequence numbers, to consecutive slots of one other member (the redirect
//!    member), before any new write goes out; the chunks carry `REDIRECTED`;
//! 2. a write still in the kernel keeps its buffer until its completion comes (it is then
//!    freed, whatever it says), so its next attempt copies the buffer first: the CPU only
//!    reads a slot the kernel is also only reading;
//! 3. the retirement (member, cause, time, stream offset, where the redirected chunks
//!    went) is written into every later checkpoint and into the recording's entry, and
//!    the member takes no more data or metadata.
//!
//! The durable frontier never passes a retired write until its new attempt completed, so
//! nothing acknowledged depends on the failed member. With [`MemberFailure::Stop`], or
//! when no member can take the work, the recording fails as it always did, and its entry
//! claims every chunk up to the first write that did not complete (see `checkpoint.rs` for
//! flushes and metadata writes that fail, which fail their member the same way).
//!
//! A retirement names one run of consecutive slots on one member for the writes it sent
//! again. Where such a write fails there too, the run is cut before it: the recording ends
//! before it (the last member), or it goes on with the writes it retires (another one),
//! unless a later write of the run completed, which a run cannot tell; the recording then
//! fails rather than leave a hole where a reader expects a chunk.

use super::{
    volume, Done, Fill, Flight, MemberError, MemberErrorReport, MemberFault, RecordingError,
    RecordingFailure, Step, Writer,
};
use crate::engine::{IoError, IoErrorKind};
use crate::layout::{Retirement, RetirementCause, RETIREMENTS_MAX};
use crate::recording::MemberFailure;
use std::collections::VecDeque;

/// Flight numbers live in the low 56 bits of a completion's tag, the attempt in the top 8.
const ATTEMPT_SHIFT: u32 = 56;

/// The tag of attempt `attempt` of flight `number`.
pub(super) fn tag(number: u64, attempt: u8) -> u64 {
    number | (attempt as u64) << ATTEMPT_SHIFT
}

/// The flight number and attempt of a tag.
pub(super) fn untag(user_data: u64) -> (u64, u8) {
    (
        user_data & ((1 << ATTEMPT_SHIFT) - 1),
        (user_data >> ATTEMPT_SHIFT) as u8,
    )
}

/// The retirement stage's state: the members retired, where their writes go again, what a
/// failing flush left to write again, and earlier attempts still in the kernel.
#[derive(Default)]
pub(super) struct Retiring {
    /// Members retired so far, and the writes of the newest one still to be sent again
    /// (flight numbers, in sequence order) to `redirect_to`.
    retirements: Vec<Retirement>,
    redirects: VecDeque<u64>,
    redirect_to: Option<usize>,
    /// Earlier attempts still in the kernel: their buffers come back when they complete.
    stale: Vec<Stale>,
    /// Members with a failed write not yet handled, in the order they failed: one is
    /// retired at a time, once the writes of the one before have gone out again (several
    /// may fail in one batch of completions).
    failing: Vec<usize>,
    /// Members whose flush or metadata write failed while an earlier retirement's writes
    /// were still to go out again: retired in turn, as `failing` are, rather than failing
    /// the recording (two members dying within milliseconds of each other).
    failing_io: Vec<FailingIo>,
    /// Retirements (by index) whose run of redirected slots was cut short: a write sent
    /// there failed, so nothing more may join the run (its slots would not follow on).
    cut_runs: Vec<usize>,
    /// Failures that ended nothing, for the report.
    member_errors: Vec<MemberErrorReport>,
}

/// A member's failed flush or metadata write waiting to be handled (see
/// [`Retiring::failing_io`]): its cause, what failed, and whether what it completed since
/// its last good flush is in doubt.
#[derive(Debug, Clone)]
pub(super) struct FailingIo {
    member: usize,
    cause: (RetirementCause, i32),
    fault: MemberFault,
    in_doubt: bool,
}

impl Retiring {
    /// Whether a retired member's unfinished writes are still to go out again.
    pub(super) fn redirecting(&self) -> bool {
        !self.redirects.is_empty()
    }

    /// Whether failed members wait to be retired.
    pub(super) fn failures_waiting(&self) -> bool {
        !self.failing.is_empty() || !self.failing_io.is_empty()
    }

    /// Whether `member` failed and waits to be retired.
    pub(super) fn waits_to_retire(&self, member: usize) -> bool {
        self.failing.contains(&member) || self.failing_io.iter().any(|f| f.member == member)
    }

    /// The next failed flush or metadata write that may be handled now (as
    /// [`Retiring::next_failing`]).
    fn next_failing_io(&mut self, resending: bool) -> Option<FailingIo> {
        if self.failing_io.is_empty() || resending {
            return None;
        }
        Some(self.failing_io.remove(0))
    }

    /// Counts a write of `chunk_count` slots from `first_slot`, sent again to the redirect
    /// member, in the newest retirement's run.
    pub(super) fn count_in_run(&mut self, first_slot: u64, chunk_count: u32) {
        let retirement = self.retirements.last_mut().expect("a retirement redirects");
        if retirement.redirect_slot_count == 0 {
            retirement.redirect_first_slot = first_slot;
        }
        retirement.redirect_slot_count += chunk_count;
    }

    /// Whether the newest retirement's run was cut: its redirects and rewrites cannot go on
    /// in it.
    pub(super) fn newest_run_cut(&self) -> bool {
        self.retirements
            .len()
            .checked_sub(1)
            .is_some_and(|newest| self.cut_runs.contains(&newest))
    }

    /// Retirement `index`'s run ends at `slot_count` slots.
    pub(super) fn cut_run(&mut self, index: usize, slot_count: u32) {
        self.retirements[index].redirect_slot_count = slot_count;
        if !self.cut_runs.contains(&index) {
            self.cut_runs.push(index);
        }
    }

    /// The members retired so far, in the order they were.
    pub(super) fn retirements(&self) -> &[Retirement] {
        &self.retirements
    }

    /// The member the newest retirement's writes go to.
    pub(super) fn redirect_to(&self) -> Option<usize> {
        self.redirect_to
    }

    /// The flights of the newest retired member still to go out again, in sequence order.
    pub(super) fn redirect_numbers(&self) -> impl Iterator<Item = u64> + '_ {
        self.redirects.iter().copied()
    }

    /// The member of the newest retirement, and the slots its run took so far.
    pub(super) fn newest(&self) -> Option<(usize, u64)> {
        self.retirements
            .last()
            .map(|r| (r.member_index as usize, r.redirect_slot_count as u64))
    }

    /// The newest retirement starts earlier: at `earliest` (a write its member left in
    /// doubt, to be written again) where that comes before it in the stream, and its void
    /// at `void` where that lies before `void_position`.
    pub(super) fn start_earlier(
        &mut self,
        earliest: Option<Done>,
        void: Option<Done>,
        void_position: u64,
    ) {
        let retirement = self.retirements.last_mut().expect("a retirement");
        if let Some(earliest) = earliest.filter(|e| e.first_sequence < retirement.first_sequence) {
            retirement.first_sequence = earliest.first_sequence;
            retirement.stream_offset_bytes = earliest.stream_offset_bytes;
        }
        if let Some(void) = void.filter(|v| v.position < void_position) {
            retirement.retired_first_slot = void.slot;
        }
    }

    /// Failures that ended nothing, for the report.
    pub(super) fn member_errors(&self) -> &[MemberErrorReport] {
        &self.member_errors
    }

    /// Notes a failure that ended nothing. Chunks no drive confirmed durable are counted in
    /// one note per member and reason.
    pub(super) fn note_member_error(&mut self, report: MemberErrorReport) {
        if let MemberError::Unconfirmed(why) = report.error {
            let noted = self.member_errors.iter_mut().find(|e| {
                e.member_index == report.member_index
                    && matches!(e.error, MemberError::Unconfirmed(noted) if noted == why)
            });
            if let Some(noted) = noted {
                noted.unflushed_chunk_count += report.unflushed_chunk_count;
                return;
            }
        }
        self.member_errors.push(report);
    }

    /// A write of `member` failed: it is to be handled (once, however many failed).
    pub(super) fn failing(&mut self, member: usize) {
        if !self.failing.contains(&member) {
            self.failing.push(member);
        }
    }

    /// The next member whose failure may be handled now: none while a retirement's
    /// writes are still to go out again (`resending`).
    pub(super) fn next_failing(&mut self, resending: bool) -> Option<usize> {
        if self.failing.is_empty() || resending {
            return None;
        }
        Some(self.failing.remove(0))
    }

    /// An earlier attempt of a write, tagged `user_data`, is still in the kernel with
    /// `parts_left` I/Os of `buffer`: its completions are told apart by the tag.
    pub(super) fn keep_stale(&mut self, user_data: u64, buffer: u32, parts_left: u8) {
        self.stale.push(Stale {
            user_data,
            buffer,
            parts_left,
        });
    }

    /// Takes a completion tagged `user_data` if it is one of an earlier attempt.
    pub(super) fn stale_part_done(&mut self, user_data: u64) -> StalePart {
        let Some(at) = self.stale.iter().position(|s| s.user_data == user_data) else {
            return StalePart::NotStale;
        };
        self.stale[at].parts_left -= 1;
        match self.stale[at].parts_left {
            0 => StalePart::Done(self.stale.swap_remove(at)),
            _ => StalePart::MoreToCome,
        }
    }
}

/// What a completion is to [`Retiring::stale_part_done`].
#[derive(Debug)]
pub(super) enum StalePart {
    /// A completion of a write's current attempt.
    NotStale,
    /// Of an earlier attempt with I/Os still in the kernel.
    MoreToCome,
    /// The last I/O of an earlier attempt: its buffer is the kernel's no more.
    Done(Stale),
}

/// An earlier attempt still in the kernel: its buffer is freed when its parts complete.
#[derive(Debug, Clone, Copy)]
pub(super) struct Stale {
    user_data: u64,
    buffer: u32,
    parts_left: u8,
}

/// The retirement cause and OS error of a failed flush or metadata write.
/// Why a member whose write came back with `error` is retired.
pub(super) fn cause_of_write(error: &IoError) -> RetirementCause {
    match error.kind {
        IoErrorKind::TargetFull => RetirementCause::TargetFull,
        _ => RetirementCause::WriteFailed,
    }
}

pub(super) fn cause_of_io(error: &RecordingError) -> (RetirementCause, i32) {
    let errno = match error {
        RecordingError::Io { source, .. } | RecordingError::Flush { source, .. } => {
            source.raw_os_error().unwrap_or(0)
        }
        _ => 0,
    };
    let cause = if errno == libc::ENOSPC {
        RetirementCause::TargetFull
    } else {
        RetirementCause::WriteFailed
    };
    (cause, errno)
}

/// Where a retirement starts: the first chunk that goes elsewhere, where it stood in the
/// stream, and the first slot of the member's void (the write it starts at, where one does).
#[derive(Debug, Clone, Copy)]
struct RetiredAt {
    first_sequence: u64,
    stream_offset_bytes: u64,
    retired_first_slot: u64,
    void: Option<Done>,
}

impl Writer<'_> {
    /// Takes a completion of an earlier attempt, if it is one. Returns whether it was.
    pub(super) fn stale_completed(&mut self, user_data: u64) -> bool {
        let stale = match self.retiring.stale_part_done(user_data) {
            StalePart::NotStale => return false,
            StalePart::MoreToCome => return true,
            StalePart::Done(stale) => stale,
        };
        // If the write has not gone out again yet, its next attempt takes the buffer back
        // as it is (its contents are intact); otherwise the buffer is free.
        let (number, _) = untag(user_data);
        let waiting = self
            .frontier
            .flights_mut()
            .get_mut(number)
            .filter(|flight| flight.needs_copy && flight.buffer == stale.buffer);
        match waiting {
            Some(flight) => flight.needs_copy = false,
            None => {
                self.ingest.free_buffer(stale.buffer);
            }
        }
        true
    }

    /// Handles the failed writes not handled yet, a member at a time, as far as the
    /// retirements before let (see [`Retiring::next_failing`]). Returns whether it did.
    pub(super) fn handle_failures(&mut self) -> bool {
        let mut handled = false;
        while let Some(member) = self.retiring.next_failing(self.resending()) {
            self.write_failed(member);
            handled = true;
        }
        while let Some(failed) = self.retiring.next_failing_io(self.resending()) {
            self.member_failed_with(failed.member, failed.cause, failed.fault, failed.in_doubt);
            handled = true;
        }
        handled
    }

    /// A write of `member` came back failed (its flight holds the error).
    pub(super) fn write_failed(&mut self, member: usize) {
        let Some((_, flight, _)) = self.frontier.flights().iter().find(|&(_, f, done)| {
            f.member as usize == member && f.failed && f.parts_left == 0 && !done
        }) else {
            return;
        };
        let Some(error) = flight.error else { return };
        let cause = (cause_of_write(&error), error.errno);
        self.member_failed(member, cause, MemberFault::Write(error));
    }

    /// Writes in flight on live members whose oldest write has waited longer than the
    /// member timeout fail their member. The loop may have been away meanwhile (a quiet
    /// pipe's read waits up to a sync interval), so what completed in that time is taken
    /// first: only a write its member still holds is overdue, never one that waited for
    /// the writer to look.
    pub(super) fn check_timeouts(&mut self) {
        if !(0..self.placement.members.len()).any(|member| self.overdue(member)) {
            return;
        }
        if let Err(error) = self.reap(false) {
            self.fail(RecordingFailure::step(Step::Io, error));
            return;
        }
        let timeout = self.options.member_timeout;
        for member in 0..self.placement.members.len() {
            // Checked again as each is failed: a retirement moves writes elsewhere.
            if self.overdue(member) {
                let fault = MemberFault::Timeout(timeout);
                self.member_failed(member, (RetirementCause::Timeout, 0), fault);
            }
        }
    }

    /// Whether `member` is live and its oldest write in flight has waited longer than the
    /// member timeout.
    fn overdue(&self, member: usize) -> bool {
        let state = &self.placement.members[member];
        let oldest = state.queue.oldest().filter(|_| !state.retired);
        oldest
            .and_then(|(number, _)| self.frontier.flights().get(number))
            .is_some_and(|flight| self.clock.since(flight.submitted) >= self.options.member_timeout)
    }

    /// Retires `member` where the policy and the other members allow; otherwise the
    /// recording fails with `fault`.
    pub(super) fn member_failed(
        &mut self,
        member: usize,
        cause: (RetirementCause, i32),
        fault: MemberFault,
    ) {
        self.member_failed_with(member, cause, fault, false);
    }

    /// As [`Writer::member_failed`], for a member whose flush failed: what it completed
    /// since its last good flush is written again elsewhere with its unfinished writes
    /// (see `rewrite.rs`).
    pub(super) fn member_flush_failed(
        &mut self,
        member: usize,
        cause: (RetirementCause, i32),
        fault: MemberFault,
    ) {
        self.member_failed_with(member, cause, fault, true);
    }

    fn member_failed_with(
        &mut self,
        member: usize,
        (cause, errno): (RetirementCause, i32),
        fault: MemberFault,
        in_doubt: bool,
    ) {
        // A retired member's writes all went elsewhere, but one that failed after it was
        // retired (its completion came later than the failure that retired it) still has
        // to: it gets a retirement record of its own.
        let failed_after = self.frontier.flights().iter().any(|(_, f, done)| {
            f.member as usize == member && f.failed && f.parts_left == 0 && !done
        });
        if self.placement.members[member].retired && !failed_after {
            return;
        }
        let may_retire = self.options.on_member_failure == MemberFailure::Retire
            && self.retiring.retirements.len() < RETIREMENTS_MAX;
        // An earlier retirement's writes still going out again to another live member: this
        // one is retired once they are (see `handle_failures`), and takes nothing meanwhile.
        // (Where they go to this very member, nothing could take them: the recording ends.)
        let others_take_them = self
            .retiring
            .redirect_to
            .is_some_and(|to| to != member && !self.placement.members[to].retired);
        if may_retire && self.resending() && others_take_them && !failed_after {
            if !self.retiring.waits_to_retire(member) {
                self.retiring.failing_io.push(FailingIo {
                    member,
                    cause: (cause, errno),
                    fault,
                    in_doubt,
                });
            }
            return;
        }
        let target = match may_retire && !self.resending() {
            true => self.redirect_target(member),
            false => None,
        };
        // Writes of an earlier retirement sent here and not completed go elsewhere again:
        // that retirement's run of redirected slots here must end before them.
        let target = target.filter(|_| self.cut_runs_before_unfinished(member));
        match target {
            Some(target) => self.retire(member, target, (cause, errno), in_doubt),
            None => {
                self.fail(RecordingFailure::Member {
                    member: member as u16,
                    path: volume::describe_member(self.set, member),
                    cause,
                    fault,
                });
                self.give_up(member);
            }
        }
    }

    /// Failed writes of `member` that will not be sent again: the frontier stops at them.
    fn give_up(&mut self, member: usize) {
        let given_up: Vec<(u64, Flight)> = self
            .frontier
            .flights()
            .iter()
            .filter(|&(_, f, done)| {
                f.member as usize == member && f.failed && f.parts_left == 0 && !done
            })
            .map(|(number, f, _)| (number, *f))
            .collect();
        for (number, flight) in given_up {
            // A write that failed may have landed in part (a device that splits it fails
            // one piece): the chunks it holds from the first on, whole, are the
            // recording's, as recovery would find them.
            let landed = self.landed_of(&flight);
            if landed == flight.chunk_count {
                // All of it, after all: a completed write.
                let done = Done {
                    first_sequence: flight.first_sequence,
                    chunk_count: flight.chunk_count,
                    slot: flight.slot,
                    position: flight.position,
                    lie: flight.lie,
                    stream_offset_bytes: self.ingest.meta(flight.buffer, 0).stream_offset_bytes,
                };
                self.placement.members[member].flushes.completed(done);
                if let Some(f) = self.frontier.flights_mut().get_mut(number) {
                    f.failed = false;
                    f.error = None;
                }
            } else if landed > 0 {
                let last = self.ingest.meta(flight.buffer, landed - 1);
                let gaps_after: u64 = (landed..flight.chunk_count)
                    .map(|index| self.ingest.meta(flight.buffer, index).gap_bytes)
                    .sum();
                if let Some(f) = self.frontier.flights_mut().get_mut(number) {
                    f.landed = landed;
                    f.stream_end_bytes = last.stream_offset_bytes + last.payload_len_bytes as u64;
                    f.lost_bytes_through = flight.lost_bytes_through.saturating_sub(gaps_after);
                }
            }
            self.ingest.free_buffer(flight.buffer);
            self.frontier.flights_mut().complete(number);
            if flight.attempt > 0 && landed < flight.chunk_count {
                let slots = flight.lie.slots();
                self.cut_run_at(member, slots[landed as usize]);
            }
        }
    }

    /// How many chunks of `flight`'s write, from the first, its member holds whole: each
    /// decodes and is the chunk of this recording, member, slot and sequence it wrote.
    fn landed_of(&self, flight: &Flight) -> u32 {
        let Some(member) = self.set.members[flight.member as usize].as_ref() else {
            return 0;
        };
        let layout = member.layout();
        let slots = flight.lie.slots();
        for (index, &slot) in slots.iter().enumerate() {
            let whole = layout
                .data_slot_offset_bytes(slot)
                .and_then(|offset| {
                    volume::read_aligned(&member.disk, offset, self.chunk_bytes()).ok()
                })
                .is_some_and(|bytes| {
                    crate::layout::decode_chunk(&bytes).is_ok_and(|view| {
                        let header = view.header;
                        header.set_uuid == self.set.set_uuid
                            && header.recording_id == self.recording_id
                            && header.member_index == flight.member
                            && header.slot_index == slot
                            && header.sequence == flight.first_sequence + index as u64
                    })
                });
            if !whole {
                return index as u32;
            }
        }
        flight.chunk_count
    }

    /// Where `slot` lies in `retirement`'s run of redirected slots (0 for its first), if it
    /// does.
    fn run_position(retirement: &Retirement, slot: u64) -> Option<u64> {
        let lap = retirement.redirect_lap_slots.max(1);
        let position = (slot % lap + lap - retirement.redirect_first_slot % lap) % lap;
        (position < u64::from(retirement.redirect_slot_count)).then_some(position)
    }

    /// Before `member` is retired: each earlier retirement whose redirected writes went to
    /// it, and of which some have not completed (they go elsewhere with `member`'s own),
    /// gets its run cut before the first of them. Returns false, cutting nothing, where a
    /// write of such a run after that one has completed: the run would then have a hole,
    /// which a retirement record cannot tell, and `member` is not retired.
    fn cut_runs_before_unfinished(&mut self, member: usize) -> bool {
        let mut cuts = Vec::new();
        for (index, retirement) in self.retiring.retirements.iter().enumerate() {
            if retirement.redirect_member as usize != member {
                continue;
            }
            let in_run = |flight: &Flight| {
                (flight.member as usize == member && flight.attempt > 0)
                    .then(|| Self::run_position(retirement, flight.slot))
                    .flatten()
            };
            let unfinished = self
                .frontier
                .flights()
                .iter()
                .filter(|&(_, _, done)| !done)
                .filter_map(|(_, flight, _)| in_run(flight))
                .min();
            let Some(cut) = unfinished else { continue };
            let completed_after = self
                .frontier
                .flights()
                .iter()
                .filter(|&(_, _, done)| done)
                .any(|(_, flight, _)| in_run(flight).is_some_and(|at| at > cut));
            if completed_after {
                return false;
            }
            cuts.push((index, cut));
        }
        for (index, cut) in cuts {
            self.retiring.cut_run(index, cut as u32);
        }
        true
    }

    /// Ends the run of redirected slots on `member` that holds `slot` just before it: a
    /// retired member's write sent again there failed for good, and the recording ends
    /// before it (the frontier stops at it). The slots after it hold nothing the recording
    /// claims, and a reader that took them for redirected chunks would find them blank.
    pub(super) fn cut_run_at(&mut self, member: usize, slot: u64) {
        for index in (0..self.retiring.retirements.len()).rev() {
            let retirement = &self.retiring.retirements[index];
            if retirement.redirect_member as usize != member {
                continue;
            }
            if let Some(before) = Self::run_position(retirement, slot) {
                self.retiring.cut_run(index, before as u32);
                return;
            }
        }
    }

    /// The live member, other than `member`, with room for `member`'s outstanding chunks:
    /// the one least far along.
    fn redirect_target(&self, member: usize) -> Option<usize> {
        let outstanding: u64 = self
            .frontier
            .flights()
            .iter()
            .filter(|&(_, f, done)| f.member as usize == member && !done)
            .map(|(_, f, _)| f.chunk_count as u64)
            .sum();
        let ring = matches!(self.options.fill, Fill::Ring { .. });
        (0..self.placement.members.len())
            .filter(|&index| index != member && !self.placement.members[index].retired)
            // Not one whose write has failed too and waits to be handled.
            .filter(|&index| !self.retiring.waits_to_retire(index))
            .filter(|&index| {
                let m = &self.placement.members[index];
                ring || m.point.slot() + outstanding <= m.point.linear_end_slot()
            })
            .min_by_key(|&index| {
                let m = &self.placement.members[index];
                m.point.position() * 1024 / m.point.lap_slots().max(1)
            })
    }

    /// Retires `member`: its outstanding writes go to `target` next, in order; and where
    /// its flush failed (`in_doubt`), first the writes it completed since its last good
    /// flush, read back from it.
    fn retire(
        &mut self,
        member: usize,
        target: usize,
        (cause, errno): (RetirementCause, i32),
        in_doubt: bool,
    ) {
        let again = self.placement.members[member].retired;
        let flush_failed = in_doubt;
        let in_doubt: Vec<Done> = match in_doubt && !again {
            true => self.placement.members[member]
                .flushes
                .take_in_doubt()
                .into(),
            false => Vec::new(),
        };
        let first = self.redirect_flights(member, again);
        if let Some(counters) = self.counters {
            counters.members[member].retire();
        }
        // The retirement starts at the first chunk that goes elsewhere (in sequence), and
        // its void at the first of their slots (in the member's order of writes).
        let mut starts: Vec<Done> = in_doubt.clone();
        if let Some(flight) = first {
            starts.push(self.done_of(&flight));
        }
        let start = self.mark_retired(member, flush_failed, &starts);
        self.queue_rewrites(member, target, in_doubt);
        // A member whose write failed is flushed by the next checkpoint, offered at once:
        // until then its run stays open (see `rewrite.rs`). One that timed out would stall
        // that flush as it stalled its writes.
        if !flush_failed && !again && cause != RetirementCause::Timeout {
            let void_position = start.void.map_or(u64::MAX, |void| void.position);
            let until = (self.clock.now(), self.options.member_timeout);
            self.rewriting.hold(member, void_position, until);
        }
        let lap_slots = match self.options.fill {
            Fill::Ring { .. } => self.placement.members[target].point.lap_slots(),
            Fill::Linear => self.placement.members[target].point.data_slots(),
        };
        self.retiring.redirect_to = Some(target);
        self.retiring.retirements.push(Retirement {
            member_index: member as u16,
            cause,
            errno,
            retired_ns: self.clock.wall_ns(),
            stream_offset_bytes: start.stream_offset_bytes,
            first_sequence: start.first_sequence,
            redirect_member: target as u16,
            redirect_slot_count: 0,
            redirect_first_slot: 0,
            redirect_lap_slots: lap_slots,
            retired_first_slot: start.retired_first_slot,
        });
    }

    /// Queues `member`'s writes in flight (on a member retired `again`, the failed ones) to
    /// be sent elsewhere, keeping each part still out as stale. Returns the first.
    fn redirect_flights(&mut self, member: usize, again: bool) -> Option<Flight> {
        let mut first: Option<Flight> = None;
        for (number, flight, done) in self.frontier.flights_mut().iter_mut() {
            if flight.member as usize != member || done || again && !flight.failed {
                continue;
            }
            if flight.parts_left > 0 {
                let user_data = tag(number, flight.attempt);
                (self.retiring).keep_stale(user_data, flight.buffer, flight.parts_left);
                flight.needs_copy = true;
            }
            first.get_or_insert(*flight);
            // Not written there after all: the chunks count where they land.
            self.placement.members[member]
                .queue
                .uncount(flight.chunk_count as u64);
            flight.attempt = flight.attempt.wrapping_add(1).max(1);
            flight.failed = false;
            flight.error = None;
            flight.parts_left = 0;
            self.retiring.redirects.push_back(number);
        }
        first
    }

    /// Marks `member` retired, and finds where its retirement starts: the earliest of
    /// `starts` in sequence, and its void at the first of them in slots (with none, the
    /// stream's next chunk and the member's write point).
    fn mark_retired(&mut self, member: usize, flush_failed: bool, starts: &[Done]) -> RetiredAt {
        let retired = &mut self.placement.members[member];
        retired.retired = true;
        // What it completed is flushed by the next checkpoint, or, where its flush failed,
        // written again elsewhere.
        retired.flushes.retired(flush_failed);
        retired.queue.forget_pending();
        // Its span keeps its write point: writes after the first unfinished one may have
        // completed there (completions come in any order), and they are not sent again.
        let earliest = starts
            .iter()
            .min_by_key(|done| done.first_sequence)
            .copied();
        let void = starts.iter().min_by_key(|done| done.position).copied();
        match (earliest, void) {
            (Some(earliest), Some(void)) => {
                retired.reach.forget_from(earliest.first_sequence);
                RetiredAt {
                    first_sequence: earliest.first_sequence,
                    stream_offset_bytes: earliest.stream_offset_bytes,
                    retired_first_slot: void.slot,
                    void: Some(void),
                }
            }
            _ => RetiredAt {
                first_sequence: self.placement.next_sequence,
                stream_offset_bytes: self.ingest.stream_at().0,
                retired_first_slot: retired.point.slot(),
                void,
            },
        }
    }

    /// Queues the `in_doubt` writes of `member` that `target` has room for, after the
    /// redirected ones, to be read back and written again there.
    fn queue_rewrites(&mut self, member: usize, target: usize, in_doubt: Vec<Done>) {
        let outstanding: u64 = self
            .retiring
            .redirects
            .iter()
            .filter_map(|&number| self.frontier.flights().get(number))
            .map(|flight| flight.chunk_count as u64)
            .sum();
        let rewrites = self.within_room(member, target, in_doubt, outstanding);
        self.rewriting.queue(member, rewrites);
    }

    /// Whether `flight`, to go to `target`, never can: the target has nothing in flight and
    /// has gone as far past the last durable checkpoint as it may, and that checkpoint
    /// already claims everything before `flight` (the frontier waits for it), so no later
    /// checkpoint makes room.
    fn redirect_cannot_go(&self, target: usize, flight: &Flight) -> bool {
        self.placement.members[target].queue.idle()
            && !self.durability.busy()
            && self.frontier.durable_sequence_end() == flight.first_sequence
            && self.frontier.checkpointed_sequence_end() == self.frontier.durable_sequence_end()
            && self.placement.members[target].reach.built_is_durable()
    }

    /// Sends the retired member's writes to the redirect member, as far as its queue and
    /// the free buffers allow. Returns whether anything went out.
    pub(super) fn submit_redirects(&mut self) -> bool {
        // A member that failed while another's writes were going out again is retired
        // once they have.
        let mut progressed = self.handle_failures();
        let ring = matches!(self.options.fill, Fill::Ring { .. });
        while let (Some(&number), Some(target)) =
            (self.retiring.redirects.front(), self.retiring.redirect_to)
        {
            if self.retiring.newest_run_cut() {
                // A write sent again failed there too: what is left cannot join the run,
                // and the recording ends before it.
                self.fail(RecordingFailure::RedirectsUnplaced);
                self.retiring.redirects.clear();
                break;
            }
            let flight = *self
                .frontier
                .flights()
                .get(number)
                .expect("a redirect is in flight");
            let room = self.engine.in_flight() + self.max_parts() <= self.engine_queue_depth;
            if !room
                || !self.placement.members[target]
                    .can_take_redirect(flight.chunk_count as u64, ring)
            {
                if self.redirect_cannot_go(target, &flight) {
                    self.fail(RecordingFailure::NoRoomForRedirects {
                        member: target as u16,
                        path: volume::describe_member(self.set, target),
                    });
                    self.retiring.redirects.clear();
                }
                break;
            }
            let buffer = if flight.needs_copy {
                let Some(buffer) = self.ingest.take_free() else {
                    break;
                };
                self.copy_buffer(flight.buffer, buffer);
                buffer
            } else {
                flight.buffer
            };
            let placed = match self.place(
                buffer,
                target,
                flight.chunk_count,
                flight.first_sequence,
                tag(number, flight.attempt),
            ) {
                Ok(placed) => placed,
                Err(error) => {
                    self.fail(RecordingFailure::step(Step::Submit(target as u16), error));
                    self.retiring.redirects.clear();
                    break;
                }
            };
            self.retiring.count_in_run(placed.slot, flight.chunk_count);
            *self
                .frontier
                .flights_mut()
                .get_mut(number)
                .expect("a redirect is in flight") = Flight {
                buffer,
                member: target as u16,
                parts_left: placed.lie.len() as u8,
                slot: placed.slot,
                position: placed.position,
                lie: placed.lie,
                submitted: self.clock.now(),
                needs_copy: false,
                ..flight
            };
            self.retiring.redirects.pop_front();
            progressed = true;
        }
        self.trims_failed();
        progressed
    }

    /// Copies a buffer whose write is still in the kernel into a free one, with its chunks'
    /// descriptions.
    fn copy_buffer(&mut self, from: u32, to: u32) {
        let pool = self.engine.pool_mut();
        let len = pool.slot_bytes();
        // SAFETY: `from` and `to` are distinct slots of the pool, each `len` bytes long.
        // `to` is free, so nothing else touches it; `from` is being written to the target,
        // so the kernel only reads it, as this copy does.
        unsafe {
            std::ptr::copy_nonoverlapping(
                pool.slot_ptr(from as usize),
                pool.slot_ptr(to as usize),
                len,
            )
        };
        self.ingest.copied(from, to);
    }
}

#[cfg(test)]
mod stage_tests {
    use super::*;
    use crate::recording::writer::Unconfirmed;

    #[test]
    fn a_retirement_starts_earlier_at_the_writes_its_member_left_in_doubt() {
        let mut retiring = Retiring::default();
        retiring
            .retirements
            .push(crate::layout::sample_retirement());
        assert_eq!(retiring.newest(), Some((1, 64)));
        let before = Done::four_at(16_000);
        let void = Done {
            slot: 4_000,
            position: 4_000,
            ..Done::four_at(18_000)
        };
        retiring.start_earlier(Some(before), Some(void), 4_100);
        let retirement = &retiring.retirements()[0];
        assert_eq!(retirement.first_sequence, 16_000);
        assert_eq!(retirement.stream_offset_bytes, 16_000 * 1000);
        assert_eq!(retirement.retired_first_slot, 4_000);
        // Nothing later moves it.
        retiring.start_earlier(Some(Done::four_at(17_500)), Some(void), 3_000);
        assert_eq!(retiring.retirements()[0].first_sequence, 16_000);
    }

    #[test]
    fn unconfirmed_chunks_are_counted_in_one_note_per_member_and_reason() {
        let mut retiring = Retiring::default();
        let note = |member: u16, error: MemberError, chunks: u64| MemberErrorReport {
            member_index: member,
            path: std::path::PathBuf::from("/dev/null"),
            error,
            unflushed_chunk_count: chunks,
        };
        let no_room = MemberError::Unconfirmed(Unconfirmed::NoRoom);
        let not_read = MemberError::Unconfirmed(Unconfirmed::NotReadBack);
        retiring.note_member_error(note(1, no_room.clone(), 4));
        retiring.note_member_error(note(1, no_room.clone(), 8));
        retiring.note_member_error(note(1, not_read, 1));
        retiring.note_member_error(note(0, no_room, 2));
        let counts: Vec<(u16, u64)> = retiring
            .member_errors()
            .iter()
            .map(|e| (e.member_index, e.unflushed_chunk_count))
            .collect();
        assert_eq!(counts, [(1, 12), (1, 1), (0, 2)]);
    }

    #[test]
    fn an_earlier_attempt_frees_its_buffer_only_with_its_last_part() {
        let mut retiring = Retiring::default();
        retiring.keep_stale(tag(7, 0), 3, 2);
        assert!(matches!(
            retiring.stale_part_done(tag(7, 1)),
            StalePart::NotStale
        ));
        assert!(matches!(
            retiring.stale_part_done(tag(7, 0)),
            StalePart::MoreToCome
        ));
        match retiring.stale_part_done(tag(7, 0)) {
            StalePart::Done(stale) => assert_eq!(stale.buffer, 3),
            other => panic!("{other:?}"),
        }
        assert!(retiring.stale.is_empty());
        assert!(matches!(
            retiring.stale_part_done(tag(7, 0)),
            StalePart::NotStale
        ));
    }

    #[test]
    fn a_retired_members_writes_to_send_again_hold_failures_waiting_to_be_handled() {
        let mut retiring = Retiring::default();
        retiring.failing(2);
        retiring.failing(2);
        retiring.redirects.push_back(4);
        assert!(retiring.redirecting());
        assert_eq!(retiring.next_failing(retiring.redirecting()), None);
        retiring.redirects.clear();
        assert!(!retiring.redirecting());
        assert_eq!(retiring.next_failing(true), None, "rewrites still to go");
        assert_eq!(retiring.next_failing(false), Some(2));
        assert_eq!(retiring.next_failing(false), None, "handled once");
    }

    #[test]
    fn nothing_joins_a_run_once_it_was_cut() {
        let retirement = |member_index| Retirement {
            member_index,
            cause: RetirementCause::WriteFailed,
            errno: libc::EIO,
            retired_ns: 0,
            stream_offset_bytes: 0,
            first_sequence: 0,
            redirect_member: 0,
            redirect_slot_count: 12,
            redirect_first_slot: 24,
            redirect_lap_slots: 100,
            retired_first_slot: 0,
        };
        let mut retiring = Retiring::default();
        assert!(!retiring.newest_run_cut(), "no retirement, no run");
        retiring.retirements.push(retirement(1));
        assert!(!retiring.newest_run_cut());
        retiring.cut_run(0, 7);
        assert_eq!(retiring.retirements[0].redirect_slot_count, 7);
        assert!(retiring.newest_run_cut());
        retiring.retirements.push(retirement(2));
        assert!(
            !retiring.newest_run_cut(),
            "a newer retirement has a run of its own"
        );
    }

    #[test]
    fn tags_carry_the_flight_number_and_the_attempt() {
        assert_eq!(untag(tag(12345, 3)), (12345, 3));
        assert_eq!(
            untag(tag((1 << ATTEMPT_SHIFT) - 1, 255)),
            ((1 << ATTEMPT_SHIFT) - 1, 255)
        );
    }
}

#[cfg(test)]
mod tests {
    //! Members that fail on simulated disks: their writes, their flushes, their metadata.
    use super::super::{record_on, RecordOptions, RecordOutcome, RecordReport};
    use crate::control::{Control, Progress};
    use crate::device::{Access, Safety};
    use crate::engine::{DiskFault, EngineChoice, FaultStart, IoOp, RangeFault, SimDisks};
    use crate::layout::{decode_chunk, RecordingEntry, RecordingState, VolumeLayout};
    use crate::pattern::Pattern;
    use crate::recording::disk::Members;
    use crate::recording::reader::{self, Item};
    use crate::recording::{volume, Fill, RecordingError};
    use crate::source::PatternSource;
    use std::collections::BTreeSet;
    use std::time::Duration;

    const MIB: u64 = 1 << 20;
    const CHUNK: u32 = 8192;
    const DISK_BYTES: u64 = 4 * MIB;
    const SEED: u64 = 0x5eed;

    fn options(limit_bytes: u64) -> RecordOptions {
        RecordOptions {
            chunk_size_bytes: CHUNK,
            io_chunk_count: 2,
            queue_depth: 4,
            buffer_bytes: 16 * 2 * CHUNK as u64,
            sync_interval: Duration::from_millis(1),
            engine: EngineChoice::Auto,
            limit_bytes: Some(limit_bytes),
            pattern: true,
            member_timeout: Duration::from_secs(5),
            ..RecordOptions::default()
        }
    }

    fn record(sim: &SimDisks, options: &RecordOptions) -> Result<RecordReport, RecordingError> {
        let mut source = PatternSource(Pattern::new(SEED));
        record_on(
            Members::Sim(sim),
            &mut source,
            options,
            &Control::new(),
            &Progress::default(),
        )
    }

    /// The recording as the tools see the disks now (no power cut): its entry, recovered
    /// where it is open, and the end of its stream read back, which must be one run of
    /// the pattern without a hole; and the sequences of its chunks on the disks.
    fn as_the_tools_see_it(sim: &SimDisks) -> (RecordingEntry, u64, BTreeSet<u64>) {
        read_images(sim.current_images())
    }

    /// As the tools see the disks: the recording holds the stream up to `limit`, every
    /// chunk of it, the last one where the entry ends.
    fn whole_to(sim: &SimDisks, limit: u64) {
        let (entry, end, sequences) = as_the_tools_see_it(sim);
        assert_eq!(entry.stream_len_bytes, limit);
        assert_eq!(end, limit);
        assert_eq!(
            sequences.last(),
            Some(&(entry.end_sequence - 1)),
            "every chunk"
        );
    }

    /// As [`as_the_tools_see_it`], after a power cut that drops every write not flushed.
    fn after_a_power_cut(sim: &SimDisks) -> (RecordingEntry, u64, BTreeSet<u64>) {
        read_images(sim.durable_images())
    }

    fn read_images(images: Vec<Vec<u8>>) -> (RecordingEntry, u64, BTreeSet<u64>) {
        let now = SimDisks::from_images(images, 4096, 1);
        let set = volume::open_members(Members::Sim(&now), Access::Read, Safety::Check).unwrap();
        let entries = reader::recordings(&set).unwrap();
        let entry = entries.last().expect("a recording").clone();
        let pattern = Pattern::new(SEED);
        let mut end = 0;
        let mut problems = Vec::new();
        reader::read_recording(
            &set,
            &entry,
            EngineChoice::Auto,
            &Control::new(),
            &Progress::default(),
            &mut |item| {
                match item {
                    Item::Chunk { header, payload } => {
                        if header.stream_offset_bytes != end
                            || pattern
                                .check(header.stream_offset_bytes, payload, CHUNK as u64)
                                .is_err()
                        {
                            problems.push(format!("chunk {} out of the run", header.sequence));
                        }
                        end = header.stream_offset_bytes + payload.len() as u64;
                    }
                    Item::Missing {
                        first_sequence,
                        count,
                    } => problems.push(format!("{count} missing from {first_sequence}")),
                    Item::Damage(damage) => problems.push(format!("{damage:?}")),
                }
                true
            },
        )
        .unwrap();
        assert!(problems.is_empty(), "{problems:?}\n{entry:?}");
        let mut sequences = BTreeSet::new();
        for member in set.present() {
            let layout = member.layout();
            for slot in 0..layout.data_slot_count {
                let offset = layout.data_slot_offset_bytes(slot).unwrap();
                let bytes = volume::read_aligned(&member.disk, offset, CHUNK as usize).unwrap();
                if let Ok(view) = decode_chunk(&bytes) {
                    if view.header.recording_id == entry.recording_id {
                        sequences.insert(view.header.sequence);
                    }
                }
            }
        }
        (entry, end, sequences)
    }

    /// Whether the entry claims every chunk on the disks: the last one, or up to a hole
    /// (a write that never landed) where chunks follow it.
    fn claims_all(entry: &RecordingEntry, sequences: &BTreeSet<u64>) -> bool {
        let claimed = entry.first_sequence..entry.end_sequence;
        match sequences.last() {
            None => true,
            Some(&last) if last < entry.end_sequence => true,
            Some(_) => !sequences.contains(&entry.end_sequence) && claimed.end > claimed.start,
        }
    }

    #[test]
    fn a_member_whose_flushes_fail_is_retired_and_the_recording_goes_on() {
        // From a write on: its next flush fails, at a checkpoint (one is made whenever the
        // last one is done) or at the close.
        let cases = [
            (Fill::Linear, FaultStart::AtWrite(16)),
            (Fill::Ring { trim: true }, FaultStart::AtWrite(16)),
            (Fill::Linear, FaultStart::AtWrite(30)),
            (Fill::Ring { trim: true }, FaultStart::AtWrite(30)),
        ];
        let mut rewritten = 0;
        for (fill, start) in cases {
            let sim = SimDisks::new(2, DISK_BYTES, 4096, 1);
            // Slow enough for a few checkpoints, at least.
            sim.slow(0, 100e6);
            sim.slow(1, 100e6);
            sim.fail_from(
                DiskFault::FailingFlush {
                    disk: 1,
                    errno: libc::EIO,
                },
                start,
            );
            // Whole on one member, should the other fail early.
            let limit = 3 * MIB / 2;
            let report = record(
                &sim,
                &RecordOptions {
                    fill,
                    sync_interval: Duration::ZERO,
                    ..options(limit)
                },
            )
            .unwrap();
            assert_eq!(report.outcome, RecordOutcome::Complete, "{report:?}");
            assert!(report.error.is_none(), "{report:?}");
            assert!(report.degraded);
            assert_eq!(report.retirements[0].member_index, 1, "{report:?}");
            assert_eq!(report.retirements[0].errno, libc::EIO);
            assert!(sim.failed_flushes(1) > 0);
            let (entry, end, sequences) = as_the_tools_see_it(&sim);
            assert_eq!(entry.state, RecordingState::Closed);
            assert_eq!(entry.retirements.len(), report.retirements.len());
            if fill == Fill::Linear {
                assert_eq!(entry.stream_len_bytes, limit);
            }
            assert_eq!(end, entry.stream_len_bytes, "{fill:?}");
            assert_eq!(
                sequences.last(),
                Some(&(entry.end_sequence - 1)),
                "every chunk"
            );
            // What it had completed since its last good flush went to the other member
            // too: the member holds nothing the recording needs that a power cut takes.
            assert!(report.member_errors.is_empty(), "{report:?}");
            rewritten += report.retirements[0].redirect_chunk_count;
            let (after, end, _) = after_a_power_cut(&sim);
            assert_eq!(after.stream_len_bytes, entry.stream_len_bytes, "{fill:?}");
            assert_eq!(
                end, entry.stream_len_bytes,
                "{fill:?}: whole after a power cut"
            );
        }
        assert!(rewritten > 0, "some chunks were written again");
    }

    #[test]
    fn a_dying_member_is_retired_and_its_failed_flush_ends_nothing() {
        for fill in [Fill::Linear, Fill::Ring { trim: true }] {
            let sim = SimDisks::new(2, DISK_BYTES, 4096, 2);
            sim.fail_from(DiskFault::Dying { disk: 1 }, FaultStart::AtWrite(16));
            // Whole on one member, should the other fail early.
            let limit = 3 * MIB / 2;
            let report = record(
                &sim,
                &RecordOptions {
                    fill,
                    ..options(limit)
                },
            )
            .unwrap();
            assert_eq!(report.outcome, RecordOutcome::Complete, "{report:?}");
            assert!(report.error.is_none(), "{report:?}");
            assert_eq!(report.retirements.len(), 1, "{report:?}");
            assert_eq!(report.retirements[0].member_index, 1);
            // Its writes failed, and the checkpoint offered at once found its flush failing
            // too (or its flush failed first): what it completed since its last good flush
            // went to the other member with its unfinished writes. It is flushed no more.
            assert!(report.member_errors.is_empty(), "{report:?}");
            let failed_flushes = sim.failed_flushes(1);
            assert!(
                (1..=2).contains(&failed_flushes),
                "{failed_flushes} failed flushes"
            );
            let (entry, end, sequences) = as_the_tools_see_it(&sim);
            assert_eq!(entry.state, RecordingState::Closed);
            if fill == Fill::Linear {
                assert_eq!(entry.stream_len_bytes, limit, "{entry:?}");
            }
            assert_eq!(end, entry.stream_len_bytes);
            assert_eq!(report.stream_bytes, entry.stream_len_bytes);
            assert_eq!(
                sequences.last(),
                Some(&(entry.end_sequence - 1)),
                "every chunk"
            );
            // A power cut takes what the dying member never made durable: the recording
            // has it elsewhere.
            let (after, end, _) = after_a_power_cut(&sim);
            assert_eq!(after.stream_len_bytes, entry.stream_len_bytes, "{fill:?}");
            assert_eq!(
                end, entry.stream_len_bytes,
                "{fill:?}: whole after a power cut"
            );
        }
    }

    #[test]
    fn a_member_whose_checkpoint_write_fails_is_retired() {
        let sim = SimDisks::new(2, DISK_BYTES, 4096, 3);
        let layout = VolumeLayout::compute(DISK_BYTES, CHUNK, 4096).unwrap();
        sim.fail_from(
            DiskFault::Range(RangeFault {
                disk: 0,
                op: IoOp::Write,
                offset_bytes: layout.index_offset_bytes,
                len_bytes: layout.data_offset_bytes - layout.index_offset_bytes,
                errno: libc::EIO,
            }),
            FaultStart::AtWrite(16),
        );
        let limit = 3 * MIB / 2;
        let report = record(&sim, &options(limit)).unwrap();
        assert_eq!(report.outcome, RecordOutcome::Complete, "{report:?}");
        assert_eq!(report.retirements.len(), 1, "{report:?}");
        assert_eq!(report.retirements[0].member_index, 0);
        whole_to(&sim, limit);
    }

    #[test]
    fn two_members_whose_writes_fail_together_are_both_retired_and_nothing_is_claimed_blank() {
        let sim = SimDisks::new(3, DISK_BYTES, 4096, 5);
        let layout = VolumeLayout::compute(DISK_BYTES, CHUNK, 4096).unwrap();
        // Member 0 fails every write, member 1 only its first (one I/O): both come back
        // failed in the first batch of completions, and member 1 has nothing later that
        // would fail it again.
        for (disk, slots) in [(0, layout.data_slot_count), (1, 2)] {
            sim.fail(RangeFault {
                disk,
                op: IoOp::Write,
                offset_bytes: layout.data_offset_bytes,
                len_bytes: slots * CHUNK as u64,
                errno: libc::EIO,
            });
        }
        let limit = MIB;
        let report = record(&sim, &options(limit)).unwrap();
        assert_eq!(report.outcome, RecordOutcome::Complete, "{report:?}");
        let retired: BTreeSet<u16> = report.retirements.iter().map(|r| r.member_index).collect();
        assert_eq!(retired, BTreeSet::from([0, 1]), "{report:?}");
        let (entry, end, sequences) = as_the_tools_see_it(&sim);
        assert_eq!((entry.stream_len_bytes, end), (limit, limit));
        assert_eq!(
            sequences.len() as u64,
            entry.end_sequence,
            "every chunk, none blank"
        );
    }

    #[test]
    fn one_member_dies_while_another_is_retired_and_the_last_carries_on() {
        let sim = SimDisks::new(3, DISK_BYTES, 4096, 4);
        let layout = VolumeLayout::compute(DISK_BYTES, CHUNK, 4096).unwrap();
        sim.fail(RangeFault {
            disk: 0,
            op: IoOp::Write,
            offset_bytes: layout.data_offset_bytes + 8 * CHUNK as u64,
            len_bytes: CHUNK as u64,
            errno: libc::EIO,
        });
        sim.fail_from(DiskFault::Dying { disk: 2 }, FaultStart::AtWrite(24));
        let limit = 3 * MIB / 2;
        let report = record(&sim, &options(limit)).unwrap();
        assert_eq!(report.outcome, RecordOutcome::Complete, "{report:?}");
        let retired: Vec<u16> = report.retirements.iter().map(|r| r.member_index).collect();
        assert_eq!(retired, [0, 2], "{report:?}");
        whole_to(&sim, limit);
    }

    #[test]
    fn a_failed_write_that_landed_in_part_is_claimed_as_far_as_it_landed() {
        // One member: a write of four chunks at slot 8 fails on its third (the device
        // split it, and the pieces before the fault landed).
        let sim = SimDisks::new(1, DISK_BYTES, 4096, 6);
        let layout = VolumeLayout::compute(DISK_BYTES, CHUNK, 4096).unwrap();
        sim.fail(RangeFault {
            disk: 0,
            op: IoOp::Write,
            offset_bytes: layout.data_offset_bytes + 10 * CHUNK as u64,
            len_bytes: CHUNK as u64,
            errno: libc::EIO,
        });
        let options = RecordOptions {
            io_chunk_count: 4,
            ..options(MIB)
        };
        let report = record(&sim, &options).unwrap();
        assert_eq!(report.outcome, RecordOutcome::Failed, "{report:?}");
        let (entry, end, sequences) = as_the_tools_see_it(&sim);
        // On one member, chunk n is in slot n: the entry ends at the first that is not
        // there, after the two that landed.
        assert_eq!(entry.end_sequence, 10, "{entry:?}");
        assert_eq!(report.end_sequence, 10, "{report:?}");
        assert!(claims_all(&entry, &sequences), "{entry:?}");
        assert_eq!(end, entry.stream_len_bytes);
        assert_eq!(report.stream_bytes, entry.stream_len_bytes);
    }

    #[test]
    fn the_last_member_failing_its_flush_ends_the_recording_with_everything_it_holds() {
        for members in [1, 2] {
            let sim = SimDisks::new(members, DISK_BYTES, 4096, 5);
            for disk in 0..members {
                sim.fail_from(
                    DiskFault::Dying { disk },
                    FaultStart::AtWrite(20 + disk as u64),
                );
            }
            let report = record(&sim, &options(3 * MIB)).unwrap();
            assert_eq!(report.outcome, RecordOutcome::Failed, "{report:?}");
            assert!(report.error.is_some());
            assert!(report.stream_bytes > 0, "{report:?}");
            let (entry, end, sequences) = as_the_tools_see_it(&sim);
            // Whether the closed entry or the open one with recovery: what the drives hold.
            assert_ne!(entry.state, RecordingState::Open);
            assert_eq!(end, entry.stream_len_bytes);
            assert_eq!(entry.stream_len_bytes, report.stream_bytes, "{report:?}");
            assert!(
                claims_all(&entry, &sequences),
                "{members} members: {entry:?}"
            );
        }
    }
}
