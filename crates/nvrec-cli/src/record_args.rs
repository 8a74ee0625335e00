//! `record`'s options, as the command line and the service's API give them (the service
//! turns its JSON into the same arguments), and the request they make for
//! [`nvrec_app::record`].

use crate::args::{duration_arg, rate_arg, size_arg, EngineArg};
use clap::{Args, ValueEnum};
use nvrec::device::Safety;
use nvrec::recording::volume::Usable;
use nvrec::recording::{Fill, MemberFailure, Stripe};
use nvrec_app::record::{CaptureRequest, RecordRequest};
use nvrec_app::retaining::ReclaimRequest;
use std::path::PathBuf;
use std::time::Duration;

#[derive(ValueEnum, Debug, Clone, Copy, PartialEq, Eq)]
pub enum StripeArg {
    /// Each I/O goes to the member expected to finish it soonest.
    Adaptive,
    /// Members in turn (RAID0).
    RoundRobin,
}

#[derive(Args, Debug)]
pub struct RecordArgs {
    /// Targets (files or block devices), one volume each. Without --append they are
    /// formatted as a new volume set.
    #[arg(required = true)]
    targets: Vec<PathBuf>,
    /// What to record: pattern, zero, stdin, a file path; or UDP datagrams received at
    /// udp://ADDRESS:PORT, TCP connections accepted at tcp://ADDRESS:PORT (a stream each), or
    /// frames captured on an interface, capture:IFACE (give --source once per address or
    /// interface to record several).
    #[arg(long, default_value = "stdin")]
    source: Vec<String>,
    /// capture:IFACE: sockets per interface in a PACKET_FANOUT group (by flow), each drained
    /// by a thread of its own (default: by the cores, one per two cores beyond two, 1 to 4).
    #[arg(long, value_name = "N")]
    capture_threads: Option<usize>,
    /// capture:IFACE: bytes of a frame kept, at most 256K (the rest is counted truncated;
    /// the original length is kept). Default 256K.
    #[arg(long, value_parser = size_arg, value_name = "BYTES")]
    snaplen: Option<u64>,
    /// capture:IFACE: only frames that pass this classic BPF program, given as
    /// `tcpdump -ddd EXPR` prints it (e.g. `tcpdump -ddd 'udp port 5000' > f.bpf`).
    #[arg(long, value_name = "FILE")]
    filter_bpf: Option<PathBuf>,
    /// The filter program itself, given inline by the service (which reads no files) in
    /// place of --filter-bpf FILE: never an option, and no file is read when it is set.
    #[arg(skip)]
    filter_program: Option<Vec<nvrec::net::BpfInstruction>>,
    /// Seed of the pattern source.
    #[arg(long, default_value = "0", value_parser = size_arg)]
    seed: u64,
    /// Stop after this many stream bytes.
    #[arg(long, value_parser = size_arg)]
    size: Option<u64>,
    /// Stop after this long (e.g. 10s, 5m, 2h).
    #[arg(long, value_parser = duration_arg)]
    duration: Option<Duration>,
    /// Pace the source at this rate (e.g. 800M, 1.6GB/s, 10Gbit/s). Input that finds no
    /// free buffer is lost, counted, and marked in the recording.
    #[arg(long, value_parser = rate_arg)]
    rate: Option<f64>,
    /// Chunk size: the unit written to one member (header included), a multiple of 4K from
    /// 8K to 64M.
    #[arg(long, default_value = "128K", value_parser = size_arg)]
    chunk_size: u64,
    /// I/O size: adjacent chunks for one member are written together (a whole number of
    /// chunks; any other size is refused). Default: as many whole chunks as 1M holds, or one
    /// chunk where chunks are larger.
    #[arg(long, value_parser = size_arg)]
    io_size: Option<u64>,
    /// I/Os in flight per member.
    #[arg(long, default_value_t = nvrec::stream::QUEUE_DEPTH_DEFAULT)]
    queue_depth: u32,
    /// Buffer pool that absorbs stalls of the targets. Default: with --rate, half a second
    /// of input (256M..8G); for the pattern and zero sources when not paced (they can wait),
    /// two queue depths of I/O per member; else 256M. Never more than a quarter of the memory.
    #[arg(long, value_parser = size_arg)]
    buffer: Option<u64>,
    /// How chunks are spread over the targets.
    #[arg(long, value_enum, default_value = "adaptive")]
    stripe: StripeArg,
    /// Wrap when full, overwriting the oldest chunks.
    #[arg(long)]
    ring: bool,
    /// With --ring: discard ahead of the write point (BLKDISCARD, or punched holes in files).
    #[arg(long, requires = "ring")]
    trim: bool,
    /// Add a recording after the last one on the same volume set.
    #[arg(long, conflicts_with = "overwrite")]
    append: bool,
    /// With --append: when the set is full, go on at its start, reclaiming its oldest
    /// recordings as room is needed: `oldest`, or `archived=URL` (only those the archive at
    /// URL holds whole). Reclaimed recordings stay listed as reclaimed.
    #[arg(long, requires = "append", conflicts_with = "ring", value_parser = reclaim_arg)]
    reclaim: Option<ReclaimRequest>,
    /// With --reclaim: also reclaim recordings that ended longer ago than this (e.g. 7d) as
    /// the recording starts, whether their space is needed yet or not.
    #[arg(long, requires = "reclaim", value_parser = duration_arg)]
    keep: Option<Duration>,
    /// With --ring: the share of the ring that marks (`nvrec mark`, --mark-on-signal,
    /// --mark-udp) may keep out of it, e.g. 50%; a mark that needs more is refused with the
    /// size it needs, and the rest of the ring records on at full speed.
    #[arg(long, default_value = "50%", value_parser = share_arg, value_name = "PERCENT")]
    max_marked: f64,
    /// Whether a recording of packets (udp://, tcp://, capture:) indexes its flows as it
    /// goes, for `nvrec find` and `export --match` to read only the chunks a flow lies in.
    #[arg(long, value_enum, default_value = "on", value_name = "ON|OFF")]
    flow_index: FlowIndexArg,
    /// With --ring: SIGUSR1 takes a mark (--mark-before to --mark-after around it).
    #[arg(long, requires = "ring")]
    mark_on_signal: bool,
    /// With --ring: each UDP datagram received at ADDRESS:PORT takes a mark, labelled with
    /// its text.
    #[arg(long, requires = "ring", value_name = "ADDRESS:PORT")]
    mark_udp: Option<std::net::SocketAddr>,
    /// How much before a trigger its mark keeps.
    #[arg(long, default_value = "2m", value_parser = duration_arg)]
    mark_before: Duration,
    /// How long after a trigger its mark goes on keeping.
    #[arg(long, default_value = "30s", value_parser = duration_arg)]
    mark_after: Duration,
    /// Use only this much of each target (SIZE, or PERCENT of each), leaving the rest
    /// unwritten and unread for the drive to keep as spare area (over-provisioning, as
    /// `nvrec plan` advises); rings and retention go round within it. Fixed when a set is
    /// made: with --append only the value the set was made with is accepted.
    #[arg(long, value_parser = usable_arg, value_name = "SIZE|PERCENT")]
    usable: Option<Usable>,
    /// Format targets that already hold an nvrec volume set, losing its recordings (without
    /// it such a target is refused, exit 3).
    #[arg(long)]
    overwrite: bool,
    /// Name of the recording (and label of a new set).
    #[arg(long, default_value = "")]
    label: String,
    /// Checkpoint (flush and record how far the durable data reaches) this often.
    #[arg(long, default_value = "1s", value_parser = duration_arg)]
    sync_interval: Duration,
    /// Create missing file targets at this size.
    #[arg(long, value_parser = size_arg)]
    create_size: Option<u64>,
    #[arg(long, value_enum, default_value = "auto")]
    engine: EngineArg,
    /// What a failing member (write error, full target, no completion within
    /// --member-timeout) does: `retire` sends its unfinished writes to another member and
    /// records on without it (exit 6, degraded); `stop` ends the recording with an error.
    #[arg(long, value_enum, default_value = "retire")]
    on_member_failure: MemberFailureArg,
    /// A member whose oldest write has not completed after this long has failed.
    #[arg(long, default_value = "5s", value_parser = duration_arg)]
    member_timeout: Duration,
    /// Write even to devices whose first blocks hold a filesystem or partition table (a
    /// device that is mounted or in use is never written).
    #[arg(long)]
    force: bool,
    /// Run the recording thread under SCHED_FIFO, ahead of every ordinary program, so that
    /// a busy machine does not make a paced or live input outrun the pool. Needs root
    /// (CAP_SYS_NICE) or an RLIMIT_RTPRIO at least as high as the priority (ulimit -r).
    #[arg(long)]
    realtime: bool,
    /// The SCHED_FIFO priority for --realtime (1-99).
    #[arg(
        long,
        default_value_t = 10,
        requires = "realtime",
        value_parser = clap::value_parser!(u8).range(1..=99)
    )]
    realtime_priority: u8,
    #[command(flatten)]
    samples: crate::samples::SampleArgs,
    #[command(flatten)]
    telemetry: crate::telemetry::TelemetryArgs,
}

