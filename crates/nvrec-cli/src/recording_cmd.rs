//! `nvrec record`, `ls`, `replay`, `verify`: recordings on volume sets.

use crate::archive_cmd::ChunkSource;
use crate::time_arg::TimeArg;
use crate::{exit, parse_sources, progress, signal, EngineArg, Finished, UsageError};
use anyhow::{Context, Result};
use clap::{Args, ValueEnum};
use nvrec::control::{Control, ControlState, Progress};
use nvrec::device::Safety;
use nvrec::export::{first_content, PcapngExport};
use nvrec::input::open_source;
use nvrec::layout::{
    ChunkFlags, Content, Reassembly, Record, RecordingEntry, RecordingFlags, RecordingState,
};
use nvrec::net::NetCounters;
use nvrec::pattern::Pattern;
use nvrec::recording::counters::RecordingCounters;
use nvrec::recording::reader::{self, Item};
use nvrec::recording::scan::Unaccounted;
use nvrec::recording::writer::{self, InputKind, RecordOptions, RecordOutcome, RecordReport};
use nvrec::recording::{health, volume, Fill, MemberFailure, Stripe};
use nvrec::source::SourceSpec;
use nvrec::unit::{
    format_bytes, format_utc_ns, parse_duration, parse_rate_bytes_per_s, parse_size_bytes,
};
use std::io::{IsTerminal, Write};
use std::path::PathBuf;
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

fn size_arg(text: &str) -> Result<u64, String> {
    parse_size_bytes(text).map_err(|error| error.to_string())
}

fn duration_arg(text: &str) -> Result<Duration, String> {
    parse_duration(text).map_err(|error| error.to_string())
}

fn rate_arg(text: &str) -> Result<f64, String> {
    parse_rate_bytes_per_s(text).map_err(|error| error.to_string())
}

#[derive(ValueEnum, Debug, Clone, Copy, PartialEq, Eq)]
pub enum StripeArg {
    /// Each I/O goes to the member expected to finish it soonest.
    Adaptive,
    /// Members in turn (RAID0).
    RoundRobin,
}

/// What replay writes where the stream has a hole (input lost while recording, chunks
/// missing or damaged).
#[derive(ValueEnum, Debug, Clone, Copy, PartialEq, Eq)]
pub enum GapsArg {
    /// Nothing: the stream as it was kept, the holes reported.
    Skip,
    /// Zeros of the hole's length, so that every byte sits at its original stream offset
    /// (sample-aligned data stays aligned); the holes are still reported.
    Zero,
}

/// Zeros written at once when a hole is filled.
const ZERO_FILL_BYTES: usize = 1 << 20;

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
    /// Chunk size: the unit written to one member (header included).
    #[arg(long, default_value = "128K", value_parser = size_arg)]
    chunk_size: u64,
    /// I/O size: adjacent chunks for one member are written together (a whole number of
    /// chunks; any other size is refused). Default: 1M, or one chunk where chunks are larger.
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

/// The scheduling policy and priority of the calling thread, as the kernel reports them.
#[derive(Debug, Clone, serde::Serialize)]
pub struct Scheduling {
    policy: &'static str,
    priority: i32,
}

pub fn scheduling() -> Scheduling {
    // SAFETY: pid 0 is the calling thread; sched_getscheduler has no other input.
    let policy = unsafe { libc::sched_getscheduler(0) };
    // SAFETY: sched_param is a plain C struct of integers (glibc: one; musl: the sporadic
    // server's fields too), for which all zeros is a valid value.
    let mut param: libc::sched_param = unsafe { std::mem::zeroed() };
    // SAFETY: `param` is a valid sched_param the call writes; pid 0 is the calling thread.
    let priority = match unsafe { libc::sched_getparam(0, &mut param) } {
        0 => param.sched_priority,
        _ => 0,
    };
    let policy = match policy {
        libc::SCHED_OTHER => "SCHED_OTHER",
        libc::SCHED_FIFO => "SCHED_FIFO",
        libc::SCHED_RR => "SCHED_RR",
        libc::SCHED_BATCH => "SCHED_BATCH",
        libc::SCHED_IDLE => "SCHED_IDLE",
        _ => "unknown",
    };
    Scheduling { policy, priority }
}

/// Puts the calling thread, which runs the recording, under SCHED_FIFO at `priority`
/// (sched(7)): it then runs whenever it is ready, ahead of every thread of the ordinary
/// policy. It never spins: it blocks in the kernel whenever no input is due and no write can
/// be sent. Threads started before it (progress, health sampling) keep their policy.
fn enter_realtime(priority: u8) -> Result<()> {
    // SAFETY: as in `scheduling`: all zeros is a valid sched_param; only the priority is set.
    let mut param: libc::sched_param = unsafe { std::mem::zeroed() };
    param.sched_priority = priority as i32;
    // SAFETY: `param` lives across the call, which only reads it; pid 0 is the calling thread
    // (Linux applies the policy to that thread alone).
    if unsafe { libc::sched_setscheduler(0, libc::SCHED_FIFO, &param) } != 0 {
        let error = std::io::Error::last_os_error();
        return Err(error).with_context(|| {
            format!(
                "--realtime at priority {priority}: SCHED_FIFO needs root (CAP_SYS_NICE) or an \
                 RLIMIT_RTPRIO of at least {priority} (ulimit -r), and a cgroup with \
                 real-time time to give"
            )
        });
    }
    Ok(())
}

/// Refuses a target given twice to `record`, under the same name or another (a link, `./a`
/// and `a`, two nodes of one block device): a volume set needs each member once, and nothing
/// else would say so before formatting (a block device opened twice reads as "held by another
/// program"; a file given twice was formatted as two members). `ls`, `verify` and `replay`
/// only read: they name a member given twice as a problem of the set.
fn distinct_targets(targets: &[PathBuf]) -> Result<(), UsageError> {
    use std::os::unix::fs::{FileTypeExt, MetadataExt};
    #[derive(PartialEq, Eq)]
    enum Identity {
        Device(u64),
        File(u64, u64),
        Missing(PathBuf),
    }
    let identity = |path: &PathBuf| match std::fs::metadata(path) {
        Ok(metadata) if metadata.file_type().is_block_device() => Identity::Device(metadata.rdev()),
        Ok(metadata) => Identity::File(metadata.dev(), metadata.ino()),
        // Not there yet (to be created): the same name in the same directory is the same file.
        Err(_) => {
            let parent = match path.parent() {
                Some(parent) if !parent.as_os_str().is_empty() => parent,
                _ => std::path::Path::new("."),
            };
            let parent = std::fs::canonicalize(parent).unwrap_or_else(|_| parent.to_path_buf());
            Identity::Missing(parent.join(path.file_name().unwrap_or_default()))
        }
    };
    let identities: Vec<Identity> = targets.iter().map(identity).collect();
    for (later, later_identity) in identities.iter().enumerate() {
        if let Some(earlier) = identities[..later]
            .iter()
            .position(|identity| identity == later_identity)
        {
            let (first, second) = (&targets[earlier], &targets[later]);
            let what = if first == second {
                format!("{} is given twice as a target", first.display())
            } else {
                format!(
                    "{} and {} are the same target, given twice",
                    first.display(),
                    second.display()
                )
            };
            return Err(UsageError(format!(
                "{what}: each member of a volume set is given once"
            )));
        }
    }
    Ok(())
}

/// A recording checked and ready to start: what `record` runs, from the command line or
/// from the service (`nvrec serve`). Making one opens, creates and writes nothing.
#[derive(Debug)]
pub struct RecordPlan {
    pub targets: Vec<PathBuf>,
    pub source_spec: SourceSpec,
    /// A capture source's threads, snap length and filter.
    pub capture: nvrec::net::CaptureOptions,
    pub options: RecordOptions,
    pub telemetry: crate::telemetry::TelemetryArgs,
    /// SCHED_FIFO priority for the recording thread (`--realtime`).
    pub realtime_priority: Option<u8>,
}

/// Checks `args` as far as can be done without touching a target or the source: every
/// mistake found here is a usage error, and nothing was created or opened.
pub fn plan_record(args: RecordArgs) -> Result<RecordPlan> {
    distinct_targets(&args.targets)?;
    let chunk = args.chunk_size;
    if chunk == 0 || chunk > u32::MAX as u64 {
        return Err(UsageError(format!(
            "--chunk-size {chunk} is out of range: give a power of two such as 128K"
        ))
        .into());
    }
    let io_size = args
        .io_size
        .unwrap_or_else(|| nvrec::stream::io_size_bytes_default(chunk));
    nvrec::stream::check_io_size(chunk, io_size)?;
    if args.size == Some(0) {
        return Err(UsageError(
            "--size 0 records nothing: give at least one byte, or leave --size out to record until the source ends"
                .into(),
        )
        .into());
    }
    let source_spec = parse_sources(&args.source, args.seed)?;
    if source_spec.is_records() && args.rate.is_some() {
        return Err(UsageError(
            "--rate paces a generated source; a network source comes at the rate it is sent".into(),
        )
        .into());
    }
    let options = RecordOptions {
        chunk_size_bytes: chunk as u32,
        io_chunk_count: (io_size / chunk) as u32,
        queue_depth: args.queue_depth,
        buffer_bytes: args.buffer.unwrap_or_else(|| {
            let input = match (args.rate, &source_spec) {
                (Some(rate_bytes_per_s), _) => InputKind::Paced { rate_bytes_per_s },
                (None, SourceSpec::Pattern { .. } | SourceSpec::Zero) => InputKind::OnDemand,
                (None, _) => InputKind::Fed,
            };
            writer::default_buffer_bytes(
                input,
                args.targets.len(),
                args.queue_depth,
                io_size,
                writer::memory_bytes(),
            )
        }),
        stripe: match args.stripe {
            StripeArg::Adaptive => Stripe::Adaptive,
            StripeArg::RoundRobin => Stripe::RoundRobin,
        },
        fill: if args.ring {
            Fill::Ring { trim: args.trim }
        } else {
            Fill::Linear
        },
        append: args.append,
        overwrite: args.overwrite,
        label: args.label.clone(),
        sync_interval: args.sync_interval,
        on_member_failure: match args.on_member_failure {
            MemberFailureArg::Retire => MemberFailure::Retire,
            MemberFailureArg::Stop => MemberFailure::Stop,
        },
        member_timeout: args.member_timeout,
        engine: args.engine.choice(),
        limit_bytes: args.size,
        duration: args.duration,
        rate_bytes_per_s: args.rate,
        pattern: matches!(source_spec, SourceSpec::Pattern { .. }),
        safety: if args.force {
            Safety::Force
        } else {
            Safety::Check
        },
        create_len_bytes: args.create_size,
        signal: args.samples.signal(&source_spec)?,
    };
    let capture = capture_options(&args, &source_spec)?;
    Ok(RecordPlan {
        targets: args.targets,
        source_spec,
        capture,
        options,
        telemetry: args.telemetry,
        realtime_priority: args.realtime.then_some(args.realtime_priority),
    })
}

