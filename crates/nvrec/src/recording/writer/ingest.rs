//! Ingest: the source fills payloads into pool buffers (several chunk slots, one I/O each)
//! and a full buffer joins the ready FIFO. Pacing, loss accounting (a paced source that
//! finds no free buffer loses data, counted and written into the next chunk as a gap) and
//! the quiet-pipe rule (after a sync interval without a byte, what came goes out) live here.

use super::ChunkMeta;
use super::Writer;
use crate::control::ControlState;
use crate::flow::index::FlowIndexer;
use crate::layout::{encode_index, record_bytes, CHUNK_HEADER_SIZE_BYTES};
use crate::recording::counters::LossCause;
use crate::recording::failure::RecordingFailure;
use crate::source::Source;
use crate::source::{fill_until_quiet, Filled};
use std::collections::VecDeque;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;
use std::time::Instant;

/// How far a paced source may fall behind its schedule before what is overdue is lost: the
/// input's own buffering (a NIC ring, a socket buffer, a device FIFO), as time at the rate
/// and at most [`PACED_BACKLOG_MAX_BYTES`].
const PACED_BACKLOG: Duration = Duration::from_millis(250);
const PACED_BACKLOG_MAX_BYTES: u64 = 64 << 20;

/// The ingest stage's state: the pool's buffers as the source fills them, and the stream
/// as it came (offsets, what was lost and where the next gap goes).
#[cfg_attr(test, derive(Clone))]
pub(super) struct Ingest {
    /// Chunks per buffer (one I/O).
    k: u32,
    payload_capacity_bytes: u32,
    /// Per chunk slot of every buffer: what the source put there.
    metas: Vec<ChunkMeta>,
    /// Per buffer: chunks filled.
    buffer_chunk_counts: Vec<u32>,
    /// The source may wait for input: queued writes go to the kernel before every read.
    source_may_block: bool,
    /// The source gives records (datagrams, packets): chunks and entry are flagged so.
    records: bool,
    /// A record source asked to stop has given what it held (see `wants_input`), and since
    /// when it has been giving it.
    drained: bool,
    drain_started: Option<Instant>,
    /// For a constant source: how many payload bytes each chunk slot already holds from an
    /// earlier fill (0 = none), and the CRC32C of a payload of a given length.
    constant_source: bool,
    constant_payload_bytes: Vec<u32>,
    pub(super) constant_crc32c: Option<(u32, u32)>,
    /// Buffers free, filled and waiting for a member (in stream order), being filled.
    free: Vec<u32>,
    ready: VecDeque<u32>,
    filling: Option<u32>,
    /// The stream offset of the next byte, and the bytes lost so far (in it).
    stream_offset_bytes: u64,
    lost_bytes: u64,
    /// Input lost after the stream's end: a full target rewinds the stream to the start
    /// of its first chunk not written, and what was lost past that is no longer in it.
    lost_past_end_bytes: u64,
    /// Every byte of input lost, in the stream or past its end, by cause
    /// ([`LossCause::ALL`]'s order).
    lost_by_cause_bytes: [u64; 2],
    /// Lost since the last chunk filled: the next chunk carries it as its gap.
    pending_gap_bytes: u64,
    gap_count: u64,
    recorded_stream_bytes: u64,
    /// The source has ended.
    source_done: bool,
    /// Taken from the source and not written (abort, full), and due from a paced source
    /// when it stopped and not taken.
    unrecorded_bytes: u64,
    overdue_bytes: u64,
    /// The flow index of a record source's recording, built as its payloads are filled
    /// (`flow::index`); None without one, or once buffers were given up (the chunks it
    /// counted are no longer the stream's).
    index: Option<FlowIndexer>,
    /// The recording began with a flow index: its entry and chunks say so (format 1.9),
    /// even once the index was given up.
    indexed: bool,
}

impl Ingest {
    /// `buffer_count` free buffers of `k` chunks, for `source`.
    pub(super) fn new(
        buffer_count: u32,
        k: u32,
        payload_capacity_bytes: u32,
        source: &dyn Source,
    ) -> Ingest {
        let slots = buffer_count as usize * k as usize;
        Ingest {
            k,
            payload_capacity_bytes,
            metas: vec![ChunkMeta::default(); slots],
            buffer_chunk_counts: vec![0; buffer_count as usize],
            source_may_block: source.may_block(),
            records: source.packs_records(),
            drained: false,
            drain_started: None,
            constant_source: source.is_constant(),
            constant_payload_bytes: vec![0; slots],
            constant_crc32c: None,
            free: (0..buffer_count).rev().collect(),
            ready: VecDeque::with_capacity(buffer_count as usize),
            filling: None,
            stream_offset_bytes: 0,
            lost_bytes: 0,
            lost_past_end_bytes: 0,
            lost_by_cause_bytes: [0; 2],
            pending_gap_bytes: 0,
            gap_count: 0,
            recorded_stream_bytes: 0,
            source_done: false,
            unrecorded_bytes: 0,
            overdue_bytes: 0,
            index: None,
            indexed: false,
        }
    }

