//! Human and JSON renderings of reports, and the writes that put them on stdout and stderr.
//!
//! Rust ignores SIGPIPE, so a write to a closed pipe (`nvrec ls SET | head -1`) fails with
//! EPIPE, which `println!` turns into a panic. Every line nvrec prints goes through `outln!`,
//! `out!` and `errln!` instead, and stream data through [`StdoutData`]: the first failed
//! write to stdout is kept, nothing more is written there, and the run in progress is asked
//! to abort, as SIGTERM would (a self-test stops, a replay stops reading). `main` then ends
//! the command through `exit_code` with status 141 (128 + SIGPIPE, what a shell shows for a
//! program that SIGPIPE killed) and prints nothing more, as `cat` or `grep` would. A failed
//! write to stderr is ignored: there is nowhere left to say anything.

use nvrec::source::SourceSpec;
use nvrec::stream::{Outcome, StreamReport};
use nvrec::unit::format_bytes;
use std::io::{self, Write};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;

/// `println!` onto stdout that a closed stdout cannot make panic (see the module docs).
macro_rules! outln {
    () => {
        $crate::output::write_stdout(format_args!("\n"))
    };
    ($($arg:tt)*) => {
        $crate::output::write_stdout(format_args!("{}\n", format_args!($($arg)*)))
    };
}

/// `print!` onto stdout that a closed stdout cannot make panic (see the module docs).
macro_rules! out {
    ($($arg:tt)*) => {
        $crate::output::write_stdout(format_args!($($arg)*))
    };
}

/// `eprintln!` that a closed stderr cannot make panic: the line is dropped.
macro_rules! errln {
    ($($arg:tt)*) => {
        $crate::output::write_stderr(format_args!("{}\n", format_args!($($arg)*)))
    };
}

/// Set by the first failed write to stdout; nothing is written there afterwards.
static STDOUT_FAILED: AtomicBool = AtomicBool::new(false);
/// That write's error, for `main` to end the command with.
static STDOUT_ERROR: Mutex<Option<io::Error>> = Mutex::new(None);

/// Writes to stdout, flushed at once so that a closed pipe is found at the line that met it.
pub fn write_stdout(args: std::fmt::Arguments<'_>) {
    if stdout_closed() {
        return;
    }
    let mut stdout = io::stdout().lock();
    if let Err(error) = stdout.write_fmt(args).and_then(|()| stdout.flush()) {
        stdout_failed(&error);
    }
}

/// Writes to stderr; a failure is ignored.
pub fn write_stderr(args: std::fmt::Arguments<'_>) {
    let _ = io::stderr().lock().write_fmt(args);
}

/// Whether a write to stdout has failed (a closed pipe, a full disk): from then on nothing
/// more is printed, and a report meant for stderr beside data on stdout is left out too.
pub fn stdout_closed() -> bool {
    STDOUT_FAILED.load(Ordering::SeqCst)
}

/// Keeps the first stdout error and asks the run in progress to abort.
fn stdout_failed(error: &io::Error) {
    if STDOUT_FAILED.swap(true, Ordering::SeqCst) {
        return;
    }
    let kept = io::Error::new(error.kind(), error.to_string());
    *STDOUT_ERROR
        .lock()
        .unwrap_or_else(|poison| poison.into_inner()) = Some(kept);
    crate::signal::CONTROL.request_abort();
}

/// The error of the failed write to stdout, once, if one failed.
pub fn take_stdout_error() -> Option<io::Error> {
    STDOUT_ERROR
        .lock()
        .unwrap_or_else(|poison| poison.into_inner())
        .take()
}

/// Stream data onto stdout (`read --output -`, `replay`): its failure is a closed stdout
/// like any other, and still returned to the caller, which stops writing.
pub struct StdoutData;

impl Write for StdoutData {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        if stdout_closed() {
            return Err(io::Error::other("stdout is closed"));
        }
        io::stdout().lock().write(buf).inspect_err(stdout_failed)
    }

    fn write_all(&mut self, buf: &[u8]) -> io::Result<()> {
        if stdout_closed() {
            return Err(io::Error::other("stdout is closed"));
        }
        io::stdout()
            .lock()
            .write_all(buf)
            .inspect_err(stdout_failed)
    }

    fn flush(&mut self) -> io::Result<()> {
        io::stdout().lock().flush().inspect_err(stdout_failed)
    }
}

pub fn outcome_text(outcome: Outcome) -> &'static str {
    match outcome {
        Outcome::Complete => "complete",
        Outcome::SourceEnded => "source ended",
        Outcome::Stopped => "stopped",
        Outcome::Aborted => "aborted",
        Outcome::Failed => "FAILED",
    }
}

/// Where a human report goes: stdout, or stderr when stdout carries data (`--output -`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReportTo {
    Stdout,
    Stderr,
}

pub fn print_stream_report(
    report: &StreamReport,
    source: Option<&SourceSpec>,
    json: bool,
    to: ReportTo,
) {
    let mut text = String::new();
    render_stream_report(report, source, json, &mut text);
    match to {
        ReportTo::Stdout => out!("{text}"),
        ReportTo::Stderr if !stdout_closed() => write_stderr(format_args!("{text}")),
        ReportTo::Stderr => {}
    }
}

