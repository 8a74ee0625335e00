//! Marks (format 1.7): event windows a ring recording keeps while it goes on recording.
//!
//! A mark is an entry of the recording table flagged `MARK`: the window of its
//! recording's chunks from `--before` the moment it was taken to `--after` it, and on each
//! member the slots that hold them (its spans, in lap order). The ring's writer jumps over
//! those slots on later laps until the mark is released, so the window survives while the
//! rest of the ring goes round. The entry is written (open) with the checkpoint after the
//! mark is taken, off the writer's way, and the mark answered once it is durable; again
//! (closed) when its after-window ends; recovery closes an open mark at
//! its recording's recovered end. Marks ask the running recorder through a [`MarkDesk`].
//!
//! A reader of the recording leaves the kept slots out of the ring's lap and reads them as
//! runs of their own, merged in by sequence ([`kept_ranges`]); a read of the mark reads
//! only its slots ([`view`]).

use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc, Mutex};
use std::time::Duration;

use super::volume::VolumeSet;
use super::RecordingError;
use crate::layout::{ReclaimCause, RecordingEntry, RecordingFlags, RecordingState};

/// A mark asked of a running recorder.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MarkRequest {
    /// How much of the recording before now the mark keeps.
    pub before: Duration,
    /// How long after now it goes on keeping.
    pub after: Duration,
    pub label: String,
}

/// What the recorder answered.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct MarkAnswer {
    pub mark_id: u32,
    pub recording_id: u32,
    /// Taken now, or released (`nvrec mark --release`).
    pub released: bool,
    /// How much before the moment it was taken the mark keeps: less than asked where
    /// the ring no longer held it.
    pub before_ns: u64,
    pub after_ns: u64,
    pub label: String,
    /// Its after-window was cut short: the room marks may keep ran out (`--max-marked`),
    /// or the recording ended first. `after_ns` says how much it kept.
    pub cut_short: bool,
    /// Asked while mark `mark_id` was still recording its after-window: joined to it,
    /// whose window now goes on to this one's end (`before_ns` and `after_ns` say what the
    /// joined mark keeps around now; its label is the first one's).
    pub joined: bool,
}

/// What is asked of the recorder.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum MarkOrder {
    Take(MarkRequest),
    Release(u32),
}

type Reply = mpsc::Sender<Result<MarkAnswer, MarkRefusal>>;

/// Why a mark was not taken or released: what the recorder (or the desk) answers.
#[derive(Debug, Clone, thiserror::Error)]
pub enum MarkRefusal {
    #[error("marks are kept by ring recordings (record --ring); this one is not")]
    NotARing,
    /// The before-window and the after-window at the member's recent rate would take more
    /// of its ring than marks may keep.
    #[error(
        "the mark needs {} of member {member}'s ring ({:.0}% of its lap) at the rate recorded \
         now; marks may keep {} more (--max-marked {:.0}%)",
        crate::unit::format_bytes(*need_bytes),
        need_share * 100.0,
        crate::unit::format_bytes(*allowed_bytes),
        max_marked * 100.0
    )]
    TooLarge {
        member: u16,
        need_bytes: u64,
        need_share: f64,
        allowed_bytes: u64,
        max_marked: f64,
    },
    /// The table holds a fixed number of entries: the mark's would be the recording's own.
    #[error(
        "mark {mark_id} would take the table slot of recording {recording_id} itself (the \
         table holds {count} entries): no more marks in this recording"
    )]
    TableFull {
        mark_id: u32,
        recording_id: u32,
        count: u32,
    },
    /// The mark's entry would take the table slot of a mark that is kept.
    #[error("mark {mark_id} would take the table slot of {kept}")]
    SlotKept { mark_id: u32, kept: ReleaseHint },
    #[error("label: {0}")]
    Label(crate::layout::LayoutError),
    #[error("mark {0} is being read; release it once the read is done")]
    BeingRead(u32),
    /// Reading, writing or closing a mark's metadata failed (or the release found no such
    /// mark, or one released already).
    #[error("{action} mark {mark_id}: {cause}")]
    Failed {
        action: MarkAction,
        mark_id: u32,
        cause: Arc<RecordingError>,
    },
    #[error("the recorder did not answer within {0:?}")]
    NoAnswer(Duration),
    #[error("the recording ended before it took the mark")]
    RecordingEnded,
    /// Another process's recorder refused, saying this (the mark socket carries text).
    #[error("{0}")]
    Said(String),
    /// A request line (or an answer line) that the other side could not read.
    #[error("a request or answer not understood: {0}")]
    NotUnderstood(String),
}

