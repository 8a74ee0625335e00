//! Striping: which member the next write goes to (adaptive, by expected finish time, or
//! round-robin), among the live members with room.

use super::member::MemberState;
use super::place::Placement;
use crate::recording::Fill;
use crate::recording::Stripe;
use std::time::Duration;
use std::time::Instant;

/// A member idle this long while adaptive striping sends elsewhere gets the next I/O: its
/// rate estimate is refreshed only by the writes it gets, and a member whose first writes
/// were slow would otherwise be left out for good.
pub(super) const ADAPTIVE_PROBE_INTERVAL: Duration = Duration::from_millis(100);

/// The write a member is chosen for: its size, on a set of this layout.
#[derive(Debug, Clone, Copy)]
struct Want {
    chunk_count: u32,
    fill: Fill,
}

impl Want {
    /// Whether `member` is live and has slots left for the write (a ring always has, once
    /// the write fits in a lap).
    #[inline]
    fn has_room(self, member: &MemberState) -> bool {
        !member.retired
            && match self.fill {
                Fill::Linear => {
                    member.point.slot() + self.chunk_count as u64 <= member.point.lap_slots()
                        && member.within_limit(self.chunk_count as u64, false)
                }
                Fill::Ring { .. } => {
                    member.point.lap_slots() >= self.chunk_count as u64
                        && member.within_limit(self.chunk_count as u64, true)
                }
            }
    }

    /// Whether `member` takes the write now: its queue has room and, in a ring, the write
    /// touches no slot still being written.
    #[inline]
    fn can_take(self, member: &MemberState) -> bool {
        let ring = matches!(self.fill, Fill::Ring { .. });
        member.can_take(self.chunk_count as u64, ring)
    }
}

impl Placement {
    /// The member the next I/O of `chunk_count` chunks goes to, if one has room now.
    /// `now` for the rate estimates; the layout and striping asked for.
    pub(super) fn choose_member(
        &mut self,
        chunk_count: u32,
        fill: Fill,
        stripe: Stripe,
        now: Instant,
    ) -> Option<usize> {
        let want = Want { chunk_count, fill };
        if self.members.iter().all(|member| !want.has_room(member)) {
            self.full = true;
            return None;
        }
        let index = match stripe {
            Stripe::RoundRobin => self.round_robin(want),
            Stripe::Adaptive => self.adaptive(want, now),
        }?;
        self.rr_next = index + 1;
        Some(index)
    }

    /// Member indexes in turn, from the one after the last chosen.
    #[inline]
    fn in_turn(&self) -> impl Iterator<Item = usize> {
        let count = self.members.len();
        let first = self.rr_next;
        (0..count).map(move |step| (first + step) % count)
    }

    /// Members in turn; a full one is skipped, a busy one is waited for.
    fn round_robin(&self, want: Want) -> Option<usize> {
        let index = self
            .in_turn()
            .find(|&index| want.has_room(&self.members[index]))?;
        want.can_take(&self.members[index]).then_some(index)
    }

    /// The member that would finish this I/O soonest: its queue (plus this I/O) over the
    /// rate it has been writing at. A member whose queue is full wins by being waited for,
    /// so that a slow member never fills up with work a fast one would finish first. Until
    /// rates are known, the shortest queue; ties rotate. Before that, under light load, the
    /// member least far along, and an idle member due for a probe of its rate.
    fn adaptive(&self, want: Want, now: Instant) -> Option<usize> {
        if let Some(index) = self.least_along_when_idle(want) {
            return Some(index);
        }
        if let Some(index) = self.due_for_probe(want, now) {
            return Some(index);
        }
        let index = self.soonest_finish(want, now)?;
        want.can_take(&self.members[index]).then_some(index)
    }

    /// Light load: when every member that has room is idle, any of them finishes the write
    /// at once (and rates measured on a trickle of writes say little). The one least far
    /// along takes it, so that members fill evenly and, in a ring, lap together: a ring
    /// keeps only what is newer than the oldest chunk of the member that laps fastest.
    fn least_along_when_idle(&self, want: Want) -> Option<usize> {
        let all_idle = self
            .members
            .iter()
            .filter(|member| want.has_room(member))
            .all(|member| member.queue.idle());
        if !all_idle {
            return None;
        }
        let along = |member: &MemberState| member.point.along();
        let least = self
            .in_turn()
            .filter(|&index| want.has_room(&self.members[index]))
            .min_by(|&a, &b| along(&self.members[a]).total_cmp(&along(&self.members[b])))?;
        want.can_take(&self.members[least]).then_some(least)
    }

    /// An idle member that has not written for [`ADAPTIVE_PROBE_INTERVAL`]: a write
    /// measures its rate again.
    fn due_for_probe(&self, want: Want, now: Instant) -> Option<usize> {
        self.in_turn().find(|&index| {
            let member = &self.members[index];
            want.has_room(member)
                && member.queue.idle()
                && want.can_take(member)
                && member
                    .queue
                    .idle_for(now)
                    .is_some_and(|idle| idle >= ADAPTIVE_PROBE_INTERVAL)
        })
    }

