//! What `ls` and the service's `/v1/volumes` show of a volume set or an archive: its
//! members, metadata damage, and recordings, with what each entry leaves unaccounted, as
//! JSON for machines and as lines for people.

use crate::chunks::ChunkSource;
use crate::losses::RecordCounts;
use anyhow::Result;
use nvrec::control::{Control, ControlState, Progress};
use nvrec::engine::EngineChoice;
use nvrec::layout::{ChunkFlags, Reassembly, RecordingEntry, RecordingFlags, RecordingState};
use nvrec::recording::reader::Item;
use nvrec::recording::scan::{self, Scan, Unaccounted};
use nvrec::recording::{health, volume};
use nvrec::unit::{format_bytes, format_utc_ns};

/// The recordings of `set` as readers see them: a crashed recording at its recovered end,
/// and the one another program is writing right now still open (shown as recording, with
/// what it has made durable so far).
pub fn state_text(entry: &RecordingEntry) -> &'static str {
    if entry.flags.contains(RecordingFlags::MARK) {
        return mark_state(entry);
    }
    if entry.reclaimed.is_some() {
        return "reclaimed";
    }
    let wrapped = entry.flags.contains(RecordingFlags::RING);
    match (entry.state, wrapped) {
        (RecordingState::Open, _) => "recording",
        (RecordingState::Closed, false) => "complete",
        (RecordingState::Closed, true) => "complete (ring)",
        (RecordingState::Aborted, _) => "aborted",
        (RecordingState::Interrupted, _) => "interrupted",
    }
}

pub fn entry_json(entry: &RecordingEntry) -> serde_json::Value {
    let seconds = entry.end_ns.saturating_sub(entry.start_ns) as f64 / 1e9;
    let recorded = entry.stream_len_bytes.saturating_sub(entry.lost_bytes);
    serde_json::json!({
        "recording_id": entry.recording_id,
        "name": entry.name.as_str(),
        "state": state_text(entry),
        "ring": entry.flags.contains(RecordingFlags::RING),
        "pattern": entry.flags.contains(RecordingFlags::PATTERN),
        "records": entry.flags.contains(RecordingFlags::RECORDS),
        "start": format_utc_ns(entry.start_ns),
        "end": format_utc_ns(entry.end_ns),
        "start_ns": entry.start_ns,
        "end_ns": entry.end_ns,
        "duration_s": seconds,
        "bytes": recorded,
        "stream_len_bytes": entry.stream_len_bytes,
        "lost_bytes": entry.lost_bytes,
        "chunk_count": entry.end_sequence - entry.first_sequence,
        "first_sequence": entry.first_sequence,
        "end_sequence": entry.end_sequence,
        "mean_rate_mib_per_s": if seconds > 0.0 { recorded as f64 / 1048576.0 / seconds } else { 0.0 },
        "members": entry.members.iter().map(|m| serde_json::json!({"start_slot": m.start_slot_index, "end_slot": m.end_slot_index})).collect::<Vec<_>>(),
        "degraded": !entry.retirements.is_empty(),
        "retirements": entry.retirements.iter().map(retirement_json).collect::<Vec<_>>(),
        "reclaimed": entry.reclaimed.map(|reclaim| serde_json::json!({
            "reclaimed": format_utc_ns(reclaim.reclaimed_ns),
            "reclaimed_ns": reclaim.reclaimed_ns,
            "cause": reclaim.cause.as_str(),
            "archived": reclaim.archived,
        })),
    })
}

/// A line on a reclaimed recording, for `ls`: when and why its space was reused.
pub fn reclaimed_line(entry: &RecordingEntry) -> Option<String> {
    let reclaim = entry.reclaimed?;
    let why = match reclaim.cause {
        nvrec::layout::ReclaimCause::Space => "its space was needed by a newer recording",
        nvrec::layout::ReclaimCause::Age => "it was older than the set keeps (--keep)",
        nvrec::layout::ReclaimCause::Freed => {
            "its space was given back once its archive was verified (archive --delete-after-verify)"
        }
        nvrec::layout::ReclaimCause::Released => "the mark was released (nvrec mark --release)",
    };
    let archived = if reclaim.archived {
        "; its archive held it whole"
    } else {
        ""
    };
    Some(format!(
        "reclaimed at {}: {why}{archived}; its data is gone from the drives",
        format_utc_ns(reclaim.reclaimed_ns)
    ))
}

pub fn retirement_json(retirement: &nvrec::layout::Retirement) -> serde_json::Value {
    serde_json::json!({
        "member_index": retirement.member_index,
        "cause": retirement.cause,
        "errno": retirement.errno,
        "why": retirement_cause_text(retirement.cause, retirement.errno),
        "retired": format_utc_ns(retirement.retired_ns),
        "retired_ns": retirement.retired_ns,
        "stream_offset_bytes": retirement.stream_offset_bytes,
        "first_sequence": retirement.first_sequence,
        "redirect_member": retirement.redirect_member,
        "redirect_chunk_count": retirement.redirect_slot_count,
    })
}

