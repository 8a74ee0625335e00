//! `nvrec ls`: the recordings on a volume set or in an archive, with the set's members,
//! metadata damage, unaccounted chunks, and on request losses and a scan of the chunks.

use crate::{reading, repair_cmd, signal};
use anyhow::Result;
use clap::Args;
use nvrec::layout::{RecordingEntry, RecordingFlags};
use nvrec::recording::health;
use nvrec::recording::scan::{Scan, Unaccounted};
use nvrec::recording::volume::{self, VolumeSet};
use nvrec::unit::{format_bytes, format_utc_ns};
use nvrec_app::chunks::ChunkSource;
use nvrec_app::listing::{
    entry_json, reclaimed_line, record_losses, retirement_line, scan_rows, set_json_with,
    state_text, unaccounted_of, unaccounted_text,
};
use nvrec_app::{Class, UsageError};
use std::path::PathBuf;

#[derive(Args, Debug)]
pub struct LsArgs {
    /// The members of a volume set, or an archive (file://DIR, s3://BUCKET/PREFIX).
    #[arg(required = true)]
    targets: Vec<PathBuf>,
    /// Also read every chunk header and list the recordings the chunks hold, those whose
    /// entries were lost included (one small read per slot of every member).
    #[arg(long)]
    scan: bool,
    /// Also read each recording of network records and count the losses inside it, by
    /// cause (the kernel's drops, the recorder's, packets read only in part): the entry
    /// holds only the bytes lost to gaps. Reads the whole of those recordings.
    #[arg(long)]
    losses: bool,
}

/// What `ls` found on a set.
struct Listed {
    entries: Vec<RecordingEntry>,
    damage: Vec<health::MetaDamage>,
    unaccounted: Vec<Unaccounted>,
    /// Chunks of recordings no entry names (an entry write lost).
    unnamed: Vec<Unaccounted>,
    /// Kept marks whose slots hold something else now, and what (format 1.7).
    overwritten: Vec<(u32, String)>,
    /// Recordings a later recording wrote over (a ring appended goes round over them).
    written_over: Vec<(u32, String)>,
    scanned: Option<(Scan, Vec<serde_json::Value>)>,
}

pub fn ls(args: LsArgs, json: bool) -> Result<Class> {
    if let Some(url) = nvrec_app::chunks::url_of(&args.targets)? {
        if args.scan {
            return Err(UsageError(
                "--scan reads the chunk headers of drives; an archive's manifests list its recordings"
                    .into(),
            )
            .into());
        }
        return crate::archive_cmd::ls(&url, json);
    }
    let source = reading::open(&args.targets)?;
    let set = source.set().expect("not an archive");
    let entries = nvrec::recording::reader::listed(set)?;
    let listed = Listed {
        damage: health::check(set)?,
        // Chunks past an entry's end that it does not account for: the entry is wrong.
        unaccounted: unaccounted_of(set, &entries),
        unnamed: nvrec_app::listing::unnamed_of(set),
        overwritten: nvrec::recording::marks::kept(set)?
            .iter()
            .filter_map(|mark| {
                nvrec::recording::marks::overwritten(set, mark)
                    .map(|why| (mark.recording_id, why.to_string()))
            })
            .collect(),
        written_over: entries
            .iter()
            .filter_map(|entry| {
                nvrec::recording::scan::written_over(set, entry)
                    .map(|why| (entry.recording_id, why.to_string()))
            })
            .collect(),
        scanned: if args.scan {
            Some(scan_rows(set, &entries, &signal::CONTROL)?)
        } else {
            None
        },
        entries,
    };
    let whole = set.missing_indices().is_empty()
        && set.problems.is_empty()
        && !health::loses_anything(&listed.damage)
        && listed.unaccounted.iter().all(Unaccounted::is_clear)
        && listed.unnamed.is_empty()
        && listed.overwritten.is_empty()
        && listed.written_over.is_empty();
    if json {
        print_json(&source, set, &listed, args.losses)?;
    } else {
        print_set(set, &listed.damage);
        print_recordings(&source, &listed, args.losses)?;
        for found in &listed.unnamed {
            outln!("{}", nvrec_app::listing::unnamed_text(found));
        }
        if let Some((found, rows)) = &listed.scanned {
            repair_cmd::print_scan(found, rows);
        }
    }
    Ok(Class::passed(whole))
}

fn print_json(source: &ChunkSource, set: &VolumeSet, listed: &Listed, losses: bool) -> Result<()> {
    let mut value = set_json_with(set, &listed.entries, &listed.damage, &listed.unaccounted);
    value["scan"] = serde_json::json!(listed.scanned.as_ref().map(|(_, rows)| rows));
    if let (true, Some(recordings)) = (losses, value["recordings"].as_array_mut()) {
        for (row, entry) in recordings.iter_mut().zip(&listed.entries) {
            if entry.flags.contains(RecordingFlags::RECORDS) {
                row["record_losses"] =
                    serde_json::to_value(record_losses(source, entry, &signal::CONTROL)?)?;
            }
        }
    }
    outln!("{value}");
    Ok(())
}

