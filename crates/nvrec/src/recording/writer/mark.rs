//! Marks (format 1.7, see `recording/marks.rs`): the mark stage takes the orders of the
//! recording's [`MarkDesk`] between writes. A mark's before-window is found in a history
//! of each member's writes (kept for a lap, thinned when long); its entry is written open
//! and flushed at once, then closed when its after-window ends, or sooner where the ring
//! would otherwise reach its start (`--max-marked`). A mark asked while one still records
//! its after-window is joined to it: that window goes on to the later end. From then on the members' write
//! points jump over the slots it keeps (`MemberState::jump_kept`) until it is released.

use super::member::MemberState;
use super::Placed;
use super::Writer;
use crate::layout::Label;
use crate::layout::MemberSpan;
use crate::layout::RecordingEntry;
use crate::layout::RecordingFlags;
use crate::layout::RecordingState;
use crate::layout::{MarkOf, ReclaimCause};
use crate::recording::failure::RecordingFailure;
use crate::recording::failure::Step;
use crate::recording::marks::{
    MarkAction, MarkAnswer, MarkDesk, MarkOrder, MarkRefusal, MarkRequest,
};
use crate::recording::Fill;
use crate::recording::RecordingError;
use std::collections::VecDeque;
use std::sync::Arc;

/// A member's history holds at most this many writes; past it every other one is dropped
/// (a mark may then keep a little more before its window than it asked for, never less).
const HISTORY_MAX: usize = 1 << 16;

/// One write of a member, as a mark looks for its window's start.
#[derive(Debug, Clone, Copy)]
struct Written {
    position: u64,
    /// The member's slots written before it (its position less the jumps over kept slots).
    written: u64,
    slot: u64,
    lap: u64,
    first_sequence: u64,
    /// Its first chunk's time since the recording began, and stream offset.
    elapsed_ns: u64,
    stream_offset_bytes: u64,
}

/// A mark whose after-window is being recorded.
struct OpenMark {
    entry: RecordingEntry,
    /// When it was taken, and when its after-window ends, on the chunks' timeline: it
    /// closes once the writes placed reach that end (the input runs ahead of them by what
    /// the buffer pool holds, and those chunks belong to the window too).
    taken_ns: u64,
    close_at_ns: u64,
    /// Each member's ring position where the mark's slots begin (None: kept none there).
    starts: Vec<Option<u64>>,
    /// Slots each member may keep for it at most, counted from where its window starts
    /// in the member's slots written (`Written::written`).
    cap_slots: Vec<u64>,
    starts_written: Vec<Option<u64>>,
    answer: MarkAnswer,
}

/// A closed mark the ring keeps: its entry and the slots it keeps on each member.
struct KeptMark {
    entry: RecordingEntry,
    ranges: Vec<Option<(u64, u64)>>,
}

/// The mark stage's state.
pub(super) struct Marker {
    desk: Arc<MarkDesk>,
    /// The share of each member's lap that marks may keep.
    max_marked: f64,
    history: Vec<VecDeque<Written>>,
    open: Option<OpenMark>,
    kept: Vec<KeptMark>,
    next_id: u32,
    /// Where the stream of the last write placed ends, and its last chunk's time.
    placed_stream_end: u64,
    placed_elapsed_ns: u64,
    /// Marks taken and released, for the report.
    answers: Vec<MarkAnswer>,
    /// Entries of marks to make durable with the next checkpoint (the durability
    /// coordinator writes them off the data path, so that a member that stalls holds
    /// back no one's writes), in the order they were made.
    waiting: Vec<RecordingEntry>,
    /// Marks taken whose open entry is not durable yet, and who to answer once it is.
    unanswered: Vec<(u32, Reply, MarkAnswer)>,
}

type Reply = std::sync::mpsc::Sender<Result<MarkAnswer, MarkRefusal>>;

impl Marker {
    pub(super) fn new(desk: Arc<MarkDesk>, max_marked: f64, members: usize, next_id: u32) -> Self {
        Marker {
            desk,
            max_marked,
            history: vec![VecDeque::new(); members],
            open: None,
            kept: Vec::new(),
            next_id,
            placed_stream_end: 0,
            placed_elapsed_ns: 0,
            answers: Vec::new(),
            waiting: Vec::new(),
            unanswered: Vec::new(),
        }
    }

