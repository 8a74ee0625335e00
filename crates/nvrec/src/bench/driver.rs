//! The one I/O loop every bench uses: keep `queue_depth` transfers in flight on one engine,
//! sequentially or at random offsets in a region, for a number of bytes or a time, and log
//! what completes per time window.
//!
//! Time is the engine's ([`Engine::now_ns`]), so the same loop measures a real drive and the
//! simulated one. A transfer's latency is from the submission that carried it to the reap
//! that saw it complete; bytes count in the window in which their completion was seen.
//!
//! Progress counts for the bench as a whole: a bench sets its total once
//! ([`start_progress`]) and every workload it runs then adds the bytes it completes, so the
//! count only grows over the bench's phases, runs and threads.
//!
//! What it deliberately does not do: choose settings (the benches do), print, or retry a
//! failed transfer (the first failure ends the workload and is reported with its offset).

use super::window::{merge_windows, Window};
use super::BenchError;
use crate::control::{Control, ControlState, Progress};
use crate::engine::{Engine, IoCompletion, IoError, IoOp, IoRequest};
use crate::inflight::InFlight;
use crate::pattern::{Mismatch, Pattern};
use std::sync::atomic::Ordering;

/// Where the offsets of a workload come from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Access {
    /// From the start of the region upwards; at its end, wrap (a ring) or stop.
    Sequential,
    /// Uniform over the region, aligned to the I/O size, from a seeded generator.
    Random { seed: u64 },
}

/// What written transfers carry.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Data {
    /// The seekable pattern, generated per transfer for its offset: can be checked later.
    Pattern { seed: u64 },
    /// Incompressible bytes made once when the workload starts: as fast as it gets, but a
    /// read cannot check them.
    Incompressible,
    /// A short repeating text, as ATTO writes by default: compressing drives look faster.
    Compressible,
}

/// One workload: an operation over a region.
#[derive(Debug, Clone, Copy)]
pub struct Workload {
    pub op: IoOp,
    pub access: Access,
    pub region_offset_bytes: u64,
    pub region_len_bytes: u64,
    pub io_size_bytes: u64,
    /// Stop after this many bytes (sequential: may exceed the region when `wrap`).
    /// Default: the region once.
    pub limit_bytes: Option<u64>,
    /// Stop after this long (by the engine's clock); whichever limit comes first.
    pub limit_ns: Option<u64>,
    /// Sequential only: go on from the start of the region at its end.
    pub wrap: bool,
    pub data: Data,
    /// Reads: check what comes back against this pattern.
    pub check: Option<Pattern>,
    /// Writes: discard (TRIM) this many bytes ahead of the write point, in steps of this size.
    pub discard_ahead_bytes: Option<u64>,
    /// Length of one logging window; `None` logs nothing.
    pub window_ns: Option<u64>,
    /// When this many windows are logged (an even count), neighbours are merged in pairs and
    /// windows double in length from then on: a run of any length logs between half this and
    /// this many windows. `None`: windows keep their length.
    pub window_count_max: Option<usize>,
}

impl Workload {
    /// A sequential pass over a region, nothing logged.
    pub fn sequential(
        op: IoOp,
        region_offset_bytes: u64,
        region_len_bytes: u64,
        io_size_bytes: u64,
    ) -> Workload {
        Workload {
            op,
            access: Access::Sequential,
            region_offset_bytes,
            region_len_bytes,
            io_size_bytes,
            limit_bytes: None,
            limit_ns: None,
            wrap: false,
            data: Data::Incompressible,
            check: None,
            discard_ahead_bytes: None,
            window_ns: None,
            window_count_max: None,
        }
    }
}

/// Latency percentiles from a log-linear histogram (about 3 % resolution).
#[derive(Debug, Clone, Copy, Default, PartialEq, serde::Serialize)]
pub struct Latency {
    pub mean_us: f64,
    pub p50_us: f64,
    pub p99_us: f64,
    pub p999_us: f64,
    pub max_us: f64,
}

