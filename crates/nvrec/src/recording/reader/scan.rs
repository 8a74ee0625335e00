//! A member's scan and which of its slots' chunks it takes: a chunk counts only if it
//! decodes (both CRC32Cs), belongs to this set and recording, names this member and slot,
//! and continues the member's increasing sequence; anything else inside a linear span is
//! damage, reported with the sequence the slot must have held where its neighbours tell.

use super::io::{flight_slot, reread_slots, ReadFlight};
use super::{holds_redirect, Damage, SlotUnreadable, KEPT_SCAN_QUEUE_DEPTH, SCAN_QUEUE_DEPTH};
use crate::buffer::BufferPool;
use crate::inflight::InFlight;
use crate::layout::{
    decode_chunk, ChunkFlags, ChunkHeader, RecordingEntry, RecordingFlags, Retirement,
};
use crate::recording::volume::VolumeSet;
use std::collections::VecDeque;

impl Scan {
    /// Reads this scan may have in flight: a member's [`SCAN_QUEUE_DEPTH`], a mark's kept
    /// slots [`KEPT_SCAN_QUEUE_DEPTH`].
    pub(super) fn queue_depth(&self) -> u32 {
        match self.kept_apart {
            true => KEPT_SCAN_QUEUE_DEPTH,
            false => SCAN_QUEUE_DEPTH,
        }
    }

    /// A scan of `runs` of member `member_index` (of `slot_count` slots), nothing read yet;
    /// `(ring_start_slot, ring_origin_slot)` as [`Scan`] says.
    pub(super) fn new(
        member_index: u16,
        runs: VecDeque<(u64, u64)>,
        slot_count: u64,
        (ring_start_slot, ring_origin_slot): (u64, u64),
    ) -> Scan {
        Scan {
            member_index,
            kept_apart: false,
            asleep_until_sequence: None,
            runs,
            flights: InFlight::with_capacity(SCAN_QUEUE_DEPTH as usize),
            cursor: 0,
            last_sequence: None,
            last_slot: None,
            unreadable: Vec::new(),
            head: None,
            exhausted: false,
            ring_start_slot,
            ring_origin_slot,
            slot_count,
            first: None,
            void_from_slot: None,
            redirected_sequences: Vec::new(),
            redirects: Vec::new(),
        }
    }
}

pub(super) struct Scan {
    pub(super) member_index: u16,
    /// The slots a mark keeps apart from the lap (see [`kept_scan`]).
    pub(super) kept_apart: bool,
    /// A mark's slots not read yet: none of the chunks they hold that the read wants comes
    /// before this sequence (their first slot's), so they are read once the merge gets
    /// there (see [`wake_kept`]): a ring's many marks take read memory only in turn.
    pub(super) asleep_until_sequence: Option<u64>,
    /// Slots still to be read, in order: (first, count) runs (two when a ring wraps).
    pub(super) runs: VecDeque<(u64, u64)>,
    /// Reads in flight, numbered by the low bits of their user_data.
    pub(super) flights: InFlight<ReadFlight>,
    /// Position in the head flight's slots.
    pub(super) cursor: u64,
    pub(super) last_sequence: Option<u64>,
    /// The slot of the chunk with `last_sequence`.
    pub(super) last_slot: Option<u64>,
    /// Slots that could not be read since the last good chunk, with why: reported when the
    /// next good chunk (or the end of the member) bounds the sequences they held.
    pub(super) unreadable: Vec<(u64, SlotUnreadable)>,
    /// The head chunk, decoded, waiting for the merge: (sequence, slot within head flight).
    pub(super) head: Option<(ChunkHeader, u64)>,
    pub(super) exhausted: bool,
    /// Ring: where the recording started on this member and where the scan starts (the
    /// write point), and the member's slot count: see [`Scan::overwrote`].
    pub(super) ring_start_slot: u64,
    pub(super) ring_origin_slot: u64,
    pub(super) slot_count: u64,
    /// The first chunk of the recording found on this member: its sequence, and whether
    /// the member overwrote its own older chunks of this recording (ring).
    pub(super) first: Option<(u64, bool)>,
    /// A retired member: from this slot to the end of its span, only chunks that completed
    /// here and were not redirected belong; other slots hold failed writes or leftovers.
    pub(super) void_from_slot: Option<u64>,
    /// For a retired member: the sequences that were redirected (sorted), whose copies here
    /// are leftovers.
    pub(super) redirected_sequences: Vec<u64>,
    /// The retirements whose redirected chunks went to this member: the slots that hold
    /// them are read separately (`Redirected`).
    pub(super) redirects: Vec<Retirement>,
}