    /// Whether the writes placed reached the end of the open mark's after-window, or a
    /// member's room for it is used up (`k` chunks a write).
    fn due(&self, members: &[MemberState], k: u64) -> bool {
        let Some(open) = self.open.as_ref() else {
            return false;
        };
        let full = members.iter().enumerate().any(|(i, member)| {
            open.starts_written[i]
                .is_some_and(|start| member.written_position() + 2 * k > start + open.cap_slots[i])
        });
        full || self.placed_elapsed_ns >= open.close_at_ns
    }

    /// Where a window from `from_ns` (since the recording began) starts on each member,
    /// and how much each may keep: refused where the before-window and an after-window of
    /// `after_ns` at the member's recent rate would take more than marks may keep.
    fn window_start(
        &self,
        members: &[MemberState],
        now: &Moment,
        (from_ns, after_ns): (u64, u64),
    ) -> Result<WindowStart, MarkRefusal> {
        let Moment {
            k,
            now_ns,
            next_sequence,
            chunk_bytes,
        } = *now;
        let mut start = WindowStart::default();
        let mut latest: Option<Written> = None;
        for (i, member) in members.iter().enumerate() {
            let lap = member.point.lap_slots().max(1);
            let kept = member.kept.union_slots(lap);
            let cap = ((lap as f64 * self.max_marked) as u64).saturating_sub(kept);
            // Slots written, not ring positions: a jump over kept slots writes none, and
            // the window's slots that lie in another mark's are kept already.
            let now = member.written_position();
            let history = &self.history[i];
            let found = history
                .iter()
                .rev()
                .find(|w| w.elapsed_ns <= from_ns)
                .or_else(|| history.front())
                .copied();
            let Some(written) = found.filter(|_| !member.retired) else {
                start.positions.push(None);
                start.written.push(None);
                start
                    .slots
                    .push((member.point.slot() % lap, member.point.lap()));
                start.cap_slots.push(cap);
                continue;
            };
            // The window from that write to the after-window's end, at the member's rate:
            // what the buffer pool holds of it yet goes to these slots too.
            let rate = recent_slots_per_ns(history, now_ns, now);
            let span_ns = now_ns.saturating_sub(written.elapsed_ns) + after_ns;
            let before = now.saturating_sub(written.written);
            let need = before.max((rate * span_ns as f64) as u64) + 2 * k;
            if need > cap {
                return Err(MarkRefusal::TooLarge {
                    member: i as u16,
                    need_bytes: need * chunk_bytes,
                    need_share: need as f64 / lap as f64,
                    allowed_bytes: cap * chunk_bytes,
                    max_marked: self.max_marked,
                });
            }
            if latest.is_none_or(|l| written.first_sequence > l.first_sequence) {
                latest = Some(written);
            }
            start.positions.push(Some(written.position));
            start.written.push(Some(written.written));
            start.slots.push((written.slot, written.lap));
            start.cap_slots.push(cap);
        }
        let latest = latest.unwrap_or(Written {
            position: 0,
            written: 0,
            slot: 0,
            lap: 0,
            first_sequence: next_sequence,
            elapsed_ns: now_ns,
            stream_offset_bytes: self.placed_stream_end,
        });
        start.first_sequence = latest.first_sequence;
        start.elapsed_ns = latest.elapsed_ns;
        start.stream_offset_bytes = latest.stream_offset_bytes;
        Ok(start)
    }

    /// The entries a checkpoint made durable (`made`) and those it did not (`left`, offered
    /// again): a kept mark's slots that a durable entry names now are settled on each of
    /// `members`, and a mark whose open entry is durable now is answered.
    fn entries_made(
        &mut self,
        members: &mut [MemberState],
        made: Vec<RecordingEntry>,
        left: Vec<RecordingEntry>,
    ) {
        let mut waiting = left;
        waiting.append(&mut self.waiting);
        self.waiting = waiting;
        for kept in &self.kept {
            let durable = made.iter().any(|entry| {
                entry.recording_id == kept.entry.recording_id
                    && entry.revision == kept.entry.revision
            });
            if durable {
                for (member, range) in members.iter_mut().zip(&kept.ranges) {
                    if let Some(range) = range {
                        member.kept.settled(*range);
                    }
                }
            }
        }
        let (now, later): (Vec<_>, Vec<_>) = std::mem::take(&mut self.unanswered)
            .into_iter()
            .partition(|(id, _, _)| made.iter().any(|entry| entry.recording_id == *id));
        self.unanswered = later;
        for (_, reply, answer) in now {
            let _ = reply.send(Ok(answer));
        }
    }
}

