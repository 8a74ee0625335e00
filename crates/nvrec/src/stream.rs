//! Chunked streaming to and from an address range: the NVMe Streamer, in software.
//!
//! A write takes chunks from a [`Source`] in address order, packs up to `io_size_bytes` of
//! adjacent chunks into one slot of the buffer pool, and keeps `queue_depth` such I/Os in
//! flight through an [`Engine`](crate::engine::Engine). A read does the reverse and hands chunks to a [`Sink`] in
//! address order, whatever order the completions arrive in. Both track the *frontier*: the
//! end of the longest run of chunks, from the first address, that has completed. That is the
//! "last address" reported after a stop, abort or failure; nothing beyond the chunks that were
//! submitted is ever touched.
//!
//! Stop and abort come from a [`Control`] (set by signal handlers in the CLI, or by a
//! [`StopTrigger`]):
//! - stop: take no more chunks from the source; chunks already taken are written, in-flight
//!   I/Os complete, the flush runs;
//! - abort: chunks taken but not yet submitted are discarded; in-flight I/Os complete, the
//!   flush runs.
//!
//! A source that ends inside a chunk (the streamer's early tlast) finishes the write: the
//! chunk is padded with zeros and written, and the report raises [`EarlyEnd`] naming it.
//!
//! Address errors are found before any I/O is issued. The data path does not allocate: the
//! pool, the in-flight ring and the completion vector are sized at start.
//!
//! A target opened through the page cache ([`IoPath::Buffered`], `--buffered`: only to
//! measure what direct I/O saves) has the page cache of the range emptied before the clock
//! starts ([`device::drop_cached`]), so that a read comes from the drive, and a write is timed
//! to the end of its flush, when the data is on the drive; a write without the flush would
//! time a copy into memory and is refused.

use crate::buffer::{BufferError, BufferPool, SLOT_ALIGN_BYTES};
use crate::control::{process_cpu_s, Control, ControlState, Progress};
use crate::device::{self, CacheDrop, DeviceError, IoPath, Target, TargetKind};
use crate::engine::{
    self, EngineChoice, EngineConfig, EngineError, EngineKind, EngineStats, IoCompletion, IoError,
    IoOp, IoRequest,
};
use crate::inflight::InFlight;
use crate::sink::{CheckReport, Sink};
use crate::source::fill_from_source;
use crate::source::Source;
use std::io;
use std::path::PathBuf;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Default chunk: the streamer's 128 KiB.
pub const CHUNK_SIZE_BYTES_DEFAULT: u64 = 128 << 10;
/// Largest chunk accepted.
pub const CHUNK_SIZE_BYTES_MAX: u64 = 64 << 20;
/// Default largest I/O: adjacent chunks are coalesced up to this size.
pub const IO_SIZE_BYTES_DEFAULT: u64 = 1 << 20;
/// Largest I/O accepted (also bounded by the pool's 64 GiB).
pub const IO_SIZE_BYTES_MAX: u64 = 256 << 20;
/// Default number of I/Os in flight (per target). Eight 1 MiB I/Os are the depth at which
/// sequential transfers are usually quoted (CrystalDiskMark's SEQ1M Q8T1), and the depth that
/// measured fastest here: against 32, 6-20 % more on writes, reads and recordings, on a virtio
/// disk and on a RAM-backed loop device alike (docs/PERFORMANCE.md).
pub const QUEUE_DEPTH_DEFAULT: u32 = 8;

/// A stop or abort that the run triggers itself.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StopTrigger {
    pub when: StopWhen,
    pub action: ControlState,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StopWhen {
    After(Duration),
    /// After this many chunks have been taken from the source (writes) or submitted (reads).
    AfterChunks(u64),
}

// ---------------------------------------------------------------------------------------------
// Address ranges.

/// How the user said where the range ends.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RangeEnd {
    /// Address of the last chunk (inclusive), like the streamer's ADDR_LAST.
    LastOffset(u64),
    ChunkCount(u64),
    SizeBytes(u64),
    /// As many whole chunks as fit before the end of the target.
    TargetEnd,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RangeSpec {
    pub first_offset_bytes: u64,
    pub end: RangeEnd,
}

/// A resolved, validated range of whole chunks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub struct ChunkRange {
    pub first_offset_bytes: u64,
    pub chunk_count: u64,
    pub chunk_size_bytes: u64,
}

impl ChunkRange {
    pub fn len_bytes(&self) -> u64 {
        self.chunk_count * self.chunk_size_bytes
    }

    pub fn end_offset_bytes(&self) -> u64 {
        self.first_offset_bytes + self.len_bytes()
    }

    pub fn last_offset_bytes(&self) -> u64 {
        self.end_offset_bytes() - self.chunk_size_bytes
    }

