//! Reclaiming: a recording made with a reclaim policy is placed as a ring over the whole
//! data area that never overwrites itself, and each member's writes stop at a limit: the
//! first slot ahead that a recording holding data still needs (one slot before it, kept
//! for the end marker). When no member has room, the oldest recording is reclaimed
//! ([`retention::reclaim`]: its entry marked, on every member, flushed) and the limits move
//! on; when it may not be (an archive does not hold it), the set is full; when a reader
//! holds it, the writer waits and tries again. A mark that keeps slots (format 1.7) is data
//! it never reclaims: the set is full up to it until the mark is released.

use super::member::MemberState;
use super::{RecordingFailure, Writer};
use crate::layout::{ReclaimCause, RecordingEntry, RecordingFlags};
use crate::recording::marks::release_hint;
use crate::recording::retention::{self, ReclaimPolicy, ReclaimRefused, Reclaimed, Refusal};
use crate::recording::RecordingError;
use std::sync::Arc;

/// The reclaim stage's state: the policy, the recordings of the set as the recording
/// began (oldest first, the recording being written left out), and what it reclaimed.
pub(super) struct Reclaimer {
    policy: ReclaimPolicy,
    entries: Vec<RecordingEntry>,
    reclaimed: Vec<Reclaimed>,
    /// Why the oldest recording was not reclaimed when room was needed, if it was not.
    refused: Option<ReclaimRefused>,
}

/// What reclaims a recording's space for the writer: [`retention::reclaim`] on the set, or
/// a stand-in in tests. It takes the oldest entry and the policy; it gives the entry as
/// written (flagged reclaimed), or why the policy or a reader keeps it.
pub(super) type ReclaimFn<'a> = dyn FnMut(
        &RecordingEntry,
        &ReclaimPolicy,
    ) -> Result<Result<RecordingEntry, Refusal>, RecordingError>
    + 'a;

impl Reclaimer {
    /// For `policy`, over the set's recordings (`entries`) and the marks that keep slots
    /// (`marks`, format 1.7): their slots are data it may not reclaim (see
    /// [`Reclaimer::make_room`]), so its limits stop before them.
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
            let (lap, start_lap, start_slot) = member.point.ring_start();
            let room = retention::room_slots(&self.entries, index, start_slot, lap).min(lap - 1);
            member
                .point
                .limit_to((start_lap * lap + start_slot + room).saturating_sub(1));
        }
    }

    /// No member has room: reclaims the oldest recording that holds data through `reclaim`,
    /// unless it is a kept mark (the set is full up to it). Made: the limits moved on. Wait:
    /// a reader holds it. None: the policy keeps it, or nothing is left (`refused` says
    /// why). Reclaiming that fails fails the recording.
    pub(super) fn make_room(
        &mut self,
        members: &mut [MemberState],
        reclaim: &mut ReclaimFn<'_>,
    ) -> Result<Room, RecordingFailure> {
        let Some(index) = self.entries.iter().position(retention::holds_data) else {
            return Ok(Room::None);
        };
        let entry = &self.entries[index];
        if entry.flags.contains(RecordingFlags::MARK) {
            self.refused = Some(release_hint(entry).into());
            return Ok(Room::None);
        }
        let recording_id = entry.recording_id;
        match reclaim(entry, &self.policy) {
            Ok(Ok(next)) => {
                self.reclaimed.push(retention::report_of(&next));
                self.entries[index] = next;
                self.refused = None;
                self.set_limits(members);
                Ok(Room::Made)
            }
            Ok(Err(Refusal::BeingRead)) => Ok(Room::Wait),
            Ok(Err(Refusal::Kept(why))) => {
                self.refused = Some(ReclaimRefused::Kept { recording_id, why });
                Ok(Room::None)
            }
            Err(error) => Err(RecordingFailure::Reclaim {
                recording_id,
                cause: Arc::new(error),
            }),
        }
    }

    /// The recordings it reclaimed, in the order they went.
    pub(super) fn reclaimed(&self) -> &[Reclaimed] {
        &self.reclaimed
    }

    /// Why the oldest recording was not reclaimed the last time room was needed.
    pub(super) fn refused(&self) -> Option<&ReclaimRefused> {
        self.refused.as_ref()
    }
}

