//! Reclaiming: a recording made with a reclaim policy is placed as a ring over the whole
//! data area that never overwrites itself, and each member's writes stop at a limit: the
//! first slot ahead that a recording holding data still needs (one slot before it, kept
//! for the end marker). When no member has room, the oldest recording is reclaimed
//! ([`retention::reclaim`]: its entry marked, on every member, flushed) and the limits move
//! on; when it may not be (an archive does not hold it), the set is full; when a reader
//! holds it, the writer waits and tries again. A mark that keeps slots (format 1.7) is data
//! it never reclaims: the set is full up to it until the mark is released.

use super::*;
use crate::layout::ReclaimCause;
use crate::recording::retention::{self, ReclaimPolicy, ReclaimRefused, Reclaimed, Refusal};

/// The reclaim stage's state: the policy, the recordings of the set as the recording
/// began (oldest first, the recording being written left out), and what it reclaimed.
pub(super) struct Reclaimer {
    policy: ReclaimPolicy,
    entries: Vec<RecordingEntry>,
    pub(super) reclaimed: Vec<Reclaimed>,
    /// Why the oldest recording was not reclaimed when room was needed, if it was not.
    pub(super) refused: Option<ReclaimRefused>,
}

impl Reclaimer {
    /// For `policy`, over the set's recordings (`entries`) and the marks that keep slots
    /// (`marks`, format 1.7): their slots are data it may not reclaim (see
    /// [`Writer::make_room`]), so its limits stop before them.
    pub(super) fn new(
        policy: ReclaimPolicy,
        mut entries: Vec<RecordingEntry>,
        marks: Vec<RecordingEntry>,
    ) -> Reclaimer {
        entries.extend(marks);
        entries.sort_by_key(|entry| entry.recording_id);
        Reclaimer {
            policy,
            entries,
            reclaimed: Vec::new(),
            refused: None,
        }
    }

    /// Sets each member's limit: its ring position at the start, plus the room ahead of it
    /// there (at most a lap less one slot: the recording never reaches its own start), less
    /// the slot kept for the end marker.
    pub(super) fn set_limits(&self, members: &mut [MemberState]) {
        for (index, member) in members.iter_mut().enumerate() {
            let lap = member.usable_slots.max(1);
            let (start_lap, start_slot) = if member.start_slot >= lap {
                (member.start_lap + 1, 0)
            } else {
                (member.start_lap, member.start_slot)
            };
            let room = retention::room_slots(&self.entries, index, start_slot, lap).min(lap - 1);
            member.limit_position = Some((start_lap * lap + start_slot + room).saturating_sub(1));
        }
    }

    /// The oldest recording that still holds data.
    fn oldest(&self) -> Option<usize> {
        self.entries.iter().position(retention::holds_data)
    }
}

/// What [`Writer::make_room`] did.
pub(super) enum Room {
    /// A recording was reclaimed: try again.
    Made,
    /// A reader holds the oldest recording: wait, and try again later.
    Wait,
    /// Nothing more may be reclaimed: the set is full.
    None,
}

impl Writer<'_> {
    /// No member has room: reclaims the set's oldest recording, if the policy lets it.
    pub(super) fn make_room(&mut self) -> Room {
        let live = self.placement.live();
        let Some(reclaimer) = self.reclaimer.as_mut() else {
            return Room::None;
        };
        let Some(index) = reclaimer.oldest() else {
            return Room::None;
        };
        let entry = reclaimer.entries[index].clone();
        if entry.flags.contains(RecordingFlags::MARK) {
            // A kept mark is never reclaimed for room: the set is full up to it.
            reclaimer.refused = Some(crate::recording::marks::release_hint(&entry).into());
            return Room::None;
        }
        let policy = reclaimer.policy.clone();
        match retention::reclaim(self.set, &entry, ReclaimCause::Space, Some(&policy), &live) {
            Ok(Ok(next)) => {
                reclaimer.reclaimed.push(retention::report_of(&next));
                reclaimer.entries[index] = next;
                reclaimer.refused = None;
                reclaimer.set_limits(&mut self.placement.members);
                Room::Made
            }
            Ok(Err(Refusal::BeingRead)) => Room::Wait,
            Ok(Err(Refusal::Kept(why))) => {
                reclaimer.refused = Some(ReclaimRefused::Kept {
                    recording_id: entry.recording_id,
                    why,
                });
                Room::None
            }
            Err(error) => {
                self.fail(RecordingFailure::Reclaim {
                    recording_id: entry.recording_id,
                    cause: Arc::new(error),
                });
                Room::None
            }
        }
    }
}
