//! Reports that tell the truth: loss accounting at any rate, each recording verified against
//! its own seed, a live recording shown as recording and never written by another run.

mod common;

use common::*;
use std::path::PathBuf;

/// What this file's slowest tests, kept for the full run (`NVREC_FULL_TESTS=1`), cover.
const SLOW: &str = "what a live recording's members are shown as, over seconds of recording";

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

/// A source far faster than the drives into a target that fills, on loop devices: however
/// far it ran ahead, the recording ends full (exit 5) with its entry closed, and recorded,
/// lost in the stream, lost past its end and not recorded add up to what the source gave,
/// each loss with its cause. (Before, the entry claimed more lost than the stream held and
/// was never written: an internal error, exit 1.)
#[test]
fn a_full_target_under_any_overload_ends_full_with_every_loss_counted() {
    let (Some(first), Some(second)) = (LoopDevice::new(96 << 20), LoopDevice::new(96 << 20)) else {
        return;
    };
    let targets = vec![first.device.clone(), second.device.clone()];
    for (rate, extra) in [("40GB/s", "--overwrite"), ("400GB/s", "--overwrite")] {
        let output = run(nvrec()
            .args(["--json", "record", "--source", "pattern", "--rate", rate])
            .args(["--buffer", "16M", extra])
            .args(&targets));
        let report = json(&output);
        assert_eq!(output.status.code(), Some(5), "{rate}: {}", text(&output));
        assert_eq!(report["outcome"], "target_full", "{report}");
        assert!(report["error"].is_null(), "{report}");
        let recorded = u64_of(&report, "stream_bytes");
        let lost = u64_of(&report, "lost_bytes");
        let past_end = u64_of(&report, "lost_past_end_bytes");
        let by_cause = &report["lost_by_cause"];
        assert_eq!(
            u64_of(by_cause, "no_buffer_bytes") + u64_of(by_cause, "behind_rate_bytes"),
            lost + past_end,
            "every loss has its cause: {report}"
        );
        assert!(
            lost + past_end > recorded,
            "the source ran far ahead: {report}"
        );
        let output = run(nvrec().args(["--json", "ls"]).args(&targets));
        let listed = &json(&output)["recordings"][0];
        assert_eq!(listed["state"], "complete", "{listed}");
        assert_eq!(u64_of(listed, "lost_bytes"), lost, "{listed}");
        assert_eq!(
            u64_of(listed, "stream_len_bytes"),
            recorded + lost,
            "{listed}"
        );
        let output = run(nvrec().args(["--json", "verify"]).args(&targets));
        assert!(output.status.success(), "{}", text(&output));
        assert_eq!(u64_of(&json(&output)["recordings"][0], "lost_bytes"), lost);
    }
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
    if nvrec_testkit::kept_for_full_run(SLOW) {
        return;
    }
    let scratch = Scratch::new("honest-live");
    let targets = vec![scratch.path("a.img"), scratch.path("b.img")];
    live_recording_is_locked(&targets, &["--create-size", "128M"], 1);
    // A recording added to the set holds its members as the first did (its recovery of
    // the set once gave the lock up).
    live_recording_is_locked(&targets, &["--append"], 2);
}

/// Starts a ring recording `id` on `targets` with `extra`, checks that while it runs `ls`
/// shows it as recording and every other run that would write its members is refused,
/// then stops it and checks it is whole and alone.
fn live_recording_is_locked(targets: &[PathBuf], extra: &[&str], id: u32) {
    let live = nvrec()
        .args([
            "--json", "record", "--source", "pattern", "--rate", "20MB/s",
        ])
        .args(["--ring", "--duration", "60s"])
        .args(extra)
        .args(targets)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    // Wait until the set is there and a checkpoint names the recording.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    let index = id as usize - 1;
    let listed = loop {
        let output = run(nvrec().args(["--json", "ls"]).args(targets));
        if output.status.success() {
            let listed = json(&output);
            // From its entry on, before its first checkpoint too, it is the one recording:
            // never shown as crashed, and an earlier one never shown as running.
            let states: Vec<(u64, String)> = listed["recordings"]
                .as_array()
                .unwrap()
                .iter()
                .map(|r| {
                    let state = r["state"].as_str().unwrap_or("").to_string();
                    (r["recording_id"].as_u64().unwrap_or(0), state)
                })
                .collect();
            for (listed_id, state) in &states {
                let live = *listed_id == u64::from(id);
                assert!(
                    live == (state == "recording"),
                    "recording {listed_id} listed as {state} while {id} runs: {states:?}"
                );
            }
            if listed["recordings"][index]["state"] == "recording" {
                break listed;
            }
        }
        assert!(
            std::time::Instant::now() < deadline,
            "never shown as recording"
        );
        std::thread::sleep(std::time::Duration::from_millis(100));
    };
    assert_eq!(listed["recordings"][index]["recording_id"], id);

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
    // Still shown as recording after all that.
    let listed = json(&run(nvrec().args(["--json", "ls"]).args(targets)));
    assert_eq!(listed["recordings"][index]["state"], "recording");
    // Ctrl-C ends the live recording cleanly.
    // SAFETY: a plain signal to the child this test started.
    unsafe { libc::kill(live.id() as i32, libc::SIGINT) };
    let output = live.wait_with_output().unwrap();
    assert!(output.status.success(), "{}", text(&output));
    let report = json(&output);
    assert_eq!(report["outcome"], "stopped", "{report}");
    let output = run(nvrec()
        .args(["--json", "verify", "--recording", &id.to_string()])
        .args(targets));
    assert!(output.status.success(), "{}", text(&output));
    assert_eq!(
        json(&output)["recordings"][0]["payload_bytes"],
        report["stream_bytes"]
    );
    // What the refused runs saw was the live recording's; they wrote nothing of their own.
    let listed = json(&run(nvrec().args(["--json", "ls"]).args(targets)));
    assert_eq!(listed["recordings"].as_array().unwrap().len(), id as usize);
    assert_eq!(listed["recordings"][index]["state"], "complete (ring)");
}
