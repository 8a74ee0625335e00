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
//! A checkpoint therefore never reaches any member before every chunk it claims is durable
//! on every member. While one is being made, [`Durability::busy`] is true and the writer
//! does not build another; [`Durability::poll`] hands back the outcome of the one that
//! finished, and [`Durability::finish`] waits for it. A member that stalls delays only the
//! checkpoint, never the writes of the other members.

use super::volume::{Member, VolumeSet};
use super::RecordingError;
use crate::layout::Checkpoint;
use std::sync::mpsc::{self, Receiver, SyncSender, TryRecvError};
use std::thread::Scope;

/// A checkpoint that could not be made durable, and the member that failed, when it was
/// one member's flush or write.
#[derive(Debug)]
pub(super) struct DurabilityError {
    pub(super) member: Option<usize>,
    pub(super) error: RecordingError,
}

type Outcome = Result<Checkpoint, DurabilityError>;

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
                let outcome = make_durable(set, &offer).map(|()| offer.checkpoint);
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
                Some(Err(DurabilityError {
                    member: None,
                    error: coordinator_gone(),
                }))
            }
        }
    }

    /// Waits for the checkpoint being made, if any, and returns its outcome.
    pub(super) fn finish(&mut self) -> Option<Outcome> {
        if !self.busy {
            return None;
        }
        self.busy = false;
        Some(self.outcomes.recv().unwrap_or_else(|_| {
            Err(DurabilityError {
                member: None,
                error: coordinator_gone(),
            })
        }))
    }
}

fn coordinator_gone() -> RecordingError {
    RecordingError::Io {
        what: "making a checkpoint durable".into(),
        source: std::io::Error::other("the durability thread ended"),
    }
}

/// Flushes the members to flush, then writes the checkpoint to each live one (each write
/// flushed).
fn make_durable(set: &VolumeSet, offer: &Offer) -> Result<(), DurabilityError> {
    let checkpoint = &offer.checkpoint;
    let bytes = checkpoint.encode().map_err(|error| DurabilityError {
        member: None,
        error: error.into(),
    })?;
    on_every_member(set, &offer.flush, Member::flush)?;
    on_every_member(set, &offer.live, |member| {
        member.write_checkpoint(&bytes, checkpoint.generation)?;
        member.flush()
    })
}

/// Runs `work` on every live member at once, one thread each; the first error wins,
/// naming its member.
fn on_every_member(
    set: &VolumeSet,
    live: &[bool],
    work: impl Fn(&Member) -> Result<(), RecordingError> + Sync,
) -> Result<(), DurabilityError> {
    let work = &work;
    std::thread::scope(|scope| {
        let running: Vec<_> = set
            .present()
            .filter(|member| live.get(member.index() as usize).copied().unwrap_or(true))
            .map(|member| (member.index(), scope.spawn(move || work(member))))
            .collect();
        let mut first_error = None;
        for (index, thread) in running {
            let outcome = thread.join().expect("a member's flush thread panicked");
            if let (Err(error), None) = (outcome, &first_error) {
                first_error = Some(DurabilityError {
                    member: Some(index as usize),
                    error,
                });
            }
        }
        first_error.map_or(Ok(()), Err)
    })
}
