//! Retention: a set that reuses the space of its oldest whole recordings.
//!
//! A recording made with a [`Retention`] policy goes on past the end of the data area at
//! slot 0, into the space of the set's oldest recordings, as a ring that never overwrites
//! itself. Before its first write reaches a recording, that recording is *reclaimed*: its
//! entry gets the next revision, flagged `RECLAIMED` with when and why (format 1.6), on
//! every member, flushed. Only then does the writer go on into its slots. So a recording
//! is either whole or listed as reclaimed, never silently short, whatever a crash cuts.
//!
//! Recordings go oldest first (the set's space is used in the order it was written, so
//! the oldest is the next ahead); a recording that may not go (an archive does not hold
//! it, or a reader has it open) stops the writer there, which then waits or ends full.
//! With `keep`, recordings that ended longer ago than that are reclaimed when a recording
//! starts (cause `age`), whether their space is needed or not.
//!
//! Readers hold a shared lock ([`ReadLock`], an open file description lock on a byte of
//! each member named by the recording's table slot) while they read; reclaiming takes it
//! exclusively and gives up if it cannot. This module decides and writes metadata; the
//! writer's placement ([`super::writer`]) keeps to the limits it computes.

use super::volume::VolumeSet;
use super::RecordingError;
use crate::layout::{Reclaim, ReclaimCause, RecordingEntry, RecordingFlags, RecordingState};
use std::os::fd::AsRawFd;
use std::sync::Arc;
use std::time::Duration;

/// Whether an archive holds a recording whole: what `--reclaim archived` asks before it
/// reclaims one. The library knows no archive; the application layer answers.
pub trait ArchiveCheck: Send + Sync {
    /// `Ok(true)` only when the archive holds every byte the entry claims, checked; an
    /// error when the archive could not be asked.
    fn holds(&self, entry: &RecordingEntry) -> Result<bool, ArchiveUnanswered>;
}

/// Why an archive could not say whether it holds a recording (the archive's own error).
pub type ArchiveUnanswered = Box<dyn std::error::Error + Send + Sync>;

/// Which recordings may give their space when a recording needs it.
#[derive(Clone)]
pub enum ReclaimPolicy {
    /// The oldest, whatever they are.
    Oldest,
    /// The oldest, once the archive holds them.
    Archived(Arc<dyn ArchiveCheck>),
    /// The caller checked its archive itself (`archive --delete-after-verify`).
    Verified,
}

impl std::fmt::Debug for ReclaimPolicy {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ReclaimPolicy::Oldest => f.write_str("Oldest"),
            ReclaimPolicy::Archived(_) => f.write_str("Archived"),
            ReclaimPolicy::Verified => f.write_str("Verified"),
        }
    }
}

/// A recording's retention: what it may reclaim for room, and how long recordings are kept.
#[derive(Debug, Clone, Default)]
pub struct Retention {
    pub reclaim: Option<ReclaimPolicy>,
    pub keep: Option<Duration>,
}

/// One recording reclaimed, for the report.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Reclaimed {
    pub recording_id: u32,
    pub name: String,
    pub stream_len_bytes: u64,
    pub cause: &'static str,
    pub archived: bool,
    pub reclaimed_ns: u64,
}

/// What stopped a reclaim.
#[derive(Debug)]
pub enum Refusal {
    /// A reader holds the recording: try again later.
    BeingRead,
    /// The policy keeps it, with the reason.
    Kept(Kept),
}

/// Why a policy keeps a recording that a reclaim asked for.
#[derive(Debug, Clone, thiserror::Error)]
pub enum Kept {
    #[error("the archive does not hold it")]
    NotArchived,
    #[error("the archive could not be asked: {0}")]
    ArchiveUnanswered(Arc<dyn std::error::Error + Send + Sync>),
}

