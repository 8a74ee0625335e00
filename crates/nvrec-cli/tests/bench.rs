//! `nvrec bench` end to end: every bench on a file, a loop device and the simulated drive
//! with JSON, CSV and the HTML report; the report rendered in headless Chromium; `bench
//! report`'s pictures of drives side by side, each rendered; `--buffered` (`write`, `read`,
//! `bench sweep`) on a file. `nvrec plan` has its own file, `plan.rs`.

mod common;

use common::{json, nvrec, rendered_chart_count, run, text, LoopDevice, Scratch, Throttle};
use std::path::Path;
use std::process::Command;

/// What this file's slowest tests, kept for the full run (`NVREC_FULL_TESTS=1`), cover.
const SLOW: &str = "a bench's fill and throttle detection over tens of seconds of a simulated drive, every bench on a file, buffered runs, reports in Chromium";

/// The kernel-throttle test compares rates the machine must hold, so it runs alone; the
/// other tests run beside each other.
static MACHINE: std::sync::RwLock<()> = std::sync::RwLock::new(());

fn alone() -> std::sync::RwLockWriteGuard<'static, ()> {
    MACHINE
        .write()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

fn beside_others() -> std::sync::RwLockReadGuard<'static, ()> {
    MACHINE
        .read()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// Runs one bench with every output and checks that each came out whole.
fn bench_with_outputs(scratch: &Scratch, name: &str, args: &[&str]) -> serde_json::Value {
    let saved = scratch.path(&format!("{name}.json"));
    let csv = scratch.path(&format!("{name}.csv"));
    let html = scratch.path(&format!("{name}.html"));
    let output = run(nvrec()
        .arg("--json")
        .arg("bench")
        .args(args)
        .arg("--save")
        .arg(&saved)
        .arg("--csv")
        .arg(&csv)
        .arg("--report")
        .arg(&html));
    assert!(output.status.success(), "{name}: {}", text(&output));
    let value = json(&output);
    assert_eq!(value["meta"]["schema"], "nvrec.bench", "{name}");
    assert_eq!(value["meta"]["schema_version"], 1, "{name}");
    assert!(value["meta"]["kernel"]
        .as_str()
        .is_some_and(|kernel| !kernel.is_empty()));
    let saved: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&saved).unwrap()).unwrap();
    assert_eq!(saved["meta"]["bench"], value["meta"]["bench"]);
    let csv = std::fs::read_to_string(&csv).unwrap();
    assert!(csv.lines().count() >= 2, "{name}: CSV has no rows:\n{csv}");
    let columns = csv.lines().next().unwrap().split(',').count();
    assert!(
        csv.lines().all(|line| line.split(',').count() == columns),
        "{name}: ragged CSV"
    );
    let html = std::fs::read_to_string(&html).unwrap();
    assert!(
        html.starts_with("<!DOCTYPE html>") && html.contains("<svg class=\"chart\""),
        "{name}"
    );
    // Nothing loaded from elsewhere (the SVG namespace URI is a name, not a load).
    for loads in ["src=\"", "href=\"", "url(", "@import"] {
        assert!(
            !html.contains(loads),
            "{name}: the page loads something: {loads}"
        );
    }
    value
}

/// The four benches, small, on `target` (a file path, a device, or sim:).
fn every_bench(scratch: &Scratch, target: &str, label: &str) {
    let sweep = bench_with_outputs(
        scratch,
        &format!("{label}-sweep"),
        &["sweep", target, "--max-chunks", "64", "--runs", "1"],
    );
    assert_eq!(sweep["points"].as_array().unwrap().len(), 7);
    assert_eq!(sweep["summary"]["verified"], true);
    let fill = bench_with_outputs(
        scratch,
        &format!("{label}-fill"),
        &["fill", target, "--size", "64M", "--window", "0.05"],
    );
    assert_eq!(fill["summary"]["bytes_written"], 64 << 20);
    assert_eq!(fill["summary"]["verified"], true);
    assert!(
        fill["summary"]["sustained_write_bytes_per_s"]
            .as_f64()
            .unwrap()
            > 0.0
    );
    let overwrite = bench_with_outputs(
        scratch,
        &format!("{label}-overwrite"),
        &["overwrite", target, "--size", "64M", "--window", "0.05"],
    );
    assert_eq!(overwrite["phases"].as_array().unwrap().len(), 2);
    let cdm = bench_with_outputs(
        scratch,
        &format!("{label}-cdm"),
        &[
            "profile",
            "cdm",
            target,
            "--size",
            "16M",
            "--duration",
            "0.1",
            "--runs",
            "1",
        ],
    );
    assert_eq!(cdm["tests"].as_array().unwrap().len(), 8);
    let atto = bench_with_outputs(
        scratch,
        &format!("{label}-atto"),
        &["profile", "atto", target, "--size", "8M", "--runs", "1"],
    );
    assert!(atto["tests"].as_array().unwrap().len() >= 2 * 10);
}

#[test]
fn every_bench_runs_on_the_simulated_drive() {
    let _machine = beside_others();
    let scratch = Scratch::new("bench-sim");
    every_bench(&scratch, "sim:capacity=256M,cache=32M", "sim");
}

#[test]
fn every_bench_runs_on_a_file() {
    if nvrec_testkit::kept_for_full_run(SLOW) {
        return;
    }
    let _machine = beside_others();
    let scratch = Scratch::new("bench-file");
    // One file for every bench, made as large as the largest needs: a bench never grows a
    // file that exists.
    let target = scratch.path("target.img");
    std::fs::File::create(&target)
        .unwrap()
        .set_len(128 << 20)
        .unwrap();
    every_bench(&scratch, target.to_str().unwrap(), "file");
}

#[test]
fn every_bench_runs_on_a_loop_device() {
    let _machine = beside_others();
    let Some(device) = LoopDevice::new(128 << 20) else {
        return;
    };
    let scratch = Scratch::new("bench-loop");
    every_bench(&scratch, device.device.to_str().unwrap(), "loop");
}

