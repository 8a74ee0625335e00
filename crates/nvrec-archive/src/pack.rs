//! The reading side of an archive run: chunks packed into segments in sequence order, and
//! what was found between them (gaps the recorder marked, chunks the drives could not
//! give, and in a ring the stream ranges overwritten before they were read), each finding
//! committed with the segment it belongs to. A pass over a live recording leaves its last
//! segment unsent (it is still filling); the next pass reads it again, and what was found
//! with it, so nothing is counted twice.
//!
//! Each segment goes to the uploader with what storing it commits ([`Commit`]): those
//! findings, its payload bytes, and where a reading goes on after it. The uploader writes
//! that to the resume state once the store holds the segment ([`crate::state`]), so that a
//! run started again after a kill goes on after the last segment stored, as the next pass
//! of the killed run would have, instead of reading the recording again from its start (a
//! ring has overwritten that by then).
//!
//! A ring's stream is followed by offset: each chunk accounts for the stream from where
//! its own gap begins (`stream_offset_bytes - gap_bytes`), and where that lies past the end
//! of the chunk before it, the range between was recorded but is not read: the ring
//! overwrote it (before the first chunk a reading finds, or while a reading ran behind the
//! recorder). It is then a loss of the archive, with its stream range and sequences.
//! Chunks the reader misses are overwritten too, not holes, while the ring records or once
//! a later recording on the set has written over it; the stream after the last chunk there
//! is, up to the ring's end, is then one more such loss.

use std::sync::mpsc::SyncSender;

use nvrec::flow::{FlowScan, FlowTable};
use nvrec::layout::{ChunkFlags, ChunkHeader};

use crate::manifest::{segment_key, Hole, Loss, LossCause};
use crate::segment::{Segment, SegmentBuilder, Spares};
use crate::Result;

/// Where reading a recording starts: at its first chunk, or (following a live recording)
/// at the first chunk of the first segment not yet sent.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize, serde::Deserialize)]
pub(crate) struct SegmentStart {
    pub index: u32,
    pub sequence: u64,
    pub timestamp_ns: u64,
    /// Where the stream stood after the last chunk sent, and the sequence after that
    /// chunk (a ring's reading goes by them).
    pub stream_offset_bytes: u64,
    pub sent_sequence_end: u64,
}

impl SegmentStart {
    /// Whether nothing was sent yet: reading begins at the recording's first chunk.
    pub fn is_beginning(&self) -> bool {
        *self == SegmentStart::default()
    }
}

/// What a reading found besides the chunks.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub(crate) struct ReadOutcome {
    pub losses: Vec<Loss>,
    pub holes: Vec<Hole>,
}

impl ReadOutcome {
    pub fn append(&mut self, other: &mut ReadOutcome) {
        self.losses.append(&mut other.losses);
        self.holes.append(&mut other.holes);
    }
}

/// A segment for the uploader, and what storing it commits.
pub(crate) struct Sealed {
    pub segment: Segment,
    pub commit: Commit,
    /// The flows of its packets (a recording of packets).
    pub flows: Option<SealedFlows>,
}

/// The flows of a sealed segment's packets, and the scan as it stood after its last
/// chunk: a reading that goes on from the next segment goes on from that scan.
pub(crate) struct SealedFlows {
    pub table: FlowTable,
    /// What the scan could not key.
    pub unindexed: Vec<String>,
    pub scan_after: FlowScan,
}

/// What a segment commits once the store holds it: the findings filed with its chunks
/// (gaps, holes and overwritten ranges before each of them), their payload bytes, and where
/// a reading goes on after it.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub(crate) struct Commit {
    pub outcome: ReadOutcome,
    pub payload_bytes: u64,
    /// At the chunk that did not fit in it (the next segment's first), or, for the last
    /// segment of a recording, after its last chunk.
    pub next: SegmentStart,
}

/// A ring to be read, as its entry says.
#[derive(Debug, Clone, Copy)]
pub(crate) struct RingReading {
    pub first_sequence: u64,
    /// Where the ring ends: one past its last chunk, and the end of its stream.
    pub end_sequence: u64,
    pub stream_len_bytes: u64,
    /// Chunks the reader misses were overwritten: the ring is still recording, or a later
    /// recording on the set has written since it ended (from the ring's write point on,
    /// over its oldest chunks first). The drives cannot tell such chunks from ones lost to
    /// damage then.
    pub overwriting: bool,
}

