//! Metadata that cannot be read: a member's superblock copy A, its checkpoint slots and
//! its recording table fail with EIO on simulated disks. The set still opens from the other
//! copies, every unreadable copy is named, and `repair` leaves nothing to report once the
//! disks read again.

use nvrec::control::{Control, Progress};
use nvrec::device::{Access, Safety};
use nvrec::engine::{DiskFault, FaultStart, IoOp, RangeFault, SilentWrite, SimDisks};
use nvrec::pattern::Pattern;
use nvrec::recording::disk::Members;
use nvrec::recording::health::{self, Severity};
use nvrec::recording::volume::{self, MetaPlace};
use nvrec::recording::writer::{self, RecordOptions};
use nvrec::recording::{repair, scan};
use nvrec::source::PatternSource;

const MIB: u64 = 1 << 20;

fn recorded_set() -> SimDisks {
    recorded_set_of_seed(7)
}

/// Two recordings on a set of two simulated disks made from `seed`.
fn recorded_set_of_seed(seed: u64) -> SimDisks {
    let sim = SimDisks::new(2, 64 * MIB, 4096, seed);
    for (seed, append) in [(0, false), (9, true)] {
        let options = RecordOptions {
            limit_bytes: Some(3 * MIB),
            pattern: true,
            append,
            ..RecordOptions::default()
        };
        let mut source = PatternSource(Pattern::new(seed));
        writer::record_on(
            Members::Sim(&sim),
            &mut source,
            &options,
            &Control::new(),
            &Progress::default(),
        )
        .expect("records");
    }
    sim
}

/// `entry` reads back whole: every chunk the pattern of `seed`, `bytes` in all.
fn assert_reads_whole(
    set: &volume::VolumeSet,
    entry: &nvrec::layout::RecordingEntry,
    seed: u64,
    bytes: u64,
) {
    let pattern = Pattern::new(seed);
    let mut read = 0u64;
    nvrec::recording::reader::read_recording(
        set,
        entry,
        nvrec::engine::EngineChoice::Auto,
        &Control::new(),
        &Progress::default(),
        &mut |item| match item {
            nvrec::recording::reader::Item::Chunk { header, payload } => {
                assert!(pattern
                    .check(header.stream_offset_bytes, payload, 128 << 10)
                    .is_ok());
                read += payload.len() as u64;
                true
            }
            _ => panic!("the restored recording reads whole"),
        },
    )
    .unwrap();
    assert_eq!(read, bytes);
}

fn fail_reads(sim: &SimDisks, disk: usize, offset_bytes: u64, len_bytes: u64) {
    sim.fail(RangeFault {
        disk,
        op: IoOp::Read,
        offset_bytes,
        len_bytes,
        errno: libc::EIO,
    });
}

#[test]
fn unreadable_copies_on_one_member_cost_nothing_and_are_each_named() {
    let sim = recorded_set();
    // Superblock A, both checkpoint slots and the first recording table slot of member 0.
    fail_reads(&sim, 0, 0, 4096);
    fail_reads(&sim, 0, 4096, 2 * 4096);
    fail_reads(&sim, 0, 3 * 4096, 2 * 4096);
    let set = volume::open_members(Members::Sim(&sim), Access::Read, Safety::Check)
        .expect("copy B and member 1 serve");
    assert!(set.missing_indices().is_empty());
    let entries = set.recordings().unwrap();
    assert_eq!(entries.len(), 2, "both recordings listed from member 1");
    assert!(set.newest_checkpoint().unwrap().is_some());

    let damage = health::check(&set).unwrap();
    let places: Vec<MetaPlace> = damage.iter().filter_map(|d| d.place).collect();
    assert!(
        places.contains(&MetaPlace::Superblock { copy: 0 }),
        "{damage:?}"
    );
    assert!(
        places.contains(&MetaPlace::Checkpoint { slot: 0 }),
        "{damage:?}"
    );
    assert!(
        places.contains(&MetaPlace::Checkpoint { slot: 1 }),
        "{damage:?}"
    );
    assert!(
        places.contains(&MetaPlace::Entry { slot: 0, copy: 0 }),
        "{damage:?}"
    );
    assert!(damage.iter().all(|d| d.member_index == Some(0)));
    // A copy that cannot be read at all is called so (repair will not write over it while
    // it may be the newest); a superblock copy is judged by the copy that opened the set.
    for item in &damage {
        let expected = match item.place {
            Some(MetaPlace::Superblock { .. }) => Severity::Repairable,
            _ => Severity::Unreadable,
        };
        assert_eq!(item.severity, expected, "{item}");
    }
    assert!(!health::loses_anything(&damage));
}

