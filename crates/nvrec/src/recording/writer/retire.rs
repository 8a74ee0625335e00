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
//! when no member can take the work, the recording fails as it always did.

use super::{volume, Fill, Flight, RecordingError, Writer};
use crate::engine::IoErrorKind;
use crate::layout::{Retirement, RetirementCause, RETIREMENTS_MAX};
use crate::recording::MemberFailure;
use std::time::Instant;

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

/// An earlier attempt still in the kernel: its buffer is freed when its parts complete.
#[derive(Debug, Clone, Copy)]
pub(super) struct Stale {
    user_data: u64,
    buffer: u32,
    parts_left: u8,
}

/// The retirement cause and OS error of a failed flush or metadata write.
pub(super) fn cause_of_io(error: &RecordingError) -> (RetirementCause, i32) {
    let errno = match error {
        RecordingError::Io { source, .. } => source.raw_os_error().unwrap_or(0),
        _ => 0,
    };
    let cause = if errno == libc::ENOSPC {
        RetirementCause::TargetFull
    } else {
        RetirementCause::WriteFailed
    };
    (cause, errno)
}

impl Writer<'_> {
    /// Takes a completion of an earlier attempt, if it is one. Returns whether it was.
    pub(super) fn stale_completed(&mut self, user_data: u64) -> bool {
        let Some(at) = self.stale.iter().position(|s| s.user_data == user_data) else {
            return false;
        };
        self.stale[at].parts_left -= 1;
        if self.stale[at].parts_left > 0 {
            return true;
        }
        let stale = self.stale.swap_remove(at);
        // If the write has not gone out again yet, its next attempt takes the buffer back
        // as it is (its contents are intact); otherwise the buffer is free.
        let (number, _) = untag(user_data);
        let waiting = self
            .flights
            .get_mut(number)
            .filter(|flight| flight.needs_copy && flight.buffer == stale.buffer);
        match waiting {
            Some(flight) => flight.needs_copy = false,
            None => {
                self.buffer_chunk_counts[stale.buffer as usize] = 0;
                self.free.push(stale.buffer);
            }
        }
        true
    }

    /// A write of `member` came back failed (its flight holds the error).
    pub(super) fn write_failed(&mut self, member: usize) {
        let Some((_, flight, _)) = self.flights.iter().find(|&(_, f, done)| {
            f.member as usize == member && f.failed && f.parts_left == 0 && !done
        }) else {
            return;
        };
        let Some(error) = flight.error else { return };
        let cause = match error.kind {
            IoErrorKind::TargetFull => RetirementCause::TargetFull,
            _ => RetirementCause::WriteFailed,
        };
        let path = volume::describe_member(self.set, member);
        self.member_failed(member, (cause, error.errno), format!("{path}: {error}"));
    }

    /// Writes in flight on live members whose oldest write has waited longer than the
    /// member timeout fail their member.
    pub(super) fn check_timeouts(&mut self) {
        let timeout = self.options.member_timeout;
        for member in 0..self.members.len() {
            if self.members[member].retired {
                continue;
            }
            let Some(&(number, _, _)) = self.members[member].pending.front() else {
                continue;
            };
            let Some(flight) = self.flights.get(number) else {
                continue;
            };
            if flight.submitted.elapsed() >= timeout {
                let path = volume::describe_member(self.set, member);
                let what = format!(
                    "{path}: a write did not complete within {:.3} s (--member-timeout)",
                    timeout.as_secs_f64()
                );
                self.member_failed(member, (RetirementCause::Timeout, 0), what);
            }
        }
    }

    /// Retires `member` where the policy and the other members allow; otherwise the
    /// recording fails with `what`.
    pub(super) fn member_failed(
        &mut self,
        member: usize,
        (cause, errno): (RetirementCause, i32),
        what: String,
    ) {
        // A retired member's writes all went elsewhere, but one that failed after it was
        // retired (its completion came later than the failure that retired it) still has
        // to: it gets a retirement record of its own.
        let failed_after = self.flights.iter().any(|(_, f, done)| {
            f.member as usize == member && f.failed && f.parts_left == 0 && !done
        });
        if self.members[member].retired && !failed_after {
            return;
        }
        let target = match self.options.on_member_failure {
            MemberFailure::Retire
                if self.retirements.len() < RETIREMENTS_MAX && self.redirects.is_empty() =>
            {
                self.redirect_target(member)
            }
            _ => None,
        };
        match target {
            Some(target) => self.retire(member, target, cause, errno),
            None => {
                self.error.get_or_insert(what);
                self.give_up(member);
            }
        }
    }

    /// Failed writes of `member` that will not be sent again: the frontier stops at them.
    fn give_up(&mut self, member: usize) {
        let given_up: Vec<(u64, u32)> = self
            .flights
            .iter()
            .filter(|&(_, f, done)| {
                f.member as usize == member && f.failed && f.parts_left == 0 && !done
            })
            .map(|(number, f, _)| (number, f.buffer))
            .collect();
        for (number, buffer) in given_up {
            self.buffer_chunk_counts[buffer as usize] = 0;
            self.free.push(buffer);
            self.flights.complete(number);
        }
    }

    /// The live member, other than `member`, with room for `member`'s outstanding chunks:
    /// the one least far along.
    fn redirect_target(&self, member: usize) -> Option<usize> {
        let outstanding: u64 = self
            .flights
            .iter()
            .filter(|&(_, f, done)| f.member as usize == member && !done)
            .map(|(_, f, _)| f.chunk_count as u64)
            .sum();
        let ring = matches!(self.options.fill, Fill::Ring { .. });
        (0..self.members.len())
            .filter(|&index| index != member && !self.members[index].retired)
            .filter(|&index| {
                let m = &self.members[index];
                ring || m.next_slot + outstanding <= m.usable_slots
            })
            .min_by_key(|&index| {
                let m = &self.members[index];
                (m.lap * m.usable_slots + m.next_slot) * 1024 / m.usable_slots.max(1)
            })
    }

    /// Retires `member`: its outstanding writes go to `target` next, in order.
    fn retire(&mut self, member: usize, target: usize, cause: RetirementCause, errno: i32) {
        let again = self.members[member].retired;
        let mut first: Option<Flight> = None;
        for (number, flight, done) in self.flights.iter_mut() {
            if flight.member as usize != member || done || again && !flight.failed {
                continue;
            }
            if flight.parts_left > 0 {
                self.stale.push(Stale {
                    user_data: tag(number, flight.attempt),
                    buffer: flight.buffer,
                    parts_left: flight.parts_left,
                });
                flight.needs_copy = true;
            }
            first.get_or_insert(*flight);
            // Not written there after all: the chunks count where they land.
            self.members[member].chunk_count -= flight.chunk_count as u64;
            flight.attempt = flight.attempt.wrapping_add(1).max(1);
            flight.failed = false;
            flight.error = None;
            flight.parts_left = 0;
            self.redirects.push_back(number);
        }
        if let Some(counters) = self.counters {
            counters.members[member].retire();
        }
        let retired = &mut self.members[member];
        retired.retired = true;
        retired.unflushed = true;
        retired.pending.clear();
        // Its span keeps its write point: writes after the first unfinished one may have
        // completed there (completions come in any order), and they are not sent again.
        let (first_sequence, stream_offset_bytes, retired_first_slot) = match first {
            Some(flight) => {
                retired
                    .undurable
                    .retain(|&(sequence, ..)| sequence < flight.first_sequence);
                let meta = self.metas[flight.buffer as usize * self.k as usize];
                (flight.first_sequence, meta.stream_offset_bytes, flight.slot)
            }
            None => (
                self.next_sequence,
                self.stream_offset_bytes,
                retired.next_slot,
            ),
        };
        let lap_slots = match self.options.fill {
            Fill::Ring { .. } => self.members[target].usable_slots,
            Fill::Linear => self.members[target].data_slot_count,
        };
        self.redirect_to = Some(target);
        self.retirements.push(Retirement {
            member_index: member as u16,
            cause,
            errno,
            retired_ns: volume::now_ns(),
            stream_offset_bytes,
            first_sequence,
            redirect_member: target as u16,
            redirect_slot_count: 0,
            redirect_first_slot: 0,
            redirect_lap_slots: lap_slots,
            retired_first_slot,
        });
    }

    /// Sends the retired member's writes to the redirect member, as far as its queue and
    /// the free buffers allow. Returns whether anything went out.
    /// Whether `flight`, to go to `target`, never can: the target has nothing in flight and
    /// has gone as far past the last durable checkpoint as it may, and that checkpoint
    /// already claims everything before `flight` (the frontier waits for it), so no later
    /// checkpoint makes room.
    fn redirect_cannot_go(&self, target: usize, flight: &Flight) -> bool {
        self.members[target].in_flight == 0
            && !self.durability.busy()
            && self.durable_sequence_end == flight.first_sequence
            && self.checkpointed_sequence_end == self.durable_sequence_end
            && self.members[target].since_durable_slots
                == self.members[target].since_checkpoint_slots
    }

    pub(super) fn submit_redirects(&mut self) -> bool {
        let mut progressed = false;
        let ring = matches!(self.options.fill, Fill::Ring { .. });
        while let (Some(&number), Some(target)) = (self.redirects.front(), self.redirect_to) {
            let flight = *self.flights.get(number).expect("a redirect is in flight");
            let room = self.engine.in_flight() + self.max_parts() <= self.engine_queue_depth;
            if !room || !self.members[target].can_take_redirect(flight.chunk_count as u64, ring) {
                if self.redirect_cannot_go(target, &flight) {
                    self.error.get_or_insert(format!(
                        "{}: no room for a retired member's writes until a checkpoint that \
                         waits for them",
                        volume::describe_member(self.set, target)
                    ));
                    self.redirects.clear();
                }
                break;
            }
            let buffer = if flight.needs_copy {
                let Some(buffer) = self.free.pop() else { break };
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
                    self.error.get_or_insert(error.to_string());
                    self.redirects.clear();
                    break;
                }
            };
            let retirement = self.retirements.last_mut().expect("a retirement redirects");
            if retirement.redirect_slot_count == 0 {
                retirement.redirect_first_slot = placed.slot;
            }
            retirement.redirect_slot_count += flight.chunk_count;
            *self
                .flights
                .get_mut(number)
                .expect("a redirect is in flight") = Flight {
                buffer,
                member: target as u16,
                parts_left: placed.parts,
                slot: placed.slot,
                submitted: Instant::now(),
                needs_copy: false,
                ..flight
            };
            self.redirects.pop_front();
            progressed = true;
        }
        progressed
    }

    /// Copies a buffer whose write is still in the kernel into a free one, with its chunks'
    /// descriptions.
    fn copy_buffer(&mut self, from: u32, to: u32) {
        let k = self.k as usize;
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
        let (from, to) = (from as usize, to as usize);
        self.buffer_chunk_counts[to] = self.buffer_chunk_counts[from];
        self.metas.copy_within(from * k..(from + 1) * k, to * k);
        self.constant_payload_bytes
            .copy_within(from * k..(from + 1) * k, to * k);
    }
}
