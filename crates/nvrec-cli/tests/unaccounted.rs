//! Chunks of a recording that its entry does not account for (a writer that failed can
//! leave an entry that ends before chunks it wrote): `verify` names them and fails, `ls`
//! shows them, `repair` extends the entry over them, after which the recording verifies and
//! replays whole. And no false alarm where the entry is right: two recordings back to back,
//! a ring that wrapped.
//!
//! The short entry is made the way such a writer would leave it: the recording's entry
//! rewritten through the library as its next revision, ending before its last chunks.

mod common;

use common::*;
use nvrec::device::{Access, Safety};
use nvrec::layout::{decode_chunk_header, ChunkHeader, RecordingEntry};
use nvrec::pattern::Pattern;
use nvrec::recording::volume::{self, read_meta};
use std::path::PathBuf;

/// What this file's slowest tests, kept for the full run (`NVREC_FULL_TESTS=1`), cover.
const SLOW: &str = "an entry short of its chunks, named and repaired";

/// Every chunk of recording `id` on the members, read slot by slot.
fn chunks_of(targets: &[PathBuf], id: u32) -> Vec<ChunkHeader> {
    let set = volume::open(targets, Access::Read, Safety::Check).unwrap();
    let mut headers = Vec::new();
    for member in set.present() {
        let layout = member.layout();
        for slot in 0..layout.data_slot_count {
            let offset = layout.data_slot_offset_bytes(slot).unwrap();
            let bytes = read_meta(&member.disk, offset, layout.meta_block_bytes).unwrap();
            if let Ok(header) = decode_chunk_header(&bytes) {
                if header.set_uuid == set.set_uuid
                    && header.recording_id == id
                    && header.member_index == member.index()
                    && header.slot_index == slot
                {
                    headers.push(header);
                }
            }
        }
    }
    headers
}

/// Rewrites recording `id`'s entry as a writer that claimed all but its last `cut` chunks
/// would have closed it: its end, each member's span and the stream's length at the chunk
/// before them. Returns the short entry and the chunks it leaves out.
fn shorten(targets: &[PathBuf], id: u32, cut: u64) -> (RecordingEntry, Vec<ChunkHeader>) {
    let chunks = chunks_of(targets, id);
    let set = volume::open(targets, Access::Write, Safety::Check).unwrap();
    let entry = set
        .recordings()
        .unwrap()
        .into_iter()
        .find(|e| e.recording_id == id)
        .unwrap();
    let end = entry.end_sequence - cut;
    let (kept, left_out): (Vec<ChunkHeader>, Vec<ChunkHeader>) =
        chunks.into_iter().partition(|h| h.sequence < end);
    let last = kept.iter().max_by_key(|h| h.sequence).unwrap();
    let mut short = entry.clone();
    short.revision += 1;
    short.end_sequence = end;
    short.stream_len_bytes = last.stream_offset_bytes + u64::from(last.payload_len_bytes);
    for (index, span) in short.members.iter_mut().enumerate() {
        if let Some(h) = kept
            .iter()
            .filter(|h| h.member_index as usize == index)
            .max_by_key(|h| h.sequence)
        {
            span.end_slot_index = h.slot_index + 1;
        }
    }
    set.write_entry(&short).unwrap();
    assert_eq!(left_out.len() as u64, cut);
    (short, left_out)
}

fn payload_bytes(chunks: &[ChunkHeader]) -> u64 {
    chunks.iter().map(|h| u64::from(h.payload_len_bytes)).sum()
}

fn replay(targets: &[PathBuf], extra: &[&str]) -> Vec<u8> {
    let output = run(nvrec().arg("replay").args(extra).args(targets));
    assert!(output.status.success(), "{}", text(&output));
    output.stdout
}

fn ls_json(targets: &[PathBuf]) -> (Option<i32>, serde_json::Value) {
    let output = run(nvrec().args(["--json", "ls"]).args(targets));
    (output.status.code(), json(&output))
}

fn verify_json(targets: &[PathBuf]) -> (Option<i32>, serde_json::Value) {
    let output = run(nvrec().args(["--json", "verify"]).args(targets));
    (output.status.code(), json(&output))
}

/// `verify` and `ls` agree that nothing is unaccounted for, and say it with status 0.
fn assert_nothing_unaccounted(targets: &[PathBuf]) {
    let output = run(nvrec().arg("verify").args(targets));
    assert_eq!(output.status.code(), Some(0), "{}", text(&output));
    assert!(!text(&output).contains("UNACCOUNTED"), "{}", text(&output));
    let (status, listed) = ls_json(targets);
    assert_eq!(status, Some(0), "{listed}");
    for recording in listed["recordings"].as_array().unwrap() {
        assert_eq!(recording["unaccounted_chunks"], 0, "{recording}");
        assert_eq!(recording["unaccounted_bytes"], 0, "{recording}");
        assert!(recording["unaccounted"].is_null(), "{recording}");
    }
    let output = run(nvrec().arg("ls").args(targets));
    assert!(!text(&output).contains("UNACCOUNTED"), "{}", text(&output));
}

