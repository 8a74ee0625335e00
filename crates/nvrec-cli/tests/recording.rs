//! End-to-end tests of recordings: record, ls, replay, verify, on files and loop devices.

mod common;

use common::*;
use std::io::Write;
use std::path::PathBuf;
use std::process::{Command, Output};
use std::time::Duration;

/// What this file's slowest tests, kept for the full run (`NVREC_FULL_TESTS=1`), cover.
const SLOW: &str =
    "rings over many laps and members, paced, stopped and killed; overload counted and marked";

fn replay(targets: &[PathBuf], extra: &[&str]) -> Output {
    run(nvrec().arg("replay").args(extra).args(targets))
}

fn files(scratch: &Scratch, names: &[&str]) -> Vec<PathBuf> {
    names.iter().map(|name| scratch.path(name)).collect()
}

#[test]
fn a_stdin_stream_comes_back_byte_exact_on_one_and_three_members() {
    for names in [&["a.img"][..], &["a.img", "b.img", "c.img"][..]] {
        let scratch = Scratch::new("roundtrip");
        let targets = files(&scratch, names);
        // Not a whole number of payloads: the last chunk is short, never padded into the stream.
        let data = noise(37 * 1_000_000 + 12_345, 3);
        let output = record_stdin(
            &targets,
            &data,
            &["--create-size", "64M", "--label", "trip"],
        );
        assert!(output.status.success(), "{}", text(&output));
        let report = json(&output);
        assert_eq!(report["outcome"], "source_ended");
        assert_eq!(report["stream_bytes"], data.len());
        assert_eq!(
            report["members"].as_array().map(Vec::len),
            Some(names.len())
        );
        // Input that can wait is written in whole I/Os of 8 chunks: only the last data
        // I/O is short, and the end marker is one chunk of its own.
        let chunk_count = report["chunk_count"].as_u64().unwrap();
        let io_count: u64 = report["members"]
            .as_array()
            .unwrap()
            .iter()
            .map(|member| member["io_count"].as_u64().unwrap())
            .sum();
        assert_eq!(io_count, (chunk_count - 1).div_ceil(8) + 1, "{report}");
        let output = replay(&targets, &[]);
        assert!(output.status.success(), "{}", text(&output));
        assert!(
            output.stdout == data,
            "replay differs from what was recorded ({} members)",
            names.len()
        );
        let output = run(nvrec().arg("verify").args(&targets));
        assert!(output.status.success(), "{}", text(&output));
        let output = run(nvrec().args(["--json", "ls"]).args(&targets));
        assert!(output.status.success(), "{}", text(&output));
        let listing = json(&output);
        assert_eq!(listing["recordings"][0]["state"], "complete");
        assert_eq!(listing["recordings"][0]["bytes"], data.len());
        assert_eq!(listing["recordings"][0]["name"], "trip");
        assert_eq!(
            listing["members"].as_array().map(Vec::len),
            Some(names.len())
        );
    }
}

#[test]
fn a_stream_onto_three_loop_devices_comes_back_byte_exact() {
    let (Some(a), Some(b), Some(c)) = (
        LoopDevice::new(64 << 20),
        LoopDevice::new(64 << 20),
        LoopDevice::new(64 << 20),
    ) else {
        return;
    };
    let targets = vec![a.device.clone(), b.device.clone(), c.device.clone()];
    let data = noise(100 << 20, 5);
    let output = record_stdin(&targets, &data, &[]);
    assert!(output.status.success(), "{}", text(&output));
    let output = replay(&targets, &[]);
    assert!(output.status.success(), "{}", text(&output));
    assert!(output.stdout == data, "replay from loop devices differs");
    assert!(run(nvrec().arg("verify").args(&targets)).status.success());
}

#[test]
fn after_kill_9_everything_acknowledged_comes_back_and_the_recording_is_interrupted() {
    let scratch = Scratch::new("kill9");
    let targets = files(&scratch, &["a.img", "b.img"]);
    let data = noise(24 << 20, 9);
    // Everything sent more than a few sync intervals ago is acknowledged.
    record_then_kill(
        &targets,
        &["--sync-interval", "100ms", "--create-size", "64M"],
        &data,
        Duration::from_millis(20),
        KillWhen::Durable((data.len() - CHUNK) as u64),
    );
    let output = run(nvrec().args(["--json", "ls"]).args(&targets));
    let listing = json(&output);
    assert_eq!(
        listing["recordings"][0]["state"], "interrupted",
        "{listing}"
    );
    let output = replay(&targets, &[]);
    assert!(output.status.success(), "{}", text(&output));
    let recovered = &output.stdout;
    // Everything but the payload still being filled (less than one chunk) was acknowledged.
    assert!(
        recovered.len() + 131072 >= data.len(),
        "recovered only {} of {} bytes",
        recovered.len(),
        data.len()
    );
    assert_eq!(
        recovered[..],
        data[..recovered.len()],
        "the recovered prefix equals what was sent"
    );
    assert!(run(nvrec().arg("verify").args(&targets)).status.success());
    // The set takes a new recording after recovery.
    let output = record_stdin(&targets, &noise(1 << 20, 1), &["--append"]);
    assert!(output.status.success(), "{}", text(&output));
    assert_eq!(json(&output)["recording_id"], 2);
    let output = replay(&targets, &["--recording", "1"]);
    assert_eq!(output.stdout.len(), recovered.len());
}

