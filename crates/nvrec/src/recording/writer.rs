//! `record`: a stream into a volume set, striped, framed, checkpointed.
//!
//! # The data path
//! ```text
//! source ──payloads──▶ buffer (k chunk slots) ──ready FIFO──▶ submit: pick member, assign
//!                                                              sequence and slots, frame
//!                                                              headers (CRC32C) ──▶ engine
//! ```
//! A buffer of the pool holds up to `io_chunk_count` chunks for one I/O. The source fills
//! payloads in place (after the 128-byte header room of each chunk slot); a full buffer
//! joins the ready FIFO. Submission takes the FIFO's head, chooses a member (the one that
//! would finish it soonest, or the next in turn for round-robin), assigns the next
//! sequence numbers and that member's next slots, frames the headers in place, and pushes
//! one I/O. Members are therefore written strictly sequentially, and sequence numbers
//! follow the input order, as `docs/FORMAT.md` requires.
//!
//! The pool absorbs stalls. When it is exhausted, a source that can wait (stdin, a file,
//! an unpaced generator) simply is not read; a paced source (`rate_bytes_per_s`) loses
//! data, counted exactly and written into the recording as a gap on the next chunk.
//!
//! Durability: every `sync_interval` the contiguous run of completed chunks is flushed and
//! a checkpoint records where it ends and where each member's writer stands.

use super::counters::{LossCause, MemberCounters, RecordingCounters};
use super::disk::{self, Disk, Members};
use super::durability::{self as coordinator, Durability, Outcome};
use super::failure::{MemberFault, RecordingFailure, Step};
use super::volume::{self, VolumeSet};
use super::{Fill, MemberFailure, RecordingError, Stripe};
use crate::buffer::BufferPool;
use crate::clock::Clock;
use crate::device::{Access, Safety};
use crate::engine::{self, EngineChoice, EngineConfig, EngineKind, IoCompletion, IoError};
use crate::flow::index::FlowIndexer;
use crate::layout::{
    payload_capacity_bytes, Checkpoint, Label, RecordingEntry, RecordingFlags, RecordingState,
    Retirement,
};
use frontier::Frontier;
use ingest::Ingest;
use mark::Marker;
use member::MemberState;
use parts::Parts;
use place::{Placement, SpanEnd};
use reclaim::Reclaimer;
use retire::{untag, Retiring};
use rewrite::{Done, Rewriting};

mod checkpoint;
mod flushes;
mod frontier;
mod ingest;
mod kept;
mod mark;
mod member;
mod parts;
mod place;
mod point;
mod queue;
mod rate;
mod reach;
mod reclaim;
mod retire;
mod rewrite;
mod stripe;
use crate::control::{process_cpu_s, Control, ControlState, Progress};
use crate::source::Source;
use std::path::PathBuf;
use std::sync::atomic::Ordering;
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

/// Default pool for input someone else feeds (stdin, a file): room for stalls of about
/// 100 ms at 2.5 GB/s.
pub const BUFFER_BYTES_DEFAULT: u64 = 256 << 20;
/// A paced source's default pool holds this much of its input: on a 2-core machine whose
/// RAM-backed target is itself CPU-bound, a 60 s recording at 3.85 GB/s lost 0.3-0.7 % of its
/// input in 60-160 stalls with 256 MiB (70 ms) and nothing with 1 GiB (280 ms).
pub const PACED_BUFFER_S: f64 = 0.5;
/// The most a paced source's default pool takes: never more than a quarter of the memory.
pub const PACED_BUFFER_BYTES_MAX: u64 = 8 << 30;

/// Where a recording's input comes from, as far as sizing its pool goes.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum InputKind {
    /// A generator that produces on demand (the pattern or zeros, unpaced): it loses nothing
    /// by waiting.
    OnDemand,
    /// Input that arrives at this rate whether or not there is room (a paced generator now,
    /// a network capture later): what finds no buffer is lost.
    Paced { rate_bytes_per_s: f64 },
    /// Input someone else feeds (stdin, a file) at a rate nobody has said.
    Fed,
}

/// The pool a recording gets when the user does not size it. Input that can wait gets only
/// what keeps every member's queue full twice over: a bigger pool would only cost start-up
/// time (every page of it is touched and pinned before the first write). Input that cannot
/// wait gets [`PACED_BUFFER_S`] of itself, at least [`BUFFER_BYTES_DEFAULT`], at most
/// [`PACED_BUFFER_BYTES_MAX`]; fed input gets [`BUFFER_BYTES_DEFAULT`]. Whatever the input,
/// never more than a quarter of `memory_bytes` (a board with 512 MiB gets 128 MiB at most);
/// a `memory_bytes` of 0 (unknown) bounds nothing.
pub fn default_buffer_bytes(
    input: InputKind,
    member_count: usize,
    queue_depth: u32,
    io_bytes: u64,
    memory_bytes: u64,
) -> u64 {
    let wanted = match input {
        InputKind::OnDemand => {
            (2 * member_count as u64 * queue_depth as u64 * io_bytes).min(BUFFER_BYTES_DEFAULT)
        }
        InputKind::Paced { rate_bytes_per_s } => {
            let wanted = (rate_bytes_per_s * PACED_BUFFER_S) as u64;
            wanted.clamp(BUFFER_BYTES_DEFAULT, PACED_BUFFER_BYTES_MAX)
        }
        InputKind::Fed => BUFFER_BYTES_DEFAULT,
    };
    match memory_bytes {
        0 => wanted,
        _ => wanted.min(memory_bytes / 4),
    }
}

/// Physical memory, for bounding default pools (0 when it cannot be read).
pub fn memory_bytes() -> u64 {
    // SAFETY: sysconf has no memory-safety preconditions.
    let (pages, page_bytes) = unsafe {
        (
            libc::sysconf(libc::_SC_PHYS_PAGES),
            libc::sysconf(libc::_SC_PAGESIZE),
        )
    };
    if pages <= 0 || page_bytes <= 0 {
        return 0;
    }
    pages as u64 * page_bytes as u64
}

/// Flights (submitted I/Os the durable frontier has not passed) a writer keeps: completed
/// writes behind one slow I/O wait here, so this bounds how far a slow member may lag.
fn flight_count_max(buffer_count: u32) -> usize {
    (buffer_count as usize * 8).max(4096)
}

/// Buffers filled and queued, at most, before they are handed to the kernel together.
const SUBMIT_BATCH_IO_COUNT: usize = 8;

/// I/Os of a ring kept discarded ahead of the write point.
const TRIM_AHEAD_IO_COUNT: u64 = 64;

/// The most chunks one I/O holds (`RecordOptions::io_chunk_count`): also the most slots a
/// jump over a mark's kept slots leaves unwritten before them (see `recovery.rs`).
pub const IO_CHUNK_COUNT_MAX: u32 = 1024;

#[derive(Debug, Clone)]
pub struct RecordOptions {
    pub chunk_size_bytes: u32,
    /// Chunks per I/O (adjacent slots of one member).
    pub io_chunk_count: u32,
    /// I/Os in flight per member.
    pub queue_depth: u32,
    pub buffer_bytes: u64,
    pub stripe: Stripe,
    pub fill: Fill,
    /// Add a recording after the last one instead of formatting a new set.
    pub append: bool,
    /// Format targets that hold a volume set (its recordings are lost); without it, such a
    /// target is refused.
    pub overwrite: bool,
    /// The set's label (new sets) and the recording's name.
    pub label: String,
    pub sync_interval: Duration,
    pub engine: EngineChoice,
    /// Stop after this many stream bytes.
    pub limit_bytes: Option<u64>,
    /// Stop after this long.
    pub duration: Option<Duration>,
    /// Pace the source at this rate; data that finds no buffer is lost (and counted).
    pub rate_bytes_per_s: Option<f64>,
    /// The source is the test pattern (marks chunks and the recording PATTERN).
    pub pattern: bool,
    pub safety: Safety,
    /// For file targets of a new set: create them at this size.
    pub create_len_bytes: Option<u64>,
    /// What a failing member does to the recording.
    pub on_member_failure: MemberFailure,
    /// A member whose oldest write has been in flight this long has failed.
    pub member_timeout: Duration,
    /// The facts of a sampled signal, kept in the entry (format 1.3).
    pub signal: Option<crate::layout::Signal>,
    /// What the recording may reclaim of the set's oldest recordings, and how long the
    /// set keeps them (format 1.6).
    pub retention: super::retention::Retention,
    /// Where marks are asked of the recording while it runs (format 1.7; ring recordings
    /// keep them).
    pub marks: Option<std::sync::Arc<super::marks::MarkDesk>>,
    /// The share of each member's lap that marks may keep, below 1.
    pub max_marked: f64,
    /// How much of each member a new set uses (the rest left unwritten and unread); with
    /// `append`, refused unless it is what the set was made with.
    pub usable: Option<volume::Usable>,
    /// Whether a record source's recording indexes its flows as it goes (format 1.9,
    /// `flow::index`).
    pub flow_index: FlowIndex,
}

