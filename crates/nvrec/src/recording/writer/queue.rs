//! A member's queue: the writes it has in flight (how many, how many it may have, and in a
//! ring where each lies, in the order they went out), the chunks and I/Os it took, and the
//! rate it writes at (see `rate.rs`). It owns these; the writer tells it when a write goes
//! out and when one completes, and asks whether another may go. Tested without a member, a
//! writer or a disk.

use super::rate::Rate;
use super::ring_ranges_overlap;
use std::collections::VecDeque;
use std::time::Duration;
use std::time::Instant;

/// A write in flight: its flight number, and the ring positions it takes (first, count).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Pending {
    number: u64,
    position: u64,
    slots: u64,
}

#[derive(Debug, Default, Clone)]
pub(super) struct MemberQueue {
    /// Writes this member may have in flight.
    depth: u32,
    /// Writes (buffers) in flight on this member.
    in_flight: u32,
    /// Writes in flight, in the order they were submitted. Completions arrive in any order,
    /// and in a ring a write waits until it cannot touch a slot of any of these (see
    /// [`MemberQueue::ring_clear`]): two writes to one slot in flight together could land
    /// in either order.
    pending: VecDeque<Pending>,
    /// Chunks written here, and the I/Os they took.
    chunks: u64,
    ios: u64,
    /// The rate it writes at while busy, and since when it is idle.
    rate: Rate,
}

impl MemberQueue {
    /// A queue that takes `depth` writes in flight.
    pub(super) fn new(depth: u32) -> MemberQueue {
        MemberQueue {
            depth,
            ..MemberQueue::default()
        }
    }

    /// Writes this member may have in flight.
    pub(super) fn depth(&self) -> u32 {
        self.depth
    }

    /// Writes in flight.
    pub(super) fn in_flight(&self) -> u32 {
        self.in_flight
    }

    /// Nothing is in flight.
    pub(super) fn idle(&self) -> bool {
        self.in_flight == 0
    }

    /// Another write may go out (as far as the queue goes).
    pub(super) fn has_room(&self) -> bool {
        self.in_flight < self.depth
    }

    /// Write `number` went out at `now`, taking `slots` ring positions from `position`.
    pub(super) fn submitted(&mut self, number: u64, (position, slots): (u64, u64), now: Instant) {
        if self.in_flight == 0 {
            self.rate.busy_from(now);
        }
        self.in_flight += 1;
        self.pending.push_back(Pending {
            number,
            position,
            slots,
        });
    }

    /// `chunks` chunks in `ios` I/Os count as written here.
    pub(super) fn count(&mut self, chunks: u64, ios: u64) {
        self.chunks += chunks;
        self.ios += ios;
    }

    /// `chunks` chunks counted here landed elsewhere after all (written again there).
    pub(super) fn uncount(&mut self, chunks: u64) {
        self.chunks = self.chunks.saturating_sub(chunks);
    }

    /// Write `number`, of `bytes`, completed at `now`.
    pub(super) fn completed(&mut self, number: u64, bytes: u64, now: Instant) {
        self.in_flight -= 1;
        self.rate.completed(bytes, self.in_flight == 0, now);
        if let Some(at) = self.pending.iter().position(|p| p.number == number) {
            self.pending.remove(at);
        }
    }

    /// The member is retired: what it has in flight is no longer waited on here.
    pub(super) fn forget_pending(&mut self) {
        self.pending.clear();
    }

    /// The oldest write in flight: its number and first ring position.
    pub(super) fn oldest(&self) -> Option<(u64, u64)> {
        self.pending.front().map(|p| (p.number, p.position))
    }

    /// Whether a ring write taking `extent` positions from `position`, in laps of `lap`
    /// slots, touches no slot of a write in flight: everything in flight and the new write
    /// must lie within one lap's worth of ring positions.
    pub(super) fn ring_clear(&self, position: u64, extent: u64, lap: u64) -> bool {
        self.pending
            .front()
            .is_none_or(|p| position + extent <= p.position + lap)
    }

    /// Whether a ring write taking `extent` positions from `position` overlaps one in
    /// flight, in laps of `lap` slots (a check of the placement's own rule).
    pub(super) fn overlaps(&self, position: u64, extent: u64, lap: u64) -> bool {
        self.pending
            .iter()
            .any(|p| ring_ranges_overlap((p.position, p.slots), (position, extent), lap))
    }

    /// Chunks written here, and the I/Os they took.
    pub(super) fn counts(&self) -> (u64, u64) {
        (self.chunks, self.ios)
    }

    /// How long nothing has been in flight, as of `now` (None while busy).
    pub(super) fn idle_for(&self, now: Instant) -> Option<Duration> {
        self.rate.idle_for(now)
    }

    /// Bytes per second written while busy, once something has completed.
    pub(super) fn rate(&self, now: Instant) -> Option<f64> {
        self.rate.per_s(now)
    }

    /// Sets the rate estimate (tests of the stages that read it).
    #[cfg(test)]
    pub(super) fn set_rate(&mut self, rate: Rate) {
        self.rate = rate;
    }

    /// Sets the writes in flight without any pending (tests of the stages that count them).
    #[cfg(test)]
    pub(super) fn set_in_flight(&mut self, in_flight: u32) {
        self.in_flight = in_flight;
    }
}

#[cfg(test)]
mod tests {
    use super::MemberQueue;
    use std::time::Duration;
    use std::time::Instant;

    #[test]
    fn a_write_in_flight_counts_until_it_completes_in_any_order() {
        let start = Instant::now();
        let mut queue = MemberQueue::new(2);
        assert!(queue.idle() && queue.has_room());
        queue.submitted(7, (0, 4), start);
        queue.submitted(8, (4, 4), start);
        queue.count(8, 3);
        assert!(!queue.has_room());
        assert_eq!(queue.oldest(), Some((7, 0)));
        queue.completed(8, 4096, start + Duration::from_millis(1));
        assert_eq!((queue.in_flight(), queue.oldest()), (1, Some((7, 0))));
        queue.completed(7, 4096, start + Duration::from_millis(2));
        assert!(queue.idle() && queue.oldest().is_none());
        assert_eq!(
            queue.idle_for(start + Duration::from_millis(5)),
            Some(Duration::from_millis(3))
        );
        assert!(queue.rate(start + Duration::from_millis(5)).is_some());
        queue.uncount(2);
        assert_eq!(queue.counts(), (6, 3));
    }

    #[test]
    fn a_ring_write_waits_for_the_oldest_write_in_flight_not_the_count() {
        let now = Instant::now();
        let mut queue = MemberQueue::new(8);
        // Lap 0 of 16 slots: writes of 4 slots at 0, 4, 8, 12 went out; all but the first
        // completed. Lap 1 may write slots 0..3 only once slots 0..3 of lap 0 have landed.
        queue.submitted(0, (0, 4), now);
        assert!(!queue.ring_clear(16, 4, 16));
        assert!(!queue.ring_clear(16, 1, 16));
        assert!(queue.overlaps(16, 1, 16));
        queue.forget_pending();
        queue.submitted(1, (4, 4), now);
        assert!(queue.ring_clear(16, 4, 16));
        assert!(!queue.ring_clear(16, 5, 16));
        assert!(!queue.overlaps(16, 4, 16));
    }
}
