//! Reading in place: an archived recording handed out chunk by chunk, as the drives' reader
//! hands it out ([`nvrec::recording::reader::Item`]), through ranged GETs.
//!
//! A time window starts within a few requests: the manifest's chunk index says which
//! segment and which byte of it hold the first chunk at or after `from_ns`, and the read
//! starts there (one GET for the manifest, one ranged GET for the data). Segments are
//! fetched one ahead of the one being handed out. A segment read whole is summed and
//! compared with the manifest's CRC32C; every chunk is decoded with both its CRCs checked
//! and must be the recording's and in sequence. What fails is reported as damage (naming
//! the object and the offset) or as missing sequences, and the chunks around it still
//! come back: the chunk index says where the next one starts.

use std::ops::Range;
use std::time::Instant;

use bytes::Bytes;
use nvrec::control::{Control, ControlState, Progress};
use nvrec::layout::{ChunkFlags, ChunkView, RecordingEntry, RecordingFlags};
use nvrec::recording::reader::{Damage, Item, ReadSummary};

use crate::manifest::{Loss, Manifest, SegmentInfo, MANIFEST_NAME};
use crate::segment::chunk_at;
use crate::store::Archive;
use crate::{ArchiveError, Result};

/// An archived recording: its manifest, and its entry as the drives held it.
#[derive(Debug, Clone)]
pub struct ArchivedRecording {
    pub manifest: Manifest,
    pub entry: RecordingEntry,
}

/// A manifest that could not be read: its key and why.
#[derive(Debug)]
pub struct Unreadable {
    pub key: String,
    pub error: ArchiveError,
}

/// Every recording in the archive, ordered by start time; with the manifests that could
/// not be read (a damaged one must be seen, not skipped silently).
pub fn recordings(archive: &Archive) -> Result<(Vec<ArchivedRecording>, Vec<Unreadable>)> {
    let mut found = Vec::new();
    let mut unreadable = Vec::new();
    for (key, _) in archive.list("")? {
        if !key.ends_with(&format!("/{MANIFEST_NAME}")) {
            continue;
        }
        let decoded = archive.get(&key).and_then(|bytes| {
            let manifest = Manifest::decode(&key, &bytes)?;
            let entry = manifest.recording_entry(&key)?;
            Ok(ArchivedRecording { manifest, entry })
        });
        match decoded {
            Ok(recording) => found.push(recording),
            Err(error) => unreadable.push(Unreadable { key, error }),
        }
    }
    found.sort_by(|a, b| {
        (
            a.manifest.start_ns,
            &a.manifest.node,
            &a.manifest.set_uuid,
            a.manifest.recording_id,
        )
            .cmp(&(
                b.manifest.start_ns,
                &b.manifest.node,
                &b.manifest.set_uuid,
                b.manifest.recording_id,
            ))
    });
    Ok((found, unreadable))
}

/// Where a read starts: the segment and the chunk in it before the first chunk that began
/// at `from_ns` or later, as on the drives (it was filling at `from_ns`, and records are
/// taken by their own time), or the first chunk where none is before it (the start of the
/// recording without a window). None where a window finds no chunk at all.
pub fn start_of(manifest: &Manifest, from_ns: Option<u64>) -> Option<(usize, usize)> {
    start_in(&manifest.segments, from_ns)
}

fn start_in(segments: &[SegmentInfo], from_ns: Option<u64>) -> Option<(usize, usize)> {
    let Some(from_ns) = from_ns else {
        return Some((0, 0));
    };
    // Chunk timestamps rise with the sequence, so both searches are binary.
    let segment = segments.partition_point(|s| s.last_timestamp_ns < from_ns);
    let chunk = segments.get(segment).map_or(0, |info| {
        info.chunk_timestamps_ns.partition_point(|&t| t < from_ns)
    });
    if chunk > 0 {
        return Some((segment, chunk - 1));
    }
    // The last chunk of the segments before, or the very first.
    segments[..segment]
        .iter()
        .rposition(|info| !info.chunk_timestamps_ns.is_empty())
        .map(|before| (before, segments[before].chunk_timestamps_ns.len() - 1))
        .or_else(|| (!segments.is_empty()).then_some((segment, 0)))
}

