//! Recovery's reach: how far a member may write past the last durable checkpoint. Recovery
//! searches forward from the position a checkpoint gives each member, over at most the
//! recovery window (in a ring, a lap less one write), so a member's writes must stay within
//! it. The stage owns the writes not yet covered by a checkpoint, the slots written since the
//! last one built and the last one durable, and in a ring the redirected slots just behind
//! a checkpoint's position, which the writer must not overwrite a lap on. Tested without a
//! member, a writer or a disk.

use crate::layout::MemberPosition;
use crate::recording::Fill;
use crate::recording::RECOVERY_WINDOW_SLOTS;
use std::collections::VecDeque;

/// A part of a write not yet covered by a checkpoint: its first chunk's sequence, where it
/// lies (slot and lap), and the redirected slots just before it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Uncovered {
    first_sequence: u64,
    slot: u64,
    lap: u64,
    redirected_before: u64,
}

#[derive(Debug, Default, Clone)]
pub(super) struct RecoveryReach {
    /// Parts written and not yet covered by a checkpoint, oldest first.
    uncovered: VecDeque<Uncovered>,
    /// Slots of a retired member's writes sent here since this member's last own write:
    /// they lie just behind the write point, and hold older sequences than the write
    /// before them.
    redirect_tail: u64,
    /// Such slots just before the position of the last checkpoint built, and of the last
    /// one made durable. In a ring the writer overwrites the lap before up to its last
    /// write before that position (the recovery limit); where that write is a redirected
    /// one, the member's last own write before it holds the newest durable chunks, and is
    /// kept too.
    checkpoint_guard: u64,
    durable_guard: u64,
    /// Slots written past the positions of the last checkpoint built, and of the last one
    /// made durable: recovery searches forward from the latter, so it must stay below
    /// `limit`.
    since_checkpoint: u64,
    since_durable: u64,
    /// The recovery window, or in a ring a lap, less one write.
    limit: u64,
    /// Slots below the limit kept for a retired member's writes sent here.
    reserve: u64,
}

impl RecoveryReach {
    /// The reach of a member of `usable_slots` slots in a recording that fills as `fill`,
    /// `k` chunks a write and `queue_depth` writes in flight a member.
    pub(super) fn new(fill: &Fill, usable_slots: u64, k: u64, queue_depth: u32) -> RecoveryReach {
        let limit = match fill {
            Fill::Linear => RECOVERY_WINDOW_SLOTS as u64,
            Fill::Ring { .. } => usable_slots.min(RECOVERY_WINDOW_SLOTS as u64),
        }
        .saturating_sub(k)
        .max(k);
        // Room for every write a member can have in flight, so that a retirement always
        // finds somewhere to send them.
        let reserve = (queue_depth as u64 * k).min(limit / 2);
        RecoveryReach::with(limit, reserve)
    }

    /// A reach of `limit` slots, `reserve` of them kept for redirected writes.
    pub(super) fn with(limit: u64, reserve: u64) -> RecoveryReach {
        RecoveryReach {
            limit,
            reserve,
            ..RecoveryReach::default()
        }
    }

    /// A part of a write went out: its first chunk's sequence and where it lies; `first_chunk`
    /// is its place in the write, `redirected` whether the write is a retired member's.
    pub(super) fn part_placed(
        &mut self,
        first_sequence: u64,
        (slot, lap): (u64, u64),
        first_chunk: u32,
        redirected: bool,
    ) {
        // Redirected slots just before this part: those before the write, and in a
        // redirected write (one run, on at slot 0), its own chunks before the part.
        let redirected_before = match (redirected, first_chunk) {
            (_, 0) => self.redirect_tail,
            (true, _) => self.redirect_tail + first_chunk as u64,
            (false, _) => 0,
        };
        self.uncovered.push_back(Uncovered {
            first_sequence,
            slot,
            lap,
            redirected_before,
        });
    }

    /// A write of `chunk_count` chunks went out (its parts placed): a redirected one adds to
    /// the redirected slots behind the write point, an own one ends them.
    pub(super) fn write_placed(&mut self, chunk_count: u64, redirected: bool) {
        self.redirect_tail = match redirected {
            true => self.redirect_tail + chunk_count,
            false => 0,
        };
    }

    /// The write point went `slots` on: written, or jumped over kept slots that recovery
    /// reads through.
    pub(super) fn wrote(&mut self, slots: u64) {
        self.since_checkpoint = self.since_checkpoint.saturating_add(slots);
        self.since_durable = self.since_durable.saturating_add(slots);
    }

    /// Recovery could not find what comes next from any checkpoint before one puts the
    /// member past here (a jump over slots no durable entry names): nothing more is written
    /// until then.
    pub(super) fn hold(&mut self) {
        self.since_checkpoint = self.limit;
        self.since_durable = self.limit;
    }

