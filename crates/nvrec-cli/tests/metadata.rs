//! Damaged metadata on images the tests build and corrupt: every damaged copy is named by
//! ls and verify, lost state fails them, `repair` makes the set whole, and nothing recorded
//! is lost or overwritten on the way.

mod common;

use common::*;
use std::path::PathBuf;

const BLOCK: u64 = 4096;
/// Copy `k` of recording table slot `s` on a volume laid out with the defaults (FORMAT.md 3).
fn entry_block(slot: u64, copy: u64) -> u64 {
    3 + 2 * slot + copy
}

fn two_recordings(scratch: &Scratch) -> Vec<PathBuf> {
    let targets = vec![scratch.path("m0.img"), scratch.path("m1.img")];
    for extra in [
        &["--size", "6M", "--create-size", "64M"][..],
        &["--append", "--seed", "3", "--size", "2M"][..],
    ] {
        let output = run(nvrec()
            .args(["record", "--source", "pattern", "--label", "kept"])
            .args(extra)
            .args(&targets));
        assert!(output.status.success(), "{}", text(&output));
    }
    targets
}

fn zero_blocks(path: &PathBuf, first_block: u64, count: u64) {
    let mut bytes = std::fs::read(path).unwrap();
    let start = (first_block * BLOCK) as usize;
    bytes[start..start + (count * BLOCK) as usize].fill(0);
    std::fs::write(path, bytes).unwrap();
}

fn flip_byte(path: &PathBuf, offset: u64) {
    let mut bytes = std::fs::read(path).unwrap();
    bytes[offset as usize] ^= 0x5a;
    std::fs::write(path, bytes).unwrap();
}

fn ls(targets: &[PathBuf]) -> (Option<i32>, serde_json::Value) {
    let output = run(nvrec().args(["--json", "ls"]).args(targets));
    (output.status.code(), json(&output))
}

fn damage_of(listed: &serde_json::Value) -> Vec<serde_json::Value> {
    listed["metadata_damage"].as_array().unwrap().clone()
}

fn verify_status(targets: &[PathBuf]) -> Option<i32> {
    run(nvrec().arg("verify").args(targets)).status.code()
}

/// Repairs, then checks that nothing is left to report and both recordings verify.
fn repair_and_check(targets: &[PathBuf], extra: &[&str]) -> serde_json::Value {
    let output = run(nvrec().args(["--json", "repair"]).args(extra).args(targets));
    assert!(output.status.success(), "{}", text(&output));
    let report = json(&output);
    let (status, listed) = ls(targets);
    assert_eq!(status, Some(0), "{listed}");
    assert!(damage_of(&listed).is_empty(), "{listed}");
    assert_eq!(
        listed["recordings"].as_array().unwrap().len(),
        2,
        "{listed}"
    );
    assert_eq!(verify_status(targets), Some(0));
    report
}

#[test]
fn one_members_damaged_copies_are_named_cost_nothing_and_are_repaired() {
    let scratch = Scratch::new("meta-one-member");
    let targets = two_recordings(&scratch);
    flip_byte(&targets[0], 100); // superblock A fails its CRC
    zero_blocks(&targets[0], 1, 2); // both checkpoint slots
    zero_blocks(&targets[0], entry_block(0, 0), 4); // the table's first two slots
    let (status, listed) = ls(&targets);
    assert_eq!(status, Some(0), "repairable damage loses nothing: {listed}");
    let damage = damage_of(&listed);
    assert!(damage.len() >= 5, "{listed}");
    assert!(damage
        .iter()
        .all(|d| d["severity"] == "repairable" && d["member_index"] == 0));
    assert!(damage
        .iter()
        .any(|d| d["place"]["structure"] == "superblock"));
    assert_eq!(listed["recordings"].as_array().unwrap().len(), 2);
    let output = run(nvrec().arg("verify").args(&targets));
    assert_eq!(output.status.code(), Some(0), "{}", text(&output));
    assert!(
        text(&output).contains("METADATA repairable"),
        "{}",
        text(&output)
    );
    repair_and_check(&targets, &[]);
}

#[test]
fn checkpoints_lost_everywhere_are_reported_and_rebuilt_so_appending_works() {
    let scratch = Scratch::new("meta-checkpoints");
    let targets = two_recordings(&scratch);
    for target in &targets {
        zero_blocks(target, 1, 2);
    }
    let (status, listed) = ls(&targets);
    assert_eq!(status, Some(1), "{listed}");
    assert!(damage_of(&listed).iter().any(|d| d["severity"] == "lost"
        && d["problem"]
            .as_str()
            .unwrap()
            .contains("no valid checkpoint")));
    assert_eq!(verify_status(&targets), Some(1));
    repair_and_check(&targets, &[]);
    // The rebuilt checkpoint puts the writers after the chunks: appending overwrites nothing.
    let output = run(nvrec()
        .args(["record", "--append", "--source", "pattern", "--size", "1M"])
        .args(&targets));
    assert!(output.status.success(), "{}", text(&output));
    let output = run(nvrec().args(["--json", "verify"]).args(&targets));
    assert!(output.status.success(), "{}", text(&output));
    assert_eq!(json(&output)["recordings"].as_array().unwrap().len(), 3);
}

