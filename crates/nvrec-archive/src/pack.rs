//! The reading side of an archive run: chunks packed into segments in sequence order, and
//! what was found between them (gaps the recorder marked, chunks the drives could not
//! give, and in a ring the stream ranges overwritten before they were read), each finding
//! committed with the segment it belongs to. A pass over a live recording leaves its last
//! segment unsent (it is still filling); the next pass reads it again, and what was found
//! with it, so nothing is counted twice.
//!
//! A ring's stream is followed by offset: each chunk accounts for the stream from where
//! its own gap begins (`stream_offset_bytes - gap_bytes`), and where that lies past the end
//! of the chunk before it, the range between was recorded but is not read: the ring
//! overwrote it (before the first chunk a reading finds, or while a reading ran behind the
//! recorder). It is then a loss of the archive, with its stream range and sequences.

use std::sync::mpsc::{Receiver, SyncSender};

use nvrec::layout::{ChunkFlags, ChunkHeader};

use crate::manifest::{segment_key, Hole, Loss, LossCause};
use crate::segment::{Segment, SegmentBuilder};
use crate::Result;

/// Where reading a recording starts: at its first chunk, or (following a live recording)
/// at the first chunk of the first segment not yet sent.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
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
#[derive(Debug, Clone, Default)]
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

/// A ring's stream as read so far.
#[derive(Debug, Clone, Copy)]
struct RingTrack {
    /// Where the stream stands after the last chunk packed, and the sequence after it.
    stream_end_bytes: u64,
    next_sequence: u64,
    /// Where it stood when the segment being filled began.
    segment_stream_start: u64,
    segment_next_sequence: u64,
    /// The recorder is still writing: chunks the reader missed were overwritten meanwhile.
    live: bool,
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
    /// Found with the segments given to the uploader, and their payload bytes.
    committed: ReadOutcome,
    committed_payload_bytes: u64,
}

/// What a reading packed and sent.
pub(crate) struct Packed {
    pub outcome: ReadOutcome,
    pub payload_bytes: u64,
    /// Where the next reading starts: the segment still filling.
    pub next: SegmentStart,
}

