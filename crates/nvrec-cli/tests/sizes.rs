//! Targets too small for what was asked: `selftest` and every `bench` refuse them with exit
//! status 2 before writing anything, naming the size needed and the size there is, and never
//! grow a file that exists; a size given within the target is respected; a file the command
//! creates itself is sized as before. Also what a long bench prints without a terminal.

mod common;

use common::{json, noise, nvrec, run, text, Scratch};
use std::path::{Path, PathBuf};
use std::process::Output;

/// What this file's slowest tests, kept for the full run (`NVREC_FULL_TESTS=1`), cover.
const SLOW: &str = "a long bench's progress lines";

const KIB: u64 = 1 << 10;
const MIB: u64 = 1 << 20;

/// A file of `len_bytes` of noise, so that any write to it shows.
fn existing_file(scratch: &Scratch, name: &str, len_bytes: u64) -> PathBuf {
    let path = scratch.path(name);
    std::fs::write(&path, noise(len_bytes as usize, len_bytes)).unwrap();
    path
}

/// Runs nvrec with `args` then `target` and expects the refusal: exit 2, the message naming
/// `needed` and `available`, and the file exactly as it was.
fn expect_refusal(args: &[&str], target: &Path, needed: &str, available: &str) -> String {
    let before = std::fs::read(target).unwrap();
    let output = run(nvrec().args(args).arg(target));
    let shown = text(&output);
    assert_eq!(output.status.code(), Some(2), "{args:?}: {shown}");
    assert!(shown.contains(needed), "{args:?}: no {needed:?} in {shown}");
    assert!(
        shown.contains(&format!("has {available}")) || shown.contains(available),
        "{args:?}: no {available:?} in {shown}"
    );
    let after = std::fs::read(target).unwrap();
    assert_eq!(
        after.len(),
        before.len(),
        "{args:?} changed the file's length"
    );
    assert!(after == before, "{args:?} wrote to the file");
    shown
}

fn len(path: &Path) -> u64 {
    std::fs::metadata(path).unwrap().len()
}

fn succeeds(output: &Output, what: &str) {
    assert!(output.status.success(), "{what}: {}", text(output));
}

#[test]
fn selftest_refuses_a_target_too_small_for_its_tests_and_never_grows_one() {
    let scratch = Scratch::new("sizes-selftest");
    // 1 MiB holds 8 chunks; the suite needs 20 with the default 1 MiB I/Os.
    let small = existing_file(&scratch, "small.img", MIB);
    let shown = expect_refusal(&["selftest"], &small, "needs 2.50 MiB", "has 1 MiB");
    assert!(shown.contains("the self-test"), "{shown}");
    // --size cannot make an existing target larger.
    let target = existing_file(&scratch, "target.img", 3 * MIB);
    let shown = expect_refusal(
        &["selftest", "--size", "4M"],
        &target,
        "--size 4 MiB is more than",
        "(3 MiB)",
    );
    assert!(shown.contains("at most 3 MiB"), "{shown}");
    // Nor below what the suite needs.
    expect_refusal(
        &["selftest", "--size", "2M"],
        &target,
        "needs 2.50 MiB",
        "--size gives it 2 MiB",
    );
    // Within the target, the suite runs on the part asked for and leaves the length alone;
    // every test passes on the smallest target it accepts.
    let output = run(nvrec()
        .args(["--json", "selftest", "--size", "2560K"])
        .arg(&target));
    succeeds(&output, "selftest --size 2560K");
    let report = json(&output);
    assert_eq!(report["capacity_bytes"], 2560 * KIB);
    assert_eq!(report["failed_count"], 0);
    assert_eq!(len(&target), 3 * MIB);
}

#[test]
fn selftest_refuses_a_scratch_size_below_what_it_needs_and_creates_nothing() {
    let scratch = Scratch::new("sizes-scratch");
    let output = run(nvrec()
        .current_dir(&scratch.0)
        .args(["selftest", "--size", "1M"]));
    assert_eq!(output.status.code(), Some(2), "{}", text(&output));
    assert!(
        text(&output).contains("needs 2.50 MiB"),
        "{}",
        text(&output)
    );
    assert_eq!(std::fs::read_dir(&scratch.0).unwrap().count(), 0);
    // A path that does not exist is created at the size given, as before.
    let fresh = scratch.path("fresh.img");
    let output = run(nvrec()
        .args(["--json", "selftest", "--size", "4M"])
        .arg(&fresh));
    succeeds(&output, "selftest on a new file");
    assert_eq!(len(&fresh), 4 * MIB);
}