    pub fn chunk_offset_bytes(&self, chunk_index: u64) -> u64 {
        self.first_offset_bytes + chunk_index * self.chunk_size_bytes
    }
}

/// Bad addresses, each its own case (streamer TEST #09). None of them issues any I/O.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AddressError {
    #[error("address range beyond the target: the last chunk ends at {end_offset_bytes:#x} but the target holds {capacity_bytes:#x} bytes")]
    BeyondTarget {
        end_offset_bytes: u64,
        capacity_bytes: u64,
    },
    #[error(
        "first address {first_offset_bytes:#x} is greater than last address {last_offset_bytes:#x}"
    )]
    FirstAfterLast {
        first_offset_bytes: u64,
        last_offset_bytes: u64,
    },
    #[error("first address {first_offset_bytes:#x} is not aligned to the chunk size {chunk_size_bytes:#x}")]
    FirstUnaligned {
        first_offset_bytes: u64,
        chunk_size_bytes: u64,
    },
    #[error("last address {last_offset_bytes:#x} is not aligned to the chunk size {chunk_size_bytes:#x}")]
    LastUnaligned {
        last_offset_bytes: u64,
        chunk_size_bytes: u64,
    },
    #[error("size {size_bytes} is not a whole number of {chunk_size_bytes}-byte chunks")]
    SizeNotWholeChunks {
        size_bytes: u64,
        chunk_size_bytes: u64,
    },
    #[error("the range holds no chunk (first address {first_offset_bytes:#x}, target of {capacity_bytes:#x} bytes)")]
    Empty {
        first_offset_bytes: u64,
        capacity_bytes: u64,
    },
    #[error("a size or chunk count of 0 asks for nothing to transfer: ask for at least one chunk ({chunk_size_bytes} bytes)")]
    ZeroLength { chunk_size_bytes: u64 },
}

/// Turns what the user said into a range of whole chunks inside the target, or says why not.
pub fn resolve_range(
    spec: RangeSpec,
    chunk_size_bytes: u64,
    capacity_bytes: u64,
) -> Result<ChunkRange, AddressError> {
    assert!(
        chunk_size_bytes.is_power_of_two(),
        "chunk size is validated first"
    );
    let first = spec.first_offset_bytes;
    if !first.is_multiple_of(chunk_size_bytes) {
        return Err(AddressError::FirstUnaligned {
            first_offset_bytes: first,
            chunk_size_bytes,
        });
    }
    let chunk_count = match spec.end {
        RangeEnd::LastOffset(last) => {
            if last % chunk_size_bytes != 0 {
                return Err(AddressError::LastUnaligned {
                    last_offset_bytes: last,
                    chunk_size_bytes,
                });
            }
            if first > last {
                return Err(AddressError::FirstAfterLast {
                    first_offset_bytes: first,
                    last_offset_bytes: last,
                });
            }
            (last - first) / chunk_size_bytes + 1
        }
        RangeEnd::ChunkCount(0) | RangeEnd::SizeBytes(0) => {
            return Err(AddressError::ZeroLength { chunk_size_bytes });
        }
        RangeEnd::ChunkCount(count) => count,
        RangeEnd::SizeBytes(size_bytes) => {
            if size_bytes % chunk_size_bytes != 0 {
                return Err(AddressError::SizeNotWholeChunks {
                    size_bytes,
                    chunk_size_bytes,
                });
            }
            size_bytes / chunk_size_bytes
        }
        RangeEnd::TargetEnd => capacity_bytes.saturating_sub(first) / chunk_size_bytes,
    };
    if chunk_count == 0 {
        return Err(AddressError::Empty {
            first_offset_bytes: first,
            capacity_bytes,
        });
    }
    let end_offset_bytes = chunk_count
        .checked_mul(chunk_size_bytes)
        .and_then(|len| len.checked_add(first))
        .unwrap_or(u64::MAX);
    if end_offset_bytes > capacity_bytes {
        return Err(AddressError::BeyondTarget {
            end_offset_bytes,
            capacity_bytes,
        });
    }
    Ok(ChunkRange {
        first_offset_bytes: first,
        chunk_count,
        chunk_size_bytes,
    })
}

// ---------------------------------------------------------------------------------------------
// Configuration.

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FlushMode {
    /// fdatasync after the last write completes (the default).
    AfterWrite,
    None,
}

#[derive(Debug, Clone, Copy)]
pub struct StreamConfig {
    pub chunk_size_bytes: u64,
    /// Largest I/O; adjacent chunks are coalesced up to it. A multiple of the chunk size.
    pub io_size_bytes: u64,
    pub queue_depth: u32,
    pub engine: EngineChoice,
    pub sqpoll: bool,
    pub flush: FlushMode,
    pub trigger: Option<StopTrigger>,
}