#[test]
fn a_short_entry_is_named_by_verify_and_ls_and_repair_extends_it() {
    if nvrec_testkit::kept_for_full_run(SLOW) {
        return;
    }
    let scratch = Scratch::new("unaccounted");
    let targets = vec![scratch.path("m0.img"), scratch.path("m1.img")];
    let data = noise(6 << 20, 21);
    let output = record_stdin(&targets, &data, &["--create-size", "64M"]);
    assert!(output.status.success(), "{}", text(&output));
    assert!(replay(&targets, &[]) == data, "the recording reads back");
    assert_nothing_unaccounted(&targets);

    let (short, left_out) = shorten(&targets, 1, 9);
    let bytes = payload_bytes(&left_out);
    // A copy of the damaged set, for `repair --json`.
    let copies = vec![scratch.path("c0.img"), scratch.path("c1.img")];
    for (from, to) in targets.iter().zip(&copies) {
        std::fs::copy(from, to).unwrap();
    }

    // verify: exit 1, the chunks named (count, bytes, member and slots).
    let output = run(nvrec().arg("verify").args(&targets));
    let said = text(&output);
    assert_eq!(output.status.code(), Some(1), "{said}");
    assert!(said.contains("BAD"), "{said}");
    assert!(
        said.contains("  UNACCOUNTED: 9 unaccounted chunks ("),
        "{said}"
    );
    assert!(
        said.contains(&format!(
            "sequences {}..{}",
            short.end_sequence,
            short.end_sequence + 9
        )),
        "{said}"
    );
    for member in left_out.iter().map(|h| h.member_index) {
        let span = short.members[member as usize].end_slot_index;
        assert!(
            said.contains(&format!("member {member} slots {span}..")),
            "{said}"
        );
    }
    let (status, verified) = verify_json(&targets);
    assert_eq!(status, Some(1), "{verified}");
    let recording = &verified["recordings"][0];
    assert_eq!(recording["good"], false, "{recording}");
    assert_eq!(recording["unaccounted_chunks"], 9, "{recording}");
    assert_eq!(recording["unaccounted_bytes"], bytes, "{recording}");
    let found = &recording["unaccounted"];
    assert_eq!(found["first_sequence"], short.end_sequence, "{found}");
    let on_members: u64 = found["members"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["chunk_count"].as_u64().unwrap())
        .sum();
    assert_eq!(on_members, 9, "{found}");

    // ls: in the row, and in JSON; the set is not whole.
    let output = run(nvrec().arg("ls").args(&targets));
    let said = text(&output);
    assert_eq!(output.status.code(), Some(1), "{said}");
    assert!(said.contains("UNACCOUNTED: 9 unaccounted chunks"), "{said}");
    assert!(said.contains("nvrec repair extends the entry"), "{said}");
    let (status, listed) = ls_json(&targets);
    assert_eq!(status, Some(1), "{listed}");
    assert_eq!(listed["recordings"][0]["unaccounted_chunks"], 9, "{listed}");
    assert_eq!(
        listed["recordings"][0]["unaccounted_bytes"], bytes,
        "{listed}"
    );
    assert_eq!(
        listed["recordings"][0]["end_sequence"], short.end_sequence,
        "{listed}"
    );

    // Read by its entry, the recording is short.
    let before = replay(&targets, &[]);
    assert_eq!(before.len() as u64, short.stream_len_bytes);
    assert!(before[..] == data[..before.len()]);

    // repair extends the entry, and says so.
    let output = run(nvrec().arg("repair").args(&targets));
    let said = text(&output);
    assert!(output.status.success(), "{said}");
    assert!(!said.contains("nothing to repair"), "{said}");
    assert!(
        said.contains("extended  recording 1 over 9 unaccounted chunks"),
        "{said}"
    );
    assert!(said.contains("the metadata is whole"), "{said}");
    let output = run(nvrec().args(["--json", "repair"]).args(&copies));
    assert!(output.status.success(), "{}", text(&output));
    let repaired = json(&output);
    assert_eq!(repaired["whole"], true, "{repaired}");
    let extended = &repaired["report"]["extended"];
    assert_eq!(extended.as_array().unwrap().len(), 1, "{repaired}");
    assert_eq!(extended[0]["recording_id"], 1, "{repaired}");
    assert_eq!(extended[0]["chunk_count"], 9, "{repaired}");
    assert_eq!(extended[0]["payload_bytes"], bytes, "{repaired}");
    assert!(
        repaired["report"]["unaccounted_left"]
            .as_array()
            .unwrap()
            .is_empty(),
        "{repaired}"
    );

    // Then both verify, and replay the whole stream, byte for byte.
    for set in [&targets, &copies] {
        assert_nothing_unaccounted(set);
        assert!(replay(set, &[]) == data, "the whole stream after repair");
    }
    // A second repair has nothing to extend.
    let output = run(nvrec().arg("repair").args(&targets));
    assert!(
        text(&output).contains("metadata was whole: nothing to repair"),
        "{}",
        text(&output)
    );
}

