//! `nvrec write` and `nvrec read`: the range streamer, chunks into or out of an address
//! range of one target, with direct I/O or (`--buffered`) through the page cache.

use crate::args::{size_arg, IoArgs, RangeArgs, StopArgs};
use crate::{output, progress, signal};
use anyhow::{Context, Result};
use clap::{Args, ValueEnum};
use nvrec::control::Progress;
use nvrec::device::{self, Access, OpenOptions, Safety, Target};
use nvrec::sink::{CheckSink, DiscardSink, Sink, WriterSink};
use nvrec::stream::{self, FlushMode, Outcome, StreamConfig};
use nvrec_app::record::NewFiles;
use nvrec_app::sources::{parse_source, source_error};
use nvrec_app::{Class, UsageError};
use std::path::PathBuf;
use std::sync::Arc;

#[derive(Args, Debug)]
pub struct WriteArgs {
    /// File or block device to write. A file is created (and preallocated) when the range
    /// says how long it must be.
    target: PathBuf,
    #[command(flatten)]
    range: RangeArgs,
    #[command(flatten)]
    io: IoArgs,
    #[command(flatten)]
    stop: StopArgs,
    /// What to write: pattern, zero, stdin, or a file path.
    #[arg(long, default_value = "pattern")]
    source: String,
    /// Seed of the pattern.
    #[arg(long, default_value = "0", value_parser = size_arg)]
    seed: u64,
    /// Skip the flush (fdatasync) after the last write.
    #[arg(long, conflicts_with = "buffered")]
    no_flush: bool,
    /// Write through the page cache instead of with O_DIRECT, to measure what direct I/O
    /// saves (dd without oflag=direct): the range's cache is dropped first and the time runs
    /// to the end of the flush, when the data is on the drive.
    #[arg(long)]
    buffered: bool,
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
pub struct ReadArgs {
    /// File or block device to read.
    target: PathBuf,
    #[command(flatten)]
    range: RangeArgs,
    #[command(flatten)]
    io: IoArgs,
    #[command(flatten)]
    stop: StopArgs,
    /// Check what is read.
    #[arg(long, value_enum, conflicts_with = "output")]
    check: Option<CheckArg>,
    /// Seed of the pattern to check against.
    #[arg(long, default_value = "0", value_parser = size_arg)]
    seed: u64,
    /// Copy what is read to this file, or to stdout with '-'.
    #[arg(long)]
    output: Option<PathBuf>,
    /// Read through the page cache instead of with O_DIRECT, to measure what direct I/O
    /// saves (dd without iflag=direct): the range's cache is dropped first, so that what is
    /// read comes from the drive.
    #[arg(long)]
    buffered: bool,
}

/// Opens a target the way `--buffered` says: direct I/O, or through the page cache.
fn open_target(path: &std::path::Path, options: &OpenOptions, buffered: bool) -> Result<Target> {
    if buffered {
        device::open_buffered(path, options)
            .with_context(|| format!("opening {} through the page cache", path.display()))
    } else {
        device::open(path, options)
            .with_context(|| format!("opening {} for direct I/O", path.display()))
    }
}

/// The class of a finished stream run.
pub fn stream_class(report: &stream::StreamReport) -> Class {
    if !report.is_success() {
        Class::Failed
    } else if report.outcome == Outcome::Aborted {
        Class::Aborted
    } else {
        Class::Done
    }
}

pub fn write(args: WriteArgs, json: bool) -> Result<Class> {
    let flush = if args.no_flush {
        FlushMode::None
    } else {
        FlushMode::AfterWrite
    };
    let config = StreamConfig {
        trigger: args.stop.trigger(),
        ..args.io.config(flush)
    };
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
    let mut source = nvrec::input::open_source(&source_spec).map_err(source_error)?;
    let created = NewFiles::note(std::slice::from_ref(&args.target));
    let target = open_target(&args.target, &options, args.buffered)?;
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
    Ok(stream_class(&report))
}

/// Finds the address errors that do not depend on the target (alignment, first after last)
/// before anything is opened, so that a bad range never creates or touches a file.
fn precheck_range(range: &RangeArgs, chunk_size_bytes: u64) -> Result<(), stream::AddressError> {
    if !chunk_size_bytes.is_power_of_two() {
        return Ok(()); // Reported by the config check.
    }
    stream::resolve_range(range.spec(), chunk_size_bytes, u64::MAX).map(|_| ())
}

pub fn read(args: ReadArgs, json: bool) -> Result<Class> {
    let config = StreamConfig {
        trigger: args.stop.trigger(),
        ..args.io.config(FlushMode::None)
    };
    config.validate(1)?;
    precheck_range(&args.range, config.chunk_size_bytes)?;
    let options = OpenOptions {
        access: Access::Read,
        create_len_bytes: None,
        safety: Safety::Check,
    };
    let target = open_target(&args.target, &options, args.buffered)?;
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
    Ok(stream_class(&report))
}