impl Default for StreamConfig {
    fn default() -> Self {
        StreamConfig {
            chunk_size_bytes: CHUNK_SIZE_BYTES_DEFAULT,
            io_size_bytes: IO_SIZE_BYTES_DEFAULT,
            queue_depth: QUEUE_DEPTH_DEFAULT,
            engine: EngineChoice::Auto,
            sqpoll: false,
            flush: FlushMode::AfterWrite,
            trigger: None,
        }
    }
}

/// Settings that cannot work, found before anything is opened or written.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ConfigError {
    #[error("chunk size {0} is not a power of two")]
    ChunkNotPowerOfTwo(u64),
    #[error("chunk size {chunk_size_bytes} is not a multiple of the target's logical block size {logical_block_bytes}")]
    ChunkNotBlockMultiple {
        chunk_size_bytes: u64,
        logical_block_bytes: u32,
    },
    #[error("chunk size {0} is larger than the 64 MiB limit")]
    ChunkTooLarge(u64),
    #[error("I/O size {io_size_bytes} is smaller than the chunk size {chunk_size_bytes}: an I/O carries whole chunks, so give a multiple of the chunk size")]
    IoSizeBelowChunk {
        io_size_bytes: u64,
        chunk_size_bytes: u64,
    },
    #[error("I/O size {io_size_bytes} is not a multiple of the chunk size {chunk_size_bytes}: an I/O carries whole chunks")]
    IoSizeNotChunkMultiple {
        io_size_bytes: u64,
        chunk_size_bytes: u64,
    },
    #[error("I/O size {0} is larger than the 256 MiB limit")]
    IoSizeTooLarge(u64),
    #[error("queue depth {0} is out of range 1..=4096")]
    QueueDepth(u32),
    #[error("a write through the page cache is timed to the end of its flush, when the data is on the drive; without the flush it would time a copy into memory: leave out --no-flush")]
    BufferedWithoutFlush,
}

impl StreamConfig {
    /// Checks the settings against a target's logical block size.
    pub fn validate(&self, logical_block_bytes: u32) -> Result<(), ConfigError> {
        let chunk = self.chunk_size_bytes;
        if !chunk.is_power_of_two() {
            return Err(ConfigError::ChunkNotPowerOfTwo(chunk));
        }
        if !chunk.is_multiple_of(logical_block_bytes as u64) {
            return Err(ConfigError::ChunkNotBlockMultiple {
                chunk_size_bytes: chunk,
                logical_block_bytes,
            });
        }
        if chunk > CHUNK_SIZE_BYTES_MAX {
            return Err(ConfigError::ChunkTooLarge(chunk));
        }
        check_io_size(chunk, self.io_size_bytes)?;
        if self.queue_depth == 0 || self.queue_depth > engine::QUEUE_DEPTH_MAX {
            return Err(ConfigError::QueueDepth(self.queue_depth));
        }
        Ok(())
    }

    fn chunks_per_io(&self) -> u64 {
        self.io_size_bytes / self.chunk_size_bytes
    }
}

/// Checks that an I/O of `io_size_bytes` carries a whole number of chunks, at least one,
/// within `IO_SIZE_BYTES_MAX`. A size that does not is refused, never rounded: the user
/// asked for something else. `chunk_size_bytes` must not be 0.
pub fn check_io_size(chunk_size_bytes: u64, io_size_bytes: u64) -> Result<(), ConfigError> {
    assert!(chunk_size_bytes > 0, "the chunk size is checked first");
    if io_size_bytes < chunk_size_bytes {
        return Err(ConfigError::IoSizeBelowChunk {
            io_size_bytes,
            chunk_size_bytes,
        });
    }
    if !io_size_bytes.is_multiple_of(chunk_size_bytes) {
        return Err(ConfigError::IoSizeNotChunkMultiple {
            io_size_bytes,
            chunk_size_bytes,
        });
    }
    if io_size_bytes > IO_SIZE_BYTES_MAX {
        return Err(ConfigError::IoSizeTooLarge(io_size_bytes));
    }
    Ok(())
}

/// The I/O size when none is given: as many whole chunks as `IO_SIZE_BYTES_DEFAULT` holds
/// (all of it for a chunk of a power of two), or one chunk where a chunk is larger.
pub fn io_size_bytes_default(chunk_size_bytes: u64) -> u64 {
    let chunk = chunk_size_bytes.max(1);
    (IO_SIZE_BYTES_DEFAULT / chunk).max(1) * chunk
}

// ---------------------------------------------------------------------------------------------
// Reports.

