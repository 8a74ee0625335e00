//! End-to-end tests of retention (`record --append --reclaim`, `--keep`): a set that goes
//! round into the space of its oldest recordings, killed with SIGKILL while it reclaims,
//! and reclaiming only what an archive holds.

mod common;

use common::*;
use std::path::PathBuf;
use std::process::{Child, Stdio};
use std::time::Duration;

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

/// A paced recorder that reclaims, killed with SIGKILL after `after`, and the targets let go.
fn record_and_kill(targets: &[PathBuf], seed: u64, after: Duration) {
    let child: Child = nvrec()
        .args(["record", "--source", "pattern", "--seed", &seed.to_string()])
        .args(["--rate", "40MB/s", "--sync-interval", "100ms"])
        .args(["--append", "--reclaim", "oldest"])
        .args(targets)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    std::thread::sleep(after);
    let mut child = child;
    child.kill().unwrap(); // SIGKILL
    child.wait().unwrap();
    wait_unlocked(targets);
}

#[test]
fn killed_while_it_reclaims_a_set_loses_nothing_it_kept_and_counts_nothing_twice() {
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
        record_and_kill(&targets, 10 + round as u64, Duration::from_millis(millis));
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
