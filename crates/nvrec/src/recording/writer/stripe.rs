//! Striping: which member the next write goes to (adaptive, by expected finish time, or
//! round-robin), among the live members with room.

use super::*;

impl Writer<'_> {
    /// The member the next I/O of `chunk_count` chunks goes to, if one has room now.
    pub(super) fn choose_member(&mut self, chunk_count: u32) -> Option<usize> {
        let has_room = |member: &MemberState| {
            !member.retired
                && match self.options.fill {
                    Fill::Linear => member.next_slot + chunk_count as u64 <= member.usable_slots,
                    Fill::Ring { .. } => member.usable_slots >= chunk_count as u64,
                }
        };
        let ring = matches!(self.options.fill, Fill::Ring { .. });
        // A member takes the write now if its queue has room and, in a ring, the write
        // touches no slot still being written.
        let can_take = |member: &MemberState| member.can_take(chunk_count as u64, ring);
        if self.members.iter().all(|member| !has_room(member)) {
            self.full = true;
            return None;
        }
        match self.options.stripe {
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
                let now = self.clock.now();
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