#[test]
fn fill_finds_the_simulated_cliff_through_the_command_line() {
    let _machine = beside_others();
    let output = run(nvrec().args([
        "--json",
        "bench",
        "fill",
        "sim:capacity=512M,cache=128M,fast=2.8GB/s,slow=1.6GB/s",
        "--window",
        "0.005",
    ]));
    assert!(output.status.success(), "{}", text(&output));
    let value = json(&output);
    let cliff = value["summary"]["cache_cliff_bytes"]
        .as_f64()
        .expect("a cliff");
    assert!((cliff / (128.0 * 1048576.0) - 1.0).abs() < 0.05, "{cliff}");
    let after = value["summary"]["rate_after_cliff_bytes_per_s"]
        .as_f64()
        .unwrap();
    assert!((after / 1.6e9 - 1.0).abs() < 0.05, "{after}");
    let peak = value["summary"]["peak_write_bytes_per_s"].as_f64().unwrap();
    assert!((peak / 2.8e9 - 1.0).abs() < 0.05, "{peak}");
}

#[test]
fn fill_runs_report_each_run_and_the_average_continuous_performance() {
    let _machine = beside_others();
    let args = [
        "bench",
        "fill",
        "sim:capacity=256M,cache=64M,fast=2.8GB/s,slow=1.4GB/s,read=3GB/s",
        "--window",
        "0.005",
        "--runs",
        "3",
    ];
    let output = run(nvrec().arg("--json").args(args));
    assert!(output.status.success(), "{}", text(&output));
    let value = json(&output);
    let average = &value["average"];
    assert_eq!(average["run_count"], 3);
    let runs = average["runs"].as_array().unwrap();
    assert_eq!(runs.len(), 3);
    let mean = runs
        .iter()
        .map(|run| run["write_bytes_per_s"].as_f64().unwrap())
        .sum::<f64>()
        / 3.0;
    assert!((average["write_bytes_per_s"].as_f64().unwrap() / mean - 1.0).abs() < 1e-9);
    // Each run has its plateaus; the first, on a fresh simulated drive, its cache and the
    // rate after it (later runs overwrite, which the simulated drive makes slower).
    for run in runs {
        assert!(!run["plateaus"].as_array().unwrap().is_empty(), "{run:#}");
    }
    let first = runs[0]["plateaus"].as_array().unwrap();
    assert_eq!(first.len(), 2, "{first:#?}");
    let slow = first[1]["rate_bytes_per_s"].as_f64().unwrap();
    assert!((slow / 1.4e9 - 1.0).abs() < 0.05, "{first:#?}");
    // 64 MiB at 2.8 GB/s, 192 MiB at 1.4 GB/s.
    let expected = 256.0 * MIB / (64.0 * MIB / 2.8e9 + 192.0 * MIB / 1.4e9);
    let write = runs[0]["write_bytes_per_s"].as_f64().unwrap();
    assert!((write / expected - 1.0).abs() < 0.05, "{write} {expected}");
    assert!(average["read_bytes_per_s"].as_f64().unwrap() > 0.0);

    let output = run(nvrec().args(args));
    let shown = text(&output);
    assert!(output.status.success(), "{shown}");
    for line in [
        "run 1 of 3:",
        "run 3 of 3:",
        "average continuous performance over 3 runs:",
        "average write",
        "average read",
    ] {
        assert!(shown.contains(line), "{line}: {shown}");
    }
    let output = run(nvrec().args(["bench", "fill", "sim:capacity=64M", "--runs", "0"]));
    assert_eq!(output.status.code(), Some(2), "{}", text(&output));
}

#[test]
fn profile_cdm6_custom_tests_and_atto_data() {
    let _machine = beside_others();
    let profile = |args: &[&str]| {
        let output = run(nvrec()
            .args(["--json", "bench", "profile"])
            .args(args)
            .args(["--size", "16M", "--runs", "1", "--duration", "0.01"]));
        assert!(output.status.success(), "{args:?}: {}", text(&output));
        json(&output)
    };
    let names = |value: &serde_json::Value| -> Vec<String> {
        value["tests"]
            .as_array()
            .unwrap()
            .iter()
            .map(|test| test["name"].as_str().unwrap().to_string())
            .collect()
    };
    let value = profile(&["cdm6", "sim:capacity=64M"]);
    assert_eq!(
        names(&value)[..4],
        ["SEQ128K Q32T1", "RND4K Q8T8", "RND4K Q32T1", "RND4K Q1T1"]
    );
    assert_eq!(value["data"], "incompressible");
    let value = profile(&[
        "custom",
        "sim:capacity=64M",
        "--test",
        "SEQ1M-Q8T1,RND4K-Q32T16",
    ]);
    assert_eq!(
        names(&value),
        ["SEQ1M Q8T1", "RND4K Q32T16", "SEQ1M Q8T1", "RND4K Q32T16"]
    );
    assert_eq!(value["tests"][1]["shape"]["thread_count"], 16);
    assert_eq!(
        profile(&["atto", "sim:capacity=64M"])["data"],
        "compressible"
    );
    assert_eq!(
        profile(&["atto", "sim:capacity=64M", "--incompressible"])["data"],
        "incompressible"
    );
    for (args, named) in [
        (&["custom", "sim:capacity=64M"][..], "--test"),
        (
            &["cdm", "sim:capacity=64M", "--test", "SEQ1M-Q8T1"][..],
            "custom",
        ),
        (
            &["custom", "sim:capacity=64M", "--test", "SEQ1M-Q0T1"][..],
            "queue depth",
        ),
        (
            &["custom", "sim:capacity=64M", "--test", "BIG1M-Q1T1"][..],
            "SEQ nor RND",
        ),
    ] {
        let output = run(nvrec().args(["bench", "profile"]).args(args));
        assert_eq!(output.status.code(), Some(2), "{args:?}: {}", text(&output));
        assert!(text(&output).contains(named), "{args:?}: {}", text(&output));
    }
}