#[test]
fn repair_makes_the_metadata_whole_and_a_lost_entry_comes_back_from_a_scan() {
    let sim = recorded_set();
    let mut set = volume::open_members(Members::Sim(&sim), Access::Write, Safety::Check).unwrap();
    // Lose every copy of recording 2's entry (table slot 1) on both members.
    let layout = *set.members[0].as_ref().unwrap().layout();
    for member in set.present() {
        for copy in 0..2 {
            let offset = layout.recording_entry_offset_bytes(1, copy).unwrap();
            volume::write_meta(&member.disk, offset, 4096, &[0u8; 4096]).unwrap();
        }
    }
    let damage = health::check(&set).unwrap();
    assert!(health::loses_anything(&damage), "{damage:?}");
    assert_eq!(
        health::highest_recording_id(&set).unwrap(),
        2,
        "no id reused"
    );
    let found = scan::scan(&set, &Control::new()).unwrap();
    assert_eq!(
        found
            .recordings
            .iter()
            .map(|r| r.recording_id)
            .collect::<Vec<_>>(),
        [1, 2]
    );
    let report = repair::repair(&mut set, true, &Control::new()).unwrap();
    assert_eq!(report.rebuilt_recordings, [2]);
    assert!(report.left.is_empty(), "{:?}", report.left);
    let entries = set.recordings().unwrap();
    assert_eq!(entries.len(), 2);
    assert_eq!(entries[1].stream_len_bytes, 3 * MIB);
}

#[test]
fn a_checkpoint_that_names_fewer_members_is_damage_never_a_smaller_set() {
    use nvrec::layout::Checkpoint;
    let sim = recorded_set();
    let mut set = volume::open_members(Members::Sim(&sim), Access::Write, Safety::Check).unwrap();
    // Every checkpoint copy rewritten, valid in itself, naming one member of the two.
    for copy in set.checkpoint_copies() {
        let Ok(mut checkpoint) = Checkpoint::decode(copy.bytes.as_ref().unwrap()) else {
            continue;
        };
        checkpoint.members.truncate(1);
        let member = set.members[copy.member_index as usize].as_ref().unwrap();
        let bytes = checkpoint.encode().unwrap();
        volume::write_meta(&member.disk, copy.offset_bytes, 4096, &bytes).unwrap();
    }
    assert!(set.newest_checkpoint().unwrap().is_none());
    let damage = health::check(&set).unwrap();
    assert!(health::loses_anything(&damage));
    assert!(
        damage
            .iter()
            .any(|d| d.problem.contains("names 1 members, the set has 2")),
        "{damage:?}"
    );
    // Appending refuses rather than recording on one member.
    let append = RecordOptions {
        limit_bytes: Some(MIB),
        pattern: true,
        append: true,
        ..RecordOptions::default()
    };
    let mut source = PatternSource(Pattern::new(1));
    let refused = writer::record_on(
        Members::Sim(&sim),
        &mut source,
        &append,
        &Control::new(),
        &Progress::default(),
    );
    assert!(refused.is_err());
    // Repaired from a scan, the set appends over both members again.
    let report = repair::repair(&mut set, false, &Control::new()).unwrap();
    assert!(report.left.is_empty(), "{:?}", report.left);
    drop(set);
    let mut source = PatternSource(Pattern::new(1));
    let recorded = writer::record_on(
        Members::Sim(&sim),
        &mut source,
        &RecordOptions {
            limit_bytes: Some(4 * MIB),
            ..append
        },
        &Control::new(),
        &Progress::default(),
    )
    .unwrap();
    assert!(recorded.members.iter().all(|m| m.chunk_count > 0));
    assert_eq!(recorded.recording_id, 3);
}

#[test]
fn repair_writes_nothing_over_a_copy_it_cannot_read() {
    let sim = recorded_set();
    // Member 0's first checkpoint slot: it may hold the newest checkpoint of the set.
    fail_reads(&sim, 0, 4096, 4096);
    let before = sim.current_images();
    let mut set = volume::open_members(Members::Sim(&sim), Access::Write, Safety::Check).unwrap();
    let error = repair::repair(&mut set, true, &Control::new()).unwrap_err();
    assert!(error.is_refusal(), "{error}");
    let text = error.to_string();
    assert!(
        text.contains("member 0") && text.contains("cannot be read"),
        "{text}"
    );
    drop(set);
    assert!(sim.current_images() == before, "repair wrote nothing");
}