/// A ring's stream as read so far.
#[derive(Debug, Clone, Copy)]
struct RingTrack {
    /// Where the stream stands after the last chunk packed, and the sequence after it.
    stream_end_bytes: u64,
    next_sequence: u64,
    /// Where it stood when the segment being filled began.
    segment_stream_start: u64,
    segment_next_sequence: u64,
    /// Chunks the reader missed were overwritten ([`RingReading::overwriting`]).
    overwriting: bool,
    /// Where the ring ends.
    end_sequence: u64,
    stream_len_bytes: u64,
}

/// Where a hole reported before a chunk came from.
enum Waiting {
    /// Sequences found on no member.
    Missing(Hole),
    /// A slot that held what it should not.
    Damage(Hole),
}

/// Chunks into segments, and the findings that go with each.
pub(crate) struct Packer<'a> {
    builder: SegmentBuilder,
    dir: &'a str,
    index: u32,
    ring: Option<RingTrack>,
    /// Found with the chunks of the segment being filled, and its payload bytes.
    pending: ReadOutcome,
    pending_payload_bytes: u64,
    /// Reported before the next chunk: they belong to its segment.
    waiting: Vec<Waiting>,
    /// Where a reading goes on after the last segment taken (the start, before one is).
    resume: SegmentStart,
    /// The flows of the packets in the segment being filled (a recording of packets).
    flows: Option<FlowScan>,
}

/// What a reading leaves besides the segments it sent.
pub(crate) struct Packed {
    /// Found after the last chunk of a recording read to its end, where no segment was
    /// left to go with it (holes at its end).
    pub leftover: ReadOutcome,
    /// Where the next reading starts: the segment still filling.
    pub next: SegmentStart,
}