impl<'a> Packer<'a> {
    /// A packer for the reading from `start` of a recording (`ring`: its stream is followed
    /// by offset, `first_sequence` its first; `live`: still being written) into segments of
    /// `segment_size_bytes`, keyed in `dir`.
    pub fn new(
        builder: SegmentBuilder,
        dir: &'a str,
        start: SegmentStart,
        ring: Option<(u64, bool)>,
    ) -> Packer<'a> {
        let ring = ring.map(|(first_sequence, live)| {
            let next_sequence = if start.is_beginning() {
                first_sequence
            } else {
                start.sent_sequence_end
            };
            RingTrack {
                stream_end_bytes: start.stream_offset_bytes,
                next_sequence,
                segment_stream_start: start.stream_offset_bytes,
                segment_next_sequence: next_sequence,
                live,
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
            committed: ReadOutcome::default(),
            committed_payload_bytes: 0,
        }
    }

    /// Packs one chunk, sending the segment it does not fit in first. Returns false where
    /// the uploader has gone (it failed).
    pub fn chunk(
        &mut self,
        header: &ChunkHeader,
        payload: &[u8],
        sender: &SyncSender<Segment>,
        reuse: &Receiver<Vec<u8>>,
    ) -> Result<bool> {
        if self.builder.is_full_for(payload.len()) {
            let segment = self.take(reuse.try_recv().ok());
            if sender.send(segment).is_err() {
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

    /// The segment being filled, taken to be sent, and what was found with it committed.
    fn take(&mut self, reuse: Option<Vec<u8>>) -> Segment {
        let key = segment_key(self.dir, self.index);
        let segment = self.builder.take(self.index, key, reuse);
        self.index += 1;
        self.committed.append(&mut self.pending);
        self.committed_payload_bytes += std::mem::take(&mut self.pending_payload_bytes);
        if let Some(ring) = &mut self.ring {
            ring.segment_stream_start = ring.stream_end_bytes;
            ring.segment_next_sequence = ring.next_sequence;
        }
        segment
    }

    /// Files the holes reported before `header`'s chunk, and in a ring the stream range
    /// before it that was not read: overwritten where the reading began after it or the
    /// recorder is still writing (the holes the reader reported there stand for the same
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
        let overwritten = begins > ring.stream_end_bytes && (ring.live || !missed);
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

    /// Ends the reading from `start`: the segment still filling is sent and what was found
    /// with it committed where `last` (the recording has ended and was read whole), else
    /// left for the next reading.
    pub fn finish(
        mut self,
        start: SegmentStart,
        last: bool,
        sender: &SyncSender<Segment>,
    ) -> Packed {
        let next = match (self.builder.first(), self.ring) {
            (Some((sequence, timestamp_ns)), ring) => SegmentStart {
                index: self.index,
                sequence,
                timestamp_ns,
                stream_offset_bytes: ring.map_or(0, |r| r.segment_stream_start),
                sent_sequence_end: ring.map_or(0, |r| r.segment_next_sequence),
            },
            (None, _) => SegmentStart {
                index: self.index,
                ..start
            },
        };
        if last {
            if !self.builder.is_empty() {
                let segment = self.take(None);
                let _ = sender.send(segment);
            }
            self.committed.append(&mut self.pending);
            let waiting = std::mem::take(&mut self.waiting);
            self.committed
                .holes
                .extend(waiting.into_iter().map(Waiting::hole));
        }
        Packed {
            outcome: self.committed,
            payload_bytes: self.committed_payload_bytes,
            next,
        }
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
    use std::sync::mpsc::sync_channel;

    /// Chunks of 1000 bytes at stream offset 1000 × sequence; four fit a segment.
    struct Pass {
        sender: SyncSender<Segment>,
        sent: Receiver<Segment>,
        reuse: Receiver<Vec<u8>>,
        _recycle: SyncSender<Vec<u8>>,
    }

    impl Pass {
        fn new() -> Pass {
            let (sender, sent) = sync_channel(16);
            let (_recycle, reuse) = sync_channel(1);
            Pass {
                sender,
                sent,
                reuse,
                _recycle,
            }
        }

        fn packer(&self, start: SegmentStart, live: bool) -> Packer<'static> {
            Packer::new(SegmentBuilder::new(4600, 0), "d", start, Some((0, live)))
        }

        fn chunks(&self, packer: &mut Packer<'_>, sequences: &[u64]) {
            for &sequence in sequences {
                let payload = vec![sequence as u8; 1000];
                let go_on = packer
                    .chunk(&header(sequence, 1000), &payload, &self.sender, &self.reuse)
                    .unwrap();
                assert!(go_on);
            }
        }

        fn sent_sequences(&self) -> Vec<(u64, u64)> {
            self.sent
                .try_iter()
                .map(|s| (s.info.first_sequence, s.info.last_sequence))
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
        let mut packer = pass.packer(SegmentStart::default(), true);
        pass.chunks(&mut packer, &[0, 1, 2, 3]);
        // The recorder lapped the reader: 4 to 6 were gone when it got there.
        packer.missing(missing(4, 3));
        pass.chunks(&mut packer, &[7, 8]);
        let packed = packer.finish(SegmentStart::default(), false, &pass.sender);
        assert_eq!(pass.sent_sequences(), vec![(0, 3)]);
        // The loss goes with the segment still filling, which the next pass reads again.
        assert!(packed.outcome.losses.is_empty() && packed.outcome.holes.is_empty());
        assert_eq!(packed.payload_bytes, 4000);
        let next = packed.next;
        assert_eq!(
            (next.index, next.sequence, next.stream_offset_bytes),
            (1, 7, 4000)
        );
        assert_eq!(next.sent_sequence_end, 4);
        // By the next pass 7 and 8 are gone too; it ends with the recording.
        let mut packer = pass.packer(next, true);
        pass.chunks(&mut packer, &[9, 10]);
        let packed = packer.finish(next, true, &pass.sender);
        assert_eq!(pass.sent_sequences(), vec![(9, 10)]);
        assert_eq!(packed.outcome.losses, vec![overwritten(4000..9000, 4, 9)]);
        assert!(packed.outcome.holes.is_empty());
        assert_eq!(packed.payload_bytes, 2000);
    }

    #[test]
    fn an_ended_ring_lacks_its_overwritten_start_and_keeps_its_holes_as_holes() {
        let pass = Pass::new();
        let mut packer = pass.packer(SegmentStart::default(), false);
        // The oldest chunk the ring kept is 5: 0 to 4 were overwritten before it was read.
        pass.chunks(&mut packer, &[5, 6]);
        // 7 is missing on the drives of the ended ring: a hole, not an overwritten range.
        packer.missing(missing(7, 1));
        pass.chunks(&mut packer, &[8]);
        let packed = packer.finish(SegmentStart::default(), true, &pass.sender);
        assert_eq!(pass.sent_sequences(), vec![(5, 8)]);
        assert_eq!(packed.outcome.losses, vec![overwritten(0..5000, 0, 5)]);
        assert_eq!(packed.outcome.holes, vec![missing(7, 1)]);
        assert_eq!(packed.payload_bytes, 3000);
    }

    #[test]
    fn a_linear_recording_is_not_followed_by_offset() {
        let pass = Pass::new();
        let mut packer = Packer::new(
            SegmentBuilder::new(4600, 0),
            "d",
            SegmentStart::default(),
            None,
        );
        packer.missing(missing(0, 2));
        pass.chunks(&mut packer, &[2, 3]);
        let packed = packer.finish(SegmentStart::default(), true, &pass.sender);
        assert!(packed.outcome.losses.is_empty());
        assert_eq!(packed.outcome.holes, vec![missing(0, 2)]);
    }
}
