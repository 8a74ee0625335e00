//! The `nvrec` command: argument parsing, progress, human and JSON output, exit codes.
//!
//! Everything that touches data lives in the `nvrec` library; this crate only translates
//! between people (or scripts) and it. Exit statuses are decided in one place, [`exit_code`].

// First, so that its printing macros (`outln!`, `out!`, `errln!`) are seen by every module.
#[macro_use]
mod output;
mod archive_cmd;
mod bench_args;
mod bench_cmd;
mod bench_compare;
mod bench_output;
mod bench_report;
mod bench_together;
mod export_cmd;
mod nvme_cmd;
mod plan_cmd;
mod progress;
mod recording_cmd;
mod repair_cmd;
mod samples;
mod selftest_cmd;
mod serve;
mod signal;
mod telemetry;
mod time_arg;

use anyhow::{Context, Result};
use clap::{Args, Parser, Subcommand, ValueEnum};
use nvrec::control::Progress;
use nvrec::device::{self, Access, OpenOptions, Safety};
use nvrec::engine::{EngineChoice, EngineKind};
use nvrec::input::open_source;
use nvrec::sink::{CheckSink, DiscardSink, Sink, WriterSink};
use nvrec::source::SourceSpec;
use nvrec::stream::{
    self, FlushMode, Outcome, RangeEnd, RangeSpec, StopTrigger, StopWhen, StreamConfig,
};
use nvrec::unit::{parse_duration, parse_size_bytes};
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

/// Exit statuses, documented in `--help` and docs/GUIDE.md ("Exit statuses").
pub mod exit {
    /// Done: complete, stopped on request, or the source ended.
    pub const OK: u8 = 0;
    /// An I/O error, a pattern mismatch, a failed self-test.
    pub const FAILURE: u8 = 1;
    /// Bad arguments: usage, address range, chunk size.
    pub const USAGE: u8 = 2;
    /// Refused for safety: the device is mounted or in use (never overridden), or holds
    /// data (a signature: --force; an nvrec set: --append or --overwrite).
    pub const REFUSED: u8 = 3;
    /// Aborted by SIGTERM or a second SIGINT (data up to the reported address is intact).
    pub const ABORTED: u8 = 4;
    /// A linear recording filled its targets and stopped cleanly (the data is intact).
    pub const TARGET_FULL: u8 = 5;
    /// A recording ended as asked but a member failed on the way and was retired: every
    /// byte is recorded on the others (`ls` says which member, when and why).
    pub const DEGRADED: u8 = 6;
    /// Stdout was closed (`nvrec ls SET | head -1`): the run was aborted and nothing more
    /// printed; 128 + SIGPIPE, what a shell shows for a program that SIGPIPE ended.
    pub const STDOUT_CLOSED: u8 = 128 + libc::SIGPIPE as u8;
}

const AFTER_HELP: &str = "\
SIZES: bytes, or with K, M, G, T, P (x1024; also KiB, MiB ...), KB, MB, GB, TB, PB (x1000),
       or 0x hex, as dd and fio take them: 128K, 4G, 1.5G, 0x20000.
SIGNALS: Ctrl-C (SIGINT) stops: chunks already taken are written, the flush runs and the last
       address is reported. A second Ctrl-C or SIGTERM aborts: chunks not yet submitted are
       dropped, in-flight ones complete, the flush runs.
EXIT STATUS: 0 done (or stopped), 1 failed (I/O error, mismatch, damaged recording), 2 bad
       arguments or addresses, 3 refused for safety (in use, or holding data: --force
       overrides a signature, --overwrite an nvrec set), 4 aborted, 5 target full,
       6 degraded (a member failed and was retired; the recording is whole on the others),
       141 stdout closed (a reader such as head went away: the run is aborted, quietly).";