fn render_stream_report(
    report: &StreamReport,
    source: Option<&SourceSpec>,
    json: bool,
    out: &mut String,
) {
    if json {
        stream_report_json(report, source, out);
        return;
    }
    stream_transfer_lines(report, source, out);
    stream_engine_lines(report, out);
    stream_outcome_lines(report, out);
}

/// The report as one JSON line, with the source described and the CPU time added up.
fn stream_report_json(report: &StreamReport, source: Option<&SourceSpec>, out: &mut String) {
    use std::fmt::Write;
    let mut value = serde_json::to_value(report).unwrap_or_default();
    if let (Some(object), Some(source)) = (value.as_object_mut(), source) {
        object.insert(
            "source".into(),
            serde_json::Value::String(source.describe()),
        );
    }
    if let Some(object) = value.as_object_mut() {
        object.insert("cpu_s".into(), serde_json::json!(report.cpu_s()));
    }
    let _ = writeln!(out, "{value}");
}

/// What went where: the heading, the source, the bytes, the range, the time and the rate.
fn stream_transfer_lines(report: &StreamReport, source: Option<&SourceSpec>, out: &mut String) {
    use std::fmt::Write;
    let op = report.op.name();
    let _ = writeln!(
        out,
        "nvrec {op}: {} ({:?}) {}",
        report.target.display(),
        report.target_kind,
        outcome_text(report.outcome)
    );
    if let Some(source) = source {
        let _ = writeln!(out, "  source        {}", source.describe());
    }
    let _ = writeln!(
        out,
        "  transferred   {} bytes ({}) in {} chunks of {}",
        report.bytes,
        format_bytes(report.bytes),
        report.chunk_count,
        format_bytes(report.chunk_size_bytes)
    );
    let _ = writeln!(
        out,
        "  range         {:#x} .. last chunk {:#x} ({} chunks requested)",
        report.range.first_offset_bytes,
        report.range.last_offset_bytes(),
        report.range.chunk_count
    );
    match report.last_offset_bytes {
        Some(last) => {
            let _ = writeln!(out, "  last address  {last:#x}");
        }
        None => {
            let _ = writeln!(out, "  last address  none (nothing transferred)");
        }
    }
    let flush = report
        .flush_s
        .map(|s| format!(", flush {s:.3} s"))
        .unwrap_or_default();
    let _ = writeln!(out, "  time          {:.3} s{flush}", report.elapsed_s);
    let _ = writeln!(out, "  rate          {:.1} MiB/s", report.rate_mib_per_s);
    if report.buffered {
        let _ = writeln!(out, "{}", buffered_line(report.cache_drop));
    }
}

/// What `--buffered` did: through the page cache, the cache dropped how, and what stayed.
pub fn buffered_line(cache_drop: Option<nvrec::device::CacheDrop>) -> String {
    let mut line = "  page cache    buffered, not O_DIRECT".to_string();
    if let Some(drop) = cache_drop {
        line += &format!("; its cache dropped first by {}", drop.method.describe());
        if drop.cached_bytes_after > 0 {
            line += &format!(
                "; {} of the range STILL CACHED (as root the whole machine's cache is dropped too)",
                format_bytes(drop.cached_bytes_after)
            );
        }
    }
    line
}

/// How it ran: the engine, its fallback and the CPU time.
fn stream_engine_lines(report: &StreamReport, out: &mut String) {
    use std::fmt::Write;
    let _ = writeln!(
        out,
        "  engine        {} ({}), queue depth {}, I/O size {}, buffers {}",
        report.engine.name(),
        report.engine_features,
        report.queue_depth,
        format_bytes(report.io_size_bytes),
        format_bytes(report.pool_bytes)
    );
    if let Some(reason) = &report.engine_fallback_reason {
        let _ = writeln!(
            out,
            "  note          io_uring unavailable, used threads: {reason}"
        );
    }
    let _ = writeln!(
        out,
        "  cpu           {:.3} s user, {:.3} s system",
        report.cpu_user_s, report.cpu_system_s
    );
}

/// What is worth knowing about the end: an early end (padding), discarded chunks, the check and the error.
fn stream_outcome_lines(report: &StreamReport, out: &mut String) {
    use std::fmt::Write;
    if let Some(early_end) = &report.early_end {
        let _ = writeln!(
            out,
            "  early end     the final chunk (chunk {} at {:#x}) was short: {} zero bytes were \
             added to fill it",
            early_end.chunk_index, early_end.offset_bytes, early_end.padded_bytes
        );
    }
    if report.discarded_chunk_count > 0 {
        let _ = writeln!(
            out,
            "  discarded     {} chunks taken but not submitted (abort)",
            report.discarded_chunk_count
        );
    }
    if let Some(check) = &report.check {
        match &check.first_mismatch {
            None => {
                let _ = writeln!(
                    out,
                    "  check         pattern seed {:#x}: {} chunks, all good",
                    check.seed, check.checked_chunk_count
                );
            }
            Some(mismatch) => {
                let _ = writeln!(
                    out,
                    "  check         pattern seed {:#x}: {} of {} chunks bad; first: {mismatch}",
                    check.seed, check.bad_chunk_count, check.checked_chunk_count
                );
            }
        }
    }
    if let Some(error) = &report.error {
        let _ = writeln!(out, "  error         {error}");
    }
}
