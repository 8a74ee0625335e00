//! `nvrec bench ... TARGET TARGET ...` end to end: benches on two and three files and loop
//! devices at once (a line per drive, the aggregate, the sum alone and the share, in JSON,
//! text, CSV and the HTML report rendered in Chromium), drives of unequal speed under a blkio
//! throttle, `bench report` over saved benches on several drives, and the refusals (the same
//! target twice, a disk and its partition, a loop device and its file, a simulated drive
//! beside a real one) with nothing written.

mod common;

use common::{json, nvrec, rendered_chart_count, run, text, LoopDevice, Scratch, Throttle};
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::Command;

/// What this file's slowest tests, kept for the full run (`NVREC_FULL_TESTS=1`), cover.
const SLOW: &str = "benches of several drives at once, unequal drives, their reports in Chromium";

/// The throttle test measures rates the machine must hold, so it runs alone; the other tests
/// run beside each other.
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

/// Files of `size_bytes` each, made before the bench (a bench never grows a file).
fn files(scratch: &Scratch, count: usize, size_bytes: u64) -> Vec<String> {
    (0..count)
        .map(|index| {
            let path = scratch.path(&format!("drive{index}.img"));
            std::fs::File::create(&path)
                .unwrap()
                .set_len(size_bytes)
                .unwrap();
            path.to_str().unwrap().to_string()
        })
        .collect()
}

/// Runs `bench ARGS TARGETS --json` with every output and checks the shape common to every
/// bench on several drives: a drive and a together run each, the runs alone, every figure
/// with a rate per drive, the aggregate, the sum alone and the share.
fn together(scratch: &Scratch, name: &str, args: &[&str], targets: &[String]) -> Value {
    let [saved, csv, html] =
        ["json", "csv", "html"].map(|ext| scratch.path(&format!("{name}.{ext}")));
    let output = run(nvrec()
        .args(["--json", "bench"])
        .args(args)
        .args(targets)
        .arg("--save")
        .arg(&saved)
        .arg("--csv")
        .arg(&csv)
        .arg("--report")
        .arg(&html));
    assert!(output.status.success(), "{name}: {}", text(&output));
    let value = json(&output);
    assert_eq!(value["schema"], "nvrec.bench.together", "{name}");
    assert_eq!(value["schema_version"], 1);
    assert_eq!(value["bench"], args[0]);
    let drives = value["drives"].as_array().unwrap();
    assert_eq!(drives.len(), targets.len(), "{name}");
    for (drive, target) in drives.iter().zip(targets) {
        // A simulated drive is named "sim".
        let name = if target.starts_with("sim:") {
            "sim"
        } else {
            target
        };
        assert_eq!(drive["target"]["name"], name);
        assert_eq!(drive["together"]["meta"]["schema"], "nvrec.bench");
        assert_eq!(drive["alone"]["meta"]["target"]["name"], name);
    }
    let figures = value["figures"].as_array().unwrap();
    assert!(!figures.is_empty(), "{name}: no figures");
    for figure in figures {
        let rates = figure["together_bytes_per_s"].as_array().unwrap();
        let alone = figure["alone_bytes_per_s"].as_array().unwrap();
        assert_eq!((rates.len(), alone.len()), (targets.len(), targets.len()));
        assert!(
            rates
                .iter()
                .chain(alone)
                .all(|rate| rate.as_f64().unwrap() > 0.0),
            "{figure}"
        );
        let sum_alone: f64 = alone.iter().map(|rate| rate.as_f64().unwrap()).sum();
        let reported = figure["alone_sum_bytes_per_s"].as_f64().unwrap();
        assert!((reported / sum_alone - 1.0).abs() < 1e-9, "{figure}");
        let aggregate = figure["aggregate_bytes_per_s"].as_f64().unwrap();
        assert!(aggregate > 0.0, "{figure}");
        let share = figure["share_percent"].as_f64().unwrap();
        assert!(
            (share - aggregate / reported * 100.0).abs() < 1e-6,
            "{figure}"
        );
    }
    let saved: Value = serde_json::from_str(&std::fs::read_to_string(&saved).unwrap()).unwrap();
    assert_eq!(saved["figures"], value["figures"]);
    let csv = std::fs::read_to_string(&csv).unwrap();
    // A row a drive and the aggregate's, for every figure.
    assert_eq!(
        csv.lines().count(),
        1 + figures.len() * (targets.len() + 1),
        "{csv}"
    );
    let html = std::fs::read_to_string(&html).unwrap();
    assert!(
        html.contains("drives at once"),
        "{name}: the report has no section for the drives"
    );
    value
}

