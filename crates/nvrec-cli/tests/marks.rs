//! End-to-end tests of marks (format 1.7): `nvrec mark` against a running ring recording,
//! the signal and datagram triggers, a recorder killed with SIGKILL during a mark, marks
//! through `repair`, release, and what is refused.

mod common;

use common::*;
use std::path::PathBuf;
use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

/// What this file's slowest tests, kept for the full run (`NVREC_FULL_TESTS=1`), cover.
const SLOW: &str = "marks end to end: kill -9 during one, repair, a damaged entry, release, the signal and UDP triggers, marks over laps";

/// A ring recording of the pattern (seed 5) at `rate` onto `targets`, `extra` added.
fn start_ring(targets: &[PathBuf], rate: &str, extra: &[&str]) -> Child {
    nvrec()
        .args([
            "--json", "record", "--ring", "--source", "pattern", "--seed", "5",
        ])
        .args(["--rate", rate, "--sync-interval", "100ms"])
        .args(extra)
        .args(targets)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap()
}

/// Asks the recorder on `targets` for a mark; waits until the recorder's socket is there.
fn mark(targets: &[PathBuf], args: &[&str]) -> std::process::Output {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let output = run(nvrec().arg("mark").args(args).args(targets));
        let waiting =
            text(&output).contains("no recording runs") || text(&output).contains("not an nvrec");
        if !waiting || Instant::now() > deadline {
            return output;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

fn ls(targets: &[PathBuf]) -> serde_json::Value {
    let output = run(nvrec().args(["--json", "ls"]).args(targets));
    json(&output)
}

fn verify_mark(targets: &[PathBuf], id: u64) -> std::process::Output {
    run(nvrec()
        .args(["verify", "--mark", &id.to_string()])
        .args(targets))
}

#[test]
fn a_mark_asked_of_a_running_ring_outlives_its_laps_and_reads_whole() {
    if nvrec_testkit::kept_for_full_run(SLOW) {
        return;
    }
    let scratch = Scratch::new("marks-running");
    let targets = vec![scratch.path("a.img"), scratch.path("b.img")];
    // Two members of 32 MiB: a lap of 64 MiB is some 1.6 s at 40 MB/s; 6 s is over 3 laps.
    let child = start_ring(
        &targets,
        "40MB/s",
        &["--duration", "6s", "--create-size", "32M"],
    );
    // A second of input recorded: the before-window is there.
    wait_recorded(&targets, 40_000_000);
    let output = mark(
        &targets,
        &["--before", "200ms", "--after", "200ms", "--label", "one"],
    );
    assert!(output.status.success(), "{}", text(&output));
    assert!(
        text(&output).contains("mark 2 of recording 1 taken"),
        "{}",
        text(&output)
    );
    let output = child.wait_with_output().unwrap();
    assert!(output.status.success(), "{}", text(&output));
    let report = json(&output);
    assert_eq!(report["lost_bytes"], 0, "{report}");
    assert_eq!(report["marks"][0]["mark_id"], 2, "{report}");
    let laps: Vec<u64> = report["members"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["laps"].as_u64().unwrap())
        .collect();
    assert!(
        laps.iter().all(|&l| l >= 3),
        "the ring went round: {laps:?}"
    );

    let listed = ls(&targets);
    let marks = listed["marks"].as_array().unwrap();
    assert_eq!(marks.len(), 1, "{listed}");
    assert_eq!(marks[0]["state"], "kept");
    assert_eq!(marks[0]["label"], "one");
    assert_eq!(marks[0]["recording_id"], 1);
    let bytes = marks[0]["bytes"].as_u64().unwrap();
    // 400 ms at 40 MB/s, less what the ring's history rounds: about 16 MB.
    assert!((10_000_000..30_000_000).contains(&bytes), "{listed}");
    let output = verify_mark(&targets, 2);
    assert!(output.status.success(), "{}", text(&output));
    assert!(
        text(&output).contains("pattern checked"),
        "{}",
        text(&output)
    );
    let output = run(nvrec().arg("verify").args(&targets));
    assert!(output.status.success(), "{}", text(&output));
    let replayed = scratch.path("mark.bin");
    let output = run(nvrec()
        .args(["replay", "--mark", "2", "--output"])
        .arg(&replayed)
        .args(&targets));
    assert!(output.status.success(), "{}", text(&output));
    assert_eq!(std::fs::metadata(&replayed).unwrap().len(), bytes);
}

#[test]
fn killed_during_a_mark_the_recorder_leaves_it_listed_once_and_whole_after_repair() {
    if nvrec_testkit::kept_for_full_run(SLOW) {
        return;
    }
    let scratch = Scratch::new("marks-kill9");
    let targets = vec![scratch.path("a.img")];
    for (round, kill_after_ms) in [1500u64, 1900, 2600].into_iter().enumerate() {
        let extra: Vec<&str> = match round {
            0 => vec!["--create-size", "128M"],
            _ => vec!["--append"],
        };
        let mut child = start_ring(&targets, "10MB/s", &extra);
        wait_recorded(&targets, 10_000_000);
        let output = mark(
            &targets,
            &["--before", "300ms", "--after", "3s", "--label", "cut"],
        );
        assert!(output.status.success(), "round {round}: {}", text(&output));
        // So far into the 3 s after-window (at 10 MB/s: 10 kB a millisecond).
        let at = wait_recorded(&targets, 0);
        wait_recorded(&targets, at + (kill_after_ms - 1000) * 10_000);
        child.kill().unwrap(); // SIGKILL, in the mark's after-window
        child.wait().unwrap();
        wait_unlocked(&targets);
        let output = run(nvrec().arg("repair").args(&targets));
        assert!(output.status.success(), "round {round}: {}", text(&output));
        let listed = ls(&targets);
        let marks = listed["marks"].as_array().unwrap();
        assert_eq!(marks.len(), round + 1, "each mark listed once: {listed}");
        for mark in marks {
            assert_eq!(mark["state"], "kept (cut by a crash)", "{listed}");
            let id = mark["mark_id"].as_u64().unwrap();
            let output = verify_mark(&targets, id);
            assert!(
                output.status.success(),
                "round {round}, mark {id}: {}",
                text(&output)
            );
        }
        let output = run(nvrec().arg("verify").args(&targets));
        assert!(output.status.success(), "round {round}: {}", text(&output));
    }
}

#[test]
fn a_mark_whose_entry_is_damaged_on_one_member_comes_back_with_repair() {
    if nvrec_testkit::kept_for_full_run(SLOW) {
        return;
    }
    let scratch = Scratch::new("marks-repair");
    let targets = vec![scratch.path("a.img"), scratch.path("b.img")];
    let child = start_ring(
        &targets,
        "40MB/s",
        &["--duration", "2500ms", "--create-size", "32M"],
    );
    wait_recorded(&targets, 8_000_000);
    let output = mark(&targets, &["--before", "100ms", "--after", "100ms"]);
    assert!(output.status.success(), "{}", text(&output));
    assert!(child.wait_with_output().unwrap().status.success());
    // Mark 2's table slot is slot 1: both its copies on member 0 overwritten. (Index area
    // at 4 KiB, two checkpoint slots, then two 4 KiB copies a table slot.)
    let first_copy = 4096 + (2 + 2) * 4096;
    let mut image = std::fs::read(&targets[0]).unwrap();
    image[first_copy..first_copy + 8192].fill(0xa5);
    std::fs::write(&targets[0], &image).unwrap();
    let listed = ls(&targets);
    assert_eq!(
        listed["marks"].as_array().unwrap().len(),
        1,
        "member 1 still holds it"
    );
    assert!(
        !listed["metadata_damage"].as_array().unwrap().is_empty(),
        "{listed}"
    );
    let output = run(nvrec().arg("repair").args(&targets));
    assert!(output.status.success(), "{}", text(&output));
    let listed = ls(&targets);
    assert!(
        listed["metadata_damage"].as_array().unwrap().is_empty(),
        "{listed}"
    );
    assert_eq!(listed["marks"][0]["state"], "kept", "{listed}");
    // Member 1 alone (member 0 left out) still reads the mark: both hold it again.
    let output = verify_mark(&targets, 2);
    assert!(output.status.success(), "{}", text(&output));
    let image = std::fs::read(&targets[0]).unwrap();
    assert!(image[first_copy..first_copy + 8192]
        .iter()
        .any(|&b| b != 0xa5));
}

#[test]
fn a_datagram_and_a_signal_take_marks_labelled_by_what_sent_them() {
    if nvrec_testkit::kept_for_full_run(SLOW) {
        return;
    }
    let scratch = Scratch::new("marks-triggers");
    let targets = vec![scratch.path("a.img")];
    let port = std::net::UdpSocket::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let address = format!("127.0.0.1:{port}");
    let child = start_ring(
        &targets,
        "40MB/s",
        &[
            "--duration",
            "3s",
            "--create-size",
            "64M",
            "--mark-udp",
            &address,
            "--mark-on-signal",
            "--mark-before",
            "100ms",
            "--mark-after",
            "100ms",
        ],
    );
    wait_recorded(&targets, 8_000_000);
    let sender = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
    sender.send_to(b"door open\n", &address).unwrap();
    // The first mark closed (its after-window over): the signal's is a mark of its own.
    wait_for_mark_state(&targets, "kept");
    // SAFETY: a signal to the child this test started, which is still running.
    unsafe { libc::kill(child.id() as i32, libc::SIGUSR1) };
    let output = child.wait_with_output().unwrap();
    assert!(output.status.success(), "{}", text(&output));
    let report = json(&output);
    let labels: Vec<&str> = report["marks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["label"].as_str().unwrap())
        .collect();
    assert_eq!(labels, ["door open", "signal"], "{report}");
    let listed = ls(&targets);
    assert_eq!(listed["marks"].as_array().unwrap().len(), 2, "{listed}");
    for id in [2, 3] {
        let output = verify_mark(&targets, id);
        assert!(output.status.success(), "mark {id}: {}", text(&output));
    }
}

#[test]
fn what_marks_cannot_do_is_refused_with_exit_2() {
    let scratch = Scratch::new("marks-refused");
    let targets = vec![scratch.path("a.img")];
    // Bad options: nothing created.
    let output = run(nvrec()
        .args(["record", "--ring", "--source", "pattern", "--size", "1M"])
        .args(["--max-marked", "0%", "--create-size", "8M"])
        .args(&targets));
    assert_eq!(output.status.code(), Some(2), "{}", text(&output));
    assert!(!targets[0].exists());
    let output = run(nvrec()
        .args([
            "record",
            "--source",
            "pattern",
            "--size",
            "1M",
            "--mark-udp",
            "127.0.0.1:9",
        ])
        .args(["--create-size", "8M"])
        .args(&targets));
    assert_eq!(output.status.code(), Some(2), "{}", text(&output));
    assert!(!targets[0].exists());

    // A linear recording keeps no marks.
    let child = nvrec()
        .args([
            "record",
            "--source",
            "pattern",
            "--rate",
            "20MB/s",
            "--duration",
            "2s",
        ])
        .args(["--create-size", "64M", "--sync-interval", "100ms"])
        .args(&targets)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    wait_recorded(&targets, 1);
    let output = mark(&targets, &["--before", "100ms", "--after", "100ms"]);
    assert_eq!(output.status.code(), Some(2), "{}", text(&output));
    assert!(text(&output).contains("ring"), "{}", text(&output));
    let mut child = child;
    assert!(child.wait().unwrap().success());

    // No recorder at all, and marks that are not there.
    let output = run(nvrec().args(["mark", "--before", "1s"]).args(&targets));
    assert_eq!(output.status.code(), Some(2), "{}", text(&output));
    assert!(
        text(&output).contains("no recording runs"),
        "{}",
        text(&output)
    );
    let output = run(nvrec()
        .args(["replay", "--mark", "9", "--output", "/dev/null"])
        .args(&targets));
    assert_eq!(output.status.code(), Some(2), "{}", text(&output));
    assert!(
        text(&output).contains("mark 9 is not on this volume set"),
        "{}",
        text(&output)
    );
    let output = run(nvrec().args(["mark", "--release", "9"]).args(&targets));
    assert_eq!(output.status.code(), Some(2), "{}", text(&output));
}

#[test]
fn a_released_mark_is_refused_with_when_and_the_ring_takes_its_slots_back() {
    if nvrec_testkit::kept_for_full_run(SLOW) {
        return;
    }
    let scratch = Scratch::new("marks-release");
    let targets = vec![scratch.path("a.img")];
    let child = start_ring(
        &targets,
        "40MB/s",
        &["--duration", "4s", "--create-size", "32M"],
    );
    wait_recorded(&targets, 8_000_000);
    let output = mark(&targets, &["--before", "100ms", "--after", "100ms"]);
    assert!(output.status.success(), "{}", text(&output));
    wait_for_mark_state(&targets, "kept");
    // Released through the running recorder: its slots go back to the ring.
    let output = mark(&targets, &["--release", "2"]);
    assert!(output.status.success(), "{}", text(&output));
    assert!(text(&output).contains("released"), "{}", text(&output));
    let output = child.wait_with_output().unwrap();
    assert!(output.status.success(), "{}", text(&output));
    let listed = ls(&targets);
    assert_eq!(listed["marks"][0]["state"], "released", "{listed}");
    let output = verify_mark(&targets, 2);
    assert_eq!(output.status.code(), Some(2), "{}", text(&output));
    assert!(text(&output).contains("was released"), "{}", text(&output));
    let output = run(nvrec().arg("verify").args(&targets));
    assert!(output.status.success(), "{}", text(&output));
    // Released again, with no recorder: refused, it is released already.
    let output = run(nvrec().args(["mark", "--release", "2"]).args(&targets));
    assert_eq!(output.status.code(), Some(2), "{}", text(&output));
}

/// Waits (at most 20 s) until `ls` lists a mark in `state`.
fn wait_for_mark_state(targets: &[PathBuf], state: &str) -> serde_json::Value {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let listed = ls(targets);
        let found = listed["marks"]
            .as_array()
            .is_some_and(|marks| marks.iter().any(|m| m["state"] == state));
        if found {
            return listed;
        }
        assert!(Instant::now() < deadline, "no mark {state}: {listed}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// A ring killed after a mark closed, then started again on its set (`--append --ring`,
/// as a recorder restarted after a crash): the new ring goes round several times over the
/// old one's slots, jumping over the mark's, so the mark reads whole; `ls` says the old
/// ring was written over; a linear recording added afterwards keeps out of the mark too.
#[test]
fn a_ring_started_again_after_a_crash_keeps_the_marks_of_the_one_before() {
    if nvrec_testkit::kept_for_full_run(SLOW) {
        return;
    }
    let scratch = Scratch::new("marks-restart");
    let targets = vec![scratch.path("a.img")];
    let mut child = start_ring(&targets, "40MB/s", &["--create-size", "48M"]);
    // The recording is there once `ls` lists it.
    let deadline = Instant::now() + Duration::from_secs(20);
    while ls(&targets)["recordings"][0]["state"] != "recording" {
        assert!(Instant::now() < deadline, "the ring never started");
        std::thread::sleep(Duration::from_millis(50));
    }
    let output = mark(
        &targets,
        &["--before", "100ms", "--after", "100ms", "--label", "keep"],
    );
    assert!(output.status.success(), "{}", text(&output));
    wait_for_mark_state(&targets, "kept");
    child.kill().unwrap(); // SIGKILL
    child.wait().unwrap();
    wait_unlocked(&targets);
    let output = verify_mark(&targets, 2);
    assert!(output.status.success(), "{}", text(&output));

    let again = start_ring(&targets, "40MB/s", &["--append", "--duration", "4s"]);
    let output = again.wait_with_output().unwrap();
    assert!(output.status.success(), "{}", text(&output));
    let report = json(&output);
    assert!(
        report["members"][0]["laps"].as_u64().unwrap() >= 2,
        "the new ring went round: {report}"
    );
    let output = verify_mark(&targets, 2);
    assert!(output.status.success(), "{}", text(&output));
    let output = run(nvrec().args(["verify", "--recording", "3"]).args(&targets));
    assert!(output.status.success(), "{}", text(&output));
    let output = run(nvrec().arg("ls").args(&targets));
    let said = text(&output);
    assert_eq!(output.status.code(), Some(1), "{said}");
    assert!(
        said.contains("OVERWRITTEN in part: recording 3 wrote over it"),
        "{said}"
    );
    assert!(!said.contains("OVERWRITTEN: "), "the mark is whole: {said}");

    // Linear, from the ring's write point on: whole, or full where the mark (or the
    // member's end) comes first.
    let output = run(nvrec()
        .args([
            "--json", "record", "--source", "pattern", "--append", "--size", "40M",
        ])
        .args(&targets));
    let status = output.status.code();
    assert!(status == Some(0) || status == Some(5), "{}", text(&output));
    let output = verify_mark(&targets, 2);
    assert!(output.status.success(), "{}", text(&output));
    let output = run(nvrec().args(["verify", "--recording", "4"]).args(&targets));
    assert!(output.status.success(), "{}", text(&output));
}
