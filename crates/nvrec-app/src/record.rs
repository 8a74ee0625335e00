//! A recording, from what was asked to how it ended: [`plan`] checks a [`RecordRequest`]
//! without touching anything, [`open_source`] binds the source, [`run`] records on the
//! calling thread until the recording ends, and [`RecordRun::class`] says how it did.
//!
//! `nvrec record` runs these steps on its main thread; `nvrec serve` runs them on a thread
//! per recording and watches the [`RecordHandle`] (progress, a network source's counters,
//! the writer's live counters) while the [`Control`] it passed carries its stop and abort.

use crate::outcome::{Class, UsageError};
use crate::sources::{self, Samples};
use anyhow::{Context, Result};
use nvrec::control::{Control, Progress};
use nvrec::device::Safety;
use nvrec::net::{CaptureOptions, NetCounters};
use nvrec::nvme::monitor::{EventSink, HealthMonitor, Telemetry};
use nvrec::recording::counters::RecordingCounters;
use nvrec::recording::writer::{self, InputKind, RecordOptions, RecordOutcome, RecordReport};
use nvrec::recording::{Fill, MemberFailure, Stripe};
use nvrec::source::SourceSpec;
use std::path::PathBuf;
use std::sync::{Arc, OnceLock};
use std::time::Duration;

/// What a recording is asked to be, as a front end parsed it (`record`'s options, the
/// service's JSON): nothing here has been checked yet.
#[derive(Debug, Clone)]
pub struct RecordRequest {
    pub targets: Vec<PathBuf>,
    /// `--source`, once per network stream.
    pub sources: Vec<String>,
    pub capture: CaptureRequest,
    pub seed: u64,
    pub size: Option<u64>,
    pub duration: Option<Duration>,
    pub rate_bytes_per_s: Option<f64>,
    pub chunk_size_bytes: u64,
    pub io_size_bytes: Option<u64>,
    pub queue_depth: u32,
    pub buffer_bytes: Option<u64>,
    pub stripe: Stripe,
    pub fill: Fill,
    pub append: bool,
    /// What the recording may reclaim of the set's oldest recordings, and how long the set
    /// keeps recordings (format 1.6).
    pub reclaim: Option<crate::retaining::ReclaimRequest>,
    pub keep: Option<Duration>,
    pub overwrite: bool,
    pub label: String,
    pub sync_interval: Duration,
    pub create_len_bytes: Option<u64>,
    pub engine: nvrec::engine::EngineChoice,
    pub on_member_failure: MemberFailure,
    pub member_timeout: Duration,
    pub safety: Safety,
    /// SCHED_FIFO priority for the recording thread (`--realtime`).
    pub realtime_priority: Option<u8>,
    pub samples: Samples,
    /// How often NVMe targets' SMART logs are sampled; none: not at all.
    pub health_interval: Option<Duration>,
    /// The share of the ring that marks may keep (`--max-marked`; format 1.7).
    pub max_marked: f64,
    /// What takes marks on its own while the recording runs, and their window.
    pub mark_triggers: crate::marking::Triggers,
    /// How much of each member a new set uses (`--usable`); the rest is left unwritten.
    pub usable: Option<nvrec::recording::volume::Usable>,
    /// Whether a recording of packets indexes its flows as it goes.
    pub flow_index: writer::FlowIndex,
}

/// A capture source's options as asked.
#[derive(Debug, Clone, Default)]
pub struct CaptureRequest {
    pub threads: Option<usize>,
    pub snaplen_bytes: Option<u64>,
    /// `--filter-bpf FILE`: read when the request is planned.
    pub filter_file: Option<PathBuf>,
    /// The program itself, given inline (the service reads no files).
    pub filter_program: Option<Vec<nvrec::net::BpfInstruction>>,
}

/// A recording checked and ready to start. Making one opens, creates and writes nothing.
#[derive(Debug)]
pub struct RecordPlan {
    pub targets: Vec<PathBuf>,
    pub source_spec: SourceSpec,
    /// A capture source's threads, snap length and filter.
    pub capture: CaptureOptions,
    pub options: RecordOptions,
    pub health_interval: Option<Duration>,
    pub realtime_priority: Option<u8>,
    pub mark_triggers: crate::marking::Triggers,
}

