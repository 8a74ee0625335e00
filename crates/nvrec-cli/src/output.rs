//! Human and JSON renderings of reports.

use nvrec::source::SourceSpec;
use nvrec::stream::{Outcome, StreamReport};
use nvrec::unit::format_bytes;

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
        ReportTo::Stdout => print!("{text}"),
        ReportTo::Stderr => eprint!("{text}"),
    }
}

fn render_stream_report(
    report: &StreamReport,
    source: Option<&SourceSpec>,
    json: bool,
    out: &mut String,
) {
    use std::fmt::Write;
    if json {
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
        return;
    }
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
    if report.padded_bytes > 0 {
        let _ = writeln!(
            out,
            "  padded        the final chunk was short: {} zero bytes were added to fill it",
            report.padded_bytes
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
