//! Where a write's chunks lie on its member: runs of slots, one I/O each (its parts).
//!
//! A linear write is one run. A ring write goes on at slot 0 where its lap ends, and round
//! the slots marks keep, so that every lap writes every slot no mark keeps, in order: a
//! reader's lap never holds an older chunk between newer ones, and no kept range is ever
//! widened over slots a write left behind. This stage owns nothing but arithmetic; it is
//! tested without a writer or a disk.

/// The most I/Os one write may take. A write that would need more (kept ranges a few slots
/// apart) is laid out otherwise (see `MemberState::jump_kept`).
pub(super) const PARTS_MAX: usize = 4;

/// One I/O of a write: (first slot, first chunk of the buffer, chunk count).
pub(super) type Part = (u64, u32, u32);

/// A write's I/Os, in the order of its chunks, kept on the stack.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(super) struct Parts {
    all: [Part; PARTS_MAX],
    count: u8,
}

impl Parts {
    /// One run of `chunk_count` slots from `slot`.
    pub(super) fn one(slot: u64, chunk_count: u32) -> Parts {
        let mut parts = Parts::default();
        parts.push(slot, chunk_count);
        parts
    }

    /// Adds a run of `count` chunks at `slot` after the others; false when full.
    fn push(&mut self, slot: u64, count: u32) -> bool {
        if self.count as usize == PARTS_MAX {
            return false;
        }
        let first_chunk = self.chunk_count();
        self.all[self.count as usize] = (slot, first_chunk, count);
        self.count += 1;
        true
    }

    #[inline]
    pub(super) fn as_slice(&self) -> &[Part] {
        &self.all[..self.count as usize]
    }

    pub(super) fn len(&self) -> usize {
        self.count as usize
    }

    pub(super) fn chunk_count(&self) -> u32 {
        self.as_slice().iter().map(|&(_, _, count)| count).sum()
    }

    pub(super) fn first_slot(&self) -> u64 {
        self.all[0].0
    }

    /// The slot chunk `index` of the write lies in.
    #[inline]
    pub(super) fn slot_of(&self, index: u32) -> u64 {
        self.as_slice()
            .iter()
            .find(|&&(_, first, count)| index < first + count)
            .map_or(u64::MAX, |&(slot, first, _)| slot + (index - first) as u64)
    }

    /// Every chunk's slot, in chunk order.
    pub(super) fn slots(&self) -> Vec<u64> {
        self.as_slice()
            .iter()
            .flat_map(|&(slot, _, count)| slot..slot + count as u64)
            .collect()
    }

    /// The write's chunks from `skip` on, as a write of their own.
    pub(super) fn rest_after(&self, skip: u32) -> Parts {
        let mut rest = Parts::default();
        for &(slot, first, count) in self.as_slice() {
            let end = first + count;
            if end <= skip {
                continue;
            }
            let drop = skip.saturating_sub(first);
            rest.push(slot + drop as u64, count - drop);
        }
        rest
    }

    /// The ring position of chunk `index`, for a write whose first chunk lies at ring
    /// position `first_position` in laps of `lap` slots (a write takes less than a lap).
    pub(super) fn position_of(&self, index: u32, first_position: u64, lap: u64) -> u64 {
        let lap = lap.max(1);
        first_position + (self.slot_of(index) % lap + lap - self.first_slot() % lap) % lap
    }
}

/// How a ring write of some chunks lies from the write point.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Lay {
    /// Its parts; `lead`, the kept slots between the write point and its first chunk; and
    /// `extent`, the ring positions it takes from the write point, kept ones included.
    At {
        parts: Parts,
        lead: u64,
        extent: u64,
    },
    /// It would go round kept slots that no durable entry names yet: recovery, which
    /// searches forward from a checkpoint, could not find what it writes past them.
    Unsettled,
    /// It would take more than [`PARTS_MAX`] I/Os.
    Scattered,
}