#[test]
fn an_entry_found_in_another_table_slot_is_named_and_never_listed() {
    let sim = recorded_set();
    let set = volume::open_members(Members::Sim(&sim), Access::Read, Safety::Check).unwrap();
    let layout = *set.members[0].as_ref().unwrap().layout();
    let entry = set.entry(1).unwrap();
    // A revision of recording 1's entry, newer than the table's and valid in itself, as a
    // misdirected write leaves it: in table slot 5 (recording 6's) of member 0.
    let astray = nvrec::layout::RecordingEntry {
        revision: entry.revision + 1,
        stream_len_bytes: entry.stream_len_bytes / 2,
        ..entry.clone()
    };
    let offset = layout.recording_entry_offset_bytes(5, 0).unwrap();
    let member = set.members[0].as_ref().unwrap();
    volume::write_meta(&member.disk, offset, 4096, &astray.encode().unwrap()).unwrap();

    let entries = set.recordings().unwrap();
    let ids: Vec<u32> = entries.iter().map(|e| e.recording_id).collect();
    assert_eq!(ids, [1, 2], "each recording once");
    assert_eq!(entries[0], entry, "as its own slot holds it");
    assert_eq!(set.entry(1).unwrap(), entry);
    let damage = health::check(&set).unwrap();
    let named: Vec<_> = damage
        .iter()
        .filter(|d| d.place == Some(MetaPlace::Entry { slot: 5, copy: 0 }))
        .collect();
    assert_eq!(named.len(), 1, "{damage:?}");
    assert_eq!(named[0].member_index, Some(0));
    assert!(named[0].problem.contains("misplaced"), "{}", named[0]);
}

/// A member whose every read fails (a cable, a controller) is named unreadable, with the
/// error, never blank or another set's: it may hold half the recording.
#[test]
fn a_member_whose_every_read_fails_is_unreadable_never_blank() {
    let sim = recorded_set();
    fail_reads(&sim, 1, 0, 64 * MIB);
    let set = volume::open_members(Members::Sim(&sim), Access::Read, Safety::Check)
        .expect("member 0 serves");
    assert_eq!(set.missing_indices(), [1]);
    assert_eq!(set.problems.len(), 1, "{:?}", set.problems);
    let problem = &set.problems[0];
    assert_eq!(problem.kind, volume::ProblemKind::Unreadable, "{problem:?}");
    assert_eq!(problem.heading(), "UNREADABLE");
    assert!(problem.problem.contains("cannot be read"), "{problem:?}");
    assert!(!problem.problem.contains("blank"), "{problem:?}");
    // Blank it is only where every read comes back zero.
    let blank = SimDisks::new(1, 16 * MIB, 4096, 3);
    let error = volume::open_members(Members::Sim(&blank), Access::Read, Safety::Check)
        .expect_err("nothing there");
    assert!(error.to_string().contains("blank"), "{error}");
}

