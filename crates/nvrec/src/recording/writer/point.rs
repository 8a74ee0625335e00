//! A member's write point: the slot and lap the next write takes, the slots a lap (or a
//! linear recording) may use, where the recording began on the member, how far a ring's
//! discard ahead has gone, the limit no write reaches past (data the set keeps), and, in a
//! linear recording, where its writes that the durable frontier passed end. It owns these;
//! the member moves it as writes go out and jumps are made. Tested without a member, a
//! writer or a disk.

use crate::layout::MemberPosition;

#[derive(Debug, Default, Clone)]
pub(super) struct WritePoint {
    /// The slot the next write takes. In a ring it may stand at `lap_slots` (a checkpoint's
    /// position at the lap's end): slot 0 of the next lap.
    slot: u64,
    lap: u64,
    /// Slots a lap uses (ring), or the recording may (linear): whole writes only, and one
    /// slot kept for the end-of-recording chunk.
    lap_slots: u64,
    /// Data slots on the member.
    data_slots: u64,
    /// Where the recording began on this member.
    start: MemberPosition,
    /// A ring's discard ahead of the write point reached this slot of the current lap.
    trimmed_to: u64,
    /// A recording that reclaims (see `reclaim.rs`): the ring position no write may reach
    /// past, where data the set still holds begins. A linear recording added to a set with
    /// kept marks: the slot its writes may not reach (see [`WritePoint::keep_out_of`]).
    limit: Option<u64>,
    /// Linear: just past this member's last write that the durable frontier has passed.
    frontier_end: u64,
}

impl WritePoint {
    /// The write point of a member of `data_slots` data slots, `k` chunks a write, as a
    /// recording starts on it at `position`.
    pub(super) fn new(position: MemberPosition, data_slots: u64, k: u64) -> WritePoint {
        WritePoint {
            slot: position.next_slot_index,
            lap: position.lap,
            lap_slots: data_slots.saturating_sub(1) / k * k,
            data_slots,
            start: position,
            trimmed_to: position.next_slot_index,
            limit: None,
            frontier_end: position.next_slot_index,
        }
    }

    /// A write point at slot 0 of lap 0 in laps of `lap_slots` (tests).
    #[cfg(test)]
    pub(super) fn with_lap(lap_slots: u64) -> WritePoint {
        WritePoint {
            lap_slots,
            data_slots: lap_slots + 1,
            ..WritePoint::default()
        }
    }

    /// Puts the write point at `slot` of `lap` (tests).
    #[cfg(test)]
    pub(super) fn set(&mut self, slot: u64, lap: u64) {
        (self.slot, self.lap) = (slot, lap);
    }

    /// The slot the next write takes.
    pub(super) fn slot(&self) -> u64 {
        self.slot
    }

    /// The lap it is in.
    pub(super) fn lap(&self) -> u64 {
        self.lap
    }

    /// Slots a lap uses (a ring), or the recording may (linear).
    pub(super) fn lap_slots(&self) -> u64 {
        self.lap_slots
    }

    /// Data slots on the member.
    pub(super) fn data_slots(&self) -> u64 {
        self.data_slots
    }

    /// Where it stands, as a checkpoint says.
    pub(super) fn here(&self) -> MemberPosition {
        MemberPosition::at(self.slot, self.lap)
    }

    /// Where the recording began on this member.
    pub(super) fn start(&self) -> MemberPosition {
        self.start
    }

    /// Where the next ring write starts, counted in slots from the start of lap 0 (lap x
    /// lap's slots + slot), and the lap and slot that is.
    pub(super) fn ring_next(&self) -> (u64, u64, u64) {
        let (lap, slot) = match self.slot >= self.lap_slots {
            true => (self.lap + 1, 0),
            false => (self.lap, self.slot),
        };
        (lap * self.lap_slots + slot, lap, slot)
    }

    /// Before a ring write: a position at the end of the lap is slot 0 of the next.
    pub(super) fn onto_ring_next(&mut self) {
        let (_, lap, slot) = self.ring_next();
        self.enter_lap(lap);
        self.slot = slot;
    }

    /// Moves the write point from ring position `from` to `to`, if that is elsewhere.
    pub(super) fn go_to(&mut self, from: u64, to: u64) {
        if to != from {
            (self.lap, self.slot) = (to / self.lap_slots, to % self.lap_slots);
        }
    }

    /// A ring write taking `extent` positions from the write point went out.
    pub(super) fn ring_wrote(&mut self, extent: u64) {
        let lap_slots = self.lap_slots.max(1);
        let end = self.ring_next().0 + extent;
        self.enter_lap(end / lap_slots);
        self.slot = end % lap_slots;
    }

