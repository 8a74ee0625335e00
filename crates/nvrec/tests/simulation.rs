//! The recorder against simulated disks with injected faults, in this process, seeded.
//!
//! Each case draws, from its seed, a set (one to three members of different sizes), a
//! recording (linear or ring, striping, chunk and I/O sizes, queue depth, pool, sync
//! interval, length) and what goes wrong: nothing, a write error (EIO or ENOSPC) over a
//! range of one member, a stall of one member shorter or longer than the member timeout, a
//! member slowed to a crawl, a member whose flushes start failing, a member that dies (its
//! writes, discards and flushes all fail from then on), or a member whose metadata writes
//! (checkpoints, entries) start failing; the last three begin at a drawn moment (a write or
//! a flush of that member: around a checkpoint), and on a set of several members a second
//! such failure may follow on another member, while the first is already retired. In most
//! cases, a crash at a drawn operation follows, with a power cut that drops, keeps or tears
//! every write not yet flushed. Then the set is opened from what the power cut left and the
//! recording read back. Everything the recorder acknowledged (a durable checkpoint, or the
//! closed entry) must come back byte-exact, and nothing must be claimed that does not: the
//! recording reads as one run of the pattern, without a missing or damaged chunk, to the
//! end its entry states. A member whose flush fails has what it completed since its last
//! good flush written again to another member, so that a power cut takes nothing the
//! recording needs; the exceptions are the chunks the recorder reports it could not write
//! elsewhere (`member_errors`: a member that timed out and whose flush then failed, a
//! second member failing while the first one's writes were going to it, no room): where
//! the power cut took those, the reader must report them missing (or damaged).
//!
//! Beyond that, after every case: every byte taken from the source is recorded or counted
//! (the report's unrecorded bytes) where the recorder ended on its own, and the entry the
//! recorder closed accounts for every chunk of the recording on the drives: a scan of the
//! members (`recording::scan`) finds none past its end, unless a hole (a write that never
//! landed) comes first. So a recording can no longer end, after a failure, at an entry that
//! claims less than the members hold while the tools call it whole.
//!
//! `NVREC_SIM_CASES` sets the number of cases (default 1500), `NVREC_SIM_SEED` the first
//! seed (default: drawn, and printed); a failure names the seed that repeats it (the
//! faults and the crash point repeat; thread timing does not, so a rare failure may need
//! a few runs).

use nvrec::device::{Access, Safety};
use nvrec::engine::{DiskFault, EngineChoice, FaultStart, IoOp, RangeFault, SimDisks};
use nvrec::layout::{decode_chunk, VolumeLayout};
use nvrec::pattern::Pattern;
use nvrec::recording::disk::Members;
use nvrec::recording::reader::{self, Item};
use nvrec::recording::scan;
use nvrec::recording::volume;
use nvrec::recording::writer::{self, RecordOptions, RecordOutcome};
use nvrec::recording::{Fill, MemberFailure, Stripe};
use nvrec::source::{PatternSource, Source};
use nvrec::stream::{Control, Progress};
use std::collections::{BTreeMap, BTreeSet};
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
    /// Flushes of `disk` fail from `start` on: its writes land, nothing more is durable.
    FailingFlush {
        disk: usize,
        start: FaultStart,
    },
    /// `disk` dies at `start`: every write, discard and flush fails from then on.
    Dying {
        disk: usize,
        start: FaultStart,
    },
    /// Metadata writes to `disk` (its index: checkpoints, entries) fail from `start` on.
    MetaWriteError {
        disk: usize,
        start: FaultStart,
    },
}