#[test]
fn rated_shows_percent_of_the_rating_in_every_report() {
    let _machine = beside_others();
    let scratch = Scratch::new("bench-rated");
    let sim = "sim:capacity=64M,cache=16M,fast=2GB/s,slow=1GB/s,read=2.5GB/s";
    for (name, args) in [
        ("fill", &["fill", sim, "--window", "0.002"][..]),
        ("sweep", &["sweep", sim, "--runs", "1"][..]),
        (
            "overwrite",
            &["overwrite", sim, "--window", "0.002", "--trim", "off"][..],
        ),
        (
            "profile",
            &[
                "profile",
                "cdm",
                sim,
                "--size",
                "16M",
                "--runs",
                "1",
                "--duration",
                "0.01",
            ][..],
        ),
    ] {
        let value = bench_with_outputs(&scratch, name, &[args, &["--rated", "5000,4000"]].concat());
        assert_eq!(value["rated"]["rating"]["read_bytes_per_s"], 5e9, "{name}");
        let figures = value["rated"]["figures"].as_array().unwrap();
        assert!(!figures.is_empty(), "{name}");
        for figure in figures {
            let rated = if figure["op"] == "read" { 5e9 } else { 4e9 };
            assert_eq!(figure["rated_bytes_per_s"], rated, "{name}: {figure}");
            let percent = figure["bytes_per_s"].as_f64().unwrap() / rated * 100.0;
            assert!((figure["percent"].as_f64().unwrap() - percent).abs() < 1e-9);
        }
        let html = std::fs::read_to_string(scratch.path(&format!("{name}.html"))).unwrap();
        assert!(
            html.contains("Against the rating") && html.contains("of rated"),
            "{name}"
        );
        let output = run(nvrec()
            .arg("bench")
            .args(args)
            .args(["--rated", "5000,4000"]));
        assert!(
            text(&output).contains("of rated (--rated):"),
            "{}",
            text(&output)
        );
    }
    // A fill at 2 GB/s then 1 GB/s of a 4000 MB/s rating: the slow plateau is 25 %.
    let value = json(&run(nvrec().args([
        "--json",
        "bench",
        "fill",
        sim,
        "--window",
        "0.002",
        "--rated",
        "5000,4000",
    ])));
    let figures = value["rated"]["figures"].as_array().unwrap();
    let plateau = figures.iter().find(|f| f["name"] == "plateau 2").unwrap();
    assert!(
        (plateau["percent"].as_f64().unwrap() - 25.0).abs() < 1.5,
        "{plateau}"
    );
    let output = run(nvrec().args(["bench", "fill", sim, "--rated", "5000"]));
    assert_eq!(output.status.code(), Some(2), "{}", text(&output));
    assert!(
        text(&output).contains("--rated '5000'"),
        "{}",
        text(&output)
    );
}

/// Runs `bench fill` on `sim` with windows sized for the run and checks every plateau against
/// the model's `(bytes, rate)` steps: bounds in bytes and seconds, and rate, within `tolerance`.
/// Returns the largest relative error seen.
fn plateaus_match_the_model(sim: &str, model: &[(f64, f64)], tolerance: f64) -> f64 {
    let scratch = Scratch::new("bench-plateaus");
    let html = scratch.path("fill.html");
    let output = run(nvrec()
        .args([
            "--json",
            "bench",
            "fill",
            sim,
            "--io-size",
            "256K",
            "--no-verify",
            "--report",
        ])
        .arg(&html));
    assert!(output.status.success(), "{}", text(&output));
    let value = json(&output);
    let analysis = &value["analysis"];
    assert!(analysis["too_short"].is_null(), "{analysis:#}");
    assert!(analysis["analysed_window_count"].as_u64().unwrap() >= 50);
    let plateaus = analysis["plateaus"].as_array().unwrap();
    assert_eq!(plateaus.len(), model.len(), "{plateaus:#?}");
    let (mut bytes, mut seconds, mut worst) = (0.0, 0.0, 0.0f64);
    for (plateau, (length, rate)) in plateaus.iter().zip(model) {
        let field = |name: &str| plateau[name].as_f64().unwrap();
        let mut check = |name: &str, expected: f64| {
            let error = (field(name) - expected).abs() / expected.max(f64::MIN_POSITIVE);
            let error = if expected == 0.0 {
                field(name).abs()
            } else {
                error
            };
            assert!(
                error <= tolerance,
                "{name}: {} not {expected}: {plateau:#}",
                field(name)
            );
            worst = worst.max(error);
        };
        check("start_bytes", bytes);
        check("start_s", seconds);
        (bytes, seconds) = (bytes + length, seconds + length / rate);
        check("end_bytes", bytes);
        check("end_s", seconds);
        check("rate_bytes_per_s", *rate);
    }
    // The sustained rate is the last plateau's, and the cliff the first drop's.
    let last = plateaus.len() - 1;
    assert_eq!(analysis["sustained_plateau_index"], last);
    assert_eq!(
        value["summary"]["sustained_write_bytes_per_s"],
        plateaus[last]["rate_bytes_per_s"]
    );
    if plateaus.len() > 1 {
        assert_eq!(analysis["cliff"]["at_bytes"], plateaus[1]["start_bytes"]);
    } else {
        assert!(analysis["cliff"].is_null(), "{analysis:#}");
    }
    eprintln!(
        "{sim}: {} plateaus, worst error {:.3} %",
        model.len(),
        worst * 100.0
    );
    worst
}

const MIB: f64 = 1048576.0;

#[test]
fn fill_finds_one_or_two_plateaus_on_the_simulated_drive_within_three_percent() {
    let _machine = beside_others();
    plateaus_match_the_model(
        "sim:capacity=512M,cache=0,slow=1.6GB/s",
        &[(512.0 * MIB, 1.6e9)],
        0.03,
    );
    plateaus_match_the_model(
        "sim:capacity=1G,cache=256M,fast=2.8GB/s,slow=1.6GB/s",
        &[(256.0 * MIB, 2.8e9), (768.0 * MIB, 1.6e9)],
        0.03,
    );
}

