//! Redirected chunks: the chunks a retired member's unfinished writes became on another
//! member (format 1.1, `docs/FORMAT.md` 5.3), where its retirement record says they lie,
//! read ahead of the scans and merged in by sequence.

use super::Damage;
use crate::control::{Control, ControlState};
use crate::layout::{
    decode_chunk, ChunkFlags, ChunkHeader, RecordingEntry, RecordingFlags, RecordingState,
    Retirement,
};
use crate::recording::volume::{self, VolumeSet};
use crate::recording::RecordingError;
use std::collections::VecDeque;

/// The chunks a retired member's unfinished writes became on other members, read ahead
/// (a retirement redirects at most a queue of writes) and merged in by sequence.
pub(super) struct Redirected {
    chunks: VecDeque<(ChunkHeader, Vec<u8>)>,
}

impl Redirected {
    /// Reads the redirected runs of every retirement of `entry`. Slots of a linear
    /// recording that do not hold the chunk they should are reported as damage, and so is
    /// a retirement record that names slots the redirect member does not have (only its
    /// slots are read). Stops early when `control` says so.
    pub(super) fn read(
        set: &VolumeSet,
        entry: &RecordingEntry,
        control: &Control,
        damages: &mut Vec<Damage>,
    ) -> Result<Redirected, RecordingError> {
        let mut chunks = Vec::new();
        for retirement in &entry.retirements {
            let Some(member) = set
                .members
                .get(retirement.redirect_member as usize)
                .and_then(|m| m.as_ref())
            else {
                continue;
            };
            if retirement.first_sequence >= entry.end_sequence {
                // Every chunk it redirected lies past the recording's end (a crash before
                // they were durable): the recording claims none of them.
                continue;
            }
            let slot_count = member.layout().data_slot_count;
            if !redirect_fits(retirement, slot_count) {
                damages.push(Damage::at(
                    set,
                    retirement.redirect_member,
                    retirement.redirect_first_slot,
                    None,
                    format!(
                        "the retirement of member {} names {} redirected slots from slot {} in \
                         laps of {}, beyond the member's {slot_count} data slots: only those \
                         it has are read",
                        retirement.member_index,
                        retirement.redirect_slot_count,
                        retirement.redirect_first_slot,
                        retirement.redirect_lap_slots
                    ),
                ));
            }
            for slot in redirect_slots(retirement, slot_count) {
                if control.state() != ControlState::Run {
                    break;
                }
                if let Some(chunk) = read_redirected(set, entry, member, retirement, slot, damages)
                {
                    chunks.push(chunk);
                }
            }
        }
        chunks.sort_by_key(|(header, _)| header.sequence);
        Ok(Redirected {
            chunks: chunks.into(),
        })
    }

    /// The sequence of the next redirected chunk the merge takes.
    pub(super) fn next_sequence(&self) -> Option<u64> {
        self.chunks.front().map(|(header, _)| header.sequence)
    }

    /// The headers of the redirected chunks not taken yet, in sequence order.
    pub(super) fn headers(&self) -> impl Iterator<Item = &ChunkHeader> {
        self.chunks.iter().map(|(header, _)| header)
    }

    /// The next redirected chunk, taken.
    pub(super) fn pop_front(&mut self) -> Option<(ChunkHeader, Vec<u8>)> {
        self.chunks.pop_front()
    }
}

/// Reads one slot of a redirected run: its chunk, if it holds the redirected chunk of this
/// recording that it should; damage otherwise (in a linear recording).
fn read_redirected(
    set: &VolumeSet,
    entry: &RecordingEntry,
    member: &volume::Member,
    retirement: &Retirement,
    slot: u64,
    damages: &mut Vec<Damage>,
) -> Option<(ChunkHeader, Vec<u8>)> {
    let ring = entry.flags.contains(RecordingFlags::RING);
    let layout = member.layout();
    let offset = layout.data_slot_offset_bytes(slot)?;
    let damage = |what: String, sequence: Option<u64>| {
        Damage::at(set, retirement.redirect_member, slot, sequence, what)
    };
    let bytes = match volume::read_aligned(&member.disk, offset, layout.chunk_size_bytes as usize) {
        Ok(bytes) => bytes,
        Err(error) => {
            damages.push(damage(format!("read failed: {error}"), None));
            return None;
        }
    };
    let in_range =
        |h: &ChunkHeader| h.sequence >= entry.first_sequence && h.sequence < entry.end_sequence;
    match decode_chunk(&bytes) {
        Ok(view)
            if view.header.set_uuid == set.set_uuid
                && view.header.recording_id == entry.recording_id
                && view.header.member_index == retirement.redirect_member
                && view.header.slot_index == slot
                && view.header.flags.contains(ChunkFlags::REDIRECTED) =>
        {
            if in_range(&view.header) {
                let payload = bytes[view.header.payload_range()].to_vec();
                return Some((view.header, payload));
            }
            if view.header.sequence >= entry.end_sequence {
                // Written past the end the entry claims (a crash before it was durable, or
                // a failed recording that ends at its last complete run): not part of the
                // recording, as on the member's own slots.
                return None;
            }
            damages.push(damage(
                format!(
                    "redirected chunk outside the recording's sequences {}..{}",
                    entry.first_sequence, entry.end_sequence
                ),
                Some(view.header.sequence),
            ));
        }
        // In a ring, a later lap may have overwritten it, or a trim ahead of a later lap
        // discarded it: what it held is then older than the surviving run, and a sequence
        // the run still needs is reported missing by the merge.
        _ if ring => {}
        // After a crash, a redirected write that never became durable left its slot blank;
        // if the recording claims its sequence, the merge reports that sequence missing.
        Err(crate::layout::LayoutError::Blank { .. })
            if entry.state == RecordingState::Interrupted => {}
        // A redirected write past the end the entry claims, torn by the crash: its header
        // names it, and it is no part of the recording either.
        Err(_)
            if crate::layout::decode_chunk_header(&bytes).is_ok_and(|h| {
                h.set_uuid == set.set_uuid
                    && h.recording_id == entry.recording_id
                    && h.member_index == retirement.redirect_member
                    && h.slot_index == slot
                    && h.sequence >= entry.end_sequence
            }) => {}
        Ok(view) => damages.push(damage(
            "redirected chunk missing".into(),
            Some(view.header.sequence),
        )),
        Err(error) => damages.push(damage(format!("chunk does not decode: {error}"), None)),
    }
    None
}

