//! Where a window's read begins: each member's scan moved to the chunk that was filling at
//! the window's start, found by binary search over chunk headers, never by reading what
//! comes before.

use super::holds_redirect;
use super::scan::Scan;
use crate::layout::{ChunkFlags, ChunkHeader, LayoutError, RecordingEntry, RecordingFlags, Uuid};
use crate::recording::seek;
use crate::recording::volume::{self, VolumeSet};

/// Moves every member's scan to where the window from `from_ns` begins: the chunk before
/// the first that began at `from_ns` or later (each member's first found by
/// [`seek::first_at_or_after`], the one before on its member by [`seek::last_own_before`]),
/// since it was filling at `from_ns` and records are taken by their own time, or that first
/// chunk where the one before is not the recording's (or not the ring's any more). Returns
/// the sequence the merge starts at: the lowest of the first chunks, of `redirected_low`
/// (the lowest redirected chunk that began at `from_ns` or later) and of a retired member's
/// failed writes (its void, read header by header), less one, and in a ring never before
/// the oldest run without a hole (the newest of the oldest chunks of the members that
/// wrapped over their own start). None, leaving the scans as they were, where any member's
/// search gave up, or a ring's entry does not say which members wrapped (a crashed one
/// before recovery wrote it).
pub(super) fn seek_window(
    set: &VolumeSet,
    entry: &RecordingEntry,
    scans: &mut [Scan],
    from_ns: u64,
    redirected_low: Option<u64>,
) -> Option<u64> {
    let ring = entry.flags.contains(RecordingFlags::RING);
    if ring && entry.overwrote.len() != set.member_count() {
        return None;
    }
    let mut starts = Vec::with_capacity(scans.len());
    let mut run_start = entry.first_sequence;
    for scan in scans.iter() {
        let Some(member) = set.members[scan.member_index as usize].as_ref() else {
            starts.push(None);
            continue;
        };
        let runs: Vec<(u64, u64)> = scan.runs.iter().copied().collect();
        let held = |slot| held_by(set, entry, member, scan, slot);
        // A mark's slots hold chunks older than the lap's, or within its run: never the
        // start of the run the lap holds.
        let wrapped = ring && !scan.kept_apart && entry.overwrote[scan.member_index as usize];
        if wrapped {
            match seek::first_own(&runs, held) {
                seek::Start::At { sequence, .. } => run_start = run_start.max(sequence),
                seek::Start::Past => {}
                seek::Start::GaveUp | seek::Start::Within { .. } => return None,
            }
        }
        // A retired member's slots from its first unfinished write on hold failed writes
        // (blank, often many) among leftovers: searched before them, read from there on.
        let searched = match scan.void_from_slot.filter(|_| !ring) {
            Some(void) => seek::runs_before_slot(&runs, void),
            None => runs.clone(),
        };
        match seek::first_at_or_after(&searched, from_ns, held) {
            seek::Start::GaveUp => return None,
            seek::Start::Past if searched != runs => {
                let position = seek::run_slots(&searched);
                let void = seek::runs_from(&runs, position);
                let low = void_low(set, entry, member, &void, from_ns)?;
                starts.push(Some((runs, seek::Start::Within { position, low })));
            }
            start => starts.push(Some((runs, start))),
        }
    }
    let mut lowest: Option<u64> = redirected_low;
    let mut lower = |sequence: u64| {
        lowest = Some(lowest.map_or(sequence, |low: u64| low.min(sequence)));
    };
    let mut positions: Vec<Option<Place>> = Vec::with_capacity(scans.len());
    for start in starts {
        positions.push(start.map(|(runs, start)| {
            let position = match start {
                seek::Start::At {
                    position, sequence, ..
                } => {
                    lower(sequence);
                    position
                }
                seek::Start::Within { position, low } => {
                    low.into_iter().for_each(&mut lower);
                    position
                }
                _ => seek::run_slots(&runs),
            };
            (runs, position)
        }));
    }
    // No member holds a chunk that began at `from_ns` or later: the last may have been
    // filling then.
    let first_after = run_start.max(lowest.unwrap_or(entry.end_sequence));
    let filling = first_after.checked_sub(1).filter(|&s| s >= run_start);
    if let Some(filling) = filling {
        step_back_to(set, entry, scans, &mut positions, filling)?;
    }
    for (scan, place) in scans.iter_mut().zip(positions) {
        if let Some((runs, position)) = place {
            scan.runs = seek::runs_from(&runs, position).into();
        }
    }
    Some(filling.unwrap_or(first_after))
}

/// A member's runs, and the position in them its read of a window starts at.
type Place = (Vec<(u64, u64)>, u64);

/// Moves the scan whose member holds chunk `filling` just before its position back to it
/// (none does where it was redirected, read with those, or is lost: the merge says so).
/// None where a member's probe back cannot tell.
fn step_back_to(
    set: &VolumeSet,
    entry: &RecordingEntry,
    scans: &[Scan],
    positions: &mut [Option<Place>],
    filling: u64,
) -> Option<()> {
    for (scan, place) in scans.iter().zip(positions.iter_mut()) {
        let (Some((runs, position)), Some(member)) =
            (place, set.members[scan.member_index as usize].as_ref())
        else {
            continue;
        };
        let held = |slot| held_by(set, entry, member, scan, slot);
        match seek::last_own_before(runs, *position, held) {
            seek::Before::GaveUp => return None,
            seek::Before::At {
                position: at,
                sequence,
            } if sequence == filling => *position = at,
            _ => {}
        }
    }
    Some(())
}