    /// The recording's flows are indexed by `index` as its chunks are filled.
    pub(super) fn index_with(&mut self, index: FlowIndexer) {
        self.index = Some(index);
        self.indexed = true;
    }

    /// Whether the recording's flows are indexed (still).
    pub(super) fn indexes(&self) -> bool {
        self.index.is_some()
    }

    /// Whether the recording began with a flow index.
    pub(super) fn indexed(&self) -> bool {
        self.indexed
    }

    /// Blocks of the flow index made, and the bytes of their index records placed.
    pub(super) fn index_made(&self) -> (u64, u64) {
        self.index.as_ref().map_or((0, 0), FlowIndexer::made)
    }

    /// Places the index parts waiting at the start of a payload of `room` bytes, as many as
    /// fit in half of it; returns how many and the bytes they take (not yet counted placed: see
    /// [`Ingest::index_parts_placed`]).
    fn place_index_parts(&self, payload: &mut [u8], time_ns: u64) -> (usize, usize) {
        let Some(index) = self.index.as_ref() else {
            return (0, 0);
        };
        let (mut at, mut parts) = (0, 0);
        for part in index.pending_parts() {
            if at + record_bytes(part.len()) > payload.len() / 2 {
                break;
            }
            at += encode_index(&mut payload[at..], time_ns, part);
            parts += 1;
        }
        (parts, at)
    }

    /// The first `parts` parts waiting were placed in a payload, taking `bytes`, and the
    /// payload (`payload`, from `stream_offset_bytes`, at `time_ns`) was filled: the index
    /// keys its packets.
    fn index_chunk(
        &mut self,
        (parts, bytes): (usize, usize),
        time_ns: u64,
        stream_offset_bytes: u64,
        payload: &[u8],
    ) {
        if let Some(index) = self.index.as_mut() {
            index.parts_placed(parts, bytes);
            index.chunk(time_ns, stream_offset_bytes, payload);
        }
    }

    /// How far behind its schedule a paced source at `rate` may be before the rest is lost:
    /// [`PACED_BACKLOG`] at the rate, at most [`PACED_BACKLOG_MAX_BYTES`], at least a payload.
    pub(super) fn backlog_allowed(&self, rate: f64) -> u64 {
        ((rate * PACED_BACKLOG.as_secs_f64()) as u64)
            .min(PACED_BACKLOG_MAX_BYTES)
            .max(self.payload_capacity_bytes as u64)
    }

    /// `bytes` of input are lost for `cause`: the stream moves past them, and the next
    /// chunk (or the end marker) carries them as its gap.
    pub(super) fn lose(&mut self, bytes: u64, cause: LossCause) {
        self.stream_offset_bytes += bytes;
        self.lost_bytes += bytes;
        self.pending_gap_bytes += bytes;
        self.lost_by_cause_bytes[cause.index()] += bytes;
    }

    /// The source filled the next chunk of `buffer` (at the stream offset) with
    /// `payload_len_bytes`: it takes the gap lost before it, and the stream moves on.
    pub(super) fn chunk_filled(
        &mut self,
        buffer: u32,
        (timestamp_ns, elapsed_ns): (u64, u64),
        payload_len_bytes: u32,
        payload_crc32c: u32,
    ) {
        let index = self.buffer_chunk_counts[buffer as usize];
        let gap_bytes = std::mem::take(&mut self.pending_gap_bytes);
        self.metas[(buffer * self.k + index) as usize] = ChunkMeta {
            timestamp_ns,
            elapsed_ns,
            stream_offset_bytes: self.stream_offset_bytes,
            gap_bytes,
            lost_through_bytes: self.lost_bytes,
            payload_len_bytes,
            payload_crc32c,
            end: false,
        };
        self.gap_count += u64::from(gap_bytes > 0);
        self.buffer_chunk_counts[buffer as usize] = index + 1;
        self.stream_offset_bytes += payload_len_bytes as u64;
        self.recorded_stream_bytes += payload_len_bytes as u64;
    }

    /// Buffers free.
    pub(super) fn free_count(&self) -> usize {
        self.free.len()
    }

    /// A free buffer, if there is one.
    pub(super) fn take_free(&mut self) -> Option<u32> {
        self.free.pop()
    }

    /// The oldest buffer filled and waiting for a member.
    pub(super) fn ready_front(&self) -> Option<u32> {
        self.ready.front().copied()
    }

    /// Whether filled buffers wait for a member.
    pub(super) fn ready_waits(&self) -> bool {
        !self.ready.is_empty()
    }

    /// Takes the oldest filled buffer, to be written.
    pub(super) fn take_ready(&mut self) -> Option<u32> {
        self.ready.pop_front()
    }

    /// Gives up every filled buffer waiting (see [`Ingest::drop_buffer`]), newest first.
    pub(super) fn drop_ready(&mut self) {
        while let Some(buffer) = self.ready.pop_back() {
            self.drop_buffer(buffer);
        }
    }

    /// Chunks `buffer` holds.
    pub(super) fn chunk_count(&self, buffer: u32) -> u32 {
        self.buffer_chunk_counts[buffer as usize]
    }