#[derive(Parser, Debug)]
#[command(name = "nvrec", version, about = "Record streams onto NVMe SSDs at full speed, read them back, verify every byte", after_help = AFTER_HELP)]
struct Cli {
    /// Print the result as one JSON object on stdout instead of text.
    #[arg(long, global = true)]
    json: bool,
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Stream chunks into an address range of a file or block device.
    #[command(after_help = AFTER_HELP)]
    Write(WriteArgs),
    /// Stream chunks out of an address range, checking the pattern or copying them out.
    #[command(after_help = AFTER_HELP)]
    Read(ReadArgs),
    /// Run the NVMe-Streamer-style test suite on a target (default: a scratch file here).
    #[command(after_help = AFTER_HELP)]
    Selftest(selftest_cmd::SelftestArgs),
    /// Record a stream onto one or more targets: striped, framed, checkpointed.
    #[command(after_help = AFTER_HELP)]
    Record(recording_cmd::RecordArgs),
    /// List the recordings on a volume set, or in an archive (file://DIR, s3://BUCKET/PREFIX).
    Ls(recording_cmd::LsArgs),
    /// Reproduce a recorded stream byte-exactly, in order.
    Replay(recording_cmd::ReplayArgs),
    /// Write a recording as PcapNg (Wireshark, tcpdump; cut by a BPF filter), SigMF (radio
    /// samples) or MCAP (robotics logs).
    Export(export_cmd::ExportArgs),
    /// Check every chunk of the recordings: CRC, sequence, and the pattern.
    Verify(recording_cmd::VerifyArgs),
    /// Copy finished recordings into object storage (file://DIR, s3://BUCKET/PREFIX) as
    /// segments and a manifest each; resumable, checked against the chunks' CRCs.
    Archive(archive_cmd::ArchiveArgs),
    /// The catalog of archived recordings: list them, or rebuild it from an archive.
    Catalog(archive_cmd::CatalogArgs),
    /// Rewrite damaged metadata copies from good ones; persist a crashed recording's end;
    /// with --scan, rebuild lost recording entries from their chunks.
    Repair(repair_cmd::RepairArgs),
    /// Characterize a drive as a recorder uses it: sweep, fill, overwrite, profile.
    Bench(bench_cmd::BenchArgs),
    /// Plan drives, RAM buffer, retention and endurance for a target rate.
    Plan(plan_cmd::PlanArgs),
    /// List NVMe controllers and namespaces (model, firmware, PCIe link, formats) and other
    /// block devices, with what uses them.
    Devices(nvme_cmd::DevicesArgs),
    /// An NVMe drive's SMART / health log: temperatures, throttling, wear, data written.
    Health(nvme_cmd::HealthArgs),
    /// Run as a service: recordings started and stopped over an HTTP API (Unix socket or
    /// TCP), Prometheus metrics at /metrics, a live dashboard at /.
    Serve(serve::ServeArgs),
    /// Ask a running service (`nvrec serve`) how its recordings stand.
    Status(serve::client::StatusArgs),
}

#[derive(Args, Debug, Clone)]
pub struct RangeArgs {
    /// Address of the first chunk (multiple of the chunk size).
    #[arg(long, default_value = "0", value_parser = size_arg)]
    offset: u64,
    /// Address of the last chunk, inclusive (multiple of the chunk size).
    #[arg(long, value_parser = size_arg, group = "range_end")]
    last_offset: Option<u64>,
    /// Number of chunks.
    #[arg(long, group = "range_end")]
    chunks: Option<u64>,
    /// Bytes to transfer (a whole number of chunks). Default: up to the end of the target.
    #[arg(long, value_parser = size_arg, group = "range_end")]
    size: Option<u64>,
}

impl RangeArgs {
    fn spec(&self) -> RangeSpec {
        let end = match (self.last_offset, self.chunks, self.size) {
            (Some(last), _, _) => RangeEnd::LastOffset(last),
            (_, Some(count), _) => RangeEnd::ChunkCount(count),
            (_, _, Some(size)) => RangeEnd::SizeBytes(size),
            _ => RangeEnd::TargetEnd,
        };
        RangeSpec {
            first_offset_bytes: self.offset,
            end,
        }
    }

    /// Where the range ends, if that is known without looking at the target.
    fn end_bytes(&self, chunk_size_bytes: u64) -> Option<u64> {
        match self.spec().end {
            RangeEnd::LastOffset(last) => last.checked_add(chunk_size_bytes),
            RangeEnd::ChunkCount(count) => count
                .checked_mul(chunk_size_bytes)?
                .checked_add(self.offset),
            RangeEnd::SizeBytes(size) => size.checked_add(self.offset),
            RangeEnd::TargetEnd => None,
        }
    }
}

#[derive(ValueEnum, Debug, Clone, Copy, PartialEq, Eq)]
pub enum EngineArg {
    /// io_uring when the kernel allows it, else threads.
    Auto,
    #[value(name = "io_uring", alias = "io-uring", alias = "uring")]
    IoUring,
    /// Worker threads with pread/pwrite.
    Threads,
}

