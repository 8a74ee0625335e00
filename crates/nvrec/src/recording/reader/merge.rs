//! The merge: the members' scans and the redirected chunks taken in sequence order, the
//! sequences no member holds reported missing, and each chunk, hole and damage handed out
//! in order.

use super::io::{flight_slot, ScanReads};
use super::scan::{advance, Scan};
use super::{wake_kept, Damage, Item, ReadSummary, Redirected};
use crate::control::Progress;
use crate::layout::{ChunkHeader, RecordingEntry};
use crate::recording::volume::VolumeSet;
use std::sync::atomic::Ordering;

/// What the merge does after a step.
pub(super) enum Step {
    /// Goes on.
    On,
    /// `each` said stop.
    Stop,
    /// Every member's scan is exhausted.
    End,
}

/// The merge of the members' scans (and the redirected chunks, read ahead) by sequence:
/// what it hands out to, and what it has handed out so far.
pub(super) struct Merge<'a, 'e> {
    pub(super) set: &'a VolumeSet,
    pub(super) entry: &'a RecordingEntry,
    pub(super) progress: &'a Progress,
    pub(super) each: &'e mut dyn FnMut(Item<'_>) -> bool,
    pub(super) summary: ReadSummary,
    /// The sequence the next chunk should have: None in a ring until every member has
    /// found its first chunk.
    pub(super) expected: Option<u64>,
    /// Damage found and not yet reported.
    pub(super) damages: Vec<Damage>,
    pub(super) redirected: Redirected,
}

impl Merge<'_, '_> {
    /// Decodes the head of every scan whose data is there. Returns whether a scan still
    /// waits for its reads.
    pub(super) fn advance_heads(&mut self, scans: &mut [Scan], reads: &mut ScanReads) -> bool {
        let mut waiting = false;
        for scan in scans.iter_mut() {
            if scan.head.is_some() || scan.exhausted || scan.asleep_until_sequence.is_some() {
                continue;
            }
            advance(
                scan,
                self.set,
                self.entry,
                reads.engine.pool(),
                &mut reads.free,
                &mut self.damages,
                reads.chunk_bytes,
            );
            if scan.head.is_none() && !scan.exhausted {
                waiting = true;
            }
        }
        waiting
    }

    /// Reports the damage found so far (it is ordered by member, not sequence). Returns
    /// whether to go on (what `each` said).
    pub(super) fn report_damage(&mut self) -> bool {
        let mut go_on = true;
        for damage in self.damages.drain(..) {
            self.summary.damage_count += 1;
            if !(self.each)(Item::Damage(&damage)) {
                go_on = false;
            }
        }
        go_on
    }

    /// Every live member has a head: hands out the lowest sequence (redirected chunks, read
    /// ahead, take part as one more member).
    pub(super) fn step(&mut self, scans: &mut [Scan], reads: &ScanReads) -> Step {
        let best = (0..scans.len())
            .filter(|&i| scans[i].head.is_some())
            .min_by_key(|&i| scans[i].head.map(|h| h.0.sequence));
        let best_sequence = best.and_then(|i| scans[i].head.map(|h| h.0.sequence));
        if self.expected.is_none() {
            self.expected = Some(self.ring_start(scans));
        }
        let next_sequence = best_sequence
            .into_iter()
            .chain(self.redirected.next_sequence())
            .min();
        if wake_kept(scans, next_sequence) {
            return Step::On;
        }
        if let Some(sequence) = self.redirected.next_sequence() {
            if best_sequence.is_none_or(|best| sequence < best) {
                return self.hand_out_redirected();
            }
        }
        let Some(best) = best else {
            return Step::End;
        };
        self.hand_out_head(&mut scans[best], reads)
    }

    /// Where a ring's run without a hole starts: at the newest of the oldest chunks of the
    /// members that overwrote their own (every member has found its first chunk by now);
    /// with none, at the recording's first chunk. A member whose own chunks were all
    /// overwritten may still hold a retired member's redirected run: its oldest survivor,
    /// then.
    fn ring_start(&self, scans: &[Scan]) -> u64 {
        let entry = self.entry;
        let oldest_redirected = |member_index: u16| {
            self.redirected
                .headers()
                .filter(|header| header.member_index == member_index)
                .map(|header| header.sequence)
                .min()
        };
        let start = scans
            .iter()
            .filter(|scan| !scan.kept_apart)
            .filter_map(|scan| match scan.first {
                Some((sequence, overwrote)) => overwrote.then_some(sequence),
                None if entry.overwrote.get(scan.member_index as usize) == Some(&true) => {
                    oldest_redirected(scan.member_index)
                }
                None => None,
            })
            .max()
            .unwrap_or(entry.first_sequence);
        start.max(entry.first_sequence)
    }

    /// Hands out the first redirected chunk, after the sequences missing before it.
    fn hand_out_redirected(&mut self) -> Step {
        let (header, payload) = self.redirected.pop_front().expect("has a front");
        let want = self.expected.unwrap_or(self.entry.first_sequence);
        if header.sequence < want {
            return Step::On;
        }
        if !report_missing(&mut self.summary, self.each, want, header.sequence) {
            return Step::Stop;
        }
        self.expected = Some(header.sequence + 1);
        self.summary.redirected_chunk_count += 1;
        match emit(
            &mut self.summary,
            self.progress,
            self.each,
            &header,
            &payload,
        ) {
            true => Step::On,
            false => Step::Stop,
        }
    }