fn damage(info: &SegmentInfo, offset: u64, sequence: Option<u64>, what: String) -> Damage {
    Damage {
        member_index: 0,
        member_path: format!("object {}", info.key),
        slot_index: info.chunk_offsets.partition_point(|&o| o < offset) as u64,
        offset_bytes: offset,
        sequence,
        what: format!("object {} at offset {offset}: {what}", info.key),
    }
}

/// Reads `recording` from the archive in sequence order from the first chunk at or after
/// `from_ns`, calling `each` for every chunk, hole and damage; stops when `each` returns
/// false or `control` says so. Each request is counted in the summary's `read_bytes`.
pub fn read_recording(
    archive: &Archive,
    recording: &ArchivedRecording,
    from_ns: Option<u64>,
    control: &Control,
    progress: &Progress,
    each: &mut dyn FnMut(Item<'_>) -> bool,
) -> Result<ReadSummary> {
    let window = Window {
        from_ns,
        to_ns: None,
    };
    read_window(archive, recording, window, control, progress, each)
}

/// A time window of a read, on the recording's timeline: from the first chunk at or after
/// `from_ns`, up to and including the first chunk after `to_ns` (a reader stops there, as
/// on the drives).
#[derive(Debug, Clone, Copy, Default)]
pub struct Window {
    pub from_ns: Option<u64>,
    pub to_ns: Option<u64>,
}

/// As [`read_recording`], for `window`: no byte past its end is asked for, so a window
/// within one segment takes one ranged GET of data (beside the LIST and the manifest GET
/// that found the recording).
pub fn read_window(
    archive: &Archive,
    recording: &ArchivedRecording,
    window: Window,
    control: &Control,
    progress: &Progress,
    each: &mut dyn FnMut(Item<'_>) -> bool,
) -> Result<ReadSummary> {
    let Window { from_ns, to_ns } = window;
    let started = Instant::now();
    let manifest = &recording.manifest;
    let entry = &recording.entry;
    progress
        .total_bytes
        .store(manifest.payload_bytes, std::sync::atomic::Ordering::Relaxed);
    progress
        .done_bytes
        .store(0, std::sync::atomic::Ordering::Relaxed);
    let Some((first_segment, first_chunk)) = start_of(manifest, from_ns) else {
        return Ok(finish(ReadSummary::default(), started));
    };
    // A ring kept only its newest chunks, and a window starts where it starts: the first
    // chunk read sets the sequence expected next.
    let expected = if from_ns.is_some() || entry.flags.contains(RecordingFlags::RING) {
        None
    } else {
        Some(entry.first_sequence)
    };
    let mut read = ArchiveRead {
        manifest,
        entry,
        control,
        progress,
        each,
        summary: ReadSummary::default(),
        expected,
        overwritten: manifest.overwritten().collect(),
        next_overwritten: 0,
        whole: from_ns.is_none(),
        to_ns,
    };
    let flow = read.segments(archive, first_segment, first_chunk)?;
    if matches!(flow, Flow::On | Flow::Leave) && control.state() == ControlState::Run {
        read.missing_at_end();
    }
    Ok(finish(read.summary, started))
}

/// Reads only the chunks `runs` of `recording` (first sequence and count, ascending), as
/// a flow's index names them, calling `each` for every chunk and hole as
/// [`read_window`] does: one ranged GET for each stretch of a segment they cover (runs a
/// few chunks apart share one). Chunks of the runs that no segment holds are missing; a
/// segment whose chunks are not one run of sequences (a ring's, around what it
/// overwrote) is read whole, its other chunks handed out too.
pub fn read_runs(
    archive: &Archive,
    recording: &ArchivedRecording,
    runs: &[(u64, u64)],
    control: &Control,
    progress: &Progress,
    each: &mut dyn FnMut(Item<'_>) -> bool,
) -> Result<ReadSummary> {
    let started = Instant::now();
    let manifest = &recording.manifest;
    let mut read = ArchiveRead {
        manifest,
        entry: &recording.entry,
        control,
        progress,
        each,
        summary: ReadSummary::default(),
        expected: None,
        // A ring's segment read whole goes past what the ring overwrote before it was
        // archived: lost stream, not missing chunks, as in a window's read.
        overwritten: manifest.overwritten().collect(),
        next_overwritten: 0,
        whole: false,
        to_ns: None,
    };
    for stretch in stretches(&manifest.segments, runs) {
        if control.state() != ControlState::Run {
            break;
        }
        let flow = match stretch {
            Stretch::Missing(first_sequence, count) => {
                read.summary.missing_chunk_count += count;
                match (read.each)(Item::Missing {
                    first_sequence,
                    count,
                }) {
                    true => Flow::On,
                    false => Flow::Stop,
                }
            }
            Stretch::Chunks(segment, chunks, expected) => {
                let info = &manifest.segments[segment];
                read.expected = expected;
                let fetched = archive
                    .runtime
                    .block_on(fetch(archive, info, chunks.clone()))
                    .expect("a fetch does not panic");
                read.segment(archive, info, chunks, fetched)?
            }
        };
        if flow != Flow::On {
            break;
        }
    }
    Ok(finish(read.summary, started))
}

/// A piece of what [`read_runs`] reads: chunks of a segment (its index, the chunks, the
/// first one's sequence where the segment's sequences run without a gap), or sequences
/// no segment holds.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Stretch {
    Chunks(usize, Range<usize>, Option<u64>),
    Missing(u64, u64),
}

/// Runs of chunks this many apart or fewer in one segment are read with one GET.
const RUNS_JOINED_WITHIN: usize = 8;

/// The stretches of `segments` that hold `runs`, in sequence order.
fn stretches(segments: &[SegmentInfo], runs: &[(u64, u64)]) -> Vec<Stretch> {
    let mut stretches: Vec<Stretch> = Vec::new();
    for &(first, count) in runs {
        let end = first + count;
        let mut next = first;
        let from = segments.partition_point(|info| info.last_sequence < first);
        for (index, info) in segments.iter().enumerate().skip(from) {
            if info.first_sequence >= end || info.chunk_count == 0 {
                break;
            }
            if info.first_sequence > next {
                stretches.push(Stretch::Missing(next, info.first_sequence - next));
            }
            let (lo, hi) = (
                next.max(info.first_sequence),
                (end - 1).min(info.last_sequence),
            );
            push_stretch(&mut stretches, index, info, lo, hi);
            next = hi + 1;
        }
        if next < end {
            stretches.push(Stretch::Missing(next, end - next));
        }
    }
    stretches
}

/// Adds the chunks of sequences `lo..=hi` of segment `index`, joined to the stretch
/// before where that one is of the same segment and near.
fn push_stretch(stretches: &mut Vec<Stretch>, index: usize, info: &SegmentInfo, lo: u64, hi: u64) {
    let gapless = info.last_sequence - info.first_sequence + 1 == info.chunk_count;
    let (chunks, expected) = match gapless {
        true => {
            let start = (lo - info.first_sequence) as usize;
            let end = (hi - info.first_sequence) as usize + 1;
            (start..end, Some(lo))
        }
        false => (0..info.chunk_offsets.len(), None),
    };
    if let Some(Stretch::Chunks(last_index, last, _)) = stretches.last_mut() {
        if *last_index == index && chunks.start <= last.end + RUNS_JOINED_WITHIN {
            last.end = last.end.max(chunks.end);
            return;
        }
    }
    stretches.push(Stretch::Chunks(index, chunks, expected));
}

/// How a read goes on after a step.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Flow {
    /// On to the next chunk or segment.
    On,
    /// `each` said stop at damage to a whole object: no more segments are read, and the
    /// sequences the recording claims past the last chunk are still reported.
    Leave,
    /// `each` said stop at a chunk, or `control` did: nothing more is handed out.
    Stop,
    /// The window ended: what comes after it is not read, nor reported missing.
    WindowEnd,
}

/// A read of an archived recording under way: what it checks chunks against, where they
/// go, and what it has found so far.
struct ArchiveRead<'a, 'e> {
    manifest: &'a Manifest,
    entry: &'a RecordingEntry,
    control: &'a Control,
    progress: &'a Progress,
    each: &'e mut dyn FnMut(Item<'_>) -> bool,
    summary: ReadSummary,
    /// The sequence the next chunk should have; None until the first chunk sets it.
    expected: Option<u64>,
    /// What a ring overwrote before it was archived (the manifest's losses, in sequence
    /// order): not missing chunks but lost stream bytes, counted as the read passes them.
    overwritten: Vec<&'a Loss>,
    next_overwritten: usize,
    /// The read began at the recording's start (not a window's).
    whole: bool,
    /// The window's end: chunks past the first after it are not read.
    to_ns: Option<u64>,
}