impl EngineArg {
    pub fn choice(self) -> EngineChoice {
        match self {
            EngineArg::Auto => EngineChoice::Auto,
            EngineArg::IoUring => EngineChoice::Only(EngineKind::IoUring),
            EngineArg::Threads => EngineChoice::Only(EngineKind::Threads),
        }
    }
}

#[derive(Args, Debug, Clone)]
pub struct IoArgs {
    /// Chunk size: the unit of addressing and checking (power of two, multiple of the
    /// target's logical block size).
    #[arg(long, default_value = "128K", value_parser = size_arg)]
    chunk_size: u64,
    /// Largest I/O: adjacent chunks are coalesced up to this size (a whole number of
    /// chunks; any other size is refused). Default: 1M, or one chunk where chunks are larger.
    #[arg(long, value_parser = size_arg)]
    io_size: Option<u64>,
    /// I/Os kept in flight.
    #[arg(long, default_value_t = stream::QUEUE_DEPTH_DEFAULT)]
    queue_depth: u32,
    /// I/O engine.
    #[arg(long, value_enum, default_value = "auto")]
    engine: EngineArg,
    /// Let a kernel thread poll the io_uring submission queue (costs a core).
    #[arg(long)]
    sqpoll: bool,
    /// Stop by itself after this long (as Ctrl-C would), e.g. 500ms, 10s, 2m.
    #[arg(long, value_parser = duration_arg)]
    stop_after: Option<Duration>,
}

impl IoArgs {
    pub fn config(&self, flush: FlushMode) -> StreamConfig {
        StreamConfig {
            chunk_size_bytes: self.chunk_size,
            io_size_bytes: self
                .io_size
                .unwrap_or_else(|| stream::io_size_bytes_default(self.chunk_size)),
            queue_depth: self.queue_depth,
            engine: self.engine.choice(),
            sqpoll: self.sqpoll,
            flush,
            trigger: self.stop_after.map(|duration| StopTrigger {
                when: StopWhen::After(duration),
                action: nvrec::control::ControlState::Stop,
            }),
        }
    }
}

#[derive(Args, Debug)]
struct WriteArgs {
    /// File or block device to write. A file is created (and preallocated) when the range
    /// says how long it must be.
    target: PathBuf,
    #[command(flatten)]
    range: RangeArgs,
    #[command(flatten)]
    io: IoArgs,
    /// What to write: pattern, zero, stdin, or a file path.
    #[arg(long, default_value = "pattern")]
    source: String,
    /// Seed of the pattern.
    #[arg(long, default_value = "0", value_parser = size_arg)]
    seed: u64,
    /// Skip the flush (fdatasync) after the last write.
    #[arg(long)]
    no_flush: bool,
    /// Write even to a device whose first blocks hold a filesystem or partition table (one
    /// that is mounted or in use is never written).
    #[arg(long)]
    force: bool,
}

#[derive(ValueEnum, Debug, Clone, Copy, PartialEq, Eq)]
enum CheckArg {
    /// Compare every chunk with the pattern of --seed.
    Pattern,
}

#[derive(Args, Debug)]
struct ReadArgs {
    /// File or block device to read.
    target: PathBuf,
    #[command(flatten)]
    range: RangeArgs,
    #[command(flatten)]
    io: IoArgs,
    /// Check what is read.
    #[arg(long, value_enum, conflicts_with = "output")]
    check: Option<CheckArg>,
    /// Seed of the pattern to check against.
    #[arg(long, default_value = "0", value_parser = size_arg)]
    seed: u64,
    /// Copy what is read to this file, or to stdout with '-'.
    #[arg(long)]
    output: Option<PathBuf>,
}

fn size_arg(text: &str) -> Result<u64, String> {
    parse_size_bytes(text).map_err(|error| error.to_string())
}

fn duration_arg(text: &str) -> Result<Duration, String> {
    parse_duration(text).map_err(|error| error.to_string())
}