    /// Hands out `scan`'s head chunk, after the sequences missing before it; one older
    /// than the surviving run (ring) or a duplicate is passed over.
    fn hand_out_head(&mut self, scan: &mut Scan, reads: &ScanReads) -> Step {
        let (header, within) = scan.head.take().expect("chosen for its head");
        let want = self.expected.unwrap_or(self.entry.first_sequence);
        if header.sequence < want {
            scan.cursor = within + 1;
            return Step::On;
        }
        if !report_missing(&mut self.summary, self.each, want, header.sequence) {
            return Step::Stop;
        }
        self.expected = Some(header.sequence + 1);
        let (flight, _) = scan.flights.front().expect("the head's read");
        let slot_bytes = flight_slot(reads.engine.pool(), flight, within, reads.chunk_bytes)
            .expect("the head was decoded from these bytes");
        let payload = &slot_bytes[header.payload_range()];
        let keep_going = emit(
            &mut self.summary,
            self.progress,
            self.each,
            &header,
            payload,
        );
        scan.cursor = within + 1;
        match keep_going {
            true => Step::On,
            false => Step::Stop,
        }
    }

    /// Reports the sequences after the last chunk found that the entry says exist.
    pub(super) fn missing_at_end(&mut self) {
        let end_sequence = self.entry.end_sequence;
        if let Some(want) = self.expected {
            if want < end_sequence {
                self.summary.missing_chunk_count += end_sequence - want;
                (self.each)(Item::Missing {
                    first_sequence: want,
                    count: end_sequence - want,
                });
            }
        }
    }
}

/// Reports the sequences from `want` up to `found` as missing, if any. Returns whether to
/// go on (what `each` said).
fn report_missing(
    summary: &mut ReadSummary,
    each: &mut dyn FnMut(Item<'_>) -> bool,
    want: u64,
    found: u64,
) -> bool {
    if found <= want {
        return true;
    }
    summary.missing_chunk_count += found - want;
    each(Item::Missing {
        first_sequence: want,
        count: found - want,
    })
}

/// Counts a chunk into `summary` and hands it to `each`. Returns what `each` said.
fn emit(
    summary: &mut ReadSummary,
    progress: &Progress,
    each: &mut dyn FnMut(Item<'_>) -> bool,
    header: &ChunkHeader,
    payload: &[u8],
) -> bool {
    summary.chunk_count += 1;
    summary.payload_bytes += payload.len() as u64;
    summary.first_sequence.get_or_insert(header.sequence);
    summary.last_sequence = Some(header.sequence);
    if header.gap_bytes > 0 {
        summary.gap_count += 1;
        summary.lost_bytes = summary.lost_bytes.saturating_add(header.gap_bytes);
    }
    progress
        .done_bytes
        .store(summary.payload_bytes, Ordering::Relaxed);
    each(Item::Chunk { header, payload })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::layout::sample_chunk_header;

    #[test]
    fn sequences_found_on_no_member_are_counted_and_handed_out_once() {
        let mut summary = ReadSummary::default();
        let mut said = Vec::new();
        let mut each = |item: Item<'_>| {
            said.push(item.hole_text());
            true
        };
        assert!(report_missing(&mut summary, &mut each, 10, 10));
        assert!(report_missing(&mut summary, &mut each, 10, 7));
        assert!(report_missing(&mut summary, &mut each, 10, 14));
        assert_eq!(summary.missing_chunk_count, 4);
        assert_eq!(
            said,
            [Some("4 chunks missing from sequence 10".to_string())]
        );
        let mut stop = |_: Item<'_>| false;
        assert!(!report_missing(&mut summary, &mut stop, 20, 21));
    }

    #[test]
    fn a_chunk_handed_out_is_counted_with_its_gap() {
        let mut summary = ReadSummary::default();
        let progress = Progress::default();
        let mut sequences = Vec::new();
        let mut each = |item: Item<'_>| {
            if let Item::Chunk { header, .. } = item {
                sequences.push(header.sequence);
            }
            true
        };
        let first = ChunkHeader {
            sequence: 5,
            gap_bytes: 0,
            ..sample_chunk_header()
        };
        let gapped = ChunkHeader {
            sequence: 6,
            gap_bytes: 300,
            ..first
        };
        assert!(emit(&mut summary, &progress, &mut each, &first, &[0; 100]));
        assert!(emit(&mut summary, &progress, &mut each, &gapped, &[0; 50]));
        assert_eq!(sequences, [5, 6]);
        assert_eq!((summary.chunk_count, summary.payload_bytes), (2, 150));
        assert_eq!(
            (summary.first_sequence, summary.last_sequence),
            (Some(5), Some(6))
        );
        assert_eq!((summary.gap_count, summary.lost_bytes), (1, 300));
        assert_eq!(progress.done_bytes.load(Ordering::Relaxed), 150);
    }
}