/// Checks `request` as far as can be done without touching a target or the source: every
/// mistake found here is a usage error, and nothing was created or opened.
pub fn plan(request: RecordRequest) -> Result<RecordPlan> {
    distinct_targets(&request.targets)?;
    let io_size = check_sizes(&request)?;
    let source_spec = sources::parse_sources(&request.sources, request.seed)?;
    if source_spec.is_records() && request.rate_bytes_per_s.is_some() {
        return Err(UsageError(
            "--rate paces a generated source; a network source comes at the rate it is sent".into(),
        )
        .into());
    }
    check_marks(&request)?;
    let options = record_options(&request, &source_spec, io_size)?;
    let capture = capture_options(&request.capture, &source_spec)?;
    Ok(RecordPlan {
        targets: request.targets,
        source_spec,
        capture,
        options,
        health_interval: request.health_interval,
        realtime_priority: request.realtime_priority,
        mark_triggers: request.mark_triggers,
    })
}

/// Marks are kept by rings: a trigger on another recording is a mistake, and so is a share
/// of the ring that leaves nothing to record on.
fn check_marks(request: &RecordRequest) -> Result<(), UsageError> {
    if !(request.max_marked > 0.0 && request.max_marked <= 0.9) {
        return Err(UsageError(format!(
            "--max-marked {:.0}% is out of range: marks may keep from 1% to 90% of the ring",
            request.max_marked * 100.0
        )));
    }
    let triggers = &request.mark_triggers;
    let ring = matches!(request.fill, Fill::Ring { .. });
    if (triggers.signal.is_some() || triggers.udp.is_some()) && !ring {
        return Err(UsageError(
            "--mark-on-signal and --mark-udp take marks that a ring keeps: add --ring".into(),
        ));
    }
    if (triggers.signal.is_some() || triggers.udp.is_some()) && request.reclaim.is_some() {
        return Err(UsageError(
            "a recording that reclaims (--reclaim) keeps no marks".into(),
        ));
    }
    Ok(())
}

/// The chunk, I/O and stream sizes, checked; the I/O size they make.
fn check_sizes(request: &RecordRequest) -> Result<u64> {
    let chunk = request.chunk_size_bytes;
    if let Err(error) = nvrec::layout::ChunkSize::new(chunk) {
        return Err(UsageError(format!("--chunk-size: {error}")).into());
    }
    let io_size = request
        .io_size_bytes
        .unwrap_or_else(|| nvrec::stream::io_size_bytes_default(chunk));
    nvrec::stream::check_io_size(chunk, io_size)?;
    if request.size == Some(0) {
        return Err(UsageError(
            "--size 0 records nothing: give at least one byte, or leave --size out to record until the source ends"
                .into(),
        )
        .into());
    }
    Ok(io_size)
}

fn record_options(
    request: &RecordRequest,
    source_spec: &SourceSpec,
    io_size: u64,
) -> Result<RecordOptions> {
    let chunk = request.chunk_size_bytes;
    Ok(RecordOptions {
        chunk_size_bytes: chunk as u32,
        io_chunk_count: (io_size / chunk) as u32,
        queue_depth: request.queue_depth,
        buffer_bytes: request
            .buffer_bytes
            .unwrap_or_else(|| default_buffer_bytes(request, source_spec, io_size)),
        stripe: request.stripe,
        fill: request.fill,
        append: request.append,
        overwrite: request.overwrite,
        label: request.label.clone(),
        sync_interval: request.sync_interval,
        on_member_failure: request.on_member_failure,
        member_timeout: request.member_timeout,
        engine: request.engine,
        limit_bytes: request.size,
        duration: request.duration,
        rate_bytes_per_s: request.rate_bytes_per_s,
        pattern: matches!(source_spec, SourceSpec::Pattern { .. }),
        safety: request.safety,
        create_len_bytes: request.create_len_bytes,
        signal: request.samples.signal(source_spec)?,
        retention: crate::retaining::retention_of(request.reclaim.as_ref(), request.keep)?,
        marks: None,
        max_marked: request.max_marked,
        usable: request.usable,
        flow_index: request.flow_index,
    })
}