#[test]
fn a_recording_whose_entries_are_lost_is_found_by_a_scan_and_its_id_never_reused() {
    let scratch = Scratch::new("meta-entries");
    let targets = two_recordings(&scratch);
    for target in &targets {
        zero_blocks(target, entry_block(1, 0), 2);
    }
    let (status, listed) = ls(&targets);
    assert_eq!(status, Some(1), "{listed}");
    assert!(damage_of(&listed)
        .iter()
        .any(|d| d["problem"].as_str().unwrap().starts_with("recording 2:")));
    let output = run(nvrec().args(["--json", "ls", "--scan"]).args(&targets));
    let scanned = json(&output)["scan"].as_array().unwrap().clone();
    assert_eq!(scanned.len(), 2, "{scanned:?}");
    assert_eq!(scanned[1]["recording_id"], 2);
    assert_eq!(scanned[1]["in_table"], false);
    // Repair without a scan cannot rebuild it, and says so.
    let output = run(nvrec().args(["repair"]).args(&targets));
    assert_eq!(output.status.code(), Some(1), "{}", text(&output));
    let report = repair_and_check(&targets, &["--scan"]);
    assert_eq!(report["report"]["rebuilt_recordings"][0], 2);
    let output = run(nvrec().args(["--json", "verify"]).args(&targets));
    let recordings = json(&output)["recordings"].as_array().unwrap().clone();
    assert_eq!(recordings[1]["payload_bytes"], 2 << 20);
    assert_eq!(recordings[1]["pattern_seed"], 3);
}

#[test]
fn after_a_lost_entry_the_next_recording_takes_a_new_id() {
    let scratch = Scratch::new("meta-ids");
    let targets = two_recordings(&scratch);
    for target in &targets {
        zero_blocks(target, entry_block(1, 0), 2);
    }
    let output = run(nvrec()
        .args([
            "--json", "record", "--append", "--source", "pattern", "--size", "1M",
        ])
        .args(&targets));
    assert!(output.status.success(), "{}", text(&output));
    assert_eq!(json(&output)["recording_id"], 3, "id 2 is never reused");
    // Recording 2's chunks are untouched: a scan still finds all of them.
    let output = run(nvrec().args(["--json", "ls", "--scan"]).args(&targets));
    let scanned = json(&output)["scan"].as_array().unwrap().clone();
    assert_eq!(scanned[1]["found"]["payload_bytes"], 2 << 20);
}

#[test]
fn a_truncated_member_is_named_and_the_set_still_opens() {
    let scratch = Scratch::new("meta-truncated");
    let targets = two_recordings(&scratch);
    let file = std::fs::OpenOptions::new()
        .write(true)
        .open(&targets[1])
        .unwrap();
    file.set_len(1 << 20).unwrap();
    let (status, listed) = ls(&targets);
    assert_eq!(status, Some(1), "{listed}");
    assert!(damage_of(&listed).iter().any(|d| d["severity"] == "lost"
        && d["member_index"] == 1
        && d["problem"].as_str().unwrap().contains("truncated")));
    assert_eq!(listed["recordings"].as_array().unwrap().len(), 2);
    assert_eq!(verify_status(&targets), Some(1));
}

#[test]
fn repair_writes_a_crashed_recordings_end() {
    let scratch = Scratch::new("meta-crash");
    let targets = vec![scratch.path("m0.img"), scratch.path("m1.img")];
    let data = noise(6 << 20, 5);
    record_then_kill(
        &targets,
        &["--create-size", "64M", "--sync-interval", "100ms"],
        &data,
        std::time::Duration::from_millis(150),
        KillWhen::Durable((data.len() - CHUNK) as u64),
    );
    let output = run(nvrec().args(["--json", "repair"]).args(&targets));
    assert!(output.status.success(), "{}", text(&output));
    let report = json(&output);
    assert_eq!(report["report"]["recovered_recording"], 1, "{report}");
    // Written, not just computed: the entry on disk is no longer open.
    let output = run(nvrec().args(["--json", "repair"]).args(&targets));
    let again = json(&output);
    assert!(again["report"]["recovered_recording"].is_null(), "{again}");
    let (_, listed) = ls(&targets);
    assert_eq!(listed["recordings"][0]["state"], "interrupted");
}

#[test]
fn a_wrapped_ring_whose_entry_is_lost_replays_the_same_after_repair_scan() {
    let scratch = Scratch::new("meta-ring");
    let targets = vec![scratch.path("r0.img"), scratch.path("r1.img")];
    let data = noise(40 << 20, 9);
    let output = record_stdin(&targets, &data, &["--ring", "--create-size", "12M"]);
    assert!(output.status.success(), "{}", text(&output));
    let before = run(nvrec().arg("replay").args(&targets));
    assert!(before.status.success(), "{}", text(&before));
    assert!(before.stdout.len() < data.len(), "the ring wrapped");
    for target in &targets {
        zero_blocks(target, entry_block(0, 0), 2);
    }
    let output = run(nvrec().args(["repair", "--scan"]).args(&targets));
    assert!(output.status.success(), "{}", text(&output));
    let after = run(nvrec().arg("replay").args(&targets));
    assert!(after.status.success(), "{}", text(&after));
    assert!(
        after.stdout == before.stdout,
        "the rebuilt ring reads back otherwise"
    );
    let (_, listed) = ls(&targets);
    assert_eq!(listed["recordings"][0]["ring"], true);
    assert_eq!(verify_status(&targets), Some(0));
}