/// Bytes `start..end` of a segment: its chunks `chunks` (the whole object where they are
/// all of them).
fn byte_range(info: &SegmentInfo, chunks: Range<usize>) -> Range<u64> {
    let offset = |chunk: usize| {
        info.chunk_offsets
            .get(chunk)
            .copied()
            .unwrap_or(info.size_bytes)
    };
    offset(chunks.start)..offset(chunks.end)
}

/// The GET of a segment's chunks `chunks` (the whole object where they are all of it),
/// started on the archive's runtime.
fn fetch(
    archive: &Archive,
    info: &SegmentInfo,
    chunks: Range<usize>,
) -> tokio::task::JoinHandle<object_store::Result<Bytes>> {
    let range = byte_range(info, chunks);
    let store = archive.store.clone();
    let path = archive.path(&info.key);
    let whole = range == (0..info.size_bytes);
    archive.runtime.spawn(async move {
        if whole {
            store.get(&path).await?.bytes().await
        } else {
            store.get_range(&path, range).await
        }
    })
}

impl ArchiveRead<'_, '_> {
    /// The chunks of `info` from `start_chunk` that the window asks for: up to and
    /// including the first after its end, and whether that one is in this segment.
    fn window_chunks(&self, info: &SegmentInfo, start_chunk: usize) -> (Range<usize>, bool) {
        let count = info.chunk_offsets.len();
        let Some(to_ns) = self.to_ns else {
            return (start_chunk..count, false);
        };
        let past = info.chunk_timestamps_ns.partition_point(|&t| t <= to_ns);
        match past < count {
            true => (start_chunk..(past + 1).max(start_chunk + 1), true),
            false => (start_chunk..count, false),
        }
    }

