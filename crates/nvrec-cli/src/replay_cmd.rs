//! `nvrec replay`: a recording's stream out again, byte-exactly and in order, to a file,
//! stdout, or the network ([`nvrec_app::replay`], [`nvrec_app::resend`]).

use crate::args::{EngineArg, GapsArg};
use crate::reading;
use anyhow::{Context, Result};
use clap::Args;
use nvrec_app::chunks::ChunkSource;
use nvrec_app::listing::{retirement_line, state_text};
use nvrec_app::replay::{self, Passes, ReplayReport, ReplayRequest, Selection};
use nvrec_app::resend::{self, Destination, ResendReport};
use nvrec_app::stream_out::{SparseFile, StreamOut};
use nvrec_app::window::TimeArg;
use nvrec_app::{Class, UsageError};
use std::io::IsTerminal;
use std::path::PathBuf;

#[derive(Args, Debug)]
pub struct ReplayArgs {
    /// The members of a volume set, or an archive (file://DIR, s3://BUCKET/PREFIX).
    #[arg(required = true)]
    targets: Vec<PathBuf>,
    /// Which recording (default: the last).
    #[arg(long)]
    recording: Option<u32>,
    /// Replay mark N's window instead (`ls` lists the marks; --from and --to count from
    /// its start).
    #[arg(long, value_name = "N", conflicts_with = "recording")]
    mark: Option<u32>,
    /// Where the stream goes: a file, or stdout with '-'. Default: stdout, unless stdout is a
    /// terminal (the stream is binary data): then redirect it, give a file, or ask for the
    /// terminal with '--output -'.
    #[arg(long)]
    output: Option<PathBuf>,
    /// Start this long after the recording's start (500ms, 2m), or at this time in UTC
    /// (RFC 3339: 2026-11-27T08:00:00Z); found by search, at chunk granularity.
    #[arg(long, value_parser = nvrec_app::window::time_arg)]
    from: Option<TimeArg>,
    /// End this long after the recording's start, or at this time in UTC (after --from).
    #[arg(long, value_parser = nvrec_app::window::time_arg)]
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
    /// Play the recording (or the window) this many times, one after the other, each pass
    /// paced from its own start; 0: until stopped (Ctrl-C).
    #[arg(long = "loop", value_name = "N", default_value_t = 1)]
    loops: u64,
    #[arg(long, value_enum, default_value = "auto")]
    engine: EngineArg,
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

impl ReplayArgs {
    fn request(&self) -> ReplayRequest {
        ReplayRequest {
            recording: self.recording,
            mark: self.mark,
            from: self.from,
            to: self.to,
            speed: pacing(self),
            streams: self.stream.clone(),
            gaps: self.gaps.gaps(),
            engine: self.engine.choice(),
            passes: match self.loops {
                0 => Passes::Forever,
                times => Passes::Times(times),
            },
        }
    }