/// A moment in a member's life: one of its writes (of the data, or the metadata of a
/// checkpoint) or one of its flushes (each checkpoint flushes every member twice).
fn draw_start(rng: &mut u64, writes_per_disk: u64) -> FaultStart {
    if below(rng, 2) == 0 {
        FaultStart::AtWrite(4 + below(rng, writes_per_disk + 8))
    } else {
        FaultStart::AtFlush(2 + below(rng, 24))
    }
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
    /// A later failure of another member (sets of several members).
    second: Option<Fault>,
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
        let writes_per_disk = limit_bytes / io_bytes / members as u64;
        let fault = match below(&mut rng, 8) {
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
            3 => Fault::FailingFlush {
                disk,
                start: draw_start(&mut rng, writes_per_disk),
            },
            4 => Fault::Dying {
                disk,
                start: draw_start(&mut rng, writes_per_disk),
            },
            5 => Fault::MetaWriteError {
                disk,
                start: draw_start(&mut rng, writes_per_disk),
            },
            _ => Fault::None,
        };
        // Another member fails later, often while the first is already retired.
        let second = (members > 1 && !matches!(fault, Fault::None) && below(&mut rng, 2) == 0)
            .then(|| {
                let other = (disk + 1 + below(&mut rng, members as u64 - 1) as usize) % members;
                let start = FaultStart::AtWrite(4 + below(&mut rng, writes_per_disk + 8));
                match below(&mut rng, 3) {
                    0 => Fault::FailingFlush { disk: other, start },
                    1 => Fault::MetaWriteError { disk: other, start },
                    _ => Fault::Dying { disk: other, start },
                }
            });
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
            second,
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
        for fault in std::iter::once(&self.fault).chain(&self.second) {
            self.inject_one(sim, *fault);
        }
        if let Some(operation) = self.crash_at {
            sim.crash_at(operation);
        }
    }

    /// Whether a fault makes a member's flushes fail.
    fn fails_flushes(&self) -> bool {
        std::iter::once(&self.fault)
            .chain(&self.second)
            .any(|fault| matches!(fault, Fault::FailingFlush { .. } | Fault::Dying { .. }))
    }

    fn inject_one(&self, sim: &SimDisks, fault: Fault) {
        match fault {
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
            Fault::FailingFlush { disk, start } => sim.fail_from(
                DiskFault::FailingFlush {
                    disk,
                    errno: libc::EIO,
                },
                start,
            ),
            Fault::Dying { disk, start } => sim.fail_from(DiskFault::Dying { disk }, start),
            Fault::MetaWriteError { disk, start } => {
                // The index area: checkpoint slots and the recording table.
                let layout = self.layout(disk);
                sim.fail_from(
                    DiskFault::Range(RangeFault {
                        disk,
                        op: IoOp::Write,
                        offset_bytes: layout.index_offset_bytes,
                        len_bytes: layout.data_offset_bytes - layout.index_offset_bytes,
                        errno: libc::EIO,
                    }),
                    start,
                )
            }
        }
    }

    /// Data bytes of the smallest member: a linear recording no longer than half of it
    /// never fills a member.
    fn smallest_data_bytes(&self) -> u64 {
        (0..self.capacities.len())
            .map(|disk| {
                let layout = self.layout(disk);
                layout.data_slot_count * layout.chunk_size_bytes as u64
            })
            .min()
            .unwrap_or(0)
    }

    fn layout(&self, disk: usize) -> VolumeLayout {
        VolumeLayout::compute(
            self.capacities[disk],
            self.chunk_size_bytes,
            LOGICAL_BLOCK_BYTES,
        )
        .expect("a layout")
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
    /// A member's flush failed, and the recording went on or ended with it.
    flush_failed: bool,
    /// A retired member's flush failed and the recording went on (the defect this guards
    /// against ended it, its entry at the last checkpoint).
    retired_flush_failed: bool,
    /// Chunks a power cut took from a member whose flush had failed, reported missing.
    unflushed_lost: bool,
    /// The recorder reported chunks of such a member it could not write elsewhere.
    admitted: bool,
}

/// The pattern, counting what the recorder takes.
struct Counted {
    source: PatternSource,
    taken_bytes: u64,
}

impl Source for Counted {
    fn read_at(&mut self, offset_bytes: u64, buf: &mut [u8]) -> std::io::Result<usize> {
        let read = self.source.read_at(offset_bytes, buf)?;
        self.taken_bytes += read as u64;
        Ok(read)
    }

    fn may_block(&self) -> bool {
        self.source.may_block()
    }
}

/// Chunks of the recording that a power cut may take from a member whose flush failed:
/// those in writes it completed and no flush made durable, and those durable in slots such
/// a write (or discard) went over, by sequence, with their stream offset and payload
/// length; and the byte ranges of those writes, by disk.
///
/// In a ring the reader finds where the surviving run starts from the oldest chunk of each
/// member that went round; where the power cut brought back an older lap's chunk under a
/// newer write a member whose flush failed never made durable, that start may lie before
/// chunks the ring rightly overwrote elsewhere, which the reader then reports missing: in
/// such a ring (`took`), a missing run is accepted anywhere, never a damaged chunk.
#[derive(Debug, Default)]
struct Unflushed {
    chunks: BTreeMap<u64, (u64, u64)>,
    ranges: Vec<(usize, u64, u64)>,
    /// A ring where the power cut took something from such writes.
    took: bool,
    /// The recorder reported chunks a member whose flush failed held that it could not
    /// write again elsewhere (a second member failed while the first one's writes were
    /// going to it, or there was no room): where they were lost, and around the hole
    /// that member left in the first one's run, the reader must report missing and
    /// damaged chunks, and may anywhere.
    admitted: bool,
}