/// What a running recording shares with whoever watches it: the progress, a network
/// source's counters, and the writer's live counters (filled in once the recording has
/// begun).
#[derive(Debug, Default)]
pub struct RecordHandle {
    pub progress: Arc<Progress>,
    /// Set when a network source is opened.
    pub network: OnceLock<Arc<NetCounters>>,
    pub counters: OnceLock<RecordingCounters>,
}

/// An opened source, ready for [`run_record`].
pub struct OpenedSource(Box<dyn nvrec::source::Source>);

/// Opens the plan's source (binding a network source's sockets, whose counters `handle`
/// then shows): before any target is touched, so that a source that cannot be opened
/// leaves nothing behind.
pub fn open_plan_source(plan: &RecordPlan, handle: &RecordHandle) -> Result<OpenedSource> {
    let (source, network) = open_record_source(&plan.source_spec, &plan.capture)?;
    if let Some(network) = network {
        let _ = handle.network.set(network);
    }
    Ok(OpenedSource(source))
}

/// How a recording run ended, with what the report needs.
pub struct RecordRun {
    pub report: Result<RecordReport>,
    pub telemetry: Option<nvrec::nvme::monitor::Telemetry>,
    pub scheduling: Scheduling,
}

/// Runs the plan on the calling thread until it ends: the data path, exactly as `nvrec
/// record` runs it, stopped or aborted through `control`. Files it created are removed again
/// if it failed before taking a byte.
pub fn run_record(
    plan: &RecordPlan,
    source: OpenedSource,
    handle: &RecordHandle,
    control: &Control,
) -> RecordRun {
    let OpenedSource(mut source) = source;
    let created = crate::NewFiles::note(&plan.targets);
    let monitor = crate::telemetry::start(&plan.targets, &plan.telemetry);
    let realtime = match plan.realtime_priority {
        Some(priority) => enter_realtime(priority),
        None => Ok(()),
    };
    // The buffer pool's fill is published while it runs, for `archive` to back off by.
    let report = realtime.and_then(|()| {
        nvrec::recording::load::publish_while(&handle.counters, || {
            writer::record_counted(
                &plan.targets,
                source.as_mut(),
                &plan.options,
                control,
                &handle.progress,
                &handle.counters,
            )
        })
        .context("recording")
    });
    let scheduling = scheduling();
    let telemetry = crate::telemetry::finish(monitor);
    // A recording that failed before it took a byte leaves no file it created behind; one
    // that took data keeps it, whatever happened later.
    if report.is_ok()
        || handle
            .progress
            .done_bytes
            .load(std::sync::atomic::Ordering::Relaxed)
            > 0
    {
        created.keep();
    }
    RecordRun {
        report,
        telemetry,
        scheduling,
    }
}

/// The exit status of a finished recording.
pub fn record_exit_code(report: &RecordReport) -> u8 {
    match report.outcome {
        RecordOutcome::Failed => exit::FAILURE,
        RecordOutcome::Aborted => exit::ABORTED,
        RecordOutcome::TargetFull => exit::TARGET_FULL,
        // A member whose flush or metadata write failed where no retirement tells of it is a
        // failing drive too: never an exit that says all is well.
        _ if report.degraded || !report.member_errors.is_empty() => exit::DEGRADED,
        _ => exit::OK,
    }
}

pub fn record(args: RecordArgs, json: bool) -> Result<Finished> {
    let realtime = args.realtime;
    let plan = plan_record(args)?;
    let handle = RecordHandle::default();
    let source = open_plan_source(&plan, &handle)?;
    let display = progress::ProgressDisplay::start_with_network(
        Arc::clone(&handle.progress),
        handle.network.get().cloned(),
        "record".into(),
        !json,
    );
    let RecordRun {
        report,
        telemetry,
        scheduling,
    } = run_record(&plan, source, &handle, &signal::CONTROL);
    drop(display);
    let network = handle.network.get().cloned();
    let source_spec = plan.source_spec;
    let args_realtime = realtime;
    let report = report?;
    if json {
        let mut value = serde_json::to_value(&report)?;
        value["telemetry"] = serde_json::to_value(&telemetry)?;
        value["network"] = serde_json::to_value(
            network
                .as_ref()
                .map(|n| n.report_stored(report.unrecorded_bytes)),
        )?;
        value["scheduling"] = serde_json::to_value(&scheduling)?;
        outln!("{value}");
    } else {
        if let Some(telemetry) = &telemetry {
            out!("{}", crate::telemetry::text(telemetry));
        }
        let outcome = match report.outcome {
            RecordOutcome::Complete => "complete",
            RecordOutcome::SourceEnded => "source ended",
            RecordOutcome::Stopped => "stopped",
            RecordOutcome::Aborted => "aborted",
            RecordOutcome::TargetFull => "TARGET FULL (linear mode): stopped cleanly, data intact",
            RecordOutcome::Failed => "FAILED",
        };
        outln!(
            "nvrec record: recording {} on set {}: {outcome}",
            report.recording_id,
            report.set_uuid
        );
        outln!("  source        {}", source_spec.describe());
        if let Some(network) = &network {
            let counts = network.report_stored(report.unrecorded_bytes);
            outln!(
                "  network       {} datagrams or frames ({} bytes); {}; {} truncated",
                counts.datagrams,
                counts.bytes,
                if counts.dropped_socket > 0 {
                    format!(
                        "DROPPED {} by the kernel (receive buffer or capture ring full; marked in the recording)",
                        counts.dropped_socket
                    )
                } else {
                    "0 dropped".to_string()
                },
                counts.truncated
            );
            for line in network_loss_lines(&counts) {
                outln!("  LOST          {line}");
            }
        }
        outln!(
            "  recorded      {} bytes ({}) in {} chunks, sequence {}..{}",
            report.stream_bytes,
            format_bytes(report.stream_bytes),
            report.chunk_count,
            report.first_sequence,
            report.end_sequence
        );
        outln!(
            "  time          {:.3} s, {:.1} MiB/s",
            report.elapsed_s,
            report.rate_mib_per_s
        );
        if report.lost_bytes > 0 {
            outln!("  LOST          {} bytes in {} gaps (input outran the targets; marked in the recording)", report.lost_bytes, report.gap_count);
        } else {
            outln!("  lost          0 bytes");
        }
        if report.overdue_bytes > 0 {
            outln!(
                "  overdue       {} bytes were due by the stop and not yet taken (the recorder was behind the rate)",
                report.overdue_bytes
            );
        }
        if report.unrecorded_bytes > 0 {
            outln!(
                "  unrecorded    {} bytes taken from the source could not be written",
                report.unrecorded_bytes
            );
        }
        outln!(
            "  striping      {:?} over {} members, chunk {}, I/O {}, queue depth {} per member, buffers {}",
            report.stripe,
            report.members.len(),
            format_bytes(report.chunk_size_bytes as u64),
            format_bytes(report.io_size_bytes),
            report.queue_depth,
            format_bytes(report.buffer_bytes)
        );
        for member in &report.members {
            outln!(
                "  member        {}: {} chunks in {} writes, {:.1} MiB/s{}",
                member.path.display(),
                member.chunk_count,
                member.io_count,
                member.rate_mib_per_s,
                if member.laps > 0 {
                    format!(", {} laps", member.laps)
                } else {
                    String::new()
                }
            );
        }
        outln!(
            "  engine        {} ({})",
            report.engine.name(),
            report.engine_features
        );
        if let Some(reason) = &report.engine_fallback_reason {
            outln!("  note          io_uring unavailable, used threads: {reason}");
        }
        outln!("  checkpoints   {}", report.checkpoint_count);
        outln!(
            "  cpu           {:.3} s user, {:.3} s system",
            report.cpu_user_s,
            report.cpu_system_s
        );
        if args_realtime {
            outln!(
                "  scheduling    {} priority {}",
                scheduling.policy,
                scheduling.priority
            );
        }
        for retirement in &report.retirements {
            outln!(
                "  RETIRED       member {} ({}) at {}: {}; {} unfinished chunks from sequence {} (stream offset {}) written to member {} instead",
                retirement.member_index,
                retirement.path.display(),
                format_utc_ns(retirement.retired_ns),
                retirement_cause_text(retirement.cause, retirement.errno),
                retirement.redirect_chunk_count,
                retirement.first_sequence,
                retirement.stream_offset_bytes,
                retirement.redirect_member
            );
        }
        for failure in &report.member_errors {
            outln!(
                "  MEMBER ERROR  member {} ({}): {}; {} chunks it completed since its last good flush were never confirmed durable",
                failure.member_index,
                failure.path.display(),
                failure.error,
                failure.unflushed_chunk_count
            );
        }
        if let Some(error) = &report.error {
            outln!("  error         {error}");
        }
    }
    Ok(Finished(record_exit_code(&report)))
}

