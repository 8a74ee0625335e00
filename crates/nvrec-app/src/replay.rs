//! `replay`: a recording's stream out again, from a volume set or an archive.
//!
//! The pipeline: a [`ChunkSource`] gives the recording's items in sequence order, from the
//! first chunk of the window on (found by search); the window's end ends the read; a
//! [`Pacer`] holds each chunk (or datagram) until it is due at the asked speed; what is
//! left goes to one sink: a writer (`StreamSink`: the bytes, holes filled with zeros on
//! request, a capture turned into PcapNg) or the network ([`crate::resend`]).

use crate::chunks::ChunkSource;
use crate::listing::{retirement_json, state_text};
use crate::losses::loss_text;
use crate::outcome::Class;
use crate::stream_out::StreamOut;
use crate::window::TimeArg;
use anyhow::Result;
use nvrec::control::{Control, ControlState, Progress};
use nvrec::engine::EngineChoice;
use nvrec::export::{first_content, PcapngExport};
use nvrec::layout::{
    ChunkFlags, ChunkHeader, Content, LayoutError, Reassembly, Record, RecordingEntry,
};
use nvrec::recording::reader::{Item, ReadSummary};
use nvrec::unit::format_utc_ns;
use std::io::Write;
use std::time::{Duration, Instant};

/// Zeros written at once when a hole is filled.
const ZERO_FILL_BYTES: usize = 1 << 20;

/// What a replay is asked to be.
#[derive(Debug, Clone)]
pub struct ReplayRequest {
    /// Which recording (default: the last).
    pub recording: Option<u32>,
    /// A mark's window instead (format 1.7).
    pub mark: Option<u32>,
    pub from: Option<TimeArg>,
    pub to: Option<TimeArg>,
    /// The multiple of the recorded speed to pace at; none: as fast as it goes.
    pub speed: Option<f64>,
    /// A recording of network streams: only these (all when empty).
    pub streams: Vec<u16>,
    pub gaps: Gaps,
    pub engine: EngineChoice,
    /// How many times to play the selection (`--loop`).
    pub passes: Passes,
}

/// How many times a replay plays its selection.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Passes {
    Times(u64),
    /// Until stopped.
    Forever,
}

impl Passes {
    /// Whether another pass follows `done` passes.
    pub fn again(self, done: u64) -> bool {
        match self {
            Passes::Times(times) => done < times,
            Passes::Forever => true,
        }
    }
}

/// What replay writes where the stream has a hole (input lost while recording, chunks
/// missing or damaged).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Gaps {
    /// Nothing: the stream as it was kept, the holes reported.
    Skip,
    /// Zeros of the hole's length, so that every byte sits at its original stream offset.
    Zero,
}

/// How a replay ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ReplayOutcome {
    /// Every chunk of the recording (or of the window) was read.
    Complete,
    /// Stopped on request: what was written is the stream up to there.
    Stopped,
    Aborted,
    /// Writing the stream failed.
    Failed,
}

impl ReplayOutcome {
    pub fn text(self) -> &'static str {
        match self {
            ReplayOutcome::Complete => "replay complete",
            ReplayOutcome::Stopped => "replay stopped",
            ReplayOutcome::Aborted => "replay ABORTED",
            ReplayOutcome::Failed => "replay FAILED",
        }
    }

    fn of(control: &Control, failed: bool) -> ReplayOutcome {
        if failed {
            return ReplayOutcome::Failed;
        }
        match control.state() {
            ControlState::Run => ReplayOutcome::Complete,
            ControlState::Stop => ReplayOutcome::Stopped,
            ControlState::Abort => ReplayOutcome::Aborted,
        }
    }
}

/// The recording a replay reads and the window it reads of it, in nanoseconds since the
/// epoch.
pub struct Selection {
    pub entry: RecordingEntry,
    pub from_ns: Option<u64>,
    pub to_ns: Option<u64>,
}

