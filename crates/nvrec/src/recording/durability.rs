//! Durability off the data path: the coordinator flushes every member and writes
//! checkpoints while the writer goes on filling and submitting.
//!
//! # Protocol
//! The writer builds a [`Checkpoint`] from writes whose completions it has already seen and
//! [`Durability::offer`]s it. The coordinator makes one checkpoint durable at a time:
//!
//! 1. it flushes every member and waits for all of them: every write the checkpoint claims
//!    completed before the offer, so the flushes that start after it cover them. Members
//!    retired since their last flush are flushed too (writes they completed before they
//!    failed are claimed), though they take no checkpoint;
//! 2. only then does it write the checkpoint to its slot on every member, each write
//!    followed by a flush of that member.
//!
//! A checkpoint therefore never reaches any member before every flush before it succeeded.
//! While one is being made, [`Durability::busy`] is true and the writer does not build
//! another; [`Durability::poll`] hands back the outcome of the one that finished, and
//! [`Durability::finish`] waits for it (or, inline, makes it).
//!
//! # Two modes
//! The set's clock decides ([`Schedule::of`]):
//!
//! - *Threaded*, on real targets: the coordinator is a thread of its own, and each step
//!   runs on every member at once, one thread each ([`on_every_member`]). A member that
//!   stalls delays only the checkpoint, never the writes of the other members.
//! - *Inline*, on simulated disks (a virtual clock): no thread touches the set. An offer is
//!   kept, and a later [`Durability::poll`] makes it durable in the caller's thread, the
//!   members one after another in member order; the offer waits through a number of polls
//!   drawn from the set's seeded generator (0 to [`INLINE_POLLS_MAX`]), so that writes are
//!   submitted and completed while a checkpoint is being made, as the threaded coordinator
//!   allows, and a seed repeats exactly. While a member it flushes is stalled, it waits on
//!   (the threaded coordinator would be waiting on that member's flush while the writer
//!   goes on, and notices the member's timeout). [`Durability::finish`] makes it at once,
//!   waiting out a stall in virtual time.
//!
//! # Failures
//! The outcome names every member whose flush or metadata write failed, not only the
//! first, so that the writer retires each of them (or fails, where none is left). When a
//! flush fails, the checkpoint is not written anywhere (what it claims of that member may
//! not be durable); when its write fails on some members, it is made on the others, and
//! the outcome says so: recovery reads the newest checkpoint any member holds.

use super::disk::Disk;
use super::volume::{Member, VolumeSet};
use super::RecordingError;
use crate::layout::{Checkpoint, RecordingEntry};
use std::sync::mpsc::{self, Receiver, SyncSender, TryRecvError};
use std::thread::Scope;

/// What became of an offered checkpoint.
#[derive(Debug)]
pub(super) struct Outcome {
    /// The checkpoint, where at least one member holds it durably.
    pub(super) made: Option<Checkpoint>,
    /// The entries offered with it that some member now holds durably, and those that
    /// none does (a flush before them failed): the writer offers those again.
    pub(super) entries_made: Vec<RecordingEntry>,
    pub(super) entries_left: Vec<RecordingEntry>,
    /// Each member whose flush or checkpoint write (or the flush after it) failed, with
    /// why, in member order.
    pub(super) failed: Vec<(usize, RecordingError)>,
    /// A failure no member is to blame for (the checkpoint did not encode, the coordinator
    /// is gone).
    pub(super) error: Option<RecordingError>,
}

impl Outcome {
    /// A checkpoint made on every member it went to.
    pub(super) fn made(checkpoint: Checkpoint) -> Outcome {
        Outcome {
            made: Some(checkpoint),
            entries_made: Vec::new(),
            entries_left: Vec::new(),
            failed: Vec::new(),
            error: None,
        }
    }

    fn error(error: RecordingError, entries: Vec<RecordingEntry>) -> Outcome {
        Outcome {
            made: None,
            entries_made: Vec::new(),
            entries_left: entries,
            failed: Vec::new(),
            error: Some(error),
        }
    }
}

/// A checkpoint, the members that take it, the members to flush first, and entries to
/// write before it (a mark's: its recorder answers once one is durable, without waiting
/// for a member that stalls).
pub(super) struct Offer {
    pub(super) checkpoint: Checkpoint,
    pub(super) live: Vec<bool>,
    pub(super) flush: Vec<bool>,
    pub(super) entries: Vec<RecordingEntry>,
}

