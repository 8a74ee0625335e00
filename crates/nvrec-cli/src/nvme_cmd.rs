//! `nvrec devices` and `nvrec health`: what is attached, and how an NVMe drive is doing.

use anyhow::Result;
use clap::Args;
use nvrec::nvme::discover::{inventory, Controller, Inventory, Namespace, Probes};
use nvrec::nvme::page::kelvin_to_celsius;
use nvrec::nvme::{self, HealthReport, NvmeError};
use nvrec::unit::format_bytes;
use nvrec_app::{Class, UsageError};
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

#[derive(Args, Debug)]
pub struct DevicesArgs {
    /// Skip reading each device's first blocks and NVMe namespace data (sysfs only).
    #[arg(long)]
    quick: bool,
    /// Where sysfs is (for tests on a captured tree).
    #[arg(long, hide = true, default_value = "/sys")]
    sysfs_root: PathBuf,
}

/// Exit status of `nvrec health`: 0 for an NVMe drive with no critical warning bit set; 1 for
/// a critical warning, or a device that is not NVMe (its sysfs facts are still printed, but
/// there is no health to judge, so a script does not mistake it for a healthy drive); 2 for a
/// path that does not exist or is not a device node.
const HEALTH_EXIT_HELP: &str =
    "Exit status: 0 an NVMe drive with no critical warning; 1 a critical warning \
is set, or the device is not NVMe (what sysfs knows is still shown); 2 the path does not exist \
or is not a device.";

#[derive(Args, Debug)]
#[command(after_help = HEALTH_EXIT_HELP)]
pub struct HealthArgs {
    /// An NVMe namespace (/dev/nvme0n1) or controller (/dev/nvme0).
    device: PathBuf,
}

pub fn devices(args: DevicesArgs, json: bool) -> Result<Class> {
    let probes = Probes {
        identify: !args.quick,
        usage: !args.quick,
    };
    let found = inventory(&args.sysfs_root, probes);
    let groups = nvrec::device::pcie::uplink_groups(&args.sysfs_root);
    if json {
        let mut value = serde_json::to_value(&found)?;
        add_memberships(&mut value);
        value["pcie_uplinks"] = serde_json::to_value(&groups)?;
        outln!("{}", value);
    } else {
        out!("{}", devices_text(&found));
        out!("{}", pcie_text(&groups));
    }
    Ok(Class::Done)
}

/// Each uplink, its limit, and the drives behind it with every link up to the root port.
pub fn pcie_text(groups: &[nvrec::device::pcie::UplinkGroup]) -> String {
    let gb = |rate: Option<f64>| rate.map_or("?".to_string(), |r| format!("{:.2} GB/s", r / 1e9));
    let mut out = String::new();
    if groups.is_empty() {
        return out;
    }
    let _ = writeln!(out, "PCIe uplinks (drives grouped by the link they share):");
    for group in groups {
        let link = &group.uplink.link;
        let _ = writeln!(
            out,
            "  uplink {} ({} x{}, {}) under root port {}: {} drive(s), {} of links{}",
            group.uplink.address,
            link.current_speed,
            link.current_width,
            gb(group.limit_bytes_per_s),
            group.root_port.as_deref().unwrap_or("?"),
            group.drives.len(),
            gb(Some(group.drives_bytes_per_s)),
            if group.caps_drives {
                ": the uplink caps them"
            } else {
                ""
            }
        );
        for drive in &group.drives {
            let hops: Vec<String> = drive
                .hops
                .iter()
                .map(|hop| {
                    format!(
                        "{} {} x{}",
                        hop.address, hop.link.current_speed, hop.link.current_width
                    )
                })
                .collect();
            let _ = writeln!(out, "    {}: {}", drive.controller, hops.join(" -> "));
        }
    }
    out
}