    /// The member with room whose queue plus this write would be done first at its rate
    /// (the fastest known rate for a member not measured yet).
    fn soonest_finish(&self, want: Want, now: Instant) -> Option<usize> {
        let known_max = self
            .members
            .iter()
            .filter_map(|m| m.queue.rate(now))
            .fold(0.0f64, f64::max);
        let mut best: Option<(usize, f64)> = None;
        for index in self.in_turn() {
            let member = &self.members[index];
            if !want.has_room(member) {
                continue;
            }
            let rate =
                member
                    .queue
                    .rate(now)
                    .unwrap_or(if known_max > 0.0 { known_max } else { 1.0 });
            let finish = (member.queue.in_flight() as f64 + 1.0) / rate;
            if best.is_none_or(|(_, b)| finish < b) {
                best = Some((index, finish));
            }
        }
        best.map(|(index, _)| index)
    }
}

#[cfg(test)]
mod tests {
    use super::super::point::WritePoint;
    use super::super::queue::MemberQueue;
    use super::super::rate::Rate;
    use super::super::reach::RecoveryReach;
    use super::*;
    use std::time::Duration;

    fn member(usable_slots: u64) -> MemberState {
        MemberState {
            point: WritePoint::with_lap(usable_slots),
            queue: MemberQueue::new(2),
            reach: RecoveryReach::with(1 << 20, 0),
            ..MemberState::default()
        }
    }

    fn placement(sizes: &[u64]) -> Placement {
        Placement::new(sizes.iter().map(|&size| member(size)).collect(), 0)
    }

    /// Which member each of `count` writes of `chunks` goes to (each taken as submitted:
    /// the slots move on, nothing completes).
    fn choices(placement: &mut Placement, stripe: Stripe, count: usize) -> Vec<Option<usize>> {
        let now = Instant::now();
        (0..count)
            .map(|_| {
                let chosen = placement.choose_member(4, Fill::Linear, stripe, now);
                if let Some(index) = chosen {
                    let member = &mut placement.members[index];
                    let slot = member.point.slot();
                    member.point.set(slot + 4, 0);
                    member.queue.submitted(0, (0, 4), now);
                }
                chosen
            })
            .collect()
    }

    #[test]
    fn round_robin_takes_members_in_turn_and_waits_for_a_busy_one() {
        let mut placement = placement(&[100, 100, 100]);
        let chosen = choices(&mut placement, Stripe::RoundRobin, 7);
        assert_eq!(
            chosen,
            [Some(0), Some(1), Some(2), Some(0), Some(1), Some(2), None],
            "each member takes two (its queue depth), then the next in turn is waited for"
        );
        assert!(!placement.full);
    }

    #[test]
    fn a_full_member_is_skipped_and_all_full_says_so() {
        let mut placement = placement(&[4, 100]);
        placement.members[1].queue = MemberQueue::new(8);
        let chosen = choices(&mut placement, Stripe::RoundRobin, 3);
        assert_eq!(chosen, [Some(0), Some(1), Some(1)]);
        placement.members[1].point.set(100, 0);
        assert_eq!(choices(&mut placement, Stripe::RoundRobin, 1), [None]);
        assert!(placement.full, "no member has room");
    }

    #[test]
    fn a_retired_member_takes_nothing() {
        let mut placement = placement(&[100, 100]);
        placement.members[0].retired = true;
        let chosen = choices(&mut placement, Stripe::Adaptive, 2);
        assert_eq!(chosen, [Some(1), Some(1)]);
        assert_eq!(placement.live(), [false, true]);
        placement.members[0].flushes.retired(false);
        assert_eq!(
            placement.flush_set(),
            [true, true],
            "retired, not flushed since"
        );
    }

    #[test]
    fn adaptive_striping_sends_to_the_member_that_finishes_soonest() {
        let mut placement = placement(&[1000, 1000]);
        let now = Instant::now();
        for (index, rate_bytes) in [(0, 100_000_000u64), (1, 300_000_000)] {
            let member = &mut placement.members[index];
            member.queue = MemberQueue::new(8);
            member.queue.set_in_flight(1);
            member
                .queue
                .set_rate(Rate::measured(rate_bytes, Duration::from_secs(1), now));
        }
        let chosen = placement.choose_member(4, Fill::Linear, Stripe::Adaptive, now);
        assert_eq!(
            chosen,
            Some(1),
            "three times the rate: done sooner with one more"
        );
        placement.members[1].queue.set_in_flight(6);
        let chosen = placement.choose_member(4, Fill::Linear, Stripe::Adaptive, now);
        assert_eq!(
            chosen,
            Some(0),
            "two writes at 100 MB/s end before seven at 300 MB/s"
        );
    }

    #[test]
    fn idle_members_take_writes_least_far_along_first_so_rings_lap_together() {
        let mut placement = placement(&[100, 200]);
        placement.members[0].point.set(40, 0); // 40 % along
        placement.members[1].point.set(60, 0); // 30 % along
        let chosen = placement.choose_member(4, Fill::Linear, Stripe::Adaptive, Instant::now());
        assert_eq!(chosen, Some(1));
    }
}