/// The most polls an inline offer waits through before a poll makes it durable.
pub(super) const INLINE_POLLS_MAX: u64 = 3;

/// How work on a set's members is run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Schedule {
    /// Threads: the coordinator's own, and one per member for each step.
    Threaded,
    /// In the caller's thread, the members one after another in member order.
    Inline,
}

impl Schedule {
    /// Inline on a virtual clock (simulated disks, where a seed must repeat exactly),
    /// threaded on real time.
    pub(super) fn of(set: &VolumeSet) -> Schedule {
        match set.clock().is_virtual() {
            true => Schedule::Inline,
            false => Schedule::Threaded,
        }
    }
}

/// The coordinator, in one of the two modes (see the module docs).
enum Coordinator {
    Threaded {
        offers: SyncSender<Offer>,
        outcomes: Receiver<Outcome>,
    },
    /// Boxed: it holds its own handle on the set, which would make every variant as large.
    Inline(Box<Inline>),
}

/// The inline coordinator: its own handle on the set, and the offer it keeps.
struct Inline {
    set: VolumeSet,
    kept: Option<Kept>,
}

/// An inline offer and how many more polls it waits through.
struct Kept {
    offer: Offer,
    polls_left: u64,
}

impl Inline {
    fn keep(&mut self, offer: Offer) {
        let polls_left = self
            .set
            .simulated()
            .map_or(0, |sim| sim.draw_below(INLINE_POLLS_MAX + 1));
        self.kept = Some(Kept { offer, polls_left });
    }

    /// The kept offer's outcome, if this poll is the one that makes it durable: its drawn
    /// wait is over, and no member it flushes is stalled (the threaded coordinator would be
    /// waiting on that member while the writer goes on).
    fn poll(&mut self) -> Option<Outcome> {
        let kept = self.kept.as_mut()?;
        if kept.polls_left > 0 {
            kept.polls_left -= 1;
            return None;
        }
        if self.flush_would_wait() {
            return None;
        }
        self.finish()
    }

    /// Whether a flush of a member the kept offer touches would wait out a stall now.
    fn flush_would_wait(&self) -> bool {
        let Some(kept) = &self.kept else {
            return false;
        };
        let touched = |index: usize| {
            kept.offer.flush.get(index).copied().unwrap_or(true)
                || kept.offer.live.get(index).copied().unwrap_or(true)
        };
        self.set.present().any(|member| match &member.disk {
            Disk::Sim { set, index, .. } => {
                touched(member.index() as usize) && set.flush_waits_until(*index).is_some()
            }
            Disk::Target(_) => false,
        })
    }

    fn finish(&mut self) -> Option<Outcome> {
        let kept = self.kept.take()?;
        Some(make_durable(&self.set, kept.offer))
    }
}

/// The writer's end of the coordinator.
pub(super) struct Durability {
    coordinator: Coordinator,
    busy: bool,
}

impl Durability {
    /// Starts the coordinator: threaded, on a thread of `scope` that ends when this handle
    /// is dropped; inline on simulated disks (see the module docs).
    pub(super) fn start<'scope, 'env>(
        scope: &'scope Scope<'scope, 'env>,
        set: &'env VolumeSet,
    ) -> Durability {
        let inline = match Schedule::of(set) {
            Schedule::Inline => set.clone_simulated(),
            Schedule::Threaded => None,
        };
        let coordinator = match inline {
            Some(set) => Coordinator::Inline(Box::new(Inline { set, kept: None })),
            None => Durability::spawn(scope, set),
        };
        Durability {
            coordinator,
            busy: false,
        }
    }

    fn spawn<'scope, 'env>(
        scope: &'scope Scope<'scope, 'env>,
        set: &'env VolumeSet,
    ) -> Coordinator {
        let (offers, offered) = mpsc::sync_channel::<Offer>(1);
        let (done, outcomes) = mpsc::sync_channel(1);
        scope.spawn(move || {
            for offer in offered {
                let outcome = make_durable(set, offer);
                if done.send(outcome).is_err() {
                    break;
                }
            }
        });
        Coordinator::Threaded { offers, outcomes }
    }

    /// Whether a checkpoint is being made.
    pub(super) fn busy(&self) -> bool {
        self.busy
    }