/// Why a member was retired, in words.
fn retirement_cause_text(cause: nvrec::layout::RetirementCause, errno: i32) -> String {
    if errno == 0 {
        cause.text().to_string()
    } else {
        format!(
            "{} ({})",
            cause.text(),
            std::io::Error::from_raw_os_error(errno)
        )
    }
}

#[derive(Args, Debug)]
pub struct LsArgs {
    /// The members of a volume set, or an archive (file://DIR, s3://BUCKET/PREFIX).
    #[arg(required = true)]
    targets: Vec<PathBuf>,
    /// Also read every chunk header and list the recordings the chunks hold, those whose
    /// entries were lost included (one small read per slot of every member).
    #[arg(long)]
    scan: bool,
    /// Also read each recording of network records and count the losses inside it, by
    /// cause (the kernel's drops, the recorder's, packets read only in part): the entry
    /// holds only the bytes lost to gaps. Reads the whole of those recordings.
    #[arg(long)]
    losses: bool,
}

/// The losses inside a recording of records, read whole through the reassembly.
fn record_losses(source: &ChunkSource, entry: &RecordingEntry) -> Result<RecordCounts> {
    let mut counts = RecordCounts::default();
    let mut reassembly = Reassembly::new();
    let mut undecodable = 0u64;
    source.read_from(
        entry,
        EngineArg::Auto,
        None,
        &signal::CONTROL,
        &Progress::default(),
        &mut |item| {
            if let Item::Chunk { header, payload } = item {
                if header.flags.contains(ChunkFlags::RECORDS) {
                    let walk = reassembly.payload(header.stream_offset_bytes, payload);
                    undecodable += u64::from(counts.count(walk).is_err());
                }
            }
            signal::CONTROL.state() == ControlState::Run
        },
    )?;
    if let Some(loss) = reassembly.finish() {
        counts.loss(&loss);
    }
    if undecodable > 0 {
        anyhow::bail!(
            "recording {}: {undecodable} payloads hold records that do not decode (nvrec verify names them)",
            entry.recording_id
        );
    }
    Ok(counts)
}

/// The recordings of `set` as readers see them: a crashed recording at its recovered end,
/// and the one another program is writing right now still open (shown as recording, with
/// what it has made durable so far).
pub(crate) fn state_text(entry: &RecordingEntry) -> &'static str {
    let wrapped = entry.flags.contains(RecordingFlags::RING);
    match (entry.state, wrapped) {
        (RecordingState::Open, _) => "recording",
        (RecordingState::Closed, false) => "complete",
        (RecordingState::Closed, true) => "complete (ring)",
        (RecordingState::Aborted, _) => "aborted",
        (RecordingState::Interrupted, _) => "interrupted",
    }
}

fn entry_json(entry: &RecordingEntry) -> serde_json::Value {
    let seconds = entry.end_ns.saturating_sub(entry.start_ns) as f64 / 1e9;
    let recorded = entry.stream_len_bytes.saturating_sub(entry.lost_bytes);
    serde_json::json!({
        "recording_id": entry.recording_id,
        "name": entry.name.as_str(),
        "state": state_text(entry),
        "ring": entry.flags.contains(RecordingFlags::RING),
        "pattern": entry.flags.contains(RecordingFlags::PATTERN),
        "records": entry.flags.contains(RecordingFlags::RECORDS),
        "start": format_utc_ns(entry.start_ns),
        "end": format_utc_ns(entry.end_ns),
        "start_ns": entry.start_ns,
        "end_ns": entry.end_ns,
        "duration_s": seconds,
        "bytes": recorded,
        "stream_len_bytes": entry.stream_len_bytes,
        "lost_bytes": entry.lost_bytes,
        "chunk_count": entry.end_sequence - entry.first_sequence,
        "first_sequence": entry.first_sequence,
        "end_sequence": entry.end_sequence,
        "mean_rate_mib_per_s": if seconds > 0.0 { recorded as f64 / 1048576.0 / seconds } else { 0.0 },
        "members": entry.members.iter().map(|m| serde_json::json!({"start_slot": m.start_slot_index, "end_slot": m.end_slot_index})).collect::<Vec<_>>(),
        "degraded": !entry.retirements.is_empty(),
        "retirements": entry.retirements.iter().map(retirement_json).collect::<Vec<_>>(),
    })
}

fn retirement_json(retirement: &nvrec::layout::Retirement) -> serde_json::Value {
    serde_json::json!({
        "member_index": retirement.member_index,
        "cause": retirement.cause,
        "errno": retirement.errno,
        "why": retirement_cause_text(retirement.cause, retirement.errno),
        "retired": format_utc_ns(retirement.retired_ns),
        "retired_ns": retirement.retired_ns,
        "stream_offset_bytes": retirement.stream_offset_bytes,
        "first_sequence": retirement.first_sequence,
        "redirect_member": retirement.redirect_member,
        "redirect_chunk_count": retirement.redirect_slot_count,
    })
}

/// A line on a retired member, for `ls` and `verify`.
fn retirement_line(source: &ChunkSource, retirement: &nvrec::layout::Retirement) -> String {
    format!(
        "member {} ({}) retired at {}, stream offset {}: {}; its {} unfinished chunks are on member {}",
        retirement.member_index,
        source.describe_member(retirement.member_index as usize),
        format_utc_ns(retirement.retired_ns),
        retirement.stream_offset_bytes,
        retirement_cause_text(retirement.cause, retirement.errno),
        retirement.redirect_slot_count,
        retirement.redirect_member
    )
}

/// What `ls --json` prints about `set` (without `--scan`): members, problems, metadata
/// damage and recordings.
pub(crate) fn set_json(
    set: &volume::VolumeSet,
    entries: &[RecordingEntry],
    damage: &[health::MetaDamage],
) -> serde_json::Value {
    let unaccounted = crate::repair_cmd::unaccounted_of(set, entries);
    set_json_with(set, entries, damage, &unaccounted)
}

/// [`set_json`], with what each of `entries` leaves unaccounted, looked for already.
fn set_json_with(
    set: &volume::VolumeSet,
    entries: &[RecordingEntry],
    damage: &[health::MetaDamage],
    unaccounted: &[Unaccounted],
) -> serde_json::Value {
    let members: Vec<serde_json::Value> = (0..set.member_count())
        .map(|index| serde_json::json!({"index": index, "path": volume::describe_member(set, index), "present": set.members[index].is_some()}))
        .collect();
    let complete = set.missing_indices().is_empty() && set.problems.is_empty();
    serde_json::json!({
        "set_uuid": set.set_uuid.to_string(),
        "label": set.label,
        "chunk_size_bytes": set.chunk_size_bytes,
        "members": members,
        "problems": set.problems,
        "complete": complete,
        "metadata_damage": damage,
        "scan": null,
        "recordings": entries.iter().zip(unaccounted).map(|(entry, found)| listed_json(entry, found)).collect::<Vec<_>>(),
    })
}

/// A recording as `ls` and `verify` show it in JSON: its entry, and the chunks past its end
/// that the entry does not account for (`unaccounted` null when there are none).
fn listed_json(entry: &RecordingEntry, found: &Unaccounted) -> serde_json::Value {
    let mut value = entry_json(entry);
    add_unaccounted(&mut value, found);
    value
}

fn add_unaccounted(value: &mut serde_json::Value, found: &Unaccounted) {
    value["unaccounted_chunks"] = found.chunk_count.into();
    value["unaccounted_bytes"] = found.payload_bytes.into();
    value["unaccounted_unreadable_slots"] = found.unreadable_slots.into();
    value["unaccounted"] = if !found.is_clear() {
        serde_json::json!(found)
    } else {
        serde_json::Value::Null
    };
}

