//! `nvrec export`: a recording of datagrams as a PcapNg file.

use crate::recording_cmd::{hole_text, state_text};
use crate::{exit, progress, signal, EngineArg, Finished, UsageError};
use anyhow::{Context, Result};
use clap::{Args, ValueEnum};
use nvrec::layout::{ChunkFlags, RecordingFlags};
use nvrec::recording::export::PcapngExport;
use nvrec::recording::reader::Item;
use nvrec::stream::Progress;
use nvrec::unit::parse_duration;
use std::io::Write;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum FormatArg {
    /// PcapNg: one interface per stream, nanosecond timestamps, drop counts.
    Pcapng,
}

#[derive(Args, Debug)]
pub struct ExportArgs {
    /// The members of the set, or an archive (file://DIR, s3://BUCKET/PREFIX).
    #[arg(required = true)]
    targets: Vec<PathBuf>,
    #[arg(long, value_enum, default_value = "pcapng")]
    format: FormatArg,
    /// The file to write ('-' for stdout).
    #[arg(long, required = true)]
    output: PathBuf,
    /// Which recording (default: the last).
    #[arg(long)]
    recording: Option<u32>,
    /// Only datagrams received this long after the recording's start or later.
    #[arg(long, value_parser = duration_arg)]
    from: Option<Duration>,
    /// Only datagrams received before this long after the recording's start.
    #[arg(long, value_parser = duration_arg)]
    to: Option<Duration>,
    /// Only these streams (the order of the recording's --source options, from 0); repeat
    /// for several. Default: all.
    #[arg(long)]
    stream: Vec<u16>,
    #[arg(long, value_enum, default_value = "auto")]
    engine: EngineArg,
}

fn duration_arg(text: &str) -> Result<Duration, String> {
    parse_duration(text).map_err(|error| error.to_string())
}

pub fn export(args: ExportArgs, json: bool) -> Result<Finished> {
    if let (Some(from), Some(to)) = (args.from, args.to) {
        if from >= to {
            return Err(UsageError(format!(
                "--from {}s is not before --to {}s: the window holds nothing",
                from.as_secs_f64(),
                to.as_secs_f64()
            ))
            .into());
        }
    }
    let to_stdout = args.output.as_os_str() == "-";
    if to_stdout && json {
        return Err(UsageError("--json and --output - both want stdout".into()).into());
    }
    let source = crate::archive_cmd::ChunkSource::open(&args.targets)?;
    let entry = source.select(args.recording)?;
    if !entry.flags.contains(RecordingFlags::RECORDS) {
        return Err(UsageError(format!(
            "recording {} holds a byte stream, not datagrams or packets: `nvrec replay` gives it back",
            entry.recording_id
        ))
        .into());
    }
    let out: Box<dyn Write> = if to_stdout {
        Box::new(std::io::BufWriter::with_capacity(
            4 << 20,
            crate::output::StdoutData,
        ))
    } else {
        let file = std::fs::File::create(&args.output)
            .with_context(|| format!("creating {}", args.output.display()))?;
        Box::new(std::io::BufWriter::with_capacity(4 << 20, file))
    };
    let streams = (!args.stream.is_empty()).then(|| args.stream.clone());
    let mut export = PcapngExport::new(out, streams)?;
    let from_ns = args.from.map(|d| entry.start_ns + d.as_nanos() as u64);
    let to_ns = args.to.map(|d| entry.start_ns + d.as_nanos() as u64);
    let progress = Arc::new(Progress::default());
    let display = progress::ProgressDisplay::start(Arc::clone(&progress), "export".into(), !json);
    let mut problems: Vec<String> = Vec::new();
    let mut failure: Option<anyhow::Error> = None;
    let summary = source.read_from(
        &entry,
        args.engine,
        from_ns,
        &signal::CONTROL,
        &progress,
        &mut |item| {
            match item {
                Item::Chunk { header, payload } => {
                    // A chunk's timestamp is when its first datagram arrived: chunks before
                    // the window are skipped whole, and the walk ends past it.
                    if to_ns.is_some_and(|to| header.timestamp_ns >= to) {
                        return false;
                    }
                    if !header.flags.contains(ChunkFlags::RECORDS) {
                        problems.push(format!(
                            "chunk sequence {} holds bytes, not records: left out",
                            header.sequence
                        ));
                        return true;
                    }
                    let result = match (from_ns, to_ns) {
                        (None, None) => export.payload(payload),
                        _ => export.payload_within(payload, from_ns, to_ns),
                    };
                    if let Err(error) = result {
                        failure = Some(error.into());
                        return false;
                    }
                }
                hole => problems.extend(hole_text(&hole)),
            }
            true
        },
    )?;
    drop(display);
    if let Some(error) = failure {
        return Err(error);
    }
    let (mut out, written) = export.finish()?;
    out.flush().context("writing the export")?;
    drop(out);
    if crate::output::stdout_closed() {
        return Ok(Finished(exit::FAILURE));
    }
    let damaged = summary.damage_count > 0 || summary.missing_chunk_count > 0;
    if json {
        let value = serde_json::json!({
            "recording_id": entry.recording_id,
            "recording_state": state_text(&entry),
            "format": "pcapng",
            "output": args.output,
            "export": written,
            "summary": summary,
            "problems": problems,
        });
        outln!("{value}");
    } else {
        errln!(
            "nvrec export: recording {} ({}): {} packets, {} dropped (marked), {} truncated, to {}",
            entry.recording_id,
            state_text(&entry),
            written.packets,
            written.dropped,
            written.truncated,
            args.output.display()
        );
        for problem in &problems {
            errln!("  {problem}");
        }
    }
    Ok(Finished(if damaged { exit::FAILURE } else { exit::OK }))
}
