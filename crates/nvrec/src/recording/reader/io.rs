//! The reads that feed the members' scans: an engine over the present members with a
//! buffer for each read that may be in flight, the slots each scan reads in order, and a
//! failed read's slots read again one by one so that an unreadable slot costs that slot
//! alone.

use super::scan::Scan;
use super::{ScanScope, KEPT_SCAN_QUEUE_DEPTH, SCAN_QUEUE_DEPTH, SCAN_SLOTS_PER_READ};
use crate::buffer::BufferPool;
use crate::engine::{EngineChoice, EngineConfig, IoCompletion, IoError, IoOp, IoRequest};
use crate::layout::MemberSpan;
use crate::recording::disk;
use crate::recording::volume::{self, VolumeSet};
use crate::recording::RecordingError;
use std::collections::VecDeque;

pub(super) struct ReadFlight {
    pub(super) buffer: u32,
    pub(super) first_slot: u64,
    pub(super) slot_count: u64,
    pub(super) failed: Option<IoError>,
    /// After the read failed, each of its slots read again on its own: its bytes, or why
    /// it cannot be read. Empty until then.
    pub(super) reread: Vec<Result<Vec<u8>, SlotUnreadable>>,
}

/// Why a slot of a member could not be read.
#[derive(Debug, Clone, thiserror::Error)]
pub enum SlotUnreadable {
    /// The read that took it failed (and it was not read again on its own yet).
    #[error(transparent)]
    Read(IoError),
    /// Read again on its own, it failed.
    #[error(transparent)]
    Reread(std::sync::Arc<RecordingError>),
    /// The member ends inside it (a target shorter than its layout).
    #[error("short read: {} ends inside this slot", .0.display())]
    Short(std::path::PathBuf),
    #[error("slot {0} is outside the data area")]
    OutsideDataArea(u64),
}

/// The reads that feed the members' scans: the engine over the present members, its free
/// buffers (one read of [`SCAN_SLOTS_PER_READ`] slots each) and which engine file each
/// member is.
pub(super) struct ScanReads {
    pub(super) engine: Box<dyn crate::engine::Engine>,
    pub(super) free: Vec<u32>,
    /// Engine file indices follow the present members: the file index of each member.
    pub(super) file_of_member: Vec<u16>,
    pub(super) completions: Vec<IoCompletion>,
    pub(super) chunk_bytes: u64,
}

impl ScanReads {
    /// Opens an engine over the present members of `set`, with `read_count` reads: as many
    /// as the scans may have in flight (see [`Scan::queue_depth`]), and never fewer than
    /// [`SCAN_QUEUE_DEPTH`] a member.
    pub(super) fn open(
        set: &VolumeSet,
        engine_choice: EngineChoice,
        read_count: usize,
    ) -> Result<ScanReads, RecordingError> {
        let chunk_bytes = set.chunk_size_bytes as u64;
        let member_count = set.member_count();
        let buffer_count = read_count
            .max(SCAN_QUEUE_DEPTH as usize * member_count)
            .max(2);
        let pool = BufferPool::new(buffer_count, (SCAN_SLOTS_PER_READ * chunk_bytes) as usize)?;
        let disks: Vec<&disk::Disk> = set.present().map(|m| &m.disk).collect();
        let mut file_of_member = vec![u16::MAX; member_count];
        for (file_index, member) in set.present().enumerate() {
            file_of_member[member.index() as usize] = file_index as u16;
        }
        let opened = disk::open_engine(
            &disks,
            engine_choice,
            pool,
            EngineConfig {
                queue_depth: buffer_count as u32,
                sqpoll: false,
                caller_may_block: false,
            },
        )?;
        Ok(ScanReads {
            engine: opened.engine,
            free: (0..buffer_count as u32).rev().collect(),
            file_of_member,
            completions: Vec::with_capacity(buffer_count),
            chunk_bytes,
        })
    }

    /// Keeps reads in flight on every member's scan. Returns the bytes asked for.
    pub(super) fn fill(&mut self, set: &VolumeSet, scans: &mut [Scan]) -> u64 {
        let chunk_bytes = self.chunk_bytes;
        let mut read_bytes = 0;
        for (scan_index, scan) in scans.iter_mut().enumerate() {
            if scan.asleep_until_sequence.is_some() {
                continue;
            }
            while scan.flights.len() < scan.queue_depth() as usize {
                let Some(&(first, count)) = scan.runs.front() else {
                    break;
                };
                let Some(buffer) = self.free.pop() else { break };
                let take = count.min(SCAN_SLOTS_PER_READ);
                let member = set.members[scan.member_index as usize]
                    .as_ref()
                    .expect("scans only present members");
                let offset_bytes = member.layout().data_slot_offset_bytes(first).unwrap_or(0);
                let number = scan.flights.push(ReadFlight {
                    buffer,
                    first_slot: first,
                    slot_count: take,
                    failed: None,
                    reread: Vec::new(),
                });
                let user_data = ((scan_index as u64) << 48) | (number & ((1 << 48) - 1));
                // SAFETY: `buffer` was taken from the free buffers for this read and is looked at
                // and freed only after its completion.
                unsafe {
                    self.engine.push(IoRequest {
                        op: IoOp::Read,
                        file_index: self.file_of_member[scan.member_index as usize],
                        slot: buffer,
                        slot_offset_bytes: 0,
                        offset_bytes,
                        len_bytes: (take * chunk_bytes) as u32,
                        user_data,
                    });
                }
                read_bytes += take * chunk_bytes;
                if take == count {
                    scan.runs.pop_front();
                } else {
                    scan.runs[0] = (first + take, count - take);
                }
            }
        }
        read_bytes
    }

