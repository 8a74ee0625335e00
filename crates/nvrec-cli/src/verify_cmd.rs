//! `nvrec verify`: every chunk of the recordings read and checked ([`nvrec_app::verify`]),
//! or an archive's objects checked in the store.

use crate::args::{size_arg, EngineArg};
use crate::{progress, reading, signal};
use anyhow::Result;
use clap::Args;
use nvrec::control::Progress;
use nvrec::layout::{RecordingEntry, RecordingFlags};
use nvrec_app::chunks::ChunkSource;
use nvrec_app::listing::{retirement_line, state_text, unaccounted_text};
use nvrec_app::verify::{self, RecordingCheck, SetCheck, VerifyRequest};
use nvrec_app::window::TimeArg;
use nvrec_app::Class;
use std::path::PathBuf;
use std::sync::Arc;

#[derive(Args, Debug)]
pub struct VerifyArgs {
    /// The members of a volume set, or an archive (file://DIR, s3://BUCKET/PREFIX).
    #[arg(required = true)]
    targets: Vec<PathBuf>,
    /// Which recording (default: every one).
    #[arg(long)]
    recording: Option<u32>,
    /// Check mark N's window instead (`ls` lists the marks).
    #[arg(long, value_name = "N", conflicts_with = "recording")]
    mark: Option<u32>,
    /// Seed of the pattern, for recordings of the pattern source. Default: each recording is
    /// checked against its own seed, read from its first chunk (so a set recorded with
    /// several seeds verifies); with --seed every recording must carry this one.
    #[arg(long, value_parser = size_arg)]
    seed: Option<u64>,
    /// For an archive: check that the store holds every object as it was uploaded (the
    /// manifest read whole, each segment's size and entity tag by HEAD) instead of reading
    /// every byte back. Quick; the bytes were checked against the chunks' CRCs before they
    /// left, so this finds objects lost, cut or replaced in the store, not a store that
    /// damages what it keeps.
    #[arg(long)]
    stored: bool,
    /// Exit 1 when a recording lost anything, whatever the cause: bytes lost to gaps,
    /// datagrams or frames the kernel or the recorder dropped (loss records), packets read
    /// only in part. Without it such a recording that reads whole is OK, its losses listed.
    #[arg(long)]
    strict: bool,
    /// Only the chunks from this long after each recording's start (500ms, 2m), or from this
    /// time in UTC (RFC 3339: 2026-11-27T08:00:00Z); found by search.
    #[arg(long, value_parser = nvrec_app::window::time_arg)]
    from: Option<TimeArg>,
    /// Only the chunks up to this long after each recording's start, or this time in UTC.
    #[arg(long, value_parser = nvrec_app::window::time_arg)]
    to: Option<TimeArg>,
    #[arg(long, value_enum, default_value = "auto")]
    engine: EngineArg,
}

pub fn verify(args: VerifyArgs, json: bool) -> Result<Class> {
    let request = VerifyRequest {
        recording: args.recording,
        mark: args.mark,
        seed: args.seed,
        strict: args.strict,
        engine: args.engine.choice(),
        from: args.from,
        to: args.to,
    };
    nvrec_app::window::check_window(args.from, args.to)?;
    let source = reading::open(&args.targets)?;
    let selected = verify::select(&source, &request)?;
    if args.stored {
        return verify_stored(&source, &selected, json);
    }
    let mut watch = Watch {
        source: &source,
        strict: args.strict,
        json,
        display: None,
    };
    let run = verify::verify(&source, &selected, &request, &signal::CONTROL, &mut watch)?;
    if json {
        let results: Vec<_> = run.checks.iter().map(RecordingCheck::json).collect();
        let set = &run.set;
        outln!(
            "{}",
            serde_json::json!({"set_uuid": source.set().map(|set| set.set_uuid.to_string()), "archive": source.archive_url(), "good": run.good(), "recordings": results, "unreadable_manifests": source.unreadable(), "missing_members": set.missing_members, "problems": set.member_problems, "metadata_damage": set.damage, "unnamed": set.unnamed})
        );
    } else {
        print_set(&source, &run.set);
    }
    Ok(run.class())
}

/// A progress line while each recording is read, and its verdict printed once checked.
struct Watch<'a> {
    source: &'a ChunkSource,
    strict: bool,
    json: bool,
    display: Option<progress::ProgressDisplay>,
}

impl verify::VerifyWatch for Watch<'_> {
    fn started(&mut self, entry: &RecordingEntry, progress: &Arc<Progress>) {
        let label = format!("verify {}", entry.recording_id);
        self.display = Some(progress::ProgressDisplay::start(
            Arc::clone(progress),
            label,
            !self.json,
        ));
    }

    fn checked(&mut self, check: &RecordingCheck) {
        self.display = None;
        if !self.json {
            print_check(self.source, check, self.strict);
        }
    }
}