/// Whether a recording of packets carries a flow index.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FlowIndex {
    /// Written as the packets are recorded, a block for each bucket of at most
    /// `bucket_bytes` of chunks (`flow::index::BUCKET_BYTES_MAX` by default).
    Written { bucket_bytes: u64 },
    /// None: a reader scans every chunk for flows.
    Off,
}

impl Default for FlowIndex {
    fn default() -> Self {
        FlowIndex::Written {
            bucket_bytes: crate::flow::index::BUCKET_BYTES_MAX,
        }
    }
}

impl Default for RecordOptions {
    fn default() -> Self {
        RecordOptions {
            chunk_size_bytes: 128 << 10,
            io_chunk_count: 8,
            queue_depth: crate::stream::QUEUE_DEPTH_DEFAULT,
            buffer_bytes: BUFFER_BYTES_DEFAULT,
            stripe: Stripe::Adaptive,
            fill: Fill::Linear,
            append: false,
            overwrite: false,
            label: String::new(),
            sync_interval: Duration::from_secs(1),
            engine: EngineChoice::Auto,
            limit_bytes: None,
            duration: None,
            rate_bytes_per_s: None,
            pattern: false,
            safety: Safety::Check,
            create_len_bytes: None,
            on_member_failure: MemberFailure::Retire,
            member_timeout: super::MEMBER_TIMEOUT_DEFAULT,
            signal: None,
            retention: super::retention::Retention::default(),
            marks: None,
            max_marked: 0.5,
            flow_index: FlowIndex::default(),
            usable: None,
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum RecordOutcome {
    /// The size or duration asked for was recorded.
    Complete,
    /// The source ended.
    SourceEnded,
    Stopped,
    Aborted,
    /// Linear mode (or a recording that reclaims, with nothing more it may reclaim): every
    /// member is full.
    TargetFull,
    Failed,
}

#[derive(Debug, Clone, Default, serde::Serialize)]
pub struct MemberReport {
    pub path: PathBuf,
    pub chunk_count: u64,
    /// Writes issued (their mean size shows how well chunks were coalesced).
    pub io_count: u64,
    pub bytes: u64,
    pub laps: u64,
    pub rate_mib_per_s: f64,
}

#[derive(Debug, Clone, serde::Serialize)]
pub struct RecordReport {
    pub set_uuid: String,
    pub recording_id: u32,
    pub name: String,
    pub outcome: RecordOutcome,
    pub stripe: Stripe,
    pub fill: Fill,
    pub engine: EngineKind,
    pub engine_features: String,
    #[serde(serialize_with = "crate::serialize_message")]
    pub engine_fallback_reason: Option<Arc<engine::EngineError>>,
    pub chunk_size_bytes: u32,
    pub payload_capacity_bytes: u32,
    pub io_size_bytes: u64,
    pub queue_depth: u32,
    pub buffer_bytes: u64,
    pub first_sequence: u64,
    pub end_sequence: u64,
    pub chunk_count: u64,
    /// Stream bytes recorded (payload), and stream bytes lost to gaps.
    pub stream_bytes: u64,
    pub lost_bytes: u64,
    /// Input lost after the stream's end: a paced source that ran ahead of a target that
    /// filled lost it before the end was known; the entry's stream ends with its last
    /// chunk written, so these are not in it.
    pub lost_past_end_bytes: u64,
    /// Every byte of input lost, in the stream or past its end, by cause: so recorded,
    /// lost, not recorded and overdue add up to what the source gave.
    pub lost_by_cause: LostByCause,
    pub gap_count: u64,
    /// Bytes written to the members (whole chunk slots, headers included).
    pub written_bytes: u64,
    /// Bytes taken from the source but not recorded (abort, full target), reported, never silent.
    pub unrecorded_bytes: u64,
    /// With --rate: input due by the stop that the recorder had not yet taken (at most the
    /// input's own buffering), so that recorded + lost + overdue is what the rate sent.
    pub overdue_bytes: u64,
    pub checkpoint_count: u64,
    /// The flow index written with a recording of packets (format 1.9): the blocks made
    /// and the bytes of their index records in the stream. None without one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub flow_index: Option<FlowIndexReport>,
    pub elapsed_s: f64,
    pub rate_mib_per_s: f64,
    pub cpu_user_s: f64,
    pub cpu_system_s: f64,
    pub members: Vec<MemberReport>,
    /// Members retired after a failure; the recording went on without them.
    pub retirements: Vec<RetirementReport>,
    /// Some member was retired: the recording is whole but its redundancy of drives is not.
    pub degraded: bool,
    /// Failures of a member that neither ended the recording nor retired it: the flush of a
    /// member already retired, the closing checkpoint after the entry was closed.
    pub member_errors: Vec<MemberErrorReport>,
    /// Recordings whose space this recording reclaimed, or that were older than the set
    /// keeps, in the order they went (format 1.6).
    pub reclaimed: Vec<super::retention::Reclaimed>,
    /// Why the set's oldest recording was not reclaimed when the recording needed room.
    #[serde(serialize_with = "crate::serialize_message")]
    pub reclaim_refused: Option<super::retention::ReclaimRefused>,
    /// Marks taken and released while it recorded (format 1.7).
    pub marks: Vec<super::marks::MarkAnswer>,
    /// Why it failed (outcome `failed`): in the JSON, `error` (the message) and `failure`
    /// (its kind, member, cause and errno).
    #[serde(flatten, serialize_with = "super::failure::serialize_failure")]
    pub error: Option<RecordingFailure>,
}

/// What a recording's flow index came to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub struct FlowIndexReport {
    pub blocks: u64,
    pub bytes: u64,
    /// Buffers were given up (a full target, an abort): the chunks after the last block
    /// went unindexed, and a reader scans them.
    pub given_up: bool,
}

/// Input lost, by cause (see [`LossCause`]).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
pub struct LostByCause {
    /// A paced input found no free buffer.
    pub no_buffer_bytes: u64,
    /// A paced input fell further behind its schedule than its buffering holds.
    pub behind_rate_bytes: u64,
}

impl LostByCause {
    fn of(bytes: [u64; 2]) -> LostByCause {
        LostByCause {
            no_buffer_bytes: bytes[LossCause::NoBuffer.index()],
            behind_rate_bytes: bytes[LossCause::BehindRate.index()],
        }
    }
}

/// A member's flush or metadata write that failed where no retirement tells of it.
#[derive(Debug, Clone, serde::Serialize)]
pub struct MemberErrorReport {
    pub member_index: u16,
    pub path: PathBuf,
    #[serde(serialize_with = "crate::serialize_shown")]
    pub error: MemberError,
    /// Chunks the member completed since its last flush that succeeded: the entry counts
    /// them (they are on the drive, and reads find them), but the drive never confirmed
    /// them durable, so a power cut may take them.
    pub unflushed_chunk_count: u64,
}

/// A failure of a member that ended nothing: the recording went on without what it
/// could not do.
#[derive(Debug, Clone, thiserror::Error)]
pub enum MemberError {
    /// A flush or a metadata write failed on a member that was retired already, or that
    /// a checkpoint went on without.
    #[error(transparent)]
    Failed(Arc<RecordingError>),
    /// Chunks it completed since its last good flush that were never confirmed durable.
    #[error(transparent)]
    Unconfirmed(Unconfirmed),
}

/// Why chunks a member completed since its last good flush were never confirmed durable
/// (its flush failed, and writing them again elsewhere did not come to pass).
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum Unconfirmed {
    #[error(
        "chunks it completed since its last good flush did not fit on the member that took \
         its writes: they stay where the failed flush left them"
    )]
    NoRoom,
    #[error(
        "chunks it completed since its last good flush did not read back from it after the \
         flush failed: they were never made durable elsewhere"
    )]
    NotReadBack,
    #[error(
        "chunks it completed since its last good flush could not be written again \
         elsewhere: they stay where the failed flush left them"
    )]
    NotRewritten,
}

