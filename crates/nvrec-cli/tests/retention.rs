//! End-to-end tests of retention (`record --append --reclaim`, `--keep`): a set that goes
//! round into the space of its oldest recordings, killed with SIGKILL while it reclaims,
//! and reclaiming only what an archive holds.

mod common;

use common::*;
use std::path::PathBuf;
use std::process::{Child, Stdio};
use std::time::Duration;

/// What this file's slowest tests, kept for the full run (`NVREC_FULL_TESTS=1`), cover.
const SLOW: &str = "a recorder killed while retention reclaims, and --usable over a ring";

fn targets(scratch: &Scratch) -> Vec<PathBuf> {
    vec![scratch.path("a.img"), scratch.path("b.img")]
}

/// Records `size` of the pattern seeded `seed` (`--json`).
fn record_pattern(
    targets: &[PathBuf],
    seed: u64,
    size: &str,
    extra: &[&str],
) -> std::process::Output {
    run(nvrec()
        .args([
            "--json",
            "record",
            "--source",
            "pattern",
            "--seed",
            &seed.to_string(),
        ])
        .args(["--size", size, "--sync-interval", "100ms"])
        .args(extra)
        .args(targets))
}

/// The set's recordings as `ls --json` lists them.
fn listed(targets: &[PathBuf]) -> Vec<serde_json::Value> {
    let output = run(nvrec().args(["--json", "ls"]).args(targets));
    assert!(output.status.success(), "{}", text(&output));
    json(&output)["recordings"]
        .as_array()
        .cloned()
        .unwrap_or_default()
}

/// Every recording is either reclaimed, and refused on reading, or verifies (CRC, sequence,
/// its pattern); the reclaimed ones are the oldest, each listed once. Returns their ids.
fn check_every_recording(targets: &[PathBuf]) -> Vec<u64> {
    let recordings = listed(targets);
    let mut reclaimed = Vec::new();
    for (at, recording) in recordings.iter().enumerate() {
        let id = recording["recording_id"].as_u64().unwrap();
        let verify = run(nvrec()
            .args(["verify", "--recording", &id.to_string()])
            .args(targets));
        if recording["state"] == "reclaimed" {
            assert_eq!(
                reclaimed.len(),
                at,
                "reclaimed oldest first: {recordings:?}"
            );
            assert_eq!(recording["reclaimed"]["cause"], "space");
            assert_eq!(verify.status.code(), Some(2), "{}", text(&verify));
            assert!(text(&verify).contains("was reclaimed"), "{}", text(&verify));
            reclaimed.push(id);
        } else {
            assert!(verify.status.success(), "recording {id}: {}", text(&verify));
        }
    }
    let mut ids: Vec<u64> = recordings
        .iter()
        .map(|r| r["recording_id"].as_u64().unwrap())
        .collect();
    ids.dedup();
    assert_eq!(ids.len(), recordings.len(), "each listed once");
    reclaimed
}

