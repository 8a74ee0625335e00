//! Durability off the data path: a coordinator thread flushes every member at once and
//! writes checkpoints while the writer goes on filling and submitting.
//!
//! # Protocol
//! The writer builds a [`Checkpoint`] from writes whose completions it has already seen and
//! [`Durability::offer`]s it. The coordinator makes one checkpoint durable at a time:
//!
//! 1. it flushes every member, all at once (one thread each), and waits for all of them:
//!    every write the checkpoint claims completed before the offer, so the flushes that
//!    start after it cover them;
//! 2. only then does it write the checkpoint to its slot on every member, again all at once,
//!    each followed by a flush of that member.
//!
//! A checkpoint therefore never reaches any member before every chunk it claims is durable
//! on every member. While one is being made, [`Durability::busy`] is true and the writer
//! does not build another; [`Durability::poll`] hands back the outcome of the one that
//! finished, and [`Durability::finish`] waits for it. A member that stalls delays only the
//! checkpoint, never the writes of the other members.

use super::volume::{write_meta, Member, VolumeSet};
use super::RecordingError;
use crate::layout::Checkpoint;
use std::sync::mpsc::{self, Receiver, SyncSender, TryRecvError};
use std::thread::Scope;

/// The writer's end of the coordinator.
pub(super) struct Durability {
    offers: SyncSender<Checkpoint>,
    outcomes: Receiver<Result<Checkpoint, RecordingError>>,
    busy: bool,
}

impl Durability {
    /// Starts the coordinator on a thread of `scope`; it ends when this handle is dropped.
    pub(super) fn start<'scope, 'env>(
        scope: &'scope Scope<'scope, 'env>,
        set: &'env VolumeSet,
    ) -> Durability {
        let (offers, offered) = mpsc::sync_channel::<Checkpoint>(1);
        let (done, outcomes) = mpsc::sync_channel(1);
        scope.spawn(move || {
            for checkpoint in offered {
                let outcome = make_durable(set, &checkpoint).map(|()| checkpoint);
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

    /// Hands `checkpoint` to the coordinator. The caller checks [`Durability::busy`] first.
    pub(super) fn offer(&mut self, checkpoint: Checkpoint) -> Result<(), RecordingError> {
        debug_assert!(!self.busy, "one checkpoint at a time");
        self.offers
            .send(checkpoint)
            .map_err(|_| coordinator_gone())?;
        self.busy = true;
        Ok(())
    }

    /// The outcome of the checkpoint being made, once it is durable (or failed).
    pub(super) fn poll(&mut self) -> Option<Result<Checkpoint, RecordingError>> {
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
                Some(Err(coordinator_gone()))
            }
        }
    }

    /// Waits for the checkpoint being made, if any, and returns its outcome.
    pub(super) fn finish(&mut self) -> Option<Result<Checkpoint, RecordingError>> {
        if !self.busy {
            return None;
        }
        self.busy = false;
        Some(
            self.outcomes
                .recv()
                .unwrap_or_else(|_| Err(coordinator_gone())),
        )
    }
}

fn coordinator_gone() -> RecordingError {
    RecordingError::Io {
        what: "making a checkpoint durable".into(),
        source: std::io::Error::other("the durability thread ended"),
    }
}

/// Flushes every member, then writes `checkpoint` to every member (each write flushed).
fn make_durable(set: &VolumeSet, checkpoint: &Checkpoint) -> Result<(), RecordingError> {
    let bytes = checkpoint.encode()?;
    on_every_member(set, flush)?;
    on_every_member(set, |member| {
        let layout = member.layout();
        let slot = layout
            .checkpoint_slot_for_generation(checkpoint.generation)
            .unwrap_or(0);
        let offset = layout.checkpoint_slot_offset_bytes(slot).unwrap_or(0);
        write_meta(&member.target, offset, layout.meta_block_bytes, &bytes)?;
        flush(member)
    })
}

/// Runs `work` on every present member at once, one thread each; the first error wins.
fn on_every_member(
    set: &VolumeSet,
    work: impl Fn(&Member) -> Result<(), RecordingError> + Sync,
) -> Result<(), RecordingError> {
    let work = &work;
    std::thread::scope(|scope| {
        let running: Vec<_> = set
            .present()
            .map(|member| scope.spawn(move || work(member)))
            .collect();
        running
            .into_iter()
            .map(|thread| thread.join().expect("a member's flush thread panicked"))
            .collect::<Result<Vec<()>, RecordingError>>()
            .map(|_| ())
    })
}

fn flush(member: &Member) -> Result<(), RecordingError> {
    member
        .target
        .file
        .sync_data()
        .map_err(|source| RecordingError::Io {
            what: format!("flushing {}", member.target.path.display()),
            source,
        })
}