#[test]
fn a_ring_returns_exactly_the_newest_data_in_order() {
    let scratch = Scratch::new("ring");
    let targets = files(&scratch, &["a.img", "b.img"]);
    let data = noise(60 << 20, 13);
    // Round-robin, so that both members lap whatever their speeds (adaptive striping may
    // rightly give a member that started slow little to do).
    let output = record_stdin(
        &targets,
        &data,
        &["--ring", "--stripe", "round-robin", "--create-size", "12M"],
    );
    assert!(output.status.success(), "{}", text(&output));
    let report = json(&output);
    assert!(
        report["members"][0]["laps"].as_u64().unwrap_or(0) >= 2,
        "{report}"
    );
    let output = replay(&targets, &[]);
    assert!(output.status.success(), "{}", text(&output));
    let newest = &output.stdout;
    assert!(
        newest.len() > 4 << 20,
        "a ring of 2 x 12 MiB keeps more than 4 MiB, got {}",
        newest.len()
    );
    assert!(
        newest[..] == data[data.len() - newest.len()..],
        "the ring holds the newest data, in order"
    );
    let output = run(nvrec().args(["--json", "ls"]).args(&targets));
    assert_eq!(json(&output)["recordings"][0]["ring"], true);
    // With trim too, on a file: holes are punched ahead of the write point.
    let trimmed = files(&scratch, &["t.img"]);
    let output = record_stdin(
        &trimmed,
        &data,
        &["--ring", "--trim", "--create-size", "12M"],
    );
    assert!(output.status.success(), "{}", text(&output));
    let output = replay(&trimmed, &[]);
    assert!(output.stdout[..] == data[data.len() - output.stdout.len()..]);
}

#[test]
fn what_a_quiet_pipe_sent_is_written_without_waiting_for_more() {
    // Input that pauses mid-chunk and mid-I/O: after a sync interval without a byte, what
    // came goes out (a short chunk), so that a crash during the pause loses none of it.
    let scratch = Scratch::new("quiet");
    let targets = files(&scratch, &["a.img"]);
    let data = noise((3 << 20) + 1000, 31);
    record_then_kill(
        &targets,
        &["--sync-interval", "200ms", "--create-size", "64M"],
        &data,
        Duration::from_millis(0),
        KillWhen::Durable(data.len() as u64),
    );
    let output = replay(&targets, &[]);
    assert!(output.status.success(), "{}", text(&output));
    assert_eq!(
        output.stdout.len(),
        data.len(),
        "every byte sent comes back"
    );
    assert!(output.stdout == data);
    // A recording that goes on after the pause continues the stream where it left off.
    let (child, mut stdin) =
        json_stdin_recorder(&targets, &["--append", "--sync-interval", "100ms"]);
    let more = noise(1 << 20, 32);
    stdin.write_all(&more[..5000]).unwrap();
    // The pipe goes quiet: its 5000 bytes go out as a short chunk, checkpointed.
    wait_recorded(&targets, 5000);
    stdin.write_all(&more[5000..]).unwrap();
    drop(stdin);
    let output = child.wait_with_output().unwrap();
    assert!(output.status.success(), "{}", text(&output));
    let output = replay(&targets, &["--recording", "2"]);
    assert!(output.status.success(), "{}", text(&output));
    assert!(
        output.stdout == more,
        "the short chunk and the rest, in order"
    );
    assert!(run(nvrec().arg("verify").args(&targets)).status.success());
}

#[test]
fn a_pipe_quiet_for_longer_than_the_member_timeout_retires_no_member() {
    // The writer waits for a quiet pipe up to a sync interval, longer here than the member
    // timeout. Writes that completed while it waited are no member's timeout: before this
    // was fixed, both members were retired one after the other and the recording failed.
    let scratch = Scratch::new("quiet-timeout");
    let targets = files(&scratch, &["a.img", "b.img"]);
    let extra = ["--stripe", "round-robin", "--sync-interval", "3s"];
    let more = ["--member-timeout", "1s", "--create-size", "64M"];
    let (child, mut stdin) = json_stdin_recorder(&targets, &[&extra[..], &more[..]].concat());
    let data = noise(6 << 20, 33);
    stdin.write_all(&data[..(3 << 20) + 1000]).unwrap();
    // The input's own pause, the thing under test: more than a sync interval, three
    // member timeouts.
    std::thread::sleep(Duration::from_secs(4));
    // A recorder that failed meanwhile has closed the pipe: its report says why.
    let _ = stdin.write_all(&data[(3 << 20) + 1000..]);
    drop(stdin);
    let output = child.wait_with_output().unwrap();
    assert!(output.status.success(), "{}", text(&output));
    let report = json(&output);
    assert_eq!(report["degraded"], false, "{report}");
    assert_eq!(report["retirements"], serde_json::json!([]), "{report}");
    let replayed = replay(&targets, &[]);
    assert!(replayed.stdout == data, "every byte, in order");
}