    /// Reads the segments from `first_segment` (from its chunk `first_chunk`) on, each
    /// fetched while the one before it is handed out, up to the window's end.
    fn segments(
        &mut self,
        archive: &Archive,
        first_segment: usize,
        first_chunk: usize,
    ) -> Result<Flow> {
        let segments = &self.manifest.segments;
        let mut chunks = segments
            .get(first_segment)
            .map(|info| self.window_chunks(info, first_chunk));
        // A recording without chunks has no segment to fetch.
        let mut next = chunks
            .clone()
            .map(|(range, _)| fetch(archive, &segments[first_segment], range));
        let mut flow = Flow::On;
        for (index, info) in segments.iter().enumerate().skip(first_segment) {
            if self.control.state() != ControlState::Run || flow != Flow::On {
                break;
            }
            let (range, window_ends) = chunks.take().expect("the chunks of each segment");
            let fetched = archive
                .runtime
                .block_on(next.take().expect("a fetch per segment"))
                .expect("a fetch does not panic");
            if let Some(following) = segments.get(index + 1).filter(|_| !window_ends) {
                let (range, ends) = self.window_chunks(following, 0);
                next = Some(fetch(archive, following, range.clone()));
                chunks = Some((range, ends));
            }
            flow = self.segment(archive, info, range, fetched)?;
            if flow == Flow::On && window_ends {
                flow = Flow::WindowEnd;
            }
        }
        if let Some(pending) = next {
            pending.abort();
        }
        Ok(flow)
    }