    /// What the source put in chunk `index` of `buffer`.
    pub(super) fn meta(&self, buffer: u32, index: u32) -> ChunkMeta {
        self.metas[(buffer * self.k + index) as usize]
    }

    /// The source gives records (datagrams, packets).
    pub(super) fn records(&self) -> bool {
        self.records
    }

    /// The source may wait for input.
    pub(super) fn source_may_block(&self) -> bool {
        self.source_may_block
    }

    /// The source has ended.
    pub(super) fn source_done(&self) -> bool {
        self.source_done
    }

    /// Payload bytes a chunk holds.
    pub(super) fn payload_capacity_bytes(&self) -> u32 {
        self.payload_capacity_bytes
    }

    /// The stream offset of the next byte, and the bytes lost in the stream so far.
    pub(super) fn stream_at(&self) -> (u64, u64) {
        (self.stream_offset_bytes, self.lost_bytes)
    }

    /// `to` holds a copy of `from` (a write still in the kernel goes again): so do its
    /// chunks' descriptions.
    pub(super) fn copied(&mut self, from: u32, to: u32) {
        let (k, from, to) = (self.k as usize, from as usize, to as usize);
        self.buffer_chunk_counts[to] = self.buffer_chunk_counts[from];
        self.metas.copy_within(from * k..(from + 1) * k, to * k);
        self.constant_payload_bytes
            .copy_within(from * k..(from + 1) * k, to * k);
    }

    /// Chunk `index` of `buffer` was read back from a member as `meta` (a rewrite): it is
    /// no constant source's payload any more.
    pub(super) fn read_back(&mut self, buffer: u32, index: u32, meta: ChunkMeta) {
        let slot = (buffer * self.k + index) as usize;
        self.metas[slot] = meta;
        self.constant_payload_bytes[slot] = 0;
    }

    /// `buffer` holds the first `chunks` chunks read back.
    pub(super) fn read_back_count(&mut self, buffer: u32, chunks: u32) {
        self.buffer_chunk_counts[buffer as usize] = chunks;
    }

    /// `buffer` holds the end marker, at `(timestamp_ns, elapsed_ns)`: an empty chunk at
    /// the stream's end, carrying the gap lost since the last chunk.
    pub(super) fn end_marker(&mut self, buffer: u32, (timestamp_ns, elapsed_ns): (u64, u64)) {
        let gap_bytes = std::mem::take(&mut self.pending_gap_bytes);
        self.metas[(buffer * self.k) as usize] = ChunkMeta {
            timestamp_ns,
            elapsed_ns,
            stream_offset_bytes: self.stream_offset_bytes,
            gap_bytes,
            lost_through_bytes: self.lost_bytes,
            payload_len_bytes: 0,
            payload_crc32c: crate::layout::crc32c(&[]),
            end: true,
        };
        self.gap_count += u64::from(gap_bytes > 0);
        self.buffer_chunk_counts[buffer as usize] = 1;
    }

    /// The recording claims the stream up to `stream_bytes`, `lost_bytes` lost in it (a
    /// failure): what was taken past that counts as unrecorded.
    pub(super) fn claimed_to(&mut self, stream_bytes: u64, lost_bytes: u64) {
        let past_bytes = (self.stream_offset_bytes - stream_bytes) - (self.lost_bytes - lost_bytes);
        self.recorded_stream_bytes -= past_bytes.min(self.recorded_stream_bytes);
        self.unrecorded_bytes += past_bytes;
    }

    /// What the stream came to, for the report.
    pub(super) fn tally(&self) -> StreamTally {
        StreamTally {
            recorded_bytes: self.recorded_stream_bytes,
            lost_past_end_bytes: self.lost_past_end_bytes,
            lost_by_cause_bytes: self.lost_by_cause_bytes,
            gap_count: self.gap_count,
            unrecorded_bytes: self.unrecorded_bytes,
            overdue_bytes: self.overdue_bytes,
        }
    }

    /// `buffer`'s write is done with it (completed, or given up): it is free again.
    pub(super) fn free_buffer(&mut self, buffer: u32) {
        self.buffer_chunk_counts[buffer as usize] = 0;
        self.free.push(buffer);
    }

    /// Moves the buffer being filled, if it holds anything, to the ready FIFO.
    pub(super) fn seal_filling(&mut self) {
        if let Some(buffer) = self.filling.take() {
            if self.buffer_chunk_counts[buffer as usize] > 0 {
                self.ready.push_back(buffer);
            } else {
                self.free.push(buffer);
            }
        }
    }