/// A byte source: the pattern, zeros, stdin or a file. Network sources give records, which
/// only `record` takes (`parse_sources`).
pub fn parse_source(text: &str, seed: u64) -> Result<SourceSpec, UsageError> {
    if text.contains("://") || text.starts_with("capture:") {
        return Err(UsageError(format!(
            "--source {text}: a network source gives datagrams or frames, which only `nvrec record` takes"
        )));
    }
    Ok(match text {
        "pattern" => SourceSpec::Pattern { seed },
        "zero" | "zeros" => SourceSpec::Zero,
        "stdin" | "-" => SourceSpec::Stdin,
        path => SourceSpec::Path(PathBuf::from(path)),
    })
}

/// What `record` records: one byte source, or one or more network streams: UDP datagrams
/// (`udp://ADDR:PORT`, a stream each), TCP connections accepted (`tcp://ADDR:PORT`, a stream
/// per connection) or frames captured on interfaces (`capture:IFACE`, a stream each).
pub fn parse_sources(texts: &[String], seed: u64) -> Result<SourceSpec, UsageError> {
    let is_network = |text: &String| text.contains("://") || text.starts_with("capture:");
    let network = texts.iter().filter(|text| is_network(text)).count();
    if network == 0 {
        return match texts {
            [text] => parse_source(text, seed),
            _ => Err(UsageError(
                "several --source options record several network streams (udp://ADDR:PORT or \
                 capture:IFACE); a byte source (pattern, zero, stdin, a file) comes alone"
                    .into(),
            )),
        };
    }
    if network != texts.len() {
        return Err(UsageError(
            "network streams and a byte source cannot be recorded together".into(),
        ));
    }
    if texts.len() > u16::MAX as usize {
        return Err(UsageError("too many --source streams".into()));
    }
    let mut seen: Vec<&String> = Vec::new();
    for text in texts {
        if seen.contains(&text) {
            return Err(UsageError(format!("--source {text} is given twice")));
        }
        seen.push(text);
    }
    if texts.iter().all(|text| text.starts_with("capture:")) {
        let names = texts
            .iter()
            .map(|text| match &text["capture:".len()..] {
                "" => Err(UsageError(format!(
                    "--source {text}: name the interface, as capture:eth0"
                ))),
                name => Ok(name.to_string()),
            })
            .collect::<Result<_, _>>()?;
        return Ok(SourceSpec::Capture(names));
    }
    let scheme = texts[0].split("://").next().unwrap_or_default().to_string();
    let addresses = texts
        .iter()
        .map(|text| match text.split_once("://") {
            Some((kind, address)) if kind == scheme && matches!(kind, "udp" | "tcp") => {
                address.parse().map_err(|_| {
                    UsageError(format!(
                        "--source {text}: give {kind}://ADDRESS:PORT, such as {kind}://0.0.0.0:5000 \
                         or {kind}://[::]:5000"
                    ))
                })
            }
            _ => Err(UsageError(format!(
                "--source {text}: network sources are udp://ADDRESS:PORT, tcp://ADDRESS:PORT or \
                 capture:IFACE, one kind per recording"
            ))),
        })
        .collect::<Result<_, _>>()?;
    Ok(if scheme == "tcp" {
        SourceSpec::Tcp(addresses)
    } else {
        SourceSpec::Udp(addresses)
    })
}

/// The outcome of a command: an exit status, decided from what happened.
pub struct Finished(pub u8);

fn main() -> ExitCode {
    let cli = Cli::parse();
    signal::install();
    let json = cli.json;
    let result = run(cli);
    // A closed stdout ends the command whatever the run made of it (see `output`).
    let result = match output::take_stdout_error() {
        Some(error) => Err(anyhow::Error::new(error).context("writing to stdout")),
        None => result,
    };
    match result {
        Ok(Finished(code)) => ExitCode::from(code),
        Err(error) => {
            let code = exit_code(&error);
            if code == exit::STDOUT_CLOSED {
                // Quiet, as a program that SIGPIPE ended: the reader is gone.
            } else if json {
                let value = serde_json::json!({ "error": error_text(&error), "exit_code": code });
                outln!("{value}");
            } else {
                errln!("nvrec: error: {}", error_text(&error));
            }
            ExitCode::from(code)
        }
    }
}

/// The error and its causes, joined by ": " as anyhow's `{:#}` does, but leaving out a
/// cause whose text the message before it already quotes: many errors name their OS error
/// in their own message and also give it as their source, which printed it twice ("could not
/// open X: No such file or directory (os error 2); check ...: No such file or directory (os
/// error 2)").
fn error_text(error: &anyhow::Error) -> String {
    let mut text = String::new();
    for cause in error.chain() {
        let cause = cause.to_string();
        if text.contains(&cause) {
            continue;
        }
        if !text.is_empty() {
            text.push_str(": ");
        }
        text.push_str(&cause);
    }
    text
}