/// What was being done to a mark when its metadata failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MarkAction {
    Taking,
    Writing,
    Closing,
    Releasing,
}

impl std::fmt::Display for MarkAction {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            MarkAction::Taking => "taking",
            MarkAction::Writing => "writing",
            MarkAction::Closing => "closing",
            MarkAction::Releasing => "releasing",
        })
    }
}

impl MarkRefusal {
    pub(crate) fn failed(
        action: MarkAction,
        mark_id: u32,
        cause: impl Into<RecordingError>,
    ) -> Self {
        MarkRefusal::Failed {
            action,
            mark_id,
            cause: Arc::new(cause.into()),
        }
    }
}

/// Where marks are asked of a running recording: triggers (a command, the service, a
/// signal, a datagram) put orders in; the writer takes them between its writes and
/// answers each.
#[derive(Debug, Default)]
pub struct MarkDesk {
    orders: Mutex<VecDeque<(MarkOrder, Reply)>>,
    pending: AtomicBool,
}

impl MarkDesk {
    /// Puts `order` in; the answer comes on the receiver once the writer took it (or the
    /// receiver says disconnected, when the recording ended first).
    pub fn ask(&self, order: MarkOrder) -> mpsc::Receiver<Result<MarkAnswer, MarkRefusal>> {
        let (reply, answer) = mpsc::channel();
        let mut orders = self.orders.lock().unwrap_or_else(|e| e.into_inner());
        orders.push_back((order, reply));
        self.pending.store(true, Ordering::Release);
        answer
    }

    /// [`MarkDesk::ask`], waiting up to `wait` for the answer.
    pub fn ask_and_wait(
        &self,
        order: MarkOrder,
        wait: Duration,
    ) -> Result<MarkAnswer, MarkRefusal> {
        match self.ask(order).recv_timeout(wait) {
            Ok(answer) => answer,
            Err(mpsc::RecvTimeoutError::Timeout) => Err(MarkRefusal::NoAnswer(wait)),
            Err(mpsc::RecvTimeoutError::Disconnected) => Err(MarkRefusal::RecordingEnded),
        }
    }

    /// The orders waiting, taken out (cheap when there are none).
    pub(crate) fn take_orders(&self) -> Vec<(MarkOrder, Reply)> {
        if !self.pending.swap(false, Ordering::Acquire) {
            return Vec::new();
        }
        let mut orders = self.orders.lock().unwrap_or_else(|e| e.into_inner());
        orders.drain(..).collect()
    }

    /// Answers every order still waiting: the recording ended.
    pub(crate) fn close(&self) {
        for (_, reply) in self.take_orders() {
            let _ = reply.send(Err(MarkRefusal::RecordingEnded));
        }
    }
}

/// Slots a mark keeps on one member: `slot_count` slots from `first_slot` in lap order
/// (wrapping past the lap's end to slot 0).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct KeptRange {
    pub member: usize,
    pub first_slot: u64,
    pub slot_count: u64,
    /// The mark was released: the ring may have written newer chunks into the first of
    /// these slots, before older ones of the mark.
    pub released: bool,
    /// For a reader of the recording read: where in its stream the mark's window begins and
    /// ends, its slots holding that and what was written with it in order, so that they
    /// need no read before the read gets there. None where they may hold any of its chunks
    /// in any order (a released mark, whose slots the ring wrote again, or one widened over
    /// other writes); `u64::MAX` where they hold none (a mark of an earlier recording, kept
    /// apart).
    pub stream_bytes: Option<(u64, u64)>,
}

impl KeptRange {
    /// The kept slots of a member of `slots` slots, in lap order, as runs (first slot,
    /// count): one, or two where they wrap past its last slot to slot 0.
    pub fn runs(&self, slots: u64) -> Vec<(u64, u64)> {
        let first = self.first_slot.min(slots);
        let to_end = (slots - first).min(self.slot_count);
        let mut runs = Vec::with_capacity(2);
        if to_end > 0 {
            runs.push((first, to_end));
        }
        if self.slot_count > to_end {
            runs.push((0, (self.slot_count - to_end).min(slots)));
        }
        runs
    }
}

/// The marks of recording `recording_id` that the table lists, oldest first.
pub fn marks_of(set: &VolumeSet, recording_id: u32) -> Result<Vec<RecordingEntry>, RecordingError> {
    let mut marks = set.marks()?;
    marks.retain(|mark| mark.mark_of.map(|of| of.recording_id) == Some(recording_id));
    Ok(marks)
}