    /// Gives up a buffer that was filled but will not be written (abort, full target).
    /// Buffers are dropped from the end of the input (every buffer after a dropped one is
    /// dropped too, in any order), so the stream is rewound to where the first dropped
    /// chunk's gap began: the recording stays one contiguous stream that ends with its last
    /// chunk written, and the input lost past that end (however far a paced source ran
    /// ahead of the drives) is counted apart, never in the stream.
    pub(super) fn drop_buffer(&mut self, buffer: u32) {
        // The chunks the index counted are not the stream's any more: what follows is
        // left unindexed (a reader scans it), never indexed at the wrong chunks.
        self.index = None;
        let base = buffer as usize * self.k as usize;
        for index in (0..self.buffer_chunk_counts[buffer as usize] as usize).rev() {
            let meta = self.metas[base + index];
            self.unrecorded_bytes += meta.payload_len_bytes as u64;
            self.recorded_stream_bytes -= meta.payload_len_bytes as u64;
            self.rewind_to(
                meta.stream_offset_bytes - meta.gap_bytes,
                meta.lost_through_bytes - meta.gap_bytes,
            );
            self.gap_count -= u64::from(meta.gap_bytes > 0);
        }
        self.free_buffer(buffer);
    }

    /// The stream ends at `offset_bytes` (unless it ends there or before already), with
    /// `lost_bytes` lost in it: the losses past it (the gap the next chunk would have
    /// carried included) leave the stream.
    fn rewind_to(&mut self, offset_bytes: u64, lost_bytes: u64) {
        if offset_bytes >= self.stream_offset_bytes {
            return;
        }
        debug_assert!(lost_bytes <= self.lost_bytes);
        self.lost_past_end_bytes += self.lost_bytes - lost_bytes;
        self.lost_bytes = lost_bytes;
        self.stream_offset_bytes = offset_bytes;
        self.pending_gap_bytes = 0;
    }
}

/// What a recording's stream came to: the bytes recorded, lost past its end and by cause,
/// the gaps in it, and what was taken and not written or due and not taken.
#[derive(Debug, Clone, Copy)]
pub(super) struct StreamTally {
    pub(super) recorded_bytes: u64,
    pub(super) lost_past_end_bytes: u64,
    pub(super) lost_by_cause_bytes: [u64; 2],
    pub(super) gap_count: u64,
    pub(super) unrecorded_bytes: u64,
    pub(super) overdue_bytes: u64,
}

