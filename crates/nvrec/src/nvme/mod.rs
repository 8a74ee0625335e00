//! Knowing the drives: NVMe identify data, the SMART / health log, thermal throttling, PCIe
//! links, and what else is attached.
//!
//! - [`page`]: pure decoders of Identify Controller, Identify Namespace and the SMART log.
//! - [`admin`]: the admin passthrough ioctl that fetches them.
//! - [`discover`]: every NVMe controller and namespace and every other block device, from sysfs.
//! - [`monitor`]: a background sampler of the health log during long runs, with warnings
//!   when a drive starts throttling or crosses its warning temperature.
//! - [`read_health`] and [`HealthReport`]: one look at a drive, in the units people read.
//!
//! What it deliberately does not do: send any command that changes a drive (no Set Features,
//! no Format, no firmware), or read vendor-specific logs other than the OCP datacenter log's
//! physical media counter, which is used only after its GUID identifies it.

pub mod admin;
pub mod discover;
pub mod monitor;
pub mod page;

use admin::{Admin, AdminError, CNS_CONTROLLER, NSID_ALL};
use page::{
    decode_identify_controller, decode_smart_log, kelvin_to_celsius, DecodeError,
    IdentifyController, SmartLog, CRITICAL_WARNINGS, SMART_LOG_BYTES,
};
use std::path::{Path, PathBuf};

/// Log page identifiers.
pub const LOG_SMART: u8 = 0x02;
/// The OCP Datacenter NVMe SSD "SMART / Health Information Extended" log.
pub const LOG_OCP_SMART_EXTENDED: u8 = 0xc0;
/// GUID that identifies the OCP log (bytes 496-511, little-endian).
const OCP_SMART_EXTENDED_GUID: u128 = 0xafd5_14c9_7c6f_4f9c_a4f2_bfea_2810_afc5;

#[derive(Debug, thiserror::Error)]
pub enum NvmeError {
    #[error(transparent)]
    Admin(#[from] AdminError),
    #[error("decoding what {path} returned: {source}")]
    Decode { path: String, source: DecodeError },
    #[error("{path} is not an NVMe device ({why}); SMART data needs an NVMe controller")]
    NotNvme { path: String, why: String },
}

/// A SMART counter for JSON: 128-bit on the wire, 64-bit here (saturating; no drive comes
/// near 2^64 units).
fn counter(value: u128) -> u64 {
    u64::try_from(value).unwrap_or(u64::MAX)
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub struct SensorReading {
    pub sensor: u8,
    pub kelvin: u16,
}

/// The SMART log in the units and names `nvrec health --json` prints.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct SmartReport {
    pub critical_warning: u8,
    pub critical_warnings: Vec<&'static str>,
    pub composite_temperature_kelvin: u16,
    pub composite_temperature_celsius: f64,
    pub available_spare_percent: u8,
    pub available_spare_threshold_percent: u8,
    pub percentage_used: u8,
    pub data_units_read: u64,
    pub data_units_written: u64,
    pub data_read_bytes: u64,
    pub data_written_bytes: u64,
    pub host_read_commands: u64,
    pub host_write_commands: u64,
    pub controller_busy_time_minutes: u64,
    pub power_cycles: u64,
    pub power_on_hours: u64,
    pub unsafe_shutdowns: u64,
    pub media_errors: u64,
    pub error_log_entries: u64,
    pub warning_temperature_time_minutes: u32,
    pub critical_temperature_time_minutes: u32,
    pub temperature_sensors_kelvin: Vec<SensorReading>,
    pub thermal_transition_count: [u32; 2],
    pub thermal_time_seconds: [u32; 2],
}

impl SmartReport {
    pub fn new(log: &SmartLog) -> SmartReport {
        SmartReport {
            critical_warning: log.critical_warning,
            critical_warnings: log.critical_warning_names(),
            composite_temperature_kelvin: log.composite_temperature_kelvin,
            composite_temperature_celsius: kelvin_to_celsius(log.composite_temperature_kelvin),
            available_spare_percent: log.available_spare_percent,
            available_spare_threshold_percent: log.available_spare_threshold_percent,
            percentage_used: log.percentage_used,
            data_units_read: counter(log.data_units_read),
            data_units_written: counter(log.data_units_written),
            data_read_bytes: counter(log.data_read_bytes()),
            data_written_bytes: counter(log.data_written_bytes()),
            host_read_commands: counter(log.host_read_commands),
            host_write_commands: counter(log.host_write_commands),
            controller_busy_time_minutes: counter(log.controller_busy_time_minutes),
            power_cycles: counter(log.power_cycles),
            power_on_hours: counter(log.power_on_hours),
            unsafe_shutdowns: counter(log.unsafe_shutdowns),
            media_errors: counter(log.media_errors),
            error_log_entries: counter(log.error_log_entries),
            warning_temperature_time_minutes: log.warning_temperature_time_minutes,
            critical_temperature_time_minutes: log.critical_temperature_time_minutes,
            temperature_sensors_kelvin: log
                .temperature_sensors_kelvin
                .iter()
                .enumerate()
                .filter(|(_, kelvin)| **kelvin != 0)
                .map(|(index, kelvin)| SensorReading {
                    sensor: index as u8 + 1,
                    kelvin: *kelvin,
                })
                .collect(),
            thermal_transition_count: log.thermal_transition_count,
            thermal_time_seconds: log.thermal_time_seconds,
        }
    }
}

/// One look at a drive: who it is and how it is.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct HealthReport {
    pub device: String,
    /// The controller (`nvme0`) a namespace belongs to, from sysfs.
    pub controller: Option<String>,
    pub model: String,
    pub serial: String,
    pub firmware: String,
    /// Thresholds from Identify Controller (0 = not reported).
    pub warning_temperature_kelvin: u16,
    pub critical_temperature_kelvin: u16,
    pub smart: SmartReport,
    /// Bytes the media wrote (OCP log), where the drive exposes them.
    pub physical_media_written_bytes: Option<u64>,
    /// Explanations of the critical warning bits that are set.
    pub critical_warning_text: Vec<&'static str>,
}