impl Writer<'_> {
    /// Notes a write placed (not a redirected one) in its member's history, and moves the
    /// member's write point past kept slots its next write would touch.
    pub(super) fn note_mark_write(
        &mut self,
        member_index: usize,
        placed: &Placed,
        (buffer, chunk_count): (u32, u32),
        first_sequence: u64,
        redirected: bool,
    ) {
        let k = self.k as u64;
        let Some(marker) = self.marker.as_mut() else {
            return;
        };
        let member = &mut self.placement.members[member_index];
        if !redirected {
            let meta = self.ingest.meta(buffer, 0);
            let last = self.ingest.meta(buffer, chunk_count.max(1) - 1);
            marker.placed_elapsed_ns = marker.placed_elapsed_ns.max(last.elapsed_ns);
            let lap_slots = member.point.lap_slots().max(1);
            let history = &mut marker.history[member_index];
            history.push_back(Written {
                position: placed.position,
                written: placed.position.saturating_sub(member.kept.jumped_slots()),
                slot: placed.slot,
                lap: placed.position / lap_slots,
                first_sequence,
                elapsed_ns: meta.elapsed_ns,
                stream_offset_bytes: meta.stream_offset_bytes,
            });
            marker.placed_stream_end = marker.placed_stream_end.max(placed.stream_end_bytes);
            let now_position = member.ring_next().0;
            while history
                .front()
                .is_some_and(|w| w.position + member.point.lap_slots() < now_position + k)
            {
                history.pop_front();
            }
            if history.len() > HISTORY_MAX {
                thin(history);
            }
        }
        // A member that takes a retired member's writes keeps its next write in one run.
        let contiguous = redirected || self.retiring.redirect_to() == Some(member_index);
        if member.jump_kept(k, contiguous) {
            self.widen_marks_or_fail(member_index);
        }
    }

    /// Widens the marks a jump widened on `member_index` (see [`Writer::widen_marks`]);
    /// where that fails, the recording fails.
    pub(super) fn widen_marks_or_fail(&mut self, member_index: usize) {
        if let Err(error) = self.widen_marks(member_index) {
            self.fail(RecordingFailure::step(Step::WideningMark, error));
        }
    }

    /// Marks whose slots a jump widened back to the write point on `member_index` (see
    /// `KeptSlots::take_widened`): their entries' next revision, with the wider span there,
    /// on every member, flushed.
    fn widen_marks(&mut self, member_index: usize) -> Result<(), RecordingError> {
        let widened = self.placement.members[member_index].kept.take_widened();
        let Some(marker) = self.marker.as_mut() else {
            return Ok(());
        };
        for (before, after) in widened {
            for kept in marker.kept.iter_mut() {
                if kept.ranges[member_index] != Some(before) {
                    continue;
                }
                kept.ranges[member_index] = Some(after);
                kept.entry.revision += 1;
                kept.entry.members[member_index].start_slot_index = after.0;
                if after.0 > before.0 {
                    // Widened back over the lap's start: its first slot is a lap earlier.
                    let lap = &mut kept.entry.start_laps[member_index];
                    *lap = lap.saturating_sub(1);
                }
                // Durable with the checkpoint past the jump, which the writes after it wait for.
                marker.waiting.push(kept.entry.clone());
            }
        }
        Ok(())
    }

    /// Takes the orders waiting at the desk, and closes the open mark when its time has
    /// come (or its room is used up).
    pub(super) fn serve_marks(&mut self) {
        let Some(marker) = self.marker.as_ref() else {
            return;
        };
        let orders = marker.desk.take_orders();
        for (order, reply) in orders {
            let (answer, taken) = match order {
                MarkOrder::Take(request) => (self.take_mark(&request), true),
                MarkOrder::Release(id) => (self.release_mark(id), false),
            };
            let marker = self.marker.as_mut().expect("marks are served");
            match answer {
                // A mark joined to the open one is that mark, listed once.
                Ok(answer) if taken && !answer.joined => {
                    marker.answers.push(answer.clone());
                    // Answered once its open entry is durable.
                    marker.unanswered.push((answer.mark_id, reply, answer));
                }
                Ok(answer) => {
                    if !answer.joined {
                        marker.answers.push(answer.clone());
                    }
                    let _ = reply.send(Ok(answer));
                }
                Err(why) => {
                    let _ = reply.send(Err(why));
                }
            }
        }
        if self.mark_due() {
            if let Err(error) = self.close_mark() {
                self.fail(RecordingFailure::step(Step::ClosingMark, error));
            }
        }
    }

    /// Now, on the recording's timeline as chunks are stamped (a paced source's chunks at
    /// their place in the stream).
    fn now_elapsed_ns(&self) -> u64 {
        match self.options.rate_bytes_per_s {
            Some(rate) => (self.ingest.stream_at().0 as f64 / rate * 1e9) as u64,
            None => self.clock.since(self.start_instant).as_nanos() as u64,
        }
    }

    /// Whether the open mark is due to close (see [`Marker::due`]).
    fn mark_due(&self) -> bool {
        let members = &self.placement.members;
        self.marker
            .as_ref()
            .is_some_and(|marker| marker.due(members, self.k as u64))
    }

    /// A mark of `request`: its window's start found on each member, its size checked
    /// against the room marks may keep, its entry written open and flushed.
    fn take_mark(&mut self, request: &MarkRequest) -> Result<MarkAnswer, MarkRefusal> {
        if !matches!(self.options.fill, Fill::Ring { .. }) || self.reclaimer.is_some() {
            return Err(MarkRefusal::NotARing);
        }
        let now_ns = self.now_elapsed_ns();
        if let Some(open) = self.marker.as_mut().and_then(|marker| marker.open.as_mut()) {
            return Ok(join(open, request, now_ns));
        }
        let marker = self.marker.as_ref().expect("marks are served");
        let from_ns = now_ns.saturating_sub(request.before.as_nanos() as u64);
        let after_ns = request.after.as_nanos() as u64;
        let moment = Moment {
            k: self.k as u64,
            now_ns,
            next_sequence: self.placement.next_sequence,
            chunk_bytes: self.set.chunk_size_bytes as u64,
        };
        let start = marker.window_start(&self.placement.members, &moment, (from_ns, after_ns))?;
        let id = marker.next_id;
        self.table_slot_free(id)?;
        let entry = self.open_mark_entry(id, request, &start)?;
        entry
            .encode()
            .map_err(|e| MarkRefusal::failed(MarkAction::Writing, id, e))?;
        let answer = MarkAnswer {
            mark_id: id,
            recording_id: self.recording_id,
            released: false,
            before_ns: now_ns.saturating_sub(start.elapsed_ns),
            after_ns,
            label: request.label.clone(),
            cut_short: false,
            joined: false,
        };
        let marker = self.marker.as_mut().expect("marks are served");
        marker.next_id += 1;
        marker.waiting.push(entry.clone());
        marker.open = Some(OpenMark {
            entry,
            taken_ns: now_ns,
            close_at_ns: now_ns + after_ns,
            starts: start.positions,
            cap_slots: start.cap_slots,
            starts_written: start.written,
            answer: answer.clone(),
        });
        Ok(answer)
    }

    /// A ring added to a set whose earlier recordings' `marks` keep slots: it keeps them as
    /// it keeps its own, its write points jumping over them from the first write (so a
    /// ring restarted after a crash goes on without writing over the marks it took), and
    /// they may be released through it. Readers of this ring leave their slots out of its
    /// lap (`marks::kept_ranges`).
    pub(super) fn keep_earlier_marks(
        &mut self,
        marks: Vec<RecordingEntry>,
    ) -> Result<(), RecordingError> {
        let members = self.placement.members.len();
        let marker = self.marker.get_or_insert_with(|| {
            Marker::new(
                Arc::new(MarkDesk::default()),
                self.options.max_marked,
                members,
                self.recording_id + 1,
            )
        });
        for entry in marks {
            let ranges: Vec<Option<(u64, u64)>> = (0..members)
                .map(|index| {
                    let lap = self.placement.members[index].point.lap_slots();
                    crate::recording::marks::range_in_lap(&entry, index, lap)
                })
                .collect();
            for (member, range) in self.placement.members.iter_mut().zip(&ranges) {
                if let Some(range) = range {
                    member.kept.keep(*range, true);
                }
            }
            marker.kept.push(KeptMark { entry, ranges });
        }
        let k = self.k as u64;
        for index in 0..members {
            let member = &mut self.placement.members[index];
            if member.jump_kept(k, false) {
                // Nothing written yet: the ring begins past them.
                member.point.begin_here();
            }
            self.widen_marks(index)?;
        }
        Ok(())
    }

    /// Whether mark entries wait to be made durable.
    pub(super) fn entries_waiting(&self) -> bool {
        self.marker
            .as_ref()
            .is_some_and(|marker| !marker.waiting.is_empty())
    }

    /// The mark entries waiting, handed to the next checkpoint.
    pub(super) fn entries_to_offer(&mut self) -> Vec<RecordingEntry> {
        self.marker
            .as_mut()
            .map(|marker| std::mem::take(&mut marker.waiting))
            .unwrap_or_default()
    }

    /// The entries a checkpoint made durable and those it did not (see
    /// [`Marker::entries_made`]).
    pub(super) fn entries_made(&mut self, made: Vec<RecordingEntry>, left: Vec<RecordingEntry>) {
        if let Some(marker) = self.marker.as_mut() {
            marker.entries_made(&mut self.placement.members, made, left);
        }
    }

    /// Writes the mark entries waiting here and now (a checkpoint written in the writer's
    /// own thread, at the start and the end of the recording), on the live members.
    pub(super) fn write_waiting_entries(&mut self) {
        let entries = self.entries_to_offer();
        let mut made = Vec::new();
        let mut left = Vec::new();
        for entry in entries {
            let Ok(bytes) = entry.encode() else {
                continue;
            };
            let (taken, _) = self.on_live_members(|member| {
                member.write_entry(&bytes, &entry)?;
                member.flush()
            });
            match taken > 0 {
                true => made.push(entry),
                false => left.push(entry),
            }
        }
        self.entries_made(made, left);
    }

    /// Refuses a mark whose entry would take the table slot of this recording's own entry
    /// or of a mark that is kept (the table holds a fixed number of entries): that entry
    /// would be gone with what it keeps.
    fn table_slot_free(&self, id: u32) -> Result<(), MarkRefusal> {
        let count = self.set.recording_slot_count();
        if id.checked_sub(count) == Some(self.recording_id) {
            return Err(MarkRefusal::TableFull {
                mark_id: id,
                recording_id: self.recording_id,
                count,
            });
        }
        match crate::recording::marks::table_slot_kept(self.set, id) {
            Ok(None) => Ok(()),
            Ok(Some(mark)) => Err(MarkRefusal::SlotKept {
                mark_id: id,
                kept: crate::recording::marks::release_hint(&mark),
            }),
            Err(error) => Err(MarkRefusal::failed(MarkAction::Taking, id, error)),
        }
    }

    /// Releases mark `id`: its entry flagged released (every member, flushed), then its
    /// slots given back to the ring. A mark of an earlier recording is released the same.
    fn release_mark(&mut self, id: u32) -> Result<MarkAnswer, MarkRefusal> {
        if self
            .marker
            .as_ref()
            .and_then(|m| m.open.as_ref())
            .is_some_and(|o| o.entry.recording_id == id)
        {
            self.close_mark()
                .map_err(|e| MarkRefusal::failed(MarkAction::Closing, id, e))?;
        }
        let marker = self.marker.as_mut().expect("marks are served");
        let Some(index) = marker.kept.iter().position(|m| m.entry.recording_id == id) else {
            let released = crate::recording::marks::release(self.set, id)
                .map_err(|e| MarkRefusal::failed(MarkAction::Releasing, id, e))?;
            return Ok(released_answer(&released));
        };
        let entry = marker.kept[index].entry.clone();
        let live = self.placement.live();
        match crate::recording::retention::reclaim(
            self.set,
            &entry,
            ReclaimCause::Released,
            None,
            &live,
        ) {
            Ok(Ok(next)) => {
                let marker = self.marker.as_mut().expect("marks are served");
                let kept = marker.kept.remove(index);
                for (member, range) in self.placement.members.iter_mut().zip(&kept.ranges) {
                    if let Some(range) = range {
                        member.kept.release(*range);
                    }
                }
                Ok(released_answer(&next))
            }
            Ok(Err(_)) => Err(MarkRefusal::BeingRead(id)),
            Err(error) => Err(MarkRefusal::failed(MarkAction::Releasing, id, error)),
        }
    }

    /// Closes the open mark at the write points: its entry's next revision (closed, with
    /// its end slots, sequence and length), flushed; then its slots are kept.
    pub(super) fn close_mark(&mut self) -> Result<(), RecordingError> {
        let Some(open) = self.marker.as_mut().and_then(|m| m.open.take()) else {
            return Ok(());
        };
        let marker = self.marker.as_ref().expect("marks are served");
        let offset = open.entry.mark_of.map_or(0, |of| of.stream_offset_bytes);
        let mut entry = RecordingEntry {
            revision: open.entry.revision + 1,
            state: RecordingState::Closed,
            end_sequence: self.placement.next_sequence.max(open.entry.first_sequence),
            end_ns: self.start_ns + marker.placed_elapsed_ns,
            stream_len_bytes: marker.placed_stream_end.saturating_sub(offset),
            ..open.entry.clone()
        };
        let mut ranges = Vec::new();
        for (i, member) in self.placement.members.iter().enumerate() {
            let lap = member.point.lap_slots().max(1);
            let (now, _, slot) = member.ring_next();
            let range = open.starts[i]
                .filter(|&start| now > start)
                .map(|start| (start % lap, now - start));
            entry.members[i].end_slot_index = match range {
                Some(_) => slot,
                None => entry.members[i].start_slot_index,
            };
            ranges.push(range);
        }
        entry.encode()?;
        // Durable with the checkpoint past the jump over its slots, which the writes after
        // it wait for (see `MemberState::jump_kept`).
        self.marker
            .as_mut()
            .expect("marks are served")
            .waiting
            .push(entry.clone());
        let k = self.k as u64;
        for (member, range) in self.placement.members.iter_mut().zip(&ranges) {
            if let Some(range) = range {
                member.kept.keep(*range, false);
                member.jump_kept(k, false);
            }
        }
        let marker = self.marker.as_mut().expect("marks are served");
        marker.kept.push(KeptMark {
            entry: entry.clone(),
            ranges: ranges.clone(),
        });
        for member_index in 0..self.placement.members.len() {
            self.widen_marks(member_index)?;
        }
        let marker = self.marker.as_mut().expect("marks are served");
        let after_ns = marker.placed_elapsed_ns.saturating_sub(open.taken_ns);
        let cut_short = marker.placed_elapsed_ns < open.close_at_ns;
        if let Some(answer) = marker
            .answers
            .iter_mut()
            .find(|a| a.mark_id == open.answer.mark_id)
        {
            answer.after_ns = after_ns;
            answer.cut_short = cut_short;
        }
        Ok(())
    }

    /// A mark's entry as it is taken: open, its spans starting (and ending) where its
    /// window starts on each member.
    fn open_mark_entry(
        &self,
        id: u32,
        request: &MarkRequest,
        start: &WindowStart,
    ) -> Result<RecordingEntry, MarkRefusal> {
        let name = Label::new(&request.label).map_err(MarkRefusal::Label)?;
        Ok(RecordingEntry {
            set_uuid: self.set.set_uuid,
            recording_id: id,
            revision: 1,
            state: RecordingState::Open,
            flags: self.entry_flags() | RecordingFlags::MARK,
            first_sequence: start.first_sequence,
            end_sequence: start.first_sequence,
            start_ns: self.start_ns,
            end_ns: 0,
            stream_len_bytes: 0,
            lost_bytes: 0,
            name,
            members: start
                .slots
                .iter()
                .map(|&(slot, _)| MemberSpan {
                    start_slot_index: slot,
                    end_slot_index: slot,
                })
                .collect(),
            retirements: Vec::new(),
            start_laps: start.slots.iter().map(|&(_, lap)| lap as u32).collect(),
            overwrote: vec![false; start.slots.len()],
            signal: self.options.signal.clone(),
            reclaimed: None,
            mark_of: Some(MarkOf {
                recording_id: self.recording_id,
                stream_offset_bytes: start.stream_offset_bytes,
                from_ns: self.start_ns + start.elapsed_ns,
            }),
        })
    }

    /// The report's marks.
    pub(super) fn mark_answers(&self) -> Vec<MarkAnswer> {
        self.marker
            .as_ref()
            .map_or_else(Vec::new, |m| m.answers.clone())
    }

    /// The recording ends: the open mark closes, orders still waiting are refused.
    pub(super) fn end_marks(&mut self) -> Result<(), RecordingError> {
        self.close_mark()?;
        if let Some(marker) = &self.marker {
            marker.desk.close();
        }
        Ok(())
    }
}