#[test]
fn after_kill_9_a_ring_comes_back_up_to_what_was_acknowledged() {
    if nvrec_testkit::kept_for_full_run(SLOW) {
        return;
    }
    // A small ring laps many times between timed checkpoints (the interval is long here):
    // the writer checkpoints every half lap, and recovery's forward search goes on at slot
    // 0 where a lap ends, so that the newest data comes back however the crash falls.
    // With one write in flight, a sealed buffer often waits for the drives when the input
    // pauses: it must go out then, not wait for the pipe's next byte (the quiet rule holds
    // only the buffer being filled).
    let scratch = Scratch::new("kill9-ring");
    let rounds: [(usize, &[&str]); 3] = [(29, &[]), (35, &[]), (35, &["--queue-depth", "1"])];
    for (round, (mib, more)) in rounds.into_iter().enumerate() {
        let targets = files(
            &scratch,
            &[&format!("a{round}.img"), &format!("b{round}.img")],
        );
        let data = noise(mib << 20, 21 + round as u64);
        record_then_kill(
            &targets,
            &[
                "--ring",
                "--stripe",
                "round-robin",
                "--sync-interval",
                "60s",
                "--create-size",
                "12M",
            ]
            .iter()
            .chain(more)
            .copied()
            .collect::<Vec<_>>(),
            &data,
            Duration::from_millis(10),
            // Every whole chunk of the input, the one being filled aside.
            KillWhen::OnTargets(data.len() as u64 - 131072),
        );
        let output = replay(&targets, &[]);
        assert!(output.status.success(), "{}", text(&output));
        let recovered = &output.stdout;
        assert!(recovered.len() > 4 << 20, "{}", recovered.len());
        // The newest data, ending where the input ended but for the chunk being filled.
        let end = (0..=131072usize)
            .map(|short| data.len() - short)
            .find(|&end| data[end - recovered.len()..end] == recovered[..]);
        assert!(
            end.is_some(),
            "round {round}: {} bytes recovered are not the newest of {}",
            recovered.len(),
            data.len()
        );
    }
}

#[test]
fn a_paced_ring_with_writes_of_every_size_keeps_every_lap_whole() {
    if nvrec_testkit::kept_for_full_run(SLOW) {
        return;
    }
    // A paced source sends what it has when the targets are about to idle, so writes of
    // one to eight chunks alternate and laps end in the middle of a write. Each lap must
    // still fill every slot in order: what is left behind at the end of a lap would be an
    // older lap's data among the newest (the merge reports it out of order).
    let scratch = Scratch::new("ring-paced");
    for (round, rate) in ["800MB/s", "1500MB/s"].iter().enumerate() {
        let targets = files(
            &scratch,
            &[&format!("a{round}.img"), &format!("b{round}.img")],
        );
        let output = run(nvrec()
            .args(["--json", "record", "--source", "pattern", "--rate", rate])
            .args(["--duration", "1s", "--ring", "--stripe", "round-robin"])
            .args(["--create-size", "12M"])
            .args(&targets));
        assert!(output.status.success(), "{}", text(&output));
        // What a slow build loses to the pace is counted and marked; it does not matter here.
        let report = json(&output);
        let members = report["members"].as_array().unwrap();
        assert!(
            members
                .iter()
                .all(|m| m["laps"].as_u64().unwrap() >= 2 && m["io_count"] != m["chunk_count"]),
            "every member laps, with writes of more than one chunk: {report}"
        );
        let output = run(nvrec().args(["--json", "verify"]).args(&targets));
        assert!(output.status.success(), "{}", text(&output));
        let output = replay(&targets, &[]);
        assert!(output.status.success(), "{}", text(&output));
        assert!(output.stdout.len() > 4 << 20, "{}", output.stdout.len());
    }
}

#[test]
fn adaptive_striping_under_light_load_keeps_a_rings_members_lapping_together() {
    // Paced well below what the targets take, every member is idle when a write comes: the
    // least advanced takes it, so that the ring keeps both members' worth of data (a member
    // left behind would hold only chunks older than the other's oldest).
    let scratch = Scratch::new("ring-adaptive");
    let targets = files(&scratch, &["a.img", "b.img"]);
    let output = run(nvrec()
        .args([
            "--json", "record", "--source", "pattern", "--rate", "200MB/s",
        ])
        .args(["--duration", "1s", "--ring", "--stripe", "adaptive"])
        .args(["--create-size", "12M"])
        .args(&targets));
    assert!(output.status.success(), "{}", text(&output));
    let report = json(&output);
    let counts: Vec<u64> = report["members"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["chunk_count"].as_u64().unwrap())
        .collect();
    // Within a fifth: on a loaded machine a member's last write may still be in flight when
    // the next comes (235 against 211 chunks, 10 % apart, beside another test's recording);
    // a member left behind takes a small share.
    let (low, high) = (counts[0].min(counts[1]), counts[0].max(counts[1]));
    assert!(low * 5 >= high * 4, "members within 20 %: {counts:?}");
    let output = run(nvrec().args(["--json", "verify"]).args(&targets));
    assert!(output.status.success(), "{}", text(&output));
    // Both members' laps survive: more than one member's worth (12 MiB less metadata).
    let output = replay(&targets, &[]);
    assert!(output.status.success(), "{}", text(&output));
    assert!(output.stdout.len() > 14 << 20, "{}", output.stdout.len());
}