/// Adds to each probed device's usage (`usage.nvrec`) the volume set it is a member of,
/// so that a device holding recordings is not taken for a free one.
fn add_memberships(value: &mut serde_json::Value) {
    let Some(object) = value.as_object_mut() else {
        return;
    };
    let mut devices: Vec<&mut serde_json::Value> = Vec::new();
    for (key, entries) in object.iter_mut() {
        let Some(entries) = entries.as_array_mut() else {
            continue;
        };
        match key.as_str() {
            "controllers" => {
                for controller in entries {
                    if let Some(namespaces) = controller["namespaces"].as_array_mut() {
                        devices.extend(namespaces.iter_mut());
                    }
                }
            }
            "block_devices" => devices.extend(entries.iter_mut()),
            _ => {}
        }
    }
    for device in devices {
        let Some(path) = device["path"].as_str().map(PathBuf::from) else {
            continue;
        };
        if let Some(usage) = device["usage"].as_object_mut() {
            let member = nvrec::recording::volume::membership(&path);
            usage.insert(
                "nvrec".into(),
                serde_json::to_value(member).unwrap_or_default(),
            );
        }
    }
}

fn usage_text(usage: &Option<nvrec::device::Usage>, path: &Path) -> String {
    let Some(usage) = usage else {
        return "-".to_string();
    };
    let mut parts: Vec<String> = Vec::new();
    if let Some(member) = nvrec::recording::volume::membership(path) {
        parts.push(member.describe());
    }
    parts.extend(
        usage
            .mounted
            .iter()
            .map(|mount| format!("mounted: {mount}")),
    );
    parts.extend(usage.swap.iter().map(|swap| format!("swap: {swap}")));
    if !usage.holders.is_empty() {
        parts.push(format!("held by {}", usage.holders.join(", ")));
    }
    if let Some(signature) = &usage.signature {
        parts.push(format!("holds {signature}"));
    }
    if parts.is_empty() {
        match &usage.signature_unknown {
            Some(why) => format!("unknown ({why})"),
            None => "free".to_string(),
        }
    } else {
        parts.join("; ")
    }
}

fn devices_text(found: &Inventory) -> String {
    let mut out = String::new();
    if found.controllers.is_empty() {
        let _ = writeln!(out, "no NVMe controllers found");
    }
    for controller in &found.controllers {
        controller_lines(&mut out, controller);
        for namespace in &controller.namespaces {
            namespace_line(&mut out, namespace);
        }
    }
    if !found.block_devices.is_empty() {
        let _ = writeln!(out, "other block devices:");
    }
    for device in &found.block_devices {
        let model = device
            .model
            .as_ref()
            .map(|model| format!("  {model}"))
            .unwrap_or_default();
        let backing = device
            .backing_file
            .as_ref()
            .map(|file| format!("  backed by {file}"))
            .unwrap_or_default();
        let facts = BlockFacts {
            path: &device.path,
            capacity_bytes: device.capacity_bytes,
            logical_block_bytes: device.logical_block_bytes,
            usage: &device.usage,
        };
        block_line(&mut out, &facts, &format!("{model}{backing}"));
    }
    out
}

/// A controller's identity, its PCIe link (flagged when below its maximum), NUMA node and
/// temperature.
fn controller_lines(out: &mut String, controller: &Controller) {
    let none = || "-".to_string();
    let _ = writeln!(
        out,
        "{}  {}  serial {}  firmware {}  {}{}",
        controller.name,
        controller.model.clone().unwrap_or_else(none),
        controller.serial.clone().unwrap_or_else(none),
        controller.firmware.clone().unwrap_or_else(none),
        controller.transport.clone().unwrap_or_else(none),
        controller
            .address
            .as_ref()
            .map(|address| format!(" {address}"))
            .unwrap_or_default()
    );
    if let Some(link) = &controller.pcie_link {
        let degraded = link.current_speed != link.max_speed || link.current_width != link.max_width;
        let _ = writeln!(
            out,
            "    PCIe link {} x{} (max {} x{}){}",
            link.current_speed,
            link.current_width,
            link.max_speed,
            link.max_width,
            if degraded { "  BELOW ITS MAXIMUM" } else { "" }
        );
    }
    let mut facts = Vec::new();
    if let Some(node) = controller.numa_node {
        facts.push(format!("NUMA node {node}"));
    }
    if let Some(celsius) = controller.temperature_celsius {
        facts.push(format!("{celsius:.0} °C"));
    }
    if !facts.is_empty() {
        let _ = writeln!(out, "    {}", facts.join(", "));
    }
}