/// The buffer pool when none is asked for: by how the input comes.
fn default_buffer_bytes(request: &RecordRequest, source_spec: &SourceSpec, io_size: u64) -> u64 {
    let input = match (request.rate_bytes_per_s, source_spec) {
        (Some(rate_bytes_per_s), _) => InputKind::Paced { rate_bytes_per_s },
        (None, SourceSpec::Pattern { .. } | SourceSpec::Zero) => InputKind::OnDemand,
        (None, _) => InputKind::Fed,
    };
    writer::default_buffer_bytes(
        input,
        request.targets.len(),
        request.queue_depth,
        io_size,
        writer::memory_bytes(),
    )
}

/// Refuses a target given twice, under the same name or another (a link, `./a` and `a`,
/// two nodes of one block device): a volume set needs each member once, and nothing else
/// would say so before formatting (a block device opened twice reads as "held by another
/// program"; a file given twice was formatted as two members). `ls`, `verify` and `replay`
/// only read: they name a member given twice as a problem of the set.
fn distinct_targets(targets: &[PathBuf]) -> Result<(), UsageError> {
    let identities: Vec<Identity> = targets.iter().map(|path| Identity::of(path)).collect();
    for (later, later_identity) in identities.iter().enumerate() {
        let Some(earlier) = identities[..later].iter().position(|i| i == later_identity) else {
            continue;
        };
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
    Ok(())
}

/// What makes two paths the same target.
#[derive(PartialEq, Eq)]
enum Identity {
    Device(u64),
    File(u64, u64),
    Missing(PathBuf),
}

impl Identity {
    fn of(path: &std::path::Path) -> Identity {
        use std::os::unix::fs::{FileTypeExt, MetadataExt};
        match std::fs::metadata(path) {
            Ok(metadata) if metadata.file_type().is_block_device() => {
                Identity::Device(metadata.rdev())
            }
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
        }
    }
}

/// The capture options, checked; refused when the source is not a capture.
fn capture_options(
    request: &CaptureRequest,
    spec: &SourceSpec,
) -> Result<CaptureOptions, UsageError> {
    let given = request.threads.is_some()
        || request.snaplen_bytes.is_some()
        || request.filter_file.is_some()
        || request.filter_program.is_some();
    if given && !matches!(spec, SourceSpec::Capture(_)) {
        return Err(UsageError(
            "--capture-threads, --snaplen and --filter-bpf are for --source capture:IFACE".into(),
        ));
    }
    let mut options = CaptureOptions {
        threads: request
            .threads
            .unwrap_or_else(nvrec::net::default_capture_threads),
        ..CaptureOptions::default()
    };
    if !(1..=nvrec::net::CAPTURE_THREADS_MAX).contains(&options.threads) {
        return Err(UsageError(format!(
            "--capture-threads {}: give 1 to {}",
            options.threads,
            nvrec::net::CAPTURE_THREADS_MAX
        )));
    }
    if let Some(snaplen) = request.snaplen_bytes {
        if snaplen == 0 || snaplen > u64::from(nvrec::net::SNAPLEN_MAX) {
            return Err(UsageError(format!(
                "--snaplen {snaplen}: give 1 to {} bytes",
                nvrec::net::SNAPLEN_MAX
            )));
        }
        options.snaplen_bytes = snaplen as u32;
    }
    options.filter = capture_filter(request)?;
    Ok(options)
}

/// The capture filter: given inline, or read from `--filter-bpf FILE`.
fn capture_filter(
    request: &CaptureRequest,
) -> Result<Option<Vec<nvrec::net::BpfInstruction>>, UsageError> {
    if let Some(program) = &request.filter_program {
        return Ok(Some(program.clone()));
    }
    let Some(path) = &request.filter_file else {
        return Ok(None);
    };
    let text = std::fs::read_to_string(path)
        .map_err(|error| UsageError(format!("--filter-bpf {}: {error}", path.display())))?;
    let program = nvrec::net::parse_bpf_program(&text).map_err(|error| {
        UsageError(format!(
            "--filter-bpf {}: {error} (make it with tcpdump -ddd EXPR)",
            path.display()
        ))
    })?;
    Ok(Some(program))
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
    /// Where marks are asked of the recording while it runs.
    pub marks: Arc<nvrec::recording::marks::MarkDesk>,
}

/// An opened source, ready for [`run`].
pub struct OpenedSource(Box<dyn nvrec::source::Source>);

/// Opens the plan's source (binding a network source's sockets, whose counters `handle`
/// then shows): before any target is touched, so that a source that cannot be opened
/// leaves nothing behind.
pub fn open_source(plan: &RecordPlan, handle: &RecordHandle) -> Result<OpenedSource> {
    let (source, network) = sources::open_record_source(&plan.source_spec, &plan.capture)?;
    if let Some(network) = network {
        let _ = handle.network.set(network);
    }
    Ok(OpenedSource(source))
}

/// How a recording run ended, with what its report needs.
pub struct RecordRun {
    pub report: Result<RecordReport>,
    pub telemetry: Option<Telemetry>,
    pub scheduling: Scheduling,
    /// What the mark triggers (signal, datagram) did, a line each.
    pub mark_lines: Vec<String>,
}

impl RecordRun {
    /// A run that never started: its source could not be opened.
    pub fn not_started(error: anyhow::Error) -> RecordRun {
        RecordRun::failed(error)
    }

    /// A run that ended with `error` and no report (the recorder itself failed: the
    /// recording is on the drives as after a crash, up to its last durable checkpoint).
    pub fn failed(error: anyhow::Error) -> RecordRun {
        RecordRun {
            report: Err(error),
            telemetry: None,
            scheduling: scheduling(),
            mark_lines: Vec::new(),
        }
    }

    pub fn class(&self) -> Class {
        match &self.report {
            Ok(report) => report_class(report),
            Err(error) => Class::of_error(error),
        }
    }
}

/// The class of a finished recording.
pub fn report_class(report: &RecordReport) -> Class {
    match report.outcome {
        RecordOutcome::Failed => Class::Failed,
        RecordOutcome::Aborted => Class::Aborted,
        RecordOutcome::TargetFull => Class::Full,
        // A member whose flush or metadata write failed where no retirement tells of it is a
        // failing drive too: never a class that says all is well.
        _ if report.degraded || !report.member_errors.is_empty() => Class::Degraded,
        RecordOutcome::Stopped => Class::Stopped,
        _ => Class::Done,
    }
}

/// Runs the plan on the calling thread until it ends, stopped or aborted through
/// `control`; drive health warnings go to `on_health`. Files it created are removed again
/// if it failed before taking a byte.
pub fn run(
    plan: &RecordPlan,
    source: OpenedSource,
    handle: &RecordHandle,
    control: &Control,
    on_health: EventSink,
) -> RecordRun {
    let OpenedSource(mut source) = source;
    let created = NewFiles::note(&plan.targets);
    let monitor = start_health(plan, on_health);
    let realtime = match plan.realtime_priority {
        Some(priority) => enter_realtime(priority),
        None => Ok(()),
    };
    let options = RecordOptions {
        marks: Some(handle.marks.clone()),
        ..plan.options.clone()
    };
    // The buffer pool's fill is published while it runs, for `archive` to back off by;
    // marks are taken from its socket and triggers.
    let (report, mark_lines) =
        crate::marking::serve_while(&handle.marks, &handle.counters, &plan.mark_triggers, || {
            realtime.and_then(|()| {
                nvrec::recording::load::publish_while(&handle.counters, || {
                    writer::record_counted(
                        &plan.targets,
                        source.as_mut(),
                        &options,
                        control,
                        &handle.progress,
                        &handle.counters,
                    )
                })
                .context("recording")
            })
        });
    let scheduling = scheduling();
    let telemetry = monitor.map(HealthMonitor::stop);
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
        mark_lines,
    }
}

