//! The raw pages and sysfs tree captured from QEMU's emulated NVMe controller by
//! `tests/qemu/capture-fixtures` (see the README beside them), decoded by nvrec and
//! compared with what nvme-cli made of the same bytes.

use nvrec::nvme::discover::{inventory, Probes};
use nvrec::nvme::page::{decode_identify_controller, decode_identify_namespace, decode_smart_log};
use nvrec::nvme::SmartReport;
use serde_json::Value;
use std::path::{Path, PathBuf};

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/qemu-nvme")
        .join(name)
}

fn bytes(name: &str) -> Vec<u8> {
    std::fs::read(fixture(name)).unwrap_or_else(|error| panic!("fixture {name}: {error}"))
}

fn json(name: &str) -> Value {
    serde_json::from_slice(&bytes(name)).unwrap()
}

/// nvme-cli prints big counters as strings.
fn number(value: &Value) -> u64 {
    match value {
        Value::Number(number) => number.as_u64().unwrap(),
        Value::String(text) => text.replace(',', "").parse().unwrap(),
        other => panic!("not a number: {other}"),
    }
}

#[test]
fn smart_log_matches_nvme_cli() {
    let log = decode_smart_log(&bytes("smart-log.bin")).unwrap();
    let ours = serde_json::to_value(SmartReport::new(&log)).unwrap();
    let theirs = json("smart-log.json");
    let pairs = [
        ("critical_warning", "critical_warning"),
        ("composite_temperature_kelvin", "temperature"),
        ("available_spare_percent", "avail_spare"),
        ("available_spare_threshold_percent", "spare_thresh"),
        ("percentage_used", "percent_used"),
        ("data_units_read", "data_units_read"),
        ("data_units_written", "data_units_written"),
        ("host_read_commands", "host_read_commands"),
        ("host_write_commands", "host_write_commands"),
        ("controller_busy_time_minutes", "controller_busy_time"),
        ("power_cycles", "power_cycles"),
        ("power_on_hours", "power_on_hours"),
        ("unsafe_shutdowns", "unsafe_shutdowns"),
        ("media_errors", "media_errors"),
        ("error_log_entries", "num_err_log_entries"),
        ("warning_temperature_time_minutes", "warning_temp_time"),
        ("critical_temperature_time_minutes", "critical_comp_time"),
    ];
    for (our_key, their_key) in pairs {
        assert_eq!(
            number(&ours[our_key]),
            number(&theirs[their_key]),
            "{our_key} vs {their_key}"
        );
    }
    assert_eq!(
        number(&ours["thermal_transition_count"][0]),
        number(&theirs["thm_temp1_trans_count"])
    );
    assert_eq!(
        number(&ours["thermal_time_seconds"][1]),
        number(&theirs["thm_temp2_total_time"])
    );
    // The capture wrote and read data before reading the log: the counters moved.
    assert!(log.data_units_written > 0 && log.host_write_commands > 0);
}

#[test]
fn identify_controller_matches_nvme_cli() {
    let ours = decode_identify_controller(&bytes("id-ctrl.bin")).unwrap();
    let theirs = json("id-ctrl.json");
    assert_eq!(ours.model, theirs["mn"].as_str().unwrap().trim());
    assert_eq!(ours.serial, theirs["sn"].as_str().unwrap().trim());
    assert_eq!(ours.firmware, theirs["fr"].as_str().unwrap().trim());
    assert_eq!(ours.vendor_id as u64, number(&theirs["vid"]));
    assert_eq!(ours.controller_id as u64, number(&theirs["cntlid"]));
    assert_eq!(
        ours.warning_temperature_kelvin as u64,
        number(&theirs["wctemp"])
    );
    assert_eq!(
        ours.critical_temperature_kelvin as u64,
        number(&theirs["cctemp"])
    );
    assert_eq!(ours.namespace_count as u64, number(&theirs["nn"]));
    assert_eq!(ours.mdts as u64, number(&theirs["mdts"]));
    assert_eq!(ours.subsystem_vendor_id as u64, number(&theirs["ssvid"]));
    assert_eq!(ours.ieee_oui as u64, number(&theirs["ieee"]));
    let version = number(&theirs["ver"]);
    assert_eq!(
        ours.version,
        format!(
            "{}.{}.{}",
            version >> 16,
            (version >> 8) & 0xff,
            version & 0xff
        )
    );
    assert_eq!(
        ours.host_memory_buffer_preferred_bytes,
        number(&theirs["hmpre"]) * 4096
    );
    assert_eq!(
        ours.host_memory_buffer_min_bytes,
        number(&theirs["hmmin"]) * 4096
    );
    assert_eq!(
        ours.thermal_management_min_kelvin as u64,
        number(&theirs["mntmt"])
    );
    assert_eq!(
        ours.thermal_management_max_kelvin as u64,
        number(&theirs["mxtmt"])
    );
    assert_eq!(
        ours.total_capacity_bytes,
        number(&theirs["tnvmcap"]) as u128
    );
    assert_eq!(
        ours.unallocated_capacity_bytes,
        number(&theirs["unvmcap"]) as u128
    );
    assert_eq!(
        ours.subsystem_nqn,
        theirs["subnqn"].as_str().unwrap().trim()
    );
}

