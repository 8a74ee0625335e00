//! A member of the recording as the writer places writes on it: whether it is retired, and
//! its stages, each owning its part (see `point.rs`, `queue.rs`, `reach.rs`, `kept.rs`,
//! `flushes.rs`). What asks more than one of them (may a write go here now, where a
//! checkpoint puts the member, a jump over kept slots) is here, tested without a writer.

use super::flushes::Flushes;
use super::kept::KeptSlots;
use super::parts::Lay;
use super::point::WritePoint;
use super::queue::MemberQueue;
use super::reach::RecoveryReach;
use super::RecordOptions;
use crate::layout::MemberPosition;
use crate::recording::volume::Member;
use crate::recording::Fill;

#[derive(Debug, Default, Clone)]
pub(super) struct MemberState {
    /// Retired after a failure: takes no more writes, and no metadata.
    pub(super) retired: bool,
    /// Where its next write goes, where it began, its limit (see `point.rs`).
    pub(super) point: WritePoint,
    /// Its writes in flight, the chunks it took and its rate (see `queue.rs`).
    pub(super) queue: MemberQueue,
    /// How far it may write past the last durable checkpoint (see `reach.rs`).
    pub(super) reach: RecoveryReach,
    /// What it completed since its last good flush, and whether a flush is owed or failed
    /// (see `flushes.rs`).
    pub(super) flushes: Flushes,
    /// Slots marks keep (format 1.7), and where writes wait after a jump over them (see
    /// `kept.rs`).
    pub(super) kept: KeptSlots,
}

impl MemberState {
    /// A member as a recording starts on it: at the checkpoint's `position`, with its
    /// queue depth, recovery limit and redirect reserve for `options`, `k` chunks a write.
    pub(super) fn starting(
        member: &Member,
        position: &MemberPosition,
        options: &RecordOptions,
        k: u32,
    ) -> MemberState {
        let point = WritePoint::new(*position, member.layout().data_slot_count, k as u64);
        let usable_slots = point.lap_slots();
        let queue_depth = match options.fill {
            Fill::Linear => options.queue_depth,
            Fill::Ring { .. } => options
                .queue_depth
                .min((usable_slots / k as u64).saturating_sub(1).max(1) as u32),
        };
        MemberState {
            queue: MemberQueue::new(queue_depth),
            reach: RecoveryReach::new(&options.fill, usable_slots, k as u64, options.queue_depth),
            point,
            ..MemberState::default()
        }
    }
}

impl MemberState {
    /// Where the next ring write starts, counted in slots from the start of lap 0
    /// (lap x usable slots + slot), and the lap and slot that is.
    pub(super) fn ring_next(&self) -> (u64, u64, u64) {
        self.point.ring_next()
    }

    /// The slots written here, all told: the write point's ring position less the slots
    /// it jumped over.
    pub(super) fn written_position(&self) -> u64 {
        self.ring_next().0.saturating_sub(self.kept.jumped_slots())
    }

    /// How a ring write of `count` chunks lies from the write point (see `parts.rs`).
    pub(super) fn lay(&self, count: u64) -> Lay {
        let (_, _, slot) = self.ring_next();
        self.kept.lay(slot, count, self.point.lap_slots())
    }

    /// A ring write of `chunk_count` chunks taking `extent` positions from the write point
    /// went out: the write point moves past it, the kept slots it went round counted as
    /// jumped, and all of it in the slots since the checkpoint (recovery reads through
    /// kept slots too).
    pub(super) fn ring_wrote(&mut self, extent: u64, chunk_count: u64) {
        self.point.ring_wrote(extent);
        self.kept.jumped_over(extent - chunk_count);
        self.reach.wrote(extent);
    }

    /// The ring positions a write of `count` chunks takes from the write point, where it
    /// may go now (none while it would go round kept slots no durable entry names).
    fn ring_extent(&self, count: u64) -> Option<u64> {
        match self.lay(count) {
            Lay::At { extent, .. } => Some(extent),
            Lay::Unsettled | Lay::Scattered => None,
        }
    }

    /// Whether a write of `count` chunks lies in one run from the write point (or two
    /// where the lap ends), round no kept slots: as a retired member's writes sent here
    /// must, the reader taking them for one run.
    fn lies_contiguous(&self, count: u64) -> bool {
        self.ring_extent(count) == Some(count)
    }