    /// A linear write of `count` slots from `first` went out.
    pub(super) fn linear_wrote(&mut self, first: u64, count: u64) {
        self.slot = first + count;
    }

    /// The write point is in `lap` now: a discard ahead starts again from its slot 0.
    fn enter_lap(&mut self, lap: u64) {
        if lap != self.lap {
            self.trimmed_to = 0;
        }
        self.lap = lap;
    }

    /// The write point jumped (over kept slots): nothing before it is to be discarded.
    pub(super) fn jumped(&mut self) {
        self.trimmed_to = self.slot;
    }

    /// Nothing is written here yet, and the write point moved (out of kept slots): the
    /// recording begins where it stands.
    pub(super) fn begin_here(&mut self) {
        self.start = self.here();
        self.trimmed_to = self.slot;
    }

    /// A linear recording added to a set whose marks keep slots (`kept`, runs of the
    /// member's slots): it begins past any run its position stands in, and its writes end
    /// before the next run ahead, less the slot kept for the end marker. The marks' slots
    /// are taken: nothing is written over them.
    pub(super) fn keep_out_of(&mut self, kept: &[(u64, u64)]) {
        while let Some(&(first, count)) = kept
            .iter()
            .find(|&&(first, count)| (first..first + count).contains(&self.slot))
        {
            self.slot = first + count;
        }
        self.start.next_slot_index = self.slot;
        self.trimmed_to = self.slot;
        self.frontier_end = self.slot;
        let ahead = kept
            .iter()
            .map(|&(first, _)| first)
            .filter(|&first| first > self.slot)
            .min();
        if let Some(first) = ahead {
            self.limit = Some(first - 1);
        }
    }

    /// The limit no write reaches past, if there is one (a ring position in a ring, a slot
    /// in a linear recording).
    pub(super) fn limit(&self) -> Option<u64> {
        self.limit
    }

    /// No write reaches past ring position `position` (see `reclaim.rs`).
    pub(super) fn limit_to(&mut self, position: u64) {
        self.limit = Some(position);
    }

    /// Linear: one past the last slot the recording's writes may take on this member (the
    /// end of its usable slots, or its limit before a kept mark); the end marker may go
    /// one slot further.
    pub(super) fn linear_end_slot(&self) -> u64 {
        self.limit
            .map_or(self.lap_slots, |limit| limit.min(self.lap_slots))
    }

    /// Where this member's ring started, as a limit counts from it: its lap's slots, and
    /// the lap and slot (a start at the lap's end is the next lap's slot 0).
    pub(super) fn ring_start(&self) -> (u64, u64, u64) {
        let lap = self.lap_slots.max(1);
        match self.start.next_slot_index >= lap {
            true => (lap, self.start.lap + 1, 0),
            false => (lap, self.start.lap, self.start.next_slot_index),
        }
    }

    /// Slots from slot 0 of lap 0 to the write point as it stands (at a lap's end, not yet
    /// on in the next).
    pub(super) fn position(&self) -> u64 {
        self.lap * self.lap_slots + self.slot
    }

    /// How far along its slots the write point is, in laps.
    pub(super) fn along(&self) -> f64 {
        (self.lap as f64 * self.lap_slots as f64 + self.slot as f64) / self.lap_slots.max(1) as f64
    }

    /// A ring that went round past where it began (its writes or its discards ahead): it
    /// overwrote what it wrote first.
    pub(super) fn went_round(&self) -> bool {
        let laps = self.lap.saturating_sub(self.start.lap);
        let reached = self.slot.max(self.trimmed_to);
        laps >= 2 || laps == 1 && reached > self.start.next_slot_index
    }

    /// The slots a ring's discard ahead of the write point takes next, `io_slots` a write:
    /// up to `reach` slots on (recovery's room, the kept slots ahead), never the lap's last
    /// write, never a slot of the write in flight oldest at ring position `oldest`; none
    /// while less than a write is left to discard.
    pub(super) fn discard_next(
        &self,
        io_slots: u64,
        reach: u64,
        oldest: Option<u64>,
    ) -> Option<(u64, u64)> {
        let mut to = (self.slot + reach).min(self.lap_slots.saturating_sub(io_slots));
        if let Some(oldest) = oldest {
            let lap_start = self.lap * self.lap_slots;
            to = to.min((oldest + self.lap_slots).saturating_sub(lap_start));
        }
        if self.trimmed_to >= to.min(self.slot + io_slots) {
            return None;
        }
        let from = self.trimmed_to.max(self.slot);
        (to > from).then_some((from, to))
    }

