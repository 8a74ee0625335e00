//! Striping: which member the next write goes to (adaptive, by expected finish time, or
//! round-robin), among the live members with room.

use super::place::{MemberState, Placement, ADAPTIVE_PROBE_INTERVAL};
use super::*;

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
        let has_room = |member: &MemberState| {
            !member.retired
                && match fill {
                    Fill::Linear => member.next_slot + chunk_count as u64 <= member.usable_slots,
                    Fill::Ring { .. } => member.usable_slots >= chunk_count as u64,
                }
        };
        let ring = matches!(fill, Fill::Ring { .. });
        // A member takes the write now if its queue has room and, in a ring, the write
        // touches no slot still being written.
        let can_take = |member: &MemberState| member.can_take(chunk_count as u64, ring);
        if self.members.iter().all(|member| !has_room(member)) {
            self.full = true;
            return None;
        }
        match stripe {
            Stripe::RoundRobin => {
                // Members in turn; a full one is skipped, a busy one is waited for.
                let count = self.members.len();
                for step in 0..count {
                    let index = (self.rr_next + step) % count;
                    if has_room(&self.members[index]) {
                        if can_take(&self.members[index]) {
                            self.rr_next = index + 1;
                            return Some(index);
                        }
                        return None;
                    }
                }
                None
            }
            Stripe::Adaptive => {
                // The member that would finish this I/O soonest: its queue (plus this I/O)
                // over the rate it has been writing at. A member whose queue is full wins by
                // being waited for, so that a slow member never fills up with work a fast
                // one would finish first. Until rates are known, the shortest queue; ties
                // rotate.
                let count = self.members.len();
                // Light load: when every member that has room is idle, any of them finishes
                // the write at once (and rates measured on a trickle of writes say little).
                // The one least far along takes it, so that members fill evenly and, in a
                // ring, lap together: a ring keeps only what is newer than the oldest chunk
                // of the member that laps fastest.
                let all_idle = self
                    .members
                    .iter()
                    .filter(|member| has_room(member))
                    .all(|member| member.in_flight == 0);
                if all_idle {
                    let along = |member: &MemberState| {
                        (member.lap as f64 * member.usable_slots as f64 + member.next_slot as f64)
                            / member.usable_slots.max(1) as f64
                    };
                    let least = (0..count)
                        .map(|step| (self.rr_next + step) % count)
                        .filter(|&index| has_room(&self.members[index]))
                        .min_by(|&a, &b| {
                            along(&self.members[a]).total_cmp(&along(&self.members[b]))
                        });
                    if let Some(index) = least {
                        if can_take(&self.members[index]) {
                            self.rr_next = index + 1;
                            return Some(index);
                        }
                    }
                }
                let probe = (0..count)
                    .map(|step| (self.rr_next + step) % count)
                    .find(|&index| {
                        let member = &self.members[index];
                        has_room(member)
                            && member.in_flight == 0
                            && can_take(member)
                            && member.idle_since.is_some_and(|since| {
                                now.saturating_duration_since(since) >= ADAPTIVE_PROBE_INTERVAL
                            })
                    });
                if let Some(index) = probe {
                    self.rr_next = index + 1;
                    return Some(index);
                }
                let known_max = self
                    .members
                    .iter()
                    .filter_map(|m| m.rate(now))
                    .fold(0.0f64, f64::max);
                let mut best: Option<(usize, f64)> = None;
                for step in 0..count {
                    let index = (self.rr_next + step) % count;
                    let member = &self.members[index];
                    if !has_room(member) {
                        continue;
                    }
                    let rate =
                        member
                            .rate(now)
                            .unwrap_or(if known_max > 0.0 { known_max } else { 1.0 });
                    let finish = (member.in_flight as f64 + 1.0) / rate;
                    if best.is_none_or(|(_, b)| finish < b) {
                        best = Some((index, finish));
                    }
                }
                let (index, _) = best?;
                if !can_take(&self.members[index]) {
                    return None;
                }
                self.rr_next = index + 1;
                Some(index)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn member(usable_slots: u64) -> MemberState {
        MemberState {
            usable_slots,
            data_slot_count: usable_slots + 1,
            queue_depth: 2,
            recovery_limit_slots: 1 << 20,
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
                    member.next_slot += 4;
                    member.in_flight += 1;
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
        placement.members[1].queue_depth = 8;
        let chosen = choices(&mut placement, Stripe::RoundRobin, 3);
        assert_eq!(chosen, [Some(0), Some(1), Some(1)]);
        placement.members[1].next_slot = 100;
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
        placement.members[0].unflushed = true;
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
            member.queue_depth = 8;
            member.in_flight = 1;
            member.rate_bytes = rate_bytes;
            member.busy_ns = 1_000_000_000;
            member.busy_since = Some(now);
        }
        let chosen = placement.choose_member(4, Fill::Linear, Stripe::Adaptive, now);
        assert_eq!(
            chosen,
            Some(1),
            "three times the rate: done sooner with one more"
        );
        placement.members[1].in_flight = 6;
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
        placement.members[0].next_slot = 40; // 40 % along
        placement.members[1].next_slot = 60; // 30 % along
        let chosen = placement.choose_member(4, Fill::Linear, Stripe::Adaptive, Instant::now());
        assert_eq!(chosen, Some(1));
    }
}