/// A ring write of `count` chunks from `slot`, in laps of `lap` slots, round the `kept`
/// ranges (first slot, slot count; a range may wrap past the lap's end), of which those in
/// `unsettled` may not be gone round.
pub(super) fn lay_ring(
    slot: u64,
    count: u64,
    lap: u64,
    kept: &[(u64, u64)],
    unsettled: &[(u64, u64)],
) -> Lay {
    let lap = lap.max(1);
    let mut parts = Parts::default();
    let (mut offset, mut chunk, mut lead) = (0u64, 0u64, 0u64);
    while chunk < count {
        if offset >= lap {
            // Kept slots fill the lap: the write cannot go round them.
            return Lay::Scattered;
        }
        let at = (slot + offset) % lap;
        if let Some(range) = kept.iter().find(|&&range| within(range, at, lap)) {
            if unsettled.contains(range) {
                return Lay::Unsettled;
            }
            let skip = range.1 - (at + lap - range.0 % lap) % lap;
            offset += skip;
            if chunk == 0 {
                lead += skip;
            }
            continue;
        }
        let free = kept
            .iter()
            .map(|&(first, _)| (first % lap + lap - at) % lap)
            .min()
            .unwrap_or(lap);
        let run = (count - chunk).min(lap - at).min(free);
        if !parts.push(at, run as u32) {
            return Lay::Scattered;
        }
        chunk += run;
        offset += run;
    }
    Lay::At {
        parts,
        lead,
        extent: offset,
    }
}

/// Whether `slot` lies in kept `range` (first slot, slot count) of a lap of `lap` slots.
fn within((first, count): (u64, u64), slot: u64, lap: u64) -> bool {
    (slot + lap - first % lap) % lap < count
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(lay: Lay) -> (Vec<Part>, u64, u64) {
        match lay {
            Lay::At {
                parts,
                lead,
                extent,
            } => (parts.as_slice().to_vec(), lead, extent),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn a_write_with_nothing_kept_is_one_run_or_goes_on_at_slot_0() {
        assert_eq!(at(lay_ring(10, 8, 100, &[], &[])), (vec![(10, 0, 8)], 0, 8));
        assert_eq!(
            at(lay_ring(96, 8, 100, &[], &[])),
            (vec![(96, 0, 4), (0, 4, 4)], 0, 8)
        );
    }

    #[test]
    fn a_write_goes_round_kept_slots_leaving_none_unwritten_before_them() {
        // From 37, a write of 8 meets the range at 40: three before it, five after it.
        let (parts, lead, extent) = at(lay_ring(37, 8, 100, &[(40, 10)], &[]));
        assert_eq!(parts, vec![(37, 0, 3), (50, 3, 5)]);
        assert_eq!((lead, extent), (0, 18));
        // Round a range at the lap's end, on at slot 0, and round one there too.
        let kept = [(98, 2), (0, 3)];
        let (parts, _, extent) = at(lay_ring(95, 8, 100, &kept, &[]));
        assert_eq!(parts, vec![(95, 0, 3), (3, 3, 5)]);
        assert_eq!(extent, 13);
        // A range that wraps past the lap's end.
        let (parts, _, _) = at(lay_ring(90, 8, 100, &[(95, 10)], &[]));
        assert_eq!(parts, vec![(90, 0, 5), (5, 5, 3)]);
    }

    #[test]
    fn a_write_point_in_a_kept_range_begins_past_it() {
        let (parts, lead, extent) = at(lay_ring(42, 4, 100, &[(40, 10)], &[]));
        assert_eq!((parts, lead, extent), (vec![(50, 0, 4)], 8, 12));
    }

    #[test]
    fn ranges_no_entry_names_yet_are_not_gone_round() {
        assert_eq!(
            lay_ring(37, 8, 100, &[(40, 10)], &[(40, 10)]),
            Lay::Unsettled
        );
        // One the write does not reach is no matter.
        assert!(matches!(
            lay_ring(20, 8, 100, &[(40, 10)], &[(40, 10)]),
            Lay::At { .. }
        ));
    }

    #[test]
    fn more_parts_than_a_write_may_take_is_said_so() {
        let kept = [(11, 1), (13, 1), (15, 1), (17, 1)];
        assert_eq!(lay_ring(10, 8, 100, &kept, &[]), Lay::Scattered);
        assert_eq!(lay_ring(0, 1, 10, &[(0, 10)], &[]), Lay::Scattered);
    }

    #[test]
    fn the_parts_name_each_chunk_s_slot_and_position() {
        let Lay::At { parts, .. } = lay_ring(96, 8, 100, &[(1, 2)], &[]) else {
            panic!("laid out");
        };
        assert_eq!(parts.slots(), vec![96, 97, 98, 99, 0, 3, 4, 5]);
        assert_eq!(parts.slot_of(5), 3);
        assert_eq!(parts.chunk_count(), 8);
        assert_eq!(parts.position_of(0, 196, 100), 196);
        assert_eq!(parts.position_of(5, 196, 100), 203);
        let rest = parts.rest_after(5);
        assert_eq!(rest.as_slice(), &[(3, 0, 3)]);
        assert_eq!(parts.rest_after(2).slots(), vec![98, 99, 0, 3, 4, 5]);
        assert_eq!(Parts::one(7, 2).slots(), vec![7, 8]);
    }
}