impl Selection {
    /// What a replay reads: the recording asked for (default: the last) with its window;
    /// or, where no recording is named and the window is given in UTC, every recording of
    /// the set that holds time in it, in time order (a window may span recordings).
    pub fn all(source: &ChunkSource, request: &ReplayRequest) -> Result<Vec<Selection>> {
        let absolute = |end: Option<TimeArg>| matches!(end, Some(TimeArg::At { .. }));
        let named = request.recording.is_some() || request.mark.is_some();
        if named || !(absolute(request.from) || absolute(request.to)) {
            return Ok(vec![Selection::of(source, request)?]);
        }
        let kept: Vec<RecordingEntry> = source
            .recordings()?
            .into_iter()
            .filter(|entry| entry.reclaimed.is_none())
            .collect();
        let mut entries: Vec<RecordingEntry> = kept
            .iter()
            .filter(|entry| overlaps(entry, request))
            .cloned()
            .collect();
        match entries.len() {
            0 => {
                // None holds time in the window: refused, naming what each spans.
                crate::window::entries_met(kept, request.from, request.to)?;
                return Ok(vec![Selection::of(source, request)?]);
            }
            1 => return Ok(vec![Selection::window_of(entries.remove(0), request)?]),
            _ => {}
        }
        entries.sort_by_key(|entry| entry.start_ns);
        entries
            .into_iter()
            .map(|entry| Selection::window_of(entry, request))
            .collect()
    }

    /// Selects the recording and resolves the window against its start.
    pub fn of(source: &ChunkSource, request: &ReplayRequest) -> Result<Selection> {
        Selection::window_of(source.pick(request.recording, request.mark)?, request)
    }

    /// `entry` with the request's window resolved against its start; a window that holds
    /// none of its time is refused ([`crate::window::window_of`]).
    fn window_of(entry: RecordingEntry, request: &ReplayRequest) -> Result<Selection> {
        let (from_ns, to_ns) = crate::window::window_of(&entry, request.from, request.to)?;
        Ok(Selection {
            entry,
            from_ns,
            to_ns,
        })
    }
}

/// Whether `entry` holds time inside the request's window given in UTC (an end given as an
/// offset is taken as open: it means something only against one recording).
fn overlaps(entry: &RecordingEntry, request: &ReplayRequest) -> bool {
    let at = |end: Option<TimeArg>| match end {
        Some(TimeArg::At { unix_ns }) => Some(unix_ns),
        _ => None,
    };
    // A recording still open (or cut off) has no end yet: it reaches to now.
    let end_ns = if entry.end_ns == 0 {
        u64::MAX
    } else {
        entry.end_ns
    };
    at(request.from).is_none_or(|from| end_ns >= from)
        && at(request.to).is_none_or(|to| entry.start_ns < to)
}

/// How a replay to a writer went.
#[derive(Debug)]
pub struct ReplayReport {
    pub entry: RecordingEntry,
    /// Times the selection was played (`--loop`).
    pub passes: u64,
    pub outcome: ReplayOutcome,
    pub written_bytes: u64,
    pub zero_filled_bytes: u64,
    pub summary: ReadSummary,
    pub problems: Vec<String>,
    /// Writing failed: the stream is cut here.
    pub error: Option<std::io::Error>,
}

impl ReplayReport {
    /// Aborted, or a recording read with missing or damaged chunks, says so; a failed write
    /// is the error the front end returns.
    pub fn class(&self) -> Class {
        let damaged = self.summary.damage_count > 0 || self.summary.missing_chunk_count > 0;
        match self.outcome {
            ReplayOutcome::Aborted => Class::Aborted,
            _ if damaged => Class::Failed,
            ReplayOutcome::Stopped => Class::Stopped,
            _ => Class::Done,
        }
    }

    pub fn json(&self) -> serde_json::Value {
        serde_json::json!({
            "recording_id": self.entry.recording_id,
            "recording_state": state_text(&self.entry),
            "passes": self.passes,
            "outcome": self.outcome,
            "written_bytes": self.written_bytes,
            "zero_filled_bytes": self.zero_filled_bytes,
            "summary": self.summary,
            "problems": self.problems,
            "error": self.error.as_ref().map(|e| e.to_string()),
            "degraded": !self.entry.retirements.is_empty(),
            "retirements": self.entry.retirements.iter().map(retirement_json).collect::<Vec<_>>(),
        })
    }
}