/// The outcome of one workload.
#[derive(Debug, Clone, serde::Serialize)]
pub struct WorkloadResult {
    pub op: IoOp,
    pub access: Access,
    pub io_size_bytes: u64,
    pub queue_depth: u32,
    pub bytes: u64,
    pub io_count: u64,
    pub elapsed_s: f64,
    pub rate_bytes_per_s: f64,
    pub iops: f64,
    pub latency: Latency,
    pub bytes_discarded: u64,
    /// Reads with a pattern to check: transfers that did not match, and the first mismatch.
    pub bad_io_count: u64,
    pub first_mismatch: Option<Mismatch>,
    /// Stopped early by the user (Ctrl-C).
    pub stopped: bool,
    pub error: Option<IoError>,
    /// The time series (empty when the workload logged none).
    pub windows: Vec<Window>,
    /// When the workload started, by the engine's clock: the time line on which runs on
    /// several drives at once are lined up (`together`). Not part of the JSON, whose times
    /// are relative to the start.
    #[serde(skip)]
    pub started_ns: u64,
}

impl WorkloadResult {
    pub fn is_success(&self) -> bool {
        self.error.is_none() && self.bad_io_count == 0
    }
}

/// Starts a bench's progress: nothing done of `total_bytes` (0 where the bench runs for a
/// time rather than a number of bytes).
pub fn start_progress(progress: &Progress, total_bytes: u64) {
    progress.done_bytes.store(0, Ordering::Relaxed);
    progress.total_bytes.store(total_bytes, Ordering::Relaxed);
}

/// Runs `workload` on `engine`. Windows are also handed to `on_window` as they close (for
/// live progress); the bytes it completes are added to `progress`, which a progress display
/// reads from another thread.
pub fn run(
    engine: &mut dyn Engine,
    workload: &Workload,
    control: &Control,
    progress: &Progress,
    on_window: &mut dyn FnMut(&Window),
) -> Result<WorkloadResult, BenchError> {
    check_workload(engine, workload)?;
    prepare_slots(engine, workload);
    let mut state = RunState::new(engine, workload);
    let mut completions: Vec<IoCompletion> = Vec::with_capacity(state.queue_depth as usize);
    loop {
        let pushed = state.issue(engine, control)?;
        if engine.in_flight() == 0 {
            break;
        }
        // Wait for one completion when the queue is full or nothing more will be issued.
        let wait = !pushed || state.free_slots.is_empty();
        engine.submit_and_reap(u32::from(wait), &mut completions)?;
        let now_ns = engine.now_ns();
        state
            .window
            .advance_to(now_ns, state.position_bytes, &mut state.windows, on_window);
        state.complete(&*engine, now_ns, &mut completions);
        state.advance_frontier();
        progress
            .done_bytes
            .fetch_add(state.done_bytes - state.reported_bytes, Ordering::Relaxed);
        state.reported_bytes = state.done_bytes;
    }
    let end_ns = engine.now_ns();
    state
        .window
        .finish(end_ns, state.position_bytes, &mut state.windows, on_window);
    Ok(state.into_result(end_ns))
}

/// Refuses a workload the engine's slots or the region cannot hold, and a flush.
fn check_workload(engine: &dyn Engine, workload: &Workload) -> Result<(), BenchError> {
    let io = workload.io_size_bytes;
    let slot_bytes = engine.pool().slot_bytes() as u64;
    if io == 0 || io > slot_bytes || io > u32::MAX as u64 {
        return Err(BenchError::Settings(format!(
            "I/O size {io} does not fit the engine's {slot_bytes}-byte slots"
        )));
    }
    if workload.region_len_bytes < io {
        return Err(BenchError::Settings(format!(
            "the region ({} bytes) is smaller than one I/O ({io} bytes)",
            workload.region_len_bytes
        )));
    }
    if workload.op == IoOp::Flush {
        return Err(BenchError::Settings(
            "a workload reads or writes".to_string(),
        ));
    }
    Ok(())
}