#[test]
fn a_full_target_in_linear_mode_stops_cleanly_with_its_own_status() {
    let scratch = Scratch::new("full");
    let targets = files(&scratch, &["a.img"]);
    let output = run(nvrec()
        .args([
            "--json",
            "record",
            "--source",
            "pattern",
            "--create-size",
            "16M",
        ])
        .args(&targets));
    assert_eq!(output.status.code(), Some(5), "{}", text(&output));
    let report = json(&output);
    assert_eq!(report["outcome"], "target_full");
    let recorded = report["stream_bytes"].as_u64().unwrap();
    assert!(recorded > 8 << 20);
    let output = run(nvrec().args(["--json", "verify"]).args(&targets));
    assert!(output.status.success(), "{}", text(&output));
    assert_eq!(json(&output)["recordings"][0]["payload_bytes"], recorded);
}

#[test]
fn input_that_outruns_the_target_is_lost_counted_and_marked() {
    if nvrec_testkit::kept_for_full_run(SLOW) {
        return;
    }
    let scratch = Scratch::new("loss");
    let targets = files(&scratch, &["a.img"]);
    // 20 GB/s into a tiny pool and queue: most of it cannot be kept.
    let output = run(nvrec()
        .args([
            "--json", "record", "--source", "pattern", "--rate", "20GB/s", "--size", "1G",
        ])
        .args([
            "--buffer",
            "4M",
            "--queue-depth",
            "1",
            "--create-size",
            "1200M",
        ])
        .args(&targets));
    assert!(output.status.success(), "{}", text(&output));
    let report = json(&output);
    let recorded = report["stream_bytes"].as_u64().unwrap();
    let lost = report["lost_bytes"].as_u64().unwrap();
    assert!(lost > 0, "{report}");
    assert!(report["gap_count"].as_u64().unwrap() > 0);
    assert_eq!(
        recorded + lost,
        1 << 30,
        "every byte is either recorded or counted as lost"
    );
    let output = run(nvrec().args(["--json", "ls"]).args(&targets));
    assert_eq!(
        json(&output)["recordings"][0]["lost_bytes"],
        lost,
        "the loss is written into the recording"
    );
    let output = run(nvrec().args(["--json", "verify"]).args(&targets));
    assert!(output.status.success(), "{}", text(&output));
    assert_eq!(
        json(&output)["recordings"][0]["lost_bytes"],
        lost,
        "the gaps are found in the chunks"
    );

    // As kept: the recorded bytes alone, each gap named with its length and where it ends.
    let kept = scratch.path("kept.bin");
    let output = replay(&targets, &["--json", "--output", kept.to_str().unwrap()]);
    assert!(output.status.success(), "{}", text(&output));
    let report = json(&output);
    assert_eq!(report["zero_filled_bytes"], 0);
    assert_eq!(std::fs::metadata(&kept).unwrap().len(), recorded);
    let gaps = common::replay_gaps(&report);
    assert_eq!(
        gaps.len() as u64,
        report["summary"]["gap_count"].as_u64().unwrap()
    );
    assert_eq!(gaps.iter().map(|(len, _)| len).sum::<u64>(), lost);

    // Zero-filled: every byte at its stream offset, so the recorded bytes are the pattern at
    // their own offsets and each gap is zeros, up to the last chunk recorded.
    let aligned = scratch.path("aligned.bin");
    let output = replay(
        &targets,
        &[
            "--json",
            "--gaps",
            "zero",
            "--output",
            aligned.to_str().unwrap(),
        ],
    );
    assert!(output.status.success(), "{}", text(&output));
    let report = json(&output);
    let data = std::fs::read(&aligned).unwrap();
    let mut expected = vec![0u8; data.len()];
    nvrec::pattern::Pattern::new(0).fill(0, &mut expected);
    let mut zero_filled = 0;
    for &(len, end) in gaps.iter().filter(|&&(_, end)| end <= data.len() as u64) {
        expected[(end - len) as usize..end as usize].fill(0);
        zero_filled += len;
    }
    assert_eq!(report["zero_filled_bytes"], zero_filled);
    assert_eq!(data.len() as u64, recorded + zero_filled);
    assert!(
        data == expected,
        "the zero-filled replay differs from the pattern with zeros in the gaps"
    );
    // Into a file the zeros are holes: the replay takes the space of what was kept, not of
    // what was lost (here most of the stream).
    use std::os::unix::fs::MetadataExt;
    let allocated = std::fs::metadata(&aligned).unwrap().blocks() * 512;
    assert!(
        allocated < recorded + (zero_filled / 2),
        "{allocated} bytes allocated for {recorded} recorded and {zero_filled} zeros"
    );
}