/// Replays `selection` of `source` into `out`, and gives the writer back for what follows.
fn replay_one(
    source: &ChunkSource,
    selection: Selection,
    request: &ReplayRequest,
    out: Box<dyn StreamOut>,
    control: &Control,
    progress: &Progress,
) -> Result<(ReplayReport, Box<dyn StreamOut>)> {
    let Selection {
        entry,
        from_ns,
        to_ns,
    } = selection;
    let mut sink = StreamSink::new(out, &entry, request, control, (from_ns, to_ns));
    let (summary, passes) = read_passes(
        source,
        &entry,
        request,
        (from_ns, to_ns),
        control,
        progress,
        &mut sink,
    )?;
    let end = sink.finish();
    let mut problems = end.problems;
    // An archived ring's ranges overwritten before they were archived: not in the stream
    // written (zeros with --gaps zero), and said so as a gap is.
    let not_archived = source.overwritten(&entry, &summary);
    problems.extend(
        not_archived
            .iter()
            .map(|loss| format!("lost: {}", loss.line())),
    );
    let report = ReplayReport {
        passes,
        entry,
        outcome: ReplayOutcome::of(control, end.error.is_some()),
        written_bytes: end.written,
        zero_filled_bytes: end.filled,
        summary,
        problems,
        error: end.error,
    };
    Ok((report, end.out))
}

/// Replays each of `selections` in turn into `out`, one stream after the other, until one
/// fails or the run is asked to end. Returns a report per recording replayed.
pub fn replay_all(
    source: &ChunkSource,
    selections: Vec<Selection>,
    request: &ReplayRequest,
    mut out: Box<dyn StreamOut>,
    control: &Control,
    progress: &Progress,
) -> Result<Vec<ReplayReport>> {
    let mut reports = Vec::new();
    for selection in selections {
        let (report, writer) = replay_one(source, selection, request, out, control, progress)?;
        out = writer;
        let go_on = report.error.is_none() && control.state() == ControlState::Run;
        reports.push(report);
        if !go_on {
            break;
        }
    }
    Ok(reports)
}

/// A hole in the stream, as replay reports it: a damaged chunk with its member's path.
fn hole_problem(item: &Item<'_>) -> Option<String> {
    match item {
        Item::Damage(damage) => Some(format!(
            "damaged chunk on member {} ({}) slot {} (offset {:#x}): {}",
            damage.member_index,
            damage.member_path,
            damage.slot_index,
            damage.offset_bytes,
            damage.what
        )),
        other => other.hole_text(),
    }
}

/// The end of a replay that reads the recording pass after pass (`--loop`).
pub(crate) trait PassSink {
    /// A pass begins: pacing and hole filling start again from the recording's start.
    fn begin_pass(&mut self);
    /// One item of the read; false ends the pass (the window's end, an error, a stop).
    fn item(&mut self, item: Item<'_>) -> bool;
    /// The pass is over; false: no other may follow (the sink failed).
    fn end_pass(&mut self) -> bool;
}

/// Reads `entry`'s `window` (from, to) into `sink`, as many passes as `request` asks, fewer
/// when the sink fails or the run is asked to end. Returns the last pass's summary and how
/// many passes were read.
pub(crate) fn read_passes(
    source: &ChunkSource,
    entry: &RecordingEntry,
    request: &ReplayRequest,
    window: (Option<u64>, Option<u64>),
    control: &Control,
    progress: &Progress,
    sink: &mut dyn PassSink,
) -> Result<(ReadSummary, u64)> {
    let mut passes = 0;
    loop {
        sink.begin_pass();
        let summary = source.read_window(
            entry,
            request.engine,
            window,
            control,
            progress,
            &mut |item| sink.item(item),
        )?;
        passes += 1;
        let healthy = sink.end_pass();
        if !healthy || control.state() != ControlState::Run || !request.passes.again(passes) {
            return Ok((summary, passes));
        }
    }
}

/// Holds each item until it is due at a multiple of the recorded speed, counted from the
/// first one's timestamp; it wakes early when the run is asked to end.
pub struct Pacer {
    speed: Option<f64>,
    /// The first timestamp and when it went out.
    origin: Option<(u64, Instant)>,
}

impl Pacer {
    pub fn new(speed: Option<f64>) -> Pacer {
        Pacer {
            speed,
            origin: None,
        }
    }

