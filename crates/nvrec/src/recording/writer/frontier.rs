//! The durable frontier: the writes in flight in stream order, how far from the first
//! every write has completed, and what the checkpoints built and made of it.

use super::member::MemberState;
use super::Claimed;
use super::Flight;
use crate::inflight::InFlight;
use crate::layout::MemberPosition;
use std::time::Duration;
use std::time::Instant;

/// The frontier stage's state.
pub(super) struct Frontier {
    /// Writes not yet passed by the frontier, by flight number (stream order).
    flights: InFlight<Flight>,
    flight_limit: usize,
    /// The end of the run of completed writes from the recording's first: sequence,
    /// stream offset and the loss within it.
    durable_sequence_end: u64,
    durable_stream_bytes: u64,
    durable_lost_bytes: u64,
    checkpoint_generation: u64,
    /// The durable frontier the last checkpoint built claimed.
    checkpointed_sequence_end: u64,
    checkpoint_count: u64,
    last_checkpoint: Instant,
    /// Set after a failure: the entry claims the frontier of completed writes, as recovery
    /// after a crash would find it.
    claimed: Option<Claimed>,
    /// Members retired, and not flushed since, when the checkpoint being made was offered:
    /// its flush covers everything they wrote.
    offered_flush: Vec<bool>,
    /// Members live when the checkpoint being made was offered (its metadata went to them).
    offered_live: Vec<bool>,
    /// How many of each member's `completed_unflushed` there were when the checkpoint being
    /// made was offered (0 for a member it does not flush): what its flush covers.
    offered_unflushed: Vec<usize>,
}

impl Frontier {
    /// A frontier at `sequence` (nothing in flight) after checkpoint `generation`.
    pub(super) fn new(
        flight_limit: usize,
        sequence: u64,
        generation: u64,
        now: Instant,
    ) -> Frontier {
        Frontier {
            flights: InFlight::with_capacity(flight_limit),
            flight_limit,
            durable_sequence_end: sequence,
            durable_stream_bytes: 0,
            durable_lost_bytes: 0,
            checkpoint_generation: generation,
            checkpointed_sequence_end: sequence,
            checkpoint_count: 0,
            last_checkpoint: now,
            claimed: None,
            offered_flush: Vec::new(),
            offered_live: Vec::new(),
            offered_unflushed: Vec::new(),
        }
    }

    /// The writes not yet passed, by flight number.
    pub(super) fn flights(&self) -> &InFlight<Flight> {
        &self.flights
    }

    /// The writes not yet passed, to put one in flight, complete one or send one again.
    pub(super) fn flights_mut(&mut self) -> &mut InFlight<Flight> {
        &mut self.flights
    }

    /// The end of the run of completed writes from the recording's first.
    pub(super) fn durable_sequence_end(&self) -> u64 {
        self.durable_sequence_end
    }

    /// Where the stream stands there, and the loss within it.
    pub(super) fn durable_stream(&self) -> (u64, u64) {
        (self.durable_stream_bytes, self.durable_lost_bytes)
    }

    /// The durable frontier the last checkpoint built claimed.
    pub(super) fn checkpointed_sequence_end(&self) -> u64 {
        self.checkpointed_sequence_end
    }

    /// Checkpoints made.
    pub(super) fn checkpoint_count(&self) -> u64 {
        self.checkpoint_count
    }

    /// Every write up to `sequence_end` is durable (the recording's end, flushed).
    pub(super) fn durable_to(&mut self, sequence_end: u64) {
        self.durable_sequence_end = sequence_end;
    }

    /// What the entry claims after a failure, once set.
    pub(super) fn claimed(&self) -> Option<Claimed> {
        self.claimed
    }

    /// The entry claims `claimed` (a failed recording).
    pub(super) fn claim(&mut self, claimed: Claimed) {
        self.claimed = Some(claimed);
    }

    /// Whether `member` was live when the checkpoint being made was offered (a member not
    /// counted then was).
    pub(super) fn was_live_at_offer(&self, member: usize) -> bool {
        self.offered_live.get(member).copied().unwrap_or(true)
    }