#[test]
fn missing_and_foreign_members_are_named() {
    let scratch = Scratch::new("members");
    let set = files(&scratch, &["a.img", "b.img", "c.img"]);
    assert!(
        record_stdin(&set, &noise(4 << 20, 2), &["--create-size", "16M"])
            .status
            .success()
    );
    let other = files(&scratch, &["x.img"]);
    assert!(
        record_stdin(&other, &noise(1 << 20, 2), &["--create-size", "16M"])
            .status
            .success()
    );
    // One member left out.
    let output = run(nvrec().arg("ls").args(&set[..2]));
    assert_eq!(output.status.code(), Some(1));
    assert!(
        text(&output).contains("member 2: (missing member 2)  MISSING"),
        "{}",
        text(&output)
    );
    let output = run(nvrec().arg("verify").args(&set[..2]));
    assert_eq!(output.status.code(), Some(1), "{}", text(&output));
    assert!(
        text(&output).contains("member 2 is missing"),
        "{}",
        text(&output)
    );
    // A member of another set given instead.
    let mixed = vec![set[0].clone(), set[1].clone(), other[0].clone()];
    let output = run(nvrec().arg("ls").args(&mixed));
    assert_eq!(output.status.code(), Some(1));
    assert!(
        text(&output).contains("belongs to another volume set"),
        "{}",
        text(&output)
    );
    assert!(text(&output).contains("x.img"), "{}", text(&output));
    // The same member twice.
    let doubled = vec![set[0].clone(), set[1].clone(), set[1].clone()];
    assert!(text(&run(nvrec().arg("ls").args(&doubled))).contains("is member 1 again"));
    // Appending to an incomplete set is refused.
    let output = record_stdin(&set[..2], b"x", &["--append"]);
    assert!(!output.status.success());
    assert!(text(&output).contains("incomplete"), "{}", text(&output));
}

#[test]
fn append_time_selection_and_recording_choice() {
    if nvrec_testkit::kept_for_full_run(SLOW) {
        return;
    }
    let scratch = Scratch::new("append");
    let targets = files(&scratch, &["a.img", "b.img"]);
    let first = noise(3 << 20, 21);
    let second = noise(2 << 20, 22);
    assert!(record_stdin(&targets, &first, &["--create-size", "32M"])
        .status
        .success());
    assert!(
        record_stdin(&targets, &second, &["--append", "--label", "two"])
            .status
            .success()
    );
    assert!(replay(&targets, &["--recording", "1"]).stdout == first);
    assert!(
        replay(&targets, &[]).stdout == second,
        "the default is the last recording"
    );
    assert_eq!(
        replay(&targets, &["--recording", "3"]).status.code(),
        Some(2)
    );
    // A window in UTC that spans both recordings replays both, in time order, each named.
    let listed = run(nvrec().args(["--json", "ls"]).args(&targets));
    let value: serde_json::Value = serde_json::from_slice(&listed.stdout).unwrap();
    let utc_of = |ns: u64| {
        let at = std::time::UNIX_EPOCH + Duration::from_nanos(ns);
        humantime::format_rfc3339_nanos(at).to_string()
    };
    let from = utc_of(value["recordings"][0]["start_ns"].as_u64().unwrap());
    let to = utc_of(value["recordings"][1]["end_ns"].as_u64().unwrap() + 1_000_000_000);
    let spanned = replay(&targets, &["--from", &from, "--to", &to]);
    assert!(spanned.status.success(), "{}", text(&spanned));
    assert!(spanned.stdout == [first.clone(), second.clone()].concat());
    let report = run(nvrec()
        .args(["--json", "replay", "--output"])
        .arg(scratch.path("spanned.bin"))
        .args(["--from", &from, "--to", &to])
        .args(&targets));
    let report: serde_json::Value = serde_json::from_slice(&report.stdout).unwrap();
    let ids: Vec<u64> = report["recordings"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["recording_id"].as_u64().unwrap())
        .collect();
    assert_eq!(ids, [1, 2]);
    // A paced recording of about one second: --from/--to pick by time.
    let paced = files(&scratch, &["p.img"]);
    let output = run(nvrec()
        .args([
            "record",
            "--source",
            "pattern",
            "--rate",
            "40M",
            "--duration",
            "1s",
            "--create-size",
            "64M",
        ])
        .args(&paced));
    assert!(output.status.success(), "{}", text(&output));
    let whole = replay(&paced, &[]).stdout.len();
    let later = replay(&paced, &["--from", "500ms"]).stdout.len();
    let earlier = replay(&paced, &["--to", "500ms"]).stdout.len();
    assert!(
        later > 0 && later < whole && earlier > 0 && earlier < whole,
        "{whole} {later} {earlier}"
    );
    assert!(
        later + earlier <= whole + 2 * 131072,
        "{whole} {later} {earlier}"
    );
    // The same moments in UTC (RFC 3339) give the same bytes; a window that holds no time
    // is refused (exit 2) whichever way its ends are written.
    let listed = run(nvrec().args(["--json", "ls"]).args(&paced));
    let value: serde_json::Value = serde_json::from_slice(&listed.stdout).unwrap();
    let start_ns = value["recordings"][0]["start_ns"].as_u64().unwrap();
    let utc = |offset_ns: u64| {
        let at = std::time::UNIX_EPOCH + Duration::from_nanos(start_ns + offset_ns);
        humantime::format_rfc3339_nanos(at).to_string()
    };
    let half = utc(500_000_000);
    assert!(replay(&paced, &["--from", &half]).stdout.len() == later);
    assert!(replay(&paced, &["--to", &half]).stdout.len() == earlier);
    assert!(
        replay(&paced, &["--from", "500ms", "--to", &half])
            .status
            .code()
            == Some(2)
    );
    assert!(
        replay(&paced, &["--from", &half, "--to", "100ms"])
            .status
            .code()
            == Some(2)
    );
    assert!(
        replay(&paced, &["--from", "2026-13-01T00:00:00Z"])
            .status
            .code()
            == Some(2)
    );
    // Pacing reproduces the timing: half a second of recording takes about that long.
    let started = std::time::Instant::now();
    assert!(replay(&paced, &["--pace", "--to", "500ms"])
        .status
        .success());
    let one_x = started.elapsed();
    assert!(one_x >= Duration::from_millis(400), "{one_x:?}");
    // At other speeds: half a second at 4x takes about an eighth of a second, a fifth of a
    // second at 0.5x about twice as long; max is unpaced; a speed of 0 is refused.
    let timed = |extra: &[&str]| {
        let started = std::time::Instant::now();
        let output = replay(&paced, extra);
        assert!(output.status.success(), "{}", text(&output));
        started.elapsed()
    };
    let fast = timed(&["--speed", "4x", "--to", "500ms"]);
    // About 125 ms against 1x's 500 ms, start-up and reads the same in both.
    assert!(fast >= Duration::from_millis(90), "{fast:?}");
    assert!(
        fast + Duration::from_millis(250) < one_x,
        "{fast:?} against {one_x:?}"
    );
    let slow = timed(&["--speed", "0.5", "--to", "200ms"]);
    assert!(slow >= Duration::from_millis(320), "{slow:?}");
    let max = timed(&["--pace", "--speed", "max", "--to", "500ms"]);
    assert!(
        max + Duration::from_millis(250) < one_x,
        "{max:?} against {one_x:?}"
    );
    assert_eq!(replay(&paced, &["--speed", "0x"]).status.code(), Some(2));
    // --loop N plays the window N times, back to back, each pass paced from its own start.
    let once = replay(&paced, &["--to", "200ms"]).stdout;
    let thrice = replay(&paced, &["--to", "200ms", "--loop", "3"]).stdout;
    assert_eq!(thrice.len(), 3 * once.len());
    assert!(thrice.chunks(once.len()).all(|pass| pass == once));
    let looped = timed(&["--pace", "--to", "200ms", "--loop", "2"]);
    assert!(looped >= Duration::from_millis(300), "{looped:?}");
    // verify takes the same windows: a fifth of a second checks about a fifth of the chunks.
    let verified = |extra: &[&str]| {
        let output = run(nvrec().args(["--json", "verify"]).args(extra).args(&paced));
        assert!(output.status.success(), "{}", text(&output));
        let value: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
        value["recordings"][0]["chunk_count"].as_u64().unwrap()
    };
    let all_chunks = verified(&[]);
    let report = run(nvrec().args(["--json", "verify"]).args(&paced));
    let report: serde_json::Value = serde_json::from_slice(&report.stdout).unwrap();
    assert_eq!(
        report["recordings"][0]["clock_steps"],
        serde_json::json!([])
    );
    let window_chunks = verified(&["--from", "200ms", "--to", "400ms"]);
    assert!(
        window_chunks > 0 && window_chunks * 3 < all_chunks,
        "{window_chunks} of {all_chunks}"
    );
    let backwards = run(nvrec()
        .args(["verify", "--from", "1s", "--to", "500ms"])
        .args(&paced));
    assert_eq!(backwards.status.code(), Some(2));
}

