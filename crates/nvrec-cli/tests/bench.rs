//! `nvrec bench` end to end: every bench on a file, a loop device and the simulated drive
//! with JSON, CSV and the HTML report; the report rendered in headless Chromium. `nvrec plan`
//! has its own file, `plan.rs`.

mod common;

use common::{json, nvrec, run, text, LoopDevice, Scratch};
use std::path::Path;
use std::process::Command;

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
    let scratch = Scratch::new("bench-sim");
    every_bench(&scratch, "sim:capacity=256M,cache=32M", "sim");
}

#[test]
fn every_bench_runs_on_a_file() {
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
    let Some(device) = LoopDevice::new(128 << 20) else {
        return;
    };
    let scratch = Scratch::new("bench-loop");
    every_bench(&scratch, device.device.to_str().unwrap(), "loop");
}

#[test]
fn fill_finds_the_simulated_cliff_through_the_command_line() {
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

#[test]
fn bad_bench_arguments_are_usage_errors() {
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
    let Some(device) = LoopDevice::new(64 << 20) else {
        return;
    };
    let made = Command::new("mkfs.ext4")
        .args(["-q", "-F"])
        .arg(&device.device)
        .status();
    if !matches!(made, Ok(status) if status.success()) {
        eprintln!("skipping: mkfs.ext4 is not available");
        return;
    }
    let output = run(nvrec().args(["bench", "fill"]).arg(&device.device));
    assert_eq!(output.status.code(), Some(3), "{}", text(&output));
    assert!(text(&output).contains("--force"), "{}", text(&output));
}

/// Headless Chromium loads the page, runs its check script, and the count of charts that drew
/// something must equal the charts in the file.
fn rendered_chart_count(html: &Path) -> Option<(usize, usize)> {
    let browser = ["chromium", "chromium-browser", "google-chrome"]
        .into_iter()
        .find(|name| {
            Command::new(name)
                .arg("--version")
                .output()
                .is_ok_and(|out| out.status.success())
        });
    let Some(browser) = browser else {
        eprintln!("skipping: chromium not found (apt-get install chromium)");
        return None;
    };
    let output = Command::new(browser)
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--virtual-time-budget=5000",
            "--dump-dom",
        ])
        .arg(format!("file://{}", html.display()))
        .output()
        .expect("chromium runs");
    let dom = String::from_utf8_lossy(&output.stdout);
    let attribute = |name: &str| -> usize {
        let key = format!("{name}=\"");
        let start = dom
            .find(&key)
            .unwrap_or_else(|| panic!("{name} missing: the check script did not run\n{dom}"))
            + key.len();
        dom[start..].split('"').next().unwrap().parse().unwrap()
    };
    Some((
        attribute("data-charts-rendered"),
        attribute("data-charts-failed"),
    ))
}

#[test]
fn reports_render_in_headless_chromium() {
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
