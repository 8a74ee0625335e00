//! `nvrec export`: a recording as PcapNg (datagrams, reads, frames; cut by a BPF filter),
//! SigMF (samples) or MCAP (every stream a channel). The export itself is the library's
//! (`nvrec::export`); this parses, reads the recording through [`ChunkSource`] and prints.

use crate::archive_cmd::ChunkSource;
use crate::recording_cmd::{hole_text, state_text, GapsArg};
use crate::{exit, progress, signal, EngineArg, Finished, UsageError};
use anyhow::{Context, Result};
use clap::{Args, ValueEnum};
use nvrec::control::Progress;
use nvrec::export::{
    Compression, Export, ExportError, ExportOptions, Exported, Format, Gaps, Output, Part, Split,
    SplitExport, Window,
};
use nvrec::layout::RecordingEntry;
use nvrec::net::{parse_bpf_program, BpfFilter};
use nvrec::unit::format_bytes;
use std::path::{Path, PathBuf};
use std::sync::Arc;

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
    /// Only what was received this long after the recording's start or later (500ms, 2m),
    /// or at this time in UTC or later (RFC 3339: 2026-11-27T08:00:00Z); a byte stream: by
    /// chunk.
    #[arg(long, value_parser = crate::time_arg::time_arg)]
    from: Option<crate::time_arg::TimeArg>,
    /// Only what was received before this long after the recording's start, or before this
    /// time in UTC.
    #[arg(long, value_parser = crate::time_arg::time_arg)]
    to: Option<crate::time_arg::TimeArg>,
    /// Only these streams (the order of the recording's --source options, from 0); repeat
    /// for several. Default: all. PcapNg and MCAP.
    #[arg(long)]
    stream: Vec<u16>,
    /// PcapNg: only the packets this classic BPF program keeps, given as `tcpdump -ddd EXPR`
    /// prints it (or as a list of [code, jt, jf, k]); it sees each packet as exported (a
    /// captured frame as it was).
    #[arg(long, value_name = "FILE")]
    filter_bpf: Option<PathBuf>,
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
    let (from_ns, to_ns) = crate::time_arg::window_ns(args.from, args.to, entry.start_ns)?;
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
    })
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

/// A refusal of the export is a usage error (exit 2); anything else a failure.
fn refusal(error: ExportError) -> anyhow::Error {
    if error.is_refusal() {
        UsageError(error.to_string()).into()
    } else {
        error.into()
    }
}

pub fn export(args: ExportArgs, json: bool) -> Result<Finished> {
    let to_stdout = args.output.as_os_str() == "-";
    if to_stdout && json {
        return Err(UsageError("--json and --output - both want stdout".into()).into());
    }
    if let Some(path) = &args.filter_bpf {
        read_filter(path)?; // Before anything is opened.
    }
    let source = ChunkSource::open(&args.targets)?;
    let entry = source.select(args.recording)?;
    let options = options(&args, &entry)?;
    let from_ns = options.window.from_ns;
    let output = if to_stdout {
        Output::Stream(Box::new(std::io::BufWriter::with_capacity(
            4 << 20,
            crate::output::StdoutData,
        )))
    } else {
        Output::File(args.output.clone())
    };
    let mut export = match args.split {
        Some(_) if to_stdout => {
            return Err(UsageError(
                "--split writes numbered files: give --output a file name, not -".into(),
            )
            .into())
        }
        Some(split) => Exporter::Parts(Box::new(
            SplitExport::create(&entry, options, &args.output, split).map_err(refusal)?,
        )),
        None => Exporter::One(Box::new(
            Export::create(&entry, options, output).map_err(refusal)?,
        )),
    };
    let progress = Arc::new(Progress::default());
    let display = progress::ProgressDisplay::start(Arc::clone(&progress), "export".into(), !json);
    let mut problems: Vec<String> = Vec::new();
    let summary = source.read_from(
        &entry,
        args.engine,
        from_ns,
        &signal::CONTROL,
        &progress,
        &mut |item| {
            problems.extend(hole_text(&item));
            export.item(item)
        },
    )?;
    drop(display);
    let (parts, export_problems) = export.finish(&args.output).context("exporting")?;
    problems.extend(export_problems);
    if crate::output::stdout_closed() {
        return Ok(Finished(exit::FAILURE));
    }
    let damaged = summary.damage_count > 0 || summary.missing_chunk_count > 0;
    if json {
        let value = serde_json::json!({
            "recording_id": entry.recording_id,
            "recording_state": state_text(&entry),
            "format": args.format.to_possible_value().map(|v| v.get_name().to_string()),
            "output": args.output,
            "export": parts.last().map(|part| &part.exported),
            "parts": args.split.map(|_| &parts),
            "summary": summary,
            "problems": problems,
        });
        outln!("{value}");
    } else {
        for part in &parts {
            errln!(
                "nvrec export: recording {} ({}): {}",
                entry.recording_id,
                state_text(&entry),
                exported_text(&part.exported, &part.path)
            );
        }
        for problem in problems.iter().take(20) {
            errln!("  {problem}");
        }
    }
    Ok(Finished(if damaged { exit::FAILURE } else { exit::OK }))
}

/// What an export wrote, in a line.
/// An export to one output, or cut into parts.
enum Exporter {
    One(Box<Export>),
    Parts(Box<SplitExport>),
}

impl Exporter {
    fn item(&mut self, item: nvrec::recording::reader::Item<'_>) -> bool {
        match self {
            Exporter::One(export) => export.item(item),
            Exporter::Parts(export) => export.item(item),
        }
    }

    /// Every output written (one without --split), and what could not be exported.
    fn finish(self, output: &Path) -> Result<(Vec<Part>, Vec<String>), ExportError> {
        match self {
            Exporter::One(export) => export.finish().map(|(exported, problems)| {
                let path = output.to_path_buf();
                (vec![Part { path, exported }], problems)
            }),
            Exporter::Parts(export) => export.finish(),
        }
    }
}

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