    /// Hands `offer.checkpoint` to the coordinator, to be made durable on the members
    /// `offer.live` marks (retired members take no metadata) after the members
    /// `offer.flush` marks are flushed and `offer.entries` written. The caller checks
    /// [`Durability::busy`] first.
    pub(super) fn offer(&mut self, offer: Offer) -> Result<(), RecordingError> {
        debug_assert!(!self.busy, "one checkpoint at a time");
        match &mut self.coordinator {
            Coordinator::Threaded { offers, .. } => {
                offers.send(offer).map_err(|_| coordinator_gone())?
            }
            Coordinator::Inline(inline) => inline.keep(offer),
        }
        self.busy = true;
        Ok(())
    }

    /// The outcome of the checkpoint being made, once it is durable (or failed). Inline,
    /// the poll that the offer's drawn wait ends at makes it durable, here.
    pub(super) fn poll(&mut self) -> Option<Outcome> {
        if !self.busy {
            return None;
        }
        let outcome = match &mut self.coordinator {
            Coordinator::Threaded { outcomes, .. } => match outcomes.try_recv() {
                Ok(outcome) => Some(outcome),
                Err(TryRecvError::Empty) => None,
                Err(TryRecvError::Disconnected) => {
                    Some(Outcome::error(coordinator_gone(), Vec::new()))
                }
            },
            Coordinator::Inline(inline) => inline.poll(),
        };
        if outcome.is_some() {
            self.busy = false;
        }
        outcome
    }

    /// Waits for the checkpoint being made, if any (inline: makes it now), and returns its
    /// outcome.
    pub(super) fn finish(&mut self) -> Option<Outcome> {
        if !self.busy {
            return None;
        }
        self.busy = false;
        let outcome = match &mut self.coordinator {
            Coordinator::Threaded { outcomes, .. } => outcomes.recv().ok(),
            Coordinator::Inline(inline) => inline.finish(),
        };
        Some(outcome.unwrap_or_else(|| Outcome::error(coordinator_gone(), Vec::new())))
    }
}

fn coordinator_gone() -> RecordingError {
    RecordingError::Io {
        what: "making a checkpoint durable".into(),
        source: std::io::Error::other("the durability thread ended"),
    }
}

/// Flushes the members to flush, then, if every flush succeeded, writes the entries and
/// then the checkpoint to each live one (each write flushed; a member whose entry write
/// fails takes nothing more).
fn make_durable(set: &VolumeSet, offer: Offer) -> Outcome {
    let checkpoint = offer.checkpoint;
    let bytes = match checkpoint.encode() {
        Ok(bytes) => bytes,
        Err(error) => return Outcome::error(error.into(), offer.entries),
    };
    let (_, failed) = on_every_member(set, &offer.flush, Member::flush);
    if !failed.is_empty() {
        return Outcome {
            made: None,
            entries_made: Vec::new(),
            entries_left: offer.entries,
            failed,
            error: None,
        };
    }
    let mut live = offer.live;
    let (entries_made, entries_left, mut failed) = write_entries(set, &mut live, offer.entries);
    let (succeeded, more) = on_every_member(set, &live, |member| {
        member.write_checkpoint(&bytes, checkpoint.generation)?;
        member.flush()
    });
    failed.extend(more);
    failed.sort_by_key(|&(member, _)| member);
    Outcome {
        made: (succeeded > 0).then_some(checkpoint),
        entries_made,
        entries_left,
        failed,
        error: None,
    }
}

/// Writes `entries` in order, each to the members `live` marks and flushed there; a member
/// that fails is taken out of `live`. Returns the entries some member holds, those none
/// does, and the members that failed.
#[allow(clippy::type_complexity)]
fn write_entries(
    set: &VolumeSet,
    live: &mut [bool],
    entries: Vec<RecordingEntry>,
) -> (
    Vec<RecordingEntry>,
    Vec<RecordingEntry>,
    Vec<(usize, RecordingError)>,
) {
    let (mut made, mut left, mut failed) = (Vec::new(), Vec::new(), Vec::new());
    for entry in entries {
        let Ok(bytes) = entry.encode() else {
            left.push(entry); // Refused by its own checks: nothing was written.
            continue;
        };
        let (succeeded, failures) = on_every_member(set, live, |member| {
            member.write_entry(&bytes, &entry)?;
            member.flush()
        });
        for (member, error) in failures {
            if let Some(taken) = live.get_mut(member) {
                *taken = false;
            }
            failed.push((member, error));
        }
        match succeeded > 0 {
            true => made.push(entry),
            false => left.push(entry),
        }
    }
    (made, left, failed)
}