/// A paced recorder that reclaims, killed with SIGKILL once `ls` shows `bytes` of it
/// durable (or once it ended by itself, the set full), and the targets let go.
fn record_and_kill(targets: &[PathBuf], seed: u64, bytes: u64) {
    let child: Child = nvrec()
        .args(["record", "--source", "pattern", "--seed", &seed.to_string()])
        .args(["--rate", "40MB/s", "--sync-interval", "100ms"])
        .args(["--append", "--reclaim", "oldest"])
        .args(targets)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut child = child;
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    while child.try_wait().unwrap().is_none() && std::time::Instant::now() < deadline {
        if recorded_now(targets).is_some_and(|durable| durable >= bytes) {
            break;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    child.kill().unwrap(); // SIGKILL
    child.wait().unwrap();
    wait_unlocked(targets);
}

#[test]
fn killed_while_it_reclaims_a_set_loses_nothing_it_kept_and_counts_nothing_twice() {
    if nvrec_testkit::kept_for_full_run(SLOW) {
        return;
    }
    let scratch = Scratch::new("reclaim-kill9");
    let targets = targets(&scratch);
    let output = record_pattern(&targets, 1, "6MiB", &["--create-size", "16M"]);
    assert!(output.status.success(), "{}", text(&output));
    for seed in 2..=3 {
        let output = record_pattern(&targets, seed, "6MiB", &["--append"]);
        assert!(output.status.success(), "{}", text(&output));
    }
    // 18 MiB of 32: a recorder at 40 MB/s is into the oldest recordings' space within a
    // second. Killed at different points, again and again.
    let mut reclaimed = Vec::new();
    for (round, millis) in [700u64, 1100, 450, 1500, 900, 1300].into_iter().enumerate() {
        // As far as `millis` of its 40 MB/s.
        record_and_kill(&targets, 10 + round as u64, millis * 40_000);
        let now = check_every_recording(&targets);
        assert!(now.starts_with(&reclaimed), "{reclaimed:?} then {now:?}");
        reclaimed = now;
    }
    assert!(reclaimed.len() >= 3, "the set went round: {reclaimed:?}");
    // And it records on after the last kill.
    let output = record_pattern(&targets, 99, "6MiB", &["--append", "--reclaim", "oldest"]);
    assert!(output.status.success(), "{}", text(&output));
    check_every_recording(&targets);
}

#[test]
fn reclaim_archived_takes_only_what_the_archive_holds_whole() {
    let scratch = Scratch::new("reclaim-archived");
    let targets = targets(&scratch);
    let url = format!("file://{}", scratch.path("archive").display());
    // Two members of 16 MiB hold about 27 MiB of recordings.
    let output = record_pattern(&targets, 1, "5MiB", &["--create-size", "16M"]);
    assert!(output.status.success(), "{}", text(&output));
    let output = record_pattern(&targets, 2, "5MiB", &["--append"]);
    assert!(output.status.success(), "{}", text(&output));
    let output = run(nvrec()
        .args(["--json", "archive", "--to", &url, "--recording", "1"])
        .args(&targets));
    assert!(output.status.success(), "{}", text(&output));
    let reclaim = format!("archived={url}");
    let extra = ["--append", "--reclaim", reclaim.as_str()];
    // Room for it once recording 1, which the archive holds, is reclaimed.
    let output = record_pattern(&targets, 3, "18MiB", &extra);
    assert!(output.status.success(), "{}", text(&output));
    let report = json(&output);
    assert_eq!(report["reclaimed"][0]["recording_id"], 1, "{report}");
    assert_eq!(report["reclaimed"][0]["archived"], true, "{report}");
    // The next one needs recording 2, which the archive does not hold: the set is full.
    let output = record_pattern(&targets, 4, "18MiB", &extra);
    assert_eq!(output.status.code(), Some(5), "{}", text(&output));
    let report = json(&output);
    assert!(
        report["reclaimed"].as_array().unwrap().is_empty(),
        "{report}"
    );
    assert!(
        report["reclaim_refused"]
            .as_str()
            .is_some_and(|why| why.contains("recording 2 was not reclaimed")),
        "{report}"
    );
    let recordings = listed(&targets);
    let states: Vec<&str> = recordings
        .iter()
        .map(|r| r["state"].as_str().unwrap())
        .collect();
    assert_eq!(states[0], "reclaimed");
    assert_eq!(recordings[0]["reclaimed"]["archived"], true);
    assert_ne!(states[1], "reclaimed");
    // What is kept verifies; the archive still replays recording 1 whole.
    assert!(run(nvrec().arg("verify").args(&targets)).status.success());
    let from_archive = run(nvrec().args(["verify", &url, "--recording", "1"]));
    assert!(from_archive.status.success(), "{}", text(&from_archive));
}

#[test]
fn retention_options_are_refused_where_they_mean_nothing() {
    let scratch = Scratch::new("reclaim-usage");
    let targets = targets(&scratch);
    for extra in [
        vec!["--reclaim", "oldest", "--create-size", "8M"],
        vec!["--append", "--reclaim", "newest"],
        vec!["--append", "--reclaim", "archived="],
        vec!["--append", "--ring", "--reclaim", "oldest"],
        vec!["--keep", "7d", "--create-size", "8M"],
        vec!["--append", "--keep", "7d"],
    ] {
        let output = record_pattern(&targets, 1, "1MiB", &extra);
        assert_eq!(
            output.status.code(),
            Some(2),
            "{extra:?}: {}",
            text(&output)
        );
        assert!(!targets[0].exists(), "{extra:?} wrote nothing");
    }
}

/// Makes `path` a file of `size` bytes, every one of them `byte`.
fn filled_file(path: &std::path::Path, size: usize, byte: u8) {
    std::fs::write(path, vec![byte; size]).expect("writes the file");
}

/// Whether every byte of `path` from `from` to `to` is still `byte`.
fn untouched(path: &std::path::Path, from: usize, to: usize, byte: u8) -> bool {
    let bytes = std::fs::read(path).expect("reads the file");
    bytes[from..to].iter().all(|&b| b == byte)
}

/// `record --usable`: a ring that trims ahead and goes round its half of each member many
/// times, then a set that reclaims round it, leave every byte past the usable part as it
/// was (but superblock copy B in the last 4 KiB), and each recording not reclaimed verifies.
/// An append that asks another usable part is refused (exit 2) with nothing written.
#[test]
fn usable_leaves_the_rest_of_each_member_unwritten_in_a_ring_and_with_retention() {
    if nvrec_testkit::kept_for_full_run(SLOW) {
        return;
    }
    const SIZE: usize = 32 << 20;
    const BYTE: u8 = 0x5a;
    let scratch = Scratch::new("usable");
    let targets = targets(&scratch);
    let tail_untouched = |from: usize| {
        targets
            .iter()
            .all(|target| untouched(target, from, SIZE - 4096, BYTE))
    };
    for target in &targets {
        filled_file(target, SIZE, BYTE);
    }
    let ring = record_pattern(
        &targets,
        1,
        "96MiB",
        &["--ring", "--trim", "--usable", "50%"],
    );
    assert!(ring.status.success(), "{}", text(&ring));
    assert!(
        tail_untouched(SIZE / 2),
        "the ring wrote past half of a member"
    );
    let listing = listed(&targets);
    assert_eq!(listing[0]["state"], "complete (ring)", "{listing:?}");
    let set = json(&run(nvrec().args(["--json", "ls"]).args(&targets)));
    for member in set["members"].as_array().unwrap() {
        let end = member["data_end_bytes"].as_u64().unwrap();
        assert!(
            end <= SIZE as u64 / 2 && end + (128 << 10) > SIZE as u64 / 2,
            "{member}"
        );
        assert_eq!(member["volume_bytes"], SIZE as u64);
    }
    check_every_recording(&targets);

    let before: Vec<Vec<u8>> = targets.iter().map(|t| file_digest(t)).collect();
    let other = record_pattern(&targets, 2, "1MiB", &["--append", "--usable", "80%"]);
    assert_eq!(other.status.code(), Some(2), "{}", text(&other));
    assert!(text(&other).contains("--usable 80%"), "{}", text(&other));
    let after: Vec<Vec<u8>> = targets.iter().map(|t| file_digest(t)).collect();
    assert_eq!(before, after, "a refused append writes nothing");

    // A set made anew with 12 MiB of each member in use, then filled round by retention;
    // what the ring left past 12 MiB is marked again first.
    for target in &targets {
        use std::os::unix::fs::FileExt;
        let file = std::fs::OpenOptions::new()
            .write(true)
            .open(target)
            .unwrap();
        file.write_all_at(&vec![BYTE; (SIZE / 2) - (12 << 20)], 12 << 20)
            .unwrap();
    }
    let made = record_pattern(&targets, 1, "6MiB", &["--overwrite", "--usable", "12MiB"]);
    assert!(made.status.success(), "{}", text(&made));
    for seed in 2..=8 {
        let output = record_pattern(
            &targets,
            seed,
            "6MiB",
            &["--append", "--reclaim", "oldest", "--usable", "12MiB"],
        );
        assert!(output.status.success(), "{seed}: {}", text(&output));
    }
    assert!(check_every_recording(&targets).len() >= 4);
    assert!(
        tail_untouched(12 << 20),
        "retention wrote past 12 MiB of a member"
    );
}

#[test]
fn usable_is_refused_when_it_leaves_nothing() {
    let scratch = Scratch::new("usable-usage");
    let targets = targets(&scratch);
    for usable in ["0", "0%", "101%", "abc%", "64K"] {
        let output = record_pattern(
            &targets,
            1,
            "1MiB",
            &["--create-size", "8M", "--usable", usable],
        );
        assert_eq!(output.status.code(), Some(2), "{usable}: {}", text(&output));
    }
}