impl Unflushed {
    fn find(case: &Case, sim: &SimDisks, recording_id: u32) -> Unflushed {
        let mut unflushed = Unflushed::default();
        let durable = sim.durable_images();
        let mut note = |slot_bytes: &[u8]| {
            if let Ok(view) = decode_chunk(slot_bytes) {
                let header = view.header;
                if header.recording_id == recording_id {
                    unflushed.chunks.insert(
                        header.sequence,
                        (header.stream_offset_bytes, header.payload_len_bytes as u64),
                    );
                }
            }
        };
        let mut ranges = Vec::new();
        for (disk, image) in durable.iter().enumerate() {
            if sim.failed_flushes(disk) == 0 {
                continue;
            }
            let layout = case.layout(disk);
            let chunk = layout.chunk_size_bytes as u64;
            let writes = sim.unflushed_writes(disk);
            for (offset, data) in &writes {
                ranges.push((disk, *offset, data.len() as u64));
                if *offset < layout.data_offset_bytes {
                    continue; // Metadata.
                }
                for slot_bytes in data.chunks(chunk as usize) {
                    note(slot_bytes);
                }
            }
            for slot in 0..layout.data_slot_count {
                let at = layout.data_offset_bytes + slot * chunk;
                let covered = writes
                    .iter()
                    .any(|(o, data)| at < o + data.len() as u64 && *o < at + chunk);
                if covered {
                    note(&image[at as usize..(at + chunk) as usize]);
                }
            }
        }
        unflushed.ranges = ranges;
        unflushed
    }

    /// Notes whether the power cut (`images`) took anything the disks held from writes of
    /// members whose flush failed, in a ring.
    fn after_power_cut(&mut self, case: &Case, sim: &SimDisks, images: &[Vec<u8>]) {
        if !matches!(case.fill, Fill::Ring { .. }) {
            return;
        }
        let current = sim.current_images();
        self.took = self.ranges.iter().any(|&(disk, offset, len)| {
            let range = offset as usize..(offset + len) as usize;
            images[disk][range.clone()] != current[disk][range]
        });
    }

    fn holds(&self, disk: usize, offset_bytes: u64) -> bool {
        self.ranges
            .iter()
            .any(|&(d, o, l)| d == disk && (o..o + l).contains(&offset_bytes))
    }
}

