//! Reading recordings back: in sequence order across members, with every check.
//!
//! Each member is scanned sequentially over the slots its part of the recording occupies,
//! with reads of several slots kept in flight through the engine; the scans are merged by
//! sequence number, so the stream comes out in the order it went in whichever member each
//! chunk went to. The reader never trusts a slot: a chunk counts only if it decodes (both
//! CRC32Cs), belongs to this set and recording, names this member and slot, and continues
//! the member's increasing sequence. Anything else inside the recording's span is damage
//! and is reported with member, offset and sequence.
//!
//! Recovery after a crash ([`recovered_end`]) reads only from the last checkpoint forward,
//! at most the recovery window per member: never the whole drive.

mod io;
mod listing;
mod merge;
mod recovery;
mod redirects;
mod scan;
mod span;
mod window;

pub use io::SlotUnreadable;
use io::{read_count, slot_runs, ScanReads};
pub use listing::{listed, recordings, recover, recovered_end, select, RecoveredEnd};
use merge::{Merge, Step};
pub(crate) use redirects::holds_redirect;
use redirects::Redirected;
use scan::Scan;
use span::{clamp_span, cut_to_target};
use window::seek_window;

use super::volume::{self, VolumeSet};
use super::RecordingError;
use crate::control::{process_cpu_s, Control, ControlState, Progress};
use crate::engine::EngineChoice;
use crate::layout::{
    ChunkFlags, ChunkHeader, MemberSpan, RecordingEntry, RecordingFlags, RecordingState,
};

use std::collections::VecDeque;
use std::sync::atomic::Ordering;

/// Slots per read when scanning a member (2 MiB reads with the default 128 KiB chunks).
pub const SCAN_SLOTS_PER_READ: u64 = 16;
/// Reads in flight per member while scanning. Few on purpose: every chunk's CRC is checked
/// as its read completes, and a small pool is still in the CPU's caches when it is; 16 reads
/// of 1 MiB cost 0.11 CPU s/GiB where 4 of 2 MiB cost 0.07, and were no faster, on the
/// virtio disk and on a RAM-backed loop device (docs/PERFORMANCE.md). 8 MiB in flight still
/// covers a fast drive's latency.
pub const SCAN_QUEUE_DEPTH: u32 = 4;
/// Reads in flight on the scan of a mark's kept slots beside its member's: one. A ring read
/// whole has a kept scan for every mark on every member, and the pool holds a read for each
/// read that may be in flight: with the member's four, 61 marks on three members took a
/// 1.4 GiB pool (docs/PERFORMANCE.md); a mark's slots are a small part of the lap.
pub const KEPT_SCAN_QUEUE_DEPTH: u32 = 1;

/// Something wrong found while reading a recording.
#[derive(Debug, Clone, serde::Serialize)]
pub struct Damage {
    pub member_index: u16,
    /// The member's target, or a placeholder for a missing member.
    pub member_path: String,
    pub slot_index: u64,
    pub offset_bytes: u64,
    /// The sequence the slot holds (its header decodes) or, for a slot that cannot be read,
    /// the one it must have held where its neighbours on the member tell.
    pub sequence: Option<u64>,
    pub what: String,
}

impl Damage {
    /// Damage at `slot_index` of member `member_index`, located by the member's layout.
    fn at(
        set: &VolumeSet,
        member_index: u16,
        slot_index: u64,
        sequence: Option<u64>,
        what: String,
    ) -> Damage {
        let member = set
            .members
            .get(member_index as usize)
            .and_then(|m| m.as_ref());
        Damage {
            member_index,
            member_path: match member {
                Some(member) => member.disk.path().display().to_string(),
                None => format!("(missing member {member_index})"),
            },
            slot_index,
            offset_bytes: member
                .and_then(|m| m.layout().data_slot_offset_bytes(slot_index))
                .unwrap_or(0),
            sequence,
            what,
        }
    }
}

/// What the merge hands out, in sequence order.
pub enum Item<'a> {
    Chunk {
        header: &'a ChunkHeader,
        payload: &'a [u8],
    },
    /// Sequence numbers that are in the recording's range but were found on no member.
    Missing {
        first_sequence: u64,
        count: u64,
    },
    Damage(&'a Damage),
}