pub fn ls(args: LsArgs, json: bool) -> Result<Finished> {
    if let Some(url) = crate::archive_cmd::url_of(&args.targets)? {
        if args.scan {
            return Err(UsageError(
                "--scan reads the chunk headers of drives; an archive's manifests list its recordings"
                    .into(),
            )
            .into());
        }
        return crate::archive_cmd::ls(&url, json);
    }
    let source = ChunkSource::open(&args.targets)?;
    let set = source.set().expect("not an archive");
    let entries = reader::listed(set)?;
    let damage = health::check(set)?;
    let complete = set.missing_indices().is_empty() && set.problems.is_empty();
    // Chunks past an entry's end that it does not account for: the entry is wrong.
    let unaccounted = crate::repair_cmd::unaccounted_of(set, &entries);
    let whole = complete
        && !health::loses_anything(&damage)
        && unaccounted.iter().all(Unaccounted::is_clear);
    let scanned = if args.scan {
        Some(crate::repair_cmd::scan_rows(set, &entries)?)
    } else {
        None
    };
    if json {
        let mut value = set_json_with(set, &entries, &damage, &unaccounted);
        value["scan"] = serde_json::json!(scanned.as_ref().map(|(_, rows)| rows));
        if args.losses {
            if let Some(recordings) = value["recordings"].as_array_mut() {
                for (row, entry) in recordings.iter_mut().zip(&entries) {
                    if entry.flags.contains(RecordingFlags::RECORDS) {
                        row["record_losses"] =
                            serde_json::to_value(record_losses(&source, entry)?)?;
                    }
                }
            }
        }
        outln!("{value}");
    } else {
        outln!(
            "volume set {} \"{}\", chunk size {}",
            set.set_uuid,
            set.label,
            format_bytes(set.chunk_size_bytes as u64)
        );
        for index in 0..set.member_count() {
            let status = if set.members[index].is_some() {
                ""
            } else {
                "  MISSING"
            };
            outln!(
                "  member {index}: {}{status}",
                volume::describe_member(set, index)
            );
        }
        for problem in &set.problems {
            outln!(
                "  NOT A MEMBER: {}: {}",
                problem.path.display(),
                problem.problem
            );
        }
        print_damage(&damage);
        if entries.is_empty() {
            outln!("no recordings");
        } else {
            outln!(
                "{:>4}  {:<16} {:<23} {:<23} {:>12} {:>9} {:>10} {:>12}  name",
                "id",
                "state",
                "start (UTC)",
                "end (UTC)",
                "bytes",
                "chunks",
                "MiB/s",
                "lost bytes",
            );
            for entry in &entries {
                let value = entry_json(entry);
                outln!(
                    "{:>4}  {:<16} {:<23} {:<23} {:>12} {:>9} {:>10.1} {:>12}  {}",
                    entry.recording_id,
                    state_text(entry),
                    format_utc_ns(entry.start_ns),
                    if entry.end_ns == 0 {
                        "-".to_string()
                    } else {
                        format_utc_ns(entry.end_ns)
                    },
                    value["bytes"].as_u64().unwrap_or(0),
                    value["chunk_count"].as_u64().unwrap_or(0),
                    value["mean_rate_mib_per_s"].as_f64().unwrap_or(0.0),
                    entry.lost_bytes,
                    if entry.flags.contains(RecordingFlags::RECORDS) {
                        format!("{} (network records)", entry.name.as_str())
                    } else {
                        entry.name.as_str().to_string()
                    }
                );
                if args.losses && entry.flags.contains(RecordingFlags::RECORDS) {
                    let counts = record_losses(&source, entry)?;
                    match counts.dropped {
                        0 => outln!("      no records lost"),
                        dropped => outln!(
                            "      LOST {dropped} datagrams or frames in {}",
                            counts.causes()
                        ),
                    }
                }
                for retirement in &entry.retirements {
                    outln!("      DEGRADED: {}", retirement_line(&source, retirement));
                }
                if let Some(found) = unaccounted
                    .iter()
                    .find(|found| found.recording_id == entry.recording_id && !found.is_clear())
                {
                    outln!(
                        "      UNACCOUNTED: {} (nvrec repair extends the entry over them)",
                        crate::repair_cmd::unaccounted_text(found)
                    );
                }
            }
        }
        let records = entries
            .iter()
            .any(|entry| entry.flags.contains(RecordingFlags::RECORDS));
        if records && !args.losses {
            outln!(
                "network records keep their losses (drops, packets read only in part) inside \
                 the recording, not in \"lost bytes\": nvrec ls --losses or nvrec verify counts them"
            );
        }
        if let Some((found, rows)) = &scanned {
            crate::repair_cmd::print_scan(found, rows);
        }
    }
    Ok(Finished(if whole { exit::OK } else { exit::FAILURE }))
}

/// The metadata damage of a set, a line each, with what to do about it.
fn print_damage(damage: &[health::MetaDamage]) {
    for item in damage {
        outln!("  METADATA {item}");
    }
    if damage
        .iter()
        .any(|d| d.severity == health::Severity::Repairable)
    {
        outln!("  (nvrec repair rewrites the damaged copies from the good ones)");
    }
}

#[derive(Args, Debug)]
pub struct ReplayArgs {
    /// The members of a volume set, or an archive (file://DIR, s3://BUCKET/PREFIX).
    #[arg(required = true)]
    targets: Vec<PathBuf>,
    /// Which recording (default: the last).
    #[arg(long)]
    recording: Option<u32>,
    /// Where the stream goes: a file, or stdout with '-'. Default: stdout, unless stdout is a
    /// terminal (the stream is binary data): then redirect it, give a file, or ask for the
    /// terminal with '--output -'.
    #[arg(long)]
    output: Option<PathBuf>,
    /// Start this long after the recording's start (500ms, 2m), or at this time in UTC
    /// (RFC 3339: 2026-11-27T08:00:00Z); found by search, at chunk granularity.
    #[arg(long, value_parser = crate::time_arg::time_arg)]
    from: Option<TimeArg>,
    /// End this long after the recording's start, or at this time in UTC (after --from).
    #[arg(long, value_parser = crate::time_arg::time_arg)]
    to: Option<TimeArg>,
    /// Reproduce the original timing from the chunk timestamps (with --send-to, from each
    /// datagram's receive time).
    #[arg(long)]
    pace: bool,
    /// Paced at this multiple of the recorded speed: 2x twice as fast, 0.5x half as fast,
    /// max as fast as it goes (--pace is 1x).
    #[arg(long, value_parser = speed_arg)]
    speed: Option<Speed>,
    /// Send the recording back onto the network instead of writing it out: a recording of
    /// datagrams to udp://HOST:PORT, one datagram per recorded one; a capture onto the
    /// interface iface:IFACE, each frame as recorded (AF_PACKET, root; a frame longer than
    /// the interface sends is counted and skipped). With --pace, at the recorded times.
    #[arg(
        long,
        value_name = "udp://HOST:PORT|iface:IFACE",
        conflicts_with = "output"
    )]
    send_to: Option<String>,
    /// A recording of network streams: only these streams (the order of the recording's
    /// --source options, or of the TCP connections accepted, from 0); repeat for several.
    #[arg(long)]
    stream: Vec<u16>,
    /// What to write in place of a hole in the stream: nothing, or zeros of its length, found
    /// from the stream offset of the chunk after it (a hole at the very end has no chunk
    /// after it and is not filled).
    #[arg(long, value_enum, default_value = "skip")]
    gaps: GapsArg,
    #[arg(long, value_enum, default_value = "auto")]
    engine: EngineArg,
}

/// How a replay ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
enum ReplayOutcome {
    /// Every chunk of the recording (or of the --from/--to window) was read.
    Complete,
    /// SIGINT: the replay ended early; what was written is the stream up to there.
    Stopped,
    /// SIGTERM or a second SIGINT.
    Aborted,
    /// Writing the stream failed.
    Failed,
}

impl ReplayOutcome {
    fn text(self) -> &'static str {
        match self {
            ReplayOutcome::Complete => "replay complete",
            ReplayOutcome::Stopped => "replay stopped",
            ReplayOutcome::Aborted => "replay ABORTED",
            ReplayOutcome::Failed => "replay FAILED",
        }
    }
}

/// `--speed`: a multiple of the recorded speed, or as fast as it goes.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Speed {
    Times(f64),
    Max,
}

fn speed_arg(text: &str) -> Result<Speed, String> {
    let text = text.trim();
    if text.eq_ignore_ascii_case("max") {
        return Ok(Speed::Max);
    }
    let number = text.strip_suffix(['x', 'X']).unwrap_or(text);
    match number.parse::<f64>() {
        Ok(times) if times.is_finite() && times > 0.0 => Ok(Speed::Times(times)),
        _ => Err(format!(
            "{text:?} is not a speed: give a multiple of the recorded speed above 0 \
             (2x, 0.5x) or max"
        )),
    }
}

/// The multiple of the recorded speed a replay is paced at (`--speed`, `--pace` for 1x);
/// none when it goes as fast as it can.
fn pacing(args: &ReplayArgs) -> Option<f64> {
    match (args.speed, args.pace) {
        (Some(Speed::Times(times)), _) => Some(times),
        (Some(Speed::Max), _) | (None, false) => None,
        (None, true) => Some(1.0),
    }
}