impl Writer<'_> {
    /// Whether the source may be read now: it has data left and we are running, or, for a
    /// record source (the network) asked to stop, it still holds what arrived before the
    /// stop: what a socket buffer or capture ring took in is recorded, not dropped.
    pub(super) fn wants_input(&self) -> bool {
        let running = match self.state() {
            ControlState::Run => true,
            // At most a sync interval of it: input that keeps coming is not drained for ever.
            ControlState::Stop => {
                self.ingest.records
                    && !self.ingest.drained
                    && self.ingest.drain_started.is_none_or(|started| {
                        self.clock.since(started) < self.options.sync_interval
                    })
            }
            ControlState::Abort => false,
        };
        !self.ingest.source_done
            && !self.placement.full
            && self.error.is_none()
            && running
            && self
                .options
                .limit_bytes
                .is_none_or(|limit| self.ingest.stream_offset_bytes < limit)
    }

    /// For a paced source with nothing in flight: wait until the next payload is due.
    pub(super) fn sleep_until_due(&self) {
        if let Some(rate) = self.options.rate_bytes_per_s {
            let due_at = (self.ingest.stream_offset_bytes
                + self.ingest.payload_capacity_bytes as u64) as f64
                / rate;
            let wait = due_at - self.clock.since(self.started).as_secs_f64();
            // At least a microsecond, even where the payload seems due already: the loop
            // found nothing to do, and `due_bytes` may round the same moment down to just
            // short of it; a wait of nothing would leave a virtual clock where it stands,
            // and the loop would ask again for ever.
            let wait = Duration::from_secs_f64(wait.clamp(0.0, 0.05)).max(Duration::from_micros(1));
            self.clock.sleep(wait);
        } else {
            self.clock.sleep(Duration::from_millis(1));
        }
    }

    /// Payload bytes the paced source has produced by now (all bytes when unpaced).
    pub(super) fn due_bytes(&self) -> u64 {
        match self.options.rate_bytes_per_s {
            Some(rate) => (self.clock.since(self.started).as_secs_f64() * rate) as u64,
            None => u64::MAX,
        }
    }

    /// Payload bytes due by now, within the size asked for.
    fn due_within_limit(&self) -> u64 {
        let due = self.due_bytes();
        self.options.limit_bytes.map_or(due, |limit| due.min(limit))
    }

    /// A paced source is a stream that does not wait for the recorder: what falls more than
    /// [`PACED_BACKLOG`] of input behind its schedule (the recorder busy elsewhere, or too
    /// slow for the rate at all) is lost, counted, and marked as a gap. Whole payloads are
    /// skipped, so stream offsets keep their alignment.
    fn drop_backlog(&mut self) -> bool {
        let Some(rate) = self.options.rate_bytes_per_s else {
            return false;
        };
        let capacity = self.ingest.payload_capacity_bytes as u64;
        let behind = self
            .due_within_limit()
            .saturating_sub(self.ingest.stream_offset_bytes);
        let skipped =
            behind.saturating_sub(self.ingest.backlog_allowed(rate)) / capacity * capacity;
        self.count_lost(skipped, LossCause::BehindRate);
        skipped > 0
    }

    /// When a paced recording stops (its duration reached, or a stop asked for), input was
    /// due by then that had not been taken. What the input's buffering holds is reported as
    /// overdue; what lies further behind (the recorder was not scheduled for a while before
    /// the stop) is lost, as it would have been had the recorder looked, and the end marker
    /// carries it as a gap. So recorded, lost and overdue add up to what the rate sent, and
    /// overdue is never more than the input could have buffered.
    pub(super) fn account_unproduced(&mut self) {
        let Some(rate) = self.options.rate_bytes_per_s else {
            return;
        };
        if self.ingest.source_done {
            return;
        }
        let elapsed = self.clock.since(self.started);
        let until = self.options.duration.map_or(elapsed, |d| d.min(elapsed));
        let due = (until.as_secs_f64() * rate) as u64;
        let due = self.options.limit_bytes.map_or(due, |limit| due.min(limit));
        let behind = due.saturating_sub(self.ingest.stream_offset_bytes);
        self.count_lost(
            behind.saturating_sub(self.ingest.backlog_allowed(rate)),
            LossCause::BehindRate,
        );
        self.ingest.overdue_bytes = due.saturating_sub(self.ingest.stream_offset_bytes);
    }

    /// Counts `bytes` of input as lost: the stream moves past them and the next chunk
    /// (or the end marker) carries the gap.
    fn count_lost(&mut self, bytes: u64, cause: LossCause) {
        if bytes == 0 {
            return;
        }
        if let Some(counters) = self.counters {
            counters.lost(cause, bytes);
        }
        self.ingest.lose(bytes, cause);
        self.progress
            .lost_bytes
            .store(self.ingest.lost_bytes, Ordering::Relaxed);
    }

    /// Takes data from the source into buffers. Returns whether anything moved.
    pub(super) fn produce(&mut self) -> bool {
        let mut progressed = self.wants_input() && self.drop_backlog();
        let capacity = self.ingest.payload_capacity_bytes as u64;
        while self.wants_input() {
            let remaining = self.options.limit_bytes.map_or(capacity, |limit| {
                (limit - self.ingest.stream_offset_bytes).min(capacity)
            });
            if self.due_bytes() < self.ingest.stream_offset_bytes + remaining {
                // Paced: the next payload has not arrived yet. Send what is filled only when
                // the targets are about to idle; while writes are in flight, the buffer keeps
                // filling, so that I/Os stay whole instead of one chunk each.
                if self.engine.in_flight() < self.placement.members.len() as u32 {
                    self.ingest.seal_filling();
                }
                break;
            }
            let Some(buffer) = self.buffer_to_fill() else {
                if self.options.rate_bytes_per_s.is_some() {
                    // No room: this payload is lost, counted, and marked in the stream.
                    self.count_lost(remaining, LossCause::NoBuffer);
                    progressed = true;
                    continue;
                }
                break; // Back-pressure: the source waits.
            };
            progressed = true;
            if self.fill_chunk(buffer, remaining) == Flow::Stop {
                break;
            }
        }
        progressed
    }

    /// The buffer being filled, or a free one where input may take one: rewrites after a
    /// failed flush keep a few free buffers (see `rewrite.rs`).
    #[inline]
    fn buffer_to_fill(&mut self) -> Option<u32> {
        match self.ingest.filling {
            Some(buffer) => Some(buffer),
            None if self.input_may_take_buffers() => self.ingest.free.pop(),
            None => None,
        }
    }

    /// Fills the next chunk slot of `buffer` with up to `remaining` bytes of the source,
    /// and seals the buffer where the chunk ends it (full, short, or the source done).
    /// When the chunk about to be filled begins, on the wall clock and on the monotonic
    /// clock since the recording began (format 1.5: a step of the wall clock moves the
    /// first, never the second). A paced source's chunks are stamped at their place in the
    /// stream, the same model time on both.
    #[inline]
    fn chunk_times(&self) -> (u64, u64) {
        match self.options.rate_bytes_per_s {
            Some(rate) => {
                let elapsed_ns = (self.ingest.stream_offset_bytes as f64 / rate * 1e9) as u64;
                (self.start_ns + elapsed_ns, elapsed_ns)
            }
            None => (
                self.clock.wall_ns(),
                self.clock.since(self.start_instant).as_nanos() as u64,
            ),
        }
    }

    #[inline]
    fn fill_chunk(&mut self, buffer: u32, remaining: u64) -> Flow {
        self.ingest.filling = Some(buffer);
        let index = self.ingest.buffer_chunk_counts[buffer as usize];
        let start = index as usize * self.chunk_bytes() + CHUNK_HEADER_SIZE_BYTES;
        let times = self.chunk_times();
        let chunk_slot = buffer as usize * self.k as usize + index as usize;
        let draining = self.state() != ControlState::Run;
        if draining {
            let now = self.clock.now();
            self.ingest.drain_started.get_or_insert(now);
        }
        let time_ns = self.start_ns + times.1;
        let placed = self.place_index_parts(buffer, start, remaining, time_ns);
        let (prefix, source_room) = (placed.1 as u64, remaining - placed.1 as u64);
        let offset = self.ingest.stream_offset_bytes;
        let at = (start + placed.1, offset + prefix);
        let read = self.read_payload(buffer, at, source_room, chunk_slot, draining);
        if draining && (read.bytes as u64) < source_room && !read.packed {
            self.ingest.drained = true; // What was there is taken; the stop goes on.
        }
        if read.bytes == 0 {
            // The index parts placed wait for a payload the source fills.
            if !read.quiet && !read.packed {
                self.ingest.source_done = true;
            }
            self.ingest.seal_filling();
            return Flow::Stop;
        }
        let filled = prefix as usize + read.bytes;
        let payload_crc32c = self.payload_crc32c(buffer, start, filled);
        let payload = &self.engine.pool().slot(buffer as usize)[start..start + filled];
        self.ingest.index_chunk(placed, time_ns, offset, payload);
        self.ingest
            .chunk_filled(buffer, times, filled as u32, payload_crc32c);
        if (read.bytes as u64) < source_room && !read.packed {
            // A short chunk: the source went quiet (the chunk goes out as it is), or it
            // ended (or was interrupted by a stop) mid-payload. (A record source's chunk
            // that holds as many whole records as fit is not short: the next chunk
            // takes the next record.)
            if !read.quiet && self.state() == ControlState::Run {
                self.ingest.source_done = true;
            }
            self.ingest.seal_filling();
            return Flow::Stop;
        }
        if index + 1 == self.k {
            self.ingest.seal_filling();
            // Let submission run between buffers so that I/O starts early.
            return Flow::Stop;
        }
        Flow::Next
    }

    /// Places the index parts waiting at `start` of `buffer` (the payload of a chunk with
    /// `remaining` bytes of room), stamped `time_ns`: (parts, bytes) placed.
    #[inline]
    fn place_index_parts(
        &mut self,
        buffer: u32,
        start: usize,
        remaining: u64,
        time_ns: u64,
    ) -> (usize, usize) {
        if !self.ingest.indexes() {
            return (0, 0);
        }
        let payload = &mut self.engine.pool_mut().slot_mut(buffer as usize)
            [start..start + remaining as usize];
        self.ingest.place_index_parts(payload, time_ns)
    }

    /// At the end of a recording that indexes its flows: the last bucket's block, in
    /// chunks of its own after the last the source filled. Where no buffer comes free, the
    /// last bucket stays unindexed (a reader scans it).
    pub(super) fn write_index_tail(&mut self) {
        let Some(index) = self.ingest.index.as_mut() else {
            return;
        };
        index.close_bucket();
        while self
            .ingest
            .index
            .as_ref()
            .is_some_and(FlowIndexer::has_pending)
        {
            let Some(buffer) = self.buffer_for_index() else {
                return;
            };
            self.ingest.filling = Some(buffer);
            let index = self.ingest.buffer_chunk_counts[buffer as usize];
            let start = index as usize * self.chunk_bytes() + CHUNK_HEADER_SIZE_BYTES;
            let times = self.chunk_times();
            let time_ns = self.start_ns + times.1;
            let capacity = self.ingest.payload_capacity_bytes as u64;
            let placed = self.place_index_parts(buffer, start, capacity, time_ns);
            if placed.0 == 0 {
                return; // A part larger than half a payload: cannot be (see `part_max`).
            }
            let payload_crc32c = self.payload_crc32c(buffer, start, placed.1);
            if let Some(index) = self.ingest.index.as_mut() {
                index.parts_placed(placed.0, placed.1);
            }
            self.ingest
                .chunk_filled(buffer, times, placed.1 as u32, payload_crc32c);
            if index + 1 == self.k {
                self.ingest.seal_filling();
            }
        }
        self.ingest.seal_filling();
    }

    /// The buffer being filled, or a free one, waiting for a write to complete where none
    /// is free.
    fn buffer_for_index(&mut self) -> Option<u32> {
        loop {
            if let Some(buffer) = self.buffer_to_fill() {
                return Some(buffer);
            }
            if self.engine.in_flight() == 0 || self.reap(true).is_err() {
                return None;
            }
        }
    }

    /// Reads up to `remaining` bytes of the source into `buffer` from `start`, where the
    /// stream is at `stream_offset_bytes` (chunk slot `chunk_slot`); a read error is kept as the recording's error and reads as nothing.
    #[inline]
    fn read_payload(
        &mut self,
        buffer: u32,
        (start, stream_offset_bytes): (usize, u64),
        remaining: u64,
        chunk_slot: usize,
        draining: bool,
    ) -> Filled {
        let constant = self.ingest.constant_source;
        if constant && self.ingest.constant_payload_bytes[chunk_slot] as u64 == remaining {
            // A constant source filled this slot before: the bytes are already there.
            return Filled {
                bytes: remaining as usize,
                quiet: false,
                packed: false,
            };
        }
        // Input that can go quiet (a pipe) is not held in memory much longer than a
        // sync interval: after that long without a byte, what came goes out. Draining
        // at a stop takes only what is there already.
        let quiet_after = match draining {
            true => Some(Duration::ZERO),
            false => self
                .ingest
                .source_may_block
                .then_some(self.options.sync_interval),
        };
        let payload = &mut self.engine.pool_mut().slot_mut(buffer as usize)
            [start..start + remaining as usize];
        let read = match fill_until_quiet(
            &mut *self.source,
            stream_offset_bytes,
            payload,
            self.control,
            quiet_after,
        ) {
            Ok(filled) => filled,
            Err(error) => {
                self.fail(RecordingFailure::Source(Arc::new(error)));
                Filled {
                    bytes: 0,
                    quiet: false,
                    packed: false,
                }
            }
        };
        self.ingest.constant_payload_bytes[chunk_slot] =
            if constant { read.bytes as u32 } else { 0 };
        read
    }

    /// The CRC of the `filled` payload bytes at `start` of `buffer`; a constant source's is
    /// computed once per length.
    #[inline]
    fn payload_crc32c(&mut self, buffer: u32, start: usize, filled: usize) -> u32 {
        let constant = self.ingest.constant_source;
        match self.ingest.constant_crc32c {
            Some((len, crc)) if constant && len == filled as u32 => crc,
            _ => {
                let payload = &self.engine.pool().slot(buffer as usize)[start..start + filled];
                let crc = crate::layout::crc32c(payload);
                if constant {
                    self.ingest.constant_crc32c = Some((filled as u32, crc));
                }
                crc
            }
        }
    }
}