impl RecordArgs {
    /// The request these options make: nothing is checked yet ([`nvrec_app::record::plan`]).
    pub fn request(self) -> RecordRequest {
        RecordRequest {
            health_interval: self.telemetry.interval(),
            samples: self.samples.samples(),
            targets: self.targets,
            sources: self.source,
            capture: CaptureRequest {
                threads: self.capture_threads,
                snaplen_bytes: self.snaplen,
                filter_file: self.filter_bpf,
                filter_program: self.filter_program,
            },
            seed: self.seed,
            size: self.size,
            duration: self.duration,
            rate_bytes_per_s: self.rate,
            chunk_size_bytes: self.chunk_size,
            io_size_bytes: self.io_size,
            queue_depth: self.queue_depth,
            buffer_bytes: self.buffer,
            stripe: match self.stripe {
                StripeArg::Adaptive => Stripe::Adaptive,
                StripeArg::RoundRobin => Stripe::RoundRobin,
            },
            fill: if self.ring {
                Fill::Ring { trim: self.trim }
            } else {
                Fill::Linear
            },
            append: self.append,
            reclaim: self.reclaim,
            keep: self.keep,
            overwrite: self.overwrite,
            label: self.label,
            sync_interval: self.sync_interval,
            create_len_bytes: self.create_size,
            engine: self.engine.choice(),
            on_member_failure: match self.on_member_failure {
                MemberFailureArg::Retire => MemberFailure::Retire,
                MemberFailureArg::Stop => MemberFailure::Stop,
            },
            member_timeout: self.member_timeout,
            safety: if self.force {
                Safety::Force
            } else {
                Safety::Check
            },
            realtime_priority: self.realtime.then_some(self.realtime_priority),
            max_marked: self.max_marked,
            usable: self.usable,
            flow_index: match self.flow_index {
                FlowIndexArg::On => nvrec::recording::writer::FlowIndex::default(),
                FlowIndexArg::Off => nvrec::recording::writer::FlowIndex::Off,
            },
            mark_triggers: nvrec_app::marking::Triggers {
                signal: self.mark_on_signal.then_some(&crate::signal::MARK),
                udp: self.mark_udp,
                before: self.mark_before,
                after: self.mark_after,
            },
        }
    }

