//! Retention (format 1.6): recordings added to a set with a reclaim policy go on into the
//! space of its oldest recordings, which are reclaimed first, oldest first, and stay listed
//! as reclaimed; every recording not reclaimed reads whole, byte for byte, however often the
//! set went round. Simulated disks (deterministic), and file targets for the read lock.

use nvrec::control::{Control, Progress};
use nvrec::device::{Access, Safety};
use nvrec::engine::{EngineChoice, SimDisks};
use nvrec::layout::{ReclaimCause, RecordingEntry, RecordingFlags};
use nvrec::pattern::Pattern;
use nvrec::recording::disk::Members;
use nvrec::recording::reader::{self, Item};
use nvrec::recording::retention::{
    self, ArchiveCheck, ArchiveUnanswered, Kept, Lock, ReadLock, ReclaimPolicy, ReclaimRefused,
    Refusal, Retention,
};
use nvrec::recording::volume::{self, VolumeSet};
use nvrec::recording::writer::{self, RecordOptions, RecordOutcome, RecordReport};
use nvrec::recording::{RecordingError, Stripe};
use nvrec::source::PatternSource;
use std::sync::Arc;
use std::time::Duration;

use nvrec_testkit::TempDir;

const DISK_BYTES: u64 = 8 << 20;
const CHUNK_BYTES: u32 = 8192;
const RECORDING_BYTES: u64 = 3 << 20;

fn options(append: bool, retention: Retention) -> RecordOptions {
    RecordOptions {
        chunk_size_bytes: CHUNK_BYTES,
        io_chunk_count: 2,
        queue_depth: 4,
        buffer_bytes: 16 * u64::from(CHUNK_BYTES),
        stripe: Stripe::RoundRobin,
        limit_bytes: Some(RECORDING_BYTES),
        pattern: true,
        append,
        retention,
        ..RecordOptions::default()
    }
}

fn oldest() -> Retention {
    Retention {
        reclaim: Some(ReclaimPolicy::Oldest),
        keep: None,
    }
}

/// Records `RECORDING_BYTES` of the pattern seeded with the recording's number.
fn record(sim: &SimDisks, seed: u64, options: &RecordOptions) -> RecordReport {
    writer::record_on(
        Members::Sim(sim),
        &mut PatternSource(Pattern::new(seed)),
        options,
        &Control::new(),
        &Progress::default(),
    )
    .unwrap()
}

fn open(sim: &SimDisks) -> VolumeSet {
    volume::open_members(Members::Sim(sim), Access::Read, Safety::Check).unwrap()
}

/// Reads `entry` whole and checks every payload byte against the pattern of `seed`; the
/// stream bytes it holds, or the read's error.
fn read_back(set: &VolumeSet, entry: &RecordingEntry, seed: u64) -> Result<u64, RecordingError> {
    let pattern = Pattern::new(seed);
    let mut bytes = 0;
    let mut trouble = Vec::new();
    let mut each = |item: Item<'_>| {
        match item {
            Item::Chunk { header, payload } => {
                let mut expected = vec![0u8; payload.len()];
                pattern.fill(header.stream_offset_bytes, &mut expected);
                if expected != payload {
                    trouble.push(format!("sequence {} differs", header.sequence));
                }
                bytes += payload.len() as u64;
            }
            Item::Missing {
                first_sequence,
                count,
            } => trouble.push(format!("{count} missing from {first_sequence}")),
            Item::Damage(damage) => trouble.push(format!("damage: {}", damage.what)),
        }
        true
    };
    let (control, progress) = (Control::new(), Progress::default());
    reader::read_recording(
        set,
        entry,
        EngineChoice::Auto,
        &control,
        &progress,
        &mut each,
    )?;
    assert!(
        trouble.is_empty(),
        "recording {}: {trouble:?}",
        entry.recording_id
    );
    Ok(bytes)
}