impl Item<'_> {
    /// What a hole says: chunks found on no member, or a damaged one; None for a chunk.
    pub fn hole_text(&self) -> Option<String> {
        match self {
            Item::Chunk { .. } => None,
            Item::Missing {
                first_sequence,
                count,
            } => Some(format!(
                "{count} chunks missing from sequence {first_sequence}"
            )),
            Item::Damage(damage) => Some(format!(
                "damaged chunk on member {} slot {}: {}",
                damage.member_index, damage.slot_index, damage.what
            )),
        }
    }
}

/// What a read of a recording found.
#[derive(Debug, Clone, Default, serde::Serialize)]
pub struct ReadSummary {
    pub chunk_count: u64,
    pub payload_bytes: u64,
    pub read_bytes: u64,
    pub first_sequence: Option<u64>,
    pub last_sequence: Option<u64>,
    pub missing_chunk_count: u64,
    pub damage_count: u64,
    pub gap_count: u64,
    pub lost_bytes: u64,
    pub elapsed_s: f64,
    pub rate_mib_per_s: f64,
    pub cpu_user_s: f64,
    pub cpu_system_s: f64,
    /// Chunks read from where a retired member's unfinished writes were sent instead.
    pub redirected_chunk_count: u64,
    /// The memory the reads were given: a buffer for each read that may be in flight.
    pub read_pool_bytes: u64,
}