/// Runs nvrec inside a blkio cgroup that throttles writes to `slow` (cgroup v1).
fn throttled(slow: &LoopDevice, bytes_per_s: u64, args: &[String]) -> Option<Output> {
    let cgroup = PathBuf::from(format!(
        "/sys/fs/cgroup/blkio/nvrec-test-{}",
        std::process::id()
    ));
    if std::fs::create_dir_all(&cgroup).is_err() {
        nvrec_testkit::skip(
            nvrec_testkit::BLKIO_CGROUP,
            "no blkio cgroup to throttle a device with",
        );
        return None;
    }
    let dev = std::fs::read_to_string(format!(
        "/sys/class/block/{}/dev",
        slow.device.file_name().unwrap().to_string_lossy()
    ))
    .ok()?;
    std::fs::write(
        cgroup.join("blkio.throttle.write_bps_device"),
        format!("{} {bytes_per_s}", dev.trim()),
    )
    .ok()?;
    let script = format!("echo $$ > {}/cgroup.procs && exec \"$@\"", cgroup.display());
    let output = Command::new("sh")
        .args(["-c", &script, "sh", env!("CARGO_BIN_EXE_nvrec")])
        .args(args)
        .output()
        .unwrap();
    let _ = std::fs::remove_dir(&cgroup);
    Some(output)
}