#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Outcome {
    /// Every chunk of the range was transferred.
    Complete,
    /// The source ended before the range was full (a pipe closed).
    SourceEnded,
    Stopped,
    Aborted,
    Failed,
}

/// A chunk that ended before it was full: the streamer's "early tlast", which its
/// WRITE_STATUS register flags beside "finished". The source ended inside the chunk (or a
/// stop cut a blocking read of it short). The write still finishes: the chunk is padded with
/// zeros and written, never dropped, and this flag is raised in its report, so that a caller
/// that expects whole chunks (the self-test's TEST #04) can check that it was raised and
/// where.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, thiserror::Error)]
#[error(
    "early end of chunk {chunk_index} at {offset_bytes:#x}: the source gave {filled_bytes} of \
     its {} bytes, {padded_bytes} zero bytes pad it",
    .filled_bytes + .padded_bytes
)]
pub struct EarlyEnd {
    /// The short chunk's index in the range, and its address.
    pub chunk_index: u64,
    pub offset_bytes: u64,
    /// Bytes the source gave for the chunk (more than 0, fewer than a chunk).
    pub filled_bytes: u64,
    /// Zeros written after them to fill the chunk.
    pub padded_bytes: u64,
}

/// What a write or read did, for humans and for `--json`.
#[derive(Debug, Clone, serde::Serialize)]
pub struct StreamReport {
    pub op: IoOp,
    pub target: PathBuf,
    pub target_kind: TargetKind,
    pub engine: EngineKind,
    pub engine_features: String,
    /// Why `auto` did not get io_uring, when it did not.
    #[serde(serialize_with = "crate::serialize_message")]
    pub engine_fallback_reason: Option<Arc<EngineError>>,
    pub chunk_size_bytes: u64,
    pub io_size_bytes: u64,
    pub queue_depth: u32,
    pub pool_bytes: u64,
    /// Through the page cache (`--buffered`) rather than with O_DIRECT.
    pub buffered: bool,
    /// How the page cache of the range was emptied before the clock started (buffered only).
    pub cache_drop: Option<CacheDrop>,
    pub range: ChunkRange,
    pub outcome: Outcome,
    /// Chunks transferred contiguously from the first address.
    pub chunk_count: u64,
    pub bytes: u64,
    /// Address of the last chunk of that contiguous run (the streamer's ADDR_LAST).
    pub last_offset_bytes: Option<u64>,
    /// Zeros added to fill a short final chunk from a finite source (those of `early_end`).
    pub padded_bytes: u64,
    /// Raised when a chunk ended before it was full; `None` when every chunk was whole.
    pub early_end: Option<EarlyEnd>,
    /// Chunks taken from the source but discarded by an abort.
    pub discarded_chunk_count: u64,
    /// Data phase plus flush.
    pub elapsed_s: f64,
    pub flush_s: Option<f64>,
    pub rate_mib_per_s: f64,
    pub cpu_user_s: f64,
    pub cpu_system_s: f64,
    pub engine_stats: EngineStats,
    pub check: Option<CheckReport>,
    /// The first failure, if any (an I/O error, or a source or sink error); its message in
    /// the JSON.
    #[serde(serialize_with = "crate::serialize_message")]
    pub error: Option<StreamFailure>,
    /// The failed transfer or flush, where the failure was one (the JSON's parts of it).
    pub io_error: Option<IoError>,
}

/// Why a write or read failed part of the way.
#[derive(Debug, Clone, thiserror::Error)]
pub enum StreamFailure {
    /// A transfer or the flush failed.
    #[error(transparent)]
    Io(IoError),
    #[error("reading the source at chunk {chunk_index}: {error}")]
    Source {
        chunk_index: u64,
        error: Arc<io::Error>,
    },
    /// The sink (a file, a pipe, the pattern check's output) refused what was read.
    #[error("writing what was read at or after {offset_bytes:#x}: {error}")]
    Sink {
        offset_bytes: u64,
        error: Arc<io::Error>,
    },
    #[error("finishing the output: {0}")]
    Finish(Arc<io::Error>),
}

impl StreamFailure {
    /// The failed transfer, where it was one.
    pub fn io_error(&self) -> Option<IoError> {
        match self {
            StreamFailure::Io(error) => Some(*error),
            _ => None,
        }
    }
}

impl StreamReport {
    pub fn cpu_s(&self) -> f64 {
        self.cpu_user_s + self.cpu_system_s
    }

    /// Whether the run transferred and checked everything it set out to, cleanly.
    pub fn is_success(&self) -> bool {
        self.error.is_none() && self.check.is_none_or(|check| check.bad_chunk_count == 0)
    }
}

