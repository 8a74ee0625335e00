//! A member's flush state: the writes it completed since its last good flush (what a
//! failing flush leaves in doubt: see `rewrite.rs`), whether a retired member still needs a
//! flush to claim what it completed before it failed, and whether its flush failed (a drive
//! that fails its flushes fails them all: it is not flushed again). It owns its state: the
//! writer tells it of each completion, flush, checkpoint and retirement.

use super::rewrite::Done;
use std::collections::VecDeque;

#[derive(Debug, Default, Clone)]
pub(super) struct Flushes {
    /// Retired, and not flushed since: writes it completed may not be durable yet.
    retired_unflushed: bool,
    /// Its flush failed: it is not flushed again, and what it completed since its last
    /// good flush stays as durable as the drive made it.
    failed: bool,
    /// Writes completed since the last flush that succeeded, in the order they completed.
    completed: VecDeque<Done>,
}

impl Flushes {
    /// A write completed.
    pub(super) fn completed(&mut self, done: Done) {
        self.completed.push_back(done);
    }

    /// The writes completed since the last good flush, in the order they completed.
    pub(super) fn in_doubt(&self) -> &VecDeque<Done> {
        &self.completed
    }

    /// Their chunks.
    pub(super) fn in_doubt_chunks(&self) -> u64 {
        self.completed
            .iter()
            .map(|done| done.chunk_count as u64)
            .sum()
    }

    /// Takes the writes completed since the last good flush (its flush failed: they go
    /// again elsewhere).
    pub(super) fn take_in_doubt(&mut self) -> VecDeque<Done> {
        std::mem::take(&mut self.completed)
    }

    /// A flush succeeded here and now: what it completed before is durable.
    pub(super) fn flushed(&mut self) {
        self.retired_unflushed = false;
        self.completed.clear();
    }

    /// A checkpoint was made whose flushes covered its first `covered` completions, and
    /// `retired_flush`: the flush of its retirement.
    pub(super) fn covered(&mut self, covered: usize, retired_flush: bool) {
        self.retired_unflushed &= !retired_flush;
        let covered = covered.min(self.completed.len());
        self.completed.drain(..covered);
    }

    /// Its flush failed: never flushed again.
    pub(super) fn failed_now(&mut self) {
        self.retired_unflushed = false;
        self.failed = true;
    }

    /// The member was retired: a checkpoint flushes it once more, unless `flush_failed`
    /// (why it was retired), when it is not flushed again.
    pub(super) fn retired(&mut self, flush_failed: bool) {
        self.retired_unflushed = !flush_failed;
        self.failed |= flush_failed;
    }

    /// Retired, and a flush is still owed to what it completed before.
    pub(super) fn owed(&self) -> bool {
        self.retired_unflushed
    }

    pub(super) fn failed(&self) -> bool {
        self.failed
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn firsts(flushes: &Flushes) -> Vec<u64> {
        flushes
            .in_doubt()
            .iter()
            .map(|d| d.first_sequence)
            .collect()
    }

    #[test]
    fn completions_wait_for_a_flush_and_a_checkpoint_covers_only_what_it_flushed() {
        let mut flushes = Flushes::default();
        for first in [0, 4, 8] {
            flushes.completed(Done::four_at(first));
        }
        assert_eq!(flushes.in_doubt_chunks(), 12);
        // The checkpoint's flush covered the first two; the third came after it began.
        flushes.covered(2, false);
        assert_eq!(firsts(&flushes), [8]);
        flushes.covered(5, false);
        assert!(flushes.in_doubt().is_empty(), "never more than there is");
        flushes.completed(Done::four_at(12));
        flushes.flushed();
        assert!(flushes.in_doubt().is_empty());
    }

    #[test]
    fn a_retired_member_is_owed_one_flush_unless_its_flush_failed() {
        let mut flushes = Flushes::default();
        flushes.retired(false);
        assert!(flushes.owed() && !flushes.failed());
        flushes.covered(0, true);
        assert!(!flushes.owed(), "the checkpoint flushed it");
        let mut failing = Flushes::default();
        failing.completed(Done::four_at(0));
        failing.retired(true);
        assert!(!failing.owed() && failing.failed());
        assert_eq!(firsts(&failing), [0], "in doubt until written elsewhere");
        let taken = failing.take_in_doubt();
        assert_eq!(taken.len(), 1);
        assert!(failing.in_doubt().is_empty());
    }

    #[test]
    fn a_failed_flush_is_final() {
        let mut flushes = Flushes::default();
        flushes.retired(false);
        flushes.failed_now();
        assert!(flushes.failed() && !flushes.owed());
        // A later retirement for another cause does not make it owed a flush again...
        flushes.retired(false);
        // ...but the failure stands.
        assert!(flushes.failed());
    }
}