fn run(case: &Case) -> Result<Seen, String> {
    let sim = case.sim();
    case.inject(&sim);
    let pattern = Pattern::new(case.seed | 1);
    let mut source = Counted {
        source: PatternSource(pattern),
        taken_bytes: 0,
    };
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
        flush_failed: sim.counters().failed_flush_count > 0,
        retired_flush_failed: result.as_ref().is_ok_and(|report| {
            report.error.is_none()
                && report
                    .member_errors
                    .iter()
                    .any(|e| e.error.contains("flushing"))
        }),
        ..Seen::default()
    };
    if !case.fails_flushes() && sim.counters().failed_flush_count > 0 {
        return Err("a flush failed where no fault says so".into());
    }
    let mut unflushed = Unflushed::find(case, &sim, 1);
    unflushed.admitted = !crashed
        && case.second.is_some()
        && result.as_ref().is_ok_and(|report| {
            report
                .member_errors
                .iter()
                .any(|e| e.unflushed_chunk_count > 0 && e.error.starts_with("chunks it completed"))
        });
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
        // Every byte taken is recorded or counted as not recorded.
        let counted = report.stream_bytes + report.unrecorded_bytes;
        if !crashed && counted != source.taken_bytes {
            return Err(format!(
                "{} bytes taken from the source, {} recorded and {} unrecorded",
                source.taken_bytes, report.stream_bytes, report.unrecorded_bytes
            ));
        }
        // A member's failing flush or metadata write, alone, never fails a set that has
        // another member with room left: the member is retired. (A linear set nearly full
        // may have none with room for its writes in flight.)
        let members = case.capacities.len();
        let flush_or_metadata = report
            .error
            .as_ref()
            .is_some_and(|error| error.contains("flushing") || error.contains("metadata"));
        let room = match case.fill {
            Fill::Ring { .. } => true,
            Fill::Linear => case.limit_bytes <= case.smallest_data_bytes() / 2,
        };
        if !crashed && flush_or_metadata && case.second.is_none() && members > 1 && room {
            return Err(format!(
                "one failing member of {members} ended the recording: {:?}",
                report.error
            ));
        }
    }
    let images = sim.power_cut_images().expect("crashed");
    unflushed.after_power_cut(case, &sim, &images);
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
    let describe = |why: String| {
        let slots = slot_map(&set, entry.recording_id);
        format!(
            "{why}\n  acknowledged {acknowledged_bytes}, crashed {crashed}, taken {}, report {:?}\n  entry {entry:?}\n{slots}",
            source.taken_bytes,
            result.as_ref().map(|r| (r.outcome, r.stream_bytes, r.unrecorded_bytes, r.chunk_count, &r.error, &r.member_errors, r.members.iter().map(|m| (m.chunk_count, m.laps)).collect::<Vec<_>>()))
        )
    };
    let recovered =
        read_back(&set, entry, &pattern, case.chunk_size_bytes, &unflushed).map_err(describe)?;
    seen.recovered_bytes = recovered.end;
    seen.unflushed_lost = recovered.unflushed_lost;
    seen.admitted = unflushed.admitted;
    if recovered.end != entry.stream_len_bytes {
        return Err(describe(format!(
            "the entry claims {} stream bytes, the chunks end at {}",
            entry.stream_len_bytes, recovered.end
        )));
    }
    if recovered.end < acknowledged_bytes {
        return Err(describe(format!(
            "{acknowledged_bytes} bytes acknowledged, {} came back",
            recovered.end
        )));
    }
    let ring = matches!(case.fill, Fill::Ring { .. });
    if !ring && recovered.start != 0 {
        return Err(format!("a linear recording starts at {}", recovered.start));
    }
    // The entry the recorder closed (not one recovery closed in memory) accounts for every
    // chunk on the drives.
    let closed_by_the_recorder = set
        .recordings()
        .map_err(|e| format!("entries: {e}"))?
        .iter()
        .any(|raw| raw.recording_id == 1 && raw.state != nvrec::layout::RecordingState::Open);
    if closed_by_the_recorder {
        accounts_for_the_drives(&set, entry).map_err(describe)?;
        if let Ok(report) = &result {
            if !crashed && entry.stream_len_bytes != report.stream_bytes + report.lost_bytes {
                return Err(describe(format!(
                    "the report says {} bytes recorded, the entry {}",
                    report.stream_bytes, entry.stream_len_bytes
                )));
            }
        }
    }
    Ok(seen)
}

/// Whether the chunks on the drives that lie past the entry's end come after a hole: a
/// sequence at the end that no member holds (a write that failed, or that a crash took).
/// A chunk there on a retired member, from a write it was given and never completed
/// before it was retired, is a leftover the recorder never acknowledged, and is passed.
fn accounts_for_the_drives(
    set: &volume::VolumeSet,
    entry: &nvrec::layout::RecordingEntry,
) -> Result<(), String> {
    let found = scan::scan(set, &Control::new()).map_err(|e| format!("scan: {e}"))?;
    let Some(found) = found.recordings.iter().find(|f| f.recording_id == 1) else {
        return Ok(());
    };
    if found.last_sequence < entry.end_sequence {
        return Ok(());
    }
    // Past the end by the headers: which of those chunks are whole, and where.
    let mut past: BTreeMap<u64, BTreeSet<u16>> = BTreeMap::new();
    for member in set.present() {
        let layout = member.layout();
        for slot in 0..layout.data_slot_count {
            let offset = layout.data_slot_offset_bytes(slot).unwrap_or(0);
            let Ok(bytes) =
                volume::read_aligned(&member.disk, offset, layout.chunk_size_bytes as usize)
            else {
                continue;
            };
            let Ok(view) = decode_chunk(&bytes) else {
                continue;
            };
            let header = view.header;
            if header.recording_id == 1
                && header.set_uuid == set.set_uuid
                && header.member_index == member.index()
                && header.slot_index == slot
                && header.sequence >= entry.end_sequence
            {
                past.entry(header.sequence)
                    .or_default()
                    .insert(member.index());
            }
        }
    }
    let Some(holders) = past.get(&entry.end_sequence) else {
        return Ok(()); // A hole first: the chunks past it are not one stream with the rest.
    };
    let acknowledged_there = holders.iter().any(|&member| {
        let retired = entry
            .retirements
            .iter()
            .filter(|r| r.member_index == member)
            .map(|r| r.first_sequence)
            .min();
        retired.is_none_or(|first| entry.end_sequence < first)
    });
    if acknowledged_there {
        return Err(format!(
            "the entry ends at sequence {} ({} bytes), yet member(s) {holders:?} hold it and \
             {} chunks of the recording lie past it",
            entry.end_sequence,
            entry.stream_len_bytes,
            past.len()
        ));
    }
    Ok(())
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
    /// Chunks of a member whose flush failed were missing (a power cut took them).
    unflushed_lost: bool,
}

