//! `nvrec record`: a stream onto one or more targets, striped, framed, checkpointed
//! ([`nvrec_app::record`]), with progress while it runs and its report after.

use crate::record_args::RecordArgs;
use crate::{progress, signal, telemetry};
use anyhow::Result;
use nvrec::net::NetCounters;
use nvrec::recording::writer::{RecordOutcome, RecordReport};
use nvrec::source::SourceSpec;
use nvrec::unit::{format_bytes, format_utc_ns};
use nvrec_app::listing::retirement_cause_text;
use nvrec_app::losses::network_loss_lines;
use nvrec_app::record::{self, RecordHandle, RecordRun};
use nvrec_app::Class;
use std::sync::Arc;

pub fn record(args: RecordArgs, json: bool) -> Result<Class> {
    let realtime = args.realtime();
    if args.marks_on_signal() {
        signal::install_mark();
    }
    let plan = record::plan(args.request())?;
    let handle = RecordHandle::default();
    let source = record::open_source(&plan, &handle)?;
    let display = progress::ProgressDisplay::start_with_network(
        Arc::clone(&handle.progress),
        handle.network.get().cloned(),
        "record".into(),
        !json,
    );
    let run = record::run(
        &plan,
        source,
        &handle,
        &signal::CONTROL,
        telemetry::warnings(),
    );
    drop(display);
    let class = run.class();
    let RecordRun {
        report,
        telemetry,
        scheduling,
        mark_lines,
    } = run;
    let report = report?;
    let network = handle.network.get().cloned();
    if json {
        let mut value = serde_json::to_value(&report)?;
        value["telemetry"] = serde_json::to_value(&telemetry)?;
        value["network"] = serde_json::to_value(
            network
                .as_ref()
                .map(|n| n.report_stored(report.unrecorded_bytes)),
        )?;
        value["scheduling"] = serde_json::to_value(&scheduling)?;
        value["mark_triggers"] = serde_json::to_value(&mark_lines)?;
        outln!("{value}");
        return Ok(class);
    }
    if let Some(telemetry) = &telemetry {
        out!("{}", telemetry::text(telemetry));
    }
    print_head(&report, &plan.source_spec, network.as_deref());
    print_writing(&report);
    if realtime {
        outln!(
            "  scheduling    {} priority {}",
            scheduling.policy,
            scheduling.priority
        );
    }
    print_marks(&report, &mark_lines);
    print_failures(&report);
    Ok(class)
}

/// The marks taken and released while it recorded, and what the triggers could not take.
fn print_marks(report: &RecordReport, trigger_lines: &[String]) {
    for answer in &report.marks {
        outln!("  {}", nvrec_app::marking::taken_line(answer));
    }
    for line in trigger_lines
        .iter()
        .filter(|line| !line.starts_with("mark "))
    {
        outln!("  {line}");
    }
}

/// What was recorded from where, and what was lost on the way.
fn print_head(report: &RecordReport, source: &SourceSpec, network: Option<&NetCounters>) {
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
    outln!("  source        {}", source.describe());
    if let Some(network) = network {
        print_network(report, network);
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
    print_losses(report);
}

fn print_network(report: &RecordReport, network: &NetCounters) {
    let counts = network.report_stored(report.unrecorded_bytes);
    let dropped = if counts.dropped_socket > 0 {
        format!(
            "DROPPED {} by the kernel (receive buffer or capture ring full; marked in the recording)",
            counts.dropped_socket
        )
    } else {
        "0 dropped".to_string()
    };
    outln!(
        "  network       {} datagrams or frames ({} bytes); {dropped}; {} truncated",
        counts.datagrams,
        counts.bytes,
        counts.truncated
    );
    for line in network_loss_lines(&counts) {
        outln!("  LOST          {line}");
    }
}

fn print_losses(report: &RecordReport) {
    if report.lost_bytes > 0 {
        outln!(
            "  LOST          {} bytes in {} gaps (input outran the targets; marked in the recording)",
            report.lost_bytes,
            report.gap_count
        );
    } else {
        outln!("  lost          0 bytes");
    }
    if report.lost_past_end_bytes > 0 {
        outln!(
            "  LOST          {} bytes after the recording's end (input outran the targets before they filled)",
            report.lost_past_end_bytes
        );
    }
    let causes = report.lost_by_cause;
    if causes.no_buffer_bytes + causes.behind_rate_bytes > 0 {
        outln!(
            "  lost by cause {} bytes with no free buffer, {} bytes behind the rate",
            causes.no_buffer_bytes,
            causes.behind_rate_bytes
        );
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
}

/// How the writing went: striping, members, engine, checkpoints, CPU.
fn print_writing(report: &RecordReport) {
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
        let laps = if member.laps > 0 {
            format!(", {} laps", member.laps)
        } else {
            String::new()
        };
        outln!(
            "  member        {}: {} chunks in {} writes, {:.1} MiB/s{laps}",
            member.path.display(),
            member.chunk_count,
            member.io_count,
            member.rate_mib_per_s
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
}

/// Members retired or failing, and the run's error.
fn print_failures(report: &RecordReport) {
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
    for reclaimed in &report.reclaimed {
        outln!(
            "  RECLAIMED     recording {} \"{}\" ({}) at {}: {}{}",
            reclaimed.recording_id,
            reclaimed.name,
            nvrec::unit::format_bytes(reclaimed.stream_len_bytes),
            format_utc_ns(reclaimed.reclaimed_ns),
            match reclaimed.cause {
                "age" => "older than the set keeps",
                _ => "its space was needed",
            },
            if reclaimed.archived {
                ", held whole by its archive"
            } else {
                ""
            }
        );
    }
    if let Some(refused) = &report.reclaim_refused {
        outln!("  NOT RECLAIMED {refused}");
    }
    if let Some(error) = &report.error {
        outln!("  error         {error}");
    }
}