    /// Checks what came of one segment's GET and hands out its chunks `chunks`.
    fn segment(
        &mut self,
        archive: &Archive,
        info: &SegmentInfo,
        chunks: Range<usize>,
        fetched: object_store::Result<Bytes>,
    ) -> Result<Flow> {
        let range = byte_range(info, chunks.clone());
        let start = range.start;
        let bytes = match fetched {
            Ok(bytes) => bytes,
            Err(error @ object_store::Error::NotFound { .. }) => {
                let what = format!("object missing: {error}");
                let first = Some(info.first_sequence);
                return Ok(self.object_damage(damage(info, start, first, what)));
            }
            Err(error) => return Err(archive.error("GET", &info.key, error)),
        };
        self.summary.read_bytes += bytes.len() as u64;
        if self.check_object(info, range, &bytes) == Flow::Leave {
            return Ok(Flow::Leave);
        }
        Ok(self.chunks(info, chunks, start, &bytes))
    }

    /// Compares the object's bytes `range` with the manifest: their length, and their
    /// CRC32C where the whole object was read. A mismatch is damage; its chunks are still
    /// read.
    fn check_object(&mut self, info: &SegmentInfo, range: Range<u64>, bytes: &Bytes) -> Flow {
        let start = range.start;
        let expected_len = range.end - start;
        if bytes.len() as u64 != expected_len {
            let what = format!(
                "object holds {} bytes from offset {start}, the manifest says {expected_len}",
                bytes.len()
            );
            return self.object_damage(damage(info, start, None, what));
        }
        if range == (0..info.size_bytes) {
            let actual = nvrec::layout::crc32c(bytes);
            if actual != info.crc32c {
                let what = format!(
                    "object checksum mismatch: CRC32C {actual:#010x}, the manifest says {:#010x}",
                    info.crc32c
                );
                return self.object_damage(damage(info, 0, None, what));
            }
        }
        Flow::On
    }

    /// Hands out the chunks `chunks` of a segment; `bytes` are the object's from offset
    /// `start`.
    fn chunks(
        &mut self,
        info: &SegmentInfo,
        chunks: Range<usize>,
        start: u64,
        bytes: &[u8],
    ) -> Flow {
        for chunk in chunks {
            if self.control.state() != ControlState::Run {
                return Flow::Stop;
            }
            let offset = info.chunk_offsets[chunk];
            match self.checked_chunk(info, chunk, start, bytes) {
                Ok(view) => {
                    if !self.hand_out(&view) {
                        return Flow::Stop;
                    }
                }
                Err(why) => {
                    self.summary.damage_count += 1;
                    let what = why.to_string();
                    if !(self.each)(Item::Damage(&damage(info, offset, None, what))) {
                        return Flow::Stop;
                    }
                }
            }
        }
        Flow::On
    }