fn figure<'a>(value: &'a Value, name: &str) -> &'a Value {
    value["figures"]
        .as_array()
        .unwrap()
        .iter()
        .find(|figure| figure["name"] == name)
        .unwrap_or_else(|| panic!("no figure {name}: {value}"))
}

fn rate(figure: &Value, pointer: &str) -> f64 {
    figure.pointer(pointer).and_then(Value::as_f64).unwrap()
}

/// Fill, sweep and a profile on `targets` at once.
fn every_shape(scratch: &Scratch, label: &str, targets: &[String]) {
    let fill = together(
        scratch,
        &format!("{label}-fill"),
        &["fill", "--size", "32M", "--window", "0.01"],
        targets,
    );
    for drive in fill["drives"].as_array().unwrap() {
        for run in ["together", "alone"] {
            assert_eq!(drive[run]["summary"]["bytes_written"], 32 << 20);
            assert_eq!(drive[run]["summary"]["verified"], true);
        }
    }
    let write = figure(&fill, "write");
    assert!(write["common_s"].as_f64().unwrap() > 0.0, "{write}");
    assert!(!write["aggregate_series"].as_array().unwrap().is_empty());
    figure(&fill, "read back");
    let sweep = together(
        scratch,
        &format!("{label}-sweep"),
        &["sweep", "--max-chunks", "16", "--runs", "1"],
        targets,
    );
    // Five chunk counts, written and read.
    assert_eq!(sweep["figures"].as_array().unwrap().len(), 10);
    figure(&sweep, "write 2 MiB");
    let profile = together(
        scratch,
        &format!("{label}-profile"),
        &[
            "profile",
            "custom",
            "--test",
            "SEQ1M-Q8T1",
            "--size",
            "16M",
            "--duration",
            "0.1",
            "--runs",
            "2",
        ],
        targets,
    );
    let names: Vec<&str> = profile["figures"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["SEQ1M Q8T1 read", "SEQ1M Q8T1 write"]);
}

#[test]
fn two_and_three_files_at_once() {
    if nvrec_testkit::kept_for_full_run(SLOW) {
        return;
    }
    let _machine = beside_others();
    let scratch = Scratch::new("together-files");
    let targets = files(&scratch, 3, 64 << 20);
    every_shape(&scratch, "two", &targets[..2]);
    every_shape(&scratch, "three", &targets);
    // A preset, the overwrite's phases, and --rated for each drive.
    let cdm6 = together(
        &scratch,
        "cdm6",
        &[
            "profile",
            "cdm6",
            "--size",
            "16M",
            "--duration",
            "0.05",
            "--runs",
            "1",
            "--rated",
            "3000,2000",
        ],
        &targets[..2],
    );
    assert_eq!(cdm6["figures"].as_array().unwrap().len(), 8);
    for drive in cdm6["drives"].as_array().unwrap() {
        let rated = drive["rated"]["figures"].as_array().unwrap();
        assert_eq!(rated.len(), 8, "{drive}");
    }
    let overwrite = together(
        &scratch,
        "overwrite",
        &[
            "overwrite",
            "--size",
            "32M",
            "--queue-depth",
            "4",
            "--window",
            "0.02",
            "--trim",
            "off",
        ],
        &targets[..2],
    );
    figure(&overwrite, "without TRIM before the wrap");
    figure(&overwrite, "without TRIM after the wrap");
}