pub fn replay(args: ReplayArgs, json: bool) -> Result<Finished> {
    // Everything about the arguments is checked before any read.
    crate::time_arg::check_window(args.from, args.to)?;
    if let Some(destination) = &args.send_to {
        return replay_to_network(&args, destination, json);
    }
    let to_stdout = args
        .output
        .as_deref()
        .is_none_or(|path| path.as_os_str() == "-");
    if to_stdout && json {
        return Err(UsageError(
            "--json and --output - both want stdout; give --output a file".into(),
        )
        .into());
    }
    if args.output.is_none() && std::io::stdout().is_terminal() {
        return Err(UsageError(
            "stdout is a terminal and replay writes the recorded stream there, binary data; \
             redirect it (> FILE, | PROGRAM), give --output FILE, or --output - to write to \
             the terminal anyway"
                .into(),
        )
        .into());
    }
    let source = ChunkSource::open(&args.targets)?;
    let entry = source.select(args.recording)?;
    let mut out: Box<dyn Write> = match &args.output {
        Some(path) if !to_stdout => {
            let file = std::fs::File::create(path)
                .with_context(|| format!("creating {}", path.display()))?;
            Box::new(std::io::BufWriter::with_capacity(64 << 10, file))
        }
        _ => Box::new(std::io::BufWriter::with_capacity(
            4 << 20,
            crate::output::StdoutData,
        )),
    };
    let (from_ns, to_ns) = crate::time_arg::window_ns(args.from, args.to, entry.start_ns)?;
    let progress = Arc::new(Progress::default());
    let display = progress::ProgressDisplay::start(Arc::clone(&progress), "replay".into(), !json);
    let mut written = 0u64;
    let mut problems: Vec<String> = Vec::new();
    let mut write_error: Option<std::io::Error> = None;
    let started = Instant::now();
    let mut first_timestamp: Option<u64> = None;
    // With --gaps zero: the holes, filled no further than the stream's length, and the zeros.
    let mut gap_fill = nvrec::sink::GapFill::new(entry.stream_len_bytes);
    let mut filled_bytes = 0u64;
    let zeros = match args.gaps {
        GapsArg::Zero => vec![0u8; ZERO_FILL_BYTES],
        GapsArg::Skip => Vec::new(),
    };
    // A capture's PcapNg writer, once its first frame is met (it takes over `out`).
    let mut capture: Option<PcapngExport<Box<dyn Write>>> = None;
    // Packets that span payloads, put back together.
    let mut reassembly = Reassembly::new();
    let summary = source.read_from(
        &entry,
        args.engine,
        from_ns,
        &signal::CONTROL,
        &progress,
        &mut |item| {
            match item {
                Item::Chunk { header, payload } => {
                    if from_ns.is_some_and(|from| header.timestamp_ns < from) {
                        return true;
                    }
                    if to_ns.is_some_and(|to| header.timestamp_ns > to) {
                        return false;
                    }
                    if let Some(speed) = pacing(&args) {
                        let first = *first_timestamp.get_or_insert(header.timestamp_ns);
                        let due = Duration::from_nanos(header.timestamp_ns.saturating_sub(first))
                            .div_f64(speed);
                        if let Some(wait) = due.checked_sub(started.elapsed()) {
                            if !sleep_unless_interrupted(wait) {
                                return false;
                            }
                        }
                    }
                    if header.flags.contains(ChunkFlags::RECORDS) {
                        // A capture replays as a PcapNg stream; datagrams and TCP bytes as
                        // their payloads in arrival order, losses reported.
                        if capture.is_none() && first_content(payload) == Some(Content::Ethernet) {
                            let writer = std::mem::replace(&mut out, Box::new(std::io::sink()));
                            let streams = (!args.stream.is_empty()).then(|| args.stream.clone());
                            match PcapngExport::new(writer, streams) {
                                Ok(export) => capture = Some(export),
                                Err(error) => {
                                    write_error = Some(std::io::Error::other(error));
                                    return false;
                                }
                            }
                        }
                        let records = reassembly.payload(header.stream_offset_bytes, payload);
                        let result = match &mut capture {
                            Some(export) => export_records(export, records),
                            None => {
                                write_record_data(&mut out, records, &args.stream, &mut problems)
                            }
                        };
                        match result {
                            Ok(bytes) => written += bytes,
                            Err(error) => {
                                write_error = Some(error);
                                return false;
                            }
                        }
                        return true;
                    }
                    if args.gaps == GapsArg::Zero {
                        let hole =
                            gap_fill.before(header.stream_offset_bytes, payload.len() as u64);
                        if hole.beyond_end_bytes > 0 {
                            problems.push(format!(
                                "chunk sequence {} on member {} slot {} says stream offset {}, \
                                 past the recording's {} bytes: {} bytes of its hole not filled",
                                header.sequence,
                                header.member_index,
                                header.slot_index,
                                header.stream_offset_bytes,
                                entry.stream_len_bytes,
                                hole.beyond_end_bytes
                            ));
                        }
                        let hole_bytes = hole.zero_bytes;
                        match write_zeros(&mut out, &zeros, hole_bytes) {
                            Ok(done_bytes) => {
                                filled_bytes += done_bytes;
                                written += done_bytes;
                                if done_bytes < hole_bytes {
                                    return false; // Interrupted.
                                }
                            }
                            Err(error) => {
                                write_error = Some(error);
                                return false;
                            }
                        }
                    }
                    if let Err(error) = out.write_all(payload) {
                        write_error = Some(error);
                        return false;
                    }
                    written += payload.len() as u64;
                    if header.flags.contains(ChunkFlags::GAP) {
                        problems.push(format!(
                            "gap: {} bytes lost before stream offset {}",
                            header.gap_bytes, header.stream_offset_bytes
                        ));
                    }
                }
                Item::Missing {
                    first_sequence,
                    count,
                } => {
                    problems.push(format!(
                        "{count} chunks missing from sequence {first_sequence}"
                    ));
                }
                Item::Damage(damage) => {
                    problems.push(format!(
                        "damaged chunk on member {} ({}) slot {} (offset {:#x}): {}",
                        damage.member_index,
                        damage.member_path,
                        damage.slot_index,
                        damage.offset_bytes,
                        damage.what
                    ));
                }
            }
            true
        },
    )?;
    drop(display);
    if let Some(loss) = reassembly.finish() {
        problems.push(loss_text(&loss));
        if let Some(export) = &mut capture {
            if let Err(error) = export.record(&Record::Loss(loss)) {
                write_error.get_or_insert(std::io::Error::other(error));
            }
        }
    }
    if let Some(export) = capture {
        match export.finish() {
            Ok((writer, exported)) => {
                out = writer;
                written += exported.bytes;
            }
            Err(error) => {
                write_error.get_or_insert(std::io::Error::other(error));
            }
        }
    }
    if let Err(error) = out.flush() {
        write_error.get_or_insert(error);
    }
    if crate::output::stdout_closed() {
        // The reader went away (`replay | head -c 100`): main ends the command quietly.
        return Ok(Finished(exit::FAILURE));
    }
    let outcome = if write_error.is_some() {
        ReplayOutcome::Failed
    } else {
        match signal::CONTROL.state() {
            ControlState::Run => ReplayOutcome::Complete,
            ControlState::Stop => ReplayOutcome::Stopped,
            ControlState::Abort => ReplayOutcome::Aborted,
        }
    };
    let damaged = summary.damage_count > 0 || summary.missing_chunk_count > 0;
    if json {
        let value = serde_json::json!({
            "recording_id": entry.recording_id,
            "recording_state": state_text(&entry),
            "outcome": outcome,
            "written_bytes": written,
            "zero_filled_bytes": filled_bytes,
            "summary": summary,
            "problems": problems,
            "error": write_error.as_ref().map(|e| e.to_string()),
            "degraded": !entry.retirements.is_empty(),
            "retirements": entry.retirements.iter().map(retirement_json).collect::<Vec<_>>(),
        });
        outln!("{value}");
    } else {
        errln!(
            "nvrec replay: recording {} ({}): {}: {} bytes in {} chunks, {:.3} s, {:.1} MiB/s",
            entry.recording_id,
            state_text(&entry),
            outcome.text(),
            written,
            summary.chunk_count,
            summary.elapsed_s,
            summary.rate_mib_per_s
        );
        if filled_bytes > 0 {
            errln!("  {filled_bytes} bytes of zeros written in place of the holes (--gaps zero)");
        }
        for retirement in &entry.retirements {
            errln!("  degraded: {}", retirement_line(&source, retirement));
        }
        for problem in problems.iter().take(20) {
            errln!("  {problem}");
        }
    }
    if let Some(error) = write_error {
        return Err(error).context("writing the replayed stream");
    }
    Ok(Finished(match outcome {
        ReplayOutcome::Aborted => exit::ABORTED,
        _ if damaged => exit::FAILURE,
        _ => exit::OK,
    }))
}

/// Sleeps for `duration`, waking early when SIGINT or SIGTERM asks the run to end (a long
/// pause in a paced replay must not hold them off). Returns whether it slept the whole time.
fn sleep_unless_interrupted(duration: Duration) -> bool {
    const STEP: Duration = Duration::from_millis(20);
    let until = Instant::now() + duration;
    loop {
        if signal::CONTROL.state() != ControlState::Run {
            return false;
        }
        let left = until.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return true;
        }
        std::thread::sleep(left.min(STEP));
    }
}

/// Writes `len_bytes` zeros, at most `zeros.len()` at a time, until SIGINT or SIGTERM asks
/// the run to end. Returns how many it wrote.
fn write_zeros(out: &mut dyn Write, zeros: &[u8], len_bytes: u64) -> std::io::Result<u64> {
    let mut done_bytes = 0;
    while done_bytes < len_bytes && signal::CONTROL.state() == ControlState::Run {
        let now = (len_bytes - done_bytes).min(zeros.len() as u64) as usize;
        out.write_all(&zeros[..now])?;
        done_bytes += now as u64;
    }
    Ok(done_bytes)
}

#[derive(Args, Debug)]
pub struct VerifyArgs {
    /// The members of a volume set, or an archive (file://DIR, s3://BUCKET/PREFIX).
    #[arg(required = true)]
    targets: Vec<PathBuf>,
    /// Which recording (default: every one).
    #[arg(long)]
    recording: Option<u32>,
    /// Seed of the pattern, for recordings of the pattern source. Default: each recording is
    /// checked against its own seed, read from its first chunk (so a set recorded with
    /// several seeds verifies); with --seed every recording must carry this one.
    #[arg(long, value_parser = size_arg)]
    seed: Option<u64>,
    /// For an archive: check that the store holds every object as it was uploaded (the
    /// manifest read whole, each segment's size and entity tag by HEAD) instead of reading
    /// every byte back. Quick; the bytes were checked against the chunks' CRCs before they
    /// left, so this finds objects lost, cut or replaced in the store, not a store that
    /// damages what it keeps.
    #[arg(long)]
    stored: bool,
    /// Exit 1 when a recording lost anything, whatever the cause: bytes lost to gaps,
    /// datagrams or frames the kernel or the recorder dropped (loss records), packets read
    /// only in part. Without it such a recording that reads whole is OK, its losses listed.
    #[arg(long)]
    strict: bool,
    #[arg(long, value_enum, default_value = "auto")]
    engine: EngineArg,
}

/// `verify --stored`: each of `selected`'s objects checked in the store by HEAD.
fn verify_stored(
    source: &ChunkSource,
    selected: &[RecordingEntry],
    json: bool,
) -> Result<Finished> {
    let Some(checked) = source.check_stored(selected) else {
        return Err(UsageError(
            "--stored checks the objects of an archive: give file://DIR or s3://BUCKET/PREFIX"
                .into(),
        )
        .into());
    };
    let all_good = source.unreadable().is_empty() && checked.iter().all(Option::is_none);
    if json {
        let recordings: Vec<_> = selected
            .iter()
            .zip(&checked)
            .map(|(entry, bad)| {
                serde_json::json!({"recording_id": entry.recording_id, "set_uuid": entry.set_uuid.to_string(), "good": bad.is_none(), "first_bad": bad})
            })
            .collect();
        outln!(
            "{}",
            serde_json::json!({"archive": source.archive_url(), "stored": true, "good": all_good, "recordings": recordings, "unreadable_manifests": source.unreadable()})
        );
    } else {
        for (entry, bad) in selected.iter().zip(&checked) {
            match bad {
                None => outln!(
                    "recording {} ({}): OK, every object stored as uploaded (by HEAD; not read back)",
                    entry.recording_id,
                    state_text(entry)
                ),
                Some(bad) => outln!(
                    "recording {} ({}): BAD: {bad}",
                    entry.recording_id,
                    state_text(entry)
                ),
            }
        }
        for bad in source.unreadable() {
            outln!("UNREADABLE MANIFEST {bad}");
        }
    }
    Ok(Finished(if all_good { exit::OK } else { exit::FAILURE }))
}

