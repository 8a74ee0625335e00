//! Kept slots: the runs of a ring member's slots that marks keep (format 1.7), which of them
//! no durable entry names yet, where the member's writes wait for a checkpoint after a jump,
//! and how far its write point has jumped all told. The stage owns these; a member's write
//! point asks it where to go (ring positions in, ring positions out), so that it is tested
//! without a writer, a member or a disk.

use super::parts::lay_ring;
use super::parts::Lay;

/// A run of a member's slots: (first slot, slot count), in lap order (it may wrap over the
/// lap's end).
pub(super) type Range = (u64, u64);

#[derive(Debug, Default, Clone)]
pub(super) struct KeptSlots {
    /// Slots marks keep. The write point goes round them (see `parts.rs`) or jumps over
    /// them (see [`KeptSlots::jump_out`], [`KeptSlots::jump_widening`]).
    ranges: Vec<Range>,
    /// Ranges (of `ranges`) of a mark whose closed entry is not durable yet. Recovery,
    /// which searches forward from a checkpoint, crosses only the kept slots the index
    /// names (and the fewer than a write's slots a jump left unwritten before them).
    unsettled: Vec<Range>,
    /// After a jump over kept slots recovery cannot know of (`unsettled`): the ring
    /// position the write point jumped to. No write goes on past it until a durable
    /// checkpoint puts the member there. (A jump over settled slots goes on at once: a
    /// stalled member elsewhere, holding the checkpoint back, holds nothing here.)
    barrier: Option<u64>,
    /// The checkpoint last built puts the member at or past `barrier`.
    barrier_passed: bool,
    /// Ranges a jump widened back to the write point, (before, after): a write that would
    /// have reached into one left the slots before it unwritten, holding an older lap's
    /// chunks, and they are kept with it (the mark's entry says so; see `mark.rs`), so
    /// that a reader's lap never holds older chunks between newer ones.
    widened: Vec<(Range, Range)>,
    /// Slots the write point has jumped over, all told (kept ones, and the fewer than a
    /// write's left unwritten before them): a ring position less this counts the slots
    /// written, which a mark's room and the member's recent rate go by.
    jumped: u64,
}

/// How far the write point at `slot` jumps to pass kept `range`, in a lap of `lap` slots,
/// if a write of `count` slots from it would touch the range; and the slots it leaves
/// unwritten before the range (a write point short of it).
fn jump_distance((first, kept): Range, slot: u64, count: u64, lap: u64) -> Option<(u64, u64)> {
    let into = (slot + lap - first % lap) % lap;
    if into < kept {
        return Some((kept - into, 0));
    }
    let ahead = (first % lap + lap - slot) % lap;
    (ahead < count).then_some((ahead + kept, ahead))
}

impl KeptSlots {
    /// Kept slots, in lap order (tests).
    #[cfg(test)]
    pub(super) fn ranges(&self) -> &[Range] {
        &self.ranges
    }

    /// Nothing is kept.
    pub(super) fn is_empty(&self) -> bool {
        self.ranges.is_empty()
    }

    /// A mark keeps `range`; `named` where a durable entry names it already (a mark found
    /// as the recording starts), so that recovery crosses it.
    pub(super) fn keep(&mut self, range: Range, named: bool) {
        self.ranges.push(range);
        if !named {
            self.unsettled.push(range);
        }
    }

    /// `range` is kept no more (its mark released).
    pub(super) fn release(&mut self, range: Range) {
        if let Some(at) = self.ranges.iter().position(|&r| r == range) {
            self.ranges.remove(at);
        }
        self.settled(range);
    }

    /// Kept `range` is named by a durable entry now: recovery crosses it.
    pub(super) fn settled(&mut self, range: Range) {
        self.unsettled.retain(|&r| r != range);
    }

    /// The ranges jumps widened since this was last asked, (before, after).
    pub(super) fn take_widened(&mut self) -> Vec<(Range, Range)> {
        std::mem::take(&mut self.widened)
    }

    /// Slots the write point has jumped over, all told.
    pub(super) fn jumped_slots(&self) -> u64 {
        self.jumped
    }

    /// The write point went over `slots` kept (or left unwritten) slots.
    pub(super) fn jumped_over(&mut self, slots: u64) {
        self.jumped += slots;
    }

    /// How a ring write of `count` chunks lies from `slot` in laps of `lap` slots, round
    /// the kept slots (see `parts.rs`).
    pub(super) fn lay(&self, slot: u64, count: u64, lap: u64) -> Lay {
        lay_ring(slot, count, lap, &self.ranges, &self.unsettled)
    }