#[test]
fn two_and_three_loop_devices_at_once() {
    if nvrec_testkit::kept_for_full_run(SLOW) {
        return;
    }
    let _machine = beside_others();
    let devices: Option<Vec<LoopDevice>> = (0..3).map(|_| LoopDevice::new(64 << 20)).collect();
    let Some(devices) = devices else {
        return;
    };
    let targets: Vec<String> = devices
        .iter()
        .map(|device| device.device.to_str().unwrap().to_string())
        .collect();
    let scratch = Scratch::new("together-loop");
    every_shape(&scratch, "two", &targets[..2]);
    every_shape(&scratch, "three", &targets);
}

#[test]
fn the_text_shows_each_drive_the_aggregate_and_the_sum_alone() {
    let _machine = beside_others();
    let output = run(nvrec().args([
        "bench",
        "fill",
        "sim:capacity=64M,cache=0,slow=2GB/s,read=3GB/s,latency=0,overwrite=1",
        "sim:capacity=64M,cache=0,slow=1GB/s,read=3GB/s,latency=0,overwrite=1",
        "--window",
        "0.001",
    ]));
    assert!(output.status.success(), "{}", text(&output));
    let out = String::from_utf8_lossy(&output.stdout);
    assert!(
        out.contains("fill on 2 drives at once, then each alone"),
        "{out}"
    );
    let write = out.lines().find(|line| line.starts_with("write ")).unwrap();
    // The name, op, each drive, the aggregate, "|", each alone, the sum alone, the share, "%".
    let cells: Vec<&str> = write.split_whitespace().collect();
    assert_eq!(cells.len(), 11, "{write}");
    let mb = |index: usize| cells[index].parse::<f64>().unwrap();
    // 2 GB/s and 1 GB/s, each the same alone: the simulated drives share nothing.
    assert!((mb(2) / 2000.0 - 1.0).abs() < 0.02, "{write}");
    assert!((mb(3) / 1000.0 - 1.0).abs() < 0.02, "{write}");
    assert!((mb(4) / 3000.0 - 1.0).abs() < 0.02, "{write}");
    assert!((mb(8) / 3000.0 - 1.0).abs() < 0.02, "{write}");
    assert!(cells[9].parse::<f64>().unwrap() > 98.0, "{write}");
}

/// An MBR with one Linux partition from 1 MiB on, as fdisk would write it.
fn partition_table(size_bytes: u64) -> [u8; 512] {
    let mut sector = [0u8; 512];
    let entry = &mut sector[446..462];
    entry[4] = 0x83;
    entry[8..12].copy_from_slice(&2048u32.to_le_bytes());
    entry[12..16].copy_from_slice(&((size_bytes / 512 - 2048) as u32).to_le_bytes());
    sector[510] = 0x55;
    sector[511] = 0xaa;
    sector
}

/// A loop device over a file with a partition table, its partition added (`partx -a`) and
/// given a node in `scratch` where no udev makes one in /dev; detached on drop.
struct PartitionedLoop {
    device: PathBuf,
    partition: PathBuf,
}

impl PartitionedLoop {
    fn new(scratch: &Scratch, size_bytes: u64) -> Option<PartitionedLoop> {
        let backing = scratch.path("disk.img");
        let file = std::fs::File::create(&backing).unwrap();
        file.set_len(size_bytes).unwrap();
        std::os::unix::fs::FileExt::write_all_at(&file, &partition_table(size_bytes), 0).unwrap();
        let output = Command::new("losetup")
            .args(["--find", "--show", "--partscan", "--direct-io=on"])
            .arg(&backing)
            .output()
            .ok()
            .filter(|output| output.status.success())?;
        let device = PathBuf::from(String::from_utf8_lossy(&output.stdout).trim());
        let name = device.file_name().unwrap().to_string_lossy().to_string();
        let disk = PartitionedLoop {
            partition: scratch.path(&format!("{name}p1")),
            device,
        };
        let _ = Command::new("partx").arg("-a").arg(&disk.device).status();
        let numbers = std::fs::read_to_string(format!("/sys/class/block/{name}p1/dev")).ok()?;
        let made = Command::new("mknod")
            .arg(&disk.partition)
            .arg("b")
            .args(numbers.trim().split(':'))
            .status();
        matches!(made, Ok(status) if status.success()).then_some(disk)
    }
}