impl Scan {
    /// Whether the oldest surviving chunk of a ring member, found at `slot`, shows that the
    /// member wrapped over its own start: a ring scan goes round from the write point, and
    /// a member that never wrapped holds the recording only from its start slot on. A chunk
    /// of the recording before the start slot in scan order was written on a later lap.
    /// (A member that wrote a whole number of laps, or whose earlier slots are all damaged,
    /// reads as not wrapped: the reader then reports the overwritten chunks as missing,
    /// never skips a surviving one.)
    pub(super) fn overwrote(&self, slot: u64) -> bool {
        let n = self.slot_count.max(1);
        let position = |slot: u64| (slot % n + n - self.ring_origin_slot % n) % n;
        position(slot) < position(self.ring_start_slot)
    }

    /// Whether `slot` lies past the end of a retired member's run of redirected chunks held
    /// here, before this member's next own chunk (linear spans only).
    pub(super) fn past_cut_run(&self, slot: u64, ring: bool) -> bool {
        !ring
            && self.redirects.iter().any(|r| {
                let end = r.redirect_first_slot + u64::from(r.redirect_slot_count);
                slot >= end && self.last_slot.is_none_or(|last| last < end)
            })
    }

    /// Whether `slot` lies where a retired member's writes may have failed: from its first
    /// unfinished write on (in a ring, onwards to the write point in lap order).
    pub(super) fn in_void(&self, slot: u64, ring: bool) -> bool {
        let Some(from) = self.void_from_slot else {
            return false;
        };
        if !ring {
            return slot >= from;
        }
        // Positions count from the write point, where the void ends: a void that starts
        // there is empty (the member had nothing outstanding).
        let n = self.slot_count.max(1);
        let position = |slot: u64| (slot % n + n - self.ring_origin_slot % n) % n;
        position(from) != 0 && position(slot) >= position(from)
    }
}

/// A good chunk on a member: its slot and its sequence.
pub(super) type Placed = (u64, u64);

/// Reports the slots of `scan` that could not be read since its last good chunk, each with
/// the sequence it must have held where the member's chunks around it tell, else the
/// range that sequence lies in. `next` is the good chunk after them (slot, sequence);
/// `None` at the end of the member's span.
pub(super) fn report_unreadable(
    scan: &mut Scan,
    set: &VolumeSet,
    entry: &RecordingEntry,
    next: Option<Placed>,
    damages: &mut Vec<Damage>,
) {
    let prev = scan.last_slot.zip(scan.last_sequence);
    for (slot, error) in std::mem::take(&mut scan.unreadable) {
        let alone = set.member_count() == 1;
        let exact = expected_sequence(scan, alone, entry, prev, next, slot);
        let low = prev.map_or(entry.first_sequence, |(_, q)| q.saturating_add(1));
        let high = next.map_or(entry.end_sequence, |(_, q)| q);
        let what = if exact.is_none() && low < high {
            format!("read failed: {error}; it held one of sequences {low}..{high}")
        } else {
            format!("read failed: {error}")
        };
        damages.push(Damage::at(set, scan.member_index, slot, exact, what));
    }
}