/// What `slot` of the member `scan` reads holds, for [`seek`]: a slot its redirects name
/// without a read, else its header.
fn held_by(
    set: &VolumeSet,
    entry: &RecordingEntry,
    member: &volume::Member,
    scan: &Scan,
    slot: u64,
) -> seek::Held {
    match scan
        .redirects
        .iter()
        .any(|r| holds_redirect(r, scan.slot_count, slot))
    {
        true => seek::Held::Elsewhere,
        false => held_at(set, entry, member, slot),
    }
}

/// The lowest sequence of the chunks in a retired member's `void` (its slots from its first
/// unfinished write on) that began at `from_ns` or later and were not sent again elsewhere
/// (those are read with the redirected ones). None, to give up the search, where the void
/// is longer than [`VOID_SLOTS_READ_MAX`] or a header there cannot be read.
fn void_low(
    set: &VolumeSet,
    entry: &RecordingEntry,
    member: &volume::Member,
    void: &[(u64, u64)],
    from_ns: u64,
) -> Option<Option<u64>> {
    if seek::run_slots(void) > VOID_SLOTS_READ_MAX {
        return None;
    }
    let mut low: Option<u64> = None;
    for slot in void.iter().flat_map(|&(first, count)| first..first + count) {
        match held_at(set, entry, member, slot) {
            seek::Held::Own {
                sequence,
                timestamp_ns,
            } if timestamp_ns >= from_ns => {
                low = Some(low.map_or(sequence, |l: u64| l.min(sequence)));
            }
            seek::Held::Unknown => return None,
            _ => {}
        }
    }
    Some(low)
}

/// The most slots of a retired member's void a window's search reads header by header.
const VOID_SLOTS_READ_MAX: u64 = 4096;

/// What slot `slot` of `member` holds, for [`seek`]: one header block read.
fn held_at(
    set: &VolumeSet,
    entry: &RecordingEntry,
    member: &volume::Member,
    slot: u64,
) -> seek::Held {
    let layout = member.layout();
    let Some(offset) = layout.data_slot_offset_bytes(slot) else {
        return seek::Held::Unknown;
    };
    let Ok(bytes) = volume::read_meta(&member.disk, offset, layout.meta_block_bytes) else {
        return seek::Held::Unknown;
    };
    let decoded = crate::layout::decode_chunk_header(&bytes);
    held_of(decoded, (set.set_uuid, entry), (member.index(), slot))
}

/// What a slot whose header decoded as `decoded` holds, for [`seek`]: a chunk of `entry`
/// of set `set_uuid` where it says it lies (member, slot), not redirected there, and in
/// the recording's sequences; a blank slot or anything else is another's; a header that
/// does not decode is unknown.
fn held_of(
    decoded: Result<ChunkHeader, LayoutError>,
    (set_uuid, entry): (Uuid, &RecordingEntry),
    (member_index, slot): (u16, u64),
) -> seek::Held {
    let header = match decoded {
        Ok(header) => header,
        Err(LayoutError::Blank { .. }) => return seek::Held::Other,
        Err(_) => return seek::Held::Unknown,
    };
    let own = header.set_uuid == set_uuid
        && header.recording_id == entry.recording_id
        && header.member_index == member_index
        && header.slot_index == slot
        && !header.flags.contains(ChunkFlags::REDIRECTED)
        && (entry.first_sequence..entry.end_sequence).contains(&header.sequence);
    match own {
        true => seek::Held::Own {
            sequence: header.sequence,
            timestamp_ns: header.time_ns(entry.start_ns),
        },
        false => seek::Held::Other,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::layout::{sample_chunk_header, sample_entry, Structure};

    #[test]
    fn a_slot_holds_the_recordings_own_chunk_only_where_its_header_says_so() {
        let entry = RecordingEntry {
            first_sequence: 100,
            end_sequence: 200,
            start_ns: 1_000,
            ..sample_entry()
        };
        let own = ChunkHeader {
            set_uuid: entry.set_uuid,
            recording_id: entry.recording_id,
            member_index: 1,
            slot_index: 7,
            sequence: 150,
            flags: ChunkFlags::empty(),
            ..sample_chunk_header()
        };
        let held = |header: ChunkHeader| held_of(Ok(header), (entry.set_uuid, &entry), (1, 7));
        assert!(matches!(held(own), seek::Held::Own { sequence: 150, .. }));
        let others = [
            ChunkHeader {
                set_uuid: Uuid([9; 16]),
                ..own
            },
            ChunkHeader {
                recording_id: 99,
                ..own
            },
            ChunkHeader {
                member_index: 0,
                ..own
            },
            ChunkHeader {
                slot_index: 8,
                ..own
            },
            ChunkHeader {
                sequence: 200,
                ..own
            },
            ChunkHeader {
                flags: ChunkFlags::REDIRECTED,
                ..own
            },
        ];
        for other in others {
            assert!(matches!(held(other), seek::Held::Other), "{other:?}");
        }
        let blank = Err(LayoutError::Blank {
            structure: Structure::ChunkHeader,
        });
        assert!(matches!(
            held_of(blank, (entry.set_uuid, &entry), (1, 7)),
            seek::Held::Other
        ));
        let torn = Err(LayoutError::BadMagic {
            structure: Structure::ChunkHeader,
            expected: *b"NVRECCHK",
            found: [0xff; 8],
        });
        assert!(matches!(
            held_of(torn, (entry.set_uuid, &entry), (1, 7)),
            seek::Held::Unknown
        ));
    }
}