/// The seed that put the pattern into `payload` at stream offset `offset_bytes`, read from
/// its first two words (a chunk that is not aligned for that, or too short, tells none).
fn seed_of_payload(offset_bytes: u64, payload: &[u8]) -> Option<u64> {
    if !offset_bytes.is_multiple_of(8) || payload.len() < 8 {
        return None;
    }
    let word = |at: usize| u32::from_le_bytes(payload[at..at + 4].try_into().unwrap());
    Some(Pattern::seed_of_words(word(0), word(4), offset_bytes / 4))
}

/// Checks one PATTERN chunk's payload; `pattern` is `None` when no seed could be read.
fn check_pattern(
    pattern: Option<&Pattern>,
    offset_bytes: u64,
    payload: &[u8],
) -> Result<(), String> {
    if !offset_bytes.is_multiple_of(8) {
        return Err(format!(
            "stream offset {offset_bytes:#x} is not a multiple of 8, where the pattern never puts a chunk"
        ));
    }
    match pattern {
        Some(pattern) => pattern
            .check(offset_bytes, payload, 0)
            .map_err(|mismatch| mismatch.to_string()),
        // Under 8 bytes: too short to name a seed, and nothing to check it against.
        None => Ok(()),
    }
}

/// What a reader's item other than a chunk says went missing or is damaged.
pub(crate) fn hole_text(item: &Item<'_>) -> Option<String> {
    match item {
        Item::Chunk { .. } => None,
        Item::Missing {
            first_sequence,
            count,
        } => Some(format!(
            "{count} chunks missing from sequence {first_sequence}"
        )),
        Item::Damage(damage) => Some(format!(
            "damaged chunk on member {} slot {}: {}",
            damage.member_index, damage.slot_index, damage.what
        )),
    }
}

/// `replay --send-to udp://HOST:PORT`: each recorded datagram sent again, in order, paced
/// by the receive times with --pace.
fn replay_to_network(args: &ReplayArgs, destination_text: &str, json: bool) -> Result<Finished> {
    let interface = destination_text.strip_prefix("iface:");
    if interface == Some("") {
        return Err(UsageError(format!(
            "--send-to {destination_text}: name the interface, as iface:eth0"
        ))
        .into());
    }
    let destination = match interface {
        Some(_) => None,
        None => Some(parse_udp_destination(destination_text)?),
    };
    let source = ChunkSource::open(&args.targets)?;
    let entry = source.select(args.recording)?;
    if !entry.flags.contains(RecordingFlags::RECORDS) {
        return Err(UsageError(format!(
            "recording {} holds a byte stream, not datagrams: --send-to replays datagrams",
            entry.recording_id
        ))
        .into());
    }
    let output = match (interface, destination) {
        (Some(interface), _) => {
            Output::Interface(nvrec::net::FrameSender::open(interface).map_err(source_error)?)
        }
        (None, Some(destination)) => {
            let bind: std::net::SocketAddr = if destination.is_ipv4() {
                "0.0.0.0:0".parse()?
            } else {
                "[::]:0".parse()?
            };
            let socket =
                std::net::UdpSocket::bind(bind).context("opening a UDP socket to send from")?;
            Output::Udp {
                socket,
                destination,
            }
        }
        (None, None) => unreachable!("a destination or an interface"),
    };
    let mut sender = DatagramSender {
        output,
        skipped: 0,
        streams: args.stream.clone(),
        pace: pacing(args),
        origin: None,
        sent: 0,
        sent_bytes: 0,
        error: None,
    };
    let (from_ns, to_ns) = crate::time_arg::window_ns(args.from, args.to, entry.start_ns)?;
    let progress = Arc::new(Progress::default());
    let display = progress::ProgressDisplay::start(Arc::clone(&progress), "send".into(), !json);
    let mut problems: Vec<String> = Vec::new();
    let mut reassembly = Reassembly::new();
    let summary = source.read_from(
        &entry,
        args.engine,
        from_ns,
        &signal::CONTROL,
        &progress,
        &mut |item| {
            match item {
                Item::Chunk { header, payload } => {
                    if to_ns.is_some_and(|to| header.timestamp_ns >= to) {
                        return false;
                    }
                    let records = reassembly.payload(header.stream_offset_bytes, payload);
                    return sender.payload(records, from_ns, to_ns, &mut problems);
                }
                hole => problems.extend(hole_text(&hole)),
            }
            true
        },
    )?;
    drop(display);
    sender.finish();
    problems.extend(reassembly.finish().map(|loss| loss_text(&loss)));
    if let Some(error) = sender.error {
        return Err(anyhow::Error::new(error).context(format!("sending to {destination_text}")));
    }
    let too_large = match &sender.output {
        Output::Interface(frames) => frames.report().too_large,
        Output::Udp { .. } => 0,
    };
    if too_large > 0 {
        problems.push(format!(
            "{too_large} frames longer than the interface sends (GSO packets captured whole?) \
             were not sent"
        ));
    }
    if sender.skipped > 0 {
        problems.push(format!(
            "{} records are not captured frames and were not sent to an interface",
            sender.skipped
        ));
    }
    if json {
        outln!(
            "{}",
            serde_json::json!({
                "recording_id": entry.recording_id,
                "destination": destination_text.strip_prefix("udp://").unwrap_or(destination_text),
                "sent_datagrams": sender.sent,
                "sent_bytes": sender.sent_bytes,
                "too_large": too_large,
                "skipped": sender.skipped,
                "summary": summary,
                "problems": problems,
            })
        );
    } else {
        errln!(
            "nvrec replay: recording {} ({}): {} {} ({} bytes) sent to {}",
            entry.recording_id,
            state_text(&entry),
            sender.sent,
            if interface.is_some() {
                "frames"
            } else {
                "datagrams"
            },
            sender.sent_bytes,
            if destination_text.contains("://") || interface.is_some() {
                destination_text.to_string()
            } else {
                format!("udp://{destination_text}")
            }
        );
        for problem in &problems {
            errln!("  {problem}");
        }
    }
    let damaged = summary.damage_count > 0 || summary.missing_chunk_count > 0;
    Ok(Finished(if damaged { exit::FAILURE } else { exit::OK }))
}

fn parse_udp_destination(text: &str) -> Result<std::net::SocketAddr, UsageError> {
    use std::net::ToSocketAddrs;
    let address = text.strip_prefix("udp://").ok_or_else(|| {
        UsageError(format!(
            "--send-to {text}: give udp://HOST:PORT or iface:IFACE"
        ))
    })?;
    address
        .to_socket_addrs()
        .ok()
        .and_then(|mut addresses| addresses.next())
        .ok_or_else(|| UsageError(format!("--send-to {text}: not an address and port")))
}

/// Where a replay to the network sends.
enum Output {
    Udp {
        socket: std::net::UdpSocket,
        destination: std::net::SocketAddr,
    },
    /// Captured frames, as recorded, onto an interface.
    Interface(nvrec::net::FrameSender),
}

/// Sends the datagrams (or frames) of payloads of records.
struct DatagramSender {
    output: Output,
    /// Records that are not frames, met when sending to an interface.
    skipped: u64,
    /// Only these streams (all when empty).
    streams: Vec<u16>,
    /// The multiple of the recorded speed it sends at; none: as fast as it goes.
    pace: Option<f64>,
    /// (first datagram's receive time, when it was sent), for --pace.
    origin: Option<(u64, Instant)>,
    sent: u64,
    sent_bytes: u64,
    error: Option<std::io::Error>,
}

impl DatagramSender {
    /// Sends the datagrams of one payload received in the window; false to stop.
    fn payload<'a>(
        &mut self,
        records: nvrec::layout::Walk<'a>,
        from_ns: Option<u64>,
        to_ns: Option<u64>,
        problems: &mut Vec<String>,
    ) -> bool {
        for record in records {
            let packet = match record {
                Ok(nvrec::layout::Record::Packet(packet)) => packet,
                Ok(nvrec::layout::Record::Loss(loss)) => {
                    problems.push(loss_text(&loss));
                    continue;
                }
                Err(error) => {
                    problems.push(format!("a record does not decode: {error}"));
                    break;
                }
            };
            if from_ns.is_some_and(|from| packet.timestamp_ns < from)
                || !(self.streams.is_empty() || self.streams.contains(&packet.stream))
                || packet.data.is_empty() && packet.end
            {
                continue;
            }
            if to_ns.is_some_and(|to| packet.timestamp_ns >= to) {
                return false;
            }
            if matches!(self.output, Output::Interface(_))
                && packet.content != nvrec::layout::Content::Ethernet
            {
                self.skipped += 1;
                continue;
            }
            if !self.wait_for(packet.timestamp_ns) || !self.send(packet.data) {
                return false;
            }
        }
        true
    }

    /// With --pace, waits until the datagram is due; false when interrupted.
    fn wait_for(&mut self, timestamp_ns: u64) -> bool {
        let Some(speed) = self.pace else {
            return signal::CONTROL.state() == ControlState::Run;
        };
        let (first_ns, started) = *self.origin.get_or_insert((timestamp_ns, Instant::now()));
        let due = Duration::from_nanos(timestamp_ns.saturating_sub(first_ns)).div_f64(speed);
        match due.checked_sub(started.elapsed()) {
            Some(wait) => {
                // Frames queued so far are due now: out with them before the pause.
                self.finish();
                self.error.is_none() && sleep_unless_interrupted(wait)
            }
            None => signal::CONTROL.state() == ControlState::Run,
        }
    }

    /// Sends what is queued (frames go out in batches).
    fn finish(&mut self) {
        if let Output::Interface(frames) = &mut self.output {
            let before = frames.report();
            if let Err(error) = frames.flush() {
                self.error.get_or_insert(error);
            }
            let after = frames.report();
            self.sent += after.frames - before.frames;
            self.sent_bytes += after.bytes - before.bytes;
        }
    }

    /// Sends one datagram, waiting out a full transmit queue (ENOBUFS); false on failure.
    fn send(&mut self, data: &[u8]) -> bool {
        let (socket, destination) = match &mut self.output {
            Output::Udp {
                socket,
                destination,
            } => (socket, *destination),
            Output::Interface(frames) => {
                let before = frames.report();
                if let Err(error) = frames.send(data) {
                    self.error = Some(error);
                    return false;
                }
                let after = frames.report();
                self.sent += after.frames - before.frames;
                self.sent_bytes += after.bytes - before.bytes;
                return true;
            }
        };
        loop {
            match socket.send_to(data, destination) {
                Ok(_) => {
                    self.sent += 1;
                    self.sent_bytes += data.len() as u64;
                    return true;
                }
                Err(error) if error.raw_os_error() == Some(libc::ENOBUFS) => {
                    std::thread::sleep(Duration::from_micros(50));
                }
                Err(error) if error.kind() == std::io::ErrorKind::Interrupted => {
                    if signal::CONTROL.state() != ControlState::Run {
                        return false;
                    }
                }
                Err(error) => {
                    self.error = Some(error);
                    return false;
                }
            }
        }
    }
}