/// A line on a retired member, for `ls` and `verify`.
pub fn retirement_line(source: &ChunkSource, retirement: &nvrec::layout::Retirement) -> String {
    format!(
        "member {} ({}) retired at {}, stream offset {}: {}; its {} unfinished chunks are on member {}",
        retirement.member_index,
        source.describe_member(retirement.member_index as usize),
        format_utc_ns(retirement.retired_ns),
        retirement.stream_offset_bytes,
        retirement_cause_text(retirement.cause, retirement.errno),
        retirement.redirect_slot_count,
        retirement.redirect_member
    )
}

/// What `ls --json` prints about `set` (without `--scan`): members, problems, metadata
/// damage and recordings.
pub fn set_json(
    set: &volume::VolumeSet,
    entries: &[RecordingEntry],
    damage: &[health::MetaDamage],
) -> serde_json::Value {
    let unaccounted = unaccounted_of(set, entries);
    set_json_with(set, entries, damage, &unaccounted)
}

/// A member as listed: where it is, and how much of it the set uses (`record --usable`
/// leaves the rest unwritten).
fn member_json(set: &volume::VolumeSet, index: usize) -> serde_json::Value {
    let member = set.members[index].as_ref();
    serde_json::json!({
        "index": index,
        "path": volume::describe_member(set, index),
        "present": member.is_some(),
        "volume_bytes": member.map(|m| m.layout().volume_size_bytes),
        "data_end_bytes": member.map(|m| m.layout().data_end_bytes()),
    })
}

/// [`set_json`], with what each of `entries` leaves unaccounted, looked for already.
pub fn set_json_with(
    set: &volume::VolumeSet,
    entries: &[RecordingEntry],
    damage: &[health::MetaDamage],
    unaccounted: &[Unaccounted],
) -> serde_json::Value {
    let members: Vec<serde_json::Value> = (0..set.member_count())
        .map(|index| member_json(set, index))
        .collect();
    let complete = set.missing_indices().is_empty() && set.problems.is_empty();
    serde_json::json!({
        "set_uuid": set.set_uuid.to_string(),
        "label": set.label,
        "chunk_size_bytes": set.chunk_size_bytes,
        "members": members,
        "problems": set.problems,
        "complete": complete,
        "metadata_damage": damage,
        "scan": null,
        "recordings": entries.iter().zip(unaccounted).map(|(entry, found)| {
            let mut value = listed_json(entry, found);
            value["written_over"] = scan::written_over(set, entry).map(|over| over.to_string()).into();
            value
        }).collect::<Vec<_>>(),
        "marks": set.marks().unwrap_or_default().iter().map(|mark| {
            let mut value = mark_json(mark);
            let kept = mark.reclaimed.is_none() && mark.state != RecordingState::Open;
            value["overwritten"] = kept
                .then(|| nvrec::recording::marks::overwritten(set, mark))
                .flatten()
                .map(|why| why.to_string())
                .into();
            value
        }).collect::<Vec<_>>(),
        "unnamed": unnamed_of(set),
    })
}

/// What a read names: "recording N", or "mark N of recording M" (format 1.7).
pub fn entry_name(entry: &RecordingEntry) -> String {
    match entry.mark_of {
        Some(of) => format!(
            "mark {} of recording {}",
            entry.recording_id, of.recording_id
        ),
        None => format!("recording {}", entry.recording_id),
    }
}

/// A mark (format 1.7) as `ls --json` and the service show it.
pub fn mark_json(mark: &RecordingEntry) -> serde_json::Value {
    let of = mark.mark_of.unwrap_or(nvrec::layout::MarkOf {
        recording_id: 0,
        stream_offset_bytes: 0,
        from_ns: 0,
    });
    serde_json::json!({
        "mark_id": mark.recording_id,
        "recording_id": of.recording_id,
        "label": mark.name.as_str(),
        "state": mark_state(mark),
        "from": format_utc_ns(of.from_ns),
        "to": format_utc_ns(mark.end_ns),
        "from_ns": of.from_ns,
        "to_ns": mark.end_ns,
        "stream_offset_bytes": of.stream_offset_bytes,
        "bytes": mark.stream_len_bytes,
        "lost_bytes": mark.lost_bytes,
        "chunks": mark.end_sequence.saturating_sub(mark.first_sequence),
        "released": mark.reclaimed.map(|reclaim| format_utc_ns(reclaim.reclaimed_ns)),
        "archived": mark.reclaimed.is_some_and(|reclaim| reclaim.archived),
    })
}