/// The controller name (`nvme0`) of an NVMe controller node or namespace, from sysfs.
pub fn controller_name(path: &Path) -> Option<String> {
    let name = path
        .canonicalize()
        .ok()?
        .file_name()?
        .to_string_lossy()
        .into_owned();
    let rest = name.strip_prefix("nvme")?;
    let digits: String = rest.chars().take_while(|c| c.is_ascii_digit()).collect();
    if digits.is_empty() {
        return None;
    }
    if rest.len() == digits.len() {
        return Some(name);
    }
    let link = Path::new("/sys/class/block").join(&name).join("device");
    let linked = link
        .canonicalize()
        .ok()
        .and_then(|dir| {
            dir.file_name()
                .map(|file| file.to_string_lossy().into_owned())
        })
        .filter(|linked| {
            linked
                .strip_prefix("nvme")
                .is_some_and(|n| n.chars().all(|c| c.is_ascii_digit()))
        });
    // A namespace of a multipath subsystem links to the subsystem: name it by its number.
    Some(linked.unwrap_or(format!("nvme{digits}")))
}

/// Reads Identify Controller and the SMART log of `path` (a controller or a namespace).
pub fn read_health(path: &Path) -> Result<HealthReport, NvmeError> {
    let admin = Admin::open(path)?;
    let decode = |source| NvmeError::Decode {
        path: path.display().to_string(),
        source,
    };
    let identify: IdentifyController = match admin.identify(CNS_CONTROLLER, 0) {
        Ok(bytes) => decode_identify_controller(&bytes).map_err(decode)?,
        Err(error) if error.is_not_nvme() => {
            return Err(NvmeError::NotNvme {
                path: path.display().to_string(),
                why: error.to_string(),
            })
        }
        Err(error) => return Err(error.into()),
    };
    let log =
        decode_smart_log(&admin.log_page(LOG_SMART, NSID_ALL, SMART_LOG_BYTES)?).map_err(decode)?;
    let smart = SmartReport::new(&log);
    Ok(HealthReport {
        device: path.display().to_string(),
        controller: controller_name(path),
        model: identify.model,
        serial: identify.serial,
        firmware: identify.firmware,
        warning_temperature_kelvin: identify.warning_temperature_kelvin,
        critical_temperature_kelvin: identify.critical_temperature_kelvin,
        critical_warning_text: CRITICAL_WARNINGS
            .iter()
            .filter(|(bit, _, _)| log.critical_warning & (1 << bit) != 0)
            .map(|(_, _, text)| *text)
            .collect(),
        smart,
        physical_media_written_bytes: physical_media_written(&admin),
    })
}