/// The sequence an unreadable `slot` of a linear recording held, from the good chunks
/// around it on its member (slot, sequence): exact when every sequence between them went
/// to this member, or when the set has one member (`alone`: its slots hold consecutive
/// sequences).
pub(super) fn expected_sequence(
    scan: &Scan,
    alone: bool,
    entry: &RecordingEntry,
    prev: Option<Placed>,
    next: Option<Placed>,
    slot: u64,
) -> Option<u64> {
    let linear = !entry.flags.contains(RecordingFlags::RING)
        && scan.void_from_slot.is_none()
        && scan.redirects.is_empty();
    if !linear {
        return None;
    }
    let after = |(ps, pq): (u64, u64)| pq.checked_add(slot.checked_sub(ps)?);
    let before = |(ns, nq): (u64, u64)| nq.checked_sub(ns.checked_sub(slot)?);
    let sequence = match (prev, next) {
        (Some(p), Some(n)) if n.1.checked_sub(p.1) == n.0.checked_sub(p.0) => after(p),
        (Some(_), Some(_)) => None,
        (Some(p), None) if alone => after(p),
        (None, Some(n)) if alone => before(n),
        (None, None) if alone => entry
            .first_sequence
            .checked_add(slot.checked_sub(scan.ring_start_slot)?),
        _ => None,
    };
    sequence.filter(|q| (entry.first_sequence..entry.end_sequence).contains(q))
}

/// Moves a member's cursor to its next chunk of the recording, if its data has arrived.
pub(super) fn advance(
    scan: &mut Scan,
    set: &VolumeSet,
    entry: &RecordingEntry,
    pool: &BufferPool,
    free: &mut Vec<u32>,
    damages: &mut Vec<Damage>,
    chunk_bytes: u64,
) {
    while front_slot_ready(scan, set, entry, free, damages, chunk_bytes) {
        let (flight, _) = scan.flights.front().expect("a slot is ready");
        let slot_index = flight.first_slot + scan.cursor;
        match flight_slot(pool, flight, scan.cursor, chunk_bytes) {
            Ok(bytes) => {
                if let Some(header) = next_chunk(scan, set, entry, slot_index, bytes, damages) {
                    scan.take_head(set, entry, header, slot_index, damages);
                    return;
                }
            }
            Err(error) => {
                // Reported once the member's next good chunk tells what it held.
                scan.unreadable.push((slot_index, error));
            }
        }
        scan.cursor += 1;
    }
}

/// Brings `scan` to a slot of its front read that can be looked at: reads done with are
/// freed, the slots of a failed one read again one by one. Returns false where there is
/// none yet (its read is in flight) or none left (the scan is then exhausted).
pub(super) fn front_slot_ready(
    scan: &mut Scan,
    set: &VolumeSet,
    entry: &RecordingEntry,
    free: &mut Vec<u32>,
    damages: &mut Vec<Damage>,
    chunk_bytes: u64,
) -> bool {
    loop {
        let Some((flight, done)) = scan.flights.front() else {
            if scan.runs.is_empty() {
                scan.exhausted = true;
                report_unreadable(scan, set, entry, None, damages);
            }
            return false;
        };
        if !done {
            return false;
        }
        if scan.cursor >= flight.slot_count {
            free.push(flight.buffer);
            scan.flights.pop_front();
            scan.cursor = 0;
            continue;
        }
        if flight.failed.is_some() && flight.reread.is_empty() {
            let number = scan.flights.front_number();
            let flight = scan.flights.get_mut(number).expect("the front read");
            reread_slots(set, scan.member_index, flight, chunk_bytes);
            continue;
        }
        return true;
    }
}

/// The chunk `bytes` hold at `slot_index`, if it is the member's next chunk of the
/// recording; damage where the slot holds what it should not.
pub(super) fn next_chunk(
    scan: &Scan,
    set: &VolumeSet,
    entry: &RecordingEntry,
    slot_index: u64,
    bytes: &[u8],
    damages: &mut Vec<Damage>,
) -> Option<ChunkHeader> {
    let ring = entry.flags.contains(RecordingFlags::RING);
    let damage = |what: String, sequence: Option<u64>| {
        Damage::at(set, scan.member_index, slot_index, sequence, what)
    };
    // A retired member's failed writes are not damage: what they should have held was
    // written elsewhere, and anything missing is reported by sequence. Nor are the
    // slots past the end of a redirected run this member holds, up to its next own
    // chunk: writes sent again there that did not land (a run is cut at its first
    // failed write; the rest are given up and reported when the recording ends).
    let in_void = scan.in_void(slot_index, ring) || scan.past_cut_run(slot_index, ring);
    let header = match decode_chunk(bytes) {
        Ok(view) => view.header,
        Err(error) => {
            if !ring && !in_void {
                let sequence = crate::layout::decode_chunk_header(bytes)
                    .ok()
                    .map(|h| h.sequence);
                damages.push(damage(format!("chunk does not decode: {error}"), sequence));
            }
            return None;
        }
    };
    let ours = header.set_uuid == set.set_uuid && header.recording_id == entry.recording_id;
    let in_range = header.sequence >= entry.first_sequence && header.sequence < entry.end_sequence;
    if ours && in_range {
        if scan.read_elsewhere(&header, slot_index, in_void) {
            return None;
        }
        return own_chunk(scan, ring, slot_index, header, damages, damage);
    }
    if ours && header.sequence >= entry.end_sequence {
        // Written past the end the entry claims (a failed recording ends at its
        // last complete run): not part of the recording.
    } else if !ring && !in_void {
        // In a linear span every slot belongs to the recording.
        damages.push(damage(
            format!(
                "slot holds another chunk (recording {}, sequence {})",
                header.recording_id, header.sequence
            ),
            Some(header.sequence),
        ));
    }
    None
}