/// Whether `retirement`'s redirected run lies within a member of `slot_count` data slots.
fn redirect_fits(retirement: &Retirement, slot_count: u64) -> bool {
    let lap = retirement.redirect_lap_slots;
    retirement.redirect_slot_count == 0
        || lap <= slot_count
            && retirement.redirect_first_slot < lap
            && u64::from(retirement.redirect_slot_count) <= lap
}

/// The lap and first slot of `retirement`'s redirected run, cut to a member of
/// `slot_count` slots: a damaged or forged record never makes the reader go round more
/// than the member's slots, nor compute past 2^64.
fn redirect_lap(retirement: &Retirement, slot_count: u64) -> (u64, u64, u64) {
    let lap = retirement.redirect_lap_slots.min(slot_count).max(1);
    let count = u64::from(retirement.redirect_slot_count).min(lap);
    (lap, retirement.redirect_first_slot % lap, count)
}

/// The slots that took `retirement`'s redirected chunks, in order, within the member.
fn redirect_slots(retirement: &Retirement, slot_count: u64) -> impl Iterator<Item = u64> {
    let (lap, first, count) = redirect_lap(retirement, slot_count);
    (0..count).map(move |i| (first + i) % lap)
}

/// Whether `slot` took one of `retirement`'s redirected chunks (within the member).
pub(crate) fn holds_redirect(retirement: &Retirement, slot_count: u64, slot: u64) -> bool {
    let (lap, first, count) = redirect_lap(retirement, slot_count);
    slot < lap && (slot + lap - first) % lap < count
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::layout::sample_retirement;

    /// A retirement whose `count` redirected chunks went from `first` in laps of `lap`.
    fn redirect(first: u64, count: u32, lap: u64) -> Retirement {
        Retirement {
            redirect_first_slot: first,
            redirect_slot_count: count,
            redirect_lap_slots: lap,
            ..sample_retirement()
        }
    }

    #[test]
    fn a_redirected_run_goes_round_its_lap_and_no_further() {
        let slots: Vec<u64> = redirect_slots(&redirect(98, 4, 100), 100).collect();
        assert_eq!(slots, vec![98, 99, 0, 1]);
        for slot in [98, 99, 0, 1] {
            assert!(holds_redirect(&redirect(98, 4, 100), 100, slot), "{slot}");
        }
        for slot in [2, 97, 100, 5000] {
            assert!(!holds_redirect(&redirect(98, 4, 100), 100, slot), "{slot}");
        }
        assert_eq!(redirect_slots(&redirect(7, 0, 100), 100).count(), 0);
    }

    #[test]
    fn a_record_that_names_slots_the_member_lacks_is_cut_to_the_member() {
        // Fits: within a lap that fits the member.
        assert!(redirect_fits(&redirect(10, 8, 100), 100));
        assert!(
            redirect_fits(&redirect(u64::MAX, 0, u64::MAX), 1),
            "names no slot"
        );
        // A lap larger than the member, a first slot past the lap, a run longer than a lap.
        assert!(!redirect_fits(&redirect(10, 8, 200), 100));
        assert!(!redirect_fits(&redirect(100, 8, 100), 100));
        assert!(!redirect_fits(&redirect(0, 101, 100), 100));
        // Whatever it says, the slots read stay within the member and never wrap 2^64.
        let forged = redirect(u64::MAX, u32::MAX, u64::MAX);
        let slots: Vec<u64> = redirect_slots(&forged, 64).collect();
        assert_eq!(slots.len(), 64);
        assert!(slots.iter().all(|&slot| slot < 64));
        assert!(redirect_slots(&redirect(3, 5, 0), 64).all(|slot| slot == 0));
    }
}