    /// Waits for a read to complete and marks the reads that did in their scans.
    pub(super) fn reap(&mut self, scans: &mut [Scan]) -> Result<(), RecordingError> {
        self.engine.submit_and_reap(1, &mut self.completions)?;
        for completion in self.completions.drain(..) {
            let scan_index = (completion.user_data >> 48) as usize;
            let number = completion.user_data & ((1 << 48) - 1);
            if let Some(flight) = scans[scan_index].flights.complete(number) {
                if let Err(error) = completion.result {
                    flight.failed = Some(error);
                }
            }
        }
        Ok(())
    }
}

/// Reads a read of `scans` needs at once: each awake scan with slots to read as many as it
/// may have in flight, and for the marks' scans asleep, room for as many as are awake at
/// once as the merge goes (their windows overlapping in the stream), one each, one for the
/// marks of earlier recordings, which wake one at a time at the end, and one a member to
/// spare (a mark widened over a retired member's redirected writes reads on past its
/// window).
pub(super) fn read_count(scans: &[Scan], scope: &ScanScope) -> usize {
    let awake: usize = scans
        .iter()
        .filter(|scan| !scan.runs.is_empty() && scan.asleep_until_sequence.is_none())
        .map(|scan| scan.queue_depth() as usize)
        .sum();
    let ScanScope::Recording { kept } = scope else {
        return awake;
    };
    let windows: Vec<(u64, u64)> = kept
        .iter()
        .filter_map(|range| range.stream_bytes)
        .filter(|&(from, _)| from != u64::MAX)
        .collect();
    let asleep = scans
        .iter()
        .filter(|scan| !scan.runs.is_empty() && scan.asleep_until_sequence.is_some())
        .count();
    let members = scans.iter().filter(|scan| !scan.kept_apart).count();
    let at_once = most_overlapping(&windows) + usize::from(asleep > windows.len()) + members;
    awake + at_once.min(asleep) * KEPT_SCAN_QUEUE_DEPTH as usize
}

/// The most of `windows` (from, end: both ends counted) that any one offset lies in.
pub(super) fn most_overlapping(windows: &[(u64, u64)]) -> usize {
    let mut edges: Vec<(u64, bool)> = windows
        .iter()
        .flat_map(|&(from, end)| [(from, true), (end, false)])
        .collect();
    // At one offset, windows begin before others end: both ends count.
    edges.sort_unstable_by_key(|&(offset, begins)| (offset, !begins));
    let (mut now, mut most) = (0usize, 0usize);
    for (_, begins) in edges {
        match begins {
            true => {
                now += 1;
                most = most.max(now);
            }
            false => now -= 1,
        }
    }
    most
}

/// The slots a member of `slots` data slots has its scan read, in order. A ring member that did not go round over
/// its own start (`kept_its_start`, as a closed entry says) holds the recording from its
/// start slot to its end slot in lap order, and only those are read (a ring that reclaims
/// the space of a set's oldest recordings is one: see `retention.rs`); others are read a
/// whole lap round from the end.
pub(super) fn slot_runs(
    slots: u64,
    span: MemberSpan,
    ring: bool,
    kept_its_start: bool,
) -> VecDeque<(u64, u64)> {
    let mut runs = VecDeque::new();
    let (start, end) = (span.start_slot_index, span.end_slot_index);
    if ring && kept_its_start && start != end && start < slots && end <= slots {
        if end > start {
            runs.push_back((start, end - start));
        } else {
            runs.push_back((start, slots - start));
            if end > 0 {
                runs.push_back((0, end));
            }
        }
    } else if ring {
        // One whole lap, oldest first: from the end position round to it.
        let end = span.end_slot_index.min(slots);
        if end < slots {
            runs.push_back((end, slots - end));
        }
        if end > 0 {
            runs.push_back((0, end));
        }
    } else if span.end_slot_index > span.start_slot_index {
        runs.push_back((
            span.start_slot_index,
            span.end_slot_index - span.start_slot_index,
        ));
    }
    runs
}