/// A retired member, as reports show it.
#[derive(Debug, Clone, serde::Serialize)]
pub struct RetirementReport {
    pub member_index: u16,
    pub path: PathBuf,
    pub cause: crate::layout::RetirementCause,
    pub errno: i32,
    pub retired_ns: u64,
    /// Where the stream stood at its first chunk not completed.
    pub stream_offset_bytes: u64,
    pub first_sequence: u64,
    /// Where its unfinished chunks were written instead.
    pub redirect_member: u16,
    pub redirect_chunk_count: u32,
}

impl RetirementReport {
    /// `retirement` of `set`, with the member's path.
    pub fn new(set: &VolumeSet, retirement: &Retirement) -> RetirementReport {
        RetirementReport {
            member_index: retirement.member_index,
            path: set
                .members
                .get(retirement.member_index as usize)
                .and_then(|m| m.as_ref())
                .map(|m| m.disk.path().to_path_buf())
                .unwrap_or_default(),
            cause: retirement.cause,
            errno: retirement.errno,
            retired_ns: retirement.retired_ns,
            stream_offset_bytes: retirement.stream_offset_bytes,
            first_sequence: retirement.first_sequence,
            redirect_member: retirement.redirect_member,
            redirect_chunk_count: retirement.redirect_slot_count,
        }
    }
}

#[derive(Debug, Clone, Copy, Default)]
struct ChunkMeta {
    timestamp_ns: u64,
    /// The same moment on the monotonic clock, since the recording began (format 1.5).
    elapsed_ns: u64,
    stream_offset_bytes: u64,
    gap_bytes: u64,
    /// The bytes lost in the stream through this chunk's gap (what a rewind of the stream
    /// to before its gap gives back).
    lost_through_bytes: u64,
    payload_len_bytes: u32,
    /// CRC32C of the payload, computed right after it was filled, while it is in the cache.
    payload_crc32c: u32,
    end: bool,
}

#[derive(Debug, Clone, Copy)]
struct Flight {
    buffer: u32,
    member: u16,
    first_sequence: u64,
    chunk_count: u32,
    stream_end_bytes: u64,
    lost_bytes_through: u64,
    /// I/Os of this write not yet completed: two when a ring write goes on at slot 0.
    parts_left: u8,
    failed: bool,
    /// The member's slot the write starts at, and its ring position (lap x lap slots +
    /// slot; the slot in a linear recording): the order of the member's writes.
    slot: u64,
    position: u64,
    /// Every slot of the write, an I/O a part (see `parts.rs`).
    lie: Parts,
    /// Times the write was sent again to another member (its completions carry it, so that
    /// a late completion of an earlier attempt is told apart).
    attempt: u8,
    submitted: Instant,
    error: Option<IoError>,
    /// The write still owns `buffer` in the kernel (an attempt that never completed):
    /// the next attempt copies it into a buffer of its own.
    needs_copy: bool,
    /// A failed write given up: how many of its chunks, from the first, its member holds
    /// whole all the same (`stream_end_bytes` and `lost_bytes_through` then end there).
    landed: u32,
}

/// The end a closed entry states.
#[derive(Debug, Clone, Copy)]
struct Claimed {
    sequence_end: u64,
    stream_bytes: u64,
    lost_bytes: u64,
}

/// What [`Writer::place`] put where.
struct Placed {
    /// Its slots, an I/O a part.
    lie: Parts,
    slot: u64,
    position: u64,
    stream_end_bytes: u64,
}

/// The recording loop: it moves events between the stages, each of which owns its state
/// (see the module docs): [`Ingest`] (buffers, pacing, loss), [`Placement`] (members'
/// slots, laps and limits; sequence numbers), [`Frontier`] (writes in flight, the durable
/// frontier, checkpoint content) and [`Retiring`] (retirements, redirects, rewrites,
/// stale attempts). What is left here is what every stage reads: the set, the source, the
/// engine, the options, time, and the recording's identity and first failure.
struct Writer<'a> {
    set: &'a VolumeSet,
    durability: Durability,
    source: &'a mut dyn Source,
    options: RecordOptions,
    control: &'a Control,
    progress: &'a Progress,
    engine: Box<dyn engine::Engine>,
    fallback_reason: Option<Arc<engine::EngineError>>,
    k: u32,
    /// I/Os the engine takes at once: a ring write split at the end of a lap is two.
    engine_queue_depth: u32,
    completions: Vec<IoCompletion>,
    recording_id: u32,
    first_sequence: u64,
    /// The first failure: the recording ends, draining what is in flight.
    error: Option<RecordingFailure>,
    started: Instant,
    start_ns: u64,
    /// `start_ns` on the monotonic clock: chunks' `elapsed_ns` count from here, so that
    /// the entry's start plus a chunk's elapsed time is its time on the recording's
    /// timeline.
    start_instant: Instant,
    ingest: Ingest,
    placement: Placement,
    frontier: Frontier,
    retiring: Retiring,
    /// Writes a failed flush left in doubt, sent again; the gate (see `rewrite.rs`).
    rewriting: Rewriting,
    /// Live counters for a monitor on another thread, when the caller asked for them.
    counters: Option<&'a RecordingCounters>,
    /// Where time comes from: the members' clock (virtual on simulated disks).
    clock: Clock,
    /// With a reclaim policy: the set's oldest recordings, reclaimed as room is needed.
    reclaimer: Option<Reclaimer>,
    /// Recordings older than the set keeps, reclaimed as the recording began.
    reclaimed_at_start: Vec<super::retention::Reclaimed>,
    /// With a mark desk: the marks asked of the recording, and the slots they keep.
    marker: Option<Marker>,
}

/// Records `source` onto the targets at `paths`. See the module docs.
pub fn record(
    paths: &[PathBuf],
    source: &mut dyn Source,
    options: &RecordOptions,
    control: &Control,
    progress: &Progress,
) -> Result<RecordReport, RecordingError> {
    record_on(Members::Paths(paths), source, options, control, progress)
}

/// As [`record`], and once the set is open and the recording begins, `counters` holds its
/// live counters ([`RecordingCounters`]) for a monitor on another thread. A recording that
/// fails before it begins leaves `counters` empty.
pub fn record_counted(
    paths: &[PathBuf],
    source: &mut dyn Source,
    options: &RecordOptions,
    control: &Control,
    progress: &Progress,
    counters: &OnceLock<RecordingCounters>,
) -> Result<RecordReport, RecordingError> {
    record_inner(
        Members::Paths(paths),
        source,
        options,
        control,
        progress,
        Some(counters),
    )
}

/// Records `source` onto `members`: targets by path, or simulated disks.
pub fn record_on(
    members: Members<'_>,
    source: &mut dyn Source,
    options: &RecordOptions,
    control: &Control,
    progress: &Progress,
) -> Result<RecordReport, RecordingError> {
    record_inner(members, source, options, control, progress, None)
}