impl<'a> Packer<'a> {
    /// A packer for the reading from `start` of a recording (`ring`: its stream is followed
    /// by offset) into segments of `segment_size_bytes`, keyed in `dir`; `flows`: the
    /// packets' flows are scanned into each segment's, from that scan on.
    pub fn new(
        builder: SegmentBuilder,
        dir: &'a str,
        start: SegmentStart,
        ring: Option<RingReading>,
        flows: Option<FlowScan>,
    ) -> Packer<'a> {
        let ring = ring.map(|ring| {
            let next_sequence = if start.is_beginning() {
                ring.first_sequence
            } else {
                start.sent_sequence_end
            };
            RingTrack {
                stream_end_bytes: start.stream_offset_bytes,
                next_sequence,
                segment_stream_start: start.stream_offset_bytes,
                segment_next_sequence: next_sequence,
                overwriting: ring.overwriting,
                end_sequence: ring.end_sequence,
                stream_len_bytes: ring.stream_len_bytes,
            }
        });
        Packer {
            builder,
            dir,
            index: start.index,
            ring,
            pending: ReadOutcome::default(),
            pending_payload_bytes: 0,
            waiting: Vec::new(),
            resume: start,
            flows,
        }
    }

    /// Packs one chunk, sending the segment it does not fit in first (the next one filling
    /// memory from `spares` where it has some). Returns false where the uploader has gone
    /// (it failed).
    pub fn chunk(
        &mut self,
        header: &ChunkHeader,
        payload: &[u8],
        sender: &SyncSender<Sealed>,
        spares: &Spares,
    ) -> Result<bool> {
        if self.builder.is_full_for(payload.len()) {
            let sealed = self.take(spares.take(), Some(header));
            if sender.send(sealed).is_err() {
                return Ok(false);
            }
        }
        self.track(header, payload.len() as u64);
        if header.flags.contains(ChunkFlags::GAP) {
            self.pending.losses.push(Loss::recorded(
                header.sequence,
                header.stream_offset_bytes,
                header.gap_bytes,
            ));
        }
        self.builder.push(header, payload)?;
        self.pending_payload_bytes += payload.len() as u64;
        if let Some(scan) = &mut self.flows {
            // A scan without a window goes on to the end.
            scan.chunk(header, payload);
        }
        Ok(true)
    }

    /// Notes sequences found on no member, before the next chunk.
    pub fn missing(&mut self, hole: Hole) {
        self.waiting.push(Waiting::Missing(hole));
    }

    /// Notes damage, before the next chunk.
    pub fn damage(&mut self, hole: Hole) {
        self.waiting.push(Waiting::Damage(hole));
    }

    /// The segment being filled, taken to be sent with what was found with it; the next
    /// segment begins with `next_chunk` (none: the recording has ended).
    fn take(&mut self, reuse: Option<Vec<u8>>, next_chunk: Option<&ChunkHeader>) -> Sealed {
        let key = segment_key(self.dir, self.index);
        let segment = self.builder.take(self.index, key, reuse);
        self.index += 1;
        let (stream_offset_bytes, sent_sequence_end) = match &mut self.ring {
            Some(ring) => {
                ring.segment_stream_start = ring.stream_end_bytes;
                ring.segment_next_sequence = ring.next_sequence;
                (ring.stream_end_bytes, ring.next_sequence)
            }
            None => (0, 0),
        };
        // A reading from here finds its first chunk by time: the next chunk's, or the last
        // one's (skipped then by its sequence).
        let (sequence, timestamp_ns) = match next_chunk {
            Some(header) => (header.sequence, self.builder.time_ns(header)),
            None => (
                segment.info.last_sequence + 1,
                segment.info.last_timestamp_ns,
            ),
        };
        self.resume = SegmentStart {
            index: self.index,
            sequence,
            timestamp_ns,
            stream_offset_bytes,
            sent_sequence_end,
        };
        let commit = Commit {
            outcome: std::mem::take(&mut self.pending),
            payload_bytes: std::mem::take(&mut self.pending_payload_bytes),
            next: self.resume,
        };
        let flows = self.flows.as_mut().map(|scan| {
            let (table, unindexed) = scan.take();
            SealedFlows {
                table,
                unindexed,
                scan_after: scan.clone(),
            }
        });
        Sealed {
            segment,
            commit,
            flows,
        }
    }

    /// Files the holes reported before `header`'s chunk, and in a ring the stream range
    /// before it that was not read: overwritten where the reading began after it or the
    /// ring is being written over (the holes the reader reported there stand for the same
    /// chunks), a hole on the drives otherwise.
    fn track(&mut self, header: &ChunkHeader, payload_len_bytes: u64) {
        let waiting = std::mem::take(&mut self.waiting);
        let Some(ring) = &mut self.ring else {
            self.pending
                .holes
                .extend(waiting.into_iter().map(Waiting::hole));
            return;
        };
        let begins = header.stream_offset_bytes.saturating_sub(header.gap_bytes);
        let missed = waiting.iter().any(|w| matches!(w, Waiting::Missing(_)));
        let overwritten = begins > ring.stream_end_bytes && (ring.overwriting || !missed);
        if overwritten {
            self.pending.losses.push(Loss {
                sequence: header.sequence,
                stream_offset_bytes: begins,
                gap_bytes: begins - ring.stream_end_bytes,
                cause: LossCause::Overwritten,
                first_sequence_lost: Some(ring.next_sequence),
            });
        }
        for hole in waiting {
            match hole {
                Waiting::Missing(_) if overwritten => {}
                hole => self.pending.holes.push(hole.hole()),
            }
        }
        ring.stream_end_bytes = header.stream_offset_bytes + payload_len_bytes;
        ring.next_sequence = header.sequence + 1;
    }

    /// Ends the reading: the segment still filling is sent with what was found with it
    /// where `last` (the recording has ended and was read whole), else left for the next
    /// reading. In a ring being written over, the stream after the last chunk read up to
    /// the ring's end was overwritten before it was read: one more loss, in place of the
    /// chunks the reader found missing there.
    pub fn finish(mut self, last: bool, sender: &SyncSender<Sealed>, spares: &Spares) -> Packed {
        let mut leftover = ReadOutcome::default();
        if last {
            let mut found = ReadOutcome::default();
            let mut waiting = std::mem::take(&mut self.waiting);
            if let Some(ring) = self
                .ring
                .filter(|ring| ring.overwriting && ring.stream_end_bytes < ring.stream_len_bytes)
            {
                waiting.retain(|hole| !matches!(hole, Waiting::Missing(_)));
                found.losses.push(Loss {
                    sequence: ring.end_sequence,
                    stream_offset_bytes: ring.stream_len_bytes,
                    gap_bytes: ring.stream_len_bytes - ring.stream_end_bytes,
                    cause: LossCause::Overwritten,
                    first_sequence_lost: Some(ring.next_sequence),
                });
            }
            found.holes.extend(waiting.into_iter().map(Waiting::hole));
            if let Some(scan) = &mut self.flows {
                scan.finish();
            }
            if self.builder.is_empty() {
                leftover = found;
            } else {
                let mut sealed = self.take(None, None);
                sealed.commit.outcome.append(&mut found);
                let _ = sender.send(sealed);
            }
        }
        let next = match (self.builder.first(), self.ring) {
            (Some((sequence, timestamp_ns)), ring) => SegmentStart {
                index: self.index,
                sequence,
                timestamp_ns,
                stream_offset_bytes: ring.map_or(0, |r| r.segment_stream_start),
                sent_sequence_end: ring.map_or(0, |r| r.segment_next_sequence),
            },
            (None, _) => self.resume,
        };
        // The segment still filling is read again by the next pass: its memory is kept.
        spares.give(self.builder.into_bytes());
        Packed { leftover, next }
    }
}