/// A namespace's size, block size, LBA formats (the one in use starred) and what uses it.
fn namespace_line(out: &mut String, namespace: &Namespace) {
    let formats: Vec<String> = namespace
        .lba_formats
        .iter()
        .map(|format| {
            format!(
                "{}{}{}",
                format.data_bytes,
                if format.metadata_bytes > 0 {
                    format!("+{}", format.metadata_bytes)
                } else {
                    String::new()
                },
                if format.in_use { "*" } else { "" }
            )
        })
        .collect();
    let formats = if formats.is_empty() {
        String::new()
    } else {
        format!("  formats {} (* in use)", formats.join(" "))
    };
    let facts = BlockFacts {
        path: &namespace.path,
        capacity_bytes: namespace.capacity_bytes,
        logical_block_bytes: namespace.logical_block_bytes,
        usage: &namespace.usage,
    };
    block_line(out, &facts, &formats);
}

/// What every block device line shows, namespace or not.
struct BlockFacts<'a> {
    path: &'a Path,
    capacity_bytes: u64,
    logical_block_bytes: u32,
    usage: &'a Option<nvrec::device::Usage>,
}

/// A block device's path, size and block size, then `extra`, then what uses it.
fn block_line(out: &mut String, facts: &BlockFacts<'_>, extra: &str) {
    let _ = writeln!(
        out,
        "    {}  {}  {}-byte blocks{extra}  {}",
        facts.path.display(),
        format_bytes(facts.capacity_bytes),
        facts.logical_block_bytes,
        usage_text(facts.usage, facts.path)
    );
}

pub fn health(args: HealthArgs, json: bool) -> Result<Class> {
    let metadata = std::fs::metadata(&args.device)
        .map_err(|error| UsageError(format!("{}: {error}", args.device.display())))?;
    use std::os::unix::fs::FileTypeExt;
    let kind = metadata.file_type();
    if !(kind.is_block_device() || kind.is_char_device()) {
        return Err(UsageError(format!(
            "{} is not a device; give an NVMe namespace such as /dev/nvme0n1 or a controller such as /dev/nvme0",
            args.device.display()
        ))
        .into());
    }
    // Only NVMe nodes are asked: other devices get what sysfs knows, without opening them.
    let result = if nvme::is_nvme_path(&args.device) {
        nvme::read_health(&args.device)
    } else {
        Err(NvmeError::NotNvme {
            path: args.device.display().to_string(),
            why: "not an NVMe node".to_string(),
        })
    };
    match result {
        Ok(report) => {
            if json {
                outln!("{}", serde_json::to_value(&report)?);
            } else {
                out!("{}", health_text(&report));
            }
            Ok(if report.smart.critical_warning != 0 {
                Class::Failed
            } else {
                Class::Done
            })
        }
        Err(NvmeError::NotNvme { path, .. }) => {
            let facts = other_device_facts(&args.device);
            let message = format!(
                "{path} is not an NVMe device{}; SMART data needs an NVMe controller",
                facts
                    .transport
                    .as_ref()
                    .map(|transport| format!(" ({transport})"))
                    .unwrap_or_default()
            );
            if json {
                let value = serde_json::json!({
                    "device": path,
                    "nvme": false,
                    "message": message,
                    "sysfs": facts,
                });
                outln!("{value}");
            } else {
                outln!("{message}");
                out!("{}", facts.text());
            }
            Ok(Class::Failed)
        }
        Err(error) => Err(error.into()),
    }
}

