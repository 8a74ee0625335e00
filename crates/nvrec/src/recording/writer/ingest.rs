//! Ingest: the source fills payloads into pool buffers (several chunk slots, one I/O each)
//! and a full buffer joins the ready FIFO. Pacing, loss accounting (a paced source that
//! finds no free buffer loses data, counted and written into the next chunk as a gap) and
//! the quiet-pipe rule (after a sync interval without a byte, what came goes out) live here.

use super::*;

/// How far a paced source may fall behind its schedule before what is overdue is lost: the
/// input's own buffering (a NIC ring, a socket buffer, a device FIFO), as time at the rate
/// and at most [`PACED_BACKLOG_MAX_BYTES`].
const PACED_BACKLOG: Duration = Duration::from_millis(250);
const PACED_BACKLOG_MAX_BYTES: u64 = 64 << 20;

impl Writer<'_> {
    /// Whether the source may be read now: it has data left and we are running, or, for a
    /// record source (the network) asked to stop, it still holds what arrived before the
    /// stop: what a socket buffer or capture ring took in is recorded, not dropped.
    pub(super) fn wants_input(&self) -> bool {
        let running = match self.state() {
            ControlState::Run => true,
            // At most a sync interval of it: input that keeps coming is not drained for ever.
            ControlState::Stop => {
                self.records
                    && !self.drained
                    && self
                        .drain_started
                        .is_none_or(|started| started.elapsed() < self.options.sync_interval)
            }
            ControlState::Abort => false,
        };
        !self.source_done
            && !self.full
            && self.error.is_none()
            && running
            && self
                .options
                .limit_bytes
                .is_none_or(|limit| self.stream_offset_bytes < limit)
    }

    /// For a paced source with nothing in flight: wait until the next payload is due.
    pub(super) fn sleep_until_due(&self) {
        if let Some(rate) = self.options.rate_bytes_per_s {
            let due_at =
                (self.stream_offset_bytes + self.payload_capacity_bytes as u64) as f64 / rate;
            let wait = due_at - self.clock.since(self.started).as_secs_f64();
            if wait > 0.0 {
                self.clock.sleep(Duration::from_secs_f64(wait.min(0.05)));
            }
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
        let capacity = self.payload_capacity_bytes as u64;
        let behind = self
            .due_within_limit()
            .saturating_sub(self.stream_offset_bytes);
        let skipped = behind.saturating_sub(self.backlog_allowed(rate)) / capacity * capacity;
        self.count_lost(skipped, LossCause::BehindRate);
        skipped > 0
    }

    /// How far behind its schedule a paced source at `rate` may be before the rest is lost:
    /// [`PACED_BACKLOG`] at the rate, at most [`PACED_BACKLOG_MAX_BYTES`], at least a payload.
    fn backlog_allowed(&self, rate: f64) -> u64 {
        ((rate * PACED_BACKLOG.as_secs_f64()) as u64)
            .min(PACED_BACKLOG_MAX_BYTES)
            .max(self.payload_capacity_bytes as u64)
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
        if self.source_done {
            return;
        }
        let elapsed = self.clock.since(self.started);
        let until = self.options.duration.map_or(elapsed, |d| d.min(elapsed));
        let due = (until.as_secs_f64() * rate) as u64;
        let due = self.options.limit_bytes.map_or(due, |limit| due.min(limit));
        let behind = due.saturating_sub(self.stream_offset_bytes);
        self.count_lost(
            behind.saturating_sub(self.backlog_allowed(rate)),
            LossCause::BehindRate,
        );
        self.overdue_bytes = due.saturating_sub(self.stream_offset_bytes);
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
        self.stream_offset_bytes += bytes;
        self.lost_bytes += bytes;
        self.pending_gap_bytes += bytes;
        self.progress
            .lost_bytes
            .store(self.lost_bytes, Ordering::Relaxed);
    }

    /// Takes data from the source into buffers. Returns whether anything moved.
    pub(super) fn produce(&mut self) -> bool {
        let mut progressed = self.wants_input() && self.drop_backlog();
        let capacity = self.payload_capacity_bytes as u64;
        while self.wants_input() {
            let remaining = self.options.limit_bytes.map_or(capacity, |limit| {
                (limit - self.stream_offset_bytes).min(capacity)
            });
            if self.due_bytes() < self.stream_offset_bytes + remaining {
                // Paced: the next payload has not arrived yet. Send what is filled only when
                // the targets are about to idle; while writes are in flight, the buffer keeps
                // filling, so that I/Os stay whole instead of one chunk each.
                if self.engine.in_flight() < self.members.len() as u32 {
                    self.seal_filling();
                }
                break;
            }
            // Rewrites after a failed flush keep a few free buffers (see `rewrite.rs`).
            let buffer = match self.filling {
                Some(buffer) => Some(buffer),
                None if self.input_may_take_buffers() => self.free.pop(),
                None => None,
            };
            let Some(buffer) = buffer else {
                if self.options.rate_bytes_per_s.is_some() {
                    // No room: this payload is lost, counted, and marked in the stream.
                    self.count_lost(remaining, LossCause::NoBuffer);
                    progressed = true;
                    continue;
                }
                break; // Back-pressure: the source waits.
            };
            self.filling = Some(buffer);
            let index = self.buffer_chunk_counts[buffer as usize];
            let chunk_bytes = self.chunk_bytes();
            let start = index as usize * chunk_bytes + CHUNK_HEADER_SIZE_BYTES;
            let stream_offset_bytes = self.stream_offset_bytes;
            let timestamp_ns = match self.options.rate_bytes_per_s {
                Some(rate) => self.start_ns + (stream_offset_bytes as f64 / rate * 1e9) as u64,
                None => self.clock.wall_ns(),
            };
            let chunk_slot = buffer as usize * self.k as usize + index as usize;
            let draining = self.state() != ControlState::Run;
            if draining {
                let now = self.clock.now();
                self.drain_started.get_or_insert(now);
            }
            let constant = self.constant_source;
            let payload = &mut self.engine.pool_mut().slot_mut(buffer as usize)
                [start..start + remaining as usize];
            // Input that can go quiet (a pipe) is not held in memory much longer than a
            // sync interval: after that long without a byte, what came goes out. Draining
            // at a stop takes only what is there already.
            let quiet_after = match draining {
                true => Some(Duration::ZERO),
                false => self.source_may_block.then_some(self.options.sync_interval),
            };
            let mut quiet = false;
            let mut packed = false;
            let filled = if constant && self.constant_payload_bytes[chunk_slot] as u64 == remaining
            {
                // A constant source filled this slot before: the bytes are already there.
                remaining as usize
            } else {
                let filled = match crate::stream::fill_until_quiet(
                    &mut *self.source,
                    stream_offset_bytes,
                    payload,
                    self.control,
                    quiet_after,
                ) {
                    Ok(filled) => {
                        quiet = filled.quiet;
                        packed = filled.packed;
                        filled.bytes
                    }
                    Err(error) => {
                        self.error
                            .get_or_insert(format!("reading the source: {error}"));
                        0
                    }
                };
                self.constant_payload_bytes[chunk_slot] = if constant { filled as u32 } else { 0 };
                filled
            };
            progressed = true;
            if draining && (filled as u64) < remaining && !packed {
                self.drained = true; // What was there is taken; the stop goes on.
            }
            if filled == 0 {
                if !quiet && !packed {
                    self.source_done = true;
                }
                self.seal_filling();
                break;
            }
            let payload_crc32c = match self.constant_crc32c {
                Some((len, crc)) if constant && len == filled as u32 => crc,
                _ => {
                    let crc = crate::layout::crc32c(&payload[..filled]);
                    if constant {
                        self.constant_crc32c = Some((filled as u32, crc));
                    }
                    crc
                }
            };
            self.metas[buffer as usize * self.k as usize + index as usize] = ChunkMeta {
                timestamp_ns,
                stream_offset_bytes,
                gap_bytes: std::mem::take(&mut self.pending_gap_bytes),
                payload_len_bytes: filled as u32,
                payload_crc32c,
                end: false,
            };
            if self.metas[buffer as usize * self.k as usize + index as usize].gap_bytes > 0 {
                self.gap_count += 1;
            }
            self.buffer_chunk_counts[buffer as usize] = index + 1;
            self.stream_offset_bytes += filled as u64;
            self.recorded_stream_bytes += filled as u64;
            if (filled as u64) < remaining && !packed {
                // A short chunk: the source went quiet (the chunk goes out as it is), or it
                // ended (or was interrupted by a stop) mid-payload. (A record source's chunk
                // that holds as many whole records as fit is not short: the next chunk
                // takes the next record.)
                if !quiet && self.state() == ControlState::Run {
                    self.source_done = true;
                }
                self.seal_filling();
                break;
            }
            if index + 1 == self.k {
                self.seal_filling();
                // Let submission run between buffers so that I/O starts early.
                break;
            }
        }
        progressed
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
    /// Buffers are dropped from the tail of the input, so the stream is rewound to the
    /// start of the first dropped chunk: the recording stays one contiguous stream.
    pub(super) fn drop_buffer(&mut self, buffer: u32) {
        let base = buffer as usize * self.k as usize;
        for index in 0..self.buffer_chunk_counts[buffer as usize] as usize {
            let meta = self.metas[base + index];
            self.unrecorded_bytes += meta.payload_len_bytes as u64;
            self.recorded_stream_bytes -= meta.payload_len_bytes as u64;
            self.stream_offset_bytes = self.stream_offset_bytes.min(meta.stream_offset_bytes);
        }
        self.buffer_chunk_counts[buffer as usize] = 0;
        self.free.push(buffer);
    }
}