fn record_inner(
    members: Members<'_>,
    source: &mut dyn Source,
    options: &RecordOptions,
    control: &Control,
    progress: &Progress,
    counters: Option<&OnceLock<RecordingCounters>>,
) -> Result<RecordReport, RecordingError> {
    validate(options)?;
    let cpu_before = process_cpu_s();
    let reclaiming = options.retention.reclaim.clone();
    // A recording that may reclaim goes round the data area as a ring that never
    // overwrites itself (see `writer/reclaim.rs`); nothing ahead of it is discarded.
    let ring_options;
    let options = if reclaiming.is_some() {
        ring_options = RecordOptions {
            fill: Fill::Ring { trim: false },
            ..options.clone()
        };
        &ring_options
    } else {
        options
    };
    let (set, checkpoint, recording_id) = if options.append {
        let set = volume::open_members(members, Access::Write, options.safety)?;
        set.lock_for_recording()?;
        set.require_complete()?;
        volume::check_usable(&set, options.usable)?;
        super::reader::recover(&set)?;
        refuse_unnamed(&set)?;
        let checkpoint = set.newest_checkpoint()?.ok_or_else(|| {
            RecordingError::NotAVolumeSet("no valid checkpoint on any member".into())
        })?;
        // Never an id the set used before, even one whose entry was lost.
        let last_id = super::health::highest_recording_id(&set)?;
        if let Some(mark) = super::marks::table_slot_kept(&set, last_id + 1)? {
            return Err(RecordingError::KeptMark(format!(
                "recording {} would take the table slot of {}",
                last_id + 1,
                super::marks::release_hint(&mark)
            )));
        }
        (set, checkpoint, last_id + 1)
    } else {
        if !options.overwrite {
            volume::refuse_sets(members)?;
        }
        let set = volume::format(
            members,
            options.chunk_size_bytes,
            &options.label,
            options.create_len_bytes,
            options.usable,
            options.safety,
        )?;
        let checkpoint = set
            .newest_checkpoint()?
            .ok_or_else(|| RecordingError::NotAVolumeSet("format wrote no checkpoint".into()))?;
        (set, checkpoint, 1)
    };
    let (entries, aged) = retained(&set, options, recording_id)?;
    std::thread::scope(|scope| {
        let durability = Durability::start(scope, &set);
        let mut writer = Writer::new(
            &set,
            durability,
            source,
            &checkpoint,
            recording_id,
            options,
            control,
            progress,
            counters,
        )?;
        writer.reclaimed_at_start = aged;
        let marks = match options.append {
            true => super::marks::kept(&set)?,
            false => Vec::new(),
        };
        if let Some(policy) = reclaiming {
            let reclaimer = Reclaimer::new(policy, entries, marks);
            reclaimer.set_limits(&mut writer.placement.members);
            writer.reclaimer = Some(reclaimer);
        } else if !marks.is_empty() {
            match options.fill {
                Fill::Linear => writer.placement.keep_out_of_marks(&set, &marks),
                Fill::Ring { .. } => writer.keep_earlier_marks(marks)?,
            }
        }
        writer.begin()?;
        if let Some(counters) = writer.counters {
            counters.began();
        }
        writer.run();
        writer.end()?;
        Ok(writer.report(cpu_before))
    })
}

/// Refuses to add a recording to a set that holds chunks no entry names at its write
/// point: the new recording would begin there and write over them.
fn refuse_unnamed(set: &VolumeSet) -> Result<(), RecordingError> {
    for entry in super::scan::unnamed(set)? {
        let found = super::scan::unaccounted(set, &entry);
        if found.chunk_count > 0 {
            return Err(RecordingError::Unnamed {
                recording_id: entry.recording_id,
                chunk_count: found.chunk_count,
            });
        }
    }
    Ok(())
}

/// The set's recordings as a recording with a retention policy begins, oldest first, after
/// those older than `keep` were reclaimed (and those, for the report).
fn retained(
    set: &VolumeSet,
    options: &RecordOptions,
    recording_id: u32,
) -> Result<(Vec<RecordingEntry>, Vec<super::retention::Reclaimed>), RecordingError> {
    use super::retention;
    let retention = &options.retention;
    if retention.reclaim.is_none() && retention.keep.is_none() {
        return Ok((Vec::new(), Vec::new()));
    }
    let mut entries = super::reader::recordings(set)?;
    let mut reclaimed = match retention.keep {
        Some(keep) => {
            let now_ns = set.clock().wall_ns();
            let policy = retention.reclaim.as_ref();
            retention::reclaim_aged(set, &mut entries, keep, now_ns, policy)?
        }
        None => Vec::new(),
    };
    // The new entry takes the table slot of recording `id - nR`, the oldest the table
    // lists: one that still holds data goes first, never out of the table unreclaimed.
    let evicted = recording_id.checked_sub(set.recording_slot_count());
    let oldest = entries
        .iter_mut()
        .find(|entry| Some(entry.recording_id) == evicted && retention::holds_data(entry));
    if let (Some(entry), Some(policy)) = (oldest, &retention.reclaim) {
        match retention::reclaim(
            set,
            entry,
            crate::layout::ReclaimCause::Space,
            Some(policy),
            &[],
        )? {
            Ok(next) => {
                reclaimed.push(retention::report_of(&next));
                *entry = next;
            }
            Err(refusal) => {
                return Err(RecordingError::Usage(format!(
                    "recording {recording_id} takes the table slot of recording {}, which may \
                     not be reclaimed ({refusal:?})",
                    entry.recording_id
                )))
            }
        }
    }
    Ok((entries, reclaimed))
}

fn validate(options: &RecordOptions) -> Result<(), RecordingError> {
    let usage = |text: String| Err(RecordingError::Usage(text));
    let retains = options.retention.reclaim.is_some() || options.retention.keep.is_some();
    if retains && !options.append {
        return usage(
            "--reclaim and --keep apply to a set recordings are added to (--append)".into(),
        );
    }
    if options.retention.keep.is_some() && options.retention.reclaim.is_none() {
        return usage(
            "--keep reclaims old recordings for a recording that may reuse their space: \
             give it with --reclaim"
                .into(),
        );
    }
    if options.retention.reclaim.is_some() && matches!(options.fill, Fill::Ring { .. }) {
        return usage(
            "a ring reuses its own space; --reclaim reuses that of a set's oldest recordings \
             (record with --append, without --ring)"
                .into(),
        );
    }
    if let Err(error) = crate::layout::ChunkSize::new(u64::from(options.chunk_size_bytes)) {
        return usage(error.to_string());
    }
    if options.io_chunk_count == 0 || options.io_chunk_count > IO_CHUNK_COUNT_MAX {
        return usage(format!(
            "{} chunks per I/O is out of range 1..={IO_CHUNK_COUNT_MAX}",
            options.io_chunk_count
        ));
    }
    if options.queue_depth == 0 || options.queue_depth > engine::QUEUE_DEPTH_MAX {
        return usage(format!(
            "queue depth {} is out of range",
            options.queue_depth
        ));
    }
    if matches!(options.rate_bytes_per_s, Some(rate) if !(rate > 0.0 && rate.is_finite())) {
        return usage("the rate must be positive".into());
    }
    Ok(())
}

/// The engine never has more in flight than the buffers or the members' queues allow,
/// plus, in a ring, room per member for the further parts of a write that goes on at slot 0
/// or round kept slots (see `parts.rs`; a write goes out only where all its parts fit).
fn engine_queue_depth(buffer_count: u32, options: &RecordOptions, member_count: usize) -> u32 {
    let split_room = match options.fill {
        Fill::Linear => 0,
        Fill::Ring { .. } => member_count as u32 * (parts::PARTS_MAX as u32 - 1),
    };
    (buffer_count.min(options.queue_depth.saturating_mul(member_count as u32)) + split_room)
        .min(engine::QUEUE_DEPTH_MAX)
}

