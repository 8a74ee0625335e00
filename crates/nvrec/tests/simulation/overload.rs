//! A paced source far faster than the drives, into a target that fills: however far the
//! source ran ahead, the recording ends full like any other (no error, the entry closed),
//! and recorded, lost (in the stream and past its end) and not recorded add up to what
//! the source gave, each loss with its cause.

use super::*;

/// How far ahead of the drives the source runs, and on how many members.
const OVERLOADS: &[(usize, f64)] = &[(1, 3.0), (1, 40.0), (2, 300.0), (3, 2000.0)];

/// Drives of this rate, in virtual time.
const DRIVE_BYTES_PER_S: f64 = 50e6;

#[test]
fn a_full_target_under_overload_ends_like_any_other() {
    for (seed, &(members, overload)) in OVERLOADS.iter().enumerate() {
        let sim = SimDisks::from_images(
            vec![vec![0u8; 4 * MIB as usize]; members],
            LOGICAL_BLOCK_BYTES,
            seed as u64,
        );
        for disk in 0..members {
            sim.slow(disk, DRIVE_BYTES_PER_S);
        }
        let pattern = Pattern::new(seed as u64 | 1);
        let mut source = Counted {
            source: PatternSource(pattern),
            taken_bytes: 0,
        };
        let options = RecordOptions {
            chunk_size_bytes: 8192,
            io_chunk_count: 2,
            queue_depth: 2,
            buffer_bytes: 8 * 16384,
            rate_bytes_per_s: Some(DRIVE_BYTES_PER_S * members as f64 * overload),
            pattern: true,
            ..RecordOptions::default()
        };
        let progress = Progress::default();
        let report = writer::record_on(
            Members::Sim(&sim),
            &mut source,
            &options,
            &Control::new(),
            &progress,
        )
        .unwrap_or_else(|error| panic!("{members} members, {overload}x: {error}"));
        let case = format!("{members} members at {overload}x: {report:?}");
        assert_eq!(report.outcome, RecordOutcome::TargetFull, "{case}");
        assert!(report.error.is_none(), "{case}: {:?}", report.error);
        let causes = report.lost_by_cause;
        assert_eq!(
            causes.no_buffer_bytes + causes.behind_rate_bytes,
            report.lost_bytes + report.lost_past_end_bytes,
            "every loss has its cause: {case}"
        );
        assert_eq!(
            source.taken_bytes,
            report.stream_bytes + report.unrecorded_bytes,
            "{case}"
        );
        assert!(report.lost_bytes + report.lost_past_end_bytes > 0, "{case}");
        assert_eq!(
            progress.durable_bytes.load(Ordering::Relaxed),
            report.stream_bytes + report.lost_bytes,
            "the closed entry acknowledges the stream: {case}"
        );
        let set = volume::open_members(Members::Sim(&sim), Access::Read, Safety::Check).unwrap();
        let entries = set.recordings().unwrap();
        let entry = &entries[0];
        assert_eq!(entry.state, nvrec::layout::RecordingState::Closed, "{case}");
        assert_eq!(entry.lost_bytes, report.lost_bytes, "{case}");
        assert_eq!(
            entry.stream_len_bytes,
            report.stream_bytes + report.lost_bytes,
            "{case}"
        );
        let read = read_with_gaps(&set, entry, &pattern, options.chunk_size_bytes);
        assert_eq!(read, (entry.stream_len_bytes, entry.lost_bytes), "{case}");
    }
}

/// Reads `entry` whole, checking every chunk against the pattern at its stream offset and
/// each gap against where the chunk before it ended: where the stream ends, and the
/// bytes lost in its gaps.
fn read_with_gaps(
    set: &volume::VolumeSet,
    entry: &nvrec::layout::RecordingEntry,
    pattern: &Pattern,
    chunk_size_bytes: u32,
) -> (u64, u64) {
    let (mut end, mut lost) = (0u64, 0u64);
    let mut each = |item: Item<'_>| match item {
        Item::Chunk { header, payload } => {
            let offset = header.stream_offset_bytes;
            pattern
                .check(offset, payload, chunk_size_bytes as u64)
                .unwrap_or_else(|m| panic!("chunk {} differs: {m:?}", header.sequence));
            assert_eq!(end + header.gap_bytes, offset, "chunk {}", header.sequence);
            lost += header.gap_bytes;
            end = offset + payload.len() as u64;
            true
        }
        other => panic!("{:?}", std::mem::discriminant(&other)),
    };
    reader::read_recording(
        set,
        entry,
        EngineChoice::Auto,
        &Control::new(),
        &Progress::default(),
        &mut each,
    )
    .unwrap();
    (end, lost)
}
