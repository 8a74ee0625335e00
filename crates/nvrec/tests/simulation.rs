//! The recorder against simulated disks with injected faults, in this process, seeded.
//!
//! Each case draws, from its seed, a set (one to three members of different sizes), a
//! recording (linear or ring, striping, chunk and I/O sizes, queue depth, pool, sync
//! interval, length) and what goes wrong: nothing, a write error (EIO or ENOSPC) over a
//! range of one member, a stall of one member shorter or longer than the member timeout, a
//! member slowed to a crawl, a member whose flushes start failing, a member that dies (its
//! writes, discards and flushes all fail from then on), a member whose metadata writes
//! (checkpoints, entries) start failing, or a member that silently loses or misdirects one
//! write (it completes and is flushed, and its bytes are not there when read, or land at
//! another place of the member: a data write among the chunks, a metadata write among the
//! superblock, checkpoint and table slots); the last four begin at a drawn moment (a write or
//! a flush of that member: around a checkpoint; a silent metadata fault sometimes at the
//! set's format), and on a set of several members a second
//! such failure may follow on another member, while the first is already retired. Faults
//! also come combined on one member: ENOSPC over a range and flushes that start failing; a
//! stall, then failing flushes; failing flushes with the member's data unreadable from the
//! same moment, so that the read-back of what it completed since its last good flush fails
//! and those chunks must be reported (`member_errors`), never lost silently. A failing
//! member, a failing flush or failing metadata writes may also start at the set's first
//! writes (its format): the recording must then refuse cleanly (an error, nothing
//! acknowledged) or retire the member. In most cases, a crash at a drawn operation follows,
//! with a power cut that drops, keeps or tears every write not yet flushed. Then the set is
//! opened from what the power cut left and the recording read back. Everything the
//! recorder acknowledged (a durable checkpoint, or the closed entry) must come back
//! byte-exact, and nothing must be claimed that does not: the recording reads as one run
//! of the pattern, without a missing or damaged chunk, to the end its entry states. A
//! member whose flush fails has what it completed since its last good flush written again
//! to another member, so that a power cut takes nothing the recording needs; the
//! exceptions are the chunks the recorder reports it could not write elsewhere
//! (`member_errors`: a member that timed out and whose flush then failed, a second member
//! failing while the first one's writes were going to it, no room, a chunk that did not
//! read back): where the power cut took those, the reader must report them missing (or
//! damaged), and where a recording that ended cleanly misses any, the report must have
//! named such chunks.
//!
//! A write lost or misdirected must end loud, never as a wrong answer (see [`Silent`]): the
//! chunks it carried, and those it landed over, are reported missing, and the slots it was
//! given and landed at damaged (in a ring, a missing run is accepted anywhere: the slot keeps
//! an older lap's chunk); the read-back still checks every byte and the order of what it
//! returns, and never accepts less than was acknowledged, but where the write held the
//! recording's newest entry (its closing revision, or the first of a recording whose
//! checkpoints name it): that entry is lost, the recording reads as its older revision says
//! or is not listed at all, and the case counts as "entry lost", which the set must then
//! name (`health::check`: every copy lost, or an entry left open as the set went on past
//! it; `scan::unnamed` or `scan::unaccounted`: chunks past what the table says), or the
//! case fails. A lost or misdirected checkpoint leaves the older one, from which recovery
//! must still find everything acknowledged (in a ring, the chunks that the writer's next
//! lap discarded past the older checkpoint's position may then be reported missing). A struck write may also cost nothing (a later
//! write covers it); the run must see each kind strike and end loud (reported by the
//! reader, named by `health::check`, or an entry lost and named).
//!
//! Beyond that, after every case: every byte taken from the source is recorded or counted
//! (the report's unrecorded bytes) where the recorder ended on its own, and the entry the
//! recorder closed accounts for every chunk of the recording on the drives: a scan of the
//! members (`recording::scan`) finds none past its end, unless a hole (a write that never
//! landed) comes first. So a recording can no longer end, after a failure, at an entry that
//! claims less than the members hold while the tools call it whole. In some cases `repair`
//! then runs on the power-cut images with one member's reads failing (its metadata, some
//! of its data slots, or all of it): it must fail with an error or leave a set that, read
//! again without the fault, still passes the same checks, and a report that calls the set
//! whole (nothing left, nothing failed, nothing unaccounted) must be true.
//!
//! The simulated disks run on virtual time and nothing but the case's own thread touches
//! them (the durability coordinator runs inline, members one after another), so a seed
//! repeats exactly: the same operations, the same report, the same read-back, every time
//! (`a_seed_replays_exactly` holds runs of a few dozen seeds to it, by the disks' trace
//! hash).
//!
//! `NVREC_SIM_CASES` sets the number of cases (default [`DEFAULT_CASE_COUNT`] in the full run,
//! [`QUICK_CASE_COUNT`] in the quick one),
//! `NVREC_SIM_SEED` the first seed (default: drawn, and printed); a failure names the seed
//! that repeats it: `NVREC_SIM_SEED=N NVREC_SIM_CASES=1` runs that case alone and prints
//! what it drew and what it did (the trace hash, the report, the read-back), the same in
//! every run.

use nvrec::control::{Control, Progress};
use nvrec::device::{Access, Safety};
use nvrec::engine::{DiskFault, EngineChoice, FaultStart, IoOp, RangeFault, SilentWrite, SimDisks};
use nvrec::layout::{decode_chunk, Checkpoint, RecordingEntry, RetirementCause, VolumeLayout};
use nvrec::pattern::Pattern;
use nvrec::recording::disk::Members;
use nvrec::recording::reader::{self, Item};
use nvrec::recording::scan;
use nvrec::recording::volume;
use nvrec::recording::writer::{
    self, MemberError, RecordOptions, RecordOutcome, RecordReport, Unconfirmed,
};
use nvrec::recording::{health, repair, Fill, MemberFailure, RecordingError, Stripe};
use nvrec::recording::{MemberFault, RecordingFailure};
use nvrec::source::{PatternSource, Source};
use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

#[path = "simulation/overload.rs"]
mod overload;

const MIB: u64 = 1 << 20;
const LOGICAL_BLOCK_BYTES: u32 = 4096;
const MEMBER_TIMEOUT: Duration = Duration::from_millis(40);