    /// Chunk `chunk` of a segment, decoded from `bytes` (the object's from offset `start`),
    /// if it ends where the index says the next begins, is this recording's and comes in
    /// sequence; why not otherwise.
    fn checked_chunk<'b>(
        &self,
        info: &SegmentInfo,
        chunk: usize,
        start: u64,
        bytes: &'b [u8],
    ) -> std::result::Result<ChunkView<'b>, ChunkRefused> {
        let local = (info.chunk_offsets[chunk] - start) as usize;
        let (view, end) = chunk_at(bytes, local).map_err(ChunkRefused::Decode)?;
        let (manifest, entry, expected) = (self.manifest, self.entry, self.expected);
        let next_offset = info
            .chunk_offsets
            .get(chunk + 1)
            .copied()
            .unwrap_or(info.size_bytes);
        let header = &view.header;
        if (end as u64) + start != next_offset {
            Err(ChunkRefused::EndsElsewhere {
                end: end as u64 + start,
                next_offset,
            })
        } else if header.set_uuid.to_string() != manifest.set_uuid
            || header.recording_id != manifest.recording_id
        {
            Err(ChunkRefused::Stranger {
                set_uuid: header.set_uuid,
                recording_id: header.recording_id,
            })
        } else if header.sequence < entry.first_sequence
            || header.sequence >= entry.end_sequence
            || expected.is_some_and(|e| header.sequence < e)
        {
            Err(ChunkRefused::OutOfOrder {
                sequence: header.sequence,
                expected: expected.unwrap_or(entry.first_sequence),
                end: entry.end_sequence,
            })
        } else {
            Ok(view)
        }
    }

    /// Reports the sequences skipped before a good chunk as missing, counts the chunk and
    /// hands it to `each`. Returns whether to go on.
    fn hand_out(&mut self, view: &ChunkView<'_>) -> bool {
        let header = view.header;
        let overwritten = |expected: u64| {
            self.overwritten.iter().any(|loss| {
                loss.sequence == header.sequence
                    && loss
                        .first_sequence_lost
                        .is_some_and(|first| first <= expected)
            })
        };
        let missing = self
            .expected
            .filter(|&e| header.sequence > e && !overwritten(e));
        let summary = &mut self.summary;
        if let Some(expected) = missing {
            let count = header.sequence - expected;
            summary.missing_chunk_count += count;
            if !(self.each)(Item::Missing {
                first_sequence: expected,
                count,
            }) {
                return false;
            }
        }
        self.expected = Some(header.sequence + 1);
        summary.chunk_count += 1;
        summary.payload_bytes += view.payload.len() as u64;
        summary.first_sequence.get_or_insert(header.sequence);
        summary.last_sequence = Some(header.sequence);
        if header.flags.contains(ChunkFlags::GAP) {
            summary.gap_count += 1;
            summary.lost_bytes += header.gap_bytes;
        }
        self.count_overwritten(header.sequence);
        self.progress.done_bytes.fetch_add(
            view.payload.len() as u64,
            std::sync::atomic::Ordering::Relaxed,
        );
        (self.each)(Item::Chunk {
            header: &header,
            payload: view.payload,
        })
    }

    /// Counts as lost the stream ranges overwritten before the chunk `sequence`: those
    /// the read has passed (before its first chunk only where it began at the start).
    fn count_overwritten(&mut self, sequence: u64) {
        while let Some(loss) = self.overwritten.get(self.next_overwritten) {
            if loss.sequence > sequence {
                break;
            }
            let first = self.summary.first_sequence;
            if self.whole || first.is_some_and(|first| loss.sequence > first) {
                self.summary.lost_bytes += loss.gap_bytes;
            }
            self.next_overwritten += 1;
        }
    }

    /// Reports damage to a whole object (the chunks in it are still read, where there are
    /// any). `Leave` where `each` said stop.
    fn object_damage(&mut self, damage: Damage) -> Flow {
        self.summary.damage_count += 1;
        match (self.each)(Item::Damage(&damage)) {
            true => Flow::On,
            false => Flow::Leave,
        }
    }

    /// Reports the sequences the recording claims past the last chunk read: no segment
    /// held them, unless a ring overwrote them before they were archived (a later
    /// recording wrote over its end): those are lost stream bytes, counted.
    fn missing_at_end(&mut self) {
        let end_sequence = self.entry.end_sequence;
        let overwritten_at_end = |expected: u64| {
            self.overwritten.iter().any(|loss| {
                loss.sequence == end_sequence
                    && loss
                        .first_sequence_lost
                        .is_some_and(|first| first <= expected)
            })
        };
        let missing = self
            .expected
            .filter(|&e| e < end_sequence && !overwritten_at_end(e));
        self.count_overwritten(end_sequence);
        if let Some(expected) = missing {
            let count = end_sequence - expected;
            self.summary.missing_chunk_count += count;
            (self.each)(Item::Missing {
                first_sequence: expected,
                count,
            });
        }
    }
}

fn finish(mut summary: ReadSummary, started: Instant) -> ReadSummary {
    summary.elapsed_s = started.elapsed().as_secs_f64();
    summary.rate_mib_per_s =
        summary.payload_bytes as f64 / (1u64 << 20) as f64 / summary.elapsed_s.max(1e-9);
    summary
}