    /// Slots from `slot`, in lap order, before the first kept slot (a lap when none is
    /// kept): as far as a discard ahead may go.
    pub(super) fn slots_before(&self, slot: u64, lap: u64) -> u64 {
        let lap = lap.max(1);
        let slot = slot % lap;
        self.ranges
            .iter()
            .map(|&(first, _)| (first % lap + lap - slot) % lap)
            .min()
            .unwrap_or(lap)
    }

    /// The slots of a lap of `lap` slots that the ranges keep, each counted once: a mark's
    /// window that spans another kept mark keeps its slots again.
    pub(super) fn union_slots(&self, lap: u64) -> u64 {
        let mut runs: Vec<(u64, u64)> = self
            .ranges
            .iter()
            .flat_map(|&(first, count)| {
                let range = crate::recording::marks::KeptRange {
                    member: 0,
                    first_slot: first % lap,
                    slot_count: count.min(lap),
                    released: false,
                    stream_bytes: None,
                };
                range.runs(lap)
            })
            .collect();
        runs.sort_unstable();
        let mut total = 0;
        let mut reached = 0;
        for (first, count) in runs {
            let end = first + count;
            total += end.saturating_sub(first.max(reached));
            reached = reached.max(end);
        }
        total
    }

    /// The member's writes wait for a checkpoint at or past the ring position a jump took
    /// it to.
    pub(super) fn waits_for_checkpoint(&self) -> bool {
        self.barrier.is_some()
    }

    /// Where the member's writes wait for a checkpoint (tests).
    #[cfg(test)]
    pub(super) fn barrier(&self) -> Option<u64> {
        self.barrier
    }

    /// Holds the member's writes until a durable checkpoint puts it at `position`.
    pub(super) fn hold_at(&mut self, position: u64) {
        self.barrier = Some(position);
        self.barrier_passed = false;
    }

    /// A checkpoint is built that puts the member at ring position `at`. Returns whether
    /// it still holds writes the member made before a jump it waits on (recovery could not
    /// find those past it).
    pub(super) fn checkpoint_at(&mut self, at: u64) -> bool {
        let Some(barrier) = self.barrier else {
            return false;
        };
        self.barrier_passed = at >= barrier;
        !self.barrier_passed
    }

    /// The checkpoint last built is durable: where it put the member past the barrier,
    /// its writes go on.
    pub(super) fn checkpoint_durable(&mut self) {
        if self.barrier_passed {
            self.barrier = None;
            self.barrier_passed = false;
        }
    }

    /// From ring position `position` in laps of `lap` slots: the end of each kept range it
    /// stands in, in turn. Returns where the write point goes, and whether a range it left
    /// was unsettled.
    pub(super) fn jump_out(&self, mut position: u64, lap: u64) -> (u64, bool) {
        let mut unsettled = false;
        for _ in 0..=self.ranges.len() {
            let slot = position % lap;
            let Some((&range, distance)) =
                self.ranges
                    .iter()
                    .find_map(|range| match jump_distance(*range, slot, 1, lap) {
                        Some((distance, 0)) => Some((range, distance)),
                        _ => None,
                    })
            else {
                break;
            };
            unsettled |= self.unsettled.contains(&range);
            position += distance;
        }
        (position, unsettled)
    }

    /// From ring position `position` in laps of `lap` slots: past every kept range a write
    /// of `count` slots from it would touch, widening one it stopped short of back over the
    /// slots left unwritten (noted for [`KeptSlots::take_widened`]). Returns where the write
    /// point goes, and whether a range it jumped was unsettled.
    pub(super) fn jump_widening(&mut self, mut position: u64, count: u64, lap: u64) -> (u64, bool) {
        let mut unsettled = false;
        for _ in 0..=self.ranges.len() {
            let slot = position % lap;
            let Some((index, distance, short)) = self
                .ranges
                .iter()
                .enumerate()
                .filter_map(|(index, &range)| {
                    jump_distance(range, slot, count, lap).map(|(d, s)| (index, d, s))
                })
                .min_by_key(|&(_, distance, _)| distance)
            else {
                break;
            };
            let named = !self.unsettled.contains(&self.ranges[index]);
            unsettled |= !named;
            if short > 0 {
                self.widen(index, short, lap, named);
            }
            position += distance;
        }
        (position, unsettled)
    }

    /// Widens range `index` back over the `short` slots before it, left unwritten.
    /// Recovery crosses those too: fewer than a write's.
    fn widen(&mut self, index: usize, short: u64, lap: u64, named: bool) {
        let (first, kept) = self.ranges[index];
        let widened = ((first % lap + lap - short) % lap, kept + short);
        self.widened.push((self.ranges[index], widened));
        if !named {
            self.unsettled.retain(|&range| range != self.ranges[index]);
            self.unsettled.push(widened);
        }
        self.ranges[index] = widened;
    }