/// Whether filling goes on with the next chunk after one.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Flow {
    Next,
    Stop,
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pattern::Pattern;
    use crate::source::PatternSource;

    fn ingest(buffers: u32, k: u32) -> Ingest {
        Ingest::new(buffers, k, 1000, &PatternSource(Pattern::new(1)))
    }

    /// Fills the next buffer with `chunks` chunks of `len` bytes, and seals it.
    fn fill(ingest: &mut Ingest, chunks: u32, len: u32) -> u32 {
        let buffer = ingest.free.pop().unwrap();
        ingest.filling = Some(buffer);
        for _ in 0..chunks {
            ingest.chunk_filled(buffer, (0, 0), len, 0);
        }
        ingest.seal_filling();
        buffer
    }

    #[test]
    fn the_end_marker_carries_the_loss_since_the_last_chunk_at_the_streams_end() {
        let mut ingest = ingest(2, 4);
        fill(&mut ingest, 2, 1000);
        ingest.lose(500, LossCause::BehindRate);
        let end = ingest.take_free().unwrap();
        ingest.end_marker(end, (7, 8));
        let meta = ingest.meta(end, 0);
        assert!(meta.end && meta.payload_len_bytes == 0);
        assert_eq!((meta.stream_offset_bytes, meta.gap_bytes), (2500, 500));
        assert_eq!((ingest.chunk_count(end), ingest.tally().gap_count), (1, 1));
    }

    #[test]
    fn what_was_taken_past_a_failed_recordings_claim_is_unrecorded() {
        let mut ingest = ingest(4, 2);
        for _ in 0..3 {
            fill(&mut ingest, 2, 1000);
        }
        ingest.lose(100, LossCause::NoBuffer);
        assert_eq!(ingest.stream_at(), (6100, 100));
        // The claim ends after the first buffer: 4,000 bytes and the loss were past it.
        ingest.claimed_to(2000, 0);
        let tally = ingest.tally();
        assert_eq!((tally.recorded_bytes, tally.unrecorded_bytes), (2000, 4000));
    }

    #[test]
    fn a_copy_of_a_buffer_describes_its_chunks_and_ready_buffers_are_taken_oldest_first() {
        let mut ingest = ingest(4, 2);
        let first = fill(&mut ingest, 2, 1000);
        let second = fill(&mut ingest, 1, 300);
        assert_eq!(ingest.ready_front(), Some(first));
        assert_eq!(ingest.take_ready(), Some(first));
        let copy = ingest.take_free().unwrap();
        ingest.copied(first, copy);
        assert_eq!(ingest.chunk_count(copy), 2);
        let (a, b) = (ingest.meta(copy, 1), ingest.meta(first, 1));
        assert_eq!(
            (a.stream_offset_bytes, a.payload_len_bytes),
            (b.stream_offset_bytes, 1000)
        );
        assert!(ingest.ready_waits());
        ingest.drop_ready();
        assert!(!ingest.ready_waits());
        assert_eq!(ingest.chunk_count(second), 0);
        assert_eq!(
            ingest.stream_at().0,
            2000,
            "rewound past the dropped buffer"
        );
    }

    #[test]
    fn a_loss_goes_into_the_next_chunk_as_its_gap_and_only_that_one() {
        let mut ingest = ingest(2, 4);
        let buffer = ingest.free.pop().unwrap();
        ingest.chunk_filled(buffer, (0, 0), 1000, 0);
        ingest.lose(3000, LossCause::NoBuffer);
        ingest.chunk_filled(buffer, (0, 0), 1000, 0);
        ingest.chunk_filled(buffer, (0, 0), 1000, 0);
        let metas = &ingest.metas[(buffer * 4) as usize..][..3];
        assert_eq!(
            metas
                .iter()
                .map(|m| (m.stream_offset_bytes, m.gap_bytes))
                .collect::<Vec<_>>(),
            [(0, 0), (4000, 3000), (5000, 0)]
        );
        assert_eq!(ingest.stream_offset_bytes, 6000);
        assert_eq!((ingest.lost_bytes, ingest.gap_count), (3000, 1));
        assert_eq!(ingest.recorded_stream_bytes, 3000);
    }

    #[test]
    fn sealing_an_empty_buffer_frees_it_and_a_full_one_joins_the_ready_queue_in_order() {
        let mut ingest = ingest(3, 2);
        let first = fill(&mut ingest, 2, 1000);
        let second = fill(&mut ingest, 1, 500);
        let empty = ingest.free.pop().unwrap();
        ingest.filling = Some(empty);
        ingest.seal_filling();
        assert_eq!(ingest.ready, [first, second]);
        assert_eq!(ingest.free, [empty]);
        assert_eq!(ingest.filling, None);
    }

    #[test]
    fn dropping_buffers_from_the_tail_rewinds_the_stream_to_the_first_dropped_chunk() {
        let mut ingest = ingest(3, 2);
        fill(&mut ingest, 2, 1000);
        let second = fill(&mut ingest, 2, 1000);
        let third = fill(&mut ingest, 1, 700);
        assert_eq!(ingest.stream_offset_bytes, 4700);
        ingest.ready.pop_back();
        ingest.drop_buffer(third);
        ingest.ready.pop_back();
        ingest.drop_buffer(second);
        assert_eq!(ingest.stream_offset_bytes, 2000);
        assert_eq!(ingest.recorded_stream_bytes, 2000);
        assert_eq!(ingest.unrecorded_bytes, 2700);
        assert_eq!(ingest.buffer_chunk_counts[second as usize], 0);
        assert!(ingest.free.contains(&second) && ingest.free.contains(&third));
    }

    /// A paced source far ahead of a target that fills: losses between and after the
    /// chunks dropped leave the stream with them, so the stream never claims more lost
    /// than it holds, and nothing lost goes uncounted.
    #[test]
    fn a_rewind_takes_the_losses_past_the_new_end_out_of_the_stream() {
        let mut ingest = ingest(4, 2);
        fill(&mut ingest, 2, 1000);
        ingest.lose(5000, LossCause::BehindRate);
        let second = fill(&mut ingest, 1, 1000);
        ingest.lose(9000, LossCause::NoBuffer);
        let third = fill(&mut ingest, 2, 1000);
        ingest.lose(40_000, LossCause::BehindRate);
        assert_eq!(ingest.stream_offset_bytes, 59_000);
        assert_eq!(ingest.lost_bytes, 54_000);
        // Dropped from the front (as placement does when the target fills) or the back
        // (as the end does): the same end.
        let mut front_first = ingest.clone();
        ingest.ready.pop_back();
        ingest.drop_buffer(third);
        assert_eq!(
            (ingest.stream_offset_bytes, ingest.lost_bytes),
            (8000, 5000)
        );
        ingest.ready.pop_back();
        ingest.drop_buffer(second);
        front_first.drop_buffer(second);
        front_first.drop_buffer(third);
        assert_eq!(
            (front_first.stream_offset_bytes, front_first.lost_bytes),
            (ingest.stream_offset_bytes, ingest.lost_bytes)
        );
        assert_eq!(front_first.lost_past_end_bytes, ingest.lost_past_end_bytes);
        // The stream ends where the first buffer's chunks do: the gap before the second
        // buffer is past the end too.
        assert_eq!((ingest.stream_offset_bytes, ingest.lost_bytes), (2000, 0));
        assert_eq!(ingest.lost_past_end_bytes, 54_000);
        assert_eq!((ingest.pending_gap_bytes, ingest.gap_count), (0, 0));
        assert_eq!(ingest.lost_by_cause_bytes, [9000, 45_000]);
        assert_eq!(ingest.recorded_stream_bytes + ingest.unrecorded_bytes, 5000);
        assert_eq!(
            ingest.recorded_stream_bytes
                + ingest.unrecorded_bytes
                + ingest.lost_bytes
                + ingest.lost_past_end_bytes,
            59_000,
            "every byte of input recorded, not recorded or lost"
        );
    }

    #[test]
    fn a_paced_backlog_is_a_quarter_second_bounded_by_64_mib_and_a_payload() {
        let ingest = ingest(1, 1);
        assert_eq!(ingest.backlog_allowed(1e6), 250_000);
        assert_eq!(ingest.backlog_allowed(1e12), PACED_BACKLOG_MAX_BYTES);
        assert_eq!(ingest.backlog_allowed(1.0), 1000, "at least one payload");
    }
}