/// Why the set's oldest recording was not reclaimed when a recording needed room, as its
/// report gives it.
#[derive(Debug, Clone, thiserror::Error)]
pub enum ReclaimRefused {
    #[error("recording {recording_id} was not reclaimed: {why}")]
    Kept { recording_id: u32, why: Kept },
    /// The oldest is a kept mark: the set is full up to it.
    #[error(transparent)]
    Mark(#[from] super::marks::ReleaseHint),
}

/// Whether an entry still holds its data: ended, not reclaimed.
pub fn holds_data(entry: &RecordingEntry) -> bool {
    entry.state != RecordingState::Open && !entry.flags.contains(RecordingFlags::RECLAIMED)
}

/// Marks `entry` reclaimed for `cause` on every member of `live`, flushed, unless a reader
/// holds it or `policy` keeps it. Returns the entry as written.
pub fn reclaim(
    set: &VolumeSet,
    entry: &RecordingEntry,
    cause: ReclaimCause,
    policy: Option<&ReclaimPolicy>,
    live: &[bool],
) -> Result<Result<RecordingEntry, Refusal>, RecordingError> {
    let Some(_lock) = ReadLock::take(set, entry.recording_id, Lock::Exclusive)? else {
        return Ok(Err(Refusal::BeingRead));
    };
    let archived = match policy {
        Some(ReclaimPolicy::Archived(check)) => match check.holds(entry) {
            Ok(true) => true,
            Ok(false) => return Ok(Err(Refusal::Kept(Kept::NotArchived))),
            Err(error) => return Ok(Err(Refusal::Kept(Kept::ArchiveUnanswered(error.into())))),
        },
        Some(ReclaimPolicy::Verified) => true,
        Some(ReclaimPolicy::Oldest) | None => false,
    };
    let next = RecordingEntry {
        revision: entry.revision + 1,
        flags: entry.flags | RecordingFlags::RECLAIMED,
        reclaimed: Some(Reclaim {
            reclaimed_ns: set.clock().wall_ns(),
            cause,
            archived,
        }),
        ..entry.clone()
    };
    set.write_entry_on(&next, live)?;
    Ok(Ok(next))
}

/// Reclaims, oldest first, the recordings of `entries` that ended more than `keep` before
/// `now_ns` and that `policy` lets go (an archive policy keeps what its archive does not
/// hold, however old). A recording a reader holds is left for a later start.
pub fn reclaim_aged(
    set: &VolumeSet,
    entries: &mut [RecordingEntry],
    keep: Duration,
    now_ns: u64,
    policy: Option<&ReclaimPolicy>,
) -> Result<Vec<Reclaimed>, RecordingError> {
    let before_ns = now_ns.saturating_sub(keep.as_nanos().min(u64::MAX as u128) as u64);
    let mut done = Vec::new();
    for entry in entries.iter_mut() {
        if !holds_data(entry) || entry.end_ns == 0 || entry.end_ns >= before_ns {
            continue;
        }
        if let Ok(next) = reclaim(set, entry, ReclaimCause::Age, policy, &[])? {
            done.push(report_of(&next));
            *entry = next;
        }
    }
    Ok(done)
}

/// The report line of a reclaimed entry.
pub fn report_of(entry: &RecordingEntry) -> Reclaimed {
    let reclaim = entry.reclaimed.unwrap_or(Reclaim {
        reclaimed_ns: 0,
        cause: ReclaimCause::Space,
        archived: false,
    });
    Reclaimed {
        recording_id: entry.recording_id,
        name: entry.name.as_str().to_string(),
        stream_len_bytes: entry.stream_len_bytes,
        cause: reclaim.cause.as_str(),
        archived: reclaim.archived,
        reclaimed_ns: reclaim.reclaimed_ns,
    }
}

/// Tries to take a lock this often before a reader gives up on a reclaim in progress (the
/// reclaim holds it for one metadata write and flush).
const READ_LOCK_TRIES: u32 = 200;

/// Locks recording `entry` for reading, and fails if it was reclaimed (whatever the caller's
/// copy of its entry says): held, the lock keeps it from being reclaimed until dropped.
pub fn reading(set: &VolumeSet, entry: &RecordingEntry) -> Result<ReadLock, RecordingError> {
    let id = entry.recording_id;
    let mut tries = 0;
    let lock = loop {
        if let Some(lock) = ReadLock::take(set, id, Lock::Shared)? {
            break lock;
        }
        tries += 1;
        if tries >= READ_LOCK_TRIES {
            return Err(RecordingError::Usage(format!(
                "recording {id} is being reclaimed by a recording on its set"
            )));
        }
        std::thread::sleep(Duration::from_millis(10));
    };
    let current = set.entry(id);
    if let Some(reclaim) = current.as_ref().unwrap_or(entry).reclaimed {
        return Err(reclaimed_error(id, &reclaim));
    }
    Ok(lock)
}

/// The error a read of a reclaimed recording fails with.
pub fn reclaimed_error(recording_id: u32, reclaim: &Reclaim) -> RecordingError {
    RecordingError::Reclaimed {
        recording_id,
        cause: match reclaim.cause {
            ReclaimCause::Space => "its space was needed",
            ReclaimCause::Age => "older than the set keeps",
            ReclaimCause::Freed => "its space was given back once its archive was verified",
            ReclaimCause::Released => "the mark was released",
        },
        archived: if reclaim.archived {
            ", held by its archive"
        } else {
            ""
        },
        when: crate::unit::format_rfc3339_ns(reclaim.reclaimed_ns),
    }
}

/// Slots from `write_slot` on, in the order a lap of `lap_slots` goes round, before the
/// first slot of member `member` that a recording of `entries` holding data still needs.
/// `lap_slots` when none does.
pub fn room_slots(
    entries: &[RecordingEntry],
    member: usize,
    write_slot: u64,
    lap_slots: u64,
) -> u64 {
    let lap = lap_slots.max(1);
    let from = if write_slot >= lap { 0 } else { write_slot };
    entries
        .iter()
        .filter(|entry| holds_data(entry))
        .filter_map(|entry| room_before(entry, member, from, lap))
        .min()
        .unwrap_or(lap)
}

/// Slots from `from` on before `entry`'s data on `member`, if it has any within the lap.
fn room_before(entry: &RecordingEntry, member: usize, from: u64, lap: u64) -> Option<u64> {
    let span = entry.members.get(member)?;
    let ring = entry.flags.contains(RecordingFlags::RING);
    let wrapped_over_itself = ring && entry.overwrote.get(member) == Some(&true);
    // Where its data begins in lap order, and how many slots it takes.
    let (first, length) = if wrapped_over_itself {
        (span.end_slot_index, lap)
    } else if ring && span.end_slot_index < span.start_slot_index {
        let length = lap.saturating_sub(span.start_slot_index) + span.end_slot_index;
        (span.start_slot_index, length)
    } else {
        (
            span.start_slot_index,
            span.end_slot_index.saturating_sub(span.start_slot_index),
        )
    };
    if length == 0 {
        return None;
    }
    // A span past the end of this lap is never reached (unless it wraps to slot 0).
    let (first, length) = if first >= lap {
        let wraps = ring && span.end_slot_index < span.start_slot_index;
        if !wraps || span.end_slot_index == 0 {
            return None;
        }
        (0, span.end_slot_index.min(lap))
    } else {
        (first, length)
    };
    let ahead = (first + lap - from) % lap;
    // The write point inside its data: no room at all.
    let behind = (from + lap - first) % lap;
    if behind < length && ahead != 0 {
        return Some(0);
    }
    Some(ahead)
}

/// How a [`ReadLock`] is held.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Lock {
    /// A reader: many may hold it together.
    Shared,
    /// Reclaiming: no reader may hold it.
    Exclusive,
}