    /// Whether a ring write taking `extent` ring positions from the write point touches no
    /// slot of a write still in flight: everything in flight and the new write must lie
    /// within one lap's worth of ring positions.
    pub(super) fn ring_clear(&self, extent: u64) -> bool {
        let (position, _, _) = self.ring_next();
        self.queue
            .ring_clear(position, extent, self.point.lap_slots())
    }

    /// Whether a write of `chunk_count` chunks may go to this member now: its queue has
    /// room, in a ring the write touches no slot still being written, and recovery could
    /// still find it from the last durable checkpoint.
    pub(super) fn can_take(&self, chunk_count: u64, ring: bool) -> bool {
        let extent = match ring {
            true => match self.ring_extent(chunk_count) {
                Some(extent) => extent,
                None => return false,
            },
            false => chunk_count,
        };
        self.queue.has_room() && (!ring || self.ring_clear(extent)) && self.reach.room_for(extent)
    }

    /// Whether a retired member's write of `chunk_count` chunks may go here now: as
    /// [`MemberState::can_take`], into the room kept for it. (The durable frontier waits
    /// for these writes: without the room, a member that went as far as it may past the
    /// last checkpoint could wait for a checkpoint that waits for it.)
    /// It leaves out the slots kept behind a redirected run (the reach's durable guard)
    /// for the same reason. Such a write lies in one run: where kept slots are in its way, the
    /// write point jumps past them first (see `Writer::place`), and so does this look.
    pub(super) fn can_take_redirect(&self, chunk_count: u64, ring: bool) -> bool {
        if ring && !self.lies_contiguous(chunk_count) {
            let mut ahead = self.clone();
            ahead.jump_kept(chunk_count, true);
            return ahead.lies_contiguous(chunk_count)
                && ahead.can_take_redirect(chunk_count, ring);
        }
        self.queue.has_room()
            && (!ring || self.ring_clear(chunk_count))
            && self.within_limit(chunk_count, ring)
            && self.reach.room_for_redirect(chunk_count)
    }

    /// Whether a write of `chunk_count` slots from the write point stays within the
    /// member's limit, if it has one: a ring position (a recording that reclaims; the
    /// write reaches as far as the kept slots it goes round), or a slot (a linear
    /// recording before a kept mark).
    pub(super) fn within_limit(&self, chunk_count: u64, ring: bool) -> bool {
        let Some(limit) = self.point.limit() else {
            return true;
        };
        let (at, reach) = match ring {
            true => (
                self.ring_next().0,
                self.ring_extent(chunk_count).unwrap_or(chunk_count),
            ),
            false => (self.point.slot(), chunk_count),
        };
        at + reach <= limit
    }

    /// Where a checkpoint that claims up to `durable_end` puts this member (see
    /// [`RecoveryReach::checkpoint`]); short of a jump over kept slots it still waits on,
    /// it leaves the member no room until the next.
    pub(super) fn checkpoint_position(
        &mut self,
        durable_end: u64,
        ring: bool,
        k: u64,
    ) -> MemberPosition {
        let here = self.point.here();
        let lap_slots = self.point.lap_slots().max(1);
        let position = self
            .reach
            .checkpoint(durable_end, here, lap_slots, (ring, k));
        if self
            .kept
            .checkpoint_at(position.lap * lap_slots + position.next_slot_index)
        {
            self.reach.checkpoint_short_of_jump();
        }
        position
    }

    /// The checkpoint last built is durable: recovery starts from its position now.
    pub(super) fn checkpoint_durable(&mut self) {
        self.reach.checkpoint_durable();
        self.kept.checkpoint_durable();
    }

    /// Before the next write of up to `count` chunks: moves the write point out of kept
    /// slots it stands in. A write goes round kept slots ahead of it (see `parts.rs`),
    /// leaving none unwritten, but not round slots no durable entry names yet
    /// (unsettled, see `kept.rs`): then the member holds its writes until a checkpoint is
    /// durable where it stands (its barrier), which makes the mark's entry durable with it.
    ///
    /// Where the write must lie in one run (`contiguous`: a retired member's writes sent
    /// here), or would take more I/Os than one may, the write point jumps past every kept
    /// range the write would touch instead, and a range it stopped short of is widened
    /// back over the slots left unwritten (its entry rewritten), so that a reader's lap
    /// never holds older chunks between newer ones. Past unsettled slots, writes wait for a
    /// checkpoint there; past settled ones they go on, the jump counted in the slots since
    /// the checkpoint. Returns whether the write point moved.
    pub(super) fn jump_kept(&mut self, count: u64, contiguous: bool) -> bool {
        let lap = self.point.lap_slots();
        if lap == 0 || self.kept.is_empty() {
            return false;
        }
        let from = self.ring_next().0;
        let (out, mut unsettled) = self.kept.jump_out(from, lap);
        self.point.go_to(from, out);
        match (contiguous, self.lay(count)) {
            (false, Lay::At { .. }) => {}
            (false, Lay::Unsettled) => {
                self.hold_for_entry();
                return out != from;
            }
            _ => {
                let (past, jumped_unsettled) = self.kept.jump_widening(out, count, lap);
                unsettled |= jumped_unsettled;
                self.point.go_to(out, past);
            }
        }
        let to = self.ring_next().0;
        if to == from {
            return false;
        }
        self.kept.jumped_over(to - from);
        self.point.jumped();
        match unsettled {
            true => {
                self.kept.hold_at(to);
                self.reach.hold();
            }
            false => self.reach.wrote(to - from),
        }
        true
    }