    /// How long until an item of `timestamp_ns` is due (none: due now, or not paced).
    pub fn wait_for(&mut self, timestamp_ns: u64) -> Option<Duration> {
        let speed = self.speed?;
        let (first_ns, started) = *self.origin.get_or_insert((timestamp_ns, Instant::now()));
        let due = Duration::from_nanos(timestamp_ns.saturating_sub(first_ns)).div_f64(speed);
        due.checked_sub(started.elapsed())
    }

    /// Waits until an item of `timestamp_ns` is due; false when the run was asked to end.
    pub fn wait(&mut self, timestamp_ns: u64, control: &Control) -> bool {
        match self.wait_for(timestamp_ns) {
            Some(wait) => sleep_unless_interrupted(wait, control),
            None => true,
        }
    }
}

/// Sleeps for `duration`, waking early when the run is asked to end (a long pause in a paced
/// replay must not hold off a stop). Returns whether it slept the whole time.
pub fn sleep_unless_interrupted(duration: Duration, control: &Control) -> bool {
    const STEP: Duration = Duration::from_millis(20);
    let until = Instant::now() + duration;
    loop {
        if control.state() != ControlState::Run {
            return false;
        }
        let left = until.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return true;
        }
        std::thread::sleep(left.min(STEP));
    }
}

/// The writer end of a replay: a byte stream's payloads (holes zero-filled with
/// [`Gaps::Zero`]), a recording of datagrams' data, or a capture as PcapNg.
struct StreamSink<'a> {
    out: Box<dyn StreamOut>,
    /// A capture's PcapNg writer, once its first frame is met (it takes over `out`).
    capture: Option<PcapngExport<Box<dyn StreamOut>>>,
    /// Packets that span payloads, put back together.
    reassembly: Reassembly,
    gaps: Gaps,
    gap_fill: nvrec::sink::GapFill,
    zeros: Vec<u8>,
    streams: &'a [u16],
    stream_len_bytes: u64,
    /// The recording's start: chunks go by their time on its timeline.
    start_ns: u64,
    control: &'a Control,
    pacer: Pacer,
    speed: Option<f64>,
    /// The window, in nanoseconds since the epoch.
    window: (Option<u64>, Option<u64>),
    written: u64,
    filled: u64,
    problems: Vec<String>,
    error: Option<std::io::Error>,
}