/// What `verify` found in the records of a recording of datagrams.
#[derive(Debug, Clone, Default, serde::Serialize)]
struct RecordCounts {
    datagrams: u64,
    truncated: u64,
    /// Datagrams the recording says were lost (loss records), and how many losses.
    dropped: u64,
    losses: u64,
    /// The same by cause, in the order first met.
    by_cause: Vec<CauseCount>,
}

/// Losses of one cause in a recording of records.
#[derive(Debug, Clone, Copy, serde::Serialize)]
struct CauseCount {
    cause: nvrec::layout::LossCause,
    losses: u64,
    /// Datagrams, frames or packets lost.
    count: u64,
    /// Their bytes, where known (0 where not).
    bytes: u64,
}

impl RecordCounts {
    /// Decodes every record of a payload; the first that does not decode is the error.
    fn count(
        &mut self,
        records: nvrec::layout::Walk<'_>,
    ) -> Result<(), nvrec::layout::LayoutError> {
        for record in records {
            match record? {
                nvrec::layout::Record::Packet(packet) => {
                    self.datagrams += 1;
                    self.truncated += u64::from(packet.is_truncated());
                }
                nvrec::layout::Record::Loss(loss) => self.loss(&loss),
            }
        }
        Ok(())
    }

    fn loss(&mut self, loss: &nvrec::layout::Loss) {
        self.dropped += loss.count;
        self.losses += 1;
        let at = match self.by_cause.iter().position(|c| c.cause == loss.cause) {
            Some(at) => at,
            None => {
                self.by_cause.push(CauseCount {
                    cause: loss.cause,
                    losses: 0,
                    count: 0,
                    bytes: 0,
                });
                self.by_cause.len() - 1
            }
        };
        let tally = &mut self.by_cause[at];
        tally.losses += 1;
        tally.count += loss.count;
        tally.bytes += loss.bytes;
    }

    fn text(&self) -> String {
        let mut text = format!(", {} records decoded", self.datagrams);
        if self.truncated > 0 {
            text.push_str(&format!(", {} truncated", self.truncated));
        }
        if self.dropped > 0 {
            text.push_str(&format!(", {} DROPPED in {}", self.dropped, self.causes()));
        }
        text
    }

    /// How many losses, and by cause.
    fn causes(&self) -> String {
        let causes: Vec<String> = self
            .by_cause
            .iter()
            .map(|c| format!("{} {} in {}", c.cause.name(), c.count, c.losses))
            .collect();
        format!("{} losses ({})", self.losses, causes.join(", "))
    }
}

/// Writes the data of the datagrams in a payload of records, in order; a loss, or a record
/// that does not decode, is a problem to report. Returns the bytes written.
fn write_record_data(
    out: &mut dyn Write,
    records: nvrec::layout::Walk<'_>,
    streams: &[u16],
    problems: &mut Vec<String>,
) -> std::io::Result<u64> {
    let mut written = 0;
    let wanted = |stream: u16| streams.is_empty() || streams.contains(&stream);
    for record in records {
        match record {
            Ok(nvrec::layout::Record::Packet(packet)) if !wanted(packet.stream) => {}
            Ok(nvrec::layout::Record::Loss(loss)) if !wanted(loss.stream) => {}
            Ok(nvrec::layout::Record::Packet(packet)) => {
                out.write_all(packet.data)?;
                written += packet.data.len() as u64;
            }
            Ok(nvrec::layout::Record::Loss(loss)) => problems.push(format!(
                "{} before {}",
                loss_text(&loss),
                format_utc_ns(loss.timestamp_ns)
            )),
            Err(error) => problems.push(format!("a record does not decode: {error}")),
        }
    }
    Ok(written)
}

/// What a network source took or was offered and the recording does not hold, beyond the
/// kernel's drops (which the recording marks), a line each.
fn network_loss_lines(counts: &nvrec::net::NetReport) -> Vec<String> {
    let mut lines = Vec::new();
    if counts.not_stored > 0 {
        lines.push(format!(
            "{}{} datagrams or frames ({} bytes) taken but not stored (the target filled, or \
             the recording ended, before their chunks were written)",
            if counts.not_stored_exact {
                ""
            } else {
                "at least "
            },
            counts.not_stored,
            counts.not_stored_bytes
        ));
    }
    if counts.unframed > 0 {
        lines.push(format!(
            "{} datagrams or frames received but not framed when the recording ended",
            counts.unframed
        ));
    }
    if counts.refused_connections > 0 {
        lines.push(format!(
            "{} TCP connections refused: every stream number (65536) was in use",
            counts.refused_connections
        ));
    }
    lines
}

/// A loss record (or a packet read only in part) as a problem to report.
fn loss_text(loss: &nvrec::layout::Loss) -> String {
    match loss.cause {
        nvrec::layout::LossCause::Partial => format!(
            "loss: a packet of {} bytes on stream {} read only in part (the chunk holding the \
             rest is missing, or the recording ends before it)",
            loss.bytes, loss.stream
        ),
        cause => format!(
            "loss: {} datagrams dropped on stream {} ({}) when recorded",
            loss.count,
            loss.stream,
            cause.name()
        ),
    }
}

/// Writes records to a capture's PcapNg stream; 0 bytes counted (the writer counts its own).
fn export_records(
    export: &mut PcapngExport<Box<dyn Write>>,
    records: nvrec::layout::Walk<'_>,
) -> std::io::Result<u64> {
    for record in records {
        let record = record.map_err(std::io::Error::other)?;
        export.record(&record).map_err(std::io::Error::other)?;
    }
    Ok(0)
}

/// A source that is not there or cannot be read as a stream, or an address that cannot be
/// listened on, is a mistake in the arguments.
pub fn source_error(error: std::io::Error) -> anyhow::Error {
    use std::io::ErrorKind::{
        AddrInUse, AddrNotAvailable, InvalidInput, IsADirectory, NotFound, PermissionDenied,
    };
    match error.kind() {
        IsADirectory | NotFound | PermissionDenied | AddrInUse | AddrNotAvailable
        | InvalidInput => UsageError(error.to_string()).into(),
        _ => error.into(),
    }
}

/// The capture options of `record`, checked; refused when the source is not a capture.
fn capture_options(
    args: &RecordArgs,
    spec: &SourceSpec,
) -> Result<nvrec::net::CaptureOptions, UsageError> {
    let given = args.capture_threads.is_some()
        || args.snaplen.is_some()
        || args.filter_bpf.is_some()
        || args.filter_program.is_some();
    if given && !matches!(spec, SourceSpec::Capture(_)) {
        return Err(UsageError(
            "--capture-threads, --snaplen and --filter-bpf are for --source capture:IFACE".into(),
        ));
    }
    let mut options = nvrec::net::CaptureOptions {
        threads: args
            .capture_threads
            .unwrap_or_else(nvrec::net::default_capture_threads),
        ..nvrec::net::CaptureOptions::default()
    };
    if !(1..=nvrec::net::CAPTURE_THREADS_MAX).contains(&options.threads) {
        return Err(UsageError(format!(
            "--capture-threads {}: give 1 to {}",
            options.threads,
            nvrec::net::CAPTURE_THREADS_MAX
        )));
    }
    if let Some(snaplen) = args.snaplen {
        if snaplen == 0 || snaplen > u64::from(nvrec::net::SNAPLEN_MAX) {
            return Err(UsageError(format!(
                "--snaplen {snaplen}: give 1 to {} bytes",
                nvrec::net::SNAPLEN_MAX
            )));
        }
        options.snaplen_bytes = snaplen as u32;
    }
    if let Some(program) = &args.filter_program {
        options.filter = Some(program.clone());
    } else if let Some(path) = &args.filter_bpf {
        let text = std::fs::read_to_string(path)
            .map_err(|error| UsageError(format!("--filter-bpf {}: {error}", path.display())))?;
        let program = nvrec::net::parse_bpf_program(&text).map_err(|error| {
            UsageError(format!(
                "--filter-bpf {}: {error} (make it with tcpdump -ddd EXPR)",
                path.display()
            ))
        })?;
        options.filter = Some(program);
    }
    Ok(options)
}

/// A source to record, and a network source's counters to show.
type RecordSource = (Box<dyn nvrec::source::Source>, Option<Arc<NetCounters>>);