#[test]
fn sweep_refuses_what_does_not_fit_and_otherwise_stays_within_the_file() {
    let scratch = Scratch::new("sizes-sweep");
    let tiny = existing_file(&scratch, "tiny.img", 64 * KIB);
    let shown = expect_refusal(
        &["bench", "sweep", "--runs", "1"],
        &tiny,
        "needs 128 KiB",
        "has 64 KiB",
    );
    assert!(shown.contains("--chunk-size"), "{shown}");
    let small = existing_file(&scratch, "small.img", 4 * MIB);
    expect_refusal(
        &["bench", "sweep", "--max-chunks", "64", "--runs", "1"],
        &small,
        "needs 8 MiB",
        "has 4 MiB",
    );
    // Left to the default, the sweep goes as far as the file holds: 32 chunks of 128 KiB.
    let output = run(nvrec()
        .args(["--json", "bench", "sweep", "--runs", "1"])
        .arg(&small));
    succeeds(&output, "sweep");
    let points = json(&output)["points"].as_array().unwrap().clone();
    assert_eq!(points.last().unwrap()["chunk_count"], 32);
    assert_eq!(len(&small), 4 * MIB);
    // A file the sweep creates is made as large as the sweep asks.
    let fresh = scratch.path("fresh.img");
    let output = run(nvrec()
        .args([
            "--json",
            "bench",
            "sweep",
            "--max-chunks",
            "8",
            "--runs",
            "1",
        ])
        .arg(&fresh));
    succeeds(&output, "sweep on a new file");
    assert_eq!(len(&fresh), MIB);
}

#[test]
fn fill_and_overwrite_refuse_sizes_beyond_the_file_and_run_within_one_given() {
    let scratch = Scratch::new("sizes-fill");
    let file = existing_file(&scratch, "file.img", 8 * MIB);
    expect_refusal(
        &["bench", "fill", "--size", "64M"],
        &file,
        "needs 64 MiB (--size)",
        "has 8 MiB",
    );
    // The whole file by default: two queues of 32 I/Os of 1 MiB do not fit in it.
    let shown = expect_refusal(&["bench", "overwrite"], &file, "needs 64 MiB", "has 8 MiB");
    assert!(shown.contains("--queue-depth"), "{shown}");
    expect_refusal(
        &["bench", "overwrite", "--size", "16M"],
        &file,
        "needs 16 MiB (--size)",
        "has 8 MiB",
    );
    let output = run(nvrec()
        .args([
            "--json", "bench", "fill", "--size", "4M", "--window", "0.01",
        ])
        .arg(&file));
    succeeds(&output, "fill --size 4M");
    assert_eq!(json(&output)["summary"]["bytes_written"], 4 * MIB);
    let output = run(nvrec()
        .args([
            "--json",
            "bench",
            "overwrite",
            "--size",
            "8M",
            "--queue-depth",
            "2",
        ])
        .args(["--window", "0.01"])
        .arg(&file));
    succeeds(&output, "overwrite --size 8M");
    assert_eq!(json(&output)["ring_bytes"], 8 * MIB);
    assert_eq!(len(&file), 8 * MIB);
}

#[test]
fn profiles_refuse_a_region_beyond_the_file_and_run_within_one_given() {
    let scratch = Scratch::new("sizes-profile");
    let file = existing_file(&scratch, "file.img", MIB);
    let shown = expect_refusal(
        &["bench", "profile", "atto", "--runs", "1"],
        &file,
        "needs 256 MiB (the atto preset's test region)",
        "has 1 MiB",
    );
    assert!(shown.contains("a --size of at most 1 MiB"), "{shown}");
    expect_refusal(
        &["bench", "profile", "cdm", "--runs", "1"],
        &file,
        "needs 1 GiB",
        "has 1 MiB",
    );
    expect_refusal(
        &["bench", "profile", "cdm-nvme", "--size", "16M"],
        &file,
        "needs 16 MiB (--size)",
        "has 1 MiB",
    );
    let output = run(nvrec()
        .args([
            "--json", "bench", "profile", "atto", "--size", "1M", "--runs", "1",
        ])
        .arg(&file));
    succeeds(&output, "atto --size 1M");
    assert_eq!(json(&output)["region_bytes"], MIB);
    assert_eq!(len(&file), MIB);
}