/// Why a chunk of a segment was not handed out as the recording's.
#[derive(Debug, Clone, thiserror::Error)]
enum ChunkRefused {
    #[error("chunk does not decode: {0}")]
    Decode(nvrec::layout::LayoutError),
    #[error("chunk ends at offset {end}, the index says the next starts at {next_offset}")]
    EndsElsewhere { end: u64, next_offset: u64 },
    #[error("chunk of set {set_uuid} recording {recording_id}, not of this recording")]
    Stranger {
        set_uuid: nvrec::layout::Uuid,
        recording_id: u32,
    },
    #[error("chunk sequence {sequence} out of order (expected {expected} and on, below {end})")]
    OutOfOrder {
        sequence: u64,
        expected: u64,
        end: u64,
    },
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A segment of the chunks `sequences`, 100 bytes each.
    fn segment(sequences: &[u64]) -> SegmentInfo {
        SegmentInfo {
            key: "seg".into(),
            size_bytes: 100 * sequences.len() as u64,
            crc32c: 0,
            e_tag: None,
            chunk_count: sequences.len() as u64,
            first_sequence: sequences[0],
            last_sequence: *sequences.last().unwrap(),
            first_timestamp_ns: 0,
            last_timestamp_ns: 0,
            chunk_offsets: (0..sequences.len() as u64).map(|i| 100 * i).collect(),
            chunk_timestamps_ns: vec![0; sequences.len()],
            flows: None,
        }
    }

    #[test]
    fn a_window_starts_at_the_chunk_filling_at_its_start() {
        // Chunks begin at 10 ns a sequence: 0..10 in the first segment, 10..20 in the next.
        let timed = |sequences: std::ops::Range<u64>| {
            let mut info = segment(&sequences.clone().collect::<Vec<_>>());
            info.chunk_timestamps_ns = sequences.map(|s| s * 10).collect();
            info.last_timestamp_ns = *info.chunk_timestamps_ns.last().unwrap();
            info
        };
        let segments = [timed(0..10), timed(10..20)];
        let start = |from_ns| start_in(&segments, Some(from_ns));
        assert_eq!(start_in(&segments, None), Some((0, 0)));
        assert_eq!(start(0), Some((0, 0)), "nothing before the first chunk");
        assert_eq!(start(35), Some((0, 3)), "chunk 3 was filling at 35");
        assert_eq!(
            start(40),
            Some((0, 3)),
            "one before the chunk that began then"
        );
        assert_eq!(start(100), Some((0, 9)), "across a segment's end");
        assert_eq!(start(105), Some((1, 0)));
        assert_eq!(
            start(500),
            Some((1, 9)),
            "the last chunk may have been filling"
        );
        assert_eq!(start_in(&[], Some(5)), None);
    }

    #[test]
    fn runs_are_read_as_stretches_of_the_segments_that_hold_them() {
        let segments = [
            segment(&(0..10).collect::<Vec<_>>()),
            segment(&(10..20).collect::<Vec<_>>()),
            // A ring's segment, around what it overwrote: read whole.
            segment(&[30, 31, 35, 36]),
        ];
        let runs = [(2, 2), (6, 1), (18, 4), (22, 3), (31, 1), (40, 2)];
        assert_eq!(
            stretches(&segments, &runs),
            vec![
                // 2..=3 and 6 are near: one GET.
                Stretch::Chunks(0, 2..7, Some(2)),
                // 18..=21 crosses into no segment past 19.
                Stretch::Chunks(1, 8..10, Some(18)),
                Stretch::Missing(20, 2),
                Stretch::Missing(22, 3),
                Stretch::Chunks(2, 0..4, None),
                Stretch::Missing(40, 2),
            ]
        );
    }

    #[test]
    fn runs_far_apart_in_a_segment_are_read_apart() {
        let segments = [segment(&(0..100).collect::<Vec<_>>())];
        assert_eq!(
            stretches(&segments, &[(1, 1), (50, 2)]),
            vec![
                Stretch::Chunks(0, 1..2, Some(1)),
                Stretch::Chunks(0, 50..52, Some(50)),
            ]
        );
    }
}