/// `header`, a chunk of the recording in its range found at `slot_index`, if it is where
/// it says and continues the member's sequence; damage otherwise.
pub(super) fn own_chunk(
    scan: &Scan,
    ring: bool,
    slot_index: u64,
    header: ChunkHeader,
    damages: &mut Vec<Damage>,
    damage: impl Fn(String, Option<u64>) -> Damage,
) -> Option<ChunkHeader> {
    if header.member_index != scan.member_index || header.slot_index != slot_index {
        damages.push(damage(
            format!(
                "misplaced chunk: says member {} slot {}",
                header.member_index, header.slot_index
            ),
            Some(header.sequence),
        ));
        return None;
    }
    if scan
        .last_sequence
        .is_some_and(|last| header.sequence <= last)
    {
        // In a ring, an older chunk after newer ones is a lap's leftover (the
        // sequences it stood for are reported missing if nothing newer came).
        if !ring {
            damages.push(damage(
                "sequence out of order on this member".into(),
                Some(header.sequence),
            ));
        }
        return None;
    }
    Some(header)
}

impl Scan {
    /// Whether a chunk of the recording found at `slot` is read with the redirected
    /// chunks, or is a retired member's write that was sent again elsewhere (`in_void`:
    /// the slot lies where the member's writes may have failed).
    pub(super) fn read_elsewhere(&self, header: &ChunkHeader, slot: u64, in_void: bool) -> bool {
        let redirected = header.flags.contains(ChunkFlags::REDIRECTED);
        let read_with_redirects = redirected
            && self
                .redirects
                .iter()
                .any(|r| holds_redirect(r, self.slot_count, slot));
        let leftover = in_void
            && self
                .redirected_sequences
                .binary_search(&header.sequence)
                .is_ok();
        // A write sent again here past the run that counts it (see `in_void`).
        let stray_rewrite = in_void && redirected;
        read_with_redirects || leftover || stray_rewrite
    }

