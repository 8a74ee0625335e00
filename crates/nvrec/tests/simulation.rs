//! The recorder against simulated disks with injected faults, in this process, seeded.
//!
//! Each case draws, from its seed, a set (one to three members of different sizes), a
//! recording (linear or ring, striping, chunk and I/O sizes, queue depth, pool, sync
//! interval, length) and what goes wrong: nothing, a write error (EIO or ENOSPC) over a
//! range of one member, a stall of one member shorter or longer than the member timeout, or
//! a member slowed to a crawl; and, in most cases, a crash at a drawn operation followed by
//! a power cut that drops, keeps or tears every write not yet flushed. Then the set is
//! opened from what the power cut left and the recording read back. Everything the
//! recorder acknowledged (a durable checkpoint, or the closed entry) must come back
//! byte-exact, and nothing must be claimed that does not: the recording reads as one run of
//! the pattern, without a missing or damaged chunk, to the end its entry states.
//!
//! `NVREC_SIM_CASES` sets the number of cases (default 1500), `NVREC_SIM_SEED` the first
//! seed (default: drawn, and printed); a failure names the seed that repeats it (the
//! faults and the crash point repeat; thread timing does not, so a rare failure may need
//! a few runs).

use nvrec::device::{Access, Safety};
use nvrec::engine::{EngineChoice, IoOp, RangeFault, SimDisks};
use nvrec::pattern::Pattern;
use nvrec::recording::disk::Members;
use nvrec::recording::reader::{self, Item};
use nvrec::recording::volume;
use nvrec::recording::writer::{self, RecordOptions, RecordOutcome};
use nvrec::recording::{Fill, MemberFailure, Stripe};
use nvrec::source::PatternSource;
use nvrec::stream::{Control, Progress};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

const MIB: u64 = 1 << 20;
const LOGICAL_BLOCK_BYTES: u32 = 4096;
const MEMBER_TIMEOUT: Duration = Duration::from_millis(40);