impl<'a> StreamSink<'a> {
    fn new(
        out: Box<dyn StreamOut>,
        entry: &RecordingEntry,
        request: &'a ReplayRequest,
        control: &'a Control,
        window: (Option<u64>, Option<u64>),
    ) -> StreamSink<'a> {
        StreamSink {
            out,
            capture: None,
            reassembly: Reassembly::new(),
            gaps: request.gaps,
            gap_fill: nvrec::sink::GapFill::new(entry.stream_len_bytes),
            zeros: match request.gaps {
                Gaps::Zero => vec![0u8; ZERO_FILL_BYTES],
                Gaps::Skip => Vec::new(),
            },
            streams: &request.streams,
            stream_len_bytes: entry.stream_len_bytes,
            start_ns: entry.start_ns,
            control,
            pacer: Pacer::new(request.speed),
            speed: request.speed,
            window,
            written: 0,
            filled: 0,
            problems: Vec::new(),
            error: None,
        }
    }

    /// Writes one chunk's payload; false to end the replay (a write failed, or it was
    /// interrupted while filling a hole).
    fn chunk(&mut self, header: &ChunkHeader, payload: &[u8]) -> bool {
        let result = if header.flags.contains(ChunkFlags::RECORDS) {
            self.records(header, payload)
        } else {
            self.bytes(header, payload)
        };
        match result {
            Ok(go_on) => go_on,
            Err(error) => {
                self.error = Some(error);
                false
            }
        }
    }

    /// A payload of records: a capture replays as a PcapNg stream; datagrams and TCP bytes
    /// as their data in arrival order, losses reported.
    fn records(&mut self, header: &ChunkHeader, payload: &[u8]) -> std::io::Result<bool> {
        if self.capture.is_none() && first_content(payload) == Some(Content::Ethernet) {
            let none = Box::new(std::io::BufWriter::new(std::io::sink()));
            let writer = std::mem::replace(&mut self.out, none);
            let streams = (!self.streams.is_empty()).then(|| self.streams.to_vec());
            let export = PcapngExport::new(writer, streams).map_err(std::io::Error::other)?;
            self.capture = Some(export);
        }
        // The chunk a window begins with was filling at its start: its records from then on.
        let from_ns = self.window.0;
        let records = self
            .reassembly
            .payload(header.stream_offset_bytes, payload)
            .filter(move |record| match (record, from_ns) {
                (Ok(record), Some(from)) => record.timestamp_ns() >= from,
                _ => true,
            });
        self.written += match &mut self.capture {
            Some(export) => export_records(export, records)?,
            None => write_record_data(&mut self.out, records, self.streams, &mut self.problems)?,
        };
        Ok(true)
    }

    /// A payload of a byte stream, after the zeros of the hole before it with `--gaps zero`.
    fn bytes(&mut self, header: &ChunkHeader, payload: &[u8]) -> std::io::Result<bool> {
        if self.gaps == Gaps::Zero && !self.fill_hole(header, payload.len() as u64)? {
            return Ok(false); // Interrupted.
        }
        self.out.write_all(payload)?;
        self.written += payload.len() as u64;
        if header.flags.contains(ChunkFlags::GAP) {
            self.problems.push(format!(
                "gap: {} bytes lost before stream offset {}",
                header.gap_bytes, header.stream_offset_bytes
            ));
        }
        Ok(true)
    }

    /// Zeros in place of the hole before a payload; false when interrupted.
    fn fill_hole(&mut self, header: &ChunkHeader, payload_len: u64) -> std::io::Result<bool> {
        let hole = self
            .gap_fill
            .before(header.stream_offset_bytes, payload_len);
        if hole.beyond_end_bytes > 0 {
            self.problems.push(format!(
                "chunk sequence {} on member {} slot {} says stream offset {}, \
                 past the recording's {} bytes: {} bytes of its hole not filled",
                header.sequence,
                header.member_index,
                header.slot_index,
                header.stream_offset_bytes,
                self.stream_len_bytes,
                hole.beyond_end_bytes
            ));
        }
        let done_bytes = match hole.zero_bytes > 0 && self.out.skip_zeros(hole.zero_bytes)? {
            true => hole.zero_bytes,
            false => write_zeros(&mut self.out, &self.zeros, hole.zero_bytes, self.control)?,
        };
        self.filled += done_bytes;
        self.written += done_bytes;
        Ok(done_bytes == hole.zero_bytes)
    }

    /// A packet left in part at the end of a pass is a loss, reported and, in a capture,
    /// recorded.
    fn end_packets(&mut self) {
        if let Some(loss) = self.reassembly.finish() {
            self.problems.push(loss_text(&loss));
            if let Some(export) = &mut self.capture {
                if let Err(error) = export.record(&Record::Loss(loss)) {
                    self.error.get_or_insert(std::io::Error::other(error));
                }
            }
        }
    }

    /// Ends the stream: a capture's PcapNg is finished, everything flushed.
    fn finish(mut self) -> SinkEnd {
        if let Some(export) = self.capture.take() {
            match export.finish() {
                Ok((writer, exported)) => {
                    self.out = writer;
                    self.written += exported.bytes;
                }
                Err(error) => {
                    self.error.get_or_insert(std::io::Error::other(error));
                }
            }
        }
        if let Err(error) = self.out.flush() {
            self.error.get_or_insert(error);
        }
        SinkEnd {
            out: self.out,
            written: self.written,
            filled: self.filled,
            problems: self.problems,
            error: self.error,
        }
    }
}