    /// Whether the stream goes to stdout.
    fn to_stdout(&self) -> bool {
        self.output
            .as_deref()
            .is_none_or(|path| path.as_os_str() == "-")
    }
}

pub fn replay(args: ReplayArgs, json: bool) -> Result<Class> {
    // Everything about the arguments is checked before any read.
    nvrec_app::window::check_window(args.from, args.to)?;
    if let Some(destination) = &args.send_to {
        return replay_to_network(&args, destination, json);
    }
    check_output(&args, json)?;
    let request = args.request();
    let source = reading::open(&args.targets)?;
    let selections = Selection::all(&source, &request)?;
    let out = open_output(&args)?;
    let reports = reading::with_progress("replay", json, |control, progress| {
        replay::replay_all(&source, selections, &request, out, control, progress)
    })?;
    if reading::stdout_gone() {
        return Ok(Class::Failed);
    }
    print_reports(&source, &reports, json);
    let class = worst(reports.iter().map(ReplayReport::class));
    match reports.into_iter().find_map(|report| report.error) {
        Some(error) => Err(error).context("writing the replayed stream"),
        None => Ok(class),
    }
}

/// The class of a replay of several recordings: the worst of theirs.
fn worst(classes: impl Iterator<Item = Class>) -> Class {
    let rank = |class: &Class| match class {
        Class::Done => 0,
        Class::Stopped => 1,
        Class::Failed => 2,
        _ => 3,
    };
    classes.max_by_key(rank).unwrap_or(Class::Done)
}

/// Refuses stdout for both the stream and the report, and binary data onto a terminal.
fn check_output(args: &ReplayArgs, json: bool) -> Result<(), UsageError> {
    if args.to_stdout() && json {
        return Err(UsageError(
            "--json and --output - both want stdout; give --output a file".into(),
        ));
    }
    if args.output.is_none() && std::io::stdout().is_terminal() {
        return Err(UsageError(
            "stdout is a terminal and replay writes the recorded stream there, binary data; \
             redirect it (> FILE, | PROGRAM), give --output FILE, or --output - to write to \
             the terminal anyway"
                .into(),
        ));
    }
    Ok(())
}

/// The stream's writer: a regular file given holes for `--gaps zero`'s zeros
/// ([`SparseFile`]), anything else the zeros themselves.
fn open_output(args: &ReplayArgs) -> Result<Box<dyn StreamOut>> {
    Ok(match &args.output {
        Some(path) if !args.to_stdout() => {
            let file = std::fs::File::create(path)
                .with_context(|| format!("creating {}", path.display()))?;
            match SparseFile::new(file) {
                Ok(sparse) => Box::new(sparse),
                Err((file, _)) => Box::new(std::io::BufWriter::with_capacity(64 << 10, file)),
            }
        }
        _ => Box::new(std::io::BufWriter::with_capacity(
            4 << 20,
            crate::output::StdoutData,
        )),
    })
}

/// Each recording's replay, named; in JSON one object, or with a window that spans
/// recordings `{"recordings": [...]}`. From an archive, the requests the run made to its
/// store too (`archive_requests`).
fn print_reports(source: &ChunkSource, reports: &[ReplayReport], json: bool) {
    let requests = source.archive_requests();
    match (json, reports) {
        (true, [report]) => {
            let mut value = report.json();
            value["archive_requests"] = serde_json::json!(requests);
            outln!("{value}");
        }
        (true, _) => {
            let all: Vec<serde_json::Value> = reports.iter().map(ReplayReport::json).collect();
            outln!(
                "{}",
                serde_json::json!({ "recordings": all, "archive_requests": requests })
            );
        }
        (false, _) => {
            reports
                .iter()
                .for_each(|report| print_report(source, report));
            if let Some(requests) = requests {
                errln!("  {requests} requests to the archive's store");
            }
        }
    }
}

fn print_report(source: &ChunkSource, report: &ReplayReport) {
    let entry = &report.entry;
    errln!(
        "nvrec replay: {} ({}): {}: {} bytes in {} chunks, {:.3} s, {:.1} MiB/s",
        nvrec_app::listing::entry_name(entry),
        state_text(entry),
        report.outcome.text(),
        report.written_bytes,
        report.summary.chunk_count,
        report.summary.elapsed_s,
        report.summary.rate_mib_per_s
    );
    if report.passes > 1 {
        errln!("  played {} times (--loop)", report.passes);
    }
    if report.zero_filled_bytes > 0 {
        errln!(
            "  {} bytes of zeros written in place of the holes (--gaps zero)",
            report.zero_filled_bytes
        );
    }
    for retirement in &entry.retirements {
        errln!("  degraded: {}", retirement_line(source, retirement));
    }
    for problem in report.problems.iter().take(20) {
        errln!("  {problem}");
    }
}

/// `replay --send-to`: each recorded datagram (or frame) sent again, in order.
fn replay_to_network(args: &ReplayArgs, destination_text: &str, json: bool) -> Result<Class> {
    let destination = Destination::parse(destination_text)?;
    let request = args.request();
    let source = reading::open(&args.targets)?;
    let selection = Selection::of(&source, &request)?;
    resend::check_recording(&selection.entry)?;
    let report = reading::with_progress("send", json, |control, progress| {
        resend::resend(
            &source,
            selection,
            &request,
            &destination,
            control,
            progress,
        )
    })?;
    print_sent(&report, &destination, destination_text, json);
    Ok(report.class())
}

fn print_sent(report: &ResendReport, destination: &Destination, text: &str, json: bool) {
    if json {
        outln!(
            "{}",
            serde_json::json!({
                "recording_id": report.entry.recording_id,
                "destination": text.strip_prefix("udp://").unwrap_or(text),
                "sent_datagrams": report.sent,
                "sent_bytes": report.sent_bytes,
                "passes": report.passes,
                "too_large": report.too_large,
                "skipped": report.skipped,
                "summary": report.summary,
                "problems": report.problems,
            })
        );
        return;
    }
    errln!(
        "nvrec replay: recording {} ({}): {} {} ({} bytes) sent to {}",
        report.entry.recording_id,
        report.state_text(),
        report.sent,
        destination.unit(),
        report.sent_bytes,
        text
    );
    for problem in &report.problems {
        errln!("  {problem}");
    }
}
