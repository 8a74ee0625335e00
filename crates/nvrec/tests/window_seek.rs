//! A time window read by seeking (`reader::read_recording_from`) hands out exactly what a
//! read of the whole recording filtered by chunk time would, on rings that wrapped several
//! times and on recordings with a retired member, and reads less to do it.

use nvrec::control::{Control, Progress};
use nvrec::device::{Access, Safety};
use nvrec::engine::{DiskFault, EngineChoice, FaultStart, SimDisks};
use nvrec::pattern::Pattern;
use nvrec::recording::disk::Members;
use nvrec::recording::reader::{self, Item};
use nvrec::recording::volume;
use nvrec::recording::writer::{self, RecordOptions};
use nvrec::recording::{Fill, MemberFailure, Stripe};
use nvrec::source::PatternSource;
use std::time::Duration;

const DISK_BYTES: u64 = 6 << 20;
const CHUNK_BYTES: u32 = 8192;
const LOGICAL_BLOCK_BYTES: u32 = 512;

fn options(fill: Fill, limit_bytes: u64) -> RecordOptions {
    RecordOptions {
        chunk_size_bytes: CHUNK_BYTES,
        io_chunk_count: 3,
        queue_depth: 4,
        buffer_bytes: 24 * u64::from(CHUNK_BYTES),
        stripe: Stripe::RoundRobin,
        fill,
        limit_bytes: Some(limit_bytes),
        pattern: true,
        on_member_failure: MemberFailure::Retire,
        member_timeout: Duration::from_secs(5),
        label: "window".into(),
        ..RecordOptions::default()
    }
}

/// What a read handed out: (sequence, timestamp) of each chunk, and the sequences reported
/// missing, and how much it read.
#[derive(Debug, Default, PartialEq)]
struct Read {
    chunks: Vec<(u64, u64)>,
    missing: Vec<(u64, u64)>,
    damaged: usize,
    read_bytes: u64,
}

fn read(sim: &SimDisks, from_ns: Option<u64>) -> Read {
    let set = volume::open_members(Members::Sim(sim), Access::Read, Safety::Check).unwrap();
    let entry = reader::select(&reader::recordings(&set).unwrap(), None).unwrap();
    let mut found = Read::default();
    let summary = reader::read_recording_from(
        &set,
        &entry,
        EngineChoice::Auto,
        from_ns,
        &Control::new(),
        &Progress::default(),
        &mut |item| {
            match item {
                Item::Chunk { header, .. } => {
                    found.chunks.push((header.sequence, header.timestamp_ns))
                }
                Item::Missing {
                    first_sequence,
                    count,
                } => found.missing.push((first_sequence, count)),
                Item::Damage(_) => found.damaged += 1,
            }
            true
        },
    )
    .unwrap();
    found.read_bytes = summary.read_bytes;
    found
}

/// Every window from a spread of chunk times (and between them, and outside the
/// recording) against the whole read filtered by time; the late ones read less.
fn windows_match_the_whole_read(sim: &SimDisks) {
    let whole = read(sim, None);
    assert!(whole.chunks.len() > 100, "{} chunks", whole.chunks.len());
    assert!(whole.missing.is_empty() && whole.damaged == 0, "{whole:?}");
    let times: Vec<u64> = whole.chunks.iter().map(|c| c.1).collect();
    assert!(times.windows(2).all(|t| t[0] <= t[1]), "chunk times rise");
    let mut froms: Vec<u64> = times.iter().step_by(17).flat_map(|&t| [t, t + 1]).collect();
    froms.extend([0, times[0], times[times.len() - 1] + 1]);
    for from_ns in froms {
        let mut window = read(sim, Some(from_ns));
        // The window begins with the chunk before the first that began at `from_ns` or
        // later: it was filling then, and a record in it may have arrived after `from_ns`.
        let first = whole.chunks.iter().position(|c| c.1 >= from_ns);
        let begin = first.unwrap_or(whole.chunks.len()).saturating_sub(1);
        let begin_sequence = whole.chunks[begin].0;
        // As callers do: where the search could not tell, the reader read from earlier.
        window.chunks.retain(|c| c.0 >= begin_sequence);
        let expected = whole.chunks[begin..].to_vec();
        assert_eq!(window.chunks, expected, "window from {from_ns}");
        assert!(
            window.missing.is_empty() && window.damaged == 0,
            "{window:?}"
        );
    }
    let late = read(sim, Some(times[times.len() * 9 / 10]));
    assert!(
        late.read_bytes * 4 < whole.read_bytes,
        "a window at 90 % read {} bytes of the whole read's {}",
        late.read_bytes,
        whole.read_bytes
    );
}

/// Records on `sim` with each member writing at 1 GB/s of virtual time, so that chunks
/// are stamped apart.
fn record(sim: &SimDisks, options: &RecordOptions) {
    for disk in 0..sim.disk_count() {
        sim.slow(disk, 1e9);
    }
    writer::record_on(
        Members::Sim(sim),
        &mut PatternSource(Pattern::new(3)),
        options,
        &Control::new(),
        &Progress::default(),
    )
    .unwrap();
}

#[test]
fn a_ring_that_wrapped_several_times_seeks_in_lap_order() {
    for trim in [false, true] {
        let sim = SimDisks::new(2, DISK_BYTES, LOGICAL_BLOCK_BYTES, 11);
        record(&sim, &options(Fill::Ring { trim }, 5 * 2 * DISK_BYTES));
        windows_match_the_whole_read(&sim);
    }
}

#[test]
fn a_ring_after_a_linear_recording_seeks_past_the_older_one() {
    let sim = SimDisks::new(2, DISK_BYTES, LOGICAL_BLOCK_BYTES, 12);
    record(&sim, &options(Fill::Linear, DISK_BYTES / 2));
    record(
        &sim,
        &RecordOptions {
            append: true,
            ..options(Fill::Ring { trim: false }, 3 * 2 * DISK_BYTES)
        },
    );
    windows_match_the_whole_read(&sim);
}

#[test]
fn a_recording_with_a_retired_member_seeks_over_its_redirected_chunks() {
    let sim = SimDisks::new(3, DISK_BYTES, LOGICAL_BLOCK_BYTES, 13);
    // Member 1 dies a third of the way through its share: retired, its writes sent on.
    sim.fail_from(DiskFault::Dying { disk: 1 }, FaultStart::AtWrite(60));
    record(&sim, &options(Fill::Linear, 2 * DISK_BYTES));
    let set = volume::open_members(Members::Sim(&sim), Access::Read, Safety::Check).unwrap();
    let entry = reader::select(&reader::recordings(&set).unwrap(), None).unwrap();
    assert_eq!(entry.retirements.len(), 1, "{entry:?}");
    drop(set);
    windows_match_the_whole_read(&sim);
}