/// The one place that maps errors to exit statuses.
fn exit_code(error: &anyhow::Error) -> u8 {
    for cause in error.chain() {
        if cause
            .downcast_ref::<std::io::Error>()
            .is_some_and(|error| error.kind() == std::io::ErrorKind::BrokenPipe)
        {
            return exit::STDOUT_CLOSED;
        }
        if let Some(error) = cause.downcast_ref::<stream::StreamError>() {
            return match error {
                stream::StreamError::Config(_) | stream::StreamError::Address(_) => exit::USAGE,
                _ => exit::FAILURE,
            };
        }
        if cause.downcast_ref::<stream::AddressError>().is_some()
            || cause.downcast_ref::<stream::ConfigError>().is_some()
        {
            return exit::USAGE;
        }
        if let Some(error) = cause.downcast_ref::<device::DeviceError>() {
            return if error.is_safety_refusal() {
                exit::REFUSED
            } else {
                exit::FAILURE
            };
        }
        if cause.downcast_ref::<UsageError>().is_some()
            || cause.downcast_ref::<nvrec::selftest::SizeError>().is_some()
        {
            return exit::USAGE;
        }
        if let Some(error) = cause.downcast_ref::<nvrec::bench::BenchError>() {
            match error {
                nvrec::bench::BenchError::Settings(_)
                | nvrec::bench::BenchError::TargetTooSmall(_) => return exit::USAGE,
                nvrec::bench::BenchError::Device(error) if error.is_safety_refusal() => {
                    return exit::REFUSED
                }
                _ => {}
            }
        }
        if let Some(error) = cause.downcast_ref::<nvrec_archive::ArchiveError>() {
            if error.is_usage() {
                return exit::USAGE;
            }
        }
        if let Some(error) = cause.downcast_ref::<nvrec::recording::RecordingError>() {
            if error.is_usage() {
                return exit::USAGE;
            }
            if error.is_refusal() {
                return exit::REFUSED;
            }
            if let nvrec::recording::RecordingError::Device(error) = error {
                return if error.is_safety_refusal() {
                    exit::REFUSED
                } else {
                    exit::FAILURE
                };
            }
        }
    }
    exit::FAILURE
}

/// A mistake in the arguments that clap cannot see.
#[derive(Debug)]
pub struct UsageError(pub String);

impl std::fmt::Display for UsageError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for UsageError {}

fn run(cli: Cli) -> Result<Finished> {
    match cli.command {
        Command::Write(args) => write_command(args, cli.json),
        Command::Read(args) => read_command(args, cli.json),
        Command::Selftest(args) => selftest_cmd::run(args, cli.json),
        Command::Bench(args) => bench_cmd::run(args, cli.json),
        Command::Plan(args) => plan_cmd::run(args, cli.json),
        Command::Devices(args) => nvme_cmd::devices(args, cli.json),
        Command::Health(args) => nvme_cmd::health(args, cli.json),
        Command::Record(args) => recording_cmd::record(args, cli.json),
        Command::Ls(args) => recording_cmd::ls(args, cli.json),
        Command::Replay(args) => recording_cmd::replay(args, cli.json),
        Command::Export(args) => export_cmd::export(args, cli.json),
        Command::Verify(args) => recording_cmd::verify(args, cli.json),
        Command::Repair(args) => repair_cmd::repair(args, cli.json),
        Command::Serve(args) => serve::run(args),
        Command::Status(args) => serve::client::status(args, cli.json),
        Command::Archive(args) => archive_cmd::archive(args, cli.json),
        Command::Catalog(args) => archive_cmd::catalog(args, cli.json),
    }
}

/// Exit status for a finished stream run.
pub fn stream_exit_code(report: &stream::StreamReport) -> u8 {
    if !report.is_success() {
        exit::FAILURE
    } else if report.outcome == Outcome::Aborted {
        exit::ABORTED
    } else {
        exit::OK
    }
}

