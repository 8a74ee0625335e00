//! Two clocks per chunk (format 1.5): a step of the wall clock while recording moves the
//! chunks' wall-clock times, never their place on the recording's timeline, so a window
//! found by search is the one the whole read filtered by that timeline gives, before,
//! across and after the steps. Recorded on simulated disks whose virtual wall clock is set
//! forward an hour and back half a minute mid-recording.

use nvrec::clock::Clock;
use nvrec::control::{Control, Progress};
use nvrec::device::{Access, Safety};
use nvrec::engine::{EngineChoice, SimDisks};
use nvrec::layout::{ChunkFlags, RecordingEntry};
use nvrec::pattern::Pattern;
use nvrec::recording::disk::Members;
use nvrec::recording::reader::{self, Item};
use nvrec::recording::volume;
use nvrec::recording::writer::{self, RecordOptions};
use nvrec::recording::Stripe;
use nvrec::source::{PatternSource, Source};

const DISK_BYTES: u64 = 8 << 20;
const CHUNK_BYTES: u32 = 8192;
const HOUR_NS: i64 = 3_600_000_000_000;
const HALF_MINUTE_NS: i64 = 30_000_000_000;

/// The test pattern, with the wall clock set `steps` (stream offset, by how much) as the
/// stream passes them.
struct SteppingSource {
    pattern: PatternSource,
    clock: Clock,
    steps: Vec<(u64, i64)>,
}

impl Source for SteppingSource {
    fn read_at(&mut self, offset_bytes: u64, buf: &mut [u8]) -> std::io::Result<usize> {
        while let Some(&(at, by_ns)) = self.steps.first() {
            if offset_bytes < at {
                break;
            }
            self.clock.step_wall(by_ns);
            self.steps.remove(0);
        }
        self.pattern.read_at(offset_bytes, buf)
    }
}

/// A recording of 6 MiB with the wall clock stepped at 2 MiB (+1 h) and at 4 MiB (-30 s).
fn stepped_recording() -> SimDisks {
    let sim = SimDisks::new(2, DISK_BYTES, 512, 5);
    for disk in 0..sim.disk_count() {
        sim.slow(disk, 1e9); // Chunks are stamped apart in virtual time.
    }
    let options = RecordOptions {
        chunk_size_bytes: CHUNK_BYTES,
        io_chunk_count: 2,
        queue_depth: 4,
        buffer_bytes: 16 * u64::from(CHUNK_BYTES),
        stripe: Stripe::RoundRobin,
        limit_bytes: Some(6 << 20),
        pattern: true,
        ..RecordOptions::default()
    };
    let mut source = SteppingSource {
        pattern: PatternSource(Pattern::new(4)),
        clock: sim.clock(),
        steps: vec![(2 << 20, HOUR_NS), (4 << 20, -HALF_MINUTE_NS)],
    };
    let (control, progress) = (Control::new(), Progress::default());
    writer::record_on(
        Members::Sim(&sim),
        &mut source,
        &options,
        &control,
        &progress,
    )
    .unwrap();
    sim
}

/// Each chunk a read hands out: (sequence, wall-clock time, time on the timeline, flags).
fn read(
    sim: &SimDisks,
    from_ns: Option<u64>,
) -> (RecordingEntry, Vec<(u64, u64, u64, ChunkFlags)>) {
    let set = volume::open_members(Members::Sim(sim), Access::Read, Safety::Check).unwrap();
    let entry = reader::select(&reader::recordings(&set).unwrap(), None).unwrap();
    let mut chunks = Vec::new();
    let mut each = |item: Item<'_>| {
        if let Item::Chunk { header, .. } = item {
            let time_ns = header.time_ns(entry.start_ns);
            chunks.push((header.sequence, header.timestamp_ns, time_ns, header.flags));
        }
        true
    };
    let (control, progress) = (Control::new(), Progress::default());
    let engine = EngineChoice::Auto;
    reader::read_recording_from(
        &set, &entry, engine, from_ns, &control, &progress, &mut each,
    )
    .unwrap();
    (entry, chunks)
}

#[test]
fn a_wall_clock_step_moves_no_chunk_on_the_timeline() {
    let sim = stepped_recording();
    let (_, whole) = read(&sim, None);
    assert!(whole.len() > 500, "{} chunks", whole.len());
    assert!(whole.iter().all(|c| c.3.contains(ChunkFlags::ELAPSED)));
    // The timeline rises with the sequence; the wall-clock times jump where the clock was
    // set, forward once and back once.
    assert!(
        whole.windows(2).all(|c| c[0].2 <= c[1].2),
        "the timeline rises"
    );
    let jumps: Vec<i64> = whole
        .windows(2)
        .map(|c| (c[1].1 as i64 - c[0].1 as i64) - (c[1].2 as i64 - c[0].2 as i64))
        .filter(|jump| jump.unsigned_abs() > 1_000_000)
        .collect();
    assert_eq!(jumps, [HOUR_NS, -HALF_MINUTE_NS]);
}

#[test]
fn windows_across_wall_clock_steps_are_found_by_the_timeline() {
    let sim = stepped_recording();
    let (_, whole) = read(&sim, None);
    let times: Vec<u64> = whole.iter().map(|c| c.2).collect();
    let mut froms: Vec<u64> = times.iter().step_by(37).flat_map(|&t| [t, t + 1]).collect();
    froms.extend([0, times[0], times[times.len() - 1] + 1]);
    for from_ns in froms {
        let (_, mut window) = read(&sim, Some(from_ns));
        // As callers do: where the search could not tell, the reader read from earlier.
        window.retain(|c| c.2 >= from_ns);
        let expected: Vec<_> = whole.iter().copied().filter(|c| c.2 >= from_ns).collect();
        assert_eq!(window, expected, "window from {from_ns}");
    }
}