/// Reads the SMART log alone (for sampling).
pub(crate) fn read_smart(admin: &Admin) -> Result<SmartLog, NvmeError> {
    let bytes = admin.log_page(LOG_SMART, NSID_ALL, SMART_LOG_BYTES)?;
    decode_smart_log(&bytes).map_err(|source| NvmeError::Decode {
        path: String::new(),
        source,
    })
}

/// Physical media units written from the OCP extended SMART log, when the drive has it.
pub(crate) fn physical_media_written(admin: &Admin) -> Option<u64> {
    let bytes = admin.log_page(LOG_OCP_SMART_EXTENDED, NSID_ALL, 512).ok()?;
    decode_ocp_physical_written(&bytes)
}

/// Bytes 0-15 of the OCP log count bytes written to the media; bytes 496-511 hold its GUID.
pub fn decode_ocp_physical_written(bytes: &[u8]) -> Option<u64> {
    if bytes.len() < 512 {
        return None;
    }
    let guid = u128::from_le_bytes(bytes[496..512].try_into().ok()?);
    if guid != OCP_SMART_EXTENDED_GUID {
        return None;
    }
    Some(counter(u128::from_le_bytes(bytes[0..16].try_into().ok()?)))
}

/// Whether `path` names an NVMe controller or namespace (by name, after symlinks).
pub fn is_nvme_path(path: &Path) -> bool {
    path.canonicalize()
        .ok()
        .and_then(|path| {
            path.file_name()
                .map(|name| name.to_string_lossy().starts_with("nvme"))
        })
        .unwrap_or(false)
}

/// Paths of the NVMe devices among `paths` (files and other devices left out).
pub fn nvme_paths(paths: &[PathBuf]) -> Vec<PathBuf> {
    paths
        .iter()
        .filter(|path| is_nvme_path(path))
        .cloned()
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_ocp_counter_is_used_only_under_its_guid() {
        let mut page = vec![0u8; 512];
        page[0..16].copy_from_slice(&(5u128 << 30).to_le_bytes());
        assert_eq!(decode_ocp_physical_written(&page), None);
        page[496..512].copy_from_slice(&OCP_SMART_EXTENDED_GUID.to_le_bytes());
        assert_eq!(decode_ocp_physical_written(&page), Some(5 << 30));
        assert_eq!(decode_ocp_physical_written(&page[..100]), None);
    }

    #[test]
    fn the_report_keeps_the_fixed_json_names() {
        let mut bytes = vec![0u8; SMART_LOG_BYTES];
        bytes[0] = 1;
        bytes[1..3].copy_from_slice(&323u16.to_le_bytes());
        bytes[202..204].copy_from_slice(&330u16.to_le_bytes());
        let report = SmartReport::new(&decode_smart_log(&bytes).unwrap());
        let value = serde_json::to_value(&report).unwrap();
        let keys: Vec<&str> = value
            .as_object()
            .unwrap()
            .keys()
            .map(String::as_str)
            .collect();
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
            assert!(keys.contains(&key), "{key} missing from {keys:?}");
        }
        assert_eq!(value["critical_warnings"][0], "available_spare");
        assert_eq!(value["temperature_sensors_kelvin"][0]["sensor"], 2);
        assert_eq!(value["temperature_sensors_kelvin"][0]["kelvin"], 330);
    }
}