    /// The discard ahead reached slot `to` of this lap.
    pub(super) fn discarded_to(&mut self, to: u64) {
        self.trimmed_to = to;
    }

    /// Linear: just past this member's last write that the durable frontier has passed.
    pub(super) fn frontier_end(&self) -> u64 {
        self.frontier_end
    }

    /// Linear: the durable frontier passed this member's write that ends before `end`.
    pub(super) fn frontier_passed(&mut self, end: u64) {
        self.frontier_end = self.frontier_end.max(end);
    }
}

#[cfg(test)]
mod tests {
    use super::WritePoint;
    use crate::layout::MemberPosition;

    #[test]
    fn whole_writes_and_the_end_marker_leave_the_lap_its_slots() {
        let point = WritePoint::new(MemberPosition::at(7, 2), 101, 8);
        assert_eq!((point.lap_slots(), point.data_slots()), (96, 101));
        assert_eq!(
            (point.slot(), point.lap(), point.start()),
            (7, 2, MemberPosition::at(7, 2))
        );
        assert_eq!(point.ring_next(), (2 * 96 + 7, 2, 7));
    }

    #[test]
    fn a_position_at_the_laps_end_is_slot_0_of_the_next_and_a_new_lap_is_discarded_anew() {
        let mut point = WritePoint::with_lap(100);
        point.set(100, 0);
        assert_eq!(point.ring_next(), (100, 1, 0));
        point.discarded_to(40);
        point.onto_ring_next();
        assert_eq!(point.here(), MemberPosition::at(0, 1));
        assert_eq!(
            point.discard_next(4, 8, None),
            Some((0, 8)),
            "from slot 0 again"
        );
        point.ring_wrote(104);
        assert_eq!(point.here(), MemberPosition::at(4, 2));
        point.go_to(204, 230);
        assert_eq!(point.here(), MemberPosition::at(30, 2));
        point.jumped();
        assert_eq!(point.discard_next(4, 8, None), Some((30, 38)));
    }

    #[test]
    fn a_discard_ahead_stops_before_the_laps_last_write_and_a_write_in_flight() {
        let mut point = WritePoint::with_lap(100);
        point.set(90, 1);
        assert_eq!(point.discard_next(4, 32, None), Some((90, 96)));
        point.discarded_to(96);
        assert_eq!(
            point.discard_next(4, 32, None),
            None,
            "done to the lap's last write"
        );
        point.set(10, 1);
        point.discarded_to(10);
        // The oldest write in flight is at ring position 30 of lap 0: slot 30 of lap 1 is
        // as far as a discard may go.
        assert_eq!(point.discard_next(4, 32, Some(30)), Some((10, 30)));
        assert_eq!(
            point.discard_next(4, 2, None),
            Some((10, 12)),
            "as far as room goes"
        );
        point.discarded_to(12);
        assert_eq!(
            point.discard_next(4, 2, None),
            None,
            "nothing more within it"
        );
    }

    #[test]
    fn a_linear_recording_keeps_out_of_kept_slots_and_ends_before_the_next() {
        let mut point = WritePoint::new(MemberPosition::at(12, 0), 1001, 8);
        point.keep_out_of(&[(10, 5), (15, 5), (400, 20)]);
        assert_eq!(
            (point.slot(), point.start()),
            (20, MemberPosition::at(20, 0))
        );
        assert_eq!(point.limit(), Some(399));
        assert_eq!(point.linear_end_slot(), 399);
        assert_eq!(point.frontier_end(), 20);
        point.frontier_passed(28);
        point.frontier_passed(24);
        assert_eq!(point.frontier_end(), 28);
        point.linear_wrote(20, 8);
        assert_eq!(point.slot(), 28);
    }

    #[test]
    fn a_ring_went_round_once_past_its_start_by_writes_or_discards() {
        let mut point = WritePoint::new(MemberPosition::at(50, 0), 101, 1);
        point.set(40, 1);
        assert!(!point.went_round());
        point.discarded_to(60);
        assert!(point.went_round(), "discarded past where it began");
        let mut point = WritePoint::new(MemberPosition::at(100, 0), 101, 1);
        assert_eq!(point.ring_start(), (100, 1, 0), "a start at the lap's end");
        point.limit_to(150);
        assert_eq!(point.limit(), Some(150));
        point.begin_here();
        assert_eq!(point.start(), MemberPosition::at(100, 0));
        assert!((point.along() - 1.0).abs() < 1e-9);
    }
}