fn write_command(args: WriteArgs, json: bool) -> Result<Finished> {
    let flush = if args.no_flush {
        FlushMode::None
    } else {
        FlushMode::AfterWrite
    };
    let config = args.io.config(flush);
    // Check what can be checked before creating or opening anything: the settings and the
    // range's own shape. The block size and the target's end are checked once it is probed.
    config.validate(1)?;
    precheck_range(&args.range, config.chunk_size_bytes)?;
    let options = OpenOptions {
        access: Access::Write,
        create_len_bytes: args.range.end_bytes(config.chunk_size_bytes),
        safety: if args.force {
            Safety::Force
        } else {
            Safety::Check
        },
    };
    // The source first: a source that cannot be read must not leave a target created.
    let source_spec = parse_source(&args.source, args.seed)?;
    let mut source = open_source(&source_spec).map_err(recording_cmd::source_error)?;
    let created = NewFiles::note(std::slice::from_ref(&args.target));
    let target = device::open(&args.target, &options)
        .with_context(|| format!("opening {} for direct I/O", args.target.display()))?;
    let range = stream::plan(&target, args.range.spec(), &config)?;
    let progress = Arc::new(Progress::default());
    let display = progress::ProgressDisplay::start(Arc::clone(&progress), "write".into(), !json);
    let report = stream::write(
        &target,
        range,
        source.as_mut(),
        config,
        &signal::CONTROL,
        &progress,
    )?;
    created.keep();
    drop(display);
    output::print_stream_report(&report, Some(&source_spec), json, output::ReportTo::Stdout);
    Ok(Finished(stream_exit_code(&report)))
}

/// Target files a command is about to create, removed again unless [`NewFiles::keep`] says
/// they were written: a command refused after creating them (a target too small, another
/// target refused, a block size the chunk size does not fit) leaves nothing behind.
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
            // Only a regular file this command made; anything else is left alone.
            if std::fs::symlink_metadata(path).is_ok_and(|metadata| metadata.is_file()) {
                let _ = std::fs::remove_file(path);
            }
        }
    }
}

/// Finds the address errors that do not depend on the target (alignment, first after last)
/// before anything is opened, so that a bad range never creates or touches a file.
fn precheck_range(range: &RangeArgs, chunk_size_bytes: u64) -> Result<(), stream::AddressError> {
    if !chunk_size_bytes.is_power_of_two() {
        return Ok(()); // Reported by the config check.
    }
    stream::resolve_range(range.spec(), chunk_size_bytes, u64::MAX).map(|_| ())
}

fn read_command(args: ReadArgs, json: bool) -> Result<Finished> {
    let config = args.io.config(FlushMode::None);
    config.validate(1)?;
    precheck_range(&args.range, config.chunk_size_bytes)?;
    let options = OpenOptions {
        access: Access::Read,
        create_len_bytes: None,
        safety: Safety::Check,
    };
    let target = device::open(&args.target, &options)
        .with_context(|| format!("opening {} for direct I/O", args.target.display()))?;
    let range = stream::plan(&target, args.range.spec(), &config)?;
    let mut sink: Box<dyn Sink> = match (&args.check, &args.output) {
        (Some(CheckArg::Pattern), _) => {
            Box::new(CheckSink::new(nvrec::pattern::Pattern::new(args.seed)))
        }
        (None, Some(path)) if path.as_os_str() == "-" => {
            if json {
                return Err(UsageError(
                    "--output - and --json both want stdout; choose one".into(),
                )
                .into());
            }
            Box::new(WriterSink(std::io::BufWriter::with_capacity(
                1 << 20,
                output::StdoutData,
            )))
        }
        (None, Some(path)) => {
            let file = std::fs::File::create(path)
                .with_context(|| format!("creating output {}", path.display()))?;
            Box::new(WriterSink(std::io::BufWriter::with_capacity(1 << 20, file)))
        }
        (None, None) => Box::new(DiscardSink),
    };
    let progress = Arc::new(Progress::default());
    let display = progress::ProgressDisplay::start(Arc::clone(&progress), "read".into(), !json);
    let report = stream::read(
        &target,
        range,
        sink.as_mut(),
        config,
        &signal::CONTROL,
        &progress,
    )?;
    drop(display);
    let to_stdout = args
        .output
        .as_deref()
        .is_some_and(|path| path.as_os_str() == "-");
    let to = if to_stdout {
        output::ReportTo::Stderr
    } else {
        output::ReportTo::Stdout
    };
    output::print_stream_report(&report, None, json, to);
    Ok(Finished(stream_exit_code(&report)))
}