/// The slots `mark` keeps on each member, whose slots number `lap_slots(member)` (a span
/// that wraps goes on at slot 0, as a reader's ring scan does): none for an open mark (its
/// end is not known yet).
pub fn ranges_of(mark: &RecordingEntry, lap_slots: impl Fn(usize) -> u64) -> Vec<KeptRange> {
    if mark.state == RecordingState::Open {
        return Vec::new();
    }
    mark.members
        .iter()
        .enumerate()
        .filter_map(|(member, span)| {
            let lap = lap_slots(member).max(1);
            let (start, end) = (span.start_slot_index, span.end_slot_index);
            let slot_count = match end >= start {
                true => end - start,
                false => lap.saturating_sub(start) + end,
            };
            (slot_count > 0).then_some(KeptRange {
                member,
                first_slot: start,
                slot_count,
                released: mark.reclaimed.is_some(),
                // A mark widened over other writes (written again past its close) may hold
                // chunks from anywhere of the stream.
                stream_bytes: window_bytes(mark).filter(|_| mark.revision <= 2),
            })
        })
        .collect()
}

/// Where `mark`'s window lies in its recording's stream: from its first chunk's offset to
/// its end; None for a released mark (its slots may hold anything of the stream since).
fn window_bytes(mark: &RecordingEntry) -> Option<(u64, u64)> {
    let of = mark.mark_of.filter(|_| mark.reclaimed.is_none())?;
    let from = of.stream_offset_bytes;
    Some((from, from.saturating_add(mark.stream_len_bytes)))
}

/// The marks of `set` that keep their slots now: not released (nor archived and given
/// back), their window known (closed, or closed at a crash). A recording added to the set
/// treats their slots as taken: it never writes over them (see [`kept_runs`]).
pub fn kept(set: &VolumeSet) -> Result<Vec<RecordingEntry>, RecordingError> {
    let mut marks = set.marks()?;
    marks.retain(|mark| mark.reclaimed.is_none() && mark.state != RecordingState::Open);
    Ok(marks)
}

/// The slots `marks` keep on member `member` of `slots` data slots, as runs (first slot,
/// count). A span that wraps is taken to the member's last slot, a few more than the ring
/// kept (its lap may end a little before): never fewer.
pub fn kept_runs(marks: &[RecordingEntry], member: usize, slots: u64) -> Vec<(u64, u64)> {
    marks
        .iter()
        .flat_map(|mark| ranges_of(mark, |_| slots))
        .filter(|range| range.member == member)
        .flat_map(|range| range.runs(slots))
        .collect()
}

/// The kept mark whose table slot an entry of `id` would take (the table holds
/// `recording_slot_count` entries, recording `id` in the slot of `id - count`): the
/// mark's entry would be gone, and with it the only record that its slots are kept.
pub fn table_slot_kept(set: &VolumeSet, id: u32) -> Result<Option<RecordingEntry>, RecordingError> {
    let Some(evicted) = id.checked_sub(set.recording_slot_count()) else {
        return Ok(None);
    };
    Ok(kept(set)?
        .into_iter()
        .find(|mark| mark.recording_id == evicted))
}

/// What holds the last slot of a kept mark's span, where its window is not there.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum MarkOverwritten {
    #[error(
        "member {member} slot {slot} holds a chunk of recording {recording} (sequence \
         {sequence}), not of its window"
    )]
    ByRecording {
        member: usize,
        slot: u64,
        recording: u32,
        sequence: u64,
    },
    #[error("member {member} slot {slot} holds no chunk of its window")]
    NoChunk { member: usize, slot: u64 },
}

