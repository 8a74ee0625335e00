//! End-to-end tests of `nvrec devices` and `nvrec health` on the machine the tests run on.
//!
//! Read-only by construction: `devices` opens block devices read-only to look for signatures,
//! `health` opens only NVMe nodes, read-only, and nothing here writes to any device. Where the
//! machine has no NVMe controller (a virtual machine with a virtio disk), the NVMe half is
//! skipped with the reason printed and the non-NVMe answers are checked instead.

mod common;

use common::*;
use std::path::{Path, PathBuf};

/// Kernel names under `dir`, sorted (empty when it does not exist).
fn names(dir: &str) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .map(|entries| {
            entries
                .flatten()
                .map(|entry| entry.file_name().to_string_lossy().into_owned())
                .collect()
        })
        .unwrap_or_default();
    names.sort();
    names
}

/// Block devices `devices` must list besides NVMe: all but ram disks and unused loop devices.
fn other_block_devices() -> Vec<String> {
    names("/sys/block")
        .into_iter()
        .filter(|name| !name.starts_with("nvme") && !name.starts_with("ram"))
        .filter(|name| {
            !name.starts_with("loop")
                || std::fs::read_to_string(format!("/sys/block/{name}/loop/backing_file"))
                    .is_ok_and(|file| !file.trim().is_empty())
        })
        .collect()
}

/// A block device that is not NVMe, for the "not an NVMe device" answers.
fn non_nvme_block_device() -> Option<PathBuf> {
    let preferred = Path::new("/dev/vda");
    if preferred.exists() {
        return Some(preferred.to_path_buf());
    }
    other_block_devices()
        .into_iter()
        .map(|name| PathBuf::from("/dev").join(name))
        .find(|path| path.exists())
}

#[test]
fn devices_lists_controllers_then_other_block_devices() {
    let output = run(nvrec().arg("devices"));
    assert!(output.status.success(), "{}", text(&output));
    let stdout = String::from_utf8_lossy(&output.stdout);
    let controllers = names("/sys/class/nvme");
    if controllers.is_empty() {
        assert!(
            stdout.starts_with("no NVMe controllers found\n"),
            "{stdout}"
        );
    } else {
        for controller in &controllers {
            assert!(
                stdout.contains(&format!("{controller}  ")),
                "{controller}: {stdout}"
            );
        }
    }
    let others = other_block_devices();
    if !others.is_empty() {
        assert!(stdout.contains("other block devices:"), "{stdout}");
    }
    for name in &others {
        assert!(
            stdout.contains(&format!("/dev/{name}  ")),
            "{name} missing: {stdout}"
        );
    }
    for name in names("/sys/block") {
        if name.starts_with("ram") {
            assert!(!stdout.contains(&format!("/dev/{name} ")), "{stdout}");
        }
    }
}

#[test]
fn devices_json_has_every_device_with_its_facts() {
    let output = run(nvrec().args(["--json", "devices"]));
    assert!(output.status.success(), "{}", text(&output));
    let report = json(&output);
    let controllers = report["controllers"].as_array().expect("controllers");
    let found: Vec<&str> = controllers
        .iter()
        .map(|controller| controller["name"].as_str().unwrap())
        .collect();
    assert_eq!(found, names("/sys/class/nvme"));
    for controller in controllers {
        for key in [
            "model",
            "serial",
            "firmware",
            "transport",
            "address",
            "numa_node",
            "pcie_link",
            "namespaces",
        ] {
            assert!(controller.get(key).is_some(), "{key} missing: {controller}");
        }
    }
    let devices = report["block_devices"].as_array().expect("block_devices");
    let found: Vec<&str> = devices
        .iter()
        .map(|device| device["name"].as_str().unwrap())
        .collect();
    let mut found_sorted = found.clone();
    found_sorted.sort();
    assert_eq!(found_sorted, other_block_devices());
    for device in devices {
        let name = device["name"].as_str().unwrap();
        let sectors: u64 = std::fs::read_to_string(format!("/sys/block/{name}/size"))
            .unwrap()
            .trim()
            .parse()
            .unwrap();
        assert_eq!(device["capacity_bytes"], sectors * 512, "{name}");
        let block: u64 =
            std::fs::read_to_string(format!("/sys/block/{name}/queue/logical_block_size"))
                .unwrap()
                .trim()
                .parse()
                .unwrap();
        assert_eq!(device["logical_block_bytes"], block, "{name}");
        let usage = &device["usage"];
        assert!(usage["mounted"].is_array(), "{device}");
        // Either the first blocks were read (a signature or none) or why not is said.
        assert!(
            usage["signature_unknown"].is_null() || usage["signature_unknown"].is_string(),
            "{device}"
        );
    }
}