/// Failures that prevent a run from starting at all.
#[derive(Debug, thiserror::Error)]
pub enum StreamError {
    #[error(transparent)]
    Config(#[from] ConfigError),
    #[error(transparent)]
    Address(#[from] AddressError),
    #[error(transparent)]
    Buffer(#[from] BufferError),
    #[error(transparent)]
    Engine(#[from] EngineError),
    /// Emptying the page cache of a buffered target failed.
    #[error(transparent)]
    Device(#[from] DeviceError),
}

// ---------------------------------------------------------------------------------------------
// The run.

/// One I/O between submission and the moment the frontier passes it.
#[derive(Debug, Clone, Copy)]
struct Flight {
    slot: u32,
    first_chunk_index: u64,
    chunk_count: u32,
    failed: bool,
}

struct Run<'a> {
    op: IoOp,
    range: ChunkRange,
    config: StreamConfig,
    control: &'a Control,
    progress: &'a Progress,
    engine: Box<dyn engine::Engine>,
    fallback_reason: Option<Arc<EngineError>>,
    cache_drop: Option<CacheDrop>,
    /// In submission order, numbered by their user_data; the front is the oldest I/O not
    /// yet passed by the frontier.
    flights: InFlight<Flight>,
    free_slots: Vec<u32>,
    completions: Vec<IoCompletion>,
    /// Chunks submitted (or taken from the source, for writes).
    next_chunk_index: u64,
    /// Chunks completed contiguously from the first address.
    frontier_chunk_count: u64,
    frontier_blocked: bool,
    early_end: Option<EarlyEnd>,
    discarded_chunk_count: u64,
    source_ended: bool,
    error: Option<StreamFailure>,
    started: Instant,
    /// The process's (user, system) CPU seconds when the run began.
    cpu_before: (f64, f64),
}

impl<'a> Run<'a> {
    fn new(
        op: IoOp,
        target: &Target,
        range: ChunkRange,
        config: StreamConfig,
        caller_may_block: bool,
        control: &'a Control,
        progress: &'a Progress,
    ) -> Result<Run<'a>, StreamError> {
        config.validate(target.logical_block_bytes)?;
        let buffered = target.io_path == IoPath::Buffered;
        if buffered && op == IoOp::Write && config.flush == FlushMode::None {
            return Err(ConfigError::BufferedWithoutFlush.into());
        }
        let cpu_before = process_cpu_s();
        let slot_bytes = (config.chunks_per_io() * config.chunk_size_bytes)
            .next_multiple_of(SLOT_ALIGN_BYTES as u64);
        // No more slots than the range can use: a small range gets a small pool.
        let io_count = range.chunk_count.div_ceil(config.chunks_per_io());
        let slot_count = (config.queue_depth as u64).min(io_count).max(1) as u32;
        let pool = BufferPool::new(slot_count as usize, slot_bytes as usize)?;
        let engine_config = EngineConfig {
            queue_depth: slot_count,
            sqpoll: config.sqpoll,
            caller_may_block,
        };
        let opened = engine::open_engine(config.engine, &[&target.file], pool, engine_config)?;
        // Before the clock starts: the drop's flush and mincore are not the transfer's time.
        let cache_drop = buffered
            .then(|| device::drop_cached(target, range.first_offset_bytes, range.len_bytes()))
            .transpose()?;
        progress.done_bytes.store(0, Ordering::Relaxed);
        progress
            .total_bytes
            .store(range.len_bytes(), Ordering::Relaxed);
        Ok(Run {
            op,
            range,
            config,
            control,
            progress,
            engine: opened.engine,
            fallback_reason: opened.fallback_reason,
            cache_drop,
            flights: InFlight::with_capacity(slot_count as usize),
            free_slots: (0..slot_count).rev().collect(),
            completions: Vec::with_capacity(slot_count as usize),
            next_chunk_index: 0,
            frontier_chunk_count: 0,
            frontier_blocked: false,
            early_end: None,
            discarded_chunk_count: 0,
            source_ended: false,
            error: None,
            started: Instant::now(),
            cpu_before,
        })
    }

    /// The control state, after applying the run's own trigger.
    fn state(&self) -> ControlState {
        if let Some(trigger) = self.config.trigger {
            let fired = match trigger.when {
                StopWhen::After(duration) => self.started.elapsed() >= duration,
                StopWhen::AfterChunks(count) => self.next_chunk_index >= count,
            };
            if fired {
                match trigger.action {
                    ControlState::Abort => self.control.request_abort(),
                    _ => self.control.request_stop(),
                }
            }
        }
        self.control.state()
    }

    fn may_submit_more(&self) -> bool {
        self.error.is_none()
            && !self.source_ended
            && self.next_chunk_index < self.range.chunk_count
            && self.state() == ControlState::Run
    }

    fn submit(&mut self, slot: u32, first_chunk_index: u64, chunk_count: u32) {
        let sequence = self.flights.push(Flight {
            slot,
            first_chunk_index,
            chunk_count,
            failed: false,
        });
        // SAFETY: the slot came off the free list and goes back on it only when this
        // request's completion is reaped; nothing touches it in between.
        unsafe {
            self.engine.push(IoRequest {
                op: self.op,
                file_index: 0,
                slot,
                slot_offset_bytes: 0,
                offset_bytes: self.range.chunk_offset_bytes(first_chunk_index),
                len_bytes: (chunk_count as u64 * self.range.chunk_size_bytes) as u32,
                user_data: sequence,
            });
        }
    }

    /// Waits for completions (at least one if `wait`), marks them, and advances the frontier;
    /// `on_front` sees each I/O the frontier passes, in address order.
    fn reap(
        &mut self,
        wait: bool,
        on_front: &mut dyn FnMut(&mut Run<'a>, Flight),
    ) -> Result<(), EngineError> {
        let mut completions = std::mem::take(&mut self.completions);
        let result = self
            .engine
            .submit_and_reap(u32::from(wait), &mut completions);
        for completion in completions.drain(..) {
            debug_assert!(!self.flights.is_done(completion.user_data));
            let flight = self
                .flights
                .complete(completion.user_data)
                .expect("a completion of an I/O in flight");
            if let Err(error) = completion.result {
                flight.failed = true;
                self.error.get_or_insert(StreamFailure::Io(error));
            }
        }
        self.completions = completions;
        result?;
        while let Some((&front, true)) = self.flights.front() {
            self.flights.pop_front();
            if front.failed {
                self.frontier_blocked = true;
            }
            if !self.frontier_blocked {
                on_front(self, front);
                if !self.frontier_blocked {
                    self.frontier_chunk_count += front.chunk_count as u64;
                    self.progress.done_bytes.store(
                        self.frontier_chunk_count * self.range.chunk_size_bytes,
                        Ordering::Relaxed,
                    );
                }
            }
            self.free_slots.push(front.slot);
        }
        Ok(())
    }

    /// Reaps until nothing is in flight.
    /// Reaps what completed after a round of submits, waiting only when nothing more can be
    /// submitted right now. False when nothing is in flight: the run is over.
    fn reap_between_submits(
        &mut self,
        on_front: &mut dyn FnMut(&mut Run<'a>, Flight),
    ) -> Result<bool, EngineError> {
        if self.flights.is_empty() {
            return Ok(false);
        }
        let wait = self.free_slots.is_empty() || !self.may_submit_more();
        self.reap(wait, on_front)?;
        Ok(true)
    }

    fn drain(&mut self, on_front: &mut dyn FnMut(&mut Run<'a>, Flight)) -> Result<(), EngineError> {
        while !self.flights.is_empty() {
            self.reap(true, on_front)?;
        }
        Ok(())
    }

    fn finish(mut self, target: &Target, check: Option<CheckReport>) -> StreamReport {
        let mut flush_s = None;
        if self.op == IoOp::Write
            && self.config.flush == FlushMode::AfterWrite
            && self.next_chunk_index > 0
        {
            let flush_started = Instant::now();
            if let Err(error) = self.engine.sync_data() {
                self.error.get_or_insert(StreamFailure::Io(error));
            }
            flush_s = Some(flush_started.elapsed().as_secs_f64());
        }
        let elapsed = self.started.elapsed();
        let cpu_after = process_cpu_s();
        let bytes = self.frontier_chunk_count * self.range.chunk_size_bytes;
        let outcome = if self.error.is_some() {
            Outcome::Failed
        } else if self.frontier_chunk_count == self.range.chunk_count {
            Outcome::Complete
        } else {
            match self.control.state() {
                ControlState::Abort => Outcome::Aborted,
                ControlState::Stop => Outcome::Stopped,
                ControlState::Run => Outcome::SourceEnded,
            }
        };
        StreamReport {
            op: self.op,
            target: target.path.clone(),
            target_kind: target.kind,
            engine: self.engine.kind(),
            engine_features: self.engine.features(),
            engine_fallback_reason: self.fallback_reason.take(),
            chunk_size_bytes: self.range.chunk_size_bytes,
            io_size_bytes: self.config.chunks_per_io() * self.range.chunk_size_bytes,
            queue_depth: self.config.queue_depth,
            pool_bytes: self.engine.pool().total_bytes() as u64,
            buffered: target.io_path == IoPath::Buffered,
            cache_drop: self.cache_drop,
            range: self.range,
            outcome,
            chunk_count: self.frontier_chunk_count,
            bytes,
            last_offset_bytes: (self.frontier_chunk_count > 0)
                .then(|| self.range.chunk_offset_bytes(self.frontier_chunk_count - 1)),
            padded_bytes: self.early_end.map_or(0, |early_end| early_end.padded_bytes),
            early_end: self.early_end,
            discarded_chunk_count: self.discarded_chunk_count,
            elapsed_s: elapsed.as_secs_f64(),
            flush_s,
            rate_mib_per_s: crate::unit::rate_mib_per_s(bytes, elapsed),
            cpu_user_s: cpu_after.0 - self.cpu_before.0,
            cpu_system_s: cpu_after.1 - self.cpu_before.1,
            engine_stats: self.engine.stats(),
            check,
            io_error: self.error.as_ref().and_then(StreamFailure::io_error),
            error: self.error,
        }
    }
}

/// Checks the config and range against the target; no I/O.
pub fn plan(
    target: &Target,
    spec: RangeSpec,
    config: &StreamConfig,
) -> Result<ChunkRange, StreamError> {
    config.validate(target.logical_block_bytes)?;
    Ok(resolve_range(
        spec,
        config.chunk_size_bytes,
        target.capacity_bytes,
    )?)
}

/// Writes the chunks of `range` from `source`. See the module docs for stop and abort.
pub fn write(
    target: &Target,
    range: ChunkRange,
    source: &mut dyn Source,
    config: StreamConfig,
    control: &Control,
    progress: &Progress,
) -> Result<StreamReport, StreamError> {
    let mut run = Run::new(
        IoOp::Write,
        target,
        range,
        config,
        source.may_block(),
        control,
        progress,
    )?;
    let chunk_bytes = range.chunk_size_bytes as usize;
    let chunks_per_io = config.chunks_per_io();
    let mut no_op = |_: &mut Run<'_>, _: Flight| {};
    // A constant source (zeros) fills each slot once: the leading chunks of each slot that
    // already hold its bytes.
    let constant = source.is_constant();
    let mut constant_chunk_counts = vec![0u32; run.engine.pool().slot_count()];
    loop {
        // Fill and submit while there are free slots and work.
        while run.may_submit_more() {
            let Some(slot) = run.free_slots.pop() else {
                break;
            };
            let first_chunk_index = run.next_chunk_index;
            let chunk_limit = chunks_per_io.min(range.chunk_count - first_chunk_index);
            let mut filled_chunk_count = 0u32;
            while (filled_chunk_count as u64) < chunk_limit {
                let chunk_index = first_chunk_index + filled_chunk_count as u64;
                let offset_bytes = range.chunk_offset_bytes(chunk_index);
                let start = filled_chunk_count as usize * chunk_bytes;
                let buf =
                    &mut run.engine.pool_mut().slot_mut(slot as usize)[start..start + chunk_bytes];
                let already = constant && filled_chunk_count < constant_chunk_counts[slot as usize];
                let filled = if already {
                    Ok(chunk_bytes)
                } else {
                    fill_from_source(source, offset_bytes, buf, control)
                };
                if constant && !already && matches!(filled, Ok(bytes) if bytes == chunk_bytes) {
                    constant_chunk_counts[slot as usize] = filled_chunk_count + 1;
                }
                match filled {
                    Ok(0) => {
                        run.source_ended = true;
                        break;
                    }
                    Ok(filled_bytes) => {
                        filled_chunk_count += 1;
                        run.next_chunk_index += 1;
                        if filled_bytes < chunk_bytes {
                            // A short final chunk: padded, flagged, never dropped. Nothing is
                            // taken after it, so there is at most one.
                            debug_assert!(run.early_end.is_none());
                            buf[filled_bytes..].fill(0);
                            run.early_end = Some(EarlyEnd {
                                chunk_index,
                                offset_bytes,
                                filled_bytes: filled_bytes as u64,
                                padded_bytes: (chunk_bytes - filled_bytes) as u64,
                            });
                            run.source_ended = true;
                            break;
                        }
                    }
                    Err(error) => {
                        run.error = Some(StreamFailure::Source {
                            chunk_index,
                            error: error.into(),
                        });
                        break;
                    }
                }
                if run.state() != ControlState::Run {
                    break;
                }
            }
            if filled_chunk_count == 0 {
                run.free_slots.push(slot);
                break;
            }
            if run.state() == ControlState::Abort {
                // Abort: what was taken but not submitted is discarded.
                run.discarded_chunk_count += filled_chunk_count as u64;
                run.next_chunk_index -= filled_chunk_count as u64;
                run.free_slots.push(slot);
                break;
            }
            run.submit(slot, first_chunk_index, filled_chunk_count);
        }
        if !run.reap_between_submits(&mut no_op)? {
            break;
        }
    }
    run.drain(&mut no_op)?;
    Ok(run.finish(target, None))
}

/// Reads the chunks of `range` into `sink`, in address order.
pub fn read(
    target: &Target,
    range: ChunkRange,
    sink: &mut dyn Sink,
    config: StreamConfig,
    control: &Control,
    progress: &Progress,
) -> Result<StreamReport, StreamError> {
    // Reads never wait on a source; a sink that blocks only delays the next reap.
    let mut run = Run::new(IoOp::Read, target, range, config, false, control, progress)?;
    let chunks_per_io = config.chunks_per_io();
    let chunk_bytes = range.chunk_size_bytes as usize;
    let mut sink_failed = false;
    let mut consume = |run: &mut Run<'_>, flight: Flight| {
        if sink_failed {
            run.frontier_blocked = true;
            return;
        }
        let data = run.engine.pool().slot(flight.slot as usize);
        let offset_bytes = run.range.chunk_offset_bytes(flight.first_chunk_index);
        let data = &data[..flight.chunk_count as usize * chunk_bytes];
        if let Err(error) = sink.consume_chunks(offset_bytes, data, chunk_bytes) {
            run.error.get_or_insert(StreamFailure::Sink {
                offset_bytes,
                error: error.into(),
            });
            sink_failed = true;
            run.frontier_blocked = true;
        }
    };
    loop {
        while run.may_submit_more() {
            let Some(slot) = run.free_slots.pop() else {
                break;
            };
            let first_chunk_index = run.next_chunk_index;
            let chunk_count = chunks_per_io.min(range.chunk_count - first_chunk_index) as u32;
            run.next_chunk_index += chunk_count as u64;
            run.submit(slot, first_chunk_index, chunk_count);
        }
        if !run.reap_between_submits(&mut consume)? {
            break;
        }
    }
    run.drain(&mut consume)?;
    if let Err(error) = sink.finish() {
        run.error.get_or_insert(StreamFailure::Finish(error.into()));
    }
    let check = sink.check_report();
    Ok(run.finish(target, check))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn io_sizes_that_do_not_carry_whole_chunks_are_refused_not_rounded() {
        const K: u64 = 1024;
        let cases: [(u64, u64, Option<ConfigError>); 7] = [
            (128 * K, 1024 * K, None),
            (128 * K, 128 * K, None),
            (
                128 * K,
                0,
                Some(ConfigError::IoSizeBelowChunk {
                    io_size_bytes: 0,
                    chunk_size_bytes: 128 * K,
                }),
            ),
            (
                128 * K,
                3 * K,
                Some(ConfigError::IoSizeBelowChunk {
                    io_size_bytes: 3 * K,
                    chunk_size_bytes: 128 * K,
                }),
            ),
            (
                128 * K,
                64 * K,
                Some(ConfigError::IoSizeBelowChunk {
                    io_size_bytes: 64 * K,
                    chunk_size_bytes: 128 * K,
                }),
            ),
            (
                128 * K,
                192 * K,
                Some(ConfigError::IoSizeNotChunkMultiple {
                    io_size_bytes: 192 * K,
                    chunk_size_bytes: 128 * K,
                }),
            ),
            (
                128 * K,
                IO_SIZE_BYTES_MAX + 128 * K,
                Some(ConfigError::IoSizeTooLarge(IO_SIZE_BYTES_MAX + 128 * K)),
            ),
        ];
        for (chunk, io, expected) in cases {
            let config = StreamConfig {
                chunk_size_bytes: chunk,
                io_size_bytes: io,
                ..StreamConfig::default()
            };
            assert_eq!(
                config.validate(512).err(),
                expected,
                "chunk {chunk}, I/O {io}"
            );
        }
        assert_eq!(io_size_bytes_default(128 * K), IO_SIZE_BYTES_DEFAULT);
        assert_eq!(io_size_bytes_default(4 << 20), 4 << 20);
        assert_eq!(
            io_size_bytes_default(12 * K),
            85 * 12 * K,
            "whole chunks, under 1 MiB"
        );
    }

    #[test]
    fn a_zero_size_or_chunk_count_is_its_own_error_whatever_the_capacity() {
        for end in [RangeEnd::SizeBytes(0), RangeEnd::ChunkCount(0)] {
            for capacity_bytes in [0, 1 << 20, u64::MAX] {
                let spec = RangeSpec {
                    first_offset_bytes: 0,
                    end,
                };
                assert_eq!(
                    resolve_range(spec, 4096, capacity_bytes),
                    Err(AddressError::ZeroLength {
                        chunk_size_bytes: 4096
                    }),
                    "{end:?} on {capacity_bytes}"
                );
            }
        }
    }
}