#[test]
fn two_recordings_back_to_back_are_no_false_alarm_and_only_the_first_is_extended() {
    let scratch = Scratch::new("unaccounted-two");
    let targets = vec![scratch.path("m0.img"), scratch.path("m1.img")];
    for extra in [
        &["--seed", "5", "--size", "6M", "--create-size", "64M"][..],
        &["--append", "--seed", "6", "--size", "2M"][..],
    ] {
        let output = run(nvrec()
            .args(["record", "--source", "pattern"])
            .args(extra)
            .args(&targets));
        assert!(output.status.success(), "{}", text(&output));
    }
    // The second recording begins right after the first on each member.
    let set = volume::open(&targets, Access::Read, Safety::Check).unwrap();
    let entries = set.recordings().unwrap();
    drop(set);
    for index in 0..2 {
        assert_eq!(
            entries[1].members[index].start_slot_index,
            entries[0].members[index].end_slot_index
        );
    }
    assert_nothing_unaccounted(&targets);

    // The first entry short: only its own chunks are unaccounted, not the second's after them.
    let (_, left_out) = shorten(&targets, 1, 5);
    let (status, verified) = verify_json(&targets);
    assert_eq!(status, Some(1), "{verified}");
    assert_eq!(verified["recordings"][0]["unaccounted_chunks"], 5);
    assert_eq!(
        verified["recordings"][0]["unaccounted_bytes"],
        payload_bytes(&left_out)
    );
    assert_eq!(verified["recordings"][1]["unaccounted_chunks"], 0);
    assert_eq!(verified["recordings"][1]["good"], true, "{verified}");

    let output = run(nvrec().args(["--json", "repair"]).args(&targets));
    assert!(output.status.success(), "{}", text(&output));
    let repaired = json(&output);
    let extended = repaired["report"]["extended"].as_array().unwrap();
    assert_eq!(extended.len(), 1, "{repaired}");
    assert_eq!(extended[0]["recording_id"], 1, "{repaired}");
    assert_eq!(extended[0]["chunk_count"], 5, "{repaired}");
    assert_nothing_unaccounted(&targets);
    for (id, seed, len) in [(1, 5, 6 << 20), (2, 6, 2 << 20)] {
        let mut expected = vec![0u8; len];
        Pattern::new(seed).fill(0, &mut expected);
        let replayed = replay(&targets, &["--recording", &id.to_string()]);
        assert!(replayed == expected, "recording {id} replays its pattern");
    }
}

#[test]
fn a_wrapped_ring_is_no_false_alarm_and_a_short_ring_entry_is_extended() {
    let scratch = Scratch::new("unaccounted-ring");
    let targets = vec![scratch.path("r0.img"), scratch.path("r1.img")];
    let data = noise(40 << 20, 9);
    let output = record_stdin(&targets, &data, &["--ring", "--create-size", "12M"]);
    assert!(output.status.success(), "{}", text(&output));
    let whole = replay(&targets, &[]);
    assert!(whole.len() < data.len(), "the ring wrapped");
    assert_nothing_unaccounted(&targets);

    let (_, left_out) = shorten(&targets, 1, 7);
    let (status, verified) = verify_json(&targets);
    assert_eq!(status, Some(1), "{verified}");
    assert_eq!(verified["recordings"][0]["unaccounted_chunks"], 7);
    assert_eq!(
        verified["recordings"][0]["unaccounted_bytes"],
        payload_bytes(&left_out)
    );
    let output = run(nvrec().args(["--json", "repair"]).args(&targets));
    assert!(output.status.success(), "{}", text(&output));
    assert_eq!(json(&output)["report"]["extended"][0]["chunk_count"], 7);
    assert_nothing_unaccounted(&targets);
    assert!(
        replay(&targets, &[]) == whole,
        "the ring replays as before its entry was cut"
    );
}