impl Drop for PartitionedLoop {
    fn drop(&mut self) {
        for _ in 0..20 {
            let detached = Command::new("losetup").arg("-d").arg(&self.device).status();
            if matches!(detached, Ok(status) if status.success()) {
                return;
            }
            std::thread::sleep(std::time::Duration::from_millis(100));
        }
    }
}

/// Runs a refused bench: exit 2, the message names the reason, and nothing was written.
fn refused(args: &[&str], targets: &[&Path], says: &str, untouched: &[&Path]) {
    let before: Vec<Option<Vec<u8>>> = untouched
        .iter()
        .map(|path| std::fs::read(path).ok())
        .collect();
    let output = run(nvrec().arg("bench").args(args).args(targets));
    assert_eq!(
        output.status.code(),
        Some(2),
        "{targets:?}: {}",
        text(&output)
    );
    assert!(
        text(&output).contains(says),
        "{targets:?}: {}",
        text(&output)
    );
    let after: Vec<Option<Vec<u8>>> = untouched
        .iter()
        .map(|path| std::fs::read(path).ok())
        .collect();
    assert!(before == after, "{targets:?}: a refused bench wrote");
}

#[test]
fn the_same_drive_twice_is_refused_with_nothing_written() {
    let _machine = beside_others();
    let scratch = Scratch::new("together-refused");
    let a = scratch.path("a.img");
    let b = scratch.path("b.img");
    // Files with something in them: a bench that ran would overwrite it.
    std::fs::write(&a, vec![0xa5; 8 << 20]).unwrap();
    std::fs::write(&b, vec![0x5a; 8 << 20]).unwrap();
    let link = scratch.path("link.img");
    std::os::unix::fs::symlink(&a, &link).unwrap();
    let fill = ["fill", "--size", "4M"];
    refused(&fill, &[&a, &b, &a], "are the same target", &[&a, &b]);
    refused(&fill, &[&a, &link], "are the same target", &[&a, &b]);
    let sim = Path::new("sim:capacity=16M");
    refused(&fill, &[&b, sim], "simulated drive", &[&b]);
    // A file not made yet, named twice: not made either.
    let new = scratch.path("new.img");
    refused(&fill, &[&new, &new], "are the same target", &[]);
    assert!(!new.exists());
    // --runs with several targets.
    refused(
        &["fill", "--size", "4M", "--runs", "2"],
        &[&a, &b],
        "--runs",
        &[&a, &b],
    );
    let Some(device) = LoopDevice::new(16 << 20) else {
        return;
    };
    refused(
        &fill,
        &[&device.device, &device.backing],
        "is a loop device over",
        &[&device.backing],
    );
    let Some(disk) = PartitionedLoop::new(&scratch, 16 << 20) else {
        nvrec_testkit::skip(
            nvrec_testkit::LOSETUP,
            "no partition of a loop device (losetup --partscan, partx -a, mknod)",
        );
        return;
    };
    let fill_forced = ["fill", "--size", "4M", "--force"];
    refused(
        &fill_forced,
        &[&disk.device, &disk.partition],
        "is a partition of",
        &[&scratch.path("disk.img")],
    );
}