/// Opens what `record` records.
fn open_record_source(
    spec: &SourceSpec,
    capture: &nvrec::net::CaptureOptions,
) -> Result<RecordSource> {
    if let SourceSpec::Udp(addresses) = spec {
        let udp = nvrec::net::UdpSource::bind(addresses).map_err(source_error)?;
        let counters = udp.counters();
        return Ok((Box::new(udp), Some(counters)));
    }
    if let SourceSpec::Tcp(addresses) = spec {
        let tcp = nvrec::net::TcpSource::listen(addresses).map_err(source_error)?;
        let counters = tcp.counters();
        return Ok((Box::new(tcp), Some(counters)));
    }
    if let SourceSpec::Capture(names) = spec {
        let capture = nvrec::net::CaptureSource::open_with(names, capture).map_err(source_error)?;
        let counters = capture.counters();
        return Ok((Box::new(capture), Some(counters)));
    }
    Ok((open_source(spec).map_err(source_error)?, None))
}

pub fn verify(args: VerifyArgs, json: bool) -> Result<Finished> {
    let source = ChunkSource::open(&args.targets)?;
    let entries = source.recordings()?;
    let selected: Vec<RecordingEntry> = match args.recording {
        Some(id) => vec![source.select(Some(id))?],
        None => entries.clone(),
    };
    if selected.is_empty() && source.unreadable().is_empty() {
        return Err(nvrec::recording::RecordingError::NoRecordings.into());
    }
    if args.stored {
        return verify_stored(&source, &selected, json);
    }
    let mut results = Vec::new();
    // An archive has no members or metadata copies of its own: its manifests were read
    // whole by `ChunkSource::open`, and what its objects hold is checked below.
    let (damage, missing_members, member_problems) = match source.set() {
        Some(set) => (
            health::check(set)?,
            set.missing_indices(),
            set.problems.clone(),
        ),
        None => (Vec::new(), Vec::new(), Vec::new()),
    };
    let mut all_good = missing_members.is_empty()
        && member_problems.is_empty()
        && source.unreadable().is_empty()
        && !health::loses_anything(&damage);
    // A crashed recording's end is found from the chunks on every member: without one, what
    // it holds past the last checkpoint is out of reach, and the end read is no more than
    // where the members present stop. Such a recording is not called good.
    let open_without_members: Vec<u32> = match source.set() {
        Some(set) if !missing_members.is_empty() => set
            .recordings()?
            .iter()
            .filter(|entry| entry.state == RecordingState::Open)
            .map(|entry| entry.recording_id)
            .collect(),
        _ => Vec::new(),
    };
    for entry in &selected {
        if signal::CONTROL.state() != ControlState::Run {
            all_good = false; // SIGINT or SIGTERM: the recordings left are not read.
            break;
        }
        let mut first_bad: Option<String> = None;
        let mut pattern_errors = 0u64;
        let mut pattern: Option<Pattern> = args.seed.map(Pattern::new);
        let mut records = RecordCounts::default();
        let mut reassembly = Reassembly::new();
        let progress = Arc::new(Progress::default());
        let display = progress::ProgressDisplay::start(
            Arc::clone(&progress),
            format!("verify {}", entry.recording_id),
            !json,
        );
        let summary = source.read_from(
            entry,
            args.engine,
            None,
            &signal::CONTROL,
            &progress,
            &mut |item| {
                match item {
                    Item::Chunk { header, payload } => {
                        if header.flags.contains(ChunkFlags::RECORDS) {
                            let walk = reassembly.payload(header.stream_offset_bytes, payload);
                            if let Err(why) = records.count(walk) {
                                first_bad.get_or_insert_with(|| {
                                    format!(
                                        "sequence {} on member {} slot {}: {why}",
                                        header.sequence, header.member_index, header.slot_index
                                    )
                                });
                            }
                        }
                        if header.flags.contains(ChunkFlags::PATTERN) {
                            if pattern.is_none() {
                                pattern = seed_of_payload(header.stream_offset_bytes, payload)
                                    .map(Pattern::new);
                            }
                            if let Err(why) =
                                check_pattern(pattern.as_ref(), header.stream_offset_bytes, payload)
                            {
                                pattern_errors += 1;
                                first_bad.get_or_insert_with(|| {
                                    format!(
                                        "sequence {} on member {} slot {}: {why}",
                                        header.sequence, header.member_index, header.slot_index
                                    )
                                });
                            }
                        }
                    }
                    Item::Missing {
                        first_sequence,
                        count,
                    } => {
                        first_bad.get_or_insert_with(|| {
                            format!("{count} chunks missing from sequence {first_sequence}")
                        });
                    }
                    Item::Damage(damage) => {
                        first_bad.get_or_insert_with(|| {
                            format!(
                                "member {} ({}) slot {} at offset {:#x}{}: {}",
                                damage.member_index,
                                source.describe_member(damage.member_index as usize),
                                damage.slot_index,
                                damage.offset_bytes,
                                damage
                                    .sequence
                                    .map(|s| format!(", sequence {s}"))
                                    .unwrap_or_default(),
                                damage.what
                            )
                        });
                    }
                }
                true
            },
        )?;
        drop(display);
        if let Some(loss) = reassembly.finish() {
            records.loss(&loss);
        }
        if signal::CONTROL.state() != ControlState::Run {
            first_bad.get_or_insert_with(|| "interrupted before the end: not all verified".into());
        }
        // Chunks of the recording past its entry's end that the entry does not claim (the
        // slots right after its end on each member; an archive holds what its entry claims).
        let unaccounted = source
            .set()
            .map(|set| nvrec::recording::scan::unaccounted(set, entry))
            .unwrap_or_default();
        if unaccounted.chunk_count > 0 {
            first_bad.get_or_insert_with(|| {
                format!(
                    "its entry ends before {} chunks the recording holds: unaccounted (nvrec repair extends the entry over them)",
                    unaccounted.chunk_count
                )
            });
        } else if unaccounted.unreadable_slots > 0 {
            first_bad.get_or_insert_with(|| {
                "a slot past its entry's end could not be read: whether the recording holds chunks its entry does not claim is unknown".into()
            });
        }
        if open_without_members.contains(&entry.recording_id) {
            first_bad.get_or_insert_with(|| {
                format!(
                    "its end is recovered without member{} {}, missing: the chunks there past \
                     its last checkpoint cannot be found",
                    if missing_members.len() == 1 { "" } else { "s" },
                    missing_members
                        .iter()
                        .map(u16::to_string)
                        .collect::<Vec<_>>()
                        .join(", ")
                )
            });
        }
        let good = first_bad.is_none();
        all_good &= good;
        let lossy = summary.lost_bytes > 0 || records.losses > 0;
        all_good &= !(args.strict && lossy);
        results.push(serde_json::json!({
            "recording_id": entry.recording_id,
            "state": state_text(entry),
            "good": good,
            "chunk_count": summary.chunk_count,
            "payload_bytes": summary.payload_bytes,
            "missing_chunk_count": summary.missing_chunk_count,
            "damage_count": summary.damage_count,
            "pattern_error_count": pattern_errors,
            "records": entry.flags.contains(RecordingFlags::RECORDS).then_some(&records),
            "pattern_seed": pattern.as_ref().map(Pattern::seed),
            "lost_bytes": summary.lost_bytes,
            "lossy": lossy,
            "first_bad": first_bad,
            "rate_mib_per_s": summary.rate_mib_per_s,
            "degraded": !entry.retirements.is_empty(),
            "redirected_chunk_count": summary.redirected_chunk_count,
            "retirements": entry.retirements.iter().map(retirement_json).collect::<Vec<_>>(),
        }));
        if let Some(result) = results.last_mut() {
            add_unaccounted(result, &unaccounted);
        }
        if !json {
            match &first_bad {
                None => outln!(
                    "recording {} ({}): OK, {} chunks, {} bytes, CRC and sequence checked{}{}, {:.1} MiB/s",
                    entry.recording_id,
                    state_text(entry),
                    summary.chunk_count,
                    summary.payload_bytes,
                    match &pattern {
                        Some(pattern) if entry.flags.contains(RecordingFlags::PATTERN) =>
                            format!(", pattern checked (seed {:#x})", pattern.seed()),
                        _ => String::new(),
                    },
                    if entry.flags.contains(RecordingFlags::RECORDS) {
                        records.text()
                    } else {
                        String::new()
                    },
                    summary.rate_mib_per_s
                ),
                Some(bad) => outln!("recording {} ({}): BAD: first bad chunk: {bad}", entry.recording_id, state_text(entry)),
            }
            if lossy && args.strict {
                outln!(
                    "  LOSSES (--strict): {} bytes lost to gaps, {} datagrams or frames in {} loss records",
                    summary.lost_bytes,
                    records.dropped,
                    records.losses
                );
            }
            for retirement in &entry.retirements {
                outln!("  DEGRADED: {}", retirement_line(&source, retirement));
            }
            if !unaccounted.is_clear() {
                outln!(
                    "  UNACCOUNTED: {}",
                    crate::repair_cmd::unaccounted_text(&unaccounted)
                );
            }
        }
    }
    if !json {
        for bad in source.unreadable() {
            outln!("UNREADABLE MANIFEST {bad}");
        }
        for index in &missing_members {
            outln!("member {index} is missing");
        }
        for problem in &member_problems {
            outln!("{}: {}", problem.path.display(), problem.problem);
        }
        print_damage(&damage);
    }
    if json {
        let set_uuid = source.set().map(|set| set.set_uuid.to_string());
        outln!(
            "{}",
            serde_json::json!({"set_uuid": set_uuid, "archive": source.archive_url(), "good": all_good, "recordings": results, "unreadable_manifests": source.unreadable(), "missing_members": missing_members, "problems": member_problems, "metadata_damage": damage})
        );
    }
    Ok(Finished(if all_good { exit::OK } else { exit::FAILURE }))
}