/// What [`Reclaimer::make_room`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Room {
    /// A recording was reclaimed: try again.
    Made,
    /// A reader holds the oldest recording: wait, and try again later.
    Wait,
    /// Nothing more may be reclaimed: the set is full.
    None,
}

impl Writer<'_> {
    /// No member has room: the reclaimer reclaims the set's oldest recording, on the set, if
    /// the policy lets it (see [`Reclaimer::make_room`]).
    pub(super) fn make_room(&mut self) -> Room {
        let live = self.placement.live();
        let set = self.set;
        let Some(reclaimer) = self.reclaimer.as_mut() else {
            return Room::None;
        };
        let mut reclaim = |entry: &RecordingEntry, policy: &ReclaimPolicy| {
            retention::reclaim(set, entry, ReclaimCause::Space, Some(policy), &live)
        };
        match reclaimer.make_room(&mut self.placement.members, &mut reclaim) {
            Ok(room) => room,
            Err(failure) => {
                self.fail(failure);
                Room::None
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::layout::{Label, MarkOf, MemberSpan, Reclaim, RecordingState, Uuid};
    use crate::recording::retention::Kept;
    use crate::recording::writer::point::WritePoint;

    const LAP: u64 = 100;

    /// A closed recording (or a mark) whose data lies in `slots` of the one member.
    fn entry(recording_id: u32, slots: (u64, u64), mark: bool) -> RecordingEntry {
        RecordingEntry {
            set_uuid: Uuid::from_random_bytes([7; 16]),
            recording_id,
            revision: 2,
            state: RecordingState::Closed,
            flags: match mark {
                true => RecordingFlags::MARK,
                false => RecordingFlags::empty(),
            },
            first_sequence: 0,
            end_sequence: slots.1 - slots.0,
            start_ns: 0,
            end_ns: 1,
            stream_len_bytes: 1 << 20,
            lost_bytes: 0,
            name: Label::new("keep").unwrap(),
            members: vec![MemberSpan {
                start_slot_index: slots.0,
                end_slot_index: slots.1,
            }],
            retirements: Vec::new(),
            start_laps: Vec::new(),
            overwrote: Vec::new(),
            signal: None,
            reclaimed: None,
            mark_of: mark.then_some(MarkOf {
                recording_id: 9,
                stream_offset_bytes: 0,
                from_ns: 0,
            }),
        }
    }

    /// A reclaimer over recordings 1 (slots 10-20) and 2 (slots 30-40), or `first` in 1's
    /// place; one member starting at slot 0 of lap 0.
    fn reclaimer(first: RecordingEntry) -> (Reclaimer, Vec<MemberState>) {
        let member = MemberState {
            point: WritePoint::with_lap(LAP),
            ..MemberState::default()
        };
        let mut members = vec![member];
        let reclaimer = Reclaimer::new(
            ReclaimPolicy::Oldest,
            vec![entry(2, (30, 40), false), first],
            Vec::new(),
        );
        reclaimer.set_limits(&mut members);
        (reclaimer, members)
    }

    fn reclaimed(entry: &RecordingEntry) -> RecordingEntry {
        RecordingEntry {
            flags: entry.flags | RecordingFlags::RECLAIMED,
            reclaimed: Some(Reclaim {
                reclaimed_ns: 5,
                cause: ReclaimCause::Space,
                archived: false,
            }),
            ..entry.clone()
        }
    }

    #[test]
    fn the_oldest_is_reclaimed_and_the_limit_moves_on_to_the_next() {
        let (mut reclaimer, mut members) = reclaimer(entry(1, (10, 20), false));
        // Up to the slot before recording 1's data, less the end marker's.
        assert_eq!(members[0].point.limit(), Some(9));
        let mut asked = Vec::new();
        let mut reclaim = |entry: &RecordingEntry, _: &ReclaimPolicy| {
            asked.push(entry.recording_id);
            Ok(Ok(reclaimed(entry)))
        };
        let room = reclaimer.make_room(&mut members, &mut reclaim).unwrap();
        assert_eq!(room, Room::Made);
        assert_eq!(asked, [1], "the oldest first");
        assert_eq!(members[0].point.limit(), Some(29), "up to recording 2 now");
        let ids: Vec<u32> = reclaimer
            .reclaimed()
            .iter()
            .map(|r| r.recording_id)
            .collect();
        assert_eq!(ids, [1]);
        assert!(reclaimer.refused().is_none());
    }

    #[test]
    fn a_recording_the_policy_keeps_fills_the_set_and_says_why() {
        let (mut reclaimer, mut members) = reclaimer(entry(1, (10, 20), false));
        let mut reclaim =
            |_: &RecordingEntry, _: &ReclaimPolicy| Ok(Err(Refusal::Kept(Kept::NotArchived)));
        let room = reclaimer.make_room(&mut members, &mut reclaim).unwrap();
        assert_eq!(room, Room::None);
        assert!(matches!(
            reclaimer.refused(),
            Some(ReclaimRefused::Kept {
                recording_id: 1,
                why: Kept::NotArchived
            })
        ));
        assert_eq!(members[0].point.limit(), Some(9), "the limit stays");
        assert!(reclaimer.reclaimed().is_empty());
    }

    #[test]
    fn a_recording_being_read_makes_the_writer_wait_and_a_failure_fails_it() {
        let (mut reclaimer, mut members) = reclaimer(entry(1, (10, 20), false));
        let mut busy = |_: &RecordingEntry, _: &ReclaimPolicy| Ok(Err(Refusal::BeingRead));
        assert_eq!(
            reclaimer.make_room(&mut members, &mut busy).unwrap(),
            Room::Wait
        );
        let mut failing = |_: &RecordingEntry, _: &ReclaimPolicy| {
            Err(RecordingError::Usage("the entry write failed".into()))
        };
        let failure = reclaimer.make_room(&mut members, &mut failing).unwrap_err();
        assert!(
            matches!(
                failure,
                RecordingFailure::Reclaim {
                    recording_id: 1,
                    ..
                }
            ),
            "{failure}"
        );
        assert!(reclaimer.reclaimed().is_empty());
    }

    #[test]
    fn a_kept_mark_is_never_reclaimed_and_its_release_is_named() {
        let (mut reclaimer, mut members) = reclaimer(entry(1, (10, 20), true));
        let mut reclaim = |_: &RecordingEntry, _: &ReclaimPolicy| -> Result<_, RecordingError> {
            panic!("a kept mark is not offered for reclaiming")
        };
        let room = reclaimer.make_room(&mut members, &mut reclaim).unwrap();
        assert_eq!(room, Room::None);
        let Some(ReclaimRefused::Mark(hint)) = reclaimer.refused() else {
            panic!("{:?}", reclaimer.refused());
        };
        assert_eq!((hint.mark_id, hint.recording_id), (1, 9));
        assert_eq!(members[0].point.limit(), Some(9), "its slots are data");
    }

    #[test]
    fn with_everything_reclaimed_there_is_no_room_left() {
        let (mut reclaimer, mut members) = reclaimer(entry(1, (10, 20), false));
        let mut reclaim = |entry: &RecordingEntry, _: &ReclaimPolicy| Ok(Ok(reclaimed(entry)));
        for _ in 0..2 {
            assert_eq!(
                reclaimer.make_room(&mut members, &mut reclaim).unwrap(),
                Room::Made
            );
        }
        assert_eq!(
            reclaimer.make_room(&mut members, &mut reclaim).unwrap(),
            Room::None
        );
        // Nothing ahead holds data: a lap less one slot, less the end marker's.
        assert_eq!(members[0].point.limit(), Some(LAP - 2));
    }
}