fn failing_flush(disk: usize) -> DiskFault {
    DiskFault::FailingFlush {
        disk,
        errno: libc::EIO,
    }
}

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
    /// ENOSPC over a range of `disk`'s data area, and its flushes failing from `start` on.
    NoSpaceThenFailingFlush {
        disk: usize,
        at_fraction: f64,
        len_bytes: u64,
        start: FaultStart,
    },
    /// `disk` stalls at its `at_write`-th write for `duration`; from `start` (drawn after the stall
    /// began) on, its flushes fail.
    StallThenFailingFlush {
        disk: usize,
        at_write: u64,
        duration: Duration,
        start: FaultStart,
    },
    /// From `start` on, `disk`'s flushes fail and reads of its data area fail with EIO: what
    /// it completed since its last good flush cannot be read back to be written again.
    FailingFlushUnreadable {
        disk: usize,
        start: FaultStart,
    },
    /// One write to `area` of `disk` from `start` on completes, is flushed, and is lost:
    /// what the place held stays.
    LostWrite {
        disk: usize,
        area: Area,
        start: FaultStart,
    },
    /// One write to `area` of `disk` from `start` on completes, is flushed, and lands
    /// `shift` slots of the area away (chunks in the data area, metadata blocks below it),
    /// over what was there.
    MisdirectedWrite {
        disk: usize,
        area: Area,
        start: FaultStart,
        shift: i64,
    },
}

/// Where on a member a silent fault strikes a write.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Area {
    /// The data area: chunks.
    Data,
    /// Below the data area: superblock copy A, the checkpoint slots, the recording table.
    Metadata,
}

impl Fault {
    /// The member it strikes (none: 0).
    fn disk(&self) -> usize {
        match *self {
            Fault::None => 0,
            Fault::WriteError { disk, .. }
            | Fault::Stall { disk, .. }
            | Fault::Slow { disk, .. }
            | Fault::FailingFlush { disk, .. }
            | Fault::Dying { disk, .. }
            | Fault::MetaWriteError { disk, .. }
            | Fault::NoSpaceThenFailingFlush { disk, .. }
            | Fault::StallThenFailingFlush { disk, .. }
            | Fault::FailingFlushUnreadable { disk, .. }
            | Fault::LostWrite { disk, .. }
            | Fault::MisdirectedWrite { disk, .. } => disk,
        }
    }
}

/// Reads of one member that fail while `repair` runs on the power-cut images.
#[derive(Debug, Clone, Copy)]
struct RepairReadFault {
    disk: usize,
    region: Region,
}

/// Where on a member.
#[derive(Debug, Clone, Copy)]
enum Region {
    /// Superblocks, checkpoint slots and the recording table.
    Metadata,
    /// A run of data slots, from a fraction of the data area on.
    DataSlots { at_fraction: f64, slot_count: u64 },
    /// The whole member.
    Everything,
}

/// Drawn into [`Case::repair`] this often (one case in N).
const REPAIR_ONE_IN: u64 = 6;

/// A moment in a member's life: one of its writes (of the data, or the metadata of a
/// checkpoint) or one of its flushes (each checkpoint flushes every member twice).
fn draw_start(rng: &mut u64, writes_per_disk: u64) -> FaultStart {
    if below(rng, 2) == 0 {
        FaultStart::AtWrite(4 + below(rng, writes_per_disk + 8))
    } else {
        FaultStart::AtFlush(2 + below(rng, 24))
    }
}

/// A moment among the set's first writes and flushes, while it is formatted (format
/// zeroes each member's index, writes its superblocks and first checkpoint, and flushes).
fn draw_format_start(rng: &mut u64) -> FaultStart {
    match below(rng, 3) {
        0 => FaultStart::Now,
        1 => FaultStart::AtWrite(1 + below(rng, 4)),
        _ => FaultStart::AtFlush(1 + below(rng, 2)),
    }
}

/// A failure of `disk` that starts at the set's format.
fn draw_format_fault(rng: &mut u64, disk: usize) -> Fault {
    let start = draw_format_start(rng);
    match below(rng, 3) {
        0 => Fault::Dying { disk, start },
        1 => Fault::FailingFlush { disk, start },
        _ => Fault::MetaWriteError { disk, start },
    }
}

/// The value of [`Case::draw`]'s fault draw that makes a case's fault a silent one, drawn
/// after everything else (a value that drew no fault before silent faults were drawn:
/// every other seed draws the case it always did).
const SILENT_FAULT_DRAW: u64 = 11;

/// A write of `disk` acknowledged and lost or misdirected, in its data or its metadata.
fn draw_silent_fault(rng: &mut u64, disk: usize, writes_per_disk: u64) -> Fault {
    let area = [Area::Data, Area::Metadata][below(rng, 2) as usize];
    // Some metadata faults strike the set's format: its superblocks and first checkpoint.
    let start = match area {
        Area::Metadata if below(rng, 4) == 0 => draw_format_start(rng),
        _ => draw_start(rng, writes_per_disk),
    };
    if below(rng, 2) == 0 {
        return Fault::LostWrite { disk, area, start };
    }
    // Mostly to a neighbour (the other checkpoint slot, the other copy of an entry, the
    // next chunks), sometimes further.
    let distance = match below(rng, 4) {
        0 => 1 + below(rng, 64) as i64,
        _ => 1 + below(rng, 3) as i64,
    };
    let shift = [distance, -distance][below(rng, 2) as usize];
    Fault::MisdirectedWrite {
        disk,
        area,
        start,
        shift,
    }
}