    /// Holds this member's writes until a durable checkpoint puts it where it stands: its
    /// next write would go round kept slots that no durable entry names.
    fn hold_for_entry(&mut self) {
        self.kept.hold_at(self.ring_next().0);
        self.reach.hold();
    }

    /// Slots from the write point, in lap order, before the first kept slot (a lap when
    /// none is kept): as far as a discard ahead may go.
    pub(super) fn slots_before_kept(&self) -> u64 {
        self.kept
            .slots_before(self.point.slot(), self.point.lap_slots())
    }

    /// Its writes wait for a checkpoint past a jump over kept slots, and none is in
    /// flight: the checkpoint may be made now.
    pub(super) fn waits_for_checkpoint(&self) -> bool {
        self.kept.waits_for_checkpoint() && self.queue.idle()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::recording::writer::parts::PARTS_MAX;

    /// A member of laps of 100 slots, 4 writes in flight at most, a recovery limit of 50
    /// with 8 kept for redirects.
    fn member() -> MemberState {
        MemberState {
            point: WritePoint::with_lap(100),
            queue: MemberQueue::new(4),
            reach: RecoveryReach::with(50, 8),
            ..MemberState::default()
        }
    }

    #[test]
    fn the_write_point_jumps_out_of_kept_slots_and_waits_for_a_checkpoint_past_them() {
        let mut member = member();
        // The second wraps over the lap's end. Neither is named by a durable entry yet (a
        // mark just closed).
        member.kept.keep((40, 10), false);
        member.kept.keep((95, 10), false);
        member.point.set(38, 0);
        // A write of 2 from 38 fits before 40: no jump.
        assert!(!member.jump_kept(2, false));
        member.point.set(40, 0);
        assert!(member.jump_kept(2, false));
        assert_eq!((member.point.lap(), member.point.slot()), (0, 50));
        assert!(
            !member.can_take(2, true),
            "no write past a jump before a checkpoint"
        );
        // A checkpoint built with writes before the jump still uncovered keeps it waiting.
        member.reach.part_placed(7, (38, 0), 0, false);
        member.checkpoint_position(0, true, 2);
        member.checkpoint_durable();
        assert!(member.kept.waits_for_checkpoint() && !member.can_take(2, true));
        // One that puts the member at the jump's end lets it go on.
        member.checkpoint_position(8, true, 2);
        member.checkpoint_durable();
        assert!(!member.kept.waits_for_checkpoint() && member.can_take(2, true));
    }

    #[test]
    fn a_write_that_would_go_round_slots_no_entry_names_waits_for_a_checkpoint_there() {
        let mut member = member();
        member.kept.keep((95, 10), false);
        member.point.set(94, 0);
        assert!(!member.jump_kept(2, false), "it holds where it stands");
        assert_eq!(member.kept.barrier(), Some(94));
        assert!(!member.can_take(2, true));
        member.checkpoint_position(0, true, 2);
        member.checkpoint_durable();
        assert!(!member.kept.waits_for_checkpoint());
        assert!(
            !member.can_take(2, true),
            "the mark's entry is not durable yet"
        );
        member.kept.settled((95, 10));
        assert!(member.can_take(2, true));
        let Lay::At { parts, extent, .. } = member.lay(2) else {
            panic!("laid out");
        };
        assert_eq!((parts.slots(), extent), (vec![94, 5], 12));
        assert_eq!(member.kept.ranges(), &[(95, 10)], "nothing widened");
    }

    #[test]
    fn a_write_that_must_lie_in_one_run_jumps_and_widens_the_range_it_stopped_short_of() {
        let mut member = member();
        member.kept.keep((95, 10), false);
        member.point.set(94, 0);
        assert!(member.jump_kept(2, true));
        assert_eq!((member.point.lap(), member.point.slot()), (1, 5));
        assert_eq!(member.kept.widened(), &[((95, 10), (94, 11))]);
        assert_eq!(member.kept.ranges(), &[(94, 11)]);
        assert_eq!(member.kept.unsettled(), &[(94, 11)], "still not named");
        assert_eq!(member.kept.barrier(), Some(105));
        assert_eq!(member.slots_before_kept(), 89);
    }

    #[test]
    fn a_jump_over_slots_a_durable_entry_names_goes_on_without_a_checkpoint() {
        let mut member = member();
        member.kept.keep((40, 10), true);
        member.point.set(40, 0);
        member.reach.set_since(6, 6);
        assert!(member.jump_kept(2, false));
        assert_eq!((member.point.lap(), member.point.slot()), (0, 50));
        assert!(!member.kept.waits_for_checkpoint());
        // The jump counts in the slots since the checkpoint: recovery reads through them.
        assert_eq!(member.reach.since(), (16, 16));
        assert!(
            member.can_take(2, true),
            "a stall elsewhere holds nothing here"
        );
        // Once its entry is durable, a mark closed since is gone round the same way: no
        // jump, and no slot before it left unwritten.
        member.kept.keep((60, 5), false);
        member.kept.settled((60, 5));
        member.point.set(59, 0);
        assert!(
            !member.jump_kept(2, false),
            "a write from 59 goes round 60..65"
        );
        let Lay::At { parts, extent, .. } = member.lay(2) else {
            panic!("laid out");
        };
        assert_eq!((parts.slots(), extent), (vec![59, 65], 7));
        assert!(!member.kept.waits_for_checkpoint());
        assert_eq!(member.kept.ranges()[1], (60, 5));
    }

    #[test]
    fn lap_after_lap_every_free_slot_is_written_and_kept_ranges_stay_as_they_are() {
        let mut member = member();
        member.reach = RecoveryReach::with(1000, 8);
        // Ranges a write's length from each other and from the lap's end, and writes of
        // uneven lengths (a paced source's partial buffers), so that the write point
        // comes to each range at another slot every lap.
        let kept = vec![(7, 9), (19, 3), (33, 20), (95, 3), (99, 2)];
        for &range in &kept {
            member.kept.keep(range, true);
        }
        let free: Vec<u64> = (0..100)
            .filter(|&slot| !kept.iter().any(|&range| within(range, slot)))
            .collect();
        let mut written = vec![0u64; 100];
        let counts = [8u64, 3, 8, 5, 8, 8, 1, 7];
        for write in 0..400 {
            member.jump_kept(8, false);
            let count = counts[write % counts.len()];
            let Lay::At { parts, extent, .. } = member.lay(count) else {
                panic!("write {write} laid out");
            };
            assert!(parts.len() <= PARTS_MAX);
            for slot in parts.slots() {
                assert!(free.contains(&slot), "write {write} wrote kept slot {slot}");
                written[slot as usize] += 1;
            }
            member.ring_wrote(extent, count);
            member.reach.set_since(0, 0);
        }
        assert_eq!(member.kept.ranges(), kept, "no range widened");
        assert!(member.kept.widened().is_empty());
        let laps = member.point.lap();
        assert!(laps >= 30, "{laps} laps");
        for &slot in &free {
            assert!(
                written[slot as usize] >= laps,
                "slot {slot} written {} times in {laps} laps",
                written[slot as usize]
            );
        }
    }

    fn within((first, count): (u64, u64), slot: u64) -> bool {
        (slot + 100 - first % 100) % 100 < count
    }

    #[test]
    fn a_ring_write_waits_until_it_touches_no_slot_in_flight_and_recovery_finds_it() {
        let mut member = member();
        member.point.set(96, 0);
        // Ring positions 8..12, in flight.
        member.queue.submitted(0, (8, 4), std::time::Instant::now());
        assert!(member.can_take(4, true));
        assert!(
            !member.can_take(16, true),
            "would reach slot 8 of the next lap"
        );
        member.reach.set_since(40, 40);
        assert!(
            !member.can_take(4, true),
            "40 + 4 + 8 reserved > the limit of 50"
        );
        assert!(
            member.can_take_redirect(4, true),
            "the reserve is for redirects"
        );
    }
}