/// A recording whose entry write and every checkpoint of it were lost (the index stands as
/// it did before it began, as a drive without power-loss protection leaves it): its chunks
/// at the set's write point are found (`scan::unnamed`), a recording added is refused,
/// and `repair` restores the entry, after which the recording reads back whole.
#[test]
fn a_recording_no_entry_names_is_found_refused_over_and_restored() {
    let sim = SimDisks::new(2, 64 * MIB, 4096, 11);
    let record = |seed: u64, append: bool| {
        let options = RecordOptions {
            limit_bytes: Some(3 * MIB),
            pattern: true,
            append,
            ..RecordOptions::default()
        };
        writer::record_on(
            Members::Sim(&sim),
            &mut PatternSource(Pattern::new(seed)),
            &options,
            &Control::new(),
            &Progress::default(),
        )
    };
    record(1, false).expect("records");
    let before = sim.current_images();
    record(2, true).expect("records");
    // Every write to the index since the first recording ended is lost.
    let data_offset = volume::open_members(Members::Sim(&sim), Access::Read, Safety::Check)
        .unwrap()
        .present()
        .next()
        .unwrap()
        .layout()
        .data_offset_bytes as usize;
    let mut images = sim.current_images();
    for (image, old) in images.iter_mut().zip(&before) {
        image[..data_offset].copy_from_slice(&old[..data_offset]);
    }
    let lost = SimDisks::from_images(images, 4096, 11);
    let set = volume::open_members(Members::Sim(&lost), Access::Write, Safety::Check).unwrap();
    assert_eq!(set.recordings().unwrap().len(), 1);
    let unnamed = scan::unnamed(&set).unwrap();
    assert_eq!(unnamed.len(), 1, "{unnamed:?}");
    assert_eq!(unnamed[0].recording_id, 2);
    let found = scan::unaccounted(&set, &unnamed[0]);
    assert!(found.chunk_count > 20 && found.end_marker, "{found:?}");
    drop(set);
    // A recording added now would write over them: refused, nothing written.
    let options = RecordOptions {
        limit_bytes: Some(MIB),
        pattern: true,
        append: true,
        ..RecordOptions::default()
    };
    let refused = writer::record_on(
        Members::Sim(&lost),
        &mut PatternSource(Pattern::new(3)),
        &options,
        &Control::new(),
        &Progress::default(),
    );
    assert!(
        matches!(
            refused,
            Err(nvrec::recording::RecordingError::Unnamed {
                recording_id: 2,
                ..
            })
        ),
        "{refused:?}"
    );
    let mut set = volume::open_members(Members::Sim(&lost), Access::Write, Safety::Check).unwrap();
    let report = repair::repair(&mut set, false, &Control::new()).unwrap();
    assert_eq!(report.restored, [2], "{report:?}");
    assert!(report.unaccounted_left.is_empty(), "{report:?}");
    let entries = set.recordings().unwrap();
    assert_eq!(entries.len(), 2);
    let restored = &entries[1];
    assert_eq!(restored.state, nvrec::layout::RecordingState::Closed);
    assert_eq!(restored.stream_len_bytes, 3 * MIB);
    assert_reads_whole(&set, restored, 2, 3 * MIB);
    assert!(scan::unnamed(&set).unwrap().is_empty());
}

/// A recording whose closing entry revision the drives acknowledged and lost, on every
/// member: the table still says it is open, and the set went on past it (the checkpoint
/// after it names no recording), so no recovery looks for its end. It is never read as the
/// empty recording its entry states without a word: the metadata check names it, the look
/// past its end finds every chunk, and `repair` extends the entry over them, after which
/// it reads back whole.
#[test]
fn a_recording_whose_closing_entry_was_lost_is_named_and_restored() {
    // Formatted first, so that the fault below strikes the recording's writes alone.
    let formatted = || {
        let sim = SimDisks::new(2, 64 * MIB, 4096, 13);
        let chunk_size_bytes = RecordOptions::default().chunk_size_bytes;
        volume::format(
            Members::Sim(&sim),
            chunk_size_bytes,
            "",
            None,
            None,
            Safety::Check,
        )
        .expect("formats");
        sim
    };
    let record = |sim: &SimDisks| {
        let options = RecordOptions {
            limit_bytes: Some(3 * MIB),
            pattern: true,
            append: true,
            ..RecordOptions::default()
        };
        writer::record_on(
            Members::Sim(sim),
            &mut PatternSource(Pattern::new(4)),
            &options,
            &Control::new(),
            &Progress::default(),
        )
        .expect("records")
    };
    // Where the closing revision goes: a set like it, recorded without the fault.
    let clean = formatted();
    record(&clean);
    let set = volume::open_members(Members::Sim(&clean), Access::Read, Safety::Check).unwrap();
    let closed = set.entry(1).unwrap();
    assert_eq!(closed.state, nvrec::layout::RecordingState::Closed);
    let layout = *set.members[0].as_ref().unwrap().layout();
    let offset_bytes = layout
        .recording_entry_offset_bytes(0, (closed.revision % 2) as u32)
        .unwrap();
    drop(set);

    let sim = formatted();
    // The first write over that copy is the closing one (revision 1 goes to the other).
    for disk in 0..2 {
        sim.fail_from(
            DiskFault::Silent {
                disk,
                offset_bytes,
                len_bytes: u64::from(layout.meta_block_bytes),
                write: SilentWrite::Lost,
            },
            FaultStart::Now,
        );
    }
    let report = record(&sim);
    assert_eq!(
        report.stream_bytes,
        3 * MIB,
        "acknowledged, as the drives said"
    );
    assert_eq!(sim.counters().lost_write_count, 2);
    let struck = sim.silent_writes();
    assert!(struck
        .iter()
        .all(|s| s.offset_bytes == offset_bytes && s.landed_at_bytes.is_none()));

    let mut set = volume::open_members(Members::Sim(&sim), Access::Write, Safety::Check).unwrap();
    let entries = nvrec::recording::reader::recordings(&set).unwrap();
    let open = &entries[0];
    assert_eq!(open.state, nvrec::layout::RecordingState::Open);
    assert_eq!(open.revision, closed.revision - 1);
    assert_eq!(open.stream_len_bytes, 0, "what its open revision states");
    assert!(scan::stale_open(&set, open).unwrap());
    let damage = health::check(&set).unwrap();
    let named: Vec<_> = damage
        .iter()
        .filter(|d| d.severity == Severity::Lost && d.problem.starts_with("recording 1:"))
        .collect();
    assert_eq!(named.len(), 1, "{damage:?}");
    assert!(health::loses_anything(&damage));
    let found = scan::unaccounted(&set, open);
    assert_eq!(
        found.chunk_count,
        closed.end_sequence - closed.first_sequence,
        "{found:?}"
    );
    assert!(found.end_marker && !found.aborted, "{found:?}");

    let report = repair::repair(&mut set, false, &Control::new()).unwrap();
    assert_eq!(report.extended.len(), 1, "{report:?}");
    assert!(report.unaccounted_left.is_empty(), "{report:?}");
    let restored = set.entry(1).unwrap();
    assert_eq!(restored.state, nvrec::layout::RecordingState::Closed);
    assert_eq!(restored.stream_len_bytes, 3 * MIB);
    assert_eq!(restored.end_sequence, closed.end_sequence);
    assert_eq!(restored.members, closed.members);
    assert!(!scan::stale_open(&set, &restored).unwrap());
    let damage = health::check(&set).unwrap();
    assert!(!health::loses_anything(&damage), "{damage:?}");
    assert_reads_whole(&set, &restored, 4, 3 * MIB);
}