    /// A retired member's writes from `first_sequence` on go elsewhere: they are not this
    /// member's to cover.
    pub(super) fn forget_from(&mut self, first_sequence: u64) {
        self.uncovered
            .retain(|part| part.first_sequence < first_sequence);
    }

    /// Whether a write taking `extent` slots may go out now: within the limit, less the
    /// reserve and the slots guarded behind the durable position.
    pub(super) fn room_for(&self, extent: u64) -> bool {
        self.since_durable + extent + self.reserve + self.durable_guard <= self.limit
    }

    /// Whether a retired member's write of `slots` may go out now: into the reserve, and
    /// past the guarded slots, which otherwise could wait for a checkpoint that waits for
    /// this write.
    pub(super) fn room_for_redirect(&self, slots: u64) -> bool {
        self.since_durable + slots <= self.limit
    }

    /// How far past the write point a discard may go: as far as writes may.
    pub(super) fn discard_room(&self) -> u64 {
        self.limit
            .saturating_sub(self.since_durable + self.durable_guard)
    }

    /// Halfway to the limit since the last checkpoint built: the next one is due, so that
    /// it is made before the member has to wait for it.
    pub(super) fn halfway(&self) -> bool {
        self.since_checkpoint >= (self.limit / 2).max(1)
    }

    /// The last checkpoint built is the last durable one, as far as this member goes.
    pub(super) fn built_is_durable(&self) -> bool {
        self.since_durable == self.since_checkpoint
    }

    /// Where a checkpoint that claims up to `durable_end` puts this member, whose write point
    /// is `here`, in laps of `lap_slots`: at its oldest part not covered (or its write
    /// point). Notes the slots from there to the write point, and in a ring (`ring`) the
    /// redirected slots just before that position, never so many that a write of `k` of
    /// its own could not go out.
    pub(super) fn checkpoint(
        &mut self,
        durable_end: u64,
        here: MemberPosition,
        lap_slots: u64,
        (ring, k): (bool, u64),
    ) -> MemberPosition {
        while self
            .uncovered
            .front()
            .is_some_and(|part| part.first_sequence < durable_end)
        {
            self.uncovered.pop_front();
        }
        let (position, guard) = match self.uncovered.front() {
            Some(part) => (
                MemberPosition {
                    next_slot_index: part.slot,
                    lap: part.lap,
                },
                part.redirected_before,
            ),
            None => (here, self.redirect_tail),
        };
        // A checkpoint made after the member's next own write moves the position past the
        // redirected slots.
        self.checkpoint_guard = match ring {
            true => guard.min(self.limit.saturating_sub(self.reserve + k)),
            false => 0,
        };
        let ring_position = |p: &MemberPosition| p.lap * lap_slots + p.next_slot_index;
        self.since_checkpoint = ring_position(&here).saturating_sub(ring_position(&position));
        position
    }

    /// The checkpoint last built still leaves writes the member made before a jump it
    /// waits on uncovered: recovery could not find those past it.
    pub(super) fn checkpoint_short_of_jump(&mut self) {
        self.since_checkpoint = self.limit;
    }

    /// The checkpoint last built is durable: recovery starts from its position now.
    pub(super) fn checkpoint_durable(&mut self) {
        self.since_durable = self.since_checkpoint;
        self.durable_guard = self.checkpoint_guard;
    }

    /// Slots written since the last checkpoint built, and since the last durable one
    /// (tests).
    #[cfg(test)]
    pub(super) fn since(&self) -> (u64, u64) {
        (self.since_checkpoint, self.since_durable)
    }

    /// Sets the slots written since the last checkpoint built, and the last durable one
    /// (tests of the stages that read them).
    #[cfg(test)]
    pub(super) fn set_since(&mut self, checkpoint: u64, durable: u64) {
        (self.since_checkpoint, self.since_durable) = (checkpoint, durable);
    }

    /// The redirected slots guarded behind the last checkpoint built (tests).
    #[cfg(test)]
    pub(super) fn checkpoint_guard(&self) -> u64 {
        self.checkpoint_guard
    }

    /// The parts not covered yet (tests).
    #[cfg(test)]
    fn uncovered(&mut self) -> &mut VecDeque<Uncovered> {
        &mut self.uncovered
    }
}

#[cfg(test)]
mod tests {
    use super::RecoveryReach;
    use super::Uncovered;
    use crate::layout::MemberPosition;
    use crate::recording::Fill;
    use crate::recording::RECOVERY_WINDOW_SLOTS;

    fn part(first_sequence: u64, slot: u64, lap: u64, redirected_before: u64) -> Uncovered {
        Uncovered {
            first_sequence,
            slot,
            lap,
            redirected_before,
        }
    }