/// What sysfs and hwmon say about a device that is not NVMe.
#[derive(Debug, serde::Serialize)]
struct OtherFacts {
    name: Option<String>,
    transport: Option<String>,
    model: Option<String>,
    capacity_bytes: Option<u64>,
    logical_block_bytes: Option<u32>,
    rotational: Option<bool>,
    temperatures_celsius: Vec<(String, f64)>,
}

impl OtherFacts {
    fn text(&self) -> String {
        let mut out = String::new();
        if let Some(model) = &self.model {
            let _ = writeln!(out, "  model          {model}");
        }
        if let Some(capacity) = self.capacity_bytes {
            let _ = writeln!(out, "  capacity       {}", format_bytes(capacity));
        }
        if let Some(lbs) = self.logical_block_bytes {
            let _ = writeln!(out, "  block size     {lbs} bytes");
        }
        if let Some(rotational) = self.rotational {
            let _ = writeln!(
                out,
                "  rotational     {}",
                if rotational { "yes" } else { "no" }
            );
        }
        for (sensor, celsius) in &self.temperatures_celsius {
            let _ = writeln!(out, "  temperature    {celsius:.0} °C ({sensor})");
        }
        if self.temperatures_celsius.is_empty() {
            let _ = writeln!(out, "  temperature    no sensor in sysfs/hwmon");
        }
        out
    }
}

fn read(path: &Path) -> Option<String> {
    std::fs::read_to_string(path)
        .ok()
        .map(|text| text.trim().to_string())
        .filter(|text| !text.is_empty())
}

fn other_device_facts(path: &Path) -> OtherFacts {
    let name = path.canonicalize().ok().and_then(|path| {
        path.file_name()
            .map(|name| name.to_string_lossy().into_owned())
    });
    let dir = name
        .as_ref()
        .map(|name| Path::new("/sys/class/block").join(name));
    let get = |rel: &str| dir.as_ref().and_then(|dir| read(&dir.join(rel)));
    let transport = name.as_ref().map(|name| {
        let name = name.as_str();
        if name.starts_with("vd") {
            "virtio".to_string()
        } else if name.starts_with("zram") {
            "zram".to_string()
        } else if name.starts_with("mmcblk") {
            "MMC/SD".to_string()
        } else if name.starts_with("loop") {
            "loop".to_string()
        } else if name.starts_with("sd") {
            "SCSI/SATA".to_string()
        } else if name.starts_with("md") {
            "md RAID".to_string()
        } else if name.starts_with("dm-") {
            "device-mapper".to_string()
        } else {
            "block".to_string()
        }
    });
    let mut temperatures = Vec::new();
    if let Some(dir) = &dir {
        // drivetemp and similar expose hwmon under the device.
        for hwmon_root in [dir.join("device/hwmon"), dir.join("device")] {
            if let Ok(entries) = std::fs::read_dir(&hwmon_root) {
                for entry in entries.flatten() {
                    let hwmon = entry.path();
                    if !entry.file_name().to_string_lossy().starts_with("hwmon") {
                        continue;
                    }
                    if let Some(milli) =
                        read(&hwmon.join("temp1_input")).and_then(|t| t.parse::<f64>().ok())
                    {
                        temperatures.push((hwmon.display().to_string(), milli / 1000.0));
                    }
                }
            }
        }
    }
    OtherFacts {
        model: get("device/model"),
        capacity_bytes: get("size")
            .and_then(|s| s.parse::<u64>().ok())
            .map(|sectors| sectors * 512),
        logical_block_bytes: get("queue/logical_block_size").and_then(|s| s.parse().ok()),
        rotational: get("queue/rotational").map(|s| s == "1"),
        temperatures_celsius: temperatures,
        transport,
        name,
    }
}