/// A metadata copy's problem is typed: one that cannot be read is `Unreadable` (never
/// `Blank`, which health leaves out where nothing was written yet), zeros are `Blank`, and
/// another set's copy says whose it is.
#[test]
fn an_unreadable_copy_is_never_taken_for_a_blank_one() {
    use nvrec::recording::volume::CopyProblem;
    let sim = recorded_set();
    // Member 0's checkpoint slots and first table slot cannot be read.
    fail_reads(&sim, 0, 4096, 2 * 4096);
    fail_reads(&sim, 0, 3 * 4096, 2 * 4096);
    let set = volume::open_members(Members::Sim(&sim), Access::Read, Safety::Check).unwrap();
    let copies = set.checkpoint_copies();
    let problems: Vec<_> = copies
        .iter()
        .filter(|copy| copy.member_index == 0)
        .map(|copy| set.checkpoint_of(copy).unwrap_err())
        .collect();
    assert!(!problems.is_empty());
    for problem in &problems {
        assert!(matches!(problem, CopyProblem::Unreadable(_)), "{problem}");
        assert!(problem.to_string().starts_with("unreadable: "), "{problem}");
    }
    let good = copies
        .iter()
        .find(|copy| copy.member_index == 1 && set.checkpoint_of(copy).is_ok())
        .expect("member 1 holds a checkpoint");
    let blank = volume::MetaCopy {
        bytes: Ok(vec![0; good.bytes.as_ref().unwrap().len()]),
        ..clone_copy(good)
    };
    assert!(matches!(set.checkpoint_of(&blank), Err(CopyProblem::Blank)));
    let other = recorded_set_of_seed(8);
    let theirs = volume::open_members(Members::Sim(&other), Access::Read, Safety::Check).unwrap();
    let foreign = theirs
        .checkpoint_copies()
        .into_iter()
        .find(|copy| theirs.checkpoint_of(copy).is_ok())
        .unwrap();
    let problem = set.checkpoint_of(&foreign).unwrap_err();
    assert!(
        matches!(problem, CopyProblem::OtherSet(uuid) if uuid == theirs.set_uuid),
        "{problem}"
    );
}

fn clone_copy(copy: &volume::MetaCopy) -> volume::MetaCopy {
    volume::MetaCopy {
        member_index: copy.member_index,
        place: copy.place,
        offset_bytes: copy.offset_bytes,
        bytes: copy.bytes.clone(),
    }
}