/// A lock on one recording of a set, on every present member: readers share it, a
/// reclaim takes it alone. Open file description locks (`F_OFD_SETLK`) on one byte, at the
/// offset of the recording's table slot, which no data write touches and no lock of
/// another recording shares. Released when dropped. Simulated members take no lock.
pub struct ReadLock {
    fds: Vec<(i32, u64)>,
}

impl ReadLock {
    /// Takes the lock on recording `id`, or `None` when another holds it the other way.
    pub fn take(set: &VolumeSet, id: u32, lock: Lock) -> Result<Option<ReadLock>, RecordingError> {
        let mut taken = ReadLock { fds: Vec::new() };
        for member in set.present() {
            let Some(file) = member.disk.file() else {
                continue;
            };
            let layout = member.layout();
            let offset = layout
                .recording_slot_for_id(id)
                .and_then(|slot| layout.recording_entry_offset_bytes(slot, 0))
                .unwrap_or(0);
            let fd = file.as_raw_fd();
            match set_lock(fd, offset, lock_type(lock)) {
                Ok(()) => taken.fds.push((fd, offset)),
                Err(error) if error.raw_os_error() == Some(libc::EAGAIN) => return Ok(None),
                Err(error) if error.raw_os_error() == Some(libc::EACCES) => return Ok(None),
                Err(source) => {
                    return Err(RecordingError::Io {
                        what: format!("locking recording {id} on {}", member.disk.path().display()),
                        source,
                    })
                }
            }
        }
        Ok(Some(taken))
    }
}

impl Drop for ReadLock {
    fn drop(&mut self) {
        for &(fd, offset) in &self.fds {
            let _ = set_lock(fd, offset, libc::F_UNLCK as i16);
        }
    }
}

fn lock_type(lock: Lock) -> i16 {
    match lock {
        Lock::Shared => libc::F_RDLCK as i16,
        Lock::Exclusive => libc::F_WRLCK as i16,
    }
}