#[test]
fn identify_namespace_matches_nvme_cli() {
    let ours = decode_identify_namespace(&bytes("id-ns.bin")).unwrap();
    let theirs = json("id-ns.json");
    assert_eq!(ours.size_blocks, number(&theirs["nsze"]));
    assert_eq!(ours.capacity_blocks, number(&theirs["ncap"]));
    assert_eq!(ours.used_blocks, number(&theirs["nuse"]));
    let formats = theirs["lbafs"].as_array().unwrap();
    assert_eq!(ours.formats.len(), formats.len());
    for (ours, theirs) in ours.formats.iter().zip(formats) {
        assert_eq!(ours.data_bytes as u64, 1 << number(&theirs["ds"]));
        assert_eq!(ours.metadata_bytes as u64, number(&theirs["ms"]));
        assert_eq!(ours.relative_performance as u64, number(&theirs["rp"]));
    }
    assert_eq!(ours.format_in_use as u64, number(&theirs["flbas"]) & 0xf);
    assert_eq!(ours.block_bytes(), Some(512));
}

#[test]
fn the_captured_sysfs_tree_is_found() {
    let root = std::env::temp_dir().join(format!("nvrec-sysfs-fixture-{}", std::process::id()));
    std::fs::create_dir_all(&root).unwrap();
    let status = std::process::Command::new("tar")
        .arg("-xf")
        .arg(fixture("sysfs.tar.gz"))
        .arg("-C")
        .arg(&root)
        .status()
        .expect("tar runs");
    assert!(status.success());
    let found = inventory(
        &root,
        Probes {
            identify: false,
            usage: false,
        },
    );
    std::fs::remove_dir_all(&root).unwrap();
    let id = json("id-ctrl.json");
    assert_eq!(found.controllers.len(), 1);
    let controller = &found.controllers[0];
    assert_eq!(controller.name, "nvme0");
    assert_eq!(
        controller.serial.as_deref(),
        Some(id["sn"].as_str().unwrap().trim())
    );
    assert_eq!(
        controller.model.as_deref(),
        Some(id["mn"].as_str().unwrap().trim())
    );
    assert_eq!(controller.transport.as_deref(), Some("pcie"));
    assert!(controller.temperature_celsius.is_some());
    // QEMU's function reports its link as "Unknown", width 0 of 255: read as it is.
    let link = controller.pcie_link.as_ref().expect("the PCIe link files");
    assert_eq!(link.current_speed, "Unknown");
    assert_eq!((link.current_width, link.max_width), (0, 255));
    assert_eq!(controller.namespaces.len(), 1);
    let namespace = &controller.namespaces[0];
    let ns = json("id-ns.json");
    assert_eq!(namespace.capacity_bytes, number(&ns["nsze"]) * 512);
    assert_eq!(namespace.logical_block_bytes, 512);
}

#[test]
fn nvme_list_agrees_with_the_decoded_pages() {
    let controller = decode_identify_controller(&bytes("id-ctrl.bin")).unwrap();
    let namespace = decode_identify_namespace(&bytes("id-ns.bin")).unwrap();
    let list = json("list.json");
    let devices = list["Devices"].as_array().unwrap();
    assert_eq!(devices.len(), 1);
    let device = &devices[0];
    assert_eq!(device["DevicePath"].as_str(), Some("/dev/nvme0n1"));
    assert_eq!(
        device["ModelNumber"].as_str().unwrap().trim(),
        controller.model
    );
    assert_eq!(
        device["SerialNumber"].as_str().unwrap().trim(),
        controller.serial
    );
    assert_eq!(
        device["Firmware"].as_str().unwrap().trim(),
        controller.firmware
    );
    assert_eq!(
        Some(number(&device["SectorSize"]) as u32),
        namespace.block_bytes()
    );
    assert_eq!(
        number(&device["PhysicalSize"]),
        number(&json("id-ns.json")["nsze"]) * number(&device["SectorSize"])
    );
}