fn next(rng: &mut u64) -> u64 {
    *rng = rng.wrapping_add(0x9e37_79b9_7f4a_7c15);
    let mut z = *rng;
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

fn below(rng: &mut u64, n: u64) -> u64 {
    next(rng) % n.max(1)
}

#[derive(Debug, Clone, Copy)]
enum Fault {
    None,
    WriteError {
        disk: usize,
        at_fraction: f64,
        len_bytes: u64,
        errno: i32,
    },
    Stall {
        disk: usize,
        at_write: u64,
        duration: Duration,
    },
    Slow {
        disk: usize,
        bytes_per_s: f64,
    },
}

#[derive(Debug, Clone)]
struct Case {
    seed: u64,
    capacities: Vec<u64>,
    chunk_size_bytes: u32,
    io_chunk_count: u32,
    queue_depth: u32,
    buffer_ios: u64,
    fill: Fill,
    stripe: Stripe,
    sync_interval: Duration,
    limit_bytes: u64,
    fault: Fault,
    /// The operation at which the set crashes (None: a power cut after the end).
    crash_at: Option<u64>,
}

impl Case {
    fn draw(seed: u64) -> Case {
        let mut rng = seed;
        let members = 1 + below(&mut rng, 3) as usize;
        let capacities: Vec<u64> = (0..members)
            .map(|_| 3 * MIB + below(&mut rng, 12) * MIB / 4)
            .collect();
        let chunk_size_bytes = [8192u32, 16384][below(&mut rng, 2) as usize];
        let io_chunk_count = 1 + below(&mut rng, 4) as u32;
        let io_bytes = chunk_size_bytes as u64 * io_chunk_count as u64;
        let ring = below(&mut rng, 2) == 0;
        let data_bytes: u64 = capacities.iter().map(|c| c - 2 * MIB - 128 * 1024).sum();
        let limit_bytes = if ring {
            data_bytes / 2 + below(&mut rng, data_bytes * 2)
        } else {
            io_bytes + below(&mut rng, data_bytes * 6 / 5)
        } / 8
            * 8;
        let disk = below(&mut rng, members as u64) as usize;
        let fault = match below(&mut rng, 5) {
            // On a set of one, the recording fails and claims what completed; on a set of
            // several, the member is retired.
            0 => Fault::WriteError {
                disk,
                at_fraction: (below(&mut rng, 1000) as f64) / 1000.0,
                len_bytes: chunk_size_bytes as u64 * (1 + below(&mut rng, 8)),
                errno: [libc::EIO, libc::ENOSPC][below(&mut rng, 2) as usize],
            },
            1 => Fault::Stall {
                disk,
                at_write: 2 + below(&mut rng, 40),
                duration: Duration::from_millis(5 + below(&mut rng, 80)),
            },
            2 => Fault::Slow {
                disk,
                bytes_per_s: (20 + below(&mut rng, 200)) as f64 * 1e6,
            },
            _ => Fault::None,
        };
        // Operations a run takes, roughly: a few per member to format and open, one per I/O,
        // a few per checkpoint; crashes are drawn over all of it and a little past the end.
        let estimate = 12 * members as u64 + limit_bytes / io_bytes * 3 / 2 + 16;
        let crash_at = (below(&mut rng, 5) > 0).then(|| 1 + below(&mut rng, estimate * 6 / 5));
        Case {
            seed,
            capacities,
            chunk_size_bytes,
            io_chunk_count,
            queue_depth: 1 + below(&mut rng, 8) as u32,
            buffer_ios: 2 + below(&mut rng, 24),
            fill: if ring {
                Fill::Ring {
                    trim: below(&mut rng, 2) == 0,
                }
            } else {
                Fill::Linear
            },
            stripe: [Stripe::Adaptive, Stripe::RoundRobin][below(&mut rng, 2) as usize],
            sync_interval: Duration::from_micros(below(&mut rng, 4000)),
            limit_bytes,
            fault,
            crash_at,
        }
    }

    fn sim(&self) -> SimDisks {
        let images = self
            .capacities
            .iter()
            .map(|&c| vec![0u8; c as usize])
            .collect();
        SimDisks::from_images(images, LOGICAL_BLOCK_BYTES, self.seed)
    }

    fn inject(&self, sim: &SimDisks) {
        match self.fault {
            Fault::None => {}
            Fault::WriteError {
                disk,
                at_fraction,
                len_bytes,
                errno,
            } => {
                // Somewhere in the data area (past the index), never the metadata.
                let data_start = 2 * MIB + 128 * 1024;
                let span = self.capacities[disk] - data_start - 2 * len_bytes;
                let offset = (data_start + (span as f64 * at_fraction) as u64) / 4096 * 4096;
                sim.fail(RangeFault {
                    disk,
                    op: IoOp::Write,
                    offset_bytes: offset,
                    len_bytes,
                    errno,
                });
            }
            Fault::Stall {
                disk,
                at_write,
                duration,
            } => sim.stall(disk, at_write, duration),
            Fault::Slow { disk, bytes_per_s } => sim.slow(disk, bytes_per_s),
        }
        if let Some(operation) = self.crash_at {
            sim.crash_at(operation);
        }
    }

    fn options(&self) -> RecordOptions {
        let io_bytes = self.chunk_size_bytes as u64 * self.io_chunk_count as u64;
        RecordOptions {
            chunk_size_bytes: self.chunk_size_bytes,
            io_chunk_count: self.io_chunk_count,
            queue_depth: self.queue_depth,
            buffer_bytes: self.buffer_ios * io_bytes,
            stripe: self.stripe,
            fill: self.fill,
            label: format!("sim {}", self.seed),
            sync_interval: self.sync_interval,
            engine: EngineChoice::Auto,
            limit_bytes: Some(self.limit_bytes),
            pattern: true,
            safety: Safety::Check,
            on_member_failure: MemberFailure::Retire,
            member_timeout: MEMBER_TIMEOUT,
            ..RecordOptions::default()
        }
    }
}

/// What one case showed, for the coverage the run must reach.
#[derive(Debug, Default, Clone, Copy)]
struct Seen {
    crashed: bool,
    acknowledged_bytes: u64,
    recovered_bytes: u64,
    retired: bool,
    formatted: bool,
}

fn run(case: &Case) -> Result<Seen, String> {
    let sim = case.sim();
    case.inject(&sim);
    let pattern = Pattern::new(case.seed | 1);
    let mut source = PatternSource(pattern);
    let control = Control::new();
    let progress = Progress::default();
    let result = writer::record_on(
        Members::Sim(&sim),
        &mut source,
        &case.options(),
        &control,
        &progress,
    );
    let acknowledged_bytes = progress.durable_bytes.load(Ordering::Relaxed);
    let crashed = sim.crashed();
    if !crashed {
        // A clean end: everything recorded is acknowledged; then the power goes.
        sim.crash();
    }
    let mut seen = Seen {
        crashed,
        acknowledged_bytes,
        retired: result.as_ref().is_ok_and(|report| report.degraded),
        ..Seen::default()
    };
    if let Ok(report) = &result {
        let whole = report.outcome == RecordOutcome::Complete
            || report.outcome == RecordOutcome::TargetFull;
        if !crashed && report.error.is_none() && whole && acknowledged_bytes != report.stream_bytes
        {
            return Err(format!(
                "a clean end acknowledged {acknowledged_bytes} of {} bytes recorded ({:?}, \
                 chunks {}, unrecorded {}, lost {})",
                report.stream_bytes,
                report.outcome,
                report.chunk_count,
                report.unrecorded_bytes,
                report.lost_bytes
            ));
        }
        if !crashed
            && report.outcome == RecordOutcome::Complete
            && report.stream_bytes != case.limit_bytes
        {
            return Err(format!(
                "complete with {} of {} bytes",
                report.stream_bytes, case.limit_bytes
            ));
        }
    }
    let images = sim.power_cut_images().expect("crashed");
    let after = SimDisks::from_images(images, LOGICAL_BLOCK_BYTES, case.seed);
    let set = match volume::open_members(Members::Sim(&after), Access::Read, Safety::Check) {
        Ok(set) => set,
        Err(error) if acknowledged_bytes == 0 => {
            // The crash came before the set was whole: nothing was promised.
            let _ = error;
            return Ok(seen);
        }
        Err(error) => return Err(format!("the set does not open: {error}")),
    };
    seen.formatted = true;
    let entries = reader::recordings(&set).map_err(|e| format!("recordings: {e}"))?;
    let Some(entry) = entries.iter().find(|entry| entry.recording_id == 1) else {
        if acknowledged_bytes > 0 {
            return Err(format!(
                "{acknowledged_bytes} bytes acknowledged, no recording"
            ));
        }
        return Ok(seen);
    };
    let recovered = read_back(&set, entry, &pattern, case.chunk_size_bytes).map_err(|why| {
        let slots = slot_map(&set, entry.recording_id);
        format!(
            "{why}\n  acknowledged {acknowledged_bytes}, crashed {crashed}, report {:?}\n  entry {entry:?}\n{slots}",
            result.as_ref().map(|r| (r.outcome, r.stream_bytes, r.chunk_count, &r.error, r.members.iter().map(|m| (m.chunk_count, m.laps)).collect::<Vec<_>>()))
        )
    })?;
    seen.recovered_bytes = recovered.end;
    if recovered.end != entry.stream_len_bytes {
        return Err(format!(
            "the entry claims {} stream bytes, the chunks end at {}",
            entry.stream_len_bytes, recovered.end
        ));
    }
    if recovered.end < acknowledged_bytes {
        return Err(format!(
            "{acknowledged_bytes} bytes acknowledged, {} came back",
            recovered.end
        ));
    }
    let ring = matches!(case.fill, Fill::Ring { .. });
    if !ring && recovered.start != 0 {
        return Err(format!("a linear recording starts at {}", recovered.start));
    }
    Ok(seen)
}

/// Each member's data slots as `slot:sequence` (`-` blank, `x` not a chunk of the
/// recording), for the message of a failed case.
fn slot_map(set: &volume::VolumeSet, recording_id: u32) -> String {
    let mut text = String::new();
    for member in set.present() {
        let layout = member.layout();
        text.push_str(&format!("  member {}:", member.index()));
        for slot in 0..layout.data_slot_count {
            let offset = layout.data_slot_offset_bytes(slot).unwrap_or(0);
            let bytes =
                volume::read_aligned(&member.disk, offset, layout.chunk_size_bytes as usize);
            let token = match bytes.as_deref().map(nvrec::layout::decode_chunk) {
                Ok(Ok(view)) if view.header.recording_id == recording_id => {
                    let redirected = view
                        .header
                        .flags
                        .contains(nvrec::layout::ChunkFlags::REDIRECTED);
                    format!(
                        "{}{}",
                        view.header.sequence,
                        if redirected { "r" } else { "" }
                    )
                }
                Ok(Err(_))
                    if bytes
                        .as_ref()
                        .is_ok_and(|b| b[..128].iter().all(|&x| x == 0)) =>
                {
                    "-".into()
                }
                _ => "x".into(),
            };
            text.push_str(&format!(" {slot}:{token}"));
        }
        text.push('\n');
    }
    text
}

struct ReadBack {
    start: u64,
    end: u64,
}

/// Reads the recording, demanding one run of the pattern with nothing missing or damaged.
fn read_back(
    set: &volume::VolumeSet,
    entry: &nvrec::layout::RecordingEntry,
    pattern: &Pattern,
    chunk_size_bytes: u32,
) -> Result<ReadBack, String> {
    let control = Control::new();
    let progress = Progress::default();
    let mut problem: Option<String> = None;
    let mut span: Option<ReadBack> = None;
    let mut each = |item: Item<'_>| {
        match item {
            Item::Chunk { header, payload } => {
                let offset = header.stream_offset_bytes;
                if let Err(mismatch) = pattern.check(offset, payload, chunk_size_bytes as u64) {
                    problem = Some(format!("chunk {} differs: {mismatch:?}", header.sequence));
                    return false;
                }
                match span.as_mut() {
                    None => {
                        span = Some(ReadBack {
                            start: offset,
                            end: offset + payload.len() as u64,
                        })
                    }
                    Some(run) if run.end == offset && header.gap_bytes == 0 => {
                        run.end += payload.len() as u64
                    }
                    Some(run) => {
                        problem = Some(format!(
                            "chunk {} at stream offset {offset}, the run ended at {}",
                            header.sequence, run.end
                        ));
                        return false;
                    }
                }
            }
            Item::Missing {
                first_sequence,
                count,
            } => {
                problem = Some(format!("{count} chunks missing from {first_sequence}"));
                return false;
            }
            Item::Damage(damage) => {
                problem = Some(format!("damage: {damage:?}"));
                return false;
            }
        }
        true
    };
    reader::read_recording(
        set,
        entry,
        EngineChoice::Auto,
        &control,
        &progress,
        &mut each,
    )
    .map_err(|e| format!("reading: {e}"))?;
    if let Some(problem) = problem {
        return Err(problem);
    }
    Ok(span.unwrap_or(ReadBack {
        start: entry.stream_len_bytes,
        end: entry.stream_len_bytes,
    }))
}