/// Every recording of the set is either reclaimed (and refused on reading) or whole; the
/// reclaimed ones are the oldest. Returns the ids of the reclaimed ones.
fn check_set(sim: &SimDisks) -> Vec<u32> {
    let set = open(sim);
    let entries = reader::recordings(&set).unwrap();
    let mut reclaimed = Vec::new();
    for entry in &entries {
        let id = entry.recording_id;
        match entry.reclaimed {
            Some(reclaim) => {
                assert!(entry.flags.contains(RecordingFlags::RECLAIMED));
                assert_eq!(reclaim.cause, ReclaimCause::Space);
                let error = read_back(&set, entry, u64::from(id)).unwrap_err();
                assert!(matches!(error, RecordingError::Reclaimed { .. }), "{error}");
                reclaimed.push(id);
            }
            None => {
                let bytes = read_back(&set, entry, u64::from(id)).unwrap();
                assert_eq!(bytes, RECORDING_BYTES, "recording {id}");
                assert_eq!(entry.stream_len_bytes, RECORDING_BYTES);
            }
        }
    }
    let oldest_first: Vec<u32> = entries
        .iter()
        .map(|e| e.recording_id)
        .take(reclaimed.len())
        .collect();
    assert_eq!(reclaimed, oldest_first, "reclaimed oldest first");
    reclaimed
}

#[test]
fn a_set_that_reclaims_goes_round_oldest_first_and_what_it_keeps_reads_whole() {
    let sim = SimDisks::new(2, DISK_BYTES, 512, 21);
    let first = record(&sim, 1, &options(false, Retention::default()));
    assert_eq!(first.outcome, RecordOutcome::Complete);
    let mut reclaimed_so_far = Vec::new();
    // About four recordings fit: fifteen go round the set more than three times.
    for id in 2..=15u64 {
        let report = record(&sim, id, &options(true, oldest()));
        assert_eq!(
            report.outcome,
            RecordOutcome::Complete,
            "recording {id}: {report:?}"
        );
        assert_eq!(report.lost_bytes, 0);
        let reclaimed = check_set(&sim);
        let newly: Vec<u32> = report.reclaimed.iter().map(|r| r.recording_id).collect();
        let expected: Vec<u32> = reclaimed
            .iter()
            .copied()
            .filter(|id| !reclaimed_so_far.contains(id))
            .collect();
        assert_eq!(
            newly, expected,
            "the report names what went, recording {id}"
        );
        assert!(!reclaimed.contains(&(id as u32)), "never the newest");
        reclaimed_so_far = reclaimed;
    }
    assert!(reclaimed_so_far.len() >= 10, "{reclaimed_so_far:?}");
}

/// An archive that holds nothing.
struct EmptyArchive;

impl ArchiveCheck for EmptyArchive {
    fn holds(&self, _: &RecordingEntry) -> Result<bool, ArchiveUnanswered> {
        Ok(false)
    }
}

#[test]
fn what_the_policy_keeps_is_never_reclaimed_and_the_set_ends_full() {
    let sim = SimDisks::new(2, DISK_BYTES, 512, 22);
    record(&sim, 1, &options(false, Retention::default()));
    let archived = Retention {
        reclaim: Some(ReclaimPolicy::Archived(Arc::new(EmptyArchive))),
        keep: None,
    };
    let mut outcomes = Vec::new();
    for id in 2..=6u64 {
        let report = record(&sim, id, &options(true, archived.clone()));
        assert!(report.reclaimed.is_empty());
        outcomes.push(report.outcome);
        if report.outcome == RecordOutcome::TargetFull {
            let refused = report.reclaim_refused.expect("says why");
            assert!(
                matches!(
                    refused,
                    ReclaimRefused::Kept {
                        recording_id: 1,
                        why: Kept::NotArchived
                    }
                ),
                "{refused}"
            );
            assert_eq!(
                refused.to_string(),
                "recording 1 was not reclaimed: the archive does not hold it"
            );
            assert!(report.unrecorded_bytes > 0 || report.stream_bytes < RECORDING_BYTES);
            break;
        }
    }
    assert_eq!(
        outcomes.last(),
        Some(&RecordOutcome::TargetFull),
        "{outcomes:?}"
    );
    // Every recording is still there: the full one holds what it stated.
    let set = open(&sim);
    for entry in reader::recordings(&set).unwrap() {
        assert!(entry.reclaimed.is_none());
        let bytes = read_back(&set, &entry, u64::from(entry.recording_id)).unwrap();
        assert_eq!(bytes, entry.stream_len_bytes - entry.lost_bytes);
    }
}