#[test]
fn adaptive_striping_gives_the_fast_member_more_than_round_robin_does() {
    let (Some(slow), Some(fast)) = (LoopDevice::new(256 << 20), LoopDevice::new(256 << 20)) else {
        return;
    };
    let base = |stripe: &str| -> Vec<String> {
        [
            "--json",
            "record",
            "--source",
            "pattern",
            "--size",
            "96M",
            "--queue-depth",
            "2",
            "--stripe",
            stripe,
            "--overwrite",
        ]
        .iter()
        .map(|s| s.to_string())
        .chain([
            slow.device.display().to_string(),
            fast.device.display().to_string(),
        ])
        .collect()
    };
    let Some(adaptive) = throttled(&slow, 40_000_000, &base("adaptive")) else {
        return;
    };
    assert!(adaptive.status.success(), "{}", text(&adaptive));
    let adaptive = json(&adaptive);
    let Some(round_robin) = throttled(&slow, 40_000_000, &base("round-robin")) else {
        return;
    };
    assert!(round_robin.status.success(), "{}", text(&round_robin));
    let round_robin = json(&round_robin);
    let chunks = |report: &serde_json::Value, member: usize| {
        report["members"][member]["chunk_count"].as_u64().unwrap()
    };
    // Round-robin: equal shares, so the slow member sets the pace.
    assert!(
        chunks(&round_robin, 0).abs_diff(chunks(&round_robin, 1)) <= 8,
        "{round_robin}"
    );
    // Adaptive: the fast member takes most of the stream.
    assert!(
        chunks(&adaptive, 1) > 3 * chunks(&adaptive, 0),
        "{adaptive}"
    );
    let seconds = |report: &serde_json::Value| report["elapsed_s"].as_f64().unwrap();
    assert!(
        seconds(&adaptive) * 2.0 < seconds(&round_robin),
        "adaptive {} s, round-robin {} s",
        seconds(&adaptive),
        seconds(&round_robin)
    );
}

#[test]
fn zeros_reuse_their_buffers_and_still_verify() {
    // A small pool makes every buffer carry many chunks: the zero source fills each once and
    // the recording must still check out (CRCs from the cached payload CRC) and replay as zeros.
    let scratch = Scratch::new("zeros");
    let targets = files(&scratch, &["a.img", "b.img"]);
    let mut record = nvrec();
    record.args([
        "record",
        "--source",
        "zero",
        "--size",
        "48M",
        "--buffer",
        "2M",
        "--create-size",
        "40M",
    ]);
    let output = run(record.args(&targets));
    assert!(output.status.success(), "{}", text(&output));
    let output = run(nvrec().arg("verify").args(&targets));
    assert!(output.status.success(), "{}", text(&output));
    let output = replay(&targets, &[]);
    assert!(output.status.success(), "{}", text(&output));
    assert_eq!(output.stdout.len(), 48 << 20);
    assert!(output.stdout.iter().all(|byte| *byte == 0));
}

#[test]
fn realtime_runs_the_recording_under_sched_fifo_or_says_why_not() {
    let scratch = Scratch::new("realtime");
    let targets = files(&scratch, &["a.img"]);
    let record = |extra: &[&str]| {
        run(nvrec()
            .args(["--json", "record", "--source", "zero", "--size", "8M"])
            .args(["--create-size", "16M", "--overwrite"])
            .args(extra)
            .args(&targets))
    };
    // Out of range, or a priority without the option: usage errors before anything is
    // created.
    let output = record(&["--realtime", "--realtime-priority", "0"]);
    assert_eq!(output.status.code(), Some(2), "{}", text(&output));
    let output = record(&["--realtime-priority", "5"]);
    assert_eq!(output.status.code(), Some(2), "{}", text(&output));
    assert!(!targets[0].exists());
    // Without the option the recording keeps the ordinary policy.
    let output = record(&[]);
    assert!(output.status.success(), "{}", text(&output));
    assert_eq!(json(&output)["scheduling"]["policy"], "SCHED_OTHER");
    let output = record(&["--realtime", "--realtime-priority", "7"]);
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        // Without the privilege it fails before formatting, saying what it needs.
        assert_eq!(output.status.code(), Some(1), "{}", text(&output));
        assert!(text(&output).contains("CAP_SYS_NICE"), "{}", text(&output));
        return;
    }
    if !output.status.success() && text(&output).contains("Operation not permitted") {
        nvrec_testkit::skip(
            nvrec_testkit::REALTIME,
            "root, but this cgroup gives no real-time time to SCHED_FIFO",
        );
        return;
    }
    assert!(output.status.success(), "{}", text(&output));
    let report = json(&output);
    assert_eq!(report["scheduling"]["policy"], "SCHED_FIFO", "{report}");
    assert_eq!(report["scheduling"]["priority"], 7, "{report}");
    assert_eq!(report["stream_bytes"], 8 << 20);
    // The option alone takes priority 10.
    let output = record(&["--realtime"]);
    assert!(output.status.success(), "{}", text(&output));
    assert_eq!(json(&output)["scheduling"]["priority"], 10);
}

/// How a ring test recording ends.
#[derive(Debug, Clone, Copy, PartialEq)]
enum RingEnd {
    /// The input ends and the recorder closes the recording.
    Clean,
    /// The recorder is killed with SIGKILL after the input stops.
    Kill9,
}