    /// Makes `header`, found at `slot_index`, the scan's head: the member's next chunk,
    /// which bounds the sequences its unreadable slots before it held.
    pub(super) fn take_head(
        &mut self,
        set: &VolumeSet,
        entry: &RecordingEntry,
        header: ChunkHeader,
        slot_index: u64,
        damages: &mut Vec<Damage>,
    ) {
        if self.first.is_none() {
            let ring = entry.flags.contains(RecordingFlags::RING);
            // The entry says which members wrapped where it knows (1.1); else the scan
            // tells.
            let overwrote = match entry.overwrote.get(self.member_index as usize) {
                Some(&known) => known,
                None => self.overwrote(slot_index),
            };
            self.first = Some((header.sequence, ring && overwrote));
        }
        let next = Some((slot_index, header.sequence));
        report_unreadable(self, set, entry, next, damages);
        self.last_sequence = Some(header.sequence);
        self.last_slot = Some(slot_index);
        self.head = Some((header, self.cursor));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::layout::{sample_entry, RecordingState};

    /// A scan of member 1 of 100 slots, its recording starting at slot 40 and the scan at
    /// the write point, slot 70.
    fn scan() -> Scan {
        Scan::new(1, VecDeque::from([(70, 30), (0, 70)]), 100, (40, 70))
    }

    fn linear() -> RecordingEntry {
        RecordingEntry {
            flags: RecordingFlags::empty(),
            state: RecordingState::Closed,
            first_sequence: 1000,
            end_sequence: 2000,
            ..sample_entry()
        }
    }

    #[test]
    fn a_ring_member_wrapped_where_its_oldest_chunk_lies_before_its_start_in_scan_order() {
        let scan = scan();
        // From the write point (70): 70..99, then 0..69; the start (40) comes at 70.
        assert!(scan.overwrote(75));
        assert!(scan.overwrote(10));
        assert!(!scan.overwrote(40));
        assert!(!scan.overwrote(55));
    }

    #[test]
    fn a_retired_members_void_runs_from_its_first_failed_write_to_the_write_point() {
        let mut scan = scan();
        assert!(!scan.in_void(10, true), "no void");
        scan.void_from_slot = Some(20);
        assert!(scan.in_void(20, true) && scan.in_void(69, true));
        assert!(!scan.in_void(70, true) && !scan.in_void(19, true));
        assert!(scan.in_void(20, false) && scan.in_void(99, false));
        assert!(!scan.in_void(19, false));
        // A void that starts at the write point is empty.
        scan.void_from_slot = Some(70);
        assert!(!scan.in_void(75, true) && !scan.in_void(10, true));
    }

    #[test]
    fn an_unreadable_slot_is_given_its_sequence_only_where_the_neighbours_tell() {
        let scan = Scan::new(0, VecDeque::new(), 100, (10, 0));
        let entry = linear();
        let expect =
            |alone, prev, next, slot| expected_sequence(&scan, alone, &entry, prev, next, slot);
        // Every sequence between the neighbours on this member: exact.
        assert_eq!(
            expect(false, Some((20, 1010)), Some((25, 1015)), 22),
            Some(1012)
        );
        // Sequences between went elsewhere: unknown.
        assert_eq!(expect(false, Some((20, 1010)), Some((25, 1030)), 22), None);
        // One member: consecutive from either neighbour, or from the start.
        assert_eq!(expect(true, Some((20, 1010)), None, 23), Some(1013));
        assert_eq!(expect(true, None, Some((25, 1015)), 21), Some(1011));
        assert_eq!(expect(true, None, None, 14), Some(1004));
        assert_eq!(expect(false, None, None, 14), None);
        // Never outside the recording's sequences.
        assert_eq!(expect(true, Some((20, 1995)), None, 30), None);
    }

    fn header(member_index: u16, slot_index: u64, sequence: u64) -> ChunkHeader {
        ChunkHeader {
            member_index,
            slot_index,
            sequence,
            ..crate::layout::sample_chunk_header()
        }
    }

    #[test]
    fn a_chunk_counts_where_it_says_it_lies_and_continues_its_members_sequence() {
        let mut scan = Scan::new(0, VecDeque::new(), 100, (0, 0));
        scan.last_sequence = Some(1010);
        let mut damages = Vec::new();
        let damage = |what: String, sequence: Option<u64>| Damage {
            member_index: 0,
            member_path: "m0".into(),
            slot_index: 12,
            offset_bytes: 0,
            sequence,
            what,
        };
        let taken = own_chunk(&scan, false, 12, header(0, 12, 1011), &mut damages, damage);
        assert_eq!(taken.map(|h| h.sequence), Some(1011));
        assert!(damages.is_empty());
        // Says another slot or member: misplaced.
        assert!(own_chunk(&scan, false, 12, header(0, 13, 1011), &mut damages, damage).is_none());
        assert!(own_chunk(&scan, false, 12, header(1, 12, 1011), &mut damages, damage).is_none());
        assert_eq!(damages.len(), 2);
        assert!(damages
            .iter()
            .all(|d| d.what.starts_with("misplaced chunk")));
        // Behind the member's sequence: damage in a linear span, a lap's leftover in a ring.
        damages.clear();
        assert!(own_chunk(&scan, false, 12, header(0, 12, 1010), &mut damages, damage).is_none());
        assert_eq!(damages[0].what, "sequence out of order on this member");
        damages.clear();
        assert!(own_chunk(&scan, true, 12, header(0, 12, 1002), &mut damages, damage).is_none());
        assert!(damages.is_empty());
    }
}
