//! Durability off the data path: a coordinator thread flushes every member at once and
//! writes checkpoints while the writer goes on filling and submitting.
//!
//! # Protocol
//! The writer builds a [`Checkpoint`] from writes whose completions it has already seen and
//! [`Durability::offer`]s it. The coordinator makes one checkpoint durable at a time:
//!
//! 1. it flushes every member, all at once (one thread each), and waits for all of them:
//!    every write the checkpoint claims completed before the offer, so the flushes that
//!    start after it cover them. Members retired since their last flush are flushed too
//!    (writes they completed before they failed are claimed), though they take no
//!    checkpoint;
//! 2. only then does it write the checkpoint to its slot on every member, again all at once,
//!    each followed by a flush of that member.
//!
//! A checkpoint therefore never reaches any member before every flush before it succeeded.
//! While one is being made, [`Durability::busy`] is true and the writer does not build
//! another; [`Durability::poll`] hands back the outcome of the one that finished, and
//! [`Durability::finish`] waits for it. A member that stalls delays only the checkpoint,
//! never the writes of the other members.
//!
//! # Failures
//! The outcome names every member whose flush or metadata write failed, not only the
//! first, so that the writer retires each of them (or fails, where none is left). When a
//! flush fails, the checkpoint is not written anywhere (what it claims of that member may
//! not be durable); when its write fails on some members, it is made on the others, and
//! the outcome says so: recovery reads the newest checkpoint any member holds.

use super::volume::{Member, VolumeSet};
use super::RecordingError;
use crate::layout::Checkpoint;
use std::sync::mpsc::{self, Receiver, SyncSender, TryRecvError};
use std::thread::Scope;

/// What became of an offered checkpoint.
#[derive(Debug)]
pub(super) struct Outcome {
    /// The checkpoint, where at least one member holds it durably.
    pub(super) made: Option<Checkpoint>,
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
            failed: Vec::new(),
            error: None,
        }
    }

    fn error(error: RecordingError) -> Outcome {
        Outcome {
            made: None,
            failed: Vec::new(),
            error: Some(error),
        }
    }
}

/// A checkpoint, the members that take it, and the members to flush first.
struct Offer {
    checkpoint: Checkpoint,
    live: Vec<bool>,
    flush: Vec<bool>,
}

/// The writer's end of the coordinator.
pub(super) struct Durability {
    offers: SyncSender<Offer>,
    outcomes: Receiver<Outcome>,
    busy: bool,
}

impl Durability {
    /// Starts the coordinator on a thread of `scope`; it ends when this handle is dropped.
    pub(super) fn start<'scope, 'env>(
        scope: &'scope Scope<'scope, 'env>,
        set: &'env VolumeSet,
    ) -> Durability {
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
        Durability {
            offers,
            outcomes,
            busy: false,
        }
    }

    /// Whether a checkpoint is being made.
    pub(super) fn busy(&self) -> bool {
        self.busy
    }

    /// Hands `checkpoint` to the coordinator, to be made durable on the members `live`
    /// marks (retired members take no metadata) after the members `flush` marks are
    /// flushed. The caller checks [`Durability::busy`] first.
    pub(super) fn offer(
        &mut self,
        checkpoint: Checkpoint,
        live: Vec<bool>,
        flush: Vec<bool>,
    ) -> Result<(), RecordingError> {
        debug_assert!(!self.busy, "one checkpoint at a time");
        self.offers
            .send(Offer {
                checkpoint,
                live,
                flush,
            })
            .map_err(|_| coordinator_gone())?;
        self.busy = true;
        Ok(())
    }

    /// The outcome of the checkpoint being made, once it is durable (or failed).
    pub(super) fn poll(&mut self) -> Option<Outcome> {
        if !self.busy {
            return None;
        }
        match self.outcomes.try_recv() {
            Ok(outcome) => {
                self.busy = false;
                Some(outcome)
            }
            Err(TryRecvError::Empty) => None,
            Err(TryRecvError::Disconnected) => {
                self.busy = false;
                Some(Outcome::error(coordinator_gone()))
            }
        }
    }

    /// Waits for the checkpoint being made, if any, and returns its outcome.
    pub(super) fn finish(&mut self) -> Option<Outcome> {
        if !self.busy {
            return None;
        }
        self.busy = false;
        Some(
            self.outcomes
                .recv()
                .unwrap_or_else(|_| Outcome::error(coordinator_gone())),
        )
    }
}

fn coordinator_gone() -> RecordingError {
    RecordingError::Io {
        what: "making a checkpoint durable".into(),
        source: std::io::Error::other("the durability thread ended"),
    }
}

/// Flushes the members to flush, then, if every flush succeeded, writes the checkpoint to
/// each live one (each write flushed).
fn make_durable(set: &VolumeSet, offer: Offer) -> Outcome {
    let checkpoint = offer.checkpoint;
    let bytes = match checkpoint.encode() {
        Ok(bytes) => bytes,
        Err(error) => return Outcome::error(error.into()),
    };
    let (_, failed) = on_every_member(set, &offer.flush, Member::flush);
    if !failed.is_empty() {
        return Outcome {
            made: None,
            failed,
            error: None,
        };
    }
    let (succeeded, failed) = on_every_member(set, &offer.live, |member| {
        member.write_checkpoint(&bytes, checkpoint.generation)?;
        member.flush()
    });
    Outcome {
        made: (succeeded > 0).then_some(checkpoint),
        failed,
        error: None,
    }
}

/// Runs `work` on every member `live` marks (all where it is shorter) at once, one thread
/// each. Returns how many succeeded, and each failure with its member, in member order.
pub(super) fn on_every_member(
    set: &VolumeSet,
    live: &[bool],
    work: impl Fn(&Member) -> Result<(), RecordingError> + Sync,
) -> (usize, Vec<(usize, RecordingError)>) {
    let work = &work;
    std::thread::scope(|scope| {
        let running: Vec<_> = set
            .present()
            .filter(|member| live.get(member.index() as usize).copied().unwrap_or(true))
            .map(|member| (member.index(), scope.spawn(move || work(member))))
            .collect();
        let mut succeeded = 0;
        let mut failed = Vec::new();
        for (index, thread) in running {
            match thread.join().expect("a member's flush thread panicked") {
                Ok(()) => succeeded += 1,
                Err(error) => failed.push((index as usize, error)),
            }
        }
        (succeeded, failed)
    })
}