#[test]
fn fill_finds_three_plateaus_on_the_simulated_drive_within_three_percent() {
    if nvrec_testkit::kept_for_full_run(SLOW) {
        return;
    }
    let _machine = beside_others();
    plateaus_match_the_model(
        "sim:capacity=1G,dram=96M,dram-rate=6GB/s,cache=256M,fast=2.8GB/s,slow=1.6GB/s",
        &[
            (96.0 * MIB, 6e9),
            (256.0 * MIB, 2.8e9),
            (672.0 * MIB, 1.6e9),
        ],
        0.03,
    );
}

#[test]
fn fill_finds_four_plateaus_on_the_simulated_drive_within_three_percent() {
    let _machine = beside_others();
    plateaus_match_the_model(
        "sim:capacity=2G,dram=192M,dram-rate=6GB/s,cache=384M,fast=2.8GB/s,slow=1.6GB/s,\
         fold-at=1536M,fold=0.8GB/s",
        &[
            (192.0 * MIB, 6e9),
            (384.0 * MIB, 2.8e9),
            (960.0 * MIB, 1.6e9),
            (512.0 * MIB, 0.8e9),
        ],
        0.03,
    );
}

#[test]
fn a_fill_too_short_to_tell_says_how_long_to_run() {
    let _machine = beside_others();
    let output = run(nvrec().args([
        "bench",
        "fill",
        "sim:capacity=64M",
        "--size",
        "16M",
        "--window",
        "0.001",
    ]));
    assert!(output.status.success(), "{}", text(&output));
    assert!(text(&output).contains("TOO SHORT"), "{}", text(&output));
    assert!(text(&output).contains("run at least"), "{}", text(&output));
    let output = run(nvrec().args([
        "--json",
        "bench",
        "fill",
        "sim:capacity=64M",
        "--size",
        "16M",
        "--window",
        "0.001",
    ]));
    let too_short = &json(&output)["analysis"]["too_short"];
    assert!(
        too_short["run_at_least_s"].as_f64().unwrap() >= 0.05,
        "{too_short}"
    );
    assert!(
        too_short["run_at_least_bytes"].as_u64().unwrap() > 16 << 20,
        "{too_short}"
    );
}

/// One step of a kernel write limit: `bytes_per_s`, held until the kernel has let
/// `until_bytes` through.
struct Step {
    bytes_per_s: u64,
    until_bytes: u64,
}

/// A point of the kernel's count: seconds since the fill started, bytes let through.
type Count = (f64, u64);

/// What the kernel counted during a throttled fill.
struct Counted {
    /// Where the writes began, at each change of the limit, and where they ended.
    counts: Vec<Count>,
    /// The longest time the count stood still between the first write and the last.
    still_s_max: f64,
}

/// A throttle's count stands still between its bursts (about 100 ms); longer, the machine
/// held the writer back, not the throttle.
const STILL_S_MAX: f64 = 0.3;
/// Below this share of a step's limit, the machine could not keep up with the throttle.
const HELD_FRACTION_MIN: f64 = 0.9;
/// Fills tried before giving up on a machine that keeps holding the writer back.
const THROTTLED_ATTEMPT_COUNT: usize = 3;

impl Counted {
    /// Why the kernel's count measured the machine rather than the throttle, if it did.
    fn held_back(&self, steps: &[Step]) -> Option<String> {
        if self.still_s_max > STILL_S_MAX {
            return Some(format!(
                "the writer stood still for {:.2} s",
                self.still_s_max
            ));
        }
        steps
            .iter()
            .zip(self.counts.windows(2))
            .map(|(step, pair)| (step, kernel_rate(pair[0], pair[1])))
            .find(|(step, rate)| *rate < HELD_FRACTION_MIN * step.bytes_per_s as f64)
            .map(|(step, rate)| {
                format!(
                    "the writer kept {:.0} MB/s under a limit of {:.0} MB/s",
                    rate / 1e6,
                    step.bytes_per_s as f64 / 1e6
                )
            })
    }
}

/// Bytes per second the kernel let through between two counts.
fn kernel_rate((t0, b0): Count, (t1, b1): Count) -> f64 {
    (b1 - b0) as f64 / (t1 - t0)
}

/// Runs `bench fill` over the first `steps.last().until_bytes` of `device` inside a blkio
/// cgroup whose limit steps as the kernel's own byte count passes each step's end, again
/// (up to [`THROTTLED_ATTEMPT_COUNT`] times) where the machine held the writer back
/// ([`Counted::held_back`]). None (with the reason printed) where no blkio cgroup can
/// throttle or the machine held the writer back every time.
fn fill_under_steps(
    device: &LoopDevice,
    steps: &[Step],
) -> Option<(serde_json::Value, Vec<Count>)> {
    for _ in 0..THROTTLED_ATTEMPT_COUNT {
        let (value, counted) = fill_once_under_steps(device, steps)?;
        match counted.held_back(steps) {
            None => return Some((value, counted.counts)),
            Some(reason) => eprintln!("{reason}: held back by the machine"),
        }
    }
    nvrec_testkit::skip(
        nvrec_testkit::QUIET_MACHINE,
        format_args!(
            "the machine held the writer back in {THROTTLED_ATTEMPT_COUNT} fills; \
             the kernel's count would measure the machine, not the throttle"
        ),
    );
    None
}