#[test]
fn devices_quick_reads_sysfs_only() {
    let output = run(nvrec().args(["--json", "devices", "--quick"]));
    assert!(output.status.success(), "{}", text(&output));
    let report = json(&output);
    for device in report["block_devices"].as_array().unwrap() {
        assert!(device["usage"].is_null(), "{device}");
    }
}

#[test]
fn health_of_a_non_nvme_device_says_so_and_exits_1() {
    let Some(device) = non_nvme_block_device() else {
        nvrec_testkit::skip(
            nvrec_testkit::NON_NVME_BLOCK_DEVICE,
            "no block device other than NVMe on this machine",
        );
        return;
    };
    let output = run(nvrec().arg("health").arg(&device));
    assert_eq!(output.status.code(), Some(1), "{}", text(&output));
    let stdout = String::from_utf8_lossy(&output.stdout);
    let first_line = stdout.lines().next().unwrap_or_default();
    assert!(
        first_line.starts_with(&format!("{} is not an NVMe device (", device.display())),
        "{stdout}"
    );
    assert!(
        first_line.ends_with("); SMART data needs an NVMe controller"),
        "{stdout}"
    );
    if device == Path::new("/dev/vda") {
        assert_eq!(
            first_line,
            "/dev/vda is not an NVMe device (virtio); SMART data needs an NVMe controller"
        );
    }
    assert!(stdout.contains("capacity"), "{stdout}");

    let output = run(nvrec().arg("--json").arg("health").arg(&device));
    assert_eq!(output.status.code(), Some(1), "{}", text(&output));
    let report = json(&output);
    assert_eq!(report["device"], device.display().to_string());
    assert_eq!(report["nvme"], false);
    assert_eq!(report["message"], first_line);
    assert!(report["sysfs"]["capacity_bytes"].is_u64(), "{report}");
}

#[test]
fn health_of_a_bad_path_is_a_usage_error() {
    let scratch = Scratch::new("health");
    let missing = scratch.path("no-such-device");
    let output = run(nvrec().arg("health").arg(&missing));
    assert_eq!(output.status.code(), Some(2), "{}", text(&output));
    assert!(
        String::from_utf8_lossy(&output.stderr).contains("no-such-device"),
        "{}",
        text(&output)
    );

    let file = scratch.path("file.img");
    std::fs::write(&file, b"a regular file").unwrap();
    let output = run(nvrec().arg("health").arg(&file));
    assert_eq!(output.status.code(), Some(2), "{}", text(&output));
    assert!(
        String::from_utf8_lossy(&output.stderr).contains("is not a device"),
        "{}",
        text(&output)
    );

    let output = run(nvrec().arg("health"));
    assert_eq!(output.status.code(), Some(2), "{}", text(&output));
}

#[test]
fn health_of_an_nvme_controller_keeps_the_json_names() {
    let Some(controller) = names("/sys/class/nvme").into_iter().next() else {
        nvrec_testkit::skip(
            nvrec_testkit::NVME_CONTROLLER,
            "no NVMe controller on this machine",
        );
        return;
    };
    let device = PathBuf::from("/dev").join(&controller);
    let output = run(nvrec().arg("--json").arg("health").arg(&device));
    if output.status.code() == Some(2) || output.stdout.is_empty() {
        nvrec_testkit::skip(
            nvrec_testkit::NVME_CONTROLLER,
            format_args!(
                "the admin passthrough is not allowed here: {}",
                text(&output)
            ),
        );
        return;
    }
    let report = json(&output);
    for key in [
        "device",
        "controller",
        "model",
        "serial",
        "firmware",
        "warning_temperature_kelvin",
        "critical_temperature_kelvin",
        "smart",
    ] {
        assert!(report.get(key).is_some(), "{key} missing: {report}");
    }
    assert_eq!(report["controller"], controller.as_str());
    let smart = &report["smart"];
    for key in [
        "critical_warning",
        "critical_warnings",
        "composite_temperature_kelvin",
        "composite_temperature_celsius",
        "available_spare_percent",
        "available_spare_threshold_percent",
        "percentage_used",
        "data_units_read",
        "data_units_written",
        "data_read_bytes",
        "data_written_bytes",
        "host_read_commands",
        "host_write_commands",
        "controller_busy_time_minutes",
        "power_cycles",
        "power_on_hours",
        "unsafe_shutdowns",
        "media_errors",
        "error_log_entries",
        "warning_temperature_time_minutes",
        "critical_temperature_time_minutes",
        "temperature_sensors_kelvin",
        "thermal_transition_count",
        "thermal_time_seconds",
    ] {
        assert!(smart.get(key).is_some(), "{key} missing: {smart}");
    }
    assert_eq!(
        smart["data_written_bytes"].as_u64().unwrap(),
        smart["data_units_written"].as_u64().unwrap() * 512_000
    );
    let expected = if smart["critical_warning"] == 0 { 0 } else { 1 };
    assert_eq!(output.status.code(), Some(expected), "{}", text(&output));
}