#[test]
fn a_refusal_in_json_names_the_sizes_and_the_exit_status() {
    let scratch = Scratch::new("sizes-json");
    let file = existing_file(&scratch, "file.img", MIB);
    let output = run(nvrec()
        .args(["--json", "bench", "fill", "--size", "2M"])
        .arg(&file));
    assert_eq!(output.status.code(), Some(2), "{}", text(&output));
    let value = json(&output);
    assert_eq!(value["exit_code"], 2);
    let error = value["error"].as_str().unwrap();
    assert!(
        error.contains("needs 2 MiB") && error.contains("has 1 MiB"),
        "{error}"
    );
    assert_eq!(len(&file), MIB);
}

/// The rate in a progress line ("..., 812.3 MiB/s, ..."), if it shows one.
fn line_rate_mib_per_s(line: &str) -> Option<f64> {
    line.split(", ")
        .find_map(|part| part.strip_suffix(" MiB/s"))
        .and_then(|rate| rate.parse().ok())
}

#[test]
fn without_a_terminal_a_long_bench_prints_progress_lines_and_a_final_average() {
    if nvrec_testkit::kept_for_full_run(SLOW) {
        return;
    }
    let scratch = Scratch::new("sizes-progress");
    let file = scratch.path("cdm.img");
    // Eight tests of a second each: time-based, so no total; progress counts every byte.
    let output = run(nvrec()
        .args([
            "bench",
            "profile",
            "cdm",
            "--size",
            "16M",
            "--duration",
            "1",
        ])
        .args(["--runs", "1"])
        .arg(&file));
    succeeds(&output, "cdm");
    let stderr = String::from_utf8_lossy(&output.stderr);
    let lines: Vec<&str> = stderr
        .lines()
        .filter(|line| line.starts_with("nvrec cdm: ") && line.contains("elapsed"))
        .collect();
    assert!(!lines.is_empty(), "no progress line: {stderr}");
    for line in &lines {
        let rate = line_rate_mib_per_s(line).unwrap_or_else(|| panic!("no rate in {line}"));
        assert!(rate > 0.0, "{line}");
    }
    let last = stderr.lines().last().unwrap_or_default();
    assert!(
        last.starts_with("nvrec cdm: finished, ") && last.contains("on average"),
        "no final line: {stderr}"
    );
}

#[test]
fn a_recordings_chunk_is_any_multiple_of_4k_from_8k_to_64m_and_nothing_else() {
    let scratch = Scratch::new("chunk-sizes");
    let data = noise(3 * MIB as usize + 777, 12);
    // 12K and 96K are no power of two: recorded in I/Os of whole chunks, and back exact.
    for chunk in ["12K", "96K", "8K"] {
        let target = scratch.path(&format!("rec-{chunk}.img"));
        let extra = ["--create-size", "32M", "--chunk-size", chunk];
        let output = common::record_stdin(std::slice::from_ref(&target), &data, &extra);
        succeeds(&output, chunk);
        let output = run(nvrec().arg("replay").arg(&target));
        succeeds(&output, chunk);
        assert!(output.stdout == data, "{chunk}: the replay differs");
    }
    // Refused with exit 2 by the one rule, before a target is made.
    for chunk in ["0", "4K", "6K", "130K", "65M"] {
        let target = scratch.path(&format!("refused-{chunk}.img"));
        let extra = ["--create-size", "32M", "--chunk-size", chunk];
        let output = common::record_stdin(std::slice::from_ref(&target), &data, &extra);
        let shown = text(&output);
        assert_eq!(output.status.code(), Some(2), "{chunk}: {shown}");
        assert!(
            shown.contains("multiple of 4 KiB from 8 KiB to 64 MiB"),
            "{chunk}: {shown}"
        );
        assert!(!target.exists(), "{chunk}: a target was made");
    }
}