fn fill_once_under_steps(
    device: &LoopDevice,
    steps: &[Step],
) -> Option<(serde_json::Value, Counted)> {
    let throttle = Throttle::new(device, steps[0].bytes_per_s)?;
    let scratch = Scratch::new("bench-throttled");
    let (stdout, stderr) = (scratch.path("fill.json"), scratch.path("fill.stderr"));
    let size = steps[steps.len() - 1].until_bytes.to_string();
    // 256 KiB transfers: a larger one io_uring submits without waiting may need splitting,
    // which the block layer refuses to do without waiting; io_uring then submits it again,
    // and the throttle counts (and charges) it twice.
    let mut child = throttle.spawn(
        &[
            "--json",
            "bench",
            "fill",
            device.device.to_str().unwrap(),
            "--size",
            &size,
            "--io-size",
            "256K",
            "--no-verify",
        ],
        &stdout,
        &stderr,
    );
    let counted = watch(&mut child, &throttle, steps);
    let status = child.wait().unwrap();
    let output = std::fs::read(&stdout).unwrap();
    assert!(
        status.success(),
        "{status}: {}{}",
        String::from_utf8_lossy(&output),
        std::fs::read_to_string(&stderr).unwrap()
    );
    assert_eq!(
        counted.counts.last().unwrap().1,
        steps[steps.len() - 1].until_bytes,
        "the kernel counted other than what was written"
    );
    Some((serde_json::from_slice(&output).unwrap(), counted))
}

/// Follows the kernel's count until `child` exits, setting each step's limit once the count
/// has passed the step before.
fn watch(child: &mut std::process::Child, throttle: &Throttle, steps: &[Step]) -> Counted {
    let started = std::time::Instant::now();
    let mut counts: Vec<Count> = Vec::new();
    let mut last: Count = (0.0, 0);
    let (mut step, mut still_s_max) = (0, 0.0f64);
    while child.try_wait().unwrap().is_none() {
        let bytes = throttle.written_bytes();
        let now = started.elapsed().as_secs_f64();
        if bytes != last.1 {
            if last.1 == 0 {
                counts.push((now, bytes));
            } else {
                still_s_max = still_s_max.max(now - last.0);
            }
            last = (now, bytes);
        }
        if step + 1 < steps.len() && bytes >= steps[step].until_bytes {
            counts.push((now, bytes));
            step += 1;
            throttle.set(steps[step].bytes_per_s).unwrap();
        }
        std::thread::sleep(std::time::Duration::from_millis(1));
    }
    let end_bytes = throttle.written_bytes();
    counts.push(if end_bytes == last.1 {
        last
    } else {
        (started.elapsed().as_secs_f64(), end_bytes)
    });
    Counted {
        counts,
        still_s_max,
    }
}

/// Every plateau of `value` within 10 % of the kernel's: its rate between two counts and its
/// end at the second.
fn plateaus_match_the_kernel(value: &serde_json::Value, counts: &[Count]) {
    let plateaus = value["analysis"]["plateaus"].as_array().unwrap();
    assert_eq!(
        plateaus.len(),
        counts.len() - 1,
        "{plateaus:#?}\nthe kernel's counts: {counts:?}"
    );
    for (plateau, pair) in plateaus.iter().zip(counts.windows(2)) {
        let (kernel_rate, b1) = (kernel_rate(pair[0], pair[1]), pair[1].1);
        let rate = plateau["rate_bytes_per_s"].as_f64().unwrap();
        let end = plateau["end_bytes"].as_f64().unwrap();
        eprintln!(
            "plateau {:.0} MB/s to {end} B; the kernel: {:.0} MB/s to {b1} B",
            rate / 1e6,
            kernel_rate / 1e6
        );
        assert!(
            (rate / kernel_rate - 1.0).abs() <= 0.1,
            "{rate} not {kernel_rate}: {plateau:#}"
        );
        assert!(
            (end / b1 as f64 - 1.0).abs() <= 0.1,
            "{end} not {b1}: {plateau:#}"
        );
    }
}

#[test]
fn fill_finds_the_steps_of_a_kernel_throttle_within_ten_percent() {
    if nvrec_testkit::kept_for_full_run(SLOW) {
        return;
    }
    let _machine = alone();
    // A RAM-backed device whose write limit the kernel changes as the fill goes. The
    // throttle dispatches in bursts about every 100 ms, so the fill's windows (tens of ms)
    // swing between nothing and a burst: the plateaus must be the steps, not the bursts.
    const GIB: u64 = 1 << 30;
    let Some(device) = LoopDevice::new_filled(5 * GIB / 2) else {
        return;
    };
    let two_steps = [
        Step {
            bytes_per_s: 600_000_000,
            until_bytes: 3 * GIB / 2,
        },
        Step {
            bytes_per_s: 250_000_000,
            until_bytes: 5 * GIB / 2,
        },
    ];
    let Some((value, counts)) = fill_under_steps(&device, &two_steps) else {
        return;
    };
    plateaus_match_the_kernel(&value, &counts);
    // Three steps of about 4 s each: a plateau needs several windows at the scale where the
    // bursts average out.
    let three_steps = [
        Step {
            bytes_per_s: 380_000_000,
            until_bytes: 1_520_000_000,
        },
        Step {
            bytes_per_s: 190_000_000,
            until_bytes: 2_280_000_000,
        },
        Step {
            bytes_per_s: 95_000_000,
            until_bytes: 5 * GIB / 2,
        },
    ];
    let Some((value, counts)) = fill_under_steps(&device, &three_steps) else {
        return;
    };
    plateaus_match_the_kernel(&value, &counts);
}

#[test]
fn bad_bench_arguments_are_usage_errors() {
    let _machine = beside_others();
    for args in [
        vec!["bench", "fill", "sim:colour=blue"],
        vec!["bench", "fill", "sim:capacity=16M", "--size", "32M"],
        vec!["bench", "fill", "sim", "--window", "0"],
        vec!["bench", "overwrite", "sim", "--laps", "1"],
    ] {
        let output = run(nvrec().args(&args));
        assert_eq!(output.status.code(), Some(2), "{args:?}: {}", text(&output));
    }
}

