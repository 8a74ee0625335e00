//! A recording on simulated disks archived into the in-memory store and read back from
//! there: every chunk as the drives give it, a time window from the chunk index, archiving
//! again sends nothing, and the catalog rebuilt from the manifests alone.

use nvrec::control::{Control, Progress};
use nvrec::device::{Access, Safety};
use nvrec::engine::{EngineChoice, SimDisks};
use nvrec::pattern::Pattern;
use nvrec::recording::disk::Members;
use nvrec::recording::reader::{self, Item};
use nvrec::recording::volume;
use nvrec::recording::writer::{self, RecordOptions};
use nvrec::source::PatternSource;
use nvrec_archive::catalog::{Catalog, CatalogLocation, Filter};
use nvrec_archive::state::State;
use nvrec_archive::store::{Archive, ArchiveUrl, Mode};
use nvrec_archive::upload::{self, ArchiveOptions, Outcome};
use nvrec_archive::Manifest;

const MIB: u64 = 1 << 20;

/// (sequence, timestamp, payload) of every chunk a reader hands out; holes fail the test.
fn chunks_of(read: impl FnOnce(&mut dyn FnMut(Item<'_>) -> bool)) -> Vec<(u64, u64, Vec<u8>)> {
    let mut chunks = Vec::new();
    read(&mut |item| {
        match item {
            Item::Chunk { header, payload } => {
                chunks.push((header.sequence, header.timestamp_ns, payload.to_vec()))
            }
            Item::Missing {
                first_sequence,
                count,
            } => {
                panic!("{count} chunks missing from {first_sequence}")
            }
            Item::Damage(damage) => panic!("damage: {}", damage.what),
        }
        true
    });
    chunks
}

#[test]
fn a_recording_round_trips_through_the_in_memory_store() {
    let sim = SimDisks::new(2, 64 * MIB, 4096, 11);
    // Simulated disks run on virtual time, which moves only while the recorder waits for
    // them: slowed, and with a pool smaller than a recording, chunk times rise through it,
    // so that the window below starts inside it.
    sim.slow(0, 1e9);
    sim.slow(1, 1e9);
    for (seed, append) in [(3, false), (4, true)] {
        let options = RecordOptions {
            limit_bytes: Some(if append { 2 * MIB } else { 9 * MIB }),
            io_chunk_count: 1,
            buffer_bytes: MIB / 2,
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
        .expect("records");
    }
    let set = volume::open_members(Members::Sim(&sim), Access::Read, Safety::Check).unwrap();
    let dir = std::env::temp_dir().join(format!("nvrec-archive-memory-{}", std::process::id()));
    let state = State::open(&dir.join("state.sqlite")).unwrap();
    let catalog = Catalog::open(&CatalogLocation::File(dir.join("catalog.sqlite"))).unwrap();
    let archive = Archive::open(&ArchiveUrl::Memory, Mode::Write).unwrap();
    let mut options = ArchiveOptions::new("sim".into());
    options.segment_size_bytes = 5 * MIB;
    options.part_size_bytes = 5 * MIB;
    let control = Control::new();
    let reports = upload::archive_set(
        &archive,
        &set,
        &state,
        Some(&catalog),
        &options,
        &control,
        &Progress::default(),
    )
    .unwrap();
    assert_eq!(reports.len(), 2);
    assert!(
        reports.iter().all(|r| r.outcome == Outcome::Archived),
        "{reports:?}"
    );
    assert_eq!(reports[0].segment_count, 2, "{reports:?}");

    let (recordings, unreadable) = nvrec_archive::read::recordings(&archive).unwrap();
    assert!(unreadable.is_empty());
    assert_eq!(recordings.len(), 2);
    let entries = reader::recordings(&set).unwrap();
    for (archived, entry) in recordings.iter().zip(&entries) {
        assert_eq!(
            &archived.entry, entry,
            "the manifest carries the entry as the drives hold it"
        );
        let from_drives = chunks_of(|each| {
            reader::read_recording(
                &set,
                entry,
                EngineChoice::Auto,
                &control,
                &Progress::default(),
                each,
            )
            .unwrap();
        });
        let from_archive = chunks_of(|each| {
            let summary = nvrec_archive::read::read_recording(
                &archive,
                archived,
                None,
                &control,
                &Progress::default(),
                each,
            )
            .unwrap();
            assert_eq!(summary.damage_count, 0);
        });
        assert!(!from_drives.is_empty());
        assert!(
            from_drives == from_archive,
            "recording {}",
            entry.recording_id
        );

        // A window: the chunk before the first at or after a chunk's timestamp (it was
        // filling then), and all after it.
        let middle = from_drives.len() / 2;
        let from_ns = from_drives[middle].1;
        let first = from_drives
            .iter()
            .position(|c| c.1 >= from_ns)
            .unwrap()
            .saturating_sub(1);
        let windowed = chunks_of(|each| {
            let summary = nvrec_archive::read::read_recording(
                &archive,
                archived,
                Some(from_ns),
                &control,
                &Progress::default(),
                each,
            )
            .unwrap();
            // The window started where the index said, not at the top of the recording.
            assert!(
                summary.read_bytes < archived.manifest.archived_bytes,
                "{summary:?}"
            );
        });
        assert!(
            windowed == from_drives[first..],
            "window of recording {}",
            entry.recording_id
        );
    }

    // Again: already archived, nothing sent.
    let again = upload::archive_set(
        &archive,
        &set,
        &state,
        Some(&catalog),
        &options,
        &control,
        &Progress::default(),
    )
    .unwrap();
    assert!(
        again.iter().all(|r| r.outcome == Outcome::AlreadyArchived),
        "{again:?}"
    );

    // The catalog, and the same catalog made again from the manifests alone.
    let listed = catalog.list(&Filter::default()).unwrap();
    assert_eq!(listed.len(), 2);
    let mut rebuilt = Catalog::open(&CatalogLocation::File(dir.join("rebuilt.sqlite"))).unwrap();
    assert_eq!(rebuilt.rebuild(&archive).unwrap().recording_count, 2);
    assert_eq!(rebuilt.list(&Filter::default()).unwrap(), listed);
    let only_second = rebuilt
        .list(&Filter {
            from_ns: Some(listed[1].start_ns),
            ..Filter::default()
        })
        .unwrap();
    assert_eq!(only_second.len(), 1);
    assert_eq!(only_second[0].recording_id, listed[1].recording_id);
    drop((state, catalog, rebuilt));
    std::fs::remove_dir_all(&dir).unwrap();
}

/// An archived recording whose entry on the drives is written again (its next revision,
/// as recovery or a repair writes one), and whose chunks are then gone from the drives (as
/// where a ring, or the recording after it, came round over them): the next run keeps
/// every segment the archive holds and writes the manifest again for the entry as it is
/// now, reading nothing; an entry that ends before the chunks the archive holds leaves the
/// archive as it is. The archive is never replaced with less.
#[test]
fn an_entry_written_again_never_costs_the_archive_what_it_holds() {
    let sim = SimDisks::new(2, 64 * MIB, 4096, 12);
    let options = RecordOptions {
        limit_bytes: Some(9 * MIB),
        io_chunk_count: 1,
        buffer_bytes: MIB / 2,
        pattern: true,
        ..RecordOptions::default()
    };
    writer::record_on(
        Members::Sim(&sim),
        &mut PatternSource(Pattern::new(5)),
        &options,
        &Control::new(),
        &Progress::default(),
    )
    .expect("records");
    let set = volume::open_members(Members::Sim(&sim), Access::Write, Safety::Check).unwrap();
    let dir = std::env::temp_dir().join(format!("nvrec-archive-again-{}", std::process::id()));
    let state = State::open(&dir.join("state.sqlite")).unwrap();
    let archive = Archive::open(&ArchiveUrl::Memory, Mode::Write).unwrap();
    let mut options = ArchiveOptions::new("sim".into());
    options.segment_size_bytes = 5 * MIB;
    options.part_size_bytes = 5 * MIB;
    let control = Control::new();
    let archive_set = || {
        let reports = upload::archive_set(
            &archive,
            &set,
            &state,
            None,
            &options,
            &control,
            &Progress::default(),
        )
        .unwrap();
        assert_eq!(reports.len(), 1);
        reports.into_iter().next().unwrap()
    };
    let first = archive_set();
    assert_eq!(first.outcome, Outcome::Archived);
    assert_eq!(first.segment_count, 2);
    let key = first.manifest_key.clone();
    let held = Manifest::decode(&key, &archive.get(&key).unwrap()).unwrap();

    let mut entry = reader::recordings(&set).unwrap()[0].clone();
    entry.revision += 1;
    set.write_entry(&entry).unwrap();
    for (index, span) in entry.members.iter().enumerate() {
        let layout = set.members[index].as_ref().unwrap().layout();
        let start = layout
            .data_slot_offset_bytes(span.start_slot_index)
            .unwrap();
        let end = layout.data_slot_offset_bytes(span.end_slot_index).unwrap();
        sim.write_at(index, start, &vec![0u8; (end - start) as usize])
            .unwrap();
    }
    let mut left_on_drives = 0;
    reader::read_recording(
        &set,
        &entry,
        EngineChoice::Auto,
        &control,
        &Progress::default(),
        &mut |item| {
            left_on_drives += u64::from(matches!(item, Item::Chunk { .. }));
            true
        },
    )
    .unwrap();
    assert_eq!(left_on_drives, 0);
    let again = archive_set();
    assert_eq!(again.outcome, Outcome::Archived, "{again:?}");
    assert_eq!(again.segments_held, 2, "{again:?}");
    assert_eq!(again.uploaded_bytes, 0, "{again:?}");
    assert!(again.holes.is_empty(), "{again:?}");
    let written = Manifest::decode(&key, &archive.get(&key).unwrap()).unwrap();
    assert_eq!(written.segments, held.segments);
    assert_eq!(
        (written.chunk_count, written.payload_bytes),
        (held.chunk_count, held.payload_bytes)
    );
    assert_eq!(written.recording_entry(&key).unwrap(), entry);
    // Read back whole from the archive alone.
    let (recordings, _) = nvrec_archive::read::recordings(&archive).unwrap();
    let chunks = chunks_of(|each| {
        nvrec_archive::read::read_recording(
            &archive,
            &recordings[0],
            None,
            &control,
            &Progress::default(),
            each,
        )
        .unwrap();
    });
    assert_eq!(chunks.len() as u64, held.chunk_count);
    assert_eq!(archive_set().outcome, Outcome::AlreadyArchived);

    // An entry that ends before the chunks the archive holds: left as it is, and said.
    entry.revision += 1;
    entry.end_sequence = entry.first_sequence + 1;
    set.write_entry(&entry).unwrap();
    let kept = archive_set();
    assert_eq!(kept.outcome, Outcome::Kept, "{kept:?}");
    assert!(kept.kept_because.is_some(), "{kept:?}");
    let after = Manifest::decode(&key, &archive.get(&key).unwrap()).unwrap();
    assert_eq!(after, written);
    drop(state);
    std::fs::remove_dir_all(&dir).unwrap();
}