/// The index area of each member (superblocks, checkpoints, recording table): everything
/// before its first data slot.
fn index_areas(targets: &[PathBuf]) -> Vec<Vec<u8>> {
    let set = volume::open(targets, Access::Read, Safety::Check).unwrap();
    let lengths: Vec<usize> = set
        .present()
        .map(|member| member.layout().data_offset_bytes as usize)
        .collect();
    drop(set);
    targets
        .iter()
        .zip(lengths)
        .map(|(target, length)| {
            let mut bytes = vec![0u8; length];
            let file = std::fs::File::open(target).unwrap();
            std::os::unix::fs::FileExt::read_exact_at(&file, &mut bytes, 0).unwrap();
            bytes
        })
        .collect()
}

/// Puts `areas` back: the index stands as it did when they were read (every entry and
/// checkpoint write since then lost, as a drive without power-loss protection loses them).
fn restore_index_areas(targets: &[PathBuf], areas: &[Vec<u8>]) {
    for (target, bytes) in targets.iter().zip(areas) {
        let file = std::fs::OpenOptions::new()
            .write(true)
            .open(target)
            .unwrap();
        std::os::unix::fs::FileExt::write_all_at(&file, bytes, 0).unwrap();
        file.sync_all().unwrap();
    }
}

/// A recording whose entry (and every checkpoint of it) was lost: the set's index stands as
/// it did before the recording began, and its chunks lie at the set's write point. `verify`
/// and `ls` name it UNACCOUNTED (exit 1), a recording added now is refused (exit 3, nothing
/// written), and `repair` restores its entry, after which it replays whole. On loop
/// devices (the index written back through the device).
#[test]
fn a_recording_no_entry_names_is_unaccounted_and_repair_brings_it_back() {
    let (Some(first), Some(second)) = (LoopDevice::new(64 << 20), LoopDevice::new(64 << 20)) else {
        return;
    };
    let targets = vec![first.device.clone(), second.device.clone()];
    let before = noise(3 << 20, 5);
    let output = record_stdin(&targets, &before, &["--label", "first"]);
    assert!(output.status.success(), "{}", text(&output));
    let areas = index_areas(&targets);
    let lost = noise(5 << 20, 6);
    let output = record_stdin(&targets, &lost, &["--append", "--label", "second"]);
    assert!(output.status.success(), "{}", text(&output));
    restore_index_areas(&targets, &areas);
    let chunks = chunks_of(&targets, 2).len() as u64;
    assert!(chunks > 10, "{chunks}");

    let output = run(nvrec().arg("verify").args(&targets));
    let said = text(&output);
    assert_eq!(output.status.code(), Some(1), "{said}");
    assert!(
        said.contains("UNACCOUNTED recording 2: no entry names it"),
        "{said}"
    );
    assert!(
        said.contains(&format!("{chunks} unaccounted chunks")),
        "{said}"
    );
    let (status, verified) = verify_json(&targets);
    assert_eq!(status, Some(1), "{verified}");
    assert_eq!(verified["good"], false, "{verified}");
    assert_eq!(verified["unnamed"][0]["recording_id"], 2, "{verified}");
    assert_eq!(verified["unnamed"][0]["chunk_count"], chunks, "{verified}");
    let output = run(nvrec().arg("ls").args(&targets));
    assert_eq!(output.status.code(), Some(1), "{}", text(&output));
    assert!(
        text(&output).contains("UNACCOUNTED recording 2"),
        "{}",
        text(&output)
    );
    let (status, listed) = ls_json(&targets);
    assert_eq!(status, Some(1), "{listed}");
    assert_eq!(listed["unnamed"][0]["recording_id"], 2, "{listed}");

    // A recording added now would begin where they lie: refused, nothing written.
    let output = record_stdin(&targets, &noise(1 << 20, 7), &["--append"]);
    assert_eq!(output.status.code(), Some(3), "{}", text(&output));
    assert!(
        text(&output).contains("no entry names (an entry write was lost)"),
        "{}",
        text(&output)
    );
    assert_eq!(chunks_of(&targets, 2).len() as u64, chunks);
    assert!(chunks_of(&targets, 3).is_empty());

    let output = run(nvrec().arg("repair").args(&targets));
    let said = text(&output);
    assert!(output.status.success(), "{said}");
    assert!(said.contains("restored  recording 2"), "{said}");
    assert_nothing_unaccounted(&targets);
    assert!(replay(&targets, &["--recording", "1"]) == before);
    assert!(replay(&targets, &["--recording", "2"]) == lost);
    // And the set records on after it, over nothing it holds.
    let more = noise(1 << 20, 8);
    let output = record_stdin(&targets, &more, &["--append"]);
    assert!(output.status.success(), "{}", text(&output));
    assert!(replay(&targets, &["--recording", "2"]) == lost);
    assert!(replay(&targets, &["--recording", "3"]) == more);
}