    #[test]
    fn the_limit_is_the_recovery_window_or_a_lap_less_a_write_with_room_for_redirects() {
        let linear = RecoveryReach::new(&Fill::Linear, 1 << 30, 8, 4);
        assert_eq!(linear.limit, RECOVERY_WINDOW_SLOTS as u64 - 8);
        assert_eq!(linear.reserve, 32);
        let ring = RecoveryReach::new(&Fill::Ring { trim: false }, 40, 8, 4);
        assert_eq!(
            (ring.limit, ring.reserve),
            (32, 16),
            "half the limit at most"
        );
    }

    #[test]
    fn a_checkpoint_puts_a_member_at_its_oldest_part_it_does_not_cover() {
        let mut reach = RecoveryReach::with(50, 8);
        reach
            .uncovered()
            .extend([part(0, 0, 0, 0), part(8, 4, 0, 0), part(16, 8, 0, 0)]);
        let position = reach.checkpoint(8, MemberPosition::at(12, 0), 100, (false, 4));
        assert_eq!(position, MemberPosition::at(4, 0));
        assert_eq!(reach.uncovered().len(), 2, "parts it covers are forgotten");
        assert_eq!(reach.since(), (8, 0));
        reach.checkpoint_durable();
        assert_eq!(reach.since(), (8, 8));
        // Everything covered: at the write point, a lap on.
        let position = reach.checkpoint(100, MemberPosition::at(4, 1), 100, (true, 4));
        assert_eq!(position, MemberPosition::at(4, 1));
        assert_eq!(reach.since().0, 0);
    }

    #[test]
    fn in_a_ring_the_redirected_slots_before_the_position_are_guarded_within_the_limit() {
        let mut reach = RecoveryReach::with(50, 8);
        reach.uncovered().push_back(part(20, 30, 2, 12));
        reach.checkpoint(0, MemberPosition::at(38, 2), 100, (true, 4));
        assert_eq!(reach.checkpoint_guard(), 12);
        assert_eq!(reach.since().0, 8);
        reach.uncovered()[0].redirected_before = 45;
        reach.checkpoint(0, MemberPosition::at(38, 2), 100, (true, 4));
        assert_eq!(
            reach.checkpoint_guard(),
            50 - 8 - 4,
            "room kept for its own write"
        );
        reach.checkpoint(0, MemberPosition::at(38, 2), 100, (false, 4));
        assert_eq!(
            reach.checkpoint_guard(),
            0,
            "linear: nothing is overwritten"
        );
    }

    #[test]
    fn redirected_slots_before_a_part_are_those_behind_the_write_point_and_its_own() {
        let mut reach = RecoveryReach::with(50, 8);
        reach.part_placed(0, (10, 0), 0, true);
        reach.write_placed(4, true);
        reach.part_placed(4, (14, 0), 0, true);
        reach.part_placed(6, (0, 1), 2, true);
        reach.write_placed(4, true);
        reach.part_placed(8, (2, 1), 0, false);
        reach.part_placed(10, (9, 1), 2, false);
        reach.write_placed(4, false);
        let before: Vec<u64> = reach
            .uncovered()
            .iter()
            .map(|part| part.redirected_before)
            .collect();
        assert_eq!(before, vec![0, 4, 6, 8, 0]);
        reach.forget_from(6);
        assert_eq!(
            reach.uncovered().len(),
            2,
            "a retired member's parts go elsewhere"
        );
        let position = reach.checkpoint(0, MemberPosition::at(13, 1), 100, (true, 4));
        assert_eq!(position, MemberPosition::at(10, 0));
        assert_eq!(reach.since().0, 103);
    }

    #[test]
    fn writes_stay_within_the_limit_less_the_reserve_and_the_guard_and_redirects_use_the_reserve() {
        let mut reach = RecoveryReach::with(50, 8);
        reach.wrote(38);
        assert!(reach.room_for(4) && !reach.room_for(5));
        assert!(reach.room_for_redirect(12) && !reach.room_for_redirect(13));
        assert_eq!(reach.discard_room(), 12);
        assert!(reach.halfway());
        assert!(!reach.built_is_durable() || reach.since() == (38, 38));
        reach.hold();
        assert!(!reach.room_for(0) && reach.room_for_redirect(0));
        assert_eq!(reach.discard_room(), 0);
    }

    #[test]
    fn a_checkpoint_short_of_a_jump_leaves_no_room_until_the_next() {
        let mut reach = RecoveryReach::with(50, 8);
        reach.checkpoint(0, MemberPosition::at(10, 0), 100, (true, 4));
        reach.checkpoint_short_of_jump();
        assert!(!reach.built_is_durable());
        reach.checkpoint_durable();
        assert!(!reach.room_for(1));
        reach.checkpoint(0, MemberPosition::at(10, 0), 100, (true, 4));
        reach.checkpoint_durable();
        assert!(reach.room_for(1) && reach.built_is_durable());
    }
}