/// Where the recording stands as a mark is taken: `k` chunks a write, the time since it
/// began, the next chunk's sequence, the chunk's size.
struct Moment {
    k: u64,
    now_ns: u64,
    next_sequence: u64,
    chunk_bytes: u64,
}

/// Where a mark's window starts: on each member its ring position (None: none kept
/// there), slot and lap, and the room it may take; the window's first chunk.
#[derive(Default)]
struct WindowStart {
    positions: Vec<Option<u64>>,
    written: Vec<Option<u64>>,
    slots: Vec<(u64, u64)>,
    cap_slots: Vec<u64>,
    first_sequence: u64,
    elapsed_ns: u64,
    stream_offset_bytes: u64,
}

/// A member's write rate over its last second of history, in slots written (not jumped
/// over) per nanosecond; `now_written` is the member's slots written now.
fn recent_slots_per_ns(history: &VecDeque<Written>, now_ns: u64, now_written: u64) -> f64 {
    let since = now_ns.saturating_sub(1_000_000_000);
    let Some(first) = history
        .iter()
        .find(|w| w.elapsed_ns >= since)
        .or(history.front())
    else {
        return 0.0;
    };
    let span_ns = now_ns.saturating_sub(first.elapsed_ns).max(1);
    now_written.saturating_sub(first.written) as f64 / span_ns as f64
}