impl Waiting {
    fn hole(self) -> Hole {
        match self {
            Waiting::Missing(hole) | Waiting::Damage(hole) => hole,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::segment::tests::header;
    use std::sync::mpsc::{sync_channel, Receiver};

    /// Chunks of 1000 bytes at stream offset 1000 × sequence; four fit a segment.
    struct Pass {
        sender: SyncSender<Sealed>,
        sent: Receiver<Sealed>,
        spares: Spares,
    }

    /// What a reader hands a packer: a chunk, or sequences found on no member.
    #[derive(Clone, Copy)]
    enum Read {
        Chunk(u64),
        Missing(u64, u64),
    }

    impl Pass {
        fn new() -> Pass {
            let (sender, sent) = sync_channel(16);
            Pass {
                sender,
                sent,
                spares: Spares::default(),
            }
        }

        /// A packer of a ring that ends before chunk `end_sequence`, its stream there.
        fn packer(
            &self,
            start: SegmentStart,
            end_sequence: u64,
            overwriting: bool,
        ) -> Packer<'static> {
            let ring = RingReading {
                first_sequence: 0,
                end_sequence,
                stream_len_bytes: 1000 * end_sequence,
                overwriting,
            };
            Packer::new(SegmentBuilder::new(4600, 0), "d", start, Some(ring), None)
        }

        fn chunks(&self, packer: &mut Packer<'_>, sequences: &[u64]) {
            for &sequence in sequences {
                let payload = vec![sequence as u8; 1000];
                let go_on = packer
                    .chunk(
                        &header(sequence, 1000),
                        &payload,
                        &self.sender,
                        &self.spares,
                    )
                    .unwrap();
                assert!(go_on);
            }
        }

        fn read(&self, packer: &mut Packer<'_>, items: &[Read]) {
            for item in items {
                match *item {
                    Read::Chunk(sequence) => self.chunks(packer, &[sequence]),
                    Read::Missing(first, count) => packer.missing(missing(first, count)),
                }
            }
        }

        /// The segments sent so far: their first and last sequences, and their commits.
        fn sent(&self) -> Vec<((u64, u64), Commit)> {
            self.sent
                .try_iter()
                .map(|s| {
                    let info = &s.segment.info;
                    ((info.first_sequence, info.last_sequence), s.commit)
                })
                .collect()
        }
    }

    fn missing(first_sequence: u64, chunk_count: u64) -> Hole {
        Hole {
            first_sequence: Some(first_sequence),
            chunk_count,
            what: "missing on the drives".into(),
        }
    }

    fn overwritten(range: std::ops::Range<u64>, first: u64, sequence: u64) -> Loss {
        Loss {
            sequence,
            stream_offset_bytes: range.end,
            gap_bytes: range.end - range.start,
            cause: LossCause::Overwritten,
            first_sequence_lost: Some(first),
        }
    }

    #[test]
    fn chunks_a_live_ring_lost_to_its_recorder_are_an_overwritten_range_counted_once() {
        let pass = Pass::new();
        let mut packer = pass.packer(SegmentStart::default(), 11, true);
        pass.chunks(&mut packer, &[0, 1, 2, 3]);
        // The recorder lapped the reader: 4 to 6 were gone when it got there.
        packer.missing(missing(4, 3));
        pass.chunks(&mut packer, &[7, 8]);
        let packed = packer.finish(false, &pass.sender, &pass.spares);
        let sent = pass.sent();
        assert_eq!(sent.len(), 1);
        let (sequences, commit) = &sent[0];
        assert_eq!(*sequences, (0, 3));
        // The loss goes with the segment still filling, which the next pass reads again.
        assert_eq!(commit.outcome, ReadOutcome::default());
        assert_eq!(commit.payload_bytes, 4000);
        assert_eq!(packed.leftover, ReadOutcome::default());
        let next = packed.next;
        assert_eq!(
            (next.index, next.sequence, next.stream_offset_bytes),
            (1, 7, 4000)
        );
        assert_eq!(next.sent_sequence_end, 4);
        // A run that goes on after the segment stored goes on where the next pass does.
        assert_eq!(commit.next, next);
        // By the next pass 7 and 8 are gone too; it ends with the recording.
        let mut packer = pass.packer(next, 11, true);
        pass.chunks(&mut packer, &[9, 10]);
        let packed = packer.finish(true, &pass.sender, &pass.spares);
        let sent = pass.sent();
        assert_eq!(sent.len(), 1);
        let (sequences, commit) = &sent[0];
        assert_eq!(*sequences, (9, 10));
        assert_eq!(commit.outcome.losses, vec![overwritten(4000..9000, 4, 9)]);
        assert!(commit.outcome.holes.is_empty());
        assert_eq!(commit.payload_bytes, 2000);
        // After the last segment: its last chunk found by time, passed by its sequence.
        let after = commit.next;
        assert_eq!(
            (after.index, after.sequence, after.timestamp_ns),
            (2, 11, header(10, 1000).time_ns(0))
        );
        assert_eq!(
            (after.stream_offset_bytes, after.sent_sequence_end),
            (11000, 11)
        );
        assert_eq!(packed.next, after);
    }

    #[test]
    fn an_ended_ring_lacks_its_overwritten_start_and_keeps_its_holes_as_holes() {
        let pass = Pass::new();
        let mut packer = pass.packer(SegmentStart::default(), 10, false);
        // The oldest chunk the ring kept is 5: 0 to 4 were overwritten before it was read.
        pass.chunks(&mut packer, &[5, 6]);
        // 7 is missing on the drives of the ended ring: a hole, not an overwritten range.
        packer.missing(missing(7, 1));
        pass.chunks(&mut packer, &[8]);
        // And 9, after the last chunk: a hole at its end, with no segment to go with.
        packer.missing(missing(9, 1));
        let packed = packer.finish(true, &pass.sender, &pass.spares);
        let sent = pass.sent();
        assert_eq!(sent.len(), 1);
        let (sequences, commit) = &sent[0];
        assert_eq!(*sequences, (5, 8));
        assert_eq!(commit.outcome.losses, vec![overwritten(0..5000, 0, 5)]);
        assert_eq!(commit.outcome.holes, vec![missing(7, 1), missing(9, 1)]);
        assert_eq!(commit.payload_bytes, 3000);
        assert_eq!(packed.leftover, ReadOutcome::default());
    }

    /// A ring that ended, then a later recording on the set wrote over it (from where the
    /// ring's write point stood, its oldest chunks first): chunks the reader finds missing
    /// were overwritten, between the chunks it finds and after the last of them, up to the
    /// ring's end. Damage stays a hole.
    #[test]
    fn an_ended_ring_written_over_by_a_later_recording_lacks_overwritten_ranges_not_holes() {
        let pass = Pass::new();
        let mut packer = pass.packer(SegmentStart::default(), 12, true);
        packer.missing(missing(0, 3));
        pass.chunks(&mut packer, &[3, 4]);
        packer.missing(missing(5, 2));
        let damaged = Hole {
            first_sequence: Some(7),
            chunk_count: 1,
            what: "damaged on member 0 slot 7: bad CRC".into(),
        };
        packer.damage(damaged.clone());
        pass.chunks(&mut packer, &[8]);
        packer.missing(missing(9, 3));
        let packed = packer.finish(true, &pass.sender, &pass.spares);
        let sent = pass.sent();
        assert_eq!(sent.len(), 1);
        let (sequences, commit) = &sent[0];
        assert_eq!(*sequences, (3, 8));
        assert_eq!(
            commit.outcome.losses,
            vec![
                overwritten(0..3000, 0, 3),
                overwritten(5000..8000, 5, 8),
                overwritten(9000..12000, 9, 12)
            ]
        );
        assert_eq!(commit.outcome.holes, vec![damaged]);
        assert_eq!(commit.payload_bytes, 3000);
        assert_eq!(packed.leftover, ReadOutcome::default());

        // Gone on from the segment a manifest holds (after chunk 8), with nothing of the
        // ring left on the drives: the rest of its stream is one loss, with no segment.
        let after = commit.next;
        let mut packer = pass.packer(after, 12, true);
        packer.missing(missing(9, 3));
        let packed = packer.finish(true, &pass.sender, &pass.spares);
        assert!(pass.sent().is_empty());
        assert_eq!(
            packed.leftover.losses,
            vec![overwritten(9000..12000, 9, 12)]
        );
        assert!(packed.leftover.holes.is_empty());
        // Not written over: missing at the end is a hole, and nothing is lost.
        let mut packer = pass.packer(after, 12, false);
        packer.missing(missing(9, 3));
        let packed = packer.finish(true, &pass.sender, &pass.spares);
        assert!(packed.leftover.losses.is_empty());
        assert_eq!(packed.leftover.holes, vec![missing(9, 3)]);
    }

    #[test]
    fn a_pass_keeps_the_memory_of_the_segment_still_filling() {
        let pass = Pass::new();
        let mut packer = pass.packer(SegmentStart::default(), 12, true);
        pass.chunks(&mut packer, &[0, 1, 2, 3, 4, 5]);
        assert_eq!(pass.spares.len(), 0);
        packer.finish(false, &pass.sender, &pass.spares);
        assert_eq!(
            pass.spares.len(),
            1,
            "read again by the next pass, into the same memory"
        );
        let mut next = pass.packer(SegmentStart::default(), 12, true);
        pass.chunks(&mut next, &[0, 1, 2, 3, 4]);
        assert_eq!(
            pass.spares.len(),
            0,
            "the segment sealed was followed by the spare"
        );
    }

    #[test]
    fn a_linear_recording_is_not_followed_by_offset() {
        let pass = Pass::new();
        let mut packer = Packer::new(
            SegmentBuilder::new(4600, 0),
            "d",
            SegmentStart::default(),
            None,
            None,
        );
        packer.missing(missing(0, 2));
        pass.chunks(&mut packer, &[2, 3]);
        let packed = packer.finish(true, &pass.sender, &pass.spares);
        let sent = pass.sent();
        assert!(sent[0].1.outcome.losses.is_empty());
        assert_eq!(sent[0].1.outcome.holes, vec![missing(0, 2)]);
        assert_eq!(sent[0].1.next.stream_offset_bytes, 0);
        assert_eq!(packed.leftover, ReadOutcome::default());
    }

    /// A run killed after the store held any one segment, and started again from that
    /// segment's commit (as the resume state keeps it), sends the segments that one
    /// reading through would, with the same findings, and nothing twice.
    #[test]
    fn a_reading_resumed_after_any_segment_goes_on_as_one_reading_through() {
        let mut items: Vec<Read> = (0..4).map(Read::Chunk).collect();
        items.push(Read::Missing(4, 2));
        items.extend((6..13).map(Read::Chunk));
        items.push(Read::Missing(13, 3));
        items.extend((16..19).map(Read::Chunk));
        let through = {
            let pass = Pass::new();
            let mut packer = pass.packer(SegmentStart::default(), 19, true);
            pass.read(&mut packer, &items);
            packer.finish(true, &pass.sender, &pass.spares);
            pass.sent()
        };
        assert_eq!(through.len(), 4);
        for stored in 0..through.len() {
            let next = through[stored].1.next;
            let pass = Pass::new();
            let mut packer = pass.packer(next, 19, true);
            // The reader seeks the next segment's first chunk by time, and reports nothing
            // before it.
            let from = |item: &Read| match *item {
                Read::Chunk(sequence) | Read::Missing(sequence, _) => sequence >= next.sequence,
            };
            let rest: Vec<Read> = items.iter().copied().filter(from).collect();
            pass.read(&mut packer, &rest);
            let packed = packer.finish(true, &pass.sender, &pass.spares);
            let mut resumed = through[..=stored].to_vec();
            resumed.extend(pass.sent());
            assert_eq!(resumed, through, "resumed after segment {stored}");
            assert_eq!(packed.leftover, ReadOutcome::default());
        }
    }
}