/// Runs `work` on every member `live` marks (all where it is shorter): threaded, at once,
/// one thread each; inline (simulated disks), one after another in member order. Returns
/// how many succeeded, and each failure with its member, in member order.
pub(super) fn on_every_member(
    set: &VolumeSet,
    live: &[bool],
    work: impl Fn(&Member) -> Result<(), RecordingError> + Sync,
) -> (usize, Vec<(usize, RecordingError)>) {
    let members = set
        .present()
        .filter(|member| live.get(member.index() as usize).copied().unwrap_or(true));
    let results: Vec<_> = match Schedule::of(set) {
        Schedule::Inline => members
            .map(|member| (member.index(), work(member)))
            .collect(),
        Schedule::Threaded => at_once(members, &work),
    };
    let mut succeeded = 0;
    let mut failed = Vec::new();
    for (index, result) in results {
        match result {
            Ok(()) => succeeded += 1,
            Err(error) => failed.push((index as usize, error)),
        }
    }
    (succeeded, failed)
}

/// `work` on each of `members` at once, a thread each; the results in the members' order.
fn at_once<'m>(
    members: impl Iterator<Item = &'m Member>,
    work: &(impl Fn(&Member) -> Result<(), RecordingError> + Sync),
) -> Vec<(u16, Result<(), RecordingError>)> {
    std::thread::scope(|scope| {
        let running: Vec<_> = members
            .map(|member| (member.index(), scope.spawn(move || work(member))))
            .collect();
        running
            .into_iter()
            .map(|(index, thread)| {
                let result = thread.join().expect("a member's flush thread panicked");
                (index, result)
            })
            .collect()
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::device::Safety;
    use crate::engine::SimDisks;
    use crate::recording::disk::Members;
    use crate::recording::volume;
    use std::sync::Mutex;

    fn formatted(sim: &SimDisks) -> VolumeSet {
        volume::format(
            Members::Sim(sim),
            8192,
            "durability",
            None,
            None,
            Safety::Check,
        )
        .unwrap()
    }

    fn next_checkpoint(set: &VolumeSet) -> Checkpoint {
        let mut checkpoint = set.newest_checkpoint().unwrap().unwrap();
        checkpoint.generation += 1;
        checkpoint
    }

    /// Offers a checkpoint on a fresh set of `seed` and polls until it is made: how many
    /// polls found it waiting, and the flushes counted before the poll that made it.
    fn polls_until_made(seed: u64) -> (u64, u64) {
        let sim = SimDisks::new(2, 4 << 20, 4096, seed);
        let set = formatted(&sim);
        assert_eq!(Schedule::of(&set), Schedule::Inline);
        let checkpoint = next_checkpoint(&set);
        std::thread::scope(|scope| {
            let mut durability = Durability::start(scope, &set);
            durability
                .offer(Offer {
                    checkpoint: checkpoint.clone(),
                    live: vec![true; 2],
                    flush: vec![true; 2],
                    entries: Vec::new(),
                })
                .unwrap();
            let flushes = sim.counters().flush_count;
            let mut waited = 0;
            loop {
                assert!(durability.busy());
                if let Some(outcome) = durability.poll() {
                    assert_eq!(outcome.made, Some(checkpoint.clone()));
                    assert!(outcome.failed.is_empty() && outcome.error.is_none());
                    assert!(sim.counters().flush_count > flushes, "made by that poll");
                    break;
                }
                assert_eq!(sim.counters().flush_count, flushes, "nothing done yet");
                waited += 1;
            }
            assert!(!durability.busy());
            assert!(durability.poll().is_none(), "nothing offered");
            assert_eq!(set.newest_checkpoint().unwrap(), Some(checkpoint));
            (waited, flushes)
        })
    }

    #[test]
    fn an_inline_offer_is_made_at_the_poll_drawn_from_the_seed() {
        let mut seen = [false; INLINE_POLLS_MAX as usize + 1];
        for seed in 0..48 {
            let (waited, _) = polls_until_made(seed);
            assert!(waited <= INLINE_POLLS_MAX, "{waited} polls");
            seen[waited as usize] = true;
            assert_eq!(polls_until_made(seed).0, waited, "seed {seed} repeats");
        }
        assert_eq!(seen, [true; 4], "every wait from 0 to 3 polls is drawn");
    }

    #[test]
    fn finish_makes_an_inline_offer_at_once() {
        let sim = SimDisks::new(1, 4 << 20, 4096, 9);
        let set = formatted(&sim);
        let checkpoint = next_checkpoint(&set);
        std::thread::scope(|scope| {
            let mut durability = Durability::start(scope, &set);
            assert!(durability.finish().is_none(), "nothing offered");
            durability
                .offer(Offer {
                    checkpoint: checkpoint.clone(),
                    live: vec![true],
                    flush: vec![true],
                    entries: Vec::new(),
                })
                .unwrap();
            let outcome = durability.finish().expect("made");
            assert_eq!(outcome.made, Some(checkpoint));
            assert!(!durability.busy());
        });
    }

    #[test]
    fn an_inline_offer_waits_while_a_member_it_flushes_is_stalled() {
        use crate::buffer::BufferPool;
        use crate::engine::{Engine, EngineConfig, IoOp, IoRequest};
        let sim = SimDisks::new(2, 4 << 20, 4096, 3);
        let set = formatted(&sim);
        let clock = sim.clock();
        // Disk 1 stalls for a second from its next write, a chunk write left in flight.
        let stall = std::time::Duration::from_secs(1);
        sim.stall(1, 0, stall);
        let pool = BufferPool::new(1, 8192).unwrap();
        let config = EngineConfig {
            queue_depth: 1,
            sqpoll: false,
            caller_may_block: false,
        };
        let mut engine = sim.engine(vec![0, 1], pool, config).unwrap();
        let data_offset_bytes = set.members[1].as_ref().unwrap().layout().data_offset_bytes;
        // SAFETY: the slot is not touched again while the write is in flight.
        unsafe {
            engine.push(IoRequest {
                op: IoOp::Write,
                file_index: 1,
                slot: 0,
                slot_offset_bytes: 0,
                offset_bytes: data_offset_bytes,
                len_bytes: 8192,
                user_data: 1,
            });
        }
        let mut completions = Vec::new();
        engine.submit_and_reap(0, &mut completions).unwrap();
        assert!(completions.is_empty(), "the write waits out the stall");
        let stalled_at = clock.now();
        std::thread::scope(|scope| {
            let mut durability = Durability::start(scope, &set);
            durability
                .offer(Offer {
                    checkpoint: next_checkpoint(&set),
                    live: vec![true; 2],
                    flush: vec![true; 2],
                    entries: Vec::new(),
                })
                .unwrap();
            let flushes = sim.counters().flush_count;
            for _ in 0..2 * INLINE_POLLS_MAX + 2 {
                assert!(durability.poll().is_none(), "the writer goes on meanwhile");
            }
            assert_eq!(sim.counters().flush_count, flushes, "nothing flushed yet");
            assert_eq!(clock.since(stalled_at), std::time::Duration::ZERO);
            clock.sleep(stall);
            let made = (0..=INLINE_POLLS_MAX).find_map(|_| durability.poll());
            assert!(made.expect("made once the stall is over").made.is_some());
        });
    }

    #[test]
    fn on_a_virtual_clock_members_run_one_after_another_in_member_order() {
        let sim = SimDisks::new(3, 4 << 20, 4096, 4);
        let set = formatted(&sim);
        let caller = std::thread::current().id();
        let order = Mutex::new(Vec::new());
        let (succeeded, failed) = on_every_member(&set, &[true, false, true], |member| {
            assert_eq!(
                std::thread::current().id(),
                caller,
                "in the caller's thread"
            );
            order.lock().unwrap().push(member.index());
            match member.index() {
                2 => Err(RecordingError::Usage("member 2 fails".into())),
                _ => Ok(()),
            }
        });
        assert_eq!(
            *order.lock().unwrap(),
            [0, 2],
            "member order, member 1 left out"
        );
        assert_eq!(succeeded, 1);
        assert_eq!(failed.len(), 1);
        assert_eq!(failed[0].0, 2);
        // All members where the mask is short.
        order.lock().unwrap().clear();
        let (succeeded, _) = on_every_member(&set, &[], |member| {
            order.lock().unwrap().push(member.index());
            Ok(())
        });
        assert_eq!((succeeded, order.into_inner().unwrap()), (3, vec![0, 1, 2]));
    }
}