/// The counters a recording publishes, as it starts on `members` with `buffer_count`
/// buffers of `io_bytes`.
fn new_counters(
    set: &VolumeSet,
    members: &[MemberState],
    recording_id: u32,
    buffer_count: u32,
    io_bytes: u64,
) -> RecordingCounters {
    RecordingCounters::new(
        recording_id,
        set.set_uuid.to_string(),
        set.present()
            .zip(members)
            .map(|(member, state)| {
                MemberCounters::new(member.disk.path().to_path_buf(), state.queue.depth())
            })
            .collect(),
        buffer_count,
        buffer_count as u64 * io_bytes,
        set.clock().wall_ns(),
    )
}

/// A new recording's progress: nothing done yet, and its limit as the total.
fn reset_progress(progress: &Progress, options: &RecordOptions) {
    progress.done_bytes.store(0, Ordering::Relaxed);
    progress.lost_bytes.store(0, Ordering::Relaxed);
    progress.durable_bytes.store(0, Ordering::Relaxed);
    progress
        .total_bytes
        .store(options.limit_bytes.unwrap_or(0), Ordering::Relaxed);
}

impl<'a> Writer<'a> {
    #[allow(clippy::too_many_arguments)]
    fn new(
        set: &'a VolumeSet,
        durability: Durability,
        source: &'a mut dyn Source,
        checkpoint: &Checkpoint,
        recording_id: u32,
        options: &RecordOptions,
        control: &'a Control,
        progress: &'a Progress,
        counters: Option<&'a OnceLock<RecordingCounters>>,
    ) -> Result<Writer<'a>, RecordingError> {
        let clock = set.clock();
        let chunk_size_bytes = set.chunk_size_bytes;
        let k = options.io_chunk_count;
        let io_bytes = chunk_size_bytes as u64 * k as u64;
        let member_count = set.member_count();
        let buffer_count = (options.buffer_bytes / io_bytes).clamp(2, 1 << 16) as u32;
        let pool = BufferPool::new(buffer_count as usize, io_bytes as usize)?;
        let queue_depth = engine_queue_depth(buffer_count, options, member_count);
        let disks: Vec<&Disk> = set.present().map(|member| &member.disk).collect();
        let opened = disk::open_engine(
            &disks,
            options.engine,
            pool,
            EngineConfig {
                queue_depth,
                sqpoll: false,
                caller_may_block: source.may_block(),
            },
        )?;
        let members: Vec<MemberState> = set
            .present()
            .zip(&checkpoint.members)
            .map(|(member, position)| MemberState::starting(member, position, options, k))
            .collect();
        let counters = counters.map(|slot| {
            slot.get_or_init(|| new_counters(set, &members, recording_id, buffer_count, io_bytes))
        });
        reset_progress(progress, options);
        let next_sequence = checkpoint.durable_sequence_end;
        let mut engine = opened.engine;
        source.set_payload_capacity(payload_capacity_bytes(chunk_size_bytes) as usize);
        // Waits end often enough to notice a member whose write never completes.
        engine.bound_waits(
            (options.member_timeout / 4)
                .clamp(Duration::from_millis(1), Duration::from_millis(100)),
        );
        let payload_capacity = payload_capacity_bytes(chunk_size_bytes);
        let flight_limit = flight_count_max(buffer_count);
        let mut ingest = Ingest::new(buffer_count, k, payload_capacity, &*source);
        if let (FlowIndex::Written { bucket_bytes }, true) =
            (options.flow_index, source.packs_records())
        {
            let sizes = (chunk_size_bytes, payload_capacity);
            ingest.index_with(FlowIndexer::new(next_sequence, sizes, bucket_bytes));
        }
        // The two clocks the recording's times are told by, read together: a chunk's time is
        // `start_ns` and the monotonic time since `start_instant`, and a packet's its
        // receive time on the wall clock; anything between the two reads would put every
        // chunk that much before the packets it holds, and a window would begin a chunk late.
        let (start_instant, start_ns) = (clock.now(), clock.wall_ns());
        Ok(Writer {
            options: RecordOptions {
                chunk_size_bytes,
                ..options.clone()
            },
            control,
            progress,
            engine,
            fallback_reason: opened.fallback_reason,
            k,
            engine_queue_depth: queue_depth,
            completions: Vec::with_capacity(buffer_count as usize),
            recording_id,
            first_sequence: next_sequence,
            error: None,
            started: start_instant,
            start_ns,
            start_instant,
            ingest,
            placement: Placement::new(members, next_sequence),
            frontier: Frontier::new(
                flight_limit,
                next_sequence,
                checkpoint.generation,
                clock.now(),
            ),
            retiring: Retiring::default(),
            rewriting: Rewriting::default(),
            counters,
            set,
            durability,
            source,
            clock,
            reclaimer: None,
            reclaimed_at_start: Vec::new(),
            marker: options
                .marks
                .clone()
                .map(|desk| Marker::new(desk, options.max_marked, member_count, recording_id + 1)),
        })
    }

    fn chunk_bytes(&self) -> usize {
        self.set.chunk_size_bytes as usize
    }

    fn entry(
        &self,
        state: RecordingState,
        revision: u64,
    ) -> Result<RecordingEntry, RecordingError> {
        let flags = self.entry_flags();
        let ring = matches!(self.options.fill, Fill::Ring { .. });
        let open = state == RecordingState::Open;
        Ok(RecordingEntry {
            set_uuid: self.set.set_uuid,
            recording_id: self.recording_id,
            revision,
            state,
            flags,
            first_sequence: self.first_sequence,
            end_sequence: if open {
                self.first_sequence
            } else {
                self.claimed().sequence_end
            },
            start_ns: self.start_ns,
            end_ns: if open { 0 } else { self.clock.wall_ns() },
            stream_len_bytes: if open { 0 } else { self.claimed().stream_bytes },
            lost_bytes: if open { 0 } else { self.claimed().lost_bytes },
            name: Label::new(&self.options.label)
                .map_err(|e| RecordingError::Usage(format!("label: {e}")))?,
            members: self
                .placement
                .spans(match (open, ring, self.frontier.claimed()) {
                    (true, _, _) => SpanEnd::Start,
                    (false, false, Some(_)) => SpanEnd::Frontier,
                    (false, _, _) => SpanEnd::WritePoint,
                }),
            retirements: self.retiring.retirements().to_vec(),
            signal: self.options.signal.clone(),
            reclaimed: None,
            mark_of: None,
            start_laps: match ring {
                true => self.placement.start_laps(),
                false => Vec::new(),
            },
            overwrote: match ring {
                true => self.placement.overwrote(open),
                false => Vec::new(),
            },
        })
    }

    /// The recording's flags: its placement and what its stream is (a mark of it has them
    /// too).
    fn entry_flags(&self) -> RecordingFlags {
        let mut flags = RecordingFlags::empty();
        if matches!(self.options.fill, Fill::Ring { .. }) {
            flags.insert(RecordingFlags::RING | RecordingFlags::LAPS);
        }
        if self.options.pattern {
            flags.insert(RecordingFlags::PATTERN);
        }
        if self.ingest.records() {
            flags.insert(RecordingFlags::RECORDS);
        }
        if self.ingest.indexed() {
            flags.insert(RecordingFlags::FLOW_INDEX);
        }
        if self.options.signal.is_some() {
            flags.insert(RecordingFlags::SIGNAL);
        }
        flags
    }

    /// Opens the entry and writes the recording's first checkpoint, on every member that
    /// takes them: one that fails is retired before the first chunk (or, with none to
    /// take its place, the recording does not begin).
    fn begin(&mut self) -> Result<(), RecordingError> {
        let entry = self.entry(RecordingState::Open, 1)?;
        let bytes = entry.encode()?;
        let (taken, failure) = self.on_live_members(|member| {
            member.write_entry(&bytes, &entry)?;
            member.flush()
        });
        if failure.is_some() && (taken == 0 || self.error.is_some()) {
            return Err(self.failure_or("beginning the recording"));
        }
        self.write_checkpoint(self.recording_id)?;
        if let Some(failure) = &self.error {
            // A member failed where none could take its place: nothing was recorded yet.
            return Err(failure.clone().into());
        }
        self.started = self.clock.now();
        Ok(())
    }

    /// Fails the recording with `failure`, unless it failed already (the first one stands).
    fn fail(&mut self, failure: RecordingFailure) {
        self.error.get_or_insert(failure);
    }

    fn state(&self) -> ControlState {
        if let Some(duration) = self.options.duration {
            if self.clock.since(self.started) >= duration {
                self.control.request_stop();
            }
        }
        self.control.state()
    }

    fn run(&mut self) {
        loop {
            // Fill and queue buffers until nothing more can move (or a batch is queued); the
            // queued writes go to the kernel with the next reap, in one system call.
            let mut progressed = false;
            let mut stuck = false;
            // A source that may block gets its queued writes handed over before each read.
            let batch = if self.ingest.source_may_block() {
                1
            } else {
                SUBMIT_BATCH_IO_COUNT
            };
            for _ in 0..batch {
                let produced = !self.hold_input() && self.produce();
                let submitted = self.submit();
                progressed |= produced || submitted;
                if !produced && !submitted {
                    stuck = true;
                    break;
                }
            }
            self.check_timeouts();
            self.serve_marks();
            self.poll_durability();
            self.gate_expired();
            if let Some(counters) = self.counters {
                let free = self.ingest.free_count();
                let buffers = free.abs_diff(counters.buffer_count as usize) as u32;
                counters.set_in_use(buffers, self.engine.in_flight());
            }
            if !self.durability.busy() && self.due_for_checkpoint() {
                if let Err(error) = self.offer_checkpoint() {
                    self.fail(RecordingFailure::step(Step::Checkpoint, error));
                }
            }
            if self.error.is_some() {
                break; // The end drains what is in flight.
            }
            let input_over = !self.wants_input();
            if input_over {
                self.ingest.seal_filling();
            }
            if input_over && !self.ingest.ready_waits() && !self.retiring.redirecting() {
                break;
            }
            if input_over && self.state() == ControlState::Abort {
                break;
            }
            if self.placement.full && self.engine.in_flight() == 0 {
                break;
            }
            if self.engine.in_flight() == 0 {
                if !progressed {
                    self.sleep_until_due();
                }
                continue;
            }
            // Wait for a completion only when nothing else can move; queued writes are
            // submitted by the same call.
            if let Err(error) = self.reap(stuck) {
                self.fail(RecordingFailure::step(Step::Io, error));
                break;
            }
        }
    }

    /// Whether to leave the source unread this turn: a byte stream that may block (a pipe)
    /// while a sealed buffer waits for the drives (a write to complete, or, in a ring, a
    /// checkpoint before the lap goes on). Its read can block for a sync interval (the
    /// quiet rule), and the sealed buffer would wait as long though the drives can take it
    /// sooner; so the loop waits for them first. The pipe's writer waits meanwhile, which
    /// loses nothing. A record source (a socket, a capture ring) is read on: its input
    /// does not wait.
    fn hold_input(&self) -> bool {
        self.ingest.source_may_block() && !self.ingest.records() && self.ingest.ready_waits()
    }

    pub(super) fn reap(&mut self, wait: bool) -> Result<(), RecordingError> {
        let mut completions = std::mem::take(&mut self.completions);
        let result = self
            .engine
            .submit_and_reap(u32::from(wait), &mut completions);
        for completion in completions.drain(..) {
            if self.stale_completed(completion.user_data) {
                continue;
            }
            if rewrite::is_rewrite(completion.user_data) {
                self.rewrite_completed(completion);
                continue;
            }
            let (number, _) = untag(completion.user_data);
            let flight = self
                .frontier
                .flights_mut()
                .get_mut(number)
                .expect("a completion of a write in flight");
            if let Err(error) = completion.result {
                flight.failed = true;
                flight.error.get_or_insert(error);
            }
            flight.parts_left -= 1;
            if flight.parts_left > 0 {
                continue;
            }
            let flight = *flight;
            let io_bytes = flight.chunk_count as u64 * self.set.chunk_size_bytes as u64;
            if let Some(counters) = self.counters {
                let written_bytes = if flight.failed { 0 } else { io_bytes };
                counters.members[flight.member as usize]
                    .completed(written_bytes, self.clock.since(flight.submitted));
            }
            let member = &mut self.placement.members[flight.member as usize];
            member.queue.completed(number, io_bytes, self.clock.now());
            if flight.failed {
                // The buffer stays: the write may go to another member.
                self.retiring.failing(flight.member as usize);
                continue;
            }
            self.frontier.flights_mut().complete(number);
            let done = self.done_of(&flight);
            self.placement.members[flight.member as usize]
                .flushes
                .completed(done);
            // The buffer is free as soon as its write completes; the flight stays until the
            // frontier passes it, for the durability accounting only. (Freeing at the
            // frontier would let one slow member hold every buffer of the fast ones.)
            self.ingest.free_buffer(flight.buffer);
        }
        self.completions = completions;
        self.handle_failures();
        result?;
        if self.frontier.advance(&mut self.placement.members) {
            self.progress
                .done_bytes
                .store(self.frontier.durable_stream().0, Ordering::Relaxed);
        }
        Ok(())
    }

    /// Ends the recording: submits what is left (unless aborting), writes the end marker,
    /// drains, flushes, and closes the entry.
    fn end(&mut self) -> Result<(), RecordingError> {
        if let Some(outcome) = self.durability.finish() {
            self.checkpoint_made(outcome);
        }
        if self.rewriting.gated() {
            // The retired member's flush, here: what it left in doubt joins its run first.
            self.flush_retired();
            self.rewriting.lift_gate();
        }
        if self.state() == ControlState::Abort || self.error.is_some() || self.placement.full {
            // Nothing more is written: the stream ends after the last chunk submitted.
            self.ingest.seal_filling();
            self.ingest.drop_ready();
        } else {
            self.write_index_tail();
            self.ingest.seal_filling();
            self.account_unproduced();
        }
        // Submit the rest, waiting for room as needed.
        let mut checkpoints_in_a_row = 0;
        while (self.ingest.ready_waits() || self.retiring.redirecting())
            && self.error.is_none()
            && !self.placement.full
        {
            if self.submit() {
                checkpoints_in_a_row = 0;
            } else if self.engine.in_flight() > 0 {
                self.reap(true)?;
            } else if checkpoints_in_a_row < 2 {
                // Nothing in flight, yet no member takes the write: one has gone as far
                // past the last durable checkpoint as recovery searches. Make one here.
                if let Err(error) = self.write_checkpoint(self.recording_id) {
                    self.fail(RecordingFailure::step(Step::Checkpoint, error));
                }
                checkpoints_in_a_row += 1;
            } else {
                self.fail(RecordingFailure::NoMemberTakesTheRest);
            }
        }
        // A retired member's writes still waiting go out first, to their consecutive slots
        // of one member: the end marker must not land among them (the retirement names
        // where they are by their first slot and their count).
        while self.resending() || self.retiring.failures_waiting() {
            if self.handle_failures() | self.submit_redirects() | self.submit_rewrites() {
                continue;
            }
            if self.engine.in_flight() == 0 {
                break;
            }
            if let Err(error) = self.reap(true) {
                self.fail(RecordingFailure::step(Step::Io, error));
                break;
            }
        }
        // An open mark closes with the last chunks placed: the recording ends its window.
        if let Err(error) = self.end_marks() {
            self.fail(RecordingFailure::step(Step::ClosingMark, error));
        }
        // The end-of-recording marker: an empty chunk, in the slot kept for it.
        self.write_end_marker();
        self.drain();
        self.flush_for_close();
        if !self.close_entry()? {
            // No member took the closed entry: the open one stays, with the checkpoint that
            // names the recording, and recovery finds its end on the drives as after a
            // crash (never a closed entry that claims less than they hold).
            self.fail(RecordingFailure::EntryUnwritten);
            return Ok(());
        }
        self.frontier.durable_to(self.placement.next_sequence);
        self.write_idle_checkpoint();
        Ok(())
    }

    /// Writes the closed entry to every live member. A member that fails is retired (or
    /// the recording fails) and the entry, which now says so, goes again to the others as
    /// the next revision. Returns whether any member holds a closed entry.
    fn close_entry(&mut self) -> Result<bool, RecordingError> {
        let mut closed = false;
        for revision in 2..3 + self.placement.members.len() as u64 {
            let state = if self.error.is_some() || self.state() == ControlState::Abort {
                RecordingState::Aborted
            } else {
                RecordingState::Closed
            };
            if self.error.is_some() && self.frontier.claimed().is_none() {
                self.claim_only_the_frontier();
            }
            let entry = self.entry(state, revision)?;
            let bytes = entry.encode()?;
            let (retired, failed) = (self.retiring.retirements().len(), self.error.is_some());
            let (taken, _) = self.on_live_members(|member| {
                member.write_entry(&bytes, &entry)?;
                member.flush()
            });
            if taken > 0 {
                closed = true;
                self.progress
                    .durable_bytes
                    .store(entry.stream_len_bytes, Ordering::Relaxed);
            }
            let changed =
                self.retiring.retirements().len() != retired || self.error.is_some() != failed;
            if taken == 0 || !changed {
                break;
            }
        }
        Ok(closed)
    }

    /// The set's checkpoint after the entry is closed (no recording open), on every live
    /// member that takes it. One that fails is noted, not retired: the recording is closed
    /// already, and a set whose newest checkpoint still names a closed recording gets its
    /// idle checkpoint from the next recording's recovery.
    fn write_idle_checkpoint(&mut self) {
        let checkpoint = self.build_checkpoint(0);
        let bytes = match checkpoint.encode() {
            Ok(bytes) => bytes,
            Err(error) => {
                self.fail(RecordingFailure::step(Step::Checkpoint, error));
                return;
            }
        };
        let generation = checkpoint.generation;
        let (taken, failed) =
            coordinator::on_every_member(self.set, &self.placement.live(), |member| {
                member.write_checkpoint(&bytes, generation)?;
                member.flush()
            });
        for (member, error) in failed {
            self.note_member_error(member, MemberError::Failed(Arc::new(error)));
        }
        if taken > 0 {
            self.frontier.written_here(self.placement.members.len());
            self.checkpoint_made(Outcome::made(checkpoint));
        }
    }

    /// What the closed entry claims: everything taken, or after a failure the frontier of
    /// completed writes (the writes past a failed one are not a stream without a hole).
    fn claimed(&self) -> Claimed {
        let (stream_bytes, lost_bytes) = self.ingest.stream_at();
        self.frontier.claimed().unwrap_or(Claimed {
            sequence_end: self.placement.next_sequence,
            stream_bytes,
            lost_bytes,
        })
    }

    /// After a failure: the recording ends at the frontier of completed writes, every chunk
    /// up to the first write that did not complete, wherever it went, as recovery after a
    /// crash finds them; what was taken past it counts as unrecorded.
    fn claim_only_the_frontier(&mut self) {
        let claimed = self.frontier.claim_at_failure(&mut self.placement.members);
        (self.ingest).claimed_to(claimed.stream_bytes, claimed.lost_bytes);
        self.frontier.claim(claimed);
    }

    /// Waits for every write in flight, sending again the writes of a member that fails
    /// meanwhile.
    fn drain(&mut self) {
        loop {
            let progressed = self.submit_redirects() | self.submit_rewrites();
            if self.engine.in_flight() == 0 {
                if !self.resending() || !progressed {
                    break;
                }
                continue;
            }
            if let Err(error) = self.reap(true) {
                self.fail(RecordingFailure::step(Step::Io, error));
                break;
            }
        }
        if self.retiring.redirecting() {
            self.fail(RecordingFailure::RedirectsUnplaced);
        }
    }

    /// Makes everything completed durable before the entry claims it. A live member whose
    /// flush fails is retired here (the entry names it), and what it completed since its
    /// last good flush is written again elsewhere first, then flushed in turn; a retired
    /// member whose flush fails is noted.
    fn flush_for_close(&mut self) {
        for _ in 0..=self.placement.members.len() {
            self.flush_live();
            self.flush_retired();
            if !self.rewriting.queued() {
                break;
            }
            self.drain();
            if self.rewriting.queued() && self.engine.in_flight() == 0 {
                // The redirect member went as far past the last durable checkpoint as
                // recovery searches: a checkpoint here makes room.
                if self.write_checkpoint(self.recording_id).is_ok() {
                    self.drain();
                }
            }
        }
        self.rewrites_given_up();
    }

    fn write_end_marker(&mut self) {
        let buffer = match self.ingest.take_free() {
            Some(buffer) => buffer,
            None => {
                while self.ingest.free_count() == 0 && self.engine.in_flight() > 0 {
                    if self.reap(true).is_err() {
                        return;
                    }
                }
                match self.ingest.take_free() {
                    Some(buffer) => buffer,
                    None => return,
                }
            }
        };
        let elapsed_ns = self.clock.since(self.start_instant).as_nanos() as u64;
        (self.ingest).end_marker(buffer, (self.clock.wall_ns(), elapsed_ns));
        // Any member with a free slot takes it (the writers kept one slot each for this;
        // a member whose limit stands at its write point, before data the set keeps, has
        // none: where no member has one, the closed entry alone ends the recording).
        let member_index = (0..self.placement.members.len()).find(|&index| {
            let member = &self.placement.members[index];
            !member.retired
                && match self.options.fill {
                    Fill::Linear => member.point.slot() <= member.point.linear_end_slot(),
                    Fill::Ring { .. } => member
                        .point
                        .limit()
                        .is_none_or(|limit| member.ring_next().0 <= limit),
                }
        });
        match member_index {
            Some(index) => {
                if let Err(error) = self.submit_end(buffer, index) {
                    self.fail(RecordingFailure::step(Step::Submit(index as u16), error));
                }
            }
            None => self.ingest.free_buffer(buffer),
        }
    }

    fn submit_end(&mut self, buffer: u32, member_index: usize) -> Result<(), RecordingError> {
        let ring = matches!(self.options.fill, Fill::Ring { .. });
        loop {
            let member = &self.placement.members[member_index];
            let member_ready = member.queue.has_room() && (!ring || member.ring_clear(1));
            if member_ready && self.engine.in_flight() + self.max_parts() <= self.engine_queue_depth
            {
                break;
            }
            self.reap(true)?;
        }
        self.submit_buffer(buffer, member_index, 1)
    }

    fn report(&self, cpu_before: (f64, f64)) -> RecordReport {
        let elapsed = self.clock.since(self.started);
        let tally = self.ingest.tally();
        let cpu_after = process_cpu_s();
        let outcome = if self.error.is_some() {
            RecordOutcome::Failed
        } else if self.placement.full {
            RecordOutcome::TargetFull
        } else {
            match self.control.state() {
                ControlState::Abort => RecordOutcome::Aborted,
                ControlState::Stop if self.options.duration.is_some_and(|d| elapsed >= d) => {
                    RecordOutcome::Complete
                }
                ControlState::Stop => RecordOutcome::Stopped,
                ControlState::Run if self.ingest.source_done() => RecordOutcome::SourceEnded,
                ControlState::Run => RecordOutcome::Complete,
            }
        };
        let chunk_bytes = self.chunk_bytes() as u64;
        let written_bytes: u64 = self
            .placement
            .members
            .iter()
            .map(|m| m.queue.counts().0 * chunk_bytes)
            .sum();
        RecordReport {
            set_uuid: self.set.set_uuid.to_string(),
            recording_id: self.recording_id,
            name: self.options.label.clone(),
            outcome,
            stripe: self.options.stripe,
            fill: self.options.fill,
            engine: self.engine.kind(),
            engine_features: self.engine.features(),
            engine_fallback_reason: self.fallback_reason.clone(),
            chunk_size_bytes: self.set.chunk_size_bytes,
            payload_capacity_bytes: self.ingest.payload_capacity_bytes(),
            io_size_bytes: chunk_bytes * self.k as u64,
            queue_depth: self.options.queue_depth,
            buffer_bytes: self.engine.pool().total_bytes() as u64,
            first_sequence: self.first_sequence,
            end_sequence: self.claimed().sequence_end,
            chunk_count: self.claimed().sequence_end - self.first_sequence,
            stream_bytes: tally.recorded_bytes,
            lost_bytes: self.claimed().lost_bytes,
            lost_past_end_bytes: tally.lost_past_end_bytes,
            lost_by_cause: LostByCause::of(tally.lost_by_cause_bytes),
            gap_count: tally.gap_count,
            written_bytes,
            unrecorded_bytes: tally.unrecorded_bytes,
            overdue_bytes: tally.overdue_bytes,
            checkpoint_count: self.frontier.checkpoint_count(),
            flow_index: self.ingest.indexed().then(|| {
                let (blocks, bytes) = self.ingest.index_made();
                FlowIndexReport {
                    blocks,
                    bytes,
                    given_up: !self.ingest.indexes(),
                }
            }),
            elapsed_s: elapsed.as_secs_f64(),
            rate_mib_per_s: crate::unit::rate_mib_per_s(tally.recorded_bytes, elapsed),
            cpu_user_s: cpu_after.0 - cpu_before.0,
            cpu_system_s: cpu_after.1 - cpu_before.1,
            members: self.placement.member_reports(
                |index| {
                    self.set.members[index]
                        .as_ref()
                        .map(|m| m.disk.path().to_path_buf())
                        .unwrap_or_default()
                },
                chunk_bytes,
                elapsed,
            ),
            retirements: self
                .retiring
                .retirements()
                .iter()
                .map(|retirement| RetirementReport::new(self.set, retirement))
                .collect(),
            degraded: !self.retiring.retirements().is_empty(),
            member_errors: self.retiring.member_errors().to_vec(),
            reclaimed: self
                .reclaimed_at_start
                .iter()
                .chain(self.reclaimer.iter().flat_map(|r| r.reclaimed()))
                .cloned()
                .collect(),
            reclaim_refused: self.reclaimer.as_ref().and_then(|r| r.refused().cloned()),
            marks: self.mark_answers(),
            error: self.error.clone(),
        }
    }
}