/// Drive 1 throttled to 40 MB/s by a blkio cgroup, drive 2 not: each drive's line is its
/// own rate, together and alone, and the aggregate adds them up.
#[test]
fn unequal_drives_each_keep_their_own_rate() {
    if nvrec_testkit::kept_for_full_run(SLOW) {
        return;
    }
    let _machine = alone();
    const LIMIT_BYTES_PER_S: u64 = 40_000_000;
    let (Some(slow), Some(fast)) = (
        LoopDevice::new_filled(64 << 20),
        LoopDevice::new_filled(64 << 20),
    ) else {
        return;
    };
    let Some(throttle) = Throttle::new(&slow, LIMIT_BYTES_PER_S) else {
        return;
    };
    let scratch = Scratch::new("together-throttle");
    let (stdout, stderr) = (scratch.path("out.json"), scratch.path("err.txt"));
    let (slow_name, fast_name) = (slow.device.to_str().unwrap(), fast.device.to_str().unwrap());
    // 256 KiB transfers: the throttle counts a larger one the block layer splits twice.
    let args = [
        "--json",
        "bench",
        "fill",
        slow_name,
        fast_name,
        "--size",
        "48M",
        "--io-size",
        "256K",
        "--window",
        "0.05",
        "--no-verify",
    ];
    let status = throttle.spawn(&args, &stdout, &stderr).wait().unwrap();
    let out = std::fs::read_to_string(&stdout).unwrap();
    assert!(
        status.success(),
        "{out}{}",
        std::fs::read_to_string(&stderr).unwrap()
    );
    let value: Value = serde_json::from_str(&out).unwrap();
    let write = figure(&value, "write");
    let limit = LIMIT_BYTES_PER_S as f64;
    for pointer in ["/together_bytes_per_s/0", "/alone_bytes_per_s/0"] {
        let slow_rate = rate(write, pointer);
        assert!(
            slow_rate > 0.6 * limit && slow_rate < 1.25 * limit,
            "{pointer}: {write}"
        );
    }
    for pointer in ["/together_bytes_per_s/1", "/alone_bytes_per_s/1"] {
        assert!(rate(write, pointer) > 3.0 * limit, "{pointer}: {write}");
    }
    // While both ran, the slow drive's 40 MB/s and the fast one's rate add up.
    let aggregate = rate(write, "/aggregate_bytes_per_s");
    assert!(
        aggregate > rate(write, "/together_bytes_per_s/0") + limit,
        "{write}"
    );
}

#[test]
fn reports_of_drives_at_once_render_in_chromium_and_overlay() {
    if nvrec_testkit::kept_for_full_run(SLOW) {
        return;
    }
    let _machine = beside_others();
    let scratch = Scratch::new("together-report");
    let sims = [
        "sim:capacity=64M,cache=16M,fast=2.4GB/s,slow=1GB/s,overwrite=1",
        "sim:capacity=64M,cache=8M,fast=2GB/s,slow=0.8GB/s,overwrite=1",
    ]
    .map(String::from);
    let first = together(&scratch, "first", &["fill", "--window", "0.002"], &sims);
    let files = files(&scratch, 2, 64 << 20);
    together(
        &scratch,
        "second",
        &["fill", "--size", "32M", "--window", "0.01"],
        &files,
    );
    let overlay = scratch.path("overlay.html");
    let output = run(nvrec()
        .args(["--json", "bench", "report", "--output"])
        .arg(&overlay)
        .arg(scratch.path("first.json"))
        .arg(scratch.path("second.json")));
    assert!(output.status.success(), "{}", text(&output));
    // Each drive of each file is a bench of its own in the comparison.
    let compared = json(&output);
    assert_eq!(compared["files"].as_array().unwrap().len(), 4, "{compared}");
    // Each drive's continuous write and read is its fill alone.
    let drives = compared["drives"].as_array().unwrap();
    assert_eq!(drives.len(), 4, "{compared}");
    assert_eq!(
        drives[0]["continuous_write_bytes_per_s"],
        first["drives"][0]["alone"]["summary"]["mean_write_bytes_per_s"]
    );
    let page = std::fs::read_to_string(&overlay).unwrap();
    assert_eq!(
        page.matches("drives at once").count(),
        2,
        "one section per file"
    );
    assert!(first["figures"].as_array().unwrap().len() >= 3);
    for html in [scratch.path("first.html"), overlay] {
        let Some((rendered, failed)) = rendered_chart_count(&html) else {
            return;
        };
        let charts = std::fs::read_to_string(&html)
            .unwrap()
            .matches("<svg")
            .count();
        assert_eq!((rendered, failed), (charts, 0), "{}", html.display());
        assert!(charts >= 3, "{}", html.display());
    }
}
