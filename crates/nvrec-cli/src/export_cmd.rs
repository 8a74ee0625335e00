//! `nvrec export`: a recording as PcapNg (datagrams, reads, frames; cut by a BPF filter),
//! SigMF (samples) or MCAP (every stream a channel). The export itself is the library's
//! (`nvrec::export`), run by the application layer (`nvrec_app::export`); this parses and
//! prints.

use crate::args::{EngineArg, GapsArg};
use crate::reading;
use anyhow::Result;
use clap::{Args, ValueEnum};
use nvrec::export::{Compression, ExportOptions, Exported, Format, Gaps, Output, Split, Window};
use nvrec::flow::FlowFilter;
use nvrec::layout::RecordingEntry;
use nvrec::net::{parse_bpf_program, BpfFilter};
use nvrec::unit::format_bytes;
use nvrec_app::export::{ExportReport, ExportTo};
use nvrec_app::find::FindRead;
use nvrec_app::window::{time_arg, TimeArg};
use nvrec_app::{Class, UsageError};
use std::path::{Path, PathBuf};

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum FormatArg {
    /// PcapNg: one interface per stream, nanosecond timestamps, drop counts.
    Pcapng,
    /// SigMF: OUTPUT.sigmf-data and OUTPUT.sigmf-meta, the samples of a recording made with
    /// --datatype and --sample-rate, each loss an annotation.
    Sigmf,
    /// MCAP: a channel per stream, a message per datagram, read, frame or chunk, losses as
    /// metadata records; chunked and indexed.
    Mcap,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum CompressionArg {
    Zstd,
    Lz4,
    None,
}

#[derive(Args, Debug)]
pub struct ExportArgs {
    /// The members of the set, or an archive (file://DIR, s3://BUCKET/PREFIX).
    #[arg(required = true)]
    targets: Vec<PathBuf>,
    #[arg(long, value_enum, default_value = "pcapng")]
    format: FormatArg,
    /// The file to write ('-' for stdout, PcapNg only); for SigMF the name of its two files.
    #[arg(long, required = true)]
    output: PathBuf,
    /// Which recording (default: the last).
    #[arg(long)]
    recording: Option<u32>,
    /// Export mark N's window instead (`ls` lists the marks; --from and --to count from
    /// its start).
    #[arg(long, value_name = "N", conflicts_with = "recording")]
    mark: Option<u32>,
    /// Only what was received this long after the recording's start or later (500ms, 2m),
    /// or at this time in UTC or later (RFC 3339: 2026-11-27T08:00:00Z); a byte stream: by
    /// chunk.
    #[arg(long, value_parser = time_arg)]
    from: Option<TimeArg>,
    /// Only what was received before this long after the recording's start, or before this
    /// time in UTC.
    #[arg(long, value_parser = time_arg)]
    to: Option<TimeArg>,
    /// Only these streams (the order of the recording's --source options, from 0); repeat
    /// for several. Default: all. PcapNg and MCAP.
    #[arg(long)]
    stream: Vec<u16>,
    /// PcapNg: only the packets this classic BPF program keeps, given as `tcpdump -ddd EXPR`
    /// prints it (or as a list of [code, jt, jf, k]); it sees each packet as exported (a
    /// captured frame as it was).
    #[arg(long, value_name = "FILE")]
    filter_bpf: Option<PathBuf>,
    /// PcapNg: only the packets of the flows an expression matches, in the tcpdump spellings
    /// `find` takes (one direction each), keyed as `find` keys them.
    #[arg(long = "match", value_name = "EXPR", conflicts_with = "flow")]
    expr: Option<String>,
    /// PcapNg: only the packets of the connection a Community ID (1:...) names, both
    /// directions.
    #[arg(long, value_name = "COMMUNITY_ID")]
    flow: Option<String>,
    /// The Community ID seed the sensors were given (with --flow).
    #[arg(long, default_value_t = 0)]
    seed: u16,
    /// SigMF: what to write in place of a hole in the stream: nothing (a new capture segment
    /// starts after it), or zeros, so that every sample keeps its index. Default: skip.
    #[arg(long, value_enum)]
    gaps: Option<GapsArg>,
    /// MCAP: how its chunks are compressed. Default: zstd.
    #[arg(long, value_enum)]
    compression: Option<CompressionArg>,
    /// Cut the output into numbered files (OUT-0001.pcapng, ...): after about this much of
    /// the recording (1GB), or every period of time (60s), at chunk boundaries.
    #[arg(long, value_parser = split_arg)]
    split: Option<Split>,
    #[arg(long, value_enum, default_value = "auto")]
    engine: EngineArg,
}

fn split_arg(text: &str) -> Result<Split, String> {
    let text = text.trim();
    // Sizes end in a digit or a unit of bytes (K, M, GB, GiB); periods in s, m, h or d.
    let ends_in_time = text.ends_with(['s', 'm', 'h', 'd']);
    let split = match ends_in_time {
        true => nvrec::unit::parse_duration(text)
            .map(Split::Time)
            .map_err(|error| error.to_string())?,
        false => nvrec::unit::parse_size_bytes(text)
            .map(Split::Bytes)
            .map_err(|error| error.to_string())?,
    };
    match split {
        Split::Bytes(0) => Err("--split 0 bytes: give a size such as 1GB".into()),
        Split::Time(period) if period.is_zero() => {
            Err("--split 0s: give a period such as 60s".into())
        }
        split => Ok(split),
    }
}

/// The export's options from the arguments; every mistake is a usage error.
fn options(args: &ExportArgs, entry: &RecordingEntry) -> Result<ExportOptions> {
    let (from_ns, to_ns) = nvrec_app::window::window_of(entry, args.from, args.to)?;
    let format = match args.format {
        FormatArg::Pcapng => Format::Pcapng,
        FormatArg::Sigmf => Format::Sigmf,
        FormatArg::Mcap => Format::Mcap,
    };
    let compression = match (args.compression, format) {
        (Some(CompressionArg::Zstd), _) | (None, Format::Mcap) => Compression::Zstd,
        (Some(CompressionArg::Lz4), _) => Compression::Lz4,
        (Some(CompressionArg::None) | None, _) => Compression::None,
    };
    Ok(ExportOptions {
        format,
        window: Window { from_ns, to_ns },
        streams: (!args.stream.is_empty()).then(|| args.stream.clone()),
        gaps: match args.gaps {
            Some(GapsArg::Zero) => Gaps::Zero,
            Some(GapsArg::Skip) | None => Gaps::Skip,
        },
        compression,
        filter: args.filter_bpf.as_deref().map(read_filter).transpose()?,
        flows: flows(args)?,
    })
}

/// The flows of `--match` or `--flow`, checked.
fn flows(args: &ExportArgs) -> Result<Option<FlowFilter>, UsageError> {
    let query = match (&args.flow, &args.expr) {
        (None, None) => return Ok(None),
        (id, expr) => crate::find_cmd::flow_query(id.as_deref(), expr.as_deref(), "--flow")?,
    };
    Ok(Some(FlowFilter {
        query,
        seed: args.seed,
    }))
}

/// The program of `--filter-bpf FILE`, read and checked.
fn read_filter(path: &Path) -> Result<BpfFilter, UsageError> {
    let text = std::fs::read_to_string(path)
        .map_err(|error| UsageError(format!("--filter-bpf {}: {error}", path.display())))?;
    let program = parse_bpf_program(&text)
        .map_err(|error| UsageError(format!("--filter-bpf {}: {error}", path.display())))?;
    BpfFilter::new(program)
        .map_err(|error| UsageError(format!("--filter-bpf {}: {error}", path.display())))
}

pub fn export(args: ExportArgs, json: bool) -> Result<Class> {
    let to_stdout = args.output.as_os_str() == "-";
    if to_stdout && json {
        return Err(UsageError("--json and --output - both want stdout".into()).into());
    }
    if args.split.is_some() && to_stdout {
        return Err(UsageError(
            "--split writes numbered files: give --output a file name, not -".into(),
        )
        .into());
    }
    if let Some(path) = &args.filter_bpf {
        read_filter(path)?; // Before anything is opened.
    }
    let source = reading::open(&args.targets)?;
    let entry = source.pick(args.recording, args.mark)?;
    let options = options(&args, &entry)?;
    let to = match (args.split, to_stdout) {
        (Some(split), _) => ExportTo::Parts(args.output.clone(), split),
        (None, true) => ExportTo::One(Output::Stream(Box::new(std::io::BufWriter::with_capacity(
            4 << 20,
            crate::output::StdoutData,
        )))),
        (None, false) => ExportTo::One(Output::File(args.output.clone())),
    };
    let engine = args.engine.choice();
    let report = reading::with_progress("export", json, |control, progress| {
        nvrec_app::export::export(&source, entry, options, to, engine, control, progress)
    })?;
    if reading::stdout_gone() {
        return Ok(Class::Failed);
    }
    print_report(&args, &report, json);
    Ok(report.class())
}

fn print_report(args: &ExportArgs, report: &ExportReport, json: bool) {
    if json {
        let value = serde_json::json!({
            "recording_id": report.entry.mark_of.map_or(report.entry.recording_id, |of| of.recording_id),
            "mark_id": report.entry.mark_of.map(|_| report.entry.recording_id),
            "recording_state": report.state_text(),
            "format": args.format.to_possible_value().map(|v| v.get_name().to_string()),
            "output": args.output,
            "export": report.parts.last().map(|part| &part.exported),
            "parts": args.split.map(|_| &report.parts),
            "summary": report.summary,
            "problems": report.problems,
            "read": report.read,
        });
        outln!("{value}");
        return;
    }
    match &report.read {
        FindRead::Indexed {
            chunks_read,
            chunks_searched,
            ..
        } => errln!(
            "nvrec export: from the archive's flows: {chunks_read} of {chunks_searched} chunks read"
        ),
        FindRead::DriveIndex {
            chunks_read,
            chunks_searched,
            blocks_read,
            unindexed,
            ..
        } => {
            errln!(
                "nvrec export: from the flow index ({blocks_read} blocks): {chunks_read} of \
                 {chunks_searched} chunks read"
            );
            for note in unindexed {
                errln!("  {note}");
            }
        }
        FindRead::Scanned {
            why_not_indexed: Some(why),
        } => errln!("nvrec export: every chunk read, not the flows' index: {why}"),
        FindRead::Scanned { .. } => {}
    }
    for part in &report.parts {
        errln!(
            "nvrec export: {} ({}): {}",
            nvrec_app::listing::entry_name(&report.entry),
            report.state_text(),
            exported_text(&part.exported, &part.path)
        );
    }
    for problem in report.problems.iter().take(20) {
        errln!("  {problem}");
    }
}

/// What an export wrote, in a line.
fn exported_text(exported: &Exported, output: &Path) -> String {
    match exported {
        Exported::Pcapng(written) => format!(
            "{} packets, {} dropped (marked), {} truncated{}, to {}",
            written.packets,
            written.dropped,
            written.truncated,
            match written.filtered_out {
                0 => String::new(),
                n => format!(", {n} left out by the filter"),
            },
            output.display()
        ),
        Exported::Sigmf(written) => format!(
            "{} samples ({}), {} losses annotated ({} samples lost){}, to {} and {}",
            written.samples,
            written.datatype,
            written.losses,
            written.lost_samples,
            match written.zero_filled_bytes {
                0 => String::new(),
                n => format!(", {} of zeros in their place", format_bytes(n)),
            },
            written.data_path.display(),
            written.meta_path.display()
        ),
        Exported::Mcap(written) => format!(
            "{} messages on {} channels, {} losses as metadata, {} ({}), to {}",
            written.messages,
            written.channels,
            written.losses,
            format_bytes(written.bytes),
            written.compression,
            written.path.display()
        ),
    }
}