/// Drops every other write of a long history (the first kept).
fn thin(history: &mut VecDeque<Written>) {
    let mut index = 0;
    history.retain(|_| {
        index += 1;
        index % 2 == 1
    });
}

/// A mark asked at `now_ns` while `open` still records its after-window: joined to it,
/// whose after-window goes on to the later of the two ends. Its before-window is the open
/// mark's (a window already kept cannot grow back); the answer says what the joined mark
/// keeps around now, less before than asked where the open mark began later.
fn join(open: &mut OpenMark, request: &MarkRequest, now_ns: u64) -> MarkAnswer {
    open.close_at_ns = open
        .close_at_ns
        .max(now_ns + request.after.as_nanos() as u64);
    let window_start_ns = open.taken_ns.saturating_sub(open.answer.before_ns);
    MarkAnswer {
        before_ns: now_ns.saturating_sub(window_start_ns),
        after_ns: open.close_at_ns.saturating_sub(now_ns),
        joined: true,
        ..open.answer.clone()
    }
}

fn released_answer(entry: &RecordingEntry) -> MarkAnswer {
    MarkAnswer {
        mark_id: entry.recording_id,
        recording_id: entry.mark_of.map_or(0, |of| of.recording_id),
        released: true,
        before_ns: 0,
        after_ns: entry.end_ns.saturating_sub(entry.start_ns),
        label: entry.name.as_str().to_string(),
        cut_short: false,
        joined: false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::layout::sample_entry;
    use crate::recording::writer::point::WritePoint;

    fn marker() -> Marker {
        Marker::new(Arc::new(MarkDesk::default()), 0.5, 2, 10)
    }

    /// Two members of 100 slots a lap: the first at slot 40, having written 10, 20 and 30
    /// at 1, 2 and 3 us; the second retired.
    fn members(marker: &mut Marker) -> Vec<MemberState> {
        let mut first = MemberState {
            point: WritePoint::with_lap(100),
            ..MemberState::default()
        };
        first.point.set(40, 0);
        let second = MemberState {
            retired: true,
            point: WritePoint::with_lap(100),
            ..MemberState::default()
        };
        marker.history[0].extend([
            written(10, 10, 1_000),
            written(20, 20, 2_000),
            written(30, 30, 3_000),
        ]);
        vec![first, second]
    }

    fn moment() -> Moment {
        Moment {
            k: 4,
            now_ns: 4_000,
            next_sequence: 99,
            chunk_bytes: 4096,
        }
    }

    #[test]
    fn a_window_starts_at_each_members_last_write_before_it_and_a_retired_one_keeps_none() {
        let mut marker = marker();
        let members = members(&mut marker);
        let start = marker
            .window_start(&members, &moment(), (2_500, 0))
            .expect("room for it");
        assert_eq!(start.positions, [Some(20), None]);
        assert_eq!(start.slots, [(20, 0), (0, 0)]);
        assert_eq!(start.cap_slots, [50, 50], "half of each lap");
        assert_eq!(start.elapsed_ns, 2_000);
    }

    #[test]
    fn a_window_whose_after_window_would_take_more_than_marks_may_keep_is_refused() {
        let mut marker = marker();
        let members = members(&mut marker);
        // 30 slots in 3 us: an after-window of 10 us takes 100 more.
        let refused = marker.window_start(&members, &moment(), (2_500, 10_000));
        let Err(MarkRefusal::TooLarge {
            member,
            need_bytes,
            allowed_bytes,
            ..
        }) = refused
        else {
            panic!("not refused as too large: {:?}", refused.err());
        };
        assert_eq!((member, allowed_bytes), (0, 50 * 4096));
        assert_eq!(need_bytes, (120 + 8) * 4096);
    }

    #[test]
    fn an_open_mark_is_due_when_its_after_window_ends_or_a_members_room_for_it_runs_out() {
        let mut marker = marker();
        let mut members = members(&mut marker);
        assert!(!marker.due(&members, 4), "nothing open");
        marker.open = Some(OpenMark {
            entry: sample_entry(),
            taken_ns: 3_000,
            close_at_ns: 9_000,
            starts: vec![Some(20), None],
            cap_slots: vec![50, 50],
            starts_written: vec![Some(20), None],
            answer: released_answer(&sample_entry()),
        });
        marker.placed_elapsed_ns = 8_999;
        assert!(!marker.due(&members, 4));
        members[0].point.set(63, 0);
        assert!(marker.due(&members, 4), "63 + 8 passes 20 + 50");
        members[0].point.set(40, 0);
        marker.placed_elapsed_ns = 9_000;
        assert!(marker.due(&members, 4));
    }

    #[test]
    fn a_durable_entry_settles_its_marks_slots_and_answers_who_waits_for_it() {
        let mut marker = marker();
        let mut members = members(&mut marker);
        let entry = sample_entry();
        members[0].kept.keep((60, 10), false);
        marker.kept.push(KeptMark {
            entry: entry.clone(),
            ranges: vec![Some((60, 10)), None],
        });
        let (reply, answered) = std::sync::mpsc::channel();
        let answer = released_answer(&entry);
        marker
            .unanswered
            .push((entry.recording_id, reply, answer.clone()));
        let other = RecordingEntry {
            recording_id: entry.recording_id + 1,
            ..entry.clone()
        };
        marker.entries_made(&mut members, vec![other.clone()], vec![other.clone()]);
        assert!(answered.try_recv().is_err(), "not its entry");
        assert_eq!(marker.waiting.len(), 1, "offered again");
        assert_eq!(members[0].kept.unsettled(), &[(60, 10)]);
        marker.entries_made(&mut members, vec![entry], Vec::new());
        assert_eq!(answered.try_recv().unwrap().unwrap(), answer);
        assert!(members[0].kept.unsettled().is_empty());
        assert_eq!(marker.waiting.len(), 1, "the one left before still waits");
    }

    fn written(position: u64, written: u64, elapsed_ns: u64) -> Written {
        Written {
            position,
            written,
            slot: position % 100,
            lap: position / 100,
            first_sequence: 0,
            elapsed_ns,
            stream_offset_bytes: 0,
        }
    }

    #[test]
    fn a_jump_over_kept_slots_is_no_part_of_the_rate() {
        // 100 slots a second written; in the last second the write point jumped 2,000
        // kept slots: positions ran 2,100 ahead, slots written only 100.
        let history: VecDeque<Written> = [
            written(1_000, 1_000, 0),
            written(1_050, 1_050, 500_000_000),
            written(3_090, 1_090, 900_000_000),
        ]
        .into();
        let rate = recent_slots_per_ns(&history, 1_000_000_000, 1_100);
        assert!((rate * 1e9 - 100.0).abs() < 1e-6, "{}", rate * 1e9);
        assert_eq!(recent_slots_per_ns(&VecDeque::new(), 5, 5), 0.0);
    }
}