#[test]
fn recordings_older_than_the_set_keeps_are_reclaimed_as_a_recording_starts() {
    let sim = SimDisks::new(2, DISK_BYTES, 512, 23);
    record(&sim, 1, &options(false, Retention::default()));
    sim.clock().step_wall(8 * 24 * 3_600_000_000_000);
    record(&sim, 2, &options(true, Retention::default()));
    let keep = Retention {
        reclaim: Some(ReclaimPolicy::Oldest),
        keep: Some(Duration::from_secs(7 * 24 * 3600)),
    };
    let report = record(&sim, 3, &options(true, keep));
    let reclaimed: Vec<(u32, &str)> = report
        .reclaimed
        .iter()
        .map(|r| (r.recording_id, r.cause))
        .collect();
    assert_eq!(reclaimed, [(1, "age")]);
    let set = open(&sim);
    let entries = reader::recordings(&set).unwrap();
    assert_eq!(
        entries[0].reclaimed.map(|r| r.cause),
        Some(ReclaimCause::Age)
    );
    assert_eq!(read_back(&set, &entries[1], 2).unwrap(), RECORDING_BYTES);
    assert_eq!(read_back(&set, &entries[2], 3).unwrap(), RECORDING_BYTES);
}

#[test]
fn retention_is_refused_where_it_has_no_meaning() {
    let sim = SimDisks::new(1, DISK_BYTES, 512, 24);
    let new_set = writer::record_on(
        Members::Sim(&sim),
        &mut PatternSource(Pattern::new(1)),
        &options(false, oldest()),
        &Control::new(),
        &Progress::default(),
    );
    assert!(matches!(new_set, Err(RecordingError::Usage(_))));
    let ring = RecordOptions {
        fill: nvrec::recording::Fill::Ring { trim: false },
        ..options(true, oldest())
    };
    let on_ring = writer::record_on(
        Members::Sim(&sim),
        &mut PatternSource(Pattern::new(1)),
        &ring,
        &Control::new(),
        &Progress::default(),
    );
    assert!(matches!(on_ring, Err(RecordingError::Usage(_))));
}

/// File targets: a recording a reader holds is not reclaimed; once the reader is done, it is.
#[test]
fn a_recording_being_read_is_not_reclaimed() {
    let dir = TempDir::new("retention-lock");
    let path = dir.0.join("member0");
    let paths = vec![path.clone()];
    let first = RecordOptions {
        create_len_bytes: Some(DISK_BYTES),
        ..options(false, Retention::default())
    };
    writer::record(
        &paths,
        &mut PatternSource(Pattern::new(1)),
        &first,
        &Control::new(),
        &Progress::default(),
    )
    .unwrap();
    let reading = volume::open(&paths, Access::Read, Safety::Check).unwrap();
    let writing = volume::open(&paths, Access::Write, Safety::Check).unwrap();
    let entry = reader::recordings(&writing).unwrap().remove(0);
    let held = ReadLock::take(&reading, entry.recording_id, Lock::Shared)
        .unwrap()
        .expect("nobody else holds it");
    let refused = retention::reclaim(&writing, &entry, ReclaimCause::Space, None, &[]).unwrap();
    assert!(matches!(refused, Err(Refusal::BeingRead)));
    drop(held);
    let next = retention::reclaim(&writing, &entry, ReclaimCause::Space, None, &[])
        .unwrap()
        .expect("reclaimed once the reader is done");
    assert!(next.flags.contains(RecordingFlags::RECLAIMED));
    // A reader that comes later is refused, with when and why.
    let error = read_back(&reading, &entry, 1).unwrap_err();
    assert!(error.to_string().contains("was reclaimed"), "{error}");
}

#[test]
fn an_archive_policy_keeps_what_its_archive_lacks_however_old() {
    let sim = SimDisks::new(2, DISK_BYTES, 512, 25);
    record(&sim, 1, &options(false, Retention::default()));
    sim.clock().step_wall(8 * 24 * 3_600_000_000_000);
    let keep = Retention {
        reclaim: Some(ReclaimPolicy::Archived(Arc::new(EmptyArchive))),
        keep: Some(Duration::from_secs(7 * 24 * 3600)),
    };
    let report = record(&sim, 2, &options(true, keep));
    assert!(report.reclaimed.is_empty(), "{:?}", report.reclaimed);
    let set = open(&sim);
    let entries = reader::recordings(&set).unwrap();
    assert!(entries[0].reclaimed.is_none());
    assert_eq!(read_back(&set, &entries[0], 1).unwrap(), RECORDING_BYTES);
}