/// Starts sampling the NVMe devices among the targets, unless asked not to.
fn start_health(plan: &RecordPlan, on_event: EventSink) -> Option<HealthMonitor> {
    let interval = plan.health_interval?;
    if nvrec::nvme::nvme_paths(&plan.targets).is_empty() {
        return None;
    }
    let interval = interval.max(Duration::from_millis(100));
    Some(HealthMonitor::start(&plan.targets, interval, on_event))
}

/// The scheduling policy and priority of the calling thread, as the kernel reports them.
#[derive(Debug, Clone, serde::Serialize)]
pub struct Scheduling {
    pub policy: &'static str,
    pub priority: i32,
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

/// Target files a use case is about to create, removed again unless [`NewFiles::keep`] says
/// they were written: one refused after creating them (a target too small, another target
/// refused, a block size the chunk size does not fit) leaves nothing behind.
pub struct NewFiles {
    paths: Vec<PathBuf>,
}

impl NewFiles {
    /// Notes which of `paths` do not exist yet (nvrec creates only those).
    pub fn note(paths: &[PathBuf]) -> NewFiles {
        NewFiles {
            paths: paths
                .iter()
                .filter(|path| std::fs::symlink_metadata(path).is_err())
                .cloned()
                .collect(),
        }
    }

    /// The files hold data: they stay.
    pub fn keep(mut self) {
        self.paths.clear();
    }
}

impl Drop for NewFiles {
    fn drop(&mut self) {
        for path in &self.paths {
            // Only a regular file this run made; anything else is left alone.
            if std::fs::symlink_metadata(path).is_ok_and(|metadata| metadata.is_file()) {
                let _ = std::fs::remove_file(path);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn request(targets: &[&str], sources: &[&str]) -> RecordRequest {
        RecordRequest {
            targets: targets.iter().map(PathBuf::from).collect(),
            sources: sources.iter().map(|s| s.to_string()).collect(),
            capture: CaptureRequest::default(),
            seed: 0,
            size: None,
            duration: None,
            rate_bytes_per_s: None,
            chunk_size_bytes: 128 << 10,
            io_size_bytes: None,
            queue_depth: 8,
            buffer_bytes: Some(16 << 20),
            stripe: Stripe::Adaptive,
            fill: Fill::Linear,
            append: false,
            reclaim: None,
            keep: None,
            overwrite: false,
            label: String::new(),
            sync_interval: Duration::from_secs(1),
            create_len_bytes: None,
            engine: nvrec::engine::EngineChoice::Auto,
            on_member_failure: MemberFailure::Retire,
            member_timeout: Duration::from_secs(5),
            safety: Safety::Check,
            realtime_priority: None,
            samples: Samples::default(),
            health_interval: None,
            max_marked: 0.5,
            flow_index: writer::FlowIndex::default(),
            mark_triggers: crate::marking::Triggers::default(),
            usable: None,
        }
    }

    fn class_of(request: RecordRequest) -> Class {
        Class::of_error(&plan(request).expect_err("refused"))
    }

    #[test]
    fn a_plan_touches_nothing_and_keeps_what_was_asked() {
        let target = std::env::temp_dir().join(format!("nvrec-app-plan-{}", std::process::id()));
        let plan = plan(request(&[target.to_str().unwrap()], &["pattern"])).unwrap();
        assert!(!target.exists());
        assert!(matches!(plan.source_spec, SourceSpec::Pattern { seed: 0 }));
        assert_eq!(plan.options.io_chunk_count, 8);
        assert!(plan.options.pattern);
    }

    #[test]
    fn mistakes_are_usage_errors_found_before_anything_opens() {
        let same = request(&["/nonexistent/a", "/nonexistent/./a"], &["zero"]);
        assert_eq!(class_of(same), Class::Usage);
        let mut empty = request(&["/nonexistent/a"], &["zero"]);
        empty.size = Some(0);
        assert_eq!(class_of(empty), Class::Usage);
        let mut paced_network = request(&["/nonexistent/a"], &["udp://127.0.0.1:5000"]);
        paced_network.rate_bytes_per_s = Some(1e6);
        assert_eq!(class_of(paced_network), Class::Usage);
        let mut odd_chunk = request(&["/nonexistent/a"], &["zero"]);
        odd_chunk.chunk_size_bytes = 0;
        assert_eq!(class_of(odd_chunk), Class::Usage);
        let mut snaplen = request(&["/nonexistent/a"], &["zero"]);
        snaplen.capture.snaplen_bytes = Some(1500);
        assert_eq!(class_of(snaplen), Class::Usage);
    }
}