#[test]
fn bench_refuses_a_device_holding_a_filesystem() {
    let _machine = beside_others();
    let Some(device) = LoopDevice::new(64 << 20) else {
        return;
    };
    let made = Command::new("mkfs.ext4")
        .args(["-q", "-F"])
        .arg(&device.device)
        .status();
    if !matches!(made, Ok(status) if status.success()) {
        nvrec_testkit::skip(nvrec_testkit::MKFS_EXT4, "mkfs.ext4 failed");
        return;
    }
    let output = run(nvrec().args(["bench", "fill"]).arg(&device.device));
    assert_eq!(output.status.code(), Some(3), "{}", text(&output));
    assert!(text(&output).contains("--force"), "{}", text(&output));
}

#[test]
fn bench_report_overlays_saved_benches_and_compares_them_to_the_first() {
    let _machine = beside_others();
    let scratch = Scratch::new("bench-compare");
    let save = |name: &str, args: &[&str]| {
        let path = scratch.path(&format!("{name}.json"));
        let output = run(nvrec().arg("bench").args(args).arg("--save").arg(&path));
        assert!(output.status.success(), "{name}: {}", text(&output));
        path
    };
    let fast = save(
        "fast",
        &[
            "fill",
            "sim:capacity=128M,cache=32M,fast=2.4GB/s,slow=1.6GB/s",
            "--window",
            "0.002",
        ],
    );
    let slow = save(
        "slow",
        &[
            "fill",
            "sim:capacity=128M,cache=32M,fast=2.4GB/s,slow=0.8GB/s",
            "--window",
            "0.002",
        ],
    );
    let sweep = save(
        "sweep",
        &[
            "sweep",
            "sim:capacity=64M",
            "--max-chunks",
            "64",
            "--runs",
            "1",
        ],
    );
    let cdm = save(
        "cdm",
        &[
            "profile",
            "cdm",
            "sim:capacity=64M",
            "--size",
            "16M",
            "--runs",
            "1",
            "--duration",
            "0.01",
        ],
    );
    let html = scratch.path("compare.html");
    let csv = scratch.path("compare.csv");
    let output = run(nvrec()
        .args(["--json", "bench", "report", "--output"])
        .arg(&html)
        .arg("--csv")
        .arg(&csv)
        .args([&fast, &slow, &sweep, &cdm]));
    assert!(output.status.success(), "{}", text(&output));
    let value = json(&output);
    let differences = value["differences"].as_array().unwrap();
    let row = |name: &str| {
        differences
            .iter()
            .find(|row| row["rate"] == name)
            .unwrap_or_else(|| panic!("no {name}: {value:#}"))
    };
    // Each file's rate as it saved it, and the difference against the first.
    let saved_rate = |path: &Path| -> f64 {
        let value: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
        value["summary"]["sustained_write_bytes_per_s"]
            .as_f64()
            .unwrap()
    };
    let sustained = row("fill: sustained write");
    let (a, b) = (saved_rate(&fast), saved_rate(&slow));
    assert_eq!(sustained["bytes_per_s"][0].as_f64(), Some(a));
    assert_eq!(sustained["bytes_per_s"][1].as_f64(), Some(b));
    let percent = sustained["percent_vs_first"][1].as_f64().unwrap();
    assert!(
        (percent - (b / a - 1.0) * 100.0).abs() < 1e-9,
        "{sustained}"
    );
    assert!(percent < -30.0, "the slower drive: {sustained}");
    assert!(
        sustained["bytes_per_s"][2].is_null(),
        "a sweep has no sustained write"
    );
    assert!(row("fill: plateau 1")["percent_vs_first"][1].is_number());
    assert!(row("sweep: peak read")["bytes_per_s"][2].as_f64().unwrap() > 0.0);
    assert!(
        row("profile: SEQ1M Q8T1 read")["bytes_per_s"][3]
            .as_f64()
            .unwrap()
            > 0.0
    );
    let csv = std::fs::read_to_string(&csv).unwrap();
    assert!(
        csv.starts_with("rate,file,bytes_per_s,percent_vs_first\n"),
        "{csv}"
    );
    assert!(
        csv.contains("\"fill: sustained write\",\"slow.json"),
        "{csv}"
    );
    let page = std::fs::read_to_string(&html).unwrap();
    for expected in [
        "Fills: bandwidth over time",
        "Sweeps",
        "Profiles",
        "Plateaus of each fill",
        "Differences",
    ] {
        assert!(page.contains(expected), "{expected}");
    }
    let charts = page.matches("<svg class=\"chart\"").count();
    // The fills, sweeps and profiles overlaid, and the two fill drives' continuous bars (no
    // drive has both a sweep and a fill, so no peak against continuous).
    assert_eq!(charts, 4, "fills, sweeps, profiles, continuous");
    assert!(page.contains("Not drawn: peak against continuous needs a sweep and a fill"));
    if let Some((rendered, failed)) = rendered_chart_count(&html) {
        assert_eq!((rendered, failed), (charts, 0));
    }
    let not_bench = scratch.path("other.json");
    std::fs::write(&not_bench, "{\"meta\": {}}").unwrap();
    let output = run(nvrec()
        .args(["bench", "report", "--output"])
        .arg(&html)
        .arg(&not_bench));
    assert_eq!(output.status.code(), Some(2), "{}", text(&output));
    assert!(
        text(&output).contains("not a saved bench"),
        "{}",
        text(&output)
    );
}

#[test]
fn reports_render_in_headless_chromium() {
    if nvrec_testkit::kept_for_full_run(SLOW) {
        return;
    }
    let _machine = beside_others();
    let scratch = Scratch::new("bench-render");
    for (name, args) in [
        (
            "fill",
            vec!["fill", "sim:capacity=512M,cache=128M", "--window", "0.01"],
        ),
        (
            "sweep",
            vec![
                "sweep",
                "sim:capacity=256M",
                "--max-chunks",
                "256",
                "--runs",
                "1",
            ],
        ),
        (
            "overwrite",
            vec!["overwrite", "sim:capacity=256M", "--window", "0.01"],
        ),
        (
            "cdm",
            vec![
                "profile",
                "cdm-nvme",
                "sim:capacity=256M",
                "--size",
                "64M",
                "--duration",
                "0.05",
                "--runs",
                "2",
            ],
        ),
        (
            "atto",
            vec!["profile", "atto", "sim:capacity=256M", "--runs", "1"],
        ),
    ] {
        let html = scratch.path(&format!("{name}.html"));
        let output = run(nvrec().arg("bench").args(&args).arg("--report").arg(&html));
        assert!(output.status.success(), "{name}: {}", text(&output));
        let page = std::fs::read_to_string(&html).unwrap();
        let charts = page.matches("<svg class=\"chart\"").count();
        assert!(charts >= 1, "{name}");
        let Some((rendered, failed)) = rendered_chart_count(&html) else {
            return;
        };
        assert_eq!((rendered, failed), (charts, 0), "{name}");
    }
}