/// One byte at `offset`, locked (or unlocked) without waiting.
fn set_lock(fd: i32, offset: u64, kind: i16) -> std::io::Result<()> {
    // SAFETY: a zeroed flock is a valid value of the plain C struct; every field F_OFD_SETLK
    // reads is set below (l_pid must be 0 for OFD locks).
    let mut range: libc::flock = unsafe { std::mem::zeroed() };
    range.l_type = kind;
    range.l_whence = libc::SEEK_SET as i16;
    range.l_start = offset as libc::off_t;
    range.l_len = 1;
    // SAFETY: fcntl reads the struct we own for the length of the call; `fd` is open (the
    // set owns the file while the lock lives).
    let status = unsafe { libc::fcntl(fd, libc::F_OFD_SETLK, &range) };
    if status == 0 {
        Ok(())
    } else {
        Err(std::io::Error::last_os_error())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::layout::{Label, MemberSpan, Uuid};

    fn entry_with_spans(id: u32, flags: RecordingFlags, spans: &[(u64, u64)]) -> RecordingEntry {
        RecordingEntry {
            set_uuid: Uuid::from_random_bytes([7; 16]),
            recording_id: id,
            revision: 2,
            state: RecordingState::Closed,
            flags,
            first_sequence: 0,
            end_sequence: 0,
            start_ns: 1,
            end_ns: 2,
            stream_len_bytes: 0,
            lost_bytes: 0,
            name: Label::new("").expect("a label"),
            members: spans
                .iter()
                .map(|&(start_slot_index, end_slot_index)| MemberSpan {
                    start_slot_index,
                    end_slot_index,
                })
                .collect(),
            retirements: Vec::new(),
            start_laps: Vec::new(),
            overwrote: Vec::new(),
            signal: None,
            reclaimed: None,
            mark_of: None,
        }
    }

    const LAP: u64 = 1000;

    fn linear(id: u32, start: u64, end: u64) -> RecordingEntry {
        entry_with_spans(id, RecordingFlags::empty(), &[(start, end)])
    }

    fn ring(id: u32, start: u64, end: u64, overwrote: bool) -> RecordingEntry {
        let mut entry = entry_with_spans(
            id,
            RecordingFlags::RING | RecordingFlags::LAPS,
            &[(start, end)],
        );
        entry.start_laps = vec![0];
        entry.overwrote = vec![overwrote];
        entry
    }

    #[test]
    fn room_ends_where_the_oldest_data_ahead_begins() {
        // The set wrapped: recordings 2 and 3 lie ahead of the write point at 900.
        let entries = [linear(2, 100, 400), linear(3, 400, 900)];
        assert_eq!(room_slots(&entries, 0, 900, LAP), 200);
        // Recording 2 reclaimed: room up to recording 3.
        let mut reclaimed = entries.clone();
        reclaimed[0].flags |= RecordingFlags::RECLAIMED;
        reclaimed[0].reclaimed = Some(Reclaim {
            reclaimed_ns: 1,
            cause: ReclaimCause::Space,
            archived: false,
        });
        assert_eq!(room_slots(&reclaimed, 0, 900, LAP), 500);
        // Nothing ahead at all: a whole lap.
        assert_eq!(room_slots(&[], 0, 900, LAP), LAP);
        // A write point past the lap's end goes on at slot 0.
        assert_eq!(room_slots(&entries, 0, 1003, LAP), 100);
    }

    #[test]
    fn a_write_point_inside_data_it_may_not_overwrite_has_no_room() {
        assert_eq!(room_slots(&[linear(2, 100, 400)], 0, 250, LAP), 0);
        assert_eq!(room_slots(&[linear(2, 100, 400)], 0, 100, LAP), 0);
        assert_eq!(room_slots(&[linear(2, 100, 400)], 0, 400, LAP), 700);
    }

    #[test]
    fn a_ring_that_wrapped_over_itself_holds_the_whole_lap_from_its_end() {
        // Wherever the write point is, it is inside such a ring's data: no room at all.
        assert_eq!(room_slots(&[ring(1, 0, 300, true)], 0, 300, LAP), 0);
        assert_eq!(room_slots(&[ring(1, 0, 300, true)], 0, 200, LAP), 0);
        // One that wrapped at the lap's end but not over its own start holds start..end.
        let wrapped_once = ring(4, 800, 200, false);
        assert_eq!(
            room_slots(std::slice::from_ref(&wrapped_once), 0, 200, LAP),
            600
        );
        assert_eq!(
            room_slots(std::slice::from_ref(&wrapped_once), 0, 900, LAP),
            0
        );
    }

    #[test]
    fn data_past_the_end_of_the_lap_is_never_reached_and_empty_spans_hold_nothing() {
        assert_eq!(room_slots(&[linear(2, 1000, 1020)], 0, 10, LAP), LAP);
        assert_eq!(room_slots(&[linear(2, 50, 50)], 0, 10, LAP), LAP);
        // An open entry (the recording being written) is not in the way either.
        let mut open = linear(5, 20, 20);
        open.state = RecordingState::Open;
        assert_eq!(room_slots(&[open], 0, 10, LAP), LAP);
    }
}