    /// A checkpoint is written in the writer's own thread, not offered: no flush of a
    /// retired member's and no completion of the `members` is covered by an offer.
    pub(super) fn written_here(&mut self, members: usize) {
        self.offered_flush = vec![false; members];
        self.offered_unflushed = vec![0; members];
    }

    /// Whether another write may be put in flight: the frontier's window has room.
    pub(super) fn has_room(&self) -> bool {
        self.flights.len() < self.flight_limit
    }

    /// The number the next write in flight gets.
    pub(super) fn next_number(&self) -> u64 {
        self.flights.front_number() + self.flights.len() as u64
    }

    /// Moves the frontier over the writes completed in order from the oldest, up to the
    /// first not completed or failed and given up; each member's own span (`members`)
    /// grows to the end of its writes passed. Returns whether it moved.
    pub(super) fn advance(&mut self, members: &mut [MemberState]) -> bool {
        let mut moved = false;
        while let Some((&front, true)) = self.flights.front() {
            if front.failed {
                break; // Failed and given up: the frontier stops here.
            }
            self.flights.pop_front();
            // A retired member's write sent here lies in its retirement's run, which
            // readers find by the retirement: the member's own span ends after its own
            // writes (a run placed after own writes that never completed would otherwise
            // take those slots into the span of a failed recording).
            if front.attempt == 0 {
                members[front.member as usize]
                    .point
                    .frontier_passed(front.slot + front.chunk_count as u64);
            }
            self.durable_sequence_end = front.first_sequence + front.chunk_count as u64;
            self.durable_stream_bytes = front.stream_end_bytes;
            self.durable_lost_bytes = front.lost_bytes_through;
            moved = true;
        }
        moved
    }

    /// What a recording that failed claims: the frontier, and the failed write it stopped
    /// at as far as that write landed (the frontier itself, which checkpoints claim, stops
    /// before it: a checkpoint's positions are where whole writes begin).
    pub(super) fn claim_at_failure(&self, members: &mut [MemberState]) -> Claimed {
        let claimed = Claimed {
            sequence_end: self.durable_sequence_end,
            stream_bytes: self.durable_stream_bytes,
            lost_bytes: self.durable_lost_bytes,
        };
        let Some((&front, true)) = self.flights.front() else {
            return claimed;
        };
        if !(front.failed && front.landed > 0 && front.first_sequence == claimed.sequence_end) {
            return claimed;
        }
        if front.attempt == 0 {
            members[front.member as usize]
                .point
                .frontier_passed(front.slot + front.landed as u64);
        }
        Claimed {
            sequence_end: front.first_sequence + front.landed as u64,
            stream_bytes: front.stream_end_bytes,
            lost_bytes: front.lost_bytes_through,
        }
    }

    /// Whether a checkpoint is due at `now`: a sync interval since the last one, or,
    /// once the frontier has moved, a member halfway to how far it may go past the last
    /// durable checkpoint (the recovery window; in a ring, half a lap), so that the next
    /// one is made before a member has to wait for it. (Slots alone call for one only once
    /// the frontier has moved: while a member lags, another would claim nothing more.)
    pub(super) fn due(&self, now: Instant, interval: Duration, members: &[MemberState]) -> bool {
        let moved = self.durable_sequence_end > self.checkpointed_sequence_end;
        // A member that jumped over kept slots waits for a checkpoint there (see
        // `MemberState::jump_kept`), once its writes before the jump are done.
        let jumped = members.iter().any(MemberState::waits_for_checkpoint);
        now.saturating_duration_since(self.last_checkpoint) >= interval
            || jumped
            || moved && members.iter().any(|member| member.reach.halfway())
    }

    /// A checkpoint goes to the members `live` marks after a flush of those `flush` marks:
    /// notes what that flush covers (a retired member's every write; of each member
    /// flushed, the writes it has completed so far).
    pub(super) fn offered(&mut self, members: &[MemberState], live: &[bool], flush: &[bool]) {
        self.offered_flush = members
            .iter()
            .map(|member| member.retired && member.flushes.owed())
            .collect();
        self.offered_live = live.to_vec();
        self.offered_unflushed = members
            .iter()
            .zip(flush)
            .map(|(member, &flushed)| match flushed {
                true => member.flushes.in_doubt().len(),
                false => 0,
            })
            .collect();
    }