/// Whether kept `mark`'s slots still hold its window, looked at cheaply (`ls`): the last
/// slot of its span on each member must hold a chunk of its recording from before the
/// mark closed. A slot that holds anything else (a recording added over it, as one could
/// before marks were kept out of) is named; `verify` reads the window whole. (Its first
/// slots may hold anything: a jump that left slots unwritten before the mark widened it
/// over them.)
pub fn overwritten(set: &VolumeSet, mark: &RecordingEntry) -> Option<MarkOverwritten> {
    let of = mark.mark_of?.recording_id;
    let lap_slots = |member: usize| {
        set.members
            .get(member)
            .and_then(|m| m.as_ref())
            .map_or(1, |m| m.layout().data_slot_count)
    };
    for range in ranges_of(mark, lap_slots) {
        let member = set.members.get(range.member)?.as_ref()?;
        let slots = lap_slots(range.member);
        let slot = (range.first_slot + range.slot_count - 1) % slots;
        let holds = |header: &crate::layout::ChunkHeader| {
            header.set_uuid == set.set_uuid
                && header.recording_id == of
                && header.slot_index == slot
                && header.sequence < mark.end_sequence
        };
        match super::scan::slot_header(member, slot) {
            Some(header) if holds(&header) => {}
            Some(header) if header.set_uuid == set.set_uuid => {
                return Some(MarkOverwritten::ByRecording {
                    member: range.member,
                    slot,
                    recording: header.recording_id,
                    sequence: header.sequence,
                })
            }
            _ => {
                return Some(MarkOverwritten::NoChunk {
                    member: range.member,
                    slot,
                })
            }
        }
    }
    None
}

/// The slots `mark` keeps on `member` as one range (first slot, count) in the lap order of
/// a ring of `lap` slots: where its span wraps past the lap of the ring that kept it, it
/// takes this lap's slots to the end and goes on at slot 0, so that no slot it keeps is
/// left out whatever this lap's length (a slot past this lap is never written by it).
pub fn range_in_lap(mark: &RecordingEntry, member: usize, lap: u64) -> Option<(u64, u64)> {
    if mark.state == RecordingState::Open {
        return None;
    }
    let span = mark.members.get(member)?;
    let (start, end) = (span.start_slot_index, span.end_slot_index);
    let range = match (end >= start, start < lap) {
        (true, true) => (start, end.min(lap) - start),
        (true, false) => return None,
        (false, true) => (start, lap - start + end.min(lap)),
        (false, false) => (0, end.min(lap)),
    };
    (range.1 > 0).then_some(range)
}

/// How to give a kept mark's slots back, for a refusal: its id, its recording, its label.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "mark {mark_id}{} of recording {recording_id} keeps its slots until released (nvrec mark \
     --release {mark_id} TARGETS) or archived (nvrec archive --delete-after-verify)",
    quoted(label)
)]
pub struct ReleaseHint {
    pub mark_id: u32,
    pub label: String,
    pub recording_id: u32,
}

fn quoted(label: &str) -> String {
    match label.is_empty() {
        true => String::new(),
        false => format!(" \"{label}\""),
    }
}

/// How to give `mark`'s slots back.
pub fn release_hint(mark: &RecordingEntry) -> ReleaseHint {
    ReleaseHint {
        mark_id: mark.recording_id,
        label: mark.name.as_str().to_string(),
        recording_id: mark.mark_of.map_or(0, |of| of.recording_id),
    }
}

/// The slots that marks keep apart from the lap of `entry` (a ring recording), released or
/// not: its own marks, and those of earlier recordings that were kept when it began (its
/// writer jumped over them too). A released mark's slots hold its chunks until the ring
/// writes over them, and older chunks in the middle of a lap would look like its start.
pub fn kept_ranges(
    set: &VolumeSet,
    entry: &RecordingEntry,
) -> Result<Vec<KeptRange>, RecordingError> {
    if !entry.flags.contains(RecordingFlags::RING) || entry.flags.contains(RecordingFlags::MARK) {
        return Ok(Vec::new());
    }
    let lap_slots = |member: usize| {
        set.members
            .get(member)
            .and_then(|m| m.as_ref())
            .map_or(1, |m| m.layout().data_slot_count)
    };
    let mut ranges = Vec::new();
    for mark in kept_over(set, entry)? {
        // An earlier recording's mark kept apart holds none of this recording's chunks.
        let earlier = mark.mark_of.map(|of| of.recording_id) != Some(entry.recording_id);
        ranges.extend(
            ranges_of(&mark, lap_slots)
                .into_iter()
                .map(|range| KeptRange {
                    stream_bytes: match earlier && !range.released {
                        true => Some((u64::MAX, u64::MAX)),
                        false => range.stream_bytes,
                    },
                    ..range
                }),
        );
    }
    Ok(ranges)
}

/// The marks whose slots ring `entry`'s writer kept apart, released or not (see
/// [`kept_ranges`]): its own, and those of earlier recordings kept when it began.
pub fn kept_over(
    set: &VolumeSet,
    entry: &RecordingEntry,
) -> Result<Vec<RecordingEntry>, RecordingError> {
    let over = |mark: &RecordingEntry| {
        let of = mark.mark_of.map_or(0, |of| of.recording_id);
        of == entry.recording_id
            || mark.recording_id < entry.recording_id
                && mark
                    .reclaimed
                    .is_none_or(|reclaim| reclaim.reclaimed_ns >= entry.start_ns)
    };
    let mut marks = set.marks()?;
    marks.retain(over);
    Ok(marks)
}