/// Charts of one section of a report drawn by headless Chromium: the page opened at the
/// section's id shows that section alone, so its charts draw and every other chart is hidden
/// (and counts as not drawn). `None` where no Chromium is installed (the skip is said).
fn rendered_in_section(html: &Path, id: &str) -> Option<(usize, usize)> {
    rendered_chart_count(Path::new(&format!("{}#{id}", html.display())))
}

/// The charts a section of the page holds, by its id.
fn section_chart_count(page: &str, id: &str) -> usize {
    let start = page
        .find(&format!("<section id=\"{id}\">"))
        .unwrap_or_else(|| panic!("no section {id}"));
    let end = start + page[start..].find("</section>").unwrap();
    page[start..end].matches("<svg class=\"chart\"").count()
}

#[test]
fn bench_report_draws_each_drive_beside_the_others_and_every_picture_renders() {
    if nvrec_testkit::kept_for_full_run(SLOW) {
        return;
    }
    let _machine = beside_others();
    let scratch = Scratch::new("bench-drives");
    let save = |name: &str, args: &[&str]| {
        let path = scratch.path(&format!("{name}.json"));
        let output = run(nvrec().arg("bench").args(args).arg("--save").arg(&path));
        assert!(output.status.success(), "{name}: {}", text(&output));
        path
    };
    let saved = |path: &Path| -> serde_json::Value {
        serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
    };
    // Two simulated drives, each filled and swept; the first rated by its own bench.
    let fast = "sim:capacity=128M,cache=32M,fast=2.4GB/s,slow=1.6GB/s,read=3.2GB/s";
    let slow = "sim:capacity=128M,cache=16M,fast=2GB/s,slow=0.6GB/s,read=2.4GB/s";
    let sweep = ["--max-chunks", "256", "--runs", "1"];
    let fast_fill = save("fast-fill", &["fill", fast, "--window", "0.002"]);
    let fast_sweep = save(
        "fast-sweep",
        &[&["sweep", fast, "--rated", "3500,3000"][..], &sweep].concat(),
    );
    let slow_fill = save("slow-fill", &["fill", slow, "--window", "0.002"]);
    let slow_sweep = save("slow-sweep", &[&["sweep", slow][..], &sweep].concat());
    // A file swept with direct I/O and through the page cache.
    let file = scratch.path("drive.img");
    std::fs::File::create(&file)
        .unwrap()
        .set_len(32 << 20)
        .unwrap();
    let file = file.to_str().unwrap();
    let small = ["--max-chunks", "64", "--runs", "1"];
    let direct = save("direct", &[&["sweep", file][..], &small].concat());
    let buffered = save(
        "buffered",
        &[&["sweep", file, "--buffered"][..], &small].concat(),
    );
    let html = scratch.path("drives.html");
    let output = run(nvrec()
        .args(["--json", "bench", "report", "--output"])
        .arg(&html)
        .args(["--rated", "sim 2=2500,2000", "--rated", "1000,900"])
        .args([
            &fast_fill,
            &fast_sweep,
            &slow_fill,
            &slow_sweep,
            &direct,
            &buffered,
        ]));
    assert!(output.status.success(), "{}", text(&output));
    let value = json(&output);
    let drives = value["drives"].as_array().unwrap();
    let labels: Vec<&str> = drives
        .iter()
        .map(|d| d["label"].as_str().unwrap())
        .collect();
    assert_eq!(labels, ["sim 1", "sim 2", "drive.img"]);
    // Each figure is the saved bench's own.
    for (drive, fill, sweep) in [(0, &fast_fill, &fast_sweep), (1, &slow_fill, &slow_sweep)] {
        let (fill, sweep, drive) = (saved(fill), saved(sweep), &drives[drive]);
        assert_eq!(
            drive["continuous_write_bytes_per_s"],
            fill["summary"]["mean_write_bytes_per_s"]
        );
        assert_eq!(
            drive["continuous_read_bytes_per_s"],
            fill["summary"]["read_bytes_per_s"]
        );
        assert_eq!(
            drive["peak_write_bytes_per_s"],
            sweep["summary"]["peak_write_bytes_per_s"]
        );
        assert_eq!(
            drive["peak_read_bytes_per_s"],
            sweep["summary"]["peak_read_bytes_per_s"]
        );
    }
    // The streamer's finding: the continuous write is below the peak, by the cache.
    for drive in &drives[..2] {
        assert!(
            drive["continuous_write_bytes_per_s"].as_f64()
                < drive["peak_write_bytes_per_s"].as_f64(),
            "{drive}"
        );
    }
    // Ratings: the bench's own, the report's for the drive, the report's for every drive.
    let rating = |index: usize| {
        (
            drives[index]["rated"]["write_bytes_per_s"]
                .as_f64()
                .unwrap(),
            drives[index]["rated_from"].as_str().unwrap(),
        )
    };
    assert_eq!(rating(0), (3e9, "bench"));
    assert_eq!(rating(1), (2e9, "report_for_the_drive"));
    assert_eq!(rating(2), (0.9e9, "report_for_every"));
    // The file: the direct sweep is its peak, the buffered one only beside it.
    let file_drive = &drives[2];
    assert_eq!(file_drive["sweep_count"], 1);
    assert_eq!(
        file_drive["peak_write_bytes_per_s"],
        saved(&direct)["summary"]["peak_write_bytes_per_s"]
    );
    let points = file_drive["page_cache"].as_array().unwrap();
    assert_eq!(points.len(), 7, "1 to 64 chunks");
    let largest = points.last().unwrap();
    assert_eq!(largest["bytes"], 8 << 20);
    assert_eq!(
        largest["buffered_write_bytes_per_s"],
        saved(&buffered)["points"][6]["write"]["mean_bytes_per_s"]
    );
    assert!(file_drive["page_cache_drop"].is_string());
    // Every picture on the page, each drawn by Chromium.
    let page = std::fs::read_to_string(&html).unwrap();
    let pictures = [
        ("continuous-write-and-read", 1),
        ("peak-against-continuous", 2),
        ("measured-against-rated", 2),
        ("direct-against-page-cache", 2),
    ];
    for (id, charts) in pictures {
        assert_eq!(section_chart_count(&page, id), charts, "{id}");
    }
    let all = page.matches("<svg class=\"chart\"").count();
    let Some(whole) = rendered_chart_count(&html) else {
        return;
    };
    assert_eq!(whole, (all, 0));
    for (id, charts) in pictures {
        assert_eq!(
            rendered_in_section(&html, id),
            Some((charts, all - charts)),
            "{id}: its charts drawn, the rest hidden"
        );
    }
}