/// Reads each slot of a failed read on its own, so that an unreadable slot costs that
/// slot and no more (the read that failed covered several).
pub(super) fn reread_slots(
    set: &VolumeSet,
    member_index: u16,
    flight: &mut ReadFlight,
    chunk_bytes: u64,
) {
    let member = set.members[member_index as usize]
        .as_ref()
        .expect("scans read only present members");
    flight.reread = (flight.first_slot..flight.first_slot + flight.slot_count)
        .map(|slot| {
            let offset = member
                .layout()
                .data_slot_offset_bytes(slot)
                .ok_or(SlotUnreadable::OutsideDataArea(slot))?;
            volume::read_aligned(&member.disk, offset, chunk_bytes as usize).map_err(|error| {
                match error {
                    RecordingError::Io { source, .. }
                        if source.kind() == std::io::ErrorKind::UnexpectedEof =>
                    {
                        SlotUnreadable::Short(member.disk.path().to_path_buf())
                    }
                    error => SlotUnreadable::Reread(std::sync::Arc::new(error)),
                }
            })
        })
        .collect();
}

/// The bytes of slot `within` of a completed read: from the pool, or, after the read
/// failed, from the slot's own read; why not where that failed too.
pub(super) fn flight_slot<'a>(
    pool: &'a BufferPool,
    flight: &'a ReadFlight,
    within: u64,
    chunk_bytes: u64,
) -> Result<&'a [u8], SlotUnreadable> {
    let Some(failed) = flight.failed else {
        let start = (within * chunk_bytes) as usize;
        return Ok(&pool.slot(flight.buffer as usize)[start..start + chunk_bytes as usize]);
    };
    match flight.reread.get(within as usize) {
        Some(Ok(bytes)) => Ok(bytes),
        Some(Err(error)) => Err(error.clone()),
        None => Err(SlotUnreadable::Read(failed)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    use super::super::span_of as span;

    fn runs(slots: u64, span: MemberSpan, ring: bool, kept_its_start: bool) -> Vec<(u64, u64)> {
        slot_runs(slots, span, ring, kept_its_start).into()
    }

    #[test]
    fn a_scan_reads_its_span_or_a_ring_lap_oldest_first() {
        // Linear: the span, or nothing where it is empty.
        assert_eq!(runs(100, span(10, 40), false, false), [(10, 30)]);
        assert_eq!(runs(100, span(40, 40), false, false), []);
        // A ring that went round: a whole lap from the end position round to it.
        assert_eq!(runs(100, span(10, 40), true, false), [(40, 60), (0, 40)]);
        assert_eq!(runs(100, span(10, 0), true, false), [(0, 100)]);
        assert_eq!(runs(100, span(10, 100), true, false), [(0, 100)]);
        // A ring that kept its start: from the start to the end, in lap order.
        assert_eq!(runs(100, span(10, 40), true, true), [(10, 30)]);
        assert_eq!(runs(100, span(80, 20), true, true), [(80, 20), (0, 20)]);
        assert_eq!(runs(100, span(80, 0), true, true), [(80, 20)]);
        // A span past the member is read as a lap, never past the member.
        assert_eq!(runs(100, span(10, 500), true, true), [(0, 100)]);
    }

    #[test]
    fn windows_that_meet_at_an_offset_are_open_there_at_once() {
        assert_eq!(most_overlapping(&[(0, 10), (10, 20), (30, 40)]), 2);
        assert_eq!(most_overlapping(&[(0, 10), (2, 4), (3, 5), (11, 12)]), 3);
        assert_eq!(most_overlapping(&[]), 0);
    }

    #[test]
    fn a_failed_reads_slots_are_their_own_reads_or_the_reads_error() {
        let pool = BufferPool::new(1, 8192).unwrap();
        let error = IoError {
            op: IoOp::Read,
            offset_bytes: 7 * 4096,
            len_bytes: 2 * 4096,
            kind: crate::engine::IoErrorKind::Os,
            errno: libc::EIO,
        };
        let mut flight = ReadFlight {
            buffer: 0,
            first_slot: 7,
            slot_count: 2,
            failed: None,
            reread: Vec::new(),
        };
        assert_eq!(flight_slot(&pool, &flight, 1, 4096).unwrap().len(), 4096);
        flight.failed = Some(error);
        assert!(matches!(
            flight_slot(&pool, &flight, 0, 4096),
            Err(SlotUnreadable::Read(_))
        ));
        flight.reread = vec![Ok(vec![1; 4096]), Err(SlotUnreadable::OutsideDataArea(8))];
        assert_eq!(
            flight_slot(&pool, &flight, 0, 4096).unwrap(),
            &[1; 4096][..]
        );
        assert!(matches!(
            flight_slot(&pool, &flight, 1, 4096),
            Err(SlotUnreadable::OutsideDataArea(8))
        ));
    }
}