/// Records `data` as a ring (adaptive striping, the default) onto `targets`, ending as asked,
/// and returns what replay gives back (after checking that replay and verify succeed).
fn ring_round_trip(targets: &[PathBuf], data: &[u8], end: RingEnd) -> Vec<u8> {
    let args = ["--ring", "--sync-interval", "100ms", "--create-size", "12M"];
    match end {
        RingEnd::Clean => {
            let output = record_stdin(targets, data, &args);
            assert!(output.status.success(), "{}", text(&output));
        }
        // Killed once everything but the chunk being filled is durable: all of it must
        // come back.
        RingEnd::Kill9 => {
            record_then_kill_when_durable(targets, &args, data, data.len() as u64 - 131072)
        }
    }
    let output = replay(targets, &[]);
    assert!(
        output.status.success(),
        "{end:?} on {} members: {}",
        targets.len(),
        String::from_utf8_lossy(&output.stderr)
    );
    let verified = run(nvrec().arg("verify").args(targets));
    assert!(verified.status.success(), "{}", text(&verified));
    output.stdout
}

#[test]
fn ring_replays_are_byte_exact_on_one_to_four_members_wrapped_or_not_stopped_or_killed() {
    if nvrec_testkit::kept_for_full_run(SLOW) {
        return;
    }
    // A ring that never wrapped must come back whole, whichever member got the first chunks
    // (the reader once started at the newest of the members' first chunks and dropped the
    // first megabytes while verify said OK); one that wrapped, as its newest data in order.
    let scratch = Scratch::new("ring-exact");
    for members in 1..=4usize {
        for wrapped in [false, true] {
            for end in [RingEnd::Clean, RingEnd::Kill9] {
                let case = format!("{members} members, wrapped {wrapped}, {end:?}");
                let names: Vec<String> = (0..members)
                    .map(|m| format!("{members}-{wrapped}-{end:?}-{m}.img"))
                    .collect();
                let names: Vec<&str> = names.iter().map(String::as_str).collect();
                let targets = files(&scratch, &names);
                // Each member's lap holds about 9 MiB: 8 MiB cannot wrap even if one member
                // takes it all (adaptive striping may), 30 MiB a member wraps every member.
                let mib = if wrapped { 30 * members } else { 8 };
                let data = noise(mib << 20, 40 + members as u64);
                let back = ring_round_trip(&targets, &data, end);
                match (wrapped, end) {
                    (false, RingEnd::Clean) => {
                        assert!(
                            back == data,
                            "{case}: {} of {} bytes",
                            back.len(),
                            data.len()
                        )
                    }
                    (false, RingEnd::Kill9) => {
                        assert!(back.len() + 131072 >= data.len(), "{case}: {}", back.len());
                        assert!(back[..] == data[..back.len()], "{case}: not the prefix");
                    }
                    (true, _) => {
                        assert!(back.len() >= 6 << 20, "{case}: only {} bytes", back.len());
                        assert!(back.len() < data.len(), "{case}: nothing overwritten?");
                        // The newest data, ending where the input ended (but for the chunk
                        // being filled at a kill).
                        let newest = (0..=131072usize)
                            .map(|short| data.len() - short)
                            .any(|at| data[at - back.len()..at] == back[..]);
                        assert!(newest, "{case}: {} bytes are not the newest", back.len());
                    }
                }
                for target in &targets {
                    std::fs::remove_file(target).unwrap();
                }
            }
        }
    }
}

#[test]
fn a_target_holding_a_set_is_refused_without_append_or_overwrite() {
    let scratch = Scratch::new("holds-set");
    let targets = files(&scratch, &["a.img", "b.img"]);
    let data = noise(3 << 20, 71);
    let first = record_stdin(
        &targets,
        &data,
        &["--create-size", "16M", "--label", "keep me"],
    );
    assert!(first.status.success(), "{}", text(&first));
    let digests: Vec<Vec<u8>> = targets.iter().map(|t| file_digest(t)).collect();
    // Again without --append: refused (exit 3), naming the set and what it holds; nothing
    // written.
    let again = record_stdin(&targets, &data, &[]);
    assert_eq!(again.status.code(), Some(3), "{}", text(&again));
    let said = json(&again)["error"].as_str().unwrap().to_string();
    assert!(said.contains("holds nvrec volume set"), "{said}");
    assert!(said.contains("keep me") && said.contains("3 MiB"), "{said}");
    assert!(
        said.contains("--append") && said.contains("--overwrite"),
        "{said}"
    );
    let after: Vec<Vec<u8>> = targets.iter().map(|t| file_digest(t)).collect();
    assert_eq!(digests, after, "a refused recording wrote nothing");
    // One member of the set among new targets is refused too.
    let mixed = vec![scratch.path("new.img"), targets[1].clone()];
    let output = record_stdin(&mixed, &data, &["--create-size", "16M"]);
    assert_eq!(output.status.code(), Some(3), "{}", text(&output));
    assert_eq!(file_digest(&targets[1]), digests[1]);
    // --append and --overwrite together make no sense.
    let both = record_stdin(&targets, &data, &["--append", "--overwrite"]);
    assert_eq!(both.status.code(), Some(2), "{}", text(&both));
    // --append adds a recording; --overwrite formats a new set.
    let appended = record_stdin(&targets, &data, &["--append"]);
    assert!(appended.status.success(), "{}", text(&appended));
    assert_eq!(json(&appended)["recording_id"], 2);
    let overwritten = record_stdin(&targets, &data, &["--overwrite"]);
    assert!(overwritten.status.success(), "{}", text(&overwritten));
    assert_eq!(json(&overwritten)["recording_id"], 1);
    let back = replay(&targets, &[]);
    assert!(back.stdout == data, "{}", text(&back));
}