/// Recording `parent` as a read of `mark` sees it: the mark's chunks, on the slots it
/// keeps, read as a ring that never went round. A mark closes where its recording's writes
/// were placed; those its recording did not keep (a crash took them before they were
/// durable) are not the mark's either.
pub fn view(parent: &RecordingEntry, mark: &RecordingEntry) -> RecordingEntry {
    let end_sequence = match parent.state {
        RecordingState::Open => mark.end_sequence,
        _ => mark.end_sequence.min(parent.end_sequence),
    };
    RecordingEntry {
        state: RecordingState::Closed,
        first_sequence: mark.first_sequence.min(end_sequence),
        end_sequence,
        start_ns: parent.start_ns,
        end_ns: mark.end_ns,
        stream_len_bytes: mark.stream_len_bytes,
        lost_bytes: 0,
        members: mark.members.clone(),
        start_laps: mark.start_laps.clone(),
        overwrote: vec![false; mark.members.len()],
        // Its recording's space may be reclaimed: the mark's slots are kept all the same.
        flags: RecordingFlags::from_bits_retain(
            parent.flags.bits() & !RecordingFlags::RECLAIMED.bits(),
        ) | RecordingFlags::RING
            | RecordingFlags::LAPS,
        reclaimed: None,
        ..parent.clone()
    }
}

/// Mark `mark_id` of `set` and the recording it marks, among `recordings` (the set's, as
/// `reader::recordings` gives them: a crashed one at its recovered end).
pub fn find(
    set: &VolumeSet,
    mark_id: u32,
    recordings: &[RecordingEntry],
) -> Result<(RecordingEntry, RecordingEntry), RecordingError> {
    let mark = set
        .marks()?
        .into_iter()
        .find(|mark| mark.recording_id == mark_id)
        .ok_or(RecordingError::NoSuchMark(mark_id))?;
    let parent_id = mark.mark_of.map_or(0, |of| of.recording_id);
    let parent = recordings
        .iter()
        .find(|entry| entry.recording_id == parent_id)
        .cloned()
        .ok_or(RecordingError::NoSuchRecording(parent_id))?;
    // A recording reclaimed for room keeps its marks: their slots are never reclaimed
    // with it (see `writer/reclaim.rs`), so a mark reads whole all the same.
    Ok((mark, parent))
}

/// Releases mark `mark_id` of a set no recorder writes: its entry's next revision, flagged
/// `RECLAIMED` (cause released), on every member, flushed. A mark being read is not
/// released (the reader holds it).
pub fn release(set: &VolumeSet, mark_id: u32) -> Result<RecordingEntry, RecordingError> {
    let (mark, _) = find(set, mark_id, &set.recordings()?)?;
    if mark.reclaimed.is_some() {
        return Err(RecordingError::Usage(format!(
            "mark {mark_id} was released already"
        )));
    }
    match super::retention::reclaim(set, &mark, ReclaimCause::Released, None, &[])? {
        Ok(next) => Ok(next),
        Err(_) => Err(RecordingError::Usage(format!(
            "mark {mark_id} is being read; release it once the read is done"
        ))),
    }
}

/// Closes the open marks of recording `parent` (a crashed recording just closed at its
/// recovered end): each keeps its window up to that end.
pub(crate) fn close_open(set: &VolumeSet, parent: &RecordingEntry) -> Result<(), RecordingError> {
    for mark in marks_of(set, parent.recording_id)? {
        if mark.state != RecordingState::Open {
            continue;
        }
        let offset = mark.mark_of.map_or(0, |of| of.stream_offset_bytes);
        let mut closed = RecordingEntry {
            revision: mark.revision + 1,
            state: RecordingState::Interrupted,
            end_sequence: parent.end_sequence.max(mark.first_sequence),
            end_ns: parent.end_ns,
            stream_len_bytes: parent.stream_len_bytes.saturating_sub(offset),
            lost_bytes: 0,
            ..mark.clone()
        };
        for (span, end) in closed.members.iter_mut().zip(&parent.members) {
            span.end_slot_index = end.end_slot_index;
        }
        set.write_entry(&closed)?;
    }
    Ok(())
}