fn draw_repair_fault(rng: &mut u64, members: usize) -> Option<RepairReadFault> {
    if below(rng, REPAIR_ONE_IN) != 0 {
        return None;
    }
    let disk = below(rng, members as u64) as usize;
    let region = match below(rng, 3) {
        0 => Region::Metadata,
        1 => Region::DataSlots {
            at_fraction: below(rng, 1000) as f64 / 1000.0,
            slot_count: 1 + below(rng, 16),
        },
        _ => Region::Everything,
    };
    Some(RepairReadFault { disk, region })
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
    /// `fault` starts at the set's format.
    at_format: bool,
    /// `repair` runs on the power-cut images with this member's reads failing.
    repair: Option<RepairReadFault>,
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
        let mut at_format = false;
        let fault_draw = below(&mut rng, 12);
        let fault = match fault_draw {
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
            6 => Fault::NoSpaceThenFailingFlush {
                disk,
                at_fraction: (below(&mut rng, 1000) as f64) / 1000.0,
                len_bytes: chunk_size_bytes as u64 * (1 + below(&mut rng, 8)),
                start: draw_start(&mut rng, writes_per_disk),
            },
            7 => {
                let at_write = 2 + below(&mut rng, 40);
                Fault::StallThenFailingFlush {
                    disk,
                    at_write,
                    duration: Duration::from_millis(5 + below(&mut rng, 80)),
                    start: FaultStart::AtWrite(at_write + 1 + below(&mut rng, 8)),
                }
            }
            8 => Fault::FailingFlushUnreadable {
                disk,
                start: draw_start(&mut rng, writes_per_disk),
            },
            9 => {
                at_format = true;
                draw_format_fault(&mut rng, disk)
            }
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
        let repair = draw_repair_fault(&mut rng, members);
        let mut case = Case {
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
            at_format,
            repair,
        };
        // New draws come last, so that the draws above stay what they were for every seed.
        if fault_draw == SILENT_FAULT_DRAW {
            case.fault = draw_silent_fault(&mut rng, disk, writes_per_disk);
        }
        case
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
            .any(|fault| {
                matches!(
                    fault,
                    Fault::FailingFlush { .. }
                        | Fault::Dying { .. }
                        | Fault::NoSpaceThenFailingFlush { .. }
                        | Fault::StallThenFailingFlush { .. }
                        | Fault::FailingFlushUnreadable { .. }
                )
            })
    }

    fn inject_one(&self, sim: &SimDisks, fault: Fault) {
        match fault {
            Fault::None => {}
            Fault::WriteError {
                disk,
                at_fraction,
                len_bytes,
                errno,
            } => sim.fail(self.data_range(disk, at_fraction, len_bytes, errno)),
            Fault::Stall {
                disk,
                at_write,
                duration,
            } => sim.stall(disk, at_write, duration),
            Fault::Slow { disk, bytes_per_s } => sim.slow(disk, bytes_per_s),
            Fault::FailingFlush { disk, start } => sim.fail_from(failing_flush(disk), start),
            Fault::Dying { disk, start } => sim.fail_from(DiskFault::Dying { disk }, start),
            Fault::NoSpaceThenFailingFlush {
                disk,
                at_fraction,
                len_bytes,
                start,
            } => {
                sim.fail(self.data_range(disk, at_fraction, len_bytes, libc::ENOSPC));
                sim.fail_from(failing_flush(disk), start);
            }
            Fault::StallThenFailingFlush {
                disk,
                at_write,
                duration,
                start,
            } => {
                sim.stall(disk, at_write, duration);
                sim.fail_from(failing_flush(disk), start);
            }
            Fault::FailingFlushUnreadable { disk, start } => {
                let layout = self.layout(disk);
                let data = DiskFault::Range(RangeFault {
                    disk,
                    op: IoOp::Read,
                    offset_bytes: layout.data_offset_bytes,
                    len_bytes: self.capacities[disk] - layout.data_offset_bytes,
                    errno: libc::EIO,
                });
                sim.fail_from(failing_flush(disk), start);
                sim.fail_from(data, start);
            }
            Fault::LostWrite { disk, area, start } => {
                sim.fail_from(self.silent(disk, area, SilentWrite::Lost), start)
            }
            Fault::MisdirectedWrite {
                disk,
                area,
                start,
                shift,
            } => {
                let layout = self.layout(disk);
                let slot_bytes = match area {
                    Area::Data => layout.chunk_size_bytes,
                    Area::Metadata => layout.meta_block_bytes,
                };
                let shift_bytes = shift * i64::from(slot_bytes);
                let write = SilentWrite::Misdirected { shift_bytes };
                sim.fail_from(self.silent(disk, area, write), start)
            }
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

    /// A silent fault over `area` of `disk`.
    fn silent(&self, disk: usize, area: Area, write: SilentWrite) -> DiskFault {
        let layout = self.layout(disk);
        let (offset_bytes, len_bytes) = match area {
            Area::Data => (
                layout.data_offset_bytes,
                layout.data_slot_count * u64::from(layout.chunk_size_bytes),
            ),
            Area::Metadata => (0, layout.data_offset_bytes),
        };
        DiskFault::Silent {
            disk,
            offset_bytes,
            len_bytes,
            write,
        }
    }

    /// A write fault over `len_bytes` of `disk`'s data area (past the index, never the
    /// metadata), at `at_fraction` of it.
    fn data_range(&self, disk: usize, at_fraction: f64, len_bytes: u64, errno: i32) -> RangeFault {
        let data_start = 2 * MIB + 128 * 1024;
        let span = self.capacities[disk] - data_start - 2 * len_bytes;
        let offset = (data_start + (span as f64 * at_fraction) as u64) / 4096 * 4096;
        RangeFault {
            disk,
            op: IoOp::Write,
            offset_bytes: offset,
            len_bytes,
            errno,
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
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
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
    /// `repair` ran with a member's reads failing, and its outcome passed.
    repaired: bool,
    /// `repair` refused to write over metadata it could not read.
    repair_refused: bool,
    /// A fault from format on: the recording refused, or went on without the member.
    format_refused: bool,
    format_retired: bool,
    /// The report named chunks that did not read back from a member whose flush failed.
    unread_reported: bool,
    /// A member was retired for a write that outlived the member timeout (a stall).
    timed_out: bool,
    /// A write a silent fault struck, and whether the case ended loud about it.
    struck: Option<Struck>,
    /// The newest entry of the recording was in a lost or misdirected metadata write: the
    /// recording reads as its older entry says, or not at all (`scan` finds it by its
    /// chunks).
    entry_lost: bool,
}

/// A write a silent fault struck in a case.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Struck {
    kind: Silently,
    /// The reader reported what it cost (missing or damaged chunks), or the metadata check
    /// (`health::check`) named the place it struck, or the entry it held was lost.
    loud: bool,
}

/// What a silent fault did to a write.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Silently {
    LostData,
    MisdirectedData,
    LostMetadata,
    MisdirectedMetadata,
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
        let disks = sim.disk_count();
        if (0..disks).all(|disk| sim.failed_flushes(disk) == 0) {
            return unflushed; // No member's flush failed: nothing to look for.
        }
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
        if !matches!(case.fill, Fill::Ring { .. }) || self.ranges.is_empty() {
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

/// What silent faults (a write acknowledged, flushed, and lost or misdirected) did to a
/// case, and what the read-back may find for it.
///
/// A struck data write's chunks are gone from where they were written, and so are the
/// chunks it displaced where it landed: the reader must report them missing and the slots
/// (where it was given, where it landed) damaged, or it may, and nothing else. In a ring
/// the slot it was given keeps an older lap's chunk, which the reader may take for the
/// member's oldest, as it does after a power cut (see [`Unflushed`]): a missing run is then
/// accepted anywhere, never a damaged chunk elsewhere, never a wrong byte. A struck
/// metadata write leaves the older copy of what it held (the format writes checkpoints
/// and an entry's revisions in turn to alternating slots): what was acknowledged must still
/// come back, unless the write held the recording's newest entry (its closing revision, or
/// the first, of a recording whose checkpoints name it), which is then lost (`entry_lost`:
/// the recording reads as the older revision says, or is not listed).
#[derive(Debug, Default)]
struct Silent {
    struck: Option<Silently>,
    /// Chunks of the recording a struck data write carried or displaced, by sequence:
    /// (stream offset, payload length).
    chunks: BTreeMap<u64, (u64, u64)>,
    /// Where struck writes were given and where they landed: (disk, offset, length).
    ranges: Vec<(usize, u64, u64)>,
    /// A ring where a data write, or a checkpoint of the recording, was struck.
    ring: bool,
    /// Revisions of the recording's entry that struck metadata writes carried or displaced.
    entry_revisions: Vec<u64>,
}

impl Silent {
    fn find(case: &Case, sim: &SimDisks, recording_id: u32) -> Silent {
        let mut silent = Silent::default();
        for strike in sim.silent_writes() {
            let layout = case.layout(strike.disk);
            let data = strike.offset_bytes >= layout.data_offset_bytes;
            let len_bytes = strike.data.len() as u64;
            silent.struck = Some(match (data, strike.landed_at_bytes) {
                (true, None) => Silently::LostData,
                (true, Some(_)) => Silently::MisdirectedData,
                (false, None) => Silently::LostMetadata,
                (false, Some(_)) => Silently::MisdirectedMetadata,
            });
            silent
                .ranges
                .push((strike.disk, strike.offset_bytes, len_bytes));
            if let Some(at) = strike.landed_at_bytes {
                silent.ranges.push((strike.disk, at, len_bytes));
            }
            // What it wrote, and what its landing place held, in whole slots.
            let slot_bytes = match data {
                true => u64::from(layout.chunk_size_bytes),
                false => u64::from(layout.meta_block_bytes),
            };
            let base = match data {
                true => layout.data_offset_bytes,
                false => 0,
            };
            let held: Vec<&[u8]> = std::iter::once((strike.offset_bytes, &strike.data))
                .chain(strike.displaced.iter().map(|(at, bytes)| (*at, bytes)))
                .flat_map(|(at, bytes)| {
                    // From the first slot boundary in the piece.
                    let skip = ((slot_bytes - (at - base) % slot_bytes) % slot_bytes) as usize;
                    bytes
                        .get(skip..)
                        .unwrap_or(&[])
                        .chunks_exact(slot_bytes as usize)
                })
                .collect();
            if data {
                silent.ring |= matches!(case.fill, Fill::Ring { .. });
                for slot_bytes in &held {
                    if let Ok(view) = decode_chunk(slot_bytes) {
                        let header = view.header;
                        if header.recording_id == recording_id {
                            silent.chunks.insert(
                                header.sequence,
                                (header.stream_offset_bytes, header.payload_len_bytes as u64),
                            );
                        }
                    }
                }
                continue;
            }
            for bytes in &held {
                if let Ok(entry) = RecordingEntry::decode(bytes) {
                    if entry.recording_id == recording_id {
                        silent.entry_revisions.push(entry.revision);
                    }
                }
                // A ring's checkpoint lost: its writer's next lap may have discarded chunks
                // past the older checkpoint's position, which the reader reports missing.
                if let Ok(checkpoint) = Checkpoint::decode(bytes) {
                    if checkpoint.recording_id == recording_id {
                        silent.ring |= matches!(case.fill, Fill::Ring { .. });
                    }
                }
            }
        }
        silent
    }

    /// Whether the recording's entry read (`None`: none found) is older than one a struck
    /// metadata write held: its newest was lost.
    fn entry_lost(&self, read: Option<&RecordingEntry>) -> bool {
        let read_revision = read.map_or(0, |entry| entry.revision);
        self.entry_revisions.iter().any(|&r| r > read_revision)
    }

    fn holds(&self, disk: usize, offset_bytes: u64) -> bool {
        self.ranges
            .iter()
            .any(|&(d, o, l)| d == disk && (o..o + l).contains(&offset_bytes))
    }

    /// Whether the metadata check names a place a struck metadata write was given or
    /// landed at, or a structure lost on every member.
    fn named(&self, damage: &[health::MetaDamage]) -> bool {
        damage
            .iter()
            .any(|d| match (d.member_index, d.offset_bytes) {
                (Some(index), Some(offset)) => self.holds(index as usize, offset),
                _ => d.severity == health::Severity::Lost,
            })
    }
}

/// Whether the set says that recording 1's newest entry was lost, where `entry` is what the
/// table holds of it (`None`: nothing): the metadata check names the loss (every copy gone,
/// or an entry left open as the set went on past it), `scan::unnamed` finds the recording
/// by its chunks, or the look past the entry's end finds chunks it does not account for.
fn entry_loss_named(
    set: &volume::VolumeSet,
    entry: Option<&RecordingEntry>,
) -> Result<bool, String> {
    let damage = health::check(set).map_err(|e| format!("health: {e}"))?;
    let named = damage
        .iter()
        .any(|d| d.severity == health::Severity::Lost && d.problem.starts_with("recording 1:"));
    let unnamed = scan::unnamed(set).map_err(|e| format!("unnamed: {e}"))?;
    let unaccounted = entry.is_some_and(|entry| !scan::unaccounted(set, entry).is_clear());
    Ok(named || unnamed.iter().any(|e| e.recording_id == 1) || unaccounted)
}

/// What a case did, to compare two runs of one seed by: the disks' trace, the report, the
/// read-back and the repair, in words.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
struct Replay {
    trace_hash: u64,
    trace_len: u64,
    report: String,
    read_back: String,
    repair: String,
}

/// Runs a case: what it showed (or why it failed) and what it did.
fn run(case: &Case) -> (Result<Seen, String>, Replay) {
    let sim = case.sim();
    case.inject(&sim);
    let mut replay = Replay::default();
    let outcome = run_on(case, &sim, &mut replay);
    replay.trace_hash = sim.trace_hash();
    replay.trace_len = sim.trace_len();
    (outcome, replay)
}

/// The report, as far as it must repeat (not the CPU time it took).
fn report_summary(result: &Result<RecordReport, RecordingError>) -> String {
    let Ok(report) = result else {
        return format!("{result:?}");
    };
    format!(
        "{:?} set {} sequences {}..{} chunks {} stream {} lost {} unrecorded {} written {} \
         checkpoints {} elapsed {} s retirements {:?} member errors {:?} error {:?}",
        report.outcome,
        report.set_uuid,
        report.first_sequence,
        report.end_sequence,
        report.chunk_count,
        report.stream_bytes,
        report.lost_bytes,
        report.unrecorded_bytes,
        report.written_bytes,
        report.checkpoint_count,
        report.elapsed_s,
        report.retirements,
        report.member_errors,
        report.error
    )
}

/// A fault that starts at the set's format: the recording refused it (an error, nothing
/// acknowledged) or retired the member (or failed, where no member was left).
fn format_fault_handled(
    case: &Case,
    result: &Result<RecordReport, RecordingError>,
    acknowledged_bytes: u64,
    crashed: bool,
) -> Result<(), String> {
    if !case.at_format || crashed {
        return Ok(());
    }
    let disk = case.fault.disk();
    match result {
        Err(_) if acknowledged_bytes == 0 => Ok(()),
        Err(error) => Err(format!(
            "a fault at format: refused ({error}) after acknowledging {acknowledged_bytes} bytes"
        )),
        Ok(report)
            if report.error.is_some()
                || report
                    .retirements
                    .iter()
                    .any(|r| r.member_index as usize == disk) =>
        {
            Ok(())
        }
        Ok(_) => Err(format!(
            "a fault of member {disk} from format on, neither refused nor retired: {}",
            report_summary(result)
        )),
    }
}

/// Chunks of members whose flush failed that came back missing after a recording that
/// ended cleanly: the report must have named chunks it could not confirm. (In a ring where
/// the power cut took such a member's writes, `Unflushed::took`, the surviving run may
/// start before chunks the ring rightly overwrote or discarded, which the reader then
/// reports missing: those are no loss.)
fn losses_reported(
    result: &Result<RecordReport, RecordingError>,
    crashed: bool,
    read: &ReadBack,
    unflushed: &Unflushed,
    silent: &Silent,
) -> Result<(), String> {
    let Ok(report) = result else {
        return Ok(());
    };
    let missing_chunk_count = read.missing_chunk_count;
    // A write the disk acknowledged and lost: the recorder cannot know.
    let silently_lost = !silent.chunks.is_empty() || silent.ring;
    if crashed
        || report.error.is_some()
        || missing_chunk_count == 0
        || unflushed.took
        || silently_lost
    {
        return Ok(());
    }
    let reported: u64 = report
        .member_errors
        .iter()
        .map(|e| e.unflushed_chunk_count)
        .sum();
    if reported == 0 {
        return Err(format!(
            "{missing_chunk_count} chunks of a member whose flush failed did not come back, \
             and the report names none it could not confirm"
        ));
    }
    Ok(())
}

fn run_on(case: &Case, sim: &SimDisks, replay: &mut Replay) -> Result<Seen, String> {
    let pattern = Pattern::new(case.seed | 1);
    let mut source = Counted {
        source: PatternSource(pattern),
        taken_bytes: 0,
    };
    let control = Control::new();
    let progress = Progress::default();
    let result = writer::record_on(
        Members::Sim(sim),
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
    replay.report = report_summary(&result);
    format_fault_handled(case, &result, acknowledged_bytes, crashed)?;
    let at_format = case.at_format && !crashed;
    let mut seen = Seen {
        crashed,
        acknowledged_bytes,
        retired: result.as_ref().is_ok_and(|report| report.degraded),
        flush_failed: sim.counters().failed_flush_count > 0,
        timed_out: result.as_ref().is_ok_and(|report| {
            report
                .retirements
                .iter()
                .any(|r| r.cause == RetirementCause::Timeout)
        }),
        format_refused: at_format && result.is_err(),
        format_retired: at_format && result.as_ref().is_ok_and(|report| report.degraded),
        unread_reported: result.as_ref().is_ok_and(|report| {
            report
                .member_errors
                .iter()
                .any(|e| {
                    e.unflushed_chunk_count > 0
                        && matches!(e.error, MemberError::Unconfirmed(Unconfirmed::NotReadBack))
                })
        }),
        retired_flush_failed: result.as_ref().is_ok_and(|report| {
            report.error.is_none()
                && report
                    .member_errors
                    .iter()
                    .any(|e| matches!(&e.error, MemberError::Failed(cause) if matches!(**cause, RecordingError::Flush { .. })))
        }),
        ..Seen::default()
    };
    if !case.fails_flushes() && sim.counters().failed_flush_count > 0 {
        return Err("a flush failed where no fault says so".into());
    }
    let mut unflushed = Unflushed::find(case, sim, 1);
    let silent = Silent::find(case, sim, 1);
    unflushed.admitted = !crashed
        && case.second.is_some()
        && result.as_ref().is_ok_and(|report| {
            report.member_errors.iter().any(|e| {
                e.unflushed_chunk_count > 0 && matches!(e.error, MemberError::Unconfirmed(_))
            })
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
        let flush_or_metadata = match &report.error {
            Some(RecordingFailure::Member {
                fault: MemberFault::Other(_),
                ..
            }) => true,
            Some(failure) => {
                let text = failure.to_string();
                text.contains("flushing") || text.contains("metadata")
            }
            None => false,
        };
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
    unflushed.after_power_cut(case, sim, &images);
    let repair_images = case.repair.map(|_| images.clone());
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
        if acknowledged_bytes > 0 && silent.entry_lost(None) {
            if !entry_loss_named(&set, None)? {
                return Err(format!(
                    "{acknowledged_bytes} bytes acknowledged, the entry lost, and nothing \
                     says so"
                ));
            }
            seen.entry_lost = true;
            seen.struck = silent.struck.map(|kind| Struck { kind, loud: true });
            return Ok(seen);
        }
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
    let recovered = read_back(
        &set,
        entry,
        &pattern,
        case.chunk_size_bytes,
        &unflushed,
        &silent,
    )
    .map_err(describe)?;
    replay.read_back = format!(
        "{}..{} of {}, {} missing, unflushed lost {}",
        recovered.start,
        recovered.end,
        entry.stream_len_bytes,
        recovered.missing_chunk_count,
        recovered.unflushed_lost
    );
    losses_reported(&result, crashed, &recovered, &unflushed, &silent).map_err(describe)?;
    seen.recovered_bytes = recovered.end;
    seen.unflushed_lost = recovered.unflushed_lost;
    seen.admitted = unflushed.admitted;
    if recovered.end != entry.stream_len_bytes {
        return Err(describe(format!(
            "the entry claims {} stream bytes, the chunks end at {}",
            entry.stream_len_bytes, recovered.end
        )));
    }
    // Short of what was acknowledged only where a struck write held a newer entry than the
    // one read (which recovery did not make up for).
    let short = recovered.end < acknowledged_bytes;
    seen.entry_lost = short && silent.entry_lost(Some(entry));
    if short && !seen.entry_lost {
        return Err(describe(format!(
            "{acknowledged_bytes} bytes acknowledged, {} came back",
            recovered.end
        )));
    }
    if let Some(kind) = silent.struck {
        let named = || -> Result<bool, String> {
            let damage = health::check(&set).map_err(|e| format!("health: {e}"))?;
            Ok(silent.named(&damage))
        };
        // A lost newest entry must be named for what it is, never read as the older one.
        let entry_named = seen.entry_lost && entry_loss_named(&set, Some(entry))?;
        if seen.entry_lost && !entry_named {
            return Err(describe(
                "the recording's newest entry was lost, and nothing says so".into(),
            ));
        }
        let loud = recovered.silent_reported || entry_named || named()?;
        seen.struck = Some(Struck { kind, loud });
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
    if let (Some(fault), Some(images)) = (case.repair, repair_images) {
        let checks = Checks {
            pattern: &pattern,
            unflushed: &unflushed,
            silent: &silent,
            acknowledged_bytes,
        };
        let repaired = repair_with_read_fault(case, fault, images, &checks)?;
        seen.repair_refused = repaired.refused;
        replay.repair = repaired.summary;
        seen.repaired = true;
    }
    Ok(seen)
}

/// What a read-back of the recording is held to.
struct Checks<'a> {
    pattern: &'a Pattern,
    unflushed: &'a Unflushed,
    silent: &'a Silent,
    acknowledged_bytes: u64,
}

/// The byte range of `disk` whose reads fail while `repair` runs.
fn read_fault(case: &Case, fault: RepairReadFault) -> RangeFault {
    let layout = case.layout(fault.disk);
    let chunk = layout.chunk_size_bytes as u64;
    let (offset_bytes, len_bytes) = match fault.region {
        Region::Metadata => (0, layout.data_offset_bytes),
        Region::DataSlots {
            at_fraction,
            slot_count,
        } => {
            let first = (layout.data_slot_count as f64 * at_fraction) as u64;
            let count = slot_count.min(layout.data_slot_count - first).max(1);
            (layout.data_offset_bytes + first * chunk, count * chunk)
        }
        Region::Everything => (0, case.capacities[fault.disk]),
    };
    RangeFault {
        disk: fault.disk,
        op: IoOp::Read,
        offset_bytes,
        len_bytes,
        errno: libc::EIO,
    }
}

/// What `repair` did in a case, in words, and whether it refused.
struct Repaired {
    summary: String,
    refused: bool,
}

impl Repaired {
    fn said(summary: String) -> Repaired {
        Repaired {
            summary,
            refused: false,
        }
    }
}

/// `repair` on the power-cut `images` while one member's reads fail. It may fail with an
/// error; where it does not, the set it leaves, read again without the fault, passes the
/// checks of an unrepaired one (never less than was acknowledged, one run of the pattern,
/// nothing missing or damaged), and where its report calls the set whole (as `nvrec
/// repair` does: nothing left, failed, unaccounted or missing), no chunk is unaccounted.
///
/// Three defects of `repair` this found, each fixed and checked here:
/// - Unreadable metadata: copies that failed to read (EIO) counted as damaged, so `repair`
///   wrote what older copies said over them, and once the member read again its newer
///   entry was gone (seed 111927302: 780288 bytes acknowledged, 0 claimed). Now `repair`
///   refuses to write while a copy cannot be read.
/// - A torn chunk claimed: an entry was extended over the chunks past its end by their
///   header blocks alone, a chunk whose payload a power cut tore among them (seed
///   111927744). Now each is read whole first, as recovery does.
/// - Whole past an unreadable slot: a slot past an entry's end whose read failed ended the
///   look, and the set was called whole (seed 112291804). Now it is left unaccounted.
fn repair_with_read_fault(
    case: &Case,
    fault: RepairReadFault,
    images: Vec<Vec<u8>>,
    checks: &Checks<'_>,
) -> Result<Repaired, String> {
    let before = images.clone();
    let sim = SimDisks::from_images(images, LOGICAL_BLOCK_BYTES, case.seed);
    sim.fail(read_fault(case, fault));
    let mut set = match volume::open_members(Members::Sim(&sim), Access::Write, Safety::Check) {
        Ok(set) => set,
        Err(error) => return Ok(Repaired::said(format!("did not open: {error}"))),
    };
    let report = match repair::repair(&mut set, true, &Control::new()) {
        Ok(report) => report,
        Err(error) if error.is_refusal() => {
            drop(set);
            if sim.current_images() != before {
                return Err(format!("repair refused ({error}), yet wrote"));
            }
            return Ok(Repaired {
                refused: true,
                summary: format!("refused: {error}"),
            });
        }
        Err(error) => return Ok(Repaired::said(format!("failed: {error}"))),
    };
    // As `nvrec repair` judges it: a member missing (unreadable as one) is never whole.
    let whole = report.left.is_empty()
        && report.failed.is_empty()
        && report.unaccounted_left.is_empty()
        && set.missing_indices().is_empty()
        && set.problems.is_empty();
    drop(set);
    let why = |text: String| {
        format!(
            "repair (whole: {whole}) with {fault:?} failing reads: {text}\n  {}",
            repair_summary(&report)
        )
    };
    // The disks as the repair left them, read without the fault.
    let healed = SimDisks::from_images(sim.current_images(), LOGICAL_BLOCK_BYTES, case.seed);
    let set = volume::open_members(Members::Sim(&healed), Access::Read, Safety::Check)
        .map_err(|e| why(format!("the repaired set does not open: {e}")))?;
    let torn = torn_chunks(&set, &report.extended);
    if torn > 0 {
        return Err(why(format!("extended entries over {torn} torn chunks")));
    }
    // A repair that could not read past an entry's end says so (the slots it could not
    // read, left unaccounted): the entry may stop short of what was acknowledged there,
    // named, until a repair that reads them extends it.
    let named_short = report
        .unaccounted_left
        .iter()
        .any(|left| left.recording_id == 1 && left.unreadable_slots > 0);
    let summary = healed_read_back(case, &set, checks, named_short).map_err(&why)?;
    let left = match whole {
        true => repair::unaccounted_chunks(&set).map_err(|e| why(e.to_string()))?,
        false => Vec::new(),
    };
    match left.is_empty() {
        true => Ok(Repaired::said(format!("whole {whole}, {summary}"))),
        false => Err(why(format!("whole, yet once read again: {left:?}"))),
    }
}

/// `repair`'s report in a line.
fn repair_summary(report: &repair::RepairReport) -> String {
    format!(
        "repair found {} damages, rewrote {:?}, failed {:?}, recovered {:?}, rebuilt {:?}, \
         extended {:?}, unaccounted left {:?}, left {} damages",
        report.found.len(),
        report.rewrote.iter().take(8).collect::<Vec<_>>(),
        report.failed,
        report.recovered_recording,
        report.rebuilt_recordings,
        report.extended,
        report.unaccounted_left,
        report.left.len()
    )
}

/// Chunks in the slots an entry was extended over that do not decode.
fn torn_chunks(set: &volume::VolumeSet, extended: &[scan::Unaccounted]) -> u64 {
    let mut torn = 0;
    for on in extended.iter().flat_map(|found| &found.members) {
        let Some(member) = set.members[on.member_index as usize].as_ref() else {
            continue;
        };
        let layout = member.layout();
        for &(first, end) in &on.slot_runs {
            for slot in first..end {
                let offset = layout.data_slot_offset_bytes(slot).unwrap_or(0);
                let bytes =
                    volume::read_aligned(&member.disk, offset, layout.chunk_size_bytes as usize);
                torn += u64::from(!bytes.as_deref().is_ok_and(|b| decode_chunk(b).is_ok()));
            }
        }
    }
    torn
}

/// The recording read back from a repaired set: everything acknowledged, one run of the
/// pattern, as far as its entry claims.
fn healed_read_back(
    case: &Case,
    set: &volume::VolumeSet,
    checks: &Checks<'_>,
    named_short: bool,
) -> Result<String, String> {
    let entries = reader::recordings(set).map_err(|e| format!("recordings: {e}"))?;
    let Some(entry) = entries.iter().find(|entry| entry.recording_id == 1) else {
        return match checks.acknowledged_bytes {
            0 => Ok("no recording".into()),
            _ if checks.silent.entry_lost(None) => Ok("no recording (entry lost)".into()),
            n => Err(format!("{n} bytes acknowledged, no recording after it")),
        };
    };
    let describe = |e: String| format!("{e}\n  entry {entry:?}\n{}", slot_map(set, 1));
    let read = read_back(
        set,
        entry,
        checks.pattern,
        case.chunk_size_bytes,
        checks.unflushed,
        checks.silent,
    )
    .map_err(describe)?;
    let short = read.end < checks.acknowledged_bytes
        && !checks.silent.entry_lost(Some(entry))
        && !named_short;
    if read.end != entry.stream_len_bytes || short {
        return Err(describe(format!(
            "the entry claims {} bytes, the chunks end at {}, {} were acknowledged",
            entry.stream_len_bytes, read.end, checks.acknowledged_bytes
        )));
    }
    Ok(format!(
        "entry {} bytes, read {}..{}",
        entry.stream_len_bytes, read.start, read.end
    ))
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
    /// How many chunks the reader reported missing.
    missing_chunk_count: u64,
    /// The reader reported chunks missing or slots damaged where silent faults struck.
    silent_reported: bool,
}

/// Reads the recording, demanding one run of the pattern with nothing missing or damaged,
/// but for chunks a member whose flush failed never made durable (`unflushed`) and chunks
/// silent faults took (`silent`), where missing or damaged is what the reader must say.
fn read_back(
    set: &volume::VolumeSet,
    entry: &nvrec::layout::RecordingEntry,
    pattern: &Pattern,
    chunk_size_bytes: u32,
    unflushed: &Unflushed,
    silent: &Silent,
) -> Result<ReadBack, String> {
    let control = Control::new();
    let progress = Progress::default();
    let mut problem: Option<String> = None;
    let mut span: Option<ReadBack> = None;
    let mut unflushed_lost = false;
    let mut silent_reported = false;
    let mut missing_chunk_count = 0;
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
                            missing_chunk_count: 0,
                            silent_reported: false,
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
                missing_chunk_count += count;
                // Only what a member whose flush failed had not made durable, or what a
                // silent fault took, and then the run goes on past it.
                let explained = |sequence: u64| {
                    let unflushed = unflushed.chunks.get(&sequence).map(|&c| (c, true));
                    unflushed.or_else(|| silent.chunks.get(&sequence).map(|&c| (c, false)))
                };
                let known =
                    (first_sequence..first_sequence + count).all(|q| explained(q).is_some());
                if !known && (unflushed.took || unflushed.admitted || silent.ring) {
                    unflushed_lost |= unflushed.took || unflushed.admitted;
                    silent_reported |= silent.ring;
                    gap = true;
                    return true;
                }
                for sequence in first_sequence..first_sequence + count {
                    let Some(((offset, len), of_unflushed)) = explained(sequence) else {
                        problem = Some(format!("{count} chunks missing from {first_sequence}"));
                        return false;
                    };
                    unflushed_lost |= of_unflushed;
                    silent_reported |= !of_unflushed;
                    match span.as_mut() {
                        None => {
                            span = Some(ReadBack {
                                start: offset,
                                end: offset + len,
                                unflushed_lost: of_unflushed,
                                missing_chunk_count: 0,
                                silent_reported: false,
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
                if silent.holds(disk, damage.offset_bytes) {
                    silent_reported = true;
                } else if unflushed.admitted {
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
        missing_chunk_count: 0,
        silent_reported: false,
    });
    if gap {
        read.end = entry.stream_len_bytes; // Missing up to the end the entry states.
    }
    read.unflushed_lost |= unflushed_lost;
    read.missing_chunk_count = missing_chunk_count;
    read.silent_reported = silent_reported;
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

/// Cases a full run (`NVREC_FULL_TESTS=1`, as CI) takes where `NVREC_SIM_CASES` does not say.
const DEFAULT_CASE_COUNT: u64 = 3000;

/// Cases the quick run takes: a tenth. Each case is checked whole; what the run as a
/// whole must reach (every kind of fault struck, and ended loud) is judged from
/// [`COVERAGE_CASE_COUNT`] cases on, where the rarest kinds (a lost metadata write that a
/// later write does not cover, one case in a few hundred) come up in every run.
const QUICK_CASE_COUNT: u64 = 300;

/// Cases from which a run is held to reaching every kind of fault.
const COVERAGE_CASE_COUNT: u64 = 1000;

fn case_count() -> u64 {
    std::env::var("NVREC_SIM_CASES")
        .ok()
        .and_then(|text| text.parse().ok())
        .unwrap_or_else(|| nvrec_testkit::quick_or_full(QUICK_CASE_COUNT, DEFAULT_CASE_COUNT))
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

/// Seeds whose cases found defects (each named where its fix is described), run on every
/// test run whatever the seed of the drawn cases.
const SEEDS_THAT_FOUND_DEFECTS: &[u64] = &[
    34021,     // a ring member's failed write left a whole chunk past its end (reader.rs RunEnds)
    514525472, // the slots past a cut retirement run read as damage (reader.rs past_cut_run)
    989299,    // rewrites joined a cut retirement run
    546145816, // two members failing in one batch
    111927302, // repair over unreadable metadata
    111927744, // repair over a torn chunk
    112291804, // repair past an unreadable slot
    2749, // a closing entry misdirected into another table slot was listed as a second recording 1 (volume.rs entry_of)
    125601, // a lost checkpoint: a ring gone round past the older one's position recovered empty (recovery.rs, lapped members)
    230849, // the same, the power cut's holes in the newest lap: searched from after the member's newest chunk
    201013, // the same, only torn writes past the position: their headers tell
    904244915, // a closing entry lost: the recording read as open and empty, named nowhere (scan::stale_open, health)
    904242815, // the same in a ring gone round, the closing entry misdirected two blocks on
    111929713, // a lost checkpoint: a ring's next lap discarded past the older one's position, the run ended at the blank slots (recovery.rs discarded_round)
    8382, // a repair that cannot read past an entry's end names those slots and leaves it short (the check, `named_short`)
];

#[test]
fn seeds_that_found_defects_stay_clean() {
    let failures: Vec<String> = SEEDS_THAT_FOUND_DEFECTS
        .iter()
        .filter_map(|&seed| {
            let case = Case::draw(seed);
            let (outcome, _) = run(&case);
            outcome
                .err()
                .map(|why| format!("seed {seed}: {why}\n  {case:?}"))
        })
        .collect();
    assert!(failures.is_empty(), "{}", failures.join("\n"));
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
                    let (outcome, replay) = run(&case);
                    *running[worker as usize].lock().unwrap() = None;
                    if count == 1 {
                        eprintln!("{replay:?}");
                    }
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
    let repaired = totals.iter().filter(|s| s.repaired).count();
    let format_refused = totals.iter().filter(|s| s.format_refused).count();
    let format_retired = totals.iter().filter(|s| s.format_retired).count();
    let unread_reported = totals.iter().filter(|s| s.unread_reported).count();
    let timed_out = totals.iter().filter(|s| s.timed_out).count();
    let repair_refused = totals.iter().filter(|s| s.repair_refused).count();
    let kinds = [
        Silently::LostData,
        Silently::MisdirectedData,
        Silently::LostMetadata,
        Silently::MisdirectedMetadata,
    ];
    // Per kind of silent fault: cases it struck, and of those, cases that ended loud.
    let struck: Vec<(Silently, usize, usize)> = kinds
        .iter()
        .map(|&kind| {
            let of_kind = || {
                totals
                    .iter()
                    .filter_map(|s| s.struck)
                    .filter(move |s| s.kind == kind)
            };
            (
                kind,
                of_kind().count(),
                of_kind().filter(|s| s.loud).count(),
            )
        })
        .collect();
    let entry_lost = totals.iter().filter(|s| s.entry_lost).count();
    eprintln!(
        "simulation: {} cases: {crashed_after_ack} crashed after an acknowledgement, \
         {recovered_more} recovered past it, {retired} retired a member ({timed_out} for a \
         timeout), {unformatted} crashed \
         before the set was whole, {flush_failed} failed a flush ({retired_flush_failed} a \
         retired member's, the recording going on), {unflushed_lost} lost unflushed chunks of \
         such a member in the power cut (reported missing), {admitted} reported chunks of \
         such a member it could not write elsewhere ({unread_reported} that did not read back); \
         a fault from format on: {format_refused} refused, {format_retired} went on without the \
         member; {repaired} repaired with a member's reads \
         failing ({repair_refused} refused: metadata it could not read); silent writes \
         (struck, loud): {struck:?}, {entry_lost} lost the recording's newest entry",
        totals.len()
    );
    if count >= COVERAGE_CASE_COUNT {
        // The run must reach what it is for; a generator that stopped producing crashes
        // after acknowledgements or retirements would pass while testing nothing.
        assert!(
            crashed_after_ack * 25 >= totals.len(),
            "too few crashes after an acknowledgement"
        );
        assert!(retired * 60 >= totals.len(), "too few retirements");
        assert!(flush_failed * 30 >= totals.len(), "too few failed flushes");
        assert!(repaired * 20 >= totals.len(), "too few repairs");
        assert!(format_refused > 0, "no fault from format on was refused");
        assert!(timed_out > 0, "no stalled member timed out");
        assert!(
            unread_reported > 0,
            "no chunk that did not read back was reported"
        );
        assert!(
            retired_flush_failed > 0,
            "no retired member's flush failed in a recording that went on"
        );
        assert!(
            recovered_more > 0,
            "recovery never found chunks past a checkpoint"
        );
        for (kind, count, loud) in struck {
            assert!(count > 0, "no write was {kind:?}");
            assert!(loud > 0, "no {kind:?} write ended loud");
        }
    }
}

/// Seeds [`a_seed_replays_exactly`] runs twice each.
const REPLAY_SEED_COUNT: u64 = 36;

#[test]
fn a_seed_replays_exactly() {
    let first = first_seed();
    // Seeds spread from the first one, so that the run differs from the other test's.
    let mut rng = first ^ 0x7265_706c_6179;
    let seeds: Vec<u64> = (0..REPLAY_SEED_COUNT)
        .map(|_| first + below(&mut rng, 1 << 20))
        .collect();
    let mut differed = Vec::new();
    let mut traced = 0;
    for &seed in &seeds {
        let case = Case::draw(seed);
        let (outcome, replay) = run(&case);
        let (again_outcome, again) = run(&case);
        traced += u64::from(replay.trace_len > 0);
        if outcome != again_outcome || replay != again {
            differed.push(format!(
                "seed {seed} (NVREC_SIM_SEED={seed} NVREC_SIM_CASES=1):\n  {outcome:?}\n  \
                 {replay:?}\n  then\n  {again_outcome:?}\n  {again:?}"
            ));
        }
        if let Err(why) = outcome {
            differed.push(format!("seed {seed} failed: {why}"));
        }
    }
    assert!(
        differed.is_empty(),
        "{} of {} seeds did not replay:\n{}",
        differed.len(),
        seeds.len(),
        differed.join("\n")
    );
    assert_eq!(traced, REPLAY_SEED_COUNT, "every case served operations");
}