    /// Whether SIGUSR1 takes marks.
    pub fn marks_on_signal(&self) -> bool {
        self.mark_on_signal
    }

    /// The archive `--reclaim archived=URL` asks, if any.
    pub fn reclaim_archive_url(&self) -> Option<&str> {
        match &self.reclaim {
            Some(ReclaimRequest::Archived { url }) => Some(url),
            _ => None,
        }
    }

    /// Whether the recording thread is to run under SCHED_FIFO (its report says how it ran).
    pub fn realtime(&self) -> bool {
        self.realtime
    }

    #[cfg(test)]
    pub fn targets_for_test(&self) -> &[PathBuf] {
        &self.targets
    }

    /// The capture filter given inline (the service's `filter_bpf`), in place of
    /// `--filter-bpf FILE`: planning then reads no file.
    pub fn set_filter_program(&mut self, program: Vec<nvrec::net::BpfInstruction>) {
        self.filter_program = Some(program);
    }

    /// The file `--filter-bpf` names, if any (the service refuses a request with one).
    pub fn filter_bpf_file(&self) -> Option<&std::path::Path> {
        self.filter_bpf.as_deref()
    }
}

#[derive(Debug, Clone, Copy, clap::ValueEnum)]
enum MemberFailureArg {
    Retire,
    Stop,
}

/// A share as users type it: `50%`, or `0.5`.
pub fn share_arg(text: &str) -> Result<f64, String> {
    let share = match text.strip_suffix('%') {
        Some(percent) => percent.trim().parse::<f64>().map(|p| p / 100.0),
        None => text.trim().parse::<f64>(),
    }
    .map_err(|_| format!("{text} is not a share: give a percentage such as 50%"))?;
    if share.is_finite() && share > 0.0 && share < 1.0 {
        Ok(share)
    } else {
        Err(format!(
            "{text} is out of range: give a share between 0% and 100%"
        ))
    }
}

/// `--usable 80%` (a share of each target, above 0 and up to 100 %) or `--usable 1.6T`.
fn usable_arg(text: &str) -> Result<Usable, String> {
    if let Some(percent) = text.strip_suffix('%') {
        let share = percent
            .trim()
            .parse::<f64>()
            .map(|p| p / 100.0)
            .map_err(|_| format!("{text} is not a percentage such as 80%"))?;
        return match share.is_finite() && share > 0.0 && share <= 1.0 {
            true => Ok(Usable::Share(share)),
            false => Err(format!(
                "{text} is out of range: give a share above 0% and at most 100%"
            )),
        };
    }
    match size_arg(text)? {
        0 => Err("--usable 0 leaves nothing to record on: give a size or a percentage".into()),
        bytes => Ok(Usable::Bytes(bytes)),
    }
}

/// `--reclaim oldest` or `--reclaim archived=URL`.
fn reclaim_arg(text: &str) -> Result<ReclaimRequest, String> {
    match text.split_once('=') {
        None if text == "oldest" => Ok(ReclaimRequest::Oldest),
        Some(("archived", url)) if !url.is_empty() => Ok(ReclaimRequest::Archived {
            url: url.to_string(),
        }),
        _ => Err(format!(
            "{text:?}: expected `oldest` or `archived=URL` (the archive that must hold a \
             recording before it is reclaimed)"
        )),
    }
}

/// `--flow-index`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
enum FlowIndexArg {
    On,
    Off,
}