    /// The ranges not yet named by a durable entry (tests).
    #[cfg(test)]
    pub(super) fn unsettled(&self) -> &[Range] {
        &self.unsettled
    }

    /// The ranges jumps widened, not yet taken (tests).
    #[cfg(test)]
    pub(super) fn widened(&self) -> &[(Range, Range)] {
        &self.widened
    }
}

#[cfg(test)]
mod tests {
    use super::KeptSlots;

    fn kept(ranges: &[(u64, u64)], named: bool) -> KeptSlots {
        let mut kept = KeptSlots::default();
        for &range in ranges {
            kept.keep(range, named);
        }
        kept
    }

    #[test]
    fn a_write_point_in_kept_slots_goes_to_their_end_and_one_short_of_them_stays() {
        let kept = kept(&[(40, 10), (50, 5), (95, 10)], true);
        assert_eq!(kept.jump_out(42, 100), (55, false), "two ranges end to end");
        assert_eq!(kept.jump_out(39, 100), (39, false));
        // The third wraps over the lap's end: from slot 97 of lap 2 to slot 5 of lap 3.
        assert_eq!(kept.jump_out(297, 100), (305, false));
        let unnamed = self::kept(&[(40, 10)], false);
        assert_eq!(unnamed.jump_out(140, 100), (150, true));
    }

    #[test]
    fn a_write_that_must_lie_in_one_run_jumps_the_range_ahead_and_widens_it() {
        let mut kept = kept(&[(95, 10)], false);
        assert_eq!(kept.jump_widening(94, 2, 100), (105, true));
        assert_eq!(kept.ranges(), &[(94, 11)]);
        assert_eq!(kept.unsettled(), &[(94, 11)], "still not named");
        assert_eq!(kept.take_widened(), vec![((95, 10), (94, 11))]);
        assert!(kept.take_widened().is_empty(), "taken once");
        // A write that ends before the range touches nothing.
        let mut named = self::kept(&[(40, 10)], true);
        assert_eq!(named.jump_widening(30, 10, 100), (30, false));
        assert_eq!(named.jump_widening(31, 10, 100), (50, false));
        assert_eq!(named.ranges(), &[(31, 19)]);
        assert!(named.unsettled().is_empty());
    }

    #[test]
    fn writes_held_at_a_jump_go_on_once_a_durable_checkpoint_puts_the_member_past_it() {
        let mut kept = KeptSlots::default();
        assert!(!kept.checkpoint_at(0), "nothing held");
        kept.hold_at(150);
        assert!(kept.waits_for_checkpoint());
        assert!(
            kept.checkpoint_at(120),
            "writes before the jump not covered"
        );
        kept.checkpoint_durable();
        assert_eq!(kept.barrier(), Some(150));
        assert!(!kept.checkpoint_at(150));
        assert!(kept.waits_for_checkpoint(), "built, not durable yet");
        kept.checkpoint_durable();
        assert!(!kept.waits_for_checkpoint());
    }

    #[test]
    fn a_released_range_is_neither_kept_nor_waited_on() {
        let mut kept = kept(&[(40, 10), (60, 5)], false);
        kept.release((40, 10));
        assert_eq!(kept.ranges(), &[(60, 5)]);
        assert_eq!(kept.unsettled(), &[(60, 5)]);
        kept.settled((60, 5));
        assert!(kept.unsettled().is_empty());
        assert_eq!(kept.ranges(), &[(60, 5)]);
    }

    #[test]
    fn kept_slots_are_counted_once_where_ranges_overlap_or_wrap() {
        let union = |ranges: &[(u64, u64)]| kept(ranges, true).union_slots(100);
        assert_eq!(union(&[]), 0);
        assert_eq!(union(&[(10, 5), (40, 10)]), 15);
        // A mark's window that spans another's kept slots keeps them again.
        assert_eq!(union(&[(10, 5), (5, 20)]), 20);
        // A range that wraps past the lap's end; one at a position a lap on.
        assert_eq!(union(&[(95, 10), (2, 1)]), 10);
        assert_eq!(union(&[(195, 10)]), 10);
        assert_eq!(union(&[(0, 300)]), 100);
    }

    #[test]
    fn a_discard_ahead_stops_before_the_first_kept_slot_in_lap_order() {
        let kept = kept(&[(90, 20), (5, 10)], true);
        assert_eq!(kept.slots_before(80, 100), 10);
        assert_eq!(
            kept.slots_before(96, 100),
            9,
            "the next range ahead in lap order"
        );
        assert_eq!(KeptSlots::default().slots_before(7, 100), 100);
    }

    #[test]
    fn jumps_are_counted_all_told() {
        let mut kept = KeptSlots::default();
        kept.jumped_over(3);
        kept.jumped_over(10);
        assert_eq!(kept.jumped_slots(), 13);
    }
}