/// What a stream sink leaves when it ends: the writer, the bytes written (the zeros among
/// them), the problems met and the first write error.
struct SinkEnd {
    out: Box<dyn StreamOut>,
    written: u64,
    filled: u64,
    problems: Vec<String>,
    error: Option<std::io::Error>,
}

impl PassSink for StreamSink<'_> {
    fn begin_pass(&mut self) {
        self.pacer = Pacer::new(self.speed);
        self.gap_fill = nvrec::sink::GapFill::new(self.stream_len_bytes);
        self.reassembly = Reassembly::new();
    }

    fn item(&mut self, item: Item<'_>) -> bool {
        let (from_ns, to_ns) = self.window;
        match item {
            Item::Chunk { header, payload } => {
                // A byte stream's chunks go by their first byte's time; records by their own.
                let time_ns = header.time_ns(self.start_ns);
                let records = header.flags.contains(ChunkFlags::RECORDS);
                if !records && from_ns.is_some_and(|from| time_ns < from) {
                    return true;
                }
                if to_ns.is_some_and(|to| time_ns > to) {
                    return false;
                }
                self.pacer.wait(time_ns, self.control) && self.chunk(header, payload)
            }
            hole => {
                self.problems.extend(hole_problem(&hole));
                true
            }
        }
    }

    fn end_pass(&mut self) -> bool {
        self.end_packets();
        self.error.is_none()
    }
}

/// Writes `len_bytes` zeros, at most `zeros.len()` at a time, until the run is asked to
/// end. Returns how many it wrote.
fn write_zeros(
    out: &mut dyn Write,
    zeros: &[u8],
    len_bytes: u64,
    control: &Control,
) -> std::io::Result<u64> {
    let mut done_bytes = 0;
    while done_bytes < len_bytes && control.state() == ControlState::Run {
        let now = (len_bytes - done_bytes).min(zeros.len() as u64) as usize;
        out.write_all(&zeros[..now])?;
        done_bytes += now as u64;
    }
    Ok(done_bytes)
}

/// Writes the data of the datagrams in a payload of records, in order; a loss, or a record
/// that does not decode, is a problem to report. Returns the bytes written.
fn write_record_data<'a>(
    out: &mut dyn Write,
    records: impl Iterator<Item = Result<Record<'a>, LayoutError>>,
    streams: &[u16],
    problems: &mut Vec<String>,
) -> std::io::Result<u64> {
    let mut written = 0;
    let wanted = |stream: u16| streams.is_empty() || streams.contains(&stream);
    for record in records {
        match record {
            Ok(Record::Packet(packet)) if !wanted(packet.stream) => {}
            Ok(Record::Loss(loss)) if !wanted(loss.stream) => {}
            Ok(Record::Packet(packet)) => {
                out.write_all(packet.data)?;
                written += packet.data.len() as u64;
            }
            Ok(Record::Loss(loss)) => problems.push(format!(
                "{} before {}",
                loss_text(&loss),
                format_utc_ns(loss.timestamp_ns)
            )),
            Err(error) => problems.push(format!("a record does not decode: {error}")),
        }
    }
    Ok(written)
}

/// Writes records to a capture's PcapNg stream; 0 bytes counted (the writer counts its own).
fn export_records<'a>(
    export: &mut PcapngExport<Box<dyn StreamOut>>,
    records: impl Iterator<Item = Result<Record<'a>, LayoutError>>,
) -> std::io::Result<u64> {
    for record in records {
        let record = record.map_err(std::io::Error::other)?;
        export.record(&record).map_err(std::io::Error::other)?;
    }
    Ok(0)
}