#[test]
fn bench_report_refuses_a_rating_it_cannot_use_and_writes_nothing() {
    let _machine = beside_others();
    let scratch = Scratch::new("bench-drives-bad");
    let fill = scratch.path("fill.json");
    let output = run(nvrec()
        .args([
            "bench",
            "fill",
            "sim:capacity=64M",
            "--window",
            "0.002",
            "--save",
        ])
        .arg(&fill));
    assert!(output.status.success(), "{}", text(&output));
    let html = scratch.path("report.html");
    for (rated, says) in [
        (
            "nvme9n1=3500,3000",
            "no saved bench measured a drive of that name",
        ),
        ("3500", "--rated '3500'"),
        ("=3500,3000", "name the drive"),
    ] {
        let output = run(nvrec()
            .args(["bench", "report", "--rated", rated, "--output"])
            .arg(&html)
            .arg(&fill));
        assert_eq!(output.status.code(), Some(2), "{rated}: {}", text(&output));
        assert!(text(&output).contains(says), "{rated}: {}", text(&output));
        assert!(!html.exists(), "{rated}: a report was written");
    }
}

#[test]
fn buffered_write_read_and_sweep_go_through_the_page_cache_dropped_first() {
    if nvrec_testkit::kept_for_full_run(SLOW) {
        return;
    }
    let _machine = beside_others();
    let scratch = Scratch::new("bench-buffered");
    let file = scratch.path("buffered.img");
    let write = json(&run(nvrec()
        .args(["--json", "write", "--size", "16M", "--buffered"])
        .arg(&file)));
    assert_eq!(write["outcome"], "complete", "{write}");
    assert_eq!(write["buffered"], true);
    assert!(write["flush_s"].as_f64().is_some(), "timed to its flush");
    let drop = &write["cache_drop"];
    assert!(
        ["fadvise", "drop_caches"].contains(&drop["method"].as_str().unwrap()),
        "{drop}"
    );
    assert_eq!(drop["cached_bytes_after"], 0, "{drop}");
    let read = json(&run(nvrec()
        .args([
            "--json",
            "read",
            "--size",
            "16M",
            "--buffered",
            "--check",
            "pattern",
        ])
        .arg(&file)));
    assert_eq!(read["check"]["bad_chunk_count"], 0, "{read}");
    assert_eq!(read["buffered"], true);
    assert_eq!(read["cache_drop"]["cached_bytes_after"], 0, "{read}");
    // Direct I/O says so too, and drops nothing.
    let direct = json(&run(nvrec()
        .args(["--json", "read", "--size", "16M", "--check", "pattern"])
        .arg(&file)));
    assert_eq!(
        (&direct["buffered"], &direct["cache_drop"]),
        (&false.into(), &serde_json::Value::Null)
    );
    let output = run(nvrec()
        .args(["write", "--buffered", "--size", "16M"])
        .arg(&file));
    assert!(
        text(&output)
            .contains("page cache    buffered, not O_DIRECT; its cache dropped first by fdatasync"),
        "{}",
        text(&output)
    );

    let sweep = json(&run(nvrec()
        .args([
            "--json",
            "bench",
            "sweep",
            "--buffered",
            "--max-chunks",
            "32",
            "--runs",
            "1",
        ])
        .arg(&file)));
    assert_eq!(sweep["buffered"], true);
    assert_eq!(sweep["summary"]["verified"], true);
    assert_eq!(sweep["cache_drop"]["cached_bytes_after"], 0, "{sweep}");
    assert!(sweep["meta"]["settings"]
        .as_array()
        .unwrap()
        .iter()
        .any(|setting| setting[0] == "io" && setting[1] == "page cache (--buffered)"));
    let direct = json(&run(nvrec()
        .args([
            "--json",
            "bench",
            "sweep",
            "--max-chunks",
            "32",
            "--runs",
            "1",
        ])
        .arg(&file)));
    assert_eq!(direct["buffered"], false);

    // What cannot be measured this way is refused before anything is written.
    let never = scratch.path("never.img");
    for args in [
        vec![
            "write",
            "--buffered",
            "--no-flush",
            "--size",
            "1M",
            never.to_str().unwrap(),
        ],
        vec!["bench", "sweep", "--buffered", "sim:capacity=64M"],
    ] {
        let output = run(nvrec().args(&args));
        assert_eq!(output.status.code(), Some(2), "{args:?}: {}", text(&output));
        assert!(!never.exists(), "{args:?}");
    }
    let output = run(nvrec().args(["bench", "sweep", "--buffered", "sim:capacity=64M"]));
    assert!(
        text(&output).contains("the simulated drive has no page cache"),
        "{}",
        text(&output)
    );
}