/// Names a case that has run for longer than any should, and ends the process: a recorder
/// that hangs is a failure, and must not hang the test run with it.
fn watch(running: &[Mutex<Option<(u64, Instant)>>], finished: &AtomicBool) {
    const CASE_LIMIT: Duration = Duration::from_secs(60);
    while !finished.load(Ordering::SeqCst) {
        std::thread::sleep(Duration::from_millis(500));
        for slot in running {
            if let Some((seed, since)) = *slot.lock().unwrap() {
                if since.elapsed() > CASE_LIMIT {
                    eprintln!(
                        "seed {seed} (NVREC_SIM_SEED={seed} NVREC_SIM_CASES=1) has run for {:?}: \
                         the recorder hangs",
                        since.elapsed()
                    );
                    std::process::exit(101);
                }
            }
        }
    }
}

fn case_count() -> u64 {
    std::env::var("NVREC_SIM_CASES")
        .ok()
        .and_then(|text| text.parse().ok())
        .unwrap_or(1500)
}

fn first_seed() -> u64 {
    std::env::var("NVREC_SIM_SEED")
        .ok()
        .and_then(|text| text.parse().ok())
        .unwrap_or_else(|| {
            let nanos = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map(|d| d.as_nanos() as u64)
                .unwrap_or(1);
            nanos % 1_000_000_000
        })
}

