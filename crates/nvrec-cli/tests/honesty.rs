//! Reports that tell the truth: loss accounting at any rate, each recording verified against
//! its own seed, a live recording shown as recording and never written by another run.

mod common;

use common::*;
use std::path::PathBuf;

fn record_pattern(targets: &[PathBuf], extra: &[&str]) -> serde_json::Value {
    let output = run(nvrec()
        .args(["--json", "record", "--source", "pattern"])
        .args(extra)
        .args(targets));
    assert!(output.status.success(), "{}", text(&output));
    json(&output)
}

fn u64_of(value: &serde_json::Value, key: &str) -> u64 {
    value[key]
        .as_u64()
        .unwrap_or_else(|| panic!("{key} in {value}"))
}

#[test]
fn a_rate_the_recorder_cannot_keep_is_counted_to_the_byte() {
    let scratch = Scratch::new("honest-rate");
    let targets = vec![scratch.path("a.img")];
    // 20 GB/s for 100 ms: 2 GB are due, far more than the recorder can take here.
    let report = record_pattern(
        &targets,
        &[
            "--rate",
            "20GB/s",
            "--duration",
            "100ms",
            "--buffer",
            "64M",
            "--create-size",
            "1G",
        ],
    );
    let recorded = u64_of(&report, "stream_bytes");
    let lost = u64_of(&report, "lost_bytes");
    let overdue = u64_of(&report, "overdue_bytes");
    assert_eq!(
        recorded + lost + overdue,
        2_000_000_000,
        "recorded, lost and overdue add up to what was due: {report}"
    );
    assert!(lost > 1_000_000_000, "most of it is lost: {report}");
    assert!(overdue <= 64 << 20, "{report}");
    // The loss is in the recording: the entry and the gaps in the chunks agree.
    let output = run(nvrec().args(["--json", "verify"]).args(&targets));
    assert!(output.status.success(), "{}", text(&output));
    assert_eq!(u64_of(&json(&output)["recordings"][0], "lost_bytes"), lost);
    let output = run(nvrec().args(["--json", "ls"]).args(&targets));
    assert_eq!(u64_of(&json(&output)["recordings"][0], "lost_bytes"), lost);
}

#[test]
fn a_rate_the_recorder_keeps_loses_nothing_and_adds_up() {
    let scratch = Scratch::new("honest-slow-rate");
    let targets = vec![scratch.path("a.img")];
    let report = record_pattern(
        &targets,
        &[
            "--rate",
            "40MB/s",
            "--duration",
            "500ms",
            "--create-size",
            "256M",
        ],
    );
    let recorded = u64_of(&report, "stream_bytes");
    let overdue = u64_of(&report, "overdue_bytes");
    assert_eq!(u64_of(&report, "lost_bytes"), 0, "{report}");
    assert_eq!(recorded + overdue, 20_000_000, "{report}");
}

#[test]
fn verify_checks_each_recording_against_its_own_seed() {
    let scratch = Scratch::new("honest-seeds");
    let targets = vec![scratch.path("a.img"), scratch.path("b.img")];
    record_pattern(&targets, &["--size", "3M", "--create-size", "64M"]);
    record_pattern(&targets, &["--append", "--seed", "7", "--size", "2M"]);
    record_pattern(&targets, &["--append", "--seed", "0x5eed", "--size", "1M"]);

    let output = run(nvrec().args(["--json", "verify"]).args(&targets));
    assert!(output.status.success(), "{}", text(&output));
    let seeds: Vec<u64> = json(&output)["recordings"]
        .as_array()
        .unwrap()
        .iter()
        .map(|recording| u64_of(recording, "pattern_seed"))
        .collect();
    assert_eq!(seeds, [0, 7, 0x5eed]);

    // Asked for one seed, the recordings made with another are named.
    let output = run(nvrec()
        .args(["--json", "verify", "--seed", "7"])
        .args(&targets));
    assert_eq!(output.status.code(), Some(1), "{}", text(&output));
    let good: Vec<bool> = json(&output)["recordings"]
        .as_array()
        .unwrap()
        .iter()
        .map(|recording| recording["good"].as_bool().unwrap())
        .collect();
    assert_eq!(good, [false, true, false]);

    // A damaged chunk is still found when the seed is read from the data. The data area of
    // a 64 MiB member with 128 KiB chunks starts at 2228224 (FORMAT.md, section 3).
    let member = scratch.path("a.img");
    let mut bytes = std::fs::read(&member).unwrap();
    bytes[2228224 + 4096] ^= 0xff;
    std::fs::write(&member, &bytes).unwrap();
    let output = run(nvrec().args(["verify"]).args(&targets));
    assert_eq!(output.status.code(), Some(1), "{}", text(&output));
}

#[test]
fn a_live_recording_is_shown_as_recording_and_nothing_else_writes_its_members() {
    let scratch = Scratch::new("honest-live");
    let targets = vec![scratch.path("a.img"), scratch.path("b.img")];
    let live = nvrec()
        .args([
            "--json", "record", "--source", "pattern", "--rate", "20MB/s",
        ])
        .args(["--ring", "--duration", "60s", "--create-size", "128M"])
        .args(&targets)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    // Wait until the set is there and a checkpoint names the recording.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    let listed = loop {
        let output = run(nvrec().args(["--json", "ls"]).args(&targets));
        if output.status.success() {
            let listed = json(&output);
            if listed["recordings"][0]["state"] == "recording" {
                break listed;
            }
        }
        assert!(
            std::time::Instant::now() < deadline,
            "never shown as recording"
        );
        std::thread::sleep(std::time::Duration::from_millis(100));
    };
    assert_eq!(listed["recordings"][0]["recording_id"], 1);

    let attempts: [&[&str]; 4] = [
        &[
            "record",
            "--source",
            "pattern",
            "--size",
            "1M",
            "--overwrite",
        ],
        &["record", "--source", "pattern", "--size", "1M", "--append"],
        &[
            "record",
            "--source",
            "pattern",
            "--size",
            "1M",
            "--overwrite",
            "--force",
        ],
        &["write", "--size", "1M", "--force"],
    ];
    for args in attempts {
        let output = run(nvrec().args(args).arg(&targets[1]));
        assert_eq!(output.status.code(), Some(3), "{args:?}: {}", text(&output));
        assert!(
            text(&output).contains("recording that is running"),
            "{args:?}: {}",
            text(&output)
        );
    }
    // Ctrl-C ends the live recording cleanly.
    // SAFETY: a plain signal to the child this test started.
    unsafe { libc::kill(live.id() as i32, libc::SIGINT) };
    let output = live.wait_with_output().unwrap();
    assert!(output.status.success(), "{}", text(&output));
    let report = json(&output);
    assert_eq!(report["outcome"], "stopped", "{report}");
    let output = run(nvrec().args(["--json", "verify"]).args(&targets));
    assert!(output.status.success(), "{}", text(&output));
    assert_eq!(
        json(&output)["recordings"][0]["payload_bytes"],
        report["stream_bytes"]
    );
    // What the refused runs saw was the live recording's; they wrote nothing of their own.
    let listed = json(&run(nvrec().args(["--json", "ls"]).args(&targets)));
    assert_eq!(listed["recordings"].as_array().unwrap().len(), 1);
    assert_eq!(listed["recordings"][0]["state"], "complete (ring)");
}