/// Whether two runs of ring positions, (first, count) each with count at most `lap_slots`,
/// share a physical slot of a ring of `lap_slots` slots.
fn ring_ranges_overlap(a: (u64, u64), b: (u64, u64), lap_slots: u64) -> bool {
    let (a_first, a_count) = (a.0 % lap_slots, a.1);
    let (b_first, b_count) = (b.0 % lap_slots, b.1);
    let b_after_a = (b_first + lap_slots - a_first) % lap_slots;
    let a_after_b = (a_first + lap_slots - b_first) % lap_slots;
    (a_count > 0 && b_count > 0) && (b_after_a < a_count || a_after_b < b_count)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::recording::writer::point::WritePoint;
    use crate::recording::writer::queue::MemberQueue;

    const MIB: u64 = 1 << 20;
    const GIB: u64 = 1 << 30;

    #[test]
    fn ring_runs_overlap_only_where_they_share_a_slot() {
        // A ring of 10 slots.
        assert!(!ring_ranges_overlap((0, 4), (4, 4), 10));
        assert!(ring_ranges_overlap((0, 4), (3, 4), 10));
        // Across the end of a lap: 8, 9, 0, 1 against 2..5, then against 1.
        assert!(!ring_ranges_overlap((8, 4), (12, 4), 10));
        assert!(ring_ranges_overlap((8, 4), (11, 1), 10));
        // One lap later, the same slots.
        assert!(ring_ranges_overlap((3, 2), (13, 1), 10));
        assert!(ring_ranges_overlap((13, 1), (3, 2), 10));
        assert!(!ring_ranges_overlap((3, 2), (15, 8), 10));
        assert!(!ring_ranges_overlap((3, 0), (3, 2), 10));
    }

    #[test]
    fn a_ring_write_waits_for_the_oldest_write_in_flight_not_the_count() {
        let mut member = MemberState {
            point: WritePoint::with_lap(16),
            queue: MemberQueue::new(8),
            ..MemberState::default()
        };
        // Lap 0: writes of 4 slots at 0, 4, 8, 12 went out; all but the first completed.
        let now = Instant::now();
        for (number, position) in [(0, 0), (1, 4), (2, 8), (3, 12)] {
            member.queue.submitted(number, (position, 4), now);
        }
        for number in 1..4 {
            member.queue.completed(number, 4096, now);
        }
        member.point.set(0, 1);
        // Lap 1 may write slots 0..3 only once slot 0..3 of lap 0 have landed.
        assert!(!member.ring_clear(4));
        assert!(!member.ring_clear(1));
        member.queue.completed(0, 4096, now);
        assert!(member.ring_clear(4));
        // A position at the end of a lap is slot 0 of the next.
        member.point.set(16, 0);
        assert_eq!(member.ring_next(), (16, 1, 0));
    }

    #[test]
    fn input_that_can_wait_gets_two_queue_depths_per_member() {
        let pool = default_buffer_bytes(InputKind::OnDemand, 1, 32, MIB, 24 * GIB);
        assert_eq!(pool, 64 * MIB);
        let pool = default_buffer_bytes(InputKind::OnDemand, 8, 32, MIB, 24 * GIB);
        assert_eq!(
            pool, BUFFER_BYTES_DEFAULT,
            "never more than the fed default"
        );
        let pool = default_buffer_bytes(InputKind::Fed, 1, 32, MIB, 24 * GIB);
        assert_eq!(pool, BUFFER_BYTES_DEFAULT);
    }

    #[test]
    fn a_small_board_gets_at_most_a_quarter_of_its_memory_whatever_the_input() {
        let inputs = [
            InputKind::OnDemand,
            InputKind::Fed,
            InputKind::Paced {
                rate_bytes_per_s: 100e6,
            },
            InputKind::Paced {
                rate_bytes_per_s: 4e9,
            },
        ];
        for input in inputs {
            let pool = default_buffer_bytes(input, 8, 32, MIB, 512 * MIB);
            assert_eq!(pool, 128 * MIB, "{input:?} on a 512 MiB board");
            let pool = default_buffer_bytes(input, 8, 32, MIB, 2 * GIB);
            assert!(pool <= 512 * MIB, "{input:?} on a 2 GiB board: {pool}");
            let pool = default_buffer_bytes(input, 8, 32, MIB, 0);
            assert!(
                pool >= BUFFER_BYTES_DEFAULT,
                "{input:?}: unknown memory bounds nothing"
            );
        }
    }

    #[test]
    fn a_paced_source_gets_half_a_second_of_itself_within_bounds() {
        let paced = |rate_bytes_per_s: f64, memory_bytes: u64| {
            default_buffer_bytes(
                InputKind::Paced { rate_bytes_per_s },
                1,
                32,
                MIB,
                memory_bytes,
            )
        };
        assert_eq!(paced(4e9, 24 * GIB), 2_000_000_000);
        assert_eq!(
            paced(100e6, 24 * GIB),
            BUFFER_BYTES_DEFAULT,
            "at least the default"
        );
        assert_eq!(paced(100e9, 64 * GIB), PACED_BUFFER_BYTES_MAX);
        assert_eq!(paced(4e9, 2 * GIB), 512 * MIB, "a quarter of the memory");
        assert_eq!(
            paced(4e9, 512 * MIB),
            128 * MIB,
            "a quarter of the memory, even below the default"
        );
    }

    #[test]
    fn memory_is_known_here() {
        assert!(memory_bytes() > 64 * MIB);
    }
}