fn health_text(report: &HealthReport) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "{} ({}): {}  serial {}  firmware {}",
        report.device,
        report.controller.as_deref().unwrap_or("?"),
        report.model,
        report.serial,
        report.firmware
    );
    let smart = &report.smart;
    let _ = writeln!(
        out,
        "  critical warning   {}",
        if smart.critical_warning == 0 {
            "none".to_string()
        } else {
            format!(
                "{:#04x}: {}",
                smart.critical_warning,
                report.critical_warning_text.join("; ")
            )
        }
    );
    temperature_lines(&mut out, report);
    usage_lines(&mut out, report);
    out
}

/// A temperature in kelvin as the health report shows it: 0 means the drive gave none.
fn celsius(kelvin: u16) -> String {
    if kelvin == 0 {
        "not reported".to_string()
    } else {
        format!("{:.0} °C ({kelvin} K)", kelvin_to_celsius(kelvin))
    }
}

/// The temperatures, their thresholds, the time above them and the throttling.
fn temperature_lines(out: &mut String, report: &HealthReport) {
    let smart = &report.smart;
    let _ = writeln!(
        out,
        "  temperature        {}",
        celsius(smart.composite_temperature_kelvin)
    );
    for sensor in &smart.temperature_sensors_kelvin {
        let _ = writeln!(
            out,
            "    sensor {}         {}",
            sensor.sensor,
            celsius(sensor.kelvin)
        );
    }
    let _ = writeln!(
        out,
        "  thresholds         warning {}, critical {}",
        celsius(report.warning_temperature_kelvin),
        celsius(report.critical_temperature_kelvin)
    );
    let _ = writeln!(
        out,
        "  time above them    warning {} min, critical {} min",
        smart.warning_temperature_time_minutes, smart.critical_temperature_time_minutes
    );
    let _ = writeln!(
        out,
        "  throttling         {} + {} transitions, {} s + {} s throttled (light + heavy)",
        smart.thermal_transition_count[0],
        smart.thermal_transition_count[1],
        smart.thermal_time_seconds[0],
        smart.thermal_time_seconds[1]
    );
}

/// Wear, the data moved, the commands, the power history and the errors.
fn usage_lines(out: &mut String, report: &HealthReport) {
    let smart = &report.smart;
    let _ = writeln!(
        out,
        "  wear               {} % used, spare {} % (threshold {} %)",
        smart.percentage_used,
        smart.available_spare_percent,
        smart.available_spare_threshold_percent
    );
    let _ = writeln!(
        out,
        "  data read          {} ({} data units)",
        bytes_decimal(smart.data_read_bytes),
        smart.data_units_read
    );
    let _ = writeln!(
        out,
        "  data written       {} ({} data units)",
        bytes_decimal(smart.data_written_bytes),
        smart.data_units_written
    );
    if let Some(media) = report.physical_media_written_bytes {
        let _ = writeln!(out, "  media written      {}", bytes_decimal(media));
    }
    let _ = writeln!(
        out,
        "  commands           {} reads, {} writes; busy {} min",
        smart.host_read_commands, smart.host_write_commands, smart.controller_busy_time_minutes
    );
    let _ = writeln!(
        out,
        "  power              {} hours on, {} cycles, {} unsafe shutdowns",
        smart.power_on_hours, smart.power_cycles, smart.unsafe_shutdowns
    );
    let _ = writeln!(
        out,
        "  errors             {} media errors, {} error log entries",
        smart.media_errors, smart.error_log_entries
    );
}

fn bytes_decimal(bytes: u64) -> String {
    let value = bytes as f64;
    if value >= 1e12 {
        format!("{:.2} TB", value / 1e12)
    } else if value >= 1e9 {
        format!("{:.2} GB", value / 1e9)
    } else {
        format!("{:.1} MB", value / 1e6)
    }
}