/// Everything [`run`] keeps between issuing requests and reaping their completions.
struct RunState<'a> {
    workload: &'a Workload,
    io: u64,
    queue_depth: u32,
    region_start: u64,
    region_end: u64,
    limit_bytes: u64,
    free_slots: Vec<u32>,
    // A slot is free again at its completion; the request stays until the frontier passes
    // it, so that the write point of a ring is exact whatever order completions come in.
    flights: InFlight<BenchFlight>,
    frontier_bytes: u64,
    histogram: Histogram,
    rng: u64,
    next_offset: u64,
    issued_bytes: u64,
    done_bytes: u64,
    io_count: u64,
    bytes_discarded: u64,
    discarded_position: u64,
    position_bytes: u64,
    bad_io_count: u64,
    first_mismatch: Option<Mismatch>,
    error: Option<IoError>,
    stopped: bool,
    start_ns: u64,
    windows: Vec<Window>,
    window: WindowLog,
    reported_bytes: u64,
}

impl<'a> RunState<'a> {
    fn new(engine: &dyn Engine, workload: &'a Workload) -> RunState<'a> {
        let io = workload.io_size_bytes;
        let queue_depth = engine.queue_depth();
        let region_start = workload.region_offset_bytes;
        // Whole I/Os only: a region that is not a multiple of the I/O size loses its tail.
        let region_end = region_start + workload.region_len_bytes / io * io;
        let limit_bytes = workload
            .limit_bytes
            .unwrap_or(if workload.limit_ns.is_some() {
                u64::MAX
            } else {
                region_end - region_start
            });
        let start_ns = engine.now_ns();
        let mut window = WindowLog::new(start_ns, workload.window_ns);
        window.count_max = workload
            .window_count_max
            .filter(|max| *max >= 2)
            .map(|max| max / 2 * 2);
        RunState {
            workload,
            io,
            queue_depth,
            region_start,
            region_end,
            limit_bytes,
            free_slots: (0..queue_depth).rev().collect(),
            flights: InFlight::with_capacity(2 * queue_depth as usize),
            frontier_bytes: 0,
            histogram: Histogram::default(),
            rng: match workload.access {
                Access::Random { seed } => seed ^ 0x5851_f42d_4c95_7f2d,
                Access::Sequential => 0,
            },
            next_offset: region_start,
            issued_bytes: 0,
            done_bytes: 0,
            io_count: 0,
            bytes_discarded: 0,
            discarded_position: 0,
            position_bytes: 0,
            bad_io_count: 0,
            first_mismatch: None,
            error: None,
            stopped: false,
            start_ns,
            windows: Vec::new(),
            window,
            reported_bytes: 0,
        }
    }

    /// Pushes requests while slots are free and the workload wants more; returns whether it
    /// pushed any.
    fn issue(&mut self, engine: &mut dyn Engine, control: &Control) -> Result<bool, BenchError> {
        let now_ns = engine.now_ns();
        let time_up = self
            .workload
            .limit_ns
            .is_some_and(|limit| now_ns.saturating_sub(self.start_ns) >= limit);
        if control.state() != ControlState::Run {
            self.stopped = true;
        }
        let may_issue = self.error.is_none()
            && !self.stopped
            && !time_up
            && self.issued_bytes < self.limit_bytes;
        let mut pushed = false;
        while may_issue && self.issued_bytes < self.limit_bytes {
            if self.next_offset >= self.region_end {
                if !self.workload.wrap {
                    break;
                }
                self.next_offset = self.region_start;
            }
            let Some(slot) = self.free_slots.pop() else {
                break;
            };
            let offset = self.next_request_offset();
            self.discard_ahead(engine)?;
            self.push(engine, slot, offset, now_ns);
            pushed = true;
        }
        Ok(pushed)
    }

    fn next_request_offset(&mut self) -> u64 {
        let io = self.io;
        match self.workload.access {
            Access::Sequential => {
                let offset = self.next_offset;
                self.next_offset += io;
                offset
            }
            Access::Random { .. } => {
                let io_count_in_region = (self.region_end - self.region_start) / io;
                self.region_start + next_random(&mut self.rng) % io_count_in_region * io
            }
        }
    }

    /// On a sequential write with discard ahead, keeps the bytes past the next write discarded.
    fn discard_ahead(&mut self, engine: &mut dyn Engine) -> Result<(), BenchError> {
        let workload = self.workload;
        let (Some(ahead), IoOp::Write, Access::Sequential) =
            (workload.discard_ahead_bytes, workload.op, workload.access)
        else {
            return Ok(());
        };
        let io = self.io;
        // Positions count bytes along the ring, laps included. Keep `ahead` bytes past
        // this write discarded, never reaching round to what is still in flight.
        let ring_bytes = self.region_end - self.region_start;
        let reach = self.issued_bytes + ring_bytes - self.queue_depth as u64 * io;
        let wanted = (self.issued_bytes + io + ahead).min(reach);
        while self.discarded_position < wanted {
            let ring_offset = self.discarded_position % ring_bytes;
            let step = ahead
                .min(ring_bytes - ring_offset)
                .min(reach - self.discarded_position);
            if let Err(source) = engine.discard(0, self.region_start + ring_offset, step) {
                return Err(BenchError::Io {
                    what: "discarding ahead of the write point".to_string(),
                    source,
                });
            }
            self.bytes_discarded += step;
            self.discarded_position += step;
        }
        Ok(())
    }

    /// Fills the slot where the data is a pattern, then pushes its request.
    fn push(&mut self, engine: &mut dyn Engine, slot: u32, offset: u64, now_ns: u64) {
        let io = self.io;
        if let (Data::Pattern { seed }, IoOp::Write) = (self.workload.data, self.workload.op) {
            Pattern::new(seed).fill(
                offset,
                &mut engine.pool_mut().slot_mut(slot as usize)[..io as usize],
            );
        }
        self.issued_bytes += io;
        let number = self.flights.push(BenchFlight {
            slot,
            offset_bytes: offset,
            submitted_ns: now_ns,
            issued_end_bytes: self.issued_bytes,
        });
        // SAFETY: the slot came off the free list for this request and goes back on it
        // at its completion, after which alone its data is checked.
        unsafe {
            engine.push(IoRequest {
                op: self.workload.op,
                file_index: 0,
                slot,
                slot_offset_bytes: 0,
                offset_bytes: offset,
                len_bytes: io as u32,
                user_data: number,
            });
        }
    }

    /// Counts each completion (checking read data against the pattern) and frees its slot.
    fn complete(&mut self, engine: &dyn Engine, now_ns: u64, completions: &mut Vec<IoCompletion>) {
        let io = self.io;
        for completion in completions.drain(..) {
            let flight = *self
                .flights
                .complete(completion.user_data)
                .expect("a completion of a request in flight");
            match completion.result {
                Ok(()) => {
                    let latency_ns = now_ns.saturating_sub(flight.submitted_ns);
                    self.histogram.record(latency_ns);
                    self.done_bytes += io;
                    self.io_count += 1;
                    self.window.add(io, latency_ns);
                    if let (Some(pattern), IoOp::Read) = (self.workload.check, self.workload.op) {
                        let data = &engine.pool().slot(flight.slot as usize)[..io as usize];
                        if let Err(mismatch) = pattern.check(flight.offset_bytes, data, io) {
                            self.bad_io_count += 1;
                            self.first_mismatch.get_or_insert(mismatch);
                        }
                    }
                }
                Err(io_error) => {
                    self.error.get_or_insert(io_error);
                }
            }
            self.free_slots.push(flight.slot);
        }
    }

    /// Moves the frontier past every completed request at the front, and with it the ring's
    /// write point.
    fn advance_frontier(&mut self) {
        while let Some((_, true)) = self.flights.front() {
            self.frontier_bytes = self.flights.pop_front().map_or(0, |f| f.issued_end_bytes);
        }
        if self.workload.access == Access::Sequential && self.frontier_bytes > 0 {
            // Where the ring's write point is: everything before it has completed.
            let ring_bytes = self.region_end - self.region_start;
            self.position_bytes = (self.frontier_bytes - 1) % ring_bytes + 1;
        }
    }

    fn into_result(self, end_ns: u64) -> WorkloadResult {
        let elapsed_s = end_ns.saturating_sub(self.start_ns) as f64 / 1e9;
        let per_s = |count: f64| {
            if elapsed_s > 0.0 {
                count / elapsed_s
            } else {
                0.0
            }
        };
        WorkloadResult {
            op: self.workload.op,
            access: self.workload.access,
            io_size_bytes: self.io,
            queue_depth: self.queue_depth,
            bytes: self.done_bytes,
            io_count: self.io_count,
            elapsed_s,
            rate_bytes_per_s: per_s(self.done_bytes as f64),
            iops: per_s(self.io_count as f64),
            latency: self.histogram.summary(),
            started_ns: self.start_ns,
            bytes_discarded: self.bytes_discarded,
            bad_io_count: self.bad_io_count,
            first_mismatch: self.first_mismatch,
            stopped: self.stopped,
            error: self.error,
            windows: self.windows,
        }
    }
}

/// A request between push and the frontier.
#[derive(Debug, Clone, Copy)]
struct BenchFlight {
    slot: u32,
    offset_bytes: u64,
    submitted_ns: u64,
    /// Bytes issued through this request: the frontier's position once it passes it.
    issued_end_bytes: u64,
}

/// Fills every slot once for data that is not generated per transfer.
fn prepare_slots(engine: &mut dyn Engine, workload: &Workload) {
    if workload.op != IoOp::Write {
        return;
    }
    let slot_count = engine.pool().slot_count();
    match workload.data {
        Data::Pattern { .. } => {}
        Data::Incompressible => {
            let pattern = Pattern::new(0x1bad_5eed);
            for slot in 0..slot_count {
                let buf = engine.pool_mut().slot_mut(slot);
                let offset = (slot * buf.len()) as u64;
                pattern.fill(offset, buf);
            }
        }
        Data::Compressible => {
            const TEXT: &[u8] = b"nvrec compressible test data. ";
            for slot in 0..slot_count {
                for (index, byte) in engine.pool_mut().slot_mut(slot).iter_mut().enumerate() {
                    *byte = TEXT[index % TEXT.len()];
                }
            }
        }
    }
}

fn next_random(rng: &mut u64) -> u64 {
    // splitmix64: seeded, uniform, cheap.
    *rng = rng.wrapping_add(0x9e37_79b9_7f4a_7c15);
    let mut z = *rng;
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// The window being filled and the rules for closing it.
struct WindowLog {
    window_ns: Option<u64>,
    count_max: Option<usize>,
    origin_ns: u64,
    start_ns: u64,
    bytes: u64,
    total_bytes: u64,
    latency_max_ns: u64,
}

impl WindowLog {
    fn new(origin_ns: u64, window_ns: Option<u64>) -> WindowLog {
        WindowLog {
            window_ns: window_ns.filter(|ns| *ns > 0),
            count_max: None,
            origin_ns,
            start_ns: origin_ns,
            bytes: 0,
            total_bytes: 0,
            latency_max_ns: 0,
        }
    }

    fn add(&mut self, bytes: u64, latency_ns: u64) {
        self.bytes += bytes;
        self.total_bytes += bytes;
        self.latency_max_ns = self.latency_max_ns.max(latency_ns);
    }

    /// Closes every window that ended at or before `now_ns` (windows in which nothing
    /// completed are logged with zero bytes: that is what a stall looks like).
    fn advance_to(
        &mut self,
        now_ns: u64,
        position_bytes: u64,
        windows: &mut Vec<Window>,
        on_window: &mut dyn FnMut(&Window),
    ) {
        let Some(window_ns) = self.window_ns else {
            return;
        };
        while now_ns >= self.start_ns + window_ns {
            self.close(window_ns, position_bytes, windows, on_window);
        }
    }

    fn finish(
        &mut self,
        end_ns: u64,
        position_bytes: u64,
        windows: &mut Vec<Window>,
        on_window: &mut dyn FnMut(&Window),
    ) {
        self.advance_to(end_ns, position_bytes, windows, on_window);
        if self.window_ns.is_some() && end_ns > self.start_ns && self.bytes > 0 {
            self.close(end_ns - self.start_ns, position_bytes, windows, on_window);
        }
    }

    fn close(
        &mut self,
        duration_ns: u64,
        position_bytes: u64,
        windows: &mut Vec<Window>,
        on_window: &mut dyn FnMut(&Window),
    ) {
        let duration_s = duration_ns as f64 / 1e9;
        let window = Window {
            start_s: (self.start_ns - self.origin_ns) as f64 / 1e9,
            duration_s,
            bytes: self.bytes,
            total_bytes: self.total_bytes,
            position_bytes,
            rate_bytes_per_s: self.bytes as f64 / duration_s,
            latency_max_us: self.latency_max_ns as f64 / 1e3,
        };
        on_window(&window);
        windows.push(window);
        self.start_ns += duration_ns;
        self.bytes = 0;
        self.latency_max_ns = 0;
        if self.count_max.is_some_and(|max| windows.len() >= max) {
            let merged: Vec<Window> = windows.chunks(2).map(merge_windows).collect();
            *windows = merged;
            self.window_ns = self.window_ns.map(|ns| ns * 2);
        }
    }
}

/// A log-linear latency histogram: 32 sub-buckets per power of two, nanoseconds.
struct Histogram {
    counts: Vec<u64>,
    count: u64,
    sum_ns: u128,
    max_ns: u64,
}

const SUB_BUCKET_BITS: u32 = 5;

impl Default for Histogram {
    fn default() -> Self {
        Histogram {
            counts: vec![0; (64 << SUB_BUCKET_BITS) as usize],
            count: 0,
            sum_ns: 0,
            max_ns: 0,
        }
    }
}

impl Histogram {
    fn bucket(value: u64) -> usize {
        if value < (1 << SUB_BUCKET_BITS) {
            return value as usize;
        }
        let magnitude = 63 - value.leading_zeros();
        let shift = magnitude - SUB_BUCKET_BITS;
        let sub = (value >> shift) & ((1 << SUB_BUCKET_BITS) - 1);
        (((shift + 1) << SUB_BUCKET_BITS) as u64 + sub) as usize
    }

    /// The smallest value that falls in `bucket` (the inverse of `bucket`).
    fn bucket_floor(bucket: usize) -> u64 {
        let bucket = bucket as u64;
        if bucket < (1 << SUB_BUCKET_BITS) {
            return bucket;
        }
        let shift = (bucket >> SUB_BUCKET_BITS) - 1;
        let sub = bucket & ((1 << SUB_BUCKET_BITS) - 1);
        ((1 << SUB_BUCKET_BITS) | sub) << shift
    }

    fn record(&mut self, value_ns: u64) {
        self.counts[Self::bucket(value_ns)] += 1;
        self.count += 1;
        self.sum_ns += value_ns as u128;
        self.max_ns = self.max_ns.max(value_ns);
    }

    fn percentile_ns(&self, fraction: f64) -> u64 {
        if self.count == 0 {
            return 0;
        }
        let rank = ((self.count as f64 * fraction).ceil() as u64).clamp(1, self.count);
        let mut seen = 0;
        for (bucket, count) in self.counts.iter().enumerate() {
            seen += count;
            if seen >= rank {
                return Self::bucket_floor(bucket).min(self.max_ns);
            }
        }
        self.max_ns
    }

    fn summary(&self) -> Latency {
        if self.count == 0 {
            return Latency::default();
        }
        Latency {
            mean_us: self.sum_ns as f64 / self.count as f64 / 1e3,
            p50_us: self.percentile_ns(0.50) as f64 / 1e3,
            p99_us: self.percentile_ns(0.99) as f64 / 1e3,
            p999_us: self.percentile_ns(0.999) as f64 / 1e3,
            max_us: self.max_ns as f64 / 1e3,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bench::{open_sim, BenchTarget};
    use crate::engine::EngineChoice;

    /// A simulated drive and an engine on it; the target holds the drive for its counters.
    fn sim(spec: &str, queue_depth: u32, slot_bytes: usize) -> (BenchTarget, Box<dyn Engine>) {
        let target = open_sim(spec);
        let engine = target
            .open_engine(EngineChoice::Auto, queue_depth, slot_bytes as u64)
            .unwrap();
        (target, engine)
    }

    /// Runs a workload with no control, progress or window watcher of its own.
    fn run_alone(
        engine: &mut dyn Engine,
        workload: &Workload,
    ) -> Result<WorkloadResult, BenchError> {
        run(
            engine,
            workload,
            &Control::new(),
            &Progress::default(),
            &mut |_| {},
        )
    }

    #[test]
    fn histogram_buckets_invert_and_percentiles_are_close() {
        for value in [0u64, 1, 31, 32, 33, 1000, 123_456, 10_000_000_000] {
            let floor = Histogram::bucket_floor(Histogram::bucket(value));
            assert!(
                floor <= value && value - floor <= value / 32 + 1,
                "{value} {floor}"
            );
        }
        let mut histogram = Histogram::default();
        for value in 1..=1000u64 {
            histogram.record(value * 1000);
        }
        let summary = histogram.summary();
        assert!((summary.p50_us - 500.0).abs() < 20.0, "{summary:?}");
        assert!((summary.p99_us - 990.0).abs() < 35.0, "{summary:?}");
        assert_eq!(summary.max_us, 1000.0);
        assert!((summary.mean_us - 500.5).abs() < 1e-9);
    }

    #[test]
    fn windows_double_when_their_count_reaches_the_most() {
        // 32 MiB at 1 GB/s: 33.5 ms. From 1 ms windows at most 8: they double at 8, 16 and 32 ms,
        // leaving four of 8 ms and what completed after them, if anything did.
        let (_drive, mut engine) = sim("sim:capacity=64M,cache=0,slow=1GB/s,latency=0", 8, 1 << 20);
        let mut workload = Workload::sequential(IoOp::Write, 0, 32 << 20, 1 << 20);
        workload.window_ns = Some(1_000_000);
        workload.window_count_max = Some(8);
        let write = run_alone(engine.as_mut(), &workload).unwrap();
        assert!(
            (4..=5).contains(&write.windows.len()),
            "{:#?}",
            write.windows
        );
        let whole = &write.windows[..4];
        assert!(
            whole.iter().all(|w| (w.duration_s - 0.008).abs() < 1e-9),
            "{whole:#?}"
        );
        for (index, window) in whole.iter().enumerate() {
            assert!((window.start_s - 0.008 * index as f64).abs() < 1e-9);
        }
        assert_eq!(write.windows.iter().map(|w| w.bytes).sum::<u64>(), 32 << 20);
        assert_eq!(write.windows.last().unwrap().total_bytes, 32 << 20);
    }

    #[test]
    fn sequential_write_then_checked_read_on_the_simulated_drive() {
        let (_drive, mut engine) = sim("sim:capacity=64M,cache=0,slow=1GB/s,latency=0", 8, 1 << 20);
        let control = Control::new();
        let progress = Progress::default();
        let mut workload = Workload::sequential(IoOp::Write, 0, 32 << 20, 1 << 20);
        workload.data = Data::Pattern { seed: 9 };
        workload.window_ns = Some(4_000_000);
        let mut seen = 0;
        let write = run(engine.as_mut(), &workload, &control, &progress, &mut |_| {
            seen += 1
        })
        .unwrap();
        assert_eq!(write.bytes, 32 << 20);
        assert!(
            (write.rate_bytes_per_s / 1e9 - 1.0).abs() < 1e-3,
            "{}",
            write.rate_bytes_per_s
        );
        // 33.5 ms in 4 ms windows: eight whole windows and the rest.
        assert_eq!(write.windows.len(), 9);
        assert_eq!(seen, 9);
        assert_eq!(write.windows.iter().map(|w| w.bytes).sum::<u64>(), 32 << 20);
        assert_eq!(write.windows.last().unwrap().position_bytes, 32 << 20);

        let mut read = Workload::sequential(IoOp::Read, 0, 32 << 20, 1 << 20);
        read.check = Some(Pattern::new(9));
        let result = run(engine.as_mut(), &read, &control, &progress, &mut |_| {}).unwrap();
        assert!(result.is_success());
        // Progress adds up the workloads.
        assert_eq!(progress.done_bytes.load(Ordering::Relaxed), 64 << 20);
        read.check = Some(Pattern::new(10));
        let result = run(engine.as_mut(), &read, &control, &progress, &mut |_| {}).unwrap();
        assert_eq!(result.bad_io_count, 32);
        assert!(result.first_mismatch.is_some());
    }

    #[test]
    fn random_reads_are_time_limited_and_stay_in_the_region() {
        let (_drive, mut engine) = sim("sim:capacity=64M,iops=100000,latency=100us", 32, 4096);
        let mut workload = Workload::sequential(IoOp::Read, 8 << 20, 8 << 20, 4096);
        workload.access = Access::Random { seed: 1 };
        workload.limit_ns = Some(10_000_000);
        let result = run_alone(engine.as_mut(), &workload).unwrap();
        // 100k IOPS for 10 ms, plus what was in flight at the end.
        assert!(
            (1000..=1040).contains(&result.io_count),
            "{}",
            result.io_count
        );
        assert!(result.latency.p50_us > 100.0);
    }

    #[test]
    fn a_ring_with_discard_ahead_wraps_and_discards_each_lap() {
        let (drive, mut engine) = sim(
            "sim:capacity=16M,cache=0,overwrite=0.5,latency=0",
            4,
            1 << 20,
        );
        let mut workload = Workload::sequential(IoOp::Write, 0, 16 << 20, 1 << 20);
        workload.wrap = true;
        workload.limit_bytes = Some(48 << 20);
        workload.discard_ahead_bytes = Some(4 << 20);
        let result = run_alone(engine.as_mut(), &workload).unwrap();
        assert_eq!(result.bytes, 48 << 20);
        assert!(
            result.bytes_discarded >= 48 << 20,
            "{}",
            result.bytes_discarded
        );
        // Every write found discarded space: no overwrite cost at all.
        assert!(
            (result.rate_bytes_per_s / 1.6e9 - 1.0).abs() < 1e-3,
            "{}",
            result.rate_bytes_per_s
        );
        assert!(drive.sim_drive().unwrap().counters().bytes_discarded >= 48 << 20);
    }

    #[test]
    fn refuses_an_io_larger_than_a_slot() {
        let (_drive, mut engine) = sim("sim:capacity=16M", 4, 4096);
        let workload = Workload::sequential(IoOp::Write, 0, 16 << 20, 1 << 20);
        let error = run_alone(engine.as_mut(), &workload).unwrap_err();
        assert!(error.to_string().contains("does not fit"), "{error}");
    }
}