/// A mark's state in a word: being recorded, kept, cut short by a crash, or released.
pub fn mark_state(mark: &RecordingEntry) -> &'static str {
    match (mark.reclaimed.is_some(), mark.state) {
        (true, _) if mark.reclaimed.is_some_and(|r| r.archived) => "released (archived)",
        (true, _) => "released",
        (false, RecordingState::Open) => "recording",
        (false, RecordingState::Interrupted) => "kept (cut by a crash)",
        (false, _) => "kept",
    }
}

/// A mark as `ls` lists it under its recording.
pub fn mark_line(mark: &RecordingEntry) -> String {
    let of = mark
        .mark_of
        .map_or((0, 0), |of| (of.from_ns, of.stream_offset_bytes));
    let label = match mark.name.as_str() {
        "" => String::new(),
        label => format!(" \"{label}\""),
    };
    let lost = match mark.lost_bytes {
        0 => String::new(),
        bytes => format!(", {} of its window LOST", format_bytes(bytes)),
    };
    format!(
        "mark {}{label}: {} from {} to {} ({} at stream offset {}), {}{lost}",
        mark.recording_id,
        format_bytes(mark.stream_len_bytes),
        format_utc_ns(of.0),
        format_utc_ns(mark.end_ns),
        format_duration_ns(mark.end_ns.saturating_sub(of.0)),
        of.1,
        mark_state(mark)
    )
}

fn format_duration_ns(ns: u64) -> String {
    format!("{:.3} s", ns as f64 / 1e9)
}

/// A recording as `ls` and `verify` show it in JSON: its entry, and the chunks past its end
/// that the entry does not account for (`unaccounted` null when there are none).
pub fn listed_json(entry: &RecordingEntry, found: &Unaccounted) -> serde_json::Value {
    let mut value = entry_json(entry);
    add_unaccounted(&mut value, found);
    value
}

pub fn add_unaccounted(value: &mut serde_json::Value, found: &Unaccounted) {
    value["unaccounted_chunks"] = found.chunk_count.into();
    value["unaccounted_bytes"] = found.payload_bytes.into();
    value["unaccounted_unreadable_slots"] = found.unreadable_slots.into();
    value["unaccounted"] = if !found.is_clear() {
        serde_json::json!(found)
    } else {
        serde_json::Value::Null
    };
}

/// Why a member was retired, in words.
pub fn retirement_cause_text(cause: nvrec::layout::RetirementCause, errno: i32) -> String {
    if errno == 0 {
        cause.text().to_string()
    } else {
        format!(
            "{} ({})",
            cause.text(),
            std::io::Error::from_raw_os_error(errno)
        )
    }
}

/// The losses inside a recording of records, read whole through the reassembly.
pub fn record_losses(
    source: &ChunkSource,
    entry: &RecordingEntry,
    control: &Control,
) -> Result<RecordCounts> {
    let mut counts = RecordCounts::default();
    let mut reassembly = Reassembly::new();
    let mut undecodable = 0u64;
    source.read_from(
        entry,
        EngineChoice::Auto,
        None,
        control,
        &Progress::default(),
        &mut |item| {
            if let Item::Chunk { header, payload } = item {
                if header.flags.contains(ChunkFlags::RECORDS) {
                    let walk = reassembly.payload(header.stream_offset_bytes, payload);
                    undecodable += u64::from(counts.count(walk).is_err());
                }
            }
            control.state() == ControlState::Run
        },
    )?;
    if let Some(loss) = reassembly.finish() {
        counts.loss(&loss);
    }
    if undecodable > 0 {
        anyhow::bail!(
            "recording {}: {undecodable} payloads hold records that do not decode (nvrec verify names them)",
            entry.recording_id
        );
    }
    Ok(counts)
}

/// `ls --scan`: what the chunks hold, recording by recording, against the table (the
/// JSON rows; text is printed unless `json`).
pub fn scan_rows(
    set: &volume::VolumeSet,
    entries: &[RecordingEntry],
    control: &Control,
) -> Result<(Scan, Vec<serde_json::Value>)> {
    let found = scan::scan(set, control)?;
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

/// Chunks at the set's write point of recordings that no entry names (`scan::unnamed`: an
/// entry write lost), each with what it holds; one small read per member when there are
/// none.
pub fn unnamed_of(set: &volume::VolumeSet) -> Vec<Unaccounted> {
    scan::unnamed(set)
        .unwrap_or_default()
        .iter()
        .map(|entry| scan::unaccounted(set, entry))
        .filter(|found| found.chunk_count > 0)
        .collect()
}

/// A recording that no entry names, in a line (`ls`, `verify`).
pub fn unnamed_text(found: &Unaccounted) -> String {
    format!(
        "UNACCOUNTED recording {}: no entry names it (an entry write was lost), yet the set \
         holds {}: nvrec repair restores its entry",
        found.recording_id,
        unaccounted_text(found).replace(" past the end of its entry", ""),
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