/// `record --usable`: a set made with half of each disk in use goes round within that half,
/// by retention and as a ring (trimming ahead), and nothing ever reads, writes or discards
/// the other half but its last 64 KiB, where superblock copy B lies in the last meta block
/// (and is looked for at each meta block size before a target is formatted): every such
/// operation fails there, and nothing failed.
#[test]
fn a_set_made_with_a_usable_part_never_touches_the_rest() {
    use nvrec::engine::{IoOp, RangeFault};
    use nvrec::recording::volume::Usable;
    use nvrec::recording::Fill;
    let sim = SimDisks::new(2, DISK_BYTES, 512, 23);
    let (usable_end, copy_b) = (DISK_BYTES / 2, DISK_BYTES - (64 << 10));
    for disk in 0..2 {
        for op in [IoOp::Read, IoOp::Write] {
            sim.fail(RangeFault {
                disk,
                op,
                offset_bytes: usable_end,
                len_bytes: copy_b - usable_end,
                errno: libc::EIO,
            });
        }
    }
    let made = RecordOptions {
        usable: Some(Usable::Share(0.5)),
        ..options(false, Retention::default())
    };
    assert_eq!(record(&sim, 1, &made).outcome, RecordOutcome::Complete);
    for member in open(&sim).present() {
        assert!(member.layout().data_end_bytes() <= usable_end);
        assert!(member.layout().data_end_bytes() + u64::from(CHUNK_BYTES) > usable_end);
    }
    // One recording fits in the half: seven more go round it seven times.
    for id in 2..=8u64 {
        let report = record(&sim, id, &options(true, oldest()));
        assert_eq!(report.outcome, RecordOutcome::Complete, "{id}: {report:?}");
        assert!(report.retirements.is_empty(), "{id}: {report:?}");
    }
    assert!(check_set(&sim).len() >= 5);
    // The same as a ring that trims ahead and laps the half several times.
    let ring = RecordOptions {
        fill: Fill::Ring { trim: true },
        limit_bytes: Some(4 * DISK_BYTES),
        usable: Some(Usable::Share(0.5)),
        ..options(true, Retention::default())
    };
    let report = record(&sim, 9, &ring);
    assert_eq!(report.outcome, RecordOutcome::Complete, "{report:?}");
    assert!(report.retirements.is_empty(), "{report:?}");
    let set = open(&sim);
    let entries = reader::recordings(&set).unwrap();
    let newest = entries.iter().find(|e| e.recording_id == 9).unwrap();
    let held = read_back(&set, newest, 9).unwrap();
    assert!(held > 0 && held < 4 * DISK_BYTES, "{held}");
    let counters = sim.counters();
    assert_eq!(
        (counters.failed_count, counters.failed_read_count),
        (0, 0),
        "an operation reached past the usable part"
    );
}

/// `--usable` is fixed when a set is made: an append that asks another is refused before
/// anything is written, and one that asks the same goes on.
#[test]
fn an_append_asking_another_usable_part_is_refused() {
    use nvrec::recording::volume::Usable;
    let sim = SimDisks::new(2, DISK_BYTES, 512, 24);
    let made = RecordOptions {
        usable: Some(Usable::Bytes(DISK_BYTES / 2)),
        ..options(false, Retention::default())
    };
    record(&sim, 1, &made);
    let other = RecordOptions {
        usable: Some(Usable::Share(0.75)),
        ..options(true, Retention::default())
    };
    let error = writer::record_on(
        Members::Sim(&sim),
        &mut PatternSource(Pattern::new(2)),
        &other,
        &Control::new(),
        &Progress::default(),
    )
    .unwrap_err();
    assert!(matches!(error, RecordingError::Usage(_)), "{error}");
    assert!(error.to_string().contains("--usable 75%"), "{error}");
    assert!(
        error
            .to_string()
            .contains("bytes, and a set's usable part is fixed"),
        "{error}"
    );
    assert_eq!(reader::recordings(&open(&sim)).unwrap().len(), 1);
    let same = RecordOptions {
        usable: Some(Usable::Share(0.5)),
        ..options(true, oldest())
    };
    assert_eq!(record(&sim, 2, &same).outcome, RecordOutcome::Complete);
}