/// Reads the recording, demanding one run of the pattern with nothing missing or damaged,
/// but for chunks a member whose flush failed never made durable (`unflushed`), where
/// missing or damaged is what the reader must say.
fn read_back(
    set: &volume::VolumeSet,
    entry: &nvrec::layout::RecordingEntry,
    pattern: &Pattern,
    chunk_size_bytes: u32,
    unflushed: &Unflushed,
) -> Result<ReadBack, String> {
    let control = Control::new();
    let progress = Progress::default();
    let mut problem: Option<String> = None;
    let mut span: Option<ReadBack> = None;
    let mut unflushed_lost = false;
    // A missing run accepted where it was not known how long it was (see `Unflushed`).
    let mut gap = false;
    let mut each = |item: Item<'_>| {
        match item {
            Item::Chunk { header, payload } => {
                let offset = header.stream_offset_bytes;
                if let Err(mismatch) = pattern.check(offset, payload, chunk_size_bytes as u64) {
                    problem = Some(format!("chunk {} differs: {mismatch:?}", header.sequence));
                    return false;
                }
                if std::mem::take(&mut gap) {
                    if let Some(run) = span.as_mut() {
                        run.end = offset;
                    }
                }
                match span.as_mut() {
                    None => {
                        span = Some(ReadBack {
                            start: offset,
                            end: offset + payload.len() as u64,
                            unflushed_lost: false,
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
                // Only what a member whose flush failed had not made durable, and then the
                // run goes on past it.
                let known = (first_sequence..first_sequence + count)
                    .all(|sequence| unflushed.chunks.contains_key(&sequence));
                if !known && (unflushed.took || unflushed.admitted) {
                    unflushed_lost = true;
                    gap = true;
                    return true;
                }
                for sequence in first_sequence..first_sequence + count {
                    let Some(&(offset, len)) = unflushed.chunks.get(&sequence) else {
                        problem = Some(format!("{count} chunks missing from {first_sequence}"));
                        return false;
                    };
                    unflushed_lost = true;
                    match span.as_mut() {
                        None => {
                            span = Some(ReadBack {
                                start: offset,
                                end: offset + len,
                                unflushed_lost: true,
                            })
                        }
                        Some(run) if run.end == offset => run.end += len,
                        Some(run) => {
                            problem = Some(format!(
                                "missing chunk {sequence} at stream offset {offset}, the run \
                                 ended at {}",
                                run.end
                            ));
                            return false;
                        }
                    }
                }
            }
            Item::Damage(damage) => {
                let disk = damage.member_index as usize;
                if unflushed.admitted {
                    gap = true;
                } else if !unflushed.holds(disk, damage.offset_bytes) {
                    problem = Some(format!("damage: {damage:?}"));
                    return false;
                }
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
    let mut read = span.unwrap_or(ReadBack {
        start: entry.stream_len_bytes,
        end: entry.stream_len_bytes,
        unflushed_lost: false,
    });
    if gap {
        read.end = entry.stream_len_bytes; // Missing up to the end the entry states.
    }
    read.unflushed_lost |= unflushed_lost;
    Ok(read)
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
    let flush_failed = totals.iter().filter(|s| s.flush_failed).count();
    let retired_flush_failed = totals.iter().filter(|s| s.retired_flush_failed).count();
    let unflushed_lost = totals.iter().filter(|s| s.unflushed_lost).count();
    let admitted = totals.iter().filter(|s| s.admitted).count();
    eprintln!(
        "simulation: {} cases: {crashed_after_ack} crashed after an acknowledgement, \
         {recovered_more} recovered past it, {retired} retired a member, {unformatted} crashed \
         before the set was whole, {flush_failed} failed a flush ({retired_flush_failed} a \
         retired member's, the recording going on), {unflushed_lost} lost unflushed chunks of \
         such a member in the power cut (reported missing), {admitted} reported chunks of \
         such a member it could not write elsewhere",
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
        assert!(flush_failed * 30 >= totals.len(), "too few failed flushes");
        assert!(
            retired_flush_failed > 0,
            "no retired member's flush failed in a recording that went on"
        );
        assert!(
            recovered_more > 0,
            "recovery never found chunks past a checkpoint"
        );
    }
}