    /// The checkpoint offered was made: every flush before it succeeded, so what they
    /// covered is durable, and recovery starts from its positions.
    pub(super) fn made(&mut self, members: &mut [MemberState]) {
        self.checkpoint_count += 1;
        let covered = self.offered_unflushed.iter().zip(&self.offered_flush);
        for (member, (&covered, &flushed)) in members.iter_mut().zip(covered) {
            member.flushes.covered(covered, flushed);
        }
        for member in members {
            member.checkpoint_durable();
        }
    }

    /// The next checkpoint's numbers: the frontier it claims (and, for each member, the
    /// position `members` give for it) is taken as built at `now`.
    pub(super) fn build(
        &mut self,
        members: &mut [MemberState],
        ring: bool,
        k: u64,
        now: Instant,
    ) -> (u64, Vec<MemberPosition>) {
        let durable_end = self.durable_sequence_end;
        let positions = members
            .iter_mut()
            .map(|member| member.checkpoint_position(durable_end, ring, k))
            .collect();
        self.checkpoint_generation += 1;
        self.checkpointed_sequence_end = durable_end;
        self.last_checkpoint = now;
        (self.checkpoint_generation, positions)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::recording::writer::parts::Parts;
    use crate::recording::writer::reach::RecoveryReach;
    use crate::recording::writer::rewrite::Done;

    /// A write of 4 chunks (sequences from `first`) to `member` at `slot`; its stream ends
    /// at 1000 bytes a chunk.
    fn flight(member: u16, first: u64, slot: u64) -> Flight {
        Flight {
            buffer: first as u32,
            member,
            first_sequence: first,
            chunk_count: 4,
            stream_end_bytes: (first + 4) * 1000,
            lost_bytes_through: first,
            parts_left: 1,
            lie: Parts::one(slot, 4),
            failed: false,
            slot,
            position: slot,
            attempt: 0,
            submitted: Instant::now(),
            error: None,
            needs_copy: false,
            landed: 0,
        }
    }

    fn frontier_of(flights: &[Flight]) -> Frontier {
        let mut frontier = Frontier::new(8, 0, 1, Instant::now());
        for &f in flights {
            frontier.flights.push(f);
        }
        frontier
    }

    fn members() -> Vec<MemberState> {
        (0..2).map(|_| MemberState::default()).collect()
    }

    #[test]
    fn the_frontier_passes_only_writes_completed_in_order_from_the_oldest() {
        let mut frontier = frontier_of(&[flight(0, 0, 0), flight(1, 4, 0), flight(0, 8, 4)]);
        let mut members = members();
        frontier.flights.complete(1);
        frontier.flights.complete(2);
        assert!(
            !frontier.advance(&mut members),
            "the oldest is still in flight"
        );
        assert_eq!(frontier.durable_sequence_end, 0);
        frontier.flights.complete(0);
        assert!(frontier.advance(&mut members));
        assert_eq!(frontier.durable_sequence_end, 12);
        assert_eq!(frontier.durable_stream_bytes, 12_000);
        assert_eq!(frontier.durable_lost_bytes, 8);
        assert_eq!(
            (
                members[0].point.frontier_end(),
                members[1].point.frontier_end()
            ),
            (8, 4)
        );
        assert!(frontier.flights.front().is_none());
    }

    #[test]
    fn a_failed_write_given_up_stops_the_frontier_and_a_failure_claims_what_landed_of_it() {
        let mut failed = flight(1, 4, 10);
        failed.failed = true;
        failed.landed = 3;
        failed.stream_end_bytes = 7000;
        let mut frontier = frontier_of(&[flight(0, 0, 0), failed, flight(0, 8, 4)]);
        let mut members = members();
        for number in 0..3 {
            frontier.flights.complete(number);
        }
        frontier.advance(&mut members);
        assert_eq!(
            frontier.durable_sequence_end, 4,
            "stops before the failed write"
        );
        let claimed = frontier.claim_at_failure(&mut members);
        assert_eq!((claimed.sequence_end, claimed.stream_bytes), (7, 7000));
        assert_eq!(
            members[1].point.frontier_end(),
            13,
            "its member's span takes what landed"
        );
    }

    #[test]
    fn a_redirected_write_moves_the_frontier_but_not_its_members_own_span() {
        let mut redirected = flight(1, 0, 20);
        redirected.attempt = 1;
        let mut frontier = frontier_of(&[redirected]);
        let mut members = members();
        frontier.flights.complete(0);
        frontier.advance(&mut members);
        assert_eq!(frontier.durable_sequence_end, 4);
        assert_eq!(members[1].point.frontier_end(), 0);
    }

    #[test]
    fn the_window_of_writes_in_flight_is_bounded() {
        let mut frontier = Frontier::new(2, 100, 1, Instant::now());
        assert_eq!(frontier.next_number(), 0);
        frontier.flights.push(flight(0, 100, 0));
        assert!(frontier.has_room());
        frontier.flights.push(flight(0, 104, 4));
        assert!(!frontier.has_room());
        assert_eq!(frontier.next_number(), 2);
    }

    #[test]
    fn a_checkpoint_is_due_after_the_interval_or_when_a_member_is_halfway_to_its_limit() {
        let start = Instant::now();
        let mut frontier = Frontier::new(8, 0, 1, start);
        let mut members = members();
        members[0].reach = RecoveryReach::with(100, 0);
        members[0].reach.set_since(60, 0);
        let second = Duration::from_secs(1);
        assert!(
            !frontier.due(start, second, &members),
            "the frontier has not moved"
        );
        frontier.durable_sequence_end = 4;
        assert!(frontier.due(start, second, &members));
        members[0].reach.set_since(49, 0);
        assert!(!frontier.due(start, second, &members));
        assert!(frontier.due(start + second, second, &members));
    }

    #[test]
    fn a_checkpoint_written_here_covers_no_offer_and_a_member_not_counted_then_was_live() {
        let mut frontier = Frontier::new(8, 0, 1, Instant::now());
        let mut members = members();
        members[0].flushes.completed(Done::four_at(0));
        frontier.offered(&members, &[true, false], &[true, true]);
        assert!(frontier.was_live_at_offer(0) && !frontier.was_live_at_offer(1));
        assert!(frontier.was_live_at_offer(2), "not counted then");
        frontier.written_here(2);
        frontier.made(&mut members);
        assert_eq!(
            members[0].flushes.in_doubt().len(),
            1,
            "no offer covered it"
        );
        frontier.durable_to(12);
        assert_eq!(frontier.durable_sequence_end(), 12);
        assert_eq!(frontier.checkpoint_count(), 1);
    }

    #[test]
    fn a_checkpoint_made_makes_durable_exactly_what_its_flush_covered() {
        let mut frontier = Frontier::new(8, 0, 1, Instant::now());
        let mut members = members();
        let done = Done::four_at;
        members[0].flushes.completed(done(0));
        members[0].flushes.completed(done(8));
        members[1].retired = true;
        members[1].flushes.retired(false);
        members[1].flushes.completed(done(4));
        members[0].reach.set_since(8, 0);
        frontier.offered(&members, &[true, false], &[true, true]);
        // Completed after the offer: its flush may have started before them.
        members[0].flushes.completed(done(12));
        frontier.made(&mut members);
        assert_eq!(frontier.checkpoint_count, 1);
        assert_eq!(members[0].flushes.in_doubt().len(), 1);
        assert_eq!(members[0].flushes.in_doubt()[0].first_sequence, 12);
        assert!(members[1].flushes.in_doubt().is_empty());
        assert!(!members[1].flushes.owed(), "the retired member was flushed");
        assert_eq!(members[0].reach.since(), (8, 8));
    }

    #[test]
    fn building_a_checkpoint_claims_the_frontier_and_counts_a_generation() {
        let mut frontier = Frontier::new(8, 0, 6, Instant::now());
        let mut members = members();
        frontier.durable_sequence_end = 12;
        let (generation, positions) = frontier.build(&mut members, false, 4, Instant::now());
        assert_eq!((generation, positions.len()), (7, 2));
        assert_eq!(frontier.checkpointed_sequence_end, 12);
    }
}