/// One recording's verdict, in lines.
fn print_check(source: &ChunkSource, check: &RecordingCheck, strict: bool) {
    let entry = &check.entry;
    let not_archived: u64 = check.not_archived.iter().map(|loss| loss.gap_bytes).sum();
    let verdict = match not_archived {
        0 => "OK".to_string(),
        bytes => format!(
            "LOSSY: {bytes} bytes of its stream in {} not archived (overwritten on the drives before archived)",
            match check.not_archived.len() {
                1 => "1 range".to_string(),
                n => format!("{n} ranges"),
            }
        ),
    };
    match &check.first_bad {
        None => outln!(
            "{} ({}): {verdict}, {} chunks, {} bytes, CRC and sequence checked{}{}, {:.1} MiB/s",
            nvrec_app::listing::entry_name(entry),
            state_text(entry),
            check.summary.chunk_count,
            check.summary.payload_bytes,
            match &check.pattern {
                Some(pattern) if entry.flags.contains(RecordingFlags::PATTERN) =>
                    format!(", pattern checked (seed {:#x})", pattern.seed()),
                _ => String::new(),
            },
            if entry.flags.contains(RecordingFlags::RECORDS) {
                check.records.text()
            } else {
                String::new()
            },
            check.summary.rate_mib_per_s
        ),
        Some(bad) => outln!(
            "{} ({}): BAD: first bad chunk: {bad}",
            nvrec_app::listing::entry_name(entry),
            state_text(entry)
        ),
    }
    if check.lossy && strict {
        outln!(
            "  LOSSES (--strict): {} bytes lost to gaps, {} datagrams or frames in {} loss records",
            check.summary.lost_bytes,
            check.records.dropped,
            check.records.losses
        );
    }
    for loss in &check.not_archived {
        outln!("  LOST: {}", loss.line());
    }
    for retirement in &entry.retirements {
        outln!("  DEGRADED: {}", retirement_line(source, retirement));
    }
    for step in &check.clock_steps {
        outln!(
            "  CLOCK STEP: the wall clock was set {:+.3} s before sequence {} (windows and pacing go by the monotonic clock; chunk times after it show the new setting)",
            step.step_ns as f64 / 1e9,
            step.sequence
        );
    }
    if !check.unaccounted.is_clear() {
        outln!("  UNACCOUNTED: {}", unaccounted_text(&check.unaccounted));
    }
}

/// What is wrong with the set as a whole, in lines.
fn print_set(source: &ChunkSource, set: &SetCheck) {
    for bad in source.unreadable() {
        outln!("UNREADABLE MANIFEST {bad}");
    }
    for index in &set.missing_members {
        outln!("member {index} is missing");
    }
    for found in &set.unnamed {
        outln!("{}", nvrec_app::listing::unnamed_text(found));
    }
    for problem in &set.member_problems {
        outln!(
            "{}: {}: {}",
            problem.heading(),
            problem.path.display(),
            problem.problem
        );
    }
    reading::print_damage(&set.damage);
}

/// `verify --stored`: each of `selected`'s objects checked in the store by HEAD.
fn verify_stored(source: &ChunkSource, selected: &[RecordingEntry], json: bool) -> Result<Class> {
    let checked = verify::check_stored(source, selected)?;
    if json {
        let recordings: Vec<_> = selected
            .iter()
            .zip(&checked.first_bad)
            .map(|(entry, bad)| {
                serde_json::json!({"recording_id": entry.recording_id, "set_uuid": entry.set_uuid.to_string(), "good": bad.is_none(), "first_bad": bad.as_ref().map(ToString::to_string)})
            })
            .collect();
        outln!(
            "{}",
            serde_json::json!({"archive": source.archive_url(), "stored": true, "good": checked.all_good, "recordings": recordings, "unreadable_manifests": source.unreadable()})
        );
        return Ok(checked.class());
    }
    for (entry, bad) in selected.iter().zip(&checked.first_bad) {
        match bad {
            None => outln!(
                "recording {} ({}): OK, every object stored as uploaded (by HEAD; not read back)",
                entry.recording_id,
                state_text(entry)
            ),
            Some(bad) => outln!(
                "recording {} ({}): BAD: {bad}",
                entry.recording_id,
                state_text(entry)
            ),
        }
    }
    for bad in source.unreadable() {
        outln!("UNREADABLE MANIFEST {bad}");
    }
    Ok(checked.class())
}
