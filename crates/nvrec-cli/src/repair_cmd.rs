//! `repair` and `ls --scan`: the metadata of a damaged set made whole from what survives,
//! and the recordings its chunks hold found without the table.

use crate::{exit, signal, Finished};
use anyhow::Result;
use clap::Args;
use nvrec::device::{Access, Safety};
use nvrec::layout::RecordingEntry;
use nvrec::recording::scan::{self, Scan, Unaccounted};
use nvrec::recording::{repair, volume};
use nvrec::unit::format_bytes;
use std::path::PathBuf;

#[derive(Args, Debug)]
pub struct RepairArgs {
    /// The members of a volume set (those present are repaired).
    #[arg(required = true)]
    targets: Vec<PathBuf>,
    /// Also read every chunk header to rebuild the entries of recordings whose entries are
    /// all lost (one small read per slot of every member).
    #[arg(long)]
    scan: bool,
}

pub fn repair(args: RepairArgs, json: bool) -> Result<Finished> {
    let mut set = volume::open(&args.targets, Access::Write, Safety::Check)?;
    set.lock_for_recording()?;
    let report = repair::repair(&mut set, args.scan, &signal::CONTROL)?;
    // A member that was not there was not repaired, and the chunks it holds were out of
    // reach: never whole, whatever the members present say.
    let whole = report.failed.is_empty()
        && report.left.is_empty()
        && report.unaccounted_left.is_empty()
        && report.missing_members.is_empty()
        && set.problems.is_empty();
    if json {
        outln!(
            "{}",
            serde_json::json!({"set_uuid": set.set_uuid.to_string(), "whole": whole, "report": report, "problems": set.problems})
        );
    } else {
        print_report(&set, &report);
    }
    Ok(Finished(if whole { exit::OK } else { exit::FAILURE }))
}

fn print_report(set: &volume::VolumeSet, report: &repair::RepairReport) {
    outln!("volume set {}: repair", set.set_uuid);
    let complete = report.missing_members.is_empty() && set.problems.is_empty();
    if report.found.is_empty() && report.extended.is_empty() && complete {
        outln!("  metadata was whole: nothing to repair");
    }
    for &index in &report.missing_members {
        outln!(
            "  MISSING   member {index}: not repaired, and the chunks it holds cannot be read \
             (repair again with it present)"
        );
    }
    for problem in &set.problems {
        outln!(
            "  NOT A MEMBER {}: {}",
            problem.path.display(),
            problem.problem
        );
    }
    for item in &report.found {
        outln!("  found     {item}");
    }
    if let Some(id) = report.recovered_recording {
        outln!("  recovered recording {id}: its end after the crash is written into its entry");
    }
    if let Some(id) = report.unrecovered_recording {
        outln!(
            "  LEFT      recording {id} crashed: its end is not written while members are \
             missing (they may hold its chunks past what the others show)"
        );
    }
    for id in &report.rebuilt_recordings {
        outln!("  rebuilt   recording {id} from its chunks (its name was lost with its entries)");
    }
    for found in &report.extended {
        outln!(
            "  extended  recording {} over {}; it now ends at sequence {}",
            found.recording_id,
            unaccounted_text(found),
            found.end_sequence
        );
    }
    for line in &report.rewrote {
        outln!("  rewrote   {line}");
    }
    for line in &report.failed {
        outln!("  FAILED    {line}");
    }
    for item in &report.left {
        outln!("  LEFT      {item}");
    }
    for found in &report.unaccounted_left {
        outln!(
            "  LEFT      recording {}: {}",
            found.recording_id,
            unaccounted_text(found)
        );
    }
    if report.left.is_empty()
        && report.failed.is_empty()
        && report.unaccounted_left.is_empty()
        && complete
    {
        outln!("  the metadata is whole");
    }
}

/// `ls --scan`: what the chunks hold, recording by recording, against the table (the
/// JSON rows; text is printed unless `json`).
pub fn scan_rows(
    set: &volume::VolumeSet,
    entries: &[RecordingEntry],
) -> Result<(Scan, Vec<serde_json::Value>)> {
    let found = scan::scan(set, &signal::CONTROL)?;
    let rows: Vec<serde_json::Value> = found
        .recordings
        .iter()
        .map(|r| {
            let in_table = entries.iter().any(|e| e.recording_id == r.recording_id);
            serde_json::json!({"recording_id": r.recording_id, "in_table": in_table, "found": r})
        })
        .collect();
    Ok((found, rows))
}

pub fn print_scan(found: &Scan, rows: &[serde_json::Value]) {
    {
        outln!(
            "scan: {} slots read ({} unreadable); recordings found in the chunks:",
            found.slots_read,
            found.unreadable_slots
        );
        for (recording, row) in found.recordings.iter().zip(rows) {
            outln!(
                "  {:>4}  {} chunks, sequence {}..={}, {} of payload{}",
                recording.recording_id,
                recording.chunk_count,
                recording.first_sequence,
                recording.last_sequence,
                format_bytes(recording.payload_bytes),
                if row["in_table"] == true {
                    ""
                } else {
                    "  NO ENTRY (nvrec repair --scan rebuilds it)"
                }
            );
        }
    }
}

/// Chunks of a recording its entry does not account for, in a line: how many, their
/// bytes, their sequences and where they lie (`verify`, `ls`, `repair`).
pub fn unaccounted_text(found: &Unaccounted) -> String {
    let places: Vec<String> = found
        .members
        .iter()
        .map(|on| {
            let runs: Vec<String> = on
                .slot_runs
                .iter()
                .map(|(first, end)| format!("{first}..{end}"))
                .collect();
            format!(
                "member {} slots {} ({} chunk{})",
                on.member_index,
                runs.join(" and "),
                on.chunk_count,
                if on.chunk_count == 1 { "" } else { "s" }
            )
        })
        .collect();
    let unreadable = match found.unreadable_slots {
        0 => String::new(),
        n => format!(
            "; {n} slot{} past its end could not be read: what lies there is unknown",
            if n == 1 { "" } else { "s" }
        ),
    };
    if found.chunk_count == 0 {
        return unreadable.trim_start_matches("; ").to_string();
    }
    format!(
        "{} unaccounted chunks ({}) past the end of its entry, sequences {}..{}, on {}{unreadable}",
        found.chunk_count,
        format_bytes(found.payload_bytes),
        found.first_sequence,
        found.end_sequence,
        places.join(", ")
    )
}

/// What every recording of `entries` on `set` leaves unaccounted (`scan::unaccounted`: the
/// slots right after each entry's end, one small read per member when there are none).
pub fn unaccounted_of(set: &volume::VolumeSet, entries: &[RecordingEntry]) -> Vec<Unaccounted> {
    entries
        .iter()
        .map(|entry| scan::unaccounted(set, entry))
        .collect()
}