/// Reads recording `entry` of `set` in sequence order, calling `each` for every chunk,
/// hole and damage. Stops early when `each` returns false or `control` says so.
pub fn read_recording(
    set: &VolumeSet,
    entry: &RecordingEntry,
    engine_choice: EngineChoice,
    control: &Control,
    progress: &Progress,
    each: &mut dyn FnMut(Item<'_>) -> bool,
) -> Result<ReadSummary, RecordingError> {
    read_recording_from(set, entry, engine_choice, None, control, progress, each)
}

/// As [`read_recording`], starting at the first chunk that began at `from_ns` (ns since
/// the Unix epoch) or later, found without reading what comes before it: chunk timestamps
/// rise with the sequence, so on each member a binary search over its chunk headers finds
/// where the window starts ([`super::seek`]; a ring's in lap order, a retired member's and a
/// redirect member's too). Chunks before it are not reported, not even as missing. Where
/// the search cannot tell (see [`super::seek`]) the whole recording is read instead and the
/// caller's own filter on chunk timestamps does the rest. A mark's entry (format 1.7) reads
/// as [`read_mark_from`].
pub fn read_recording_from(
    set: &VolumeSet,
    entry: &RecordingEntry,
    engine_choice: EngineChoice,
    from_ns: Option<u64>,
    control: &Control,
    progress: &Progress,
    each: &mut dyn FnMut(Item<'_>) -> bool,
) -> Result<ReadSummary, RecordingError> {
    if entry.flags.contains(RecordingFlags::MARK) {
        let mark_id = entry.recording_id;
        return read_mark_from(
            set,
            mark_id,
            engine_choice,
            from_ns,
            control,
            progress,
            each,
        );
    }
    let _reading = super::retention::reading(set, entry)?;
    let kept = super::marks::kept_ranges(set, entry)?;
    let scope = ScanScope::Recording { kept };
    read_scans(
        set,
        entry,
        &scope,
        engine_choice,
        from_ns,
        control,
        progress,
        each,
    )
}

/// Reads mark `mark_id` of `set`: its window of its recording's chunks, from the slots it
/// keeps, as [`read_recording_from`] reads a recording. A released mark is refused.
pub fn read_mark_from(
    set: &VolumeSet,
    mark_id: u32,
    engine_choice: EngineChoice,
    from_ns: Option<u64>,
    control: &Control,
    progress: &Progress,
    each: &mut dyn FnMut(Item<'_>) -> bool,
) -> Result<ReadSummary, RecordingError> {
    let (mark, parent) = super::marks::find(set, mark_id, &recordings(set)?)?;
    // A recording reclaimed for room keeps its marks (no reclaim frees their slots): its
    // lock then guards nothing the mark's read needs.
    let _parent = match super::retention::reading(set, &parent) {
        Ok(lock) => Some(lock),
        Err(RecordingError::Reclaimed { .. }) => None,
        Err(error) => return Err(error),
    };
    let _mark = super::retention::reading(set, &mark).map_err(|error| match error {
        RecordingError::Reclaimed { when, .. } => RecordingError::MarkReleased { mark_id, when },
        error => error,
    })?;
    let view = super::marks::view(&parent, &mark);
    read_scans(
        set,
        &view,
        &ScanScope::Mark,
        engine_choice,
        from_ns,
        control,
        progress,
        each,
    )
}

/// What the scans of a read cover.
enum ScanScope {
    /// A recording: in a ring, the slots its marks keep are scans of their own.
    Recording { kept: Vec<super::marks::KeptRange> },
    /// A mark's view of its recording: its slots, and none where it kept none.
    Mark,
}

#[allow(clippy::too_many_arguments)]
fn read_scans(
    set: &VolumeSet,
    entry: &RecordingEntry,
    scope: &ScanScope,
    engine_choice: EngineChoice,
    from_ns: Option<u64>,
    control: &Control,
    progress: &Progress,
    each: &mut dyn FnMut(Item<'_>) -> bool,
) -> Result<ReadSummary, RecordingError> {
    let cpu_before = process_cpu_s();
    let clock = set.clock();
    let started = clock.now();
    let mut damages: Vec<Damage> = Vec::new();
    let redirected = Redirected::read(set, entry, control, &mut damages)?;
    let mut scans = member_scans(set, entry, &redirected, scope, &mut damages);
    // A released mark's slots may hold the ring's newer chunks before the mark's older
    // ones: no search can tell where a window starts among them, so the lap is read and
    // the caller's filter on chunk timestamps finds the window.
    let from_ns = match scope {
        ScanScope::Recording { kept } if kept.iter().any(|range| range.released) => None,
        _ => from_ns,
    };
    progress.total_bytes.store(
        entry.stream_len_bytes.saturating_sub(entry.lost_bytes),
        Ordering::Relaxed,
    );
    progress.done_bytes.store(0, Ordering::Relaxed);
    let expected = first_expected(set, entry, &mut scans, &redirected, from_ns);
    // Sized after the search: a scan left with nothing to read (a mark's slots before the
    // window) takes no memory, so a ring's many marks cost a reading from past them nothing.
    let mut reads = ScanReads::open(set, engine_choice, read_count(&scans, scope))?;
    let mut merge = Merge {
        set,
        entry,
        progress,
        each,
        summary: ReadSummary::default(),
        expected,
        damages,
        redirected,
    };
    merge.summary.read_pool_bytes = reads.engine.pool().total_bytes() as u64;
    let mut stop = false;
    while control.state() == ControlState::Run {
        merge.summary.read_bytes += reads.fill(set, &mut scans);
        let waiting = merge.advance_heads(&mut scans, &mut reads);
        if !merge.report_damage() {
            stop = true;
            break;
        }
        if waiting {
            // Every read given holds data no scan can hand out yet, and none is in flight:
            // the scans waiting could wait for ever.
            if reads.engine.in_flight() == 0 && reads.free.is_empty() {
                return Err(RecordingError::Usage(format!(
                    "the read of recording {} has no read left for a scan that waits: its \
                     marks' slots need more at once than the {} reads given",
                    entry.recording_id,
                    reads.engine.pool().slot_count()
                )));
            }
            reads.reap(&mut scans)?;
            continue;
        }
        match merge.step(&mut scans, &reads) {
            Step::On => {}
            Step::Stop => {
                stop = true;
                break;
            }
            Step::End => break,
        }
    }
    if !stop && control.state() == ControlState::Run {
        merge.missing_at_end();
    }
    // Let in-flight reads finish before the pool goes away (the engine's drop waits too).
    drop(reads);
    let mut summary = merge.summary;
    let elapsed = clock.since(started);
    let cpu_after = process_cpu_s();
    summary.elapsed_s = elapsed.as_secs_f64();
    summary.rate_mib_per_s = crate::unit::rate_mib_per_s(summary.payload_bytes, elapsed);
    summary.cpu_user_s = cpu_after.0 - cpu_before.0;
    summary.cpu_system_s = cpu_after.1 - cpu_before.1;
    Ok(summary)
}

/// A scan of each member of `set` over the slots `entry` holds there (none for a missing
/// member); a span or run that goes past the member is cut to it and reported.
fn member_scans(
    set: &VolumeSet,
    entry: &RecordingEntry,
    redirected: &Redirected,
    scope: &ScanScope,
    damages: &mut Vec<Damage>,
) -> Vec<Scan> {
    let ring = entry.flags.contains(RecordingFlags::RING);
    let redirected_sequences: Vec<u64> =
        redirected.headers().map(|header| header.sequence).collect();
    let mut scans: Vec<Scan> = Vec::new();
    for (index, member) in set.members.iter().enumerate() {
        let span = entry
            .members
            .get(index)
            .copied()
            .unwrap_or(MemberSpan::default());
        let slot_count = member.as_ref().map_or(0, |m| m.layout().data_slot_count);
        let (span, runs) = match member {
            None => (span, VecDeque::new()),
            Some(member) => {
                let span = clamp_span(set, index as u16, span, slot_count, damages);
                let kept_its_start = entry.state != RecordingState::Open
                    && entry.overwrote.get(index) == Some(&false);
                let mut runs = match scope {
                    ScanScope::Mark if span.start_slot_index == span.end_slot_index => {
                        VecDeque::new()
                    }
                    _ => slot_runs(member.layout().data_slot_count, span, ring, kept_its_start),
                };
                if let ScanScope::Recording { kept } = scope {
                    for range in kept.iter().filter(|range| range.member == index) {
                        runs = cut_out(&runs, range, slot_count);
                    }
                }
                cut_to_target(set, member, &mut runs, damages);
                (span, runs)
            }
        };
        let retirements = &entry.retirements;
        let ring_slots = (span.start_slot_index, span.end_slot_index);
        scans.push(Scan {
            exhausted: member.is_none(),
            void_from_slot: retirements
                .iter()
                .filter(|r| r.member_index as usize == index)
                .map(|r| r.retired_first_slot)
                .min(),
            redirected_sequences: if retirements.iter().any(|r| r.member_index as usize == index) {
                redirected_sequences.clone()
            } else {
                Vec::new()
            },
            redirects: retirements
                .iter()
                .filter(|r| r.redirect_member as usize == index)
                .copied()
                .collect(),
            ..Scan::new(index as u16, runs, slot_count, ring_slots)
        });
    }
    if let ScanScope::Recording { kept } = scope {
        let apart: Vec<Scan> = kept
            .iter()
            .filter(|range| set.members.get(range.member).is_some_and(|m| m.is_some()))
            .map(|range| kept_scan(set, entry, &scans[range.member], range))
            .collect();
        scans.extend(apart);
    }
    scans
}

/// A scan of the slots a mark keeps on a member, beside that member's scan of the rest of
/// its lap: its chunks are merged in by sequence, and are not the lap's oldest.
fn kept_scan(
    set: &VolumeSet,
    entry: &RecordingEntry,
    member_scan: &Scan,
    range: &super::marks::KeptRange,
) -> Scan {
    let runs: VecDeque<(u64, u64)> = range.runs(member_scan.slot_count).into();
    let asleep_until_sequence = match (range.stream_bytes, runs.front()) {
        (None, _) | (_, None) => None,
        (Some((u64::MAX, _)), _) => Some(u64::MAX),
        (Some(_), Some(&(first_slot, _))) => first_held(set, entry, range.member, first_slot),
    };
    Scan {
        kept_apart: true,
        asleep_until_sequence,
        exhausted: member_scan.exhausted,
        ..Scan::new(
            member_scan.member_index,
            runs,
            member_scan.slot_count,
            (member_scan.ring_start_slot, member_scan.ring_origin_slot),
        )
    }
}

/// The sequence of the chunk of `entry` in `slot` of `member` (a live recording's too):
/// where a mark's slots begin in the stream. None (read them from the start, as the
/// lap's) where the slot holds none that can be told.
fn first_held(set: &VolumeSet, entry: &RecordingEntry, member: usize, slot: u64) -> Option<u64> {
    let member = set.members.get(member)?.as_ref()?;
    let layout = member.layout();
    let offset = layout.data_slot_offset_bytes(slot)?;
    let bytes = volume::read_meta(&member.disk, offset, layout.meta_block_bytes).ok()?;
    let header = crate::layout::decode_chunk_header(&bytes).ok()?;
    let own = header.set_uuid == set.set_uuid
        && header.recording_id == entry.recording_id
        && header.member_index == member.index()
        && header.slot_index == slot
        && !header.flags.contains(ChunkFlags::REDIRECTED);
    own.then_some(header.sequence)
}

/// `runs` without the slots of `range` (in a member of `slots` slots).
fn cut_out(
    runs: &VecDeque<(u64, u64)>,
    range: &super::marks::KeptRange,
    slots: u64,
) -> VecDeque<(u64, u64)> {
    let holes: Vec<(u64, u64)> = range
        .runs(slots)
        .into_iter()
        .map(|(first, count)| (first, first + count))
        .collect();
    let mut out = VecDeque::new();
    for &(start, count) in runs {
        let mut pieces = vec![(start, start + count)];
        for &(hole_start, hole_end) in &holes {
            pieces = pieces
                .into_iter()
                .flat_map(|(a, b)| {
                    let mut left = Vec::new();
                    if a < hole_start.min(b) {
                        left.push((a, hole_start.min(b)));
                    }
                    if hole_end.max(a) < b {
                        left.push((hole_end.max(a), b));
                    }
                    left
                })
                .collect();
        }
        out.extend(pieces.into_iter().map(|(a, b)| (a, b - a)));
    }
    out
}

/// The sequence the merge expects first: the recording's first (a ring's is found as the
/// scans go), or, for a window from `from_ns`, where [`seek_window`] moved the scans to.
fn first_expected(
    set: &VolumeSet,
    entry: &RecordingEntry,
    scans: &mut [Scan],
    redirected: &Redirected,
    from_ns: Option<u64>,
) -> Option<u64> {
    let ring = entry.flags.contains(RecordingFlags::RING);
    let from_start = if ring {
        None
    } else {
        Some(entry.first_sequence)
    };
    let Some(from_ns) = from_ns else {
        return from_start;
    };
    // Redirected chunks are read ahead: the window may begin among them.
    let redirected_low = redirected
        .headers()
        .filter(|header| header.time_ns(entry.start_ns) >= from_ns)
        .map(|header| header.sequence)
        .min();
    seek_window(set, entry, scans, from_ns, redirected_low).or(from_start)
}

/// Wakes the marks' scans that the merge has reached, a mark at a time: those whose
/// chunks begin first, where that is at or before `next_sequence` (the chunk the merge
/// would hand out next), since one of theirs may come first; with nothing else to hand
/// out, those whose chunks begin first. Marks the merge has passed wake in turn, each read
/// and passed over before the next. Returns whether any woke (their heads are read before
/// the merge goes on).
fn wake_kept(scans: &mut [Scan], next_sequence: Option<u64>) -> bool {
    let Some(first) = scans
        .iter()
        .filter_map(|scan| scan.asleep_until_sequence)
        .min()
    else {
        return false;
    };
    if next_sequence.is_some_and(|next| next < first) {
        return false;
    }
    for scan in scans.iter_mut() {
        if scan.asleep_until_sequence == Some(first) {
            scan.asleep_until_sequence = None;
        }
    }
    true
}

/// A member's span of slots `start..end` (tests of the rooms).
#[cfg(test)]
fn span_of(start: u64, end: u64) -> MemberSpan {
    MemberSpan {
        start_slot_index: start,
        end_slot_index: end,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::device::{Access, Safety};
    use crate::engine::{IoOp, RangeFault, SimDisks};
    use crate::layout::{Checkpoint, MemberPosition, VolumeLayout};
    use crate::pattern::Pattern;
    use crate::recording::disk::Members;
    use crate::recording::writer::{self, RecordOptions};
    use crate::source::PatternSource;

    const DISK_BYTES: u64 = 40 << 20;
    const LOGICAL_BLOCK_BYTES: u32 = 512;
    const SEED: u64 = 7;

    /// One member holding one linear pattern recording of 16 MiB (over a hundred 128 KiB
    /// chunks, read 16 at a time): its image.
    fn recorded() -> Vec<u8> {
        let sim = SimDisks::new(1, DISK_BYTES, LOGICAL_BLOCK_BYTES, 1);
        let options = RecordOptions {
            limit_bytes: Some(16 << 20),
            buffer_bytes: 8 << 20,
            pattern: true,
            label: "read".into(),
            ..RecordOptions::default()
        };
        let mut source = PatternSource(Pattern::new(SEED));
        let control = Control::new();
        writer::record_on(
            Members::Sim(&sim),
            &mut source,
            &options,
            &control,
            &Progress::default(),
        )
        .unwrap();
        sim.crash();
        sim.power_cut_images().unwrap().remove(0)
    }

    /// What a read handed out.
    #[derive(Default)]
    struct Found {
        chunk_sequences: Vec<u64>,
        missing: Vec<(u64, u64)>,
        damages: Vec<Damage>,
    }

    fn open(sim: &SimDisks) -> (VolumeSet, RecordingEntry) {
        let set = volume::open_members(Members::Sim(sim), Access::Read, Safety::Check).unwrap();
        let entry = select(&recordings(&set).unwrap(), None).unwrap();
        (set, entry)
    }

    /// Reads `entry` as verify does: every payload checked against the pattern.
    fn read(set: &VolumeSet, entry: &RecordingEntry, control: &Control) -> Found {
        let pattern = Pattern::new(SEED);
        let mut found = Found::default();
        let mut each = |item: Item<'_>| {
            match item {
                Item::Chunk { header, payload } => {
                    pattern
                        .check(header.stream_offset_bytes, payload, 0)
                        .unwrap();
                    found.chunk_sequences.push(header.sequence);
                }
                Item::Missing {
                    first_sequence,
                    count,
                } => found.missing.push((first_sequence, count)),
                Item::Damage(damage) => found.damages.push(damage.clone()),
            }
            true
        };
        let progress = Progress::default();
        read_recording(
            set,
            entry,
            EngineChoice::Auto,
            control,
            &progress,
            &mut each,
        )
        .unwrap();
        found
    }

    fn chunk_count(entry: &RecordingEntry) -> u64 {
        entry.end_sequence - entry.first_sequence
    }

    /// Marks' scans wake a mark at a time, once the merge reaches the first of them; with
    /// nothing else left, the next.
    #[test]
    fn marks_scans_wake_in_turn_as_the_merge_reaches_them() {
        let scan = |asleep: Option<u64>| Scan {
            kept_apart: asleep.is_some(),
            asleep_until_sequence: asleep,
            ..Scan::new(0, VecDeque::from([(0, 8)]), 64, (0, 0))
        };
        let mut scans = [
            scan(None),
            scan(Some(100)),
            scan(Some(100)),
            scan(Some(200)),
        ];
        let asleep = |scans: &[Scan]| -> Vec<Option<u64>> {
            scans
                .iter()
                .map(|scan| scan.asleep_until_sequence)
                .collect()
        };
        assert!(!wake_kept(&mut scans, Some(50)));
        assert!(wake_kept(&mut scans, Some(150)));
        assert_eq!(asleep(&scans), [None, None, None, Some(200)]);
        assert!(!wake_kept(&mut scans, Some(150)));
        assert!(wake_kept(&mut scans, None));
        assert_eq!(asleep(&scans), [None; 4]);
        assert!(!wake_kept(&mut scans, None));
    }

    #[test]
    fn one_unreadable_chunk_in_a_large_read_costs_that_chunk_alone() {
        let sim = SimDisks::from_images(vec![recorded()], LOGICAL_BLOCK_BYTES, 1);
        let (set, entry) = open(&sim);
        let layout = *set.members[0].as_ref().unwrap().layout();
        // Slot 20 of the recording: inside the second 16-slot read.
        let slot = entry.members[0].start_slot_index + 20;
        let offset = layout.data_slot_offset_bytes(slot).unwrap();
        sim.fail(RangeFault {
            disk: 0,
            op: IoOp::Read,
            offset_bytes: offset + 4096,
            len_bytes: 4096,
            errno: libc::EIO,
        });
        let found = read(&set, &entry, &Control::new());
        let lost = entry.first_sequence + 20;
        assert_eq!(found.damages.len(), 1, "{:?}", found.damages);
        let damage = &found.damages[0];
        assert_eq!(damage.member_index, 0);
        assert_eq!(damage.member_path, "sim:0", "{damage:?}");
        assert_eq!(damage.slot_index, slot);
        assert_eq!(damage.offset_bytes, offset);
        assert_eq!(damage.sequence, Some(lost));
        assert!(damage.what.starts_with("read failed"), "{damage:?}");
        assert_eq!(found.missing, vec![(lost, 1)]);
        assert_eq!(found.chunk_sequences.len() as u64, chunk_count(&entry) - 1);
        assert!(!found.chunk_sequences.contains(&lost));
    }

    #[test]
    fn a_member_cut_short_loses_the_chunks_past_its_end_and_no_others() {
        let mut image = recorded();
        let sim = SimDisks::from_images(vec![image.clone()], LOGICAL_BLOCK_BYTES, 1);
        let (set, entry) = open(&sim);
        let layout = *set.members[0].as_ref().unwrap().layout();
        let start = entry.members[0].start_slot_index;
        // Cut in the middle of the recording's 70th chunk: a read over it comes back short.
        let cut = layout.data_slot_offset_bytes(start + 70).unwrap() + 65536;
        image.truncate(cut as usize);
        let sim = SimDisks::from_images(vec![image], LOGICAL_BLOCK_BYTES, 1);
        let (set, entry) = open(&sim);
        let found = read(&set, &entry, &Control::new());
        let total = chunk_count(&entry);
        assert_eq!(found.chunk_sequences.len(), 70);
        // The slots past the end are reported once, as one piece of damage, and not read.
        assert_eq!(found.damages.len(), 1, "{:?}", found.damages);
        let damage = &found.damages[0];
        assert_eq!(damage.slot_index, start + 70);
        assert!(
            damage.what.contains(&format!("{} slots", total - 70)),
            "{damage:?}"
        );
        assert!(
            damage.what.starts_with("the target ends at slot"),
            "{damage:?}"
        );
        assert_eq!(found.missing, vec![(entry.first_sequence + 70, total - 70)]);
    }

    #[test]
    fn a_ring_gone_round_past_its_newest_checkpoint_recovers_every_chunk_it_holds() {
        for trim in [false, true] {
            ring_gone_round_past_its_newest_checkpoint(trim);
        }
    }

    /// A ring recording (trimming ahead of its writes or not) whose newest checkpoint is
    /// older than a lap of its writes: recovered, it reads as it did when it was closed.
    fn ring_gone_round_past_its_newest_checkpoint(trim: bool) {
        // One member, 64 KiB chunks: a lap of 90 slots, gone round once and a half.
        let sim = SimDisks::new(1, 8 << 20, LOGICAL_BLOCK_BYTES, 1);
        let options = RecordOptions {
            chunk_size_bytes: 65536,
            limit_bytes: Some(8 << 20),
            buffer_bytes: 2 << 20,
            fill: crate::recording::Fill::Ring { trim },
            pattern: true,
            label: "ring".into(),
            ..RecordOptions::default()
        };
        let mut source = PatternSource(Pattern::new(SEED));
        let control = Control::new();
        writer::record_on(
            Members::Sim(&sim),
            &mut source,
            &options,
            &control,
            &Progress::default(),
        )
        .unwrap();
        let (set, closed) = open(&sim);
        let whole = read(&set, &closed, &control);
        assert!(whole.missing.is_empty() && whole.damages.is_empty());
        assert!(closed.overwrote[0], "the ring went round");
        // What a drive that acknowledged and lost every checkpoint after the recording's
        // first, and its closing entry, leaves: the newest checkpoint names the recording
        // open at its start, and the writer went round past that position, over chunks the
        // lost ones claimed.
        let member = set.members[0].as_ref().unwrap();
        let layout = *member.layout();
        let newest = set.newest_checkpoint().unwrap().unwrap();
        let stale = Checkpoint {
            generation: newest.generation + 1,
            recording_id: closed.recording_id,
            recording_first_sequence: closed.first_sequence,
            durable_sequence_end: closed.first_sequence,
            durable_stream_bytes: 0,
            durable_lost_bytes: 0,
            members: vec![MemberPosition {
                next_slot_index: closed.members[0].start_slot_index,
                lap: u64::from(closed.start_laps[0]),
            }],
            retirements: Vec::new(),
            ..newest
        };
        member
            .write_checkpoint(&stale.encode().unwrap(), stale.generation)
            .unwrap();
        let copy = (closed.revision % 2) as u32;
        let offset = layout.recording_entry_offset_bytes(0, copy).unwrap();
        volume::write_meta(&member.disk, offset, layout.meta_block_bytes, &[0u8; 4096]).unwrap();
        let (set, entry) = open(&sim);
        assert_eq!(entry.revision, closed.revision - 1, "the entry as it began");
        assert_eq!(entry.state, RecordingState::Closed, "its end marker found");
        assert_eq!(entry.end_sequence, closed.end_sequence);
        assert_eq!(entry.stream_len_bytes, closed.stream_len_bytes);
        // (Trimmed, the slots after its last chunk are blank: recovery puts the write point
        // past them, where the older chunks it keeps begin.)
        if !trim {
            assert_eq!(entry.members, closed.members);
        }
        assert_eq!(entry.overwrote, closed.overwrote);
        let recovered = read(&set, &entry, &control);
        assert!(recovered.missing.is_empty(), "{:?}", recovered.missing);
        assert!(recovered.damages.is_empty(), "{:?}", recovered.damages);
        assert_eq!(recovered.chunk_sequences, whole.chunk_sequences);
    }

    /// Writes `entry` as its next revision, with a valid CRC, into `image`.
    fn rewrite_entry(image: &mut [u8], layout: &VolumeLayout, entry: &RecordingEntry) {
        let mut entry = entry.clone();
        entry.revision += 1;
        let slot = (entry.recording_id - 1) % layout.recording_slot_count;
        let copy = (entry.revision % 2) as u32;
        let offset = layout.recording_entry_offset_bytes(slot, copy).unwrap() as usize;
        let bytes = entry.encode().unwrap();
        image[offset..offset + bytes.len()].copy_from_slice(&bytes);
    }

    #[test]
    fn a_span_past_the_member_is_reported_and_read_only_as_far_as_the_member_goes() {
        let mut image = recorded();
        let sim = SimDisks::from_images(vec![image.clone()], LOGICAL_BLOCK_BYTES, 1);
        let (set, mut entry) = open(&sim);
        let layout = *set.members[0].as_ref().unwrap().layout();
        entry.members[0].end_slot_index = 1 << 40;
        rewrite_entry(&mut image, &layout, &entry);
        let sim = SimDisks::from_images(vec![image], LOGICAL_BLOCK_BYTES, 1);
        let (set, read_back) = open(&sim);
        assert_eq!(read_back.members[0].end_slot_index, 1 << 40);
        let found = read(&set, &read_back, &Control::new());
        assert_eq!(found.chunk_sequences.len() as u64, chunk_count(&entry));
        assert!(found.missing.is_empty());
        let span = &found.damages[0];
        assert!(span.what.contains("goes past its"), "{span:?}");
        assert_eq!(span.slot_index, 1 << 40);
        // The slots after the recording, to the member's last, are what the span claims.
        let claimed = layout.data_slot_count - entry.members[0].start_slot_index;
        assert_eq!(
            found.damages.len() as u64,
            1 + claimed - chunk_count(&entry),
            "{:?}",
            &found.damages[..3]
        );
        // A stop ends the read before any of it.
        let control = Control::new();
        control.request_stop();
        let stopped = read(&set, &read_back, &control);
        assert!(stopped.chunk_sequences.is_empty());
    }
}
