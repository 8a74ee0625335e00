//! `repair` and `ls --scan`: the metadata of a damaged set made whole from what survives,
//! and the recordings its chunks hold found without the table.

use crate::signal;
use anyhow::Result;
use clap::Args;
use nvrec::recording::scan::Scan;
use nvrec::unit::format_bytes;
use nvrec_app::listing::unaccounted_text;
use nvrec_app::repairing::{self, RepairRequest, RepairRun};
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
    let request = RepairRequest {
        targets: args.targets,
        scan: args.scan,
    };
    let run = repairing::repair(&request, &signal::CONTROL)?;
    if json {
        outln!("{}", run.json());
    } else {
        print_report(&run);
    }
    Ok(run.class())
}

fn print_report(run: &RepairRun) {
    let report = &run.report;
    outln!("volume set {}: repair", run.set_uuid);
    if run.was_whole() {
        // `restored` recordings are in `extended` too.
        outln!("  metadata was whole: nothing to repair");
    }
    for &index in &report.missing_members {
        outln!(
            "  MISSING   member {index}: not repaired, and the chunks it holds cannot be read \
             (repair again with it present)"
        );
    }
    for problem in &run.problems {
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
    if run.whole() {
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