#[test]
fn seeded_faults_and_crashes_never_lose_what_was_acknowledged() {
    let count = case_count();
    let first = first_seed();
    eprintln!("simulation: {count} cases from seed {first} (NVREC_SIM_SEED={first} repeats them)");
    let failures = Mutex::new(Vec::new());
    let totals = Mutex::new(Vec::new());
    let workers = std::thread::available_parallelism()
        .map_or(2, |n| n.get())
        .min(4) as u64;
    // Each worker's case and when it began: a case that hangs is named, then the run ends.
    let running: Vec<Mutex<Option<(u64, Instant)>>> =
        (0..workers).map(|_| Mutex::new(None)).collect();
    let finished = AtomicBool::new(false);
    let workers_done = AtomicU64::new(0);
    std::thread::scope(|scope| {
        scope.spawn(|| watch(&running, &finished));
        for worker in 0..workers {
            let (failures, totals) = (&failures, &totals);
            let (running, finished, workers_done) = (&running, &finished, &workers_done);
            scope.spawn(move || {
                for seed in (first + worker..first + count).step_by(workers as usize) {
                    let case = Case::draw(seed);
                    if count == 1 {
                        eprintln!("{case:?}");
                    }
                    *running[worker as usize].lock().unwrap() = Some((seed, Instant::now()));
                    let outcome = run(&case);
                    *running[worker as usize].lock().unwrap() = None;
                    match outcome {
                        Ok(seen) => totals.lock().unwrap().push(seen),
                        Err(why) => failures.lock().unwrap().push(format!(
                            "seed {seed} (NVREC_SIM_SEED={seed} NVREC_SIM_CASES=1): {why}\n  {case:?}"
                        )),
                    }
                }
                if workers_done.fetch_add(1, Ordering::SeqCst) + 1 == workers {
                    finished.store(true, Ordering::SeqCst);
                }
            });
        }
    });
    let failures = failures.into_inner().unwrap();
    assert!(
        failures.is_empty(),
        "{} of {count} cases failed:\n{}",
        failures.len(),
        failures.join("\n")
    );
    let totals = totals.into_inner().unwrap();
    let crashed_after_ack = totals
        .iter()
        .filter(|s| s.crashed && s.acknowledged_bytes > 0)
        .count();
    let recovered_more = totals
        .iter()
        .filter(|s| s.crashed && s.recovered_bytes > s.acknowledged_bytes)
        .count();
    let retired = totals.iter().filter(|s| s.retired).count();
    let unformatted = totals.iter().filter(|s| !s.formatted).count();
    eprintln!(
        "simulation: {} cases: {crashed_after_ack} crashed after an acknowledgement, \
         {recovered_more} recovered past it, {retired} retired a member, {unformatted} crashed \
         before the set was whole",
        totals.len()
    );
    if count >= 200 {
        // The run must reach what it is for; a generator that stopped producing crashes
        // after acknowledgements or retirements would pass while testing nothing.
        assert!(
            crashed_after_ack * 25 >= totals.len(),
            "too few crashes after an acknowledgement"
        );
        assert!(retired * 60 >= totals.len(), "too few retirements");
        assert!(
            recovered_more > 0,
            "recovery never found chunks past a checkpoint"
        );
    }
}
