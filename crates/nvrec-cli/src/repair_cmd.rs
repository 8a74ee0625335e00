//! `repair` and `ls --scan`: the metadata of a damaged set made whole from what survives,
//! and the recordings its chunks hold found without the table.

use crate::signal;
use anyhow::Result;
use clap::Args;
use nvrec::device::{Access, Safety};
use nvrec::recording::scan::Scan;
use nvrec::recording::{repair, volume};
use nvrec::unit::format_bytes;
use nvrec_app::listing::unaccounted_text;
use nvrec_app::Class;
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

pub fn repair(args: RepairArgs, json: bool) -> Result<Class> {
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
    Ok(if whole { Class::Done } else { Class::Failed })
}

fn print_report(set: &volume::VolumeSet, report: &repair::RepairReport) {
    outln!("volume set {}: repair", set.set_uuid);
    let complete = report.missing_members.is_empty() && set.problems.is_empty();
    if report.found.is_empty() && report.extended.is_empty() && complete {
        // `restored` recordings are in `extended` too.
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
            "  {} {}: {}",
            problem.heading(),
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
    for id in &report.restored {
        outln!(
            "  restored  recording {id}, which no entry named (an entry write was lost): its \
             entry is written anew from its chunks, without its name"
        );
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