/// The set's name, members and metadata damage.
fn print_set(set: &VolumeSet, damage: &[health::MetaDamage]) {
    outln!(
        "volume set {} \"{}\", chunk size {}",
        set.set_uuid,
        set.label,
        format_bytes(set.chunk_size_bytes as u64)
    );
    for index in 0..set.member_count() {
        let status = if set.members[index].is_some() {
            ""
        } else {
            "  MISSING"
        };
        outln!(
            "  member {index}: {}{status}",
            volume::describe_member(set, index)
        );
    }
    for problem in &set.problems {
        outln!(
            "  {}: {}: {}",
            problem.heading(),
            problem.path.display(),
            problem.problem
        );
    }
    reading::print_damage(damage);
}

/// The table of recordings, each with what is wrong with it.
fn print_recordings(source: &ChunkSource, listed: &Listed, losses: bool) -> Result<()> {
    if listed.entries.is_empty() {
        outln!("no recordings");
        return Ok(());
    }
    outln!(
        "{:>4}  {:<16} {:<23} {:<23} {:>12} {:>9} {:>10} {:>12}  name",
        "id",
        "state",
        "start (UTC)",
        "end (UTC)",
        "bytes",
        "chunks",
        "MiB/s",
        "lost bytes",
    );
    let marks = source
        .set()
        .map(|set| set.marks().unwrap_or_default())
        .unwrap_or_default();
    for entry in &listed.entries {
        print_row(entry);
        if let Some((_, why)) = listed
            .written_over
            .iter()
            .find(|(id, _)| *id == entry.recording_id)
        {
            outln!("      OVERWRITTEN in part: {why}; nvrec verify names what is left");
        }
        let reclaimed = reclaimed_line(entry);
        if let Some(line) = &reclaimed {
            outln!("      RECLAIMED: {line}");
        }
        // A recording reclaimed for room keeps its marks (their slots are never reclaimed).
        for mark in marks
            .iter()
            .filter(|m| m.mark_of.map(|of| of.recording_id) == Some(entry.recording_id))
        {
            outln!("      {}", nvrec_app::listing::mark_line(mark));
            if let Some((_, why)) = listed
                .overwritten
                .iter()
                .find(|(id, _)| *id == mark.recording_id)
            {
                outln!(
                    "        OVERWRITTEN: {why} (nvrec verify --mark {} reads what is left)",
                    mark.recording_id
                );
            }
        }
        if reclaimed.is_some() {
            continue;
        }
        if losses && entry.flags.contains(RecordingFlags::RECORDS) {
            let counts = record_losses(source, entry, &signal::CONTROL)?;
            match counts.dropped {
                0 => outln!("      no records lost"),
                dropped => outln!(
                    "      LOST {dropped} datagrams or frames in {}",
                    counts.causes()
                ),
            }
        }
        for retirement in &entry.retirements {
            outln!("      DEGRADED: {}", retirement_line(source, retirement));
        }
        if let Some(found) = listed
            .unaccounted
            .iter()
            .find(|found| found.recording_id == entry.recording_id && !found.is_clear())
        {
            outln!(
                "      UNACCOUNTED: {} (nvrec repair extends the entry over them)",
                unaccounted_text(found)
            );
        }
    }
    let records = listed
        .entries
        .iter()
        .any(|entry| entry.flags.contains(RecordingFlags::RECORDS));
    if records && !losses {
        outln!(
            "network records keep their losses (drops, packets read only in part) inside \
             the recording, not in \"lost bytes\": nvrec ls --losses or nvrec verify counts them"
        );
    }
    Ok(())
}

fn print_row(entry: &RecordingEntry) {
    let value = entry_json(entry);
    outln!(
        "{:>4}  {:<16} {:<23} {:<23} {:>12} {:>9} {:>10.1} {:>12}  {}",
        entry.recording_id,
        state_text(entry),
        format_utc_ns(entry.start_ns),
        if entry.end_ns == 0 {
            "-".to_string()
        } else {
            format_utc_ns(entry.end_ns)
        },
        value["bytes"].as_u64().unwrap_or(0),
        value["chunk_count"].as_u64().unwrap_or(0),
        value["mean_rate_mib_per_s"].as_f64().unwrap_or(0.0),
        entry.lost_bytes,
        if entry.flags.contains(RecordingFlags::RECORDS) {
            format!("{} (network records)", entry.name.as_str())
        } else {
            entry.name.as_str().to_string()
        }
    );
}
